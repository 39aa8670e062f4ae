"""Dirty pages and their writeback as Linux 2.6.18 does it (mm/page-writeback.c,
fs/fs-writeback.c, fs/mpage.c), in outline.

**Limits** (``get_dirty_limits``): of the host's memory, ``dirty_ratio`` per cent may be
dirty or under writeback before writers are throttled, and ``dirty_background_ratio`` per
cent dirty starts background writeback. As 2.6.18 clamps them: ``dirty_ratio`` at most
half the share of memory that is neither anonymous nor mapped (here: the page cache's
share of memory) and at least 5; the background ratio at most half of that. (The page
cache's own size caps both here: a host's page cache is all its free memory, blksim's
has a size.)

**Writers** (``balance_dirty_pages_ratelimited``): every ``ratelimit`` pages dirtied
(``ratelimit_pages``: memory / 32 pages, from 16 to 1024; 8 while over the limit), the
writer runs ``balance_dirty_pages`` in its own context: while dirty plus under-writeback
pages exceed the dirty limit, it writes back up to 1.5 x ratelimit pages itself (waiting
for free requests) and waits (``blk_congestion_wait``, 100 ms), until the total is under
the limit or it has written its share. Then, with more dirty pages than the background
limit, background writeback starts.

**pdflush**: ``wb_kupdate`` every ``dirty_writeback_centisecs`` writes back the files that
became dirty more than ``dirty_expire_centisecs`` ago, oldest first; ``background_writeout``
writes until the dirty pages are under the background limit. Both write passes of 1024
pages (``MAX_WRITEBACK_PAGES``); a pass stops at a write-congested queue, and pdflush then
waits 100 ms and goes on.

**Writing a file back** (``mpage_writepages`` with range_cyclic): from where its last
writeback stopped, its dirty pages in file order, consecutive ones in one bio of at most
the queue's ``max_sectors_kb``, as async writes. A page is clean when its bio completes;
one written again meanwhile is dirty again.

Simplification: ``blk_congestion_wait`` always sleeps its 100 ms here; the kernel wakes a
sleeper earlier when a queue stops being congested.
"""

from __future__ import annotations

from bisect import bisect_left

from blksim.hostio.pagecache import page_runs

MAX_WRITEBACK_PAGES = 1024
CONGESTION_WAIT = 0.1            # blk_congestion_wait(WRITE, HZ / 10)

#: /proc/sys/vm defaults of Linux 2.6.18
VM_DEFAULTS = {"dirty_ratio": 40, "dirty_background_ratio": 10,
               "dirty_expire_centisecs": 3000, "dirty_writeback_centisecs": 500}


def dirty_limits(memory_pages: int, cache_pages: int, dirty_ratio: int,
                 background_ratio: int) -> tuple:
    """``get_dirty_limits``: (background, dirty) thresholds in pages."""
    unmapped_ratio = cache_pages * 100 // memory_pages
    ratio = max(min(dirty_ratio, unmapped_ratio // 2), 5)
    background = background_ratio if background_ratio < ratio else ratio // 2
    # (blksim's page cache has a size of its own: dirty pages cannot outgrow it)
    dirty = min(ratio * memory_pages // 100, cache_pages)
    return min(background * memory_pages // 100, dirty), dirty


def ratelimit_pages(memory_pages: int) -> int:
    """``set_ratelimit`` for one CPU: memory / 32 pages, from 16 to 4 MiB of pages."""
    return max(16, min(memory_pages // 32, (4 << 20) // 4096))


class _FileDirt:
    """One file's dirty pages, when it became dirty, where its writeback goes on, and its
    pages under writeback."""

    __slots__ = ("file", "pages", "since", "resume", "writing", "waiters")

    def __init__(self, file, since: float) -> None:
        self.file = file            # the hostio.fileio.OpenTarget of the file: layout, device
        self.pages = set()
        self.since = since
        self.resume = 0
        self.writing = 0
        self.waiters = []           # called when writing falls to 0


class Writeback:
    """The host's dirty pages, their limits and the flusher (module docstring).

    ``flusher``: pdflush's `hostio.fileio.Submitter`; ``cache``: the page cache (dirty and
    under-writeback pages are pinned in it)."""

    def __init__(self, clock, cache, memory_pages: int, vm: dict, flusher) -> None:
        self.clock = clock
        self.cache = cache
        self.background, self.limit = dirty_limits(
            memory_pages, cache.capacity, vm["dirty_ratio"], vm["dirty_background_ratio"])
        self.expire = vm["dirty_expire_centisecs"] / 100.0
        self.interval = vm["dirty_writeback_centisecs"] / 100.0
        self.ratelimit = ratelimit_pages(memory_pages)
        self.flusher = flusher
        self.files: dict = {}              # file number -> _FileDirt
        self.nr_dirty = 0
        self.nr_writeback = 0
        self.exceeded = False
        self.counter = 0                   # pages dirtied since the last balance
        self.background_running = False
        self.kupdate_armed = False
        self.dirtied = 0                   # page dirtyings that made a clean page dirty
        self.written = 0                   # pages written back
        self.max_dirty = 0
        self._next_mark = float("inf")     # sampling for vmstat.csv (see `every`)
        self._interval = 0.0
        self._on_mark = None

    # ------------------------------------------------------------------ sampling
    def every(self, interval: float, on_mark, start: float = 0.0) -> None:
        """Call ``on_mark(sample)`` with the counters at ``start + interval``, ``start +
        2 interval``, ... as the run passes them (no events of its own: the counters
        only change when pages are dirtied, written or cleaned)."""
        self._interval = interval
        self._on_mark = on_mark
        self._next_mark = start + interval

    def sample(self, now: float) -> tuple:
        """(time, dirty pages, pages under writeback, pages dirtied, pages written)."""
        self._tick(now)
        return now, self.nr_dirty, self.nr_writeback, self.dirtied, self.written

    def _tick(self, now: float) -> None:
        while now >= self._next_mark:
            mark = self._next_mark
            self._next_mark = mark + self._interval
            self._on_mark((mark, self.nr_dirty, self.nr_writeback, self.dirtied,
                           self.written))

    # ------------------------------------------------------------------ dirtying
    def dirty(self, file, page: int) -> None:
        """A write dirtied ``page`` of ``file`` (an open target: ``layout``, ``device``)."""
        self._tick(self.clock.now)
        number = file.layout.number
        st = self.files.get(number)
        if st is None:
            st = self.files[number] = _FileDirt(file, self.clock.now)
        if page not in st.pages:
            st.pages.add(page)
            self.nr_dirty += 1
            self.dirtied += 1
            self.cache.pin((number, page))
            if self.nr_dirty > self.max_dirty:
                self.max_dirty = self.nr_dirty
        self.counter += 1
        if not self.kupdate_armed and self.interval > 0:
            self.kupdate_armed = True
            self.clock.call_at(self.clock.now + self.interval, self._kupdate)

    def must_balance(self) -> bool:
        """``balance_dirty_pages_ratelimited``: whether the writer balances now."""
        if self.counter >= (8 if self.exceeded else self.ratelimit):
            self.counter = 0
            return True
        return False

    def over_limit(self) -> bool:
        """Dirty and under-writeback pages above the dirty limit."""
        return self.nr_dirty + self.nr_writeback > self.limit

    # ------------------------------------------------------------------ writing back
    def write_file(self, number: int, nr_to_write: int, nonblocking: bool, submitter,
                   pid: int) -> tuple:
        """Write back up to ``nr_to_write`` dirty pages of file ``number`` from where its
        writeback stopped; (pages written, stopped at a congested queue)."""
        st = self.files.get(number)
        if st is None or not st.pages:
            return 0, False
        file = st.file
        pages = sorted(st.pages)
        i = bisect_left(pages, st.resume)
        runs = page_runs((pages[i:] + pages[:i])[:nr_to_write], file.max_bio_pages())
        written = 0
        for k, run in enumerate(runs):
            # a pass looks for congestion between bios, not after its last one
            stop = nonblocking and k + 1 < len(runs) and file.write_congested()
            self._write_run(st, run, submitter, pid)
            written += len(run)
            if stop:
                return written, True
        return written, False

    def write_listed(self, number: int, pages, submitter, pid: int) -> int:
        """Write back those of ``pages`` of file ``number`` that are still dirty (a
        journal commit's ordered data), waiting for free requests; how many."""
        st = self.files.get(number)
        if st is None:
            return 0
        todo = sorted(p for p in pages if p in st.pages)
        for run in page_runs(todo, st.file.max_bio_pages()):
            self._write_run(st, run, submitter, pid)
        return len(todo)

    def write_some(self, nr_to_write: int, nonblocking: bool, submitter, pid: int,
                   older_than: float | None = None) -> tuple:
        """``writeback_inodes``: files in the order they became dirty (those dirty since
        before ``older_than`` only, when given); (pages written, congested)."""
        written = 0
        for number, st in sorted(self.files.items(), key=lambda kv: (kv[1].since, kv[0])):
            if written >= nr_to_write:
                break
            if older_than is not None and st.since > older_than:
                break
            if not st.pages:
                continue
            if nonblocking and st.file.write_congested():
                return written, True
            n, congested = self.write_file(number, nr_to_write - written, nonblocking,
                                           submitter, pid)
            written += n
            if congested:
                return written, True
        return written, False

    def _write_run(self, st: _FileDirt, run: list, submitter, pid: int) -> None:
        self._tick(self.clock.now)
        for page in run:
            st.pages.discard(page)
        n = len(run)
        self.nr_dirty -= n
        self.nr_writeback += n
        st.writing += n
        st.resume = run[-1] + 1
        self.written += n
        pages = list(run)
        st.file.write_pages(pages, submitter, pid, lambda: self._written(st, pages))

    def _written(self, st: _FileDirt, pages: list) -> None:
        self._tick(self.clock.now)
        self.nr_writeback -= len(pages)
        st.writing -= len(pages)
        number = st.file.layout.number
        for page in pages:
            if page not in st.pages:
                self.cache.unpin((number, page))
        if st.writing == 0 and st.waiters:
            waiters, st.waiters = st.waiters, []
            for wake in waiters:
                wake()
        if not st.pages and st.writing == 0 and self.files.get(number) is st:
            del self.files[number]

    def wait_written(self, number: int, wake) -> None:
        """Call ``wake()`` once no page of file ``number`` is under writeback."""
        st = self.files.get(number)
        if st is None or st.writing == 0:
            wake()
        else:
            st.waiters.append(wake)

    # ------------------------------------------------------------------ pdflush
    def _kupdate(self, _ev=None) -> None:
        """``wb_kupdate``: write back the files dirty for longer than the expire time."""
        self.kupdate_armed = False
        self._kupdate_pass(self.clock.now - self.expire)

    def _kupdate_pass(self, oldest: float) -> None:
        n, congested = self.write_some(MAX_WRITEBACK_PAGES, True, self.flusher,
                                       self.flusher.pid, older_than=oldest)
        if n >= MAX_WRITEBACK_PAGES or congested:
            self.clock.call_at(self.clock.now + CONGESTION_WAIT,
                               lambda _ev: self._kupdate_pass(oldest))
            return
        if self.files and not self.kupdate_armed and self.interval > 0:
            self.kupdate_armed = True
            self.clock.call_at(self.clock.now + self.interval, self._kupdate)

    def start_background(self) -> None:
        """``pdflush_operation(background_writeout)``, unless it is running."""
        if not self.background_running:
            self.background_running = True
            self._background_pass()

    def _background_pass(self, _ev=None) -> None:
        if self.nr_dirty < self.background:
            self.background_running = False
            return
        n, congested = self.write_some(MAX_WRITEBACK_PAGES, True, self.flusher,
                                       self.flusher.pid)
        if n < MAX_WRITEBACK_PAGES and not congested:
            self.background_running = False       # everything dirty is being written
            return
        self.clock.call_at(self.clock.now + (CONGESTION_WAIT if congested else 0.0),
                           self._background_pass)
