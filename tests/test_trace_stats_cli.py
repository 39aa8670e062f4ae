"""traces.stats and ``blksim trace stats|convert`` (cli/trace.py)."""

import argparse
import json
import os
import random
from pathlib import Path

import pytest

from blksim.cli.trace import add_trace_commands, handle
from blksim.traces.detect import open_trace
from blksim.traces.records import TraceError, TraceRecord
from blksim.traces.stats import Footprint, LogHistogram, TraceStats, measure_parse_speed

BLKPARSE = ("  8,0 0 1 0.000000000 10 Q W 0 + 8 [a]\n"
            "  8,0 0 2 0.001000000 10 Q W 8 + 8 [a]\n"
            "  8,0 0 3 0.002000000 20 Q R 1000 + 16 [b]\n"
            "  8,0 0 4 0.004000000 10 Q W 16 + 8 [a]\n"
            "  8,16 0 5 0.008000000 20 Q R 4096 + 8 [b]\n")


def run(argv):
    parser = argparse.ArgumentParser(prog="blksim")
    sub = parser.add_subparsers(dest="command")
    add_trace_commands(sub)
    return handle(parser.parse_args(argv))


def test_stats_figures():
    recs = [TraceRecord(t, d, s, n, w, p) for t, d, s, n, w, p in (
        (0.0, 0, 0, 8, True, 1), (0.001, 0, 8, 8, True, 1), (0.002, 0, 1000, 16, False, 2),
        (0.004, 0, 16, 8, True, 1), (0.008, 1, 4096, 8, False, 2))]
    s = TraceStats().add_all(recs).summary()
    assert s["requests"] == 5 and s["reads"] == 2 and s["write_pct"] == 60.0
    assert s["bytes_written"] == 24 * 512 and s["bytes_read"] == 24 * 512
    assert s["size_p50_bytes"] == 4096 and s["size_max_bytes"] == 8192
    assert s["size_top"][0] == (4096, 4)
    assert s["duration_s"] == 0.008
    assert s["interarrival_mean_s"] == pytest.approx(0.002)
    assert s["sequential_pct"] == 40.0          # 8 after 0, 16 after 8 (pid 1, device 0)
    assert s["footprint_mib"] == 2              # device 0 MiB 0, device 1 MiB 2
    assert s["devices"] == 2 and s["processes"] == 2


def test_log_histogram_percentiles_within_one_percent():
    rng = random.Random(1)
    values = [rng.expovariate(1000.0) for _ in range(20000)]
    h = LogHistogram()
    for v in values:
        h.add(v)
    values.sort()
    for p in (50, 90, 99):
        exact = values[int(p / 100 * len(values)) - 1]
        assert h.percentile(p) == pytest.approx(exact, rel=0.015)
    assert h.mean() == pytest.approx(sum(values) / len(values))


def test_footprint_switches_to_an_estimate_within_a_few_percent():
    f = Footprint(bound=1000)
    for k in range(50_000):
        f.add(3 * k)                     # disjoint units: one range each
        f.add(3 * k)
    assert f.estimated
    assert f.count() == pytest.approx(50_000, rel=0.03)
    small = Footprint()
    for k in (1, 2, 2, 3):
        small.add(k)
    assert small.count() == 3 and not small.estimated


def test_footprint_counts_ranges_exactly_whatever_their_size():
    f = Footprint(bound=10)
    f.add_range(0, 0, (1 << 53) - 1)             # a request over 2^64 bytes' worth of units
    f.add_range(0, 5, 9)                         # inside it
    f.add_range(1, 5, 9)                         # another device
    f.add_range(0, 1 << 53, (1 << 53) + 1)       # adjacent: merges
    assert not f.estimated and f.count() == (1 << 53) + 2 + 5
    g = Footprint(bound=2)
    for first in (0, 100, 200):                  # three disjoint ranges: estimate
        g.add_range(0, first, first + 9)
    g.add_range(0, 1000, 1000 + 10_000)          # a long range: bounded work
    assert g.estimated and g.count() == pytest.approx(30 + 10_001, rel=0.03)


def test_stats_of_a_huge_request_is_immediate(tmp_path):
    path = tmp_path / "one.trace"
    path.write_text("0.0\t0\t0\t1099511627776\t1\n0.5\t0\t18446744073709551000\t4096\t0\n")
    stats = TraceStats().add_all(open_trace(path)).summary()
    last = 18446744073709551000
    tail_units = (last + 4096 - 1) // 2048 - last // 2048 + 1       # 3 MiB units
    assert stats["footprint_mib"] == (1099511627776 >> 11) + tail_units
    assert not stats["footprint_estimated"]


def test_cli_stats(tmp_path, capsys):
    path = tmp_path / "t.txt"
    path.write_text(BLKPARSE)
    assert run(["trace", "stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"trace           {path} (format blkparse)" in out
    assert "requests        5 (reads 40.0 %, writes 60.0 %)" in out
    assert "p50 4 KiB" in out and "40.0 % of requests" in out
    assert "processes       2: 10 a (3), 20 b (2)" in out


def test_cli_stats_json_and_skip(tmp_path, capsys):
    path = tmp_path / "t.txt"
    path.write_text(BLKPARSE + "junk\n")
    assert run(["trace", "stats", str(path), "--json", "--skip-bad-lines"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["requests"] == 5 and data["skipped_lines"] == 1 and data["format"] == "blkparse"
    assert "skipped 1 malformed line (first: " in captured.err
    with pytest.raises(TraceError, match=r"t\.txt:6: device expected"):
        run(["trace", "stats", str(path)])


def test_cli_convert_and_errors(tmp_path, capsys):
    src = tmp_path / "t.txt"
    src.write_text(BLKPARSE)
    out = tmp_path / "t.trace"
    assert run(["trace", "convert", str(src), str(out), "--to", "disksim"]) == 0
    assert "wrote 5 requests" in capsys.readouterr().err
    back = list(open_trace(out, "disksim"))
    assert [r.sector for r in back] == [0, 8, 1000, 16, 4096]
    out_ns = tmp_path / "ns.trace"
    run(["trace", "convert", str(src), str(out_ns), "--to", "disksim", "--out-time-unit", "ns"])
    assert out_ns.read_text().splitlines()[1].startswith("1000000\t")
    with pytest.raises(TraceError, match="--to: expected one of"):
        run(["trace", "convert", str(src), str(out), "--to", "nope"])
    with pytest.raises(TraceError, match="block_size: not an option of trace format blkparse"):
        run(["trace", "convert", str(src), str(out), "--to", "fio", "--block-size", "4096"])


def test_cli_convert_bad_input_leaves_nothing(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text(BLKPARSE + "junk\n")
    out = tmp_path / "o.log"
    with pytest.raises(TraceError):
        run(["trace", "convert", str(src), str(out), "--to", "fio", "--format", "blkparse"])
    assert sorted(os.listdir(tmp_path)) == ["t.txt"]


def test_parse_speed_function_runs(tmp_path):
    result = measure_parse_speed(lines=3000, directory=str(tmp_path))
    assert set(result) == {"msr", "spc", "alibaba", "tencent", "blkparse", "blkparse-q"}
    assert result["msr"]["records"] == 3000 and result["blkparse-q"]["records"] == 3000
    assert all(result[f]["records"] == 3000 for f in ("spc", "alibaba", "tencent"))
    assert result["blkparse"]["records"] == 600
    assert all(r["lines_per_s"] > 0 for r in result.values())
    assert os.listdir(tmp_path) == []
