"""What every trace reader yields, and the plumbing the readers share.

``TraceRecord`` is one traced request::

    time        seconds (float). Formats that record times relative to the start
                of the capture (blkparse, DiskSim, UMass/SPC, fio iologs) keep
                them as recorded; formats that record wall-clock timestamps
                (MSR Cambridge, Alibaba, Tencent CBS) are rebased so that the
                file's first record is at 0.
    devno       the device key: an int (DiskSim devno, Alibaba device_id,
                Tencent VolumeID, SPC ASU) or a string ("8,16" from blkparse,
                "hm_1" from MSR, the file name from an fio iolog).
    sector      first 512-byte sector.
    nr_sectors  length in 512-byte sectors (at least 1).
    write       bool.
    pid         submitting process id, or None when the trace does not say.
    name        process name, or None.
    sync        True / False when the trace says (blkparse's rwbs), else None:
                unknown means reads are sync and writes async, as the kernel
                treats plain reads and buffered writes.

Byte offsets and sizes become sectors by rounding the start down and the end up
(``sector = offset // 512``, ``end = ceil((offset + size) / 512)``), so a request
that is not 512-byte aligned covers every sector it touches and is never dropped.

Readers return a ``TraceStream``: an iterator that also counts what it left out
(``skipped`` malformed lines when ``skip_bad_lines`` is on, ``ignored`` lines that
are well formed but carry no data request, such as trims and flushes).
"""

from __future__ import annotations

import bz2
import errno
import contextlib
import gzip
import lzma
import math
import os
import zlib
from collections import namedtuple
from collections.abc import Iterable
from itertools import chain

TraceRecord = namedtuple("TraceRecord", "time devno sector nr_sectors write pid name sync",
                         defaults=(None, None))
TraceRecord.__doc__ = """One traced request: arrival ``time`` (seconds), ``devno``, first
``sector`` and ``nr_sectors`` (512-byte sectors), ``write`` (bool), ``pid`` (None when
the trace does not say), process ``name`` (or None), ``sync`` (True/False, or None:
reads sync, writes async)."""

LatencyRecord = namedtuple("LatencyRecord", TraceRecord._fields + ("latency",),
                           defaults=(None, None, None))
LatencyRecord.__doc__ = """A `TraceRecord` with ``latency``: the request's recorded Q->C (or
D->C) time in seconds, from the capture's completion events, or None when its completion
was not seen (`blksim.traces.completions`)."""

#: The simulated block device's name: iostat's device column, blktrace's file names.
DEVICE_NAME = "sda"

new_record = tuple.__new__      # new_record(TraceRecord, (8 values)): skips namedtuple's __new__

CHUNK_BYTES = 1 << 16           # lines read per batch: ~64 KiB


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and line."""


class BadField(Exception):
    """Internal: one malformed line (field, expected, found)."""

    def __init__(self, field: str, what: str, text) -> None:
        super().__init__(field, what, text)
        self.field = field
        self.what = what
        self.text = text


#: How much of an offending line or field an error message shows.
SHOW_LIMIT = 120


def show(text) -> str:
    """Bytes or text as they appear in error messages: undecodable bytes escaped, and cut
    to `SHOW_LIMIT` bytes or characters with how many more there were (a 2 MB junk line
    is not echoed whole)."""
    if isinstance(text, bytes):
        rest = len(text) - SHOW_LIMIT
        shown = text[:SHOW_LIMIT].decode("ascii", "backslashreplace")
        return f"{shown}... ({rest:,} more bytes)" if rest > 0 else shown
    text = str(text)
    rest = len(text) - SHOW_LIMIT
    return f"{text[:SHOW_LIMIT]}... ({rest:,} more characters)" if rest > 0 else text


def plain_int(text: bytes) -> int:
    """A count in ASCII decimal digits (white space around it allowed), or -1 for any
    other text: not int()'s "1_000", "+8" or non-ASCII digits."""
    digits = text.strip()
    if not digits.isdigit():            # (bytes: ASCII digits only)
        return -1
    try:
        return int(digits)
    except ValueError:                  # beyond int()'s digit limit
        return -1


def plain_float(text: bytes) -> float:
    """A number as float() reads it but without Python's "_" separators; NaN for any
    other text."""
    if b"_" in text:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def line_error(path, lineno: int, field: str, what: str, text) -> TraceError:
    """The one error message shape every reader uses."""
    return TraceError(f"{path}:{lineno}: {field} expected {what}, found {show(text)!r}")


# ------------------------------------------------------------------ compression

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))
_OPENERS = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}


def compression_of(path) -> str | None:
    """"gzip", "bzip2" or "xz" from the file's first bytes, or None."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    return None


def open_binary(path):
    """``path`` opened for binary reading, decompressed on the fly when its first
    bytes are a gzip, bzip2 or xz header (whatever the file's name)."""
    kind = compression_of(path)
    if kind is None:
        return open(path, "rb")
    return _OPENERS[kind](path, "rb")


_DECOMPRESS_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError, OSError)


def read_chunks(path, chunk_bytes: int | None = None, gzip_by_name: bool = False):
    """Yield ``(lines_before, lines)``: the file's lines a batch (~64 KiB) at a time,
    decompressed transparently. A corrupt compressed stream is a TraceError.
    ``gzip_by_name``: a name ending in ``.gz`` is read as gzip whatever its content
    (DiskSim's reader does so)."""
    if gzip_by_name and str(path).endswith(".gz"):
        kind = "gzip"
    else:
        kind = compression_of(path)
    stream = open(path, "rb") if kind is None else _OPENERS[kind](path, "rb")
    size = chunk_bytes or CHUNK_BYTES
    with stream:
        lineno = 0
        while True:
            try:
                lines = stream.readlines(size)
            except _DECOMPRESS_ERRORS as exc:
                if kind is None:
                    raise
                raise TraceError(f"{path}:{lineno + 1}: file expected {kind} data, found a "
                                 f"corrupt or truncated stream ({exc})") from None
            if not lines:
                return
            yield lineno, lines
            lineno += len(lines)


def read_head(path, size: int = 1 << 16) -> bytes:
    """Up to ``size`` bytes from the start of ``path``, decompressed (b"" when the
    compressed stream is unreadable)."""
    try:
        with open_binary(path) as fh:
            return fh.read(size)
    except _DECOMPRESS_ERRORS:
        if compression_of(path) is None:
            raise
        return b""


# ------------------------------------------------------------------ the iterator

class TraceStream:
    """An iterator of TraceRecord with counts of what it left out.

    ``skipped``: malformed lines passed over (only with ``skip_bad_lines``);
    ``first_skipped``: the message the first of them would have raised;
    ``ignored``: well-formed lines with no data request (flushes, trims, ...).

    ``clock`` and ``origin`` say what the records' time 0 was on the recorded clock:
    ``"epoch"`` (a format whose timestamps are wall-clock times, rebased so the first
    record is at 0: ``origin`` is that record's time, in seconds since 1970-01-01 UTC) or
    ``"relative"`` (times counted from the trace's own start; ``origin`` 0).

    ``start(chunks)`` takes a generator of lists of records (one list per chunk
    of lines); iterating flattens them at C speed (``iter()`` returns the
    ``itertools.chain``), so a record costs no generator switch.
    """

    def __init__(self, path, fmt: str, skip_bad_lines: bool = False) -> None:
        self.path = path
        self.format = fmt
        self.skip_bad_lines = bool(skip_bad_lines)
        self.skipped = 0
        self.first_skipped: str | None = None
        self.ignored = 0
        self.clock = "relative"
        self.origin = 0.0
        self._gen = None
        self._chunks = None

    def start(self, chunks) -> "TraceStream":
        self._chunks = chunks
        self._gen = chain.from_iterable(chunks)
        return self

    def __iter__(self):
        return self._gen

    def __next__(self):
        return next(self._gen)

    def close(self) -> None:
        """Stop reading and close the file."""
        if self._chunks is not None:
            self._chunks.close()

    def bad(self, lineno: int, field: str, what: str, text) -> None:
        """A malformed line: raise, or count it when skipping bad lines."""
        err = line_error(self.path, lineno, field, what, text)
        if not self.skip_bad_lines:
            raise err
        self.skipped += 1
        if self.first_skipped is None:
            self.first_skipped = str(err)


def skipped_summary(stream) -> str | None:
    """"skipped N malformed lines (first: ...)" for a stream that skipped any."""
    n = getattr(stream, "skipped", 0)
    if not n:
        return None
    first = getattr(stream, "first_skipped", None)
    plural = "line" if n == 1 else "lines"
    return f"skipped {n} malformed {plural}" + (f" (first: {first})" if first else "")


def sniff_verdict(good: int, bad: int) -> bool:
    """A format's sniffer accepts the first lines of a file when at least one reads
    and at most one in six does not (so a stray bad line does not hide the format)."""
    return good > 0 and bad * 5 <= good


# ------------------------------------------------------------------ conversions

def byte_extent(offset: int, size: int) -> tuple[int, int]:
    """(first sector, number of sectors) covering bytes [offset, offset + size)."""
    start = offset >> 9
    return start, ((offset + size + 511) >> 9) - start


# ------------------------------------------------------------------ writing

_WRITE_OPENERS = {".gz": gzip.GzipFile, ".bz2": bz2.BZ2File, ".xz": lzma.LZMAFile}


def make_directory(path) -> None:
    """Create the output folder ``path`` (and its parents) unless it exists. A path that
    is a file, or a symbolic link to nothing, is an OSError naming it."""
    path = os.fspath(path)
    if os.path.islink(path) and not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, f"{path} is a symbolic link to "
                                f"{os.readlink(path)}, which does not exist")
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", path)
    os.makedirs(path, exist_ok=True)


class PendingFile:
    """A file written under a temporary name beside ``path`` (``.NAME.PID.RANDOM.tmp``)
    and renamed into place by `commit`, or removed by `discard`: a reader never
    sees it half-written, and a failed run leaves nothing behind.

    ``file`` is the open stream (binary unless ``binary`` is False).

    Every PendingFile is known from before its temporary file exists until it is
    committed or discarded, so `discard_unfinished` can remove whatever a stopped
    command (Ctrl-C, SIGTERM) was still writing, wherever the signal struck.
    """

    _unfinished: set = set()

    def __init__(self, path, binary: bool = True, buffering: int = -1) -> None:
        self.path = os.fspath(path)
        if os.path.isdir(self.path):
            # said of the target, not of the temporary file the rename would fail on
            raise IsADirectoryError(errno.EISDIR, "Is a directory", self.path)
        # Through a symbolic link, as the shell's > writes: the rename replaces the file
        # the link names (created if missing), not the link itself.
        self.target = os.path.realpath(self.path)
        directory, name = os.path.split(self.target)
        if not os.path.isdir(directory):
            raise FileNotFoundError(errno.ENOENT, f"cannot write {self.path}: no folder "
                                    f"{directory}")
        # Not tempfile.mkstemp: its 0600 mode would stick to the renamed file.
        self.tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        self.file = None
        PendingFile._unfinished.add(self)
        try:
            self.file = open(self.tmp, "xb" if binary else "x", buffering=buffering)
        except BaseException:
            self.discard()
            raise

    def commit(self) -> None:
        """Close the file and rename it to ``path``."""
        self.file.close()
        os.replace(self.tmp, self.target)
        PendingFile._unfinished.discard(self)

    def discard(self) -> None:
        """Close and remove the unfinished file."""
        PendingFile._unfinished.discard(self)
        with contextlib.suppress(Exception):
            self.file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)

    @classmethod
    def discard_unfinished(cls) -> None:
        """Discard every file still being written (a command stopped part-way)."""
        for pending in list(cls._unfinished):
            pending.discard()


@contextlib.contextmanager
def atomic_output(path):
    """A binary stream for ``path`` that appears only when the block completes
    (a `PendingFile`). A ``.gz``, ``.bz2`` or ``.xz`` name compresses."""
    pending = PendingFile(path)
    try:
        raw = pending.file
        wrapper = _WRITE_OPENERS.get(os.path.splitext(pending.path)[1].lower())
        stream = wrapper(fileobj=raw, mode="wb") if wrapper is gzip.GzipFile else (
            wrapper(raw, "wb") if wrapper else raw)
        yield stream
        if stream is not raw:
            stream.close()
        pending.commit()
    except BaseException:
        pending.discard()
        raise


def write_lines(path, lines: Iterable[str]) -> int:
    """Write text ``lines`` (each ending in a newline) to ``path`` through
    `atomic_output`, 8192 at a time; return how many."""
    count = 0
    with atomic_output(path) as stream:
        out = BatchWriter(stream)
        for line in lines:
            out.add(line)
            count += 1
        out.flush()
    return count


class BatchWriter:
    """Collects encoded lines and writes them 8192 at a time."""

    __slots__ = ("stream", "batch", "count")

    def __init__(self, stream) -> None:
        self.stream = stream
        self.batch: list[str] = []
        self.count = 0

    def add(self, line: str) -> None:
        batch = self.batch
        batch.append(line)
        if len(batch) >= 8192:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.stream.write("".join(self.batch).encode("utf-8"))
            self.batch.clear()
