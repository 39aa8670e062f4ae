"""blk-iocost (block/mq/iocost*.py): io.weight, io.cost.qos, io.cost.model; weights divide
the device, donation, vrate's bounds and direction, hand-traced costs and steps."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.test_cgroup import error_of, raw_config
from blksim.block.mq.iocost import Ioc
from blksim.block.mq.iocost_params import (VTIME_PER_SEC, VTIME_PER_USEC, WEIGHT_ONE,
                                           IocostDevice, calc_lcoefs, parse_model,
                                           period_us)
from blksim.block.mq.iocost_period import adjust_vrate, next_busy_level
from blksim.block.request import REQ_OP_DISCARD, Bio
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation

#: the 5 ms fixed-service device of raw_config, modelled exactly: 200 I/Os a second
MODEL = ("sda ctrl=user model=linear rbps=400000000 rseqiops=200 rrandiops=200 "
         "wbps=400000000 wseqiops=200 wrandiops=200")


def _run(groups, jobs, kernel="6.6", duration="10s"):
    sim = Simulation(resolve(raw_config(groups, jobs, kernel=kernel, duration=duration),
                             "t.toml"))
    sim.run()
    done: dict = {}
    for p in sim.processes:
        job = p.name.split(".")[0]           # a job's processes are "a.0", "a.1", ...
        done[job] = done.get(job, 0) + p.issued - p.outstanding
    return sim, done


def _saturating(name, numjobs=4, **extra):
    return {"name": name, "rw": "randread", "iodepth": 4, "ioengine": "libaio",
            "cgroup": name, "numjobs": numjobs, **extra}


# --------------------------------------------------------------------- proportional

@pytest.mark.parametrize("kernel", ["6.6", "5.4"])
def test_weights_divide_the_device_in_proportion_under_equal_demand(kernel):
    groups = {"io.cost.qos": "sda enable=1", "io.cost.model": MODEL,
              "a": {"io.weight": "default 100"}, "b": {"io.weight": 200},
              "c": {"io.weight": "sda 300"}}
    sim, done = _run(groups, [_saturating(n) for n in "abc"], kernel)
    total = sum(done.values())
    assert total > 0.9 * 200 * 10                 # the device stays busy
    for name, weight in zip("abc", (100, 200, 300)):
        assert done[name] / total == pytest.approx(weight / 600, rel=0.10)
    # the root's io.stat line carries cost.vrate (5.10+), every group cost.usage (µs)
    stat = sim.host.disks["sda"].iocost.io_stat()
    if kernel == "6.6":
        assert 1 <= stat["/"]["cost.vrate"] <= 10000
        # usage is device time at the model's rate: c's is about half the run's
        assert stat["c"]["cost.usage"] == pytest.approx(0.5 * stat["/"]["cost.usage"],
                                                        rel=0.1)
    else:
        assert stat == {}                         # 5.4 prints no cost.* figures


@pytest.mark.parametrize("kernel", ["6.6", "5.4"])
def test_a_group_that_does_not_use_its_share_donates_it(kernel):
    # "a" (weight 300 of 400: 75 %) asks for ~10 % of the device; "b" (25 %) for all
    groups = {"io.cost.qos": "sda enable=1 ctrl=user max=100", "io.cost.model": MODEL,
              "a": {"io.weight": 300}, "b": {"io.weight": 100}}
    light = {"name": "a", "rw": "randread", "iodepth": 1, "ioengine": "psync",
             "cgroup": "a", "thinktime": "45ms"}
    sim, done = _run(groups, [light, _saturating("b")], kernel, duration="6s")
    ioc = sim.host.disks["sda"].iocost
    a = ioc.groups[sim.cgroups.groups["a"]]
    b = ioc.groups[sim.cgroups.groups["b"]]
    hwa_b, hwi_b = ioc.current_hweight(b)
    assert hwa_b == WEIGHT_ONE // 4
    assert a.inuse < a.active                     # a gave weight away
    assert hwi_b > 2 * hwa_b                      # b's share rose above its 25 %
    # vrate may not pass 100 % (max=100): b's service is a's leftover, not vrate's
    assert done["b"] > 0.75 * 200 * 6


# --------------------------------------------------------------------- vrate

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lo=st.integers(1, 100), hi=st.integers(100, 400),
       rpct=st.sampled_from([0, 50, 90, 99]), rlat=st.integers(1000, 200_000),
       numjobs=st.integers(1, 4), depth=st.integers(1, 8),
       kernel=st.sampled_from(["6.6", "5.10"]))
def test_vrate_stays_within_min_and_max(lo, hi, rpct, rlat, numjobs, depth, kernel):
    groups = {"io.cost.qos": f"sda enable=1 rpct={rpct} rlat={rlat} min={lo} max={hi}",
              "io.cost.model": MODEL, "a": {"io.weight": 50}, "b": {}}
    jobs = [{"name": n, "rw": "randrw", "iodepth": depth, "ioengine": "libaio",
             "cgroup": n, "numjobs": numjobs} for n in "ab"]
    sim, _ = _run(groups, jobs, kernel, duration="2s")
    series = sim.host.disks["sda"].iocost.vrate_series
    assert series
    for _t, vrate, _busy in series:
        assert lo <= vrate <= hi


def _vrate_run(qos, jobs, duration="3s"):
    groups = {"io.cost.qos": qos, "io.cost.model": MODEL, "a": {}, "b": {}}
    sim, _ = _run(groups, jobs, duration=duration)
    return sim.host.disks["sda"].iocost


def test_vrate_falls_while_latencies_miss_their_target():
    # 16 reads queued on a 5 ms device wait far longer than 1 ms: every period misses
    ioc = _vrate_run("sda enable=1 rpct=50 rlat=1000 wpct=50 wlat=1000 min=20",
                     [_saturating("a"), _saturating("b")])
    rates = [v for _t, v, _b in ioc.vrate_series]
    # (a 12 ms period with no completion meets its targets: busy_level drops to 0 or
    # -1 now and then, which moves nothing: vrate_adj_pct[0..3] is 0)
    assert rates == sorted(rates, reverse=True)
    assert rates[-1] < 50


def test_vrate_rises_while_groups_are_short_and_latencies_are_met():
    # one psync reader per group: no queue, 5 ms reads well under a 1 s target; the
    # model says the device does 100 I/Os a second, so the groups are short of budget
    slow = MODEL.replace("rrandiops=200", "rrandiops=100")
    groups = {"io.cost.qos": "sda enable=1 rpct=90 rlat=100000", "io.cost.model": slow,
              "a": {}, "b": {}}
    jobs = [{"name": n, "rw": "randread", "ioengine": "psync", "cgroup": n} for n in "ab"]
    sim, _ = _run(groups, jobs, duration="5s")
    series = sim.host.disks["sda"].iocost.vrate_series     # 200 ms periods
    rates = [v for _t, v, _b in series]
    assert all(b < 0 for _t, _v, b in series)
    assert rates == sorted(rates) and rates[-1] > 125


def test_busy_level_and_vrate_step_hand_traced():
    thr = 1_000_000 - 900_000                         # rpct=90: 10 % may miss
    # tags waited for 6 % of the period: busy, from 0 to 1
    assert next_busy_level(0, 6, [0, 0], thr, thr, 0, False) == 1
    # 11 % of reads missed: busy 3 -> 4
    assert next_busy_level(3, 0, [110_000, 0], thr, thr, 0, False) == 4
    # met with a 25 % margin (<= 7.5 % missed, rq_wait <= 3 %), groups short: -1
    assert next_busy_level(4, 3, [75_000, 0], thr, thr, 2, False) == -1
    assert next_busy_level(-2, 0, [0, 0], thr, thr, 2, True) == -2   # lagging: hold
    assert next_busy_level(-2, 0, [0, 0], thr, thr, 0, False) == 0   # nobody short
    assert next_busy_level(5, 4, [0, 0], thr, thr, 2, False) == 0    # in the margin
    v, lo, hi = VTIME_PER_USEC, VTIME_PER_USEC // 100, VTIME_PER_USEC * 100
    assert v == 137438
    assert adjust_vrate(v, 3, lo, hi) == v                       # vrate_adj_pct[3] = 0
    assert adjust_vrate(v, 4, lo, hi) == 136064                  # -1 %: ceil(136063.62)
    assert adjust_vrate(v, -20, lo, hi) == 140187                # +2 %: ceil(140186.76)
    assert adjust_vrate(v, 48, lo, hi) == 126443                 # -8 %: ceil(126442.96)
    assert adjust_vrate(v, 5, 2 * v, hi) == 142935               # below min: +4 %, floor
    assert adjust_vrate(v, 5, lo, v // 2) == 131940              # above max: -4 % a period
    assert adjust_vrate(v, 5, lo, v - 10) == v - 10              # ... not past max


# --------------------------------------------------------------------- the cost model

def _ioc(model: str, kernel="6.6") -> Ioc:
    dev = IocostDevice(enable=True)
    assert parse_model(model.split(), dev) is None
    return Ioc(dev, "sda", 32, False, kernel)


class _Group:
    cursor = 0


def _bio(sector, nr_sectors, write=False, op=None):
    bio = Bio(0, sector, nr_sectors, write, True, 1)
    if op is not None:
        bio.op = op
    return bio


def test_linear_model_costs_hand_traced():
    # 10000 pages/s, 1000 sequential and 100 random I/Os a second (reads)
    ioc = _ioc("ctrl=user rbps=40960000 rseqiops=1000 rrandiops=100 wbps=4096000 "
               "wseqiops=100 wrandiops=10")
    page, seqio, randio = calc_lcoefs(40960000, 1000, 100)
    assert page == 13743896                       # ceil(2^37 / 10000)
    assert seqio == 137438954 - page              # ceil(2^37 / 1000) - page
    assert randio == 1374389535 - page            # ceil(2^37 / 100) - page
    g = _Group()
    # the group's first bio: no cursor, sequential; one page
    assert ioc.bio_cost(_bio(0, 8), g, False) == seqio + page
    assert (seqio + page) * 1000 // VTIME_PER_SEC == 1      # 1 ms of device time
    g.cursor = 8
    assert ioc.bio_cost(_bio(8, 64), g, False) == seqio + 8 * page
    # 4096 pages away is still sequential, 4097 random
    assert ioc.bio_cost(_bio(8 + 4096 * 8, 8), g, False) == seqio + page
    assert ioc.bio_cost(_bio(8 + 4097 * 8, 8), g, False) == randio + page
    # a partial page counts as one; a merge pays its pages only
    assert ioc.bio_cost(_bio(1 << 30, 1), g, False) == randio + page
    assert ioc.bio_cost(_bio(1 << 30, 16), g, True) == 2 * page
    # writes use the write coefficients; discards and (5.10+) empty bios cost nothing
    wpage, wseq, _ = calc_lcoefs(4096000, 100, 10)
    assert ioc.bio_cost(_bio(8, 8, write=True), g, False) == wseq + wpage
    assert ioc.bio_cost(_bio(8, 8, op=REQ_OP_DISCARD), g, False) == 0
    assert ioc.bio_cost(_bio(8, 0, write=True), g, False) == 0
    assert _ioc("ctrl=user wbps=4096000 wseqiops=100", "5.4").bio_cost(
        _bio(8, 0, write=True), g, False) == wseq + wpage     # 5.4: one page


def test_period_from_the_latency_target():
    assert period_us((0, 250_000, 0, 250_000, 0, 0)) == 500_000          # HDD: 2x
    assert period_us((950_000, 10_000, 0, 5_000, 0, 0)) == 20_000        # p95: 2x
    assert period_us((500_000, 10_000, 0, 5_000, 0, 0)) == 100_000       # p50: 10x
    assert period_us((0, 100, 0, 100, 0, 0)) == 1000                     # at least 1 ms
    assert period_us((0, 900_000, 0, 0, 0, 0)) == 1_000_000              # at most 1 s


def _user_qos_ioc(kernel="6.6") -> Ioc:
    """An Ioc with a user model (a 4 KiB read 1 ms random, 0.1 ms a page sequential) and
    user QoS latencies of 10 ms: a 20 ms period, a budget of 10 ms."""
    ioc = _ioc("ctrl=user rbps=40960000 rseqiops=1000 rrandiops=100", kernel)
    ioc.settings.qos_user = True
    ioc.settings.qos = {"rlat": 10_000, "wlat": 10_000}      # period 20 ms, budget 10 ms
    ioc.user_qos = True
    ioc.refresh_params(0, force=True)
    return ioc


class _CgA:
    """A cgroup ``a`` right under the root, with no io.weight of its own."""
    parent = type("Root", (), {"parent": None})()
    io_weight = {}
    name = "a"


def test_a_bio_over_budget_waits_until_vnow_covers_it():
    ioc = _user_qos_ioc()
    cg = _CgA()
    # the starting budget is half a period at vrate 100 %: 10000 µs x 137438 (vtime per
    # µs, truncated) = 1374380000; nine sequential 1-page reads of 137438954 (1 ms) fit,
    # the tenth is 9540 short: it waits ceil(9540 / 137438) = 1 µs, plus the timer's
    # slack of 1 % of the period (200 µs)
    for i in range(9):
        bio = _bio(8 * i, 8)
        bio.cgroup = cg
        assert ioc.throttle(bio, 0.0)
    bio = _bio(72, 8)
    bio.cgroup = cg
    bio.id = 99
    assert not ioc.throttle(bio, 0.0)
    assert ioc.waiting == 1
    due = ioc.groups[cg].wait_due
    assert due == pytest.approx(0.000201, abs=1e-9)
    assert ioc.timer_fired(due) == [bio]
    assert ioc.waiting == 0


# --------------------------------------------------------------------- configuration

def test_settings_are_written_back_and_read_again_identically():
    groups = {"io.cost.qos": ["sda enable=1 rpct=95.5 rlat=5000 min=50.25 max=300"],
              "io.cost.model": MODEL,
              "a": {"io.weight": ["default 50", "sda 400"]}, "b": {"io.weight": 7}}
    cfg = resolve(raw_config(groups), "t.toml")
    tables = cfg.cgroups.tables()
    assert tables["io.cost.qos"] == ["sda enable=1 ctrl=user rpct=95.50 rlat=5000 "
                                     "min=50.25 max=300.00"]
    assert tables["a"] == {"io.weight": ["default 50", "sda 400"]}
    again = resolve(raw_config(tables), "t.toml").cgroups
    assert again.iocost == cfg.cgroups.iocost
    assert [s.io_weight for s in again.groups] == [{"default": 50, "sda": 400},
                                                   {"default": 7}]
    dev = again.iocost["sda"]
    assert dev.qos == {"rpct": 955_000, "rlat": 5000, "min": 502_500, "max": 3_000_000}


def test_ctrl_auto_takes_the_device_class_and_drops_given_values():
    cfg = resolve(raw_config({"io.cost.qos": "sda rlat=5 ctrl=auto enable=1"}), "t.toml")
    dev = cfg.cgroups.iocost["sda"]
    assert dev.enable and not dev.qos_user and dev.qos == {}
    assert cfg.cgroups.tables()["io.cost.qos"] == ["sda enable=1 ctrl=auto"]


@pytest.mark.parametrize("groups,expected", [
    ({"db": {"io.cost.qos": "sda enable=1"}}, "io.cost.qos is a file of the root only"),
    ({"io.weight": "default 100"}, "the root has no io.weight"),
    ({"db": {"io.weight": 0}}, "a weight is a whole number from 1 to 10000"),
    ({"db": {"io.weight": "sda 10001"}}, "a weight is a whole number from 1 to 10000"),
    ({"db": {"io.weight": "sdz 100"}}, "with a disk of the run"),
    ({"db": {"io.weight": "sda"}}, "expected \"DEVICE N\" or \"DEVICE default\""),
    ({"io.cost.qos": "sda enable=1 rpct=101"}, "rpct must be a percentage from 0 to 100"),
    ({"io.cost.qos": "sda enable=x"}, "enable must be a whole number"),
    ({"io.cost.qos": "sda rlat=1.5"}, "rlat must be a whole number of microseconds"),
    ({"io.cost.qos": "sda min=200 max=100"}, "min 200% is above max 100%"),
    ({"io.cost.qos": "sda ctrl=maybe"}, "ctrl must be auto or user"),
    ({"io.cost.qos": "sda latency=5"}, "unknown key 'latency'"),
    ({"io.cost.qos": "sdz enable=1"}, "'sdz' is not a disk of the run"),
    ({"io.cost.qos": 5}, "expected \"DEVICE KEY=VALUE ...\" lines"),
    ({"io.cost.model": "sda model=quadratic"}, "the only model is linear"),
    ({"io.cost.model": "sda rbps=-1"}, "rbps must be a whole number"),
    ({"io.cost.model": "sda rbps"}, "expected KEY=VALUE"),
])
def test_bad_iocost_input_is_one_line_naming_the_key(groups, expected):
    text = error_of(raw_config(groups))
    assert text.startswith("t.toml: ")
    assert expected in text


def test_5_4_ignores_a_bad_enable_number_as_its_kernel_does():
    cfg = resolve(raw_config({"io.cost.qos": "sda enable=x"}, kernel="5.4"), "t.toml")
    assert cfg.cgroups.iocost["sda"].enable is False


def test_without_enable_no_policy_is_added_and_wbt_stays():
    groups = {"io.cost.model": MODEL, "a": {"io.weight": 200}}
    sim, _ = _run(groups, [_saturating("a", numjobs=1)], duration="0.2s")
    q = sim.host.disks["sda"]
    assert q.iocost is None and q.wbt is not None and q.wbt.enabled
    sim, _ = _run({**groups, "io.cost.qos": "sda enable=1"},
                  [_saturating("a", numjobs=1)], duration="0.2s")
    q = sim.host.disks["sda"]
    assert q.iocost is not None and not q.wbt.enabled          # wbt_disable_default


# --------------------------------------------------------------------- debt's delay

def _debtor(kernel):
    """A group whose 4 KiB read (1 ms) went, then an 8 MiB bio merged into its request
    (2048 pages x 0.1 ms = 204.8 ms of device time): over budget, so debt."""
    ioc = _user_qos_ioc(kernel)
    first = _bio(0, 8)
    first.cgroup, first.pid = _CgA, 7
    went = ioc.throttle(first, 0.0)

    class Rq:
        sector, nr_sectors, bios = 0, 8, [first]
    merged = _bio(8, 16384)
    merged.cgroup, merged.pid, merged.id = _CgA, 7, 5
    ioc.merge(Rq, merged, 0.0)
    return ioc, ioc.groups[_CgA], went


def test_a_debtors_submitter_sleeps_for_the_delay_6_6():
    ioc, g, went = _debtor("6.6")
    assert went                                    # the first read fit the budget
    assert g.abs_vdebt == 2048 * 13743896          # the merge's pages, as debt
    # overage: vtime (vnow - 10 ms budget + 1 ms) + debt - vnow = 26910557962 vtime,
    # 979 % of the 20 ms period (2748760000 vtime): 250 + 249750 x 479 // 24500 µs
    assert g.delay == 5132
    assert ioc.throttle_delay(99, 0.0) == 0.0      # another task was not marked
    assert ioc.throttle_delay(7, 0.0) == pytest.approx(0.005132)
    assert ioc.throttle_delay(7, 0.0) == 0.0       # the mark is used up


def test_a_debtors_submitter_sleeps_for_the_delay_5_4():
    ioc, g, went = _debtor("5.4")
    # 5.4: a new group's vtime is vnow (ioc_pd_init), so the first read waits and the
    # merge (into a request not yet charged) is all debt; the delay is the overage's
    # time at vrate: ceil(28147499008 / 137438) = 204802 µs, past the 10 ms margin
    assert not went
    assert ioc.throttle_delay(7, 0.0) == pytest.approx(0.204802)


def test_flush_stat_carries_nested_deltas_up_children_first():
    """``iocg_flush_stat`` (5.10-6.6) on a tree root -> a -> (a/x, a/y) and root -> b,
    with x, y and b active: each leaf's usage delta (abs_vusage at vrate, µs) and its
    other stat deltas reach every ancestor once, a flushed a second time adds nothing,
    and no group stays on the inner walk."""
    from types import SimpleNamespace
    from blksim.block.mq.iocost import IocGroup
    from blksim.block.mq.iocost_period import _flush_stat
    root = IocGroup(None, None, 0, 0)
    a = IocGroup(SimpleNamespace(name="a"), root, 0, 0)
    x = IocGroup(SimpleNamespace(name="a/x"), a, 0, 0)
    y = IocGroup(SimpleNamespace(name="a/y"), a, 0, 0)
    b = IocGroup(SimpleNamespace(name="b"), root, 0, 0)
    rate = VTIME_PER_USEC
    ioc = SimpleNamespace(active=[x, b, y], vtime_base_rate=rate)
    x.abs_vusage, y.abs_vusage, b.abs_vusage = 10 * rate, 20 * rate, 40 * rate
    x.stat[1] = 3                          # x waited 3 µs, b was in debt 5 µs
    b.stat[2] = 5
    _flush_stat(ioc)
    assert [x.stat[0], y.stat[0], b.stat[0]] == [10, 20, 40]
    assert a.stat == [30, 3, 0, 0]
    assert root.stat == [70, 3, 5, 0]
    assert not any(g.in_walk for g in (root, a, x, y, b))
    _flush_stat(ioc)                      # nothing new: nothing moves
    assert a.stat == [30, 3, 0, 0] and root.stat == [70, 3, 5, 0]
    y.abs_vusage += 7 * rate
    _flush_stat(ioc)
    assert a.stat[0] == 37 and root.stat[0] == 77 and a.last_stat == a.stat
