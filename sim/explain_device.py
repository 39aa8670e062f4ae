"""What the device did with what the elevator sent it: tags in use over time and, for a
RAID controller with a write-back cache, its dirty data and destaging.

`DeviceLog(queue)` subscribes to the queue's ``block_rq_issue`` and
``block_rq_complete``: a request holds a tag from its issue to its completion (the
multi-queue layer requeues one the device refused *before* its issue, so the two
tracepoints bracket exactly the requests the device holds). It keeps a time-weighted
histogram of the tags in use (seconds at each count), their maximum, and a series of
fixed intervals (mean and maximum per interval) whose interval doubles whenever it
would pass ``max_points`` intervals, so memory stays bounded however long the run.

When the queue's device is a `blksim.disk_models.raid.RaidController` with a write-back
cache, it also sets the controller's ``probe`` (which costs the controller one
attribute test when no one watches) and keeps: the dirty fraction of the cache over
time (time-weighted mean, maximum, the series), the time at or above the high-water
mark, destages started and their bytes, the time with at least one destage in
progress, and the flush timer's ticks. `device_lines` prints a summary.
"""

from __future__ import annotations

from blksim.disk_models.raid import LINE, RaidController

#: The first interval of a series, seconds (doubled as the run grows).
_FIRST_INTERVAL = 0.001


class Series:
    """A piecewise-constant quantity over time in at most ``max_points`` intervals of
    equal width (the width doubles, adjacent intervals merging, when it must): per
    interval, the time-weighted mean and the maximum."""

    __slots__ = ("t0", "width", "max_points", "area", "peak", "last_t", "value")

    def __init__(self, t0: float, max_points: int = 512, value: float = 0.0) -> None:
        if max_points < 2:
            raise ValueError(f"max_points: expected at least 2, found {max_points}")
        self.t0 = t0
        self.width = _FIRST_INTERVAL
        self.max_points = max_points
        self.area: list = []
        self.peak: list = []
        self.last_t = t0
        self.value = value

    def set(self, t: float, value: float) -> None:
        """The quantity becomes ``value`` at ``t`` (not before the last change)."""
        area = self.area
        i = len(area) - 1
        if i >= 0 and t <= self.t0 + (i + 1) * self.width:
            # the common case, written out: ``t`` in the interval last written to
            v = self.value
            area[i] += v * (t - self.last_t)
            if v > self.peak[i]:
                self.peak[i] = v
            self.last_t = t
        else:
            self.advance(t)
        self.value = value

    def advance(self, t: float) -> None:
        """Account the current value up to ``t``."""
        v = self.value
        while self.last_t < t:
            i = int((self.last_t - self.t0) / self.width)
            while i >= self.max_points:
                self._coarsen()
                i = int((self.last_t - self.t0) / self.width)
            end = self.t0 + (i + 1) * self.width
            if end <= self.last_t:          # rounding at a boundary: the next interval
                i += 1
                if i >= self.max_points:
                    self._coarsen()
                    continue
                end = self.t0 + (i + 1) * self.width
            if end > t:
                end = t
            while len(self.area) <= i:
                self.area.append(0.0)
                self.peak.append(0.0)
            self.area[i] += v * (end - self.last_t)
            if v > self.peak[i]:
                self.peak[i] = v
            self.last_t = end

    def _coarsen(self) -> None:
        """Double the width: each pair of intervals becomes one."""
        area, peak = self.area, self.peak
        self.area = [sum(area[k:k + 2]) for k in range(0, len(area), 2)]
        self.peak = [max(peak[k:k + 2]) for k in range(0, len(peak), 2)]
        self.width *= 2

    def summary(self, digits: int = 6) -> dict:
        """``interval_s``, and per interval its ``mean`` and ``max`` (the last interval's
        mean over the part of it that has passed)."""
        means = []
        for i, a in enumerate(self.area):
            covered = min(self.width, self.last_t - (self.t0 + i * self.width))
            means.append(round(a / covered, digits) if covered > 0 else 0.0)
        return {"interval_s": self.width, "mean": means,
                "max": [round(p, digits) for p in self.peak]}


class DeviceLog:
    """Tags in use at ``queue``'s device over time and, for a RAID controller with a
    write-back cache, its cache (module docstring). ``controller``: the controller to
    watch (default: the queue's device, when it is one). `close` lets go of both."""

    def __init__(self, queue, controller=None, max_points: int = 512,
                 start: float | None = None) -> None:
        self.queue = queue
        self.start = queue.clock.now if start is None else start
        self.last = self.start
        self.tags = 0
        self.tags_max = 0
        # seconds at each count of tags in use (the index): a count only ever moves by
        # one, so every count up to the largest has been held
        self._tag_time: list = [0.0]
        self._tag_since = self.start
        self.tag_series = Series(self.start, max_points)
        queue.subscribe("block_rq_issue", self._issued)
        queue.subscribe("block_rq_complete", self._completed)
        device = getattr(queue, "device", None)
        if controller is None and isinstance(device, RaidController):
            controller = device
        self.controller = None
        if controller is not None and controller.write_back:
            if controller.probe is not None:
                raise ValueError(f"{controller.name}: its cache is already watched")
            self.controller = controller
            controller.probe = self._cache
            self.dirty = 0
            self.dirty_max = 0
            self._dirty_area = 0.0          # dirty lines x seconds
            self._above_high = 0.0          # seconds at or above the high-water mark
            self._dirty_since = self.start
            self.dirty_series = Series(self.start, max_points)
            self.destages = 0
            self.destage_bytes = 0
            self.destaging = 0
            self._destage_busy = 0.0
            self._destage_since = self.start
            self.flush_ticks = 0

    def close(self) -> None:
        """Stop listening (the figures stay)."""
        if self.queue is not None:
            self.queue.unsubscribe("block_rq_issue", self._issued)
            self.queue.unsubscribe("block_rq_complete", self._completed)
            self.queue = None
        if self.controller is not None and self.controller.probe == self._cache:
            self.controller.probe = None

    # ------------------------------------------------------------------ tags
    def _tags_to(self, n: int, now: float) -> None:
        if now < self.start:            # before the measured window: the count only
            now = self.start
        held = self._tag_time
        held[self.tags] += now - self._tag_since
        self._tag_since = now
        self.tags = n
        if n > self.tags_max:
            self.tags_max = n
            while len(held) <= n:
                held.append(0.0)
        self.tag_series.set(now, n)
        self.last = now

    def _issued(self, _q, _rq, now: float) -> None:
        self._tags_to(self.tags + 1, now)

    def _completed(self, _q, _rq, now: float) -> None:
        self._tags_to(self.tags - 1 if self.tags > 0 else 0, now)

    # ------------------------------------------------------------------ the cache
    def _cache(self, kind: str, now: float, value: int) -> None:
        """The controller's probe (before the measured window: its state only)."""
        if now < self.start:
            now = self.start
            if kind != "dirty":
                if kind == "destage_start":
                    self.destaging += 1
                elif kind == "destage_end":
                    self.destaging = max(self.destaging - 1, 0)
                return
        if kind == "dirty":
            dt = now - self._dirty_since
            self._dirty_area += self.dirty * dt
            if self.dirty >= self.controller.high and self.dirty:
                self._above_high += dt
            self._dirty_since = now
            self.dirty = value
            if value > self.dirty_max:
                self.dirty_max = value
            self.dirty_series.set(now, value / self.controller.lines_max)
        elif kind == "destage_start":
            if self.destaging:
                self._destage_busy += now - self._destage_since
            self._destage_since = now
            self.destaging += 1
            self.destages += 1
            self.destage_bytes += value * 512
        elif kind == "destage_end":
            self._destage_busy += now - self._destage_since
            self._destage_since = now
            self.destaging = max(self.destaging - 1, 0)
        elif kind == "flush_tick":
            self.flush_ticks += 1
        self.last = max(self.last, now)

    # ------------------------------------------------------------------ summary
    def summary(self, now: float | None = None) -> dict:
        """JSON-ready: ``window_s``; ``tags`` (``mean``, ``max``, ``histogram``: seconds
        at each count, ``series``); for a watched cache, ``cache`` (``lines``,
        ``dirty_mean``/``dirty_max`` as fractions of the cache, ``above_high_water_s``,
        ``destages``, ``destage_bytes``, ``destage_busy_s``, ``flush_ticks``,
        ``series`` of the dirty fraction). A mean over an empty window is None."""
        end = self.last if now is None else max(now, self.last)
        window = end - self.start
        held = dict(enumerate(self._tag_time))
        held[self.tags] = held.get(self.tags, 0.0) + (end - self._tag_since)
        self.tag_series.advance(end)
        out = {"window_s": round(window, 9), "tags": {
            "mean": round(sum(k * s for k, s in held.items()) / window, 6) if window > 0
            else None,
            "max": self.tags_max,
            "histogram": {str(k): round(s, 9) for k, s in sorted(held.items()) if s > 0},
            "series": self.tag_series.summary()}}
        c = self.controller
        if c is not None:
            dt = end - self._dirty_since
            area = self._dirty_area + self.dirty * dt
            above = self._above_high + (dt if self.dirty and self.dirty >= c.high else 0.0)
            busy = self._destage_busy + (end - self._destage_since if self.destaging else 0.0)
            self.dirty_series.advance(end)
            out["cache"] = {
                "lines": c.lines_max, "line_bytes": LINE * 512,
                "high_water": c.high / c.lines_max, "low_water": c.low / c.lines_max,
                "dirty_mean": round(area / window / c.lines_max, 6) if window > 0 else None,
                "dirty_max": round(self.dirty_max / c.lines_max, 6),
                "above_high_water_s": round(above, 9),
                "destages": self.destages, "destage_bytes": self.destage_bytes,
                "destage_busy_s": round(busy, 9), "flush_ticks": self.flush_ticks,
                "series": self.dirty_series.summary()}
        return out


def device_lines(summary: dict) -> list[str]:
    """`DeviceLog.summary` as terminal lines."""
    window = summary.get("window_s", 0.0)
    tags = summary["tags"]
    if tags["mean"] is None:
        return ["device: nothing issued (an empty window)"]
    out = [f"device over {window:.3f} s: tags in use {tags['mean']:.2f} on average, "
           f"{tags['max']} at most"]
    cache = summary.get("cache")
    if cache is not None and cache["dirty_mean"] is not None:
        out.append(f"  controller cache: dirty {cache['dirty_mean'] * 100:.1f} % on average, "
                   f"{cache['dirty_max'] * 100:.1f} % at most; at or above the high-water "
                   f"mark ({cache['high_water'] * 100:.0f} %) {cache['above_high_water_s']:.3f} s")
        out.append(f"  destages: {cache['destages']:,} ({cache['destage_bytes'] / 1e6:.3f} MB), "
                   f"destaging {cache['destage_busy_s']:.3f} s of {window:.3f} s; flush timer "
                   f"ticks: {cache['flush_ticks']:,}")
    return out
