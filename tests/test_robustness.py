"""Robustness of a conclusion: the Latin hypercube over an experiment's open choices, the
same sample and report from the same seed on one process, a pool and Dask, a choice that
cannot change the ranking reported as such, missing figures reported as missing, and the
one-line errors of a bad [experiment.open] table."""

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from blksim.cli import main
from blksim.experiments.sweep import run_experiment
from blksim.experiments.sweep.definition import load_experiment
from blksim.experiments.sweep.open_choices import (OpenChoice, latin_hypercube,
                                                   parse_choice, sample_points)
from blksim.experiments.sweep import robustness as rb
from blksim.experiments.sweep.runner import dask_available
from blksim.sim.config import ConfigError

# Random reads by four processes on sda under noop and cfq, 1 s each. The open choices:
# sda's tagged queue depth (at depth 1 cfq's service order wins, deeper the drive's own
# reordering under noop does: the ranking turns on it), and the nr_requests of sdb, a
# disk no job touches (it cannot change anything).
TINY = """\
[experiment]
name = "tiny"
schedulers = ["noop", "cfq"]
seeds = 1
figure = "totals.read.iops"
figure_label = "read IOPS"
{extra}
[experiment.open]
{open}

[run]
duration = "1s"
[device]
drive = "cheetah15k4"
queue_depth = 1
[devices.sdb]
drive = "cheetah15k4"
queue = {{nr_requests = 128}}
[[job]]
name = "r"
rw = "randread"
bs = "8k"
numjobs = 4
"""
DEPTH = '"device.queue_depth" = {low = 1, high = 32, scale = "log", source = "test"}'
IDLE = ('"devices.sdb.queue.nr_requests" = {low = 4, high = 512, scale = "log", '
        'source = "test: a disk the jobs never touch"}')


def tiny(tmp_path, open_lines=(DEPTH, IDLE), extra=""):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.format(open="\n".join(open_lines), extra=extra))
    return path


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 80), d=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_the_sample_is_a_latin_hypercube(n, d, seed):
    cube = latin_hypercube(n, d, seed)
    assert len(cube) == n and all(len(p) == d for p in cube)
    for j in range(d):
        # each of the n equal strata of every coordinate holds exactly one point
        assert sorted(int(p[j] * n) for p in cube) == list(range(n))
        assert all(0.0 <= p[j] < 1.0 for p in cube)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(2, 6), m=st.integers(1, 8), seed=st.integers(0, 1000))
def test_a_set_is_stratified_over_its_values_and_a_range_over_its_strata(k, m, seed):
    n = k * m
    values = [f"v{i}" for i in range(k)]
    level = OpenChoice("a.level", "set", "test", values=tuple(values))
    # whole numbers over [low, high + 1) = n strata of 1000 each
    size = parse_choice("a.size", {"low": 1024, "high": 1024 + n * 1000 - 1, "source": "t"},
                        2048, "f")
    points = sample_points([level, size], n, seed)
    got = [p.as_dict()["a.level"] for p in points]
    assert all(got.count(v) == m for v in values)          # each value N/k times
    # a linear range of whole numbers: value low + floor(u (high - low + 1)), so each of
    # the N strata of [low, high + 1) holds one point
    width = (size.high - size.low + 1) / n
    assert sorted(int((p.as_dict()["a.size"] - size.low) // width) for p in points) == \
        list(range(n))


def test_values_come_out_in_the_kind_of_the_range():
    mem = parse_choice("host.memory", {"low": "2g", "high": "16g", "scale": "log",
                                       "source": "t"}, "4g", "f")
    assert mem.value(0.0) == "2g" and mem.value(0.999999) == "16383m"
    assert mem.value(0.5) == "5792m"          # the geometric middle, 2^32.5 B, in MiB
    t = parse_choice("x.t", {"low": "5ms", "high": "50ms", "source": "t"}, "10ms", "f")
    assert t.value(0.0) == "0.005s" and t.value(0.5) == "0.0275s"
    n = parse_choice("x.n", {"low": 8, "high": 64, "source": "t"}, 16, "f")
    assert [n.value(u) for u in (0.0, 0.5, 0.999)] == [8, 36, 64]
    r = parse_choice("x.r", {"low": 0.8, "high": 0.95, "source": "t"}, 0.9, "f")
    assert r.value(0.5) == 0.875
    # a time the file wrote as a bare number in text ("0") takes a range of times
    assert parse_choice("x.think", {"low": "10ms", "high": "100ms", "source": "t"}, "0",
                        "f").kind == "time"


def test_the_same_seed_gives_the_same_points(tmp_path):
    exp = load_experiment(tiny(tmp_path))
    a, b = sample_points(exp.open, 12, 1), sample_points(exp.open, 12, 1)
    assert a == b
    assert sample_points(exp.open, 12, 2) != a
    one = rb.plan(exp, 6)
    assert [t.key for t in one.tasks] == [t.key for t in rb.plan(exp, 6).tasks]
    assert len(one.tasks) == 6 * 2                      # points x schedulers x seeds
    t = one.tasks[0]
    assert t.point()["point"] == 1 and t.raw["device"]["queue_depth"] == \
        t.point()["device.queue_depth"]


def _section(path) -> str:
    text = open(path, encoding="utf-8").read()
    return text[text.index("## Robustness"):]


def test_the_report_is_the_same_on_one_process_a_pool_and_dask(tmp_path):
    exp = load_experiment(tiny(tmp_path))
    outs = {}
    for how, kwargs in (("one", {}), ("pool", {"jobs": 2}), ("dask", {"jobs": 2,
                                                                      "dask": "local"})):
        if how == "dask" and not dask_available():
            continue
        plan = rb.plan(exp, 8)
        paths = run_experiment(exp, tmp_path / how, robustness=plan, **kwargs)
        assert paths["runs"] == 2 + 8 * 2 and paths["ran"] == paths["runs"]
        outs[how] = (open(paths["robustness_json"], "rb").read(),
                     open(paths["robustness_csv"], "rb").read(), _section(paths["report"]))
    assert len(outs) >= 2 and all(o == outs["one"] for o in outs.values())
    # the same seed in another folder: the same report; another seed: another sample
    again = run_experiment(exp, tmp_path / "again", robustness=rb.plan(exp, 8))
    assert open(again["robustness_json"], "rb").read() == outs["one"][0]
    other = run_experiment(exp, tmp_path / "other", robustness=rb.plan(exp, 8, seed=2))
    assert other["robustness"]["sample"] != again["robustness"]["sample"]


def test_a_choice_that_cannot_change_the_ranking_is_reported_as_such(tmp_path):
    exp = load_experiment(tiny(tmp_path))
    rep = run_experiment(exp, tmp_path / "o", robustness=rb.plan(exp, 16))["robustness"]
    pair = rep["cases"][0]["pairs"][0]
    figures = rep["cases"][0]["points"]
    deep = [p for p in figures if p["values"]["device.queue_depth"] > 1]
    shallow = [p for p in figures if p["values"]["device.queue_depth"] == 1]
    assert deep and shallow
    # the ranking turns on the queue depth: noop ahead at depth > 1, cfq at depth 1
    assert all(p["figures"]["noop"] > p["figures"]["cfq"] for p in deep)
    assert all(p["figures"]["cfq"] > p["figures"]["noop"] for p in shallow)
    assert (pair["a"], pair["a_wins"], pair["b_wins"]) == ("noop", len(deep), len(shallow))
    assert pair["moves_most"] == "device.queue_depth"
    assert pair["cannot_change_ranking"] == ["devices.sdb.queue.nr_requests"]
    idle = {c["path"]: c for c in pair["choices"]}["devices.sdb.queue.nr_requests"]
    assert idle["effect"] == "nil" and idle["p"] > rb.LEVEL
    r = pair["ratio"]
    assert r["min"] < 1 < r["max"] and r["n"] == 16
    # with the idle disk's choice alone, the ranking holds at every point: it cannot
    # change it, and the ratio does not move at all
    alone = load_experiment(tiny(tmp_path, open_lines=(IDLE,)))
    rep = run_experiment(alone, tmp_path / "a", robustness=rb.plan(alone, 6))["robustness"]
    pair = rep["cases"][0]["pairs"][0]
    assert pair["holds_everywhere"] and pair["a_wins"] == 6
    assert pair["cannot_change_ranking"] == ["devices.sdb.queue.nr_requests"]
    assert pair["ratio"]["min"] == pair["ratio"]["max"]
    assert pair["choices"][0]["share"] == 0.0 and pair["moves_most"] is None
    lines = "\n".join(rb.terminal_lines(rep))
    assert "cfq beats noop at 6 of 6 points" in lines or "noop beats cfq at 6 of 6" in lines
    assert "(the ranking holds at every point)" in lines


def test_a_missing_figure_is_missing_not_zero(tmp_path):
    exp = load_experiment(tiny(tmp_path, open_lines=(DEPTH,)))
    plan = rb.plan(exp, 6)
    paths = run_experiment(exp, tmp_path / "o", robustness=plan)
    records = {}
    for t in exp.tasks() + plan.tasks:
        records[t.key] = json.load(open(tmp_path / "o" / "runs" / f"{t.key}.json"))
    gone = plan.tasks[0]                   # noop at point 1: a run that never finished
    null = next(t for t in plan.tasks if t.sample == 3 and t.scheduler == "cfq")
    del records[gone.key]
    records[null.key]["figures"]["totals"]["read"]["iops"] = None   # an empty window
    rep = rb.report(exp, plan, records, exp.tasks())
    pts = {p["point"]: p["figures"] for p in rep["cases"][0]["points"]}
    # two points of one configuration share a run: both lose its figure
    lost = {(t.sample, t.scheduler) for t in plan.tasks if t.key in (gone.key, null.key)}
    assert (1, "noop") in lost and (3, "cfq") in lost
    assert all((pts[k][s] is None) == ((k, s) in lost) for k in pts for s in pts[k])
    pair = rep["cases"][0]["pairs"][0]
    missing = len({k for k, _ in lost})
    assert pair["missing"] == missing and pair["compared"] == 6 - missing
    assert pair["ratio"]["n"] == 6 - missing and pair["ratio"]["min"] > 0
    assert f"{missing} of 6 missing" in "\n".join(rb.terminal_lines(rep))
    row = [r for r in rb.csv_text(rep).splitlines() if r.startswith("base,3,")][0]
    assert row.endswith(",")                # cfq's cell blank, not 0
    assert paths["robustness"]["cases"][0]["pairs"][0]["missing"] == 0


@pytest.mark.parametrize("line, message", [
    ('"device.queue_depth" = {low = 1, high = 32, sauce = "x", source = "t"}',
     "device.queue_depth: unknown key 'sauce'"),
    ('"device.queue_depth" = {low = 32, high = 1, source = "t"}',
     "device.queue_depth: low (32) must be below high (1)"),
    ('"device.queue_depth" = {values = [], source = "t"}',
     "device.queue_depth: values expected a non-empty list"),
    ('"device.queue_depth" = {low = 1, high = 32}', "device.queue_depth: source expected"),
    ('"device.queue_depth" = {low = "1g", high = "2g", source = "t"}',
     "device.queue_depth: the configuration's value is a whole number"),
    ('"device.queue_depth" = {values = [1, "deep"], source = "t"}',
     "device.queue_depth: values: 'deep' is not of the kind"),
    ('"device.queue_depth" = {low = 0, high = 8, scale = "log", source = "t"}',
     "device.queue_depth: a log scale needs low above 0"),
    ('"hots.memory" = {low = "1g", high = "2g", source = "t"}',
     "hots.memory: not a setting the configuration takes"),
    ('"device.queue_dept" = {low = 1, high = 2, source = "t"}',
     "device.queue_dept: not a setting the configuration takes"),
    ('"device" = {low = 1, high = 2, source = "t"}', "device: names a table"),
    ('"run.seed" = {low = 1, high = 9, source = "t"}', "run.seed: the seed is"),
    ('"queue.scheduler" = {values = ["noop", "cfq"], source = "t"}',
     "queue.scheduler: sda's scheduler is the experiment's schedulers axis"),
    ('"job.0.bs" = {values = ["4k", "8k"], source = "t"}',
     "job.0.bs: variant 'big' sets job.0.bs"),
    ('"queue.nr_requests" = {low = 4, high = 64, source = "t"}',
     "queue.nr_requests: the grid's sda/queue/nr_requests sets it"),
])
def test_bad_open_choices_are_one_line_naming_the_file_and_key(tmp_path, line, message):
    extra = ('[[experiment.variant]]\nname = "big"\nset = {"job.0.bs" = "64k"}\n'
             '[experiment.grid]\n"sda/queue/nr_requests" = [32]')
    path = tiny(tmp_path, open_lines=(line,), extra=extra)
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    text = str(info.value)
    assert "\n" not in text and f"tiny.toml: [experiment.open] {message}" in text, text


def test_the_command_line_runs_a_robustness_sample(tmp_path, capsys):
    path = tiny(tmp_path, open_lines=(DEPTH,))
    assert main(["experiment", "run", str(path), "--robustness", "4", "--out",
                 str(tmp_path / "o"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "robustness of tiny: 4 points of a Latin hypercube over 1 open choices" in out
    assert "10 runs (0 already finished, 10 run now)" in out
    # resumable: the same sample again runs nothing
    assert main(["experiment", "run", str(path), "--robustness", "4", "--out",
                 str(tmp_path / "o"), "-q"]) == 0
    assert "10 runs (10 already finished, 0 run now)" in capsys.readouterr().out
    assert main(["experiment", "run", str(path), "--robustness", "1", "--out",
                 str(tmp_path / "o")]) == 2
    assert "--robustness: expected 2 to" in capsys.readouterr().err
    bare = tmp_path / "bare.toml"
    bare.write_text(TINY.format(open="", extra="").replace("[experiment.open]\n", ""))
    assert main(["experiment", "run", str(bare), "--robustness", "4", "--out",
                 str(tmp_path / "b")]) == 2
    assert "the experiment has no open choices" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["oracle-tpcc", "mysql-tpcc", "maxdb-load",
                                  "fileserver-ramp"])
def test_every_shipped_study_has_sourced_open_choices_and_a_sample_that_resolves(name):
    from blksim.experiments.sweep import find
    exp = load_experiment(find(name))
    assert len(exp.open) >= 3
    assert all(c.source and len(c.source) > 20 for c in exp.open)
    plan = rb.plan(exp, 3, seeds=1, first_only=True)      # every point's runs resolve
    assert len(plan.tasks) == 3 * len(exp.schedulers)
    assert not math.isnan(sum(len(p.values) for p in plan.points))


def _records(plan, figure):
    """Records of every task of ``plan`` whose read IOPS is ``figure(task)``."""
    return {t.key: {"figures": {"totals": {"read": {"iops": figure(t)}}}} for t in plan.tasks}


def test_rankings_ratios_and_shares_of_a_known_figure(tmp_path):
    exp = load_experiment(tiny(tmp_path))
    plan = rb.plan(exp, 10)
    depth = {p.index: p.as_dict()["device.queue_depth"] for p in plan.points}

    # noop 100, cfq 50 + 10 x depth: cfq ahead where the depth is above 5, and the
    # ratio noop/cfq = 100 / (50 + 10 depth) depends on the depth alone
    def figure(t):
        return 100.0 if t.scheduler == "noop" else 50.0 + 10.0 * depth[t.sample]
    rep = rb.report(exp, plan, _records(plan, figure))
    pair = rep["cases"][0]["pairs"][0]
    cfq_ahead = sum(d > 5 for d in depth.values())
    ties = sum(d == 5 for d in depth.values())
    ratios = sorted(100.0 / (50.0 + 10.0 * d) for d in depth.values())
    assert ties == 0 and 0 < cfq_ahead < 10          # the sample of seed 1 has both
    lead, other = ("cfq", "noop") if cfq_ahead > 5 else ("noop", "cfq")
    assert (pair["a"], pair["b"]) == (lead, other)
    assert pair["a_wins"] == max(cfq_ahead, 10 - cfq_ahead) and pair["compared"] == 10
    r = pair["ratio"]
    if lead == "cfq":
        ratios = sorted(1 / x for x in ratios)
    assert (r["min"], r["max"]) == pytest.approx((ratios[0], ratios[-1]))
    assert r["median"] == pytest.approx((ratios[4] + ratios[5]) / 2)
    shares = {c["path"]: c for c in pair["choices"]}
    assert shares["device.queue_depth"]["share"] > 0.8
    assert shares["device.queue_depth"]["rho"] == pytest.approx(
        1.0 if lead == "cfq" else -1.0)                 # monotone in the depth
    assert pair["moves_most"] == "device.queue_depth"
    assert "devices.sdb.queue.nr_requests" in pair["cannot_change_ranking"]
    # the same figure under both: a tie at every point, which no choice changes
    rep = rb.report(exp, plan, _records(plan, lambda t: 100.0))
    pair = rep["cases"][0]["pairs"][0]
    assert pair["holds_everywhere"] and pair["ties"] == 10
    assert "noop and cfq tie at 10 of 10 points" in "\n".join(rb.terminal_lines(rep))
    assert "(the tie holds at every point)" in "\n".join(rb.terminal_lines(rep))
    # a lower figure is better where the experiment says so: the ranking turns over
    exp.better = "lower"
    pair = rb.report(exp, plan, _records(plan, figure))["cases"][0]["pairs"][0]
    noop_wins = pair["a_wins"] if pair["a"] == "noop" else pair["b_wins"]
    assert noop_wins == cfq_ahead and pair["a_wins"] + pair["b_wins"] == 10


def test_a_point_the_configuration_refuses_is_named_before_anything_runs(tmp_path):
    path = tmp_path / "raid.toml"
    path.write_text('[experiment]\nschedulers = ["noop", "cfq"]\n'
                    'figure = "totals.read.iops"\n[experiment.open]\n'
                    '"device.raid.members" = {values = [4, 5], source = "test"}\n'
                    '[device.raid]\nlevel = "raid10"\nmembers = 4\n'
                    '[[job]]\nname = "r"\nrw = "randread"\n')
    exp = load_experiment(path)            # each value alone is a value of its kind
    with pytest.raises(ConfigError, match=r"raid.toml: robustness point \d+: \[device.raid\]"
                                          r": members: level raid10 needs an even number"):
        rb.plan(exp, 4)


def test_the_sample_runs_for_every_variant_and_tunable_or_the_first_only(tmp_path):
    extra = ('[[experiment.variant]]\nname = "8k"\n[[experiment.variant]]\nname = "64k"\n'
             'set = {"job.0.bs" = "64k"}\n[experiment.grid]\n"sda/queue/nr_requests" = [32, 64]')
    exp = load_experiment(tiny(tmp_path, open_lines=(DEPTH,), extra=extra))
    every = rb.plan(exp, 3)
    assert len(every.tasks) == 2 * 2 * 2 * 3     # schedulers x variants x tunables x points
    first = rb.plan(exp, 3, first_only=True)
    assert {(t.variant, t.tunables) for t in first.tasks} == \
        {("8k", (("sda/queue/nr_requests", 32),))}
    assert len(first.tasks) == 2 * 3
    # the points are the same whatever is sampled: their values, in each variant's runs
    t = next(t for t in every.tasks if t.variant == "64k" and t.sample == 2)
    assert t.raw["job"][0]["bs"] == "64k" and t.raw["queue"]["nr_requests"] in (32, 64)
    assert t.raw["device"]["queue_depth"] == every.points[1].as_dict()["device.queue_depth"]


def test_a_run_that_fails_is_missing_and_the_sample_goes_on(tmp_path, monkeypatch, capsys):
    from blksim.experiments.sweep import runner
    exp = load_experiment(tiny(tmp_path, open_lines=(DEPTH,)))
    plan = rb.plan(exp, 6)
    victim = next(t for t in plan.tasks if t.sample == 4 and t.scheduler == "cfq")
    real = runner.run_task

    def run_task(raw, source):
        if raw == victim.raw:
            raise RuntimeError("a model's bug")
        return real(raw, source)
    monkeypatch.setattr(runner, "run_task", run_task)
    paths = run_experiment(exp, tmp_path / "o", robustness=plan)
    lost = {t.sample for t in plan.tasks if t.key == victim.key}
    assert paths["failed"] == len(lost) and paths["ran"] == paths["runs"] - len(lost)
    rep = paths["robustness"]
    assert [(f["point"], f["scheduler"]) for f in rep["failed"]] == \
        [(k, "cfq") for k in sorted(lost)]
    assert rep["failed"][0]["error"] == "RuntimeError: a model's bug"
    pair = rep["cases"][0]["pairs"][0]
    assert pair["missing"] == len(lost) and pair["compared"] == 6 - len(lost)
    pts = {p["point"]: p["figures"] for p in rep["cases"][0]["points"]}
    assert pts[4]["cfq"] is None and pts[4]["noop"] > 0
    assert "the run failed (RuntimeError: a model's bug)" in capsys.readouterr().err
    assert f"{len(lost)} of 12 runs failed" in _section(paths["report"])
    # not kept: a resumed sample runs it again (and now it succeeds)
    monkeypatch.setattr(runner, "run_task", real)
    again = run_experiment(exp, tmp_path / "o", robustness=plan)
    assert again["ran"] == 1 and again["failed"] == 0
    assert again["robustness"]["cases"][0]["pairs"][0]["missing"] == 0
    # a run of the grid that fails still stops the sweep
    grid_victim = exp.tasks()[0]
    monkeypatch.setattr(runner, "run_task", lambda raw, source: (_ for _ in ()).throw(
        RuntimeError("grid")) if raw == grid_victim.raw else real(raw, source))
    with pytest.raises(RuntimeError, match="grid"):
        run_experiment(exp, tmp_path / "g", robustness=plan)
