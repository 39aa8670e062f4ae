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
* **Completion**: ``completed_request``, the request's tags freed (sleepers woken),
  ``finish_request``, restarts, then the bios end (their submitters wake after the
  completion handler, as a woken task runs after the interrupt).

Simplifications (docs/blk-mq.md): the driver never refuses a request the tags allow
unless the device itself has no room; no flush/FUA machinery, timeouts or polling;
the SCSI budget equals the tag depth (one LUN per host); a task's plug is per queue
(the kernel's doubling of the limit for a plug spanning queues is not modelled);
asynchronous runs (kblockd) happen at the same simulated instant, after the current
handler; CPU time is not charged here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from blksim.block.diskstats import DiskStats
from blksim.block.elevator_boundary import ElevatorFault, SimulationError, describe
from blksim.block.mq.cpumap import map_queues
from blksim.block.mq.elevator import MqElevator, MqHctx, MqQueueInfo
from blksim.block.mq.tags import TagMap
from blksim.block.mq.versions import variant
from blksim.block.request import MqRequest
from blksim.block.tracepoints import Traced, fire

#: Requests of a software queue a bio is tried against (``blk_bio_list_merge``).
SW_QUEUE_MERGE_SCAN = 8
#: A plugged request this large flushes the plug before the next one (BLK_PLUG_FLUSH_SIZE).
PLUG_FLUSH_SECTORS = 128 * 1024 // 512
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
    host's CPUs (software queues); ``rq_affinity`` 0/1/2 (kept for the CPU model)."""

    kernel: str = "6.6"
    nr_requests: int | None = None
    max_sectors_kb: int = 1280
    nomerges: int = 0
    hz: int = 250
    nr_hw_queues: int = 1
    nr_cpus: int = 1
    rq_affinity: int = 1
    rotational: bool = True


def default_nr_requests(queue_depth: int, with_elevator: bool) -> int:
    """``nr_requests`` when the user set none: ``2 * min(queue_depth, BLKDEV_MAX_RQ)`` with
    an elevator (``blk_mq_init_sched``), the tag depth without."""
    if not with_elevator:
        return queue_depth
    return 2 * min(queue_depth, BLKDEV_DEFAULT_RQ)


class _Plug:
    """A task's plug on this queue (``struct blk_plug``): its requests, oldest first."""

    __slots__ = ("pid", "rqs", "depth")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rqs: list = []
        self.depth = 1          # nested blk_start_plug calls are ignored; counted here


class _Sleeper:
    """A submitter asleep for a tag: calling it wakes it (it retries after the current
    handler); `MqQueue._woken_now` has it retry at once."""

    __slots__ = ("queue", "bio")

    def __init__(self, queue, bio) -> None:
        self.queue = queue
        self.bio = bio

    def __call__(self) -> None:
        self.queue._retry(self.bio)


class MqQueue(Traced):
    """One device's multi-queue request queue (see the module docstring).

    ``elevator_factory(info)`` builds the elevator (an `MqElevator`) for the queue's
    geometry, or is None for ``none``. It fires the kernel's block tracepoints
    (`blksim.block.tracepoints`)."""

    kind = "disk"
    multiqueue = True

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
        self._nomerges = settings.nomerges
        self.queue_depth = device.queue_depth        # driver tags per hctx
        nr_hw = settings.nr_hw_queues
        self.cpu_map = map_queues(settings.nr_cpus, nr_hw, self.variant.cpumap_groups)
        self.hctxs = []
        for index in range(nr_hw):
            hctx = MqHctx(index, tuple(c for c, q in enumerate(self.cpu_map) if q == index),
                          self)
            hctx.dispatch = deque()
            hctx.ctx_lists = {}
            hctx.tags = TagMap(self.queue_depth)
            self.hctxs.append(hctx)
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
        self.stats = DiskStats()
        self._dev_due = None
        self._elv_wake_due = None
        self._run_all_due = None
        self.vtime = 0.0
        self._vt_last = 0.0
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
            for hctx in self.hctxs:
                hctx.sched_tags = None
                hctx.sched_data = None
            self.use_hash = False
            return
        info = MqQueueInfo(nr_requests=nr, nr_hw_queues=len(self.hctxs),
                           queue_depth=self.queue_depth,
                           rotational=self.settings.rotational, kernel=self.variant.kernel,
                           hz=self.settings.hz, nr_cpus=self.settings.nr_cpus)
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
        for hctx in self.hctxs:
            hctx.sched_tags = TagMap(nr)
            hctx.sched_data = None
            elevator.init_hctx(hctx)
        elevator.depth_updated(nr)
        self.use_hash = elevator.uses_merge_hash and self._nomerges == 0
        cls = type(elevator)
        self._elv_completed = (None if cls.completed_request is MqElevator.completed_request
                               else elevator.completed_request)
        self._elv_timers = elevator.uses_timers

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
        if self._tp_block_bio_queue is not None:
            fire(self._tp_block_bio_queue, "block_bio_queue", self, bio, now)
        bio.t_queue = now
        end = bio.sector + bio.nr_sectors
        if bio.sector < 0 or end <= bio.sector or end > self.device.capacity:
            raise SimulationError(
                f"bio {bio.sector}+{bio.nr_sectors} sectors from pid {bio.pid} lies outside the "
                f"device (capacity {self.device.capacity} sectors)")
        if self._switch is not None:
            # the queue is frozen for an elevator switch: wait for it (blk_queue_enter)
            self._switch[4].append(bio)
            self._sleeping += 1
            self.waited += 1
            return False
        return self._submit(bio, now)

    def _submit(self, bio, now: float) -> bool:
        plug = self._plugs.get(bio.pid)
        if self._nomerges != 2:
            if plug is not None and plug.rqs and self._plug_merge(plug, bio, now):
                return True
            if self.queued and self._sched_bio_merge(bio, now):
                return True
        return self._get_request(bio, now, plug)

    def _get_request(self, bio, now: float, plug) -> bool:
        """``__blk_mq_alloc_request`` then the placement of ``blk_mq_submit_bio``."""
        ctx = bio.cpu % self.settings.nr_cpus
        hctx = self.hctxs[self.cpu_map[ctx]]
        elevator = self.elevator
        if elevator is not None:
            shallow = elevator.limit_depth(bio.write, bio.sync)
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
        if elevator is not None:
            elevator.prepare_request(rq, now)
        self._place(rq, hctx, plug, bio.sync, now)
        return True

    def _retry(self, bio) -> None:
        """A sleeper woken by a freed tag: it tries again after the current handler."""
        self.clock.call_at(self.clock.now, lambda _ev: self._woken(bio))

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
            self._insert([rq], False, now)
            self._run_async(hctx, now)

    # ------------------------------------------------------------------ merging
    def _mergeable(self, rq, bio) -> bool:
        return not rq.started and not rq.nomerge and rq.write == bio.write

    def _plug_merge(self, plug, bio, now: float) -> bool:
        """``blk_attempt_plug_merge``: 5.x tries every plugged request, newest first;
        6.x only the newest."""
        candidates = plug.rqs[-1:] if self.variant.plug_merge_newest_only \
            else reversed(plug.rqs)
        for rq in candidates:
            if self._try_bio_into(rq, bio, now, in_elevator=False):
                return True
        return False

    def _sched_bio_merge(self, bio, now: float) -> bool:
        """``blk_mq_sched_bio_merge``: the elevator's merge, or the software queue's."""
        elevator = self.elevator
        if elevator is None:
            ctx = bio.cpu % self.settings.nr_cpus
            lst = self.hctxs[self.cpu_map[ctx]].ctx_lists.get(ctx)
            return bool(lst) and self._list_merge(lst, bio, now, False)
        lst = elevator.merge_list(bio, bio.cpu % self.settings.nr_cpus)
        if lst is not None:
            return self._list_merge(lst, bio, now, True)
        return self._elv_merge(bio, now)

    def _list_merge(self, lst, bio, now: float, in_elevator: bool) -> bool:
        """``blk_bio_list_merge``: the newest requests first, at most 8, stopping at the
        first that refuses the bio for a reason other than position."""
        checked = 0
        for rq in reversed(lst):
            if checked >= SW_QUEUE_MERGE_SCAN:
                break
            checked += 1
            if rq.write != bio.write or rq.nomerge:
                continue
            if rq.end == bio.sector or rq.sector == bio.end:
                return self._try_bio_into(rq, bio, now, in_elevator)
        return False

    def _elv_merge(self, bio, now: float) -> bool:
        """``elv_merge``: the one-hit cache, the back-merge hash, the elevator's
        ``request_merge`` (front); ``queue/nomerges`` 1 keeps only the cache."""
        elevator = self.elevator
        rq = self.last_merge
        if rq is not None and self._mergeable(rq, bio) and \
                (rq.end == bio.sector or rq.sector == bio.end):
            if self._try_bio_into(rq, bio, now, True):
                return True
        if self._nomerges == 1:
            return False
        if self.use_hash:
            rq = self.merge_hash.get(bio.sector)
            if rq is not None and self._mergeable(rq, bio) and \
                    self._try_bio_into(rq, bio, now, True):
                return True
        rq = elevator.request_merge(bio, now)
        if rq is None:
            return False
        if rq.__class__ is not MqRequest or rq.owner is not self:
            raise self.elevator_fault("request_merge()", f"returned {describe(rq)}: "
                                      f"expected a request it holds, or None")
        return (self._mergeable(rq, bio) and rq.sector == bio.end
                and self._try_bio_into(rq, bio, now, True))

    def _try_bio_into(self, rq, bio, now: float, in_elevator: bool) -> bool:
        """Merge ``bio`` at the back or front of ``rq`` (``bio_attempt_back_merge``/
        ``bio_attempt_front_merge``), then coalesce ``rq`` with its neighbour in the
        elevator (``attempt_back_merge``/``attempt_front_merge``)."""
        if rq.write != bio.write or rq.nomerge or rq.started:
            return False
        if rq.end == bio.sector:
            front = False
        elif rq.sector == bio.end:
            front = True
        else:
            return False
        if rq.nr_sectors + bio.nr_sectors > self.max_sectors:
            return False
        elevator = self.elevator
        if in_elevator and elevator is not None and not elevator.allow_merge(rq, bio):
            return False
        if bio.ioprio < rq.ioprio:
            rq.ioprio = bio.ioprio
        if front:
            if self._tp_block_bio_frontmerge is not None:
                fire(self._tp_block_bio_frontmerge, "block_bio_frontmerge", self, bio, now)
            rq.bios.insert(0, bio)
            rq.sector = bio.sector
            rq.nr_sectors += bio.nr_sectors
        else:
            if self._tp_block_bio_backmerge is not None:
                fire(self._tp_block_bio_backmerge, "block_bio_backmerge", self, bio, now)
            self._unhash(rq)
            rq.bios.append(bio)
            rq.nr_sectors += bio.nr_sectors
            if self.use_hash and rq.in_elevator:
                self.merge_hash[rq.end] = rq
        self.stats.bio_merged(bio.write)
        if in_elevator and elevator is not None and rq.in_elevator:
            self.last_merge = rq
            if front:
                elevator.request_merged(rq, True, now)
                self._attempt_merge(self._neighbour("former_request", rq), rq, now)
            elif not self._attempt_merge(rq, self._neighbour("next_request", rq), now):
                elevator.request_merged(rq, False, now)
        return True

    def _neighbour(self, hook: str, rq):
        other = getattr(self.elevator, hook)(rq)
        if other is not None and (other.__class__ is not MqRequest or other.owner is not self):
            raise self.elevator_fault(f"{hook}()", f"returned {describe(other)}: expected a "
                                      f"request it holds, or None")
        return other

    def _attempt_merge(self, rq, nxt, now: float) -> bool:
        """``attempt_merge``: ``nxt`` joins ``rq`` (both queued in the elevator)."""
        if rq is None or nxt is None or not (rq.in_elevator and nxt.in_elevator):
            return False
        if rq.nomerge or nxt.nomerge or rq.end != nxt.sector or rq.write != nxt.write:
            return False
        if rq.nr_sectors + nxt.nr_sectors > self.max_sectors:
            return False
        self._unhash(rq)
        self._unhash(nxt)
        rq.bios.extend(nxt.bios)
        rq.nr_sectors += nxt.nr_sectors
        if nxt.t_insert < rq.t_insert:
            rq.t_insert = nxt.t_insert
        if nxt.ioprio < rq.ioprio:
            rq.ioprio = nxt.ioprio
        if self.variant.rq_merge_tracepoint and self._tp_block_rq_merge is not None:
            fire(self._tp_block_rq_merge, "block_rq_merge", self, nxt, now)
        self.elevator.requests_merged(rq, nxt, now)
        nxt.in_elevator = False
        nxt.started = True               # gone: its bios are rq's
        if self.use_hash:
            self.merge_hash[rq.end] = rq
        self.last_merge = rq
        self.request_merges += 1
        self.stats.request_merged_away(now)
        self.queued -= 1
        self._free(nxt, now)
        return True

    def _unhash(self, rq) -> None:
        if self.use_hash:
            key = rq.end
            if self.merge_hash.get(key) is rq:
                del self.merge_hash[key]

    # ------------------------------------------------------------------ plugging
    def start_plug(self, pid: int, now: float) -> None:
        """``blk_start_plug`` for task ``pid`` (a nested one is ignored)."""
        plug = self._plugs.get(pid)
        if plug is None:
            self._plugs[pid] = _Plug(pid)
        else:
            plug.depth += 1

    def finish_plug(self, pid: int, now: float) -> None:
        """``blk_finish_plug``: the plug's requests go on, and the plug is gone."""
        plug = self._plugs.get(pid)
        if plug is None:
            return
        plug.depth -= 1
        if plug.depth > 0:
            return
        del self._plugs[pid]
        if plug.rqs:
            self._flush_plug(plug, now, explicit=True)

    def _add_to_plug(self, plug, rq, now: float) -> None:
        """``blk_add_rq_to_plug``: flush first if the plug is full or its newest
        request is large; trace P when the plug starts holding requests."""
        rqs = plug.rqs
        if rqs and (len(rqs) >= self.variant.plug_limit or
                    (self._nomerges == 0 and rqs[-1].nr_sectors >= PLUG_FLUSH_SECTORS)):
            self._flush_plug(plug, now, explicit=True)
            rqs = plug.rqs
        if not rqs and self._tp_block_plug is not None:
            fire(self._tp_block_plug, "block_plug", self, now)
        rqs.append(rq)

    def _flush_plug(self, plug, now: float, explicit: bool) -> None:
        """``blk_mq_flush_plug_list``: trace U (UT when the task slept), then insert
        the requests hctx by hctx: into the elevator, or (without one) issued directly
        while the hctx is not busy, else into the software queues."""
        rqs = plug.rqs
        plug.rqs = []
        if self._tp_block_unplug is not None:
            fire(self._tp_block_unplug, "block_unplug", self, len(rqs), explicit, now)
        by_hctx: dict = {}
        for rq in rqs:
            by_hctx.setdefault(rq.hctx.index, []).append(rq)
        for index in sorted(by_hctx):
            batch = by_hctx[index]
            hctx = self.hctxs[index]
            if self.elevator is not None:
                self._insert(batch, False, now)
                if explicit:
                    self.run_hw_queue(hctx, now)
                else:
                    self._run_async(hctx, now)
            elif (explicit or not self.variant.direct_issue_6x) and not hctx.dispatch_busy:
                # blk_mq_try_issue_list_directly (5.x: also when the task slept)
                for rq in batch:
                    self._issue_directly(rq, hctx, now)
            else:
                self._insert(batch, False, now)
                if explicit:
                    self.run_hw_queue(hctx, now)
                else:
                    self._run_async(hctx, now)

    # ------------------------------------------------------------------ insertion
    def _insert(self, rqs, at_head: bool, now: float) -> None:
        """``blk_mq_sched_insert_requests``: into the elevator (after an insert merge,
        ``elv_attempt_insert_merge``, for an elevator with the merge hash), or into
        the software queues (``blk_mq_insert_requests``). Traces I."""
        insert = self._tp_block_rq_insert
        elevator = self.elevator
        if elevator is None:
            for rq in rqs:
                if insert is not None:
                    fire(insert, "block_rq_insert", self, rq, now)
                lst = rq.hctx.ctx_lists.get(rq.ctx)
                if lst is None:
                    lst = rq.hctx.ctx_lists[rq.ctx] = deque()
                if at_head:
                    lst.appendleft(rq)
                else:
                    lst.append(rq)
                rq.in_elevator = False
            return
        kept = []
        for rq in rqs:
            if not at_head and self.use_hash and self._insert_merge(rq, now):
                continue
            if insert is not None:
                fire(insert, "block_rq_insert", self, rq, now)
            rq.in_elevator = True
            if self.use_hash:
                self.merge_hash[rq.end] = rq
            kept.append(rq)
        if kept:
            elevator.insert_requests(kept, at_head, now)
            if self.last_merge is None:
                self.last_merge = kept[-1]
        if self._elv_timers and elevator.timers_changed:
            self._check_elevator_timer()

    def _insert_merge(self, rq, now: float) -> bool:
        """``elv_attempt_insert_merge``: a new request joins the back of a queued one
        ending where it starts. The elevator is told its request grew
        (``request_merged``), not that two of its requests merged: the new one never
        entered it (docs/blk-mq.md)."""
        target = self.merge_hash.get(rq.sector)
        if target is None or not target.in_elevator or target.nomerge \
                or target.write != rq.write or \
                target.nr_sectors + rq.nr_sectors > self.max_sectors:
            return False
        self._unhash(target)
        target.bios.extend(rq.bios)
        target.nr_sectors += rq.nr_sectors
        if rq.ioprio < target.ioprio:
            target.ioprio = rq.ioprio
        self.merge_hash[target.end] = target
        if self.variant.rq_merge_tracepoint and self._tp_block_rq_merge is not None:
            fire(self._tp_block_rq_merge, "block_rq_merge", self, rq, now)
        self.elevator.request_merged(target, False, now)
        rq.started = True
        self.request_merges += 1
        self.stats.request_merged_away(now)
        self.queued -= 1
        self._free(rq, now)
        return True

    # ------------------------------------------------------------------ dispatch
    def _run_async(self, hctx, now: float) -> None:
        """``blk_mq_run_hw_queue(hctx, async=true)``: kblockd runs it after the current
        handler, at the same instant."""
        if hctx.run_due is None:
            hctx.run_due = now
            self.clock.call_at(now, lambda _ev: self._async_run(hctx))

    def _async_run(self, hctx) -> None:
        hctx.run_due = None
        self.run_hw_queue(hctx, self.clock.now)

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
        while elevator.has_work(hctx):
            if hctx.dispatch:
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
            hctx.tags.put(rq.tag)
            rq.tag = -1
            self.requeues += 1
            if self._tp_block_rq_requeue is not None:
                fire(self._tp_block_rq_requeue, "block_rq_requeue", self, rq, now)
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
        self.queued -= 1
        if self._tp_block_rq_issue is not None:
            fire(self._tp_block_rq_issue, "block_rq_issue", self, rq, now)
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

    # ------------------------------------------------------------------ completion
    def _arm_device(self) -> None:
        due = self.device.next_event_time()
        if due is not None and (self._dev_due is None or due < self._dev_due):
            self._dev_due = due
            self.clock.call_at(due, self._device_event)

    def _device_event(self, event) -> None:
        now = event.when
        if self._dev_due is not None and now < self._dev_due:
            return
        self._dev_due = None
        done = self.device.pop_completed(now)
        if not done:
            self._arm_device()
            return
        n = self.in_flight
        if n:
            self.vtime += (now - self._vt_last) / n
        self._vt_last = now
        elevator = self.elevator
        restart = []
        woken = []
        for rq in done:
            if self._tp_block_rq_complete is not None:
                fire(self._tp_block_rq_complete, "block_rq_complete", self, rq, now)
            rq.v_start = self.vtime - rq.v_start
            self.in_flight -= 1
            hctx = rq.hctx
            hctx.in_flight -= 1
            self.stats.request_completed(rq.write, rq.nr_sectors, rq.t_insert, now)
            if elevator is not None and self._elv_completed is not None:
                self._elv_completed(rq, now)
            self._free(rq, now, woken)
            if hctx.restart and hctx not in restart:
                restart.append(hctx)
        for hctx in restart:           # blk_mq_sched_restart
            hctx.restart = False
            self.run_hw_queue(hctx, now)
        if elevator is not None and self._elv_timers and elevator.timers_changed:
            self._check_elevator_timer()
        self._arm_device()
        # The tasks woken for a tag retry before the bios' submitters go on: they run on
        # their own CPUs, while a submitter whose I/O completed has a system call to
        # return from and another to make before it asks for a tag (blksim's order for
        # events of one instant; without it a task that keeps its queue full would take
        # every freed tag for ever).
        for wake in woken:
            self._sleeping -= 1
            self._woken_now(wake)
        subscribers = self._tp_block_bio_complete
        name = self.name
        for rq in done:
            per_sector = rq.v_start / rq.nr_sectors
            for bio in rq.bios:
                bio.t_complete = now
                bio.disk_s = per_sector * bio.nr_sectors
                bio.rq = rq.id
                bio.dev = name
                bio.bd = rq.breakdown
                if subscribers is not None:
                    fire(subscribers, "block_bio_complete", self, bio, now)
                end_io = bio.on_complete
                if end_io is not None:
                    end_io(bio)
        if self._switch is not None and self.count == 0:
            self._finish_switch(now)

    def _free(self, rq, now: float, woken_into: list | None = None) -> None:
        """``blk_mq_free_request``: ``finish_request``, the tags back, the request gone.
        The sleepers a freed tag wakes retry after the current handler, or are added to
        ``woken_into`` for the caller to run."""
        elevator = self.elevator
        if elevator is not None and rq.sched_tag >= 0:
            elevator.finish_request(rq, now)
        hctx = rq.hctx
        woken = []
        if rq.tag >= 0:
            woken += hctx.tags.put(rq.tag)
            rq.tag = -1
        if rq.sched_tag >= 0:
            woken += hctx.sched_tags.put(rq.sched_tag)
            rq.sched_tag = -1
        self.count -= 1
        if woken_into is not None:
            woken_into.extend(woken)
        else:
            for wake in woken:
                wake()
        if elevator is not None and self._elv_timers and elevator.timers_changed:
            self._check_elevator_timer()

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

    # ------------------------------------------------------------------ elevator switch
    def switch_elevator(self, elevator_factory, name: str, on_done=None) -> None:
        """Write ``name`` to ``queue/scheduler`` (``elevator_switch``, 5.4-6.6): the queue
        is frozen (new bios wait, ``blk_mq_freeze_queue``) until every request has
        completed, the old elevator is exited, the new one attached with fresh
        scheduler tags, and the queue thawed. ``elevator_factory`` is None for none."""
        now = self.clock.now
        if self._switch is not None:
            self._switch_waiting.append((elevator_factory, name, on_done, now))
            return
        if name == self.elevator_name:
            info = {"scheduler": name, "asked_s": now, "started_s": now, "done_s": now,
                    "drained": 0, "bypassed": 0, "noop": True}
            self.switches_done.append(info)
            if on_done is not None:
                on_done(info)
            return
        self._switch = (elevator_factory, name, on_done, now, [])
        # the plugs are flushed as their tasks run into the frozen queue; drain now
        for plug in list(self._plugs.values()):
            if plug.rqs:
                self._flush_plug(plug, now, explicit=False)
        self.run_hw_queues(now)
        if self.count == 0:
            self._finish_switch(now)

    def _finish_switch(self, now: float) -> None:
        factory, name, on_done, asked, frozen = self._switch
        drained = self.requests_allocated
        self.last_merge = None
        self.merge_hash.clear()
        self._elv_wake_due = None
        self._attach(factory, name)
        self._switch = None
        info = {"scheduler": name, "asked_s": asked, "started_s": asked, "done_s": now,
                "drained": 0, "bypassed": len(frozen), "noop": False}
        del drained
        self.switches_done.append(info)
        if on_done is not None:
            on_done(info)
        for bio in frozen:               # blk_mq_unfreeze_queue: the waiters go on
            self._sleeping -= 1
            self.clock.call_at(now, lambda _ev, b=bio: self._thawed(b))
        if self._switch_waiting:
            factory, name, on_done, _asked = self._switch_waiting.pop(0)
            self.switch_elevator(factory, name, on_done)

    def _thawed(self, bio) -> None:
        """A bio that waited for the switch enters the thawed queue (merging first)."""
        if self._submit(bio, self.clock.now):
            wake = self._on_request.pop(bio.id, None)
            if wake is not None:
                wake(bio)
        else:
            self.waited -= 1         # asleep for a tag now: one bio, one wait

    @property
    def switching(self) -> bool:
        """True while an elevator switch is in progress (the queue frozen)."""
        return self._switch is not None

    def process_exited(self, pid: int) -> None:
        """A task ended: its plug is flushed (``exit_io_context``), its context forgotten."""
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

    @property
    def bio_merges(self) -> int:
        """Bios merged into a queued request, both directions."""
        merges = self.stats.merges
        return merges[0] + merges[1]
