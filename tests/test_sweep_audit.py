"""Sweeps after issue 29's audit: a run's key covers every file it reads, the grid's axes
are real (no fake replicates, no dropped or doubled points), figure paths are checked,
a corrupt stored run is run again, and bad input is one line, never a traceback."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blksim.experiments.sweep import run_experiment
from blksim.experiments.sweep.definition import load_experiment, sweep_experiment
from blksim.cli import main
from blksim.sim.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent

CONFIG = """\
[run]
duration = "0.3s"
[device]
drive = "cheetah15k4"
[[job]]
name = "r"
rw = "randread"
bs = "4k"
iodepth = 4
"""


def config(tmp_path, text=CONFIG, name="c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def sweep(tmp_path, capsys, *args, cfg=None, out="o"):
    """``blksim sweep`` -> (exit status, stdout, stderr)."""
    cfg = cfg or config(tmp_path)
    code = main(["sweep", str(cfg), "--schedulers", "noop", "-q",
                 "--out", str(tmp_path / out), *args])
    o, e = capsys.readouterr()
    return code, o, e


def one_error_line(code, err, *words):
    assert code == 2, err
    assert err.startswith("blksim: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err


# --- 1. a run's key covers the files it reads ------------------------------------------

RAID = """\
[run]
duration = "0.5s"
[device.raid]
controller = "ctl.toml"
level = "raid5"
members = 4
drive = "cheetah15k4"
[[job]]
name = "w"
rw = "randwrite"
bs = "8k"
iodepth = 16
"""


def test_a_changed_controller_file_makes_new_runs(tmp_path, capsys):
    preset = (ROOT / "disk_models" / "controllers" / "perc5i.toml").read_text()
    ctl = tmp_path / "ctl.toml"
    ctl.write_text(preset)
    cfg = config(tmp_path, RAID)
    code, out, err = sweep(tmp_path, capsys, "--seeds", "2", cfg=cfg)
    assert code == 0 and "0 already finished, 2 run now" in out, err
    before = (tmp_path / "o" / "summary.csv").read_text()
    ctl.write_text(preset.replace('write_policy = "write-back"',
                                  'write_policy = "write-through"'))
    code, out, err = sweep(tmp_path, capsys, "--seeds", "2", cfg=cfg)
    assert code == 0 and "0 already finished, 2 run now" in out, out
    after = (tmp_path / "o" / "summary.csv").read_text()
    iops = [float(t.splitlines()[1].split(",")[t.splitlines()[0].split(",").index("iops")])
            for t in (before, after)]
    assert iops[0] > 2 * iops[1]          # write-back absorbs the writes; write-through not


def _key(cfg):
    return sweep_experiment(cfg, [], ["noop"]).tasks()[0].key


def test_the_key_covers_drive_trace_and_plugin_files(tmp_path, monkeypatch):
    drive = tmp_path / "d.toml"
    drive.write_text((ROOT / "disk_models" / "presets" / "cheetah15k4.toml").read_text())
    trace = tmp_path / "t.trace"
    trace.write_text("0.0 0 100 8 1\n1.0 0 900 8 1\n")
    plugin = tmp_path / "myelev_i29.py"
    plugin.write_text("from blksim.schedulers import NoopElevator\n\n\n"
                      "class Mine(NoopElevator):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = config(tmp_path, '[run]\nduration = "0.3s"\n[device]\ndrive = "d.toml"\n'
                           '[queue]\nscheduler = "myelev_i29:Mine"\n'
                           '[[trace]]\npath = "t.trace"\nformat = "disksim"\n')
    key = sweep_experiment(cfg, [], ["myelev_i29:Mine"]).tasks()[0].key
    keys = {key}
    for path, old, new in ((drive, "rpm = 15000", "rpm = 10000"),
                           (trace, "900", "901"),
                           (plugin, "pass", "name_i29 = 1")):
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
        k = sweep_experiment(cfg, [], ["myelev_i29:Mine"]).tasks()[0].key
        assert k not in keys, path
        keys.add(k)


# --- 5. the grid's axes are real ------------------------------------------------------

@pytest.mark.parametrize("grid, words", [
    ("run/seed=1,2", ["run/seed", "--seeds"]),
    ("queue/scheduler=cfq,noop", ["queue/scheduler", "--schedulers"]),
    ("queue/nr_requests=32,32", ["queue/nr_requests", "32", "twice"]),
])
def test_a_grid_that_would_fake_or_double_points_is_refused(tmp_path, capsys, grid, words):
    code, _, err = sweep(tmp_path, capsys, "--grid", grid)
    one_error_line(code, err, *words)
    assert not (tmp_path / "o").exists()


def test_a_repeated_grid_path_is_refused(tmp_path, capsys):
    code, _, err = sweep(tmp_path, capsys, "--grid", "queue/nr_requests=4,8",
                         "--grid", "queue/nr_requests=16")
    one_error_line(code, err, "queue/nr_requests", "twice")
    code, _, err = sweep(tmp_path, capsys, "--grid", "queue/nr_requests=4,8",
                         "--grid", "sda/queue/nr_requests=16,32")
    one_error_line(code, err, "nr_requests")


def test_another_disks_scheduler_is_a_real_axis(tmp_path, capsys):
    cfg = config(tmp_path, CONFIG + '[devices.sdb]\ndrive = "cheetah15k4"\n')
    code, out, err = sweep(tmp_path, capsys, "--devices", "sda", "--grid",
                           "sdb/queue/scheduler=noop,cfq", cfg=cfg)
    assert code == 0, err
    assert "2 runs (0 already finished, 2 run now)" in out


EXPERIMENT = """\
[experiment]
name = "e"
schedulers = ["noop"]
{extra}
[run]
duration = "0.3s"
[device]
drive = "cheetah15k4"
[[job]]
name = "r"
rw = "randread"
"""


@pytest.mark.parametrize("extra, words", [
    ('[[experiment.variant]]\nname = "s"\nset = {"run.seed" = 7}', ["variant 's'", "run.seed"]),
    ('[[experiment.variant]]\nname = "s"\nset = {"queue.scheduler" = "cfq"}',
     ["variant 's'", "queue.scheduler"]),
    ('[experiment.grid]\n"run/seed" = [1, 2]', ["run/seed", "seeds"]),
    ('[experiment.grid]\n"queue/nr_requests" = [4, 4]', ["queue/nr_requests", "twice"]),
])
def test_an_experiment_file_cannot_fake_replicates(tmp_path, extra, words):
    path = tmp_path / "e.toml"
    path.write_text(EXPERIMENT.format(extra=extra))
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize("figure, words", [
    ("totals.read.iopz", ["totals.read.iopz", "totals.read.iops"]),
    ("iostat.sdb.%util", ["iostat.sdb.%util", "iostat.sda.%util"]),
    ("totals", ["totals", "not a number"]),
])
def test_a_figure_path_that_names_no_number_is_refused(tmp_path, capsys, figure, words):
    code, _, err = sweep(tmp_path, capsys, "--figure", figure)
    one_error_line(code, err, *words)
    assert not (tmp_path / "o" / "runs").exists()      # refused before any run


OLTP_CONFIG = """\
[run]
duration = "1.5s"
[host]
memory = "1g"
[device]
drive = "cheetah15k4"
[[app]]
type = "oltp"
name = "db"
data_device = "/dev/sda"
data_size = "64m"
db_cache_size = "16m"
warmup = "0.5s"
"""


@pytest.mark.parametrize("figure, before", [("apps.bd.tps", True), ("apps.db.tpz", False),
                                            ("apps.db.tps", None)])
def test_an_applications_figure_is_checked_as_far_as_a_probe_shows_it(tmp_path, capsys,
                                                                       figure, before):
    # the probe (no time to run) has the application's name but not the figures of a
    # window it never reached: a wrong name is refused before any run, a wrong figure of
    # the right application at its first run (kept), a right one runs
    cfg = config(tmp_path, OLTP_CONFIG)
    code, out, err = sweep(tmp_path, capsys, "--figure", figure, cfg=cfg)
    runs = tmp_path / "o" / "runs"
    if before is None:
        assert code == 0, err
        header, row = (tmp_path / "o" / "summary.csv").read_text().splitlines()
        assert float(dict(zip(header.split(","), row.split(",")))["figure"]) > 0
        return
    one_error_line(code, err, figure)
    assert runs.exists() != before


def test_a_column_path_that_names_no_number_is_refused(tmp_path, capsys):
    path = tmp_path / "e.toml"
    path.write_text(EXPERIMENT.format(extra='figure = "totals.read.iops"\n'
                                            'columns = [["totals.read.mb_per_sec", "MB/s"]]'))
    code = main(["experiment", "run", str(path), "-q", "--out", str(tmp_path / "o")])
    _, err = capsys.readouterr()
    one_error_line(code, err, "totals.read.mb_per_sec", "totals.read.mb_per_s")
    assert not (tmp_path / "o" / "runs").exists()      # refused before any run


def test_sweep_refuses_zero_seeds(tmp_path, capsys):
    code, _, err = sweep(tmp_path, capsys, "--seeds", "0")
    one_error_line(code, err, "--seeds")


# --- tracebacks -------------------------------------------------------------------------

@pytest.mark.parametrize("junk", [b"", b'{"figures": ', b"\xff\xfe", b"[1, 2]", b"{}"])
def test_a_corrupt_stored_run_is_run_again(tmp_path, capsys, junk):
    code, _, err = sweep(tmp_path, capsys)
    assert code == 0, err
    runs = tmp_path / "o" / "runs"
    (stored,) = runs.iterdir()
    good = stored.read_bytes()
    stored.write_bytes(junk)
    code, out, err = sweep(tmp_path, capsys)
    assert code == 0, err
    assert "0 already finished, 1 run now" in out
    assert err.startswith("blksim: warning: ") and stored.name in err and err.count("\n") == 1
    assert json.loads(stored.read_bytes())["figures"] == json.loads(good)["figures"]


def test_an_experiment_file_that_is_not_utf8_is_one_line(tmp_path, capsys):
    path = tmp_path / "e.toml"
    path.write_bytes(EXPERIMENT.format(extra="").encode() + b"# caf\xe9\n")
    code = main(["experiment", "run", str(path), "-q", "--out", str(tmp_path / "o")])
    _, err = capsys.readouterr()
    one_error_line(code, err, str(path), "UTF-8")


def test_a_configuration_path_with_a_non_utf8_byte(tmp_path, capsys):
    name = os.fsdecode(b"b\xffd.toml")
    cfg = config(tmp_path, name=name)
    out = tmp_path / os.fsdecode(b"o\xff")
    code = main(["sweep", str(cfg), "--schedulers", "noop", "-q", "--out", str(out),
                 "--figure", "totals.read.iops"])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert {"summary.csv", "report.md", "figure.png"} <= set(os.listdir(out))


def test_a_bogus_dask_address_is_one_line(tmp_path, capsys):
    from blksim.experiments.sweep.runner import dask_available
    code, _, err = sweep(tmp_path, capsys, "--dask", "bogus")
    # without the optional extra (PyPy's environment), the line says what is missing
    one_error_line(code, err, "--dask", *(("bogus",) if dask_available() else
                                          ("needs Dask distributed",)))
    assert not (tmp_path / "o").exists()


# --- hangs and leftovers ----------------------------------------------------------------

def _children(pid: int) -> list:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pool_workers_die_with_a_killed_sweep(tmp_path):
    cfg = config(tmp_path, CONFIG.replace('"0.3s"', '"3600s"'))
    proc = subprocess.Popen([sys.executable, "-m", "blksim", "sweep", str(cfg), "--schedulers",
                             "noop,cfq", "--jobs", "2", "-q", "--out", str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    workers = []
    while time.time() < deadline and len(workers) < 2:
        time.sleep(0.2)
        workers = _children(proc.pid)
    assert len(workers) >= 2
    time.sleep(1.0)                       # the workers are running their runs
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        t0 = time.time()
        os.set_blocking(proc.stdout.fileno(), False)
        while time.time() - t0 < 15 and proc.stdout.read() != b"":
            time.sleep(0.1)               # EOF only once no worker holds the pipe
        assert all(_gone(w) for w in workers)
    finally:
        for w in workers:                 # on the old code they would run for minutes
            if not _gone(w):
                os.kill(w, signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_figure_is_never_left_half_written(tmp_path):
    from matplotlib.figure import Figure

    from blksim.experiments.figures import save_figure
    fig = Figure()
    fig.add_subplot().plot([1, 2], [3, 4])
    target = tmp_path / "f.png"

    class Killed(Exception):
        pass

    def interrupted(self, stream, **kw):
        stream.write(b"\x89PNG")              # a part of it, then the run is stopped
        raise Killed()
    original = Figure.savefig
    Figure.savefig = interrupted
    try:
        with pytest.raises(Killed):
            save_figure(fig, str(target))
    finally:
        Figure.savefig = original
    assert list(tmp_path.iterdir()) == []
    save_figure(fig, str(target))
    assert [p.name for p in tmp_path.iterdir()] == ["f.png"] and target.stat().st_size > 1000


def test_the_throughput_timeline_stays_small_whatever_the_run_length():
    from blksim.experiments.sweep.runner import TIMELINE_POINTS, _timeline
    # a second per point up to the run's last whole second
    assert _timeline({0: 2000, 2: 4000}, 3.5) == [[0, 1.024], [1, 0.0], [2, 2.048]]
    # a run of 10^28 s (a variant's duration) ran out of memory making a point per second
    assert len(_timeline({0: 2000}, 1e28)) <= TIMELINE_POINTS
    long = _timeline({0: 2000, 50_000: 2000}, 100_000.0)
    width = long[1][0]                    # whole seconds per point, MB/s over each
    assert len(long) <= TIMELINE_POINTS and long[0] == [0, round(2000 * 512 / 1e6 / width, 6)]
    assert sum(v for _, v in long) * width == pytest.approx(2 * 2000 * 512 / 1e6, rel=1e-4)


def test_the_throughput_timeline_ends_at_its_last_full_interval():
    from blksim.experiments.sweep.runner import _timeline
    # a 3 s run: three seconds, not a fourth [3, 4) drawn as a drop to 0 MB/s
    assert _timeline({0: 2000, 2: 2000}, 3.0) == [[0, 1.024], [1, 0.0], [2, 1.024]]
    # a completion at the end of the run counts in its last second
    assert _timeline({3: 2000}, 3.0) == [[0, 0.0], [1, 0.0], [2, 1.024]]
    # a 3.5 s run: its last half second is no full interval, so no point (it was drawn
    # as a rate over half a second, cut short by the run's end: a false drop)
    assert _timeline({2: 2000, 3: 1000}, 3.5)[-1] == [2, 1.024]
    assert len(_timeline({3: 1000}, 3.5)) == 3
    # the ramp is in the timeline (the report shades it): from 0
    assert _timeline({1: 500, 2: 1000}, 2.5) == [[0, 0.0], [1, 0.256]]
    assert _timeline({}, 0.0) == []


def test_the_default_folder_stays_where_it_is_asked(tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    path = tmp_path / "e.toml"
    path.write_text(EXPERIMENT.format(extra="").replace('name = "e"', 'name = "../up"'))
    assert main(["experiment", "run", str(path), "-q"]) == 0, capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["e.toml", "work"]
    assert os.listdir(work) == ["experiment-_up"]


def test_no_latency_from_a_window_without_io(tmp_path, capsys):
    path = tmp_path / "e.toml"
    path.write_text(EXPERIMENT.format(extra='scale = ["run.duration"]'))
    # --scale 1e-9: 0.3 ns, in which no I/O completes (the time was once written 3e-10s,
    # which a time's text does not take)
    assert main(["experiment", "run", str(path), "-q", "--scale", "1e-9",
                 "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    assert err == ""                                   # no matplotlib warning either
    header, row = (tmp_path / "o" / "summary.csv").read_text().splitlines()
    cells = dict(zip(header.split(","), row.split(",")))
    # nothing completed: no rate and no latency (docs/results.md, "Empty windows")
    assert cells["iops"] == cells["q2c_mean_ms"] == cells["q2c_p99_ms"] == ""


def test_a_run_that_completed_nothing_is_finished_and_its_null_figures_are_paths(
        tmp_path, capsys):
    # 0.1 ms on a mechanical drive: nothing completes, so the rates and latencies are null
    # in results.json; the stored run is still a finished run (not re-run as corrupt), and
    # a figure path to a null figure is a right path (its cell is empty)
    cfg = config(tmp_path, CONFIG.replace('"0.3s"', '"0.1ms"'))
    args = ("--figure", "totals.all.q2c.p99_ms")
    code, out, err = sweep(tmp_path, capsys, *args, cfg=cfg)
    assert code == 0 and err == "", err
    code, out, err = sweep(tmp_path, capsys, *args, cfg=cfg)
    assert code == 0 and err == "", err
    assert "(1 already finished, 0 run now)" in out
    header, row = (tmp_path / "o" / "summary.csv").read_text().splitlines()
    cells = dict(zip(header.split(","), row.split(",")))
    assert cells["figure"] == cells["iops"] == ""
