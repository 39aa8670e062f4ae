"""The DiskSim-mode drive's fast paths give the general path's results, exactly.

`DiskSimDrive.fast_read_miss` serves read misses through a specialised method (the
commonest request of a random workload, made cheaper for the replay benchmark). These
tests replay the same requests on two drives built from the same spec, one with the
fast path and one without, and require every completion time, every service
breakdown, the cache's contents after each completion and its counters to be
identical; over drives whose caches differ
(read-ahead modes, free blocks, water marks, segment counts) and over workloads that
mix misses with hits, partial hits, writes and track-crossing requests."""

import random
from collections import deque

import pytest

from blksim.disk_models.drive import DiskSimDrive, make_drive
from blksim.disk_models.presets import load_drive
from blksim.disk_models.spec import DriveSpec


class Rq:
    __slots__ = ("id", "sector", "nr_sectors", "write")

    def __init__(self, i, sector, n, write):
        self.id, self.sector, self.nr_sectors, self.write = i, sector, n, write


def workload(kind, capacity, seed, count=400):
    """(arrival time, request) pairs of one kind of workload."""
    rng = random.Random(seed)
    t, out = 0.0, []
    heads = [rng.randrange(capacity - 10**6) for _ in range(3)]
    for i in range(count):
        if kind == "random":
            t += rng.expovariate(1 / 0.008)
            out.append((t, Rq(i, rng.randrange(capacity // 8 - 1) * 8, 8, False)))
        elif kind == "streams":       # sequential readers: hits, partial hits, misses
            t += rng.expovariate(1 / 0.002)
            k, n = rng.randrange(3), rng.choice([8, 16, 64, 256, 700])
            out.append((t, Rq(i, heads[k], n, False)))
            heads[k] += n
            if rng.random() < 0.05:
                heads[k] = rng.randrange(capacity - 10**6)
        else:                          # reads and writes, random and sequential, any size
            t += rng.expovariate(1 / rng.choice([0.0005, 0.003, 0.012]))
            n = rng.choice([1, 2, 8, 33, 100, 256, 600])
            r = rng.random()
            if r < 0.4:
                heads[0] = rng.randrange(capacity - 1000)
            elif r < 0.6 and heads[0] > 2 * n:    # the sectors just before: free blocks
                heads[0] -= 2 * n
            out.append((t, Rq(i, heads[0], n, rng.random() < 0.4)))
            heads[0] += n
    return out


def replay(drive, requests):
    """Every completion as (request id, time, breakdown), and the cache's counters."""
    pending, now, out = deque(requests), 0.0, []
    while pending or drive.outstanding():
        while pending and pending[0][0] <= now and drive.can_accept():
            drive.submit(pending.popleft()[1], now)
        t_event = drive.next_event_time()
        t_arrival = pending[0][0] if pending and drive.can_accept() else None
        if t_event is not None and (t_arrival is None or t_event <= t_arrival):
            now = t_event
            for rq in drive.pop_completed(now):
                out.append((rq.id, now, tuple(sorted(drive.service_breakdown.items())),
                            tuple(drive._cache.contents(now))))
        else:
            now = t_arrival
    return out, dict(drive._cache.stats)


def spec_variant(name, **cache):
    d = load_drive(name).to_dict()
    d["cache"].update(cache)
    return DriveSpec.from_dict(d, origin=name)


SPECS = {
    "cheetah9LP": {},                                  # read-ahead to the track's end (mode 4)
    "atlas10k": {},                                    # mode 4, read any free blocks
    "hp_c2247a": {},                                   # mode 3, high-water mark 0.75
    "hp_c3323a": {},                                   # mode 3, high-water mark 1.0
    "dec_rz26": {},                                    # mode 1: read-ahead to the track's end
    "cheetah9LP-one-segment": {"segments": 1},
    "cheetah9LP-drop-requested": {"read_ahead_over_requested": -1},
    "atlas10k-cylinder": {"continuous_read": 2, "read_ahead_min_sectors": 64},
}


@pytest.mark.parametrize("kind", ["random", "streams", "mixed"])
@pytest.mark.parametrize("variant", sorted(SPECS))
@pytest.mark.parametrize("queue_depth", [1, 4])
def test_fast_read_miss_path_changes_no_result(variant, kind, queue_depth, monkeypatch):
    spec = spec_variant(variant.split("-")[0], **SPECS[variant])
    requests = workload(kind, spec.capacity, seed=len(variant) * 7 + queue_depth)
    fast = make_drive(spec, seed=3, queue_depth=queue_depth)
    monkeypatch.setattr(DiskSimDrive, "fast_read_miss", False)
    general = make_drive(spec, seed=3, queue_depth=queue_depth)
    assert fast._fast_miss and not general._fast_miss
    got, want = replay(fast, requests), replay(general, requests)
    assert len(got[0]) == len(requests)
    assert got == want
    assert want[1]["read_misses"] > 0


def test_the_comparison_sees_a_changed_rule(monkeypatch):
    """The comparison above can fail: a fast path that forgets the read-miss command
    overhead of a read after a write is caught."""
    spec = load_drive("cheetah9LP")
    requests = workload("mixed", spec.capacity, seed=1)
    general = make_drive(spec, seed=3, queue_depth=1)
    general._fast_miss = False
    want = replay(general, requests)
    fast = make_drive(spec, seed=3, queue_depth=1)
    fast._ccmd = (fast._ccmd[0], fast._ccmd[0]) + fast._ccmd[2:]
    fast._fast_miss = True
    assert replay(fast, requests) != want


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
def test_track_bounds_short_cuts_agree_with_walking_the_track(name):
    """`DiskSimDrive.track_bounds` skips the walk on a layout whose LBNs follow the
    physical order (spares and slips only): a run reaching the track's last sector
    ends it, and an LBN on its sector 0 starts it."""
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
