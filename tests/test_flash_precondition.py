"""Start states set up directly: fresh, full (sequential) and steady (uniform random
overwrites under greedy collection) are consistent maps, and the steady one behaves
from its first writes like a drive filled and overwritten by simulation."""

from __future__ import annotations

import random

import numpy as np
import pytest

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash import precondition as pre
from blksim.disk_models.flash.ftl import PageMappingFtl
from blksim.disk_models.flash.geometry import FlashGeometry, logical_pages
from blksim.disk_models.flash.gc_policy import uniform_greedy_wa, victim_fraction
from tests.test_flash_gc import drive, measured_wa, model_alpha

GEO = FlashGeometry(channels=2, chips_per_channel=1, dies_per_chip=1, planes_per_die=2,
                    blocks_per_plane=64, pages_per_block=64, page_bytes=4096)


def consistent(ftl: PageMappingFtl) -> np.ndarray:
    """Check the map is a bijection with matching counts; returns l2p."""
    l2p, p2l = np.asarray(ftl.l2p), np.asarray(ftl.p2l)
    mapped = np.flatnonzero(l2p >= 0)
    assert (p2l[l2p[mapped]] == mapped).all() and int((p2l >= 0).sum()) == len(mapped)
    ppb = ftl.pages_per_block
    assert (p2l.reshape(-1, ppb) >= 0).sum(axis=1).tolist() == ftl.valid
    for b, wp in enumerate(ftl.wp):
        assert (p2l[b * ppb + wp:(b + 1) * ppb] < 0).all()
    # every lpn sits in the plane its allocation gives it
    planes = (l2p[mapped] // ftl.geometry.pages_per_plane)
    assert (planes == np.asarray(ftl.cwdp)[mapped % ftl.planes]).all()
    return l2p


def test_fresh_is_empty():
    ftl = PageMappingFtl(GEO, logical_pages(GEO, 0.2, "t"))
    ftl.precondition("fresh")
    assert (np.asarray(ftl.l2p) < 0).all() and ftl.start_state == "fresh"


def test_full_writes_every_page_once_in_order():
    n = logical_pages(GEO, 0.2, "t")
    ftl = PageMappingFtl(GEO, n)
    ftl.precondition("full")
    l2p = consistent(ftl)
    assert (l2p >= 0).all() and ftl.host_pages_written == 0
    # plane of lpn x: cwdp[x % 4]; consecutive lpns of a plane in consecutive pages
    plane0 = l2p[ftl.cwdp.index(0)::ftl.planes]
    assert (np.diff(plane0) == 1).all() and plane0[0] == 0
    # a sequential pass over it now copies nothing
    assert measured_wa(ftl, range(n)) == pytest.approx(1.0, abs=0.01)


def test_steady_is_a_consistent_map_with_the_reserve_free():
    n = logical_pages(GEO, 0.15, "t")
    ftl = PageMappingFtl(GEO, n, seed=4)
    ftl.precondition("steady")
    l2p = consistent(ftl)
    assert (l2p >= 0).all()
    assert [ftl.free_blocks(p) for p in range(ftl.planes)] == [ftl.fg_threshold] * 4
    assert not any(ftl.gc_needed(p) for p in range(ftl.planes))
    v = np.asarray(ftl.valid)[np.asarray(ftl.state) == 2]
    # a spread of valid counts down to the victims' fraction of the model
    alpha = model_alpha(ftl, n)
    assert v.min() / ftl.pages_per_block == pytest.approx(victim_fraction(alpha), abs=0.08)
    assert v.max() == ftl.pages_per_block
    assert sorted(set(ftl.state)) == [0, 2]       # free or closed, nothing open


@pytest.mark.parametrize("sample", [pre.RELAX_SAMPLE_BLOCKS, 16])
@pytest.mark.parametrize("op", [0.1, 0.3])
def test_steady_state_gives_the_simulated_write_amplification_at_once(op, sample,
                                                                     monkeypatch):
    """Relaxing every block of a plane at once (62 <= 256), or groups of at most 16
    (4 groups of 16 a plane, 2 blocks dropped), the first writes amplify as on a
    drive overwritten by simulation, and as the greedy model says."""
    monkeypatch.setattr(pre, "RELAX_SAMPLE_BLOCKS", sample)
    n = logical_pages(GEO, op, "t")
    direct = PageMappingFtl(GEO, n)
    direct.precondition("steady", seed=1)
    window = n // 4                  # the first writes: a quarter of the logical space
    rng = random.Random(1)
    wa_direct = measured_wa(direct, [rng.randrange(n) for _ in range(window)])
    simulated = PageMappingFtl(GEO, n)
    rng = random.Random(2)
    drive(simulated, range(n))
    drive(simulated, [rng.randrange(n) for _ in range(4 * n)])
    wa_simulated = measured_wa(simulated, [rng.randrange(n) for _ in range(window)])
    assert wa_direct == pytest.approx(wa_simulated, rel=0.10)
    assert wa_direct == pytest.approx(uniform_greedy_wa(model_alpha(direct, n)), rel=0.10)
    # while a merely full drive is still far from it over the same writes
    full = PageMappingFtl(GEO, n)
    full.precondition("full")
    rng = random.Random(1)
    assert measured_wa(full, [rng.randrange(n) for _ in range(window)]) < 0.85 * wa_simulated
    assert direct.emergencies == 0


def test_steady_valid_counts_keep_each_planes_total():
    rng = np.random.default_rng(0)
    counts = np.array([3000, 3001, 2999])
    v, last = pre.steady_valid_counts(64, 60, counts, rng)
    assert v.sum(axis=1).tolist() == counts.tolist()
    assert v.min() >= 0 and v.max() <= 64 and (last <= 0).all()


def test_sampled_counts_keep_totals_and_the_distribution_of_one_relaxation():
    """Groups of 32 blocks put together into planes of 250: each plane's total exact,
    counts in range, steps <= 0, and the counts' quantiles those of relaxing the
    250 blocks at once (within a twentieth of a block)."""
    counts = np.array([12000, 12001, 11999])
    v, last = pre.sampled_valid_counts(64, 250, counts, np.random.default_rng(0), 32)
    assert v.shape == (3, 250) and v.sum(axis=1).tolist() == counts.tolist()
    assert v.min() >= 0 and v.max() <= 64 and (last <= 0).all() and last.min() >= -2 * 256
    whole, _ = pre.steady_valid_counts(64, 250, counts, np.random.default_rng(1))
    q = [0.05, 0.25, 0.5, 0.75, 0.95]
    assert np.quantile(v, q) == pytest.approx(np.quantile(whole, q), abs=64 / 20)
    # at most RELAX_SAMPLE_BLOCKS: the very same draws as relaxing all at once
    a = pre.sampled_valid_counts(64, 60, counts // 4, np.random.default_rng(3))
    b = pre.steady_valid_counts(64, 60, counts // 4, np.random.default_rng(3))
    assert (a[0] == b[0]).all() and (a[1] == b[1]).all()


def test_same_seed_same_layout_other_seed_other_layout():
    n = logical_pages(GEO, 0.2, "t")
    a, b, c = (PageMappingFtl(GEO, n) for _ in range(3))
    a.precondition("steady", 5)
    b.precondition("steady", 5)
    c.precondition("steady", 6)
    assert list(a.l2p) == list(b.l2p) and a.valid == b.valid
    assert list(a.l2p) != list(c.l2p)


def test_bad_state_and_second_call_are_refused():
    ftl = PageMappingFtl(GEO, logical_pages(GEO, 0.2, "t"))
    with pytest.raises(DeviceError, match="start state 'warm'.*fresh, full, steady"):
        ftl.precondition("warm")
    ftl.precondition("full")
    with pytest.raises(ValueError):
        ftl.precondition("steady")


_ONE_TB = """
import resource, sys, time
import numpy as np
from blksim.disk_models.flash.ftl import PageMappingFtl
from blksim.disk_models.flash.geometry import FlashGeometry, logical_pages
geo = FlashGeometry(8, 4, 2, 2, 334, 1536, 16384)
ftl = PageMappingFtl(geo, logical_pages(geo, 0.07, "1 TB"))
t = time.process_time()
ftl.precondition("steady", 1)
cpu = time.process_time() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
sample = np.random.default_rng(0).integers(0, ftl.logical_pages, 100000).tolist()
assert all(ftl.p2l[ftl.lookup(x)] == x for x in sample)
print(cpu, rss)
"""


@pytest.mark.slow
def test_one_terabyte_steady_start_in_under_five_cpu_seconds():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _ONE_TB], capture_output=True, text=True,
                         check=True).stdout.split()
    cpu, rss_mb = float(out[0]), float(out[1])
    assert cpu < 5.0
    # the maps are the start layout's function until written (docs/flash-ftl.md); the
    # per-block lists and the interpreter are what is left
    assert rss_mb < 200


@pytest.mark.parametrize("channels", [2, 3])     # 4 planes divide a chunk; 6 do not
@pytest.mark.parametrize("state", ["full", "steady"])
def test_start_layout_reads_the_same_across_chunk_edges_entry_by_entry_or_whole(channels,
                                                                                state):
    """The start layout read through the function one entry at a time, a chunk at a
    time (numpy), or from chunks made by writing, is the same map whatever the chunk
    size; and reading it makes no chunk."""
    from tests.test_flash_ftl import chunks_of
    geo = FlashGeometry(channels=channels, chips_per_channel=1, dies_per_chip=1,
                        planes_per_die=2, blocks_per_plane=64, pages_per_block=64,
                        page_bytes=4096)
    n = logical_pages(geo, 0.2, "t") - 1             # not a whole number of rows

    def built(shift):
        with chunks_of(shift):
            ftl = PageMappingFtl(geo, n, seed=2)
            ftl.precondition(state)
            assert len(ftl.l2p.chunks) == -(-n >> shift)
            whole = consistent(ftl), np.asarray(ftl.p2l)   # a chunk at a time
            assert ftl.l2p.owned_chunks() == ftl.p2l.owned_chunks() == 0
            assert list(ftl.l2p) == whole[0].tolist()      # an entry at a time
            assert list(ftl.p2l) == whole[1].tolist()
            for m in (ftl.l2p, ftl.p2l):                   # every chunk made
                for c in range(len(m.chunks)):
                    m.own(c)
            assert (np.asarray(ftl.l2p) == whole[0]).all()
            assert (np.asarray(ftl.p2l) == whole[1]).all()
            return ftl, whole

    one, (l2p, p2l) = built(16)                        # one chunk holds it all
    for shift in (10, 7):
        ftl, (l2p2, p2l2) = built(shift)
        assert (l2p2 == l2p).all() and (p2l2 == p2l).all()
        assert ftl.valid == one.valid and ftl.written_at == one.written_at


def test_writes_over_a_start_layout_make_only_the_chunks_they_touch():
    """A write makes its l2p chunk and the p2l chunks of the old and new page; the rest
    of the map still reads the start layout, and the map stays consistent."""
    from tests.test_flash_ftl import chunks_of
    with chunks_of(6):
        ftl = PageMappingFtl(GEO, logical_pages(GEO, 0.15, "t"), seed=3)
        ftl.precondition("steady")
        before = np.asarray(ftl.l2p)
        assert [ftl.lookup(y) for y in range(ftl.logical_pages)] == before.tolist()
        assert ftl.l2p.owned_chunks() == ftl.p2l.owned_chunks() == 0    # reads make none
        x = 77
        old = ftl.lookup(x)
        new = ftl.write(x)
        assert ftl.lookup(x) == new != old and ftl.p2l[old] == -1 and ftl.p2l[new] == x
        owned = {(x >> 6), }
        assert {c for c, ch in enumerate(ftl.l2p.chunks) if ch is not ftl.l2p.empty} == owned
        assert ftl.p2l.owned_chunks() == len({old >> 6, new >> 6})
        after = np.asarray(ftl.l2p)
        assert (np.flatnonzero(after != before) == [x]).all()
        assert ftl.trim(x + 1, 1) == 1 and ftl.lookup(x + 1) == -1
        rng = random.Random(0)
        for _ in range(3000):
            ftl.write(rng.randrange(ftl.logical_pages))
            for p in range(ftl.planes):
                ftl.collect_now(p)
        consistent(ftl)


def test_start_layout_refuses_counts_that_do_not_hold_each_planes_pages():
    from blksim.disk_models.flash.startlayout import StartLayout
    ftl = PageMappingFtl(GEO, logical_pages(GEO, 0.2, "t"))
    counts = np.zeros(GEO.blocks, dtype=np.int64)
    n = [len(range(i, ftl.logical_pages, ftl.planes)) for i in range(ftl.planes)]
    for i, p in enumerate(ftl.cwdp):
        first = p * GEO.blocks_per_plane
        counts[first:first + n[i] // 64] = 64
        counts[first + n[i] // 64] = n[i] % 64
    layout = StartLayout(GEO, ftl.logical_pages, ftl.cwdp, counts, 1, [0] * ftl.planes)
    assert layout.forward(0) == GEO.blocks_per_plane * 64 * ftl.cwdp[0]
    assert [layout.reverse(layout.forward(x)) for x in range(300)] == list(range(300))
    counts[5] -= 1
    with pytest.raises(ValueError, match="plane 0: the block counts do not sum"):
        StartLayout(GEO, ftl.logical_pages, ftl.cwdp, counts, 1, [0] * ftl.planes)
