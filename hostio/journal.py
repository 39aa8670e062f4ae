"""An ext3 journal in ordered mode, in outline, as Linux 2.6.18's jbd commits it
(fs/jbd/commit.c ``journal_commit_transaction``; fs/ext3/inode.c
``ext3_ordered_commit_write``; fs/ext3/fsync.c ``ext3_sync_file``).

A **transaction** gathers what buffered writes change: in ordered mode every page a
write dirties joins the transaction's data list (``journal_dirty_data``), and each file
written has its inode in it (its times changed). kjournald **commits** the running
transaction ``commit_interval`` after it began, or at once when an fsync asks for it.
A commit:

1. writes the transaction's data pages that are still dirty and waits until none of its
   files has pages under writeback (ordered mode: data before the metadata that points
   at it);
2. writes the journal blocks in one sequential bio at the journal's head, wrapping at
   its end: a descriptor block and one block per inode changed, and waits for it;
3. writes the commit block after them and waits for it: with the ``barrier=1`` mount
   option (``JFS_BARRIER``) as a barrier (``journal_write_commit_record``, fs/jbd/commit.c,
   2.6.18: an ordered buffer, submitted with WRITE_BARRIER; jbd2 and later jbd: REQ_PREFLUSH
   | REQ_FUA), which the block layer turns into the device's cache flushes
   (`blksim.block.flush`); without it (2.6.18's ext3 default, ``barrier=0``) as a plain
   write.

Writes made while a transaction commits join the next one. **fsync** of a file
(``ext3_sync_file``) waits for the commit of the transaction holding its inode: the
running one is committed at once, a committing one is waited for. Left out: metadata
reads, block allocation, the checkpoint that writes the journalled blocks home, and the
journal's own space accounting (it never fills).
"""

from __future__ import annotations

from blksim.hostio.readahead import PAGE_SECTORS
from blksim.block.request import Bio


def commit_record(bio, barrier: bool):
    """Mark ``bio``, a journal's commit block, as ``journal_write_commit_record`` does
    (fs/jbd/commit.c, 2.6.18: ``set_buffer_ordered`` when the journal has JFS_BARRIER, the
    ``barrier=1`` mount option): a barrier, REQ_PREFLUSH | REQ_FUA (the flags jbd2 uses
    from 2.6.37, and what a 2.6.18 barrier means: `blksim.block.flush`). Without
    ``barrier`` the bio is left as it is. The one hook a journal calls; returns ``bio``."""
    if barrier:
        bio.preflush = True
        bio.fua = True
    return bio


class _Transaction:
    __slots__ = ("data", "files", "waiters", "began")

    def __init__(self, began: float) -> None:
        self.data: dict = {}          # file number -> set of pages written
        self.files: dict = {}         # file number -> its open target
        self.waiters = []             # called once it has committed
        self.began = began


class Journal:
    """The journal of the file system on ``device`` (a block device target).
    ``fs``: a `storage_config.FsConfig`; ``writeback``: the host's `Writeback`;
    ``submitter``: kjournald's `hostio.fileio.Submitter`."""

    def __init__(self, fs, device, clock, ids, writeback, submitter) -> None:
        self.fs = fs
        self.device = device
        self.clock = clock
        self.ids = ids
        self.writeback = writeback
        self.submitter = submitter
        self.head = 0                      # next journal block (sectors into the journal)
        self.running: _Transaction | None = None
        self.committing: _Transaction | None = None
        self.commits = 0
        self.data_pages = 0                # data pages written by commits
        self.journal_blocks = 0            # blocks written to the journal
        self._commit_again = False

    # ------------------------------------------------------------------ writers' side
    def note_write(self, file, page: int) -> None:
        """A buffered write dirtied ``page`` of ``file``: it joins the running
        transaction (started, with its commit timer, if there is none)."""
        t = self.running
        if t is None:
            t = self.running = _Transaction(self.clock.now)
            self.clock.call_at(t.began + self.fs.commit_interval,
                               lambda _ev, t=t: self._timer(t))
        number = file.layout.number
        t.data.setdefault(number, set()).add(page)
        t.files[number] = file

    def fsync(self, file, done) -> None:
        """``ext3_sync_file``: ``done()`` once the transaction holding the file's inode has
        committed (at once if none holds it)."""
        number = file.layout.number
        if self.running is not None and number in self.running.files:
            self.running.waiters.append(done)
            self._start_commit()
        elif self.committing is not None and number in self.committing.files:
            self.committing.waiters.append(done)
        else:
            done()

    # ------------------------------------------------------------------ kjournald
    def _timer(self, t: _Transaction) -> None:
        if self.running is t:
            self._start_commit()

    def _start_commit(self) -> None:
        if self.committing is not None:
            self._commit_again = True      # once the one in progress is done
            return
        t, self.running = self.running, None
        if t is None:
            return
        self.committing = t
        self.commits += 1
        wb = self.writeback
        waits = [0]

        def flushed():
            waits[0] -= 1
            if waits[0] == 0:
                self._write_journal(t)
        # 1. ordered data: the transaction's pages still dirty, then wait for the files
        for number, pages in t.data.items():
            self.data_pages += wb.write_listed(number, pages, self.submitter,
                                               self.submitter.pid)
        waits[0] = len(t.data) + 1
        for number in t.data:
            wb.wait_written(number, flushed)
        flushed()

    def _write_journal(self, t: _Transaction) -> None:
        blocks = 1 + len(t.files)                     # descriptor + an inode block each
        self._journal_write(blocks, lambda: self._journal_write(
            1, lambda: self._committed(t), commit=True))     # then the commit block

    def _journal_write(self, blocks: int, done, commit: bool = False) -> None:
        """``blocks`` journal blocks from the head (split where the journal wraps)."""
        from blksim.hostio.fileio import _Pieces
        size = self.fs.journal_sectors
        pieces = []
        left = blocks * PAGE_SECTORS
        while left:
            n = min(left, size - self.head)
            pieces.append((self.fs.journal_start + self.head, n))
            self.head = (self.head + n) % size
            left -= n
        self.journal_blocks += blocks
        group = _Pieces(len(pieces), lambda _g: done())
        for sector, n in pieces:
            bio = Bio(self.ids.take(), sector, n, True, False, self.submitter.pid, 0)
            if commit:
                commit_record(bio, self.fs.barrier)
            self.submitter.submit(self.device, bio, group)

    def _committed(self, t: _Transaction) -> None:
        self.committing = None
        for wake in t.waiters:
            wake()
        if self._commit_again:
            self._commit_again = False
            self._start_commit()
