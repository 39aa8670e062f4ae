"""bfq's groups (io.bfq.weight): hierarchical B-WF2Q+ traced by hand from
block/bfq-wf2q.c (5.4-6.6), the io.bfq.weight file as bfq_io_set_weight reads it, and
the share of service groups get end to end."""

from __future__ import annotations

import pytest

from blksim.block.cgroup import Cgroup
from blksim.schedulers.bfq import BfqElevator
from blksim.schedulers.bfq.groups import BfqGroup, count_allocated
from blksim.schedulers.bfq.wf2q import Wf2q
from blksim.sim.cgroup_config import parse_io_bfq_weight
from blksim.sim.config import ConfigError, resolve
from blksim.sim.engine import Simulation
from tests.test_bfq_wf2q import StubBfqd, queue
from tests.test_cgroup import error_of, raw_config

U = 1 << 22          # one sector of service at weight 1, in virtual time


class GroupStub(StubBfqd):
    def on_group_activated(self, group):
        pass


def group(w: Wf2q, name: str, weight: int, parent=None) -> BfqGroup:
    sd = parent.my_sched_data if parent is not None else w.sd
    return BfqGroup(Cgroup(name, None), weight, parent, sd, 0)


def in_group(q, g):
    q.parent = g
    q.sched_data = g.my_sched_data
    return q


def serve_and_requeue(w, q, sectors):
    """What bfq_bfqq_expire does to a queue that stays busy: charge, requeue every level
    (requeue = True), clear the in-service entities, reset the groups' service."""
    w.served(q, sectors, 0)
    w.activate_requeue(q, False, True, requeue=True)
    w.reset_in_service(q)
    q.service = 0
    g = q.parent
    while g is not None:
        g.service = 0
        g = g.parent


def test_hand_traced_selection_of_two_groups_weighing_100_and_300():
    """G1 (weight 100) holds queue A, G2 (300) queue B; both queues weigh 40 and have
    budgets of 100 sectors. Traced from bfq_activate_requeue_entity: A's activation
    gives G1 A's budget (bfq_update_parent_budget) and activates it in the root:
    S = 0, F = 100/100 = 1 (units of 2^22); B's gives G2 F = 100/300 = 1/3, which
    replaces G1 as the root's next-in-service (eligible, earlier finish). B is served
    100 sectors: the root's V grows by 100/400 = 1/4; on requeue G2 restarts at the
    finish its service earned, S = 100/300 = 1/3 > V, F = 2/3: not eligible, so A (G1)
    comes next, V = 1/2. Then G2 is eligible again (S 1/3 <= 1/2) with the earlier
    finish: B, V = 3/4, G2 S = 2/3, F = 1; B again (G1's S = 1 > 3/4), V = 1, G2 S = 1,
    F = 4/3 < G1's F = 2: B, V = 5/4; G2's S = 4/3 > 5/4: A. Three slots of B per slot
    of A: the groups' weights, whatever the queues weigh."""
    bfqd = GroupStub()
    w = Wf2q(bfqd)
    g1, g2 = group(w, "g1", 100), group(w, "g2", 300)
    a, b = in_group(queue(1), g1), in_group(queue(2), g2)
    w.activate_requeue(a, False, False)
    assert (g1.budget, g1.start, g1.finish) == (100, 0, 100 * U // 100)
    assert w.sd.next_in_service is g1
    w.activate_requeue(b, False, False)
    assert (g2.start, g2.finish) == (0, 100 * U // 300)
    assert w.sd.next_in_service is g2
    st = w.tree_of(g1)
    assert st.wsum == 400
    order, vtimes = [], []
    for _ in range(7):
        q = w.get_next_queue()
        order.append("AB"[q is b])
        serve_and_requeue(w, q, 100)
        vtimes.append(st.vtime)
    assert "".join(order) == "BABBBAB"
    assert vtimes[:5] == [k * 100 * U // 400 for k in range(1, 6)]
    # G2 after its first slot: S = its service over its weight, F one budget later
    assert g1.start == 2 * (100 * U // 100)


def test_group_leaves_the_root_when_its_last_queue_empties_and_returns_from_idle_tree():
    """bfq_deactivate_entity: the queue's deactivation empties G1, so G1 is deactivated
    too, into the root's idle tree (its finish is ahead of V); reactivated before V
    passes it, it starts at its old finish (__bfq_activate_entity)."""
    bfqd = GroupStub()
    w = Wf2q(bfqd)
    g1, g2 = group(w, "g1", 100), group(w, "g2", 100)
    a, b = in_group(queue(1), g1), in_group(queue(2), g2)
    w.activate_requeue(a, False, False)
    w.activate_requeue(b, False, False)
    q = w.get_next_queue()
    assert q is a                        # equal finishes: the first filed
    w.served(a, 100, 0)
    w.deactivate(a, True, True)          # a empties while in service
    w.reset_in_service(a)
    assert g1.tree == "idle" and g1.finish == 100 * U // 100
    assert w.sd.next_in_service is g2
    a.budget = 100
    w.activate_requeue(a, False, False)
    assert g1.tree == "active" and g1.start == 100 * U // 100


def test_request_over_limit_scales_the_limit_by_each_group_share_first():
    """bfqq_request_over_limit (6.1-6.6), traced: limit 12 (nr_requests), G1 (100) and G2
    (500) active in the root (wsum 600), queue A (weight 40) alone in G1. From the top:
    G1's share is round(12 * 100 / 600) = 2; A's is round(2 * 40 / 40) = 2. With two
    requests allocated by A (counted on A and on G1, bfqq_request_allocated) A is over
    the limit, although alone in its group it would have the whole 12; G2's queue B,
    with round(12 * 500 / 600) = 10, is not. A queue whose group is off its tree is
    never over the limit."""
    bfqd = GroupStub()
    w = Wf2q(bfqd)
    g1, g2 = group(w, "g1", 100), group(w, "g2", 500)
    a, b = in_group(queue(1), g1), in_group(queue(2), g2)
    w.activate_requeue(a, False, False)
    w.activate_requeue(b, False, False)
    assert w.tree_of(g1).wsum == 600
    count_allocated(a, 1)
    assert (a.nr_allocated, g1.nr_allocated) == (1, 1)
    assert not BfqElevator.request_over_limit(a, 12)
    count_allocated(a, 1)
    assert g1.nr_allocated == 2 and g2.nr_allocated == 0
    assert BfqElevator.request_over_limit(a, 12)
    for _ in range(9):
        count_allocated(b, 1)
    assert not BfqElevator.request_over_limit(b, 12)
    count_allocated(b, 1)
    assert BfqElevator.request_over_limit(b, 12)
    count_allocated(a, -1)
    assert g1.nr_allocated == 1 and not BfqElevator.request_over_limit(a, 12)
    w.deactivate(b, False, False)
    assert not g2.on_st_or_in_serv and not BfqElevator.request_over_limit(b, 12)


# ------------------------------------------------------------------- io.bfq.weight

NAMES = {"sda": "sda", "sdb": "sdb", "vol": "dm-0", "dm-0": "dm-0"}
DISKS = {"sda", "sdb"}


@pytest.mark.parametrize("value,expected", [
    (200, {"default": 200, "devices": {}}),
    ("default 300\nsda 50", {"default": 300, "devices": {"sda": 50}}),
    # a default written after a device's weight replaces it (bfq_io_set_weight_legacy
    # passes dev_weight 0 to bfq_group_set_weight on every blkg)
    (["sda 50", "default 300"], {"default": 300, "devices": {}}),
    (["sda 50", "sda default"], {"default": 100, "devices": {}}),
    # "DEVICE default" restores the weight the group had on that device before any I/O
    (["sda 50", "default 20", "sda default"], {"default": 20, "devices": {"sda": 100}}),
    ("1000", {"default": 1000, "devices": {}}),
])
def test_io_bfq_weight_lines_are_writes_in_order(value, expected):
    assert parse_io_bfq_weight(value, "w", NAMES, DISKS) == expected


@pytest.mark.parametrize("value,expected", [
    ("0", "the weight must be from 1 to 1000 (ERANGE), found 0"),
    ("default 1001", "the weight must be from 1 to 1000 (ERANGE), found 1001"),
    ("sda 0", "the weight must be from 1 to 1000 (ERANGE), found 0"),
    ("sda heavy", "expected \"N\", \"default N\", \"DEVICE N\""),
    ("sda 1 2", "expected \"N\", \"default N\", \"DEVICE N\""),
    ("sdz 100", "'sdz' is not a disk of the run; valid: sda, sdb"),
    ("vol 100", "'vol' is a device-mapper volume, which has no I/O scheduler"),
    (True, "expected a weight (1..1000) or lines"),
])
def test_bad_io_bfq_weight_is_one_line_naming_the_key(value, expected):
    with pytest.raises(ConfigError) as exc:
        parse_io_bfq_weight(value, "t.toml: [cgroups.'db'] io.bfq.weight", NAMES, DISKS)
    text = str(exc.value)
    assert "\n" not in text and "io.bfq.weight" in text and expected in text


def test_io_bfq_weight_in_a_configuration_and_its_resolved_form():
    text = error_of(raw_config({"db": {"io.bfq.weight": "sda 0"}}))
    assert text.startswith("t.toml: [cgroups.'db'] io.bfq.weight: 'sda 0'")
    # io.weight is iocost's file: bfq does not answer to it (no line 5.4-6.6 has the symlink)
    iocost_only = resolve(raw_config({"db": {"io.weight": 5}}), "t.toml").cgroups.build()
    assert iocost_only.groups["db"].bfq_weight is None
    assert iocost_only.groups["db"].io_weight == {"default": 5}
    cfg = resolve(raw_config({"db": {"io.bfq.weight": ["default 300", "sda 50"]}}), "t.toml")
    table = cfg.cgroups.tables()
    assert table == {"db": {"io.bfq.weight": ["default 300", "sda 50"]}}
    again = resolve(raw_config(table), "t.toml").cgroups
    assert again.tables() == table
    tree = again.build()
    assert tree.groups["db"].bfq_weight_on("sda") == 50
    assert tree.groups["db"].bfq_weight_on("sdb") == 300


# ---------------------------------------------------------------- end to end shares

def run_groups(weights, kernel="6.6", duration="10s", device=None, runtime=None,
               random_depth=None):
    """One reader per group under bfq, each in its own 5 GiB region: a psync 64 KiB
    sequential reader, or (``random_depth``) a libaio O_DIRECT 4 KiB random reader
    keeping that many I/Os in flight. Returns (bytes read per group from io.stat,
    sectors bfq charged per group: ``service_total``, time charges included), both as
    fractions, and the elevator."""
    groups = {f"g{i}": {"io.bfq.weight": w} for i, w in enumerate(weights)}
    jobs = []
    for i in range(len(weights)):
        job = {"name": f"j{i}", "rw": "read", "bs": "64k", "ioengine": "psync",
               "cgroup": f"g{i}", "offset": f"{i * 5}g", "size": "4g"}
        if random_depth:
            job.update(rw="randread", bs="4k", ioengine="libaio", iodepth=random_depth,
                       direct=1)
        if runtime and i in runtime:
            job["runtime"] = runtime[i]
        jobs.append(job)
    raw = {"run": {"seed": 1, "kernel": kernel, "duration": duration},
           "device": device or {"service": "fixed", "service_time": "1ms"},
           "queue": {"scheduler": "bfq"}, "job": jobs, "cgroups": groups}
    sim = Simulation(resolve(raw, "t.toml"))
    sim.run()
    cgroups = [sim.cgroups.groups[f"g{i}"] for i in range(len(weights))]
    got = [sim.cgroups.io_stat(cg)["sda"]["rbytes"] for cg in cgroups]
    elevator = next(iter(sim.host.disks.values())).elevator
    charged = [elevator.groups.groups[cg].service_total for cg in cgroups]
    return ([g / sum(got) for g in got], [c / sum(charged) for c in charged], elevator)


def shares(weights, kernel="6.6", duration="10s", device=None, runtime=None):
    """io.stat's bytes read per group (fractions), one psync 64 KiB sequential reader
    per group, under bfq."""
    return run_groups(weights, kernel, duration, device, runtime)[0]


@pytest.mark.parametrize("kernel", ["5.4", "6.6"])
def test_equal_demand_divides_service_in_the_weights_proportion(kernel):
    """Three groups weighing 100, 200, 300 each keep a fixed-service device busy with
    a sequential reader: 1/6, 1/3, 1/2 of the bytes, within 10 %."""
    got = shares([100, 200, 300], kernel)
    for share, want in zip(got, (1 / 6, 2 / 6, 3 / 6)):
        assert share == pytest.approx(want, rel=0.10)


@pytest.mark.parametrize("kernel", ["5.4", "6.6"])
def test_bfq_charges_in_the_weights_proportion_on_a_fixed_service_device(kernel):
    """bfq's own measure (sectors charged, bfq_bfqq_served) divides as the weights on
    the 1 ms device, within 10 %, like the bytes: no queue is slow or timed out."""
    got, charged, _ = run_groups([100, 200, 300], kernel)
    for share, want in zip(charged, (1 / 6, 2 / 6, 3 / 6)):
        assert share == pytest.approx(want, rel=0.10)


ROTATIONAL = {"drive": "cheetah15k4"}


@pytest.mark.parametrize("duration", ["10s", "30s"])
def test_equal_demand_on_a_rotational_disk_is_not_proportional(duration):
    """On a 15k rpm disk (no read-ahead: about a rotation between 64 KiB reads) the
    kernel's own rules keep bfq from dividing by the weights, in bytes or in its own
    charged sectors (docs/cgroups.md, "Why the rotational shares differ"): the
    heaviest group's queue stays soft real-time raised (its last request of each slot
    is injected while another queue idles, so it empties out of service and
    bfq_bfqq_softrt_next_start is never recomputed) and preempts lighter groups
    (bfq_bfqq_higher_class_or_weight); the lightest group's queue, preempted with its
    request in flight, is chosen again empty and expires for no more requests (it is
    not continuously backlogged, B-WF2Q+'s condition); the middle group's queue, once
    its raising ends, cannot use a maximum budget within timeout_sync and is charged
    for time (bfq_bfqq_charge_time). Asserted: the shares the model gives (6.6,
    +-0.02), and the mechanisms."""
    got, charged, elevator = run_groups([100, 200, 300], "6.6", duration,
                                        device=ROTATIONAL)
    if duration == "10s":
        assert got == pytest.approx([0.143, 0.342, 0.514], abs=0.02)
        assert charged == pytest.approx([0.143, 0.342, 0.515], abs=0.02)
    else:
        assert got == pytest.approx([0.171, 0.223, 0.606], abs=0.02)
        assert charged == pytest.approx([0.133, 0.395, 0.472], abs=0.02)
        # the middle group is charged for time: far more sectors than it read
        assert charged[1] > got[1] + 0.15
    heavy = [q for q in elevator.queues.values() if getattr(q, "pid", 0) == 1002][0]
    assert heavy.wr_coeff == elevator.bfq_wr_coeff * 100       # still soft real-time


@pytest.mark.parametrize("kernel,got_bytes,got_charged", [
    ("5.4", [0.385, 0.615], [0.183, 0.817]),
    ("6.6", [0.498, 0.502], [0.169, 0.831])])
def test_deep_random_readers_short_of_scheduler_tags(kernel, got_bytes, got_charged):
    """Two random readers keeping 4 I/Os in flight each, weights 100 and 500, 30 s on
    the 1 ms device: its queue depth gives nr_requests = 4 scheduler tags for 8 I/Os,
    so a reader sleeps for a tag (blk_mq_get_tag) and the heavy group's queue rarely
    holds more than one request. bfq charges the groups in the weights' proportion
    (both queues are seeky, so slow: charged for the time they hold the device,
    bfq_bfqq_charge_time), within 10 %; the bytes are not: while the heavy queue
    idles for its next request the light one's are injected
    (bfq_choose_bfqq_for_injection), and each freed tag goes to the other reader.
    On 6.6 a map of four one-bit words makes bfqq_request_over_limit's depth of 1 no
    limit (sbitmap_get_shallow caps the bits per word). The model's figures, +-0.01
    charged and +-0.03 bytes: on 5.4 the light group's charged share is 10.1 % over
    1/6 (0.183), on 6.6 within 10 %."""
    got, charged, elevator = run_groups([100, 500], kernel, "30s", random_depth=4)
    assert elevator.nr_requests == 4
    assert charged == pytest.approx(got_charged, abs=0.01)
    assert charged == pytest.approx([1 / 6, 5 / 6], rel=0.11)
    if kernel == "6.6":
        assert charged == pytest.approx([1 / 6, 5 / 6], rel=0.10)
    assert got == pytest.approx(got_bytes, abs=0.03)


@pytest.mark.parametrize("kernel,got_bytes", [("5.4", [0.170, 0.830]),
                                              ("6.6", [0.215, 0.785])])
def test_deep_random_readers_with_enough_tags(kernel, got_bytes):
    """The same readers with queue_depth 32 (nr_requests 64), 15 s: every I/O reaches
    bfq; charged sectors 1/6 : 5/6 within 10 %, and on 5.4 the bytes too. On 6.6 the
    light group still gets more bytes than its share (0.19 over 30 s): injection while
    the heavy queue idles (its inject limit grows, bfq_update_inject_limit) is
    service outside its slots. Bytes: the model's, +-0.02."""
    got, charged, elevator = run_groups([100, 500], kernel, "15s", random_depth=4,
                                        device={"service": "fixed", "service_time": "1ms",
                                                "queue_depth": 32})
    assert elevator.nr_requests == 64
    assert charged == pytest.approx([1 / 6, 5 / 6], rel=0.10)
    assert got == pytest.approx(got_bytes, abs=0.02)
    if kernel == "5.4":
        assert got == pytest.approx([1 / 6, 5 / 6], rel=0.10)


def test_a_group_that_stops_demanding_donates_its_share():
    """Group 2 (weight 300) reads for 5 s of 10: the others divide the whole device
    100 : 200 once it stops, so over the run they get their shares of the first half
    (1/6, 1/3) plus of the second (1/3, 2/3): 1/4 and 1/2 of the bytes."""
    got = shares([100, 200, 300], runtime={2: "5s"})
    assert got[0] == pytest.approx(1 / 4, rel=0.10)
    assert got[1] == pytest.approx(1 / 2, rel=0.10)
    assert got[1] / got[0] == pytest.approx(2, rel=0.10)
