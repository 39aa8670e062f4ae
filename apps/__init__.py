"""Application models that drive the host's I/O path (files, the page cache, direct and
synchronous I/O, fsync) over any storage stack and report the application's own figure.

Each model is a module with the same parts, which it registers under its type name
when imported (``register(AppModel(...))``, `blksim.apps.registry`; a run and the
command line find models only there):

* ``KEYS`` (its ``[[app]]`` keys but ``type``, and what they mean) and ``parse(table, where, host,
  seed)``, which validates one ``[[app]]`` table into the model's configuration against
  the host it runs on (``host``, a `HostContext`: the devices, where ``host.placer``
  lays out the files the model needs, the host's memory and page cache, and the run's
  duration). Every rule a model has about the host is checked there, before anything
  proportional to a key (files, tables, processes) is built, and an application whose
  measured window would be empty is an error there, not a row of zeros later;
* ``start(ctx, app)``, which creates its processes in a run (``ctx``: the engine's
  `blksim.sim.engine.AppContext`) and returns its statistics object, whose
  ``figures(end_of_run)`` are the ``apps`` entry of results.json, and whose
  ``latency_histogram()``, if it has one, gives (what it counts, e.g. "transactions",
  a `StreamingHistogram` of their latencies in s): an experiment's
  application-latency CDF;
* ``lines(name, figures, fmt)`` and ``compare_rows(name, [figures, ...])``: the terminal
  table of one run (``fmt(x, width, percentile=False)`` formats a figure, a percentile
  to the digits its histogram gives it), and rows of ``blksim compare``'s table (label,
  a value per run).

The models: `fileserver` (NetBench-like clients on a ramp), `oltp` (a TPC-C-like database
with Oracle's, InnoDB's or PostgreSQL's process structure and I/O modes, in a closed or
an open loop) and `loader` (a bulk load
with savepoints, index builds and statistics).
"""

from __future__ import annotations

from blksim.common.config_values import ConfigError


def models() -> dict:
    """The registered application models by type (`blksim.apps.registry.AppModel`)."""
    from blksim.apps.registry import models
    return models()


def model_of(app) -> object:
    """The model of a parsed application (its configuration's ``type``)."""
    return models()[app.type]


class AppProcess:
    """What every process of an application shows the run: a pid and name, the open
    files it submits bios through (``files``; the first is its ``queue``, where the run
    looks for throttling), its bios so far, and no schedule to fall behind."""

    kind = "app"
    #: the run's `blksim.sim.pressure.AppTasks` in a run with cgroups (None: not watched)
    tasks = None

    def __init__(self, pid: int, name: str, files: list) -> None:
        self.pid = pid
        self.name = name
        self.files = files
        self.queue = files[0] if files else None

    def on_cpu(self, then):
        """The process starts a piece of CPU work now (its model's CPU time: running, or
        runnable, for io.pressure); returns ``then`` wrapped to end it when called.
        Unwatched, ``then`` itself. (Its I/O waits are reported by its open files,
        `blksim.hostio.fileio.OpenFile.watch`.)"""
        tasks = self.tasks
        if tasks is None:
            return then
        pid = self.pid
        tasks.running(pid, 1)

        def off(*args):
            tasks.running(pid, -1)
            return then(*args)
        return off

    def start(self) -> None:
        """Nothing to do when the run starts (a model starts its work itself)."""

    def issued_by_pid(self) -> dict:
        """Bios submitted in the process's context."""
        return {self.pid: sum(f.bios_issued for f in self.files)}

    def schedule_lag(self):
        """An application's process keeps no schedule."""
        return None


class FilePlacer:
    """Lays out an application's files on the run's devices, one after another after the
    device's other files (``ends``: device -> the sector where its last file ends), and
    collects them as ``[[file]]``-like tables. ``layers``: block device name -> the
    filesystem (`blksim.hostio.fs`) made by mkfs on it, whose allocator places the files
    there as they are written (`place`'s ``writers`` and ``write_size``)."""

    def __init__(self, aliases: dict, sizes: dict, ends: dict,
                 layers: dict | None = None) -> None:
        self.aliases = aliases           # any name of a device -> its block device name
        self.sizes = sizes               # block device name -> sectors
        self.ends = ends
        self.layers = layers or {}
        self.tables: list = []

    def layer(self, device: str):
        """The filesystem made by mkfs on block device ``device``, or None."""
        return self.layers.get(device)

    def device(self, value, where: str, key: str = "device") -> str:
        """A device of the run named by ``value`` (\"/dev/sdb1\", \"vg0/data\")."""
        name = self.aliases.get(value) if isinstance(value, str) else None
        if name is None or name not in self.sizes:
            raise ConfigError(f"{where}: {key} {value!r} is not a disk, partition or "
                              f"volume of this run")
        return name

    def device_list(self, value, where: str, key: str) -> list:
        """One device or a list of different ones (``key`` is required)."""
        if value is None:
            raise ConfigError(f"{where}: {key} is required (a disk, partition or volume, or "
                              f"a list of them)")
        names = [self.device(d, where, key) for d in (value if isinstance(value, list)
                                                      else [value])]
        if not names or len(set(names)) != len(names):
            raise ConfigError(f"{where}: {key} expected one device or a list of different "
                              f"devices, found {value!r}")
        return names

    def place(self, path: str, device: str, nbytes: int, where: str,
              writers: int = 1, write_size: int | None = None) -> str:
        """A file of ``nbytes`` (a multiple of 4 KiB) at ``path`` on ``device``; on a
        filesystem made by mkfs, written by ``writers`` threads, each its own contiguous
        part, ``write_size`` bytes a call (given: the ``[[file]]`` table says so, and the
        allocator places the file that way)."""
        at = self.ends.get(device, 0)
        if at + nbytes // 512 > self.sizes[device]:
            raise ConfigError(f"{where}: {path} needs {nbytes} bytes; {device} has "
                              f"{(self.sizes[device] - at) * 512} after its other files")
        table = {"path": path, "device": f"/dev/{device}", "size": nbytes,
                 "offset": at * 512}
        if write_size is not None and device in self.layers:
            table.update(writers=writers, write_size=write_size)
        self.tables.append(table)
        self.ends[device] = at + nbytes // 512
        return path


class HostContext:
    """What an application is checked against when its table is parsed: the run's devices
    (``placer``, which lays out files on them), the host's ``memory`` and ``page_cache``
    (bytes, from ``[host]``) and the run's ``duration`` (seconds, or None when the run
    ends with its processes). The applications' own caches (a database's buffer pool, a
    loader's data cache) are process memory: together they must fit in ``memory``."""

    def __init__(self, placer: FilePlacer, memory: int, page_cache: int,
                 duration: float | None) -> None:
        self.placer = placer
        self.memory = memory
        self.page_cache = page_cache
        self.duration = duration
        self.reserved: list = []         # (where, key, bytes) of the caches taken so far

    def reserve(self, nbytes: int, key: str, value, where: str) -> None:
        """Take ``nbytes`` of the host's memory for an application's cache (``key`` =
        ``value`` in ``where``); an error when the caches would not fit."""
        taken = sum(n for _, _, n in self.reserved)
        if taken + nbytes > self.memory:
            others = f" ({taken} bytes are taken by the caches of the [[app]] tables " \
                     f"before it)" if taken else ""
            raise ConfigError(f"{where}: {key} = {value!r} ({nbytes} bytes) does not fit in "
                              f"the host's memory ([host] memory = {self.memory} "
                              f"bytes){others}")
        self.reserved.append((where, key, nbytes))

    def window_end(self, own: float | None) -> float | None:
        """When an application's measured window ends: the run's duration, else its own
        horizon ``own`` (None: it runs until it is done)."""
        return self.duration if self.duration is not None else own


def shown(value) -> str:
    """``value`` as a message shows it: repr, an integer too long for str() by its size
    (`int_text`), a long string by its start and length."""
    from blksim.common.config_values import int_text
    if isinstance(value, int) and not isinstance(value, bool):
        return int_text(value)
    if isinstance(value, str) and len(value) > 60:
        return f"{value[:20]!r}... ({len(value)} characters)"
    return repr(value)


def shares(weights: list) -> list:
    """Relative weights (each finite and positive, checked by the caller) as shares that
    add up to 1, computed without overflow (1e308 twice is a 50/50 split, not inf)."""
    top = max(weights)
    scaled = [w / top for w in weights]
    total = sum(scaled)
    return [w / total for w in scaled]


def weight_value(value, where: str, key: str) -> float:
    """A relative weight: a finite number above 0."""
    import math
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not value > 0:
        raise ConfigError(f"{where}: {key} expected a finite number above 0, found "
                          f"{shown(value)}")
    return float(value)


def size_value(table: dict, key: str, where: str, default, multiple: int = 1,
               lo: int = 1) -> int:
    """``table[key]`` (or ``default``) as bytes (\"64k\", 8192), a multiple of
    ``multiple`` and at least ``lo``."""
    from blksim.common.units import parse_size
    value = table.get(key, default)
    try:
        nbytes = parse_size(value, key)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if nbytes < lo or nbytes % multiple:
        raise ConfigError(f"{where}: {key} expected a multiple of {multiple} bytes, at least "
                          f"{lo}, found {shown(value)}")
    return nbytes


def choice_value(table: dict, key: str, where: str, default, choices) -> str:
    """``table[key]`` (or ``default``), one of ``choices`` (compared as written)."""
    value = table.get(key, default)
    if value not in choices:
        raise ConfigError(f"{where}: {key} expected one of {', '.join(map(str, choices))}, "
                          f"found {shown(value)}")
    return value


def parse_apps(tables, source: str, aliases: dict, sizes: dict, seed: int,
               ends: dict, memory: int, page_cache: int, duration: float | None,
               layers: dict | None = None) -> tuple:
    """The ``[[app]]`` tables: (the applications, the ``[[file]]``-like tables of their
    files). ``aliases``: each name of a device -> its block device; ``sizes``: block
    device -> sectors; ``ends``: where each device's last file ends (sectors);
    ``memory``, ``page_cache``: the host's, in bytes; ``duration``: the run's [run]
    duration in seconds, or None; ``layers``: block device -> the filesystem made by
    mkfs on it (`FilePlacer`)."""
    from blksim.common.config_values import check_keys
    if not isinstance(tables, list):
        raise ConfigError(f"{source}: app must be an array of tables ([[app]])")
    kinds = models()
    placer = FilePlacer(aliases, sizes, ends, layers)
    host = HostContext(placer, memory, page_cache, duration)
    apps, names = [], set()
    for i, table in enumerate(tables):
        where = f"{source}: [[app]] #{i + 1}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: expected a table, found {type(table).__name__}")
        kind = table.get("type")
        if kind not in kinds:
            raise ConfigError(f"{where}: type expected one of {', '.join(kinds)}, found "
                              f"{kind!r}")
        check_keys(table, kinds[kind].table_keys, where)
        app = kinds[kind].parse(table, where, host, f"{seed}/app/{i}")
        if app.name in names:
            raise ConfigError(f"{where}: another [[app]] is named {app.name!r}; give each a "
                              f"name of its own")
        names.add(app.name)
        apps.append(app)
    return apps, placer.tables
