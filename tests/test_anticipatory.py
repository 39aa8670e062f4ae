"""Hand-traced cases of the anticipatory elevator (Linux 2.6.18 block/as-iosched.c).

Each expectation below was worked out by hand from the kernel's algorithm
(as_dispatch_request(), as_choose_req(), as_close_req(),
as_can_break_anticipation(), as_update_iohist() and as_completed_request() of
block/as-iosched.c, Linux 2.6.18; 2.6.32 for its variant); the comments give
the trace. Times are seconds; at HZ=1000 one jiffy is 1 ms, so ``t=0.012`` is
jiffy 12. Requests are 8 sectors long; "R1000" is a sync read at 1000, "W5000"
an async write at 5000.
"""

from __future__ import annotations

import itertools

import pytest

from blksim.schedulers.anticipatory import (ANTIC_FINISHED, ANTIC_OFF, ANTIC_WAIT_NEXT, ANTIC_WAIT_REQ,
                                     ASYNC, SYNC, AnticipatoryElevator, variant_for_kernel)
from blksim.block.dispatch_queue import DispatchQueue
from blksim.block.request import Bio, Request

_ids = itertools.count()
FAR = 10_000_000


def mkrq(sector, pid=1, write=False, nr=8, sync=None, now=0.0):
    i = next(_ids)
    if sync is None:
        sync = not write
    return Request(i, Bio(i, sector, nr, write, sync, pid=pid), now)


def make(hz=1000, variant="2.6.18", **params):
    dq = DispatchQueue()
    return AnticipatoryElevator(dq, params, hz=hz, variant=variant), dq


def add(el, sector, t, pid=1, write=False):
    rq = mkrq(sector, pid=pid, write=write, now=t)
    el.add(rq, t)
    return rq


def take(el, dq, t):
    """One dispatch call; the device takes what was moved. Returns the request or None."""
    if not el.dispatch(t):
        return None
    rq = dq.pop_head()
    el.activate(rq, t)
    return rq


def serve(el, dq, t, t_done):
    """Dispatch one request at t and complete it at t_done."""
    rq = take(el, dq, t)
    assert rq is not None
    el.completed(rq, t_done)
    return rq


# --- anticipation ---------------------------------------------------------------------

def _waiting_after_first_read(**params):
    """pid 1 reads R1000 (0 -> 10 ms); pid 2's far read arrives; AS waits for pid 1."""
    el, dq = make(**params)
    a1 = add(el, 1000, 0.0)
    assert serve(el, dq, 0.0, 0.010) is a1       # no io_context yet: no anticipation
    b1 = add(el, FAR, 0.010, pid=2)
    el.kick_queue = False
    return el, dq, b1


def test_waits_after_sync_completion_and_serves_close_request_of_same_process():
    el, dq, b1 = _waiting_after_first_read()
    # j=10: pid 1 has no queued IO; B1 is far (new_seek_mean 0); priors are 0: wait.
    assert el.dispatch(0.010) == 0
    assert el.antic_status == ANTIC_WAIT_NEXT
    assert el.wakeup_at == pytest.approx(0.010 + 0.006)   # antic_start 10 + antic_expire 6
    a2 = add(el, 1008, 0.012)                             # pid 1 comes back: breaks
    assert el.antic_status == ANTIC_FINISHED and el.kick_queue and el.wakeup_at is None
    assert take(el, dq, 0.012) is a2                      # next_rq: A2 (0 away) over B1
    assert el.antic_status == ANTIC_OFF
    # pid 1's think time sample: 12 - 10 = 2 jiffies
    aic = el.context(1)
    assert (aic.ttime_samples, aic.ttime_total, aic.ttime_mean) == (32, 64, 6)


def test_timer_ends_anticipation_then_far_request_of_other_process_is_served():
    el, dq, b1 = _waiting_after_first_read()
    assert el.dispatch(0.010) == 0
    el.wakeup_at = None                                   # the block layer clears it
    el.timer_fired(0.016)
    assert el.antic_status == ANTIC_FINISHED and el.kick_queue
    assert el.exit_prob == 32                             # pid 1 had no think-time sample
    assert take(el, dq, 0.016) is b1
    assert el.antic_status == ANTIC_OFF and el.io_context is el.context(2)


def test_close_request_of_another_process_breaks_anticipation():
    el, dq, _ = _waiting_after_first_read()
    assert el.dispatch(0.010) == 0
    # j=11: delay = 1 ms -> window 8192 << 1; last_sector = 1008; 1100 is inside.
    c = add(el, 1100, 0.011, pid=3)
    assert el.antic_status == ANTIC_FINISHED and el.wakeup_at is None
    # the cooperating request fed pid 1's history (think time 1, from 1008 to 1100)
    aic = el.context(1)
    assert aic.ttime_samples == 32 and aic.seek_samples == 32
    assert aic.last_request_pos == 1108
    assert take(el, dq, 0.011) is c


def test_far_request_of_another_process_does_not_break_anticipation():
    el, dq, _ = _waiting_after_first_read()
    assert el.dispatch(0.010) == 0
    add(el, FAR + 64, 0.011, pid=3)
    assert el.antic_status == ANTIC_WAIT_NEXT
    assert el.dispatch(0.011) == 0


@pytest.mark.parametrize("think_ms, waits", [(15, False), (2, True)])
def test_think_time_above_antic_expire_stops_anticipation(think_ms, waits):
    el, dq = make()
    add(el, 1000, 0.0)
    serve(el, dq, 0.0, 0.010)                             # A1 of pid 1
    el.dispatch(0.010)                                    # nothing queued
    t = 0.010 + think_ms / 1000
    a2 = add(el, 1008, t)                                 # think time sample = think_ms
    assert el.context(1).ttime_mean == (256 * think_ms // 8 + 128) // 32
    assert serve(el, dq, t, t + 0.005) is a2
    add(el, FAR, t + 0.005, pid=2)
    # mean 19 > antic_expire 6: dispatch B at once; mean 2 <= 6: wait.
    assert (el.dispatch(t + 0.005) == 0) is waits


def test_new_process_prior_think_time_stops_anticipation():
    # A process without samples is judged by new_ttime_mean.
    el, dq = make()
    el.new_ttime_mean = 7                                 # > antic_expire (6 jiffies)
    add(el, 1000, 0.0)
    serve(el, dq, 0.0, 0.010)
    add(el, FAR, 0.010, pid=2)
    assert el.dispatch(0.010) == 1


def test_wait_req_until_completion_then_timer_from_completion():
    el, dq = make()
    add(el, 1000, 0.0)
    a1 = take(el, dq, 0.0)
    add(el, FAR, 0.001, pid=2)
    assert el.dispatch(0.001) == 0                        # A1 still in flight
    assert el.antic_status == ANTIC_WAIT_REQ and el.wakeup_at is None
    el.completed(a1, 0.020)
    assert el.antic_status == ANTIC_WAIT_NEXT and el.wakeup_at == pytest.approx(0.026)


def test_hz250_timer_fires_on_next_tick():
    el, dq = make(hz=250)
    add(el, 1000, 0.0)
    a = take(el, dq, 0.0)
    el.completed(a, 0.0101)                               # jiffy 2 (8 ms .. 12 ms)
    add(el, FAR, 0.0101, pid=2)
    assert el.dispatch(0.0101) == 0
    assert el.wakeup_at == pytest.approx(3 / 250)         # (2 + 1) jiffies: 12 ms


def test_antic_expire_zero_never_idles():
    el, dq, b1 = _waiting_after_first_read(antic_expire=0)
    assert el.antic_expire == 0
    assert take(el, dq, 0.010) is b1
    assert el.wakeup_at is None and el.antic_status == ANTIC_OFF


def test_process_exit_with_exit_no_coop_breaks():
    el, dq = make()
    el.exit_no_coop = 200                                 # > 128
    add(el, 1000, 0.0)
    serve(el, dq, 0.0, 0.010)
    el.process_exited(1, 0.010)
    add(el, FAR, 0.010, pid=2)
    assert el.dispatch(0.010) == 1
    assert el.exit_prob == 32                             # exited without samples


def test_timer_on_exited_process_raises_exit_no_coop():
    el, dq, _ = _waiting_after_first_read()
    assert el.dispatch(0.010) == 0
    el.process_exited(1, 0.012)
    el.timer_fired(0.016)
    assert el.exit_no_coop == 32


# --- batches ----------------------------------------------------------------------------

def test_read_batch_expiry_switches_to_writes_and_back():
    el, dq = make(antic_expire=0)
    for s in range(0, 80, 8):
        add(el, s, 0.0)
    add(el, 5000, 0.0, pid=9, write=True)
    add(el, 5008, 0.0, pid=9, write=True)
    order = []
    for t in (0.100, 0.200, 0.500):                       # read batch runs until j > 500
        order.append(serve(el, dq, t, t).sector)
    assert order == [0, 8, 16]
    # j=501 > current_batch_expires (500): writes; W5000 also expired (FIFO check)
    assert serve(el, dq, 0.501, 0.501).sector == 5000
    assert el.batch_data_dir == ASYNC and el.current_batch_expires == 501 + 125
    assert el.current_write_count == 12 - 1
    assert serve(el, dq, 0.502, 0.502).sector == 5008
    # no writes left: the read batch resumes at the read FIFO head
    assert serve(el, dq, 0.503, 0.503).sector == 24
    assert el.batch_data_dir == SYNC and el.new_batch is False


def test_write_batch_ends_when_count_used_up():
    el, dq = make(antic_expire=0, write_batch_expire=20)   # write_batch_count = 2
    assert el.write_batch_count == 2
    for s in (5000, 5008, 5016):
        add(el, s, 0.0, pid=9, write=True)
    assert serve(el, dq, 0.0, 0.0).sector == 5000          # write batch (only writes)
    add(el, 0, 0.001)
    assert serve(el, dq, 0.001, 0.001).sector == 5008      # count 1 left: keeps writing
    assert el.current_write_count == 0
    assert serve(el, dq, 0.002, 0.002).sector == 0         # count used up: reads
    assert el.batch_data_dir == SYNC


def test_batch_change_waits_for_previous_batch_to_drain_2_6_18_vs_2_6_32():
    for variant, expected in (("2.6.18", 8), ("2.6.32", 5000)):
        el, dq = make(antic_expire=0, variant=variant)
        for s in (0, 8, 16):
            add(el, s, 0.0)
        add(el, 5000, 0.0, pid=9, write=True)
        r0 = take(el, dq, 0.0)                             # in flight
        assert el.dispatch(0.600) == 0                     # switch to writes, R0 not done
        assert el.changed_batch and el.batch_data_dir == ASYNC
        el.completed(r0, 0.600)
        assert el.kick_queue and not el.changed_batch
        # 2.6.18 did not restart the batch clock here: the write batch is seen as
        # already expired and AS goes back to reads; 2.6.32 restarts it.
        assert take(el, dq, 0.600).sector == expected, variant


@pytest.mark.parametrize("done_ms, count", [(10, 8), (20, 5), (100, 3), (130, 2)])
def test_write_batch_auto_tuning(done_ms, count):
    # write_batch_expire 40 ms -> count 4; the batch starts at j=0 (expires 40).
    el, dq = make(antic_expire=0, write_batch_expire=40)
    assert el.write_batch_count == 4
    for s in range(100, 132, 8):
        add(el, s, 0.0, pid=9, write=True)
    for _ in range(4):
        serve(el, dq, 0.0, 0.0)
    assert el.current_write_count == 0
    add(el, 0, 0.0)
    r = take(el, dq, 0.0)                                  # new read batch, new_batch set
    assert el.new_batch
    el.completed(r, done_ms / 1000)
    # write_time = done - 40 + 40 = done: <40/3 doubles, <40 +1, <=120 -1, >120 halves
    assert el.write_batch_count == count
    assert el.current_batch_expires == done_ms + 500


def test_read_fifo_expiry_is_rate_limited():
    el, dq = make(antic_expire=0)
    add(el, 100_000, 0.0)                                  # expires at j=125
    add(el, 0, 0.001)
    add(el, 8, 0.001)
    assert el.next_rq[SYNC].sector == 0
    assert serve(el, dq, 0.124, 0.124).sector == 0         # j=124: check too soon
    assert serve(el, dq, 0.126, 0.126).sector == 100_000   # j=126: expired head first


# --- request choice ---------------------------------------------------------------------

@pytest.mark.parametrize("back, fwd, expect_back", [
    (1000, 2001, True),          # 2*1000 < 2001: backward wins
    (1000, 2000, False),         # tie at equal cost: higher sector (forward)
    (1000, 1999, False),
    (1024 * 1024, 2 * 1024 * 1024 + 1, True),   # exactly MAXBACK back is allowed
    (1024 * 1024 + 1, 50_000_000, False),       # beyond MAXBACK: wrapped, forward wins
])
def test_backward_seek_choice(back, fwd, expect_back):
    el, dq = make(antic_expire=0)
    last = 3_000_000
    el.last_sector[SYNC] = last
    rb = add(el, last - back, 0.0)
    rf = add(el, last + fwd, 0.0)
    assert el.next_rq[SYNC] is (rb if expect_back else rf)
    assert take(el, dq, 0.0) is (rb if expect_back else rf)


def test_both_wrapped_picks_lower_and_next_rq_after_dispatch():
    el, dq = make(antic_expire=0)
    el.last_sector[SYNC] = 10_000_000
    a = add(el, 10, 0.0)
    b = add(el, 5000, 0.0)
    c = add(el, 9000, 0.0)
    assert el.next_rq[SYNC] is a
    assert [take(el, dq, 0.0) for _ in range(3)] == [a, b, c]


def test_alias_is_dispatched_at_once_and_merge_keeps_earlier_expiry():
    el, dq = make(antic_expire=0)
    r1 = add(el, 100, 0.0)
    r2 = add(el, 100, 0.010)                               # same start sector: alias
    assert list(dq) == [r1] and el.queued() == 1 and r2.sched is not None
    el2, _ = make()
    a = add(el2, 200, 0.0)                                 # expires 125
    b = add(el2, 208, 0.050, pid=2)                        # expires 175
    b.bios.extend([]); b.sector, b.nr_sectors = 200, 16    # (block layer would do this)
    a.nr_sectors = 16
    el2.requests_merged(b, a, 0.060)
    assert el2._fifo[SYNC][b] == 125 and el2.fifo_order(True) == [b]
    assert b.sched is el2.context(1)                       # contexts swapped with the expiry


def test_front_merge_lookup_uses_bio_direction_index():
    el, dq = make()
    add(el, 100, 0.0)                                      # sync read, in the sync tree
    bio_r = Bio(999, 92, 8, False, True, pid=1)
    assert el.merge_candidate(bio_r, 0.0) is None          # reads search the async tree
    w = mkrq(300, write=True, sync=True)
    el.add(w, 0.0)
    bio_w = Bio(998, 292, 8, True, False, pid=1)
    assert el.merge_candidate(bio_w, 0.0) is w             # writes search the sync tree


# --- tunables and kernels -----------------------------------------------------------------

def test_defaults_in_jiffies_at_hz_250_and_1000():
    el, _ = make(hz=250)
    assert el.jiffies == {"read_expire": 31, "write_expire": 62, "read_batch_expire": 125,
                          "write_batch_expire": 31, "antic_expire": 1}
    assert el.params == {"read_expire": 124, "write_expire": 248, "read_batch_expire": 500,
                         "write_batch_expire": 124, "antic_expire": 4}
    assert el.write_batch_count == 3
    el, _ = make(hz=1000)
    assert el.params == {"read_expire": 125, "write_expire": 250, "read_batch_expire": 500,
                         "write_batch_expire": 125, "antic_expire": 6}
    assert el.write_batch_count == 12
    el, _ = make(hz=100)
    assert el.jiffies["antic_expire"] == 1 and el.params["antic_expire"] == 10
    el, _ = make(hz=250, antic_expire=10)
    assert el.antic_expire == 3 and el.params["antic_expire"] == 12


def test_unknown_tunable_lists_valid_names():
    with pytest.raises(ValueError) as exc:
        make(fifo_batch=4)
    assert "fifo_batch" in str(exc.value)
    assert ("valid: antic_expire, read_batch_expire, read_expire, write_batch_expire, "
            "write_expire") in str(exc.value)


@pytest.mark.parametrize("name", ["read_expire", "antic_expire", "write_batch_expire"])
def test_out_of_range_tunable_names_range(name):
    with pytest.raises(ValueError, match=r"out of range \[0, 2147483647\] \(ms\)"):
        make(**{name: -1})


@pytest.mark.parametrize("kernel, variant", [("2.6.18", "2.6.18"), ("2.6.24", "2.6.18"),
                                             ("2.6.32", "2.6.32")])
def test_create_picks_variant(kernel, variant):
    el = AnticipatoryElevator.create(DispatchQueue(), {}, hz=250, kernel=kernel)
    assert el.variant == variant and el.empty()


@pytest.mark.parametrize("kernel", ["2.6.16", "2.6.33", "3.0"])
def test_create_rejects_kernels_without_modelled_as(kernel):
    with pytest.raises(ValueError, match="2.6.18 .. 2.6.32"):
        variant_for_kernel(kernel)


def test_est_time():
    el, _ = make()
    el.exit_prob, el.exit_no_coop, el.new_ttime_mean, el.new_seek_mean = 128, 64, 3, 900
    assert el.est_time().splitlines() == [
        "50 % exit probability",
        "25 % probability of exiting without a cooperating process submitting IO",
        "3 ms new thinktime", "900 sectors new seek distance"]
