"""io.prio.class (blk-ioprio, block/mq/ioprio.py): the policies' rules per kernel line and
what mq-deadline's priority levels make of them."""

from __future__ import annotations

import pytest

from tests.test_cgroup import error_of, raw_config
from blksim.block.mq.ioprio import apply_policy
from blksim.block.request import (IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE, IOPRIO_CLASS_RT,
                                  ioprio_value)
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation

RT, BE, IDLE = IOPRIO_CLASS_RT, IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE


@pytest.mark.parametrize("ioprio,value,promote,expected", [
    # the max rule (5.14-6.4): the lower priority of the bio's and the policy's class
    (ioprio_value(BE, 4), 1, False, ioprio_value(BE, 4)),    # none-to-rt: BE stays BE
    (0, 1, False, ioprio_value(RT, 0)),                      # ... NONE becomes RT/0
    (ioprio_value(RT, 3), 2, False, ioprio_value(BE, 0)),    # restrict-to-be: RT -> BE/0
    (ioprio_value(BE, 6), 2, False, ioprio_value(BE, 6)),    # a BE bio keeps its level
    (ioprio_value(IDLE, 0), 2, False, ioprio_value(IDLE, 0)),
    (ioprio_value(BE, 4), 3, False, ioprio_value(IDLE, 0)),  # idle: everything IDLE/0
    (ioprio_value(BE, 4), 0, False, ioprio_value(BE, 4)),    # no-change
    # promote-to-rt (6.5 on; none-to-rt its alias, value 4): anything but RT -> RT/4
    (ioprio_value(BE, 4), 1, True, ioprio_value(RT, 4)),
    (ioprio_value(IDLE, 0), 4, True, ioprio_value(RT, 4)),
    (ioprio_value(RT, 2), 1, True, ioprio_value(RT, 2)),
    (ioprio_value(RT, 2), 2, True, ioprio_value(BE, 0)),
])
def test_blk_ioprio_rules(ioprio, value, promote, expected):
    assert apply_policy(ioprio, value, promote) == expected


def _run(kernel, policy, prio=None, duration="1s", fg=True):
    """mq-deadline, a 5 ms one-at-a-time disk with 64 scheduler tags: "bg" (a job in a
    group with ``policy``) and, with ``fg``, a job of the root; each 4 random reads in
    flight."""
    bg = {"name": "bg", "rw": "randread", "iodepth": 4, "ioengine": "libaio", "cgroup": "bg"}
    if prio is not None:
        bg.update(prioclass=prio[0], prio=prio[1])
    jobs = [bg] + ([{"name": "fg", "rw": "randread", "iodepth": 4, "ioengine": "libaio"}]
                   if fg else [])
    raw = raw_config({"bg": {"io.prio.class": policy} if policy else {}}, jobs,
                     kernel=kernel, duration=duration)
    raw["device"]["queue_depth"] = 1
    raw["queue"]["nr_requests"] = 64       # tags for all: only the elevator decides
    sim = Simulation(resolve(raw, "t.toml"))
    sim.run()
    done = {p.name: p.issued - p.outstanding for p in sim.processes}
    levels = [lvl.inserted for lvl in sim.host.disks["sda"].elevator.levels]
    return sim, done, levels


@pytest.mark.parametrize("kernel,policy,prio,level", [
    ("5.15", "none-to-rt", None, 0),     # the 5.x bio of a task that set none: NONE -> RT
    ("6.1", "none-to-rt", None, 1),      # 6.0 on: the bio is BE/4 already: unchanged
    ("6.6", "none-to-rt", None, 0),      # 6.5 on: promote-to-rt's alias
    ("6.6", "promote-to-rt", None, 0),
    ("5.15", "restrict-to-be", (RT, 2), 1),
    ("6.1", "restrict-to-be", (RT, 2), 1),
    ("6.6", "restrict-to-be", (RT, 2), 1),
    ("5.15", "idle", None, 2),
    ("6.1", "idle", None, 2),
    ("6.6", "idle", None, 2),
    ("6.6", "no-change", (RT, 2), 0),
])
def test_mq_deadline_files_the_groups_requests_at_the_policys_level(kernel, policy, prio,
                                                                    level):
    _, done, levels = _run(kernel, policy, prio, duration="0.2s", fg=False)
    # every request of the group at one level (RT 0, BE 1, IDLE 2: ioprio_class_to_prio)
    assert levels[level] == sum(levels) > 0


@pytest.mark.parametrize("kernel", ["6.1", "6.6"])
def test_an_idle_group_waits_while_best_effort_requests_are_queued(kernel):
    # 6.0 on, mq-deadline serves a lower level only when no higher level has a request
    # queued or at the device (dd_queued); aging (prio_aging_expire, 10 s) is beyond the
    # run. The root's job keeps 4 BE reads queued, so after the first dispatch the idle
    # group gets nothing; with no-change both share the disk.
    _, idle, levels = _run(kernel, "idle")
    _, same, _ = _run(kernel, None)
    assert idle["bg"] <= 1 and idle["fg"] >= 190
    assert same["bg"] == pytest.approx(same["fg"], abs=10)


@pytest.mark.parametrize("kernel,value,expected", [
    ("5.4", "idle", "io.prio.class needs Linux 5.14 (blk-ioprio); the run's kernel is 5.4"),
    ("5.10", "idle", "needs Linux 5.14"),
    ("6.1", "promote-to-rt", "expected one of no-change, none-to-rt, restrict-to-be, idle"),
    ("6.6", "rt", "expected one of no-change, promote-to-rt"),
    ("6.6", 3, "found 3"),
])
def test_bad_io_prio_class_is_one_line_naming_the_key(kernel, value, expected):
    text = error_of(raw_config({"db": {"io.prio.class": value}}, kernel=kernel))
    assert "io.prio.class" in text and expected in text


def test_without_io_prio_class_the_queue_has_no_hook():
    sim, _, _ = _run("6.6", None, duration="0.05s")
    assert sim.host.ioprio == {} and sim.host.disks["sda"].set_ioprio is None
