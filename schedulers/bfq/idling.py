"""When BFQ idles (keeps an empty queue in service, waiting for its process's next
request) and what it serves meanwhile (I/O injection), as block/bfq-iosched.c of Linux
5.4 to 6.6 decides it.

``bfq_better_to_idle`` for the in-service queue, once it has no request queued:

* never if ``slice_idle`` is 0, the queue is async or of the IDLE class, or no
  process uses it any more; always with ``strict_guarantees``;
* for throughput (``idling_boosts_thr_without_issues``): the device is rotational
  and does not queue (``hw_tag`` false), or -- on a rotational or non-queueing
  device -- the queue is sequential, I/O-bound and has a short think time; but not
  while any weight-raised queue is busy;
* for service guarantees (``idling_needed_for_service_guarantees``): the queue is
  weight-raised and some busy queue is not (or the driver holds 4 or more requests
  besides the queue's own); or the scenario is asymmetric
  (``bfq_asymmetric_scenario``: the queue's weight is not the smallest among
  several, or queues of more than one class are busy); or, from 5.15, it is the
  only busy queue.

The idle slice (``bfq_arm_slice_timer``) lasts ``slice_idle``, but 2 ms
(``BFQ_MIN_TT``) for a seeky non-raised queue in a symmetric scenario, and at least
20 ms for a raised one. Think time is an EWMA of the time from a queue's last
completion to its next arrival (``bfq_update_io_thinktime``); it is short when at
most ``slice_idle`` (5.4, 5.10) or ``slice_idle / 2`` (from 5.15) once there are
enough samples (``bfq_update_has_short_ttime``).

While the queue is idled, another queue's request may be dispatched
(``bfq_select_queue``): the process's async queue, its waker or woken queue, or
(``bfq_choose_bfqq_for_injection``) the first active queue whose next request fits
its budget, as long as fewer than ``inject_limit`` requests are in the driver; the
limit adapts to how much injection lengthens the queue's own service time
(``bfq_update_inject_limit``).
"""

from __future__ import annotations

from blksim.block.request import IOPRIO_CLASS_IDLE

from blksim.schedulers.bfq import weight_raising
from blksim.schedulers.bfq.budget import BFQ_MIN_TT_NS, BFQQ_SECT_THR_NONROT, rq_seeky

BFQ_HW_QUEUE_THRESHOLD = 3
BFQ_HW_QUEUE_SAMPLES = 32


def sample_valid(samples: int) -> bool:
    """``bfq_sample_valid``."""
    return samples > 80


# --- per-queue history, updated at insert -------------------------------------------
def update_io_thinktime(bfqd, bfqq) -> None:
    """``bfq_update_io_thinktime`` (from 5.15 only for a queue with nothing queued or
    in flight, whose next arrival ends a real think time)."""
    if bfqd.variant["thinktime_only_when_idle"] and (bfqq.dispatched or bfqq.busy):
        return
    elapsed = bfqd.now_ns - bfqq.last_end_request
    elapsed = min(max(elapsed, 0), 2 * bfqd.bfq_slice_idle)
    bfqq.ttime_samples = (7 * bfqq.ttime_samples + 256) // 8
    bfqq.ttime_total = (7 * bfqq.ttime_total + 256 * elapsed) // 8
    bfqq.ttime_mean = (bfqq.ttime_total + 128) // bfqq.ttime_samples


def update_io_seektime(bfqd, bfqq, rq) -> None:
    """``bfq_update_io_seektime``: shift the request's seekiness into the history; a
    soft real-time queue found totally seeky loses that raising."""
    bfqq.seek_history = ((bfqq.seek_history << 1)
                         | rq_seeky(bfqq.last_request_pos, rq, not bfqd.info.rotational)
                         ) & 0xFFFFFFFF
    if (bfqq.wr_coeff > 1 and bfqq.wr_cur_max_time == bfqd.bfq_wr_rt_max_time
            and bfqq.totally_seeky):
        weight_raising.softrt_seeky(bfqd, bfqq)


def update_has_short_ttime(bfqd, bfqq) -> None:
    """``bfq_update_has_short_ttime``. A process that has exited (its context has no
    active reference) has no short think time."""
    if not bfqq.is_sync or bfqq.ioprio_class == IOPRIO_CLASS_IDLE or bfqd.bfq_slice_idle == 0:
        return
    if bfqq.split_time + bfqd.bfq_wr_min_idle_time >= bfqd.jiffies:
        return
    threshold = bfqd.bfq_slice_idle >> bfqd.variant["short_ttime_shift"]
    short = not (bfqq.ref == 0 or (sample_valid(bfqq.ttime_samples)
                                   and bfqq.ttime_mean > threshold))
    changed = short != bfqq.has_short_ttime
    bfqq.has_short_ttime = short
    if (changed and bfqq.last_serv_time_ns == 0
            and (bfqq.decrease_time_jif + bfqd.msecs_to_jiffies(100) <= bfqd.jiffies
                 or not short)):
        reset_inject_limit(bfqd, bfqq)


def update_io_intensity(bfqd, bfqq) -> None:
    """``bfq_update_io_intensity`` (from 5.15): I/O-bound while idle at most a fifth of
    the time since its I/O started (halved every 200 ms)."""
    now_ns = bfqd.now_ns
    tot_io_time = now_ns - bfqq.io_start_time
    if not bfqq.sort_list and bfqq.dispatched == 0:
        bfqq.tot_idle_time += now_ns - bfqq.last_end_request
    if bfqq.just_created:
        return
    bfqq.io_bound = not bfqq.tot_idle_time * 5 > tot_io_time
    if tot_io_time > 200_000_000:
        bfqq.io_start_time = now_ns - (tot_io_time >> 1)
        bfqq.tot_idle_time >>= 1


def update_io_bound_on_activation(bfqd, bfqq, arrived_in_time: bool) -> None:
    """5.4 and 5.10 (``bfq_bfqq_handle_idle_busy_switch``): a queue that is not I/O-bound
    becomes so after ``bfq_requests_within_timer`` = 120 activations in a row that
    arrived within ``3 * slice_idle`` of its last completion."""
    if bfqq.io_bound:
        return
    if arrived_in_time:
        bfqq.requests_within_timer += 1
        if bfqq.requests_within_timer >= 120:
            bfqq.io_bound = True
    else:
        bfqq.requests_within_timer = 0


def update_hw_tag(bfqd) -> None:
    """``bfq_update_hw_tag``: after 32 samples with enough outstanding requests, decide
    whether the device queues internally (more than 3 ever in the driver)."""
    bfqd.max_rq_in_driver = max(bfqd.max_rq_in_driver, bfqd.tot_rq_in_driver)
    if bfqd.hw_tag == 1:
        return
    if bfqd.tot_rq_in_driver + bfqd.nr_queued <= BFQ_HW_QUEUE_THRESHOLD:
        return
    bfqq = bfqd.in_service_queue
    if (bfqq is not None and bfqq.has_short_ttime
            and bfqq.dispatched + bfqq.queued[0] + bfqq.queued[1] < BFQ_HW_QUEUE_THRESHOLD
            and bfqd.tot_rq_in_driver < BFQ_HW_QUEUE_THRESHOLD):
        return
    bfqd.hw_tag_samples += 1
    if bfqd.hw_tag_samples - 1 < BFQ_HW_QUEUE_SAMPLES:
        return
    bfqd.hw_tag = 1 if bfqd.max_rq_in_driver > BFQ_HW_QUEUE_THRESHOLD else 0
    bfqd.max_rq_in_driver = 0
    bfqd.hw_tag_samples = 0
    bfqd.nonrot_with_queueing = (not bfqd.info.rotational) and bfqd.hw_tag == 1


# --- the idling decision ------------------------------------------------------------
def asymmetric_scenario(bfqd, bfqq) -> bool:
    """``bfq_asymmetric_scenario``: the queues do not all get the same share. Weights
    are counted over the busy (or in-flight) queues that are not raised
    (``queue_weights_tree``); groups with pending requests count as the kernel line
    does (`blksim.schedulers.bfq.groups.Groups.asymmetric`: never without groups)."""
    weights = bfqd.weights
    smallest_weight = (bfqq is not None and bfqq.weight_counter is not None
                       and weights and bfqq.weight_counter == min(weights))
    varied = not smallest_weight and len(weights) > 1
    b = bfqd.busy_queues
    multiple_classes = (b[0] and b[1]) or (b[0] and b[2]) or (b[1] and b[2])
    return bool(varied or multiple_classes) or bfqd.groups.asymmetric


def idling_boosts_thr_without_issues(bfqd, bfqq) -> bool:
    """``idling_boosts_thr_without_issues``."""
    if bfqq.ref == 0:
        return False
    rotational = bfqd.info.rotational
    hw_tag = bfqd.hw_tag != 0          # -1 (not yet known) is true in C, as queueing
    rot_without_queueing = rotational and not hw_tag
    sequential_io_bound = not bfqq.seeky and bfqq.io_bound and bfqq.has_short_ttime
    boosts = rot_without_queueing or ((rotational or not hw_tag) and sequential_io_bound)
    return boosts and bfqd.wr_busy_queues == 0


def idling_needed_for_service_guarantees(bfqd, bfqq) -> bool:
    """``idling_needed_for_service_guarantees``."""
    if bfqq.ref == 0:
        return False
    tot_busy = bfqd.tot_busy_queues
    return ((bfqq.wr_coeff > 1
             and (bfqd.wr_busy_queues < tot_busy
                  or bfqd.tot_rq_in_driver >= bfqq.dispatched + 4))
            or asymmetric_scenario(bfqd, bfqq)
            or (bfqd.variant["idle_if_only_busy"] and tot_busy == 1))


def better_to_idle(bfqd, bfqq) -> bool:
    """``bfq_better_to_idle``."""
    if bfqq.ref == 0:
        return False
    if bfqd.strict_guarantees:
        return True
    if bfqd.bfq_slice_idle == 0 or not bfqq.is_sync or bfqq.ioprio_class == IOPRIO_CLASS_IDLE:
        return False
    return (idling_boosts_thr_without_issues(bfqd, bfqq)
            or idling_needed_for_service_guarantees(bfqd, bfqq))


def must_idle(bfqd, bfqq) -> bool:
    """``bfq_bfqq_must_idle``: empty and better to idle."""
    return not bfqq.sort_list and better_to_idle(bfqd, bfqq)


def slice_idle_ns(bfqd, bfqq) -> int:
    """The idle slice ``bfq_arm_slice_timer`` arms, in ns."""
    sl = bfqd.bfq_slice_idle
    if bfqq.seeky and bfqq.wr_coeff == 1 and not asymmetric_scenario(bfqd, bfqq):
        sl = min(sl, BFQ_MIN_TT_NS)
    elif bfqq.wr_coeff > 1:
        sl = max(sl, 20_000_000)
    return sl


# --- injection -------------------------------------------------------------------------
def reset_inject_limit(bfqd, bfqq) -> None:
    """``bfq_reset_inject_limit``: forget the baseline; start at 0 with a short think
    time (injection could delay the queue's next request), else 1."""
    bfqq.last_serv_time_ns = 0
    bfqd.waited_rq = None
    bfqq.inject_limit = 0 if bfqq.has_short_ttime else 1
    bfqq.decrease_time_jif = bfqd.jiffies


def choose_bfqq_for_injection(bfqd):
    """``bfq_choose_bfqq_for_injection``: while the in-service queue is idled, the first
    active queue (most recently activated first) whose next request fits its
    budget, if fewer than ``inject_limit`` requests are in the driver (1 when the
    queue has no baseline yet and has been idled for ``slice_idle``). A raised
    in-service queue with a short think time accepts only raised queues; on a
    non-rotational device at most one large request is injected at a time. Up to
    6.1 the limit is checked again per candidate (``inject_limit_rule``)."""
    in_serv = bfqd.in_service_queue
    limit = in_serv.inject_limit
    always_inject = in_serv.wr_coeff == 1 or not in_serv.has_short_ttime
    if (limit == 0 and in_serv.last_serv_time_ns == 0 and in_serv.wait_request
            and bfqd.last_idling_start_jiffies + bfqd.slice_idle_jiffies <= bfqd.jiffies):
        limit = 1
    in_driver = bfqd.tot_rq_in_driver
    if in_driver >= limit:
        return None
    nonrot = not bfqd.info.rotational
    per_candidate = bfqd.variant["inject_limit_rule"] == "5.4"
    for bfqq in bfqd.active_list:
        if (bfqq.sort_list and (always_inject or bfqq.wr_coeff > 1)
                and bfqd.serv_to_charge(bfqq.next_rq, bfqq) <= bfqq.budget_left):
            large = nonrot and bfqq.next_rq.nr_sectors >= BFQQ_SECT_THR_NONROT
            if per_candidate:               # 5.4 - 6.1
                limit = min(1, limit) if large else in_serv.inject_limit
                if in_driver < limit:
                    bfqd.rqs_injected = True
                    return bfqq
                continue
            if large and in_driver >= 1:    # 6.6
                continue
            bfqd.rqs_injected = True
            return bfqq
    return None


def update_inject_limit(bfqd, bfqq) -> None:
    """``bfq_update_inject_limit``: at the completion of the request the in-service
    queue waited for, compare its service time with the baseline: 1.5 times
    longer with injection lowers the limit, shorter raises it (up to the most
    requests seen in the driver); a shorter time without injection is the new
    baseline."""
    tot_time_ns = bfqd.now_ns - bfqd.last_empty_occupied_ns
    old_limit = bfqq.inject_limit
    if bfqq.last_serv_time_ns > 0 and bfqd.rqs_injected:
        threshold = (bfqq.last_serv_time_ns * 3) >> 1
        if tot_time_ns >= threshold and old_limit > 0:
            bfqq.inject_limit -= 1
            bfqq.decrease_time_jif = bfqd.jiffies
        elif tot_time_ns < threshold and old_limit <= bfqd.max_rq_in_driver:
            bfqq.inject_limit += 1
    if ((bfqq.last_serv_time_ns == 0 and bfqd.tot_rq_in_driver == 1)
            or tot_time_ns < bfqq.last_serv_time_ns):
        if bfqq.last_serv_time_ns == 0:
            bfqq.inject_limit = max(1, old_limit)
        bfqq.last_serv_time_ns = tot_time_ns
    elif not bfqd.rqs_injected and bfqd.tot_rq_in_driver == 1:
        bfqq.last_serv_time_ns = tot_time_ns
    bfqd.waited_rq = None
    bfqd.rqs_injected = False


def check_waker(bfqd, bfqq) -> None:
    """``bfq_check_waker`` (5.15+): a queue whose new I/O three times in a row arrives
    less than 4 ms after a completion of the same other queue has that queue as its
    waker (from 6.1 the three must fall within ``128 * slice_idle``)."""
    last = bfqd.last_completed_rq_bfqq
    now_ns = bfqd.now_ns
    if (last is None or last is bfqq or bfqq.has_short_ttime
            or now_ns - bfqd.last_completion >= 4_000_000):
        return
    window_over = (bfqd.variant["waker"] == "6.1"
                   and now_ns > bfqq.waker_detection_started + 128 * bfqd.bfq_slice_idle)
    if last is not bfqq.tentative_waker_bfqq or window_over:
        bfqq.tentative_waker_bfqq = last
        bfqq.num_waker_detections = 1
        bfqq.waker_detection_started = now_ns
    else:
        bfqq.num_waker_detections += 1
    if bfqq.num_waker_detections == 3:
        if bfqq.waker_bfqq is not None and bfqq in bfqq.waker_bfqq.woken_list:
            bfqq.waker_bfqq.woken_list.remove(bfqq)
        bfqq.waker_bfqq = last
        bfqq.tentative_waker_bfqq = None
        last.woken_list.insert(0, bfqq)
