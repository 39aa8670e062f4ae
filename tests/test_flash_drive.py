"""The flash drive as a whole: the read tail behind programs and erases (and suspension
shrinking it), the SLC cache's burst speed, GC figures, and properties over random
mixes (every request completes once, never before it was submitted, same input same
times)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from tests.flash_helpers import Rq, drive, percentile, run_closed, run_open, tiny

US = 1e-6


def _reads_beside_a_writer(spec, writer: bool, seed=3, reads=300, gap=400 * US):
    """Random 4 KiB reads arriving every ``gap``; with ``writer``, random 4 KiB writes
    kept 16 deep all along. Returns the reads' latencies."""
    dev = drive(spec, "full")
    rng = random.Random(seed)
    n = spec.capacity_sectors // 8
    arrivals = [(i * gap, Rq(0, rng.randrange(n) * 8, 8, tag="r")) for i in range(reads)]
    end = reads * gap
    now, i, outstanding_w = 0.0, 0, 0
    done = []
    pending = []
    while i < len(arrivals) or dev.outstanding() or pending:
        if writer and now < end:
            while outstanding_w < 16 and dev.can_accept():
                w = Rq(1, rng.randrange(n) * 8, 8, tag="w")
                w.t_submit = now
                dev.submit(w, now)
                outstanding_w += 1
        t_dev = dev.next_event_time()
        t_arr = arrivals[i][0] if i < len(arrivals) else None
        if t_arr is not None and (t_dev is None or t_arr <= t_dev):
            now = t_arr
            pending.append(arrivals[i][1])
            i += 1
        else:
            now = t_dev
            for rq in dev.pop_completed(now):
                rq.t_done = now
                done.append(rq)
                if rq.tag == "w":
                    outstanding_w -= 1
        while pending and dev.can_accept():
            rq = pending.pop(0)
            rq.t_submit = now
            dev.submit(rq, now)
    lat = [r.t_done - r.t_submit for r in done if r.tag == "r"]
    assert len(lat) == reads
    return lat, dev


def test_reads_behind_programs_and_erases_show_a_tail_that_suspension_shrinks():
    spec = tiny()
    alone, _ = _reads_beside_a_writer(spec, False)
    mixed, dev = _reads_beside_a_writer(spec, True)
    assert dev.figures()["gc_runs"] > 0 and dev.figures()["erases"] > 0
    p99_alone, p99_mixed = percentile(alone, 0.99), percentile(mixed, 0.99)
    # alone: a read waits for at most a few others (~0.1 ms); beside the writer it
    # waits behind a 500 us program or a 3 ms erase
    assert p99_alone < 0.3e-3
    assert p99_mixed > 0.5e-3
    suspended, _ = _reads_beside_a_writer(tiny(suspend=True), True)
    p99_susp = percentile(suspended, 0.99)
    assert p99_susp < p99_mixed / 2


def _write_rate(spec, units, depth=32):
    """MB/s of ``units`` sequential 4 KiB writes at ``depth``, in chunks of 64 units:
    [(chunk's MB/s)]."""
    dev = drive(spec)
    rates = []
    now = 0.0
    for chunk in range(units // 64):
        rqs = [Rq(1, (chunk * 64 + i) * 8, 8) for i in range(64)]
        start = now
        done = run_open(dev, [(now, rq) for rq in rqs])
        now = max(r.t_done for r in done)
        rates.append(64 * 4096 / (now - start) / 1e6)
    return rates, dev


def test_slc_cache_absorbs_a_burst_at_slc_speed_then_falls_to_tlc_speed():
    """SLC: each die programs a flash page on both planes (8 units over the channel)
    per 8 x transfer + tPROG(SLC); after the cache, tPROG(TLC). 4 dies."""
    spec = tiny(slc_cache="1m", channel_mts=1000)
    x = 4096 / 1000e6
    slc_rate = 4 * 8 * 4096 / (8 * x + 150 * US) / 1e6
    tlc_rate = 4 * 8 * 4096 / (8 * x + 500 * US) / 1e6
    cache_units = spec.slc_cache_blocks * 8 * (spec.geometry.pages_per_block // 3)
    rates, dev = _write_rate(spec, cache_units + 1024)
    in_cache = rates[1:cache_units // 64 - 2]          # steady chunks inside the cache
    after = rates[cache_units // 64 + 2:]
    assert sum(in_cache) / len(in_cache) == pytest.approx(slc_rate, rel=0.15)
    assert sum(after) / len(after) == pytest.approx(tlc_rate, rel=0.15)
    assert dev.figures()["slc_cache_hit_ratio"] == pytest.approx(
        cache_units / (cache_units + 1024), rel=0.05)


def test_figures_report_gc_erases_utilisation_and_a_bounded_free_block_series():
    spec = tiny()
    _, dev = _reads_beside_a_writer(spec, True, reads=300)
    f = dev.figures()
    assert f["write_amplification"] > 1.0 and f["erases"] > 0
    assert dev.ftl.emergencies == 0            # the dies' collection kept up
    assert f["gc_runs"] == f["gc_foreground_runs"] + f["gc_background_runs"] > 0
    assert f["gc_time_s"] > 0 and len(dev.gc_intervals()) > 0
    start, end, die = dev.gc_intervals()[0]
    assert end > start and 0 <= die < 4
    assert len(f["utilisation"]["dies"]) == 4 and len(f["utilisation"]["channels"]) == 2
    assert all(0 <= u <= 1 for u in f["utilisation"]["dies"])
    assert 0 < len(f["free_blocks_series"]) <= 256
    d = dev.describe()
    assert d["rotational"] is False and d["figures"]["erases"] == f["erases"]


_OPS = st.lists(st.tuples(st.sampled_from([0, 0, 1, 1, 2, 3]),      # read write flush discard
                          st.integers(0, 3000), st.integers(1, 64), st.booleans(),
                          st.floats(0, 5e-3)), min_size=1, max_size=60)


def _run_mix(ops, plp, depth, buffer):
    spec = tiny(plp=plp, write_buffer=buffer)
    dev = drive(spec, "full", queue_depth=depth)
    cap = spec.capacity_sectors
    arrivals = []
    for k, (op, sector, size, fua, t) in enumerate(ops):
        sector = min(sector * 8, cap - 8)
        size = min(size * 8, cap - sector)
        arrivals.append((t, Rq(op, sector, size, fua=fua, hctx=k % 4, tag=k)))
    done = run_open(dev, arrivals)
    return arrivals, done, dev


@settings(max_examples=40, deadline=None)
@given(_OPS, st.booleans(), st.sampled_from([1, 4, 32]), st.sampled_from([0, "16k", "256k"]))
def test_every_request_completes_once_not_before_its_submission(ops, plp, depth, buffer):
    arrivals, done, dev = _run_mix(ops, plp, depth, buffer)
    assert sorted(r.tag for r in done) == list(range(len(ops)))
    assert all(r.t_done >= r.t_submit for r in done)
    assert dev.outstanding() == 0
    if not plp or buffer == 0:
        # nothing left unwritten behind a flush or FUA: the waiters are gone
        assert dev.buffer.waiters == []
    again = _run_mix(ops, plp, depth, buffer)[1]
    assert [(r.tag, r.t_done) for r in again] == [(r.tag, r.t_done) for r in done]


def test_a_flash_page_of_consecutive_units_shares_a_plane_and_reads_as_one():
    spec = tiny()
    dev = drive(spec)
    xs = [dev._ftl_page(u) for u in range(spec.logical_pages)]
    assert sorted(xs) == list(range(spec.logical_pages))          # a renumbering
    planes = spec.geometry.planes
    for g in range(0, spec.logical_pages // 4, 7):
        assert len({dev.ftl.plane_for_write(xs[4 * g + r]) for r in range(4)}) == 1
    # written in order, 16 KiB lands in one flash page: one read, one tR
    done = run_open(dev, [(0.0, Rq(1, 0, 32)), (0.0, Rq(2))])
    assert len(done) == 2
    ppns = [dev.ftl.lookup(x) for x in xs[:4]]
    assert len({p // 4 for p in ppns}) == 1
    reads = dev.backend.flash_reads
    r = Rq(0, 0, 32)
    run_open(dev, [(1.0, r)])
    assert dev.backend.flash_reads == reads + 1


def test_sustained_random_writes_on_a_steady_drive_need_no_emergency_collection():
    """Writes keep the dies programming without a pause: background collection never
    finds them idle, so the foreground threshold must start (or hurry) collection in
    time, before the FTL would have to reclaim space by itself."""
    spec = tiny()
    dev = drive(spec, "steady")
    rng = random.Random(5)
    n = spec.capacity_sectors // 8
    done, _ = run_closed(dev, lambda i, th: Rq(1, rng.randrange(n) * 8, 8), 32, 6000)
    assert len(done) == 6000
    f = dev.figures()
    assert f["gc_foreground_runs"] > 0 and dev.ftl.emergencies == 0
    assert dev.ftl.host_pages_written + dev.buffer.used >= 6000 - 64


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=150))
def test_completions_come_out_in_time_order_and_in_arrival_order_on_ties(times):
    # the completion list's hand-written bisection: sorted by time, first come first out
    # among equal times, nothing before its time
    dev = drive(tiny(), "fresh")
    rqs = [Rq(0, sector=8 * i) for i in range(len(times))]
    for rq, t in zip(rqs, times):
        dev._complete(rq, t * 1e-6)
    out = []
    for step in range(21):
        got = dev.pop_completed(step * 1e-6)
        assert all(times[rqs.index(rq)] == step for rq in got)
        out.extend(got)
    assert out == [rq for _, _, rq in sorted(zip(times, range(len(times)), rqs))]
