"""Numbers as a report's reader expects them, and what the seeds say about a difference.

A report's cell is the mean over the seeds with the half-width of its 95 % interval:
the mean to three significant digits, the half-width to two, thousands separated by
commas as the terminal tables do (``6,021``), no exponent under a million. A percentile
(p50, p99, ...) comes from a streaming histogram (`blksim.common.histogram`): each run's
is its bucket's middle, 0.78 % wide and then rounded to three digits, so seeds whose
percentiles fall in one bucket agree exactly and their interval would read "± 0", a
certainty the histogram does not have. Such a cell gives the histogram's resolution
instead, marked "binned" (`resolution`).

A comparison (`comparison_lines`) sets each scheduler's mean against the first
scheduler's: the difference in percent with the half-width of its 95 % interval
(Welch's t over the two schedulers' seeds), and whether the difference is larger than
that, with what to run when it is not.
"""

from __future__ import annotations

import math

from blksim.common.histogram import PERCENTILE_DIGITS

#: A histogram bucket's width as a share of its value (`blksim.common.histogram`).
_BUCKET = 2.0 ** -7
#: The most seeds a run takes (``--seeds``).
MAX_SEEDS = 1000


def sig(x, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits as people write it: thousands separated
    by commas, decimals only as far as the digits reach, an exponent only from a million
    on ("1.23e+06"); "-" for no figure (None, NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e6:
        return f"{x:.{digits}g}"
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    x = round(x, decimals)
    if x and abs(x) >= 10 ** (digits - decimals):      # rounding carried a digit (9.99 -> 10.0)
        decimals -= 1
    return f"{x:,.{max(0, decimals)}f}"


def is_percentile(column: str) -> bool:
    """Whether a figure's path or summary column names a percentile of a histogram
    (``q2c_p99_ms``, ``apps.mysql.response_ms.p95``, ``totals.all.q2c.p50_ms``)."""
    last = column.split(".")[-1]
    for part in (last, *last.split("_")):
        if len(part) > 1 and part[0] == "p" and part[1:].replace(".", "", 1).isdigit():
            return True
    return False


def resolution(value: float) -> float:
    """How finely a percentile figure of ``value`` is known: half its histogram bucket
    (0.39 % of it) or half a unit in its last reported digit, whichever is wider."""
    if not value or not math.isfinite(value):
        return 0.0
    digit = 10.0 ** (math.floor(math.log10(abs(value))) - (PERCENTILE_DIGITS - 1))
    return max(abs(value) * _BUCKET / 2, digit / 2)


def cell(mean: float, half: float, n: int, binned: bool = False) -> str:
    """A table cell: the mean over ``n`` seeds and the half-width of its 95 % interval.
    A ``binned`` figure (a percentile) whose seeds agree within the histogram's
    resolution gives that resolution, "binned"; any other figure the same in every seed
    says so; "-" with no seed."""
    if n == 0 or mean is None or math.isnan(mean):
        return "-"
    if n == 1:
        return sig(mean)
    if binned and half < resolution(mean):
        return f"{sig(mean)} ± {sig(resolution(mean), 2)} (binned)"
    if half == 0:
        return f"{sig(mean)} (same in every seed)"
    return f"{sig(mean)} ± {sig(half, 2)}"


def welch_half_width(a: list, b: list) -> float:
    """Half-width of the 95 % interval of mean(a) - mean(b) (Welch's t); NaN with fewer
    than two values on either side."""
    from blksim.experiments.sweep.summary import t95
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return math.nan
    ma, mb = sum(a) / na, sum(b) / nb
    va = sum((v - ma) ** 2 for v in a) / (na - 1) / na
    vb = sum((v - mb) ** 2 for v in b) / (nb - 1) / nb
    se2 = va + vb
    if se2 == 0:
        return 0.0
    df = se2 ** 2 / ((va ** 2 / (na - 1) if va else 0.0) + (vb ** 2 / (nb - 1) if vb else 0.0))
    return t95(int(df)) * math.sqrt(se2)


def comparison(name: str, base: str, values: list, base_values: list,
               binned: bool = False, scale: float = 1.0) -> str:
    """One line: ``name``'s mean against ``base``'s, in percent of ``base``'s, with the
    interval of the difference and whether the difference is larger than it; with
    advice (more seeds, a longer run: the full length if the runs were ``scale`` < 1 of
    it) when it is not."""
    n, nb = len(values), len(base_values)
    if not n or not nb:
        return f"{name} vs {base}: no figure to compare"
    m, mb = sum(values) / n, sum(base_values) / nb
    if mb == 0:
        return f"{name} vs {base}: {base}'s mean is 0, no ratio to give"
    diff = 100.0 * (m - mb) / abs(mb)
    head = f"{name} vs {base}: {_pct(diff)}"
    if n < 2 or nb < 2:
        return f"{head} (one seed: no interval): run with --seeds 3 or more to tell a " \
               f"difference from the seeds' spread"
    half = 100.0 * welch_half_width(values, base_values) / abs(mb)
    # a percentile's seeds agreeing within a bucket: the difference is known no finer
    # than the two means' resolutions
    floor = 200.0 * resolution(mb) / abs(mb) if binned else 0.0
    spread = f"interval ±{sig(max(half, floor), 2)} %" + (", binned" if floor > half else "")
    half = max(half, floor)
    if abs(diff) > half:
        return f"{head} ({spread}): larger than its interval"
    if diff == 0:
        return f"{head} ({spread}): " + ("the same in every seed" if half == 0 else
                                         "the same means, within the seeds' spread")
    # the interval narrows as 1/sqrt(seeds): the seeds that would make it this difference's
    want = math.ceil(1.2 * max(n, nb) * (half / abs(diff)) ** 2) if diff else math.inf
    longer = f"a longer run (this ran at --scale {scale:g}; --scale 1 is the full length)" \
        if scale < 1 else "a longer run (--scale above 1)"
    advice = (f"about {want} seeds (--seeds {want}) or {longer} would tell a difference "
              f"this size" if want <= MAX_SEEDS else
              f"more seeds than practical would be needed: {longer} narrows each seed's "
              f"spread; if it stays within, take them as equal")
    return f"{head} ({spread}): within its interval; {advice}"


def _pct(x: float) -> str:
    """A signed percentage: two significant digits (three from 100 %)."""
    sign = "+" if x > 0 else "-" if x < 0 else ""
    return f"{sign}{sig(abs(x), 2 if abs(x) < 100 else 3)} %"


def comparison_lines(groups: list, schedulers: list, values: dict, label,
                     binned: bool = False, scale: float = 1.0) -> list:
    """A line per (group, scheduler but the first): ``values`` maps (group, scheduler)
    to the figure's values over the seeds; ``label(group)`` names a group (a variant and
    tunables), left out when there is only one."""
    out = []
    base = schedulers[0]
    for g in groups:
        for s in schedulers[1:]:
            line = comparison(s, base, values.get((g, s), []), values.get((g, base), []),
                              binned, scale)
            out.append(f"- {label(g)}: {line}" if len(groups) > 1 else f"- {line}")
    return out
