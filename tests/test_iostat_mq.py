"""/proc/diskstats of the multi-queue kernels (5.4-6.6) and today's iostat -x (sysstat 12):
hand-traced counters (block/blk-core.c blk_account_io_start/done, update_io_ticks;
block/blk-merge.c; block/blk-flush.c blk_account_io_flush; block/genhd.c diskstats_show)
and the figures iostat.c computes from them; the --iostat CSV and the terminal table
follow the counters' kernel; the 2.6 output is unchanged."""

from __future__ import annotations

import csv

import pytest

from blksim.block.diskstats import (IOSTAT12_COLUMNS, IOSTAT_COLUMNS, STAT_DISCARD,
                                    STAT_READ, STAT_WRITE, DiskStats, MqDiskStats,
                                    diskstats_for, iostat_x, run_columns)
from blksim.cli.tables import iostat_lines
from blksim.sim.iostat_log import IostatRecorder


def two_reads(kernel: str) -> MqDiskStats:
    """HZ=1000 (1 ms jiffies). Read A made and issued at 0, read B made at 0.5 ms and
    issued at 1 ms; A (8 sectors) done at 10 ms, B (16 sectors) at 20 ms."""
    st = MqDiskStats(kernel, hz=1000)
    st.request_added(0.0)            # update_io_ticks(start): +1 jiffy, stamp 0
    st.request_issued(0.0)
    st.request_added(0.0005)         # same jiffy: nothing
    st.request_issued(0.001)
    st.request_completed(STAT_READ, 8, 0.0, 0.010)       # end: +10 - 0, stamp 10
    st.request_completed(STAT_READ, 16, 0.0005, 0.020)   # end: +20 - 10
    return st


def test_two_reads_hand_traced_sysstat12():
    st = two_reads("6.6")
    before = MqDiskStats("6.6", hz=1000).sample(0.0)
    after = st.sample(0.040)
    assert after.io_ticks == pytest.approx(0.021)        # 1 + 10 + 10 jiffies
    assert after.time_in_queue == pytest.approx(0.010 + 0.0195)
    io = iostat_x(before, after, st.FIELDS, IOSTAT12_COLUMNS)
    assert tuple(io) == IOSTAT12_COLUMNS
    assert io["r/s"] == pytest.approx(50.0)
    assert io["rkB/s"] == pytest.approx(12 / 0.04)        # 24 sectors = 12 kB
    assert io["r_await"] == pytest.approx(14.75)          # (10 + 19.5) / 2 ms
    assert io["rareq-sz"] == pytest.approx(6.0)           # kB per request
    assert io["%rrqm"] == 0.0 and io["rrqm/s"] == 0.0
    assert io["aqu-sz"] == pytest.approx(0.0295 / 0.04)
    assert io["%util"] == pytest.approx(52.5)             # the kernel's 21 jiffies of 40
    # no write: the means are None (blksim's rule); discards and flushes print 0.00
    assert io["w/s"] == 0.0 and io["w_await"] is None and io["wareq-sz"] is None
    assert io["%wrqm"] is None
    assert [io[c] for c in ("d/s", "dkB/s", "drqm/s", "%drqm", "d_await", "dareq-sz",
                            "f/s", "f_await")] == [0.0] * 8


def test_io_ticks_under_counts_a_busy_device_as_the_kernel_does():
    # busy from jiffy 0 to 7; a second request starts in jiffy 5: start +1 (stamp 0),
    # start +1 (stamp 5), end +2 (7 - 5), end at 7 again: same jiffy, nothing -> 4 of 7
    st = MqDiskStats("5.15", hz=1000)
    st.request_added(0.0)
    st.request_issued(0.0)
    st.request_added(0.005)
    st.request_issued(0.005)
    st.request_completed(STAT_WRITE, 8, 0.0, 0.007)
    st.request_completed(STAT_WRITE, 8, 0.005, 0.0072)
    assert st.sample(0.010).io_ticks == pytest.approx(0.004)


@pytest.mark.parametrize("kernel, at_15ms", [("5.4", 0.011), ("5.10", 0.011),
                                             ("5.15", 0.011), ("6.1", 0.016),
                                             ("6.6", 0.016)])
def test_reading_diskstats_updates_io_ticks_from_6_1(kernel, at_15ms):
    st = MqDiskStats(kernel, hz=1000)
    st.request_added(0.0)
    st.request_issued(0.0)
    st.request_added(0.0005)
    st.request_issued(0.001)
    st.request_completed(STAT_READ, 8, 0.0, 0.010)
    # read B at the driver: 6.1 and 6.6 run update_io_ticks(end) in diskstats_show
    assert st.sample(0.015).io_ticks == pytest.approx(at_15ms)
    st.request_completed(STAT_READ, 16, 0.0005, 0.020)
    assert st.sample(0.040).io_ticks == pytest.approx(0.021)   # the same in the end


@pytest.mark.parametrize("kernel, merges, flushes", [("5.4", 2, 0), ("5.10", 3, 1),
                                                     ("6.6", 3, 1)])
def test_merges_and_flushes_by_kernel_line(kernel, merges, flushes):
    st = MqDiskStats(kernel, hz=1000)
    st.request_added(0.0)
    st.request_added(0.0)
    st.bio_merged(STAT_WRITE, 0.001)
    st.bio_merged(STAT_WRITE, 0.001)
    st.request_merged_away(0.002, STAT_WRITE)   # counted from 5.10 (merge_request)
    st.flush_completed(0.0, 0.003)              # flush fields from 5.5
    st.request_issued(0.004)
    st.request_completed(STAT_WRITE, 24, 0.0, 0.010)
    after = st.sample(0.1)
    assert after.merges[STAT_WRITE] == merges
    assert after.ios[3] == flushes
    io = iostat_x(MqDiskStats(kernel).sample(0.0), after, columns=IOSTAT12_COLUMNS)
    assert io["%wrqm"] == pytest.approx(100.0 * merges / (merges + 1))
    assert io["f/s"] == pytest.approx(10.0 * flushes)
    assert io["f_await"] == (pytest.approx(3.0) if flushes else 0.0)


def test_5_4_time_in_queue_counts_whole_jiffies_per_request():
    # nsecs_to_jiffies64 of each request's time: 3.9 ms -> 0, 4.1 ms -> 1 jiffy (HZ 250)
    old, new = MqDiskStats("5.4", hz=250), MqDiskStats("5.10", hz=250)
    for st in (old, new):
        for start, end in ((0.0, 0.0039), (0.01, 0.0141)):
            st.request_added(start)
            st.request_issued(start)
            st.request_completed(STAT_READ, 8, start, end)
    assert old.time_in_queue == pytest.approx(0.004)
    assert new.time_in_queue == pytest.approx(0.008)


def test_5_4_bio_merges_tick_io_ticks():
    # 5.4's blk_account_io_start(rq, false) runs update_io_ticks(start) on a bio merge
    old, new = MqDiskStats("5.4", hz=1000), MqDiskStats("5.10", hz=1000)
    for st in (old, new):
        st.request_added(0.0)
        st.bio_merged(STAT_READ, 0.003)
    assert old.io_jiffies == 2 and new.io_jiffies == 1


def test_the_kernel_picks_the_counters_and_the_columns():
    assert isinstance(diskstats_for("2.6.18"), DiskStats)
    mq = diskstats_for("6.6", 300)
    assert isinstance(mq, MqDiskStats) and mq.hz == 300
    assert run_columns([DiskStats()]) is IOSTAT_COLUMNS
    assert run_columns([DiskStats(), mq]) is IOSTAT12_COLUMNS
    with pytest.raises(ValueError, match="5.4"):
        MqDiskStats("4.19")


def test_2_6_counters_under_sysstat12_columns_have_no_discard_or_flush():
    st = DiskStats()
    st.request_added(0.0)
    st.request_completed(True, 16, 0.0, 2.0)
    io = iostat_x(DiskStats().sample(0.0), st.sample(4.0), columns=IOSTAT12_COLUMNS)
    assert io["w/s"] == 0.25 and io["wkB/s"] == 2.0 and io["d/s"] == 0.0
    assert io["%util"] == 50.0


class _Clock:
    now = 0.0


class _Dev:
    def __init__(self, stats):
        self.stats = stats


def test_iostat_csv_follows_the_counters(tmp_path):
    path = tmp_path / "iostat.csv"
    rec = IostatRecorder(str(path), 0.010)
    clock = _Clock()
    st = MqDiskStats("6.6", hz=1000)
    rec.install({"sda": _Dev(st)}, clock)
    st.request_added(0.0)
    st.request_issued(0.0)
    st.request_completed(STAT_READ, 8, 0.0, 0.005)
    clock.now = 0.020
    rec.close()
    rows = list(csv.reader(path.read_text().splitlines()))
    assert rows[0] == ["time_s", "interval_s", "device", *IOSTAT12_COLUMNS]
    assert len(rows) == 3                     # two 10 ms intervals
    first = dict(zip(rows[0], rows[1]))
    assert float(first["r/s"]) == pytest.approx(100.0)
    assert float(first["r_await"]) == pytest.approx(5.0)
    assert first["w_await"] == "" and float(first["d_await"]) == 0.0
    assert float(first["%util"]) == pytest.approx(60.0)     # 1 + 5 jiffies of 10


def test_iostat_csv_of_a_2_6_run_keeps_its_header(tmp_path):
    path = tmp_path / "iostat.csv"
    rec = IostatRecorder(str(path), 0.010)
    rec.install({"sda": _Dev(DiskStats())}, _Clock())
    rec.close()
    assert path.read_text() == "time_s,interval_s,device," + ",".join(IOSTAT_COLUMNS) + "\n"


def test_terminal_table_follows_the_figures():
    st = two_reads("6.6")
    io = iostat_x(MqDiskStats("6.6").sample(0.0), st.sample(0.04), columns=IOSTAT12_COLUMNS)
    lines = iostat_lines({"sda": {"interval_s": 0.04, **io}})
    assert "aqu-sz" in lines[2] and "r_await" in lines[2] and "svctm" not in lines[2]
    assert lines[3].split()[0] == "sda" and lines[3].split()[1] == "50.00"


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("AIC"), st.integers(0, 7000)), max_size=60),
       st.sampled_from(["5.4", "5.15", "6.6"]), st.sampled_from([100, 250, 1000]))
def test_mq_counters_stay_within_the_elapsed_time(ops, kernel, hz):
    """io_ticks never exceeds the jiffies the run spans (plus the first start's one);
    time_in_queue is the sum of the requests' times (5.4: in whole jiffies each); the
    figures are never negative."""
    stq = MqDiskStats(kernel, hz)
    before = stq.sample(0.0)
    now, made, issued, spent, done = 0.0, [], [], 0.0, 0
    for op, dt in ops:
        now += dt / 1e6
        if op == "A":
            stq.request_added(now)
            made.append(now)
        elif op == "I" and len(issued) < len(made):
            stq.request_issued(now)
            issued.append(made[len(issued)])
        elif op == "C" and issued:
            start = issued.pop(0)
            made.remove(start)
            stq.request_completed(STAT_WRITE, 8, start, now)
            spent += now - start
            done += 1
    after = stq.sample(now + 0.001)
    assert after.io_ticks <= int((now + 0.001) * hz + 1e-9) / hz + 1 / hz + 1e-12
    if kernel == "5.4":      # whole jiffies per request
        assert spent - done / hz - 1e-9 <= after.time_in_queue <= spent + 1e-9
    else:
        assert after.time_in_queue == pytest.approx(spent)
    figures = iostat_x(before, after, columns=IOSTAT12_COLUMNS)
    assert all(v is None or v >= 0.0 for v in figures.values())


@pytest.mark.parametrize("kernel", ["5.4", "6.6"])
def test_a_multiqueue_run_reports_todays_columns(tmp_path, kernel):
    """results.json and iostat.csv of a run on a multi-queue kernel have sysstat 12's
    columns; aqu-sz is the completed requests' time per second, so it equals
    r/s x r_await + w/s x w_await (the kernels' time_in_queue)."""
    import json

    from blksim.cli import main
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[run]\nseed = 2\nkernel = "{kernel}"\nduration = "2s"\n'
                   '[device]\ndrive = "cheetah15k4"\n[queue]\nscheduler = "mq-deadline"\n'
                   '[[job]]\nname = "r"\nrw = "randread"\niodepth = 4\n'
                   '[[job]]\nname = "w"\nrw = "write"\nbs = "64k"\niodepth = 8\n')
    out = tmp_path / "out"
    assert main(["run", str(cfg), "-q", "--out", str(out), "--iostat", "500ms"]) == 0
    io = json.loads((out / "results.json").read_text())["iostat"]["sda"]
    assert set(io) - {"interval_s"} == set(IOSTAT12_COLUMNS)
    assert io["r/s"] > 0 and io["w/s"] > 0
    summed = (io["r/s"] * io["r_await"] + io["w/s"] * io["w_await"]) / 1e3
    if kernel == "5.4":      # each request's time cut down to whole 4 ms jiffies
        assert summed - (io["r/s"] + io["w/s"]) * 0.004 <= io["aqu-sz"] < summed
    else:
        assert io["aqu-sz"] == pytest.approx(summed, rel=1e-4)
    assert 99.0 < io["%util"] <= 100.0 + 100.0 / (250 * 2.0) + 1e-6   # a jiffy of 2 s
    rows = list(csv.reader((out / "iostat.csv").read_text().splitlines()))
    assert rows[0][3:] == list(IOSTAT12_COLUMNS) and len(rows) == 5


def test_a_partition_with_2_6_counters_under_todays_columns():
    from blksim.block.partition import PartitionStats
    st = PartitionStats()
    before = st.sample(0.0)
    st.count(True, 16, 0.5)
    io = iostat_x(before, st.sample(2.0), PartitionStats.FIELDS, IOSTAT12_COLUMNS)
    assert io["w/s"] == 0.5 and io["wkB/s"] == 4.0 and io["rkB/s"] == 0.0
    assert io["w_await"] is None and io["aqu-sz"] is None and io["%util"] is None
