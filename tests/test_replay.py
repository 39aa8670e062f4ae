"""Trace replay options: speed, gaps, window, limits, devices, remapping, open and closed loop."""

import json

import pytest

from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.sim import replay as replay_mod
from blksim.cli import main
from blksim.sim.config import ConfigError
from blksim.sim.replay import ReplayError
from tests.simhelpers import make_config, run_config
from blksim.traces import blktrace as bt
from blksim.traces.blktrace import BlktraceFile, action_value, encode_device

CAP = 71687372


def disksim(tmp_path, rows, name="t.trace"):
    """rows: (ms, devno, sector, size, read)."""
    path = tmp_path / name
    path.write_text("".join(f"{t} {d} {s} {n} {1 if r else 0}\n" for t, d, s, n, r in rows))
    return str(path)


def run_trace(tmp_path, trace, service=0.001, capacity=CAP, **kw):
    cfg = make_config(traces=[{**trace}], scheduler="noop", queue={"nomerges": 2}, **kw)
    outcome, done = run_config(cfg, device=ServiceLawDevice("fixed", service, capacity=capacity),
                               collect=True)
    return outcome, sorted(done, key=lambda b: b.id)


def times_ms(bios):
    return [round(b.t_queue * 1e3, 6) for b in bios]


# --- open loop -----------------------------------------------------------------------

def test_open_loop_at_recorded_times_and_speed(tmp_path):
    path = disksim(tmp_path, [(0, 0, 0, 8, 1), (10, 0, 100, 8, 1), (20, 0, 200, 8, 0)])
    _, bios = run_trace(tmp_path, {"path": path})
    assert times_ms(bios) == [0, 10, 20]
    assert [b.write for b in bios] == [False, False, True]
    assert [b.sync for b in bios] == [True, True, False]      # reads sync, writes not
    _, bios = run_trace(tmp_path, {"path": path, "speed": 2})
    assert times_ms(bios) == [0, 5, 10]
    _, bios = run_trace(tmp_path, {"path": path, "speed": 0.5})
    assert times_ms(bios) == [0, 20, 40]


def test_an_open_loop_replay_sleeps_for_a_free_request_and_falls_behind(tmp_path):
    # a record every ms, a device taking 10 ms each, four requests (the kernel's least):
    # r0 is served, r1-r3 queue, r4 finds no free request and the replay sleeps
    # (get_request_wait) until r0 completes at 10 ms; r5, due at 5 ms, is submitted
    # then and waits in turn, and so on, 10 ms apart
    path = disksim(tmp_path, [(t, 0, 100 * t, 8, 1) for t in range(8)])

    def run(service):
        cfg = make_config(traces=[{"path": path}], queue={"nomerges": 2, "nr_requests": 4})
        out, done = run_config(cfg, device=ServiceLawDevice("fixed", service, capacity=CAP),
                               collect=True)
        return out, sorted(done, key=lambda b: b.id)

    out, bios = run(0.010)
    assert times_ms(bios) == [0, 1, 2, 3, 4, 10, 20, 30]
    # served in order, 10 ms each; the bio that waited kept its Q time (r4: 4 ms)
    assert [round(b.t_dispatch * 1e3, 6) for b in bios] == [0, 10, 20, 30, 40, 50, 60, 70]
    # behind by 5, 14 and 23 ms when it woke for r5, r6 and r7
    assert out.behind == [{"source": "trace trace", "max_lag_s": 0.023, "end_lag_s": 0.0}]
    assert out.queue.waited == 4
    # a device that keeps up leaves the replay on schedule
    out, bios = run(0.0005)
    assert times_ms(bios) == list(range(8)) and out.behind == []


def test_an_overloaded_rate_job_holds_a_bounded_backlog():
    # 100,000 arrivals a second on a drive that serves ~150: the job sleeps with its one
    # waiting bio instead of queueing every arrival
    cfg = make_config(jobs=[{"name": "flood", "rw": "randread", "rate_iops": 100000}],
                      run={"duration": "5s"})
    out = run_config(cfg)
    job = out.processes[0]
    completed = out.metrics.completed
    assert job.issued <= completed + 2 * cfg.nr_requests + 1
    (behind,) = out.behind
    assert behind["source"] == "job flood" and 4.9 < behind["end_lag_s"] <= 5.0
    assert behind["max_lag_s"] >= behind["end_lag_s"]


def test_max_gap_caps_long_gaps(tmp_path):
    path = disksim(tmp_path, [(0, 0, 0, 8, 1), (1, 0, 8, 8, 1), (1001, 0, 16, 8, 1),
                              (1003, 0, 24, 8, 1)])
    _, bios = run_trace(tmp_path, {"path": path, "max_gap": "10ms"})
    assert times_ms(bios) == [0, 1, 11, 13]
    _, bios = run_trace(tmp_path, {"path": path, "max_gap": "10ms", "speed": 2})
    assert times_ms(bios) == [0, 0.5, 5.5, 6.5]


def test_window_and_request_limit(tmp_path):
    path = disksim(tmp_path, [(t, 0, 8 * t, 8, 1) for t in range(10)])
    _, bios = run_trace(tmp_path, {"path": path, "start": "3ms", "end": "6ms"})
    assert [b.sector for b in bios] == [24, 32, 40]
    assert times_ms(bios) == [0, 1, 2]             # the window starts the replay
    _, bios = run_trace(tmp_path, {"path": path, "max_requests": 4})
    assert [b.sector for b in bios] == [0, 8, 16, 24]


def test_volume_and_devno_select_records(tmp_path):
    path = disksim(tmp_path, [(0, 0, 0, 8, 1), (1, 3, 8, 8, 1), (2, 3, 16, 8, 1)])
    _, bios = run_trace(tmp_path, {"path": path, "volume": 3})
    assert [b.sector for b in bios] == [8, 16]
    _, bios = run_trace(tmp_path, {"path": path, "devno": 0})
    assert [b.sector for b in bios] == [0]


# --- remapping -----------------------------------------------------------------------

def test_remap_none_names_the_first_request_beyond_the_drive(tmp_path):
    path = disksim(tmp_path, [(0, 0, 0, 8, 1), (1, 0, 1000, 8, 1), (2, 0, 5000, 8, 1)])
    with pytest.raises(ReplayError, match=r"request #2 of the replay \(trace time 0\.001 s, "
                                          r"pid None\) covers sectors 1000\.\.1007, beyond the "
                                          r"simulated drive's 1000 sectors; set remap"):
        run_trace(tmp_path, {"path": path}, capacity=1000)


def test_remap_wrap_and_scale(tmp_path):
    path = disksim(tmp_path, [(0, 0, 0, 8, 1), (1, 0, 1000, 8, 1), (2, 0, 2996, 4, 1),
                              (3, 0, 1996, 8, 1)])
    out, bios = run_trace(tmp_path, {"path": path, "remap": "wrap"}, capacity=1000)
    assert [b.sector for b in bios] == [0, 0, 996, 992]      # mod 1000, kept inside
    assert out.replays[0]["remap"] == "wrap" and out.replays[0]["remapped"] == 3
    out, bios = run_trace(tmp_path, {"path": path, "remap": "scale"}, capacity=1000)
    assert out.replays[0]["trace_sectors"] == 3000
    assert [b.sector for b in bios] == [0, 333, 996, 665]
    out, bios = run_trace(tmp_path, {"path": path, "remap": "scale", "trace_sectors": 4000},
                          capacity=1000)
    assert [b.sector for b in bios] == [0, 250, 749, 499]


# --- blktrace replay, closed loop ----------------------------------------------------

def blk(tmp_path, events, name="c.blktrace.0", device=encode_device(8, 0)):
    """events: (letter, t_ms, pid, sector, sectors[, write])."""
    f = BlktraceFile(tmp_path / name, device)
    codes = {"Q": bt.TA_QUEUE, "D": bt.TA_ISSUE, "C": bt.TA_COMPLETE}
    for letter, t, pid, sector, n, *w in events:
        if not f.named(pid):
            f.notify_process(0, pid, f"proc{pid}")
        write = bool(w and w[0])
        f.event(round(t * 1e6), action_value(codes[letter], write, sync=not write), sector,
                n * 512, pid)
    f.close()
    return str(tmp_path / name)


def test_blktrace_open_loop_keeps_pids_and_names(tmp_path):
    path = blk(tmp_path, [("Q", 0, 7, 0, 8), ("Q", 2, 8, 64, 8, True), ("C", 3, 0, 0, 8)])
    out, bios = run_trace(tmp_path, {"path": path})
    assert [(b.pid, b.write) for b in bios] == [(7, False), (8, True)]
    names = {pid: p.name for pid, p in out.metrics.processes.items()}
    assert names[7] == "proc7" and names[8] == "proc8"
    assert out.replays[0]["format"] == "blktrace" and out.replays[0]["events"] == "Q"


def test_closed_loop_waits_for_completion_plus_recorded_think_time(tmp_path):
    path = blk(tmp_path, [
        ("Q", 0, 1, 0, 8), ("C", 5, 0, 0, 8),
        ("Q", 7, 1, 100, 8), ("C", 8, 0, 100, 8),          # think 2 ms after completion
        ("Q", 0.5, 2, 1000, 8), ("Q", 1.5, 2, 2000, 8),    # pid 2 overlaps its requests
        ("C", 9, 0, 1000, 8), ("C", 10, 0, 2000, 8)])
    # Sort into time order as a trace is.
    raw = list(bt.iter_events(path))
    f = BlktraceFile(path + ".sorted", encode_device(8, 0))
    for e in sorted(raw, key=lambda e: (e.time, e.sequence)):
        if (e.action >> 16) & bt.TC_NOTIFY:
            f.notify_process(e.time, e.pid, e.pdu.rstrip(b"\0").decode())
        else:
            f.event(e.time, e.action, e.sector, e.bytes, e.pid)
    f.close()
    out, bios = run_trace(tmp_path, {"path": path + ".sorted", "mode": "closed"},
                          service=0.001)
    by = {(b.pid, b.sector): round(b.t_queue * 1e3, 6) for b in bios}
    assert by[(1, 0)] == 0
    # pid 1's first request takes 1 ms in the simulation, but pid 2's first one
    # arrives at 0.5 ms and queues behind it: pid 1 completes at 1 ms.
    assert by[(1, 100)] == pytest.approx(1 + 2)
    assert by[(2, 1000)] == 0.5
    assert by[(2, 2000)] == 1.5                            # issued while its first was in flight
    r = out.replays[0]
    assert r["mode"] == "closed" and "1 from recorded completions" in r["think_time"]
    assert "1 overlapped" in r["think_time"]


def blkparse_text(tmp_path, events, name="c.blkparse.txt"):
    """The same events as `blk` takes, in time order, as blkparse prints them."""
    lines = []
    for seq, (letter, t, pid, sector, n, *w) in enumerate(
            sorted(events, key=lambda e: e[1]), 1):
        rwbs = "WS" if (w and w[0]) else "R"
        tail = "[0]" if letter == "C" else f"[proc{pid}]"
        lines.append(f"  8,0    0 {seq:8d} {t / 1e3:15.9f} {pid:5d}  {letter} {rwbs:>3} "
                     f"{sector} + {n} {tail}\n")
    lines.append("CPU0 (sda):\n Reads Queued:  4,  16KiB\n")
    path = tmp_path / name
    path.write_text("".join(lines))
    return str(path)


def test_closed_loop_reads_the_completions_of_blkparse_text_as_of_a_capture(tmp_path):
    events = [("Q", 0, 1, 0, 8), ("C", 5, 0, 0, 8),
              ("Q", 7, 1, 100, 8), ("C", 8, 0, 100, 8),
              ("Q", 0.5, 2, 1000, 8), ("Q", 1.5, 2, 2000, 8),
              ("C", 9, 0, 1000, 8), ("C", 10, 0, 2000, 8)]
    text = blkparse_text(tmp_path, events)
    from blksim.traces.blkparse_text import read_blkparse
    got = [(r.pid, r.sector, r.latency) for r in read_blkparse(text, latency=True)]
    assert got == [(1, 0, pytest.approx(0.005)), (2, 1000, pytest.approx(0.0085)),
                   (2, 2000, pytest.approx(0.0085)), (1, 100, pytest.approx(0.001))]
    out, bios = run_trace(tmp_path, {"path": text, "mode": "closed"}, service=0.001)
    by = {(b.pid, b.sector): round(b.t_queue * 1e3, 6) for b in bios}
    assert by == {(1, 0): 0, (1, 100): pytest.approx(3), (2, 1000): 0.5, (2, 2000): 1.5}
    r = out.replays[0]
    assert r["format"] == "blkparse" and r["completions_recorded"]
    assert "1 from recorded completions" in r["think_time"] and "1 overlapped" in r["think_time"]


def test_closed_loop_without_completions_uses_the_recorded_gap(tmp_path):
    path = disksim(tmp_path, [(0, 0, 0, 8, 1), (10, 0, 800, 8, 1), (12, 0, 1600, 8, 1)])
    _, bios = run_trace(tmp_path, {"path": path, "mode": "closed"}, service=0.005)
    assert times_ms(bios) == [0, 15, 22]                   # completion + recorded gap
    _, bios = run_trace(tmp_path, {"path": path, "mode": "closed", "speed": 2}, service=0.005)
    assert times_ms(bios) == [0, 10, 16]


def test_closed_loop_reads_ahead_a_bounded_window(tmp_path, monkeypatch):
    monkeypatch.setattr(replay_mod, "LOOKAHEAD", 8)
    rows = [(t, 0, 8 * t, 8, 1) for t in range(200)]
    path = disksim(tmp_path, rows)
    from blksim.sim import workload
    peak = []
    orig = workload.ClosedTraceReplay._fill

    def spy(self):
        orig(self)
        peak.append(self.buffered)
    monkeypatch.setattr(workload.ClosedTraceReplay, "_fill", spy)
    out, bios = run_trace(tmp_path, {"path": path, "mode": "closed"})
    assert len(bios) == 200 and max(peak) <= 8
    assert out.replays[0]["lookahead_records"] == 8


def test_closed_loop_processes_exit_after_their_last_request(tmp_path, monkeypatch):
    from blksim.block.legacy_queue import RequestQueue
    exits = []
    orig = RequestQueue.process_exited
    monkeypatch.setattr(RequestQueue, "process_exited",
                        lambda self, pid: (exits.append(pid), orig(self, pid)))
    path = blk(tmp_path, [("Q", 0, 1, 0, 8), ("Q", 1, 2, 80, 8), ("Q", 2, 1, 160, 8)])
    run_trace(tmp_path, {"path": path, "mode": "closed"})
    assert sorted(exits) == [1, 2]


def test_blktrace_device_selection(tmp_path):
    f = BlktraceFile(tmp_path / "m.blktrace.0", encode_device(8, 0))
    f.event(0, action_value(bt.TA_QUEUE, False), 0, 4096, 1)
    f.device = encode_device(8, 16)
    f.event(1000, action_value(bt.TA_QUEUE, False), 64, 4096, 1)
    f.close()
    out, bios = run_trace(tmp_path, {"path": str(tmp_path / "m"), "device": "8,16=sdb"})
    assert [b.sector for b in bios] == [64]
    assert out.replays[0]["device"] == "8,16" and out.replays[0]["device_name"] == "sdb"


# --- configuration and the command line ----------------------------------------------

@pytest.mark.parametrize("table, message", [
    ({"mode": "loop"}, "mode = 'loop' is not supported; valid: open, closed"),
    ({"speed": 0}, "speed must be a positive number"),
    ({"remap": "fold"}, "remap = 'fold' is not supported; valid: none, wrap, scale"),
    ({"device": "sdb"}, "device: expected MAJOR,MINOR"),
    ({"device": "8,0", "volume": 2}, "give one of device, volume and devno"),
    ({"start": "5ms", "end": "2ms"}, "end .* must be after start"),
    ({"events": "C"}, "events = 'C' is not supported"),
    ({"format": "nope"}, "format 'nope' is not supported; valid: .*disksim.*blktrace"),
    ({"max_gap": "-1ms"}, "max_gap"),
])
def test_bad_trace_options_are_named(tmp_path, table, message):
    path = disksim(tmp_path, [(0, 0, 0, 8, 1)])
    with pytest.raises(ConfigError, match=message):
        make_config(traces=[{"path": path, **table}])


def test_format_is_detected(tmp_path):
    path = blk(tmp_path, [("Q", 0, 1, 0, 8)])
    assert make_config(traces=[{"path": path}]).traces[0].format == "blktrace"
    path = disksim(tmp_path, [(0, 0, 0, 8, 1)])
    assert make_config(traces=[{"path": path}]).traces[0].format == "disksim"


def test_cli_replay_flags_reach_every_trace_and_the_results(tmp_path):
    path = disksim(tmp_path, [(t, 0, 8 * t, 8, 1) for t in range(0, 100, 10)])
    cfg = tmp_path / "r.toml"
    cfg.write_text(f'[device]\nservice = "fixed"\nservice_time = "1ms"\ncapacity = "1m"\n'
                   f'[[trace]]\npath = "{path}"\n')
    out = tmp_path / "out"
    assert main(["run", str(cfg), "-q", "--out", str(out), "--speed", "2", "--max-gap", "4ms",
                 "--mode", "closed", "--max-requests", "5", "--remap", "wrap",
                 "--trace-start", "10ms"]) == 0
    res = json.loads((out / "results.json").read_text())
    r = res["replay"][0]
    assert (r["speed"], r["max_gap"], r["mode"], r["max_requests"], r["remap"], r["start"]) == \
        (2.0, 0.004, "closed", 5, "wrap", 0.01)
    assert r["requests"] == 5
    resolved = (out / "config.resolved.toml").read_text()
    assert 'mode = "closed"' in resolved and 'remap = "wrap"' in resolved
    # The resolved configuration runs again to the same results.
    out2 = tmp_path / "out2"
    assert main(["run", str(out / "config.resolved.toml"), "-q", "--out", str(out2)]) == 0
    res2 = json.loads((out2 / "results.json").read_text())
    assert res2["totals"] == res["totals"]


def test_cli_replay_flags_need_a_trace(tmp_path, capsys):
    cfg = tmp_path / "j.toml"
    cfg.write_text('[[job]]\nname = "r"\nrw = "randread"\nnumber_ios = 5\n')
    assert main(["run", str(cfg), "-q", "--speed", "2"]) == 2
    assert "--speed: trace replay options, but the configuration has no [[trace]]" in \
        capsys.readouterr().err


def test_cli_out_of_range_is_a_one_line_error(tmp_path, capsys):
    path = disksim(tmp_path, [(0, 0, 10**12, 8, 1)])
    cfg = tmp_path / "r.toml"
    cfg.write_text(f'[[trace]]\npath = "{path}"\n')
    assert main(["run", str(cfg), "-q"]) == 2
    err = capsys.readouterr().err
    assert "beyond the simulated drive" in err and "Traceback" not in err


def test_compare_writes_blktrace_per_scheduler(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[job]]\nname = "r"\nrw = "randread"\nnumber_ios = 20\n')
    assert main(["compare", str(cfg), "-q", "--schedulers", "noop,deadline",
                 "--blktrace", str(tmp_path / "bt")]) == 0
    for s in ("noop", "deadline"):
        recs = list(bt.read_blktrace(tmp_path / "bt" / s / "sda.blktrace.0"))
        assert len(recs) == 20 and recs[0].name == "r"
