"""`TaggedQueue.pick` on hand-made queues, one test per policy, and DiskSim's numbers."""

import pytest

from blksim.disk_models.tcq import DISKSIM_POLICY, TaggedQueue, policy_from_disksim


class Rq:
    __slots__ = ("sector", "nr_sectors", "write")

    def __init__(self, sector, n=8, write=False):
        self.sector, self.nr_sectors, self.write = sector, n, write


def cyl(lbn):          # 100 sectors per cylinder
    return lbn // 100


Q = [Rq(5000), Rq(1200), Rq(9000), Rq(1500), Rq(300)]   # cylinders 50, 12, 90, 15, 3


def test_fcfs_takes_the_oldest():
    assert TaggedQueue("fcfs").pick(Q, 14, 0.0) == 0


def test_sstf_nearest_cylinder():
    tq = TaggedQueue("sstf", cyl)
    assert tq.pick(Q, 14, 0.0) == 3          # cylinder 15 (distance 1) beats 12 (2)
    assert tq.pick(Q, 11, 0.0) == 1          # cylinder 12
    assert tq.pick(Q, 80, 0.0) == 2          # cylinder 90


def test_sstf_tie_goes_to_the_oldest():
    q = [Rq(1600), Rq(1200)]                 # cylinders 16 and 12, head at 14
    assert TaggedQueue("sstf", cyl).pick(q, 14, 0.0) == 0


def _service_order(policy: str, head: int = 14) -> list:
    """Cylinders of Q in the order `policy` serves them, one pick at a time."""
    tq = TaggedQueue(policy, cyl)
    q = list(Q)
    order = []
    while q:
        i = tq.pick(q, head, 0.0)
        head = cyl(q[i].sector)
        order.append(head)
        q.pop(i)
    return order


def test_clook_sweeps_up_then_wraps():
    assert _service_order("clook") == [15, 50, 90, 3, 12]


def test_clook_lbn():
    tq = TaggedQueue("clook_lbn")
    tq.pick([Rq(1300)], 0, 0.0)               # last served: 1300
    assert tq.pick(Q, 0, 0.0) == 3            # 1500 is the lowest at or above 1300
    assert tq.pick([Rq(100), Rq(50)], 0, 0.0) == 1   # nothing above 1500: wrap to lowest


def test_look_reverses_at_the_end():
    assert _service_order("look") == [15, 50, 90, 12, 3]


def test_sstf_lbn_from_end_of_last_request():
    tq = TaggedQueue("sstf_lbn")
    tq.pick([Rq(1000, 100)], 0, 0.0)          # position now 1100
    assert tq.pick(Q, 0, 0.0) == 1            # 1200 (100 away) beats 1500 (400)


def test_sptf_uses_the_positioning_time():
    times = {5000: 0.004, 1200: 0.006, 9000: 0.001, 1500: 0.002, 300: 0.009}
    seen = []

    def pos(rq, now):
        seen.append(now)
        return times[rq.sector]

    assert TaggedQueue("sptf").pick(Q, 14, 1.5, pos) == 2
    assert seen == [1.5] * 5
    with pytest.raises(ValueError):
        TaggedQueue("sptf").pick(Q, 14, 0.0)


def test_single_request_and_empty_queue():
    assert TaggedQueue("sptf").pick([Rq(7)], 0, 0.0, lambda r, t: 1.0) == 0
    with pytest.raises(ValueError):
        TaggedQueue("fcfs").pick([], 0, 0.0)


def test_disksim_numbers():
    assert policy_from_disksim(1) == "fcfs"
    assert policy_from_disksim(3) == "clook_lbn"
    assert policy_from_disksim(7) == "sstf"
    assert policy_from_disksim(8) == "sptf"
    assert TaggedQueue(8).policy == "sptf"
    with pytest.raises(ValueError, match="SATF_OPT"):
        policy_from_disksim(10)
    with pytest.raises(ValueError, match="1..28"):
        policy_from_disksim(99)
    assert policy_from_disksim(14) == "asptf"
    assert sorted(DISKSIM_POLICY) == [*range(1, 9), 14]


def test_unknown_policy_lists_valid_ones():
    with pytest.raises(ValueError, match="fcfs"):
        TaggedQueue("elevatorz")
    with pytest.raises(ValueError, match="cylinder_of"):
        TaggedQueue("sstf")


def _positioning(times: dict):
    """A positioning_time callable from a table sector -> seconds."""
    return lambda rq, now: times[rq.sector]


def test_asptf_credits_waiting_time_as_disksim_does():
    # DiskSim ASPTF_OPT: effective = positioning - age * weight * 0.001 (ms, ms).
    # The far request (8 ms away) has waited 1 s; the near one (1 ms) has just come.
    q = [Rq(9000), Rq(1200)]
    pos = _positioning({9000: 0.008, 1200: 0.001})
    arrived = [1.0, 2.0]
    assert TaggedQueue("sptf").pick(q, 0, 2.0, pos) == 1               # no aging: near
    # weight 6: 8 - 6 = 2 ms, still more than 1 ms: the near one
    assert TaggedQueue("asptf", age_weight=6).pick(q, 0, 2.0, pos, arrived) == 1
    # weight 8: 8 - 8 = 0 ms < 1 ms: the request that waited is served
    assert TaggedQueue("asptf", age_weight=8).pick(q, 0, 2.0, pos, arrived) == 0
    # weight 0 is plain SPTF
    assert TaggedQueue("asptf").pick(q, 0, 2.0, pos, arrived) == 1
    with pytest.raises(ValueError, match="arrival times"):
        TaggedQueue("asptf", age_weight=6).pick(q, 0, 2.0, pos)
    with pytest.raises(ValueError, match="age_weight"):
        TaggedQueue("asptf", age_weight=float("nan"))


def test_asptf_bounds_the_wait_of_a_far_stream_that_sptf_starves():
    """A drive with 8 tags, a hot cluster kept full and one far request: plain SPTF
    passes the far one over while near ones keep coming; aged SPTF serves it."""
    def waited(policy, weight):
        tq = TaggedQueue(policy, age_weight=weight)
        pos = lambda rq, now: 0.010 if rq.sector >= 10**6 else 0.001
        queue, arrived = [Rq(10**6)], [0.0]          # the far one, queued first
        now, n = 0.0, 0
        while True:
            while len(queue) < 8:                    # the cluster refills the queue
                n += 1
                queue.append(Rq(n))
                arrived.append(now)
            i = tq.pick(queue, 0, now, pos, arrived)
            rq = queue.pop(i)
            arrived.pop(i)
            now += pos(rq, now) + 0.002              # positioning + transfer
            if rq.sector >= 10**6:
                return now
            if now > 60.0:
                return None
    assert waited("sptf", 0) is None                 # never served within a minute
    served = waited("asptf", 6)
    # served once its credit (6 ms per s waited) covers the 9 ms it is further away
    assert served is not None and 1.4 < served < 1.7
