"""Sweeps: a grid of runs kept run by run, resumed after a kill without losing or repeating
a run, the same summary one at a time, on a pool and on Dask, and clear errors."""

import os
import signal
import subprocess
import sys
import time

import pytest

from blksim.experiments.sweep import run_experiment
from blksim.experiments.sweep.definition import load_experiment
from blksim.experiments.sweep.runner import dask_available
from blksim.experiments.sweep.summary import mean_interval
from blksim.cli import main
from blksim.sim.config import ConfigError

EXPERIMENT = """\
[experiment]
name = "small"
description = "random readers under two schedulers"
schedulers = ["noop", "cfq"]
seeds = {seeds}
scale = ["run.duration"]
figure = "totals.read.iops"
figure_label = "read IOPS"
[[experiment.variant]]
name = "8k"
[[experiment.variant]]
name = "64k"
set = {{"job.0.bs" = "64k"}}
[experiment.grid]
"queue/nr_requests" = [4, 64]

[run]
duration = "{duration}"
[device]
drive = "cheetah15k4"
[[job]]
name = "r"
rw = "randread"
bs = "8k"
numjobs = 4
"""


def write(tmp_path, seeds=1, duration="2s"):
    path = tmp_path / "small.toml"
    path.write_text(EXPERIMENT.format(seeds=seeds, duration=duration))
    return path


def test_the_grid_is_schedulers_by_variants_by_tunables_by_seeds(tmp_path):
    exp = load_experiment(write(tmp_path, seeds=3))
    tasks = exp.tasks()
    assert len(tasks) == 2 * 2 * 2 * 3
    assert len({t.key for t in tasks}) == len(tasks)
    t = tasks[-1]
    assert (t.scheduler, t.variant, t.tunables, t.seed) == \
        ("cfq", "64k", (("queue/nr_requests", 64),), 3)
    assert t.raw["job"][0]["bs"] == "64k" and t.raw["queue"]["scheduler"] == "cfq"
    assert t.raw["run"]["seed"] == 3
    # --scale multiplies what the experiment lists under scale
    assert exp.tasks(scale=0.5)[0].raw["run"]["duration"] == "1.0s"


def test_a_killed_sweep_resumes_without_losing_or_repeating_a_run(tmp_path):
    path = write(tmp_path, seeds=2, duration="6s")
    out = tmp_path / "out"
    runs = out / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "blksim", "experiment", "run", str(path),
                             "--out", str(out), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        done = [n for n in os.listdir(runs) if n.endswith(".json")] if runs.exists() else []
        if len(done) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = {n: (runs / n).read_bytes() for n in os.listdir(runs) if n.endswith(".json")}
    assert 3 <= len(finished) < 16
    # a half-written result left behind is never taken for a finished one
    (runs / "0123456789abcdef0123.json.999.tmp").write_text('{"figures": ')
    paths = run_experiment(load_experiment(path), out)
    assert paths["cached"] == len(finished) and paths["ran"] == 16 - len(finished)
    after = {n: (runs / n).read_bytes() for n in os.listdir(runs)}
    assert len(after) == 16 and all(after[n] == b for n, b in finished.items())
    # a finished sweep reruns nothing
    again = run_experiment(load_experiment(path), out)
    assert again["ran"] == 0 and again["cached"] == 16


def test_the_summary_is_the_same_on_one_process_a_pool_and_dask(tmp_path):
    exp = load_experiment(write(tmp_path))
    one = run_experiment(exp, tmp_path / "one", jobs=1)
    pool = run_experiment(exp, tmp_path / "pool", jobs=2)
    text = open(one["summary"], "rb").read()
    assert text == open(pool["summary"], "rb").read()
    assert text.count(b"\n") == 1 + 8
    if dask_available():
        dask = run_experiment(exp, tmp_path / "dask", jobs=2, dask="local")
        assert open(dask["summary"], "rb").read() == text


@pytest.mark.skipif(not dask_available(), reason="Dask distributed is not installed")
def test_the_command_line_runs_on_a_local_dask_cluster(tmp_path, capsys):
    path = write(tmp_path)
    assert main(["experiment", "run", str(path), "--dask", "local", "--jobs", "2",
                 "--out", str(tmp_path / "d"), "-q"]) == 0
    assert "8 runs (0 already finished, 8 run now)" in capsys.readouterr().out


@pytest.mark.skipif(not dask_available(), reason="Dask distributed is not installed")
def test_a_sweep_runs_on_a_dask_scheduler_by_its_address(tmp_path):
    from dask.distributed import LocalCluster
    exp = load_experiment(write(tmp_path))
    one = run_experiment(exp, tmp_path / "one")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        remote = run_experiment(exp, tmp_path / "remote", dask=cluster.scheduler_address)
    assert remote["ran"] == 8
    assert open(remote["summary"], "rb").read() == open(one["summary"], "rb").read()


def test_the_report_has_intervals_and_plots(tmp_path):
    exp = load_experiment(write(tmp_path, seeds=3))
    paths = run_experiment(exp, tmp_path / "r", jobs=2)
    report = open(paths["report"]).read()
    assert "| 64k, nr_requests=64 | cfq |" in report and " ± " in report
    for key in ("figure_png", "cdf_png", "timeline_png", "util_png"):
        assert os.path.getsize(paths[key]) > 10000
    mean, half = mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * (1.0 / 3) ** 0.5, rel=1e-3)


def test_sweep_runs_a_grid_over_any_set_path(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[run]\nduration = \"1s\"\n[device]\ndrive = \"cheetah15k4\"\n"
                   "[[job]]\nname = \"w\"\nrw = \"randwrite\"\nbs = \"4k\"\niodepth = 8\n")
    assert main(["sweep", str(cfg), "--grid", "queue/nr_requests=4,32", "--grid",
                 "device/queue_depth=1,8", "--schedulers", "deadline", "--out",
                 str(tmp_path / "s"), "-q", "--figure", "totals.write.iops"]) == 0
    rows = (tmp_path / "s" / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("scheduler,variant,queue/nr_requests,device/queue_depth,seed")
    assert len(rows) == 5


@pytest.mark.parametrize("args, message", [
    (["experiment", "run", "no-such-experiment"], "no shipped experiment of that name"),
    (["sweep", "{cfg}", "--grid", "queue/nr_requests"], "expected PATH=V1,V2"),
    (["sweep", "{cfg}", "--grid", "queue/bogus/x/y=1,2"], "unknown path"),
    (["sweep", "{cfg}", "--jobs", "0"], "--jobs: expected at least 1"),
])
def test_sweep_errors_are_one_line(tmp_path, capsys, args, message):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[device]\ndrive = \"cheetah15k4\"\n[[job]]\nname = \"r\"\n")
    args = [a.replace("{cfg}", str(cfg)) for a in args]
    assert main(args + ["--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


def test_experiment_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(EXPERIMENT.format(seeds=1, duration="1s").replace(
        '"job.0.bs"', '"job.3.bs"'))
    with pytest.raises(ConfigError, match=r"bad.toml: variant '64k': job.3.bs"):
        load_experiment(path)
    path.write_text("[device]\ndrive = \"cheetah15k4\"\n")
    with pytest.raises(ConfigError, match="no \\[experiment\\] table"):
        load_experiment(path)


@pytest.mark.parametrize("name, scale", [("oracle-tpcc", 0.02), ("mysql-tpcc", 0.02),
                                         ("maxdb-load", 0.001), ("fileserver-ramp", 0.003)])
def test_every_shipped_experiment_runs_at_a_small_scale(tmp_path, name, scale):
    from blksim.experiments.sweep import find, shipped
    assert name in shipped()
    exp = load_experiment(find(name))
    paths = run_experiment(exp, tmp_path / name, jobs=2, seeds=1, scale=scale)
    assert paths["ran"] == len(exp.schedulers) * len(exp.variants)
    import csv
    with open(paths["summary"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == paths["runs"] and all(float(r["figure"]) > 0 for r in rows)
