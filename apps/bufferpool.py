"""A database's buffer pool (Oracle's buffer cache, InnoDB's buffer pool): pages of the
data files held in the database's own memory, with the dirty-page bookkeeping that its
writers and checkpoints work from.

A page is in one of four states: being read, clean (on an LRU list), dirty (on a list in
the order of its first modification, which is the order of its redo: oldest first, as
InnoDB's flush list and Oracle's checkpoint queue keep them), or being written. Only a
clean page is ever evicted, the least recently used first; when there is none, the
session that needs a free buffer waits for a writer to clean one ("free buffer waits").
A page modified while its write is in flight stays dirty after the write.

Instead of a size the pool can be given a hit ratio: a read then misses with that
probability unless the page is dirty or being written (which the pool keeps whatever
its size), and no clean page is kept.

The ledger ``episodes``/``written``: every change of a page from clean to dirty starts an
episode, and every completed write ends one. At any moment ``episodes == written +
unfinished()``: no change is lost or written twice.
"""

from __future__ import annotations

from collections import OrderedDict


class BufferPool:
    """``capacity`` pages (None: the ``hit_ratio`` form)."""

    def __init__(self, capacity: int | None, hit_ratio: float | None = None) -> None:
        self.capacity = capacity
        self.hit_ratio = hit_ratio
        self.clean: OrderedDict = OrderedDict()   # page -> None, least recently used first
        self.dirty: dict = {}                     # page -> LSN of its first change, oldest first
        self.writing: dict = {}                   # page -> [LSN of the change written, redirtied LSN]
        self.reading: dict = {}                   # page -> callbacks waiting for it
        self.free_waiters: list = []              # callbacks waiting for a free buffer
        self.episodes = 0
        self.written = 0
        self.on_need_free = None                  # called when a session finds no free buffer
        self.allocations = 0                      # buffers taken for reads (PostgreSQL's
                                                  # background writer paces by them)

    # ------------------------------------------------------------------ sessions' side
    def lookup(self, page: int, rng) -> str:
        """Where ``page`` is: "hit", "reading" (another session reads it: wait with
        `wait_read`) or "miss" (the caller must get a free buffer and read it)."""
        if page in self.dirty or page in self.writing:
            return "hit"
        if page in self.reading:
            return "reading"
        if self.capacity is None:
            return "hit" if rng.random() < self.hit_ratio else "miss"
        if page in self.clean:
            self.clean.move_to_end(page)
            return "hit"
        return "miss"

    def wait_read(self, page: int, done) -> None:
        """Call ``done()`` when the read of ``page`` in progress completes."""
        self.reading[page].append(done)

    def take_free(self, page: int) -> bool:
        """Reserve a buffer for reading ``page`` (evicting the least recently used clean
        page if the pool is full); False if no buffer is free (wait with
        `wait_free`)."""
        if self.capacity is not None and self.used() >= self.capacity:
            if not self.clean:
                return False
            self.clean.popitem(last=False)
        self.reading[page] = []
        self.allocations += 1
        return True

    def wait_free(self, done) -> None:
        """Call ``done()`` when a buffer may be free (a write made a page clean)."""
        self.free_waiters.append(done)
        if self.on_need_free is not None:
            self.on_need_free()

    def read_done(self, page: int) -> list:
        """The read of ``page`` completed: it is clean. The callbacks to call: those that
        waited for it, and those waiting for a free buffer (a clean page now exists)."""
        waiters = self.reading.pop(page)
        if self.capacity is not None:
            self.clean[page] = None
            if self.free_waiters:
                waiters += self.free_waiters
                self.free_waiters = []
        return waiters

    def modify(self, page: int, lsn: int) -> None:
        """A session changed ``page`` (which it has just found in the pool) at ``lsn``."""
        if page in self.dirty:
            return
        busy = self.writing.get(page)
        if busy is not None:
            if busy[1] is None:                   # a change after the write began
                busy[1] = lsn
                self.episodes += 1
            return
        self.clean.pop(page, None)
        self.dirty[page] = lsn
        self.episodes += 1

    def used(self) -> int:
        """Buffers in use."""
        return len(self.clean) + len(self.dirty) + len(self.writing) + len(self.reading)

    # ------------------------------------------------------------------ writers' side
    def take_dirty(self, count: int, below_lsn: float = float("inf")) -> list:
        """Up to ``count`` of the oldest dirty pages whose first change is before
        ``below_lsn``, now being written: [(page, lsn), ...]."""
        out = []
        dirty = self.dirty
        for page, lsn in dirty.items():
            if len(out) >= count or lsn >= below_lsn:
                break
            out.append((page, lsn))
        for page, lsn in out:
            del dirty[page]
            self.writing[page] = [lsn, None]
        return out

    def write_done(self, page: int) -> list:
        """The write of ``page`` completed; the free-buffer waiters to wake (a clean page
        was made) or [] (it was changed again meanwhile and stays dirty)."""
        _, again = self.writing.pop(page)
        self.written += 1
        if again is not None:
            self.dirty[page] = again
            return []
        if self.capacity is not None:
            self.clean[page] = None
        waiters, self.free_waiters = self.free_waiters, []
        return waiters

    def oldest_lsn(self, default: int) -> int:
        """The LSN of the oldest change not yet written (the checkpoint LSN): redo before
        it is no longer needed for recovery. ``default`` when nothing is dirty."""
        oldest = next(iter(self.dirty.values()), default)
        for lsn, _ in self.writing.values():
            if lsn < oldest:
                oldest = lsn
        return oldest

    def unfinished(self) -> int:
        """Changes not yet written: dirty pages, pages being written, and pages changed
        again during their write."""
        return len(self.dirty) + len(self.writing) + sum(
            1 for _, again in self.writing.values() if again is not None)
