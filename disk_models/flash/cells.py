"""Flash cell types and the times of their array operations.

A NAND cell stores ``bits`` bits (SLC 1, MLC 2, TLC 3, QLC 4). The pages of a word line
share its cells, one page per bit: for TLC the lower (LSB), centre (CSB) and upper (MSB)
pages, read with 1, 2 and 4 read-reference voltages in the common 1-2-4 Gray coding, so
their read times differ (e.g. Micron's 3D TLC data sheets, and Cai et al., "Error
characterization, mitigation, and recovery in flash-memory-based solid-state drives",
Proc. IEEE 105(9), 2017, section 2). A preset gives ``read`` and ``program`` either as
one time for every page or as one time per page type, in LSB, CSB, MSB order.

A TLC or QLC block may run in SLC mode (one bit per cell: a drive's SLC write cache); it
then holds ``1/bits`` of the pages and uses ``slc_read`` and ``slc_program``.

``in_place`` media (3D XPoint) have no erase before write, no blocks to collect and no
page types: a write overwrites the cells where the data is (Intel, "Intel Optane SSD DC
P4800X Series" product brief, 2017: "no garbage collection"); the drive maps each
logical page to a fixed die and programs it there.

Page type of a mapping unit: the flash page ``p`` of a block (counting physical pages,
not mapping units) is of type ``p % bits`` (blksim's choice: the word lines' pages are
numbered LSB, CSB, MSB in turn, as in a shadow-free one-shot program order).
"""

from __future__ import annotations

from dataclasses import dataclass

from blksim.disk_models.base import DeviceError

#: Bits per cell of each cell type.
CELL_BITS = {"slc": 1, "mlc": 2, "tlc": 3, "qlc": 4, "xpoint": 1}


@dataclass(frozen=True)
class CellTimes:
    """The array times of one cell type, in seconds.

    ``read`` and ``program`` hold one time per page type (LSB first); ``erase`` is
    tBERS; ``slc_read``/``slc_program`` the times of a block in SLC mode (0: the cell
    type has no SLC mode in this drive); ``suspend``/``resume`` the latency of a program
    or erase suspension and of its resumption (used only when suspension is on).
    """

    kind: str
    read: tuple
    program: tuple
    erase: float
    slc_read: float = 0.0
    slc_program: float = 0.0
    suspend: float = 0.0
    resume: float = 0.0

    @property
    def bits(self) -> int:
        """Bits per cell (pages per word line)."""
        return CELL_BITS[self.kind]

    @property
    def in_place(self) -> bool:
        """True for media written in place (no erase, no garbage collection)."""
        return self.kind == "xpoint"

    def read_time(self, page: int, slc: bool) -> float:
        """tR of flash page ``page`` of its block (SLC mode: ``slc_read``)."""
        if slc:
            return self.slc_read
        times = self.read
        return times[page % len(times)]

    def program_time(self, page: int, slc: bool) -> float:
        """tPROG of flash page ``page`` of its block (SLC mode: ``slc_program``)."""
        if slc:
            return self.slc_program
        times = self.program
        return times[page % len(times)]

    def mean_read(self) -> float:
        """The mean tR over the page types (for the analytic figures tests use)."""
        return sum(self.read) / len(self.read)


def _times(table: dict, key: str, where: str, bits: int) -> tuple:
    value = table.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        values = (value,)
    elif isinstance(value, list) and value and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        values = tuple(value)
    else:
        raise DeviceError(f"{where}: {key} expected a time in microseconds or a list of one "
                          f"per page type, found {value!r}")
    if len(values) not in (1, bits):
        raise DeviceError(f"{where}: {key} expected 1 or {bits} values (one per page type), "
                          f"found {len(values)}")
    if any(v <= 0 for v in values):
        raise DeviceError(f"{where}: {key} expected positive times, found {value!r}")
    return tuple(v * 1e-6 for v in values)


def _us(table: dict, key: str, where: str, default: float | None) -> float:
    value = table.get(key, default)
    if value is None:
        raise DeviceError(f"{where}: {key} is required (microseconds)")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise DeviceError(f"{where}: {key} expected microseconds, at least 0, found {value!r}")
    return value * 1e-6


def cell_times(table: dict, where: str) -> CellTimes:
    """The ``[nand]`` table of a flash preset as `CellTimes` (times in microseconds:
    ``read_us``, ``program_us``, ``erase_us``, ``slc_read_us``, ``slc_program_us``,
    ``suspend_us``, ``resume_us``); ``where`` names the table in messages."""
    kind = table.get("cell")
    if kind not in CELL_BITS:
        raise DeviceError(f"{where}: cell expected one of {', '.join(CELL_BITS)}, "
                          f"found {kind!r}")
    bits = CELL_BITS[kind]
    read = _times(table, "read_us", where, bits)
    program = _times(table, "program_us", where, bits)
    erase = _us(table, "erase_us", where, 0.0 if kind == "xpoint" else None)
    slc_read = _us(table, "slc_read_us", where, 0.0)
    slc_program = _us(table, "slc_program_us", where, 0.0)
    return CellTimes(kind, read, program, erase, slc_read, slc_program,
                     _us(table, "suspend_us", where, 0.0), _us(table, "resume_us", where, 0.0))
