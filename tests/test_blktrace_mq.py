"""blktrace output of the multi-queue layer's events (traces/blktrace_out.py,
``multiqueue=True``): a synthetic event sequence fired on a small fake queue, in the order
blk-mq fires its tracepoints (kernel/trace/blktrace.c of 6.6; blk-mq.c), goes through the
writer and comes back through blksim's reader and through the real blkparse and btt, whose
Q2C and D2C equal the bios' own."""

from __future__ import annotations

import struct
import subprocess

import pytest

from blksim.block.request import Bio, MqRequest
from blksim.block.tracepoints import Traced
from blksim.traces.blktrace import (ACTION_LETTERS, TA_BACKMERGE, TA_PLUG, TA_REQUEUE, TA_UNPLUG_IO,
                                    TA_UNPLUG_TIMER, TC_FS, TC_QUEUE, TC_READ, TC_REQUEUE,
                                    TC_SHIFT, iter_events, read_blktrace)
from blksim.traces.blktrace_out import BlktraceRecorder
from tests.test_blktrace_btt import btt_averages, ensure_blktrace


class FakeQueue(Traced):
    """The tracepoints of a disk and nothing else."""

    name = "sda"
    number = (8, 0)
    kind = "disk"


class Scenario:
    """Fires blk-mq's tracepoints for a few bios and keeps each bio's Q, D and C times as
    the block layer would set them (D: the request's last issue)."""

    def __init__(self, q: FakeQueue) -> None:
        self.q = q
        self.bios: list = []

    def fire(self, tracepoint: str, *args) -> None:
        self.q.fire_tracepoint(tracepoint, *args)

    def bio(self, sector: int, t: float, pid: int = 1, write: bool = False,
            sync: bool = True) -> Bio:
        b = Bio(len(self.bios), sector, 8, write, sync, pid)
        b.t_queue = t
        self.bios.append(b)
        self.fire("block_bio_queue", b, t)
        return b

    def getrq(self, b: Bio, t: float) -> MqRequest:
        self.fire("block_getrq", b, int(b.write), t)
        return MqRequest(b.id, b, t)

    def issue(self, rq: MqRequest, t: float) -> None:
        rq.t_dispatch = t
        for b in rq.bios:
            b.t_dispatch = t
        self.fire("block_rq_issue", rq, t)

    def complete(self, rq: MqRequest, t: float) -> None:
        for b in rq.bios:
            b.t_complete = t
        self.fire("block_rq_complete", rq, t)


def run_scenario(directory, multiqueue: bool = True) -> Scenario:
    q = FakeQueue()
    rec = BlktraceRecorder(str(directory), lambda pid: f"proc{pid}", multiqueue=multiqueue)
    rec.install(q)
    s = Scenario(q)
    # a plugged pair of reads: Q G P, Q M (back merge in the plug), U (1 request), I D C
    b = s.bio(0, 0.0)
    r1 = s.getrq(b, 0.0)
    s.fire("block_plug", 0.0)
    b2 = s.bio(8, 1e-6)
    r1.bios.append(b2)
    r1.nr_sectors += 8
    s.fire("block_bio_backmerge", b2, 1e-6)
    s.fire("block_unplug", 1, True, 2e-6)
    s.fire("block_rq_insert", r1, 2e-6)
    s.issue(r1, 1e-5)
    s.complete(r1, 1e-3)
    # none: a direct issue, Q G D C with no I
    b3 = s.bio(1000, 2e-3, pid=2, write=True)
    r3 = s.getrq(b3, 2e-3)
    s.issue(r3, 2e-3)
    s.complete(r3, 3e-3)
    # the driver gives a request back: D R, inserted again, D C
    b4 = s.bio(2000, 4e-3)
    r4 = s.getrq(b4, 4e-3)
    s.fire("block_rq_insert", r4, 4e-3)
    s.issue(r4, 4e-3)
    s.fire("block_rq_requeue", r4, 4.1e-3)
    s.fire("block_rq_insert", r4, 4.1e-3)
    s.issue(r4, 4.2e-3)
    s.complete(r4, 5e-3)
    # two requests merged in the scheduler (block_rq_merge of the one that goes)
    b5 = s.bio(100, 6e-3, pid=3)
    r5 = s.getrq(b5, 6e-3)
    s.fire("block_rq_insert", r5, 6e-3)
    b6 = s.bio(108, 6.001e-3, pid=3)
    r6 = s.getrq(b6, 6.001e-3)
    s.fire("block_rq_insert", r6, 6.001e-3)
    s.fire("block_rq_merge", r6, 6.002e-3)
    r5.bios += r6.bios
    r5.nr_sectors += r6.nr_sectors
    s.issue(r5, 7e-3)
    s.complete(r5, 8e-3)
    # a plug flushed because its task slept: UT
    b7 = s.bio(5000, 9e-3, pid=4)
    r7 = s.getrq(b7, 9e-3)
    s.fire("block_plug", 9e-3)
    s.fire("block_unplug", 1, False, 9.5e-3)
    s.fire("block_rq_insert", r7, 9.5e-3)
    s.issue(r7, 9.6e-3)
    s.complete(r7, 11e-3)
    rec.close()
    return s


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def test_events_as_blktrace_writes_them(tmp_path):
    run_scenario(tmp_path)
    events = [e for e in iter_events(tmp_path / "sda.blktrace.0")
              if not (e.action >> TC_SHIFT) & (1 << 10)]          # not the process notes
    codes = [e.action & 0xFFFF for e in events]
    plug = [e for e in events if e.action & 0xFFFF == TA_PLUG]
    assert len(plug) == 2 and plug[0].pid == 1 and plug[1].pid == 4
    assert plug[0].action >> TC_SHIFT == TC_QUEUE | TC_READ and plug[0].bytes == 0
    unplugs = [e for e in events if e.action & 0xFFFF in (TA_UNPLUG_IO, TA_UNPLUG_TIMER)]
    assert [(e.action & 0xFFFF, struct.unpack(">Q", e.pdu)[0]) for e in unplugs] == \
        [(TA_UNPLUG_IO, 1), (TA_UNPLUG_TIMER, 1)]
    requeue = [e for e in events if e.action & 0xFFFF == TA_REQUEUE]
    assert len(requeue) == 1 and requeue[0].sector == 2000 and requeue[0].bytes == 4096
    assert requeue[0].action >> TC_SHIFT & (TC_REQUEUE | TC_FS) == TC_REQUEUE | TC_FS
    merges = [e for e in events if e.action & 0xFFFF == TA_BACKMERGE]
    assert [(e.sector, bool(e.action >> TC_SHIFT & TC_FS)) for e in merges] == \
        [(8, False), (108, True)]                 # a bio's M, then a request's
    assert " ".join(ACTION_LETTERS[c] for c in codes) == (
        "Q G P Q M U I D C "                       # plugged, merged, explicit unplug
        "Q G D C "                                 # direct issue
        "Q G I D R I D C "                         # requeued
        "Q G I Q G I M D C "                       # request merge
        "Q G P UT I D C")                          # flushed as the task slept


def test_round_trip_through_blksims_reader(tmp_path):
    s = run_scenario(tmp_path)
    queued = list(read_blktrace(tmp_path, events="Q", latency=True))
    assert [(r.sector, r.nr_sectors, r.write, r.pid, r.name) for r in queued] == \
        [(b.sector, 8, b.write, b.pid, f"proc{b.pid}") for b in s.bios]
    assert [r.latency for r in queued] == \
        pytest.approx([b.t_complete - b.t_queue for b in s.bios], abs=1e-12)
    issued = list(read_blktrace(tmp_path, events="D", latency=True))
    # every issue is a D, the requeued request's first one without a completion of its own
    assert [(r.sector, r.nr_sectors) for r in issued] == \
        [(0, 16), (1000, 8), (2000, 8), (2000, 8), (100, 16), (5000, 8)]
    assert [r.latency for r in issued] == pytest.approx(
        [0.99e-3, 1e-3, None, 0.8e-3, 1e-3, 1.4e-3], abs=1e-12)


def test_btt_q2c_d2c_equal_the_bios_own(tmp_path):
    ensure_blktrace()
    s = run_scenario(tmp_path)
    text = subprocess.run(["blkparse", "-i", "sda", "-d", "dump.bin"], cwd=tmp_path,
                          check=True, capture_output=True, text=True).stdout
    assert "Skips: 0 forward" in text
    assert "IO unplugs:             1" in text and "Timer unplugs:           1" in text
    assert "Reads Requeued:         1" in text
    lines = [line.split() for line in text.splitlines() if line.startswith("  8,0")]
    direct = [f[5] for f in lines if f[7] == "1000"]
    assert direct == ["Q", "G", "D", "C"]          # none's direct issue: no I
    assert {f[5] for f in lines} == {"Q", "G", "P", "M", "U", "UT", "I", "D", "R", "C"}
    report = subprocess.run(["btt", "-i", "dump.bin"], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout
    avg = btt_averages(report)
    n = len(s.bios)
    assert avg["Q2C"][3] == avg["D2C"][3] == n
    assert avg["Q2C"][1] == pytest.approx(mean(b.t_complete - b.t_queue for b in s.bios),
                                          abs=2e-9)
    assert avg["D2C"][1] == pytest.approx(mean(b.t_complete - b.t_dispatch for b in s.bios),
                                          abs=2e-9)
    assert avg["Q2C"][2] == pytest.approx(max(b.t_complete - b.t_queue for b in s.bios),
                                          abs=2e-9)


def test_the_2_6_recorder_writes_no_multiqueue_event(tmp_path):
    run_scenario(tmp_path, multiqueue=False)
    codes = {e.action & 0xFFFF for e in iter_events(tmp_path / "sda.blktrace.0")}
    assert not codes & {TA_PLUG, TA_UNPLUG_IO, TA_UNPLUG_TIMER, TA_REQUEUE}


@pytest.mark.parametrize("scheduler", ["none", "mq-deadline"])
def test_btt_reads_a_multiqueue_run(tmp_path, scheduler):
    """A run on Linux 6.6: btt's Q2C and D2C over every bio equal blksim's; with none
    the requests are issued directly (no I), with mq-deadline they are inserted."""
    import json

    from blksim.cli import main
    from tests.test_blktrace_btt import CONFIG
    ensure_blktrace()
    cfg = tmp_path / "run.toml"
    cfg.write_text(CONFIG.format(scheduler=scheduler, nr_requests=64)
                   .replace("[run]\n", '[run]\nkernel = "6.6"\n'))
    trace_dir = tmp_path / "trace"
    assert main(["run", str(cfg), "-q", "--out", str(tmp_path / "out"),
                 "--blktrace", str(trace_dir)]) == 0
    total = json.loads((tmp_path / "out" / "results.json").read_text())["totals"]["all"]
    text = subprocess.run(["blkparse", "-i", "sda", "-d", "dump.bin"], cwd=trace_dir,
                          check=True, capture_output=True, text=True).stdout
    assert "Skips: 0 forward" in text
    letters = {line.split()[5] for line in text.splitlines() if line.startswith("  8,0")}
    assert ("I" in letters) == (scheduler != "none")
    avg = btt_averages(subprocess.run(["btt", "-i", "dump.bin"], cwd=trace_dir, check=True,
                                      capture_output=True, text=True).stdout)
    assert avg["Q2C"][3] == avg["D2C"][3] == total["ios"]
    assert avg["Q2C"][1] == pytest.approx(total["q2c"]["mean_ms"] / 1e3, abs=2e-9)
    assert avg["D2C"][1] == pytest.approx(total["d2c"]["mean_ms"] / 1e3, abs=2e-9)
