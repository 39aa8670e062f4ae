"""What the studies' figures share: the file format a figure is written in, and writing
it whole or not at all."""

from __future__ import annotations

from pathlib import Path


def figure_format(path) -> str:
    """The format matplotlib writes ``path`` in, from its extension (png without one).

    Raises ValueError naming the file and the formats there are, so that a command can
    check its output path before it simulates anything."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    fmt = path.suffix[1:].lower() or "png"
    formats = FigureCanvasAgg(Figure()).get_supported_filetypes()
    if fmt not in formats:
        raise ValueError(f"{path}: cannot draw a .{fmt} file; use one of "
                         f"{', '.join(sorted(formats))}")
    return fmt


def save_figure(fig, path, **kwargs) -> None:
    """Draw ``fig`` to ``path`` in the format of its extension, under a temporary name
    beside it renamed into place once whole (`blksim.traces.records.atomic_output`): a run
    stopped while drawing leaves no empty or half-drawn figure under that name."""
    from blksim.traces.records import atomic_output
    fmt = figure_format(path)
    with atomic_output(path) as stream:
        fig.savefig(stream, format=fmt, **kwargs)


def warmup_spans(results: dict) -> list:
    """The parts of a run before its figures were measured, as (start s, end s, label):
    the run's ramp (``run.ramp_time``: nothing counted in the block-level figures), then
    up to the latest application's warm-up (its ``window_s`` start: its transactions
    not counted) where that is later. Empty when the run measured from its start."""
    from blksim.common.config_values import ConfigError, time_value
    try:
        ramp = time_value((results.get("config") or {}).get("run") or {}, "ramp_time",
                          "results.json config.run", 0.0)
    except ConfigError:
        ramp = 0.0
    app = max([f["window_s"][0] for f in (results.get("apps") or {}).values()
               if isinstance(f.get("window_s"), list)] or [0.0])
    spans = []
    if ramp > 0:
        spans.append((0.0, ramp, "ramp: not measured"))
    if app > ramp:
        spans.append((ramp, app, "application warm-up:\nits figures not measured"))
    return spans


def shade_warmup(ax, spans: list) -> None:
    """Shade each warm-up span (`warmup_spans`) over the axes' height, labelled for the
    legend."""
    for k, (s, e, label) in enumerate(spans):
        ax.axvspan(s, e, color="0.6" if k == 0 else "0.8", alpha=0.35, lw=0, label=label)


def legend_outside(ax, **kwargs) -> None:
    """The axes' legend to the right of the axes, where it covers no data (nothing is
    drawn when nothing was drawn with a label)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                  fontsize=8, **kwargs)


def plain_log_ticks(axis) -> None:
    """Label a log ``axis`` (``ax.xaxis``, ``ax.yaxis``) with plain numbers (0.1, 45,
    1,000) instead of powers of ten (4.5 x 10^1); minor ticks are labelled only where
    the axis spans less than a decade (where matplotlib labels them). Call it once the
    data is drawn."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    def plain(v, _pos=None) -> str:
        return f"{v:,g}" if v < 1e6 else f"{v:.3g}"
    lo, hi = sorted(axis.get_view_interval())
    axis.set_major_formatter(FuncFormatter(plain))
    axis.set_minor_formatter(FuncFormatter(plain) if lo > 0 and hi / lo < 10
                             else NullFormatter())
