"""Switching the elevator of a multi-queue queue, as a write to ``queue/scheduler`` does
(``elevator_switch``, block/elevator.c, 5.4-6.6): the queue is frozen
(``blk_mq_freeze_queue``), drained, the old elevator exited and the new one attached with
fresh scheduler tags, then thawed. A base of `blksim.block.mq.queue.MqQueue`, whose
attributes it uses.
"""

from __future__ import annotations

from blksim.block.elevator import record_unchanged_switch


class MqSwitching:
    """The elevator switch of `MqQueue` (see the module docstring)."""

    def switch_elevator(self, elevator_factory, name: str, on_done=None) -> None:
        """Write ``name`` to ``queue/scheduler`` (``elevator_switch``, 5.4-6.6): the queue
        is frozen (new bios wait, ``blk_mq_freeze_queue``) until every request has
        completed, the old elevator is exited, the new one attached with fresh
        scheduler tags, and the queue thawed. ``elevator_factory`` is None for none."""
        now = self.clock.now
        if self._switch is not None:
            self._switch_waiting.append((elevator_factory, name, on_done, now))
            return
        if name == self.elevator_name:
            record_unchanged_switch(self.switches_done, name, now, now, on_done)
            return
        self._switch = (elevator_factory, name, on_done, now, [])
        # the plugs are flushed as their tasks run into the frozen queue; drain now
        for plug in list(self._plugs.values()):
            if plug.rqs:
                self._flush_plug(plug, now, explicit=False)
        self.run_hw_queues(now)
        if self.count == 0:
            self._finish_switch(now)

    def _finish_switch(self, now: float) -> None:
        factory, name, on_done, asked, frozen = self._switch
        # blk_mq_init_sched sets nr_requests to the new scheduler's default: a value
        # written before the switch does not carry over
        self._user_nr_requests = None
        self.last_merge = None
        self.merge_hash.clear()
        self._elv_wake_due = None
        self._attach(factory, name)
        self._switch = None
        info = {"scheduler": name, "asked_s": asked, "started_s": asked, "done_s": now,
                "drained": 0, "bypassed": len(frozen), "noop": False}
        self.switches_done.append(info)
        if on_done is not None:
            on_done(info)
        for bio in frozen:               # blk_mq_unfreeze_queue: the waiters go on
            self._sleeping -= 1
            self.clock.call_at(now, lambda _ev, b=bio: self._thawed(b))
        if self._switch_waiting:
            factory, name, on_done, _asked = self._switch_waiting.pop(0)
            self.switch_elevator(factory, name, on_done)

    def _thawed(self, bio) -> None:
        """A bio that waited for the switch enters the thawed queue (merging first)."""
        if self._submit(bio, self.clock.now):
            wake = self._on_request.pop(bio.id, None)
            if wake is not None:
                wake(bio)
        else:
            self.waited -= 1         # asleep for a tag now: one bio, one wait

    @property
    def switching(self) -> bool:
        """True while an elevator switch is in progress (the queue frozen)."""
        return self._switch is not None
