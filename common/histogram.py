"""A streaming, log-bucketed histogram: constant memory, percentiles within 1 %.

Each positive value falls in a bucket whose upper edge is (1 + 2**-7) times its
lower edge, so reporting a bucket's geometric middle is off by at most 0.4 %
of the true value. Count, sum, minimum and maximum are exact.
"""

from __future__ import annotations

import math

import numpy as np

_GROWTH = 1.0 + 2.0 ** -7          # bucket width ratio (0.78 %)
_INV_LOG_GROWTH = 1.0 / math.log(_GROWTH)
_FLOOR = 1e-9                      # values at or below 1 ns share bucket 0
#: Significant digits a percentile from the buckets has: the buckets are 0.78 % wide and a
#: percentile is reported at its bucket's middle, so within 0.4 %: three digits.
PERCENTILE_DIGITS = 3
_INV_FLOOR = 1.0 / _FLOOR
_NBUCKETS = int(math.log(1e5 / _FLOOR) * _INV_LOG_GROWTH) + 2   # up to ~1e5 s


class StreamingHistogram:
    """Distribution of non-negative values (seconds) in a fixed number of buckets."""

    __slots__ = ("counts", "n", "total", "lo", "hi")

    def __init__(self) -> None:
        self.counts = np.zeros(_NBUCKETS, dtype=np.int64)
        self.n = 0
        self.total = 0.0
        self.lo = math.inf
        self.hi = 0.0

    def add(self, value: float) -> None:
        """Record one value."""
        self.n += 1
        self.total += value
        if value < self.lo:
            self.lo = value
        if value > self.hi:
            self.hi = value
        if value <= _FLOOR:
            self.counts[0] += 1
        else:
            idx = int(math.log(value * _INV_FLOOR) * _INV_LOG_GROWTH) + 1
            if idx >= _NBUCKETS:
                idx = _NBUCKETS - 1
            self.counts[idx] += 1

    def add_many(self, values: np.ndarray) -> None:
        """Record every value of a float array (the batched path used during runs)."""
        if values.size == 0:
            return
        scaled = np.maximum(values, _FLOOR) * _INV_FLOOR
        idx = (np.log(scaled) * _INV_LOG_GROWTH).astype(np.int64) + 1
        idx[values <= _FLOOR] = 0
        np.minimum(idx, _NBUCKETS - 1, out=idx)
        self.counts += np.bincount(idx, minlength=_NBUCKETS)
        self.n += int(values.size)
        self.total += float(values.sum())
        lo = float(values.min())
        hi = float(values.max())
        if lo < self.lo:
            self.lo = lo
        if hi > self.hi:
            self.hi = hi

    def merge(self, other: "StreamingHistogram") -> None:
        """Add every value of `other` to this histogram."""
        if other.n == 0:
            return
        self.counts += other.counts
        self.n += other.n
        self.total += other.total
        self.lo = min(self.lo, other.lo)
        self.hi = max(self.hi, other.hi)

    @property
    def mean(self) -> float:
        """Exact mean, 0.0 when empty."""
        return self.total / self.n if self.n else 0.0

    def percentile(self, p: float) -> float:
        """The nearest-rank p-th percentile (0 < p <= 100), within 1 % of the exact value."""
        if self.n == 0:
            return 0.0
        if p >= 100.0:
            return self.hi
        rank = max(1, math.ceil(p / 100.0 * self.n))
        idx = int(np.searchsorted(np.cumsum(self.counts), rank))
        if idx == 0:
            # bucket 0 holds the values at or below 1 ns, the smallest among them: report
            # that (exact zeros, e.g. requests dispatched at once, stay 0 and not 1 ns)
            value = self.lo
        else:
            value = _FLOOR * _GROWTH ** (idx - 0.5)
        return min(max(value, self.lo), self.hi)

    def summary(self) -> dict:
        """count, mean, min, p50, p95, p99, max (seconds).

        An empty histogram has no distribution: its count is 0 and every other figure is
        None (results.json's ``null``), never a 0 that reads as a measurement."""
        if self.n == 0:
            return {"count": 0, **dict.fromkeys(("mean", "min", "p50", "p95", "p99", "max"))}
        return {
            "count": self.n,
            "mean": self.mean,
            "min": self.lo,
            "p50": self.percentile(50),
            "p95": self.percentile(95),
            "p99": self.percentile(99),
            "max": self.hi,
        }


def percentile_figure(value: float) -> float:
    """A percentile rounded to the digits the buckets give it (`PERCENTILE_DIGITS`)."""
    if value == 0.0 or not math.isfinite(value):
        return value
    return round(value, PERCENTILE_DIGITS - 1 - math.floor(math.log10(abs(value))))


def latency_ms(summary: dict, keys, suffix: str = "") -> dict:
    """``summary``'s ``keys`` (seconds) in ms: percentiles (pNN) to three significant
    digits, the others to the nanosecond; None stays None (an empty histogram)."""
    out = {}
    for key in keys:
        if summary[key] is None:
            out[f"{key}{suffix}"] = None
            continue
        ms = summary[key] * 1e3
        out[f"{key}{suffix}"] = percentile_figure(ms) if key.startswith("p") else round(ms, 6)
    return out
