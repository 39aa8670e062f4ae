"""The storage a run simulates: block devices, their partitions and device-mapper volumes,
as a configuration file describes them.

A run has the disk ``sda`` (``[device]`` and ``[queue]``, or ``[devices.sda]``) and any
number of other disks, each a table of its own with the keys of ``[device]`` and a
``queue`` sub-table with the keys of ``[queue]``::

    [devices.sdb]
    drive = "cheetah9lp"
    queue_depth = 8
    [devices.sdb.queue]
    scheduler = "cfq"

A disk may be cut into partitions, ``[[devices.sdb.partition]]`` with ``start`` and
``size`` in bytes (fio's units), named ``sdb1``, ``sdb2``, ... in order. The first
starts by default at sector 63 (the DOS label of the 2.6 era), every next one right after
the previous; the last one's size defaults to the rest of the disk.

``[volumes."vg0/data"]`` builds a device-mapper volume as LVM2's ``lvcreate`` does:
``type = "linear"`` concatenates the physical volumes in ``devices`` (disks or
partitions), ``type = "striped"`` deals ``stripe_size`` chunks round robin over them
(``lvcreate -i N -I SIZE``); physical extents of ``extent_size`` (4 MiB) start
``pe_start`` (192 KiB) into each physical volume; ``size`` takes the first extents (default:
all of them). ``table`` instead gives the ``dmsetup table`` lines themselves. Volumes are
``dm-0``, ``dm-1``, ... in order; a job names one as ``/dev/vg0/data``,
``/dev/mapper/vg0-data`` or ``dm-0``.

Devices are numbered as Linux 2.6 numbers them: SCSI disks 16 minors apart on major 8
(then 65-71), partitions on the minors after their disk's, dm devices on major 253.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from blksim.sim.config_values import ConfigError, check_keys, int_value

#: The disk every run has; jobs and traces without a ``filename`` use it.
PRIMARY = "sda"

#: First sector of the first partition by default: a DOS label of the 2.6 era put it
#: on the second track of 63 sectors.
FIRST_PARTITION_SECTOR = 63
#: lvcreate's defaults in LVM2 2.02 (RHEL 5): 4 MiB extents, data 192 KiB into each PV,
#: 64 KiB stripes.
DEFAULT_EXTENT = 4 << 20
DEFAULT_PE_START = 192 << 10
DEFAULT_STRIPE = 64 << 10

PARTITION_KEYS = {
    "start": "first byte of the partition (fio units, a multiple of 512; default: sector 63 "
             "for the first, right after the previous one for the others)",
    "size": "bytes (fio units, a multiple of 512; default for the last: the rest of the disk)",
}
VOLUME_KEYS = {
    "type": "linear (concatenation) or striped",
    "devices": "the physical volumes, disks or partitions, e.g. [\"/dev/sdb1\", \"/dev/sdc\"]",
    "stripe_size": "striped: bytes per stripe chunk, a power of two from 4k (default 64k)",
    "size": "bytes the volume takes (default: every extent of its devices)",
    "extent_size": "LVM physical extent size (default 4m)",
    "pe_start": "where the extents start in each physical volume (default 192k)",
    "table": "instead of type/devices: the volume's dmsetup table, one target a line",
}

_DISK_NAME = re.compile(r"[a-z]+\Z")


@dataclass
class PartitionConfig:
    """A partition ``name`` of a disk: ``sectors`` sectors from ``start``."""

    name: str
    start: int
    sectors: int


@dataclass
class DeviceConfig:
    """One disk: its drive (or service-law device), queue depth, request queue settings,
    elevator and partitions."""

    name: str
    drive: str
    queue_depth: int | None
    service: str | None
    service_time: float
    capacity_sectors: int | None
    scheduler: str
    nr_requests: int
    max_sectors_kb: int
    max_hw_sectors_kb: int
    nomerges: int
    iosched: dict
    sectors: int = 0
    partitions: list = field(default_factory=list)


@dataclass
class VolumeConfig:
    """A device-mapper volume: its name as given, its dm name and its table text."""

    name: str
    dm_name: str
    table: str
    sectors: int
    members: tuple = ()


def disk_numbers(index: int) -> tuple[int, int]:
    """(major, minor) of the ``index``-th SCSI disk (sd.c: 16 minors a disk; majors 8,
    then 65-71, then 128-135)."""
    if index < 16:
        return 8, 16 * index
    index -= 16
    majors = (*range(65, 72), *range(128, 136))
    if index // 16 >= len(majors):
        raise ConfigError(f"more than {16 + 16 * len(majors)} disks")
    return majors[index // 16], 16 * (index % 16)


def check_disk_name(name: str, where: str) -> None:
    """A disk's name: lower-case letters (``sdb``), so its partitions can be ``sdb1``..."""
    if not isinstance(name, str) or not _DISK_NAME.match(name) or name == "dm":
        raise ConfigError(f"{where}: a disk's name expected lower-case letters such as "
                          f"\"sdb\" (its partitions are sdb1, sdb2, ...), found {name!r}")


def partitions(tables, disk: str, disk_sectors: int, where: str) -> list:
    """The ``[[devices.NAME.partition]]`` tables of a disk as `PartitionConfig`\\ s."""
    from blksim.traces.units import parse_size
    if not isinstance(tables, list):
        raise ConfigError(f"{where}: partition must be an array of tables "
                          f"([[devices.{disk}.partition]])")
    if len(tables) > 15:
        raise ConfigError(f"{where}: {len(tables)} partitions; a SCSI disk has minors for 15")
    out = []
    next_start = FIRST_PARTITION_SECTOR
    for i, table in enumerate(tables):
        name = f"{disk}{i + 1}"
        here = f"{where}: partition #{i + 1} ({name})"
        check_keys(table, PARTITION_KEYS, here)

        def sectors_of(key):
            try:
                value = parse_size(table[key], key)
            except ValueError as exc:
                raise ConfigError(f"{here}: {exc}") from None
            if value % 512:
                raise ConfigError(f"{here}: {key} expected a multiple of 512 bytes, found "
                                  f"{table[key]!r}")
            return value // 512

        start = sectors_of("start") if "start" in table else next_start
        if i and start < next_start:
            raise ConfigError(f"{here}: start = {table['start']!r} (sector {start}) overlaps "
                              f"the previous partition, which ends at sector {next_start}")
        if start < 1:
            raise ConfigError(f"{here}: start must be after sector 0, which holds the "
                              f"partition table")
        if "size" in table:
            size = sectors_of("size")
            if size < 1:
                raise ConfigError(f"{here}: size must be at least 512 bytes")
        elif i == len(tables) - 1:
            size = disk_sectors - start
        else:
            raise ConfigError(f"{here}: size is required (only the last partition may take "
                              f"the rest of the disk)")
        if start + size > disk_sectors or size < 1:
            raise ConfigError(f"{here}: sectors {start} to {start + size} do not fit on "
                              f"{disk} ({disk_sectors} sectors)")
        out.append(PartitionConfig(name, start, size))
        next_start = start + size
    return out


def device_aliases(name: str) -> list[str]:
    """The names a job may give a disk or partition: ``sdb``, ``/dev/sdb``."""
    return [name, f"/dev/{name}"]


def volume_aliases(name: str, dm_name: str) -> list[str]:
    """The names of a volume: as configured, its /dev path, its mapper name, dm-N."""
    out = [name, f"/dev/{name}", dm_name, f"/dev/{dm_name}"]
    if "/" in name:
        vg, lv = name.split("/", 1)
        out.append(f"/dev/mapper/{vg.replace('-', '--')}-{lv.replace('-', '--')}")
    else:
        out.append(f"/dev/mapper/{name}")
    return out


def volumes(tables, block_sizes: dict, aliases: dict, source: str) -> list:
    """The ``[volumes.NAME]`` tables as `VolumeConfig`\\ s with their dmsetup tables.

    ``block_sizes``: sectors of every disk and partition by name; ``aliases``: every
    name a device may be given as -> its name. A device may belong to one volume."""
    from blksim.sim.devmapper import DmTableError, parse_dm_table
    if not isinstance(tables, dict):
        raise ConfigError(f"{source}: volumes must be a table of volumes ([volumes.NAME])")
    out = []
    owner: dict[str, str] = {}
    for index, (name, table) in enumerate(tables.items()):
        where = f"{source}: [volumes.{name!r}]" if "/" in name else f"{source}: [volumes.{name}]"
        if not re.fullmatch(r"[A-Za-z0-9+_.-]+(/[A-Za-z0-9+_.-]+)?", name):
            raise ConfigError(f"{where}: a volume's name expected NAME or VG/LV (letters, "
                              f"digits, + _ . -), found {name!r}")
        check_keys(table, VOLUME_KEYS, where)
        dm_name = f"dm-{index}"
        if "table" in table:
            extra = [k for k in table if k != "table"]
            if extra:
                raise ConfigError(f"{where}: give either table or {extra[0]}, not both")
            text = table["table"]
            if not isinstance(text, str):
                raise ConfigError(f"{where}: table expected dmsetup table text, found {text!r}")
        else:
            text = _lvm_table(table, block_sizes, aliases, where)
        try:
            dm = parse_dm_table(text, dm_name, f"{where} table")
        except DmTableError as exc:
            raise ConfigError(str(exc)) from None
        members = []
        for device, first, length in dm.devices():
            real = aliases.get(device)
            if real is None or real not in block_sizes:
                raise ConfigError(f"{where}: device {device!r} is not a disk or partition of "
                                  f"this run; known: {', '.join(block_sizes)}")
            if first + length > block_sizes[real]:
                raise ConfigError(f"{where}: sectors {first} to {first + length} of {real} lie "
                                  f"beyond its end ({block_sizes[real]} sectors)")
            if owner.get(real, name) != name:
                raise ConfigError(f"{where}: device {real} already belongs to volume "
                                  f"{owner[real]!r}; a device may be in one volume")
            owner[real] = name
            if real not in members:
                members.append(real)
        canonical = "\n".join(_canonical_line(line, aliases) for line in text.splitlines()
                              if line.split() and not line.lstrip().startswith("#"))
        out.append(VolumeConfig(name, dm_name, canonical + "\n", dm.size, tuple(members)))
    return out


def _canonical_line(line: str, aliases: dict) -> str:
    """A table line with every device written by its plain name."""
    fields = line.split()
    kind = fields[2]
    if kind == "linear":
        fields[3] = aliases.get(fields[3], fields[3])
    elif kind == "striped":
        for k in range(5, len(fields), 2):
            fields[k] = aliases.get(fields[k], fields[k])
    return " ".join(fields)


def _lvm_table(table: dict, block_sizes: dict, aliases: dict, where: str) -> str:
    """The dmsetup table LVM2 makes for a linear or striped logical volume."""
    from blksim.traces.units import parse_size
    kind = table.get("type")
    if kind not in ("linear", "striped"):
        raise ConfigError(f"{where}: type expected linear or striped (or give table), found "
                          f"{kind!r}")
    devices = table.get("devices")
    if not isinstance(devices, list) or not devices or \
            not all(isinstance(d, str) for d in devices):
        raise ConfigError(f"{where}: devices expected a list of disk or partition names, "
                          f"found {devices!r}")

    def size(key, default):
        try:
            value = parse_size(table.get(key, default), key)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if value % 512 or value <= 0:
            raise ConfigError(f"{where}: {key} expected a positive multiple of 512 bytes, "
                              f"found {table.get(key)!r}")
        return value // 512

    extent = size("extent_size", DEFAULT_EXTENT)
    pe_start = size("pe_start", DEFAULT_PE_START)
    names = []
    for d in devices:
        real = aliases.get(d)
        if real is None or real not in block_sizes:
            raise ConfigError(f"{where}: devices: {d!r} is not a disk or partition of this "
                              f"run; known: {', '.join(block_sizes)}")
        if real in names:
            raise ConfigError(f"{where}: devices: {real} is named twice")
        names.append(real)
    extents = {}
    for real in names:
        n = (block_sizes[real] - pe_start) // extent if block_sizes[real] > pe_start else 0
        if n < 1:
            raise ConfigError(f"{where}: devices: {real} ({block_sizes[real]} sectors) holds no "
                              f"{extent * 512}-byte extent after pe_start")
        extents[real] = n
    wanted = None
    if "size" in table:
        want = size("size", None)
        wanted = -(-want // extent)                 # lvcreate rounds up to whole extents
    if kind == "linear":
        total = sum(extents.values())
        if wanted is not None and wanted > total:
            raise ConfigError(f"{where}: size {table['size']!r} is more than the {total} "
                              f"extents of {', '.join(names)} ({total * extent * 512} bytes)")
        left = total if wanted is None else wanted
        lines, start = [], 0
        for real in names:
            take = min(left, extents[real])
            if take:
                lines.append(f"{start} {take * extent} linear {real} {pe_start}")
                start += take * extent
                left -= take
        return "\n".join(lines) + "\n"
    stripes = len(names)
    chunk = size("stripe_size", DEFAULT_STRIPE)
    if chunk < 8 or chunk & (chunk - 1):
        raise ConfigError(f"{where}: stripe_size expected a power of two of at least 4k, "
                          f"found {table.get('stripe_size')!r}")
    if extent % chunk:
        raise ConfigError(f"{where}: stripe_size {table['stripe_size']!r} does not divide the "
                          f"extent size")
    per = min(extents.values())
    if wanted is not None:
        per_wanted = -(-wanted // stripes)            # extents per stripe, rounded up
        if per_wanted > per:
            raise ConfigError(f"{where}: size {table['size']!r} needs {per_wanted} extents on "
                              f"each of the {stripes} devices; the smallest has {per}")
        per = per_wanted
    pairs = " ".join(f"{real} {pe_start}" for real in names)
    return f"0 {per * stripes * extent} striped {stripes} {chunk} {pairs}\n"
