"""traces.pattern: the I/O sequence and arrival times of a synthetic job."""

import dataclasses
import random
import statistics

import pytest
from hypothesis import given, settings, strategies as st

from blksim.traces.jobs import parse_job
from blksim.traces.pattern import IoPattern, make_rngs

DEVICE = 4_000_000  # sectors


def pattern(seed=1, clone=0, device=DEVICE, **keys) -> IoPattern:
    spec = parse_job({"name": "j", **keys}, "test: job 'j'", device)
    return IoPattern(spec, clone, random.Random(seed))


def ios(p: IoPattern, n: int):
    return [p.next_io() for _ in range(n)]


def test_make_rngs_reproducible_and_independent():
    a = [r.random() for r in make_rngs(42, 3)]
    b = [r.random() for r in make_rngs(42, 3)]
    assert a == b
    assert len(set(a)) == 3
    assert [r.random() for r in make_rngs(43, 3)] != a
    # Child i does not depend on how many siblings were spawned.
    assert make_rngs(42, 5)[1].random() == a[1]


def test_same_seed_same_sequence_different_seed_or_clone_differs():
    keys = dict(rw="randrw", bssplit="4k/50:64k/50", numjobs=2)
    first = ios(pattern(7, **keys), 200)
    assert first == ios(pattern(7, **keys), 200)
    assert first != ios(pattern(8, **keys), 200)
    rng_a, rng_b = make_rngs(7, 2)
    spec = parse_job({"name": "j", **keys}, "test", DEVICE)
    assert ios(IoPattern(spec, 0, rng_a), 200) != ios(IoPattern(spec, 1, rng_b), 200)


def test_bssplit_frequencies_match_percentages():
    p = pattern(rw="randread", bssplit="4k/10:16k/20:64k/70")
    n = 50_000
    counts = {}
    for _ in range(n):
        size = p.next_io()[1]
        counts[size] = counts.get(size, 0) + 1
    assert set(counts) == {8, 32, 128}
    # Within 5 standard deviations of the binomial count.
    for size, pct in ((8, 10), (32, 20), (128, 70)):
        expected = n * pct / 100
        sd = (n * pct / 100 * (1 - pct / 100)) ** 0.5
        assert abs(counts[size] - expected) < 5 * sd, (size, counts)


def test_rwmixread_fraction():
    p = pattern(rw="randrw", rwmixread=80)
    n = 20_000
    reads = sum(1 for _, _, write in ios(p, n) if not write)
    assert abs(reads - 0.8 * n) < 5 * (n * 0.8 * 0.2) ** 0.5


def test_pure_jobs_have_one_direction():
    assert all(not w for _, _, w in ios(pattern(rw="randread"), 500))
    assert all(w for _, _, w in ios(pattern(rw="write"), 500))


@settings(max_examples=60, deadline=None)
@given(offset_blocks=st.integers(0, 1000), size_blocks=st.integers(16, 4000),
       align=st.sampled_from([512, 4096, 8192]), clone=st.integers(0, 2),
       seed=st.integers(0, 2 ** 32))
def test_random_offsets_inside_region_and_aligned(offset_blocks, size_blocks, align, clone, seed):
    keys = dict(rw="randwrite", bssplit="4k/40:8k/30:32k/30", blockalign=align,
                offset=offset_blocks * 512, size=size_blocks * 4096, numjobs=3,
                offset_increment=size_blocks * 4096)
    spec = parse_job({"name": "j", **keys}, "test", 100_000_000)
    start, nr = spec.region_sectors(clone)
    p = IoPattern(spec, clone, random.Random(seed))
    for sector, size, _ in ios(p, 300):
        assert start <= sector and sector + size <= start + nr
        assert (sector - start) % (align // 512) == 0


def test_random_offsets_cover_region_uniformly():
    # 100 blocks of 4k: every block is hit, none wildly more than others.
    p = pattern(rw="randread", size="400k")
    counts = [0] * 100
    for sector, size, _ in ios(p, 20_000):
        counts[sector // 8] += 1
    assert min(counts) > 100 and max(counts) < 320


def test_sequential_follows_and_wraps():
    p = pattern(rw="read", bs="4k", offset="1m", size="40k")
    start = (1 << 20) // 512
    got = [s for s, _, _ in ios(p, 25)]
    assert got == [start + 8 * (i % 10) for i in range(25)]


def test_sequential_bssplit_wraps_before_crossing_the_end():
    p = pattern(rw="write", bssplit="4k/50:64k/50", size="256k")
    pos = 0
    for sector, size, write in ios(p, 2000):
        assert write
        expected = pos if pos + size <= 512 else 0
        assert sector == expected and sector + size <= 512
        pos = sector + size


def test_mixed_sequential_keeps_one_position_per_direction():
    p = pattern(rw="rw", bs="4k", size="4m")
    next_pos = {False: 0, True: 0}
    for sector, size, write in ios(p, 500):
        assert sector == next_pos[write]
        next_pos[write] = sector + size


def test_sequential_clones_start_at_offset_increment():
    spec = parse_job({"name": "j", "rw": "read", "numjobs": 3, "offset_increment": "1m",
                      "size": "1m"}, "test", DEVICE)
    firsts = [IoPattern(spec, i, r).next_io()[0] for i, r in enumerate(make_rngs(1, 3))]
    assert firsts == [0, 2048, 4096]


def test_region_smaller_than_block_rejected():
    # parse_job refuses such a job; a JobSpec built by hand is checked here too.
    spec = parse_job({"name": "j", "bs": "4k", "size": "4k"}, "test", DEVICE)
    spec = dataclasses.replace(spec, size=1024)
    with pytest.raises(ValueError, match="smaller than its largest block"):
        IoPattern(spec, 0, random.Random(1))


def test_poisson_interarrival_mean_and_cv():
    p = pattern(rw="randread", rate_iops=250)
    gaps = [p.next_interarrival() for _ in range(40_000)]
    mean = statistics.fmean(gaps)
    cv = statistics.pstdev(gaps) / mean
    assert mean == pytest.approx(1 / 250, rel=0.03)
    assert cv == pytest.approx(1.0, abs=0.03)
    assert min(gaps) > 0


def test_linear_interarrival_is_constant():
    p = pattern(rw="randread", rate_iops=250, rate_process="linear")
    assert {p.next_interarrival() for _ in range(100)} == {1 / 250}


def test_interarrival_needs_rate_iops():
    with pytest.raises(ValueError, match="rate_iops"):
        pattern().next_interarrival()
