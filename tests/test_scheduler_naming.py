"""A run over several disks names each disk's scheduler where it names one: the terminal's
first line, results.json (``schedulers`` beside ``scheduler``) and ``plot cdf``'s default
label; a run of one disk reads as before."""

import json
import os

from blksim.cli import main
from blksim.experiments.run_plots import load_run
from blksim.sim.results import per_device_text, scheduler_text

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def test_device_names_run_together_when_they_follow_one_another():
    assert per_device_text({"sda": "deadline", "sdb": "cfq", "sdc": "cfq", "sdd": "cfq"}) == \
        "deadline (sda), cfq (sdb-sdd)"
    assert per_device_text({"sda": "cfq", "sdb": "noop", "sdc": "cfq"}) == \
        "cfq (sda, sdc), noop (sdb)"
    assert per_device_text({"sda": "noop", "sdb": "noop"}) == "noop"
    assert per_device_text({"sda": "noop", "sdb": "cfq", "sdc": "cfq"}) == \
        "noop (sda), cfq (sdb, sdc)"
    assert scheduler_text({"scheduler": "kyber"}) == "kyber"


def test_lvm_linear_names_each_disks_scheduler(tmp_path, capsys):
    out = tmp_path / "lvm"
    assert main(["run", os.path.join(ROOT, "lvm-linear.toml"), "-q", "--duration", "1s",
                 "--set", "run/ramp_time=0.5s", "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("lvm-linear: schedulers deadline (sda), cfq (sdb-sdd), "
                            "drives cheetah15k4 (sda), cheetah10k7 (sdb-sdd), seed 3")
    results = json.loads((out / "results.json").read_text())
    # `scheduler` keeps its meaning (the first disk's); `schedulers` gives every disk's
    assert results["scheduler"] == "deadline"
    assert results["schedulers"] == {"sda": "deadline", "sdb": "cfq", "sdc": "cfq",
                                     "sdd": "cfq"}
    assert all(results["devices"][d]["scheduler"] == s
               for d, s in results["schedulers"].items())
    assert load_run(str(out)).label == "lvm: deadline (sda), cfq (sdb-sdd)"


def test_a_run_of_one_disk_reads_as_before(tmp_path, capsys):
    out = tmp_path / "deadline"
    assert main(["run", os.path.join(ROOT, "mixed.toml"), "-q", "--duration", "0.5s",
                 "--set", "queue/scheduler=deadline", "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert ": scheduler deadline, drive " in first
    results = json.loads((out / "results.json").read_text())
    assert "schedulers" not in results and results["scheduler"] == "deadline"
    assert load_run(str(out)).label == "deadline"
