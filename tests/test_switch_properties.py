"""Whole-system properties across scheduler switches, over random workloads and
switch times: every bio completes exactly once, none is lost, Q <= D <= C, the
per-phase figures add up to the totals, and the same seed gives the same result."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.schedulers import get_scheduler
from blksim.block.elevator import resolve_tunables
from blksim.sim.config import SwitchSpec
from blksim.sim.results import results_dict, results_json
from tests.test_properties import _config, job_strategy, queue_strategy
from tests.simhelpers import run_config
from tests.test_switch import _check_phases_add_up

KERNEL_ELEVATORS = ["noop", "anticipatory", "deadline", "cfq"]


def _switched(jobs, first, plan, queue, queue_depth, seed, kernel="2.6.18", timeout=None):
    cfg = _config(jobs, first, queue, queue_depth, seed, kernel=kernel)
    cfg.client_timeout = timeout
    switches = []
    t = 0.0
    for gap, name in plan:
        t += gap
        cls = get_scheduler(name)
        switches.append(SwitchSpec(t, name, resolve_tunables(cls.tunables, {}, name)))
    cfg.switches = switches
    return cfg


plan_strategy = st.lists(
    st.tuples(st.floats(0.0005, 0.2), st.sampled_from(KERNEL_ELEVATORS)), min_size=1, max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(job_strategy, min_size=1, max_size=4),
       first=st.sampled_from(KERNEL_ELEVATORS),
       plan=plan_strategy,
       queue=queue_strategy,
       queue_depth=st.sampled_from([1, 1, 4]),
       kernel=st.sampled_from(["2.6.18", "2.6.32"]),
       seed=st.integers(0, 2**32))
def test_every_bio_completes_exactly_once_across_switches(jobs, first, plan, queue,
                                                          queue_depth, kernel, seed):
    cfg = _switched(jobs, first, plan, queue, queue_depth, seed, kernel, timeout=0.05)
    outcome, done = run_config(cfg, collect=True)
    issued = sum(p.issued for p in outcome.processes)
    assert issued == sum(j["number_ios"] for j in jobs)
    ids = [b.id for b in done]
    assert len(ids) == issued                      # none lost
    assert len(set(ids)) == len(ids)               # none completed twice
    assert set(ids) == set(range(issued))
    for b in done:
        assert 0.0 <= b.t_queue <= b.t_dispatch <= b.t_complete
        assert b.disk_s >= 0.0
    assert outcome.queue.idle() and not outcome.queue.switching
    # every switch took effect, in order
    names = [first] + [name for _gap, name in plan]
    assert outcome.queue.elevator_name == names[-1]
    assert [s["scheduler"] for s in outcome.queue.switches_done] == names[1:]
    assert outcome.metrics.completed == issued
    r = results_dict(outcome, {})
    assert [p["scheduler"] for p in r["phases"]] == names
    _check_phases_add_up(r)
    # the device's busy time is handed out once: no more than the time it ran
    busy = sum(b.disk_s for b in done)
    assert busy <= max(b.t_complete for b in done) + 1e-9
    assert math.isclose(busy, r["totals"]["all"]["disk_time_s"], rel_tol=1e-6, abs_tol=1e-9)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(job_strategy, min_size=1, max_size=3),
       first=st.sampled_from(KERNEL_ELEVATORS),
       plan=plan_strategy,
       seed=st.integers(0, 2**32))
def test_same_seed_same_results_across_switches(jobs, first, plan, seed):
    texts = []
    for _ in range(2):
        cfg = _switched(jobs, first, plan, {}, 1, seed, timeout=0.02)
        texts.append(results_json(results_dict(run_config(cfg), {})))
    assert texts[0] == texts[1]


def test_noop_deadline_cfq_with_requests_queued():
    """The brief's sequence on a busy queue: noop -> deadline -> cfq, each switch
    finding requests queued, every bio once."""
    jobs = [{"rw": "randwrite", "bs": "8k", "iodepth": 8, "number_ios": 40, "thinktime": 0,
             "size": "10g", "offset": 0, "sync": False},
            {"rw": "randread", "bs": "4k", "iodepth": 2, "number_ios": 30, "thinktime": 100,
             "size": "10g", "offset": "20g", "sync": None}]
    cfg = _switched(jobs, "noop", [(0.05, "deadline"), (0.15, "cfq")], {}, 1, 7)
    outcome, done = run_config(cfg, collect=True)
    assert len(done) == 70 and len({b.id for b in done}) == 70
    infos = outcome.queue.switches_done
    assert [i["scheduler"] for i in infos] == ["deadline", "cfq"]
    assert all(i["drained"] > 0 for i in infos)
