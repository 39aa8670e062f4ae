"""MechanicalDrive with DiskSim's controller overheads, on-board cache and drive-side
queue (the DiskSimDrive path): read-ahead hits, write-back with destage, the overhead
case chosen, and tagged queueing with SPTF behind the block layer's interface."""

import pytest

from blksim.disk_models.cache import HIT, MISS
from blksim.disk_models.drive import DiskSimDrive, MechanicalDrive, make_drive
from blksim.disk_models.presets import load_preset
from blksim.disk_models.spec import DriveSpec
from simhelpers import make_config, run_config

OVH = dict(read_hit_after_read_ms=0.1, read_hit_after_write_ms=0.2,
           read_miss_after_read_ms=0.3, read_miss_after_write_ms=0.4,
           write_hit_after_read_ms=0.5, write_hit_after_write_ms=0.6,
           write_miss_after_read_ms=0.7, write_miss_after_write_ms=0.8,
           read_completion_ms=0.01, write_completion_ms=0.02, bus_sector_ms=0.01)
CACHE = dict(enabled=True, segments=4, write_segments=1, segment_size_sectors=512,
             continuous_read=3, read_ahead_max_sectors=256, fast_write_level=0)


def variant(cache=None, overheads=None, policy=None, qd=1):
    d = load_preset("cheetah10k7").to_dict()
    d.pop("overheads", None)
    d.pop("cache", None)
    if cache is not None:
        d["cache"] = cache
    if overheads is not None:
        d["overheads"] = overheads
    if policy is not None:
        d["queue"] = {"policy": policy}
    d["queue_depth"] = qd
    return DriveSpec.from_dict(d, "variant")


class Rq:
    def __init__(self, sector, n=8, write=False):
        self.sector, self.nr_sectors, self.write = sector, n, write

    def __repr__(self):
        return f"Rq({self.sector})"


def one(d, rq, t):
    """Submit ``rq`` alone at ``t``; return (completion time, breakdown)."""
    d.submit(rq, t)
    done = d.next_event_time()
    assert d.pop_completed(done) == [rq]
    return done, d.service_breakdown


def test_plain_presets_keep_the_plain_drive():
    assert type(make_drive(load_preset("cheetah10k7"))) is MechanicalDrive
    assert type(make_drive(variant(overheads=OVH))) is DiskSimDrive
    assert type(make_drive(load_preset("hp_c2247a"))) is DiskSimDrive


def test_sequential_read_after_a_miss_hits_the_read_ahead():
    d = make_drive(variant(cache=CACHE, overheads=OVH), seed=1)
    t1, _ = one(d, Rq(100_000), 0.0)
    assert d._cache.stats["read_misses"] == 1
    t2, b = one(d, Rq(100_008), t1 + 0.005)   # read-ahead has run 5 ms since
    assert d._cache.stats["read_hits"] == 1
    # hit after read overhead + 8 sectors on the bus + completion; no mechanics
    assert t2 - (t1 + 0.005) == pytest.approx(0.1e-3 + 8 * 0.01e-3 + 0.01e-3, rel=1e-9)
    assert b["seek"] == b["rotation"] == b["transfer"] == 0.0


def test_fast_write_completes_at_bus_time_and_the_next_request_waits_for_the_destage():
    d = make_drive(variant(cache=dict(CACHE, fast_write_level=2), overheads=OVH), seed=2)
    t_w, _ = one(d, Rq(5_000_000, 16, write=True), 0.0)
    # write hit overhead (after read: the first request) + 16 sectors on the bus + completion
    assert t_w == pytest.approx(0.5e-3 + 16 * 0.01e-3 + 0.02e-3, rel=1e-9)
    destage = d._cache._destage_until
    assert destage > t_w + 1e-3          # the media write goes on after the completion
    t_r, b = one(d, Rq(20_000_000), t_w)
    assert t_r > destage                 # the read's media access waited for it
    assert b["seek"] > 0


@pytest.mark.parametrize("first_write, write, expect_ms", [
    (False, False, 0.3), (True, False, 0.4), (False, True, 0.7), (True, True, 0.8)])
def test_overhead_case_follows_direction_and_previous_direction(first_write, write, expect_ms):
    d = make_drive(variant(overheads=OVH), seed=3)   # no cache: every request misses
    t, _ = one(d, Rq(1_000_000, 8, first_write), 0.0)
    _, b = one(d, Rq(9_000_000, 8, write), t + 0.01)
    complete = 0.02 if write else 0.01
    assert b["overhead"] == pytest.approx((expect_ms + complete) / 1e3, rel=1e-9)
    assert b["total"] == pytest.approx(b["overhead"] + b["queue"] + b["seek"] + b["rotation"]
                                       + b["transfer"] + b["bus"], abs=1e-12)


def test_read_hit_uses_the_hit_overhead():
    d = make_drive(variant(cache=CACHE, overheads=OVH), seed=4)
    t, _ = one(d, Rq(300_000, 8), 0.0)
    _, b = one(d, Rq(300_000, 8), t + 0.001)     # the same sectors again: in the buffer
    assert d._cache.stats["read_hits"] == 1
    assert b["overhead"] == pytest.approx((0.1 + 0.01) / 1e3, rel=1e-9)


def test_sptf_serves_the_shortest_positioning_time_first():
    spec = variant(overheads=OVH, policy="sptf_opt", qd=4)
    d = make_drive(spec, seed=5)
    cap = spec.capacity
    rqs = [Rq(cap - 1000), Rq(cap // 2), Rq(cap // 3), Rq(5000)]
    for rq in rqs:
        d.submit(rq, 0.0)
    assert not d.can_accept() and d.outstanding() == 4
    # expected order: greedy by positioning time from where the head is each time
    order = []
    probe = make_drive(spec, seed=5)
    left = list(rqs)
    t = 0.0
    while left:
        best = min(left, key=lambda r: probe.positioning_time(r, t))
        left.remove(best)
        order.append(best)
        probe.submit(best, t)
        t = probe.next_event_time()
        probe.pop_completed(t)
    got = []
    last = 0.0
    while d.outstanding():
        t = d.next_event_time()
        assert t >= last
        last = t
        done = d.pop_completed(t)
        assert len(done) == 1
        got.extend(done)
        assert d.can_accept()
    assert got == order
    assert got != rqs                      # reordered: completions out of arrival order
    assert d.next_event_time() is None and d.pop_completed(1e9) == []


def test_fcfs_queue_keeps_arrival_order():
    d = make_drive(variant(overheads=OVH, qd=4), seed=6)
    rqs = [Rq(9_000_000), Rq(100), Rq(4_000_000)]
    for rq in rqs:
        d.submit(rq, 0.0)
    assert d.pop_completed(1e9) == rqs
    with pytest.raises(Exception):
        for _ in range(5):
            d.submit(Rq(10), 2e9)


def test_block_layer_runs_a_tcq_drive_to_the_end():
    spec = variant(cache=CACHE, overheads=OVH, policy="sptf_opt", qd=8)
    cfg = make_config(jobs=[{"name": "r", "rw": "randread", "bs": "4k", "rate_iops": 300,
                             "number_ios": 2000}], scheduler="noop",
                      device={"drive": "cheetah10k7"})
    out, seen = run_config(cfg, device=make_drive(spec, seed=1), collect=True)
    assert out.metrics.read.ios == 2000 and len(seen) == 2000
    # some completions came out of submission order (the drive reordered)
    order = [b.t_dispatch for b in seen]
    assert any(b < a for a, b in zip(order, order[1:]))
    assert all(b.t_complete >= b.t_dispatch for b in seen)


@pytest.mark.parametrize("lwm", [0.0, 0.5, 1.0])
def test_write_through_media_write_starts_at_the_low_water_mark(lwm):
    # a slow bus (1 ms a sector): the media write may start once the low-water-mark share of
    # the data is in, and never ends before the last sector has crossed the bus
    ovh = dict(OVH, bus_sector_ms=1.0)
    d = make_drive(variant(cache=dict(CACHE, low_water_mark=lwm, watermark_by_request_size=True),
                               overheads=ovh), seed=7)
    n = 16
    t_bus = 0.7e-3                       # write miss overhead after read (first request)
    t_start = d._write_start(n, t_bus, 1e-3, False)
    need = max(1, int(lwm * n + 0.999999))
    assert t_start == pytest.approx(t_bus + need * 1e-3, rel=1e-12)
    t_done, b = one(d, Rq(5_000_000, n, write=True), 0.0)
    assert t_done >= t_bus + n * 1e-3 + 0.02e-3 - 1e-12
    if lwm == 1.0:                       # the whole request first: no overlap
        assert t_start == pytest.approx(t_bus + n * 1e-3, rel=1e-12)


@pytest.mark.parametrize("bus_ms", [0.05, 0.3, 1.0])
def test_write_through_sector_never_passes_before_its_data(bus_ms):
    # DiskSim writes a sector only if its data are in the buffer when it starts passing under
    # the head, else the head goes round once more for it; the runs must say so sector by sector
    d = make_drive(variant(cache=CACHE, overheads=dict(OVH, bus_sector_ms=bus_ms)), seed=3)
    bw = bus_ms / 1e3
    lbn, n, t_bus = 5_000_000, 300, 1e-3
    runs = d._runs(lbn, n, 0.0, d.cur_cyl, d.cur_head, True, t_bus + bw, avail=(t_bus, bw))
    assert sum(r[1] for r in runs) == n and runs[0][0] == lbn
    end = 0.0
    for lbn0, m, t_arr, t_first, dt, _cyl, _head in runs:
        i0 = lbn0 - lbn
        assert t_first >= end - 1e-12            # in order, no overlap
        for j in range(m):
            assert t_first + j * dt >= t_bus + (i0 + j + 1) * bw - 1e-12
        end = t_first + m * dt
    rev = d._rev
    if bw < rev / d._layout_locate(lbn)[5]:      # a bus faster than the media never stalls it
        assert len(runs) == len({d._layout_locate(r[0])[:2] for r in runs})
    else:                                        # a slower one costs whole revolutions
        assert len(runs) > len({d._layout_locate(r[0])[:2] for r in runs})


@pytest.mark.parametrize("n, need", [(4, 4), (10, 10), (44, 10), (45, 15), (200, 15)])
def test_extra_write_disconnect_gate(n, need):
    # with "Extra write disconnect" DiskSim writes nothing before the buffer holds min(n, 10)
    # sectors (n < 45) or 15 (disk_buffer_block_available); the low-water mark is not used
    ovh = dict(OVH, bus_sector_ms=1.0, extra_write_disconnect=True)
    d = make_drive(variant(cache=dict(CACHE, low_water_mark=0.75), overheads=ovh), seed=7)
    assert d._write_start(n, 0.5, 1e-3, False) == pytest.approx(0.5 + need * 1e-3, rel=1e-12)


def test_extra_write_disconnect_path():
    # a write after a write it does not continue takes DiskSim's extra-disconnect path: its
    # data come after extradisc command + 1st disconnect + inter-disconnect delay + first
    # reselect + data preparation, and it ends with the 2nd disconnect and other reselect
    xo = dict(extra_write_disconnect=True, extradisc_command_ms=0.6, extradisc_disconnect_ms=0.05,
              extradisc_inter_disconnect_ms=0.4, extradisc_second_disconnect_ms=0.13,
              extradisc_seek_delta_ms=0.25, first_reselect_ms=0.16, other_reselect_ms=0.12,
              data_preparation_ms=0.025, write_disconnect_ms=0.17)
    ovh = dict(OVH, bus_sector_ms=0.2, **xo)
    runs = {}
    for second in (4_000_000 + 8, 1_000_000):      # continues the first write / does not
        d = make_drive(variant(cache=CACHE, overheads=ovh), seed=2)
        t1, _ = one(d, Rq(4_000_000, 8, write=True), 0.0)
        t2, _ = one(d, Rq(second, 8, write=True), t1 + 0.5)
        runs[second] = t2 - (t1 + 0.5)
        assert d._last_wend == second + 8
    # both end no earlier than their data + disconnect + reselect + completion
    assert runs[1_000_000] >= (0.6 + 0.05 + 0.4 + 0.16 + 0.025 + 8 * 0.2 + 0.13 + 0.12) / 1e3 - 1e-12


@pytest.mark.parametrize("free", [False, True])
def test_read_any_free_blocks_keeps_the_sectors_passed_while_waiting(free):
    """"Read any free blocks": sectors of the track that pass under the head while a read
    miss waits for its first sector join the segment, so a read just before it hits."""
    cache = dict(CACHE, continuous_read=0, read_any_free_blocks=free)
    d = make_drive(variant(cache=cache, overheads=OVH), seed=0)
    base = 2_000_000
    first, end = d.track_bounds(base)
    lbn = first + (end - first) // 2          # mid-track: room for free blocks before it
    one(d, Rq(lbn, 8), 0.0)
    seg = d._cache._lru[-1]                   # the segment the miss used
    assert seg.end == lbn + 8
    if free:
        assert first <= seg.start < lbn       # some sectors before the request came in
    else:
        assert seg.start == lbn
    one(d, Rq(lbn - 1, 1), 1.0)
    assert (d._cache.stats["read_hits"] == 1) == free


@pytest.mark.parametrize("random_overhead, jump_ms", [("miss", 0.3), ("hit", 0.1)])
def test_read_hit_not_continuing_the_previous_request_takes_the_miss_overhead(
        random_overhead, jump_ms):
    d = make_drive(variant(cache=CACHE, overheads=OVH), seed=5)
    d._cache.p.random_hit_overhead = random_overhead
    t, _ = one(d, Rq(100_000, 8), 0.0)
    # the read-ahead has long finished: a forward jump inside the buffered data
    t, b = one(d, Rq(100_040, 8), t + 0.03)
    assert d._cache.stats["read_hits"] == 1 and d._cache._res.random == (random_overhead == "miss")
    assert b["overhead"] == pytest.approx((jump_ms + 0.01) / 1e3, rel=1e-9)
    assert b["seek"] == b["rotation"] == b["transfer"] == 0.0
    # the next request continues it: the hit overhead
    _, b = one(d, Rq(100_048, 8), t + 0.03)
    assert d._cache.stats["read_hits"] == 2 and not d._cache._res.random
    assert b["overhead"] == pytest.approx((0.1 + 0.01) / 1e3, rel=1e-9)


@pytest.mark.parametrize("min_seek_ms", [0.0, 3.0])
def test_write_positioning_takes_at_least_the_minimum_seek_delay(min_seek_ms):
    """"Minimum seek delay" (DiskSim's disk_initiate_seek mintime, set for writes): a write
    to the track the head is on reaches it no earlier than that long after the command;
    reads are not affected."""
    d = make_drive(variant(cache=dict(CACHE, fast_write_level=0),
                                overheads=dict(OVH, minimum_seek_delay_ms=min_seek_ms)), seed=3)
    lbn = 2_000_000
    one(d, Rq(lbn, 1), 0.0)                   # the head on the track
    t = 1.0
    t_done, b = one(d, Rq(lbn + 8, 1, write=True), t)
    assert b["seek"] == pytest.approx(min_seek_ms / 1e3, abs=1e-12)
    t_done, b = one(d, Rq(lbn + 20, 1), t_done + 0.5)
    assert b["seek"] == 0.0


@pytest.mark.parametrize("seq_gate_delay", [True, False])
def test_write_on_the_head_track_waits_the_minimum_seek_delay_after_its_data(seq_gate_delay):
    """blksim's rule beside DiskSim's minimum seek delay: a write-through write on the track
    the head is already on writes its first sector no earlier than "Minimum seek delay"
    after its data gate (here: its first sector in the buffer); False keeps DiskSim's rule
    alone (at least that delay after the command)."""
    ovh = dict(OVH, minimum_seek_delay_ms=1.0, bus_sector_ms=0.2)
    cache = dict(CACHE, fast_write_level=0, low_water_mark=1.0)   # gate: all the data
    gaps = []
    for seed in range(8):
        d = make_drive(variant(cache=cache, overheads=ovh), seed=seed)
        d._seq_gate_delay = seq_gate_delay
        lbn = 2_000_000
        one(d, Rq(lbn, 1), 0.0)               # the head on the track
        t = 1.0
        _, b = one(d, Rq(lbn + 8, 10, write=True), t)
        gaps.append(b["seek"] + b["rotation"])  # from the end of the command to the first sector
    gate = 10 * 0.2e-3                         # the whole write over the bus
    rev = 60.0 / d.spec.rpm
    lo = gate + (1.0e-3 if seq_gate_delay else 0.0)
    assert all(lo - 1e-9 <= g < lo + rev for g in gaps)
    if not seq_gate_delay:
        assert any(g < gate + 1.0e-3 for g in gaps)
