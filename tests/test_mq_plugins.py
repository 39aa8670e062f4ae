"""Multi-queue scheduler plugins: the example twin (examples/plugins/mq_deadline_early)
runs as module:Class on a multi-queue kernel; a plugin of the wrong kind for the kernel
is refused with one line."""

import sys
from pathlib import Path

import pytest

import blksim
from blksim.sim.config import ConfigError, resolve

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugins" / "mq_deadline_early"
SPEC = "mq_deadline_early:MqDeadlineEarlyElevator"


@pytest.fixture(autouse=True)
def example_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(EXAMPLE.parent / "deadline_early"))
    yield
    sys.modules.pop("mq_deadline_early", None)


def raw(kernel, scheduler, **iosched):
    return {"run": {"kernel": kernel, "duration": "2s", "seed": 3},
            "device": {"drive": "cheetah9LP", "queue_depth": 1},
            "queue": {"scheduler": scheduler, "nr_requests": 64, "iosched": iosched},
            "job": [{"name": "r", "rw": "randread", "bs": "4k", "iodepth": 4},
                    {"name": "w", "rw": "randwrite", "bs": "4k", "iodepth": 32}]}


def test_the_multi_queue_example_plugin_runs_and_acts_early():
    base = blksim.run(raw("6.6", "mq-deadline", read_expire=50), per_request=False)
    early = blksim.run(raw("6.6", SPEC, read_expire=50, early_ms=40), per_request=False)
    assert early.read.ios > 0
    # acting 40 ms before a 50 ms deadline serves the oldest reads sooner
    assert early.read.q2c.max_ms < 0.5 * base.read.q2c.max_ms
    assert early.read.ios > base.read.ios


def test_a_plugin_of_the_wrong_kind_for_the_kernel_is_refused():
    with pytest.raises(ConfigError, match="not a 2.6 elevator"):
        resolve(raw("2.6.18", SPEC), "t.toml")
    with pytest.raises(ConfigError, match="not a multi-queue scheduler"):
        resolve(raw("6.6", "deadline_early:DeadlineEarlyElevator"), "t.toml")
