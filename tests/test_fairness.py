"""Fairness figures: Jain's index, disk time per process, worst wait, client timeouts,
process priorities in the results (hand-traced cases on fixed-service devices)."""

import math
from blksim._compat import tomllib

import pytest
import simpy

from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import get_scheduler
from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.sim.clock import SimpyClock
from blksim.api import builtin_config_text
from blksim.sim.config import ConfigError, resolve
from blksim.sim.metrics import jain_index
from blksim.cli.tables import compare_table, run_table
from blksim.sim.results import results_dict
from blksim.block.request import Bio
from tests.simhelpers import make_config, run_config


# ---------------------------------------------------------------------- Jain's index

@pytest.mark.parametrize("values, expected", [
    ([5.0], 1.0),
    ([1, 1, 1, 1], 1.0),
    ([1, 0, 0, 0], 0.25),                      # one process has everything: 1/n
    ([1, 2, 3], 36 / (3 * 14)),                # (1+2+3)^2 / (3 * (1+4+9)) = 0.857142...
    ([3, 1], 16 / (2 * 10)),                   # 0.8
])
def test_jain_index_by_hand(values, expected):
    assert math.isclose(jain_index(values), expected, rel_tol=1e-12)


def test_jain_index_of_nothing_is_none():
    assert jain_index([]) is None
    # nobody got anything: nothing was shared out, no index (it was 1.0, "fair")
    assert jain_index([0, 0, 0]) is None


# ---------------------------------------------------------------------- disk time

def _queue(queue_depth, service=0.010, scheduler="noop"):
    env = simpy.Environment()
    clock = SimpyClock(env)
    device = ServiceLawDevice("fixed", service, capacity=1 << 30, queue_depth=queue_depth)
    done = []
    cls = get_scheduler(scheduler)
    q = RequestQueue(lambda dq: cls.create(dq, {}, hz=250), device, clock, QueueSettings())
    q.subscribe("block_bio_complete", lambda _q, bio, _now: done.append(bio))
    return env, q, done


_ids = iter(range(10**9))


def _bio(sector, pid, n=8, write=False):
    return Bio(next(_ids), sector, n, write, not write, pid, on_complete=lambda b: None)


def _at(env, t, fn):
    def proc():
        yield env.timeout(t - env.now)
        fn()
    env.process(proc())


def test_disk_time_is_d2c_at_queue_depth_one():
    env, q, done = _queue(1)
    a, b = _bio(1000, 1), _bio(9000, 2)
    _at(env, 0.0, lambda: q.submit_bio(a))
    _at(env, 0.001, lambda: q.submit_bio(b))      # waits for a: D2C is its own 10 ms
    env.run()
    assert math.isclose(a.disk_s, 0.010) and math.isclose(b.disk_s, 0.010)
    for x in (a, b):
        assert math.isclose(x.disk_s, x.t_complete - x.t_dispatch)


def test_disk_time_shares_overlapping_service_equally():
    """Queue depth 2, fixed 10 ms FCFS service, sync reads dispatched at once:
    a (pid 1) at 0 ms, completes at 10; b (pid 2) at 2 ms, completes at 20;
    c (pid 1) at 25 ms, completes at 35.
    [0, 2): a alone -> a 2 ms; [2, 10): a and b -> 4 ms each; [10, 20): b alone
    -> b 10 ms; [25, 35): c alone -> 10 ms. pid 1: 16 ms, pid 2: 14 ms; the sum
    (30 ms) is the device's busy time, though the D2C sum is 38 ms."""
    env, q, done = _queue(2)
    a, b, c = _bio(1000, 1), _bio(5000, 2), _bio(9000, 1)
    _at(env, 0.0, lambda: q.submit_bio(a))
    _at(env, 0.002, lambda: q.submit_bio(b))
    _at(env, 0.025, lambda: q.submit_bio(c))
    env.run()
    assert [x.t_dispatch for x in (a, b, c)] == [0.0, 0.002, 0.025]
    assert math.isclose(b.t_complete, 0.020)
    assert math.isclose(a.disk_s, 0.006)
    assert math.isclose(b.disk_s, 0.014)
    assert math.isclose(c.disk_s, 0.010)
    d2c = sum(x.t_complete - x.t_dispatch for x in (a, b, c))
    assert math.isclose(d2c, 0.038)
    assert math.isclose(a.disk_s + b.disk_s + c.disk_s, 0.030)


def test_disk_time_of_a_merged_request_is_split_by_sectors():
    """Two async writes from different processes merge into one 32-sector request
    (8 sectors of pid 1, 24 of pid 2), issued at the unplug (4 ms) and served in
    10 ms: pid 1 gets 2.5 ms, pid 2 7.5 ms."""
    env, q, done = _queue(1)
    a = _bio(0, 1, n=8, write=True)
    b = _bio(8, 2, n=24, write=True)
    _at(env, 0.0, lambda: q.submit_bio(a))
    _at(env, 0.0, lambda: q.submit_bio(b))
    env.run()
    assert q.bio_merges == 1 and q.requests_allocated == 1
    assert math.isclose(a.t_dispatch, 0.004) and math.isclose(a.t_complete, 0.014)
    assert math.isclose(a.disk_s, 0.0025) and math.isclose(b.disk_s, 0.0075)


def _service_config(jobs, scheduler="noop", run=None, queue_depth=1, service="10ms"):
    raw = {"run": {"seed": 1, **(run or {})},
           "device": {"service": "fixed", "service_time": service, "queue_depth": queue_depth},
           "queue": {"scheduler": scheduler}, "job": [dict(j) for j in jobs]}
    return resolve(raw, "test.toml")


def test_disk_time_per_process_in_the_results():
    """Whole run on a fixed 10 ms device at depth 1: every I/O's disk time is
    10 ms, so a process's disk time is 10 ms times its I/Os, and the shares
    follow the I/O counts."""
    cfg = _service_config([
        {"name": "a", "rw": "randread", "bs": "4k", "number_ios": 6},
        {"name": "b", "rw": "randread", "bs": "4k", "number_ios": 2, "startdelay": "1s"},
    ])
    r = results_dict(run_config(cfg), {})
    a, b = r["processes"]
    assert math.isclose(a["disk_time_s"], 0.060) and math.isclose(b["disk_time_s"], 0.020)
    assert math.isclose(a["disk_share"], 0.75) and math.isclose(b["disk_share"], 0.25)
    assert math.isclose(r["totals"]["all"]["disk_time_s"], 0.080)
    f = r["fairness"]
    assert f["processes"] == 2
    assert math.isclose(f["jain_disk_time"], (6 + 2) ** 2 / (2 * (36 + 4)), rel_tol=1e-5)
    assert math.isclose(f["jain_throughput"], 0.8, rel_tol=1e-5)


# ---------------------------------------------------------------------- timeouts

def test_timeouts_counted_exactly():
    """Process a queues 4 sync reads at once on a fixed 10 ms device (depth 1):
    they complete at 10, 20, 30 and 40 ms (Q2C 10..40 ms). Process b starts at
    1 s and reads twice, one at a time: 10 ms each. With a 25 ms client timeout
    a has 2 timeouts (50 %), b none; worst waits 40 and 10 ms."""
    cfg = _service_config([
        {"name": "a", "rw": "randread", "bs": "4k", "iodepth": 4, "number_ios": 4},
        {"name": "b", "rw": "randread", "bs": "4k", "number_ios": 2, "startdelay": "1s"},
    ], run={"client_timeout": "25ms"})
    r = results_dict(run_config(cfg), {})
    a, b = r["processes"]
    assert a["timeouts"] == 2 and a["timeouts_pct"] == 50.0
    assert b["timeouts"] == 0 and b["timeouts_pct"] == 0.0
    assert a["read"]["timeouts"] == 2 and a["write"]["timeouts"] == 0
    assert math.isclose(a["worst_wait_ms"], 40.0) and math.isclose(b["worst_wait_ms"], 10.0)
    f = r["fairness"]
    assert f["timeouts"] == 2 and math.isclose(f["timeouts_pct"], 100 * 2 / 6, rel_tol=1e-5)
    assert f["client_timeout_ms"] == 25.0
    assert math.isclose(f["worst_wait_ms"], 40.0) and f["worst_wait_pid"] == 1000
    assert r["totals"]["read"]["timeouts"] == 2
    text = run_table(r)
    assert "timeouts (Q2C > 25 ms): 2 (33.33 %)" in text
    assert "2 (50.00 %)" in text


def test_no_client_timeout_means_no_timeout_figures():
    cfg = _service_config([{"name": "a", "rw": "randread", "bs": "4k", "number_ios": 3}])
    r = results_dict(run_config(cfg), {})
    assert r["fairness"]["timeouts"] is None and r["processes"][0]["timeouts"] is None
    assert r["fairness"]["client_timeout_ms"] is None


def test_unfinished_ios_are_reported():
    """A 10 ms device, 4 outstanding reads (each completion issues the next), run
    cut at 25 ms: 2 complete (10, 20 ms), 4 + 2 were queued, so 4 are unfinished."""
    cfg = _service_config([{"name": "a", "rw": "randread", "bs": "4k", "iodepth": 4}],
                          run={"duration": "25ms"})
    r = results_dict(run_config(cfg), {})
    p = r["processes"][0]
    assert p["all"]["ios"] == 2 and p["issued"] == 6 and p["unfinished"] == 4
    assert r["fairness"]["unfinished"] == 4


@pytest.mark.parametrize("value, expected", [
    ("0ms", "client_timeout must be positive"),
    ("soon", "client_timeout"),
])
def test_client_timeout_errors(value, expected):
    with pytest.raises(ConfigError, match=expected):
        make_config(jobs=[{"name": "a", "rw": "read"}], run={"client_timeout": value})


def test_client_timeout_by_set(tmp_path, capsys):
    from blksim.cli import main
    path = tmp_path / "c.toml"
    path.write_text('[run]\nduration = "1s"\n[[job]]\nname = "r"\nrw = "randread"\n'
                    'numjobs = 2\niodepth = 4\n')
    assert main(["run", str(path), "--quiet", "--set", "run/client_timeout=30ms"]) == 0
    out = capsys.readouterr().out
    assert "timeouts (Q2C > 30 ms)" in out


# ---------------------------------------------------------------------- priorities

def test_nice_and_ionice_reach_bios_and_results():
    cfg = make_config(jobs=[
        {"name": "rt", "rw": "randread", "number_ios": 3, "prioclass": 1, "prio": 2},
        {"name": "nice", "rw": "randread", "number_ios": 3, "nice": 10},
        {"name": "idle", "rw": "randread", "number_ios": 3, "prioclass": 3},
    ], scheduler="cfq")
    outcome, done = run_config(cfg, collect=True)
    by_pid = {b.pid: b.ioprio for b in done}
    # a class without prio is set with level 0, as fio's ioprio_set(class, prio = 0)
    # does; CFQ itself treats idle as level 7
    assert by_pid == {1000: (1 << 13) | 2, 1001: (2 << 13) | 6, 1002: (3 << 13) | 0}
    procs = results_dict(outcome, {})["processes"]
    assert [(p["ioprio_class"], p["ioprio_level"], p["nice"]) for p in procs] == [
        ("rt", 2, 0), ("be", 6, 10), ("idle", 0, 0)]


# ---------------------------------------------------------------------- schedulers

def test_cfq_gives_equal_priority_processes_equal_disk_time():
    """Four equal-priority random readers under CFQ get time slices in turn: each
    one's disk time is within 10 % of the mean."""
    cfg = make_config(jobs=[{"name": "r", "rw": "randread", "bs": "4k", "numjobs": 4}],
                      scheduler="cfq", run={"duration": "4s"})
    r = results_dict(run_config(cfg), {})
    disk = [p["disk_time_s"] for p in r["processes"]]
    mean = sum(disk) / len(disk)
    assert len(disk) == 4 and mean > 0.5
    for d in disk:
        assert abs(d - mean) <= 0.10 * mean, disk
    assert r["fairness"]["jain_disk_time"] > 0.99


@pytest.mark.parametrize("scheduler", ["noop", "deadline"])
def test_flagship_fairness_index(scheduler):
    raw = tomllib.loads(builtin_config_text())
    raw["run"]["duration"] = "4s"
    cfg = resolve(raw, "flagship.toml", scheduler=scheduler)
    r = results_dict(run_config(cfg), {})
    f = r["fairness"]
    assert f["processes"] == 5
    assert 0.0 < f["jain_throughput"] <= 1.0
    assert 0.0 < f["jain_disk_time"] <= 1.0
    shares = sum(p["disk_share"] for p in r["processes"])
    assert math.isclose(shares, 1.0, rel_tol=1e-5)
    # The device's busy time is the disk time handed out: at most the measured time.
    assert f["disk_time_s"] <= r["measured_s"] + 1e-9
    assert "fairness over 5 processes: Jain's index" in run_table(r)
    table = compare_table([r, r])
    assert "fairness: Jain, throughput" in table and "worst wait (ms)" in table


def test_trace_replays_count_issued_bios_per_pid():
    """Records that carry a pid count under it; the others under the replay's pid."""
    from collections import namedtuple

    from blksim.sim.workload import BioIds, ClosedTraceReplay, TraceReplay

    Rec = namedtuple("Rec", "time sector nr_sectors write pid")
    records = [Rec(0.001 * i, 1000 * i, 8, False, pid) for i, pid in
               enumerate([None, 7, 7, None, 9, 900])]

    class Queue:
        def __init__(self):
            self.bios = []

        def submit_bio(self, bio, now=None):
            self.bios.append(bio)
            return True                     # it got a request: nobody sleeps

        def process_exited(self, pid):
            pass

    for cls in (TraceReplay, ClosedTraceReplay):
        env = simpy.Environment()
        q = Queue()
        rp = cls(SimpyClock(env), q, BioIds(), iter(records), 900, "t", None)
        rp.start()
        env.run()
        counts = {}
        for b in q.bios:
            counts[b.pid] = counts.get(b.pid, 0) + 1
        if cls is TraceReplay:
            assert counts == {900: 3, 7: 2, 9: 1}
        assert rp.issued_by_pid() == counts
