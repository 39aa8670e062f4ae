"""Service times of `MechanicalDrive`: rotation, transfer, FCFS queueing, determinism."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from blksim.disk_models.base import DeviceError
from blksim.disk_models.drive import make_drive
from blksim.disk_models.presets import load_preset
from blksim.disk_models.spec import DriveSpec


class Rq:
    """The three attributes a device reads, plus an id to check order."""

    __slots__ = ("sector", "nr_sectors", "write", "id")

    def __init__(self, sector, nr_sectors, write=False, id=0):
        self.sector, self.nr_sectors, self.write, self.id = sector, nr_sectors, write, id


# 6000 rpm: one revolution = 10 ms; zone 0 has 100 sectors per track -> 0.1 ms per sector.
TINY = {
    "name": "tiny", "rpm": 6000, "heads": 2, "cylinders": 100,
    "zones": [{"first_cyl": 0, "last_cyl": 49, "sectors_per_track": 100},
              {"first_cyl": 50, "last_cyl": 99, "sectors_per_track": 80}],
    "track_skew_sectors": 10, "cylinder_skew_sectors": 20, "head_switch_ms": 0.5,
    "write_settle_ms": 0.3, "seek": {"form": "table", "points": [[1, 1.0], [99, 10.0]]},
    "command_overhead_ms": 0.1, "completion_overhead_ms": 0.05, "bus_mb_per_s": 100.0,
}
REV = 0.010
SECTOR = REV / 100
BUS = 512 / 100e6
OVERHEAD = 0.15e-3


def tiny(**kw):
    return make_drive(DriveSpec.from_dict(dict(TINY, **kw)), seed=7)


def run_one(drive, rq, now):
    drive.submit(rq, now)
    t = drive.next_event_time()
    assert drive.pop_completed(t) == [rq]
    return t


@pytest.fixture(scope="module")
def c15():
    return load_preset("cheetah15k4")


def test_breakdown_sums_and_components():
    d = tiny()
    t = run_one(d, Rq(0, 1), 0.0)
    b = d.service_breakdown
    parts = b["overhead"] + b["queue"] + b["seek"] + b["rotation"] + b["transfer"] + b["bus"]
    assert parts == pytest.approx(b["total"], abs=1e-12)
    assert b["end"] == t and b["seek"] == 0.0  # head starts at cylinder 0, head 0
    assert b["transfer"] == pytest.approx(SECTOR)
    assert b["bus"] == pytest.approx(BUS)
    # a seek of 99 cylinders costs the table's 10 ms (writes add the settle)
    run_one(d, Rq(d.layout.chs_to_lbn(99, 0, 0), 1, write=True), t)
    assert d.service_breakdown["seek"] == pytest.approx(10.3e-3)
    run_one(d, Rq(d.layout.chs_to_lbn(99, 1, 0), 1), 1.0)
    assert d.service_breakdown["seek"] == pytest.approx(0.5e-3)  # head switch only


def test_rotation_just_ahead_is_zero_and_just_behind_is_a_revolution():
    for ahead in (True, False):
        d = tiny()
        t = run_one(d, Rq(0, 1), 0.0)  # head now on track (0, 0)
        now = t + 0.0123
        ang = d.platter_angle(now + 0.1e-3)  # when the command overhead is done
        k = math.ceil(ang * 100 - 1e-9) % 100  # track (0, 0) starts at angle 0
        if not ahead:
            k = (k - 1) % 100
        run_one(d, Rq(k, 1), now)
        rot = d.service_breakdown["rotation"]
        assert d.service_breakdown["seek"] == 0.0
        if ahead:
            assert 0.0 <= rot < SECTOR
        else:
            assert REV - SECTOR <= rot < REV


def test_same_track_on_a_preset(c15):
    d = make_drive(c15, seed=3)
    run_one(d, Rq(0, 8), 0.0)
    s = c15.zones[0].sectors_per_track
    rev = 60 / c15.rpm
    now = 1.0
    ang = d.platter_angle(now + c15.command_overhead_ms / 1e3)
    k = math.ceil(ang * s + 1e-6) % s
    run_one(d, Rq(k, 8), now)
    assert d.service_breakdown["rotation"] < rev / s
    d2 = make_drive(c15, seed=3)
    run_one(d2, Rq(0, 8), 0.0)
    run_one(d2, Rq((k - 1) % s, 8), now)
    assert d2.service_breakdown["rotation"] > rev * (1 - 2 / s)


@settings(max_examples=60, deadline=None)
@given(reqs=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 2048),
                               st.booleans(), st.floats(0, 0.02)), min_size=1, max_size=25),
       seed=st.integers(0, 2**32 - 1))
def test_rotational_latency_always_below_one_revolution(c15, reqs, seed):
    d = make_drive(c15, seed=seed)
    rev = 60 / c15.rpm
    now = 0.0
    for frac, n, w, gap in reqs:
        lbn = min(int(frac * c15.capacity), c15.capacity - n)
        now = run_one(d, Rq(lbn, n, w), now + gap)
        b = d.service_breakdown
        assert 0.0 <= b["rotation"] < rev
        assert b["seek"] >= 0 and b["transfer"] >= n * rev / c15.zones[0].sectors_per_track * 0.999
        total = b["overhead"] + b["queue"] + b["seek"] + b["rotation"] + b["transfer"] + b["bus"]
        assert total == pytest.approx(b["total"], abs=1e-9)


def test_whole_track_request_reads_in_one_revolution():
    d = tiny()
    run_one(d, Rq(0, 100), 0.0)
    b = d.service_breakdown
    assert b["transfer"] == pytest.approx(REV, rel=1e-9)
    assert b["total"] == pytest.approx(OVERHEAD + b["rotation"] + REV + BUS, rel=1e-9)


def test_back_to_back_submissions_read_a_track_in_about_one_revolution():
    # ten 10-sector requests queued together: each starts positioning when the
    # previous media transfer ends, so the track streams past the head once
    d = tiny(queue_depth=10)
    rqs = [Rq(10 * j, 10, id=j) for j in range(10)]
    for rq in rqs:
        d.submit(rq, 0.0)
    assert not d.can_accept()
    done = d.pop_completed(1.0)
    assert done == rqs
    last = d.service_breakdown  # the last request ends the track
    rot0 = make_drive(DriveSpec.from_dict(TINY), seed=7)
    run_one(rot0, Rq(0, 10), 0.0)
    latency = rot0.service_breakdown["rotation"]
    assert last["end"] == pytest.approx(OVERHEAD + latency + REV + BUS, rel=1e-9)


def test_one_at_a_time_sequential_reads_miss_a_revolution():
    # the flip side, with no read-ahead cache in this model: a host that waits for each
    # completion before sending the next command loses (almost) a revolution each time
    d = tiny()
    t = run_one(d, Rq(0, 10), 0.0)
    run_one(d, Rq(10, 10), t)
    assert d.service_breakdown["rotation"] > REV - 3 * SECTOR


def test_track_switch_costs_only_the_skew():
    d = tiny()
    run_one(d, Rq(0, 200), 0.0)  # two tracks of cylinder 0: one head switch
    assert d.service_breakdown["transfer"] == pytest.approx(2 * REV + 10 * SECTOR, rel=1e-9)
    d = tiny()
    run_one(d, Rq(100, 200), 0.0)  # head 1 of cyl 0, then cyl 1 head 0: a cylinder switch
    # the 1 ms one-cylinder seek exceeds the 20-sector (2 ms) skew? no: 1 ms < 2 ms -> skew only
    assert d.service_breakdown["transfer"] == pytest.approx(2 * REV + 20 * SECTOR, rel=1e-9)
    assert (d.cur_cyl, d.cur_head) == (1, 0)


def test_switch_slower_than_skew_loses_a_revolution():
    d = tiny(head_switch_ms=1.5)  # longer than the 10-sector (1 ms) track skew
    run_one(d, Rq(0, 200), 0.0)
    assert d.service_breakdown["transfer"] == pytest.approx(3 * REV + 10 * SECTOR, rel=1e-9)


def test_write_data_crosses_the_bus_before_the_media_write():
    slow = tiny(bus_mb_per_s=1.0)  # 0.512 ms per sector on the bus
    run_one(slow, Rq(0, 10, write=True), 0.0)
    b = slow.service_breakdown
    assert b["bus"] == pytest.approx(10 * 512 / 1e6, rel=1e-9)
    assert b["end"] - b["transfer"] - b["rotation"] - 0.05e-3 == pytest.approx(
        0.1e-3 + 10 * 512 / 1e6, rel=1e-9)


def test_read_bus_overlaps_media_except_last_sector():
    d = tiny()
    run_one(d, Rq(0, 50), 0.0)
    assert d.service_breakdown["bus"] == pytest.approx(BUS, rel=1e-9)
    slow = tiny(bus_mb_per_s=1.0)  # the bus is now the bottleneck
    run_one(slow, Rq(0, 50), 0.0)
    b = slow.service_breakdown
    # the first sector crosses once it is wholly read, then the bus never waits
    assert b["transfer"] + b["bus"] == pytest.approx(SECTOR + 50 * 512 / 1e6, rel=1e-9)


def test_slow_bus_waits_for_the_first_sector_after_a_track_switch():
    """90..109 on a 100-sector track: 10 sectors, the head switch hidden by the 10-sector
    skew (1 ms), then 10 more. A bus slower than the media (0.128 ms a sector) has sent
    the first ten by then and waits: the end is set by sector 11, not by the mean rate."""
    slow = tiny(bus_mb_per_s=4.0)
    bus = 512 / 4e6
    run_one(slow, Rq(90, 20), 0.0)
    b = slow.service_breakdown
    media_start = b["end"] - 0.05e-3 - b["bus"] - b["transfer"]
    sector_11_in = media_start + 10 * SECTOR + 10 * SECTOR + SECTOR   # skew, then one
    assert b["transfer"] == pytest.approx(20 * SECTOR + 10 * SECTOR, rel=1e-9)
    assert b["end"] - 0.05e-3 == pytest.approx(sector_11_in + 10 * bus, rel=1e-9)
    assert b["end"] - 0.05e-3 > media_start + SECTOR + 20 * bus    # the mean-rate figure


def test_fcfs_order_and_queue_depth():
    d = tiny(queue_depth=3)
    lay = d.layout
    rqs = [Rq(lay.chs_to_lbn(90, 0, 0), 8, id=0), Rq(0, 8, id=1), Rq(lay.chs_to_lbn(50, 1, 3), 8, id=2)]
    for rq in rqs:
        assert d.can_accept()
        d.submit(rq, 0.0)
    assert not d.can_accept() and d.outstanding() == 3
    with pytest.raises(DeviceError, match="queue_depth"):
        d.submit(Rq(0, 1), 0.0)
    times = []
    while d.outstanding():
        t = d.next_event_time()
        got = d.pop_completed(t)
        times.append(t)
        assert len(got) == 1
        assert got[0].id == len(times) - 1
    assert times == sorted(times) and len(set(times)) == 3
    assert d.next_event_time() is None and d.pop_completed(99.0) == []
    # queue_depth from_spec override; default is the spec's (1)
    assert tiny().queue_depth == 1
    assert make_drive(DriveSpec.from_dict(TINY), queue_depth=4).queue_depth == 4


def test_pop_completed_takes_only_what_is_done():
    d = tiny(queue_depth=2)
    d.submit(Rq(0, 1, id=0), 0.0)
    d.submit(Rq(5000, 1, id=1), 0.0)
    t0 = d.next_event_time()
    assert d.pop_completed(t0 - 1e-9) == []
    assert [r.id for r in d.pop_completed(t0)] == [0]
    assert d.outstanding() == 1 and d.can_accept()


def test_requests_beyond_capacity_are_errors(c15):
    d = make_drive(c15)
    with pytest.raises(DeviceError, match="outside"):
        d.submit(Rq(c15.capacity - 4, 8), 0.0)
    with pytest.raises(DeviceError):
        d.submit(Rq(-1, 8), 0.0)
    with pytest.raises(DeviceError):
        d.submit(Rq(0, 0), 0.0)
    d.submit(Rq(c15.capacity - 8, 8), 0.0)  # the last 8 sectors are fine


@pytest.mark.parametrize("name,outer_mb_s", [("cheetah15k4", 96.0), ("cheetah10k7", 80.0)])
def test_sustained_outer_zone_rate_matches_data_sheet(name, outer_mb_s):
    spec = load_preset(name)
    d = make_drive(spec)
    n = spec.zones[0].sectors_per_track * spec.heads * 200  # 200 cylinders of zone 0
    run_one(d, Rq(0, n), 0.0)
    rate = n * 512 / d.service_breakdown["transfer"] / 1e6
    assert rate == pytest.approx(outer_mb_s, rel=0.03)


def test_inner_zone_is_slower(c15):
    d = make_drive(c15)
    z = c15.zones[-1]
    start = d.layout.chs_to_lbn(z.first_cyl, 0, 0)
    n = z.sectors_per_track * c15.heads * 100
    run_one(d, Rq(start, n), 0.0)
    rate = n * 512 / d.service_breakdown["transfer"] / 1e6
    assert rate == pytest.approx(58.0, rel=0.03)


def _times(spec, seed):
    import random
    rnd = random.Random(11)
    d = make_drive(spec, seed=seed)
    now, out = 0.0, []
    for _ in range(300):
        now = run_one(d, Rq(rnd.randrange(spec.capacity - 64), rnd.choice((8, 64)),
                            rnd.random() < 0.3), now + rnd.random() * 1e-3)
        out.append(now)
    return out


def test_same_seed_same_times_different_seed_different_times(c15):
    assert _times(c15, 5) == _times(c15, 5)
    assert _times(c15, 5) != _times(c15, 6)


def test_random_4k_reads_give_data_sheet_like_iops(c15):
    # average service ~ overhead + avg seek + half a revolution; the seek over
    # random LBNs is a bit shorter than over random cylinders (inner zones hold less)
    import random
    rnd = random.Random(2)
    d = make_drive(c15, seed=1)
    now = 0.0
    n = 3000
    for _ in range(n):
        now = run_one(d, Rq(rnd.randrange(c15.capacity - 8), 8), now)
    mean_ms = now / n * 1e3
    expect = 0.22 + 3.5 + 2.0
    assert expect * 0.85 < mean_ms < expect * 1.05


def test_describe(c15):
    info = make_drive(c15).describe()
    assert info["name"] == "cheetah15k4" and info["capacity_sectors"] == 71687372
    assert info["rpm"] == 15000 and info["queue_depth"] == 1
