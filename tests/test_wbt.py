"""Writeback throttling (block/mq/wbt.py), hand-traced from block/blk-wbt.c and
block/blk-rq-qos.c of Linux 5.4-6.6 (wb_timer_fn, latency_exceeded, calc_wb_limits,
get_limit, wbt_rqw_done, rq_depth_calc_max_depth, rq_depth_scale_up/down, rwb_arm_timer).

Times are seconds; HZ is 250 (4 ms jiffies) unless stated. "W" is a buffered write (a
write bio with sync False), "R" a read, "D" a direct write (sync True).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from blksim.block.mq.wbt import (LAT_EXCEEDED, Wbt, calc_max_depth, int_sqrt, wb_limits,
                                 window_nsec)
from blksim.block.request import Bio, MqRequest

_ids = itertools.count()


def bio(kind: str, sector: int = 0, nr: int = 8) -> Bio:
    i = next(_ids)
    return Bio(i, sector, nr, kind != "R", kind == "D", pid=1)


def request(b: Bio, wbt: Wbt, now: float) -> MqRequest:
    """The request allocated for ``b`` (rq_qos_track)."""
    rq = MqRequest(b.id, b, now)
    wbt.track(rq, b)
    return rq


def issue(rq: MqRequest, wbt: Wbt, now: float) -> None:
    rq.t_dispatch = now
    wbt.issue(rq, now)


def submit(wbt: Wbt, kind: str, now: float, issue_at: float | None = None):
    """Throttle, track and (optionally) issue one bio; the request, or None if it sleeps."""
    b = bio(kind)
    if not wbt.throttle(b, now):
        return None
    rq = request(b, wbt, now)
    if issue_at is not None:
        issue(rq, wbt, issue_at)
    return rq


# --- the depth arithmetic --------------------------------------------------------------

def test_int_sqrt_is_the_floor_root():
    assert [int_sqrt(x) for x in (0, 1, 3, 4, 255, 256, 512, 768, 1024, 1280)] == \
        [0, 1, 1, 2, 15, 16, 22, 27, 32, 35]


def test_rotational_ncq_disk_steps_hand_traced():
    # queue_depth 32 (NCQ), base = min(16, 32) = 16:
    #   s>0: 1 + (15 >> s)        s<0: 1 + (15 << -s), capped at 3*32/4 = 24
    #   wb_normal (d+1)/2, wb_background (d+3)/4; d <= 2: d and 1
    expected = {
        -1: (24, True, 12, 6),       # 31 > 24: the cap, scaled_max
        0: (16, False, 8, 4),
        1: (8, False, 4, 2),
        2: (4, False, 2, 1),
        3: (2, False, 2, 1),
        4: (1, False, 1, 1),
    }
    for step, (depth, at_max, normal, background) in expected.items():
        assert calc_max_depth(32, step) == (depth, at_max), step
        assert wb_limits(depth, 75_000_000) == (normal, background), step
    # the window: 100 ms * 16 / int_sqrt((s+1) * 256), then whole 4 ms jiffies
    assert [window_nsec(s) for s in (-2, 0, 1, 2, 3)] == \
        [100_000_000, 100_000_000, 72_727_272, 59_259_259, 50_000_000]


def test_non_rotational_and_depth_one_devices():
    # queue_depth 64: s=-1 gives 31 (cap 48), s=-2 gives 61 -> 48 at the cap
    assert calc_max_depth(64, -1) == (31, False)
    assert calc_max_depth(64, -2) == (48, True)
    # queue depth 1: 2 (the most it can be) at s <= 0, 1 when scaled down
    assert calc_max_depth(1, 0) == (2, True)
    assert calc_max_depth(1, 1) == (1, False)
    assert wb_limits(2, 2_000_000) == (2, 1)
    assert wb_limits(16, 0) == (0, 0)            # a target of 0: off


def test_defaults_follow_the_device():
    rot = Wbt(32, rotational=True)
    ssd = Wbt(64, rotational=False)
    assert (rot.lat_usec, rot.max_depth, rot.wb_normal, rot.wb_background) == (75000, 16, 8, 4)
    assert (ssd.lat_usec, ssd.max_depth) == (2000, 16)
    assert Wbt(32, True, lat_usec=0).enabled is False
    assert Wbt(32, True, lat_usec=5000).lat_usec == 5000


# --- windows and the scale step ----------------------------------------------------------

def writes_and_a_read(wbt: Wbt, start: float, read_latency: float, writes: int = 3):
    """Within one window from ``start``: ``writes`` buffered writes one after another, each
    done in 1 ms, then one read issued at ``start`` completes after ``read_latency``."""
    for k in range(writes):
        rq = submit(wbt, "W", start + k * 0.001, issue_at=start + k * 0.001)
        assert wbt.done(rq, start + (k + 1) * 0.001) == []
    rd = submit(wbt, "R", start, issue_at=start)
    wbt.done(rd, start + read_latency)


def test_slow_reads_cut_the_buffered_write_depth_rotational():
    wbt = Wbt(32, rotational=True, hz=250)
    # the first throttled write opens a 100 ms (25 jiffy) window at t=0
    writes_and_a_read(wbt, 0.0, read_latency=0.080)      # min read latency 80 ms > 75 ms
    assert wbt.wakeup_at == pytest.approx(0.100)
    wbt.timer_fired(0.100)
    # step 1: max_depth 1 + (15 >> 1) = 8, wb_normal 4, wb_background 2
    assert (wbt.scale_step, wbt.max_depth, wbt.wb_normal, wbt.wb_background) == (1, 8, 4, 2)
    assert wbt.log == [(0.100, 1, 8)]
    # re-armed (step != 0) with the shrunk window: 72.7 ms -> 18 jiffies = 72 ms
    assert wbt.wakeup_at == pytest.approx(0.172)
    writes_and_a_read(wbt, 0.100, read_latency=0.076)
    wbt.timer_fired(0.172)
    assert (wbt.scale_step, wbt.max_depth, wbt.wb_normal) == (2, 4, 2)
    # window at step 2: 59.26 ms -> 14 jiffies
    assert wbt.wakeup_at == pytest.approx(0.172 + 0.056)
    # a window within target scales back up one step
    writes_and_a_read(wbt, 0.172, read_latency=0.010)
    wbt.timer_fired(0.228)
    assert (wbt.scale_step, wbt.max_depth) == (1, 8)
    assert wbt.log[-1] == (0.228, 1, 8)


def test_minimum_read_latency_decides_not_the_mean():
    wbt = Wbt(32, rotational=True)
    rqs = [submit(wbt, "W", 0.0, issue_at=0.0) for _ in range(3)]
    for rq in rqs:
        wbt.done(rq, 0.001)
    slow = submit(wbt, "R", 0.0, issue_at=0.0)
    fast = submit(wbt, "R", 0.0, issue_at=0.0)
    wbt.done(slow, 0.090)                # 90 ms
    wbt.done(fast, 0.074)                # 74 ms: the minimum, within 75 ms
    wbt.timer_fired(0.100)
    assert wbt.scale_step == -1          # LAT_OK: one step up, not down


def test_writes_only_go_negative_then_a_slow_read_snaps_to_zero_non_rotational():
    wbt = Wbt(64, rotational=False, hz=1000)
    t = 0.0
    for step, depth in ((-1, 31), (-2, 48)):
        rq = submit(wbt, "W", t, issue_at=t)
        wbt.done(rq, t + 0.001)          # writes only: LAT_UNKNOWN_WRITES
        t += 0.100
        wbt.timer_fired(t)
        assert (wbt.scale_step, wbt.max_depth) == (step, depth)
    assert wbt.scaled_max
    # at the cap a scale up is refused: no step, no log entry
    rq = submit(wbt, "W", t, issue_at=t)
    wbt.done(rq, t + 0.001)
    t += 0.100
    wbt.timer_fired(t)
    assert wbt.scale_step == -2 and len(wbt.log) == 2
    # a read over 2 ms with writes: hard throttle from a negative step jumps to 0
    writes_and_a_read(wbt, t, read_latency=0.003)
    t += 0.100
    wbt.timer_fired(t)
    assert (wbt.scale_step, wbt.max_depth) == (0, 16)
    assert wbt.log == [(0.1, -1, 31), (0.2, -2, 48), (t, 0, 16)]


def test_depth_one_device_scales_between_two_and_one_and_stops():
    wbt = Wbt(1, rotational=True)
    assert (wbt.max_depth, wbt.wb_normal, wbt.wb_background) == (2, 2, 1)
    writes_and_a_read(wbt, 0.0, read_latency=0.2)
    wbt.timer_fired(0.1)
    assert (wbt.scale_step, wbt.max_depth, wbt.wb_normal) == (1, 1, 1)
    writes_and_a_read(wbt, 0.1, read_latency=0.2)
    wbt.timer_fired(wbt.wakeup_at)
    assert wbt.scale_step == 1           # max_depth 1: scaling down stops


def test_a_read_stuck_at_the_device_counts_as_exceeded():
    wbt = Wbt(32, rotational=True)
    w = submit(wbt, "W", 0.0, issue_at=0.0)
    rd = submit(wbt, "R", 0.010, issue_at=0.010)     # tracked from its issue (sync_issue)
    assert wbt.sync_cookie is rd
    # no read completes in the window; the read has been out 90 ms > 75 ms target
    status = wbt._latency_exceeded(0.100, wbt.inflight)
    assert status == LAT_EXCEEDED
    wbt.timer_fired(0.100)
    assert wbt.scale_step == 1
    wbt.done(rd, 0.120)
    assert wbt.sync_cookie is None
    wbt.done(w, 0.121)


def test_unknown_windows_drift_back_to_zero_after_five():
    wbt = Wbt(32, rotational=True)
    writes_and_a_read(wbt, 0.0, read_latency=0.1)
    wbt.timer_fired(0.1)
    assert wbt.scale_step == 1
    t = 0.1
    for n in range(1, 6):                # nothing in flight, nothing completed
        t = wbt.wakeup_at
        wbt.timer_fired(t)
        assert wbt.scale_step == (1 if n < 5 else 0), n
    assert wbt.unknown_cnt == 0
    assert wbt.wakeup_at is None         # step 0 and nothing in flight: not re-armed


# --- limits and waiters ------------------------------------------------------------------

def test_limit_by_kind_of_write_and_recent_reads():
    wbt = Wbt(32, rotational=True)       # max 16, normal 8, background 4
    fill = [submit(wbt, "W", 1.0) for _ in range(8)]
    assert all(fill) and submit(wbt, "W", 1.0) is None     # wb_normal: 8
    wbt2 = Wbt(32, rotational=True)
    for _ in range(4):
        assert wbt2.throttle(bio("W"), 1.0, background=True)
    assert not wbt2.throttle(bio("W"), 1.0, background=True)   # REQ_BACKGROUND: 4
    wbt3 = Wbt(32, rotational=True)
    rd = submit(wbt3, "R", 1.0)                            # a read issued at 1.0 s
    assert [submit(wbt3, "W", 1.05) is not None for _ in range(5)] == [True] * 4 + [False]
    assert rd is not None
    wbt4 = Wbt(32, rotational=True)
    wbt4.note_dirty_sleep(2.0)                             # wb_recent_wait: max_depth
    assert sum(submit(wbt4, "W", 2.5) is not None for _ in range(20)) == 16
    assert sum(submit(wbt4, "W", 3.0) is not None for _ in range(20)) == 0   # queued


def test_direct_writes_and_reads_are_not_throttled():
    wbt = Wbt(1, rotational=True, lat_usec=1000)
    for kind in "DRDRDR" * 5:
        assert wbt.throttle(bio(kind), 1.0)
    assert wbt.inflight == 0


def test_waiters_wake_as_the_kernel_wakes_them():
    # limit wb_normal 8, wb_background 4: wake when in-flight is 0 or at least 4/2 below 8
    wbt = Wbt(32, rotational=True)
    rqs = [submit(wbt, "W", 1.0, issue_at=1.0) for _ in range(8)]
    sleepers = [bio("W") for _ in range(3)]
    assert [wbt.throttle(b, 1.0) for b in sleepers] == [False] * 3
    assert wbt.done(rqs[0], 1.01) == []                    # 7 in flight: 8 - 7 = 1 < 2
    assert wbt.done(rqs[1], 1.02) == sleepers[:2]          # 6: wake; two fit under 8
    assert wbt.inflight == 8 and wbt.waiting == 1
    assert wbt.done(rqs[2], 1.03) == []                    # 7: 1 below the limit
    assert wbt.done(rqs[3], 1.03) == sleepers[2:]          # 6: the last sleeper goes
    assert (wbt.inflight, wbt.waiting) == (7, 0)
    assert wbt.throttle(bio("W"), 1.03)                    # no sleeper, 7 < 8: goes on
    assert not wbt.throttle(bio("W"), 1.03)                # 8: sleeps


def test_a_newcomer_waits_behind_sleepers():
    wbt = Wbt(32, rotational=True)
    rqs = [submit(wbt, "W", 1.0) for _ in range(8)]
    first = bio("W")
    assert not wbt.throttle(first, 1.0)
    wbt.done(rqs[0], 1.0)                                  # 7: no wake yet
    second = bio("W")
    assert not wbt.throttle(second, 1.0)                   # room, but a sleeper is first
    assert wbt.done(rqs[1], 1.0) == [first, second]


def test_volatile_write_cache_wakes_only_when_empty():
    wbt = Wbt(32, rotational=True, write_cache=True)
    rqs = [submit(wbt, "W", 1.0) for _ in range(8)]
    sleeper = bio("W")
    assert not wbt.throttle(sleeper, 1.0)
    for rq in rqs[:-1]:
        assert wbt.done(rq, 1.1) == []
    assert wbt.done(rqs[-1], 1.1) == [sleeper]


def test_scale_up_wakes_sleepers():
    wbt = Wbt(32, rotational=True)
    rqs = [submit(wbt, "W", 1.0, issue_at=1.0) for _ in range(8)]
    assert all(rqs)
    sleepers = [bio("W") for _ in range(6)]
    for b in sleepers:
        wbt.throttle(b, 1.0)
    # nothing completes in the window; writes in flight
    when = wbt.wakeup_at                 # armed at 1.0 by the first write
    woken = wbt.timer_fired(when)        # LAT_UNKNOWN_WRITES: step -1, depth 24, normal 12
    assert wbt.scale_step == -1 and wbt.wb_normal == 12
    assert woken == sleepers[:4]


def test_bfq_turns_the_default_off_but_not_a_users_target():
    wbt = Wbt(32, rotational=True)
    wbt.enabled = False
    assert not wbt.enabled and wbt.wakeup_at is None
    assert all(wbt.throttle(bio("W"), 1.0) for _ in range(50)) and wbt.inflight == 0
    wbt.enabled = True
    assert wbt.enabled
    manual = Wbt(32, rotational=True, lat_usec=10_000)
    manual.enabled = False
    assert manual.enabled
    same = Wbt(32, rotational=True, lat_usec=75_000)       # the default: still a default
    same.enabled = False
    assert not same.enabled


@pytest.mark.parametrize("kernel, unthrottled", [("5.4", True), ("5.15", True),
                                                 ("6.1", True), ("6.6", False)])
def test_turned_off_with_sleepers_by_kernel_line(kernel, unthrottled):
    wbt = Wbt(32, rotational=True, kernel=kernel)
    rqs = [submit(wbt, "W", 1.0) for _ in range(8)]
    sleepers = [bio("W") for _ in range(20)]
    for b in sleepers:
        wbt.throttle(b, 1.0)
    wbt.enabled = False
    woken = wbt.done(rqs[0], 1.0)
    # 5.4-6.1 wake every sleeper with no limit; 6.6 keeps the last limits (7 < 8: no wake)
    assert woken == (sleepers if unthrottled else [])


# --- hypothesis: nothing lost, nothing twice, order kept, depth bounded ------------------

@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("WWWWRDBCCCT"), st.integers(0, 30)),
                max_size=120),
       st.sampled_from(["5.4", "6.6"]), st.sampled_from([1, 4, 32, 64]),
       st.booleans(), st.booleans())
def test_no_bio_lost_or_resumed_twice(ops, kernel, depth, rotational, wc):
    wbt = Wbt(depth, rotational=rotational, kernel=kernel, write_cache=wc)
    now = 0.0
    sleeping: list = []                  # throttled bios, in order
    resumed: list = []
    inflight: list = []                  # requests at the device
    tracked = 0

    def go_on(b):
        nonlocal tracked
        rq = request(b, wbt, now)
        issue(rq, wbt, now)
        inflight.append(rq)
        if b.write and not b.sync:
            tracked += 1
            assert wbt.inflight <= max(wbt.max_depth, 1)

    def resume(bios):
        for b in bios:
            assert b is sleeping.pop(0)  # in the order they slept
            resumed.append(b)
            go_on(b)

    for op, arg in ops:
        now += arg / 1000.0
        if op in "WRDB":
            b = bio("W" if op == "B" else op)
            if wbt.throttle(b, now, background=op == "B"):
                go_on(b)
            else:
                sleeping.append(b)
        elif op == "C" and inflight:
            rq = inflight.pop(arg % len(inflight))
            if rq.write and not rq.sync:
                tracked -= 1
            resume(wbt.done(rq, now))
        elif op == "T" and wbt.wakeup_at is not None:
            now = max(now, wbt.wakeup_at)
            resume(wbt.timer_fired(now))
        assert wbt.inflight == tracked
    # drain: complete everything, firing windows as they come due
    for _ in range(10_000):
        if inflight:
            now += 0.001
            rq = inflight.pop(0)
            resume(wbt.done(rq, now))
        elif wbt.wakeup_at is not None:
            now = max(now, wbt.wakeup_at)
            resume(wbt.timer_fired(now))
        else:
            break
    assert sleeping == [] and wbt.waiting == 0 and wbt.inflight == 0
    assert len({id(b) for b in resumed}) == len(resumed)


def test_requeue_and_cleanup():
    wbt = Wbt(32, rotational=True)
    rd = submit(wbt, "R", 1.0, issue_at=1.0)
    assert wbt.sync_cookie is rd
    wbt.requeue(rd, 1.01)                                  # given back: no longer tracked
    assert wbt.sync_cookie is None and wbt.sync_issue == 0
    issue(rd, wbt, 1.02)
    assert wbt.sync_cookie is rd
    # a write that passed throttle but got no request returns its slot
    b = bio("W")
    assert wbt.throttle(b, 2.0) and wbt.inflight == 1
    assert wbt.cleanup(b, 2.0) == [] and wbt.inflight == 0


def test_a_new_target_resets_the_step_and_wakes():
    wbt = Wbt(32, rotational=True)
    writes_and_a_read(wbt, 0.0, read_latency=0.1)
    wbt.timer_fired(0.1)
    assert wbt.scale_step == 1 and wbt.wb_normal == 4
    rqs = [submit(wbt, "W", 1.0) for _ in range(4)]
    sleeper = bio("W")
    assert all(rqs) and not wbt.throttle(sleeper, 1.0)
    assert wbt.set_lat_usec(20_000, 1.0) == [sleeper]      # step 0: wb_normal 8
    assert (wbt.scale_step, wbt.max_depth, wbt.lat_usec) == (0, 16, 20_000)
    assert wbt.set_lat_usec(20_000, 1.0) == []             # the same value: nothing
    assert wbt.set_queue_depth(4, 1.0) == [] and wbt.max_depth == 4


# --- a small closed loop: a FIFO disk, buffered writers and a reader -------------------

def flood(with_wbt: bool, seconds: float = 3.0, service: float = 0.020):
    """Four writer processes submit buffered writes one after another (a process whose
    bio sleeps in wbt waits with it; at most 200 are at the disk); a reader issues a read
    every 50 ms from 10 ms; the disk serves one request at a time, in arrival order, in
    ``service`` s. Without wbt nothing throttles or is tracked. Returns the read
    latencies (issue to completion), the Wbt, and the most writes the disk held."""
    import heapq
    wbt = Wbt(32, rotational=True)
    events: list = []
    seq = itertools.count()
    disk: list = []                      # FIFO: requests waiting or in service
    state = {"deepest": 0}
    reads = []

    def at(t, what):
        heapq.heappush(events, (t, next(seq), what))

    def new_request(b, now):
        if with_wbt:
            return request(b, wbt, now)
        return MqRequest(b.id, b, now)

    def to_disk(rq, now):
        rq.t_dispatch = now
        if with_wbt:
            wbt.issue(rq, now)
        disk.append(rq)
        state["deepest"] = max(state["deepest"], sum(r.write for r in disk))
        if len(disk) == 1:
            at(now + service, "done")

    def write(now):
        b = bio("W")
        if not with_wbt or wbt.throttle(b, now):
            to_disk(new_request(b, now), now)
            at(now, "write")             # the writer goes on at once

    def resume(bios, now):
        for b in bios:                   # its process resumes: the bio gets its request
            to_disk(new_request(b, now), now)
            at(now, "write")

    for _ in range(4):
        at(0.0, "write")
    at(0.01, "read")
    while events:
        now, _, what = heapq.heappop(events)
        if now > seconds:
            break
        if what == "write":
            if sum(r.write for r in disk) < 200:      # page cache has more to write
                write(now)
            else:
                at(now + service, "write")
        elif what == "read":
            b = bio("R")
            assert not with_wbt or wbt.throttle(b, now)
            to_disk(new_request(b, now), now)
            at(now + 0.05, "read")
        elif what == "done":
            rq = disk.pop(0)
            if not rq.write:
                reads.append(now - rq.t_dispatch)
            if with_wbt:
                resume(wbt.done(rq, now), now)
            if disk:
                at(now + service, "done")
        if what == "timer" and now == wbt.wakeup_at:      # (a stale one is ignored)
            resume(wbt.timer_fired(now), now)
        if wbt.timers_changed:
            wbt.timers_changed = False
            if wbt.wakeup_at is not None:
                at(wbt.wakeup_at, "timer")
    return reads, wbt, state["deepest"]


def test_a_write_flood_is_cut_back_when_reads_suffer():
    unthrottled, _, deepest = flood(with_wbt=False)
    throttled, wbt, held = flood(with_wbt=True)
    # without wbt the writers fill the disk's queue (200 writes: 4 s) before the first
    # read, which does not complete within the run
    assert deepest == 200 and unthrottled == []
    # with wbt, at t=0 (no read yet) the writes take wb_normal = 8 slots. The read issued
    # at 10 ms waits for them (done at 180 ms). At the first window's end (100 ms) it has
    # been out 90 ms with no read completed, over the 75 ms target: step 1 (depth 8);
    # at the second (72 ms later) 162 ms, longer than the window: step 2 (depth 4)
    assert held == 8
    assert [(round(t, 9), step, depth) for t, step, depth in wbt.log[:2]] == \
        [(0.1, 1, 8), (0.172, 2, 4)]
    assert max(throttled) == pytest.approx(0.17)          # that first read
    assert len(throttled) >= 55                            # a read every 50 ms goes on


def test_5_10_leaves_wbt_off_after_bfq():
    # 5.10.13's wbt_disable_default zeroes wb_normal and its wbt_enable_default returns
    # at once for a queue that has wbt; a new queue depth recomputes the limits
    old = Wbt(32, rotational=True, kernel="5.10")
    old.enabled = False
    old.enabled = True
    assert not old.enabled and old.wb_normal == 0
    assert old.throttle(bio("W"), 1.0) and old.inflight == 0
    old.set_queue_depth(32, 1.0)
    assert old.enabled and old.wb_normal == 8
    for kernel in ("5.4", "5.15", "6.6"):
        new = Wbt(32, rotational=True, kernel=kernel)
        new.enabled = False
        new.enabled = True
        assert new.enabled, kernel
