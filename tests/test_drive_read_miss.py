"""A DiskSim-mode drive's read miss, timed by hand from the drive's mechanics.

The read miss is the commonest request of a random workload. These tests compute its
completion from first principles (the read miss command overhead, DiskSim g1's
positioning, the platter's angle, the sectors' time under the head, the bus from the
high-water mark, the completion overhead) and require the drive's figure, for a read
inside one track, one crossing a track boundary, and one that stops a read-ahead in
progress; and the track bounds the read-ahead relies on, against a walk over the
track's LBNs."""

import random

import pytest

from blksim.disk_models.drive import make_drive
from blksim.disk_models.presets import load_drive, load_preset
from blksim.disk_models.spec import DriveSpec

MS = 1e-3
OVH = dict(read_miss_after_read_ms=0.3, read_miss_after_write_ms=0.4,
           read_hit_after_read_ms=0.1, read_completion_ms=0.05, bus_sector_ms=0.001)
CACHE = dict(enabled=True, segments=4, segment_size_sectors=512, continuous_read=3,
             read_ahead_max_sectors=256)


class Rq:
    __slots__ = ("sector", "nr_sectors", "write")

    def __init__(self, sector, n, write=False):
        self.sector, self.nr_sectors, self.write = sector, n, write


def drive(cache=CACHE, seed=1):
    d = load_preset("cheetah10k7").to_dict()
    d.pop("overheads", None)
    d["overheads"] = dict(OVH)
    d["cache"] = dict(cache)
    return make_drive(DriveSpec.from_dict(d, "variant"), seed=seed)


def one(d, rq, t):
    d.submit(rq, t)
    done = d.next_event_time()
    assert d.pop_completed(done) == [rq]
    return done, d.service_breakdown


def first_sector_time(d, lbn, t_arr):
    """When ``lbn`` starts passing under its head, the head on its track at ``t_arr``."""
    wait = (d.physical_angle(lbn) - d.platter_angle(t_arr)) % 1.0
    return t_arr + wait * 60.0 / d.spec.rpm


def g1_positioning(d, cyl0, h0, cyl, h):
    """DiskSim g1 (diskmodel/mech_g1.c): the larger of the seek and the head switch."""
    seek = d.seek_model.time(abs(cyl - cyl0)) if cyl != cyl0 else 0.0
    switch = d.spec.head_switch_ms * MS if h != h0 else 0.0
    return max(seek, switch)


def test_read_miss_in_one_track():
    d = drive()
    rev = 60.0 / d.spec.rpm
    lbn, n = 3_000_000, 8
    cyl, h, k, _a, run = d.layout.locate(lbn)
    assert run >= n and (cyl, h) != (0, 0)
    t_cmd = 0.3 * MS                                 # read miss after a read
    t_arr = t_cmd + g1_positioning(d, 0, 0, cyl, h)  # the head starts on (0, 0)
    t_first = first_sector_time(d, lbn, t_arr)
    dt = rev / d.layout.z_spt[d.layout.zone_of_lbn(lbn)]
    t_last = t_first + n * dt
    # no high-water mark: the bus starts with the first sector in; it is faster than
    # the media, so it ends one sector after the last one is read
    want = t_last + 0.001 * MS + 0.05 * MS
    done, b = one(d, Rq(lbn, n), 0.0)
    assert done == pytest.approx(want, abs=1e-12)
    assert b["seek"] == pytest.approx(t_arr - t_cmd, abs=1e-12)
    assert b["rotation"] == pytest.approx(t_first - t_arr, abs=1e-12)
    assert b["transfer"] == pytest.approx(n * dt, abs=1e-12)
    assert b["overhead"] == pytest.approx(0.35 * MS, abs=1e-12)
    assert (d.cur_cyl, d.cur_head) == (cyl, h)
    assert d._cache.stats["read_misses"] == 1
    # the segment holds the request; the read-ahead continues from its end
    assert d._cache.contents(t_last) == [(lbn, lbn + n)]


def test_read_miss_across_a_track_boundary_pays_the_switch_and_the_skew():
    d = drive(cache=dict(CACHE, continuous_read=0))
    rev = 60.0 / d.spec.rpm
    first, end = d.track_bounds(3_000_000)
    lbn, n = end - 4, 12                              # 4 sectors here, 8 on the next track
    cyl, h, _k, _a, run = d.layout.locate(lbn)
    cyl2, h2, k2, _a2, _run2 = d.layout.locate(end)
    assert run == 4 and k2 == 0 and (cyl2, h2) != (cyl, h)
    s = d.layout.z_spt[d.layout.zone_of_lbn(lbn)]
    t_arr = 0.3 * MS + g1_positioning(d, 0, 0, cyl, h)
    t_first = first_sector_time(d, lbn, t_arr)
    t_switch_end = t_first + 4 * rev / s + g1_positioning(d, cyl, h, cyl2, h2)
    t_second = first_sector_time(d, end, t_switch_end)   # the skew's rotation
    t_last = t_second + 8 * rev / s
    done, b = one(d, Rq(lbn, n), 0.0)
    assert done == pytest.approx(t_last + 0.001 * MS + 0.05 * MS, abs=1e-12)
    assert b["transfer"] == pytest.approx(t_last - t_first, abs=1e-12)
    assert (d.cur_cyl, d.cur_head) == (cyl2, h2)


def test_read_miss_during_a_read_ahead_starts_where_the_read_ahead_stops():
    """The lookup stops the read-ahead: it finishes the sector under the head (no
    "Stop prefetch in sector"), the segment keeps the sectors read, and the next
    read's positioning starts from that track when that sector ends."""
    d = drive()
    rev = 60.0 / d.spec.rpm
    lbn, n = 3_000_000, 8
    t1, _ = one(d, Rq(lbn, n), 0.0)
    cyl, h, _k, _a, _run = d.layout.locate(lbn)
    s = d.layout.z_spt[d.layout.zone_of_lbn(lbn)]
    dt = rev / s
    t_last = t1 - 0.001 * MS - 0.05 * MS              # the request's last sector read
    # the next request arrives while the read-ahead is on the same track
    now = t_last + 2.5 * dt
    assert d.layout.locate(lbn + n + 3)[:2] == (cyl, h)
    far = 9_000_000
    cyl2, h2, _k2, _a2, _run2 = d.layout.locate(far)
    head_free = t_last + 3 * dt                       # sector lbn+n+2 finishes
    t_arr = max(now + 0.3 * MS, head_free) + g1_positioning(d, cyl, h, cyl2, h2)
    t_first = first_sector_time(d, far, t_arr)
    done, _b = one(d, Rq(far, 8), now)
    assert done == pytest.approx(t_first + 8 * dt * s / d.layout.z_spt[
        d.layout.zone_of_lbn(far)] + 0.001 * MS + 0.05 * MS, abs=1e-12)
    assert (lbn, lbn + n + 3) in d._cache.contents(done)
    assert d._cache.stats["prefetch_stopped"] == 1


def test_read_miss_after_a_write_pays_the_read_miss_after_write_overhead():
    d = drive(cache=dict(CACHE, continuous_read=0))
    t, _ = one(d, Rq(5_000_000, 8, write=True), 0.0)
    _, b = one(d, Rq(1_000_000, 8), t + 0.1)
    assert b["overhead"] == pytest.approx((0.4 + 0.05) * MS, abs=1e-12)


def _track_bounds_by_walking(drive, lbn):
    """The track bounds found by locating LBN after LBN: the consecutive LBNs around
    ``lbn`` on its track (the layout's, which may run past the drive's capacity:
    the walk forward starts from the end of ``lbn``'s run and stops at capacity)."""
    locate = drive.layout.locate_spt
    cyl, h, _k, _a, run, _s = locate(lbn)
    end = lbn + run
    while end < drive.capacity and locate(end)[:2] == (cyl, h):
        end += locate(end)[4]
    first = lbn
    while first > 0 and locate(first - 1)[:2] == (cyl, h):
        first -= 1
    return first, end


@pytest.mark.parametrize("name", ["cheetah9LP", "atlas10k", "hp_c2247a", "hp_c3323a",
                                  "dec_rz26", "ibm18es"])
def test_track_bounds_are_the_tracks_lbns(name):
    """`DiskSimDrive.track_bounds` (the read-ahead's stop for modes 1 and 4) gives the
    first and one-past-last LBN of the track, as a walk over the LBNs finds them; on
    layouts whose LBNs follow the physical order it stops the walk early (a run
    reaching the track's last sector ends it, an LBN on sector 0 starts it)."""
    drive = make_drive(load_drive(name), seed=1)
    assert drive.layout.monotone
    rng = random.Random(5)
    lbns = [rng.randrange(drive.capacity) for _ in range(150)]
    # track and zone edges, where the short cuts apply or must not
    for z_lbn in drive.layout.z_lbn[1:4]:
        lbns += [z_lbn - 1, z_lbn, z_lbn + 1]
    lbns += [0, 1, drive.capacity - 1]
    # LBNs whose run stops short of the track's end (a slip or spare inside the track)
    short = [lbn for lbn in (rng.randrange(drive.capacity) for _ in range(20000))
             if sum(_loc(drive, lbn)[2:4]) < _loc(drive, lbn)[4]]
    lbns += short[:100]
    for lbn in lbns:
        first, end = drive.track_bounds(lbn)
        assert (first, end) == _track_bounds_by_walking(drive, lbn), lbn
        # the first and last LBN of a track: each shortcut's own case
        assert drive._track_bounds(first, *_loc(drive, first)) == (first, end)
        assert drive._track_bounds(end - 1, *_loc(drive, end - 1)) == (first, end)


def _loc(drive, lbn):
    cyl, h, k, _angle, run, s = drive.layout.locate_spt(lbn)
    return cyl, h, k, run, s
