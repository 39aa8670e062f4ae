"""The elevator boundary of the legacy block layer: what an elevator hands back to the
request queue, checked where the queue takes it.

What is checked (the kernel has no such checks: a 2.6.18 elevator is trusted code, and a
request started twice is a BUG or memory corruption there):

* a request on the dispatch list that is not a queued request of this queue: one
  already dispatched, one merged away, another disk's, something else;
* a dispatch that claims requests it did not move, or that lost requests it was given;
* a ``wakeup_at`` that is no time at or after now;
* a ``merge_candidate``, ``former`` or ``latter`` that is not a request;
* queue runs asked for without end that issue nothing, at one instant or while requests
  wait on an idle device (`SPIN_LIMIT`, `STALL_LIMIT`).

blksim stops the run with an `ElevatorFault` naming the scheduler, the hook and the value
instead of completing bios twice or stalling. The per-request cost is one test per
request taken off the dispatch list.

`ElevatorBoundary` holds these checks for `blksim.block.legacy_queue.RequestQueue` (its one
subclass, whose attributes they read: the elevator, the dispatch list, the counts);
`plugin_fault` turns an exception that escaped a plugin's hook into one line.
"""

from __future__ import annotations

import math

from blksim.block.elevator import Elevator
from blksim.block.request import Request


#: Queue runs at one instant, asked for by ``kick_queue`` or a ``wakeup_at`` that has
#: come, that issue nothing, before an elevator is taken to be spinning (asking again
#: from the run it asked for, so that simulated time cannot pass). blksim's choice: far
#: more than legitimate ones at one instant, each of which needs an event of its own.
SPIN_LIMIT = 100_000
#: Such runs in a row while requests wait and the device is idle, with no completion
#: between them, before the elevator is taken to hold its requests for ever (time passes,
#: but a run without a duration would never end). blksim's choice: a kernel elevator
#: that idles (AS, CFQ) dispatches after one timer.
STALL_LIMIT = 100_000


class SimulationError(RuntimeError):
    """The simulation reached a state the model does not allow (bad input that slipped through)."""


class ElevatorFault(SimulationError):
    """A scheduler (a plugin, as a rule) handed the block layer something that cannot mean
    anything: a request dispatched twice, a wake-up time that is no time. One line naming
    the scheduler, the queue, the hook and the value (see `ElevatorBoundary.elevator_fault`)."""


def describe(value) -> str:
    """A value a hook handed over, for an error line: a request by its id, direction,
    place and size; anything else by its repr, cut short."""
    if isinstance(value, Request):
        return (f"request #{value.id} ({'W' if value.write else 'R'} "
                f"{value.sector}+{value.nr_sectors})")
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ElevatorBoundary:
    """The checks a request queue makes of its elevator (a base of `RequestQueue`)."""

    def elevator_fault(self, hook: str, what: str) -> ElevatorFault:
        """The error that stops the run: the elevator's ``hook`` handed over something
        that cannot mean anything (``what``: what it was, and what was expected)."""
        cls = type(self.elevator)
        return ElevatorFault(f"scheduler {self.elevator_name!r} ({cls.__module__}:"
                             f"{cls.__qualname__}) on {self.name}: {hook} {what}")

    def _built(self, factory) -> Elevator:
        """The elevator ``factory`` builds on this queue's dispatch list, checked: an
        `Elevator` that feeds this list (its ``__init__`` ran the base class's)."""
        try:
            elevator = factory(self.dq)
        except BaseException as exc:    # noqa: B036 -- a plugin's create() may raise anything
            fault = plugin_fault(exc)
            if fault is None:
                raise
            raise fault from exc
        if isinstance(elevator, Elevator) and getattr(elevator, "dq", None) is self.dq \
                and hasattr(elevator, "timers_changed"):
            return elevator
        cls = getattr(factory, "scheduler", None) or getattr(factory, "__self__", None) \
            or type(elevator)
        label = f"{getattr(cls, 'name', '')!r} ({cls.__module__}:{cls.__qualname__})"
        if not isinstance(elevator, Elevator):
            what = (f"create() returned {describe(elevator)}: expected an instance of "
                    f"blksim.block.elevator.Elevator")
        else:
            what = ("create() built an elevator without the dispatch list it was given "
                    "(its __init__ must call super().__init__(dispatch_queue, params, hz))")
        raise ElevatorFault(f"scheduler {label} on {self.name}: {what}")

    def _bad_dispatch(self, rq) -> None:
        """Raise for ``rq``, taken off the dispatch list, that is no queued request."""
        where = f"put {describe(rq)} on the dispatch list"
        if rq.__class__ is not Request:
            raise self.elevator_fault("dispatch()", f"{where}: not a request of the block "
                                      f"layer (the requests it gave to add())")
        if rq.started and rq.t_dispatch < 0.0:
            raise self.elevator_fault("dispatch()", f"{where} after the block layer merged "
                                      f"it into another request (requests_merged() said so)")
        if rq.started:
            raise self.elevator_fault("dispatch()", f"{where} again: it was already "
                                      f"dispatched at {rq.t_dispatch:.9f} s")
        raise self.elevator_fault("dispatch()", f"{where}: a request queued on "
                                  f"{rq.owner.name}, not on {self.name} (state shared between "
                                  f"the scheduler's instances, one per disk?)")

    def _nothing_dispatched(self, moved) -> None:
        """Raise when a dispatch that moved nothing claims it did, or when the elevator
        says it is empty while requests given to it wait on neither it nor the list."""
        if moved:
            raise self.elevator_fault("dispatch()", f"returned {describe(moved)} but moved "
                                      f"no request to the dispatch list")
        elevator = self.elevator
        if elevator.timers_changed and not self._elv_timers:
            raise self.elevator_fault(
                "dispatch()", f"moved no request and waits for wakeup_at = "
                f"{describe(elevator.wakeup_at)} or kick_queue = "
                f"{describe(elevator.kick_queue)}, which the block layer honours only for a "
                f"scheduler that declares uses_timers = True")
        raise self.elevator_fault("dispatch()", f"moved no request and empty() is True, but "
                                  f"{self.queued} request(s) given to add() were never "
                                  f"dispatched (lost)")

    def _check_wakeup(self, due) -> None:
        """``wakeup_at`` must be a time (s) at or after now: nothing else can fire."""
        now = self.clock.now
        if isinstance(due, (int, float)) and not isinstance(due, bool) \
                and math.isfinite(due) and due >= now:
            return
        if isinstance(due, (int, float)) and not isinstance(due, bool) and due < now:
            value = f"{due!r} s, before now ({now:.9f} s)"
        else:
            value = describe(due)
        raise self.elevator_fault("wakeup_at =", f"{value}: expected None (no timer) or a "
                                  f"finite time in seconds at or after now")

    def _idle_run(self, what: str) -> None:
        """Count a queue run the elevator asked for that issued nothing; stop a run in
        which such runs repeat at one instant without end (a livelock: time stands)."""
        now = self.clock.now
        if now != self._spin_at:
            self._spin_at = now
            self._spins = 0
        self._spins += 1
        if self._spins > SPIN_LIMIT:
            raise self.elevator_fault(what, f"asked for {self._spins - 1:,} queue runs at "
                                      f"{now:.9f} s that issued nothing: simulated time "
                                      f"cannot pass (asked again from dispatch() or "
                                      f"timer_fired() themselves?)")
        if self.in_flight or not self.queued:
            return
        done = self.stats.ios[0] + self.stats.ios[1]
        if done != self._stall_done:
            self._stall_done = done
            self._stalls = 0
            self._stall_since = now
        self._stalls += 1
        if self._stalls > STALL_LIMIT:
            raise self.elevator_fault(what, f"asked for {self._stalls - 1:,} queue runs from "
                                      f"{self._stall_since:.9f} s to {now:.9f} s that issued "
                                      f"nothing while {self.queued} request(s) waited and the "
                                      f"device was idle: they would wait for ever")


# ------------------------------------------------------------------ a plugin that raises
def _is_plugin_class(cls) -> bool:
    """An elevator class of a scheduler plugin: one defined outside blksim."""
    module = getattr(cls, "__module__", "") or ""
    return isinstance(cls, type) and issubclass(cls, Elevator) and \
        module != "blksim" and not module.startswith("blksim.")


def plugin_fault(exc: BaseException) -> ElevatorFault | None:
    """The `ElevatorFault` that stands for ``exc`` when it escaped a hook of a scheduler
    plugin (plugins are user code behind a boundary: docs/plugins.md), else None.

    Read from the traceback, after the fact, so that no hook call pays for a ``try``:
    the outermost frame of the plugin's own modules whose ``self`` is a plugin's
    elevator (or whose ``cls`` is a plugin's elevator class, as in ``create``) is the
    hook that was called (code a plugin inherits from blksim is blksim's), the
    innermost frame of the plugin's modules is where it raised, and the nearest
    request queue outside the hook names the disk. A built-in elevator raising is a
    bug of blksim's and keeps its traceback (None here); an `ElevatorFault` or other
    `SimulationError` already is one line, and an interruption (KeyboardInterrupt) is
    no fault."""
    if isinstance(exc, (SimulationError, KeyboardInterrupt)):
        return None
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    entry = None
    for k, (frame, _line) in enumerate(frames):
        owner = frame.f_locals.get("self", frame.f_locals.get("cls"))
        cls = owner if isinstance(owner, type) else type(owner)
        if owner is None or not _is_plugin_class(cls):
            continue
        modules = {c.__module__ for c in cls.__mro__ if _is_plugin_class(c)}
        if frame.f_globals.get("__name__") in modules:     # the plugin's own code
            entry = k, cls
            break
    if entry is None:
        return None
    k, cls = entry
    origin = next((f"{frame.f_code.co_filename}:{line}" for frame, line in reversed(frames)
                   if frame.f_globals.get("__name__") in modules), "?")
    disk = next((frame.f_locals["self"].name for frame, _line in reversed(frames[:k])
                 if isinstance(frame.f_locals.get("self"), ElevatorBoundary)), None)
    return ElevatorFault(f"scheduler {getattr(cls, 'name', cls.__name__)!r} "
                         f"({cls.__module__}:{cls.__qualname__})"
                         f"{'' if disk is None else f' on {disk}'}: "
                         f"{frames[k][0].f_code.co_name}() raised {_one_line(exc)} "
                         f"(at {origin})")


def _one_line(exc: BaseException) -> str:
    """``Type: message`` of an exception on one line (``Type`` alone without one)."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
