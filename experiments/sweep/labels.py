"""Readable names, with units, for the figures a sweep can report: the label an axis or a
column gets when the experiment file gives none (``figure_label``, ``--figure``).

A figure is a dotted path into results.json (docs/results.md). The known ones are named
from the path's parts: ``apps.mysql.tps`` is "mysql transactions per second (tps)",
``totals.read.q2c.p99_ms`` is "Q2C latency of reads, p99 (ms)". Any other path keeps
its text, with the unit its last part's suffix gives (``_ms``, ``_s``, ``_pct``,
``mb_per_s``) where it has one.
"""

from __future__ import annotations

#: A direction of results.json's ``totals``, as a name reads it.
_DIRECTIONS = {"read": "reads", "write": "writes", "all": "all I/O"}
#: The block-layer latencies (btt's names).
_LATENCIES = {"q2c": "Q2C latency", "q2d": "Q2D (scheduler) time", "d2c": "D2C (device) time"}
#: A statistic of a latency histogram.
_STATS = {"mean": "mean", "min": "min", "max": "max", "p50": "p50 (median)", "p95": "p95",
          "p99": "p99"}
#: An application's rates and latencies, by the last part of their path.
_APP = {"tps": "transactions per second (tps)", "tpm": "transactions per minute (tpm)",
        "ops_per_s": "operations per second", "mb_per_s": "throughput (MB/s, 10^6 bytes)",
        "user_calls_per_s": "user calls per second",
        "physical_reads_per_s": "physical reads per second",
        "physical_writes_per_s": "physical writes per second",
        "errors_pct": "client errors (% of operations)"}


def figure_name(path: str) -> str:
    """A readable name, with its unit, for the results.json figure ``path``."""
    parts = path.split(".")
    if len(parts) >= 3 and parts[0] == "totals" and parts[1] in _DIRECTIONS:
        what = _DIRECTIONS[parts[1]]
        if parts[2] == "iops" and len(parts) == 3:
            return f"IOPS, {what} (I/Os per second)"
        if parts[2] == "mb_per_s" and len(parts) == 3:
            return f"throughput, {what} (MB/s, 10^6 bytes)"
        if parts[2] in _LATENCIES and len(parts) == 4 and parts[3].endswith("_ms"):
            stat = parts[3][:-3]
            return f"{_LATENCIES[parts[2]]} of {what}, {_STATS.get(stat, stat)} (ms)"
    if len(parts) >= 3 and parts[0] == "apps":
        app, rest = parts[1], parts[2:]
        if rest[0] == "by_transaction" and len(rest) >= 3:
            app, rest = f"{app} {rest[1]}", rest[2:]
        if len(rest) == 1 and rest[0] in _APP:
            return f"{app} {_APP[rest[0]]}"
        if len(rest) == 2 and rest[0] == "response_ms":
            return f"{app} response time, {_STATS.get(rest[1], rest[1])} (ms)"
    if len(parts) == 3 and parts[0] == "iostat" and parts[2] == "%util":
        return f"{parts[1]} utilisation (%)"
    return _with_unit(path)


def _with_unit(path: str) -> str:
    last = path.split(".")[-1]
    for suffix, unit in (("mb_per_s", "MB/s"), ("_per_s", "per second"), ("_ms", "ms"),
                         ("_pct", "%"), ("_s", "s")):
        if last.endswith(suffix):
            return f"{path} ({unit})"
    return path
