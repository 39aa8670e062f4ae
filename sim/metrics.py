"""Per-bio measurements gathered as a run goes, in constant memory.

Latencies carry btt's names: Q2D (queued to issued to the device: time in the
block layer and the scheduler), D2C (issued to completed: time in the device)
and Q2C (the whole latency). Everything is kept in `StreamingHistogram`s, per
direction and per process, so memory does not grow with the length of a run.
"""

from __future__ import annotations

from sim.histogram import StreamingHistogram
from sim.request import SECTOR_SIZE


class DirectionStats:
    """Counts, bytes and Q2D / D2C / Q2C distributions of one direction (or one process)."""

    __slots__ = ("ios", "sectors", "q2d", "d2c", "q2c")

    def __init__(self) -> None:
        self.ios = 0
        self.sectors = 0
        self.q2d = StreamingHistogram()
        self.d2c = StreamingHistogram()
        self.q2c = StreamingHistogram()

    def summary(self, elapsed: float) -> dict:
        """Figures for a report: IOPS and MB/s over ``elapsed`` seconds, latencies in seconds."""
        nbytes = self.sectors * SECTOR_SIZE
        return {
            "ios": self.ios,
            "bytes": nbytes,
            "iops": self.ios / elapsed if elapsed > 0 else 0.0,
            "mb_per_s": nbytes / 1e6 / elapsed if elapsed > 0 else 0.0,
            "q2c": self.q2c.summary(),
            "q2d": self.q2d.summary(),
            "d2c": self.d2c.summary(),
        }


class ProcessDirectionStats:
    """Counts, bytes and the Q2C distribution of one process in one direction."""

    __slots__ = ("ios", "sectors", "q2c")

    def __init__(self) -> None:
        self.ios = 0
        self.sectors = 0
        self.q2c = StreamingHistogram()

    def summary(self, elapsed: float) -> dict:
        """IOPS and MB/s over ``elapsed`` seconds and the Q2C latency summary (seconds)."""
        nbytes = self.sectors * SECTOR_SIZE
        return {
            "ios": self.ios,
            "bytes": nbytes,
            "iops": self.ios / elapsed if elapsed > 0 else 0.0,
            "mb_per_s": nbytes / 1e6 / elapsed if elapsed > 0 else 0.0,
            "q2c": self.q2c.summary(),
        }


class ProcessStats:
    """What one process (pid) submitted and how it was served."""

    __slots__ = ("pid", "name", "read", "write")

    def __init__(self, pid: int, name: str) -> None:
        self.pid = pid
        self.name = name
        self.read = ProcessDirectionStats()
        self.write = ProcessDirectionStats()


class Metrics:
    """Collects every completed bio of a run.

    ``start`` is when measurement began; ``last_completion`` the time of the
    latest completion. Only bios submitted at or after ``start`` are counted.
    """

    def __init__(self, start: float = 0.0) -> None:
        self.start = start
        self.read = DirectionStats()
        self.write = DirectionStats()
        self.processes: dict[int, ProcessStats] = {}
        self.last_completion = start
        self.completed = 0
        self.requests_dispatched = 0
        self.bios_merged = 0

    def register_process(self, pid: int, name: str) -> None:
        """Make a process known so it is reported even if it completes nothing."""
        if pid not in self.processes:
            self.processes[pid] = ProcessStats(pid, name)

    def record(self, bio) -> None:
        """Account one completed bio."""
        if bio.t_queue < self.start:
            return
        q2d = bio.t_dispatch - bio.t_queue
        d2c = bio.t_complete - bio.t_dispatch
        q2c = bio.t_complete - bio.t_queue
        proc = self.processes.get(bio.pid)
        if proc is None:
            proc = self.processes[bio.pid] = ProcessStats(bio.pid, f"pid{bio.pid}")
        if bio.write:
            st, pst = self.write, proc.write
        else:
            st, pst = self.read, proc.read
        n = bio.nr_sectors
        st.ios += 1
        st.sectors += n
        st.q2d.add(q2d)
        st.d2c.add(d2c)
        st.q2c.add(q2c)
        pst.ios += 1
        pst.sectors += n
        pst.q2c.add(q2c)
        self.completed += 1
        if bio.t_complete > self.last_completion:
            self.last_completion = bio.t_complete

    @property
    def elapsed(self) -> float:
        """Seconds from the start of measurement to the last completion."""
        return max(0.0, self.last_completion - self.start)
