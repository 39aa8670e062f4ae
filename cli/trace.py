"""``blksim trace stats FILE`` and ``blksim trace convert IN OUT --to FORMAT``.

Wire-up in cli.py: ``add_trace_commands(sub)`` in ``build_parser`` and
``"trace": handle`` in ``main``'s handlers. Errors are ``TraceError``
(a ValueError, already among the user errors) and OSError.
"""

from __future__ import annotations

import argparse
import json
import sys

STATS_HELP = """\
Read a trace once, in constant memory, and print what it holds: requests and
the read/write mix, bytes moved, duration, request sizes (mean, p50, p95, max,
the most common), interarrival times (mean, coefficient of variation, p50,
p99), sequentiality (requests starting where the previous request of the same
process on the same device ended), footprint (distinct MiB touched; estimated
within about 1 % beyond 262,144 MiB), devices and processes."""

CONVERT_HELP = """\
Stream the records of IN into OUT in another format. Writers: disksim (DiskSim
ASCII, --out-time-unit ms by default), fio (iolog version 3, us), blkparse
(default text, one Q line per request), msr, spc, alibaba (CSV). A .gz, .bz2
or .xz OUT is compressed. OUT appears only once complete."""


def _add_input_options(p: argparse.ArgumentParser, list_formats: bool) -> None:
    if list_formats:
        from blksim.traces.detect import formats
        names = ", ".join(formats())
    else:
        names = "see blksim trace stats --help"
    p.add_argument("--format", metavar="FORMAT",
                   help="the input's format (default: told from its content): " + names)
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip malformed lines and report how many, instead of stopping at "
                        "the first")
    p.add_argument("--events", choices=("Q", "D"),
                   help="blkparse: replay the queued (Q, default) or issued (D) requests")
    p.add_argument("--time-unit", choices=("s", "ms", "us", "ns"),
                   help="disksim: unit of the time column (default ms; ns for MQSim "
                        "traces); fio version 3: unit of the timestamps (default us)")
    p.add_argument("--block-size", type=int, metavar="BYTES",
                   help="spc: bytes per LBA (default 512)")


def _writer_names(list_formats: bool) -> str:
    if not list_formats:
        return "see blksim trace convert --help"
    from blksim.traces.detect import writers
    return ", ".join(writers())


def add_trace_commands(subparsers, list_formats: bool = True) -> None:
    """Add ``trace stats`` and ``trace convert`` to the ``blksim`` subcommands.

    ``list_formats`` False leaves the names of the trace formats out of the help texts
    (listing them imports every reader), for a command line that runs another command.
    """
    p_trace = subparsers.add_parser(
        "trace", help="inspect and convert traces",
        description="Inspect (stats) and convert (convert) block I/O traces: blkparse text, "
                    "MSR Cambridge, UMass/SPC, Alibaba, Tencent CBS, fio iologs, DiskSim; "
                    "list the formats (formats).")
    sub = p_trace.add_subparsers(dest="trace_command", metavar="ACTION")
    sub.required = True

    sub.add_parser("formats", help="the trace formats blksim reads and writes",
                   description="List every registered trace format: its name (for --format, "
                               "--to and a [[trace]]'s format), whether it is read, written "
                               "and told from the content, and what it is.")
    p_stats = sub.add_parser("stats", help="print what a trace holds", description=STATS_HELP)
    p_stats.add_argument("file", metavar="FILE")
    _add_input_options(p_stats, list_formats)
    p_stats.add_argument("--json", action="store_true", help="print the figures as JSON")

    p_conv = sub.add_parser("convert", help="convert a trace to another format",
                            description=CONVERT_HELP)
    p_conv.add_argument("input", metavar="IN")
    p_conv.add_argument("output", metavar="OUT")
    p_conv.add_argument("--to", required=True, metavar="FORMAT",
                        help="output format: " + _writer_names(list_formats))
    _add_input_options(p_conv, list_formats)
    p_conv.add_argument("--out-time-unit", choices=("s", "ms", "us", "ns"),
                        help="disksim and fio writers: unit of the written times")


def _open(args, path: str):
    from blksim.traces.detect import detect_format, open_trace
    fmt = args.format or detect_format(path)
    records = open_trace(path, fmt, skip_bad_lines=args.skip_bad_lines, events=args.events,
                         time_unit=args.time_unit, block_size=args.block_size)
    return fmt, records


def _report_left_out(records) -> None:
    from blksim.traces.records import skipped_summary
    line = skipped_summary(records)
    if line:
        print(f"blksim: warning: {line}", file=sys.stderr)


def cmd_stats(args) -> int:
    """``blksim trace stats``."""
    from blksim.traces.stats import TraceStats, format_summary
    fmt, records = _open(args, args.file)
    stats = TraceStats().add_all(records)
    summary = stats.summary()
    summary["skipped_lines"] = getattr(records, "skipped", 0)
    summary["ignored_lines"] = getattr(records, "ignored", 0)
    if args.json:
        summary["file"] = args.file
        summary["format"] = fmt
        sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
        _report_left_out(records)
    else:
        text = format_summary(summary, args.file, fmt)
        if summary["ignored_lines"]:
            text += (f"{'left out':<15} {summary['ignored_lines']:,} well-formed lines without "
                     f"data (flushes, trims, zero-length requests)\n")
        if summary["skipped_lines"]:
            from blksim.traces.records import skipped_summary
            text += f"{'skipped':<15} {skipped_summary(records)[len('skipped '):]}\n"
        sys.stdout.write(text)
    return 0


def cmd_convert(args) -> int:
    """``blksim trace convert``."""
    from blksim.traces.detect import write_trace, writers
    if args.to not in writers():
        from blksim.traces.records import TraceError
        raise TraceError(f"--to: expected one of {', '.join(writers())}, found {args.to!r}")
    fmt, records = _open(args, args.input)
    options = {}
    if args.out_time_unit is not None:
        options["time_unit"] = args.out_time_unit
    count = write_trace(args.output, records, args.to, **options)
    print(f"wrote {count:,} requests from {args.input} ({fmt}) to {args.output} ({args.to})",
          file=sys.stderr)
    _report_left_out(records)
    return 0


def cmd_formats(args) -> int:
    """``blksim trace formats``."""
    from blksim.traces.detect import formats, writers
    read, written = formats(), writers()
    width = max(len(n) for n in set(read) | set(written)) + 2
    print(f"{'format':{width}}{'read':6}{'written':9}{'detected':10}description")
    for name in sorted(set(read) | set(written)):
        f = read.get(name)
        w = written.get(name)
        detected = f is not None and (f.sniff is not None or f.sniff_path is not None)
        text = (f.description if f is not None and f.description else
                w.description if w is not None else "")
        print(f"{name:{width}}{'yes' if f else 'no':6}{'yes' if w else 'no':9}"
              f"{'yes' if detected else 'no':10}{text}")
    return 0


def handle(args) -> int:
    """Run ``blksim trace ACTION``."""
    return {"stats": cmd_stats, "convert": cmd_convert,
            "formats": cmd_formats}[args.trace_command](args)
