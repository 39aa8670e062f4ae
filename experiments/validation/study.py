"""The validation study: replay DiskSim's validation traces and score the drive model.

A DiskSim "validate" trace (`traces.disksim_validate`) holds requests with the
response time measured on a real drive. The workload is closed: one request is
outstanding, and the next is issued ``delay`` after the previous one completes.
DiskSim replays it on the drive alone, queue depth 1, FCFS, and compares the
simulated response times ("IOdriver Physical access time") with the measured
ones; so does this module, at the device level (no block layer, no elevator:
with one request outstanding there is nothing to schedule). The score is the
demerit figure (`blksim.experiments.validation.demerit`) beside DiskSim 4.0's
own (``disksim_scores.toml`` beside this module). ``blksim validate`` is its
command line (`blksim.cli.validate`).
"""

from __future__ import annotations

import math
import os
from blksim._compat import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from blksim.disk_models.disksim.validation_set import shipped_folder
from blksim.disk_models.presets import list_presets, load_drive
from blksim.experiments.validation.demerit import demerit, disksim_binned_demerit
from blksim.traces.disksim_validate import read_disksim_validate

ENV_DIR = "BLKSIM_VALIDATION_DIR"


class ValidationError(ValueError):
    """Bad input to a validation run: a missing trace or data folder, a request off the drive."""


class ValidateRequest:
    """The request object handed to the device: position, size, direction."""

    __slots__ = ("sector", "nr_sectors", "write", "breakdown")

    def __init__(self, sector: int, nr_sectors: int, write: bool) -> None:
        self.sector = sector
        self.nr_sectors = nr_sectors
        self.write = write
        self.breakdown = None


@dataclass
class ValidationResult:
    """One drive on one validate trace. Times are ms; ``mean_error_pct`` is
    100 * (simulated - measured) / measured. Two rulers: ``demerit_ms`` scores the raw
    times, ``demerit_binned_ms`` both samples binned as DiskSim bins them. Beside each,
    DiskSim 4.0's figure on the same ruler, None when it has none:
    ``disksim_exact_demerit_ms`` from its raw times, ``disksim_demerit_ms`` the binned
    figure it publishes. ``disksim_error_pct`` is DiskSim 4.0's mean error on this trace
    (None without its figures). ``sim_ms`` and ``meas_ms`` are the response times,
    request by request; ``class_labels`` each request's class (`request_classes`)."""

    drive: str
    trace: str
    n: int
    sim_mean_ms: float
    sim_std_ms: float
    meas_mean_ms: float
    meas_std_ms: float
    mean_error_pct: float
    demerit_ms: float
    disksim_demerit_ms: float | None
    calibration: bool = False
    demerit_binned_ms: float | None = None
    disksim_error_pct: float | None = None
    disksim_exact_demerit_ms: float | None = None
    sim_ms: list = field(default=None, repr=False, compare=False)
    meas_ms: list = field(default=None, repr=False, compare=False)
    class_labels: list = field(default=None, repr=False, compare=False)

    @cached_property
    def classes(self) -> dict:
        """`class_figures` per request class (empty without ``class_labels``), worked out
        when first asked for: only ``validate --all`` prints them."""
        if not self.class_labels:
            return {}
        return class_figures(self.class_labels, self.sim_ms, self.meas_ms)

    def worst_class(self) -> tuple | None:
        """(class, its share of the squared error) of the class that contributes most."""
        if not self.classes:
            return None
        name, c = max(self.classes.items(), key=lambda kv: kv[1]["share"])
        return name, c["share"]

    def rulers(self) -> list:
        """(blksim's demerit, DiskSim's) on each ruler DiskSim has a figure for."""
        return ruler_pairs(self.demerit_ms, self.disksim_exact_demerit_ms,
                           self.demerit_binned_ms, self.disksim_demerit_ms)

    @property
    def beats_disksim(self) -> bool | None:
        """True when blksim's demerit is at or under DiskSim's on every ruler DiskSim
        has a figure for (None when it has none)."""
        return at_or_under(self.rulers())


def ruler_pairs(raw, disksim_raw, binned, disksim_binned) -> list:
    """(blksim's demerit, DiskSim's) on each ruler where both are known (not None): the
    raw times, then binned as DiskSim bins them (its published figure)."""
    return [(ours, theirs) for ours, theirs in ((raw, disksim_raw), (binned, disksim_binned))
            if ours is not None and theirs is not None]


def at_or_under(pairs) -> bool | None:
    """True when blksim's demerit is at or under DiskSim's in every (blksim, DiskSim)
    pair of ``pairs``; None when there is none."""
    return all(ours <= theirs for ours, theirs in pairs) if pairs else None


def replay_validate(device, records, hits: list | None = None) -> list:
    """Replay ``records`` closed-loop on an idle ``device``; return each response time (s).

    Record 0 is issued at t = 0; each following one ``delay`` (of the record
    before it) after that one's completion. Response time = completion - issue.
    ``hits``, if given, gets whether the drive's cache served each request (None where
    the drive does not say).
    """
    if hits is not None and hasattr(device, "record_breakdown"):
        device.record_breakdown = True
    if device.outstanding():
        raise ValidationError(f"{device.name}: the device must be idle to replay a trace")
    submit = device.submit
    next_event = device.next_event_time
    pop = device.pop_completed
    times = []
    append = times.append
    t = 0.0
    for rec in records:
        rq = ValidateRequest(rec.sector, rec.nr_sectors, rec.write)
        submit(rq, t)
        done = next_event()
        got = pop(done)
        if len(got) != 1 or got[0] is not rq:
            raise ValidationError(f"{device.name}: did not complete the one request outstanding")
        append(done - t)
        if hits is not None:
            hits.append(rq.breakdown["cache_hit"] if rq.breakdown is not None else None)
        t = done + rec.delay
    return times


def build_device(spec, seed: int = 0):
    """The device a validation run uses for ``spec``: queue depth 1, FCFS."""
    from blksim.disk_models.drive import make_drive
    return make_drive(spec, seed=seed, queue_depth=1)


def load_scores() -> dict:
    """DiskSim 4.0's scores per drive stem, from ``disksim_scores.toml`` beside this module."""
    text = Path(__file__).with_name("disksim_scores.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["drives"]


def validation_dir(data=None) -> Path:
    """The DiskSim validation folder (the one holding ``traces/``).

    ``data`` (``blksim validate --data DIR``), else ``$BLKSIM_VALIDATION_DIR``, names a
    folder of one's own measurements laid out as DiskSim's ``valid/`` (``traces/``
    there, or in its ``disksim/``); without either, the set that ships with blksim.
    """
    given = data if data is not None else os.environ.get(ENV_DIR)
    if not given:
        return shipped_folder()
    base = Path(given)
    for candidate in (base / "disksim", base):
        if (candidate / "traces").is_dir():
            return candidate
    source = "--data" if data is not None else f"${ENV_DIR}"
    raise ValidationError(f"{source} {base}: no DiskSim validation data there (expected "
                          f"traces/ or disksim/traces/ in it)")


def resolve_trace(trace, data=None) -> Path:
    """``trace`` as a file path, or a trace stem of the validation folder (``cheetah9LP``;
    ``data`` as for `validation_dir`)."""
    path = Path(trace)
    if path.is_file():
        return path
    text = str(trace)
    if "/" not in text and "\\" not in text and not text.endswith(".trace"):
        try:
            candidate = validation_dir(data) / "traces" / f"{text}.trace"
        except ValidationError:
            candidate = None
        if candidate is not None and candidate.is_file():
            return candidate
    raise ValidationError(f"{trace}: no such trace file")


def _drive_key(drive, spec) -> str:
    text = str(drive)
    if isinstance(drive, Path) or text.endswith(".toml") or "/" in text or "\\" in text:
        return spec.name
    return text


def _mean_std(values) -> tuple:
    """Mean and population standard deviation of ``values``."""
    n = len(values)
    mean = math.fsum(values) / n
    return mean, math.sqrt(math.fsum((v - mean) * (v - mean) for v in values) / n)


def _disksim_error(score: dict) -> float | None:
    """DiskSim 4.0's mean error (%) from its scores, or None without them."""
    ds, meas = score.get("disksim_mean_ms"), score.get("measured_mean_ms")
    if ds is None or not meas:
        return None
    return 100.0 * (ds - meas) / meas


def request_classes(records, sim_hits=None) -> list:
    """Each request's class: direction (R, W); the cache state, as the trace's second
    column records it (Hit, Miss, Doub, Trip) where it carries information, else as the
    simulated cache had it (hit, miss: lower case); and whether it starts where the
    previous request ended (seq) or not (rand). E.g. "R Miss rand", "R hit seq"."""
    informative = len({r.cache for r in records}) > 1
    out = []
    end = None
    for k, r in enumerate(records):
        if informative or sim_hits is None or sim_hits[k] is None:
            cache = r.cache
        else:
            cache = "hit" if sim_hits[k] else "miss"
        out.append(f"{'W' if r.write else 'R'} {cache} "
                   f"{'seq' if r.sector == end else 'rand'}")
        end = r.sector + r.nr_sectors
    return out


def class_figures(classes: list, sim_ms: list, meas_ms: list) -> dict:
    """Per request class: its requests, its own demerit (ms), its mean error (%) and its
    share of the squared error: n_c * demerit_c^2 over the sum of that over classes (how
    much of the departure between the two CDFs the class accounts for)."""
    groups: dict = {}
    for c, s, m in zip(classes, sim_ms, meas_ms):
        g = groups.setdefault(c, ([], []))
        g[0].append(s)
        g[1].append(m)
    out = {}
    for c, (s, m) in sorted(groups.items()):
        d = demerit(s, m)
        out[c] = {"n": len(s), "demerit_ms": d,
                  "error_pct": 100.0 * (sum(s) - sum(m)) / sum(m) if sum(m) else 0.0,
                  "weight": len(s) * d * d}
    total = sum(c["weight"] for c in out.values()) or 1.0
    for c in out.values():
        c["share"] = c.pop("weight") / total
    return out


def validate_drive(drive, trace_path, seed: int = 0, data=None,
                   classes: bool = True) -> ValidationResult:
    """Replay the validate trace at ``trace_path`` (a file, or a drive stem of the
    validation folder, ``data`` as for `validation_dir`) on ``drive`` (a preset name or a
    drive TOML path) and compare with the measured response times. ``classes``: also
    label each request with its class (``class_labels``, which needs whether the drive's
    cache served it); False skips that work, and the result has no per-class figures."""
    spec = load_drive(drive)
    path = resolve_trace(trace_path, data)
    records = list(read_disksim_validate(path))
    if not records:
        raise ValidationError(f"{path}: the trace holds no requests")
    capacity = spec.capacity
    for i, rec in enumerate(records):
        if rec.sector + rec.nr_sectors > capacity:
            raise ValidationError(
                f"{path}: request {i + 1} (sectors {rec.sector}+{rec.nr_sectors}) ends beyond "
                f"{spec.name}'s {capacity} sectors; the trace is for a larger drive")
    hits = [] if classes else None
    sim_ms = [t * 1e3 for t in replay_validate(build_device(spec, seed), records, hits)]
    meas_ms = [r.measured * 1e3 for r in records]
    key = _drive_key(drive, spec)
    score = load_scores().get(key, {})
    sim_mean, sim_std = _mean_std(sim_ms)
    meas_mean, meas_std = _mean_std(meas_ms)
    return ValidationResult(
        drive=key, trace=path.name, n=len(records),
        sim_mean_ms=sim_mean, sim_std_ms=sim_std,
        meas_mean_ms=meas_mean, meas_std_ms=meas_std,
        mean_error_pct=100.0 * (sim_mean - meas_mean) / meas_mean if meas_mean else float("nan"),
        demerit_ms=demerit(sim_ms, meas_ms),
        disksim_demerit_ms=score.get("disksim_demerit_ms"),
        calibration=bool(score.get("calibration", False)),
        demerit_binned_ms=disksim_binned_demerit(sim_ms, meas_ms),
        disksim_error_pct=_disksim_error(score),
        disksim_exact_demerit_ms=score.get("disksim_exact_demerit_ms"),
        sim_ms=sim_ms, meas_ms=meas_ms,
        class_labels=request_classes(records, hits) if classes else None)


def validate_all(seed: int = 0, data=None) -> tuple[list, list]:
    """Validate every drive of DiskSim's set that has a trace and a preset (the shipped
    set, or ``data`` as for `validation_dir`).

    Returns (results, skipped), ``skipped`` as (stem, reason) pairs.
    """
    folder = validation_dir(data)
    presets = set(list_presets())
    results, skipped = [], []
    for stem in load_scores():
        trace = folder / "traces" / f"{stem}.trace"
        if not trace.is_file():
            skipped.append((stem, f"no trace {trace}"))
        elif stem not in presets:
            skipped.append((stem, "no preset"))
        else:
            results.append(validate_drive(stem, trace, seed=seed))
    return results, skipped
