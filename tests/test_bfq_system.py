"""BFQ end to end: the multi-queue block layer (MqQueue) and a mechanical drive with
fio-style jobs."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis import given

from blksim.schedulers import MQ_SCHEDULERS
from blksim.schedulers.bfq import BfqElevator
from blksim.sim.engine import Simulation
from tests.simhelpers import make_config, run_config
from tests.test_mq_queue import replay_stream
from tests.test_mq_queue import bio_streams
from tests.test_mq_queue import make as make_mq

BFQ = "bfq"


def test_bfq_is_registered():
    assert MQ_SCHEDULERS["bfq"] is BfqElevator
SEQ = {"rw": "read", "bs": "64k", "size": "6g"}


def _run(jobs, scheduler=BFQ, iosched=None, kernel="6.6", queue_depth=32):
    """Sectors per pid, and the run's elevator."""
    cfg = make_config(jobs=jobs, scheduler=scheduler, iosched=iosched,
                      run={"kernel": kernel},
                      device={"drive": "cheetah15k4", "queue_depth": queue_depth})
    done = []
    sim = Simulation(cfg, complete_hooks=(done.append,))
    elevator = next(iter(sim.host.disks.values())).elevator
    sim.run()
    per = defaultdict(int)
    for bio in done:
        per[bio.pid] += bio.nr_sectors
    return per, elevator


def _mbps(per, seconds):
    return sum(per.values()) * 512 / seconds / 1e6


@pytest.mark.parametrize("kernel", ["5.4", "6.6"])
def test_two_sequential_readers_keep_their_sequentiality_through_idling(kernel):
    """Two sequential readers far apart on a disk (one request each outstanding): none
    and mq-deadline alternate between them, a seek per request; BFQ idles for the
    in-service reader (bfq_better_to_idle: sequential, I/O-bound, short think time)
    and serves each for whole budgets once their initial weight raising (which turns
    idling for throughput off) ends -- with low_latency off, from the start, at
    nearly one reader's throughput. The second reader starts 300 ms after the first,
    outside the 180 ms window of stable merging (test below)."""
    T = 30
    jobs = [dict(SEQ, name="a", runtime=T),
            dict(SEQ, name="b", offset="20g", startdelay="300ms", runtime=T)]
    none, _ = _run(jobs, "none", kernel=kernel)
    deadline, _ = _run(jobs, "mq-deadline", kernel=kernel)
    bfq, _ = _run(jobs, kernel=kernel)
    quiet, _ = _run(jobs, iosched={"low_latency": 0}, kernel=kernel)
    alone, _ = _run([dict(SEQ, name="a", runtime=T)], "none", kernel=kernel)
    assert _mbps(bfq, T) > 1.25 * _mbps(none, T)
    assert _mbps(bfq, T) > 1.25 * _mbps(deadline, T)
    assert _mbps(quiet, T) > 0.9 * _mbps(alone, T)
    for per in (bfq, quiet):
        a, b = sorted(per.values())
        assert a / b > 0.9                          # and fairly shared


def test_readers_started_together_are_stably_merged_from_5_15():
    """bfq_do_or_sched_stable_merge (5.15+): the second reader's queue, created within
    180 ms of the first on a rotational disk, is merged with it once 600 ms have
    passed and idling does not boost its throughput (while both are weight-raised it
    does not) -- stably merged queues are never split: the two readers share one
    queue and are served in sector order, alternating. 5.10 keeps them apart."""
    T = 15
    jobs = [dict(SEQ, name="a", runtime=T), dict(SEQ, name="b", offset="20g", runtime=T)]
    merged, el = _run(jobs, kernel="6.6")
    shared = el.queues[(1000, True)]          # the first reader's queue took both
    assert shared.coop and shared.pid == -1
    apart, el = _run(jobs, kernel="5.10")
    assert not el.queues[(1000, True)].coop and not el.queues[(1001, True)].coop
    assert _mbps(apart, T) > 1.1 * _mbps(merged, T)


def test_io_priorities_divide_the_disk_in_proportion_to_their_weights():
    """BE levels 0, 3 and 7 weigh 80, 50 and 10 (bfq_ioprio_to_weight): three always
    backlogged sequential readers get the disk 8 : 5 : 1 (none of them has the
    default weight, so from 5.15 none is weight-raised)."""
    T = 40
    jobs = [dict(SEQ, name="a", prio=0, runtime=T),
            dict(SEQ, name="b", offset="13g", prio=3, runtime=T),
            dict(SEQ, name="c", offset="26g", prio=7, runtime=T)]
    per, _ = _run(jobs)
    a, b, c = per[1000], per[1001], per[1002]
    assert abs(a / c - 8) < 0.8
    assert abs(b / c - 5) < 0.5
    deadline, _ = _run(jobs, "mq-deadline")
    assert max(deadline.values()) / min(deadline.values()) < 1.1   # blind to priorities


def test_the_idle_class_gets_the_disk_only_when_nobody_else_wants_it():
    T = 10
    jobs = [dict(SEQ, name="a", runtime=T),
            dict(SEQ, name="idle", offset="20g", prioclass=3, runtime=T)]
    per, _ = _run(jobs)
    assert per[1001] < 0.05 * per[1000]
    jobs = [dict(SEQ, name="a", runtime=2),
            dict(SEQ, name="idle", offset="20g", prioclass=3, runtime=T)]
    per, _ = _run(jobs)
    assert per[1001] > per[1000]              # served once the BE reader is gone


def test_every_bio_completes_once_through_the_block_layer():
    jobs = [{"rw": "randrw", "bs": "4k", "size": "1g", "runtime": 3, "name": "r",
             "iodepth": 8},
            dict(SEQ, name="s", offset="10g", runtime=3),
            {"rw": "write", "bs": "16k", "size": "1g", "offset": "20g", "runtime": 3,
             "name": "w", "prioclass": 1}]
    for kernel in ("5.4", "5.15", "6.6"):
        cfg = make_config(jobs=jobs, scheduler=BFQ, run={"kernel": kernel},
                          device={"drive": "cheetah15k4", "queue_depth": 32})
        _, done = run_config(cfg, collect=True)
        ids = [b.id for b in done]
        assert ids and len(ids) == len(set(ids))
        assert all(b.t_queue <= b.t_dispatch <= b.t_complete for b in done)


@settings(max_examples=60, deadline=None)
@given(stream=bio_streams, kernel=st.sampled_from(["5.4", "5.10", "5.15", "6.1", "6.6"]),
       hw=st.sampled_from([1, 2, 4]), depth=st.sampled_from([1, 2, 8]),
       rotational=st.booleans())
def test_every_bio_completes_once_within_the_pools_with_bfq(stream, kernel, hw, depth,
                                                            rotational):
    """The block layer's property (tests/test_mq_queue.py) with BFQ: every bio completes
    once, in Q <= D <= C order, tags within their pools, the queue drained -- over the
    kernel lines, hardware queues, device depths, plugs and merges."""
    env, q, dev, _ = make_mq("bfq", kernel=kernel, queue_depth=depth, nr_hw_queues=hw,
                             nr_cpus=4, servers=2, rotational=rotational)

    def check(_q, rq, now):
        for h in q.hctxs:
            assert h.tags.in_use <= h.tags.depth and h.in_flight <= depth
            assert h.sched_tags.in_use <= q.nr_requests
    q.subscribe("block_rq_issue", check)

    replay_stream(env, q, stream)
    assert q.idle() and q.count == 0 and q.queued == 0 and q.in_flight == 0
    el = q.elevator
    assert el.empty() and el.tot_rq_in_driver == 0 and not el.started
    queues = list(el.queues.values())
    assert not any(b.sort_list or b.dispatched for b in queues)
    # a queue preempted while idling guards its share stays busy though empty
    # (__bfq_bfqq_expire), as in the kernel; the counters agree with the flags
    for cls in (1, 2, 3):
        assert el.busy_queues[cls - 1] == sum(b.busy and b.ioprio_class == cls
                                              for b in queues)
