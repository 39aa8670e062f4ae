"""``blksim experiment run|list|show`` and ``blksim sweep``: grids of runs over a
configuration (`blksim.experiments.sweep`), one at a time, on a process pool or on a Dask
cluster, resumable, reported as summary.csv, report.md and plots."""

from __future__ import annotations

#: The most points --robustness takes (each is schedulers x seeds runs per variant).
MAX_POINTS = 10_000


def _add_runner_options(p, default_out: str) -> None:
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="worker processes (default 1: one run at a time in this process); "
                        "with --dask local, the cluster's workers")
    p.add_argument("--dask", metavar="local|tcp://HOST:8786",
                   help="run on Dask distributed (pip install 'blksim[dask]'): a local "
                        "cluster of --jobs workers, or the scheduler at that address "
                        "(tcp://host:port or host:port)")
    p.add_argument("--seeds", type=int, metavar="K",
                   help="runs per point of the grid, seeds 1..K, 1 to 1000 (default: the "
                        "file's; 1 for sweep); they replace the configuration's run.seed")
    p.add_argument("--out", metavar="DIR", default=default_out,
                   help=f"where runs, summary.csv, report.md and plots go (default "
                        f"{default_out}); finished runs there are not run again, unless "
                        f"their configuration or a file they read has changed")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def add_experiment_commands(subparsers) -> None:
    """Add ``experiment`` and ``sweep`` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "experiment", help="run, list or show the shipped experiments and your own",
        description="Experiments are configurations with an [experiment] table saying what "
                    "varies: schedulers x variants x tunables x seeds (docs/experiments.md).")
    sub = p.add_subparsers(dest="experiment_command", metavar="ACTION", required=True)
    pr = sub.add_parser(
        "run", help="run every run of an experiment's grid and write its report",
        description="Run every run of the grid not already finished under --out (each is "
                    "kept there as it finishes, named by the hash of its configuration, so a "
                    "sweep that is stopped resumes and a finished one reruns nothing), then "
                    "write summary.csv (a row per run), report.md (means and 95 %% intervals "
                    "over seeds) and plots.")
    pr.add_argument("experiment", metavar="NAME|FILE",
                    help="a shipped experiment's name (blksim experiment list) or a file")
    pr.add_argument("--scale", type=float, default=1.0, metavar="F",
                    help="run a proportional part: the values the experiment lists under "
                         "scale (durations, load sizes) times F (default 1)")
    pr.add_argument("--robustness", type=int, metavar="N",
                    help="also run N points of a Latin hypercube over the experiment's open "
                         "choices ([experiment.open]), every scheduler at each, and report "
                         "how often each ranking holds, the range of each ratio and which "
                         "choice moves it most (N x schedulers x seeds runs per variant)")
    pr.add_argument("--robustness-seed", type=int, default=1, metavar="S",
                    help="the sample's seed (default 1): the same seed, the same points")
    pr.add_argument("--robustness-variants", choices=("all", "first"), default="all",
                    help="sample every variant (and combination of the grid's tunables; "
                         "default) or the first only")
    _add_runner_options(pr, "experiment-NAME")
    sub.add_parser("list", help="the shipped experiments",
                   description="List the shipped experiments with their descriptions.")
    ps = sub.add_parser("show", help="an experiment's grid and configuration",
                        description="Print an experiment's file: its grid and the "
                                    "configuration its runs start from.")
    ps.add_argument("experiment", metavar="NAME|FILE")

    pw = subparsers.add_parser(
        "sweep", help="an ad-hoc grid over a configuration: schedulers x --grid x seeds",
        description="Run CONFIG.toml over a grid: every scheduler of --schedulers times every "
                    "combination of the --grid values, --seeds times, and report it as "
                    "`experiment run` does.")
    pw.add_argument("config", metavar="CONFIG.toml")
    pw.add_argument("--grid", action="append", default=[], metavar="PATH=V1,V2,...",
                    help="a --set path and its values, e.g. queue/nr_requests=32,128,512 "
                         "(repeatable; each path and each value once; not run/seed or "
                         "queue/scheduler: use --seeds and --schedulers)")
    pw.add_argument("--schedulers", default="noop,deadline", metavar="A,B,...",
                    help="the schedulers (default noop,deadline)")
    pw.add_argument("--devices", metavar="sdb,...",
                    help="the disks whose scheduler varies (default: every disk)")
    pw.add_argument("--figure", default="", metavar="PATH",
                    help="the headline figure: a dotted path to a number in results.json, "
                         "e.g. totals.read.iops or apps.oltp.tps (checked at the first run)")
    _add_runner_options(pw, "sweep-NAME")


def _grid(items: list) -> list:
    from blksim.cli.common import UserError
    from blksim.sim.config import parse_override_value
    out = []
    for item in items:
        if "=" not in item:
            raise UserError(f"--grid {item!r}: expected PATH=V1,V2,..., e.g. "
                            f"queue/nr_requests=32,128")
        path, values = item.split("=", 1)
        vals = [parse_override_value(v.strip()) for v in values.split(",") if v.strip()]
        if not vals:
            raise UserError(f"--grid {item!r}: no values")
        out.append((path.strip(), vals))
    return out


def _check_runner_options(args) -> None:
    """The runner's options, checked before any file is read or written."""
    from blksim.cli.common import UserError
    if args.jobs < 1:
        raise UserError(f"--jobs: expected at least 1, found {args.jobs}")
    if args.seeds is not None and not 1 <= args.seeds <= 1000:
        raise UserError(f"--seeds: expected 1 to 1000, found {args.seeds}")
    if getattr(args, "robustness", None) is not None and \
            not 2 <= args.robustness <= MAX_POINTS:
        raise UserError(f"--robustness: expected 2 to {MAX_POINTS} points, found "
                        f"{args.robustness}")
    if getattr(args, "robustness_seed", 1) < 0:
        raise UserError(f"--robustness-seed: expected 0 or more, found "
                        f"{args.robustness_seed}")
    if args.dask is not None:
        from blksim.experiments.sweep.runner import check_dask_address, dask_available
        if not dask_available():
            raise UserError("--dask needs Dask distributed, an optional extra: "
                            "pip install 'blksim[dask]'")
        check_dask_address(args.dask)


def _run(exp, args, scale: float) -> int:
    from blksim.experiments.sweep import run_experiment
    from blksim.cli.common import UserError
    if not scale > 0 or scale == float("inf"):
        raise UserError(f"--scale: expected a positive number, found {scale}")
    # the name as a folder's: no separator or NUL makes it a path elsewhere
    folder = "".join("_" if c in "/\\\0" else c for c in exp.name).strip(".") or "unnamed"
    out = args.out.replace("NAME", folder)
    tasks = exp.tasks(seeds=args.seeds, scale=scale)
    sample = None
    if getattr(args, "robustness", None) is not None:
        from blksim.experiments.sweep.robustness import plan
        sample = plan(exp, args.robustness, args.robustness_seed, args.seeds, scale,
                      args.robustness_variants == "first")
    from blksim.experiments.sweep.definition import printable
    if not args.quiet:
        print(f"{exp.name}: {len(tasks)} runs into {printable(out)}"
              + (f", and {len(sample.tasks)} of a robustness sample of {sample.n} points"
                 if sample is not None else "")
              + (f" on Dask ({args.dask})" if args.dask else
                 f" on {args.jobs} processes" if args.jobs > 1 else ""))
    paths = run_experiment(exp, out, jobs=args.jobs, dask=args.dask, seeds=args.seeds,
                           scale=scale, progress=not args.quiet, tasks=tasks,
                           robustness=sample)
    if paths.get("comparisons"):      # report.md's "Differences", for the reader here
        print("\n".join(line[2:] if line.startswith("- ") else line
                        for line in paths["comparisons"]))
    if sample is not None:
        from blksim.experiments.sweep.robustness import terminal_lines
        print("\n".join(terminal_lines(paths["robustness"])))
    print(f"{paths['runs']} runs ({paths['cached']} already finished, {paths['ran']} run now); "
          f"wrote {printable(paths['summary'])} and {printable(paths['report'])}"
          + (f" (robustness: {printable(paths['robustness_json'])})"
             if sample is not None else ""))
    return 0


def handle(args) -> int:
    """Run ``blksim experiment ...`` or ``blksim sweep``."""
    from blksim.experiments import sweep
    from blksim.experiments.sweep.definition import load_experiment, sweep_experiment
    if args.command == "sweep" or args.experiment_command == "run":
        _check_runner_options(args)
    if args.command == "sweep":
        from blksim.api import scheduler_names
        devices = args.devices.split(",") if args.devices else None
        exp = sweep_experiment(args.config, _grid(args.grid),
                               scheduler_names(args.schedulers, "--schedulers"), devices,
                               args.seeds or 1, args.figure)
        args.seeds = args.seeds or 1
        return _run(exp, args, 1.0)
    if args.experiment_command == "list":
        from blksim.common.config_values import ConfigError
        for name, path in sweep.shipped().items():
            try:
                exp = load_experiment(path)
            except ConfigError as exc:      # one that needs what this build lacks
                print(f"{name:20} (cannot run with this build: {exc})")
                continue
            first = exp.description.strip().split("\n")[0]
            print(f"{name:20} {first}")
        return 0
    path = sweep.find(args.experiment)
    if args.experiment_command == "show":
        exp = load_experiment(path)
        print(f"# {exp.name}: {len(exp.tasks(seeds=1))} runs per seed "
              f"({len(exp.schedulers)} schedulers x {len(exp.variants)} variants"
              + "".join(f" x {len(v)} {p}" for p, v in exp.grid) + f"), {exp.seeds} seed(s)")
        print(f"# {path}")
        print(open(path, encoding="utf-8").read(), end="")
        return 0
    return _run(load_experiment(path), args, args.scale)

