"""Matching traced requests with their completions, for readers of captures that record
both (blktrace binary, blkparse text): each request is held until the ``C`` event that
completes it is read, then handed on with its recorded latency.

A completion names a device and a sector range; it completes the request queued (or
issued) at its first sector, then the one starting where that one ends, and so on (a
request the kernel merged from several bios completes them all). Requests leave in the
order they arrived, so a reader still yields them in time order; a request whose
completion has not been seen after ``max_pending`` later requests, or ``hold`` of trace
time, leaves without a latency (its completion was lost, or lies beyond the capture).
Memory holds only the requests waiting.
"""

from __future__ import annotations

from collections import deque

#: Requests held while waiting for their completion.
MAX_PENDING = 1 << 16
#: ... and for at most this long (seconds of trace time) before they are given up.
HOLD_S = 60.0


class CompletionMatcher:
    """Requests waiting for their completion, in arrival order.

    `add` a request (its arrival time, device, first sector, size and a payload the
    caller gets back), `complete` a device's sector range at a time, and take from
    `ready` the requests that may leave by a given trace time: ``(payload, latency)``
    pairs, latency in the unit of the times given, or None when no completion was seen.
    `drain` hands on every request still held (at the end of the capture).
    """

    __slots__ = ("max_pending", "hold", "_fifo", "_waiting")

    def __init__(self, hold: float = HOLD_S, max_pending: int = MAX_PENDING) -> None:
        self.max_pending = max_pending
        self.hold = hold
        self._fifo: deque = deque()        # [time, device, sector, size, payload, done]
        self._waiting: dict = {}           # (device, sector) -> entry

    def add(self, time, device, sector: int, size: int, payload) -> None:
        """A request arrived at ``time``: ``size`` sectors from ``sector`` on ``device``."""
        entry = [time, device, sector, size, payload, None]
        self._fifo.append(entry)
        self._waiting[(device, sector)] = entry

    def complete(self, time, device, sector: int, size: int) -> None:
        """A completion at ``time`` of ``size`` sectors from ``sector`` on ``device``."""
        end = sector + size
        waiting = self._waiting
        while sector < end:
            entry = waiting.pop((device, sector), None)
            if entry is None:
                return
            entry[5] = time
            sector += entry[3]

    def ready(self, now):
        """Yield ``(payload, latency)`` for the requests that may leave at trace time
        ``now``: every completed one at the head of the queue, and those held too long."""
        fifo = self._fifo
        while fifo and (fifo[0][5] is not None or len(fifo) > self.max_pending
                        or now - fifo[0][0] > self.hold):
            yield self._leave(fifo.popleft())

    def drain(self):
        """Yield ``(payload, latency)`` for every request still held."""
        fifo = self._fifo
        while fifo:
            yield self._leave(fifo.popleft())

    def _leave(self, entry):
        time, device, sector, _size, payload, done = entry
        if done is None:
            if self._waiting.get((device, sector)) is entry:
                del self._waiting[(device, sector)]
            return payload, None
        return payload, max(done - time, 0)
