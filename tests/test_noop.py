"""The noop elevator (Linux 2.6.18 block/noop-iosched.c): FIFO order, sorted dispatch insert."""

from __future__ import annotations

import itertools

import pytest

from blksim.schedulers.noop import NoopElevator
from blksim.block.dispatch_queue import DispatchQueue
from blksim.block.request import Bio, Request

_ids = itertools.count()


def mkrq(sector: int, nr: int = 8, write: bool = False) -> Request:
    i = next(_ids)
    return Request(i, Bio(i, sector, nr, write, not write, pid=1), 0.0)


def make():
    dq = DispatchQueue()
    return NoopElevator(dq), dq


def test_fifo_order_ignores_sector_and_direction():
    el, dq = make()
    rqs = [mkrq(500), mkrq(100, write=True), mkrq(300), mkrq(0)]
    for rq in rqs:
        el.add(rq, 0.0)
    assert el.queued() == 4 and not el.empty()
    out = []
    while el.dispatch(0.0):
        assert len(dq) == 1          # one request per call
        out.append(dq.pop_head())
    assert out == rqs
    assert el.empty() and el.queued() == 0 and el.dispatch(0.0) == 0


def test_forced_drain_uses_sorted_insert():
    # Draining into a non-empty dispatch queue goes through elv_dispatch_sort:
    # ascending from the boundary (50), then the wrapped-around ones ascending.
    el, dq = make()
    dq.boundary = 50
    for s in (100, 20, 60, 10):
        el.add(mkrq(s), 0.0)
    n = 0
    while el.dispatch(0.0, force=True):
        n += 1
    assert n == 4 and el.empty()
    assert [rq.sector for rq in dq] == [60, 100, 10, 20]


def test_former_latter_are_fifo_neighbours():
    el, _ = make()
    a, b, c = mkrq(500), mkrq(8), mkrq(300)
    for rq in (a, b, c):
        el.add(rq, 0.0)
    assert el.former(a) is None and el.latter(a) is b
    assert el.former(b) is a and el.latter(b) is c
    assert el.former(c) is b and el.latter(c) is None


def test_requests_merged_drops_victim_and_keeps_survivor_place():
    el, dq = make()
    a, b, c = mkrq(0), mkrq(500), mkrq(8)
    for rq in (a, b, c):
        el.add(rq, 0.0)
    # the block layer coalesced c into a (FIFO neighbours are all noop offers;
    # here the caller merged non-neighbours directly, which noop must still handle)
    a.nr_sectors += c.nr_sectors
    el.requests_merged(a, c, 0.0)
    assert el.queued() == 2 and el.fifo_order() == [a, b]
    assert el.latter(b) is None
    while el.dispatch(0.0):
        pass
    assert list(dq) == [a, b]


def test_no_front_merge_lookup_and_no_tunables():
    el, _ = make()
    rq = mkrq(100)
    el.add(rq, 0.0)
    assert el.merge_candidate(Bio(1, 92, 8, False, True, pid=1), 0.0) is None
    assert el.params == {} and NoopElevator.tunables == ()
    assert NoopElevator.own_backmerge_hash is False
    with pytest.raises(ValueError, match=r"no tunables"):
        NoopElevator(DispatchQueue(), {"fifo_batch": 1})
