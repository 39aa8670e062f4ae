"""Issue 29, "no figure from an empty window": a mean, percentile, rate, share or ratio
computed from a count of 0 is null in results.json (the count says 0) and "-" in the
tables, and a run in which nothing completed says so in one line and exits 0."""

from __future__ import annotations

import json

import pytest

from blksim.cli import main
from blksim.cli.tables import NOTHING_COMPLETED, compare_table, run_table
from blksim.sim.config import ConfigError, resolve
from blksim.sim.results import results_dict
from tests.simhelpers import make_config, run_config

LATENCY = ("mean_ms", "min_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms")

#: Two random readers on a mechanical drive for 0.1 ms: the first seek alone takes longer.
TOO_SHORT = """
[run]
seed = 1
duration = "0.1ms"
[device]
drive = "cheetah15k4"
[[job]]
name = "r"
rw = "randread"
bs = "4k"
numjobs = 2
"""


def _results(tmp_path, text: str):
    """The configuration ``text`` written to a file, and an output folder for its run."""
    path = tmp_path / "run.toml"
    path.write_text(text)
    out = tmp_path / "out"
    return path, out


def _run(tmp_path, capsys, text: str, *args) -> tuple[dict, str]:
    """Run ``text`` from the command line: its results.json and what it printed."""
    path, out = _results(tmp_path, text)
    assert main(["run", str(path), "--quiet", "--out", str(out), *args]) == 0
    return json.loads((out / "results.json").read_text()), capsys.readouterr().out


def _assert_empty_direction(d: dict, split: bool = True) -> None:
    assert d["ios"] == 0 and d["bytes"] == 0
    assert d["iops"] is None and d["mb_per_s"] is None
    for part in ("q2c", "q2d", "d2c") if split else ("q2c",):
        assert d[part]["count"] == 0
        assert all(d[part][k] is None for k in LATENCY), d[part]


def test_a_run_where_nothing_completes_has_no_figures_and_says_so(tmp_path, capsys):
    r, out = _run(tmp_path, capsys, TOO_SHORT)
    for dname in ("read", "write", "all"):
        _assert_empty_direction(r["totals"][dname])
    f = r["fairness"]
    assert f["jain_throughput"] is None and f["jain_disk_time"] is None   # was 1.0
    assert f["worst_wait_ms"] is None and f["worst_wait_pid"] is None     # was 0.0
    assert f["unfinished"] == 2
    for p in r["processes"]:
        _assert_empty_direction(p["all"], split=False)
        assert p["disk_share"] is None and p["worst_wait_ms"] is None
    ph = r["phases"][0]
    _assert_empty_direction(ph["totals"]["all"])
    io = r["iostat"]["sda"]
    assert all(io[k] is None for k in ("avgrq-sz", "await", "r_await", "w_await", "svctm"))
    assert io["r/s"] == 0.0                    # a rate over a non-empty interval stays
    lines = out.splitlines()
    said = [line for line in lines if line.startswith(NOTHING_COMPLETED)]
    assert len(said) == 1 and "2 I/Os were still outstanding" in said[0]
    # no latency row of zeros, no per-process latency header with nothing under it
    assert not any(line.split()[:1] == ["all"] for line in lines)
    assert not any("Q2C (ms): mean" in line for line in lines)
    assert "worst wait -" in out and "Jain's index - (throughput)" in out


def test_compare_of_runs_where_nothing_completes_says_which(tmp_path, capsys):
    path, _ = _results(tmp_path, TOO_SHORT)
    assert main(["compare", str(path), "--quiet", "--schedulers", "noop,cfq"]) == 0
    out = capsys.readouterr().out
    assert f"noop, cfq: {NOTHING_COMPLETED}" in out
    row = next(line for line in out.splitlines() if line.startswith("all Q2C mean"))
    assert row.split()[-2:] == ["-", "-"]


def test_a_process_that_completes_nothing_has_no_latency_or_worst_wait():
    # 'idle' starts after the run is over: registered, issues nothing
    cfg = make_config(jobs=[{"name": "busy", "rw": "randread"},
                            {"name": "idle", "rw": "randread", "startdelay": "5s"}],
                      run={"duration": "0.5s"})
    r = results_dict(run_config(cfg), {})
    busy, idle = r["processes"]
    assert busy["all"]["ios"] > 0 and busy["worst_wait_ms"] > 0
    assert idle["all"]["ios"] == 0
    assert idle["all"]["iops"] == 0.0          # 0 I/Os over a measured window: a true 0
    assert all(idle["all"]["q2c"][k] is None for k in LATENCY)
    assert idle["worst_wait_ms"] is None and idle["disk_share"] == 0.0
    table = run_table(r)
    assert "idle" not in table.split("ioprio")[0]  # no latency line for it


TWO_DISKS_ONE_IDLE = """
[run]
seed = 3
duration = "0.3s"
[device]
drive = "cheetah15k4"
[devices.sdb]
drive = "cheetah15k4"
[[job]]
name = "a"
rw = "randread"
"""


def test_a_disk_no_bio_reaches_has_no_means(tmp_path, capsys):
    r, out = _run(tmp_path, capsys, TWO_DISKS_ONE_IDLE)
    sdb = r["devices"]["sdb"]
    assert sdb["latency"]["bios"] == 0
    assert sdb["latency"]["q2c_mean_ms"] is None and sdb["latency"]["d2c_mean_ms"] is None
    assert sdb["latency"]["q2c_max_ms"] is None
    assert r["iostat"]["sdb"]["await"] is None and r["iostat"]["sdb"]["svctm"] is None
    assert r["iostat"]["sda"]["await"] > 0
    row = [line for line in out.splitlines() if line.startswith("sdb ")][-1]   # iostat's
    assert row.split()[7] == "-" and row.split()[9] == "-"     # avgrq-sz, await


def test_a_phase_where_nothing_completes_has_no_figures():
    # the reader stops at 0.35 s (fio's runtime) and the switch comes at 0.4 s
    cfg = resolve({"run": {"seed": 1, "duration": "0.5s"},
                   "device": {"drive": "cheetah15k4"}, "queue": {"scheduler": "noop"},
                   "job": [{"name": "r", "rw": "randread", "runtime": "0.35s"}],
                   "switch": [{"at": "0.4s", "scheduler": "deadline"}]},
                  "t.toml", device_sectors=71687372)
    r = results_dict(run_config(cfg), {})
    first, second = r["phases"]
    assert first["totals"]["all"]["ios"] > 0
    _assert_empty_direction(second["totals"]["all"])
    assert second["fairness"]["jain_throughput"] is None
    row = run_table(r).split("phases (")[1].splitlines()[3]
    assert row.split()[:2] == ["1", "deadline"] and row.split()[5:10] == ["-"] * 5


@pytest.mark.parametrize("ramp", ["1s", "2s"])
def test_a_ramp_time_at_or_past_the_end_is_refused_naming_the_key(ramp):
    with pytest.raises(ConfigError, match=r"\[run\] ramp_time"):
        make_config(jobs=[{"name": "r", "rw": "randread"}],
                    run={"duration": "1s", "ramp_time": ramp})


def test_compare_table_reads_null_shares():
    r = {"name": "x", "device": {"name": "d"}, "seed": 1, "simulated_s": 1.0,
         "scheduler": "noop", "fairness": {}, "totals": {
             d: {"ios": 0, "iops": None, "mb_per_s": None,
                 **{p: dict.fromkeys(LATENCY) for p in ("q2c", "q2d", "d2c")}}
             for d in ("read", "write", "all")},
         "processes": [{"pid": 1, "name": "p", "disk_time_s": 0.0, "disk_share": None,
                        "read": {"ios": 0}, "write": {"ios": 0}}]}
    assert NOTHING_COMPLETED in compare_table([r])


def test_the_api_reads_an_empty_run_without_a_traceback(tmp_path):
    from blksim.api import run
    path, _ = _results(tmp_path, TOO_SHORT)
    r = run(str(path))
    assert r.all.ios == 0 and r.all.iops is None and r.all.q2c.p99_ms is None
    assert "no I/O completed in the measured window" in repr(r)


def test_a_run_that_ends_before_its_ramp_time_says_so(tmp_path, capsys):
    # no duration: the job's ten reads finish long before measurement would start
    r, out = _run(tmp_path, capsys, """
[run]
seed = 1
ramp_time = "5s"
[device]
drive = "cheetah15k4"
[[job]]
name = "r"
rw = "randread"
number_ios = 10
""")
    _assert_empty_direction(r["totals"]["all"])
    assert (f"{NOTHING_COMPLETED} (from ramp_time 5.0s; the run ended at 5 s)"
            in out)


@pytest.mark.parametrize("kind", ["cdf", "latency", "timeline"])
def test_a_plot_of_a_run_where_nothing_completed_is_refused(tmp_path, capsys, kind):
    # before: cdf drew an empty figure (a matplotlib warning), latency and timeline said
    # the folder had no requests.csv when it had one with no rows
    path, out = _results(tmp_path, TOO_SHORT)
    assert main(["run", str(path), "--quiet", "--per-request", "--out", str(out)]) == 0
    assert (out / "requests.csv").exists()
    capsys.readouterr()
    assert main(["plot", kind, str(out), "--out", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert err == f"blksim: error: {out}: no I/O completed in the measured window: " \
        "nothing to draw\n"
    assert not (tmp_path / "p.png").exists()


# ------------------------------------------------------------------ property

from hypothesis import given, settings, strategies as st  # noqa: E402

from blksim.common.histogram import StreamingHistogram  # noqa: E402
from blksim.sim.metrics import Metrics  # noqa: E402
from blksim.block.request import Bio  # noqa: E402
from blksim.sim.results import _stretch  # noqa: E402

_bio = st.tuples(st.integers(1, 3), st.booleans(), st.floats(0.0, 2.0),
                 st.floats(0.0, 0.05), st.floats(0.0, 0.05))


def _directions(stretch: dict):
    yield stretch["measured_s"], stretch["totals"]["read"], ("q2c", "q2d", "d2c")
    yield stretch["measured_s"], stretch["totals"]["write"], ("q2c", "q2d", "d2c")
    yield stretch["measured_s"], stretch["totals"]["all"], ("q2c", "q2d", "d2c")
    for p in stretch["processes"]:
        for d in ("read", "write", "all"):
            yield stretch["measured_s"], p[d], ("q2c",)


@settings(max_examples=60, deadline=None)
@given(bios=st.lists(_bio, max_size=12), ramp=st.sampled_from([0.0, 0.5, 1.5]),
       switch=st.sampled_from([(), (1.0,)]))
def test_a_figure_is_null_exactly_when_its_count_is_zero(bios, ramp, switch):
    """Whatever completes where: a latency figure is null iff its count is 0, a rate is
    null iff the stretch measured no time, a share / worst wait / Jain's index is null iff
    nothing it is taken over completed; never a 0 standing in for nothing."""
    m = Metrics(start=ramp, client_timeout=0.01, phase_starts=switch)
    for pid in (1, 2, 3):
        m.register_process(pid, f"p{pid}")
    for i, (pid, write, tq, q2d, d2c) in enumerate(bios):
        b = Bio(i, 8 * i, 8, write, not write, pid)
        b.t_queue, b.t_dispatch, b.t_complete = tq, tq + q2d, tq + q2d + d2c
        b.disk_s = d2c
        m.bio_completed(None, b, b.t_complete)
    m.finish({1: 5, 2: 5, 3: 5})
    for st_ in m.phases + [m.totals]:
        out = _stretch(st_, 0.01)
        for measured, d, parts in _directions(out):
            for part in parts:
                empty = d[part]["count"] == 0
                assert empty == (d["ios"] == 0)
                assert all((d[part][k] is None) == empty for k in LATENCY)
            assert (d["iops"] is None) == (measured == 0) == (d["mb_per_s"] is None)
        done = sum(p["all"]["ios"] for p in out["processes"])
        f = out["fairness"]
        assert (f["worst_wait_ms"] is None) == (done == 0)
        assert (f["timeouts_pct"] is None) == (done == 0)
        if done == 0:
            assert f["jain_throughput"] is None
        for p in out["processes"]:
            assert (p["worst_wait_ms"] is None) == (p["all"]["ios"] == 0)
            assert (p["disk_share"] is None) == (f["disk_time_s"] == 0)


@given(st.lists(st.floats(0.0, 10.0), max_size=5))
def test_an_empty_histogram_has_a_count_and_nothing_else(values):
    h = StreamingHistogram()
    for v in values:
        h.add(v)
    s = h.summary()
    assert s["count"] == len(values)
    assert all((s[k] is None) == (not values) for k in ("mean", "min", "p50", "p99", "max"))
