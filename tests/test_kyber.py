"""Kyber (block/kyber-iosched.c, Linux 5.4-6.6), driven through the multi-queue hook table
with numbers for ``now``.

The expected orders, depths and percentiles below were traced by hand from
kyber_dispatch_request / kyber_dispatch_cur_domain / kyber_flush_busy_kcqs (dispatch),
add_latency_sample / calculate_percentile / kyber_timer_fn / kyber_resize_domain
(statistics) and kyber_limit_depth / kyber_depth_updated with sbitmap_calculate_shift and
sbitmap_get_shallow (async depth). "R3" is the fourth read made, "W0" the first write.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blksim.block.mq.elevator import MqHctx, MqQueueInfo
from blksim.block.request import (REQ_OP_DISCARD, REQ_OP_FLUSH, REQ_OP_READ, REQ_OP_WRITE,
                                   Bio, MqRequest)
from blksim.schedulers.kyber import (DISCARD, KYBER_DEPTH, OTHER, READ, WRITE,
                                     KyberElevator, latency_bucket, percentile_bucket,
                                     variant_for_kernel)

_ids = itertools.count()


def make(kernel: str = "6.6", nr_requests: int = 64, nr_hw_queues: int = 1,
         nr_cpus: int = 2, hz: int = 250, **params):
    """Kyber on a queue of ``nr_hw_queues`` hctxs over ``nr_cpus`` CPUs (CPU c on hctx
    c % nr_hw_queues), set up as the queue does: init_hctx each, then depth_updated."""
    info = MqQueueInfo(nr_requests=nr_requests, nr_hw_queues=nr_hw_queues, queue_depth=32,
                       rotational=True, kernel=kernel, hz=hz, nr_cpus=nr_cpus)
    el = KyberElevator.create(info, params)
    hctxs = [MqHctx(i, tuple(c for c in range(nr_cpus) if c % nr_hw_queues == i))
             for i in range(nr_hw_queues)]
    for h in hctxs:
        el.init_hctx(h)
    el.depth_updated(nr_requests)
    return el, hctxs


class Rq(MqRequest):
    """A request with a label for readable traces (and an ``op`` when asked)."""
    __slots__ = ("label", "op")


def mkrq(el, hctx, write=False, ctx=0, now=0.0, sector=None, label=None):
    i = next(_ids)
    bio = Bio(i, sector if sector is not None else i * 64, 8, write, not write, pid=1)
    rq = Rq(i, bio, now, hctx=hctx, ctx=ctx)
    rq.label = label if label is not None else ""
    el.prepare_request(rq, now)
    return rq


def mk(el, hctx, label: str, ctx: int = 0, now: float = 0.0, op=None) -> Rq:
    i = next(_ids)
    write = label[0] == "W"
    rq = Rq(i, Bio(i, i * 64, 8, write, not write, pid=1), now, hctx=hctx, ctx=ctx)
    rq.label = label
    if op is not None:
        rq.op = {"read": REQ_OP_READ, "write": REQ_OP_WRITE, "flush": REQ_OP_FLUSH,
                 "discard": REQ_OP_DISCARD}[op]
    el.prepare_request(rq, now)
    return rq


def insert(el, hctx, labels, ctx=0, now=0.0) -> dict:
    rqs = [mk(el, hctx, lab, ctx, now) for lab in labels]
    el.insert_requests(rqs, False, now)
    return {rq.label: rq for rq in rqs}


def drain(el, hctx, now=0.0) -> list[str]:
    """Dispatch until Kyber hands back nothing (the device takes everything at once)."""
    out = []
    while (rq := el.dispatch_request(hctx, now)) is not None:
        out.append(rq.label)
    return out


# --- constants, tunables, variants ---------------------------------------------------

def test_tunables_and_defaults():
    el, _ = make()
    assert el.params == {"read_lat_nsec": 2_000_000, "write_lat_nsec": 10_000_000}
    assert el.depth == [256, 128, 64, 16]
    assert el.name == "kyber" and not el.queue_wide and el.uses_timers
    assert not el.uses_merge_hash
    with pytest.raises(ValueError, match="read_lat_nsec"):
        make(read_lat_nsec=-1)
    with pytest.raises(ValueError, match="unknown tunable"):
        make(fifo_batch=3)
    el, _ = make(write_lat_nsec=20_000_000)
    assert el.latency_targets[WRITE] == 20_000_000


def test_variants():
    assert variant_for_kernel("5.4") == "5.4"
    assert variant_for_kernel("5.12") == "5.10"
    assert variant_for_kernel("6.6") == "6.6"
    with pytest.raises(ValueError, match="5.4"):
        variant_for_kernel("4.19")


def test_domains():
    el, (h,) = make()
    from blksim.schedulers.kyber import sched_domain
    got = [sched_domain(mk(el, h, lab, op=op)) for lab, op in
           (("R", None), ("W", None), ("W", "discard"), ("W", "flush"), ("R", "read"))]
    assert got == [READ, WRITE, DISCARD, OTHER, READ]


# --- dispatch -------------------------------------------------------------------------

def test_batches_rotate_across_domains():
    """20 reads and 10 writes queued, tokens to spare: a READ batch of 16, a WRITE batch
    of 8; DISCARD and OTHER are empty, so READ again -- its last 4, and with READ empty
    mid-batch the rotation moves on to WRITE for its last 2."""
    el, (h,) = make()
    insert(el, h, [f"R{i}" for i in range(20)] + [f"W{i}" for i in range(10)])
    assert el.has_work(h) and el.queued() == 30
    order = drain(el, h)
    assert order == ([f"R{i}" for i in range(16)] + [f"W{i}" for i in range(8)]
                     + [f"R{i}" for i in range(16, 20)] + ["W8", "W9"])
    assert el.empty() and not el.has_work(h)
    assert el.tokens_in_use == [20, 10, 0, 0]


def test_discard_and_other_batches_of_one():
    """cur_domain starts at READ; with one of each kind queued the rotation is READ,
    WRITE, DISCARD, OTHER, and a batch of one each for the last two."""
    el, (h,) = make()
    rqs = [mk(el, h, "W1", op="flush"), mk(el, h, "W2", op="discard"),
           mk(el, h, "W3", op="discard"), mk(el, h, "W4"), mk(el, h, "R5"),
           mk(el, h, "W6", op="flush")]
    el.insert_requests(rqs, False, 0.0)
    # READ: R5 (batch not full, but READ empties -> rotate) WRITE: W4, DISCARD: W2
    # (batch of 1 full -> rotate) OTHER: W1, (batch full) READ empty, WRITE empty,
    # DISCARD: W3, OTHER: W6.
    assert drain(el, h) == ["R5", "W4", "W2", "W1", "W3", "W6"]


def test_flush_moves_busy_ctxs_in_ctx_order_only_with_a_token():
    """Writes wait in their ctx lists (still mergeable) while WRITE has no token; once a
    token is freed the hctx is kicked, and the token's holder flushes every busy ctx
    list in ctx order (sbitmap_for_each_set from bit 0) onto the hctx list."""
    el, (h,) = make(nr_cpus=3)
    el.depth[WRITE] = 1
    w0 = insert(el, h, ["W0"], ctx=0)["W0"]
    assert drain(el, h) == ["W0"]
    insert(el, h, ["Wa"], ctx=2)
    insert(el, h, ["Wb"], ctx=1)
    insert(el, h, ["Wc"], ctx=2)
    assert el.dispatch_request(h, 0.0) is None          # no WRITE token: the hctx waits
    assert el.throttled[WRITE] >= 1
    # Still in the ctx lists, where a bio of ctx 2 would look for a merge:
    assert [r.label for r in el.merge_list(Bio(99, 0, 8, True, False, 1), 2)] == ["Wa", "Wc"]
    assert el.has_work(h)
    el.timers_changed = False
    el.finish_request(w0, 0.001)
    assert el.kick_queue and el.timers_changed
    el.kick_queue = False
    first = el.dispatch_request(h, 0.001)
    assert first.label == "Wb"                            # ctx 1 before ctx 2
    assert el.merge_list(Bio(99, 0, 8, True, False, 1), 2) == []
    assert el.dispatch_request(h, 0.001) is None          # the one token is held by Wb
    el.finish_request(first, 0.002)
    # Wa, Wc now wait on the hctx list: a new write of ctx 0 stays in its ctx list
    # behind them.
    insert(el, h, ["Wd"], ctx=0)
    assert el.dispatch_request(h, 0.002).label == "Wa"


def test_no_kick_when_nobody_waits():
    el, (h,) = make()
    (r,) = insert(el, h, ["R0"]).values()
    assert drain(el, h) == ["R0"]
    el.finish_request(r, 0.001)
    assert not el.kick_queue and el.tokens_in_use == [0, 0, 0, 0]
    el.finish_request(r, 0.001)                            # no token any more: nothing
    assert el.tokens_in_use == [0, 0, 0, 0]


def test_tokens_are_queue_wide_across_hctxs():
    """One pool per domain for the whole queue: hctx 0 holding WRITE's only two tokens
    leaves hctx 1 waiting; a token freed on hctx 0's side kicks the queue."""
    el, (h0, h1) = make(nr_hw_queues=2, nr_cpus=2)
    el.depth[WRITE] = 2
    a = insert(el, h0, ["W0", "W1"], ctx=0)
    insert(el, h1, ["W2"], ctx=1)
    assert drain(el, h0) == ["W0", "W1"]
    assert drain(el, h1) == []
    el.finish_request(a["W0"], 0.01)
    assert el.kick_queue
    assert drain(el, h1) == ["W2"]


def test_requeue_gives_the_token_back_and_goes_to_the_head():
    el, (h,) = make()
    el.depth[READ] = 1
    rqs = insert(el, h, ["R0", "R1"])
    assert drain(el, h) == ["R0"]
    el.requeue_request(rqs["R0"], 0.001)
    assert el.tokens_in_use[READ] == 0
    el.insert_requests([rqs["R0"]], True, 0.001)
    # At the head of its ctx list, but R1 already waits on the hctx list: R1 goes first.
    assert drain(el, h) == ["R1"]
    el.finish_request(rqs["R1"], 0.002)
    assert drain(el, h) == ["R0"]


def test_requests_merged_drops_the_victim():
    el, (h,) = make()
    rqs = insert(el, h, ["R0", "R1", "R2"])
    el.requests_merged(rqs["R0"], rqs["R1"], 0.0)
    assert el.queued() == 2
    assert drain(el, h) == ["R0", "R2"]


# --- async depth --------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,after_grow", [("5.4", 12), ("5.10", 12), ("5.15", 24),
                                               ("6.6", 24)])
def test_limit_depth(kernel, after_grow):
    """nr_requests 64: 16-bit words (4 words: sbitmap_calculate_shift), async depth
    16 * 75 / 100 = 12 bits per word. Grown to 128 the map is made anew with 32-bit
    words: 5.15+ recompute 32 * 75 / 100 = 24, 5.4/5.10 keep 12. Shrunk to 32 the map
    keeps its 32-bit words (sbitmap_queue_resize): still 24 from 5.15."""
    el, _ = make(kernel=kernel, nr_requests=64)
    assert el.async_depth == 12
    assert el.limit_depth(True, False) == 12
    assert el.limit_depth(False, True) is None and el.limit_depth(True, True) is None
    el.depth_updated(128)
    assert el.limit_depth(True, False) == after_grow
    el.depth_updated(32)
    assert el.limit_depth(True, False) == after_grow


def test_limit_depth_small_and_large_maps():
    el, _ = make(nr_requests=256)                   # 64-bit words: 48
    assert el.limit_depth(True, False) == 48
    el, _ = make(nr_requests=8)                     # 2-bit words: 1
    assert el.limit_depth(True, False) == 1
    # 1-bit words: 1 * 75 / 100 = 0, and a shallow depth of 0 is no limit at all
    # (__blk_mq_get_tag takes the whole map when data->shallow_depth is 0).
    el, _ = make(nr_requests=4)
    assert el.async_depth == 0 and el.limit_depth(True, False) is None
    assert el.min_shallow_depth == 0


# --- latency statistics and depth scaling ------------------------------------------------

def test_latency_buckets():
    t = 2_000_000
    assert [latency_bucket(x, t) for x in (0, 1, 500_000, 500_001, 2_000_000, 2_000_001,
                                          3_500_001, 10**12)] == [0, 0, 0, 1, 3, 4, 7, 7]
    assert latency_bucket(5, 0) == 4         # a target of 0: buckets 1 ns wide
    # ceil(500 * 99 / 100) = 495: 440 + 54 = 494 < 495, the 495th is in bucket 6
    assert percentile_bucket([0, 440, 0, 0, 54, 0, 6, 0], 99) == 6
    assert percentile_bucket([0, 440, 0, 0, 55, 0, 5, 0], 99) == 4
    assert percentile_bucket([0, 0, 0, 0, 0, 0, 0, 3], 90) == 7


def complete(el, hctx, write: bool, io_ms: float, total_ms: float, now: float) -> None:
    """A request made at now - total, issued at now - io, completed at now."""
    rq = mkrq(el, hctx, write=write, now=now - total_ms / 1000)
    rq.t_dispatch = now - io_ms / 1000
    el.completed_request(rq, now)


def test_timer_is_armed_within_hz_over_10():
    el, (h,) = make(hz=250)
    complete(el, h, False, 1, 1, 0.0123)        # jiffy 3: expires 3 + 25 = 28
    assert el.wakeup_at == pytest.approx(28 / 250)
    complete(el, h, False, 1, 1, 0.05)           # timer_reduce never postpones
    assert el.wakeup_at == pytest.approx(28 / 250)
    el.timer_fired(28 / 250)
    assert el.wakeup_at is None
    complete(el, h, False, 1, 1, 0.2)
    assert el.wakeup_at == pytest.approx((50 + 25) / 250)


def congested_window(el, h, now):
    """500 reads: 440 (I/O 0.4 ms, total 1 ms), 54 (I/O 2.4 ms, total 2.4 ms), 6 (I/O
    2.4 ms, total 3.2 ms); read buckets are 0.5 ms wide. I/O: 440 in bucket 0, 60 in
    bucket 4; p90 = the 450th sample = bucket 4 >= 4: congestion. Total: 440 in bucket
    1, 54 in 4, 6 in 6; p99 = the 495th = bucket 6 (7/4 of the target)."""
    for _ in range(440):
        complete(el, h, False, 0.4, 1.0, now)
    for _ in range(54):
        complete(el, h, False, 2.4, 2.4, now)
    for _ in range(6):
        complete(el, h, False, 2.4, 3.2, now)


def test_read_p99_over_target_shrinks_the_write_depth():
    """Hand-traced kyber_timer_fn. Reads as in congested_window; 500 writes with I/O 1 ms
    (bucket 0 of 2.5 ms) and total 3 ms (bucket 1). Congested, so: READ's p99 bucket 6
    gives 256 * 7 >> 2 = 448, clamped to 256 (no change, not logged); WRITE's p99 bucket
    1 gives 128 * 2 >> 2 = 64. Second window, same samples: WRITE 64 * 2 >> 2 = 32."""
    el, (h,) = make()
    congested_window(el, h, 0.01)
    for _ in range(500):
        complete(el, h, True, 1.0, 3.0, 0.01)
    el.timer_fired(0.1)
    assert el.depth == [256, 64, 64, 16]
    assert el.depth_log == [(0.1, "WRITE", 128, 64)]
    assert el.latency_log == [(0.1, "READ", "I/O", 90, 5, 500),
                              (0.1, "WRITE", "I/O", 90, 1, 500),
                              (0.1, "READ", "total", 99, 7, 500),
                              (0.1, "WRITE", "total", 99, 2, 500)]
    assert el.domain_p99 == [-1, -1, -1]
    congested_window(el, h, 0.15)
    for _ in range(500):
        complete(el, h, True, 1.0, 3.0, 0.15)
    el.timer_fired(0.2)
    assert el.depth[WRITE] == 32
    assert el.depth_log[-1] == (0.2, "WRITE", 64, 32)


def test_bad_p99_grows_without_congestion_and_good_stays():
    """Not congested (every p90 I/O bucket good): only a domain whose own p99 is bad
    changes. Writes with total 20 ms (bucket 7 of 2.5 ms): 128 * 8 >> 2 = 256 -> 128
    (already the maximum: no change). After a shrink to 10, the same window gives 20."""
    el, (h,) = make()
    for _ in range(500):
        complete(el, h, False, 0.1, 0.2, 0.0)
        complete(el, h, True, 1.0, 20.0, 0.0)
    el.timer_fired(0.1)
    assert el.depth == [256, 128, 64, 16] and el.depth_log == []
    assert el.domain_p99[:2] == [0, 7]
    el.depth[WRITE] = 10
    for _ in range(500):
        complete(el, h, False, 0.1, 0.2, 0.2)
        complete(el, h, True, 1.0, 20.0, 0.2)
    el.timer_fired(0.3)
    assert el.depth == [256, 20, 64, 16]


def test_remembered_p99_is_used_once_under_congestion():
    """Window A (not congested): WRITE's p99 bucket 1 is remembered. Window B: reads
    congested, only 10 writes (no p99 this window: fewer than 500 and not a second):
    WRITE uses the remembered bucket 1 -> 128 * 2 >> 2 = 64, and forgets it. Window C:
    congested again, no WRITE p99 and none remembered: WRITE unchanged."""
    el, (h,) = make()
    for _ in range(500):
        complete(el, h, True, 1.0, 3.0, 0.0)
    el.timer_fired(0.1)
    assert el.domain_p99[WRITE] == 1 and el.depth[WRITE] == 128
    congested_window(el, h, 0.15)
    for _ in range(10):
        complete(el, h, True, 1.0, 3.0, 0.15)
    el.timer_fired(0.2)
    assert el.depth[WRITE] == 64 and el.domain_p99[WRITE] == -1
    congested_window(el, h, 0.25)
    el.timer_fired(0.3)
    assert el.depth[WRITE] == 64


def test_percentile_waits_for_500_samples_or_a_second():
    """10 read samples at t=0 (HZ 250). Timer at jiffy 25: the I/O histogram arms READ's
    timeout at 25 + 250 = 275 and answers -1; so does the total one. At jiffy 275 the
    I/O p90 is computed (and the shared timeout cleared); the total histogram then arms
    it again (275 + 250) and, with 10 < 500 samples, still waits."""
    el, (h,) = make(hz=250)
    for _ in range(10):
        complete(el, h, False, 0.1, 3.0, 0.0)
    el.timer_fired(0.1)
    assert el.latency_log == []
    complete(el, h, False, 0.1, 3.0, 1.0)
    el.timer_fired(1.1)
    assert el.latency_log == [(1.1, "READ", "I/O", 90, 1, 11)]
    assert el.depth == list(KYBER_DEPTH)
    el.timer_fired(2.1)
    # 3 ms is bucket 5 of 0.5 ms: 256 * 6 >> 2 = 384, clamped to 256.
    assert el.latency_log[-1] == (2.1, "READ", "total", 99, 6, 11)
    assert el.depth == list(KYBER_DEPTH)


def test_other_domain_has_no_statistics():
    el, (h,) = make()
    rq = mk(el, h, "W0", op="flush")
    rq.t_dispatch = 0.0
    el.completed_request(rq, 1.0)
    assert el.wakeup_at is None


def test_depth_never_below_one():
    el, (h,) = make()
    el.depth[WRITE] = 1
    congested_window(el, h, 0.0)
    for _ in range(500):
        complete(el, h, True, 0.1, 0.1, 0.0)          # bucket 0: 1 * 1 >> 2 = 0 -> 1
    el.timer_fired(0.1)
    assert el.depth[WRITE] == 1


# --- properties -------------------------------------------------------------------------

OPS = st.lists(st.tuples(st.sampled_from(["rd", "wr", "disp", "fin", "requeue", "merge",
                                           "bio", "timer", "nr_requests"]),
                         st.integers(0, 7), st.integers(0, 3)),
               max_size=120)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.sampled_from(["5.4", "6.6"]))
def test_nothing_lost_every_insert_dispatched_once(ops, kernel):
    """Random inserts on 4 ctxs over 2 hctxs, dispatches, completions, requeues, bio and
    request merges and timer windows: a request is handed out once per insert, never
    while its domain's pool is at its depth, tokens match the requests at the device,
    merge_list offers only queued requests of the bio's ctx and domain, and at the end
    everything has been dispatched. Small pools, so that hctxs wait for tokens."""
    el, hctxs = make(kernel=kernel, nr_hw_queues=2, nr_cpus=4)
    el.depth[:] = [3, 2, 64, 16]
    now = 0.0
    inserted: dict[int, int] = {}
    dispatched: dict[int, int] = {}
    merged: set[int] = set()
    at_device: list = []
    queued: list = []

    def dispatch(h):
        before = list(el.tokens_in_use)
        rq = el.dispatch_request(h, now)
        if rq is None:
            return False
        d = rq.sched
        assert before[d] < el.depth[d]                  # a token was free
        assert el.tokens_in_use[d] == before[d] + 1
        assert rq.hctx is h and rq in queued
        queued.remove(rq)
        dispatched[rq.id] = dispatched.get(rq.id, 0) + 1
        rq.t_dispatch = now
        at_device.append(rq)
        return True

    for op, a, b in ops:
        now += 0.003
        if op in ("rd", "wr"):
            ctx = b
            rq = mkrq(el, hctxs[ctx % 2], write=op == "wr", ctx=ctx, now=now)
            el.insert_requests([rq], False, now)
            inserted[rq.id] = inserted.get(rq.id, 0) + 1
            queued.append(rq)
        elif op == "disp":
            dispatch(hctxs[a % 2])
        elif op == "fin" and at_device:
            rq = at_device.pop(a % len(at_device))
            el.completed_request(rq, now)
            el.finish_request(rq, now)
        elif op == "requeue" and at_device:
            rq = at_device.pop(a % len(at_device))
            el.requeue_request(rq, now)
            el.insert_requests([rq], True, now)
            inserted[rq.id] += 1
            queued.append(rq)
        elif op == "merge" and len(queued) >= 2:
            rq, nxt = queued[a % len(queued)], queued[(a + 1 + b) % len(queued)]
            if rq is not nxt and rq.hctx is nxt.hctx:
                el.requests_merged(rq, nxt, now)
                el.finish_request(nxt, now)
                queued.remove(nxt)
                merged.add(nxt.id)
        elif op == "bio":
            write = b % 2 == 1
            bio = Bio(next(_ids), 0, 8, write, not write, pid=1)
            lst = el.merge_list(bio, a % 4)
            for rq in lst:
                assert rq in queued and rq.ctx == a % 4 and rq.write == write
            if lst:
                lst[-1].bios.append(bio)          # a back merge changes no hook's state
        elif op == "timer":
            el.timer_fired(now)
        elif op == "nr_requests":
            el.depth_updated(16 + 16 * a)
        held = [0] * 4
        for rq in at_device:
            held[rq.sched] += 1
        assert el.tokens_in_use == held
        assert el.queued() == len(queued)

    # Drain: finish what is at the device, dispatch again, until nothing is left.
    for _ in range(1000):
        while at_device:
            rq = at_device.pop()
            el.completed_request(rq, now)
            el.finish_request(rq, now)
        progressed = False
        for h in hctxs:
            while dispatch(h):
                progressed = True
        if not progressed and not at_device:
            break
    assert el.empty() and not queued
    assert not any(el.has_work(h) for h in hctxs)
    for rid, n in inserted.items():        # an insert ends in a dispatch or a merge
        assert dispatched.get(rid, 0) == n - (1 if rid in merged else 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3_000)), min_size=1,
                max_size=40))
def test_depths_stay_within_bounds(windows):
    """Whatever the latencies, every domain's depth stays in [1, its maximum]."""
    el, (h,) = make()
    now = 0.0
    for domain_mix, lat_us in windows:
        for i in range(500):
            complete(el, h, (i + domain_mix) % 2 == 1, lat_us / 1000 / (1 + i % 3),
                     lat_us / 1000, now)
        now += 0.1
        el.timer_fired(now)
        for d in range(4):
            assert 1 <= el.depth[d] <= KYBER_DEPTH[d]
    for t, name, old, new in el.depth_log:
        assert old != new
