"""How a trace is replayed: the options of a [[trace]] table and the record pipeline.

Plain Python (no simpy): `ReplayOptions` holds the validated options,
`open_records` opens the trace in its format and applies device selection, the
time window, the request limit and sector remapping, lazily, record by record.
The timing itself (open or closed loop, ``speed``, ``max_gap``) is done by the
replay processes in `sim.workload`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, dropwhile, islice, takewhile

MODES = ("open", "closed")
REMAPS = ("none", "wrap", "scale")
EVENTS = ("Q", "D")

#: Closed loop: trace records read ahead of the replay (per trace, all processes).
LOOKAHEAD = 16384


class ReplayError(ValueError):
    """A trace cannot be replayed as asked (a request outside the drive, say)."""


@dataclass
class ReplayStats:
    """What a replay did, for results.json."""

    requests: int = 0
    remapped: int = 0
    trace_sectors: int | None = None
    processes: set = field(default_factory=set)
    devices: set = field(default_factory=set)      # the traced devices replayed (a few)
    # the trace's time 0 on its recorded clock (`traces.records.TraceStream`): "epoch"
    # (origin in s since 1970) or "relative" (counted from the trace's own start)
    clock: str = "relative"
    origin: float = 0.0
    shift: float = 0.0          # s: when the trace's time 0 falls in the run (align)


#: How many distinct traced devices a replay keeps track of.
DEVICES_KEPT = 16


def _tally_devices(records, stats: ReplayStats):
    """Pass the records on, noting the traced devices they come from."""
    seen = stats.devices
    for r in records:
        if r.devno not in seen and len(seen) < DEVICES_KEPT:
            seen.add(r.devno)
        yield r


def multi_device_warnings(results: dict) -> list:
    """A warning per replayed trace whose requests came from several traced devices
    onto the one simulated device (results.json's ``replay`` entries)."""
    out = []
    for r in results.get("replay", []):
        devices = r.get("traced_devices", [])
        if len(devices) > 1:
            more = "" if len(devices) < DEVICES_KEPT else " and more"
            out.append(f"{r['path']}: the trace holds requests of several devices "
                       f"({', '.join(map(str, devices))}{more}), all replayed onto one "
                       f"simulated device; replay one with --device MAJ,MIN (blktrace, "
                       f"blkparse), --volume KEY (CSV traces), or a [[trace]]'s device, "
                       f"volume or devno (DiskSim) key")
    return out


def _name(spec) -> str:
    return f"trace {spec.name!r} ({spec.path})"


def open_records(spec, capacity: int, stats: ReplayStats, latency: bool = False):
    """The records of ``spec`` (a `sim.config.TraceSpec`) as they are to be replayed.

    ``capacity`` is the simulated device's size in sectors; the trace's volume is the
    device from ``spec.offset`` on, so ``remap`` folds the trace onto the ``capacity -
    offset`` sectors there, and every record is then moved up by ``offset``.
    ``latency`` asks readers that can for recorded completion times. After the first
    record is read, ``stats.clock`` and ``stats.origin`` say where the trace's time 0
    was on its recorded clock (`align_shifts`).
    """
    offset = spec.offset
    if offset >= capacity:
        raise ReplayError(f"{_name(spec)}: offset {offset * 512} bytes (sector {offset}) is "
                          f"beyond the device's {capacity} sectors")
    capacity -= offset
    stream = records = _read(spec, latency)
    if spec.devno is not None:
        devno = spec.devno
        records = (r for r in records if r.devno == devno)
    elif spec.device is None:
        records = _tally_devices(records, stats)
    if spec.start:
        start = spec.start
        records = dropwhile(lambda r: r.time < start, records)
    if spec.end is not None:
        end = spec.end
        records = takewhile(lambda r: r.time < end, records)
    if spec.max_requests is not None:
        records = islice(records, spec.max_requests)
    if spec.remap == "wrap":
        records = _wrap(records, capacity, stats, spec)
    elif spec.remap == "scale":
        span = spec.trace_sectors
        if span is None:
            span = 0
            for r in _read(spec, False):
                if spec.devno is None or r.devno == spec.devno:
                    end_sector = r.sector + r.nr_sectors
                    if end_sector > span:
                        span = end_sector
        stats.trace_sectors = span
        if span > capacity:
            records = _scale(records, capacity, span, stats, spec)
    # A trace that yields nothing is an error, not a run of 0 requests (an empty or
    # header-only file, or a device or time window that selects nothing).
    records = iter(records)
    first = next(records, None)
    if first is None:
        chosen = spec.devno is not None or spec.start or spec.end is not None
        raise ReplayError(f"{_name(spec)}: no request to replay"
                          + (" in the chosen device and time window" if chosen else ""))
    stats.clock = getattr(stream, "clock", "relative")
    stats.origin = getattr(stream, "origin", 0.0)
    records = chain((first,), records)
    if offset:
        records = _moved(records, offset)
    return records


def _moved(records, offset: int):
    """The records ``offset`` sectors further on (the trace's volume placed on its device)."""
    for r in records:
        yield r._replace(sector=r.sector + offset)


def align_shifts(traces) -> list:
    """When each trace's time 0 falls in the run (s), for ``(spec, stats)`` pairs whose
    records have been opened: 0 for ``align = "start"``; for the ``align = "clock"``
    traces, their window's start on the recorded clock (``stats.origin + spec.start``)
    minus the earliest of theirs, divided by the trace's ``speed``. The clock traces
    must share a kind of clock (all wall-clock timestamps, or all counted from their
    own starts): a clock trace of each kind is one error naming both."""
    clocked = [(spec, stats) for spec, stats in traces if spec.align == "clock"]
    if not clocked:
        return [0.0] * len(traces)
    kinds = {}
    for spec, stats in clocked:
        kinds.setdefault(stats.clock, spec)
    if len(kinds) > 1:
        (k1, a), (k2, b) = list(kinds.items())[:2]
        raise ReplayError(
            f"align = \"clock\": {_name(a)} has {CLOCKS[k1]} and {_name(b)} "
            f"{CLOCKS[k2]}; their clocks cannot be compared (give one of them "
            f"align = \"start\")")
    first = min(stats.origin + spec.start for spec, stats in clocked)
    return [(stats.origin + spec.start - first) / spec.speed if spec.align == "clock"
            else 0.0 for spec, stats in traces]


#: What a kind of recorded clock is, for messages.
CLOCKS = {"epoch": "wall-clock timestamps (seconds since 1970)",
          "relative": "times counted from its own start"}


def _read(spec, latency: bool):
    """The raw records of the trace in its format."""
    fmt = spec.format
    if fmt == "blktrace":
        from blksim.traces.blktrace import read_blktrace
        return read_blktrace(spec.path, events=spec.events, latency=latency,
                             device=spec.device)
    if fmt == "disksim":
        from blksim.traces.disksim_ascii import read_disksim_ascii
        return read_disksim_ascii(spec.path, time_unit=spec.time_unit or "ms")
    from blksim.traces import detect
    known = detect.formats().get(fmt)
    if known is None:
        raise ReplayError(f"{_name(spec)}: format {fmt!r} is not supported")
    options = {}
    if "events" in known.options:
        options["events"] = spec.events
    if "latency" in known.options:
        options["latency"] = latency
    if "time_unit" in known.options and spec.time_unit is not None:
        options["time_unit"] = spec.time_unit
    return detect.open_trace(spec.path, format=fmt, **options)


def _too_big(rec, capacity: int, spec) -> ReplayError:
    return ReplayError(f"{_name(spec)}: request at {rec.time!r} s is {rec.nr_sectors} sectors, "
                       f"larger than the simulated drive ({capacity} sectors)")


def _wrap(records, capacity: int, stats: ReplayStats, spec):
    """Sectors beyond the drive wrap around: ``sector mod capacity``, moved back
    so the request ends at the last sector if it would run past it."""
    for r in records:
        n = r.nr_sectors
        if r.sector + n > capacity:
            if n > capacity:
                raise _too_big(r, capacity, spec)
            s = r.sector % capacity
            if s + n > capacity:
                s = capacity - n
            stats.remapped += 1
            r = r._replace(sector=s)
        yield r


def _scale(records, capacity: int, span: int, stats: ReplayStats, spec):
    """Sectors scaled by ``capacity / span`` (the trace's highest end sector),
    so the trace's whole volume maps onto the drive, keeping relative positions."""
    for r in records:
        n = r.nr_sectors
        if n > capacity:
            raise _too_big(r, capacity, spec)
        s = r.sector * capacity // span
        if s + n > capacity:
            s = capacity - n
        stats.remapped += 1
        yield r._replace(sector=s)


def out_of_range_error(spec, index: int, rec, capacity: int) -> ReplayError:
    """The error for the first request beyond the drive when ``remap = "none"``."""
    return ReplayError(
        f"{_name(spec)}: request #{index + 1} of the replay (trace time {rec.time!r} s, "
        f"pid {rec.pid}) covers sectors {rec.sector}..{rec.sector + rec.nr_sectors - 1}, "
        f"beyond the simulated drive's {capacity} sectors"
        + (f" (the trace's sector 0 is at its offset, sector {spec.offset})"
           if spec.offset else "")
        + "; set remap = \"wrap\" or \"scale\" (or --remap) to fold the trace's volume "
          "onto the drive")


def describe(spec, stats: ReplayStats, think_basis: str | None) -> dict:
    """The ``replay`` entry of results.json for one trace."""
    out = {
        "path": spec.path, "format": spec.format, "name": spec.name,
        "mode": spec.mode, "speed": spec.speed, "remap": spec.remap,
        "requests": stats.requests, "processes": len(stats.processes),
    }
    if spec.format == "blktrace":
        out["events"] = spec.events
    if spec.offset:
        out["offset_sectors"] = spec.offset
    if spec.align != "start":
        out["align"] = spec.align
        out["clock"] = stats.clock
        out["shift_s"] = stats.shift
    keys = ["max_gap", "start", "end", "max_requests", "device", "volume"]
    if spec.device is None and spec.volume is None:
        keys.append("devno")
    for key in keys:
        value = getattr(spec, key)
        if value is not None and not (key == "start" and value == 0):
            out[key] = value
    if spec.device_name:
        out["device_name"] = spec.device_name
    if len(stats.devices) > 1:
        out["traced_devices"] = sorted(map(str, stats.devices))
    if spec.remap != "none":
        out["remapped"] = stats.remapped
    if spec.remap == "scale":
        out["trace_sectors"] = stats.trace_sectors
    if spec.mode == "closed":
        out["think_time"] = think_basis
        out["lookahead_records"] = LOOKAHEAD
    return out
