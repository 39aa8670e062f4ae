"""An experiment: a blksim configuration with an ``[experiment]`` table saying what varies,
turned into one independent run (a `Task`) per point of the grid.

The grid is schedulers x variants x tunables x seeds::

    [experiment]
    name = "oracle-tpcc"
    description = "..."
    schedulers = ["noop", "anticipatory", "deadline", "cfq"]
    devices = ["sdb"]              # the disks whose scheduler varies (default: every disk)
    seeds = 3                      # runs per point, seeds 1..3 (--seeds overrides)
    scale = ["run.duration"]       # the values --scale multiplies
    figure = "apps.oltp.tps"       # the headline figure: a path into results.json
    figure_label = "transactions per second"

    [[experiment.variant]]         # variants: changes to the configuration, by path
    name = "setall"
    set = {"app.0.filesystemio_options" = "setall"}

    [experiment.grid]              # tunables: --set paths and their values
    "sdb/queue/nr_requests" = [128, 512]

Everything else in the file is the configuration every run starts from. A variant's
``set`` paths are dotted paths into the configuration's tables (``run.duration``,
``app.0.sessions``; a number picks an entry of an array of tables); a value replaces what
is there (a table or array too). The grid's paths are ``--set`` paths.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

from blksim._compat import tomllib
from blksim.sim.config_values import ConfigError

EXPERIMENT_KEYS = {
    "name": "the experiment's name (default: the file's stem)",
    "description": "what it reconstructs, and where its choices come from",
    "schedulers": "the schedulers compared (default [\"noop\", \"deadline\"])",
    "devices": "the disks whose scheduler varies (default: every disk)",
    "seeds": "runs per point of the grid, seeds 1..N (default 1)",
    "scale": "dotted paths of the values --scale multiplies (numbers or times)",
    "figure": "the headline figure, a dotted path into results.json",
    "figure_label": "its label, with its unit",
    "columns": "more figures for the report's table: [[dotted path, label], ...]",
    "variant": "[[experiment.variant]] tables: name and set (dotted paths -> values)",
    "grid": "tunables to sweep: --set paths -> lists of values",
}
VARIANT_KEYS = {"name": "the variant's name", "set": "dotted configuration paths -> values",
                "description": "what it changes"}


@dataclass(frozen=True)
class Task:
    """One run of the grid: its point (scheduler, variant, tunables, seed) and the
    configuration it runs, whose hash names its result."""

    index: int
    scheduler: str
    variant: str
    tunables: tuple            # ((--set path, value), ...)
    seed: int
    raw: dict = field(compare=False, hash=False)
    source: str = ""

    @property
    def key(self) -> str:
        """The hash of what the run depends on: its configuration and blksim's version."""
        from blksim import __version__
        text = json.dumps({"config": self.raw, "blksim": __version__}, sort_keys=True,
                          default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def point(self) -> dict:
        """The run's coordinates in the grid, for the summary."""
        return {"scheduler": self.scheduler, "variant": self.variant,
                **{path: value for path, value in self.tunables}, "seed": self.seed}


@dataclass
class Experiment:
    """An experiment file, read and checked."""

    name: str
    description: str
    path: str
    base: dict
    schedulers: list
    devices: list | None
    seeds: int
    scale_paths: list
    figure: str
    figure_label: str
    variants: list             # (name, {path: value})
    grid: list                 # (--set path, [values])
    columns: list = field(default_factory=list)   # (path into results.json, label)

    def tasks(self, seeds: int | None = None, scale: float = 1.0) -> list:
        """Every run of the grid, in a fixed order (scheduler, variant, tunables, seed)."""
        from blksim.sim.config import apply_overrides
        seeds = self.seeds if seeds is None else seeds
        combos = list(itertools.product(*[[(p, v) for v in values] for p, values in self.grid]))
        out = []
        for scheduler in self.schedulers:
            for vname, changes in self.variants:
                raw = copy.deepcopy(self.base)
                for path, value in changes.items():
                    set_path(raw, path, value, f"{self.path}: variant {vname!r}")
                raw = scale_config(raw, self.scale_paths, scale, self.path)
                for combo in combos:
                    sets = [f"{p}={_set_text(v)}" for p, v in combo]
                    for d in self._scheduler_disks(raw):
                        sets.append(f"{d}/queue/scheduler={scheduler}")
                    try:
                        run_raw = apply_overrides(raw, sets)
                    except ConfigError as exc:
                        raise ConfigError(f"{self.path}: {exc}") from None
                    for seed in range(1, seeds + 1):
                        r = copy.deepcopy(run_raw)
                        r.setdefault("run", {})["seed"] = seed
                        out.append(Task(len(out), scheduler, vname, tuple(combo), seed, r,
                                        self.path))
        return out

    def _scheduler_disks(self, raw: dict) -> list:
        if self.devices is not None:
            return list(self.devices)
        return ["sda", *[d for d in raw.get("devices", {}) if d != "sda"]]


def _set_text(value) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value).lower() \
        if isinstance(value, bool) else str(value)


def set_path(raw: dict, path: str, value, where: str) -> None:
    """Put ``value`` at dotted ``path`` of ``raw`` (tables made as needed; a number
    indexes an array)."""
    parts = path.split(".")
    node = raw
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"{where}: {path}: {part!r} is not an entry of the array "
                                  f"(it has {len(node)})")
            if last:
                node[int(part)] = value
                return
            node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = copy.deepcopy(value)
                return
            node = node.setdefault(part, {})
        else:
            raise ConfigError(f"{where}: {path}: {'.'.join(parts[:k])} is not a table")


def get_path(data, path: str):
    """The value at dotted ``path`` of ``data`` (None if absent)."""
    node = data
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def scale_config(raw: dict, paths: list, scale: float, where: str) -> dict:
    """A copy of ``raw`` with the values at ``paths`` multiplied by ``scale`` (numbers, or
    times such as "60s", written back in seconds). A path with nothing there is skipped
    (a variant may add it), but at least one path must be found."""
    from blksim.traces.units import parse_time
    out = copy.deepcopy(raw)
    if scale == 1.0:
        return out
    found = 0
    for path in paths:
        value = get_path(out, path)
        if value is None:
            continue
        found += 1
        if isinstance(value, bool):
            raise ConfigError(f"{where}: scale: {path} is not a number or a time")
        if isinstance(value, (int, float)):
            new = value * scale
            new = int(round(new)) if isinstance(value, int) and path.endswith(
                ("sessions", "files", "clients_start", "clients_end", "clients_step")) else new
        else:
            try:
                new = f"{parse_time(value, path, 's') * scale!r}s"
            except ValueError as exc:
                raise ConfigError(f"{where}: scale: {exc}") from None
        set_path(out, path, new, where)
    if not found:
        raise ConfigError(f"{where}: --scale: the experiment lists nothing to multiply "
                          f"(its [experiment] scale: {', '.join(paths) or 'none'})")
    return out


def load_experiment(path) -> Experiment:
    """Read and check an experiment file (a configuration with an [experiment] table)."""
    from blksim.sim.config import resolve
    from blksim.sim.config_values import check_keys
    path = Path(path)
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    table = raw.pop("experiment", None)
    if table is None:
        raise ConfigError(f"{where}: no [experiment] table: this is a configuration; run it "
                          f"with blksim run, or sweep it with blksim sweep")
    check_keys(table, EXPERIMENT_KEYS, f"{where}: [experiment]")
    schedulers = table.get("schedulers", ["noop", "deadline"])
    if not isinstance(schedulers, list) or not schedulers or \
            not all(isinstance(s, str) for s in schedulers):
        raise ConfigError(f"{where}: [experiment] schedulers expected a list of names")
    from blksim.sim.api import scheduler_names
    schedulers = scheduler_names(",".join(schedulers), f"{where}: [experiment] schedulers")
    devices = table.get("devices")
    if devices is not None and (not isinstance(devices, list) or
                                not all(isinstance(d, str) for d in devices)):
        raise ConfigError(f"{where}: [experiment] devices expected a list of disk names")
    seeds = table.get("seeds", 1)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= 1000:
        raise ConfigError(f"{where}: [experiment] seeds expected 1 to 1000, found {seeds!r}")
    variants = []
    for k, v in enumerate(table.get("variant", [{"name": "base"}])):
        w = f"{where}: [[experiment.variant]] #{k + 1}"
        check_keys(v, VARIANT_KEYS, w)
        changes = v.get("set", {})
        if not isinstance(changes, dict):
            raise ConfigError(f"{w}: set expected a table of dotted paths -> values")
        variants.append((str(v.get("name", f"v{k + 1}")), changes))
    if len({n for n, _ in variants}) != len(variants):
        raise ConfigError(f"{where}: two variants have the same name")
    grid = []
    for p, values in table.get("grid", {}).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: [experiment.grid] {p!r} expected a list of values")
        grid.append((p, values))
    exp = Experiment(
        name=str(table.get("name", path.stem)), description=str(table.get("description", "")),
        path=where, base=raw, schedulers=schedulers, devices=devices, seeds=seeds,
        scale_paths=list(table.get("scale", [])), figure=str(table.get("figure", "")),
        figure_label=str(table.get("figure_label", table.get("figure", ""))),
        variants=variants, grid=grid, columns=_columns(table.get("columns", []), where))
    # every variant of the base must be a configuration blksim accepts
    for task in exp.tasks(seeds=1)[:len(variants) * max(1, len(list(
            itertools.product(*[v for _, v in grid]))))]:
        resolve(task.raw, where)
    return exp


def _columns(spec, where: str) -> list:
    if not isinstance(spec, list) or not all(
            isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c)
            for c in spec):
        raise ConfigError(f"{where}: [experiment] columns expected [[path, label], ...], "
                          f"found {spec!r}")
    return [tuple(c) for c in spec]


def sweep_experiment(config_path, grid: list, schedulers: list, devices=None,
                     seeds: int = 1, figure: str = "") -> Experiment:
    """An ad-hoc experiment over a configuration file: ``grid`` is [(--set path, values)]."""
    from blksim.sim.api import load_config
    conf = load_config(config_path)
    return Experiment(name=Path(str(config_path)).stem, description="an ad-hoc sweep",
                      path=str(config_path), base=conf.data, schedulers=schedulers,
                      devices=devices, seeds=seeds, scale_paths=[], figure=figure,
                      figure_label=figure, variants=[("base", {})], grid=grid)
