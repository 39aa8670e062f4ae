"""ext4's journal, jbd2: `hostio.journal.Journal` (jbd's transactions, data modes and
kjournald's timer, one copy) with what jbd2 and ext4 do differently, in Linux 2.6.32 and
5.4-6.6 (fs/jbd2/commit.c ``jbd2_journal_commit_transaction``, fs/jbd2/journal.c,
fs/ext4/fsync.c ``ext4_sync_file``).

* **The commit's order** (``jbd2_journal_commit_transaction``, 2.6.32 and 5.15): the
  ordered data are submitted (``journal_submit_data_buffers``), then the descriptor and
  metadata blocks are written to the log without waiting for the data; then the data
  (``journal_finish_inode_data_buffers``) and the log blocks are waited for; then the
  commit block (``journal_submit_commit_record``), with REQ_PREFLUSH | REQ_FUA when the
  journal has JBD2_BARRIER (2.6.32: ``set_buffer_ordered``, a barrier) and is not
  ``journal_async_commit``. jbd waited for the data before writing the log.
* **journal_async_commit**: the commit block goes with the log blocks, as a plain write
  (its checksum says whether the transaction is whole); once all are written, with
  barriers, a cache flush (``blkdev_issue_flush`` after ``journal_wait_on_commit_record``).
* **Which data are ordered**: ext4 orders the data of blocks newly allocated
  (``ext4_map_blocks`` -> ``ext4_jbd2_inode_add_write`` on EXT4_MAP_NEW, 5.4-6.6; with
  delalloc, ``mpage_da_map_blocks`` -> ``ext4_jbd2_file_inode``, 2.6.32). Files here are
  placed before the run, so a write overwrites allocated blocks: its data are ordered
  only by 2.6.32 without delalloc, where every write files the inode
  (``ext4_ordered_write_end``) and the commit writes its dirty pages.
* **Descriptor tags** (``journal_tag_bytes``): 16 bytes with checksums v3 (ext4 mounts
  its journal so with ``metadata_csum``, ``set_journal_csum_feature_set``), else 12 with
  the 64bit feature, 8 without; a checksummed descriptor ends in a 4-byte tail.
* **fsync** (``ext4_sync_file``): data=journal commits (``ext4_force_commit``). Otherwise,
  5.4-6.6: the file's pages are written and waited for first
  (``file_write_and_wait_range``); then, with barriers, a cache flush is owed unless the
  inode's transaction will send one (``jbd2_trans_will_send_data_barrier``: it is running,
  or committing but its commit block not yet submitted); the transaction is committed
  and waited for (``jbd2_complete_transaction``), then the flush sent
  (``blkdev_issue_flush``). 2.6.32: the VFS writes the pages, ``jbd2_log_start_commit``
  starts the inode's transaction if it is the running one and the fsync waits for it;
  otherwise (committed, or already committing) it sends a cache flush and does not wait
  for the commit; the VFS then waits for the pages.
* **Which writes join a transaction**: a journalled page (data=journal), an ordered
  overwrite (2.6.32 without delalloc), else only a write that changes the inode's
  modification time (`note_write`).
* **Inode times**: a 256-byte inode stores nanoseconds, so its times change every tick of
  the coarse clock (`hostio.fs.ext4.JIFFY`); atime follows ``relatime`` by default
  (``relatime_need_update``, fs/inode.c, 2.6.30 on: updated when older than the mtime or
  a day old), ``strictatime`` (every change) or ``noatime``.
"""

from __future__ import annotations

from blksim.hostio.journal import DATA_MODES, Journal

DAY = 24 * 60 * 60


def tag_bytes(csum_v3: bool, is_64bit: bool) -> int:
    """``journal_tag_bytes`` (fs/jbd2/journal.c): a descriptor's bytes per block tag."""
    if csum_v3:
        return 16                      # journal_block_tag3_t
    return 12 if is_64bit else 8       # journal_block_tag_t, without t_blocknr_high


def tags_per_descriptor(block_size: int, csum_v3: bool, is_64bit: bool) -> int:
    """Block tags in one descriptor block: after the 12-byte header, less the first
    tag's 16-byte UUID and, with checksums, the 4-byte tail."""
    room = block_size - 12 - 16 - (4 if csum_v3 else 0)
    return room // tag_bytes(csum_v3, is_64bit)


class Jbd2Journal(Journal):
    """jbd2 on an ext4 (`hostio.fs.ext4.Ext4`, ``fs.layer``): the module docstring's
    differences from `Journal`."""

    def __init__(self, fs, device, clock, ids, writeback, submitter) -> None:
        super().__init__(fs, device, clock, ids, writeback, submitter)
        layer = fs.layer
        self.layer = layer
        self.rules = layer.rules
        features = layer.geometry.features
        self.tags_per_descriptor = tags_per_descriptor(
            4096, "metadata_csum" in features and self.rules == "mq", "64bit" in features)
        self.time_granularity = layer.time_granularity
        self.async_commit = layer.mount.journal_async_commit
        self.atime_mode = layer.mount.atime
        ordered, self.journal_data, self.fsync_writes = DATA_MODES[fs.data]
        self.ordered = ordered and self.rules == "2.6.32" and not layer.delalloc
        self.cache_flushes = 0          # blkdev_issue_flush calls by fsync or the commit
        self._modified: dict = {}       # file number -> time stamp of its last change

    # ------------------------------------------------------------------ times
    def note_write(self, file, page: int) -> None:
        """A buffered write dirtied ``page``: in data=journal the page is journalled, and
        where ext4 orders overwritten data (2.6.32 without delalloc,
        ``ext4_ordered_write_end`` -> ``ext4_jbd2_file_inode``) the inode joins with
        it; otherwise an overwrite journals the inode only when its modification time
        changes (``file_update_time`` -> ``ext4_dirty_inode``)."""
        number = file.layout.number
        stamp = int(self.clock.now / self.time_granularity)
        if self.ordered or self.journal_data:
            super().note_write(file, page)
            self._mtime[number] = stamp
        else:
            self._touch(file, self._mtime)
        self._modified[number] = stamp

    def note_mtime(self, file) -> None:
        super().note_mtime(file)
        self._modified[file.layout.number] = int(self.clock.now / self.time_granularity)

    def note_atime(self, file) -> None:
        """``touch_atime`` with ``relatime_need_update`` (fs/inode.c, 2.6.30 on): under
        relatime the access time is written only when it is not after the last
        modification or is a day old."""
        number = file.layout.number
        if self.atime_mode == "relatime":
            last = self._atime.get(number)
            if last is not None and self._modified.get(number, -1) < last and \
                    self.clock.now - last * self.time_granularity < DAY:
                return
        super().note_atime(file)

    # ------------------------------------------------------------------ fsync
    def fsync(self, file, done) -> None:
        """``ext4_sync_file`` (module docstring), 2.6.32's or 5.4-6.6's."""
        if self.journal_data:
            super().fsync(file, done)              # ext4_force_commit
            return
        if self.rules == "mq":       # file_write_and_wait_range, then the journal
            self.writeback.wait_written(file.layout.number,
                                        lambda: self._fsync_mq(file, done))
            return
        number = file.layout.number
        if self.running is not None and number in self.running.files:
            # jbd2_log_start_commit, then jbd2_log_wait_commit: wait_event, not iowait
            self.running.waiters.append(file.plain_sleep(done))
            self._start_commit()
        elif self.barrier:
            self.issue_flush(done)
        else:
            done()

    def _fsync_mq(self, file, done) -> None:
        number = file.layout.number
        t = None
        if self.running is not None and number in self.running.files:
            t = self.running
        elif self.committing is not None and number in self.committing.files:
            t = self.committing
        # jbd2_trans_will_send_data_barrier: a running transaction, or one whose commit
        # block is not yet on its way, will flush
        will_flush = t is not None and not t.jflush
        after = (lambda: self.issue_flush(done)) if self.barrier and not will_flush else done
        if t is None:
            after()
            return
        # jbd2_complete_transaction -> jbd2_log_wait_commit: wait_event (no io_schedule,
        # not iowait); the flush after it waits in iowait (submit_bio_wait)
        t.waiters.append(file.plain_sleep(after))
        if t is self.running:
            self._start_commit()

    def issue_flush(self, done) -> None:
        """``blkdev_issue_flush``: an empty write with REQ_PREFLUSH (2.6.32: an empty
        barrier; `blksim.block.flush.empty_flush_bio`), ``done()`` once the device has
        answered. A device-mapper volume takes no empty flush in blksim (dm's
        ``__send_empty_flush`` is not modelled): nothing is sent there."""
        from blksim.block.flush import empty_flush_bio
        from blksim.hostio.fileio import _Pieces
        self.cache_flushes += 1
        if getattr(self.device, "queues", None) is not None:
            done()
            return
        bio = empty_flush_bio(self.ids.take(), self.submitter.pid)
        self.submitter.submit(self.device, bio, _Pieces(1, lambda _g: done()))

    # ------------------------------------------------------------------ the commit
    def _start_commit(self) -> None:
        """``jbd2_journal_commit_transaction``: data submitted, log written beside it,
        both waited for, then the commit block (module docstring)."""
        if self.committing is not None:
            self._commit_again = True
            return
        t, self.running = self.running, None
        if t is None:
            return
        self.committing = t
        self.commits += 1
        wb = self.writeback
        waits = [1]

        def written():
            waits[0] -= 1
            if waits[0] == 0:
                self._commit_block(t)
        if self.ordered:
            for number, pages in t.data.items():
                self.data_pages += wb.write_listed(number, pages, self.submitter,
                                                   self.submitter.pid)
        pages = sum(len(p) for p in t.journalled.values())
        self.journalled_pages += pages
        logged = len(t.files) + pages
        blocks = -(-logged // self.tags_per_descriptor) + logged
        waits[0] += 1
        self._journal_write(blocks, written)
        if self.async_commit:                      # the commit block with the log
            waits[0] += 1
            self._journal_write(1, written)
        if self.ordered:
            waits[0] += len(t.data)
            for number in t.data:                  # journal_finish_inode_data_buffers
                wb.wait_written(number, written)
        written()

    def _commit_block(self, t) -> None:
        t.jflush = True                            # T_COMMIT_JFLUSH
        if self.async_commit:
            if self.barrier:
                self.issue_flush(lambda: self._committed(t))
            else:
                self._committed(t)
            return
        self.submit_commit_block(lambda: self._committed(t))
