"""Public block traces in CSV: MSR Cambridge / SNIA, UMass / SPC, Alibaba, Tencent CBS.

=========  =================================================================  ==========
format     columns                                                            time unit
=========  =================================================================  ==========
msr        Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime        100 ns ticks
spc        ASU,LBA,Size,Opcode,Timestamp[,more]                               seconds
alibaba    device_id,opcode,offset,length,timestamp                           microseconds
tencent    Timestamp,Offset,Size,IOType,VolumeID                              seconds
=========  =================================================================  ==========

* msr: Timestamp is a Windows FILETIME (100 ns ticks since 1601); Type is
  ``Read`` or ``Write``; Offset and Size are bytes; ResponseTime (100 ns ticks)
  is checked but not used. devno is ``"{Hostname}_{DiskNumber}"`` (``"hm_1"``).
* spc: ASU (devno) and LBA are integers, LBA in blocks of ``block_size`` bytes
  (default 512, give the trace's own); Size is bytes; Opcode ``r``/``R``/``w``/``W``;
  Timestamp is seconds from the start of the trace. Extra columns are ignored.
* alibaba: device_id (devno); opcode ``R``/``W``; offset and length are bytes;
  timestamp is microseconds (Unix epoch).
* tencent: Timestamp is seconds (Unix epoch); Offset and Size are 512-byte
  sectors; IOType is ``0`` (read) or ``1`` (write); VolumeID is devno.

Times of msr, alibaba and tencent are rebased so the file's first record is at
0 s; spc keeps its times. The rebased formats' timestamps are wall-clock times, so their
stream's ``clock`` is ``"epoch"`` and its ``origin`` the first record's time in seconds
since 1970-01-01 UTC (MSR's FILETIME counts from 1601: 11,644,473,600 s earlier); spc's
is ``"relative"``. Times must not decrease from one line to the next.
Byte extents become sectors by rounding the start down and the end up. A line
with size 0 is well formed but moves no data: it is counted as ``ignored``.
A header line (the column names, any case) is allowed as the first line.

Each reader takes a chunk of lines at a time, splits it into one flat token
list and converts whole columns with ``map``; only a chunk that fails a check
is parsed again line by line, to name the bad line and field.
"""

from __future__ import annotations

import math
import re
from itertools import islice, repeat
from operator import add, and_, le, rshift, sub, truediv

from blksim.traces.records import (BadField, sniff_verdict, TraceRecord, TraceStream, byte_extent,
                            new_record, plain_float, plain_int, read_chunks, write_lines)

_INF = math.inf
_NONES = (None, None, None)


class _Format:
    """One CSV layout. ``fast(cols)`` converts whole columns (or returns None);
    ``line(fields)`` converts one line or raises BadField; both return
    ``(raw_times, devnos, sectors, nr_sectors, writes)`` (columns for fast, one
    value each for line); ``nr_sectors`` 0 marks a line without data."""

    name = ""
    columns: tuple = ()
    time_field = ""
    time_what = ""
    per_second = 1.0
    rebase = True
    epoch_offset = 0.0      # seconds from the format's clock zero to 1970-01-01 UTC
    extra_columns = False

    def __init__(self, **options) -> None:
        self.options = options

    def is_header(self, fields) -> bool:
        names = [f.strip().lower() for f in fields]
        return names[:len(self.columns)] == [c.lower().encode() for c in self.columns] and (
            self.extra_columns or len(names) == len(self.columns))

    def expected_line(self) -> str:
        more = ",..." if self.extra_columns else ""
        return f"{len(self.columns)} comma-separated fields: {','.join(self.columns)}{more}"


def _digits(*columns) -> bool:
    """Whether every token of every column is plain ASCII digits (C-speed check)."""
    for col in columns:
        joined = b"".join(col)
        if not (joined.isdigit() and joined.isascii()) or b"" in col:
            return False
    return True


def _cached(col, cache: dict, convert=int) -> list:
    """``convert`` of every token of ``col`` (checked beforehand), through ``cache``:
    sizes, devices and opcodes take few values, and a dict look-up costs a
    fraction of an int()."""
    got = list(map(cache.get, col))
    if None in got:
        got = list(map(convert, col))
        if len(cache) > 4096:
            cache.clear()
        cache.update(zip(col, got))
    return got


def _sectors_of_bytes(size: bytes) -> int:
    return (int(size) + 511) >> 9


def _byte_extents(offsets, size_tokens, sizes: list, nr_cache: dict):
    """(first sectors, numbers of sectors) of byte ``offsets`` and ``sizes``; when
    every offset is 512-byte aligned the number of sectors depends on the size
    alone (``nr_cache``: size token -> sectors)."""
    starts = list(map(rshift, offsets, repeat(9)))
    if any(map(and_, offsets, repeat(511))):
        ends = map(rshift, map(add, map(add, offsets, sizes), repeat(511)), repeat(9))
        return starts, list(map(sub, ends, starts))
    return starts, _cached(size_tokens, nr_cache, _sectors_of_bytes)


def _int(text, field: str, what: str, lowest: int = 0) -> int:
    value = plain_int(text)
    if value < lowest:
        raise BadField(field, what, text)
    return value


_COUNT = "a non-negative integer"
_WRITE = {b"Read": False, b"Write": True, b"R": False, b"W": True, b"r": False, b"w": True,
          b"0": False, b"1": True}      # the opcodes the fast paths take


# ------------------------------------------------------------------ MSR Cambridge

class _Msr(_Format):
    name = "msr"
    columns = ("Timestamp", "Hostname", "DiskNumber", "Type", "Offset", "Size", "ResponseTime")
    time_field = "Timestamp"
    time_what = "a non-negative integer of 100 ns ticks"
    per_second = 1e7
    epoch_offset = -11_644_473_600.0    # FILETIME counts from 1601-01-01 UTC

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self._keys: dict = {}
        self._sizes: dict = {}
        self._nrs: dict = {}

    def devkey(self, host: bytes, disk: int) -> str:
        key = self._keys.get((host, disk))
        if key is None:
            key = self._keys[(host, disk)] = f"{host.decode('utf-8', 'replace')}_{disk}"
        return key

    def fast(self, cols):
        ticks, hosts, disks, types, offsets, sizes, resp = cols
        n = len(ticks)
        if types.count(b"Read") + types.count(b"Write") != n or not _digits(
                ticks, disks, offsets, sizes, resp):
            return None
        ticks = list(map(int, ticks))
        offsets = list(map(int, offsets))
        size_tokens = sizes
        sizes = _cached(sizes, self._sizes)
        if 0 in sizes:
            return None
        if hosts.count(hosts[0]) == n and disks.count(disks[0]) == n:
            host = hosts[0].strip()
            if not host:
                return None
            devnos = repeat(self.devkey(host, int(disks[0])), n)
        else:
            hosts = list(map(bytes.strip, hosts))
            if b"" in hosts:
                return None
            devnos = list(map(self.devkey, hosts, map(int, disks)))
        starts, nrs = _byte_extents(offsets, size_tokens, sizes, self._nrs)
        return ticks, devnos, starts, nrs, map(_WRITE.get, types)

    def line(self, fields):
        if len(fields) != 7:
            raise BadField("line", self.expected_line(), b",".join(fields))
        tick = _int(fields[0], "Timestamp", self.time_what)
        host = fields[1].strip()
        if not host:
            raise BadField("Hostname", "a host name", fields[1])
        disk = _int(fields[2], "DiskNumber", _COUNT)
        kind = fields[3].strip().lower()
        if kind not in (b"read", b"write"):
            raise BadField("Type", "Read or Write", fields[3])
        offset = _int(fields[4], "Offset", "a non-negative integer of bytes")
        size = _int(fields[5], "Size", "a non-negative integer of bytes")
        _int(fields[6], "ResponseTime", "a non-negative integer of 100 ns ticks")
        sector, nr = byte_extent(offset, size) if size else (offset >> 9, 0)
        return tick, self.devkey(host, disk), sector, nr, kind == b"write"


# ------------------------------------------------------------------ UMass / SPC

class _Spc(_Format):
    name = "spc"
    columns = ("ASU", "LBA", "Size", "Opcode", "Timestamp")
    time_field = "Timestamp"
    time_what = "a non-negative number of seconds"
    rebase = False
    extra_columns = True

    def __init__(self, block_size: int = 512, **options) -> None:
        super().__init__(**options)
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size: expected a positive integer of bytes, "
                             f"found {block_size!r}")
        self.block_size = block_size
        self._ints: dict = {}
        self._nrs: dict = {}

    def fast(self, cols):
        asus, lbas, sizes, ops, stamps = cols
        n = len(asus)
        nw = ops.count(b"w") + ops.count(b"W")
        if nw + ops.count(b"r") + ops.count(b"R") != n or not _digits(asus, lbas, sizes):
            return None
        asus = _cached(asus, self._ints)
        lbas = list(map(int, lbas))
        size_tokens = sizes
        sizes = _cached(sizes, self._ints)
        if b"_" in b"".join(stamps):        # float() would take "1_0.5"
            return None
        times = list(map(float, stamps))
        if 0 in sizes or not times[0] >= 0.0:
            return None
        if self.block_size == 512:
            starts = lbas
            nrs = _cached(size_tokens, self._nrs, _sectors_of_bytes)
        else:
            extents = list(map(byte_extent, map(int.__mul__, lbas, repeat(self.block_size)),
                               sizes))
            starts = [e[0] for e in extents]
            nrs = [e[1] for e in extents]
        return times, asus, starts, nrs, map(_WRITE.get, ops)

    def line(self, fields):
        if len(fields) < 5:
            raise BadField("line", self.expected_line(), b",".join(fields))
        asu = _int(fields[0], "ASU", _COUNT)
        lba = _int(fields[1], "LBA", f"a non-negative integer of {self.block_size}-byte blocks")
        size = _int(fields[2], "Size", "a non-negative integer of bytes")
        op = fields[3].strip()
        if op not in (b"r", b"R", b"w", b"W"):
            raise BadField("Opcode", "r, R, w or W", fields[3])
        t = _float(fields[4], "Timestamp", self.time_what)
        offset = lba * self.block_size
        sector, nr = byte_extent(offset, size) if size else (offset >> 9, 0)
        return t, asu, sector, nr, op in _SPC_WRITE


_SPC_WRITE = frozenset((b"w", b"W"))


def _float(text, field: str, what: str) -> float:
    value = plain_float(text)
    if not 0.0 <= value < _INF:
        raise BadField(field, what, text)
    return value


# ------------------------------------------------------------------ Alibaba

class _Alibaba(_Format):
    name = "alibaba"
    columns = ("device_id", "opcode", "offset", "length", "timestamp")
    time_field = "timestamp"
    time_what = "a non-negative integer of microseconds"
    per_second = 1e6

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self._ints: dict = {}
        self._nrs: dict = {}

    def fast(self, cols):
        devs, ops, offsets, lengths, stamps = cols
        n = len(devs)
        if ops.count(b"R") + ops.count(b"W") != n or not _digits(devs, offsets, lengths,
                                                                    stamps):
            return None
        devs = _cached(devs, self._ints)
        offsets = list(map(int, offsets))
        length_tokens = lengths
        lengths = _cached(lengths, self._ints)
        stamps = list(map(int, stamps))
        if 0 in lengths:
            return None
        starts, nrs = _byte_extents(offsets, length_tokens, lengths, self._nrs)
        return stamps, devs, starts, nrs, map(_WRITE.get, ops)

    def line(self, fields):
        if len(fields) != 5:
            raise BadField("line", self.expected_line(), b",".join(fields))
        dev = _int(fields[0], "device_id", _COUNT)
        op = fields[1].strip()
        if op not in (b"R", b"W"):
            raise BadField("opcode", "R or W", fields[1])
        offset = _int(fields[2], "offset", "a non-negative integer of bytes")
        length = _int(fields[3], "length", "a non-negative integer of bytes")
        stamp = _int(fields[4], "timestamp", self.time_what)
        sector, nr = byte_extent(offset, length) if length else (offset >> 9, 0)
        return stamp, dev, sector, nr, op == b"W"


# ------------------------------------------------------------------ Tencent CBS

class _Tencent(_Format):
    name = "tencent"
    columns = ("Timestamp", "Offset", "Size", "IOType", "VolumeID")
    time_field = "Timestamp"
    time_what = "a non-negative integer of seconds"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self._ints: dict = {}

    def fast(self, cols):
        stamps, offsets, sizes, kinds, vols = cols
        n = len(stamps)
        if kinds.count(b"0") + kinds.count(b"1") != n or not _digits(stamps, offsets, sizes,
                                                                        vols):
            return None
        cache = self._ints
        stamps = _cached(stamps, cache)         # one-second resolution: few values
        offsets = list(map(int, offsets))
        sizes = _cached(sizes, cache)
        vols = _cached(vols, cache)
        if 0 in sizes:
            return None
        return stamps, vols, offsets, sizes, map(_WRITE.get, kinds)

    def line(self, fields):
        if len(fields) != 5:
            raise BadField("line", self.expected_line(), b",".join(fields))
        stamp = _int(fields[0], "Timestamp", self.time_what)
        offset = _int(fields[1], "Offset", "a non-negative integer of 512-byte sectors")
        size = _int(fields[2], "Size", "a non-negative integer of 512-byte sectors")
        kind = fields[3].strip()
        if kind not in (b"0", b"1"):
            raise BadField("IOType", "0 (read) or 1 (write)", fields[3])
        vol = _int(fields[4], "VolumeID", _COUNT)
        return stamp, vol, offset, size, kind == b"1"


FORMATS = {"msr": _Msr, "spc": _Spc, "alibaba": _Alibaba, "tencent": _Tencent}


# ------------------------------------------------------------------ the reader

def read_csv_trace(path, fmt: str, skip_bad_lines: bool = False, **options) -> TraceStream:
    """Records of a CSV trace in format ``fmt`` (msr, spc, alibaba, tencent)."""
    layout = FORMATS[fmt](**options)
    out = TraceStream(path, fmt, skip_bad_lines)
    return out.start(_read(path, layout, out))


def read_msr(path, skip_bad_lines: bool = False) -> TraceStream:
    """MSR Cambridge / SNIA: ``Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime``."""
    return read_csv_trace(path, "msr", skip_bad_lines)


def read_spc(path, block_size: int = 512, skip_bad_lines: bool = False) -> TraceStream:
    """UMass / SPC: ``ASU,LBA,Size,Opcode,Timestamp``, LBA in ``block_size``-byte blocks."""
    return read_csv_trace(path, "spc", skip_bad_lines, block_size=block_size)


def read_alibaba(path, skip_bad_lines: bool = False) -> TraceStream:
    """Alibaba block traces: ``device_id,opcode,offset,length,timestamp`` (µs)."""
    return read_csv_trace(path, "alibaba", skip_bad_lines)


def read_tencent(path, skip_bad_lines: bool = False) -> TraceStream:
    """Tencent CBS: ``Timestamp,Offset,Size,IOType,VolumeID`` (s, sectors, 0 = read)."""
    return read_csv_trace(path, "tencent", skip_bad_lines)


class _State:
    __slots__ = ("last", "base")

    def __init__(self) -> None:
        self.last = None     # previous raw time
        self.base = None     # raw time of the first record (rebased formats)


def _read(path, layout: _Format, out: TraceStream):
    state = _State()
    if not layout.rebase:
        state.base = 0
    for before, lines in read_chunks(path):
        records = _fast(lines, layout, state)
        if records is None:
            records = _slow(lines, before, layout, state, out)
        if layout.rebase and out.clock != "epoch" and state.base is not None:
            out.clock = "epoch"
            out.origin = state.base / layout.per_second + layout.epoch_offset
        yield records


def _fast(lines, layout: _Format, state: _State):
    data = b"".join(lines)
    if b"\0" in data:
        return None
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    if not data.endswith(b"\n"):
        data += b"\n"
    k = len(layout.columns)
    n = len(lines)
    tokens = data.replace(b"\n", b",\0,").split(b",")
    stride = k + 1
    if len(tokens) != stride * n + 1 or tokens[k::stride].count(b"\0") != n:
        return None
    end = stride * n
    try:
        parsed = layout.fast([tokens[i:end:stride] for i in range(k)])
    except ValueError:
        return None
    if parsed is None:
        return None
    raw, devnos, sectors, nrs, writes = parsed
    last = state.last
    if (last is not None and raw[0] < last) or not raw[-1] < _INF \
            or not all(map(le, raw, islice(raw, 1, None))):
        return None
    if state.base is None:
        state.base = raw[0]
    state.last = raw[-1]
    base = state.base
    times = map(truediv, map(sub, raw, repeat(base)), repeat(layout.per_second)) if base else \
        map(truediv, raw, repeat(layout.per_second))
    return list(map(new_record, repeat(TraceRecord),
                    zip(times, devnos, sectors, nrs, writes, repeat(None), repeat(None),
                        repeat(None))))


def _slow(lines, before: int, layout: _Format, state: _State, out: TraceStream):
    records = []
    per_second = layout.per_second
    for lineno, line in enumerate(lines, before + 1):
        if not line.strip():
            continue
        fields = line.rstrip(b"\r\n").split(b",")
        if lineno == 1 and layout.is_header(fields):
            continue
        try:
            raw, devno, sector, nr, write = layout.line(fields)
        except BadField as bad:
            out.bad(lineno, bad.field, bad.what, bad.text)
            continue
        if state.last is not None and raw < state.last:
            out.bad(lineno, layout.time_field, f"a time no earlier than the previous line's "
                    f"({state.last!r})", fields[_time_index(layout)])
            continue
        state.last = raw
        if state.base is None:
            state.base = raw
        if nr == 0:
            out.ignored += 1
            continue
        records.append(new_record(TraceRecord, (
            (raw - state.base) / per_second, devno, sector, nr, write, None, None, None)))
    return records


def _time_index(layout: _Format) -> int:
    return layout.columns.index(layout.time_field)


# ------------------------------------------------------------------ detection

def sniff(fmt: str, head: bytes, complete: bool) -> bool:
    """Whether the first lines of a file (``head``; its last line cut short unless
    ``complete``) all read as format ``fmt``."""
    layout = FORMATS[fmt]()
    lines = head.split(b"\n")
    if not complete:
        lines = lines[:-1]
    seen = bad = 0
    for lineno, line in enumerate(lines[:50], 1):
        if not line.strip():
            continue
        fields = line.rstrip(b"\r").split(b",")
        if lineno == 1 and layout.is_header(fields):
            continue
        try:
            layout.line(fields)
        except BadField:
            bad += 1
            continue
        seen += 1
    return sniff_verdict(seen, bad)


# ------------------------------------------------------------------ writers

class _DevIndex:
    """Integer ids for device keys that are not integers, in order of appearance."""

    def __init__(self) -> None:
        self.ids: dict = {}

    def __call__(self, devno) -> int:
        if isinstance(devno, int) and not isinstance(devno, bool) and devno >= 0:
            return devno
        got = self.ids.get(devno)
        if got is None:
            got = self.ids[devno] = len(self.ids)
        return got


_MSR_KEY = re.compile(r"([^,\s]+)_(\d+)\Z")
# 2008-01-01T00:00:00Z as a Windows FILETIME: written times start here.
MSR_EPOCH_TICKS = 128_434_464_000_000_000


def write_msr(path, records) -> int:
    """Write MSR Cambridge CSV; return the number of records. devno ``"host_N"``
    keeps its host and disk number; an int devno N becomes ``blksim_N``; other
    keys become ``blksim`` disks numbered in order of appearance. Times are
    written as 100 ns ticks from 2008-01-01 (the reader rebases them to 0);
    ResponseTime is 0."""
    index = _DevIndex()
    keys: dict = {}

    def devkey(devno):
        key = keys.get(devno)
        if key is None:
            m = _MSR_KEY.match(devno) if isinstance(devno, str) else None
            key = keys[devno] = (m.group(1), int(m.group(2))) if m else ("blksim", index(devno))
        return key

    def line(rec) -> str:
        host, disk = devkey(rec.devno)
        return (f"{MSR_EPOCH_TICKS + round(rec.time * 1e7)},{host},{disk},"
                f"{'Write' if rec.write else 'Read'},{rec.sector * 512},"
                f"{rec.nr_sectors * 512},0\n")

    return write_lines(path, map(line, records))


def write_spc(path, records) -> int:
    """Write UMass/SPC CSV (512-byte LBAs, seconds with 9 decimals); return the
    number of records. ASU is devno (keys that are not integers are numbered in
    order of appearance)."""
    index = _DevIndex()
    return write_lines(path, (f"{index(rec.devno)},{rec.sector},{rec.nr_sectors * 512},"
                              f"{'w' if rec.write else 'r'},{rec.time:.9f}\n"
                              for rec in records))


def write_alibaba(path, records) -> int:
    """Write Alibaba CSV (times in whole microseconds); return the number of records."""
    index = _DevIndex()
    return write_lines(path, (f"{index(rec.devno)},{'W' if rec.write else 'R'},"
                              f"{rec.sector * 512},{rec.nr_sectors * 512},"
                              f"{round(rec.time * 1e6)}\n" for rec in records))
