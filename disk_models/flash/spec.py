"""A flash drive's description, resolved: the preset's values with the ``[device]`` keys
over them, checked (`build_spec`), as one `FlashSpec` the drive is built from.

The preset file (`blksim.disk_models.flash_presets`) has top-level keys (the drive, its
interface and controller), a ``[geometry]`` table (the flash array: channels,
chips_per_channel, dies_per_chip, planes_per_die, blocks_per_plane, pages_per_block,
page_bytes, the *flash* page), a ``[nand]`` table (`blksim.disk_models.flash.cells`:
cell type, times in microseconds, the channel's ``channel_mts`` and ``command_us``) and
a ``[datasheet]`` table (the product's published figures, kept to judge the model:
never read by it).

Capacity: the preset's ``capacity`` (bytes the host sees) must fit in the geometry's
raw bytes; the over-provisioning is then 1 - capacity / raw (a fraction of the physical
space, as `blksim.disk_models.flash.geometry.logical_pages`). A ``[device]
over_provisioning`` or ``blocks_per_plane`` changes the drive: its capacity becomes the
logical pages that over-provisioning leaves of the geometry.

Mapping unit: the FTL maps ``mapping_unit`` bytes (4 KiB: one 32-bit entry per 4 KiB,
the "1 GB of DRAM per 1 TB" of DRAM-equipped drives, e.g. Samsung 980 PRO data sheet,
1 GB LPDDR4 for 1 TB); a flash page holds ``page_bytes / mapping_unit`` of them. The FTL
sees a geometry whose page is the mapping unit (pages_per_block multiplied to match).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash.cells import CellTimes, cell_times
from blksim.disk_models.flash.geometry import FlashGeometry, logical_pages
from blksim.disk_models.flash.host_interface import (LINUX_IO_QUEUE_DEPTH, NCQ_TAGS,
                                                     NVME_MAX_ENTRIES, NVME_MAX_IO_QUEUES,
                                                     PCIE_GENS, SQ_CLASSES)

#: Keys a preset file may have at its top level, and in its tables.
PRESET_KEYS = ("name", "description", "source", "interface", "pcie_gen", "pcie_lanes",
               "max_io_queues", "max_queue_entries", "capacity", "write_buffer", "plp",
               "slc_cache", "fw_read_us", "fw_write_us", "command_fetch_us", "mapping_unit",
               "arbitration", "arbitration_burst", "sq_priority", "wrr_weights",
               "multi_plane", "copyback", "suspend", "gc_policy", "allocation",
               "mapping_cache", "start_state", "geometry", "nand", "datasheet")
NAND_KEYS = ("cell", "read_us", "program_us", "erase_us", "slc_read_us", "slc_program_us",
             "suspend_us", "resume_us", "channel_mts", "command_us")
INTERFACES = ("nvme", "sata")
START_STATES = ("fresh", "full", "steady")
GEOMETRY_KEYS = ("channels", "chips_per_channel", "dies_per_chip", "planes_per_die",
                 "blocks_per_plane", "pages_per_block", "page_bytes")


@dataclass
class FlashSpec:
    """Everything the drive is built from, every default filled in (times in seconds,
    sizes in bytes unless named ``_units``: mapping units)."""

    name: str
    description: str
    geometry: FlashGeometry            # the FTL's: its page is the mapping unit
    flash_geometry: FlashGeometry      # the array's: its page is the flash page
    cells: CellTimes
    units_per_page: int
    capacity_sectors: int
    logical_pages: int
    over_provisioning: float
    interface: str
    hw_queues: int
    max_io_queues: int
    queue_entries: int
    arbitration: str = "rr"
    arbitration_burst: int = 1
    sq_priority: tuple = ("medium",)
    wrr_weights: tuple = (1, 1, 1)
    fetch_s: float = 0.0
    pcie_gen: int = 4
    pcie_lanes: int = 4
    fw_read_s: float = 0.0
    fw_write_s: float = 0.0
    buffer_units: int = 0
    plp: bool = False
    channel_mts: float = 800.0
    command_s: float = 0.0
    multi_plane: bool = True
    copyback: bool = True
    suspend: bool = False
    gc_policy: str = "greedy"
    allocation: str = "cwdp"
    slc_cache_blocks: int = 0          # per plane
    mapping_cache_bytes: int = 0       # 0: the whole table in DRAM
    start_state: str = "fresh"
    datasheet: dict = field(default_factory=dict)

    @property
    def queue_depth(self) -> int:
        """Commands per hardware queue: NVMe entries - 1 (a full SQ keeps one slot
        empty), SATA's 32 NCQ tags."""
        return NCQ_TAGS if self.interface == "sata" else self.queue_entries - 1


def _int(table: dict, key: str, where: str, lo: int, hi: int, default=None) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise DeviceError(f"{where}: {key} expected a whole number from {lo} to {hi}, "
                          f"found {value!r}")
    return value


def _bool(table: dict, key: str, where: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise DeviceError(f"{where}: {key} expected true or false, found {value!r}")
    return value


def _bytes(table: dict, key: str, where: str, default=0) -> int:
    from blksim.common.units import parse_size
    try:
        value = parse_size(table.get(key, default), key)
    except ValueError as exc:
        raise DeviceError(f"{where}: {exc}") from None
    if value < 0:
        raise DeviceError(f"{where}: {key} must not be negative, found {value!r}")
    return value


def _seconds(table: dict, key: str, where: str, default_us: float) -> float:
    """A time given as microseconds in a preset (``KEY_us``) or with units in [device]."""
    from blksim.common.units import parse_time
    if key in table:
        try:
            value = parse_time(table[key], key, "s")
        except ValueError as exc:
            raise DeviceError(f"{where}: {exc}") from None
    else:
        us = table.get(key + "_us", default_us)
        if isinstance(us, bool) or not isinstance(us, (int, float)):
            raise DeviceError(f"{where}: {key}_us expected microseconds, found {us!r}")
        value = us * 1e-6
    if value < 0:
        raise DeviceError(f"{where}: {key} must not be negative, found {value!r}")
    return value


def _choice(table: dict, key: str, where: str, valid: tuple, default: str) -> str:
    value = table.get(key, default)
    if value not in valid:
        raise DeviceError(f"{where}: {key} expected one of {', '.join(valid)}, "
                          f"found {value!r}")
    return value


def build_spec(preset: dict, tuning: dict, where: str, preset_where: str) -> FlashSpec:
    """The `FlashSpec` of a preset table with the ``[device]`` tuning keys over it.

    ``where`` names the ``[device]`` table, ``preset_where`` the preset file, in
    messages (one line, naming the key)."""
    for table, keys, name in ((preset, PRESET_KEYS, ""),
                              (preset.get("geometry", {}), GEOMETRY_KEYS, "[geometry] "),
                              (preset.get("nand", {}), NAND_KEYS, "[nand] ")):
        for key in table:
            if key not in keys:
                raise DeviceError(f"{preset_where}: {name}unknown key {key!r}; valid keys: "
                                  f"{', '.join(keys)}")
    t = {**{k: v for k, v in preset.items() if not isinstance(v, dict)}, **tuning}
    w = lambda key: where if key in tuning else preset_where   # noqa: E731
    g_table = dict(preset.get("geometry", {}))
    if "blocks_per_plane" in tuning:
        g_table["blocks_per_plane"] = tuning["blocks_per_plane"]
    missing = [k for k in GEOMETRY_KEYS if k not in g_table]
    if missing:
        raise DeviceError(f"{preset_where}: [geometry] {missing[0]} is required")
    flash = FlashGeometry(**{k: g_table[k] for k in GEOMETRY_KEYS})
    flash.validate(w("blocks_per_plane") if "blocks_per_plane" in tuning
                   else f"{preset_where}: [geometry]")
    cells = cell_times(preset.get("nand", {}), f"{preset_where}: [nand]")
    unit = _bytes(t, "mapping_unit", w("mapping_unit"), 4096)
    if cells.in_place:
        unit = flash.page_bytes
    if unit < 512 or unit % 512 or flash.page_bytes % unit:
        raise DeviceError(f"{w('mapping_unit')}: mapping_unit expected a multiple of 512 "
                          f"bytes dividing the flash page ({flash.page_bytes}), "
                          f"found {unit!r}")
    upp = flash.page_bytes // unit
    geometry = replace(flash, page_bytes=unit, pages_per_block=flash.pages_per_block * upp)

    # capacity and over-provisioning
    if "over_provisioning" in tuning or "blocks_per_plane" in tuning:
        op = t.get("over_provisioning", preset.get("over_provisioning"))
        if op is None:           # the preset's own: its capacity over its raw bytes
            raw = FlashGeometry(**{k: preset["geometry"][k] for k in GEOMETRY_KEYS})
            op = 1 - _bytes(preset, "capacity", preset_where) / raw.physical_bytes
        lp = logical_pages(geometry, op, w("over_provisioning"))
    else:
        capacity = _bytes(preset, "capacity", preset_where)
        if capacity <= 0 or capacity % 512:
            raise DeviceError(f"{preset_where}: capacity expected a positive multiple of "
                              f"512 bytes, found {preset.get('capacity')!r}")
        if capacity > flash.physical_bytes:
            raise DeviceError(f"{preset_where}: capacity {capacity} bytes does not fit the "
                              f"geometry's {flash.physical_bytes} raw bytes ([geometry] "
                              f"channels x chips_per_channel x dies_per_chip x planes_per_die"
                              f" x blocks_per_plane x pages_per_block x page_bytes)")
        lp = -(-capacity // unit)
        op = 1 - lp / geometry.pages
        logical_pages(geometry, op, preset_where)        # the same bounds
    capacity_sectors = lp * unit // 512
    if cells.in_place:
        op = 0.0

    interface = _choice(t, "interface", w("interface"), INTERFACES, "nvme")
    max_q = _int(preset, "max_io_queues", preset_where, 1, NVME_MAX_IO_QUEUES, 1)
    if interface == "sata":
        for key in ("io_queues", "queue_entries", "arbitration", "arbitration_burst",
                    "sq_priority", "wrr_weights", "pcie_gen", "pcie_lanes",
                    "command_fetch"):
            if key in tuning:
                raise DeviceError(f"{where}: {key} is an NVMe drive's; this drive's "
                                  f"interface is sata (one NCQ queue of {NCQ_TAGS} tags)")
        hw_queues, entries = 1, NCQ_TAGS + 1
    else:
        asked = _int(t, "io_queues", w("io_queues"), 1, NVME_MAX_IO_QUEUES, max_q)
        hw_queues = min(asked, max_q)
        max_entries = _int(preset, "max_queue_entries", preset_where, 2, NVME_MAX_ENTRIES,
                           LINUX_IO_QUEUE_DEPTH)
        entries = min(max_entries, _int(t, "queue_entries", w("queue_entries"), 2,
                                        NVME_MAX_ENTRIES, LINUX_IO_QUEUE_DEPTH))
    arbitration = _choice(t, "arbitration", w("arbitration"), ("rr", "wrr"), "rr")
    burst = _int(t, "arbitration_burst", w("arbitration_burst"), 1, 65536, 1)
    prio = t.get("sq_priority", ["medium"])
    if isinstance(prio, str):
        prio = [prio]
    if not isinstance(prio, list) or not prio or any(p not in SQ_CLASSES for p in prio):
        raise DeviceError(f"{w('sq_priority')}: sq_priority expected a list of "
                          f"{', '.join(SQ_CLASSES)} (one per SQ, repeated), found {prio!r}")
    weights = t.get("wrr_weights", [1, 1, 1])
    if not isinstance(weights, list) or len(weights) != 3 or any(
            isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= 256
            for x in weights):
        raise DeviceError(f"{w('wrr_weights')}: wrr_weights expected [high, medium, low] "
                          f"commands per turn, each 1 to 256, found {weights!r}")
    gen = _int(t, "pcie_gen", w("pcie_gen"), 1, max(PCIE_GENS), 4)
    lanes = t.get("pcie_lanes", 4)
    if lanes not in (1, 2, 4, 8, 16):
        raise DeviceError(f"{w('pcie_lanes')}: pcie_lanes expected 1, 2, 4, 8 or 16, "
                          f"found {lanes!r}")

    buffer_bytes = _bytes(t, "write_buffer", w("write_buffer"), 0)
    slc = _bytes(t, "slc_cache", w("slc_cache"), 0)
    if "blocks_per_plane" in tuning and "slc_cache" not in tuning:
        # a smaller build of the drive: the preset's cache, the same share of the flash
        slc = slc * flash.blocks_per_plane // preset["geometry"]["blocks_per_plane"]
    slc_blocks = 0
    if slc:
        if cells.bits == 1 or not cells.slc_program:
            raise DeviceError(f"{w('slc_cache')}: slc_cache needs a multi-bit cell with "
                              f"[nand] slc_program_us and slc_read_us")
        per_block = geometry.pages_per_block // cells.bits * unit
        slc_blocks = -(-slc // (per_block * geometry.planes))
        if slc_blocks > geometry.blocks_per_plane // 4:
            raise DeviceError(f"{w('slc_cache')}: slc_cache {slc} bytes needs "
                              f"{slc_blocks} blocks per plane, more than a quarter of "
                              f"blocks_per_plane ({geometry.blocks_per_plane})")
    mts = t.get("channel_mts", preset.get("nand", {}).get("channel_mts", 800))
    if isinstance(mts, bool) or not isinstance(mts, (int, float)) or mts <= 0:
        raise DeviceError(f"{w('channel_mts')}: channel_mts expected a positive rate, "
                          f"found {mts!r}")
    return FlashSpec(
        name=str(preset.get("name", "flash")),
        description=str(preset.get("description", "")),
        geometry=geometry, flash_geometry=flash, cells=cells, units_per_page=upp,
        capacity_sectors=capacity_sectors, logical_pages=lp, over_provisioning=round(op, 6),
        interface=interface, hw_queues=hw_queues, max_io_queues=max_q,
        queue_entries=entries, arbitration=arbitration, arbitration_burst=burst,
        sq_priority=tuple(prio), wrr_weights=tuple(weights),
        fetch_s=_seconds(t, "command_fetch", w("command_fetch"), 0.0),
        pcie_gen=gen, pcie_lanes=lanes,
        fw_read_s=_seconds(t, "fw_read", w("fw_read"), 0.0),
        fw_write_s=_seconds(t, "fw_write", w("fw_write"), 0.0),
        buffer_units=buffer_bytes // unit,
        plp=_bool(t, "plp", w("plp"), False),
        channel_mts=float(mts),
        command_s=_seconds(preset.get("nand", {}), "command", preset_where, 0.0),
        multi_plane=_bool(t, "multi_plane", w("multi_plane"), True),
        copyback=_bool(t, "copyback", w("copyback"), True),
        suspend=_bool(t, "suspend", w("suspend"), False),
        gc_policy=_choice(t, "gc_policy", w("gc_policy"), ("greedy", "cost_benefit"),
                          "greedy"),
        allocation=_choice(t, "allocation", w("allocation"), ("cwdp", "dynamic"), "cwdp"),
        slc_cache_blocks=slc_blocks,
        mapping_cache_bytes=_bytes(t, "mapping_cache", w("mapping_cache"), 0),
        start_state=_choice(t, "start_state", w("start_state"), START_STATES, "fresh"),
        datasheet=dict(preset.get("datasheet", {})))
