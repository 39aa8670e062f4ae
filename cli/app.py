"""The ``blksim`` command line: run, compare, demo.

Errors in the user's input (configuration, tunables, traces, drive files) end
the program with a one-line message and exit status 2, never a traceback, and
leave no partial output files behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from blksim.cli.common import (SET_HELP, UserError, load, prepare, print_warnings,
                                   user_errors)
from blksim.cli.docs import docs_epilog

EXIT_USAGE = 2

DESCRIPTION = """\
blksim simulates Linux block-layer I/O schedulers (2.6.18's noop, anticipatory,
deadline and cfq, and the textbook algorithms) on mechanical SCSI drive models,
driven by fio-style jobs, fio job files or recorded traces (blktrace, blkparse,
MSR, SPC, Alibaba, Tencent, fio iologs, DiskSim), and reports what fio, iostat
and btt would: IOPS, MB/s (10^6 bytes/s) and latency (ms) as mean / p50 / p95 /
p99 / max, split into Q2D (time in the block layer and scheduler) and D2C (time
in the device), plus one line per process."""


def _volume(text: str):
    return int(text) if text.isdigit() else text


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help=SET_HELP)
    p.add_argument("--seed", type=int, help="seed of every random choice (overrides run.seed)")
    p.add_argument("--duration", metavar="TIME",
                   help="simulated time limit, e.g. 30s or 500ms (overrides run.duration)")
    p.add_argument("--out", metavar="DIR",
                   help="write results.json and config.resolved.toml to DIR "
                        "(compare: one subdirectory per scheduler)")
    p.add_argument("--per-request", action="store_true",
                   help="with --out, also write requests.csv: every measured bio's Q, D and C "
                        "times (s)")
    p.add_argument("--iostat", metavar="INTERVAL",
                   help="with --out, also write iostat.csv: iostat -x's figures of every "
                        "block device every INTERVAL of simulated time (e.g. 1s, 500ms; at "
                        "least 1ms, and at most 1,000,000 rows over the run); a run with "
                        "files also writes vmstat.csv (dirty and writeback data)")
    p.add_argument("--explain", action="store_true",
                   help="attribute every bio's time to its causes (waiting for a request, "
                        "plugged, in the elevator, held for another process, in the device, "
                        "in service): a table per device after the run's, results.json "
                        "'explain', and in compare a paragraph on why the schedulers differ "
                        "(docs/explain.md)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar (it is shown only on a terminal anyway)")
    w = p.add_argument_group("recording the simulated run")
    w.add_argument("--blktrace", metavar="DIR",
                   help="write the run as blktrace binary files DIR/sda.blktrace.0 (Q, G, I, "
                        "M/F, D, C events with pids and process names) for blkparse and btt "
                        "(compare: DIR/<scheduler>/)")
    w.add_argument("--iolog", metavar="FILE",
                   help="write every bio's submission as an fio iolog v3 (replay on real "
                        "hardware with fio --read_iolog=FILE --replay_redirect=/dev/DEV; "
                        "compare: FILE with .<scheduler> before its extension)")
    w.add_argument("--iolog-filename", metavar="NAME", default=None,
                   help="device name written in the iolog (default /dev/sdX)")
    r = p.add_argument_group("trace replay (applied to every [[trace]])")
    r.add_argument("--mode", choices=("open", "closed"),
                   help="open: at the recorded times; closed: per process, each request waits "
                        "for the previous one plus the recorded think time")
    r.add_argument("--speed", type=float, metavar="X", help="time scale: 2 = twice as fast")
    r.add_argument("--max-gap", metavar="TIME", help="cap gaps between requests, e.g. 100ms")
    r.add_argument("--trace-start", metavar="TIME", help="replay from this trace time")
    r.add_argument("--trace-end", metavar="TIME", help="replay up to this trace time")
    r.add_argument("--max-requests", type=int, metavar="N", help="replay at most N requests")
    r.add_argument("--device", metavar="MAJ,MIN[=NAME]",
                   help="replay only this traced device, e.g. 8,16=sdb")
    r.add_argument("--volume", type=_volume, metavar="KEY",
                   help="replay only this volume / disk (CSV traces: 3, hm_1, ...)")
    r.add_argument("--remap", choices=("none", "wrap", "scale"),
                   help="requests beyond the simulated drive: none (error), wrap or scale")
    r.add_argument("--trace-format", metavar="FORMAT", help="trace format (default: detect)")
    r.add_argument("--events", choices=("Q", "D"),
                   help="blktrace: replay queued bios (Q) or issued requests (D)")
    r.add_argument("--align", choices=("start", "clock"),
                   help="several traces: start (default: each trace's time 0 is the run's) "
                        "or clock (keep the recorded clocks: the earliest trace starts the "
                        "run, the others keep their distance; Alibaba, Tencent and MSR "
                        "timestamps are wall-clock times, other formats' count from the "
                        "trace's start)")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with its subcommands. Given the ``command`` about to run, the
    help texts of the others may skip what is costly to compute (the trace formats)."""
    parser = argparse.ArgumentParser(
        prog="blksim", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=docs_epilog())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p_run = sub.add_parser("run", help="run one simulation",
                           description="Run one simulation of CONFIG.toml and print its table.")
    p_run.add_argument("config", metavar="CONFIG.toml",
                       help="a blksim configuration, or an fio job file (*.fio) to run with "
                            "default settings")
    p_run.add_argument("--scheduler", metavar="NAME",
                       help="run under this scheduler (every disk's queue/scheduler); "
                            "tunables of the configuration's own scheduler that it lacks are "
                            "left out, with a note, as compare leaves them out. A plug-in "
                            "(module:Class or an installed name) that hands the block layer "
                            "something that cannot mean anything (a request dispatched twice, "
                            "a wake-up time of NaN) stops the run with one line naming it, "
                            "the hook and the value (docs/plugins.md)")
    _add_run_options(p_run)

    p_cmp = sub.add_parser(
        "compare", help="run one configuration under several schedulers",
        description="Run CONFIG.toml under each scheduler with the same seed and print one "
                    "table with a column per scheduler. queue/iosched tunables apply to the "
                    "schedulers that have them.")
    p_cmp.add_argument("config", metavar="CONFIG.toml",
                       help="a blksim configuration, or an fio job file (*.fio)")
    p_cmp.add_argument("--schedulers", required=True, metavar="A,B,...",
                       help="comma-separated scheduler names, e.g. noop,deadline (`blksim "
                            "schedulers` lists them; a plug-in is named by its entry point or "
                            "as module:Class, see docs/plugins.md: the block layer checks what "
                            "it hands back and stops the run with one line when it is wrong)")
    p_cmp.add_argument("--devices", metavar="sdb,sdc,...",
                       help="the disks whose scheduler varies, comma-separated, /dev/ "
                            "optional (default: every disk); the others keep the scheduler "
                            "the configuration gives them")
    _add_run_options(p_cmp)

    p_demo = sub.add_parser(
        "demo", help="the flagship comparison on the built-in configuration",
        description="Compare noop and deadline on a 15,000 rpm SCSI drive (Cheetah 15K.4 class) "
                    "under random sync readers with think time beside a stream of async "
                    "writes: a table per scheduler, then both side by side. "
                    "--show-config prints the built-in configuration.")
    p_demo.add_argument("--schedulers", default="noop,deadline", metavar="A,B,...",
                        help="comma-separated scheduler names (default noop,deadline), as for "
                             "compare")
    p_demo.add_argument("--show-config", action="store_true",
                        help="print the built-in configuration and exit")
    _add_run_options(p_demo)

    p_rep = sub.add_parser(
        "replay", help="replay traces on a drive: one scheduler's table, or a comparison",
        description="Replay TRACE files (any format blksim reads, told from the content) on "
                    "DRIVE without a configuration file: with one scheduler, its table; with "
                    "several, the side-by-side comparison. --show-config prints the "
                    "equivalent configuration (to edit and run with blksim run).")
    p_rep.add_argument("traces", nargs="+", metavar="TRACE",
                       help="trace files (several: each is a [[trace]], pids 900, 901, ...)")
    p_rep.add_argument("--drive", required=True, metavar="NAME",
                       help="a drive preset (blksim drive list), a flash drive preset "
                            "(samsung980pro1tb, ...: docs/flash.md) or a drive TOML file")
    p_rep.add_argument("--schedulers", default=None, metavar="A,B,...",
                       help="one scheduler (its table) or several (a comparison; default "
                            "deadline, or mq-deadline with --cgroups)")
    p_rep.add_argument("--show-config", action="store_true",
                       help="print the equivalent configuration and exit")
    p_rep.add_argument("--cgroups", metavar="G1,G2,...",
                       help="one cgroup v2 group per trace, in order (a path such as "
                            "tenants/a, or / for the root): each trace's processes are in "
                            "its group, which is made with its parents; implies kernel "
                            "6.6 unless --set run/kernel=... gives another multi-queue line "
                            "(docs/cgroups.md)")
    p_rep.add_argument("--offsets", metavar="O1,O2,...",
                       help="one offset per trace, in order: where the trace's sector 0 lands "
                            "on the drive, bytes or with units (0,100g,200g)")
    _add_run_options(p_rep)

    sub.add_parser("schedulers", help="list the schedulers and their tunables",
                   description="List every scheduler with its tunables, units and defaults.")

    from blksim.cli.docs import add_docs_commands
    from blksim.cli.drive import add_drive_commands
    from blksim.cli.experiment import add_experiment_commands
    from blksim.cli.plot import add_plot_commands
    from blksim.cli.trace import add_trace_commands
    from blksim.cli.validate import add_validate_command
    add_drive_commands(sub)
    add_trace_commands(sub, list_formats=command in (None, "trace"))
    add_plot_commands(sub)
    add_validate_command(sub)
    add_experiment_commands(sub)
    add_docs_commands(sub)
    return parser


# ---------------------------------------------------------------------- helpers

def _scheduler_list(text: str) -> list[str]:
    from blksim.api import scheduler_names
    return scheduler_names(text, "--schedulers")


#: requests.csv's columns: the bio, its process (pid and name), the device whose sectors it
#: counts and the request that carried it there, direction, place, size, sync flag, and
#: its Q, D and C times (s).
REQUESTS_CSV_HEADER = ("bio,pid,process,device,request,dir,sector,sectors,sync,q_s,d_s,c_s,"
                       "drive_queue_ms,overhead_ms,seek_ms,rotation_ms,transfer_ms,bus_ms,"
                       "cache_hit")


def breakdown_fields(bd) -> str:
    """requests.csv's breakdown columns of a bio's request (empty where the device keeps
    none: a RAID controller, a service-law device)."""
    if bd is None:
        return ",,,,,,"
    return (f"{bd['queue'] * 1e3:.6f},{bd['overhead'] * 1e3:.6f},{bd['seek'] * 1e3:.6f},"
            f"{bd['rotation'] * 1e3:.6f},{bd['transfer'] * 1e3:.6f},{bd['bus'] * 1e3:.6f},"
            f"{1 if bd['cache_hit'] else 0}")


def csv_field(text: str) -> str:
    """``text`` as one CSV field (quoted when it holds a comma or a quote)."""
    if any(c in text for c in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


class _Outputs:
    """Files of one run, written to temporary names and renamed only on success.

    A run owns the files blksim writes in its output folder (`RUN_FILES`): one of them
    that this run did not write (requests.csv of an earlier run with --per-request) is
    removed when this run's files are renamed into place, so the folder never holds one
    run's figures beside another run's records. Other files in the folder are left alone.
    """

    RUN_FILES = ("results.json", "config.resolved.toml", "requests.csv", "iostat.csv",
                 "vmstat.csv", "cgroups.csv")

    def __init__(self, out_dir: str | None, per_request: bool,
                 iostat: float | None = None) -> None:
        self.out_dir = out_dir
        self.per_request = per_request and out_dir is not None
        self.iostat = iostat if out_dir is not None else None
        self.pending = []

    def iostat_csv(self, horizon: float | None = None):
        """(path, interval, the run's duration or None) of iostat.csv for the run to
        write, or None."""
        if self.iostat is None:
            return None
        return self._path("iostat.csv"), self.iostat, horizon

    def _path(self, name: str) -> str:
        """Where file ``name`` goes, the output folder made if need be."""
        from blksim.traces.records import make_directory
        make_directory(self.out_dir)
        return os.path.join(self.out_dir, name)

    def _pending(self, name: str, buffering: int = -1):
        from blksim.traces.records import PendingFile
        pending = PendingFile(self._path(name), binary=False, buffering=buffering)
        self.pending.append(pending)
        return pending

    def open_csv(self, measure_from: float = 0.0):
        """Start requests.csv (as a temporary file); return the per-bio hook or None.
        Bios queued before ``measure_from`` (the run's ramp_time) are left out, as the
        figures leave them out."""
        if not self.per_request:
            return None
        write = self._pending("requests.csv", buffering=1 << 20).file.write
        write(REQUESTS_CSV_HEADER + "\n")
        names: dict = {}
        namer = [str]

        def hook(bio):
            if bio.t_queue < measure_from:
                return
            name = names.get(bio.pid)
            if name is None:
                name = names[bio.pid] = csv_field(namer[0](bio.pid))
            write(f"{bio.id},{bio.pid},{name},{bio.dev},{bio.rq},"
                  f"{'W' if bio.write else 'R'},{bio.sector},"
                  f"{bio.nr_sectors},{1 if bio.sync else 0},{bio.t_queue:.9f},"
                  f"{bio.t_dispatch:.9f},{bio.t_complete:.9f},{breakdown_fields(bio.bd)}\n")
        hook.bind = lambda sim: namer.__setitem__(0, sim.process_name)
        return hook

    def commit(self, results: dict, resolved_toml: str) -> None:
        """Write results.json and config.resolved.toml and rename every file into place."""
        if self.out_dir is None:
            return
        from blksim.sim.results import results_json
        for name, text in (("results.json", results_json(results)),
                           ("config.resolved.toml", resolved_toml)):
            self._pending(name).file.write(text)
        written = {os.path.basename(p.path) for p in self.pending}
        if self.iostat is not None:
            written.add("iostat.csv")          # put in place by its recorder
            if "writeback" in results:
                written.add("vmstat.csv")      # a run with files writes it too
            if "cgroups" in results:
                written.add("cgroups.csv")     # so does a run with cgroups
        for pending in self.pending:
            pending.commit()
        self.pending = []
        for name in self.RUN_FILES:
            stale = os.path.join(self.out_dir, name)
            if name not in written and os.path.isfile(stale):
                os.remove(stale)

    def discard(self) -> None:
        """Remove temporary files after a failure."""
        for pending in self.pending:
            pending.discard()
        self.pending = []


def _simulate(cfg, out_dir: str | None, per_request: bool, quiet: bool, label: str,
              blktrace: str | None = None, iolog: str | None = None,
              iolog_filename: str | None = None, iostat: float | None = None,
              explain: bool = False) -> dict:
    """Run ``cfg`` through the API's `simulate` (the one run path) and write its files."""
    from blksim.api import simulate
    from blksim.cli.progress import Progress
    import tomli_w

    outputs = _Outputs(out_dir, per_request, iostat)
    try:
        hook = outputs.open_csv(cfg.ramp_time)
        progress = Progress(label, cfg.duration) if Progress.wanted(quiet) else None
        results = simulate(cfg, per_request=False, complete_hooks=(hook,) if hook else (),
                           progress=progress, blktrace=blktrace, iolog=iolog,
                           iolog_filename=iolog_filename,
                           iostat=outputs.iostat_csv(cfg.duration),
                           breakdowns=hook is not None, explain=explain).figures
        outputs.commit(results, tomli_w.dumps(results["config"]))
        from blksim.sim.results import after_run_warnings
        for line in after_run_warnings(results):
            print(f"blksim: warning: {line}", file=sys.stderr)
        return results
    except BaseException:
        outputs.discard()
        raise


def _iostat_interval(args) -> float | None:
    """``--iostat INTERVAL`` in seconds (it needs ``--out``), or None."""
    if args.iostat is None:
        return None
    if not args.out:
        raise UserError("--iostat needs --out DIR (it writes DIR/iostat.csv)")
    from blksim.cli.common import positive_time
    from blksim.sim.iostat_log import MIN_INTERVAL, interval_text
    seconds = positive_time(args.iostat, "--iostat", "interval")
    if seconds < MIN_INTERVAL:
        raise UserError(f"--iostat {args.iostat}: the interval must be at least "
                        f"{interval_text(MIN_INTERVAL)} (iostat itself takes whole seconds)")
    return seconds


def cmd_run(args) -> int:
    """``blksim run``."""
    raw, source = load(args)
    return _run_raw(args, raw, source)


def _compare(args, raw: dict, source: str, each_table: bool = False) -> int:
    if args.per_request and not args.out:
        raise UserError("--per-request needs --out DIR")
    iostat = _iostat_interval(args)
    from blksim.api import resolve_comparison
    from blksim.cli.tables import compare_table, run_table
    from blksim.api import device_names
    names = _scheduler_list(args.schedulers)
    devices = device_names(getattr(args, "devices", None), "--devices")
    cfgs = resolve_comparison(raw, source, names, devices)
    seen = set()
    for cfg in cfgs:
        for line in cfg.warnings:
            if line not in seen:
                seen.add(line)
                print(f"blksim: warning: {line}", file=sys.stderr)
    all_results = []
    for name, cfg in zip(names, cfgs):
        # a plugin named module:Class gets module.Class: no ':' in a file name
        label = name.replace(":", ".")
        out = os.path.join(args.out, label) if args.out else None
        blktrace = os.path.join(args.blktrace, label) if args.blktrace else None
        iolog = None
        if args.iolog:
            root, ext = os.path.splitext(args.iolog)
            iolog = f"{root}.{label}{ext}"
        results = _simulate(cfg, out, args.per_request, args.quiet, name,
                            blktrace, iolog, args.iolog_filename, iostat,
                            getattr(args, "explain", False))
        if each_table:
            sys.stdout.write(run_table(results) + "\n")
        all_results.append(results)
    if each_table:
        sys.stdout.write("Side by side:\n\n")
    sys.stdout.write(compare_table(all_results))
    return 0


def cmd_compare(args) -> int:
    """``blksim compare``."""
    raw, source = load(args)
    return _compare(args, raw, source)


def replay_config(args) -> dict:
    """The configuration ``blksim replay`` runs: the drive, and a [[trace]] per file."""
    if args.schedulers is None:       # --cgroups runs a multi-queue kernel
        args.schedulers = "mq-deadline" if getattr(args, "cgroups", None) else "deadline"
    for path in args.traces:
        if not os.path.exists(path):
            raise UserError(f"{path}: no such trace file")
    first = os.path.splitext(os.path.basename(args.traces[0].rstrip("/")))[0]
    raw = {"run": {"name": first}, "device": {"drive": args.drive},
           "queue": {"scheduler": _scheduler_list(args.schedulers)[0]},
           "trace": [{"path": os.path.abspath(p)} for p in args.traces]}
    if os.path.isfile(args.drive):
        raw["device"]["drive"] = os.path.abspath(args.drive)
    else:
        from blksim.disk_models.flash_presets import list_flash_presets
        if args.drive in list_flash_presets():
            raw["device"] = {"flash": args.drive}
    _per_trace(args, raw)
    return raw


def _per_trace(args, raw: dict) -> None:
    """``--cgroups`` and ``--offsets``: a value per trace, into each [[trace]]."""
    n = len(args.traces)

    def values(flag: str, text: str) -> list:
        items = [v.strip() for v in text.split(",")]
        if len(items) != n:
            raise UserError(f"{flag} {text!r}: {len(items)} value"
                            f"{'' if len(items) == 1 else 's'} for {n} trace"
                            f"{'' if n == 1 else 's'}; give one per trace, in order")
        return items

    if getattr(args, "offsets", None):
        for table, off in zip(raw["trace"], values("--offsets", args.offsets)):
            table["offset"] = int(off) if off.isdigit() else off
    if getattr(args, "cgroups", None):
        groups = {}
        for table, path in zip(raw["trace"], values("--cgroups", args.cgroups)):
            path = path.strip("/")
            if not path:
                continue                  # the root
            table["cgroup"] = path
            table["name"] = path          # the trace is known by its group in the results
            parts = path.split("/")
            for k in range(1, len(parts) + 1):
                groups.setdefault("/".join(parts[:k]), {})
        raw["cgroups"] = groups
        raw["run"]["kernel"] = "6.6"


def cmd_replay(args) -> int:
    """``blksim replay``."""
    import tomli_w
    raw, source = load(args, raw=replay_config(args), source="replay")
    if args.show_config:
        sys.stdout.write(tomli_w.dumps(raw))
        return 0
    if len(_scheduler_list(args.schedulers)) > 1:
        return _compare(args, raw, source)
    args.config = source
    return _run_raw(args, raw, source)


def _run_raw(args, raw: dict, source: str) -> int:
    from blksim.cli.tables import run_table
    if args.per_request and not args.out:
        raise UserError("--per-request needs --out DIR")
    iostat = _iostat_interval(args)
    scheduler = getattr(args, "scheduler", None)
    if scheduler is not None:
        from blksim.api import scheduler_names
        names = scheduler_names(scheduler, "--scheduler")
        if len(names) > 1:
            raise UserError(f"--scheduler {scheduler!r}: run takes one scheduler (blksim "
                            f"compare --schedulers {scheduler} runs each)")
        scheduler = names[0]
    # a scheduler chosen on the command line drops the configured one's tunables
    from blksim.sim.config import iosched_leniency
    cfg = prepare(raw, source, scheduler, iosched_leniency(scheduler, args.set))
    print_warnings(cfg)
    results = _simulate(cfg, args.out, args.per_request, args.quiet, cfg.scheduler,
                        args.blktrace, args.iolog, args.iolog_filename, iostat,
                        getattr(args, "explain", False))
    sys.stdout.write(run_table(results))
    return 0


def cmd_demo(args) -> int:
    """``blksim demo``: the flagship comparison."""
    from blksim.api import builtin_config_text
    text = builtin_config_text()
    if args.show_config:
        sys.stdout.write(text)
        return 0
    raw, source = load(args, raw_text=text)
    return _compare(args, raw, source, each_table=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``blksim`` console script."""
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    from blksim.cli.docs import cmd_docs, cmd_examples
    from blksim.cli.drive import handle as handle_drive
    from blksim.cli.experiment import handle as handle_experiment
    from blksim.cli.plot import handle as handle_plot
    from blksim.cli.schedulers import cmd_schedulers
    from blksim.cli.trace import handle as handle_trace
    from blksim.cli.validate import handle_validate
    handlers = {"run": cmd_run, "compare": cmd_compare, "demo": cmd_demo, "replay": cmd_replay,
                "schedulers": cmd_schedulers, "validate": handle_validate,
                "drive": handle_drive, "trace": handle_trace, "plot": handle_plot,
                "docs": cmd_docs, "examples": cmd_examples,
                "experiment": handle_experiment, "sweep": handle_experiment}
    previous = _stop_cleanly_on(signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
    try:
        return handlers[args.command](args)
    except user_errors() as exc:
        print(f"blksim: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"blksim: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        # whatever was being written when the signal struck, tracked or not yet
        from blksim.traces.records import PendingFile
        PendingFile.discard_unfinished()
        signum = getattr(exc, "signum", signal.SIGINT)
        what = "interrupted" if signum == signal.SIGINT else \
            f"stopped by {signal.Signals(signum).name}"
        print(f"blksim: {what}; no output was left half-written", file=sys.stderr)
        return 128 + signum
    finally:
        from blksim.sim import stopping
        stopping.clear()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_cleanly_on(*signals) -> dict:
    """Stop the run cleanly on these signals (`blksim.sim.stopping`), where nothing
    else handles them yet: SIGINT where Python's own handler is in place, the others
    where the default (terminate at once) is. Returns the handlers replaced."""
    from blksim.sim.stopping import request_stop
    previous = {}
    for sig in signals:
        if sig is None:
            continue
        current = signal.getsignal(sig)
        if current == signal.SIG_DFL or (sig == signal.SIGINT
                                          and current is signal.default_int_handler):
            previous[sig] = signal.signal(sig, request_stop)
    return previous


if __name__ == "__main__":
    sys.exit(main())
