"""Writeback throttling in a whole run (block/mq/wbt.py wired into block/mq/queue.py): a
random reader beside a buffered sequential writer on a rotational disk. With wbt on (the
kernel's default target for a rotational disk, 75 ms) the writeback depth is cut when
reads exceed the target; with it off (``wbt_lat_usec = 0``) the reads queue behind the
writeback."""

from blksim.sim.config import resolve
from blksim.sim.engine import Simulation


def run(wbt_lat_usec: int, scheduler: str = "none"):
    raw = {"run": {"kernel": "6.6", "seed": 2, "duration": "6s", "ramp_time": "1s"},
           "host": {"memory": "2g", "page_cache": "1g"},
           "vm": {"dirty_background_ratio": 1, "dirty_ratio": 5},
           "device": {"drive": "cheetah15k4", "queue_depth": 32},
           "queue": {"scheduler": scheduler, "wbt_lat_usec": wbt_lat_usec},
           "file": [{"path": "/data/log", "device": "/dev/sda", "size": "8g"},
                    {"path": "/data/db", "device": "/dev/sda", "size": "4g"}],
           "job": [{"name": "writer", "rw": "write", "bs": "64k", "filename": "/data/log"},
                   {"name": "reader", "rw": "randread", "bs": "8k", "direct": 1,
                    "filename": "/data/db"}]}
    done = []
    sim = Simulation(resolve(raw, "wbt-e2e.toml"), complete_hooks=(done.append,))
    sim.run()
    (queue,) = sim.host.disks.values()
    reads = [b.t_complete - b.t_queue for b in done if not b.write and b.t_queue >= 1.0]
    return reads, queue


def test_wbt_cuts_the_writeback_depth_when_reads_exceed_the_target():
    on, q_on = run(-1)
    off, q_off = run(0)
    assert not q_off.wbt.enabled and q_on.wbt.enabled
    mean_on, mean_off = sum(on) / len(on), sum(off) / len(off)
    # the reads get through several times faster, and more of them
    assert mean_on < mean_off / 3 and len(on) > 3 * len(off)
    # the step went up from 0: max_depth below the default 16 (rotational, depth 32)
    steps = [step for _t, step, _depth in q_on.wbt.log]
    depths = [depth for _t, _step, depth in q_on.wbt.log]
    assert max(steps) >= 1 and min(depths) < 16
    assert q_off.wbt.log == []


def test_bfq_turns_wbt_off_while_attached():
    _, q = run(-1, "bfq")
    assert not q.wbt.enabled and q.wbt.log == []
