"""The deadline elevator (Linux 2.6.18 block/deadline-iosched.c) in the deep-queue case of
issue 33, hand-traced.

The case of tests/deepqueue.py: sixteen readers, one direct read each at a time (6 ms
service, 1.3 ms think time), a writer, a LUN with 128 tags, HZ=250; ``fifo_batch`` = 16,
``writes_starved`` = 2, ``read_expire`` = HZ/2, ``write_expire`` = 5*HZ.

Deadline sorts by ``rq_data_dir``: the direct writes (``WRITE_SYNC``) and pdflush's are
both writes. It never holds a request back: ``deadline_dispatch_requests`` returns a
request whenever one is queued, and the driver asks while it has a free tag. So with
128 tags nothing stays in the elevator longer than it takes the queue to run:

1. j=0: each reader's read finds the elevator empty (``elv_queue_empty``): the queue is
   plugged and at once unplugged (a read's submitter waits: ``dio_await_one`` ->
   ``blk_run_address_space``), and the read goes to the LUN: sixteen reads at once.
2. Direct writes: each carries ``BIO_RW_SYNC``, so ``__make_request`` unplugs the queue
   for it at once (``__generic_unplug_device``): all 32 reach the LUN at 0 ms.
   pdflush's: plain writes; the first plugs the empty queue (``blk_plug_device``) and
   ``elv_insert`` unplugs it when ``unplug_thresh`` = 4 requests wait: 16 runs of 4, all
   at 0 ms.
3. A batch is thus the requests queued between two queue runs: one (a read, a direct
   write) or four (pdflush's); reads never wait while writes are queued, so
   ``starved`` never counts up, and no deadline (500 ms, 5 s) is ever reached.
4. Every read takes exactly the service time: the sixteen readers overlap at the LUN.
"""

from __future__ import annotations

import pytest

from tests.deepqueue import READERS, Case

SERVICE = 0.006
EPS = 1e-4


def _case(writer: str) -> Case:
    case = Case("deadline", writer, SERVICE, writes=64, writer_depth=32)
    el = case.el
    seen = case.seen = []          # (queued in deadline when a dispatch began, starved)
    dispatch = el.dispatch

    def watched(now, force=False):
        seen.append((el.queued(), el.starved))
        return dispatch(now, force)
    el.dispatch = watched
    return case


@pytest.mark.parametrize("writer, per_run", [("dio", 1), ("pdflush", 4)])
def test_everything_reaches_the_lun_at_once(writer, per_run):
    case = _case(writer)
    case.run_until(EPS)
    issued = case.issued()
    assert all(t == 0.0 for t, _, _ in issued)
    assert sorted({pid for _, pid, w in issued if not w}) == list(READERS)
    assert sum(w for _, _, w in issued) == (32 if writer == "dio" else 64)
    assert case.el.queued() == 0 and case.q.queued == 0
    # 3. a dispatch finds at most `per_run` requests in deadline
    assert max(n for n, _ in case.seen) == per_run


@pytest.mark.parametrize("writer", ["dio", "pdflush"])
def test_no_read_waits_and_no_write_is_starved(writer):
    case = _case(writer)
    case.run_until(1.2)
    assert all(starved == 0 for _, starved in case.seen)
    assert case.el.starved == 0
    # 4. no read ever waits: reader k's n-th read goes to the LUN at n * 7.3 ms (6 ms of
    # service, 1.3 ms of think time), all sixteen in step: 28 cycles in [1.0 s, 1.2 s)
    for pid in READERS:
        times = [t for t, p, w in case.issued() if p == pid]
        assert times == pytest.approx([n * (SERVICE + 0.0013) for n in range(len(times))])
    assert len(case.issued(1.0, 1.2)) == 28 * 16
