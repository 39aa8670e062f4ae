"""Completion in the multi-queue layer (``blk_mq_complete_request``, ``__blk_mq_end_request``,
``blk_mq_free_request``; block/blk-mq.c of 5.4 to 6.6). A base of
`blksim.block.mq.queue.MqQueue`: the device's completion event, the requests' tags freed
(sleepers woken), the elevator's ``completed_request``/``finish_request``, the hctxs that
asked for a restart run, then the bios end (after the completion's CPU work when the host
models it).
"""

from __future__ import annotations

from blksim.block.request import STAT_GROUP_OF_OP
from blksim.block.tracepoints import fire


class MqCompletion:
    """The completion steps of `MqQueue` (see the module docstring)."""

    def _arm_device(self) -> None:
        due = self.device.next_event_time()
        if due is not None and (self._dev_due is None or due < self._dev_due):
            self._dev_due = due
            self.clock.call_at(due, self._device_event)

    def _device_event(self, event) -> None:
        now = event.when
        if self._dev_due is not None and now < self._dev_due:
            return
        self._dev_due = None
        done = self.device.pop_completed(now)
        if not done:
            self._arm_device()
            return
        n = self.in_flight
        if n:
            self.vtime += (now - self._vt_last) / n
        self._vt_last = now
        elevator = self.elevator
        restart = []
        woken = []
        ended = None
        done_bio = self.rq_qos.done_bio
        if self.flush.live:
            # flush requests and flush sequences' data steps: block/mq/flush.py
            done, ended = self._flush_completions(done, now, restart, woken)
        for rq in done:
            hctx = self._driver_done(rq, now)
            self.stats.request_completed(STAT_GROUP_OF_OP[rq.op], rq.nr_sectors, rq.t_insert,
                                         now)
            if elevator is not None and self._elv_completed is not None and rq.elvpriv:
                self._elv_completed(rq, now)
            if done_bio is not None:
                self._qos_done_bios(rq, now)
            self._free(rq, now, woken)
            if hctx.restart and hctx not in restart:
                restart.append(hctx)
        if ended:
            done = done + ended
        for hctx in restart:           # blk_mq_sched_restart
            hctx.restart = False
            self.run_hw_queue(hctx, now)
        if elevator is not None and self._elv_timers and elevator.timers_changed:
            self._check_elevator_timer()
        self._arm_device()
        # The tasks woken for a tag retry before the bios' submitters go on: they run on
        # their own CPUs, while a submitter whose I/O completed has a system call to
        # return from and another to make before it asks for a tag (blksim's order for
        # events of one instant; without it a task that keeps its queue full would take
        # every freed tag for ever).
        for wake in woken:
            self._sleeping -= 1
            self._woken_now(wake)
        subscribers = self._tp_block_bio_complete
        name = self.name
        cpu_time = self.cpu_time
        for rq in done:
            # (an empty flush has no sectors: its bio gets the flush's device time)
            per_sector = rq.v_start / rq.nr_sectors if rq.nr_sectors else rq.v_start
            for bio in rq.bios:
                bio.t_complete = now
                bio.disk_s = per_sector * bio.nr_sectors
                bio.rq = rq.id
                bio.dev = name
                bio.bd = rq.breakdown
                if subscribers is not None:
                    fire(subscribers, "block_bio_complete", self, bio, now)
                if cpu_time is None:
                    end_io = bio.on_complete
                    if end_io is not None:
                        end_io(bio)
        if cpu_time is not None:
            # the interrupt's and the completions' CPU work: the bios end after it
            cpu_time.completed(self, done)
        if self._switch is not None and self.count == 0:
            self._finish_switch(now)

    def _qos_done_bios(self, rq, now: float) -> None:
        """``rq_qos_done_bio`` for each bio of a completed request: the kernel ends the
        bios (``blk_update_request`` -> ``bio_endio``) before it frees the request
        (``__blk_mq_end_request`` -> ``rq_qos_done``); blksim's bios end later, after the
        completion handler, but the policies hear of them in the kernel's order."""
        done_bio = self.rq_qos.done_bio
        for bio in rq.bios:
            done_bio(bio, now)

    def _free(self, rq, now: float, woken_into: list | None = None) -> None:
        """``blk_mq_free_request``: ``finish_request``, the tags back, the request gone.
        The sleepers a freed tag wakes retry after the current handler, or are added to
        ``woken_into`` for the caller to run."""
        elevator = self.elevator
        if elevator is not None and rq.sched_tag >= 0 and rq.elvpriv:
            elevator.finish_request(rq, now)
        hctx = rq.hctx
        woken = []
        if rq.tag >= 0:
            woken += hctx.tags.put(rq.tag)
            rq.tag = -1
        if rq.sched_tag >= 0:
            woken += hctx.sched_tags.put(rq.sched_tag)
            rq.sched_tag = -1
        self.count -= 1
        # rq_qos_done: the bios a policy (writeback throttling) lets go resume after
        # this handler
        qos = self.rq_qos
        if qos.done is not None:
            for bio in qos.done(rq, now):
                self._qos_release(bio)
            watch = qos.timer_watch
            if watch is not None and watch.timers_changed:
                qos.check_timers(self.clock, self._qos_release)
        if woken_into is not None:
            woken_into.extend(woken)
        else:
            for wake in woken:
                wake()
        if elevator is not None and self._elv_timers and elevator.timers_changed:
            self._check_elevator_timer()

    def _driver_done(self, rq, now: float):
        """The driver handed ``rq`` back (``blk_mq_complete_request``): its
        ``block_rq_complete``, its device time (virtual), one request fewer in flight on
        the queue and its hctx. Returns the hctx."""
        if self._tp_block_rq_complete is not None:
            fire(self._tp_block_rq_complete, "block_rq_complete", self, rq, now)
        rq.v_start = self.vtime - rq.v_start
        self.in_flight -= 1
        hctx = rq.hctx
        hctx.in_flight -= 1
        return hctx

    # ------------------------------------------------------------------ flushes
    def _flush_completions(self, done: list, now: float, restart: list, woken: list):
        """Split the device's completions: the flush machinery's (``flush_end_io``,
        ``mq_flush_data_end_io``: block/mq/flush.py) are handled here; returns the others
        and the requests whose flush sequence ended now (their bios end with the
        others', their tags freed here)."""
        flush = self.flush
        rest = []
        ended: list = []
        elevator = self.elevator
        for rq in done:
            if not flush.follows(rq):
                rest.append(rq)
                continue
            hctx = self._driver_done(rq, now)
            if elevator is not None and self._elv_completed is not None and rq.elvpriv:
                self._elv_completed(rq, now)
            flush.completed(self, rq, now, woken, ended)
            if hctx.restart and hctx not in restart:
                restart.append(hctx)
        for rq in ended:
            # the sequence is done (blk_flush_restore_request, blk_mq_end_request): the
            # request is accounted and freed; an empty flush never reached the driver
            if not rq.started:
                self.queued -= 1
            self.stats.request_completed(STAT_GROUP_OF_OP[rq.op], rq.nr_sectors, rq.t_insert,
                                         now)
            if self.rq_qos.done_bio is not None:
                self._qos_done_bios(rq, now)
            self._free(rq, now, woken)
            hctx = rq.hctx
            if hctx.restart and hctx not in restart:
                restart.append(hctx)
        return rest, ended

    def _end_empty_bio(self, bio, now: float) -> None:
        """An empty flush bio that needs no flush ends (``submit_bio_noacct``'s
        ``bio_endio``): no request, no device time."""
        bio.t_queue = bio.t_dispatch = bio.t_complete = now
        bio.disk_s = 0.0
        bio.dev = self.name
        if bio.on_complete is not None:
            bio.on_complete(bio)
