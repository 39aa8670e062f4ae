"""iostat -x figures from the block layer's /proc/diskstats counters (block/diskstats.py):
a hand-traced case, merges, Little's law, and the --iostat CSV over time."""

import csv

import pytest

from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.cli import main
from blksim.block.diskstats import DiskStats, iostat_x
from blksim.sim.results import results_dict
from blksim.sim.config import resolved_dict
from tests.simhelpers import make_config, run_config

CAP = 71687372


def disksim(tmp_path, rows):
    path = tmp_path / "t.trace"
    path.write_text("".join(f"{t} 0 {s} {n} {1 if r else 0}\n" for t, s, n, r in rows))
    return str(path)


def _iostat(tmp_path, rows, duration, service=0.010, **queue):
    cfg = make_config(traces=[{"path": disksim(tmp_path, rows)}], scheduler="noop",
                      queue={"nomerges": 2, **queue}, run={"duration": duration})
    out = run_config(cfg, device=ServiceLawDevice("fixed", service, capacity=CAP))
    return results_dict(out, resolved_dict(cfg, 1))["iostat"]["sda"], out


def test_three_reads_queued_together_hand_traced(tmp_path):
    # at 0 ms three 8-sector reads; one at a time, 10 ms each: done at 10, 20, 30 ms;
    # in flight 3, 2, 1 request over the three 10 ms; the window is 40 ms
    io, _ = _iostat(tmp_path, [(0, 0, 8, 1), (0, 1000, 8, 1), (0, 2000, 8, 1)], "40ms")
    assert io["interval_s"] == 0.04
    assert io["r/s"] == pytest.approx(75.0) and io["w/s"] == 0.0
    assert io["rMB/s"] == pytest.approx(24 / 2048 / 0.04, abs=1e-6)
    assert io["avgrq-sz"] == 8.0
    assert io["await"] == pytest.approx(20.0) and io["r_await"] == pytest.approx(20.0)
    assert io["w_await"] is None          # no write completed: no mean (sysstat: 0.00)
    assert io["avgqu-sz"] == pytest.approx((3 + 2 + 1) * 10 / 40)
    assert io["svctm"] == pytest.approx(10.0)
    assert io["%util"] == pytest.approx(75.0)


def test_bio_merges_count_as_rrqm_and_wrqm(tmp_path):
    # four contiguous 8-sector writes at 0 ms merge into one 32-sector request
    rows = [(0, 8 * i, 8, 0) for i in range(4)]
    cfg = make_config(traces=[{"path": disksim(tmp_path, rows)}], scheduler="noop",
                      run={"duration": "100ms"})
    out = run_config(cfg, device=ServiceLawDevice("fixed", 0.010, capacity=CAP))
    io = results_dict(out, resolved_dict(cfg, 1))["iostat"]["sda"]
    assert io["wrqm/s"] == pytest.approx(30.0) and io["rrqm/s"] == 0.0    # 3 in 100 ms
    assert io["w/s"] == pytest.approx(10.0) and io["avgrq-sz"] == 32.0


def test_little_and_utilisation_laws_hold(tmp_path):
    # a busy random workload: avgqu-sz = throughput x await, svctm x throughput = util
    # (noop: no request starves, so those in flight at the end barely weigh)
    cfg = make_config(jobs=[{"name": "r", "rw": "randread", "iodepth": 4},
                            {"name": "w", "rw": "randwrite", "iodepth": 2}],
                      scheduler="noop", run={"duration": "10s"})
    out = run_config(cfg)
    io = results_dict(out, resolved_dict(cfg, 1))["iostat"]["sda"]
    iops = io["r/s"] + io["w/s"]
    assert io["avgqu-sz"] == pytest.approx(iops * io["await"] / 1e3, rel=0.01)
    assert io["svctm"] * iops / 10 == pytest.approx(io["%util"], rel=1e-6)
    assert out.queue.stats.in_flight >= 0


def test_counters_between_two_samples():
    st = DiskStats()
    st.request_added(0.0)
    st.request_added(0.5)
    st.request_merged_away(1.0)             # in flight: 1 (0-0.5), 2 (0.5-1), 1 after
    st.request_completed(True, 16, 0.0, 2.0)
    before = DiskStats().sample(0.0)
    after = st.sample(4.0)
    assert after.time_in_queue == pytest.approx(0.5 + 1.0 + 1.0)
    assert after.io_ticks == pytest.approx(2.0)
    io = iostat_x(before, after)
    assert io["w/s"] == 0.25 and io["wMB/s"] == pytest.approx(16 / 2048 / 4)
    assert io["%util"] == 50.0 and io["w_await"] == 2000.0
    with pytest.raises(ValueError, match="interval"):
        iostat_x(after, after)


def test_iostat_csv_rows_cover_the_run(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "examples/mixed.toml", "-q", "--duration", "10s", "--out", str(out),
                 "--iostat", "3s"]) == 0
    capsys.readouterr()
    with open(out / "iostat.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # 3, 6, 9 s and the last second, cut short by the end of the run
    assert [float(r["time_s"]) for r in rows] == [3.0, 6.0, 9.0, 10.0]
    assert [float(r["interval_s"]) for r in rows] == [3.0, 3.0, 3.0, 1.0]
    import json
    whole = json.loads((out / "results.json").read_text())["iostat"]["sda"]
    writes = sum(float(r["w/s"]) * float(r["interval_s"]) for r in rows)
    assert writes == pytest.approx(whole["w/s"] * 10.0)
    # a run without --iostat removes an earlier run's iostat.csv from its folder
    assert main(["run", "examples/mixed.toml", "-q", "--duration", "1s", "--out",
                 str(out)]) == 0
    assert not (out / "iostat.csv").exists()


def test_iostat_needs_out_and_a_positive_interval(capsys):
    assert main(["run", "examples/mixed.toml", "-q", "--iostat", "1s"]) == 2
    assert "--iostat needs --out DIR" in capsys.readouterr().err
    assert main(["run", "examples/mixed.toml", "-q", "--iostat=-1s", "--out", "/tmp/x"]) == 2
    assert "--iostat" in capsys.readouterr().err
