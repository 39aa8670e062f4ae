"""The steady-state check on whole runs: results.json's ``steady_state``, the terminal's
line for a figure that drifts, and the experiment report's note (docs/results.md,
"Steady state")."""

from __future__ import annotations

from types import SimpleNamespace

import blksim
from blksim.experiments.sweep.report import steady_state_notes
from blksim.sim.results import after_run_warnings

RAMPING = """
[run]
seed = 3
duration = "8s"
[device]
drive = "cheetah15k4"
[[job]]
name = "steady"
rw = "randread"
bs = "4k"
rate_iops = 60
[[job]]
name = "late"
rw = "randread"
bs = "4k"
rate_iops = 60
startdelay = "4s"
"""

STEADY = RAMPING.replace('startdelay = "4s"', 'startdelay = "0s"')


def test_a_run_whose_load_doubles_halfway_drifts_and_says_so():
    # 60 I/Os per second for 4 s, then 120: a step of h = 60 in the middle of the
    # window, fitted by a line, rises by 1.5 h over it (cov(t, step) / var(t) = (1/8) /
    # (1/12)): +100 % of the 90/s mean
    r = blksim.run(blksim.config_from_text(RAMPING, "ramping"), per_request=False)
    iops = r.figures["steady_state"]["totals.all.iops"]
    assert iops["verdict"] == "drifts"
    assert 70 < iops["drift_pct"] < 130
    assert abs(iops["mean"] - 90) < 5
    lines = [w for w in after_run_warnings(r.figures) if w.startswith("totals.all.iops")]
    assert len(lines) == 1 and "drifts by +" in lines[0] and "I/Os per second" in lines[0]


def test_the_same_load_from_the_start_is_steady_and_silent():
    r = blksim.run(blksim.config_from_text(STEADY, "steady"), per_request=False)
    iops = r.figures["steady_state"]["totals.all.iops"]
    assert iops["verdict"] == "steady"
    assert abs(iops["mean"] - 120) < 5
    assert not [w for w in after_run_warnings(r.figures) if w.startswith("totals.all.iops")]


def test_a_run_too_short_gets_no_verdict():
    short = STEADY.replace('duration = "8s"', 'duration = "50ms"')
    r = blksim.run(blksim.config_from_text(short, "short"), per_request=False)
    for report in r.figures["steady_state"].values():
        assert report["verdict"] == "too short to tell"


def _task(key, scheduler):
    return SimpleNamespace(key=key, variant="base", tunables=(), scheduler=scheduler, seed=1)


def test_the_report_notes_each_run_that_is_not_steady():
    exp = SimpleNamespace(figure="apps.db.tps", figure_label="transactions per second")
    steady = {"verdict": "steady"}
    drifting = {"verdict": "drifts", "reason": "trend", "drift_pct": -12.5,
                "drift_half_width_pct": 4.0, "window_s": 180.0}
    warming = {"verdict": "drifts", "reason": "warm-up", "mser5_truncate_s": 10.0,
               "warmup_bias_pct": 3.9}
    short = {"verdict": "too short to tell", "reason": "9 intervals"}
    records = {k: {"figures": {"steady_state": {"apps.db.tps": rep}}} for k, rep in
               (("a", steady), ("b", drifting), ("c", warming), ("d", short))}
    tasks = [_task("a", "noop"), _task("b", "cfq"), _task("c", "deadline"),
             _task("d", "anticipatory")]
    notes = steady_state_notes(exp, tasks, records, [])
    assert notes[0] == "## Steady state"
    body = [n for n in notes if n.startswith("- ")]
    assert len(body) == 3
    assert "cfq" in body[0] and "-12.5 %" in body[0]
    assert "deadline" in body[1] and "first 10 s" in body[1]
    assert "anticipatory" in body[2] and "too short to tell" in body[2]
    assert steady_state_notes(exp, tasks[:1], records, []) == []


def test_the_runs_series_counts_every_measured_completion_in_bounded_memory():
    from blksim.sim.config import resolve
    from blksim.sim.engine import Simulation
    cfg = resolve(blksim.config_from_text(STEADY.replace('duration = "8s"',
                                                         'duration = "8s"\nramp_time = "1s"'),
                                          "s").data, "s")
    sim = Simulation(cfg)
    sim.run()
    m = sim.metrics
    m.flush()
    assert m.series.start == 1.0                      # from ramp_time on
    assert m.series.total == m.completed > 0
    assert len(m.series.counts) == 128
    # the Q2C sums (integer ns) add up to the run's Q2C total
    assert abs(m.series.total_value * 1e-9 - m.totals.read.q2c.total) < 1e-6 * m.completed
