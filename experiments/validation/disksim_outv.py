"""Binned distributions from DiskSim 4.0's output files (``.outv``).

A "large" distribution (``parv/statdefs``: more than ten buckets, e.g.
``Physical access time``, 1750 buckets, scale 1000, start 0 step 1 grow 1) is
printed as a title line ``<prefix> distribution`` and one row per bucket::

    label  count  fraction  cumulative_fraction

The label is in the statistic's unit (ms here) and is the bucket's *upper*
edge: DiskSim's ``stat_update`` files a value v into the first bucket whose
label exceeds int(v * scale) / scale, so the cumulative fraction of a row is
the fraction of values below its label. The rows are therefore points of the
CDF, read up to the first row whose cumulative fraction reaches 1, as DiskSim's
own ``rms`` tool reads them.

In a validation run, ``VALIDATE Trace access time distribution`` is the
measured response time and ``IOdriver Physical access time distribution`` the
simulated one.
"""

from __future__ import annotations

MEASURED = "VALIDATE Trace access time distribution"
SIMULATED = "IOdriver Physical access time distribution"


class OutvError(ValueError):
    """A DiskSim output file lacks the distribution asked for, or a row is malformed."""


def read_distribution(path, title: str) -> tuple[list, list]:
    """The CDF points (labels, cumulative fractions) of distribution ``title`` in ``path``."""
    with open(path) as fh:
        lines = iter(enumerate(fh, 1))
        for _, line in lines:
            if line.rstrip("\r\n") == title:
                break
        else:
            raise OutvError(f"{path}: no line {title!r}")
        xs, cums = [], []
        for lineno, line in lines:
            fields = line.split()
            try:
                x, _count, _frac, cum = (float(f) for f in fields)
            except ValueError:
                if not xs:
                    raise OutvError(f"{path}:{lineno}: expected 'label count fraction "
                                    f"cumulative', found {line.strip()!r}") from None
                break
            xs.append(x)
            cums.append(cum)
            if cum >= 1.0:
                break
    return xs, cums


def read_average(path, prefix: str) -> float:
    """The value of the first ``<prefix> average:`` line of ``path`` (DiskSim prints each
    statistic's mean so, e.g. ``IOdriver Physical access time average: 4.230715``)."""
    want = f"{prefix} average:"
    with open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.startswith(want):
                text = line[len(want):].strip()
                try:
                    return float(text)
                except ValueError:
                    raise OutvError(f"{path}:{lineno}: expected a number after {want!r}, "
                                    f"found {text!r}") from None
    raise OutvError(f"{path}: no line {want!r}")
