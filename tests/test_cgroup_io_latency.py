"""io.latency (blk-iolatency, block/mq/iolatency.py): hand-traced scaling steps, the
policy on its own, and end to end a protected group beside a bulk group."""

from __future__ import annotations

import pytest

from tests.test_cgroup import error_of, raw_config
from blksim.block.cgroup import CgroupTree
from blksim.block.mq.iolatency import (DEFAULT_SCALE_COOKIE, UINT_MAX, ChildLatency,
                                       IoLatency, IolatGrp, LatStat, calc_load,
                                       scale_cookie_change, window_nsec)
from blksim.block.request import Bio
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation
from tests.simhelpers import runs_again_to_the_same_figures

MS = 1_000_000


# --------------------------------------------------------------------- hand-traced rules

def test_scale_cookie_change_hand_traced_qd_64():
    # scale_cookie_change, nr_requests 64: down by 64 >> 2 = 16 while the cookie is at most
    # 64 below the default, then by 1 until 128 below, then not at all
    info = ChildLatency()
    seen = []
    for _ in range(60):
        scale_cookie_change(info, 64, up=False)
        seen.append(DEFAULT_SCALE_COOKIE - info.scale_cookie)
    assert seen[:6] == [16, 32, 48, 64, 80, 81]
    # 80 -> 128 one at a time (48 steps), then it stays (diff < 2 qd no longer holds)
    assert seen.index(128) == 4 + 48 and set(seen[52:]) == {128}
    # up: by 1 while more than 64 below, then by 64 >> 4 = 4, the last step capped
    ups = []
    while info.scale_cookie != DEFAULT_SCALE_COOKIE:
        scale_cookie_change(info, 64, up=True)
        ups.append(DEFAULT_SCALE_COOKIE - info.scale_cookie)
    assert ups[:3] == [127, 126, 125]
    assert ups[63:66] == [64, 60, 56]           # 128 - 64 single steps, then 4 at a time
    assert ups[-2:] == [4, 0]
    assert len(ups) == 64 + 16


def test_scale_change_halves_then_adds_a_sixteenth_and_pays_use_delay_first():
    tree = CgroupTree()
    bulk = tree.add("bulk")
    pol = IoLatency("sda", True, 64)
    grp = pol.grp(bulk)
    depths = []
    for _ in range(8):
        pol._scale_change(grp, False, 0)        # scale_change down: min(depth, qd) / 2
        depths.append(grp.max_depth)
    assert depths == [32, 16, 8, 4, 2, 1, 1, 1]
    grp.use_delay = 2                           # two cuts asked for at depth 1
    pol._scale_change(grp, True, 0)
    pol._scale_change(grp, True, 0)
    assert (grp.max_depth, grp.use_delay) == (1, 0)
    ups = []
    for _ in range(17):
        pol._scale_change(grp, True, 0)         # + max(64 >> 4, 1), at most qd
        ups.append(grp.max_depth)
    assert ups[:3] == [5, 9, 13] and ups[-2:] == [64, 64]


def test_check_scale_change_follows_the_parents_cookie_and_spares_tighter_targets():
    tree = CgroupTree()
    prot, bulk, tight = tree.add("prot"), tree.add("bulk"), tree.add("tight")
    pol = IoLatency("sda", True, 64)
    pol.set_target(prot, 10_000)
    pol.set_target(tight, 5_000)
    root = pol.grps[None]
    g_prot, g_bulk, g_tight = pol.grp(prot), pol.grp(bulk), pol.grp(tight)
    # prot missed: the root's children's cookie goes down, prot is the cause
    root.child_lat.scale_lat = 10 * MS
    root.child_lat.scale_grp = g_prot
    scale_cookie_change(root.child_lat, 64, up=False)
    g_tight.nr_samples = 100
    for g in (g_prot, g_bulk, g_tight):
        pol._check_scale_change(g, 0)
    assert g_bulk.max_depth == 32               # no target: cut
    assert g_prot.max_depth == UINT_MAX         # its own target is the cause's
    assert g_tight.max_depth == UINT_MAX        # tighter target than the cause's
    # back at the default cookie: max again
    root.child_lat.scale_cookie = DEFAULT_SCALE_COOKIE
    pol._check_scale_change(g_bulk, 0)
    assert g_bulk.max_depth == UINT_MAX


def test_window_lat_avg_and_the_two_miss_rules():
    assert window_nsec(0) == 100 * MS
    assert window_nsec(10_000 * 1000) == 160 * MS     # 16 x 10 ms
    assert window_nsec(100 * MS) == 1000 * MS         # at most 1 s
    assert calc_load(0, 2045, 2048) == (2048 * 3 + 2047) // 2048
    ssd = IolatGrp(None, None, True, 0)
    stat = LatStat()
    stat.total, stat.missed = 10, 0
    assert ssd.latency_ok(stat)
    stat.missed = 1                  # thresh max(10 / 10, 1) = 1: one miss is too many
    assert not ssd.latency_ok(stat)
    stat.total = 20                  # thresh 2
    assert ssd.latency_ok(stat)
    rot = IolatGrp(None, None, False, 0)
    rot.min_lat_nsec = 10 * MS
    stat = LatStat()
    stat.mean = 10 * MS
    assert rot.latency_ok(stat)      # the mean at most the target
    stat.mean += 1
    assert not rot.latency_ok(stat)


def test_blk_rq_stat_sum_keeps_the_kernels_zero_batch_of_a_summed_stat():
    # blk_rq_stat_sum adds the source's batch: a stat that is itself a sum has batch 0,
    # so cur_stat's mean stays 0 (block/blk-stat.c, as iolatency_check_latencies uses it)
    percpu = LatStat()
    percpu.batch, percpu.nr = 30 * MS, 3
    window = LatStat()
    window.add_sum(percpu)
    assert (window.mean, window.nr) == (10 * MS, 3)
    cur = LatStat()
    cur.add_sum(window)
    assert (cur.mean, cur.nr) == (0, 3)


def test_root_bios_pass_and_a_cut_group_sleeps_until_a_slot_is_given_back():
    tree = CgroupTree()
    bulk = tree.add("bulk")
    pol = IoLatency("sda", True, 64)
    pol.grp(bulk).max_depth = 1
    bios = [Bio(i, 8 * i, 8, False, True, 1) for i in range(3)]
    root_bio = Bio(9, 0, 8, False, True, 2)
    for b in bios:
        b.cgroup = bulk
        b.t_queue = 0.0
    assert pol.throttle(bios[0], 0.0)
    assert not pol.throttle(bios[1], 0.0) and not pol.throttle(bios[2], 0.0)
    assert pol.throttle(root_bio, 0.0)          # the root's: never throttled
    assert pol.waiting == 2
    pol.done_bio(bios[0], 0.01)                 # wake_up: one sleeper takes the slot
    assert pol.done(None, 0.01) == [bios[1]]
    assert pol.waiting == 1 and pol.grp(bulk).rq_wait.inflight == 1


# --------------------------------------------------------------------- configuration

@pytest.mark.parametrize("groups,expected", [
    ({"db": {"io.latency": "sdz target=10"}}, "'sdz' is not a disk of the run"),
    ({"db": {"io.latency": "sda"}}, "names no target"),
    ({"db": {"io.latency": "sda tgt=10"}}, "expected target=US"),
    ({"db": {"io.latency": "sda target=1.5"}}, "target must be a whole number of µs or max"),
    ({"db": {"io.latency": "sda target=-3"}}, "target must be a whole number of µs or max"),
    ({"db": {"io.latency": 10}}, "expected \"DEVICE target=US\" lines"),
])
def test_bad_io_latency_is_one_line_naming_the_key(groups, expected):
    text = error_of(raw_config(groups))
    assert "io.latency" in text and expected in text


def test_io_latency_reads_back_identically_and_max_removes():
    raw = raw_config({"db": {"io.latency": ["sda target=2000", "sda target=max"]},
                      "web": {"io.latency": "sda target=7500"}})
    cfg = resolve(raw, "t.toml")
    assert [s.io_latency for s in cfg.cgroups.groups] == [{"sda": 0}, {"sda": 7500}]
    tree = cfg.cgroups.build()
    assert tree.groups["db"].io_latency == {} and tree.groups["web"].io_latency == {"sda": 7500}
    assert cfg.cgroups.tables() == {"db": {"io.latency": ["sda target=max"]},
                                    "web": {"io.latency": ["sda target=7500"]}}


def test_resolved_configuration_with_io_latency_and_prio_class_runs_the_same(tmp_path):
    from blksim.cli import main
    path = tmp_path / "c.toml"
    path.write_text("""
[run]
kernel = "6.6"
duration = "2s"
[device]
service = "fixed"
service_time = "2ms"
[queue]
scheduler = "mq-deadline"
[cgroups.db]
"io.latency" = "sda target=3000"
[cgroups.bulk]
"io.prio.class" = "idle"
[[job]]
name = "r"
rw = "randread"
ioengine = "psync"
cgroup = "db"
[[job]]
name = "b"
rw = "randread"
iodepth = 8
cgroup = "bulk"
""")
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o")]) == 0
    text = (tmp_path / "o" / "config.resolved.toml").read_text()
    assert '"io.latency" = [' in text and '"io.prio.class" = "idle"' in text
    a = runs_again_to_the_same_figures(tmp_path / "o", tmp_path / "o2")
    lat = a["cgroups"]["db"]["io_latency"]["sda"]        # a non-rotational disk
    assert lat["target_us"] == 3000 and {"missed", "total", "depth"} <= set(lat)


# --------------------------------------------------------------------- end to end

def _protected_run(bulk_keys=None, prot_ios=200, duration="30s", nr_requests=16,
                   rotational=1, bulk_depth=32):
    """"prot" (10 ms target, one psync read at a time, ``prot_ios`` reads) beside "bulk"
    (``bulk_depth`` random reads in flight) on a 5 ms fixed-service disk."""
    jobs = [{"name": "prot", "rw": "randread", "ioengine": "psync", "cgroup": "prot",
             "number_ios": prot_ios},
            {"name": "bulk", "rw": "randread", "iodepth": bulk_depth, "ioengine": "libaio",
             "cgroup": "bulk"}]
    raw = raw_config({"prot": {"io.latency": "sda target=10000"}, "bulk": bulk_keys or {}},
                     jobs, duration=duration)
    raw["device"] = {"service": "fixed", "service_time": "5ms", "queue_depth": 32}
    raw["queue"].update(nr_requests=nr_requests, rotational=rotational)
    sim = Simulation(resolve(raw, "t.toml"))
    outcome = sim.run()
    return sim, outcome


@pytest.mark.parametrize("rotational", [1, 0])
def test_bulk_depth_is_cut_while_the_protected_group_misses_and_restored_when_idle(
        rotational):
    sim, _ = _protected_run(rotational=rotational)
    pol = sim.host.iolatency["sda"]
    groups = sim.cgroups.groups
    series = pol.grp(groups["bulk"]).depth_series
    depths = [d for _, d in series]
    # nr_requests 16: the first cut halves min(max, 16); then halving down to 1
    assert depths[:5] == [None, 8, 4, 2, 1]
    # prot (200 reads) has stopped long before the end: 5 s after the last scale event
    # the timer forgets it as the cause and raises the cookie once a second; bulk
    # climbs back one step (16 >> 4 = 1) per raise and is max again at the default
    assert depths[-1] is None
    last_cut = max(t for t, d in series if d == 1)
    climb = [(t, d) for t, d in series if t > last_cut]
    assert climb[0][0] >= last_cut + 5
    assert [d for _, d in climb] == list(range(2, 17)) + [None]
    assert all(round(b - a, 6) == 1.0 for (a, _), (b, _) in zip(climb, climb[1:-1]))
    # the protected group is never cut
    assert [d for _, d in pol.grp(groups["prot"]).depth_series] == [None]


def test_a_looser_sibling_is_cut_a_tighter_one_is_not():
    sim, _ = _protected_run({"io.latency": "sda target=50000"}, duration="4s")
    depths = [d for _, d in sim.host.iolatency["sda"].grp(sim.cgroups.groups["bulk"])
              .depth_series]
    assert depths[:3] == [None, 8, 4]
    sim, _ = _protected_run({"io.latency": "sda target=5000"}, duration="4s")
    depths = [d for _, d in sim.host.iolatency["sda"].grp(sim.cgroups.groups["bulk"])
              .depth_series]
    assert depths == [None]


def test_results_and_pressure_of_a_cut_group():
    # 8 in flight: fewer than nr_requests (16), so bulk never sleeps for a tag
    sim, outcome = _protected_run(duration="4s", bulk_depth=8)
    from blksim.sim.results import cgroup_figures
    figs = cgroup_figures(sim.cgroups, sim.pressure, outcome.sim_time, sim.host.iolatency)
    lat = figs["bulk"]["io_latency"]["sda"]
    assert set(lat) >= {"depth", "avg_lat", "win", "depth_series"}
    assert figs["prot"]["io_latency"]["sda"]["win"] == 160        # 16 x 10 ms, in ms
    assert "io_latency" not in figs["/"]
    # bulk's libaio submitter waits for its I/O idle, but sleeps in io.latency's wait
    # queue in io_schedule: its group's io.pressure shows it
    assert figs["bulk"]["io_pressure"]["some"]["total_us"] > 100_000
    base, out2 = _unprotected()
    base_figs = cgroup_figures(base.cgroups, base.pressure, out2.sim_time)
    assert base_figs["bulk"]["io_pressure"]["some"]["total_us"] == 0


def _unprotected():
    jobs = [{"name": "prot", "rw": "randread", "ioengine": "psync", "cgroup": "prot",
             "number_ios": 200},
            {"name": "bulk", "rw": "randread", "iodepth": 8, "ioengine": "libaio",
             "cgroup": "bulk"}]
    raw = raw_config({"prot": {}, "bulk": {}}, jobs, duration="4s")
    raw["device"] = {"service": "fixed", "service_time": "5ms", "queue_depth": 32}
    raw["queue"].update(nr_requests=16, rotational=1)
    sim = Simulation(resolve(raw, "t.toml"))
    return sim, sim.run()


def test_without_io_latency_no_policy_is_added():
    sim, _ = _unprotected()
    assert sim.host.iolatency == {}
    from blksim.block.mq.rq_qos import RQ_QOS_LATENCY
    assert sim.host.disks["sda"].rq_qos.get(RQ_QOS_LATENCY) is None
