"""``--iostat INTERVAL``: ``iostat -x``'s figures every INTERVAL of simulated time, as CSV.

Like ``iostat -x INTERVAL``, each row covers one interval of one block device (its
/proc/diskstats counters sampled at the interval's start and end, `blksim.block.diskstats`);
a last interval cut short by the end of the run is written with its own length. Columns:
``time_s`` (the end of the interval), ``interval_s``, ``device``, then iostat's columns in
iostat's order: those of sysstat 9 on a 2.6 kernel, those of today's sysstat 12 on a
multi-queue kernel (the devices' counters say which, `blksim.block.diskstats.run_columns`);
a column a device's counters do not give (a 2.6.18 partition keeps only I/Os and
sectors) is left empty. Rows are in time order, the devices of one interval in
/proc/diskstats' order.

Limits. iostat itself takes the interval in whole seconds (sysstat's iostat.c, main():
the argument must be all digits, read with atol). A simulation can look closer, so
blksim takes any interval of at least `MIN_INTERVAL` (1 ms, blksim's choice:
/proc/diskstats reports its times in milliseconds, Documentation/iostats.txt, so a
finer interval shows nothing a real system could). Rows are gathered in memory until the run ends, so a run may write
at most `MAX_ROWS` (blksim's choice, about 150 MB of text): checked before the run
when its duration is known, and as rows are made when it is not.
"""

from __future__ import annotations

import math

from blksim.block.legacy_queue import SimulationError
from blksim.block.diskstats import IOSTAT_COLUMNS, iostat_x, run_columns
from blksim.traces.records import PendingFile

#: The shortest interval (s) ``--iostat`` takes.
MIN_INTERVAL = 1e-3
#: The most rows (devices x intervals) one iostat.csv may hold.
MAX_ROWS = 1_000_000


def interval_text(seconds: float) -> str:
    """An interval as the user would write it (``500ms``, ``2s``), for messages."""
    return f"{seconds * 1e3:g}ms" if seconds < 1.0 else f"{seconds:g}s"


class IostatRecorder:
    """Writes the CSV; it appears only when the run completes.

    The counters are sampled as the simulation passes each interval's end, without an
    event of its own (an idle device is sampled when it next changes, or at the end),
    so rows are gathered and written in order at the end: a few per device and interval.
    """

    def __init__(self, path, interval: float, horizon: float | None = None) -> None:
        if not (MIN_INTERVAL <= interval < float("inf")):
            raise ValueError(f"--iostat: expected an interval of at least "
                             f"{interval_text(MIN_INTERVAL)}, found {interval!r} s")
        self.interval = interval
        self.horizon = horizon            # the run's duration (s), when it has one
        self._count = 0                   # rows made so far
        self._pending = PendingFile(path, binary=False)
        self._write = self._pending.file.write
        self.columns = None               # iostat's columns, known once devices are
        self._devices: list = []          # (name, stats, [last sample])
        self._rows: list = []             # (time, device index, text)
        self._clock = None

    def install(self, blocks: dict, clock) -> None:
        """Sample the counters of every device in ``blocks`` (name -> an object with
        ``stats``) at every multiple of the interval."""
        self._clock = clock
        self._header(run_columns(dev.stats for dev in blocks.values()))
        if self.horizon is not None:
            rows = math.ceil(self.horizon / self.interval - 1e-9) * len(blocks)
            if rows > MAX_ROWS:
                self._pending.discard()
                raise self._too_many(f"{rows:,} rows ({len(blocks)} device(s) over "
                                     f"{self.horizon:g} s)", len(blocks), self.horizon)
        for index, (name, dev) in enumerate(blocks.items()):
            stats = dev.stats
            last = [stats.sample(clock.now)]
            entry = (name, stats, last)
            self._devices.append(entry)
            stats.every(self.interval, lambda sample, i=index: self._row(i, sample),
                        start=last[0].time)

    def _header(self, columns: tuple) -> None:
        if self.columns is None:
            self.columns = columns
            self._write("time_s,interval_s,device," + ",".join(columns) + "\n")

    def _too_many(self, what: str, devices: int, span: float) -> SimulationError:
        shortest = interval_text(math.ceil(span * devices / MAX_ROWS * 1e3) / 1e3)
        return SimulationError(
            f"--iostat {interval_text(self.interval)}: {what}, more than the "
            f"{MAX_ROWS:,} rows iostat.csv may hold; choose an interval of at least "
            f"{shortest}")

    def _row(self, index: int, sample) -> None:
        self._count += 1
        if self._count > MAX_ROWS:        # a run without a duration: found as it goes
            raise self._too_many(f"more than {MAX_ROWS:,} rows by {sample.time:g} s",
                                 len(self._devices), sample.time)
        name, stats, last = self._devices[index]
        figures = iostat_x(last[0], sample, stats.FIELDS, self.columns)
        self._rows.append((sample.time, index,
                           f"{sample.time:.9f},{sample.time - last[0].time:.9f},{name},"
                           + ",".join("" if figures[c] is None else f"{figures[c]:.6f}"
                                      for c in self.columns) + "\n"))
        last[0] = sample

    def close(self) -> None:
        """Write the intervals still due and the last one, cut short by the end of the
        run, and put the file in place."""
        now = self._clock.now if self._clock is not None else 0.0
        self._header(IOSTAT_COLUMNS)          # no device installed: the 2.6 header
        for index, (_name, stats, last) in enumerate(self._devices):
            end = stats.sample(now)           # passes the full intervals due
            if end.time > last[0].time:
                self._row(index, end)
        self._rows.sort(key=lambda row: (row[0], row[1]))
        for _t, _i, text in self._rows:
            self._write(text)
        self._rows = []
        self._pending.commit()

    def discard(self) -> None:
        """Remove the unfinished file."""
        self._pending.discard()
