"""CFQ (Linux 2.6.18 block/cfq-iosched.c) in the deep-queue case of issue 33, hand-traced.

Sixteen readers, one synchronous direct read each at a time (6 ms service, 1.3 ms think
time between a read completing and the next), and a writer, in front of a LUN with 128
tags (tests/deepqueue.py). HZ=250: one jiffy is 4 ms; ``slice_sync`` = HZ/10 = 25
jiffies, ``slice_async`` = HZ/25 = 10, ``slice_idle`` = HZ/125 = 2, ``quantum`` = 4,
``slice_async_rq`` = 2; every process is best-effort level 4 (nice 0).

What CFQ sees of the writes. 2.6.18's ``cfq_set_request`` picks the queue by
``cfq_queue_pid(current, rq_data_dir(rq))``, and ``cfq_queue_pid`` gives the process's
own (sync) queue only for ``READ`` or ``WRITE_SYNC``; ``rq_data_dir`` is 0 or 1, never
``WRITE_SYNC``, so every write goes to the async queue of its priority
(``CFQ_KEY_ASYNC``), the direct writes that ``__blockdev_direct_IO`` (fs/direct-io.c)
marks ``WRITE_SYNC`` as well as pdflush's. The two writer cases therefore trace the same.

The trace, step by step (j = jiffies):

1. j=0: reader 1's read arrives first; ``cfq_select_queue`` -> ``cfq_set_active_queue``
   splices ``rr_list[4]`` into ``cur_rr`` (``cfq_get_next_prio_level``) and takes its head,
   reader 1; ``__cfq_dispatch_requests`` moves its one request and starts its slice
   (``cfq_set_prio_slice``: slice_end = 0 + 25). The other readers' and the writer's
   requests queue behind it, in the order they came.
2. Reader 1's queue is empty with a request in the driver: ``cfq_select_queue`` returns
   no queue ("keep_queue" with cfqq NULL) and nothing else is dispatched, although the
   LUN has 127 free tags.
3. 6 ms (j=1): the read completes; ``cfq_completed_request`` finds the active sync queue
   empty and ``cfq_arm_slice_timer`` idles: slice_idle = 2 jiffies (the process's seek
   statistics are not valid yet: ``sample_valid`` needs more than 80, it has 32). The
   LUN is idle. 7.3 ms: the read arrives, ``cfq_crq_enqueued`` sees ``wait_request``,
   deletes the timer and the read is dispatched.
4. After its third read the process's statistics are valid (samples 84) and it is seeky
   (``CIC_SEEKY``: mean seek above 128*1024 sectors; it seeks 2M sectors), so the idle
   is ``min(slice_idle, msecs_to_jiffies(2))`` = 1 jiffy: the timer fires at the next
   tick. 27.9 ms (j=6): completion, timer for j=7 = 28 ms, before the read comes at
   29.2 ms: ``cfq_idle_slice_timer`` finds the slice not over, other queues busy and
   this one empty: ``cfq_slice_expired``, and reader 2 gets a slice at 28 ms.
5. Each reader thus keeps the LUN for 4 reads (28 ms), one read at a time. A reader's
   read that arrives while another's slice runs does not preempt it
   (``cfq_should_preempt`` tests ``wait_request`` of the *new* queue, never set).
6. 448 ms (j=112): the async queue, spliced in behind the sixteen readers, is active.
   It moves ``quantum`` = 4 requests a round; its idle-window flag is set (
   ``cfq_get_queue`` marks every new queue), so ``cfq_dispatch_requests`` stops after
   each round and the driver asks again: 16 writes go to the LUN, until
   ``dispatch_slice`` reaches ``cfq_prio_to_maxrq`` = 2*(2 + 2*3) = 16 and the slice
   ends; in the same loop reader 1 becomes active and its read goes too. With more
   than 4 requests in the driver ``cfq_activate_request`` sets ``hw_tag``.
7. From then on each reader's next read finds ``hw_tag`` set and the process seeky:
   ``cfq_update_idle_window`` clears its idle window, and ``__cfq_dispatch_requests``
   ends the slice of a queue without one after its round. CFQ stops idling, and the
   sixteen readers' reads go to the LUN together.
"""

from __future__ import annotations

import pytest

from tests.deepqueue import HZ, PDFLUSH, READERS, WRITER, Case
from blksim.block.dispatch_queue import DispatchQueue
from blksim.block.request import Bio, Request
from blksim.schedulers.cfq import CfqElevator

SERVICE = 0.006
EPS = 1e-4
WRITERS = {"dio": WRITER, "pdflush": PDFLUSH}


def _case(writer: str, **kw) -> Case:
    return Case("cfq", writer, SERVICE, writes=64, writer_depth=32, **kw)


def _pids(case: Case, since: float, until: float) -> list:
    return [pid for _, pid, _ in case.issued(since, until)]


@pytest.mark.parametrize("writer", ["dio", "pdflush"])
def test_writes_go_to_the_async_queue_whatever_their_sync_flag(writer):
    """cfq_set_request: cfq_queue_pid(current, rq_data_dir(rq)) -> CFQ_KEY_ASYNC for
    every write (2.6.18), the WRITE_SYNC direct writes included."""
    case = _case(writer)
    case.run_until(EPS)
    el = case.el
    pid = WRITERS[writer]
    assert el.queue_of(pid, sync=True) is None
    assert len(el.queue_of(pid, sync=False).tree) == (32 if writer == "dio" else 64)
    # busy: readers 2..16 and the async queue; reader 1's (active, its one request in
    # the driver) left the lists when its sort tree emptied (cfq_del_crq_rb)
    assert el.busy_queues == 16 and el.queue_of(1).rr is None
    assert case.q.plugged is False


@pytest.mark.parametrize("writer", ["dio", "pdflush"])
def test_first_slice_one_read_at_a_time_then_the_idle_timer(writer):
    case = _case(writer)
    el = case.el
    r1 = lambda: el.queue_of(1)          # noqa: E731

    # 1-2. j=0: reader 1 active, its slice ends at j=25, one request at the LUN
    case.run_until(EPS)
    assert el.active_queue is r1() and r1().slice_end == 25
    assert case.issued() == [(0.0, 1, False)]
    assert case.in_device() == 1 and el.rq_in_driver == 1

    # 3. 6 ms (j=1): completion; idle 2 jiffies (statistics not valid: 32 samples)
    case.run_until(0.006 + EPS)
    assert el.active_queue is r1() and r1().wait_request
    assert el.context_of(1).samples == 32
    assert el.idle_slice_timer == 1 + 2
    assert case.in_device() == 0          # the LUN is idle while 47 requests wait
    assert case.q.queued == 15 + (32 if writer == "dio" else 64)

    # 7.3 ms: the read arrives, the timer is deleted, the read dispatched
    case.run_until(0.0073 + EPS)
    assert el.idle_slice_timer is None and not r1().wait_request
    assert case.issued()[-1] == (pytest.approx(0.0073), 1, False)

    # 4. third completion at 20.6 ms (j=5): valid statistics (84 samples), seeky: 1 jiffy
    case.run_until(0.0206 + EPS)
    cic = el.context_of(1)
    assert cic.samples == 84 and cic.seeky()
    assert el.idle_slice_timer == 5 + 1

    # completion at 27.9 ms (j=6): timer for j=7; at 28 ms it ends the slice
    case.run_until(0.0279 + EPS)
    assert el.idle_slice_timer == 7 and el.active_queue is r1()
    case.run_until(0.028 + EPS)
    assert el.active_queue is el.queue_of(2)
    assert el.queue_of(2).slice_end == 7 + 25
    assert r1().slice_left == 25 - 7      # __cfq_slice_expired keeps what was left
    assert _pids(case, 0.0, 0.028) == [1, 1, 1, 1]
    assert max(t for t, _, _ in case.issued()) == pytest.approx(0.028)


@pytest.mark.parametrize("writer", ["dio", "pdflush"])
def test_sixteen_slices_of_four_reads_then_the_async_slice(writer):
    case = _case(writer)
    el = case.el
    # 5. reader k holds the LUN from 28(k-1) ms: four reads, one at a time; no preemption
    case.run_until(0.448 - EPS)
    expected = [k for k in READERS for _ in range(4)]
    assert _pids(case, 0.0, 0.448) == expected
    assert not el.hw_tag
    # 6. 448 ms: the async queue's slice: 16 writes (cfq_prio_to_maxrq), then reader 1
    case.run_until(0.448 + EPS)
    at = case.issued(0.448 - EPS, 0.448 + EPS)
    writes = [pid for _, pid, w in at if w]
    assert writes == [WRITERS[writer]] * 16
    assert [pid for _, pid, w in at if not w] == [1]
    assert el.hw_tag                      # cfq_activate_request: rq_in_driver > 4
    assert el.active_queue is el.queue_of(1)
    aq = el.queue_of(WRITERS[writer], sync=False)
    assert len(aq.tree) == (16 if writer == "dio" else 48)
    # its slice (slice_async = 10 jiffies from j=112) ended by the request count, with
    # all of it left (__cfq_slice_expired keeps slice_end - now)
    assert aq.slice_left == 10


@pytest.mark.parametrize("writer", ["dio", "pdflush"])
def test_hw_tag_turns_idling_off_for_seeky_readers(writer):
    case = _case(writer)
    el = case.el
    case.run_until(0.454 + EPS)
    assert el.queue_of(1).idle_window and el.active_queue is el.queue_of(1)
    # 7. 455.3 ms: reader 1's next read: idle window off (hw_tag, seeky), dispatched,
    # its slice ended in the same round; reader 2 (still with its idle window) is next
    case.run_until(0.4553 + EPS)
    assert not el.queue_of(1).idle_window
    assert _pids(case, 0.4553 - EPS, 0.4553 + EPS) == [1, 2]
    assert el.active_queue is el.queue_of(2)
    # later every reader has lost its idle window and their reads overlap at the LUN
    case.run_until(1.2)
    assert not any(el.queue_of(p).idle_window for p in READERS)
    assert el.idle_slice_timer is None
    # 16 readers, one read each per 7.3 ms: 2*16*100/7.3 = 438 reads in 200 ms, less
    # the cycles cut by the window's ends
    assert 420 <= len(case.issued(1.0, 1.2)) <= 440


def test_a_deleted_idle_timer_runs_nothing():
    """Without think time: at 102 ms (j=25) reader 1's completion arms the idle timer for
    j=26 and its next read, arriving at once, deletes it (cfq_crq_enqueued: del_timer) and
    is dispatched. Nothing runs the queue at 104 ms: the slice (over since j=26) ends
    only at that read's completion at 108 ms (j=27, cfq_completed_request), when reader
    2 starts."""
    case = _case("dio", think=0.0)
    el = case.el
    case.run_until(0.102 + EPS)
    assert case.issued()[-1] == (pytest.approx(0.102), 1, False)
    assert el.idle_slice_timer is None
    case.run_until(0.108 - EPS)
    assert el.active_queue is el.queue_of(1)
    assert _pids(case, 0.0, 0.108) == [1] * 18
    case.run_until(0.108 + EPS)
    assert el.active_queue is el.queue_of(2)
    assert case.issued()[-1] == (pytest.approx(0.108), 2, False)


def test_async_queue_dispatches_with_a_sync_request_in_the_driver():
    """2.6.18's cfq_dispatch_requests has no rule holding async requests back while sync
    ones are in the driver: with slice_idle = 0 the reader's slice ends after its round
    (no idle window) and the async queue dispatches at once, the read still in flight."""
    dq = DispatchQueue()
    el = CfqElevator(dq, {"slice_idle": 0}, hz=HZ)
    read = Request(1, Bio(1, 0, 8, False, True, pid=1), 0.0)
    write = Request(2, Bio(2, 1 << 20, 8, True, False, pid=PDFLUSH), 0.0)
    el.add(read, 0.0)
    el.add(write, 0.0)
    assert el.dispatch(0.0) == 2
    assert [dq.pop_head(), dq.pop_head()] == [read, write]
