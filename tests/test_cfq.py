"""Hand-traced cases of the CFQ elevator of Linux 2.6.18 (block/cfq-iosched.c).

Each expectation was worked out by hand from the 2.6.18 algorithm
(block/cfq-iosched.c and include/linux/ioprio.h of Linux 2.6.18); comments show
the trace where it is not obvious. Requests are 8 sectors long. Times are
seconds; at HZ=250 one jiffy is 4 ms, so ``slice_sync`` is 25 jiffies, ``slice_idle``
2 jiffies and ``fifo_expire_sync`` 31 jiffies (HZ/8).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.schedulers.cfq import CfqElevator
from blksim.block.dispatch_queue import DispatchQueue
from blksim.block.request import (DEFAULT_IOPRIO, IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE, IOPRIO_CLASS_NONE,
                         IOPRIO_CLASS_RT, Bio, Request, ioprio_value)

_ids = itertools.count()


def mkrq(sector: int, pid: int = 1, write: bool = False, ioprio: int = DEFAULT_IOPRIO,
         now: float = 0.0, nr: int = 8) -> Request:
    i = next(_ids)
    return Request(i, Bio(i, sector, nr, write, not write, pid=pid, ioprio=ioprio), now)


def make(hz: int = 250, **params):
    dq = DispatchQueue()
    return CfqElevator(dq, params, hz=hz), dq


def add(el, now, *rqs):
    for rq in rqs:
        el.add(rq, now)
    return rqs


def drain_dq(dq) -> list:
    out = []
    while dq:
        out.append(dq.pop_head())
    return out


# ---------------------------------------------------------------- slice lengths
SYNC_MS = [180, 160, 140, 120, 100, 80, 60, 40]     # cfq_prio_to_slice(), levels 0..7
ASYNC_MS = [72, 64, 56, 48, 40, 32, 24, 16]


@pytest.mark.parametrize("hz", [250, 1000])
@pytest.mark.parametrize("level", range(8))
@pytest.mark.parametrize("write", [False, True])
def test_slice_length_follows_the_prio_table(hz, level, write):
    """The slice starts at the queue's first dispatch and lasts cfq_prio_to_slice jiffies."""
    el, dq = make(hz)
    now = 1.0
    j = int(now * hz)
    add(el, now, mkrq(0, pid=7, write=write, ioprio=ioprio_value(IOPRIO_CLASS_BE, level)))
    assert el.dispatch(now) == 1
    q = el.active_queue
    assert q is not None and q.sync is (not write)
    ms = (ASYNC_MS if write else SYNC_MS)[level]
    assert q.slice_end - j == ms * hz // 1000


def test_slice_table_at_hz100_async_is_flat():
    """At HZ=100 slice_async is 4 jiffies and 4/5 == 0: every level gets 40 ms (cfq_prio_to_slice())."""
    el, _ = make(100)
    for level in range(8):
        q = type("Q", (), {"sync": False, "ioprio": level})()
        assert el.prio_slice(q) == 4


def test_rt_class_slice_scales_by_level_too():
    el, dq = make(1000)
    add(el, 0.0, mkrq(0, pid=3, ioprio=ioprio_value(IOPRIO_CLASS_RT, 0)))
    el.dispatch(0.0)
    assert el.active_queue.slice_end == 180


def test_class_none_is_best_effort_with_its_level():
    el, dq = make(1000)
    add(el, 0.0, mkrq(0, pid=3, ioprio=ioprio_value(IOPRIO_CLASS_NONE, 2)))
    el.dispatch(0.0)
    q = el.active_queue
    assert (q.ioprio_class, q.ioprio) == (IOPRIO_CLASS_BE, 2)
    assert q.slice_end == 140


# ---------------------------------------------------------------- idle class
def test_idle_class_waits_for_everything_else_and_its_grace_period():
    el, dq = make(250)
    idle = mkrq(1000, pid=1, ioprio=ioprio_value(IOPRIO_CLASS_IDLE, 0))
    be = mkrq(500000, pid=2)
    add(el, 0.0, idle, be)
    assert el.dispatch(0.0) == 1
    assert drain_dq(dq) == [be]                   # best effort first although idle came first
    el.activate(be, 0.0)
    assert el.dispatch(0.0) == 0                  # be in flight: its slice keeps the disk
    el.completed(be, 0.004)                       # j=1: queue empty -> idle 2 jiffies
    assert el.wakeup_at == pytest.approx(3 / 250)
    assert el.dispatch(0.004) == 0
    el.wakeup_at = None
    el.timer_fired(0.012)                         # j=3: be's slice expires (another queue busy)
    # the idle class needs CFQ_IDLE_GRACE = 25 jiffies since the last completion (j=1)
    assert el.dispatch(0.012) == 0
    assert el.wakeup_at == pytest.approx(26 / 250)
    assert el.dispatch(0.1) == 0                  # j=25 < 26
    el.wakeup_at = None
    el.timer_fired(26 / 250)
    assert el.kick_queue
    assert el.dispatch(26 / 250) == 1
    assert drain_dq(dq) == [idle]
    assert el.active_queue is None                # an idle-class queue expires after one round


def test_idle_class_is_preempted_by_a_new_sync_request():
    el, dq = make(250)
    idle_rqs = [mkrq(s, pid=1, ioprio=ioprio_value(IOPRIO_CLASS_IDLE, 0)) for s in (0, 8, 16)]
    add(el, 0.0, *idle_rqs)
    assert el.dispatch(0.0) == 1                  # idle class: one request per round
    drain_dq(dq)
    # the idle queue expired after its round but is still the next choice; make it active
    assert el.dispatch(0.0) == 1
    drain_dq(dq)
    el.active_queue = el.queue_of(1)              # as if mid-round
    be = mkrq(900000, pid=2)
    el.add(be, 0.0)
    assert el.active_queue is el.queue_of(2)      # preempted (cfq_should_preempt: active is IDLE)
    assert el.kick_queue
    assert el.dispatch(0.0) >= 1
    assert drain_dq(dq)[0] is be


# ---------------------------------------------------------------- idling
def _idle_setup(**params):
    el, dq = make(250, **params)
    a0 = mkrq(1000, pid=1)
    b0 = mkrq(9000000, pid=2)
    add(el, 0.0, a0, b0)
    assert el.dispatch(0.0) == 1
    assert drain_dq(dq) == [a0]
    el.activate(a0, 0.0)
    return el, dq, a0, b0


def test_cfq_idles_for_the_same_process_after_its_queue_empties():
    el, dq, a0, b0 = _idle_setup()
    el.completed(a0, 0.004)                       # j=1, slice runs to j=25
    assert el.wakeup_at == pytest.approx(3 / 250)  # slice_idle = 2 jiffies
    assert el.dispatch(0.004) == 0                # b0 waits although the disk is free
    a1 = mkrq(1008, pid=1)
    el.kick_queue = False
    el.add(a1, 0.006)
    assert el.kick_queue                          # the waited-for request runs at once
    assert el.wakeup_at is None                   # idle timer cancelled
    assert el.dispatch(0.006) == 1
    assert drain_dq(dq) == [a1]


def test_idle_timer_expiry_moves_on_to_the_other_process():
    el, dq, a0, b0 = _idle_setup()
    el.completed(a0, 0.004)
    el.wakeup_at = None
    el.timer_fired(0.012)
    assert el.kick_queue
    assert el.dispatch(0.012) == 1
    assert drain_dq(dq) == [b0]


@pytest.mark.parametrize("slice_idle", [0, 8])
def test_slice_idle_zero_does_not_idle(slice_idle):
    el, dq = make(250, slice_idle=slice_idle)
    a0, b0 = mkrq(1000, pid=1), mkrq(9000000, pid=2)
    el.add(a0, 0.0)
    assert el.dispatch(0.0) == 1 and drain_dq(dq) == [a0]
    el.activate(a0, 0.0)
    el.add(b0, 0.001)
    el.completed(a0, 0.004)
    if slice_idle:
        assert el.wakeup_at == pytest.approx(3 / 250)
        assert el.dispatch(0.004) == 0
    else:
        # no idle window: a0's slice ended with its round; nothing to wait for
        assert el.wakeup_at is None
        assert el.dispatch(0.004) == 1
        assert drain_dq(dq) == [b0]


def test_long_thinker_loses_its_idle_window():
    """Think time > slice_idle (EWMA valid after 3 samples) switches idling off."""
    el, dq = make(250)
    t = 0.0
    for i in range(4):
        rq = mkrq(1000 + 8 * i, pid=1)
        el.add(rq, t)
        q = el.queue_of(1)
        assert q.idle_window is (i < 2)           # samples 32, 60, 84: valid from the 3rd
        assert el.dispatch(t) == 1
        drain_dq(dq)
        el.activate(rq, t)
        t += 0.004
        el.completed(rq, t)
        el.process_exited(99, t)                  # (unknown pid: ignored)
        t += 0.1                                  # think 25 jiffies >> slice_idle
    ctx = el.context_of(1)
    assert ctx.ttime_mean == 4                    # capped at 2*slice_idle


def test_exited_process_is_not_waited_for():
    el, dq, a0, b0 = _idle_setup()
    el.process_exited(1, 0.002)                   # a0 still in flight: slice expires now
    el.completed(a0, 0.004)
    assert el.wakeup_at is None
    assert el.dispatch(0.004) == 1
    assert drain_dq(dq) == [b0]


# ---------------------------------------------------------------- preemption (2.6.18)
def test_new_sync_request_does_not_preempt_an_async_slice_in_2_6_18():
    """2.6.18 cfq_should_preempt tests wait_request on the *new* queue, which only the
    active queue ever has: the "sync preempts async" rule is unreachable (fixed in
    2.6.24). The reader waits for the writer's slice."""
    el, dq = make(250)
    writes = [mkrq(100000 + 8 * i, pid=1, write=True) for i in range(20)]
    add(el, 0.0, *writes)
    assert el.dispatch(0.0) == 4
    async_q = el.active_queue
    assert not async_q.sync
    drain_dq(dq)
    rd = mkrq(5000000, pid=2)
    el.add(rd, 0.001)
    assert el.active_queue is async_q
    assert el.dispatch(0.001) == 4
    assert rd not in drain_dq(dq)


def test_async_request_from_the_process_idled_on_ends_the_wait():
    el, dq, a0, b0 = _idle_setup()
    el.completed(a0, 0.004)
    assert el.idle_slice_timer is not None
    w = mkrq(777000, pid=1, write=True)
    el.kick_queue = False
    el.add(w, 0.005)
    assert el.idle_slice_timer is None and el.kick_queue
    assert el.active_queue is None


# ---------------------------------------------------------------- quantum
@pytest.mark.parametrize("quantum", [1, 2, 4])
def test_quantum_limits_one_round_of_one_queue(quantum):
    el, dq = make(250, quantum=quantum)
    mine = [mkrq(8 * i, pid=1) for i in range(10)]
    other = [mkrq(5000000 + 8 * i, pid=2) for i in range(10)]
    add(el, 0.0, *mine, *other)
    assert el.dispatch(0.0) == quantum
    got = drain_dq(dq)
    assert got == mine[:quantum]
    # the queue still holds its slice: the next round comes from it again
    assert el.dispatch(0.0) == quantum
    assert drain_dq(dq) == mine[quantum:2 * quantum]


def test_async_slice_ends_after_maxrq_requests():
    """slice_async_rq=2, level 4: 2*(2+2*3) = 16 requests, then the slice expires."""
    el, dq = make(250)
    writes = [mkrq(8 * i, pid=1, write=True) for i in range(40)]
    add(el, 0.0, *writes)
    total = 0
    q = None
    for _ in range(4):
        total += el.dispatch(0.0)
        q = q or el.queue_of(1, sync=False)
    assert total == 16
    # expired after 16; the same queue (the only one) was made active again, its
    # new slice not yet started
    assert el.active_queue is q and q.slice_end == 0 and el.dispatch_slice == 0


# ---------------------------------------------------------------- FIFO
def test_fifo_expiry_once_per_slice():
    """quantum 1, long slice. X dispatched at j=0 (head -> 10,000,008). Queued at t=0:
    O1 (20M), O2 (30M), F1..F3 (10,000,100..300). At j=25 nothing expired (31 jiffies):
    next_crq F1. At j=50 O1 is expired: served out of order, then next_crq F3 (chosen
    from O1's neighbours against the old head). O2 has expired too, but the FIFO is
    checked once per slice: next_crq wins (O2, then F2 as a wrap)."""
    el, dq = make(250, quantum=1, slice_sync=1000)
    x = mkrq(10_000_000)
    el.add(x, 0.0)
    assert el.dispatch(0.0) == 1 and drain_dq(dq) == [x]
    o1, o2 = mkrq(20_000_000), mkrq(30_000_000)
    f1, f2, f3 = mkrq(10_000_100), mkrq(10_000_200), mkrq(10_000_300)
    add(el, 0.0, o1, o2, f1, f2, f3)
    order = []
    for t in (0.1, 0.2, 0.2, 0.2, 0.2):
        assert el.dispatch(t) == 1
        order += drain_dq(dq)
    assert order == [f1, o1, f3, o2, f2]


# ---------------------------------------------------------------- alternation
def _drive(el, dq, now, until, service=0.001):
    """Queue depth 1 device with a fixed service time; returns (pid, dispatch time) list."""
    seen = []
    while now < until:
        if not dq:
            if el.dispatch(now) == 0:
                if el.wakeup_at is None:
                    break
                now = max(now, el.wakeup_at)
                el.wakeup_at = None
                el.timer_fired(now)
                continue
        rq = dq.pop_head()
        el.activate(rq, now)
        seen.append((rq.pid, now))
        now += service
        el.completed(rq, now)
    return seen


def _runs(seq):
    runs = []
    for pid, _ in seq:
        if runs and runs[-1][0] == pid:
            runs[-1][1] += 1
        else:
            runs.append([pid, 1])
    return runs


def test_two_equal_priority_processes_alternate_slices():
    el, dq = make(250)
    for i in range(400):
        el.add(mkrq(8 * i, pid=1), 0.0)
        el.add(mkrq(50_000_000 + 8 * i, pid=2), 0.0)
    seq = _drive(el, dq, 0.0, 0.5)
    runs = _runs(seq)
    assert [r[0] for r in runs[:4]] == [1, 2, 1, 2]
    # 25-jiffy slices expire once j > slice_end: ~104 ms of 1 ms requests each
    for _, n in runs[:4]:
        assert 100 <= n <= 110


def test_level_0_gets_more_turns_than_level_7():
    """Both always busy: levels are spliced 0 | 0,1 | ... | 0..7, so level 0 gets
    8 slices of 180 ms for each 40 ms slice of level 7."""
    el, dq = make(1000)
    for i in range(3000):
        el.add(mkrq(8 * i, pid=1, ioprio=ioprio_value(IOPRIO_CLASS_BE, 0)), 0.0)
        el.add(mkrq(50_000_000 + 8 * i, pid=2, ioprio=ioprio_value(IOPRIO_CLASS_BE, 7)), 0.0)
    seq = _drive(el, dq, 0.0, 2.0)
    runs = _runs(seq)
    assert runs[0][0] == 1
    n1 = sum(1 for p, _ in seq if p == 1)
    n2 = sum(1 for p, _ in seq if p == 2)
    assert 25 <= n1 / n2 <= 45


# ---------------------------------------------------------------- tunables
def test_tunable_defaults_in_jiffies():
    el, _ = make(250)
    assert el.fifo_expire == (62, 31)             # HZ/4, HZ/8: 248 ms and 124 ms at HZ=250
    assert el.slice == (10, 25)
    assert el.slice_idle == 2
    assert el.quantum == 4 and el.slice_async_rq == 2
    assert el.back_max == 32768 and el.back_penalty == 2
    el, _ = make(1000)
    assert el.fifo_expire == (250, 125) and el.slice == (40, 100) and el.slice_idle == 8
    el, _ = make(100)
    assert el.slice_idle == 1                     # cfq_init raises HZ/125 == 0 to 1


def test_tunables_written_in_ms_round_up_to_jiffies():
    el, _ = make(250, slice_idle=10, fifo_expire_sync=125, slice_sync=1)
    assert el.slice_idle == 3 and el.fifo_expire[1] == 32 and el.slice[1] == 1


@pytest.mark.parametrize("name,value", [("quantum", 0), ("back_seek_penalty", 0),
                                        ("slice_sync", 0), ("slice_async", 0),
                                        ("slice_async_rq", 0), ("fifo_expire_sync", 0),
                                        ("slice_idle", -1), ("quantum", 2**32)])
def test_tunable_out_of_range(name, value):
    with pytest.raises(ValueError, match=name):
        make(250, **{name: value})


def test_unknown_tunable_lists_valid_ones():
    with pytest.raises(ValueError, match="slice_idle"):
        make(250, antic_expire=6)
    with pytest.raises(ValueError, match="whole number"):
        make(250, quantum=2.5)


def test_create_accepts_2_6_18_and_later_refuses_older():
    assert CfqElevator.create(DispatchQueue(), {}, hz=250, kernel="2.6.18").name == "cfq"
    CfqElevator.create(DispatchQueue(), {}, hz=250, kernel="2.6.32")
    with pytest.raises(ValueError, match="2.6.18"):
        CfqElevator.create(DispatchQueue(), {}, hz=250, kernel="2.6.9")


# ---------------------------------------------------------------- merging hooks
def test_front_merge_candidate_only_in_the_submitters_queue():
    el, _ = make(250)
    mine = mkrq(1000, pid=1)
    theirs = mkrq(2000, pid=2)
    add(el, 0.0, mine, theirs)
    assert el.merge_candidate(Bio(0, 992, 8, False, True, pid=1), 0.0) is mine
    assert el.merge_candidate(Bio(0, 1992, 8, False, True, pid=1), 0.0) is None
    assert el.merge_candidate(Bio(0, 1992, 8, False, True, pid=2), 0.0) is theirs
    assert el.merge_candidate(Bio(0, 992, 8, True, False, pid=1), 0.0) is None  # write: async q


def test_requests_merged_keeps_counts_and_older_fifo_place():
    el, dq = make(250)
    a = mkrq(1000, pid=1, now=0.1)
    b = mkrq(1008, pid=1, now=0.0)
    el.add(b, 0.0)
    el.add(a, 0.1)
    a.nr_sectors += b.nr_sectors
    el.requests_merged(a, b, 0.1)
    assert el.queued() == 1
    q = el.queue_of(1)
    assert list(q.fifo) == [a] and q.fifo[a] == 0       # a, queued at b's jiffy


# ---------------------------------------------------------------- random sequences
ops = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "dispatch", "complete",
                                          "timer", "exit"]),
                         st.integers(1, 4), st.booleans(), st.integers(0, 200),
                         st.sampled_from([IOPRIO_CLASS_BE, IOPRIO_CLASS_BE, IOPRIO_CLASS_RT,
                                          IOPRIO_CLASS_IDLE, IOPRIO_CLASS_NONE]),
                         st.integers(0, 7)),
               max_size=120)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seq=ops, hz=st.sampled_from([100, 250, 1000]), slice_idle=st.sampled_from([0, 8]),
       quantum=st.integers(1, 4))
def test_random_sequences_never_lose_or_duplicate(seq, hz, slice_idle, quantum):
    el, dq = make(hz, slice_idle=slice_idle, quantum=quantum)
    now = 0.0
    added, in_flight, done = set(), [], []
    taken = set()
    for op, pid, write, sector, cls, level in seq:
        now += 0.0007
        if op == "add":
            rq = mkrq(sector * 8, pid=pid, write=write, ioprio=ioprio_value(cls, level), now=now)
            el.add(rq, now)
            added.add(rq.id)
        elif op == "dispatch":
            if not dq:
                el.dispatch(now)
            while dq and len(in_flight) < 4:
                rq = dq.pop_head()
                assert rq.id not in taken
                taken.add(rq.id)
                el.activate(rq, now)
                in_flight.append(rq)
        elif op == "complete" and in_flight:
            rq = in_flight.pop(0)
            el.completed(rq, now)
            done.append(rq.id)
        elif op == "timer" and el.wakeup_at is not None:
            now = max(now, el.wakeup_at)
            el.wakeup_at = None
            el.timer_fired(now)
        elif op == "exit":
            el.process_exited(pid, now)
        el.kick_queue = False
        assert el.queued() + len(dq) + len(in_flight) + len(done) == len(added)
        assert el.empty() == (el.queued() == 0)
    el.dispatch(now, force=True)
    assert el.queued() == 0 and el.empty()
    ids = [rq.id for rq in dq] + [rq.id for rq in in_flight] + done
    assert len(ids) == len(set(ids)) == len(added)
    assert set(ids) == added
