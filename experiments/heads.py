"""Where the disk head goes: record every request the device starts, and draw the
head's cylinder against time (the classic textbook figure of a disk-scheduling
algorithm).

`record_heads` runs one configuration and returns one `HeadRecord` per request
handed to the device, in that order: the simulated time it was issued, its
cylinder on the device (the same mapping the textbook elevators use,
`schedulers.textbook.DeviceGeometry`), start sector, size, direction and the
submitting process. It subscribes to the disk queue's ``block_rq_issue`` and
``block_rq_complete`` tracepoints (`blksim.block.tracepoints`), so no part of the
engine changes. `plot_heads` (experiments/heads_figure.py) draws the records through the
elevator's routes (SCAN's trip to the edge, C-SCAN's return), `movement_caption` says
what the figure counts, `write_csv` writes the records; files are written to a
temporary name and renamed into place.

Only a device with cylinders of its own (a mechanical drive) is recorded: a RAID
controller's LUN, a service-law device or a flash drive has no head, and
`record_heads` raises `DeviceError` rather than draw invented cylinders.

With ``device/queue_depth`` 1 the issue order is the order the arm serves them.
With a deeper queue a drive that reorders internally (a DiskSim-mode drive with an
SPTF or elevator queue policy) may serve them in another order.

Run ``blksim plot heads CONFIG.toml --out FIG.png`` (cli/plot.py).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from itertools import chain

from blksim.block.tracepoints import StopRun
from blksim.experiments.heads_figure import (draw_heads, draw_heads_grid, head_path,
                                             path_length, plot_heads, save, usable_routes)
from blksim.schedulers.textbook import DeviceGeometry
from blksim.traces.records import write_lines

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

    @property
    def routes(self) -> dict:
        """The elevator's routes (legs via an edge or a return, by dispatch number) when
        they describe these records, else {} (`heads_figure.usable_routes`)."""
        return usable_routes(self.records, getattr(self.elevator, "routes", None))


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


def textbook_name(scheduler: str) -> str:
    """The name textbooks print: C-SCAN for cscan, SSTF for sstf; Linux names as they are."""
    return _TEXTBOOK_NAMES.get(scheduler, scheduler)


_TEXTBOOK_NAMES = {"fcfs": "FCFS", "sstf": "SSTF", "scan": "SCAN", "cscan": "C-SCAN",
                   "look": "LOOK", "clook": "C-LOOK", "sptf": "SPTF"}


def movement_caption(run: HeadRun, start_cylinder: int | None) -> str:
    """What the figure of `run` measures, in words: the head movement drawn (the
    textbook count for the textbook elevators, their returns said apart), and, where
    the drive's arm moved less than the drawn path, why its times leave that out."""
    recs = run.records
    routes = getattr(run.elevator, "routes", None)
    legs = head_path(recs, start_cylinder, routes)
    drawn = path_length(legs)
    back = path_length(legs, ("return",))
    edge = path_length(legs, ("edge",))
    text = f"{len(recs)} requests; head movement {drawn} cylinders"
    if routes is not None:
        text += " as textbooks count it (every cylinder crossed"
        if edge:
            text += ", the trip to the edge included"
        if back:
            text += (f"; the return, dashed, is counted, since the arm travels it: "
                     f"{drawn - back} without it")
        text += ")."
    else:
        text += "."
    first = start_cylinder if start_cylinder is not None else (recs[0].cylinder if recs
                                                               else 0)
    moved = head_movement(recs, first)
    if moved != drawn:
        text += (f"\nTimes are the drive's. It is only ever sent requests, so its arm goes "
                 f"from the last request of a sweep straight to the next one and moves "
                 f"{moved} cylinders in all: the {drawn - moved} cylinders of the trip to "
                 f"the edge{' and back' if back else ''} take it no time.")
    return text


TEACHING_ORDER = ("fcfs", "sstf", "scan", "look", "cscan", "clook", "sptf", "deadline")


def teaching_figure(path: str, config: str | None = None, labels: str = "auto") -> list:
    """Run examples/teaching-queue.toml under every textbook elevator (and deadline)
    and draw them side by side (the figure of docs/teaching.md). Returns ``(scheduler,
    cylinders in order, head movement drawn, last completion in s)`` per run."""
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
    start = None
    for name in TEACHING_ORDER:
        cfg = cfgmod.resolve(raw, config, scheduler=name, lenient_iosched=True)
        run = record_heads(cfg)
        recs = run.records
        start = recs[0].cylinder        # the head's request at the start (cylinder 53)
        moved = path_length(head_path(recs, start, run.routes))
        last = max(r.done for r in recs)
        back = path_length(head_path(recs, start, run.routes), ("return",))
        extra = f" ({moved - back} without return)" if back else ""
        panels.append((f"{textbook_name(name)}: {moved} cyl{extra}, {last * 1e3:.0f} ms",
                       recs, start, run.routes))
        rows.append((name, [r.cylinder for r in recs], moved, last))
    queue = " ".join(str(r.cylinder) for r in raw_queue(panels[0][1]))
    caption = (
        "Head movement in cylinders as textbooks count it (every cylinder crossed). SCAN and "
        "C-SCAN go on to the edge (199, marked |) before they turn or return; the returns of "
        "C-SCAN and C-LOOK (dashed) serve nothing and are counted, since the arm travels "
        "them. The time is when each request was "
        "issued to the teaching drive (3,600 rpm, one request at a time); the drive is only "
        "sent requests, so its arm goes from 183 straight to the next request and SCAN and "
        "C-SCAN take the same time as LOOK and C-LOOK. ms: when the last request completed.")
    fig = draw_heads_grid(panels, cylinders=200,
                          suptitle=f"The head's path: head at {start}, queue {queue} "
                                   f"(examples/teaching-queue.toml)",
                          caption=caption, labels=labels)
    save(fig, path)
    return rows


def raw_queue(records) -> list:
    """The records in the order they arrived (time, then sector as the trace lists
    them), without the first (the head's own request): the textbook's queue."""
    return records[1:] if len(records) > 1 else []


def main(argv=None) -> int:
    """``python -m blksim.experiments.heads [FIGURE]``: draw the teaching figure."""
    parser = argparse.ArgumentParser(
        prog="python -m blksim.experiments.heads",
        description="Draw the teaching figure of docs/teaching.md: the head's path on "
                    "examples/teaching-queue.toml under FCFS, SSTF, SCAN, LOOK, C-SCAN, "
                    "C-LOOK, SPTF and deadline, side by side, and print each run's "
                    "cylinders in order, head movement (cylinders) and last completion (ms).")
    parser.add_argument("out", nargs="?", default="teaching-heads.png", metavar="FIGURE",
                        help="the figure to write: .png or .svg (default teaching-heads.png)")
    parser.add_argument("--config", metavar="CONFIG.toml",
                        help="another configuration to run (default "
                             "examples/teaching-queue.toml)")
    parser.add_argument("--labels", choices=("on", "off", "auto"), default="auto",
                        help="cylinder numbers beside the points: all, none, or as many as "
                             "fit without overlapping (default auto)")
    args = parser.parse_args(argv)
    from blksim.experiments.figures import figure_format
    try:
        figure_format(args.out)
    except ValueError as exc:
        parser.error(f"FIGURE: {exc}")
    for name, cyls, moved, last in teaching_figure(args.out, args.config, args.labels):
        print(f"{name:9} {' '.join(map(str, cyls))}  {moved} cylinders  "
              f"{last * 1e3:.2f} ms")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":   # python -m blksim.experiments.heads docs/img/teaching-heads.png
    import sys

    sys.exit(main())
