"""Writeback throttling (blk-wbt) of Linux 5.4-6.6: block/blk-wbt.c with the depth
arithmetic of block/blk-rq-qos.c, as a plain object the multi-queue queue calls.

The algorithm
-------------
wbt limits how many *buffered writes* (and discards) may be in flight at once so that
reads keep a latency target, ``queue/wbt_lat_usec`` (``min_lat_nsec``). It works like
CoDel: it watches the device's read latencies in a window (100 ms) and moves a
*scale step*. Each window (``wb_timer_fn``) gets one verdict (``latency_exceeded``):

* EXCEEDED when the one read wbt tracks from its issue (``sync_issue``, set by
  ``wbt_issue`` for the first read issued while none is tracked) has been out longer
  than the window, or longer than the target while no read completed in the window;
  or when the *minimum* latency of the reads completed in the window is above the
  target. The step goes up (``scale_down``: a negative step jumps to 0), shrinking the
  depth.
* UNKNOWN_WRITES when the window lacks a valid sample (at least one read and
  ``RWB_MIN_WRITE_SAMPLES`` = 3 writes completed) but writes completed, a writer was
  recently throttled by the page cache, or tracked writes are in flight: the step
  goes down (``scale_up``), and may go negative to let writes run deeper.
* OK (a valid sample within the target): the step goes down.
* UNKNOWN (nothing seen): after ``RWB_UNKNOWN_BUMP`` = 5 such windows in a row, the
  step drifts one towards 0.

The window is re-armed while the step is not 0 or tracked I/O is in flight; a
throttled write arms it when it is idle (``wbt_wait``). For a step ``s`` > 0 the
window shrinks to ``100 ms * 16 / int_sqrt((s + 1) * 256)`` (``rwb_arm_timer``); the
timer counts whole jiffies (``blk_stat_activate_nsecs``: ``nsecs_to_jiffies``
truncates). Latencies are the blk-stat samples: issue to completion of every read
and every write request completed while the window is open (``blk_stat_add``,
``wbt_data_dir``: flushes are not counted).

Depths (``rq_depth_calc_max_depth``): from ``base = min(RWB_DEF_DEPTH = 16,
queue_depth)``, step ``s`` > 0 gives ``max_depth = 1 + ((base - 1) >> s)``; ``s`` < 0
gives ``1 + ((base - 1) << -s)`` capped at ``3 * queue_depth / 4`` (reaching the cap
stops further scaling up, ``scaled_max``); a device of queue depth 1 gets 2 (1 when
``s`` > 0). Scaling down stops at ``max_depth`` 1. Then (``calc_wb_limits``)
``wb_normal = (max_depth + 1) / 2`` and ``wb_background = (max_depth + 3) / 4``, or
``max_depth`` and 1 when ``max_depth`` <= 2.

Which limit a write meets (``get_limit``): a discard ``wb_background``; a write while a
task was throttled by the page cache in the last second (``wb_recent_wait``; also
REQ_SYNC/META/PRIO writeback and kswapd, which blksim has not) ``max_depth``; a
background writeback write (REQ_BACKGROUND), or any write within 100 ms of a read's
issue or completion (``close_io``) ``wb_background``; else ``wb_normal``.

Which bios are throttled (``wbt_should_throttle``, ``bio_to_wbt_flags``): writes
except O_DIRECT ones (REQ_SYNC|REQ_IDLE), and discards. In blksim a buffered write is
a write bio with ``sync`` False; a write with ``sync`` True is direct I/O (or an fsync's
flush) and passes. Reads pass, stamping ``last_issue``/``last_comp`` for ``close_io``.

Waiting (``rq_qos_wait``, ``rq_qos_wake_function``): a throttled bio takes an in-flight
slot of its wait queue (background writes, discards) if the queue has no sleeper and
its in-flight count is below its limit; otherwise it sleeps, in order. When a tracked
request is freed (``wbt_done``, ``wbt_rqw_done``) its slot is returned; sleepers are
woken only when in-flight is 0, or below the limit by at least ``wb_background / 2``,
where the limit is ``wb_background`` for discards, 0 with a volatile write cache and
no recent page-cache throttling (``rwb->wc``), else ``wb_normal``. Waking goes through
the sleepers in order, each taking a slot under its own limit, and stops at the first
that cannot. A scale up (and a new latency target) wakes every queue the same way
(``rwb_wake_all``).

Versions
--------
The algorithm is the same in 5.4, 5.10, 5.15, 6.1 and 6.6 (block/blk-wbt.c and
block/blk-rq-qos.c of 5.4.214, 5.10.13, 5.15.100, 6.1.20, 6.6.0 compared). What differs
is how wbt is turned off and on again (bfq attached and gone, a target of 0) and what
"off" does to bios already waiting, a table below (`_VARIANTS`):

* 5.4-6.1: ``rwb_enabled`` also tests ``wb_normal != 0``; while disabled,
  ``wbt_rqw_done`` wakes every sleeper and ``get_limit`` is unlimited
  (``unthrottle_when_off``).
* 6.6: the enable state alone (``WBT_STATE_OFF_MANUAL`` added); sleepers still wake
  under the last limits.
* 5.10 (5.10.13) turns wbt off for bfq by zeroing ``wb_normal`` (``wbt_disable_default``)
  where 5.4.214, 5.15 and later set ``WBT_STATE_OFF_DEFAULT``, and its
  ``wbt_enable_default`` does nothing to a queue that has wbt: when bfq leaves, wbt stays
  off until something recomputes the limits (a new queue depth or target)
  (``off_zeroes_normal``).

The interface (what the multi-queue queue calls)
------------------------------------------------
``Wbt`` is an rq_qos policy (`blksim.block.mq.rq_qos`, ``RQ_QOS_WBT``): the queue adds it
to its chain and calls it only through the chain's hooks; bfq's turning it off and on
goes through ``wbt_disable_default(chain)`` / ``wbt_enable_default(chain)``.

``Wbt(queue_depth, rotational, lat_usec=-1, kernel="6.6", hz=250, write_cache=False)``
is ``wbt_init`` at the queue's registration: ``queue_depth`` is ``blk_queue_depth``
(the driver's queue depth when it sets one, as SCSI does; else ``nr_requests``);
``lat_usec`` is ``queue/wbt_lat_usec`` (-1 or the device's default: the kernel's
default, ``WBT_STATE_ON_DEFAULT``; 0: off; anything else: set by the user,
``WBT_STATE_ON_MANUAL``, which bfq does not turn off); ``write_cache`` is the
device's volatile write cache (``QUEUE_FLAG_WC``). Every method takes ``now`` (s).

=============================  ==================================================
call                           when (kernel)
=============================  ==================================================
``throttle(bio, now,           every bio, after it failed to merge and before a
background=False) -> bool``    request is allocated (``rq_qos_throttle``). True:
                               go on; False: the bio sleeps, kept here in order.
                               ``background``: the writeback set REQ_BACKGROUND.
                               A sleeping bio's submitter sleeps with it, and
                               its plug is flushed first (``io_schedule``).
``track(rq, bio)``             the request allocated for ``bio`` (``rq_qos_track``).
``issue(rq, now)``             the driver takes ``rq`` (``rq_qos_issue``).
``requeue(rq, now)``           the driver gave ``rq`` back (``rq_qos_requeue``).
``done(rq, now) -> list``      ``rq`` is freed: completed (``rq.t_dispatch`` >= 0:
                               its latency ``now - rq.t_dispatch`` is sampled,
                               ``blk_stat_add``) or merged away (``rq_qos_done``).
                               Returns the sleeping bios now let go, in order: each
                               goes on to request allocation.
``cleanup(bio, now) -> list``  a bio that passed ``throttle`` got no request
                               after all (``rq_qos_cleanup``).
``timer_fired(now) -> list``   at ``wakeup_at`` (the window's end,
                               ``wb_timer_fn``): bios let go by a scale up.
``set_lat_usec(v, now)``,      ``queue/wbt_lat_usec`` written; ``blk_set_queue_
``set_queue_depth(d, now)``    depth``: both reset the step and wake sleepers.
``enabled = False / True``     ``wbt_disable_default`` when bfq is attached,
                               ``wbt_enable_default`` when it leaves (a target the
                               user set stays on).
``note_dirty_sleep(now)``      a writer was throttled in ``balance_dirty_pages``
                               (``wb->dirty_sleep``), if the host models it.
=============================  ==================================================

``wakeup_at`` (absolute s, or None) is the window's end; ``timers_changed`` is raised
whenever it changes, as the elevators' timers. ``log`` holds a ``(time_s,
scale_step, max_depth)`` tuple for each scale up or down (the ``wbt_step``
tracepoint). ``waiting`` counts the sleeping bios, ``inflight`` the tracked requests.

Simplifications: the queue was registered long before the run, so ``last_issue``,
``last_comp`` and the page cache's ``dirty_sleep`` start "long ago" (the kernel stamps
them at registration); kswapd, swap writes, REQ_META/REQ_PRIO and REQ_SYNC writeback
are not modelled (blksim's bios do not carry them): a sync write is taken as O_DIRECT,
where the kernel throttles an fsync's writeback (REQ_SYNC alone) at ``max_depth``.
Discards are bios whose ``op`` is ``REQ_OP_DISCARD`` (fio's trim jobs).
"""

from __future__ import annotations

from blksim.block.elevator import Tunable, kernel_version
from blksim.block.mq.rq_qos import RQ_QOS_WBT, RqQosPolicy, RqWait
from blksim.block.request import REQ_OP_DISCARD

#: ``queue/wbt_lat_usec`` (block/blk-sysfs.c, ``queue_wb_lat_store``; since 4.10).
WBT_LAT_USEC = Tunable(
    "wbt_lat_usec", -1, "us", -1, 2**63 // 1000,
    "writeback throttling's read latency target; -1: the device's default (2000 "
    "non-rotational, 75000 rotational), 0: off", since="4.10")

RWB_DEF_DEPTH = 16                 # the depth at step 0, before the device's cap
RWB_WINDOW_NSEC = 100_000_000      # the monitoring window at step <= 0
RWB_MIN_WRITE_SAMPLES = 3          # writes a window needs to be a valid sample
RWB_UNKNOWN_BUMP = 5               # unknown windows before drifting to step 0
NSEC_PER_SEC = 1_000_000_000

# wbt_flags (block/blk-wbt.h in 5.4, blk-wbt.c in 6.6)
WBT_TRACKED, WBT_READ, WBT_KSWAPD, WBT_DISCARD = 1, 2, 4, 8
# the wait queues (WBT_RWQ_*)
RWQ_BG, RWQ_KSWAPD, RWQ_DISCARD = 0, 1, 2
# latency_exceeded's verdicts
LAT_OK, LAT_UNKNOWN, LAT_UNKNOWN_WRITES, LAT_EXCEEDED = 1, 2, 3, 4
# enable_state
STATE_ON_DEFAULT, STATE_ON_MANUAL, STATE_OFF_DEFAULT, STATE_OFF_MANUAL = 1, 2, 3, 4

UNLIMITED = 2**32 - 1              # get_limit's UINT_MAX while off (5.4-6.1)

#: Behaviour switches per kernel line (see the module docstring).
_VARIANTS = {
    "5.4": {"unthrottle_when_off": True, "off_zeroes_normal": False},
    "5.10": {"unthrottle_when_off": True, "off_zeroes_normal": True},
    "5.15": {"unthrottle_when_off": True, "off_zeroes_normal": False},
    "6.1": {"unthrottle_when_off": True, "off_zeroes_normal": False},
    "6.6": {"unthrottle_when_off": False, "off_zeroes_normal": False},
}


def variant_for_kernel(kernel: str) -> dict:
    """The switches of the newest line in `_VARIANTS` not newer than ``kernel``."""
    wanted = kernel_version(kernel)
    fits = [v for v in _VARIANTS if kernel_version(v) <= wanted]
    if not fits:
        raise ValueError(f"wbt is modelled for the multi-queue kernels, got {kernel!r}; "
                         "valid: " + ", ".join(_VARIANTS))
    return _VARIANTS[max(fits, key=kernel_version)]


def default_lat_usec(rotational: bool) -> int:
    """``wbt_default_latency_nsec`` in µs: 75 ms rotational, 2 ms otherwise."""
    return 75_000 if rotational else 2_000


def int_sqrt(x: int) -> int:
    """The kernel's ``int_sqrt``: the largest integer whose square is at most ``x``."""
    if x <= 0:
        return 0
    r = int(x ** 0.5)
    while r * r > x:
        r -= 1
    while (r + 1) * (r + 1) <= x:
        r += 1
    return r


def window_nsec(scale_step: int) -> int:
    """``rwb_arm_timer``: the window (ns) at ``scale_step``."""
    if scale_step > 0:
        return (RWB_WINDOW_NSEC << 4) // int_sqrt((scale_step + 1) << 8)
    return RWB_WINDOW_NSEC


def calc_max_depth(queue_depth: int, scale_step: int,
                   default_depth: int = RWB_DEF_DEPTH) -> tuple[int, bool]:
    """``rq_depth_calc_max_depth``: (``max_depth`` at ``scale_step``, whether it is the
    most scaling up can give)."""
    if queue_depth == 1:
        if scale_step > 0:
            return 1, False
        return 2, True
    depth = min(default_depth, queue_depth)
    if scale_step > 0:
        return 1 + ((depth - 1) >> min(31, scale_step)), False
    if scale_step < 0:
        cap = 3 * queue_depth // 4
        depth = 1 + ((depth - 1) << -scale_step)
        if depth > cap:
            return cap, True
    return depth, False


def wb_limits(max_depth: int, min_lat_nsec: int) -> tuple[int, int]:
    """``calc_wb_limits``: (``wb_normal``, ``wb_background``)."""
    if min_lat_nsec == 0:
        return 0, 0
    if max_depth <= 2:
        return max_depth, 1
    return (max_depth + 1) // 2, (max_depth + 3) // 4


def is_discard(bio) -> bool:
    """Whether ``bio`` is a discard (``REQ_OP_DISCARD``)."""
    return bio.op == REQ_OP_DISCARD


#: ``struct rq_wait``: one wait queue's in-flight count and its sleepers in order, each
#: ``(bio, flags, background)`` (the chain's shared type).
_RqWait = RqWait


def wbt_disable_default(chain) -> None:
    """``wbt_disable_default``: turn the queue's wbt off unless the user set its target
    (bfq's ``init_queue``); ``chain`` is the queue's `blksim.block.mq.rq_qos.RqQos`."""
    wbt = chain.get(RQ_QOS_WBT)
    if wbt is not None:
        wbt.enabled = False


def wbt_enable_default(chain) -> None:
    """``wbt_enable_default``: turn a default-off wbt on again (bfq's ``exit_queue``)."""
    wbt = chain.get(RQ_QOS_WBT)
    if wbt is not None:
        wbt.enabled = True


class Wbt(RqQosPolicy):
    """``struct rq_wb`` of one multi-queue request queue, an rq_qos policy
    (``wbt_rqos_ops``; the module docstring is the contract: which calls, when)."""

    rq_qos_id = RQ_QOS_WBT
    uses_timers = True

    __slots__ = ("hz", "kernel", "rotational", "queue_depth", "default_depth",
                 "unthrottle_when_off", "off_zeroes_normal", "min_lat_nsec", "enable_state", "wc",
                 "scale_step", "scaled_max", "max_depth", "wb_normal", "wb_background",
                 "win_nsec", "cur_win_nsec", "unknown_cnt", "sync_issue", "sync_cookie",
                 "last_issue", "last_comp", "dirty_sleep", "rq_wait", "_flags",
                 "_read_nr", "_read_min", "_write_nr", "_wakeup_at", "timers_changed",
                 "log")

    def __init__(self, queue_depth: int, rotational: bool, lat_usec: int = -1,
                 kernel: str = "6.6", hz: int = 250, write_cache: bool = False) -> None:
        if queue_depth < 1:
            raise ValueError(f"wbt: queue depth must be at least 1, found {queue_depth!r}")
        if lat_usec < -1:
            raise ValueError(f"queue/wbt_lat_usec: expected -1 or more, found {lat_usec!r}")
        self.hz = hz
        self.kernel = kernel
        self.rotational = rotational
        switches = variant_for_kernel(kernel)
        self.unthrottle_when_off = switches["unthrottle_when_off"]
        self.off_zeroes_normal = switches["off_zeroes_normal"]
        self.queue_depth = queue_depth
        self.default_depth = RWB_DEF_DEPTH
        self.wc = bool(write_cache)
        self.win_nsec = RWB_WINDOW_NSEC
        self.cur_win_nsec = RWB_WINDOW_NSEC
        self.unknown_cnt = 0
        self.sync_issue = 0                # ns; 0: no read tracked
        self.sync_cookie = None            # the read tracked from its issue
        never = -(1 << 62)                 # jiffies "long ago": registered before the run
        self.last_issue = never
        self.last_comp = never
        self.dirty_sleep = never
        self.rq_wait = (_RqWait(), _RqWait(), _RqWait())
        self._flags: dict = {}             # request -> its wbt_flags (rq->wbt_flags)
        self._read_nr = 0                  # this window's blk-stat samples
        self._read_min = 0
        self._write_nr = 0
        self._wakeup_at = None
        self.timers_changed = False
        self.log: list = []
        # wbt_init: on by default at the device's default target; a value the user
        # wrote that differs from it is a manual setting (queue_wb_lat_store)
        self.min_lat_nsec = default_lat_usec(rotational) * 1000
        self.enable_state = STATE_ON_DEFAULT
        self.scale_step = 0
        self.scaled_max = False
        self.max_depth = 0
        self.wb_normal = self.wb_background = 0
        self._update_limits()
        if lat_usec != -1:
            self.set_lat_usec(lat_usec, 0.0)

    # ------------------------------------------------------------------ state
    @property
    def wakeup_at(self) -> float | None:
        """The end of the current window (absolute s), or None when no window runs."""
        return self._wakeup_at

    def _set_timer(self, when) -> None:
        self._wakeup_at = when
        self.timers_changed = True

    @property
    def enabled(self) -> bool:
        """``rwb_enabled``: whether bios are tracked and throttled."""
        return (self.enable_state != STATE_OFF_DEFAULT
                and self.enable_state != STATE_OFF_MANUAL and self.wb_normal != 0)

    @enabled.setter
    def enabled(self, on: bool) -> None:
        # wbt_enable_default / wbt_disable_default: only a default state changes
        if on:
            if self.enable_state == STATE_OFF_DEFAULT:
                self.enable_state = STATE_ON_DEFAULT
        elif self.enable_state == STATE_ON_DEFAULT:
            self._set_timer(None)              # blk_stat_deactivate
            if self.off_zeroes_normal:
                self.wb_normal = 0             # 5.10: and nothing turns it back on
            else:
                self.enable_state = STATE_OFF_DEFAULT

    @property
    def lat_usec(self) -> int:
        """``queue/wbt_lat_usec`` as read (0 while off from 6.6: ``wbt_disabled``)."""
        if not self.unthrottle_when_off and not self.enabled:
            return 0
        return self.min_lat_nsec // 1000

    @property
    def inflight(self) -> int:
        """``wbt_inflight``: tracked requests in flight, every wait queue."""
        return sum(rqw.inflight for rqw in self.rq_wait)

    @property
    def waiting(self) -> int:
        """Bios sleeping in wbt."""
        return sum(len(rqw.sleepers) for rqw in self.rq_wait)

    def _jiffies(self, now: float) -> int:
        return int(now * self.hz + 1e-9)

    @staticmethod
    def _ns(now: float) -> int:
        return int(now * NSEC_PER_SEC + 0.5)

    # ------------------------------------------------------------------ limits
    def _update_limits(self) -> None:
        """``wbt_update_limits`` without the wake-up: step 0, depths recomputed."""
        self.scale_step = 0
        self.scaled_max = False
        self.max_depth, _ = calc_max_depth(self.queue_depth, 0, self.default_depth)
        self.wb_normal, self.wb_background = wb_limits(self.max_depth, self.min_lat_nsec)

    def set_lat_usec(self, lat_usec: int, now: float) -> list:
        """``queue_wb_lat_store``/``wbt_set_min_lat``: a new target (-1: the default,
        0: off). Returns the bios let go."""
        if lat_usec < -1:
            raise ValueError(f"queue/wbt_lat_usec: expected -1 or more, found {lat_usec!r}")
        val = default_lat_usec(self.rotational) * 1000 if lat_usec == -1 else lat_usec * 1000
        if val == self.min_lat_nsec:
            return []                           # unchanged: the state stays as it is
        self.min_lat_nsec = val
        self.enable_state = STATE_ON_MANUAL if val else STATE_OFF_MANUAL
        self._update_limits()
        return self._wake_all(now)

    def set_queue_depth(self, queue_depth: int, now: float) -> list:
        """``wbt_queue_depth_changed``. Returns the bios let go."""
        self.queue_depth = queue_depth
        self._update_limits()
        return self._wake_all(now)

    queue_depth_changed = set_queue_depth      # wbt_queue_depth_changed (rq_qos hook)

    def note_dirty_sleep(self, now: float) -> None:
        """A writer was throttled in ``balance_dirty_pages`` (``wb->dirty_sleep``)."""
        self.dirty_sleep = self._jiffies(now)

    def _recent_wait(self, jiffies: int) -> bool:
        """``wb_recent_wait``: a writer was throttled in the last second."""
        return jiffies < self.dirty_sleep + self.hz

    def _close_io(self, jiffies: int) -> bool:
        """``close_io``: a read was issued or completed in the last 100 ms."""
        tenth = self.hz // 10
        return jiffies < self.last_issue + tenth or jiffies < self.last_comp + tenth

    def _limit(self, flags: int, background: bool, jiffies: int) -> int:
        """``get_limit``: the in-flight limit a throttled bio meets."""
        if self.unthrottle_when_off and not self.enabled:
            return UNLIMITED
        if flags & WBT_DISCARD:
            return self.wb_background
        if self._recent_wait(jiffies):
            return self.max_depth
        if background or self._close_io(jiffies):
            return self.wb_background
        return self.wb_normal

    # ------------------------------------------------------------------ submission
    def _bio_flags(self, bio) -> int:
        """``bio_to_wbt_flags`` (with ``wbt_should_throttle``)."""
        if not self.enabled:
            return 0
        if not bio.write:
            return WBT_READ
        if is_discard(bio):
            return WBT_TRACKED | WBT_DISCARD
        if bio.sync:                           # O_DIRECT: REQ_SYNC | REQ_IDLE
            return 0
        return WBT_TRACKED

    def throttle(self, bio, now: float, background: bool = False) -> bool:
        """``wbt_wait``: True when ``bio`` may go on to request allocation now; False
        when it sleeps here (it comes back from `done` or `timer_fired`)."""
        flags = self._bio_flags(bio)
        if not flags & WBT_TRACKED:
            if flags & WBT_READ:
                self.last_issue = self._jiffies(now)
            return True
        rqw = self.rq_wait[RWQ_DISCARD if flags & WBT_DISCARD else RWQ_BG]
        if rqw.sleepers or rqw.inflight >= self._limit(flags, background,
                                                        self._jiffies(now)):
            rqw.sleepers.append((bio, flags, background))
            return False
        rqw.inflight += 1
        self._got_slot(now)
        return True

    def _got_slot(self, now: float) -> None:
        """The end of ``wbt_wait``: open a window if none is running."""
        if self._wakeup_at is None:
            self._arm_timer(now)

    def track(self, rq, bio) -> None:
        """``wbt_track``: ``rq`` was allocated for ``bio``."""
        flags = self._bio_flags(bio)
        if flags:
            self._flags[rq] = flags

    def issue(self, rq, now: float) -> None:
        """``wbt_issue``: track the first read issued while none is tracked."""
        if not self.enabled:
            return
        if self.sync_issue == 0 and self._flags.get(rq, 0) & WBT_READ:
            self.sync_cookie = rq
            self.sync_issue = self._ns(now)

    def requeue(self, rq, now: float) -> None:
        """``wbt_requeue``: a tracked read given back is no longer tracked."""
        if self.enabled and rq is self.sync_cookie:
            self.sync_issue = 0
            self.sync_cookie = None

    # ------------------------------------------------------------------ completion
    def done(self, rq, now: float) -> list:
        """``rq`` is freed (``blk_stat_add`` for a completed one, then ``wbt_done``).
        Returns the sleeping bios now let go, in order."""
        if self._wakeup_at is not None and rq.t_dispatch >= 0.0:
            self._sample(rq, now)
        flags = self._flags.pop(rq, 0)
        if not flags & WBT_TRACKED:
            if rq is self.sync_cookie:
                self.sync_issue = 0
                self.sync_cookie = None
            if flags & WBT_READ and self.enabled:
                self.last_comp = self._jiffies(now)
            return []
        return self._rqw_done(flags, now)

    def cleanup(self, bio, now: float) -> list:
        """``wbt_cleanup``: ``bio`` passed `throttle` but got no request."""
        flags = self._bio_flags(bio)
        if not flags & WBT_TRACKED:
            return []
        return self._rqw_done(flags, now)

    def _sample(self, rq, now: float) -> None:
        """``blk_stat_add`` with ``wbt_data_dir``: reads and writes, not flushes."""
        if rq.write:
            if rq.nr_sectors:                  # an empty write is a flush: not counted
                self._write_nr += 1
            return
        lat = self._ns(now) - self._ns(rq.t_dispatch)
        if lat < 0:
            lat = 0
        if self._read_nr == 0 or lat < self._read_min:
            self._read_min = lat
        self._read_nr += 1

    def _rqw_done(self, flags: int, now: float) -> list:
        """``wbt_rqw_done``: a slot is returned; wake sleepers if there is room enough."""
        rqw = self.rq_wait[RWQ_DISCARD if flags & WBT_DISCARD else RWQ_BG]
        rqw.inflight -= 1
        inflight = rqw.inflight
        if self.unthrottle_when_off and not self.enabled:
            return self._wake_all(now)
        jiffies = self._jiffies(now)
        if flags & WBT_DISCARD:
            limit = self.wb_background
        elif self.wc and not self._recent_wait(jiffies):
            limit = 0
        else:
            limit = self.wb_normal
        if inflight and inflight >= limit:
            return []
        if rqw.sleepers and (not inflight or limit - inflight >= self.wb_background // 2):
            return self._wake(rqw, now)
        return []

    def _wake(self, rqw: _RqWait, now: float) -> list:
        """``wake_up_all`` with ``rq_qos_wake_function``: sleepers in order take a slot
        each under their own limit; the first that cannot stops the wake-up."""
        jiffies = self._jiffies(now)
        woken = []
        sleepers = rqw.sleepers
        while sleepers:
            bio, flags, background = sleepers[0]
            if rqw.inflight >= self._limit(flags, background, jiffies):
                break
            sleepers.popleft()
            rqw.inflight += 1
            woken.append(bio)
        if woken:
            self._got_slot(now)
        return woken

    def _wake_all(self, now: float) -> list:
        """``rwb_wake_all``: every wait queue with sleepers."""
        woken = []
        for rqw in self.rq_wait:
            if rqw.sleepers:
                woken.extend(self._wake(rqw, now))
        return woken

    # ------------------------------------------------------------------ the window
    def _arm_timer(self, now: float) -> None:
        """``rwb_arm_timer``: the window for the current step, in whole jiffies."""
        self.cur_win_nsec = window_nsec(self.scale_step)
        ticks = self.cur_win_nsec * self.hz // NSEC_PER_SEC
        self._set_timer((self._jiffies(now) + ticks) / self.hz)

    def _latency_exceeded(self, now: float, inflight: int) -> int:
        """``latency_exceeded``: this window's verdict."""
        thislat = 0
        if self.sync_issue and self.sync_cookie is not None:
            thislat = self._ns(now) - self.sync_issue
        if thislat > self.cur_win_nsec or (thislat > self.min_lat_nsec
                                           and not self._read_nr):
            return LAT_EXCEEDED
        if not (self._read_nr >= 1 and self._write_nr >= RWB_MIN_WRITE_SAMPLES):
            if self._write_nr or self._recent_wait(self._jiffies(now)) or inflight:
                return LAT_UNKNOWN_WRITES
            return LAT_UNKNOWN
        if self._read_min > self.min_lat_nsec:
            return LAT_EXCEEDED
        return LAT_OK

    def timer_fired(self, now: float) -> list:
        """``wb_timer_fn`` at the window's end. Returns the bios a scale up let go."""
        self._wakeup_at = None
        inflight = self.inflight
        status = self._latency_exceeded(now, inflight)
        self._read_nr = self._write_nr = self._read_min = 0
        woken: list = []
        if status == LAT_EXCEEDED:
            self._scale_down(now, hard=True)
        elif status == LAT_OK or status == LAT_UNKNOWN_WRITES:
            woken = self._scale_up(now)
        elif status == LAT_UNKNOWN:
            self.unknown_cnt += 1
            if self.unknown_cnt >= RWB_UNKNOWN_BUMP:
                if self.scale_step > 0:
                    woken = self._scale_up(now)
                elif self.scale_step < 0:
                    self._scale_down(now, hard=False)
        if self.scale_step or inflight:
            self._arm_timer(now)
        self.timers_changed = True
        return woken

    def _scale_up(self, now: float) -> list:
        """``scale_up`` (``rq_depth_scale_up``): one step less, deeper, wake sleepers."""
        if self.scaled_max:
            return []
        self.scale_step -= 1
        self.max_depth, self.scaled_max = calc_max_depth(self.queue_depth, self.scale_step,
                                                         self.default_depth)
        self.wb_normal, self.wb_background = wb_limits(self.max_depth, self.min_lat_nsec)
        self.unknown_cnt = 0
        woken = self._wake_all(now)
        self.log.append((now, self.scale_step, self.max_depth))
        return woken

    def _scale_down(self, now: float, hard: bool) -> None:
        """``scale_down`` (``rq_depth_scale_down``): one step more, shallower; a latency
        violation (``hard``) from a negative step goes straight to 0."""
        if self.max_depth == 1:
            return
        if self.scale_step < 0 and hard:
            self.scale_step = 0
        else:
            self.scale_step += 1
        self.scaled_max = False
        self.max_depth, _ = calc_max_depth(self.queue_depth, self.scale_step,
                                           self.default_depth)
        self.wb_normal, self.wb_background = wb_limits(self.max_depth, self.min_lat_nsec)
        self.unknown_cnt = 0
        self.log.append((now, self.scale_step, self.max_depth))
