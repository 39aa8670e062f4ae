"""The redo log and its writer (Oracle's LGWR, InnoDB's log writer): group commit over a
circular set of log files.

Redo is counted in bytes from the start of the run (the LSN). A committing session adds
its redo and, as the engine's mode says, waits until the log writer has written it,
written and flushed it, or not at all. The log writer is one process doing one write at
a time: when it is idle and redo is waiting, it writes everything appended so far (from
the 512-byte block where the last write ended, as both engines rewrite a partly filled
last block), flushes it if the mode wants an fsync, and then releases every commit whose
redo the write covered, however many arrived while the previous write was in flight:
that is group commit. With one session there is one commit per write.

The log files are written in turn and reused: redo may only be written over once the
changes it describes are on disk (the checkpoint LSN, the oldest change not yet written,
has passed it). Oracle reuses a whole log group at a time and checkpoints at each log
switch; InnoDB's log is one circular space whose writer presses the page cleaners when
the checkpoint age passes 7/8 of the log's capacity and stops when it would pass 15/16
(the "async" and "sync" flush points of log0log.cc, simplified). While the writer may not
write, commits wait longer: the stall is reported.
"""

from __future__ import annotations

from collections import deque

from blksim.apps import AppProcess
from blksim.block.request import Bio

#: The log's block (Oracle's redo block, InnoDB's log block): a write starts at the block
#: where the last one ended and ends on a block boundary. PostgreSQL's WAL writes whole
#: XLOG_BLCKSZ pages (8 kB), `OltpConfig.log_block`.
BLOCK = 512


class LogWriter(AppProcess):
    """The log writer process of one database (``files``: an open file per log file, in
    the order they are written)."""

    def __init__(self, clock, ids, pid: int, name: str, app, files: list, pool,
                 horizon: float) -> None:
        super().__init__(pid, name, files)
        self.clock = clock
        self.ids = ids
        self.modes = app.modes
        self.block = app.log_block
        self.file_size = app.log_file_size
        self.capacity = app.log_file_size * len(files)
        self.switch_checkpoints = app.log_switch_checkpoints
        self.pool = pool
        self.horizon = horizon
        self.lsn = 0                               # redo appended
        self.written = 0                           # redo written
        self.flushed = 0                           # redo written and flushed
        self.waiting: deque = deque()              # (lsn, done), in LSN order
        self.busy = False
        self.stalled_since = None
        self.request_checkpoint = None             # (lsn) -> writers write changes before it
        self.on_written = None                     # (lsn) -> told after each write
        # PostgreSQL's commit_delay (s) and commit_siblings, with ``active()``: the
        # sessions in a transaction
        self.commit_delay = 0.0
        self.commit_siblings = 0
        self.active = None
        # figures
        self.writes = 0
        self.bytes = 0
        self.commits = 0
        self.write_time = 0.0
        self.stall_time = 0.0
        self.switches = 0
        self._group = 0                            # the log group being written (its number)

    # ------------------------------------------------------------------ sessions' side
    def commit(self, redo: int, done) -> None:
        """A session commits ``redo`` bytes; ``done()`` when the engine's mode lets it
        go on."""
        self.lsn += redo
        if self.modes.commit_waits == "none":
            done()
            return
        self.waiting.append((self.lsn, done))
        self.kick()

    # ------------------------------------------------------------------ the writer
    def start(self) -> None:
        """The periodic write/flush of InnoDB's innodb_flush_log_at_trx_commit = 0 or 2."""
        if self.modes.log_timer > 0:
            self.clock.call_at(self.modes.log_timer, self._timer)

    def _timer(self, _ev=None) -> None:
        now = self.clock.now
        if not self.busy:
            if self.modes.timer_writes:
                self._write_up_to(self.lsn, flush=True)
            elif self.flushed < self.written:
                self._flush(self.written)
        if now < self.horizon:
            self.clock.call_at(now + self.modes.log_timer, self._timer)

    def kick(self) -> None:
        """Write the waiting redo, unless a write is in flight or the log is full."""
        if self.busy or not self.waiting:
            return
        if self.commit_delay > 0 and self.active() > self.commit_siblings:
            # PostgreSQL: the committing backend sleeps commit_delay before its flush when
            # at least commit_siblings other transactions are open (MinimumActiveBackends;
            # in RecordTransactionCommit, xact.c 8.4; in XLogFlush, xlog.c 9.3 and later),
            # so that their commits join its write
            self.busy = True
            self.clock.call_at(self.clock.now + self.commit_delay, self._after_delay)
            return
        self._write_up_to(self.lsn, flush=self.modes.commit_waits == "flush")

    def _after_delay(self, _ev=None) -> None:
        self.busy = False
        self._write_up_to(self.lsn, flush=self.modes.commit_waits == "flush")

    def _checkpoint_needed(self, target: int) -> int:
        """The checkpoint LSN the log must have reached before redo up to ``target`` may
        be written without overwriting redo of changes not yet on disk."""
        if self.switch_checkpoints:
            # a whole group is reused once everything it held is on disk
            return (-(-target // self.file_size) - len(self.files)) * self.file_size
        return target - self.capacity * 15 // 16

    def _write_up_to(self, target: int, flush: bool) -> None:
        if target <= self.written:
            if flush and self.flushed < self.written:
                self._flush(self.written)
            return
        checkpoint = self.pool.oldest_lsn(self.lsn)
        if not self.switch_checkpoints and target - checkpoint > self.capacity * 7 // 8:
            self.request_checkpoint(target - self.capacity * 3 // 4)
        needed = self._checkpoint_needed(target)
        if checkpoint < needed:
            if self.stalled_since is None:
                self.stalled_since = self.clock.now
            self.request_checkpoint(needed)
            return
        if self.stalled_since is not None:
            self.stall_time += self.clock.now - self.stalled_since
            self.stalled_since = None
        block = self.block
        start = self.written - self.written % block
        end = -(-target // block) * block
        group = (end - 1) // self.file_size
        if self.switch_checkpoints and group > self._group:
            # a log switch: everything in the groups filled is checkpointed
            self.switches += group - self._group
            self._group = group
            self.request_checkpoint(group * self.file_size)
        pieces = []
        at = start
        while at < end:
            f = (at // self.file_size) % len(self.files)
            within = at % self.file_size
            n = min(end - at, self.file_size - within)
            pieces.append((f, within, n))
            at += n
        self.busy = True
        began = self.clock.now
        left = [len(pieces)]

        def written(_call):
            left[0] -= 1
            if left[0]:
                return
            self.writes += 1
            self.bytes += end - start
            self.written = target
            if self.on_written is not None:
                self.on_written(target)
            if flush and self.modes.log_fsync:
                self._flush(target, began, {f for f, _, _ in pieces})
            else:
                if flush or self.modes.log_write_sync:
                    self.flushed = target
                self._finish(began)
        for f, within, n in pieces:
            self.files[f].submit_bio(Bio(self.ids.take(), within // 512, n // 512, True,
                                         True, self.pid, 0, written))

    def _flush(self, target: int, began: float | None = None, files=None) -> None:
        """fsync the log files written (all of them when ``files`` is None)."""
        self.busy = True
        began = self.clock.now if began is None else began
        files = sorted(files) if files is not None else range(len(self.files))
        todo = deque(files)

        def next_file(_call=None):
            if todo:
                self.files[todo.popleft()].submit_bio(
                    Bio(self.ids.take(), 0, 0, True, True, self.pid, 0, next_file))
                return
            self.flushed = max(self.flushed, target)
            self._finish(began)
        next_file()

    def _finish(self, began: float) -> None:
        self.busy = False
        self.write_time += self.clock.now - began
        level = self.flushed if self.modes.commit_waits == "flush" else self.written
        waiting = self.waiting
        released = []
        while waiting and waiting[0][0] <= level:
            released.append(waiting.popleft()[1])
        self.commits += len(released)
        for done in released:
            done()
        self.kick()

    def checkpoint_moved(self) -> None:
        """The writers have written changes: a stalled log may go on."""
        if self.stalled_since is not None and not self.busy:
            self.kick()
