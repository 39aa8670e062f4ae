"""The simulation clock: a thin adapter over simpy's event loop.

The block layer and the workload processes only need ``now`` and
``call_at(when, fn)``; each call costs one simpy event. Callbacks receive the
simpy event as their one argument.

``call_at`` puts the event on simpy's queue at exactly ``when``. Going through
``env.timeout(when - now)`` would make simpy add the delay back to ``now``,
and the sum can miss ``when`` by one unit in the last place: a device whose
completion is due at ``when`` would then be asked at a time just before it.
This reaches into ``Environment._queue`` and ``_eid`` (simpy 4), which is why
setup.cfg pins simpy below 5.
"""

from __future__ import annotations

from heapq import heappush

import simpy
from simpy.events import NORMAL, Event


class SimpyClock:
    """``now`` (seconds) and ``call_at`` on a `simpy.Environment`."""

    __slots__ = ("env",)

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env

    @property
    def now(self) -> float:
        """Current simulated time in seconds."""
        return self.env._now

    def call_at(self, when: float, fn) -> None:
        """Call ``fn(event)`` at absolute time ``when`` exactly (now, if ``when`` is past)."""
        env = self.env
        ev = Event(env)
        ev._ok = True
        ev._value = None
        ev.callbacks.append(fn)
        if when < env._now:
            when = env._now
        heappush(env._queue, (when, NORMAL, next(env._eid), ev))
