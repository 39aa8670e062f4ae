"""Run configuration: TOML files, ``--set`` overrides by sysfs path, validation.

A configuration file has the tables ``[run]``, ``[device]``, ``[queue]`` (with
``[queue.iosched]``), any number of ``[[job]]`` and ``[[trace]]``, and
``[[switch]]`` tables that change the scheduler at a given simulated time. Keys
under ``queue`` and ``device`` carry the kernel's sysfs names and units, so
``--set queue/iosched/fifo_batch=8`` or ``--set device/queue_depth=4`` address
them directly. Every error names the file and the key, what was expected and
what was found; unknown names list the valid ones.
"""

from __future__ import annotations

import os
from blksim._compat import tomllib
from dataclasses import dataclass, field

from blksim.schedulers import SCHEDULERS, get_scheduler
from blksim.sim.storage_config import PRIMARY, seconds_text
from blksim.block.elevator import resolve_tunables
from blksim.common.config_values import ConfigError  # noqa: F401 (re-exported: callers catch it from here)
from blksim.common.config_values import check_keys as _check_keys, int_value as _int, time_value as _time


KNOWN_KERNELS = ("2.6.18", "2.6.24", "2.6.32")
KNOWN_HZ = (100, 250, 300, 1000)

RUN_KEYS = {
    "name": "a label for this run",
    "seed": "integer seed of every random choice (default 1)",
    "duration": "simulated time limit, e.g. \"30s\" (default: until every workload ends)",
    "ramp_time": "simulated time before measurement starts, e.g. \"2s\" (default 0)",
    "kernel": f"kernel behaviour to follow: one of {', '.join(KNOWN_KERNELS)} (default 2.6.18)",
    "hz": f"timer frequency: one of {', '.join(map(str, KNOWN_HZ))} (default 250)",
    "client_timeout": "count the I/Os whose latency (Q2C) exceeds this, per process, "
                      "e.g. \"500ms\" (default: not counted)",
}
SWITCH_KEYS = {
    "at": "simulated time of the switch, e.g. \"30s\" (after the previous switch, before "
          "[run] duration)",
    "scheduler": "the elevator written to queue/scheduler at that time",
    "iosched": "table of the new scheduler's tunables (queue/iosched/...)",
    "device": "the disk whose queue/scheduler is written (default sda)",
}
QUEUE_KEYS = {
    "scheduler": "the elevator: " + ", ".join(SCHEDULERS),
    "nr_requests": "requests per direction before submitters block (default 128, range 4..1048576)",
    "max_sectors_kb": "largest request in KiB (default 512, range 4..max_hw_sectors_kb)",
    "max_hw_sectors_kb": "the driver's limit in KiB (default 512 = SCSI's 1024 sectors)",
    "nomerges": "0 all merges, 1 only the one-hit cache, 2 none (default 0)",
    "read_ahead_kb": "file read-ahead's largest window, KiB (default 128; 0: none)",
    "iosched": "table of the scheduler's tunables (queue/iosched/...)",
}
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
}
#: A disk's table besides its device's keys (`blksim.disk_models.registry.device_keys`).
DISK_TABLE_KEYS = {"queue": "the disk's request queue: a table with the keys of [queue]",
                   "partition": "the disk's partitions ([[devices.NAME.partition]])"}
HOST_KEYS = {
    "memory": "the host's memory, bytes, whole 4 KiB pages (default 4g)",
    "page_cache": "memory the page cache may use, bytes, whole 4 KiB pages, more than 0 "
                  "(default 3/4 of memory)",
    "copy_mb_per_s": "how fast a buffered call copies between the page cache and the "
                     "process, MB/s of 10^6 bytes (default 2000)",
}
VM_KEYS = {
    "dirty_ratio": "per cent of memory dirty before writers are throttled (default 40)",
    "dirty_background_ratio": "per cent of memory dirty that starts background writeback "
                              "(default 10)",
    "dirty_expire_centisecs": "age at which dirty data is written back, 1/100 s (default 3000)",
    "dirty_writeback_centisecs": "interval of pdflush's periodic writeback, 1/100 s "
                                 "(default 500; 0: none)",
}
TOP_KEYS = ("fio", "run", "host", "vm", "filesystems", "app", "device", "queue", "devices", "volumes", "file", "job",
            "trace", "switch")


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
        return t


@dataclass(frozen=True)
class SwitchSpec:
    """A ``[[switch]]``: at ``at`` seconds write ``scheduler`` to ``queue/scheduler``;
    the new elevator gets the ``iosched`` tunables (every one resolved). A switch to
    the scheduler already active does nothing and has no ``iosched`` (empty)."""

    at: float
    scheduler: str
    iosched: dict
    device: str = "sda"

    def table(self) -> dict:
        """The [[switch]] table that gives this spec back."""
        t = {"at": seconds_text(self.at), "scheduler": self.scheduler}
        if self.device != PRIMARY:
            t["device"] = self.device
        if self.iosched:
            t["iosched"] = dict(self.iosched)
        return t


@dataclass
class RunConfig:
    """Everything one simulation needs, validated and with defaults filled in.

    ``devices``: the disks by name (`storage_config.DeviceConfig`), sda first;
    ``volumes``: the device-mapper volumes; ``job_files``: per job, the devices it works
    on. ``drive``, ``scheduler``, ``iosched``, ... are sda's."""

    source: str
    name: str
    seed: int
    duration: float | None
    ramp_time: float
    kernel: str
    hz: int
    devices: dict
    volumes: list = field(default_factory=list)
    files: list = field(default_factory=list)
    memory: int = 4 << 30
    page_cache: int = 3 << 30
    copy_rate: float = 2e9             # bytes/s between the page cache and a process
    vm: dict = field(default_factory=dict)
    filesystems: dict = field(default_factory=dict)   # device -> storage_config.FsConfig
    apps: list = field(default_factory=list)          # each model's configuration (sim.apps)
    jobs: list = field(default_factory=list)
    traces: list = field(default_factory=list)
    job_tables: list = field(default_factory=list)
    job_files: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    client_timeout: float | None = None
    switches: list = field(default_factory=list)
    # the scheduler a comparison gave the disks it varies (None: not a comparison run)
    compared: str | None = None

    @property
    def primary(self):
        """sda's `storage_config.DeviceConfig`."""
        return self.devices[PRIMARY]

    @property
    def stacked(self) -> bool:
        """True when the run has more than the one disk sda, unpartitioned, or files."""
        return (len(self.devices) > 1 or bool(self.volumes) or bool(self.primary.partitions)
                or bool(self.files))


def _primary_field(name: str):
    return property(lambda self: getattr(self.devices[PRIMARY], name),
                    doc=f"sda's {name}")


for _name in ("queue_depth", "scheduler", "nr_requests", "max_sectors_kb", "max_hw_sectors_kb",
              "nomerges", "iosched"):
    setattr(RunConfig, _name, _primary_field(_name))
del _name


# ---------------------------------------------------------------------- loading

def load_file(path: str) -> dict:
    """Read a TOML configuration file into a dict (errors name the file)."""
    from blksim._compat import TomlFileError, load_toml
    try:
        return load_toml(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected a TOML file") from None
    except TomlFileError as exc:
        fmt = _trace_format(path)
        if fmt is not None:
            raise ConfigError(f"{path}: this is a trace ({fmt}), not a configuration: replay it "
                              f"with `blksim replay {path} --drive NAME`, or name it in a "
                              f"[[trace]] table's path") from None
        raise ConfigError(str(exc)) from None


def _trace_format(path: str) -> str | None:
    """The trace format ``path`` reads as, if it is a trace (None otherwise)."""
    from blksim.traces.detect import detect_format
    try:
        return detect_format(path)
    except Exception:                 # not a trace either: the TOML error stands
        return None


def iosched_leniency(scheduler: str | None, sets: list):
    """``resolve``'s ``lenient_iosched`` for a run whose scheduler the caller chooses
    (``scheduler``, or a ``--set .../queue/scheduler`` among ``sets``): False when none is
    chosen; else the names of the queue/iosched tunables ``sets`` asks for explicitly (a
    frozenset, maybe empty), which stay errors while the configured scheduler's other
    tunables that the chosen one lacks are left out."""
    paths = [str(item).split("=", 1)[0].strip().strip("/") for item in sets]
    if scheduler is None and not any(p.endswith("queue/scheduler") for p in paths):
        return False
    return frozenset(p.split("/")[-1] for p in paths if "/iosched/" in f"/{p}")


def parse_override_value(text: str):
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except ValueError:          # not TOML (or an integer beyond int()'s digit limit): text
        return text


def apply_overrides(raw: dict, sets: list[str]) -> dict:
    """Apply ``--set PATH=VALUE`` overrides; PATH is a sysfs-style path such as
    ``queue/iosched/fifo_batch``, ``queue/nr_requests``, ``device/queue_depth`` or
    ``run/seed``; a disk's name before it (``sdb/queue/scheduler``) addresses that disk
    (without one: sda). Returns a new dict."""
    out = _deep_copy(raw)
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected PATH=VALUE, e.g. queue/nr_requests=64")
        path, text = item.split("=", 1)
        parts = [p for p in path.strip().strip("/").split("/") if p]
        if parts[:1] == ["sys"] or parts[:2] == ["block"]:
            raise ConfigError(f"--set {item!r}: give the path below the device, e.g. "
                              f"queue/iosched/fifo_batch=8")
        base = out
        if len(parts) >= 3 and parts[0] not in ("queue", "device", "run") \
                and parts[1] in ("queue", "device"):
            disk, parts = parts[0], parts[1:]
            disks = out.get("devices")
            if isinstance(disks, dict) and isinstance(disks.get(disk), dict):
                base = disks[disk]
                # [devices.NAME] holds the device keys itself and its queue as a sub-table
                if parts[0] == "device":
                    parts = parts[1:]
                    if len(parts) != 1:
                        raise ConfigError(f"--set {item!r}: unknown path {path!r}")
            elif disk != PRIMARY:
                known = [PRIMARY] + [d for d in (disks or {}) if d != PRIMARY]
                raise ConfigError(f"--set {item!r}: no disk {disk!r} in the configuration; "
                                  f"disks: {', '.join(known)}")
            if not parts:
                raise ConfigError(f"--set {item!r}: unknown path {path!r}")
        if base is out or parts[0] == "queue":
            if len(parts) < 2 or parts[0] not in ("queue", "device", "run"):
                raise ConfigError(f"--set {item!r}: PATH must start with queue/, device/ or "
                                  f"run/, or a disk's name and queue/ or device/ (e.g. "
                                  f"queue/iosched/fifo_batch=8, sdb/queue/scheduler=cfq)")
            if parts[0] == "queue" and len(parts) == 3 and parts[1] != "iosched":
                raise ConfigError(f"--set {item!r}: unknown path; queue tunables are "
                                  f"queue/<name> and queue/iosched/<name>")
            if len(parts) > 3 or (parts[0] != "queue" and len(parts) != 2):
                raise ConfigError(f"--set {item!r}: unknown path {path!r}")
            if base is not out and parts[0] == "run":
                raise ConfigError(f"--set {item!r}: run/ settings belong to no disk")
        node = base
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {item!r}: {p} is not a table")
            node = nxt
        node[parts[-1]] = parse_override_value(text.strip())
    return out


def _deep_copy(x):
    if isinstance(x, dict):
        return {k: _deep_copy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_deep_copy(v) for v in x]
    return x


# ---------------------------------------------------------------------- validation

def resolve(raw: dict, source: str, scheduler: str | None = None,
            lenient_iosched: bool | frozenset = False, device_sectors: int | None = None,
            scheduler_devices=None) -> RunConfig:
    """Validate a raw configuration dict and fill in every default.

    ``scheduler`` overrides ``queue/scheduler`` of the disks named in
    ``scheduler_devices`` (default: every disk), for comparisons. With
    ``lenient_iosched`` tunables the chosen scheduler does not have are dropped
    (a comparison applies each tunable to the schedulers that know it), but for those
    named when it is a frozenset (`iosched_leniency`).
    Job regions are checked against the drive's size (``device_sectors``
    overrides it, for devices that are not drives).
    """
    from blksim.traces.jobs import parse_jobs

    _check_keys(raw, TOP_KEYS, source)
    run = raw.get("run", {})
    _check_keys(run, RUN_KEYS, f"{source}: [run]")

    seed = _int(run, "seed", f"{source}: [run]", 1, 0, 2**63 - 1)
    kernel = str(run.get("kernel", "2.6.18"))
    if kernel not in KNOWN_KERNELS:
        raise ConfigError(f"{source}: [run] kernel = {kernel!r} is not supported; "
                          f"valid: {', '.join(KNOWN_KERNELS)}")
    hz = run.get("hz", 250)
    if hz not in KNOWN_HZ or isinstance(hz, bool):
        raise ConfigError(f"{source}: [run] hz = {hz!r} is not supported; "
                          f"valid: {', '.join(map(str, KNOWN_HZ))}")
    duration = _time(run, "duration", f"{source}: [run]", None)
    if duration is not None and duration <= 0:
        raise ConfigError(f"{source}: [run] duration must be positive, found {run['duration']!r}")
    ramp = _time(run, "ramp_time", f"{source}: [run]", 0) or 0.0
    if duration is not None and ramp >= duration:
        raise ConfigError(f"{source}: [run] ramp_time = {run['ramp_time']!r} leaves nothing "
                          f"to measure: it must be shorter than duration = "
                          f"{run['duration']!r}")
    client_timeout = _time(run, "client_timeout", f"{source}: [run]", None)
    if client_timeout is not None and client_timeout <= 0:
        raise ConfigError(f"{source}: [run] client_timeout must be positive, "
                          f"found {run['client_timeout']!r}")

    devices, volumes, aliases, sizes = _storage(raw, source, scheduler, lenient_iosched,
                                                device_sectors, scheduler_devices)
    from blksim.sim.storage_config import files as file_configs
    from blksim.sim.storage_config import filesystems as fs_configs
    filesystems = fs_configs(raw.get("filesystems", {}), sizes, aliases, source)
    file_tables = raw.get("file", [])
    memory, page_cache, copy_rate = _host(raw.get("host", {}), source)
    if raw.get("app"):
        from blksim.apps import parse_apps
        from blksim.sim.storage_config import first_free
        # the apps' file sets go after the configured files (placed once to see where)
        placed = file_configs(file_tables, sizes, aliases, source, filesystems)
        # each model checks its keys against the host's memory and the run's duration
        apps, app_files = parse_apps(raw["app"], source, aliases, sizes, seed,
                                     first_free(placed, filesystems), memory, page_cache,
                                     duration)
        file_tables = list(file_tables) + app_files
    else:
        apps = []
    files = file_configs(file_tables, sizes, aliases, source, filesystems)
    _check_overlaps(raw, source, devices, volumes, filesystems, files, apps, aliases, sizes)
    for f in files:
        aliases[f.path] = f.path
        sizes[f.path] = f.sectors
    vm = _vm(raw.get("vm", {}), source)

    jobs = []
    job_tables = raw.get("job", [])
    if not isinstance(job_tables, list):
        raise ConfigError(f"{source}: job must be an array of tables ([[job]])")
    fio_tables, warnings = _fio_jobs(raw.get("fio"), source)
    job_tables = fio_tables + list(job_tables)
    job_targets = [_job_files(t, i, source, aliases) for i, t in enumerate(job_tables)]
    if job_tables:
        try:
            # a job over several files works on each one; its region must fit the smallest
            jobs = parse_jobs(job_tables, source, [min(sizes[f] for f in files)
                                                   for files in job_targets])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for k, (job, targets) in enumerate(zip(jobs, job_targets)):
            _check_file_io(job, targets, aliases, source)
            jobs[k] = _engine_depth(job, targets, aliases, source, warnings)
    # fio's per-job ramp_time: the run measures from the latest one (one window for all)
    for job in jobs:
        if job.ramp_time > ramp:
            ramp = job.ramp_time
            if duration is not None and ramp >= duration:
                raise ConfigError(f"{source}: job {job.name!r}: ramp_time leaves nothing to "
                                  f"measure: it must be shorter than the run's duration")

    traces = []
    trace_tables = raw.get("trace", [])
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
        if not os.path.isfile(path) and not _blktrace_set(path):
            raise ConfigError(f"{where}: path {table['path']!r}: no such file ({path})")
        spec = _trace_spec(table, path, where, i)
        if "filename" in table:
            spec.filename = _target(table["filename"], f"{where}: filename", aliases)
            if aliases.get(spec.filename) == spec.filename and spec.filename.startswith("/"):
                raise ConfigError(f"{where}: filename: {table['filename']!r} is a file; a trace "
                                  f"replays on a disk, partition or volume (its records are "
                                  f"the device's sectors)")
        traces.append(spec)
    if not jobs and not traces and not apps:
        raise ConfigError(f"{source}: nothing to run: add a [[job]], a [[trace]] or an "
                          f"[[app]]")
    switches = _switches(raw.get("switch", []), source, devices, duration, run)

    return RunConfig(
        source=source, name=str(run.get("name", os.path.splitext(os.path.basename(source))[0])),
        seed=seed, duration=duration, ramp_time=ramp, kernel=kernel, hz=hz,
        devices=devices, volumes=volumes, files=files, memory=memory, page_cache=page_cache,
        copy_rate=copy_rate, vm=vm, filesystems=filesystems, apps=apps,
        jobs=jobs, traces=traces,
        job_tables=[dict(t) for t in job_tables], job_files=job_targets,
        warnings=warnings + _dropped_notes(devices, source),
        client_timeout=client_timeout, switches=switches,
        compared=None if scheduler is None else devices[next(
            d for d in devices if scheduler_devices is None or d in scheduler_devices)].scheduler)


def _check_overlaps(raw: dict, source: str, devices: dict, volumes: list, filesystems: dict,
                    files: list, apps: list, aliases: dict, sizes: dict) -> None:
    """No two consumers of space on the whole stack share a sector unless one lies in the
    other by design (`blksim.sim.overlaps`); each is named by its table and key."""
    from blksim.sim import overlaps
    extra = raw.get("devices") or {}
    disk_where = {name: f"[devices.{name}]" if name in extra else "[device]"
                  for name in devices}
    fs_where = {aliases[key]: f"[filesystems.{key!r}]"
                for key in (raw.get("filesystems") or {})}
    configured = len(raw.get("file", []))
    owner = {path: (k, app) for k, app in enumerate(apps) for path in app.files}
    what = []
    for i, f in enumerate(files):
        if i < configured or f.path not in owner:
            what.append(f"[[file]] #{i + 1} ({f.path})")
        else:
            k, app = owner[f.path]
            what.append(f"[[app]] #{k + 1} ({app.name}) file {f.path}")
    overlaps.check(overlaps.storage_uses(devices, disk_where, volumes, filesystems, fs_where,
                                         files, what, sizes), source,
                   {v.dm_name: f"{v.name} ({v.dm_name})" for v in volumes})


def _storage(raw: dict, source: str, scheduler: str | None, lenient_iosched: bool,
             device_sectors: int | None, scheduler_devices) -> tuple:
    """The run's disks (with partitions) and volumes: (devices by name, volumes, every
    name a job may use -> the device's name, sectors by device name)."""
    from blksim.sim import storage_config as sc
    device = raw.get("device", {})
    queue = raw.get("queue", {})
    from blksim.disk_models.registry import device_keys
    _check_keys(device, {**device_keys(), "partition": "partitions ([[device.partition]])"},
                f"{source}: [device]")
    _check_keys(queue, QUEUE_KEYS, f"{source}: [queue]")
    extra = raw.get("devices", {})
    if not isinstance(extra, dict):
        raise ConfigError(f"{source}: devices must be a table of disks ([devices.sdb])")
    tables = {}
    if sc.PRIMARY in extra:
        if device or queue:
            raise ConfigError(f"{source}: [devices.{sc.PRIMARY}] and [device]/[queue] both "
                              f"describe {sc.PRIMARY}; give one of them")
    else:
        tables[sc.PRIMARY] = (device, queue, False)
    for name, table in extra.items():
        sc.check_disk_name(name, f"{source}: [devices.{name}]")
        _check_keys(table, {**device_keys(), **DISK_TABLE_KEYS}, f"{source}: [devices.{name}]")
        tables[name] = (table, table.get("queue", {}), True)
    if len(tables) > 16 + 16 * 15:
        sc.disk_numbers(len(tables))          # raises: more disks than Linux numbers
    if scheduler_devices is not None:
        unknown = [d for d in scheduler_devices if d not in tables]
        if unknown:
            raise ConfigError(f"{source}: no disk {unknown[0]!r} to vary the scheduler of; "
                              f"disks: {', '.join(tables)}")
    devices = {}
    aliases: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for name, (dev, q, in_devices) in tables.items():
        varied = scheduler_devices is None or name in scheduler_devices
        cfg = _device(name, dev, q, source, in_devices, scheduler if varied else None,
                      lenient_iosched if varied else False,
                      device_sectors if name == sc.PRIMARY else None)
        where = f"{source}: [devices.{name}]" if in_devices else f"{source}: [device]"
        cfg.partitions = sc.partitions(dev.get("partition", []), name, cfg.sectors, where)
        devices[name] = cfg
        for block in [name] + [p.name for p in cfg.partitions]:
            for alias in sc.device_aliases(block):
                aliases[alias] = block
        sizes[name] = cfg.sectors
        for part in cfg.partitions:
            sizes[part.name] = part.sectors
    volumes = sc.volumes(raw.get("volumes", {}), dict(sizes), aliases, source)
    for vol in volumes:
        for alias in sc.volume_aliases(vol.name, vol.dm_name):
            if alias in aliases:
                raise ConfigError(f"{source}: [volumes.{vol.name}]: the name {alias!r} is "
                                  f"already a disk's or partition's")
            aliases[alias] = vol.dm_name
        sizes[vol.dm_name] = vol.sectors
    return devices, volumes, aliases, sizes


def _check_file_io(job, files, aliases: dict, source: str) -> None:
    """What the I/O path models: buffered reads and direct I/O to files, direct I/O to
    devices."""
    where = f"{source}: job {job.name!r}"
    on_files = [f for f in files if f.startswith("/") and aliases.get(f) == f]
    if on_files and len(on_files) != len(files):
        raise ConfigError(f"{where}: filename mixes files and devices; give one kind")
    if not on_files and (job.fsync or job.end_fsync):
        raise ConfigError(f"{where}: fsync needs a file: a job on a device writes no dirty "
                          f"pages to sync; put a [[file]] on it")
    if not on_files and job.direct is False:
        raise ConfigError(f"{where}: direct = 0 on a device: buffered I/O through a block "
                          f"device's own page cache is not modelled (a job on a device "
                          f"submits its bios directly); put a [[file]] on it instead")


def _dropped_notes(devices: dict, source: str) -> list:
    """A note per disk whose configured tunables the run's scheduler does not have (a
    comparison or --scheduler leaves them out)."""
    out = []
    for name, dev in devices.items():
        dropped = getattr(dev, "dropped_tunables", [])
        if dropped:
            out.append(f"{source}: {name}: {dev.scheduler} has no tunable "
                       f"{', '.join('queue/iosched/' + t for t in dropped)}; left out for this "
                       f"run")
    return out


def _engine_depth(job, targets, aliases: dict, source: str, warnings: list):
    """fio's I/O engines: a synchronous one keeps one I/O in flight; libaio keeps
    ``iodepth``, except on buffered files, where Linux 2.6's io_submit does the I/O
    synchronously. A capped depth is said in a warning, as fio notes it."""
    from dataclasses import replace
    from blksim.traces.jobs import SYNC_ENGINES
    if job.ioengine is None or job.iodepth <= 1:
        return job
    on_files = all(t.startswith("/") and aliases.get(t) == t for t in targets)
    if job.ioengine in SYNC_ENGINES:
        why = f"ioengine {job.ioengine} is synchronous"
    elif on_files and not job.direct:
        why = "libaio on a buffered file is synchronous in Linux 2.6"
    else:
        return job
    warnings.append(f"{source}: job {job.name!r}: iodepth {job.iodepth} capped at 1 ({why})")
    return replace(job, iodepth=1)


def _vm(table, source: str) -> dict:
    """``[vm]``: the writeback tunables, by their /proc/sys/vm names."""
    from blksim.hostio.writeback import VM_DEFAULTS
    where = f"{source}: [vm]"
    _check_keys(table, VM_KEYS, where)
    out = {}
    for key, default in VM_DEFAULTS.items():
        hi = 100 if key.endswith("ratio") else 10 ** 8
        out[key] = _int(table, key, where, default, 0, hi)
    if out["dirty_ratio"] < out["dirty_background_ratio"]:
        raise ConfigError(f"{where}: dirty_ratio = {out['dirty_ratio']} is below "
                          f"dirty_background_ratio = {out['dirty_background_ratio']}: "
                          f"expected dirty_ratio >= dirty_background_ratio")
    return out


PAGE_BYTES = 4096


def _host(table, source: str) -> tuple:
    """``[host]``: the memory and the page cache's share of it, in bytes."""
    from blksim.common.units import parse_size
    where = f"{source}: [host]"
    _check_keys(table, HOST_KEYS, where)
    values = {}
    for key, default in (("memory", "4g"), ("page_cache", None)):
        if key not in table and default is None:
            continue
        try:
            values[key] = parse_size(table.get(key, default), key)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    memory = values["memory"]
    if memory < 1 << 20 or memory % PAGE_BYTES:
        raise ConfigError(f"{where}: memory expected a multiple of 4 KiB (a page), at least "
                          f"1m, found {table['memory']!r}")
    # the kernel counts memory and the page cache in pages (mm/page_alloc.c): neither
    # holds a part of one, and a cache of no page holds no file data to read or write
    page_cache = values.get("page_cache", memory * 3 // 4 // PAGE_BYTES * PAGE_BYTES)
    if "page_cache" in values and (page_cache <= 0 or page_cache % PAGE_BYTES):
        raise ConfigError(f"{where}: page_cache expected a positive multiple of 4 KiB (a "
                          f"page), found {table['page_cache']!r}")
    if page_cache > memory:
        raise ConfigError(f"{where}: page_cache = {table['page_cache']!r} is more than memory "
                          f"({memory} bytes)")
    rate = table.get("copy_mb_per_s", 2000)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < 1e9:
        raise ConfigError(f"{where}: copy_mb_per_s expected a positive number, found {rate!r}")
    return memory, page_cache, float(rate) * 1e6


def _target(text, where: str, aliases: dict) -> str:
    """The device a ``filename`` names (a disk, partition or volume)."""
    if not isinstance(text, str) or not text:
        raise ConfigError(f"{where}: expected a device such as \"/dev/sdb\", found {text!r}")
    name = aliases.get(text.strip())
    if name is None:
        known = sorted({k for k in aliases if k.startswith("/dev/")})
        raise ConfigError(f"{where}: no device {text!r} in this run; devices: "
                          f"{', '.join(known)}")
    return name


def _job_files(table, index: int, source: str, aliases: dict) -> tuple:
    """The devices a job's ``filename`` names: one, or several separated by ':' as fio
    separates them (default: sda)."""
    from blksim.sim.storage_config import PRIMARY
    if not isinstance(table, dict) or table.get("filename") is None:
        return (PRIMARY,)
    name = table.get("name")
    where = f"{source}: job {name!r}: filename" if isinstance(name, str) \
        else f"{source}: job #{index + 1}: filename"
    text = table["filename"]
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: expected a device such as \"/dev/sdb\", found {text!r}")
    files = tuple(_target(part, where, aliases) for part in text.split(":"))
    if len(set(files)) != len(files):
        raise ConfigError(f"{where}: {text!r} names a device twice")
    return files


def _device(name: str, device: dict, queue: dict, source: str, in_devices: bool,
            scheduler: str | None, lenient_iosched: bool,
            device_sectors: int | None) -> "DeviceConfig":
    """One disk's device and queue tables, validated, every default filled in.

    ``sda`` is ``[device]`` and ``[queue]`` (sysfs paths ``queue/...``), any other disk
    ``[devices.NAME]`` and ``[devices.NAME.queue]`` (``NAME/queue/...``). The device's
    own keys are its type's (`blksim.disk_models.registry`)."""
    from blksim.disk_models import registry
    from blksim.sim.storage_config import DeviceConfig
    if in_devices:
        where_d, where_q = f"{source}: [devices.{name}]", f"{source}: [devices.{name}.queue]"
        where_top, qpath = where_q, f"{name}/queue/"
        where = registry.Where(source, f"[devices.{name}]")
    else:
        where_d, where_q = f"{source}: [device]", f"{source}: [queue]"
        where_top, qpath = source, "queue/"
        where = registry.Where(source, "[device]")
    device = {k: v for k, v in device.items() if k not in ("queue", "partition")}
    _check_keys(device, registry.device_keys(), where_d)
    _check_keys(queue, QUEUE_KEYS, where_q)
    dtype, settings = registry.parse(device, where)
    queue_depth = _int(device, "queue_depth", where_d, None, 1, 256)
    if queue_depth is None:
        queue_depth = dtype.queue_depth(settings)
    if not device_sectors:
        device_sectors = dtype.sectors(settings, where)

    sched = scheduler or queue.get("scheduler", "deadline")
    try:
        elevator_cls = get_scheduler(str(sched))
        # the name as given: a built-in's, an installed plugin's, or module:Class
        sched_name = str(sched)
    except ValueError as exc:
        raise ConfigError(f"{where_top}: {qpath}scheduler: {exc}") from None
    nr_requests = _int(queue, "nr_requests", where_q, 128, 4, 1 << 20)
    max_hw = _int(queue, "max_hw_sectors_kb", where_q, 512, 4, 32767)
    max_kb = _int(queue, "max_sectors_kb", where_q, min(512, max_hw), 4, max_hw)
    nomerges = _int(queue, "nomerges", where_q, 0, 0, 2)
    read_ahead_kb = _int(queue, "read_ahead_kb", where_q, 128, 0, 1 << 20)
    given = queue.get("iosched", {})
    if not isinstance(given, dict):
        raise ConfigError(f"{where_q}: iosched must be a table of tunables")
    dropped = []
    if lenient_iosched is not False:
        # a set of names (iosched_leniency): those were asked for explicitly and stay errors
        strict = lenient_iosched if isinstance(lenient_iosched, frozenset) else ()
        names = {t.name for t in elevator_cls.tunables}
        dropped = sorted(k for k in given if k not in names and k not in strict)
        given = {k: v for k, v in given.items() if k not in dropped}
    try:
        iosched = resolve_tunables(elevator_cls.tunables, given, sched_name)
    except ValueError as exc:
        raise ConfigError(f"{where_top}: {exc}") from None

    cfg = DeviceConfig(
        name=name, type=dtype.name, settings=settings, queue_depth=queue_depth,
        scheduler=sched_name, nr_requests=nr_requests, max_sectors_kb=max_kb,
        max_hw_sectors_kb=max_hw, nomerges=nomerges, iosched=iosched, sectors=device_sectors,
        read_ahead_kb=read_ahead_kb)
    cfg.dropped_tunables = dropped       # another scheduler's tunables, left out
    return cfg


def _switches(tables, source: str, devices: dict, duration: float | None, run: dict) -> list:
    """Validate the [[switch]] tables: times increasing and within the run, known
    disks, schedulers and tunables."""
    if not isinstance(tables, list):
        raise ConfigError(f"{source}: switch must be an array of tables ([[switch]])")
    out = []
    active = {name: dev.scheduler for name, dev in devices.items()}
    prev = None
    for i, table in enumerate(tables):
        where = f"{source}: [[switch]] #{i + 1}"
        _check_keys(table, SWITCH_KEYS, where)
        for key in ("at", "scheduler"):
            if key not in table:
                raise ConfigError(f"{where}: {key} is required ({SWITCH_KEYS[key]})")
        at = _time(table, "at", where, None)
        if at <= 0:
            raise ConfigError(f"{where}: at must be after the start of the run, "
                              f"found {table['at']!r}")
        if prev is not None and at <= prev[0]:
            raise ConfigError(f"{where}: at = {table['at']!r} must be later than the previous "
                              f"switch's at = {prev[1]!r} (switches in time order)")
        if duration is not None and at >= duration:
            raise ConfigError(f"{where}: at = {table['at']!r} is not before [run] duration = "
                              f"{run.get('duration')!r}")
        device = table.get("device", PRIMARY)
        if isinstance(device, str) and device.startswith("/dev/"):
            device = device[5:]
        if device not in active:
            raise ConfigError(f"{where}: device = {table['device']!r} is not a disk of this "
                              f"run; disks: {', '.join(active)}")
        current = active[device]
        name = str(table["scheduler"])
        try:
            cls = get_scheduler(name)
        except ValueError as exc:
            raise ConfigError(f"{where}: scheduler: {exc}") from None
        given = table.get("iosched", {})
        if not isinstance(given, dict):
            raise ConfigError(f"{where}: iosched must be a table of tunables")
        if name == current and given:
            raise ConfigError(f"{where}: scheduler {name!r} is already the active one, so "
                              f"the switch does nothing (as writing the same name to "
                              f"queue/scheduler) and cannot apply an iosched table")
        try:
            iosched = resolve_tunables(cls.tunables, given, name)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if name == current:
            iosched = {}                  # nothing changes, the tunables stay as they were
        out.append(SwitchSpec(at, name, iosched, device))
        active[device] = name
        prev = (at, table["at"])
    return out


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


def _blktrace_set(path: str) -> bool:
    """Whether ``path`` names blktrace per-CPU files (NAME for NAME.blktrace.N, or a directory)."""
    from blksim.traces.blktrace import trace_files
    try:
        return bool(trace_files(path))
    except (OSError, ValueError):
        return False


def _trace_spec(table: dict, path: str, where: str, index: int) -> TraceSpec:
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
        trace_sectors=_int(table, "trace_sectors", where, None, 1, 2**62))


def _fio_jobs(value, source: str) -> tuple[list, list]:
    """The jobs of the fio job file(s) named by the top-level ``fio`` key."""
    from blksim.traces.fiofile import FioFileError, read_fio_jobfile
    if value is None:
        return [], []
    paths = value if isinstance(value, list) else [value]
    tables: list = []
    warnings: list = []
    for p in paths:
        if not isinstance(p, str):
            raise ConfigError(f"{source}: fio must be a path to an fio job file (or a list of "
                              f"them), found {p!r}")
        path = p if os.path.isabs(p) else os.path.join(os.path.dirname(os.path.abspath(source)), p)
        try:
            t, w = read_fio_jobfile(path)
        except FioFileError as exc:
            raise ConfigError(str(exc)) from None
        tables += t
        warnings += w
    return tables, warnings


def input_files(cfg: RunConfig, raw: dict) -> list[str]:
    """Every file the run of ``cfg`` (resolved from ``raw``) reads besides its configuration,
    whose content its results depend on: drive and controller descriptions (the shipped
    presets' files included), traces (every per-CPU file of a blktrace capture), fio job
    files and the source of every scheduler plugin it loads (an experiment's run key hashes
    them, so that changing one makes a new run)."""
    import sys
    from blksim.disk_models.registry import device_type
    from blksim.traces.blktrace import trace_files

    base = os.path.dirname(os.path.abspath(cfg.source))
    files = []
    schedulers = [s.scheduler for s in cfg.switches]
    for dev in cfg.devices.values():
        schedulers.append(dev.scheduler)
        files += device_type(dev.type).files(dev.settings)
    for spec in cfg.traces:
        try:
            files += trace_files(spec.path)
        except (OSError, ValueError):
            files.append(spec.path)
    fio = raw.get("fio")
    for p in (fio if isinstance(fio, list) else [] if fio is None else [fio]):
        files.append(p if os.path.isabs(p) else os.path.join(base, p))
    for name in schedulers:
        module = sys.modules.get(get_scheduler(name).__module__)
        path = getattr(module, "__file__", None)
        if path and not module.__name__.startswith("blksim."):
            files.append(path)
    return sorted({os.path.abspath(f) for f in files})


def config_for_fio_jobfile(path: str) -> dict:
    """A raw configuration that runs an fio job file with every other setting at its default."""
    return {"fio": os.path.abspath(path)}


def check_iosched_known(raw: dict, schedulers: list[str], source: str,
                        devices=None) -> None:
    """For a comparison: every ``queue/iosched`` key of the disks compared (``devices``,
    default every disk) must belong to at least one of the schedulers."""
    from blksim.sim.storage_config import PRIMARY
    known: set[str] = set()
    for name in schedulers:
        known |= {t.name for t in get_scheduler(name).tunables}
    tables = [(PRIMARY, "queue/iosched", raw.get("queue", {}))]
    for disk, table in (raw.get("devices") or {}).items():
        if isinstance(table, dict):
            tables.append((disk, f"{disk}/queue/iosched", table.get("queue", {})))
    for disk, path, queue in tables:
        if devices is not None and disk not in devices:
            continue
        given = (queue.get("iosched", {}) if isinstance(queue, dict) else {}) or {}
        for key in (given if isinstance(given, dict) else {}):
            if key not in known:
                raise ConfigError(
                    f"{source}: unknown tunable {path}/{key} for schedulers "
                    f"{', '.join(schedulers)}; valid: {', '.join(sorted(known)) or '(none)'}")


def _disk_tables(dev, queue_depth: int) -> tuple[dict, dict]:
    """A disk's device and queue tables, every default written out."""
    from blksim.disk_models.registry import device_type
    device = device_type(dev.type).table(dev.settings, queue_depth)
    if dev.partitions:
        device["partition"] = [{"start": p.start * 512, "size": p.sectors * 512}
                               for p in dev.partitions]
    queue = {"scheduler": dev.scheduler, "nr_requests": dev.nr_requests,
             "max_sectors_kb": dev.max_sectors_kb, "max_hw_sectors_kb": dev.max_hw_sectors_kb,
             "nomerges": dev.nomerges, "read_ahead_kb": dev.read_ahead_kb,
             "iosched": dict(dev.iosched)}
    return device, queue


def resolved_dict(cfg: RunConfig, queue_depths) -> dict:
    """The configuration as a TOML-ready dict, every default written out.
    ``queue_depths``: each disk's queue depth by name (one number: sda's)."""
    from blksim.sim.storage_config import PRIMARY
    if not isinstance(queue_depths, dict):
        queue_depths = {PRIMARY: queue_depths}
    run = {"name": cfg.name, "seed": cfg.seed, "kernel": cfg.kernel, "hz": cfg.hz,
           "ramp_time": seconds_text(cfg.ramp_time)}
    if cfg.duration is not None:
        run["duration"] = seconds_text(cfg.duration)
    if cfg.client_timeout is not None:
        run["client_timeout"] = seconds_text(cfg.client_timeout)
    device, queue = _disk_tables(cfg.primary, queue_depths[PRIMARY])
    out = {"run": run, "device": device, "queue": queue}
    others = {}
    for name, dev in cfg.devices.items():
        if name != PRIMARY:
            device, queue = _disk_tables(dev, queue_depths[name])
            others[name] = {**device, "queue": queue}
    if others:
        out["devices"] = others
    if cfg.volumes:
        out["volumes"] = {v.name: {"table": v.table} for v in cfg.volumes}
    if cfg.files:
        out["host"] = {"memory": cfg.memory, "page_cache": cfg.page_cache,
                       "copy_mb_per_s": cfg.copy_rate / 1e6}
        out["vm"] = dict(cfg.vm)
        out["file"] = [f.table() for f in cfg.files]
    if cfg.filesystems:
        out["filesystems"] = {f"/dev/{d}": f.table() for d, f in cfg.filesystems.items()}
    if cfg.apps:
        app_files = {p for a in cfg.apps for p in a.files}
        out["file"] = [f for f in out.get("file", []) if f["path"] not in app_files]
        if not out["file"]:
            del out["file"]
        out["app"] = [dict(a.table) for a in cfg.apps]
    if cfg.jobs:
        out["job"] = [job_table(job, "iodepth" in table)
                      for job, table in zip(cfg.jobs, cfg.job_tables)]
    if cfg.traces:
        out["trace"] = [t.table() for t in cfg.traces]
    if cfg.switches:
        out["switch"] = [sw.table() for sw in cfg.switches]
    return out


def _seconds_text(value: float) -> str:
    return seconds_text(value)


def distribution_text(dist: tuple) -> str:
    """fio's spelling of a parsed random_distribution."""
    if dist[0] == "zoned":
        return "zoned:" + ":".join(f"{a:g}/{s:g}" for a, s in dist[1])
    return f"{dist[0]}:{dist[1]:g}" if len(dist) > 1 else dist[0]


def job_table(job, iodepth_given: bool) -> dict:
    """A parsed job written back as a ``[[job]]`` table with every option explicit."""
    t = {"name": job.name, "rw": job.rw}
    if job.rw in ("rw", "randrw"):
        t["rwmixread"] = job.rwmixread
    if job.write_bs:
        t["bs"] = f"{job.bssplit[0][0]},{job.write_bs}"
    elif len(job.bssplit) == 1:
        t["bs"] = job.bssplit[0][0]
    else:
        t["bssplit"] = [[bs, pct] for bs, pct in job.bssplit]
    if job.random_distribution[0] != "random":
        t["random_distribution"] = distribution_text(job.random_distribution)
    t["blockalign"] = job.blockalign
    t["offset"] = job.offset
    if job.size is not None:
        t["size"] = job.size
    t["offset_increment"] = job.offset_increment
    t["numjobs"] = job.numjobs
    if not job.rate_iops or iodepth_given:
        t["iodepth"] = job.iodepth
    t["thinktime"] = _seconds_text(job.thinktime)
    if job.thinktime_blocks != 1:
        t["thinktime_blocks"] = job.thinktime_blocks
    if job.rate_iops:
        t["rate_iops"] = job.rate_iops
        t["rate_process"] = job.rate_process
    if job.rate_bytes:
        t["rate"] = int(job.rate_bytes) if job.rate_bytes == int(job.rate_bytes) \
            else job.rate_bytes
        t["rate_process"] = job.rate_process
    if job.ramp_time:
        t["ramp_time"] = _seconds_text(job.ramp_time)
    if job.number_ios:
        t["number_ios"] = job.number_ios
    if job.runtime:
        t["runtime"] = _seconds_text(job.runtime)
    t["startdelay"] = _seconds_text(job.startdelay)
    if job.sync is not None:
        t["sync"] = job.sync
    t["nice"] = job.nice
    if job.prio is not None:
        t["prio"] = job.prio
    if job.prioclass is not None:
        t["prioclass"] = job.prioclass
    if job.filename is not None:
        t["filename"] = job.filename
    if job.direct is not None:
        t["direct"] = int(job.direct)
    if job.ioengine is not None:
        t["ioengine"] = job.ioengine
    if not job.invalidate:
        t["invalidate"] = 0
    if job.fsync:
        t["fsync"] = job.fsync
    if job.end_fsync:
        t["end_fsync"] = 1
    return t
