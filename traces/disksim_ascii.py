"""DiskSim's ASCII trace format: read it as a stream, and write it.

One request per line, five whitespace-separated fields, as DiskSim 4.0 reads
them (``sscanf("%lf %d %d %d %x")``)::

    arrival_time  devno  blkno  size  flags

``arrival_time`` is in milliseconds for DiskSim (``time_unit="ms"``); MQSim's
traces use nanoseconds (``time_unit="ns"``). ``blkno`` and ``size`` are
512-byte sectors. ``flags`` is hexadecimal; bit 0 set means a read, clear a
write. Lines must be in non-decreasing time order. Blank lines are skipped;
DiskSim itself has no comment syntax, so neither does this reader.

The reader works a chunk of lines at a time with C-level ``map``/``zip``
passes and checks each chunk as a whole; only a chunk that fails a check is
parsed again line by line, to name the bad line and field.
"""

from __future__ import annotations

import math
from itertools import islice, repeat
from operator import and_, le, not_, truediv
from typing import Iterable

# The record type and the error now live in traces.records; re-exported here.
from blksim.traces.records import (TraceError, TraceRecord, TraceStream, plain_float, plain_int,
                                   read_chunks, write_lines)

# File time unit -> units per second.
TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}

# Writing: file-unit formats that keep 1 ns of resolution.
_TIME_FORMATS = {"s": "%.9f", "ms": "%.6f", "us": "%.3f", "ns": "%.0f"}

# ~570 lines of a typical trace: fewer records than the cyclic collector's first
# threshold (700 net allocations), so a batch, all alive until replayed, does not set
# off collections that walk it (at 64 KiB they cost ~1,500 instructions a record).
_CHUNK_BYTES = 1 << 14
_INF = math.inf


__all__ = ["TraceError", "TraceRecord", "TIME_UNITS", "read_disksim_ascii",
           "write_disksim_ascii"]

_new_record = tuple.__new__

# The canonical spellings of small numbers and their values: devno, size and flags
# columns repeat a few short tokens, and a dict look-up costs a fraction of int().
# A token not found here (a large number, "08", "+8", bad text) is parsed by int()
# itself, so values and errors are exactly int()'s.
_DECIMAL = {b"%d" % i: i for i in range(4096)}
_HEX = {b"%x" % i: i for i in range(256)}


def _ints(tokens, table: dict, base: int = 10) -> list:
    """``[int(t, base) for t in tokens]``, looking common tokens up in ``table``."""
    values = list(map(table.get, tokens))
    if None in values:
        values = list(map(int, tokens, repeat(base)))
    return values


def read_disksim_ascii(path, time_unit: str = "ms", skip_bad_lines: bool = False) -> TraceStream:
    """Yield the requests of a DiskSim ASCII trace one at a time.

    ``time_unit`` is the unit of the first column (``"ms"`` for DiskSim,
    ``"ns"`` for MQSim, also ``"us"`` and ``"s"``); record times are seconds.
    A ``.gz`` file is decompressed on the fly, and so is any gzip, bzip2 or xz
    file recognised by its first bytes. A malformed line raises ``TraceError``
    with ``"{path}:{lineno}: {field} expected {what}, found {text!r}"``; with
    ``skip_bad_lines`` it is counted in the returned stream's ``skipped`` instead.
    """
    stream = TraceStream(path, "disksim", skip_bad_lines)
    return stream.start(_read(path, time_unit, stream))


def _read(path, time_unit: str, out: TraceStream):
    per_second = _units_per_second(time_unit)
    last = 0.0          # previous arrival time, in file units
    for lineno, lines in read_chunks(path, _CHUNK_BYTES, gzip_by_name=True):
        parsed = _parse_chunk(lines, per_second, last)
        if parsed is None:
            parsed = _parse_lines(lines, lineno, per_second, last, path, time_unit, out)
        records, last = parsed
        yield records


def write_disksim_ascii(path, records: Iterable, time_unit: str = "ms") -> int:
    """Write ``records`` (objects with ``time`` in seconds, ``devno``, ``sector``,
    ``nr_sectors``, ``write``) as a DiskSim ASCII trace; return how many.

    Times are written with 1 ns resolution. The file appears only once complete
    (written to a temporary file beside it, then renamed); a ``.gz``, ``.bz2`` or
    ``.xz`` name compresses.
    """
    per_second = _units_per_second(time_unit)
    line_format = _TIME_FORMATS[time_unit] + "\t%d\t%d\t%d\t%d\n"
    return write_lines(path, (line_format % (rec.time * per_second, rec.devno, rec.sector,
                                             rec.nr_sectors, 0 if rec.write else 1)
                              for rec in records))


def _units_per_second(time_unit: str) -> float:
    try:
        return TIME_UNITS[time_unit]
    except KeyError:
        raise ValueError(f"time_unit: expected one of {', '.join(TIME_UNITS)}, "
                         f"found {time_unit!r}") from None


def _parse_chunk(lines, per_second: float, last: float):
    """Fast path: (the chunk's records, its last arrival time in file units),
    or None when any check fails."""
    data = b"".join(lines)
    # int() and float() also take "1_000" and "+8": such a chunk goes line by line
    if b"\0" in data or b"_" in data or b"+" in data:
        return None
    if not data.endswith(b"\n"):
        data += b"\n"
    # One flat token list instead of a list per line: every line end becomes a
    # marker token, so "exactly 5 fields on every line" is "every 6th token is
    # a marker" (the data holds no NUL of its own).
    tokens = data.replace(b"\n", b" \0 ").split()
    n = len(lines)
    if len(tokens) != 6 * n or tokens[5::6].count(b"\0") != n:
        return None
    try:
        times = list(map(float, tokens[0::6]))
        devnos = _ints(tokens[1::6], _DECIMAL)
        sectors = list(map(int, tokens[2::6]))
        sizes = _ints(tokens[3::6], _DECIMAL)
        flags = _ints(tokens[4::6], _HEX, 16)
    except ValueError:
        return None
    if not (last <= times[0] and times[-1] < _INF and all(map(le, times, islice(times, 1, None)))
            and min(devnos) >= 0 and min(sectors) >= 0 and min(sizes) >= 1 and min(flags) >= 0):
        return None
    writes = map(not_, map(and_, flags, repeat(1)))
    seconds = map(truediv, times, repeat(per_second))
    return list(map(_new_record, repeat(TraceRecord),
                    zip(seconds, devnos, sectors, sizes, writes, repeat(None), repeat(None),
                        repeat(None)))), times[-1]


_FIELDS = (
    ("arrival_time", None),
    ("devno", "a non-negative decimal integer"),
    ("blkno", "a non-negative decimal integer (512-byte sectors)"),
    ("size", "a positive decimal integer (512-byte sectors)"),
    ("flags", "a non-negative hexadecimal integer (bit 0: 1 = read, 0 = write)"),
)


def _parse_lines(lines, lineno: int, per_second: float, last: float, path, time_unit: str,
                 out: TraceStream):
    """Slow path: like _parse_chunk, but line by line, skipping blank lines and
    raising TraceError at the first bad one (counting it instead when the stream
    skips bad lines)."""
    records = []
    for offset, line in enumerate(lines, lineno + 1):
        fields = line.split()
        if not fields:
            continue
        bad = _check_line(fields, line, last, time_unit)
        if bad is not None:
            out.bad(offset, *bad)
            continue
        t = float(fields[0])
        last = t
        records.append(_new_record(TraceRecord, (t / per_second, int(fields[1]), int(fields[2]),
                                                 int(fields[3]), not int(fields[4], 16) & 1,
                                                 None, None, None)))
    return records, last


def _check_line(fields, line: bytes, last: float, time_unit: str):
    """None for a good line, else (field, expected, found)."""
    if len(fields) != 5:
        return "line", "5 fields: arrival_time devno blkno size flags", line.rstrip(b"\r\n")
    t = plain_float(fields[0])
    if not (0.0 <= t < _INF):
        return "arrival_time", f"a non-negative number of {time_unit}", fields[0]
    if t < last:
        return ("arrival_time", f"a time no earlier than the previous line's ({last!r} "
                f"{time_unit})", fields[0])
    for (name, what), text in zip(islice(_FIELDS, 1, None), islice(fields, 1, None)):
        # the flags are hexadecimal as DiskSim reads them (sscanf "%x": "abc" is
        # 0xabc, a write); the other fields decimal digits only
        if name == "flags":
            value = int(text, 16) if _is_hex(text) else -1
        else:
            value = plain_int(text)
        if value < (1 if name == "size" else 0):
            return name, what, text
    return None


_HEX_DIGITS = b"0123456789abcdefABCDEF"


def _is_hex(text: bytes) -> bool:
    """Hexadecimal digits, after an optional 0x (as sscanf's "%x" reads them)."""
    if text[:2] in (b"0x", b"0X"):
        text = text[2:]
    return bool(text) and not text.translate(None, _HEX_DIGITS)
