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

import numpy as np

STEP = 0.0001
LEVELS = np.arange(1, 10001) / 10000.0
"""Cumulative fractions at which the two curves are compared: 0.0001, ..., 1."""


def sample_quantiles(times) -> np.ndarray:
    """Response time at each of `LEVELS` on the piecewise-linear CDF of the samples ``times``."""
    x = np.sort(np.asarray(times, dtype=float).ravel())
    n = x.size
    if n == 0:
        raise ValueError("demerit: a sample is empty")
    if not np.all(np.isfinite(x)):
        raise ValueError("demerit: a sample holds a NaN or infinite value")
    positions = (np.arange(n) + 0.5) / n
    return np.interp(LEVELS, positions, x)


def cdf_quantiles(x, cum) -> np.ndarray:
    """Response time at each of `LEVELS` on the CDF through the points (``x``, ``cum``).

    ``x`` must be non-decreasing and ``cum`` (cumulative fractions in [0, 1])
    non-decreasing. Fractions below the first point read the first x, above
    the last point the last x.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(cum, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise ValueError("demerit: a CDF needs matching, non-empty x and fraction lists")
    if np.any(np.diff(x) < 0) or np.any(np.diff(y) < 0):
        raise ValueError("demerit: a CDF's points must be non-decreasing")
    last = x.size - 1
    hi = np.searchsorted(y, LEVELS, side="left")   # first point with F >= p
    hi = np.clip(hi, min(1, last), last)
    lo = np.maximum(hi - 1, 0)
    y0, y1 = y[lo], y[hi]
    rise = y1 - y0
    frac = np.divide(LEVELS - y0, rise, out=np.ones_like(LEVELS), where=rise > 0)
    frac = np.clip(frac, 0.0, 1.0)
    return x[lo] + frac * (x[hi] - x[lo])


def rms_distance(q_a: np.ndarray, q_b: np.ndarray) -> float:
    """Root-mean-square difference of two quantile functions sampled on `LEVELS`."""
    d = np.asarray(q_a, dtype=float) - np.asarray(q_b, dtype=float)
    return float(np.sqrt(np.mean(d * d)))


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


def _disksim_edges_us(buckets: int = 1750) -> np.ndarray:
    # parv/statdefs "Physical access time": scale 1000 (us), start 0, step 1, grow 1 (%).
    edges = [0]
    for _ in range(buckets - 1):
        e = edges[-1]
        edges.append(e + 1 + e // 100)
    return np.asarray(edges, dtype=np.int64)


_EDGES_US = _disksim_edges_us()


def disksim_binned_cdf(times_ms) -> tuple[np.ndarray, np.ndarray]:
    """The CDF points DiskSim 4.0 prints for response times ``times_ms`` (ms).

    DiskSim files a time into 1750 buckets, truncated to whole microseconds,
    each about 1 % wider than the one before (``parv/statdefs``, "Physical
    access time"); each bucket's label is its upper edge and the printed
    cumulative fraction counts the times below it (see `blksim.experiments.validation.disksim_outv`).
    Returns (labels in ms, cumulative fractions).
    """
    t = np.asarray(times_ms, dtype=float).ravel()
    if t.size == 0:
        raise ValueError("demerit: a sample is empty")
    # DiskSim truncates to whole microseconds; the nudge keeps a time of exactly n us in n
    us = np.sort(np.floor(t * 1000.0 + 1e-6).astype(np.int64))
    cum = np.searchsorted(us, _EDGES_US, side="left") / us.size
    return _EDGES_US / 1000.0, cum


def disksim_binned_demerit(sim_times_ms, measured_times_ms) -> float:
    """The demerit as DiskSim computes it: from both samples binned as DiskSim bins them.

    Binning moves each CDF by up to a bucket width (about 1 % of the time), so
    this differs from `demerit` by a few hundredths of a millisecond; it is the
    like-for-like figure to set beside DiskSim's published ones.
    """
    return demerit_from_cdfs(*disksim_binned_cdf(sim_times_ms),
                             *disksim_binned_cdf(measured_times_ms))
