"""The cached mapping table: an LRU of translation pages, hand-traced; hit ratio under
uniform random access against the covered fraction; dirty write-backs; placement."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash.geometry import FlashGeometry
from blksim.disk_models.flash.mapping_cache import MappingCache

# 4 KiB pages: 1024 entries a translation page; 2 channels x 2 chips, 1 die, 1 plane
GEO = FlashGeometry(channels=2, chips_per_channel=2, dies_per_chip=1, planes_per_die=1,
                    blocks_per_plane=64, pages_per_block=64, page_bytes=4096)


def test_lru_of_translation_pages_hand_traced():
    c = MappingCache(GEO, 16 * 1024, capacity_bytes=2 * 4096)   # two pages cached
    assert c.entries_per_page == 1024 and c.translation_pages == 16 and not c.whole_table
    assert c.access(5) is False                   # page 0 loaded
    assert c.access(1023) is True                 # same translation page
    assert c.access(1024, write=True) is False    # page 1 loaded, dirty
    assert c.access(0) is True                    # page 0 most recent now
    assert c.access(5000) is False and c.written_back == 1   # evicts page 1: dirty
    assert c.access(1024) is False and c.written_back == -1  # evicts page 0: clean
    assert (c.hits, c.misses, c.evictions, c.dirty_evictions) == (2, 4, 2, 1)
    assert c.hit_ratio() == pytest.approx(2 / 6)


def test_a_write_hit_dirties_a_clean_page():
    c = MappingCache(GEO, 16 * 1024, capacity_bytes=4096)
    c.access(0)
    c.access(1, write=True)
    c.access(2000)
    assert c.written_back == 0 and c.dirty_evictions == 1


def test_uniform_random_hit_ratio_is_the_covered_fraction():
    # an LRU under independent uniform references holds a fixed set's worth: the hit
    # ratio is the fraction of translation pages it holds
    c = MappingCache(GEO, 64 * 1024, capacity_bytes=16 * 4096)
    rng = random.Random(1)
    for _ in range(2000):
        c.access(rng.randrange(64 * 1024))
    c.hits = c.misses = 0
    for _ in range(40000):
        c.access(rng.randrange(64 * 1024))
    assert c.hit_ratio() == pytest.approx(16 / 64, abs=0.02)


def test_whole_table_always_hits():
    c = MappingCache(GEO, 10 * 1024, capacity_bytes=10 * 4096)
    assert c.whole_table
    assert all(c.access(x, write=True) for x in range(0, 10 * 1024, 97))
    assert c.misses == 0 and c.dirty_evictions == 0


def test_translation_pages_are_striped_over_dies_channel_first():
    c = MappingCache(GEO, 64 * 1024, capacity_bytes=4096)
    dies = [c.die_of_page(t) for t in range(8)]
    assert dies == [0, 2, 1, 3, 0, 2, 1, 3]       # channel 0, channel 1, next chip ...
    assert c.where(3 * 1024 + 7) == 3 and c.translation_page(3 * 1024 + 7) == 3


def test_capacity_below_one_page_is_refused():
    with pytest.raises(DeviceError, match="mapping_cache") as e:
        MappingCache(GEO, 1024, capacity_bytes=100, where="ssd.toml: [device]")
    assert str(e.value).startswith("ssd.toml: [device]: ") and "\n" not in str(e.value)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8 * 1024 - 1), st.booleans()), max_size=300),
       st.integers(1, 6))
def test_matches_a_plain_lru_model(refs, pages):
    c = MappingCache(GEO, 8 * 1024, capacity_bytes=pages * 4096)
    model: list = []                 # [tpage, dirty], least recent first
    for lpn, write in refs:
        t = lpn // 1024
        found = [e for e in model if e[0] == t]
        evicted = -1
        if found:
            model.remove(found[0])
            entry = [t, found[0][1] or write]
        else:
            if len(model) >= pages:
                old = model.pop(0)
                evicted = old[0] if old[1] else -1
            entry = [t, write]
        model.append(entry)
        assert c.access(lpn, write) is bool(found)
        assert c.written_back == evicted
    assert c.hits + c.misses == len(refs)
