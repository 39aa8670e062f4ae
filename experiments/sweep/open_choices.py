"""An experiment's open choices (``[experiment.open]``) and the Latin hypercube sample of
them that a robustness run (``blksim experiment run NAME --robustness N``) runs.

An open choice is a value the experiment file chose for its user where the setup it
reconstructs left it open, with the range a real system could have had and where that
range comes from::

    [experiment.open]
    "host.memory" = {low = "2g", high = "16g", scale = "log", source = "..."}
    "app.0.sessions" = {low = 8, high = 64, source = "..."}
    "devices.sdb.raid.level" = {values = ["raid5", "raid10"], source = "..."}

A key is a dotted path into the configuration, as a variant's ``set`` takes it. A range
(``low``, ``high``) is of whole numbers, numbers, sizes ("2g") or times ("10ms"), the
kind of the value already at the path; ``scale = "log"`` samples it uniformly in its
logarithm (a factor-wide range: memory, cache sizes), ``"linear"`` (the default)
uniformly. A set (``values``) is a list of values of the path's kind, each taken equally
often. ``source`` is required: a manual, a paper, or "blksim's choice: ...".

The sample (`sample_points`) is a Latin hypercube (McKay, Beckman & Conover,
Technometrics 21(2), 1979): the unit interval of each choice is cut into N equal strata
and each stratum is used by exactly one of the N points, the strata of different choices
paired by independent random permutations, a point uniform within its stratum. A unit
coordinate u becomes a value by the choice's scale (a whole number by its floor in
[low, high + 1), a set's value number floor(u k) of k, so that each of its k values is
taken N/k times where k divides N, and about as often otherwise). The generator is numpy's PCG64 seeded with the
robustness seed alone, so the same seed gives the same points everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blksim.common.config_values import ConfigError, check_keys, seconds_text

OPEN_KEYS = {
    "low": "a range's low end (a number, a size such as \"2g\" or a time such as \"10ms\")",
    "high": "its high end, of the same kind",
    "scale": "linear (default) or log: how the range is sampled",
    "values": "instead of a range, a set: the values it may take",
    "source": "where the range comes from (a manual, a paper, or \"blksim's choice: ...\")",
}
SCALES = ("linear", "log")
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
ABSENT = object()          # what `get_path` gives where a path names nothing
#: How an error names a kind of value.
KIND_NAMES = {"int": "whole number", "float": "number", "size": "size", "time": "time",
              "text": "text", "bool": "true or false", "table": "table", "set": "set"}


@dataclass(frozen=True)
class OpenChoice:
    """One open choice: a dotted configuration path with a range or a set, and its source.

    ``kind``: "int", "float", "size" (bytes), "time" (seconds) or "set"; ``low`` and
    ``high`` are numbers in those units (bytes, seconds); ``values`` a set's values."""

    path: str
    kind: str
    source: str
    low: float | None = None
    high: float | None = None
    scale: str = "linear"
    values: tuple = ()

    @property
    def ordered(self) -> bool:
        """Whether its values have an order (a range) or not (a set)."""
        return self.kind != "set"

    def value(self, u: float):
        """The configuration value at unit coordinate ``u`` (0 <= u < 1)."""
        u = min(max(u, 0.0), math.nextafter(1.0, 0.0))
        if self.kind == "set":
            return self.values[min(len(self.values) - 1, int(u * len(self.values)))]
        lo, hi = self.low, self.high
        if self.kind == "int":
            hi += 1                                 # floor over [low, high + 1)
        if self.scale == "log":
            x = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        else:
            x = lo + u * (hi - lo)
        if self.kind == "int":
            return int(min(max(math.floor(x), self.low), self.high))
        if self.kind == "float":
            return float(f"{min(max(x, lo), hi):.6g}")
        if self.kind == "time":
            return seconds_text(float(f"{min(max(x, lo), hi):.6g}"))
        # a size: whole MiB (whole 4 KiB below a MiB), never under low
        unit = MIB if self.low >= MIB else 4 * KIB
        return size_text(int(max(self.low, min(self.high, x // unit * unit))))

    def describe(self) -> str:
        """The range or set as the file gave it, for the report."""
        if self.kind == "set":
            return "{" + ", ".join(value_text(v) for v in self.values) + "}"
        ends = [self.low, self.high]
        if self.kind == "size":
            ends = [size_text(int(e)) for e in ends]
        elif self.kind == "time":
            ends = [seconds_text(e) for e in ends]
        else:
            ends = [value_text(e) for e in ends]
        return f"{ends[0]} to {ends[1]}" + (" (log scale)" if self.scale == "log" else "")

    def table(self) -> dict:
        """The choice as JSON: path, kind, range or set, scale and source."""
        out = {"path": self.path, "kind": self.kind, "source": self.source}
        if self.kind == "set":
            out["values"] = list(self.values)
        else:
            out.update(low=self.low, high=self.high, scale=self.scale)
        return out


def size_text(n: int) -> str:
    """Bytes as a size's text: "3g", "1536m", "64k", or the number."""
    for unit, suffix in ((GIB, "g"), (MIB, "m"), (KIB, "k")):
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def value_text(value) -> str:
    """A choice's value as the report prints it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _kind_of(value, path: str, where: str) -> tuple:
    """(kind, number) of one end of a range: ("int", n), ("float", x), ("size", bytes),
    ("time", seconds), or ("size|time", (bytes, seconds)) for text that is both ("1m")."""
    from blksim.common.units import parse_size, parse_time
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a number, a size or a time, found {value!r}")
    if isinstance(value, int):
        return "int", value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{where}: expected a finite number, found {value!r}")
        return "float", value
    if isinstance(value, str) and value.strip()[-1:].isalpha():   # a unit says which
        size, time = _read(parse_size, value, path), _read(parse_time, value, path, "s")
        if size is not None and time is not None:
            return "size|time", (size, time)
        if size is not None:
            return "size", size
        if time is not None:
            return "time", time
    raise ConfigError(f"{where}: expected a number, a size (\"2g\") or a time (\"10ms\"), "
                      f"found {value!r}")


def _read(parse, value, *args):
    """``parse(value, *args)``, or None where it raises ValueError."""
    try:
        return parse(value, *args)
    except ValueError:
        return None


def _current_kind(current) -> str | None:
    """The kind of the value the configuration has at the path (None: no value there)."""
    if current is None or isinstance(current, (dict, list)):
        return None
    if isinstance(current, bool):
        return "bool"
    if isinstance(current, int):
        return "int"
    if isinstance(current, float):
        return "float"
    if isinstance(current, str) and current.strip()[-1:].isdigit():
        return None                    # a bare number as text ("0"): the range says which
    try:
        kind = _kind_of(current, "", "")[0]
    except ConfigError:
        return "text"
    return None if kind == "size|time" else kind


def parse_choice(path: str, spec, current, where: str) -> OpenChoice:
    """One ``[experiment.open]`` entry, checked on its own (``current``: the value the
    configuration has at ``path``, None if none). ``where`` names the file and key."""
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: expected a table {{low, high, source}} or "
                          f"{{values, source}}, found {spec!r}")
    check_keys(spec, OPEN_KEYS, where)
    source = spec.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ConfigError(f"{where}: source expected text naming where the range comes from "
                          f"(a manual, a paper, or \"blksim's choice: ...\")")
    has_range = "low" in spec or "high" in spec
    if has_range == ("values" in spec):
        raise ConfigError(f"{where}: expected either low and high (a range) or values (a "
                          f"set), found {'both' if has_range else 'neither'}")
    if "values" in spec:
        return _parse_set(path, spec, current, source, where)
    for end in ("low", "high"):
        if end not in spec:
            raise ConfigError(f"{where}: a range needs low and high; {end} is missing")
    scale = spec.get("scale", "linear")
    if scale not in SCALES:
        raise ConfigError(f"{where}: scale expected linear or log, found {scale!r}")
    (lk, lo), (hk, hi) = (_kind_of(spec[e], path, f"{where}: {e}") for e in ("low", "high"))
    want = _current_kind(current)
    kind = _range_kind(lk, hk, want, spec, where)
    if kind in ("size", "time") and lk == "size|time":
        lo = lo[0] if kind == "size" else lo[1]
    if kind in ("size", "time") and hk == "size|time":
        hi = hi[0] if kind == "size" else hi[1]
    if not lo < hi:
        raise ConfigError(f"{where}: low ({spec['low']!r}) must be below high "
                          f"({spec['high']!r})")
    if scale == "log" and not lo > 0:
        raise ConfigError(f"{where}: a log scale needs low above 0, found {spec['low']!r}")
    return OpenChoice(path, kind, source.strip(), lo, hi, scale)


def _range_kind(lk: str, hk: str, want: str | None, spec: dict, where: str) -> str:
    """The kind of a range from its ends' kinds and the value at its path."""
    nums = {"int", "float"}
    if lk in nums and hk in nums:
        kind = "int" if lk == hk == "int" else "float"
        if want == "int" and kind != "int":
            raise ConfigError(f"{where}: the configuration's value is a whole number; low "
                              f"and high must be whole numbers, found {spec['low']!r} and "
                              f"{spec['high']!r}")
        if want in ("size", "time", "text", "bool"):
            raise ConfigError(f"{where}: the configuration's value is a {KIND_NAMES[want]}; "
                              f"low and high are numbers ({spec['low']!r}, {spec['high']!r})")
        return "float" if want == "float" else kind
    if lk in nums or hk in nums:
        raise ConfigError(f"{where}: low and high must be of one kind, found "
                          f"{spec['low']!r} and {spec['high']!r}")
    kinds = ({"size", "time"} if lk == "size|time" else {lk}) & \
        ({"size", "time"} if hk == "size|time" else {hk})
    if not kinds:
        raise ConfigError(f"{where}: low and high must be of one kind (both sizes or both "
                          f"times), found {spec['low']!r} and {spec['high']!r}")
    if want in kinds:
        return want
    if want is not None:
        raise ConfigError(f"{where}: the configuration's value is a {KIND_NAMES[want]}; low "
                          f"and high are not ({spec['low']!r}, {spec['high']!r})")
    if len(kinds) > 1:
        raise ConfigError(f"{where}: {spec['low']!r} and {spec['high']!r} are sizes or "
                          f"times; write 1MiB or 60s to say which")
    return kinds.pop()


def _parse_set(path: str, spec: dict, current, source: str, where: str) -> OpenChoice:
    """A set: two or more plain values, none twice, each of the kind of the value at the
    path (a whole number where it is one, a size where it is a size, ...) or, where the
    configuration has none, all of one kind."""
    values = spec["values"]
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: values expected a non-empty list, found {values!r}")
    texts = []
    for v in values:
        if isinstance(v, (dict, list)):
            raise ConfigError(f"{where}: values: expected plain values, found {v!r}")
        text = f"{type(v).__name__}:{v!r}"
        if text in texts:
            raise ConfigError(f"{where}: values: {v!r} is given twice")
        texts.append(text)
    if len(values) < 2:
        raise ConfigError(f"{where}: values: a set of one value leaves nothing open; give "
                          f"two or more")
    want = _current_kind(current)
    if want is None and isinstance(current, (dict, list)):
        want = "table"
    reference = current if want is not None else values[0]
    want = want or _current_kind(values[0])
    for v in values:
        kind = _current_kind(v)
        ok = kind == want or (want == "float" and kind == "int") or \
            (isinstance(v, str) and isinstance(reference, str) and
             want in ("size", "time") and _either(v, want))
        if not ok:
            whose = "the configuration's value" if current is not None else \
                "the first value"
            raise ConfigError(f"{where}: values: {v!r} is not of the kind of {whose} "
                              f"{reference!r} (a {KIND_NAMES.get(want, want)})")
    return OpenChoice(path, "set", source.strip(), values=tuple(values))


def _either(text: str, kind: str) -> bool:
    """Whether ``text`` reads as a ``kind`` (a size or a time; "1m" reads as both)."""
    try:
        got = _kind_of(text, "", "")[0]
    except ConfigError:
        return False
    return got == kind or got == "size|time"


def latin_hypercube(n: int, d: int, seed: int) -> list:
    """``n`` points in the unit cube [0, 1)^d, a list of d coordinates each: every one of
    the n equal strata of every coordinate holds exactly one point (McKay, Beckman and
    Conover 1979). The same (n, d, seed) gives the same points."""
    import numpy as np
    rng = np.random.default_rng(seed)
    columns = []
    for _ in range(d):
        strata = rng.permutation(n)
        offsets = rng.random(n)
        columns.append([(int(s) + float(o)) / n for s, o in zip(strata, offsets)])
    return [[columns[j][i] for j in range(d)] for i in range(n)]


@dataclass(frozen=True)
class SamplePoint:
    """One point of the robustness sample: its number (1..N), its unit coordinates and
    the value of each choice there (path -> configuration value)."""

    index: int
    unit: tuple
    values: tuple              # ((path, value), ...), in the choices' order

    def as_dict(self) -> dict:
        """path -> value."""
        return dict(self.values)


def sample_points(choices: list, n: int, seed: int) -> list:
    """The N points of the robustness sample over ``choices`` (`latin_hypercube`)."""
    cube = latin_hypercube(n, len(choices), seed)
    return [SamplePoint(i + 1, tuple(u), tuple((c.path, c.value(x))
                                               for c, x in zip(choices, u)))
            for i, u in enumerate(cube)]


def overlaps(a: str, b: str) -> bool:
    """Whether dotted paths ``a`` and ``b`` name the same value or one holds the other."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def parse_open(table, exp) -> list:
    """The ``[experiment.open]`` table of ``exp`` (an `Experiment` being loaded) as
    `OpenChoice`s, each checked on its own (`parse_choice`) and against the experiment: a
    path into the configuration (a value there, or a key its table takes), not a path of
    the experiment's own axes (the seed, the varied disks' scheduler), not one a variant's
    ``set`` or the grid changes (it would replace the sampled value), and no two choices
    on one value. Errors are `ConfigError`s naming the file and the key."""
    from blksim.experiments.sweep.paths import get_path
    where = f"{exp.path}: [experiment.open]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table of dotted configuration paths -> "
                          f"{{low, high, source}} or {{values, source}}")
    choices: list = []
    for path, spec in table.items():
        w = f"{where} {path}"
        if not path or any(not p.strip() or p != p.strip() for p in path.split(".")):
            raise ConfigError(f"{w}: expected a dotted path into the configuration, such as "
                              f"host.memory or app.0.sessions")
        _check_axes(path, exp, w)
        for other in choices:
            if overlaps(path, other.path):
                raise ConfigError(f"{w}: {other.path} is an open choice too; one value is "
                                  f"one choice")
        current = get_path(exp.base, path, ABSENT)
        if isinstance(current, (dict, list)):
            raise ConfigError(f"{w}: names a table, not a value; an open choice is one "
                              f"value below it")
        choice = parse_choice(path, spec, None if current is ABSENT else current, w)
        if current is ABSENT:
            _check_setting(exp, choice, w)
        _check_grid(exp, choice, w)
        choices.append(choice)
    return choices


def _check_axes(path: str, exp, where: str) -> None:
    """Refuse a choice on the seed, on a varied disk's scheduler or on what a variant
    sets."""
    if overlaps(path, "run.seed"):
        raise ConfigError(f"{where}: the seed is the experiment's own axis (seeds 1..N); it "
                          f"cannot be an open choice")
    for disk in exp._scheduler_disks(exp.base):
        axis = ("queue.scheduler", "devices.sda.queue.scheduler") if disk == "sda" else \
            (f"devices.{disk}.queue.scheduler",)
        for p in axis:
            if overlaps(path, p):
                raise ConfigError(f"{where}: {disk}'s scheduler is the experiment's "
                                  f"schedulers axis; it cannot be an open choice")
    for name, changes in exp.variants:
        for p in changes:
            if overlaps(path, p):
                raise ConfigError(f"{where}: variant {name!r} sets {p}; a value a variant "
                                  f"sets cannot be an open choice (the sample would replace "
                                  f"the variant's value)")


def _probes(choice: OpenChoice) -> list:
    """Values of the choice that show whether something else replaces it: its ends (a
    range) or every value (a set)."""
    return list(choice.values) if choice.kind == "set" else \
        [choice.value(0.0), choice.value(1.0)]


def _check_setting(exp, choice: OpenChoice, where: str) -> None:
    """A path with no value in the file must be a key the configuration takes there (a
    default it would otherwise use): the configuration with each probe value (a range's
    ends, a set's values) set at the path must resolve. (The values of a path the file
    sets are checked by kind here, and every point's configuration is resolved when a
    robustness run is planned, since choices may only work together: RAID 10 and an even
    number of members.)"""
    import copy
    from blksim.experiments.sweep.paths import set_path
    from blksim.sim.config import resolve
    for value in _probes(choice):
        raw = copy.deepcopy(exp.base)
        try:
            set_path(raw, choice.path, value, exp.path)
            resolve(raw, exp.path)
        except ConfigError as exc:
            raise ConfigError(f"{where}: not a setting the configuration takes with the value "
                              f"{value_text(value)} ({' '.join(str(exc).split())})") from None


def _check_grid(exp, choice: OpenChoice, where: str) -> None:
    """Refuse a choice the grid's tunables would replace (a --set path onto the same
    value): tried with the choice's probe values under each of the grid's values."""
    import copy
    from blksim.experiments.sweep.paths import get_path, set_path, set_text
    from blksim.sim.config import apply_overrides
    for gpath, values in exp.grid:
        for probe in _probes(choice):
            raw = copy.deepcopy(exp.base)
            set_path(raw, choice.path, probe, where)
            for v in values:
                try:
                    out = apply_overrides(raw, [f"{gpath}={set_text(v)}"])
                except ConfigError:
                    continue
                if get_path(out, choice.path) != probe:
                    raise ConfigError(f"{where}: the grid's {gpath} sets it; a tunable of "
                                      f"the grid cannot be an open choice")
