"""Seek forms from DiskSim: the extracted table and the HPL equation."""

import math

import pytest

from blksim.disk_models.presets import list_presets, load_preset
from blksim.disk_models.seek import SeekHPL, make_seek
from blksim.disk_models.spec import DriveSpec

TABLE_PRESETS = [n for n in list_presets() if load_preset(n).seek.form == "table"]


@pytest.mark.parametrize("name", TABLE_PRESETS)
def test_table_reproduces_its_points_and_zero(name):
    spec = load_preset(name)
    sk = make_seek(spec)
    assert sk.time(0) == 0.0
    for d, ms in spec.seek.points:
        assert sk.time(d) == pytest.approx(ms / 1e3, abs=1e-12)


@pytest.mark.parametrize("name", TABLE_PRESETS)
def test_table_monotone_where_the_measured_curve_is(name):
    spec = load_preset(name)
    sk = make_seek(spec)
    pts = [(0, 0.0)] + [tuple(p) for p in spec.seek.points]
    for (d0, t0), (d1, t1) in zip(pts, pts[1:]):
        times = [sk.time(d) for d in range(d0, d1 + 1)]
        if t1 >= t0:
            assert all(a <= b + 1e-15 for a, b in zip(times, times[1:]))
        else:
            assert all(a >= b - 1e-15 for a, b in zip(times, times[1:]))
    # beyond the last point the last segment continues
    (da, ta), (db, tb) = pts[-2], pts[-1]
    assert sk.time(db + 10) == pytest.approx((tb + (tb - ta) * 10 / (db - da)) / 1e3)


def test_hpl_equation_and_first_ten():
    sk = SeekHPL(300, 3.81, 0.33, 7.75, 0.0059, None, [2.89, 3.68, 3.81, 3.98, 4.27, 4.65,
                                                       4.52, 4.65, 4.82, 4.99])
    assert sk.time(0) == 0.0
    assert sk.time(1) == pytest.approx(2.89e-3) and sk.time(10) == pytest.approx(4.99e-3)
    assert sk.time(11) == pytest.approx((3.81 + 0.33 * math.sqrt(11)) / 1e3)
    assert sk.time(299) == pytest.approx((3.81 + 0.33 * math.sqrt(299)) / 1e3)
    assert sk.time(300) == pytest.approx((7.75 + 0.0059 * 300) / 1e3)
    plain = SeekHPL(300, 3.81, 0.33, 7.75, 0.0059, 1.5)
    assert plain.time(1) == pytest.approx(1.5e-3)
    assert plain.time(2) == pytest.approx((3.81 + 0.33 * math.sqrt(2)) / 1e3)
    # monotone where the equation is: sqrt part and linear part each increase
    ts = [plain.time(d) for d in range(2, 300)]
    assert ts == sorted(ts)
    ts = [plain.time(d) for d in range(300, 3000)]
    assert ts == sorted(ts)


def test_hpl_preset_loads_and_round_trips():
    spec = load_preset("hp_c2247a")
    assert spec.seek.form == "hpl" and len(spec.seek.first_ten_ms) == 10
    assert spec.seek.single_cyl_ms is None
    assert DriveSpec.from_dict(spec.to_dict()) == spec
