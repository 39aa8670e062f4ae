"""blksim: a discrete-event simulator of Linux block-layer I/O schedulers.

The repository's root is this package. Its rooms, lowest first (a room imports only
from rooms below it; docs/architecture.md draws them):

- ``blksim.common``: units, the configuration's value checks, the latency histogram.
- ``blksim.block``: the kernel's ``block/``: bios and requests, the elevator hook table
  and the structures elevators share, the 2.6 request queue, diskstats, partitions and
  device-mapper, the block tracepoints.
- ``blksim.schedulers`` (the elevators), ``blksim.disk_models`` (the devices) and
  ``blksim.traces`` (trace formats, recorders, synthetic workloads): one floor.
- ``blksim.hostio``: the host's I/O path (files, page cache, read-ahead, writeback,
  journal).
- ``blksim.apps``: the application models.
- ``blksim.sim``: the engine (clock, run loop, workload processes, configuration, host
  building, metrics, results).
- ``blksim.api`` (the Python API), ``blksim.experiments`` (studies) and ``blksim.cli``
  (the command line) at the top.

The Python API for notebooks and scripts (docs/api.md) is re-exported here from
``blksim.api``: ``blksim.run``, ``blksim.compare``, ``blksim.load_config``,
``blksim.config_from_text``, ``blksim.builtin_config``, ``blksim.RunResult``,
``blksim.Config`` and ``blksim.ConfigError``.
"""

__version__ = "0.1.0"

# The Python API (docs/api.md), imported on first use so that `import blksim` and
# `import blksim.traces` stay light: no simpy, no engine, until a run is asked for.
_API = ("load_config", "config_from_text", "builtin_config", "run", "compare",
        "RunResult", "Config", "ConfigError")

__all__ = [*_API, "__version__"]


def __getattr__(name: str):
    if name in _API:
        from blksim import api
        return getattr(api, name)
    raise AttributeError(f"module 'blksim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
