"""fio's iolog (``read_iolog=`` / ``write_iolog=``), versions 2 and 3.

Version 2::

    fio version 2 iolog
    /dev/sdb add
    /dev/sdb open
    /dev/sdb write 0 4096
    /dev/sdb wait 1500 0
    /dev/sdb read 1048576 65536
    /dev/sdb close

Version 3 puts a timestamp first on every line, in microseconds since the
start of the run (fio's ``log_io_u`` writes ``utime_since_now``, and replay
sleeps the difference in microseconds)::

    fio version 3 iolog
    0 /dev/sdb add
    0 /dev/sdb open
    113 /dev/sdb write 0 4096
    2045 /dev/sdb read 1048576 65536

* ``read``/``write`` lines become records: offset and length are bytes (start
  rounded down, end up to 512-byte sectors); devno is the file name.
* ``add``, ``open``, ``close`` and ``unlink`` manage files and are skipped;
  ``sync``, ``datasync``, ``sync_file_range`` and ``trim`` move no data and are
  counted as ignored.
* Times: version 3 uses the timestamps (``time_unit`` "us" by default, as fio
  writes them). A timestamp earlier than the one before is replayed at once,
  as fio does (the record gets the previous time). Version 2 has no timestamps:
  every request is at the time of the ``wait`` lines before it (``wait``'s
  offset is microseconds, added up as fio's HOWTO describes), 0 without any, so
  a version 2 log is best replayed closed-loop.
"""

from __future__ import annotations

import math
import re

from blksim.traces.records import (BatchWriter, TraceError, TraceRecord, TraceStream, atomic_output,
                            byte_extent, line_error, new_record, plain_float, plain_int,
                            read_chunks)

HEADERS = {b"fio version 2 iolog": 2, b"fio version 3 iolog": 3}
TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
FILE_ACTIONS = frozenset((b"add", b"open", b"close", b"unlink"))
NO_DATA = frozenset((b"sync", b"datasync", b"sync_file_range", b"trim"))
_ACTIONS = "read, write, wait (v2), trim, sync, datasync, sync_file_range, add, open, close"


def read_fio_iolog(path, time_unit: str = "us", skip_bad_lines: bool = False) -> TraceStream:
    """Records of an fio iolog (version 2 or 3, from its first line)."""
    if time_unit not in TIME_UNITS:
        raise ValueError(f"time_unit: expected one of {', '.join(TIME_UNITS)}, "
                         f"found {time_unit!r}")
    out = TraceStream(path, "fio", skip_bad_lines)
    return out.start(_read(path, TIME_UNITS[time_unit], time_unit, out))


def _read(path, per_second: float, unit: str, out: TraceStream):
    version = None
    clock = 0.0          # v2: total of the waits so far (us); v3: latest timestamp (file units)
    devs: dict = {}
    for before, lines in read_chunks(path):
        records = []
        for lineno, line in enumerate(lines, before + 1):
            fields = line.split()
            if not fields:
                continue
            if version is None:
                version = HEADERS.get(b" ".join(fields))
                if version is None:
                    raise line_error(path, lineno, "header",
                                     "'fio version 2 iolog' or 'fio version 3 iolog'",
                                     line.rstrip(b"\r\n"))
                continue
            if version == 3:
                if len(fields) not in (3, 5):
                    out.bad(lineno, "line", "3 or 5 fields: timestamp filename action "
                            "[offset length]", line.rstrip(b"\r\n"))
                    continue
                stamp = fields[0]
                ts = plain_int(stamp) if stamp.isdigit() else plain_float(stamp)
                if not 0 <= ts < math.inf:
                    out.bad(lineno, "timestamp", f"a non-negative number of {unit}", stamp)
                    continue
                fields = fields[1:]
            else:
                ts = None
                if len(fields) not in (2, 3, 4):
                    out.bad(lineno, "line", "2 or 4 fields: filename action [offset length]",
                            line.rstrip(b"\r\n"))
                    continue
            fname, act = fields[0], fields[1]
            if act in (b"read", b"write"):
                if len(fields) != 4:
                    out.bad(lineno, "line", f"offset and length after {act.decode()}",
                            line.rstrip(b"\r\n"))
                    continue
                offset = plain_int(fields[2])
                if offset < 0:
                    out.bad(lineno, "offset", "a non-negative integer of bytes", fields[2])
                    continue
                length = plain_int(fields[3])
                if length < 0:
                    out.bad(lineno, "length", "a non-negative integer of bytes", fields[3])
                    continue
                if ts is not None and ts > clock:
                    clock = ts
                if length == 0:
                    out.ignored += 1
                    continue
                dev = devs.get(fname)
                if dev is None:
                    dev = devs[fname] = fname.decode("utf-8", "replace")
                sector, nr = byte_extent(offset, length)
                records.append(new_record(TraceRecord, (
                    clock / per_second if version == 3 else clock / 1e6, dev, sector, nr,
                    act == b"write", None, None, None)))
            elif act in FILE_ACTIONS or act in NO_DATA:
                if len(fields) != (2 if act in FILE_ACTIONS else 4) and not (
                        act in NO_DATA and len(fields) in (2, 3)):
                    out.bad(lineno, "line", f"the fields of a {act.decode()} line",
                            line.rstrip(b"\r\n"))
                    continue
                if ts is not None and ts > clock:
                    clock = ts
                if act in NO_DATA:
                    out.ignored += 1
            elif act == b"wait" and version == 3:
                out.ignored += 1        # fio: "ignoring wait command with version 3"
            elif act == b"wait":
                if len(fields) != 4:
                    # fio reads a version 2 line as 2 or 4 fields and skips any other
                    # ("bad iolog2"): a wait without its length does not wait
                    out.bad(lineno, "line", "4 fields for wait: filename wait usec length",
                            line.rstrip(b"\r\n"))
                    continue
                usec = plain_int(fields[2])
                if usec < 0:
                    out.bad(lineno, "offset", "microseconds to wait (a non-negative integer)",
                            fields[2])
                    continue
                clock += usec
            else:
                out.bad(lineno, "action", f"one of {_ACTIONS}", act)
        yield records
    if version is None:
        raise TraceError(f"{path}:1: header expected 'fio version 2 iolog' or "
                         f"'fio version 3 iolog', found an empty file")


def sniff(head: bytes, complete: bool) -> bool:
    """Whether the file starts with an fio iolog v2/v3 header."""
    for line in head.split(b"\n")[:5]:
        if line.strip():
            return b" ".join(line.split()) in HEADERS
    return False


def version_of(head: bytes) -> int | None:
    for line in head.split(b"\n")[:5]:
        if line.strip():
            return HEADERS.get(b" ".join(line.split()))
    return None


_SPACE = re.compile(r"\s")


def write_fio_iolog(path, records, time_unit: str = "us") -> int:
    """Write ``records`` as an fio version 3 iolog; return how many.

    Each device key becomes a file name (``str(devno)``, whitespace replaced
    by ``_``), added and opened at its first request and closed at the end.
    Timestamps are whole ``time_unit`` (fio's own unit is "us"); offsets and
    lengths are bytes.
    """
    if time_unit not in TIME_UNITS:
        raise ValueError(f"time_unit: expected one of {', '.join(TIME_UNITS)}, "
                         f"found {time_unit!r}")
    per_second = TIME_UNITS[time_unit]
    names: dict = {}
    count = 0
    ts = 0
    with atomic_output(path) as stream:
        out = BatchWriter(stream)
        out.add("fio version 3 iolog\n")
        for rec in records:
            ts = round(rec.time * per_second)
            name = names.get(rec.devno)
            if name is None:
                name = names[rec.devno] = _SPACE.sub("_", str(rec.devno)) or "_"
                out.add(f"{ts} {name} add\n{ts} {name} open\n")
            out.add(f"{ts} {name} {'write' if rec.write else 'read'} {rec.sector * 512} "
                    f"{rec.nr_sectors * 512}\n")
            count += 1
        for name in names.values():
            out.add(f"{ts} {name} close\n")
        out.flush()
    return count
