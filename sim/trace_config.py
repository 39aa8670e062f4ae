"""The ``[[trace]]`` tables: the trace to replay, its format (given or detected) and the
replay's options (docs/replay.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from blksim.common.config_values import ConfigError, sectors_value, seconds_text
from blksim.common.config_values import check_keys as _check_keys, int_value as _int, time_value as _time
from blksim.sim.job_config import target
from blksim.sim.storage_config import PRIMARY


TRACE_KEYS = {
    "path": "the trace file (relative to the configuration file); blktrace: a file, "
            "NAME for NAME.blktrace.N, or a directory",
    "format": "trace format (default: detected from the file): disksim, blktrace, or any "
              "other registered format",
    "time_unit": "disksim: unit of the arrival column: ms (default), us or ns",
    "events": "blktrace: replay Q (queued bios, default) or D (requests issued to the drive)",
    "mode": "open (default: submit at the recorded times) or closed (per process: wait for "
            "the previous request, then the recorded think time)",
    "speed": "time scale: 2 replays twice as fast (default 1)",
    "max_gap": "cap every gap between requests (trace time) at this, e.g. \"100ms\"",
    "start": "replay only requests at or after this trace time, e.g. \"10s\"",
    "end": "replay only requests before this trace time",
    "max_requests": "stop after this many requests",
    "device": "replay only this device, \"MAJOR,MINOR\" as blkparse prints it, optionally "
              "\"=NAME\" to label it, e.g. \"8,16=sdb\"",
    "volume": "replay only this volume: the trace's device key, a number (SPC ASU, Tencent "
              "VolumeID, Alibaba device_id) or a name (MSR \"hm_1\")",
    "devno": "replay only this device number (DiskSim's devno column)",
    "remap": "requests beyond the simulated drive: none (default: an error), wrap (modulo "
             "the drive's size) or scale (the trace's volume shrunk onto the drive)",
    "trace_sectors": "with remap = scale: the traced volume's size in sectors (default: the "
                     "highest sector the trace touches, found by reading it once first)",
    "name": "process name for reports (default trace)",
    "pid": "pid given to the trace's bios that carry none (default 900 + index)",
    "filename": "the device to replay on: a disk, partition or volume such as \"/dev/sdb\" "
                "(default sda)",
    "offset": "where the trace's sector 0 lands on its device: bytes or with units, a "
              "multiple of 512, e.g. \"100g\" (default 0); the trace's volume is the "
              "device from there to its end",
    "align": "start (default: the trace's time 0 is the run's) or clock (traces with "
             "align = clock keep their recorded clocks: the earliest of them starts the run, "
             "the others keep their distance from it)",
}

#: The values of a [[trace]]'s ``align`` (docs/replay.md).
ALIGNS = ("start", "clock")


@dataclass
class TraceSpec:
    """A trace to replay, with its replay options (see ``docs/replay.md``).

    ``devno`` is the device number records are selected by: DiskSim's devno
    column, a CSV volume, or blktrace's ``MAJOR << 20 | MINOR`` from ``device``.
    Times are seconds.
    """

    path: str
    format: str = "disksim"
    time_unit: str | None = "ms"
    max_requests: int | None = None
    devno: int | str | None = None
    name: str = "trace"
    pid: int = 900
    events: str = "Q"
    mode: str = "open"
    speed: float = 1.0
    max_gap: float | None = None
    start: float = 0.0
    end: float | None = None
    device: str | None = None
    device_name: str | None = None
    volume: int | str | None = None
    remap: str = "none"
    trace_sectors: int | None = None
    filename: str = PRIMARY
    offset: int = 0                 # sectors: where the trace's sector 0 lands
    align: str = "start"

    def table(self) -> dict:
        """The [[trace]] table that gives this spec back (every option explicit)."""
        t = {"path": self.path, "format": self.format, "name": self.name, "pid": self.pid,
             "mode": self.mode, "speed": self.speed, "remap": self.remap}
        if self.time_unit is not None:
            t["time_unit"] = self.time_unit
        if self.format == "blktrace":
            t["events"] = self.events
        if self.start:
            t["start"] = seconds_text(self.start)
        for key in ("max_gap", "end"):
            if getattr(self, key) is not None:
                t[key] = seconds_text(getattr(self, key))
        if self.device is not None:
            t["device"] = self.device + (f"={self.device_name}" if self.device_name else "")
        elif self.volume is not None:
            t["volume"] = self.volume
        elif self.devno is not None:
            t["devno"] = self.devno
        for key in ("max_requests", "trace_sectors"):
            if getattr(self, key) is not None:
                t[key] = getattr(self, key)
        if self.filename != PRIMARY:
            t["filename"] = self.filename
        if self.offset:
            t["offset"] = self.offset * 512
        if self.align != "start":
            t["align"] = self.align
        return t


def known_trace_formats() -> list[str]:
    """Every trace format a [[trace]] may name."""
    from blksim.traces import detect
    return list(detect.formats())


def detect_trace_format(path: str, where: str) -> str:
    """The format of the trace at ``path``, told from its content.

    A file no format recognises is read as DiskSim ASCII (the default before
    detection existed), so that its first bad line is named; a file several
    formats read is an error asking for ``format``.
    """
    from blksim.traces import detect
    try:
        return detect.detect_format(path)
    except (ValueError, OSError) as exc:
        if "ambiguous" in str(exc) or not os.path.isfile(path):
            raise ConfigError(f"{where}: {exc}") from None
        return "disksim"


def blktrace_set(path: str) -> bool:
    """Whether ``path`` names blktrace per-CPU files (NAME for NAME.blktrace.N, or a directory)."""
    from blksim.traces.blktrace import trace_files
    try:
        return bool(trace_files(path))
    except (OSError, ValueError):
        return False


def trace_spec(table: dict, path: str, where: str, index: int) -> TraceSpec:
    """Validate one [[trace]] table."""
    from blksim.traces.blktrace import parse_device
    fmt = table.get("format")
    formats = known_trace_formats()
    if fmt is None:
        fmt = detect_trace_format(path, where)
    if fmt not in formats:
        raise ConfigError(f"{where}: format {fmt!r} is not supported; valid: {', '.join(formats)}")
    unit = table.get("time_unit", "ms" if fmt == "disksim" else None)
    if unit is not None and unit not in ("ms", "us", "ns"):
        raise ConfigError(f"{where}: time_unit {unit!r} is not supported; valid: ms, us, ns")

    def choice(key, valid, default):
        value = table.get(key, default)
        if value not in valid:
            raise ConfigError(f"{where}: {key} = {value!r} is not supported; valid: "
                              f"{', '.join(valid)}")
        return value

    events = choice("events", ("Q", "D"), "Q")
    mode = choice("mode", ("open", "closed"), "open")
    remap = choice("remap", ("none", "wrap", "scale"), "none")
    align = choice("align", ALIGNS, "start")
    offset = sectors_value(table, "offset", where, 0)
    speed = table.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0 < speed < 1e9:
        raise ConfigError(f"{where}: speed must be a positive number (2 = twice as fast), "
                          f"found {speed!r}")
    max_gap = _time(table, "max_gap", where, None)
    start = _time(table, "start", where, 0) or 0.0
    end = _time(table, "end", where, None)
    if end is not None and end <= start:
        raise ConfigError(f"{where}: end ({table['end']!r}) must be after start "
                          f"({table.get('start', 0)!r})")
    selectors = [k for k in ("device", "volume", "devno") if k in table]
    if len(selectors) > 1:
        raise ConfigError(f"{where}: give one of device, volume and devno, not "
                          f"{' and '.join(selectors)}")
    device = device_name = None
    devno = _int(table, "devno", where, None, 0, 2**31)
    volume = table.get("volume")
    if volume is not None:
        if isinstance(volume, bool) or not isinstance(volume, (int, str)) or volume == "":
            raise ConfigError(f"{where}: volume must be the trace's volume / disk key (a number "
                              f"such as 3, or a name such as \"hm_1\"), found {volume!r}")
        devno = volume
    if "device" in table:
        text = str(table["device"])
        dev_text, _, device_name = text.partition("=")
        try:
            devno = parse_device(dev_text)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        device = ",".join(x.strip() for x in dev_text.replace(":", ",").split(","))
        devno = device
        device_name = device_name.strip() or None
    return TraceSpec(
        path=path, format=fmt, time_unit=unit,
        max_requests=_int(table, "max_requests", where, None, 1, 2**62),
        devno=devno, name=str(table.get("name", "trace")),
        pid=_int(table, "pid", where, 900 + index, 1, 2**22),
        events=events, mode=mode, speed=float(speed), max_gap=max_gap, start=start, end=end,
        device=device, device_name=device_name, volume=volume, remap=remap,
        trace_sectors=_int(table, "trace_sectors", where, None, 1, 2**62),
        offset=offset, align=align)


def resolve_traces(trace_tables, source: str, aliases: dict) -> list:
    """The ``[[trace]]`` tables as `TraceSpec`s (``aliases``: every name of a device of
    the run -> its block device)."""
    traces = []
    if not isinstance(trace_tables, list):
        raise ConfigError(f"{source}: trace must be an array of tables ([[trace]])")
    for i, table in enumerate(trace_tables):
        where = f"{source}: trace #{i + 1}"
        _check_keys(table, TRACE_KEYS, where)
        if "path" not in table:
            raise ConfigError(f"{where}: path is required")
        path = str(table["path"])
        if not os.path.isabs(path):
            path = os.path.join(os.path.dirname(os.path.abspath(source)), path)
        if not os.path.isfile(path) and not blktrace_set(path):
            raise ConfigError(f"{where}: path {table['path']!r}: no such file ({path})")
        spec = trace_spec(table, path, where, i)
        if "filename" in table:
            spec.filename = target(table["filename"], f"{where}: filename", aliases)
            if aliases.get(spec.filename) == spec.filename and spec.filename.startswith("/"):
                raise ConfigError(f"{where}: filename: {table['filename']!r} is a file; a trace "
                                  f"replays on a disk, partition or volume (its records are "
                                  f"the device's sectors)")
        traces.append(spec)
    return traces
