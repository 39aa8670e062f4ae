"""The demerit figure: how far apart two response-time distributions are.

Ruemmler and Wilkes ("An introduction to disk drive modeling", IEEE Computer
27(3), 1994) score a drive model by the root-mean-square *horizontal* distance
between the simulated and the measured response-time CDFs. As DiskSim 4.0's
``rms`` tool computes it: both CDFs are interpolated piecewise-linearly, the
response time is read off each at every 0.0001 step of cumulative fraction
(p = 0.0001, 0.0002, ..., 1), and the figure is
``sqrt(mean((x_sim(p) - x_meas(p))**2))``, in the unit of the inputs. Reading x
at a fraction p is evaluating the inverse CDF (the quantile function), so
everything below works with quantile functions sampled on `LEVELS`.

Two ways to build the piecewise-linear CDF:

* `sample_quantiles`, from raw samples (blksim's simulated times and a
  trace's measured times). The i-th smallest of n samples (i = 1..n) is
  placed at cumulative fraction (i - 0.5) / n, the midpoint of the 1/n step
  the empirical CDF takes there, and the points are joined by straight lines.
  Why the midpoint: it treats the two samples alike whatever their sizes, it
  favours neither the low nor the high end (the points of a reflected sample
  are the reflected points), and it is never more than half a step away from
  the empirical step CDF.
  Ties need no special case: tied samples get consecutive fractions at the
  same time, a vertical segment of the CDF, so the quantile function is flat
  across them. The ends are clamped: below 0.5 / n the quantile is the
  smallest sample and above 1 - 0.5 / n the largest, so the curve never
  extrapolates beyond what was observed.
* `cdf_quantiles`, from a tabulated CDF, e.g. DiskSim's binned distributions
  (`blksim.experiments.validation.disksim_outv`): points (x, F(x)) joined by
  straight lines, inverted as DiskSim's ``rms`` does (for each p, the first
  point with F >= p and the straight line from the point before it).
"""

from __future__ import annotations

import math
from bisect import bisect_left

# Pure Python on purpose: 10,000 levels take a few milliseconds, and `blksim validate`
# spends less CPU in all than importing numpy would cost it.

STEP = 0.0001
LEVELS = tuple(k / 10000.0 for k in range(1, 10001))
"""Cumulative fractions at which the two curves are compared: 0.0001, ..., 1."""


def _finite_sorted(times) -> list:
    x = sorted(float(t) for t in times)
    if not x:
        raise ValueError("demerit: a sample is empty")
    if not all(map(math.isfinite, x)):
        raise ValueError("demerit: a sample holds a NaN or infinite value")
    return x


def sample_quantiles(times) -> list:
    """Response time at each of `LEVELS` on the piecewise-linear CDF of the samples ``times``."""
    x = _finite_sorted(times)
    n = len(x)
    last = n - 1
    out = []
    append = out.append
    for p in LEVELS:
        # sample i sits at fraction (i + 0.5) / n, so fraction p is at index p * n - 0.5
        u = p * n - 0.5
        if u <= 0.0:
            append(x[0])
        elif u >= last:
            append(x[last])
        else:
            j = int(u)
            append(x[j] + (u - j) * (x[j + 1] - x[j]))
    return out


def cdf_quantiles(x, cum) -> list:
    """Response time at each of `LEVELS` on the CDF through the points (``x``, ``cum``).

    ``x`` must be non-decreasing and ``cum`` (cumulative fractions in [0, 1])
    non-decreasing. Fractions below the first point read the first x, above
    the last point the last x.
    """
    x = [float(v) for v in x]
    y = [float(v) for v in cum]
    if not x or len(x) != len(y):
        raise ValueError("demerit: a CDF needs matching, non-empty x and fraction lists")
    if any(b < a for a, b in zip(x, x[1:])) or any(b < a for a, b in zip(y, y[1:])):
        raise ValueError("demerit: a CDF's points must be non-decreasing")
    last = len(x) - 1
    first_hi = min(1, last)
    out = []
    append = out.append
    for p in LEVELS:
        hi = bisect_left(y, p)                  # first point with F >= p
        hi = first_hi if hi < first_hi else (last if hi > last else hi)
        lo = hi - 1 if hi > 0 else 0
        rise = y[hi] - y[lo]
        frac = (p - y[lo]) / rise if rise > 0 else 1.0
        frac = 0.0 if frac < 0.0 else (1.0 if frac > 1.0 else frac)
        append(x[lo] + frac * (x[hi] - x[lo]))
    return out


def rms_distance(q_a, q_b) -> float:
    """Root-mean-square difference of two quantile functions sampled on `LEVELS`."""
    if len(q_a) != len(q_b):
        raise ValueError("demerit: the two quantile functions differ in length")
    return math.sqrt(math.fsum((a - b) * (a - b) for a, b in zip(q_a, q_b)) / len(q_a))
def demerit(sim_times, measured_times) -> float:
    """Ruemmler & Wilkes demerit of ``sim_times`` against ``measured_times``.

    Both are samples of response times in the same unit; the result is in that
    unit. Symmetric in its arguments; 0 for identical samples; shifting one
    sample by c gives |c|; scaling both by k scales the figure by k.
    """
    return rms_distance(sample_quantiles(sim_times), sample_quantiles(measured_times))


def demerit_from_cdfs(x_sim, cum_sim, x_meas, cum_meas) -> float:
    """The demerit between two tabulated CDFs (points (x, cumulative fraction))."""
    return rms_distance(cdf_quantiles(x_sim, cum_sim), cdf_quantiles(x_meas, cum_meas))


def _disksim_edges_us(buckets: int = 1750) -> list:
    # parv/statdefs "Physical access time": scale 1000 (us), start 0, step 1, grow 1 (%).
    edges = [0]
    for _ in range(buckets - 1):
        e = edges[-1]
        edges.append(e + 1 + e // 100)
    return edges


_EDGES_US = _disksim_edges_us()


def disksim_binned_cdf(times_ms) -> tuple[list, list]:
    """The CDF points DiskSim 4.0 prints for response times ``times_ms`` (ms).

    DiskSim files a time into 1750 buckets, truncated to whole microseconds,
    each about 1 % wider than the one before (``parv/statdefs``, "Physical
    access time"); each bucket's label is its upper edge and the printed
    cumulative fraction counts the times below it (see `blksim.experiments.validation.disksim_outv`).
    Returns (labels in ms, cumulative fractions).
    """
    # DiskSim truncates to whole microseconds; the nudge keeps a time of exactly n us in n
    us = [math.floor(t * 1000.0 + 1e-6) for t in _finite_sorted(times_ms)]
    n = len(us)
    return [e / 1000.0 for e in _EDGES_US], [bisect_left(us, e) / n for e in _EDGES_US]


def disksim_binned_demerit(sim_times_ms, measured_times_ms) -> float:
    """The demerit as DiskSim computes it: from both samples binned as DiskSim bins them.

    Binning moves each CDF by up to a bucket width (about 1 % of the time), so
    this differs from `demerit` by a few hundredths of a millisecond; it is the
    like-for-like figure to set beside DiskSim's published ones.
    """
    return demerit_from_cdfs(*disksim_binned_cdf(sim_times_ms),
                             *disksim_binned_cdf(measured_times_ms))
