"""The drive-side recipe of docs/drive-cache.md, run on a toy drive: closed-loop
sequential reads become cache hits, a fast write is reported from the buffer and
the next request waits for its destage, an append joins it."""

import pytest

from blksim.disk_models.cache import MISS, CacheParams, SegmentCache
from blksim.disk_models.overheads import ControllerOverheads
from test_cache import FakeMedia


class ToyDrive:
    """Mechanics from FakeMedia (constant seek + latency, 1 ms per sector); the
    request path follows the integration recipe step by step."""

    def __init__(self, cache, ovh, media):
        self.cache, self.o, self.m = cache, ovh, media
        self.mech_free = 0.0
        self.prev_write = False

    def _media(self, lbn, n, t_free, t_data=0.0):
        runs = self.m.position(lbn, n, t_free)
        # a write cannot put a sector on the media before its data are in the buffer
        lbn0, cnt, t_arr, t_first, dt = runs[0]
        shift = max(0.0, t_data - t_first)
        t_first += shift
        t_last = runs[-1][3] + shift + runs[-1][1] * dt
        return t_first, t_last

    def service(self, lbn, n, write, now):
        c, o = self.cache, self.o
        res = c.lookup(lbn, n, write, now)                              # step 1
        if res.head_lbn >= 0:                                           # step 2
            self.mech_free = res.head_free
        ovh = o.command_overhead(write, res.cmd_hit, self.prev_write)   # step 3
        t_cmd = now + ovh
        t_miss = now + o.command_overhead(write, False, self.prev_write)
        bus = o.bus_sector
        wait = res.wait_until
        if not write:
            if res.kind != MISS and res.media_n == 0:                   # from the buffer
                t_bus = max(t_cmd, wait)
                t_end = max(t_bus + n * bus, res.t_ready + bus)
                if res.prefetch_after:
                    c.hit_done(res, max(t_miss, self.mech_free, wait))
            else:                                                        # media read
                t_mech = max(t_miss, self.mech_free, wait)
                t_first, t_last = self._media(res.media_lbn, res.media_n, t_mech)
                self.mech_free = t_last
                if res.kind == MISS:
                    t_end = max(t_last + bus, t_first + self.m.dt + n * bus)
                else:
                    t_end = max(max(t_cmd, wait) + n * bus, t_last + bus)
                c.read_done(res, t_last)
            t_done = t_end + o.completion_overhead(False)
        else:
            t_bus = t_cmd if res.append else max(t_cmd, wait)
            t_data = t_bus + n * bus
            t_mech = max(t_cmd, self.mech_free, 0.0 if res.append else wait)
            _t_first, t_last = self._media(lbn, n, t_mech, t_data)
            self.mech_free = t_last
            c.write_done(res, t_last)
            t_done = (t_data if res.fast else t_last) + o.completion_overhead(True)
        self.prev_write = write
        return t_done


def drive(**kw):
    media = FakeMedia(dt=0.001, seek=0.002, latency=0.003)
    base = dict(segments=2, segment_size=200, continuous_read=3, max_read_ahead=100)
    base.update(kw)
    cache = SegmentCache(CacheParams(**base), media, capacity=10**6)
    ovh = ControllerOverheads(read_hit_after_read_ms=0.1, read_miss_after_read_ms=0.5,
                              read_miss_after_write_ms=0.5, read_hit_after_write_ms=0.1,
                              write_hit_after_read_ms=0.2, write_hit_after_write_ms=0.2,
                              write_miss_after_read_ms=0.6, write_miss_after_write_ms=0.6,
                              read_complete_ms=0.05, write_complete_ms=0.05,
                              bus_sector_ms=0.01)
    return ToyDrive(cache, ovh, media)


def test_sequential_reads_closed_loop_hit_after_the_first():
    d = drive()
    now = 0.0
    resp = []
    for i in range(5):
        t = d.service(8 * i, 8, False, now)
        resp.append(t - now)
        now = t + 0.02             # think time: the prefetch stays ahead
    # first: 0.5 miss overhead + 2 seek + 3 latency + 8 sectors + 1 bus + 0.05
    assert resp[0] == pytest.approx(0.0135 + 0.00001 + 0.00005)
    # then whole hits: 0.1 hit overhead + 8 x 0.01 bus + 0.05 completion
    for r in resp[1:]:
        assert r == pytest.approx(0.0001 + 0.00008 + 0.00005)


def test_fast_write_then_read_waits_for_the_destage():
    d = drive(fast_write_level=2)
    t_w = d.service(1000, 8, True, 0.0)
    # reported once the data are in: 0.2 overhead + 8 x 0.01 bus + 0.05
    assert t_w == pytest.approx(0.0002 + 0.00008 + 0.00005)
    destage_end = d.mech_free                     # 0.2 + 2 + 3 + 8 ms
    assert destage_end == pytest.approx(0.0132)
    t_r = d.service(5000, 8, False, t_w + 0.001)
    # the read miss's mechanics start after the destage
    assert t_r == pytest.approx(destage_end + 0.005 + 0.008 + 0.00001 + 0.00005)


def test_fast_write_append_is_reported_without_waiting():
    d = drive(fast_write_level=2)
    t_w = d.service(1000, 8, True, 0.0)
    t_a = d.service(1008, 8, True, t_w + 0.001)
    assert t_a - (t_w + 0.001) == pytest.approx(0.0002 + 0.00008 + 0.00005)


def test_write_through_reports_after_the_media():
    d = drive(fast_write_level=0)
    t_w = d.service(1000, 8, True, 0.0)
    assert t_w == pytest.approx(0.0006 + 0.005 + 0.008 + 0.00005)
