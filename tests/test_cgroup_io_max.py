"""io.max end to end: a group's limit set in [cgroups] holds its processes' bios in
blk-throttle's front of the disk (block/mq/throttle.py), and the root's are untouched."""

from __future__ import annotations

import pytest

from tests.test_cgroup import raw_config
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation


def _ios_by_job(groups, duration="4s"):
    jobs = [{"name": "db", "rw": "randread", "iodepth": 8, "ioengine": "libaio",
             "cgroup": "db"},
            {"name": "other", "rw": "randread", "iodepth": 8, "ioengine": "libaio"}]
    sim = Simulation(resolve(raw_config(groups, jobs, duration=duration), "t.toml"))
    sim.run()
    done = {}
    for pid, proc in ((p.pid, p) for p in sim.processes):
        done[proc.name] = proc.issued - proc.outstanding
    return sim, done


def test_a_groups_riops_holds_its_processes_and_not_the_roots():
    # riops=50 at HZ 250: a 100 ms slice (25 jiffies) allows 50 * 25 / 250 = 5 reads
    # (tg_within_iops_limit), so 50 a second; the device (5 ms each) could do 200
    sim, done = _ios_by_job({"db": {"io.max": "sda riops=50"}})
    assert "sda" in sim.host.throttles
    assert done["db"] == pytest.approx(50 * 4, abs=10)
    # the root's job takes the rest of the device
    assert done["other"] > 500


def test_without_io_max_no_front_is_put_in_front_of_the_disk():
    sim, done = _ios_by_job({"db": {}})
    assert sim.host.throttles == {}
    assert done["db"] == pytest.approx(done["other"], rel=0.1)
