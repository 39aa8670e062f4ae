"""The block layer's dispatch list (``q->queue_head`` in a 2.6 kernel).

Elevators move requests here from their own structures; the driver takes them
from the head. Plain Python, no engine: schedulers use it directly.
"""

from __future__ import annotations

from collections import deque


class DispatchQueue:
    """Requests an elevator has released, waiting for the device to take them.

    A request on this list is out of the elevator and may no longer take
    merges (2.6.18 drops it from ``last_merge`` and the merge hash here), so
    every add clears ``rq.in_elevator``.

    ``boundary`` is the end sector of the last request handed to the driver
    (``q->end_sector``); `add_sorted` keeps the one-way ascending order relative
    to it that ``elv_dispatch_sort`` keeps (Linux 2.6.18 block/elevator.c).
    """

    __slots__ = ("_list", "boundary")

    def __init__(self) -> None:
        self._list: deque = deque()
        self.boundary = 0

    def __len__(self) -> int:
        return len(self._list)

    def __bool__(self) -> bool:
        return bool(self._list)

    def __iter__(self):
        return iter(self._list)

    def add_tail(self, rq) -> None:
        """Append at the tail and move the boundary to its end (``elv_dispatch_add_tail``)."""
        rq.in_elevator = False
        self._list.append(rq)
        self.boundary = rq.sector + rq.nr_sectors

    def add_front(self, rq) -> None:
        """Put a request at the head (a requeue)."""
        rq.in_elevator = False
        self._list.appendleft(rq)

    def add_sorted(self, rq) -> None:
        """Insert keeping a one-way elevator order from `boundary` (``elv_dispatch_sort``).

        Walk back from the tail; requests at or past the boundary sort before those
        that wrapped below it, and ascending by sector within each group.
        """
        rq.in_elevator = False
        items = self._list
        if not items:
            items.append(rq)
            return
        boundary = self.boundary
        sector = rq.sector
        idx = len(items)
        while idx > 0:
            pos = items[idx - 1]
            if pos.started:
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
        if idx == len(items):
            items.append(rq)
        else:
            items.insert(idx, rq)

    def pop_head(self):
        """Remove and return the head request, moving the boundary to its end."""
        rq = self._list.popleft()
        self.boundary = rq.sector + rq.nr_sectors
        return rq

    def remove(self, rq) -> None:
        """Take a request out (it was merged into another)."""
        self._list.remove(rq)
