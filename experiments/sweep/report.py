"""A sweep's report: ``summary.csv``, ``report.md`` with tables (mean and 95 % interval
over seeds) and the plots people put in papers: the headline figure per scheduler as bars
with intervals, latency CDFs, throughput over time, and each device's utilisation."""

from __future__ import annotations

import os

from blksim.experiments.sweep.definition import printable
from blksim.experiments.sweep.numbers import cell, comparison_lines, is_percentile, sig
from blksim.experiments.sweep.summary import (group_values, grouped, summary_csv,
                                              summary_rows)
from blksim.experiments.sweep.summary import point_label as _label

COLUMNS = (("mb_per_s", "MB/s"), ("q2c_mean_ms", "Q2C mean (ms)"),
           ("q2c_p99_ms", "Q2C p99 (ms)"))


#: The files a report writes (each under a temporary name ``.NAME.PID.RANDOM.tmp`` first).
REPORT_FILES = ("summary.csv", "report.md", "figure.png", "latency_cdf.png", "throughput.png",
                "utilisation.png", "ramp.png", "robustness.json", "robustness.csv")


def write_report(exp, tasks: list, records: dict, out_dir: str, scale: float,
                 seeds: int, robustness: dict | None = None) -> dict:
    """Write summary.csv, report.md and the plots into ``out_dir``; their paths.
    ``robustness``: a robustness run's report (`robustness.report`), a section of
    report.md."""
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):           # what a report killed outright left
        if name.endswith(".tmp") and name.split(".")[1:3] and \
                ".".join(name.split(".")[1:3]) in REPORT_FILES:
            os.remove(os.path.join(out_dir, name))
    rows = summary_rows(tasks, records, exp.figure, exp.columns)
    tunables = [p for p, _ in exp.grid]
    paths = {"summary": os.path.join(out_dir, "summary.csv"),
             "report": os.path.join(out_dir, "report.md")}
    _write(paths["summary"], summary_csv(rows))
    from blksim.experiments.sweep.plots import plots as draw_plots
    plots = draw_plots(exp, tasks, records, rows, tunables, out_dir)
    paths.update(plots)
    lines = [f"# {exp.name}", ""]
    if exp.description:
        lines += [exp.description.strip(), ""]
    lines += [f"{len(tasks)} runs: schedulers {', '.join(exp.schedulers)}; "
              f"{len(exp.variants)} variant(s); "
              + (f"tunables {', '.join(tunables)}; " if tunables else "")
              + f"{seeds} seed(s) each; scale {scale:g}. Means with their 95 % confidence "
                f"interval over the seeds (Student's t); every run is a row of summary.csv.",
              ""]
    headline = [("figure", exp.figure_label or exp.figure)] if exp.figure else []
    cols = headline + [(f"column.{label}", label) for _, label in exp.columns] + list(COLUMNS)
    stats = {c: grouped(rows, c, tunables) for c, _ in cols}
    lines.append("| variant | scheduler | " + " | ".join(label for _, label in cols) + " |")
    lines.append("|---|---|" + "---|" * len(cols))
    binned = {c: is_percentile(path) for c, path in
              [("figure", exp.figure)] + [(f"column.{label}", path) for path, label in
                                           exp.columns] + [(c, c) for c, _ in COLUMNS]}
    rows_text = []
    for i, (variant, values, scheduler, *_rest) in enumerate(stats[cols[0][0]]):
        cells = []
        for c, _ in cols:
            _, _, _, mean, half, n = stats[c][i]
            cells.append(cell(mean, half, n, binned[c]))
        rows_text.append(f"| {_label(variant, values, tunables)} | {scheduler} | "
                         + " | ".join(cells) + " |")
    lines += rows_text
    if any("(binned)" in row for row in rows_text):
        lines += ["", "A percentile is read from a histogram whose buckets are 0.78 % wide "
                      "and reported to three digits: where the seeds agree within that, its "
                      "cell gives the bucket's resolution, marked \"binned\"."]
    lines.append("")
    comparisons = comparison_section(exp, rows, tunables, scale)
    lines += comparisons
    from blksim.sim.explain_report import report_section      # docs/explain.md
    lines += report_section(tasks, records, getattr(exp, "devices", None))
    lines.append("")
    lines += steady_state_notes(exp, tasks, records, tunables)
    for key, title in (("figure_png", "The headline figure per scheduler"),
                       ("cdf_png", "Latency (Q2C) CDFs"),
                       ("timeline_png", "Throughput over time"),
                       ("ramp_png", "The file server's ramp"),
                       ("util_png", "Device utilisation")):
        if key in plots:
            lines += [f"## {title}", "", f"![{title}]({os.path.basename(plots[key])})", ""]
    if robustness is not None:
        from blksim.experiments.sweep.robustness import markdown_lines
        lines += markdown_lines(robustness)
    _write(paths["report"], "\n".join(lines))
    paths["comparisons"] = [line for line in comparisons if line.startswith("- ")]
    return paths


def comparison_section(exp, rows: list, tunables: list, scale: float = 1.0) -> list:
    """The report's "Differences" section: for the headline figure (the experiment's
    ``figure``, else MB/s), each scheduler against the first, per variant and tunables,
    and whether the difference is larger than its 95 % interval (`numbers.comparison`);
    none with one scheduler."""
    if len(exp.schedulers) < 2:
        return []
    column, label = ("figure", exp.figure_label or exp.figure) if exp.figure else \
        ("mb_per_s", "MB/s")
    values = group_values(rows, column, tunables)
    groups = []
    for v, t, _ in values:
        if (v, t) not in groups:
            groups.append((v, t))
    per = {((v, t), s): vals for (v, t, s), vals in values.items()}
    lines = comparison_lines(groups, list(exp.schedulers), per,
                             lambda g: _label(g[0], g[1], tunables),
                             binned=is_percentile(exp.figure or column), scale=scale)
    return ["## Differences", "",
            f"{label}: each scheduler's mean against {exp.schedulers[0]}'s, in percent of "
            f"{exp.schedulers[0]}'s, with the 95 % interval of the difference over the "
            f"seeds (Welch's t). A difference within its interval is not one the seeds can "
            f"tell from their spread.", "", *lines]


def steady_state_notes(exp, tasks: list, records: dict, tunables: list) -> list:
    """The report's "Steady state" section: a line per run whose headline figure (the
    experiment's ``figure``, else the run's throughput) drifts over its measured window or
    is too short to tell (results.json ``steady_state``, docs/results.md); none when every
    run's figure is steady."""
    path = exp.figure or "totals.all.iops"
    notes = []
    for t in tasks:
        report = (records[t.key]["figures"].get("steady_state") or {}).get(path)
        if not report or report.get("verdict") not in ("drifts", "too short to tell"):
            continue
        run = f"{_label(t.variant, tuple(v for _, v in t.tunables), tunables)}, " \
              f"{t.scheduler}, seed {t.seed}"
        if report["verdict"] == "too short to tell":
            notes.append(f"- {run}: too short to tell ({report['reason']})")
        elif report.get("reason") == "warm-up":
            notes.append(f"- {run}: the window's first {report['mser5_truncate_s']:g} s "
                         f"are still warming up (MSER-5); they move the figure by "
                         f"{_signed(report['warmup_bias_pct'])} %: warm up longer")
        else:
            notes.append(f"- {run}: drifts by {_signed(report['drift_pct'])} % "
                         f"(± {sig(report['drift_half_width_pct'], 2)} %) over the "
                         f"{report['window_s']:g} s measured: run longer")
    if not notes:
        return []
    return ["## Steady state", "",
            f"Runs whose {exp.figure_label or path} is not a steady-state figure over its "
            f"measured window (batch means and MSER-5, docs/results.md \"Steady state\"); "
            f"their cells above mix a transient with the steady state.", "", *notes, ""]


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + sig(x)


def _write(path: str, text: str) -> None:
    """``text`` (UTF-8; a path's bytes that were not UTF-8 as U+FFFD) to ``path``, whole
    or not at all."""
    from blksim.traces.records import atomic_output
    with atomic_output(path) as stream:
        stream.write(printable(text).encode("utf-8"))
