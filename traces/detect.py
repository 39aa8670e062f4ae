"""Trace formats by name: detection from content, opening, and the writers.

``open_trace(path, format=None, **options)`` returns an iterator of
``TraceRecord`` for any known format; without ``format`` the format is told
from the file's first lines (``detect_format``). gzip, bzip2 and xz files are
recognised by their first bytes and decompressed on the fly, whatever their
name. ``write_trace(path, records, format, **options)`` writes one.

Formats (``FORMATS``): blkparse, msr, spc, alibaba, tencent, fio, disksim,
disksim-validate; more can be added with ``register_format`` (the blktrace
binary reader does so from ``traces.blktrace``). Writers (``WRITERS``):
disksim, fio (version 3), blkparse, msr, spc, alibaba; ``register_writer``
adds more.

Detection: every format's ``sniff`` looks at the first 64 KiB (decompressed);
exactly one must accept it. None accepting is an error listing the formats
tried; several is an error naming them, to be settled with ``--format``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import os
from dataclasses import dataclass, field
from typing import Callable, Iterator

from blksim.traces import blkparse_text, csv_formats, fio_iolog
from blksim.traces.disksim_ascii import _check_line, read_disksim_ascii, write_disksim_ascii
from blksim.traces.records import (TraceError, TraceRecord, TraceStream, new_record, read_chunks,
                            read_head, sniff_verdict)

HEAD_BYTES = 1 << 16

# Modules that register formats of their own when imported (if present).
PLUGINS = ("blksim.traces.blktrace",)


@dataclass(frozen=True)
class TraceFormat:
    """A readable format: ``reader(path, **options)`` returns an iterator of
    TraceRecord (ideally a TraceStream, whose ``skipped`` the CLI reports);
    ``sniff(head)`` says whether a file starting with ``head`` (up to 64 KiB,
    decompressed) is in this format; ``sniff_path(path)`` does the same for
    inputs that are not one regular file (a directory, a per-CPU file prefix)."""

    name: str
    reader: Callable
    sniff: Callable | None = None
    description: str = ""
    sniff_path: Callable | None = None
    options: tuple = field(default=())


@dataclass(frozen=True)
class TraceWriter:
    """A writable format: ``writer(path, records, **options) -> count``."""

    name: str
    writer: Callable
    description: str = ""
    options: tuple = field(default=())


FORMATS: dict[str, TraceFormat] = {}
WRITERS: dict[str, TraceWriter] = {}


def _option_names(func) -> tuple:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in params
                 if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is not p.empty)


def register_format(name: str, reader: Callable, sniff: Callable | None = None, *,
                    description: str = "", sniff_path: Callable | None = None) -> None:
    """Add (or replace) a readable format. ``reader(path, **options)``: its keyword
    parameters with defaults are the format's options (``skip_bad_lines`` among
    them if it supports it); ``sniff(head: bytes) -> bool`` (None: never detected,
    only chosen by name)."""
    FORMATS[name] = TraceFormat(name, reader, sniff, description, sniff_path,
                                _option_names(reader))


def register_writer(name: str, writer: Callable, *, description: str = "") -> None:
    """Add (or replace) a writer: ``writer(path, records, **options) -> count``,
    all-or-nothing (temporary file, then rename)."""
    WRITERS[name] = TraceWriter(name, writer, description, _option_names(writer))


_plugins_loaded = False


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for module in PLUGINS:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            importlib.import_module(module)


def formats() -> dict[str, TraceFormat]:
    """Every readable format, by name."""
    _load_plugins()
    return FORMATS


def writers() -> dict[str, TraceWriter]:
    """Every writer, by name."""
    _load_plugins()
    return WRITERS


# ------------------------------------------------------------------ detection


def _text_sniffer(func):
    def sniff(head: bytes) -> bool:
        return func(head, len(head) < HEAD_BYTES)
    sniff.__doc__ = func.__doc__
    return sniff


def _sniff_disksim(head: bytes, complete: bool) -> bool:
    lines = head.split(b"\n")
    if not complete:
        lines = lines[:-1]
    seen = bad = 0
    for line in lines[:50]:
        fields = line.split()
        if not fields:
            continue
        if _check_line(fields, line, -math.inf, "ms") is not None:
            bad += 1
        else:
            seen += 1
    return sniff_verdict(seen, bad)


def _sniff_validate(head: bytes, complete: bool) -> bool:
    from blksim.traces.disksim_validate import parse_line
    lines = head.split(b"\n")
    if not complete:
        lines = lines[:-1]
    seen = bad = 0
    for lineno, line in enumerate(lines[:50], 1):
        fields = line.split()
        if not fields:
            continue
        try:
            parse_line(fields, line, "", lineno)
        except TraceError:
            bad += 1
            continue
        seen += 1
    return sniff_verdict(seen, bad)


def detect_format(path) -> str:
    """The name of the format of ``path``, told from its content.

    Raises TraceError when no format reads it (naming the formats tried) or when
    several do (naming them: give the format explicitly).
    """
    known = formats()
    path_str = os.fspath(path)
    if not os.path.isfile(path_str):
        candidates = [f.name for f in known.values() if f.sniff_path and f.sniff_path(path_str)]
        if not candidates:
            if not os.path.exists(path_str):
                raise FileNotFoundError(2, "No such file or directory", path_str)
            raise TraceError(f"{path_str}: not a trace file (a directory or special file) and no "
                             f"format reads it as a capture")
    else:
        head = read_head(path_str, HEAD_BYTES)
        if not head.strip():
            raise TraceError(f"{path_str}: format expected a trace, found an empty file "
                             f"(give the format explicitly)")
        candidates = [f.name for f in known.values() if f.sniff and f.sniff(head)]
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise TraceError(f"{path_str}: format is ambiguous: the file reads as "
                         f"{' and '.join(candidates)}; choose one with --format")
    tried = ", ".join(f.name for f in known.values() if f.sniff or f.sniff_path)
    raise TraceError(f"{path_str}: format expected one of {tried}, found a file none of them "
                     f"reads (first line: {_first_line(head)!r}); choose one with --format")


def _first_line(head: bytes) -> str:
    for line in head.split(b"\n"):
        if line.strip():
            return line[:80].decode("ascii", "backslashreplace")
    return ""


# ------------------------------------------------------------------ opening

def open_trace(path, format: str | None = None, **options) -> Iterator[TraceRecord]:
    """An iterator of TraceRecord for the trace at ``path``.

    ``format``: a name from ``formats()``, or None to detect it. ``options``
    go to the format's reader (``skip_bad_lines``; blkparse ``events``; disksim
    and fio ``time_unit``; spc ``block_size``); options that are None are left
    out, and an option the format does not take is an error. The result is
    usually a ``TraceStream`` (``skipped``, ``ignored`` counts).
    """
    known = formats()
    if format is None:
        format = detect_format(path)
    fmt = known.get(format)
    if fmt is None:
        raise TraceError(f"format: expected one of {', '.join(known)}, found {format!r}")
    given = {k: v for k, v in options.items() if v is not None}
    if given.get("skip_bad_lines") is False:
        given.pop("skip_bad_lines")
    unknown = sorted(set(given) - set(fmt.options))
    if unknown:
        takes = ", ".join(fmt.options) or "none"
        raise TraceError(f"{unknown[0]}: not an option of trace format {fmt.name} "
                         f"(its options: {takes})")
    try:
        return fmt.reader(path, **given)
    except ValueError as exc:
        if isinstance(exc, TraceError):
            raise
        raise TraceError(str(exc)) from None


def write_trace(path, records, format: str, **options) -> int:
    """Write ``records`` to ``path`` in ``format`` (a name from ``writers()``);
    return how many. The file appears only once complete."""
    known = writers()
    w = known.get(format)
    if w is None:
        raise TraceError(f"--to: expected one of {', '.join(known)}, found {format!r}")
    given = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(given) - set(w.options))
    if unknown:
        raise TraceError(f"{unknown[0]}: not an option of the {w.name} writer "
                         f"(its options: {', '.join(w.options) or 'none'})")
    try:
        return w.writer(path, records, **given)
    except ValueError as exc:
        if isinstance(exc, TraceError):
            raise
        raise TraceError(str(exc)) from None


# ------------------------------------------------------------------ disksim validate

def read_disksim_validate_records(path, skip_bad_lines: bool = False) -> TraceStream:
    """A DiskSim validate trace as TraceRecords: devno 0, and each request arrives
    when the one before was measured to complete plus its delay (the closed loop
    the trace was recorded with, one request outstanding)."""
    out = TraceStream(path, "disksim-validate", skip_bad_lines)
    return out.start(_validate(path, out))


def _validate(path, out: TraceStream):
    from blksim.traces.disksim_validate import parse_line
    t = 0.0
    for before, lines in read_chunks(path):
        records = []
        for lineno, line in enumerate(lines, before + 1):
            fields = line.split()
            if not fields:
                continue
            try:
                v = parse_line(fields, line, path, lineno)
            except TraceError as exc:
                if not out.skip_bad_lines:
                    raise
                out.skipped += 1
                if out.first_skipped is None:
                    out.first_skipped = str(exc)
                continue
            records.append(new_record(TraceRecord, (t, 0, v.sector, v.nr_sectors, v.write,
                                                    None, None, None)))
            t += v.measured + v.delay
        yield records


# ------------------------------------------------------------------ the built-in formats

def _csv_reader(name):
    return getattr(csv_formats, f"read_{name}")


def _csv_sniffer(name):
    def sniff(head: bytes) -> bool:
        return csv_formats.sniff(name, head, len(head) < HEAD_BYTES)
    return sniff


register_format("blkparse", blkparse_text.read_blkparse, _text_sniffer(blkparse_text.sniff),
                description="blkparse default text output (Q or D events)")
for _name, _desc in (("msr", "MSR Cambridge / SNIA CSV"), ("spc", "UMass / SPC CSV"),
                     ("alibaba", "Alibaba block trace CSV"), ("tencent", "Tencent CBS CSV")):
    register_format(_name, _csv_reader(_name), _csv_sniffer(_name), description=_desc)
register_format("fio", fio_iolog.read_fio_iolog, _text_sniffer(fio_iolog.sniff),
                description="fio iolog, version 2 or 3")
register_format("disksim", read_disksim_ascii, _text_sniffer(_sniff_disksim),
                description="DiskSim ASCII (time_unit ms; ns for MQSim traces)")
register_format("disksim-validate", read_disksim_validate_records,
                _text_sniffer(_sniff_validate),
                description="DiskSim validate trace (measured closed loop)")

def write_disksim(path, records, time_unit: str = "ms") -> int:
    """DiskSim ASCII; device keys that are not non-negative integers are numbered
    0, 1, ... in order of appearance (DiskSim's devno is an integer)."""
    index = csv_formats._DevIndex()
    return write_disksim_ascii(path, (r if type(r.devno) is int and r.devno >= 0
                                      else r._replace(devno=index(r.devno)) for r in records),
                               time_unit=time_unit)


register_writer("disksim", write_disksim, description="DiskSim ASCII")
register_writer("fio", fio_iolog.write_fio_iolog, description="fio iolog version 3")
register_writer("blkparse", blkparse_text.write_blkparse,
                description="blkparse default text, one Q line per request")
register_writer("msr", csv_formats.write_msr, description="MSR Cambridge CSV")
register_writer("spc", csv_formats.write_spc, description="UMass / SPC CSV")
register_writer("alibaba", csv_formats.write_alibaba, description="Alibaba CSV")
