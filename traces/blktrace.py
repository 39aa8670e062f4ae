"""blktrace's binary format: read it as a stream of requests, and write it.

The kernel's block tracer writes one file per CPU (``NAME.blktrace.N``); each is
a sequence of ``struct blk_io_trace`` records (include/uapi/linux/blktrace_api.h)::

    u32 magic      0x65617400 | version (0x07)
    u32 sequence   per-CPU event number
    u64 time       nanoseconds
    u64 sector     512-byte sectors
    u32 bytes
    u32 action     category bits << 16 | action code
    u32 pid
    u32 device     MAJOR << 20 | MINOR
    u32 cpu
    u16 error
    u16 pdu_len    bytes of payload that follow the 48-byte record

``blkparse -d FILE`` writes the same records, merged in time order, into one
file. Records are stored in the byte order of the machine that traced; the
magic tells which, as blkparse does. Notify records (category NOTIFY) carry a
process's name (``BLK_TN_PROCESS``, payload: the 16-byte ``comm``), the trace's
wall-clock start (``BLK_TN_TIMESTAMP``) or a text message (``BLK_TN_MESSAGE``).

`read_blktrace` turns the events into `BlktraceRecord` requests: one per queued
bio (``Q``, the default: what processes asked for, before any scheduler) or one
per request issued to the driver (``D``: what the device saw). With
``latency=True`` each request also carries its recorded latency, matched from
the ``C`` (complete) events: Q->C or D->C. Reading is streamed: memory holds
only the requests still waiting for their completion (at most
``MAX_PENDING``), whatever the trace's length.
"""

from __future__ import annotations

import heapq
import os
import re
import struct
from collections import namedtuple
from typing import Iterable, Iterator

from blksim.traces import completions
from blksim.traces.completions import CompletionMatcher
from blksim.traces.records import LatencyRecord, PendingFile, TraceError

# ---------------------------------------------------------------------- the format

MAGIC = 0x65617400
VERSION = 0x07
MAGIC_VERSION = MAGIC | VERSION
RECORD_SIZE = 48
TASK_COMM_LEN = 16

_LE = struct.Struct("<IIQQIIIIIHH")
_BE = struct.Struct(">IIQQIIIIIHH")
assert _LE.size == RECORD_SIZE

# Categories (the high 16 bits of action).
TC_READ = 1 << 0
TC_WRITE = 1 << 1
TC_FLUSH = 1 << 2
TC_SYNC = 1 << 3
TC_QUEUE = 1 << 4
TC_REQUEUE = 1 << 5
TC_ISSUE = 1 << 6
TC_COMPLETE = 1 << 7
TC_FS = 1 << 8
TC_PC = 1 << 9
TC_NOTIFY = 1 << 10
TC_AHEAD = 1 << 11
TC_META = 1 << 12
TC_DISCARD = 1 << 13
TC_DRV_DATA = 1 << 14
TC_FUA = 1 << 15
TC_SHIFT = 16

# Action codes (the low 16 bits).
TA_QUEUE = 1
TA_BACKMERGE = 2
TA_FRONTMERGE = 3
TA_GETRQ = 4
TA_SLEEPRQ = 5
TA_REQUEUE = 6
TA_ISSUE = 7
TA_COMPLETE = 8
TA_PLUG = 9
TA_UNPLUG_IO = 10
TA_UNPLUG_TIMER = 11
TA_INSERT = 12
TA_SPLIT = 13
TA_BOUNCE = 14
TA_REMAP = 15
TA_ABORT = 16
TA_DRV_DATA = 17
TA_CGROUP = 1 << 8                      # flag: the payload starts with an 8-byte cgroup id

TN_PROCESS = 0
TN_TIMESTAMP = 1
TN_MESSAGE = 2

#: blkparse's one-letter names of the actions.
ACTION_LETTERS = {TA_QUEUE: "Q", TA_BACKMERGE: "M", TA_FRONTMERGE: "F", TA_GETRQ: "G",
                  TA_SLEEPRQ: "S", TA_REQUEUE: "R", TA_ISSUE: "D", TA_COMPLETE: "C",
                  TA_PLUG: "P", TA_UNPLUG_IO: "U", TA_UNPLUG_TIMER: "UT", TA_INSERT: "I",
                  TA_SPLIT: "X", TA_BOUNCE: "B", TA_REMAP: "A", TA_ABORT: "K"}

# The category each action is filed under (BLK_TA_* in blktrace_api.h).
_ACTION_CATEGORY = {TA_QUEUE: TC_QUEUE, TA_BACKMERGE: TC_QUEUE, TA_FRONTMERGE: TC_QUEUE,
                    TA_GETRQ: TC_QUEUE, TA_SLEEPRQ: TC_QUEUE, TA_REQUEUE: TC_REQUEUE,
                    TA_ISSUE: TC_ISSUE, TA_COMPLETE: TC_COMPLETE, TA_PLUG: TC_QUEUE,
                    TA_UNPLUG_IO: TC_QUEUE, TA_UNPLUG_TIMER: TC_QUEUE, TA_INSERT: TC_QUEUE,
                    TA_SPLIT: 0, TA_BOUNCE: 0, TA_REMAP: TC_QUEUE, TA_ABORT: TC_QUEUE}

#: Requests held while waiting for their completion event (``latency=True``).
MAX_PENDING = completions.MAX_PENDING
#: ... and for at most this long (ns of trace time) before they are given up.
HOLD_NS = round(completions.HOLD_S * 1e9)


def action_value(code: int, write: bool, sync: bool = False, fs: bool = False,
                 op: int | None = None) -> int:
    """The ``action`` field the kernel writes for ``code`` on a read or write, or on the
    operation ``op`` (``enum req_op``: a discard adds BLK_TC_DISCARD, a flush BLK_TC_FLUSH,
    as ``__blk_add_trace`` does)."""
    cat = _ACTION_CATEGORY.get(code, 0) | (TC_WRITE if write else TC_READ)
    if op == 3:
        cat |= TC_DISCARD
    elif op == 2:
        cat |= TC_FLUSH
    if sync:
        cat |= TC_SYNC
    if fs:
        cat |= TC_FS
    return cat << TC_SHIFT | code


def encode_device(major: int, minor: int) -> int:
    """The kernel's dev_t as blktrace records it: ``MAJOR << 20 | MINOR``."""
    if not (0 <= major < 1 << 12 and 0 <= minor < 1 << 20):
        raise ValueError(f"device {major},{minor}: major must be 0..4095, minor 0..1048575")
    return major << 20 | minor


def decode_device(dev: int) -> tuple[int, int]:
    """(major, minor) of a recorded device number."""
    return dev >> 20, dev & ((1 << 20) - 1)


def parse_device(text: str) -> int:
    """``"8,16"`` (as blkparse prints it) -> the recorded device number."""
    m = re.fullmatch(r"\s*(\d+)\s*[,:]\s*(\d+)\s*", str(text))
    if not m:
        raise ValueError(f"device: expected MAJOR,MINOR such as 8,16, found {text!r}")
    return encode_device(int(m.group(1)), int(m.group(2)))


def device_text(dev: int) -> str:
    """The recorded device number as blkparse prints it (``"8,16"``)."""
    major, minor = decode_device(dev)
    return f"{major},{minor}"


# ---------------------------------------------------------------------- records

BlktraceRecord = namedtuple("BlktraceRecord", LatencyRecord._fields + ("cpu",),
                            defaults=(None, None, None, None))
BlktraceRecord.__doc__ = """One traced request: a `blksim.traces.records.LatencyRecord` with
``devno`` as blkparse prints it (``"MAJOR,MINOR"``), ``name`` the process's name from the
trace's notify records, and ``cpu`` the CPU the event was recorded on (the submitter's, for
a Q event: a replay submits its bio there, `blksim.sim.cpus`)."""

_FIELDS = BlktraceRecord._fields
_rec_new = tuple.__new__
_IDX = {f: i for i, f in enumerate(_FIELDS)}
_NFIELDS = len(_FIELDS)


def _record(time, devno, sector, nr, write, pid, name, sync, latency, cpu=None):
    values = [None] * _NFIELDS
    values[0:6] = (time, devno, sector, nr, write, pid)
    values[_IDX["name"]] = name
    values[_IDX["sync"]] = sync
    values[_IDX["latency"]] = latency
    values[_IDX["cpu"]] = cpu
    return _rec_new(BlktraceRecord, values)


class BlktraceError(TraceError):
    """A blktrace file that cannot be read; the message names the file, record and field."""


# ---------------------------------------------------------------------- reading events

Event = namedtuple("Event", "time sequence sector bytes action pid device cpu error pdu")
Event.__doc__ = "One raw ``struct blk_io_trace`` (``pdu``: its payload bytes)."

_CHUNK = 1 << 20


def sniff(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) starts like a blktrace record."""
    if len(head) < 4:
        return False
    le = int.from_bytes(head[:4], "little")
    be = int.from_bytes(head[:4], "big")
    return (le & 0xFFFFFF00) == MAGIC or (be & 0xFFFFFF00) == MAGIC


def iter_events(path) -> Iterator[Event]:
    """Yield the raw records of one binary file in file order (streamed).

    Raises `BlktraceError` naming the file, the record index (from 0), its byte
    offset and the bad field.
    """
    with open(path, "rb") as fh:
        buf = b""
        pos = 0            # offset in buf
        base = 0           # file offset of buf[0]
        index = 0
        unpack = None
        eof = False
        while True:
            if len(buf) - pos < RECORD_SIZE and not eof:
                more = fh.read(_CHUNK)
                buf = buf[pos:] + more
                base += pos
                pos = 0
                eof = not more
            if len(buf) - pos == 0:
                return
            where = f"{path}: record {index} (byte {base + pos})"
            if len(buf) - pos < RECORD_SIZE:
                raise BlktraceError(f"{where}: record expected {RECORD_SIZE} bytes, found "
                                    f"{len(buf) - pos} before the end of the file (truncated)")
            if unpack is None:
                unpack = _byte_order(buf[pos:pos + 4], where)
            (magic, seq, t, sector, nbytes, action, pid, dev, cpu, err,
             pdu_len) = unpack(buf, pos)
            if magic != MAGIC_VERSION:
                if magic & 0xFFFFFF00 != MAGIC:
                    raise BlktraceError(f"{where}: magic expected 0x{MAGIC_VERSION:08x}, found "
                                        f"0x{magic:08x} (not a blktrace record, or the file is "
                                        f"corrupt)")
                raise BlktraceError(f"{where}: version expected 0x{VERSION:02x}, found "
                                    f"0x{magic & 0xFF:02x} (unsupported blktrace version)")
            end = pos + RECORD_SIZE + pdu_len
            while end > len(buf) and not eof:
                more = fh.read(max(_CHUNK, end - len(buf)))
                buf = buf[pos:] + more
                base += pos
                end -= pos
                pos = 0
                eof = not more
            if end > len(buf):
                raise BlktraceError(f"{where}: pdu_len {pdu_len} runs past the end of the file "
                                    f"({len(buf) - pos - RECORD_SIZE} bytes left; truncated)")
            pdu = buf[pos + RECORD_SIZE:end] if pdu_len else b""
            yield Event(t, seq, sector, nbytes, action, pid, dev, cpu, err, pdu)
            pos = end
            index += 1


def _byte_order(head: bytes, where: str):
    if int.from_bytes(head, "little") & 0xFFFFFF00 == MAGIC:
        return _LE.unpack_from
    if int.from_bytes(head, "big") & 0xFFFFFF00 == MAGIC:
        return _BE.unpack_from
    raise BlktraceError(f"{where}: magic expected 0x{MAGIC_VERSION:08x} (either byte order), "
                        f"found 0x{int.from_bytes(head, 'little'):08x}: not a blktrace file")


_PER_CPU = re.compile(r"^(?P<base>.+)\.blktrace\.(?P<cpu>\d+)$")


def trace_files(path) -> list[str]:
    """The files that make up the trace at ``path``.

    * a directory: every ``*.blktrace.N`` in it;
    * ``DIR/NAME.blktrace.N``: that file and its sibling CPU files;
    * ``DIR/NAME`` where ``NAME.blktrace.N`` exist: those files;
    * any other file: that file alone (a ``blkparse -d`` dump, say).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        files = [os.path.join(path, f) for f in os.listdir(path) if _PER_CPU.match(f)]
        if not files:
            raise BlktraceError(f"{path}: directory holds no NAME.blktrace.N files")
        return sorted(files, key=_cpu_sort_key)
    m = _PER_CPU.match(os.path.basename(path))
    if m and os.path.isfile(path):
        base = m.group("base")
        directory = os.path.dirname(path) or "."
        files = [os.path.join(os.path.dirname(path), f) for f in os.listdir(directory)
                 if (mm := _PER_CPU.match(f)) and mm.group("base") == base]
        return sorted(files, key=_cpu_sort_key)
    if os.path.isfile(path):
        return [path]
    directory = os.path.dirname(path) or "."
    base = os.path.basename(path)
    if os.path.isdir(directory):
        files = [os.path.join(os.path.dirname(path), f) for f in os.listdir(directory)
                 if (mm := _PER_CPU.match(f)) and mm.group("base") == base]
        if files:
            return sorted(files, key=_cpu_sort_key)
    raise BlktraceError(f"{path}: no such file (nor {base}.blktrace.N per-CPU files)")


def _cpu_sort_key(path: str):
    m = _PER_CPU.match(os.path.basename(path))
    return (m.group("base"), int(m.group("cpu"))) if m else (path, -1)


def merged_events(path) -> Iterator[Event]:
    """The events of every file of the trace at ``path``, merged in time order."""
    files = trace_files(path)
    if len(files) == 1:
        return iter_events(files[0])
    streams = [((e.time, i, n, e) for n, e in enumerate(iter_events(f)))
               for i, f in enumerate(files)]
    return (item[3] for item in heapq.merge(*streams))


# ---------------------------------------------------------------------- requests

class _DevText(dict):
    """Recorded device number -> ``"MAJOR,MINOR"``, cached."""

    def __missing__(self, dev: int) -> str:
        text = self[dev] = device_text(dev)
        return text


def _device_number(device) -> int | None:
    if device is None:
        return None
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    return parse_device(device)


def read_blktrace(path, events: str = "Q", latency: bool = False,
                  device=None) -> Iterator[BlktraceRecord]:
    """Yield the requests of a blktrace capture one at a time, in time order.

    ``events``: ``"Q"`` — one request per queued bio (``Q`` events: what the
    processes submitted) — or ``"D"`` — one per request issued to the driver.
    Zero-length bios (flushes), discards and SCSI pass-through (PC) requests
    are skipped. ``device`` keeps only that device (``"8,16"``, or the recorded
    number, see `parse_device`). Times are seconds from the trace's first event. With
    ``latency`` every request carries its recorded Q->C (or D->C) time in
    seconds, matched from the ``C`` events by device and sector range; a request
    whose completion is not seen within ``MAX_PENDING`` requests or
    ``HOLD_NS`` of trace time gets None.
    """
    if events not in ("Q", "D"):
        raise ValueError(f"events: expected Q or D, found {events!r}")
    want = TA_QUEUE if events == "Q" else TA_ISSUE
    device = _device_number(device)
    devtext = _DevText()
    names: dict[int, str] = {}
    genesis = None
    last_t = 0
    skip_cats = TC_DISCARD | TC_PC
    if not latency:
        for e in merged_events(path):
            action = e.action
            cat = action >> TC_SHIFT
            if cat & TC_NOTIFY:
                _notify(e, names)
                continue
            if genesis is None:
                genesis = last_t = e.time
            if (action & 0xFF) != want or cat & skip_cats or not e.bytes:
                continue
            if device is not None and e.device != device:
                continue
            t = e.time
            if t < last_t:
                t = last_t          # an event out of order across CPUs: no earlier than the last
            last_t = t
            yield _record((t - genesis) / 1e9, devtext[e.device], e.sector, (e.bytes + 511) >> 9,
                          bool(cat & TC_WRITE), e.pid, names.get(e.pid), bool(cat & TC_SYNC),
                          None, e.cpu)
        return

    # With latencies: hold each request until its completion is seen.
    matcher = CompletionMatcher(hold=HOLD_NS, max_pending=MAX_PENDING)
    for e in merged_events(path):
        action = e.action
        cat = action >> TC_SHIFT
        if cat & TC_NOTIFY:
            _notify(e, names)
            continue
        if genesis is None:
            genesis = last_t = e.time
        code = action & 0xFF
        if device is not None and e.device != device:
            continue
        if code == want and not cat & skip_cats and e.bytes:
            t = e.time
            if t < last_t:
                t = last_t
            last_t = t
            matcher.add(t, e.device, e.sector, (e.bytes + 511) >> 9,
                        (t, e.device, e.sector, (e.bytes + 511) >> 9, bool(cat & TC_WRITE),
                         e.pid, bool(cat & TC_SYNC), e.cpu))
        elif code == TA_COMPLETE and e.bytes:
            matcher.complete(e.time, e.device, e.sector, (e.bytes + 511) >> 9)
        for held, lat_ns in matcher.ready(e.time):
            yield _held_record(held, lat_ns, genesis, names, devtext)
    for held, lat_ns in matcher.drain():
        yield _held_record(held, lat_ns, genesis, names, devtext)


def _held_record(held, lat_ns, genesis, names, devtext):
    t, dev, sector, nr, write, pid, sync, cpu = held
    return _record((t - genesis) / 1e9, devtext[dev], sector, nr, write, pid, names.get(pid),
                   sync, None if lat_ns is None else lat_ns / 1e9, cpu)


def _notify(e: Event, names: dict) -> None:
    code = e.action & 0xFF
    pdu = e.pdu
    if e.action & TA_CGROUP:
        pdu = pdu[8:]
    if code == TN_PROCESS and pdu:
        names[e.pid] = pdu.split(b"\0", 1)[0].decode("utf-8", "replace")


def process_names(path) -> dict[int, str]:
    """pid -> name from the trace's notify records."""
    names: dict[int, str] = {}
    for e in merged_events(path):
        if (e.action >> TC_SHIFT) & TC_NOTIFY:
            _notify(e, names)
    return names


# ---------------------------------------------------------------------- writing

class BlktraceFile:
    """Write one CPU's blktrace file: native little-endian records, sequence
    numbers from 1, the file renamed into place only by `close`.

    ``device`` is the recorded device number (`encode_device`).
    """

    def __init__(self, path, device: int = 8 << 20, cpu: int = 0) -> None:
        self.path = os.fspath(path)
        self.device = device
        self.cpu = cpu
        self.sequence = 0
        self.count = 0
        self._pending = PendingFile(self.path)
        self._fh = self._pending.file
        self._buf: list[bytes] = []
        self._pack = _LE.pack
        self._named: set[int] = set()

    def event(self, time_ns: int, action: int, sector: int, nbytes: int, pid: int,
              error: int = 0, pdu: bytes = b"") -> None:
        """One trace record."""
        self.sequence += 1
        self._buf.append(self._pack(MAGIC_VERSION, self.sequence, time_ns, sector, nbytes,
                                    action, pid, self.device, self.cpu, error, len(pdu)))
        if pdu:
            self._buf.append(pdu)
        self.count += 1
        if len(self._buf) >= 8192:
            self.flush()

    def notify_process(self, time_ns: int, pid: int, name: str) -> None:
        """A ``BLK_TN_PROCESS`` record: ``pid`` is called ``name`` (cut to 15 bytes)."""
        comm = name.encode("utf-8", "replace")[:TASK_COMM_LEN - 1]
        comm = comm + b"\0" * (TASK_COMM_LEN - len(comm))
        self._buf.append(self._pack(MAGIC_VERSION, 0, time_ns, 0, 0,
                                    TC_NOTIFY << TC_SHIFT | TN_PROCESS, pid, self.device,
                                    self.cpu, 0, TASK_COMM_LEN))
        self._buf.append(comm)
        self._named.add(pid)

    def named(self, pid: int) -> bool:
        """Whether a process record for ``pid`` was written."""
        return pid in self._named

    def flush(self) -> None:
        """Write buffered records to the temporary file."""
        if self._buf:
            self._fh.write(b"".join(self._buf))
            self._buf.clear()

    def close(self) -> None:
        """Finish the file and rename it into place."""
        self.flush()
        self._pending.commit()

    def discard(self) -> None:
        """Drop the temporary file (after a failure)."""
        self._pending.discard()


def write_blktrace(path, records: Iterable, device: int | None = None,
                   default_pid: int = 0) -> int:
    """Write trace records as one blktrace file (CPU 0); return how many.

    Each record becomes a ``Q`` event (plus a ``C`` event at ``time + latency``
    when the record has a latency), and the first record of each pid is preceded
    by a process record when the record names the process. ``device`` replaces
    the records' devno (default: keep it). Times are written in ns.
    """
    device = _device_number(device)
    out = BlktraceFile(path, device if device is not None else 8 << 20)
    completions: list = []          # heap of (time_ns, n, dev, sector, bytes, write, pid)
    n = 0
    try:
        for rec in records:
            t_ns = round(rec.time * 1e9)
            while completions and completions[0][0] <= t_ns:
                _write_c(out, heapq.heappop(completions))
            pid = rec.pid if rec.pid is not None else default_pid
            name = getattr(rec, "name", None)
            if name and not out.named(pid):
                out.notify_process(t_ns, pid, name)
            dev = device if device is not None else _record_device(rec.devno)
            sync = bool(getattr(rec, "sync", None))
            _check_fits(path, n, t_ns, rec.sector, rec.nr_sectors * 512, pid)
            out.device = dev
            out.event(t_ns, action_value(TA_QUEUE, rec.write, sync), rec.sector,
                      rec.nr_sectors * 512, pid)
            lat = getattr(rec, "latency", None)
            if lat is not None:
                heapq.heappush(completions, (t_ns + round(lat * 1e9), n, dev, rec.sector,
                                             rec.nr_sectors * 512, rec.write, pid))
            n += 1
        while completions:
            _write_c(out, heapq.heappop(completions))
        out.close()
    except BaseException:
        out.discard()
        raise
    return n


_U64, _U32 = 1 << 64, 1 << 32


def _check_fits(path, n: int, t_ns: int, sector: int, nbytes: int, pid: int) -> None:
    """A record's fields fit blktrace's (64-bit time and sector, 32-bit bytes and pid)."""
    for what, value, limit in (("time (ns)", t_ns, _U64), ("sector", sector, _U64),
                               ("size (bytes)", nbytes, _U32), ("pid", pid, _U32)):
        if not 0 <= value < limit:
            raise TraceError(f"{path}: record {n + 1}: {what} {value} does not fit blktrace's "
                             f"{limit.bit_length() - 1}-bit field (0 to {limit - 1})")


def _record_device(devno) -> int:
    """A record's devno as a recorded device number: "8,16" as is, an int N as 0,N."""
    if isinstance(devno, str):
        try:
            return parse_device(devno)
        except ValueError:
            return 8 << 20
    if isinstance(devno, int) and 0 <= devno < 1 << 20:
        return devno
    return 8 << 20


def _write_c(out: BlktraceFile, item) -> None:
    t_ns, _n, dev, sector, nbytes, write, pid = item
    out.device = dev
    out.event(t_ns, action_value(TA_COMPLETE, write, fs=True), sector, nbytes, pid)


# ---------------------------------------------------------------------- registration

def _sniff_path(path: str) -> bool:
    """A directory of per-CPU files or a ``NAME`` prefix whose first file is blktrace."""
    try:
        files = trace_files(path)
        with open(files[0], "rb") as fh:
            return sniff(fh.read(4))
    except (OSError, ValueError):
        return False


def _register() -> None:
    from blksim.traces import detect
    detect.register_format(
        "blktrace", read_blktrace, sniff, sniff_path=_sniff_path,
        description="blktrace binary (struct blk_io_trace): NAME.blktrace.N per-CPU files "
                    "or a blkparse -d dump")
    detect.register_writer("blktrace", write_blktrace,
                           description="blktrace binary, one file (CPU 0): Q events, and C "
                                       "events where records carry a latency")


_register()
