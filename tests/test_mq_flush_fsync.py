"""ext3 mounted barrier=1 on a multi-queue kernel, end to end: each journal commit is a
PREFLUSH|FUA write that the flush machinery (block/mq/flush.py) turns into a flush then
the commit block with FUA; the flushes are in diskstats (iostat f/s, f_await), in
results.json, and the explain report still gives every second of every bio one cause."""

import pytest

from blksim.block.request import REQ_OP_FLUSH
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation
from blksim.sim.explain import CAUSES

JOURNAL = 32 * 2048          # the journal's sectors, from sector 0
DRIVE = {"drive": "cheetah9LP", "queue_depth": 4}       # write-back cache, FUA


def raw(kernel="6.6", scheduler="mq-deadline", barrier=1, number_ios=20):
    return {"run": {"seed": 1, "kernel": kernel}, "device": DRIVE,
            "queue": {"scheduler": scheduler},
            "filesystems": {"/dev/sda": {"type": "ext3", "journal_size": "32m",
                                         "barrier": barrier}},
            "file": [{"path": "/data/f", "device": "/dev/sda", "size": "64m"}],
            "job": [{"name": "w", "rw": "write", "bs": "4k", "fsync": 10,
                     "number_ios": number_ios, "filename": "/data/f"}]}


def run(cfg_raw, explain=False):
    sim = Simulation(resolve(cfg_raw, "flush.toml"), explain=explain)
    q = sim.host.disks["sda"]
    issued, completed = [], {}
    q.subscribe("block_rq_issue", lambda _q, rq, now: issued.append((now, rq)))
    q.subscribe("block_rq_complete", lambda _q, rq, now: completed.__setitem__(id(rq), now))
    outcome = sim.run()
    return sim, q, issued, completed, outcome


@pytest.mark.parametrize("kernel,scheduler", [("6.6", "mq-deadline"), ("5.4", "none"),
                                              ("6.1", "bfq")])
def test_a_barrier_commit_is_a_flush_then_the_commit_block_with_fua(kernel, scheduler):
    sim, q, issued, done_at, _ = run(raw(kernel, scheduler))
    flushes = [(t, rq) for t, rq in issued if rq.op == REQ_OP_FLUSH]
    commits = [(t, rq) for t, rq in issued if rq.fua]
    assert len(flushes) == len(commits) == q.flush.flushes == 2
    for (t_flush, flush), (t_commit, commit) in zip(flushes, commits):
        # the commit block, in the journal, with FUA (the drive has it), after the flush
        assert commit.sector < JOURNAL and commit.nr_sectors == 8
        assert t_commit >= done_at[id(flush)] > t_flush
    assert q.stats.ios[3] == (0 if kernel == "5.4" else 2)


def test_barrier_0_sends_no_flush():
    sim, q, issued, _, outcome = run(raw(barrier=0))
    assert not any(rq.op == REQ_OP_FLUSH or rq.fua for _t, rq in issued)
    assert q.flush.flushes == 0


def test_results_and_iostat_give_the_flushes():
    """results.json: the disk's ``flushes`` and iostat's ``f/s`` and ``f_await`` (ms)."""
    import blksim
    fig = blksim.run(raw(number_ios=40), per_request=False).figures
    sda = fig["devices"]["sda"]
    assert sda["flushes"]["flushes"] == sda["flushes"]["flush_sequences"] == 4
    assert sda["flushes"]["flush_time_ms"] > 0
    io = fig["iostat"]["sda"]
    assert io["f/s"] == pytest.approx(4 / io["interval_s"], rel=1e-6)
    assert io["f_await"] > 0
    # a run without flushes has no such entry (its results.json is as it was)
    fig0 = blksim.run(raw(barrier=0), per_request=False).figures
    assert "flushes" not in fig0["devices"]["sda"] and fig0["iostat"]["sda"]["f/s"] == 0


@pytest.mark.parametrize("kernel,scheduler", [("6.6", "mq-deadline"), ("5.4", "none"),
                                              ("6.6", "kyber"), ("6.6", "bfq")])
def test_explain_still_adds_up_with_flushes(kernel, scheduler):
    """Every bio's parts (the commit block's wait for its pre-flush included) are >= 0
    and sum to its Q2C."""
    cfg = raw(kernel, scheduler, number_ios=30)
    sim = Simulation(resolve(cfg, "flush.toml"), explain=True)
    bad, counted = [], [0]

    def per_bio(bio, q2c, secs):
        counted[0] += 1
        if min(secs) < -1e-9 or abs(sum(secs) - q2c) > 1e-9 * max(1.0, q2c):
            bad.append((bio.id, q2c, dict(zip(CAUSES, secs))))
    for tracker in sim.explain.trackers.values():
        tracker.per_bio = per_bio
    sim.run()
    assert not bad, bad[:3]
    assert counted[0] > 0 and sim.host.disks["sda"].flush.flushes == 3
    for section in sim.explain.summary().values():
        for entry in section["processes"] + [section["all"]]:
            assert sum(entry["seconds"].values()) == pytest.approx(entry["q2c_total_s"],
                                                                   abs=1e-6)
