"""Job processes: closed and open loop, think time, limits."""

import math

from blksim.disk_models.synthetic import ServiceLawDevice
from tests.simhelpers import make_config, run_config


def _issue_times(job, service=0.001):
    cfg = make_config(jobs=[{"name": "j", **job}], scheduler="noop", queue={"nomerges": 2})
    outcome, done = run_config(cfg, device=ServiceLawDevice("fixed", service, capacity=71687372),
                               collect=True)
    return [b.t_queue for b in sorted(done, key=lambda b: b.id)], outcome


def test_closed_loop_thinktime_follows_each_completion():
    times, _ = _issue_times({"rw": "randread", "number_ios": 4, "thinktime": "2ms"})
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(math.isclose(g, 0.003) for g in gaps)      # 1 ms service + 2 ms think


def test_thinktime_blocks_thinks_every_n_completions():
    times, _ = _issue_times({"rw": "randread", "number_ios": 6, "thinktime": "2ms",
                             "thinktime_blocks": 3})
    gaps = [round(b - a, 9) for a, b in zip(times, times[1:])]
    assert gaps == [0.001, 0.001, 0.003, 0.001, 0.001]


def test_iodepth_keeps_that_many_in_flight():
    times, outcome = _issue_times({"rw": "randread", "number_ios": 8, "iodepth": 4})
    assert times[:4] == [0.0] * 4
    assert outcome.metrics.read.ios == 8


def test_open_loop_does_not_wait_for_completions():
    # 1000 I/Os per second on a device that needs 5 ms each: arrivals keep coming.
    times, outcome = _issue_times({"rw": "randread", "rate_iops": 1000, "rate_process": "linear",
                                   "number_ios": 50}, service=0.005)
    assert all(math.isclose(b - a, 0.001) for a, b in zip(times, times[1:]))
    assert outcome.metrics.read.q2c.hi > 0.1


def test_open_loop_with_iodepth_bounds_outstanding():
    times, outcome = _issue_times({"rw": "randread", "rate_iops": 1000, "rate_process": "linear",
                                   "number_ios": 50, "iodepth": 2}, service=0.005)
    assert outcome.metrics.read.ios == 50
    assert outcome.metrics.read.q2c.hi < 0.0101   # never more than 2 outstanding


def test_runtime_and_startdelay():
    times, _ = _issue_times({"rw": "randread", "startdelay": "10ms", "runtime": "20ms"})
    assert times[0] == 0.010 and max(times) < 0.030


def test_processes_report_their_exit_once_their_last_io_is_back():
    from blksim.block.legacy_queue import RequestQueue
    exits = []
    orig = RequestQueue.process_exited

    def spy(self, pid):
        exits.append((pid, self.clock.now, self.pending()))
        orig(self, pid)
    RequestQueue.process_exited = spy
    try:
        times, outcome = _issue_times({"rw": "randread", "number_ios": 3, "thinktime": "1ms",
                                       "numjobs": 2})
    finally:
        RequestQueue.process_exited = orig
    assert sorted(p for p, _, _ in exits) == [1000, 1001]
    assert all(pending == 0 or t > 0 for _, t, pending in exits)
    last_completion = outcome.metrics.last_completion
    assert max(t for _, t, _ in exits) >= last_completion
