"""Figures of finished runs, from their output folders (``blksim run --out DIR``): latency
CDFs of several runs on one figure, and latency and throughput over time, per run or per
process (``blksim plot cdf|latency|timeline DIR...``); a flash disk's garbage collection
shaded on the throughput timeline, and its free blocks over time and utilisation per die
(``blksim plot flash DIR``).

A folder's results.json gives the run's name, scheduler and devices; its requests.csv
(``--per-request``) gives every measured bio, from which the CDF is exact and the time
series are binned. Without requests.csv, a CDF is drawn from results.json's percentiles
(five points) and the time series cannot be drawn.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field


from blksim.experiments.figures import plain_log_ticks


class PlotError(ValueError):
    """Runs that cannot be drawn (a folder without results, runs of different devices)."""


@dataclass
class Run:
    """One run's output folder, read."""

    path: str
    label: str
    results: dict
    q: list = field(default_factory=list)           # per bio: queue time (s)
    c: list = field(default_factory=list)           # completion time (s)
    sectors: list = field(default_factory=list)
    process: list = field(default_factory=list)     # process name (or pid)
    requests_file: bool = False                     # the folder had requests.csv

    @property
    def has_requests(self) -> bool:
        """Whether the folder had requests.csv (with no rows when nothing completed)."""
        return self.requests_file


def load_run(path: str, label: str | None = None) -> Run:
    """The run in output folder ``path`` (results.json, and requests.csv if written)."""
    res = os.path.join(path, "results.json")
    try:
        with open(res, encoding="utf-8") as f:
            results = json.load(f)
    except FileNotFoundError:
        raise PlotError(f"{path}: no results.json (a folder written by blksim run --out)") \
            from None
    except json.JSONDecodeError as exc:
        raise PlotError(f"{res}: not valid JSON: {exc}") from None
    folder = os.path.basename(os.path.normpath(path))
    from blksim.sim.results import scheduler_text
    scheduler = scheduler_text(results)     # each disk's, where they differ
    default = folder if folder == scheduler else f"{folder}: {scheduler}" \
        if "(" in scheduler else f"{folder} ({scheduler})"
    run = Run(path, label or default, results)
    req = os.path.join(path, "requests.csv")
    if os.path.isfile(req):
        run.requests_file = True
        with open(req, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            need = {"q_s", "c_s", "sectors", "pid"}
            if not need <= set(reader.fieldnames or ()):
                raise PlotError(f"{req}: expected the columns {', '.join(sorted(need))}")
            named = "process" in reader.fieldnames
            for row in reader:
                run.q.append(float(row["q_s"]))
                run.c.append(float(row["c_s"]))
                run.sectors.append(int(row["sectors"]))
                run.process.append(row["process"] if named else row["pid"])
    return run


def _devices(run: Run) -> tuple:
    return tuple(sorted((name, d.get("device", {}).get("name", d.get("kind", "")))
                        for name, d in run.results.get("devices", {}).items())) or \
        (("sda", run.results.get("device", {}).get("name", "")),)


def check_comparable(runs: list) -> None:
    """Runs drawn together must be of the same devices (names and models)."""
    first = _devices(runs[0])
    for run in runs[1:]:
        if _devices(run) != first:
            raise PlotError(
                f"{run.path}: its devices ({', '.join(f'{n} {m}' for n, m in _devices(run))}) "
                f"differ from {runs[0].path}'s ({', '.join(f'{n} {m}' for n, m in first)}); "
                f"draw runs of the same devices together")


def _figure(path: str, title: str):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    ax.set_title(title)
    return fig, ax


def _finish(fig, ax, out: str) -> None:
    """A grid, the legend (outside the axes, where it covers no line), and the figure
    written to ``out``."""
    from blksim.experiments.figures import legend_outside
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    from blksim.experiments.figures import save_figure
    save_figure(fig, out, dpi=110)


def _series(runs: list, per_process: bool):
    """(label, run, indices of its bios) for each line to draw."""
    for run in runs:
        if not per_process:
            yield run.label, run, range(len(run.q))
            continue
        by: dict = {}
        for i, p in enumerate(run.process):
            by.setdefault(p, []).append(i)
        for p, idx in sorted(by.items()):
            yield (f"{run.label}: {p}" if len(runs) > 1 else str(p)), run, idx


def plot_cdf(runs: list, out: str, per_process: bool = False, title: str = "") -> None:
    """Q2C latency CDFs (log axis) of the runs (or of each process), on one figure."""
    check_comparable(runs)
    _need_completions(runs)
    fig, ax = _figure(out, title or "Q2C latency")
    for label, run, idx in _series(runs, per_process):
        if run.has_requests:
            lat = sorted((run.c[i] - run.q[i]) * 1e3 for i in idx)
            n = len(lat)
            if not n:
                continue
            ax.step(lat, [(k + 1) / n for k in range(n)], where="post", label=label)
        else:
            if per_process:
                raise PlotError(f"{run.path}: --per-process needs requests.csv (run with "
                                f"--per-request)")
            q = run.results["totals"]["all"]["q2c"]
            xs = [q["min_ms"], q["p50_ms"], q["p95_ms"], q["p99_ms"], q["max_ms"]]
            ax.plot(xs, [0.0, 0.5, 0.95, 0.99, 1.0], marker="o",
                    label=f"{label} (percentiles of results.json)")
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    ax.set_xlabel("Q2C latency (ms)")
    ax.set_ylabel("fraction of I/Os")
    _finish(fig, ax, out)


def _binned(run: Run, idx, bin_s: float, value):
    """Sums and counts of ``value(i)`` per ``bin_s`` of completion time, for the bins
    that end by the run's end and begin after its ramp: a bin the run ended inside
    holds only what completed before the end (a throughput drawn from it drops
    falsely), so it has no point, nor has one the ramp ended inside."""
    from blksim.experiments.figures import warmup_spans
    sums: dict = {}
    counts: dict = {}
    end = run.results.get("simulated_s")
    last = math.floor(end / bin_s + 1e-9) if end else math.inf      # bins 0..last-1 full
    # requests.csv has the bios queued from the ramp's end on: a bin the ramp ends
    # inside is part of one too
    spans = warmup_spans(run.results)
    ramp = spans[0][1] if spans and spans[0][2].startswith("ramp") else 0.0
    first = math.ceil(ramp / bin_s - 1e-9)
    for i in idx:
        k = int(run.c[i] // bin_s)
        if k < first:
            continue
        if k >= last:
            if run.c[i] > last * bin_s + 1e-9:
                continue
            k = last - 1                   # completed at the very end: the last full bin
        sums[k] = sums.get(k, 0.0) + value(i)
        counts[k] = counts.get(k, 0) + 1
    return sums, counts


def _steps(keys: list, values: list, bin_s: float) -> tuple:
    """A step line over the bins ``keys`` (each value held over its bin)."""
    xs = [k * bin_s for k in keys]
    return (xs + [xs[-1] + bin_s], values + [values[-1]]) if xs else ([], [])


def _time_axis(ax, runs: list, bin_s: float) -> None:
    """Shade the first run's ramp and applications' warm-up (`warmup_spans`), start the
    axis at 0, and say what the last point is."""
    from blksim.experiments.figures import shade_warmup, warmup_spans
    shade_warmup(ax, warmup_spans(runs[0].results))
    ax.set_xlim(left=0)
    end = runs[0].results.get("simulated_s")
    cut = end - math.floor(end / bin_s + 1e-9) * bin_s if end else 0.0
    ax.set_xlabel(f"simulated time (s); per {bin_s:g} s interval"
                  + (f", to the last full one (the run's last {cut:.3g} s left out)"
                     if cut > 1e-9 else ""))


def _need_completions(runs: list) -> None:
    """Refuse a run in whose measured window no bio completed: it has no figure to draw
    (docs/results.md, "Empty windows")."""
    for run in runs:
        totals = run.results.get("totals", {}).get("all", {})
        if totals.get("ios", 1) == 0:
            raise PlotError(f"{run.path}: no I/O completed in the measured window: nothing "
                            f"to draw")


def _need_requests(runs: list, what: str) -> None:
    for run in runs:
        if not run.has_requests:
            raise PlotError(f"{run.path}: no requests.csv; {what} needs every bio's times "
                            f"(run it with --per-request --out)")


def plot_latency(runs: list, out: str, bin_s: float = 1.0, per_process: bool = False,
                 title: str = "") -> None:
    """Mean Q2C latency per ``bin_s`` of completion time, a line per run (or process)."""
    check_comparable(runs)
    _need_completions(runs)
    _need_requests(runs, "a latency timeline")
    fig, ax = _figure(out, title or f"Q2C latency over time (mean per {bin_s:g} s)")
    for label, run, idx in _series(runs, per_process):
        sums, counts = _binned(run, idx, bin_s, lambda i: (run.c[i] - run.q[i]) * 1e3)
        keys = sorted(sums)
        ax.step(*_steps(keys, [sums[k] / counts[k] for k in keys], bin_s), where="post",
                label=label)
    _time_axis(ax, runs, bin_s)
    ax.set_ylabel("mean Q2C latency (ms)")
    ax.set_yscale("log")
    plain_log_ticks(ax.yaxis)
    _finish(fig, ax, out)


def plot_timeline(runs: list, out: str, bin_s: float = 1.0, per_process: bool = False,
                  title: str = "") -> None:
    """Throughput (MB/s of completed bios) per ``bin_s``, a line per run (or process)."""
    check_comparable(runs)
    _need_completions(runs)
    _need_requests(runs, "a throughput timeline")
    fig, ax = _figure(out, title or f"throughput over time (per {bin_s:g} s)")
    for label, run, idx in _series(runs, per_process):
        sums, _ = _binned(run, idx, bin_s, lambda i: run.sectors[i] * 512 / 1e6)
        # every full bin from the first with a completion: one with none is 0 MB/s
        keys = list(range(min(sums), max(sums) + 1)) if sums else []
        ax.step(*_steps(keys, [sums.get(k, 0.0) / bin_s for k in keys], bin_s),
                where="post", label=label)
    _time_axis(ax, runs, bin_s)
    ax.set_ylabel("throughput (MB/s, 10^6 bytes)")
    ax.set_ylim(bottom=0)
    _shade_gc(ax, runs)
    _finish(fig, ax, out)


# ---------------------------------------------------------------- flash drives
def flash_disks(run: Run) -> dict:
    """The run's flash disks: name -> the device entry of results.json (with ``figures``
    and ``gc_intervals``)."""
    devices = run.results.get("devices") or {}
    out = {name: d["device"] for name, d in devices.items()
           if d.get("kind") == "disk" and "gc_intervals" in d.get("device", {})}
    if not devices and "gc_intervals" in run.results.get("device", {}):
        out["sda"] = run.results["device"]
    return out


def merged_intervals(intervals) -> list:
    """The union of (start, end, ...) intervals as sorted, disjoint (start, end) pairs:
    the time some die was collecting."""
    out: list = []
    for s, e, *_ in sorted(intervals):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


#: Height of one run's GC band, as a share of the axes' height.
_BAND = 0.04


def _shade_gc(ax, runs: list) -> None:
    """A band along the bottom of the axes per run (and flash disk) with GC intervals,
    filled where a die of that disk was collecting, labelled "GC"."""
    from matplotlib.transforms import blended_transform_factory
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    row = 0
    for run in runs:
        disks = flash_disks(run)
        for name, dev in sorted(disks.items()):
            spans = merged_intervals(dev.get("gc_intervals") or ())
            if not spans:
                continue
            several = len([d for d in (run.results.get("devices") or {}).values()
                           if d.get("kind") == "disk"]) > 1
            who = f"{run.label} {name}" if several else run.label
            ax.broken_barh([(s, e - s) for s, e in spans], (row * _BAND, _BAND * 0.8),
                           transform=trans, color=f"C{row % 10}", alpha=0.35, lw=0,
                           label=f"GC: {who} (some die collecting)")
            row += 1


def _gc_by_die(ax, dev: dict, dies: int) -> None:
    """A row per die, filled while that die was collecting (the kept GC intervals)."""
    by_die: dict = {}
    for s, e, die in dev.get("gc_intervals") or ():
        by_die.setdefault(die, []).append((s, e - s))
    for die, spans in by_die.items():
        ax.broken_barh(spans, (die - 0.4, 0.8), color="C3", alpha=0.6, lw=0)
    if not by_die:
        ax.text(0.5, 0.5, "no garbage collection", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_ylim(-0.6, max(dies, 1) - 0.4)
    ax.set_ylabel("GC on die\n(index)")
    ax.set_xlabel("simulated time (s)")
    if dies <= 16:
        ax.set_yticks(range(dies))
    ax.grid(True, axis="x", alpha=0.3)


def plot_flash(run: Run, out: str, disk: str | None = None, title: str = "") -> None:
    """One run's flash disk: its free blocks over time (GC shaded), GC per die, and the
    busy share of each die and channel over the measured window."""
    disks = flash_disks(run)
    if not disks:
        raise PlotError(f"{run.path}: no flash disk in results.json (plot flash draws a run "
                        f"whose [device] has flash = ...)")
    if disk is None:
        disk = sorted(disks)[0]
    elif disk not in disks:
        raise PlotError(f"--disk {disk}: not a flash disk of {run.path} (its flash disks: "
                        f"{', '.join(sorted(disks))})")
    dev = disks[disk]
    f = dev["figures"]
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(9, 9.5))
    top, gc_ax, mid, bottom = fig.subplots(4, 1, gridspec_kw={"height_ratios": [3, 1.6, 2, 2]})
    fig.suptitle(title or f"{run.label}: flash disk {disk} ({dev.get('name', '?')})")
    series = f.get("free_blocks_series") or []
    if series:
        top.step([t for t, _ in series], [v for _, v in series], where="post",
                 label="free blocks (sampled as the host writes)")
        top.set_ylim(bottom=0)
    else:
        top.text(0.5, 0.5, "no free-block samples (no host writes)", ha="center",
                 va="center", transform=top.transAxes)
    spans = merged_intervals(dev.get("gc_intervals") or ())
    for k, (s, e) in enumerate(spans):
        top.axvspan(s, e, color="C3", alpha=0.2, lw=0, label="GC (some die collecting)"
                    if k == 0 else None)
    top.set_xlim(0, run.results.get("simulated_s") or None)
    top.set_xlabel("simulated time (s)")
    top.set_ylabel("free blocks (erased, count)")
    top.grid(True, alpha=0.3)
    if series or spans:
        top.legend(fontsize=8, loc="best")
    _gc_by_die(gc_ax, dev, dev.get("geometry", {}).get("dies") or
               len((f.get("utilisation") or {}).get("dies") or ()))
    gc_ax.set_xlim(top.get_xlim())
    m = dev.get("measured") or {}
    util = m.get("utilisation") or {}
    window = f"{m.get('start_s', 0):.3g}-{m.get('end_s', 0):.3g} s"
    for ax, key, what in ((mid, "dies", "die"), (bottom, "channels", "channel")):
        shares = [100 * x for x in util.get(key) or ()]
        ax.bar(range(len(shares)), shares, color="C0" if key == "dies" else "C2")
        if not shares:
            ax.text(0.5, 0.5, "the measured window is empty", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set_ylim(0, 100)
        ax.set_xlabel(f"{what} (index)")
        ax.set_ylabel(f"{what} busy\n(% of {window})")
        ax.grid(True, axis="y", alpha=0.3)
        if len(shares) <= 40:
            ax.set_xticks(range(len(shares)))
    fig.tight_layout()
    from blksim.experiments.figures import save_figure
    save_figure(fig, out, dpi=110)
