"""The scheduler registry: kernel names, lookups, errors."""

from __future__ import annotations

import pytest

from blksim.schedulers import SCHEDULERS, get_scheduler, scheduler_tunables
from blksim.block.elevator import Elevator
from blksim.schedulers.deadline import DeadlineElevator
from blksim.schedulers.noop import NoopElevator
from blksim.block.dispatch_queue import DispatchQueue


def test_registered_names_in_kernel_order():
    assert list(SCHEDULERS)[:4] == ["noop", "anticipatory", "deadline", "cfq"]   # 2.6.18 link order
    assert list(SCHEDULERS)[4:] == ["fcfs", "sstf", "scan", "cscan", "look", "clook", "sptf"]
    assert get_scheduler("noop") is NoopElevator
    assert get_scheduler("deadline") is DeadlineElevator


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_each_scheduler_is_a_complete_elevator(name):
    cls = get_scheduler(name)
    assert issubclass(cls, Elevator) and cls.name == name
    el = cls(DispatchQueue())
    assert el.empty() and el.queued() == 0 and el.dispatch(0.0) == 0


@pytest.mark.parametrize("bad", ["cfq-v9", "Deadline", "", None])
def test_unknown_scheduler_lists_valid(bad):
    with pytest.raises(ValueError) as exc:
        get_scheduler(bad)
    assert str(exc.value) == (f"unknown scheduler {bad!r}; valid: anticipatory, cfq, clook, cscan, deadline, "
                              f"fcfs, look, noop, scan, sptf, sstf, or module:Class for a "
                              f"scheduler of your own")


def test_scheduler_tunables():
    assert scheduler_tunables("noop") == ()
    names = [t.name for t in scheduler_tunables("deadline")]
    assert names == ["read_expire", "write_expire", "writes_starved", "front_merges",
                     "fifo_batch"]
    by_name = {t.name: t for t in scheduler_tunables("deadline")}
    assert by_name["read_expire"].jiffies and by_name["read_expire"].unit == "ms"
    assert not by_name["fifo_batch"].jiffies
    with pytest.raises(ValueError, match="valid: anticipatory, cfq, clook, cscan, deadline, fcfs, look, noop, scan, sptf, sstf"):
        scheduler_tunables("as")


@pytest.mark.parametrize("name", list(SCHEDULERS))
@pytest.mark.parametrize("kernel", ["2.6.18", "2.6.24", "2.6.32"])
def test_create_for_each_supported_kernel(name, kernel):
    el = get_scheduler(name).create(DispatchQueue(), {}, hz=1000, kernel=kernel)
    assert isinstance(el, get_scheduler(name)) and el.hz == 1000 and el.empty()


@pytest.mark.parametrize("kernel, variant", [
    ("2.6.18", "2.6.18"), ("2.6.20", "2.6.18"), ("2.6.24", "2.6.24"),
    ("2.6.28", "2.6.24"), ("2.6.32", "2.6.32"), ("2.6.39", "2.6.32"),
])
def test_deadline_create_picks_variant(kernel, variant):
    el = DeadlineElevator.create(DispatchQueue(), {"fifo_batch": 4}, kernel=kernel)
    assert el.variant == variant and el.params["fifo_batch"] == 4


@pytest.mark.parametrize("kernel", ["2.6.9", "two.six", ""])
def test_deadline_create_rejects_unmodelled_kernels(kernel):
    with pytest.raises(ValueError, match="2.6.18"):
        DeadlineElevator.create(DispatchQueue(), kernel=kernel)
