"""Property tests: random add / dispatch / merge sequences never lose or duplicate a request.

A small driver plays the block layer's part (back merges with `latter`
coalescing, front merges with `former` coalescing, a device that takes what was
dispatched) against noop and every deadline variant; after every step the
elevator's contents, the dispatch queue and the completed requests must
partition the live requests exactly, and a forced drain must empty it.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.schedulers.deadline import DeadlineElevator
from blksim.schedulers.noop import NoopElevator
from blksim.block.dispatch_queue import DispatchQueue
from blksim.block.request import Bio, Request

FACTORIES = {
    "noop": lambda dq: NoopElevator(dq),
    "deadline-2.6.18": lambda dq: DeadlineElevator(
        dq, {"read_expire": 10, "write_expire": 30, "fifo_batch": 3}),
    "deadline-2.6.18-nofront-batch1": lambda dq: DeadlineElevator(
        dq, {"read_expire": 10, "front_merges": 0, "fifo_batch": 1, "writes_starved": 0}),
    "deadline-2.6.24": lambda dq: DeadlineElevator(
        dq, {"read_expire": 10, "write_expire": 30, "fifo_batch": 2}, variant="2.6.24"),
    "deadline-2.6.32": lambda dq: DeadlineElevator(
        dq, {"read_expire": 10, "write_expire": 30, "fifo_batch": 2}, variant="2.6.32",
        hz=1000),
}

OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 15), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("dispatch"), st.booleans()),
    st.tuples(st.just("back"), st.integers(0, 999), st.integers(1, 2)),
    st.tuples(st.just("front"), st.integers(0, 999), st.integers(1, 2)),
    st.tuples(st.just("tick"), st.integers(0, 20)),
), max_size=80)


def contents(el) -> list:
    if isinstance(el, NoopElevator):
        return el.fifo_order()
    return el.fifo_order(False) + el.fifo_order(True)


def check_deadline(el) -> None:
    nonempty_next = [r for r in el.next_rq if r is not None]
    assert len(nonempty_next) <= 1
    for write in (False, True):
        tree = el.sort_order(write)
        fifo = el.fifo_order(write)
        assert len(tree) == len(fifo) and set(tree) == set(fifo)
        assert all(rq.write == write for rq in tree)
        sectors = [rq.sector for rq in tree]
        assert sectors == sorted(set(sectors))  # ascending, no two with one start
        times = [rq.fifo_time for rq in fifo]
        assert times == sorted(times)
        nxt = el.next_rq[1 if write else 0]
        assert nxt is None or nxt in tree


class Driver:
    def __init__(self, factory) -> None:
        self.dq = DispatchQueue()
        self.el = factory(self.dq)
        self.now = 0.0
        self.ids = itertools.count()
        self.live: set = set()
        self.done: list = []

    def check(self) -> None:
        el = self.el
        inside = contents(el)
        in_dq = list(self.dq)
        assert len(set(inside)) == len(inside) == el.queued()
        assert el.empty() == (el.queued() == 0)
        everywhere = inside + in_dq + self.done
        assert len(everywhere) == len(set(everywhere)) == len(self.live)
        assert set(everywhere) == self.live
        if isinstance(el, DeadlineElevator):
            check_deadline(el)

    def step(self, op) -> None:
        kind = op[0]
        el = self.el
        if kind == "add":
            _, slot, size, write = op
            i = next(self.ids)
            rq = Request(i, Bio(i, slot * 8, size * 4, write, not write, pid=1), self.now)
            el.add(rq, self.now)
            self.live.add(rq)
        elif kind == "tick":
            self.now += op[1] / 1000
        elif kind == "dispatch":
            was_empty = el.empty()
            got = el.dispatch(self.now)
            assert got == (0 if was_empty else 1)
            if op[1]:
                while self.dq:
                    self.done.append(self.dq.pop_head())
        else:
            inside = contents(el)
            if not inside:
                return
            rq = inside[op[1] % len(inside)]
            size = op[2] * 4
            if kind == "back":
                rq.nr_sectors += size
                el.merged(rq, False, self.now)
                nxt = el.latter(rq)
                # the block layer coalesces only requests of the same direction
                # (noop's FIFO neighbours may be of the other one)
                if (nxt is not None and nxt.sector == rq.sector + rq.nr_sectors
                        and nxt.write == rq.write):
                    rq.nr_sectors += nxt.nr_sectors
                    el.requests_merged(rq, nxt, self.now)
                    self.live.discard(nxt)
            else:
                if rq.sector < size:
                    return
                bio = Bio(next(self.ids), rq.sector - size, size, rq.write, False, pid=1)
                cand = el.merge_candidate(bio, self.now)
                if isinstance(el, DeadlineElevator) and el.params["front_merges"]:
                    assert cand is rq
                else:
                    assert cand is None
                # merge anyway, as a last_merge hint hit would
                rq.sector -= size
                rq.nr_sectors += size
                el.merged(rq, True, self.now)
                prev = el.former(rq)
                if (prev is not None and prev.sector + prev.nr_sectors == rq.sector
                        and prev.write == rq.write):
                    prev.nr_sectors += rq.nr_sectors
                    el.requests_merged(prev, rq, self.now)
                    self.live.discard(rq)


@pytest.mark.parametrize("name", list(FACTORIES))
@settings(max_examples=150, deadline=None)
@given(ops=OPS)
def test_random_sequences_conserve_requests(name, ops):
    drv = Driver(FACTORIES[name])
    for op in ops:
        drv.step(op)
        drv.check()
    el = drv.el
    moved = 0
    while el.dispatch(drv.now, force=True):
        moved += 1
        assert moved <= len(drv.live)
    assert el.empty() and el.queued() == 0
    drv.done.extend(drv.dq)
    drv.dq = DispatchQueue()
    drv.check()
