"""Seek-time models: the fitted curve and the interpolated table."""

import math

import pytest

from blksim.disk_models.base import DeviceError
from blksim.disk_models.presets import list_presets, load_preset
from blksim.disk_models.seek import SeekCurve, SeekTable, make_seek


@pytest.fixture(scope="module",
                params=sorted(n for n in list_presets() if load_preset(n).seek.form == "curve"))
def preset(request):
    spec = load_preset(request.param)
    return spec, make_seek(spec)


def test_curve_passes_through_single_and_full_stroke(preset):
    spec, sk = preset
    assert sk.time(0) == 0.0
    assert sk.time(1) == pytest.approx(spec.seek.single_cyl_ms / 1e3, rel=1e-9)
    assert sk.time(spec.cylinders - 1) == pytest.approx(spec.seek.full_stroke_ms / 1e3, rel=1e-9)


def test_curve_monotone_and_continuous(preset):
    spec, sk = preset
    prev = 0.0
    for d in range(0, spec.cylinders):
        t = sk.time(d)
        assert t >= prev
        prev = t
    b = sk.boundary
    lo, hi = sk.a + sk.b * math.sqrt(b), sk.c + sk.e * b
    assert lo == pytest.approx(hi, rel=1e-9)


def test_curve_average_over_random_pairs_matches_avg_ms(preset):
    spec, sk = preset
    # exact mean over all pairs with distance >= 1: the fit solves for it
    assert sk.mean_random() == pytest.approx(spec.seek.avg_ms / 1e3, rel=1e-9)
    # and a Monte Carlo check of what a workload sees (pairs with d = 0 excluded)
    import random
    rnd = random.Random(3)
    n = spec.cylinders
    tot = cnt = 0
    while cnt < 20000:
        d = abs(rnd.randrange(n) - rnd.randrange(n))
        if d:
            tot += sk.time(d)
            cnt += 1
    assert tot / cnt == pytest.approx(spec.seek.avg_ms / 1e3, rel=0.02)


def test_curve_impossible_average_is_an_error():
    with pytest.raises(DeviceError, match="seek.avg_ms"):
        SeekCurve(0.2, 7.0, 7.4, 50000)


def test_table_interpolates_linearly():
    t = SeekTable([(1, 1.0), (11, 2.0), (101, 5.0)])
    assert t.time(0) == 0.0
    assert t.time(1) == pytest.approx(1e-3)
    assert t.time(6) == pytest.approx(1.5e-3)
    assert t.time(11) == pytest.approx(2e-3)
    assert t.time(56) == pytest.approx(3.5e-3)
    # beyond the last point, the last segment continues
    assert t.time(191) == pytest.approx(8e-3)
    assert SeekTable([(5, 2.0)]).time(3) == pytest.approx(1.2e-3)
    assert SeekTable([(5, 2.0)]).time(50) == pytest.approx(2e-3)


def test_like_drives_share_one_seek_model_and_table():
    import dataclasses

    from blksim.disk_models.drive import make_drive

    spec = load_preset("cheetah10k7")
    a, b = make_drive(spec, seed=1), make_drive(spec, seed=2)
    assert a.seek_model is b.seek_model
    assert a._seek_tab is b._seek_tab and len(a._seek_tab) == spec.cylinders
    slower = dataclasses.replace(spec, seek=dataclasses.replace(spec.seek, avg_ms=5.0))
    c = make_drive(slower, seed=1)
    assert c.seek_model is not a.seek_model
    assert c._seek_tab[1000] > a._seek_tab[1000]
    assert c.seek_model.mean_random() == pytest.approx(5.0e-3, rel=1e-9)
