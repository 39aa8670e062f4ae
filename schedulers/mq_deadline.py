"""mq-deadline of Linux 5.4 to 6.6 (block/mq-deadline.c): deadline for the multi-queue layer.

Per direction, requests are kept in a sort tree by start sector and in a FIFO by
arrival, each stamped with a deadline ``fifo_time = arrival + expire[dir]`` (in
jiffies). ``dispatch_request`` hands out one request at a time in *batches* of one
direction in ascending sector order; between batches it picks a direction (reads,
unless writes waited ``writes_starved`` read batches) and a starting request (the
FIFO head if its deadline has passed, else where that direction's sweep left off).
Deadlines are looked at only when a batch starts. A requeued request goes to a
dispatch list served first. Writes (and every request that is not a synchronous
read) may take at most ``async_depth`` scheduler tags (``dd_limit_depth``).

From 5.14 (modelled from 5.15) requests are kept at three levels by I/O priority
class (RT, BE, IDLE; no class counts as BE), each with its own trees, FIFOs and
dispatch list; the direction, batch and starvation counts stay queue-wide. A level
is served only when every higher level has nothing to give. From 6.0 (modelled from
6.1) a request of a lower level waiting longer than ``prio_aging_expire`` is served
first, and a higher level that still has requests *at the device* keeps lower levels
waiting (``dd_queued`` counts requests inserted and not yet completed).

Version differences (``dd_dispatch_request``, ``__dd_dispatch_request``,
``deadline_next_request``, ``dd_depth_updated`` of each line):

=========================  ======  ======  ======  ======  ======
behaviour                  5.4     5.10    5.15    6.1     6.6
=========================  ======  ======  ======  ======  ======
priority levels            no      no      yes     yes     yes
aging, in-flight blocking  no      no      no      yes     yes
the sweep goes on from     next    next    next    next    first at or
                           rq      rq      rq      rq      after the
                                                           last sector
batch of the last          write   write   last    last    last
direction first            first   first   dir     dir     dir
async_depth default        --      --      3/4 of  3/4 of  3/4 of a
                                           nr_req  nr_req  tag word
=========================  ======  ======  ======  ======  ======

"next rq" is the sort-tree successor of the request last dispatched (the other
direction's is forgotten); 5.4 and 5.10 go on with a pending write sweep before a
read one. ``async_depth`` caps the tags taken *per word* of the tag map
(`blksim.block.mq.tags`): ``3/4 * nr_requests`` (5.15, 6.1) is larger than a word of
64 tags, so it caps nothing there; 6.6 takes 3/4 of a word.

Simplifications: no zoned devices (zone write locks); an insert merge is reported as
a grown request (`blksim.block.mq.queue`).
"""

from __future__ import annotations

from collections import OrderedDict, deque

from blksim.block.elevator import Tunable, msecs_to_jiffies
from blksim.block.mq.elevator import MqElevator
from blksim.block.mq.tags import bits_per_word
from blksim.block.request import (IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE, IOPRIO_CLASS_NONE,
                                  IOPRIO_CLASS_RT, ioprio_class)
from blksim.block.sorttree import SectorMultiTree

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
_UINT_RANGE = 2**32
READ, WRITE = 0, 1
#: ioprio class -> level (``ioprio_class_to_prio``): RT 0, BE and none 1, IDLE 2.
_LEVEL = {IOPRIO_CLASS_NONE: 1, IOPRIO_CLASS_RT: 0, IOPRIO_CLASS_BE: 1, IOPRIO_CLASS_IDLE: 2}

#: Behaviour switches per line (see the module docstring).
_VARIANTS = {
    #       levels aging  cursor_pos  write_first
    "5.4":  (False, False, False, True),
    "5.10": (False, False, False, True),
    "5.15": (True, False, False, False),
    "6.1":  (True, True, False, False),
    "6.6":  (True, True, True, False),
}


class _DdRq:
    """mq-deadline's record of one request (``rq.sched``)."""

    __slots__ = ("key", "slot", "level", "dir", "inserted", "fifo_j", "start_j")

    def __init__(self) -> None:
        self.key = None          # its sort-tree key while filed
        self.slot = -1           # its FIFO slot while queued
        self.level = 1
        self.dir = READ
        self.inserted = False    # counted in ``inserted`` (rq->elv.priv[0])
        self.fifo_j = 0          # deadline, jiffies
        self.start_j = 0         # insertion, jiffies (fifo_j - expire)


class _Level:
    """One priority level (``struct dd_per_prio``)."""

    __slots__ = ("tree", "fifo", "dispatch", "next_rq", "latest_pos", "inserted",
                 "completed", "dispatched")

    def __init__(self) -> None:
        self.tree = (SectorMultiTree(), SectorMultiTree())
        self.fifo = (OrderedDict(), OrderedDict())     # slot -> request, arrival order
        self.dispatch = deque()                        # head insertions (requeues)
        self.next_rq = [None, None]
        self.latest_pos = [0, 0]
        self.inserted = 0
        self.completed = 0
        self.dispatched = 0

    def queued(self) -> int:
        """``dd_queued``: inserted and not completed (those at the device included)."""
        return self.inserted - self.completed


class MqDeadlineElevator(MqElevator):
    """mq-deadline (see the module docstring). Read-only state for displays and tests:
    ``levels`` (`_Level` per RT, BE, IDLE; one level before 5.15), ``last_dir``,
    ``batching``, ``starved``, ``async_depth``."""

    name = "mq-deadline"
    uses_merge_hash = True
    tunables = (
        Tunable("read_expire", 500, "ms", 0, INT_MAX,
                "deadline of a read, counted from its insertion", jiffies=True),
        Tunable("write_expire", 5000, "ms", 0, INT_MAX,
                "deadline of a write, counted from its insertion", jiffies=True),
        Tunable("writes_starved", 2, "count", INT_MIN, INT_MAX,
                "read batches chosen in a row while writes wait"),
        Tunable("front_merges", 1, "bool", 0, 1,
                "1 = look for a queued request starting where a bio ends"),
        Tunable("fifo_batch", 16, "requests", 0, INT_MAX,
                "most requests dispatched in one batch"),
        Tunable("async_depth", 0, "tags", 0, INT_MAX,
                "scheduler tags per tag-map word a request other than a synchronous read "
                "may take (0: the kernel's default, dd_depth_updated)", since="5.15"),
        Tunable("prio_aging_expire", 10000, "ms", 0, INT_MAX,
                "a lower priority class waiting this long is served first", jiffies=True,
                since="6.1"),
    )
    VARIANTS = tuple(_VARIANTS)
    #: The messages mq-deadline sends (``block_elv_msg``), all from
    #: ``__dd_dispatch_request`` (the direction, batch and starvation counts are
    #: queue-wide, so a batch is the queue's, whichever priority level it serves).
    events = {
        "batch_start": "a batch of one direction begins (detail: read or write) "
                       "(__dd_dispatch_request)",
        "batch_end": "the batch ends (detail: fifo_batch, the batch is full; swept, its "
                     "direction has no next request) (__dd_dispatch_request)",
        "fifo_expired": "the new batch starts at its direction's FIFO head, whose "
                        "deadline has passed (detail: read or write) "
                        "(__dd_dispatch_request, deadline_check_fifo)",
        "writes_starved": "a write batch is chosen although reads wait: writes were "
                          "passed over writes_starved times (detail: that count) "
                          "(__dd_dispatch_request)",
    }
    #: The direction of the batch a ``batch_start`` message opened (None: none open).
    _msg_batch = None

    def __init__(self, info, params=None) -> None:
        super().__init__(info, params)
        line = max((k for k in _VARIANTS if _at_least(info.kernel, k)),
                   key=lambda k: tuple(map(int, k.split("."))))
        self._levels_on, self._aging, self._cursor_pos, self._write_first = _VARIANTS[line]
        p = self.params
        hz = info.hz
        self._expire_j = (msecs_to_jiffies(p["read_expire"], hz),
                          msecs_to_jiffies(p["write_expire"], hz))
        self._aging_j = msecs_to_jiffies(p.get("prio_aging_expire", 0), hz)
        self._fifo_batch = p["fifo_batch"]
        self._starved_limit = p["writes_starved"] % _UINT_RANGE   # unsigned compare
        self._front_merges = bool(p["front_merges"])
        self._user_async_depth = p.get("async_depth", 0)
        self.levels = tuple(_Level() for _ in range(3 if self._levels_on else 1))
        self.last_dir = WRITE if self._write_first else READ
        self.batching = 0
        self.starved = 0
        self.async_depth = 0
        self._slot = 0
        self._held = 0
        #: levels with requests inserted and not completed (``dd_queued`` > 0): the
        #: ``prio_cnt`` of dd_dispatch_prio_aged_requests (6.1 on), kept as the counts
        #: change rather than summed over the levels per dispatch
        self._busy_levels = 0

    @classmethod
    def create(cls, info, params=None) -> "MqDeadlineElevator":
        return cls(info, params)

    # --- helpers -------------------------------------------------------------
    def _jiffies(self, now: float) -> int:
        return int(now * self.hz + 1e-9)

    def _level_of(self, ioprio: int) -> int:
        return _LEVEL.get(ioprio_class(ioprio), 1) if self._levels_on else 0

    def _next_request(self, lvl: _Level, d: int):
        """``deadline_next_request``: the sweep's next request of direction ``d``."""
        if self._cursor_pos:
            return lvl.tree[d].at_or_after(lvl.latest_pos[d])
        return lvl.next_rq[d]

    def _fifo_head(self, lvl: _Level, d: int):
        fifo = lvl.fifo[d]
        return next(iter(fifo.values())) if fifo else None

    def _remove(self, lvl: _Level, rq):
        """``deadline_remove_request``: out of the FIFO and the tree, moving the sweep's
        next request past it. Returns its successor in the tree."""
        rec = rq.sched
        d = rec.dir
        del lvl.fifo[d][rec.slot]
        rec.slot = -1
        succ = lvl.tree[d].remove(rec.key)
        rec.key = None
        if lvl.next_rq[d] is rq:
            lvl.next_rq[d] = succ
        self._held -= 1
        return succ

    def _move(self, lvl: _Level, rq) -> None:
        """``deadline_move_request``: remember the sweep successor (forgetting the
        other direction's), then remove the request. The successor is the one the
        removal finds: a second search of the tree would find the same."""
        next_rq = lvl.next_rq
        next_rq[READ] = next_rq[WRITE] = None       # (so _remove leaves them)
        next_rq[rq.sched.dir] = self._remove(lvl, rq)

    # --- hooks -----------------------------------------------------------------
    def depth_updated(self, nr_requests: int) -> None:
        """``dd_depth_updated``: async_depth 3/4 of nr_requests (5.15, 6.1) or of a tag
        word (6.6), unless the user set it."""
        if self._aging and self._cursor_pos:        # 6.6
            default = max(1, 3 * bits_per_word(nr_requests) // 4)
        else:
            default = max(1, 3 * nr_requests // 4)
        self.async_depth = self._user_async_depth or default

    @property
    def min_shallow_depth(self):
        """``sbitmap_queue_min_shallow_depth`` of ``dd_depth_updated`` (5.15 on):
        async_depth."""
        return self.async_depth if self._levels_on else None

    def limit_depth(self, write: bool, sync: bool, pid: int | None = None):
        """``dd_limit_depth``: every request but a synchronous read is capped (5.15 on)."""
        if not self._levels_on or (not write and sync):
            return None
        return self.async_depth

    def prepare_request(self, rq, now: float) -> None:
        rq.sched = _DdRq()

    def insert_requests(self, rqs, at_head: bool, now: float) -> None:
        """``dd_insert_request``: a requeue onto the level's dispatch list; else into
        the tree and the FIFO with its deadline."""
        j = self._jiffies(now)
        for rq in rqs:
            rec = rq.sched
            d = WRITE if rq.write else READ
            rec.level = level = self._level_of(rq.ioprio)
            lvl = self.levels[level]
            rec.dir = d
            if not rec.inserted:
                if lvl.inserted == lvl.completed:
                    self._busy_levels += 1
                lvl.inserted += 1
                rec.inserted = True
            self._held += 1
            if at_head:
                rec.start_j = rec.fifo_j = j
                lvl.dispatch.append(rq)
                continue
            rec.key = lvl.tree[d].add(rq)
            rec.start_j = j
            rec.fifo_j = j + self._expire_j[d]
            rq.fifo_time = rec.fifo_j / self.hz
            rec.slot = self._slot
            self._slot += 1
            lvl.fifo[d][rec.slot] = rq

    def request_merge(self, bio, now: float):
        """``dd_request_merge``: with front merges on, a request of the bio's level and
        direction starting where the bio ends."""
        if not self._front_merges:
            return None
        lvl = self.levels[self._level_of(bio.ioprio)]
        return lvl.tree[1 if bio.write else 0].find(bio.sector + bio.nr_sectors)

    def request_merged(self, rq, front: bool, now: float) -> None:
        """``dd_request_merged``: a front merge moved the start: re-file it."""
        rec = rq.sched
        if front and rec.key is not None:
            lvl = self.levels[rec.level]
            tree = lvl.tree[rec.dir]
            tree.remove(rec.key)
            rec.key = tree.add(rq)

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``dd_merged_requests``: ``rq`` takes ``nxt``'s deadline and FIFO place if
        ``nxt`` would expire first; ``nxt`` is removed."""
        rec, nrec = rq.sched, nxt.sched
        lvl = self.levels[nrec.level]
        if rec.slot >= 0 and nrec.slot >= 0 and nrec.fifo_j < rec.fifo_j \
                and rec.level == nrec.level:
            fifo = self.levels[rec.level].fifo[rec.dir]
            del fifo[rec.slot]
            lvl.fifo[nrec.dir][nrec.slot] = rq          # the victim's place
            rec.slot, nrec.slot = nrec.slot, -1
            rec.fifo_j = nrec.fifo_j
            rq.fifo_time = rec.fifo_j / self.hz
            succ = lvl.tree[nrec.dir].remove(nrec.key)
            nrec.key = None
            if lvl.next_rq[nrec.dir] is nxt:
                lvl.next_rq[nrec.dir] = succ
            self._held -= 1
        else:
            self._remove(lvl, nxt)

    def former_request(self, rq):
        rec = rq.sched
        if rec.key is None:
            return None
        return self.levels[rec.level].tree[rec.dir].predecessor(rec.key)

    def next_request(self, rq):
        rec = rq.sched
        if rec.key is None:
            return None
        return self.levels[rec.level].tree[rec.dir].successor(rec.key)

    def has_work(self, hctx) -> bool:
        """``dd_has_work``: a dispatch list or a FIFO holds a request."""
        return self._held > 0

    def dispatch_request(self, hctx, now: float):
        """``dd_dispatch_request``: the aged requests of lower levels first (6.1 on),
        then the highest level with something to give (from 6.1 a level with
        requests still at the device blocks the lower ones)."""
        j = self._jiffies(now)
        levels = self.levels
        if self._aging and self._busy_levels >= 2:      # prio_cnt
            for lvl in levels[1:]:
                rq = self._dispatch_level(lvl, j, j - self._aging_j)
                if rq is not None:
                    return rq
        for lvl in levels:
            rq = self._dispatch_level(lvl, j, j)
            if rq is not None or (self._aging and lvl.queued() > 0):
                return rq
        return None

    def _dispatch_level(self, lvl: _Level, j: int, latest_start: int):
        """``__dd_dispatch_request`` on one level: a request inserted no later than
        ``latest_start`` (jiffies), or None."""
        reads, writes = lvl.fifo
        if not (reads or writes or lvl.dispatch):
            return None                     # nothing at this level: no cursor to follow
        if lvl.dispatch:
            rq = lvl.dispatch[0]
            if rq.sched.start_j > latest_start:
                return None
            lvl.dispatch.popleft()
            self._held -= 1
            return self._dispatched(lvl, rq)
        if self._write_first:
            rq = lvl.next_rq[WRITE] or lvl.next_rq[READ]
        else:
            rq = self._next_request(lvl, self.last_dir)
        if rq is None or self.batching >= self._fifo_batch:
            if self.msg is not None and self._msg_batch is not None:
                self.msg("batch_end", 0, "swept" if rq is None else "fifo_batch")
                self._msg_batch = None
            if reads:
                if writes and self.starved >= self._starved_limit:
                    if self.msg is not None:
                        self.msg("writes_starved", 0, self.starved)
                    self.starved = 0
                    d = WRITE
                else:
                    self.starved += 1 if writes else 0
                    d = READ
            elif writes:
                self.starved = 0
                d = WRITE
            else:
                return None
            nxt = self._next_request(lvl, d)
            head = self._fifo_head(lvl, d)
            rq = head if (nxt is None or j >= head.sched.fifo_j) else nxt
            if self.msg is not None:
                self._say_batch_start(d, head, j)
            self.last_dir = d
            self.batching = 0
        if rq.sched.start_j > latest_start:
            return None
        self.batching += 1
        self._move(lvl, rq)
        return self._dispatched(lvl, rq)

    def _say_batch_start(self, d: int, head, j: int) -> None:
        """``batch_start`` of direction ``d`` (and ``fifo_expired`` when the FIFO
        head's deadline has passed), sent only while someone subscribes."""
        word = "write" if d == WRITE else "read"
        self.msg("batch_start", 0, word)
        self._msg_batch = word
        if j >= head.sched.fifo_j:
            self.msg("fifo_expired", head.pid, word)

    def _dispatched(self, lvl: _Level, rq):
        lvl.latest_pos[WRITE if rq.write else READ] = rq.sector
        lvl.dispatched += 1
        return rq

    def fifo_heads(self) -> list:
        """The oldest request of every level and direction (for displays and plugins)."""
        return [head for lvl in self.levels for d in (READ, WRITE)
                if (head := self._fifo_head(lvl, d)) is not None]

    def requeue_request(self, rq, now: float) -> None:
        """Nothing to undo: the request comes back through ``insert_requests``."""

    def finish_request(self, rq, now: float) -> None:
        """``dd_finish_request``: one more completed at the request's level (if it
        was inserted)."""
        rec = rq.sched
        if rec is not None and rec.inserted:
            lvl = self.levels[rec.level]
            lvl.completed += 1
            if lvl.completed == lvl.inserted:
                self._busy_levels -= 1
            rec.inserted = False

    def empty(self) -> bool:
        return self._held == 0

    def queued(self) -> int:
        return self._held


def _at_least(kernel: str, line: str) -> bool:
    return tuple(map(int, kernel.split("."))) >= tuple(map(int, line.split(".")))
