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
running one is committed at once, a committing one is waited for. Left out: the
checkpoint that writes the journalled blocks home, and the journal's own space
accounting (it never fills); block allocation and metadata reads are the filesystem
layer's (`hostio.fs`) on a filesystem made by mkfs, and absent from the outline.

**The three data modes** (``data=``, fs/ext3/inode.c and fs/jbd/commit.c, 2.6.18), as a
table (`DATA_MODES`) rather than branches:

======== ============================== ======================== ===========================
mode     a buffered write's page        the commit               fsync (``ext3_sync_file``)
======== ============================== ======================== ===========================
ordered  joins the data list            writes and waits for the the VFS writes the pages,
         (``journal_dirty_data``)       data first, then the     commits the inode's
                                        journal blocks           transaction, waits for the
                                                                 pages
writeback is only dirty (its inode is   the journal blocks at    as ordered, the commit not
         journalled)                    once: nothing ordered    waiting for the data
journal  is journalled metadata         the data pages into the  ``ext3_force_commit``: the
         (``journal_dirty_metadata``)   journal with the inodes; commit writes the data;
                                        home later (pdflush)     no page wait
======== ============================== ======================== ===========================

In ``journal`` mode each data page is therefore written twice: once into the journal at
the commit, once to its place when writeback (standing for jbd's checkpoint) writes the
still-dirty page home. Descriptor blocks: one per `TAGS_PER_DESCRIPTOR` journalled blocks
(fs/jbd/commit.c: a 4096-byte block holds a 12-byte header, one 16-byte UUID and 8-byte
``journal_block_tag_t`` entries). The commit block goes down through `Journal.submit_commit_block`,
the one place a barrier (``barrier=1``: ``set_buffer_ordered`` in
``journal_write_commit_record``) is given to the block layer.
"""

from __future__ import annotations

from blksim.hostio.readahead import PAGE_SECTORS
from blksim.block.request import Bio


#: What each data= mode does with a written page and at the commit: (the page joins the
#: ordered data list, the commit writes the data pages into the journal, fsync writes
#: and waits for the file's pages itself)
DATA_MODES = {
    "ordered": (True, False, True),
    "writeback": (False, False, True),
    "journal": (False, True, False),
}
TAGS_PER_DESCRIPTOR = (4096 - 12 - 16) // 8


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
    __slots__ = ("data", "files", "journalled", "waiters", "began", "jflush")

    def __init__(self, began: float) -> None:
        self.data: dict = {}          # file number -> set of pages written (ordered)
        self.files: dict = {}         # file number -> its open target
        self.journalled: dict = {}    # file number -> set of data pages (data=journal)
        self.waiters = []             # called once it has committed
        self.began = began
        self.jflush = False           # its commit block is on its way (jbd2's T_COMMIT_JFLUSH)


class Journal:
    """The journal of the file system on ``device`` (a block device target).
    ``fs``: a `storage_config.FsConfig` (its ``data`` mode, ``barrier``,
    ``commit_interval`` and the journal's place); ``writeback``: the host's `Writeback`;
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
        self.journalled_pages = 0          # data pages written into the journal
        self.atime_updates = 0             # inodes journalled for their access time
        self.ordered, self.journal_data, self.fsync_writes = DATA_MODES[fs.data]
        self.barrier = fs.barrier
        #: descriptor tags per block and inode-time granularity (s): jbd's; a journal
        #: of a later format (hostio.fs.jbd2) sets its own
        self.tags_per_descriptor = TAGS_PER_DESCRIPTOR
        self.time_granularity = 1.0
        self._atime: dict = {}             # file number -> second of its access time
        self._mtime: dict = {}             # file number -> second of its modification time
        self._commit_again = False

    # ------------------------------------------------------------------ writers' side
    def _transaction(self) -> _Transaction:
        """The running transaction (started, with its commit timer, if there is none)."""
        t = self.running
        if t is None:
            t = self.running = _Transaction(self.clock.now)
            self.clock.call_at(t.began + self.fs.commit_interval,
                               lambda _ev, t=t: self._timer(t))
        return t

    def note_write(self, file, page: int) -> None:
        """A buffered write dirtied ``page`` of ``file``: the file's inode joins the
        running transaction, and the page as its mode says (ordered data, journalled
        data, or nothing)."""
        t = self._transaction()
        number = file.layout.number
        if self.ordered:
            t.data.setdefault(number, set()).add(page)
        elif self.journal_data:
            t.journalled.setdefault(number, set()).add(page)
        t.files[number] = file

    def note_atime(self, file) -> None:
        """A read ended on ``file`` (``touch_atime``, fs/inode.c, 2.6.18): if its access
        time changes (ext3's times have a one-second granularity) the inode is dirtied
        (``ext3_dirty_inode``) and joins the running transaction."""
        if self._touch(file, self._atime):
            self.atime_updates += 1

    def note_mtime(self, file) -> None:
        """A direct write on ``file`` (``file_update_time`` in
        ``__generic_file_aio_write_nolock``, mm/filemap.c, 2.6.18): as `note_atime`, for
        the modification time. (A buffered write's inode joins with its pages.)"""
        self._touch(file, self._mtime)

    def _touch(self, file, last: dict) -> bool:
        """Journal ``file``'s inode if its time (kept in ``last``) changes this second."""
        number = file.layout.number
        second = int(self.clock.now / self.time_granularity)
        if last.get(number) == second:
            return False
        last[number] = second
        t = self._transaction()
        t.files[number] = file
        return True

    def fsync(self, file, done) -> None:
        """``ext3_sync_file``: ``done()`` once the transaction holding the file's inode has
        committed (at once if none holds it); in data=journal, ``ext3_force_commit``:
        the running transaction, whichever files it holds."""
        number = file.layout.number
        # the wait for the commit is ``log_wait_commit``'s ``wait_event`` (fs/jbd/journal.c;
        # jbd2_log_wait_commit, fs/jbd2/journal.c, 5.4-6.6): no io_schedule, no iowait
        if self.running is not None and (number in self.running.files
                                         or self.journal_data):
            self.running.waiters.append(file.plain_sleep(done))
            self._start_commit()
        elif self.committing is not None and number in self.committing.files:
            self.committing.waiters.append(file.plain_sleep(done))
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
        if not self.ordered:               # writeback, journal: no data to wait for
            self._write_journal(t)
            return
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
        pages = sum(len(p) for p in t.journalled.values())
        self.journalled_pages += pages
        logged = len(t.files) + pages                 # an inode block each, the data
        blocks = -(-logged // self.tags_per_descriptor) + logged   # with descriptors
        self._journal_write(blocks, lambda: self.submit_commit_block(
            lambda: self._committed(t)))

    def _pieces(self, blocks: int) -> list:
        """The (device sector, sectors) of ``blocks`` journal blocks from the head,
        split where the journal wraps (and, for a journal the filesystem placed, where
        its blocks are not contiguous)."""
        size = self.fs.journal_sectors
        pieces = []
        left = blocks * PAGE_SECTORS
        while left:
            n = min(left, size - self.head)
            if self.fs.journal_layout is not None:
                pieces += self.fs.journal_layout.map(self.head, n)
            else:
                pieces.append((self.fs.journal_start + self.head, n))
            self.head = (self.head + n) % size
            left -= n
        self.journal_blocks += blocks
        return pieces

    def _journal_write(self, blocks: int, done, commit: bool = False) -> None:
        """``blocks`` journal blocks from the head, as plain writes; ``commit``: the
        commit block, which `commit_record` marks."""
        from blksim.hostio.fileio import _Pieces
        pieces = self._pieces(blocks)
        group = _Pieces(len(pieces), lambda _g: done())
        for sector, n in pieces:
            bio = Bio(self.ids.take(), sector, n, True, False, self.submitter.pid, 0)
            if commit:
                commit_record(bio, self.barrier)
            self.submitter.submit(self.device, bio, group)

    def submit_commit_block(self, done) -> None:
        """``journal_write_commit_record`` (fs/jbd/commit.c, 2.6.18): the commit block,
        after the transaction's journal blocks are on the device; ``done()`` once it is.
        With ``barrier=1`` (``self.barrier``) the kernel marks it ordered
        (``set_buffer_ordered``): a flush-and-FUA write (`commit_record`), here and only
        here."""
        self._journal_write(1, done, commit=True)

    def _committed(self, t: _Transaction) -> None:
        self.committing = None
        for wake in t.waiters:
            wake()
        if self._commit_again:
            self._commit_again = False
            self._start_commit()
