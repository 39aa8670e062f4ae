"""The blksim command line: outputs, reproducibility, and clean errors on bad input."""

import json
import os
import subprocess
import sys

import pytest

from blksim.cli import main

SMALL = """
[run]
seed = 3
duration = "2s"

[device]
drive = "cheetah15k4"

[queue]
scheduler = "deadline"

[[job]]
name = "r"
rw = "randread"
bs = "4k"
numjobs = 2
thinktime = "1ms"

[[job]]
name = "w"
rw = "write"
bs = "16k"
iodepth = 4
offset = "1g"
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    return str(path)


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_run_prints_the_table(config, capsys):
    code, out, err = run_cli(["run", config, "--quiet"], capsys)
    assert code == 0, err
    for word in ("IOPS", "MB/s", "Q2C", "Q2D", "D2C", "p99", "r.0", "r.1", "w"):
        assert word in out
    assert err == ""


def test_out_dir_files_and_byte_identical_reruns(config, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        code, _, err = run_cli(["run", config, "--out", str(d), "--per-request", "--quiet"],
                               capsys)
        assert code == 0, err
    assert sorted(os.listdir(a)) == ["config.resolved.toml", "requests.csv", "results.json"]
    for name in os.listdir(a):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    results = json.loads((a / "results.json").read_text())
    assert results["scheduler"] == "deadline" and results["schema"] == 1
    lines = (a / "requests.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert header[:12] == ["bio", "pid", "process", "device", "request", "dir", "sector",
                           "sectors", "sync", "q_s", "d_s", "c_s"]
    assert len(lines) - 1 == results["block_layer"]["bios_completed"]
    for line in lines[1:50]:
        row = dict(zip(header, line.split(",")))
        q, d, c = float(row["q_s"]), float(row["d_s"]), float(row["c_s"])
        assert q <= d <= c
        # the drive's breakdown of the bio's own request adds up to its D2C
        parts = sum(float(row[k]) for k in ("drive_queue_ms", "overhead_ms", "seek_ms",
                                            "rotation_ms", "transfer_ms", "bus_ms"))
        assert parts == pytest.approx((c - d) * 1e3, abs=1e-4)


def test_resolved_config_reproduces_the_run(config, tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    assert run_cli(["run", config, "--out", str(first), "--quiet"], capsys)[0] == 0
    resolved = first / "config.resolved.toml"
    assert run_cli(["run", str(resolved), "--out", str(second), "--quiet"], capsys)[0] == 0
    r1 = json.loads((first / "results.json").read_text())
    r2 = json.loads((second / "results.json").read_text())
    assert r1["totals"] == r2["totals"] and r1["processes"] == r2["processes"]
    assert r1["config"] == r2["config"]


def test_set_overrides_reach_the_run(config, tmp_path, capsys):
    out = tmp_path / "o"
    code, _, err = run_cli(["run", config, "--set", "queue/iosched/fifo_batch=8",
                            "--set", "queue/nr_requests=64", "--set", "device/queue_depth=2",
                            "--seed", "9", "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    cfg = json.loads((out / "results.json").read_text())["config"]
    assert cfg["queue"]["iosched"]["fifo_batch"] == 8
    assert cfg["queue"]["nr_requests"] == 64
    assert cfg["device"]["queue_depth"] == 2
    assert cfg["run"]["seed"] == 9


def test_compare_runs_each_scheduler_with_the_same_seed(config, tmp_path, capsys):
    code, out, err = run_cli(["compare", config, "--schedulers", "noop,deadline",
                              "--set", "queue/iosched/fifo_batch=4", "--out",
                              str(tmp_path / "c"), "--quiet"], capsys)
    assert code == 0, err
    header = [line for line in out.splitlines() if "noop" in line and "deadline" in line]
    assert header
    for sched in ("noop", "deadline"):
        r = json.loads((tmp_path / "c" / sched / "results.json").read_text())
        assert r["scheduler"] == sched and r["seed"] == 3


def test_demo_show_config(capsys):
    code, out, _ = run_cli(["demo", "--show-config"], capsys)
    assert code == 0 and "[[job]]" in out and "cheetah15k4" in out


@pytest.mark.parametrize("args, expected", [
    (["--set", "queue/scheduler=cfqq"], "valid: anticipatory, cfq, clook, cscan, deadline, fcfs, look, noop, scan, sptf, sstf"),
    (["--set", "queue/iosched/fifo_btach=8"],
     "valid: fifo_batch, front_merges, read_expire, write_expire, writes_starved"),
    (["--set", "queue/iosched/fifo_batch=-1"], "out of range"),
    (["--set", "queue/nr_requests=2"], "nr_requests = 2 is out of range [4, 1048576]"),
    (["--set", "device/queue_depth=0"], "queue_depth = 0 is out of range"),
    (["--set", "queue/max_sectors_kb=100000"], "max_sectors_kb"),
    (["--set", "run/kernel=\"2.4.20\""], "valid: 2.6.18"),
    (["--set", "nonsense"], "PATH=VALUE"),
    (["--set", "device/drive=\"nosuchdrive\""], "valid presets are"),
    (["--per-request"], "--per-request needs --out"),
])
def test_bad_input_is_one_line_and_exit_2(config, capsys, args, expected):
    code, out, err = run_cli(["run", config, "--quiet", *args], capsys)
    assert code == 2
    assert expected in err
    assert err.startswith("blksim: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_unknown_scheduler_in_compare(config, capsys):
    code, _, err = run_cli(["compare", config, "--schedulers", "noop,as", "--quiet"], capsys)
    assert code == 2 and "unknown scheduler 'as'" in err and "valid: anticipatory, cfq, clook, cscan, deadline, fcfs, look, noop, scan, sptf, sstf (2.6 kernels); none, mq-deadline" in err


def test_unknown_key_in_file_names_the_file(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(SMALL.replace('scheduler = "deadline"', 'scheduler = "deadline"\nnr_request = 4'))
    code, _, err = run_cli(["run", str(path), "--quiet"], capsys)
    assert code == 2 and str(path) in err and "'nr_request'" in err and "nr_requests" in err


def test_malformed_trace_line_names_file_and_line_and_leaves_no_files(tmp_path, capsys):
    trace = tmp_path / "t.trace"
    trace.write_text("0.0 0 100 8 1\n1.5 0 200 8 1\n2.0 0 abc 8 1\n")
    path = tmp_path / "c.toml"
    path.write_text('[[trace]]\npath = "t.trace"\n')
    out = tmp_path / "out"
    code, _, err = run_cli(["run", str(path), "--out", str(out), "--per-request", "--quiet"],
                           capsys)
    assert code == 2
    assert f"{trace}:3" in err and "blkno" in err
    assert not out.exists() or os.listdir(out) == []


def test_trace_replay_runs(tmp_path, capsys):
    trace = tmp_path / "t.trace"
    trace.write_text("".join(f"{i * 10.0} 0 {i * 1000} 8 {i % 2}\n" for i in range(50)))
    path = tmp_path / "c.toml"
    path.write_text('[[trace]]\npath = "t.trace"\nname = "replay"\n')
    code, out, err = run_cli(["run", str(path), "--quiet"], capsys)
    assert code == 0, err
    assert "replay" in out and "50 bios completed" in out


def test_console_script_has_help():
    exe = os.path.join(os.path.dirname(sys.executable), "blksim")
    out = subprocess.run([exe, "run", "--help"], capture_output=True, text=True, check=True)
    assert "queue/iosched/fifo_batch=8" in out.stdout and "--per-request" in out.stdout


def test_no_progress_bar_when_not_a_terminal(config, capsys):
    code, out, err = run_cli(["run", config], capsys)
    assert code == 0 and err == ""


# --- --iostat: a floor on the interval and a cap on the rows (issue 29) -------------------

@pytest.mark.parametrize("interval, message", [
    ("1ns", "--iostat 1ns: the interval must be at least 1ms (iostat itself takes whole "
            "seconds)"),
    ("999us", "--iostat 999us: the interval must be at least 1ms (iostat itself takes "
              "whole seconds)"),
])
def test_iostat_interval_has_a_floor(config, tmp_path, capsys, interval, message):
    # before: --iostat 1ns ran on for ever (2e9 intervals in a 2 s run)
    assert main(["run", config, "-q", "--iostat", interval, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == f"blksim: error: {message}\n"
    assert not (tmp_path / "o" / "iostat.csv").exists()


def test_iostat_rows_are_capped_before_the_run(tmp_path, capsys):
    path = tmp_path / "long.toml"
    path.write_text('[run]\nduration = "2000s"\n[[job]]\nname = "r"\nrw = "randread"\n')
    out = tmp_path / "o"
    assert main(["run", str(path), "-q", "--iostat", "1ms", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        "blksim: error: --iostat 1ms: 2,000,000 rows (1 device(s) over 2000 s), more than "
        "the 1,000,000 rows iostat.csv may hold; choose an interval of at least 2ms\n")
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []


def test_iostat_rows_are_capped_as_they_come_without_a_duration(tmp_path, monkeypatch):
    """A run without a duration (until its workload ends) is stopped when it passes the cap."""
    import blksim
    from blksim.sim import iostat_log
    from blksim.api import simulate
    from blksim.block.legacy_queue import SimulationError
    from blksim.sim.config import resolve
    monkeypatch.setattr(iostat_log, "MAX_ROWS", 50)
    raw = {"job": [{"name": "r", "rw": "randread", "number_ios": 400}]}
    cfg = resolve(raw, "t.toml")
    assert cfg.duration is None
    with pytest.raises(SimulationError, match=r"^--iostat 1ms: more than 50 rows by 0\.05"
                                              r"[0-9]* s, more than the 50 rows"):
        simulate(cfg, per_request=False, iostat=(str(tmp_path / "iostat.csv"), 1e-3))
    assert list(tmp_path.iterdir()) == []
    r = simulate(cfg, per_request=False, iostat=(str(tmp_path / "iostat.csv"), 1.0))
    assert r.all.ios == 400 and (tmp_path / "iostat.csv").exists()
    del blksim


@pytest.mark.parametrize("given, message", [
    ("", "--scheduler: give at least one scheduler name"),       # it said --schedulers
    ("noop,cfq", "--scheduler 'noop,cfq': run takes one scheduler (blksim compare "
                 "--schedulers noop,cfq runs each)"),              # it ran noop, silently
])
def test_run_scheduler_is_one_name(config, capsys, given, message):
    assert main(["run", config, "-q", "--scheduler", given]) == 2
    assert capsys.readouterr().err == f"blksim: error: {message}\n"


def test_compare_devices_is_checked_as_the_api_checks_it(tmp_path, capsys):
    path = tmp_path / "two.toml"
    path.write_text('[run]\nduration = "100ms"\n[devices.sdb]\ndrive = "cheetah15k4"\n'
                    '[[job]]\nname = "r"\nrw = "randread"\n')
    # "," raised StopIteration (a traceback) before
    for given, message in ((",", "--devices: give at least one disk name (e.g. sdb), found "
                                 "','"),
                           ("sdb,/dev/sdb", "--devices: 'sdb,/dev/sdb' names a disk twice"),
                           ("sdc", f"{path}: no disk 'sdc' to vary the scheduler of; disks: "
                                   f"sda, sdb")):
        assert main(["compare", str(path), "-q", "--schedulers", "noop,cfq",
                     "--devices", given]) == 2
        assert capsys.readouterr().err == f"blksim: error: {message}\n"
    assert main(["compare", str(path), "-q", "--schedulers", "noop,cfq",
                 "--devices", "/dev/sdb"]) == 0
