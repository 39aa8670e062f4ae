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


# --- the teaching figures: edges, returns, labels, captions, --help -----------------------

def _drawn(fig):
    """The head's path as drawn: (kind, y0, y1) of every leg line in the figure."""
    out = []
    for ax in fig.axes:
        for line in ax.get_lines():
            gid = line.get_gid() or ""
            if gid.startswith("head-"):
                ys = line.get_ydata()
                out.append((gid[5:], int(ys[0]), int(ys[-1]), line.get_linestyle()))
    return out


@pytest.mark.parametrize("name,direction,edges,count,returns", [
    ("scan", 1, {199}, 331, 0),
    ("scan", 0, {0}, 236, 0),
    ("cscan", 1, {199, 0}, 382, 199),
    ("cscan", 0, {0, 199}, 386, 199),
    ("clook", 1, set(), 322, 169),
    ("look", 1, set(), 299, 0),
])
def test_scan_and_cscan_are_drawn_to_the_edge(name, direction, edges, count, returns):
    from blksim.experiments.heads_figure import draw_heads
    raw = cfgmod.load_file(TEACHING)
    raw["queue"]["iosched"]["direction"] = direction
    run = record_heads(cfgmod.resolve(raw, TEACHING, scheduler=name, lenient_iosched=True))
    fig = draw_heads(run.records, cylinders=run.cylinders, start_cylinder=53,
                     routes=run.routes)
    legs = _drawn(fig)
    visited = {y for _k, y0, y1, _s in legs for y in (y0, y1)}
    served = {r.cylinder for r in run.records}
    assert (visited - served) == edges       # the edge cylinders, and nothing else
    # the drawn length is the textbook count, and the elevator's
    assert sum(abs(y1 - y0) for _k, y0, y1, _s in legs) == count == run.elevator.head_movement
    assert sum(abs(y1 - y0) for k, y0, y1, _s in legs if k == "return") == returns
    assert all(s == "--" for k, *_r, s in legs if k == "return")
    assert all(s == "-" for k, *_r, s in legs if k != "return")


def _text_boxes(fig):
    from matplotlib.text import Text
    fig.canvas.draw()                          # where the texts are drawn
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
            if t.get_visible() and t.get_text()]


def _overlaps(fig):
    boxes = _text_boxes(fig)
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:]
            if ba.overlaps(bb)]


def test_auto_labels_never_overlap_on_a_long_run():
    from blksim.experiments.heads import movement_caption
    from blksim.experiments.heads_figure import draw_heads
    path = os.path.join(EXAMPLES, "teaching-random.toml")
    cfg = cfgmod.resolve(cfgmod.load_file(path), path, scheduler="look", lenient_iosched=True)
    run = record_heads(cfg, first=250)
    assert len(run.records) == 250
    caption = movement_caption(run, None)
    auto = draw_heads(run.records, "LOOK", run.cylinders, routes=run.routes, caption=caption)
    n_auto = len(auto.axes[0].texts)          # the point labels kept
    assert 40 < n_auto < 250                  # thinned, not emptied
    assert _overlaps(auto) == []
    # the caption is below the axes: it covers no point
    renderer = auto.canvas.get_renderer()
    ax = auto.axes[0]
    cap = [t for t in auto.texts if t.get_text().startswith("250 requests")][0]
    assert cap.get_window_extent(renderer).y1 < ax.get_window_extent(renderer).y0
    # "on" labels every point (and they do overlap: that is why auto exists); off, none
    on = draw_heads(run.records, "LOOK", run.cylinders, labels="on")
    assert len(on.axes[0].texts) == 250
    assert _overlaps(on)
    off = draw_heads(run.records, "LOOK", run.cylinders, labels="off")
    assert not off.axes[0].texts


def test_the_teaching_grid_totals_and_svg_text(tmp_path):
    from blksim.experiments.heads import teaching_figure
    rows = teaching_figure(str(tmp_path / "t.svg"))
    moved = {name: m for name, _c, m, _t in rows}
    assert moved == {"fcfs": 640, "sstf": 236, "scan": 331, "look": 299, "cscan": 382,
                     "clook": 322, "sptf": 472, "deadline": 208}
    text = (tmp_path / "t.svg").read_text()
    assert "<text" in text and "199 (edge)" in text     # text kept as text on slides
    assert "<dc:date>" not in text                       # same run, same bytes


def test_cli_title_caption_and_sectors(tmp_path):
    from blksim.cli.plot import exercise_config
    base = ["plot", "heads", "--requests", "98,183,37,122,14,124,65,67", "--start", "53"]

    def sectors(*extra):
        cfg = exercise_config(parse(base + ["--out", "x.png", *extra]))
        lines = open(cfg["trace"][0]["path"]).read().split("\n")
        os.remove(cfg["trace"][0]["path"])
        return [int(line.split()[2]) for line in lines[1:] if line]

    zero, spread = sectors("--sectors", "zero"), sectors()
    assert zero == [9800, 18300, 3700, 12200, 1400, 12400, 6500, 6700]
    assert [s // 100 for s in spread] == [s // 100 for s in zero]   # same cylinders
    assert len({s % 100 for s in spread}) > 4                      # varied sectors
    assert spread == sectors("--seed", "1") != sectors("--seed", "2")
    assert sectors("--sectors") == [98, 183, 37, 122, 14, 124, 65, 67]   # given

    # zero: every queued request takes a whole number of revolutions in the drive (seek,
    # rotation and transfer; 16.67 ms each at 3,600 rpm) whatever its seek; spread: not
    for how, whole in (("zero", True), ("spread", False)):
        csv_path = tmp_path / f"{how}.csv"
        args = parse(base + ["--scheduler", "sstf", "--sectors", how, "--csv", str(csv_path),
                             "--out", str(tmp_path / f"{how}.svg")])
        assert handle(args, out=io.StringIO()) == 0
        rows = list(csv.DictReader(open(csv_path)))[1:]
        revs = [(float(r["done_ms"]) - float(r["time_ms"])) / (1000 / 60) for r in rows]
        assert all(abs(v - round(v)) < 1e-3 for v in revs) == whole
        svg = (tmp_path / f"{how}.svg").read_text()
        assert "SSTF, head at cylinder 53: requests 98, 183, 37" in svg
        assert "--requests: sstf" not in svg
        assert f"--sectors {how}" in svg


ENTRY_POINTS = ["blksim", "blksim.cli.app", "blksim.experiments.heads",
                "blksim.traces.stats", "blksim.disk_models.disksim.regenerate",
                "blksim.experiments.validation.disksim_rerun",
                "blksim.experiments.tenant_traces"]


def test_entry_points_found_are_the_ones_tested():
    # every `python -m` entry point of the package (tests/ aside) is in ENTRY_POINTS
    import pathlib
    root = pathlib.Path(EXAMPLES).parent
    found = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in ("tests", ".venv", ".venv-pypy", "benchmarks", "build"):
            continue
        if 'if __name__ == "__main__"' in path.read_text() or rel.name == "__main__.py":
            mod = ".".join(("blksim",) + rel.with_suffix("").parts)
            found.add(mod[: -len(".__main__")] if mod.endswith(".__main__") else mod)
    assert found == set(ENTRY_POINTS)


@pytest.mark.parametrize("module", ENTRY_POINTS + ["benchmarks/compare_runs.py",
                                                  "blksim plot heads"])
def test_help_of_every_entry_point_writes_nothing(tmp_path, module):
    import subprocess
    import sys
    root = os.path.dirname(EXAMPLES)
    if module.endswith(".py"):
        cmd = [sys.executable, os.path.join(root, module)]
    else:
        cmd = [sys.executable, "-m", *module.split()]
    done = subprocess.run(cmd + ["--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")
    assert os.listdir(tmp_path) == []
