"""BFQ, the Budget Fair Queueing I/O scheduler of Linux 5.4 to 6.6 (block/bfq-iosched.c,
bfq-wf2q.c, bfq-iosched.h), through the multi-queue hook table, for one root group.

Every process has its own sync queue; async requests go to queues shared per I/O
priority class and level. A queue's weight comes from its priority level. The
device is given to one queue at a time, *in service*, for a *budget* of sectors:
the queue dispatches until its budget is used up, it has no more requests (and
idling would not help), its budget timeout (``timeout_sync``) passes, or a queue
that deserves it preempts it. Which queue comes next is decided by B-WF2Q+ over
the budgets (`blksim.schedulers.bfq.wf2q`): classes RT, BE, IDLE in strict priority,
within a class the eligible queue with the smallest virtual finish time, so that
over many budgets every queue gets service in proportion to its weight. The budget
a queue gets next depends on why it expired (`blksim.schedulers.bfq.budget`). An
empty sync queue may be kept in service for ``slice_idle`` waiting for its process
(`blksim.schedulers.bfq.idling`: when BFQ idles and what it injects meanwhile), and
with ``low_latency`` interactive and soft real-time queues get their weight raised
(`blksim.schedulers.bfq.weight_raising`). Queues of processes doing interleaved
I/O close to each other are merged (``bfq_setup_cooperator``).

The hooks follow the kernel's ``iosched_bfq_mq`` table: ``bfq_insert_requests``
(``__bfq_insert_request``, ``bfq_add_request``), ``bfq_dispatch_request``
(``__bfq_dispatch_request``, ``bfq_select_queue``, ``bfq_dispatch_rq_from_bfqq``),
``bfq_finish_requeue_request`` (``bfq_completed_request``), the idle slice timer
(``bfq_idle_slice_timer_body``), ``bfq_limit_depth``, ``bfq_depth_updated``,
``bfq_request_merge``, ``bfq_request_merged``, ``bfq_requests_merged``,
``bfq_allow_bio_merge``, ``bfq_exit_icq``. Version differences are data
(`blksim.schedulers.bfq.variants`). docs/bfq.md names every simplification.
"""

from __future__ import annotations

from blksim.block.elevator import msecs_to_jiffies
from blksim.block.mq.elevator import MqElevator, MqQueueInfo
from blksim.block.request import IOPRIO_CLASS_IDLE

from blksim.schedulers.bfq import budget as bud
from blksim.schedulers.bfq import idling
from blksim.schedulers.bfq import weight_raising as wr
from blksim.schedulers.bfq.budget import (BUDGET_EXHAUSTED, BUDGET_TIMEOUT, NO_MORE_REQUESTS,
                                          PREEMPTED, TOO_IDLE)
from blksim.schedulers.bfq.merging import Merging
from blksim.schedulers.bfq.queue import (SMALLEST_FROM_NOW, BfqQueue, IoContext, async_key,
                                         choose_req, class_and_level, ioprio_to_weight)
from blksim.schedulers.bfq.variants import TUNABLES, VARIANTS, variant_for_kernel
from blksim.schedulers.bfq.wf2q import Wf2q

#: ``bfq_async_charge_factor``: async service is charged three times.
BFQ_ASYNC_CHARGE_FACTOR = 3
#: The kernel's default ``bfq_slice_idle`` (NSEC_PER_SEC / 125), used by ``bfq_bfqq_is_slow``.
DEFAULT_SLICE_IDLE_NS = 8_000_000


def sbitmap_shift(depth: int) -> int:
    """``sbitmap_calculate_shift`` (lib/sbitmap.c, 64-bit words): log2 of the bits per
    word of a tag map of ``depth`` tags, the unit of a shallow depth up to 6.6."""
    shift = 6
    if depth >= 4:
        while (4 << shift) > depth:
            shift -= 1
    return shift


class BfqElevator(MqElevator):
    """BFQ (``iosched_bfq_mq``). State for displays and tests: ``in_service_queue``,
    ``queues`` (every queue ever made, by (pid, sync) for sync queues and
    ("async", class, level) for shared ones), ``bics`` (processes' contexts),
    ``wf2q`` (the scheduling engine), ``tot_rq_in_driver``, ``peak_rate``,
    ``bfq_max_budget``, ``wr_busy_queues``, ``expirations`` (a log of
    (time, pid, reason) when ``log_expirations`` is set)."""

    name = "bfq"
    tunables = TUNABLES
    uses_merge_hash = True
    uses_timers = True
    queue_wide = True
    VARIANTS = VARIANTS

    def __init__(self, info: MqQueueInfo, params: dict | None = None) -> None:
        super().__init__(info, params)
        given = params or {}
        p = self.params
        hz = self.hz
        self.variant = variant_for_kernel(info.kernel)
        self.jiffies = 0
        self.now_ns = 0
        self.now = 0.0
        nonrot = not info.rotational

        # --- tunables (bfq_init_queue, then the sysfs stores of what the user set)
        self.bfq_fifo_expire = (p["fifo_expire_async"] * 1_000_000,
                                p["fifo_expire_sync"] * 1_000_000)
        self.bfq_back_max = p["back_seek_max"]
        self.bfq_back_penalty = p["back_seek_penalty"]
        if "slice_idle_us" in given:
            self.bfq_slice_idle = p["slice_idle_us"] * 1000
        else:
            self.bfq_slice_idle = p["slice_idle"] * 1_000_000
        self.bfq_timeout = msecs_to_jiffies(p["timeout_sync"], hz)
        self.strict_guarantees = bool(p["strict_guarantees"])
        if self.strict_guarantees and self.bfq_slice_idle < 8_000_000:
            self.bfq_slice_idle = 8_000_000          # bfq_strict_guarantees_store
        self.low_latency = bool(p["low_latency"])
        self.default_slice_idle_ns = DEFAULT_SLICE_IDLE_NS

        # --- low_latency constants (bfq_init_queue)
        self.bfq_wr_coeff = 30
        self.bfq_wr_rt_max_time = msecs_to_jiffies(300, hz)
        self.bfq_wr_min_idle_time = msecs_to_jiffies(2000, hz)
        self.bfq_wr_min_inter_arr_async = msecs_to_jiffies(500, hz)
        self.bfq_wr_max_softrt_rate = 7000
        self.bfq_burst_interval = msecs_to_jiffies(180, hz)
        self.rate_dur_prod = (bud.REF_RATE[nonrot]
                              * msecs_to_jiffies(wr.REF_WR_DURATION_MS[nonrot], hz))
        self.peak_rate = bud.REF_RATE[nonrot] * 2 // 3

        # --- budgets
        self.bfq_max_budget = bud.BFQ_DEFAULT_MAX_BUDGET
        self.user_max_budget = 0
        if p["max_budget"]:
            self.bfq_max_budget = self.user_max_budget = p["max_budget"]
        elif "max_budget" in given or "timeout_sync" in given:
            self.bfq_max_budget = bud.calc_max_budget(self)
        self.budgets_assigned = 0
        self.last_budget_start = 0
        self.last_idling_start = 0
        self.last_idling_start_jiffies = 0

        # --- peak rate
        self.peak_rate_samples = 0
        self.sequential_samples = 0
        self.tot_sectors_dispatched = 0
        self.last_rq_max_size = 0
        self.first_dispatch = self.last_dispatch = 0
        self.delta_from_first = 0
        self.last_completion = 0
        self.last_position = 0
        self.in_serv_last_pos = 0

        # --- device
        self.hw_tag = -1
        self.hw_tag_samples = 0
        self.max_rq_in_driver = 0
        self.tot_rq_in_driver = 0
        self.nonrot_with_queueing = nonrot

        # --- queues
        self.wf2q = Wf2q(self)
        self.dispatch_list: list = []
        self.nr_queued = 0
        self.busy_queues = [0, 0, 0]
        self.wr_busy_queues = 0
        self.weights: dict[int, int] = {}
        self.active_list: list = []
        self.idle_list: list = []
        self.in_service_queue = None
        self.bics: dict[int, IoContext] = {}
        self.async_queues: dict[tuple, BfqQueue] = {}
        self.queues: dict = {}
        self.started: set = set()

        # --- bursts, injection, wakers
        self.burst_list: list = []
        self.burst_size = 0
        self.large_burst = False
        self.last_ins_in_burst = 0
        self.rqs_injected = False
        self.wait_dispatch = False
        self.waited_rq = None
        self.last_empty_occupied_ns = 0
        self.last_completed_rq_bfqq = None
        self.merging = Merging(self)

        # --- depths (bfq_update_depths)
        self.word_shift = 6
        self.word_depths = ((1, 1), (1, 1))
        self.log_expirations = False
        self.expirations: list = []
        self.depth_updated(info.nr_requests)

    # --- time ------------------------------------------------------------------------
    def _tick(self, now: float) -> None:
        """Read the clock as the kernel does: jiffies at HZ, and nanoseconds."""
        self.now = now
        self.jiffies = int(now * self.hz + 1e-9)
        self.now_ns = int(round(now * 1e9))

    def msecs_to_jiffies(self, ms: int) -> int:
        """``msecs_to_jiffies`` at this run's HZ."""
        return msecs_to_jiffies(ms, self.hz)

    @property
    def slice_idle_jiffies(self) -> int:
        """``bfq_choose_bfqq_for_injection`` adds ``bfq_slice_idle`` (nanoseconds) to a
        time in jiffies; kept as the kernel has it (docs/bfq.md)."""
        return self.bfq_slice_idle

    @property
    def slice_idle_jiffies_floor(self) -> int:
        """``nsecs_to_jiffies(bfq_slice_idle)`` (rounded down)."""
        return self.bfq_slice_idle * self.hz // 1_000_000_000

    @property
    def tot_busy_queues(self) -> int:
        """``bfq_tot_busy_queues``."""
        b = self.busy_queues
        return b[0] + b[1] + b[2]

    def min_budget(self) -> int:
        """``bfq_min_budget``."""
        return bud.min_budget(self)

    # --- callbacks of the scheduling engine (lists and weight counters) ----------------
    def on_active(self, bfqq) -> None:
        """The queue entered its active tree (``active_list``, newest first)."""
        self.active_list.insert(0, bfqq)

    def on_inactive(self, bfqq) -> None:
        """The queue left its active tree."""
        self.active_list.remove(bfqq)

    def on_idle_list(self, bfqq) -> None:
        """The queue entered its idle tree (``idle_list``)."""
        self.idle_list.insert(0, bfqq)

    def on_leave_idle_list(self, bfqq) -> None:
        """The queue left its idle tree."""
        self.idle_list.remove(bfqq)

    def on_forgotten(self, bfqq) -> None:
        """The queue left every tree (the kernel drops a reference)."""

    def weights_tree_add(self, bfqq) -> None:
        """``bfq_weights_tree_add``: count the queue's weight."""
        if bfqq.weight_counter is not None:
            return
        w = bfqq.weight
        self.weights[w] = self.weights.get(w, 0) + 1
        bfqq.weight_counter = w

    def weights_tree_remove(self, bfqq) -> None:
        """``bfq_weights_tree_remove``."""
        w = bfqq.weight_counter
        if w is None:
            return
        left = self.weights[w] - 1
        if left:
            self.weights[w] = left
        else:
            del self.weights[w]
        bfqq.weight_counter = None

    def all_queues(self):
        """The queues ``bfq_end_wr`` visits: active and idle lists and async queues."""
        seen = []
        for q in self.active_list + self.idle_list + list(self.async_queues.values()):
            if q not in seen:
                seen.append(q)
        return seen

    def serv_to_charge(self, rq, bfqq) -> int:
        """``bfq_serv_to_charge``: sectors, times 3 for an async queue that is not raised
        in a symmetric scenario."""
        if bfqq.is_sync or bfqq.wr_coeff > 1 or idling.asymmetric_scenario(self, bfqq):
            return rq.nr_sectors
        return rq.nr_sectors * BFQ_ASYNC_CHARGE_FACTOR

    # --- depths --------------------------------------------------------------------------
    def depth_updated(self, nr_requests: int) -> None:
        """``bfq_depth_updated`` / ``bfq_update_depths``: async requests may use half a
        map word (3/16 while a queue is raised), sync writes 3/4 (6/16)."""
        self.nr_requests = nr_requests
        shift = sbitmap_shift(nr_requests)
        depth = 1 << shift
        self.word_shift = shift
        self.word_depths = ((max(depth >> 1, 1), max((depth * 3) >> 2, 1)),
                            (max((depth * 3) >> 4, 1), max((depth * 6) >> 4, 1)))

    def init_hctx(self, hctx) -> None:
        """``bfq_init_hctx``: computes the depths (already done in the constructor)."""

    def limit_depth(self, write: bool, sync: bool, pid: int | None = None) -> int | None:
        """``bfq_limit_depth``: sync reads get the whole map; other requests a shallow
        depth per map word of ``2**word_shift`` tags (5.4-6.6 semantics). From 6.1 a
        request of a process whose queue already holds more requests than its
        weight's share of the map (``bfqq_request_over_limit``) gets depth 1: that rule
        needs the process, ``pid`` (the queue passes it when it can; without it the
        rule is skipped)."""
        limit = self.nr_requests
        if sync and not write:
            depth = 0
        else:
            depth = self.word_depths[1 if self.wr_busy_queues else 0][1 if sync else 0]
            limit = (limit * depth) >> self.word_shift
        if pid is not None and self.variant["depth_over_limit"]:
            bic = self.bics.get(pid)
            bfqq = bic.bfqq[bool(sync)] if bic is not None else None
            if bfqq is not None and self._request_over_limit(bfqq, limit):
                depth = 1
        return depth or None

    def _request_over_limit(self, bfqq, limit: int) -> bool:
        """``bfqq_request_over_limit`` for a queue of the root group: its share of
        ``limit`` is ``limit * weight / wsum`` (rounded), ``wsum`` folding the weight
        sums of its class and the classes above it (``wsum * IOPRIO_BE_NR + ...``)."""
        if not bfqq.on_st_or_in_serv:
            return False
        wsum = 0
        for tree in self.wf2q.sd.trees[:bfqq.ioprio_class]:
            wsum = wsum * 8 + tree.wsum
        if not wsum:
            return False
        share = (limit * bfqq.weight + wsum // 2) // wsum
        return bfqq.allocated >= share

    # --- queues and contexts ----------------------------------------------------------------
    def _bic(self, pid: int, ioprio: int) -> IoContext:
        """The process's context (``ioc_find_get_icq``), made on its first request."""
        bic = self.bics.get(pid)
        if bic is None:
            bic = self.bics[pid] = IoContext(pid, ioprio)
        elif bic.ioprio != ioprio:
            self._ioprio_changed(bic, ioprio)
        return bic

    def _ioprio_changed(self, bic: IoContext, ioprio: int) -> None:
        """``bfq_check_ioprio_change``: a new async queue; the sync queue takes the new
        weight and class at its next activation."""
        bic.ioprio = ioprio
        old = bic.bfqq[0]
        if old is not None:
            bic.bfqq[0] = self._get_queue(bic, False)
            self.release_process_ref(old)
        sync_q = bic.bfqq[1]
        if sync_q is not None:
            cls, level = class_and_level(ioprio)
            sync_q.new_ioprio_class = cls
            sync_q.ioprio = level
            sync_q.new_weight = ioprio_to_weight(level)
            sync_q.prio_changed = True

    def _get_queue(self, bic: IoContext, is_sync: bool) -> BfqQueue:
        """``bfq_get_queue``: the shared async queue of the process's priority, or a new
        sync queue (which may be stably merged, from 5.15)."""
        if not is_sync:
            key = ("async",) + async_key(bic.ioprio)
            bfqq = self.async_queues.get(key)
            if bfqq is None:
                bfqq = self._new_queue(bic, False, key)
                self.async_queues[key] = bfqq
                bfqq.ref += 1                       # the group's reference
            bfqq.ref += 1
            return bfqq
        bfqq = self._new_queue(bic, True, (bic.pid, True))
        bfqq.ref += 1
        if self.variant["stable_merge"]:
            bfqq = self.merging.do_or_sched_stable_merge(bfqq, bic)
        return bfqq

    def new_sync_queue(self, bic: IoContext) -> BfqQueue:
        """A new sync queue for a process whose merged queue was split (``bfq_get_queue``
        with ``respawn``: no stable merge)."""
        bfqq = self._new_queue(bic, True, (bic.pid, True))
        bfqq.ref += 1
        return bfqq

    def wr_duration(self) -> int:
        """``bfq_wr_duration``."""
        return wr.wr_duration(self)

    def _new_queue(self, bic: IoContext, is_sync: bool, key) -> BfqQueue:
        bfqq = BfqQueue(bic.pid, is_sync, bic.ioprio, self.now_ns, self.jiffies,
                        bud.max_budget(self))
        self.queues[key] = bfqq
        return bfqq

    def _init_rq(self, rq) -> BfqQueue:
        """``bfq_init_rq``: the queue of a request being inserted."""
        if rq.sched is not None:
            return rq.sched
        bic = self._bic(rq.pid, rq.ioprio)
        is_sync = bool(rq.sync)
        bfqq = bic.bfqq[is_sync]
        if bfqq is None:
            bfqq = bic.bfqq[is_sync] = self._get_queue(bic, is_sync)
        elif is_sync and bfqq.coop and bfqq.split_coop and not bic.stably_merged:
            bfqq = self.merging.split(bic, bfqq)
        bfqq.allocated += 1
        bic.requests += 1
        rq.sched = bfqq
        if bfqq.ref == 1:
            bfqq.bic = bic
        if bfqq.just_created and (self.burst_size > 0 or self.tot_busy_queues == 0):
            wr.handle_burst(self, bfqq)
        return bfqq

    def release_process_ref(self, bfqq) -> None:
        """``bfq_release_process_ref``."""
        if bfqq.busy and not bfqq.sort_list and bfqq is not self.in_service_queue:
            self._del_busy(bfqq, False)
        self.merging.reassign_last_created(bfqq, None)
        bfqq.ref -= 1

    def process_exited(self, pid: int, now: float) -> None:
        """``bfq_exit_icq``: the process's queues lose its reference; its in-service
        queue expires."""
        self._tick(now)
        bic = self.bics.pop(pid, None)
        if bic is None:
            return
        for is_sync in (True, False):
            bfqq = bic.bfqq[is_sync]
            if bfqq is None:
                continue
            bic.bfqq[is_sync] = None
            if bfqq.bic is bic:
                bfqq.bic = None
            if bfqq is self.in_service_queue:
                self._expire_now(bfqq, BUDGET_TIMEOUT)
                self._schedule_dispatch()
            self.merging.put_cooperator(bfqq)
            self.release_process_ref(bfqq)

    # --- busy / idle ----------------------------------------------------------------------
    def _add_busy(self, bfqq) -> None:
        """``bfq_add_bfqq_busy``."""
        self.wf2q.activate_requeue(bfqq, bfqq.non_blocking_wait_rq, False)
        bfqq.non_blocking_wait_rq = False
        bfqq.busy = True
        self.busy_queues[bfqq.ioprio_class - 1] += 1
        if not bfqq.dispatched and bfqq.wr_coeff == 1:
            self.weights_tree_add(bfqq)
        if bfqq.wr_coeff > 1:
            self.wr_busy_queues += 1
        waker = bfqq.waker_bfqq
        if waker is not None and bfqq in waker.woken_list:
            waker.woken_list.remove(bfqq)
            waker.woken_list.insert(0, bfqq)

    def _del_busy(self, bfqq, expiration: bool) -> None:
        """``bfq_del_bfqq_busy``."""
        bfqq.busy = False
        self.busy_queues[bfqq.ioprio_class - 1] -= 1
        if bfqq.wr_coeff > 1:
            self.wr_busy_queues -= 1
        self.wf2q.deactivate(bfqq, True, expiration)
        if not bfqq.dispatched:
            self.weights_tree_remove(bfqq)

    def _schedule_dispatch(self) -> None:
        """``bfq_schedule_dispatch``: have the hardware queues run."""
        if self.nr_queued:
            self.kick_queue = True

    # --- insertion ----------------------------------------------------------------------------
    def insert_requests(self, rqs, at_head: bool, now: float) -> None:
        """``bfq_insert_requests``: a requeued request goes to the head of the dispatch
        list; others into their queue."""
        self._tick(now)
        for rq in rqs:
            bfqq = self._init_rq(rq)
            if at_head:
                self.dispatch_list.insert(0, rq)
            else:
                self._insert_request(rq, bfqq)

    def _insert_request(self, rq, bfqq) -> None:
        """``__bfq_insert_request``."""
        new_bfqq = self.merging.setup_cooperator(bfqq, rq, True, self.bics.get(rq.pid))
        if new_bfqq is not None:
            bfqq = self.merging.redirect_request(rq, bfqq, new_bfqq)
        idling.update_io_thinktime(self, bfqq)
        idling.update_has_short_ttime(self, bfqq)
        idling.update_io_seektime(self, bfqq, rq)
        self._add_request(rq, bfqq)
        rq.fifo_time = self.now + self.bfq_fifo_expire[bool(rq.sync)] / 1e9
        bfqq.fifo.append(rq)
        self._rq_enqueued(bfqq, rq)

    def _add_request(self, rq, bfqq) -> None:
        """``bfq_add_request``."""
        old_wr_coeff = bfqq.wr_coeff
        interactive = False
        jiffies = self.jiffies
        sync = bool(rq.sync)
        bfqq.queued[sync] += 1
        self.nr_queued += 1
        bic = self.bics.get(rq.pid)
        waker_rule = self.variant["waker"]
        if waker_rule is None:          # 5.4, 5.10: when the queue was empty
            first_of_burst = bfqq.is_sync and not bfqq.sort_list
        else:                           # 5.15+: when it is the process's only request
            first_of_burst = bfqq.is_sync and bic is not None and bic.requests <= 1
        if first_of_burst:
            if waker_rule is not None:
                idling.check_waker(self, bfqq)
            if bfqq.decrease_time_jif + self.msecs_to_jiffies(1000) <= jiffies:
                idling.reset_inject_limit(self, bfqq)
            if (bfqq is self.in_service_queue
                    and (self.tot_rq_in_driver == 0
                         or (bfqq.last_serv_time_ns > 0 and self.rqs_injected
                             and self.tot_rq_in_driver > 0))
                    and bfqq.decrease_time_jif + self.msecs_to_jiffies(10) <= jiffies):
                self.last_empty_occupied_ns = self.now_ns
                self.wait_dispatch = True
                if self.tot_rq_in_driver == 0:
                    self.rqs_injected = False
        if bfqq.is_sync and self.variant["io_bound_by_intensity"]:
            idling.update_io_intensity(self, bfqq)
        bfqq.sort_list.add(rq)
        prev = bfqq.next_rq
        bfqq.next_rq = choose_req(prev, rq, self.last_position, self.bfq_back_max * 2,
                                  self.bfq_back_penalty)
        if not self.nonrot_with_queueing and prev is not bfqq.next_rq:
            self.merging.pos_tree_add_move(bfqq)
        if not bfqq.busy:
            interactive = self._idle_busy_switch(bfqq, old_wr_coeff, rq, bic)
        else:
            if (self.low_latency and old_wr_coeff == 1 and not rq.sync
                    and bfqq.last_wr_start_finish + self.bfq_wr_min_inter_arr_async < jiffies):
                bfqq.wr_coeff = self.bfq_wr_coeff
                bfqq.wr_cur_max_time = wr.wr_duration(self)
                self.wr_busy_queues += 1
                bfqq.prio_changed = True
            if prev is not bfqq.next_rq:
                self._updated_next_req(bfqq)
        if self.low_latency and (old_wr_coeff == 1 or bfqq.wr_coeff == 1 or interactive):
            bfqq.last_wr_start_finish = jiffies

    def _idle_busy_switch(self, bfqq, old_wr_coeff: int, rq, bic) -> bool:
        """``bfq_bfqq_handle_idle_busy_switch``: a queue becomes busy: its budget, its
        weight raising, and whether it preempts the queue in service. Returns whether
        it counts as interactive."""
        jiffies = self.jiffies
        idle_for_long_time = (bfqq.dispatched == 0
                              and bfqq.budget_timeout + self.bfq_wr_min_idle_time < jiffies)
        arrived_in_time = self.now_ns <= bfqq.last_end_request + self.bfq_slice_idle * 3
        non_merged_or_stably = bfqq.bic is not None or (
            self.variant["stable_merge"] and bic is not None and bic.stably_merged)
        in_burst = bfqq.in_large_burst
        default_weight = bfqq.new_weight == 40 or not self.variant["default_weight_raising"]
        soft_rt = (self.bfq_wr_max_softrt_rate > 0 and not bfqq.totally_seeky
                   and not in_burst and bfqq.soft_rt_next_start < jiffies
                   and bfqq.dispatched == 0 and default_weight)
        interactive = not in_burst and idle_for_long_time and default_weight
        wr_or_deserves_wr = self.low_latency and (
            bfqq.wr_coeff > 1
            or (bfqq.is_sync and non_merged_or_stably and (interactive or soft_rt)))
        wants_to_preempt = self._update_budg_for_activation(bfqq, arrived_in_time)
        if (not bfqq.just_created and idle_for_long_time
                and bfqq.budget_timeout + self.msecs_to_jiffies(10000) < jiffies):
            if bfqq in self.burst_list:
                self.burst_list.remove(bfqq)
            bfqq.in_burst_list = False
            bfqq.in_large_burst = False
        bfqq.just_created = False
        if not self.variant["io_bound_by_intensity"]:
            idling.update_io_bound_on_activation(self, bfqq, arrived_in_time)
        if self.low_latency:
            if bfqq.split_time > jiffies:
                bfqq.split_time = jiffies - self.bfq_wr_min_idle_time - 1
            if bfqq.split_time + self.bfq_wr_min_idle_time < jiffies:
                wr.update_wr_on_rq_arrival(self, bfqq, old_wr_coeff, wr_or_deserves_wr,
                                           interactive, in_burst, soft_rt)
                if old_wr_coeff != bfqq.wr_coeff:
                    bfqq.prio_changed = True
        bfqq.last_idle_bklogged = jiffies
        bfqq.service_from_backlogged = 0
        bfqq.softrt_update = False
        self._add_busy(bfqq)
        in_serv = self.in_service_queue
        if (in_serv is not None
                and ((wants_to_preempt and bfqq.wr_coeff >= in_serv.wr_coeff)
                     or _higher_class_or_weight(bfqq, in_serv)
                     or (self.variant["preempt_unless_idling"]
                         and not idling.better_to_idle(self, in_serv)))
                and self.wf2q.next_may_preempt()):
            self._expire(in_serv, False, PREEMPTED)
        return interactive

    def _update_budg_for_activation(self, bfqq, arrived_in_time: bool) -> bool:
        """``bfq_bfqq_update_budg_for_activation``: a queue that emptied while in service
        and comes back in time keeps what was left of its budget (and its back-shifted
        timestamps: it may preempt); otherwise a fresh budget."""
        if bfqq.non_blocking_wait_rq and arrived_in_time and bfqq.budget_left > 0:
            bfqq.budget = min(bfqq.budget_left, bfqq.max_budget)
            bfqq.service = 0
            return True
        bfqq.service = 0
        bfqq.budget = max(bfqq.max_budget, self.serv_to_charge(bfqq.next_rq, bfqq))
        bfqq.non_blocking_wait_rq = False
        return False

    def _updated_next_req(self, bfqq) -> None:
        """``bfq_updated_next_req``: a waiting queue's budget must cover its next request."""
        next_rq = bfqq.next_rq
        if next_rq is None or bfqq is self.in_service_queue:
            return
        new_budget = max(bfqq.max_budget, self.serv_to_charge(next_rq, bfqq), bfqq.service)
        if bfqq.budget != new_budget:
            bfqq.budget = new_budget
            self.wf2q.activate_requeue(bfqq, False, False)

    def _rq_enqueued(self, bfqq, rq) -> None:
        """``bfq_rq_enqueued``: a request for the idled in-service queue ends the idling
        (unless it is small and more may come soon), or its budget timeout."""
        bfqq.last_request_pos = rq.sector + rq.nr_sectors
        if bfqq is self.in_service_queue and bfqq.wait_request:
            small_req = bfqq.queued[bool(rq.sync)] == 1 and rq.nr_sectors < 32
            budget_timeout = bfqq.budget_timeout <= self.jiffies
            if (small_req and idling.idling_boosts_thr_without_issues(self, bfqq)
                    and not budget_timeout):
                return
            self._stop_idling(bfqq)
            if budget_timeout:
                self._expire(bfqq, False, BUDGET_TIMEOUT)

    def _stop_idling(self, bfqq) -> None:
        bfqq.wait_request = False
        if self._wakeup_at is not None:
            self.wakeup_at = None

    def _remove_request(self, rq) -> None:
        """``bfq_remove_request``: ``rq`` leaves its queue (dispatched or merged away)."""
        bfqq = rq.sched
        if bfqq.next_rq is rq:
            bfqq.next_rq = self._find_next_rq(bfqq, rq)
            self._updated_next_req(bfqq)
        if rq in bfqq.fifo:
            bfqq.fifo.remove(rq)
        bfqq.queued[bool(rq.sync)] -= 1
        self.nr_queued -= 1
        bfqq.sort_list.remove(rq)
        if not bfqq.sort_list:
            bfqq.next_rq = None
            if bfqq.busy and bfqq is not self.in_service_queue:
                self._del_busy(bfqq, False)
                bfqq.budget = bfqq.service = 0
            self.merging.pos_tree_remove(bfqq)
        elif not self.nonrot_with_queueing:
            self.merging.pos_tree_add_move(bfqq)

    def _find_next_rq(self, bfqq, last):
        """``bfq_find_next_rq``: the expired FIFO head (once per slot), else the better of
        ``last``'s neighbours in sector order (the successor wrapping to the first)."""
        nxt = self._check_fifo(bfqq, last)
        if nxt is not None:
            return nxt
        tree = bfqq.sort_list
        prev = tree.prev(last)
        nxt = tree.next(last)
        if nxt is None:
            first = tree.first()
            nxt = first if first is not last else None
        return choose_req(nxt, prev, last.sector, self.bfq_back_max * 2,
                          self.bfq_back_penalty)

    def _check_fifo(self, bfqq, last):
        """``bfq_check_fifo``."""
        if bfqq.fifo_expire:
            return None
        bfqq.fifo_expire = True
        rq = bfqq.fifo[0]
        if rq is last or self.now < rq.fifo_time:
            return None
        return rq

    # --- merging hooks ------------------------------------------------------------------
    def _bio_bfqq(self, bio):
        """``bfq_bio_merge``'s ``bio_bfqq``: the queue a bio of this process would join."""
        bic = self.bics.get(bio.pid)
        if bic is None:
            return None, None
        return bic.bfqq[bool(bio.sync)], bic

    def request_merge(self, bio, now: float):
        """``bfq_request_merge``: a request of the bio's queue starting where it ends."""
        bfqq, _ = self._bio_bfqq(bio)
        if bfqq is None:
            return None
        return bfqq.sort_list.find(bio.sector + bio.nr_sectors)

    def allow_merge(self, rq, bio) -> bool:
        """``bfq_allow_bio_merge``: only into a request of the bio's own queue (after a
        possible cooperator merge), never a sync bio into an async request."""
        if bio.sync and not rq.sync:
            return False
        bfqq, bic = self._bio_bfqq(bio)
        if bfqq is None:
            return False
        new_bfqq = self.merging.setup_cooperator(bfqq, bio, False, bic)
        if new_bfqq is not None:
            self.merging.merge_bfqqs(bic, bfqq, new_bfqq)
            bfqq = new_bfqq
        return bfqq is rq.sched

    def request_merged(self, rq, front: bool, now: float) -> None:
        """``bfq_request_merged``: a front merge moved ``rq`` below its predecessor:
        re-file it and reconsider the queue's next request."""
        bfqq = rq.sched
        if not front or bfqq is None:
            return
        prev_rq = bfqq.sort_list.prev(rq)
        if prev_rq is None or not rq.sector < prev_rq.sector:
            return
        self._tick(now)
        bfqq.sort_list.remove(rq)
        bfqq.sort_list.add(rq)
        prev = bfqq.next_rq
        bfqq.next_rq = choose_req(prev, rq, self.last_position, self.bfq_back_max * 2,
                                  self.bfq_back_penalty)
        if prev is not bfqq.next_rq:
            self._updated_next_req(bfqq)
            if not self.nonrot_with_queueing:
                self.merging.pos_tree_add_move(bfqq)

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``bfq_requests_merged``: ``rq`` takes ``nxt``'s FIFO place if that expires
        first; ``nxt`` leaves its queue."""
        self._tick(now)
        bfqq = rq.sched
        nbfqq = nxt.sched
        if bfqq is not None:
            if (bfqq is nbfqq and rq in bfqq.fifo and nxt in bfqq.fifo
                    and nxt.fifo_time < rq.fifo_time):
                bfqq.fifo.remove(rq)
                bfqq.fifo[bfqq.fifo.index(nxt)] = rq
                bfqq.fifo.append(nxt)       # removed with nxt just below
                rq.fifo_time = nxt.fifo_time
            if bfqq.next_rq is nxt:
                bfqq.next_rq = rq
        if nbfqq is not None and nxt in nbfqq.sort_list.rqs:
            self._remove_request(nxt)

    def former_request(self, rq):
        """``elv_rb_former_request``."""
        return rq.sched.sort_list.prev(rq) if rq.sched is not None else None

    def next_request(self, rq):
        """``elv_rb_latter_request``."""
        return rq.sched.sort_list.next(rq) if rq.sched is not None else None

    # --- dispatch -----------------------------------------------------------------------
    def has_work(self, hctx) -> bool:
        """``bfq_has_work``."""
        return bool(self.dispatch_list) or self.nr_queued > 0

    def dispatch_request(self, hctx, now: float):
        """``__bfq_dispatch_request``: the head of the dispatch list, else the next
        request of the queue ``bfq_select_queue`` picks (None while idling)."""
        self._tick(now)
        if self.dispatch_list:
            rq = self.dispatch_list.pop(0)
            bfqq = rq.sched
            if bfqq is not None:
                bfqq.dispatched += 1
                self.tot_rq_in_driver += 1
                self.started.add(rq)
            return rq
        if self.tot_busy_queues == 0:
            return None
        if self.strict_guarantees and self.tot_rq_in_driver > 0:
            return None
        bfqq = self._select_queue()
        if bfqq is None:
            return None
        rq = self._dispatch_rq_from_bfqq(bfqq)
        self.tot_rq_in_driver += 1
        self.started.add(rq)
        return rq

    def _select_queue(self):
        """``bfq_select_queue``: keep the in-service queue while its next request fits
        its budget; expire it for budget timeout, exhausted budget or no more
        requests; while it is idled, serve its async queue, its waker, a queue it
        woke, or an injected queue; else put the next queue in service."""
        bfqq = self.in_service_queue
        if bfqq is not None:
            if self._may_expire_for_budg_timeout(bfqq) and not idling.must_idle(self, bfqq):
                reason = BUDGET_TIMEOUT
            else:
                chosen, reason = self._check_queue(bfqq)
                if reason is None:
                    return chosen
        while True:
            if bfqq is not None:
                self._expire(bfqq, False, reason)
            bfqq = self._set_in_service_queue()
            if bfqq is None:
                return None
            chosen, reason = self._check_queue(bfqq)
            if reason is None:
                return chosen

    def _check_queue(self, bfqq):
        """The ``check_queue`` part of ``bfq_select_queue``: (queue to serve, None), or
        (None, reason) to expire ``bfqq``."""
        next_rq = bfqq.next_rq
        if next_rq is not None:
            if self.serv_to_charge(next_rq, bfqq) > bfqq.budget_left:
                return None, BUDGET_EXHAUSTED
            if bfqq.wait_request:
                self._stop_idling(bfqq)
            return bfqq, None
        if bfqq.wait_request or (bfqq.dispatched != 0 and idling.better_to_idle(self, bfqq)):
            return self._while_idling(bfqq), None
        return None, NO_MORE_REQUESTS

    def _while_idling(self, bfqq):
        """What ``bfq_select_queue`` serves while the in-service queue is idled."""
        bic = bfqq.bic
        async_q = bic.bfqq[0] if bic is not None else None
        if (async_q is not None and async_q.busy and async_q.next_rq is not None
                and async_q.next_rq.pid == bfqq.pid
                and self.serv_to_charge(async_q.next_rq, async_q) <= async_q.budget_left):
            return async_q
        if self.variant["waker"] is not None:       # 5.4, 5.10: see variants.py
            waker = bfqq.waker_bfqq
            if (waker is not None and waker.busy and waker.next_rq is not None
                    and self.serv_to_charge(waker.next_rq, waker) <= waker.budget_left):
                return waker
            blocked = bfqq.woken_list[0] if bfqq.woken_list else None
            if (blocked is not None and blocked.busy and blocked.next_rq is not None
                    and self.serv_to_charge(blocked.next_rq, blocked) <= blocked.budget_left):
                return blocked
        if (not idling.idling_boosts_thr_without_issues(self, bfqq)
                and (bfqq.wr_coeff == 1 or self.wr_busy_queues > 1
                     or not bfqq.has_short_ttime)):
            return idling.choose_bfqq_for_injection(self)
        return None

    def _may_expire_for_budg_timeout(self, bfqq) -> bool:
        """``bfq_may_expire_for_budg_timeout``: the timeout has passed and the queue is
        not waiting for a request, or a third of its budget is still left."""
        return ((not bfqq.wait_request or bfqq.budget_left >= bfqq.budget // 3)
                and bfqq.budget_timeout <= self.jiffies)

    def _set_in_service_queue(self):
        """``bfq_set_in_service_queue`` / ``__bfq_set_in_service_queue``."""
        bfqq = self.wf2q.get_next_queue() if self.tot_busy_queues else None
        if bfqq is not None:
            jiffies = self.jiffies
            bfqq.fifo_expire = False
            self.budgets_assigned = (self.budgets_assigned * 7 + 256) // 8
            if (bfqq.last_wr_start_finish < jiffies and bfqq.wr_coeff > 1
                    and bfqq.wr_cur_max_time == self.bfq_wr_rt_max_time
                    and bfqq.budget_timeout < jiffies):
                # a soft real-time queue does not lose the raising time it waited
                if bfqq.budget_timeout > bfqq.last_wr_start_finish:
                    bfqq.last_wr_start_finish += jiffies - bfqq.budget_timeout
                else:
                    bfqq.last_wr_start_finish = jiffies
            # bfq_set_budget_timeout
            if bfqq.wr_cur_max_time == self.bfq_wr_rt_max_time:
                coeff = 1
            else:
                coeff = bfqq.weight // bfqq.orig_weight
            self.last_budget_start = self.now_ns
            bfqq.budget_timeout = jiffies + self.bfq_timeout * coeff
        self.in_service_queue = bfqq
        self.in_serv_last_pos = 0
        return bfqq

    def _dispatch_rq_from_bfqq(self, bfqq):
        """``bfq_dispatch_rq_from_bfqq``: charge the queue, take its next request."""
        rq = bfqq.next_rq
        self.wf2q.served(bfqq, self.serv_to_charge(rq, bfqq), self.jiffies)
        if bfqq is self.in_service_queue and self.wait_dispatch:
            self.wait_dispatch = False
            self.waited_rq = rq
        bfqq.dispatched += 1                         # bfq_dispatch_remove
        bud.update_peak_rate(self, rq)
        self._remove_request(rq)
        if bfqq is not self.in_service_queue:
            return rq
        wr.update_wr_data(self, bfqq)
        if self.tot_busy_queues > 1 and bfqq.ioprio_class == IOPRIO_CLASS_IDLE:
            self._expire(bfqq, False, BUDGET_EXHAUSTED)
        return rq

    # --- expiration ---------------------------------------------------------------------
    def _expire(self, bfqq, compensate: bool, reason: int) -> None:
        """``bfq_bfqq_expire``: charge time to a slow queue, update the soft real-time
        bookkeeping, compute the next budget and take the queue out of service."""
        if self.log_expirations:
            self.expirations.append((self.now, bfqq.pid, reason, bfqq.service))
        slow, delta_ms = bud.bfqq_is_slow(self, bfqq, compensate)
        if bfqq.wr_coeff == 1 and (slow or (reason == BUDGET_TIMEOUT
                                            and bfqq.budget_left >= bfqq.budget // 3)):
            self.wf2q.charge_time(bfqq, delta_ms, self.bfq_max_budget,
                                  self.bfq_timeout * 1000 // self.hz, self.jiffies)
        if (not self.variant["io_bound_by_intensity"] and reason == TOO_IDLE
                and bfqq.service <= 2 * bfqq.budget // 10):
            bfqq.io_bound = False
        if self.low_latency and bfqq.wr_coeff == 1:
            bfqq.last_wr_start_finish = self.jiffies
        if self.low_latency and self.bfq_wr_max_softrt_rate > 0 and not bfqq.sort_list:
            if bfqq.dispatched == 0:
                if (not self.variant["softrt_skips_interactive"]
                        or bfqq.wr_coeff != self.bfq_wr_coeff):
                    bfqq.soft_rt_next_start = wr.softrt_next_start(self, bfqq)
            else:
                bfqq.softrt_update = True
        self.rqs_injected = self.wait_dispatch = False
        self.waited_rq = None
        bud.recalc_budget(self, bfqq, reason)
        self._expire_now(bfqq, reason)
        if not bfqq.busy and reason != BUDGET_TIMEOUT and reason != BUDGET_EXHAUSTED:
            bfqq.non_blocking_wait_rq = True
        else:
            bfqq.service = 0

    def _expire_now(self, bfqq, reason: int) -> None:
        """``__bfq_bfqq_expire`` and ``__bfq_bfqd_reset_in_service``: an empty queue
        leaves the busy set (unless preempted while idling guards its share), a
        non-empty one is requeued; no queue is in service afterwards."""
        if bfqq.coop and bfqq.seeky:
            bfqq.split_coop = True
        if not bfqq.sort_list and not (
                reason == PREEMPTED and idling.idling_needed_for_service_guarantees(self, bfqq)):
            if bfqq.dispatched == 0:
                bfqq.budget_timeout = self.jiffies
            self._del_busy(bfqq, True)
        else:
            self.wf2q.activate_requeue(bfqq, False, True)
            if not self.nonrot_with_queueing and bfqq.sort_list:
                self.merging.pos_tree_add_move(bfqq)
        self._stop_idling(bfqq)
        self.in_service_queue = None
        self.wf2q.reset_in_service()

    # --- completion ------------------------------------------------------------------------
    def finish_request(self, rq, now: float) -> None:
        """``bfq_finish_requeue_request``: a dispatched request completed (or a request
        was freed without being dispatched)."""
        bfqq = rq.sched
        if bfqq is None:
            return
        self._tick(now)
        if rq in self.started:
            self.started.discard(rq)
            if rq is self.waited_rq:
                idling.update_inject_limit(self, bfqq)
            self._completed_request(bfqq)
        bfqq.allocated -= 1
        bic = self.bics.get(rq.pid)
        if bic is not None:
            bic.requests -= 1
        rq.sched = None

    def requeue_request(self, rq, now: float) -> None:
        """``requeue_request`` is ``bfq_finish_requeue_request`` too: the request is
        inserted again (at the head) as a new one."""
        self.finish_request(rq, now)

    def _completed_request(self, bfqq) -> None:
        """``bfq_completed_request``: the in-service queue's last request completed:
        idle if better, else expire it (budget timeout, or no more requests)."""
        idling.update_hw_tag(self)
        self.tot_rq_in_driver -= 1
        bfqq.dispatched -= 1
        if not bfqq.dispatched and not bfqq.busy:
            bfqq.budget_timeout = self.jiffies
            self.weights_tree_remove(bfqq)
        now_ns = self.now_ns
        bfqq.last_end_request = now_ns
        delta_us = (now_ns - self.last_completion) // 1000
        if (delta_us > bud.BFQ_MIN_TT_NS // 1000
                and (self.last_rq_max_size << bud.BFQ_RATE_SHIFT) // delta_us
                < 1 << (bud.BFQ_RATE_SHIFT - 10)):
            bud.update_rate_reset(self, None)
        self.last_completion = now_ns
        self.last_completed_rq_bfqq = None if bfqq.coop else bfqq
        if (bfqq.softrt_update and bfqq.dispatched == 0 and not bfqq.sort_list
                and bfqq.wr_coeff != self.bfq_wr_coeff):
            bfqq.soft_rt_next_start = wr.softrt_next_start(self, bfqq)
        if self.in_service_queue is bfqq:
            if idling.must_idle(self, bfqq):
                if bfqq.dispatched == 0:
                    self._arm_slice_timer(bfqq)
                return
            if self._may_expire_for_budg_timeout(bfqq):
                self._expire(bfqq, False, BUDGET_TIMEOUT)
            elif not bfqq.sort_list and (bfqq.dispatched == 0
                                         or not idling.better_to_idle(self, bfqq)):
                self._expire(bfqq, False, NO_MORE_REQUESTS)
        if not self.tot_rq_in_driver:
            self._schedule_dispatch()

    def _arm_slice_timer(self, bfqq) -> None:
        """``bfq_arm_slice_timer``: keep the empty in-service queue, wait for its next
        request (an hrtimer: not quantised to jiffies)."""
        bfqq.wait_request = True
        self.last_idling_start = self.now_ns
        self.last_idling_start_jiffies = self.jiffies
        self.wakeup_at = self.now + idling.slice_idle_ns(self, bfqq) / 1e9

    def timer_fired(self, now: float) -> None:
        """``bfq_idle_slice_timer_body``: the idle slice ended without a request: expire
        the queue (too idle, or budget timeout)."""
        self._tick(now)
        self._wakeup_at = None
        self.timers_changed = True
        bfqq = self.in_service_queue
        if bfqq is None:
            return
        bfqq.wait_request = False
        if bfqq.budget_timeout <= self.jiffies:
            self._expire(bfqq, True, BUDGET_TIMEOUT)
        elif bfqq.queued[0] == 0 and bfqq.queued[1] == 0:
            self._expire(bfqq, True, TOO_IDLE)
        self._schedule_dispatch()

    # --- bookkeeping ----------------------------------------------------------------------
    def empty(self) -> bool:
        """True when no request is queued in BFQ."""
        return self.nr_queued == 0 and not self.dispatch_list

    def queued(self) -> int:
        """Requests held (in bfq_queues, ``bfqd->queued``, or on the dispatch list)."""
        return self.nr_queued + len(self.dispatch_list)


def _higher_class_or_weight(bfqq, in_serv) -> bool:
    """``bfq_bfqq_higher_class_or_weight`` (one root group: the queues' own weights)."""
    if bfqq.ioprio_class < in_serv.ioprio_class:
        return True
    return bfqq.weight > in_serv.weight


__all__ = ["BfqElevator", "sbitmap_shift"]
