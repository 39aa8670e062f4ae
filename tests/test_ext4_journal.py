"""jbd2 (hostio.fs.jbd2) hand-traced in its modes and kernels, and the bookkeeping
property of tests/test_ext3_journal.py run over it: an acknowledged fsync's data are on
the device (or in the journal, data=journal) and every transaction commits."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.hostio.fileio import Submitter
from blksim.hostio.fs import build
from blksim.hostio.fs.jbd2 import Jbd2Journal
from blksim.hostio.pagecache import PageCache
from blksim.hostio.writeback import Writeback
from blksim.sim.engine import KJOURNALD_PID, PDFLUSH_PID
from blksim.sim.storage_config import FsConfig
from blksim.sim.workload import BioIds
from tests.test_ext3_journal import OPS, _Clock, _Device, _File
from tests.test_ext4 import OLD, simulate

WRITE_TWO_PAGES = [{"name": "w", "rw": "write", "bs": "8k", "number_ios": 1,
                    "filename": "/d/f"}]


def test_writeback_mode_commits_the_log_alone():
    journal, bios, _, _ = simulate("data=writeback,nobarrier", WRITE_TWO_PAGES)
    assert [(b.pid, b.nr_sectors) for b in bios] == [(KJOURNALD_PID, 16),
                                                     (KJOURNALD_PID, 8)]
    assert journal.commits == 1 and journal.data_pages == 0


def test_journal_mode_writes_the_data_into_the_log_then_home():
    journal, bios, _, _ = simulate("data=journal,nobarrier", WRITE_TWO_PAGES,
                                   duration="40s")
    k = [b for b in bios if b.pid == KJOURNALD_PID]
    # descriptor + inode + 2 data pages, then the commit block; home by the flusher
    assert [b.nr_sectors for b in k] == [32, 8] and journal.journalled_pages == 2
    home = [b for b in bios if b.pid == PDFLUSH_PID]
    assert [b.nr_sectors for b in home] == [16] and home[0].t_queue > k[1].t_complete


def test_mq_fsync_waits_for_its_pages_before_the_commit():
    # 5.4-6.6: file_write_and_wait_range, then jbd2_complete_transaction (2.6.32 and
    # 2.6.18 commit while the pages are still being written)
    jobs = [{"name": "w", "rw": "write", "bs": "8k", "number_ios": 1, "fsync": 1,
             "filename": "/d/f"}]
    journal, bios, _, _ = simulate("", jobs, kernel="6.6", mkfs="", duration="1s")
    data = [b for b in bios if b.pid != KJOURNALD_PID]
    log = [b for b in bios if b.pid == KJOURNALD_PID]
    assert len(data) == 1 and [b.nr_sectors for b in log] == [16, 8]
    assert data[0].t_complete <= log[0].t_queue
    journal, bios, _, _ = simulate("", jobs, duration="1s")        # 2.6.32
    data = [b for b in bios if b.pid != KJOURNALD_PID]
    log = [b for b in bios if b.pid == KJOURNALD_PID]
    assert log[0].t_queue < data[0].t_complete


def test_metadata_csum_descriptors_hold_254_tags():
    journal, _, _, _ = simulate("", WRITE_TWO_PAGES, kernel="6.6", mkfs="")
    assert journal.tags_per_descriptor == 254
    journal, _, _, _ = simulate("", WRITE_TWO_PAGES)           # 2.6.32: no csum, 64bit
    assert journal.tags_per_descriptor == 339


CASES = [("2.6.32", "data=ordered,nodelalloc"), ("2.6.32", "data=ordered"),
         ("2.6.32", "data=writeback,journal_async_commit"), ("2.6.32", "data=journal"),
         ("6.6", "data=ordered"), ("6.6", "data=writeback,journal_async_commit"),
         ("6.6", "data=journal")]


@settings(max_examples=120, deadline=None)
@given(OPS, st.sampled_from(CASES),
       st.lists(st.sampled_from([0.0005, 0.002, 0.03, 0.4]), min_size=1, max_size=5))
def test_an_acknowledged_fsync_is_never_lost(ops, case, delays):
    kernel, mount = case
    layer = build("ext4", 1 << 21, OLD if kernel == "2.6.32" else "", mount, "1", kernel)
    mode = layer.data_mode
    clock, ids = _Clock(), BioIds()
    device = _Device(clock, delays)
    vm = {"dirty_ratio": 40, "dirty_background_ratio": 10, "dirty_expire_centisecs": 3000,
          "dirty_writeback_centisecs": 500}
    wb = Writeback(clock, PageCache(4096), 1 << 16, vm, Submitter(PDFLUSH_PID))
    fs = FsConfig("sda", "ext4", 0, 64 * 8, 5.0, data=mode, barrier=True, layer=layer)
    journal = layer.make_journal(fs, device, clock, ids, wb, Submitter(KJOURNALD_PID))
    assert isinstance(journal, Jbd2Journal)
    versions, home, logged, inode_logged = {}, {}, {}, {}
    files = [_File(n, device, clock, ids, versions, home) for n in range(3)]
    start, committed = journal._start_commit, journal._committed
    frozen = {}
    seq = [0]

    def start_commit():
        t = journal.running
        start()
        if t is not None and journal.committing is t:
            frozen[id(t)] = ({k: versions.get(k, 0) for n, ps in t.journalled.items()
                              for k in ((n, p) for p in ps)},
                             {n: seq[0] for n in t.files},
                             {(n, p): versions.get((n, p), 0) for n, ps in t.data.items()
                              for p in ps})

    def on_committed(t):
        pages, inodes, ordered = frozen.pop(id(t))
        if journal.ordered:       # ordered data are home before the commit block
            for k, v in ordered.items():
                assert home.get(k, 0) >= v, (case, k, v)
        for k, v in pages.items():
            logged[k] = max(logged.get(k, 0), v)
        for n, s in inodes.items():
            inode_logged[n] = max(inode_logged.get(n, -1), s)
        committed(t)
    journal._start_commit, journal._committed = start_commit, on_committed
    last_note, acks = {}, []
    for op, a, b in ops:
        seq[0] += 1
        if op == "write":
            f = files[a]
            versions[(a, b)] = versions.get((a, b), 0) + 1
            wb.dirty(f, b)
            journal.note_write(f, b)
            # (an overwrite within the inode's time granularity changes no metadata)
            if journal.running is not None and a in journal.running.files:
                last_note[a] = seq[0]
        elif op == "fsync":
            f = files[a]
            want = {k: v for k, v in versions.items() if k[0] == a}
            note = last_note.get(a, -1)
            # 2.6.32 returns without the commit when the inode's transaction is already
            # committing (jbd2_log_start_commit finds it requested): its data are safe,
            # its inode only once that commit ends (checked at the end)
            inode_wait = kernel != "2.6.32" or mode == "journal" or not (
                journal.committing is not None and a in journal.committing.files
                and (journal.running is None or a not in journal.running.files))

            def ack(a=a, want=want, note=note, inode_wait=inode_wait):
                acks.append(a)
                if inode_wait:
                    assert inode_logged.get(a, -1) >= note or note < 0
                safe = logged if mode == "journal" else home
                for k, v in want.items():
                    assert safe.get(k, 0) >= v, (case, k, v, safe.get(k))
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
    for a, note in last_note.items():          # every change committed in the end
        assert inode_logged.get(a, -1) >= note
    if mode == "journal":
        assert journal.journalled_pages <= sum(versions.values())
