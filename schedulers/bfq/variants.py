"""BFQ's sysfs tunables (``queue/iosched/``) and its behaviour switches per kernel line.

Tunables (``bfq_attrs``, block/bfq-iosched.c; the same ten files in 5.4 to 6.6):

=====================  ==========  ==========  ============================================
file                   default     unit        meaning
=====================  ==========  ==========  ============================================
fifo_expire_sync       125         ms          a sync request's FIFO deadline
fifo_expire_async      250         ms          an async request's FIFO deadline
back_seek_max          16384       KiB         farthest backward seek ``bfq_choose_req``
                                               allows
back_seek_penalty      2           factor      a backward distance counts this many times
slice_idle             8           ms          idle slice (the same variable as
                                               ``slice_idle_us``)
slice_idle_us          8000        us          idle slice, microseconds
max_budget             0           sectors     maximum budget; 0 = from the peak rate
timeout_sync           125         ms          budget timeout (jiffies: HZ/8)
strict_guarantees      0           bool        idle always, dispatch one request at a
                                               time; setting it raises slice_idle to 8 ms
low_latency            1           bool        weight-raise interactive and soft
                                               real-time queues
=====================  ==========  ==========  ============================================

Version switches (``_VARIANTS``), each from comparing bfq-iosched.c of 5.4.214,
5.10.13, 5.15.100, 6.1.20 and 6.6.0:

* ``io_bound_by_intensity``: 5.4/5.10 mark a queue I/O-bound after 120 activations
  arriving in time and clear it when a queue expires too idle having used at most
  a fifth of its budget; 5.15+ measure the share of idle time
  (``bfq_update_io_intensity``).
* ``short_ttime_shift``: the think time is short when at most ``slice_idle``
  (5.4/5.10, shift 0) or ``slice_idle / 2`` (5.15+, shift 1).
* ``thinktime_only_when_idle``: 5.15+ sample the think time only for a queue with
  nothing queued or in flight.
* ``idle_if_only_busy``: 5.15+ idle for a queue that is the only busy one
  (``idling_needed_for_service_guarantees``).
* ``stable_merge``: 5.15+ have stable queue merging (``bfq_do_or_sched_stable_merge``).
* ``softrt_skips_interactive``: 5.4/5.10 do not compute ``soft_rt_next_start`` at
  expiration for an interactively raised queue.
* ``depth_over_limit``: 6.1+ give depth 1 to a queue holding more requests than its
  weight's share (``bfqq_request_over_limit``).
* ``default_weight_raising``: 5.15+ raise only queues of the default weight (40),
  and count a stably merged queue as unmerged for raising.
* ``preempt_unless_idling``: 5.15+ let a newly busy queue preempt the in-service one
  also when the latter would not be idled for (``bfq_bfqq_handle_idle_busy_switch``).
* ``waker``: how a waker queue is detected and served while idling: ``None`` in 5.4
  and 5.10, whose ``bfq_select_queue`` tests the in-service queue's own (empty) next
  request before serving the waker, so a detected waker is never served (blksim
  skips the detection); "5.15": three detections in a row (``bfq_check_waker``),
  and the woken queue is served too; "6.1": the three within ``128 * slice_idle``.
* ``inject_limit_rule``: "5.4" (5.4-6.1): a candidate is injected while fewer than
  its limit are in the driver -- the queue's ``inject_limit``, or at most 1 for a
  large request on a non-rotational device; "6.6": the limit is checked once
  (``inject_limit``, or 1 after a whole idle slice without a baseline) and a large
  request on a non-rotational device is skipped while the driver holds any.
* ``groups_pending``: how ``num_groups_with_pending_reqs`` counts groups for
  ``bfq_asymmetric_scenario``: "entity" (5.4-6.1): non-root group entities from their
  activation until a queue below them completes its last request with the group
  empty, asymmetric above 0; "queue" (6.6, from 6.2's "block, bfq: do not idle if
  only one group is activated"): groups, the root too, while one of their own queues
  has pending requests, asymmetric above 1 (`blksim.schedulers.bfq.groups`).
"""

from __future__ import annotations

from blksim.block.elevator import Tunable, kernel_version

INT_MAX = 2**31 - 1
UINT_MAX = 2**32 - 1

TUNABLES = (
    Tunable("fifo_expire_sync", 125, "ms", 0, INT_MAX,
            "FIFO deadline of a sync request, from its insertion"),
    Tunable("fifo_expire_async", 250, "ms", 0, INT_MAX,
            "FIFO deadline of an async request, from its insertion"),
    Tunable("back_seek_max", 16384, "KiB", 0, INT_MAX,
            "farthest backward seek preferred to a forward one"),
    Tunable("back_seek_penalty", 2, "factor", 1, INT_MAX,
            "how many times a backward distance counts"),
    Tunable("slice_idle", 8, "ms", 0, INT_MAX,
            "how long an empty sync queue is kept in service waiting for its process "
            "(0: never idle)"),
    Tunable("slice_idle_us", 8000, "us", 0, UINT_MAX,
            "slice_idle in microseconds (the same setting; this one wins if both are given)"),
    Tunable("max_budget", 0, "sectors", 0, INT_MAX,
            "largest budget a queue gets (0: what the device does at its estimated "
            "peak rate in timeout_sync)"),
    Tunable("timeout_sync", 125, "ms", 1, INT_MAX,
            "budget timeout: longest service slot of a queue", jiffies=True),
    Tunable("strict_guarantees", 0, "bool", 0, 1,
            "1 = always idle and keep one request in the driver (slice_idle at least 8 ms)"),
    Tunable("low_latency", 1, "bool", 0, 1,
            "1 = weight-raise interactive and soft real-time processes"),
)

#: The kernel lines, and each switch's value in them (see the module docstring).
_LINES = ("5.4", "5.10", "5.15", "6.1", "6.6")
_SWITCHES = {
    #                            5.4     5.10    5.15    6.1     6.6
    "io_bound_by_intensity":    (False,  False,  True,   True,   True),
    "short_ttime_shift":        (0,      0,      1,      1,      1),
    "thinktime_only_when_idle": (False,  False,  True,   True,   True),
    "idle_if_only_busy":        (False,  False,  True,   True,   True),
    "stable_merge":             (False,  False,  True,   True,   True),
    "softrt_skips_interactive": (True,   True,   False,  False,  False),
    "depth_over_limit":         (False,  False,  False,  True,   True),
    "default_weight_raising":   (False,  False,  True,   True,   True),
    "preempt_unless_idling":    (False,  False,  True,   True,   True),
    "waker":                    (None,   None,   "5.15", "6.1",  "6.1"),
    "inject_limit_rule":        ("5.4",  "5.4",  "5.4",  "5.4",  "6.6"),
    "groups_pending":           ("entity", "entity", "entity", "entity", "queue"),
}
_VARIANTS = {line: {name: values[i] for name, values in _SWITCHES.items()}
             for i, line in enumerate(_LINES)}

VARIANTS = tuple(_VARIANTS)


def variant_for_kernel(kernel: str) -> dict:
    """The switches of the newest modelled line not newer than ``kernel`` (ValueError
    for a kernel before 5.4)."""
    wanted = kernel_version(kernel)
    fits = [v for v in _VARIANTS if kernel_version(v) <= wanted]
    if not fits:
        raise ValueError(f"bfq is modelled for the multi-queue kernels from 5.4, got "
                         f"{kernel!r}; valid: " + ", ".join(_VARIANTS))
    return _VARIANTS[max(fits, key=kernel_version)]
