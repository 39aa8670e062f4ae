"""Run configuration: TOML files, ``--set`` overrides by sysfs path, validation.

A configuration file has the tables ``[run]``, ``[device]``, ``[queue]`` (with
``[queue.iosched]``), any number of ``[[job]]`` and ``[[trace]]``, and
``[[switch]]`` tables that change the scheduler at a given simulated time. Keys
under ``queue`` and ``device`` carry the kernel's sysfs names and units, so
``--set queue/iosched/fifo_batch=8`` or ``--set device/queue_depth=4`` address
them directly. Every error names the file and the key, what was expected and
what was found; unknown names list the valid ones.

This module reads ``[run]`` and puts a run's sections together (`resolve`); each other
section has its schema beside its parser in a module of its own:

- `blksim.sim.disk_config`: ``[device]``/``[queue]`` and ``[devices.NAME]`` (a device's
  own keys are its registered type's, `blksim.disk_models.registry`);
- `blksim.sim.storage_config`: partitions, volumes, ``[[file]]`` and ``[filesystems]``;
- `blksim.sim.host_config`: ``[host]`` and ``[vm]``;
- `blksim.sim.job_config`: ``[[job]]`` and ``fio``; `blksim.sim.trace_config`: ``[[trace]]``;
- `blksim.apps`: ``[[app]]`` (each model's keys are its own, `blksim.apps.registry`);
- `blksim.sim.switch_config`: ``[[switch]]``;
- `blksim.sim.overrides`: ``--set`` overrides;
- `blksim.sim.resolved_config`: the resolved configuration a run writes, and its input files.

The names other modules use are importable from here too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from blksim.common.config_values import ConfigError  # noqa: F401 (re-exported: callers catch it from here)
from blksim.common.config_values import check_keys as _check_keys, int_value as _int, time_value as _time
from blksim.sim.disk_config import dropped_notes, parse_disks
from blksim.sim.host_config import parse_cpu_costs, parse_cpus, parse_host, parse_vm
from blksim.sim.job_config import resolve_jobs
from blksim.sim.storage_config import PRIMARY
from blksim.sim.switch_config import parse_switches
from blksim.sim.trace_config import resolve_traces
# re-exported: the configuration's public names, importable from blksim.sim.config
from blksim.sim.job_config import config_for_fio_jobfile, distribution_text, job_table  # noqa: F401
from blksim.sim.resolved_config import input_files, resolved_dict  # noqa: F401
from blksim.sim.overrides import (apply_overrides, check_iosched_known,  # noqa: F401
                                  iosched_leniency, parse_override_value)
from blksim.sim.switch_config import SwitchSpec  # noqa: F401
from blksim.sim.trace_config import TraceSpec, detect_trace_format, known_trace_formats  # noqa: F401


from blksim.block.mq.elevator import MQ_KERNELS  # noqa: E402

KNOWN_KERNELS = ("2.6.18", "2.6.24", "2.6.32") + MQ_KERNELS
#: The kernel a run follows when it names a multi-queue scheduler and no kernel.
NEWEST_MQ_KERNEL = MQ_KERNELS[-1]
KNOWN_HZ = (100, 250, 300, 1000)

RUN_KEYS = {
    "name": "a label for this run",
    "seed": "integer seed of every random choice (default 1)",
    "duration": "simulated time limit, e.g. \"30s\" (default: until every workload ends)",
    "ramp_time": "simulated time before measurement starts, e.g. \"2s\" (default 0)",
    "kernel": f"kernel behaviour to follow: one of {', '.join(KNOWN_KERNELS)}, or a later "
              f"version (it follows the newest of these not newer than it; default 2.6.18)",
    "hz": f"timer frequency: one of {', '.join(map(str, KNOWN_HZ))} (default 250)",
    "client_timeout": "count the I/Os whose latency (Q2C) exceeds this, per process, "
                      "e.g. \"500ms\" (default: not counted)",
}
TOP_KEYS = ("fio", "run", "host", "vm", "filesystems", "app", "device", "queue", "devices", "volumes", "file", "job",
            "trace", "switch", "cgroups")


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
    cpus: int = 4                      # [host] cpus (blksim.sim.cpus)
    cpu_costs: dict | None = None      # [host] cpu_costs, resolved (blksim.sim.cpu_time)
    vm: dict = field(default_factory=dict)
    filesystems: dict = field(default_factory=dict)   # device -> storage_config.FsConfig
    apps: list = field(default_factory=list)          # each model's configuration (apps)
    jobs: list = field(default_factory=list)
    traces: list = field(default_factory=list)
    job_tables: list = field(default_factory=list)
    job_files: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    client_timeout: float | None = None
    switches: list = field(default_factory=list)
    # the scheduler a comparison gave the disks it varies (None: not a comparison run)
    compared: str | None = None
    # [cgroups] and the job/trace/app tables' groups (sim.cgroup_config; None: no groups)
    cgroups: object = None

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
    _check_keys(raw, TOP_KEYS, source)
    from blksim.sim.cgroup_config import parse_cgroups, take_placements
    raw, placements = take_placements(raw, source)
    run = raw.get("run", {})
    _check_keys(run, RUN_KEYS, f"{source}: [run]")

    seed = _int(run, "seed", f"{source}: [run]", 1, 0, 2**63 - 1)
    kernel_notes = []
    if "kernel" in run:
        kernel = str(run["kernel"])
    else:
        kernel = "2.6.18"
        wanted = scheduler or _first_scheduler(raw)
        if wanted is not None and wanted in _mq_names():
            kernel = NEWEST_MQ_KERNEL
            kernel_notes.append(f"{source}: scheduler {wanted} is a multi-queue scheduler: "
                                f"the run follows kernel {kernel} ([run] kernel chooses "
                                f"another line)")
    if kernel not in KNOWN_KERNELS:
        line = _mq_line_for(kernel)
        if line is None:
            raise ConfigError(f"{source}: [run] kernel = {kernel!r} is not supported; "
                              f"valid: {', '.join(KNOWN_KERNELS)}, or a later version (it "
                              f"follows the newest of these lines not newer than it)")
        kernel_notes.append(f"{source}: [run] kernel = {kernel!r}: the run follows the "
                            f"{line} line, the newest modelled line not newer than it "
                            f"(multi-queue lines: {', '.join(MQ_KERNELS)})")
        kernel = line
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

    cpus = parse_cpus(raw.get("host", {}), source)
    devices, volumes, aliases, sizes = parse_disks(raw, source, scheduler, lenient_iosched,
                                                   device_sectors, scheduler_devices, kernel,
                                                   cpus)
    from blksim.sim.storage_config import files as file_configs
    from blksim.sim.storage_config import filesystems as fs_configs
    filesystems = fs_configs(raw.get("filesystems", {}), sizes, aliases, source, seed,
                             kernel)
    file_tables = raw.get("file", [])
    memory, page_cache, copy_rate = parse_host(raw.get("host", {}), source)
    cpu_costs = parse_cpu_costs(raw.get("host", {}), source, kernel)
    if raw.get("app"):
        from blksim.apps import parse_apps
        from blksim.sim.storage_config import first_free
        # the apps' file sets go after the configured files (placed once to see where)
        placed = file_configs(file_tables, sizes, aliases, source, filesystems)
        # each model checks its keys against the host's memory and the run's duration
        apps, app_files = parse_apps(raw["app"], source, aliases, sizes, seed,
                                     first_free(placed, filesystems), memory, page_cache,
                                     duration, {d: f.layer for d, f in filesystems.items()
                                                if f.layer is not None})
        # on a filesystem made by mkfs its allocator places the apps' files too
        layered = {f"/dev/{d}" for d, f in filesystems.items() if f.layer is not None}
        app_files = [{k: v for k, v in t.items() if k != "offset"}
                     if t["device"] in layered else t for t in app_files]
        file_tables = list(file_tables) + app_files
    else:
        apps = []
    files = file_configs(file_tables, sizes, aliases, source, filesystems)
    _check_overlaps(raw, source, devices, volumes, filesystems, files, apps, aliases, sizes)
    for f in files:
        aliases[f.path] = f.path
        sizes[f.path] = f.sectors
    vm = parse_vm(raw.get("vm", {}), source)

    jobs, job_tables, job_targets, warnings = resolve_jobs(raw, source, aliases, sizes, kernel,
                                                           cpus, _discard_limits(devices))
    from blksim.sim.storage_config import check_direct
    check_direct(jobs, job_targets, files, filesystems, source)
    # fio's per-job ramp_time: the run measures from the latest one (one window for all)
    for job in jobs:
        if job.ramp_time > ramp:
            ramp = job.ramp_time
            if duration is not None and ramp >= duration:
                raise ConfigError(f"{source}: job {job.name!r}: ramp_time leaves nothing to "
                                  f"measure: it must be shorter than the run's duration")

    traces = resolve_traces(raw.get("trace", []), source, aliases)
    # the fio job file's jobs come first, in no group
    placements["job"] = [None] * (len(job_tables) - len(placements["job"])) + placements["job"]
    cgroups = parse_cgroups(raw, source, kernel, devices, volumes, placements)
    if not jobs and not traces and not apps:
        raise ConfigError(f"{source}: nothing to run: add a [[job]], a [[trace]] or an "
                          f"[[app]]")
    switches = parse_switches(raw.get("switch", []), source, devices, duration, run, kernel)

    return RunConfig(
        source=source, name=str(run.get("name", os.path.splitext(os.path.basename(source))[0])),
        seed=seed, duration=duration, ramp_time=ramp, kernel=kernel, hz=hz,
        devices=devices, volumes=volumes, files=files, memory=memory, page_cache=page_cache,
        copy_rate=copy_rate, vm=vm, filesystems=filesystems, apps=apps, cpus=cpus,
        cpu_costs=cpu_costs,
        jobs=jobs, traces=traces,
        job_tables=[dict(t) for t in job_tables], job_files=job_targets,
        warnings=kernel_notes + warnings + dropped_notes(devices, source),
        client_timeout=client_timeout, switches=switches, cgroups=cgroups,
        compared=None if scheduler is None else devices[next(
            d for d in devices if scheduler_devices is None or d in scheduler_devices)].scheduler)


def _discard_limits(devices: dict) -> dict:
    """Each disk's and partition's ``max_discard_sectors``, from its device type."""
    from blksim.disk_models.registry import device_type
    limits = {}
    for name, dev in devices.items():
        limit = device_type(dev.type).max_discard_sectors(dev.settings)
        limits[name] = limit
        for part in dev.partitions:
            limits[part.name] = limit
    return limits


def _mq_line_for(kernel: str):
    """The modelled multi-queue line a kernel version after 5.4 follows, or None."""
    from blksim.block.elevator import kernel_version
    try:
        wanted = kernel_version(kernel)
    except ValueError:
        return None
    if len(wanted) < 2 or wanted < (5, 4):
        return None
    fits = [k for k in MQ_KERNELS if kernel_version(k) <= wanted]
    return max(fits, key=kernel_version)


def _first_scheduler(raw: dict):
    """The scheduler the configuration names for sda (or its first disk), if any."""
    queue = raw.get("queue")
    if isinstance(queue, dict) and isinstance(queue.get("scheduler"), str):
        return queue["scheduler"]
    for table in (raw.get("devices") or {}).values():
        if isinstance(table, dict) and isinstance(table.get("queue"), dict):
            name = table["queue"].get("scheduler")
            return name if isinstance(name, str) else None
    return None


def _mq_names() -> tuple:
    from blksim.schedulers import MQ_SCHEDULERS
    return tuple(MQ_SCHEDULERS)


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
