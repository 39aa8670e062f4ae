"""The simulation clock: a thin adapter over simpy's event loop.

The block layer and the workload processes only need ``now`` and
``call_at(when, fn)``; each call costs one simpy event. Callbacks receive the
simpy event as their one argument.
"""

from __future__ import annotations

import simpy
from simpy.events import Timeout


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
        """Call ``fn(event)`` at absolute time ``when`` (now, if ``when`` is past)."""
        env = self.env
        delay = when - env._now
        ev = Timeout(env, delay if delay > 0.0 else 0.0)
        ev.callbacks.append(fn)
