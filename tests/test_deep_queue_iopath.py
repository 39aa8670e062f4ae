"""The applications' I/O path per mode, as the block layer sees it (issue 33): which process
submits each write, and whether its bio carries the sync flag, for Oracle's
``filesystemio_options`` and InnoDB's ``innodb_flush_method`` (docs/apps.md, "The I/O path
per mode", has the table and its sources).

The kernel facts checked (Linux 2.6.18):

* fs/direct-io.c ``__blockdev_direct_IO``: ``if (rw & WRITE) rw = WRITE_SYNC`` -- every
  direct write, synchronous or submitted with io_submit, carries ``BIO_RW_SYNC``, and
  ``__make_request`` (block/ll_rw_blk.c) unplugs the queue for it at once.
* fs/aio.c ``aio_pwrite`` calls ``f_op->aio_write``; for a file without O_DIRECT that is
  ``generic_file_aio_write``, which copies into the page cache and, for O_DSYNC, writes
  and waits (``sync_page_range``) before returning: only the O_DIRECT path returns
  ``-EIOCBQUEUED``. So ``asynch`` on buffered files issues what ``none`` issues.
* An O_DSYNC/O_SYNC buffered write and an fsync write the pages in the caller's context
  (``generic_osync_inode`` / ``do_fsync`` -> ``filemap_fdatawrite`` ->
  ``mpage_writepages`` -> ``mpage_bio_submit(WRITE, ...)``): plain writes, no sync flag,
  submitted by the database's own process, not by pdflush.
"""

from __future__ import annotations

import collections

import pytest

from blksim.sim.config import resolve, resolved_dict
from blksim.sim.engine import Simulation
from blksim.sim.results import results_dict

DEVICE = {"service": "fixed", "service_time": "1ms", "capacity": "4g"}


def _simulate(app: dict | None = None, jobs=None, files=None, duration: str = "2s"):
    raw = {"run": {"seed": 1, "duration": duration}, "host": {"memory": "1g"},
           "device": dict(DEVICE), "devices": {"sdb": dict(DEVICE)},
           "queue": {"scheduler": "deadline"}}
    if app is not None:
        raw["app"] = [{"type": "oltp", "data_device": "/dev/sda", "log_device": "/dev/sdb",
                       "data_size": "64m", "sessions": 4, **app}]
    if jobs is not None:
        raw["job"] = jobs
        raw["file"] = files
    cfg = resolve(raw, "iopath.toml")
    bios = []
    sim = Simulation(cfg, complete_hooks=(bios.append,))
    out = sim.run()
    depths = {n: q.device.queue_depth for n, q in sim.host.disks.items()}
    res = results_dict(out, resolved_dict(cfg, depths))
    names = {p.get("pid"): p.get("name") for p in res["processes"]}
    return bios, names


def _writes(app: dict) -> collections.Counter:
    """(submitting process, sync flag, page-cache writeback) -> write bios."""
    bios, names = _simulate(app)
    return collections.Counter((names.get(b.pid, b.pid), b.sync, b.buffered)
                               for b in bios if b.write)


ORACLE = {"log_file_size": "1m", "db_cache_size": "8m", "redo_per_change": 8192}
INNODB = {"engine": "innodb", "innodb_buffer_pool_size": "8m", "innodb_log_file_size": "1m"}


@pytest.mark.parametrize("option, direct", [("none", False), ("asynch", False),
                                            ("directio", True), ("setall", True)])
def test_oracle_writes_by_mode(option, direct):
    got = _writes({**ORACLE, "filesystemio_options": option})
    # only the database writer and the log writer write, each its own files
    assert {who for who, _, _ in got} == {"oltp.dbw0", "oltp.lgwr"}
    # direct: WRITE_SYNC bios; buffered O_DSYNC: the writer's own plain page writes
    assert set(got) == {(who, direct, not direct) for who in ("oltp.dbw0", "oltp.lgwr")}


def test_oracle_asynch_on_buffered_files_is_none():
    """fs/aio.c: io_submit on a file without O_DIRECT does the write before it returns."""
    assert _writes({**ORACLE, "filesystemio_options": "asynch"}) == \
        _writes({**ORACLE, "filesystemio_options": "none"})


def _most_in_flight(bios, who, names) -> int:
    events = sorted([(b.t_queue, 1) for b in bios if b.write and names.get(b.pid) == who] +
                    [(b.t_complete, -1) for b in bios if b.write and names.get(b.pid) == who],
                    key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_oracle_setall_has_a_pass_in_flight_directio_one_write():
    bios, names = _simulate({**ORACLE, "filesystemio_options": "directio"})
    assert _most_in_flight(bios, "oltp.dbw0", names) == 1
    bios, names = _simulate({**ORACLE, "filesystemio_options": "setall"})
    assert _most_in_flight(bios, "oltp.dbw0", names) > 8


@pytest.mark.parametrize("method, direct", [("fsync", False), ("O_DSYNC", False),
                                            ("O_DIRECT", True), ("O_DIRECT_NO_FSYNC", True)])
def test_innodb_writes_by_flush_method(method, direct):
    got = _writes({**INNODB, "innodb_flush_method": method})
    cleaners = {who for who, _, _ in got if who.startswith("oltp.page_cleaner")}
    assert cleaners and {who for who, _, _ in got} == cleaners | {"oltp.log_writer"}
    # the redo log goes through the page cache whatever the method (fsync after the
    # write, or O_SYNC): the log writer's plain page writes
    assert {(s, b) for who, s, b in got if who == "oltp.log_writer"} == {(False, True)}
    # data: O_DIRECT's WRITE_SYNC bios from the cleaners, or the page writes of their
    # fsync (or O_SYNC write)
    assert {(s, b) for who, s, b in got if who in cleaners} == {(direct, not direct)}


def test_a_lone_direct_write_goes_to_the_device_at_once():
    """A direct write is WRITE_SYNC: __make_request unplugs the queue for it, so a process
    writing one call at a time never waits for the unplug timer (1 jiffy)."""
    bios, _ = _simulate(jobs=[{"name": "w", "rw": "randwrite", "bs": "8k", "direct": 1,
                               "number_ios": 50, "filename": "/data/f"}],
                        files=[{"path": "/data/f", "device": "/dev/sda", "size": "64m"}])
    writes = [b for b in bios if b.write]
    assert len(writes) == 50 and all(b.sync for b in writes)
    assert all(b.t_dispatch == b.t_queue for b in writes)
