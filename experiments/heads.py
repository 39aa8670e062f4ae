"""Where the disk head goes: record every request the device starts, and draw the
head's cylinder against time (the classic textbook figure of a disk-scheduling
algorithm).

`record_heads` runs one configuration and returns one `HeadRecord` per request
handed to the device, in that order: the simulated time it was issued, its
cylinder on the device (the same mapping the textbook elevators use,
`schedulers.textbook.DeviceGeometry`), start sector, size, direction and the
submitting process. It subscribes to the disk queue's ``block_rq_issue`` and
``block_rq_complete`` tracepoints (`blksim.block.tracepoints`), so no part of the
engine changes. `plot_heads` draws the records, `write_csv` writes them; both write a
temporary file and rename it into place.

Only a device with cylinders of its own (a mechanical drive) is recorded: a RAID
controller's LUN, a service-law device or a flash drive has no head, and
`record_heads` raises `DeviceError` rather than draw invented cylinders.

With ``device/queue_depth`` 1 the issue order is the order the arm serves them.
With a deeper queue a drive that reorders internally (a DiskSim-mode drive with an
SPTF or elevator queue policy) may serve them in another order.

Run ``blksim plot heads CONFIG.toml --out FIG.png`` (cli/plot.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import chain

from blksim.block.tracepoints import StopRun
from blksim.schedulers.textbook import DeviceGeometry
from blksim.traces.records import atomic_output, write_lines

CSV_COLUMNS = ("time_ms", "cylinder", "sector", "sectors", "dir", "pid", "done_ms",
               "drive_queue_ms", "overhead_ms", "seek_ms", "rotation_ms", "transfer_ms",
               "bus_ms", "cache_hit")


@dataclass
class HeadRecord:
    """One request the device started: when it was issued (s), where (cylinder, start
    sector), its size (sectors), direction and process, and when the device completed
    it (``done``, s; -1 if the run ended first)."""

    time: float
    cylinder: int
    sector: int
    sectors: int
    write: bool
    pid: int
    done: float = -1.0
    breakdown: dict | None = None     # where its time in the drive went (s), on completion


@dataclass
class HeadRun:
    """What `record_heads` returns: the records, the device's geometry and the elevator."""

    records: list
    cylinders: int | None
    scheduler: str
    elevator: object
    start_cylinder: int | None   # the device's head before the run (None: not known)
    stopped_early: bool


# Where a device's cylinders come from (`DeviceGeometry.kind`): only these are a drive's
# own; "pseudo" cylinders (a fixed number of sectors each) would be invented.
_REAL_GEOMETRY = ("device", "layout")


class _Enough(StopRun):
    """Raised inside the run to stop it once ``first`` requests are recorded."""


class _HeadRecorder:
    """Subscribes to a queue's issues and completions: records each request the device
    starts, and when it completes."""

    def __init__(self, geometry: DeviceGeometry, records: list, first: int | None):
        self._cyl = geometry.cylinder_of
        self._records = records
        self._first = first
        self._open = {}   # id(rq) -> its record, until the device completes it

    def issue(self, q, rq, now: float) -> None:
        """``block_rq_issue``: record the request (or stop the run after ``first``)."""
        records = self._records
        if self._first is not None and len(records) >= self._first:
            raise _Enough()
        rec = HeadRecord(now, self._cyl(rq.sector), rq.sector, rq.nr_sectors,
                         bool(rq.write), getattr(rq, "pid", -1))
        records.append(rec)
        self._open[id(rq)] = rec

    def complete(self, q, rq, now: float) -> None:
        """``block_rq_complete``: its completion time and where its time went."""
        rec = self._open.pop(id(rq), None)
        if rec is not None:
            rec.done = now
            rec.breakdown = getattr(rq, "breakdown", None)


def record_heads(cfg, first: int | None = None) -> HeadRun:
    """Run configuration `cfg` (a resolved `sim.config.RunConfig`) and record every
    request the device starts; with `first`, stop after that many."""
    from blksim.sim.engine import Simulation

    if first is not None and first < 1:
        raise ValueError(f"first: expected a whole number >= 1, got {first!r}")
    sim = Simulation(cfg)
    device = sim.device
    elevator = sim.queue.elevator
    if getattr(elevator, "wants_device", False):
        elevator.attach_device(device)   # idempotent if the block layer did it already
    geometry = getattr(elevator, "geometry", None) or DeviceGeometry(device)
    if DeviceGeometry(device).kind not in _REAL_GEOMETRY:
        from blksim.disk_models.base import DeviceError
        facts = device.describe() if hasattr(device, "describe") else {}
        what = f"the device ({facts.get('name') or type(device).__name__})"
        raise DeviceError(f"plot heads: {what} has no head and no cylinders to draw (plot "
                          f"heads draws a mechanical drive; a RAID array's LUN, a "
                          f"service-law device or a flash drive has none)")
    start = getattr(device, "cur_cyl", None)
    if hasattr(device, "record_breakdown"):
        device.record_breakdown = True     # each request's seek, rotation, transfer, ...
    records: list = []
    recorder = _HeadRecorder(geometry, records, first)
    sim.queue.subscribe("block_rq_issue", recorder.issue)
    sim.queue.subscribe("block_rq_complete", recorder.complete)
    stopped = False
    try:
        sim.run()
    except _Enough:
        stopped = True
    return HeadRun(records, geometry.cylinders, cfg.scheduler, elevator, start, stopped)


def head_movement(records, start_cylinder: int = 0) -> int:
    """Cylinders the head travels going from `start_cylinder` through every record in order."""
    total = 0
    cur = start_cylinder
    for r in records:
        total += abs(r.cylinder - cur)
        cur = r.cylinder
    return total


def write_csv(records, path: str) -> None:
    """Write the records as CSV (``CSV_COLUMNS``; time in ms), atomically."""
    def line(r) -> str:
        done = f"{r.done * 1e3:.6f}" if r.done >= 0 else ""
        b = r.breakdown
        parts = "" if b is None else ",".join(
            f"{b[k] * 1e3:.6f}" for k in ("queue", "overhead", "seek", "rotation", "transfer",
                                         "bus")) + f",{1 if b['cache_hit'] else 0}"
        return (f"{r.time * 1e3:.6f},{r.cylinder},{r.sector},{r.sectors},"
                f"{'W' if r.write else 'R'},{r.pid},{done},{parts or ',,,,,,'}\n")

    write_lines(path, chain([",".join(CSV_COLUMNS) + "\n"], map(line, records)))


def _save(fig, path: str) -> None:
    """Draw ``fig`` to ``path`` (format from the extension, png by default), atomically."""
    ext = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    with atomic_output(path) as stream:
        fig.savefig(stream, format=ext)


def plot_heads(records, path: str, title: str = "", cylinders: int | None = None,
               start_cylinder: int | None = None) -> None:
    """Draw the head's cylinder against time (ms), one point per request joined in
    order (the head's path), and write it to `path` (PNG, or any format matplotlib
    knows by the extension) atomically.

    ``start_cylinder``: draw the head's position before the first request at time 0.
    ``cylinders``: the y axis spans the whole disk (0 .. cylinders - 1).
    Reads are drawn as circles, writes as squares; with 40 requests or fewer each
    point carries its cylinder number.
    """
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    xs = [r.time * 1e3 for r in records]
    ys = [r.cylinder for r in records]
    if start_cylinder is not None and records:
        px, py = [0.0] + xs, [start_cylinder] + ys
    else:
        px, py = xs, ys
    ax.plot(px, py, "-", color="tab:blue", linewidth=1.0, zorder=1)
    rx = [x for x, r in zip(xs, records) if not r.write]
    ry = [y for y, r in zip(ys, records) if not r.write]
    wx = [x for x, r in zip(xs, records) if r.write]
    wy = [y for y, r in zip(ys, records) if r.write]
    if rx:
        ax.scatter(rx, ry, s=18, marker="o", color="tab:blue", label="read", zorder=2)
    if wx:
        ax.scatter(wx, wy, s=18, marker="s", color="tab:red", label="write", zorder=2)
    if start_cylinder is not None and records:
        ax.scatter([0.0], [start_cylinder], s=30, marker="x", color="black",
                   label=f"start (cylinder {start_cylinder})", zorder=2)
    if len(records) <= 40:
        for x, y in zip(xs, ys):
            ax.annotate(str(y), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    if cylinders:
        ax.set_ylim(-0.02 * cylinders, cylinders - 1 + 0.02 * cylinders)
    ax.set_xlabel("time issued to the device (ms)")
    ax.set_ylabel("cylinder")
    total = head_movement(records, start_cylinder if start_cylinder is not None
                          else (records[0].cylinder if records else 0))
    ax.set_title(title or "head position")
    ax.text(0.99, 0.01, f"{len(records)} requests, head movement {total} cylinders",
            transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="dimgray")
    ax.grid(True, linewidth=0.3, alpha=0.6)
    if rx or wx:
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_heads_grid(panels, path: str, cylinders: int | None = None, ncols: int = 4,
                    suptitle: str = "") -> None:
    """Small multiples: one `plot_heads`-style panel per ``(title, records, movement)``
    in `panels` (``movement``: the head movement to print, or None), written atomically."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    n = len(panels)
    nrows = -(-n // ncols)
    fig = Figure(figsize=(3.2 * ncols, 2.6 * nrows), dpi=72)
    for k, (title, records, movement) in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        xs = [r.time * 1e3 for r in records]
        ys = [r.cylinder for r in records]
        ax.plot(xs, ys, "-o", color="tab:blue", markersize=3, linewidth=1.0)
        for x, y in zip(xs, ys):
            ax.annotate(str(y), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=6)
        if cylinders:
            ax.set_ylim(-0.03 * cylinders, cylinders - 1 + 0.08 * cylinders)
        label = title if movement is None else f"{title}: {movement} cyl"
        if records and records[-1].done >= 0:
            label += f", {records[-1].done * 1e3:.0f} ms"
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=7)
        if k % ncols == 0:
            ax.set_ylabel("cylinder", fontsize=8)
        if k >= n - ncols:
            ax.set_xlabel("time issued (ms)", fontsize=8)
        ax.grid(True, linewidth=0.3, alpha=0.6)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def teaching_figure(path: str, config: str | None = None) -> list:
    """Run examples/teaching-queue.toml under every textbook elevator (and two Linux
    ones) and draw them side by side (the figure of docs/teaching.md). Returns
    ``(scheduler, cylinders in order, head movement from the first request)`` per run."""
    from blksim import schedulers
    from blksim.schedulers.textbook import TEXTBOOK_SCHEDULERS
    from blksim.sim import config as cfgmod

    if config is None:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        config = os.path.join(here, "examples", "teaching-queue.toml")
    for name, cls in TEXTBOOK_SCHEDULERS.items():
        schedulers.SCHEDULERS.setdefault(name, cls)
    raw = cfgmod.load_file(config)
    panels, rows = [], []
    for name in ("fcfs", "sstf", "scan", "look", "cscan", "clook", "sptf", "deadline"):
        cfg = cfgmod.resolve(raw, config, scheduler=name, lenient_iosched=True)
        run = record_heads(cfg)
        recs = run.records
        moved = head_movement(recs[1:], recs[0].cylinder)
        el = run.elevator
        if name in ("scan", "cscan"):   # the textbook count, with the trips to the edges
            moved = el.head_movement
        panels.append((name, recs, moved))
        rows.append((name, [r.cylinder for r in recs], moved))
    plot_heads_grid(panels, path, cylinders=200,
                    suptitle="head at 53; queue 98 183 37 122 14 124 65 67 "
                             "(examples/teaching-queue.toml)")
    return rows


if __name__ == "__main__":   # python -m blksim.experiments.heads docs/img/teaching-heads.png
    import sys

    for row in teaching_figure(sys.argv[1] if len(sys.argv) > 1 else "teaching-heads.png"):
        print(row[0], " ".join(map(str, row[1])), row[2])
