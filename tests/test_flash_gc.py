"""Garbage collection against its models: write amplification of greedy under uniform
random writes (Xiang & Kurkoski 2012 / Desnoyers 2014, `gc_policy.uniform_greedy_wa`),
sequential writes, TRIM, cost-benefit against greedy (Rosenblum & Ousterhout 1992),
thresholds and wear levelling."""

from __future__ import annotations

import random

import pytest

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash import gc_policy
from blksim.disk_models.flash.ftl import PageMappingFtl
from blksim.disk_models.flash.geometry import FlashGeometry, logical_pages

# 2 planes x 64 blocks x 64 pages: big enough blocks for the large-block model
GEO = FlashGeometry(channels=1, chips_per_channel=1, dies_per_chip=1, planes_per_die=2,
                    blocks_per_plane=64, pages_per_block=64, page_bytes=4096)


def drive(ftl: PageMappingFtl, lpns) -> None:
    """Write each lpn; collect as the timing side does when it keeps up (before the next
    write to a plane below the foreground threshold, erases at once)."""
    write, needed, collect_now = ftl.write, ftl.gc_needed, ftl.collect_now
    for lpn in lpns:
        write(lpn)
        for p in range(ftl.planes):
            if needed(p):
                collect_now(p)


def measured_wa(ftl: PageMappingFtl, lpns) -> float:
    """Write amplification over ``lpns`` only."""
    h, g = ftl.host_pages_written, ftl.gc_pages_written
    drive(ftl, lpns)
    return 1 + (ftl.gc_pages_written - g) / (ftl.host_pages_written - h)


def model_alpha(ftl: PageMappingFtl, active_pages: int) -> float:
    """Physical pages taking part per logical page written: every block in circulation,
    i.e. all but the free-block reserve the collector keeps (the foreground threshold)."""
    g = ftl.geometry
    circulating = g.planes * (ftl.tlc_blocks_per_plane - ftl.fg_threshold) * g.pages_per_block
    return circulating / active_pages


def test_the_model_gives_the_published_value():
    # Xiang & Kurkoski: over-provisioning factor 0.3 (alpha 1.3) -> 2.36 (2.35 simulated)
    assert gc_policy.uniform_greedy_wa(1.3) == pytest.approx(2.36, abs=0.01)
    u = gc_policy.victim_fraction(1.3)
    assert u == pytest.approx(__import__("math").exp(-1.3 * (1 - u)))
    with pytest.raises(ValueError):
        gc_policy.uniform_greedy_wa(1.0)


@pytest.mark.parametrize("op", [0.1, 0.2, 0.3])
def test_uniform_random_writes_match_the_greedy_model(op):
    n = logical_pages(GEO, op, "t")
    ftl = PageMappingFtl(GEO, n)
    rng = random.Random(7)
    drive(ftl, range(n))                                   # fill
    drive(ftl, [rng.randrange(n) for _ in range(3 * n)])   # to the steady state
    wa = measured_wa(ftl, [rng.randrange(n) for _ in range(3 * n)])
    expected = gc_policy.uniform_greedy_wa(model_alpha(ftl, n))
    assert wa == pytest.approx(expected, rel=0.10)
    assert ftl.emergencies == 0                            # thresholds kept: never


def test_sequential_overwrites_have_no_amplification():
    n = logical_pages(GEO, 0.1, "t")
    ftl = PageMappingFtl(GEO, n)
    drive(ftl, range(n))
    wa = measured_wa(ftl, list(range(n)) * 2)
    assert wa == pytest.approx(1.0, abs=0.01)


def test_trim_of_a_region_lowers_write_amplification():
    n = logical_pages(GEO, 0.1, "t")
    active = int(n * 0.7)
    results = {}
    for trim in (False, True):
        ftl = PageMappingFtl(GEO, n)
        rng = random.Random(3)
        drive(ftl, range(n))
        if trim:
            assert ftl.trim(active, n - active) == n - active
        drive(ftl, [rng.randrange(active) for _ in range(3 * active)])
        results[trim] = measured_wa(ftl, [rng.randrange(active) for _ in range(3 * active)])
        if trim:   # the trimmed space is spare space: the model with the live data only
            expected = gc_policy.uniform_greedy_wa(model_alpha(ftl, active))
            assert results[True] == pytest.approx(expected, rel=0.10)
    assert results[True] < 0.8 * results[False]


def hot_cold_wa(policy: str, hot_fraction: float, hot_share: float) -> float:
    geo = FlashGeometry(1, 1, 1, 1, 96, 64, 4096)
    n = logical_pages(geo, 0.15, "t")
    ftl = PageMappingFtl(geo, n, gc_policy=policy)
    rng = random.Random(11)
    hot = int(n * hot_fraction)

    def draw():
        if rng.random() < hot_share:
            return rng.randrange(hot)
        return hot + rng.randrange(n - hot)

    drive(ftl, range(n))
    drive(ftl, [draw() for _ in range(3 * n)])
    return measured_wa(ftl, [draw() for _ in range(4 * n)])


def test_cost_benefit_beats_greedy_under_hot_and_cold_and_not_under_uniform():
    # Rosenblum & Ousterhout (ACM TOCS 1992, section 3.5, figure 7): with hot-and-cold
    # locality (here 90 % of writes to 10 % of the data) cost-benefit cleans at a clearly
    # lower write cost than greedy; under uniform access greedy is as good or better
    greedy = hot_cold_wa("greedy", 0.1, 0.9)
    cost_benefit = hot_cold_wa("cost-benefit", 0.1, 0.9)
    assert cost_benefit < 0.85 * greedy
    assert hot_cold_wa("greedy", 1.0, 1.0) <= hot_cold_wa("cost-benefit", 1.0, 1.0)


def test_static_wear_levelling_bounds_the_erase_count_spread():
    geo = FlashGeometry(1, 1, 1, 1, 32, 16, 4096)
    n = logical_pages(geo, 0.25, "t")
    spread = {}
    for limit in (None, 4):
        ftl = PageMappingFtl(geo, n, wear_limit=limit)
        rng = random.Random(5)
        drive(ftl, range(n))
        drive(ftl, [rng.randrange(n // 10) for _ in range(30 * n)])   # cold data never moves
        lo, mean, hi = ftl.erase_count_stats()
        spread[limit] = hi - lo
        assert lo <= mean <= hi
    assert spread[None] > 20          # without the rule, the cold blocks are never erased
    assert spread[4] <= 4 + 2         # with it, within the limit (+ what one block adds)


def test_thresholds():
    assert gc_policy.thresholds(1000, 0.01, None, "w") == (10, 20)
    assert gc_policy.thresholds(64, 0.01, None, "w") == (2, 4)     # at least 2, bg > fg
    assert gc_policy.thresholds(1000, 0.05, 0.08, "w") == (50, 80)
    ftl = PageMappingFtl(GEO, logical_pages(GEO, 0.2, "t"), gc_threshold=0.05)
    assert (ftl.fg_threshold, ftl.bg_threshold) == (3, 6)
    for plane in range(ftl.planes):
        assert not ftl.gc_needed(plane) and not ftl.gc_wanted(plane)
    with pytest.raises(DeviceError, match="gc_background_threshold"):
        gc_policy.thresholds(1000, 0.05, 0.01, "w")
