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

from blksim.common.config_values import ConfigError, check_keys, int_value
# re-exported: the configuration's readers take them from here
from blksim.common.config_values import sectors_value, seconds_text  # noqa: F401

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
    """One disk: its device (``type``, a registered `blksim.disk_models.registry`
    device type, and that type's ``settings``), queue depth, request queue settings,
    elevator and partitions."""

    name: str
    type: str
    settings: object
    queue_depth: int | None
    scheduler: str
    nr_requests: int
    max_sectors_kb: int
    max_hw_sectors_kb: int
    nomerges: int
    iosched: dict
    sectors: int = 0
    partitions: list = field(default_factory=list)
    read_ahead_kb: int = 128
    # multi-queue kernels only (None on the 2.6 lines)
    rq_affinity: int | None = None
    wbt_lat_usec: int | None = None
    rotational: bool | None = None
    nr_hw_queues: int = 1
    #: why the scheduler is what it is, when the kernel chose it (a note for the run)
    chosen_by_kernel: str | None = None


@dataclass
class VolumeConfig:
    """A device-mapper volume: its name as given, its dm name and its table text."""

    name: str
    dm_name: str
    table: str
    sectors: int
    members: tuple = ()
    # the space it takes: (table and key, device, first sector, sectors); see sim.overlaps
    uses: tuple = ()


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
        start = sectors_value(table, "start", here) if "start" in table else next_start
        if i and start < next_start:
            raise ConfigError(f"{here}: start = {table['start']!r} (sector {start}) overlaps "
                              f"the previous partition, which ends at sector {next_start}")
        if start < 1:
            raise ConfigError(f"{here}: start expected a byte after sector 0, which holds "
                              f"the partition table, found {table['start']!r}")
        if "size" in table:
            size = sectors_value(table, "size", here)
            if size < 1:
                raise ConfigError(f"{here}: size expected at least 512 bytes, found "
                                  f"{table['size']!r}")
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
    name a device may be given as -> its name. What each volume takes of its devices is
    its ``uses``: LVM2's physical volumes whole (label, metadata and extents), a
    hand-written table's targets (each stripe of a striped one); `blksim.sim.overlaps`
    checks them against every other use of those devices."""
    from blksim.block.devmapper import DmTableError, parse_dm_table
    if not isinstance(tables, dict):
        raise ConfigError(f"{source}: volumes must be a table of volumes ([volumes.NAME])")
    out = []
    for index, (name, table) in enumerate(tables.items()):
        label = f"[volumes.{name!r}]" if "/" in name else f"[volumes.{name}]"
        where = f"{source}: {label}"
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
            if real not in members:
                members.append(real)
        lines = [line for line in text.splitlines()
                 if line.split() and not line.lstrip().startswith("#")]
        if "table" in table:
            uses = _table_uses(label, text, dm, aliases)
        else:              # pvcreate made each device a physical volume, all of it
            uses = tuple((f"{label} physical volume {real}", real, 0, block_sizes[real])
                         for real in members)
        canonical = "\n".join(_canonical_line(line, aliases) for line in lines)
        out.append(VolumeConfig(name, dm_name, canonical + "\n", dm.size, tuple(members),
                                uses))
    return out


def _table_uses(label: str, text: str, dm, aliases: dict) -> tuple:
    """What a hand-written table takes: each linear target's range and each stripe's,
    named by the table's line (counted as parse_dm_table counts them)."""
    from blksim.block.devmapper import StripedTarget
    numbers = [k for k, line in enumerate(text.splitlines(), 1)
               if line.split() and not line.split()[0].startswith("#")]
    out = []
    for lineno, target in zip(numbers, dm.targets):
        kind = "striped" if isinstance(target, StripedTarget) else "linear"
        for k, (device, first, length) in enumerate(target.devices()):
            what = f"{label} table line {lineno} ({kind}" + \
                (f", stripe {k + 1})" if kind == "striped" else ")")
            out.append((what, aliases[device], first, length))
    return tuple(out)


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
        return sectors_value(table, key, where, default, positive=True)

    if kind == "linear" and "stripe_size" in table:
        raise ConfigError(f"{where}: stripe_size is for type = \"striped\"; a linear volume "
                          f"has no stripes, found stripe_size = {table['stripe_size']!r}")
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
        raise ConfigError(f"{where}: stripe_size expected a divisor of extent_size "
                          f"({extent * 512} bytes), found "
                          f"{table.get('stripe_size', f'{DEFAULT_STRIPE >> 10}k (the default)')!r}")
    per = min(extents.values())
    if wanted is not None:
        per_wanted = -(-wanted // stripes)            # extents per stripe, rounded up
        if per_wanted > per:
            raise ConfigError(f"{where}: size {table['size']!r} needs {per_wanted} extents on "
                              f"each of the {stripes} devices; the smallest has {per}")
        per = per_wanted
    pairs = " ".join(f"{real} {pe_start}" for real in names)
    return f"0 {per * stripes * extent} striped {stripes} {chunk} {pairs}\n"


# ---------------------------------------------------------------------- files

FILE_KEYS = {
    "path": "the file's name, which jobs give as filename, e.g. \"/data/db\"",
    "device": "the disk, partition or volume it lives on, e.g. \"/dev/sdb1\"",
    "size": "bytes (fio units, a multiple of 4k)",
    "offset": "where on the device it starts (default: after the previous file on that "
              "device, the first at 0)",
    "fragments": "cut into this many equal extents (default 1: contiguous)",
    "fragment_gap": "bytes between fragments (default 1m)",
    "extents": "instead: the extents as [[device offset, length], ...] in bytes",
    "writers": "on a filesystem made by mkfs: threads writing the file in turn, each its "
               "own contiguous part (default 1)",
    "write_size": "on a filesystem made by mkfs: bytes each writer writes per call "
                  "(default 1m)",
}
#: [[file]] keys that place a file by hand: the outline's, not a filesystem's allocator's
HAND_PLACED = ("offset", "fragments", "fragment_gap", "extents")
PAGE = 4096


@dataclass
class FileConfig:
    """A file: its name, its device and its extents ((device sector, sectors), in file
    order)."""

    path: str
    device: str
    sectors: int
    extents: tuple
    written: dict | None = None    # placed by a filesystem: its writers and write_size

    def table(self) -> dict:
        """The [[file]] table that gives this file back (on a filesystem made by mkfs,
        how it was written: the allocator places it again the same way)."""
        if self.written is not None:
            return {"path": self.path, "device": self.device, "size": self.sectors * 512,
                    **self.written}
        return {"path": self.path, "device": self.device, "size": self.sectors * 512,
                "extents": [[start * 512, n * 512] for start, n in self.extents]}


FS_KEYS = {
    "type": "a filesystem (ext3, ext4, xfs) or none (no filesystem: files at explicit "
            "places; the default); docs/filesystems.md",
    "journal_size": "bytes (default as mke2fs 1.39 sizes it: 4m to 128m by the device's size)",
    "journal_offset": "where the journal starts on the device (default 0: the first block "
                      "groups, where mke2fs 1.39 puts it)",
    "commit_interval": "kjournald's commit interval, the commit= mount option (default 5s)",
    "mkfs": "the mkfs program's options (mke2fs's for ext3 and ext4, mkfs.xfs's for xfs), "
            "e.g. \"-j -b 4096 -O dir_index,sparse_super,filetype -T largefile\": the "
            "filesystem's layout and allocator place its files",
    "mount": "mount's -o options, e.g. \"data=writeback,commit=5,barrier=1,noatime\"",
    "barrier": "the barrier= mount option: 1 writes each commit block as a barrier (a cache "
               "flush before it, FUA or a flush after), 0 does not (default 0, as 2.6.18's "
               "ext3; mainline's default is 1 from 2.6.38)",
}
#: the outline's keys, which mkfs and mount replace (-J size=, commit=, barrier=)
OUTLINE_KEYS = ("journal_size", "journal_offset", "commit_interval", "barrier")


@dataclass
class FsConfig:
    """The file system of one device: its journal's place and size (sectors) and the
    commit interval (s); ``type`` none has no journal. With ``mkfs``/``mount`` given,
    ``layer`` is the filesystem (`blksim.hostio.fs`), which places the journal
    (``journal_layout``, a `hostio.fileio.FileLayout`) and the files, and ``data``,
    ``barrier`` and ``atime`` are its mount options; without, the outline of earlier
    versions: ordered data, no barrier, no atime writes, files where [[file]] puts them."""

    device: str
    type: str
    journal_start: int
    journal_sectors: int
    commit_interval: float
    data: str = "ordered"
    barrier: bool = False
    atime: bool = False
    layer: object = None
    journal_layout: object = None

    def table(self) -> dict:
        """The [filesystems."..."] table that gives this back."""
        if self.type == "none":
            return {"type": "none"}
        if self.layer is not None:
            return {"type": self.type, "mkfs": self.layer.mkfs,
                    "mount": self.layer.mount.text()}
        out = {"type": self.type, "journal_size": self.journal_sectors * 512,
               "journal_offset": self.journal_start * 512,
               "commit_interval": seconds_text(self.commit_interval)}
        if self.barrier:
            out["barrier"] = 1
        return out


def default_journal_blocks(blocks: int) -> int:
    """``ext2fs_default_journal_size`` (e2fsprogs 1.39) for a file system of ``blocks``
    4 KiB blocks; 0 when it is too small for a journal."""
    if blocks < 2048:
        return 0
    for limit, size in ((32768, 1024), (256 * 1024, 4096), (512 * 1024, 8192),
                        (1024 * 1024, 16384)):
        if blocks < limit:
            return size
    return 32768


def filesystems(tables, sizes: dict, aliases: dict, source: str, seed: int = 0,
                kernel: str = "2.6.18") -> dict:
    """``[filesystems."/dev/sdb1"]`` tables: device name -> `FsConfig` (``seed``: the
    run's, for what a filesystem draws at random; ``kernel``: the run's kernel line)."""
    from blksim.common.config_values import time_value
    from blksim.hostio.fs import FILESYSTEMS
    if not isinstance(tables, dict):
        raise ConfigError(f"{source}: filesystems must be a table of devices "
                          f"([filesystems.\"/dev/sdb1\"])")
    out = {}
    for name, table in tables.items():
        where = f"{source}: [filesystems.{name!r}]"
        device = aliases.get(name)
        if device is None or device not in sizes or name.startswith("/") and \
                not name.startswith("/dev/"):
            raise ConfigError(f"{where}: {name!r} is not a disk, partition or volume of this "
                              f"run")
        check_keys(table, FS_KEYS, where)
        kind = table.get("type", "none")
        if kind not in FILESYSTEMS and kind != "none":
            raise ConfigError(f"{where}: type expected one of {', '.join(FILESYSTEMS)} or "
                              f"none, found {kind!r}")
        if device in out:
            raise ConfigError(f"{where}: {device} has a file system already")
        if kind == "none":
            if "mkfs" in table or "mount" in table:
                raise ConfigError(f"{where}: mkfs and mount need a filesystem type (ext3)")
            out[device] = FsConfig(device, "none", 0, 0, 0.0)
            continue
        if "mkfs" in table or "mount" in table or kind != "ext3":
            # (ext3 without either keeps the outline of earlier versions)
            out[device] = _made_fs(device, kind, table, sizes[device], where,
                                   f"{seed}/{device}", kernel)
            continue
        limit = sizes[device]
        if "journal_size" in table:
            journal = _bytes_in_pages(table["journal_size"], "journal_size", where)
        else:
            journal = default_journal_blocks(limit // 8) * 8
            if not journal:
                raise ConfigError(f"{where}: {device} ({limit * 512} bytes) is too small for "
                                  f"an ext3 journal (mke2fs wants 8 MiB)")
        start = _bytes_in_pages(table.get("journal_offset", 0), "journal_offset", where,
                                zero=True)
        if start + journal > limit:
            raise ConfigError(f"{where}: the journal's bytes {start * 512} to "
                              f"{(start + journal) * 512} lie beyond the end of {device}")
        interval = time_value(table, "commit_interval", where, 5.0)
        if not interval > 0:
            raise ConfigError(f"{where}: commit_interval must be positive")
        barrier = table.get("barrier", 0)
        if barrier not in (0, 1) or isinstance(barrier, float):
            raise ConfigError(f"{where}: barrier expected 0 or 1 (or false/true), found "
                              f"{barrier!r}")
        out[device] = FsConfig(device, kind, start, journal, interval, barrier=bool(barrier))
    return out


def _made_fs(device: str, kind: str, table: dict, sectors: int, where: str,
             seed: str, kernel: str) -> FsConfig:
    """A filesystem made by ``mkfs`` and mounted with ``mount`` (`blksim.hostio.fs`)."""
    from blksim.hostio.fileio import FileLayout
    from blksim.hostio.fs import build
    for key in OUTLINE_KEYS:
        if key in table:
            spelling = ("-l size= in mkfs, nobarrier in mount" if kind == "xfs" else
                        "-J size= in mkfs, commit= and barrier= in mount")
            raise ConfigError(f"{where}: {key} is ext3's outline's; with mkfs/mount give "
                              f"{spelling}")
    texts = []
    for key in ("mkfs", "mount"):
        text = table.get(key, "")
        if not isinstance(text, str):
            raise ConfigError(f"{where}: {key} expected a string of options, found {text!r}")
        texts.append(text)
    try:
        layer = build(kind, sectors, texts[0], texts[1], seed, kernel)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    extents = layer.journal_extents()
    journal = sum(n for _, n in extents)
    if journal % 8:
        raise ConfigError(f"{where}: the journal ({journal * 512} bytes) is not a whole "
                          f"number of 4 KiB journal blocks")
    return FsConfig(device, kind, extents[0][0], journal, layer.commit_interval,
                    layer.data_mode, layer.barrier, layer.atime, layer,
                    FileLayout(-1, f"{device} journal", extents))


def check_direct(jobs, job_files, files, fs: dict, source: str) -> None:
    """O_DIRECT on a file of an ext3 mounted ``data=journal`` fails with EINVAL: its
    address space has no ``direct_IO`` (``ext3_journalled_aops``, fs/ext3/inode.c;
    ``__dentry_open``, fs/open.c, 2.6.18)."""
    journalled = {f.path for f in files
                  if f.device in fs and fs[f.device].layer is not None
                  and fs[f.device].data == "journal"}
    for job, paths in zip(jobs, job_files):
        bad = sorted(journalled & set(paths)) if job.direct else ()
        if bad:
            kind = next(fs[f.device].type for f in files if f.path == bad[0])
            raise ConfigError(f"{source}: job {job.name!r}: direct = 1 on {bad[0]}, whose "
                              f"{kind} is mounted data=journal (no O_DIRECT there: EINVAL)")


def first_free(placed, fs: dict | None = None) -> dict:
    """Where the next file goes by default on each device (sectors): after its last file
    in ``placed`` (`FileConfig`\\ s) and after a journal at its start."""
    ends: dict = {}
    for device, f in (fs or {}).items():
        if f.journal_sectors and f.journal_start == 0:
            ends[device] = f.journal_sectors
    for f in placed:
        ends[f.device] = max([ends.get(f.device, 0)] + [s + n for s, n in f.extents])
    return ends


def files(tables, sizes: dict, aliases: dict, source: str, fs: dict | None = None) -> list:
    """The ``[[file]]`` tables as `FileConfig`\\ s: on known devices, inside them; a file
    without an offset goes after the device's previous file or its journal at its start
    (``fs``: device -> `FsConfig`). Overlaps with anything else on the stack are
    `blksim.sim.overlaps`'s to find."""
    if not isinstance(tables, list):
        raise ConfigError(f"{source}: file must be an array of tables ([[file]])")
    out = []
    ends = first_free((), fs)            # device -> end of its last file (sectors)
    names = set()
    for i, table in enumerate(tables):
        path = table.get("path") if isinstance(table, dict) else None
        where = f"{source}: [[file]] #{i + 1}" + (f" ({path})" if isinstance(path, str) else "")
        check_keys(table, FILE_KEYS, where)
        for key in ("path", "device", "size"):
            if key not in table and not (key == "size" and "extents" in table):
                raise ConfigError(f"{where}: {key} is required ({FILE_KEYS[key]})")
        if not isinstance(path, str) or not path.startswith("/") or path.startswith("/dev/"):
            raise ConfigError(f"{where}: path expected an absolute file name outside /dev, "
                              f"found {path!r}")
        if path in names:
            raise ConfigError(f"{where}: path {path!r} names another file too")
        names.add(path)
        device = aliases.get(table["device"]) if isinstance(table["device"], str) else None
        if device is None:
            raise ConfigError(f"{where}: device {table['device']!r} is not a disk, partition "
                              f"or volume of this run")
        limit = sizes[device]
        layer = (fs or {}).get(device)
        layer = layer.layer if layer is not None else None
        if layer is not None:
            out.append(_allocated(table, path, device, layer, where))
            continue
        for key in ("writers", "write_size"):
            if key in table:
                raise ConfigError(f"{where}: {key} needs a filesystem made by mkfs on "
                                  f"{device} ([filesystems] mkfs = ...)")
        if "extents" in table:
            if any(k in table for k in ("offset", "fragments", "fragment_gap")):
                raise ConfigError(f"{where}: give extents or offset/fragments, not both")
            spans = table["extents"]
            if not isinstance(spans, list) or not spans:
                raise ConfigError(f"{where}: extents expected [[offset, length], ...], found "
                                  f"{spans!r}")
            extents = []
            for k, pair in enumerate(spans):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ConfigError(f"{where}: extents #{k + 1} expected [offset, length], "
                                      f"found {pair!r}")
                extents.append((_bytes_in_pages(pair[0], "extents offset", where, zero=True),
                                _bytes_in_pages(pair[1], "extents length", where)))
            total = sum(n for _, n in extents)
            if "size" in table and _bytes_in_pages(table["size"], "size", where) != total:
                raise ConfigError(f"{where}: size {table['size']!r} is not the extents' "
                                  f"{total * 512} bytes")
        else:
            total = _bytes_in_pages(table["size"], "size", where)
            start = (_bytes_in_pages(table["offset"], "offset", where, zero=True)
                     if "offset" in table else ends.get(device, 0))
            pieces = int_value(table, "fragments", where, 1, 1, 1 << 20)
            gap = _bytes_in_pages(table.get("fragment_gap", "1m"), "fragment_gap", where,
                                  zero=True)
            per = total // pieces // 8 * 8
            if per < 8:
                raise ConfigError(f"{where}: {pieces} fragments of a {total * 512}-byte file "
                                  f"are smaller than a page")
            extents = []
            at = start
            for k in range(pieces):
                n = per if k < pieces - 1 else total - per * (pieces - 1)
                extents.append((at, n))
                at += n + gap
        for start, n in extents:
            if start + n > limit:
                raise ConfigError(f"{where}: bytes {start * 512} to {(start + n) * 512} lie "
                                  f"beyond the end of {device} ({limit * 512} bytes)")
        ends[device] = max(ends.get(device, 0), max(s + n for s, n in extents))
        out.append(FileConfig(path, device, total, tuple(extents)))
    return out


def _allocated(table: dict, path: str, device: str, layer, where: str) -> FileConfig:
    """A file on a filesystem made by mkfs: its allocator places it, in creation order,
    as ``writers`` threads write it in turn, ``write_size`` bytes a call."""
    for key in HAND_PLACED:
        if key in table:
            raise ConfigError(f"{where}: {key}: on {device}'s {layer.kind} (made by mkfs) "
                              f"the filesystem places its files; give size (and writers)")
    total = _bytes_in_pages(table["size"], "size", where)
    writers = int_value(table, "writers", where, 1, 1, 4096)
    per = _bytes_in_pages(table.get("write_size", "1m"), "write_size", where)
    try:
        extents = layer.place_file(path, total * 512, writers, per * 512)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return FileConfig(path, device, total, extents,
                      {"writers": writers, "write_size": per * 512})


def _bytes_in_pages(value, key: str, where: str, zero: bool = False) -> int:
    """A size in bytes (fio units), a whole number of 4 KiB pages, as sectors."""
    from blksim.common.units import parse_size
    try:
        nbytes = parse_size(value, key)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if nbytes % PAGE or (nbytes == 0 and not zero):
        raise ConfigError(f"{where}: {key} expected a {'' if zero else 'positive '}multiple "
                          f"of 4 KiB (a page), found {value!r}")
    return nbytes // 512
