"""The database writers (Oracle's DBWn, InnoDB's page cleaners): processes that write
dirty pages of the buffer pool back to the data files, oldest change first.

A writer makes a pass when its timeout expires (Oracle's DBWR every 3 s, InnoDB's page
cleaner every second) or when it is woken, and keeps making passes while it is pressed:

* a **checkpoint** is pending: every change before the checkpoint's LSN must be written
  (Oracle at each log switch; InnoDB when the log fills, see `apps.redo`);
* a session is waiting for a free buffer, or more of the pool is dirty than the writers
  allow (``innodb_max_dirty_pages_pct``).

Without pressure a pass writes the background quota: InnoDB's ``innodb_io_capacity``
pages per second among the cleaners; Oracle's writers write nothing then. Pressed, a
writer takes ``batch`` pages per pass, no faster than ``innodb_io_capacity_max`` pages
per second (among the cleaners) for InnoDB, as fast as the disks go for Oracle.

A pass writes each page with its own write call to its data file: all at once with
asynchronous I/O, one after another without. If the mode wants it, the pass then fsyncs
the data files it wrote. A page is clean when that is done. With InnoDB's doublewrite buffer
(``innodb_doublewrite``, on by default), the pass first writes its pages in order to the
writer's part of the doublewrite file and flushes it, then writes them in place.
"""

from __future__ import annotations

from collections import deque

from blksim.apps import AppProcess
from blksim.block.request import Bio

#: Pages of a doublewrite batch (InnoDB's doublewrite buffer: two blocks of 64 pages).
DOUBLEWRITE_PAGES = 128


class WriterGroup:
    """The writers of one database and what they share: the pool, the checkpoint asked
    for, and the figures."""

    def __init__(self, clock, app, pool, horizon: float) -> None:
        self.clock = clock
        self.app = app
        self.policy = app.policy
        self.pool = pool
        self.horizon = horizon
        self.writers: list = []
        self.log = None                          # the LogWriter, told when pages are written
        self.checkpoint_target = 0               # changes before this LSN must be written
        self.checkpoints = 0
        self.checkpoints_done = 0
        self.pages_counted = 0                   # pages written from warmup to the horizon
        # whether the group completes checkpoints itself (PostgreSQL's checkpointer does)
        self.own_checkpoints = True
        pool.on_need_free = self.wake_all

    def request_checkpoint(self, lsn: int) -> None:
        """Write every change made before ``lsn``."""
        if lsn > self.checkpoint_target:
            if self.checkpoints_done == self.checkpoints:
                self.checkpoints += 1            # else the one under way goes further
            self.checkpoint_target = lsn
            self.wake_all()

    def _checkpoint_reached(self) -> bool:
        return self.pool.oldest_lsn(self.log.lsn) >= self.checkpoint_target

    def pressed(self) -> bool:
        """Whether the writers must write now."""
        pool = self.pool
        if pool.free_waiters:
            return True
        if pool.capacity is not None and \
                len(pool.dirty) > self.policy.dirty_high * pool.capacity:
            return True
        return False

    def wake_all(self) -> None:
        """Wake the idle writers."""
        for w in self.writers:
            w.wake()

    def written(self, pages: list) -> None:
        """A pass's pages are on disk: they are clean (unless changed again)."""
        now = self.clock.now
        pool = self.pool
        woken = []
        for page, _ in pages:
            woken += pool.write_done(page)
        if self.app.warmup <= now <= self.horizon:
            self.pages_counted += len(pages)
        if self.own_checkpoints and self.checkpoints_done < self.checkpoints and \
                self._checkpoint_reached():
            self.checkpoints_done = self.checkpoints
        for done in woken:
            done()
        self.log.checkpoint_moved()


class DatabaseWriter(AppProcess):
    """One writer process, with its own open data files (one per data file)."""

    def __init__(self, clock, ids, pid: int, name: str, group: WriterGroup, files: list,
                 page_map, index: int = 0, doublewrite=None) -> None:
        super().__init__(pid, name, files + ([doublewrite] if doublewrite else []))
        self.index = index                       # its number among the writers
        self.doublewrite = doublewrite           # InnoDB's doublewrite file, opened
        self.clock = clock
        self.ids = ids
        self.group = group
        self.page_map = page_map                 # page -> (file index, sector in the file)
        self.idle = True
        self.quota = 0                           # background pages left this interval
        self._policy = group.policy
        self._share = 1                          # the writers sharing the rates: at start

    def start(self) -> None:
        """The first timeout."""
        self._share = len(self.group.writers)
        self.clock.call_at(self._policy.interval, self._timeout)

    def _timeout(self, _ev=None) -> None:
        now = self.clock.now
        self.quota = self._policy.background_pages // self._share
        if self.idle:
            self._pass()
        if now < self.group.horizon:
            self.clock.call_at(now + self._policy.interval, self._timeout)

    def wake(self) -> None:
        """Make a pass now if idle (as a new event, outside the caller's turn)."""
        if self.idle:
            self.idle = False
            self.clock.call_at(self.clock.now, lambda _ev: self._pass())

    def _pass(self) -> None:
        group = self.group
        pool = group.pool
        policy = self._policy
        pages = []
        if group.checkpoint_target > pool.oldest_lsn(group.log.lsn):
            pages = pool.take_dirty(policy.batch, group.checkpoint_target)
        if not pages and group.pressed():
            pages = pool.take_dirty(policy.batch)
        if not pages and self.quota > 0:
            pages = pool.take_dirty(min(policy.batch, self.quota))
            self.quota -= len(pages)
        if not pages:
            self.idle = True
            return
        self.idle = False
        self._write(pages, self.clock.now)

    def _write(self, pages: list, began: float) -> None:
        if self.doublewrite is not None:
            self._doublewrite(pages, lambda: self._write_in_place(pages, began))
        else:
            self._write_in_place(pages, began)

    def _doublewrite(self, pages: list, then) -> None:
        """InnoDB's doublewrite buffer: the batch first goes, DOUBLEWRITE_PAGES at a time,
        to this writer's part of the doublewrite file, written in order, which is
        flushed before any page is written in place (buf0dblwr.cc)."""
        app = self.group.app
        block = app.block_size // 512
        first = self.index * DOUBLEWRITE_PAGES * block
        chunks = deque(range(0, len(pages), DOUBLEWRITE_PAGES))

        def next_chunk(_call=None):
            if chunks:
                n = min(DOUBLEWRITE_PAGES, len(pages) - chunks.popleft())
                self.doublewrite.submit_bio(Bio(self.ids.take(), first, n * block, True,
                                                False, self.pid, 0, next_chunk))
                return
            if app.modes.data_fsync:
                self.doublewrite.submit_bio(Bio(self.ids.take(), 0, 0, True, True, self.pid,
                                                0, lambda _c: then()))
            else:
                then()
        next_chunk()

    def _write_in_place(self, pages: list, began: float) -> None:
        modes = self.group.app.modes
        block = self.group.app.block_size // 512
        calls = []
        for page, _ in pages:
            f, sector = self.page_map(page)
            calls.append((f, sector))
        touched = sorted({f for f, _ in calls})
        after = deque()
        if modes.data_fsync:
            after.extend(touched)
        left = [len(calls)]

        def fsync_next(_call=None):
            if after:
                self.files[after.popleft()].submit_bio(
                    Bio(self.ids.take(), 0, 0, True, True, self.pid, 0, fsync_next))
                return
            self.group.written(pages)
            self._next_pass(len(pages), began)

        def one_done(_call):
            left[0] -= 1
            if not modes.data_async and left[0]:
                submit(len(calls) - left[0])
            if left[0] == 0:
                fsync_next()

        def submit(i):
            f, sector = calls[i]
            self.files[f].submit_bio(Bio(self.ids.take(), sector, block, True, False,
                                         self.pid, 0, one_done))
        if modes.data_async:
            for i in range(len(calls)):
                submit(i)
        else:
            submit(0)

    def _next_pass(self, count: int, began: float) -> None:
        rate = self._policy.pressed_rate
        now = self.clock.now
        at = now
        if rate is not None:
            at = max(now, began + count / (rate / self._share))
        if at > now:
            self.clock.call_at(at, lambda _ev: self._pass())
        else:
            self._pass()
