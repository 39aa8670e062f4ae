"""kblockd's runs of hardware queues on the clock (block/mq/queue.py ``_run_async``):
one clock event per instant runs every hctx queued for it, in the order queued,
including those queued while it runs (``blk_mq_run_hw_queue(hctx, async=true)``,
``blk_mq_run_work_fn``)."""

import simpy

from blksim.block.mq.queue import MqQueue, MqSettings
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.sim.clock import SimpyClock


def _queue(nr_hw_queues=3):
    env = simpy.Environment()
    dev = ServiceLawDevice("fixed", 0.001, capacity=1 << 30, queue_depth=8,
                           nr_hw_queues=nr_hw_queues)
    q = MqQueue(None, dev, SimpyClock(env),
                MqSettings(kernel="6.6", nr_hw_queues=nr_hw_queues, nr_cpus=nr_hw_queues),
                elevator_name="none")
    return env, q


def test_the_hctxs_queued_at_one_instant_run_in_one_event_in_the_order_queued():
    env, q = _queue()
    h0, h1, h2 = q.hctxs
    runs = []

    def run_hw_queue(hctx, now):
        runs.append((hctx.index, now, len(env._queue)))
        if len(runs) == 1:
            q._run_async(h2, now)       # a run queues another hctx's run ...
            q._run_async(h0, now)       # ... and its own again (its run is no longer due)
            q._run_async(h1, now)       # already due: not queued twice
        return False

    q.run_hw_queue = run_hw_queue
    q._run_async(h0, 0.0)
    q._run_async(h1, 0.0)
    q._run_async(h0, 0.0)               # already due
    assert len(env._queue) == 1         # one event for the instant
    assert runs == []                   # asynchronous: nothing ran yet
    env.run()
    assert runs == [(0, 0.0, 0), (1, 0.0, 0), (2, 0.0, 0), (0, 0.0, 0)]
    assert all(h.run_due is None for h in q.hctxs)
    q._run_async(h1, env.now)           # a later instant: a new event, h1 alone
    env.run()
    assert [r[0] for r in runs[4:]] == [1]


def test_a_lone_hctx_runs_once_per_instant():
    env, q = _queue(nr_hw_queues=1)
    runs = []
    q.run_hw_queue = lambda hctx, now: runs.append((hctx.index, now))
    for t in (0.0, 1.0, 1.0, 2.0):
        q.clock.call_at(t, lambda ev: q._run_async(q.hctxs[0], ev.when))
    env.run()
    assert runs == [(0, 0.0), (0, 1.0), (0, 2.0)]
