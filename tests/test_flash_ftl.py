"""The page-mapping FTL: hand-traced writes, collection and TRIM; hypothesis properties
of the map under any sequence of writes, trims, collections, late erases and folds;
the SLC cache; bad settings."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash import ftl as ftl_module, unitmap
from blksim.disk_models.flash.ftl import PageMappingFtl
from blksim.disk_models.flash.geometry import FlashGeometry, logical_pages

# 2 planes of 16 blocks of 4 pages; half the space over-provisioned: 32 pages a plane
TINY = FlashGeometry(channels=1, chips_per_channel=1, dies_per_chip=1, planes_per_die=2,
                     blocks_per_plane=16, pages_per_block=4, page_bytes=4096)


@contextlib.contextmanager
def chunks_of(shift: int):
    """Maps built inside use chunks of 2^shift entries (small ones put chunk edges
    inside small geometries); the modules read the constants at each call."""
    names = {unitmap: ("SHIFT", "CHUNK", "MASK"), ftl_module: ("SHIFT", "MASK")}
    values = {"SHIFT": shift, "CHUNK": 1 << shift, "MASK": (1 << shift) - 1}
    saved = {(m, n): getattr(m, n) for m, ns in names.items() for n in ns}
    try:
        for m, n in saved:
            setattr(m, n, values[n])
        yield
    finally:
        for (m, n), v in saved.items():
            setattr(m, n, v)


def tiny(**kw) -> PageMappingFtl:
    return PageMappingFtl(TINY, logical_pages(TINY, 0.5, "t"), **kw)


def test_writes_fill_each_planes_open_block_in_order():
    f = tiny()
    assert f.cwdp == [0, 1]                       # even lpns to plane 0, odd to plane 1
    assert [f.write(x) for x in (0, 1, 2)] == [0, 16 * 4, 1]
    assert f.write(0) == 2                        # rewritten: next page, old one invalid
    assert f.lookup(0) == 2 and f.p2l[0] == -1 and f.valid[0] == 2
    assert f.write(4) == 3                        # block 0 is full now
    assert f.state[0] == 2 and f.open[0][0] == -1
    assert f.write(6) == 4                        # block 1 opened from the pool
    assert f.free_blocks(0) == 14 and f.free_blocks(1) == 15
    assert f.lookup(8) == -1                      # never written
    assert f.trim(2, 1) == 1 and f.lookup(2) == -1 and f.valid[0] == 2
    assert f.trim(2, 1) == 0                      # already unmapped
    assert f.host_pages_written == 6 and f.write_amplification() == 1.0


def test_collect_moves_valid_pages_in_the_plane_then_erase_returns_the_block():
    f = tiny()
    for x in (0, 2, 0, 4, 6):                     # block 0: lpn 0 (old), 2, 0, 4; block 1: 6
        f.write(x)
    job = f.collect(0)
    # victim: the one closed block, 0, with 3 valid pages (ppn 1, 2, 3); copies go to the
    # collector's own block, the next of the pool (block 2)
    assert job.victim == 0 and not job.slc and not job.emergency
    assert job.moved == [(1, 8), (2, 9), (3, 10)]
    assert (f.lookup(2), f.lookup(0), f.lookup(4)) == (8, 9, 10)
    assert f.valid[0] == 0 and f.valid[2] == 3 and f.state[0] == 3     # erasing
    assert f.free_blocks(0) == 13
    assert f.collect(0) is None                   # no other closed block
    f.erase_done(0)
    assert f.free_blocks(0) == 14 and f.erase_count[0] == 1 and f.erases == 1
    assert f.gc_pages_written == 3 and f.gc_runs == 1
    assert f.write_amplification() == (5 + 3) / 5
    with pytest.raises(ValueError):
        f.erase_done(0)                           # not erasing any more


def test_greedy_takes_the_fewest_valid_and_breaks_ties_by_wear():
    f = tiny()
    for x in range(0, 16, 2):                     # blocks 0 and 1 of plane 0, full
        f.write(x)
    for x in (0, 2, 4, 8):                        # block 0 keeps 1 valid, block 1 keeps 3
        f.write(x)
    assert f.collect(0).victim == 0
    g = tiny()
    for x in range(0, 16, 2):
        g.write(x)
    g.erase_count[0] = 5                          # equal valid pages: the less worn first
    assert g.collect(0).victim == 1


def test_open_block_is_never_a_victim_and_only_closed_blocks_are():
    f = tiny()
    f.write(0)
    f.write(2)
    assert f.collect(0) is None                   # the only written block is open
    assert f.gc_needed(0) is False


def test_dynamic_allocation_is_round_robin_by_write_order():
    f = tiny(allocation="dynamic")
    planes = []
    for x in (5, 5, 5, 7):
        p = f.plane_for_write(x)
        assert f.write(x) // (16 * 4) == p
        planes.append(p)
    assert planes == [0, 1, 0, 1]


def test_slc_cache_takes_host_writes_until_full_then_tlc_and_folding_frees_it():
    # 2 SLC blocks per plane of 2 pages each (a third of... here: given explicitly)
    f = tiny(slc_cache_blocks_per_plane=2, slc_pages_per_block=2)
    assert f.slc_free_pages() == 2 * 2 * 2
    assert f.is_slc(14) and f.is_slc(15) and not f.is_slc(13)
    ppns = [f.write(x) for x in (0, 2, 4, 6)]     # plane 0: SLC blocks 14 and 15
    assert [p // 4 for p in ppns] == [14, 14, 15, 15]
    assert f.slc_free_pages() == 4 and f.slc_pages_written == 4
    assert f.write(8) // 4 == 0                   # SLC full: straight to TLC block 0
    assert f.fold_wanted(0) and not f.fold_wanted(1)
    f.write(0)                                    # lpn 0 overwritten in TLC: block 14 has 1 valid
    job = f.fold(0)
    assert job.slc and job.victim == 14 and len(job.moved) == 1
    assert f.lookup(2) == job.moved[0][1] and not f.is_slc(f.lookup(2) // 4)
    assert f.slc_free_pages() == 4                # still erasing
    f.erase_done(14)
    assert f.slc_free_pages() == 6 and f.free_blocks(0) == 12
    assert f.fold_pages_written == 1 and f.gc_pages_written == 1


@pytest.mark.parametrize("kw,key", [
    ({"allocation": "random"}, "allocation"),
    ({"gc_policy": "lru"}, "gc_policy"),
    ({"gc_threshold": 0.7}, "gc_threshold"),
    ({"slc_cache_blocks_per_plane": 12}, "slc_cache_blocks_per_plane"),
    ({"slc_pages_per_block": 9}, "slc_pages_per_block"),
    ({"wear_limit": 0}, "wear_limit"),
])
def test_bad_settings_are_one_line_naming_the_key(kw, key):
    with pytest.raises(DeviceError) as e:
        PageMappingFtl(TINY, 64, where="ssd.toml: [device]", **kw)
    assert str(e.value).startswith("ssd.toml: [device]: ") and key in str(e.value)
    assert "\n" not in str(e.value)


def test_too_little_over_provisioning_for_the_reserve_is_refused():
    with pytest.raises(DeviceError) as e:
        PageMappingFtl(TINY, logical_pages(TINY, 0.1, "t"), where="ssd.toml: [device]")
    assert "over_provisioning" in str(e.value) and "\n" not in str(e.value)


# -- properties -----------------------------------------------------------------------

def check_map(f: PageMappingFtl, expected: set) -> None:
    """The map is a bijection between mapped lpns and valid ppns; valid counts match."""
    l2p = np.asarray(f.l2p)
    p2l = np.asarray(f.p2l)
    mapped = np.flatnonzero(l2p >= 0)
    assert set(mapped.tolist()) == expected                  # readable after last write
    assert (p2l[l2p[mapped]] == mapped).all()
    assert int((p2l >= 0).sum()) == len(mapped)
    ppb = f.pages_per_block
    per_block = (p2l.reshape(-1, ppb) >= 0).sum(axis=1)
    assert per_block.tolist() == f.valid
    for b in range(TINY.blocks):                             # valid data only where programmed
        assert (p2l[b * ppb + f.wp[b]:(b + 1) * ppb] < 0).all()
    assert sum(f.plane_valid) == len(mapped)
    for m in (f.l2p, f.p2l):                                 # the shared chunk stays unmapped
        assert set(m.empty) == {-1}


OPS = st.lists(st.one_of(
    st.tuples(st.just("w"), st.integers(0, 63)),
    st.tuples(st.just("w"), st.integers(0, 63)),
    st.tuples(st.just("w"), st.integers(0, 63)),
    st.tuples(st.just("t"), st.integers(0, 63), st.integers(1, 6)),
    st.tuples(st.just("gc"), st.integers(0, 1)),             # collect, erase later
    st.tuples(st.just("erase"), st.just(0)),                 # pending erases finish
    st.tuples(st.just("settle"), st.just(0)),                # collect to the threshold
    st.tuples(st.just("fold"), st.integers(0, 1)),
), max_size=400)


@settings(max_examples=60, deadline=None)
@given(ops=OPS, allocation=st.sampled_from(["cwdp", "dynamic"]),
       policy=st.sampled_from(["greedy", "cost-benefit"]), slc=st.sampled_from([0, 2]),
       shift=st.sampled_from([unitmap.SHIFT, 2, 3]))
def test_any_sequence_keeps_the_map_consistent(ops, allocation, policy, slc, shift):
    with chunks_of(shift):           # shift 2, 3: the 128 pages span 32 or 16 chunks
        run_ops(ops, allocation, policy, slc)


def run_ops(ops, allocation, policy, slc):
    f = tiny(allocation=allocation, gc_policy=policy, slc_cache_blocks_per_plane=slc,
             wear_limit=3 if policy == "greedy" else None)
    expected: set = set()
    programmed: set = set()          # pages programmed since their block's last erase
    pending: list = []
    early: list = []                 # pending erases an emergency finished
    ppb = f.pages_per_block

    def erased(block):
        programmed.difference_update(range(block * ppb, (block + 1) * ppb))

    def program(ppn):
        assert ppn not in programmed, f"page {ppn} programmed twice before an erase"
        programmed.add(ppn)

    def take(job):
        for _, new in job.moved:
            program(new)

    seen_emergencies = 0
    for op, a, *rest in ops:
        if op == "w":
            ppn = f.write(a, 0.0)
            for job in f.emergency_jobs[seen_emergencies:]:
                if job.moved:            # collected in place: erased first, then copied
                    erased(job.victim)
                    take(job)
                else:                    # a pending erase finished at once
                    erased(job.victim)
                    early.append(job.victim)
            seen_emergencies = len(f.emergency_jobs)
            program(ppn)
            expected.add(a)
            assert f.lookup(a) == ppn
        elif op == "t":
            f.trim(a, min(rest[0], 64 - a))
            expected.difference_update(range(a, a + rest[0]))
        elif op in ("gc", "fold"):
            job = (f.collect if op == "gc" else f.fold)(a)
            if job is not None:
                take(job)
                pending.append(job)
        elif op == "erase":
            for job in pending:
                f.erase_done(job.victim)         # absorbed if an emergency did it
                if job.victim in early:
                    early.remove(job.victim)
                else:
                    erased(job.victim)
            pending.clear()
        else:
            for p in range(f.planes):
                for job in f.collect_now(p):
                    take(job)
                    erased(job.victim)
        for p in range(f.planes):                # the pool never runs dry for good
            assert f.free_blocks(p) + len(f.erasing[p]) >= 1
        check_map(f, expected)


def test_same_seed_same_state():
    a, b = tiny(), tiny()
    for f in (a, b):
        f.precondition("steady", seed=3)
        for x in range(0, 64, 3):
            f.write(x)
    assert list(a.l2p) == list(b.l2p) and a.valid == b.valid


def test_emergency_finishes_a_pending_erase_when_every_closed_block_is_valid():
    f = tiny()
    plane0 = list(range(0, 64, 2))                # 32 lpns: blocks 0..7 full and valid
    for x in plane0:
        f.write(x)
    for k in range(7):                            # overwrite block k's lpns, collect block k
        for x in plane0[4 * k:4 * k + 4]:
            f.write(x)
        job = f.collect(0)
        assert job.victim == k and job.moved == []  # left erasing: the timing side lags
    assert f.free_blocks(0) == 1 and len(f.erasing[0]) == 7 and f.emergencies == 0
    f.write(plane0[28])                           # a new block is needed: emergency
    # first block 7 (its lpn 56 just overwritten) is collected in place: erased, its 3
    # valid pages copied back into it as the collector's block, which frees no block;
    # then every closed block is fully valid: the pending erase of block 0 is finished
    assert f.emergencies == 2
    first, second = f.emergency_jobs
    assert (first.victim, first.moved) == (7, [(29, 28), (30, 29), (31, 30)])
    assert (second.victim, second.moved, second.emergency) == (0, [], True)
    assert f.lookup(plane0[28]) == 15 * 4         # the host opened the pool's block 15
    assert f.erase_count[0] == 1
    f.erase_done(0)                               # the timing side's own call: absorbed
    assert f.erase_count[0] == 1 and f.erases == 2       # blocks 7 and 0
    f.erase_done(1)                               # the others finish normally
    assert f.erase_count[1] == 1 and f.free_blocks(0) == 2


def test_emergency_collects_in_place_when_the_timing_side_never_collects():
    f = tiny()
    rng = np.random.default_rng(0)
    for x in rng.integers(0, 64, 3000).tolist():
        f.write(x)                                # no collect at all
    assert f.emergencies > 0 and f.gc_runs > 0
    assert all(j.moved or j.emergency for j in f.emergency_jobs)
    check_map(f, {x for x in range(64) if f.lookup(x) >= 0})
    assert all(f.free_blocks(p) >= 1 for p in range(f.planes))


def test_collected_data_keeps_its_age_for_cost_benefit():
    f = tiny(gc_policy="cost-benefit")
    f.precondition("full")                        # data stamped before the run: negative
    old = f.written_at[0]
    assert old < 0
    for x in (0, 2):                              # invalidate two pages of block 0
        f.write(x)
    job = f.collect(0)
    assert job.victim == 0                        # the oldest, least valid
    dest = job.moved[0][1] // 4
    assert f.written_at[dest] == old              # the copies keep the victim's age


# -- memory: the maps are made as they are written ----------------------------------------

ONE_TB = FlashGeometry(8, 4, 1, 2, 4096, 1024, 4096)     # the 980 PRO preset in 4 KiB units


def test_a_fresh_terabyte_owns_no_map_chunk_and_reads_unmapped():
    f = PageMappingFtl(ONE_TB, logical_pages(ONE_TB, 0.07, "t"))
    assert f.l2p.owned_chunks() == f.p2l.owned_chunks() == 0
    assert len(f.l2p.chunks) == -(-f.logical_pages // unitmap.CHUNK)
    assert f.lookup(0) == f.lookup(f.logical_pages - 1) == -1
    assert f.trim(123456, 10) == 0 and f.l2p.owned_chunks() == 0
    last = f.logical_pages - 1
    ppn = f.write(last)
    assert f.lookup(last) == ppn and f.p2l[ppn] == last
    assert f.l2p.owned_chunks() == f.p2l.owned_chunks() == 1
    assert f.lookup(last - 1) == -1                       # same chunk, not written
    f.write(5)                                            # another l2p chunk; the p2l
    assert f.l2p.owned_chunks() == 2                      # chunk of plane 0's block may
    assert f.l2p.nbytes() == 3 * unitmap.CHUNK * 4        # differ: two chunks + the empty
    assert f.trim(last, 1) == 1 and f.lookup(last) == -1 and f.p2l[ppn] == -1


def test_unit_map_put_and_entries_across_chunk_edges():
    with chunks_of(3):
        m = unitmap.UnitMap(30, 100)
        assert len(m.chunks) == 4 and m.owned_chunks() == 0
        m.put(5, np.arange(20))                           # entries 5..24: chunks 0..3
        assert m.to_numpy().tolist() == [-1] * 5 + list(range(20)) + [-1] * 5
        assert m.owned_chunks() == 4 and set(m.empty) == {-1}
        m[29] = 7
        assert m[29] == 7 and list(m)[29] == 7 and np.asarray(m)[29] == 7
        with pytest.raises(IndexError):
            m[30]
        s = unitmap.UnitMap(30, 100)
        s.scatter(np.array([1, 9, 10, 25]), np.array([5, 6, 7, 8]))
        assert np.flatnonzero(np.asarray(s) >= 0).tolist() == [1, 9, 10, 25]
        assert np.asarray(s)[[1, 9, 10, 25]].tolist() == [5, 6, 7, 8]
        assert s.owned_chunks() == 3                      # chunk 2 was not touched
    assert unitmap.UnitMap(10, 2**31).typecode == "q"     # page numbers beyond 32 bits
