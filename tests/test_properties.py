"""Whole-system properties over random workloads, for every scheduler, and for the
example plugin (examples/plugins/deadline_early, named as module:Class).

Every bio completes exactly once; none is lost or duplicated; Q <= D <= C;
the same seed gives the same result; deadline bounds how long reads wait.
"""

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.schedulers import SCHEDULERS
from blksim.sim.results import results_dict, results_json
from tests.simhelpers import make_config, run_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "plugins"
                       / "deadline_early"))
EXAMPLE_PLUGIN = "deadline_early:DeadlineEarlyElevator"
ALL_SCHEDULERS = [*sorted(SCHEDULERS), EXAMPLE_PLUGIN]

job_strategy = st.fixed_dictionaries({
    "rw": st.sampled_from(["read", "write", "randread", "randwrite", "randrw", "rw"]),
    "bs": st.sampled_from(["512", "4k", "8k", "64k", "256k"]),
    "iodepth": st.integers(1, 8),
    "thinktime": st.sampled_from([0, 100, 2000]),          # microseconds, as fio
    "number_ios": st.integers(1, 40),
    "size": st.sampled_from(["1m", "64m", "10g"]),
    "offset": st.sampled_from([0, "1g", "20g"]),
    "sync": st.sampled_from([None, True, False]),
})

queue_strategy = st.fixed_dictionaries({
    "nr_requests": st.sampled_from([4, 8, 128]),
    "max_sectors_kb": st.sampled_from([4, 64, 512]),
    "nomerges": st.sampled_from([0, 0, 1, 2]),
})


def _config(jobs, scheduler, queue, queue_depth, seed, iosched=None, kernel="2.6.18"):
    tables = []
    for i, j in enumerate(jobs):
        t = {k: v for k, v in j.items() if v is not None}
        t["name"] = f"j{i}"
        tables.append(t)
    return make_config(jobs=tables, scheduler=scheduler, queue=queue, iosched=iosched,
                       device={"queue_depth": queue_depth}, run={"seed": seed, "kernel": kernel})


@settings(max_examples=48, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(job_strategy, min_size=1, max_size=4),
       scheduler=st.sampled_from(ALL_SCHEDULERS),
       queue=queue_strategy,
       queue_depth=st.sampled_from([1, 1, 4]),
       kernel=st.sampled_from(["2.6.18", "2.6.32"]),
       seed=st.integers(0, 2**32))
def test_every_bio_completes_exactly_once(jobs, scheduler, queue, queue_depth, kernel, seed):
    cfg = _config(jobs, scheduler, queue, queue_depth, seed, kernel=kernel)
    outcome, done = run_config(cfg, collect=True)
    issued = sum(p.issued for p in outcome.processes)
    assert issued == sum(j["number_ios"] * 1 for j in jobs)
    ids = [b.id for b in done]
    assert len(ids) == issued                      # none lost
    assert len(set(ids)) == len(ids)               # none completed twice
    assert set(ids) == set(range(issued))          # exactly the bios issued
    for b in done:
        assert 0.0 <= b.t_queue <= b.t_dispatch <= b.t_complete
    assert outcome.queue.idle()
    assert outcome.metrics.completed == issued


@settings(max_examples=10, deadline=None)
@given(jobs=st.lists(job_strategy, min_size=1, max_size=3),
       scheduler=st.sampled_from(ALL_SCHEDULERS),
       seed=st.integers(0, 2**32))
def test_same_seed_same_results(jobs, scheduler, seed):
    texts = []
    for _ in range(2):
        cfg = _config(jobs, scheduler, {}, 1, seed)
        outcome = run_config(cfg)
        texts.append(results_json(results_dict(outcome, {})))
    assert texts[0] == texts[1]


def _read_wait_workload(scheduler, read_expire_ms, seed, writer_rw="randwrite"):
    jobs = [
        {"name": "readers", "rw": "randread", "bs": "4k", "numjobs": 4, "thinktime": 1000},
        {"name": "writer", "rw": writer_rw, "bs": "64k", "iodepth": 64, "offset": "20g",
         "size": "1g"},
    ]
    iosched = {"read_expire": read_expire_ms} if scheduler == "deadline" else {}
    return make_config(jobs=jobs, scheduler=scheduler, iosched=iosched,
                       run={"seed": seed, "duration": "6s"})


@settings(max_examples=6, deadline=None)
@given(read_expire=st.sampled_from([20, 50, 100, 200]), seed=st.integers(0, 1000),
       writer_rw=st.sampled_from(["randwrite", "write"]))
def test_deadline_bounds_read_waits(read_expire, seed, writer_rw):
    """A read waits at most read_expire, then the reads ahead of it in the FIFO
    (4 readers) with the write batches writes_starved lets in between them."""
    cfg = _read_wait_workload("deadline", read_expire, seed, writer_rw)
    outcome = run_config(cfg)
    m = outcome.metrics
    max_d2c = max(m.read.d2c.hi, m.write.d2c.hi)
    fifo_batch = 16
    readers = 4
    bound = read_expire / 1e3 + readers * (1 + fifo_batch / 2) * max_d2c + 2 * 0.004
    assert m.read.ios > 20
    assert m.read.q2d.hi <= bound, (m.read.q2d.hi, bound)


def test_noop_has_no_such_bound():
    # The same workload under noop: reads queue behind up to 64 writes.
    cfg = _read_wait_workload("noop", 50, 1)
    dl = run_config(_read_wait_workload("deadline", 50, 1)).metrics
    m = run_config(cfg).metrics
    assert m.read.q2d.hi > 0.3
    assert m.read.q2c.mean > 3 * dl.read.q2c.mean
