"""The noop elevator of Linux 2.6.18 (block/noop-iosched.c): one FIFO, no reordering.

Requests are served in arrival order. noop does no merge lookup of its own; the
block layer's one-hit cache (and, from 2.6.19, its back-merge hash) does all the
merging, and request-request coalescing only considers FIFO neighbours.
Dispatch hands the FIFO head to the dispatch queue through the sorted insert
(``elv_dispatch_sort``), which only reorders when several requests are drained
at once, since the block layer normally asks only when the dispatch queue is empty.
"""

from __future__ import annotations

from blksim.block.elevator import Elevator


class _Link:
    """One node of noop's doubly linked FIFO (the request's ``queuelist``)."""

    __slots__ = ("prev", "next", "rq")

    def __init__(self, rq) -> None:
        self.prev = self
        self.next = self
        self.rq = rq


class NoopElevator(Elevator):
    """First come, first served; merging is left to the block layer."""

    name = "noop"
    tunables = ()
    own_backmerge_hash = False

    def __init__(self, dispatch_queue, params=None, hz: int = 250) -> None:
        super().__init__(dispatch_queue, params, hz)
        self._head = _Link(None)  # sentinel of a circular list
        self._count = 0

    def add(self, rq, now: float) -> None:
        """Append `rq` to the FIFO tail."""
        head = self._head
        link = _Link(rq)
        tail = head.prev
        link.prev = tail
        link.next = head
        tail.next = link
        head.prev = link
        rq.sched = link
        self._count += 1

    def _unlink(self, rq) -> None:
        link = rq.sched
        link.prev.next = link.next
        link.next.prev = link.prev
        rq.sched = None
        self._count -= 1

    def dispatch(self, now: float, force: bool = False) -> int:
        """Move the FIFO head to the dispatch queue (sorted insert); 1 if moved, else 0.

        One request per call even when forced, as in 2.6.18; the block layer
        drains by calling until 0.
        """
        first = self._head.next
        if first is self._head:
            return 0
        rq = first.rq
        self._unlink(rq)
        self.dq.add_sorted(rq)
        return 1

    def requests_merged(self, rq, nxt, now: float) -> None:
        """`nxt` was absorbed by `rq`: drop it from the FIFO (rq keeps its place)."""
        self._unlink(nxt)

    def former(self, rq):
        """The request queued just before `rq`, or None."""
        link = rq.sched
        if link is None:
            return None
        return link.prev.rq  # the sentinel's rq is None

    def latter(self, rq):
        """The request queued just after `rq`, or None."""
        link = rq.sched
        if link is None:
            return None
        return link.next.rq

    def empty(self) -> bool:
        """True when the FIFO holds nothing."""
        return self._count == 0

    def queued(self) -> int:
        """Number of requests in the FIFO."""
        return self._count

    def fifo_order(self) -> list:
        """The queued requests, oldest first (for checks and teaching displays)."""
        out = []
        link = self._head.next
        while link is not self._head:
            out.append(link.rq)
            link = link.next
        return out
