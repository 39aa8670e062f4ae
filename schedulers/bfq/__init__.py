"""BFQ, the Budget Fair Queueing I/O scheduler of Linux 5.4 to 6.6 (block/bfq-iosched.c,
bfq-wf2q.c, bfq-iosched.h, bfq-cgroup.c), through the multi-queue hook table, with
group scheduling for cgroups (`blksim.schedulers.bfq.groups`).

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

from blksim.schedulers.bfq import budget as bud
from blksim.schedulers.bfq import idling
from blksim.schedulers.bfq import weight_raising as wr
from blksim.schedulers.bfq.groups import Groups, RootGroup
from blksim.schedulers.bfq.insertion import Insertion
from blksim.schedulers.bfq.merging import Merging
from blksim.schedulers.bfq.queue import BfqQueue, IoContext
from blksim.schedulers.bfq.service import Service
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


class BfqElevator(Insertion, Service, MqElevator):
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
    #: ``bfq_depth_updated`` calls ``sbitmap_queue_min_shallow_depth(tags, 1)``: the
    #: smallest shallow depth BFQ may ask for (the tag map's wake batch depends on it).
    min_shallow_depth = 1
    #: ``bfq_init_queue`` turns writeback throttling off while BFQ is attached
    #: (``wbt_disable_default``, 5.4-6.6; a user's ``wbt_lat_usec`` still wins).
    disables_wbt = True
    #: The messages BFQ sends (``block_elv_msg``; BFQ's own ``bfq_log_bfqq`` lines say
    #: much the same). A queue's pid is its process's (0 for a shared async queue).
    events = {
        "hold_start": "idling armed: the empty in-service queue of process pid is kept, "
                      "waiting for its next request (detail: idling) "
                      "(bfq_arm_slice_timer)",
        "hold_end": "the idling ends (detail: hit, its request came, bfq_rq_enqueued; "
                    "timeout, bfq_idle_slice_timer_body; else the reason the queue "
                    "expired)",
        "expire": "the in-service queue is expired (detail: too_idle, budget_timeout, "
                  "budget_exhausted, no_more_requests, preempted: enum bfqq_expiration) "
                  "(bfq_bfqq_expire)",
        "wr_start": "weight raising starts for process pid's queue (detail: interactive "
                    "or soft_rt) (bfq_update_bfqq_wr_on_rq_arrival)",
        "wr_end": "weight raising ends (detail: ended, bfq_bfqq_end_wr; burst, the queue "
                  "joined a large burst, bfq_update_bfqq_wr_on_rq_arrival)",
    }

    def __init__(self, info: MqQueueInfo, params: dict | None = None) -> None:
        super().__init__(info, params)
        p = self.params
        hz = self.hz
        self.variant = variant_for_kernel(info.kernel)
        self.jiffies = 0
        self.hold_pid = 0               # the process the open idling (hold) was armed for
        self.now_ns = 0
        self.now = 0.0
        nonrot = not info.rotational

        # --- tunables (bfq_init_queue, then the sysfs stores of what the user set)
        self.bfq_fifo_expire = (p["fifo_expire_async"] * 1_000_000,
                                p["fifo_expire_sync"] * 1_000_000)
        self.bfq_back_max = p["back_seek_max"]
        self.bfq_back_penalty = p["back_seek_penalty"]
        # A value other than its default counts as written to sysfs after the
        # scheduler was attached (the configuration hands over every tunable).
        written = {t.name for t in self.tunables_for(info.kernel) if p[t.name] != t.default}
        # bfq_timeout is HZ/8 jiffies (31 at HZ 250, shown as 124 ms); a written value
        # is converted by msecs_to_jiffies, rounding up
        self.bfq_timeout = (msecs_to_jiffies(p["timeout_sync"], hz)
                            if "timeout_sync" in written else hz // 8)
        if "slice_idle_us" in written:
            self.bfq_slice_idle = p["slice_idle_us"] * 1000
        else:
            self.bfq_slice_idle = p["slice_idle"] * 1_000_000
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
        elif "timeout_sync" in written:                 # bfq_timeout_sync_store
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
        # cgroups (CONFIG_BFQ_GROUP_IOSCHED): the root group and the others by cgroup
        self.root_group = RootGroup(self.wf2q.sd, self.async_queues)
        self.groups = Groups(self.root_group, info.device, self.variant["groups_pending"])
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

    def on_group_activated(self, group) -> None:
        """A group entity was truly activated (5.4-6.1 count it as pending)."""
        self.groups.entity_activated(group)

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
        asyncs = list(self.async_queues.values())
        for group in self.groups.groups.values():          # bfq_end_wr_async
            asyncs += group.async_queues.values()
        for q in self.active_list + self.idle_list + asyncs:
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
        request of a process whose queue, or a group above it, already holds its
        weight's share of the requests (``bfqq_request_over_limit``) gets depth 1:
        that rule needs the process, ``pid`` (the queue passes it when it can;
        without it the rule is skipped)."""
        limit = self.nr_requests
        if sync and not write:
            depth = 0
        else:
            depth = self.word_depths[1 if self.wr_busy_queues else 0][1 if sync else 0]
            limit = (limit * depth) >> self.word_shift
        if pid is not None and self.variant["depth_over_limit"]:
            bic = self.bics.get(pid)
            bfqq = bic.bfqq[bool(sync)] if bic is not None else None
            if bfqq is not None and self.request_over_limit(bfqq, limit):
                depth = 1
        return depth or None

    @staticmethod
    def request_over_limit(bfqq, limit: int) -> bool:
        """``bfqq_request_over_limit`` (block/bfq-iosched.c, 6.1-6.6; 5.18's "bfq: Limit
        number of requests consumed by each cgroup"): from the topmost group down to
        the queue, each entity's share of ``limit`` is ``limit * weight / wsum``
        (rounded to the closest), ``limit`` becoming that share at each step; a
        group's ``wsum`` is its service tree's in its parent's scheduling data, the
        queue's folds the weight sums of its class and the classes above it in its
        group (``wsum * IOPRIO_BE_NR + ...``). Over the limit when some entity on the
        way already holds its share of allocated requests (``entity->allocated``); a
        level with a zero weight sum is skipped; not when any entity on the path is
        off its trees (the request lets bfq see the work)."""
        path = []
        entity = bfqq
        while entity is not None:
            if not entity.on_st_or_in_serv:
                return False
            path.append(entity)
            entity = entity.parent
        for entity in reversed(path):
            if entity is bfqq:
                wsum = 0
                for tree in bfqq.sched_data.trees[:bfqq.ioprio_class]:
                    wsum = wsum * 8 + tree.wsum
            else:
                wsum = entity.sched_data.trees[entity.ioprio_class - 1].wsum
            if not wsum:
                continue
            limit = (limit * entity.weight + wsum // 2) // wsum
            if entity.nr_allocated >= limit:
                return True
        return False

    # --- bookkeeping ----------------------------------------------------------------------
    def empty(self) -> bool:
        """True when no request is queued in BFQ."""
        return self.nr_queued == 0 and not self.dispatch_list

    def queued(self) -> int:
        """Requests held (in bfq_queues, ``bfqd->queued``, or on the dispatch list)."""
        return self.nr_queued + len(self.dispatch_list)


__all__ = ["BfqElevator", "sbitmap_shift"]
