"""blksim's Python API: run simulations from notebooks and scripts (docs/api.md).

    import blksim
    runs = blksim.compare(blksim.builtin_config(), ["noop", "deadline"], duration="2s")
    for name, r in runs.items():
        print(name, r.read.iops, r.read.q2c.p99_ms, len(r.requests))

A configuration (a `Config`, a dict of TOML tables, or the path of a TOML or fio
job file) is resolved as the command line resolves it, run by `simulate` (the
one path every run takes, ``blksim run`` and ``blksim compare`` included), and
handed back as a `RunResult`: the figures of results.json, with attributes for
the common ones, and every completed bio's record as a numpy structured array.
Nothing is written to disk. Errors in the input raise what the command line
reports (`ConfigError` and the others it lists), with the same messages; an
argument of the wrong type raises `TypeError` naming the argument, checked
before anything runs (docs/api.md, Errors).

This module imports neither simpy nor the engine until a run starts.
"""

from __future__ import annotations

import os
import struct
import warnings as _warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields

from blksim.sim import config as cfgmod
from blksim.sim.config import ConfigError, RunConfig

#: The built-in configuration: what ``blksim demo`` runs.
BUILTIN_SOURCE = "built-in flagship.toml"


@dataclass
class Config:
    """A configuration before it is resolved.

    ``data`` holds the TOML tables as a dict (``{"run": {...}, "job": [{...}]}``,
    docs/configuration.md); edit it freely, every run copies it first.
    ``source`` names it in error messages and gives the run its default name; a
    relative trace or fio path in it is taken relative to ``source``'s folder
    (the current folder for a configuration that is not a file).
    """

    data: dict
    source: str = "config"


def _type_error(name: str, expected: str, value) -> TypeError:
    """The one-line error for API argument ``name`` of the wrong type."""
    return TypeError(f"{name}: expected {expected}, found {type(value).__name__} {value!r}"
                     if len(repr(value)) <= 40 else
                     f"{name}: expected {expected}, found {type(value).__name__}")


def _path_arg(name: str, path) -> str:
    """``path`` (a str or os.PathLike) as a str, else TypeError naming ``name``."""
    if not isinstance(path, (str, os.PathLike)):
        raise _type_error(name, "a file path (str or pathlib.Path)", path)
    path = os.fspath(path)
    if not isinstance(path, str):           # a PathLike giving bytes
        raise _type_error(name, "a file path (str or pathlib.Path)", path)
    return path


def _source_arg(source) -> str:
    if not isinstance(source, str):
        raise _type_error("source", "a str naming the configuration", source)
    if not source.isprintable():        # it starts every error line: one line, shown as is
        raise ConfigError(f"source: expected a name of printable characters on one line, "
                          f"found {source!r}")
    return source


def load_config(path) -> Config:
    """The configuration in a TOML file, or an fio job file (``*.fio``) to run with
    every other setting at its default, as ``blksim run`` reads them."""
    path = _path_arg("path", path)
    if path.endswith(".fio"):
        if not os.path.isfile(path):
            raise ConfigError(f"{path}: no such fio job file")
        return Config(cfgmod.config_for_fio_jobfile(path), path)
    return Config(cfgmod.load_file(path), path)


def config_from_text(text: str, source: str = "config") -> Config:
    """The configuration written in TOML ``text``."""
    from blksim._compat import tomllib
    if not isinstance(text, str):
        raise _type_error("text", "a str of TOML", text)
    source = _source_arg(source)
    try:
        raw = tomllib.loads(text)
    except ValueError as exc:   # TOMLDecodeError, or an integer beyond int()'s digit limit
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    return Config(raw, source)


def builtin_config_text() -> str:
    """The TOML text of the flagship configuration shipped with blksim."""
    from importlib import resources
    return resources.files("blksim.experiments").joinpath("flagship.toml").read_text()


def builtin_config() -> Config:
    """The flagship configuration shipped with blksim (``blksim demo --show-config``):
    four random sync readers beside a stream of async writes, 20 s simulated."""
    return config_from_text(builtin_config_text(), BUILTIN_SOURCE)


def _as_config(config) -> Config:
    if isinstance(config, Config):
        if not isinstance(config.data, Mapping):
            raise _type_error("Config.data", "a dict of TOML tables", config.data)
        _source_arg(config.source)
        return config
    if isinstance(config, Mapping):
        return Config(dict(config))
    if isinstance(config, (str, os.PathLike)):
        return load_config(config)
    raise TypeError(f"config: expected a blksim.Config, a dict of TOML tables or the path "
                    f"of a configuration file, found {type(config).__name__}")


def _toml_value(value, what: str = "set") -> str:
    """``value`` written as TOML, as it would follow ``--set PATH=``; ``what`` names it
    in errors (``set: PATH``, ``seed``, ``duration``)."""
    import tomli_w
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()                       # np.int64(8) from a sweep: 8
    if isinstance(value, Mapping):
        raise ConfigError(f"{what}: {value!r}: give one value per path, "
                          f"e.g. {{'queue/iosched/fifo_batch': 8}}")
    try:
        return tomli_w.dumps({"v": value})[len("v = "):].strip()
    except TypeError:
        raise ConfigError(f"{what}: {value!r} is not a value a configuration can hold (a "
                          f"number, a string, true/false, or a list of them)") from None


def _set_items(set) -> list:
    """``set`` (None, one "PATH=VALUE", a list of them, or a dict) as a list."""
    if set is None:
        return []
    if isinstance(set, str):
        return [set]
    if isinstance(set, Mapping):
        for path in set:
            if not isinstance(path, str):
                raise _type_error("set", "sysfs paths (str) as keys, e.g. "
                                  "{'queue/iosched/fifo_batch': 8}", path)
        return [f"{path}={_toml_value(value, f'set: {path}')}" for path, value in set.items()]
    if not isinstance(set, (list, tuple)):
        raise _type_error("set", "a dict {PATH: value}, a 'PATH=VALUE' str or a list of them",
                          set)
    for item in set:
        if not isinstance(item, str):
            raise _type_error("set", "'PATH=VALUE' strings in the list", item)
    return list(set)


def _flag(name: str, value) -> bool:
    """A True/False argument (numpy's bool too); anything else is TypeError: "no" would
    be true."""
    if isinstance(value, bool) or (type(value).__module__ == "numpy"
                                   and type(value).__name__ in ("bool", "bool_")):
        return bool(value)
    raise _type_error(name, "True or False", value)


def _scheduler_arg(scheduler) -> str | None:
    """``scheduler`` of `run`: None (the configuration's) or a name, checked."""
    if scheduler is None:
        return None
    if not isinstance(scheduler, str):
        raise _type_error("scheduler", "a scheduler name (str) or None", scheduler)
    if not scheduler.strip():
        raise ConfigError(f"scheduler: expected a scheduler name such as 'deadline' (or None "
                          f"for the configuration's), found {scheduler!r}")
    return scheduler.strip()


def device_names(devices, what: str = "devices") -> list[str] | None:
    """The disks of a comparison whose scheduler varies: None (every disk), one
    comma-separated str (as ``--devices`` takes them) or a list of names, each
    without a leading ``/dev/``. Errors name ``what`` (the CLI: ``--devices``)."""
    if devices is None:
        return None
    names = [d.removeprefix("/dev/") for d in _names(devices, what, "disk",
                                                      "['sdb', 'sdc']")]
    if not names:
        raise ConfigError(f"{what}: give at least one disk name (e.g. sdb), found {devices!r}")
    if len(dict.fromkeys(names)) != len(names):
        raise ConfigError(f"{what}: {devices!r} names a disk twice")
    return names


def _overridden(config: Config, set, seed, duration) -> dict:
    """The configuration's tables with the overrides applied (a copy), in the
    command line's order: ``set``, then seed, then duration."""
    items = _set_items(set)
    if seed is not None:
        items.append(f"run/seed={_toml_value(seed, 'seed')}")
    if duration is not None:
        items.append(f"run/duration={_toml_value(duration, 'duration')}")
    return cfgmod.apply_overrides(config.data, items)


def _names(value, what: str, kind: str, example: str | None = None) -> list[str]:
    """Names given as a list of str or one comma-separated str, stripped (a comma-separated
    str's empty pieces are dropped; an empty name in a list is a ConfigError); TypeError
    for anything else. ``kind``: what a name names; ``example``: a list, for messages."""
    if isinstance(value, str):
        return [s.strip() for s in value.split(",") if s.strip()]
    if not isinstance(value, (list, tuple)):
        such = f" such as {example}," if example else ""
        raise _type_error(what, f"a list of {kind} names{such} or one comma-separated str",
                          value)
    for s in value:
        if not isinstance(s, str):
            raise _type_error(what, f"{kind} names (str)"
                              + (f", e.g. {example}" if example else ""), s)
        if not s.strip():
            raise ConfigError(f"{what}: {value!r}: an empty {kind} name")
    return [s.strip() for s in value]


def scheduler_names(schedulers, what: str = "schedulers") -> list[str]:
    """The scheduler names of a comparison (a list, or one comma-separated string), each
    checked; errors are ConfigError starting with ``what`` (the CLI: ``--schedulers``),
    TypeError for something that is neither."""
    from blksim.schedulers import check_name
    names = _names(schedulers, what, "scheduler")
    if not names:
        raise ConfigError(f"{what}: give at least one scheduler name")
    for n in names:
        try:
            check_name(n)
        except ValueError as exc:
            raise ConfigError(f"{what}: {exc}") from None
    if len(dict.fromkeys(names)) != len(names):
        raise ConfigError(f"{what}: {schedulers!r} names a scheduler twice")
    return names


def resolve_comparison(raw: dict, source: str, schedulers: list[str],
                       devices=None) -> list[RunConfig]:
    """One resolved configuration per scheduler, as ``blksim compare`` runs them: the
    scheduler goes to the disks named in ``devices`` (default: every disk), the others
    keep theirs. Every ``queue/iosched`` tunable of those disks must belong to one of
    the schedulers, and each gets only the tunables it has. Everything is checked
    before anything runs. ``devices`` as `device_names` takes it."""
    devices = device_names(devices)
    cfgmod.check_iosched_known(raw, schedulers, source, devices)
    return [cfgmod.resolve(raw, source, scheduler=name, lenient_iosched=True,
                           scheduler_devices=devices)
            for name in schedulers]


def _warn(cfg: RunConfig) -> None:
    for line in cfg.warnings:
        _warnings.warn(line, stacklevel=3)


def _warn_after(result: "RunResult", cfg: RunConfig) -> "RunResult":
    """Issue the warnings the run itself found (beyond the configuration's)."""
    for line in result.warnings[len(cfg.warnings):]:
        _warnings.warn(line, stacklevel=3)
    return result


def run(config, *, scheduler: str | None = None, seed: int | None = None, duration=None,
        set=None, per_request: bool = True) -> "RunResult":
    """Run one simulation and return its `RunResult`.

    ``config``: a `Config`, a dict of TOML tables, or a file path (`load_config`).
    ``scheduler`` replaces ``queue/scheduler`` (of every disk); ``seed`` and ``duration`` (seconds,
    or a string with a unit such as ``"2s"``) replace ``run.seed`` and
    ``run.duration``; ``set`` overrides tunables by sysfs path, as ``--set`` does:
    a dict such as ``{"queue/iosched/fifo_batch": 8, "device/queue_depth": 4}``,
    or a list of ``"PATH=VALUE"`` strings. A tunable the scheduler does not have is
    an error. ``per_request=False`` skips the per-bio records (`RunResult.requests`
    is then None), which saves memory on long runs.
    """
    conf = _as_config(config)
    scheduler = _scheduler_arg(scheduler)
    per_request = _flag("per_request", per_request)
    raw = _overridden(conf, set, seed, duration)
    # another scheduler than the configuration's leaves out the tunables it lacks, as
    # compare does (with a note naming them)
    cfg = cfgmod.resolve(raw, conf.source, scheduler=scheduler,
                         lenient_iosched=cfgmod.iosched_leniency(scheduler, _set_items(set)))
    _warn(cfg)
    return _warn_after(simulate(cfg, per_request=per_request), cfg)


def compare(config, schedulers=("noop", "deadline"), *, seed: int | None = None,
            duration=None, set=None, per_request: bool = True, devices=None) -> dict:
    """Run one configuration under each scheduler, with the same seed, as
    ``blksim compare`` does; return a dict scheduler name -> `RunResult`, in the
    order given.

    ``schedulers``: a list of names (or one comma-separated string). Tunables under
    ``queue/iosched`` (in the configuration or ``set``) apply to the schedulers
    that have them; one no scheduler has is an error. ``devices``: the disks whose
    scheduler varies (a list of names such as ``["sdb", "sdc"]``; default every disk).
    Other options as `run`.
    """
    conf = _as_config(config)
    per_request = _flag("per_request", per_request)
    names = scheduler_names(schedulers)
    devices = device_names(devices)
    raw = _overridden(conf, set, seed, duration)
    cfgs = resolve_comparison(raw, conf.source, names, devices)
    _warn(cfgs[0])
    results = {name: simulate(cfg, per_request=per_request) for name, cfg in zip(names, cfgs)}
    _warn_after(next(iter(results.values())), cfgs[0])
    return results


def simulate(cfg: RunConfig, *, per_request: bool = True, complete_hooks=(), progress=None,
             blktrace: str | None = None, iolog: str | None = None,
             iolog_filename: str | None = None, iostat: tuple | None = None,
             breakdowns: bool = False, explain: bool = False,
             explain_extra: dict | None = None) -> "RunResult":
    """Run a resolved configuration and build its figures: the path every run takes.

    ``complete_hooks`` are called with every completed bio, ``progress`` is a
    progress display; ``blktrace``, ``iolog`` and ``iolog_filename`` record the run
    to files, and ``iostat`` ((file, interval in s), or (file, interval, the run's
    duration) to check the row cap before the run; `blksim.sim.iostat_log`) writes
    iostat -x's figures over time (see `blksim.sim.engine.Simulation`). The figures' ``config`` is the
    resolved configuration (config.resolved.toml's content). ``explain`` adds the
    mechanism report (results.json ``explain``, docs/explain.md), with ``explain_extra``'s
    collectors (`blksim.sim.explain.Explain`).
    """
    from blksim.sim.engine import Simulation
    from blksim.sim.results import results_dict

    if not isinstance(cfg, RunConfig):
        raise _type_error("cfg", "a resolved configuration (blksim.sim.config.resolve "
                          "makes one; run() takes a Config, dict or path)", cfg)
    per_request = _flag("per_request", per_request)
    log = _RequestLog() if per_request else None
    hooks = tuple(complete_hooks) + ((log.hook(),) if log is not None else ())
    sim = Simulation(cfg, complete_hooks=hooks, progress=progress, blktrace=blktrace,
                     iolog=iolog, iolog_filename=iolog_filename, iostat=iostat,
                     breakdowns=breakdowns, explain=explain, explain_extra=explain_extra)
    for hook in hooks:                   # a hook that names processes learns how
        bind = getattr(hook, "bind", None)
        if bind is not None:
            bind(sim)
    outcome = sim.run()
    depths = {name: q.device.queue_depth for name, q in sim.host.disks.items()}
    figures = results_dict(outcome, cfgmod.resolved_dict(cfg, depths))
    requests = log.array(cfg.ramp_time) if log is not None else None
    from blksim.sim.results import after_run_warnings
    return RunResult(figures, requests, list(cfg.warnings) + after_run_warnings(figures))


# ---------------------------------------------------------------------- per-bio records

def request_dtype():
    """The numpy dtype of `RunResult.requests` (docs/api.md lists its fields)."""
    import numpy as np
    return np.dtype([
        ("bio", "<i8"), ("pid", "<i8"), ("device", "<U8"),
        ("request", "<i8"), ("dir", "<U1"), ("sector", "<i8"),
        ("sectors", "<i8"), ("sync", "?"), ("q_s", "<f8"), ("d_s", "<f8"), ("c_s", "<f8"),
        ("q2d_ms", "<f8"), ("d2c_ms", "<f8"), ("q2c_ms", "<f8"), ("disk_ms", "<f8"),
        ("measured", "?")])


class _RequestLog:
    """Every completed bio, packed as it completes and read by numpy at the end."""

    RECORD = struct.Struct("<qqqqqh??dddd")
    _FIELDS = ("bio", "pid", "sector", "sectors", "request", "device", "write", "sync",
               "q_s", "d_s", "c_s", "disk_s")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.devices: dict = {}               # device name -> its index in the records

    def hook(self):
        """The function to call with every completed bio."""
        extend = self.buf.extend
        pack = self.RECORD.pack
        devices = self.devices

        def record(bio) -> None:
            dev = devices.get(bio.dev)
            if dev is None:
                dev = devices[bio.dev] = len(devices)
            extend(pack(bio.id, bio.pid, bio.sector, bio.nr_sectors, bio.rq, dev, bio.write,
                        bio.sync, bio.t_queue, bio.t_dispatch, bio.t_complete, bio.disk_s))
        return record

    def array(self, measure_from: float):
        """The records as a `request_dtype` array; ``measured``: queued at or after
        ``measure_from`` (the run's ramp_time), as the figures count them."""
        import numpy as np
        packed = np.dtype({"names": list(self._FIELDS),
                           "formats": ["<i8"] * 5 + ["<i2"] + ["?"] * 2 + ["<f8"] * 4})
        raw = np.frombuffer(self.buf, dtype=packed)
        out = np.empty(len(raw), dtype=request_dtype())
        for name in ("bio", "pid", "sector", "sectors", "request", "sync", "q_s", "d_s",
                     "c_s"):
            out[name] = raw[name]
        names = np.array([str(d) for d in self.devices] or [""])
        out["device"] = names[raw["device"]] if len(raw) else ""
        out["dir"] = np.where(raw["write"], "W", "R")
        out["q2d_ms"] = (raw["d_s"] - raw["q_s"]) * 1e3
        out["d2c_ms"] = (raw["c_s"] - raw["d_s"]) * 1e3
        out["q2c_ms"] = (raw["c_s"] - raw["q_s"]) * 1e3
        out["disk_ms"] = raw["disk_s"] * 1e3
        out["measured"] = raw["q_s"] >= measure_from
        return out


# ---------------------------------------------------------------------- figures

def _from_dict(cls, d: dict):
    """An instance of dataclass ``cls`` from the results.json dict ``d``."""
    kinds = getattr(cls, "_nested", {})
    values = {}
    for f in fields(cls):
        v = d.get(f.name)
        if f.name in kinds and v is not None:
            v = _from_dict(kinds[f.name], v)
        values[f.name] = v
    return cls(**values)


@dataclass(frozen=True)
class Latency:
    """A latency summary (results.json's ``q2c``, ``q2d``, ``d2c``), in milliseconds.

    ``count`` bios; mean, min and max are exact, percentiles (nearest rank) within
    0.4 % (docs/results.md); all None when ``count`` is 0.
    """

    count: int
    mean_ms: float | None
    min_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None


@dataclass(frozen=True)
class Direction:
    """The figures of reads, writes or both (``all``), for the device or one process.

    ``ios`` completed bios and their ``bytes``; ``iops`` and ``mb_per_s`` (10^6
    bytes/s) over the measured time; ``q2c`` the latency a process sees, ``q2d``
    (block layer and scheduler) and ``d2c`` (device) for the device's totals only
    (None for a process); ``disk_time_s`` device time (s); ``timeouts`` bios over
    the client timeout (None without ``run.client_timeout``).
    """

    ios: int
    bytes: int
    iops: float | None
    mb_per_s: float | None
    q2c: Latency
    q2d: Latency | None
    d2c: Latency | None
    disk_time_s: float
    timeouts: int | None

    _nested = {"q2c": Latency, "q2d": Latency, "d2c": Latency}


@dataclass(frozen=True)
class Process:
    """One process's figures (results.json's ``processes``): ``pid``, ``name``,
    ``nice``, I/O priority ``ioprio_class`` (none, rt, be, idle) and
    ``ioprio_level``; `Direction` figures ``read``, ``write`` and ``all``; bios
    ``issued`` and ``unfinished`` at the end; ``disk_time_s`` and ``disk_share``
    (0..1); ``worst_wait_ms``, its longest Q2C; ``timeouts`` and ``timeouts_pct``
    (None without a client timeout)."""

    pid: int
    name: str
    nice: int
    ioprio_class: str
    ioprio_level: int
    read: Direction
    write: Direction
    all: Direction
    issued: int
    unfinished: int
    disk_time_s: float
    disk_share: float | None
    worst_wait_ms: float | None
    timeouts: int | None
    timeouts_pct: float | None

    _nested = {"read": Direction, "write": Direction, "all": Direction}


@dataclass(frozen=True)
class Fairness:
    """results.json's ``fairness``: over the ``processes`` that queued I/O, Jain's
    index of throughput and of disk time (1 = equal; None without processes), the
    worst wait (ms) and whose it was, the client timeout (ms) and the bios over it
    (count and %, None without one), total disk time (s) and unfinished bios."""

    processes: int
    jain_throughput: float | None
    jain_disk_time: float | None
    worst_wait_ms: float | None
    worst_wait_pid: int | None
    client_timeout_ms: float | None
    timeouts: int | None
    timeouts_pct: float | None
    disk_time_s: float
    unfinished: int


class RunResult:
    """What one run measured.

    ``figures`` is exactly the results.json dict (docs/results.md); the attributes
    are views of it: ``name``, ``scheduler``, ``seed``, ``simulated_s`` and
    ``measured_s`` (s); ``read``, ``write`` and ``all`` (`Direction`: IOPS, MB/s,
    latencies in ms); ``processes`` (`Process`, by pid); ``fairness``
    (`Fairness`); ``config``, the resolved configuration (dict). ``requests`` is
    every completed bio's record (a numpy structured array, see `request_dtype`
    and docs/api.md), None for a run made with ``per_request=False``;
    ``warnings`` what the configuration's reading warned about.

    ``RunResult(json.load(open("results.json")))`` views a results.json written by
    ``blksim run --out`` (without requests).
    """

    #: The results.json keys a RunResult reads.
    _KEYS = ("name", "scheduler", "seed", "simulated_s", "measured_s", "totals", "processes",
             "fairness", "config")

    def __init__(self, figures: dict, requests=None, warnings=()) -> None:
        if not isinstance(figures, Mapping):
            raise _type_error("figures", "the results.json dict", figures)
        missing = [k for k in self._KEYS if k not in figures]
        if missing:
            raise ValueError(f"figures: not a results.json dict: no {', '.join(missing)}")
        self.figures = figures
        self.requests = requests
        self.warnings = list(warnings)
        self.name = figures["name"]
        self.scheduler = figures["scheduler"]
        self.seed = figures["seed"]
        self.simulated_s = figures["simulated_s"]
        self.measured_s = figures["measured_s"]
        totals = figures["totals"]
        self.read = _from_dict(Direction, totals["read"])
        self.write = _from_dict(Direction, totals["write"])
        self.all = _from_dict(Direction, totals["all"])
        self.processes = [_from_dict(Process, p) for p in figures["processes"]]
        self.fairness = _from_dict(Fairness, figures["fairness"])
        self.config = figures["config"]
        self.apps = figures.get("apps", {})

    def requests_frame(self):
        """`requests` as a pandas DataFrame (needs pandas, which blksim does not
        install: ``pip install pandas``)."""
        if self.requests is None:
            raise ValueError("this run kept no per-request records: run it with "
                             "per_request=True")
        try:
            import pandas
        except ImportError:
            raise ImportError("RunResult.requests_frame() needs pandas, which blksim does "
                              "not install: pip install pandas (or use RunResult.requests, "
                              "a numpy structured array)") from None
        frame = pandas.DataFrame(self.requests)
        names = {p.pid: p.name for p in self.processes}
        frame.insert(2, "process", frame["pid"].map(names))
        return frame

    def __repr__(self) -> str:
        a = self.all
        n = "no" if self.requests is None else len(self.requests)
        if not a.ios:       # no figure from an empty window (its rates, latencies: None)
            return (f"<RunResult {self.name}: {self.scheduler}, seed {self.seed}, "
                    f"{self.simulated_s:g} s simulated; no I/O completed in the measured "
                    f"window; {n} requests>")
        return (f"<RunResult {self.name}: {self.scheduler}, seed {self.seed}, "
                f"{self.simulated_s:g} s simulated; {a.iops:.1f} IOPS, {a.mb_per_s:.3f} MB/s, "
                f"Q2C p99 {a.q2c.p99_ms:.3f} ms; {n} requests>")
