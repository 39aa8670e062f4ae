"""BFQ's ``low_latency`` heuristics: weight raising of interactive and soft real-time
queues and the detection of large bursts of queue creations, as block/bfq-iosched.c
of Linux 5.4 to 6.6 has them.

* **Interactive** (``bfq_bfqq_handle_idle_busy_switch``): a sync queue with the
  default weight (40), not in a large burst, that becomes busy after having been
  idle (nothing in flight) for ``bfq_wr_min_idle_time`` = 2 s since its last budget
  timeout -- which for a new queue lies in the distant past, so a new process
  qualifies at once -- gets ``wr_coeff`` = 30 for ``bfq_wr_duration``:
  ``rate_dur_prod / peak_rate`` jiffies (``rate_dur_prod`` = reference rate x
  reference duration, 7 s rotational, 2.5 s non-rotational), clamped to 3..25 s.
  The raising ends (``bfq_update_wr_data``) when that time has passed since it
  began (``last_wr_start_finish``), when the queue joins a large burst, or once it
  received more than ``max_service_from_wr`` = 120000 sectors while raised.
* **Soft real-time**: a sync queue with the default weight, not totally seeky, not
  in a burst, nothing in flight, becoming busy after its ``soft_rt_next_start``,
  gets ``wr_coeff`` = 30 x 100 for ``bfq_wr_rt_max_time`` = 300 ms, renewed at each
  such activation; ``soft_rt_next_start`` (``bfq_bfqq_softrt_next_start``) is when
  its rate would exceed ``bfq_wr_max_softrt_rate`` = 7000 sectors/s. When a soft
  real-time period ends within the interactive period it interrupted, the queue
  goes back to interactive raising (``switch_back_to_interactive_wr``).
* **Async**: a busy async queue with a new request at least
  ``bfq_wr_min_inter_arr_async`` = 500 ms after its raising last began or ended is
  raised as interactive (``bfq_add_request``).
* **Large burst** (``bfq_handle_burst``): 8 (``bfq_large_burst_thresh``) queues
  created with less than ``bfq_burst_interval`` = 180 ms between each and the
  previous one are all marked ``in_large_burst``, as is every queue created while
  the burst lasts: they are not raised (and lose raising).
"""

from __future__ import annotations

from blksim.block.elevator import msecs_to_jiffies

#: ``max_service_from_wr``, sectors.
MAX_SERVICE_FROM_WR = 120000
#: ``ref_wr_duration``: [rotational, non-rotational], ms.
REF_WR_DURATION_MS = (7000, 2500)
BFQ_SOFTRT_WEIGHT_FACTOR = 100
BFQ_LARGE_BURST_THRESH = 8


def wr_duration(bfqd) -> int:
    """``bfq_wr_duration``: interactive raising time in jiffies."""
    dur = bfqd.rate_dur_prod // bfqd.peak_rate
    return min(max(dur, msecs_to_jiffies(3000, bfqd.hz)), msecs_to_jiffies(25000, bfqd.hz))


def switch_back_to_interactive_wr(bfqd, bfqq) -> None:
    """``switch_back_to_interactive_wr``."""
    bfqq.wr_coeff = bfqd.bfq_wr_coeff
    bfqq.wr_cur_max_time = wr_duration(bfqd)
    bfqq.last_wr_start_finish = bfqq.wr_start_at_switch_to_srt


def end_wr(bfqd, bfqq) -> None:
    """``bfq_bfqq_end_wr``."""
    if bfqd.msg is not None and bfqq.wr_coeff > 1:
        bfqd.msg("wr_end", bfqq.pid or 0, "ended")
    if bfqq.wr_cur_max_time != bfqd.bfq_wr_rt_max_time:
        bfqq.soft_rt_next_start = bfqd.jiffies
    if bfqq.busy and bfqq.wr_coeff > 1:
        bfqd.wr_busy_queues -= 1
    bfqq.wr_coeff = 1
    bfqq.wr_cur_max_time = 0
    bfqq.last_wr_start_finish = bfqd.jiffies
    bfqq.prio_changed = True


def softrt_seeky(bfqd, bfqq) -> None:
    """``bfq_update_io_seektime``'s end of a soft real-time raising for a queue found
    totally seeky: back to interactive raising if that period is not over."""
    if bfqq.wr_start_at_switch_to_srt + wr_duration(bfqd) < bfqd.jiffies:
        end_wr(bfqd, bfqq)
    else:
        switch_back_to_interactive_wr(bfqd, bfqq)
        bfqq.prio_changed = True


def update_wr_on_rq_arrival(bfqd, bfqq, old_wr_coeff: int, wr_or_deserves_wr: bool,
                            interactive: bool, in_burst: bool, soft_rt: bool) -> None:
    """``bfq_update_bfqq_wr_on_rq_arrival``: start, renew or end raising as the queue
    becomes busy."""
    jiffies = bfqd.jiffies
    if old_wr_coeff == 1 and wr_or_deserves_wr:
        if bfqd.msg is not None:
            bfqd.msg("wr_start", bfqq.pid or 0, "interactive" if interactive else "soft_rt")
        if interactive:
            bfqq.service_from_wr = 0
            bfqq.wr_coeff = bfqd.bfq_wr_coeff
            bfqq.wr_cur_max_time = wr_duration(bfqd)
        else:
            bfqq.wr_start_at_switch_to_srt = -(1 << 62)
            bfqq.wr_coeff = bfqd.bfq_wr_coeff * BFQ_SOFTRT_WEIGHT_FACTOR
            bfqq.wr_cur_max_time = bfqd.bfq_wr_rt_max_time
        bfqq.budget = min(bfqq.budget, 2 * bfqd.min_budget())
    elif old_wr_coeff > 1:
        if interactive:
            bfqq.wr_coeff = bfqd.bfq_wr_coeff
            bfqq.wr_cur_max_time = wr_duration(bfqd)
        elif in_burst:
            if bfqd.msg is not None:
                bfqd.msg("wr_end", bfqq.pid or 0, "burst")
            bfqq.wr_coeff = 1
        elif soft_rt:
            if bfqq.wr_cur_max_time != bfqd.bfq_wr_rt_max_time:
                bfqq.wr_start_at_switch_to_srt = bfqq.last_wr_start_finish
                bfqq.wr_cur_max_time = bfqd.bfq_wr_rt_max_time
                bfqq.wr_coeff = bfqd.bfq_wr_coeff * BFQ_SOFTRT_WEIGHT_FACTOR
            bfqq.last_wr_start_finish = jiffies


def update_wr_data(bfqd, bfqq) -> None:
    """``bfq_update_wr_data``: at each dispatch of the in-service queue, end its raising
    if its period is over (a soft real-time period falls back to what is left of an
    interrupted interactive one), it is in a large burst, or it received
    ``max_service_from_wr`` while raised as interactive; then apply the new weight."""
    jiffies = bfqd.jiffies
    if bfqq.wr_coeff > 1:
        if bfqq.in_large_burst:
            end_wr(bfqd, bfqq)
        elif bfqq.last_wr_start_finish + bfqq.wr_cur_max_time < jiffies:
            if (bfqq.wr_cur_max_time != bfqd.bfq_wr_rt_max_time
                    or bfqq.wr_start_at_switch_to_srt + wr_duration(bfqd) < jiffies):
                end_wr(bfqd, bfqq)
            else:
                switch_back_to_interactive_wr(bfqd, bfqq)
                bfqq.prio_changed = True
        if (bfqq.wr_coeff > 1 and bfqq.wr_cur_max_time != bfqd.bfq_wr_rt_max_time
                and bfqq.service_from_wr > MAX_SERVICE_FROM_WR):
            end_wr(bfqd, bfqq)
    if (bfqq.weight > bfqq.orig_weight) != (bfqq.wr_coeff > 1):
        wf2q = bfqd.wf2q
        wf2q.update_weight_prio(wf2q.tree_of(bfqq), bfqq, False)


def softrt_next_start(bfqd, bfqq) -> int:
    """``bfq_bfqq_softrt_next_start``: the earliest time (jiffies) the queue may be
    raised as soft real-time again."""
    return max(bfqq.soft_rt_next_start,
               bfqq.last_idle_bklogged
               + bfqd.hz * bfqq.service_from_backlogged // bfqd.bfq_wr_max_softrt_rate,
               bfqd.jiffies + bfqd.slice_idle_jiffies_floor + 4)


def end_all(bfqd) -> None:
    """``bfq_end_wr``: ``low_latency`` was cleared: end every queue's raising."""
    for bfqq in bfqd.all_queues():
        if bfqq.wr_coeff > 1 or bfqq.wr_cur_max_time:
            end_wr(bfqd, bfqq)


# --- large bursts --------------------------------------------------------------------
def handle_burst(bfqd, bfqq) -> None:
    """``bfq_handle_burst``: account the creation of a sync queue in the current burst."""
    jiffies = bfqd.jiffies
    if (bfqq.in_burst_list or bfqq.in_large_burst
            or bfqq.split_time + msecs_to_jiffies(10, bfqd.hz) >= jiffies):
        return
    if bfqd.last_ins_in_burst + bfqd.bfq_burst_interval < jiffies:
        bfqd.large_burst = False
        _reset_burst_list(bfqd, bfqq)
    elif bfqd.large_burst:
        bfqq.in_large_burst = True
    else:
        _add_to_burst(bfqd, bfqq)
    bfqd.last_ins_in_burst = jiffies


def _reset_burst_list(bfqd, bfqq) -> None:
    """``bfq_reset_burst_list``."""
    for item in bfqd.burst_list:
        item.in_burst_list = False
    bfqd.burst_list = []
    if bfqd.tot_busy_queues == 0:
        bfqd.burst_list.append(bfqq)
        bfqq.in_burst_list = True
        bfqd.burst_size = 1
    else:
        bfqd.burst_size = 0


def _add_to_burst(bfqd, bfqq) -> None:
    """``bfq_add_to_burst``: at the threshold every queue of the burst is marked."""
    bfqd.burst_size += 1
    if bfqd.burst_size == BFQ_LARGE_BURST_THRESH:
        bfqd.large_burst = True
        for item in bfqd.burst_list:
            item.in_large_burst = True
            item.in_burst_list = False
        bfqq.in_large_burst = True
        bfqd.burst_list = []
    else:
        bfqd.burst_list.append(bfqq)
        bfqq.in_burst_list = True
