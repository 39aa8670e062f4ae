"""A fake device loop that drives BFQ's hooks directly (no block layer): processes
submit requests, a one-server device completes them in order, the elevator's idle
timer fires when due. Other bfq tests import `Loop` and `Proc` from here; the tests in
this file check the loop itself and the basic hook contract.
"""

from __future__ import annotations

import heapq
import itertools

from blksim.block.mq.elevator import MqHctx, MqQueueInfo
from blksim.block.request import Bio, MqRequest, ioprio_value
from blksim.schedulers.bfq import BfqElevator


class Proc:
    """A process: ``count`` requests of ``size`` sectors from ``start``, sequential
    (each after the previous) or at the sectors ``pattern`` gives, with ``think`` seconds
    between a completion and the next submission, ``depth`` requests outstanding."""

    def __init__(self, pid, start=0, size=256, count=10**9, think=0.0, sync=True,
                 write=False, ioprio=None, depth=1, pattern=None, begin=0.0):
        self.pid = pid
        self.next_sector = start
        self.size = size
        self.left = count
        self.think = think
        self.sync = sync
        self.write = write
        self.ioprio = ioprio if ioprio is not None else ioprio_value(2, 4)
        self.depth = depth
        self.pattern = pattern
        self.begin = begin
        self.done_sectors = 0
        self.done = 0
        self.issued = 0
        self.latencies = []

    def sector(self):
        if self.pattern is not None:
            return next(self.pattern)
        s = self.next_sector
        self.next_sector += self.size
        return s


class Loop:
    """The device: one server, ``depth`` requests at most in the driver, service time
    ``seek`` (when a request does not start where the previous ended) plus
    ``per_sector`` per sector."""

    def __init__(self, el=None, depth=1, seek=0.008, per_sector=0.00001, rotational=True,
                 kernel="6.6", params=None, hz=250, nr_requests=64, requeue_every=0,
                 exit_when_done=False):
        info = MqQueueInfo(nr_requests=nr_requests, nr_hw_queues=1, queue_depth=depth,
                           rotational=rotational, kernel=kernel, hz=hz)
        self.el = el or BfqElevator.create(info, params or {})
        self.hctx = MqHctx(0)
        self.el.init_hctx(self.hctx)
        self.depth = depth
        self.seek = seek
        self.per_sector = per_sector
        self.now = 0.0
        self.events = []
        self.seq = itertools.count()
        self.ids = itertools.count(1)
        self.in_driver = []          # requests at the device, FIFO
        self.busy_until = None
        self.head = 0
        self.procs = {}
        self.dispatched = []         # (time, rq) in dispatch order
        self.inserted = []
        self.completed = []
        self.timer_at = None
        self.timer_events = 0
        self.requeue_every = requeue_every
        self.requeues = 0
        self.exit_when_done = exit_when_done

    def push(self, t, kind, obj=None):
        heapq.heappush(self.events, (t, next(self.seq), kind, obj))

    def add(self, proc):
        self.procs[proc.pid] = proc
        for _ in range(proc.depth):
            self.push(proc.begin, "submit", proc)

    def submit(self, proc):
        if proc.left <= 0:
            return
        proc.left -= 1
        proc.issued += 1
        n = next(self.ids)
        bio = Bio(n, proc.sector(), proc.size, proc.write, proc.sync, proc.pid, proc.ioprio)
        bio.t_queue = self.now
        rq = MqRequest(n, bio, self.now, hctx=self.hctx)
        self.inserted.append(rq)
        self.el.insert_requests([rq], False, self.now)

    def run_queue(self):
        el = self.el
        while len(self.in_driver) < self.depth and el.has_work(self.hctx):
            rq = el.dispatch_request(self.hctx, self.now)
            if rq is None:
                break
            self.dispatched.append((self.now, rq))
            if self.requeue_every and len(self.dispatched) % self.requeue_every == 0:
                # the driver gives it back (BLK_STS_RESOURCE): requeued at the head
                self.requeues += 1
                el.requeue_request(rq, self.now)
                el.insert_requests([rq], True, self.now)
                continue
            self.in_driver.append(rq)
            if self.busy_until is None:
                self.start_next()

    def start_next(self):
        rq = self.in_driver[0]
        t = self.per_sector * rq.nr_sectors
        if rq.sector != self.head:
            t += self.seek
        self.head = rq.end
        self.busy_until = self.now + t
        self.push(self.busy_until, "complete", rq)

    def complete(self, rq):
        self.in_driver.pop(0)
        self.completed.append(rq)
        self.busy_until = None
        self.el.finish_request(rq, self.now)
        proc = self.procs[rq.pid]
        proc.done += 1
        proc.done_sectors += rq.nr_sectors
        proc.latencies.append(self.now - rq.t_insert)
        if proc.left > 0:
            self.push(self.now + proc.think, "submit", proc)
        elif self.exit_when_done and proc.done == proc.issued:
            self.el.process_exited(proc.pid, self.now)
        if self.in_driver:
            self.start_next()

    def sync_timer(self):
        el = self.el
        if el.timers_changed:
            el.timers_changed = False
            if el.wakeup_at != self.timer_at:
                self.timer_at = el.wakeup_at
                if el.wakeup_at is not None:
                    self.push(el.wakeup_at, "timer", el.wakeup_at)
            if el.kick_queue:
                el.kick_queue = False

    def run(self, until):
        while self.events and self.events[0][0] <= until:
            t, _, kind, obj = heapq.heappop(self.events)
            self.now = t
            if kind == "submit":
                self.submit(obj)
            elif kind == "complete":
                self.complete(obj)
            elif kind == "timer":
                if obj != self.timer_at or self.el.wakeup_at != obj:
                    continue                     # cancelled or moved
                self.timer_at = None
                self.timer_events += 1
                self.el.timer_fired(self.now)
            self.sync_timer()
            self.run_queue()
            self.sync_timer()
        self.now = until


def test_two_sequential_readers_complete_and_nothing_is_lost():
    loop = Loop()
    loop.add(Proc(1, start=0, count=200))
    loop.add(Proc(2, start=10_000_000, count=200))
    loop.run(60.0)
    assert loop.procs[1].done == 200 and loop.procs[2].done == 200
    ids = [rq.id for _, rq in loop.dispatched]
    assert sorted(ids) == sorted(rq.id for rq in loop.inserted)
    assert len(ids) == len(set(ids))
    assert loop.el.empty() and loop.el.queued() == 0
    assert loop.el.tot_rq_in_driver == 0
