"""A sweep's report: ``summary.csv``, ``report.md`` with tables (mean and 95 % interval
over seeds) and the plots people put in papers: the headline figure per scheduler as bars
with intervals, latency CDFs, throughput over time, and each device's utilisation."""

from __future__ import annotations

import os

from blksim.experiments.figures import save_figure
from blksim.experiments.sweep.definition import printable
from blksim.experiments.sweep.numbers import cell, comparison_lines, is_percentile, sig
from blksim.experiments.sweep.summary import (group_values, grouped, summary_csv,
                                              summary_rows)

COLUMNS = (("mb_per_s", "MB/s"), ("q2c_mean_ms", "Q2C mean (ms)"),
           ("q2c_p99_ms", "Q2C p99 (ms)"))


#: The files a report writes (each under a temporary name ``.NAME.PID.RANDOM.tmp`` first).
REPORT_FILES = ("summary.csv", "report.md", "figure.png", "latency_cdf.png", "throughput.png",
                "utilisation.png", "ramp.png", "robustness.json", "robustness.csv")


def _label(variant: str, values: tuple, tunables: list) -> str:
    parts = [] if variant == "base" else [variant]
    parts += [f"{p.split('/')[-1]}={v}" for p, v in zip(tunables, values)]
    return printable(", ".join(parts) or "base")


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
    plots = _plots(exp, tasks, records, rows, tunables, out_dir)
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
            notes.append(f"- {run}: the window's first {sig(report['mser5_truncate_s'])} s "
                         f"are still warming up (MSER-5); they move the figure by "
                         f"{_signed(report['warmup_bias_pct'])} %: warm up longer")
        else:
            notes.append(f"- {run}: drifts by {_signed(report['drift_pct'])} % "
                         f"(± {sig(report['drift_half_width_pct'], 2)} %) over the "
                         f"{sig(report['window_s'])} s measured: run longer")
    if not notes:
        return []
    return ["## Steady state", "",
            f"Runs whose {exp.figure_label or path} is not a steady-state figure over its "
            f"measured window (batch means and MSER-5, docs/results.md \"Steady state\"); "
            f"their cells above mix a transient with the steady state.", "", *notes, ""]


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + sig(x, 2)


def _write(path: str, text: str) -> None:
    """``text`` (UTF-8; a path's bytes that were not UTF-8 as U+FFFD) to ``path``, whole
    or not at all."""
    from blksim.traces.records import atomic_output
    with atomic_output(path) as stream:
        stream.write(printable(text).encode("utf-8"))


def _legend(ax, **kwargs) -> None:
    """The axes' legend, if anything was drawn with a label (a run that completed no I/O
    draws no CDF)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def _plots(exp, tasks, records, rows, tunables, out_dir) -> dict:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    out = {}
    schedulers = exp.schedulers
    if exp.figure:
        stats = grouped(rows, "figure", tunables)
        groups = []
        for v, t, s, mean, half, n in stats:
            label = _label(v, t, tunables)
            if label not in groups:
                groups.append(label)
        fig = Figure(figsize=(max(6, 1.2 * len(groups) * len(schedulers) / 2 + 3), 4.5))
        ax = fig.add_subplot()
        width = 0.8 / len(schedulers)
        for k, sched in enumerate(schedulers):
            xs, ys, es = [], [], []
            for v, t, s, mean, half, n in stats:
                if s == sched and n:
                    xs.append(groups.index(_label(v, t, tunables)) + k * width)
                    ys.append(mean)
                    es.append(half)
            ax.bar(xs, ys, width, yerr=es, capsize=3, label=sched)
        ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
        ax.set_xticklabels(groups, rotation=20 if len(groups) > 3 else 0)
        ax.set_ylabel(printable(exp.figure_label or exp.figure))
        ax.set_title(f"{exp.name}: mean and 95 % interval over seeds")
        _legend(ax)
        fig.tight_layout()
        out["figure_png"] = os.path.join(out_dir, "figure.png")
        save_figure(fig, out["figure_png"], dpi=110)

    first = {}                                  # (variant, scheduler) -> the first run
    for t in tasks:
        first.setdefault((t.variant, t.scheduler), t)
    variants = [v for v, _ in exp.variants]
    fig = Figure(figsize=(5 * min(3, len(variants)), 4 * -(-len(variants) // 3)))
    for i, v in enumerate(variants):
        ax = fig.add_subplot(-(-len(variants) // 3), min(3, len(variants)), i + 1)
        for s in schedulers:
            cdf = records[first[(v, s)].key]["q2c_cdf_ms"]
            if cdf:
                ax.plot([p[0] for p in cdf], [p[1] for p in cdf], marker=".", label=s)
        ax.set_xscale("log")
        ax.set_xlabel("Q2C latency (ms)")
        ax.set_ylabel("fraction of I/Os")
        ax.set_title(v if len(variants) > 1 else f"{exp.name} (seed {first[(v, s)].seed})")
        _legend(ax, fontsize=8)
    fig.tight_layout()
    out["cdf_png"] = os.path.join(out_dir, "latency_cdf.png")
    save_figure(fig, out["cdf_png"], dpi=110)

    fig = Figure(figsize=(8, 4))
    ax = fig.add_subplot()
    for s in schedulers:
        line = records[first[(variants[0], s)].key]["mb_per_s_by_second"]
        ax.plot([p[0] for p in line], [p[1] for p in line], label=s)
    ax.set_xlabel("simulated time (s), each point the second (or bin) it starts")
    ax.set_ylabel("throughput, all devices' bios (MB/s, 10^6 bytes)")
    ax.set_ylim(bottom=0)             # a throughput's scale starts at none
    ax.set_title(f"{exp.name}: {variants[0]}, first seed")
    _legend(ax, fontsize=8)
    fig.tight_layout()
    out["timeline_png"] = os.path.join(out_dir, "throughput.png")
    save_figure(fig, out["timeline_png"], dpi=110)

    ramp = _ramp_plot(exp, tasks, records, variants[0], out_dir)
    if ramp:
        out["ramp_png"] = ramp

    util = {s: records[first[(variants[0], s)].key]["figures"].get("iostat", {})
            for s in schedulers}
    # partitions carry no utilisation of their own (iostat's null fields)
    devices = sorted({d for st in util.values() for d, v in st.items()
                      if v.get("%util") is not None})
    if devices:
        fig = Figure(figsize=(max(6, len(devices) * 1.5), 4))
        ax = fig.add_subplot()
        width = 0.8 / len(schedulers)
        for k, s in enumerate(schedulers):
            ax.bar([i + k * width for i in range(len(devices))],
                   [util[s].get(d, {}).get("%util", 0.0) for d in devices], width, label=s)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(devices))])
        ax.set_xticklabels(devices)
        ax.set_ylabel("utilisation (%)")
        ax.set_ylim(0, 105)
        ax.set_title(f"{exp.name}: {variants[0]}, first seed")
        _legend(ax, fontsize=8)
        fig.tight_layout()
        out["util_png"] = os.path.join(out_dir, "utilisation.png")
        save_figure(fig, out["util_png"], dpi=110)
    return out


def _ramp_plot(exp, tasks, records, variant: str, out_dir: str) -> str | None:
    """A file server's ramp: MB/s and client errors per step against clients, a line per
    scheduler (the mean over seeds), for the first variant."""
    from matplotlib.figure import Figure
    per: dict = {}
    name = None
    for t in tasks:
        if t.variant != variant:
            continue
        for app_name, app in records[t.key]["figures"].get("apps", {}).items():
            if app.get("type") == "fileserver":
                name = app_name
                per.setdefault(t.scheduler, []).append(app["steps"])
    if not per:
        return None
    fig = Figure(figsize=(10, 4))
    ax_mb, ax_err = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for sched, runs in per.items():
        clients = [st["clients"] for st in runs[0]]
        mb = [sum(r[k]["mb_per_s"] for r in runs) / len(runs) for k in range(len(clients))]
        err = [sum(r[k]["errors_pct"] for r in runs) / len(runs) for k in range(len(clients))]
        ax_mb.plot(clients, mb, marker="o", label=sched)
        ax_err.plot(clients, err, marker="o", label=sched)
    ax_mb.set_xlabel("clients")
    ax_mb.set_ylabel("throughput (MB/s, 10^6 bytes)")
    ax_err.set_xlabel("clients")
    ax_err.set_ylabel("client errors (% of operations)")
    ax_mb.set_title(f"{name}: throughput per step")
    ax_err.set_title(f"{name}: client errors per step")
    _legend(ax_mb, fontsize=8)
    fig.tight_layout()
    path = os.path.join(out_dir, "ramp.png")
    save_figure(fig, path, dpi=110)
    return path
