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

CACHE_TAGS = ("Hit", "Miss", "Doub", "Trip")


class ValidateRecord(NamedTuple):
    """One request of a validate trace; ``measured`` and ``delay`` are seconds."""

    write: bool
    cache: str
    sector: int
    nr_sectors: int
    measured: float
    delay: float


def read_disksim_validate(path) -> Iterator[ValidateRecord]:
    """Yield the requests of a validate trace one at a time.

    Blank lines are skipped. A malformed line raises ``TraceError`` with
    ``"{path}:{lineno}: {field} expected {what}, found {text!r}"``.
    """
    with open(path, "rb") as stream:
        for lineno, line in enumerate(stream, 1):
            fields = line.split()
            if fields:
                yield _parse(fields, line, path, lineno)


def _parse(fields, line: bytes, path, lineno: int) -> ValidateRecord:
    def fail(field, what, text):
        raise TraceError(f"{path}:{lineno}: {field} expected {what}, found "
                         f"{text.decode('ascii', 'backslashreplace')!r}")

    if len(fields) != 6:
        fail("line", "6 fields: R|W Hit|Miss|Doub|Trip blkno size measured_us delay_us",
             line.rstrip(b"\r\n"))
    rw, tag, blkno, size, measured, delay = fields
    if rw not in (b"R", b"W"):
        fail("type", "R or W", rw)
    cache = tag.decode("ascii", "backslashreplace")
    if cache not in CACHE_TAGS:
        fail("cache", "one of " + ", ".join(CACHE_TAGS), tag)
    numbers = []
    for name, text, what, lowest in (("blkno", blkno, "a non-negative integer (sectors)", 0),
                                     ("size", size, "a positive integer (sectors)", 1)):
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < lowest:
            fail(name, what, text)
        numbers.append(value)
    for name, text in (("measured_us", measured), ("delay_us", delay)):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0.0 <= value < math.inf:
            fail(name, "a non-negative number of microseconds", text)
        numbers.append(value / 1e6)
    return ValidateRecord(rw == b"W", cache, *numbers)
