"""A finished trace replay is freed by reference counting alone.

The engine reuses its events (a `sim.clock.Call` that has fired is queued again)
and no component keeps a bound method of itself: such a reference cycle would
keep a finished run (its queue, elevator, device, metrics and replays)
alive until a full garbage collection. Only simpy's `Environment`, which binds
methods to itself, is a cycle of its own; it holds nothing else once its event
queue is empty.
"""

import gc
import weakref

import pytest

from blksim._compat import ON_PYPY
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation
from blksim.traces.disksim_ascii import TraceRecord, write_disksim_ascii


pytestmark = pytest.mark.skipif(
    ON_PYPY, reason="PyPy frees objects by its tracing collector, not by reference counting")


def _trace(tmp_path, n=200):
    path = tmp_path / "t.trace"
    write_disksim_ascii(path, (TraceRecord(i * 0.004, 0, (i * 7919 % 5000) * 8, 8,
                                           i % 5 == 0, None) for i in range(n)))
    return str(path)


def _assert_freed(tmp_path, kernel: str, scheduler: str, mode: str) -> None:
    """A replay of two traces under ``scheduler`` on ``kernel``, then every component of the
    finished run freed once the run and its outcome are dropped, the cycle collector off."""
    path = _trace(tmp_path)
    raw = {"run": {"seed": 1, "kernel": kernel}, "device": {"drive": "cheetah10k7"},
           "queue": {"scheduler": scheduler},
           "trace": [{"path": path, "format": "disksim", "mode": mode},
                     {"path": path, "format": "disksim", "mode": mode, "pid": 7}]}
    cfg = resolve(raw, str(tmp_path / "run.toml"))
    gc.collect()
    gc.disable()
    try:
        sim = Simulation(cfg)
        outcome = sim.run()
        assert outcome.metrics.completed == 400
        assert not sim.env._queue
        refs = {"simulation": sim, "queue": sim.queue, "elevator": sim.queue.elevator,
                "device": sim.device, "metrics": sim.metrics,
                "replay": sim.processes[0], "replay_stats": sim.processes[0].stats}
        refs = {name: weakref.ref(obj) for name, obj in refs.items() if obj is not None}
        del sim, outcome
        alive = sorted(name for name, ref in refs.items() if ref() is not None)
    finally:
        gc.enable()
    assert alive == []


@pytest.mark.parametrize("kernel, scheduler", [
    ("2.6.18", "noop"), ("2.6.18", "deadline"), ("2.6.18", "anticipatory"),
    ("2.6.18", "cfq"), ("6.6", "none"), ("6.6", "mq-deadline"), ("6.6", "kyber"),
    ("6.6", "bfq")])
@pytest.mark.parametrize("mode", ["open", "closed"])
def test_finished_replay_is_freed_without_the_cycle_collector(tmp_path, kernel, scheduler,
                                                              mode):
    _assert_freed(tmp_path, kernel, scheduler, mode)
