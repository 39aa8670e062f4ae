"""Tables and CDF plots of the validation study's results (`blksim.experiments.validation.study`)."""

from __future__ import annotations

from pathlib import Path

from blksim.experiments.validation.demerit import LEVELS, sample_quantiles
from blksim.experiments.validation.study import ValidationError, at_or_under, ruler_pairs


def _marker(beats: bool | None) -> str:
    return "" if beats is None else ("<=" if beats else ">")


def _ms(value, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.3f}"


def result_table(result, seed: int | None = None) -> str:
    """One drive's validation: simulated beside measured, the mean error and the demerit
    on both rulers (raw times, and binned as DiskSim bins them), each beside DiskSim's."""
    seed_note = "" if seed is None else f", seed {seed}"
    w = 28
    lines = [
        f"validate {result.drive} on {result.trace}: {result.n} requests, closed loop, "
        f"queue depth 1, FCFS{seed_note}",
        "",
        f"{'':{w}}{'simulated':>10}{'measured':>10}",
        f"{'mean (ms)':{w}}{result.sim_mean_ms:10.3f}{result.meas_mean_ms:10.3f}",
        f"{'std. dev. (ms)':{w}}{result.sim_std_ms:10.3f}{result.meas_std_ms:10.3f}",
        f"{'mean error (%)':{w}}{result.mean_error_pct:+10.2f}",
    ]
    if result.disksim_error_pct is not None:
        lines.append(f"{'DiskSim 4.0 error (%)':{w}}{result.disksim_error_pct:+10.2f}")
    rulers = [("demerit (ms)", result.demerit_ms, "DiskSim 4.0 demerit (ms)",
               result.disksim_exact_demerit_ms),
              ("binned as DiskSim (ms)", result.demerit_binned_ms, "DiskSim 4.0 published (ms)",
               result.disksim_demerit_ms)]
    for label, ours, their_label, theirs in rulers:
        if ours is None:
            continue
        lines.append(f"{label:{w}}{ours:10.3f}")
        if theirs is not None:
            lines.append(f"{their_label:{w}}{theirs:10.3f}"
                         f"  (blksim {_marker(ours <= theirs)} DiskSim)")
    return "\n".join(lines) + "\n"


def _mean(values) -> float | None:
    return None if any(v is None for v in values) else sum(values) / len(values)


def all_table(results, skipped=()) -> str:
    """One line per drive, then the drives skipped and why."""
    head = (f"{'drive':<12}{'requests':>9}{'meas ms':>9}{'sim ms':>9}{'error %':>9}"
            f"{'DiskSim %':>10}{'demerit':>9}{'DiskSim':>9}{'binned':>9}{'DiskSim':>9}"
            f"{'':>4}  {'calibration':<13}worst class (share)")
    lines = [head, "-" * len(head)]
    for r in results:
        disksim_err = "-" if r.disksim_error_pct is None else f"{r.disksim_error_pct:+.2f}"
        worst = r.worst_class()
        worst_text = "" if worst is None else f"{worst[0]} ({100 * worst[1]:.0f} %)"
        lines.append(f"{r.drive:<12}{r.n:>9}{r.meas_mean_ms:>9.3f}{r.sim_mean_ms:>9.3f}"
                     f"{r.mean_error_pct:>+9.2f}{disksim_err:>10}{r.demerit_ms:>9.3f}"
                     f"{_ms(r.disksim_exact_demerit_ms, 9)}{_ms(r.demerit_binned_ms, 9)}"
                     f"{_ms(r.disksim_demerit_ms, 9)}"
                     f"{_marker(r.beats_disksim):>4}  {'yes' if r.calibration else 'no':<13}{worst_text}")
    scored = [r for r in results if r.beats_disksim is not None]
    if scored:
        columns = [_mean([getattr(r, name) for r in scored]) for name in
                   ("demerit_ms", "disksim_exact_demerit_ms", "demerit_binned_ms",
                    "disksim_demerit_ms")]
        verdict = _marker(at_or_under(ruler_pairs(*columns)))
        lines.append("-" * len(head))
        lines.append(f"{'mean':<12}{'':>9}{'':>9}{'':>9}{'':>9}{'':>10}"
                     + "".join(_ms(c, 9) for c in columns)
                     + f"{verdict:>4}  over {len(scored)} drives")
    lines.append("")
    lines.append("means and demerits in ms; demerit: RMS horizontal distance between the "
                 "simulated and measured response-time CDFs, from the raw times; binned: the "
                 "same with both samples binned as DiskSim bins them; each DiskSim column to "
                 "the right of blksim's is DiskSim 4.0's figure on the same ruler (the binned "
                 "one is the figure it publishes); <= when blksim is at or under DiskSim on "
                 "both; worst class: the request class (direction, the trace's cache state, "
                 "sequential or random) with the largest share of the squared error "
                 "(requests x its own demerit squared)")
    for stem, reason in skipped:
        lines.append(f"skipped {stem}: {reason}")
    return "\n".join(lines) + "\n"


def plot_cdfs(result, path) -> None:
    """Draw the measured and simulated response-time CDFs of ``result`` to ``path``.

    The format follows the file's extension (png, pdf, svg, ...). The file is
    written under a temporary name and renamed, so it is never half-written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from blksim.experiments.figures import figure_format

    path = Path(path)
    try:
        fmt = figure_format(path)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    fig = Figure(figsize=(7, 4.5))
    canvas = FigureCanvasAgg(fig)   # Agg without touching pyplot's global backend
    ax = fig.add_subplot()
    ax.plot(sample_quantiles(result.meas_ms), LEVELS, label="measured", color="black")
    ax.plot(sample_quantiles(result.sim_ms), LEVELS, label="simulated (blksim)",
            color="tab:red", linestyle="--")
    ax.set_xlabel("response time (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    title = f"{result.drive} on {result.trace}: demerit {result.demerit_ms:.3f} ms"
    theirs = result.disksim_exact_demerit_ms
    if theirs is not None:
        title += f" (DiskSim {theirs:.3f} ms)"
    ax.set_title(title)
    ax.legend(loc="lower right")
    from blksim.traces.records import atomic_output
    try:
        with atomic_output(path) as stream:
            fig.savefig(stream, format=fmt)
    except OSError as exc:
        raise ValidationError(f"{path}: cannot write the plot: {exc.strerror or exc}") from None
