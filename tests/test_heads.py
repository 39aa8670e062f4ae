"""experiments/heads.py and ``blksim plot heads`` (cli/plot.py): the records of a
run, the CSV, the figure, the command line."""

from __future__ import annotations

import argparse
import csv
import io
import os

import pytest

from blksim import schedulers
from blksim.experiments.heads import (CSV_COLUMNS, HeadRecord, head_movement, plot_heads,
                               record_heads, write_csv)
from blksim.schedulers.textbook import TEXTBOOK_SCHEDULERS
from blksim.sim import config as cfgmod
from blksim.cli.common import UserError
from blksim.cli.plot import add_plot_commands, handle

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
TEACHING = os.path.join(EXAMPLES, "teaching-queue.toml")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def textbook_registered(monkeypatch):
    for name, cls in TEXTBOOK_SCHEDULERS.items():
        monkeypatch.setitem(schedulers.SCHEDULERS, name, cls)


def teaching_cfg(scheduler="sstf"):
    raw = cfgmod.load_file(TEACHING)
    return cfgmod.resolve(raw, TEACHING, scheduler=scheduler, lenient_iosched=True)


def parse(argv):
    p = argparse.ArgumentParser(prog="blksim")
    sub = p.add_subparsers(dest="command")
    add_plot_commands(sub)
    return p.parse_args(argv)


def test_records_of_the_teaching_example():
    run = record_heads(teaching_cfg("sstf"))
    cyls = [r.cylinder for r in run.records]
    assert cyls == [53, 65, 67, 37, 14, 98, 122, 124, 183]
    assert run.cylinders == 200 and run.scheduler == "sstf" and not run.stopped_early
    assert run.start_cylinder == 53               # [device] start_cylinder = 53
    assert head_movement(run.records, 53) == head_movement(run.records[1:], 53) == 236
    assert run.elevator.head_movement == 236   # start_cylinder = 53 in the example
    times = [r.time for r in run.records]
    assert times == sorted(times) and times[0] == 0.0
    for r in run.records:
        assert r.sectors == 8 and not r.write and r.pid == 900
        assert r.sector // 100 == r.cylinder and r.done > r.time
    # one at a time (queue depth 1): each is issued when the previous completes
    for a, b in zip(run.records, run.records[1:]):
        assert b.time == pytest.approx(a.done)


def test_records_for_a_linux_elevator_and_first_n():
    run = record_heads(teaching_cfg("deadline"), first=4)
    assert len(run.records) == 4 and run.stopped_early
    assert [r.cylinder for r in run.records][0] == 53
    with pytest.raises(ValueError):
        record_heads(teaching_cfg("noop"), first=0)


def test_head_movement():
    recs = [HeadRecord(0.0, c, c * 100, 8, False, 1) for c in (10, 30, 5)]
    assert head_movement(recs) == 10 + 20 + 25
    assert head_movement(recs, 10) == 20 + 25
    assert head_movement([], 7) == 0


def test_csv_columns_and_plot(tmp_path):
    run = record_heads(teaching_cfg("clook"))
    out_csv = tmp_path / "h.csv"
    out_png = tmp_path / "h.png"
    write_csv(run.records, str(out_csv))
    rows = list(csv.DictReader(open(out_csv)))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert [int(r["cylinder"]) for r in rows] == [53, 65, 67, 98, 122, 124, 183, 14, 37]
    assert all(r["dir"] == "R" and float(r["done_ms"]) > float(r["time_ms"]) for r in rows)
    plot_heads(run.records, str(out_png), "C-LOOK", cylinders=200, start_cylinder=0)
    assert out_png.read_bytes()[:8] == PNG_MAGIC
    assert sorted(os.listdir(tmp_path)) == ["h.csv", "h.png"]   # no temporaries left


def test_plot_of_writes_and_many_points(tmp_path):
    recs = [HeadRecord(i * 1e-3, (i * 37) % 200, 0, 8, bool(i % 3 == 0), 1)
            for i in range(120)]
    path = tmp_path / "many.svg"
    plot_heads(recs, str(path))
    assert path.read_text().lstrip().startswith("<?xml")


def test_cli_plot_heads(tmp_path):
    out_png = tmp_path / "fig.png"
    out_csv = tmp_path / "fig.csv"
    args = parse(["plot", "heads", TEACHING, "--out", str(out_png), "--scheduler", "look",
                  "--csv", str(out_csv), "--set", "queue/iosched/direction=0"])
    buf = io.StringIO()
    assert handle(args, out=buf) == 0
    text = buf.getvalue()
    assert "cylinders in order: 53 37 14 65 67 98 122 124 183" in text
    # one figure: the drive's head starts where the textbook's does
    assert "head movement: 208 cylinders, from the head's start at cylinder 53" in text
    assert "elevator" not in text.split("head movement")[1].split("last completion")[0]
    assert out_png.read_bytes()[:8] == PNG_MAGIC
    lines = out_csv.read_text().splitlines()
    assert lines[0] == ("time_ms,cylinder,sector,sectors,dir,pid,done_ms,drive_queue_ms,"
                        "overhead_ms,seek_ms,rotation_ms,transfer_ms,bus_ms,cache_hit")
    # each row's breakdown is its own request's: the parts add up to its time in the drive
    for line in lines[1:]:
        f = line.split(",")
        issued, done = float(f[0]), float(f[6])
        assert sum(map(float, f[7:13])) == pytest.approx(done - issued, abs=1e-4)


def test_the_textbook_exercise_without_files(tmp_path):
    for scheduler, total in (("fcfs", 640), ("sstf", 236), ("look", 299), ("clook", 322)):
        args = parse(["plot", "heads", "--requests", "98,183,37,122,14,124,65,67",
                      "--start", "53", "--scheduler", scheduler,
                      "--out", str(tmp_path / f"{scheduler}.png")])
        buf = io.StringIO()
        assert handle(args, out=buf) == 0
        assert f"head movement: {total} cylinders" in buf.getvalue()


def test_the_start_angle_makes_rotation_reproducible(tmp_path):
    import blksim
    cfg = {"device": {"drive": "teaching", "start_angle": 0.25, "start_cylinder": 0},
           "trace": [{"path": str(tmp_path / "t.trace"), "format": "disksim"}]}
    (tmp_path / "t.trace").write_text("0.0 0 0 1 1\n")
    waits = {blksim.run({**cfg, "run": {"seed": seed}}).requests["d2c_ms"][0]
             for seed in (1, 2, 3)}
    # sector 0 comes round after three quarters of a revolution (16.67 ms at 3,600 rpm),
    # then passes under the head in 1/50 of one (no overheads, an ideal bus)
    assert len(waits) == 1 and waits.pop() == pytest.approx((0.75 + 1 / 50) * 1000 / 60,
                                                            rel=1e-6)


def test_cli_plot_heads_linux_elevator_drops_textbook_tunables(tmp_path):
    args = parse(["plot", "heads", TEACHING, "--out", str(tmp_path / "d.png"),
                  "--scheduler", "deadline"])
    buf = io.StringIO()
    assert handle(args, out=buf) == 0
    assert "cylinders in order: 53 14 37 65 67 98 122 124 183" in buf.getvalue()


def test_cli_plot_heads_first_n(tmp_path):
    out_png = tmp_path / "fig.png"
    args = parse(["plot", "heads", os.path.join(EXAMPLES, "teaching-random.toml"),
                  "--out", str(out_png), "--first", "25", "--scheduler", "sstf",
                  "--show-start"])
    buf = io.StringIO()
    assert handle(args, out=buf) == 0
    assert "sstf: 25 requests (stopped at --first)" in buf.getvalue()
    assert out_png.stat().st_size > 1000


@pytest.mark.parametrize("argv,message", [
    (["--first", "0"], "--first"),
    (["--scheduler", "elevator9"], "--scheduler: unknown scheduler 'elevator9'"),
])
def test_cli_plot_heads_bad_input(tmp_path, argv, message):
    args = parse(["plot", "heads", TEACHING, "--out", str(tmp_path / "x.png")] + argv)
    with pytest.raises(UserError, match=message):
        handle(args, out=io.StringIO())
    assert not os.listdir(tmp_path)


def test_cli_plot_heads_missing_directory(tmp_path):
    args = parse(["plot", "heads", TEACHING, "--out", str(tmp_path / "no" / "x.png")])
    with pytest.raises(UserError, match="no such directory"):
        handle(args, out=io.StringIO())


def test_cli_plot_heads_bad_config(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[queue]\nscheduler = "sstf"\n[queue.iosched]\ndirection = 1\n'
                   '[[job]]\nrw = "randread"\n')
    args = parse(["plot", "heads", str(bad), "--out", str(tmp_path / "x.png")])
    with pytest.raises(cfgmod.ConfigError, match="direction"):
        handle(args, out=io.StringIO())
