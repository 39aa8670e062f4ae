"""``--iostat INTERVAL`` in a run with files: the page cache's dirty and under-writeback
data over time, as ``vmstat``'s and /proc/meminfo's Dirty and Writeback figures, in
DIR/vmstat.csv.

A row per interval: ``time_s`` (its end), ``interval_s``, ``dirty_mb`` and ``writeback_mb``
at its end, ``dirtied_mb_per_s`` (pages made dirty) and ``written_mb_per_s`` (pages
written back) over it; MB are 2^20 bytes, as iostat's. A last interval cut short by the
end of the run is written with its own length.
"""

from __future__ import annotations

from blksim.traces.records import PendingFile

PAGE_MB = 4096 / (1 << 20)


class VmstatRecorder:
    """Writes DIR/vmstat.csv from a `hostio.writeback.Writeback`'s counters."""

    def __init__(self, path, interval: float) -> None:
        self.interval = interval
        self._pending = PendingFile(path, binary=False)
        self._write = self._pending.file.write
        self._write("time_s,interval_s,dirty_mb,writeback_mb,dirtied_mb_per_s,"
                    "written_mb_per_s\n")
        self._wb = None
        self._clock = None
        self._last = None

    def install(self, writeback, clock) -> None:
        """Sample ``writeback`` at every multiple of the interval."""
        self._wb = writeback
        self._clock = clock
        self._last = writeback.sample(clock.now)
        writeback.every(self.interval, self._row, start=self._last[0])

    def _row(self, sample) -> None:
        t, dirty, writeback, dirtied, written = sample
        t0, _, _, dirtied0, written0 = self._last
        itv = t - t0
        self._write(f"{t:.9f},{itv:.9f},{dirty * PAGE_MB:.6f},{writeback * PAGE_MB:.6f},"
                    f"{(dirtied - dirtied0) * PAGE_MB / itv:.6f},"
                    f"{(written - written0) * PAGE_MB / itv:.6f}\n")
        self._last = sample

    def close(self) -> None:
        """Write the intervals due and the last one, and put the file in place."""
        if self._wb is not None:
            end = self._wb.sample(self._clock.now)
            if end[0] > self._last[0]:
                self._row(end)
        self._pending.commit()

    def discard(self) -> None:
        """Remove the unfinished file."""
        self._pending.discard()
