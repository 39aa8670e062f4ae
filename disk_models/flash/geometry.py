"""The physical layout of a flash drive: channels, chips, dies, planes, blocks, pages.

A flash drive's back end is ``channels`` buses, each shared by ``chips_per_channel``
packages ("ways"); a chip holds ``dies_per_chip`` dies (each runs one array operation
at a time), a die ``planes_per_die`` planes (multi-plane operations run one page per
plane together), a plane ``blocks_per_plane`` erase blocks of ``pages_per_block``
pages of ``page_bytes`` each (the ONFI 4.x specification, section 2, describes the
hierarchy; the numbers come from a drive's data sheet or a preset).

Everything is numbered globally, lowest unit fastest inside the next one up::

    block b  -> plane  b // blocks_per_plane
    plane p  -> die    p // planes_per_die
    die d    -> chip   d // dies_per_chip
    chip c   -> channel c // chips_per_channel
    ppn      =  b * pages_per_block + page         (physical page number)

so the blocks of one plane are contiguous, the planes of one die, and so on
(blksim's choice: one integer names every unit, and arrays indexed by it are flat).

Over-provisioning follows MQSim (Tavakkol et al., FAST 2018;
``src/ssd/Address_Mapping_Unit_Base.cpp``: logical pages = physical pages x
(1 - Overprovisioning_Ratio)) and the "spare factor" of Desnoyers (SYSTOR 2012,
"Analytic modeling of SSD write performance", S_f = (T - U) / T): the fraction of
the PHYSICAL pages the host cannot address. The marketing figure "7 %" that
vendors quote is instead (physical - user) / user; 7 % of user space is 6.5 % of
physical space.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from blksim.disk_models.base import DeviceError

#: The largest over-provisioning accepted, a fraction of the physical space (issue 32:
#: "over-provisioning of 0 or above 50 %" is refused).
MAX_OVER_PROVISIONING = 0.5


@dataclass(frozen=True)
class FlashGeometry:
    """The units of a flash back end, each count per unit above it.

    Derived: `chips`, `dies`, `planes`, `blocks`, `pages` (totals over the drive) and
    `physical_bytes`. Call `validate` before use when the numbers come from a user.
    """

    channels: int
    chips_per_channel: int
    dies_per_chip: int
    planes_per_die: int
    blocks_per_plane: int
    pages_per_block: int
    page_bytes: int

    # -- totals ---------------------------------------------------------------------
    @property
    def chips(self) -> int:
        """Chips (packages) on the drive."""
        return self.channels * self.chips_per_channel

    @property
    def dies(self) -> int:
        """Dies on the drive: the units that run array operations in parallel."""
        return self.chips * self.dies_per_chip

    @property
    def planes(self) -> int:
        """Planes on the drive."""
        return self.dies * self.planes_per_die

    @property
    def blocks(self) -> int:
        """Erase blocks on the drive."""
        return self.planes * self.blocks_per_plane

    @property
    def pages(self) -> int:
        """Physical pages on the drive."""
        return self.blocks * self.pages_per_block

    @property
    def pages_per_plane(self) -> int:
        """Physical pages in one plane."""
        return self.blocks_per_plane * self.pages_per_block

    @property
    def physical_bytes(self) -> int:
        """Raw capacity: every page of every block."""
        return self.pages * self.page_bytes

    @property
    def sectors_per_page(self) -> int:
        """512-byte sectors in one flash page."""
        return self.page_bytes // 512

    # -- where a unit lives ---------------------------------------------------------
    def block_of(self, ppn: int) -> int:
        """The erase block holding physical page ``ppn``."""
        return ppn // self.pages_per_block

    def plane_of(self, ppn: int) -> int:
        """The plane holding physical page ``ppn``."""
        return ppn // self.pages_per_plane

    def plane_of_block(self, block: int) -> int:
        """The plane holding erase block ``block``."""
        return block // self.blocks_per_plane

    def die_of(self, ppn: int) -> int:
        """The die holding physical page ``ppn``."""
        return ppn // (self.pages_per_plane * self.planes_per_die)

    def die_of_plane(self, plane: int) -> int:
        """The die holding plane ``plane``."""
        return plane // self.planes_per_die

    def chip_of_die(self, die: int) -> int:
        """The chip (package) holding die ``die``."""
        return die // self.dies_per_chip

    def channel_of_die(self, die: int) -> int:
        """The channel the die's chip hangs on."""
        return die // (self.dies_per_chip * self.chips_per_channel)

    def first_block_of_plane(self, plane: int) -> int:
        """The lowest block number of plane ``plane`` (its blocks are contiguous)."""
        return plane * self.blocks_per_plane

    def cwdp_planes(self) -> list[int]:
        """The planes in CWDP striping order: entry ``i`` is the plane that logical page
        ``i`` (and every ``i + k * planes``) goes to.

        CWDP = channel first, then way (chip on the channel), die, plane: consecutive
        logical pages go to consecutive channels, and only after every channel to the
        next chip of each (MQSim's default ``Plane_Allocation_Scheme``, CWDP, in
        ``src/ssd/Address_Mapping_Unit_Page_Level.cpp``, Tavakkol et al., FAST 2018).
        """
        out = []
        per_channel = self.chips_per_channel
        for i in range(self.planes):
            channel = i % self.channels
            chip = (i // self.channels) % per_channel
            die = (i // (self.channels * per_channel)) % self.dies_per_chip
            plane = i // (self.channels * per_channel * self.dies_per_chip)
            global_chip = channel * per_channel + chip
            out.append((global_chip * self.dies_per_chip + die) * self.planes_per_die + plane)
        return out

    # -- checks ---------------------------------------------------------------------
    def validate(self, where: str) -> None:
        """Raise `DeviceError`, one line naming ``where`` and the key, for an
        impossible geometry: a count that is not a positive integer, or a page that is
        not a whole number of 512-byte sectors."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DeviceError(f"{where}: {f.name} must be a positive integer, "
                                  f"found {value!r}")
        if self.page_bytes % 512:
            raise DeviceError(f"{where}: page_bytes must be a multiple of 512, "
                              f"found {self.page_bytes!r}")
        if self.blocks_per_plane < 4:
            # an open block, a GC destination, a victim and one free block at least
            raise DeviceError(f"{where}: blocks_per_plane must be at least 4, "
                              f"found {self.blocks_per_plane!r}")

    def describe(self) -> dict:
        """The geometry as a plain dict, for reports."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(dies=self.dies, planes=self.planes, blocks=self.blocks,
                   physical_bytes=self.physical_bytes)
        return out


def logical_pages(geometry: FlashGeometry, over_provisioning: float, where: str) -> int:
    """The pages the host can address: ``physical pages x (1 - over_provisioning)``.

    ``over_provisioning`` is the spare fraction of the PHYSICAL space, (physical -
    user) / physical, as MQSim's ``Overprovisioning_Ratio`` and Desnoyers' spare
    factor S_f (see the module docstring). It must lie in (0, 0.5]; otherwise a
    `DeviceError` naming ``over_provisioning``.
    """
    op = over_provisioning
    if isinstance(op, bool) or not isinstance(op, (int, float)) or not (
            0 < op <= MAX_OVER_PROVISIONING):
        raise DeviceError(f"{where}: over_provisioning must be above 0 and at most "
                          f"{MAX_OVER_PROVISIONING:g} (a fraction of the physical space), "
                          f"found {op!r}")
    n = int(geometry.pages * (1.0 - op))
    if n < 1:
        raise DeviceError(f"{where}: over_provisioning {op!r} leaves no logical page")
    return n
