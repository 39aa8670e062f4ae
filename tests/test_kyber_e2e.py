"""Kyber end to end: the multi-queue queue (block/mq/queue.py) with Kyber, whole runs and
bio streams.

The device is a fixed-service FCFS device (0.5 ms a request, 32 deep): every
request at the device ahead of a read adds 0.5 ms to it, so the queueing Kyber controls is
plain to see.
"""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim import schedulers
from blksim.block.mq.queue import MqQueue, MqSettings
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers.kyber import KYBER_DEPTH, KyberElevator
from blksim.sim.clock import SimpyClock
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation
from tests.test_mq_queue import replay_stream


def test_kyber_is_registered():
    assert schedulers.MQ_SCHEDULERS["kyber"] is KyberElevator


def run(scheduler: str, writer_depth: int, duration: float = 14.0, kernel: str = "6.6"):
    """A reader (random 4 KiB reads, one at a time) beside a writer (random 4 KiB direct
    writes, ``writer_depth`` at a time): every bio completed, and the queue."""
    raw = {"run": {"seed": 1, "duration": duration, "kernel": kernel},
           "device": {"service": "fixed", "service_time": "0.5ms", "queue_depth": 32},
           "queue": {"scheduler": scheduler, "iosched": {}},
           "job": [{"name": "reader", "rw": "randread", "bs": "4k", "size": "1g",
                    "iodepth": 1},
                   {"name": "writer", "rw": "randwrite", "bs": "4k", "size": "1g",
                    "offset": "10g", "iodepth": writer_depth}]}
    cfg = resolve(raw, "kyber-e2e.toml")
    done = []
    sim = Simulation(cfg, complete_hooks=(done.append,))
    sim.run()
    (queue,) = sim.host.disks.values()
    return done, queue


def p99(values) -> float:
    """The 99th percentile, nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 99 // 100) - 1)]


def read_p99_after(done, t0: float) -> float:
    return p99([b.t_complete - b.t_queue for b in done if not b.write and b.t_queue >= t0])


def test_reader_p99_stays_near_read_lat_nsec_under_a_write_flood():
    """With ``none`` the reader waits behind every write at the device: its p99 is
    (writer depth + 1) x 0.5 ms and grows with the writer's depth (2.5 ms, 4.5 ms). The
    writes meet their own 10 ms target, the reads miss 2 ms: Kyber finds the device
    congested (read p90 I/O latency in a bad bucket) and shrinks the WRITE domain, window
    after window, until the read p90 is back within target; the reader's p99 (from 9 s
    on) stays at or under read_lat_nsec."""
    none_p99 = {w: read_p99_after(run("none", w)[0], 9.0) for w in (4, 8)}
    assert none_p99[4] == pytest.approx(0.0025, rel=0.05)
    assert none_p99[8] == pytest.approx(0.0045, rel=0.05)
    for w in (4, 8):
        done, queue = run("kyber", w)
        kyber = queue.elevator
        assert read_p99_after(done, 9.0) <= 0.002
        # The log: only WRITE moved, always down, and ended shallower than the writer.
        assert kyber.depth_log
        assert {entry[1] for entry in kyber.depth_log} == {"WRITE"}
        assert all(new < old for _, _, old, new in kyber.depth_log)
        assert kyber.depth_log[0][2] == KYBER_DEPTH[1]
        assert kyber.depth[1] < w and kyber.depth[0] == KYBER_DEPTH[0]
        times = [entry[0] for entry in kyber.depth_log]
        assert times == sorted(times) and times[-1] < 9.0
        # The reads' p90 I/O latency was in a bad bucket at first, good at the end.
        read_io = [e for e in kyber.latency_log if e[1] == "READ" and e[2] == "I/O"]
        assert read_io[0][4] > 4 and read_io[-1][4] <= 4


def test_writes_missing_their_own_target_are_not_throttled():
    """Kyber shrinks only domains that meet their target: with 24 writes outstanding the
    writes' total latency (about 12.5 ms) misses write_lat_nsec too, so congestion makes
    WRITE grow (it is at its maximum already) and the reader gets what it gets with
    none."""
    done, queue = run("kyber", 24, duration=4.0)
    assert queue.elevator.depth_log == []
    none_done, _ = run("none", 24, duration=4.0)
    assert read_p99_after(done, 2.0) == pytest.approx(read_p99_after(none_done, 2.0))


# ------------------------------------------------------------------------- bio streams

bio_streams = st.lists(st.tuples(
    st.floats(0, 0.02), st.integers(0, 400), st.sampled_from([8, 16, 64]),
    st.booleans(), st.integers(1, 4), st.integers(0, 3), st.booleans()),
    min_size=1, max_size=60)


@settings(max_examples=40, deadline=None)
@given(stream=bio_streams, kernel=st.sampled_from(["5.4", "6.6"]),
       hw=st.sampled_from([1, 2]), depth=st.sampled_from([1, 4]),
       write_depth=st.sampled_from([1, 2, 128]))
def test_every_bio_completes_once_and_tokens_hold(stream, kernel, hw, depth, write_depth):
    """Bios on 4 CPUs (merging, plugging) into Kyber over 1 or 2 hardware queues: every
    bio completes once, Q <= D <= C, a domain never has more requests at the device than
    tokens it handed out, and at the end every token is back and Kyber is empty."""
    env = simpy.Environment()
    dev = ServiceLawDevice("fixed", 0.001, capacity=1 << 30, queue_depth=depth, servers=2,
                           nr_hw_queues=hw)
    q = MqQueue(lambda info: KyberElevator.create(info, {}), dev, SimpyClock(env),
                MqSettings(kernel=kernel, nr_hw_queues=hw, nr_cpus=4), elevator_name="kyber")
    kyber = q.elevator
    kyber.depth[1] = write_depth          # a small WRITE pool makes hctxs wait for tokens

    def issued(_q, rq, now):
        for d in range(4):
            assert kyber.tokens_in_use[d] <= kyber.depth[d] or kyber.depth_log
        assert rq.sched >= 0                # it holds a token of its domain
    q.subscribe("block_rq_issue", issued)

    replay_stream(env, q, stream)
    assert kyber.empty() and kyber.tokens_in_use == [0, 0, 0, 0]
    assert q.count == 0 and q.in_flight == 0
