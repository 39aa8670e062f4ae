"""The simulation clock: a thin adapter over simpy's event loop.

The block layer and the workload processes only need ``now`` and
``call_at(when, fn)``; each call costs one entry on simpy's queue. Callbacks
receive the queued event (a `Call`) as their one argument; its ``when`` is the
time it fires, so a callback need not ask the clock, and a callback that wants
to run again can put that same event back with ``requeue(when, event)``.

``call_at`` puts the event on simpy's queue at exactly ``when``. Going through
``env.timeout(when - now)`` would make simpy add the delay back to ``now``,
and the sum can miss ``when`` by one unit in the last place: a device whose
completion is due at ``when`` would then be asked at a time just before it.
This reaches into ``Environment._queue``, ``_eid`` and ``_now`` (simpy 4), which is
why setup.cfg pins simpy below 5; `run_events`, the engine's run loop, does too.
"""

from __future__ import annotations

from heapq import heappop, heappush

import simpy
from simpy.events import NORMAL, URGENT, Event

from blksim._compat import ON_PYPY

#: Priority of `run_events`'s stop mark when events due at the limit still run:
#: after every NORMAL (1) and URGENT (0) event of the same time, whenever queued.
_AFTER_NORMAL = NORMAL + 1


class Call(list):
    """A function on simpy's queue: what `SimpyClock.call_at` queues, ``fn`` being
    called with the `Call` itself as its one argument. ``when`` is the time it
    fires (set each time it is queued).

    To simpy it is an event that was triggered successfully (``_ok``) whose
    callbacks are ``[fn]``: the `Call` is that list itself, so making one is a
    single C-level call, cheaper than making a simpy `Event` and setting it up.
    ``Environment.step`` and ``run`` process it like any other event;
    `run_events` calls ``fn`` directly. A `Call` that has fired may be queued
    again (`SimpyClock.requeue`): nothing in it changes when it runs, and the
    engine's two events per request then cost no allocation.
    """

    __slots__ = ("when",)
    _ok = True
    _value = None

    @property
    def callbacks(self) -> list:
        """``[fn]``, as simpy's ``Environment.step`` reads them."""
        return self

    @callbacks.setter
    def callbacks(self, _value) -> None:
        pass        # step() sets None once it is processed; a Call never runs twice


class SimpyClock:
    """``now`` (seconds) and ``call_at`` on a `simpy.Environment`."""

    __slots__ = ("env", "_queue", "_eid")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        # Bound once: simpy never replaces the heap list or the id counter.
        self._queue = env._queue
        self._eid = env._eid

    @property
    def now(self) -> float:
        """Current simulated time in seconds."""
        return self.env._now

    def call_at(self, when: float, fn) -> None:
        """Call ``fn(event)`` at absolute time ``when`` exactly (now, if ``when`` is past)."""
        now = self.env._now
        if when < now:
            when = now
        call = Call((fn,))
        call.when = when
        _push(self._queue, (when, NORMAL, next(self._eid), call))

    def requeue(self, when: float, call: Call) -> None:
        """Queue ``call`` (a `Call` that has fired: the event a callback was given)
        again, at ``when`` exactly (now, if ``when`` is past): as ``call_at(when,
        its function)``, without making a new event."""
        now = self.env._now
        if when < now:
            when = now
        call.when = when
        _push(self._queue, (when, NORMAL, next(self._eid), call))


def _push_short(queue: list, entry: tuple) -> None:
    """``heappush(queue, entry)``, doing the push onto a queue of one entry here.

    The engine's queue nearly always holds one or two entries. On PyPy heapq is
    Python, and its sift loop, compiled as a loop of its own, costs a jump in and
    out of it for its one step; the two cases below leave the list exactly as
    heappush leaves it (entries never compare equal: each has its own id).
    """
    if len(queue) == 1:
        head = queue[0]
        if entry < head:
            queue[0] = entry
            queue.append(head)
        else:
            queue.append(entry)
    else:
        heappush(queue, entry)


#: The clock's push: on CPython heapq is C, and a Python function around it only adds a
#: call (one per event), so the push there is heappush itself.
_push = _push_short if ON_PYPY else heappush


def run_events(env: simpy.Environment, until: float | None = None, *,
               inclusive: bool = False, every: int = 0, tick=None) -> None:
    """Process ``env``'s events in order, as ``env.run(until)`` does, in a tighter loop.

    Runs until the queue is empty or, with ``until``, until simulated time
    ``until``; ``env.now`` is then ``until``. Events due exactly at ``until``
    are left unprocessed, as ``env.run(until=...)`` leaves them (its stop event
    is URGENT), unless ``inclusive`` (then every event due at or before
    ``until`` runs, including those they queue for the same time). With
    ``tick``, ``tick()`` is called after every ``every`` events (a progress bar).

    Same order and effects as simpy's loop: the stop mark is an ordinary queue
    entry, so the heap decides what comes before it. What it saves is
    ``Environment.step``'s method call and, for a `Call` (nearly every event of
    a run), the generic callback-list handling: its one function is called
    directly.
    """
    queue = env._queue
    stop = None
    if until is not None:
        if until <= env._now:
            raise ValueError(f"until ({until}) must be greater than the current simulation time")
        stop = Event(env)
        stop._ok = True         # triggered, as env.run's own stop event
        stop._value = None
        heappush(queue, (until, _AFTER_NORMAL if inclusive else URGENT, next(env._eid), stop))
    left = every if tick is not None else -1
    # `while True` rather than `while queue`: CPython 3.11 specialises (quickens) a
    # function's bytecode only after a few calls or unconditional backward jumps,
    # and this loop is entered once; a conditional loop end would leave it generic.
    while True:
        if not queue:
            return
        env._now, _, _, event = heappop(queue)
        if event.__class__ is Call:
            event[0](event)
        elif event is stop:
            return
        else:
            # Any other simpy event: exactly what Environment.step does with it.
            callbacks = event.callbacks
            event.callbacks = None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
        if left > 0:
            left -= 1
            if not left:
                left = every
                tick()
