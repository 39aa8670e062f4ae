"""The multi-queue block layer (blk-mq) of Linux 5.4 to 6.6, for one device.

`MqQueue` is the second implementation of the queue protocol
(`blksim.block.queue_protocol`); docs/blk-mq.md describes it for users. It follows
block/blk-mq.c, blk-mq-sched.c, blk-mq-tag.c, blk-merge.c, blk-core.c and elevator.c
of each line (`blksim.block.mq.versions` tabulates the differences):

* **Software and hardware queues.** Every CPU has a software queue (``ctx``); each maps
  to one hardware queue (``hctx``, `blksim.block.mq.cpumap`). A bio's CPU is
  ``bio.cpu``.
* **Tags.** A request holds a driver tag of its hctx (``device/queue_depth`` of them
  per hctx) while the driver has it; with an elevator it also holds a scheduler tag
  (``nr_requests`` per hctx, default ``2 * min(queue_depth, 128)``:
  ``blk_mq_init_sched``) from its allocation, and takes the driver tag only at
  dispatch. Without one (``none``) the driver tag is taken at allocation and
  ``nr_requests`` is the tag depth. A submitter that finds no tag sleeps and is woken
  in batches (`blksim.block.mq.tags`), its task's plug flushed first
  (``blk_mq_get_tag``, ``sched_submit_work``).
* **Submission** (``blk_mq_make_request`` 5.4, ``blk_mq_submit_bio`` later): plug
  merge, then the elevator's merge (``elv_merge``: one-hit cache, back-merge hash,
  ``request_merge``) or, without one, the CPU's software queue (``blk_bio_list_merge``:
  the 8 newest requests); then a request, and one of: the task's plug, the elevator
  (``insert_requests``, the hctx run asynchronously), direct issue to the driver
  (``blk_mq_try_issue_directly``) or the software queue and an async run, by the rules
  of the line.
* **Per-task plugs** (`start_plug`/`finish_plug`): requests wait on the plug until it
  is finished, holds ``BLK_MAX_REQUEST_COUNT`` requests or its newest is 128 KiB or
  more (then it is flushed), or the task sleeps for a tag.
* **Dispatch** (``blk_mq_run_hw_queue`` -> ``__blk_mq_sched_dispatch_requests``): the
  hctx's dispatch list first; then, with an elevator, ``has_work``/``dispatch_request``
  one request at a time while driver tags last; without, every software queue's
  requests. A request the device refuses goes back to the dispatch list
  (``blk_mq_dispatch_rq_list``, traced as a requeue) and the hctx is run again when a
  request is freed (SCHED_RESTART).
* **Completion** (`blksim.block.mq.complete`): ``completed_request``, the request's
  tags freed (sleepers woken), ``finish_request``, restarts, then the bios end (their
  submitters wake after the completion handler, as a woken task runs after the
  interrupt).

Simplifications (docs/blk-mq.md): the driver never refuses a request the tags allow
unless the device itself has no room; no timeouts or polling (flushes and FUA are
`blksim.block.mq.flush`'s); the SCSI budget equals the tag depth (one LUN per host); a
task's plug is per queue
(the kernel's doubling of the limit for a plug spanning queues is not modelled);
asynchronous runs (kblockd) happen at the same simulated instant, after the current
handler. CPU time is charged by the host's model (`cpu_time`, `blksim.sim.cpu_time`):
the bios' ``end_io`` then wait for the completion's CPU work.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from blksim.block.diskstats import diskstats_for
from blksim.block.elevator_boundary import ElevatorFault, SimulationError, describe
from blksim.block.mq.complete import MqCompletion
from blksim.block.mq.cpumap import map_queues
from blksim.block.mq.elevator import MqElevator, MqHctx, MqQueueInfo
from blksim.block.mq.flush import MqFlush
from blksim.block.mq.iocost import Ioc
from blksim.block.mq.merge import MqMerging
from blksim.block.mq.plug import MqPlugging
from blksim.block.mq.rq_qos import RQ_QOS_COST, RQ_QOS_WBT, RqQos
from blksim.block.mq.switch import MqSwitching
from blksim.block.mq.tags import TagMap
from blksim.block.mq.versions import variant
from blksim.block.mq.wbt import Wbt, wbt_disable_default, wbt_enable_default
from blksim.block.request import REQ_OP_DISCARD, REQ_OP_FLUSH, REQ_OP_WRITE, MqRequest
from blksim.block.tracepoints import Traced, fire

#: The delay of a rerun after an elevator dispatched nothing (BLK_MQ_BUDGET_DELAY, ms).
BUDGET_DELAY_S = 0.003
#: Requests the kernel's default ``nr_requests`` is twice at most (BLKDEV_MAX_RQ,
#: BLKDEV_DEFAULT_RQ from 6.1) and the smallest value sysfs accepts (BLKDEV_MIN_RQ).
BLKDEV_DEFAULT_RQ = 128
BLKDEV_MIN_RQ = 4


@dataclass(frozen=True)
class MqSettings:
    """The ``queue/`` tunables of a multi-queue device and the kernel line.

    ``nr_requests`` None: the kernel's default for the elevator (or the tag depth
    without one). ``nr_hw_queues``: the tag set's hardware queues; ``nr_cpus``: the
    host's CPUs (software queues); ``rq_affinity`` 0/1/2 (kept for the CPU model);
    ``scsi_budget``: the driver asks for a per-device budget before dispatch (SCSI,
    SAS and SATA disks and controllers)."""

    kernel: str = "6.6"
    nr_requests: int | None = None
    max_sectors_kb: int = 1280
    nomerges: int = 0
    hz: int = 250
    nr_hw_queues: int = 1
    nr_cpus: int = 1
    rq_affinity: int = 1
    rotational: bool = True
    wbt_lat_usec: int = -1
    scsi_budget: bool = False
    #: io.cost.qos/io.cost.model of this disk when iocost is enabled on it
    #: (`blksim.block.mq.iocost_params.IocostDevice`), else None
    iocost: object = None


def default_nr_requests(queue_depth: int, with_elevator: bool) -> int:
    """``nr_requests`` when the user set none: ``2 * min(queue_depth, BLKDEV_MAX_RQ)`` with
    an elevator (``blk_mq_init_sched``), the tag depth without."""
    if not with_elevator:
        return queue_depth
    return 2 * min(queue_depth, BLKDEV_DEFAULT_RQ)


class _Sleeper:
    """A submitter asleep for a tag: calling it wakes it (it retries after the current
    handler); `MqQueue._woken_now` has it retry at once."""

    __slots__ = ("queue", "bio")

    def __init__(self, queue, bio) -> None:
        self.queue = queue
        self.bio = bio

    def __call__(self) -> None:
        self.queue._retry(self.bio)


class MqQueue(MqCompletion, MqMerging, MqPlugging, MqSwitching, Traced):
    """One device's multi-queue request queue (see the module docstring).

    ``elevator_factory(info)`` builds the elevator (an `MqElevator`) for the queue's
    geometry, or is None for ``none``. It fires the kernel's block tracepoints
    (`blksim.block.tracepoints`)."""

    kind = "disk"
    multiqueue = True
    #: The host's CPU cost model (`blksim.sim.cpu_time.CpuTime`, set by the host), or
    #: None: the bios end at the device event, costing nothing.
    cpu_time = None
    #: blk-ioprio's direct call (`blksim.block.mq.ioprio.IoPrio.set_ioprio`, 6.0 on; set
    #: by the host when a group has io.prio.class), or None.
    set_ioprio = None

    def __init__(self, elevator_factory, device, clock, settings: MqSettings,
                 name: str = "sda", elevator_name: str | None = None) -> None:
        self.name = name
        self.number = (8, 0)
        self.latency = None
        self.settings = settings
        self.device = device
        self.clock = clock
        self.variant = variant(settings.kernel)
        self.max_sectors = settings.max_sectors_kb * 2
        # queue/discard_max_bytes / 512: what the driver says (0: no discard support)
        self.max_discard_sectors = device.max_discard_sectors
        self._nomerges = settings.nomerges
        self.queue_depth = device.queue_depth        # driver tags per hctx
        nr_hw = settings.nr_hw_queues
        self._nr_cpus = settings.nr_cpus
        # a SCSI device's budget (scsi_mq_get_budget): device/queue_depth requests at the
        # device, asked for before the elevator gives a request; 0: no budget (NVMe)
        self._budget = device.queue_depth if settings.scsi_budget else 0
        self.cpu_map = map_queues(settings.nr_cpus, nr_hw, self.variant.cpumap_groups)
        self.hctxs = []
        for index in range(nr_hw):
            hctx = MqHctx(index, tuple(c for c, q in enumerate(self.cpu_map) if q == index))
            hctx.dispatch = deque()
            hctx.ctx_lists = {}
            hctx.tags = TagMap(self.queue_depth)
            self.hctxs.append(hctx)
        self._kblockd: list = []        # hctxs whose asynchronous run is queued, in order
        self.elevator = None
        self.elevator_name = "none"
        self._user_nr_requests = settings.nr_requests
        self._attach(elevator_factory, elevator_name)
        self.count = 0                       # requests allocated and not freed
        self.in_flight = 0                   # requests at the device
        self.queued = 0                      # allocated, not yet at the device
        self.waited = 0                      # bios whose submitter slept for a tag
        self._on_request: dict = {}          # bio id -> its sleeping submitter's wake-up
        self._sleeping = 0                   # bios asleep for a tag
        self._plugs: dict = {}               # pid -> _Plug
        self.last_merge = None
        self.merge_hash: dict = {}
        self.requests_allocated = 0
        self.request_merges = 0
        self.requeues = 0
        self.direct_issues = 0
        self.stats = diskstats_for(settings.kernel, settings.hz)
        # the rq_qos policies (block/mq/rq_qos.py): writeback throttling first
        # (blk_register_queue -> wbt_enable_default -> wbt_init: on by default for every
        # multi-queue disk)
        self.rq_qos = RqQos()
        self.rq_qos.add(Wbt(self.queue_depth, settings.rotational, settings.wbt_lat_usec,
                            self.variant.kernel, settings.hz,
                            write_cache=bool(getattr(device, "volatile_write_cache", False))))
        if self.elevator is not None and self.elevator.disables_wbt:
            wbt_disable_default(self.rq_qos)  # bfq_init_queue
        if settings.iocost is not None:
            # io.cost.qos "enable=1" (ioc_qos_write -> blk_iocost_init: rq_qos_add;
            # 5.10+ also turn wbt off, wbt_disable_default)
            ioc = Ioc(settings.iocost, name, self.queue_depth, settings.rotational,
                      settings.kernel, settings.hz)
            self.rq_qos.add(ioc)
            if ioc.disables_wbt:
                wbt_disable_default(self.rq_qos)
        self._dev_due = None
        self._elv_wake_due = None
        self._run_all_due = None
        self.vtime = 0.0
        self._vt_last = 0.0
        self.flush = MqFlush(self)           # cache flushes and FUA (block/mq/flush.py)
        self.switches_done: list = []
        self._switch = None                  # (factory, name, on_done, asked, frozen bios)
        self._switch_waiting: list = []

    # ------------------------------------------------------------------ elevator
    def _attach(self, factory, name) -> None:
        """``blk_mq_init_sched``: scheduler tags of ``nr_requests`` per hctx, the
        elevator built for the geometry, ``init_hctx`` and ``depth_updated``."""
        with_elevator = factory is not None
        nr = self._user_nr_requests
        if nr is None:
            nr = default_nr_requests(self.queue_depth, with_elevator)
        nr = max(BLKDEV_MIN_RQ, nr)
        if not with_elevator:
            nr = min(nr, self.queue_depth)      # queue_requests_store: at most the tag depth
        self.nr_requests = nr
        if not with_elevator:
            self.elevator = None
            self.elevator_name = "none"
            if getattr(self, "rq_qos", None) is not None:
                wbt_enable_default(self.rq_qos)     # the old elevator's exit (bfq's)
            for hctx in self.hctxs:
                hctx.sched_tags = None
                hctx.sched_data = None
            self.use_hash = False
            return
        info = MqQueueInfo(nr_requests=nr, nr_hw_queues=len(self.hctxs),
                           queue_depth=self.queue_depth,
                           rotational=self.settings.rotational, kernel=self.variant.kernel,
                           hz=self.settings.hz, nr_cpus=self.settings.nr_cpus,
                           device=self.name)
        try:
            elevator = factory(info)
        except ElevatorFault:
            raise
        if not isinstance(elevator, MqElevator):
            raise ElevatorFault(f"scheduler {name!r} on {self.name}: create() returned "
                                f"{describe(elevator)}: expected an instance of "
                                f"blksim.block.mq.elevator.MqElevator")
        self.elevator = elevator
        self.elevator_name = name or elevator.name
        if getattr(self, "rq_qos", None) is not None:
            # bfq turns wbt off while it is attached (wbt_disable_default / _enable_default)
            if elevator.disables_wbt:
                wbt_disable_default(self.rq_qos)
            else:
                wbt_enable_default(self.rq_qos)
        for hctx in self.hctxs:
            hctx.sched_tags = TagMap(nr)
            hctx.sched_data = None
            elevator.init_hctx(hctx)
        elevator.depth_updated(nr)
        for hctx in self.hctxs:        # sbitmap_queue_min_shallow_depth
            hctx.sched_tags.set_min_shallow(elevator.min_shallow_depth)
        self.use_hash = elevator.uses_merge_hash and self._nomerges == 0
        cls = type(elevator)
        self._elv_completed = (None if cls.completed_request is MqElevator.completed_request
                               else elevator.completed_request)
        self._elv_timers = elevator.uses_timers
        self.wire_elevator_msg()

    def elevator_fault(self, hook: str, what: str) -> ElevatorFault:
        """The error that stops the run: the elevator's ``hook`` handed over ``what``."""
        cls = type(self.elevator)
        return ElevatorFault(f"scheduler {self.elevator_name!r} ({cls.__module__}:"
                             f"{cls.__qualname__}) on {self.name}: {hook} {what}")

    # ------------------------------------------------------------------ submission
    def submit_bio(self, bio, now: float | None = None) -> bool:
        """Queue ``bio``: True when merged or given a request, False when its submitter
        sleeps for a tag (`when_request` says when it goes on)."""
        if now is None:
            now = self.clock.now
        if (bio.preflush or bio.fua) and self.flush.check_bio(self, bio, now):
            return True                 # an empty flush to a device without a cache
        if self._tp_block_bio_queue is not None:
            fire(self._tp_block_bio_queue, "block_bio_queue", self, bio, now)
        bio.t_queue = now
        if bio.op == REQ_OP_WRITE and not bio.sync and not bio.buffered:
            # A direct write is REQ_SYNC | REQ_IDLE on these kernels (WRITE_ODIRECT from
            # 2.6.29, dio's REQ_SYNC | REQ_IDLE later): synchronous for the schedulers,
            # and not writeback for wbt. blksim's submitters say only which writes the
            # page cache's writeback makes (``bio.buffered``); the rest are direct.
            bio.sync = True
        end = bio.sector + bio.nr_sectors
        if bio.sector < 0 or (end <= bio.sector and not bio.preflush) or \
                end > self.device.capacity:
            raise SimulationError(
                f"bio {bio.sector}+{bio.nr_sectors} sectors from pid {bio.pid} lies outside the "
                f"device (capacity {self.device.capacity} sectors)")
        if bio.op == REQ_OP_DISCARD and not self.max_discard_sectors:
            # submit_bio_noacct: a discard to a queue without discard support ends with
            # BLK_STS_NOTSUPP; blksim's configuration refuses such a run before it starts
            raise SimulationError(f"a discard from pid {bio.pid} reached {self.name}, whose "
                                  f"device does not support discard")
        if self._switch is not None:
            # the queue is frozen for an elevator switch: wait for it (blk_queue_enter)
            self._switch[4].append(bio)
            self._sleeping += 1
            self.waited += 1
            return False
        return self._submit(bio, now)

    def _submit(self, bio, now: float) -> bool:
        if self.set_ioprio is not None:
            # bio_set_ioprio (blk_mq_submit_bio, 6.0 on): blk-ioprio's class, before any
            # merge (block/mq/ioprio.py)
            self.set_ioprio(bio)
        plug = self._plugs.get(bio.pid)
        # (a bio with REQ_PREFLUSH or REQ_FUA is never merged: REQ_NOMERGE_FLAGS)
        if self._nomerges != 2 and not (bio.preflush or bio.fua):
            if plug is not None and plug.rqs and self._plug_merge(plug, bio, now):
                return True
            if self.queued and self._sched_bio_merge(bio, now):
                return True
        # rq_qos_throttle: a policy (writeback throttling) may make the submitter sleep
        # (its task's plug flushed as it does)
        qos = self.rq_qos
        if qos.throttle is not None:
            if not qos.throttle(bio, now):
                if plug is not None and plug.rqs:
                    self._flush_plug(plug, now, explicit=False)
                self._sleeping += 1
                self.waited += 1
                qos.check_timers(self.clock, self._qos_release)
                return False
            watch = qos.timer_watch
            if watch is not None and watch.timers_changed:
                qos.check_timers(self.clock, self._qos_release)
        return self._get_request(bio, now, plug)

    def _get_request(self, bio, now: float, plug) -> bool:
        """``__blk_mq_alloc_request`` then the placement of ``blk_mq_submit_bio``."""
        ctx = bio.cpu % self._nr_cpus
        hctx = self.hctxs[self.cpu_map[ctx]]
        elevator = self.elevator
        flush_path = (bio.preflush or bio.fua) and self.flush.wants_flush_path(bio)
        if elevator is not None and flush_path:
            # a request for the flush machinery: a scheduler tag, no limit_depth
            # (blk_mq_get_request 5.4: op_is_flush; block/mq/flush.py)
            tag = hctx.sched_tags.get()
            tags = hctx.sched_tags
        elif elevator is not None:
            shallow = elevator.limit_depth(bio.write, bio.sync, bio.pid)
            tag = hctx.sched_tags.get(shallow)
            tags = hctx.sched_tags
        else:
            tag = hctx.tags.get()
            tags = hctx.tags
        if tag < 0:
            # blk_mq_get_tag: run the hctx, then sleep (the task's plug is flushed as it
            # sleeps: sched_submit_work)
            if plug is not None and plug.rqs:
                self._flush_plug(plug, now, explicit=False)
            self._sleeping += 1
            self.waited += 1
            tags.sleep(_Sleeper(self, bio))
            return False
        rq = MqRequest(self.requests_allocated, bio, now, self, hctx, ctx)
        self.requests_allocated += 1
        if elevator is not None:
            rq.sched_tag = tag
        else:
            rq.tag = tag
        if self._tp_block_getrq is not None:
            fire(self._tp_block_getrq, "block_getrq", self, bio, 1 if bio.write else 0, now)
        self.count += 1
        self.queued += 1
        self.stats.request_added(now)
        qos = self.rq_qos
        if qos.track is not None:
            qos.track(rq, bio)                  # rq_qos_track
        if bio.preflush or bio.fua:
            policy = self.flush.prepare(rq, bio)
            if flush_path:
                rq.elvpriv = False              # no elevator sees it
                self.flush.insert(self, rq, policy, now)       # blk_insert_flush
                return True
        if elevator is not None:
            elevator.prepare_request(rq, now)
        self._place(rq, hctx, plug, rq.sync, now)
        return True

    def _retry(self, bio) -> None:
        """A sleeper woken by a freed tag: it tries again after the current handler."""
        self.clock.call_at(self.clock.now, lambda _ev: self._woken(bio))

    def _qos_release(self, bio) -> None:
        """An rq_qos policy let a sleeping bio go: after the current handler it goes
        through the chain's later policies, then to request allocation."""
        self.clock.call_at(self.clock.now, lambda _ev: self._qos_resumed(bio))

    def _qos_resumed(self, bio) -> None:
        qos = self.rq_qos
        passed = qos.resume(bio, self.clock.now)
        qos.check_timers(self.clock, self._qos_release)
        if passed:
            self._woken(bio)

    def _woken_now(self, sleeper) -> None:
        """A sleeper retries now (from the completion handler: see `_device_event`)."""
        self._sleeping += 1
        self._woken(sleeper.bio)

    def _woken(self, bio) -> None:
        """A sleeper tries again for a tag (``blk_mq_get_tag``'s loop; its bio already
        missed its merges, and the kernel does not try them again)."""
        self._sleeping -= 1
        now = self.clock.now
        if self._get_request(bio, now, self._plugs.get(bio.pid)):
            wake = self._on_request.pop(bio.id, None)
            if wake is not None:
                wake(bio)
        else:
            self.waited -= 1         # asleep again: one bio, one wait

    def when_request(self, bio, wake) -> None:
        """Call ``wake(bio)`` once ``bio``, left waiting by `submit_bio`, has a request."""
        self._on_request[bio.id] = wake

    def _place(self, rq, hctx, plug, sync: bool, now: float) -> None:
        """Where a new request goes (``blk_mq_make_request`` 5.4, ``blk_mq_submit_bio``):
        the task's plug (every modelled driver has ``commit_rqs``, so 5.x plugs on
        every queue too), the elevator, or straight to the driver unless its hctx is
        busy (5.x: a sync request on a multi-queue device always goes straight)."""
        if plug is not None:
            self._add_to_plug(plug, rq, now)
            return
        if self.elevator is not None:
            go_direct = False
        elif self.variant.direct_issue_6x:
            go_direct = not (hctx.dispatch_busy and (len(self.hctxs) == 1 or not sync))
        else:
            go_direct = (len(self.hctxs) > 1 and sync) or not hctx.dispatch_busy
        if go_direct:
            self._issue_directly(rq, hctx, now)
        else:
            self._insert_request(rq, now)
            self._run_async(hctx, now)

    # ------------------------------------------------------------------ dispatch
    def _run_async(self, hctx, now: float) -> None:
        """``blk_mq_run_hw_queue(hctx, async=true)``: kblockd runs it after the current
        handler, at the same instant (one pending run per hctx; the works queued at one
        instant run in the order they were queued, in one event)."""
        if hctx.run_due is None:
            hctx.run_due = now
            kblockd = self._kblockd
            kblockd.append(hctx)
            if len(kblockd) == 1:
                self.clock.call_at(now, self._kblockd_runs)

    def _kblockd_runs(self, event) -> None:
        """kblockd: the queued hctx runs, oldest first (``blk_mq_run_work_fn``)."""
        # The first outside the loop: nearly always the only one, and a function
        # without a loop is one PyPy can compile into its caller's trace.
        kblockd = self._kblockd
        hctx = kblockd[0]
        hctx.run_due = None
        self.run_hw_queue(hctx, event.when)
        if len(kblockd) > 1:
            self._kblockd_rest(event.when)
        kblockd.clear()

    def _kblockd_rest(self, now: float) -> None:
        """`_kblockd_runs` after the first hctx: the others queued (a run may queue
        another hctx's), in order."""
        kblockd = self._kblockd
        i = 1
        while i < len(kblockd):
            hctx = kblockd[i]
            i += 1
            hctx.run_due = None
            self.run_hw_queue(hctx, now)

    def run_hw_queues(self, now: float | None = None) -> None:
        """``blk_mq_run_hw_queues``: every hctx (with an SQ_SCHED elevator from 6.1,
        the queue-wide structure is asked once: the first hctx, and those with
        requests on their dispatch lists)."""
        if now is None:
            now = self.clock.now
        sq = self.variant.sq_sched and self.elevator is not None and self.elevator.queue_wide
        for i, hctx in enumerate(self.hctxs):
            if sq and i and not hctx.dispatch:
                continue
            self.run_hw_queue(hctx, now)

    def run_hw_queue(self, hctx, now: float) -> bool:
        """``blk_mq_sched_dispatch_requests``: send what the hctx may send; True when
        a request went to the device."""
        sent = False
        if hctx.dispatch:
            sent = self._send_dispatch_list(hctx, now)
            if hctx.dispatch:
                return sent
        elevator = self.elevator
        if elevator is not None:
            sent = self._dispatch_sched(hctx, now) or sent
        else:
            sent = self._dispatch_ctx(hctx, now) or sent
        if elevator is not None and self._elv_timers and elevator.timers_changed:
            self._check_elevator_timer()
        return sent

    def _dispatch_sched(self, hctx, now: float) -> bool:
        """``__blk_mq_do_dispatch_sched``: pull from the elevator while it has work and
        a driver tag can be had."""
        elevator = self.elevator
        sent = False
        pulled = 0
        budget = self._budget
        while elevator.has_work(hctx):
            if hctx.dispatch:
                break
            if budget and self.in_flight >= budget:
                # blk_mq_get_dispatch_budget: a SCSI device's queue_depth is full; its
                # completion restarts the queue (scsi_run_queue_async)
                hctx.restart = True
                break
            rq = elevator.dispatch_request(hctx, now)
            if rq is None:
                if not pulled and self.variant.budget_delay_rerun:
                    self._delay_run_all(now + BUDGET_DELAY_S)
                break
            self._check_dispatched(rq)
            pulled += 1
            rq.in_elevator = False
            if self.last_merge is rq:
                self.last_merge = None
            self._unhash(rq)
            target = rq.hctx
            tag = target.tags.get()
            if tag < 0:
                # blk_mq_mark_tag_wait: park it and run again when a tag is freed
                target.dispatch.append(rq)
                target.restart = True
                break
            rq.tag = tag
            if not self._queue_rq(rq, target, now):
                break
            sent = True
        return sent

    def _check_dispatched(self, rq) -> None:
        if rq.__class__ is not MqRequest or rq.owner is not self:
            raise self.elevator_fault("dispatch_request()", f"returned {describe(rq)}: "
                                      f"expected a request of this queue it holds, or None")
        if rq.started or not rq.in_elevator:
            raise self.elevator_fault("dispatch_request()", f"returned {describe(rq)}, which "
                                      f"it no longer holds (dispatched or merged away)")

    def _dispatch_ctx(self, hctx, now: float) -> bool:
        """Without an elevator: every software queue's requests, in CPU order
        (``blk_mq_flush_busy_ctxs``)."""
        sent = False
        for ctx in sorted(hctx.ctx_lists):
            lst = hctx.ctx_lists[ctx]
            while lst:
                rq = lst.popleft()
                if rq.tag < 0:
                    tag = hctx.tags.get()
                    if tag < 0:
                        lst.appendleft(rq)
                        hctx.restart = True
                        return sent
                    rq.tag = tag
                if not self._queue_rq(rq, hctx, now):
                    return sent
                sent = True
        return sent

    def _send_dispatch_list(self, hctx, now: float) -> bool:
        """``blk_mq_dispatch_rq_list`` on the hctx's dispatch list (left-overs first)."""
        sent = False
        lst = hctx.dispatch
        hctx.restart = True          # SCHED_RESTART while the list is worked on
        while lst:
            rq = lst.popleft()
            if rq.tag < 0:
                tag = hctx.tags.get()
                if tag < 0:
                    lst.appendleft(rq)
                    return sent
                rq.tag = tag
            if not self._queue_rq(rq, hctx, now):
                return sent
            sent = True
        hctx.restart = False
        return sent

    def _issue_directly(self, rq, hctx, now: float) -> None:
        """``blk_mq_try_issue_directly`` (``none``): to the driver now, no I traced;
        if the driver has no room, onto the dispatch list to be run again."""
        if rq.tag < 0:
            tag = hctx.tags.get()
            if tag < 0:
                self._insert([rq], False, now)
                self._run_async(hctx, now)
                return
            rq.tag = tag
        self.direct_issues += 1
        self._queue_rq(rq, hctx, now)

    def _queue_rq(self, rq, hctx, now: float) -> bool:
        """``queue_rq``: the device takes ``rq`` or (no room) it is requeued at the head
        of the hctx's dispatch list (BLK_STS_RESOURCE: ``__blk_mq_requeue_request``,
        traced R) and the hctx runs again when a request is freed."""
        device = self.device
        if not device.can_accept():
            if rq.op != REQ_OP_FLUSH or not rq.borrowed:    # (a borrowed tag stays)
                hctx.tags.put(rq.tag)
                rq.tag = -1
            self.requeues += 1
            hctx.requeued += 1
            if self._tp_block_rq_requeue is not None:
                fire(self._tp_block_rq_requeue, "block_rq_requeue", self, rq, now)
            if self.rq_qos.requeue is not None:
                self.rq_qos.requeue(rq, now)    # rq_qos_requeue
            hctx.dispatch.appendleft(rq)
            hctx.restart = True
            hctx.dispatch_busy = (7 * hctx.dispatch_busy + 16) // 8   # blk_mq_update_dispatch_busy
            return False
        hctx.dispatch_busy = 7 * hctx.dispatch_busy // 8
        rq.started = True
        rq.t_dispatch = now
        n = self.in_flight
        if n:
            self.vtime += (now - self._vt_last) / n
        self._vt_last = now
        rq.v_start = self.vtime
        for bio in rq.bios:
            bio.t_dispatch = now
        self.in_flight += 1
        hctx.in_flight += 1
        hctx.dispatched += 1
        self.queued -= 1
        if rq.op != REQ_OP_FLUSH:       # a flush request is not accounted as I/O
            self.stats.request_issued(now)
        if self._tp_block_rq_issue is not None:
            fire(self._tp_block_rq_issue, "block_rq_issue", self, rq, now)
        if self.rq_qos.issue is not None:
            # blk_mq_start_request: rq_qos_issue after the tracepoint (with QUEUE_FLAG_STATS,
            # which wbt, iolatency and iocost turn on)
            self.rq_qos.issue(rq, now)
        device.submit(rq, now)
        self._arm_device()
        return True

    def _delay_run_all(self, when: float) -> None:
        """``blk_mq_delay_run_hw_queues``: run every hctx at ``when`` (one pending)."""
        if self._run_all_due is None or when < self._run_all_due:
            self._run_all_due = when
            self.clock.call_at(when, self._delayed_run_all)

    def _delayed_run_all(self, event) -> None:
        if self._run_all_due is None or event.when < self._run_all_due:
            return
        self._run_all_due = None
        self.run_hw_queues(event.when)

    # ------------------------------------------------------------------ elevator timers
    def _check_elevator_timer(self) -> None:
        """An elevator's ``kick_queue`` (run its hctxs soon) and ``wakeup_at``."""
        elevator = self.elevator
        if elevator.kick_queue:
            elevator.kick_queue = False
            self._delay_run_all(self.clock.now)
        due = elevator.wakeup_at
        if due is not None and due != self._elv_wake_due:
            if not (isinstance(due, (int, float)) and due >= self.clock.now):
                raise self.elevator_fault("wakeup_at =", f"{describe(due)}: expected None or "
                                          f"a time in seconds at or after now")
            self._elv_wake_due = due
            self.clock.call_at(due, self._elevator_wakeup)
        elevator.timers_changed = False

    def _elevator_wakeup(self, _ev=None) -> None:
        now = self.clock.now
        if self._elv_wake_due is None or now < self._elv_wake_due:
            return
        self._elv_wake_due = None
        elevator = self.elevator
        if elevator is None:
            return
        if elevator.wakeup_at is not None and elevator.wakeup_at <= now:
            elevator.wakeup_at = None
            elevator.timer_fired(now)
        self.run_hw_queues(now)

    @property
    def iocost(self):
        """The queue's iocost (`blksim.block.mq.iocost.Ioc`), or None."""
        return self.rq_qos.get(RQ_QOS_COST)

    @property
    def wbt(self):
        """The queue's writeback throttling (`blksim.block.mq.wbt.Wbt`) on its rq_qos
        chain, or None."""
        return self.rq_qos.get(RQ_QOS_WBT)

    def throttle_delay(self, pid: int, now: float) -> float:
        """See `QueueProtocol.throttle_delay`: iocost's mark, when iocost is on."""
        ioc = self.rq_qos.get(RQ_QOS_COST)
        return 0.0 if ioc is None else ioc.throttle_delay(pid, now)

    def process_exited(self, pid: int) -> None:
        """A task ended: its plug is flushed (``exit_io_context``), its context forgotten."""
        ioc = self.rq_qos.get(RQ_QOS_COST)
        if ioc is not None:
            ioc.process_exited(pid)
        plug = self._plugs.pop(pid, None)
        now = self.clock.now
        if plug is not None and plug.rqs:
            self._flush_plug(plug, now, explicit=False)
        if self.elevator is not None:
            self.elevator.process_exited(pid, now)
            if self._elv_timers and self.elevator.timers_changed:
                self._check_elevator_timer()

    # ------------------------------------------------------------------ inspection
    @property
    def capacity(self) -> int:
        """The device's size in sectors."""
        return self.device.capacity

    def allocated(self, direction: int) -> int:
        """Requests allocated and not freed. blk-mq has one pool for both directions:
        the count is the same for either (what writeback's congestion test reads)."""
        return self.count

    def pending(self) -> int:
        """Requests allocated and not completed, plus bios asleep for a tag."""
        return self.count + self._sleeping

    def idle(self) -> bool:
        """True when nothing is queued, waiting or at the device."""
        return self.pending() == 0 and self.device.outstanding() == 0

    def hw_queue_counts(self) -> tuple:
        """Per hardware queue: (its CPUs, requests sent to the device, submitters that
        slept for one of its tags, requests the device gave back), counted from the start."""
        out = []
        for h in self.hctxs:
            sleeps = h.tags.sleeps + (h.sched_tags.sleeps if h.sched_tags is not None else 0)
            out.append((h.cpus, h.dispatched, sleeps, h.requeued))
        return tuple(out)

    @property
    def bio_merges(self) -> int:
        """Bios merged into a queued request, both directions."""
        return self.stats.bio_merges
