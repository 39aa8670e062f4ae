"""DiskSim's "validate" trace format: requests with their measured response times.

One request per line, six whitespace-separated fields::

    R|W  Hit|Miss|Doub|Trip  blkno  size  measured_us  delay_us

``blkno`` and ``size`` are 512-byte sectors; ``measured_us`` is the response
time measured on the real drive; ``delay_us`` is the gap from this request's
completion to the next request's issue (a closed workload, one request
outstanding). The second column (the drive cache's behaviour) carries
information only for the HP C2247A trace.
"""

from __future__ import annotations

import math
from typing import Iterator, NamedTuple

from blksim.traces.disksim_ascii import TraceError
from blksim.traces.records import line_error, plain_float, plain_int

CACHE_TAGS = ("Hit", "Miss", "Doub", "Trip")


class ValidateRecord(NamedTuple):
    """One request of a validate trace; ``measured`` and ``delay`` are seconds."""

    write: bool
    cache: str
    sector: int
    nr_sectors: int
    measured: float
    delay: float


_WRITE = {b"R": False, b"W": True}
_CACHE = {tag.encode(): tag for tag in CACHE_TAGS}


def read_disksim_validate(path) -> Iterator[ValidateRecord]:
    """Yield the requests of a validate trace one at a time.

    Blank lines are skipped. A malformed line raises ``TraceError`` with
    ``"{path}:{lineno}: {field} expected {what}, found {text!r}"``.
    """
    with open(path, "rb") as stream:
        for lineno, line in enumerate(stream, 1):
            fields = line.split()
            if fields:
                yield parse_line(fields, line, path, lineno)


def parse_line(fields, line: bytes, path, lineno: int) -> ValidateRecord:
    """The request on one non-blank ``line`` (split into ``fields``), or a `TraceError`
    naming ``path``, ``lineno`` and the field that is wrong."""
    # the common case, checked in one go; `_diagnose` names what is wrong
    try:
        rw, tag, blkno, size, measured, delay = fields
        write, cache = _WRITE[rw], _CACHE[tag]
        sector, nr_sectors = int(blkno), int(size)
        measured_us, delay_us = float(measured), float(delay)
    except (ValueError, KeyError):
        _diagnose(fields, line, path, lineno)
    if not (blkno.isdigit() and size.isdigit() and nr_sectors > 0
            and 0.0 <= measured_us < math.inf and 0.0 <= delay_us < math.inf
            and b"_" not in line):
        _diagnose(fields, line, path, lineno)
    return ValidateRecord(write, cache, sector, nr_sectors, measured_us / 1e6, delay_us / 1e6)


def _diagnose(fields, line: bytes, path, lineno: int) -> None:
    """Raise the `TraceError` naming the first bad field of a line the fast path refused."""
    def fail(field, what, text):
        raise line_error(path, lineno, field, what, text)

    if len(fields) != 6:
        fail("line", "6 fields: R|W Hit|Miss|Doub|Trip blkno size measured_us delay_us",
             line.rstrip(b"\r\n"))
    rw, tag, blkno, size, measured, delay = fields
    if rw not in _WRITE:
        fail("type", "R or W", rw)
    if tag not in _CACHE:
        fail("cache", "one of " + ", ".join(CACHE_TAGS), tag)
    for name, text, what, lowest in (("blkno", blkno, "a non-negative integer (sectors)", 0),
                                     ("size", size, "a positive integer (sectors)", 1)):
        if plain_int(text) < lowest:
            fail(name, what, text)
    for name, text in (("measured_us", measured), ("delay_us", delay)):
        if not 0.0 <= plain_float(text) < math.inf:
            fail(name, "a non-negative number of microseconds", text)
    raise AssertionError(f"{path}:{lineno}: refused but no field found wrong")  # unreachable
