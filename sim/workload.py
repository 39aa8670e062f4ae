"""Processes that submit bios: fio-style job clones and trace replays.

Each process is a small callback-driven state machine on the clock (no simpy
generator per process, so the per-I/O cost stays at one or two events).
Address patterns and trace records come from `traces/`, which is plain Python.
"""

from __future__ import annotations

from sim.request import DEFAULT_IOPRIO, Bio, ioprio_value

class BioIds:
    """Hands out bio ids in submission order (deterministic across runs)."""

    __slots__ = ("next",)

    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        """Next id."""
        n = self.next
        self.next = n + 1
        return n


class JobProcess:
    """One clone of a [[job]]: closed loop (``iodepth`` outstanding; after every
    ``thinktime_blocks`` completions the next I/O waits ``thinktime``) or, with
    ``rate_iops``, open loop (arrivals at the job's rate; at most ``iodepth``
    outstanding only when the job sets ``iodepth``, later arrivals wait for a
    completion).
    """

    def __init__(self, clock, queue, ids: BioIds, pid: int, name: str, job, pattern,
                 horizon: float | None, iodepth_given: bool = True) -> None:
        self.clock = clock
        self.queue = queue
        self.ids = ids
        self.pid = pid
        self.name = name
        self.job = job
        self.pattern = pattern
        self.ioprio = ioprio_value(*job.ioprio())
        self.outstanding = 0
        self.issued = 0
        self.backlog = 0
        self.finished = False
        self.exited = False
        self.open_loop = bool(job.rate_iops)
        # An open-loop job is bounded only by an iodepth the user wrote down.
        self.depth_limit = job.iodepth if (not self.open_loop or iodepth_given) else None
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

    def start(self) -> None:
        """Arrange the first submission after ``startdelay``."""
        self.clock.call_at(self.job.startdelay, self._begin)

    def _may_issue(self) -> bool:
        """Whether another I/O may start (closed loop) or arrive (open loop)."""
        if self.finished:
            return False
        if self.limit_ios is not None and self.issued + self.backlog >= self.limit_ios:
            self.finished = True
            return False
        if self.end_time is not None and self.clock.now >= self.end_time:
            self.finished = True
            return False
        return True

    def _begin(self, _ev=None) -> None:
        if self.open_loop:
            self._arrival()
        else:
            for _ in range(self.depth_limit):
                if not self._may_issue():
                    break
                self._issue()

    def _issue(self, _ev=None) -> None:
        sector, nr_sectors, write = self.pattern.next_io()
        sync = self.job.is_sync(write)
        bio = Bio(self.ids.take(), sector, nr_sectors, write, sync, self.pid, self.ioprio,
                  self._completed)
        self.issued += 1
        self.outstanding += 1
        self.queue.submit_bio(bio)

    def _maybe_exit(self) -> None:
        """A finished process exits once its last I/O is back (AS and CFQ learn of it)."""
        if self.finished and not self.outstanding and not self.exited:
            self.exited = True
            self.queue.process_exited(self.pid)

    def _issue_after_think(self, _ev=None) -> None:
        if self._may_issue():
            self._issue()
        else:
            self._maybe_exit()

    def _arrival(self, _ev=None) -> None:
        if not self._may_issue():
            self._maybe_exit()
            return
        if self.depth_limit is not None and self.outstanding >= self.depth_limit:
            self.backlog += 1
        else:
            self._issue()
        self.clock.call_at(self.clock.now + self.pattern.next_interarrival(), self._arrival)

    def _completed(self, bio) -> None:
        self.outstanding -= 1
        if self.open_loop:
            if self.backlog:
                self.backlog -= 1
                self._issue()
            else:
                self._maybe_exit()
            return
        if self.think > 0.0:
            self.since_think += 1
            if self.since_think >= self.think_every:
                self.since_think = 0
                self.clock.call_at(self.clock.now + self.think, self._issue_after_think)
                return
        if self._may_issue():
            self._issue()
        else:
            self._maybe_exit()


class TraceReplay:
    """Open-loop replay of trace records at their recorded times.

    ``records`` is an iterator of objects with ``time`` (s), ``sector``,
    ``nr_sectors``, ``write`` and optionally ``pid``; it is consumed lazily, one
    record ahead, so a trace of any length replays in constant memory.
    """

    def __init__(self, clock, queue, ids: BioIds, records, pid: int, name: str,
                 horizon: float | None, max_requests: int | None = None) -> None:
        self.clock = clock
        self.queue = queue
        self.ids = ids
        self.records = iter(records)
        self.pid = pid
        self.name = name
        self.horizon = horizon
        self.max_requests = max_requests
        self.issued = 0
        self.outstanding = 0
        self._next = None
        self.pids_seen: set[int] = set()

    def start(self) -> None:
        """Schedule the first record."""
        self._advance()

    def _advance(self) -> None:
        if self.max_requests is not None and self.issued >= self.max_requests:
            self._next = None
            return
        rec = next(self.records, None)
        self._next = rec
        if rec is None:
            return
        if self.horizon is not None and rec.time >= self.horizon:
            self._next = None
            return
        self.clock.call_at(rec.time, self._arrival)

    def _arrival(self, _ev=None) -> None:
        rec = self._next
        pid = self.pid if rec.pid is None else rec.pid
        write = rec.write
        bio = Bio(self.ids.take(), rec.sector, rec.nr_sectors, write, not write, pid,
                  DEFAULT_IOPRIO, self._completed)
        self.issued += 1
        self.outstanding += 1
        self.queue.submit_bio(bio)
        self._advance()

    def _completed(self, bio) -> None:
        self.outstanding -= 1
