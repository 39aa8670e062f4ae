"""blk-throttle (block/mq/throttle.py): hand-traced release times, the hierarchy, the
directions, the figures, and the property that io.max holds over every window of one
slice, for bytes and IOs, with the allowance the kernel's slice rules give."""

import simpy
from hypothesis import given, settings, strategies as st

from blksim.block.mq.queue import MqQueue, MqSettings
import pytest

from blksim.block.mq.throttle import (Throttle, ThrottledQueue, io_max_problem, switches,
                                     throtl_slice)
from blksim.block.queue_protocol import QueueProtocol
from blksim.block.request import Bio
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.sim.clock import SimpyClock

HZ = 250
DEV = "sda"


class Group:
    """A fake cgroup: what the throttle reads (``parent``, ``io_max``)."""

    def __init__(self, name, parent=None, **limits):
        self.name = name
        self.parent = parent
        self.io_max = {DEV: limits} if limits else {}


class CgBio(Bio):
    """A bio with the ``cgroup`` the groups' engineer adds to `Bio`."""

    __slots__ = ("cgroup",)

    def __init__(self, *a, cgroup=None, **k):
        super().__init__(*a, **k)
        self.cgroup = cgroup


def make(kernel="6.6", rotational=True, low=False, service=1e-5, depth=64, front=True):
    env = simpy.Environment()
    clock = SimpyClock(env)
    dev = ServiceLawDevice("fixed", service, capacity=1 << 30, queue_depth=depth)
    q = MqQueue(None, dev, clock, MqSettings(kernel=kernel, hz=HZ), elevator_name="none")
    q.name = DEV
    tq = ThrottledQueue(q, clock, rotational, kernel, hz=HZ, throttling_low=low) if front else q
    return env, tq


class Ids:
    def __init__(self):
        self.n = 0

    def bio(self, group, write=False, sectors=8, done=None):
        self.n += 1
        return CgBio(self.n, self.n * 8, sectors, write, not write, 1, cgroup=group,
                     on_complete=done.append if done is not None else None)


def submit_at(env, tq, bios_at):
    """Submit each (time, bio) at its time."""
    for t, b in bios_at:
        env.process(_later(env, tq, t, b))


def _later(env, tq, t, b):
    yield env.timeout(t)
    tq.submit_bio(b, env.now)


# ---------------------------------------------------------------- hand-traced cases
def test_slices_per_kernel_build():
    assert throtl_slice(250, rotational=True) == 25               # DFL_THROTL_SLICE_HD
    assert throtl_slice(250, rotational=False) == 25              # no .low: HD slice
    assert throtl_slice(250, rotational=False, throttling_low=True) == 5   # SSD
    assert throtl_slice(1000, rotational=True, throttling_low=True) == 100
    assert switches("5.10") == switches("5.4")
    assert switches("6.6")["wait_max_of_both"] and not switches("6.1")["wait_max_of_both"]


def test_burst_of_ten_against_riops_4_on_the_ssd_slice():
    """Slice 5 jiffies (20 ms). The first bio: a new slice at jiffy 0; allowed =
    4 * roundup(elapsed + 1, 5) // 250 first reaches 1 at elapsed 60 (roundup 65):
    released at 240 ms, the slice trimmed to start 60 with io_disp 1 (60 jiffies allowed
    4*60//250 = 0 IOs). Each next one needs allowed 2: roundup 125, elapsed 120; its trim
    takes 4*120//250 = 1 off, so io_disp is 1 again: one bio per 120 jiffies (480 ms),
    about 2 IOPS under a 4 IOPS limit (the truncation of the slice's allowance)."""
    env, tq = make(rotational=False, low=True)
    ids, done = Ids(), []
    g = Group("g", riops=4)
    bios = [ids.bio(g, done=done) for _ in range(10)]
    for b in bios:
        assert tq.submit_bio(b, 0.0)            # held: the submitter goes on
    assert tq.pending() == 10 and not tq.idle()
    env.run()
    got = [round(b.t_queue, 6) for b in bios]
    assert got == [round(0.24 + 0.48 * k, 6) for k in range(10)]
    assert len(done) == 10 and tq.idle()
    fig = tq.figures()[g]
    assert fig["throttled_bios"] == 10 and fig["throttled_bytes"] == 10 * 4096
    assert abs(fig["held_s"] - sum(got)) < 1e-9


def test_burst_of_ten_against_riops_4_on_the_hd_slice():
    """Slice 25 jiffies: the first goes at elapsed 50 (roundup 75 allows 1), trim nr=2
    takes 4*50//250 = 0; the next need roundup 125 (elapsed 100) and the trim of 100
    jiffies takes 1: one bio per 100 jiffies (400 ms)."""
    env, tq = make(rotational=False, low=False)
    ids = Ids()
    g = Group("g", riops=4)
    bios = [ids.bio(g) for _ in range(10)]
    for b in bios:
        tq.submit_bio(b, 0.0)
    env.run()
    assert [round(b.t_queue, 6) for b in bios] == [round(0.2 + 0.4 * k, 6) for k in range(10)]


def test_riops_100_lets_one_slice_through_at_once():
    """riops=100, HD slice: a new slice allows 100*25//250 = 10 IOs at once; the 11th
    waits to the slice's end (25 jiffies, 100 ms), when roundup(26, 25) = 50 allows 20."""
    env, tq = make()
    ids = Ids()
    g = Group("g", riops=100)
    bios = [ids.bio(g) for _ in range(21)]
    for b in bios:
        tq.submit_bio(b, 0.0)
    env.run()
    times = [round(b.t_queue, 6) for b in bios]
    assert times == [0.0] * 10 + [0.1] * 10 + [0.2]


def test_the_window_bound_is_reached():
    """riops=100, HD slice (L = 10 IOs a slice). A at jiffy 0 starts a slice; B at 24
    (allowed 10, count 2) extends its end to 50. 30 bios at 49: roundup(50, 25) allows
    20, so the first goes and its trim cuts one slice (start 25, count 3 - 10 -> 0);
    then roundup(25, 25) allows 10 more: 11 at jiffy 49. At 50: the first trim moves the
    start to 50 (count 11 - 10 = 1), 9 more: 10 at jiffy 50. The rest at 75. The window
    [49, 74) holds 21 = 1 + 2L: `window_bound` exactly."""
    env, tq = make()
    ids = Ids()
    g = Group("g", riops=100)
    a, b = ids.bio(g), ids.bio(g)
    burst = [ids.bio(g) for _ in range(30)]
    submit_at(env, tq, [(0.0, a), (24 / HZ, b)] + [(49 / HZ, x) for x in burst])
    env.run()
    jif = [int(x.t_queue * HZ + 1e-9) for x in [a, b] + burst]
    assert jif == [0, 24] + [49] * 11 + [50] * 10 + [75] * 9
    assert sum(1 for j in jif if 49 <= j < 74) == window_bound(100, 25, 1) == 21


def test_wbps_wait_is_bytes_over_times_hz_over_bps():
    """wbps = 1 MiB/s, HD slice: a slice allows 1048576*25//250 = 104857 bytes. 25
    writes of 4 KiB (102400 bytes) go at once; the 26th is 2048 bytes over: waits
    2048*250//1048576 = 0 -> 1 jiffy plus the slice's 25: at jiffy 26 (104 ms)."""
    env, tq = make()
    ids = Ids()
    g = Group("g", wbps=1 << 20)
    bios = [ids.bio(g, write=True) for _ in range(26)]
    for b in bios:
        tq.submit_bio(b, 0.0)
    env.run()
    assert [b.t_queue for b in bios[:25]] == [0.0] * 25
    assert abs(bios[25].t_queue - 26 / HZ) < 1e-9


def test_reads_are_not_held_by_a_write_limit():
    env, tq = make()
    ids = Ids()
    g = Group("g", wiops=4)
    writes = [ids.bio(g, write=True) for _ in range(5)]
    reads = [ids.bio(g) for _ in range(20)]
    for b in writes + reads:
        tq.submit_bio(b, 0.0)
    env.run()
    assert all(b.t_queue == 0.0 for b in reads)
    assert all(b.t_queue > 0.0 for b in writes)
    assert tq.figures()[g]["throttled_bios"] == 5


def test_a_child_is_held_by_its_parents_tighter_limit():
    """The parent's riops=100 (10 per HD slice) binds its child's riops=1000 (100 per
    slice) and the bios' own group counts them as throttled; a sibling without limits
    under the same parent shares the parent's 10."""
    env, tq = make()
    ids = Ids()
    parent = Group("p", riops=100)
    child = Group("c", parent, riops=1000)
    sibling = Group("s", parent)
    a = [ids.bio(child) for _ in range(15)]
    for b in a:
        tq.submit_bio(b, 0.0)
    env.run()
    times = [round(b.t_queue, 6) for b in a]
    assert times == [0.0] * 10 + [0.1] * 5
    fig = tq.figures()
    assert fig[child]["throttled_bios"] == 5 and parent not in fig
    # the sibling: within its parent's budget only
    env, tq = make()
    bs = [ids.bio(sibling) for _ in range(12)]
    for b in bs:
        tq.submit_bio(b, 0.0)
    env.run()
    assert [round(b.t_queue, 6) for b in bs] == [0.0] * 10 + [0.1] * 2


def test_root_bios_are_never_throttled():
    env, tq = make()
    ids = Ids()
    g = Group("g", riops=2)
    held = [ids.bio(g) for _ in range(3)]
    free = [ids.bio(None) for _ in range(50)]
    for b in held + free:
        tq.submit_bio(b, 0.0)
    assert all(b.t_queue == 0.0 for b in free)
    env.run()
    assert None not in tq.figures()


def test_kernel_lines_differ_only_where_the_table_says():
    """At elapsed 25 (a slice boundary, HD slice) with one write already dispatched and
    1000 bytes of it: a 4096-byte write under wbps 50000 and wiops 2. Bytes: rnd 25
    allows 5000, 96 over: waits 96*250//50000 = 0, at least 1 jiffy; IOs: rnd roundup(26, 25)
    = 50 allows 2*50//250 = 0: waits 25. 5.4-6.1 return the bytes' 1 alone
    (``tg_with_in_bps_limit && tg_with_in_iops_limit``), 6.6 the longer 25."""
    waits = {}
    for kernel in ("5.4", "5.15", "6.1", "6.6"):
        th = Throttle(DEV, None, None, True, kernel, hz=HZ)
        g = Group("g", wbps=50000, wiops=2)
        tg = th._group(g)
        tg.slice_start[1], tg.slice_end[1] = 0, 50
        tg.bytes_disp[1], tg.io_disp[1] = 1000, 1
        waits[kernel] = th._may_dispatch(tg, 1, 4096, 25)
    assert waits == {"5.4": 1, "5.15": 1, "6.1": 1, "6.6": 25}


def test_a_run_without_a_front_is_byte_identical():
    """The same bios, no io.max: through the front (no group has a limit) and straight
    to the queue give the same times, completions and counters."""
    def run(front):
        env, q = make(front=front, service=0.0005, depth=2)
        ids, done = Ids(), []
        g = Group("g")
        bios = [ids.bio(g if k % 2 else None, write=bool(k % 3), done=done) for k in range(40)]
        submit_at(env, q, [(0.0003 * k, b) for k, b in enumerate(bios)])
        env.run()
        return [(b.id, b.t_queue, b.t_dispatch, b.t_complete) for b in done]
    assert run(True) == run(False)


# ---------------------------------------------------------------- the property
def window_bound(limit: int, slice_j: int, first: int) -> int:
    """The most one group may dispatch in any window of one slice (W jiffies) under a
    limit of ``limit`` per second, derived from the slice rules (5.4-6.6):

    - the window's first dispatch, at a', takes ``first`` (one IO; for bytes, at most
      the largest bio) and trims the slice (``tg_dispatch_one_bio`` and the direct path
      of ``blk_throtl_bio`` both call ``throtl_trim_slice`` after each charge): its
      start s' is then within one slice before a' (whole slices are cut off) and its
      count is at least 0; the slice's end, now + one slice rounded up, outlasts the
      window, so no new slice starts in it;
    - a later dispatch at j in the window needs count + 1 <= limit * R / HZ with R =
      roundup(j - s + 1, W) (bytes: roundup(j - s, W)); each later trim takes off at most
      what its whole slices allowed. Summed, what goes after a' is at most limit *
      roundup(j - s' + 1, W) / HZ, and j - s' <= 2W - 2: two slices' allowance.

    Hence ``first`` + limit * 2W / HZ (the kernel's integer division)."""
    return first + limit * 2 * slice_j // HZ


events = st.lists(st.tuples(st.integers(0, 200),          # arrival, ms
                            st.booleans(),                  # write
                            st.sampled_from([1, 8, 16, 64, 256])),  # sectors
                  min_size=1, max_size=60)
limit_st = st.one_of(st.none(), st.integers(2, 400))      # 6.6 refuses 1
bps_st = st.one_of(st.none(), st.integers(20_000, 4_000_000))


@settings(max_examples=150, deadline=None)
@given(events, limit_st, limit_st, bps_st, bps_st, st.booleans(), st.sampled_from(["5.4", "6.6"]))
def test_io_max_holds_over_every_window_of_one_slice(evs, riops, wiops, rbps, wbps, low, kernel):
    env, tq = make(kernel=kernel, rotational=False, low=low)
    ids, done = Ids(), []
    g = Group("g", riops=riops, wiops=wiops, rbps=rbps, wbps=wbps)
    bios = []
    for ms, write, sectors in evs:
        b = ids.bio(g, write=write, sectors=sectors, done=done)
        bios.append((ms / 1000.0, b))
    submit_at(env, tq, bios)
    env.run()
    assert sorted(b.id for b in done) == sorted(b.id for _, b in bios)   # each once
    assert tq.idle() and tq.throttle.held() == 0
    W = throtl_slice(HZ, False, low)
    for rw, iops, bps in ((0, riops, rbps), (1, wiops, wbps)):
        disp = sorted((int(b.t_queue * HZ + 1e-9), b.nr_sectors * 512)
                      for _, b in bios if int(b.write) == rw)
        biggest = max((s for _, s in disp), default=0)
        for i, (j0, _) in enumerate(disp):
            in_window = [s for j, s in disp[i:] if j < j0 + W]
            if iops is not None:
                assert len(in_window) <= window_bound(iops, W, 1)
            if bps is not None:
                assert sum(in_window) <= window_bound(bps, W, biggest)
    # FIFO per direction: release order is arrival order
    for rw in (0, 1):
        mine = [b for _, b in sorted(bios, key=lambda p: (p[0], p[1].id)) if int(b.write) == rw]
        assert [b.t_queue for b in mine] == sorted(b.t_queue for b in mine)


def test_bad_io_max_is_named():
    assert io_max_problem({"rbps": 1 << 20, "wiops": None}) is None
    assert "unknown io.max key 'rbs'" in io_max_problem({"rbs": 5})
    assert "at least 2" in io_max_problem({"riops": 1}, "6.6")
    assert io_max_problem({"riops": 1}, "5.4") is None
    assert "at least 1" in io_max_problem({"riops": 0}, "5.4")
    assert "found -3" in io_max_problem({"wbps": -3})
    env, tq = make()
    with pytest.raises(ValueError, match="cgroup 'g' on sda: io.max riops"):
        tq.submit_bio(Ids().bio(Group("g", riops=0.5)), 0.0)


def test_the_front_offers_the_queue_protocol():
    env, tq = make()
    assert isinstance(tq, QueueProtocol)
    assert tq.name == DEV and tq.multiqueue
