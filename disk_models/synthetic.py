"""Devices with a service-time law instead of mechanics, for queueing-theory checks.

`ServiceLawDevice` serves requests one at a time in arrival order, each taking
a time drawn from a law that ignores position: fixed (M/D/1 under Poisson
arrivals) or exponential (M/M/1). Teaching and tests compare blksim against
the formulas with them.
"""

from __future__ import annotations

import random
from collections import deque

from blksim.disk_models.base import Device, DeviceError


class ServiceLawDevice(Device):
    """A single-server FCFS device; ``law`` is ``"fixed"`` or ``"exponential"``.

    ``mean_s`` is the (mean) service time in seconds, ``capacity`` in sectors.
    Up to ``queue_depth`` requests are accepted; they are served one after another.
    """

    def __init__(self, law: str, mean_s: float, capacity: int = 1 << 40, queue_depth: int = 1,
                 seed: int = 0) -> None:
        if law not in ("fixed", "exponential"):
            raise DeviceError(f"service law {law!r} is not supported; valid: fixed, exponential")
        if mean_s <= 0:
            raise DeviceError(f"mean service time must be positive, found {mean_s!r}")
        if queue_depth < 1:
            raise DeviceError(f"queue_depth must be at least 1, found {queue_depth!r}")
        self.name = f"{law} service, mean {mean_s * 1e3:g} ms"
        self.law = law
        self.mean_s = mean_s
        self.capacity = capacity
        self.queue_depth = queue_depth
        self._rng = random.Random(seed)
        self._done: deque = deque()        # (completion time, request), in order
        self._free_at = 0.0

    def _draw(self) -> float:
        if self.law == "fixed":
            return self.mean_s
        return self._rng.expovariate(1.0 / self.mean_s)

    def can_accept(self) -> bool:
        return len(self._done) < self.queue_depth

    def submit(self, rq, now: float) -> None:
        start = now if now > self._free_at else self._free_at
        self._free_at = start + self._draw()
        self._done.append((self._free_at, rq))

    def next_event_time(self) -> float | None:
        return self._done[0][0] if self._done else None

    def pop_completed(self, now: float) -> list:
        out = []
        done = self._done
        while done and done[0][0] <= now:
            out.append(done.popleft()[1])
        return out

    def outstanding(self) -> int:
        return len(self._done)

    def describe(self) -> dict:
        return {"name": self.name, "capacity_sectors": self.capacity, "law": self.law,
                "mean_service_ms": self.mean_s * 1e3}
