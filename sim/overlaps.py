"""One check that no two consumers of space in a run's storage stack share a sector,
unless one lies inside the other by design.

A *use* is a range of sectors of one block device that something in the configuration
takes: a partition and the partition table (sector 0) of its disk; a volume's physical
volumes (LVM2: the whole device, label and metadata included) or, for a hand-written
``table``, each target's (each stripe's) range; a file system (its whole device) and its
journal; a ``[[file]]``; an ``[[app]]``'s file. Every use is on the device it names, in
that device's own sectors.

The check goes device by device and compares only the uses *of that device*. That is
enough for the whole stack: two uses on different devices that share a sector of a disk
reach that disk through chains of partitions and volumes; follow both chains down from the
shared sector and either they part on some device, where two different uses of that
device cover the same sector (found there), or one of the two is itself the partition or
volume the other lies in (one above the other by design: a file on ``sdb1`` lies in
partition ``sdb1``; a logical volume's file in its physical volumes). Partitions and
linear/striped targets map sectors one to one, so chains that share a use at a sector
share the sector above it too.

On one device, by design: a file system holds its own journal and the files on its
device. Everything else that shares a sector is an error: two files, a file and a
journal, a file and a partition (a whole disk used directly where it is partitioned), a
file system and a physical volume, two volumes' targets, a partition table and anything.

Sources: the partition table is sector 0 of the disk, where a DOS label is read
(fs/partitions/msdos.c, Linux 2.6.18); an LVM2 2.02 physical volume keeps its label in one
of its first four sectors (``LABEL_SCAN_SECTORS``, lib/label/label.h) and its metadata up
to ``pe_start``, so the whole device belongs to its volume group. That a whole disk may be
used beyond its last partition (and in gaps between partitions) is blksim's choice: those
sectors belong to no partition and hold no label (docs/storage.md).

RAID members behind a controller (``raid``) are the controller's own drives, which no
other table can name, so they take no space of the run's devices.
"""

from __future__ import annotations

from dataclasses import dataclass

from blksim.common.config_values import ConfigError

#: Kinds of use; a file system's use holds the ``HELD`` kinds of the same device.
FILESYSTEM = "filesystem"
HELD = frozenset({"file", "journal"})


@dataclass(frozen=True)
class Use:
    """``sectors`` sectors from ``start`` of block device ``device``, taken by ``what``
    (the table and key that take them, e.g. ``[[file]] #2 (/data/db)``), of ``kind``
    (file, journal, filesystem, partition, label, volume)."""

    what: str
    kind: str
    device: str
    start: int
    sectors: int

    @property
    def end(self) -> int:
        return self.start + self.sectors

    def text(self, names: dict | None = None) -> str:
        """What takes the range and the range, in bytes of its device (``names``: a
        device's name as the configuration gives it, where that differs: vg0/data
        (dm-0))."""
        device = (names or {}).get(self.device, self.device)
        return f"{self.what} (bytes {self.start * 512} to {self.end * 512} of {device})"


def by_design(a: Use, b: Use) -> bool:
    """Whether two uses of one device may share sectors: a file system and the files on
    its device or its journal."""
    return (a.kind == FILESYSTEM and b.kind in HELD) or (b.kind == FILESYSTEM and
                                                         a.kind in HELD)


def check(uses: list, source: str, names: dict | None = None) -> None:
    """Raise `ConfigError` naming the first two ``uses`` (in the order of the
    configuration) that share a sector of a device without one holding the other; the
    later one is named first (``names``: see `Use.text`)."""
    order = {id(u): k for k, u in enumerate(uses)}
    per_device: dict = {}
    for u in uses:
        if u.sectors > 0:
            per_device.setdefault(u.device, []).append(u)
    for device, mine in per_device.items():
        mine.sort(key=lambda u: (u.start, order[id(u)]))
        active: list = []                    # uses that end after the current one's start
        for u in mine:
            active = [a for a in active if a.end > u.start]
            for a in active:
                if not by_design(a, u):
                    later, earlier = (u, a) if order[id(u)] > order[id(a)] else (a, u)
                    raise ConfigError(f"{source}: {later.text(names)} overlaps "
                                      f"{earlier.text(names)}")
            active.append(u)


def storage_uses(devices: dict, disk_where: dict, volumes: list, filesystems: dict,
                 fs_where: dict, files: list, file_what: list, sizes: dict) -> list:
    """Every use of a run's storage, in the order of the configuration: the disks'
    partition tables and partitions, the volumes, the file systems and journals, the files.

    ``disk_where``: each disk's table (``[devices.sdb]``); ``fs_where``: each file
    system's table by device; ``file_what``: each file's table and key, in order;
    ``sizes``: sectors of every block device by name."""
    uses = []
    for name, dev in devices.items():
        if dev.partitions:
            where = disk_where[name]
            uses.append(Use(f"{where} partition table", "label", name, 0, 1))
            for k, part in enumerate(dev.partitions):
                uses.append(Use(f"{where} partition #{k + 1} ({part.name})", "partition",
                                name, part.start, part.sectors))
    for vol in volumes:
        for what, device, start, sectors in vol.uses:
            uses.append(Use(what, "volume", device, start, sectors))
    for device, fs in filesystems.items():
        where = fs_where[device]
        uses.append(Use(where, FILESYSTEM, device, 0, sizes[device]))
        if fs.journal_sectors:
            uses.append(Use(f"{where} journal", "journal", device, fs.journal_start,
                            fs.journal_sectors))
    for f, what in zip(files, file_what):
        for start, n in f.extents:
            uses.append(Use(what, "file", f.device, start, n))
    return uses
