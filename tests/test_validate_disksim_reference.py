"""Against DiskSim's validation set, as it ships with blksim.

1. The demerit (experiments/validation/demerit.py) applied to DiskSim's own binned CDFs (reference-outputs/*.outv) gives the
   demerit figures experiments/validation/disksim_scores.toml quotes for DiskSim 4.0.
2. Its DiskSim binning reproduces DiskSim's printed measured distribution from the
   trace's raw measured times.
3. Each calibration drive: blksim's demerit at or under DiskSim's, mean within 1 %.
"""

import numpy as np
import pytest

from blksim.disk_models.presets import list_presets
from blksim.experiments.validation import study as val
from blksim.experiments.validation.demerit import demerit_from_cdfs, disksim_binned_cdf
from blksim.experiments.validation.disksim_outv import (MEASURED, SIMULATED, OutvError,
                                                       read_average, read_distribution)
from blksim.traces.disksim_validate import read_disksim_validate

SCORES = val.load_scores()
CALIBRATION = [stem for stem, s in SCORES.items() if s["calibration"]]


@pytest.fixture(scope="module")
def folder():
    return val.validation_dir()


@pytest.mark.parametrize("stem", list(SCORES))
def test_disksims_demerit_recomputed_from_its_binned_cdfs(folder, stem):
    outv = folder / "reference-outputs" / f"{stem}.outv"
    sim = read_distribution(outv, SIMULATED)
    meas = read_distribution(outv, MEASURED)
    # the published figures have 3 decimals; the recomputation lands within 0.0011 ms of each
    assert demerit_from_cdfs(*sim, *meas) == pytest.approx(
        SCORES[stem]["disksim_demerit_ms"], abs=0.0015)


@pytest.mark.parametrize("stem", list(SCORES))
def test_disksims_means_read_from_its_output(folder, stem):
    outv = folder / "reference-outputs" / f"{stem}.outv"
    assert read_average(outv, "IOdriver Physical access time") == pytest.approx(
        SCORES[stem]["disksim_mean_ms"], abs=0.0005)
    assert read_average(outv, "VALIDATE Trace access time") == pytest.approx(
        SCORES[stem]["measured_mean_ms"], abs=0.0005)


@pytest.mark.parametrize("stem", list(SCORES))
def test_binning_reproduces_disksims_measured_distribution(folder, stem):
    raw = [r.measured * 1e3 for r in read_disksim_validate(folder / "traces" / f"{stem}.trace")]
    assert len(raw) == SCORES[stem]["requests"]
    assert np.mean(raw) == pytest.approx(SCORES[stem]["measured_mean_ms"], abs=0.0005)
    x, cum = read_distribution(folder / "reference-outputs" / f"{stem}.outv", MEASURED)
    bx, bcum = disksim_binned_cdf(raw)
    assert np.array_equal(np.asarray(x), bx[:len(x)])
    diff = np.abs(np.asarray(cum) - bcum[:len(cum)])
    # DiskSim truncates v_ms * 1000 in floating point, so an exact whole-microsecond time
    # now and then lands one bucket low (atlas10k: one row off by 0.0025); rows print 6 decimals
    assert diff.max() <= 0.003 and diff.mean() < 1e-5


def test_outv_reader_names_what_is_missing(tmp_path):
    path = tmp_path / "x.outv"
    path.write_text("nothing here\n")
    with pytest.raises(OutvError, match="no line 'VALIDATE Trace access time distribution'"):
        read_distribution(path, MEASURED)
    path.write_text(MEASURED + "\n 0.000 zero 0.0 0.0\n")
    with pytest.raises(OutvError, match="x.outv:2: expected"):
        read_distribution(path, MEASURED)
    with pytest.raises(OutvError, match="no line 'IOdriver Physical access time average:'"):
        read_average(path, "IOdriver Physical access time")
    path.write_text("IOdriver Physical access time average: \tn/a\n")
    with pytest.raises(OutvError, match="x.outv:1: expected a number"):
        read_average(path, "IOdriver Physical access time")


# calibration drives not at their targets yet, with what is missing (xfail); none today
_NOT_YET: dict = {}
CALIBRATION_CASES = [
    pytest.param(stem, marks=pytest.mark.xfail(strict=False, reason=_NOT_YET[stem]))
    if stem in _NOT_YET else stem for stem in CALIBRATION]


@pytest.mark.parametrize("stem", CALIBRATION_CASES)
def test_calibration_drive_at_or_under_disksim(folder, stem):
    if stem not in list_presets():
        pytest.skip(f"no preset {stem!r} yet")
    r = val.validate_drive(stem, folder / "traces" / f"{stem}.trace")
    s = SCORES[stem]
    # at or under DiskSim on both rulers: raw times, and binned as DiskSim publishes
    assert r.demerit_ms <= s["disksim_exact_demerit_ms"], r
    assert r.demerit_binned_ms <= s["disksim_demerit_ms"], r
    assert abs(r.mean_error_pct) <= 1.0, r
    assert r.disksim_error_pct == pytest.approx(
        100 * (s["disksim_mean_ms"] - s["measured_mean_ms"]) / s["measured_mean_ms"])
