"""mq-deadline (schedulers/mq_deadline.py), hand-traced from block/mq-deadline.c of each
line: sweeps and batches, expiry at batch start, writes_starved, priority levels with
in-flight blocking (6.1 on) and aging, async_depth, tunables per line."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.block.mq.elevator import MqHctx, MqQueueInfo
from blksim.block.request import (IOPRIO_CLASS_IDLE, IOPRIO_CLASS_RT, Bio, MqRequest,
                                  ioprio_value)
from blksim.schedulers.mq_deadline import MqDeadlineElevator

_ids = iter(range(10**9))


def make(kernel="6.6", nr_requests=256, **params):
    info = MqQueueInfo(nr_requests=nr_requests, nr_hw_queues=1, queue_depth=32,
                       rotational=True, kernel=kernel, hz=250)
    e = MqDeadlineElevator.create(info, params)
    hctx = MqHctx(0)
    e.init_hctx(hctx)
    e.depth_updated(nr_requests)
    return e, hctx


def rq(e, sector, now=0.0, write=False, ioprio=None, insert=True):
    b = Bio(next(_ids), sector, 8, write, not write, 1)
    if ioprio is not None:
        b.ioprio = ioprio
    r = MqRequest(b.id, b, now)
    e.prepare_request(r, now)
    if insert:
        e.insert_requests([r], False, now)
    return r


def drain(e, hctx, now=0.0):
    out = []
    while e.has_work(hctx):
        r = e.dispatch_request(hctx, now)
        if r is None:
            break
        out.append(r)
    return out


def sectors(rqs):
    return [r.sector for r in rqs]


def test_a_batch_sweeps_up_in_sector_order():
    e, h = make()
    for s in (500, 100, 300):
        rq(e, s)
    assert sectors(drain(e, h)) == [100, 300, 500]


def test_66_goes_on_from_the_last_sector_without_wrapping():
    e, h = make("6.6")
    rq(e, 100)
    assert sectors(drain(e, h)) == [100]
    rq(e, 50, 0.1)
    rq(e, 200, 0.1)
    # the sweep goes on at 200 (first at or after 100); then none is at or after 200,
    # so the next batch starts at the FIFO head, 50
    assert sectors(drain(e, h, 0.1)) == [200, 50]


@pytest.mark.parametrize("at, first", [(0.4, 100), (0.6, 900)])
def test_an_expired_fifo_head_starts_the_batch(at, first):
    # read_expire 500 ms = 125 jiffies at HZ 250; fifo_batch 1: every dispatch a batch
    e, h = make(fifo_batch=1)
    rq(e, 50, 0.0)
    assert e.dispatch_request(h, 0.0).sector == 50     # the first batch (of one)
    rq(e, 900, 0.0)
    rq(e, 100, at)
    assert e.dispatch_request(h, at).sector == first


def test_writes_wait_writes_starved_read_batches():
    e, h = make(fifo_batch=1)
    for s in range(5):
        rq(e, 1000 + 100 * s)
    for s in range(3):
        rq(e, 50000 + 100 * s, write=True)
    dirs = "".join("W" if r.write else "R" for r in drain(e, h))
    # the first dispatch goes on with last_dir (READ) as a batch already under way; then
    # each batch start counts a starved write: R(1) R(2) W(0) ...
    assert dirs == "RRRWRRWW"


def test_from_61_a_level_with_requests_at_the_device_blocks_lower_ones():
    rt = ioprio_value(IOPRIO_CLASS_RT, 0)
    for kernel, blocked in (("5.15", False), ("6.1", True)):
        e, h = make(kernel)
        r = rq(e, 100, ioprio=rt)
        rq(e, 200)
        assert e.dispatch_request(h, 0.0) is r
        second = e.dispatch_request(h, 0.0)
        assert (second is None) == blocked, kernel
        if blocked:
            e.finish_request(r, 0.01)       # the RT request completed
            assert e.dispatch_request(h, 0.01).sector == 200


def test_a_lower_class_waiting_longer_than_prio_aging_expire_goes_first():
    idle = ioprio_value(IOPRIO_CLASS_IDLE, 7)
    rt = ioprio_value(IOPRIO_CLASS_RT, 0)
    e, h = make("6.1")
    rq(e, 100, 0.0, ioprio=idle)
    rq(e, 200, 9.0, ioprio=rt)
    assert e.dispatch_request(h, 9.0).sector == 200      # 9 s: not aged yet
    rq(e, 300, 10.1, ioprio=rt)
    # 10.1 s > 10 s: the idle request has aged and is served before the RT one
    assert e.dispatch_request(h, 10.1).sector == 100


@pytest.mark.parametrize("kernel, write_cap", [("5.10", None), ("5.15", 192), ("6.1", 192),
                                               ("6.6", 48)])
def test_async_depth_per_line(kernel, write_cap):
    e, _ = make(kernel, nr_requests=256)
    assert e.limit_depth(write=False, sync=True) is None
    assert e.limit_depth(write=True, sync=True) == write_cap


def test_tunables_follow_the_line():
    with pytest.raises(ValueError, match="appeared in Linux 5.15"):
        make("5.10", async_depth=8)
    with pytest.raises(ValueError, match="appeared in Linux 6.1"):
        make("5.15", prio_aging_expire=100)
    e, _ = make("6.6", async_depth=8)
    assert e.limit_depth(True, False) == 8
    names = [t.name for t in MqDeadlineElevator.tunables_for("5.10")]
    assert names == ["read_expire", "write_expire", "writes_starved", "front_merges",
                     "fifo_batch"]


def test_a_merged_request_takes_the_earlier_deadline_and_fifo_place():
    e, h = make(fifo_batch=1)
    late = rq(e, 1000, 0.3)
    early = rq(e, 1008, 0.0)       # inserted first in time but later in the FIFO order
    other = rq(e, 5000, 0.2)
    # the block layer merged 'early' into 'late' (late now ends where early ended)
    late.nr_sectors += early.nr_sectors
    e.requests_merged(late, early, 0.3)
    # at 0.55 s only the request with early's deadline (0.5 s) has expired
    assert e.dispatch_request(h, 0.55) is late
    assert e.dispatch_request(h, 0.55) is other
    assert e.empty()


def test_dd_queued_counts_requests_until_they_complete():
    e, h = make("6.1")
    r = rq(e, 100)
    lvl = e.levels[1]
    assert lvl.queued() == 1
    e.dispatch_request(h, 0.0)
    assert lvl.queued() == 1           # at the device: still counted
    e.finish_request(r, 0.01)
    assert lvl.queued() == 0
    never = rq(e, 200, insert=False)   # merged at insertion: never counted
    e.finish_request(never, 0.02)
    assert lvl.queued() == 0


def test_batches_are_fifo_batch_long_and_writes_get_one_after_writes_starved():
    e, h = make(fifo_batch=4)
    for s in range(20):
        rq(e, 1000 + 100 * s)
    for s in range(8):
        rq(e, 90000 + 100 * s, write=True)
    dirs = "".join("W" if r.write else "R" for r in drain(e, h))
    # the batch under way and two read batches (starved 1, 2), then a write batch; two
    # more read batches empty the reads, the writes follow
    assert dirs == "R" * 12 + "W" * 4 + "R" * 8 + "W" * 4


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "dispatch", "finish"]),
                          st.sampled_from([None, IOPRIO_CLASS_RT, IOPRIO_CLASS_IDLE])),
                max_size=40))
def test_the_busy_level_count_is_prio_cnt(steps):
    # dd_dispatch_prio_aged_requests' prio_cnt (the levels with dd_queued > 0) is kept as
    # requests are inserted and finish; it must equal the count over the levels
    e, h = make("6.6")
    at_device = []
    now = 0.0
    for step, cls in steps:
        now += 0.001
        if step == "insert":
            rq(e, 8 * len(at_device) + 100, now,
               ioprio=None if cls is None else ioprio_value(cls, 0))
        elif step == "dispatch":
            r = e.dispatch_request(h, now)
            if r is not None:
                at_device.append(r)
        elif at_device:
            e.finish_request(at_device.pop(0), now)
        assert e._busy_levels == sum(1 for lvl in e.levels if lvl.queued() > 0)
