"""A sector-ordered index of requests: the role the kernel's per-direction rbtree plays.

The legacy elevators (deadline, and later AS and CFQ) keep their queued requests in
a red-black tree keyed on start sector, with at most one request per key (a second
request with the same start is an "alias" that the elevator dispatches at once,
Linux 2.6.18 block/deadline-iosched.c). An elevator rarely holds more than a few
hundred requests, so two parallel Python lists searched with `bisect` are faster
here than any balanced tree written in Python: lookups are C-speed binary searches
and inserts/removals are a short memmove.

The key is passed in by the caller rather than read from the request, because a
front merge changes ``rq.sector`` before the elevator gets to re-file the request
under its new key.
"""

from __future__ import annotations

from bisect import bisect_left


class SectorTree:
    """Requests ordered by a unique integer key (the start sector at filing time).

    ``keys`` and ``rqs`` are the two parallel lists, ascending by key; elevators
    may read them (``keys``' truth: the tree holds a request) and change them
    only through the methods below.
    """

    __slots__ = ("keys", "rqs")

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.rqs: list = []

    def __len__(self) -> int:
        return len(self.keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def __iter__(self):
        return iter(self.rqs)

    def add(self, key: int, rq):
        """File `rq` under `key` and return None; if `key` is taken, return its owner instead.

        Mirrors the rbtree insert of 2.6.18: an existing request with the same key
        (an alias) is returned and nothing is inserted.
        """
        keys = self.keys
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return self.rqs[i]
        keys.insert(i, key)
        self.rqs.insert(i, rq)
        return None

    def holds(self, key: int, rq) -> bool:
        """True when `rq` is the request filed under `key`."""
        keys = self.keys
        i = bisect_left(keys, key)
        return i < len(keys) and keys[i] == key and self.rqs[i] is rq

    def discard(self, rq) -> None:
        """Unfile `rq`, wherever it is filed (found by identity: after a front merge
        its start sector is no longer its key)."""
        i = self.rqs.index(rq)                    # (compares by identity)
        del self.keys[i]
        del self.rqs[i]

    def find(self, key: int):
        """The request filed under exactly `key`, or None."""
        keys = self.keys
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return self.rqs[i]
        return None

    def remove(self, key: int):
        """Unfile the request under `key`; return its successor in key order, or None."""
        keys = self.keys
        i = bisect_left(keys, key)
        rqs = self.rqs
        del keys[i]
        del rqs[i]
        return rqs[i] if i < len(rqs) else None

    def neighbours(self, key: int):
        """(predecessor, successor) of the request filed under `key`, the successor
        wrapping to the lowest-keyed request; None where there is none other. This
        is the walk ``cfq_find_next_crq`` and ``as_find_next_arq`` (2.6.18) make
        with ``rb_prev``, ``rb_next`` and ``rb_first``."""
        keys = self.keys
        rqs = self.rqs
        i = bisect_left(keys, key)
        if i + 1 < len(keys):
            nxt = rqs[i + 1]
        elif i:
            nxt = rqs[0]
        else:
            nxt = None
        return (rqs[i - 1] if i else None), nxt

    def remove_between(self, key: int):
        """Unfile the request under `key` and return what were its (predecessor,
        successor), as `neighbours` gives them: one binary search for both."""
        keys = self.keys
        rqs = self.rqs
        i = bisect_left(keys, key)
        del keys[i]
        del rqs[i]
        if not rqs:
            return None, None
        return (rqs[i - 1] if i else None), rqs[i % len(rqs)]

    def successor(self, key: int):
        """The request filed after `key`, or None (no wrap-around)."""
        keys = self.keys
        i = bisect_left(keys, key) + 1
        return self.rqs[i] if i < len(keys) else None

    def predecessor(self, key: int):
        """The request filed before `key`, or None."""
        i = bisect_left(self.keys, key) - 1
        return self.rqs[i] if i >= 0 else None

    def first(self):
        """The lowest-keyed request, or None."""
        return self.rqs[0] if self.rqs else None


#: Bits of a `SectorMultiTree` key that hold the arrival number (a run files fewer
#: than 2**40 requests).
_ARRIVAL_BITS = 40
_ARRIVAL_MASK = (1 << _ARRIVAL_BITS) - 1


class SectorMultiTree:
    """Requests ordered by start sector, where several may start at the same sector:
    the rbtree of the multi-queue era (``elv_rb_add``, block/elevator.c, 5.4-6.6,
    files an equal sector to the right, so equal sectors keep their arrival order).

    A request is filed under the key `add` returns: its sector and its arrival number
    packed in one integer (``sector << 40 | arrival``), so that ordering compares
    integers; elevators keep that key to remove it.
    """

    __slots__ = ("keys", "rqs", "_arrivals")

    def __init__(self) -> None:
        self.keys: list = []
        self.rqs: list = []
        self._arrivals = 0

    def __len__(self) -> int:
        return len(self.keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def __iter__(self):
        return iter(self.rqs)

    def add(self, rq) -> int:
        """File ``rq`` by its start sector; returns its key."""
        key = (rq.sector << _ARRIVAL_BITS) | self._arrivals
        self._arrivals += 1
        i = bisect_left(self.keys, key)
        self.keys.insert(i, key)
        self.rqs.insert(i, rq)
        return key

    def remove(self, key: int):
        """Unfile the request under ``key``; returns its successor in sector order, or None
        (``elv_rb_latter_request`` before the removal)."""
        keys = self.keys
        i = bisect_left(keys, key)
        del keys[i]
        del self.rqs[i]
        return self.rqs[i] if i < len(self.rqs) else None

    def find(self, sector: int):
        """A request starting at ``sector`` (``elv_rb_find``), the earliest filed, or None."""
        i = bisect_left(self.keys, sector << _ARRIVAL_BITS)
        if i < len(self.keys) and self.keys[i] >> _ARRIVAL_BITS == sector:
            return self.rqs[i]
        return None

    def at_or_after(self, sector: int):
        """The first request starting at or after ``sector`` (``deadline_from_pos``,
        mq-deadline 6.6), or None."""
        i = bisect_left(self.keys, sector << _ARRIVAL_BITS)
        return self.rqs[i] if i < len(self.rqs) else None

    def successor(self, key: int):
        """The request filed after ``key`` (``elv_rb_latter_request``), or None."""
        i = bisect_left(self.keys, key) + 1
        return self.rqs[i] if i < len(self.rqs) else None

    def predecessor(self, key: int):
        """The request filed before ``key`` (``elv_rb_former_request``), or None."""
        i = bisect_left(self.keys, key) - 1
        return self.rqs[i] if i >= 0 else None

    def first(self):
        """The lowest request, or None (``rb_first``)."""
        return self.rqs[0] if self.rqs else None

    # --- by the request itself (an elevator that keeps no key: bfq) -----------------
    # Found by identity: after a front merge a request's sector is no longer its key.
    def remove_rq(self, rq) -> None:
        """``elv_rb_del`` of ``rq``."""
        i = self.rqs.index(rq)
        del self.keys[i]
        del self.rqs[i]

    def rekey(self, rq) -> None:
        """``rq`` grew at its front but keeps its place: the rbtree compares live start
        sectors, so its key follows (its arrival number stays)."""
        i = self.rqs.index(rq)
        self.keys[i] = (rq.sector << _ARRIVAL_BITS) | (self.keys[i] & _ARRIVAL_MASK)

    def prev(self, rq):
        """``rb_prev``: the request filed before ``rq``, or None (also for a request not
        filed here)."""
        try:
            i = self.rqs.index(rq)
        except ValueError:
            return None
        return self.rqs[i - 1] if i else None

    def next(self, rq):
        """``rb_next``: the request filed after ``rq``, or None (also for a request not
        filed here)."""
        try:
            i = self.rqs.index(rq) + 1
        except ValueError:
            return None
        return self.rqs[i] if i < len(self.rqs) else None
