"""CFQ, the time-sliced Completely Fair Queueing elevator of Linux 2.6.18 (block/cfq-iosched.c).

Source: block/cfq-iosched.c and include/linux/ioprio.h of Linux 2.6.18; the
code names the kernel functions it follows (cfq_dispatch_requests(),
cfq_select_queue(), cfq_arm_slice_timer(), cfq_should_preempt(), ...). In short:

* Every process has a *sync* queue (its reads); *async* requests (writes) go to
  a queue shared by all processes of the same I/O priority (class and level).
  Each queue keeps its requests in a sector-sorted tree, a FIFO, and a
  ``next_crq`` chosen AS-style (forward distance from the head, short backward
  seeks allowed at ``back_seek_penalty`` times the cost).
* Queues with requests ("busy") sit on round-robin lists: ``rr_list[level]``
  for best-effort queues without requests at the device (sorted by when they
  were last serviced, never-serviced "new" queues first), ``busy_rr`` for
  best-effort queues with requests at the device, ``cur_rr`` for RT queues and
  for the level being served, ``idle_rr`` for the IDLE class. Levels are
  spliced into ``cur_rr`` in the pattern 0 | 0,1 | 0,1,2 | ... | 0..7.
* The first queue of ``cur_rr`` (else of ``busy_rr``; the IDLE class only when
  nothing else waits and 100 ms after the last non-idle completion) becomes
  active for a *slice*: ``slice_sync``/``slice_async`` scaled by level
  (``base + base/5 * (4 - level)``), started at its first dispatch. A dispatch
  round moves up to ``quantum`` requests from it (IDLE class: 1), taking the
  FIFO head instead of ``next_crq`` once per slice if it expired.
* When the active sync queue runs dry inside its slice, CFQ *idles* up to
  ``slice_idle`` for that process's next request (2 ms for seeky processes)
  if the process's idle window is on: it is turned off when its mean think
  time exceeds ``slice_idle`` or (with command queueing detected) it seeks.
* An async queue's slice also ends after ``2*slice_async_rq*(8-level)``
  requests; a queue without idle window ends its slice after each round.

2.6.18 oddities reproduced on purpose (each is marked ``2.6.18:`` below):

* CFQ's sync/async split uses ``rq_data_dir`` (READ/WRITE), so the ``rw ==
  WRITE_SYNC`` test in ``cfq_queue_pid`` never holds: every write is async.
* ``cfq_should_preempt`` tests ``wait_request`` on the *new* queue, a flag only
  the active queue ever carries, so a new sync request preempts only an
  IDLE-class slice; the "sync preempts async" rule after it is unreachable
  (fixed in 2.6.24, which tests the active queue).
* A preempted queue is put *before the last entry* of its list
  (``list_add_tail(.., list->prev)``), not at the front as the comment says.
* ``cfq_preempt_queue`` gives the new queue its leftover slice, then
  ``__cfq_set_active_queue`` clears ``slice_end`` again, so it gets a full
  slice from its first dispatch.
* ``cfq_arm_slice_timer`` computes ``min(slice_end - 1, slice_idle)`` with an
  absolute ``slice_end``; on a running system that is always ``slice_idle``.
* There is no ``allow_merge`` hook before 2.6.20: the block layer's one-hit
  cache and back-merge hash may merge bios of different processes; CFQ's own
  front-merge lookup searches only the submitting process's queue (for a
  write bio: the async queue of its priority).

All times inside are integer jiffies at the run's HZ, as in the kernel.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import compress

from blksim.block.elevator import Elevator, Tunable, kernel_version, msecs_to_jiffies
from blksim.block.sorttree import SectorTree
from blksim.block.request import (IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE, IOPRIO_CLASS_RT,
                         IOPRIO_CLASS_SHIFT)

UINT_MAX = 2**32 - 1
CFQ_SLICE_SCALE = 5          # 2.6.18 cfq-iosched.c
CFQ_PRIO_LISTS = 8           # IOPRIO_BE_NR
NEVER = -1                   # service_last of a queue never serviced (the kernel's 0)
_LEVELS = range(CFQ_PRIO_LISTS)
_LEVEL_MASK = (1 << IOPRIO_CLASS_SHIFT) - 1
# The sample count of cfq_update_io_thinktime / cfq_update_io_seektime (2.6.18),
# ``samples = (7 * samples + 256) / 8``, tabulated: 0, 32, 60, ... settling at 249.
_EWMA_SAMPLES = tuple((7 * s + 256) // 8 for s in range(257))
# cfq_update_io_seektime's clamp on a new seek distance, 4 * seek_mean plus this
# slack, by the sample count before the update: 2*1024*1024 sectors while it is
# at most 60 (the first three samples), 2*1024*64 after.
_SEEK_SLACK = tuple(2 * 1024 * 1024 if s <= 60 else 2 * 1024 * 64 for s in range(257))


def _kernel_default_jiffies(hz: int) -> dict:
    """2.6.18's defaults as the kernel computes them, in jiffies (integer division of HZ).

    ``cfq_init`` raises slice_async and slice_idle to 1 jiffy where HZ makes them 0.
    """
    return {
        "fifo_expire_sync": hz // 8,
        "fifo_expire_async": hz // 4,
        "slice_sync": hz // 10,
        "slice_async": max(1, hz // 25),
        "slice_idle": max(1, hz // 125),
    }


def prio_to_slice(base: int, level: int) -> int:
    """``cfq_prio_to_slice`` (2.6.18): ``base + base/CFQ_SLICE_SCALE * (4 - level)`` jiffies."""
    return base + base // CFQ_SLICE_SCALE * (4 - level)


def prio_to_maxrq(slice_async_rq: int, level: int) -> int:
    """``cfq_prio_to_maxrq`` (2.6.18): most requests an async queue dispatches in a slice."""
    return 2 * (slice_async_rq + slice_async_rq * (CFQ_PRIO_LISTS - 1 - level))


def _next_cursors(prio: int, end: int, found: bool) -> tuple[int, int]:
    """``cur_prio``, ``cur_end_prio`` after ``cfq_get_next_prio_level`` (2.6.18) spliced
    level `prio`; `found` tells whether its search of ``cur_prio..end`` found it, else
    `prio` is the lowest non-empty level and ``cur_end_prio`` was raised past `end`."""
    if not found:
        end += 1
        if end == CFQ_PRIO_LISTS or end < prio:
            end = prio
    cur = prio + 1
    if cur > end:
        end = cur
        cur = 0
    if end == CFQ_PRIO_LISTS:
        cur = 0
        end = 0
    return cur, end


# _next_cursors(low, end, low <= end) by [end][low]: the cursors after a search
# that starts at or below the lowest non-empty level `low` (the common case).
_CURSORS_AFTER_LOW = tuple(tuple(_next_cursors(low, end, low <= end) for low in _LEVELS)
                           for end in _LEVELS)


def normalise_ioprio(value: int) -> tuple[int, int]:
    """(class, level) CFQ gives a packed ioprio (``cfq_init_prio_data``, 2.6.18).

    Class NONE (and any unknown class, which 2.6.18 logs and treats as NONE)
    becomes best-effort; the workload has already put the nice-derived level
    ``(nice + 20) / 5`` in the level bits. IDLE is forced to level 7.
    """
    cls = value >> IOPRIO_CLASS_SHIFT
    level = value & _LEVEL_MASK
    if level > 7:
        level = 7
    if cls == IOPRIO_CLASS_IDLE:
        return IOPRIO_CLASS_IDLE, 7
    if cls == IOPRIO_CLASS_RT:
        return IOPRIO_CLASS_RT, level
    return IOPRIO_CLASS_BE, level


def _stat(i: int, doc: str) -> property:
    """A read-only view of ``CfqIoContext.stats[i]``."""
    return property(lambda cic: cic.stats[i], doc=doc)


class CfqIoContext:
    """``struct cfq_io_context``: one process's view of this device.

    Its think-time and seek statistics change together, once per sync request
    (``cfq_crq_enqueued``): they are kept as one tuple, ``stats`` = (samples,
    ttime_total, seek_total, seek_mean, last_request_pos), replaced whole, and
    shown below under the kernel's names. The two EWMAs' sample counts are
    always equal, so one ``samples`` serves as both ``ttime_samples`` and
    ``seek_samples``; the mean think time is computed when asked for (the
    idle-window rule computes it in place). The kernel's ``last_queue``, written
    there and read nowhere in 2.6.18, is not kept.
    """

    __slots__ = ("pid", "alive", "ioprio", "raw_ioprio", "sync_q", "async_q", "last_end_request",
                 "stats")

    def __init__(self, pid: int, ioprio: int, j: int) -> None:
        self.pid = pid
        self.alive = True                # cic->ioc->task != NULL
        self.ioprio = ioprio
        self.raw_ioprio = -1
        self.sync_q = None
        self.async_q = None
        self.last_end_request = j        # cfq_alloc_io_context stamps jiffies
        self.stats = (0, 0, 0, 0, 0)

    samples = ttime_samples = seek_samples = _stat(0, "Samples in both EWMAs (settles at 249).")
    ttime_total = _stat(1, "Think-time EWMA total (256 times the mean).")
    seek_total = _stat(2, "Seek-distance EWMA total (256 times the mean).")
    seek_mean = _stat(3, "Mean seek distance, sectors.")
    last_request_pos = _stat(4, "End sector of the process's last sync request.")

    @property
    def ttime_mean(self) -> int:
        """Mean think time in jiffies (0 before the first sample)."""
        samples, total = self.stats[:2]
        return (total + 128) // samples if samples else 0

    def seeky(self) -> bool:
        """``CIC_SEEKY`` (2.6.18): mean seek distance above 128*1024 sectors (64 MiB)."""
        return self.stats[3] > 128 * 1024


class _Contexts(dict):
    """pid -> `CfqIoContext`. Looking up a pid without one gives `_NO_CONTEXT`,
    whose ``raw_ioprio`` no request carries: `CfqElevator.add`'s one test then
    sends both a new process and a changed priority to `CfqElevator._cic`."""

    __slots__ = ()

    def __missing__(self, pid):
        return _NO_CONTEXT


_NO_CONTEXT = CfqIoContext(-1, 0, 0)      # never stored, never changed
_NO_CONTEXT.raw_ioprio = None             # unequal to every request's ioprio


class CfqQueue:
    """``struct cfq_queue``: one process's sync requests, or one priority's async ones."""

    __slots__ = ("pid", "sync", "ioprio", "ioprio_class", "prio_value", "tree", "keys", "rqs",
                 "fifo", "next_crq", "dispatched", "slice_end", "slice_left", "service_last",
                 "slice_len", "fifo_ttl", "rr", "wait_request", "must_dispatch", "fifo_expire",
                 "idle_window", "prio_changed")

    def __init__(self, pid, sync: bool, prio_value: int, slice_idle: int) -> None:
        self.pid = pid                    # None for a shared async queue (CFQ_KEY_ASYNC)
        self.sync = sync                  # cfq_cfqq_class_sync
        self.prio_value = prio_value
        self.ioprio_class, self.ioprio = normalise_ioprio(prio_value)
        self.tree = SectorTree()          # requests by start sector
        self.keys = self.tree.keys        # the tree's two lists, named here for the hot paths
        self.rqs = self.tree.rqs
        self.fifo: dict = {}              # request -> jiffy it was queued, in FIFO order
        self.next_crq = None
        self.dispatched = 0               # on_dispatch[ASYNC] + on_dispatch[SYNC]
        self.slice_end = 0
        self.slice_left = 2 * slice_idle  # cfq_get_queue: "to allow preemption for a new process"
        self.service_last = NEVER
        self.slice_len = 0                # cfq_prio_to_slice of its class and level
        self.fifo_ttl = 0                 # cfq_fifo_expire[sync]; both set by the elevator
        self.rr = None                    # the round-robin list it is on, if any
        self.wait_request = False
        self.must_dispatch = False
        self.fifo_expire = False
        self.idle_window = self.ioprio_class != IOPRIO_CLASS_IDLE
        self.prio_changed = False

    @property
    def on_rr(self) -> bool:
        """``cfq_cfqq_on_rr``: on a round-robin list (exactly when it holds requests)."""
        return self.rr is not None

    def __repr__(self) -> str:
        kind = f"pid={self.pid}" if self.sync else "async"
        return f"CfqQueue({kind} class={self.ioprio_class} level={self.ioprio} queued={len(self.tree)})"


# A request's ``rq.sched`` is its ``struct cfq_rq``: the tuple (key, cfqq, cic) of
# the sector it is filed under (``rb_key``), its queue and its process's io
# context. The jiffy it was queued is its value in the queue's FIFO dict.


def _insert_by_service(lst: list, cfqq: CfqQueue) -> None:
    """Insert `cfqq` into a round-robin list kept sorted by ``service_last``
    (``cfq_resort_rr_list``): walk back from the tail, stop at a never-serviced
    queue or one serviced before this one, insert after it."""
    sl = cfqq.service_last
    i = len(lst)
    while i:
        other = lst[i - 1].service_last
        if other < sl or other == NEVER:
            break
        i -= 1
    lst.insert(i, cfqq)


class CfqElevator(Elevator):
    """The 2.6.18 CFQ. Read-only state for displays and checks: ``active_queue``,
    ``busy_queues``, ``hw_tag``, ``rq_in_driver``, ``cur_rr``, ``busy_rr``,
    ``rr_list``, ``idle_rr``; tunables in jiffies as ``slice_idle`` etc."""

    name = "cfq"
    own_backmerge_hash = True     # 2.6.18 CFQ kept its own 64-bucket back-merge hash
    uses_timers = True
    tunables = (
        Tunable("quantum", 4, "requests", 1, UINT_MAX,
                "most requests moved from one queue in one dispatch round"),
        Tunable("queued", 8, "requests", 1, UINT_MAX,
                "minimum request allocation per queue (present in 2.6.18 sysfs, unused)"),
        Tunable("fifo_expire_sync", 125, "ms", 1, UINT_MAX,
                "age after which a sync request is served out of order (once per slice); "
                "default HZ/8 jiffies", jiffies=True),
        Tunable("fifo_expire_async", 250, "ms", 1, UINT_MAX,
                "age after which an async request is served out of order (once per slice); "
                "default HZ/4 jiffies", jiffies=True),
        Tunable("back_seek_max", 16384, "KiB", 0, UINT_MAX,
                "longest backward seek preferred to a forward one"),
        Tunable("back_seek_penalty", 2, "factor", 1, UINT_MAX,
                "cost of a backward seek relative to the same forward distance"),
        Tunable("slice_sync", 100, "ms", 1, UINT_MAX,
                "base time slice of a sync queue (scaled by level); default HZ/10 jiffies",
                jiffies=True),
        Tunable("slice_async", 40, "ms", 1, UINT_MAX,
                "base time slice of an async queue (scaled by level); default HZ/25 jiffies",
                jiffies=True),
        Tunable("slice_async_rq", 2, "requests", 1, UINT_MAX,
                "scales the most requests an async queue dispatches in a slice"),
        Tunable("slice_idle", 8, "ms", 0, UINT_MAX,
                "how long to wait for a process's next sync request (0 = never idle); "
                "default HZ/125 jiffies", jiffies=True),
    )

    def __init__(self, dispatch_queue, params=None, hz: int = 250) -> None:
        if not isinstance(hz, int) or isinstance(hz, bool) or hz <= 0:
            raise ValueError(f"hz must be a positive whole number, got {hz!r}")
        super().__init__(dispatch_queue, params, hz)
        given = params or {}
        p = self.params
        defaults = _kernel_default_jiffies(hz)

        def jiff(name: str) -> int:
            # An unset tunable keeps the kernel's HZ-derived default; a value
            # written through sysfs goes through msecs_to_jiffies (rounds up).
            if name in given:
                return msecs_to_jiffies(p[name], hz)
            return defaults[name]

        self.quantum = p["quantum"]
        self.fifo_expire = (jiff("fifo_expire_async"), jiff("fifo_expire_sync"))
        self.back_max = p["back_seek_max"] * 2          # KiB -> sectors
        self.back_penalty = p["back_seek_penalty"]
        self.slice = (jiff("slice_async"), jiff("slice_sync"))
        self.slice_async_rq = p["slice_async_rq"]
        self.slice_idle = jiff("slice_idle")
        # cfq_prio_to_slice / cfq_prio_to_maxrq per level, computed once
        self._slice_of = tuple(tuple(prio_to_slice(self.slice[s], lv) for lv in range(8))
                               for s in (0, 1))
        self._maxrq_of = tuple(prio_to_maxrq(self.slice_async_rq, lv) for lv in range(8))
        self.idle_grace = hz // 10                       # CFQ_IDLE_GRACE
        self.seeky_idle = msecs_to_jiffies(2, hz)        # idle cap for seeky processes
        self._ttime_cap = 2 * self.slice_idle            # think times are capped here
        # cfq_update_idle_window's "mean think time <= slice_idle", with the mean
        # (ttime_total + 128) / samples, is ttime_total below this, by samples
        self._idle_ttime_below = tuple((self.slice_idle + 1) * s - 128 for s in range(257))

        self.rr_list = [[] for _ in range(CFQ_PRIO_LISTS)]
        self.busy_rr: list = []
        self.cur_rr: list = []
        self.idle_rr: list = []
        self.busy_queues = 0
        self._cursors = (0, 0)                           # (cur_prio, cur_end_prio)
        self.active_queue: CfqQueue | None = None
        self.active_cic: CfqIoContext | None = None
        self.dispatch_slice = 0
        self.last_sector = 0
        # 2.6.18 zeroes last_end_request; a kernel that has been up a while has
        # jiffies far past it, so the idle-class grace starts out elapsed.
        self.last_end_request = -self.idle_grace
        self.rq_in_driver = 0
        self.hw_tag = False

        self._cics: dict[int, CfqIoContext] = _Contexts()
        self._async: dict[int, CfqQueue] = {}
        self.idle_slice_timer: int | None = None        # expiry jiffy, or None
        self.idle_class_timer: int | None = None

    @classmethod
    def create(cls, dispatch_queue, params=None, hz: int = 250,
               kernel: str = "2.6.18") -> "CfqElevator":
        """Build CFQ for a run of kernel `kernel`.

        Only the 2.6.18 algorithm (per-priority round-robin lists, era (a)) is
        modelled; later kernels get it too (their service-tree CFQ is not
        modelled). Kernels before 2.6.18 are refused, as deadline does.
        """
        if kernel_version(kernel) < (2, 6, 18):
            raise ValueError(f"cfq is modelled from kernel 2.6.18 on, got {kernel!r}; valid: 2.6.18")
        return cls(dispatch_queue, params, hz=hz)

    cur_prio = property(lambda self: self._cursors[0],
                        doc="The first best-effort level cfq_get_next_prio_level searches next.")
    cur_end_prio = property(lambda self: self._cursors[1],
                            doc="The last level it searches before raising its range.")

    # ------------------------------------------------------------------ helpers
    def _jiffies(self, now: float) -> int:
        return int(now * self.hz + 1e-9)

    def _set_wakeup(self) -> None:
        a = self.idle_slice_timer
        b = self.idle_class_timer
        if a is None:
            due = b
        elif b is None or a <= b:
            due = a
        else:
            due = b
        self.wakeup_at = None if due is None else due / self.hz

    def _del_idle_slice_timer(self) -> bool:
        """``del_timer(&idle_slice_timer)``: True if it was pending."""
        if self.idle_slice_timer is None:
            return False
        self.idle_slice_timer = None
        self._set_wakeup()
        return True

    def _schedule_dispatch(self) -> None:
        """``cfq_schedule_dispatch``: kick the queue (kblockd) if any queue is busy."""
        if self.busy_queues:
            self.kick_queue = True

    def prio_slice(self, cfqq: CfqQueue) -> int:
        """The slice `cfqq` gets, in jiffies (``cfq_prio_to_slice``)."""
        return self._slice_of[1 if cfqq.sync else 0][cfqq.ioprio]

    def _choose_req(self, rq1, rq2):
        """``cfq_choose_req`` (lifted from AS): the one of two requests best served next.

        The kernel first prefers a sync request over an async one; every request
        of one queue has the queue's sync-ness, so that test never decides here.
        """
        if rq1 is None or rq1 is rq2:
            return rq2
        if rq2 is None:
            return rq1
        last = self.last_sector
        back_max = self.back_max
        s1 = rq1.sector
        s2 = rq2.sector
        wrap1 = wrap2 = False
        if s1 >= last:
            d1 = s1 - last
        elif s1 + back_max >= last:
            d1 = (last - s1) * self.back_penalty
        else:
            d1 = 0
            wrap1 = True
        if s2 >= last:
            d2 = s2 - last
        elif s2 + back_max >= last:
            d2 = (last - s2) * self.back_penalty
        else:
            d2 = 0
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
        return rq1 if s1 <= s2 else rq2   # both behind: the one further back first

    def _find_next_crq(self, cfqq: CfqQueue, last):
        """``cfq_find_next_crq``: choose between `last`'s successor (wrapping to the
        first) and its predecessor in the queue's sort tree."""
        tree = cfqq.tree
        keys = tree.keys
        rqs = tree.rqs
        i = bisect_left(keys, last.sched[0])
        n = len(keys)
        if i + 1 < n:
            nxt = rqs[i + 1]
        elif i != 0:
            nxt = rqs[0]
        else:
            nxt = None
        prev = rqs[i - 1] if i > 0 else None
        return self._choose_req(nxt, prev)

    # ------------------------------------------------------------------ round-robin lists
    def _resort_rr_list(self, cfqq: CfqQueue, preempted: bool) -> None:
        """``cfq_resort_rr_list`` (2.6.18)."""
        old = cfqq.rr
        if old is not None:
            old.remove(cfqq)
        cls = cfqq.ioprio_class
        if cls == IOPRIO_CLASS_RT:
            lst = self.cur_rr
        elif cls == IOPRIO_CLASS_IDLE:
            lst = self.idle_rr
        elif cfqq.dispatched:
            # requests in flight: not selectable from rr_list until they finish
            lst = self.busy_rr
        else:
            lst = self.rr_list[cfqq.ioprio]
        cfqq.rr = lst
        if preempted:
            # 2.6.18: list_add_tail(&cfqq->cfq_list, list->prev) puts it before the
            # last entry (or alone in an empty list), despite the "add to front" comment.
            if lst:
                lst.insert(len(lst) - 1, cfqq)
            else:
                lst.append(cfqq)
            return
        if lst is self.busy_rr or not lst:
            lst.append(cfqq)
        else:
            _insert_by_service(lst, cfqq)

    def _add_cfqq_rr(self, cfqq: CfqQueue) -> None:
        self.busy_queues += 1
        self._resort_rr_list(cfqq, False)

    def _del_cfqq_rr(self, cfqq: CfqQueue) -> None:
        cfqq.rr.remove(cfqq)
        cfqq.rr = None
        self.busy_queues -= 1

    def _get_next_prio_level(self) -> int:
        """``cfq_get_next_prio_level``: splice the next best-effort level into cur_rr
        in the pattern 0 | 0,1 | 0,1,2 | ... | 0..7.

        The kernel searches ``cur_prio..cur_end_prio``, then raises ``cur_end_prio``
        one level at a time (searching ``0..cur_end_prio``), wrapping to 0 at 8 and
        giving up at the second wrap. With L the lowest non-empty level, that walk
        ends at L with ``cur_end_prio`` = max(cur_end_prio + 1, L) (just L after a
        wrap); with every level empty it ends with both cursors at 0. Computed
        directly here rather than walked.

        Like the kernel's, its callers call it only when cur_rr is empty: the
        level's list (which its queues' ``rr`` already names) becomes cur_rr and
        the empty one takes its place (``list_splice_init``).
        """
        rr_list = self.rr_list
        low = next(compress(_LEVELS, rr_list), -1)     # the lowest non-empty level
        if low < 0:
            self._cursors = (0, 0)            # every level empty
            return -1
        cur, end = self._cursors
        if low >= cur:
            # levels cur..low-1 are empty: the search of cur..end finds low if it
            # reaches it (the cursors that follow are tabulated)
            self._cursors = _CURSORS_AFTER_LOW[end][low]
        else:
            prio = next(compress(range(cur, end + 1), rr_list[cur:end + 1]), -1)
            if prio >= 0:
                low = prio                    # found between the cursors
                self._cursors = _next_cursors(prio, end, True)
            else:
                self._cursors = _next_cursors(low, end, False)
        rr_list[low], self.cur_rr = self.cur_rr, rr_list[low]    # the level spliced
        return low

    # ------------------------------------------------------------------ slices
    def _set_active_queue_to(self, cfqq, j: int) -> None:
        """``__cfq_set_active_queue``."""
        if cfqq is not None:
            if self.idle_class_timer is not None:
                self.idle_class_timer = None
                self._set_wakeup()
            cfqq.slice_end = 0
            cfqq.slice_left = 0
            cfqq.fifo_expire = False
        self.active_queue = cfqq

    def _slice_expired(self, preempted: bool, j: int) -> None:
        """``cfq_slice_expired`` / ``__cfq_slice_expired`` for the active queue."""
        cfqq = self.active_queue
        if cfqq is None:
            return
        self._expire_queue(cfqq, preempted, j)

    def _expire_queue(self, cfqq: CfqQueue, preempted: bool, j: int) -> None:
        if cfqq.wait_request:
            self._del_idle_slice_timer()
        if not preempted and not cfqq.dispatched:
            cfqq.service_last = j
            self._schedule_dispatch()
        cfqq.must_dispatch = False
        cfqq.wait_request = False
        cfqq.slice_left = cfqq.slice_end - j if cfqq.slice_end > j else 0
        if cfqq.rr is not None:
            self._resort_rr_list(cfqq, preempted)
        if cfqq is self.active_queue:
            self.active_queue = None
        self.active_cic = None
        self.dispatch_slice = 0

    def _set_active_queue(self, j: int):
        """``cfq_set_active_queue``: cur_rr (splicing the next level), then busy_rr,
        then the IDLE class after its grace period (else arm the grace timer)."""
        if self.cur_rr or self._get_next_prio_level() != -1:
            cfqq = self.cur_rr[0]           # (re-read: the level search may replace it)
        elif self.busy_rr:
            cfqq = self.busy_rr[0]
        elif self.idle_rr:
            end = self.last_end_request + self.idle_grace
            if j >= end:
                cfqq = self.idle_rr[0]
            else:
                cfqq = None
                self.idle_class_timer = end
                self._set_wakeup()
        else:
            self.active_queue = None
            return None
        if cfqq is not None:              # __cfq_set_active_queue, inlined
            if self.idle_class_timer is not None:
                self.idle_class_timer = None
                self._set_wakeup()
            cfqq.slice_end = 0
            cfqq.slice_left = 0
            cfqq.fifo_expire = False
        self.active_queue = cfqq
        return cfqq

    def _arm_slice_timer(self, cfqq: CfqQueue, j: int) -> bool:
        """``cfq_arm_slice_timer``: idle for the active sync queue's next request."""
        if not self.slice_idle or not cfqq.idle_window:
            return False
        cic = self.active_cic
        if cic is None or not cic.alive:
            return False                  # task has exited, don't wait
        cfqq.must_dispatch = True
        cfqq.wait_request = True
        # 2.6.18 takes min(slice_end - 1, slice_idle) with an absolute slice_end:
        # on a running system that is slice_idle.
        sl = self.slice_idle
        if cic.stats[0] > 80 and cic.seeky():
            sl = min(sl, self.seeky_idle)
        self.idle_slice_timer = j + sl
        self._set_wakeup()
        return True

    # ------------------------------------------------------------------ moving requests
    def _file(self, rq, cfqq: CfqQueue, cic: CfqIoContext) -> None:
        """``cfq_add_crq_rb``: file under its start sector in the queue's tree
        (dispatching an alias first), put the queue on the round-robin lists,
        reconsider ``next_crq``."""
        tree = cfqq.tree
        key = rq.sector
        rq.sched = (key, cfqq, cic)
        alias = tree.add(key, rq)
        while alias is not None:
            self._dispatch_insert(alias)
            alias = tree.add(key, rq)
        if cfqq.rr is None:
            self._add_cfqq_rr(cfqq)
        cfqq.next_crq = self._choose_req(cfqq.next_crq, rq)

    def _unfile(self, rq) -> None:
        """``cfq_del_crq_rb``: out of the tree (advancing ``next_crq`` if it pointed here)."""
        key, cfqq, _ = rq.sched
        if cfqq.next_crq is rq:
            cfqq.next_crq = self._find_next_crq(cfqq, rq)
        cfqq.tree.remove(key)
        if cfqq.rr is not None and not cfqq.tree.keys:
            self._del_cfqq_rr(cfqq)

    def _dispatch_insert(self, rq) -> None:
        """``cfq_dispatch_insert``: onto the dispatch list in one-way sorted order."""
        key, cfqq, _ = rq.sched
        cfqq.next_crq = self._find_next_crq(cfqq, rq)
        del cfqq.fifo[rq]
        # cfq_remove_request -> cfq_del_crq_rb (next_crq already moved past rq)
        tree = cfqq.tree
        tree.remove(key)
        if not tree.keys and cfqq.rr is not None:
            self._del_cfqq_rr(cfqq)
        cfqq.dispatched += 1
        dq = self.dq
        dq.add_sorted(rq)
        tail = dq[-1]
        self.last_sector = tail.sector + tail.nr_sectors

    def _check_fifo(self, cfqq: CfqQueue, j: int):
        """``cfq_check_fifo`` (2.6.18): the FIFO head if it expired, at most once per slice."""
        fifo = cfqq.fifo
        if cfqq.fifo_expire or not fifo:
            return None
        head = next(iter(fifo))
        if j > fifo[head] + cfqq.fifo_ttl:              # cfq_fifo_expire[sync]
            cfqq.fifo_expire = True
            return head
        return None

    def _forced_dispatch(self, j: int) -> int:
        dispatched = 0
        lists = list(self.rr_list) + [self.busy_rr, self.cur_rr, self.idle_rr]
        for lst in lists:
            for cfqq in list(lst):
                while cfqq.next_crq is not None:
                    self._dispatch_insert(cfqq.next_crq)
                    dispatched += 1
        self._slice_expired(False, j)
        return dispatched

    # ------------------------------------------------------------------ queues and contexts
    def _get_queue(self, cic: CfqIoContext, sync: bool) -> CfqQueue:
        """``cfq_get_queue``: the process's sync queue, or its priority's async queue."""
        if sync:
            cfqq = cic.sync_q
            if cfqq is None:
                cfqq = self._new_queue(cic.pid, True, cic.ioprio)
                cic.sync_q = cfqq
            elif cfqq.prio_changed:
                self._init_prio_data(cfqq, cic.ioprio)
            return cfqq
        cfqq = cic.async_q
        if cfqq is None:
            key = cic.ioprio
            cfqq = self._async.get(key)
            if cfqq is None:
                cfqq = self._new_queue(None, False, key)
                self._async[key] = cfqq
            cic.async_q = cfqq
        return cfqq

    def _new_queue(self, pid, sync: bool, value: int) -> CfqQueue:
        cfqq = CfqQueue(pid, sync, value, self.slice_idle)
        cfqq.slice_len = self._slice_of[sync][cfqq.ioprio]
        cfqq.fifo_ttl = self.fifo_expire[sync]
        return cfqq

    def _init_prio_data(self, cfqq: CfqQueue, value: int) -> None:
        """``cfq_init_prio_data`` after the process's priority changed."""
        cfqq.prio_value = value
        cfqq.ioprio_class, cfqq.ioprio = normalise_ioprio(value)
        cfqq.slice_len = self._slice_of[cfqq.sync][cfqq.ioprio]
        if cfqq.ioprio_class == IOPRIO_CLASS_IDLE:
            cfqq.idle_window = False
        if cfqq.rr is not None:
            self._resort_rr_list(cfqq, False)
        cfqq.prio_changed = False

    def _cic(self, rq, j: int) -> CfqIoContext:
        pid = rq.pid
        cic = self._cics.get(pid)
        cls, level = normalise_ioprio(rq.ioprio)
        value = (cls << IOPRIO_CLASS_SHIFT) | level
        if cic is None:
            cic = CfqIoContext(pid, value, j)
            self._cics[pid] = cic
        cic.raw_ioprio = rq.ioprio
        if cic.ioprio != value:
            # changed_ioprio: a new async queue; the sync queue re-reads its priority
            cic.ioprio = value
            cic.async_q = None
            if cic.sync_q is not None:
                cic.sync_q.prio_changed = True
        return cic

    def _should_preempt(self, new: CfqQueue, rq) -> bool:
        """``cfq_should_preempt`` (2.6.18), including its test of ``wait_request`` on
        the *new* queue, which never holds: only an IDLE-class slice is preempted."""
        if new.ioprio_class == IOPRIO_CLASS_IDLE:
            return False
        active = self.active_queue
        if active is None:
            return False
        if active.ioprio_class == IOPRIO_CLASS_IDLE:
            return True
        if not new.wait_request:
            return False
        if new.slice_left < self.slice_idle:
            return False
        if not rq.write and not active.sync:
            return True
        return False

    def _preempt_queue(self, cfqq: CfqQueue, j: int) -> None:
        """``cfq_preempt_queue`` (2.6.18)."""
        for q in list(self.cur_rr):
            self._resort_rr_list(q, True)
        if not cfqq.slice_left:
            cfqq.slice_left = self.prio_slice(cfqq) // 2
        cfqq.slice_end = cfqq.slice_left + j
        self._slice_expired(True, j)
        self._set_active_queue_to(cfqq, j)   # 2.6.18: clears the slice_end just set

    # ------------------------------------------------------------------ hooks
    def add(self, rq, now: float) -> None:
        """``cfq_insert_request`` then ``cfq_crq_enqueued``."""
        j = int(now * self.hz + 1e-9)
        cic = self._cics[rq.pid]
        if cic.raw_ioprio != rq.ioprio:
            cic = self._cic(rq, j)            # a new process, or a new priority
        # 2.6.18: cfq_queue_pid(tsk, rq_data_dir(rq)): the async queue for any write
        cfqq = cic.async_q if rq.write else cic.sync_q
        if cfqq is None or cfqq.prio_changed:
            cfqq = self._get_queue(cic, not rq.write)
        sector = rq.sector
        rq.sched = (sector, cfqq, cic)
        cfqq.fifo[rq] = j
        keys = cfqq.keys
        if not keys:
            # cfq_add_crq_rb into an empty tree: no alias, next_crq is this request,
            # and the queue joins the round-robin lists (_add_cfqq_rr)
            keys.append(sector)
            cfqq.rqs.append(rq)
            cfqq.next_crq = rq
            self.busy_queues = self.busy_queues + 1
            if cfqq.ioprio_class == IOPRIO_CLASS_BE and not cfqq.dispatched:
                # _resort_rr_list(cfqq, False) for this case: into rr_list[level]
                lst = cfqq.rr = self.rr_list[cfqq.ioprio]
                if lst:
                    _insert_by_service(lst, cfqq)
                else:
                    lst.append(cfqq)
            else:
                self._resort_rr_list(cfqq, False)
        else:
            # cfq_add_crq_rb, inlined for the common case (no alias, see _file); a queue
            # holding requests is on its round-robin list already
            i = bisect_left(keys, sector)
            if i < len(keys) and keys[i] == sector:
                self._file(rq, cfqq, cic)
            else:
                keys.insert(i, sector)
                cfqq.rqs.insert(i, rq)
                cfqq.next_crq = self._choose_req(cfqq.next_crq, rq)

        if rq.write:
            # a sync process issued an async request while CFQ idles for it
            if cic is self.active_cic and self._del_idle_slice_timer():
                self._slice_expired(False, j)
                self.kick_queue = True
            return

        old, ttotal, stotal, seek_mean, last = cic.stats
        samples = _EWMA_SAMPLES[old]
        # cfq_update_io_thinktime (2.6.18): EWMA of the time from the process's last
        # sync completion to this sync request, capped at 2*slice_idle.
        ttime = j - cic.last_end_request
        if ttime > self._ttime_cap:
            ttime = self._ttime_cap
        elif ttime < 0:
            ttime = 0
        ttotal = (7 * ttotal + 256 * ttime) // 8

        # cfq_update_io_seektime (2.6.18): EWMA of |start - end of the last request|,
        # clamped as AS does against the odd far seek (more loosely while the first
        # samples come in).
        sdist = abs(sector - last)
        limit = seek_mean * 4 + _SEEK_SLACK[old]
        if sdist > limit:
            sdist = limit
        stotal = (7 * stotal + 256 * sdist) // 8
        seek_mean = (stotal + samples // 2) // samples
        cic.stats = (samples, ttotal, stotal, seek_mean, sector + rq.nr_sectors)

        # cfq_update_idle_window (2.6.18): off with slice_idle=0 or for a seeky process
        # on a queueing device; else on iff the mean think time (ttime_mean) fits. (Its
        # test for an exited task never holds here: an exited process's context has
        # left _cics.)
        if not self.slice_idle or (self.hw_tag and seek_mean > 128 * 1024):
            cfqq.idle_window = False
        elif samples > 80:
            cfqq.idle_window = ttotal < self._idle_ttime_below[samples]

        active = self.active_queue
        if active is None:
            return
        if cfqq is active:
            if cfqq.wait_request:
                cfqq.must_dispatch = True
                self._del_idle_slice_timer()
                self.kick_queue = True
        elif self._should_preempt(cfqq, rq):
            self._preempt_queue(cfqq, j)
            cfqq.must_dispatch = True
            self.kick_queue = True

    def dispatch(self, now: float, force: bool = False) -> int:
        """``cfq_dispatch_requests`` (2.6.18).

        ``cfq_select_queue``, ``cfq_set_active_queue`` (its common cases) and
        ``__cfq_dispatch_requests`` (with ``cfq_check_fifo``,
        ``cfq_dispatch_insert`` and the slice expiry at its end) are inlined here,
        the hot path; `_set_active_queue`, `_check_fifo`,
        `_dispatch_insert` and `_expire_queue` are the reference versions. A
        queue made active with one request and no idle window has its whole
        slice in `_lone_slice`; the common case of a disk serving many processes
        with long think times (one busy queue: no level splice either) comes
        first.
        """
        if not self.busy_queues:
            return 0
        j = int(now * self.hz + 1e-9)
        if force:
            return self._forced_dispatch(j)
        cfqq = self.active_queue
        if cfqq is None:
            if self.busy_queues == 1 and not self.cur_rr:
                rr_list = self.rr_list
                low = next(compress(_LEVELS, rr_list), -1)
                if low >= 0:
                    cfqq = rr_list[low][0]
                    if len(cfqq.keys) == 1 and not cfqq.idle_window:
                        # its whole slice is its one request: alone on its level, it
                        # leaves it (_del_cfqq_rr), and without a busy queue left the
                        # level search resets the cursors
                        cfqq.rr.clear()
                        cfqq.rr = None
                        self.busy_queues = 0
                        self._cursors = (0, 0)
                        self._lone_slice(cfqq, j)
                        return 1
                    cfqq = None
        else:
            # cfq_select_queue, for the active queue: go on with it, wait, or end its slice
            if not cfqq.must_dispatch and j > cfqq.slice_end:
                expire = True                     # slice used up
            elif cfqq.tree.keys:
                expire = False
            elif cfqq.dispatched:
                return 0                          # wait for its requests to finish
            elif cfqq.sync and self._arm_slice_timer(cfqq, j):
                return 0
            else:
                expire = True
            if expire:
                self._expire_queue(cfqq, False, j)
                cfqq = None
            else:
                # __cfq_dispatch_requests: whatever it waited for has come. (Only the
                # active queue carries these flags and only while it waits does the
                # idle timer run: a queue made active below has neither.)
                cfqq.must_dispatch = False
                cfqq.wait_request = False
                if self.idle_slice_timer is not None:
                    self._del_idle_slice_timer()
                if not cfqq.slice_end:
                    cfqq.slice_end = j + cfqq.slice_len   # its slice starts with this round
        dispatched = 0
        prev = None
        dq = self.dq
        while True:
            if cfqq is None:
                # cfq_set_active_queue
                if not self.busy_queues:
                    # Every round-robin list is empty (busy_queues counts the queues
                    # on them): cfq_get_next_prio_level finds no level and resets
                    # its cursors; there is no queue to make active.
                    self._cursors = (0, 0)
                    break
                if self.cur_rr or self._get_next_prio_level() >= 0:
                    cfqq = self.cur_rr[0]
                    if cfqq is prev:
                        # the queue whose slice just ended: active again, its slice
                        # starting at its next dispatch (another round, not this one)
                        self._set_active_queue_to(cfqq, j)
                        break
                    if len(cfqq.keys) == 1 and not cfqq.idle_window:
                        # its whole slice is its one request (see _lone_slice)
                        cfqq.rr.remove(cfqq)          # _del_cfqq_rr
                        cfqq.rr = None
                        self.busy_queues = self.busy_queues - 1
                        self._lone_slice(cfqq, j)
                        dispatched += 1
                        prev = cfqq
                        cfqq = None
                        continue
                    # __cfq_set_active_queue; the slice starts with the round below.
                    # (active_queue and slice_left, which it sets too, are set when
                    # the round ends: nothing looks at them meanwhile.)
                    if self.idle_class_timer is not None:
                        self.idle_class_timer = None
                        self._set_wakeup()
                    cfqq.slice_end = j + cfqq.slice_len
                    cfqq.fifo_expire = False
                else:
                    # busy_rr or the IDLE class: the general version (its own level
                    # search finds nothing again and changes nothing)
                    cfqq = self._set_active_queue(j)
                    if cfqq is None or cfqq is prev:
                        break
                    cfqq.slice_end = j + cfqq.slice_len

            # __cfq_dispatch_requests: up to quantum requests (IDLE class: 1) from cfqq
            keys = cfqq.keys
            rqs = cfqq.rqs
            fifo = cfqq.fifo
            before = dispatched           # this round moves dispatched - before
            while True:
                rq = cfqq.next_crq
                if len(keys) == 1:
                    # Its only request, the FIFO head too (cfq_check_fifo can only
                    # flag it): no next_crq to search for, and the queue leaves its
                    # round-robin list (_del_cfqq_rr).
                    if not cfqq.fifo_expire and j > fifo[rq] + cfqq.fifo_ttl:
                        cfqq.fifo_expire = True
                    cfqq.next_crq = None
                    del keys[0]
                    del rqs[0]
                    cfqq.rr.remove(cfqq)
                    cfqq.rr = None
                    self.busy_queues = self.busy_queues - 1
                else:
                    # cfq_check_fifo: the FIFO head if it expired, at most once per slice
                    if not cfqq.fifo_expire:
                        head = next(iter(fifo))
                        if j > fifo[head] + cfqq.fifo_ttl:
                            cfqq.fifo_expire = True
                            rq = head
                    # cfq_dispatch_insert: one binary search finds both next_crq's
                    # neighbours and the slot to remove; cfq_find_next_crq takes the
                    # successor (wrapping to the first) or the predecessor
                    i = bisect_left(keys, rq.sched[0])
                    nxt = rqs[i + 1] if i + 1 < len(keys) else rqs[0]
                    cfqq.next_crq = self._choose_req(nxt, rqs[i - 1] if i > 0 else None)
                    del keys[i]
                    del rqs[i]
                    if self.active_cic is None:
                        self.active_cic = rq.sched[2]
                del fifo[rq]
                cfqq.dispatched = cfqq.dispatched + 1
                dq.add_sorted(rq)
                tail = dq[-1]
                self.last_sector = tail.sector + tail.nr_sectors
                dispatched += 1
                if not keys or dispatched - before >= (1 if cfqq.ioprio_class == IOPRIO_CLASS_IDLE
                                                       else self.quantum):
                    break
            if cfqq.idle_window and cfqq.ioprio_class != IOPRIO_CLASS_IDLE:
                ds = self.dispatch_slice + dispatched - before
                if cfqq.sync or ds < self._maxrq_of[cfqq.ioprio]:
                    # the slice goes on: idle window, queue active
                    self.dispatch_slice = ds
                    self.active_queue = cfqq
                    cfqq.slice_left = 0
                    if self.active_cic is None:
                        # the slice's first request was the round's one (several
                        # are seen to above)
                        self.active_cic = rq.sched[2]
                    break
            # cfq_slice_expired(cfqd, 0) of cfqq, the active queue, after a round with
            # no idle window, of the IDLE class or reaching an async queue's maxrq:
            # _expire_queue with wait_request and must_dispatch clear and requests of
            # cfqq in flight (just dispatched), so neither the idle timer nor
            # service_last is touched.
            left = cfqq.slice_end - j
            cfqq.slice_left = left if left > 0 else 0
            if cfqq.rr is not None:
                self._resort_rr_list(cfqq, False)
            self.active_queue = None
            self.active_cic = None
            self.dispatch_slice = 0
            prev = cfqq
            cfqq = None
        return dispatched

    def _lone_slice(self, cfqq: CfqQueue, j: int) -> None:
        """A whole slice of `dispatch` for a queue about to be made active that holds
        one request and has no idle window (the caller has taken it off its list):
        it dispatches that request and expires at once.

        What the general path goes through and leaves as it was is skipped:
        active_queue, active_cic and dispatch_slice (set, then cleared by the
        expiry; no queue is active before) and the flags and idle timer only an
        active queue has. Left: __cfq_set_active_queue and cfq_check_fifo on its
        one request, cfq_dispatch_insert, the slice starting and then expiring
        with all of it left (its request is in flight: it stays off the lists)."""
        rq = cfqq.next_crq
        if self.idle_class_timer is not None:
            self.idle_class_timer = None
            self._set_wakeup()
        cfqq.fifo_expire = j > cfqq.fifo[rq] + cfqq.fifo_ttl
        cfqq.next_crq = None
        del cfqq.keys[0]
        del cfqq.rqs[0]
        del cfqq.fifo[rq]
        cfqq.dispatched = cfqq.dispatched + 1
        self.dq.add_sorted(rq)
        tail = self.dq[-1]
        self.last_sector = tail.sector + tail.nr_sectors
        cfqq.slice_end = j + cfqq.slice_len
        cfqq.slice_left = cfqq.slice_len      # slice_end - j (never negative)

    def merge_candidate(self, bio, now: float):
        """``cfq_find_rq_fmerge``: a request starting at the bio's end, in the
        submitter's own queue only (2.6.18 looks up the queue by
        ``cfq_queue_pid(tsk, bio_data_dir(bio))``: reads the process's sync queue,
        writes the async queue of its priority)."""
        cic = self._cics[bio.pid]            # (a pid without a context: no queues)
        if bio.write:
            cfqq = cic.async_q
            if cfqq is None:
                return None
        else:
            cfqq = cic.sync_q
            if cfqq is None:
                return None
        if not cfqq.keys:
            return None
        return cfqq.tree.find(bio.sector + bio.nr_sectors)

    def merged(self, rq, front: bool, now: float) -> None:
        """``cfq_merged_request``: re-file after a front merge moved the start sector."""
        key, cfqq, cic = rq.sched
        if rq.sector != key:
            if cfqq.next_crq is rq:
                cfqq.next_crq = self._find_next_crq(cfqq, rq)
            cfqq.tree.remove(key)
            # cfq_reposition_crq_rb: rb_erase + re-add; the queue stays on its list
            # (it still holds this request).
            self._file(rq, cfqq, cic)

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``cfq_merged_requests``: `rq` takes `nxt`'s FIFO place if `nxt` is older,
        then `nxt` leaves the elevator."""
        self.merged(rq, False, now)
        cfqq = rq.sched[1]
        vq = nxt.sched[1]
        fifo = vq.fifo
        if vq is cfqq and fifo[nxt] < fifo[rq]:
            # rq moves to nxt's place, taking its queue jiffy (list_move)
            cfqq.fifo = {(rq if r is nxt else r): t for r, t in fifo.items() if r is not rq}
        else:
            # 2.6.18 would list_move rq into the other queue's FIFO list (no
            # allow_merge hook yet); here rq keeps its own FIFO place.
            del fifo[nxt]
        self._unfile(nxt)
        nxt.sched = None

    def former(self, rq):
        """The request before `rq` in its queue's sort tree."""
        node = rq.sched
        if node is None or not rq.in_elevator:
            return None
        return node[1].tree.predecessor(node[0])

    def latter(self, rq):
        """The request after `rq` in its queue's sort tree."""
        node = rq.sched
        if node is None or not rq.in_elevator:
            return None
        return node[1].tree.successor(node[0])

    def activate(self, rq, now: float) -> None:
        """``cfq_activate_request``: count it in the driver; detect command queueing."""
        n = self.rq_in_driver + 1
        self.rq_in_driver = n
        if n > 4:
            self.hw_tag = True

    def completed(self, rq, now: float) -> None:
        """``cfq_completed_request`` (2.6.18)."""
        node = rq.sched
        if node is None:
            return
        j = int(now * self.hz + 1e-9)
        _, cfqq, cic = node
        self.rq_in_driver = self.rq_in_driver - 1
        cfqq.dispatched = cfqq.dispatched - 1
        if cfqq.ioprio_class != IOPRIO_CLASS_IDLE:
            self.last_end_request = j
        if cfqq.rr is not None and not cfqq.dispatched:
            cfqq.service_last = j
            self._resort_rr_list(cfqq, False)
        if cfqq.sync:
            cic.last_end_request = j
        if self.active_queue is cfqq:
            if j > cfqq.slice_end:
                self._expire_queue(cfqq, False, j)
            elif cfqq.sync and not cfqq.tree.keys:
                if not self._arm_slice_timer(cfqq, j):
                    self._schedule_dispatch()

    def timer_fired(self, now: float) -> None:
        """Run whichever of the idle-slice and idle-class timers is due."""
        j = self._jiffies(now)
        t = self.idle_slice_timer
        if t is not None and t <= j:
            self.idle_slice_timer = None
            self._idle_slice_timer_fn(j)
        t = self.idle_class_timer
        if t is not None and t <= j:
            self.idle_class_timer = None
            end = self.last_end_request + self.idle_grace
            if j < end:
                self.idle_class_timer = end      # raced with a non-idle queue
            else:
                self._schedule_dispatch()
        self._set_wakeup()

    def _idle_slice_timer_fn(self, j: int) -> None:
        """``cfq_idle_slice_timer`` (2.6.18)."""
        cfqq = self.active_queue
        if cfqq is not None:
            if j <= cfqq.slice_end:
                if not self.busy_queues:
                    return                      # nobody else waits: keep the slice
                if cfqq.tree.keys:
                    cfqq.must_dispatch = True
                    self._schedule_dispatch()
                    return
        self._slice_expired(False, j)
        self._schedule_dispatch()

    def process_exited(self, pid: int, now: float) -> None:
        """``cfq_exit_io_context``: expire the process's queue if active; stop idling for it."""
        cic = self._cics.pop(pid, None)
        if cic is None:
            return
        cic.alive = False
        j = self._jiffies(now)
        for cfqq in (cic.async_q, cic.sync_q):
            if cfqq is not None and cfqq is self.active_queue:
                self._expire_queue(cfqq, False, j)
        cic.async_q = None
        cic.sync_q = None

    def empty(self) -> bool:
        """``cfq_queue_empty``: no busy queue."""
        return not self.busy_queues

    def queued(self) -> int:
        """Requests held in the queues' sort trees.

        Every queue holding requests is on exactly one round-robin list (and
        every queue on one holds requests), so these lists reach them all.
        """
        lists = [*self.rr_list, self.busy_rr, self.cur_rr, self.idle_rr]
        return sum(len(cfqq.tree) for lst in lists for cfqq in lst)

    # ------------------------------------------------------------------ introspection
    def queue_of(self, pid: int, sync: bool = True):
        """The sync (or async) queue process `pid` uses, or None."""
        cic = self._cics.get(pid)
        if cic is None:
            return None
        return cic.sync_q if sync else cic.async_q

    def context_of(self, pid: int):
        """Process `pid`'s ``cfq_io_context`` (think time, seek statistics), or None."""
        return self._cics.get(pid)
