"""The block devices of one simulated host and the paths a bio takes through them.

Every disk has its own `RequestQueue` (merging, plugging, elevator, queue depth) in front
of its own drive. Above the disks sit two kinds of device that have no queue of their
own and only pass bios on, as in Linux 2.6:

* a **partition** (`Partition`): ``generic_make_request`` remaps a bio to a partition
  onto the whole disk (``blk_partition_remap``, block/ll_rw_blk.c, 2.6.18): the start
  sector is added and the bio continues into the disk's queue. 2.6.18 counts a
  partition's reads, writes and sectors there, nothing else (`PartitionStats`).
* a **device-mapper volume** (`DmDevice`): ``dm_request`` splits a bio at target and
  stripe-chunk boundaries (`sim.devmapper.DmTable.map_bio`), and submits a clone per
  piece, remapped, to the underlying device, from the submitter's own context: a clone
  that finds no free request puts the submitter to sleep before the next clone is made
  (``__split_bio`` calls ``generic_make_request`` per clone, drivers/md/dm.c, 2.6.18).
  The bio completes when its last clone does. Its statistics are those of
  ``start_io_acct``/``end_io_acct``: in flight from submission to completion, no merges.

A bio a process submits is measured once, when it completes at the device it was given
to (its ``origin`` is None); clones are not measured themselves. The bio's D (dispatch)
time is its last clone's, its device time the sum of its clones'.
"""

from __future__ import annotations

from itertools import count

from blksim.schedulers import get_scheduler
from blksim.block.elevator import kernel_version
from blksim.block.legacy_queue import QueueSettings, RequestQueue, SimulationError
from blksim.block.diskstats import DiskStats
from blksim.block.request import Bio
from blksim.block.tracepoints import Traced


class DeviceLatency:
    """Q2C and D2C of the bios one device completed (a disk's: the bios and clones its
    queue took; a volume's: the bios submitted to it), as btt reports them per device;
    bios queued before ``start`` (ramp_time) are not counted."""

    __slots__ = ("start", "bios", "q2c", "d2c", "q2c_max")

    def __init__(self, start: float) -> None:
        self.start = start
        self.bios = 0
        self.q2c = 0.0
        self.d2c = 0.0
        self.q2c_max = 0.0

    def bio_completed(self, q, bio, now) -> None:
        """Count a completed bio (the device's ``block_bio_complete`` subscriber)."""
        if bio.t_queue >= self.start:
            self.bios += 1
            q2c = bio.t_complete - bio.t_queue
            self.q2c += q2c
            self.d2c += bio.t_complete - bio.t_dispatch
            if q2c > self.q2c_max:
                self.q2c_max = q2c

    def figures(self) -> dict:
        """Counts and means (ms); the means and maximum are None when no bio completed."""
        n = self.bios
        return {"bios": n, "q2c_mean_ms": round(self.q2c / n * 1e3, 6) if n else None,
                "d2c_mean_ms": round(self.d2c / n * 1e3, 6) if n else None,
                "q2c_max_ms": round(self.q2c_max * 1e3, 6) if n else None}


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
        if bio.sector < 0 or bio.nr_sectors <= 0 or bio.sector + bio.nr_sectors > self.capacity:
            raise SimulationError(
                f"bio {bio.sector}+{bio.nr_sectors} sectors from pid {bio.pid} lies outside "
                f"{self.name} ({self.capacity} sectors)")
        if now is None:
            now = self.disk.clock.now
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

    def queues(self) -> list:
        """The request queues below this device."""
        return [self.disk]


class _DmIo:
    """One bio in a dm device: its pieces, the next one to submit, clones in flight."""

    __slots__ = ("bio", "pieces", "next", "left", "t_dispatch", "disk_s")

    def __init__(self, bio, pieces) -> None:
        self.bio = bio
        self.pieces = pieces
        self.next = 0
        self.left = len(pieces)
        self.t_dispatch = -1.0
        self.disk_s = 0.0


class DmDevice(Traced):
    """A device-mapper volume (``dm-N``): splits, remaps and passes bios on.

    ``below``: the devices its table names, by name (queues, partitions or other dm
    devices). Its tracepoints: ``block_bio_queue`` when a bio is submitted to it,
    ``block_split`` at every cut of a bio, ``block_bio_remap`` of each clone on the
    device the clone goes to, and ``block_bio_complete`` when its last clone completes
    (``dec_pending``), before the bio's ``on_complete``."""

    kind = "dm"

    def __init__(self, name: str, label: str, table, below: dict, clock,
                 number: tuple, clone_ids) -> None:
        self.latency = None               # a DeviceLatency (set by Host)
        self.name = name
        self.label = label
        self.table = table
        self.capacity = table.size
        self.below = below
        self.clock = clock
        self.number = number
        self.stats = DiskStats()
        self._wake: dict = {}             # bio id -> its sleeping submitter's wake-up
        self._clone_id = clone_ids        # ids for clones (negative: apart from bios)

    def submit_bio(self, bio, now: float | None = None) -> bool:
        """Split ``bio``, and submit its clones in order. False when the submitter
        sleeps for a free request before all are submitted (`when_request`)."""
        if now is None:
            now = self.clock.now
        if self._tp_block_bio_queue is not None:
            self.fire_tracepoint("block_bio_queue", bio, now)
        bio.t_queue = now
        if bio.sector < 0 or bio.nr_sectors <= 0 or bio.sector + bio.nr_sectors > self.capacity:
            raise SimulationError(
                f"bio {bio.sector}+{bio.nr_sectors} sectors from pid {bio.pid} lies outside "
                f"{self.name} ({self.label}, {self.capacity} sectors)")
        io = _DmIo(bio, self.table.map_bio(bio.sector, bio.nr_sectors))
        if self._tp_block_split is not None:
            for piece in io.pieces[1:]:
                self.fire_tracepoint("block_split", bio, piece.logical, now)
        self.stats.request_added(now)
        return self._submit_clones(io, now)

    def _submit_clones(self, io: _DmIo, now: float) -> bool:
        bio = io.bio
        pieces = io.pieces
        while io.next < len(pieces):
            piece = pieces[io.next]
            io.next += 1
            clone = Bio(self._clone_id(), piece.sector, piece.nr_sectors, bio.write, bio.sync,
                        bio.pid, bio.ioprio, self._clone_done)
            clone.origin = io
            target = self.below[piece.device]
            # __map_bio: the remap is traced on the device the clone goes to
            target.fire_tracepoint("block_bio_remap", clone, self.number, piece.logical, now)
            if not target.submit_bio(clone, now):
                target.when_request(clone, self._resume)
                return False
        return True

    def _resume(self, clone) -> None:
        """The clone the submitter slept on has its request: go on with the next ones."""
        io = clone.origin
        if self._submit_clones(io, self.clock.now):
            wake = self._wake.pop(io.bio.id, None)
            if wake is not None:
                wake(io.bio)

    def when_request(self, bio, wake) -> None:
        """Call ``wake(bio)`` once every clone of ``bio`` is submitted (see
        `RequestQueue.when_request`)."""
        self._wake[bio.id] = wake

    def _clone_done(self, clone) -> None:
        io = clone.origin
        io.left -= 1
        if clone.t_dispatch > io.t_dispatch:
            io.t_dispatch = clone.t_dispatch
        io.disk_s += clone.disk_s
        if io.left == 0:
            bio = io.bio
            now = clone.t_complete
            bio.t_dispatch = io.t_dispatch
            bio.t_complete = now
            bio.disk_s = io.disk_s
            bio.rq = clone.rq                       # the request of its last clone
            bio.dev = self.name
            self.stats.request_completed(bio.write, bio.nr_sectors, bio.t_queue, now)
            if self._tp_block_bio_complete is not None:
                self.fire_tracepoint("block_bio_complete", bio, now)
            end_io = bio.on_complete
            if end_io is not None:
                end_io(bio)

    def process_exited(self, pid: int) -> None:
        """Tell the elevators below that process ``pid`` has ended."""
        for q in self.queues():
            q.process_exited(pid)

    def queues(self) -> list:
        """The request queues below this device, each once."""
        out = []
        for dev in self.below.values():
            for q in target_queues(dev):
                if q not in out:
                    out.append(q)
        return out


class FileRoundRobin:
    """A job over several devices (fio's ``filename=a:b``): each I/O goes to the next
    device in turn (fio's default ``file_service_type=roundrobin``), at the next place
    of that device's own address pattern. Stands in for both the job's pattern and its
    device."""

    def __init__(self, targets: list, patterns: list) -> None:
        self.targets = targets
        self.patterns = patterns
        self._i = len(targets) - 1
        self._waiting: dict = {}          # bio id -> the device it waits at

    def next_io(self):
        """The next I/O, from the next device's pattern."""
        self._i = (self._i + 1) % len(self.targets)
        return self.patterns[self._i].next_io()

    def next_interarrival(self) -> float:
        """The time to the next arrival of an open-loop job (s)."""
        return self.patterns[self._i].next_interarrival()

    def submit_bio(self, bio, now: float | None = None) -> bool:
        """Submit ``bio`` (the I/O `next_io` gave last) to its device."""
        target = self.targets[self._i]
        if target.submit_bio(bio, now):
            return True
        self._waiting[bio.id] = target
        return False

    def when_request(self, bio, wake) -> None:
        """See `RequestQueue.when_request`."""
        self._waiting.pop(bio.id).when_request(bio, wake)

    def process_exited(self, pid: int) -> None:
        """Tell every queue below the job's devices that the process has ended."""
        done = []
        for target in self.targets:
            for q in target_queues(target):
                if q not in done:
                    done.append(q)
                    q.process_exited(pid)

    @property
    def capacity(self) -> int:
        """The smallest of the devices."""
        return min(t.capacity for t in self.targets)


def target_queues(target) -> list:
    """The request queues a device's bios reach (a disk's own queue is itself)."""
    queues = getattr(target, "queues", None)
    return [target] if queues is None else queues()


def kernel_at_least(kernel: str, version: str) -> bool:
    """Whether kernel ``kernel`` is ``version`` or later."""
    return kernel_version(kernel) >= kernel_version(version)


def build_device(dev, seed: int):
    """A disk's drive (or service-law device) with its queue depth (``dev``: a
    `storage_config.DeviceConfig`, or a `RunConfig` for its sda)."""
    from blksim.disk_models.drive import make_drive
    from blksim.disk_models.presets import load_drive
    from blksim.disk_models.synthetic import ServiceLawDevice
    if getattr(dev, "raid", None) is not None:
        return build_raid(dev.name, dev.raid, dev.queue_depth, seed)
    if dev.service is not None:
        return ServiceLawDevice(dev.service, dev.service_time, capacity=dev.capacity_sectors,
                                queue_depth=dev.queue_depth or 1, seed=seed)
    spec = load_drive(dev.drive)
    policy, weight = getattr(dev, "drive_policy", None), getattr(dev, "age_weight", None)
    if policy is not None or weight is not None:
        import dataclasses
        spec = dataclasses.replace(
            spec, queue_policy=policy if policy is not None else spec.queue_policy,
            queue_age_weight=weight if weight is not None else spec.queue_age_weight)
    drive = make_drive(spec, seed=seed, queue_depth=dev.queue_depth)
    if getattr(dev, "start_cylinder", None) is not None:
        drive.cur_cyl = dev.start_cylinder
    if getattr(dev, "start_angle", None) is not None:
        drive.angle0 = dev.start_angle
    return drive


def build_raid(name: str, r, queue_depth: int, seed: int):
    """A `disk_models.raid.RaidController` for a `raid_config.RaidConfig`: its
    members drawn their seeds in turn from ``seed``, each with /proc/diskstats-like
    counters (``controller.member_stats``)."""
    import os
    import random
    from blksim.disk_models.drive import make_drive
    from blksim.disk_models.presets import load_drive
    from blksim.disk_models.raid import RaidController
    from blksim.disk_models.raid_layout import RaidLayout
    from blksim.disk_models.synthetic import ServiceLawDevice
    rng = random.Random(seed)
    spec = None if r.service is not None else load_drive(r.drive)
    members = []
    for _ in range(r.members):
        s = rng.getrandbits(63)
        if spec is None:
            members.append(ServiceLawDevice(r.service, r.service_time, capacity=r.member_sectors,
                                            queue_depth=r.member_queue_depth or 1, seed=s))
        else:
            members.append(make_drive(spec, seed=s, queue_depth=r.member_queue_depth))
    layout = RaidLayout(r.level, r.members, r.member_sectors, r.strip, r.failed)
    return RaidController(
        name, layout, members, queue_depth=queue_depth, cache_sectors=r.cache_sectors,
        write_policy=r.write_policy, read_policy=r.read_policy, high_water=r.high_water,
        low_water=r.low_water, destage_idle=r.destage_idle, destage_rows=r.destage_rows,
        read_ahead_rows=r.read_ahead_rows, overhead=r.overhead, host_rate=r.host_rate,
        max_member_io=r.max_member_io,
        member_stats=[DiskStats() for _ in members],
        label=os.path.splitext(os.path.basename(r.controller))[0] if r.controller else None)


class RaidMember:
    """A member drive behind a RAID controller, for reports: the host never sees it (no
    device number), but iostat's figures of it are kept."""

    kind = "member"
    number = None

    def __init__(self, name: str, controller, index: int) -> None:
        self.name = name
        self.controller = controller
        self.index = index
        self.stats = controller.member_stats[index]
        self.capacity = controller.members[index].capacity


def elevator_factory(name: str, iosched: dict, hz: int, kernel: str):
    """A function building elevator `name` with its tunables on a dispatch queue."""
    cls = get_scheduler(name)
    params = dict(iosched)

    def make(dq):
        return cls.create(dq, params, hz=hz, kernel=kernel)
    make.scheduler = cls            # named by the block layer's checks of what it builds
    return make


class Host:
    """The block devices of a run, built from its configuration.

    ``disks``: name -> `RequestQueue` (sda first); ``blocks``: every block device by
    name (disks, partitions, dm-N), in /proc/diskstats' order. ``seed_bits(63)`` gives each disk's
    drive its seed, in order; ``sda_device`` replaces sda's drive (tests)."""

    def __init__(self, cfg, clock, seed_bits, sda_device=None) -> None:
        from blksim.block.devmapper import parse_dm_table
        from blksim.sim.storage_config import PRIMARY, disk_numbers
        self.disks: dict = {}
        self.blocks: dict = {}
        generic_hash = kernel_at_least(cfg.kernel, "2.6.19")
        for index, (name, dev) in enumerate(cfg.devices.items()):
            seed = seed_bits(63)
            device = sda_device if (name == PRIMARY and sda_device is not None) \
                else build_device(dev, seed)
            settings = QueueSettings(
                nr_requests=dev.nr_requests, max_sectors_kb=dev.max_sectors_kb,
                nomerges=dev.nomerges, hz=cfg.hz, generic_backmerge_hash=generic_hash)
            latency = DeviceLatency(cfg.ramp_time) if cfg.stacked else None
            queue = RequestQueue(elevator_factory(dev.scheduler, dev.iosched, cfg.hz, cfg.kernel),
                                 device, clock, settings, name)
            if latency is not None:
                queue.subscribe("block_bio_complete", latency.bio_completed)
            queue.latency = latency
            queue.name = name
            queue.number = disk_numbers(index)
            self.disks[name] = queue
            self.blocks[name] = queue
            if getattr(device, "member_stats", None) is not None:
                for i in range(len(device.members)):
                    self.blocks[f"{name}.m{i}"] = RaidMember(f"{name}.m{i}", device, i)
            major, minor = queue.number
            for k, part in enumerate(dev.partitions, 1):
                self.blocks[part.name] = Partition(part.name, queue, part.start, part.sectors,
                                                   (major, minor + k))
        clone_ids = dm_clone_ids()
        for minor, vol in enumerate(cfg.volumes):
            table = parse_dm_table(vol.table, vol.dm_name, vol.name)
            below = {d: self.blocks[d] for d in {p[0] for p in table.devices()}}
            latency = DeviceLatency(cfg.ramp_time)
            dm = DmDevice(vol.dm_name, vol.name, table, below, clock, (253, minor), clone_ids)
            dm.subscribe("block_bio_complete", latency.bio_completed)
            dm.latency = latency
            self.blocks[vol.dm_name] = dm
        self.primary = self.disks[PRIMARY]
        self.page_cache = None
        self.files: dict = {}
        if cfg.files:
            from blksim.hostio.fileio import FileLayout
            from blksim.hostio.pagecache import PAGE_BYTES, PageCache
            self.page_cache = PageCache(cfg.page_cache // PAGE_BYTES)
            for number, f in enumerate(cfg.files):
                self.files[f.path] = FileLayout(number, f.path, f.extents)
        self._file_devices = {f.path: f.device for f in cfg.files}
        self._read_ahead = {name: dev.read_ahead_kb for name, dev in cfg.devices.items()}

    def target(self, files, open_file=None) -> object:
        """Where a job's or trace's bios go: a device by name, or a `FileRoundRobin`
        over several (its patterns set by the caller). A name of a file is opened with
        ``open_file(layout, device, read_ahead_pages, congested)`` (one process's open
        file)."""
        def one(name):
            if name in self.files:
                device = self.blocks[self._file_devices[name]]
                return open_file(self.files[name], device, self.read_ahead_pages(device),
                                 lambda: congested(device, 0), lambda: congested(device, 1),
                                 max_bio_pages(device))
            return self.blocks[name]
        if len(files) == 1:
            return one(files[0])
        return FileRoundRobin([one(f) for f in files], [])

    def read_ahead_pages(self, device) -> int:
        """``read_ahead_kb`` of a device in pages: a disk's own, a partition's disk's; a
        volume's is the default 128 KiB."""
        disk = getattr(device, "disk", device)
        kb = self._read_ahead.get(getattr(disk, "name", None), 128)
        return kb // 4


def congested(device, direction: int) -> bool:
    """``bdi_read_congested`` (``direction`` 0) or ``bdi_write_congested`` (1): a queue
    below ``device`` has that direction's requests at the congestion threshold (2.6.18's
    ``queue_congestion_on_threshold``: nr_requests - nr_requests/8 + 1); a volume is
    congested when any device below it is (``dm_any_congested``)."""
    for q in target_queues(device):
        nr = q.nr_requests
        if q.allocated(direction) >= nr - nr // 8 + 1:
            return True
    return False


def max_bio_pages(device) -> int:
    """The most pages a bio to ``device`` carries: the smallest ``max_sectors_kb`` of the
    queues below it."""
    return max(1, min(q.max_sectors for q in target_queues(device)) // 8)


def dm_clone_ids():
    """A source of ids for dm clones: -1, -2, ..."""
    ids = count(1)
    return lambda: -next(ids)
