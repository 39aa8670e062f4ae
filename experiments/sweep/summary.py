"""A sweep's summary: one CSV row per run, and means with 95 % intervals over seeds.

The CSV holds the run's point in the grid, its key, the headline figure, the device's
totals, each device's utilisation and every number among the applications' figures, all
of which are deterministic: the same sweep gives the same file byte for byte, whether it
ran one run at a time, on a pool or on a cluster (the runs' CPU times are not in it).
"""

from __future__ import annotations

import csv
import difflib
import io
import math

from blksim.experiments.sweep.definition import get_path, printable

# two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``df`` degrees of freedom (at
    least 1; the normal's 1.960 beyond 30)."""
    return _T95[max(df, 1) - 1] if df <= len(_T95) else 1.960


def mean_interval(values: list) -> tuple:
    """(mean, half-width of its 95 % confidence interval by Student's t; 0 for one
    value)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, t95(n - 1) * math.sqrt(var / n)


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        out[prefix] = value
    elif isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            label = v.get("name", v.get("clients", i)) if isinstance(v, dict) else i
            _flatten(f"{prefix}.{label}", v, out)


def figure_paths(value, prefix: str = "") -> list:
    """Every dotted path to a number in ``value`` (results.json's figures), as `get_path`
    reads them (a table's keys, an array's indices); a figure that is null (from an empty
    window, docs/results.md) is a path to a number too."""
    if isinstance(value, bool):
        return []
    if value is None or isinstance(value, (int, float)):
        return [prefix]
    items = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    out = []
    for k, v in items:
        out += figure_paths(v, f"{prefix}.{k}" if prefix else str(k))
    return out


#: What `get_path` gives for a path that names nothing (None is a null figure).
ABSENT = object()


def is_figure(value) -> bool:
    """A number, or null: a figure a run could not give (nothing completed in its
    window, docs/results.md)."""
    return value is None or isinstance(value, (int, float)) and not isinstance(value, bool)


def check_figure(figures: dict, path: str, where: str, point: str) -> None:
    """Raise `ConfigError` (one line) unless ``path`` names a number in ``figures`` (a
    run's results.json figures): naming ``where`` (the setting that gave the path), the
    run (``point``) and the nearest paths that do name a number. A figure that is null
    in this run (nothing completed in its window) is a number the run could not give:
    the path is right, and the summary leaves its cell empty."""
    from blksim.common.config_values import ConfigError
    value = get_path(figures, path, absent=ABSENT)
    if is_figure(value):
        return
    valid = figure_paths(figures)
    if isinstance(value, (dict, list)):
        inside = [p for p in valid if p.startswith(f"{path}.")]
        raise ConfigError(f"{where} {path!r}: a table, not a number; a figure is a number "
                          f"below it, e.g. {', '.join(inside[:6])}")
    near = difflib.get_close_matches(path, valid, n=5, cutoff=0.6) or \
        [p for p in valid if p.split(".")[0] == path.split(".")[0]][:5] or \
        sorted({p.split(".")[0] for p in valid})
    raise ConfigError(f"{where} {path!r}: names no number in the results of run {point}; "
                      f"nearest: {', '.join(near)}")


def row_of(task, record: dict, figure: str, columns=()) -> dict:
    """The summary's row of one run (``columns``: more (path, label) figures, as
    ``column.LABEL``)."""
    f = record["figures"]
    row = {**task.point(), "key": task.key}
    row["figure"] = get_path(f, figure) if figure else None
    for path, label in columns:
        row[f"column.{label}"] = get_path(f, path)
    total = f["totals"]["all"]
    row["iops"] = total["iops"]
    row["mb_per_s"] = total["mb_per_s"]
    # no latency from a window in which no I/O completed (results.json writes 0 there)
    empty = not total.get("ios")
    row["q2c_mean_ms"] = None if empty else total["q2c"]["mean_ms"]
    row["q2c_p99_ms"] = None if empty else total["q2c"]["p99_ms"]
    for dev, st in sorted(f.get("iostat", {}).items()):
        row[f"{dev}.util_pct"] = st.get("%util")
    apps: dict = {}
    _flatten("apps", f.get("apps", {}), apps)
    row.update(apps)
    return row


def summary_rows(tasks: list, records: dict, figure: str, columns=()) -> list:
    """A row per task, in the tasks' order."""
    return [row_of(t, records[t.key], figure, columns) for t in tasks]


def summary_csv(rows: list) -> str:
    """The rows as CSV text (columns in the order first seen; floats as Python writes
    them, so the text is the same wherever the runs ran)."""
    columns: list = []
    seen = set()
    for row in rows:
        for c in row:
            if c not in seen:
                seen.add(c)
                columns.append(c)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow(["" if row.get(c) is None else repr(row[c]) if isinstance(row[c], float)
                    else row[c] for c in columns])
    return buf.getvalue()


def group_values(rows: list, column: str, tunables: list) -> dict:
    """Per (variant, tunable values, scheduler), in the rows' order: the values of
    ``column`` over the seeds (a run without the figure adds none)."""
    groups: dict = {}
    for row in rows:
        k = (row["variant"], tuple(row.get(p) for p in tunables), row["scheduler"])
        value = row.get(column)
        if isinstance(value, (int, float)):
            groups.setdefault(k, []).append(float(value))
        else:
            groups.setdefault(k, [])
    return groups


def grouped(rows: list, column: str, tunables: list) -> list:
    """Per (variant, tunables, scheduler), in the rows' order: (variant, tunable values,
    scheduler, mean, half-width, n) of ``column`` over the seeds."""
    groups = group_values(rows, column, tunables)
    return [(v, t, s, *mean_interval(vals), len(vals)) for (v, t, s), vals in groups.items()]


def point_label(variant: str, values: tuple, tunables: list) -> str:
    """A point of the grid as the report names it: its variant and tunables' values."""
    parts = [] if variant == "base" else [variant]
    parts += [f"{p.split('/')[-1]}={v}" for p, v in zip(tunables, values)]
    return printable(", ".join(parts) or "base")
