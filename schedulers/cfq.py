"""CFQ, the time-sliced Completely Fair Queueing elevator of Linux 2.6.18 (block/cfq-iosched.c).

Source: block/cfq-iosched.c and include/linux/ioprio.h of Linux 2.6.18; the
code names the kernel functions it follows (cfq_dispatch_requests(),
cfq_select_queue(), cfq_arm_slice_timer(), cfq_should_preempt(), ...). In short:

* Every process has a *sync* queue (its reads); *async* requests (writes) go to
  a queue shared by all processes of the same I/O priority (class and level).
  Each queue keeps its requests in a sector-sorted tree, a FIFO, and a
  ``next_crq`` chosen AS-style (forward distance from the head, short backward
  seeks allowed at ``back_seek_penalty`` times the cost).
* Queues with requests ("busy") sit on round-robin lists: ``rr_list[level]``
  for best-effort queues without requests at the device (sorted by when they
  were last serviced, never-serviced "new" queues first), ``busy_rr`` for
  best-effort queues with requests at the device, ``cur_rr`` for RT queues and
  for the level being served, ``idle_rr`` for the IDLE class. Levels are
  spliced into ``cur_rr`` in the pattern 0 | 0,1 | 0,1,2 | ... | 0..7.
* The first queue of ``cur_rr`` (else of ``busy_rr``; the IDLE class only when
  nothing else waits and 100 ms after the last non-idle completion) becomes
  active for a *slice*: ``slice_sync``/``slice_async`` scaled by level
  (``base + base/5 * (4 - level)``), started at its first dispatch. A dispatch
  round moves up to ``quantum`` requests from it (IDLE class: 1), taking the
  FIFO head instead of ``next_crq`` once per slice if it expired.
* When the active sync queue runs dry inside its slice, CFQ *idles* up to
  ``slice_idle`` for that process's next request (2 ms for seeky processes)
  if the process's idle window is on: it is turned off when its mean think
  time exceeds ``slice_idle`` or (with command queueing detected) it seeks.
* An async queue's slice also ends after ``2*slice_async_rq*(8-level)``
  requests; a queue without idle window ends its slice after each round.

2.6.18 oddities reproduced on purpose (each is marked ``2.6.18:`` below):

* CFQ's sync/async split uses ``rq_data_dir`` (READ/WRITE), so the ``rw ==
  WRITE_SYNC`` test in ``cfq_queue_pid`` never holds: every write is async.
* ``cfq_should_preempt`` tests ``wait_request`` on the *new* queue, a flag only
  the active queue ever carries, so a new sync request preempts only an
  IDLE-class slice; the "sync preempts async" rule after it is unreachable
  (fixed in 2.6.24, which tests the active queue).
* A preempted queue is put *before the last entry* of its list
  (``list_add_tail(.., list->prev)``), not at the front as the comment says.
* ``cfq_preempt_queue`` gives the new queue its leftover slice, then
  ``__cfq_set_active_queue`` clears ``slice_end`` again, so it gets a full
  slice from its first dispatch.
* ``cfq_arm_slice_timer`` computes ``min(slice_end - 1, slice_idle)`` with an
  absolute ``slice_end``; on a running system that is always ``slice_idle``.
* There is no ``allow_merge`` hook before 2.6.20: the block layer's one-hit
  cache and back-merge hash may merge bios of different processes; CFQ's own
  front-merge lookup searches only the submitting process's queue (for a
  write bio: the async queue of its priority).

The module is in three parts: `blksim.schedulers.cfq_queue` (the io context and
queue records), `blksim.schedulers.cfq_slice` (the round-robin lists, the active
queue's slice, idling and preemption) and this one (the hooks, and moving requests
from a queue's tree to the dispatch list).

All times inside are integer jiffies at the run's HZ, as in the kernel.
"""

from __future__ import annotations

from blksim.block.elevator import Elevator, Tunable, kernel_version, msecs_to_jiffies
from blksim.block.request import IOPRIO_CLASS_IDLE, IOPRIO_CLASS_SHIFT
from blksim.schedulers.cfq_queue import (_EWMA_SAMPLES, _SEEK_SLACK, CFQ_PRIO_LISTS, UINT_MAX,
                                         CfqIoContext, CfqQueue, _Contexts,
                                         _kernel_default_jiffies, normalise_ioprio,
                                         prio_to_maxrq, prio_to_slice)
from blksim.schedulers.cfq_slice import CfqSlices

__all__ = ["CfqElevator", "CfqIoContext", "CfqQueue", "normalise_ioprio", "prio_to_maxrq",
           "prio_to_slice"]


class CfqElevator(CfqSlices, Elevator):
    """The 2.6.18 CFQ. Read-only state for displays and checks: ``active_queue``,
    ``busy_queues``, ``hw_tag``, ``rq_in_driver``, ``cur_rr``, ``busy_rr``,
    ``rr_list``, ``idle_rr``; tunables in jiffies as ``slice_idle`` etc."""

    name = "cfq"
    own_backmerge_hash = True     # 2.6.18 CFQ kept its own 64-bucket back-merge hash
    uses_timers = True
    tunables = (
        Tunable("quantum", 4, "requests", 1, UINT_MAX,
                "most requests moved from one queue in one dispatch round"),
        Tunable("queued", 8, "requests", 1, UINT_MAX,
                "minimum request allocation per queue (present in 2.6.18 sysfs, unused)"),
        Tunable("fifo_expire_sync", 125, "ms", 1, UINT_MAX,
                "age after which a sync request is served out of order (once per slice); "
                "default HZ/8 jiffies", jiffies=True),
        Tunable("fifo_expire_async", 250, "ms", 1, UINT_MAX,
                "age after which an async request is served out of order (once per slice); "
                "default HZ/4 jiffies", jiffies=True),
        Tunable("back_seek_max", 16384, "KiB", 0, UINT_MAX,
                "longest backward seek preferred to a forward one"),
        Tunable("back_seek_penalty", 2, "factor", 1, UINT_MAX,
                "cost of a backward seek relative to the same forward distance"),
        Tunable("slice_sync", 100, "ms", 1, UINT_MAX,
                "base time slice of a sync queue (scaled by level); default HZ/10 jiffies",
                jiffies=True),
        Tunable("slice_async", 40, "ms", 1, UINT_MAX,
                "base time slice of an async queue (scaled by level); default HZ/25 jiffies",
                jiffies=True),
        Tunable("slice_async_rq", 2, "requests", 1, UINT_MAX,
                "scales the most requests an async queue dispatches in a slice"),
        Tunable("slice_idle", 8, "ms", 0, UINT_MAX,
                "how long to wait for a process's next sync request (0 = never idle); "
                "default HZ/125 jiffies", jiffies=True),
    )

    #: The messages CFQ sends (``block_elv_msg``; CFQ's own ``cfq_log`` lines from
    #: 2.6.30 say much the same). A queue's pid is its process's; an async queue,
    #: shared by a priority, is pid 0. ``slice_end``'s reasons: time (the slice is
    #: used up), empty (no request left and no idling), async_rq (an async queue
    #: reached cfq_prio_to_maxrq), idle_class (an IDLE-class queue's one request),
    #: no_idle_window (a queue whose process does not get idling ends its slice after
    #: each round), idle_timeout (the idle window expired), async_request (the process
    #: idled for sent a write instead), preempted, exited, forced.
    events = {
        "slice_start": "a queue's slice starts at its first dispatch (detail: class/"
                       "sync, e.g. be/sync, rt/async, idle/sync) (__cfq_dispatch_requests, "
                       "cfq_set_prio_slice)",
        "slice_end": "the active queue's slice ends (detail: the reason, as above) "
                     "(__cfq_slice_expired and its callers)",
        "hold_start": "the idle window is armed: CFQ waits for process pid's next sync "
                      "request (detail: idle_window) (cfq_arm_slice_timer)",
        "hold_end": "the idle window ends (detail: hit, the request came, "
                    "cfq_crq_enqueued; timeout, cfq_idle_slice_timer; else the reason the "
                    "slice ended)",
        "fifo_expired": "the request dispatched is the queue's expired FIFO head "
                        "(detail: sync or async) (cfq_check_fifo)",
        "idle_window_on": "process pid gets idling again (detail: think_time, its mean "
                          "think time fits in slice_idle) (cfq_update_idle_window)",
        "idle_window_off": "process pid loses idling (detail: think_time, its mean think "
                           "time exceeds slice_idle; seeky, it seeks on a queueing device "
                           "(hw_tag); slice_idle_0) (cfq_update_idle_window)",
        "hw_tag": "command queueing detected: more than four requests at the driver "
                  "(detail: that count) (cfq_activate_request)",
    }

    def __init__(self, dispatch_queue, params=None, hz: int = 250) -> None:
        if not isinstance(hz, int) or isinstance(hz, bool) or hz <= 0:
            raise ValueError(f"hz must be a positive whole number, got {hz!r}")
        super().__init__(dispatch_queue, params, hz)
        given = params or {}
        p = self.params
        defaults = _kernel_default_jiffies(hz)

        def jiff(name: str) -> int:
            # An unset tunable keeps the kernel's HZ-derived default; a value
            # written through sysfs goes through msecs_to_jiffies (rounds up).
            if name in given:
                return msecs_to_jiffies(p[name], hz)
            return defaults[name]

        self.quantum = p["quantum"]
        self.fifo_expire = (jiff("fifo_expire_async"), jiff("fifo_expire_sync"))
        self.back_max = p["back_seek_max"] * 2          # KiB -> sectors
        self.back_penalty = p["back_seek_penalty"]
        self.slice = (jiff("slice_async"), jiff("slice_sync"))
        self.slice_async_rq = p["slice_async_rq"]
        self.slice_idle = jiff("slice_idle")
        # cfq_prio_to_slice / cfq_prio_to_maxrq per level, computed once
        self._slice_of = tuple(tuple(prio_to_slice(self.slice[s], lv) for lv in range(8))
                               for s in (0, 1))
        self._maxrq_of = tuple(prio_to_maxrq(self.slice_async_rq, lv) for lv in range(8))
        self.idle_grace = hz // 10                       # CFQ_IDLE_GRACE
        self.seeky_idle = msecs_to_jiffies(2, hz)        # idle cap for seeky processes
        self._ttime_cap = 2 * self.slice_idle            # think times are capped here
        # cfq_update_idle_window's "mean think time <= slice_idle", with the mean
        # (ttime_total + 128) / samples, is ttime_total below this, by samples
        self._idle_ttime_below = tuple((self.slice_idle + 1) * s - 128 for s in range(257))

        self.rr_list = [[] for _ in range(CFQ_PRIO_LISTS)]
        self.busy_rr: list = []
        self.cur_rr: list = []
        self.idle_rr: list = []
        self.busy_queues = 0
        self._cursors = (0, 0)                           # (cur_prio, cur_end_prio)
        self.active_queue: CfqQueue | None = None
        self.active_cic: CfqIoContext | None = None
        self.dispatch_slice = 0
        self.last_sector = 0
        # 2.6.18 zeroes last_end_request; a kernel that has been up a while has
        # jiffies far past it, so the idle-class grace starts out elapsed.
        self.last_end_request = -self.idle_grace
        self.rq_in_driver = 0
        self.hw_tag = False

        self._cics: dict[int, CfqIoContext] = _Contexts()
        self._async: dict[int, CfqQueue] = {}
        self.idle_slice_timer: int | None = None        # expiry jiffy, or None
        self.idle_class_timer: int | None = None

    @classmethod
    def create(cls, dispatch_queue, params=None, hz: int = 250,
               kernel: str = "2.6.18") -> "CfqElevator":
        """Build CFQ for a run of kernel `kernel`.

        Only the 2.6.18 algorithm (per-priority round-robin lists, era (a)) is
        modelled; later kernels get it too (their service-tree CFQ is not
        modelled). Kernels before 2.6.18 are refused, as deadline does.
        """
        if kernel_version(kernel) < (2, 6, 18):
            raise ValueError(f"cfq is modelled from kernel 2.6.18 on, got {kernel!r}; valid: 2.6.18")
        return cls(dispatch_queue, params, hz=hz)

    cur_prio = property(lambda self: self._cursors[0],
                        doc="The first best-effort level cfq_get_next_prio_level searches next.")
    cur_end_prio = property(lambda self: self._cursors[1],
                            doc="The last level it searches before raising its range.")

    # ------------------------------------------------------------------ helpers
    def _jiffies(self, now: float) -> int:
        return int(now * self.hz + 1e-9)


    def _choose_req(self, rq1, rq2):
        """``cfq_choose_req`` (lifted from AS): the one of two requests best served next.

        The kernel first prefers a sync request over an async one; every request
        of one queue has the queue's sync-ness, so that test never decides here.
        """
        if rq1 is None or rq1 is rq2:
            return rq2
        if rq2 is None:
            return rq1
        last = self.last_sector
        back_max = self.back_max
        s1 = rq1.sector
        s2 = rq2.sector
        wrap1 = wrap2 = False
        if s1 >= last:
            d1 = s1 - last
        elif s1 + back_max >= last:
            d1 = (last - s1) * self.back_penalty
        else:
            d1 = 0
            wrap1 = True
        if s2 >= last:
            d2 = s2 - last
        elif s2 + back_max >= last:
            d2 = (last - s2) * self.back_penalty
        else:
            d2 = 0
            wrap2 = True
        if not wrap1 and not wrap2:
            if d1 < d2:
                return rq1
            if d2 < d1:
                return rq2
            return rq1 if s1 >= s2 else rq2
        if wrap2 and not wrap1:
            return rq1
        if wrap1 and not wrap2:
            return rq2
        return rq1 if s1 <= s2 else rq2   # both behind: the one further back first

    def _find_next_crq(self, cfqq: CfqQueue, last):
        """``cfq_find_next_crq``: choose between `last`'s successor (wrapping to the
        first) and its predecessor in the queue's sort tree."""
        prev, nxt = cfqq.tree.neighbours(last.sched[0])
        return self._choose_req(nxt, prev)

    # ------------------------------------------------------------------ moving requests
    def _add_crq_rb(self, rq, cfqq: CfqQueue, cic: CfqIoContext) -> None:
        """``cfq_add_crq_rb``: file under its start sector in the queue's tree
        (dispatching an alias, a request filed under the same sector, first), put
        the queue on the round-robin lists if it was not, reconsider ``next_crq``."""
        tree = cfqq.tree
        key = rq.sector
        rq.sched = (key, cfqq, cic)
        alias = tree.add(key, rq)
        while alias is not None:
            self._dispatch_insert(alias)
            alias = tree.add(key, rq)
        if cfqq.rr is None:
            # cfq_add_cfqq_rr: the queue has requests: onto its round-robin list
            self.busy_queues += 1
            self._resort_rr_list(cfqq, False)
        cfqq.next_crq = self._choose_req(cfqq.next_crq, rq)

    def _del_crq_rb(self, rq) -> None:
        """``cfq_del_crq_rb``: out of the tree (``cfq_update_next_crq`` first: a
        ``next_crq`` that pointed here moves on); a queue left empty leaves its
        round-robin list."""
        key, cfqq, _ = rq.sched
        if cfqq.next_crq is rq:
            cfqq.next_crq = self._find_next_crq(cfqq, rq)
        tree = cfqq.tree
        tree.remove(key)
        if cfqq.rr is not None and not tree.keys:
            # cfq_del_cfqq_rr: the queue has no request left: off its list
            cfqq.rr.remove(cfqq)
            cfqq.rr = None
            self.busy_queues -= 1

    def _dispatch_insert(self, rq) -> None:
        """``cfq_dispatch_insert``: move `rq` from its queue onto the dispatch list in
        one-way sorted order (``elv_dispatch_sort``); ``next_crq`` moves past it and
        ``last_sector`` becomes the end of the list's tail."""
        cfqq = rq.sched[1]
        cfqq.next_crq = self._find_next_crq(cfqq, rq)
        del cfqq.fifo[rq]           # cfq_remove_request: out of the FIFO and the tree
        self._del_crq_rb(rq)
        cfqq.dispatched += 1
        dq = self.dq
        dq.add_sorted(rq)
        tail = dq[-1]
        self.last_sector = tail.sector + tail.nr_sectors

    # ------------------------------------------------------------------ dispatching
    def dispatch(self, now: float, force: bool = False) -> int:
        """``cfq_dispatch_requests`` (2.6.18): while ``cfq_select_queue`` names a queue
        other than the one just served, dispatch a round from it; stop after a
        round that leaves a queue with an idle window active.

        Its two helpers run once per round and are written in the loop:

        * ``cfq_select_queue`` (2.6.18): go on with the active queue, wait for it (no
          queue), or end its slice and make the next queue active;
        * ``__cfq_dispatch_requests`` (2.6.18): move up to ``quantum`` requests (the
          IDLE class: 1) from the queue, each the expired FIFO head (``cfq_check_fifo``,
          once per slice) or ``next_crq``; start its slice if this is its first round;
          end it after a round of the IDLE class, of a queue without idle window, or
          when an async queue reaches ``cfq_prio_to_maxrq``."""
        if not self.busy_queues:
            return 0
        j = int(now * self.hz + 1e-9)
        if force:
            return self._forced_dispatch(j)
        dispatched = 0
        prev = None
        while True:
            # cfq_select_queue
            cfqq = self.active_queue
            if cfqq is not None:
                expire = True
                if not cfqq.must_dispatch and j > cfqq.slice_end:
                    pass                                # slice used up: expire
                elif cfqq.tree.keys:
                    expire = False                      # go on with it
                elif cfqq.dispatched:
                    return dispatched                   # wait for its requests to finish
                elif cfqq.sync and self._arm_slice_timer(cfqq, j):
                    return dispatched                   # idle for its next request
                if expire:
                    if self.msg is not None:
                        self._say_expiry(cfqq, "time" if not cfqq.must_dispatch
                                         and j > cfqq.slice_end else "empty")
                    self._slice_expired(False, j)
                    cfqq = self._set_active_queue(j)
            else:
                cfqq = self._set_active_queue(j)
            if cfqq is None or cfqq is prev:
                break                       # don't repeat dispatch from the previous queue
            cfqq.must_dispatch = False
            cfqq.wait_request = False
            if self.idle_slice_timer is not None:
                if self.msg is not None:
                    self.msg("hold_end", cfqq.pid or 0, "dispatch")
                self._del_idle_slice_timer()
            # __cfq_dispatch_requests
            max_dispatch = 1 if cfqq.ioprio_class == IOPRIO_CLASS_IDLE else self.quantum
            n = 0
            fifo = cfqq.fifo
            while True:
                # cfq_check_fifo (2.6.18): the FIFO head if it expired, once per slice
                rq = cfqq.next_crq
                if not cfqq.fifo_expire and fifo:
                    head = next(iter(fifo))
                    if j > fifo[head] + cfqq.fifo_ttl:      # cfq_fifo_expire[sync]
                        cfqq.fifo_expire = True
                        rq = head
                        if self.msg is not None:
                            self.msg("fifo_expired", head.pid,
                                     "sync" if cfqq.sync else "async")
                self._dispatch_insert(rq)
                self.dispatch_slice += 1
                n += 1
                if self.active_cic is None:
                    self.active_cic = rq.sched[2]
                if not cfqq.tree.keys or n >= max_dispatch:
                    break
            if not cfqq.slice_end:
                cfqq.slice_end = j + cfqq.slice_len         # cfq_set_prio_slice
                if self.msg is not None:
                    self._say_slice_start(cfqq)
            if ((not cfqq.sync and self.dispatch_slice >= self._maxrq_of[cfqq.ioprio])
                    or cfqq.ioprio_class == IOPRIO_CLASS_IDLE or not cfqq.idle_window):
                if self.msg is not None:
                    self._say_expiry(cfqq, "idle_class" if cfqq.ioprio_class ==
                                     IOPRIO_CLASS_IDLE else "no_idle_window" if cfqq.sync
                                     else "async_rq" if self.dispatch_slice >=
                                     self._maxrq_of[cfqq.ioprio] else "no_idle_window")
                self._expire_queue(cfqq, False, j)      # cfq_slice_expired: cfqq is active
            dispatched += n
            # (end of __cfq_dispatch_requests)
            if cfqq.idle_window and self.active_queue is not None:
                break
            prev = cfqq
        return dispatched

    def _forced_dispatch(self, j: int) -> int:
        """``cfq_forced_dispatch``: every queue's every request, then end the slice."""
        dispatched = 0
        lists = list(self.rr_list) + [self.busy_rr, self.cur_rr, self.idle_rr]
        for lst in lists:
            for cfqq in list(lst):
                while cfqq.next_crq is not None:
                    self._dispatch_insert(cfqq.next_crq)
                    dispatched += 1
        if self.msg is not None and self.active_queue is not None:
            self._say_expiry(self.active_queue, "forced")
        self._slice_expired(False, j)
        return dispatched

    # ------------------------------------------------------------------ queues and contexts
    def _get_queue(self, cic: CfqIoContext, sync: bool) -> CfqQueue:
        """``cfq_get_queue``: the process's sync queue, or its priority's async queue."""
        if sync:
            cfqq = cic.sync_q
            if cfqq is None:
                cfqq = self._new_queue(cic.pid, True, cic.ioprio)
                cic.sync_q = cfqq
            elif cfqq.prio_changed:
                self._init_prio_data(cfqq, cic.ioprio)
            return cfqq
        cfqq = cic.async_q
        if cfqq is None:
            key = cic.ioprio
            cfqq = self._async.get(key)
            if cfqq is None:
                cfqq = self._new_queue(None, False, key)
                self._async[key] = cfqq
            cic.async_q = cfqq
        return cfqq

    def _new_queue(self, pid, sync: bool, value: int) -> CfqQueue:
        cfqq = CfqQueue(pid, sync, value, self.slice_idle)
        cfqq.slice_len = self._slice_of[sync][cfqq.ioprio]
        cfqq.fifo_ttl = self.fifo_expire[sync]
        return cfqq

    def _init_prio_data(self, cfqq: CfqQueue, value: int) -> None:
        """``cfq_init_prio_data`` after the process's priority changed."""
        cfqq.prio_value = value
        cfqq.ioprio_class, cfqq.ioprio = normalise_ioprio(value)
        cfqq.slice_len = self._slice_of[cfqq.sync][cfqq.ioprio]
        if cfqq.ioprio_class == IOPRIO_CLASS_IDLE:
            cfqq.idle_window = False
        if cfqq.rr is not None:
            self._resort_rr_list(cfqq, False)
        cfqq.prio_changed = False

    def _cic(self, rq, j: int) -> CfqIoContext:
        pid = rq.pid
        cic = self._cics.get(pid)
        cls, level = normalise_ioprio(rq.ioprio)
        value = (cls << IOPRIO_CLASS_SHIFT) | level
        if cic is None:
            cic = CfqIoContext(pid, value, j)
            self._cics[pid] = cic
        cic.raw_ioprio = rq.ioprio
        if cic.ioprio != value:
            # changed_ioprio: a new async queue; the sync queue re-reads its priority
            cic.ioprio = value
            cic.async_q = None
            if cic.sync_q is not None:
                cic.sync_q.prio_changed = True
        return cic

    # ------------------------------------------------------------------ hooks
    def add(self, rq, now: float) -> None:
        """``cfq_insert_request``: into its queue's tree and FIFO, then
        ``cfq_crq_enqueued`` (2.6.18, written here: it runs once per request): update
        the process's think-time and seek statistics and its idle window; let the
        active queue's awaited request rip, or preempt."""
        j = int(now * self.hz + 1e-9)
        cic = self._cics[rq.pid]
        if cic.raw_ioprio != rq.ioprio:
            cic = self._cic(rq, j)            # a new process, or a new priority
        # 2.6.18: cfq_queue_pid(tsk, rq_data_dir(rq)): the async queue for any write
        cfqq = cic.async_q if rq.write else cic.sync_q
        if cfqq is None or cfqq.prio_changed:
            cfqq = self._get_queue(cic, not rq.write)   # (cfq_init_prio_data)
        self._add_crq_rb(rq, cfqq, cic)
        cfqq.fifo[rq] = j

        # cfq_crq_enqueued
        if rq.write:
            # a sync process issued an async request while CFQ idles for it
            if cic is self.active_cic and self._del_idle_slice_timer():
                if self.msg is not None:
                    self.msg("hold_end", cic.pid, "async_request")
                    if self.active_queue is not None:
                        self._say_expiry(self.active_queue, "async_request")
                self._slice_expired(False, j)
                self.kick_queue = True
            return
        sector = rq.sector
        old, ttotal, stotal, seek_mean, last = cic.stats
        samples = _EWMA_SAMPLES[old]
        # cfq_update_io_thinktime (2.6.18): EWMA of the time from the process's last
        # sync completion to this sync request, capped at 2*slice_idle.
        ttime = j - cic.last_end_request
        if ttime > self._ttime_cap:
            ttime = self._ttime_cap
        elif ttime < 0:
            ttime = 0
        ttotal = (7 * ttotal + 256 * ttime) // 8

        # cfq_update_io_seektime (2.6.18): EWMA of |start - end of the last request|,
        # clamped as AS does against the odd far seek (more loosely while the first
        # samples come in).
        sdist = abs(sector - last)
        limit = seek_mean * 4 + _SEEK_SLACK[old]
        if sdist > limit:
            sdist = limit
        stotal = (7 * stotal + 256 * sdist) // 8
        seek_mean = (stotal + samples // 2) // samples
        cic.stats = (samples, ttotal, stotal, seek_mean, sector + rq.nr_sectors)

        # cfq_update_idle_window (2.6.18): off with slice_idle=0 or for a seeky process
        # on a queueing device; else on iff the mean think time (ttime_mean) fits. (Its
        # test for an exited task never holds here: an exited process's context has
        # left _cics.)
        if self.msg is not None:
            was = cfqq.idle_window
        if not self.slice_idle or (self.hw_tag and seek_mean > 128 * 1024):
            cfqq.idle_window = False
        elif samples > 80:
            cfqq.idle_window = ttotal < self._idle_ttime_below[samples]
        if self.msg is not None and cfqq.idle_window != was:
            self._say_idle_window(cfqq, seek_mean)

        active = self.active_queue
        if active is None:
            return
        if cfqq is active:
            if cfqq.wait_request:
                cfqq.must_dispatch = True
                if self.msg is not None and self.idle_slice_timer is not None:
                    self.msg("hold_end", cic.pid, "hit")
                self._del_idle_slice_timer()
                self.kick_queue = True
        elif self._should_preempt(cfqq, rq):
            if self.msg is not None:
                self._say_expiry(active, "preempted")
            self._preempt_queue(cfqq, j)
            cfqq.must_dispatch = True
            self.kick_queue = True

    def merge_candidate(self, bio, now: float):
        """``cfq_find_rq_fmerge``: a request starting at the bio's end, in the
        submitter's own queue only (2.6.18 looks up the queue by
        ``cfq_queue_pid(tsk, bio_data_dir(bio))``: reads the process's sync queue,
        writes the async queue of its priority)."""
        cic = self._cics[bio.pid]            # (a pid without a context: no queues)
        if bio.write:
            cfqq = cic.async_q
            if cfqq is None:
                return None
        else:
            cfqq = cic.sync_q
            if cfqq is None:
                return None
        if not cfqq.tree.keys:
            return None
        return cfqq.tree.find(bio.sector + bio.nr_sectors)

    def merged(self, rq, front: bool, now: float) -> None:
        """``cfq_merged_request``: re-file after a front merge moved the start sector."""
        key, cfqq, cic = rq.sched
        if rq.sector != key:
            if cfqq.next_crq is rq:
                cfqq.next_crq = self._find_next_crq(cfqq, rq)
            cfqq.tree.remove(key)
            # cfq_reposition_crq_rb: rb_erase + re-add; the queue stays on its list
            # (it still holds this request).
            self._add_crq_rb(rq, cfqq, cic)

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``cfq_merged_requests``: `rq` takes `nxt`'s FIFO place if `nxt` is older,
        then `nxt` leaves the elevator."""
        self.merged(rq, False, now)
        cfqq = rq.sched[1]
        vq = nxt.sched[1]
        fifo = vq.fifo
        if vq is cfqq and fifo[nxt] < fifo[rq]:
            # rq moves to nxt's place, taking its queue jiffy (list_move)
            cfqq.fifo = {(rq if r is nxt else r): t for r, t in fifo.items() if r is not rq}
        else:
            # 2.6.18 would list_move rq into the other queue's FIFO list (no
            # allow_merge hook yet); here rq keeps its own FIFO place.
            del fifo[nxt]
        self._del_crq_rb(nxt)
        nxt.sched = None

    def former(self, rq):
        """The request before `rq` in its queue's sort tree."""
        node = rq.sched
        if node is None or not rq.in_elevator:
            return None
        return node[1].tree.predecessor(node[0])

    def latter(self, rq):
        """The request after `rq` in its queue's sort tree."""
        node = rq.sched
        if node is None or not rq.in_elevator:
            return None
        return node[1].tree.successor(node[0])

    def activate(self, rq, now: float) -> None:
        """``cfq_activate_request``: count it in the driver; detect command queueing."""
        n = self.rq_in_driver + 1
        self.rq_in_driver = n
        if n > 4:
            if self.msg is not None and not self.hw_tag:
                self.msg("hw_tag", 0, n)
            self.hw_tag = True

    def completed(self, rq, now: float) -> None:
        """``cfq_completed_request`` (2.6.18)."""
        node = rq.sched
        if node is None:
            return
        j = int(now * self.hz + 1e-9)
        _, cfqq, cic = node
        self.rq_in_driver = self.rq_in_driver - 1
        cfqq.dispatched = cfqq.dispatched - 1
        if cfqq.ioprio_class != IOPRIO_CLASS_IDLE:
            self.last_end_request = j
        if cfqq.rr is not None and not cfqq.dispatched:
            cfqq.service_last = j
            self._resort_rr_list(cfqq, False)
        if cfqq.sync:
            cic.last_end_request = j
        if self.active_queue is cfqq:
            if j > cfqq.slice_end:
                if self.msg is not None:
                    self._say_expiry(cfqq, "time")
                self._expire_queue(cfqq, False, j)
            elif cfqq.sync and not cfqq.tree.keys:
                if not self._arm_slice_timer(cfqq, j):
                    self._schedule_dispatch()

    def timer_fired(self, now: float) -> None:
        """Run whichever of the idle-slice and idle-class timers is due."""
        j = self._jiffies(now)
        t = self.idle_slice_timer
        if t is not None and t <= j:
            self.idle_slice_timer = None
            self._idle_slice_timer_fn(j)
        t = self.idle_class_timer
        if t is not None and t <= j:
            self.idle_class_timer = None
            end = self.last_end_request + self.idle_grace
            if j < end:
                self.idle_class_timer = end      # raced with a non-idle queue
            else:
                self._schedule_dispatch()
        self._set_wakeup()

    def process_exited(self, pid: int, now: float) -> None:
        """``cfq_exit_io_context``: expire the process's queue if active; stop idling for it."""
        cic = self._cics.pop(pid, None)
        if cic is None:
            return
        cic.alive = False
        j = self._jiffies(now)
        for cfqq in (cic.async_q, cic.sync_q):
            if cfqq is not None and cfqq is self.active_queue:
                if self.msg is not None:
                    self._say_expiry(cfqq, "exited")
                self._expire_queue(cfqq, False, j)
        cic.async_q = None
        cic.sync_q = None

    def empty(self) -> bool:
        """``cfq_queue_empty``: no busy queue."""
        return not self.busy_queues

    def queued(self) -> int:
        """Requests held in the queues' sort trees.

        Every queue holding requests is on exactly one round-robin list (and
        every queue on one holds requests), so these lists reach them all.
        """
        lists = [*self.rr_list, self.busy_rr, self.cur_rr, self.idle_rr]
        return sum(len(cfqq.tree) for lst in lists for cfqq in lst)

    # ------------------------------------------------------------------ introspection
    def queue_of(self, pid: int, sync: bool = True):
        """The sync (or async) queue process `pid` uses, or None."""
        cic = self._cics.get(pid)
        if cic is None:
            return None
        return cic.sync_q if sync else cic.async_q

    def context_of(self, pid: int):
        """Process `pid`'s ``cfq_io_context`` (think time, seek statistics), or None."""
        return self._cics.get(pid)
