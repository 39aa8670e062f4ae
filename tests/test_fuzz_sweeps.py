"""Experiments and sweeps fed junk and values at the edges (issue 29): experiment files
with junk in their [experiment] table or bytes that are not UTF-8, ``blksim sweep`` with
junk grids, figures, seeds and schedulers, and stores of finished runs with junk in a
run's file. Each ends within a time bound, with exit status 0 and sane figures or one
line naming what is wrong (exit status 2), and leaves nothing half-written: a failed
command leaves at most finished runs. The long form of each test is marked slow."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, event, given, settings, strategies as st

from tests.test_fuzz_commands import EDGE, FIO_VALUE, SET_PATHS, _fresh, run_cli

FAST = settings(max_examples=12, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
LONG = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

BASE = {"run": {"duration": "0.1s"}, "device": {"drive": "cheetah15k4"},
        "job": [{"name": "r", "rw": "randread", "bs": "4k", "number_ios": 30}]}
GOOD_FIGURES = ["totals.read.iops", "totals.all.q2c.p99_ms", "iostat.sda.%util"]
FIGURES = ["totals.read.iops", "totals.all.q2c.p99_ms", "iostat.sda.%util", "totals",
           "totals.read.iopz", "iostat.sdb.%util", "", ".", "apps.x.tps", "totals..iops"]
SCHEDULERS = ["noop", "deadline", "cfq", "anticipatory", "bogus", "", "noop:X"]


def _leftovers(out: Path) -> list:
    """Files under ``out`` that a command must not leave: temporary files anywhere, and
    anything but whole runs when the command failed."""
    bad = []
    for root, _, files in os.walk(out):
        for name in files:
            path = Path(root) / name
            if name.endswith(".tmp") or path.stat().st_size == 0:
                bad.append(str(path))
    return bad


def _check(code: int, stdout: str, out: Path) -> None:
    event(f"exit status {code}")
    assert not _leftovers(out), _leftovers(out)
    if code != 0:
        # a failed sweep leaves at most whole runs (a figure path is checked at the first)
        if out.exists():
            assert {p.name for p in out.iterdir()} <= {"runs"}
            for p in (out / "runs").iterdir() if (out / "runs").exists() else ():
                assert "figures" in json.loads(p.read_text())
        return
    assert "runs (" in stdout
    with open(out / "summary.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and len(rows) == int(stdout.split(" runs (")[0].split()[-1])
    keys = [(r["scheduler"], r["variant"], r["seed"],
             tuple(v for k, v in r.items() if "/" in k)) for r in rows]
    assert len(set(keys)) == len(keys)                 # no point twice
    assert len({r["key"] for r in rows}) == len(rows)  # and every point its own run
    for r in rows:
        # a run that completed nothing in its window has no rate and no latency (blank
        # cells: docs/results.md, "Empty windows"); any other has both
        empty = r["iops"] == ""
        assert (r["mb_per_s"] == "") == empty and (r["q2c_mean_ms"] == "") >= empty
        for c in ("iops", "mb_per_s") if not empty else ():
            assert math.isfinite(float(r[c])) and float(r[c]) >= 0
        assert (r["q2c_mean_ms"] == "") == (empty or float(r["iops"]) == 0)
        if r["q2c_mean_ms"] != "":
            assert math.isfinite(float(r["q2c_mean_ms"])) and float(r["q2c_mean_ms"]) >= 0
        if r.get("figure", "") != "":
            assert math.isfinite(float(r["figure"]))
    assert (out / "report.md").stat().st_size > 0


# --- experiment files -------------------------------------------------------------------

EXP_KEYS = ["schedulers", "devices", "seeds", "scale", "figure", "figure_label", "columns",
            "name", "variant", "grid"]
GRID_PATHS = ["queue/nr_requests", "device/queue_depth", "queue/iosched/fifo_batch",
              "sda/queue/nr_requests", "run/seed", "queue/scheduler", "run/kernel"]
GRID_VALUE = st.one_of(st.integers(1, 300), st.sampled_from(["2.6.18", "5.4", "noop"]), EDGE)
VARIANT = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "a"]),
     "set": st.dictionaries(st.sampled_from(["run.seed", "run.duration", "job.0.bs",
                                             "queue.scheduler", "job.5.bs", "x.y"]),
                            st.one_of(st.sampled_from(["8k", "0.2s", 3, "cfq"]), EDGE),
                            max_size=2)})
#: per key, values that make sense (most draws) or junk at the edges
PLAUSIBLE = {
    "schedulers": st.lists(st.sampled_from(["noop", "deadline", "cfq"]), min_size=1,
                           max_size=2, unique=True),
    "devices": st.sampled_from([["sda"], ["sdb"], []]),
    "seeds": st.integers(1, 2),
    "scale": st.sampled_from([["run.duration"], ["nowhere"]]),
    "figure": st.one_of(st.sampled_from(GOOD_FIGURES), st.sampled_from(FIGURES)),
    "figure_label": st.sampled_from(["IOPS", ""]),
    "columns": st.lists(st.tuples(st.one_of(st.sampled_from(GOOD_FIGURES),
                                            st.sampled_from(FIGURES)),
                                  st.sampled_from(["x", "y"]))
                        .map(list), max_size=2),
    "name": st.sampled_from(["e", "", "a/b"]),
    "variant": st.lists(VARIANT, min_size=1, max_size=2),
    "grid": st.one_of(
        st.dictionaries(st.sampled_from(GRID_PATHS[:3]),
                        st.lists(st.integers(4, 64), min_size=1, max_size=2), max_size=2),
        st.dictionaries(st.sampled_from(GRID_PATHS),
                        st.lists(GRID_VALUE, min_size=1, max_size=2), max_size=2)),
}


@st.composite
def experiments(draw):
    exp = {"schedulers": ["noop"], "scale": ["run.duration"]}
    for key in draw(st.lists(st.sampled_from(EXP_KEYS), max_size=3, unique=True)):
        exp[key] = draw(PLAUSIBLE[key] if draw(st.integers(0, 5)) else EDGE)
    return {"experiment": exp, **BASE}


def _run_experiment(tmp_path, capsys, data, junk=None, scale="1"):
    tmp_path = _fresh(tmp_path)
    path = tmp_path / "e.toml"
    try:
        text = tomli_w.dumps(data).encode()
    except (TypeError, ValueError):
        return                                   # not expressible in TOML
    if junk is not None:
        at, byte = junk
        text = text[:at % (len(text) + 1)] + bytes([byte]) + text[at % (len(text) + 1):]
    path.write_bytes(text)
    out = tmp_path / "out"
    code, stdout, err = run_cli(["experiment", "run", str(path), "-q", "--out", str(out),
                                 "--scale", scale], capsys, seconds=60)
    if code == 2:
        assert str(path) in err or "--" in err, err
    _check(code, stdout, out)


SCALES = st.sampled_from(["1", "1", "0.5", "1e-9", "1e300", "0", "-1", "nan", "inf"])


@FAST
@given(data=experiments(), scale=SCALES)
def test_experiment_files_at_the_edges(tmp_path, capsys, data, scale):
    _run_experiment(tmp_path, capsys, data, scale=scale)


@pytest.mark.slow
@LONG
@given(data=experiments(), scale=SCALES)
def test_experiment_files_at_the_edges_long(tmp_path, capsys, data, scale):
    _run_experiment(tmp_path, capsys, data, scale=scale)


@FAST
@given(at=st.integers(0, 10**4), byte=st.integers(0x80, 0xff))
def test_experiment_files_with_a_byte_that_is_not_utf8(tmp_path, capsys, at, byte):
    _run_experiment(tmp_path, capsys, {"experiment": {"schedulers": ["noop"]}, **BASE},
                    (at, byte))


# --- blksim sweep -----------------------------------------------------------------------

@st.composite
def sweep_args(draw):
    argv = []
    paths = st.one_of(st.sampled_from(GRID_PATHS[:3]), st.sampled_from(SET_PATHS + GRID_PATHS))
    for path in draw(st.lists(paths, max_size=2)):
        good = st.integers(4, 300).map(str)
        values = draw(st.lists(st.one_of(good, good, FIO_VALUE), min_size=0, max_size=3))
        argv += ["--grid", f"{path}={','.join(values)}"]
    if draw(st.booleans()):
        argv += ["--figure", draw(st.one_of(st.sampled_from(GOOD_FIGURES),
                                            st.sampled_from(FIGURES)))]
    if draw(st.booleans()):
        argv += ["--seeds", str(draw(st.sampled_from([1, 2, 0, -1, 1001])))]
    argv += ["--schedulers", ",".join(draw(st.one_of(
        st.lists(st.sampled_from(["noop", "deadline"]), min_size=1, max_size=2, unique=True),
        st.lists(st.sampled_from(SCHEDULERS), min_size=1, max_size=2))))]
    if draw(st.booleans()):
        argv += ["--devices", draw(st.sampled_from(["sda", "sdb", "", "sda,sda"]))]
    if draw(st.booleans()):
        argv += ["--jobs", str(draw(st.sampled_from([0, 1, 2])))]
    return argv


def _run_sweep(tmp_path, capsys, argv):
    tmp_path = _fresh(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text(tomli_w.dumps(BASE))
    out = tmp_path / "out"
    code, stdout, _ = run_cli(["sweep", str(cfg), "-q", "--out", str(out), *argv], capsys,
                              seconds=60)
    _check(code, stdout, out)


@FAST
@given(argv=sweep_args())
def test_sweep_arguments_at_the_edges(tmp_path, capsys, argv):
    _run_sweep(tmp_path, capsys, argv)


@pytest.mark.slow
@LONG
@given(argv=sweep_args())
def test_sweep_arguments_at_the_edges_long(tmp_path, capsys, argv):
    _run_sweep(tmp_path, capsys, argv)


# --- a store of finished runs with junk in a run's file ---------------------------------

@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A sweep of two runs, finished: its configuration and its runs' files."""
    from blksim.cli import main
    folder = tmp_path_factory.mktemp("finished")
    cfg = folder / "c.toml"
    cfg.write_text(tomli_w.dumps(BASE))
    assert main(["sweep", str(cfg), "-q", "--schedulers", "noop,deadline",
                 "--out", str(folder / "out")]) == 0
    return cfg, {p.name: p.read_bytes() for p in (folder / "out" / "runs").iterdir()}


JSON_JUNK = st.one_of(st.binary(max_size=60),
                      st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                                   lambda c: st.lists(c) | st.dictionaries(st.text(), c),
                                   max_leaves=6).map(lambda v: json.dumps(v).encode()))


@settings(FAST, max_examples=6)
@given(which=st.integers(0, 1), junk=JSON_JUNK, cut=st.one_of(st.none(), st.integers(0, 4000)))
def test_a_store_with_junk_in_a_run(tmp_path, capsys, finished, which, junk, cut):
    cfg, runs = finished
    tmp_path = _fresh(tmp_path)
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    names = sorted(runs)
    for name, data in runs.items():
        (out / "runs" / name).write_bytes(data)
    target = out / "runs" / names[which]
    target.write_bytes(junk if cut is None else runs[names[which]][:cut])
    code, stdout, err = run_cli(["sweep", str(cfg), "-q", "--schedulers", "noop,deadline",
                                 "--out", str(out)], capsys, seconds=60)
    assert code == 0, err
    _check(code, stdout, out)
    kept = json.loads(target.read_bytes())            # the run, whatever was there
    assert kept["figures"] == json.loads(runs[names[which]])["figures"]
