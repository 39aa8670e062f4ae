"""The streaming histogram: percentiles within 1 % of the exact ones, constant memory."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from blksim.common.histogram import StreamingHistogram


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1e-7, max_value=50.0, allow_nan=False), min_size=1,
                max_size=400),
       st.sampled_from([1, 10, 50, 90, 95, 99, 99.9]))
def test_percentile_within_one_percent_of_nearest_rank(values, p):
    h = StreamingHistogram()
    for v in values:
        h.add(v)
    exact = float(np.percentile(values, p, method="inverted_cdf"))
    assert math.isclose(h.percentile(p), exact, rel_tol=0.01)


def test_count_mean_min_max_are_exact():
    h = StreamingHistogram()
    values = [0.001, 0.002, 0.0035, 0.5]
    for v in values:
        h.add(v)
    s = h.summary()
    assert s["count"] == 4
    assert math.isclose(s["mean"], sum(values) / 4)
    assert s["min"] == 0.001 and s["max"] == 0.5


def test_memory_does_not_grow_with_samples():
    h = StreamingHistogram()
    size = len(h.counts)
    rng = np.random.default_rng(3)
    for v in rng.exponential(0.01, 20000):
        h.add(float(v))
    assert len(h.counts) == size


def test_merge_equals_adding_everything():
    a, b, both = StreamingHistogram(), StreamingHistogram(), StreamingHistogram()
    for i, v in enumerate(np.random.default_rng(1).exponential(0.005, 2000)):
        (a if i % 2 else b).add(float(v))
        both.add(float(v))
    a.merge(b)
    assert np.array_equal(a.counts, both.counts) and a.n == both.n
    assert math.isclose(a.total, both.total)


def test_zero_and_empty():
    h = StreamingHistogram()
    assert h.percentile(50) == 0.0 and h.mean == 0.0
    h.add(0.0)
    assert h.percentile(50) == 0.0 and h.summary()["max"] == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.just(0.0), st.floats(min_value=1e-12, max_value=1e-6)),
                min_size=1, max_size=200),
       st.sampled_from([1, 50, 95, 99]))
def test_percentile_among_values_at_or_below_a_nanosecond(values, p):
    # the lowest bucket (values up to 1 ns) reports its smallest value, within 1 ns of
    # the exact percentile; zeros stay 0
    h = StreamingHistogram()
    for v in values:
        h.add(v)
    exact = float(np.percentile(values, p, method="inverted_cdf"))
    assert math.isclose(h.percentile(p), exact, rel_tol=0.01, abs_tol=1e-9)
    if exact == 0.0:
        assert h.percentile(p) == 0.0


def test_percentile_of_mostly_zeros_is_zero():
    # e.g. Q2D when most requests are dispatched the instant they are queued
    h = StreamingHistogram()
    for v in [0.0] * 60 + [0.004] * 40:
        h.add(v)
    assert h.percentile(50) == 0.0
    assert math.isclose(h.percentile(95), 0.004, rel_tol=0.01)


def test_batched_adds_match_single_adds():
    values = np.random.default_rng(7).lognormal(-6, 2, 5000)
    one, many = StreamingHistogram(), StreamingHistogram()
    for v in values:
        one.add(float(v))
    many.add_many(values)
    assert np.array_equal(one.counts, many.counts)
    assert one.n == many.n and one.lo == many.lo and one.hi == many.hi
    assert math.isclose(one.total, many.total, rel_tol=1e-12)
