"""Discards (``REQ_OP_DISCARD``) through the multi-queue layer: fio's trim jobs, the
merge rule that keeps ops apart (``blk_rq_merge_ok``), the diskstats discard group
(``op_stat_group``), kyber's DISCARD domain, blktrace's BLK_TC_DISCARD, and the
configuration's refusals (a device without discard, a 2.6 kernel, a file)."""

import random

import pytest
import simpy

from blksim.block.elevator_boundary import SimulationError
from blksim.block.mq.queue import MqQueue, MqSettings
from blksim.block.request import REQ_OP_DISCARD, REQ_OP_READ, REQ_OP_WRITE, Bio
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import MQ_SCHEDULERS
from blksim.sim.clock import SimpyClock
from blksim.traces.blktrace import TA_QUEUE, TC_DISCARD, TC_SHIFT, TC_WRITE, action_value
from blksim.traces.jobs import parse_job
from blksim.traces.pattern import IoPattern

_ids = iter(range(10**9))


class DiscardingDevice(ServiceLawDevice):
    """A fixed-service device that takes discards of up to ``limit`` sectors."""

    def __init__(self, limit):
        super().__init__("fixed", 0.001, capacity=1 << 30, queue_depth=4)
        self.max_discard_sectors = limit


def make(scheduler="mq-deadline", limit=1 << 20):
    env = simpy.Environment()
    dev = DiscardingDevice(limit)
    cls = MQ_SCHEDULERS[scheduler]
    factory = None if scheduler == "none" else (lambda info: cls.create(info, {}))
    q = MqQueue(factory, dev, SimpyClock(env),
                MqSettings(kernel="6.6", nr_hw_queues=1, nr_cpus=1), elevator_name=scheduler)
    merges = []
    q.subscribe("block_bio_backmerge", lambda _q, bio, now: merges.append(bio.op))
    return env, q, merges


def bio(sector, op, n=8, done=None):
    b = Bio(next(_ids), sector, n, op != REQ_OP_READ, op == REQ_OP_READ, 1,
            on_complete=done.append if done is not None else None)
    b.op = op
    return b


def test_discards_merge_with_discards_only_and_count_in_their_own_group():
    env, q, merges = make()
    done = []
    # three back-to-back bios while the first waits in the elevator (its run is async)
    q.submit_bio(bio(0, REQ_OP_DISCARD, done=done), 0.0)
    q.submit_bio(bio(8, REQ_OP_DISCARD, done=done), 0.0)     # joins the discard
    q.submit_bio(bio(16, REQ_OP_WRITE, done=done), 0.0)      # a write: its own request
    assert merges == [REQ_OP_DISCARD]
    env.run()
    assert len(done) == 3
    st = q.stats
    assert (st.ios[2], st.sectors[2], st.merges[2]) == (1, 16, 1)    # STAT_DISCARD
    assert (st.ios[1], st.sectors[1], st.merges[1]) == (1, 8, 0)     # STAT_WRITE


def test_a_discard_grows_only_to_the_devices_discard_limit():
    env, q, merges = make(limit=12)
    q.submit_bio(bio(0, REQ_OP_DISCARD), 0.0)
    q.submit_bio(bio(8, REQ_OP_DISCARD), 0.0)    # 16 sectors > 12: no merge
    assert merges == []
    env.run()
    assert q.stats.ios[2] == 2


def test_a_discard_to_a_device_without_discard_is_an_error():
    env, q, _ = make(limit=0)
    with pytest.raises(SimulationError, match="does not support discard"):
        q.submit_bio(bio(0, REQ_OP_DISCARD), 0.0)


def test_a_discard_stays_async_where_a_direct_write_becomes_sync():
    _, q, _ = make("none")
    d, w = bio(0, REQ_OP_DISCARD), bio(64, REQ_OP_WRITE)
    d.sync = w.sync = False
    q.submit_bio(d, 0.0)
    q.submit_bio(w, 0.0)
    assert (d.sync, w.sync) == (False, True)


def test_kyber_puts_a_discard_in_its_discard_domain():
    from blksim.schedulers.kyber import DISCARD, WRITE, sched_domain
    env, q, _ = make("kyber")
    done = []
    q.submit_bio(bio(0, REQ_OP_DISCARD, done=done), 0.0)
    q.submit_bio(bio(64, REQ_OP_WRITE, done=done), 0.0)
    env.run()
    assert len(done) == 2
    rq_like = type("R", (), {})()
    rq_like.op = REQ_OP_DISCARD
    assert sched_domain(rq_like) == DISCARD
    rq_like.op = REQ_OP_WRITE
    assert sched_domain(rq_like) == WRITE


def test_blktrace_marks_a_discard():
    value = action_value(TA_QUEUE, True, False, op=REQ_OP_DISCARD)
    assert (value >> TC_SHIFT) & TC_DISCARD and (value >> TC_SHIFT) & TC_WRITE
    assert not (action_value(TA_QUEUE, True) >> TC_SHIFT) & TC_DISCARD


def _pattern(rw, n=6):
    job = parse_job({"name": "t", "rw": rw, "bs": "4k", "size": "64k"}, "t.toml", 1 << 20)
    p = IoPattern(job, 0, random.Random(1))
    return [p.next_io() for _ in range(n)]


def test_trim_patterns_follow_fio():
    assert _pattern("trim", 3) == [(0, 8, 3), (8, 8, 3), (16, 8, 3)]
    assert all(op == 3 for _, _, op in _pattern("randtrim"))
    # trimwrite: each block trimmed, then written (fio's get_rw_ddir)
    assert _pattern("trimwrite", 4) == [(0, 8, 3), (0, 8, 1), (8, 8, 3), (8, 8, 1)]
    rtw = _pattern("randtrimwrite", 6)
    assert [op for *_, op in rtw] == [3, 1, 3, 1, 3, 1]
    assert all(rtw[i][:2] == rtw[i + 1][:2] for i in (0, 2, 4))


def _config(tmp_path, kernel, device, job_extra=""):
    path = tmp_path / "c.toml"
    path.write_text(f'[run]\nkernel = "{kernel}"\n[device]\n{device}\n'
                    f'[[job]]\nname = "t"\nrw = "randtrim"\nbs = "4k"\nnumber_ios = 10\n'
                    f'{job_extra}')
    return str(path)


@pytest.mark.parametrize("kernel, device, message", [
    ("6.6", 'drive = "cheetah15k4"', "does not support discard"),
    ("2.6.18", 'drive = "cheetah15k4"', "multi-queue kernel lines only"),
])
def test_the_configuration_refuses_trims_nothing_can_take(tmp_path, kernel, device, message):
    from blksim.sim.config import ConfigError, load_file, resolve
    path = _config(tmp_path, kernel, device)
    with pytest.raises(ConfigError, match=message) as info:
        resolve(load_file(path), path)
    assert "job 't'" in str(info.value) and "\n" not in str(info.value)


def _flash(tmp_path, kernel, extra="", job='rw = "randtrim"\nbs = "16k"\nnumber_ios = 50\n'):
    path = tmp_path / "f.toml"
    path.write_text(f'[run]\nkernel = "{kernel}"\n[device]\nflash = "samsung980pro1tb"\n'
                    f'blocks_per_plane = 128\n{extra}[[job]]\nname = "t"\n{job}')
    return str(path)


def test_an_nvme_drive_needs_a_multi_queue_kernel_and_gets_a_queue_per_cpu(tmp_path):
    from blksim.sim.config import ConfigError, load_file, resolve
    path = _flash(tmp_path, "2.6.18", job='rw = "randread"\nnumber_ios = 5\n')
    with pytest.raises(ConfigError, match=r"\[device\]: an NVMe drive needs a multi-queue"):
        resolve(load_file(path), path)
    # the nvme driver asks one I/O queue per CPU: the host's 4 CPUs, not the drive's 128
    path = _flash(tmp_path, "6.6", "io_queues = 64\n")
    cfg = resolve(load_file(path), path)
    assert cfg.devices["sda"].nr_hw_queues == 4
    path = _flash(tmp_path, "6.6", "io_queues = 2\n")
    assert resolve(load_file(path), path).devices["sda"].nr_hw_queues == 2


def test_trims_reach_a_flash_drive_and_unmap_its_pages():
    """A trimwrite job on a full drive: each 16 KiB block is discarded, then written.
    The drive's FTL saw the discards (its map lost those pages before they were written
    again), and
    the disk's discard group counted each discard once."""
    from simhelpers import simulate_raw
    raw = {"run": {"kernel": "6.6", "seed": 1},
           "device": {"flash": "samsung980pro1tb", "blocks_per_plane": 128,
                      "start_state": "full"},
           "job": [{"name": "t", "rw": "trimwrite", "bs": "16k", "number_ios": 40,
                    "size": "1m"}]}
    drive, bios, res = simulate_raw(raw)
    ops = [b.op for b in bios]
    assert ops.count(REQ_OP_DISCARD) == 20 and ops.count(REQ_OP_WRITE) == 20
    io = res["iostat"]["sda"]
    assert io["d/s"] * io["interval_s"] == pytest.approx(20)
    assert io["dareq-sz"] == 16.0 and io["w/s"] * io["interval_s"] == pytest.approx(20)
    assert drive.ftl.trimmed_pages == 20 * 4      # 4 KiB mapping units, all mapped
    trims = [b for b in bios if b.op == REQ_OP_DISCARD]
    assert all(b.t_complete >= b.t_queue for b in trims)
    written = {b.sector for b in bios if b.op == REQ_OP_WRITE}
    assert written == {b.sector for b in trims}


@pytest.mark.parametrize("name", ["nvme-schedulers.toml", "sata-ssd-oltp.toml"])
def test_the_flash_examples_resolve(name):
    """The issue's two examples are valid configurations on their presets."""
    from pathlib import Path

    from blksim.sim.config import load_file, resolve
    path = str(Path(__file__).resolve().parents[1] / "examples" / name)
    cfg = resolve(load_file(path), path)
    assert cfg.devices["sda"].type == "flash" and cfg.kernel == "6.6"
