"""The anticipatory elevator (AS) of Linux 2.6.18 (block/as-iosched.c), with the 2.6.32 variant.

Specification: shared/reference/linux-schedulers.md §4, checked against the
2.6.16 source [S1] and the 2.6.18 source (laitianli/kernel-analyze_linux-2.6.18,
block/as-iosched.c, logic identical to 2.6.16); 2.6.32 differences from [S2].

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

from bisect import bisect_left

from schedulers.base import Elevator, Tunable, msecs_to_jiffies
from schedulers.sorttree import SectorTree

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
_new = object.__new__


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
    """

    __slots__ = ("pid", "running", "iostarted", "iorunning", "nr_queued", "nr_dispatched",
                 "last_end_request", "last_request_pos", "ttime_total", "ttime_samples",
                 "ttime_mean", "seek_total", "seek_samples", "seek_mean")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.running = True
        self.iostarted = False
        self.iorunning = False
        self.nr_queued = 0
        self.nr_dispatched = 0
        self.last_end_request = 0
        self.last_request_pos = 0
        self.ttime_total = 0
        self.ttime_samples = 0
        self.ttime_mean = 0
        self.seek_total = 0
        self.seek_samples = 0
        self.seek_mean = 0

    def __repr__(self) -> str:
        return (f"AsIoContext(pid={self.pid} ttime={self.ttime_mean}/{self.ttime_samples} "
                f"seek={self.seek_mean}/{self.seek_samples} running={self.running})")


class _AsRq:
    """AS's per-request data (``struct as_rq``): tree key, FIFO slot, context, class, expiry."""

    __slots__ = ("key", "slot", "aic", "is_sync", "expires")

    def __init__(self, key: int, slot: int, aic: AsIoContext, is_sync: int) -> None:
        self.key = key
        self.slot = slot
        self.aic = aic
        self.is_sync = is_sync
        self.expires = 0


_VARIANTS = ("2.6.18", "2.6.32")


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split("."))
    except (AttributeError, ValueError):
        raise ValueError(f"kernel version must look like 2.6.18, got {text!r}") from None


def variant_for_kernel(kernel: str) -> str:
    """The AS variant a kernel version behaves like.

    2.6.18-2.6.31 -> "2.6.18", 2.6.32 -> "2.6.32". AS was removed in 2.6.33 and
    blksim does not model kernels before 2.6.18: both raise ValueError.
    """
    v = _version(kernel)
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
        self._max_ttime = hz // 50 - 1          # MAX_THINKTIME - 1 (HZ/50UL)

        self._tree = (SectorTree(), SectorTree())         # [ASYNC, SYNC]
        # FIFOs: slot -> request, in arrival order (plain dicts keep insertion
        # order and are cheaper than OrderedDict; only the head is ever looked up)
        self._fifo = ({}, {})
        self._slot = 0
        self._ioc: dict[int, AsIoContext] = {}

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
        # jiffies as last read by add/completed, at time _jnow: dispatch usually
        # runs at that same instant and reuses it
        self._jnow = -1.0
        self._j = 0

    @classmethod
    def create(cls, dispatch_queue, params=None, hz: int = 250,
               kernel: str = "2.6.18") -> "AnticipatoryElevator":
        """Build AS as kernel `kernel` had it (2.6.18 .. 2.6.32)."""
        return cls(dispatch_queue, params, hz=hz, variant=variant_for_kernel(kernel))

    # ------------------------------------------------------------------ contexts
    def context(self, pid: int) -> AsIoContext:
        """The io context of `pid`, created on first use (``as_get_io_context``)."""
        aic = self._ioc.get(pid)
        if aic is None:
            aic = self._ioc[pid] = AsIoContext(pid)
        return aic

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
        """``as_update_iohist``: think time and seek distance of a sync request."""
        if not (rq.sync or not rq.write):
            return
        sector = rq.sector
        if aic.iorunning or aic.iostarted:
            ttime = 0
            if aic.iorunning and aic.nr_queued + aic.nr_dispatched == 0:
                ttime = j - aic.last_end_request
                max_tt = self._max_ttime
                if ttime > max_tt:
                    ttime = max_tt
                if ttime < 0:
                    ttime = 0
            last = aic.last_request_pos
            sdist = sector - last if sector >= last else last - sector
            # as_update_thinktime and as_update_seekdist always run together, so
            # ttime_samples == seek_samples: one sample count serves both
            old = aic.ttime_samples
            if old == 0:
                self.new_ttime_total = total = (7 * self.new_ttime_total + 256 * ttime) // 8
                self.new_ttime_mean = total // 256
                self.exit_prob = (7 * self.exit_prob) // 8
                self.new_seek_total = total = (7 * self.new_seek_total + 256 * sdist) // 8
                self.new_seek_mean = total // 256
            aic.ttime_samples = aic.seek_samples = samples = (7 * old + 256) // 8
            # as_update_thinktime
            aic.ttime_total = total = (7 * aic.ttime_total + 256 * ttime) // 8
            aic.ttime_mean = (total + 128) // samples
            # as_update_seekdist
            cap = aic.seek_mean * 4 + (2 * 1024 * 1024 if old <= 60 else 2 * 1024 * 64)
            if sdist > cap:
                sdist = cap
            aic.seek_total = total = (7 * aic.seek_total + 256 * sdist) // 8
            aic.seek_mean = (total + samples // 2) // samples
        aic.last_request_pos = sector + rq.nr_sectors
        aic.iostarted = True

    # ------------------------------------------------------------------ request choice
    def _choose(self, r1, r2, d: int):
        """``as_choose_req``: the better of two requests of class `d` for the head."""
        if r1 is None or r1 is r2:
            return r2
        if r2 is None:
            return r1
        last = self.last_sector[d]
        s1 = r1.sector
        s2 = r2.sector
        wrap1 = wrap2 = False
        if s1 >= last:
            d1 = s1 - last
        elif s1 + MAXBACK >= last:
            d1 = (last - s1) * BACK_PENALTY
        else:
            wrap1 = True
            d1 = 0
        if s2 >= last:
            d2 = s2 - last
        elif s2 + MAXBACK >= last:
            d2 = (last - s2) * BACK_PENALTY
        else:
            wrap2 = True
            d2 = 0
        if wrap1 != wrap2:
            return r2 if wrap1 else r1
        if wrap1:                      # both behind the head: the lower one
            return r1 if s1 <= s2 else r2
        if d1 < d2:
            return r1
        if d2 < d1:
            return r2
        return r1 if s1 >= s2 else r2

    def _find_next(self, rq, d: int):
        """``as_find_next_arq``: choose between `rq`'s successor (wrapping to the
        lowest request) and its predecessor; `rq` is still in the tree."""
        tree = self._tree[d]
        keys = tree.keys
        rqs = tree.rqs
        i = bisect_left(keys, rq.sched.key)
        prev = rqs[i - 1] if i > 0 else None
        if i + 1 < len(rqs):
            nxt = rqs[i + 1]
        else:
            nxt = rqs[0]
            if nxt is rq:
                nxt = None
        return self._choose(nxt, prev, d)

    # ------------------------------------------------------------------ anticipation
    def _antic_waitnext(self, now: float) -> None:
        """Arm the anticipation timer at ``antic_start + antic_expire`` (a tick)."""
        when = (self.antic_start + self.antic_expire) / self.hz
        self.wakeup_at = when if when > now else now
        self.antic_status = ANTIC_WAIT_NEXT

    def _antic_waitreq(self, now: float) -> None:
        if self.antic_status == ANTIC_OFF:
            if self.io_context is None or self.ioc_finished:
                self._antic_waitnext(now)
            else:
                self.antic_status = ANTIC_WAIT_REQ

    def _antic_stop(self) -> None:
        status = self.antic_status
        if status == ANTIC_WAIT_REQ or status == ANTIC_WAIT_NEXT:
            if status == ANTIC_WAIT_NEXT:
                self.wakeup_at = None
            self.antic_status = ANTIC_FINISHED
            self.kick_queue = True          # kblockd_schedule_work(antic_work)

    def _can_break_anticipation(self, rq, j: int) -> bool:
        """``as_can_break_anticipation``: True = stop waiting for ``io_context``."""
        aic = self.io_context
        if rq is not None:
            node = rq.sched
            if node.aic is aic:
                return True                                # from the same process
        if self.ioc_finished:
            waited = j - self.antic_start
            if waited < 0:
                waited = -waited
            if waited >= self.antic_expire:
                return True                                # timed out, timer not run yet
        if aic.nr_queued > 0 or aic.nr_dispatched > 0:
            return True
        if rq is not None and node.is_sync:
            # as_close_req (2.6.16-2.6.18), inlined here on the hot path
            if self.antic_status == ANTIC_OFF or not self.ioc_finished:
                delta = 8192                                       # delay 0 (the usual case)
            else:
                if self._v2632:
                    delay = j - self.antic_start                         # jiffies
                else:
                    delay = ((j - self.antic_start) * 1000) // self.hz   # ms (2.6.16-2.6.2x)
                if delay == 0:
                    delta = 8192
                elif delay <= (20 * self.hz // 1000 if self._v2632 else 20) \
                        and delay <= self.antic_expire:
                    delta = 8192 << delay
                else:
                    delta = 0                                          # close
            if delta:
                last = self.last_sector[self.batch_data_dir]
                nxt = rq.sector
                if last <= nxt + (delta >> 1) and nxt <= last + delta:
                    close = True
                else:
                    dist = nxt - last if last < nxt else last - nxt
                    if aic.seek_samples == 0:
                        close = self.new_seek_mean > dist
                    else:
                        close = aic.seek_mean > dist
            else:
                close = True
        else:
            close = False
        if close:
            # A cooperating process: its close request feeds our statistics.
            if not aic.running:
                if aic.ttime_samples == 0:
                    self.exit_prob = (7 * self.exit_prob + 256) // 8
                self.exit_no_coop = (7 * self.exit_no_coop) // 8
            self._update_iohist(aic, rq, j)
            return True
        if not aic.running:
            if aic.ttime_samples == 0:
                self.exit_prob = (7 * self.exit_prob + 256) // 8
            if self.exit_no_coop > 128:
                return True
        if aic.ttime_samples == 0:
            if self.new_ttime_mean > self.antic_expire:
                return True
            if self.exit_prob * self.exit_no_coop > 128 * 256:
                return True
        elif aic.ttime_mean > self.antic_expire:
            return True                                    # thinks too long
        return False

    def _can_anticipate(self, rq, j: int) -> bool:
        if self.io_context is None:            # last dispatch was async
            return False
        if self.antic_status == ANTIC_FINISHED:
            return False
        return not self._can_break_anticipation(rq, j)

    def timer_fired(self, now: float) -> None:
        """``as_antic_timeout``: anticipation ends; learn about new/exited processes."""
        status = self.antic_status
        if status == ANTIC_WAIT_REQ or status == ANTIC_WAIT_NEXT:
            aic = self.io_context
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
        rq.sched.key = key
        alias = tree.add(key, rq)
        while alias is not None:
            self._move(alias)
            self._antic_stop()
            alias = tree.add(key, rq)

    def _move(self, rq) -> None:
        """``as_move_to_dispatch``."""
        if self.antic_status != ANTIC_OFF:
            self._antic_stop()
            self.antic_status = ANTIC_OFF
        node = rq.sched
        d = node.is_sync
        self.last_sector[d] = rq.sector + rq.nr_sectors
        if d:
            self.io_context = node.aic
        else:
            self.io_context = None
            if self.current_write_count:
                self.current_write_count -= 1
        self.ioc_finished = False
        # as_find_next_arq (as _find_next does), sharing its binary search with
        # the tree removal below
        tree = self._tree[d]
        keys = tree.keys
        rqs = tree.rqs
        i = bisect_left(keys, node.key)
        n = len(rqs)
        if n == 1:
            self.next_rq[d] = None            # rq was the only one
        else:
            self.next_rq[d] = self._choose(rqs[i + 1] if i + 1 < n else rqs[0],
                                           rqs[i - 1] if i > 0 else None, d)
        # as_remove_queued_request
        aic = node.aic
        aic.nr_queued -= 1
        del self._fifo[d][node.slot]
        del keys[i]
        del rqs[i]
        self.dq.add_sorted(rq)
        aic.nr_dispatched += 1
        self.nr_dispatched += 1

    # ------------------------------------------------------------------ hooks
    def add(self, rq, now: float) -> None:
        """``as_add_request``: statistics, sort tree (alias rule), FIFO, next_rq, anticipation."""
        hz = self.hz
        self._jnow = now
        self._j = j = int(now * hz + _EPS)
        d = SYNC if (rq.sync or not rq.write) else ASYNC
        pid = rq.pid
        try:                     # (a subscript is cheaper than .get for the usual hit)
            aic = self._ioc[pid]
        except KeyError:
            aic = self._ioc[pid] = AsIoContext(pid)
        slot = self._slot
        self._slot = slot + 1
        key = rq.sector
        # _AsRq(key, slot, aic, d), without the __init__ call (expires is set below)
        rq.sched = node = _new(_AsRq)
        node.key = key
        node.slot = slot
        node.aic = aic
        node.is_sync = d
        if d:
            # as_update_iohist (see _update_iohist), inlined; d says rq is sync
            if aic.iorunning or aic.iostarted:
                ttime = 0
                if aic.iorunning and aic.nr_queued + aic.nr_dispatched == 0:
                    ttime = j - aic.last_end_request
                    max_tt = self._max_ttime
                    if ttime > max_tt:
                        ttime = max_tt
                    if ttime < 0:
                        ttime = 0
                last = aic.last_request_pos
                sdist = key - last if key >= last else last - key
                old = aic.ttime_samples         # == seek_samples (see _update_iohist)
                if old == 0:
                    self.new_ttime_total = total = (7 * self.new_ttime_total + 256 * ttime) // 8
                    self.new_ttime_mean = total // 256
                    self.exit_prob = (7 * self.exit_prob) // 8
                    self.new_seek_total = total = (7 * self.new_seek_total + 256 * sdist) // 8
                    self.new_seek_mean = total // 256
                aic.ttime_samples = aic.seek_samples = samples = (7 * old + 256) // 8
                # as_update_thinktime
                aic.ttime_total = total = (7 * aic.ttime_total + 256 * ttime) // 8
                aic.ttime_mean = (total + 128) // samples
                # as_update_seekdist
                cap = aic.seek_mean * 4 + (2 * 1024 * 1024 if old <= 60 else 2 * 1024 * 64)
                if sdist > cap:
                    sdist = cap
                aic.seek_total = total = (7 * aic.seek_total + 256 * sdist) // 8
                aic.seek_mean = (total + samples // 2) // samples
            aic.last_request_pos = key + rq.nr_sectors
            aic.iostarted = True
        aic.nr_queued += 1
        # _file, inlined for the common case (no alias)
        tree = self._tree[d]
        keys = tree.keys
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            self._file(rq, d)
        else:
            keys.insert(i, key)
            tree.rqs.insert(i, rq)
        expires = node.expires = j + self.fifo_expire[d]
        rq.fifo_time = expires / hz
        self._fifo[d][slot] = rq
        # as_update_arq
        next_rq = self.next_rq
        cur = next_rq[d]
        next_rq[d] = rq if cur is None else self._choose(rq, cur, d)
        if self.antic_status in _ANTIC_WAITING and self._can_break_anticipation(rq, j):
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
        node = rq.sched
        if rq.sector != node.key:
            self._tree[node.is_sync].remove(node.key)
            self._file(rq, node.is_sync)

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``as_merged_requests``: `nxt` is absorbed; `rq` keeps the earlier expiry,
        takes `nxt`'s FIFO place and (swapped) io context."""
        node = rq.sched
        d = node.is_sync
        if rq.sector != node.key:
            self._tree[d].remove(node.key)
            self._file(rq, d)
        vnode = nxt.sched
        fifo = self._fifo[d]
        if vnode.expires < node.expires:
            del fifo[node.slot]
            fifo[vnode.slot] = rq
            node.slot = vnode.slot
            node.expires = vnode.expires
            rq.fifo_time = nxt.fifo_time
            node.aic, vnode.aic = vnode.aic, node.aic
        else:
            del fifo[vnode.slot]
        # as_remove_queued_request(next)
        vnode.aic.nr_queued -= 1
        if self.next_rq[d] is nxt:
            self.next_rq[d] = self._find_next(nxt, d)
        self._tree[d].remove(vnode.key)
        # as_put_io_context(anext): a sync context is marked as having run IO now
        if vnode.is_sync:
            aic = vnode.aic
            aic.iorunning = True
            aic.last_end_request = int(now * self.hz + _EPS)
        nxt.sched = None

    def _fifo_expired(self, d: int, j: int) -> bool:
        """``as_fifo_expired``: rate-limited to one look per ``fifo_expire[d]``."""
        delta = j - self.last_check_fifo[d]
        if delta < 0:
            delta = -delta
        if delta < self.fifo_expire[d]:
            return False
        self.last_check_fifo[d] = j
        fifo = self._fifo[d]
        if not fifo:
            return False
        return j > fifo[next(iter(fifo))].sched.expires

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

    def dispatch(self, now: float, force: bool = False) -> int:
        """``as_dispatch_request``: move one request (all with ``force``); 0 = idle/wait."""
        fifos = self._fifo
        reads = fifos[SYNC]            # (used only for their truth: requests queued)
        writes = fifos[ASYNC]

        if force:
            j = int(now * self.hz + _EPS)
            self.batch_data_dir = SYNC
            self.changed_batch = False
            self.new_batch = False
            n = 0
            for d in (SYNC, ASYNC):
                fifo = fifos[d]
                while fifo:
                    rq = self.next_rq[d]
                    if rq is None:     # cannot happen in the kernel's own use; be safe
                        rq = self._tree[d].first()
                    self._move(rq)
                    n += 1
                self.last_check_fifo[d] = j
            return n

        d = self.batch_data_dir
        if d == ASYNC and not reads and (self.current_write_count == 0 or not writes):
            self.write_batch_idled = True     # uncontended write batch: can't time it

        status = self.antic_status
        if not (reads or writes) or status in _ANTIC_WAITING or self.changed_batch:
            return 0
        j = self._j if now == self._jnow else int(now * self.hz + _EPS)

        rq = None
        expired = False        # reached the kernel's fifo_expired label
        chosen = False         # reached the dispatch_request label
        checked = False        # as_fifo_expired(SYNC) already ran at this j
        if not (reads and writes and self._batch_expired(j)):
            # the batch is still running, or only one class has requests
            rq = self.next_rq[d]
            if d == SYNC and self.antic_expire:
                # _fifo_expired(SYNC, j), inlined
                last_check = self.last_check_fifo
                delta = j - last_check[SYNC]
                if delta < 0:
                    delta = -delta
                if delta >= self.fifo_expire[SYNC]:
                    last_check[SYNC] = j
                    fifo = fifos[SYNC]
                    expired = bool(fifo) and j > fifo[next(iter(fifo))].sched.expires
                checked = True
                # _can_anticipate, inlined (antic_status is OFF or FINISHED here)
                if not expired and self.io_context is not None \
                        and status != ANTIC_FINISHED and not self._can_break_anticipation(rq, j):
                    self._antic_waitreq(now)
                    return 0
            if not expired and rq is not None:
                if reads and not writes:
                    self.current_batch_expires = j + self.batch_expire[SYNC]
                chosen = True
        if not expired and not chosen:
            # start a new batch
            checked = False
            if reads and not (writes and d == SYNC):
                if d == ASYNC:
                    self.changed_batch = True
                d = self.batch_data_dir = SYNC
                fifo = fifos[SYNC]
                rq = fifo[next(iter(fifo))]
                self.last_check_fifo[SYNC] = j
            else:      # writes pending: after a read batch, or no reads at all
                if d == SYNC:
                    self.changed_batch = True
                    self.new_batch = False
                d = self.batch_data_dir = ASYNC
                self.current_write_count = self.write_batch_count
                self.write_batch_idled = False
                if self._v2632:
                    fifo = fifos[ASYNC]
                    rq = fifo[next(iter(fifo))]
                    self.last_check_fifo[ASYNC] = j
                else:
                    rq = self.next_rq[ASYNC]
            chosen = True
        if chosen and not checked:
            # _fifo_expired(d, j), inlined. Skipped when the sync check above ran
            # for this same batch: it set last_check_fifo[SYNC] = j (so this one
            # would return early) or found delta < fifo_expire (same answer again)
            last_check = self.last_check_fifo
            delta = j - last_check[d]
            if delta < 0:
                delta = -delta
            if delta >= self.fifo_expire[d]:
                last_check[d] = j
                fifo = fifos[d]
                if fifo and j > fifo[next(iter(fifo))].sched.expires:
                    expired = True
        if expired:
            fifo = fifos[d]
            rq = fifo[next(iter(fifo))]
        if self.changed_batch:
            if self.nr_dispatched:
                return 0                      # let the previous batch drain first
            if d == ASYNC:
                self.current_batch_expires = j + self.batch_expire[ASYNC]
            else:
                self.new_batch = True         # read batch clock starts at 1st completion
            self.changed_batch = False
        # _move(rq), inlined
        if status != ANTIC_OFF:
            # antic_status is unchanged since read above: FINISHED here, where
            # _antic_stop does nothing
            self.antic_status = ANTIC_OFF
        node = rq.sched
        d = node.is_sync
        self.last_sector[d] = rq.sector + rq.nr_sectors
        aic = node.aic
        if d:
            self.io_context = aic
        else:
            self.io_context = None
            if self.current_write_count:
                self.current_write_count -= 1
        self.ioc_finished = False
        tree = self._tree[d]
        keys = tree.keys
        rqs = tree.rqs
        i = bisect_left(keys, node.key)
        n = len(rqs)
        if n == 1:
            self.next_rq[d] = None
        else:
            self.next_rq[d] = self._choose(rqs[i + 1] if i + 1 < n else rqs[0],
                                           rqs[i - 1] if i > 0 else None, d)
        aic.nr_queued -= 1
        del fifos[d][node.slot]
        del keys[i]
        del rqs[i]
        self.dq.add_sorted(rq)
        aic.nr_dispatched += 1
        self.nr_dispatched += 1
        return 1

    def activate(self, rq, now: float) -> None:
        """``as_activate_request``: the driver took it; no longer on the dispatch list."""
        rq.sched.aic.nr_dispatched -= 1

    def completed(self, rq, now: float) -> None:
        """``as_completed_request``: batch bookkeeping, anticipation timing, context."""
        node = rq.sched
        self._jnow = now
        self._j = j = int(now * self.hz + _EPS)
        if self.changed_batch and self.nr_dispatched == 1:
            if self._v2632:
                self.current_batch_expires = j + self.batch_expire[self.batch_data_dir]
            self.kick_queue = True
            self.changed_batch = False
            if self.batch_data_dir == SYNC:
                self.new_batch = True
        self.nr_dispatched -= 1
        if self.new_batch and self.batch_data_dir == node.is_sync:
            self._update_write_batch(j)
            self.current_batch_expires = j + self.batch_expire[SYNC]
            self.new_batch = False
        aic = node.aic
        if self.io_context is aic:
            self.antic_start = j
            self.ioc_finished = True
            if self.antic_status == ANTIC_WAIT_REQ:
                self._antic_waitnext(now)
        # as_put_io_context
        if node.is_sync:
            aic.iorunning = True
            aic.last_end_request = j

    def former(self, rq):
        node = rq.sched
        if node is None:
            return None
        return self._tree[node.is_sync].predecessor(node.key)

    def latter(self, rq):
        node = rq.sched
        if node is None:
            return None
        return self._tree[node.is_sync].successor(node.key)

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
        return list(self._fifo[SYNC if sync else ASYNC].values())
