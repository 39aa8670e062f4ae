"""Drawing the disk head's path (experiments/heads.py records it): the figure of a
disk-scheduling algorithm as textbooks and slides show it.

The path is built by `head_path` from the requests the device started, in order, and
the elevator's *routes* (`schedulers.textbook.TextbookElevator.routes`): where a
textbook elevator did not go straight to the next request, the legs it took. So SCAN
and C-SCAN are drawn reaching the edge cylinder before they turn or return, and the
circular algorithms' returns (C-SCAN's edge to edge, C-LOOK's jump) are drawn dashed,
as returns, serving nothing. Each leg is a `Leg`; the drawn length of a path (the sum
of its legs' cylinders) is the textbook's head-movement count.

Time (x, ms) is when the block layer issued each request to the drive. A leg to an
edge or a return sits between the issue of the request before it and the request
after it; the modelled drive is only ever sent requests, so its arm goes straight to
the next one and the trip to the edge takes none of the drive's time (the caption
says so when it matters).

Text is placed so that nothing covers anything else: point labels (cylinder numbers)
are thinned with ``labels="auto"`` until no two overlap, using the renderer's own text
bounding boxes; the legend sits outside the axes, the caption below them.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass

#: Line styles of the three kinds of leg.
_STYLE = {"serve": dict(color="tab:blue", linestyle="-", linewidth=1.0),
          "edge": dict(color="tab:blue", linestyle="-", linewidth=1.0),
          "return": dict(color="tab:gray", linestyle="--", linewidth=1.0)}
_LABEL_MODES = ("on", "off", "auto")
#: Colours of processes, when a figure has several (then points are coloured by process).
_PROCESS_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown",
                    "tab:pink", "tab:olive", "tab:cyan")


@dataclass
class Leg:
    """One straight piece of the head's path: from (x0 ms, cylinder y0) to (x1, y1).
    ``kind``: ``serve`` (to a request), ``edge`` (to the disk's edge, no request
    there), ``return`` (a circular algorithm's return, serving nothing)."""

    x0: float
    y0: int
    x1: float
    y1: int
    kind: str

    @property
    def cylinders(self) -> int:
        """Cylinders the head crosses on this leg."""
        return abs(self.y1 - self.y0)


def usable_routes(records, routes) -> dict:
    """The elevator's ``routes`` if they describe these records (dispatch k is record
    k: each route ends on its record's cylinder), else {} (e.g. a Linux elevator, or a
    block layer that issued requests the elevator did not dispatch)."""
    if not routes:
        return {}
    for k, legs in routes.items():
        if k < len(records) and records[k].cylinder != legs[-1][0]:
            return {}
    return {k: legs for k, legs in routes.items() if k < len(records)}


def head_path(records, start_cylinder: int | None = None, routes=None) -> list:
    """The head's path through `records` (in the order the device started them) as
    `Leg` s, from `start_cylinder` at time 0 (or from the first record), through the
    legs of ``routes`` (dispatch number -> ``((cylinder, returning), ...)``) where the
    elevator did not go straight to the next request."""
    routes = usable_routes(records, routes)
    legs: list = []
    if not records:
        return legs
    if start_cylinder is None:
        x, y = records[0].time * 1e3, records[0].cylinder
    else:
        x, y = 0.0, start_cylinder
    for k, r in enumerate(records):
        rx = r.time * 1e3
        route = routes.get(k)
        if route is None:
            if (rx, r.cylinder) != (x, y):
                legs.append(Leg(x, y, rx, r.cylinder, "serve"))
            x, y = rx, r.cylinder
            continue
        # the route's legs share the time between the two requests, by length
        total = sum(abs(c - p) for p, c in zip([y] + [c for c, _ in route[:-1]],
                                                [c for c, _ in route])) or 1
        for n, (cyl, returning) in enumerate(route):
            nx = x + (rx - x) * abs(cyl - y) / total if n < len(route) - 1 else rx
            last = n == len(route) - 1
            kind = "return" if returning else ("serve" if last else "edge")
            legs.append(Leg(x, y, nx, cyl, kind))
            x, y = nx, cyl
    return legs


def path_length(legs, kinds=("serve", "edge", "return")) -> int:
    """Cylinders crossed along `legs` (of the given kinds)."""
    return sum(leg.cylinders for leg in legs if leg.kind in kinds)


def check_labels(labels: str) -> str:
    """``labels`` if it is one of on, off, auto; else ValueError."""
    if labels not in _LABEL_MODES:
        raise ValueError(f"labels: expected one of {', '.join(_LABEL_MODES)}, "
                         f"found {labels!r}")
    return labels


def _new_figure(width: float, height: float, dpi: int):
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)       # a renderer, for text bounding boxes
    return fig


def _draw_path(ax, records, start_cylinder, routes, fontsize: float, marker_size: float,
               legend: bool) -> tuple:
    """Draw the path and the points on `ax`; return (legs, [(x, y, text), ...] the
    point labels to place: edge turns first, then the requests in order)."""
    legs = head_path(records, start_cylinder, routes)
    seen = set()
    for leg in legs:
        style = _STYLE[leg.kind]
        name = None
        if legend and leg.kind not in seen:
            name = {"serve": "head's path", "edge": None,
                    "return": "return (serves nothing)"}[leg.kind]
            seen.add(leg.kind)
        ax.plot([leg.x0, leg.x1], [leg.y0, leg.y1], zorder=1, label=name,
                gid=f"head-{leg.kind}", **style)
    turns = [(leg.x1, leg.y1) for leg in legs if leg.kind in ("edge", "return")
             and not _ends_on_request(leg, records)]
    if turns:
        ax.scatter([t[0] for t in turns], [t[1] for t in turns], s=marker_size * 1.6,
                   marker="|", color="black", zorder=2,
                   label="edge of the disk (no request)" if legend else None)
    pids = sorted({r.pid for r in records})
    by_pid = 1 < len(pids) <= len(_PROCESS_COLOURS)
    groups = []
    for write in (False, True):
        for n, pid in enumerate(pids if by_pid else [None]):
            pts = [r for r in records if r.write == write and (pid is None or r.pid == pid)]
            if not pts:
                continue
            colour = _PROCESS_COLOURS[n] if by_pid else ("tab:red" if write else "tab:blue")
            what = "write" if write else "read"
            name = f"{what}, process {pid}" if by_pid else what
            groups.append(name)
            ax.scatter([r.time * 1e3 for r in pts], [r.cylinder for r in pts],
                       s=marker_size, marker="s" if write else "o", color=colour,
                       label=name if legend else None, zorder=2)
    texts = [(x, y, f"{y} (edge)") for x, y in turns]
    texts += [(r.time * 1e3, r.cylinder, str(r.cylinder)) for r in records]
    return legs, texts


def _ends_on_request(leg, records) -> bool:
    """True if `leg` ends where a request was issued (C-LOOK's jump lands on one)."""
    return any(abs(r.time * 1e3 - leg.x1) < 1e-9 and r.cylinder == leg.y1 for r in records)


#: Where a label may go beside its point, in order of preference: offset (points),
#: horizontal and vertical alignment.
_PLACES = (((3, 3), "left", "bottom"), ((-3, 3), "right", "bottom"),
           ((3, -3), "left", "top"), ((-3, -3), "right", "top"))


def _place_labels(fig, ax, texts, labels: str, fontsize: float,
                  marker_size: float = 18) -> list:
    """Annotate the points. ``on``: every label, above right of its point. ``auto``:
    each label in turn takes the first place beside its point (above right, above left,
    below right, below left) where its box, as the renderer draws it, stays inside the
    axes and overlaps no text already there (titles, ticks, legend, caption, labels
    kept before it) and no point; a label with no such place is left out. Returns the
    labels kept."""
    if labels == "off" or not texts:
        return []
    if labels == "on":
        return [ax.annotate(t, (x, y), textcoords="offset points", xytext=(3, 3),
                            fontsize=fontsize, zorder=3) for x, y, t in texts]
    fig.canvas.draw()          # every text where it will be drawn (legend, laid-out axes)
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    taken = [t.get_window_extent(renderer) for t in fig.findobj(_text_class())
             if t.get_visible() and t.get_text()]
    legend = ax.get_legend()
    if legend is not None:
        taken.append(legend.get_window_extent(renderer))
    from matplotlib.transforms import Bbox
    half = marker_size ** 0.5 * fig.dpi / 72 / 2          # a marker's radius, pixels
    for px, py in ax.transData.transform([(x, y) for x, y, _t in texts]):
        taken.append(Bbox([[px - half, py - half], [px + half, py + half]]))
    kept = []
    for x, y, t in texts:
        for offset, ha, va in _PLACES:
            text = ax.annotate(t, (x, y), textcoords="offset points", xytext=offset,
                               ha=ha, va=va, fontsize=fontsize, zorder=3)
            box = text.get_window_extent(renderer)
            if (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0
                    and box.y1 <= inside.y1
                    and not any(box.overlaps(other) for other in taken)):
                taken.append(box)
                kept.append(text)
                break
            text.remove()
    return kept


def _text_class():
    from matplotlib.text import Text
    return Text


def _caption_below(fig, caption: str, fontsize: float, top_rect: float = 1.0) -> None:
    """Put `caption` under the axes, across the figure, and lay the axes out above it."""
    renderer = fig.canvas.get_renderer()
    if caption:
        # about 0.6 em a character: as many as the figure's width holds
        width_chars = int(fig.get_figwidth() * 72 * 0.92 / (0.6 * fontsize))
        wrapped = "\n".join(textwrap.fill(p, width_chars) for p in caption.split("\n"))
        text = fig.text(0.01, 0.01, wrapped, ha="left", va="bottom", fontsize=fontsize,
                        color="dimgray")
        height = text.get_window_extent(renderer).height / fig.bbox.height + 0.02
    else:
        height = 0.0
    fig.tight_layout(rect=(0, height, 1, top_rect))


def draw_heads(records, title: str = "", cylinders: int | None = None,
               start_cylinder: int | None = None, routes=None, labels: str = "auto",
               caption: str = ""):
    """The figure of one run (a matplotlib Figure): the head's cylinder against time
    (ms), one point per request joined in order, through the elevator's `routes`.

    ``start_cylinder``: the path starts there at time 0 (a cross marks it).
    ``cylinders``: the y axis spans the whole disk (0 .. cylinders - 1).
    ``labels``: on (every point carries its cylinder), off, or auto (as many as fit
    without overlapping). Reads are circles, writes squares; with 2 to 8 processes the
    points are coloured by process. The legend is outside the axes, ``caption`` below
    them.
    """
    check_labels(labels)
    fig = _new_figure(9.0, 5.0, 100)
    ax = fig.add_subplot(1, 1, 1)
    legs, texts = _draw_path(ax, records, start_cylinder, routes, fontsize=8,
                             marker_size=18, legend=True)
    if start_cylinder is not None and records:
        ax.scatter([0.0], [start_cylinder], s=30, marker="x", color="black",
                   label=f"start (cylinder {start_cylinder})", zorder=2)
    if cylinders:
        ax.set_ylim(-0.03 * cylinders, cylinders - 1 + 0.06 * cylinders)
    ax.set_xlabel("time the request was issued to the drive (ms)")
    ax.set_ylabel("cylinder")
    ax.set_title(title or "the disk head's cylinder, request by request", fontsize=11)
    ax.grid(True, linewidth=0.3, alpha=0.6)
    ax.margins(x=0.05)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    _caption_below(fig, caption, 8)
    _place_labels(fig, ax, texts, labels, 7, 18)
    return fig


def save(fig, path: str) -> None:
    """Write `fig` to `path` in the format of its extension (png by default), atomically.
    SVG keeps its text as text (editable on a slide) and carries no date, so the same
    run gives the same bytes."""
    import matplotlib
    from blksim.traces.records import atomic_output

    ext = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    meta = {"Date": None} if ext == "svg" else {}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "blksim"}):
        with atomic_output(path) as stream:
            fig.savefig(stream, format=ext, metadata=meta or None)


def plot_heads(records, path: str, title: str = "", cylinders: int | None = None,
               start_cylinder: int | None = None, routes=None, labels: str = "auto",
               caption: str = "") -> None:
    """`draw_heads` written to `path` (PNG, SVG, or any format matplotlib knows by the
    extension), atomically."""
    save(draw_heads(records, title, cylinders, start_cylinder, routes, labels, caption),
         path)


def draw_heads_grid(panels, cylinders: int | None = None, ncols: int = 4,
                    suptitle: str = "", caption: str = "", labels: str = "auto"):
    """Small multiples: one panel per ``(title, records, start_cylinder, routes)`` in
    `panels`, sharing one legend, with `caption` below. Returns the Figure."""
    check_labels(labels)
    n = len(panels)
    nrows = -(-n // ncols)
    fig = _new_figure(3.4 * ncols, 2.8 * nrows + 0.9, 80)
    placed = []
    for k, (title, records, start, routes) in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        _legs, texts = _draw_path(ax, records, start, routes, fontsize=6, marker_size=9,
                                  legend=False)
        if cylinders:
            ax.set_ylim(-0.04 * cylinders, cylinders - 1 + 0.1 * cylinders)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        if k % ncols == 0:
            ax.set_ylabel("cylinder", fontsize=8)
        if k >= n - ncols:
            ax.set_xlabel("time issued to the drive (ms)", fontsize=8)
        ax.grid(True, linewidth=0.3, alpha=0.6)
        ax.margins(x=0.08)
        placed.append((ax, texts))
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    _caption_below(fig, caption, 8)
    for ax, texts in placed:
        _place_labels(fig, ax, texts, labels, 6, 9)
    return fig
