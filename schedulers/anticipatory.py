"""The anticipatory elevator (AS) of Linux 2.6.18 (block/as-iosched.c), with the 2.6.32 variant.

Sources: block/as-iosched.c of Linux 2.6.16 and 2.6.18 (the logic is the same
in both) for the default behaviour, of Linux 2.6.32 for its variant, and
Documentation/block/as-iosched.txt; the kernel functions followed are named in
the code (as_dispatch_request(), as_choose_req(), as_close_req(),
as_can_break_anticipation(), as_update_iohist(), as_completed_request(), ...).
The idea is Iyer and Druschel's, "Anticipatory scheduling: a disk scheduling
framework to overcome deceptive idleness in synchronous I/O", SOSP 2001.

AS is a deadline-like scheduler with two classes, *sync* (reads and sync writes)
and *async*, served in time-bounded batches (``read_batch_expire``,
``write_batch_expire`` with an auto-tuned write count), a one-way sweep that
allows short backward seeks (``as_choose_req``), and rate-limited FIFO expiry
checks. On top of it sits *anticipation*: after a sync request of process P is
dispatched, AS may keep the disk idle for up to ``antic_expire`` after it
completes, waiting for P's next (probably close) request instead of seeking
away to another process's. Per-process statistics (think time and seek distance
as fixed-point EWMAs, in jiffies and sectors) and global priors for new and
exiting processes decide whether waiting is worth it.

All kernel times are kept as integer jiffies at the run's HZ; ``now`` (seconds)
is read as the kernel reads ``jiffies``: ``floor(now * HZ)``. The anticipation
timer is a kernel timer, so it fires on a tick: ``(antic_start + antic_expire) / HZ``.

Version differences (``variant``):

* 2.6.18 (default, also 2.6.16-2.6.31 here): ``as_close_req`` measures the
  anticipation delay in ms but compares it with ``antic_expire`` in jiffies and
  shifts the close window by the ms count; a write batch starts at
  ``next_rq[async]``; a completion that ends the old batch does not restart the
  batch clock.
* 2.6.32: the delay is in jiffies throughout (``delay <= 20*HZ/1000``); a write
  batch starts at the async FIFO head (and resets its FIFO check clock); the
  completion that drains the old batch sets ``current_batch_expires``.
"""

from __future__ import annotations

from blksim.block.elevator import Elevator, Tunable, kernel_version, msecs_to_jiffies
from blksim.block.sorttree import SectorTree

INT_MAX = 2**31 - 1

# Class indices as the kernel numbers them (REQ_ASYNC = 0, REQ_SYNC = 1).
ASYNC, SYNC = 0, 1

# Anticipation states (enum anticipation_status).
ANTIC_OFF, ANTIC_WAIT_REQ, ANTIC_WAIT_NEXT, ANTIC_FINISHED = 0, 1, 2, 3
ANTIC_STATE_NAMES = ("OFF", "WAIT_REQ", "WAIT_NEXT", "FINISHED")
_ANTIC_WAITING = (ANTIC_WAIT_REQ, ANTIC_WAIT_NEXT)    # anticipating: a test in one lookup

MAXBACK = 1024 * 1024     # sectors the head may go backward for a request (512 MiB)
BACK_PENALTY = 2          # a backward seek costs twice a forward one

_EPS = 1e-9

# The sample count both EWMAs of as_update_iohist advance, ``(7 * samples + 256) / 8``,
# tabulated: 0, 32, 60, ... settling at 249.
_EWMA_SAMPLES = tuple((7 * s + 256) // 8 for s in range(257))
# as_update_seekdist caps a sample at 4 * seek_mean plus this slack, by the old
# sample count: 1 GiB while it is at most 60 (the second and third seeks), 64 MiB after.
_SEEK_SLACK = tuple(2 * 1024 * 1024 if s <= 60 else 2 * 1024 * 64 for s in range(257))
# as_choose_req ranks a request too far behind the head (a wrap) after every
# other, and two such by their sector: as a distance, this plus its sector.
_WRAPPED = 1 << 64


def jiffies_to_msecs(j: int, hz: int) -> int:
    """Kernel ``jiffies_to_msecs`` (exact when HZ divides 1000, rounded up otherwise)."""
    return (j * 1000 + hz - 1) // hz


def default_jiffies(hz: int) -> dict:
    """The 2.6.18 defaults in jiffies at `hz` (the kernel's HZ expressions)."""
    return {
        "read_expire": hz // 8,
        "write_expire": hz // 4,
        "read_batch_expire": hz // 2,
        "write_batch_expire": hz // 8,
        "antic_expire": (hz // 150) or 1,
    }


class AsIoContext:
    """A process's ``as_io_context`` (one per pid; Linux 2.6.18 include/linux/blkdev.h).

    ``running`` is AS_TASK_RUNNING (cleared when the process exits),
    ``iostarted``/``iorunning`` the IOSTARTED/IORUNNING bits. ``nr_queued``
    counts its requests in the elevator, ``nr_dispatched`` those on the dispatch
    list not yet taken by the driver. Think time is in jiffies, seek distance in
    sectors, both as EWMA-256 (samples/total/mean, 256 = 1.0).

    The kernel counts ``nr_dispatched`` up in as_move_to_dispatch and down in
    as_activate_request. Here it is counted on the dispatch list itself when
    asked (a request's ``sched`` is its context), so AS needs no activate hook;
    the list is nearly always empty when AS asks. ``seek_samples`` is
    ``ttime_samples``: as_update_iohist always updates both together.
    ``ttime_mean`` is worked out when read from ``ttime_total`` and
    ``ttime_samples``, as as_update_thinktime would have stored it.
    """

    __slots__ = ("pid", "running", "iostarted", "iorunning", "nr_queued",
                 "last_end_request", "last_request_pos", "ttime_total", "ttime_samples",
                 "seek_total", "seek_mean", "_dq")

    def __init__(self, pid: int, dq=()) -> None:
        self.pid = pid
        self.running = True
        self.iostarted = False
        self.iorunning = False
        self.nr_queued = 0
        self.last_end_request = 0
        self.last_request_pos = 0
        self.ttime_total = 0
        self.ttime_samples = 0
        self.seek_total = 0
        self.seek_mean = 0
        self._dq = dq

    @property
    def nr_dispatched(self) -> int:
        return sum(1 for rq in self._dq if rq.sched is self)

    @property
    def seek_samples(self) -> int:
        return self.ttime_samples

    @property
    def ttime_mean(self) -> int:
        samples = self.ttime_samples
        return (self.ttime_total + 128) // samples if samples else 0

    def __repr__(self) -> str:
        return (f"AsIoContext(pid={self.pid} ttime={self.ttime_mean}/{self.ttime_samples} "
                f"seek={self.seek_mean}/{self.seek_samples} running={self.running})")


class _Contexts(dict):
    """pid -> AsIoContext, made on first use (``as_get_io_context``)."""

    __slots__ = ("dq",)

    def __missing__(self, pid: int) -> AsIoContext:
        aic = self[pid] = AsIoContext(pid, self.dq)
        return aic


_VARIANTS = ("2.6.18", "2.6.32")


def variant_for_kernel(kernel: str) -> str:
    """The AS variant a kernel version behaves like.

    2.6.18-2.6.31 -> "2.6.18", 2.6.32 -> "2.6.32". AS was removed in 2.6.33 and
    blksim does not model kernels before 2.6.18: both raise ValueError.
    """
    v = kernel_version(kernel)
    if v < (2, 6, 18):
        raise ValueError(f"anticipatory is modelled from kernel 2.6.18 on, got {kernel!r}; "
                         "valid: 2.6.18 .. 2.6.32")
    if v >= (2, 6, 33):
        raise ValueError(f"the anticipatory scheduler was removed in Linux 2.6.33, got "
                         f"kernel {kernel!r}; valid: 2.6.18 .. 2.6.32")
    return "2.6.32" if v >= (2, 6, 32) else "2.6.18"


class AnticipatoryElevator(Elevator):
    """Linux's anticipatory I/O scheduler (sysfs name ``anticipatory``).

    Read-only state for displays and checks: ``antic_status``, ``batch_data_dir``
    (0 async, 1 sync), ``next_rq``, ``last_sector``, ``write_batch_count``,
    ``current_write_count``, ``changed_batch``, ``new_batch``, ``nr_dispatched``,
    the priors ``exit_prob``, ``exit_no_coop``, ``new_ttime_mean``,
    ``new_seek_mean``, and ``context(pid)``.
    """

    name = "anticipatory"
    own_backmerge_hash = True   # 2.6.18 AS kept its own 64-bucket back-merge hash
    uses_timers = True
    # Defaults are the sysfs values at HZ=250 (the kernel's HZ/8 etc. rounded to
    # jiffies and shown in ms). A value equal to the default stands for the
    # kernel's HZ expression at any HZ (e.g. 125 ms = 125 jiffies at HZ=1000).
    tunables = (
        Tunable("read_expire", 124, "ms", 0, INT_MAX,
                "deadline of a sync request (HZ/8 jiffies: 124 ms at HZ=250, 125 at 1000)",
                jiffies=True),
        Tunable("write_expire", 248, "ms", 0, INT_MAX,
                "deadline of an async request (HZ/4 jiffies: 248 ms at HZ=250, 250 at 1000)",
                jiffies=True),
        Tunable("read_batch_expire", 500, "ms", 0, INT_MAX,
                "length of a sync batch while async requests wait (HZ/2 jiffies)",
                jiffies=True),
        Tunable("write_batch_expire", 124, "ms", 0, INT_MAX,
                "target length of an async batch, for the write-count auto-tuning (HZ/8)",
                jiffies=True),
        Tunable("antic_expire", 4, "ms", 0, INT_MAX,
                "longest wait for the anticipated process (HZ/150, at least 1 jiffy: "
                "4 ms at HZ=250, 6 at 1000); 0 disables anticipation",
                jiffies=True),
    )
    VARIANTS = _VARIANTS
    #: The messages AS sends (``block_elv_msg``). ``hold_end``'s detail and
    #: ``antic_skipped``'s are the reasons of as_can_break_anticipation: hit (a request
    #: of the process waited for), close (a cooperating process's request near the
    #: head), timeout, in_flight (it has requests queued or at the driver), exited
    #: (it exited and processes rarely cooperate), new_thinktime and new_exit (a
    #: process without statistics, judged by the priors for new ones), thinktime (its
    #: mean think time exceeds antic_expire); hold_end also: dispatched (a request was
    #: moved regardless, a forced dispatch or an alias).
    events = {
        "hold_start": "anticipation starts: the disk is kept idle for process pid "
                      "(detail: anticipation) (as_antic_waitreq, as_antic_waitnext)",
        "hold_end": "the anticipation ends (detail: the reason, as above) "
                    "(as_add_request -> as_antic_stop, as_antic_timeout, "
                    "as_move_to_dispatch)",
        "antic_skipped": "a sync batch could have anticipated for process pid and did "
                         "not (detail: the reason of as_can_break_anticipation) "
                         "(as_dispatch_request, as_can_anticipate)",
        "batch_switch": "the batch changes direction (detail: read->write or "
                        "write->read; AS's read batches are its sync ones) "
                        "(as_dispatch_request)",
        "fifo_expired": "the request dispatched is its class's FIFO head, past its "
                        "deadline (detail: sync or async) (as_fifo_expired)",
    }

    def __init__(self, dispatch_queue, params=None, hz: int = 250,
                 variant: str = "2.6.18") -> None:
        if not isinstance(hz, int) or isinstance(hz, bool) or hz <= 0:
            raise ValueError(f"hz must be a positive whole number, got {hz!r}")
        super().__init__(dispatch_queue, params, hz)
        if variant not in _VARIANTS:
            raise ValueError(f"unknown anticipatory variant {variant!r}; valid: "
                             + ", ".join(_VARIANTS))
        self.variant = variant
        self._v2632 = variant == "2.6.32"
        # Stored as jiffies (STORE_FUNCTION: msecs_to_jiffies); a value left at
        # its declared default takes the kernel's HZ expression instead.
        defaults = default_jiffies(hz)
        declared = {t.name: t.default for t in self.tunables}
        j = {}
        for name, value in self.params.items():
            j[name] = defaults[name] if value == declared[name] else msecs_to_jiffies(value, hz)
            self.params[name] = jiffies_to_msecs(j[name], hz)   # what sysfs would show
        self.jiffies = j
        self.fifo_expire = [j["write_expire"], j["read_expire"]]        # [ASYNC, SYNC]
        self.batch_expire = [j["write_batch_expire"], j["read_batch_expire"]]
        self.antic_expire = j["antic_expire"]
        self._sync_expire = j["read_expire"]               # fifo_expire[SYNC]
        self._sync_batch = j["read_batch_expire"]          # batch_expire[SYNC]
        # A think time is at most MAX_THINKTIME - 1 (HZ/50) and, here, at least 0
        # (0 where HZ < 50 makes that bound negative)
        self._ttime_cap = max(hz // 50 - 1, 0)

        # Per request AS keeps only its io context, in ``rq.sched``: the rest of
        # the kernel's struct as_rq is at hand elsewhere. Its class is the
        # request's (sync: a read or a sync write), its sort key its start sector
        # (re-filed when a front merge moves it) and its expiry its FIFO entry.
        self._tree = (SectorTree(), SectorTree())         # [ASYNC, SYNC]
        # FIFOs: request -> its expiry (jiffies), in arrival order (plain dicts
        # keep insertion order; only the head is ever looked up)
        self._fifo = ({}, {})
        self._ioc = _Contexts()
        self._ioc.dq = dispatch_queue

        self.next_rq = [None, None]
        self.last_sector = [0, 0]
        self.exit_prob = 0
        self.exit_no_coop = 0
        self.new_ttime_total = 0
        self.new_ttime_mean = 0
        self.new_seek_total = 0
        self.new_seek_mean = 0
        self.current_batch_expires = self.batch_expire[SYNC]   # jiffies (0) + read batch
        self.last_check_fifo = [0, 0]
        self.changed_batch = False
        self.new_batch = False
        self.batch_data_dir = SYNC
        self.write_batch_count = max(self.batch_expire[ASYNC] // 10, 2)
        self.current_write_count = 0
        self.write_batch_idled = False
        self.antic_status = ANTIC_OFF
        self.antic_start = 0
        self.io_context: AsIoContext | None = None
        self.ioc_finished = False
        self.nr_dispatched = 0

    @classmethod
    def create(cls, dispatch_queue, params=None, hz: int = 250,
               kernel: str = "2.6.18") -> "AnticipatoryElevator":
        """Build AS as kernel `kernel` had it (2.6.18 .. 2.6.32)."""
        return cls(dispatch_queue, params, hz=hz, variant=variant_for_kernel(kernel))

    # ------------------------------------------------------------------ contexts
    def context(self, pid: int) -> AsIoContext:
        """The io context of `pid`, created on first use (``as_get_io_context``)."""
        return self._ioc[pid]

    def process_exited(self, pid: int, now: float) -> None:
        """``exit_as_io_context``: the context loses AS_TASK_RUNNING.

        AS keeps using it while it holds references (the anticipated process,
        queued requests); a later request from the same pid gets a fresh one.
        """
        aic = self._ioc.pop(pid, None)
        if aic is not None:
            aic.running = False

    def est_time(self) -> str:
        """The read-only sysfs file ``est_time`` (its "ms" thinktime is in jiffies)."""
        return (f"{100 * self.exit_prob // 256} % exit probability\n"
                f"{100 * self.exit_no_coop // 256} % probability of exiting without a "
                f"cooperating process submitting IO\n"
                f"{self.new_ttime_mean} ms new thinktime\n"
                f"{self.new_seek_mean} sectors new seek distance\n")

    # ------------------------------------------------------------------ statistics
    def _update_iohist(self, aic: AsIoContext, rq, j: int) -> None:
        """``as_update_iohist`` for sync request `rq` (the callers check that it is
        sync): think time and seek distance of `aic`, then where it ends."""
        if aic.iorunning:
            if aic.nr_queued or self.dq and aic.nr_dispatched:
                ttime = 0                # requests in flight: no think time
            else:
                ttime = j - aic.last_end_request
                if ttime > self._ttime_cap:
                    ttime = self._ttime_cap
                elif ttime < 0:
                    ttime = 0
        elif aic.iostarted:
            ttime = 0
        else:                            # its first request: nothing to measure yet
            aic.last_request_pos = rq.sector + rq.nr_sectors
            aic.iostarted = True
            return
        sdist = abs(rq.sector - aic.last_request_pos)
        old = aic.ttime_samples          # == seek_samples
        if not old:
            # a new process: its first sample also feeds the priors for new ones
            self.new_ttime_total = total = (7 * self.new_ttime_total + 256 * ttime) // 8
            self.new_ttime_mean = total // 256
            self.exit_prob = (7 * self.exit_prob) // 8
            self.new_seek_total = total = (7 * self.new_seek_total + 256 * sdist) // 8
            self.new_seek_mean = total // 256
        aic.ttime_samples = samples = _EWMA_SAMPLES[old]
        # as_update_thinktime (its mean: see AsIoContext.ttime_mean)
        aic.ttime_total = (7 * aic.ttime_total + 256 * ttime) // 8
        # as_update_seekdist: an odd far seek counts at most this much
        cap = 4 * aic.seek_mean + _SEEK_SLACK[old]
        if sdist > cap:
            sdist = cap
        aic.seek_total = total = (7 * aic.seek_total + 256 * sdist) // 8
        aic.seek_mean = (total + samples // 2) // samples
        aic.last_request_pos = rq.sector + rq.nr_sectors
        aic.iostarted = True

    # ------------------------------------------------------------------ request choice
    def _choose(self, r1, r2, d: int):
        """``as_choose_req``: the better of two requests of class `d` for the head.

        Ahead of the head a request is as far as its distance; behind it, by up
        to MAXBACK, twice as far; further behind (a wrap), after all of those,
        the lower sector first. Equal: the higher sector.
        """
        if r1 is None or r1 is r2:
            return r2
        if r2 is None:
            return r1
        last = self.last_sector[d]
        s1 = r1.sector
        s2 = r2.sector
        if s1 >= last:
            d1 = s1 - last
        elif s1 + MAXBACK >= last:
            d1 = (last - s1) * BACK_PENALTY
        else:
            d1 = _WRAPPED + s1
        if s2 >= last:
            d2 = s2 - last
        elif s2 + MAXBACK >= last:
            d2 = (last - s2) * BACK_PENALTY
        else:
            d2 = _WRAPPED + s2
        if d1 == d2:
            return r1 if s1 >= s2 else r2
        return r1 if d1 < d2 else r2

    def _find_next(self, rq, d: int):
        """``as_find_next_arq``: choose between `rq`'s successor (wrapping to the
        lowest request) and its predecessor; `rq` is still in the tree."""
        prev, nxt = self._tree[d].neighbours(rq.sector)
        return self._choose(nxt, prev, d)

    # ------------------------------------------------------------------ anticipation
    def _antic_waitnext(self, now: float) -> None:
        """Arm the anticipation timer at ``antic_start + antic_expire`` (a tick)."""
        when = (self.antic_start + self.antic_expire) / self.hz
        self.wakeup_at = when if when > now else now
        self.antic_status = ANTIC_WAIT_NEXT

    def _antic_waitreq(self, now: float) -> None:
        if self.antic_status == ANTIC_OFF:
            if self.msg is not None:
                self.msg("hold_start", self.io_context.pid, "anticipation")
            if self.io_context is None or self.ioc_finished:
                self._antic_waitnext(now)
            else:
                self.antic_status = ANTIC_WAIT_REQ

    def _say_not_anticipated(self, why) -> None:
        """``antic_skipped`` with as_can_break_anticipation's reason, when a sync
        request was dispatched without anticipating (sent only to a subscriber). A
        request of the process last served (``hit``) is no decision: not reported."""
        if why and why != "hit":
            self.msg("antic_skipped", self.io_context.pid, why)

    def _antic_stop(self) -> None:
        status = self.antic_status
        if status == ANTIC_WAIT_REQ or status == ANTIC_WAIT_NEXT:
            if status == ANTIC_WAIT_NEXT:
                self.wakeup_at = None
            self.antic_status = ANTIC_FINISHED
            self.kick_queue = True          # kblockd_schedule_work(antic_work)

    def _close_req(self, aic: AsIoContext, rq, j: int) -> bool:
        """``as_close_req``: is `rq` close to where the head is? Within a window
        around the head's position (8192 sectors, doubled per ms, 2.6.32: per
        jiffy, waited since the anticipated process's completion; after 20 ms or
        ``antic_expire`` any request counts), or nearer than the process's mean
        seek distance (the prior for new processes while it has no sample)."""
        if self.antic_status == ANTIC_OFF or not self.ioc_finished:
            delay = 0
        elif self._v2632:
            delay = j - self.antic_start                         # jiffies
        else:
            delay = ((j - self.antic_start) * 1000) // self.hz   # ms (2.6.16-2.6.2x)
        if delay == 0:
            delta = 8192
        elif delay <= (20 * self.hz // 1000 if self._v2632 else 20) and delay <= self.antic_expire:
            delta = 8192 << delay
        else:
            return True
        offset = rq.sector - self.last_sector[self.batch_data_dir]
        if -(delta >> 1) <= offset <= delta:
            return True
        seek_mean = aic.seek_mean if aic.ttime_samples else self.new_seek_mean
        return seek_mean > abs(offset)

    def _can_break_anticipation(self, rq, j: int):
        """``as_can_break_anticipation``: a reason (a true word: hit, timeout,
        in_flight, close, exited, new_thinktime, new_exit, thinktime) to stop waiting
        for ``io_context``, or False."""
        aic = self.io_context
        if rq is not None and rq.sched is aic:
            return "hit"                                   # from the same process
        if self.ioc_finished and abs(j - self.antic_start) >= self.antic_expire:
            return "timeout"                               # timed out, timer not run yet
        if aic.nr_queued or self.dq and aic.nr_dispatched:
            return "in_flight"                             # it has requests in flight
        if rq is not None and (not rq.write or rq.sync) and self._close_req(aic, rq, j):
            # A cooperating process: its close request feeds our statistics.
            if not aic.running:
                if aic.ttime_samples == 0:
                    self.exit_prob = (7 * self.exit_prob + 256) // 8
                self.exit_no_coop = (7 * self.exit_no_coop) // 8
            self._update_iohist(aic, rq, j)
            return "close"
        if not aic.running:
            if aic.ttime_samples == 0:
                self.exit_prob = (7 * self.exit_prob + 256) // 8
            if self.exit_no_coop > 128:
                return "exited"
        if aic.ttime_samples == 0:
            if self.new_ttime_mean > self.antic_expire:
                return "new_thinktime"
            if self.exit_prob * self.exit_no_coop > 128 * 256:
                return "new_exit"
        elif (aic.ttime_total + 128) // aic.ttime_samples > self.antic_expire:
            return "thinktime"                             # thinks too long (ttime_mean)
        return False

    def timer_fired(self, now: float) -> None:
        """``as_antic_timeout``: anticipation ends; learn about new/exited processes."""
        status = self.antic_status
        if status == ANTIC_WAIT_REQ or status == ANTIC_WAIT_NEXT:
            aic = self.io_context
            if self.msg is not None:
                self.msg("hold_end", aic.pid, "timeout")
            self.antic_status = ANTIC_FINISHED
            self.kick_queue = True
            if aic.ttime_samples == 0:
                self.exit_prob = (7 * self.exit_prob + 256) // 8
            if not aic.running:
                self.exit_no_coop = (7 * self.exit_no_coop + 256) // 8

    # ------------------------------------------------------------------ filing
    def _file(self, rq, d: int) -> None:
        """``as_add_arq_rb``: insert by start sector; an alias is dispatched first."""
        tree = self._tree[d]
        key = rq.sector
        alias = tree.add(key, rq)
        while alias is not None:
            self._move(alias, d)
            self._antic_stop()
            alias = tree.add(key, rq)

    def _refile(self, rq, d: int) -> None:
        """``as_merged_request``'s repositioning: if a front merge moved `rq`'s start
        sector off its key, ``as_del_arq_rb`` then ``as_add_arq_rb``."""
        tree = self._tree[d]
        if not tree.holds(rq.sector, rq):
            tree.discard(rq)
            self._file(rq, d)

    def _move(self, rq, d: int) -> None:
        """``as_move_to_dispatch`` of `rq`, of class `d`: the head moves past it,
        ``next_rq`` moves on, it leaves the tree and the FIFO
        (``as_remove_queued_request``) for the dispatch list (``elv_dispatch_sort``)."""
        if self.antic_status != ANTIC_OFF:
            if self.msg is not None and self.antic_status in _ANTIC_WAITING:
                self.msg("hold_end", self.io_context.pid, "dispatched")
            self._antic_stop()
            self.antic_status = ANTIC_OFF
        self.last_sector[d] = rq.sector + rq.nr_sectors
        aic = rq.sched
        self.io_context = aic if d else None
        if not d and self.current_write_count:
            self.current_write_count -= 1
        self.ioc_finished = False
        # as_find_next_arq (its neighbours taken as the tree lets go of rq), then
        # as_remove_queued_request
        prev, nxt = self._tree[d].remove_between(rq.sector)
        self.next_rq[d] = self._choose(nxt, prev, d)
        aic.nr_queued -= 1
        del self._fifo[d][rq]
        self.dq.add_sorted(rq)
        self.nr_dispatched += 1

    # ------------------------------------------------------------------ hooks
    def add(self, rq, now: float) -> None:
        """``as_add_request``: statistics, sort tree (alias rule), FIFO, next_rq, anticipation."""
        j = int(now * self.hz + _EPS)
        rq.sched = aic = self._ioc[rq.pid]
        if not rq.write or rq.sync:
            d = SYNC
            self._update_iohist(aic, rq, j)
        else:
            d = ASYNC
        aic.nr_queued += 1
        self._file(rq, d)
        self._fifo[d][rq] = expires = j + self.fifo_expire[d]
        rq.fifo_time = expires / self.hz
        # as_update_arq: keep next_rq up to date; stop anticipating if this is
        # the request waited for (or one as good)
        next_rq = self.next_rq
        next_rq[d] = self._choose(rq, next_rq[d], d)
        if self.antic_status in _ANTIC_WAITING and (why := self._can_break_anticipation(rq, j)):
            if self.msg is not None:
                self.msg("hold_end", self.io_context.pid, why)
            self._antic_stop()

    def merge_candidate(self, bio, now: float):
        """``as_merge`` front-merge lookup: a request starting at the bio's end.

        2.6.18 looks in ``sort_list[bio_data_dir(bio)]`` although the trees are
        indexed by class (async 0, sync 1): a read bio searches the async tree
        and a write bio the sync tree. Kept as the kernel has it, so reads never
        front-merge here (the one-hit cache still front-merges them).
        """
        return self._tree[1 if bio.write else 0].find(bio.sector + bio.nr_sectors)

    def merged(self, rq, front: bool, now: float) -> None:
        """``as_merged_request``: re-file after a front merge (next_rq not adjusted)."""
        self._refile(rq, SYNC if (not rq.write or rq.sync) else ASYNC)

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``as_merged_requests``: `nxt` is absorbed; `rq` keeps the earlier expiry,
        takes `nxt`'s FIFO place and (swapped) io context."""
        d = SYNC if (not rq.write or rq.sync) else ASYNC
        fifo = self._fifo[d]
        expires = fifo[nxt]        # (read first: re-filing rq may dispatch nxt as an alias)
        earlier = expires < fifo[rq]
        self._refile(rq, d)
        if earlier:
            del fifo[rq]
            if nxt in fifo:
                # rq takes nxt's place (a dict cannot rename a key in place: rebuilt)
                order = [(rq if r is nxt else r, e) for r, e in fifo.items()]
                fifo.clear()
                fifo.update(order)
            else:
                fifo[rq] = expires
            rq.fifo_time = nxt.fifo_time
            rq.sched, nxt.sched = nxt.sched, rq.sched
        else:
            del fifo[nxt]
        # as_remove_queued_request(next)
        aic = nxt.sched
        aic.nr_queued -= 1
        if self.next_rq[d] is nxt:
            self.next_rq[d] = self._find_next(nxt, d)
        self._tree[d].remove(nxt.sector)
        # as_put_io_context(anext): a sync context is marked as having run IO now
        if not nxt.write or nxt.sync:
            aic.iorunning = True
            aic.last_end_request = int(now * self.hz + _EPS)
        nxt.sched = None

    def _expired_head(self, d: int, j: int):
        """``as_fifo_expired`` past its rate limit (one look per ``fifo_expire[d]``,
        which the caller has checked): note the look; the FIFO head if it has
        expired, else None."""
        self.last_check_fifo[d] = j
        fifo = self._fifo[d]
        if fifo:
            head = next(iter(fifo))
            if j > fifo[head]:
                if self.msg is not None:
                    self.msg("fifo_expired", head.pid, "sync" if d else "async")
                return head
        return None

    def _batch_expired(self, j: int) -> bool:
        if self.changed_batch or self.new_batch:
            return False
        if self.batch_data_dir == SYNC:
            return j > self.current_batch_expires
        return j > self.current_batch_expires or self.current_write_count == 0

    def _update_write_batch(self, j: int) -> None:
        """Auto-tune ``write_batch_count`` toward ``write_batch_expire``."""
        batch = self.batch_expire[ASYNC]
        write_time = (j - self.current_batch_expires) + batch
        if write_time < 0:
            write_time = 0
        if write_time > batch and not self.write_batch_idled:
            if write_time > batch * 3:
                self.write_batch_count //= 2
            else:
                self.write_batch_count -= 1
        elif write_time < batch and self.current_write_count == 0:
            if batch > write_time * 3:
                self.write_batch_count *= 2
            else:
                self.write_batch_count += 1
        if self.write_batch_count < 1:
            self.write_batch_count = 1

    def _dispatch_all(self, now: float) -> int:
        """A forced dispatch: everything, sync first (``as_dispatch_request(force)``)."""
        j = int(now * self.hz + _EPS)
        self.batch_data_dir = SYNC
        self.changed_batch = False
        self.new_batch = False
        n = 0
        for d in (SYNC, ASYNC):
            fifo = self._fifo[d]
            while fifo:
                rq = self.next_rq[d]
                if rq is None:     # cannot happen in the kernel's own use; be safe
                    rq = self._tree[d].first()
                self._move(rq, d)
                n += 1
            self.last_check_fifo[d] = j
        return n

    def dispatch(self, now: float, force: bool = False) -> int:
        """``as_dispatch_request``: move one request (all with ``force``); 0 = idle/wait."""
        if force:
            return self._dispatch_all(now)
        writes, reads = self._fifo     # (used only for their truth: requests queued)
        d = self.batch_data_dir
        if not d and not reads and (not self.current_write_count or not writes):
            self.write_batch_idled = True     # uncontended write batch: can't time it

        status = self.antic_status
        if not (reads or writes) or status in _ANTIC_WAITING or self.changed_batch:
            return 0
        j = int(now * self.hz + _EPS)

        if reads and writes and self._batch_expired(j):
            rq = None
        else:
            # the batch is still running, or only one class has requests
            rq = self.next_rq[d]
            if d and self.antic_expire:
                why = False              # (as_can_break_anticipation's reason, if asked)
                # as_fifo_expired(SYNC) (rate-limited); where it runs here, the
                # one at the dispatch_request label would find nothing new at this j
                if abs(j - self.last_check_fifo[SYNC]) >= self._sync_expire \
                        and (head := self._expired_head(SYNC, j)) is not None:
                    rq = head                 # the kernel's fifo_expired label
                # as_can_anticipate: antic_status is OFF or FINISHED here, and
                # not FINISHED is OFF (0)
                elif not status and self.io_context is not None \
                        and not (why := self._can_break_anticipation(rq, j)):
                    self._antic_waitreq(now)
                    return 0
                elif rq is not None and not writes:     # (rq queued: reads too)
                    self.current_batch_expires = j + self._sync_batch
                if self.msg is not None and not status and self.io_context is not None:
                    self._say_not_anticipated(why)
            elif rq is not None:
                if reads and not writes:
                    self.current_batch_expires = j + self._sync_batch
                # dispatch_request: as_fifo_expired(d)
                if abs(j - self.last_check_fifo[d]) >= self.fifo_expire[d] \
                        and (head := self._expired_head(d, j)) is not None:
                    rq = head
        if rq is None:
            # start a new batch
            if reads and not (writes and d):
                if not d:
                    self.changed_batch = True
                d = self.batch_data_dir = SYNC
                rq = next(iter(reads))
                self.last_check_fifo[SYNC] = j
            else:      # writes pending: after a read batch, or no reads at all
                if d:
                    self.changed_batch = True
                    self.new_batch = False
                d = self.batch_data_dir = ASYNC
                self.current_write_count = self.write_batch_count
                self.write_batch_idled = False
                if self._v2632:
                    rq = next(iter(writes))
                    self.last_check_fifo[ASYNC] = j
                else:
                    rq = self.next_rq[ASYNC]
            # dispatch_request: as_fifo_expired(d)
            if abs(j - self.last_check_fifo[d]) >= self.fifo_expire[d] \
                    and (head := self._expired_head(d, j)) is not None:
                rq = head
            # (changed_batch, False on entry, can only have been set just above)
            if self.changed_batch and self.msg is not None:
                self.msg("batch_switch", 0, "read->write" if d == ASYNC else "write->read")
            if self.changed_batch:
                if self.nr_dispatched:
                    return 0                  # let the previous batch drain first
                if d == ASYNC:
                    self.current_batch_expires = j + self.batch_expire[ASYNC]
                else:
                    self.new_batch = True     # read batch clock starts at 1st completion
                self.changed_batch = False
        self._move(rq, d)
        return 1

    def completed(self, rq, now: float) -> None:
        """``as_completed_request``: batch bookkeeping, anticipation timing, context."""
        j = int(now * self.hz + _EPS)
        if self.changed_batch and self.nr_dispatched == 1:
            if self._v2632:
                self.current_batch_expires = j + self.batch_expire[self.batch_data_dir]
            self.kick_queue = True
            self.changed_batch = False
            if self.batch_data_dir == SYNC:
                self.new_batch = True
        self.nr_dispatched -= 1
        if self.new_batch and self.batch_data_dir == (SYNC if (not rq.write or rq.sync)
                                                      else ASYNC):
            self._update_write_batch(j)
            self.current_batch_expires = j + self.batch_expire[SYNC]
            self.new_batch = False
        aic = rq.sched
        if self.io_context is aic:
            self.antic_start = j
            self.ioc_finished = True
            if self.antic_status == ANTIC_WAIT_REQ:
                self._antic_waitnext(now)
        # as_put_io_context
        if not rq.write or rq.sync:
            aic.iorunning = True
            aic.last_end_request = j

    def former(self, rq):
        if rq.sched is None:
            return None
        return self._tree[SYNC if (not rq.write or rq.sync) else ASYNC].predecessor(rq.sector)

    def latter(self, rq):
        if rq.sched is None:
            return None
        return self._tree[SYNC if (not rq.write or rq.sync) else ASYNC].successor(rq.sector)

    def empty(self) -> bool:
        return not self._fifo[0] and not self._fifo[1]

    def queued(self) -> int:
        return len(self._fifo[0]) + len(self._fifo[1])

    # ------------------------------------------------------------------ introspection
    def sort_order(self, sync: bool) -> list:
        """Queued requests of one class in ascending sector order."""
        return list(self._tree[SYNC if sync else ASYNC])

    def fifo_order(self, sync: bool) -> list:
        """Queued requests of one class in FIFO order."""
        return list(self._fifo[SYNC if sync else ASYNC])
