"""io.latency (blk-iolatency) of Linux 5.4-6.6: block/blk-iolatency.c as an rq_qos policy.

The algorithm
-------------
A group with ``io.latency`` ``target=US`` on a disk is *protected*: when its bios take
longer than the target, its siblings (and their descendants) get a smaller in-flight
limit on that disk, until the target holds again. Every group with I/O on the disk has
a per-device state (``struct iolatency_grp``, `IolatGrp`, made when the group's first
bio arrives or when its target is written: ``iolatency_pd_init``), with

* an in-flight limit ``max_depth`` (``rq_depth.max_depth``, "max" = UINT_MAX at first)
  and a wait queue (`blksim.block.mq.rq_qos.RqWait`);
* a copy of its parent's *scale cookie* (``scale_cookie``), and, as a parent, the
  cookie its children follow (``child_lat``, `ChildLatency`: ``scale_cookie``
  starting at ``DEFAULT_SCALE_COOKIE`` = 1000000, ``scale_lat``, ``scale_grp``,
  ``last_scale_event``, ``nr_samples``).

**Submission** (``blkcg_iolatency_throttle``): a bio of the root is not looked at. A
bio of a group walks from its group up to (not including) the root; at each level the
group first compares its cookie with its parent's (``check_scale_change``), then takes
a slot in its wait queue if none sleeps there and fewer than ``max_depth`` are in
flight (``iolat_acquire_inflight`` -> ``rq_wait_inc_below``), else sleeps in order
(``rq_qos_wait``; the submitter is in io_schedule, so in iowait for io.pressure). Then
the 1 s timer is armed if it is not pending (``mod_timer(jiffies + HZ)``).

**check_scale_change.** A lower parent cookie means scale down, a higher one up. A
group with its own target scales down only if its target is looser than the parent's
``scale_lat`` (the target that caused the cut) and it did more than 5 % of its
siblings' samples (``max(1, nr_samples * 5 / 100)``); a group without a target always
follows. At ``max_depth`` 1 a scale down only raises ``use_delay``. A cookie back at the
default sets ``max_depth`` to max and wakes every sleeper; otherwise ``scale_change``:
with ``qd`` = the queue's ``nr_requests``, down halves ``min(max_depth, qd)`` (at least
1); up first drops one ``use_delay`` at depth 1, else adds ``max(qd >> 4, 1)`` up to
``qd`` and wakes every sleeper.

**scale_cookie_change** (the parent's cookie, ``diff`` = how far below the default):
up adds ``max(qd >> 4, 1)`` (1 while ``diff > qd``; at most back to the default); down
subtracts ``max(qd >> 2, 1)`` while ``diff <= qd``, then 1 at a time while ``diff <
2 qd``, then stops.

**Completion** (``blkcg_iolatency_done_bio``): for a bio that went through the throttle
(BIO_TRACKED 5.4, BIO_QOS_THROTTLED later: a bio merged into a request did not), each
level gives its slot back; a level with a target records the bio's time from
``bi_issue`` (set when the bio entered the queue, after blk-throttle: blksim's
``bio.t_queue``) to now (``iolatency_record_time``): on a rotational disk into a
``blk_rq_stat`` (count, sum), on a non-rotational one as ``total`` and ``missed``
(time >= target). Once its window has passed (``now - window_start >= cur_win_nsec``,
the window ``clamp(16 * target, 100 ms, 1 s)``: ``iolatency_set_min_lat_nsec``) the
level checks its latencies (``iolatency_check_latencies``), then wakes one sleeper
(``wake_up``).

**iolatency_check_latencies.** The window's samples are taken (and reset). On a
rotational disk ``lat_avg`` decays as the load average does (``calc_load`` with the
factor for the window's size, 2045 .. 2014). The window is *ok* when the mean is at
most the target (rotational), or fewer than ``max(total / 10, 1)`` samples missed it
(non-rotational). Ok with the parent's cookie at the default: nothing more. Otherwise
the samples are added to ``cur_stat`` and the parent's ``nr_samples`` updated; within
500 ms of the parent's last scale event nothing changes; if this window and
``cur_stat`` are ok, with at least 5 samples, and this group caused the cut
(``scale_grp``), the parent's cookie goes up; if not ok and the parent's ``scale_lat``
is 0 or at least this target, the cookie goes down, this group becoming ``scale_grp``
with its target as ``scale_lat`` when it is tighter or none is set. ``cur_stat`` is
reset after a change or a no-change verdict (not within the 500 ms).

``blk_rq_stat_sum`` (block/blk-stat.c) adds the source's ``batch`` and the
destination's ``mean * nr_samples``; the window's stat is itself a sum of the per-CPU
ones, whose ``batch`` stays 0, so on a rotational disk ``cur_stat``'s mean is always 0
and only the last window's mean decides (a property of the kernel, kept).

**The timer** (``blkiolatency_timer_fn``, 1 s after a throttle found it idle): for each
group whose children's cookie is below the default, and no scale event at this
instant: with no ``scale_grp`` the cookie goes up; 5 s after the last scale event the
``scale_grp`` is forgotten (the group that caused the cut went quiet), so the next
timer scales up. This is how a cut is undone when the protected group goes idle.

Versions
--------
Read in the stored block/blk-iolatency.c (a 6.1-era copy: ``enable_cnt`` and
``enable_work``, BIO_QOS_THROTTLED, ``blkg_conf_prep``). The rules above are the same in
5.4-6.6; what differs is when the policy exists and which bios ``done_bio`` sees
(`LINES`):

* 5.4, 5.10: ``blk_iolatency_init`` at queue allocation (``blkcg_init_queue``) on every
  disk; an ``atomic_t enabled`` counts the groups with a target. 5.4 marks a throttled
  bio BIO_TRACKED, 5.10-5.15 the same (renamed BIO_QOS_THROTTLED in 5.17).
* 6.1: the policy is on every disk, ``enabled`` flipped by ``enable_work`` with the queue
  frozen (6.0, "blk-iolatency: Fix inflight count imbalances and IO hangs on offline").
* 6.6: ``blk_iolatency_init`` runs when ``io.latency`` is first written for the disk
  (6.2, "blk-iolatency: Make initialization lazy").

None changes a run: blksim adds the policy to a disk when some group has a target on it
(the policy with no target does nothing), at the start of the run.

Simplifications: ``use_delay`` is counted (it changes when scaling resumes) but its
induced delay at return to user space (``blkcg_maybe_throttle_current``) is not:
the delay grows only from root-issued bios (REQ_META, REQ_SWAP) of a group, which
blksim's bios are not; one CPU's worth of per-CPU stats (the kernel's per-CPU sums
round each CPU's mean); ``nr_requests`` is the queue's when the policy is added; a bio
woken in a wait queue goes on up the hierarchy at once (the kernel's task does it when
it runs, at the same instant).
"""

from __future__ import annotations

from blksim.block.elevator import kernel_version
from blksim.block.mq.rq_qos import RQ_QOS_LATENCY, RqQosPolicy, RqWait

NSEC_PER_SEC = 1_000_000_000
NSEC_PER_MSEC = 1_000_000
NSEC_PER_USEC = 1_000
DEFAULT_SCALE_COOKIE = 1_000_000
UINT_MAX = 2**32 - 1                 # max_depth "max"
MIN_WIN_NSEC = 100 * NSEC_PER_MSEC   # BLKIOLATENCY_MIN_WIN_SIZE
MAX_WIN_NSEC = NSEC_PER_SEC          # BLKIOLATENCY_MAX_WIN_SIZE
#: ``iolatency_exp_factors``: calc_load's factor by window size bucket (250 ms each)
EXP_FACTORS = (2045, 2039, 2031, 2023, 2014)
EXP_BUCKET_NSEC = MAX_WIN_NSEC // (len(EXP_FACTORS) - 1)
FIXED_1 = 2048                       # calc_load's fixed point (include/linux/sched/loadavg.h)
MIN_ADJUST_NSEC = 500 * NSEC_PER_MSEC    # BLKIOLATENCY_MIN_ADJUST_TIME
MIN_GOOD_SAMPLES = 5                 # BLKIOLATENCY_MIN_GOOD_SAMPLES
SCALE_DOWN_FACTOR, SCALE_UP_FACTOR = 2, 4
SCALE_GRP_FORGET_NSEC = 5 * NSEC_PER_SEC     # blkiolatency_timer_fn's 5 s
#: Entries kept per group in ``depth_series`` (the first ones; later changes are counted)
SERIES_MAX = 4096

#: Per kernel line: where the kernel adds the policy, and the flag ``done_bio`` tests.
LINES = {
    "5.4": {"init": "blkcg_init_queue (every disk)", "tracked_flag": "BIO_TRACKED"},
    "5.10": {"init": "blkcg_init_queue (every disk)", "tracked_flag": "BIO_TRACKED"},
    "5.15": {"init": "blkcg_init_queue (every disk)", "tracked_flag": "BIO_TRACKED"},
    "6.1": {"init": "blkcg_init_disk (every disk), enable_work", "tracked_flag":
            "BIO_QOS_THROTTLED"},
    "6.6": {"init": "first io.latency write for the disk", "tracked_flag":
            "BIO_QOS_THROTTLED"},
}


def line_for_kernel(kernel: str) -> dict:
    """The `LINES` entry of the newest line not newer than ``kernel``."""
    wanted = kernel_version(kernel)
    fits = [v for v in LINES if kernel_version(v) <= wanted]
    if not fits:
        raise ValueError(f"io.latency is modelled for the multi-queue kernels, got "
                         f"{kernel!r}; valid: {', '.join(LINES)}")
    return LINES[max(fits, key=kernel_version)]


def window_nsec(min_lat_nsec: int) -> int:
    """``iolatency_set_min_lat_nsec``: the window, 16 times the target within [100 ms,
    1 s] (100 ms with no target, as ``iolatency_pd_init`` sets it)."""
    return min(max(min_lat_nsec << 4, MIN_WIN_NSEC), MAX_WIN_NSEC)


def scale_amount(qd: int, up: bool) -> int:
    """``scale_amount``: qd/16 up, qd/4 down, at least 1."""
    return max(qd >> SCALE_UP_FACTOR if up else qd >> SCALE_DOWN_FACTOR, 1)


def calc_load(load: int, exp: int, active: int) -> int:
    """``calc_load`` (include/linux/sched/loadavg.h): the fixed-point decaying average,
    rounded up while growing."""
    new = load * exp + active * (FIXED_1 - exp)
    if active >= load:
        new += FIXED_1 - 1
    return new // FIXED_1


class LatStat:
    """``struct latency_stat``: a ``blk_rq_stat`` (``nr``, ``batch``, ``mean``) on a
    rotational disk, ``percentile_stats`` (``total``, ``missed``) on a non-rotational."""

    __slots__ = ("nr", "batch", "mean", "total", "missed")

    def __init__(self) -> None:
        self.nr = self.batch = self.mean = self.total = self.missed = 0

    def init(self) -> None:
        """``latency_stat_init`` (``blk_rq_stat_init``)."""
        self.nr = self.batch = self.mean = self.total = self.missed = 0

    def add_sum(self, src: "LatStat") -> None:
        """``latency_stat_sum``: ``blk_rq_stat_sum`` (the source's ``batch`` plus the
        destination's mean times its count, over both counts; nothing when the source
        has no sample) and the percentile counts added."""
        self.total += src.total
        self.missed += src.missed
        if src.nr:
            self.mean = (src.batch + self.mean * self.nr) // (self.nr + src.nr)
            self.nr += src.nr


class ChildLatency:
    """``struct child_latency_info``: what a group's children scale by."""

    __slots__ = ("last_scale_event", "scale_lat", "nr_samples", "scale_grp", "scale_cookie")

    def __init__(self) -> None:
        self.last_scale_event = 0       # ns
        self.scale_lat = 0              # ns: the target that caused the cut
        self.nr_samples = 0
        self.scale_grp = None           # the IolatGrp that caused it
        self.scale_cookie = DEFAULT_SCALE_COOKIE

    def clear(self) -> None:
        """``iolatency_clear_scaling``: back to no cut."""
        self.scale_cookie = DEFAULT_SCALE_COOKIE
        self.last_scale_event = 0
        self.scale_grp = None
        self.scale_lat = 0


def scale_cookie_change(lat_info: ChildLatency, qd: int, up: bool) -> None:
    """``scale_cookie_change``: move the children's cookie one step (module docstring)."""
    scale = scale_amount(qd, up)
    old = lat_info.scale_cookie
    diff = DEFAULT_SCALE_COOKIE - old if old < DEFAULT_SCALE_COOKIE else 0
    if up:
        if scale + old > DEFAULT_SCALE_COOKIE:
            lat_info.scale_cookie = DEFAULT_SCALE_COOKIE
        elif diff > qd:
            lat_info.scale_cookie = old + 1
        else:
            lat_info.scale_cookie = old + scale
    elif diff > qd:
        if diff < qd << 1:
            lat_info.scale_cookie = old - 1
    else:
        lat_info.scale_cookie = old - scale


class IolatGrp:
    """``struct iolatency_grp``: one group's state on one disk (the module docstring).
    ``parent`` is the parent group's (the root's for a top-level group; None for the
    root's own). ``depth_series``: ``(time_s, max_depth or None for max)`` at the start
    and at each change, the first `SERIES_MAX`; ``series_dropped`` counts the rest."""

    __slots__ = ("group", "parent", "ssd", "min_lat_nsec", "cur_win_nsec", "window_start",
                 "scale_cookie", "max_depth", "rq_wait", "stat", "cur_stat", "lat_avg",
                 "nr_samples", "use_delay", "child_lat", "depth_series", "series_dropped",
                 "missed_sum", "total_sum")

    def __init__(self, group, parent: "IolatGrp | None", ssd: bool, now_ns: int) -> None:
        self.group = group
        self.parent = parent
        self.ssd = ssd
        self.min_lat_nsec = 0
        self.cur_win_nsec = MIN_WIN_NSEC
        self.window_start = now_ns
        # iolatency_pd_init: the parent's children's cookie, or the default
        self.scale_cookie = (parent.child_lat.scale_cookie if parent is not None
                             else DEFAULT_SCALE_COOKIE)
        self.max_depth = UINT_MAX
        self.rq_wait = RqWait()
        self.stat = LatStat()           # the window's samples (the per-CPU stats)
        self.cur_stat = LatStat()
        self.lat_avg = 0
        self.nr_samples = 0
        self.use_delay = 0              # blkg->use_delay
        self.child_lat = ChildLatency()
        self.depth_series: list = [(now_ns / NSEC_PER_SEC, None)]
        self.series_dropped = 0
        self.missed_sum = 0             # whole-run counts for results (not the kernel's)
        self.total_sum = 0

    def set_depth(self, depth: int, now_ns: int) -> None:
        """``max_depth = depth``, noted in ``depth_series`` when it changes."""
        if depth == self.max_depth:
            return
        self.max_depth = depth
        if len(self.depth_series) < SERIES_MAX:
            self.depth_series.append((now_ns / NSEC_PER_SEC,
                                      None if depth == UINT_MAX else depth))
        else:
            self.series_dropped += 1

    def latency_ok(self, stat: LatStat) -> bool:
        """``latency_sum_ok``."""
        if self.ssd:
            return stat.missed < max(stat.total // 10, 1)
        return stat.mean <= self.min_lat_nsec

    def samples(self, stat: LatStat) -> int:
        """``latency_stat_samples``."""
        return stat.total if self.ssd else stat.nr


class IoLatency(RqQosPolicy):
    """``struct blk_iolatency`` of one disk (``blkcg_iolatency_ops``: throttle, done_bio;
    the module docstring is the algorithm). ``nr_requests`` is the queue's
    (``q->nr_requests``); ``rotational`` picks the mean rule or the 10 % rule
    (``iolatency_pd_init``: ``blk_queue_nonrot``)."""

    rq_qos_id = RQ_QOS_LATENCY
    uses_timers = True

    __slots__ = ("device", "rotational", "nr_requests", "hz", "line", "grps", "_tracked",
                 "_release", "_timer_due", "_soon_at", "timers_changed")

    def __init__(self, device: str, rotational: bool, nr_requests: int, kernel: str = "6.6",
                 hz: int = 250) -> None:
        if nr_requests < 1:
            raise ValueError(f"io.latency: nr_requests must be at least 1, found {nr_requests!r}")
        self.device = device
        self.rotational = bool(rotational)
        self.nr_requests = nr_requests
        self.hz = hz
        self.line = line_for_kernel(kernel)
        self.grps: dict = {}             # Cgroup (None: the root) -> IolatGrp
        self.grps[None] = IolatGrp(None, None, not self.rotational, 0)
        self._tracked: set = set()       # ids of bios that went through throttle
        self._release: list = []         # bios let go, not yet handed to the queue
        self._timer_due = None           # the 1 s timer (s), or None
        self._soon_at = None             # now, while _release waits outside done
        self.timers_changed = False

    # ------------------------------------------------------------------ groups
    def grp(self, group, now_ns: int = 0) -> IolatGrp:
        """The group's state on this disk, made with its ancestors' on first use
        (``blkg_lookup_create`` -> ``iolatency_pd_init``)."""
        grp = self.grps.get(group)
        if grp is None:
            parent = self.grp(group.parent if group.parent is not None
                              and group.parent.parent is not None else None, now_ns)
            grp = self.grps[group] = IolatGrp(group, parent, not self.rotational, now_ns)
        return grp

    def set_target(self, group, target_us: int, now: float = 0.0) -> None:
        """``iolatency_set_limit``: ``group``'s target on this disk (µs; 0 = max, none):
        the window follows it, and a changed target clears the parent's scaling
        (``iolatency_clear_scaling``)."""
        if target_us < 0:
            raise ValueError(f"io.latency: target must be 0 or more µs, found {target_us!r}")
        now_ns = _ns(now)
        grp = self.grp(group, now_ns)
        old = grp.min_lat_nsec
        grp.min_lat_nsec = target_us * NSEC_PER_USEC
        grp.cur_win_nsec = window_nsec(grp.min_lat_nsec)
        if old and not grp.min_lat_nsec:
            grp.use_delay = 0                   # blkcg_clear_delay
        if old != grp.min_lat_nsec:
            grp.parent.child_lat.clear()

    def _chain(self, group, now_ns: int) -> list:
        """The states from ``group`` up to (not including) the root's."""
        out = []
        grp = self.grp(group, now_ns)
        while grp.parent is not None:
            out.append(grp)
            grp = grp.parent
        return out

    # ------------------------------------------------------------------ timers
    @property
    def wakeup_at(self):
        """The 1 s timer's time (s), or now while bios woken on the throttle path wait
        to be let go; None when neither."""
        return self._soon_at if self._soon_at is not None else self._timer_due

    def _set_wake_soon(self, now: float) -> None:
        # bios woken on the throttle path (by another bio's scale up) go at this instant,
        # through timer_fired
        if self._release and self._soon_at is None:
            self._soon_at = now
            self.timers_changed = True

    # ------------------------------------------------------------------ submission
    def throttle(self, bio, now: float) -> bool:
        """``blkcg_iolatency_throttle``: True to go on; False: the bio sleeps in a
        group's wait queue (it is let go from `done` or `timer_fired`)."""
        self._tracked.add(bio.id)
        group = bio.cgroup
        go = True
        if group is not None:
            now_ns = _ns(now)
            go = self._climb(bio, self._chain(group, now_ns), 0, now_ns)
        if go:
            self._arm(now)
        self._set_wake_soon(now)
        return go

    def _climb(self, bio, chain: list, start: int, now_ns: int) -> bool:
        """The walk up from ``chain[start]``: check the cookie, take a slot or sleep."""
        for i in range(start, len(chain)):
            grp = chain[i]
            self._check_scale_change(grp, now_ns)
            rqw = grp.rq_wait
            if rqw.sleepers or not rqw.inc_below(grp.max_depth):
                rqw.sleepers.append((bio, chain, i))
                return False
        return True

    def _arm(self, now: float) -> None:
        """``if (!timer_pending) mod_timer(jiffies + HZ)``."""
        if self._timer_due is None:
            jiffies = int(now * self.hz + 1e-9)
            self._timer_due = (jiffies + self.hz) / self.hz
            self.timers_changed = True

    def _wake(self, grp: IolatGrp, every: bool, now_ns: int) -> None:
        """``wake_up`` (``every`` False: one) or ``wake_up_all``: sleepers in order take
        a slot (``rq_qos_wake_function``); the first that cannot stops it. A woken bio
        goes on up its chain; one that passes it all is let go."""
        rqw = grp.rq_wait
        while rqw.sleepers:
            bio, chain, i = rqw.sleepers[0]
            if not rqw.inc_below(grp.max_depth):
                break
            rqw.sleepers.popleft()
            if self._climb(bio, chain, i + 1, now_ns):
                self._release.append(bio)
                self._arm(now_ns / NSEC_PER_SEC)
            if not every:
                break

    # ------------------------------------------------------------------ scaling
    def _check_scale_change(self, grp: IolatGrp, now_ns: int) -> None:
        """``check_scale_change``: follow the parent's cookie."""
        lat_info = grp.parent.child_lat
        cur = lat_info.scale_cookie
        ours = grp.scale_cookie
        if cur == ours:
            return
        down = cur < ours
        grp.scale_cookie = cur
        if down and grp.min_lat_nsec:
            if not lat_info.scale_lat or grp.min_lat_nsec <= lat_info.scale_lat:
                return                          # as tight as the cause: not cut
            if grp.nr_samples <= max(1, lat_info.nr_samples * 5 // 100):
                return                          # 5 % or less of the I/Os: not cut
        if grp.max_depth == 1 and down:
            grp.use_delay += 1                  # blkcg_use_delay
            return
        if cur == DEFAULT_SCALE_COOKIE:
            grp.use_delay = 0                   # blkcg_clear_delay
            grp.set_depth(UINT_MAX, now_ns)
            self._wake(grp, True, now_ns)
            return
        self._scale_change(grp, not down, now_ns)

    def _scale_change(self, grp: IolatGrp, up: bool, now_ns: int) -> None:
        """``scale_change``: one step of ``grp``'s own depth."""
        qd = self.nr_requests
        old = min(grp.max_depth, qd)
        if up:
            if old == 1 and grp.use_delay:      # blkcg_unuse_delay
                grp.use_delay -= 1
                return
            if old < qd:
                grp.set_depth(min(old + scale_amount(qd, True), qd), now_ns)
                self._wake(grp, True, now_ns)
        else:
            grp.set_depth(max(old >> 1, 1), now_ns)

    # ------------------------------------------------------------------ completion
    def done_bio(self, bio, now: float) -> None:
        """``blkcg_iolatency_done_bio``: slots back, times recorded, windows checked,
        one sleeper woken per level."""
        if bio.id not in self._tracked:
            return
        self._tracked.discard(bio.id)
        group = bio.cgroup
        if group is None:
            return
        now_ns = _ns(now)
        for grp in self._chain(group, now_ns):
            grp.rq_wait.inflight -= 1
            if grp.min_lat_nsec:
                self._record_time(grp, bio, now_ns)
                start = grp.window_start
                if now_ns > start and now_ns - start >= grp.cur_win_nsec:
                    grp.window_start = now_ns
                    self._check_latencies(grp, now_ns)
            self._wake(grp, False, now_ns)

    def _record_time(self, grp: IolatGrp, bio, now_ns: int) -> None:
        """``iolatency_record_time``: issue (``bi_issue``: entering the queue) to now."""
        start = _ns(bio.t_queue)
        if now_ns <= start:
            return
        req_time = now_ns - start
        stat = grp.stat
        if grp.ssd:
            if req_time >= grp.min_lat_nsec:
                stat.missed += 1
                grp.missed_sum += 1
            stat.total += 1
            grp.total_sum += 1
        else:
            stat.batch += req_time              # blk_rq_stat_add
            stat.nr += 1

    def _check_latencies(self, grp: IolatGrp, now_ns: int) -> None:
        """``iolatency_check_latencies``: the window's verdict on the parent's cookie."""
        stat = LatStat()
        stat.add_sum(grp.stat)                  # the per-CPU stats summed ...
        grp.stat.init()                         # ... and reset
        lat_info = grp.parent.child_lat
        if not grp.ssd:                         # iolat_update_total_lat_avg
            idx = min(len(EXP_FACTORS) - 1, grp.cur_win_nsec // EXP_BUCKET_NSEC)
            grp.lat_avg = calc_load(grp.lat_avg, EXP_FACTORS[idx], stat.mean)
        if grp.latency_ok(stat) and lat_info.scale_cookie == DEFAULT_SCALE_COOKIE:
            return
        grp.cur_stat.add_sum(stat)
        lat_info.nr_samples -= grp.nr_samples
        grp.nr_samples = grp.samples(grp.cur_stat)
        lat_info.nr_samples += grp.nr_samples
        last = lat_info.last_scale_event
        if last >= now_ns or now_ns - last < MIN_ADJUST_NSEC:
            return
        qd = self.nr_requests
        if grp.latency_ok(grp.cur_stat) and grp.latency_ok(stat):
            if grp.samples(grp.cur_stat) < MIN_GOOD_SAMPLES:
                return
            if lat_info.scale_grp is grp:
                lat_info.last_scale_event = now_ns
                scale_cookie_change(lat_info, qd, True)
        elif lat_info.scale_lat == 0 or lat_info.scale_lat >= grp.min_lat_nsec:
            lat_info.last_scale_event = now_ns
            if lat_info.scale_grp is None or lat_info.scale_lat > grp.min_lat_nsec:
                lat_info.scale_lat = grp.min_lat_nsec
                lat_info.scale_grp = grp
            scale_cookie_change(lat_info, qd, False)
        grp.cur_stat.init()

    def done(self, rq, now: float) -> list:
        """``rq_qos_done``: iolatency has no hook here; it hands over the bios its
        ``done_bio`` woke for ``rq``'s bios (the kernel wakes them at ``bio_endio``, the
        same instant)."""
        if not self._release:
            return []
        out, self._release = self._release, []
        return out

    def timer_fired(self, now: float) -> list:
        """``blkiolatency_timer_fn`` when the 1 s timer is due; and the bios woken on the
        throttle path, let go."""
        out, self._release = self._release, []
        self._soon_at = None
        if self._timer_due is not None and now >= self._timer_due:
            self._timer_due = None
            self._timer_fn(_ns(now))
        self.timers_changed = True
        return out

    def _timer_fn(self, now_ns: int) -> None:
        """``blkiolatency_timer_fn``: each group's children's cookie, parents first."""
        qd = self.nr_requests
        for grp in self._preorder():
            lat_info = grp.child_lat
            if lat_info.scale_cookie >= DEFAULT_SCALE_COOKIE:
                continue
            if lat_info.last_scale_event >= now_ns:
                continue
            if lat_info.scale_grp is None:
                scale_cookie_change(lat_info, qd, True)
            elif now_ns - lat_info.last_scale_event >= SCALE_GRP_FORGET_NSEC:
                lat_info.scale_grp = None

    def _preorder(self):
        """The states in ``blkg_for_each_descendant_pre`` order (the root's first)."""
        children: dict = {}
        for grp in self.grps.values():
            if grp.parent is not None:
                children.setdefault(grp.parent, []).append(grp)
        stack = [self.grps[None]]
        while stack:
            grp = stack.pop()
            yield grp
            stack.extend(reversed(children.get(grp, ())))

    # ------------------------------------------------------------------ figures
    @property
    def waiting(self) -> int:
        """Bios asleep in the groups' wait queues."""
        return sum(len(g.rq_wait.sleepers) for g in self.grps.values())

    def stat_of(self, group) -> dict | None:
        """io.stat's iolatency part for ``group`` on this disk (``iolatency_pd_stat``,
        printed with ``blkcg_debug_stats``): ``depth`` (None for max) with ``avg_lat``
        (µs) and ``win`` (ms) on a rotational disk, ``missed`` and ``total`` (the current
        window's) on a non-rotational one; plus blksim's whole-run ``missed_run`` and
        ``total_run`` there, and ``depth_series``. None when the group has no state."""
        grp = self.grps.get(group)
        if grp is None:
            return None
        depth = None if grp.max_depth == UINT_MAX else grp.max_depth
        if grp.ssd:
            out = {"missed": grp.stat.missed, "total": grp.stat.total, "depth": depth,
                   "missed_run": grp.missed_sum, "total_run": grp.total_sum}
        else:
            out = {"depth": depth, "avg_lat": grp.lat_avg // NSEC_PER_USEC,
                   "win": grp.cur_win_nsec // NSEC_PER_MSEC}
        out["target_us"] = grp.min_lat_nsec // NSEC_PER_USEC
        out["depth_series"] = [[round(t, 9), d] for t, d in grp.depth_series]
        if grp.series_dropped:
            out["depth_series_dropped"] = grp.series_dropped
        return out


def _ns(t: float) -> int:
    return int(t * NSEC_PER_SEC + 0.5)
