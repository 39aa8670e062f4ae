"""A sweep's plots, the figures people put on slides and in papers: the headline figure
per scheduler as bars with their 95 % intervals, latency CDFs (block-level Q2C, and each
application's own latency: its transactions or operations), throughput over time (the
warm-up shaded, to the last full interval), each device's utilisation and a file
server's ramp. Axes carry the experiment's labels and units; legends sit outside the
axes, where they cover no data."""

from __future__ import annotations

import math
import os

from blksim.experiments.figures import (legend_outside, plain_log_ticks, save_figure,
                                       shade_warmup, warmup_spans)
from blksim.experiments.sweep.definition import printable
from blksim.experiments.sweep.numbers import is_percentile, resolution
from blksim.experiments.sweep.summary import grouped
from blksim.experiments.sweep.summary import point_label as _label


def plots(exp, tasks, records, rows, tunables, out_dir) -> dict:
    """Draw the report's figures into ``out_dir``; their paths by report key."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    out = {}
    schedulers = exp.schedulers
    if exp.figure:
        stats = grouped(rows, "figure", tunables)
        binned = is_percentile(exp.figure)
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
                    # a percentile's seeds within one bucket: its bar, as its cell,
                    # carries the histogram's resolution, not a certainty
                    es.append(max(half, resolution(mean)) if binned and n > 1 else half)
            ax.bar(xs, ys, width, yerr=es, capsize=3, label=sched)
        ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
        ax.set_xticklabels(groups, rotation=20 if len(groups) > 3 else 0)
        ax.set_ylabel(printable(exp.figure_label or exp.figure))
        seeds = max((n for *_, n in stats), default=0)
        ax.set_title(f"{exp.name}: mean over {seeds} seeds, 95 % interval" if seeds > 1
                     else f"{exp.name}: one seed (no interval)")
        from matplotlib.ticker import StrMethodFormatter
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,g}"))    # 5,000, as the report
        legend_outside(ax)
        fig.tight_layout()
        out["figure_png"] = os.path.join(out_dir, "figure.png")
        save_figure(fig, out["figure_png"], dpi=110)

    first = {}                                  # (variant, scheduler) -> the first run
    for t in tasks:
        first.setdefault((t.variant, t.scheduler), t)
    variants = [v for v, _ in exp.variants]
    out["cdf_png"] = _cdf_plot(exp, records, first, variants, out_dir)

    fig = Figure(figsize=(9, 4))
    ax = fig.add_subplot()
    spans, ends = [], []
    for s in schedulers:
        record = records[first[(variants[0], s)].key]
        xs, ys = throughput_steps(record)
        ax.step(xs, ys, where="post", ls=_style(schedulers, s), label=s)
        spans = spans or warmup_spans(record["figures"])
        if xs:
            ends.append((xs[-1], xs[1] - xs[0], record["figures"].get("simulated_s")))
    shade_warmup(ax, spans)
    ax.set_xlabel("simulated time (s)" + _intervals_text(ends))
    ax.set_ylabel("throughput, all devices' bios\n(MB/s, 10^6 bytes, per interval)")
    ax.set_ylim(bottom=0)             # a throughput's scale starts at none
    ax.set_xlim(left=0)
    ax.set_title(f"{exp.name}: {variants[0]}, first seed")
    legend_outside(ax)
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
        ax.set_xlabel("device (as iostat -x names it)")
        ax.set_ylabel("utilisation over the measured window (%)")
        ax.set_ylim(0, 105)
        ax.set_title(f"{exp.name}: {variants[0]}, first seed")
        legend_outside(ax)
        fig.tight_layout()
        out["util_png"] = os.path.join(out_dir, "utilisation.png")
        save_figure(fig, out["util_png"], dpi=110)
    return out


#: A line style per scheduler (by its place in the experiment's list), so that two
#: schedulers whose lines coincide (noop and deadline on a single-queue drive) both show.
STYLES = ("-", "--", "-.", ":")


def _style(schedulers: list, s: str) -> str:
    return STYLES[list(schedulers).index(s) % len(STYLES)]


def _cdf_plot(exp, records: dict, first: dict, variants: list, out_dir: str) -> str:
    """latency_cdf.png: per variant (a row), the block layer's Q2C CDF of every I/O and,
    beside it, each application's own latency CDF (its transactions or operations,
    `runner.run_task`'s ``app_cdf_ms``), a line per scheduler (the first seed's run)."""
    from matplotlib.figure import Figure
    apps: list = []                        # (name, what it counts), as the runs give them
    for v in variants:
        for s in exp.schedulers:
            for name, a in (records[first[(v, s)].key].get("app_cdf_ms") or {}).items():
                if a.get("cdf") and (name, a["what"]) not in apps:
                    apps.append((name, a["what"]))
    cols = 1 + len(apps)
    fig = Figure(figsize=(5.2 * cols + 1.2, 4 * len(variants)))
    for i, v in enumerate(variants):
        seed = first[(v, exp.schedulers[0])].seed
        where = v if len(variants) > 1 else f"{exp.name}, seed {seed}"
        ax = fig.add_subplot(len(variants), cols, i * cols + 1)
        for s in exp.schedulers:
            cdf = records[first[(v, s)].key]["q2c_cdf_ms"]
            if cdf:
                ax.plot([p[0] for p in cdf], [p[1] for p in cdf], marker=".", ms=3,
                        ls=_style(exp.schedulers, s), label=s)
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_xlabel("Q2C latency of each block I/O (ms)")
        ax.set_ylabel("fraction of block I/Os")
        ax.set_title(f"block layer: {where}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        for k, (name, what) in enumerate(apps):
            ax = fig.add_subplot(len(variants), cols, i * cols + 2 + k)
            for s in exp.schedulers:
                a = (records[first[(v, s)].key].get("app_cdf_ms") or {}).get(name) or {}
                cdf = a.get("cdf")
                if cdf:
                    ax.plot([p[0] for p in cdf], [p[1] for p in cdf], marker=".", ms=3,
                            ls=_style(exp.schedulers, s), label=s)
            ax.set_xscale("log")
            plain_log_ticks(ax.xaxis)
            ax.set_xlabel(f"{printable(name)}: latency of each of its {what} (ms)")
            ax.set_ylabel(f"fraction of {what}")
            ax.set_title(f"{printable(name)}'s {what}: {where}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        legend_outside(ax)
    fig.tight_layout()
    path = os.path.join(out_dir, "latency_cdf.png")
    save_figure(fig, path, dpi=110)
    return path


def _intervals_text(ends: list) -> str:
    """What the throughput's x axis says of its intervals: their width, and the part of
    the run after the last full one, left out (``ends``: (end of the last full
    interval, width, the run's end) per line)."""
    if not ends:
        return ""
    last, width, run_end = ends[0]
    text = f"; rate per {width:g} s interval"
    if run_end and run_end - last > 1e-9:
        text += f", to the last full one (the run's last {run_end - last:.3g} s left out)"
    return text


def throughput_steps(record: dict) -> tuple:
    """A run record's throughput timeline as a step line: each full interval's rate held
    from its start to its end (a record of an older blksim whose last point was a part
    of an interval cut by the run's end loses that point)."""
    line = record["mb_per_s_by_second"]
    if not line:
        return [], []
    width = line[1][0] - line[0][0] if len(line) > 1 else 1
    end = record["figures"].get("simulated_s") or math.inf
    line = [p for p in line if p[0] + width <= end + 1e-9]
    if not line:
        return [], []
    return [p[0] for p in line] + [line[-1][0] + width], [p[1] for p in line] + [line[-1][1]]


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
        style = _style(exp.schedulers, sched)
        ax_mb.plot(clients, mb, marker="o", ls=style, label=sched)
        ax_err.plot(clients, err, marker="o", ls=style, label=sched)
    ax_mb.set_xlabel("clients")
    ax_mb.set_ylabel("throughput (MB/s, 10^6 bytes)")
    ax_err.set_xlabel("clients")
    ax_err.set_ylabel("client errors (% of operations)")
    ax_mb.set_ylim(bottom=0)          # a throughput's and a share's scale start at none
    ax_err.set_ylim(bottom=0, top=max(1.0, ax_err.get_ylim()[1]))
    seeds = max(len(r) for r in per.values())
    ax_mb.set_title(f"{name}: throughput per step (mean over {seeds} seed"
                    f"{'s' if seeds > 1 else ''})", fontsize=10)
    ax_err.set_title(f"{name}: client errors per step", fontsize=10)
    legend_outside(ax_err)
    fig.tight_layout()
    path = os.path.join(out_dir, "ramp.png")
    save_figure(fig, path, dpi=110)
    return path
