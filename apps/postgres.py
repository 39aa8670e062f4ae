"""PostgreSQL's own processes and rules, beside the pieces every engine shares (the buffer
pool `apps.bufferpool` as shared_buffers, the log writer `apps.redo` as the WAL and its
writer, the sessions of `apps.oltp` as backends):

* **Double buffering.** Every file is opened without O_DIRECT: a miss in shared_buffers
  is a buffered read (``smgrread`` -> ``FileRead``, md.c), which the host's page cache may
  answer; a page written out is copied to the page cache and reaches the disk by the
  kernel's writeback or the checkpoint's fsync.
* **The checkpointer** (`Checkpointer`; the background writer process in 8.4,
  ``CreateCheckPoint`` in xlog.c, ``BufferSync`` in bufmgr.c; its own process from 9.2).
  A checkpoint starts every ``checkpoint_timeout`` after the last one started, or as soon
  as the WAL is written into the segment ``checkpoint_segments - 1`` after the one
  holding the last redo point (``max_wal_size / (1 + checkpoint_completion_target)``
  segments from 9.5, see `apps.postgres_config`), signalled by the WAL's writer
  (``XLogWrite`` -> ``XLogCheckpointNeeded``). Its redo point is the WAL's insert
  position at its start; it writes every buffer dirtied before it, one ``write()`` after
  another, paced: after each page it is on schedule when
  ``checkpoint_completion_target * written / to_write`` is at least both the share of
  ``checkpoint_timeout`` and the share of the checkpoint distance's WAL gone by since it
  started (``IsCheckpointOnSchedule``), and then it sleeps 100 ms
  (``CheckpointWriteDelay``) before looking again. Its writes are thus spread over
  ``checkpoint_completion_target`` of the interval. Then it fsyncs each data file in turn
  (``mdsync``, md.c) and the checkpoint is complete.
* **Full-page writes** (`FullPageWrites`): the first change of a page after a
  checkpoint's redo point logs the whole page in the WAL (``XLogInsert`` with
  ``RedoRecPtr``, xlog.c), unless ``full_page_writes = off``.
* **The background writer** (`BackgroundWriter`, ``BgBufferSync`` in bufmgr.c, 8.3 and
  later): every ``bgwriter_delay`` it estimates the buffers the backends will allocate
  before its next round (the recent allocations, smoothed over 16 rounds when they fall,
  times ``bgwriter_lru_multiplier``) and writes dirty buffers until that many are
  reusable, at most ``bgwriter_lru_maxpages`` per round.
* **Backends write** (`backend_write`): a backend that finds no clean buffer to reuse
  writes a dirty one itself, then reads its page into it (``BufferAlloc`` ->
  ``FlushBuffer``), rather than waiting for a writer.
* ``commit_delay`` / ``commit_siblings`` are the log writer's (`apps.redo`), the open loop
  the sessions' (`apps.openloop`).

Simplifications (named in docs/apps.md): the clock sweep with usage counts is the pool's
LRU list, so the background writer and a backend write the oldest dirty buffers, and the
checkpoint takes its buffers oldest change first, not in file order (9.6's sorting); a
full page image is the whole 8 kB page (no hole is cut out, no wal_compression); a
backend's or the background writer's write is not followed by an fsync request that the
checkpoint would count (every data file is fsynced at each checkpoint anyway).
"""

from __future__ import annotations

from collections import deque

from blksim.apps import AppProcess
from blksim.apps.dbwriter import DatabaseWriter
from blksim.apps.postgres_config import WAL_SEGMENT
from blksim.block.request import Bio

#: ``CheckpointWriteDelay``'s sleep while the checkpoint is on schedule (bgwriter.c 8.4,
#: checkpointer.c 16: 100 ms).
CHECKPOINT_NAP = 0.1
#: ``BgBufferSync``'s smoothing of falling allocation counts (smoothing_samples, 16).
SMOOTHING_SAMPLES = 16


class FullPageWrites:
    """Which pages have been changed since the last checkpoint's redo point: the first
    change of each logs a full page image (``image_bytes``, or nothing when off)."""

    def __init__(self, image_bytes: int, on: bool) -> None:
        self.image_bytes = image_bytes if on else 0
        self.seen: set = set()          # pages changed since the redo point (bounded by pages)
        self.images = 0                 # full page images logged
        self.bytes = 0

    def extra(self, page: int) -> int:
        """WAL bytes a change of ``page`` adds besides its change record."""
        if not self.image_bytes or page in self.seen:
            return 0
        self.seen.add(page)
        self.images += 1
        self.bytes += self.image_bytes
        return self.image_bytes

    def new_redo_point(self) -> None:
        """A checkpoint started: every page's next change logs its image again."""
        self.seen.clear()


class Checkpointer(AppProcess):
    """The checkpointer of one database (``files``: its open data files)."""

    def __init__(self, clock, ids, pid: int, name: str, db, files: list) -> None:
        super().__init__(pid, name, files)
        self.clock = clock
        self.ids = ids
        self.db = db
        self.params = db.app.pg
        self.running = False
        self.pending = None             # "time"/"wal": asked for while one ran
        self.redo = 0                   # the redo point of the checkpoint started last
        self._start = 0.0
        self._to_write = 0
        self._written = 0
        # figures: checkpoints started by time and by WAL, pages, write and sync phases
        self.by_time = 0
        self.by_wal = 0
        self.pages = 0
        self.write_s = 0.0
        self.sync_s = 0.0
        self.last = None                # (pages to write, write phase s, sync phase s)

    def start(self) -> None:
        """The first timed checkpoint, checkpoint_timeout after the server starts."""
        self._due = self.params.checkpoint_timeout
        self.clock.call_at(self._due, self._timer)

    def _timer(self, _ev=None) -> None:
        now = self.clock.now
        if now < self._due:              # a WAL checkpoint moved the timer since
            return
        if self.running:
            self.pending = "time"
        elif self.db.log.lsn == self.redo and self.by_time + self.by_wal:
            # no WAL since the last checkpoint: this one is skipped (CreateCheckPoint)
            self._due = now + self.params.checkpoint_timeout
            if self._due < self.db.horizon:
                self.clock.call_at(self._due, self._timer)
        else:
            self._begin("time")

    def wal_written(self, lsn: int) -> None:
        """The WAL is written up to ``lsn``: a checkpoint once it is written into the
        segment ``checkpoint_segments - 1`` after the redo point's (``XLogWrite`` ->
        ``XLogCheckpointNeeded``, xlog.c, 8.4 and 16 alike)."""
        if lsn // WAL_SEGMENT >= self.redo // WAL_SEGMENT + \
                self.params.checkpoint_segments - 1:
            self.request(lsn)

    def request(self, _lsn: int) -> None:
        """A checkpoint for WAL (its distance passed, or the log nearly full,
        `apps.redo`): now, or after the one under way."""
        if self.running:
            self.pending = self.pending or "wal"
        else:
            self._begin("wal")

    def _begin(self, why: str) -> None:
        db = self.db
        now = self.clock.now
        if why == "time":
            self.by_time += 1
        else:
            self.by_wal += 1
        self.running = True
        self.pending = None
        self.redo = db.log.lsn
        db.full_pages.new_redo_point()
        group = db.group
        group.checkpoints += 1
        self._start = now
        self._to_write = sum(1 for lsn in db.pool.dirty.values() if lsn < self.redo) + \
            sum(1 for lsn, _ in db.pool.writing.values() if lsn < self.redo)
        self._written = 0
        # the next timed checkpoint: checkpoint_timeout after this one's start
        self._due = now + self.params.checkpoint_timeout
        if self._due < db.horizon:
            self.clock.call_at(self._due, self._timer)
        self._write_next()

    def _on_schedule(self) -> bool:
        """``IsCheckpointOnSchedule``: the share written, times the completion target,
        against the shares of time and of WAL gone by."""
        p = self.params
        progress = p.completion_target * self._written / self._to_write
        elapsed = (self.clock.now - self._start) / p.checkpoint_timeout
        wal = (self.db.log.lsn - self.redo) / p.checkpoint_distance
        return progress >= elapsed and progress >= wal

    def _write_next(self, _ev=None) -> None:
        # BufferSync: a page, then CheckpointWriteDelay naps while on schedule
        if 0 < self._written < self._to_write and self._on_schedule():
            self.clock.call_at(self.clock.now + CHECKPOINT_NAP, self._write_next)
            return
        pages = self.db.pool.take_dirty(1, self.redo)
        if not pages:
            self._sync()
            return
        f, sector = self.db.page_map(pages[0][0])
        self.files[f].submit_bio(Bio(self.ids.take(), sector, self.db.block_sectors, True,
                                     False, self.pid, 0, lambda _c: self._page_written(pages)))

    def _page_written(self, pages: list) -> None:
        self._written += 1
        self.pages += 1
        self.db.group.written(pages)
        self._write_next()

    def _sync(self) -> None:
        """``mdsync``: fsync every data file, one after another."""
        began = self.clock.now
        todo = deque(range(len(self.files)) if self.params.fsync else ())

        def next_file(_call=None):
            if todo:
                self.files[todo.popleft()].submit_bio(
                    Bio(self.ids.take(), 0, 0, True, True, self.pid, 0, next_file))
                return
            self._done(began)
        next_file()

    def _done(self, sync_began: float) -> None:
        now = self.clock.now
        write_s, sync_s = sync_began - self._start, now - sync_began
        self.write_s += write_s
        self.sync_s += sync_s
        self.last = (self._to_write, write_s, sync_s)
        self.db.group.checkpoints_done += 1
        self.running = False
        self.db.log.checkpoint_moved()
        if self.pending and now < self.db.horizon:
            self._begin(self.pending)


class BackgroundWriter(DatabaseWriter):
    """PostgreSQL's background writer: a round every ``bgwriter_delay`` (the group's
    ``policy.interval``) writes as many dirty buffers as the next round's allocations
    are expected to need, at most ``bgwriter_lru_maxpages``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._allocs = 0                # the pool's allocations at the last round
        self._smoothed = 0.0
        self.rounds_at_max = 0          # pg_stat_bgwriter's maxwritten_clean

    def _timeout(self, _ev=None) -> None:
        group = self.group
        pool = group.pool
        pg = group.app.pg
        recent = pool.allocations - self._allocs
        self._allocs = pool.allocations
        if self._smoothed <= recent:
            self._smoothed = float(recent)
        else:
            self._smoothed += (recent - self._smoothed) / SMOOTHING_SAMPLES
        upcoming = int(self._smoothed * pg.lru_multiplier + 0.999999)
        if pool.capacity is None:
            reusable = upcoming                  # the hit-ratio pool: nothing to reclaim
        else:
            reusable = len(pool.clean) + pool.capacity - pool.used()
        self.quota = min(pg.lru_maxpages, max(0, upcoming - reusable))
        if self.quota == pg.lru_maxpages and self.quota:
            self.rounds_at_max += 1
        if self.idle:
            self._pass()
        now = self.clock.now
        if now < group.horizon:
            self.clock.call_at(now + self._policy.interval, self._timeout)

    def wake(self) -> None:
        """Backends write their own buffers: nobody wakes the background writer."""

    def _pass(self) -> None:
        pages = self.group.pool.take_dirty(self.quota) if self.quota > 0 else []
        self.quota -= len(pages)
        if not pages:
            self.idle = True
            return
        self.idle = False
        self._write(pages, self.clock.now)

    def _next_pass(self, count: int, began: float) -> None:
        # the pass's pages are written: pg_stat_bgwriter counts a buffer once its write()
        # returned (``SyncOneBuffer``), so a write still in flight at the end is not counted
        self.group.cleaned += count
        super()._next_pass(count, began)


def backend_write(db, session, then) -> bool:
    """A backend (``session``) found no clean buffer to reuse: it writes the oldest dirty
    one itself, through its own open data file, and calls ``then()`` to try again (True);
    with no dirty buffer either, it must wait (False)."""
    victim = db.pool.take_dirty(1)
    if not victim:
        return False
    f, sector = db.page_map(victim[0][0])

    def written(_call):
        db.group.backend += 1                   # counted once written, as the others are
        db.group.written(victim)
        then()
    session.files[f].submit_bio(Bio(db.ids.take(), sector, db.block_sectors, True, False,
                                    session.pid, 0, written))
    return True


def attach(db, ctx) -> None:
    """Wire PostgreSQL's rules into database ``db`` (an `apps.oltp.Database` whose writers
    are `BackgroundWriter`s): full-page writes, the checkpointer, backends' writes."""
    app = db.app
    pg = app.pg
    db.full_pages = FullPageWrites(app.block_size, pg.full_page_writes)
    db.group.cleaned = 0
    db.group.own_checkpoints = False
    db.group.backend = 0
    name = f"{app.name}.checkpointer"
    files = [ctx.open_file(p, False) for p in app.data_files]
    ckpt = Checkpointer(ctx.clock, ctx.ids, ctx.new_process(name), name, db, files)
    db.checkpointer = ckpt
    db.log.request_checkpoint = ckpt.request
    db.log.on_written = ckpt.wal_written
    db.log.commit_delay = pg.commit_delay
    db.log.commit_siblings = pg.commit_siblings
    db.log.active = lambda: db.active
    db.backend_write = backend_write           # (db, session, then) -> bool
    db.wal_at_warmup = 0                 # the WAL's insert position when counting began
    if app.warmup > 0:
        ctx.clock.call_at(app.warmup, lambda _ev: setattr(db, "wal_at_warmup", db.log.lsn))
    ctx.add(ckpt)


def figures(db, span: float) -> dict:
    """PostgreSQL's own figures (as pg_stat_bgwriter names them, where it has a name);
    ``span``: the measured window's seconds, over which the WAL generated is a rate."""
    ckpt, group, fpw = db.checkpointer, db.group, db.full_pages
    done = group.checkpoints_done
    last = ckpt.last
    return {
        # WAL inserted (change records and full page images), not the bytes written to
        # the WAL files (``redo``), which rewrite each partly filled 8 kB page
        "wal_generated_mb_per_s": round((db.log.lsn - db.wal_at_warmup) / 1e6 / span, 6),
        "checkpoints_timed": ckpt.by_time, "checkpoints_req": ckpt.by_wal,
        "checkpoint_write_s_mean": round(ckpt.write_s / done, 6) if done else None,
        "checkpoint_sync_s_mean": round(ckpt.sync_s / done, 6) if done else None,
        "last_checkpoint": None if last is None else {
            "pages": last[0], "write_s": round(last[1], 6), "sync_s": round(last[2], 6)},
        "buffers_checkpoint": ckpt.pages, "buffers_clean": group.cleaned,
        "maxwritten_clean": sum(w.rounds_at_max for w in group.writers),
        "buffers_backend": group.backend,
        "full_page_images": fpw.images, "full_page_bytes": fpw.bytes,
    }


def lines(p: dict) -> list:
    """The terminal lines of `figures`."""
    phases = "" if p["checkpoint_write_s_mean"] is None else \
        (f", write phase {p['checkpoint_write_s_mean']:.3f} s and sync phase "
         f"{p['checkpoint_sync_s_mean']:.3f} s on average")
    return [f"postgresql: WAL generated {p['wal_generated_mb_per_s']:.3f} MB/s; since the "
            f"start: checkpoints {p['checkpoints_timed']} timed, "
            f"{p['checkpoints_req']} for WAL{phases}; buffers written by the checkpointer "
            f"{p['buffers_checkpoint']}, the background writer {p['buffers_clean']}, "
            f"backends {p['buffers_backend']}; {p['full_page_images']} full page images "
            f"({p['full_page_bytes'] / 1e6:.3f} MB of WAL)"]
