"""The deadline elevator of Linux 2.6.18 (block/deadline-iosched.c), with 2.6.24/2.6.32 variants.

Per direction (read, write) deadline keeps a sort tree by start sector and a FIFO
by arrival, each request carrying a deadline ``fifo_time = arrival + expire[dir]``.
Requests are dispatched one per call, in *batches*: a batch serves requests of
one direction in ascending sector order. Between batches deadline picks a
direction (reads are preferred, but only ``writes_starved`` times in a row while
writes wait) and a starting request (the oldest if its deadline has passed,
otherwise where that direction's sweep left off). Deadlines are looked at only
at batch boundaries.

Version differences, from block/deadline-iosched.c of Linux 2.6.18, 2.6.24 and
2.6.32 (deadline_dispatch_requests() for the first two, deadline_merged_request()
for the third):

* 2.6.18 and 2.6.24 end a batch as soon as the next request in sector order does
  not start exactly where the last dispatched one ended (the contiguity cut);
  2.6.32 does not.
* 2.6.18 starts a new batch at the sweep successor *without* resetting the batch
  count, and restarts an exhausted sweep at the lowest sector; 2.6.24 and later
  always reset the count and restart at the FIFO head.
* 2.6.18 re-files a front-merged request through deadline_del_drq_rb(), which
  also advances ``next_rq`` when it pointed at that request; later kernels
  re-file it directly (elv_rb_del()), so ``next_rq`` keeps pointing at it.
"""

from __future__ import annotations

from collections import OrderedDict

from blksim.block.elevator import (Elevator, Tunable, jiffies_to_seconds, kernel_version,
                             msecs_to_jiffies)
from blksim.block.sorttree import SectorTree

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
_UINT_RANGE = 2**32

READ, WRITE = 0, 1


# Deadline's per-request data (``rq.sched``) is a two-item list: the sort key the
# request is filed under and its FIFO slot. A list rather than a small class: it
# is made for every request, and building a list costs a fifth of what calling a
# class with an __init__ does in CPython 3.11.
KEY, SLOT = 0, 1


# Behaviour switches per kernel version; see the module docstring.
_VARIANTS = {
    "2.6.18": {"contiguity_cut": True, "fifo_restart": False, "refile_advances_next": True},
    "2.6.24": {"contiguity_cut": True, "fifo_restart": True, "refile_advances_next": False},
    "2.6.32": {"contiguity_cut": False, "fifo_restart": True, "refile_advances_next": False},
}


def variant_for_kernel(kernel: str) -> str:
    """The deadline variant a kernel version behaves like (newest one not newer than it).

    Raises ValueError for versions older than 2.6.18, which blksim does not model.
    """
    wanted = kernel_version(kernel)
    fits = [v for v in _VARIANTS if kernel_version(v) <= wanted]
    if not fits:
        raise ValueError(f"deadline is modelled from kernel 2.6.18 on, got {kernel!r}; "
                         "valid: " + ", ".join(_VARIANTS))
    return max(fits, key=kernel_version)


class DeadlineElevator(Elevator):
    """Batched one-way sweeps per direction with soft per-request deadlines.

    ``variant`` selects the kernel whose behaviour is reproduced: "2.6.18"
    (default), "2.6.24" or "2.6.32". Read-only state for displays and checks:
    ``next_rq`` (per direction, at most one set), ``batching``, ``starved``,
    ``last_sector``.
    """

    name = "deadline"
    own_backmerge_hash = True  # 2.6.18 deadline kept its own 32-bucket back-merge hash
    tunables = (
        Tunable("read_expire", 500, "ms", 0, INT_MAX,
                "deadline of a read, counted from when it is queued", jiffies=True),
        Tunable("write_expire", 5000, "ms", 0, INT_MAX,
                "deadline of a write, counted from when it is queued", jiffies=True),
        Tunable("writes_starved", 2, "count", INT_MIN, INT_MAX,
                "read batches chosen in a row while writes wait (negative: "
                "reads always first, as the kernel's unsigned compare does)"),
        Tunable("front_merges", 1, "bool", 0, 1,
                "1 = look up front-merge candidates in the sort tree"),
        Tunable("fifo_batch", 16, "requests", 0, INT_MAX,
                "most requests dispatched in one batch"),
    )
    VARIANTS = tuple(_VARIANTS)
    #: The messages deadline sends (``block_elv_msg``), all from
    #: ``deadline_dispatch_requests``: a batch's start and end, and why its first
    #: request was chosen.
    events = {
        "batch_start": "a batch of one direction begins (detail: read or write) "
                       "(deadline_dispatch_requests)",
        "batch_end": "the batch ends (detail: seek, the next request in sector order is "
                     "not contiguous (2.6.18, 2.6.24); fifo_batch, the batch is full; "
                     "swept, its direction has no next request) "
                     "(deadline_dispatch_requests)",
        "fifo_expired": "the new batch starts at its direction's FIFO head, whose "
                        "deadline has passed (detail: read or write) "
                        "(deadline_dispatch_requests, deadline_check_fifo)",
        "writes_starved": "a write batch is chosen although reads wait: writes were "
                          "passed over writes_starved times (detail: that count) "
                          "(deadline_dispatch_requests)",
    }
    #: The direction of the batch a ``batch_start`` message opened, while a subscriber
    #: listens (None: no batch reported open).
    _msg_batch = None

    def __init__(self, dispatch_queue, params=None, hz: int = 250,
                 variant: str = "2.6.18") -> None:
        super().__init__(dispatch_queue, params, hz)
        if variant not in _VARIANTS:
            raise ValueError(f"unknown deadline variant {variant!r}; valid: "
                             + ", ".join(_VARIANTS))
        if not isinstance(hz, int) or isinstance(hz, bool) or hz <= 0:
            raise ValueError(f"hz must be a positive whole number, got {hz!r}")
        self.variant = variant
        flags = _VARIANTS[variant]
        self._contiguity_cut = flags["contiguity_cut"]
        self._fifo_restart = flags["fifo_restart"]
        self._refile_advances_next = flags["refile_advances_next"]

        p = self.params
        # The kernel stores expiries in jiffies; sysfs shows them in ms.
        self._expire = (
            jiffies_to_seconds(msecs_to_jiffies(p["read_expire"], hz), hz),
            jiffies_to_seconds(msecs_to_jiffies(p["write_expire"], hz), hz),
        )
        self._fifo_batch = p["fifo_batch"]
        # 'starved' is unsigned in the kernel and is compared with the signed
        # writes_starved, which C converts to unsigned: -1 acts as 2**32 - 1.
        self._starved_limit = p["writes_starved"] % _UINT_RANGE
        self._front_merges = bool(p["front_merges"])

        self._tree = (SectorTree(), SectorTree())
        # FIFO per direction: slot number -> request, in arrival order. A slot is
        # an arrival position; a merge survivor can take over its victim's slot.
        self._fifo = (OrderedDict(), OrderedDict())
        self._slot = 0

        self.next_rq = [None, None]
        self.batching = 0
        self.starved = 0
        self.last_sector = 0

    @classmethod
    def create(cls, dispatch_queue, params=None, hz: int = 250,
               kernel: str = "2.6.18") -> "DeadlineElevator":
        """Build deadline as kernel `kernel` had it: the newest variant not newer than it."""
        return cls(dispatch_queue, params, hz=hz, variant=variant_for_kernel(kernel))

    # --- filing ------------------------------------------------------------
    def _file(self, rq, d: int) -> None:
        """``deadline_add_drq_rb``: insert `rq` in its sort tree; an existing request
        with the same start sector (an alias) is dispatched first, as 2.6.18 does."""
        tree = self._tree[d]
        key = rq.sector
        rq.sched[KEY] = key
        alias = tree.add(key, rq)
        while alias is not None:
            self._move(alias)
            alias = tree.add(key, rq)

    def _unfile(self, rq, d: int, advance_next: bool = True) -> None:
        """``deadline_del_drq_rb``: remove `rq` from its sort tree, moving ``next_rq``
        past it if asked."""
        succ = self._tree[d].remove(rq.sched[KEY])
        if advance_next and self.next_rq[d] is rq:
            self.next_rq[d] = succ

    def _move(self, rq) -> None:
        """``deadline_move_request``: remember `rq`'s sweep successor (the other
        direction's is forgotten) and end, take it out of the tree and FIFO
        (``deadline_remove_request``) and onto the dispatch list's tail
        (``elv_dispatch_add_tail``)."""
        d = 1 if rq.write else 0
        key, slot = rq.sched
        succ = self._tree[d].remove(key)
        nxt = self.next_rq
        nxt[0] = nxt[1] = None
        nxt[d] = succ
        self.last_sector = rq.sector + rq.nr_sectors
        del self._fifo[d][slot]
        rq.sched = None
        self.dq.add_tail(rq)

    # --- hooks -------------------------------------------------------------
    def add(self, rq, now: float) -> None:
        """Queue `rq`: file it by sector (alias rule), stamp its deadline, append to its FIFO."""
        d = 1 if rq.write else 0
        slot = self._slot
        self._slot = slot + 1
        rq.sched = [rq.sector, slot]
        self._file(rq, d)
        rq.fifo_time = now + self._expire[d]
        self._fifo[d][slot] = rq

    def merge_candidate(self, bio, now: float):
        """A queued request of the bio's direction starting exactly at the bio's end.

        Only when ``front_merges`` is 1. The block layer checks merge permission.
        """
        if not self._front_merges:
            return None
        return self._tree[1 if bio.write else 0].find(bio.sector + bio.nr_sectors)

    def merged(self, rq, front: bool, now: float) -> None:
        """Re-file `rq` if a front merge moved its start sector."""
        if rq.sector != rq.sched[KEY]:
            d = 1 if rq.write else 0
            self._unfile(rq, d, self._refile_advances_next)
            self._file(rq, d)

    def requests_merged(self, rq, nxt, now: float) -> None:
        """`nxt` was absorbed by `rq`: forget `nxt`; `rq` keeps the earlier deadline.

        When `nxt` would have expired first, `rq` takes its deadline and its place
        in the FIFO.
        """
        d = 1 if rq.write else 0
        node = rq.sched
        if rq.sector != node[KEY]:  # only if the block layer skipped merged()
            self._unfile(rq, d, self._refile_advances_next)
            self._file(rq, d)
        fifo = self._fifo[d]
        vslot = nxt.sched[SLOT]
        if nxt.fifo_time < rq.fifo_time:
            del fifo[node[SLOT]]
            fifo[vslot] = rq  # the victim's slot keeps its position
            node[SLOT] = vslot
            rq.fifo_time = nxt.fifo_time
        else:
            del fifo[vslot]
        self._unfile(nxt, d)
        nxt.sched = None

    def dispatch(self, now: float, force: bool = False) -> int:
        """Move one request to the dispatch queue; return 1, or 0 if nothing is queued.

        ``force`` changes nothing: deadline always dispatches one request per call
        and the block layer drains by calling until 0.
        """
        nxt = self.next_rq
        rq = nxt[1]
        if rq is None:
            rq = nxt[0]
        fifo_batch = self._fifo_batch
        if rq is not None:
            if self._contiguity_cut and self.last_sector != rq.sector:
                self.batching += fifo_batch  # a seek ends the batch (2.6.18-2.6.24)
            if self.batching < fifo_batch:
                self.batching += 1
                self._move(rq)
                return 1

        if self.msg is not None and self._msg_batch is not None:
            self._say_batch_end(rq)
        # Not in a batch: choose a direction.
        reads, writes = self._fifo
        if reads:
            if writes and self.starved >= self._starved_limit:
                if self.msg is not None:
                    self.msg("writes_starved", 0, self.starved)
                d = WRITE
                self.starved = 0
            else:
                if writes:
                    self.starved += 1
                d = READ
        elif writes:
            d = WRITE
            self.starved = 0
        else:
            return 0

        # Choose the first request of the new batch.
        fifo = self._fifo[d]
        head = fifo[next(iter(fifo))]
        if self.msg is not None:
            self._say_batch_start(d, head, now)
        if now > head.fifo_time:  # time_after(jiffies, expires)
            rq = head
            self.batching = 0
        elif self._fifo_restart:  # 2.6.24+
            rq = nxt[d]
            if rq is None:
                rq = head
            self.batching = 0
        else:  # 2.6.18
            rq = nxt[d]
            if rq is None:
                rq = self._tree[d].first()   # the sweep restarts at the lowest sector
                self.batching = 0
            # else: continue the sweep; the batch count is deliberately not reset
        self.batching += 1
        self._move(rq)
        return 1

    # --- messages (block_elv_msg), sent only while someone subscribes ----------------
    def _say_batch_end(self, rq) -> None:
        """``batch_end`` of the batch reported open, with why it ended: ``rq`` is the
        next request in sector order (None: the direction's sweep has none)."""
        if rq is None:
            why = "swept"
        elif self._contiguity_cut and self.last_sector != rq.sector:
            why = "seek"
        else:
            why = "fifo_batch"
        self.msg("batch_end", 0, why)
        self._msg_batch = None

    def _say_batch_start(self, d: int, head, now: float) -> None:
        """``batch_start`` of direction ``d`` (and ``fifo_expired`` when its FIFO
        head's deadline has passed, the test the dispatch makes next)."""
        word = "write" if d else "read"
        self.msg("batch_start", 0, word)
        self._msg_batch = word
        if now > head.fifo_time:
            self.msg("fifo_expired", head.pid, word)

    def fifo_head(self, write: bool):
        """The oldest request of one direction (the next to reach its deadline), or None."""
        fifo = self._fifo[WRITE if write else READ]
        return fifo[next(iter(fifo))] if fifo else None

    def former(self, rq):
        """The queued request of the same direction just below `rq` in sector order."""
        node = rq.sched
        if node is None:
            return None
        return self._tree[1 if rq.write else 0].predecessor(node[KEY])

    def latter(self, rq):
        """The queued request of the same direction just above `rq` in sector order."""
        node = rq.sched
        if node is None:
            return None
        return self._tree[1 if rq.write else 0].successor(node[KEY])

    def empty(self) -> bool:
        """True when neither FIFO holds a request."""
        return not self._fifo[0] and not self._fifo[1]

    def queued(self) -> int:
        """Number of requests queued in the elevator (both directions)."""
        return len(self._fifo[0]) + len(self._fifo[1])

    # --- introspection -------------------------------------------------------
    def sort_order(self, write: bool) -> list:
        """The queued requests of one direction in ascending sector order."""
        return list(self._tree[1 if write else 0])

    def fifo_order(self, write: bool) -> list:
        """The queued requests of one direction, earliest deadline first."""
        return list(self._fifo[1 if write else 0].values())
