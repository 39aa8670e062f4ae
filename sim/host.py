"""The block devices of one simulated host and the paths a bio takes through them.

Every disk has its own `RequestQueue` (merging, plugging, elevator, queue depth) in front
of its own drive. Above the disks sit partitions (`blksim.block.partition.Partition`) and
device-mapper volumes (`blksim.block.devmapper.DmDevice`), which have no queue of their
own and only pass bios on, as in Linux 2.6.

A bio a process submits is measured once, when it completes at the device it was given
to (its ``origin`` is None); clones are not measured themselves. The bio's D (dispatch)
time is its last clone's, its device time the sum of its clones'.
"""

from __future__ import annotations

from blksim.schedulers import NoneScheduler, get_scheduler
from blksim.block.mq.elevator import is_multiqueue
from blksim.block.mq.queue import MqQueue, MqSettings
from blksim.block.devmapper import DmDevice, dm_clone_ids, target_queues  # noqa: F401
from blksim.block.elevator import kernel_version
from blksim.block.legacy_queue import QueueSettings, RequestQueue, SimulationError  # noqa: F401
from blksim.block.diskstats import DiskStats
from blksim.block.partition import Partition, PartitionStats  # noqa: F401


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

    def start_plug(self, pid: int, now: float) -> None:
        """The task's plug covers every queue below the job's devices."""
        for q in self._queues():
            q.start_plug(pid, now)

    def finish_plug(self, pid: int, now: float) -> None:
        """Flush the task's plug on every queue below the job's devices."""
        for q in self._queues():
            q.finish_plug(pid, now)

    def _queues(self) -> list:
        out = []
        for target in self.targets:
            for q in target_queues(target):
                if q not in out:
                    out.append(q)
        return out

    @property
    def capacity(self) -> int:
        """The smallest of the devices."""
        return min(t.capacity for t in self.targets)


def kernel_at_least(kernel: str, version: str) -> bool:
    """Whether kernel ``kernel`` is ``version`` or later."""
    return kernel_version(kernel) >= kernel_version(version)


def build_device(dev, seed: int):
    """A disk's device model, built by its registered type (``dev``: a
    `storage_config.DeviceConfig`; `blksim.disk_models.registry`)."""
    from blksim.disk_models.registry import device_type
    return device_type(dev.type).build(dev.settings, dev.name, dev.queue_depth, seed)


def _share_host_link(links: dict, name: str, device) -> None:
    """LUNs whose raid tables name the same ``host_link`` share one link
    (`blksim.disk_models.raid.HostLink`), which must have one rate."""
    link_name = getattr(device, "host_link", None)
    if not link_name:
        return
    if link_name not in links:
        links[link_name] = (name, device.link)
        return
    first, link = links[link_name]
    if link.rate != device.link.rate:
        from blksim.common.config_values import ConfigError
        raise ConfigError(f"devices.{name}.raid: host_link {link_name!r}: host_mb_per_s "
                          f"{device.link.rate / 1e6:g} differs from {first}'s "
                          f"{link.rate / 1e6:g} on the same link")
    device.share_link(link)


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
    """A function building elevator `name` with its tunables: on a dispatch queue (2.6
    kernels), or for a multi-queue queue's geometry (None for ``none``)."""
    cls = get_scheduler(name, kernel)
    params = dict(iosched)
    if is_multiqueue(kernel):
        if cls is NoneScheduler:
            return None

        def make_mq(info):
            return cls.create(info, params)
        make_mq.scheduler = cls
        return make_mq

    def make(dq):
        return cls.create(dq, params, hz=hz, kernel=kernel)
    make.scheduler = cls            # named by the block layer's checks of what it builds
    return make


def _iocost(cfg, name: str):
    """Disk ``name``'s io.cost settings when its io.cost.qos enables iocost, else None."""
    groups = getattr(cfg, "cgroups", None)
    spec = groups.iocost.get(name) if groups is not None else None
    return spec if spec is not None and spec.enable else None


def build_queue(dev, device, clock, cfg, name: str):
    """The request queue of disk ``dev`` over ``device``: the 2.6 `RequestQueue` or, on a
    multi-queue kernel, an `MqQueue`."""
    factory = elevator_factory(dev.scheduler, dev.iosched, cfg.hz, cfg.kernel)
    if is_multiqueue(cfg.kernel):
        settings = MqSettings(
            kernel=cfg.kernel, nr_requests=dev.nr_requests, max_sectors_kb=dev.max_sectors_kb,
            nomerges=dev.nomerges, hz=cfg.hz, nr_hw_queues=dev.nr_hw_queues,
            nr_cpus=getattr(cfg, "cpus", 1), rq_affinity=dev.rq_affinity,
            rotational=dev.rotational, wbt_lat_usec=dev.wbt_lat_usec,
            # drives and RAID controllers sit behind the SCSI layer (libata for SATA)
            scsi_budget=dev.type in ("drive", "raid"), iocost=_iocost(cfg, name))
        return MqQueue(factory, device, clock, settings, name, elevator_name=dev.scheduler)
    settings = QueueSettings(
        nr_requests=dev.nr_requests, max_sectors_kb=dev.max_sectors_kb,
        nomerges=dev.nomerges, hz=cfg.hz,
        generic_backmerge_hash=kernel_at_least(cfg.kernel, "2.6.19"))
    return RequestQueue(factory, device, clock, settings, name)


def _watch_flash(watches: dict, name: str, device, queue, clock, ramp_time: float) -> None:
    """A flash disk's `FlashWatch` (`blksim.sim.flash_figures`): its counters at ramp_time,
    its reads' GC latency tail."""
    from blksim.sim.flash_figures import FlashWatch, is_flash
    if not is_flash(device):
        return
    watch = watches[name] = FlashWatch(device, ramp_time)
    queue.subscribe("block_bio_complete", watch.bio_completed)
    if ramp_time:
        clock.call_at(ramp_time, watch.start_measuring)


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
        self.throttles: dict = {}        # device name -> blk-throttle's front (io.max)
        self.iolatency: dict = {}        # disk name -> blk-iolatency (io.latency)
        self.ioprio: dict = {}           # disk name -> blk-ioprio (io.prio.class)
        self.flash_watches: dict = {}     # flash disk name -> FlashWatch (sim.flash_figures)
        links: dict = {}                  # a shared host link's name -> (first LUN, link)
        for index, (name, dev) in enumerate(cfg.devices.items()):
            seed = seed_bits(63)
            device = sda_device if (name == PRIMARY and sda_device is not None) \
                else build_device(dev, seed)
            latency = DeviceLatency(cfg.ramp_time) if cfg.stacked else None
            queue = build_queue(dev, device, clock, cfg, name)
            if latency is not None:
                queue.subscribe("block_bio_complete", latency.bio_completed)
            queue.latency = latency
            _watch_flash(self.flash_watches, name, device, queue, clock, cfg.ramp_time)
            queue.name = name
            queue.number = disk_numbers(index)
            self.disks[name] = queue
            self._cgroup_policies(queue, name, dev.rotational, cfg)
            # io.max on this disk: blk-throttle in front of its queue, below its
            # partitions (the kernel throttles a partition's bios on its whole disk)
            front = self._throttled(queue, name, dev.rotational, clock, cfg)
            self.blocks[name] = front
            if getattr(device, "member_stats", None) is not None:
                for i in range(len(device.members)):
                    self.blocks[f"{name}.m{i}"] = RaidMember(f"{name}.m{i}", device, i)
            _share_host_link(links, name, device)
            major, minor = queue.number
            for k, part in enumerate(dev.partitions, 1):
                self.blocks[part.name] = Partition(part.name, front, part.start, part.sectors,
                                                   (major, minor + k))
        clone_ids = dm_clone_ids()
        for minor, vol in enumerate(cfg.volumes):
            table = parse_dm_table(vol.table, vol.dm_name, vol.name)
            below = {d: self.blocks[d] for d in {p[0] for p in table.devices()}}
            latency = DeviceLatency(cfg.ramp_time)
            dm = DmDevice(vol.dm_name, vol.name, table, below, clock, (253, minor), clone_ids)
            dm.subscribe("block_bio_complete", latency.bio_completed)
            dm.latency = latency
            self.blocks[vol.dm_name] = self._throttled(dm, vol.dm_name, True, clock, cfg)
        self.primary = self.disks[PRIMARY]
        # the host's CPUs as a cost ([host] cpu_costs, multi-queue kernels only)
        self.cpu_time = None
        if getattr(cfg, "cpu_costs", None) is not None:
            from blksim.sim.cpu_time import CpuTime, build_costs
            self.cpu_time = CpuTime(clock, getattr(cfg, "cpus", 1),
                                    build_costs(cfg.cpu_costs), cfg.kernel)
            for name, queue in self.disks.items():
                if queue.multiqueue:
                    self.cpu_time.attach(queue, cfg.devices[name].rq_affinity)
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

    def _throttled(self, queue, name: str, rotational: bool, clock, cfg) -> object:
        """``queue``, or blk-throttle's front for it (`block.mq.throttle.ThrottledQueue`)
        when a group of the run has io.max for device ``name``; the fronts are kept in
        ``throttles`` (the engine gives them the groups' `associate`)."""
        groups = cfg.cgroups.groups if getattr(cfg, "cgroups", None) is not None else ()
        if not any(name in spec.io_max for spec in groups):
            return queue
        from blksim.block.mq.throttle import ThrottledQueue
        front = ThrottledQueue(queue, clock, rotational, cfg.kernel, cfg.hz, device=name)
        self.throttles[name] = front
        return front

    def _cgroup_policies(self, queue, name: str, rotational: bool, cfg) -> None:
        """blk-iolatency on disk ``name`` when a group has an io.latency target on it,
        blk-ioprio when a group has an io.prio.class (docs/cgroups.md); the engine gives
        them the groups (`blksim.block.mq.iolatency.IoLatency.set_target`)."""
        groups = cfg.cgroups.groups if getattr(cfg, "cgroups", None) is not None else ()
        if not groups or not queue.multiqueue:
            return
        if any(spec.io_latency.get(name) for spec in groups):
            from blksim.block.mq.iolatency import IoLatency
            policy = IoLatency(name, rotational, queue.nr_requests, cfg.kernel, cfg.hz)
            queue.rq_qos.add(policy)
            self.iolatency[name] = policy
        if any(spec.io_prio_class not in (None, "no-change") for spec in groups):
            from blksim.block.mq.ioprio import IoPrio, IoPrioTrack
            ioprio = self.ioprio[name] = IoPrio(cfg.kernel)
            if ioprio.at_track:
                queue.rq_qos.add(IoPrioTrack(ioprio))      # 5.14-5.19: rq_qos_track
            else:
                queue.set_ioprio = ioprio.set_ioprio       # 6.0 on: bio_set_ioprio

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
