"""The XFS log, in outline, as Linux 2.6.18 writes it (fs/xfs/xfs_log.c, xfs_trans.c,
xfs_vnodeops.c ``xfs_fsync``) and as 5.4-6.6 do with the CIL (fs/xfs/xfs_log_cil.c,
xfs_file.c ``xfs_file_fsync``). It answers what `hostio.journal.Journal` answers
(``note_write``, ``note_atime``, ``note_mtime``, ``fsync``, ``fsync_writes`` and the
figures), but it is not jbd: no transaction commits on a timer with its data, no
descriptor and commit blocks; log records written one in-core log buffer at a time.

**In-core log buffers** (``xlog_get_iclog_buffer_size``): ``logbufs`` buffers (2 to 8;
default 8: 2.6.18 on a host with over 400 MiB of memory, ``XLOG_MAX_ICLOGS``; today
always 8) of ``logbsize`` bytes (16 to 256 KiB; default 32 KiB,
``XLOG_BIG_RECORD_BSIZE``). Each holds a log record: a header (one 512-byte sector per 32
KiB of buffer, ``l_iclog_hsize``) and the transactions' log operations. A buffer is
written when full or when the log is forced (``xlog_sync``): one write of header plus
contents rounded up to 512 bytes (or to the log stripe unit of a version 2 log: a block
with current mkfs), sequentially at the log's head, split in two where it wraps; at most
``logbufs`` are being written at once. With barriers each write is a barrier
(``XFS_BUF_ORDERED`` in ``xlog_sync``, 2.6.18, but not the first part of a split write;
today REQ_PREFLUSH | REQ_FUA) through `hostio.journal.commit_record`, the one hook.

**What goes into it.** A transaction's log operations: a start record, the transaction
header, per inode its ``xfs_inode_log_format`` and its core (96 bytes; 176 in a v3
inode), a commit record, each behind a 12-byte operation header (`TRANS_BYTES`,
`INODE_BYTES`). 2.6.18 copies each committed transaction into the iclogs at once (no
delayed logging); timestamp changes by writes are not transactions at all there
(``xfs_ichgtime`` only marks the in-core inode, ``i_update_core``), and access times are
written with the inode later. Today timestamps are logged (``xfs_vn_update_time``, at
most once per clock tick, ``HZ`` 250: blksim's choice), atime under ``relatime`` only
when it is older than the mtime or a day old, and transactions go to the **CIL**
(delayed logging, the only mode from 3.3): an inode changed many times is logged once per
checkpoint, written at a log force, when the CIL holds an eighth of the log
(``XLOG_CIL_SPACE_LIMIT``) or by the log worker every 30 s (``xfs_syncd_centisecs``).

**fsync** (2.6.18 ``xfs_fsync``; the VFS has started the data, waits for it after): an
inode with unlogged changes (``i_update_core``) gets a synchronous ``XFS_TRANS_FSYNC_TS``
transaction logging its core, which forces the log; an inode pinned (changes in the log
not yet on disk) forces the log up to them; a clean inode costs nothing. Today
(``xfs_file_fsync``): write **and wait for** the data first, then force the log if the
inode is pinned; if the force wrote nothing (``log_flushed`` 0), an explicit cache flush
of the device (``blkdev_issue_flush``). XFS has **no ordered data mode**: the log never
waits for file data (``data_mode`` is ``writeback``).
"""

from __future__ import annotations

from blksim.block.elevator import kernel_version
from blksim.block.request import Bio
from blksim.hostio.journal import commit_record

OP_HEADER = 12               # xlog_op_header_t
#: a transaction's frame: start record, transaction header (xfs_trans_header_t, 16
#: bytes), commit record, each with its operation header
TRANS_BYTES = OP_HEADER + (OP_HEADER + 16) + OP_HEADER
INODE_FORMAT = 56            # xfs_inode_log_format (64-bit layout)
HEADER_CYCLE = 32768         # XLOG_HEADER_CYCLE_SIZE: one header sector per 32 KiB
TICK = 1 / 250               # the coarse clock's granularity (HZ=250): blksim's choice
RELATIME_AGE = 24 * 3600.0   # relatime: an atime older than a day is updated


class XfsLog:
    """The log of the XFS on ``device``; ``fs`` its `storage_config.FsConfig` (with the
    `hostio.fs.xfs.Xfs` as ``fs.layer``), ``writeback`` the host's `Writeback`,
    ``submitter`` the log's writer (xfslogd's context)."""

    fsync_writes = True          # the VFS writes the file's pages (do_fsync)

    def __init__(self, fs, device, clock, ids, writeback, submitter) -> None:
        layer = fs.layer
        g = layer.geometry
        opts = layer.mount
        self.fs = fs
        self.device = device
        self.clock = clock
        self.ids = ids
        self.writeback = writeback
        self.submitter = submitter
        # the 5.x/6.x lines: the CIL (delayed logging, the only mode from 3.3) and logged
        # timestamps (xfs_vn_update_time, from 3.5); the 2.6 lines have neither
        self.delayed = kernel_version(layer.kernel) >= (3, 5)
        self.barrier = fs.barrier
        self.relatime = opts.relatime
        self.bufs = opts.logbufs or 8
        self.bsize = opts.logbsize or 32768
        self.hsize = 512 * (-(-self.bsize // HEADER_CYCLE) if g.log_version == 2 else 1)
        self.round = max(512, g.log_sunit)
        core = 176 if g.crc else 96
        self.inode_bytes = OP_HEADER + INODE_FORMAT + OP_HEADER + core
        self.cil_limit = g.log_blocks * g.block_size // 8
        self.size = fs.journal_sectors
        self.start = fs.journal_start
        self.head = 0                # sectors into the log
        self.pending = 0             # bytes in the current iclog
        self.lsn = 0                 # bytes ever put into iclogs
        self.synced = 0              # bytes known on disk (all records before complete)
        self._records = []           # [end lsn, done] of records being written, in order
        self._queued = []            # records waiting for a free buffer: (end lsn, sectors)
        self._in_flight = 0
        self._waiters = []           # (lsn, callback)
        self._last = {}              # file number -> lsn of its last logged change
        self._dirty = set()          # 2.6: files with unlogged timestamp changes
        self._cil = set()            # today: files with changes in the CIL
        self._mtime = {}             # file number -> time of its last mtime change
        self._atime = {}             # file number -> time of its last atime change
        self._timer = False
        # figures (the names jbd's Journal gives)
        self.commits = 0             # log forces that wrote a record
        self.data_pages = 0          # never: the log writes no file data
        self.journal_blocks = 0      # 512-byte log sectors written
        self.log_writes = 0          # log record writes (bios, a split one counted twice)
        self.transactions = 0
        self.atime_updates = 0
        self.flushes = 0             # explicit cache flushes fsync asked for
        self.unflushed = 0           # of them, not sent: a dm volume takes no empty flush

    # ------------------------------------------------------------------ writers' side
    def note_write(self, file, page: int) -> None:
        """A buffered write dirtied ``page`` of ``file``: its mtime changes."""
        self._time_change(file, self._mtime)

    def note_mtime(self, file) -> None:
        """A direct write on ``file`` (``file_update_time``)."""
        self._time_change(file, self._mtime)

    def note_atime(self, file) -> None:
        """A read ended on ``file`` (``touch_atime``): 2.6.18 writes the access time with
        the inode later, never through the log; today it is logged, under ``relatime``
        only when older than the mtime or a day old (``relatime_need_update``)."""
        number = file.layout.number
        now = self.clock.now
        if not self.delayed:
            self._atime[number] = now
            self.atime_updates += 1
            return
        last = self._atime.get(number)
        if self.relatime and last is not None and last > self._mtime.get(number, -1.0) \
                and now - last < RELATIME_AGE:
            return                              # atime newer than mtime, under a day
        if last is not None and int(last / TICK) == int(now / TICK):
            return
        self._atime[number] = now
        self.atime_updates += 1
        self._transaction(number)

    def _time_change(self, file, last: dict) -> None:
        number = file.layout.number
        now = self.clock.now
        stamp = last.get(number)
        last[number] = now
        if not self.delayed:
            self._dirty.add(number)             # xfs_ichgtime: i_update_core
            return
        if stamp is not None and int(stamp / TICK) == int(now / TICK):
            return                              # the time did not change this tick
        self._transaction(number)

    def _transaction(self, number: int) -> None:
        """A committed transaction logging the inode ``number``'s core."""
        self.transactions += 1
        self._arm_timer()
        if self.delayed:
            self._cil.add(number)
            if len(self._cil) * self.inode_bytes + TRANS_BYTES >= self.cil_limit:
                self._push_cil()
        else:
            self._put(TRANS_BYTES + self.inode_bytes)
            self._last[number] = self.lsn

    def _push_cil(self) -> None:
        """A checkpoint: every item of the CIL once, in one transaction's frame."""
        if not self._cil:
            return
        self._put(TRANS_BYTES + len(self._cil) * self.inode_bytes)
        for number in self._cil:
            self._last[number] = self.lsn
        self._cil.clear()

    # ------------------------------------------------------------------ fsync
    def fsync(self, file, done) -> None:
        """``xfs_fsync`` (2.6.18) or ``xfs_file_fsync`` (today): ``done()`` once the
        inode's changes are on disk."""
        number = file.layout.number
        # waiting for the log force is ``xlog_wait`` (fs/xfs/xfs_log_priv.h, 5.4-6.6: a
        # plain schedule(), not iowait: `OpenFile.plain_sleep`); the flush after it is
        # submit_bio_wait's, in iowait
        if not self.delayed:
            if number in self._dirty:           # the XFS_TRANS_FSYNC_TS transaction
                self._dirty.discard(number)
                self.transactions += 1
                self._put(TRANS_BYTES + self.inode_bytes)
                self._last[number] = self.lsn
            lsn = self._last.get(number, 0)
            if lsn <= self.synced:
                done()                          # clean and unpinned: nothing (changed 0)
            elif self.pending and lsn > self.lsn - self.pending:
                # log_flushed: the record's barrier
                self._force(lsn, file.plain_sleep(done))
            elif self.barrier:                  # its record is being written already:
                # then xfs_blkdev_issue_flush
                self._force(lsn, file.plain_sleep(lambda: self._flush_then(done)))
            else:
                self._force(lsn, file.plain_sleep(done))
            return

        def data_written():
            if number in self._cil:
                self._push_cil()
            lsn = self._last.get(number, 0)
            if lsn <= self.synced:              # not pinned: the explicit flush
                self._flush_then(done)
            elif self.pending and lsn > self.lsn - self.pending:
                # log_flushed: the record's barrier
                self._force(lsn, file.plain_sleep(done))
            else:                               # its record is being written already
                self._force(lsn, file.plain_sleep(lambda: self._flush_then(done)))
        self.writeback.wait_written(number, data_written)

    def _force(self, lsn: int, done) -> bool:
        """Force the log up to ``lsn``: write the current iclog if it holds part of it;
        ``done()`` once all up to ``lsn`` is on disk. Whether this force wrote a record
        (``log_flushed``)."""
        wrote = False
        if self.pending and lsn > self.lsn - self.pending:
            self._sync_iclog()
            wrote = True
        if lsn <= self.synced:
            done()
        else:
            self._waiters.append((lsn, done))
        return wrote

    def _flush_then(self, done) -> None:
        """``blkdev_issue_flush``: an empty REQ_PREFLUSH bio (2.6.18: an empty barrier) to
        the device (`blksim.block.flush.empty_flush_bio`), ``done()`` once it has answered.
        A device-mapper volume takes no empty flush in blksim (dm's
        ``__send_empty_flush`` is not modelled, docs/blk-mq.md): it is sent nothing and
        the flush is counted in ``unflushed``."""
        from blksim.block.flush import empty_flush_bio
        from blksim.hostio.fileio import _Pieces
        self.flushes += 1
        if getattr(self.device, "queues", None) is not None:
            self.unflushed += 1
            done()
            return
        bio = empty_flush_bio(self.ids.take(), self.submitter.pid)
        self.submitter.submit(self.device, bio, _Pieces(1, lambda _g: done()))

    # ------------------------------------------------------------------ the iclogs
    def _put(self, nbytes: int) -> None:
        """Copy ``nbytes`` of log operations into the iclogs, writing each that fills."""
        room = self.bsize - self.hsize
        while nbytes:
            n = min(nbytes, room - self.pending)
            self.pending += n
            self.lsn += n
            nbytes -= n
            if self.pending == room:
                self._sync_iclog()

    def _sync_iclog(self) -> None:
        """``xlog_sync``: the current iclog's record goes to the log's head."""
        count = self.hsize + self.pending
        count = -(-count // self.round) * self.round
        self.pending = 0
        self.commits += 1
        record = [self.lsn, False]
        self._records.append(record)
        self._queued.append((record, count // 512))
        self._start_writes()

    def _start_writes(self) -> None:
        from blksim.hostio.fileio import _Pieces
        while self._queued and self._in_flight < self.bufs:
            record, sectors = self._queued.pop(0)
            self._in_flight += 1
            pieces = []
            while sectors:
                n = min(sectors, self.size - self.head)
                pieces.append((self.start + self.head, n))
                self.head = (self.head + n) % self.size
                sectors -= n
            self.journal_blocks += sum(n for _, n in pieces)
            group = _Pieces(len(pieces), lambda _g, r=record: self._written(r))
            for k, (sector, n) in enumerate(pieces):
                # the first part of a split write is not ordered (xlog_sync, 2.6.18)
                ordered = self.barrier and k == len(pieces) - 1
                # 2.6.18: XFS_bwrite of an async buffer sets _XBF_RUN_QUEUES: WRITE_SYNC,
                # which unplugs the queue, unless XBF_ORDERED makes it WRITE_BARRIER
                # (_xfs_buf_ioapply); today REQ_SYNC always (xlog_write_iclog)
                sync = self.delayed or not ordered
                bio = Bio(self.ids.take(), sector, n, True, sync, self.submitter.pid, 0)
                commit_record(bio, ordered)
                self.log_writes += 1
                self.submitter.submit(self.device, bio, group)

    def _written(self, record) -> None:
        """A record is on disk; the log is synced up to the first record still being
        written (``xlog_state_do_callback`` runs the callbacks in LSN order)."""
        record[1] = True
        self._in_flight -= 1
        while self._records and self._records[0][1]:
            self.synced = self._records.pop(0)[0]
        ready = [w for w in self._waiters if w[0] <= self.synced]
        self._waiters = [w for w in self._waiters if w[0] > self.synced]
        for _lsn, wake in ready:
            wake()
        self._start_writes()

    # ------------------------------------------------------------------ the periodic force
    def _arm_timer(self) -> None:
        if not self._timer:
            self._timer = True
            self.clock.call_at(self.clock.now + self.fs.commit_interval, self._periodic)

    def _periodic(self, _ev=None) -> None:
        """xfssyncd (2.6.18) / ``xfs_log_worker``: force the log (and push the CIL)."""
        self._timer = False
        if self.delayed:
            self._push_cil()
        if self.pending:
            self._sync_iclog()
        if self.pending or self._cil:
            self._arm_timer()
