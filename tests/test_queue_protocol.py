"""The queue protocol (block/queue_protocol.py): callers above the block layer use a
request queue through it and nothing else.

Each configuration runs with every disk's queue a `CheckedQueue`: a `RequestQueue` that
refuses any attribute not in the protocol when the code asking is not the block layer's
own (partitions and volumes are the block layer's)."""

import sys

import pytest

from blksim.block.legacy_queue import RequestQueue
from blksim.block.mq.queue import MqQueue
from blksim.block.queue_protocol import PROTOCOL_NAMES, QueueProtocol


class OutsideTheProtocol(AttributeError):
    """(An AttributeError: a probe such as getattr(q, "targets", None) sees no such name.)"""


def _block_layer(frame) -> bool:
    # (partitions and device-mapper volumes are the block layer's: block/partition.py,
    # block/devmapper.py)
    return frame.f_globals.get("__name__", "").startswith("blksim.block.")


class CheckedQueue(RequestQueue):
    """A RequestQueue that fails a caller outside the block layer reaching past the
    protocol."""

    def __getattribute__(self, name):
        if not name.startswith("__") and name not in PROTOCOL_NAMES:
            frame = sys._getframe(1)
            if not _block_layer(frame):
                raise OutsideTheProtocol(
                    f"{frame.f_globals.get('__name__')}:{frame.f_code.co_name} read "
                    f"queue.{name}, which the queue protocol does not offer")
        return object.__getattribute__(self, name)


class CheckedMqQueue(MqQueue):
    """The same check on the multi-queue layer's queue."""

    __getattribute__ = CheckedQueue.__getattribute__


ONE_DISK = """
[run]
seed = 2
duration = "300ms"
[device]
drive = "cheetah15k4"
[queue]
scheduler = "cfq"
[[job]]
name = "r"
rw = "randread"
bs = "4k"
numjobs = 2
[[job]]
name = "w"
rw = "write"
bs = "64k"
iodepth = 8
[[switch]]
at = "150ms"
scheduler = "deadline"
"""


def _examples(name):
    from pathlib import Path
    return str(Path(__file__).resolve().parents[1] / "examples" / name)


MQ_DISK = ONE_DISK.replace("seed = 2", 'seed = 2\nkernel = "6.6"').replace(
    '"cfq"', '"mq-deadline"').replace('"deadline"', '"none"')


@pytest.mark.parametrize("config", [
    "one-disk", "mq-disk", "lvm-linear.toml", "buffered-read.toml", "ext3-fsync.toml",
    "raid10-writeback.toml", "bulk-load.toml"])
def test_a_run_uses_the_queue_through_the_protocol_only(config, tmp_path, monkeypatch, capsys):
    import blksim.sim.host as host
    from blksim.cli import main
    monkeypatch.setattr(host, "RequestQueue", CheckedQueue)
    monkeypatch.setattr(host, "MqQueue", CheckedMqQueue)
    if config in ("one-disk", "mq-disk"):
        path = tmp_path / "one.toml"
        path.write_text(ONE_DISK if config == "one-disk" else MQ_DISK)
        config = str(path)
    else:
        config = _examples(config)
    code = main(["run", config, "-q", "--duration", "300ms", "--set", "run/ramp_time=0",
                 "--out", str(tmp_path / "o"),
                 "--per-request", "--blktrace", str(tmp_path / "bt"),
                 "--iostat", "100ms"])
    err = capsys.readouterr().err
    assert code == 0, err


def test_the_checked_queue_refuses_a_name_outside_the_protocol():
    import simpy
    from blksim.block.legacy_queue import QueueSettings
    from blksim.disk_models.synthetic import ServiceLawDevice
    from blksim.schedulers import get_scheduler
    from blksim.sim.clock import SimpyClock
    cls = get_scheduler("noop")
    q = CheckedQueue(lambda dq: cls.create(dq, {}), ServiceLawDevice("fixed", 0.001,
                     capacity=1 << 20), SimpyClock(simpy.Environment()), QueueSettings())
    assert q.capacity == 1 << 20 and q.pending() == 0
    with pytest.raises(OutsideTheProtocol, match="queue.merge_hash"):
        q.merge_hash
    assert isinstance(q, QueueProtocol)


def test_the_protocol_names_what_callers_use_and_no_internals():
    assert {"submit_bio", "when_request", "process_exited", "switch_elevator", "subscribe",
            "capacity", "pending", "idle", "allocated", "stats", "name", "number"} \
        <= PROTOCOL_NAMES
    assert not PROTOCOL_NAMES & {"run_queue", "dq", "merge_hash", "count", "waiting",
                                 "in_flight", "queued", "clock", "unplug"}
