"""What differs between the multi-queue kernel lines blksim models, as data.

Each row of `LINES` is a behaviour switch of the multi-queue core (block/blk-mq.c,
blk-mq-sched.c, blk-mq-tag.c, blk-mq-cpumap.c, blk-core.c, elevator.c) with the value
each LTS line has; `variant(kernel)` gives one line's switches. The schedulers keep
their own tables.

==========================  =====  =====  =====  =====  =====  ==========================
switch                      5.4    5.10   5.15   6.1    6.6    where (function)
==========================  =====  =====  =====  =====  =====  ==========================
plug_limit                  16     16     32     32     32     BLK_MAX_REQUEST_COUNT
                                                               (include/linux/blkdev.h,
                                                               block/blk.h)
direct_issue_6x             no     no     no     yes    yes    blk_mq_submit_bio: without
                                                               a plug or an elevator, 5.x
                                                               issues directly a sync
                                                               request of a multi-queue
                                                               device or any when the hctx
                                                               is not busy; 6.x unless the
                                                               hctx is busy and (one hctx
                                                               or async). A flushed plug
                                                               goes straight (none) when
                                                               the task slept on 5.x only
plug_merge_newest_only      no     no     no     yes    yes    blk_attempt_plug_merge:
                                                               5.x scans the whole plug,
                                                               6.x its newest request
rq_merge_tracepoint         no     yes    yes    yes    yes    attempt_merge fires
                                                               block_rq_merge from 5.10
sq_sched                    no     no     no     yes    yes    QUEUE_FLAG_SQ_SCHED
                                                               (mq-deadline, bfq):
                                                               blk_mq_run_hw_queues runs
                                                               one hctx
wake_by_completion_count    no     no     no     yes    yes    sbitmap_queue_wake_up:
                                                               5.x a countdown per wait
                                                               queue, 6.x one counter
cpumap_groups               no     no     no     no     yes    blk_mq_map_queues:
                                                               group_cpus_evenly from 6.6
budget_delay_rerun          no     yes    yes    yes    yes    blk_mq_do_dispatch_sched:
                                                               an elevator that dispatched
                                                               nothing gets its hctxs run
                                                               again after 3 ms
                                                               (BLK_MQ_BUDGET_DELAY, 5.8)
flush_data_normal_path      no     no     no     no     yes    blk_insert_flush: from 6.5
                                                               a request with data whose
                                                               flush policy has no
                                                               PREFLUSH goes the normal
                                                               way (plug, elevator, direct
                                                               issue); before, it bypasses
                                                               the elevator
flush_defer_always          no     yes    yes    yes    yes    blk_kick_flush: a flush
                                                               waits for a sequence's data
                                                               in flight (C2) with or
                                                               without an elevator from
                                                               5.9; 5.4 only with one
==========================  =====  =====  =====  =====  =====  ==========================
"""

from __future__ import annotations

from blksim.block.elevator import kernel_version
from blksim.block.mq.elevator import MQ_KERNELS

_SWITCHES = ("plug_limit", "direct_issue_6x", "plug_merge_newest_only",
             "rq_merge_tracepoint", "sq_sched", "wake_by_completion_count", "cpumap_groups",
             "budget_delay_rerun", "flush_data_normal_path", "flush_defer_always")

LINES = {
    #       limit everywhere newest rq_merge sq_sched by_count groups budget_rerun
    #       flush_data flush_defer
    "5.4":  (16, False, False, False, False, False, False, False, False, False),
    "5.10": (16, False, False, True, False, False, False, True, False, True),
    "5.15": (32, False, False, True, False, False, False, True, False, True),
    "6.1":  (32, True, True, True, True, True, False, True, False, True),
    "6.6":  (32, True, True, True, True, True, True, True, True, True),
}
assert tuple(LINES) == MQ_KERNELS


class MqVariant:
    """The switches of one kernel line (attributes named as in the table above)."""

    __slots__ = ("kernel",) + _SWITCHES

    def __init__(self, kernel: str, values: tuple) -> None:
        self.kernel = kernel
        for name, value in zip(_SWITCHES, values):
            setattr(self, name, value)


def variant(kernel: str) -> MqVariant:
    """The switches of the newest modelled line not newer than ``kernel``."""
    wanted = kernel_version(kernel)
    fits = [k for k in LINES if kernel_version(k) <= wanted]
    if not fits:
        raise ValueError(f"the multi-queue layer is modelled from Linux 5.4 on, got "
                         f"{kernel!r}; valid: {', '.join(LINES)}")
    line = max(fits, key=kernel_version)
    return MqVariant(line, LINES[line])
