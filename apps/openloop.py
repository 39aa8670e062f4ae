"""The open loop of an OLTP database (``rate``): transactions arrive as a Poisson process
of ``rate`` per second (exponential gaps drawn from the run's seed) whatever the database
does, and each is served by the first idle session; one that arrives while every session
is busy waits, first come first served, for one to finish ("wait for a session").

A transaction's response time runs from its arrival, so that it includes that wait, and
Little's law ties the figures together: the mean number of transactions in the system
(waiting or being served, integrated over the measured window) is the completion rate
times the mean response time. The rate is *held* when transactions complete at no less
than 98 % of the rate at which they arrived in the window (blksim's choice of margin:
a stable queue completes what arrives, up to the transactions still in it at the end).

Memory does not grow with the run: the waiting transactions are kept (their arrival
times) up to ``MAX_BACKLOG``; arrivals beyond that are dropped and counted, which is
reported (a rate that far beyond the database's is not held).
"""

from __future__ import annotations

import random
from collections import deque

from blksim.common.histogram import StreamingHistogram, latency_ms

#: Waiting transactions kept at most (blksim's choice; beyond it arrivals are dropped).
MAX_BACKLOG = 100_000
#: The share of the arrival rate completed for the rate to count as held (blksim's choice).
HELD_SHARE = 0.98


class Arrivals:
    """The arrival process of one database and its queue of waiting transactions."""

    def __init__(self, clock, rate: float, seed: str, warmup: float, horizon: float) -> None:
        self.clock = clock
        self.rate = rate
        self.rng = random.Random(f"{seed}/arrivals")
        self.warmup = warmup
        self.horizon = horizon
        self.idle: list = []            # sessions waiting for a transaction
        self.backlog: deque = deque()   # arrival times of transactions waiting for a session
        self.arrived = 0                # in the window
        self.dropped = 0
        self.waited = 0                 # of those served in the window, how many waited
        self.wait = StreamingHistogram()
        self.in_system = 0              # transactions arrived and not finished
        self._area = 0.0                # integral of in_system over the window
        self._t = warmup

    def start(self) -> None:
        """The first arrival."""
        self.clock.call_at(self.rng.expovariate(self.rate), self._arrive)

    def _counting(self, now: float) -> bool:
        return self.warmup <= now <= self.horizon

    def _count(self, now: float, delta: int) -> None:
        """``in_system`` changes by ``delta`` at ``now``; its integral over the window."""
        t = min(max(now, self.warmup), self.horizon)
        self._area += self.in_system * (t - self._t)
        self._t = t
        self.in_system += delta

    def _arrive(self, _ev=None) -> None:
        now = self.clock.now
        nxt = now + self.rng.expovariate(self.rate)
        if nxt < self.horizon:
            self.clock.call_at(nxt, self._arrive)
        if self._counting(now):
            self.arrived += 1
        if self.idle:
            self._count(now, 1)
            self.idle.pop().serve(now)
        elif len(self.backlog) >= MAX_BACKLOG:
            if self._counting(now):
                self.dropped += 1
        else:
            self._count(now, 1)
            self.backlog.append(now)

    def ready(self, session) -> None:
        """``session`` is idle: the oldest waiting transaction, or wait for one."""
        if self.backlog:
            arrived = self.backlog.popleft()
            now = self.clock.now
            if self._counting(now):
                self.waited += 1
                self.wait.add(now - arrived)
            session.serve(arrived)
        else:
            self.idle.append(session)

    def finished(self, now: float) -> None:
        """A transaction finished at ``now``."""
        self._count(now, -1)

    def figures(self, t0: float, t1: float, completed: int) -> dict:
        """The open loop's figures over the window [t0, t1] (``completed``: transactions
        finished in it)."""
        span = t1 - t0
        area = self._area + self.in_system * (t1 - min(max(self._t, t0), t1))
        arrival_rate = self.arrived / span
        tps = completed / span
        w = self.wait.summary()
        return {"rate": self.rate, "arrivals_per_s": round(arrival_rate, 6),
                "tps": round(tps, 6),
                "held": tps >= HELD_SHARE * arrival_rate and not self.dropped,
                "waited": self.waited, "dropped": self.dropped,
                "session_wait_ms": latency_ms(w, ("mean", "p50", "p95", "p99", "max")),
                "mean_in_system": round(area / span, 6),
                "waiting_at_end": len(self.backlog)}
