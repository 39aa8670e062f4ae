"""The elevator's own messages (``block_elv_msg``, the kernel's ``blk_add_trace_msg``):
an elevator gets a sink only while someone subscribes, the message carries the clock's
time, and a subscriber that raises stops the run as any tracepoint's does."""

import pytest
import simpy

from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.block.request import Bio
from blksim.block.tracepoints import TracepointFault
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import get_scheduler
from blksim.sim.clock import SimpyClock

Noop = get_scheduler("noop")


class Talking(Noop):
    """noop that says so each time it dispatches (a test elevator)."""

    name = "talking"
    events = {"dispatched": "a request moved to the dispatch list"}

    def dispatch(self, now, force=False):
        moved = super().dispatch(now, force)
        if moved and self.msg is not None:
            self.msg("dispatched", self.dq[-1].pid, moved)
        return moved


def _queue():
    env = simpy.Environment()
    device = ServiceLawDevice("fixed", 0.010, capacity=1 << 30, queue_depth=1)
    q = RequestQueue(lambda dq: Talking.create(dq, {}, hz=250), device, SimpyClock(env),
                     QueueSettings(nr_requests=128))
    return env, q


def _bio(sector, pid):
    return Bio(sector, sector, 8, False, True, pid, on_complete=lambda b: None)


def test_messages_reach_the_subscriber_with_the_clock_time_and_stop_when_it_leaves():
    env, q = _queue()
    assert q.elevator.msg is None                    # no subscriber: no sink
    log = []
    fn = lambda dev, event, pid, detail, now: log.append((dev, event, pid, detail, now))
    q.subscribe("block_elv_msg", fn)
    q.submit_bio(_bio(0, pid=7), 0.0)
    q.submit_bio(_bio(1000, pid=8), 0.0)
    env.run()
    assert [(e, p, d) for _, e, p, d, _ in log] == [("dispatched", 7, 1), ("dispatched", 8, 1)]
    assert all(dev is q for dev, *_ in log)
    # sync reads are not plugged: the first leaves at once, the second when the first ends
    assert [now for *_, now in log] == [0.0, pytest.approx(0.010)]
    q.unsubscribe("block_elv_msg", fn)
    assert q.elevator.msg is None


def test_a_new_elevator_gets_the_sink_after_a_switch():
    env, q = _queue()
    log = []
    q.subscribe("block_elv_msg", lambda dev, *args: log.append(args))
    q.switch_elevator(lambda dq: Talking.create(dq, {}, hz=250), "talking2")
    env.run()
    assert q.elevator.msg is not None


def test_a_raising_subscriber_stops_the_run_in_one_line():
    env, q = _queue()

    def broken(dev, event, pid, detail, now):
        raise KeyError(event)
    q.subscribe("block_elv_msg", broken)
    with pytest.raises(TracepointFault, match="tracepoint block_elv_msg on .*broken"):
        q.submit_bio(_bio(0, pid=7), 0.0)     # a sync read is dispatched at once
