"""The Python API (blksim.run, blksim.compare, RunResult): the same figures as the
command line, deterministic, per-bio records consistent with the figures, the
command line's errors, and a light ``import blksim``."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import tomli_w

import blksim
from blksim.api import request_dtype
from blksim.cli import main
from blksim.sim.results import results_json

ROOT = Path(__file__).resolve().parents[1]
MIXED = str(ROOT / "examples" / "mixed.toml")
OLTP = str(ROOT / "examples" / "oltp.fio")

# Ramp time, a client timeout and a switch: every part of the figures in play.
SWITCHED = """
[run]
seed = 5
duration = "1500ms"
ramp_time = "200ms"
client_timeout = "40ms"
[queue]
scheduler = "noop"
[[job]]
name = "r"
rw = "randread"
bs = "4k"
numjobs = 2
[[job]]
name = "w"
rw = "randwrite"
bs = "8k"
iodepth = 8
[[switch]]
at = "700ms"
scheduler = "cfq"
[switch.iosched]
slice_idle = 0
"""


def _csv_lines(requests, names: dict) -> list[str]:
    """requests.csv's lines, rebuilt from a requests array (``names``: pid -> name)."""
    return ["bio,pid,process,device,request,dir,sector,sectors,sync,q_s,d_s,c_s"] + [
        f"{r['bio']},{r['pid']},{names[r['pid']]},{r['device']},{r['request']},{r['dir']},"
        f"{r['sector']},{r['sectors']},{int(r['sync'])},"
        f"{r['q_s']:.9f},{r['d_s']:.9f},{r['c_s']:.9f}" for r in requests if r["measured"]]


def _same_as_cli_output(result, out: Path) -> None:
    assert results_json(result.figures) == (out / "results.json").read_text()
    assert tomli_w.dumps(result.figures["config"]) == (out / "config.resolved.toml").read_text()
    names = {p.pid: p.name for p in result.processes}
    # requests.csv's first twelve columns are the array's; the drive's breakdown follows
    csv_rows = [",".join(line.split(",")[:12])
                for line in (out / "requests.csv").read_text().splitlines()]
    assert _csv_lines(result.requests, names) == csv_rows


# ---------------------------------------------------------------------- same as the CLI

def test_run_gives_the_cli_results_json_resolved_config_and_requests_csv(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", MIXED, "-q", "--seed", "3", "--duration", "2s", "--per-request",
                 "--set", "queue/iosched/fifo_batch=4", "--set", "device/queue_depth=4",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    r = blksim.run(MIXED, seed=3, duration="2s",
                   set={"queue/iosched/fifo_batch": 4, "device/queue_depth": 4})
    _same_as_cli_output(r, out)
    assert r.config["queue"]["iosched"]["fifo_batch"] == 4
    assert r.config["device"]["queue_depth"] == 4


def test_run_with_a_switch_and_ramp_time_matches_the_cli(tmp_path, capsys):
    path = tmp_path / "switched.toml"
    path.write_text(SWITCHED)
    out = tmp_path / "out"
    assert main(["run", str(path), "-q", "--per-request", "--out", str(out)]) == 0
    capsys.readouterr()
    _same_as_cli_output(blksim.run(blksim.load_config(path)), out)


def test_compare_gives_the_cli_figures_for_each_scheduler(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compare", MIXED, "-q", "--schedulers", "noop,deadline,cfq", "--seed", "2",
                 "--duration", "1s", "--per-request", "--out", str(out)]) == 0
    capsys.readouterr()
    with pytest.warns(UserWarning, match="noop has no tunable queue/iosched/fifo_batch"):
        runs = blksim.compare(MIXED, ["noop", "deadline", "cfq"], seed=2, duration=1)
    assert list(runs) == ["noop", "deadline", "cfq"]
    for name, r in runs.items():
        assert r.scheduler == name and r.seed == 2
        _same_as_cli_output(r, out / name)
    # the file's fifo_batch went to deadline only, as blksim compare does
    assert runs["deadline"].config["queue"]["iosched"]["fifo_batch"] == 16
    assert runs["noop"].config["queue"]["iosched"] == {}


def test_builtin_config_is_what_the_demo_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["demo", "-q", "--duration", "1s", "--out", str(out)]) == 0
    capsys.readouterr()
    runs = blksim.compare(blksim.builtin_config(), duration="1s", per_request=False)
    assert list(runs) == ["noop", "deadline"]
    for name, r in runs.items():
        assert results_json(r.figures) == (out / name / "results.json").read_text()
        assert r.name == "flagship" and r.requests is None


# ---------------------------------------------------------------------- configurations

def test_a_dict_text_or_file_is_the_same_configuration():
    text = Path(MIXED).read_text()
    from blksim._compat import tomllib
    data = tomllib.loads(text)
    by_file = blksim.run(MIXED, duration="1s")
    by_config = blksim.run(blksim.Config(data, MIXED), duration="1s")
    by_text = blksim.run(blksim.config_from_text(text, MIXED), duration="1s")
    assert by_file.figures == by_config.figures == by_text.figures
    by_dict = blksim.run(data, duration="1s")          # named after its source, "config"
    assert by_dict.name == "config"
    assert by_dict.figures["totals"] == by_file.figures["totals"]
    assert by_dict.figures["processes"] == by_file.figures["processes"]
    assert data == tomllib.loads(text)                 # the caller's dict is left alone


def test_set_takes_a_dict_of_values_or_the_cli_strings():
    as_dict = blksim.run(MIXED, duration="1s",
                         set={"queue/iosched/fifo_batch": 2, "queue/nr_requests": 32})
    as_text = blksim.run(MIXED, duration="1s",
                         set=["queue/iosched/fifo_batch=2", "queue/nr_requests=32"])
    assert as_dict.figures == as_text.figures
    assert as_dict.config["queue"]["iosched"]["fifo_batch"] == 2
    assert as_dict.config["queue"]["nr_requests"] == 32


def test_numpy_numbers_from_a_sweep_are_plain_values():
    a = blksim.run(MIXED, seed=np.int64(4), duration=np.float32(0.5),
                   set={"queue/iosched/fifo_batch": np.int64(2)}, per_request=False)
    b = blksim.run(MIXED, seed=4, duration=0.5, set={"queue/iosched/fifo_batch": 2},
                   per_request=False)
    assert a.figures == b.figures


def test_an_fio_job_file_runs_and_its_warnings_are_python_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = blksim.run(OLTP, duration="500ms", per_request=False)
    assert any("ignored 'filename=/dev/sdb'" in w for w in r.warnings)
    assert [str(w.message) for w in caught] == r.warnings
    assert r.all.ios > 0


def test_a_run_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blksim.compare(blksim.builtin_config(), duration="300ms")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------- determinism

def test_same_configuration_and_seed_give_identical_figures_and_requests():
    a = blksim.run(MIXED, seed=11, duration="1s", scheduler="deadline")
    b = blksim.run(MIXED, seed=11, duration="1s", scheduler="deadline")
    assert a.figures == b.figures
    assert a.requests.dtype == b.requests.dtype == request_dtype()
    assert a.requests.tobytes() == b.requests.tobytes()
    c = blksim.run(MIXED, seed=12, duration="1s", scheduler="deadline")
    assert c.requests.tobytes() != a.requests.tobytes()


def test_per_request_false_changes_no_figure():
    a = blksim.run(MIXED, duration="1s")
    b = blksim.run(MIXED, duration="1s", per_request=False)
    assert a.figures == b.figures and b.requests is None
    with pytest.raises(ValueError, match="per_request=True"):
        b.requests_frame()


# ---------------------------------------------------------------------- figures and records

def test_attributes_are_views_of_the_figures():
    r = blksim.run(MIXED, duration="1s")
    f = r.figures
    assert (r.name, r.scheduler, r.seed) == ("mixed", "deadline", 7)
    assert (r.simulated_s, r.measured_s) == (f["simulated_s"], f["measured_s"])
    for d in ("read", "write", "all"):
        t = f["totals"][d]
        got = getattr(r, d)
        assert (got.ios, got.bytes, got.iops, got.mb_per_s) == \
            (t["ios"], t["bytes"], t["iops"], t["mb_per_s"])
        assert got.q2c.p99_ms == t["q2c"]["p99_ms"] and got.d2c.mean_ms == t["d2c"]["mean_ms"]
    assert [p.pid for p in r.processes] == [p["pid"] for p in f["processes"]]
    assert r.processes[0].read.q2c.max_ms == f["processes"][0]["read"]["q2c"]["max_ms"]
    assert r.processes[0].read.q2d is None
    assert r.fairness.jain_disk_time == f["fairness"]["jain_disk_time"]
    assert "deadline" in repr(r) and "IOPS" in repr(r)
    again = blksim.RunResult(json.loads(results_json(f)))     # a results.json, read back
    assert again.read == r.read and again.processes == r.processes and again.requests is None


def test_requests_agree_with_the_figures(tmp_path):
    r = blksim.run(blksim.config_from_text(SWITCHED, "switched"))
    q = r.requests
    assert q.dtype == request_dtype()
    assert np.all(q["q_s"] <= q["d_s"]) and np.all(q["d_s"] <= q["c_s"])
    assert np.all(np.diff(q["c_s"]) >= 0)                      # completion order
    assert set(np.unique(q["dir"]).tolist()) == {"R", "W"}
    assert np.allclose(q["q2c_ms"], q["q2d_ms"] + q["d2c_ms"])
    assert np.array_equal(q["measured"], q["q_s"] >= 0.2)     # ramp_time
    assert not q["measured"].all()
    m = q[q["measured"]]
    assert len(m) == r.all.ios == r.figures["block_layer"]["bios_completed"]
    for name, want in (("R", r.read), ("W", r.write)):
        d = m[m["dir"] == name]
        assert len(d) == want.ios and int(d["sectors"].sum()) * 512 == want.bytes
        assert abs(d["q2c_ms"].mean() - want.q2c.mean_ms) < 1e-6
        assert abs(d["q2d_ms"].mean() - want.q2d.mean_ms) < 1e-6
        assert abs(d["q2c_ms"].max() - want.q2c.max_ms) < 1e-6
        assert abs(d["disk_ms"].sum() / 1e3 - want.disk_time_s) < 1e-6
        assert int((d["q2c_ms"] > 40).sum()) == want.timeouts
    for p in r.processes:
        mine = m[m["pid"] == p.pid]
        assert len(mine) == p.all.ios
        assert abs(mine["q2c_ms"].max() - p.worst_wait_ms) < 1e-6
    for ph in r.figures["phases"]:
        inside = (m["q_s"] >= ph["start_s"]) & (m["q_s"] < ph["end_s"])
        assert int(inside.sum()) == ph["bios_completed"]


def test_requests_frame_is_a_dataframe_when_pandas_is_installed():
    pytest.importorskip("pandas")
    r = blksim.run(MIXED, duration="500ms")
    df = r.requests_frame()
    names = list(request_dtype().names)
    assert list(df.columns) == names[:2] + ["process"] + names[2:]
    assert len(df) == len(r.requests) and set(df["process"]) <= {p.name for p in r.processes}
    assert df["q2c_ms"].tolist() == r.requests["q2c_ms"].tolist()


def test_requests_frame_without_pandas_says_how_to_get_it(monkeypatch):
    r = blksim.run(MIXED, duration="200ms")
    monkeypatch.setitem(sys.modules, "pandas", None)      # `import pandas` fails
    with pytest.raises(ImportError, match="pip install pandas"):
        r.requests_frame()


# ---------------------------------------------------------------------- errors

def _cli_error(args, capsys) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("blksim: error: ") and err.count("\n") == 1
    return err[len("blksim: error: "):-1]


@pytest.mark.parametrize("cli, api", [
    (["run", "nonexistent.toml"], lambda: blksim.load_config("nonexistent.toml")),
    (["run", "nonexistent.fio"], lambda: blksim.run("nonexistent.fio")),
    (["run", MIXED, "--set", "queue/scheduler=bogus"],
     lambda: blksim.run(MIXED, scheduler="bogus")),
    (["run", MIXED, "--set", "queue/iosched/fifo_batch=many"],
     lambda: blksim.run(MIXED, set={"queue/iosched/fifo_batch": "many"})),
    (["run", MIXED, "--set", "queue/bogus/x/y=1"],
     lambda: blksim.run(MIXED, set={"queue/bogus/x/y": 1})),
    (["run", MIXED, "--set", "nonsense"], lambda: blksim.run(MIXED, set=["nonsense"])),
    (["run", MIXED, "--duration", "soon"], lambda: blksim.run(MIXED, duration="soon")),
    (["compare", MIXED, "--schedulers", "noop,cfq"],
     lambda: blksim.compare(MIXED, ["noop", "cfq"])),                # fifo_batch: neither's
], ids=["no-file", "no-fio-file", "scheduler", "value", "set-path", "set-form",
        "duration", "compare-tunable"])
def test_bad_input_raises_the_cli_error_with_its_message(cli, api, capsys):
    want = _cli_error([*cli, "-q"], capsys)
    with pytest.raises(blksim.ConfigError) as exc:
        api()
    assert str(exc.value) == want


def test_another_scheduler_leaves_the_configured_tunables_out_with_a_note(capsys):
    # fifo_batch is deadline's: under noop it is left out, on the command line and in
    # the API alike
    assert main(["run", MIXED, "--set", "queue/scheduler=noop", "-q", "--duration",
                 "200ms"]) == 0
    note = "noop has no tunable queue/iosched/fifo_batch; left out for this run"
    assert note in capsys.readouterr().err
    with pytest.warns(UserWarning, match="noop has no tunable queue/iosched/fifo_batch"):
        r = blksim.run(MIXED, scheduler="noop", duration="200ms", per_request=False)
    assert r.scheduler == "noop"


def test_bad_arguments_of_the_api_itself():
    with pytest.raises(blksim.ConfigError, match=r"^config: not valid TOML"):
        blksim.config_from_text("[run\n")
    with pytest.raises(blksim.ConfigError, match=r"^schedulers: unknown scheduler 'bogus'; valid: "):
        blksim.compare(MIXED, ["noop", "bogus"])
    with pytest.raises(blksim.ConfigError, match="twice"):
        blksim.compare(MIXED, ["noop", "noop"])
    with pytest.raises(blksim.ConfigError, match="at least one"):
        blksim.compare(MIXED, [])
    with pytest.raises(blksim.ConfigError, match="one value per path"):
        blksim.run(MIXED, set={"queue/iosched": {"fifo_batch": 4}})
    with pytest.raises(blksim.ConfigError, match=r"^config: nothing to run"):
        blksim.run({})
    with pytest.raises(TypeError, match="expected a blksim.Config, a dict"):
        blksim.run(42)


# Two disks, for the arguments that name disks.
TWO_DISKS = {"run": {"duration": "100ms"}, "device": {"drive": "cheetah15k4"},
             "devices": {"sdb": {"drive": "cheetah15k4"}},
             "job": [{"name": "r", "rw": "randread"},
                     {"name": "s", "rw": "randread", "filename": "/dev/sdb"}]}


@pytest.mark.parametrize("call, error, message", [
    # issue 29, finding 8: taken silently before ('' kept the configured scheduler,
    # "no" was true)
    (lambda: blksim.run(MIXED, scheduler=""), blksim.ConfigError,
     r"^scheduler: expected a scheduler name such as 'deadline' \(or None for the "
     r"configuration's\), found ''$"),
    (lambda: blksim.run(MIXED, scheduler=" "), blksim.ConfigError, r"^scheduler: .* found ' '$"),
    (lambda: blksim.run(MIXED, per_request="no"), TypeError,
     r"^per_request: expected True or False, found str 'no'$"),
    (lambda: blksim.compare(MIXED, per_request=1), TypeError, r"^per_request: expected True"),
    # tracebacks before (StopIteration, AttributeError, "not iterable")
    (lambda: blksim.compare(TWO_DISKS, ["noop"], devices=[]), blksim.ConfigError,
     r"^devices: give at least one disk name \(e.g. sdb\), found \[\]$"),
    (lambda: blksim.compare(TWO_DISKS, ["noop"], devices=","), blksim.ConfigError,
     r"^devices: give at least one disk name"),
    (lambda: blksim.compare(TWO_DISKS, ["noop"], devices=5), TypeError,
     r"^devices: expected a list of disk names"),
    (lambda: blksim.compare(TWO_DISKS, ["noop"], devices=[None]), TypeError,
     r"^devices: expected disk names \(str\)"),
    (lambda: blksim.compare(TWO_DISKS, ["noop"], devices=["sdb", "/dev/sdb"]),
     blksim.ConfigError, r"^devices: \['sdb', '/dev/sdb'\] names a disk twice$"),
    (lambda: blksim.config_from_text(None), TypeError,
     r"^text: expected a str of TOML, found NoneType None$"),
    (lambda: blksim.config_from_text(b"[run]"), TypeError, r"^text: expected a str of TOML"),
    (lambda: blksim.config_from_text("[run]", source=None), TypeError, r"^source: expected a str"),
    (lambda: blksim.load_config(None), TypeError, r"^path: expected a file path"),
    (lambda: blksim.run(blksim.Config(5)), TypeError, r"^Config.data: expected a dict"),
    (lambda: blksim.run(MIXED, set=5), TypeError, r"^set: expected a dict"),
    (lambda: blksim.run(MIXED, set=[1]), TypeError, r"^set: expected 'PATH=VALUE' strings"),
    (lambda: blksim.run(MIXED, set={1: 2}), TypeError, r"^set: expected sysfs paths"),
    (lambda: blksim.run(MIXED, set={"queue/nr_requests": None}), blksim.ConfigError,
     r"^set: queue/nr_requests: None is not a value a configuration can hold"),
    (lambda: blksim.run(MIXED, seed=object()), blksim.ConfigError, r"^seed: <object"),
    (lambda: blksim.run(MIXED, scheduler=5), TypeError, r"^scheduler: expected a scheduler name"),
    (lambda: blksim.compare(MIXED, 5), TypeError, r"^schedulers: expected a list"),
    (lambda: blksim.compare(MIXED, {"noop": 1}), TypeError, r"^schedulers: expected a list"),
    (lambda: blksim.compare(MIXED, ["noop", None]), TypeError,
     r"^schedulers: expected scheduler names \(str\), found NoneType None$"),
    (lambda: blksim.compare(MIXED, ["noop", ""]), blksim.ConfigError,
     r"^schedulers: \['noop', ''\]: an empty scheduler name$"),
])
def test_api_arguments_are_checked_at_the_boundary(call, error, message):
    """Every argument of the wrong type is one TypeError naming it, every bad value one
    ConfigError, before anything runs (docs/api.md, Errors)."""
    with pytest.raises(error, match=message) as exc:
        call()
    assert type(exc.value) is error and "\n" not in str(exc.value)


def test_run_result_and_simulate_check_what_they_are_given():
    with pytest.raises(TypeError, match=r"^figures: expected the results.json dict, found int 5$"):
        blksim.RunResult(5)
    with pytest.raises(ValueError, match=r"^figures: not a results.json dict: no scheduler, "):
        blksim.RunResult({"name": "x"})
    from blksim.api import simulate
    with pytest.raises(TypeError, match=r"^cfg: expected a resolved configuration"):
        simulate({"run": {}})


def test_devices_as_one_string_is_the_cli_list_not_its_characters():
    # devices="sdb" was iterated by character ("no disk 's'") before
    a = blksim.compare(TWO_DISKS, ["noop"], devices="sdb", per_request=False)
    b = blksim.compare(TWO_DISKS, ["noop"], devices=["/dev/sdb"], per_request=False)
    assert a["noop"].figures == b["noop"].figures
    assert a["noop"].config["queue"]["scheduler"] == "deadline"           # sda kept its own
    assert a["noop"].config["devices"]["sdb"]["queue"]["scheduler"] == "noop"


# ---------------------------------------------------------------------- import weight

def test_import_blksim_is_light_until_the_api_is_used():
    code = (
        "import sys, blksim, blksim.traces\n"
        "heavy = lambda: sorted(m for m in sys.modules if m.split('.')[0] in "
        "('simpy', 'numpy', 'matplotlib', 'pandas') or m.startswith('blksim.sim'))\n"
        "assert heavy() == [], heavy()\n"
        "assert set(blksim.__all__) <= set(dir(blksim))\n"
        "assert blksim.run.__module__ == 'blksim.api'\n"
        "assert 'simpy' not in sys.modules\n"
        "r = blksim.run(blksim.builtin_config(), duration='100ms')\n"
        "assert 'simpy' in sys.modules and 'matplotlib' not in sys.modules\n"
        "try:\n"
        "    blksim.nonexistent\n"
        "except AttributeError as exc:\n"
        "    assert 'nonexistent' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ramp_time_counts_requests_and_merges_from_the_ramp_as_it_counts_bios(tmp_path):
    # random reads never merge: each bio queued after the ramp allocated one request then
    cfg = ('[run]\nduration = "2s"\nramp_time = "1s"\n[device]\ndrive = "cheetah10k7"\n'
           '[[job]]\nname = "r"\nrw = "randread"\niodepth = 4\n')
    path = tmp_path / "ramp.toml"
    path.write_text(cfg)
    r = blksim.run(blksim.load_config(path))
    bl = r.figures["block_layer"]
    unfinished = sum(p["unfinished"] for p in r.figures["processes"])
    assert bl["bio_merges"] == bl["request_merges"] == 0
    assert bl["requests_allocated"] == bl["bios_completed"] + unfinished
    assert bl["bios_completed"] == r.all.ios == int(r.requests["measured"].sum())
    whole = blksim.run(blksim.load_config(path), set={"run/ramp_time": 0})
    assert whole.figures["block_layer"]["requests_allocated"] > bl["requests_allocated"] * 1.5
    # requests.csv holds the measured bios only
    out = tmp_path / "out"
    assert main(["run", str(path), "-q", "--per-request", "--out", str(out)]) == 0
    rows = (out / "requests.csv").read_text().splitlines()[1:]
    assert len(rows) == r.all.ios and all(float(row.split(",")[9]) >= 1.0 for row in rows)
