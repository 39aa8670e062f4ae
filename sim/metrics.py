"""Per-bio measurements gathered as a run goes, in constant memory.

Latencies carry btt's names: Q2D (queued to issued to the device: time in the
block layer and the scheduler), D2C (issued to completed: time in the device)
and Q2C (the whole latency). Everything is kept in `StreamingHistogram`s, per
direction and per process, so memory does not grow with the length of a run.

Besides latency, every bio brings its share of device time (``bio.disk_s``,
see `blksim.block.legacy_queue.RequestQueue`) and, when the run sets a client timeout,
whether its Q2C exceeded it. Figures are kept for the whole run (the totals)
and, when the run switches elevators, for each phase: a bio belongs to the
phase in which it was queued.
"""

from __future__ import annotations

import struct

import numpy as np

from blksim.common.histogram import StreamingHistogram
from blksim.block.request import DEFAULT_IOPRIO, SECTOR_SIZE
from blksim.common.stationarity import IntervalSeries


class ProcessDirectionStats:
    """Counts, bytes, device time, timeouts and the Q2C distribution of one
    process in one direction."""

    __slots__ = ("ios", "sectors", "q2c", "timeouts", "disk_s")

    def __init__(self) -> None:
        self.ios = 0
        self.sectors = 0
        self.q2c = StreamingHistogram()
        self.timeouts = 0
        self.disk_s = 0.0

    def summary(self, elapsed: float) -> dict:
        """IOPS and MB/s over ``elapsed`` seconds and the Q2C latency summary (seconds)."""
        nbytes = self.sectors * SECTOR_SIZE
        return {
            "ios": self.ios,
            "bytes": nbytes,
            # no measured time (nothing completed in the window): no rate, not 0
            "iops": self.ios / elapsed if elapsed > 0 else None,
            "mb_per_s": nbytes / 1e6 / elapsed if elapsed > 0 else None,
            "q2c": self.q2c.summary(),
        }

    def merge(self, other: "ProcessDirectionStats") -> None:
        """Add `other`'s figures to these."""
        self.ios += other.ios
        self.sectors += other.sectors
        self.q2c.merge(other.q2c)
        self.timeouts += other.timeouts
        self.disk_s += other.disk_s


class DirectionStats(ProcessDirectionStats):
    """Counts, bytes and Q2D / D2C / Q2C distributions of one direction of the device."""

    __slots__ = ("q2d", "d2c")

    def __init__(self) -> None:
        super().__init__()
        self.q2d = StreamingHistogram()
        self.d2c = StreamingHistogram()

    def summary(self, elapsed: float) -> dict:
        """As `ProcessDirectionStats.summary`, plus the Q2D and D2C summaries (seconds)."""
        out = super().summary(elapsed)
        out["q2d"] = self.q2d.summary()
        out["d2c"] = self.d2c.summary()
        return out

    def merge(self, other: "ProcessDirectionStats") -> None:
        super().merge(other)
        if isinstance(other, DirectionStats):
            self.q2d.merge(other.q2d)
            self.d2c.merge(other.d2c)


class CallStats:
    """One process's read or write calls to files, as fio counts them: calls, bytes and
    the completion latency (submission to completion) distribution."""

    __slots__ = ("calls", "bytes", "lat")

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0
        self.lat = StreamingHistogram()

    def summary(self, elapsed: float) -> dict:
        """Calls per second, MB/s and the latency summary (seconds)."""
        return {"calls": self.calls, "bytes": self.bytes,
                "calls_per_s": self.calls / elapsed if elapsed > 0 else None,
                "mb_per_s": self.bytes / 1e6 / elapsed if elapsed > 0 else None,
                "lat": self.lat.summary()}


class ProcessStats:
    """What one process (pid) submitted and how it was served.

    ``nice`` and ``ioprio`` (the kernel's packed class and level) are what the
    process ran with; ``issued`` is how many bios it queued in the stretch
    (filled in when the run ends, see `Metrics.finish`).
    """

    __slots__ = ("pid", "name", "read", "write", "nice", "ioprio", "issued")

    def __init__(self, pid: int, name: str, nice: int = 0,
                 ioprio: int = DEFAULT_IOPRIO) -> None:
        self.pid = pid
        self.name = name
        self.read = ProcessDirectionStats()
        self.write = ProcessDirectionStats()
        self.nice = nice
        self.ioprio = ioprio
        self.issued = 0

    @property
    def ios(self) -> int:
        """Completed bios, both directions."""
        return self.read.ios + self.write.ios

    @property
    def sectors(self) -> int:
        """Completed sectors, both directions."""
        return self.read.sectors + self.write.sectors

    @property
    def disk_s(self) -> float:
        """Device time attributed to this process (s), both directions."""
        return self.read.disk_s + self.write.disk_s

    @property
    def timeouts(self) -> int:
        """Completed bios whose Q2C exceeded the client timeout, both directions."""
        return self.read.timeouts + self.write.timeouts

    @property
    def worst_wait(self) -> float:
        """The longest Q2C of any of its completed bios (s), 0.0 if none."""
        return max(self.read.q2c.hi, self.write.q2c.hi)


class StatsSet:
    """The figures of one stretch of a run: the whole measured run, or one phase.

    ``start`` is when the stretch's measured time begins; ``end`` when it ends
    (None: at the last completion).
    """

    __slots__ = ("read", "write", "processes", "start", "end", "last_completion")

    def __init__(self, start: float = 0.0, end: float | None = None) -> None:
        self.read = DirectionStats()
        self.write = DirectionStats()
        self.processes: dict[int, ProcessStats] = {}
        self.start = start
        self.end = end
        self.last_completion = start

    @property
    def elapsed(self) -> float:
        """Measured seconds of this stretch."""
        end = self.end if self.end is not None else self.last_completion
        return max(0.0, end - self.start)

    def fold(self, names: dict, pid, write, sectors, q2d, d2c, q2c, disk, over) -> None:
        """Add a batch of completions (numpy arrays, one element per bio)."""
        for is_write, st in ((False, self.read), (True, self.write)):
            sel = write if is_write else ~write
            if not sel.any():
                continue
            st.ios += int(sel.sum())
            st.sectors += int(sectors[sel].sum())
            st.disk_s += float(disk[sel].sum())
            if over is not None:
                st.timeouts += int(over[sel].sum())
            st.q2d.add_many(q2d[sel])
            st.d2c.add_many(d2c[sel])
            st.q2c.add_many(q2c[sel])
        for p in np.unique(pid).tolist():
            proc = self.processes.get(p)
            if proc is None:
                proc = self.processes[p] = _new_process(names, p)
            mine = pid == p
            for is_write, pst in ((False, proc.read), (True, proc.write)):
                sel = mine & (write if is_write else ~write)
                if not sel.any():
                    continue
                pst.ios += int(sel.sum())
                pst.sectors += int(sectors[sel].sum())
                pst.disk_s += float(disk[sel].sum())
                if over is not None:
                    pst.timeouts += int(over[sel].sum())
                pst.q2c.add_many(q2c[sel])


def _new_process(names: dict, pid: int) -> ProcessStats:
    known = names.get(pid)
    if known is None:
        return ProcessStats(pid, f"pid{pid}")
    return ProcessStats(pid, known.name, known.nice, known.ioprio)


def jain_index(values) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2) of non-negative values.

    1.0 when all are equal, 1/n when one value holds everything; None for no
    values, and None when every value is 0: nothing was shared out (no I/O
    completed), so there is no share to call fair or unfair.
    """
    xs = [float(v) for v in values]
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    if sq == 0.0:
        return None
    s = sum(xs)
    return s * s / (len(xs) * sq)


class Metrics:
    """Collects every completed bio of a run.

    ``start`` is when measurement began; ``last_completion`` the time of the
    latest completion. Only bios submitted at or after ``start`` are counted.
    ``client_timeout`` (s, or None) counts bios whose Q2C exceeded it.
    ``phase_starts`` are the times at which the run switches elevators: bios
    queued from ``phase_starts[k]`` on (until the next) belong to phase k + 1.
    Completions are buffered (packed binary records in a bytearray, which numpy
    reads as a structured array without converting value by value) and folded
    into the histograms a few thousand at a time (the buffer is bounded, so
    memory stays constant); call `flush` before reading the figures.
    ``series`` counts the completions per interval of the measured window, with their
    Q2C in nanoseconds (`blksim.common.stationarity.IntervalSeries`: bounded), for the
    steady-state check of the run's throughput and mean latency.
    """

    BATCH = 4096
    #: One buffered completion: pid, write, sectors, Q, D and C times, disk time.
    RECORD = struct.Struct("<q?qdddd")
    RECORD_DTYPE = np.dtype([("pid", "<i8"), ("write", "?"), ("sectors", "<i8"),
                             ("tq", "<f8"), ("td", "<f8"), ("tc", "<f8"), ("disk", "<f8")])

    def __init__(self, start: float = 0.0, client_timeout: float | None = None,
                 phase_starts=()) -> None:
        self.start = start
        self.client_timeout = client_timeout
        self.totals = StatsSet(start)
        self.read = self.totals.read
        self.write = self.totals.write
        self.processes = self.totals.processes
        bounds = [0.0, *phase_starts]
        self._phase_starts = np.array(bounds, dtype=np.float64)
        if len(bounds) == 1:
            self.phases = [self.totals]
        else:
            self.phases = []
            for k, s in enumerate(bounds):
                end = bounds[k + 1] if k + 1 < len(bounds) else None
                st = StatsSet(max(s, start), None if end is None else max(end, start))
                self.phases.append(st)
        self._issued_marks: dict[float, dict] = {}
        self.series = IntervalSeries(start)
        self.calls: dict = {}             # pid -> (read, write) CallStats: jobs on files
        self.throttled: dict = {}         # pid -> seconds in balance_dirty_pages
        self._flushed = 0
        self._buf = bytearray()
        self._limit = self.BATCH * self.RECORD.size

    @property
    def last_completion(self) -> float:
        """Time of the latest counted completion (``start`` if none)."""
        return self.totals.last_completion

    @property
    def completed(self) -> int:
        """Bios completed and counted so far."""
        return self._flushed + len(self._buf) // self.RECORD.size

    def register_process(self, pid: int, name: str, nice: int = 0,
                         ioprio: int = DEFAULT_IOPRIO) -> None:
        """Make a process known so it is reported even if it completes nothing."""
        if pid not in self.processes:
            self.processes[pid] = ProcessStats(pid, name, nice, ioprio)

    def bio_completed(self, q, bio, now) -> None:
        """Account one completed bio: the ``block_bio_complete`` subscriber of every block
        device (``q``: the device, unused; ``now``: its completion time, ``bio.t_complete``).
        Bios queued before the measured stretch (ramp_time) are left out."""
        if bio.t_queue < self.start:
            return
        buf = self._buf
        buf.extend(self.RECORD.pack(bio.pid, bio.write, bio.nr_sectors, bio.t_queue,
                                    bio.t_dispatch, bio.t_complete, bio.disk_s))
        if len(buf) >= self._limit:
            self.flush()

    def record_call(self, call) -> None:
        """Account one completed call to a file (a `Bio` in file sectors; an fsync has no
        sectors)."""
        if call.t_queue < self.start:
            return
        per = self.calls.get(call.pid)
        if per is None:
            per = self.calls[call.pid] = (CallStats(), CallStats(), CallStats())
        st = per[2 if call.nr_sectors == 0 else 1 if call.write else 0]
        st.calls += 1
        st.bytes += call.nr_sectors * SECTOR_SIZE
        st.lat.add(call.t_complete - call.t_queue)

    def flush(self) -> None:
        """Fold buffered completions into the statistics."""
        buf = self._buf
        if not buf:
            return
        # A copy: the view would pin the buffer, which is cleared for reuse.
        arr = np.frombuffer(buf, dtype=self.RECORD_DTYPE).copy()
        self._flushed += len(arr)
        buf.clear()
        pid = arr["pid"]
        write = arr["write"]
        sectors = arr["sectors"]
        tq, td, tc = arr["tq"], arr["td"], arr["tc"]
        disk = arr["disk"]
        q2d, d2c, q2c = td - tq, tc - td, tc - tq
        over = None if self.client_timeout is None else q2c > self.client_timeout
        names = self.processes
        totals = self.totals
        last = float(tc.max())
        if last > totals.last_completion:
            totals.last_completion = last
        totals.fold(names, pid, write, sectors, q2d, d2c, q2c, disk, over)
        self.series.add_many(tc, np.rint(q2c * 1e9).astype(np.int64))
        if len(self.phases) > 1:
            idx = np.searchsorted(self._phase_starts, tq, side="right") - 1
            for k in np.unique(idx).tolist():
                sel = idx == k
                ph = self.phases[k]
                last = float(tc[sel].max())
                if last > ph.last_completion:
                    ph.last_completion = last
                ph.fold(names, pid[sel], write[sel], sectors[sel], q2d[sel], d2c[sel],
                        q2c[sel], disk[sel], None if over is None else over[sel])

    # ------------------------------------------------------------------ issued bios
    def mark_issued(self, when: float, issued: dict) -> None:
        """Remember how many bios each pid had queued by ``when`` (a phase or
        measurement boundary; the engine calls this before anything else at that time,
        with the counts its workload processes keep)."""
        self._issued_marks[when] = dict(issued)

    def finish(self, issued: dict) -> None:
        """Flush, and fill in every stretch's per-process ``issued`` counts from the
        final per-pid counts and the marks taken at its boundaries."""
        self.flush()
        if len(self.phases) > 1:
            last = self.phases[-1]
            last.end = max(self.totals.last_completion, last.start)
        marks = self._issued_marks
        empty: dict = {}

        def counts_at(t: float) -> dict:
            if t <= 0.0:
                return empty
            return marks.get(t, empty)

        stretches = [(self.totals, self.start, None)]
        if len(self.phases) > 1:
            starts = self._phase_starts.tolist()
            for k, ph in enumerate(self.phases):
                end = starts[k + 1] if k + 1 < len(starts) else None
                stretches.append((ph, ph.start, None if end is None else max(end, self.start)))
        for st, begin, end in stretches:
            if end is not None and end <= begin:
                continue
            before = counts_at(begin)
            after = issued if end is None else counts_at(end)
            for pid, n in after.items():
                k = n - before.get(pid, 0)
                if k <= 0:
                    continue
                proc = st.processes.get(pid)
                if proc is None:
                    proc = st.processes[pid] = _new_process(self.processes, pid)
                proc.issued = k

    @property
    def elapsed(self) -> float:
        """Seconds from the start of measurement to the last completion."""
        return max(0.0, self.totals.last_completion - self.start)
