"""BFQ's budgets: the device's peak rate, the maximum budget derived from it, the budget
a queue gets after each expiration, and the time charged to slow queues, as
block/bfq-iosched.c of Linux 5.4 to 6.6 computes them.

* Peak rate (``bfq_update_peak_rate``, ``bfq_update_rate_reset``): sectors per
  microsecond, fixed point with ``BFQ_RATE_SHIFT`` = 16, measured over intervals of
  at least 32 dispatches and 300 ms (observations end after 1 s, or 100 ms without
  dispatches and nothing in the driver); a new sample is folded in with a weight
  that grows with the interval's length and its share of sequential dispatches, and
  only if the interval was mostly sequential or beat the current estimate.
  It starts at 2/3 of the reference rate (14000 rotational, 33000 non-rotational).
* Maximum budget (``bfq_calc_max_budget``): ``peak_rate * timeout_sync`` when the
  ``max_budget`` tunable is 0; until 194 budgets have been handed out
  (``bfq_stats_min_budgets``, counted as an EWMA in ``__bfq_set_in_service_queue``)
  the default 16384 sectors is used (``bfq_max_budget``), and the minimum budget is
  always a 32nd of the maximum (``bfq_min_budget``).
* Next budget (``__bfq_bfqq_recalc_budget``), by the reason the queue expired.
"""

from __future__ import annotations

BFQ_RATE_SHIFT = 16
BFQ_RATE_MIN_SAMPLES = 32
BFQ_RATE_MIN_INTERVAL_NS = 300_000_000
BFQ_RATE_REF_INTERVAL_NS = 1_000_000_000
BFQ_STATS_MIN_BUDGETS = 194
BFQ_DEFAULT_MAX_BUDGET = 16 * 1024
#: ``ref_rate``: reference peak rates (sectors/usec << 16), [rotational, non-rotational].
REF_RATE = (14000, 33000)
#: ``BFQ_MIN_TT``: 2 ms, in ns.
BFQ_MIN_TT_NS = 2_000_000
#: ``BFQQ_SEEK_THR`` and ``BFQQ_SECT_THR_NONROT``, sectors.
BFQQ_SEEK_THR = 8 * 100
BFQQ_SECT_THR_NONROT = 2 * 32

#: Expiration reasons (``enum bfqq_expiration``).
TOO_IDLE, BUDGET_TIMEOUT, BUDGET_EXHAUSTED, NO_MORE_REQUESTS, PREEMPTED = range(5)
REASON_NAMES = ("too_idle", "budget_timeout", "budget_exhausted", "no_more_requests",
                "preempted")


def rq_seeky(last_pos: int, rq, nonrot: bool) -> bool:
    """``BFQ_RQ_SEEKY``: ``rq`` starts more than 800 sectors from ``last_pos`` (and, on
    a non-rotational device, is smaller than 64 sectors). ``get_sdist`` counts a
    distance of 0 when ``last_pos`` is 0."""
    dist = abs(rq.sector - last_pos) if last_pos else 0
    return dist > BFQQ_SEEK_THR and (not nonrot or rq.nr_sectors < BFQQ_SECT_THR_NONROT)


def max_budget(bfqd) -> int:
    """``bfq_max_budget``."""
    if bfqd.budgets_assigned < BFQ_STATS_MIN_BUDGETS:
        return BFQ_DEFAULT_MAX_BUDGET
    return bfqd.bfq_max_budget


def min_budget(bfqd) -> int:
    """``bfq_min_budget``."""
    if bfqd.budgets_assigned < BFQ_STATS_MIN_BUDGETS:
        return BFQ_DEFAULT_MAX_BUDGET // 32
    return bfqd.bfq_max_budget // 32


def calc_max_budget(bfqd) -> int:
    """``bfq_calc_max_budget``: what the device does in one ``timeout_sync`` at the
    peak rate (``jiffies_to_msecs`` of the timeout, as the kernel rounds it)."""
    timeout_ms = bfqd.bfq_timeout * 1000 // bfqd.hz
    return (bfqd.peak_rate * 1000 * timeout_ms) >> BFQ_RATE_SHIFT


def recalc_budget(bfqd, bfqq, reason: int) -> None:
    """``__bfq_bfqq_recalc_budget``: the queue's next maximum budget. A sync queue that
    is not weight-raised: too idle -> double it if requests are still in flight,
    else shrink by 4 minimum budgets (to the minimum); budget timeout -> double;
    budget exhausted -> quadruple (all at most the maximum); no more requests ->
    the service it received (at least the minimum). An async queue gets the
    maximum, a raised one twice the minimum. The entity's budget is then set to
    cover at least its next request."""
    mn = min_budget(bfqd)
    budget = bfqq.max_budget if bfqq.wr_coeff == 1 else 2 * mn
    if bfqq.is_sync and bfqq.wr_coeff == 1:
        if reason == TOO_IDLE:
            if bfqq.dispatched > 0:
                budget = min(budget * 2, bfqd.bfq_max_budget)
            elif budget > 5 * mn:
                budget -= 4 * mn
            else:
                budget = mn
        elif reason == BUDGET_TIMEOUT:
            budget = min(budget * 2, bfqd.bfq_max_budget)
        elif reason == BUDGET_EXHAUSTED:
            budget = min(budget * 4, bfqd.bfq_max_budget)
        elif reason == NO_MORE_REQUESTS:
            budget = max(bfqq.service, mn)
        else:
            return
    elif not bfqq.is_sync:
        budget = bfqd.bfq_max_budget
    bfqq.max_budget = budget
    if bfqd.budgets_assigned >= BFQ_STATS_MIN_BUDGETS and not bfqd.user_max_budget:
        bfqq.max_budget = min(bfqq.max_budget, bfqd.bfq_max_budget)
    if bfqq.next_rq is not None:
        bfqq.budget = max(bfqq.max_budget, bfqd.serv_to_charge(bfqq.next_rq, bfqq))


def bfqq_is_slow(bfqd, bfqq, compensate: bool) -> tuple[bool, int]:
    """``bfq_bfqq_is_slow``: whether the queue was slow in its last slot, and the slot's
    length in ms. A seeky queue is slow; a slot over 20 ms is slow when it used
    less than half the maximum budget. ``compensate`` ends the slot where idling
    began (the idle time is not the queue's)."""
    slow = bfqq.seeky
    if not bfqq.is_sync:
        return False, 0
    end = bfqd.last_idling_start if compensate else bfqd.now_ns
    delta_us = (end - bfqd.last_budget_start) // 1000
    if delta_us < 1000:
        if not bfqd.info.rotational:
            return slow, BFQ_MIN_TT_NS // 1_000_000
        return slow, bfqd.default_slice_idle_ns // 1_000_000
    if delta_us > 20000:
        slow = bfqq.service < bfqd.bfq_max_budget // 2
    return slow, delta_us // 1000


# --- peak rate ---------------------------------------------------------------------
def reset_rate_computation(bfqd, rq) -> None:
    """``bfq_reset_rate_computation``: start a new observation interval at ``rq``."""
    if rq is not None:
        bfqd.last_dispatch = bfqd.first_dispatch = bfqd.now_ns
        bfqd.peak_rate_samples = 1
        bfqd.sequential_samples = 0
        bfqd.tot_sectors_dispatched = bfqd.last_rq_max_size = rq.nr_sectors
    else:
        bfqd.peak_rate_samples = 0


def update_rate_reset(bfqd, rq) -> None:
    """``bfq_update_rate_reset``: fold the interval's rate into the estimate when it is
    long and sequential enough, then start a new interval."""
    if (bfqd.peak_rate_samples >= BFQ_RATE_MIN_SAMPLES
            and bfqd.delta_from_first >= BFQ_RATE_MIN_INTERVAL_NS):
        bfqd.delta_from_first = max(bfqd.delta_from_first,
                                    bfqd.last_completion - bfqd.first_dispatch)
        rate = ((bfqd.tot_sectors_dispatched << BFQ_RATE_SHIFT)
                // max(1, bfqd.delta_from_first // 1000))
        mostly_random = bfqd.sequential_samples < (3 * bfqd.peak_rate_samples) >> 2
        if not ((mostly_random and rate <= bfqd.peak_rate) or rate > 20 << BFQ_RATE_SHIFT):
            weight = (9 * bfqd.sequential_samples) // bfqd.peak_rate_samples
            weight = min(8, weight * bfqd.delta_from_first // BFQ_RATE_REF_INTERVAL_NS)
            divisor = 10 - weight
            bfqd.peak_rate = bfqd.peak_rate * (divisor - 1) // divisor
            bfqd.peak_rate = max(1, bfqd.peak_rate + rate // divisor)
            if bfqd.user_max_budget == 0:              # update_thr_responsiveness_params
                bfqd.bfq_max_budget = calc_max_budget(bfqd)
    reset_rate_computation(bfqd, rq)


def update_peak_rate(bfqd, rq) -> None:
    """``bfq_update_peak_rate``: account a dispatch of ``rq``."""
    now_ns = bfqd.now_ns
    if bfqd.peak_rate_samples == 0:
        reset_rate_computation(bfqd, rq)
    else:
        if now_ns - bfqd.last_dispatch > 100_000_000 and bfqd.tot_rq_in_driver == 0:
            update_rate_reset(bfqd, rq)
        else:
            bfqd.peak_rate_samples += 1
            if ((bfqd.tot_rq_in_driver > 0 or now_ns - bfqd.last_completion < BFQ_MIN_TT_NS)
                    and not rq_seeky(bfqd.last_position, rq, not bfqd.info.rotational)):
                bfqd.sequential_samples += 1
            bfqd.tot_sectors_dispatched += rq.nr_sectors
            if bfqd.peak_rate_samples % 32:
                bfqd.last_rq_max_size = max(rq.nr_sectors, bfqd.last_rq_max_size)
            else:
                bfqd.last_rq_max_size = rq.nr_sectors
            bfqd.delta_from_first = now_ns - bfqd.first_dispatch
            if bfqd.delta_from_first >= BFQ_RATE_REF_INTERVAL_NS:
                update_rate_reset(bfqd, rq)
    bfqd.last_position = rq.sector + rq.nr_sectors
    if rq.sched is bfqd.in_service_queue:
        bfqd.in_serv_last_pos = bfqd.last_position
    bfqd.last_dispatch = now_ns
