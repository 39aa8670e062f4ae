"""The 2.6.18 block layer: merging, plugging, request limits, dispatch (hand-traced cases)."""

import math

import pytest
import simpy

from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import Elevator, get_scheduler
from blksim.block.legacy_queue import QueueSettings, RequestQueue, SimulationError
from blksim.sim.clock import SimpyClock
from blksim.block.request import Bio


class RecordingDevice(ServiceLawDevice):
    """A fixed-service device that remembers what it was given and when."""

    def __init__(self, service=0.010, queue_depth=1):
        super().__init__("fixed", service, capacity=1 << 30, queue_depth=queue_depth)
        self.log = []

    def submit(self, rq, now):
        self.log.append((now, rq.sector, rq.nr_sectors, len(rq.bios)))
        super().submit(rq, now)


def make_queue(scheduler="noop", kernel="2.6.18", hz=250, service=0.010, queue_depth=1,
               **settings):
    env = simpy.Environment()
    clock = SimpyClock(env)
    device = RecordingDevice(service, queue_depth)
    done = []
    cls = get_scheduler(scheduler)
    generic = kernel != "2.6.18"
    q = RequestQueue(lambda dq: cls.create(dq, {}, hz=hz, kernel=kernel), device, clock,
                     QueueSettings(hz=hz, generic_backmerge_hash=generic, **settings))
    q.subscribe("block_bio_complete", lambda _q, bio, _now: done.append(bio))
    return env, q, device, done


_ids = iter(range(10**9))


def bio(sector, n=8, write=True, sync=None, pid=1):
    return Bio(next(_ids), sector, n, write, (not write) if sync is None else sync, pid,
               on_complete=lambda b: None)


def submit_at(env, q, t, b):
    env.process(_submit(env, q, t, b))


def _submit(env, q, t, b):
    yield env.timeout(t - env.now)
    q.submit_bio(b)


def test_sync_read_goes_to_the_device_at_once():
    env, q, dev, done = make_queue()
    b = bio(1000, write=False)
    submit_at(env, q, 0.0021, b)
    env.run()
    assert dev.log == [(0.0021, 1000, 8, 1)]
    assert b.t_dispatch == b.t_queue == 0.0021
    assert math.isclose(b.t_complete, 0.0121)


@pytest.mark.parametrize("hz, t, expected", [
    (250, 0.0005, 0.004),    # 3 ms rounds to 0 jiffies -> 1 jiffy, from the current tick
    (250, 0.0041, 0.008),
    (1000, 0.0005, 0.003),   # 3 jiffies at HZ=1000
    (100, 0.0123, 0.020),
])
def test_async_write_waits_for_the_unplug_timer(hz, t, expected):
    env, q, dev, done = make_queue(hz=hz)
    b = bio(5000)
    submit_at(env, q, t, b)
    env.run()
    assert math.isclose(b.t_dispatch, expected)
    assert math.isclose(b.t_queue, t)


def test_fourth_pending_request_unplugs():
    env, q, dev, done = make_queue()
    bios = [bio(s) for s in (0, 1000, 2000, 3000)]
    for b in bios:
        submit_at(env, q, 0.001, b)
    env.run()
    assert dev.log[0][0] == 0.001          # unplugged when the 4th request arrived
    assert [entry[1] for entry in dev.log] == [0, 1000, 2000, 3000]


def test_three_requests_wait_for_the_timer():
    env, q, dev, done = make_queue()
    for s in (0, 1000, 2000):
        submit_at(env, q, 0.001, bio(s))
    env.run()
    assert dev.log[0][0] == 0.004


def test_back_merge_through_last_merge():
    env, q, dev, done = make_queue()
    submit_at(env, q, 0.0, bio(0))
    submit_at(env, q, 0.0, bio(8))
    submit_at(env, q, 0.0, bio(16))
    env.run()
    assert dev.log == [(0.004, 0, 24, 3)]
    assert q.bio_merges == 2 and q.requests_allocated == 1
    assert len(done) == 3 and all(b.t_complete == done[0].t_complete for b in done)


def test_front_merge_through_last_merge():
    env, q, dev, done = make_queue()
    submit_at(env, q, 0.0, bio(8))
    submit_at(env, q, 0.0, bio(0))
    env.run()
    assert dev.log == [(0.004, 0, 16, 2)]


def test_last_merge_is_the_first_request_until_a_merge():
    # elv_insert (2.6.18) sets last_merge only when it is empty, so the bio at 8
    # still finds the request at 0 through the one-hit cache.
    env, q, dev, done = make_queue("noop")
    for s in (0, 100, 8):
        submit_at(env, q, 0.0, bio(s))
    env.run()
    assert q.requests_allocated == 2 and q.bio_merges == 1


@pytest.mark.parametrize("scheduler, kernel, requests", [
    ("noop", "2.6.18", 3),       # 2.6.18 noop: only the one-hit cache
    ("deadline", "2.6.18", 2),   # deadline keeps its own back-merge hash
    ("noop", "2.6.24", 2),       # from 2.6.19 the hash is generic
])
def test_back_merge_hash_depends_on_kernel_and_scheduler(scheduler, kernel, requests):
    env, q, dev, done = make_queue(scheduler, kernel)
    for s in (0, 100, 108):      # 108 follows 100, but last_merge is the request at 0
        submit_at(env, q, 0.0, bio(s))
    env.run()
    assert q.requests_allocated == requests
    assert len(done) == 3


def test_grown_request_coalesces_with_its_successor():
    env, q, dev, done = make_queue("deadline")
    for s in (0, 16, 8):         # 8 back-merges into 0, which then touches 16
        submit_at(env, q, 0.0, bio(s))
    env.run()
    assert q.requests_allocated == 2 and q.request_merges == 1
    assert dev.log == [(0.004, 0, 24, 3)]


def test_front_merge_coalesces_with_predecessor():
    env, q, dev, done = make_queue("deadline")
    for s in (0, 16, 200, 8):    # 8 front-merges into 16 (front_merges=1), then joins 0
        submit_at(env, q, 0.0, bio(s))
    env.run()
    sizes = sorted((entry[1], entry[2]) for entry in dev.log)
    assert sizes == [(0, 24), (200, 8)]


def test_max_sectors_kb_bounds_a_request():
    env, q, dev, done = make_queue(max_sectors_kb=8)       # 16 sectors
    for s in (0, 8, 16, 24):
        submit_at(env, q, 0.0, bio(s))
    env.run()
    assert [entry[2] for entry in dev.log] == [16, 16]


def test_nomerges_2_never_merges():
    env, q, dev, done = make_queue(nomerges=2)
    for s in (0, 8, 16):
        submit_at(env, q, 0.0, bio(s))
    env.run()
    assert q.bio_merges == 0 and len(dev.log) == 3


def test_direction_full_makes_submitters_wait_and_q_keeps_running():
    env, q, dev, done = make_queue(nr_requests=4, service=0.010)
    bios = [bio(s * 1000) for s in range(6)]
    for b in bios:
        submit_at(env, q, 0.0, b)
    env.run()
    assert len(done) == 6
    assert all(b.t_queue == 0.0 for b in bios)
    # The 5th bio got a request only after the first completion (t = 10 ms).
    assert bios[4].t_dispatch >= 0.010 - 1e-12
    assert q.count == [0, 0] and q.idle()


def test_reads_are_not_limited_by_writes_pool():
    env, q, dev, done = make_queue(nr_requests=4, service=0.010)
    for s in range(6):
        submit_at(env, q, 0.0, bio(s * 1000))
    r = bio(99999, write=False)
    submit_at(env, q, 0.0, r)
    env.run(until=0.001)
    assert q.count == [1, 4]                      # the read got a request at once
    assert len(q.waiting[1]) == 2 and not q.waiting[0]
    env.run()
    assert r.t_complete > 0


def test_device_queue_depth_respected():
    env, q, dev, done = make_queue(queue_depth=2, service=0.010)
    for s in range(5):
        submit_at(env, q, 0.0, bio(s * 1000, write=False))
    peak = []
    orig = dev.submit

    def watch(rq, now):
        orig(rq, now)
        peak.append(dev.outstanding())
    dev.submit = watch
    env.run()
    assert max(peak) == 2 and len(done) == 5


def test_bio_outside_the_device_is_an_error():
    env, q, dev, done = make_queue()
    with pytest.raises(SimulationError, match="outside the device"):
        q.submit_bio(bio((1 << 30) - 4))


class HoldingElevator(Elevator):
    """A toy FIFO elevator that dispatches nothing before `release` (an idling timer),
    and asks for a queue run when a request of pid 99 arrives (a kick)."""

    name = "holding"
    tunables = ()
    own_backmerge_hash = False
    uses_timers = True
    wants_device = False

    def __init__(self, dq, release):
        from collections import deque
        super().__init__(dq)
        self.fifo = deque()
        self.release = release
        self.released = False
        self.wakeup_at = release
        self.kick_queue = False
        self.fired = []

    def add(self, rq, now):
        self.fifo.append(rq)
        if rq.pid == 99:
            self.released = True
            self.wakeup_at = None
            self.kick_queue = True

    def dispatch(self, now, force=False):
        if not self.fifo or not (self.released or force):
            return 0
        self.dq.add_tail(self.fifo.popleft())
        return 1

    def timer_fired(self, now):
        self.fired.append(now)
        self.released = True

    def merge_candidate(self, bio, now):
        return None

    def former(self, rq):
        return None

    def latter(self, rq):
        return None

    def activate(self, rq, now):
        pass

    def completed(self, rq, now):
        pass

    def empty(self):
        return not self.fifo


def _holding_queue(release):
    env = simpy.Environment()
    clock = SimpyClock(env)
    device = RecordingDevice(0.001)
    done = []
    q = RequestQueue(lambda dq: HoldingElevator(dq, release), device, clock, QueueSettings())
    q.subscribe("block_bio_complete", lambda _q, bio, _now: done.append(bio))
    return env, q, device, done


def test_elevator_timer_runs_the_queue_when_it_fires():
    env, q, dev, done = _holding_queue(release=0.050)
    submit_at(env, q, 0.0, bio(0, write=False))
    env.run()
    assert q.elevator.fired == [0.050]
    assert dev.log[0][0] == 0.050 and len(done) == 1


def test_elevator_kick_runs_the_queue_at_once():
    env, q, dev, done = _holding_queue(release=10.0)
    submit_at(env, q, 0.0, bio(0, write=False))
    submit_at(env, q, 0.002, bio(5000, write=False, pid=99))
    env.run()
    assert dev.log[0][0] == 0.002           # not 10 s: the kick ran the queue
    assert q.elevator.fired == [] and len(done) == 2
