"""The validation study: the closed-loop replay, validate_drive, and the ``validate`` command."""

import argparse
import re
import time

import pytest

from blksim.disk_models.base import DeviceError
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.experiments.validation import study as val
from blksim.experiments.validation.study import ValidationError, replay_validate, validate_drive
from blksim.cli.validate import add_validate_command, handle_validate
from blksim.traces.disksim_ascii import TraceError
from blksim.traces.disksim_validate import ValidateRecord

TINY = """\
R Miss  1000  8  5000.0  2000.0
R Hit   1008  8   500.0     0.0
W Miss 900000 16 9000.0 10000.0
R Miss  50000  4  7000.0   500.0
W Miss  51000  4  6500.0     0.0
"""


class Recording(ServiceLawDevice):
    """A fixed-service device that notes when each request was submitted."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.issued = []

    def submit(self, rq, now):
        self.issued.append((now, rq.sector, rq.nr_sectors, rq.write))
        super().submit(rq, now)


def rec(sector, delay_s, write=False, n=8):
    return ValidateRecord(write, "Miss", sector, n, 0.005, delay_s)


def test_closed_loop_issues_each_request_its_predecessors_delay_after_completion():
    dev = Recording("fixed", 0.002)
    records = [rec(10, 0.001), rec(20, 0.005, write=True), rec(30, 0.0), rec(40, 0.003)]
    times = replay_validate(dev, records)
    assert times == pytest.approx([0.002] * 4)
    assert [t for t, *_ in dev.issued] == pytest.approx([0.0, 0.003, 0.010, 0.012])
    assert [(s, n, w) for _, s, n, w in dev.issued] == [
        (10, 8, False), (20, 8, True), (30, 8, False), (40, 8, False)]
    assert dev.outstanding() == 0


def test_response_times_follow_the_device():
    dev = ServiceLawDevice("exponential", 0.004, seed=5)
    ref = ServiceLawDevice("exponential", 0.004, seed=5)
    times = replay_validate(dev, [rec(i, 0.01) for i in range(200)])
    assert times == pytest.approx([ref._draw() for _ in range(200)])


def test_a_busy_device_is_refused():
    dev = ServiceLawDevice("fixed", 0.002)
    dev.submit(val.ValidateRequest(0, 8, False), 0.0)
    with pytest.raises(ValidationError, match="idle"):
        replay_validate(dev, [rec(0, 0.0)])


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.trace"
    path.write_text(TINY)
    return path


def test_validate_drive_on_a_preset(tiny):
    r = validate_drive("cheetah15k4", tiny, seed=3)
    assert (r.drive, r.trace, r.n) == ("cheetah15k4", "tiny.trace", 5)
    assert r.meas_mean_ms == pytest.approx((5 + 0.5 + 9 + 7 + 6.5) / 5)
    assert r.sim_mean_ms == pytest.approx(sum(r.sim_ms) / len(r.sim_ms)) and r.sim_mean_ms > 0
    assert r.mean_error_pct == pytest.approx(100 * (r.sim_mean_ms / r.meas_mean_ms - 1))
    assert r.demerit_ms > 0 and r.demerit_binned_ms > 0
    assert r.disksim_demerit_ms is None and r.beats_disksim is None and not r.calibration
    again = validate_drive("cheetah15k4", tiny, seed=3)
    assert list(again.sim_ms) == list(r.sim_ms)             # reproducible


def test_a_request_beyond_the_drive_is_an_error(tmp_path):
    path = tmp_path / "big.trace"
    path.write_text("R Miss 0 8 5000 0\nR Miss 71687370 8 5000 0\n")
    with pytest.raises(ValidationError, match=r"big.trace: request 2 .* beyond cheetah15k4"):
        validate_drive("cheetah15k4", path)


def test_unknown_drive_lists_presets(tiny):
    with pytest.raises(DeviceError, match="valid presets are: .*cheetah15k4"):
        validate_drive("nosuchdrive", tiny)


def test_missing_trace_is_one_line(tmp_path):
    with pytest.raises(ValidationError, match="no such trace file") as exc:
        validate_drive("cheetah15k4", tmp_path / "absent.trace")
    assert "\n" not in str(exc.value)


def test_malformed_trace_names_file_and_line(tmp_path):
    path = tmp_path / "bad.trace"
    path.write_text("R Miss 0 8 5000 0\nR Miss 8 eight 5000 0\n")
    with pytest.raises(TraceError, match=r"bad.trace:2: size"):
        validate_drive("cheetah15k4", path)


def test_an_empty_trace_is_an_error(tmp_path):
    path = tmp_path / "empty.trace"
    path.write_text("\n")
    with pytest.raises(ValidationError, match="no requests"):
        validate_drive("cheetah15k4", path)


def test_ten_thousand_requests_in_under_a_second(tmp_path):
    import random
    rnd = random.Random(7)
    path = tmp_path / "10k.trace"
    path.write_text("".join(
        f"{rnd.choice('RW')} Miss {rnd.randrange(0, 17_000_000)} {rnd.choice((2, 8, 16, 64))} "
        f"{rnd.uniform(500, 15000):.3f} {rnd.uniform(0, 50000):.3f}\n" for _ in range(10000)))
    start = time.perf_counter()
    r = validate_drive("cheetah15k4", path)
    assert time.perf_counter() - start < 1.0
    assert r.n == 10000


# ---------------------------------------------------------------------- command line

def parse(argv):
    parser = argparse.ArgumentParser(prog="blksim")
    add_validate_command(parser.add_subparsers(dest="command"))
    return parser.parse_args(["validate", *argv])


def test_cli_prints_the_table_and_draws_the_plot(tiny, tmp_path, capsys):
    plot = tmp_path / "cdf.png"
    assert handle_validate(parse(["cheetah15k4", str(tiny), "--plot", str(plot), "--seed", "2"])) == 0
    out = capsys.readouterr().out
    for words in ("cheetah15k4 on tiny.trace", "5 requests", "simulated", "measured",
                  "mean (ms)", "std. dev. (ms)", "mean error (%)", "demerit (ms)", "seed 2"):
        assert words in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_cli_plot_formats_and_unwritable_paths(tiny, tmp_path):
    with pytest.raises(ValidationError, match=r"\.xyz"):
        handle_validate(parse(["cheetah15k4", str(tiny), "--plot", str(tmp_path / "a.xyz")]))
    with pytest.raises(ValidationError, match="cannot write the plot"):
        handle_validate(parse(["cheetah15k4", str(tiny), "--plot",
                               str(tmp_path / "no" / "dir" / "a.png")]))


@pytest.mark.parametrize("argv, message", [
    (["cheetah15k4"], "needs DRIVE and TRACE"),
    ([], "needs DRIVE and TRACE"),
    (["--all", "cheetah15k4"], "--all takes no DRIVE"),
    (["cheetah15k4", "x.trace", "--plot-dir", "d"], "--plot-dir goes with --all"),
])
def test_cli_argument_errors(argv, message):
    with pytest.raises(ValidationError, match=message):
        handle_validate(parse(argv))


@pytest.fixture
def fake_set(tmp_path, monkeypatch):
    """A validation folder whose only drive is cheetah15k4, plus one without a preset."""
    folder = tmp_path / "validation" / "disksim" / "traces"
    folder.mkdir(parents=True)
    (folder / "cheetah15k4.trace").write_text(TINY)
    (folder / "nopreset.trace").write_text(TINY)
    monkeypatch.setenv(val.ENV_DIR, str(tmp_path / "validation"))
    monkeypatch.setattr(val, "load_scores", lambda: {
        "cheetah15k4": {"disksim_demerit_ms": 0.5, "calibration": True},
        "nopreset": {"disksim_demerit_ms": 0.2, "calibration": False},
        "notrace": {"disksim_demerit_ms": 0.2, "calibration": False}})
    return tmp_path


def test_cli_all_runs_the_drives_with_presets(fake_set, capsys):
    plots = fake_set / "plots"
    assert handle_validate(parse(["--all", "--plot-dir", str(plots)])) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("cheetah15k4"))
    fields = line.split()
    # DiskSim's mean error and its raw-times demerit: "-" where its scores give none
    assert fields[1] == "5" and fields[5] == "-" and fields[7] == "-" and fields[11] == "yes"
    # with only DiskSim's published (binned) figure, the verdict is on the binned ruler
    assert fields[9] == "0.500" and fields[10] == ("<=" if float(fields[8]) <= 0.5 else ">")
    # the class with the largest share of the squared error, and the mean over the drives
    assert fields[12] in ("R", "W") and line.endswith("%)")
    mean = next(l for l in out.splitlines() if l.startswith("mean")).split()
    assert mean[1:5] == fields[6:10] and mean[5] == fields[10]
    assert "skipped nopreset: no preset" in out and "skipped notrace: no trace" in out
    assert [p.name for p in plots.iterdir()] == ["cheetah15k4.png"]


def test_trace_stem_resolves_in_the_validation_folder(fake_set, capsys):
    assert handle_validate(parse(["cheetah15k4", "cheetah15k4"])) == 0
    out = capsys.readouterr().out
    assert "cheetah15k4 on cheetah15k4.trace" in out
    assert "DiskSim 4.0 published (ms)" in out         # from the (patched) scores


def test_a_data_folder_without_the_data_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setenv(val.ENV_DIR, str(tmp_path / "absent"))
    with pytest.raises(ValidationError, match=rf"^\${val.ENV_DIR} .*absent: no DiskSim "
                                              r"validation data there \(expected traces/"):
        handle_validate(parse(["--all"]))
    monkeypatch.delenv(val.ENV_DIR)
    with pytest.raises(ValidationError, match=r"^--data .*empty: no DiskSim validation data"):
        handle_validate(parse(["--all", "--data", str(tmp_path / "empty")]))


def test_data_option_names_a_folder_of_ones_own(fake_set, monkeypatch, capsys):
    monkeypatch.delenv(val.ENV_DIR)
    assert handle_validate(parse(["cheetah15k4", "cheetah15k4",
                                  "--data", str(fake_set / "validation")])) == 0
    assert "cheetah15k4 on cheetah15k4.trace" in capsys.readouterr().out


def test_without_a_data_folder_the_shipped_set_is_used(monkeypatch):
    from blksim.disk_models.disksim.validation_set import DRIVES, shipped_folder
    monkeypatch.delenv(val.ENV_DIR, raising=False)
    folder = val.validation_dir()
    assert folder == shipped_folder()
    assert sorted(p.stem for p in (folder / "traces").glob("*.trace")) == sorted(DRIVES)
    assert val.resolve_trace("cheetah9LP") == folder / "traces" / "cheetah9LP.trace"


def test_scores_file_lists_the_ten_drives():
    scores = val.load_scores()
    assert len(scores) == 10
    assert {k for k, v in scores.items() if v["calibration"]} == {
        "cheetah9LP", "hp_c2247a", "atlas10k", "hp_c3323a"}
    assert scores["atlas10k"]["disksim_demerit_ms"] == 0.268
    for stem, s in scores.items():
        # DiskSim's demerit from its raw times: binning moves it by hundredths at most
        assert abs(s["disksim_exact_demerit_ms"] - s["disksim_demerit_ms"]) < 0.02, stem


def _result(raw, disksim_raw, binned, disksim_binned):
    return val.ValidationResult(
        drive="d", trace="t", n=1, sim_mean_ms=1.0, sim_std_ms=0.0, meas_mean_ms=1.0,
        meas_std_ms=0.0, mean_error_pct=0.0, demerit_ms=raw,
        disksim_demerit_ms=disksim_binned, demerit_binned_ms=binned,
        disksim_exact_demerit_ms=disksim_raw)


def test_blksim_beats_disksim_only_on_every_ruler_disksim_has_a_figure_for():
    assert _result(0.30, 0.31, 0.30, 0.31).beats_disksim is True
    # under DiskSim's published (binned) figure on the raw ruler only: not like for like
    assert _result(0.30, 0.29, 0.28, 0.31).beats_disksim is False
    assert _result(0.30, 0.31, 0.32, 0.31).beats_disksim is False
    assert _result(0.30, None, 0.30, 0.31).beats_disksim is True     # binned ruler alone
    assert _result(0.30, None, 0.30, None).beats_disksim is None


def test_drive_table_puts_each_disksim_figure_beside_blksims_on_its_ruler():
    from blksim.experiments.validation.report import result_table
    out = result_table(_result(0.341, 0.344, 0.338, 0.340))
    assert re.search(r"demerit \(ms\) +0\.341\nDiskSim 4\.0 demerit \(ms\) +0\.344  "
                     r"\(blksim <= DiskSim\)\nbinned as DiskSim \(ms\) +0\.338\n"
                     r"DiskSim 4\.0 published \(ms\) +0\.340  \(blksim <= DiskSim\)", out)
    out = result_table(_result(0.341, 0.344, 0.342, 0.340))
    assert "0.340  (blksim > DiskSim)" in out



def test_class_figures_share_the_squared_error():
    from blksim.experiments.validation.study import class_figures, request_classes
    from blksim.traces.disksim_validate import ValidateRecord
    recs = [ValidateRecord(False, "Hit", 0, 8, 0.01, 0.0), ValidateRecord(False, "Hit", 8, 8,
                                                                          0.01, 0.0),
            ValidateRecord(True, "Hit", 100, 8, 0.01, 0.0)]
    classes = request_classes(recs, [False, True, None])
    assert classes == ["R miss rand", "R hit seq", "W Hit rand"]
    figs = class_figures(["a", "a", "b", "b"], [1.0, 2.0, 5.0, 5.0], [1.0, 2.0, 4.0, 4.0])
    assert figs["a"]["demerit_ms"] == 0.0 and figs["b"]["demerit_ms"] == 1.0
    assert figs["b"]["share"] == 1.0 and figs["a"]["share"] == 0.0
