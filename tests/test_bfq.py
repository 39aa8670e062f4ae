"""BFQ's behaviour through its hooks, driven by the fake device loop of test_bfq_loop:
hand-traced idling, weight raising and its end, service in proportion to weights,
request choice within a queue, merging hooks, depth limits, and a hypothesis property
(every inserted request is dispatched and completed once, nothing is lost)."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.block.mq.elevator import MqHctx, MqQueueInfo
from blksim.block.request import Bio, MqRequest, ioprio_value
from blksim.schedulers.bfq import BfqElevator, sbitmap_shift
from blksim.schedulers.bfq.budget import BUDGET_EXHAUSTED, TOO_IDLE
from tests.test_bfq_loop import Loop, Proc

HCTX = MqHctx(0)


def make(kernel="6.6", rotational=True, depth=1, **params):
    info = MqQueueInfo(nr_requests=64, nr_hw_queues=1, queue_depth=depth,
                       rotational=rotational, kernel=kernel, hz=250)
    return BfqElevator.create(info, params)


_ids = iter(range(1, 10**9))


def rq_of(pid, sector, size=256, now=0.0, sync=True, write=False, ioprio=None):
    n = next(_ids)
    bio = Bio(n, sector, size, write, sync, pid,
              ioprio if ioprio is not None else ioprio_value(2, 4))
    return MqRequest(n, bio, now, hctx=HCTX)


def test_idling_keeps_a_sequential_reader_in_service_while_it_thinks():
    """Traced from bfq_completed_request / bfq_arm_slice_timer / bfq_select_queue /
    bfq_rq_enqueued (6.6): A (sequential, in service) completes its request and has
    none queued: bfq_better_to_idle holds (rotational disk, A sequential, I/O-bound,
    short think time), so the idle timer is armed for slice_idle = 8 ms and
    dispatch_request hands out nothing although B has a request queued. A's next
    request 0.2 ms later stops the timer and is dispatched (A stays I/O-bound:
    bfq_update_io_intensity counts 0.2 ms idle in 3.2 ms, under a fifth). When A then
    goes quiet, the timer fires 8 ms after its completion, A expires too idle, and B
    is served."""
    el = make(low_latency=0)
    a1, b1 = rq_of(1, 0), rq_of(2, 50_000_000)
    el.insert_requests([a1], False, 0.0)
    el.insert_requests([b1], False, 0.0)
    assert el.dispatch_request(HCTX, 0.0) is a1
    assert el.in_service_queue.pid == 1
    el.finish_request(a1, 0.003)
    assert el.wakeup_at == 0.003 + 0.008
    assert el.in_service_queue.wait_request
    for t in (0.003, 0.0031):
        assert el.dispatch_request(HCTX, t) is None          # B waits
    assert el.has_work(HCTX)
    a2 = rq_of(1, 256, now=0.0032)
    el.insert_requests([a2], False, 0.0032)
    assert el.wakeup_at is None                              # idling ended
    assert el.dispatch_request(HCTX, 0.0032) is a2
    el.finish_request(a2, 0.0062)
    assert abs(el.wakeup_at - 0.0142) < 1e-12
    assert el.dispatch_request(HCTX, 0.010) is None
    el.log_expirations = True
    el.timer_fired(0.0142)
    assert [(pid, reason) for _, pid, reason, _ in el.expirations] == [(1, TOO_IDLE)]
    assert el.kick_queue
    assert el.dispatch_request(HCTX, 0.0142) is b1
    assert el.in_service_queue.pid == 2


def test_no_idling_for_a_seeky_queue_on_a_queueing_ssd():
    """On a non-rotational device known to queue (hw_tag), a seeky queue in a symmetric
    scenario is not idled for: idling_boosts_thr_without_issues is false and
    nothing calls for service guarantees once another queue is busy. (The second
    process starts 1 s later: created within 180 ms of the first, its queue would be
    stably merged with it at once on such a device, from 5.15.)"""
    el = make(rotational=False, depth=32, low_latency=0)
    el.hw_tag = 1
    q_rqs = [rq_of(1, s * 100_000, size=8) for s in range(40)]   # small: seeky on SSD
    for r in q_rqs:
        el.insert_requests([r], False, 0.0)
    el.insert_requests([rq_of(2, 900_000_000)], False, 1.0)
    got = [el.dispatch_request(HCTX, 1.0) for _ in range(3)]
    q1 = el.queues[(1, True)]
    assert q1.seeky
    from blksim.schedulers.bfq import idling
    assert not idling.better_to_idle(el, q1)
    assert all(r is not None for r in got)


def test_service_divides_in_proportion_to_weights():
    """Three always-backlogged sequential readers at BE levels 0, 4 and 6 (weights 80,
    40, 20) on a disk: over many budgets the sectors served divide 4 : 2 : 1."""
    loop = Loop(params={"low_latency": 0})
    loop.add(Proc(1, start=0, ioprio=ioprio_value(2, 0)))
    loop.add(Proc(2, start=100_000_000, ioprio=ioprio_value(2, 4)))
    loop.add(Proc(3, start=200_000_000, ioprio=ioprio_value(2, 6)))
    loop.run(60.0)
    s1, s2, s3 = (loop.procs[p].done_sectors for p in (1, 2, 3))
    assert abs(s1 / s3 - 4.0) < 0.4
    assert abs(s2 / s3 - 2.0) < 0.2


def test_rt_class_starves_best_effort():
    """RT before BE whatever the weights. The one BE request served is traced: the RT
    reader's first request is in the driver when the BE reader arrives, whose larger
    weight preempts it (bfq_bfqq_higher_class_or_weight compares weights across
    classes); at that completion the RT queue, put back in service, has no request
    yet (its process submits right after) and expires; the BE request goes out,
    and from then on the RT queue preempts on every arrival."""
    loop = Loop(params={"low_latency": 0})
    loop.add(Proc(1, start=0, ioprio=ioprio_value(1, 7)))
    loop.add(Proc(2, start=100_000_000, ioprio=ioprio_value(2, 0)))
    loop.run(5.0)
    assert loop.procs[2].done == 1 and loop.procs[1].done > 1000


def _raised_reader(think=0.010, size=64, kernel="6.6"):
    loop = Loop(kernel=kernel)
    loop.add(Proc(1, start=0, size=size, think=think))
    return loop


def test_a_new_process_is_raised_and_the_raising_ends_after_wr_duration():
    """bfq_bfqq_handle_idle_busy_switch: a new sync queue (budget timeout in the distant
    past) of default weight is interactive: wr_coeff 30 (weight 40 x 30) for
    bfq_wr_duration = rate_dur_prod / peak_rate = 14000 x 1750 / 9333 = 2625 jiffies
    (10.5 s at HZ 250) on a rotational disk. bfq_update_wr_data ends it at the first
    dispatch after that time (the reader thinks 10 ms: 64 sectors each ~10.6 ms,
    ~60000 sectors in 10.5 s, under max_service_from_wr)."""
    loop = _raised_reader()
    el = loop.el
    loop.run(0.001)
    q = el.queues[(1, True)]
    assert q.wr_coeff == 30 and q.weight == 1200
    assert q.wr_cur_max_time == 2625
    start = q.last_wr_start_finish
    loop.run(10.4)
    assert q.wr_coeff == 30 and q.service_from_wr < 120000
    loop.run(10.7)
    assert q.wr_coeff == 1 and q.weight == 40
    # ended at the first dispatch after last_wr_start_finish + wr_cur_max_time
    assert q.last_wr_start_finish > start + 2625


def test_raising_ends_after_max_service_from_wr():
    """A raised queue that receives more than max_service_from_wr = 120000 sectors while
    raised loses the raising at its next dispatch (bfq_update_wr_data)."""
    loop = _raised_reader(think=0.0, size=256)
    el = loop.el
    loop.run(0.001)
    q = el.queues[(1, True)]
    assert q.wr_coeff == 30
    loop.run(1.5)                     # 2.56 ms per request: 120000 sectors in ~1.2 s
    assert q.wr_coeff == 1
    assert 120000 < q.service_from_wr <= 120000 + 256


def test_raised_again_after_two_seconds_idle():
    """Interactive again: busy after more than bfq_wr_min_idle_time = 2 s idle since its
    budget timeout (set when it emptied with nothing in flight)."""
    loop = _raised_reader(think=0.0, size=256)
    proc = loop.procs[1]
    loop.run(1.5)
    q = loop.el.queues[(1, True)]
    assert q.wr_coeff == 1
    proc.left = 0                                  # the process pauses
    loop.run(2.0)
    assert not q.busy
    proc.left = 5
    loop.push(4.6, "submit", proc)
    loop.run(4.7)
    assert q.wr_coeff == 30


def test_no_raising_without_low_latency():
    loop = Loop(params={"low_latency": 0})
    loop.add(Proc(1))
    loop.run(0.1)
    assert loop.el.queues[(1, True)].wr_coeff == 1


def test_budget_exhausted_quadruples_the_budget():
    """__bfq_bfqq_recalc_budget: a sync queue expiring with its budget exhausted gets
    4 x its max budget (at most bfq_max_budget)."""
    el = make(low_latency=0)
    el.log_expirations = True
    for i in range(200):
        el.insert_requests([rq_of(1, i * 256)], False, 0.0)
    el.insert_requests([rq_of(2, 90_000_000)], False, 0.0)
    q = el.queues[(1, True)]
    first_budget = q.max_budget
    assert first_budget == 2 * 16384 // 3                 # bfq_init_bfqq
    t = 0.0
    while not el.expirations:
        rq = el.dispatch_request(HCTX, t)
        t += 0.001
        el.finish_request(rq, t)
    assert el.expirations[0][1:3] == (1, BUDGET_EXHAUSTED)
    assert q.max_budget == min(4 * first_budget, el.bfq_max_budget)


def test_choose_req_prefers_forward_and_short_backward_seeks():
    """bfq_choose_req with the head at 1000: 1100 (100 ahead) beats 960 (40 behind,
    counted 80) loses to... 960 counts 40 x 2 = 80 < 100, so 960 wins; a request
    behind by more than back_seek_max (16384 KiB = 32768 sectors) wraps and loses."""
    from blksim.schedulers.bfq.queue import choose_req
    ahead, behind, far = rq_of(1, 1100), rq_of(1, 960), rq_of(1, 1000 - 40000)
    assert choose_req(ahead, behind, 1000, 32768, 2) is behind
    assert choose_req(ahead, rq_of(1, 900), 1000, 32768, 2) is ahead   # 200 > 100
    assert choose_req(far, ahead, 1000, 32768, 2) is ahead
    assert choose_req(rq_of(1, 5000, sync=False), far, 1000, 32768, 2) is far  # sync first


def test_merging_hooks_keep_the_queue_consistent():
    el = make()
    r1 = rq_of(1, 1000, size=8)
    r2 = rq_of(1, 1016, size=8)
    el.insert_requests([r1, r2], False, 0.0)
    bio = Bio(999, 1008, 8, False, True, 1)
    assert el.request_merge(bio, 0.0) is r2                # front-merge candidate
    assert el.allow_merge(r1, bio)
    other = Bio(998, 1008, 8, False, True, 2)
    assert not el.allow_merge(r1, other)                   # another process's queue
    assert not el.allow_merge(rq_of(1, 5, sync=False), bio)
    # r1 grows by the bio (back merge) then absorbs r2
    r1.nr_sectors = 24
    el.requests_merged(r1, r2, 0.0)
    el.finish_request(r2, 0.0)
    assert el.queued() == 1
    assert el.dispatch_request(HCTX, 0.0) is r1
    assert el.empty()


def test_limit_depth_per_word():
    """bfq_update_depths (6.6): 64 scheduler tags -> words of 16 (sbitmap shift 4):
    async 8, sync writes 12; while a queue is raised 3 and 6; sync reads unlimited."""
    assert sbitmap_shift(64) == 4 and sbitmap_shift(256) == 6 and sbitmap_shift(2) == 6
    el = make()
    assert el.limit_depth(False, True) is None
    assert el.limit_depth(True, False) == 8 and el.limit_depth(True, True) == 12
    el.wr_busy_queues = 1
    assert el.limit_depth(True, False) == 3 and el.limit_depth(True, True) == 6
    el.depth_updated(256)
    el.wr_busy_queues = 0
    assert el.limit_depth(True, False) == 32 and el.limit_depth(True, True) == 48


def test_tunables_per_kernel_and_strict_guarantees():
    assert {t.name for t in BfqElevator.tunables_for("5.4")} == \
        {t.name for t in BfqElevator.tunables_for("6.6")}
    el = make(strict_guarantees=1, slice_idle=2)
    assert el.bfq_slice_idle == 8_000_000
    assert make(slice_idle_us=500).bfq_slice_idle == 500_000
    assert make(max_budget=4096).bfq_max_budget == 4096
    # the configuration hands over every tunable: defaults are not "written"
    every = {t.name: t.default for t in BfqElevator.tunables_for("6.6")}
    assert make(**every).bfq_timeout == 31                  # HZ/8 at HZ 250, not 32
    el = make(**dict(every, slice_idle=3))
    assert el.bfq_slice_idle == 3_000_000 and el.bfq_max_budget == 16384
    el = make(**dict(every, timeout_sync=250))
    assert el.bfq_timeout == 63                              # msecs_to_jiffies at HZ 250
    assert el.bfq_max_budget == (9333 * 1000 * 252) >> 16    # bfq_calc_max_budget


_procs = st.lists(st.tuples(
    st.integers(0, 3),            # ioprio class (0 = none)
    st.integers(0, 7),            # level
    st.booleans(),                # sync
    st.booleans(),                # write
    st.sampled_from([8, 64, 256]),
    st.sampled_from([0.0, 0.001, 0.02]),
    st.booleans(),                # sequential
    st.integers(1, 30),           # count
    st.integers(1, 3),            # depth
), min_size=1, max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(procs=_procs, kernel=st.sampled_from(["5.4", "5.10", "5.15", "6.1", "6.6"]),
       rotational=st.booleans(), depth=st.sampled_from([1, 4, 32]),
       low_latency=st.integers(0, 1), strict=st.integers(0, 1),
       slice_idle=st.sampled_from([0, 8]), requeue_every=st.sampled_from([0, 7]),
       close=st.booleans(), seed=st.integers(0, 1000))
def test_every_request_is_dispatched_and_completed_once(procs, kernel, rotational, depth,
                                                        low_latency, strict, slice_idle,
                                                        requeue_every, close, seed):
    loop = Loop(kernel=kernel, rotational=rotational, depth=depth,
                params={"low_latency": low_latency, "strict_guarantees": strict,
                        "slice_idle": slice_idle},
                requeue_every=requeue_every, exit_when_done=True)
    rnd = random.Random(seed)
    for i, (cls, level, sync, write, size, think, seq, count, pdepth) in enumerate(procs):
        pattern = None if seq else iter(lambda: rnd.randrange(0, 10**8, 8), None)
        loop.add(Proc(i + 1, start=i * (4096 if close else 10**8), size=size, count=count,
                      think=think,
                      sync=sync or not write, write=write,
                      ioprio=ioprio_value(cls, level), depth=pdepth, pattern=pattern,
                      begin=rnd.random() * 0.05))
    loop.run(3600.0)
    inserted = [rq.id for rq in loop.inserted]
    completed = [rq.id for rq in loop.completed]
    assert sorted(completed) == sorted(inserted)
    assert len(set(completed)) == len(completed)
    assert len(loop.dispatched) == len(inserted) + loop.requeues
    el = loop.el
    assert el.empty() and el.queued() == 0 and el.tot_rq_in_driver == 0
    queues = list(el.queues.values())
    assert not any(b.sort_list or b.dispatched for b in queues)
    # busy but empty: a queue preempted while idling guards its share (kernel state)
    for cls in (1, 2, 3):
        assert el.busy_queues[cls - 1] == sum(b.busy and b.ioprio_class == cls
                                              for b in queues)
    assert el.wr_busy_queues == sum(b.busy and b.wr_coeff > 1 for b in queues)
    assert all(t.wsum >= 0 for t in el.wf2q.sd.trees)
    assert not el.started


def _interleaved(kernel, rotational=True, gap=0.001):
    """Two processes reading alternate 256-sector chunks of one file (a split dd)."""
    loop = Loop(kernel=kernel, rotational=rotational, params={"low_latency": 0})
    for i in (0, 1):
        pattern = iter(range(i * 256, 10**9, 512))
        loop.add(Proc(i + 1, size=256, pattern=pattern, begin=i * gap))
    return loop


def test_cooperating_processes_share_one_queue():
    """bfq_setup_cooperator (EQM, 5.10: no stable merge): the second process's first
    request is within 8192 sectors of where the in-service queue's last dispatch
    ended, so its queue is merged with it (bfq_setup_merge, bfq_merge_bfqqs): its
    context now points at the first process's queue, marked coop, pid -1."""
    loop = _interleaved("5.10")
    loop.run(0.5)
    el = loop.el
    shared = el.bics[1].bfqq[1]
    assert el.bics[2].bfqq[1] is shared
    assert shared.coop and shared.pid == -1 and shared.ref == 2
    # the merged stream is sequential: dispatches advance without seeks
    sectors = [rq.sector for _, rq in loop.dispatched[-50:]]
    assert sectors == sorted(sectors)


def test_stable_merge_at_once_on_a_queueing_ssd_from_5_15():
    """bfq_do_or_sched_stable_merge: a sync queue created within bfq_burst_interval
    (180 ms) of the previous one, same class and level, is merged at once when the
    device is non-rotational with queueing (5.15+); 5.10 has no stable merging (and no
    EQM on such a device). Here the processes read far apart."""
    for kernel, merged in (("6.6", True), ("5.10", False)):
        loop = Loop(kernel=kernel, rotational=False, depth=32, params={"low_latency": 0})
        loop.add(Proc(1, start=0))
        loop.add(Proc(2, start=500_000_000, begin=0.05))
        loop.run(0.2)
        el = loop.el
        assert (el.bics[1].bfqq[1] is el.bics[2].bfqq[1]) is merged
        loop.add(Proc(3, start=900_000_000, begin=1.0))     # 1 s later: never merged
        loop.run(1.2)
        assert el.bics[3].bfqq[1] is not el.bics[1].bfqq[1]


def test_a_queue_over_its_share_gets_depth_one_from_6_1():
    """bfqq_request_over_limit (6.1+): two BE queues of weight 40 busy (wsum 80); a sync
    read of process 1 may use 64 * 40 / 80 = 32 scheduler tags before its requests
    get shallow depth 1; 5.15 has no such rule."""
    for kernel, capped in (("6.1", True), ("5.15", False)):
        el = make(kernel=kernel, low_latency=0)
        rqs = [rq_of(1, i * 8, size=8) for i in range(32)]
        el.insert_requests(rqs, False, 0.0)
        el.insert_requests([rq_of(2, 90_000_000)], False, 0.0)
        assert el.limit_depth(False, True, pid=1) == (1 if capped else None)
        assert el.limit_depth(False, True, pid=2) is None
        assert el.limit_depth(False, True) is None            # no process: no rule
        done = el.dispatch_request(HCTX, 0.0)
        el.finish_request(done, 0.001)                         # freed: 31 allocated
        assert el.limit_depth(False, True, pid=1) is None


def _soft_rt_reader(loop):
    """8 sectors every 50 ms: 160 sectors/s, far under bfq_wr_max_softrt_rate."""
    proc = Proc(1, size=8, think=0.05)
    loop.add(proc)
    return proc


def test_a_periodic_reader_is_raised_as_soft_real_time_and_falls_back():
    """bfq_update_bfqq_wr_on_rq_arrival: a new queue is interactive (x30); at its next
    activation, idle for less than 2 s but past soft_rt_next_start (nothing in
    flight, rate far under 7000 sectors/s), it becomes soft real-time: wr_coeff
    30 x 100 for bfq_wr_rt_max_time = 300 ms (75 jiffies), renewed at each such
    activation. When the process turns greedy its queue stays busy (no renewal):
    bfq_update_wr_data ends the soft real-time period 75 jiffies after its last
    renewal and, the interactive period it interrupted not being over, switches back
    to interactive raising (switch_back_to_interactive_wr)."""
    loop = Loop(params={})
    proc = _soft_rt_reader(loop)
    loop.run(0.001)
    q = loop.el.queues[(1, True)]
    assert q.wr_coeff == 30
    loop.run(0.2)
    assert q.wr_coeff == 3000 and q.wr_cur_max_time == 75
    loop.run(2.0)
    assert q.wr_coeff == 3000                       # renewed at each activation
    renewed = q.last_wr_start_finish
    proc.think, proc.size, proc.depth = 0.0, 256, 4
    for _ in range(3):
        loop.push(loop.now, "submit", proc)        # greedy: 4 outstanding from now
    loop.run(2.5)
    assert q.wr_coeff == 30 and q.wr_cur_max_time == 2625
    assert q.last_wr_start_finish < renewed         # back to the interactive period's start


def test_injection_while_idling_for_service_guarantees():
    """bfq_select_queue / bfq_choose_bfqq_for_injection on a queueing SSD: A (weight 80)
    is in service, empty and idled (asymmetric: its weight is not the smallest), so
    B's request (weight 40) may be injected while fewer than A's inject_limit
    requests are in the driver. 6.6 skips a large (>= 64 sectors) request while the
    driver holds any; up to 6.1 the limit becomes 1 for it."""
    for kernel in ("6.6", "6.1"):
        el = make(kernel=kernel, rotational=False, depth=32, low_latency=0)
        el.hw_tag = 1
        el.nonrot_with_queueing = True
        a1 = rq_of(1, 0, size=8, ioprio=ioprio_value(2, 0))
        el.insert_requests([a1], False, 0.0)
        assert el.dispatch_request(HCTX, 0.0) is a1
        el.finish_request(a1, 0.0001)
        qa = el.in_service_queue
        assert qa.pid == 1 and qa.wait_request              # idling
        b_small = rq_of(2, 10**8, size=8, now=1.0)
        b_large = rq_of(2, 2 * 10**8, size=128, now=1.0)
        el.insert_requests([b_small, b_large], False, 0.0002)
        qa.inject_limit = 0
        assert el.dispatch_request(HCTX, 0.0003) is None     # limit 0: nothing
        qa.inject_limit = 2
        first = el.dispatch_request(HCTX, 0.0003)
        assert first is b_small                              # B's next request
        second = el.dispatch_request(HCTX, 0.0003)
        # one request in the driver now; B's large request:
        assert second is None                                # 6.6 skips it; 6.1: limit 1
        assert el.in_service_queue is qa


def test_inject_limit_adapts_to_the_service_time():
    """bfq_update_inject_limit: no baseline yet and one request in the driver: the
    waited request's service time becomes the baseline, limit at least 1; later, with
    injection, a time >= 1.5 x baseline lowers the limit, a shorter one raises it
    (while the limit does not exceed the most requests seen in the driver)."""
    from blksim.schedulers.bfq import idling
    from blksim.schedulers.bfq.queue import BfqQueue
    el = make()
    q = BfqQueue(1, True, ioprio_value(2, 4), 0, 0, 16384)
    el.tot_rq_in_driver = 1
    el.last_empty_occupied_ns = 0
    el._tick(0.004)                                   # 4 ms
    idling.update_inject_limit(el, q)
    assert q.last_serv_time_ns == 4_000_000 and q.inject_limit == 1
    el.rqs_injected = True
    el.max_rq_in_driver = 4
    el._tick(0.007)                                   # 7 ms >= 6 ms: lower
    idling.update_inject_limit(el, q)
    assert q.inject_limit == 0
    el.rqs_injected = True
    el._tick(0.005)                                   # 5 ms < 6 ms: raise
    idling.update_inject_limit(el, q)
    assert q.inject_limit == 1 and q.last_serv_time_ns == 4_000_000


def test_a_large_burst_of_new_queues_is_not_raised():
    """bfq_handle_burst: processes whose queues are created less than 180 ms apart form a
    burst; at the 8th (bfq_large_burst_thresh) all of them are marked in_large_burst,
    and so is every queue created while the burst goes on: they lose (or never get)
    weight raising. A queue created 1 s later starts a new burst and is raised."""
    loop = Loop(kernel="5.10")
    for i in range(10):
        loop.add(Proc(i + 1, start=i * 10**7, size=64, think=0.001, begin=i * 0.02))
    loop.run(0.5)
    queues = [loop.el.queues[(i + 1, True)] for i in range(10)]
    assert all(q.in_large_burst for q in queues)
    assert all(q.wr_coeff == 1 for q in queues[8:])        # created into the burst
    loop.run(3.0)
    assert all(q.wr_coeff == 1 for q in queues)
    late = Proc(11, start=5 * 10**8, size=64, think=0.001, begin=4.0)
    loop.add(late)
    loop.run(4.1)
    assert loop.el.queues[(11, True)].wr_coeff == 30


def test_a_merged_queue_found_seeky_is_split():
    """__bfq_bfqq_expire marks a merged (coop) queue that has become seeky for
    splitting; at each process's next request bfq_init_rq splits it
    (bfq_split_bfqq): the process still using the queue keeps it, the other gets a
    new queue with the state saved in its context."""
    rnd = random.Random(5)

    def then_random(i):
        for s in range(i * 256, 400 * 512, 512):      # interleaved: cooperating
            yield s
        while True:                                      # then seeky
            yield rnd.randrange(0, 10**8, 8)

    loop = Loop(kernel="5.10", params={"low_latency": 0})
    for i in (0, 1):
        loop.add(Proc(i + 1, size=256, pattern=then_random(i), begin=i * 0.001))
    loop.run(0.3)
    el = loop.el
    shared = el.bics[1].bfqq[1]
    assert el.bics[2].bfqq[1] is shared and shared.coop
    loop.run(5.0)
    q1, q2 = el.bics[1].bfqq[1], el.bics[2].bfqq[1]
    assert q1 is not q2
    assert not q1.coop and not q2.coop
    assert {q1.pid, q2.pid} == {1, 2}


def test_a_front_merged_request_is_found_at_its_new_start():
    """elv_rb_find compares live start sectors: after a front merge that keeps its
    place, the request is found at its new start (bfq_request_merge)."""
    el = make()
    r = rq_of(1, 1000, size=8)
    el.insert_requests([r], False, 0.0)
    r.sector, r.nr_sectors = 992, 16                  # a bio 992+8 merged at its front
    el.request_merged(r, True, 0.0)
    assert el.request_merge(Bio(1, 984, 8, False, True, 1), 0.0) is r
    assert el.dispatch_request(HCTX, 0.0) is r
