"""Is a run's headline figure in steady state over its measured window?

A figure measured over a window (a throughput, a mean latency, transactions per second)
answers the question only if the process behind it is stationary there: no warm-up left,
no trend. This module keeps the per-interval counts such a check needs, in bounded memory,
and tests them.

**The series** (`IntervalSeries`): events (completions, transactions) counted per interval
of the measured window, with the sum of a value per interval (a latency, in integer
nanoseconds so sums stay exact). It holds a fixed number of intervals; when an event falls
past the last, adjacent intervals are merged in pairs and the width doubles. Counts and
sums are exact whatever the merging; memory does not grow with the run.

**The test** (`analyse`): the batch-means method (Law & Kelton, "Simulation Modeling and
Analysis", 3rd ed., 2000, section 9.5.3), used both for the figure's interval and for a
trend:

1. The full intervals of the window are merged in pairs into at most `MAX_BATCHES` batches
   (Schmeiser, "Batch size effects in the analysis of simulation output", Operations
   Research 30(3), 1982: 10 to 30 batches).
2. A least-squares line is fitted to the batch means. While the residuals' lag-1
   autocorrelation is above its 95 % bound for independent batches (1.645 / sqrt(k),
   one-sided: batches of a simulation are positively correlated), batches are merged in
   pairs again (larger batches are less correlated: the batch-size doubling of Fishman
   and Yarberry's LBATCH rule, "An implementation of the batch means method", INFORMS
   Journal on Computing 9(3), 1997), as long as `MIN_BATCHES` remain.
3. The drift is the fitted change over the window as a fraction of the mean (slope x
   window / mean), with its interval from the slope's standard error and Student's t with
   k - 2 degrees of freedom, widened by (1 + r) / (1 - r) for the residuals' lag-1
   correlation r left below the bound (the variance of a mean of AR(1) terms). The
   figure drifts when that interval excludes 0 and the drift
   is at least `DRIFT_TOLERANCE` (blksim's choice: a drift smaller than that does not
   change a figure printed to two digits).
4. No verdict ("too short to tell") from fewer than `MIN_BATCHES` batches, from batches
   still correlated at that number without a trend the widened interval shows (the run
   holds too few independent stretches: its slow cycles, such as a database's
   checkpoints, are as long as a batch), or from batches holding fewer than
   `MIN_EVENTS` events on average.

Besides the verdict: the mean's 95 % interval by batch means, the run length that would
bring that interval to +-5 % (the half-width falls as one over the root of the length),
and MSER-5's truncation point (White, "An effective truncation heuristic for bias
reduction in simulation output", Simulation 69(6), 1997) over the series' own intervals:
how much of the window's start still looks like warm-up.
"""

from __future__ import annotations

import math

#: Intervals an `IntervalSeries` holds before it merges them (blksim's choice: a power of
#: two, so that merging in pairs always leaves 64 to 128 filled intervals).
SERIES_SIZE = 128
#: Batches the test starts from, at most (Schmeiser 1982: 10 to 30).
MAX_BATCHES = 32
#: No verdict from fewer batches (Schmeiser 1982).
MIN_BATCHES = 10
#: No verdict when the batches hold fewer events than this on average (blksim's choice:
#: a count of 5 or more is roughly normal).
MIN_EVENTS = 5
#: A significant drift smaller than this share of the mean is not reported (blksim's
#: choice).
DRIFT_TOLERANCE = 0.02
#: The two-sided level of the drift interval and the mean's interval.
LEVEL = 0.95
#: The mean's relative half-width a run should reach (for ``run_for_5pct_s``).
TARGET_HALF_WIDTH = 0.05

METHOD = ("batch means (Law & Kelton 2000, 9.5.3; 10 to 32 batches, Schmeiser 1982), "
          "batches doubled while correlated (Fishman & Yarberry 1997); drift: least-squares "
          "trend over the window, Student's t; warm-up: MSER-5 (White 1997)")


class IntervalSeries:
    """Events per interval from ``start`` on, in at most ``size`` intervals of equal width
    (``width`` seconds at first, doubled by merging as the series grows)."""

    __slots__ = ("start", "width", "size", "counts", "sums")

    def __init__(self, start: float = 0.0, width: float = 1e-3,
                 size: int = SERIES_SIZE) -> None:
        if size < 2 or size % 2 or not width > 0:
            raise ValueError("an IntervalSeries needs an even size >= 2 and a width > 0")
        self.start = start
        self.width = width
        self.size = size
        self.counts = [0] * size
        self.sums = [0] * size

    def add(self, t: float, value: int = 0) -> None:
        """One event at ``t`` (ignored before ``start``) carrying ``value`` (an integer,
        e.g. nanoseconds, so that sums stay exact)."""
        if t < self.start:
            return
        i = int((t - self.start) / self.width)
        while i >= self.size:
            self._merge()
            i = int((t - self.start) / self.width)
        self.counts[i] += 1
        self.sums[i] += value

    def add_many(self, times, values=None) -> None:
        """Events at ``times`` (a numpy array) with integer ``values`` (or none)."""
        import numpy as np
        times = np.asarray(times, dtype=np.float64)
        keep = times >= self.start
        if not keep.all():
            times = times[keep]
            values = None if values is None else np.asarray(values)[keep]
        if not len(times):
            return
        while int((float(times.max()) - self.start) / self.width) >= self.size:
            self._merge()
        idx = ((times - self.start) / self.width).astype(np.int64)
        counts = np.bincount(idx, minlength=self.size).tolist()
        self.counts = [a + b for a, b in zip(self.counts, counts)]
        if values is not None:
            # integer sums per interval: summed as float64, exact while one call's sum in
            # an interval stays below 2^53 (104 days of latency in nanoseconds)
            sums = np.rint(np.bincount(idx, weights=np.asarray(values, dtype=np.float64),
                                       minlength=self.size)).astype(np.int64).tolist()
            self.sums = [a + b for a, b in zip(self.sums, sums)]

    def _merge(self) -> None:
        half = self.size // 2
        c, s = self.counts, self.sums
        self.counts = [c[2 * k] + c[2 * k + 1] for k in range(half)] + [0] * half
        self.sums = [s[2 * k] + s[2 * k + 1] for k in range(half)] + [0] * half
        self.width *= 2.0

    @property
    def total(self) -> int:
        """Events counted."""
        return sum(self.counts)

    @property
    def total_value(self) -> int:
        """The sum of their values."""
        return sum(self.sums)

    def full(self, end: float) -> tuple:
        """(counts, sums) of the intervals that lie wholly before ``end`` (the end of the
        measured window); the last, partial interval is left out."""
        n = min(self.size, max(0, int((end - self.start) / self.width + 1e-9)))
        return self.counts[:n], self.sums[:n]


# ---------------------------------------------------------------------- Student's t
def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified
    Lentz's method)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
                    -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    return _betai(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(level: float, df: int) -> float:
    """The two-sided ``level`` quantile of Student's t (e.g. 2.228 for 0.95 and 10)."""
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_p(mid, df) > 1.0 - level:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


# ---------------------------------------------------------------------- the test
def _pairs(values: list, weights: list) -> tuple:
    """Adjacent batches merged in pairs (an odd last one is dropped): weighted means."""
    vs, ws = [], []
    for k in range(0, len(values) - 1, 2):
        w = weights[k] + weights[k + 1]
        vs.append((values[k] * weights[k] + values[k + 1] * weights[k + 1]) / w)
        ws.append(w)
    return vs, ws


def _fit(values: list) -> tuple:
    """(slope per batch, intercept, residuals, lag-1 autocorrelation of the residuals)."""
    k = len(values)
    xbar = (k - 1) / 2.0
    ybar = sum(values) / k
    sxx = sum((i - xbar) ** 2 for i in range(k))
    slope = sum((i - xbar) * (y - ybar) for i, y in enumerate(values)) / sxx
    icpt = ybar - slope * xbar
    res = [y - (icpt + slope * i) for i, y in enumerate(values)]
    ss = sum(e * e for e in res)
    r1 = sum(res[i] * res[i + 1] for i in range(k - 1)) / ss if ss > 0 else 0.0
    return slope, icpt, res, r1


def mser_truncation(values: list) -> int:
    """MSER's truncation point (White 1997): the d in [0, n/2] minimising
    sum_{i >= d} (x_i - mean_d)^2 / (n - d)^2 over the series ``values``."""
    n = len(values)
    best, best_d = math.inf, 0
    for d in range(0, n // 2 + 1):
        tail = values[d:]
        m = sum(tail) / len(tail)
        score = sum((x - m) ** 2 for x in tail) / len(tail) ** 2
        if score < best:                  # the first of equal scores: the least cut
            best, best_d = score, d
    return best_d


def _too_short(why: str, **extra) -> dict:
    return {"method": METHOD, "verdict": "too short to tell", "reason": why, **extra}


def _five(values: list, weights: list) -> list:
    """Means of 5 consecutive intervals (MSER-5's batches), weighted; empty ones left
    out."""
    out = []
    for k in range(0, len(values) - 4, 5):
        w = sum(weights[k:k + 5])
        if w > 0:
            out.append(sum(v * x for v, x in zip(values[k:k + 5], weights[k:k + 5])) / w)
    return out


def _batch_means(values: list, weights: list, width: float, rate: bool) -> dict:
    """Steps 1 to 4 of the module's test over the intervals ``values``."""
    if len(values) < MIN_BATCHES:
        return _too_short(f"{len(values)} intervals; at least {MIN_BATCHES} batches are "
                          f"needed", batches=len(values))
    vs, ws, bw = list(values), list(weights), width
    while len(vs) > MAX_BATCHES:
        vs, ws = _pairs(vs, ws)
        bw *= 2.0
    slope, _, res, r1 = _fit(vs)
    while r1 > 1.645 / math.sqrt(len(vs)) and len(vs) // 2 >= MIN_BATCHES:
        vs, ws = _pairs(vs, ws)
        bw *= 2.0
        slope, _, res, r1 = _fit(vs)
    k = len(vs)
    window = bw * k
    total_w = sum(ws)
    mean = sum(v * w for v, w in zip(vs, ws)) / total_w if total_w else 0.0
    batches = {"batches": k, "batch_s": round(bw, 9),
               "batch_means": [round(v, 6) for v in vs], "lag1_correlation": round(r1, 4),
               "window_s": round(window, 9)}
    # events per batch: a rate times the batch's width, or a mean's weights
    events = mean * bw if rate else total_w / k
    if events < MIN_EVENTS:
        return _too_short(f"{events:.1f} events per batch; at least {MIN_EVENTS} are "
                          f"needed", **batches)
    correlated = r1 > 1.645 / math.sqrt(k)
    if mean == 0:
        return _too_short("the figure's mean is 0", **batches)
    plain = sum(vs) / k
    s2 = sum(e * e for e in res) / (k - 2)
    sxx = sum((i - (k - 1) / 2.0) ** 2 for i in range(k))
    # what correlation is left below the bound still widens the intervals: the
    # variance of a trend or a mean of AR(1) batches grows by (1 + r) / (1 - r)
    inflate = (1.0 + max(r1, 0.0)) / (1.0 - max(r1, 0.0))
    se_slope = math.sqrt(s2 / sxx * inflate)
    drift = slope * k / mean
    drift_half = t_quantile(LEVEL, k - 2) * se_slope * k / abs(mean)
    p = t_two_sided_p(slope / se_slope, k - 2) if se_slope > 0 else (0.0 if slope else 1.0)
    var_mean = sum((v - plain) ** 2 for v in vs) / (k - 1) / k * inflate
    half = t_quantile(LEVEL, k - 1) * math.sqrt(var_mean)
    rel_half = half / abs(mean)
    drifts = abs(drift) > drift_half and abs(drift) >= DRIFT_TOLERANCE
    if correlated and not drifts:
        # a trend that the widened interval still shows is a drift (a step in the window
        # leaves residuals that look correlated); anything else is no verdict
        return _too_short(f"the batches are still correlated at {k} batches of "
                          f"{bw:g} s (lag-1 correlation {r1:.2f}): the run's slow "
                          f"variations last about as long as a batch; run at least twice "
                          f"as long", **batches)
    return {"method": METHOD, "verdict": "drifts" if drifts else "steady",
            "reason": "trend" if drifts else None,
            "mean": round(mean, 9), "mean_half_width": round(half, 9),
            "mean_half_width_pct": round(100.0 * rel_half, 4),
            "drift_pct": round(100.0 * drift, 4),
            "drift_half_width_pct": round(100.0 * drift_half, 4),
            "drift_p_value": round(p, 6), "level": LEVEL,
            "run_for_5pct_s": round(window * (rel_half / TARGET_HALF_WIDTH) ** 2, 3),
            **batches}


def analyse(values: list, weights: list, width: float, rate: bool) -> dict:
    """The steady-state report of one figure from its per-interval ``values`` (a rate per
    interval when ``rate``, else a mean per interval), ``weights`` (each interval's
    events: what a mean is weighted by; for a rate, 1 per interval) and the intervals'
    ``width`` (s). A dict for results.json (docs/results.md, "Steady state").

    Besides the trend, a start still warming up makes the figure drift: MSER-5 finds the
    truncation point d; when the window's mean differs from the mean after d by more than
    `DRIFT_TOLERANCE` and more than the latter's own 95 % half-width, the verdict is
    "drifts" (reason "warm-up") even if the trend test, whose line fits a step poorly,
    does not see it."""
    out = _batch_means(values, weights, width, rate)
    fives = _five(values, weights)
    d = mser_truncation(fives) if len(fives) >= 2 else 0
    out["mser5_truncate_s"] = round(d * 5 * width, 9)
    out["warmup_bias_pct"] = None
    if out["verdict"] == "too short to tell" or d == 0:
        return out
    tail = _batch_means(values[5 * d:], weights[5 * d:], width, rate)
    if tail["verdict"] == "too short to tell" or not tail["mean"]:
        return out
    bias = (out["mean"] - tail["mean"]) / tail["mean"]
    out["warmup_bias_pct"] = round(100.0 * bias, 4)
    if out["verdict"] == "steady" and abs(bias) >= DRIFT_TOLERANCE and \
            abs(bias) > tail["mean_half_width_pct"] / 100.0:
        out["verdict"] = "drifts"
        out["reason"] = "warm-up"
    return out


def series_report(series: IntervalSeries, end: float, rate: bool = True,
                  scale: float = 1.0) -> dict:
    """`analyse` over the full intervals of ``series`` before ``end``: a rate (events per
    second) when ``rate``, else the mean value per event times ``scale`` (e.g. 1e-6 for
    nanoseconds to milliseconds), over the intervals that hold events."""
    counts, sums = series.full(end)
    w = series.width
    if rate:
        return analyse([c / w for c in counts], [1] * len(counts), w, True)
    pairs = [(s * scale / c, c) for c, s in zip(counts, sums) if c]
    if len(pairs) < len(counts):
        # intervals without events have no mean: the test runs over those that have
        if len(pairs) < MIN_BATCHES:
            return _too_short(f"{len(pairs)} intervals with events; at least "
                              f"{MIN_BATCHES} batches are needed", batches=len(pairs))
    return analyse([v for v, _ in pairs], [c for _, c in pairs], w, False)


def drift_line(name: str, report: dict, unit: str) -> str | None:
    """The terminal's one line for a figure that drifts (None when it does not)."""
    if report.get("verdict") != "drifts":
        return None
    window = report["window_s"]
    longer = max(2 * window, report["run_for_5pct_s"])
    if report.get("reason") == "warm-up":
        cut = report["mser5_truncate_s"]
        return (f"{name}: the measured window's first {cut:g} s are still warming up "
                f"(MSER-5): its mean {report['mean']:.4g} {unit} is "
                f"{report['warmup_bias_pct']:+.1f} % off the mean after them; warm up "
                f"at least {cut:g} s longer")
    return (f"{name} drifts by {report['drift_pct']:+.1f} % (+-"
            f"{report['drift_half_width_pct']:.1f} %) of its mean {report['mean']:.4g} "
            f"{unit} over the {window:g} s measured: not a steady-state figure; run longer "
            f"(about {longer:.0f} s measured) or warm up longer")
