"""The textbook elevators inside the block layer, on real drive presets: every bio
completes once, merging still happens, and the teaching example gives the
textbook's orders end to end."""

from __future__ import annotations

import os

import pytest

from blksim import schedulers
from blksim.schedulers.textbook import TEXTBOOK_SCHEDULERS
from blksim.sim import config as cfgmod
from blksim.sim.engine import Simulation
from tests.simhelpers import make_config

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


@pytest.fixture(autouse=True)
def textbook_registered(monkeypatch):
    for name, cls in TEXTBOOK_SCHEDULERS.items():
        monkeypatch.setitem(schedulers.SCHEDULERS, name, cls)


def run(cfg):
    """Run `cfg`; return (simulation, completed bios). Attaches the device to the
    elevator if the block layer has not (the wiring the lead adds)."""
    done = []
    sim = Simulation(cfg, complete_hooks=(done.append,))
    el = sim.queue.elevator
    if getattr(el, "wants_device", False) and el.geometry.device is None:
        el.attach_device(sim.device)
    sim.run()
    return sim, done


JOBS = [
    {"name": "rnd", "rw": "randread", "bs": "4k", "numjobs": 3, "iodepth": 4},
    {"name": "seqw", "rw": "write", "bs": "4k", "iodepth": 16, "offset": "10g"},
    {"name": "mix", "rw": "randrw", "bs": "8k", "size": "64m", "thinktime": "2ms"},
]


@pytest.mark.parametrize("name", list(TEXTBOOK_SCHEDULERS))
@pytest.mark.parametrize("qd,kernel", [(1, "2.6.18"), (4, "2.6.24")])
def test_every_bio_completes_once(name, qd, kernel):
    cfg = make_config(jobs=JOBS, scheduler=name, device={"queue_depth": qd},
                      run={"duration": "0.4s", "kernel": kernel})
    sim, done = run(cfg)
    ids = [b.id for b in done]
    assert ids and len(ids) == len(set(ids))
    assert all(b.t_queue <= b.t_dispatch <= b.t_complete for b in done)
    q = sim.queue
    el = q.elevator
    assert el.geometry.kind == "layout" and el.cylinders == 56625
    # every request allocated was coalesced away, dispatched, or is still queued
    assert el.dispatched + q.request_merges + el.queued() == q.requests_allocated
    if kernel != "2.6.18":
        # the block layer's generic back-merge hash (2.6.19+) merges for them; in
        # 2.6.18 only the one-hit last_merge cache does, as for noop
        assert q.bio_merges > 0 and not q.elevator.own_backmerge_hash


@pytest.mark.parametrize("name", ["sptf", "clook", "sstf"])
def test_on_a_disksim_drive(name):
    cfg = cfgmod.resolve({"run": {"seed": 1, "duration": "0.3s"},
                          "device": {"drive": "hp_c2247a", "queue_depth": 2},
                          "queue": {"scheduler": name},
                          "job": [dict(JOBS[0])]}, "test.toml")
    sim, done = run(cfg)
    assert len({b.id for b in done}) == len(done) > 10
    if name == "sptf":
        assert sim.queue.elevator.geometry.positioning_kind == "device"


def test_sptf_beats_fcfs_on_the_same_load():
    base = {"run": {"seed": 4, "duration": "1s"}, "device": {"drive": "cheetah15k4"},
            "job": [{"name": "r", "rw": "randread", "bs": "4k", "numjobs": 8,
                     "size": "200m"}]}
    served = {}
    for name in ("fcfs", "sstf", "sptf"):
        raw = dict(base, queue={"scheduler": name})
        _sim, done = run(cfgmod.resolve(raw, "test.toml"))
        served[name] = len(done)
    assert served["sptf"] > served["fcfs"] and served["sstf"] > served["fcfs"]


TEACHING_ORDERS = {
    "fcfs": [98, 183, 37, 122, 14, 124, 65, 67],
    "sstf": [65, 67, 37, 14, 98, 122, 124, 183],
    "scan": [65, 67, 98, 122, 124, 183, 37, 14],
    "look": [65, 67, 98, 122, 124, 183, 37, 14],
    "cscan": [65, 67, 98, 122, 124, 183, 14, 37],
    "clook": [65, 67, 98, 122, 124, 183, 14, 37],
}


@pytest.mark.parametrize("name", list(TEXTBOOK_SCHEDULERS))
def test_teaching_example_end_to_end(name):
    path = os.path.join(EXAMPLES, "teaching-queue.toml")
    cfg = cfgmod.resolve(cfgmod.load_file(path), path, scheduler=name, lenient_iosched=True)
    sim, done = run(cfg)
    assert sorted(b.sector // 100 for b in done) == sorted([53, 98, 183, 37, 122, 14, 124,
                                                             65, 67])
    order = [b.sector // 100 for b in sorted(done, key=lambda b: b.t_dispatch)]
    assert order[0] == 53
    if name in TEACHING_ORDERS:
        assert order[1:] == TEACHING_ORDERS[name]
    else:   # SPTF: by the drive's own estimate, not by distance
        assert sorted(order[1:]) == sorted(TEACHING_ORDERS["fcfs"])
        assert order[1:] != TEACHING_ORDERS["sstf"]
