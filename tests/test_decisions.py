"""Each elevator's decision messages (``block_elv_msg``) in hand-traced small cases.

The elevators are driven directly, their ``msg`` sink set to a list, as the queue sets
it while someone subscribes. Times are seconds at HZ=250 (a jiffy is 4 ms). Every name
sent must be one the class declares in ``events``.
"""

from __future__ import annotations

import itertools

import pytest

from blksim.block.dispatch_queue import DispatchQueue
from blksim.block.request import Bio, Request
from blksim.schedulers.anticipatory import AnticipatoryElevator
from blksim.schedulers.cfq import CfqElevator
from blksim.schedulers.deadline import DeadlineElevator

_ids = itertools.count()


def rq(sector, pid=1, write=False, now=0.0):
    i = next(_ids)
    return Request(i, Bio(i, sector, 8, write, not write, pid=pid), now)


def listen(el):
    log = []

    def msg(event, pid, detail=None):
        assert event in type(el).events, f"{event} is not declared"
        log.append((event, pid, detail))
    el.msg = msg
    return log


def take(dq):
    out = []
    while dq:
        out.append(dq.pop_head())
    return out


# ---------------------------------------------------------------- CFQ (2.6.18)
def _cfq_two_readers():
    """Two sync readers, pid 1 and pid 2, one request each at t=0; pid 1's queue is
    first on rr_list[4] and becomes active (cfq_set_active_queue). Its request is
    dispatched (slice_start), completes at 10 ms (jiffy 2): its queue is empty, its
    idle window on, so cfq_completed_request arms the idle timer for slice_idle (2
    jiffies, until jiffy 4) and CFQ holds the disk for pid 1 (hold_start)."""
    dq = DispatchQueue()
    el = CfqElevator(dq, {}, hz=250)
    log = listen(el)
    a1, b1 = rq(0, pid=1), rq(100_000, pid=2)
    el.add(a1, 0.0)
    el.add(b1, 0.0)
    assert el.dispatch(0.0) == 1
    assert take(dq) == [a1]
    el.activate(a1, 0.0)
    el.completed(a1, 0.010)
    assert el.idle_slice_timer == 4
    return el, dq, log


def test_cfq_idle_window_armed_after_the_first_request_completes():
    _el, _dq, log = _cfq_two_readers()
    assert log == [("slice_start", 1, "be/sync"), ("hold_start", 1, "idle_window")]


def test_cfq_idle_window_hit_when_the_next_request_comes_within_slice_idle():
    el, dq, log = _cfq_two_readers()
    el.add(rq(8, pid=1), 0.012)                 # jiffy 3 < 4: cfq_crq_enqueued
    assert log[2:] == [("hold_end", 1, "hit")]
    assert el.idle_slice_timer is None
    assert el.dispatch(0.012) == 1              # pid 1 goes on in its slice
    assert [r.pid for r in take(dq)] == [1]
    assert log[3:] == []                        # no slice ended, no new one


def test_cfq_idle_window_expires_when_it_does_not_come():
    el, dq, log = _cfq_two_readers()
    el.timer_fired(0.016)                        # jiffy 4: cfq_idle_slice_timer
    # the slice has time left, but pid 2 waits and pid 1 has nothing queued: it ends
    assert log[2:] == [("hold_end", 1, "timeout"), ("slice_end", 1, "idle_timeout")]
    assert el.dispatch(0.016) == 1
    assert [r.pid for r in take(dq)] == [2]
    assert log[4:] == [("slice_start", 2, "be/sync")]


def test_cfq_async_slice_ends_at_its_request_count():
    """20 writes of one process go to the async queue of be/4 (every write is async in
    2.6.18). Its slice (cfq_prio_to_slice: 10 jiffies) starts at the first dispatch;
    each dispatch round moves quantum (4) requests, and the slice ends when it has
    dispatched cfq_prio_to_maxrq(2, 4) = 2 * (2 + 2 * 3) = 16 requests."""
    dq = DispatchQueue()
    el = CfqElevator(dq, {}, hz=250)
    log = listen(el)
    for k in range(20):
        el.add(rq(k * 1000, pid=5, write=True), 0.0)
    assert [el.dispatch(0.0) for _ in range(4)] == [4, 4, 4, 4]
    assert log == [("slice_start", 0, "be/async"), ("slice_end", 0, "async_rq")]


def test_cfq_idle_window_turns_off_for_a_long_think_time():
    """cfq_update_idle_window: once more than 80 samples are in (the fourth request:
    32, 60, 84), a mean think time above slice_idle (2 jiffies) turns idling off."""
    dq = DispatchQueue()
    el = CfqElevator(dq, {}, hz=250)
    log = listen(el)
    now = 0.0
    for k in range(4):
        r = rq(k * 8, pid=3, now=now)
        el.add(r, now)
        el.dispatch(now)
        take(dq)
        el.activate(r, now)
        el.completed(r, now + 0.004)
        now += 0.100                             # 25 jiffies of thinking each time
    offs = [e for e in log if e[0].startswith("idle_window")]
    assert offs == [("idle_window_off", 3, "think_time")]


# ---------------------------------------------------------------- AS (2.6.18)
def _as_waiting():
    """pid 1 reads sector 0 at t=0: dispatched (no context to anticipate for yet). It
    completes at 10 ms (jiffy 2): antic_start = 2. pid 2's far read comes then; the
    dispatch finds pid 1 worth waiting for (as_can_break_anticipation: no reason: not
    close, no statistics against it) and anticipates (as_antic_waitnext: the timer at
    jiffy 2 + antic_expire 1 = 3, 12 ms)."""
    dq = DispatchQueue()
    el = AnticipatoryElevator(dq, {}, hz=250)
    log = listen(el)
    a1 = rq(0, pid=1)
    el.add(a1, 0.0)
    assert el.dispatch(0.0) == 1
    take(dq)
    el.completed(a1, 0.010)
    el.add(rq(100_000, pid=2), 0.010)
    assert el.dispatch(0.010) == 0
    assert el.wakeup_at == pytest.approx(0.012)
    return el, dq, log


def test_as_anticipation_started():
    _el, _dq, log = _as_waiting()
    assert log == [("hold_start", 1, "anticipation")]


def test_as_anticipation_hit():
    el, dq, log = _as_waiting()
    el.add(rq(8, pid=1), 0.011)                  # pid 1's next read: as_add_request
    assert log[1:] == [("hold_end", 1, "hit")]
    assert el.dispatch(0.011) == 1
    assert [r.pid for r in take(dq)] == [1]


def test_as_anticipation_timeout():
    el, dq, log = _as_waiting()
    el.timer_fired(0.012)                        # as_antic_timeout
    assert log[1:] == [("hold_end", 1, "timeout")]
    assert el.dispatch(0.012) == 1
    assert [r.pid for r in take(dq)] == [2]
    assert log[2:] == []                         # FINISHED: no new anticipation asked


def test_as_not_anticipating_names_the_reason():
    """pid 1 reads, thinks 100 ms, reads again, five times: its mean think time (capped
    at HZ/50 - 1 = 4 jiffies) exceeds antic_expire (1 jiffy). When pid 2's read comes
    right as pid 1's last completes, AS dispatches it without waiting and says why
    (as_can_break_anticipation's think-time rule)."""
    dq = DispatchQueue()
    el = AnticipatoryElevator(dq, {}, hz=250)
    log = listen(el)
    now = 0.0
    for k in range(5):
        r = rq(k * 8, pid=1)
        el.add(r, now)
        assert el.dispatch(now) == 1
        take(dq)
        el.completed(r, now + 0.004)
        now += 0.100
    done = now - 0.100 + 0.004                 # pid 1's last completion
    el.add(rq(500_000, pid=2), done)
    assert el.dispatch(done) == 1
    assert log == [("antic_skipped", 1, "thinktime")]


# ---------------------------------------------------------------- deadline (2.6.18)
def test_deadline_batches_a_seek_and_a_sweep():
    dq = DispatchQueue()
    el = DeadlineElevator(dq, {}, hz=250)
    log = listen(el)
    for s in (0, 8, 16):
        el.add(rq(s), 0.0)
    assert [el.dispatch(0.0) for _ in range(4)] == [1, 1, 1, 0]
    assert log == [("batch_start", 0, "read"), ("batch_end", 0, "swept")]
    assert el.dispatch(0.0) == 0                 # no batch open: nothing more said
    assert len(log) == 2


def test_deadline_writes_starved_and_seek_cuts():
    """writes_starved = 2: reads at 0, 100, 200 and a write; 2.6.18 cuts a batch at
    every seek (the next request is not contiguous), and the third batch is the
    write's, though a read still waits."""
    dq = DispatchQueue()
    el = DeadlineElevator(dq, {}, hz=250)
    log = listen(el)
    el.add(rq(5000, write=True), 0.0)
    for s in (0, 100, 200):
        el.add(rq(s), 0.0)
    for _ in range(3):
        assert el.dispatch(0.0) == 1
    assert log == [("batch_start", 0, "read"), ("batch_end", 0, "seek"),
                   ("batch_start", 0, "read"), ("batch_end", 0, "seek"),
                   ("writes_starved", 0, 2), ("batch_start", 0, "write")]
    assert take(dq)[-1].write


def test_deadline_fifo_expiry_starts_the_batch_at_the_oldest():
    dq = DispatchQueue()
    el = DeadlineElevator(dq, {}, hz=250)
    log = listen(el)
    old = rq(1000, pid=4)
    el.add(old, 0.0)                             # read_expire 500 ms: due at 0.5 s
    el.add(rq(0, pid=5), 0.1)
    assert el.dispatch(0.7) == 1
    assert take(dq) == [old]
    assert log == [("batch_start", 0, "read"), ("fifo_expired", 4, "read")]


def test_every_declared_event_is_in_the_docs_table():
    import pathlib
    from blksim.schedulers import MQ_SCHEDULERS
    from blksim.schedulers import get_scheduler
    text = pathlib.Path(__file__).resolve().parents[1].joinpath("docs", "schedulers.md") \
        .read_text()
    section = text[text.index("## The elevators' decisions"):]
    classes = [get_scheduler(n) for n in ("deadline", "anticipatory", "cfq")] + \
        [MQ_SCHEDULERS[n] for n in ("mq-deadline", "kyber", "bfq")]
    for cls in classes:
        assert cls.events, cls.name
        for event, meaning in cls.events.items():
            assert f"`{event}`" in section, (cls.name, event)
            assert "(" in meaning, (cls.name, event)      # it names its kernel function


# ---------------------------------------------------------------- mq-deadline (6.6)
def test_mq_deadline_batches_through_the_multiqueue_layer():
    """fifo_batch = 2, writes_starved = 1; four reads and a write at t=0 on a device of
    one tag (1 ms each). The first two reads continue the initial sweep (batching 0, 1
    < fifo_batch: no batch chosen, nothing said, as __dd_dispatch_request); the third
    starts a read batch (reads and writes wait, starved 0 < 1: reads, starved 1); when
    the reads are gone the sweep has no next read (swept) and the write's batch
    starts."""
    import simpy
    from blksim.block.mq.queue import MqQueue, MqSettings
    from blksim.disk_models.synthetic import ServiceLawDevice
    from blksim.schedulers import MQ_SCHEDULERS
    from blksim.sim.clock import SimpyClock
    env = simpy.Environment()
    dev = ServiceLawDevice("fixed", 0.001, capacity=1 << 30, queue_depth=1)
    cls = MQ_SCHEDULERS["mq-deadline"]
    q = MqQueue(lambda info: cls.create(info, {"fifo_batch": 2, "writes_starved": 1}), dev,
                SimpyClock(env), MqSettings(kernel="6.6"), elevator_name="mq-deadline")
    log = []
    q.subscribe("block_elv_msg", lambda _q, event, pid, detail, now:
                log.append((event, detail)))
    for s in (0, 100, 200, 300):
        q.submit_bio(Bio(next(_ids), s, 8, False, True, 1), 0.0)
    q.submit_bio(Bio(next(_ids), 5000, 8, True, False, 2), 0.0)
    env.run()
    assert log == [("batch_start", "read"), ("batch_end", "swept"), ("batch_start", "write")]
    for event, _ in log:
        assert event in cls.events


def test_kyber_says_when_a_domain_runs_out_of_tokens():
    """With the write domain's pool cut to one token, the second write finds none
    (kyber_dispatch_cur_domain -> kyber_get_domain_token fails): throttled, write."""
    import simpy
    from blksim.block.mq.queue import MqQueue, MqSettings
    from blksim.disk_models.synthetic import ServiceLawDevice
    from blksim.schedulers.kyber import KyberElevator
    from blksim.sim.clock import SimpyClock
    env = simpy.Environment()
    dev = ServiceLawDevice("fixed", 0.001, capacity=1 << 30, queue_depth=4)
    q = MqQueue(lambda info: KyberElevator.create(info, {}), dev, SimpyClock(env),
                MqSettings(kernel="6.6"), elevator_name="kyber")
    q.elevator.depth[1] = 1
    log = []
    q.subscribe("block_elv_msg", lambda _q, event, pid, detail, now:
                log.append((event, detail)))
    for s in (0, 1000):
        q.submit_bio(Bio(next(_ids), s, 8, True, False, 1), 0.0)
    env.run()
    assert log and set(log) == {("throttled", "write")}
    assert len(log) == q.elevator.throttled[1]


# ---------------------------------------------------------------- bfq (6.6)
def _bfq_one_reader(gap):
    """One process reads sector 0 (2 ms at a one-tag device), then sector 8 ``gap``
    after the first completes. Its new queue is weight-raised as interactive
    (bfq_update_bfqq_wr_on_rq_arrival); when its request completes it is empty and BFQ
    idles for it (bfq_completed_request -> bfq_arm_slice_timer) for at least 20 ms, a
    raised queue's idle slice (bfq_arm_slice_timer's BFQ_MIN_TT and raising rules)."""
    import simpy
    from blksim.block.mq.queue import MqQueue, MqSettings
    from blksim.disk_models.synthetic import ServiceLawDevice
    from blksim.schedulers import MQ_SCHEDULERS
    from blksim.sim.clock import SimpyClock
    env = simpy.Environment()
    dev = ServiceLawDevice("fixed", 0.002, capacity=1 << 30, queue_depth=1)
    cls = MQ_SCHEDULERS["bfq"]
    q = MqQueue(lambda info: cls.create(info, {}), dev, SimpyClock(env),
                MqSettings(kernel="6.6"), elevator_name="bfq")
    log = []
    q.subscribe("block_elv_msg", lambda _q, e, p, d, now: log.append((e, p, d, round(now, 6))))

    def second():
        yield env.timeout(gap)
        q.submit_bio(Bio(next(_ids), 8, 8, False, True, 7), env.now)
    q.submit_bio(Bio(next(_ids), 0, 8, False, True, 7,
                     on_complete=lambda b: env.process(second())), 0.0)
    env.run()
    return log


def test_bfq_idling_used_then_expired():
    log = _bfq_one_reader(0.001)
    assert log == [("wr_start", 7, "interactive", 0.0),
                   ("hold_start", 7, "idling", 0.002),     # the first read completed
                   ("hold_end", 7, "hit", 0.003),          # the next came within it
                   ("hold_start", 7, "idling", 0.005),     # the second completed
                   ("hold_end", 7, "timeout", 0.025),      # nothing more: 20 ms later
                   ("expire", 7, "too_idle", 0.025)]       # bfq_idle_slice_timer_body


def test_bfq_idling_expired_before_the_next_request():
    log = _bfq_one_reader(0.030)
    assert log[:4] == [("wr_start", 7, "interactive", 0.0),
                       ("hold_start", 7, "idling", 0.002),
                       ("hold_end", 7, "timeout", 0.022),
                       ("expire", 7, "too_idle", 0.022)]
