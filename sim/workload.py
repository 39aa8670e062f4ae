"""Processes that submit bios: fio-style job clones (the trace replays are
`blksim.sim.trace_process`'s).

Each process is a small callback-driven state machine on the clock (no simpy
generator per process, so the per-I/O cost stays at one or two events).
Address patterns and trace records come from `traces/`, which is plain Python.
"""

from __future__ import annotations

from itertools import count

from blksim.block.psi import IDLE, IOWAIT, RUNNING
from blksim.block.request import REQ_OP_DISCARD, REQ_OP_READ, Bio, ioprio_value
# the trace replays, importable from here too (their module: blksim.sim.trace_process)
from blksim.sim.trace_process import ClosedTraceReplay, TraceReplay  # noqa: F401

class BioIds:
    """Hands out bio ids in submission order (deterministic across runs).

    ``take()`` returns the next id (0, 1, 2, ...); it is an `itertools.count`'s
    ``__next__``, so taking an id costs no Python call.
    """

    __slots__ = ("take",)

    def __init__(self) -> None:
        self.take = count().__next__


class JobProcess:
    """One clone of a [[job]]: closed loop, or with ``rate_iops``/``rate`` open loop.

    **Closed loop**: fio's ``do_io`` with the job's engine (`blksim.sim.ioengine` has the
    rules, batching and plugging, and their sources). After every ``thinktime_blocks``
    reaped completions, the I/O that would replace the last of them waits ``thinktime``
    (blksim's think time, docs/jobs.md).

    **Open loop**: arrivals at the job's rate; at most ``iodepth`` outstanding only when
    the job sets ``iodepth`` (or its engine is synchronous), later arrivals wait for a
    completion. Each arrival is submitted on its own.

    A process whose bio finds no free request sleeps (``get_request_wait``,
    ``blk_mq_get_tag``) when it runs open loop or its engine sleeps there
    (`Engine.sleeps_for_request`): open-loop arrivals due meanwhile are submitted when it
    wakes, late; ``max_lag`` is the furthest (s) its submissions fell behind its
    arrivals' schedule, `lag` how far behind it is now. ``cpu`` is the CPU it runs on
    (every bio carries it).

    ``cpu_time`` (a `blksim.sim.cpu_time.CpuTime`, or None: no CPU costs): each system
    call of the closed loop that submits (`_commit`) or reaps (`_reap`) is a piece of
    work on the process's CPU, and the process goes on when it has run; the bios are
    submitted as the call ends.
    """

    kind = "job"
    #: the methods the clock, the queue and the CPUs call back: after each, a watched
    #: process's state may have changed (`psi_state`; `blksim.sim.pressure`)
    ENTRY_POINTS = ("_begin", "_done", "_reaped", "_thought", "_called", "_woken_in_batch",
                    "_fsync_done", "_arrivals", "_woken", "_completed")

    def __init__(self, clock, queue, ids: BioIds, pid: int, name: str, job, pattern,
                 horizon: float | None, iodepth_given: bool = True, *,
                 kernel: str = "2.6.18", cpu: int = 0, cpu_time=None) -> None:
        from blksim.sim.ioengine import engine_of, plug_rule
        self.clock = clock
        self.queue = queue
        self.ids = ids
        self.pid = pid
        self.name = name
        self.job = job
        self.pattern = pattern
        self.cpu = cpu
        self.cpu_time = cpu_time
        self.in_call = False            # in a system call's CPU work (cpu_time)
        self.ioprio = ioprio_value(*job.ioprio())
        self.outstanding = 0            # bios submitted and not completed
        self.issued = 0
        self.backlog = 0
        self.next_arrival = 0.0
        self.asleep = False
        self.max_lag = 0.0
        self.finished = False
        self.exited = False
        self.open_loop = bool(job.rate_iops or job.rate_bytes)
        # An open-loop job is bounded only by an iodepth the user wrote down.
        self.depth_limit = job.iodepth if (not self.open_loop or iodepth_given) else None
        self.engine = engine = engine_of(job)
        if engine.synchronous:
            self.depth_limit = 1                # the call returns when its I/O is done
        self.think = job.thinktime
        self.think_every = job.thinktime_blocks
        self.since_think = 0
        self.limit_ios = job.number_ios
        end = None
        if job.runtime:
            end = job.startdelay + job.runtime
        if horizon is not None:
            end = horizon if end is None else min(end, horizon)
        self.end_time = end
        self.fsync_every = job.fsync            # fio's fsync=N (a job on a file)
        self.writes_since_fsync = 0
        self.end_fsync = job.end_fsync
        # the engine (closed loop): fio's counters, as do_io keeps them
        plug = plug_rule(kernel)
        has_plug = hasattr(queue, "start_plug")   # an open file has none (docs/jobs.md)
        # the queue protocol's blkcg_maybe_throttle_current (an open file has none)
        self.throttle_delay = getattr(queue, "throttle_delay", None)
        # REQ_SYNC per direction (reads, writes). A job on a device does direct I/O, whose
        # writes are sync: WRITE_SYNC in 2.6.18 (``__blockdev_direct_IO``, fs/direct-io.c),
        # REQ_SYNC | REQ_IDLE from 4.10 (``dio_bio_write_op``); ``sync`` overrides it. On a
        # file the host's I/O path sets the flags (`hostio.fileio`).
        self.sync_flags = (job.is_sync(False),
                           True if has_plug and job.sync is None else job.is_sync(True))
        self.plug_batch_over = None if not has_plug or engine.synchronous else \
            plug.uring_batch_over if engine.name == "io_uring" else plug.aio_batch_over
        self.plug_lone = has_plug and plug.lone_async and not engine.synchronous
        self.plug_writes = has_plug and plug.every_write
        if engine.synchronous:
            self.batch, self.complete_min, self.complete_max = 1, 1, 1
        else:
            self.batch = job.iodepth_batch_submit
            self.complete_min = job.iodepth_batch_complete_min
            self.complete_max = job.iodepth_batch_complete_max
        self.polling = not self.complete_min and not self.complete_max   # io_in_polling
        self.sleeps = engine.sleeps_for_request
        self.in_flight = 0      # fio's cur_depth: queued, submitted, or done and not reaped
        self.queued = 0         # queued and not yet submitted (fio's io_u_queued)
        self.reapable = 0       # completed and not yet reaped
        self.want = 0           # completions the process sleeps for (0: not waiting)
        self.reap_next = False  # polling: reap after this queue
        self.unsubmitted = 0    # bios of a batch still to submit once the process wakes
        self._batch_plug = False
        self.last_thinks = False  # the last completion reaped went to think time

    def start(self) -> None:
        """Arrange the first submission after ``startdelay``."""
        self.clock.call_at(self.job.startdelay, self._begin)

    def _may_issue(self) -> bool:
        """Whether another I/O may start (closed loop) or arrive (open loop)."""
        if self.finished:
            return False
        if self.limit_ios is not None and \
                self.issued + self.backlog + self.queued + self.unsubmitted >= self.limit_ios:
            self.finished = True
            return False
        if self.end_time is not None and self.clock.now >= self.end_time:
            self.finished = True
            return False
        return True

    def _begin(self, _ev=None) -> None:
        if self.job.invalidate:
            # fio's invalidate: the job's files start uncached (their clean pages dropped)
            for target in getattr(self.queue, "targets", [self.queue]):
                drop = getattr(target, "invalidate", None)
                if drop is not None:
                    drop()
        if self.open_loop:
            self.next_arrival = self.clock.now
            self._arrivals()
        else:
            self._run()

    # ------------------------------------------------------------------ closed loop
    def _run(self) -> None:
        """fio's ``do_io`` loop from where the process stands, until it must wait: for
        completions (``want``), for a request (``asleep``), or for good (it exits)."""
        while not self.exited:
            if self.in_flight >= self.depth_limit or self.reap_next:
                self.reap_next = False
                if not self._wait_for_completions():
                    return
                continue
            if not self._may_issue():
                # the end of do_io: submit what is queued, then reap everything
                if self.queued and not self._commit():
                    return
                if self.outstanding:
                    self.want = 1
                elif self.reapable and self.cpu_time is not None:
                    # completions that came during a system call: reaped before the
                    # process exits, their CPU work counted (`_reaped` goes on)
                    self._reap(self.reapable)
                elif not self.last_thinks:
                    self._maybe_exit()
                # (else it exits when that think time ends, as the I/O it stands for would)
                return
            self.queued += 1                      # get_io_u, td_io_queue
            self.in_flight += 1
            self.reap_next = self.polling
            if self.queued >= self.batch and not self._commit():
                return

    def _wait_for_completions(self) -> bool:
        """fio's ``wait_for_completions``: reap at least ``min(complete_min, in flight)``
        (1 when that is 0 and the queue is full, or when ``complete_min`` is 0), at most
        ``complete_max``; submit what is queued first (``td_io_getevents``). False when
        the process must sleep for them (or for a request)."""
        full = self.in_flight >= self.depth_limit
        need = min(self.complete_min, self.in_flight)
        if (full and not need) or not self.complete_min:
            need = 1
        if self.queued and not self._commit():
            if self.in_call:
                self.reap_next = True     # td_io_getevents goes on to reap after it
            return False
        if self.reapable < need:
            self.want = need
            return False
        return self._reap(need)

    def _reap(self, need: int) -> bool:
        """Take the completions there are, at least ``need``, at most ``complete_max``
        (``td_io_getevents`` bounds it by what is in flight, and by no less than
        ``need``). Each frees its slot, except that the slot of every
        ``thinktime_blocks``-th one stays taken for ``thinktime`` (blksim's think time),
        and one after which an fsync is due carries the fsync (a job on a file). With
        CPU costs the slots are freed when the call's work has run, and False says the
        process goes on then (`_reaped`)."""
        most = min(self.complete_max, self.in_flight)
        take = min(self.reapable, most if most > need else need)
        self.reapable -= take
        cpu_time = self.cpu_time
        if cpu_time is not None and take:
            self.asleep = self.in_call = True
            cpu_time.reap(self.pid, self.cpu, self.engine.name, take,
                          lambda: self._reaped(take))
            return False
        self._release(take)
        return True

    def _reaped(self, take: int) -> None:
        """The reaping call's CPU work has run: the slots are free, the process goes on."""
        self.asleep = self.in_call = False
        self._release(take)
        self.want = 0
        self._run()

    def _release(self, take: int) -> None:
        """The slots of ``take`` reaped completions (see `_reap`)."""
        for _ in range(take):
            self.last_thinks = False
            if self.fsync_every and self.writes_since_fsync >= self.fsync_every:
                self._fsync()                      # fio: after every fsync=N writes
                continue
            if self.think > 0.0:
                self.since_think += 1
                if self.since_think >= self.think_every:
                    self.since_think = 0
                    self.last_thinks = True
                    self.clock.call_at(self.clock.now + self.think, self._thought)
                    continue
            self.in_flight -= 1

    def _thought(self, _ev=None) -> None:
        """A think time is over: its slot is free (a finished process may exit)."""
        self.in_flight -= 1
        self.last_thinks = False
        if self.finished and not self.asleep:
            self.want = 0
            self._run()
        else:
            self._go_on()

    def _go_on(self) -> None:
        """A slot came free while the process waited for completions: it goes on."""
        if self.want and not self.asleep:
            self.want = 0
            self._run()

    def _commit(self) -> bool:
        """fio's ``td_io_commit``: submit the queued I/Os in one system call, plugged as
        the kernel plugs it (`blksim.sim.ioengine`); or, woken, the rest of a batch. False
        when the process fell asleep for a request with some still to submit
        (`_woken_in_batch` goes on), or, with CPU costs, while the call's work runs
        (`_called` goes on)."""
        if self.queued and not self.in_call and self.throttle_delay is not None:
            # a controller's delay from the last call: the task sleeps on its way back
            # to user space, before this call (blkcg_maybe_throttle_current)
            delay = self.throttle_delay(self.pid, self.clock.now)
            if delay > 0.0:
                self.asleep = True
                self.clock.call_at(self.clock.now + delay, self._throttled)
                return False
        cpu_time = self.cpu_time
        if cpu_time is not None and self.queued and not self.in_call:
            self.asleep = self.in_call = True
            cpu_time.syscall(self.pid, self.cpu, self.engine.name, self.queue, self.queued,
                             self._called)
            return False
        queue = self.queue
        count = self.queued
        if count:
            self.queued = 0
            self.unsubmitted = count
            over = self.plug_batch_over
            batch_plug = self._batch_plug = over is not None and count > over
            if batch_plug:
                queue.start_plug(self.pid, self.clock.now)
        else:
            batch_plug = self._batch_plug
        while self.unsubmitted:
            self.unsubmitted -= 1
            bio = self._new_bio(self._done)
            lone = not batch_plug and (self.plug_lone or (self.plug_writes and bio.write))
            if lone:
                queue.start_plug(self.pid, self.clock.now)
            got = queue.submit_bio(bio)
            if lone:
                queue.finish_plug(self.pid, self.clock.now)
            if not got and self.sleeps:
                # the task sleeps in the block layer, its plug still in place (the queue
                # flushes what it holds, as schedule() does: sched_submit_work)
                self.asleep = True
                queue.when_request(bio, self._woken_in_batch)
                return False
        if batch_plug:
            queue.finish_plug(self.pid, self.clock.now)
        return True

    def _throttled(self, _ev=None) -> None:
        """The controller's delay is over: the call goes ahead."""
        self.asleep = False
        if self._commit():
            self.want = 0
            self._run()

    def _called(self) -> None:
        """The submitting call's CPU work has run: its bios go to the block layer."""
        self.asleep = False
        ok = self._commit()
        self.in_call = False
        if ok:
            self.want = 0
            self._run()

    def _woken_in_batch(self, _bio) -> None:
        """The bio the process slept on has its request: it submits the rest of its
        batch into the same plug, unplugs, and goes on."""
        self.asleep = False
        if not self._commit():
            return
        self.want = 0
        self._run()

    def _new_bio(self, on_complete) -> Bio:
        """The job's next I/O as a bio (counted as issued)."""
        sector, nr_sectors, op = self.pattern.next_io()
        write = op != REQ_OP_READ
        if op == REQ_OP_DISCARD:
            # fio's trims are the BLKDISCARD ioctl: a discard without REQ_SYNC
            bio = Bio(self.ids.take(), sector, nr_sectors, True, False, self.pid,
                      self.ioprio, on_complete)
            bio.op = op
        else:
            if write:
                self.writes_since_fsync += 1
            bio = Bio(self.ids.take(), sector, nr_sectors, write, self.sync_flags[write],
                      self.pid, self.ioprio, on_complete)
        bio.cpu = self.cpu
        self.issued += 1
        self.outstanding += 1
        return bio

    def _done(self, _bio) -> None:
        """A bio of the closed loop completed: reaped now if the process waits for it."""
        self.outstanding -= 1
        self.reapable += 1
        want = self.want
        if want and self.reapable >= want and not self.asleep:
            self.want = 0
            if self._reap(want):
                self._run()

    # ------------------------------------------------------------------ both loops
    def psi_state(self, waits_in_iowait: bool) -> int:
        """The process's task state for pressure stall information (`blksim.block.psi`):
        running while a system call's CPU work runs (``cpu_time``); in iowait while it
        sleeps for a request (``blk_mq_get_tag``, ``get_request_wait``: io_schedule) or
        waits for its I/O when its engine waits in iowait (``waits_in_iowait``: the rule is
        `blksim.sim.pressure.waits_in_iowait`); idle otherwise: thinking, or between
        open-loop arrivals."""
        if self.exited:
            return IDLE
        if self.in_call:
            return RUNNING
        if self.asleep:
            return IOWAIT
        # (a closed loop that waits while its think time runs waits for no I/O)
        if waits_in_iowait and self.outstanding and (self.open_loop or self.want):
            return IOWAIT
        return IDLE

    def issued_by_pid(self) -> dict:
        """Bios queued so far, by pid (a job on a file: the bios its calls made)."""
        bios = getattr(self.queue, "bios_issued", None)
        return {self.pid: self.issued if bios is None else bios}

    def _maybe_exit(self) -> None:
        """A finished process exits once its last I/O is back (AS and CFQ learn of it);
        with ``end_fsync``, after one last fsync."""
        if self.finished and not self.outstanding and not self.exited:
            if self.end_fsync:
                self.end_fsync = False
                if not self.open_loop:
                    self.in_flight += 1
                self._fsync()
                return
            self.exited = True
            self.queue.process_exited(self.pid)

    def _fsync(self) -> None:
        """An fsync of the job's file: a call of no sectors (`hostio.fileio.OpenFile`);
        in the closed loop it takes the slot of the I/O whose completion called for it."""
        self.writes_since_fsync = 0
        self.outstanding += 1
        call = Bio(self.ids.take(), 0, 0, True, True, self.pid, self.ioprio,
                   self._fsync_done)
        call.cpu = self.cpu
        self.queue.submit_bio(call)

    def _fsync_done(self, _call) -> None:
        self.outstanding -= 1
        if self.open_loop:
            if self._may_issue():
                self._issue()
            else:
                self._maybe_exit()
            return
        self.in_flight -= 1
        if self.want:
            self._go_on()
        elif self.finished and not self.asleep:
            self._run()

    # ------------------------------------------------------------------ open loop
    def _issue(self, _ev=None) -> None:
        """One open-loop arrival, submitted on its own."""
        bio = self._new_bio(self._completed)
        lone = self.plug_lone or (self.plug_writes and bio.write)
        if lone:
            self.queue.start_plug(self.pid, self.clock.now)
        got = self.queue.submit_bio(bio)
        if lone:
            self.queue.finish_plug(self.pid, self.clock.now)
        if not got:
            # no free request: the process sleeps until its bio gets one
            self.asleep = True
            self.queue.when_request(bio, self._woken)

    def _arrivals(self, _ev=None) -> None:
        """The arrival due now, and those the process slept through; then the next
        one's event (none while the process sleeps: `_woken` goes on)."""
        if self.asleep:
            return
        now = self.clock.now
        while True:
            if not self._may_issue():
                self._maybe_exit()
                return
            if self.depth_limit is not None and self.outstanding >= self.depth_limit:
                self.backlog += 1
            else:
                self._issue()
            self.next_arrival += self.pattern.next_interarrival()
            if self.asleep:
                return
            if self.next_arrival > now:
                self.clock.call_at(self.next_arrival, self._arrivals)
                return

    def _woken(self, _bio) -> None:
        """The bio the process slept on has its request: submit what fell due meanwhile."""
        self.asleep = False
        lag = self.lag()
        if lag > self.max_lag:
            self.max_lag = lag
        if lag >= 0.0:
            self._arrivals()
        else:
            self.clock.call_at(self.next_arrival, self._arrivals)

    def lag(self) -> float:
        """How far (s) the next arrival is overdue (negative: not due yet)."""
        return self.clock.now - self.next_arrival

    def schedule_lag(self):
        """(worst, at the end) of how far (s) an open-loop process fell behind its
        arrivals' schedule; None for a closed-loop one, which keeps no schedule."""
        if not self.open_loop:
            return None
        end = 0.0 if self.finished else max(self.lag(), 0.0)
        return max(self.max_lag, end), end

    def _completed(self, bio) -> None:
        """A bio of the open loop completed."""
        self.outstanding -= 1
        if self.fsync_every and self.writes_since_fsync >= self.fsync_every:
            self._fsync()                      # fio: after every fsync=N writes
            return
        if self.backlog and not self.asleep:
            self.backlog -= 1
            self._issue()
        else:
            self._maybe_exit()
