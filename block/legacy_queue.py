"""The legacy single-queue block layer of a Linux 2.6.18 kernel, for one device.

`RequestQueue` turns bios into requests (merging where it can), holds them in an
elevator, and feeds the device. It follows ``__make_request``, ``elv_merge``,
``attempt_merge``, ``elv_insert``, the plugging code and ``request_fn``/
``blk_run_queue`` of Linux 2.6.18 (block/ll_rw_blk.c, block/elevator.c;
docs/block-layer.md):

* merging: the one-hit ``last_merge`` cache, a back-merge hash keyed on request
  end sector (inside deadline/AS/CFQ in 2.6.18, generic from 2.6.19), then the
  elevator's front-merge lookup; a grown request is coalesced with its
  neighbour; ``max_sectors_kb`` bounds a request;
* ``nr_requests`` per direction: a bio that finds its direction full waits
  (its Q time keeps running) until a request of that direction is freed, and
  its submitter sleeps meanwhile, as in ``get_request_wait`` (`when_request`
  tells it when to go on);
* plugging: an empty queue is plugged when a request is added and unplugged
  after ``unplug_delay`` (3 ms, at least one jiffy) or once 4 requests are
  pending; a sync bio unplugs at once;
* dispatch to the device while it has room (``device/queue_depth``), taking the
  head of the dispatch list or asking the elevator when the list is empty;
* switching the elevator at run time (`switch_elevator`), as a write to
  ``queue/scheduler`` does (``elevator_switch``, 2.6.18): bypass mode, forced
  drain of the old elevator, wait until every request it handled has completed,
  then the new elevator takes over;
* disk-time accounting: every instant the device is busy is split equally among
  the requests in service (dispatched, not yet completed), kept as a virtual
  time so each request's share costs O(1) (see docs/results.md);
* the elevator boundary: what an elevator hands back is checked where the block
  layer takes it (`blksim.block.elevator_boundary`, whose `ElevatorBoundary` this
  queue is).
* tracepoints: the kernel's block tracepoints fire at each of these steps to
  whoever subscribed (`blksim.block.tracepoints`, docs/tracepoints.md); a completed
  bio goes to the ``block_bio_complete`` subscribers, then to its ``on_complete``.

Callers above the block layer use the queue through the queue protocol
(`blksim.block.queue_protocol`), of which this is the legacy implementation.

It is plain Python driven by a *clock*: any object with a ``now`` attribute (s),
``call_at(when, fn)`` that later calls ``fn(event)`` with an event whose ``when``
is the time it fires, and ``requeue(when, event)`` that queues such an event
again (`sim.clock.SimpyClock`). The device's room is not asked of it: by the
device protocol (disk_models/base.py) it takes requests while fewer than its
``queue_depth`` are outstanding, and the queue counts those itself (``in_flight``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from blksim._compat import trace_boundary
from blksim.block.elevator import Elevator
from blksim.block.legacy_switch import LegacySwitching
from blksim.block.diskstats import DiskStats
from blksim.block.dispatch_queue import DispatchQueue
from blksim.block.flush import LegacyOrdered, OrderedRequest
# SimulationError and ElevatorFault are the block layer's errors: imported from here too
from blksim.block.elevator_boundary import (  # noqa: F401
    ElevatorBoundary, ElevatorFault, SimulationError, describe)
from blksim.block.request import Request
from blksim.block.tracepoints import Traced, fire


@dataclass(frozen=True)
class QueueSettings:
    """The ``queue/`` tunables of one block device and the kernel era."""

    nr_requests: int = 128
    max_sectors_kb: int = 512
    nomerges: int = 0
    unplug_thresh: int = 4
    unplug_delay_ms: int = 3
    hz: int = 250
    generic_backmerge_hash: bool = False   # True from Linux 2.6.19


class RequestQueue(LegacySwitching, ElevatorBoundary, Traced):
    """One block device's request queue: merging, plugging, limits and dispatch.

    It fires the kernel's block tracepoints (`blksim.block.tracepoints`) to whoever
    subscribes. A completed bio is passed to the ``block_bio_complete`` subscribers,
    then to its submitter's ``on_complete`` (``bio_endio``), after the queue has been
    run again (as the kernel wakes a waiting process only after the completion
    handler restarted the queue).
    """

    kind = "disk"
    multiqueue = False
    cpu_time = None             # the 2.6 lines have no CPU model (queue protocol)

    def __init__(self, elevator_factory, device, clock, settings: QueueSettings,
                 name: str = "sda") -> None:
        self.name = name               # the disk's name and (major, minor): sim.host sets them
        self.number = (8, 0)
        self.latency = None            # per-device Q2C/D2C in a run with several devices
        self.settings = settings
        self.device = device
        self.clock = clock
        self.dq = DispatchQueue()
        self.elevator = self._built(elevator_factory)
        # Elevators that work on the device's geometry (the textbook ones) are told it.
        if self.elevator.wants_device:
            self.elevator.attach_device(device)
        self.max_sectors = settings.max_sectors_kb * 2
        self.nr_requests = settings.nr_requests
        self._nomerges = settings.nomerges         # settings are frozen: read once
        self._unplug_thresh = settings.unplug_thresh
        self.elevator_name = self.elevator.name
        self.count = [0, 0]                   # allocated requests: [reads, writes]
        self.waiting = (deque(), deque())     # bios waiting for a free request, FIFO
        self._on_request: dict = {}           # bio id -> its sleeping submitter's wake-up
        self.waited = 0                       # bios that had to wait for a request
        self.in_flight = 0                    # requests at the device
        # The device takes requests while fewer than this are outstanding (its
        # can_accept, counted here: in_flight is what the device holds).
        self._depth = device.queue_depth
        # Requests in the elevator or on the dispatch list: sum(count) - in_flight,
        # kept as a number of its own because nearly every step asks for it.
        self.queued = 0
        self.last_merge: Request | None = None
        self.merge_hash: dict[int, Request] = {}
        self.plugged = False
        self._plug_token = 0
        # At HZ=250 3 ms rounds down to 0 jiffies; 2.6.18 then uses one jiffy.
        self._unplug_jiffies = max(1, settings.unplug_delay_ms * settings.hz // 1000)
        self._elevator_hooks()
        self._dev_due: float | None = None
        # The device event being handled, reused for the next one (see _device_event).
        self._dev_spare = None
        self._elv_wake_due: float | None = None
        self._spin_at = -1.0                  # the instant of the idle runs counted
        self._spins = 0                       # queue runs there that issued nothing
        self._stall_done = -1                 # completions when the idle runs began
        self._stalls = 0                      # idle runs since, device idle, requests waiting
        self._stall_since = 0.0
        self.requests_allocated = 0           # also the next request's id
        self.stats = DiskStats()              # /proc/diskstats' counters (iostat)
        self.request_merges = 0
        # Disk-time accounting: vtime advances by dt / in_flight while requests are
        # in service; a request's share is vtime(completion) - vtime(dispatch).
        # At queue depth 1 at most one request is in service and vtime is real time.
        self.vtime = 0.0
        self._vt_last = 0.0
        self._vt_on = getattr(device, "queue_depth", 2) != 1
        # Elevator switching: the switch in progress (None) and those waiting for it.
        self._switch = None           # the switch in progress (legacy_switch._Switch)
        self._switch_waiting: list = []
        self._unsorted = 0           # outstanding requests made in bypass mode (no elvpriv)
        self.switches_done: list[dict] = []
        # Barriers (bios with preflush or fua): 2.6.18's ordered sequences
        self.ordered = LegacyOrdered(device)

    def _elevator_hooks(self) -> None:
        """Cache what the block layer needs to know of the attached elevator."""
        elevator = self.elevator
        settings = self.settings
        self.use_hash = settings.nomerges == 0 and (
            settings.generic_backmerge_hash or elevator.own_backmerge_hash)
        self._elv_timers = elevator.uses_timers
        # Hooks an elevator leaves as the base class's no-ops are not called at all.
        cls = type(elevator)
        self._elv_activate = None if cls.activate is Elevator.activate else elevator.activate
        self._elv_completed = (None if cls.completed is Elevator.completed
                               else elevator.completed)
        self.wire_elevator_msg()

    # ------------------------------------------------------------------ submission
    def submit_bio(self, bio, now: float | None = None) -> bool:
        """Queue a bio at the current time (``now``, when the caller has it at hand).

        Returns True when it was merged or got a request, False when it waits for
        a free request of its direction (it is queued for one and will proceed).
        """
        if now is None:
            now = self.clock.now
        if self._tp_block_bio_queue is not None:
            fire(self._tp_block_bio_queue, "block_bio_queue", self, bio, now)
        bio.t_queue = now
        sector = bio.sector
        end = sector + bio.nr_sectors
        if sector < 0 or (end <= sector and not bio.preflush) or end > self.device.capacity:
            raise SimulationError(
                f"bio {bio.sector}+{bio.nr_sectors} sectors from pid {bio.pid} lies outside the "
                f"device (capacity {self.device.capacity} sectors)")
        if bio.preflush or bio.fua:
            return self.ordered.submit(self, bio, now)     # a barrier (block/flush.py)
        if self.queued and self._nomerges != 2:
            if self._try_merge(bio, now):
                self.stats.bio_merged(bio.write)
                if bio.sync and self.plugged:
                    self.unplug()
                return True
        w = 1 if bio.write else 0
        if self.count[w] >= self.nr_requests:
            self.waiting[w].append(bio)
            self.waited += 1
            if self._tp_block_sleeprq is not None:
                fire(self._tp_block_sleeprq, "block_sleeprq", self, bio, w, now)
            return False
        self._add_new_request(bio, now)
        return True

    def _add_new_request(self, bio, now: float) -> None:
        """``get_request`` then ``add_request`` (``__make_request``, 2.6.18)."""
        w = 1 if bio.write else 0
        if self._tp_block_getrq is not None:
            fire(self._tp_block_getrq, "block_getrq", self, bio, w, now)
        self.count[w] += 1
        self.queued = queued = self.queued + 1
        rq = Request(self.requests_allocated, bio, now, self)
        self.requests_allocated += 1
        self.stats.request_added(now)
        if self._switch is not None:
            self._bypass_add(rq)
            return
        sync = bio.sync
        run_now = False
        if queued == 1:    # the queue was empty
            if sync:
                # Plugged here and unplugged below before anything else can happen:
                # the same as running the queue once after the add, without a timer.
                run_now = True
            else:
                self._plug(now)
        if self._tp_block_rq_insert is not None:     # elv_insert
            fire(self._tp_block_rq_insert, "block_rq_insert", self, rq, now)
        rq.in_elevator = True
        if self.last_merge is None:
            self.last_merge = rq
        if self.use_hash:
            self.merge_hash[rq.sector + rq.nr_sectors] = rq
        self.elevator.add(rq, now)
        if self.plugged and self.queued >= self._unplug_thresh:
            self.unplug()
        if sync:
            if run_now:
                if self.in_flight < self._depth:    # (else run_queue would issue nothing)
                    self.run_queue(now)
            elif self.plugged:
                self.unplug()
        if self._elv_timers and self.elevator.timers_changed:
            self._check_elevator_timer()

    # ------------------------------------------------------------------ merging
    def _mergeable(self, rq, bio) -> bool:
        return (rq.in_elevator and not rq.nomerge and not rq.started
                and rq.write == bio.write)

    def _try_merge(self, bio, now: float) -> bool:
        """``elv_merge`` then the merge itself; False means a new request is needed."""
        rq = self.last_merge
        front = False
        found = None
        if rq is not None and self._mergeable(rq, bio):
            if rq.sector + rq.nr_sectors == bio.sector:
                found = rq
            elif rq.sector == bio.sector + bio.nr_sectors:
                found, front = rq, True
        if found is None and self._nomerges == 0:
            if self.use_hash:
                rq = self.merge_hash.get(bio.sector)
                if rq is not None and self._mergeable(rq, bio):
                    found = rq
            if found is None:
                rq = self.elevator.merge_candidate(bio, now)
                if rq is not None and rq.__class__ is not Request:
                    raise self.elevator_fault(
                        "merge_candidate()", f"returned {describe(rq)}: expected a request "
                        f"it holds, or None")
                if rq is not None and self._mergeable(rq, bio) \
                        and rq.sector == bio.sector + bio.nr_sectors:
                    found, front = rq, True
        if found is None:
            return False
        rq = found
        if rq.nr_sectors + bio.nr_sectors > self.max_sectors:
            # ll_back/front_merge_fn: the request is full; never try it again.
            rq.nomerge = True
            if self.last_merge is rq:
                self.last_merge = None
            self._unhash(rq)
            return False
        if bio.ioprio < rq.ioprio:      # ioprio_best: the lower class, then level
            rq.ioprio = bio.ioprio
        if front:
            if self._tp_block_bio_frontmerge is not None:
                fire(self._tp_block_bio_frontmerge, "block_bio_frontmerge", self, bio, now)
            rq.bios.insert(0, bio)
            rq.sector = bio.sector
            rq.nr_sectors += bio.nr_sectors
            # The kernel calls the elevator's merged hook only when no coalescing
            # followed; we call it first so the elevator re-sorts the request under
            # its new start before its predecessor is looked up. Same result.
            self.elevator.merged(rq, True, now)
            self.last_merge = rq
            self._attempt_merge(self._neighbour("former", rq), rq, now)
        else:
            if self._tp_block_bio_backmerge is not None:
                fire(self._tp_block_bio_backmerge, "block_bio_backmerge", self, bio, now)
            self._unhash(rq)
            rq.bios.append(bio)
            rq.nr_sectors += bio.nr_sectors
            if self.use_hash:
                self.merge_hash[rq.sector + rq.nr_sectors] = rq
            self.last_merge = rq
            if not self._attempt_merge(rq, self._neighbour("latter", rq), now):
                self.elevator.merged(rq, False, now)
        return True

    def _neighbour(self, hook: str, rq):
        """The elevator's ``former(rq)`` or ``latter(rq)``: a request, or None."""
        other = getattr(self.elevator, hook)(rq)
        if other is not None and other.__class__ is not Request:
            raise self.elevator_fault(f"{hook}()", f"returned {describe(other)}: expected a "
                                      f"request it holds, or None")
        return other

    def _attempt_merge(self, rq, nxt, now: float) -> bool:
        """Coalesce two adjacent requests (``attempt_merge``); `rq` survives."""
        if rq is None or nxt is None:
            return False
        if not (rq.in_elevator and nxt.in_elevator) or rq.nomerge or nxt.nomerge:
            return False
        if rq.sector + rq.nr_sectors != nxt.sector or rq.write != nxt.write:
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
        self.elevator.requests_merged(rq, nxt, now)
        nxt.in_elevator = False
        # Gone (its bios are rq's now): marked started, with no dispatch time, so that
        # an elevator that dispatches it all the same is caught where run_queue takes it.
        nxt.started = True
        if self.use_hash:
            self.merge_hash[rq.sector + rq.nr_sectors] = rq
        self.last_merge = rq
        self.request_merges += 1
        self.stats.request_merged_away(now)
        self.queued -= 1
        self._free_request(nxt)
        return True

    def _unhash(self, rq) -> None:
        if self.use_hash:
            key = rq.sector + rq.nr_sectors
            if self.merge_hash.get(key) is rq:
                del self.merge_hash[key]

    # ------------------------------------------------------------------ request pool
    def _free_request(self, rq) -> None:
        w = 1 if rq.write else 0
        self.count[w] -= 1
        if self.waiting[w] and self.count[w] < self.nr_requests:
            # The sleeping submitter runs after the current handler, as a woken task would.
            self.clock.call_at(self.clock.now, self._wake_waiter_read if w == 0
                               else self._wake_waiter_write)

    def _wake_waiter_read(self, _ev=None) -> None:
        self._wake_waiter(0)

    def _wake_waiter_write(self, _ev=None) -> None:
        self._wake_waiter(1)

    def _wake_waiter(self, w: int) -> None:
        # 2.6.18 does not retry merging after sleeping in get_request_wait.
        if self.waiting[w] and self.count[w] < self.nr_requests:
            bio = self.waiting[w].popleft()
            self._add_new_request(bio, self.clock.now)
            wake = self._on_request.pop(bio.id, None)
            if wake is not None:
                wake(bio)

    @property
    def bio_merges(self) -> int:
        """Bios merged into a queued request, both directions (diskstats' merges)."""
        merges = self.stats.merges
        return merges[0] + merges[1]

    def when_request(self, bio, wake) -> None:
        """Call ``wake(bio)`` once ``bio``, which `submit_bio` left waiting for a free
        request, has one: its submitter slept in the meantime (Linux 2.6's
        ``get_request_wait``) and goes on from there."""
        self._on_request[bio.id] = wake

    # ------------------------------------------------------------------ plugging
    def _plug(self, now: float) -> None:
        if self.plugged:
            return
        self.plugged = True
        # Every plug takes a new token and its timer acts only while that plug is
        # in place: removing a plug (plugged = False) needs no token of its own.
        self._plug_token += 1
        token = self._plug_token
        if self._tp_block_plug is not None:
            fire(self._tp_block_plug, "block_plug", self, now)
        hz = self.settings.hz
        # A kernel timer fires on a tick: jiffies + delay, from the current jiffy.
        when = (math.floor(now * hz + 1e-9) + self._unplug_jiffies) / hz
        self.clock.call_at(when, lambda _ev: self._unplug_timer(token))

    def _unplug_timer(self, token: int) -> None:
        """``blk_unplug_timeout``, then kblockd's ``blk_unplug_work``."""
        if self.plugged and token == self._plug_token:
            if self._tp_block_unplug_timer is not None:
                fire(self._tp_block_unplug_timer, "block_unplug_timer", self,
                     self.count[0] + self.count[1], self.clock.now)
            self.unplug()

    def throttle_delay(self, pid: int, now: float) -> float:
        """See `QueueProtocol.throttle_delay`: 2.6 has no controller that marks a task."""
        return 0.0

    def run_backing_dev(self) -> None:
        """``blk_run_backing_dev`` -> ``generic_unplug_device`` (2.6.18): a process about
        to wait for its own I/O unplugs the queue."""
        self.unplug()

    def unplug(self) -> None:
        """Remove the plug and run the queue (``__generic_unplug_device``); no-op if unplugged."""
        if not self.plugged:
            return
        if self._tp_block_unplug_io is not None:
            fire(self._tp_block_unplug_io, "block_unplug_io", self,
                 self.count[0] + self.count[1], self.clock.now)
        self.plugged = False
        self.run_queue()

    # ------------------------------------------------------------------ dispatch
    def run_queue(self, now: float | None = None) -> bool:
        """The driver's ``request_fn``: hand requests to the device while it has room.

        ``now`` is the current time when the caller has it at hand (else the
        clock is asked). Returns True when it issued at least one request; the
        device event is then armed.
        """
        if not self.queued or self.in_flight >= self._depth:
            # nothing queued (bios waiting for a request have none yet), or no room
            if self._elv_timers and self.elevator.timers_changed:
                self._check_elevator_timer()
            return False
        if now is None:
            now = self.clock.now
        device = self.device
        depth = self._depth
        dq = self.dq
        activate = self._elv_activate
        issue = self._tp_block_rq_issue
        vt = self._advance_vtime(now) if self._vt_on else now
        submitted = False
        while True:
            if not dq:
                moved = self.elevator.dispatch(now, False)
                if not dq:
                    if moved or (self.queued and (self.elevator.empty() or (
                            self.elevator.timers_changed and not self._elv_timers))):
                        self._nothing_dispatched(moved)
                    break
            rq = dq[0]
            if rq.__class__ is not Request or rq.started or rq.owner is not self:
                if rq.__class__ is OrderedRequest:
                    # a barrier's sequence: blk_do_ordered (block/flush.py) issues its step
                    if not self.ordered.dispatch(self, now, vt):
                        break
                    submitted = True
                    if self.in_flight >= depth:
                        break
                    continue
                self._bad_dispatch(rq)      # the elevator boundary's one per-request test
            dq.pop_head()
            # blkdev_dequeue_request: off the merge candidates
            if self.last_merge is rq:
                self.last_merge = None
            self._unhash(rq)
            rq.started = True
            rq.t_dispatch = now
            rq.v_start = vt
            for bio in rq.bios:
                bio.t_dispatch = now
            if activate is not None:
                activate(rq, now)
            self.in_flight += 1
            self.queued -= 1
            if issue is not None:
                fire(issue, "block_rq_issue", self, rq, now)
            device.submit(rq, now)
            submitted = True
            if self.in_flight >= depth:
                break
        if submitted:
            self._arm_device()
        if self._elv_timers and self.elevator.timers_changed:
            self._check_elevator_timer()
        return submitted

    def _advance_vtime(self, now: float) -> float:
        """Advance the disk-time clock: each busy instant is shared equally by the
        requests in service (only kept when the device holds more than one)."""
        n = self.in_flight
        if n:
            self.vtime += (now - self._vt_last) / n
        self._vt_last = now
        return self.vtime

    def _arm_device(self) -> None:
        """Have `_device_event` called when the device's next event is due (unless an
        earlier call is already pending)."""
        due = self.device.next_event_time()
        if due is not None:
            armed = self._dev_due
            if armed is None or due < armed:
                self._dev_due = due
                spare = self._dev_spare
                if spare is not None:
                    self._dev_spare = None
                    self.clock.requeue(due, spare)
                else:
                    self.clock.call_at(due, self._device_event)

    # A JIT trace boundary (PyPy): a device's completion path (a RAID controller's
    # member I/Os, each request's bios) is compiled once, not inlined into every loop
    # that reaches it.
    @trace_boundary
    def _device_event(self, event) -> None:
        now = event.when
        armed = self._dev_due
        if armed is not None and now < armed:
            return
        self._dev_due = None
        # While this runs, the event that fired may be queued again for the
        # device's next event (_arm_device) instead of making a new one. It is
        # let go at the end: kept on self it would be a reference cycle.
        self._dev_spare = event
        done = self.device.pop_completed(now)
        if self.ordered.active and done:
            done = self.ordered.completed(self, done, now)     # a barrier's steps (block/flush.py)
        if not done:
            # an event inside the device (a RAID controller's member completing): the
            # host sees nothing until a request of its own completes
            self._arm_device()
            self._dev_spare = None
            return
        if self._tp_block_rq_complete is not None:
            for rq in done:
                fire(self._tp_block_rq_complete, "block_rq_complete", self, rq, now)
        vt = self._advance_vtime(now) if self._vt_on else now
        completed = self._elv_completed
        stats = self.stats
        for rq in done:
            rq.v_start = vt - rq.v_start        # from here on: the request's disk time
            self.in_flight -= 1
            # t_insert: its allocation, or the earlier one of a request merged into it
            stats.request_completed(rq.write, rq.nr_sectors, rq.t_insert, now)
            if completed is not None:
                completed(rq, now)
            self._free_request(rq)
        # blk_run_queue after a completion: the plug goes, the queue runs.
        self.plugged = False
        if not self.run_queue(now):
            # (When it issued, run_queue armed the device; nothing changed since.)
            self._arm_device()
        subscribers = self._tp_block_bio_complete
        name = self.name
        for rq in done:
            per_sector = rq.v_start / rq.nr_sectors      # disk time split by sectors
            rid = rq.id
            bd = rq.breakdown
            for bio in rq.bios:
                bio.t_complete = now
                bio.disk_s = per_sector * bio.nr_sectors
                bio.rq = rid
                bio.dev = name
                bio.bd = bd
                if subscribers is not None:
                    fire(subscribers, "block_bio_complete", self, bio, now)
                # (`done = ...; done(bio)`: CPython 3.11 calls a callable held in an
                # attribute faster that way than as `bio.on_complete(bio)`.)
                end_io = bio.on_complete
                if end_io is not None:
                    end_io(bio)
        self._dev_spare = None

    # ------------------------------------------------------------------ elevator timers
    def _check_elevator_timer(self) -> None:
        """Honour an elevator's requests: a queue run now (``kick_queue``, as the
        kernel's kblockd work) and a timer (``wakeup_at``)."""
        elevator = self.elevator
        if elevator.kick_queue:
            elevator.kick_queue = False
            self.clock.call_at(self.clock.now, self._kicked)
        due = elevator.wakeup_at
        if due is not None and due != self._elv_wake_due:
            self._check_wakeup(due)
            self._elv_wake_due = due
            self.clock.call_at(due, self._elevator_wakeup)
        elevator.timers_changed = False

    def _kicked(self, _ev=None) -> None:
        if not self.run_queue():
            self._idle_run("kick_queue")

    def _elevator_wakeup(self, _ev=None) -> None:
        now = self.clock.now
        if self._elv_wake_due is None or now < self._elv_wake_due:
            return      # superseded by a later timer
        self._elv_wake_due = None
        elevator = self.elevator
        if elevator.wakeup_at is None or elevator.wakeup_at > now:
            # The elevator deleted its timer (del_timer) or moved it later (mod_timer, whose
            # new time has an event of its own) since this event was queued: a deleted
            # kernel timer runs nothing, so neither the elevator nor the queue is run
            # (2.6.18: e.g. cfq_crq_enqueued's del_timer of the idle slice timer; a queue
            # run here would let cfq_select_queue end a slice that the kernel ends only
            # at the queue's next completion).
            return
        elevator.wakeup_at = None
        elevator.timer_fired(now)
        if not self.run_queue():
            self._idle_run("wakeup_at")

    # ------------------------------------------------------------------ elevator switch

    def process_exited(self, pid: int) -> None:
        """A submitting process has ended: tell the elevator (AS and CFQ keep per-process state)."""
        self.elevator.process_exited(pid, self.clock.now)
        if self._elv_timers and self.elevator.timers_changed:
            self._check_elevator_timer()

    def start_plug(self, pid: int, now: float) -> None:
        """Per-task plugging came with Linux 2.6.39; the 2.6 queue plugs itself."""

    def finish_plug(self, pid: int, now: float) -> None:
        """Per-task plugging came with Linux 2.6.39; the 2.6 queue plugs itself."""

    # ------------------------------------------------------------------ inspection
    def hw_queue_counts(self) -> tuple:
        """The 2.6 queue has no hardware queues: ()."""
        return ()

    @property
    def capacity(self) -> int:
        """The device's size in sectors."""
        return self.device.capacity

    def allocated(self, direction: int) -> int:
        """Requests of ``direction`` (0 read, 1 write) allocated and not yet freed."""
        return self.count[direction]

    def pending(self) -> int:
        """Requests allocated and not yet completed, plus bios waiting for a request."""
        return self.count[0] + self.count[1] + len(self.waiting[0]) + len(self.waiting[1])

    def idle(self) -> bool:
        """True when nothing is queued, waiting or at the device."""
        return self.pending() == 0 and self.device.outstanding() == 0
