"""A block device's I/O statistics as Linux keeps them (/proc/diskstats), and the
figures ``iostat -x`` derives from two samples of them.

The 2.6 kernels (`DiskStats`) follow Linux 2.6.18 (block/ll_rw_blk.c, genhd.h):

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
``iostat -x`` of sysstat 9 gives their figures (`IOSTAT_COLUMNS`).

The multi-queue kernels 5.4-6.6 (`MqDiskStats`) keep four groups (``enum stat_group``:
read, write, discard, flush) and count differently; their figures are those of
today's ``iostat -x`` (sysstat 12, `IOSTAT12_COLUMNS`). See `MqDiskStats`.
`diskstats_for` picks the counters of a kernel line.
"""

from __future__ import annotations

from dataclasses import dataclass

from blksim.block.elevator import kernel_version

#: The ``iostat -x`` columns, in iostat's order (sysstat 9 to 11): the 2.6 kernels'.
IOSTAT_COLUMNS = ("rrqm/s", "wrqm/s", "r/s", "w/s", "rMB/s", "wMB/s", "avgrq-sz", "avgqu-sz",
                  "await", "r_await", "w_await", "svctm", "%util")

#: Today's ``iostat -x`` columns, in its order (sysstat 12.3.1 and later, iostat.c
#: ``write_plain_ext_stat``): the multi-queue kernels'.
IOSTAT12_COLUMNS = ("r/s", "rkB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz",
                    "w/s", "wkB/s", "wrqm/s", "%wrqm", "w_await", "wareq-sz",
                    "d/s", "dkB/s", "drqm/s", "%drqm", "d_await", "dareq-sz",
                    "f/s", "f_await", "aqu-sz", "%util")

#: ``enum stat_group`` (include/linux/blk_types.h): the counters' groups from 4.18
#: (discard) and 5.5 (flush).
STAT_READ, STAT_WRITE, STAT_DISCARD, STAT_FLUSH = 0, 1, 2, 3


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
    COLUMNS = IOSTAT_COLUMNS         # the iostat that reads them prints these

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


#: How the multi-queue lines count (see `MqDiskStats`), by the line's kernel sources.
_MQ_VARIANTS = {
    "5.4": {"flush_fields": False, "request_merges": False, "merge_ticks": True,
            "read_ticks": False, "queue_jiffies": True},
    "5.10": {"flush_fields": True, "request_merges": True, "merge_ticks": False,
             "read_ticks": False, "queue_jiffies": False},
    "5.15": {"flush_fields": True, "request_merges": True, "merge_ticks": False,
             "read_ticks": False, "queue_jiffies": False},
    "6.1": {"flush_fields": True, "request_merges": True, "merge_ticks": False,
            "read_ticks": True, "queue_jiffies": False},
    "6.6": {"flush_fields": True, "request_merges": True, "merge_ticks": False,
            "read_ticks": True, "queue_jiffies": False},
}


class MqDiskStats:
    """The /proc/diskstats counters of a disk on a multi-queue kernel (Linux 5.4-6.6),
    updated by its queue, in four groups (``STAT_READ``, ``STAT_WRITE``,
    ``STAT_DISCARD``, ``STAT_FLUSH``):

    * ``blk_account_io_start`` (a request made from a bio): ``update_io_ticks`` (start);
    * a bio merged into a request (``blk_account_io_merge_bio``; 5.4:
      ``blk_account_io_start(rq, false)``, which also runs ``update_io_ticks``): one
      ``merges`` of its group;
    * a request merged into another (``attempt_merge``): from 5.10 one ``merges`` of its
      group (``blk_account_io_merge_request``), in 5.4 none;
    * ``blk_account_io_done`` (completion): ``update_io_ticks`` (end), one ``ios``, its
      sectors (``blk_account_io_completion``), ``ticks`` += completion - allocation
      (``start_time_ns``), and ``time_in_queue`` by the same: in 5.4 a counter of whole
      jiffies, each request's time cut down to jiffies (``nsecs_to_jiffies64``), so
      requests shorter than a jiffy add nothing; from 5.8 /proc/diskstats shows the sum
      of every group's ``ticks`` there;
    * ``blk_account_io_flush`` (a flush request done, 5.5 on): one ``ios`` and its time
      in the flush group (5.4 has no flush fields);
    * ``update_io_ticks(now, end)``: when the jiffy has changed since the last update,
      ``io_ticks`` grows by the jiffies since then at an end and by 1 at a start. Reading
      /proc/diskstats (a sample) from 6.1 runs an end update when requests are at the
      driver (``diskstats_show``: ``blk_mq_in_flight``).

    ``io_ticks`` is kept in jiffies of ``hz`` as the kernel keeps it (so ``%util`` is the
    kernel's, with its under-count of a busy device when requests start in new jiffies);
    the other times are exact seconds. The lines' differences are `_MQ_VARIANTS`.
    """

    __slots__ = ("hz", "flush_fields", "request_merges", "merge_ticks", "read_ticks",
                 "queue_jiffies",
                 "ios", "merges", "sectors", "ticks", "in_flight", "started", "io_jiffies",
                 "stamp", "time_in_queue", "bio_merges", "_next_mark", "_interval",
                 "_on_mark")

    FIELDS = IOSTAT12_COLUMNS
    COLUMNS = IOSTAT12_COLUMNS

    def __init__(self, kernel: str = "6.6", hz: int = 250) -> None:
        wanted = kernel_version(kernel)
        lines = [v for v in _MQ_VARIANTS if kernel_version(v) <= wanted]
        if not lines:
            raise ValueError(f"multi-queue diskstats: expected a kernel from 5.4, found "
                             f"{kernel!r}")
        variant = _MQ_VARIANTS[max(lines, key=kernel_version)]
        self.flush_fields = variant["flush_fields"]
        self.request_merges = variant["request_merges"]
        self.merge_ticks = variant["merge_ticks"]
        self.read_ticks = variant["read_ticks"]
        self.queue_jiffies = variant["queue_jiffies"]
        self.hz = hz
        self.ios = [0, 0, 0, 0]
        self.merges = [0, 0, 0, 0]
        self.sectors = [0, 0, 0, 0]
        self.ticks = [0.0, 0.0, 0.0, 0.0]
        self.in_flight = 0            # requests made and not yet done
        self.started = 0              # of those, at the driver (MQ_RQ_IN_FLIGHT)
        self.io_jiffies = 0
        self.stamp = None             # the jiffy of the last update_io_ticks
        self.time_in_queue = 0.0
        self.bio_merges = 0           # bios merged, both directions (not a diskstats field)
        self._next_mark = float("inf")
        self._interval = 0.0
        self._on_mark = None

    def every(self, interval: float, on_mark, start: float = 0.0) -> None:
        """As `DiskStats.every`."""
        self._interval = interval
        self._on_mark = on_mark
        self._next_mark = start + interval

    def _pass_marks(self, now: float) -> None:
        while now >= self._next_mark:
            mark = self._next_mark
            self._next_mark = mark + self._interval
            self._on_mark(self._read(mark))

    def _update_io_ticks(self, now: float, end: bool) -> None:
        """``update_io_ticks``."""
        jiffies = int(now * self.hz + 1e-9)
        stamp = self.stamp
        if stamp is None or jiffies > stamp:
            if stamp is not None:
                self.io_jiffies += jiffies - stamp if end else 1
            elif not end:
                self.io_jiffies += 1
            self.stamp = jiffies

    def request_added(self, now: float) -> None:
        """``blk_account_io_start``: a request was made from a bio."""
        if now >= self._next_mark:
            self._pass_marks(now)
        self._update_io_ticks(now, False)
        self.in_flight += 1

    def bio_merged(self, group: int, now: float | None = None) -> None:
        """A bio of ``group`` (``STAT_READ`` .. ``STAT_FLUSH``) merged into a request (5.4 also updates
        ``io_ticks``: give ``now``)."""
        if now is not None and now >= self._next_mark:
            self._pass_marks(now)
        self.merges[group] += 1
        self.bio_merges += 1
        if self.merge_ticks and now is not None:
            self._update_io_ticks(now, False)

    def request_merged_away(self, now: float, group: int | None = None) -> None:
        """A request of ``group`` was merged into another and is gone."""
        if now >= self._next_mark:
            self._pass_marks(now)
        if self.request_merges and group is not None:
            self.merges[group] += 1
        self.in_flight -= 1

    def request_issued(self, now: float) -> None:
        """The driver took a request (``blk_mq_start_request``)."""
        if now >= self._next_mark:
            self._pass_marks(now)
        self.started += 1

    def request_requeued(self, now: float) -> None:
        """The driver gave a request back (``blk_mq_requeue_request``)."""
        if now >= self._next_mark:
            self._pass_marks(now)
        self.started -= 1

    def request_completed(self, group: int, sectors: int, start: float, now: float) -> None:
        """A request of ``group`` (``STAT_READ`` .. ``STAT_FLUSH``) and ``sectors`` sectors, allocated at
        ``start``, completed at ``now``."""
        if now >= self._next_mark:
            self._pass_marks(now)
        self._update_io_ticks(now, True)
        self.ios[group] += 1
        self.sectors[group] += sectors
        self.ticks[group] += now - start
        if self.queue_jiffies:
            self.time_in_queue += int((now - start) * self.hz + 1e-9) / self.hz
        else:
            self.time_in_queue += now - start
        self.in_flight -= 1
        self.started -= 1

    def flush_completed(self, start: float, now: float) -> None:
        """``blk_account_io_flush``: a flush request made at ``start`` is done."""
        if now >= self._next_mark:
            self._pass_marks(now)
        if self.flush_fields:
            self.ios[STAT_FLUSH] += 1
            self.ticks[STAT_FLUSH] += now - start
            self.time_in_queue += now - start

    def sample(self, now: float) -> DiskStatsSample:
        """The counters as /proc/diskstats would show them at ``now``."""
        if now >= self._next_mark:
            self._pass_marks(now)
        return self._read(now)

    def _read(self, now: float) -> DiskStatsSample:
        """``diskstats_show`` at ``now``."""
        if self.read_ticks and self.started:
            self._update_io_ticks(now, True)
        return DiskStatsSample(now, tuple(self.ios), tuple(self.merges), tuple(self.sectors),
                               tuple(self.ticks), self.io_jiffies / self.hz,
                               self.time_in_queue)


def diskstats_for(kernel: str, hz: int = 250):
    """The counters a disk keeps on kernel line ``kernel``: `DiskStats` (2.6) or
    `MqDiskStats` (5.4 and later)."""
    if kernel_version(kernel) >= (5, 0):
        return MqDiskStats(kernel, hz)
    return DiskStats()


def run_columns(stats) -> tuple:
    """The ``iostat -x`` columns of a run whose devices keep ``stats`` (an iterable of
    counters): today's sysstat when any is a multi-queue kernel's, else sysstat 9's."""
    for st in stats:
        if getattr(st, "COLUMNS", IOSTAT_COLUMNS) is IOSTAT12_COLUMNS:
            return IOSTAT12_COLUMNS
    return IOSTAT_COLUMNS


def iostat_x(before: DiskStatsSample, after: DiskStatsSample, fields=None,
             columns=IOSTAT_COLUMNS) -> dict:
    """``iostat -x``'s figures over the interval between two samples, as the sysstat of
    ``columns`` computes them: `IOSTAT_COLUMNS` (sysstat 9-11, `sysstat9_figures`) or
    `IOSTAT12_COLUMNS` (sysstat 12, `sysstat12_figures`). Columns not in ``fields``
    (those a device's counters do not give, as a 2.6.18 partition's; None: all) are
    None."""
    itv = after.time - before.time
    if itv <= 0.0:
        raise ValueError(f"iostat: the interval must be positive, found {itv!r} s")
    if columns == IOSTAT12_COLUMNS:
        figures = sysstat12_figures(before, after, itv)
    else:
        figures = sysstat9_figures(before, after, itv)
    if fields is not None and fields is not IOSTAT_COLUMNS and fields is not IOSTAT12_COLUMNS:
        figures = {k: (v if k in fields or _SAME_COUNTERS.get(k) in fields else None)
                   for k, v in figures.items()}
    return figures


#: A sysstat 12 column and the sysstat 9 one from the same counter (a device whose
#: counters give one gives the other: a 2.6.18 partition's sectors).
_SAME_COUNTERS = {"rkB/s": "rMB/s", "wkB/s": "wMB/s"}


def sysstat9_figures(before: DiskStatsSample, after: DiskStatsSample, itv: float) -> dict:
    """`IOSTAT_COLUMNS`: rates per second, ``avgrq-sz`` in 512-byte sectors,
    ``await``/``r_await``/``w_await``/``svctm`` in ms, ``%util`` in percent (sysstat's
    formulas). The means over requests are None when no request completed in the
    interval (sysstat's ``compute_ext_disk_stats`` prints 0.00 there; blksim prints no
    figure from nothing)."""
    rd, wr = (after.ios[d] - before.ios[d] for d in (0, 1))
    rsec, wsec = (after.sectors[d] - before.sectors[d] for d in (0, 1))
    rticks, wticks = (after.ticks[d] - before.ticks[d] for d in (0, 1))
    io_ticks = after.io_ticks - before.io_ticks
    n = rd + wr
    return {
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


def _delta(before: DiskStatsSample, after: DiskStatsSample, field: str, group: int):
    """The change of one group's counter; a group the samples do not have (a 2.6
    kernel's counters: no discard, no flush) did not change."""
    a = getattr(after, field)
    if group >= len(a):
        return 0
    return a[group] - getattr(before, field)[group]


def sysstat12_figures(before: DiskStatsSample, after: DiskStatsSample, itv: float) -> dict:
    """`IOSTAT12_COLUMNS`, as sysstat 12 computes them (iostat.c ``write_ext_stat``):
    per group ``x`` (r, w, d) ``x/s`` requests completed, ``xkB/s``, ``xrqm/s`` merges,
    ``%xrqm`` = merges / (merges + requests), ``x_await`` ms per request, ``xareq-sz``
    kB per request; ``f/s`` flushes and ``f_await``; ``aqu-sz`` = ``time_in_queue`` per
    second; ``%util`` = ``io_ticks`` per second in percent. A read or write mean over
    no request is None, as for 2.6; the discard and flush means print 0.00 as sysstat
    prints them (discards come from trim jobs, flushes are counted where made)."""
    figures = {}
    for group, x, empty in ((STAT_READ, "r", None), (STAT_WRITE, "w", None),
                            (STAT_DISCARD, "d", 0.0)):
        n = _delta(before, after, "ios", group)
        m = _delta(before, after, "merges", group)
        sec = _delta(before, after, "sectors", group)
        ticks = _delta(before, after, "ticks", group)
        figures[f"{x}/s"] = n / itv
        figures[f"{x}kB/s"] = sec / 2.0 / itv
        figures[f"{x}rqm/s"] = m / itv
        figures[f"%{x}rqm"] = 100.0 * m / (m + n) if m + n else empty
        figures[f"{x}_await"] = ticks * 1e3 / n if n else empty
        figures[f"{x}areq-sz"] = sec / 2.0 / n if n else empty
    nf = _delta(before, after, "ios", STAT_FLUSH)
    figures["f/s"] = nf / itv
    figures["f_await"] = _delta(before, after, "ticks", STAT_FLUSH) * 1e3 / nf if nf else 0.0
    figures["aqu-sz"] = (after.time_in_queue - before.time_in_queue) / itv
    figures["%util"] = 100.0 * (after.io_ticks - before.io_ticks) / itv
    return {c: figures[c] for c in IOSTAT12_COLUMNS}
