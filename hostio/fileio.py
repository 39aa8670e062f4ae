"""A process's open file: its reads and writes as system calls, turned into bios as Linux
2.6.18 turns them.

* **Direct I/O** (``O_DIRECT``): the call's file range is mapped through the file's
  extents and each contiguous piece on the device is one bio (``__blockdev_direct_IO``);
  the call completes when its last bio does. Every bio carries the sync flag: 2.6.18's
  ``__blockdev_direct_IO`` (fs/direct-io.c) makes a direct write ``WRITE_SYNC``
  (``BIO_RW_SYNC``: the queue is unplugged for it at once, and AS files it as sync;
  CFQ still queues it as async, by ``rq_data_dir``), and a direct read's submitter
  waits for it at once (``dio_await_one`` unplugs the queue), which is what the flag
  means for a read here.
* **O_SYNC** buffered writes: the call dirties its pages, then does what an fsync of the
  file does (``generic_osync_inode``; on ext3, a commit) before it returns.
* **Buffered reads**, as ``do_generic_mapping_read`` (mm/filemap.c): at the call's first
  page, and again at the page read-ahead said to call back at, `hostio.readahead` decides
  which windows to read; then page by page, an up-to-date page is copied (no time), a
  page being read is waited for, and a page absent (evicted, or never read ahead) is read
  alone (``readpage``: a one-page bio) and waited for, which also tells read-ahead of the
  miss. The pages read ahead are read as bios of consecutive pages (``mpage_readpages``),
  one per contiguous piece on the device.
* Bios are submitted in the process's context: one that finds no free request puts the
  process to sleep (``get_request_wait``), and the bios after it wait their turn.
* **A process that waits for its own writes unplugs the queue** (2.6; `run_backing_dev`):
  a direct I/O's submitter runs the device's queue once the call's bios are submitted
  (``direct_io_worker`` and ``dio_await_one`` call ``blk_run_address_space``, fs/direct-io.c,
  2.6.18), and a process waiting for its pages' writeback, as fsync and O_SYNC writes do,
  runs it through ``sync_page`` (``wait_on_page_writeback`` -> ``block_sync_page`` ->
  ``blk_run_address_space``, mm/filemap.c and fs/buffer.c, 2.6.18). Writeback's writes,
  plain ``WRITE``s that plug an empty queue, therefore go to the device at once instead
  of after the unplug timer's jiffy. (A direct write, ``WRITE_SYNC``, has unplugged the
  queue already; the run after it finds nothing plugged.)

* **On a filesystem made by mkfs** (`hostio.fs`): a page read, and a direct call's
  range, first has the indirect blocks that map it read, outermost first, each once
  into the page cache (the block device's buffers; ``ext3_get_branch`` -> ``sb_bread``,
  fs/ext3/inode.c, 2.6.18); a read call that ends updates the file's access time unless
  ``noatime`` (``file_accessed`` -> ``touch_atime``, at most once a second,
  fs/inode.c), and a direct write its modification time (``file_update_time``); in ``data=journal`` an fsync is a commit alone (``ext3_sync_file`` ->
  ``ext3_force_commit``), the pages being in the journal.

A call is measured from its submission to its completion (fio's completion latency);
its bios are measured as any bio (Q, D, C).
"""

from __future__ import annotations

from collections import deque

from blksim.hostio.pagecache import PageRead, page_runs
from blksim.hostio.readahead import PAGE_SECTORS, ReadaheadState, page_cache_readahead
from blksim.block.request import Bio
from blksim.hostio.writeback import CONGESTION_WAIT


class FileLayout:
    """Where a file's sectors are on its device: extents ((device sector, sectors), in
    file order)."""

    def __init__(self, number: int, path: str, extents) -> None:
        self.number = number
        self.path = path
        self.extents = tuple(extents)
        self.sectors = sum(n for _, n in self.extents)
        self.pages = self.sectors // PAGE_SECTORS
        starts, at = [], 0
        for _, n in self.extents:
            starts.append(at)
            at += n
        self._starts = starts

    def map(self, sector: int, nr_sectors: int) -> list:
        """The (device sector, sectors) pieces of ``nr_sectors`` file sectors from
        ``sector``, in file order."""
        from bisect import bisect_right
        out = []
        i = bisect_right(self._starts, sector) - 1
        while nr_sectors:
            device, length = self.extents[i]
            within = sector - self._starts[i]
            n = min(nr_sectors, length - within)
            out.append((device + within, n))
            sector += n
            nr_sectors -= n
            i += 1
        return out


class _Call:
    """A buffered call in progress: the next page, the page to call read-ahead at, the
    end, and (a write) the page whose read it waited for, which it now holds."""

    __slots__ = ("call", "index", "next_index", "last", "held")

    def __init__(self, call, first: int, last: int) -> None:
        self.call = call
        self.index = first
        self.next_index = first
        self.last = last
        self.held = -1


class _Pieces:
    """The bios of one call (direct I/O) or one read of pages, and what to do when the
    last one completes."""

    __slots__ = ("left", "t_dispatch", "disk_s", "done")

    def __init__(self, left: int, done) -> None:
        self.left = left
        self.t_dispatch = -1.0
        self.disk_s = 0.0
        self.done = done


class Submitter:
    """Submits bios from one process's context (a job's, or pdflush's): a bio that finds
    no free request puts the process to sleep (``get_request_wait``) and the bios after
    it wait their turn. Each bio belongs to a `_Pieces` group, told when its last bio
    completes."""

    def __init__(self, pid: int, ioprio: int = 0) -> None:
        self.pid = pid
        self.ioprio = ioprio
        self.bios_issued = 0
        self._backlog: deque = deque()        # (target, bio) waiting for the wake-up
        self._asleep = False
        self._groups: dict = {}               # bio id -> its _Pieces
        # whether the pages it writes back go with their inode's writeback context, so
        # that their bios are charged to the inode's owner (wbc_init_bio): the flusher's
        # and a process's fsync do; a journal thread's writepages does not
        # (docs/cgroups.md)
        self.attaches_inode_wb = True
        # the run's `blksim.sim.pressure.AppTasks` when the process is an application's
        # in a run with cgroups (None: not watched)
        self.stalls = None

    def submit(self, target, bio, group: _Pieces) -> None:
        """Submit ``bio`` to ``target`` now, or after the bios already waiting."""
        self._groups[bio.id] = group
        bio.on_complete = self._bio_done
        self.bios_issued += 1
        if self._asleep or self._backlog:
            self._backlog.append((target, bio))
            return
        if not target.submit_bio(bio):
            self._sleep(target, bio)

    def _sleep(self, target, bio) -> None:
        """No request or tag for ``bio``: the process sleeps until one is free
        (``get_request_wait``, 2.6.18; ``blk_mq_get_tag``, ``rq_qos_wait``, 5.4-6.6: each
        in ``io_schedule``, so in iowait)."""
        self._asleep = True
        if self.stalls is not None:
            self.stalls.iowait(self.pid, 1)
        target.when_request(bio, self._woken)

    def _woken(self, _bio) -> None:
        self._asleep = False
        if self.stalls is not None:
            self.stalls.iowait(self.pid, -1)
        backlog = self._backlog
        while backlog:
            target, bio = backlog.popleft()
            if not target.submit_bio(bio):
                self._sleep(target, bio)
                return

    def _bio_done(self, bio) -> None:
        group = self._groups.pop(bio.id)
        group.left -= 1
        if bio.t_dispatch > group.t_dispatch:
            group.t_dispatch = bio.t_dispatch
        group.disk_s += bio.disk_s
        if group.left == 0:
            group.done(group)


def run_backing_dev(target) -> None:
    """``blk_run_address_space`` (include/linux/blkdev.h, 2.6.18): unplug the 2.6 request
    queue(s) under ``target`` (a disk, partition or volume) so that what is queued goes to
    the device now. A multi-queue device has no queue plug of its own: nothing to do."""
    from blksim.block.devmapper import target_queues
    for q in target_queues(target):
        q.run_backing_dev()


class OpenFile:
    """File ``layout`` on device ``target``, opened by one process: ``direct`` or through
    ``cache`` (a `hostio.pagecache.PageCache`) with read-ahead of ``ra_pages`` pages at most.
    It stands where a job's device would stand: the job submits its calls as bios with
    file sectors, and ``finish(call)`` is called with each completed call."""

    kind = "file"

    def __init__(self, layout: FileLayout, target, cache, clock, ids, direct: bool,
                 ra_pages: int, finish, congested, writeback=None,
                 write_congested=None, max_bio_pages: int = 128,
                 copy_rate: float = 2e9, journal=None, o_sync: bool = False) -> None:
        self.layout = layout
        self.target = target
        self.cache = cache
        self.clock = clock
        self.ids = ids
        self.direct = direct
        self.ra = ReadaheadState(ra_pages)
        self.finish = finish
        self.congested = congested
        self.write_congested = write_congested or (lambda: False)
        self.copy_rate = copy_rate
        self.journal = journal                 # hostio.journal.Journal of an ext3 device
        fs = journal.fs if journal is not None else None
        self.layer = fs.layer if fs is not None else None   # hostio.fs, when made by mkfs
        self.atime = fs is not None and fs.atime
        self.o_sync = o_sync                   # buffered writes wait for the device
        self._max_bio_pages = max_bio_pages
        self.capacity = layout.sectors
        self.submitter = Submitter(0)          # the process's context (pid from its calls)
        self.writeback = writeback
        self.throttled = 0.0                   # seconds spent in balance_dirty_pages
        self.pid = 0
        self.ioprio = 0
        self.indirect_reads = 0                # indirect blocks this process read
        # the cgroup (blksim.block.cgroup) its process is in: the owner of the pages it
        # dirties first, charged for their writeback (None: the root; docs/cgroups.md)
        self.cgroup = None
        # the run's `blksim.sim.pressure.AppTasks` when an application's process opened
        # the file in a run with cgroups (None: not watched); ``aio``: its direct calls
        # are io_submit's, waited for in io_getevents (not in the call)
        self.stalls = None
        self.aio = False

    def watch(self, stalls, aio: bool = False) -> None:
        """Report the calls' waits to ``stalls`` (`blksim.sim.pressure.AppTasks`): a
        call is in iowait from its start to its end (a synchronous read or write, fsync,
        O_SYNC: its sleeps are in ``io_schedule``), but while its bytes are copied
        (running) and while it waits for a journal commit (`plain_sleep`); with ``aio``
        a direct call only until its bios are submitted (io_submit returns then)."""
        self.stalls = stalls
        self.aio = aio
        self.submitter.stalls = stalls

    def plain_sleep(self, done):
        """``done`` for a wait of a call that sleeps without ``io_schedule`` (a journal
        commit: ``log_wait_commit``, ``jbd2_log_wait_commit``: ``wait_event``; an XFS log
        force: ``xlog_wait``: ``schedule``): the process leaves iowait now and returns to
        it when ``done`` is called. Unwatched, ``done`` itself."""
        stalls = self.stalls
        if stalls is None:
            return done
        pid = self.pid
        stalls.iowait(pid, -1)

        def woken():
            stalls.iowait(pid, 1)
            done()
        return woken

    # ------------------------------------------------------------------ the job's side
    def submit_bio(self, call, now: float | None = None) -> bool:
        """Start the call (a `Bio` in file sectors); it completes through ``finish``."""
        if now is None:
            now = self.clock.now
        call.t_queue = now
        self.pid, self.ioprio = call.pid, call.ioprio
        self.submitter.pid, self.submitter.ioprio = call.pid, call.ioprio
        if self.stalls is not None:
            self.stalls.iowait(call.pid, 1)        # in the call (`watch`)
        if call.nr_sectors == 0:
            self._fsync(call)
        elif self.direct:
            self._direct(call, now)
        else:
            first = call.sector // PAGE_SECTORS
            last = min((call.sector + call.nr_sectors - 1) // PAGE_SECTORS + 1,
                       self.layout.pages)
            if call.write:
                self._wstep(_Call(call, first, last))
            else:
                self._step(_Call(call, first, last))
        return True

    def invalidate(self) -> None:
        """Drop the file's clean pages from the cache (fio's ``invalidate``)."""
        self.cache.drop_file(self.layout.number)

    def when_request(self, call, wake) -> None:
        """Never needed: `submit_bio` always takes the call."""
        raise AssertionError("an open file never leaves a call waiting for a request")

    def process_exited(self, pid: int) -> None:
        """Tell the elevators below that the process has ended."""
        self.target.process_exited(pid)

    def _done(self, call, pieces: _Pieces | None) -> None:
        now = self.clock.now
        if self.atime and not call.write and call.nr_sectors:
            self.journal.note_atime(self)          # file_accessed -> touch_atime
        elif pieces is not None and call.write and self.layer is not None:
            self.journal.note_mtime(self)          # a direct write: file_update_time
        if pieces is not None:                  # direct I/O: the device's DMA, no copy
            call.t_complete = now
            call.t_dispatch = pieces.t_dispatch
            call.disk_s = pieces.disk_s
            if self.stalls is not None and not self.aio:
                self.stalls.iowait(call.pid, -1)
            self.finish(call)
            return
        # a buffered call copies its bytes between the page cache and the process; it
        # returns after that, as a later event (never inside the submitter's own turn)
        call.t_complete = now + call.nr_sectors * 512 / self.copy_rate
        call.t_dispatch = call.t_complete
        if self.stalls is not None:             # copying: running, not in iowait
            self.stalls.running(call.pid, 1)
            self.stalls.iowait(call.pid, -1)
        self.clock.call_at(call.t_complete, lambda _ev, call=call: self._copied(call))

    def _copied(self, call) -> None:
        """A buffered call's copy is done: it returns."""
        if self.stalls is not None:
            self.stalls.running(call.pid, -1)
        self.finish(call)

    # ------------------------------------------------------------------ direct I/O
    def _direct(self, call, now: float) -> None:
        pieces = self.layout.map(call.sector, call.nr_sectors)

        def submit():
            group = _Pieces(len(pieces), lambda g: self._done(call, g))
            for sector, n in pieces:
                # sync, reads and writes alike: __blockdev_direct_IO turns a write into
                # WRITE_SYNC (fs/direct-io.c, 2.6.18)
                self.submitter.submit(self.target, Bio(self.ids.take(), sector, n,
                                                       call.write, True, call.pid,
                                                       call.ioprio), group)
            if self.stalls is not None and self.aio:
                self.stalls.iowait(call.pid, -1)   # io_submit returns: -EIOCBQUEUED
            run_backing_dev(self.target)
        if self.layer is None:
            submit()
        else:          # get_block maps each block through its indirect blocks first
            first = call.sector // PAGE_SECTORS
            last = (call.sector + call.nr_sectors - 1) // PAGE_SECTORS
            self._read_indirect([first, last], submit)

    # ------------------------------------------------------------------ buffered reads
    def _step(self, st: _Call) -> None:
        """Go through the call's pages until one must be waited for."""
        cache = self.cache
        number = self.layout.number
        while st.index < st.last:
            if st.index == st.next_index:
                st.next_index = page_cache_readahead(self.ra, st.index, st.last - st.index,
                                                     self._read_pages)
            state = cache.state((number, st.index))
            if state is True:
                st.index += 1
                continue
            if state is None:                     # not cached: read this page alone
                self.ra.note_miss()
                state = self._read_run([st.index])
            state.waiters.append(lambda st=st: self._page_ready(st))
            return
        self._done(st.call, None)

    def _page_ready(self, st: _Call) -> None:
        st.index += 1
        self._step(st)

    def _read_pages(self, start: int, count: int, block: bool):
        """Read the pages of [start, start + count) not cached; how many that was (None:
        skipped, the queue being read-congested)."""
        if not block and self.congested():
            return None
        number = self.layout.number
        cached = self.cache.cached
        missing = [p for p in range(start, min(start + count, self.layout.pages))
                   if not cached((number, p))]
        for run in page_runs(missing):
            self._read_run(run)
        return len(missing)

    def _read_run(self, pages: list) -> PageRead:
        """Read consecutive ``pages`` into the cache (one bio per piece on the device)."""
        read = PageRead()
        number = self.layout.number
        keys = [(number, p) for p in pages]
        for key in keys:
            self.cache.start_read(key, read)
        pieces = self.layout.map(pages[0] * PAGE_SECTORS, len(pages) * PAGE_SECTORS)

        def filled(_group, keys=keys, read=read):
            for key in keys:
                self.cache.finish_read(key)
            for wake in read.waiters:
                wake()

        def submit():
            group = _Pieces(len(pieces), filled)
            for sector, n in pieces:
                self.submitter.submit(self.target, Bio(self.ids.take(), sector, n, False,
                                                       True, self.pid, self.ioprio), group)
        if self.layer is None:
            submit()
        else:
            self._read_indirect(pages, submit)
        return read

    def _read_indirect(self, pages: list, then) -> None:
        """Have the indirect blocks mapping ``pages`` in the cache, each chain read
        outermost first (``ext3_get_branch``), then call ``then()``."""
        layer = self.layer
        per_page = PAGE_SECTORS * 512 // layer.geometry.block_size
        first, last = pages[0] * per_page, (pages[-1] + 1) * per_page - 1
        blocks = list(range(first, last, layer.addrs)) + [last]
        chains = {tuple(layer.metadata_blocks(self.layout.path, b)) for b in blocks}
        chains.discard(())
        if not chains:
            then()
            return
        left = [len(chains)]

        def chain_done():
            left[0] -= 1
            if left[0] == 0:
                then()
        for chain in sorted(chains):
            self._read_chain(list(chain), chain_done)

    def _read_chain(self, chain: list, then) -> None:
        """Read the blocks of ``chain`` not cached, one after another."""
        cache = self.cache
        while chain:
            sector, n = chain[0]
            key = ("indirect", id(self.layer), sector)
            state = cache.peek(key)
            if state is True:
                chain.pop(0)
                continue
            if state is None:                      # absent: read it (a sync read)
                state = PageRead()
                cache.start_read(key, state)

                def filled(_group, key=key, read=state):
                    cache.finish_read(key)
                    for wake in read.waiters:
                        wake()
                group = _Pieces(1, filled)
                self.submitter.submit(self.target, Bio(self.ids.take(), sector, n, False,
                                                       True, self.pid, self.ioprio), group)
                self.indirect_reads += 1
            chain.pop(0)
            state.waiters.append(lambda: self._read_chain(chain, then))
            return
        then()

    # ------------------------------------------------------------------ buffered writes
    def _wstep(self, st: _Call) -> None:
        """``generic_file_buffered_write``: page by page, a page written in part and not
        up to date is read first (``prepare_write``); the page is then dirty. Every
        ``ratelimit`` pages the writer balances the dirty pages (and may be throttled)."""
        cache = self.cache
        number = self.layout.number
        call = st.call
        end = call.sector + call.nr_sectors
        while st.index < st.last:
            key = (number, st.index)
            start = st.index * PAGE_SECTORS
            if st.held != st.index:
                state = cache.peek(key)
                whole = call.sector <= start and start + PAGE_SECTORS <= end
                if state is None and not whole:          # read the rest of the page first
                    state = self._read_run([st.index])
                if state is not None and state is not True:
                    st.held = st.index                   # held once the read is done
                    state.waiters.append(lambda st=st: self._wstep(st))
                    return
            cache.write(key)
            self.writeback.dirty(self, st.index)
            if self.journal is not None:
                self.journal.note_write(self, st.index)
            st.index += 1
            if self.writeback.must_balance():
                self._balance(lambda st=st: self._wstep(st))
                return
        if self.o_sync:
            # O_SYNC (generic_osync_inode; on ext3 a commit too): as an fsync of the file
            self._fsync(call)
        else:
            self._done(call, None)

    def _balance(self, resume) -> None:
        """``balance_dirty_pages`` in the writer's context (hostio.writeback)."""
        wb = self.writeback
        chunk = wb.ratelimit + wb.ratelimit // 2
        began = self.clock.now
        written = [0]

        def finish():
            if not wb.over_limit():
                wb.exceeded = False
            if wb.nr_dirty > wb.background:
                wb.start_background()
            self.throttled += self.clock.now - began
            resume()

        def attempt(_ev=None):
            if not wb.over_limit():
                return finish()
            wb.exceeded = True
            if wb.nr_dirty:
                n, _ = wb.write_some(chunk, False, self.submitter, self.pid)
                if not wb.over_limit():
                    return finish()
                written[0] += n
                if written[0] >= chunk:
                    return finish()
            self.clock.call_at(self.clock.now + CONGESTION_WAIT, attempt)
        attempt()

    def _fsync(self, call) -> None:
        """``do_fsync``: write every dirty page of the file, waiting for free requests
        (``filemap_fdatawrite``); on ext3, have the transaction holding the inode
        committed (``ext3_sync_file``); then wait until none of the file's pages is under
        writeback (``filemap_fdatawait``)."""
        wb = self.writeback
        number = self.layout.number
        if wb is None:
            self._done(call, None)
            return
        if self.journal is not None and not self.journal.fsync_writes:
            # data=journal: ext3_sync_file -> ext3_force_commit, the pages in the journal
            self.journal.fsync(self, lambda: self._done(call, None))
            return
        wb.write_file(number, self.layout.pages, False, self.submitter, self.pid)

        def wait():
            run_backing_dev(self.target)       # sync_page, before sleeping on the pages
            wb.wait_written(number, lambda: self._done(call, None))
        if self.journal is not None:       # ext3_sync_file: the inode's commit, first
            self.journal.fsync(self, wait)
        else:
            wait()

    # ------------------------------------------------------------------ writeback's side
    def max_bio_pages(self) -> int:
        """The most pages one write bio carries (the queue's max_sectors_kb)."""
        return self._max_bio_pages

    def write_pages(self, pages: list, submitter, pid: int, done) -> None:
        """Write consecutive ``pages`` of the file (async writes, from ``submitter``'s
        context); ``done()`` when all are on the device."""
        pieces = self.layout.map(pages[0] * PAGE_SECTORS, len(pages) * PAGE_SECTORS)
        group = _Pieces(len(pieces), lambda _g: done())
        for sector, n in pieces:
            bio = Bio(self.ids.take(), sector, n, True, False, pid, submitter.ioprio)
            bio.buffered = True          # page-cache writeback (writeback throttling's)
            if submitter.attaches_inode_wb:
                bio.cgroup = self.cgroup     # wbc_init_bio: the inode's owner, not the flusher
            submitter.submit(self.target, bio, group)

    @property
    def bios_issued(self) -> int:
        """Bios submitted in the process's context."""
        return self.submitter.bios_issued
