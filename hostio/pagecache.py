"""The host's page cache: file pages in memory, least recently used first out.

A page (4 KiB of one file) is either being read (a `PageRead` its readers wait on) or up
to date. Pages being read, dirty pages and pages under writeback are never evicted (the
cache may exceed its size while they are); whenever the cache is over its size, the least
recently used clean up-to-date pages go. Linux 2.6 keeps two lists (active and
inactive) and promotes a page on its second use; blksim keeps one LRU list, a
simplification: a page used once and a page used often age alike.
"""

from __future__ import annotations

from collections import OrderedDict

PAGE_BYTES = 4096


def page_runs(pages, limit: int | None = None) -> list:
    """The runs of consecutive page numbers in ``pages`` (in the order given), each at
    most ``limit`` long: what one bio carries."""
    runs: list = []
    run: list = []
    for page in pages:
        if run and (run[-1] + 1 != page or (limit is not None and len(run) >= limit)):
            runs.append(run)
            run = []
        run.append(page)
    if run:
        runs.append(run)
    return runs


class PageRead:
    """Pages being read from the device, and the callbacks waiting for them."""

    __slots__ = ("waiters",)

    def __init__(self) -> None:
        self.waiters = []


class PageCache:
    """Up to ``pages`` pages, keyed ``(file number, page index)``. Counts the page lookups
    of reads: ``hits`` (up to date), ``waits`` (being read) and ``misses`` (absent)."""

    def __init__(self, pages: int) -> None:
        self.capacity = pages
        self._pages: OrderedDict = OrderedDict()     # key -> PageRead, or None when up to date
        self._pinned: set = set()                    # dirty or under writeback: kept
        self.hits = 0
        self.waits = 0
        self.misses = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._pages)

    def state(self, key):
        """None when absent; True when up to date (and now most recently used); the
        `PageRead` when being read. Counts the lookup."""
        pages = self._pages
        if key not in pages:
            self.misses += 1
            return None
        read = pages[key]
        if read is None:
            pages.move_to_end(key)
            self.hits += 1
            return True
        self.waits += 1
        return read

    def peek(self, key):
        """As `state`, without counting a lookup or touching the LRU order."""
        if key not in self._pages:
            return None
        read = self._pages[key]
        return True if read is None else read

    def cached(self, key) -> bool:
        """Whether ``key`` is present (up to date or being read); not counted."""
        return key in self._pages

    def write(self, key) -> None:
        """A write made ``key`` up to date (a whole page, or one read first)."""
        pages = self._pages
        pages[key] = None
        pages.move_to_end(key)
        if len(pages) > self.capacity:
            self._evict()

    def pin(self, key) -> None:
        """Keep ``key`` (dirty, or under writeback) until `unpin`."""
        self._pinned.add(key)

    def unpin(self, key) -> None:
        """``key`` is clean again: it may be evicted."""
        self._pinned.discard(key)
        if len(self._pages) > self.capacity:
            self._evict()

    def start_read(self, key, read: PageRead) -> None:
        """``key`` is being read by ``read``: make room for it."""
        pages = self._pages
        pages[key] = read
        if len(pages) > self.capacity:
            self._evict()

    def finish_read(self, key) -> None:
        """``key``'s read completed: it is up to date (the readers waiting for it hold it,
        as a reference holds a page: they go on even if it is evicted at once)."""
        pages = self._pages
        if key in pages:
            pages[key] = None
            pages.move_to_end(key)
            if len(pages) > self.capacity:
                self._evict()

    def _evict(self) -> None:
        """Evict up-to-date pages, least recently used first, while over capacity (pages
        being read stay: the cache may hold more than its capacity while they are)."""
        pages = self._pages
        pinned = self._pinned
        over = len(pages) - self.capacity
        victims = []
        for key, read in pages.items():
            if over <= 0:
                break
            if read is None and key not in pinned:
                victims.append(key)
                over -= 1
        for key in victims:
            del pages[key]
        self.evicted += len(victims)

    def drop_file(self, file_no: int) -> None:
        """Drop every clean up-to-date page of a file (fio's ``invalidate``)."""
        pinned = self._pinned
        for key in [k for k, r in self._pages.items()
                    if k[0] == file_no and r is None and k not in pinned]:
            del self._pages[key]
