"""experiments.validation.demerit: the Ruemmler & Wilkes demerit and the CDFs it reads."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.experiments.validation.demerit import (LEVELS, cdf_quantiles, demerit, demerit_from_cdfs, disksim_binned_cdf,
                         disksim_binned_demerit, sample_quantiles)

times = st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=50)


def test_levels_are_every_ten_thousandth():
    assert len(LEVELS) == 10000
    assert LEVELS[0] == pytest.approx(0.0001) and LEVELS[-1] == 1.0


@given(times)
@settings(max_examples=50, deadline=None)
def test_identical_samples_score_zero(xs):
    assert demerit(xs, list(reversed(xs))) == 0.0


@given(times, times, st.floats(-50.0, 50.0))
@settings(max_examples=50, deadline=None)
def test_a_constant_shift_scores_the_shift(xs, ys, c):
    assert demerit([x + c for x in xs], xs) == pytest.approx(abs(c), abs=1e-9)
    # shifting both moves nothing
    assert demerit([x + c for x in xs], [y + c for y in ys]) == pytest.approx(
        demerit(xs, ys), abs=1e-9)


@given(times, times, st.floats(0.001, 1000.0))
@settings(max_examples=50, deadline=None)
def test_scaling_both_scales_the_figure(xs, ys, k):
    assert demerit([k * x for x in xs], [k * y for y in ys]) == pytest.approx(
        k * demerit(xs, ys), rel=1e-9, abs=1e-9)


@given(times, times)
@settings(max_examples=50, deadline=None)
def test_symmetric(xs, ys):
    assert demerit(ys, xs) == demerit(xs, ys)


@given(times)
@settings(max_examples=50, deadline=None)
def test_sample_points_favour_neither_end(xs):
    # reflecting the sample reflects its CDF: Q_-x(p) = -Q_x(1 - p)
    q, r = sample_quantiles(xs), sample_quantiles([-x for x in xs])
    assert np.allclose(r[:-1], [-v for v in q[-2::-1]], atol=1e-9)


def test_single_samples_score_their_distance():
    assert demerit([3.0], [5.5]) == pytest.approx(2.5)


def test_hand_computed_two_against_a_tie():
    # [1, 3]: points (0.25, 1) and (0.75, 3), flat outside; [2, 2]: 2 everywhere.
    # Difference: -1 on (0, 0.25], a line from -1 to 1 on (0.25, 0.75], +1 on (0.75, 1]:
    # mean square 0.25 + 0.25 + 0.5 / 3 = 2/3.
    assert demerit([3.0, 1.0], [2.0, 2.0]) == pytest.approx(math.sqrt(2 / 3), abs=1e-4)


def test_sample_quantiles_midpoints_ties_and_clamped_ends():
    q = sample_quantiles([10.0, 20.0, 20.0, 40.0])     # points at 1/8, 3/8, 5/8, 7/8
    at = dict(zip(np.round(LEVELS, 4), q))
    assert at[0.0001] == 10.0 and at[0.125] == 10.0     # clamped below the first point
    assert at[0.25] == pytest.approx(15.0)
    assert at[0.375] == at[0.5] == at[0.625] == 20.0     # the tie: flat
    assert at[0.75] == pytest.approx(30.0)
    assert at[0.9] == at[1.0] == 40.0                    # clamped above the last point


def test_cdf_quantiles_reads_like_disksims_rms():
    # F: 0 at 0, 0.5 at 1, flat to 2, 1 at 3. At p = 0.5 the first point with F >= p is x = 1;
    # just above, the line from (2, 0.5) to (3, 1).
    q = cdf_quantiles([0.0, 1.0, 2.0, 3.0], [0.0, 0.5, 0.5, 1.0])
    assert q[2499] == pytest.approx(0.5)        # p = 0.25
    assert q[4999] == pytest.approx(1.0)        # p = 0.5
    assert q[5000] == pytest.approx(2.0002)     # p = 0.5001
    assert q[-1] == pytest.approx(3.0)


def test_cdf_quantiles_clamps_a_table_that_stops_short_of_one():
    q = cdf_quantiles([1.0, 2.0], [0.2, 0.9])
    assert q[0] == 1.0 and q[-1] == 2.0


def test_tabulated_and_sample_forms_agree_on_uniform_data():
    xs = np.arange(10000) + 0.5                 # uniform on [0, 10000]
    assert demerit_from_cdfs([0.0, 10000.0], [0.0, 1.0], [0.0, 10000.0], [0.0, 1.0]) == 0.0
    q = sample_quantiles(xs)
    assert np.allclose(q[:-1], cdf_quantiles([0.0, 10000.0], [0.0, 1.0])[:-1], atol=1e-9)
    assert q[-1] == 9999.5                      # clamped at the largest sample


def test_disksim_binning_labels_are_upper_edges():
    x, cum = disksim_binned_cdf([0.0005, 0.002, 0.002, 1.0])
    assert list(x[:5]) == [0.0, 0.001, 0.002, 0.003, 0.004]
    assert list(cum[:4]) == [0.0, 0.25, 0.25, 0.75]   # 0.0005 ms < 0.001; 0.002 < 0.003
    assert len(x) == 1750 and cum[-1] == 1.0
    # buckets grow by 1 % once past 100 us
    assert x[101] - x[100] == pytest.approx(0.002)


def test_binned_demerit_close_to_raw_for_smooth_samples():
    rng = np.random.default_rng(1)
    a, b = rng.gamma(4.0, 1.5, 5000), rng.gamma(4.0, 1.6, 5000)
    assert disksim_binned_demerit(a, b) == pytest.approx(demerit(a, b), abs=0.02)


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("nan"), 1.0],
                                 [float("inf")], [2.0, float("-inf")]])
def test_bad_samples_raise(bad):
    with pytest.raises(ValueError, match="demerit"):
        demerit(bad, [1.0])
    with pytest.raises(ValueError, match="demerit"):
        disksim_binned_demerit([1.0], bad)


@given(st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=300),
       st.lists(st.floats(0.0, 100.0), min_size=2, max_size=40))
@settings(max_examples=60, deadline=None)
def test_sample_quantiles_match_numpys_interpolation(xs, extra):
    # the pure-Python reading equals np.interp on the midpoint positions
    n = len(xs)
    expected = np.interp(LEVELS, (np.arange(n) + 0.5) / n, np.sort(xs))
    assert np.allclose(sample_quantiles(xs), expected, rtol=0, atol=1e-12)
    ys = sorted(extra)
    cum = sorted(np.linspace(0.0, 1.0, len(ys)))
    q = cdf_quantiles(ys, cum)
    assert all(ys[0] - 1e-9 <= v <= ys[-1] + 1e-9 for v in q)   # within the table
