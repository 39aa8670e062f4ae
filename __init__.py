"""blksim: a discrete-event simulator of Linux block-layer I/O schedulers.

The repository's root is this package. Its rooms:

- ``blksim.sim``: the engine (bios and requests, the block layer, the run loop,
  metrics, configuration); ``blksim.cli`` is the command line.
- ``blksim.schedulers``: the elevators (noop, deadline, anticipatory, cfq, and
  the textbook algorithms) and their registry.
- ``blksim.disk_models``: drive mechanics, on-board cache and queue, presets.
- ``blksim.traces``: trace readers and writers, synthetic workloads.
- ``blksim.experiments``: studies built on the rest (validation, figures).

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
