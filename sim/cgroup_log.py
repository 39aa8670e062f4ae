"""``--iostat INTERVAL`` in a run with cgroups: each group's io.stat and io.pressure over
time, in DIR/cgroups.csv (iostat.csv keeps its rows of devices).

A row per interval and group (the root as "/", then each group by its path, parents
first): ``time_s`` (the interval's end), ``interval_s``, ``cgroup``, then for each disk and
volume ``DEVICE:rbytes`` ... ``DEVICE:dios``, the group's io.stat counters at the
interval's end (cumulative, as the file reads, the group's descendants' included), then
``some_avg10`` ``some_avg60`` ``some_avg300`` (percent) and ``some_total_us``, and the
same for ``full``: io.pressure as read at the interval's end. A last interval cut short
by the end of the run is written with its own length.
"""

from __future__ import annotations

from blksim.block.cgroup import IO_STAT_KEYS
from blksim.traces.records import PendingFile

PRESSURE_KEYS = ("avg10", "avg60", "avg300", "total_us")


class CgroupRecorder:
    """Writes DIR/cgroups.csv from a run's `CgroupTree` and `Pressure`."""

    def __init__(self, path, interval: float) -> None:
        self.interval = interval
        self._pending = PendingFile(path, binary=False)
        self._write = self._pending.file.write
        self._tree = self._pressure = self._clock = None
        self._devices: list = []
        self._last = 0.0

    def install(self, tree, pressure, devices: list, clock) -> None:
        """Sample ``tree`` and ``pressure`` every interval; ``devices``: the names of
        the disks and volumes, in /proc/diskstats' order."""
        self._tree, self._pressure, self._clock = tree, pressure, clock
        self._devices = list(devices)
        self._last = clock.now
        self._write("time_s,interval_s,cgroup,"
                    + ",".join(f"{d}:{k}" for d in self._devices for k in IO_STAT_KEYS) + ","
                    + ",".join(f"{s}_{k}" for s in ("some", "full") for k in PRESSURE_KEYS)
                    + "\n")
        tree.every(self.interval, self._rows, start=self._last)

    def _rows(self, t: float) -> None:
        tree = self._tree
        for g in tree.groups.values():
            stat = tree.io_stat(g)
            cells = [str(stat.get(d, {}).get(k, 0)) for d in self._devices
                     for k in IO_STAT_KEYS]
            psi = self._pressure.figures(g, t)
            cells += [f"{psi[s][k]:.2f}" if k != "total_us" else str(psi[s][k])
                      for s in ("some", "full") for k in PRESSURE_KEYS]
            self._write(f"{t:.9f},{t - self._last:.9f},{g.name}," + ",".join(cells) + "\n")
        self._last = t

    def close(self) -> None:
        """Write the intervals still due and the last one, cut short by the end of the
        run, and put the file in place."""
        now = self._clock.now
        self._tree.passed(now)
        if now > self._last:
            self._rows(now)
        self._pending.commit()

    def discard(self) -> None:
        """Remove the unfinished file."""
        self._pending.discard()
