"""io.pressure (PSI): the kernel's fixed-point averages by hand, the task states of jobs,
a queueing comparison, and runs without groups untouched."""

from __future__ import annotations

import json

import pytest

from blksim.block.cgroup import CgroupTree
from blksim.block.psi import IDLE, IOWAIT, RUNNING, Pressure, PsiGroup, avg_text, calc_load
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation

PERIOD = 2_004_000_000        # PSI_FREQ at HZ 250: 501 jiffies of 4 ms, in ns


def test_calc_load_rounds_up_while_growing_and_down_while_decaying():
    # (0 * 1677 + 102400 * 371 + 2047) // 2048 = 37992447 // 2048
    assert calc_load(0, 1677, 102400) == 18550
    # decaying: (18550 * 1677 + 0) // 2048 = 31108350 // 2048
    assert calc_load(18550, 1677, 0) == 15189
    assert avg_text(46178) == "22.54"        # 46178 >> 11 = 22; (1122 * 100) >> 11 = 54
    assert avg_text(50 << 11) == "50.00"


def test_a_square_wave_of_stall_gives_the_kernels_fixed_point_averages():
    """One task in iowait for the first half of every 2.004 s period: each period's sample
    is 50 %, pct = 50 * 2048 = 102400, and avg10 runs 18550, 33740, 46178 (by hand:
    (18550 * 1677 + 37990400 + 2047) // 2048 = 33740, (33740 * 1677 + 37992447) // 2048 =
    46178); avg60 and avg300 the same with 1981 and 2034."""
    g = PsiGroup(250)
    assert g.period == PERIOD
    for k in range(3):
        g.change(0, 1, 0, k * PERIOD)
        g.change(0, -1, 0, k * PERIOD + PERIOD // 2)
    fig = g.figures(3 * PERIOD)
    assert g.avg[0] == [46178, 9726, 2087]
    # avg60: 102400 * 67 + 2047 = 6862847 // 2048 = 3350; (3350 * 1981 + 6862847) // 2048
    # = 6591; (6591 * 1981 + 6862847) // 2048 = 9726
    assert fig["some"] == {"avg10": 22.54, "avg60": 4.74, "avg300": 1.01,
                           "total_us": 3 * PERIOD // 2 // 1000}
    assert fig["full"] == fig["some"]             # nothing ran: every stall is full
    # then idle: the averages decay, the total stays
    fig = g.figures(8 * PERIOD)
    assert fig["some"]["total_us"] == 3_006_000
    assert fig["some"]["avg10"] < 22.54 * (1677 / 2048) ** 4


def test_a_running_task_turns_full_into_some_only():
    g = PsiGroup(250)
    g.change(0, 1, 0, 0)                   # one task waits on I/O all along
    g.change(0, 0, 1, PERIOD // 4)         # another runs from a quarter of the period on
    fig = g.figures(PERIOD)
    assert fig["some"]["total_us"] == PERIOD // 1000
    assert fig["full"]["total_us"] == PERIOD // 4 // 1000
    # 100 %: (204800 * 371 + 2047) // 2048 = 37100 -> 18.11
    assert fig["some"]["avg10"] == 18.11
    # 25 %: (51200 * 371 + 2047) // 2048 = 9275 -> 4 and (1083 * 100) >> 11 = 52
    assert fig["full"]["avg10"] == 4.52


def test_two_cpus_weigh_each_cpus_stall_by_its_nonidle_time():
    """collect_percpu_times: CPU 0 has a task in iowait for the whole period, CPU 1 a
    running task for half of it: some = (T * T + 0 * T/2) / (T + T/2) = 2/3 T."""
    g = PsiGroup(250)
    g.change(0, 1, 0, 0)
    g.change(1, 0, 1, 0)
    g.change(1, 0, -1, PERIOD // 2)
    fig = g.figures(PERIOD)
    # nonidle in jiffies: 501 and 250; total = T * 501 // 751
    assert fig["some"]["total_us"] == PERIOD * 501 // 751 // 1000


def test_a_parents_pressure_counts_its_childrens_tasks_and_the_root_is_the_systems():
    tree = CgroupTree()
    a = tree.add("a")
    b = tree.add("a/b")
    tree.place(1, b)
    tree.place(2, tree.add("c"))
    p = Pressure(tree, 250)
    p.set(1, 0, IOWAIT, 0.0)
    p.set(2, 0, RUNNING, 0.5)
    p.set(1, 0, IDLE, 1.0)
    for g in (b, a, tree.root):
        assert p.figures(g, 2.0)["some"]["total_us"] == 1_000_000
    assert p.figures(b, 2.0)["full"]["total_us"] == 1_000_000
    # the root also has the running task of c: full only while it had not started
    assert p.figures(tree.root, 2.0)["full"]["total_us"] == 500_000
    assert p.figures(tree.groups["c"], 2.0)["some"]["total_us"] == 0


# --------------------------------------------------------------------- runs

def _raw(jobs, groups=None, duration="20s", service="5ms"):
    return {"run": {"seed": 1, "kernel": "6.6", "duration": duration},
            "device": {"service": "fixed", "service_time": service},
            "queue": {"scheduler": "none", "nomerges": 2},
            "cgroups": groups if groups is not None else {"g": {}},
            "job": jobs}


def _results(raw):
    from blksim.sim.results import results_dict
    sim = Simulation(resolve(raw, "t.toml"))
    return results_dict(sim.run(), {})


def test_pressure_is_zero_on_an_idle_device():
    res = _results(_raw([{"name": "t", "rw": "randread", "ioengine": "psync",
                          "startdelay": "30s", "cgroup": "g"}], duration="10s"))
    for path in ("/", "g"):
        for kind in ("some", "full"):
            assert res["cgroups"][path]["io_pressure"][kind] == {
                "avg10": 0.0, "avg60": 0.0, "avg300": 0.0, "total_us": 0}
    assert res["io_pressure"] == res["cgroups"]["/"]["io_pressure"]


@pytest.mark.parametrize("numjobs", [1, 2, 4])
def test_some_is_the_share_of_time_any_process_waits_closed_loop(numjobs):
    """N psync processes on one CPU, each: a 5 ms read on a FCFS one-server device, then
    10 ms of thought. At least one waits exactly while the device is busy, so the share
    of time with some stall is the device's utilization X * S (the utilization law), and
    it grows with the queueing: 1/3 for one process (S / (S + Z)), 2/3 for two, 1 when
    the device saturates."""
    jobs = [{"name": "u", "rw": "randread", "ioengine": "psync", "numjobs": numjobs,
             "thinktime": "10ms", "cpus_allowed": "0", "cgroup": "g"}]
    res = _results(_raw(jobs))
    some = res["cgroups"]["g"]["io_pressure"]["some"]["total_us"] / 1e6 / res["simulated_s"]
    utilization = res["totals"]["all"]["iops"] * 0.005
    assert some == pytest.approx(utilization, abs=0.002)
    assert some == pytest.approx(min(numjobs / 3, 1.0), abs=0.002)
    full = res["cgroups"]["g"]["io_pressure"]["full"]
    assert full == res["cgroups"]["g"]["io_pressure"]["some"]   # no CPU costs: none runs


def test_a_libaio_job_waiting_in_io_getevents_is_not_stalled_but_psync_is():
    jobs = [{"name": "aio", "rw": "randread", "ioengine": "libaio", "iodepth": 2,
             "cgroup": "g"},
            {"name": "sync", "rw": "randread", "ioengine": "psync", "cgroup": "h"}]
    raw = _raw(jobs, {"g": {}, "h": {}}, duration="4s")
    raw["device"]["queue_depth"] = 32       # tags for all: the libaio job never sleeps
    res = _results(raw)
    assert res["cgroups"]["g"]["io_pressure"]["some"]["total_us"] == 0
    assert res["cgroups"]["h"]["io_pressure"]["some"]["total_us"] > 3_900_000


def test_a_run_without_groups_is_byte_for_byte_what_it_was(tmp_path):
    """No [cgroups]: results.json has no cgroups or io_pressure, and nothing else moves
    (the same run with one group holding nothing)."""
    from blksim.cli import main
    base = """
[run]
kernel = "6.6"
duration = "2s"
[device]
drive = "cheetah15k4"
[queue]
scheduler = "mq-deadline"
[[job]]
name = "r"
rw = "randread"
iodepth = 4
ioengine = "psync"
[[job]]
name = "w"
rw = "write"
"""
    (tmp_path / "a.toml").write_text(base)
    (tmp_path / "b.toml").write_text(base + "[cgroups.empty]\n")
    for name in ("a", "b"):
        assert main(["run", str(tmp_path / f"{name}.toml"), "-q", "--out",
                     str(tmp_path / name)]) == 0
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    b = json.loads((tmp_path / "b" / "results.json").read_text())
    assert "cgroups" not in a and "io_pressure" not in a
    assert set(b) - set(a) == {"cgroups", "io_pressure"}
    for key in a:
        if key not in ("config", "name"):
            assert a[key] == b[key], key


def test_iostat_writes_cgroups_csv_with_each_groups_figures_per_interval(tmp_path):
    """--iostat in a run with groups: cgroups.csv, a row per interval and group, io.stat
    cumulative per device and io.pressure as read then; its last rows are results.json's."""
    from blksim.cli import main
    (tmp_path / "c.toml").write_text("""
[run]
kernel = "6.6"
duration = "5s"
[device]
service = "fixed"
service_time = "5ms"
[queue]
scheduler = "none"
[cgroups.g]
[[job]]
name = "u"
rw = "randread"
ioengine = "psync"
thinktime = "10ms"
cgroup = "g"
""")
    out = tmp_path / "o"
    assert main(["run", str(tmp_path / "c.toml"), "-q", "--out", str(out), "--iostat",
                 "2s"]) == 0
    rows = (out / "cgroups.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert header[:4] == ["time_s", "interval_s", "cgroup", "sda:rbytes"]
    table = [dict(zip(header, r.split(","))) for r in rows[1:]]
    assert [(float(r["time_s"]), r["cgroup"]) for r in table] == [
        (2.0, "/"), (2.0, "g"), (4.0, "/"), (4.0, "g"), (5.0, "/"), (5.0, "g")]
    res = json.loads((out / "results.json").read_text())
    last = table[-1]
    assert int(last["sda:rios"]) == res["cgroups"]["g"]["io_stat"]["sda"]["rios"]
    assert int(last["some_total_us"]) == res["cgroups"]["g"]["io_pressure"]["some"]["total_us"]
    # one process, 5 ms of I/O then 10 ms of thought: a third of the time stalled
    assert int(table[1]["some_total_us"]) == pytest.approx(2e6 / 3, rel=0.01)


def test_a_closed_replays_process_stalls_while_it_waits_for_its_request(tmp_path):
    """mode = "closed", a trace without completion times: each request waits for its
    predecessor's completion, then the recorded 10 ms gap. With 5 ms of service the process
    waits a third of the time; the open-loop replay of the same trace is not watched."""
    trace = tmp_path / "t.trace"
    trace.write_text("".join(f"{i * 10.0:.6f} 0 {i * 64} 8 1\n" for i in range(200)))
    raw = _raw([], {"replay": {}, "open": {}}, duration="2.5s")
    del raw["job"]
    raw["trace"] = [{"path": str(trace), "mode": "closed", "cgroup": "replay"},
                    {"path": str(trace), "cgroup": "open", "filename": "/dev/sdb"}]
    raw["devices"] = {"sdb": {"service": "fixed", "service_time": "5ms"}}
    res = _results(raw)
    some = res["cgroups"]["replay"]["io_pressure"]["some"]["total_us"]
    assert some == pytest.approx(2.5e6 / 3, rel=0.01)
    assert res["cgroups"]["open"]["io_pressure"]["some"]["total_us"] == 0
    assert res["io_pressure"]["some"]["total_us"] == some
