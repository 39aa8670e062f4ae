"""Partitions of a disk, as Linux 2.6.18 keeps them (``struct hd_struct``).

``generic_make_request`` remaps a bio to a partition onto the whole disk
(``blk_partition_remap``, block/ll_rw_blk.c, 2.6.18): the partition's start sector is
added and the bio continues into the disk's request queue. 2.6.18 counts a partition's
reads, writes and sectors there, nothing else (`PartitionStats`); Linux 2.6.25 gave
partitions full statistics.
"""

from __future__ import annotations

from blksim.block.elevator_boundary import SimulationError
from blksim.block.tracepoints import Traced


class PartitionStats:
    """A partition's counters in 2.6.18 (``struct hd_struct``): bios and sectors per
    direction, counted at submission. Linux 2.6.25 gave partitions full statistics.
    ``FIELDS``: the iostat columns these counters give."""

    __slots__ = ("ios", "sectors", "_next_mark", "_interval", "_on_mark")

    FIELDS = ("r/s", "w/s", "rMB/s", "wMB/s")

    def __init__(self) -> None:
        self.ios = [0, 0]
        self.sectors = [0, 0]
        self._next_mark = float("inf")
        self._interval = 0.0
        self._on_mark = None

    def every(self, interval: float, on_mark, start: float = 0.0) -> None:
        """As `diskstats.DiskStats.every`."""
        self._interval = interval
        self._on_mark = on_mark
        self._next_mark = start + interval

    def count(self, write: bool, sectors: int, now: float) -> None:
        """A bio of ``sectors`` sectors was submitted at ``now``."""
        while now >= self._next_mark:
            mark = self._next_mark
            self._next_mark = mark + self._interval
            self._on_mark(self._snapshot(mark))
        self.ios[write] += 1
        self.sectors[write] += sectors

    def sample(self, now: float):
        """The counters at ``now`` as a `diskstats.DiskStatsSample` (the fields 2.6.18
        does not keep are zero)."""
        while now >= self._next_mark:
            mark = self._next_mark
            self._next_mark = mark + self._interval
            self._on_mark(self._snapshot(mark))
        return self._snapshot(now)

    def _snapshot(self, now: float):
        from blksim.block.diskstats import DiskStatsSample
        return DiskStatsSample(now, tuple(self.ios), (0, 0), tuple(self.sectors),
                               (0.0, 0.0), 0.0, 0.0)


class Partition(Traced):
    """A partition of a disk: bios to it are remapped onto the disk's queue.

    Of the tracepoints it has ``block_bio_remap`` only, fired on it by a device-mapper
    volume above it (2.6.18 traces no remap of its own onto the disk; 2.6.32's
    ``blk_partition_remap`` does)."""

    kind = "partition"

    def __init__(self, name: str, disk, start: int, sectors: int, number: tuple) -> None:
        self.name = name
        self.disk = disk              # the disk's RequestQueue
        self.start = start
        self.capacity = sectors
        self.number = number
        self.stats = PartitionStats()

    def submit_bio(self, bio, now: float | None = None) -> bool:
        """Remap ``bio`` onto the disk and queue it there (see `RequestQueue.submit_bio`)."""
        if bio.sector < 0 or (bio.nr_sectors <= 0 and not bio.preflush) or \
                bio.sector + bio.nr_sectors > self.capacity:
            raise SimulationError(
                f"bio {bio.sector}+{bio.nr_sectors} sectors from pid {bio.pid} lies outside "
                f"{self.name} ({self.capacity} sectors)")
        if now is None:
            now = self.disk.clock.now
        if not bio.nr_sectors:
            # an empty flush (blkdev_issue_flush) is the disk's: not remapped, not counted
            # (blk_partition_remap remaps only a bio with sectors, 5.4-6.6)
            return self.disk.submit_bio(bio, now)
        # (2.6.18 traces no A event for a partition's remap; later kernels do)
        self.stats.count(bio.write, bio.nr_sectors, now)
        bio.sector += self.start
        return self.disk.submit_bio(bio, now)

    def when_request(self, bio, wake) -> None:
        """See `RequestQueue.when_request`."""
        self.disk.when_request(bio, wake)

    def process_exited(self, pid: int) -> None:
        """See `RequestQueue.process_exited`."""
        self.disk.process_exited(pid)

    def throttle_delay(self, pid: int, now: float) -> float:
        """See `QueueProtocol.throttle_delay`: the disk's."""
        return self.disk.throttle_delay(pid, now)

    def start_plug(self, pid: int, now: float) -> None:
        """See `QueueProtocol.start_plug`: the disk's."""
        self.disk.start_plug(pid, now)

    def finish_plug(self, pid: int, now: float) -> None:
        """See `QueueProtocol.finish_plug`: the disk's."""
        self.disk.finish_plug(pid, now)

    def queues(self) -> list:
        """The request queues below this device."""
        return [self.disk]
