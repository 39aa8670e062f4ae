"""jbd's three data modes on a filesystem made by mkfs (hostio.journal with hostio.fs):
ordered writes a transaction's data before the commit that names it, writeback orders
nothing, journal writes the data twice; fsync in each mode; noatime; the indirect-block
reads of random reads; an acknowledged fsync is never lost in the journal's bookkeeping
(hypothesis over random file operations against the real writeback)."""

import heapq

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.hostio.fileio import FileLayout, Submitter, _Pieces
from blksim.hostio.journal import Journal
from blksim.hostio.pagecache import PageCache
from blksim.hostio.writeback import Writeback
from blksim.block.request import Bio
from blksim.sim.config import resolve
from blksim.sim.engine import KJOURNALD_PID, PDFLUSH_PID, Simulation
from blksim.sim.storage_config import FsConfig
from blksim.sim.workload import BioIds

DEVICE = {"service": "fixed", "service_time": "1ms", "capacity": "2g"}


def simulate(mount, jobs, size="64m", duration="8s", vm=None, mkfs="-j"):
    raw = {"run": {"seed": 1, "duration": duration}, "device": DEVICE,
           "queue": {"scheduler": "noop"}, "job": jobs,
           "file": [{"path": "/d/f", "device": "/dev/sda", "size": size}],
           "filesystems": {"/dev/sda": {"type": "ext3", "mkfs": mkfs, "mount": mount}}}
    if vm:
        raw["vm"] = vm
    cfg = resolve(raw, "t.toml")
    bios = []
    sim = Simulation(cfg, complete_hooks=(bios.append,))
    sim.run()
    journal = next(iter(sim.journals.values()))
    return cfg, journal, sorted(bios, key=lambda b: b.t_queue)


WRITE_TWO_PAGES = [{"name": "w", "rw": "write", "bs": "8k", "number_ios": 1,
                    "filename": "/d/f"}]


def journal_bios(journal, bios):
    spans = [(s, s + n) for s, n in journal.fs.journal_layout.extents]
    return [b for b in bios if any(a <= b.sector < e for a, e in spans)]


def test_ordered_commit_writes_the_data_then_the_journal_then_the_commit_block():
    # hand-traced against journal_commit_transaction (fs/jbd/commit.c, 2.6.18): at the
    # commit timer (5 s) kjournald submits the transaction's dirty data (phase 2,
    # journal_submit_data_buffers), waits for it, writes the descriptor and the inode's
    # block (phase 4), waits, then the commit block (journal_write_commit_record)
    _, journal, bios = simulate("data=ordered", WRITE_TWO_PAGES)
    assert [(b.pid, b.nr_sectors) for b in bios] == [(KJOURNALD_PID, 16),
                                                     (KJOURNALD_PID, 16),
                                                     (KJOURNALD_PID, 8)]
    data, log, commit = bios
    assert data not in journal_bios(journal, bios)
    assert data.t_queue == pytest.approx(5.0, abs=0.01)
    assert data.t_complete <= log.t_queue and log.t_complete <= commit.t_queue
    assert commit.sector == log.sector + 16           # the block after them
    assert journal.commits == 1 and journal.data_pages == 2


def test_writeback_mode_orders_nothing():
    _, journal, bios = simulate("data=writeback", WRITE_TWO_PAGES)
    # the commit writes the journal blocks at once; the data waits for pdflush (30 s)
    assert [(b.pid, b.nr_sectors) for b in bios] == [(KJOURNALD_PID, 16),
                                                     (KJOURNALD_PID, 8)]
    assert journal.data_pages == 0
    _, journal, bios = simulate("data=writeback", WRITE_TWO_PAGES,
                                vm={"dirty_expire_centisecs": 100,
                                    "dirty_writeback_centisecs": 100})
    data = [b for b in bios if b.pid == PDFLUSH_PID]
    log = journal_bios(journal, bios)
    assert len(data) == 1 and data[0].t_queue < log[0].t_queue     # pdflush at 2 s


def test_journal_mode_writes_the_data_twice():
    _, journal, bios = simulate("data=journal", WRITE_TWO_PAGES,
                                vm={"dirty_expire_centisecs": 600,
                                    "dirty_writeback_centisecs": 100})
    log = journal_bios(journal, bios)
    home = [b for b in bios if b not in log]
    # descriptor + inode + the 2 data pages into the journal, then the commit block
    assert [b.nr_sectors for b in log] == [32, 8] and journal.journalled_pages == 2
    # then to their place, by writeback (jbd's checkpoint)
    assert [(b.pid, b.nr_sectors) for b in home] == [(PDFLUSH_PID, 16)]
    assert home[0].t_queue > log[1].t_complete
    assert sum(b.nr_sectors for b in bios) == 2 * 16 + 3 * 8


@pytest.mark.parametrize("mode, data_bios", [("ordered", 1), ("writeback", 1),
                                             ("journal", 0)])
def test_fsync_in_each_mode(mode, data_bios):
    jobs = [{"name": "w", "rw": "write", "bs": "8k", "number_ios": 1, "fsync": 1,
             "filename": "/d/f"}]
    _, journal, bios = simulate(f"data={mode}", jobs, duration="1s")
    log = journal_bios(journal, bios)
    home = [b for b in bios if b not in log]
    assert journal.commits == 1 and len(home) == data_bios and len(log) == 2
    if mode == "ordered":    # the VFS writes the pages; the commit waits for them
        assert home[0].pid != KJOURNALD_PID and home[0].t_complete <= log[0].t_queue
    elif mode == "writeback":    # the commit goes at once, beside the data
        assert home[0].pid != KJOURNALD_PID and log[0].t_queue < home[0].t_complete
    else:         # journal: ext3_force_commit, the pages inside the journal write
        assert log[0].nr_sectors == 4 * 8


def test_noatime_removes_the_atime_writes():
    reads = [{"name": "r", "rw": "randread", "bs": "4k", "number_ios": 50,
              "filename": "/d/f"}]
    _, journal, bios = simulate("", reads)
    assert journal.atime_updates >= 1 and journal.commits >= 1
    assert len(journal_bios(journal, bios)) == 2 * journal.commits     # inode + commit
    _, journal, bios = simulate("noatime", reads)
    assert journal.atime_updates == 0 and journal.commits == 0
    assert not any(b.write for b in bios)


def test_random_reads_of_a_large_file_read_its_indirect_blocks_once_each_first():
    reads = [{"name": "r", "rw": "randread", "bs": "4k", "number_ios": 300,
              "filename": "/d/f"}]
    cfg, journal, bios = simulate("noatime", reads, size="1g")
    layer = cfg.filesystems["sda"].layer
    indirect = {b * 8 for b in layer.files["/d/f"].where.values()}
    meta = [b for b in bios if b.sector in indirect]
    data = [b for b in bios if b.sector not in indirect]
    assert len(data) == 300 and all(b.nr_sectors == 8 for b in meta)
    assert len({b.sector for b in meta}) == len(meta)        # each read once, cached
    # 1 GiB: 256 indirect blocks (and the DIND); 300 random pages touch most of them
    assert 150 < len(meta) <= 257
    layout = FileLayout(1, "/d/f", cfg.files[0].extents)
    done = {b.sector: b.t_complete for b in meta}
    starts = [s for s, _ in layout.extents]
    for b in data:                   # each data read after its indirect blocks
        k = max(i for i, s in enumerate(starts) if s <= b.sector)
        block = (sum(n for _, n in layout.extents[:k]) + b.sector - starts[k]) // 8
        for sector, _ in layer.metadata_blocks("/d/f", block):
            assert done[sector] <= b.t_queue
    # a 40 KiB file lies in its 12 direct blocks: no indirect block at all
    small, _, bios = simulate("noatime", reads, size="40k")
    assert not small.filesystems["sda"].layer.files["/d/f"].where
    assert len(bios) == 10 and sum(b.nr_sectors for b in bios) == 80
    # direct I/O maps its blocks through them too (get_block)
    _, _, bios = simulate("noatime", [{**reads[0], "direct": 1}], size="1g")
    assert sum(b.sector in indirect for b in bios) > 150 and len(bios) > 450


def test_barrier_reaches_the_journal():
    cfg, journal, _ = simulate("barrier=1", WRITE_TWO_PAGES, duration="1s")
    assert journal.barrier is True and cfg.filesystems["sda"].barrier is True


# ---------------------------------------------------------------- bookkeeping property
class _Clock:
    def __init__(self):
        self.now, self._q, self._n = 0.0, [], 0

    def call_at(self, when, fn):
        self._n += 1
        heapq.heappush(self._q, (max(when, self.now), self._n, fn))

    def run(self, until):
        while self._q and self._q[0][0] <= until:
            self.now, _, fn = heapq.heappop(self._q)
            fn(None)
        self.now = max(self.now, until)


class _Device:
    """Completes each bio after the next of ``delays``; records home writes' versions."""

    def __init__(self, clock, delays):
        self.clock, self.delays, self.k = clock, delays, 0
        self.in_flight = {}

    def submit_bio(self, bio):
        self.k += 1
        delay = self.delays[self.k % len(self.delays)]

        def complete(_ev, bio=bio):
            bio.t_dispatch = self.clock.now
            bio.disk_s = 0.0
            bio.on_complete(bio)
        self.clock.call_at(self.clock.now + delay, complete)
        return True


class _File:
    def __init__(self, number, device, clock, ids, versions, home):
        self.layout = FileLayout(number, f"/f{number}", [(number << 20, 64 * 8)])
        self.device, self.clock, self.ids = device, clock, ids
        self.versions, self.home = versions, home

    def max_bio_pages(self):
        return 4

    def plain_sleep(self, done):
        return done           # an unwatched file's (OpenFile.plain_sleep)

    def write_congested(self):
        return False

    def write_pages(self, pages, submitter, pid, done):
        n = self.layout.number
        frozen = {p: self.versions.get((n, p), 0) for p in pages}

        def written(_g):
            for p, v in frozen.items():
                self.home[(n, p)] = max(self.home.get((n, p), 0), v)
            done()
        submitter.submit(self.device, Bio(self.ids.take(), (n << 20) + pages[0] * 8,
                                          8 * len(pages), True, False, pid, 0),
                         _Pieces(1, written))


OPS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(0, 2), st.integers(0, 15)),
    st.tuples(st.just("fsync"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("wait"), st.integers(1, 40), st.just(0))), max_size=60)


@settings(max_examples=120, deadline=None)
@given(OPS, st.sampled_from(["ordered", "writeback", "journal"]),
       st.lists(st.sampled_from([0.0005, 0.002, 0.03, 0.4]), min_size=1, max_size=5))
def test_an_acknowledged_fsync_is_never_lost_and_each_journal_block_is_counted_once(
        ops, mode, delays):
    clock, ids = _Clock(), BioIds()
    device = _Device(clock, delays)
    vm = {"dirty_ratio": 40, "dirty_background_ratio": 10, "dirty_expire_centisecs": 3000,
          "dirty_writeback_centisecs": 500}
    wb = Writeback(clock, PageCache(4096), 1 << 16, vm, Submitter(PDFLUSH_PID))
    fs = FsConfig("sda", "ext3", 0, 64 * 8, 5.0, data=mode)
    journal = Journal(fs, device, clock, ids, wb, Submitter(KJOURNALD_PID))
    versions, home, logged, inode_logged = {}, {}, {}, {}
    files = [_File(n, device, clock, ids, versions, home) for n in range(3)]
    # what each commit covers, frozen when it starts; applied when its commit block is in
    start, committed = journal._start_commit, journal._committed
    frozen = {}

    def start_commit():
        t = journal.running
        start()
        if t is not None and journal.committing is t:
            frozen[id(t)] = ({k: versions.get(k, 0) for n, ps in t.journalled.items()
                              for k in ((n, p) for p in ps)},
                             {n: seq[0] for n in t.files})

    def on_committed(t):
        pages, inodes = frozen.pop(id(t))
        for k, v in pages.items():
            logged[k] = max(logged.get(k, 0), v)
        for n, s in inodes.items():
            inode_logged[n] = max(inode_logged.get(n, -1), s)
        committed(t)
    journal._start_commit, journal._committed = start_commit, on_committed
    seq = [0]
    last_note = {}
    acks = []
    for op, a, b in ops:
        seq[0] += 1
        if op == "write":
            f = files[a]
            versions[(a, b)] = versions.get((a, b), 0) + 1
            last_note[a] = seq[0]
            wb.dirty(f, b)
            journal.note_write(f, b)
        elif op == "fsync":
            f = files[a]
            want = {k: v for k, v in versions.items() if k[0] == a}
            note = last_note.get(a, -1)

            def ack(a=a, want=want, note=note):
                acks.append(a)
                assert inode_logged.get(a, -1) >= note or note < 0
                safe = logged if mode == "journal" else home
                for k, v in want.items():
                    assert safe.get(k, 0) >= v, (mode, k, v, safe.get(k))
            if journal.fsync_writes:      # hostio.fileio.OpenFile._fsync
                wb.write_file(a, 64, False, Submitter(1), 1)
                journal.fsync(f, lambda a=a, ack=ack: wb.wait_written(a, ack))
            else:
                journal.fsync(f, ack)
        else:
            clock.run(clock.now + a / 10)
    clock.run(clock.now + 1000)
    assert len(acks) == sum(1 for op in ops if op[0] == "fsync")
    assert journal.running is None and journal.committing is None
    if mode == "journal":
        assert journal.journalled_pages <= sum(versions.values())


def test_direct_writes_journal_the_inode_once_a_second():
    jobs = [{"name": "w", "rw": "randwrite", "bs": "4k", "number_ios": 400, "direct": 1,
             "filename": "/d/f"}]
    _, journal, bios = simulate("noatime", jobs, duration="8s")
    log = journal_bios(journal, bios)
    data = [b for b in bios if b not in log and b.write]
    # 400 direct writes of 1 ms each span one second or two: the inode changes once a
    # second (file_update_time), one transaction commits it 5 s after the first
    seconds = {int(b.t_queue) for b in data}
    assert len(data) == 400 and journal.commits == 1
    # get_block read the 17 indirect blocks of the 64 MiB file (IND, DIND, 15 under it)
    assert sum(not b.write for b in bios) == 17
    assert [b.nr_sectors for b in log] == [16, 8] and len(seconds) <= 2
