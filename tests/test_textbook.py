"""The textbook elevators (schedulers/textbook.py): hand-traced classic examples,
SPTF with a fake positioning estimate, the device geometry they find on real
drives, merging hooks, and property checks on random queues."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.disk_models.drive import make_drive
from blksim.disk_models.presets import load_preset
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.block.elevator import Elevator
from blksim.schedulers.textbook import (PSEUDO_CYLINDER_SECTORS, TEXTBOOK_SCHEDULERS,
                                 DeviceGeometry, SptfElevator, TextbookElevator)
from blksim.block.dispatch_queue import DispatchQueue

K = 100   # sectors per cylinder of the fake device: sector = cylinder * K + offset
QUEUE = (98, 183, 37, 122, 14, 124, 65, 67)
HEAD = 53


class FakeRq:
    _next = 0

    def __init__(self, sector: int, nr_sectors: int = 8, write: bool = False) -> None:
        self.sector = sector
        self.nr_sectors = nr_sectors
        self.write = write
        self.sched = None
        self.in_elevator = True
        FakeRq._next += 1
        self.id = FakeRq._next

    def __repr__(self) -> str:
        return f"FakeRq({self.sector})"


class FakeDevice:
    """Cylinder = sector // K on a 200-cylinder disk; the proposed public protocol."""

    cylinders = 200
    capacity = 200 * K

    def __init__(self, positioning=None) -> None:
        self._pos = positioning

    def cylinder_of(self, sector: int) -> int:
        return sector // K

    def positioning_time(self, sector: int, write: bool, now: float) -> float:
        if self._pos is None:   # default: a pure seek-distance estimate
            return float(abs(sector // K))
        return self._pos(sector, write, now)


def make(name: str, device=None, **params) -> TextbookElevator:
    el = TEXTBOOK_SCHEDULERS[name](DispatchQueue(), params)
    el.attach_device(device if device is not None else FakeDevice())
    return el


def drain(el) -> list:
    out = []
    while el.dispatch(0.0):
        out.append(el.dq.popleft())
    assert el.empty() and el.queued() == 0
    return out


def serve(name: str, cylinders=QUEUE, **params):
    el = make(name, **params)
    for c in cylinders:
        el.add(FakeRq(c * K), 0.0)
    order = [rq.sector // K for rq in drain(el)]
    return order, el


# Worked by hand, disk of cylinders 0..199, head at 53 (Silberschatz's example).
# "up" = towards higher cylinders first; SCAN goes to 199 (or 0) before turning;
# C-SCAN's return to the other edge and C-LOOK's jump back count as head movement.
CLASSIC = [
    # name, direction, order, total movement, of which returns
    ("fcfs", None, [98, 183, 37, 122, 14, 124, 65, 67],
     45 + 85 + 146 + 85 + 108 + 110 + 59 + 2, 0),                      # 640
    ("sstf", None, [65, 67, 37, 14, 98, 122, 124, 183],
     12 + 2 + 30 + 23 + 84 + 24 + 2 + 59, 0),                          # 236
    ("scan", 0, [37, 14, 65, 67, 98, 122, 124, 183], 53 + 183, 0),     # 236
    ("scan", 1, [65, 67, 98, 122, 124, 183, 37, 14],
     (199 - 53) + (199 - 14), 0),                                      # 331
    ("look", 1, [65, 67, 98, 122, 124, 183, 37, 14],
     (183 - 53) + (183 - 14), 0),                                      # 299
    ("look", 0, [37, 14, 65, 67, 98, 122, 124, 183],
     (53 - 14) + (183 - 14), 0),                                       # 208
    ("cscan", 1, [65, 67, 98, 122, 124, 183, 14, 37],
     (199 - 53) + 199 + 37, 199),                                      # 382
    ("cscan", 0, [37, 14, 183, 124, 122, 98, 67, 65],
     53 + 199 + (199 - 65), 199),                                      # 386
    ("clook", 1, [65, 67, 98, 122, 124, 183, 14, 37],
     (183 - 53) + (183 - 14) + (37 - 14), 183 - 14),                   # 322
    ("clook", 0, [37, 14, 183, 124, 122, 98, 67, 65],
     (53 - 14) + (183 - 14) + (183 - 65), 183 - 14),                   # 326
]


@pytest.mark.parametrize("name,direction,order,movement,returns", CLASSIC,
                         ids=[f"{c[0]}-{c[1]}" for c in CLASSIC])
def test_classic_queue(name, direction, order, movement, returns):
    params = {"start_cylinder": HEAD}
    if direction is not None:
        params["direction"] = direction
    got, el = serve(name, **params)
    assert got == order
    assert el.head_movement == movement
    assert el.return_movement == returns
    assert el.head == order[-1] and el.dispatched == len(QUEUE)


def test_classic_totals_as_textbooks_give_them():
    assert serve("fcfs", start_cylinder=HEAD)[1].head_movement == 640
    assert serve("sstf", start_cylinder=HEAD)[1].head_movement == 236
    assert serve("scan", start_cylinder=HEAD, direction=0)[1].head_movement == 236


# The routes: the legs the head takes when it does not go straight to the next request.
ROUTES = [
    ("scan", 1, {6: ((199, False), (37, False))}),
    ("scan", 0, {2: ((0, False), (65, False))}),
    ("cscan", 1, {6: ((199, False), (0, True), (14, False))}),
    ("cscan", 0, {2: ((0, False), (199, True), (183, False))}),
    ("clook", 1, {6: ((14, True),)}),
    ("look", 1, {}),
]


@pytest.mark.parametrize("name,direction,routes", ROUTES,
                         ids=[f"{c[0]}-{c[1]}" for c in ROUTES])
def test_routes_reach_the_edge_and_add_up(name, direction, routes):
    order, el = serve(name, start_cylinder=HEAD, direction=direction)
    assert el.routes == routes
    # the head's path, leg by leg, is the textbook count
    at, total = HEAD, 0
    for k, c in enumerate(order):
        for cyl, _returning in el.routes.get(k, ((c, False),)):
            total += abs(cyl - at)
            at = cyl
        assert at == c
    assert total == el.head_movement


class BigDevice(FakeDevice):
    cylinders = 5000
    capacity = 5000 * K


@pytest.mark.parametrize("name,movement", [("fcfs", 13011), ("sstf", 7586), ("scan", 7492),
                                           ("look", 7424), ("cscan", 9917),
                                           ("clook", 9137)])
def test_operating_system_concepts_practice_exercise(name, movement):
    # Silberschatz et al., Operating System Concepts, the practice exercise on a disk of
    # 5,000 cylinders: the head serving 2,150 (previously 1,805: moving up), this queue.
    # Each total is the sum worked by hand from the definitions (FCFS: 81 + 857 + 1084 +
    # 504 + 2256 + 1074 + 1262 + 1167 + 3442 + 1284); C-SCAN's counts its return from
    # 4,999 to 0 (2,849 + 4,999 + 2,069).
    el = make(name, device=BigDevice(), start_cylinder=2150, direction=1) \
        if name not in ("fcfs", "sstf") else make(name, device=BigDevice(),
                                                  start_cylinder=2150)
    for c in (2069, 1212, 2296, 2800, 544, 1618, 356, 1523, 4965, 3681):
        el.add(FakeRq(c * K), 0.0)
    drain(el)
    assert el.head_movement == movement


def test_registry_names_and_protocol():
    assert list(TEXTBOOK_SCHEDULERS) == ["fcfs", "sstf", "scan", "cscan", "look", "clook",
                                         "sptf"]
    for name, cls in TEXTBOOK_SCHEDULERS.items():
        assert issubclass(cls, Elevator) and cls.name == name
        assert cls.wants_device is True and not cls.uses_timers
        el = cls(DispatchQueue())
        assert el.empty() and el.queued() == 0 and el.dispatch(0.0) == 0
        assert el.merge_candidate(FakeRq(0), 0.0) is None
        names = [t.name for t in cls.tunables]
        assert names[0] == "start_cylinder"
        assert ("direction" in names) == (name in ("scan", "cscan", "look", "clook"))


def test_bad_tunables_are_refused():
    with pytest.raises(ValueError, match="direction"):
        TEXTBOOK_SCHEDULERS["scan"](DispatchQueue(), {"direction": 2})
    with pytest.raises(ValueError, match="unknown tunable queue/iosched/direction"):
        TEXTBOOK_SCHEDULERS["sstf"](DispatchQueue(), {"direction": 1})


def test_start_beyond_the_disk_is_the_last_cylinder():
    el = make("look", start_cylinder=5000)
    assert el.head == 199


def test_one_request_per_call_to_the_tail():
    el = make("clook", start_cylinder=3)
    for c in (5, 1, 9):
        el.add(FakeRq(c * K), 0.0)
    marker = FakeRq(0)
    el.dq.append(marker)
    assert el.dispatch(0.0, force=True) == 1
    assert list(el.dq) == [marker, el.dq[1]] and el.dq[1].sector == 5 * K
    assert el.dq.boundary == 5 * K + 8


def test_same_cylinder_in_sector_order_and_sstf_ties_go_to_the_oldest():
    el = make("look", start_cylinder=10)
    rqs = [FakeRq(10 * K + 50), FakeRq(10 * K + 5), FakeRq(10 * K + 20)]
    for rq in rqs:
        el.add(rq, 0.0)
    assert [r.sector for r in drain(el)] == [1005, 1020, 1050]
    el = make("sstf", start_cylinder=50)
    a, b = FakeRq(60 * K), FakeRq(40 * K)
    el.add(a, 0.0)
    el.add(b, 0.0)
    assert drain(el) == [a, b]
    el = make("sstf", start_cylinder=50)
    el.add(b, 0.0)
    el.add(a, 0.0)
    assert drain(el) == [b, a]


def test_look_down_sweep_reads_each_cylinder_upwards():
    el = make("look", start_cylinder=50, direction=0)
    rqs = [FakeRq(30 * K + 70), FakeRq(30 * K + 10), FakeRq(20 * K)]
    for rq in rqs:
        el.add(rq, 0.0)
    assert [r.sector for r in drain(el)] == [3010, 3070, 2000]


def test_arrivals_during_a_sweep():
    # LOOK going up from 50: 60 served, then 55 arrives (behind) and 90 (ahead)
    el = make("look", start_cylinder=50)
    el.add(FakeRq(60 * K), 0.0)
    el.add(FakeRq(10 * K), 0.0)
    el.dispatch(0.0)
    el.add(FakeRq(55 * K), 0.0)
    el.add(FakeRq(90 * K), 0.0)
    assert [r.sector // K for r in [el.dq.popleft()] + drain(el)] == [60, 90, 55, 10]


def test_without_a_device_a_sector_is_its_own_cylinder():
    el = TEXTBOOK_SCHEDULERS["sstf"](DispatchQueue(), {"start_cylinder": 500})
    for s in (100, 900, 480):
        el.add(FakeRq(s), 0.0)
    assert [r.sector for r in drain(el)] == [480, 100, 900]
    assert el.cylinders is None and el.geometry.kind == "sector"
    # SCAN with no known edge turns at the furthest point reached
    el = TEXTBOOK_SCHEDULERS["scan"](DispatchQueue(), {"start_cylinder": 50})
    for s in (60, 10):
        el.add(FakeRq(s), 0.0)
    drain(el)
    assert el.head_movement == 10 + 50


def test_attach_refiles_requests_queued_before():
    el = TEXTBOOK_SCHEDULERS["look"](DispatchQueue(), {"start_cylinder": 0})
    for c in (3, 1, 2):
        el.add(FakeRq(c * K + 99 - c), 0.0)
    el.attach_device(FakeDevice())
    assert [rq.sched.key[0] for rq in el.sort_order()] == [1, 2, 3]
    assert [r.sector // K for r in drain(el)] == [1, 2, 3]


def test_merging_hooks_refile_and_keep_the_earlier_arrival():
    el = make("fcfs", start_cylinder=0)
    a, b, c = FakeRq(5 * K), FakeRq(7 * K), FakeRq(5 * K + 8)
    for rq in (a, b, c):
        el.add(rq, 0.0)
    assert el.latter(a) is c and el.former(c) is a and el.former(a) is None
    assert el.latter(b) is None
    # c absorbs into a (back merge coalescing): a keeps its place, c leaves
    a.nr_sectors += c.nr_sectors
    el.requests_merged(a, c, 0.0)
    assert el.queued() == 2 and c.sched is None
    # b grows at its front into cylinder 6: filed again there, keeps its arrival
    b.sector = 6 * K + 90
    el.merged(b, True, 0.0)
    assert b.sched.key[0] == 6
    assert drain(el) == [a, b]
    # a later request absorbing an earlier one takes its arrival number (FCFS place)
    el = make("fcfs")
    x, y, z = FakeRq(50 * K), FakeRq(10 * K), FakeRq(50 * K - 8)
    for rq in (x, y, z):
        el.add(rq, 0.0)
    z.nr_sectors += x.nr_sectors
    el.requests_merged(z, x, 0.0)
    assert drain(el) == [z, y]


# --- SPTF ------------------------------------------------------------------------

def test_sptf_follows_the_positioning_estimate():
    # a made-up estimate: rotation dominates, by the sector's offset in its cylinder
    est = {c * K + off: off / 100.0 for c, off in ((10, 90), (150, 5), (70, 40), (12, 60))}
    seen = []

    def pos(sector, write, now):
        seen.append((sector, write, now))
        return est[sector]

    el = make("sptf", FakeDevice(pos))
    for s in est:
        el.add(FakeRq(s), 0.0)
    got = []
    while el.dispatch(1.5):
        got.append(el.dq.popleft().sector)
    assert got == [15005, 7040, 1260, 1090]
    assert all(now == 1.5 and write is False for _s, write, now in seen)
    assert el.geometry.positioning_kind == "device"
    # its head movement is counted like the others' (from cylinder 0)
    assert el.head_movement == 150 + 80 + 58 + 2


def test_sptf_takes_a_two_argument_estimate_too():
    class Dev2(FakeDevice):
        def positioning_time(self, rq, now):
            return abs(rq.sector // K - 100)

    el = make("sptf", Dev2())
    for c in (10, 120, 95):
        el.add(FakeRq(c * K), 0.0)
    assert [r.sector // K for r in drain(el)] == [95, 120, 10]


def test_sptf_ties_go_to_the_oldest():
    el = make("sptf", FakeDevice(lambda s, w, n: 1.0))
    rqs = [FakeRq(s * K) for s in (9, 3, 7)]
    for rq in rqs:
        el.add(rq, 0.0)
    assert drain(el) == rqs


def test_sptf_without_an_estimate_is_sstf():
    dev = ServiceLawDevice("fixed", 0.001, capacity=1 << 30)
    el = SptfElevator(DispatchQueue(), {"start_cylinder": 50})
    el.attach_device(dev)
    assert el.geometry.kind == "pseudo" and el.geometry.positioning_kind == "distance"
    S = PSEUDO_CYLINDER_SECTORS
    for c in (80, 45, 10):
        el.add(FakeRq(c * S), 0.0)
    assert [r.sector // S for r in drain(el)] == [45, 80, 10]


# --- geometry of real drives --------------------------------------------------

def test_geometry_of_a_plain_drive():
    drive = make_drive(load_preset("cheetah15k4"), seed=3)
    geo = DeviceGeometry(drive)
    assert geo.kind == "layout" and geo.cylinders == 56625
    assert geo.positioning_kind == "mechanics"
    for lbn in (0, 12345, 5_000_000, drive.capacity - 1):
        assert geo.cylinder_of(lbn) == drive.layout.lbn_to_chs(lbn)[0]


@pytest.mark.parametrize("write", [False, True])
def test_mechanical_estimate_matches_the_drive(write):
    drive = make_drive(load_preset("cheetah15k4"), seed=3)
    geo = DeviceGeometry(drive)
    now = 0.0
    for lbn in (30_000_000, 1_000, 1_100, 70_000_000, 70_000_000 + 789 * 2 + 10):
        rq = FakeRq(lbn, 16, write)
        est = geo.positioning_time(rq, now)
        drive.submit(rq, now)
        b = drive.service_breakdown
        cmd = drive.spec.command_overhead_ms / 1e3
        if not write:   # a write's positioning may also wait for its data on the bus
            assert est == pytest.approx(cmd + b["seek"] + b["rotation"], abs=1e-9)
        now = b["end"]
        drive.pop_completed(now)


def test_geometry_of_a_disksim_drive():
    drive = make_drive(load_preset("hp_c2247a"), seed=1)
    geo = DeviceGeometry(drive)
    assert geo.cylinders == 2051
    assert geo.positioning_kind == "device"
    assert geo.cylinder_of(1_000_000) == drive.layout.lbn_to_chs(1_000_000)[0]
    assert geo.positioning_time(FakeRq(1_000_000), 0.0) > 0.0


def test_start_cylinder_on_a_real_drive():
    el = TEXTBOOK_SCHEDULERS["scan"](DispatchQueue(), {"start_cylinder": 10**6})
    el.attach_device(make_drive(load_preset("cheetah15k4")))
    assert el.head == 56624


# --- properties ------------------------------------------------------------------

ops = st.lists(st.one_of(st.integers(0, 199 * K + 99), st.just(None)), min_size=1,
               max_size=60)


def _run_ops(name, sequence, **params):
    """Add a request per integer, dispatch one per None; then drain. Returns, for
    every dispatch, (chosen rq, the queue just before, head before, direction before)."""
    el = make(name, **params)
    steps = []
    added = []

    def one():
        before = list(el.fifo_order())
        head, up = el.head, getattr(el, "up", None)
        if el.dispatch(0.0):
            steps.append((el.dq.popleft(), before, head, up))

    for item in sequence:
        if item is None:
            one()
        else:
            rq = FakeRq(item)
            added.append(rq)
            el.add(rq, 0.0)
    while not el.empty():
        one()
    return el, added, steps


@settings(max_examples=60, deadline=None)
@given(sequence=ops, name=st.sampled_from(sorted(TEXTBOOK_SCHEDULERS)),
       start=st.integers(0, 199), direction=st.integers(0, 1))
def test_every_request_is_served_once(sequence, name, start, direction):
    params = {"start_cylinder": start}
    if name in ("scan", "cscan", "look", "clook"):
        params["direction"] = direction
    el, added, steps = _run_ops(name, sequence, **params)
    served = [s[0] for s in steps]
    assert sorted(map(id, served)) == sorted(map(id, added))
    assert el.dispatched == len(added) and el.queued() == 0
    # the textbook count never undercounts the distance between consecutive requests
    travel = sum(abs(b.sector // K - a.sector // K) for a, b in zip(served, served[1:]))
    if served:
        travel += abs(served[0].sector // K - start)
    assert el.head_movement >= travel


@settings(max_examples=60, deadline=None)
@given(sequence=ops, start=st.integers(0, 199))
def test_sstf_always_takes_a_nearest_request(sequence, start):
    _el, _added, steps = _run_ops("sstf", sequence, start_cylinder=start)
    for rq, before, head, _up in steps:
        d = abs(rq.sector // K - head)
        assert all(d <= abs(o.sector // K - head) for o in before)


@settings(max_examples=60, deadline=None)
@given(sequence=ops, start=st.integers(0, 199), direction=st.integers(0, 1))
def test_look_never_turns_while_requests_lie_ahead(sequence, start, direction):
    _el, _added, steps = _run_ops("look", sequence, start_cylinder=start, direction=direction)
    for rq, before, head, up in steps:
        c = rq.sector // K
        ahead = [o.sector // K for o in before if (o.sector // K >= head if up
                                                   else o.sector // K <= head)]
        if ahead:   # keep going: the nearest request ahead
            assert c == (min(ahead) if up else max(ahead))
        else:       # turn: the nearest request behind
            assert c == (max(o.sector // K for o in before) if up
                         else min(o.sector // K for o in before))


@settings(max_examples=60, deadline=None)
@given(sequence=ops, start=st.integers(0, 199))
def test_clook_serves_upwards_and_wraps_to_the_lowest(sequence, start):
    _el, _added, steps = _run_ops("clook", sequence, start_cylinder=start)
    for rq, before, head, _up in steps:
        c = rq.sector // K
        ahead = [o.sector // K for o in before if o.sector // K >= head]
        assert c == (min(ahead) if ahead else min(o.sector // K for o in before))
