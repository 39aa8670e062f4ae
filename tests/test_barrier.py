"""Barriers, cache flushes and FUA writes (block/flush.py), hand-traced on the 2.6.18 queue
and on the device models; the multi-queue flush policy against blk_flush_policy's table."""

import platform

import pytest
import simpy

from blksim.block.flush import (QUEUE_ORDERED_DRAIN, QUEUE_ORDERED_DRAIN_FLUSH,
                                QUEUE_ORDERED_DRAIN_FUA, REQ_FSEQ_DATA, REQ_FSEQ_POSTFLUSH,
                                REQ_FSEQ_PREFLUSH, data_fua, flush_policy, flush_sequence,
                                ordered_steps, sd_ordered_mode)
from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.block.request import REQ_OP_FLUSH, Bio
from blksim.disk_models.base import Device
from blksim.disk_models.drive import make_drive
from blksim.disk_models.presets import load_preset
from blksim.schedulers import get_scheduler
from blksim.sim.clock import SimpyClock

MS = 1e-3


class CacheDevice(Device):
    """A one-server FCFS device whose time depends on the operation: a write 1 ms (into
    its cache), a FUA write 8 ms (to the media), a flush 5 ms. It logs what it was given."""

    def __init__(self, volatile=True, fua=False, queue_depth=1):
        self.volatile_write_cache = volatile
        self.fua = fua
        self.queue_depth = queue_depth
        self.capacity = 1 << 30
        self.log = []            # (issued at, op name, sector, fua)
        self._q = []             # (done at, rq)
        self._free = 0.0

    def can_accept(self):
        return len(self._q) < self.queue_depth

    def outstanding(self):
        return len(self._q)

    def submit(self, rq, now):
        if rq.op == REQ_OP_FLUSH:
            name, t = "flush", 5 * MS
        else:
            name, t = ("write" if rq.write else "read"), (8 * MS if rq.fua else 1 * MS)
        self.log.append((round(now / MS, 6), name, rq.sector, rq.fua))
        start = max(now, self._free)
        self._free = start + t
        self._q.append((self._free, rq))

    def next_event_time(self):
        return self._q[0][0] if self._q else None

    def pop_completed(self, now):
        out = []
        while self._q and self._q[0][0] <= now + 1e-12:
            out.append(self._q.pop(0)[1])
        return out


_ids = iter(range(10**9))


def make_queue(device, scheduler="noop"):
    env = simpy.Environment()
    clock = SimpyClock(env)
    cls = get_scheduler(scheduler)
    q = RequestQueue(lambda dq: cls.create(dq, {}, hz=250, kernel="2.6.18"), device, clock,
                     QueueSettings(hz=250))
    return env, q


def write(sector, done, barrier=False, sync=False):
    b = Bio(next(_ids), sector, 8, True, sync, 1,
            on_complete=lambda b: done.append((b.sector, round(b.t_complete / MS, 6))))
    b.preflush = b.fua = barrier
    return b


def at(env, t, fn):
    def proc():
        yield env.timeout(t)
        fn()
    env.process(proc())


def run_trace(device, scheduler="noop"):
    """Two async writes at 0, a barrier at 0, a write after it at 0.5 ms."""
    env, q = make_queue(device, scheduler)
    done = []
    at(env, 0.0, lambda: q.submit_bio(write(1000, done)))
    at(env, 0.0, lambda: q.submit_bio(write(5000, done)))
    at(env, 0.0, lambda: q.submit_bio(write(9000, done, barrier=True)))
    at(env, 0.5 * MS, lambda: q.submit_bio(write(2000, done, sync=True)))
    env.run()
    return q, done


# ---------------------------------------------------------------- 2.6.18: sd's modes
def test_sd_ordered_mode_follows_wce_and_dpofua():
    assert sd_ordered_mode(CacheDevice(volatile=False)) == QUEUE_ORDERED_DRAIN
    assert sd_ordered_mode(CacheDevice(volatile=True, fua=False)) == QUEUE_ORDERED_DRAIN_FLUSH
    assert sd_ordered_mode(CacheDevice(volatile=True, fua=True)) == QUEUE_ORDERED_DRAIN_FUA
    # FUA without a volatile cache means nothing: still a plain drain
    assert sd_ordered_mode(CacheDevice(volatile=False, fua=True)) == QUEUE_ORDERED_DRAIN
    assert ordered_steps(QUEUE_ORDERED_DRAIN) == ("barrier",)
    assert ordered_steps(QUEUE_ORDERED_DRAIN_FLUSH) == ("preflush", "barrier", "postflush")
    assert ordered_steps(QUEUE_ORDERED_DRAIN_FUA) == ("preflush", "barrier_fua")


def test_drain_flush_hand_traced():
    """Noop, depth 1. 1000 at 0-1 ms, 5000 at 1-2 (drained before the barrier); the
    barrier: pre-flush 2-7, its write 7-8, post-flush 8-13, its bio done at 13; the write
    queued after it at 0.5 ms waits for the whole sequence: 13-14."""
    dev = CacheDevice(volatile=True, fua=False)
    q, done = run_trace(dev)
    assert dev.log == [(0.0, "write", 1000, False), (1.0, "write", 5000, False),
                       (2.0, "flush", 9000, False), (7.0, "write", 9000, False),
                       (8.0, "flush", 9000, False), (13.0, "write", 2000, False)]
    assert done == [(1000, 1.0), (5000, 2.0), (9000, 13.0), (2000, 14.0)]
    assert q.ordered.flushes == 2 and q.ordered.barriers == 1
    assert q.ordered.flush_time == pytest.approx(10 * MS)
    assert q.idle() and q.count == [0, 0] and not q.dq


def test_drain_fua_hand_traced():
    """With FUA: pre-flush 2-7, the barrier written with FUA 7-15 (8 ms), no post-flush."""
    dev = CacheDevice(volatile=True, fua=True)
    q, done = run_trace(dev)
    assert dev.log[2:] == [(2.0, "flush", 9000, False), (7.0, "write", 9000, True),
                           (15.0, "write", 2000, False)]
    assert done == [(1000, 1.0), (5000, 2.0), (9000, 15.0), (2000, 16.0)]
    assert q.ordered.flushes == 1


def test_drain_only_without_a_volatile_cache():
    """Write cache off (or a battery-backed controller): no flush is sent, the barrier is
    a plain write after the drain, and the write after it follows at once."""
    dev = CacheDevice(volatile=False)
    q, done = run_trace(dev)
    assert [op for _t, op, _s, _f in dev.log] == ["write"] * 4
    assert done == [(1000, 1.0), (5000, 2.0), (9000, 3.0), (2000, 4.0)]
    assert q.ordered.flushes == 0 and q.ordered.barriers == 1


def test_barrier_waits_for_the_device_to_drain():
    """Depth 4: both writes go to the device at 0 (served 0-1, 1-2); the pre-flush waits
    until both completed (2 ms), though the device had room."""
    dev = CacheDevice(volatile=True, fua=False, queue_depth=4)
    _q, done = run_trace(dev)
    assert dev.log[2] == (2.0, "flush", 9000, False)
    assert done[2] == (9000, 13.0)


@pytest.mark.parametrize("scheduler", ["deadline", "anticipatory", "cfq"])
def test_every_elevator_passes_a_barrier(scheduler):
    """The barrier is a scheduling boundary for every elevator: the write queued after it
    is served after it, and no elevator hook sees a flush request."""
    dev = CacheDevice(volatile=True, fua=False)
    q, done = run_trace(dev, scheduler)
    assert [s for s, _t in done].index(9000) < [s for s, _t in done].index(2000)
    assert [op for _t, op, _s, _f in dev.log].count("flush") == 2
    assert q.idle()


def test_two_barriers_in_a_row():
    """A second barrier queued during the first one's sequence runs its own after it."""
    dev = CacheDevice(volatile=True, fua=False)
    env, q = make_queue(dev)
    done = []
    at(env, 0.0, lambda: q.submit_bio(write(100, done, barrier=True)))
    at(env, 1 * MS, lambda: q.submit_bio(write(200, done, barrier=True)))
    env.run()
    # first: flush 0-5, write 5-6, flush 6-11; second: flush 11-16, write 16-17, flush 17-22
    assert done == [(100, 11.0), (200, 22.0)]
    assert q.ordered.flushes == 4 and q.idle()


def test_no_barrier_no_change():
    """Without a barrier nothing of the machinery runs (the run is as before)."""
    dev = CacheDevice(volatile=True, fua=False)
    env, q = make_queue(dev)
    done = []
    at(env, 0.0, lambda: q.submit_bio(write(1000, done, sync=True)))
    env.run()
    assert done == [(1000, 1.0)] and q.ordered.flushes == 0 and q.ordered.barriers == 0


# ---------------------------------------------------------------- blk-mq policy
@pytest.mark.parametrize("volatile,fua_dev,data,pre,fua,expected", [
    # no volatile cache: only the data remain, whatever the flags
    (False, False, True, True, True, ("data",)),
    (False, True, False, True, False, ()),
    # volatile cache with FUA: pre-flush then the data (FUA kept on the write)
    (True, True, True, True, True, ("preflush", "data")),
    # volatile cache without FUA: FUA emulated by a post-flush
    (True, False, True, True, True, ("preflush", "data", "postflush")),
    (True, False, True, False, True, ("data", "postflush")),
    # an empty flush (blkdev_issue_flush)
    (True, False, False, True, False, ("preflush",)),
    (True, True, True, False, False, ("data",)),
])
def test_blk_flush_policy(volatile, fua_dev, data, pre, fua, expected):
    policy = flush_policy(volatile, fua_dev, data, pre, fua)
    assert flush_sequence(policy) == expected
    assert bool(policy & REQ_FSEQ_DATA) == data
    assert bool(policy & REQ_FSEQ_PREFLUSH) == (volatile and pre)
    assert bool(policy & REQ_FSEQ_POSTFLUSH) == (volatile and fua and not fua_dev)
    assert data_fua(volatile, fua_dev, fua) == (volatile and fua_dev and fua)


# ---------------------------------------------------------------- the drive answers
class _Rq:
    def __init__(self, sector, n, write, op=None, fua=False):
        self.sector, self.nr_sectors, self.write = sector, n, write
        self.op = op if op is not None else int(write)
        self.fua = fua
        self.breakdown = None


def _serve(drive, rq, now):
    drive.submit(rq, now)
    t = drive.next_event_time()
    assert drive.pop_completed(t) == [rq]
    return t


def _fast_drive():
    d = make_drive(load_preset("cheetah9LP"))        # fast_write_level 2
    assert d.volatile_write_cache and d.fua
    return d


def test_drive_flush_waits_for_the_destage():
    """A write-back write completes from the buffer; a flush after it completes once the
    destage is on the media (the cache's destage end) plus the completion overhead."""
    d = _fast_drive()
    t_w = _serve(d, _Rq(100_000, 64, True), 0.0)
    destage = d._cache.destage_end()
    assert destage > t_w                             # the data were not on the media yet
    t_f = _serve(d, _Rq(0, 0, True, op=REQ_OP_FLUSH), t_w)
    assert t_f == pytest.approx(destage + d._ovh.write_complete)
    # a flush with nothing dirty costs only its command and completion
    t_f2 = _serve(d, _Rq(0, 0, True, op=REQ_OP_FLUSH), t_f + 0.1)
    assert t_f2 == pytest.approx(t_f + 0.1 + d._ccmd[4 | 2 | 1] + d._ovh.write_complete)


def test_drive_fua_write_is_written_through():
    """The same write with FUA completes after its data are on the media: no earlier than
    the destage end the plain write left behind on an identical drive."""
    plain, fua = _fast_drive(), _fast_drive()
    t_plain = _serve(plain, _Rq(100_000, 64, True), 0.0)
    t_fua = _serve(fua, _Rq(100_000, 64, True, fua=True), 0.0)
    assert t_plain < plain._cache.destage_end() <= t_fua


def test_write_through_drive_and_raid_have_no_volatile_cache():
    from blksim.disk_models.raid import RaidController
    d = make_drive(load_preset("hp_c2247a"))          # fast_write_level 0
    assert not d.volatile_write_cache
    assert sd_ordered_mode(d) == QUEUE_ORDERED_DRAIN
    assert RaidController.volatile_write_cache is False


# ---------------------------------------------------------------- blktrace
def test_blktrace_marks_flushes_and_fua(tmp_path):
    """The D events of a DRAIN_FUA barrier: a flush (BLK_TC_FLUSH) then the barrier write
    with BLK_TC_FUA; the other writes carry neither."""
    from blksim.traces.blktrace import TA_ISSUE, TC_FLUSH, TC_FUA, TC_SHIFT, iter_events
    from blksim.traces.blktrace_out import BlktraceRecorder
    dev = CacheDevice(volatile=True, fua=True)
    env, q = make_queue(dev)
    rec = BlktraceRecorder(str(tmp_path), lambda pid: f"p{pid}")
    rec.install(q)
    done = []
    at(env, 0.0, lambda: q.submit_bio(write(1000, done)))
    at(env, 0.0, lambda: q.submit_bio(write(9000, done, barrier=True)))
    env.run()
    rec.close()
    issues = [(e.sector, bool(e.action >> TC_SHIFT & TC_FLUSH), bool(e.action >> TC_SHIFT & TC_FUA))
              for e in iter_events(rec.path) if e.action & 0xFFFF == TA_ISSUE]
    assert issues == [(1000, False, False), (9000, True, False), (9000, False, True)]


# ---------------------------------------------------------------- properties
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(ios=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 63), st.booleans(),
                              st.booleans()), min_size=1, max_size=25),
       scheduler=st.sampled_from(["noop", "deadline", "anticipatory", "cfq"]),
       volatile=st.booleans(), fua=st.booleans(), depth=st.sampled_from([1, 4]),
       switch_at=st.one_of(st.none(), st.integers(0, 40)))
def test_barriers_order_and_account_everything(ios, scheduler, volatile, fua, depth,
                                               switch_at):
    """Any writes and barriers, any elevator (switched or not), any device: every bio
    completes once; every request issued after a barrier's first step was queued after
    the barrier (nothing passes it), the barrier's steps run alone and in order, the flush
    count is what the mode asks for, and the queue ends empty."""
    dev = CacheDevice(volatile=volatile, fua=fua, queue_depth=depth)
    env, q = make_queue(dev, scheduler)
    done, issued = [], []
    bios = []
    q.subscribe("block_rq_issue", lambda _q, rq, now: issued.append((now, rq)))
    for t, sector, barrier, sync in ios:
        b = write(1000 * (sector + 1), done, barrier=barrier, sync=sync)
        bios.append(b)
        at(env, t * 0.25 * MS, lambda b=b: q.submit_bio(b))
    if switch_at is not None:
        other = get_scheduler("deadline" if scheduler != "deadline" else "noop")
        at(env, switch_at * 0.25 * MS, lambda: q.switch_elevator(
            lambda dq: other.create(dq, {}, hz=250, kernel="2.6.18"), other.name))
    env.run()
    assert len(done) == len(bios) and all(b.t_complete >= b.t_queue for b in bios)
    assert q.idle() and q.count == [0, 0] and not q.dq and q.ordered.allocated == 0
    nbar = sum(1 for b in bios if b.preflush)
    assert q.ordered.barriers == nbar
    steps = {QUEUE_ORDERED_DRAIN: 0, QUEUE_ORDERED_DRAIN_FUA: 1, QUEUE_ORDERED_DRAIN_FLUSH: 2}
    assert q.ordered.flushes == nbar * steps[sd_ordered_mode(dev)]
    for b in bios:
        if not b.preflush:
            continue
        # the barrier's data reached the device after everything queued before it was done,
        # and nothing queued after it was issued before it completed
        t_bar = b.t_dispatch
        for other in bios:
            if other is b or other.preflush:
                continue
            if other.t_queue < b.t_queue:
                assert other.t_complete <= t_bar + 1e-12
            elif other.t_queue > b.t_queue:
                assert other.t_dispatch >= b.t_complete - 1e-12


@pytest.mark.skipif(platform.python_implementation() != "CPython",
                    reason="frees at once by reference counting, which only CPython has")
def test_a_finished_barrier_leaves_no_reference_cycle():
    """The queue and a completed barrier's requests are freed without the cycle collector."""
    import gc
    import weakref
    gc.disable()
    try:
        dev = CacheDevice(volatile=True, fua=False)
        env, q = make_queue(dev)
        done = []
        b = write(9000, done, barrier=True)
        at(env, 0.0, lambda: q.submit_bio(b))
        env.run()
        assert done == [(9000, 11.0)]
        q_ref = weakref.ref(q)
        del q, env
        assert q_ref() is None
    finally:
        gc.enable()
