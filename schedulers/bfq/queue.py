"""A bfq_queue and a process's I/O context, as block/bfq-iosched.h and bfq-iosched.c of
Linux 5.4 to 6.6 define them, and the rules that pick a queue's next request.

Each process has an I/O context (`IoContext`, the kernel's ``bfq_io_cq``) with its own
*sync* queue; *async* queues are shared by every process of the same class and level
(``bfq_async_queue_prio``: RT and BE one per level, IDLE one). A queue's weight comes
from the process's I/O priority: ``(8 - level) * 10`` (``bfq_ioprio_to_weight``, so
level 0 weighs 80 and level 7 weighs 10; class NONE is BE at the level nice 0 gives,
4: weight 40; IDLE is level 7).

Within a queue the next request is the one `choose_req` prefers (``bfq_choose_req``):
a sync request over an async one, then the nearer of the two to the disk head, a
request behind the head counting ``back_seek_penalty`` times its distance and only
if within ``back_seek_max``. Once per service slot the FIFO head is taken instead if
its ``fifo_expire`` deadline has passed (``bfq_check_fifo``). ``REQ_META`` is not
modelled (no request carries it).
"""

from __future__ import annotations

from blksim.block.request import (IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE, IOPRIO_CLASS_NONE,
                                  IOPRIO_CLASS_RT, ioprio_class, ioprio_level)
from blksim.block.sorttree import SectorMultiTree

#: ``IOPRIO_NR_LEVELS`` and ``BFQ_WEIGHT_CONVERSION_COEFF``.
IOPRIO_NR_LEVELS = 8
BFQ_WEIGHT_CONVERSION_COEFF = 10
#: ``IOPRIO_BE_NORM``: the level of a process that never set one (nice 0).
IOPRIO_BE_NORM = 4


def ioprio_to_weight(level: int) -> int:
    """``bfq_ioprio_to_weight`` (bfq-wf2q.c): level 0..7 -> weight 80..10."""
    return (IOPRIO_NR_LEVELS - level) * BFQ_WEIGHT_CONVERSION_COEFF


def class_and_level(ioprio: int) -> tuple[int, int]:
    """``bfq_set_next_ioprio_data``: the class and level a queue of a process with
    packed priority ``ioprio`` gets. Class NONE takes the class and level of the
    process's nice value; blksim's processes run at nice 0: BE, level 4."""
    cls = ioprio_class(ioprio)
    if cls == IOPRIO_CLASS_RT or cls == IOPRIO_CLASS_BE:
        return cls, min(ioprio_level(ioprio), IOPRIO_NR_LEVELS - 1)
    if cls == IOPRIO_CLASS_IDLE:
        return IOPRIO_CLASS_IDLE, IOPRIO_NR_LEVELS - 1
    return IOPRIO_CLASS_BE, IOPRIO_BE_NORM          # IOPRIO_CLASS_NONE (and bad values)


def async_key(ioprio: int) -> tuple[int, int]:
    """``bfq_async_queue_prio``: the async queue a request of priority ``ioprio`` shares
    (class NONE counts as BE at ``IOPRIO_BE_NORM``; all IDLE share one)."""
    cls = ioprio_class(ioprio)
    if cls == IOPRIO_CLASS_RT:
        return cls, min(ioprio_level(ioprio), IOPRIO_NR_LEVELS - 1)
    if cls == IOPRIO_CLASS_IDLE:
        return cls, 0
    if cls == IOPRIO_CLASS_NONE:
        return IOPRIO_CLASS_BE, IOPRIO_BE_NORM
    return IOPRIO_CLASS_BE, min(ioprio_level(ioprio), IOPRIO_NR_LEVELS - 1)


class IoContext:
    """``struct bfq_io_cq``: one process's context: its sync and async queues
    (``bfqq[sync]``), its priority, how many of its requests are allocated, and the
    state it saved when its queue was merged (``saved``)."""

    __slots__ = ("pid", "ioprio", "bfqq", "requests", "stable_merge_bfqq",
                 "stably_merged", "saved", "blkcg", "bfqg")

    def __init__(self, pid: int, ioprio: int) -> None:
        self.pid = pid
        self.ioprio = ioprio
        self.bfqq = [None, None]         # [async, sync]
        self.requests = 0
        self.stable_merge_bfqq = None
        self.stably_merged = False
        self.saved = None
        # the cgroup last seen for the process (``blkcg_serial_nr``; False: none yet)
        # and its group on this device (`blksim.schedulers.bfq.groups`)
        self.blkcg = False
        self.bfqg = None


class BfqQueue:
    """``struct bfq_queue`` with its ``struct bfq_entity`` folded in (a queue's
    ``my_sched_data`` is None; ``parent`` is its group's entity, None in the root group,
    ``sched_data`` its group's scheduling data).

    Entity part: ``start``, ``finish`` (virtual time), ``budget``, ``service``
    (sectors), ``weight`` (= ``orig_weight * wr_coeff``), ``new_weight``,
    ``prio_changed``, ``ioprio_class``/``new_ioprio_class``, ``tree``,
    ``on_st_or_in_serv``, ``nr_allocated`` (the kernel's ``entity->allocated``).
    Queue part: the sector tree ``sort_list`` and ``fifo`` of its queued requests,
    ``next_rq``, ``queued`` per direction, ``dispatched`` (in the driver),
    ``max_budget``, ``budget_timeout`` (jiffies),
    the seek and think-time history, the weight-raising state (``wr_coeff``,
    ``wr_cur_max_time``, ``last_wr_start_finish``, ...), the injection state and
    the flags of the kernel's ``BFQQF_*`` as booleans.
    """

    __slots__ = (
        # entity
        "start", "finish", "budget", "service", "weight", "orig_weight", "new_weight",
        "prio_changed", "ioprio_class", "new_ioprio_class", "ioprio", "tree",
        "on_st_or_in_serv", "nr_allocated", "weight_counter", "parent", "sched_data",
        "in_groups_with_pending_reqs",
        # queue
        "pid", "is_sync", "bic", "ref", "sort_list", "fifo", "next_rq", "queued",
        "dispatched", "max_budget", "budget_timeout", "seek_history",
        "last_request_pos", "ttime_samples", "ttime_total", "ttime_mean",
        "last_end_request", "creation_time", "io_start_time", "tot_idle_time",
        "requests_within_timer", "first_io_time", "service_from_backlogged",
        "service_from_wr", "wr_coeff", "wr_cur_max_time", "last_wr_start_finish",
        "wr_start_at_switch_to_srt", "soft_rt_next_start", "last_idle_bklogged",
        "split_time", "inject_limit", "last_serv_time_ns", "decrease_time_jif",
        "waker_bfqq", "tentative_waker_bfqq", "num_waker_detections",
        "waker_detection_started", "woken_list", "new_bfqq", "pos_key",
        "stable_ref",
        # BFQQF_* flags
        "busy", "wait_request", "non_blocking_wait_rq", "fifo_expire",
        "has_short_ttime", "io_bound", "in_large_burst", "coop", "split_coop",
        "softrt_update", "just_created", "in_burst_list",
    )

    def __init__(self, pid: int, is_sync: bool, ioprio: int, now_ns: int,
                 jiffies: int, max_budget: int) -> None:
        """``bfq_init_bfqq`` and ``bfq_init_entity``."""
        cls, level = class_and_level(ioprio)
        self.ioprio_class = self.new_ioprio_class = cls
        self.ioprio = level
        self.new_weight = self.orig_weight = self.weight = ioprio_to_weight(level)
        self.prio_changed = True
        self.start = self.finish = 0
        self.budget = self.service = 0
        self.tree = None
        self.on_st_or_in_serv = False
        self.nr_allocated = 0
        self.weight_counter = None
        self.parent = None
        self.sched_data = None
        self.in_groups_with_pending_reqs = False

        self.pid = pid
        self.is_sync = is_sync
        self.bic = None
        self.ref = 0
        self.sort_list = SectorMultiTree()
        self.fifo: list = []
        self.next_rq = None
        self.queued = [0, 0]
        self.dispatched = 0
        self.max_budget = (2 * max_budget) // 3
        self.budget_timeout = SMALLEST_FROM_NOW
        self.seek_history = 1
        self.last_request_pos = 0
        self.ttime_samples = self.ttime_total = self.ttime_mean = 0
        self.last_end_request = now_ns + 1
        self.creation_time = jiffies
        self.io_start_time = now_ns
        self.tot_idle_time = 0
        self.requests_within_timer = 0
        self.first_io_time = 0
        self.service_from_backlogged = 0
        self.service_from_wr = 0
        self.wr_coeff = 1
        self.wr_cur_max_time = 0
        self.last_wr_start_finish = jiffies
        self.wr_start_at_switch_to_srt = SMALLEST_FROM_NOW
        self.soft_rt_next_start = jiffies
        self.last_idle_bklogged = 0
        self.split_time = SMALLEST_FROM_NOW
        self.inject_limit = 0
        self.last_serv_time_ns = 0
        self.decrease_time_jif = jiffies
        self.waker_bfqq = None
        self.tentative_waker_bfqq = None
        self.num_waker_detections = 0
        self.waker_detection_started = 0
        self.woken_list: list = []
        self.new_bfqq = None
        self.pos_key = None
        self.stable_ref = 0

        self.busy = False
        self.wait_request = False
        self.non_blocking_wait_rq = False
        self.fifo_expire = False
        # bfq_init_bfqq tests bfq_class_idle() before bfq_init_entity has set the
        # class (still 0): every new sync queue starts with a short think time
        self.has_short_ttime = is_sync
        self.io_bound = True
        self.in_large_burst = False
        self.coop = False
        self.split_coop = False
        self.softrt_update = False
        self.just_created = is_sync
        self.in_burst_list = False

    #: a queue schedules no children (``bfq_entity_to_bfqq``)
    my_sched_data = None

    @property
    def budget_left(self) -> int:
        """``bfq_bfqq_budget_left``."""
        return self.budget - self.service

    @property
    def seeky(self) -> bool:
        """``BFQQ_SEEKY``: more than 19 of the last 32 requests were seeky."""
        return bin(self.seek_history & 0xFFFFFFFF).count("1") > 19

    @property
    def totally_seeky(self) -> bool:
        """``BFQQ_TOTALLY_SEEKY``: all of the last 32 requests were seeky."""
        return self.seek_history & 0xFFFFFFFF == 0xFFFFFFFF

    def __repr__(self) -> str:
        kind = "S" if self.is_sync else "A"
        return f"bfqq(pid={self.pid}{kind} w={self.weight} cls={self.ioprio_class})"


#: ``bfq_smallest_from_now``: a time in jiffies that is "long ago" for any comparison.
SMALLEST_FROM_NOW = -(1 << 62)


def choose_req(rq1, rq2, last: int, back_max: int, back_penalty: int):
    """``bfq_choose_req``: which of two requests to serve first with the head at
    ``last``. ``back_max`` is ``back_seek_max`` in sectors (the kernel doubles the
    KiB value)."""
    if rq1 is None or rq1 is rq2:
        return rq2
    if rq2 is None:
        return rq1
    if rq1.sync and not rq2.sync:
        return rq1
    if rq2.sync and not rq1.sync:
        return rq2
    s1 = rq1.sector
    s2 = rq2.sector
    wrap1 = wrap2 = False
    d1 = d2 = 0
    if s1 >= last:
        d1 = s1 - last
    elif s1 + back_max >= last:
        d1 = (last - s1) * back_penalty
    else:
        wrap1 = True
    if s2 >= last:
        d2 = s2 - last
    elif s2 + back_max >= last:
        d2 = (last - s2) * back_penalty
    else:
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
    # both wrapped: the one with the lower start (where a new sweep would begin)
    return rq1 if s1 <= s2 else rq2
