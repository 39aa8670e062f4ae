"""What the studies' figures share: the file format a figure is written in."""

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
