"""Linux 2.6.18's read-ahead windows, hand-traced from mm/readahead.c
(page_cache_readahead, get_init_ra_size, get_next_ra_size, make_ahead_window)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.hostio.readahead import (ReadaheadState, initial_size, next_size,
                                  page_cache_readahead)


class Disk:
    """A read_pages that records every window asked for; ``cached`` pages are not read,
    and the queue is read-congested while ``congested``."""

    def __init__(self, cached=(), congested=False):
        self.cached = set(cached)
        self.congested = congested
        self.windows = []

    def __call__(self, start, count, block):
        if not block and self.congested:
            return None
        missing = [p for p in range(start, start + count) if p not in self.cached]
        self.cached.update(missing)
        self.windows.append((start, count, len(missing)))
        return len(missing)


def read_sequentially(ra, disk, pages, per_read=1, first=0):
    """The reader of do_generic_mapping_read: at each read's first page (when it is the
    page the last call asked for) read-ahead is called with the rest of the read."""
    next_index = first
    index = first
    while index < first + pages:
        last = index + per_read
        while index < last:
            if index == next_index:
                next_index = page_cache_readahead(ra, index, last - index, disk)
            index += 1


def test_initial_sizes_for_a_128k_maximum():
    # rounded up to a power of two, then: 1 <= 32/32 -> x4; 2..8 <= 32/4 -> x2; else max
    assert [initial_size(n, 32) for n in (1, 2, 3, 4, 8, 9, 32, 64)] == \
        [4, 4, 8, 8, 16, 32, 32, 32]


def test_a_sequential_4k_reader_ramps_16k_32k_64k_128k():
    ra = ReadaheadState(32)
    disk = Disk()
    read_sequentially(ra, disk, 200)
    sizes = [count for _, count, _ in disk.windows]
    assert disk.windows[:5] == [(0, 4, 4), (4, 8, 8), (12, 16, 16), (28, 32, 32), (60, 32, 32)]
    assert sizes[5:] == [32] * (len(sizes) - 5)
    # each window starts where the previous one ended: one stream of reads
    assert all(a + n == b for (a, n, _), (b, _, _) in zip(disk.windows, disk.windows[1:]))


def test_a_random_reader_collapses_to_its_own_pages():
    ra = ReadaheadState(32)
    disk = Disk()
    for page in (500, 90, 7000, 12, 3000):
        page_cache_readahead(ra, page, 2, disk)
    assert disk.windows == [(500, 2, 2), (90, 2, 2), (7000, 2, 2), (12, 2, 2), (3000, 2, 2)]
    assert ra.size == 0 and ra.ahead_start == 0


def test_a_read_from_the_start_of_a_file_is_taken_as_sequential():
    ra = ReadaheadState(32)
    disk = Disk()
    page_cache_readahead(ra, 0, 1, disk)
    page_cache_readahead(ra, 900, 1, disk)     # then random
    assert disk.windows == [(0, 4, 4), (900, 1, 1)]


def test_a_large_read_issues_the_ahead_window_at_once():
    ra = ReadaheadState(32)
    disk = Disk()
    assert page_cache_readahead(ra, 0, 64, disk) == 32
    # first window ra_pages, and since the read is >= ra_pages the ahead window too
    assert disk.windows == [(0, 32, 32), (32, 32, 32)]


def test_after_a_miss_the_next_window_shrinks_by_two_pages():
    ra = ReadaheadState(32)
    ra.size = 16
    ra.note_miss()
    assert next_size(ra) == 14 and not ra.miss
    ra.size = 4
    ra.note_miss()
    assert next_size(ra) == 4                  # never below VM_MIN_READAHEAD (16 KiB)


def test_a_congested_queue_skips_the_ahead_window_until_the_reader_needs_it():
    ra = ReadaheadState(32)
    disk = Disk(congested=True)
    page_cache_readahead(ra, 0, 1, disk)       # the first window blocks: read anyway
    assert disk.windows == [(0, 4, 4)]
    page_cache_readahead(ra, 1, 1, disk)       # ahead window skipped, not made
    assert disk.windows == [(0, 4, 4)] and ra.ahead_start == 0
    disk.congested = False
    page_cache_readahead(ra, 2, 1, disk)
    assert disk.windows[-1] == (4, 8, 8)


def test_a_cached_file_turns_read_ahead_off_after_256_pages():
    ra = ReadaheadState(32)
    disk = Disk(cached=range(100000))
    read_sequentially(ra, disk, 2000)
    asked = sum(count for _, count, _ in disk.windows)
    assert ra.incache and asked >= 256
    windows = len(disk.windows)
    read_sequentially(ra, disk, 100, first=2000)
    assert len(disk.windows) == windows        # off: nothing more asked for
    ra.note_miss()                             # a page read ahead was evicted: back on
    assert not ra.incache


@settings(max_examples=200, deadline=None)
@given(reads=st.lists(st.tuples(st.integers(0, 2000), st.integers(1, 80)), max_size=40),
       ra_pages=st.sampled_from([0, 8, 32, 64, 256]))
def test_windows_stay_within_the_maximum_and_cover_every_read(reads, ra_pages):
    ra = ReadaheadState(ra_pages)
    disk = Disk()
    for offset, size in reads:
        nxt = page_cache_readahead(ra, offset, size, disk)
        assert nxt > offset - 1
        assert ra.size <= max(ra_pages, 0) and ra.ahead_size <= 2 * max(ra_pages, 1) + 2000
    for start, count, missing in disk.windows:
        assert 0 < count <= max(ra_pages, 1) and 0 <= missing <= count
