"""blkparse's default text output: read the queued (Q) or issued (D) requests.

Every event line starts with the same seven fields, then an action-specific
tail; for Q and D events (and G, I, M, F) the tail is ``sector + n [cmd]``::

      8,16   1       42     0.001735123  4321  Q  WS 1052672 + 8 [postgres]
    maj,min cpu sequence    sec.nsec      pid act rwbs sector + n  [process name]

D lines may carry the elapsed time in parentheses before the name
(``+ 8 (   1234) [postgres]``), as ``blkparse -t`` prints it.

* ``events="Q"`` (default) replays every bio as the application queued it;
  the simulated block layer then merges them itself, so blkparse's M/F (merge)
  lines are not needed and are skipped. ``events="D"`` replays the requests as
  they were issued to the driver, after the real merges (the D line already
  carries the merged size); M/F lines are skipped then too. Every other action
  (G, I, C, P, U, T, A, X, m, ...) is skipped.
* devno is the ``"maj,min"`` string, so a multi-device capture keeps its
  devices apart. pid and the process name (``[cmd]``) are kept.
* rwbs: ``W`` = write, ``R`` = read; ``S`` marks a sync write; a read is sync
  unless marked ``A`` (readahead). A line whose rwbs has neither R nor W
  (flush ``FN``, discard ``D``, ``N``) or whose size is 0 (a pure flush) moves
  no data: it is counted as ignored.
* time is the trace's own (seconds since the start of the capture); it must
  not decrease from one replayed line to the next.
* The summary blkparse prints at the end (from the first ``CPUn (`` or
  ``Total (`` line) ends the trace; blank lines are skipped.

Every line's seven leading fields are checked; the tail is checked on the
lines that are replayed (spaces around ``+`` and before ``[name]`` may be
repeated, and trailing spaces are allowed). A chunk whose every line has the
11 fields of a Q/G/I/D/C/M/F line is split() once and checked column by
column; any other chunk is matched with one regular expression (C speed);
only a chunk with a problem, or with the summary, is read again line by line
to name the bad line and field.
"""

from __future__ import annotations

import math
import re
from itertools import compress, islice, repeat
from operator import le

from blksim.traces.records import (LatencyRecord, sniff_verdict, TraceRecord, TraceStream, new_record, read_chunks,
                            write_lines)

EVENTS = ("Q", "D")

_HEAD = (rb" *(\d{1,4},\d{1,7}) +(\d{1,10}) +(\d{1,10}) +(\d+\.\d+) +(\d{1,10})"
         rb" +([A-Za-z]{1,2}) +([A-Z]+)(.*)")
_TAIL = rb" +(\d+) +\+ +(\d+)(?: +\( *\d+\))? +\[(.*)\] *\r?"
_ALL = re.compile(rb"(?m)^" + _HEAD + rb"$")
_LINE = re.compile(_HEAD)
# The shape of a line, numbers of any width: what format detection looks for (a number
# too wide for its field is then the reader's error, naming the line)
_SHAPE = re.compile(rb" *\d+,\d+ +\d+ +\d+ +\d+\.\d+ +\d+ +[A-Za-z]{1,2} +[A-Z]+.*")
_TAILS = re.compile(rb"(?m)^" + _TAIL + rb"$")
_TAIL_LINE = re.compile(_TAIL)
_SUMMARY = re.compile(rb"(?m)^(?:CPU\d+|Total) \(")
_SUMMARY_LINE = re.compile(rb"(?:CPU\d+|Total) \(")

_INF = math.inf

# The widths the kernel gives these fields (struct blk_io_trace: cpu, sequence and pid
# are 32 bits; the device is MAJOR << 20 | MINOR in 32 bits), checked on every line.
_U32 = 1 << 32
_MAJORS, _MINORS = 1 << 12, 1 << 20
_DEVICE_WHAT = "a device number maj,min (major below 4096, minor below 1048576)"
_U32_FIELDS = (("cpu", "a CPU number below 2^32"), ("sequence", "a sequence number below 2^32"),
               ("pid", "a process id below 2^32"))


def _device_ok(dev: bytes) -> bool:
    """Whether ``maj,min`` is a device number the kernel can record."""
    major, _, minor = dev.partition(b",")
    # (widths first: int() refuses strings of more than 4,300 digits)
    return (0 < len(major) <= 4 and 0 < len(minor) <= 7 and major.isdigit()
            and minor.isdigit() and int(major) < _MAJORS and int(minor) < _MINORS)


def _u32_column_ok(col) -> bool:
    """Whether every token of a column of digit strings is below 2^32 (one of ten digits
    may not be, one of more never is)."""
    widest = max(map(len, col))
    return widest < 10 or (widest == 10 and max(map(int, col)) < _U32)


def _out_of_range(dev: bytes, cpu: bytes, seq: bytes, pid: bytes):
    """(field, expected, found) for the first of a line's numbers too wide, or None."""
    if not _device_ok(dev):
        return "device", _DEVICE_WHAT, dev
    for (field, what), token in zip(_U32_FIELDS, (cpu, seq, pid)):
        if int(token) >= _U32:
            return field, what, token
    return None

# rwbs -> (write, sync), or False for no data
_RWBS: dict = {}


def rwbs_info(rwbs: bytes):
    """(write, sync) for a data rwbs string, False for one that moves no data."""
    got = _RWBS.get(rwbs)
    if got is None:
        if b"W" in rwbs:
            got = (True, b"S" in rwbs)
        elif b"R" in rwbs:
            got = (False, b"S" in rwbs or b"A" not in rwbs)
        else:
            got = False
        if len(_RWBS) < 4096:
            _RWBS[rwbs] = got
    return got


def read_blkparse(path, events: str = "Q", skip_bad_lines: bool = False,
                  latency: bool = False) -> TraceStream:
    """Records of blkparse's default text output: its ``events`` ("Q" or "D") lines.

    A malformed line raises ``TraceError`` naming the file, line, field, what
    was expected and what was found; with ``skip_bad_lines`` it is counted in
    the returned stream's ``skipped``. With ``latency`` the records are
    `blksim.traces.records.LatencyRecord` s whose ``latency`` is the recorded Q->C
    (or D->C) time in seconds, matched from the ``C`` lines as the binary reader
    matches its C events (`blksim.traces.completions`), or None when no completion
    was seen.
    """
    if events not in EVENTS:
        raise ValueError(f"events: expected Q (queued) or D (issued), found {events!r}")
    out = TraceStream(path, "blkparse", skip_bad_lines)
    if latency:
        return out.start(_read_with_latency(path, events.encode(), out))
    return out.start(_read(path, events.encode(), out))


class _State:
    __slots__ = ("last", "done", "devs", "names", "bare_names", "ints", "regex_chunks")

    def __init__(self) -> None:
        self.last = -1.0
        self.done = False
        self.regex_chunks = 0           # chunks left to read without trying split()
        self.devs: dict = {}
        self.names: dict = {}           # "[name]" token -> name (split() path)
        self.bare_names: dict = {}      # name bytes -> name (regular-expression path)
        self.ints: dict = {}            # pid and size tokens -> int


def _chunks(path, event: bytes, out: TraceStream, state: _State):
    """Yield (lines, records) a chunk at a time, up to blkparse's summary."""
    for before, lines in read_chunks(path):
        records = _fast(lines, event, state, out)
        if records is None:
            records = _slow(lines, before, event, state, out)
        yield lines, records
        if state.done:
            return


def _read(path, event: bytes, out: TraceStream):
    for _lines, records in _chunks(path, event, out, _State()):
        yield records


# The fields a completion needs from a C line: device, time, sector and size.
_COMPLETIONS = re.compile(rb"(?m)^ *(\d+,\d+) +\d+ +\d+ +(\d+\.\d+) +\d+ +C +[A-Z]+ +(\d+) +\+ +(\d+)")


def _read_with_latency(path, event: bytes, out: TraceStream):
    """`_read`, each record held until its C line is read (or given up)."""
    from blksim.traces.completions import CompletionMatcher

    state = _State()
    matcher = CompletionMatcher()
    for lines, records in _chunks(path, event, out, state):
        data = b"".join(lines)
        end = _SUMMARY.search(data)
        completions = _COMPLETIONS.findall(data, 0, end.start() if end else len(data))
        done = []
        i = 0
        # requests and completions by time (a request before a completion at the same
        # time); each completion after the request it completes, as in the capture
        for dev, t, sector, size in completions:
            t = float(t)
            while i < len(records) and records[i].time <= t:
                rec = records[i]
                matcher.add(rec.time, rec.devno, rec.sector, rec.nr_sectors, rec)
                i += 1
            matcher.complete(t, _dev(state, dev), int(sector), int(size))
            done.extend(matcher.ready(t))
        for rec in records[i:]:
            matcher.add(rec.time, rec.devno, rec.sector, rec.nr_sectors, rec)
        if records:
            done.extend(matcher.ready(records[-1].time))
        yield [new_record(LatencyRecord, (*rec, lat)) for rec, lat in done]
    yield [new_record(LatencyRecord, (*rec, lat)) for rec, lat in matcher.drain()]


def _dev(state: _State, dev: bytes) -> str:
    got = state.devs.get(dev)
    if got is None:
        got = state.devs[dev] = dev.decode("ascii")
    return got


def _fast(lines, event: bytes, state: _State, out: TraceStream):
    """The chunk's records, or None when any line needs the line-by-line path."""
    data = b"".join(lines)
    if b"(" in data and _SUMMARY.search(data):      # ("(": one memchr, no search)
        return None
    if not data.endswith(b"\n"):
        data += b"\n"
    got = None
    if state.regex_chunks:          # the split() path failed lately: skip it a while
        state.regex_chunks -= 1
    else:
        got = _fast_tokens(data, len(lines), event, state)
        if got is None:
            state.regex_chunks = 15
    if got is None:
        got = _fast_regex(data, len(lines), event, state)
        if got is None:
            return None
    records, ignored = got
    out.ignored += ignored
    return records


# Bytes that split() takes as whitespace but the line pattern does not (it
# separates fields with spaces only), and NUL (the line-end marker below).
_NOT_TOKENS = (b"\t", b"\r", b"\x0b", b"\x0c", b"\0")
_DIGITS = b"0123456789"
_TOKEN_WIDTH = 12       # a line's 11 tokens and its end marker


def _all_digits(col) -> bool:
    joined = b"".join(col)
    return joined.isdigit() and joined.isascii()


def _fast_tokens(data: bytes, n: int, event: bytes, state: _State):
    """Fastest path, for chunks whose every line has the 11 fields of a Q, G, I,
    D, C, M or F line with a name without spaces (``8,16 1 42 0.001735123 4321 Q
    WS 1052672 + 8 [postgres]``): one split() of the chunk and whole-column
    checks as strict as the line pattern. (records, ignored), or None."""
    for text in _NOT_TOKENS:
        if text in data:
            return None
    # Every line end becomes a NUL token, so "11 fields on every line" is
    # "every 12th token is a NUL" (the data holds none of its own).
    tokens = data.replace(b"\n", b" \0 ").split()
    w = _TOKEN_WIDTH
    if len(tokens) != w * n or tokens[11::w].count(b"\0") != n:
        return None
    devs = tokens[0::w]
    acts = tokens[5::w]
    rwbs = tokens[6::w]
    # The seven leading fields of every line: cpu, sequence and pid digits ...
    for col in (tokens[1::w], tokens[2::w], tokens[4::w]):
        if not (_all_digits(col) and _u32_column_ok(col)):
            return None
    # ... sec.nsec: nothing but digits and one dot in each token, not at either end ...
    times = b" ".join(tokens[3::w])
    if times.translate(None, _DIGITS) != b". " * (n - 1) + b"." or b" ." in times \
            or b". " in times or times[0] == 46 or times[-1] == 46:
        return None
    # ... rwbs [A-Z]+, action [A-Za-z]{1,2}, device maj,min
    letters = b"".join(rwbs)
    if not (letters.isalpha() and letters.isupper()):
        return None
    letters = b"".join(acts)
    if not letters.isalpha() or (len(letters) != n and max(map(len, acts)) > 2):
        return None
    if devs.count(devs[0]) == n:
        if not _device_ok(devs[0]):
            return None
    elif not all(map(_device_ok, set(devs))):
        return None
    picked = acts.count(event)
    if not picked:
        return [], 0
    stamps = tokens[3::w]
    pids = tokens[4::w]
    sectors = tokens[7::w]
    pluses = tokens[8::w]
    sizes = tokens[9::w]
    names = tokens[10::w]
    if picked != n:
        keep = list(map(event.__eq__, acts))
        devs, stamps, pids, rwbs, sectors, pluses, sizes, names = (
            list(compress(col, keep))
            for col in (devs, stamps, pids, rwbs, sectors, pluses, sizes, names))
    # The tail "sector + n [name]" of the lines picked (the name without spaces).
    if pluses.count(b"+") != picked or not _all_digits(sectors):
        return None
    ints = state.ints
    sizes = _ints(sizes, ints)
    if sizes is None:
        return None
    infos, sizes, (devs, stamps, pids, sectors, names), ignored = _without_ignored(
        rwbs, sizes, (devs, stamps, pids, sectors, names))
    if not infos:
        return [], ignored
    times = list(map(float, stamps))
    if not _in_order(state, times):
        return None
    cache = state.names         # "[name]" token -> name
    decoded = list(map(cache.get, names))
    if None in decoded:
        # every token starts with "[" and ends with "]"
        joined = b" ".join(names)
        if not (joined[0] == 91 and joined[-1] == 93
                and joined.count(b" [") == joined.count(b"] ") == len(names) - 1):
            return None
        try:
            decoded = [t[1:-1].decode() for t in names]
        except UnicodeDecodeError:
            return None
        if len(cache) < 4096:
            cache.update(zip(names, decoded))
    pids = _ints(pids, ints)
    try:
        sectors = list(map(int, sectors))
    except ValueError:      # beyond int()'s digit limit
        return None
    return _records(state, times, devs, sectors, sizes, infos, pids, decoded), ignored


def _records(state: _State, times, devs, sectors, sizes, infos, pids, names) -> list:
    """A chunk's records from its decoded columns (the chunk's last time becomes
    the time later chunks may not precede)."""
    state.last = times[-1]
    if devs.count(devs[0]) == len(devs):
        devnos = repeat(_dev(state, devs[0]))
    else:
        devnos = [_dev(state, d) for d in devs]
    writes, syncs = zip(*infos)
    return list(map(new_record, repeat(TraceRecord),
                    zip(times, devnos, sectors, sizes, writes, pids, names, syncs)))


def _without_ignored(rwbs, sizes, columns):
    """Decode the ``rwbs`` column into (write, sync) infos, and drop the lines
    blksim ignores (an RWBS with no data direction, or no bytes) from the infos,
    ``sizes`` and the other ``columns``; also return how many."""
    infos = list(map(_RWBS.get, rwbs))
    if None in infos:
        infos = list(map(rwbs_info, rwbs))
    if False not in infos and 0 not in sizes:
        return infos, sizes, columns, 0
    keep = list(map(bool, map(min, map(bool, infos), sizes)))
    return (list(compress(infos, keep)), list(compress(sizes, keep)),
            [list(compress(col, keep)) for col in columns], keep.count(False))


def _in_order(state: _State, times: list) -> bool:
    """True when a chunk's times are finite, ascending and not before the last one read."""
    return (state.last <= times[0] and times[-1] < _INF
            and all(map(le, times, islice(times, 1, None))))


def _ints(col, cache: dict):
    """The values of a column of decimal tokens, or None unless all are plain
    digits. Through ``cache``, which holds only tokens already checked (pids and
    sizes take few values; a dict look-up costs a fraction of an int())."""
    got = list(map(cache.get, col))
    if None in got:
        if not _all_digits(col):
            return None
        try:
            got = list(map(int, col))
        except ValueError:      # beyond int()'s digit limit
            return None
        if len(cache) > 4096:
            cache.clear()
        cache.update(zip(col, got))
    return got


def _fast_regex(data: bytes, n: int, event: bytes, state: _State):
    """Fast path for any chunk of event lines: one regular expression over the
    chunk. (records, ignored), or None."""
    rows = _ALL.findall(data)
    if len(rows) != n:
        return None
    all_devs, cpus, seqs, _times, all_pids = list(zip(*rows))[:5]
    if not (all(map(_device_ok, set(all_devs))) and _u32_column_ok(cpus)
            and _u32_column_ok(seqs) and _u32_column_ok(all_pids)):
        return None
    sel = [r for r in rows if r[5] == event]
    if not sel:
        return [], 0
    devs, _cpus, _seqs, times, pids, _acts, rwbs, tails = zip(*sel)
    parts = _TAILS.findall(b"\n".join(tails))
    if len(parts) != len(sel):
        return None
    sectors, sizes, names = zip(*parts)
    try:
        sizes = list(map(int, sizes))
    except ValueError:      # beyond int()'s digit limit
        return None
    infos, sizes, (devs, times, pids, sectors, names), ignored = _without_ignored(
        rwbs, sizes, (devs, times, pids, sectors, names))
    if not infos:
        return [], ignored
    times = list(map(float, times))
    if not _in_order(state, times):
        return None
    cache = state.bare_names
    decoded = list(map(cache.get, names))
    if None in decoded:
        try:
            decoded = list(map(bytes.decode, names))
        except UnicodeDecodeError:
            return None
        if len(cache) < 4096:
            cache.update(zip(names, decoded))
    try:
        pids = list(map(int, pids))
        sectors = list(map(int, sectors))
    except ValueError:
        return None
    return _records(state, times, devs, sectors, sizes, infos, pids, decoded), ignored


_HEAD_FIELDS = (
    ("device", rb"\d{1,4},\d{1,7}", _DEVICE_WHAT),
    ("cpu", rb"\d{1,10}", _U32_FIELDS[0][1]),
    ("sequence", rb"\d{1,10}", _U32_FIELDS[1][1]),
    ("time", rb"\d+\.\d+", "seconds as sec.nsec"),
    ("pid", rb"\d{1,10}", _U32_FIELDS[2][1]),
    ("action", rb"[A-Za-z]{1,2}", "an action letter (Q, G, I, D, C, M, ...)"),
    ("rwbs", rb"[A-Z]+", "an RWBS string (R, W, WS, RA, FWS, N, ...)"),
)
_HEAD_EXPECT = ("blkparse's default format: maj,min cpu sequence sec.nsec pid action rwbs "
                "sector + size [name]")


def _diagnose_head(line: bytes):
    tokens = line.split()
    for (field, pattern, what), token in zip(_HEAD_FIELDS, tokens):
        if not re.fullmatch(pattern, token):
            return field, what, token
    if len(tokens) < len(_HEAD_FIELDS):
        return "line", _HEAD_EXPECT, line.strip()
    return "line", _HEAD_EXPECT + " (fields separated by spaces)", line.strip()


def _diagnose_tail(tail: bytes):
    tokens = tail.split()
    if not tokens or not tokens[0].isdigit() or not tokens[0].isascii():
        return "sector", "a sector number", tokens[0] if tokens else b""
    if len(tokens) < 2 or tokens[1] != b"+":
        return "line", "'+' after the sector", tail.strip()
    if len(tokens) < 3 or not tokens[2].isdigit() or not tokens[2].isascii():
        return "size", "a number of sectors", tokens[2] if len(tokens) > 2 else b""
    return "name", "the process name in brackets: [name]", b" ".join(tokens[3:])


def _slow(lines, before: int, event: bytes, state: _State, out: TraceStream):
    records = []
    for lineno, raw in enumerate(lines, before + 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if not line.strip():
            continue
        if _SUMMARY_LINE.match(line):
            state.done = True
            break
        m = _LINE.fullmatch(line)
        if m is None:
            out.bad(lineno, *_diagnose_head(line.rstrip(b"\r")))
            continue
        dev, cpu, seq, t, pid, act, rwbs, tail = m.groups()
        wide = _out_of_range(dev, cpu, seq, pid)
        if wide is not None:
            out.bad(lineno, *wide)
            continue
        if act != event:
            continue
        info = rwbs_info(rwbs)
        m2 = _TAIL_LINE.fullmatch(tail)
        if m2 is None:
            if info is False:
                out.ignored += 1
            else:
                out.bad(lineno, *_diagnose_tail(tail.rstrip(b"\r")))
            continue
        sector, size, name = m2.groups()
        size = int(size)
        if info is False or size == 0:
            out.ignored += 1
            continue
        t = float(t)
        if not t < _INF:
            out.bad(lineno, "time", "seconds as sec.nsec", m.group(4))
            continue
        if t < state.last:
            out.bad(lineno, "time", f"a time no earlier than the previous {event.decode()} "
                    f"line's ({state.last!r} s)", m.group(4))
            continue
        state.last = t
        records.append(new_record(TraceRecord, (
            t, _dev(state, dev), int(sector), size, info[0], int(pid),
            name.decode("utf-8", "replace"), info[1])))
    return records


def sniff(head: bytes, complete: bool) -> bool:
    """Whether the file's first lines look like blkparse's default output."""
    lines = head.split(b"\n")
    if not complete:
        lines = lines[:-1]
    seen = bad = 0
    for line in lines[:50]:
        if not line.strip():
            continue
        if _SUMMARY_LINE.match(line):
            break
        if _SHAPE.fullmatch(line) is None:
            bad += 1
        else:
            seen += 1
    return sniff_verdict(seen, bad)


# ------------------------------------------------------------------ writing

_MAJMIN = re.compile(r"(\d+),(\d+)\Z")


def write_blkparse(path, records, event: str = "Q") -> int:
    """Write ``records`` as blkparse default-format lines, one ``event`` (Q or D)
    line per record; return how many.

    devno ``"maj,min"`` is kept; an int devno N is written as ``0,N``; other
    keys as ``254,K`` in order of appearance. pid None is written as 0, a
    missing name as ``-``; rwbs is ``W``/``WS`` or ``R``/``RA`` (sync None: a
    read is sync, a write async). Times have nanosecond resolution.
    """
    if event not in EVENTS:
        raise ValueError(f"event: expected Q or D, found {event!r}")
    devs: dict = {}
    others: dict = {}

    def devtext(devno):
        got = devs.get(devno)
        if got is None:
            if isinstance(devno, int) and not isinstance(devno, bool) and devno >= 0:
                maj, mnr = 0, devno
            else:
                m = _MAJMIN.match(str(devno))
                if m:
                    maj, mnr = int(m.group(1)), int(m.group(2))
                else:
                    maj, mnr = 254, others.setdefault(devno, len(others))
            got = devs[devno] = f"{maj:3d},{mnr:<3d}"
        return got

    def line(seq: int, rec) -> str:
        ns = round(rec.time * 1e9)
        if rec.write:
            rwbs = "WS" if rec.sync else "W"
        else:
            rwbs = "RA" if rec.sync is False else "R"
        pid = 0 if rec.pid is None else rec.pid
        name = "-" if rec.name is None else rec.name.replace("\n", " ")
        return (f"{devtext(rec.devno)} {0:2d} {seq:8d} {ns // 1_000_000_000:5d}."
                f"{ns % 1_000_000_000:09d} {pid:5d} {event:>2} {rwbs:>3} {rec.sector} + "
                f"{rec.nr_sectors} [{name}]\n")

    return write_lines(path, (line(seq, rec) for seq, rec in enumerate(records, 1)))
