"""fsync on ext3 with and without barriers, end to end on the 2.6.18 queue: on a drive
whose write cache is volatile a barrier commit costs a cache flush, seen in the fsync's
latency; a battery-backed RAID controller gets none; barrier=0 sends none."""

import pytest

from blksim.block.request import REQ_OP_FLUSH
from blksim.sim.config import ConfigError, resolve
from blksim.sim.engine import Simulation

JOURNAL = 32 * 2048          # the journal's sectors, from sector 0


def run(device, barrier, number_ios=20):
    fs = {"type": "ext3", "journal_size": "32m"}
    if barrier is not None:
        fs["barrier"] = barrier
    raw = {"run": {"seed": 1}, "device": device, "queue": {"scheduler": "deadline"},
           "filesystems": {"/dev/sda": fs},
           "file": [{"path": "/data/f", "device": "/dev/sda", "size": "64m"}],
           "job": [{"name": "w", "rw": "write", "bs": "4k", "fsync": 10,
                    "number_ios": number_ios, "filename": "/data/f"}]}
    cfg = resolve(raw, "barrier.toml")
    calls, issued, completed = [], [], []
    sim = Simulation(cfg)
    record = sim.metrics.record_call
    sim.metrics.record_call = lambda call: (calls.append(call), record(call))
    q = sim.host.disks["sda"]
    q.subscribe("block_rq_issue", lambda _q, rq, now: issued.append((now, rq)))
    q.subscribe("block_rq_complete", lambda _q, rq, now: completed.append((now, rq)))
    sim.run()
    fsyncs = [c for c in calls if c.nr_sectors == 0]
    return q, fsyncs, issued, dict((id(rq), t) for t, rq in completed)


DRIVE = {"drive": "cheetah9LP", "queue_depth": 4}       # write-back cache, FUA


def test_barrier_commit_costs_a_flush_on_a_volatile_cache():
    q, fsyncs, issued, done_at = run(DRIVE, 1)
    assert len(fsyncs) == 2 and q.ordered.barriers == 2
    flushes = [(t, rq) for t, rq in issued if rq.op == REQ_OP_FLUSH]
    assert len(flushes) == 2                   # DRAIN_FUA: one pre-flush per commit
    for k, (t_flush, flush) in enumerate(flushes):
        # the drain: nothing issued before the flush is still at the device
        before = [rq for t, rq in issued if t <= t_flush and rq is not flush]
        assert all(done_at[id(rq)] <= t_flush for rq in before)
        # then the commit block, alone, with FUA, after the flush completed
        i = next(i for i, (_t, rq) in enumerate(issued) if rq is flush)
        t_commit, commit = issued[i + 1]
        assert commit.fua and commit.sector < JOURNAL and commit.nr_sectors == 8
        assert t_commit == pytest.approx(done_at[id(flush)])
        # the fsync ends with that commit block: the flush's time is in its latency
        assert fsyncs[k].t_complete == pytest.approx(done_at[id(commit)])
        assert done_at[id(flush)] - t_flush > 0
    assert q.ordered.flushes == 2


def test_barrier_0_sends_no_flush_and_is_faster():
    q0, fsyncs0, issued0, _ = run(DRIVE, 0)
    q1, fsyncs1, issued1, done1 = run(DRIVE, 1)
    assert not any(rq.op == REQ_OP_FLUSH or rq.fua for _t, rq in issued0)
    assert q0.ordered.barriers == 0
    flush_time = sum(done1[id(rq)] - t for t, rq in issued1 if rq.op == REQ_OP_FLUSH)
    lat0 = sum(c.t_complete - c.t_queue for c in fsyncs0)
    lat1 = sum(c.t_complete - c.t_queue for c in fsyncs1)
    assert flush_time > 0 and lat1 > lat0


def test_default_is_2_6_18s_barrier_0():
    q, _f, issued, _ = run(DRIVE, None)
    assert q.ordered.barriers == 0 and not any(rq.op == REQ_OP_FLUSH for _t, rq in issued)


def test_battery_backed_controller_gets_no_flush():
    raid = {"raid": {"level": "raid10", "members": 4, "service": "fixed",
                     "service_time": "2ms", "capacity": "1g", "stripe_size": "64k",
                     "cache": "16m", "write_policy": "write-back"}}
    q, fsyncs, issued, done_at = run(raid, 1)
    assert q.ordered.barriers == 2 and q.ordered.flushes == 0
    assert not any(rq.op == REQ_OP_FLUSH or rq.fua for _t, rq in issued)
    assert len(fsyncs) == 2


@pytest.mark.parametrize("value", [2, "yes", 1.0])
def test_bad_barrier_names_the_key(value):
    raw = {"device": {"service": "fixed", "service_time": "1ms", "capacity": "4g"},
           "filesystems": {"/dev/sda": {"type": "ext3", "barrier": value}},
           "file": [], "job": [{"name": "j"}]}
    with pytest.raises(ConfigError, match=r"\[filesystems.'/dev/sda'\]: barrier expected 0 "
                                          r"or 1"):
        resolve(raw, "bad.toml")


def test_results_give_the_barriers():
    from blksim.sim.config import resolved_dict
    from blksim.sim.results import results_dict
    raw = {"run": {"seed": 1}, "device": DRIVE, "queue": {"scheduler": "deadline"},
           "filesystems": {"/dev/sda": {"type": "ext3", "journal_size": "32m", "barrier": 1}},
           "file": [{"path": "/data/f", "device": "/dev/sda", "size": "64m"}],
           "job": [{"name": "w", "rw": "write", "bs": "4k", "fsync": 10, "number_ios": 20,
                    "filename": "/data/f"}]}
    cfg = resolve(raw, "barrier.toml")
    sim = Simulation(cfg)
    out = results_dict(sim.run(), resolved_dict(cfg, 4))
    b = out["devices"]["sda"]["barriers"]
    assert b["ordered_mode"] == "drain_fua" and b["barriers"] == 2 and b["flushes"] == 2
    assert b["flush_time_ms"] == pytest.approx(sim.host.disks["sda"].ordered.flush_time * 1e3)
    assert resolved_dict(cfg, 4)["filesystems"]["/dev/sda"]["barrier"] == 1
    raw["filesystems"]["/dev/sda"]["barrier"] = 0
    cfg = resolve(raw, "barrier.toml")
    out = results_dict(Simulation(cfg).run(), resolved_dict(cfg, 4))
    assert "barriers" not in out["devices"]["sda"]
    assert "barrier" not in resolved_dict(cfg, 4)["filesystems"]["/dev/sda"]


def _made(mount):
    raw = {"run": {"seed": 1}, "device": DRIVE, "queue": {"scheduler": "deadline"},
           "filesystems": {"/dev/sda": {"type": "ext3", "mkfs": "-j", "mount": mount}},
           "file": [{"path": "/data/f", "device": "/dev/sda", "size": "64m"}],
           "job": [{"name": "w", "rw": "write", "bs": "4k", "fsync": 10,
                    "number_ios": 20, "filename": "/data/f"}]}
    sim = Simulation(resolve(raw, "made.toml"))
    q = sim.host.disks["sda"]
    sim.run()
    return q


def test_a_made_ext3_mounted_barrier_1_sends_its_commits_as_barriers():
    # mount's barrier=1 (fs/ext3/super.c, Opt_barrier) reaches the journal's commit block
    assert _made("barrier=1").ordered.barriers == 2
    assert _made("barrier=0").ordered.barriers == 0


def test_the_outline_barrier_key_is_refused_beside_mkfs():
    raw = {"run": {"seed": 1}, "device": DRIVE,
           "filesystems": {"/dev/sda": {"type": "ext3", "mkfs": "-j", "barrier": 1}},
           "job": [{"name": "w", "rw": "write", "number_ios": 1}]}
    with pytest.raises(ConfigError, match="barrier is ext3's outline's.*barrier= in mount"):
        resolve(raw, "made.toml")
