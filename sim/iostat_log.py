"""``--iostat INTERVAL``: ``iostat -x``'s figures every INTERVAL of simulated time, as CSV.

Like ``iostat -x INTERVAL``, each row covers one interval of one block device (its
/proc/diskstats counters sampled at the interval's start and end, `blksim.sim.diskstats`);
a last interval cut short by the end of the run is written with its own length. Columns:
``time_s`` (the end of the interval), ``interval_s``, ``device``, then iostat's columns in
iostat's order; a column a device's counters do not give (a 2.6.18 partition keeps only
I/Os and sectors) is left empty. Rows are in time order, the devices of one interval in
/proc/diskstats' order.
"""

from __future__ import annotations

from blksim.sim.diskstats import IOSTAT_COLUMNS, iostat_x
from blksim.traces.records import PendingFile


class IostatRecorder:
    """Writes the CSV; it appears only when the run completes.

    The counters are sampled as the simulation passes each interval's end, without an
    event of its own (an idle device is sampled when it next changes, or at the end),
    so rows are gathered and written in order at the end: a few per device and interval.
    """

    def __init__(self, path, interval: float) -> None:
        if not (interval > 0.0 and interval < float("inf")):
            raise ValueError(f"--iostat: expected a positive interval, found {interval!r}")
        self.interval = interval
        self._pending = PendingFile(path, binary=False)
        self._write = self._pending.file.write
        self._write("time_s,interval_s,device," + ",".join(IOSTAT_COLUMNS) + "\n")
        self._devices: list = []          # (name, stats, [last sample])
        self._rows: list = []             # (time, device index, text)
        self._clock = None

    def install(self, blocks: dict, clock) -> None:
        """Sample the counters of every device in ``blocks`` (name -> an object with
        ``stats``) at every multiple of the interval."""
        self._clock = clock
        for index, (name, dev) in enumerate(blocks.items()):
            stats = dev.stats
            last = [stats.sample(clock.now)]
            entry = (name, stats, last)
            self._devices.append(entry)
            stats.every(self.interval, lambda sample, i=index: self._row(i, sample),
                        start=last[0].time)

    def _row(self, index: int, sample) -> None:
        name, stats, last = self._devices[index]
        figures = iostat_x(last[0], sample, stats.FIELDS)
        self._rows.append((sample.time, index,
                           f"{sample.time:.9f},{sample.time - last[0].time:.9f},{name},"
                           + ",".join("" if figures[c] is None else f"{figures[c]:.6f}"
                                      for c in IOSTAT_COLUMNS) + "\n"))
        last[0] = sample

    def close(self) -> None:
        """Write the intervals still due and the last one, cut short by the end of the
        run, and put the file in place."""
        now = self._clock.now if self._clock is not None else 0.0
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
