"""Switching the elevator of the 2.6 queue at run time, as a write to ``queue/scheduler``
does (``elevator_switch``, block/elevator.c, Linux 2.6.18): bypass mode, a forced drain
of the old elevator, a wait until every request it handled has completed, then the new
elevator. A base of `blksim.block.legacy_queue.RequestQueue`, whose attributes it uses.
"""

from __future__ import annotations

import math

from blksim.block.elevator import msecs_to_jiffies, record_unchanged_switch
from blksim.block.elevator_boundary import describe
from blksim.block.tracepoints import fire


class _Switch:
    """An elevator switch in progress (``elevator_switch`` with QUEUE_FLAG_ELVSWITCH set)."""

    __slots__ = ("factory", "name", "on_done", "old_left", "asked", "started", "drained",
                 "bypassed")

    def __init__(self, factory, name: str, on_done, old_left: int, asked: float,
                 started: float) -> None:
        self.factory = factory
        self.name = name
        self.on_done = on_done
        self.old_left = old_left                 # old-elevator requests not yet completed
        self.asked = asked                       # when the switch was asked for
        self.started = started                   # when it started (after an earlier one)
        self.drained = 0                         # requests the forced dispatch released
        self.bypassed = 0                        # requests inserted in bypass mode


class LegacySwitching:
    """The elevator switch of `RequestQueue` (see the module docstring)."""

    def switch_elevator(self, elevator_factory, name: str, on_done=None) -> None:
        """Switch to another elevator now, as writing ``queue/scheduler`` does.

        Follows ``elevator_switch`` of Linux 2.6.18: set bypass mode
        (QUEUE_FLAG_ELVSWITCH), drain the old elevator with forced dispatch (its
        requests go to the dispatch list in the order it releases them), then,
        while requests the old elevator handled are still allocated, run the
        queue and sleep ``msleep(10)`` (jiffy-quantised), draining again after
        each sleep. Meanwhile new requests get no elevator data and are inserted
        at the back of the dispatch list (``ELEVATOR_INSERT_BACK``: no merging,
        no plugging, the queue runs at once, no elevator hooks). Once the last
        old request has completed the new elevator (``elevator_factory(dq)``) is
        attached and bypass mode ends; ``on_done(info)`` is then called with a
        dict describing the switch. A switch asked for while another is in
        progress starts when that one ends (sysfs writes are serialised).
        Writing the active elevator's name does nothing (2.6.18 returns at once).
        """
        now = self.clock.now
        if self._switch is not None:
            self._switch_waiting.append((elevator_factory, name, on_done, now))
            return
        self._start_switch(elevator_factory, name, on_done, now)

    def _start_switch(self, factory, name: str, on_done, asked: float) -> None:
        now = self.clock.now
        if name == self.elevator_name:
            record_unchanged_switch(self.switches_done, name, asked, now, on_done)
            self._next_switch()
            return
        # q->rq.elvpriv: the allocated requests that carry elevator data.
        # (a barrier's requests carry none: block/flush.py counts them)
        sw = _Switch(factory, name, on_done, self.count[0] + self.count[1] - self._unsorted
                     - self.ordered.allocated, asked, now)
        self._switch = sw
        self._guard_hooks(sw)
        self._switch_poll()

    def _guard_hooks(self, sw) -> None:
        """Call the elevator's activate / completed hooks only for requests it
        handled (``blk_sorted_rq``); count the completions of old-elevator
        requests (``sw``, during a switch) and of bypass requests."""
        activate_hook = self._elv_activate
        completed_hook = self._elv_completed

        def activate(rq, t):
            if rq.elvpriv and activate_hook is not None:
                activate_hook(rq, t)

        def completed(rq, t):
            if rq.elvpriv:
                if sw is not None:
                    sw.old_left -= 1
                if completed_hook is not None:
                    completed_hook(rq, t)
            else:
                self._unsorted -= 1
                if (sw is None and self._unsorted == 0
                        and self._elv_completed is completed):
                    self._elv_activate = activate_hook   # no bypass request left
                    self._elv_completed = completed_hook

        self._elv_activate = activate
        self._elv_completed = completed

    def _drain_elevator(self, now: float) -> None:
        """``elv_drain_elevator``: forced dispatch until the elevator releases nothing."""
        elevator = self.elevator
        dq = self.dq
        moved = 0
        while True:
            before = len(dq)
            n = elevator.dispatch(now, True)
            if not n:
                break
            if len(dq) == before:
                raise self.elevator_fault("dispatch(force=True)", f"returned {describe(n)} "
                                          f"but moved no request to the dispatch list")
            if len(dq) > self.queued:       # more than it was ever given: some twice
                raise self.elevator_fault("dispatch(force=True)", f"put {len(dq)} requests "
                                          f"on the dispatch list, but only {self.queued} "
                                          f"are queued (one dispatched twice?)")
            moved += 1
        if self._switch is not None:        # (a barrier drains it too: block/flush.py)
            self._switch.drained += moved
        if not elevator.empty():
            raise self.elevator_fault("dispatch(force=True)", f"left the elevator not "
                                      f"empty() after a forced drain ({elevator.queued()!r} "
                                      f"request(s) left)")
        if len(dq) < self.queued:
            # Every queued request is in the elevator or on the list (run_queue takes
            # none off during a switch's drain): the elevator lost some.
            raise self.elevator_fault("dispatch(force=True)", f"drained the elevator, yet "
                                      f"{self.queued - len(dq)} request(s) given to add() "
                                      f"are neither on the dispatch list nor dispatched "
                                      f"(lost)")

    def _switch_poll(self, _ev=None) -> None:
        """One pass of the switch's drain loop (at the switch and after every msleep)."""
        sw = self._switch
        now = self.clock.now
        self._drain_elevator(now)
        if sw.old_left <= 0:
            self._finish_switch(now)
            return
        # blk_remove_plug + request_fn, then msleep(10): msecs_to_jiffies(10) + 1
        # jiffies from the current tick.
        self.plugged = False
        self.run_queue()
        hz = self.settings.hz
        when = (math.floor(now * hz + 1e-9) + msecs_to_jiffies(10, hz) + 1) / hz
        self.clock.call_at(when, self._switch_poll)

    def _bypass_add(self, rq) -> None:
        """Insert a request made during a switch: back of the dispatch list, queue run."""
        if self._tp_block_rq_insert is not None:     # elv_insert, ELEVATOR_INSERT_BACK
            fire(self._tp_block_rq_insert, "block_rq_insert", self, rq, self.clock.now)
        self._switch.bypassed += 1
        self._unsorted += 1
        rq.elvpriv = False
        rq.nomerge = True                 # REQ_SOFTBARRIER: never merged into
        rq.in_elevator = False
        self.dq.append(rq)                # ELEVATOR_INSERT_BACK (the boundary is kept)
        self.plugged = False              # blk_remove_plug + request_fn
        self.run_queue()

    def _finish_switch(self, now: float) -> None:
        sw = self._switch
        elevator = self._built(sw.factory)
        if elevator.wants_device:
            elevator.attach_device(self.device)
        self.elevator = elevator
        self.elevator_name = sw.name
        self.last_merge = None
        self.merge_hash.clear()
        self._elv_wake_due = None         # the old elevator's timer no longer counts
        self._elevator_hooks()
        self._switch = None
        if self._unsorted:
            # Bypass requests still queued or at the device: the new elevator never sees them.
            self._guard_hooks(None)
        info = {"scheduler": sw.name, "asked_s": sw.asked, "started_s": sw.started,
                "done_s": now, "drained": sw.drained, "bypassed": sw.bypassed, "noop": False}
        self.switches_done.append(info)
        if sw.on_done is not None:
            sw.on_done(info)
        self.run_queue()
        self._next_switch()

    def _next_switch(self) -> None:
        if self._switch_waiting and self._switch is None:
            factory, name, on_done, asked = self._switch_waiting.pop(0)
            self._start_switch(factory, name, on_done, asked)

    @property
    def switching(self) -> bool:
        """True while an elevator switch is in progress (bypass mode)."""
        return self._switch is not None
