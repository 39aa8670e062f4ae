"""A 2.6 process that waits for its own writes unplugs the queue (fs/direct-io.c's
``direct_io_worker``/``dio_await_one`` and ``block_sync_page`` call
``blk_run_address_space``, 2.6.18): its writes, plain WRITEs that plug an empty queue,
reach the device at once, not one jiffy later when the unplug timer fires
(`blksim.hostio.fileio.run_backing_dev`). Before this rule a database writer writing one
page at a time waited about 4 ms (HZ 250) in an idle queue per page."""

from tests.test_fileio import simulate


def _writes(bios):
    return [b for b in bios if b.write and b.nr_sectors]


def test_synchronous_direct_writes_are_not_held_by_the_plug():
    _, bios, f = simulate([{"name": "w", "rw": "randwrite", "bs": "4k", "number_ios": 50,
                            "ioengine": "psync", "direct": 1, "filename": "/data/f"}])
    writes = _writes(bios)
    assert len(writes) == 50
    # one write at a time on an idle queue: issued the instant it is queued
    assert all(b.t_dispatch == b.t_queue for b in writes)
    assert f["totals"]["write"]["q2d"]["max_ms"] == 0.0


def test_asynchronous_direct_writes_are_sent_on_after_their_submission():
    # libaio, iodepth 2: each io_submit's bio goes to the device at once (2.6.18's
    # direct_io_worker runs the queue after submitting, for an asynchronous dio too)
    _, bios, _ = simulate([{"name": "w", "rw": "randwrite", "bs": "4k", "number_ios": 40,
                            "ioengine": "libaio", "iodepth": 2, "direct": 1,
                            "filename": "/data/f"}], queue={"scheduler": "noop"})
    writes = _writes(bios)
    assert len(writes) == 40
    # never held for the unplug timer's jiffy (4 ms at HZ 250): the device takes one
    # at a time (1 ms each), so a write waits at most for the one before it
    assert max(b.t_dispatch - b.t_queue for b in writes) <= 1.0e-3 + 1e-9


def test_fsync_runs_the_queue_before_it_waits():
    # buffered writes, an fsync after each: the fsync's page goes out at once
    _, bios, f = simulate([{"name": "w", "rw": "randwrite", "bs": "4k", "number_ios": 30,
                            "fsync": 1, "filename": "/data/f"}])
    writes = _writes(bios)
    assert len(writes) == 30
    assert all(b.t_dispatch == b.t_queue for b in writes)
