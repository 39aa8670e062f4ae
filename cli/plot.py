"""``blksim plot``: figures of a simulated run.

``blksim plot heads CONFIG.toml --out FIG.png`` runs the configuration and draws
the cylinder of every request the device starts against the time it was issued,
points joined in order: the head's path, the classic figure of a disk-scheduling
algorithm (experiments/heads.py; docs/teaching.md). ``blksim plot cdf|latency|timeline
RUN_DIR... --out FIG.png`` draws figures of finished runs, and ``blksim plot flash RUN_DIR``
a flash disk's free blocks and utilisation (experiments/run_plots.py).

`add_plot_commands` adds the subcommands to the ``blksim`` parser; `handle` runs it.
Errors in the user's input raise the exceptions ``blksim`` reports as one line.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_plot_commands(subparsers) -> None:
    """Add ``plot heads``, ``plot cdf``, ``plot latency``, ``plot timeline`` and ``plot
    flash`` to an argparse subparsers object."""
    from blksim.cli.common import SET_HELP

    p = subparsers.add_parser(
        "plot", help="draw figures: the head's path (heads), and of finished runs: latency "
                     "CDFs (cdf), latency and throughput over time (latency, timeline), a "
                     "flash disk's free blocks and utilisation (flash)",
        description="Draw a figure of a simulated run.")
    sub = p.add_subparsers(dest="plot_command", metavar="FIGURE", required=True)
    ph = sub.add_parser(
        "heads", help="the head's cylinder against time for every request the device starts",
        description="Run CONFIG.toml and draw the cylinder of every request the device "
                    "starts against the time it was issued (ms), points joined in order: the "
                    "path of the disk head, as textbooks draw FCFS, SSTF, SCAN, C-SCAN, LOOK, "
                    "C-LOOK and SPTF. Also prints the requests' cylinders in order and the "
                    "head movement.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ph.add_argument("config", metavar="CONFIG.toml", nargs="?",
                    help="a blksim configuration, or an fio job file (*.fio); or none, with "
                         "--requests")
    ph.add_argument("--requests", metavar="C1,C2,...",
                    help="the textbook exercise without a file: these cylinders (or sectors "
                         "with --sectors given) queued together behind the head's current "
                         "request at --start, on the teaching drive (--drive), one request "
                         "at a time, no merging")
    ph.add_argument("--sectors", choices=("spread", "zero", "given"), default="spread",
                    nargs="?", const="given",
                    help="with --requests, which sector of its cylinder each request reads: "
                         "spread (the default) a sector chosen at random (seeded by --seed, "
                         "default 1), so rotational waits differ as on a real disk; zero the "
                         "cylinder's first sector, so every seek plus rotation is a whole "
                         "number of revolutions (docs/teaching.md says why that table looks "
                         "odd); given (or --sectors alone) the numbers are sectors, not "
                         "cylinders")
    ph.add_argument("--labels", choices=("on", "off", "auto"), default="auto",
                    help="cylinder numbers beside the points: on (all), off, or auto (the "
                         "default: as many as fit without overlapping one another)")
    ph.add_argument("--start", type=int, default=0, metavar="CYLINDER",
                    help="with --requests: the head's cylinder at the start (default 0)")
    ph.add_argument("--drive", default="teaching", metavar="NAME",
                    help="with --requests: the drive (default teaching: 200 cylinders of 100 "
                         "sectors, no overheads, an ideal bus)")
    ph.add_argument("--out", required=True, metavar="FILE.png",
                    help="the figure to write (format from the extension: png, svg for "
                         "slides (text kept as text), pdf)")
    ph.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help=SET_HELP)
    ph.add_argument("--scheduler", metavar="NAME",
                    help="the elevator to run, a name `blksim schedulers` lists or a plug-in "
                         "(module:Class); overrides queue.scheduler, and queue/iosched "
                         "tunables it does not have are dropped, as blksim compare does")
    ph.add_argument("--first", type=int, metavar="N",
                    help="stop after the first N requests (default: the whole run)")
    ph.add_argument("--csv", metavar="FILE",
                    help="also write the requests as CSV: time_ms, cylinder, sector, sectors, "
                         "dir, pid, done_ms")
    ph.add_argument("--title", help="figure title (default: the algorithm and what it "
                                    "served, e.g. 'SSTF, head at 53: requests 98, 183, ...')")
    ph.add_argument("--show-start", action="store_true",
                    help="also draw where the drive's head was before the run, at time 0")
    ph.add_argument("--seed", type=int, help="seed of every random choice (overrides run.seed)")
    ph.add_argument("--duration", metavar="TIME",
                    help="simulated time limit, e.g. 2s (overrides run.duration)")


    for kind, what in (("cdf", "Q2C latency CDFs of several runs on one figure (log axis)"),
                       ("latency", "mean Q2C latency over time"),
                       ("timeline", "throughput (MB/s) over time")):
        pk = sub.add_parser(
            kind, help=f"{what}, from run folders",
            description=f"Draw {what} of the runs in RUN_DIR folders (written by blksim run "
                        f"--out DIR, or compare's per-scheduler folders), a line per run, "
                        f"or per process with --per-process. Every bio's times come from "
                        f"the folder's requests.csv (--per-request)"
                        + ("; without it, the CDF is drawn through results.json's "
                           "percentiles." if kind == "cdf" else "."))
        pk.add_argument("runs", nargs="+", metavar="RUN_DIR")
        pk.add_argument("--out", required=True, metavar="FILE.png",
                        help="the figure to write (format from the extension: png, svg, pdf)")
        pk.add_argument("--per-process", action="store_true",
                        help="a line per process instead of one per run")
        pk.add_argument("--labels", metavar="A,B,...",
                        help="labels of the runs (default: folder and scheduler)")
        pk.add_argument("--title", help="figure title")
        if kind != "cdf":
            pk.add_argument("--bin", default="1s", metavar="TIME",
                            help="the width of a time bin (default 1s)")
    pf = sub.add_parser(
        "flash", help="a flash disk's free blocks over time and utilisation per die and "
                      "channel, from one run folder",
        description="Draw one run's flash disk (RUN_DIR written by blksim run --out DIR): "
                    "its free blocks over time with garbage collection shaded, and the busy "
                    "share of each die and channel over the run, from results.json.")
    pf.add_argument("run", metavar="RUN_DIR")
    pf.add_argument("--out", required=True, metavar="FILE.png",
                    help="the figure to write (format from the extension: png, svg, pdf)")
    pf.add_argument("--disk", metavar="NAME",
                    help="the flash disk to draw (default: the run's first flash disk)")
    pf.add_argument("--label", help="the run's label (default: folder and scheduler)")
    pf.add_argument("--title", help="figure title")


def exercise_config(args) -> dict:
    """The configuration of ``plot heads --requests``: the drive with its head at
    ``--start``, a request there being served (the head's current one), and the listed
    ones queued together behind it; one request at a time, no merging."""
    import tempfile
    from blksim.cli.common import UserError
    try:
        numbers = [int(x) for x in args.requests.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--requests: expected whole numbers separated by commas, found "
                        f"{args.requests!r}") from None
    if not numbers or any(n < 0 for n in numbers):
        raise UserError(f"--requests: expected cylinders (or sectors) >= 0, found "
                        f"{args.requests!r}")
    from blksim.disk_models.base import DeviceError
    from blksim.disk_models.drive import make_drive
    from blksim.disk_models.presets import load_drive
    from blksim.schedulers.textbook import DeviceGeometry
    try:
        drive = make_drive(load_drive(args.drive))
    except DeviceError as exc:
        raise UserError(f"--drive: {exc}") from None
    geometry = DeviceGeometry(drive)

    def first_sector(cylinder: int) -> int:
        lo, hi = 0, drive.capacity - 1            # the first sector on that cylinder
        while lo < hi:
            mid = (lo + hi) // 2
            if geometry.cylinder_of(mid) < cylinder:
                lo = mid + 1
            else:
                hi = mid
        return lo
    given = args.sectors == "given"
    limit = drive.capacity if given else geometry.cylinders
    for n in numbers + [args.start]:
        if n >= limit:
            raise UserError(f"--requests/--start: {n} is beyond the drive's "
                            f"{'sectors' if given else 'cylinders'} (0..{limit - 1})")
    if given:
        sectors = numbers
    elif args.sectors == "zero":
        sectors = [first_sector(c) for c in numbers]
    else:   # spread: a seeded sector anywhere on the cylinder
        import random
        rng = random.Random(1 if args.seed is None else args.seed)
        sectors = []
        for c in numbers:
            lo = first_sector(c)
            hi = first_sector(c + 1) if c + 1 < geometry.cylinders else drive.capacity
            sectors.append(rng.randrange(lo, hi))
    lines = [f"0.000000 0 {first_sector(args.start)} 1 1"]
    lines += [f"0.001000 0 {min(s, drive.capacity - 1)} 1 1" for s in sectors]
    fd, path = tempfile.mkstemp(prefix="blksim-exercise-", suffix=".trace")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    return {"run": {"name": "exercise"},
            "device": {"drive": args.drive, "queue_depth": 1, "start_cylinder": args.start},
            "queue": {"scheduler": args.scheduler or "fcfs", "nomerges": 2,
                      "iosched": {"start_cylinder": args.start}},
            "trace": [{"path": path, "format": "disksim", "time_unit": "ms"}]}


def handle(args, out=None) -> int:
    """Run the ``plot`` subcommand in ``args``; return the exit status."""
    out = out or sys.stdout
    if args.plot_command == "heads":
        return _heads(args, out)
    return _run_plot(args, out)


def _run_plot(args, out) -> int:
    """``plot cdf|latency|timeline|flash``: figures of finished runs."""
    from blksim.experiments import run_plots
    from blksim.experiments.figures import figure_format
    from blksim.cli.common import UserError
    try:
        figure_format(args.out)
    except ValueError as exc:
        raise UserError(f"--out {exc}") from None
    if args.plot_command == "flash":
        try:
            run_plots.plot_flash(run_plots.load_run(args.run, args.label), args.out,
                                 args.disk, args.title or "")
        except run_plots.PlotError as exc:
            raise UserError(str(exc)) from None
        out.write(f"wrote {args.out}\n")
        return 0
    labels = args.labels.split(",") if args.labels else [None] * len(args.runs)
    if len(labels) != len(args.runs):
        raise UserError(f"--labels: {len(labels)} labels for {len(args.runs)} runs")
    try:
        runs = [run_plots.load_run(d, lab) for d, lab in zip(args.runs, labels)]
        if args.plot_command == "cdf":
            run_plots.plot_cdf(runs, args.out, args.per_process, args.title or "")
        else:
            from blksim.cli.common import positive_time
            bin_s = positive_time(args.bin, "--bin")
            draw = run_plots.plot_latency if args.plot_command == "latency" else \
                run_plots.plot_timeline
            draw(runs, args.out, bin_s, args.per_process, args.title or "")
    except run_plots.PlotError as exc:
        raise UserError(str(exc)) from None
    out.write(f"wrote {args.out}\n")
    return 0


def _heads(args, out) -> int:
    import os

    from blksim.experiments.heads import (head_movement, movement_caption, plot_heads,
                                          record_heads, textbook_name, write_csv)
    from blksim.sim import config as cfgmod
    from blksim.cli.common import UserError, load, prepare, print_warnings

    if args.first is not None and args.first < 1:
        raise UserError(f"--first: expected a whole number >= 1, found {args.first}")
    for flag, path in (("--out", args.out), ("--csv", args.csv)):
        if path is None:
            continue
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise UserError(f"{flag} {path}: no such directory {d}")
    from blksim.experiments.figures import figure_format
    try:
        figure_format(args.out)           # before the simulation, not after it
    except ValueError as exc:
        raise UserError(f"--out {exc}") from None
    if args.scheduler is not None:
        from blksim.schedulers import get_scheduler
        try:
            get_scheduler(args.scheduler)
        except ValueError as exc:
            raise UserError(f"--scheduler: {exc}") from None
    if (args.config is None) == (args.requests is None):
        raise UserError("give a configuration, or --requests C1,C2,... (not both)")
    if args.requests is not None:
        raw, source = load(args, raw=exercise_config(args), source="--requests")
    else:
        raw, source = load(args)
    lenient = args.scheduler is not None
    if lenient:
        # as `blksim compare` does: tunables of other schedulers in the file are dropped,
        # but each must belong to some scheduler
        from blksim.schedulers import SCHEDULERS
        cfgmod.check_iosched_known(raw, [*SCHEDULERS, args.scheduler], source)
    cfg = prepare(raw, source, args.scheduler, lenient)
    print_warnings(cfg)
    try:
        run = record_heads(cfg, first=args.first)
    finally:
        if args.requests is not None:           # the exercise's own trace file
            os.remove(raw["trace"][0]["path"])
    recs = run.records
    if not recs:
        raise UserError(f"{source}: the run issued no request to the device; nothing to plot")
    name = textbook_name(cfg.scheduler)
    if args.title:
        title = args.title
    elif args.requests is not None:
        what = "sectors" if args.sectors == "given" else "requests"
        title = (f"{name}, head at cylinder {args.start}: {what} "
                 f"{', '.join(x.strip() for x in args.requests.split(',') if x.strip())}")
    else:
        title = f"{name}: the head's path, {os.path.basename(source)}"
    shown_start = run.start_cylinder if args.show_start else None
    caption = movement_caption(run, shown_start)
    if args.requests is not None and args.sectors != "given":
        caption += ("\nEach request reads one sector "
                    + ("at a random place on its cylinder (--sectors spread, seed "
                       f"{1 if args.seed is None else args.seed}), so rotational waits differ."
                       if args.sectors == "spread" else
                       "at the start of its cylinder (--sectors zero): seek plus rotation "
                       "is then a whole number of revolutions."))
    plot_heads(recs, args.out, title, cylinders=run.cylinders, start_cylinder=shown_start,
               routes=run.routes, labels=args.labels, caption=caption)
    if args.csv:
        write_csv(recs, args.csv)
    shown = recs if len(recs) <= 40 else recs[:40]
    more = "" if len(recs) <= 40 else f" ... ({len(recs) - 40} more)"
    out.write(f"{cfg.scheduler}: {len(recs)} requests"
              f"{' (stopped at --first)' if run.stopped_early else ''}\n")
    out.write("cylinders in order: " + " ".join(str(r.cylinder) for r in shown) + more + "\n")
    start = run.start_cylinder if run.start_cylinder is not None else recs[0].cylinder
    moved = head_movement(recs, start)
    out.write(f"head movement: {moved} cylinders, from the head's start at cylinder {start} "
              f"through every request in the order served\n")
    counted = getattr(run.elevator, "head_movement", None)
    if counted is not None:
        elevator_start = run.elevator.params["start_cylinder"]
        if elevator_start != start:
            out.write(f"the elevator counted {counted} cylinders from its own start_cylinder "
                      f"{elevator_start}; set [device] start_cylinder = {elevator_start} to "
                      f"start the drive's head there too\n")
        elif counted != moved:
            out.write(f"the elevator's textbook count is {counted} cylinders: it includes the "
                      f"sweep to the disk's edge (and C-SCAN's return), which the drive's "
                      f"arm, sent only to requests, does not make\n")
    done = [r.done for r in recs if r.done >= 0]
    if done:
        out.write(f"last completion: {max(done) * 1e3:.2f} ms\n")
    out.write(f"wrote {args.out}" + (f" and {args.csv}" if args.csv else "") + "\n")
    return 0
