"""Cache flushes and FUA on the multi-queue layer (block/mq/flush.py): hand-traced sequences
on a fixed-service device with a volatile cache, flush coalescing, a flush waiting for a
driver tag, the empty flush bio on both queues, and a property over every scheduler: each
bio completes once, a preflush bio after a flush that began after it was queued, a FUA
bio's data on the media when it completes."""

import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.block.flush import empty_flush_bio
from blksim.block.mq.queue import MqQueue, MqSettings
from blksim.block.request import REQ_OP_FLUSH, Bio
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import MQ_SCHEDULERS, NoneScheduler
from blksim.sim.clock import SimpyClock

MS = 1e-3
_ids = iter(range(10**9))


class CacheDevice(ServiceLawDevice):
    """A one-server device, 1 ms per request of any kind, with a volatile write cache (or
    not) and FUA (or not). It logs what it was given and knows what is on the media: a
    write is in the cache when it completes, on the media once written with FUA, or once
    a flush issued after its completion completes (or at once without a volatile cache)."""

    def __init__(self, volatile=True, fua=False, queue_depth=4):
        super().__init__("fixed", 1 * MS, capacity=1 << 30, queue_depth=queue_depth)
        self.volatile_write_cache = volatile
        self.fua = fua
        self.log = []             # (issued at ms, "flush" | "W" | "R", sector, fua)
        self.issued = {}          # id(rq) -> issue time (s)
        self.cached = []          # (completed at, bio ids) of writes not yet on the media
        self.media = set()        # bio ids on the media
        self.flushes = []         # (issued at, completed at) of every flush (s)

    def submit(self, rq, now):
        name = "flush" if rq.op == REQ_OP_FLUSH else ("W" if rq.write else "R")
        self.log.append((round(now / MS, 6), name, rq.sector, rq.fua))
        self.issued[id(rq)] = now
        super().submit(rq, now)

    def pop_completed(self, now):
        done = super().pop_completed(now)
        for rq in done:
            if rq.op == REQ_OP_FLUSH:
                start = self.issued[id(rq)]
                self.flushes.append((start, now))
                keep = []
                for t, ids in self.cached:
                    if t <= start:
                        self.media.update(ids)
                    else:
                        keep.append((t, ids))
                self.cached = keep
            elif rq.write:
                ids = [b.id for b in rq.bios]
                if rq.fua or not self.volatile_write_cache:
                    self.media.update(ids)
                else:
                    self.cached.append((now, ids))
        return done


def factory_of(scheduler):
    cls = MQ_SCHEDULERS[scheduler]
    return None if cls is NoneScheduler else (lambda info: cls.create(info, {}))


def make(scheduler="none", kernel="6.6", nr_hw_queues=1, **dev):
    env = simpy.Environment()
    device = CacheDevice(**dev)
    device.nr_hw_queues = nr_hw_queues
    device._limit = device.queue_depth * nr_hw_queues
    q = MqQueue(factory_of(scheduler), device, SimpyClock(env),
                MqSettings(kernel=kernel, nr_hw_queues=nr_hw_queues, nr_cpus=nr_hw_queues),
                elevator_name=scheduler)
    return env, q, device


def write(sector, done, preflush=False, fua=False, pid=1, n=8):
    b = Bio(next(_ids), sector, n, True, True, pid,
            on_complete=lambda b: done.append((b.sector, round(b.t_complete / MS, 6))))
    b.preflush = preflush
    b.fua = fua
    return b


def at(env, t, fn):
    def proc():
        yield env.timeout(t)
        fn()
    env.process(proc())


# ---------------------------------------------------------------- hand-traced
@pytest.mark.parametrize("kernel", ["5.4", "6.6"])
@pytest.mark.parametrize("scheduler", ["none", "mq-deadline"])
def test_fua_emulated_preflush_data_postflush(kernel, scheduler):
    """Volatile cache, no FUA: PREFLUSH (0-1 ms), the data without FUA (1-2 ms), POSTFLUSH
    (2-3 ms); the bio ends with the post-flush; two flushes in diskstats from 5.5 on."""
    env, q, dev = make(scheduler, kernel)
    done = []
    q.submit_bio(write(100, done, preflush=True, fua=True), 0.0)
    env.run()
    assert dev.log == [(0.0, "flush", 0, False), (1.0, "W", 100, False),
                       (2.0, "flush", 0, False)]
    assert done == [(100, 3.0)]
    assert q.flush.flushes == 2
    ios = q.stats.ios
    assert ios[1] == 1 and ios[3] == (0 if kernel == "5.4" else 2)
    assert q.count == 0 and q.queued == 0 and q.flush.live == 0


@pytest.mark.parametrize("kernel", ["5.4", "6.6"])
def test_fua_native_data_with_fua_only(kernel):
    """Volatile cache with FUA: a FUA write is the data with FUA, no flush; with a
    preflush too, PREFLUSH then the data with FUA."""
    env, q, dev = make("none", kernel, fua=True)
    done = []
    q.submit_bio(write(100, done, fua=True), 0.0)
    at(env, 5 * MS, lambda: q.submit_bio(write(200, done, preflush=True, fua=True)))
    env.run()
    assert dev.log == [(0.0, "W", 100, True), (5.0, "flush", 0, False), (6.0, "W", 200, True)]
    assert done == [(100, 1.0), (200, 7.0)]


def test_no_volatile_cache_no_flush():
    """Without a volatile cache the flags are cleared (submit_bio_noacct): the data alone,
    and an empty flush ends at once with no request."""
    env, q, dev = make("none", volatile=False)
    done = []
    q.submit_bio(write(100, done, preflush=True, fua=True), 0.0)
    q.submit_bio(empty_flush_bio(next(_ids), 1, lambda b: done.append(("flush", b.t_complete))),
                 0.0)
    env.run()
    assert dev.log == [(0.0, "W", 100, False)]
    assert done == [("flush", 0.0), (100, 1.0)]
    assert q.flush.flushes == 0 and q.requests_allocated == 1


def test_preflush_and_fua_bios_are_never_merged():
    """REQ_NOMERGE_FLAGS: a write contiguous with a FUA write stays a request of its own."""
    env, q, dev = make("mq-deadline", fua=True)
    done = []
    q.start_plug(1, 0.0)
    q.submit_bio(write(100, done, fua=True), 0.0)
    q.submit_bio(write(108, done), 0.0)
    q.submit_bio(write(116, done, fua=True), 0.0)
    q.finish_plug(1, 0.0)
    env.run()
    assert sorted(e[2] for e in dev.log) == [100, 108, 116]
    assert q.request_merges == 0 and q.stats.merges[1] == 0


def test_two_fsyncs_flushes_are_served_by_one_flush_request():
    """Flush coalescing: an empty flush at 0 runs (0-1 ms); two more queued while it
    runs both wait for the next flush, which is one request (1-2 ms); the device sees two
    flushes and diskstats counts two."""
    env, q, dev = make("none")
    done = []

    def flush(pid):
        q.submit_bio(empty_flush_bio(next(_ids), pid,
                                     lambda b: done.append((b.pid, round(b.t_complete / MS, 6)))))
    at(env, 0.0, lambda: flush(1))
    at(env, 0.5 * MS, lambda: flush(2))
    at(env, 0.6 * MS, lambda: flush(3))
    env.run()
    assert dev.log == [(0.0, "flush", 0, False), (1.0, "flush", 0, False)]
    assert done == [(1, 1.0), (2, 2.0), (3, 2.0)]
    assert q.stats.ios[3] == 2 and q.flush.flushes == 2
    assert q.stats.ticks[3] == pytest.approx(1 * MS + 1 * MS)


def test_no_flush_while_sequence_data_is_in_flight():
    """blk_kick_flush's C2: a flush pending while a sequence's data is at the device waits
    for it; the data's post-flush and the pending preflush then share one flush."""
    env, q, dev = make("none")
    done = []
    q.submit_bio(write(100, done, preflush=True, fua=True), 0.0)     # flush 0-1, data 1-2
    at(env, 1.5 * MS, lambda: q.submit_bio(
        empty_flush_bio(next(_ids), 2, lambda b: done.append(("e", b.t_complete / MS)))))
    env.run()
    assert dev.log == [(0.0, "flush", 0, False), (1.0, "W", 100, False),
                       (2.0, "flush", 0, False)]
    assert done == [("e", pytest.approx(3.0)), (100, 3.0)]     # pending-list order


def test_54_without_an_elevator_does_not_defer_the_flush():
    """5.4 defers a flush for a sequence's data in flight only with an elevator: the
    empty flush at 1.5 ms is sent at once (served 2-3 ms, after the data); the data's
    post-flush waits for it to end (C1) and runs 3-4 ms."""
    env, q, dev = make("none", "5.4")
    done = []
    q.submit_bio(write(100, done, preflush=True, fua=True), 0.0)
    at(env, 1.5 * MS, lambda: q.submit_bio(
        empty_flush_bio(next(_ids), 2, lambda b: done.append(("e", b.t_complete / MS)))))
    env.run()
    assert dev.log == [(0.0, "flush", 0, False), (1.0, "W", 100, False),
                       (1.5, "flush", 0, False), (3.0, "flush", 0, False)]
    assert done == [("e", pytest.approx(3.0)), (100, 4.0)]


def test_flush_waits_for_a_driver_tag_at_full_depth():
    """With an elevator the flush request borrows a scheduler tag and needs a driver tag:
    with both of the device's tags taken by writes it waits for the first to complete."""
    env, q, dev = make("mq-deadline", queue_depth=2)
    done = []
    q.submit_bio(write(100, done), 0.0)
    q.submit_bio(write(200, done), 0.0)
    at(env, 0.1 * MS, lambda: q.submit_bio(write(300, done, preflush=True)))
    env.run()
    assert dev.log == [(0.0, "W", 100, False), (0.0, "W", 200, False),
                       (1.0, "flush", 0, False), (3.0, "W", 300, False)]
    assert done == [(100, 1.0), (200, 2.0), (300, 4.0)]


def test_without_flags_nothing_changes():
    """A volatile cache changes nothing for I/O without flush flags (wbt off)."""
    logs = []
    for volatile in (False, True):
        env = simpy.Environment()
        device = CacheDevice(volatile=volatile)
        cls = MQ_SCHEDULERS["mq-deadline"]
        q = MqQueue(lambda info: cls.create(info, {}), device, SimpyClock(env),
                    MqSettings(kernel="6.6", wbt_lat_usec=0), elevator_name="mq-deadline")
        done = []
        for i in range(12):
            at(env, i * 0.3 * MS, lambda i=i: q.submit_bio(write((i * 37) % 11 * 8, done)))
        env.run()
        logs.append((device.log, done))
        assert q.flush.flushes == 0 and not q.flush.seqs
    assert logs[0] == logs[1]


def test_empty_flush_on_the_26_queue():
    """The same helper on the 2.6.18 queue: an empty barrier, drained, then its pre-flush
    only (start_ordered masks off the barrier write and post-flush of an empty barrier)."""
    from blksim.block.legacy_queue import QueueSettings, RequestQueue
    from blksim.schedulers import get_scheduler
    env = simpy.Environment()
    device = CacheDevice()
    cls = get_scheduler("deadline")
    q = RequestQueue(lambda dq: cls.create(dq, {}, hz=250, kernel="2.6.18"), device,
                     SimpyClock(env), QueueSettings(hz=250))
    done = []
    q.submit_bio(write(100, done), 0.0)
    q.submit_bio(empty_flush_bio(next(_ids), 2, lambda b: done.append(("e", b.t_complete / MS))),
                 0.0)
    env.run()
    assert [e[1] for e in device.log] == ["W", "flush"]
    assert done == [(100, 1.0), ("e", pytest.approx(2.0))]
    assert q.ordered.barriers == 1 and q.ordered.flushes == 1 and q.ordered.allocated == 0


def test_blktrace_marks_the_mq_flush_and_fua(tmp_path):
    """blktrace of an mq run: the flush request's D has BLK_TC_FLUSH (RWBS 'F...') and the
    FUA data write BLK_TC_FUA, as the 2.6 queue's barriers are traced."""
    from blksim.traces.blktrace import TA_ISSUE, TC_FLUSH, TC_FUA, TC_SHIFT, iter_events
    from blksim.traces.blktrace_out import BlktraceRecorder
    env, q, dev = make("none", fua=True)
    rec = BlktraceRecorder(str(tmp_path), lambda pid: f"p{pid}", multiqueue=True)
    rec.install(q)
    done = []
    q.submit_bio(write(1000, done), 0.0)
    q.submit_bio(write(9000, done, preflush=True, fua=True), 0.0)
    env.run()
    rec.close()
    issues = [(e.sector, bool(e.action >> TC_SHIFT & TC_FLUSH), bool(e.action >> TC_SHIFT & TC_FUA))
              for e in iter_events(rec.path) if e.action & 0xFFFF == TA_ISSUE]
    assert issues == [(1000, False, False), (0, True, False), (9000, False, True)]


# ---------------------------------------------------------------- properties
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ios=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 40), st.booleans(),
                              st.booleans(), st.integers(0, 2)), min_size=1, max_size=25),
       scheduler=st.sampled_from(["none", "mq-deadline", "kyber", "bfq"]),
       kernel=st.sampled_from(["5.4", "6.1", "6.6"]), volatile=st.booleans(),
       fua=st.booleans(), depth=st.sampled_from([1, 2, 8]), nr_hw=st.sampled_from([1, 2]),
       switch=st.one_of(st.none(), st.tuples(st.integers(0, 30),
                                              st.sampled_from(["none", "mq-deadline"]))))
def test_flushes_order_and_account_everything(ios, scheduler, kernel, volatile, fua, depth,
                                              nr_hw, switch):
    """Random writes (some empty flushes) with random flags, any scheduler and line, one or
    two hardware queues (a flush queue each), an elevator switch or not: every bio
    completes once; a preflush bio completes after a flush that began after it was
    queued, and its data went to the device after that flush completed; a FUA bio is on
    the media when it completes; nothing is left behind."""
    env, q, dev = make(scheduler, kernel, nr_hw, volatile=volatile, fua=fua,
                       queue_depth=depth)
    if switch is not None:
        at(env, switch[0] * 0.25 * MS,
           lambda: q.switch_elevator(factory_of(switch[1]), switch[1]))
    bios, done, checked = [], [], []

    def end(b):
        done.append(b.id)
        if b.fua and b.nr_sectors:
            checked.append((b, b.id in dev.media))

    for t, slot, pre, f, kind in ios:
        if kind == 0:
            b = empty_flush_bio(next(_ids), 1 + slot % 3, end)
            pre, f = True, False
        else:
            b = Bio(next(_ids), slot * 8, 8, True, True, 1 + slot % 3, on_complete=end)
            b.preflush, b.fua = pre, f
        b.cpu = slot % nr_hw
        bios.append((b, pre, f))
        at(env, t * 0.25 * MS, lambda b=b: q.submit_bio(b))
    env.run()
    assert sorted(done) == sorted(b.id for b, _, _ in bios)
    for b, _pre, _f in bios:
        if b.preflush and volatile:           # (the flags were cleared without a cache)
            assert any(s >= b.t_queue and e <= b.t_complete for s, e in dev.flushes), b
            if b.nr_sectors:
                assert any(s >= b.t_queue and e <= b.t_dispatch for s, e in dev.flushes), b
    assert all(on_media for _b, on_media in checked)
    if not volatile:
        assert not dev.flushes
    assert q.count == 0 and q.queued == 0 and q.in_flight == 0 and q.flush.live == 0
    for hctx in q.hctxs:
        assert hctx.tags.in_use == 0 and not hctx.dispatch
        if hctx.sched_tags is not None:
            assert hctx.sched_tags.in_use == 0


def test_empty_flush_on_a_partition_goes_to_its_disk_unremapped():
    """blk_partition_remap remaps only a bio with sectors: an empty flush sent to a
    partition is the disk's flush; a data bio is remapped as before."""
    from blksim.block.partition import Partition
    env, q, dev = make("none")
    part = Partition("sda2", q, 2048, 4096, (8, 2))
    done = []
    part.submit_bio(empty_flush_bio(next(_ids), 1, lambda b: done.append(("e", b.sector))), 0.0)
    part.submit_bio(write(8, done), 0.0)
    env.run()
    # (the write goes straight to the driver; the flush from kblockd's run, after it)
    assert [(e[1], e[2]) for e in dev.log] == [("W", 2056), ("flush", 0)]
    assert done == [(2056, 1.0), ("e", 0)]
    assert part.stats.ios[1] == 1
