"""`SegmentCache`: hits, misses, read-ahead in time, write-back levels, LRU (hand-computed)."""

import pytest
from hypothesis import given, settings, strategies as st

from blksim.disk_models.cache import HIT, MISS, PARTIAL, CacheParams, SegmentCache


class FakeMedia:
    """A drive's media as the cache sees it, with numbers easy to compute by hand.

    ``spt`` sectors per track, ``heads`` tracks per cylinder, ``dt`` seconds per
    sector. Reading on from one sector to the next costs nothing extra within a
    track; crossing to the next track costs ``gap`` seconds (the head switch),
    after which the track's first sector is under the head at once. Positioning
    (`position`) costs ``seek`` seconds then ``latency`` seconds of rotation.
    Every run handed out is logged.
    """

    def __init__(self, dt=0.001, spt=1000, heads=4, gap=0.0, seek=0.002, latency=0.003):
        self.dt, self.spt, self.heads, self.gap = dt, spt, heads, gap
        self.seek, self.latency = seek, latency
        self.log = []          # (kind, lbn, count, t, runs)

    def _runs(self, lbn, count, t_arr, t_first):
        runs = []
        while count:
            room = self.spt - lbn % self.spt
            k = count if count < room else room
            runs.append((lbn, k, t_arr, t_first, self.dt))
            lbn += k
            count -= k
            t_arr = t_first + k * self.dt + self.gap
            t_first = t_arr
        return runs

    def stream(self, lbn, count, t_prev_end):
        if lbn % self.spt == 0:   # the previous sector ended a track
            t0 = t_prev_end + self.gap
        else:
            t0 = t_prev_end
        runs = self._runs(lbn, count, t0, t0)
        self.log.append(("stream", lbn, count, t_prev_end, runs))
        return runs

    def position(self, lbn, count, t_free):
        t_arr = t_free + self.seek
        runs = self._runs(lbn, count, t_arr, t_arr + self.latency)
        self.log.append(("position", lbn, count, t_free, runs))
        return runs

    def track_bounds(self, lbn):
        f = lbn - lbn % self.spt
        return f, f + self.spt

    def cylinder_bounds(self, lbn):
        spc = self.spt * self.heads
        f = lbn - lbn % spc
        return f, f + spc


def make(media=None, capacity=10**6, **kw):
    media = media or FakeMedia()
    base = dict(segments=2, segment_size=100, continuous_read=3, max_read_ahead=50,
                read_ahead_over_requested=0)
    base.update(kw)
    return SegmentCache(CacheParams(**base), media, capacity=capacity), media


def miss_read(c, lbn, n, now, t_end):
    r = c.lookup(lbn, n, False, now)
    assert r.kind == MISS
    c.read_done(r, t_end)
    return r


# ---------------------------------------------------------------- read path


def test_miss_then_prefetch_runs_from_the_end_of_the_request():
    c, m = make()
    r = c.lookup(0, 10, False, 0.0)
    assert (r.kind, r.cmd_hit, r.media_lbn, r.media_n) == (MISS, False, 0, 10)
    c.read_done(r, 0.010)
    # max read-ahead 50 after the request's end: sectors 10..59, from t = 10 ms
    assert m.log[-1][:4] == ("stream", 10, 50, 0.010)
    assert c.prefetching()


def test_sequential_read_during_prefetch_is_a_partial_stream_hit():
    c, m = make()
    miss_read(c, 0, 10, 0.0, 0.010)
    # at 15.5 ms sectors 10..14 are complete, 15 is under the head
    r = c.lookup(10, 10, False, 0.0155)
    assert r.kind == PARTIAL and r.stream and r.cmd_hit
    assert r.cached == 5
    assert r.media_n == 0
    assert r.t_ready == pytest.approx(0.020)      # sector 19 completes at 10 + 10*1 ms
    # the prefetch limit moved to the new request's end + 50 = 70
    assert c._pf_covered == 70 and c._pf_stop == 70


def test_sequential_read_after_prefetch_passed_it_is_a_whole_hit():
    c, m = make()
    miss_read(c, 0, 10, 0.0, 0.010)
    r = c.lookup(10, 10, False, 0.0205)
    assert r.kind == HIT and r.stream and r.cached == 10
    assert r.t_ready == 0.0205
    assert r.cmd_hit


@pytest.mark.parametrize("in_sector,end,head_free", [(False, 31, 0.031), (True, 30, 0.0305)])
def test_prefetch_stopped_by_a_miss_keeps_exactly_the_sectors_read(in_sector, end, head_free):
    c, m = make(stop_prefetch_in_sector=in_sector)
    miss_read(c, 0, 10, 0.0, 0.010)
    # at 30.5 ms sectors 10..29 are complete and 30 is under the head
    r = c.lookup(5000, 5, False, 0.0305)
    assert r.kind == MISS
    assert r.head_lbn == 30 and r.head_free == pytest.approx(head_free)
    assert not c.prefetching()
    assert (0, end) in c.contents(1.0)
    # the miss took the other (empty) segment
    assert r.seg is not c._lru[0]


def test_prefetch_finished_before_the_next_request_is_folded_in_whole():
    c, m = make()
    miss_read(c, 0, 10, 0.0, 0.010)
    r = c.lookup(5000, 5, False, 1.0)
    assert r.head_lbn == 59 and r.head_free == pytest.approx(0.060)
    assert (0, 60) in c.contents(1.0)


def test_segment_is_a_circular_queue_of_segment_size_sectors():
    c, m = make(segment_size=40, max_read_ahead=40)
    miss_read(c, 0, 10, 0.0, 0.010)
    c.lookup(5000, 1, False, 1.0)        # the prefetch of 40 ran to its end
    assert (10, 50) in c.contents(1.0)   # 50 sectors passed, the oldest 10 fell out
    assert c.lookup(5, 1, False, 1.1).kind == MISS


def test_partial_hit_on_a_clean_segment_reads_the_rest_from_the_media():
    c, m = make(max_read_ahead=20)
    miss_read(c, 0, 10, 0.0, 0.010)
    c.lookup(5000, 1, False, 1.0)          # prefetch done: segment 0 = [0, 30)
    r = c.lookup(25, 10, False, 2.0)
    assert r.kind == PARTIAL and not r.stream and r.cached == 5
    assert (r.media_lbn, r.media_n) == (30, 5)
    c.read_done(r, 2.1)
    assert m.log[-1][:4] == ("stream", 35, 20, 2.1)   # and the read-ahead goes on
    assert (0, 35) in c.contents(2.1)


def test_whole_hit_on_clean_segment_and_read_ahead_on_idle_hit():
    c, m = make(max_read_ahead=20, read_ahead_on_idle_hit=True)
    miss_read(c, 0, 10, 0.0, 0.010)
    c.lookup(5000, 1, False, 1.0)          # [0, 30) clean, other segment [5000, 5001)
    r = c.lookup(20, 10, False, 2.0)
    assert r.kind == HIT and not r.stream and r.cached == 10 and r.t_ready == 2.0
    assert r.prefetch_after                # ra_max is now 30 + 20 = 50 > 30
    c.hit_done(r, 2.0003)
    assert m.log[-1][:4] == ("position", 30, 20, 2.0003)


def test_no_read_ahead_on_idle_hit_when_disabled():
    c, m = make(max_read_ahead=20, read_ahead_on_idle_hit=False)
    miss_read(c, 0, 10, 0.0, 0.010)
    c.lookup(5000, 1, False, 1.0)
    r = c.lookup(20, 10, False, 2.0)
    assert r.kind == HIT and not r.prefetch_after


def test_almost_read_hit():
    c, m = make(almost_read_hits=True)
    miss_read(c, 0, 10, 0.0, 0.010)
    r = c.lookup(15, 5, False, 0.0155)     # 15 is the sector under the head
    assert r.kind == PARTIAL and r.stream and r.cached == 0
    c2, _ = make(almost_read_hits=False)
    miss_read(c2, 0, 10, 0.0, 0.010)
    assert c2.lookup(15, 5, False, 0.0155).kind == MISS


def test_minimum_read_ahead_delays_the_next_request():
    c, m = make(min_read_ahead=20)
    miss_read(c, 0, 10, 0.0, 0.010)
    r = c.lookup(5000, 5, False, 0.015)    # only 10..14 read; minimum is up to 29
    assert r.wait_until == pytest.approx(0.030)
    assert r.head_lbn == 29 and r.head_free == pytest.approx(0.030)
    assert (0, 30) in c.contents(1.0)


@pytest.mark.parametrize("over", [-1, 1])
def test_stream_segments_free_the_data_sent_to_the_host(over):
    """"Read-ahead over requested" 1 or -1 (DiskSim: prefetched data may replace the data
    returned to the host): once sent, a read's sectors are free space, so reading them
    again misses; the read-ahead beyond them still hits. 0 keeps them."""
    c, m = make(read_ahead_over_requested=over, max_read_ahead=20)
    miss_read(c, 0, 10, 0.0, 0.010)
    assert c.lookup(0, 5, False, 1.0).kind == MISS
    c2, _ = make(read_ahead_over_requested=over, max_read_ahead=20)
    miss_read(c2, 0, 10, 0.0, 0.010)
    assert c2.lookup(12, 4, False, 1.0).kind == HIT         # a forward jump hits ...
    assert c2.lookup(10, 4, False, 1.1).kind == MISS        # ... and frees what it sent
    c3, _ = make(max_read_ahead=20)
    miss_read(c3, 0, 10, 0.0, 0.010)
    assert c3.lookup(0, 5, False, 1.0).kind == HIT
    assert c3.lookup(2, 5, False, 1.1).kind == HIT


def test_lru_replacement():
    c, m = make(continuous_read=0)
    miss_read(c, 0, 10, 0.0, 0.01)        # segment A
    miss_read(c, 100, 10, 0.1, 0.11)      # segment B
    assert c.lookup(0, 10, False, 0.2).kind == HIT   # A is now the most recent
    miss_read(c, 200, 10, 0.3, 0.31)      # replaces B, the least recently used
    assert c.lookup(100, 10, False, 0.4).kind == MISS
    c.read_done(c._res, 0.41)             # replaces A (C was used after A)
    assert c.lookup(200, 10, False, 0.5).kind == HIT
    assert c.lookup(100, 10, False, 0.6).kind == HIT
    assert c.lookup(0, 10, False, 0.7).kind == MISS


def test_disabled_cache_always_misses_and_never_prefetches():
    c, m = make(enabled=False)
    for t in (0.0, 1.0):
        r = c.lookup(0, 10, False, t)
        assert r.kind == MISS and not r.cmd_hit
        c.read_done(r, t + 0.01)
    assert m.log == [] and not c.prefetching()
    r = c.lookup(0, 8, True, 2.0)
    assert not r.fast and not r.cmd_hit


# ---------------------------------------------------------------- read-ahead extent per mode


def extent(mode, lbn, n, **kw):
    m = FakeMedia(spt=100, heads=4)
    c, _ = make(media=m, continuous_read=mode, segment_size=1000, **kw)
    miss_read(c, lbn, n, 0.0, 1.0)
    return (m.log[-1][1], m.log[-1][1] + m.log[-1][2]) if m.log else None


def test_read_ahead_mode_0_none():
    assert extent(0, 150, 10, max_read_ahead=500) is None


def test_read_ahead_mode_1_to_end_of_track():
    assert extent(1, 150, 10, max_read_ahead=500) == (160, 200)
    assert extent(1, 150, 10, max_read_ahead=20) == (160, 180)   # the maximum still caps it
    # the track is the one the read-ahead starts on: a request that ends its track is
    # followed by the whole next one (dec_rz26's measurements: 17 of 17 such reads hit)
    assert extent(1, 190, 10, max_read_ahead=500) == (200, 300)
    assert extent(1, 190, 10, max_read_ahead=30) == (200, 230)


def test_read_ahead_mode_2_to_end_of_cylinder():
    assert extent(2, 150, 10, max_read_ahead=500) == (160, 400)


def test_read_ahead_mode_3_to_maximum_or_segment():
    assert extent(3, 150, 10, max_read_ahead=500) == (160, 660)
    # no maximum: a segment's worth beyond the request ...
    assert extent(3, 150, 10, max_read_ahead=0, read_ahead_over_requested=1) == (160, 1160)
    # ... or, keeping the request's data ("over requested" 0), up to a full segment
    assert extent(3, 150, 10, max_read_ahead=0, read_ahead_over_requested=0) == (160, 1150)


def test_read_ahead_mode_4_one_track_ahead_of_a_stream():
    assert extent(4, 150, 10) == (160, 200)          # end of the track of sector 160
    # the request ends the track: the next track, and since the segment (starting at
    # 150) already holds sectors before that track, one more (DiskSim's test is on the
    # segment's start, which for a miss is the request's start)
    assert extent(4, 150, 50) == (200, 400)
    assert extent(4, 100, 100) == (200, 400)
    assert extent(4, 200, 10) == (210, 300)
    m = FakeMedia(spt=100, heads=4)
    c, _ = make(media=m, continuous_read=4, segment_size=1000)
    miss_read(c, 150, 10, 0.0, 1.0)                  # prefetch 160..199
    r = c.lookup(190, 10, False, 1.0355)             # 160..194 read: stream hit
    assert r.kind == PARTIAL and r.stream
    # the segment started before the track of sector 200: one track more, to 400
    assert c._pf_stop == 400


def test_read_ahead_capped_at_capacity():
    m = FakeMedia()
    c, _ = make(media=m, capacity=100, max_read_ahead=50)
    miss_read(c, 80, 10, 0.0, 1.0)
    assert m.log[-1][1:3] == (90, 10)


def test_track_switch_gap_in_prefetch_timing():
    m = FakeMedia(spt=100, gap=0.0005)
    c, _ = make(media=m, max_read_ahead=50)
    miss_read(c, 80, 10, 0.0, 1.0)                   # 90..139; switch after 99
    assert c.sector_ready_time(99) == pytest.approx(1.010)
    assert c.sector_ready_time(100) == pytest.approx(1.0115)
    # a request arriving during the switch waits for it to end, head on the new track
    r = c.lookup(5000, 1, False, 1.0102)
    assert r.head_lbn == 100 and r.head_free == pytest.approx(1.0105)
    assert (80, 100) in c.contents(2.0)


# ---------------------------------------------------------------- writes


def test_write_through_level_0():
    c, m = make(fast_write_level=0)
    r = c.lookup(0, 8, True, 0.0)
    assert r.kind == MISS and not r.fast and not r.cmd_hit
    c.write_done(r, 0.05)
    assert c.lookup(100, 8, False, 0.06).wait_until == 0.0
    assert c.lookup(0, 8, False, 0.07).kind == HIT          # read hit on written data


def test_fast_write_level_2_reports_early_and_makes_the_next_request_wait():
    c, m = make(fast_write_level=2)
    r = c.lookup(0, 8, True, 0.0)
    assert r.kind == HIT and r.fast and r.cmd_hit and r.wait_until == 0.0
    c.write_done(r, 0.05)                   # the destage ends at 50 ms
    r = c.lookup(1000, 8, False, 0.02)      # a read miss waits for it
    assert r.wait_until == 0.05 and r.kind == MISS
    r = c.lookup(0, 8, False, 0.02)         # so does a read hit on the dirty data,
    assert r.kind == HIT and r.wait_until == 0.05 and not r.cmd_hit   # with the miss overhead


def test_fast_write_append_joins_the_destage():
    c, m = make(fast_write_level=2)
    c.write_done(c.lookup(0, 8, True, 0.0), 0.05)
    r = c.lookup(8, 8, True, 0.02)
    assert r.append and r.fast and r.wait_until == 0.0
    c.write_done(r, 0.06)
    assert (0, 16) in c.contents(0.02)
    r = c.lookup(100, 8, True, 0.03)        # not an append: waits for the destage
    assert not r.append and r.wait_until == 0.06


def test_write_combining_off_means_no_append():
    c, m = make(fast_write_level=2, combine_seq_writes=False)
    c.write_done(c.lookup(0, 8, True, 0.0), 0.05)
    r = c.lookup(8, 8, True, 0.02)
    assert not r.append and r.wait_until == 0.05


def test_fast_write_level_1_disksim_code_semantics():
    c, m = make(fast_write_level=1)
    r = c.lookup(0, 8, True, 0.0)
    assert r.fast and r.cmd_hit           # DiskSim's code: every write reported early


def test_fast_write_level_1_documented_semantics():
    c, m = make(fast_write_level=1, limited_fastwrite="documented")
    r = c.lookup(0, 8, True, 0.0)
    assert not r.fast and not r.cmd_hit and r.kind == MISS
    c.write_done(r, 0.05)
    r = c.lookup(8, 8, True, 0.02)        # appends to the data being written: early
    assert r.fast and r.append and r.cmd_hit


def test_read_hits_on_write_data_off():
    c, m = make(fast_write_level=2, read_hits_on_write_data=False)
    c.write_done(c.lookup(0, 8, True, 0.0), 0.05)
    r = c.lookup(0, 8, False, 0.1)
    assert r.kind == MISS


def test_write_stops_prefetch_even_before_minimum_when_it_hits_the_segment():
    c, m = make(min_read_ahead=30, fast_write_level=2)
    miss_read(c, 0, 10, 0.0, 0.010)
    r = c.lookup(12, 2, True, 0.0155)       # overlaps the segment being prefetched
    assert r.wait_until == 0.0 and r.head_free == pytest.approx(0.016)
    c2, _ = make(min_read_ahead=30, fast_write_level=2)
    miss_read(c2, 0, 10, 0.0, 0.010)
    r = c2.lookup(5000, 2, True, 0.0155)    # elsewhere: the minimum holds
    assert r.wait_until == pytest.approx(0.040)


def test_write_invalidates_stale_copies():
    c, m = make(continuous_read=0, fast_write_level=2)
    miss_read(c, 0, 20, 0.0, 0.01)
    c.write_done(c.lookup(5, 5, True, 0.1), 0.2)
    contents = c.contents(1.0)
    assert (5, 10) in contents
    assert not any(s < 10 and 5 < e for (s, e) in contents if (s, e) != (5, 10))


def test_write_empties_every_read_segment_it_overlaps_whole():
    """DiskSim 4.0 (disk_buffer_set_segment) empties a clean segment a write overlaps;
    it does not trim the sectors out of it, so the read-ahead past the write is gone."""
    c, m = make(continuous_read=0, fast_write_level=2, segments=3)
    miss_read(c, 0, 20, 0.0, 0.01)
    c.write_done(c.lookup(5, 5, True, 0.1), 0.2)
    assert c.lookup(12, 4, False, 1.0).kind == MISS
    assert c.contents(1.0) == [(5, 10)]


@pytest.mark.parametrize("free_blocks", [False, True])
def test_a_segment_extent_reaches_back_to_where_its_miss_began(free_blocks):
    """A stream segment no longer holds the sectors it sent to the host, but a write to them
    still empties it; with "Read any free blocks" the extent starts at the track's first
    sector (DiskSim starts the access there, disk_buffer_seekdone)."""
    c, m = make(fast_write_level=2, segments=3, max_read_ahead=50,
                read_ahead_over_requested=1, read_any_free_blocks=free_blocks)
    miss_read(c, 1010, 10, 0.0, 0.010)            # then reads ahead to 1070
    assert c.lookup(1030, 4, False, 1.0).kind == HIT
    c.write_done(c.lookup(1012, 4, True, 1.1), 1.2)    # in the sectors already sent
    assert c.lookup(1040, 4, False, 2.0).kind == MISS
    c.read_done(c._res, 2.01)
    c.write_done(c.lookup(1005, 2, True, 3.0), 3.1)    # before the miss, on its track
    assert (c.lookup(1050, 4, False, 4.0).kind == MISS) == free_blocks


def test_dedicated_write_segment():
    c, m = make(segments=3, separate_write_segment=True, fast_write_level=2, continuous_read=0)
    miss_read(c, 0, 10, 0.0, 0.01)
    miss_read(c, 100, 10, 0.1, 0.11)
    c.write_done(c.lookup(500, 8, True, 0.2), 0.3)
    # both read segments survive the write
    assert c.lookup(0, 10, False, 1.0).kind == HIT
    assert c.lookup(100, 10, False, 1.1).kind == HIT
    # reads never use the write segment (DiskSim): a miss
    assert c.lookup(500, 8, False, 1.2).kind == MISS


def test_write_segments_limit():
    c, m = make(segments=3, write_segments=1, fast_write_level=2, continuous_read=0)
    c.write_done(c.lookup(0, 8, True, 0.0), 0.05)
    r = c.lookup(100, 8, True, 0.01)        # the only write segment is dirty
    assert r.seg.dirty_until == 0.05 and r.wait_until == 0.05


# ---------------------------------------------------------------- property


ops = st.lists(st.tuples(st.booleans(), st.integers(0, 300), st.integers(1, 40),
                         st.floats(0.0, 0.05)), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops=ops, mode=st.integers(0, 4), segs=st.integers(1, 4), size=st.integers(20, 120),
       fw=st.integers(0, 2), in_sector=st.booleans(), rhowd=st.booleans(),
       almost=st.booleans(), idle=st.booleans(), over=st.integers(-1, 1))
def test_never_a_hit_on_a_sector_not_read_or_written(ops, mode, segs, size, fw, in_sector,
                                                     rhowd, almost, idle, over):
    m = FakeMedia(spt=50, heads=2, dt=0.0005, gap=0.0002)
    p = CacheParams(segments=segs, segment_size=size, continuous_read=mode,
                    max_read_ahead=min(size, 60), fast_write_level=fw,
                    stop_prefetch_in_sector=in_sector, read_hits_on_write_data=rhowd,
                    almost_read_hits=almost, read_ahead_on_idle_hit=idle,
                    read_ahead_over_requested=over)
    c = SegmentCache(p, m, capacity=400)
    known = set()          # sectors the drive read or the host wrote
    seen_runs = 0
    now = 0.0
    for write, lbn, n, gap in ops:
        n = min(n, 400 - lbn)
        now += gap
        # sectors of prefetch runs that have passed under the head by now (an
        # over-estimate once a prefetch was stopped, which only weakens the check)
        for _k, _l, _c, _t, runs in m.log:
            for lbn0, cnt, _ta, t_first, dt in runs:
                for i in range(cnt):
                    if t_first + (i + 1) * dt <= now + 1e-12:
                        known.add(lbn0 + i)
        r = c.lookup(lbn, n, write, now)
        if not write and r.kind != MISS:
            for s in range(lbn, lbn + r.cached):
                assert s in known, (s, r, c.contents(now))
        if r.head_lbn >= 0:
            assert r.head_free <= max(now, r.wait_until) + 0.01
        t_end = max(now, r.wait_until) + 0.004 + n * 0.0005
        if write:
            c.write_done(r, t_end)
            known.update(range(lbn, lbn + n))
        elif r.media_n:
            c.read_done(r, t_end)
            known.update(range(r.media_lbn, r.media_lbn + r.media_n))
            known.update(range(lbn, lbn + n))
        elif r.prefetch_after:
            c.hit_done(r, t_end)
        now = t_end
        for a, b in c.contents(now):
            assert b - a <= size


@pytest.mark.parametrize("over, overhead", [(1, "miss"), (-1, "miss"), (0, "hit")])
def test_random_hit_overhead_follows_the_segment_kind(over, overhead):
    """"auto": a hit that does not continue the previous request pays the miss overhead on
    stream segments ("Read-ahead over requested" 1 or -1) and the hit overhead otherwise;
    an explicit choice overrides it."""
    assert CacheParams(read_ahead_over_requested=over).random_hit_overhead == overhead
    assert CacheParams(read_ahead_over_requested=over,
                       random_hit_overhead="hit").random_hit_overhead == "hit"
    with pytest.raises(ValueError, match="random_hit_overhead: expected 'auto', 'miss' or"):
        CacheParams(random_hit_overhead="sometimes")
