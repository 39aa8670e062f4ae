"""A block device's I/O statistics as Linux keeps them (/proc/diskstats), and the
figures ``iostat -x`` derives from two samples of them.

The accounting follows Linux 2.6.18 (block/ll_rw_blk.c, genhd.h):

* ``drive_stat_acct``: a new request (at ``add_request``) raises ``in_flight``; a bio
  merged into a request counts one ``merges`` of its direction;
* ``attempt_merge``: a request merged into another leaves ``in_flight``, and the
  survivor keeps the earlier ``start_time``;
* ``end_that_request_last``: a completed request counts one ``ios``, its sectors, and
  ``ticks`` += completion - ``start_time`` (its allocation), and leaves ``in_flight``;
* ``disk_round_stats``, before every change of ``in_flight``: ``io_ticks`` grows by
  the time elapsed while ``in_flight`` was non-zero, ``time_in_queue`` by that time
  times ``in_flight``.

The kernel counts in jiffies; blksim counts the same quantities in exact seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The ``iostat -x`` columns, in iostat's order (sysstat 9 and later).
IOSTAT_COLUMNS = ("rrqm/s", "wrqm/s", "r/s", "w/s", "rMB/s", "wMB/s", "avgrq-sz", "avgqu-sz",
                  "await", "r_await", "w_await", "svctm", "%util")


@dataclass(frozen=True)
class DiskStatsSample:
    """The counters at one instant: per direction (read, write) ``ios``, ``merges``,
    ``sectors`` and ``ticks`` (s); ``io_ticks`` and ``time_in_queue`` (s)."""

    time: float
    ios: tuple
    merges: tuple
    sectors: tuple
    ticks: tuple
    io_ticks: float
    time_in_queue: float


class DiskStats:
    """The counters of one block device, updated by its request queue."""

    __slots__ = ("ios", "merges", "sectors", "ticks", "in_flight", "io_ticks",
                 "time_in_queue", "stamp", "_next_mark", "_interval", "_on_mark")

    FIELDS = IOSTAT_COLUMNS          # the iostat columns these counters give: all

    def __init__(self) -> None:
        self.ios = [0, 0]
        self.merges = [0, 0]
        self.sectors = [0, 0]
        self.ticks = [0.0, 0.0]
        self.in_flight = 0
        self.io_ticks = 0.0
        self.time_in_queue = 0.0
        self.stamp = 0.0
        self._next_mark = float("inf")
        self._interval = 0.0
        self._on_mark = None

    def every(self, interval: float, on_mark, start: float = 0.0) -> None:
        """Call ``on_mark(sample)`` with the counters at ``start + interval``, ``start +
        2 interval``, ... (each as it is passed: no simulation event is needed, since
        the counters change only linearly between two updates)."""
        self._interval = interval
        self._on_mark = on_mark
        self._next_mark = start + interval

    def round(self, now: float) -> None:
        """``disk_round_stats``: account the time since the last change."""
        if now >= self._next_mark:
            self._pass_marks(now)
        if self.in_flight:
            elapsed = now - self.stamp
            self.io_ticks += elapsed
            self.time_in_queue += self.in_flight * elapsed
        self.stamp = now

    def _pass_marks(self, now: float) -> None:
        while now >= self._next_mark:
            mark = self._next_mark
            self._next_mark = mark + self._interval
            self.round(mark)
            self._on_mark(self._snapshot(mark))

    def request_added(self, now: float) -> None:
        """A new request entered the queue."""
        self.round(now)
        self.in_flight += 1

    def bio_merged(self, write: bool) -> None:
        """A bio was merged into a queued request."""
        self.merges[write] += 1

    def request_merged_away(self, now: float) -> None:
        """A queued request was merged into another and is gone."""
        self.round(now)
        self.in_flight -= 1

    def request_completed(self, write: bool, sectors: int, start: float, now: float) -> None:
        """A request of ``sectors`` sectors allocated at ``start`` completed at ``now``."""
        self.ios[write] += 1
        self.sectors[write] += sectors
        self.ticks[write] += now - start
        self.round(now)
        self.in_flight -= 1

    def sample(self, now: float) -> DiskStatsSample:
        """The counters as /proc/diskstats would show them at ``now``."""
        self.round(now)
        return self._snapshot(now)

    def _snapshot(self, now: float) -> DiskStatsSample:
        return DiskStatsSample(now, tuple(self.ios), tuple(self.merges), tuple(self.sectors),
                               tuple(self.ticks), self.io_ticks, self.time_in_queue)


def iostat_x(before: DiskStatsSample, after: DiskStatsSample, fields=IOSTAT_COLUMNS) -> dict:
    """``iostat -x``'s figures over the interval between two samples: rates per second,
    ``avgrq-sz`` in 512-byte sectors, ``await``/``r_await``/``w_await``/``svctm`` in ms,
    ``%util`` in percent (sysstat's formulas). Columns not in ``fields`` (those a
    device's counters do not give, as a 2.6.18 partition's) are None, and so are the
    means over requests when no request completed in the interval (sysstat's
    ``compute_ext_disk_stats`` prints 0.00 there; blksim prints no figure from nothing)."""
    itv = after.time - before.time
    if itv <= 0.0:
        raise ValueError(f"iostat: the interval must be positive, found {itv!r} s")
    rd, wr = (after.ios[d] - before.ios[d] for d in (0, 1))
    rsec, wsec = (after.sectors[d] - before.sectors[d] for d in (0, 1))
    rticks, wticks = (after.ticks[d] - before.ticks[d] for d in (0, 1))
    io_ticks = after.io_ticks - before.io_ticks
    n = rd + wr
    figures = {
        "rrqm/s": (after.merges[0] - before.merges[0]) / itv,
        "wrqm/s": (after.merges[1] - before.merges[1]) / itv,
        "r/s": rd / itv,
        "w/s": wr / itv,
        "rMB/s": rsec / 2048.0 / itv,
        "wMB/s": wsec / 2048.0 / itv,
        # a mean over no request is None (null, "-"), where sysstat prints 0.00
        "avgrq-sz": (rsec + wsec) / n if n else None,
        "avgqu-sz": (after.time_in_queue - before.time_in_queue) / itv,
        "await": (rticks + wticks) * 1e3 / n if n else None,
        "r_await": rticks * 1e3 / rd if rd else None,
        "w_await": wticks * 1e3 / wr if wr else None,
        "svctm": io_ticks * 1e3 / n if n else None,
        "%util": min(100.0 * io_ticks / itv, 100.0),
    }
    if fields is not IOSTAT_COLUMNS:
        figures = {k: (v if k in fields else None) for k, v in figures.items()}
    return figures
