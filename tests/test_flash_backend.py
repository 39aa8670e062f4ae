"""The flash back end: interval-booked channels, read/program/erase timing on dies,
suspension, GC timing, and the queue-depth scaling the geometry allows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from blksim.disk_models.flash.backend import ERASE, GC_MOVE, PROGRAM, FlashBackend
from blksim.disk_models.flash.timeline import Timeline
from tests.flash_helpers import Rq, collect, drive, random_reads, run_closed, run_open, tiny
from blksim.disk_models.flash.ftl import GcJob

US = 1e-6
X4K = 4096 / 100e6          # the tiny drive's channel: 4 KiB at 100 MT/s = 40.96 us


# ---------------------------------------------------------------- Timeline
def test_timeline_first_fit_uses_a_gap_before_a_later_booking():
    t = Timeline()
    assert t.book(10.0, 2.0, 0.0) == 12.0          # [10, 12)
    assert t.book(0.0, 3.0, 0.0) == 3.0            # fits before it: [0, 3)
    assert t.book(2.0, 5.0, 0.0) == 8.0            # [3, 8): after [0,3), before [10,12)
    assert t.book(7.0, 3.0, 0.0) == 15.0           # no room before 12: [12, 15)
    assert t.busy == 13.0


def test_timeline_forgets_finished_intervals_and_merges_touching_ones():
    t = Timeline()
    for _ in range(100):
        t.book(0.0, 1.0, 0.0)                       # back to back: one interval
    assert len(t.starts) == 1 and t.ends == [100.0]
    t.book(200.0, 1.0, 150.0)                       # the first has ended by 150
    assert t.starts == [200.0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0.01, 10)), min_size=1, max_size=40))
def test_timeline_bookings_never_overlap_and_start_when_ready(bookings):
    t = Timeline()
    got = []
    for ready, dur in bookings:
        end = t.book(ready, dur, 0.0)
        assert end - dur >= ready - 1e-9
        got.append((end - dur, end))
    got.sort()
    for (s1, e1), (s2, e2) in zip(got, got[1:]):
        assert s2 >= e1 - 1e-9



def _first_fit(booked: list, ready: float, duration: float) -> float:
    """The reference: the earliest start ``t`` >= ``ready`` such that ``[t, t +
    duration)`` overlaps no booked interval, trying ``ready`` and every booked end."""
    for t in sorted({ready} | {e for _, e in booked if e > ready}):
        if all(t + duration <= s or e <= t for s, e in booked):
            return t
    raise AssertionError("unreachable: after the last end there is room")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(1, 12)),
                min_size=1, max_size=60))
def test_timeline_books_exactly_the_first_fit_of_a_brute_force_search(steps):
    # time advances by whole units, transfers are ready at or after it: many touching
    # and merged intervals, forgotten ones, and gaps exactly as long as a transfer
    t = Timeline()
    booked = []
    now = 0
    for advance, delay, dur in steps:
        now += advance
        ready = now + delay
        want = _first_fit(booked, float(ready), float(dur)) + dur
        assert t.book(float(ready), float(dur), float(now)) == want
        booked.append((want - dur, want))
        # the timeline's own intervals: sorted, disjoint, and cover every live booking
        assert t.starts == sorted(t.starts) and all(
            e1 <= s2 for e1, s2 in zip(t.ends, t.starts[1:]))
        for s, e in booked:
            if e > now:
                assert any(s0 <= s and e <= e0 for s0, e0 in zip(t.starts, t.ends))


# ---------------------------------------------------------------- reads
def test_one_read_is_tr_then_the_channel_then_the_link():
    spec = tiny()
    dev = drive(spec, "full")
    rq = Rq(0, 0, 8)
    dev.submit(rq, 0.0)
    (done,) = collect(dev)
    link = 4096 / (4 * 8e9 * 128 / 130 / 8 * 256 / 282)
    assert done.t_done == pytest.approx(50 * US + X4K + link, rel=1e-9)


def test_reads_on_one_die_serialise_on_two_dies_of_a_channel_share_it():
    spec = tiny()
    b = drive(spec, "full").backend
    # die 0 twice: the second starts once the first's data is out
    e1 = b.read(0, 0.0, 4096, 50 * US, 0.0)
    e2 = b.read(0, 0.0, 4096, 50 * US, 0.0)
    assert e1 == pytest.approx(50 * US + X4K)
    assert e2 == pytest.approx(2 * (50 * US + X4K))
    # dies 2 and 3 share channel 1: tR overlaps, the transfers follow each other
    f1 = b.read(2, 0.0, 4096, 50 * US, 0.0)
    f2 = b.read(3, 0.0, 4096, 50 * US, 0.0)
    assert (f1, f2) == (pytest.approx(50 * US + X4K), pytest.approx(50 * US + 2 * X4K))


def test_a_read_behind_a_program_waits_and_with_suspension_goes_first():
    for suspend in (False, True):
        spec = tiny(suspend=suspend)
        dev = drive(spec)
        b = dev.backend
        b.enqueue(0, 0, 0)
        b.drain = 1
        b.wake(0, 0.0)                       # one unit: transfer 40.96 us, tPROG 500 us
        assert b.dies[0].op.kind == PROGRAM
        prog_end = X4K + 500 * US
        assert b.dies[0].op_end == pytest.approx(prog_end)
        end = b.read(0, 100 * US, 4096, 50 * US, 100 * US)
        if not suspend:
            assert end == pytest.approx(prog_end + 50 * US + X4K)
        else:
            assert end == pytest.approx(100 * US + 20 * US + 50 * US + X4K)
            assert b.dies[0].op_end == pytest.approx(prog_end + 50 * US + 40 * US)


def test_gc_job_is_timed_as_moves_then_an_erase_and_reported_done():
    spec = tiny()
    dev = drive(spec, "full")
    b = dev.backend
    ftl = dev.ftl
    ppb = spec.geometry.pages_per_block
    # a job with 6 units to move in plane 0 (2 flash pages of 4 units), copyback on
    job = GcJob(1, [(ppb + i, 2 * ppb + i) for i in range(6)], False)
    ftl.gc_needed = lambda plane: plane == 0 and not getattr(ftl, "_done", False)

    def collect_once(plane, now):
        ftl._done = True
        return job
    ftl.collect = collect_once
    erased = []
    ftl.erase_done = erased.append
    t, kinds = 0.0, []
    while True:
        finished, nxt = b.wake(0, t)
        if finished is not None:
            kinds.append(finished.kind)
        if nxt is None:
            break
        t = nxt
    assert kinds == [GC_MOVE, GC_MOVE, ERASE]
    assert erased == [1]
    assert t == pytest.approx(2 * (50 * US + 500 * US) + 3000 * US)
    assert b.gc_intervals[-1] == (0.0, pytest.approx(t), 0)
    assert b.gc_time == pytest.approx(t)


def test_gc_moves_without_copyback_cross_the_channel_twice():
    spec = tiny(copyback=False)
    dev = drive(spec, "full")
    b = dev.backend
    ppb = spec.geometry.pages_per_block
    job = GcJob(1, [(ppb + i, 2 * ppb + i) for i in range(4)], False)
    run_cls = __import__("blksim.disk_models.flash.backend", fromlist=["GcRun"]).GcRun
    d = b.dies[0]
    d.gc = run_cls(job, 0, True, 0.0)
    b._gc_step(d, d.gc, 0.0)
    assert d.op_end == pytest.approx(50 * US + 2 * 4 * X4K + 500 * US)


# ---------------------------------------------------------------- scaling
def test_random_read_iops_grow_with_depth_then_flatten_at_the_geometry_bound():
    """dies / (tR + transfer): each die serves one 4 KiB read per tR + 4 KiB on its
    channel; the tiny drive's channels (2 dies each, 90 % busy at that rate) are not
    the limit. Within 10 % at depth 64 (random dies: some idle at any depth)."""
    spec = tiny()
    bound = 4 / (50 * US + X4K)
    iops = {}
    for depth in (1, 2, 4, 8, 32, 64):
        dev = drive(spec, "full")
        done, end = run_closed(dev, random_reads(spec, seed=depth), depth, 3000)
        iops[depth] = len(done) / end
    assert iops[1] == pytest.approx(1 / (50 * US + X4K), rel=0.02)
    assert iops[1] < iops[2] < iops[4] < iops[8] < iops[32]
    assert iops[64] == pytest.approx(bound, rel=0.10)
    assert iops[64] <= bound * 1.001
    assert iops[64] / iops[32] < 1.05                # flat


def test_a_preset_s_random_read_iops_flatten_at_its_dies_over_tr_plus_transfer():
    """The 980 PRO preset: 32 dies, tR 45 us, 4 KiB over a 1,400 MT/s channel (2.93 us;
    8 channels of 4 dies each are 25 % busy at that rate): the bound is 32 / (tR + x).
    IOPS grow with depth, then reach it within 10 % and stay below it."""
    from blksim.disk_models.flash.spec import build_spec
    from blksim.disk_models.flash_presets import load_flash_preset
    spec = build_spec(load_flash_preset("samsung980pro1tb"),
                      {"blocks_per_plane": 64, "slc_cache": 0}, "[device]", "preset")
    bound = 32 / (45 * US + 4096 / 1400e6)
    iops = {}
    for depth in (1, 8, 64, 512):
        dev = drive(spec, "full")
        done, end = run_closed(dev, random_reads(spec, seed=depth, hctx=None), depth // 8 or 1,
                               max(2000, 16 * depth), threads=min(depth, 8))
        # the rate between the first and the last quarter: no ramp-up or drain
        a, b = done[len(done) // 4], done[3 * len(done) // 4]
        iops[depth] = (len(done) // 2) / (b.t_done - a.t_done)
    assert iops[1] < iops[8] < iops[64] < iops[512]
    assert iops[512] == pytest.approx(bound, rel=0.10)
    assert iops[512] <= bound * 1.001
