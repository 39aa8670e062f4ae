"""LBN <-> (cylinder, head, sector) mapping and skewed angles of the zoned layout."""

import pytest
from hypothesis import given, settings, strategies as st

from blksim.disk_models.layout import ZonedLayout
from blksim.disk_models.presets import list_presets, load_preset

# the hand-written presets with a plain layout; DiskSim-imported ones are in test_disksim_layout.py
PRESETS = {name: spec for name in list_presets()
           if (spec := load_preset(name)).layout is None}
LAYOUTS = {name: ZonedLayout(spec) for name, spec in PRESETS.items()}


def test_both_required_presets_ship():
    assert {"cheetah15k4", "cheetah10k7"} <= set(PRESETS)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_capacity_matches_zones(name):
    spec, lay = PRESETS[name], LAYOUTS[name]
    by_hand = sum((z.last_cyl - z.first_cyl + 1) * z.sectors_per_track for z in spec.zones)
    assert lay.zoned_capacity == by_hand * spec.heads == spec.zoned_capacity
    assert spec.capacity <= spec.zoned_capacity
    # the zoned capacity wastes less than one cylinder (the derivation rounds up by one)
    assert spec.zoned_capacity - spec.capacity < spec.heads * spec.zones[0].sectors_per_track


@pytest.mark.parametrize("name", sorted(PRESETS))
@settings(max_examples=300, deadline=None)
@given(frac=st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_lbn_round_trip(name, frac):
    lay = LAYOUTS[name]
    lbn = int(frac * lay.zoned_capacity)
    cyl, head, sec = lay.lbn_to_chs(lbn)
    assert 0 <= cyl < lay.cylinders and 0 <= head < lay.heads
    assert 0 <= sec < lay.sectors_per_track(cyl)
    assert lay.chs_to_lbn(cyl, head, sec) == lbn


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_fill_order_track_then_head_then_cylinder(name):
    lay, spec = LAYOUTS[name], PRESETS[name]
    s = spec.zones[0].sectors_per_track
    assert lay.lbn_to_chs(0) == (0, 0, 0)
    assert lay.lbn_to_chs(s - 1) == (0, 0, s - 1)
    assert lay.lbn_to_chs(s) == (0, 1, 0)
    assert lay.lbn_to_chs(s * spec.heads) == (1, 0, 0)
    # first LBN of the second zone (if any) is sector 0, head 0 of its first cylinder
    if len(spec.zones) > 1:
        z1 = spec.zones[1]
        first = z1.first_cyl * spec.heads * s
        assert lay.lbn_to_chs(first) == (z1.first_cyl, 0, 0)
        assert lay.lbn_to_chs(first - 1) == (z1.first_cyl - 1, spec.heads - 1, s - 1)
    last = lay.zoned_capacity - 1
    assert lay.lbn_to_chs(last) == (spec.cylinders - 1, spec.heads - 1,
                                     spec.zones[-1].sectors_per_track - 1)
    with pytest.raises(ValueError):
        lay.lbn_to_chs(lay.zoned_capacity)


@pytest.mark.parametrize("name", sorted(PRESETS))
@settings(max_examples=200, deadline=None)
@given(frac=st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_physical_angle_in_range_and_per_sector(name, frac):
    lay = LAYOUTS[name]
    lbn = int(frac * (lay.zoned_capacity - 1))
    a = lay.physical_angle(lbn)
    assert 0.0 <= a < 1.0
    cyl, head, sec = lay.lbn_to_chs(lbn)
    s = lay.sectors_per_track(cyl)
    # angles on a circle: 0.0 and 0.9999999999 are 1e-10 apart
    d = abs(a - (lay.track_angle(cyl, head) + sec / s) % 1.0)
    assert min(d, 1.0 - d) < 1e-9


def test_skews_accumulate_per_switch():
    spec = PRESETS["cheetah15k4"]
    lay = LAYOUTS["cheetah15k4"]
    z0 = spec.zones[0]
    s, ts, cs = z0.sectors_per_track, z0.track_skew_sectors, z0.cylinder_skew_sectors
    assert lay.track_angle(0, 0) == 0.0
    assert lay.track_angle(0, 1) == pytest.approx(ts / s)
    assert lay.track_angle(1, 0) == pytest.approx((ts + cs) / s)  # one head switch + one cyl switch
    c = 1000
    expect = (c * ((spec.heads - 1) * ts + cs) + ts) / s % 1.0
    assert lay.track_angle(c, 1) == pytest.approx(expect)
    # crossing into zone 1 adds zone 1's cylinder skew in zone 1's sectors
    z1 = spec.zones[1]
    last0 = lay.track_angle(z0.last_cyl, spec.heads - 1)
    assert lay.track_angle(z1.first_cyl, 0) == pytest.approx(
        (last0 + z1.cylinder_skew_sectors / z1.sectors_per_track) % 1.0)
