"""The anticipatory elevator (Linux 2.6.18 block/as-iosched.c) in the deep-queue case of
issue 33, hand-traced.

The case of tests/deepqueue.py: sixteen readers with one direct read each at a time
(6 ms service, 1.3 ms think time), a writer, a LUN with 128 tags, HZ=250.
``antic_expire`` = HZ/150 = 1 jiffy, ``read_batch_expire`` = HZ/2 = 125 jiffies,
``write_batch_expire`` = HZ/8 = 31, so ``write_batch_count`` starts at 31/10 = 3.

What AS sees of the writes: ``as_add_request`` files a request as sync when it is a read
*or* carries ``REQ_RW_SYNC``. ``__blockdev_direct_IO`` (fs/direct-io.c) makes every direct
write ``WRITE_SYNC``, and ``init_request_from_bio`` (block/ll_rw_blk.c) turns the bio's
``BIO_RW_SYNC`` into ``REQ_RW_SYNC``: the direct writes are **sync** to AS, in the reads'
sort tree and FIFO, with their own anticipation. pdflush's writes are plain ``WRITE``s:
async, served in write batches.

The trace, step by step (j = jiffies):

1. j=0: reader 1's read is dispatched (``as_move_to_dispatch``: ``io_context`` = reader 1).
   Reader 2's read arrives; ``as_dispatch_request`` asks ``as_can_anticipate``: reader 1
   has no think-time sample yet (``as_update_iohist`` measures from a process's second
   request), the new-process priors (``new_ttime_mean`` 0, ``exit_prob`` 0) do not
   break it, and its request is still at the LUN: ``as_antic_waitreq`` -> WAIT_REQ.
   AS dispatches one request and holds the other 15 reads (and the writes) although
   127 tags are free.
2. 6 ms (j=1): the read completes; ``as_completed_request`` (the anticipated process)
   sets ``antic_start`` = 1 and ``as_antic_waitnext`` arms the timer for
   ``antic_start + antic_expire`` = j 2 (8 ms): WAIT_NEXT.
3. 7.3 ms: reader 1's next read breaks the wait (``as_can_break_anticipation``: request
   from the same process) and is dispatched. Reader 2's goes right after it: reader 1
   now has one think-time sample of 0 jiffies, and ``as_update_thinktime``'s mean,
   ``(ttime_total + 128) / ttime_samples`` = 128/32 = 4 jiffies, exceeds
   ``antic_expire``: "the process thinks too much". Then AS waits on reader 2 (no
   samples): WAIT_REQ. The one-way sweep (``as_choose_req``) goes up the LUN by pairs.
4. Direct writes (sync): the sweep reaches the writer's area at 112 ms; its first write
   makes it the anticipated process and, while it has more requests queued, nothing
   stops AS (``as_can_break_anticipation``: "process has more requests queued"): all 32
   go to the LUN at once. At 118 ms they complete and the writer's 32 next writes arrive
   while AS anticipates on it: dispatched at once again. At 124 ms the last complete;
   the writer has nothing more, and the wait on it ends at the timer, j 31 + 1 = 128 ms.
   Never a write batch: the batch stays sync.
5. pdflush (async): at 112 ms the read FIFO runs empty (14 reads dispatched at once as
   the few-sample think-time means let each process go); ``as_dispatch_request`` turns
   to the writes (``changed_batch``) but waits while the read batch's requests are at the
   LUN (``nr_dispatched``). At 118 ms the last read completes (``as_completed_request``
   clears ``changed_batch``; 2.6.18 does not restart the batch clock) and the write
   batch dispatches ``write_batch_count`` = 3 writes. The next batches, after read
   batches of ``read_batch_expire``, have 6 and 12 writes: ``update_write_batch``
   doubles the count because 2.6.18 measures the write batch against the stale read
   batch deadline.
"""

from __future__ import annotations

from itertools import groupby

import pytest

from tests.deepqueue import PDFLUSH, WRITER, Case
from blksim.schedulers.anticipatory import (ANTIC_WAIT_NEXT, ANTIC_WAIT_REQ, ASYNC,
                                            SYNC)

SERVICE = 0.006
EPS = 1e-4


def _case(writer: str) -> Case:
    return Case("anticipatory", writer, SERVICE, writes=64, writer_depth=32)


def _bursts(case: Case, write: bool) -> list:
    """(time in ms, requests issued then) of the writes (or reads), in order."""
    times = [round(t * 1000, 1) for t, _, w in case.issued() if w == write]
    return [(t, len(list(g))) for t, g in groupby(times)]


def test_direct_writes_are_sync_and_pdflush_writes_async():
    """as_add_request: is_sync = READ or REQ_RW_SYNC (2.6.18)."""
    dio = _case("dio")
    dio.run_until(EPS)
    assert sum(rq.pid == WRITER for rq in dio.el.fifo_order(sync=True)) == 32
    assert dio.el.fifo_order(sync=False) == []
    pd = _case("pdflush")
    pd.run_until(EPS)
    assert sum(rq.pid == PDFLUSH for rq in pd.el.fifo_order(sync=False)) == 64
    assert all(rq.pid != PDFLUSH for rq in pd.el.fifo_order(sync=True))


@pytest.mark.parametrize("writer", ["dio", "pdflush"])
def test_anticipation_holds_fifteen_reads_behind_one(writer):
    case = _case(writer)
    el = case.el
    # 1. j=0: one read at the LUN, AS waits for its process (WAIT_REQ)
    case.run_until(EPS)
    assert case.issued() == [(0.0, 1, False)]
    assert el.antic_status == ANTIC_WAIT_REQ and el.io_context.pid == 1
    assert el.io_context.ttime_samples == 0
    assert len(el.fifo_order(sync=True)) - (32 if writer == "dio" else 0) == 15
    # 2. 6 ms (j=1): completion; the anticipation timer for j=2
    case.run_until(0.006 + EPS)
    assert el.antic_status == ANTIC_WAIT_NEXT and el.antic_start == 1
    assert el.wakeup_at == pytest.approx(2 / 250)
    assert case.in_device() == 0
    # 3. 7.3 ms: reader 1's read and, its mean think time being 128/32 = 4 jiffies,
    # reader 2's; then AS waits on reader 2
    case.run_until(0.0073 + EPS)
    assert el.context(1).ttime_samples == 32 and el.context(1).ttime_mean == 4
    assert [pid for _, pid, _ in case.issued(0.0073 - EPS, 0.0073 + EPS)] == [1, 2]
    assert el.antic_status == ANTIC_WAIT_REQ and el.io_context.pid == 2
    # while the sweep goes up the LUN there are never more than two reads at the LUN
    case.run_until(0.111)
    t_reads = [t for t, _, w in case.issued() if not w]
    assert max(sum(1 for s in t_reads if t - SERVICE < s <= t) for t in t_reads) <= 2


def test_direct_writes_go_thirty_two_at_a_time_without_a_write_batch():
    case = _case("dio")
    el = case.el
    case.run_until(0.2)
    # 4. all 32 queued writes at 112 ms, the next 32 at 118 ms, nothing in between
    assert _bursts(case, True) == [(112.0, 32), (118.0, 32)]
    assert el.batch_data_dir == SYNC and el.write_batch_count == 3
    # the wait on the writer after its last completion (j=31) ends at the timer, j=32
    reads_after = [t for t, _, w in case.issued(0.1181) if not w]
    assert reads_after[0] == pytest.approx(0.128)


def test_pdflush_writes_in_batches_of_three_six_twelve():
    case = _case("pdflush")
    el = case.el
    case.run_until(0.112 + EPS)
    # 5. the read FIFO ran empty at 112 ms: 14 reads dispatched at once, a write batch
    # chosen but held while they are at the LUN
    at112 = [pid for t, pid, w in case.issued(0.112 - EPS, 0.112 + EPS)]
    assert at112 == list(range(1, 15))
    assert el.batch_data_dir == ASYNC and el.changed_batch
    case.run_until(1.5)
    assert _bursts(case, True) == [(118.0, 3), (635.3, 6), (1152.0, 12)]
    assert el.write_batch_count == 24
