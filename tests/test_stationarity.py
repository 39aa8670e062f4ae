"""The steady-state check (blksim.common.stationarity): its series and its test, on
synthetic series whose answer is known."""

import random

import numpy as np
from hypothesis import given, settings, strategies as st

from blksim.common.stationarity import (
    IntervalSeries, MIN_BATCHES, analyse, mser_truncation, series_report, t_quantile)


def ar1(n, phi, sd, rng):
    """A stationary AR(1) series of mean 0 (started from its stationary law)."""
    x = rng.gauss(0.0, sd / (1 - phi * phi) ** 0.5)
    out = []
    for _ in range(n):
        x = phi * x + rng.gauss(0.0, sd)
        out.append(x)
    return out


def test_t_quantiles_match_the_tables():
    # two-sided 95 %: 12.706 (1), 2.228 (10), 2.042 (30); 99 %: 3.169 (10)
    assert abs(t_quantile(0.95, 1) - 12.706) < 1e-3
    assert abs(t_quantile(0.95, 10) - 2.228) < 1e-3
    assert abs(t_quantile(0.95, 30) - 2.042) < 1e-3
    assert abs(t_quantile(0.99, 10) - 3.169) < 1e-3


def test_a_stationary_ar1_is_rarely_flagged():
    # 100 seeds of an AR(1) (phi 0.5) around 100: the test's level is 5 %, and the
    # drift tolerance only lowers it; allow up to 10 % for the seeds' luck
    flagged = 0
    for seed in range(100):
        v = [100.0 + e for e in ar1(128, 0.5, 5.0, random.Random(seed))]
        flagged += analyse(v, [1] * len(v), 1.0, True)["verdict"] == "drifts"
    assert flagged <= 10


def test_a_strongly_correlated_series_is_merged_not_flagged():
    # phi = 0.9 on 1-s intervals: 32 batches of 4 s are correlated, the check doubles
    # them (or gives no verdict); the window holds only about 7 correlation times, so
    # allow a few more seeds flagged than the level
    flagged = 0
    for seed in range(40):
        v = [100.0 + e for e in ar1(128, 0.9, 2.0, random.Random(seed))]
        r = analyse(v, [1] * len(v), 1.0, True)
        flagged += r["verdict"] == "drifts"
    assert flagged <= 5


def test_a_linear_trend_is_flagged_and_its_drift_estimated():
    # a rate that rises by 10 % of its mean over the window, with AR(1) noise
    hits, inside = 0, 0
    for seed in range(30):
        noise = ar1(128, 0.5, 2.0, random.Random(seed))
        v = [100.0 * (1 + 0.10 * ((i + 0.5) / 128 - 0.5)) + e for i, e in enumerate(noise)]
        r = analyse(v, [1] * len(v), 1.0, True)
        hits += r["verdict"] == "drifts"
        assert abs(r["drift_pct"] - 10.0) < 5.0
        inside += abs(r["drift_pct"] - 10.0) <= r["drift_half_width_pct"]
    assert hits >= 27
    assert inside >= 26            # the 95 % interval holds the true drift


def test_a_falling_trend_is_negative():
    v = [100.0 * (1 - 0.2 * i / 64) + e for i, e in enumerate(ar1(64, 0.3, 1.0,
                                                                    random.Random(1)))]
    r = analyse(v, [1] * 64, 0.5, True)
    assert r["verdict"] == "drifts"
    assert -24 < r["drift_pct"] < -16


def test_too_few_batches_gives_no_verdict():
    r = analyse([10.0] * (MIN_BATCHES - 1), [1] * (MIN_BATCHES - 1), 1.0, True)
    assert r["verdict"] == "too short to tell"
    assert "batches" in r["reason"]
    assert "drift_pct" not in r


def test_too_few_events_per_batch_gives_no_verdict():
    # 2 events per 1-s interval, merged into 32 batches of 4 s: 8 events; at 1 per s
    # in 0.5-s intervals a batch of 2 s holds 2 events
    r = analyse([1.0] * 64, [1] * 64, 0.03125, True)
    assert r["verdict"] == "too short to tell"
    assert "events per batch" in r["reason"]


def test_slow_cycles_as_long_as_a_batch_give_no_verdict():
    # a square wave with a period of half the window (stalls that come and go): no
    # number of batches from 10 up is independent, so no verdict
    v = [100.0 if (i // 32) % 2 == 0 else 20.0 for i in range(128)]
    v = [x + e for x, e in zip(v, ar1(128, 0.0, 1.0, random.Random(3)))]
    r = analyse(v, [1] * 128, 1.0, True)
    assert r["verdict"] == "too short to tell"
    assert "correlated" in r["reason"]


def test_mser_finds_the_warm_up():
    rng = random.Random(5)
    v = [50.0 + 5 * i for i in range(10)] + [100.0 + rng.gauss(0, 2) for _ in range(90)]
    assert 9 <= mser_truncation(v) <= 20      # the ramp, and no more than noise adds
    assert mser_truncation([100.0 + rng.gauss(0, 2) for _ in range(100)]) <= 10


# ---------------------------------------------------------------------- the series
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 500.0), st.integers(0, 10 ** 12)), max_size=400),
       st.integers(1, 4))
def test_merging_keeps_totals_exact(events, size_half):
    one = IntervalSeries(0.0, 1e-3, 2 * size_half)
    bulk = IntervalSeries(0.0, 1e-3, 2 * size_half)
    for t, v in events:
        one.add(t, v)
    if events:
        bulk.add_many(np.array([t for t, _ in events]), np.array([v for _, v in events]))
    assert one.total == bulk.total == len(events)
    assert one.total_value == bulk.total_value == sum(v for _, v in events)
    assert one.counts == bulk.counts and one.width == bulk.width
    # every event lies in the interval the series holds it in
    for t, _ in events:
        assert t < one.start + one.width * one.size


def test_series_memory_is_bounded_and_widths_double():
    s = IntervalSeries(10.0, 0.5, 8)
    for k in range(1000):
        s.add(10.0 + k * 0.1)
    s.add(5.0)                                  # before the window: not counted
    assert len(s.counts) == 8 and s.total == 1000
    assert s.width == 0.5 * 2 ** 5             # 100 s in 8 intervals: 16 s each
    counts, _ = s.full(10.0 + 100.0)
    assert len(counts) == 6                    # 96 s of whole intervals in 100 s


def test_series_report_of_a_steady_poisson_stream():
    rng = random.Random(11)
    s = IntervalSeries(0.0)
    t = 0.0
    while t < 60.0:
        t += rng.expovariate(200.0)
        s.add(t, 5_000_000)                   # 5 ms each
    r = series_report(s, 60.0)
    assert r["verdict"] == "steady"
    assert abs(r["mean"] - 200.0) < 10.0
    lat = series_report(s, 60.0, rate=False, scale=1e-6)
    assert lat["verdict"] == "steady" and abs(lat["mean"] - 5.0) < 1e-9


def test_a_start_still_warming_up_is_flagged_as_warm_up():
    # the oracle-tpcc shape: the first 5 % of the window at twice the rate (a write-back
    # cache still filling), then steady: the line fits a step poorly, MSER-5 finds it
    rng = random.Random(2)
    v = [(600.0 if i < 6 else 280.0) + rng.gauss(0, 20) for i in range(128)]
    r = analyse(v, [1] * 128, 1.4, True)
    assert r["verdict"] == "drifts" and r["reason"] == "warm-up"
    assert 5 <= r["mser5_truncate_s"] <= 16          # the 8.4 s step, in steps of 7 s
    assert 4 < r["warmup_bias_pct"] < 7              # (6 * 320 / 128) / 280 = 5.4 %
