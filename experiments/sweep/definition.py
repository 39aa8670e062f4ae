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

    [experiment.open."host.memory"]  # open choices: what --robustness N samples
    low = "2g"                     # (`open_choices`, `robustness`)
    high = "16g"
    source = "..."

Everything else in the file is the configuration every run starts from. A variant's
``set`` paths are dotted paths into the configuration's tables (``run.duration``,
``app.0.sessions``; a number picks an entry of an array of tables); a value replaces what
is there (a table or array too). The grid's paths are ``--set`` paths.

The seed and the varied disks' scheduler are the experiment's own axes: a grid or a
variant that sets them is refused (it would be replaced, and its "replicates" would be
one run), as are a grid path or value given twice and any two points that are the same
run. A robustness run's tasks (`Experiment.robustness_tasks`) are the same runs at the
points of a sample of the open choices. A run's key (`Task.key`) hashes its
configuration, the content of every file it reads and blksim's version, so that a
resumed sweep reuses a result only for that run.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from blksim._compat import tomllib
from blksim.common.config_values import ConfigError
from blksim.experiments.sweep.labels import figure_name
from blksim.experiments.sweep.paths import get_path, set_path, set_text as _set_text

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
    "open": "[experiment.open]: the choices the file made that a robustness run samples: "
            "dotted paths -> {low, high, source} or {values, source}",
    "better": "higher (default) or lower: which way the headline figure is better (the "
              "robustness report's rankings)",
}
VARIANT_KEYS = {"name": "the variant's name", "set": "dotted configuration paths -> values",
                "description": "what it changes"}


@dataclass(frozen=True)
class Task:
    """One run of the grid: its point (scheduler, variant, tunables, seed), the
    configuration it runs and the files that run reads, whose hashes name its result."""

    index: int
    scheduler: str
    variant: str
    tunables: tuple            # ((--set path, value), ...)
    seed: int
    raw: dict = field(compare=False, hash=False)
    source: str = ""
    inputs: tuple = ()         # ((path, sha256 of its content), ...): `input_digests`
    sample: int = 0            # a robustness run's point (1..N); 0: a run of the grid
    choices: tuple = ()        # its open choices' values: ((dotted path, value), ...)

    @property
    def key(self) -> str:
        """The hash of what the run depends on: its configuration, the content of every
        file it reads (drives, controllers, traces, fio job files, plugins' code) and
        blksim's version."""
        from blksim import __version__
        text = json.dumps({"config": self.raw, "blksim": __version__,
                           "inputs": [list(i) for i in self.inputs]},
                          sort_keys=True, default=str)     # ASCII: json escapes the rest
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def point(self) -> dict:
        """The run's coordinates in the grid (and a robustness run's point and the values
        of its open choices), for the summary."""
        sample = {"point": self.sample, **dict(self.choices)} if self.sample else {}
        return {"scheduler": self.scheduler, "variant": self.variant,
                **{path: value for path, value in self.tunables}, **sample,
                "seed": self.seed}


_DIGESTS: dict = {}            # (path, size, mtime_ns) -> sha256: each file read once


def file_digest(path: str) -> str:
    """The sha256 of the file at ``path`` ("missing" if it cannot be read)."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    stamp = (path, st.st_size, st.st_mtime_ns, st.st_ino)
    digest = _DIGESTS.get(stamp)
    if digest is None:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except OSError:
            return "missing"
        digest = _DIGESTS[stamp] = h.hexdigest()
    return digest


def input_digests(raw: dict, source: str) -> tuple:
    """The files the run of ``raw`` reads (`blksim.sim.config.input_files`), each with the
    hash of its content; resolving ``raw`` checks it too (`ConfigError` naming
    ``source``)."""
    from blksim.sim.config import input_files, resolve
    cfg = resolve(raw, source)
    return tuple((path, file_digest(path)) for path in input_files(cfg, raw))


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
    figure_where: str = "figure"                  # how an error names the figure's setting
    columns_where: str = "columns"                # ... and the columns'
    open: list = field(default_factory=list)      # `open_choices.OpenChoice`s
    better: str = "higher"                        # which way the headline figure is better

    def tasks(self, seeds: int | None = None, scale: float = 1.0) -> list:
        """Every run of the grid, in a fixed order (scheduler, variant, tunables, seed).

        Every point's configuration is resolved here (a `ConfigError` names what is wrong
        before anything runs), and the files it reads are hashed into its key. Two points
        of the grid that would be the same run are refused: a replicate is a seed."""
        seeds = self.seeds if seeds is None else seeds
        combos = list(itertools.product(*[[(p, v) for v in values] for p, values in self.grid]))
        out = self._build(seeds, scale, self.variants, combos, [None])
        seen: dict = {}
        for task in out:
            other = seen.setdefault(task.key, task)
            if other is not task:
                raise ConfigError(f"{self.path}: the points {_point_text(other)} and "
                                  f"{_point_text(task)} are the same run (one configuration); "
                                  f"a grid's values must change the run, and replicates are "
                                  f"seeds")
        return out

    def robustness_tasks(self, points: list, seeds: int | None = None, scale: float = 1.0,
                         first_only: bool = False) -> list:
        """The runs of a robustness sample (`open_choices.sample_points`): every scheduler
        at every point, for every variant and combination of the grid's tunables (with
        ``first_only``, the first variant and the first combination only), each seed;
        in the order scheduler, variant, point, tunables, seed. Each point's values are
        set after the variant's changes and before --scale and the grid's tunables; each
        run's configuration is resolved here, as the grid's are. Two points may be one
        configuration (a sample of sets only repeats itself): they share one run."""
        seeds = self.seeds if seeds is None else seeds
        combos = list(itertools.product(*[[(p, v) for v in values] for p, values in self.grid]))
        variants = self.variants[:1] if first_only else self.variants
        return self._build(seeds, scale, variants, combos[:1] if first_only else combos,
                           points)

    def _build(self, seeds: int, scale: float, variants: list, combos: list,
               points: list) -> list:
        """The tasks of scheduler x variant x point x combination x seed (a point None:
        the file's own choices)."""
        from blksim.sim.config import apply_overrides
        out = []
        for scheduler in self.schedulers:
            for vname, changes in variants:
                varied = copy.deepcopy(self.base)
                for path, value in changes.items():
                    set_path(varied, path, value, f"{self.path}: variant {vname!r}")
                self._check_variant(vname, varied)
                for point in points:
                    raw = copy.deepcopy(varied)
                    where = self.path
                    if point is not None:
                        where = f"{self.path}: robustness point {point.index}"
                        for path, value in point.values:
                            set_path(raw, path, value, where)
                    raw = scale_config(raw, self.scale_paths, scale, self.path)
                    for k, combo in enumerate(combos):
                        sets = [f"{p}={_set_text(v)}" for p, v in combo]
                        for d in self._scheduler_disks(raw):
                            sets.append(f"{d}/queue/scheduler={scheduler}")
                        try:
                            run_raw = apply_overrides(raw, sets)
                        except ConfigError as exc:
                            raise ConfigError(f"{where}: {exc}") from None
                        sample = 0 if point is None else point.index
                        inputs = self._inputs(run_raw, scheduler, (vname, sample, k, scale),
                                              where)
                        for seed in range(1, seeds + 1):
                            r = copy.deepcopy(run_raw)
                            r.setdefault("run", {})["seed"] = seed
                            out.append(Task(len(out), scheduler, vname, tuple(combo), seed,
                                            r, self.path, inputs, sample,
                                            () if point is None else point.values))
        return out

    def _inputs(self, run_raw: dict, scheduler: str, point: tuple,
                where: str | None = None) -> tuple:
        """`input_digests` of a run. The built-in schedulers read no file, so the runs of
        one point (variant, tunables, scale) under each of them read the same files:
        resolved once (resolving a configuration of many files takes seconds)."""
        from blksim.schedulers import SCHEDULERS
        where = where or self.path
        if scheduler not in SCHEDULERS:
            return input_digests(run_raw, where)
        cache = self.__dict__.setdefault("_input_cache", {})
        if point not in cache:
            cache[point] = input_digests(run_raw, where)
        return cache[point]

    def _scheduler_disks(self, raw: dict) -> list:
        if self.devices is not None:
            return list(self.devices)
        disks = raw.get("devices", {})
        return ["sda", *[d for d in (disks if isinstance(disks, dict) else {}) if d != "sda"]]

    def _check_variant(self, name: str, raw: dict) -> None:
        """A variant may not change what the experiment's own axes set: the seed, and the
        scheduler of the disks whose scheduler varies (it would be replaced silently)."""
        where = f"{self.path}: variant {name!r}"
        if get_path(raw, "run.seed") != get_path(self.base, "run.seed"):
            raise ConfigError(f"{where}: sets run.seed, which the experiment's seeds replace "
                              f"(seeds 1..N); a replicate is a seed: set seeds instead")
        for disk in self._scheduler_disks(self.base):
            for path in ((f"devices.{disk}.queue.scheduler",) if disk != "sda" else
                         ("queue.scheduler", "devices.sda.queue.scheduler")):
                if get_path(raw, path) != get_path(self.base, path):
                    raise ConfigError(f"{where}: sets {path}, but {disk}'s scheduler is the "
                                      f"experiment's schedulers axis; list it in schedulers "
                                      f"(or leave {disk} out of devices)")

    def check_grid(self, where: str) -> None:
        """Refuse a grid that would fake replicates or drop or double points: the seed and
        the varied disks' scheduler (the experiment's own axes), a path given twice (also
        as ``queue/x`` and ``sda/queue/x``), a value given twice. ``where`` names the grid
        (``--grid``, or the file's ``[experiment.grid]``)."""
        varied = self._scheduler_disks(self.base)
        seen: dict = {}
        for path, values in self.grid:
            parts = [p for p in str(path).strip().strip("/").split("/") if p]
            disk = "sda"
            if len(parts) >= 3 and parts[0] not in ("queue", "device", "run") \
                    and parts[1] in ("queue", "device"):
                disk, parts = parts[0], parts[1:]
            if parts == ["run", "seed"]:
                raise ConfigError(f"{where} {path}: the seed is the sweep's own axis (seeds "
                                  f"1..K, each a replicate); give --seeds K (an experiment "
                                  f"file: seeds = K) instead")
            if parts == ["queue", "scheduler"] and disk in varied:
                raise ConfigError(f"{where} {path}: {disk}'s scheduler is the sweep's own "
                                  f"axis; give --schedulers A,B (an experiment file: "
                                  f"schedulers = [...]) instead")
            norm = "/".join(parts) if parts[:1] == ["run"] else f"{disk}/{'/'.join(parts)}"
            if norm in seen:
                raise ConfigError(f"{where} {path}: the same path is given twice ({seen[norm]} "
                                  f"and {path}); give all its values once")
            seen[norm] = path
            texts = [json.dumps(v, sort_keys=True, default=str) for v in values]
            for i, text in enumerate(texts):
                if text in texts[:i]:
                    raise ConfigError(f"{where} {path}: the value {_set_text(values[i])} is "
                                      f"given twice; each value is one point of the grid")


def _point_text(task: Task) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in task.point().items()) + ")"


def printable(text: str) -> str:
    """``text`` with bytes that were not UTF-8 (a path's surrogate escapes) shown as U+FFFD,
    so that it can be written to a report or drawn in a plot."""
    text = str(text)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:                  # a surrogate no decoding made
        return text.encode("utf-8", "replace").decode("utf-8")


def scale_config(raw: dict, paths: list, scale: float, where: str) -> dict:
    """A copy of ``raw`` with the values at ``paths`` multiplied by ``scale`` (numbers, or
    times such as "60s", written back in seconds). A path with nothing there is skipped
    (a variant may add it), but at least one path must be found."""
    from blksim.common.units import parse_time
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
                seconds = parse_time(value, path, 's') * scale
            except ValueError as exc:
                raise ConfigError(f"{where}: scale: {exc}") from None
            # "1.5s" as before; a number of seconds where repr would write 3e-10 (which
            # a time's text does not take)
            new = f"{seconds!r}s" if "e" not in repr(seconds) and \
                "n" not in repr(seconds) else seconds
        set_path(out, path, new, where)
    if not found:
        raise ConfigError(f"{where}: --scale: the experiment lists nothing to multiply "
                          f"(its [experiment] scale: {', '.join(paths) or 'none'})")
    return out


def load_experiment(path) -> Experiment:
    """Read and check an experiment file (a configuration with an [experiment] table)."""
    from blksim.sim.config import resolve
    from blksim.common.config_values import check_keys
    path = Path(path)
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{where}: line {line}: not UTF-8 text (byte 0x"
                          f"{exc.object[exc.start]:02x}); TOML files are UTF-8") from None
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
    from blksim.api import scheduler_names
    schedulers = scheduler_names(",".join(schedulers), f"{where}: [experiment] schedulers")
    devices = table.get("devices")
    if devices is not None and (not isinstance(devices, list) or
                                not all(isinstance(d, str) for d in devices)):
        raise ConfigError(f"{where}: [experiment] devices expected a list of disk names")
    seeds = table.get("seeds", 1)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= 1000:
        raise ConfigError(f"{where}: [experiment] seeds expected 1 to 1000, found {seeds!r}")
    for key in ("name", "description", "figure", "figure_label"):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"{where}: [experiment] {key} expected text, found "
                              f"{table[key]!r}")
    scale = table.get("scale", [])
    if not isinstance(scale, list) or not all(isinstance(p, str) for p in scale):
        raise ConfigError(f"{where}: [experiment] scale expected a list of dotted paths, "
                          f"found {scale!r}")
    variant_tables = table.get("variant", [{"name": "base"}])
    if not isinstance(variant_tables, list) or not variant_tables or \
            not all(isinstance(v, dict) for v in variant_tables):
        raise ConfigError(f"{where}: [experiment] variant expected [[experiment.variant]] "
                          f"tables, found {variant_tables!r}")
    variants = []
    for k, v in enumerate(variant_tables):
        w = f"{where}: [[experiment.variant]] #{k + 1}"
        check_keys(v, VARIANT_KEYS, w)
        changes = v.get("set", {})
        if not isinstance(changes, dict):
            raise ConfigError(f"{w}: set expected a table of dotted paths -> values")
        variants.append((str(v.get("name", f"v{k + 1}")), changes))
    if len({n for n, _ in variants}) != len(variants):
        raise ConfigError(f"{where}: two variants have the same name")
    grid = []
    if not isinstance(table.get("grid", {}), dict):
        raise ConfigError(f"{where}: [experiment] grid expected a table ([experiment.grid]) "
                          f"of --set paths -> lists of values")
    for p, values in table.get("grid", {}).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: [experiment.grid] {p!r} expected a list of values")
        grid.append((p, values))
    exp = Experiment(
        name=printable(table.get("name", path.stem)),
        description=str(table.get("description", "")),
        path=where, base=raw, schedulers=schedulers, devices=devices, seeds=seeds,
        scale_paths=scale, figure=table.get("figure", ""),
        figure_label=str(table.get("figure_label") or figure_name(str(table.get("figure", "")))),
        variants=variants, grid=grid, columns=_columns(table.get("columns", []), where),
        figure_where=f"{where}: [experiment] figure",
        columns_where=f"{where}: [experiment] columns",
        better=_better(table.get("better", "higher"), where))
    exp.check_grid(f"{where}: [experiment.grid]")
    from blksim.experiments.sweep.open_choices import parse_open
    exp.open = parse_open(table.get("open", {}), exp)
    exp.tasks(seeds=1)              # every run must be a configuration blksim accepts
    return exp


def _better(value, where: str) -> str:
    if value not in ("higher", "lower"):
        raise ConfigError(f"{where}: [experiment] better expected higher or lower, found "
                          f"{value!r}")
    return value


def _columns(spec, where: str) -> list:
    if not isinstance(spec, list) or not all(
            isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c)
            for c in spec):
        raise ConfigError(f"{where}: [experiment] columns expected [[path, label], ...], "
                          f"found {spec!r}")
    return [tuple(c) for c in spec]


def sweep_experiment(config_path, grid: list, schedulers: list, devices=None,
                     seeds: int = 1, figure: str = "") -> Experiment:
    """An ad-hoc experiment over a configuration file: ``grid`` is [(--set path, values)]
    (checked as `Experiment.check_grid` does, as ``--grid``)."""
    from blksim.api import load_config
    conf = load_config(config_path)
    exp = Experiment(name=printable(Path(str(config_path)).stem),
                     description="an ad-hoc sweep", path=str(config_path), base=conf.data,
                     schedulers=schedulers, devices=devices, seeds=seeds, scale_paths=[],
                     figure=figure, figure_label=printable(figure_name(figure)),
                     variants=[("base", {})],
                     grid=grid, figure_where="--figure")
    exp.check_grid("--grid")
    return exp
