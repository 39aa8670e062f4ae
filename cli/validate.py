"""``blksim validate``: the command line of the validation study
(`blksim.experiments.validation`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def add_validate_command(subparsers):
    """Add ``blksim validate`` to the CLI's subparsers; return its parser."""
    p = subparsers.add_parser(
        "validate", help="replay a DiskSim validation trace and score the drive model",
        description="Replay a DiskSim 'validate' trace (requests with the response times "
                    "measured on a real drive; one request outstanding, each issued its delay "
                    "after the previous completion) on DRIVE with queue depth 1 and FCFS. "
                    "Prints simulated and measured mean and standard deviation (ms), the mean "
                    "error and the demerit (RMS horizontal distance between the two response-"
                    "time CDFs, ms), from the raw times and binned as DiskSim bins them, each "
                    "beside DiskSim 4.0's own on the same ruler (its binned one is the figure "
                    "it publishes). --all runs every drive of the validation set, names each "
                    "drive's request class that contributes most to its demerit, and prints "
                    "the mean demerits over the drives. The ten drives DiskSim 4.0 was "
                    "validated on ship with "
                    "blksim (with CMU's licence); --data DIR or $BLKSIM_VALIDATION_DIR "
                    "names a folder of your own measurements in the same layout (traces/ "
                    "with DRIVE.trace files). See `blksim docs validation`.")
    p.add_argument("drive", nargs="?", metavar="DRIVE", help="preset name or drive TOML file")
    p.add_argument("trace", nargs="?", metavar="TRACE",
                   help="validate trace file, or its stem in the validation folder "
                        "(e.g. cheetah9LP)")
    p.add_argument("--data", metavar="DIR",
                   help="a folder of validation data of your own (DiskSim's layout: "
                        "DIR/traces/STEM.trace) instead of the shipped set")
    p.add_argument("--all", action="store_true", help="every drive of the validation set")
    p.add_argument("--plot", metavar="FILE.png", help="draw both CDFs to FILE")
    p.add_argument("--plot-dir", metavar="DIR", help="with --all: one DRIVE.png per drive in DIR")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the platter's starting angle (default 0)")
    return p


def handle_validate(args) -> int:
    """Run ``blksim validate`` for parsed ``args``; print the table; return the exit status."""
    from blksim.experiments.validation.report import all_table, plot_cdfs, result_table
    from blksim.experiments.validation.study import ValidationError, validate_all, validate_drive

    if args.all:
        if args.drive or args.trace or args.plot:
            raise ValidationError("validate --all takes no DRIVE, TRACE or --plot "
                                  "(use --plot-dir DIR)")
        results, skipped = validate_all(seed=args.seed, data=args.data)
        if not results:
            raise ValidationError("no drive of the validation set has a preset yet: "
                                  + ", ".join(stem for stem, _ in skipped))
        if args.plot_dir:
            from blksim.traces.records import make_directory
            make_directory(args.plot_dir)
            for r in results:
                plot_cdfs(r, Path(args.plot_dir) / f"{r.drive}.png")
        sys.stdout.write(all_table(results, skipped))
        return 0
    if not args.drive or not args.trace:
        raise ValidationError("validate needs DRIVE and TRACE, or --all")
    if args.plot_dir:
        raise ValidationError("--plot-dir goes with --all; use --plot FILE.png for one drive")
    # one drive's report has no class column: skip labelling the requests
    result = validate_drive(args.drive, args.trace, seed=args.seed, data=args.data,
                            classes=False)
    if args.plot:
        plot_cdfs(result, Path(args.plot))
    sys.stdout.write(result_table(result, seed=args.seed))
    return 0
