"""`blksim replay`: a trace to a table or a comparison without a configuration file; a
trace given where a configuration belongs; --scheduler and a scheduler set by --set leave
the configured scheduler's tunables out, with a note."""

from collections import Counter

import pytest

from blksim.cli import main
from blksim._compat import tomllib

TRACE = "".join(f"{i * 0.004:.3f} 0 {(i * 7919) % 1000000 * 8} 8 1\n" for i in range(400))


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "w.trace"
    path.write_text(TRACE)
    return path


def test_replay_prints_one_table_or_a_comparison(trace, capsys):
    assert main(["replay", str(trace), "--drive", "cheetah15k4", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("w: scheduler deadline, drive cheetah15k4") and "read" in out
    assert main(["replay", str(trace), "--drive", "cheetah15k4", "--schedulers",
                 "noop,cfq", "--mode", "closed", "-q"]) == 0
    out = capsys.readouterr().out
    assert "noop" in out.splitlines()[2] and "cfq" in out.splitlines()[2]


def test_replay_shows_the_equivalent_configuration(trace, tmp_path, capsys):
    assert main(["replay", str(trace), str(trace), "--drive", "cheetah15k4", "--mode",
                 "closed", "--show-config"]) == 0
    raw = tomllib.loads(capsys.readouterr().out)
    assert raw["device"]["drive"] == "cheetah15k4"
    assert [t["mode"] for t in raw["trace"]] == ["closed", "closed"]
    import tomli_w
    cfg = tmp_path / "same.toml"
    cfg.write_text(tomli_w.dumps(raw))
    assert main(["run", str(cfg), "-q"]) == 0


def test_replay_errors_are_one_line(tmp_path, trace, capsys):
    assert main(["replay", str(tmp_path / "none.trace"), "--drive", "cheetah15k4"]) == 2
    assert "no such trace file" in capsys.readouterr().err
    assert main(["replay", str(trace), "--drive", "nodrive", "-q"]) == 2
    assert "nodrive" in capsys.readouterr().err


def test_a_trace_given_as_a_configuration_says_what_to_run(trace, capsys):
    assert main(["run", str(trace)]) == 2
    err = capsys.readouterr().err
    assert "this is a trace (disksim), not a configuration" in err
    assert f"blksim replay {trace} --drive NAME" in err


DEADLINE = """\
[run]
duration = "1s"
[device]
drive = "cheetah15k4"
[queue]
scheduler = "deadline"
[queue.iosched]
fifo_batch = 8
[[job]]
name = "r"
rw = "randread"
"""


@pytest.mark.parametrize("args", [["--scheduler", "cfq"], ["--set", "queue/scheduler=cfq"]])
def test_another_scheduler_leaves_the_configured_tunables_out(tmp_path, capsys, args):
    cfg = tmp_path / "d.toml"
    cfg.write_text(DEADLINE)
    assert main(["run", str(cfg), "-q", "--out", str(tmp_path / "o")] + args) == 0
    captured = capsys.readouterr()
    assert "cfq has no tunable queue/iosched/fifo_batch; left out" in captured.err
    assert "scheduler cfq" in captured.out
    resolved = tomllib.loads((tmp_path / "o" / "config.resolved.toml").read_text())
    assert "fifo_batch" not in resolved["queue"]["iosched"]


def test_trace_formats_lists_every_format(capsys):
    assert main(["trace", "formats"]) == 0
    out = capsys.readouterr().out.splitlines()
    names = {line.split()[0] for line in out[1:]}
    assert {"blktrace", "blkparse", "msr", "spc", "disksim", "fio"} <= names


def test_a_trace_of_several_devices_on_one_drive_is_warned_about(tmp_path, capsys):
    import warnings
    from blksim import run
    path = tmp_path / "multi.trace"
    path.write_text("".join(f"{i * 4.0:.3f} {i % 3} {(i * 7919) % 100000 * 8} 8 1\n"
                            for i in range(60)))
    assert main(["replay", str(path), "--drive", "cheetah15k4", "-q"]) == 0
    err = capsys.readouterr().err
    assert "several devices (0, 1, 2)" in err and "--device" in err
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run({"device": {"drive": "cheetah15k4"}, "trace": [{"path": str(path)}]},
                     per_request=False)
    assert any("several devices" in str(w.message) for w in caught)
    assert result.figures["replay"][0]["traced_devices"] == ["0", "1", "2"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run({"device": {"drive": "cheetah15k4"}, "trace": [{"path": str(path), "devno": 1}]},
            per_request=False)
    assert not any("several devices" in str(w.message) for w in caught)


def test_a_tunable_set_explicitly_for_another_scheduler_stays_an_error(tmp_path, capsys):
    cfg = tmp_path / "d.toml"
    cfg.write_text(DEADLINE)
    assert main(["run", str(cfg), "--scheduler", "noop", "--set",
                 "queue/iosched/fifo_batch=4", "-q"]) == 2
    assert "unknown tunable queue/iosched/fifo_batch for scheduler 'noop'" in \
        capsys.readouterr().err


def test_requests_csv_names_the_process_device_and_request(tmp_path):
    import csv
    cfg = tmp_path / "s.toml"
    cfg.write_text("""\
[run]
duration = "1s"
[device]
drive = "cheetah15k4"
[devices.sdb]
drive = "cheetah15k4"
[volumes."vg0/data"]
type = "linear"
devices = ["/dev/sda", "/dev/sdb"]
[[job]]
name = "seqwriter"
rw = "write"
bs = "4k"
iodepth = 16
ioengine = "libaio"
[[job]]
name = "lv reader"
rw = "randread"
filename = "/dev/vg0/data"
""")
    out = tmp_path / "o"
    assert main(["run", str(cfg), "-q", "--per-request", "--out", str(out)]) == 0
    with open(out / "requests.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["process"] for r in rows} == {"seqwriter", "lv reader"}
    assert {r["device"] for r in rows if r["process"] == "lv reader"} == {"dm-0"}
    writes = [r for r in rows if r["process"] == "seqwriter"]
    assert {r["device"] for r in writes} == {"sda"}
    # sequential 4 KiB writes merge: several bios share a request
    per_request = Counter(r["request"] for r in writes)
    assert max(per_request.values()) > 1 and all(int(k) >= 0 for k in per_request)


def test_the_drive_queue_policy_is_a_tunable_and_aging_bounds_the_far_stream(tmp_path):
    import blksim
    cfg = {"run": {"duration": "30s"}, "device": {"drive": "cheetah15k4", "queue_depth": 32},
           "queue": {"scheduler": "noop"},
           "job": [{"name": "random", "rw": "randread", "iodepth": 32, "ioengine": "libaio",
                    "size": "10g"},
                   {"name": "log", "rw": "write", "rate_iops": 50, "offset": "30g",
                    "sync": True}]}

    def log_wait(policy):
        r = blksim.run(cfg, set={"device/policy": policy, "device/age_weight": 20},
                       per_request=False)
        assert r.figures["config"]["device"]["policy"] == \
            {"sptf": "sptf_opt", "asptf": "asptf_opt"}.get(policy, policy)
        log = next(p for p in r.processes if p.name == "log")
        return log.write.q2c.mean_ms, log.write.q2c.max_ms
    sptf, asptf = log_wait("sptf"), log_wait("asptf")
    # plain SPTF passes the far log writer over; aging serves it within a bound
    assert asptf[0] < 0.6 * sptf[0] and asptf[1] < 0.6 * sptf[1]


@pytest.mark.parametrize("device, message", [
    ({"drive": "cheetah15k4", "policy": "random"}, "policy = 'random': expected one of fcfs"),
    ({"drive": "cheetah15k4", "age_weight": -1}, "age_weight expected 0 to 10000"),
    ({"service": "fixed", "service_time": "1ms", "policy": "sptf"},
     "policy and age_weight belong to a drive"),
])
def test_drive_policy_errors_name_the_key(device, message):
    from blksim.sim.config import ConfigError, resolve
    with pytest.raises(ConfigError, match=message):
        resolve({"device": device, "job": [{"name": "j"}]}, "x.toml")
