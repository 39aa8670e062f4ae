"""A flash disk's figures in results.json, the run table and the plots: the GC latency
tail sorted by hand-traced intervals, GC counts and write amplification read back equal to
the drive's own counters, a run with no GC that says so, the measured window after
ramp_time, iostat and btt end to end, and the plot commands (docs/results.md, "Flash
drives")."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import deque

import pytest

from blksim.cli import main
from blksim.cli.tables import flash_lines, run_table
from blksim.sim.flash_figures import FlashWatch

# ---------------------------------------------------------------- the GC tail by hand


class _Run:
    __slots__ = ("start",)

    def __init__(self, start):
        self.start = start


class _Die:
    __slots__ = ("gc", "busy")

    def __init__(self):
        self.gc = None
        self.busy = 0.0


class _Backend:
    def __init__(self, dies):
        self.gc_intervals = deque()
        self.dies = [_Die() for _ in range(dies)]
        self.channels = [_Die()]
        for k in ("gc_foreground_runs", "gc_background_runs", "folds", "flash_reads",
                  "flash_programs"):
            setattr(self, k, 0)
        self.gc_time = 0.0


class _Ftl:
    host_pages_written = gc_pages_written = erases = 0


class _Drive:
    def __init__(self, dies=2):
        self.backend = _Backend(dies)
        self.ftl = _Ftl()

    def gc_intervals(self):
        return list(self.backend.gc_intervals)


class _Bio:
    __slots__ = ("op", "nr_sectors", "t_queue", "t_dispatch", "t_complete")

    def __init__(self, q, d, c, op=0, nr_sectors=8):
        self.op, self.nr_sectors = op, nr_sectors
        self.t_queue, self.t_dispatch, self.t_complete = q, d, c


def test_a_read_is_during_gc_when_its_device_time_overlaps_an_interval_on_any_die():
    drive = _Drive()
    watch = FlashWatch(drive, start=0.1)
    drive.backend.gc_intervals.extend([(1.0, 2.0, 0), (1.5, 3.0, 1)])
    cases = [
        ((0.5, 0.6, 1.1), True),      # device time 0.6-1.1 overlaps die 0's 1.0-2.0
        ((0.2, 0.3, 0.9), False),     # ends before any GC
        ((2.9, 3.0, 3.5), False),     # dispatched as die 1's GC ended: no overlap
        ((2.5, 2.9, 3.2), True),      # overlaps die 1's 1.5-3.0 only
        ((0.0, 1.1, 1.2), None),      # queued before ramp_time (0.1): not counted
    ]
    for (q, d, c), during in cases:
        before = (len(watch._gc), len(watch._other))
        watch.bio_completed(None, _Bio(q, d, c), c)
        after = (len(watch._gc), len(watch._other))
        expect = {True: (1, 0), False: (0, 1), None: (0, 0)}[during]
        assert (after[0] - before[0], after[1] - before[1]) == expect, (q, d, c)
    # writes, flushes and empty bios are not reads
    for bio in (_Bio(0.5, 0.6, 1.1, op=1), _Bio(0.5, 0.6, 1.1, op=2, nr_sectors=0)):
        watch.bio_completed(None, bio, 1.1)
    # a collection still running on die 1 (not yet in the interval list) that began before
    # the read completed
    drive.backend.dies[1].gc = _Run(4.0)
    drive.backend.gc_background_runs += 1          # as the back end counts a run it starts
    watch.bio_completed(None, _Bio(3.8, 3.9, 4.1), 4.1)
    watch.bio_completed(None, _Bio(3.5, 3.6, 3.9), 3.9)      # completed before it began
    tail = watch.gc_tail()
    assert tail["during_gc"]["reads"] == 3 and tail["other"]["reads"] == 3
    # Q2C of the reads during GC: 0.6, 0.7 and 0.3 s -> p50 0.6 s, max 0.7 s
    assert tail["during_gc"]["p50_ms"] == pytest.approx(600, rel=0.005)
    assert tail["during_gc"]["max_ms"] == pytest.approx(700)
    assert tail["other"]["max_ms"] == pytest.approx(700)      # 0.7, 0.6 and 0.4 s


def test_an_empty_tail_has_counts_of_zero_and_no_figures():
    tail = FlashWatch(_Drive()).gc_tail()
    assert tail["during_gc"] == {"reads": 0, "mean_ms": None, "p50_ms": None, "p99_ms": None,
                                 "p999_ms": None, "max_ms": None}


# ---------------------------------------------------------------- runs end to end
#: A drive small enough that GC must run: 2 channels x 2 dies x 2 planes, 32 blocks of 8
#: flash pages of 16 KiB (20 MiB for the host of 32 MiB raw), no SLC cache.
TINY = """\
name = "tiny"
description = "a test drive"
source = ["blksim's choice: a tiny test drive"]
interface = "nvme"
pcie_gen = 3
pcie_lanes = 4
max_io_queues = 4
max_queue_entries = 1024
capacity = 20971520
write_buffer = "256k"
plp = false
fw_read_us = 0
fw_write_us = 0
command_fetch_us = 0

[geometry]
channels = 2
chips_per_channel = 1
dies_per_chip = 2
planes_per_die = 2
blocks_per_plane = 32
pages_per_block = 8
page_bytes = 16384

[nand]
cell = "tlc"
read_us = 50
program_us = 500
erase_us = 3000
slc_read_us = 25
slc_program_us = 150
channel_mts = 100
suspend_us = 20
resume_us = 20
"""


def _run(tmp_path, name, device, rw="randrw", ios=6000, run_extra="", args=()):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(f"""
[run]
name = "{name}"
seed = 1
kernel = "6.6"
{run_extra}
[queue]
scheduler = "none"
[device]
{device}
[[job]]
name = "mix"
rw = "{rw}"
bs = "4k"
iodepth = 8
ioengine = "io_uring"
direct = 1
number_ios = {ios}
""")
    out = tmp_path / name
    assert main(["run", str(cfg), "-q", "--out", str(out), *args]) == 0
    return out, json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def gc_run(tmp_path_factory):
    """The tiny drive, full, under 6,000 random 4 KiB reads and writes: GC must run."""
    tmp = tmp_path_factory.mktemp("gc")
    (tmp / "tiny.toml").write_text(TINY)
    return _run(tmp, "gc", f'flash = "{tmp / "tiny.toml"}"\nstart_state = "full"',
                args=("--per-request", "--iostat", "20ms", "--blktrace", str(tmp / "bt")))


def test_gc_counts_and_write_amplification_come_back_equal_to_the_drives_counters(gc_run):
    _, res = gc_run
    dev = res["devices"]["sda"]["device"]
    f, m = dev["figures"], dev["measured"]
    assert dev == res["device"]               # the top-level device is sda's entry
    assert f["gc_runs"] > 0 and f["erases"] > 0       # the drive had to collect
    # no ramp_time: the measured window is the whole run, so the same counts
    assert (m["start_s"], m["end_s"]) == (0.0, res["simulated_s"])
    for key in ("gc_runs", "gc_foreground_runs", "gc_background_runs", "erases",
                "gc_time_s", "flash_reads", "flash_programs", "host_pages_written",
                "write_amplification", "slc_folds"):
        assert m[key] == f[key], key
    # write amplification by hand: (host + moved) / host
    assert m["write_amplification"] == round(
        (m["host_pages_written"] + m["gc_pages_written"]) / m["host_pages_written"], 4)
    assert m["write_amplification"] > 1.0
    # every 4 KiB write is one host page, but one that rewrites a unit still in the
    # write buffer programs nothing new (a few of 3,000 random writes over 5,120 units)
    writes = res["totals"]["write"]["ios"]
    assert 0 <= writes - m["host_pages_written"] <= 0.01 * writes
    # busy shares over the window (the whole simulation) against the drive's own, over its
    # time to its last event: one ratio for every die and channel
    mu, fu = m["utilisation"], f["utilisation"]
    ratios = [a / b for a, b in zip(mu["dies"] + mu["channels"], fu["dies"] + fu["channels"])]
    assert len(ratios) == 6 and 0.5 < ratios[0] <= 1.0
    assert ratios == pytest.approx([ratios[0]] * 6, rel=2e-3)
    # GC time summed over the 4 dies, as a share of their time
    assert m["gc_time_pct_of_die_time"] == pytest.approx(
        100 * m["gc_time_s"] / (4 * res["simulated_s"]), abs=1e-3)


def test_the_gc_intervals_are_the_runs_with_their_die(gc_run):
    _, res = gc_run
    dev = res["device"]
    iv = dev["gc_intervals"]
    f = dev["figures"]
    # every collection (and fold) ended by the end of the run is an interval: at most
    # one per die still running
    assert f["gc_runs"] + f["slc_folds"] - 4 <= len(iv) <= f["gc_runs"] + f["slc_folds"]
    assert len(iv) <= dev["gc_intervals_kept"]
    assert all(s < e <= res["simulated_s"] and die in range(4) for s, e, die in iv)
    assert [e for _, e, _ in iv] == sorted(e for _, e, _ in iv)
    # their total duration is the GC time
    assert sum(e - s for s, e, _ in iv) == pytest.approx(f["gc_time_s"], rel=1e-6, abs=1e-6)


def test_reads_are_split_by_gc_and_those_during_gc_wait_longer(gc_run):
    _, res = gc_run
    tail = res["device"]["gc_tail"]
    gc, other = tail["during_gc"], tail["other"]
    assert gc["reads"] > 0 and other["reads"] > 0
    assert gc["reads"] + other["reads"] == res["totals"]["read"]["ios"]
    assert gc["p50_ms"] <= gc["p99_ms"] <= gc["p999_ms"] <= gc["max_ms"]
    assert gc["p99_ms"] > other["p99_ms"]     # the tail GC causes


def test_the_run_table_gives_each_flash_figure_with_its_window(gc_run):
    _, res = gc_run
    text = run_table(res)
    m, f = res["device"]["measured"], res["device"]["figures"]
    assert f"flash sda (tiny):" in text
    assert f"measured window 0.000-{res['simulated_s']:.3f} s:" in text
    assert f"write amplification {m['write_amplification']:.3f}" in text
    assert (f"garbage collection: {m['gc_runs']:,} runs ({m['gc_foreground_runs']:,} "
            f"foreground, {m['gc_background_runs']:,} background)") in text
    assert f"{m['erases']:,} erases" in text
    assert f"reads during GC: {res['device']['gc_tail']['during_gc']['reads']:,} reads" in text
    assert f"free blocks {f['free_blocks']:,} now, lowest sampled" in text
    top = max(m["utilisation"]["dies"])
    assert (f"utilisation: channels busiest {100 * max(m['utilisation']['channels']):.1f} %"
            in text) and f"dies busiest {100 * top:.1f} % (die " in text


def test_a_run_without_gc_says_so_and_prints_no_tail(tmp_path):
    _, res = _run(tmp_path, "nogc", 'flash = "samsung870evo1tb"\nblocks_per_plane = 128',
                  ios=2000)
    dev = res["device"]
    assert dev["figures"]["gc_runs"] == 0 and dev["gc_intervals"] == []
    assert dev["gc_tail"]["during_gc"]["reads"] == 0
    assert dev["gc_tail"]["other"]["reads"] == res["totals"]["read"]["ios"]
    text = run_table(res)
    assert "garbage collection: none; 0 erases" in text
    assert "reads during GC" not in text
    assert "SLC cache took 100.0 % of host writes" in text     # every write to the SLC cache


def test_the_measured_window_starts_at_ramp_time(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    _, res = _run(tmp_path, "ramp", f'flash = "{tmp_path / "tiny.toml"}"\n'
                                    f'start_state = "full"', run_extra='ramp_time = "50ms"')
    m, f = res["device"]["measured"], res["device"]["figures"]
    assert m["start_s"] == 0.05
    assert 0 < m["host_pages_written"] < f["host_pages_written"]
    # the writes queued after ramp_time are the measured host pages (give or take the
    # queue and the buffer at each end)
    writes = res["totals"]["write"]["ios"]
    assert abs(writes - m["host_pages_written"]) <= 16 + 0.01 * writes
    assert m["gc_runs"] <= f["gc_runs"] and m["erases"] <= f["erases"]
    assert "measured window 0.050-" in run_table(res)


def test_an_empty_measured_window_prints_no_figure_of_it():
    dev = {"name": "tiny", "measured": {"start_s": 1.0, "end_s": 1.0},
           "figures": {"utilisation": {"channels": [], "dies": []}}, "gc_tail": {}}
    lines = flash_lines({"device": dev, "simulated_s": 1.0})
    assert "    the measured window is empty: no flash figures for it" in lines
    assert not any("write amplification" in x or "garbage" in x for x in lines)


# ---------------------------------------------------------------- iostat and btt
def test_iostat_works_for_a_flash_disk(gc_run):
    out, res = gc_run
    io = res["iostat"]["sda"]
    span = io["interval_s"]
    assert io["r/s"] * span == pytest.approx(res["totals"]["read"]["ios"], abs=1)
    assert io["w/s"] * span == pytest.approx(res["totals"]["write"]["ios"], abs=1)
    assert io["r_await"] == pytest.approx(res["totals"]["read"]["q2c"]["mean_ms"], rel=0.02)
    rows = (out / "iostat.csv").read_text().splitlines()
    assert rows[0].startswith("time_s,interval_s,device,r/s")
    reads = sum(float(r.split(",")[3]) * float(r.split(",")[1]) for r in rows[1:])
    assert reads == pytest.approx(res["totals"]["read"]["ios"], abs=1)


def test_btt_reads_the_blktrace_of_a_flash_disk(gc_run, tmp_path):
    out, res = gc_run
    bt = out.parent / "bt"
    assert (bt / "sda.blktrace.0").stat().st_size > 0
    if not (shutil.which("blkparse") and shutil.which("btt")):
        pytest.skip("blkparse and btt are not installed")
    dump = tmp_path / "sda.bin"
    subprocess.run(["blkparse", "-i", "sda", "-d", str(dump), "-O"], cwd=bt, check=True,
                   capture_output=True)
    text = subprocess.run(["btt", "-i", str(dump)], cwd=tmp_path, check=True,
                          capture_output=True, text=True).stdout     # its .dat files there
    d2c = next(line.split() for line in text.splitlines() if line.startswith("D2C"))
    avg_ms, n = float(d2c[2]) * 1e3, int(d2c[4])
    ios = res["totals"]["all"]["ios"]
    # btt pairs D and C by sector: a few same-sector requests in flight at once escape it
    assert ios * 0.99 <= n <= ios
    assert avg_ms == pytest.approx(res["totals"]["all"]["d2c"]["mean_ms"], rel=0.01)


# ---------------------------------------------------------------- plots
def test_plot_flash_and_the_gc_shaded_timeline_write_their_files(gc_run, tmp_path):
    out, _ = gc_run
    png = tmp_path / "flash.png"
    assert main(["plot", "flash", str(out), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tl = tmp_path / "timeline.png"
    assert main(["plot", "timeline", str(out), "--bin", "10ms", "--out", str(tl)]) == 0
    assert tl.stat().st_size > 0


def test_the_gc_band_is_the_union_of_the_dies_intervals():
    from blksim.experiments.run_plots import merged_intervals
    assert merged_intervals([(3, 4, 1), (1, 2, 0), (1.5, 2.5, 1), (2.5, 2.6, 0)]) == \
        [(1, 2.6), (3, 4)]
    assert merged_intervals([]) == []


def test_plot_flash_of_a_run_without_a_flash_disk_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "mech.toml"
    cfg.write_text('[run]\nseed = 1\n[device]\ndrive = "cheetah15k4"\n'
                   '[[job]]\nname = "r"\nrw = "randread"\nnumber_ios = 20\n')
    assert main(["run", str(cfg), "-q", "--out", str(tmp_path / "mech")]) == 0
    capsys.readouterr()
    assert main(["plot", "flash", str(tmp_path / "mech"), "--out",
                 str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no flash disk in results.json" in err
    assert not (tmp_path / "x.png").exists()


def test_the_tail_split_agrees_with_every_reads_times_against_the_intervals(gc_run):
    """The split made at completion time equals the one made afterwards from requests.csv
    and the whole list of GC intervals (the run ends with the drive idle, every
    collection ended)."""
    import csv
    out, res = gc_run
    iv = res["device"]["gc_intervals"]
    assert len(iv) < res["device"]["gc_intervals_kept"]
    during = other = 0
    with open(out / "requests.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["dir"] != "R":
                continue
            d, c = float(row["d_s"]), float(row["c_s"])
            if any(s < c and e > d for s, e, _ in iv):
                during += 1
            else:
                other += 1
    tail = res["device"]["gc_tail"]
    assert (tail["during_gc"]["reads"], tail["other"]["reads"]) == (during, other)


def test_a_ramp_time_after_the_last_io_leaves_an_empty_window(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    _, res = _run(tmp_path, "late", f'flash = "{tmp_path / "tiny.toml"}"',
                  ios=200, run_extra='ramp_time = "1s"')
    m = res["device"]["measured"]
    assert m["start_s"] == m["end_s"] == 1.0
    assert (m["host_pages_written"], m["gc_runs"], m["erases"]) == (0, 0, 0)
    assert m["write_amplification"] is None and m["gc_time_pct_of_die_time"] is None
    assert m["utilisation"] == {"dies": None, "channels": None}
    assert res["device"]["figures"]["host_pages_written"] > 0      # the whole run wrote
    text = run_table(res)
    assert "    the measured window is empty: no flash figures for it" in text
    assert "write amplification" not in text and "reads during GC" not in text
