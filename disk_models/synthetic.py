"""Devices with a service-time law instead of mechanics, for queueing-theory checks.

`ServiceLawDevice` serves requests in arrival order on ``servers`` identical servers,
each request taking a time drawn from a law that ignores position: fixed (M/D/c
under Poisson arrivals) or exponential (M/M/c). With one server it is M/D/1 or
M/M/1. It may offer several hardware queues to the multi-queue layer
(``nr_hw_queues``), each taking ``queue_depth`` requests. Teaching and tests compare
blksim against the formulas with them.
"""

from __future__ import annotations

import heapq
import random
from bisect import insort

from blksim.disk_models.base import Device, DeviceError


class ServiceLawDevice(Device):
    """A FCFS device with ``servers`` parallel servers; ``law`` is ``"fixed"`` or
    ``"exponential"``.

    ``mean_s`` is the (mean) service time in seconds, ``capacity`` in sectors. Up to
    ``queue_depth`` requests per hardware queue are accepted (``nr_hw_queues`` of
    them); a request starts on the first server to come free, in arrival order.
    """

    def __init__(self, law: str, mean_s: float, capacity: int = 1 << 40, queue_depth: int = 1,
                 seed: int = 0, servers: int = 1, nr_hw_queues: int = 1) -> None:
        if law not in ("fixed", "exponential"):
            raise DeviceError(f"service law {law!r} is not supported; valid: fixed, exponential")
        if mean_s <= 0:
            raise DeviceError(f"mean service time must be positive, found {mean_s!r}")
        if queue_depth < 1:
            raise DeviceError(f"queue_depth must be at least 1, found {queue_depth!r}")
        if servers < 1 or nr_hw_queues < 1:
            raise DeviceError(f"servers and nr_hw_queues must be at least 1, found "
                              f"{servers!r} and {nr_hw_queues!r}")
        self.name = f"{law} service, mean {mean_s * 1e3:g} ms"
        if servers > 1:
            self.name += f", {servers} servers"
        self.law = law
        self.mean_s = mean_s
        self.capacity = capacity
        self.queue_depth = queue_depth
        self.servers = servers
        self.nr_hw_queues = nr_hw_queues
        self._limit = queue_depth * nr_hw_queues
        self._rng = random.Random(seed)
        # (-completion time, -arrival, request), sorted: the next to complete is last
        # (a sorted list rather than a heap: bisect is built in on PyPy, heapq is not)
        self._done: list = []
        self._free_at = [0.0] * servers    # a heap: when each server comes free
        self._arrivals = 0

    def _draw(self) -> float:
        if self.law == "fixed":
            return self.mean_s
        return self._rng.expovariate(1.0 / self.mean_s)

    def can_accept(self) -> bool:
        return len(self._done) < self._limit

    def submit(self, rq, now: float) -> None:
        free_at = self._free_at
        free = free_at[0]
        start = now if now > free else free
        if self.service_probe is not None:
            self.service_probe(rq, start)
        end = start + self._draw()
        if len(free_at) == 1:
            free_at[0] = end
        else:
            heapq.heapreplace(free_at, end)
        self._arrivals += 1
        insort(self._done, (-end, -self._arrivals, rq))

    def next_event_time(self) -> float | None:
        return -self._done[-1][0] if self._done else None

    def pop_completed(self, now: float) -> list:
        out = []
        done = self._done
        while done and -done[-1][0] <= now:
            out.append(done.pop()[2])
        return out

    def outstanding(self) -> int:
        return len(self._done)

    def describe(self) -> dict:
        out = {"name": self.name, "capacity_sectors": self.capacity, "law": self.law,
               "mean_service_ms": self.mean_s * 1e3}
        if self.servers > 1 or self.nr_hw_queues > 1:
            out["servers"] = self.servers
            out["nr_hw_queues"] = self.nr_hw_queues
        return out
