"""``--iostat INTERVAL``: ``iostat -x``'s figures every INTERVAL of simulated time, as CSV.

Like ``iostat -x INTERVAL``, each row covers one interval (the device's /proc/diskstats
counters sampled at its start and end, `blksim.sim.diskstats`); a last interval cut short
by the end of the run is written with its own length. Columns: ``time_s`` (the end of
the interval), ``interval_s``, ``device``, then iostat's columns in iostat's order.
"""

from __future__ import annotations

from blksim.sim.diskstats import IOSTAT_COLUMNS, iostat_x
from blksim.traces.records import DEVICE_NAME, PendingFile


class IostatRecorder:
    """Writes the CSV while the run goes; appears only when the run completes."""

    def __init__(self, path, interval: float, device: str = DEVICE_NAME) -> None:
        if not (interval > 0.0 and interval < float("inf")):
            raise ValueError(f"--iostat: expected a positive interval, found {interval!r}")
        self.interval = interval
        self.device = device
        self._pending = PendingFile(path, binary=False)
        self._write = self._pending.file.write
        self._write("time_s,interval_s,device," + ",".join(IOSTAT_COLUMNS) + "\n")
        self._stats = None
        self._clock = None
        self._last = None

    def install(self, queue) -> None:
        """Sample ``queue``'s counters at every multiple of the interval."""
        self._stats = queue.stats
        self._clock = queue.clock
        self._last = self._stats.sample(self._clock.now)
        self._stats.every(self.interval, self._row, start=self._last.time)

    def _row(self, sample) -> None:
        figures = iostat_x(self._last, sample)
        self._write(f"{sample.time:.9f},{sample.time - self._last.time:.9f},{self.device},"
                    + ",".join(f"{figures[c]:.6f}" for c in IOSTAT_COLUMNS) + "\n")
        self._last = sample

    def close(self) -> None:
        """Write the intervals still due and the last one, cut short by the end of the
        run, and put the file in place."""
        if self._last is not None:
            end = self._stats.sample(self._clock.now)   # writes the full intervals due
            if end.time > self._last.time:
                self._row(end)
        self._pending.commit()

    def discard(self) -> None:
        """Remove the unfinished file."""
        self._pending.discard()
