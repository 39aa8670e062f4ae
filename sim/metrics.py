"""Per-bio measurements gathered as a run goes, in constant memory.

Latencies carry btt's names: Q2D (queued to issued to the device: time in the
block layer and the scheduler), D2C (issued to completed: time in the device)
and Q2C (the whole latency). Everything is kept in `StreamingHistogram`s, per
direction and per process, so memory does not grow with the length of a run.
"""

from __future__ import annotations

import numpy as np

from sim.histogram import StreamingHistogram
from sim.request import SECTOR_SIZE


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
    Completions are buffered and folded into the histograms a few thousand at a
    time with numpy (the buffer is bounded, so memory stays constant); call
    `flush` before reading the figures.
    """

    BATCH = 4096

    def __init__(self, start: float = 0.0) -> None:
        self.start = start
        self.read = DirectionStats()
        self.write = DirectionStats()
        self.processes: dict[int, ProcessStats] = {}
        self.last_completion = start
        self._flushed = 0
        self._buf: list = []

    @property
    def completed(self) -> int:
        """Bios completed and counted so far."""
        return self._flushed + len(self._buf)

    def register_process(self, pid: int, name: str) -> None:
        """Make a process known so it is reported even if it completes nothing."""
        if pid not in self.processes:
            self.processes[pid] = ProcessStats(pid, name)

    def record(self, bio) -> None:
        """Account one completed bio."""
        if bio.t_queue < self.start:
            return
        buf = self._buf
        buf.append((bio.pid, bio.write, bio.nr_sectors, bio.t_queue, bio.t_dispatch,
                     bio.t_complete))
        if len(buf) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        """Fold buffered completions into the statistics."""
        buf = self._buf
        if not buf:
            return
        arr = np.array(buf, dtype=np.float64)
        self._flushed += len(buf)
        buf.clear()
        pid = arr[:, 0].astype(np.int64)
        write = arr[:, 1] != 0.0
        sectors = arr[:, 2].astype(np.int64)
        tq, td, tc = arr[:, 3], arr[:, 4], arr[:, 5]
        q2d, d2c, q2c = td - tq, tc - td, tc - tq
        last = float(tc.max())
        if last > self.last_completion:
            self.last_completion = last
        for is_write, st in ((False, self.read), (True, self.write)):
            sel = write if is_write else ~write
            if not sel.any():
                continue
            st.ios += int(sel.sum())
            st.sectors += int(sectors[sel].sum())
            st.q2d.add_many(q2d[sel])
            st.d2c.add_many(d2c[sel])
            st.q2c.add_many(q2c[sel])
        for p in np.unique(pid).tolist():
            proc = self.processes.get(p)
            if proc is None:
                proc = self.processes[p] = ProcessStats(p, f"pid{p}")
            mine = pid == p
            for is_write, pst in ((False, proc.read), (True, proc.write)):
                sel = mine & (write if is_write else ~write)
                if not sel.any():
                    continue
                pst.ios += int(sel.sum())
                pst.sectors += int(sectors[sel].sum())
                pst.q2c.add_many(q2c[sel])

    @property
    def elapsed(self) -> float:
        """Seconds from the start of measurement to the last completion."""
        return max(0.0, self.last_completion - self.start)
