"""A sweep's report reads as people write numbers and says what its seeds can tell: three
significant digits with thousands separated, no exponent under a million, never "± 0"
(a percentile's seeds that agree within the histogram's bucket say "binned"), and a line
per comparison saying whether the difference is larger than its interval."""

import csv
import math
import re

import pytest

from blksim.experiments.sweep import run_experiment
from blksim.experiments.sweep.definition import load_experiment
from blksim.experiments.sweep.numbers import (cell, comparison, is_percentile, resolution,
                                              sig)
from blksim.experiments.sweep.summary import mean_interval

EXPERIMENT = """\
[experiment]
name = "tiny"
schedulers = ["noop", "cfq"]
seeds = 3
figure = "totals.read.iops"
figure_label = "read IOPS"

[run]
duration = "1s"
[device]
drive = "cheetah15k4"
[[job]]
name = "r"
rw = "randread"
bs = "8k"
numjobs = 4
"""


def test_numbers_are_written_as_people_write_them():
    assert sig(3656.2) == "3,660" and sig(1712.0, 2) == "1,700"
    assert sig(25.134) == "25.1" and sig(0.8612, 2) == "0.86" and sig(0.000123456) == "0.000123"
    assert sig(999.7) == "1,000" and sig(9.996) == "10.0" and sig(-42.42) == "-42.4"
    assert sig(987_654.3) == "988,000"          # no exponent under a million
    assert sig(1_234_567.0) == "1.23e+06"
    assert sig(0) == "0" and sig(None) == "-" and sig(math.nan) == "-"


def test_a_cell_never_reads_plus_or_minus_zero():
    assert cell(3600.0, 1712.0, 3) == "3,600 ± 1,700"
    assert cell(46.8, 0.0, 3, binned=True) == "46.8 ± 0.18 (binned)"   # 0.39 % of 46.8
    assert cell(46.8, 0.05, 3, binned=True) == "46.8 ± 0.18 (binned)"
    assert cell(46.8, 8.6, 3, binned=True) == "46.8 ± 8.6"
    assert cell(12.0, 0.0, 3) == "12.0 (same in every seed)"
    assert cell(12.0, 0.0, 1) == "12.0" and cell(math.nan, math.nan, 0) == "-"
    # the resolution: half a 0.78 % bucket, or half a unit in the third digit
    assert resolution(46.8) == pytest.approx(46.8 * 2 ** -8)
    assert resolution(100.0) == pytest.approx(0.5)
    assert is_percentile("q2c_p99_ms") and is_percentile("apps.db.response_ms.p95")
    assert is_percentile("totals.all.q2c.p95_ms")
    assert not is_percentile("q2c_mean_ms") and not is_percentile("apps.pg.tps")


def test_a_comparison_says_whether_the_difference_is_larger_than_its_interval():
    base, other = [100.0, 101.0, 99.0], [123.0, 124.0, 122.0]
    line = comparison("deadline", "cfq", other, base)
    # difference +23 %; Welch's t (df 4, 2.776) * sqrt(1/3 + 1/3) = 2.27 -> ±2.3 %
    assert line == "deadline vs cfq: +23 % (interval ±2.3 %): larger than its interval"
    close = comparison("noop", "cfq", [100.5, 103.0, 98.0], base)
    assert "within its interval" in close and "--seeds" in close
    # the seeds needed scale as (interval / difference)^2: 1.2 x 3 x (5.0 / 0.5)^2 = 360
    assert re.search(r"about (\d+) seeds", close) and "--scale above 1" in close
    # percentiles whose seeds agree within a bucket: the interval is the binning's, said
    binned = comparison("noop", "cfq", [47.0] * 3, [46.8] * 3, binned=True)
    assert binned.startswith("noop vs cfq: +0.43 % (interval ±0.78 %, binned): within")
    assert "binned" not in comparison("noop", "cfq", other, base, binned=True)
    one = comparison("noop", "cfq", [1.0], [2.0])
    assert "one seed" in one and "--seeds 3" in one
    tiny = comparison("noop", "cfq", [100.01, 103.0, 97.0], base, scale=0.02)
    assert "more seeds than practical" in tiny and "--scale 0.02" in tiny


def _number(text: str) -> tuple:
    """A printed number and half a unit in its last printed digit."""
    text = text.replace(",", "")
    decimals = len(text.split(".")[1]) if "." in text else 0
    return float(text), 0.5 * 10.0 ** -decimals


def test_the_report_parses_back_to_the_summary(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(EXPERIMENT)
    paths = run_experiment(load_experiment(path), tmp_path / "out")
    report = open(paths["report"], encoding="utf-8").read()
    with open(paths["summary"], encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    table = [line for line in report.splitlines() if line.startswith("| base |")]
    heads = [h.strip() for h in report.splitlines()[
        report.splitlines().index(next(line for line in report.splitlines()
                                       if line.startswith("| variant |")))].split("|")[3:-1]]
    columns = {"read IOPS": "figure", "MB/s": "mb_per_s", "Q2C mean (ms)": "q2c_mean_ms",
               "Q2C p99 (ms)": "q2c_p99_ms"}
    assert heads == list(columns) and len(table) == 2
    checked = 0
    for line in table:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        sched = cells[1]
        for head, text in zip(heads, cells[2:]):
            values = [float(r[columns[head]]) for r in rows if r["scheduler"] == sched]
            mean, half = mean_interval(values)
            m = re.fullmatch(r"([-\d,.]+) ± ([\d,.]+)( \(binned\))?", text)
            assert m, text
            printed, unit = _number(m.group(1))
            assert abs(printed - mean) <= unit * 1.0001, (head, sched, text, mean)
            width, wunit = _number(m.group(2))
            if m.group(3):          # binned: the seeds agree within the histogram
                assert half < resolution(mean) and is_percentile(columns[head])
                assert abs(width - resolution(mean)) <= wunit * 1.0001
            else:
                assert abs(width - half) <= wunit * 1.0001, (head, sched, text, half)
            checked += 1
    assert checked == 8
    # nothing reads as certainty or as an exponent under a million
    assert not re.search(r"± ?0(\.0+)?(?![\d.])", report)
    for number in re.findall(r"\d[\d,.]*e[+-]?\d+", report):
        assert abs(float(number.replace(",", ""))) >= 1e6, number
    # and the difference's line, in report.md and for the terminal
    lines = [line for line in report.splitlines() if line.startswith("- cfq vs noop: ")]
    assert len(lines) == 1 and ("larger than its interval" in lines[0]
                                or "within its interval" in lines[0])
    assert paths["comparisons"] == lines
