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
