"""Trace replay processes: open-loop replay at the recorded times (`TraceReplay`) and
closed-loop replay that waits for completions (`ClosedTraceReplay`). Like the job
processes of `blksim.sim.workload`, each is a small callback-driven state machine on
the clock; records come from `traces/`, lazily, so a trace of any length replays in
constant memory.
"""

from __future__ import annotations

from collections import deque

from blksim.block.legacy_queue import SimulationError
from blksim.block.psi import IDLE, IOWAIT
from blksim.block.request import DEFAULT_IOPRIO, Bio

#: The largest pid a traced record may carry (blktrace's pid field is 32 bits).
MAX_PID = (1 << 32) - 1


class TraceReplay:
    """Open-loop replay of trace records at their recorded times.

    ``records`` is an iterator of objects with ``time`` (s), ``sector``,
    ``nr_sectors``, ``write`` and ``pid`` (None: the replay's own ``pid``), and
    optionally ``sync`` and ``name``; it is consumed lazily, one record ahead, so
    a trace of any length replays in constant memory. Each record is submitted
    at ``(time - start) / speed`` (plus ``shift``, s: where the trace's time 0 falls in
    the run, `sim.replay.align_shifts`); with ``max_gap`` a gap between consecutive
    records longer than ``max_gap`` (trace time) is cut to ``max_gap`` first.
    ``on_new_pid(pid, name)`` is called the first time a pid is seen. With a
    ``spec`` (`sim.config.TraceSpec`) a request beyond the drive raises
    `sim.replay.ReplayError` naming it.

    When a bio finds no free request the replay sleeps until it has one, as the
    replaying task would in ``get_request_wait``: later records are submitted late,
    as soon as it wakes, so a trace that outpaces the device falls behind its
    recorded times (``max_lag``, `lag`) instead of piling up bios.

    With ``psi`` (the run's `blksim.block.psi.Pressure`, set when the run has cgroups) the
    replay reports its processes' states. An open-loop replayer submits asynchronously and
    never waits for its I/O, so its processes are idle, except while it sleeps for a
    request or tag: then the process of the bio that sleeps is in iowait
    (``blk_mq_get_tag`` and ``rq_qos_wait`` sleep in ``io_schedule``, block/blk-mq-tag.c
    and block/blk-rq-qos.c, 5.4-6.6; ``get_request_wait`` on 2.6), until it has one.

    ``cpus`` (a `blksim.sim.cpus.CpuPlacer`, or None: CPU 0) gives each bio its CPU: the
    one its record carries (``cpu``, as blktrace records it), folded onto the host's, or
    else the CPU its process was placed on when it first appeared.
    """

    kind = "trace"

    #: the run's `blksim.block.psi.Pressure` when it has cgroups (None: not watched)
    psi = None

    def __init__(self, clock, queue, ids: BioIds, records, pid: int, name: str,
                 horizon: float | None, max_requests: int | None = None, *,
                 speed: float = 1.0, max_gap: float | None = None, start: float = 0.0,
                 spec=None, stats=None, on_new_pid=None, cpus=None,
                 shift: float = 0.0) -> None:
        self.clock = clock
        self.queue = queue
        self.ids = ids
        self.records = iter(records)
        self.pid = pid
        self.name = name
        self.horizon = horizon
        self.max_requests = max_requests
        self.issued = 0
        self.pid_issued: dict[int, int] = {}   # bios of records that carry a pid
        self.outstanding = 0
        self._next = None
        self._when = 0.0
        self.speed = speed
        self.max_gap = max_gap
        self.start_time = start
        self.shift = shift
        self._plain = speed == 1.0 and max_gap is None and not start and not shift
        self._prev_rec = start
        self._prev_when = shift
        self.spec = spec
        self.stats = stats
        self.names: dict[int, str] = {}
        self.on_new_pid = on_new_pid
        # (No bound method of self is kept on self: that would be a reference cycle,
        # keeping a finished replay and everything it reaches alive until a full
        # garbage collection. The arrival event is reused instead; see _arrival.)
        self._has_sync = None          # whether the records carry sync / latency / name
        self._has_latency = False
        self._has_name = False
        self._asleep = None            # while asleep: the arrival event to requeue on waking
        self._asleep_task = None       # (pid, cpu) of the bio it sleeps on (with ``psi``)
        self.max_lag = 0.0
        self.cpus = cpus
        self.pid_cpu: dict[int, int] = {}   # each process's CPU (records without one)
        self._has_cpu = False

    def _learn_fields(self, rec) -> None:
        """Look once at what the records carry (getattr with a default is slow when missing)."""
        self._has_sync = hasattr(rec, "sync")
        self._has_latency = hasattr(rec, "latency")
        self._has_name = hasattr(rec, "name")
        self._has_cpu = hasattr(rec, "cpu")

    def _cpu_of(self, rec, pid: int) -> int:
        """The CPU of a record's bio: the recorded one (folded onto the host's), else
        its process's, placed when the process first appears."""
        placer = self.cpus
        if self._has_cpu and rec.cpu is not None:
            return 0 if placer is None else rec.cpu % placer.cpus
        cpu = self.pid_cpu.get(pid)
        if cpu is None:
            cpu = self.pid_cpu[pid] = 0 if placer is None else placer.place()
        return cpu

    def start(self) -> None:
        """Schedule the first record."""
        self._arrival(None)

    def issued_by_pid(self) -> dict:
        """Bios queued so far, by pid (records without one count under the replay's pid)."""
        out = dict(self.pid_issued)
        own = self.issued - sum(out.values())
        if own:
            out[self.pid] = out.get(self.pid, 0) + own
        return out

    def replay_time(self, t: float) -> float:
        """When a record of trace time ``t`` (the next in order) is submitted."""
        if self._plain:
            return t
        if self.max_gap is None:
            return (t - self.start_time) / self.speed + self.shift
        gap = t - self._prev_rec
        self._prev_rec = t
        if gap > self.max_gap:
            gap = self.max_gap
        elif gap < 0.0:
            gap = 0.0
        self._prev_when += gap / self.speed
        return self._prev_when

    def _pid_name(self, rec, pid: int) -> str:
        """The name of a process seen for the first time (its pid checked once here, not
        for every record: Linux pids, and blktrace's pid field, fit in 32 bits)."""
        if not 0 <= pid <= MAX_PID:
            where = f"trace {self.spec.name!r} ({self.spec.path})" if self.spec is not None \
                else f"trace {self.name!r}"
            raise SimulationError(f"{where}: pid {pid} is not a process id (0 to {MAX_PID:,})")
        name = rec.name if self._has_name else None
        if not name:
            name = self.name if pid == self.pid else f"{self.name}.{pid}"
        return name

    def _arrival(self, event) -> None:
        """Submit the record due now (none at the start: ``event`` is then None), then
        read the next record and schedule its arrival: by queueing ``event`` (the
        arrival event that has just fired) again, else with a new event."""
        rec = self._next
        if rec is not None:
            pid = rec.pid
            if pid is None:
                pid = self.pid
            else:
                counts = self.pid_issued
                counts[pid] = counts.get(pid, 0) + 1
            if pid not in self.names:
                name = self.names[pid] = self._pid_name(rec, pid)
                if self.on_new_pid is not None:
                    self.on_new_pid(pid, name)
            write = rec.write
            sync = rec.sync if self._has_sync else None
            bio = Bio(self.ids.take(), rec.sector, rec.nr_sectors, write,
                      (not write) if sync is None else sync, pid, DEFAULT_IOPRIO,
                      self._completed)
            if self.cpus is not None or self._has_cpu:
                # (else no CPU model and no recorded CPU: the bio stays on CPU 0)
                bio.cpu = self._cpu_of(rec, pid)
            self.issued += 1
            self.outstanding += 1
            try:
                got_request = self.queue.submit_bio(bio, event.when)
            except SimulationError:
                self._out_of_range(rec)
                raise
            if not got_request:
                # no free request: the replay sleeps until the bio has one (`_woken`)
                self._asleep = event
                self.queue.when_request(bio, self._woken)
                if self.psi is not None:
                    self._asleep_task = (pid, bio.cpu)
                    self.psi.set(pid, bio.cpu, IOWAIT, event.when)
        # Read the next record and schedule its arrival.
        if self.max_requests is not None and self.issued >= self.max_requests:
            self._next = None
            return
        rec = next(self.records, None)
        self._next = rec
        if rec is None:
            return
        if self._has_sync is None:
            self._learn_fields(rec)
        when = rec.time if self._plain else self.replay_time(rec.time)
        horizon = self.horizon
        if horizon is not None and when >= horizon:
            self._next = None
            return
        self._when = when
        if self._asleep is not None:
            return
        if event is None:
            self.clock.call_at(when, self._arrival)
        else:
            self.clock.requeue(when, event)

    def _woken(self, _bio) -> None:
        """The bio the replay slept on has its request: the next record is due at its
        time, or now if that has passed."""
        event, self._asleep = self._asleep, None
        if self.psi is not None:
            pid, cpu = self._asleep_task
            self.psi.set(pid, cpu, IDLE, self.clock.now)
        if self._next is None:
            return
        lag = self.lag()
        if lag > self.max_lag:
            self.max_lag = lag
        self.clock.requeue(self._when if lag < 0.0 else self.clock.now, event)

    def schedule_lag(self):
        """(worst, at the end) of how far (s) the replay fell behind the recorded times."""
        end = max(self.lag(), 0.0)
        return max(self.max_lag, end), end

    def lag(self) -> float:
        """How far (s) the next record is overdue (negative: not due yet; 0.0 at the end
        of the trace)."""
        if self._next is None:
            return 0.0
        return self.clock.now - self._when

    def _out_of_range(self, rec) -> None:
        capacity = self.queue.capacity
        if self.spec is not None and rec.sector + rec.nr_sectors > capacity:
            from blksim.sim.replay import out_of_range_error
            raise out_of_range_error(self.spec, self.issued - 1, rec, capacity) from None

    def _completed(self, bio) -> None:
        self.outstanding -= 1


class _TraceProcess:
    """One process of a closed-loop replay: its read-ahead records and its chain."""

    __slots__ = ("pid", "queue", "last", "last_issue", "last_done", "last_bio", "scheduled",
                 "inflight", "exited", "issued")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.queue = deque()          # (open-loop time, record)
        self.last = None              # the record issued last
        self.last_issue = 0.0
        self.last_done = None         # when it completed (None: in flight)
        self.last_bio = -1
        self.scheduled = False
        self.inflight = 0
        self.exited = False
        self.issued = 0


class ClosedTraceReplay(TraceReplay):
    """Closed-loop replay, per process (pid).

    A process's first request is submitted at its recorded time (scaled as in
    open loop). Each later request waits for its predecessor *of the same
    process* and then for the recorded think time:

    * when the trace has completion times (``latency`` on the records: blktrace
      ``C`` events, MSR ``ResponseTime``) and the request was issued after its
      predecessor completed, think time = its issue time - the predecessor's
      completion time, counted from the predecessor's simulated completion;
    * when it was issued while the predecessor was still in flight, it does not
      wait: it follows the predecessor's simulated issue by the recorded gap
      (the process kept several requests in flight);
    * without completion times, think time = the recorded gap between the two
      issues, counted from the predecessor's simulated completion.

    Gaps are capped by ``max_gap`` (trace time) and divided by ``speed``.
    The trace is read at most ``LOOKAHEAD`` records ahead of the oldest record
    not yet submitted, whatever its length: a process whose next record lies
    further on waits until the replay catches up.
    """

    def schedule_lag(self):
        """None: a closed loop keeps no schedule (its requests wait for each other)."""
        return None

    def _psi_note(self, proc: _TraceProcess) -> None:
        """Tell the run's pressure ``proc``'s state: in iowait while its last request is
        in flight and its next does not go on without it (the closed loop's premise: a
        process waits for its I/O, as a synchronous call does in io_schedule), idle
        while it thinks, runs ahead of an overlapped request, or has exited."""
        state = IOWAIT if proc.inflight and not proc.scheduled and not proc.exited else IDLE
        cpu = self._cpu_of(proc.last, proc.pid) if proc.last is not None else 0
        self.psi.set(proc.pid, cpu, state, self.clock.now)

    def __init__(self, *args, lookahead: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from blksim.sim.replay import LOOKAHEAD
        self.lookahead = lookahead or LOOKAHEAD
        self.procs: dict[int, _TraceProcess] = {}
        self.buffered = 0
        self.eof = False
        self.bio_proc: dict[int, _TraceProcess] = {}
        self.think_from_completion = 0
        self.think_from_issue = 0
        self.overlapped = 0
        self._read = 0

    def start(self) -> None:
        """Read the first records; each process starts at its first record's time."""
        self._fill()

    def _gap(self, g: float) -> float:
        if g <= 0.0:
            return 0.0
        if self.max_gap is not None and g > self.max_gap:
            g = self.max_gap
        return g / self.speed

    def _fill(self) -> None:
        """Read ahead until ``lookahead`` records wait (or the trace ends)."""
        records = self.records
        while self.buffered < self.lookahead and not self.eof:
            if self.max_requests is not None and self._read >= self.max_requests:
                rec = None
            else:
                rec = next(records, None)
            if rec is None:
                self.eof = True
                for proc in list(self.procs.values()):
                    self._maybe_exit(proc)
                return
            self._read += 1
            if self._has_sync is None:
                self._learn_fields(rec)
            when = self.replay_time(rec.time)
            pid = self.pid if rec.pid is None else rec.pid
            proc = self.procs.get(pid)
            if proc is None:
                proc = self.procs[pid] = _TraceProcess(pid)
                name = self.names[pid] = self._pid_name(rec, pid)
                if self.on_new_pid is not None:
                    self.on_new_pid(pid, name)
            proc.queue.append((when, rec))
            self.buffered += 1
            if len(proc.queue) == 1:
                self._consider(proc)

    def _consider(self, proc: _TraceProcess) -> None:
        """Schedule the process's next record if its predecessor allows it now."""
        if proc.scheduled or not proc.queue:
            return
        when, rec = proc.queue[0]
        last = proc.last
        now = self.clock.now
        if last is None:
            due = when
        else:
            lat = last.latency if self._has_latency else None
            if lat is not None and rec.time < last.time + lat:
                due = proc.last_issue + self._gap(rec.time - last.time)
                self.overlapped += 1
            elif proc.last_done is None:
                return                      # wait for the predecessor's completion
            elif lat is not None:
                due = proc.last_done + self._gap(rec.time - (last.time + lat))
                self.think_from_completion += 1
            else:
                due = proc.last_done + self._gap(rec.time - last.time)
                self.think_from_issue += 1
        if due < now:
            due = now
        if self.horizon is not None and due >= self.horizon:
            return
        proc.scheduled = True
        # A new closure each time: one kept on `proc` would be a reference cycle.
        self.clock.call_at(due, lambda _ev: self._issue(proc))
        if self.psi is not None:
            self._psi_note(proc)

    def _issue(self, proc: _TraceProcess) -> None:
        proc.scheduled = False
        _when, rec = proc.queue.popleft()
        self.buffered -= 1
        write = rec.write
        sync = rec.sync if self._has_sync else None
        bio = Bio(self.ids.take(), rec.sector, rec.nr_sectors, write,
                  (not write) if sync is None else sync, proc.pid, DEFAULT_IOPRIO,
                  self._completed)
        bio.cpu = self._cpu_of(rec, proc.pid)
        self.issued += 1
        self.outstanding += 1
        proc.inflight += 1
        proc.issued += 1
        proc.last = rec
        proc.last_issue = self.clock.now
        proc.last_done = None
        proc.last_bio = bio.id
        self.bio_proc[bio.id] = proc
        try:
            self.queue.submit_bio(bio)
        except SimulationError:
            self._out_of_range(rec)
            raise
        self._fill()
        self._consider(proc)
        if self.psi is not None:
            self._psi_note(proc)

    def _completed(self, bio) -> None:
        self.outstanding -= 1
        proc = self.bio_proc.pop(bio.id)
        proc.inflight -= 1
        if bio.id == proc.last_bio:
            proc.last_done = self.clock.now
            self._consider(proc)
        self._maybe_exit(proc)
        if self.psi is not None:
            self._psi_note(proc)

    def _maybe_exit(self, proc: _TraceProcess) -> None:
        """A process exits once the trace holds no more of its records and its
        last request is back (AS and CFQ learn of it)."""
        if self.eof and not proc.queue and not proc.inflight and not proc.exited:
            proc.exited = True
            self.queue.process_exited(proc.pid)

    def issued_by_pid(self) -> dict:
        """Bios queued so far, by pid."""
        return {pid: proc.issued for pid, proc in self.procs.items() if proc.issued}

    def think_basis(self) -> str:
        """How think times were found, for the results."""
        return (f"{self.think_from_completion} from recorded completions, "
                f"{self.think_from_issue} from recorded issue gaps, "
                f"{self.overlapped} overlapped (no wait)")
