"""Hand-traced cases of the deadline elevator (Linux 2.6.18, plus the 2.6.24/2.6.32 variants).

Each expected dispatch order below was worked out by hand from
deadline_dispatch_requests() and the merge hooks of block/deadline-iosched.c
(Linux 2.6.18, 2.6.24, 2.6.32); comments show the trace where it is not obvious. Requests are 8 sectors long unless stated; "R100" is a read
starting at sector 100, "W5000" a write at 5000.
"""

from __future__ import annotations

import itertools

import pytest

from blksim.schedulers.deadline import DeadlineElevator
from blksim.block.dispatch_queue import DispatchQueue
from blksim.block.request import Bio, Request

_ids = itertools.count()


def mkrq(sector: int, nr: int = 8, write: bool = False, now: float = 0.0) -> Request:
    i = next(_ids)
    return Request(i, Bio(i, sector, nr, write, not write, pid=1), now)


def label(rq) -> str:
    return f"{'W' if rq.write else 'R'}{rq.sector}"


def make(variant: str = "2.6.18", hz: int = 250, **params):
    dq = DispatchQueue()
    return DeadlineElevator(dq, params, hz=hz, variant=variant), dq


def add_all(el, specs, now: float = 0.0) -> dict:
    """Add requests given as labels like "R0" / "W5000" (8 sectors); return them by label."""
    out = {}
    for spec in specs:
        rq = mkrq(int(spec[1:]), write=spec[0] == "W", now=now)
        el.add(rq, now)
        out[spec] = rq
    return out


def take(el, dq, now: float, n: int | None = None) -> list[str]:
    """Dispatch one at a time (the device takes each at once); return labels in order."""
    out = []
    while n is None or len(out) < n:
        before = len(dq)
        got = el.dispatch(now)
        if not got:
            assert el.empty()
            break
        assert got == 1 and len(dq) == before + 1
        out.append(label(dq.pop_head()))
    return out


READS_0_56 = [f"R{s}" for s in range(0, 64, 8)]  # eight contiguous reads
WRITES_1000 = ["W1000", "W1008", "W1016", "W1024"]  # four contiguous writes


# --- (a) read batch, read batch, write batch --------------------------------------

def test_rrw_pattern_2_6_18():
    # fifo_batch=2, writes_starved=2. 2.6.18 does not reset the batch count when a
    # new batch continues the sweep, so the second read "batch" is one request.
    el, dq = make(fifo_batch=2)
    add_all(el, READS_0_56 + WRITES_1000)
    assert take(el, dq, now=0.001) == [
        "R0", "R8",           # batch 1: starved 0 -> 1, lowest read
        "R16",                # batch 2: starved 1 -> 2, sweep successor, count not reset
        "W1000", "W1008",     # starved 2 >= 2: writes, starved = 0
        "R24", "R32",         # next_rq[READ] was cleared: restart at lowest read
        "R40",
        "W1016", "W1024",
        "R48", "R56",         # only reads left
    ]


def test_rrw_pattern_2_6_32():
    el, dq = make("2.6.32", fifo_batch=2)
    add_all(el, READS_0_56 + WRITES_1000)
    assert take(el, dq, now=0.001) == [
        "R0", "R8", "R16", "R24",   # two full read batches
        "W1000", "W1008",           # then a write batch
        "R32", "R40", "R48", "R56",  # FIFO head restart, two read batches
        "W1016", "W1024",
    ]


# --- (b) expiry is looked at only at batch boundaries ---------------------------------

def test_expired_head_waits_for_batch_boundary_2_6_18():
    el, dq = make(read_expire=100, fifo_batch=4)  # 100 ms = 25 jiffies at HZ=250
    old = mkrq(1000)
    el.add(old, 0.0)                       # deadline 0.10
    add_all(el, ["R0", "R8", "R16", "R24", "R32"], now=0.05)  # deadlines 0.15
    assert old.fifo_time == pytest.approx(0.1)
    assert take(el, dq, now=0.06, n=1) == ["R0"]   # nothing expired: lowest sector
    # At 0.2 everything has expired, but the contiguous batch runs on to 4 requests;
    # the boundary picks the expired FIFO head, then the next FIFO head.
    assert take(el, dq, now=0.2) == ["R8", "R16", "R24", "R1000", "R32"]


def test_expired_head_waits_for_batch_boundary_2_6_32():
    el, dq = make("2.6.32", read_expire=100, fifo_batch=4)
    r = add_all(el, ["R500", "R10", "R600"], now=0.0)  # deadlines 0.10
    assert take(el, dq, now=0.01, n=1) == ["R500"]        # FIFO head starts the batch
    add_all(el, ["R700", "R800", "R900"], now=0.02)        # deadlines 0.12
    assert r["R10"].fifo_time == pytest.approx(0.1)
    # R10 expired at 0.1 but the batch continues upward to 4 requests first.
    assert take(el, dq, now=0.2) == ["R600", "R700", "R800", "R10", "R900"]


# --- (c) fifo_batch ------------------------------------------------------------------

@pytest.mark.parametrize("fifo_batch", [1, 2, 3, 5])
def test_fifo_batch_limits_contiguous_batch(fifo_batch):
    # writes_starved=1: the first selection is reads (starved 0 -> 1), the next
    # selection goes to the write. The write thus shows where the batch ended.
    el, dq = make(fifo_batch=fifo_batch, writes_starved=1)
    reads = [f"R{s}" for s in range(0, 48, 8)]
    add_all(el, reads + ["W5000"])
    order = take(el, dq, now=0.001)
    assert order == reads[:fifo_batch] + ["W5000"] + reads[fifo_batch:]


def test_fifo_batch_zero_reselects_every_time():
    el, dq = make(fifo_batch=0, writes_starved=1)
    add_all(el, ["R0", "R8", "R16", "W5000"])
    # Every dispatch is a selection: R (starved 0->1), W (1 >= 1), then reads only.
    assert take(el, dq, now=0.001) == ["R0", "W5000", "R8", "R16"]


# --- (d) the contiguity cut ------------------------------------------------------------

@pytest.mark.parametrize("variant, expected", [
    ("2.6.18", ["R0", "W5000", "R100", "R200"]),   # the seek 8 -> 100 ends the batch
    ("2.6.24", ["R0", "W5000", "R100", "R200"]),
    ("2.6.32", ["R0", "R100", "R200", "W5000"]),   # no cut: one batch of three
])
def test_contiguity_cut(variant, expected):
    el, dq = make(variant, writes_starved=1)
    add_all(el, ["R0", "R100", "R200", "W5000"])
    assert take(el, dq, now=0.001) == expected


def test_contiguous_requests_are_not_cut_2_6_18():
    el, dq = make(writes_starved=1)
    add_all(el, ["R0", "R8", "R16", "W5000"])
    assert take(el, dq, now=0.001) == ["R0", "R8", "R16", "W5000"]


# --- (e) how 2.6.18 starts a new batch --------------------------------------------------

def test_new_batch_expired_head_resets_batch_count_2_6_18():
    el, dq = make(read_expire=100, fifo_batch=2, writes_starved=1)
    add_all(el, ["R0", "R100", "R2000", "R2008"], now=0.0)   # deadlines 0.10
    assert take(el, dq, now=0.01, n=1) == ["R0"]
    # Seek 8 -> 100 cuts; the sweep continues at R100 without resetting the count.
    assert take(el, dq, now=0.02, n=1) == ["R100"]
    assert el.batching > el.params["fifo_batch"]
    add_all(el, ["W5000"], now=0.03)
    # At 0.2 the read FIFO head R2000 has expired: it starts a fresh batch
    # (starved 0 -> 1), so its contiguous follower R2008 rides along before the write.
    assert take(el, dq, now=0.2) == ["R2000", "R2008", "W5000"]


@pytest.mark.parametrize("variant, expected", [
    # 2.6.18: continuing at next_rq keeps the batch count, so R16 is a batch of one.
    ("2.6.18", ["R0", "R8", "R16", "W5000", "R24"]),
    # 2.6.24: the count is reset, so R16 and R24 form a full batch.
    ("2.6.24", ["R0", "R8", "R16", "R24", "W5000"]),
])
def test_new_batch_at_next_rq_keeps_batch_count_2_6_18(variant, expected):
    el, dq = make(variant, fifo_batch=2)
    add_all(el, ["R0", "R8", "R16", "R24", "W5000"])
    assert take(el, dq, now=0.001) == expected


@pytest.mark.parametrize("variant, expected", [
    ("2.6.18", ["R100", "R300", "R500"]),  # no sweep in progress: lowest sector
    ("2.6.24", ["R500", "R100", "R300"]),  # 2.6.24+: oldest request
    ("2.6.32", ["R500", "R100", "R300"]),
])
def test_new_batch_without_next_rq(variant, expected):
    el, dq = make(variant)
    add_all(el, ["R500"], now=0.0)
    add_all(el, ["R100"], now=0.01)
    add_all(el, ["R300"], now=0.02)
    assert take(el, dq, now=0.03) == expected


def test_expiry_is_strictly_after_deadline():
    # time_after(jiffies, expires): a request is not expired at its deadline itself.
    el, dq = make(read_expire=100)
    add_all(el, ["R500"], now=0.0)
    add_all(el, ["R100"], now=0.05)
    r = el.fifo_order(False)[0]
    assert take(el, dq, now=r.fifo_time, n=1) == ["R100"]   # not expired: lowest
    el2, dq2 = make(read_expire=100)
    add_all(el2, ["R500"], now=0.0)
    add_all(el2, ["R100"], now=0.05)
    assert take(el2, dq2, now=r.fifo_time + 1e-9, n=1) == ["R500"]   # expired


# --- (f) front-merge lookup --------------------------------------------------------------

def test_front_merge_candidate_honours_front_merges():
    el, _ = make()
    r = add_all(el, ["R100", "W100"])
    read_bio = Bio(99, 92, 8, False, True, pid=1)     # ends at 100
    write_bio = Bio(98, 92, 8, True, False, pid=1)
    assert el.merge_candidate(read_bio, 0.0) is r["R100"]
    assert el.merge_candidate(write_bio, 0.0) is r["W100"]
    assert el.merge_candidate(Bio(97, 90, 8, False, True, pid=1), 0.0) is None  # ends at 98
    assert el.merge_candidate(Bio(96, 100, 8, False, True, pid=1), 0.0) is None  # a back merge

    off, _ = make(front_merges=0)
    add_all(off, ["R100"])
    assert off.merge_candidate(read_bio, 0.0) is None


# --- (g) request-request merges -------------------------------------------------------------

def _back_merge_then_coalesce(el, rq, nr):
    """What the block layer does: grow rq at its end, tell the elevator, coalesce with latter."""
    rq.nr_sectors += nr
    el.merged(rq, False, 0.0)
    nxt = el.latter(rq)
    assert nxt is not None and nxt.sector == rq.sector + rq.nr_sectors
    rq.nr_sectors += nxt.nr_sectors
    el.requests_merged(rq, nxt, 0.0)
    return nxt


def test_requests_merged_survivor_takes_earlier_deadline_and_place():
    el, dq = make()
    a = mkrq(108)
    el.add(a, 0.0)                 # deadline 0.5
    c = mkrq(50)
    el.add(c, 0.05)                # deadline 0.55
    b = mkrq(100, nr=4)
    el.add(b, 0.1)                 # deadline 0.6
    assert el.fifo_order(False) == [a, c, b]
    victim = _back_merge_then_coalesce(el, b, 4)
    assert victim is a and b.nr_sectors == 16
    assert b.fifo_time == pytest.approx(0.5)
    assert el.fifo_order(False) == [b, c]
    assert el.sort_order(False) == [c, b]
    assert el.queued() == 2
    # Both expired at 0.6: the FIFO head (b, in a's old place) goes first, not the lower c.
    assert take(el, dq, now=0.6) == ["R100", "R50"]


def test_requests_merged_survivor_keeps_its_own_earlier_deadline():
    el, _ = make()
    b = mkrq(100, nr=4)
    el.add(b, 0.0)
    c = mkrq(50)
    el.add(c, 0.05)
    a = mkrq(108)
    el.add(a, 0.1)
    _back_merge_then_coalesce(el, b, 4)
    assert b.fifo_time == pytest.approx(0.5)
    assert el.fifo_order(False) == [b, c]


@pytest.mark.parametrize("variant, expected", [
    # 2.6.18 re-files a front-merged request through the helper that moves next_rq
    # past it, so the sweep skips it and it waits for the next sweep.
    ("2.6.18", ["R0", "R200", "R92"]),
    ("2.6.24", ["R0", "R92", "R200"]),
])
def test_front_merge_into_next_rq(variant, expected):
    el, dq = make(variant)
    r = add_all(el, ["R0", "R100", "R200"])
    assert take(el, dq, now=0.001, n=1) == ["R0"]
    assert el.next_rq[0] is r["R100"]
    rq = r["R100"]
    rq.sector, rq.nr_sectors = 92, 16
    el.merged(rq, True, 0.002)
    assert el.sort_order(False) == [rq, r["R200"]]
    assert take(el, dq, now=0.003) == expected[1:]


def test_front_merge_then_coalesce_with_former():
    el, dq = make()
    r = add_all(el, ["R0", "R16"])
    rq = r["R16"]
    rq.sector, rq.nr_sectors = 8, 16      # bio 8..16 front-merged into R16
    el.merged(rq, True, 0.0)
    prev = el.former(rq)
    assert prev is r["R0"] and prev.sector + prev.nr_sectors == rq.sector
    prev.nr_sectors += rq.nr_sectors
    el.requests_merged(prev, rq, 0.0)
    assert el.queued() == 1 and el.sort_order(False) == [prev]
    assert take(el, dq, now=0.001) == ["R0"]


# --- (h) the alias rule -----------------------------------------------------------------------

def test_alias_is_dispatched_at_once_2_6_18():
    el, dq = make()
    r = add_all(el, ["R0", "R100", "R200"])
    dup = mkrq(100)
    el.add(dup, 0.01)
    assert list(dq) == [r["R100"]]               # the old request went straight to dq
    assert el.queued() == 3
    assert el.sort_order(False) == [r["R0"], dup, r["R200"]]
    # Dispatching the alias went through the normal move: the sweep position is now
    # after it, so the next dispatch continues at R200 rather than the lowest R0.
    assert el.next_rq[0] is r["R200"] and el.last_sector == 108
    dq.pop_head()
    assert take(el, dq, now=0.02) == ["R200", "R0", "R100"]


def test_same_sector_other_direction_is_not_an_alias():
    el, dq = make()
    add_all(el, ["R100", "W100"])
    assert len(dq) == 0 and el.queued() == 2


# --- (i) tunables --------------------------------------------------------------------------

def test_defaults_and_jiffy_quantisation():
    el, _ = make()
    assert el.params == {"read_expire": 500, "write_expire": 5000, "writes_starved": 2,
                         "front_merges": 1, "fifo_batch": 16}
    r = add_all(el, ["R0", "W0"], now=1.0)
    assert r["R0"].fifo_time == pytest.approx(1.5)
    assert r["W0"].fifo_time == pytest.approx(6.0)
    # 1 ms rounds up to one jiffy: 4 ms at HZ=250, 10 ms at HZ=100, 1 ms at HZ=1000.
    for hz, expect in [(250, 0.004), (100, 0.01), (1000, 0.001)]:
        el, _ = make(hz=hz, read_expire=1)
        rq = mkrq(0)
        el.add(rq, 0.0)
        assert rq.fifo_time == pytest.approx(expect)


def test_unknown_tunable_lists_valid_names():
    with pytest.raises(ValueError) as exc:
        make(read_expiry=100)
    msg = str(exc.value)
    assert "read_expiry" in msg
    assert "valid: fifo_batch, front_merges, read_expire, write_expire, writes_starved" in msg


@pytest.mark.parametrize("name, value, rng", [
    ("read_expire", -1, "[0, 2147483647]"),
    ("write_expire", 2**31, "[0, 2147483647]"),
    ("front_merges", 2, "[0, 1]"),
    ("fifo_batch", -1, "[0, 2147483647]"),
    ("writes_starved", -(2**31) - 1, "[-2147483648, 2147483647]"),
])
def test_out_of_range_tunable_names_range(name, value, rng):
    with pytest.raises(ValueError) as exc:
        make(**{name: value})
    assert name in str(exc.value) and rng in str(exc.value)


def test_non_integer_tunable_rejected():
    with pytest.raises(ValueError, match="whole number"):
        make(fifo_batch=1.5)


def test_unknown_variant_and_bad_hz():
    with pytest.raises(ValueError, match="valid: 2.6.18, 2.6.24, 2.6.32"):
        make("2.6.9")
    with pytest.raises(ValueError, match="hz"):
        make(hz=0)


@pytest.mark.parametrize("writes_starved, expected", [
    (0, ["W5000", "R0", "R100"]),     # 0 >= 0: writes win the first selection
    (1, ["R0", "W5000", "R100"]),
    # Negative compares as a huge unsigned value (C int -> unsigned): reads always win.
    (-1, ["R0", "R100", "W5000"]),
])
def test_writes_starved_values(writes_starved, expected):
    el, dq = make(writes_starved=writes_starved)
    add_all(el, ["R0", "R100", "W5000"])
    assert take(el, dq, now=0.001) == expected


# --- misc protocol ----------------------------------------------------------------------------

def test_empty_queued_and_force():
    el, dq = make()
    assert el.empty() and el.queued() == 0 and el.dispatch(0.0) == 0
    add_all(el, ["R8", "W16", "R0"])
    assert not el.empty() and el.queued() == 3
    moved = 0
    while el.dispatch(0.0, force=True):
        moved += 1
    assert moved == 3 and el.empty() and len(dq) == 3
    # deadline appends to the tail: the dispatch queue keeps deadline's order
    assert [label(rq) for rq in dq] == ["R0", "R8", "W16"]
    assert dq.boundary == 24


def test_former_latter_same_direction_only():
    el, _ = make()
    r = add_all(el, ["R0", "W8", "R16"])
    assert el.latter(r["R0"]) is r["R16"]
    assert el.former(r["R16"]) is r["R0"]
    assert el.former(r["R0"]) is None and el.latter(r["W8"]) is None
