"""The block layer's dispatch list (``q->queue_head`` in a 2.6 kernel).

Elevators move requests here from their own structures; the driver takes them
from the head. Plain Python, no engine: schedulers use it directly.
"""

from __future__ import annotations

from collections import deque


class DispatchQueue(deque):
    """Requests an elevator has released, waiting for the device to take them.

    A `collections.deque` (so emptiness and length are C-level checks on the hot
    path) with the kernel's ordered insertions on top. ``boundary`` is the end
    sector of the last request handed to the driver (``q->end_sector``);
    `add_sorted` keeps the one-way ascending order relative to it that
    ``elv_dispatch_sort`` keeps (Linux 2.6.18 block/elevator.c).

    A request on this list is out of the elevator and may no longer take
    merges (2.6.18 drops it from ``last_merge`` and the merge hash here), so
    every add clears ``rq.in_elevator``.
    """

    __slots__ = ("boundary",)

    def __init__(self) -> None:
        super().__init__()
        self.boundary = 0

    def add_tail(self, rq) -> None:
        """Append at the tail and move the boundary to its end (``elv_dispatch_add_tail``)."""
        rq.in_elevator = False
        self.append(rq)
        self.boundary = rq.sector + rq.nr_sectors

    def add_front(self, rq) -> None:
        """Put a request at the head (a requeue)."""
        rq.in_elevator = False
        self.appendleft(rq)

    def add_sorted(self, rq) -> None:
        """Insert keeping a one-way elevator order from `boundary` (``elv_dispatch_sort``).

        Walk back from the tail; requests at or past the boundary sort before those
        that wrapped below it, and ascending by sector within each group.
        """
        rq.in_elevator = False
        if not self:
            self.append(rq)
            return
        boundary = self.boundary
        sector = rq.sector
        idx = len(self)
        while idx > 0:
            pos = self[idx - 1]
            if pos.started or pos.softbarrier:    # (a barrier: nothing passes it)
                break
            if sector >= boundary:
                if pos.sector < boundary:
                    idx -= 1
                    continue
            elif pos.sector >= boundary:
                break
            if sector >= pos.sector:
                break
            idx -= 1
        if idx == len(self):
            self.append(rq)
        else:
            self.insert(idx, rq)

    def pop_head(self):
        """Remove and return the head request, moving the boundary to its end."""
        rq = self.popleft()
        self.boundary = rq.sector + rq.nr_sectors
        return rq
