"""Several traces replayed together: time alignment (start, clock), offsets on the device,
a group per trace, pids kept apart, and the open-loop replayer's pressure."""

import json

import pytest

from blksim.cli import main
from blksim.sim.config import ConfigError, resolve
from blksim.sim.engine import Simulation
from blksim.sim.replay import ReplayError
from blksim.sim.results import results_dict

EPOCH_US = 1_577_808_000_000_000        # 2020-01-01 00:00 +08:00, in microseconds


def alibaba(tmp_path, name, rows, device=1):
    """rows: (µs after EPOCH_US, write, byte offset, bytes)."""
    path = tmp_path / name
    path.write_text("".join(f"{device},{'W' if w else 'R'},{off},{n},{EPOCH_US + t}\n"
                            for t, w, off, n in rows))
    return str(path)


def simulate(traces, groups=None, device=None, queue=None):
    raw = {"run": {"seed": 1, "kernel": "6.6"},
           "device": {"service": "fixed", "service_time": "1ms", "capacity": "1g",
                      **(device or {})},
           "queue": {"scheduler": "none", "nomerges": 2, **(queue or {})},
           "trace": traces}
    if groups is not None:
        raw["cgroups"] = groups
    seen = []
    sim = Simulation(resolve(raw, "t.toml"), complete_hooks=(seen.append,))
    res = results_dict(sim.run(), {})
    return sorted(seen, key=lambda b: b.id), res


def first_queued(bios) -> dict:
    out = {}
    for b in bios:
        out.setdefault(b.pid, round(b.t_queue, 9))
    return out


# --- alignment ---------------------------------------------------------------------

def test_start_alignment_starts_every_trace_at_zero_and_clock_keeps_the_recorded_distance(
        tmp_path):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096), (10_000, 0, 8192, 4096)])
    b = alibaba(tmp_path, "b.csv", [(2_500_000, 1, 0, 4096), (2_600_000, 1, 8192, 4096)])
    bios, _ = simulate([{"path": a}, {"path": b}])
    assert first_queued(bios) == {900: 0.0, 901: 0.0}
    bios, res = simulate([{"path": a, "align": "clock"}, {"path": b, "align": "clock"}])
    assert first_queued(bios) == {900: 0.0, 901: 2.5}
    assert [round(x.t_queue, 9) for x in bios if x.pid == 901] == [2.5, 2.6]
    assert [r["shift_s"] for r in res["replay"]] == [0.0, 2.5]
    assert {r["clock"] for r in res["replay"]} == {"epoch"}
    # the earliest clock trace starts the run, whichever is listed first
    bios, _ = simulate([{"path": b, "align": "clock"}, {"path": a, "align": "clock"}])
    assert first_queued(bios) == {900: 2.5, 901: 0.0}


def test_clock_alignment_takes_the_window_and_speed_of_each_trace(tmp_path):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096), (1_000_000, 0, 8192, 4096)])
    b = alibaba(tmp_path, "b.csv", [(0, 0, 0, 4096), (3_000_000, 0, 8192, 4096),
                                    (4_000_000, 0, 16384, 4096)])
    # b's window starts 3 s into b, 2 s after a's first request on the common clock...
    bios, _ = simulate([{"path": a, "align": "clock", "start": "1s"},
                        {"path": b, "align": "clock", "start": "3s"}])
    assert [round(x.t_queue, 9) for x in bios if x.pid == 900] == [0.0]
    assert [round(x.t_queue, 9) for x in bios if x.pid == 901] == [2.0, 3.0]
    # ...and at twice the speed, every distance is halved, the shift too
    bios, _ = simulate([{"path": a, "align": "clock", "start": "1s"},
                        {"path": b, "align": "clock", "start": "3s", "speed": 2}])
    assert [round(x.t_queue, 9) for x in bios if x.pid == 901] == [1.0, 1.5]


def test_a_start_trace_beside_clock_traces_starts_at_zero(tmp_path):
    a = alibaba(tmp_path, "a.csv", [(5_000_000, 0, 0, 4096)])
    b = alibaba(tmp_path, "b.csv", [(7_000_000, 0, 0, 4096)])
    c = alibaba(tmp_path, "c.csv", [(9_000_000, 0, 0, 4096)])
    bios, _ = simulate([{"path": a, "align": "clock"}, {"path": b, "align": "clock"},
                        {"path": c}])
    assert first_queued(bios) == {900: 0.0, 901: 2.0, 902: 0.0}


def test_tencent_and_msr_timestamps_are_wall_clock_times(tmp_path):
    # the same instant, 2020-01-01 00:00:03 +08:00, in Tencent's seconds and MSR's ticks
    t = tmp_path / "t.csv"
    t.write_text("1577808003,0,8,0,7\n")
    m = tmp_path / "m.csv"
    ticks = (1577808001 + 11_644_473_600) * 10_000_000
    m.write_text(f"{ticks},hm,0,Read,0,4096,10\n")
    a = alibaba(tmp_path, "a.csv", [(2_000_000, 0, 0, 4096)])
    bios, _ = simulate([{"path": str(t), "align": "clock"}, {"path": str(m), "align": "clock"},
                        {"path": a, "align": "clock"}])
    assert first_queued(bios) == {900: 2.0, 901: 0.0, 902: 1.0}


def test_clock_traces_on_different_kinds_of_clock_are_one_error(tmp_path):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096)])
    d = tmp_path / "d.trace"
    d.write_text("0 0 0 8 1\n")
    with pytest.raises(ReplayError) as err:
        simulate([{"path": a, "align": "clock"}, {"path": str(d), "align": "clock"}])
    text = str(err.value)
    assert "a.csv" in text and "d.trace" in text and "\n" not in text
    assert "wall-clock" in text and "its own start" in text


def test_align_must_be_start_or_clock(tmp_path):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096)])
    with pytest.raises(ConfigError, match=r"trace #1: align = 'now' is not supported; "
                                          r"valid: start, clock"):
        simulate([{"path": a, "align": "now"}])


# --- offsets -----------------------------------------------------------------------

def test_offset_moves_the_trace_onto_its_region_of_the_device(tmp_path):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096), (10, 1, 1 << 20, 8192)])
    bios, res = simulate([{"path": a, "offset": "100m"}])
    assert [(b.sector, b.nr_sectors) for b in bios] == [(204800, 8), (206848, 16)]
    assert res["replay"][0]["offset_sectors"] == 204800


def test_remap_folds_the_trace_into_the_space_after_its_offset(tmp_path):
    cap = 2 * 1024 * 1024               # 1 GiB in sectors
    off = cap - 1000                    # 1000 sectors left after the offset
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096), (10, 0, 600 * 512, 4096),
                                    (20, 0, 996 * 512, 4096)])
    bios, _ = simulate([{"path": a, "offset": off * 512, "remap": "wrap"}])
    # 600 + 8 fits the 1000 sectors; 996 + 8 does not: 996 mod 1000 runs past, so it
    # ends at the last sector
    assert [b.sector for b in bios] == [off, off + 600, cap - 8]
    assert all(b.sector + b.nr_sectors <= cap for b in bios)


def test_a_trace_beyond_its_device_after_its_offset_is_one_error(tmp_path):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096), (10, 0, 200 << 20, 4096)])
    with pytest.raises(ReplayError) as err:
        simulate([{"path": a, "offset": "900m"}])
    text = str(err.value)
    assert "request #2" in text and "offset, sector 1843200" in text and "\n" not in text
    with pytest.raises(ReplayError, match=r"offset 1073741824 bytes \(sector 2097152\) is "
                                          r"beyond the device's 2097152 sectors"):
        simulate([{"path": a, "offset": "1g"}])
    with pytest.raises(ConfigError, match=r"trace #1: offset expected a multiple of 512"):
        simulate([{"path": a, "offset": 1000}])


# --- groups and pids ---------------------------------------------------------------

def test_each_trace_is_charged_to_its_group(tmp_path):
    a = alibaba(tmp_path, "a.csv", [(i * 1000, 0, i * 8192, 4096) for i in range(5)])
    b = alibaba(tmp_path, "b.csv", [(i * 1000, 1, i * 8192, 65536) for i in range(3)])
    c = alibaba(tmp_path, "c.csv", [(i * 1000, 0, i * 8192, 8192) for i in range(2)])
    _, res = simulate([{"path": a, "cgroup": "t/a"}, {"path": b, "cgroup": "t/b"},
                       {"path": c}], groups={"t": {"a": {}, "b": {}}})
    stat = {g: res["cgroups"][g]["io_stat"]["sda"] for g in ("t/a", "t/b", "t", "/")}
    assert (stat["t/a"]["rbytes"], stat["t/a"]["rios"], stat["t/a"]["wios"]) == (20480, 5, 0)
    assert (stat["t/b"]["wbytes"], stat["t/b"]["wios"], stat["t/b"]["rios"]) == (196608, 3, 0)
    assert stat["t"]["rbytes"] == 20480 and stat["t"]["wbytes"] == 196608
    assert stat["/"]["rbytes"] == 20480 + 16384


def test_one_pid_in_two_traces_of_different_groups_is_an_error(tmp_path):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096)])
    b = alibaba(tmp_path, "b.csv", [(0, 0, 0, 4096)])
    with pytest.raises(Exception, match=r"pid 7 is in trace 'trace' \(.*a.csv, group 'x'\) "
                                        r"and in trace 'trace' \(.*b.csv, group 'y'\)"):
        simulate([{"path": a, "cgroup": "x", "pid": 7}, {"path": b, "cgroup": "y", "pid": 7}],
                 groups={"x": {}, "y": {}})
    # in one group they are one process, as before
    bios, _ = simulate([{"path": a, "cgroup": "x", "pid": 7},
                        {"path": b, "cgroup": "x", "pid": 7}], groups={"x": {}})
    assert [b.pid for b in bios] == [7, 7]


# --- pressure ----------------------------------------------------------------------

def test_an_open_loop_replay_stalls_only_while_it_sleeps_for_a_tag(tmp_path):
    # a request every ms, a device of one tag taking 10 ms each: r0 takes the tag; r1
    # (1 ms) finds none and the replayer sleeps in io_schedule until r0 completes (10 ms);
    # then r2, overdue, is submitted and sleeps until 20 ms, ..., r7 until 70 ms: the
    # group's tasks stall from 1 ms to 70 ms, 69 ms in all
    a = alibaba(tmp_path, "a.csv", [(i * 1000, 0, i << 20, 4096) for i in range(8)])
    bios, res = simulate([{"path": a, "cgroup": "g"}], groups={"g": {}},
                         device={"service_time": "10ms", "queue_depth": 1})
    assert [round(b.t_queue * 1e3, 6) for b in bios] == [0, 1, 10, 20, 30, 40, 50, 60]
    assert res["cgroups"]["g"]["io_pressure"]["some"]["total_us"] == 69_000
    # the same trace at one request per 20 ms never waits for a tag: no stall
    a = alibaba(tmp_path, "b.csv", [(i * 20_000, 0, i << 20, 4096) for i in range(8)])
    _, res = simulate([{"path": a, "cgroup": "g"}], groups={"g": {}},
                      device={"service_time": "10ms", "queue_depth": 1})
    assert res["cgroups"]["g"]["io_pressure"]["some"]["total_us"] == 0


# --- the command line --------------------------------------------------------------

def test_replay_takes_a_group_and_an_offset_per_trace(tmp_path, capsys):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096)])
    b = alibaba(tmp_path, "b.csv", [(1_000_000, 1, 0, 8192)])
    assert main(["replay", a, b, "--drive", "cheetah15k4", "--cgroups", "ta,/",
                 "--offsets", "0,1g", "--align", "clock", "--show-config"]) == 0
    text = capsys.readouterr().out
    assert 'cgroup = "ta"' in text and "offset = \"1g\"" in text
    assert text.count('align = "clock"') == 2 and 'kernel = "6.6"' in text
    assert 'scheduler = "mq-deadline"' in text      # deadline's multi-queue counterpart
    out = tmp_path / "out"
    assert main(["replay", a, b, "--drive", "cheetah15k4", "--cgroups", "ta,/",
                 "--offsets", "0,1g", "--align", "clock", "--schedulers", "none", "-q",
                 "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["cgroups"]["ta"]["io_stat"]["sda"]["rbytes"] == 4096
    assert [r["shift_s"] for r in res["replay"]] == [0.0, 1.0]
    assert res["replay"][1]["offset_sectors"] == 2097152


def test_replay_wants_one_group_and_one_offset_per_trace(tmp_path, capsys):
    a = alibaba(tmp_path, "a.csv", [(0, 0, 0, 4096)])
    assert main(["replay", a, a, "--drive", "cheetah15k4", "--cgroups", "x"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.endswith("--cgroups 'x': 1 value for 2 traces; give one per trace, in order")
    assert "\n" not in err
    assert main(["replay", a, "--drive", "cheetah15k4", "--offsets", "0,1g"]) != 0
    assert "--offsets '0,1g': 2 values for 1 trace" in capsys.readouterr().err


def test_set_writes_a_groups_interface_file():
    from blksim.sim.overrides import apply_overrides
    raw = {"cgroups": {"t": {"a": {}}, "u/v": {}, "u": {}}}
    out = apply_overrides(raw, ['cgroups/t/a/io.max="sda wbps=1048576"',
                                "cgroups/u/v/io.max=sda riops=10"])
    assert out["cgroups"]["t"]["a"] == {"io.max": "sda wbps=1048576"}
    assert out["cgroups"]["u/v"] == {"io.max": "sda riops=10"}
    assert raw["cgroups"]["t"]["a"] == {}                 # the input is left as it was
    with pytest.raises(ConfigError, match=r"no group 't/b' in the configuration"):
        apply_overrides(raw, ["cgroups/t/b/io.max=x"])
    with pytest.raises(ConfigError, match=r"expected cgroups/GROUP/FILE=VALUE"):
        apply_overrides(raw, ["cgroups/io.max=x"])


def test_the_tenants_example_runs_with_no_control_and_with_io_max(capsys):
    import os
    import blksim
    path = os.path.join(os.path.dirname(blksim.__file__), "examples", "tenants.toml")
    # (a fresh drive: filling it first costs seconds and does not matter here)
    short = ["--set", 'run/duration="50ms"', "--set", 'device/start_state="fresh"', "-q"]
    assert main(["run", path, *short]) == 0
    free = capsys.readouterr().out
    assert main(["run", path, *short, "--set", 'cgroups/bulk/io.max="sda wbps=20000000"']) == 0
    capped = capsys.readouterr().out

    def written_mb(text):
        line = next(l for l in text.splitlines() if l.startswith("bulk "))
        return float(line.split()[3])
    # 20 MB/s for 50 ms: about 1 MB (at most two slices' allowance beyond), far below free
    assert written_mb(capped) < 2.5 < written_mb(free)
