"""DiskSim g1 layouts: exact LBN mapping (sparing, slips, defects), angles, block counts."""

import bisect

import pytest
from hypothesis import given, settings, strategies as st

from blksim.disk_models.layout import ZonedLayout
from blksim.disk_models.presets import load_preset
from blksim.disk_models.sparing import LayoutError, blocks_in_zone, zone_segments
from blksim.disk_models.spec import DriveSpec

VALIDATED = ("atlas10k", "atlas_III", "barracuda", "cheetah4LP", "cheetah9LP", "dec_rz26",
             "hp_c2247a", "hp_c2490a", "hp_c3323a", "ibm18es")
SPECS = {n: load_preset(n) for n in VALIDATED}
LAYOUTS = {n: ZonedLayout(s) for n, s in SPECS.items()}


@pytest.mark.parametrize("name", VALIDATED)
@settings(max_examples=300, deadline=None)
@given(frac=st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_lbn_round_trip(name, frac):
    lay = LAYOUTS[name]
    lbn = int(frac * SPECS[name].capacity)
    cyl, head, sec = lay.lbn_to_chs(lbn)
    assert 0 <= cyl < lay.cylinders and 0 <= head < lay.heads
    assert 0 <= sec < lay.sectors_per_track(cyl)
    assert lay.chs_to_lbn(cyl, head, sec) == lbn
    a = lay.physical_angle(lbn)
    assert 0.0 <= a < 1.0
    expect = lay.track_angle(cyl, head) + sec / lay.sectors_per_track(cyl)
    diff = (a - expect) % 1.0
    assert min(diff, 1.0 - diff) < 1e-9


def _position(lay, lbn):
    """(cylinder, logical track in cylinder, sector) in the order LBNs are laid out."""
    cyl, head, sec = lay.lbn_to_chs(lbn)
    z = bisect.bisect_right(lay.z_cyl, cyl) - 1
    c = cyl - lay.z_cyl[z]
    return cyl, lay._phys_head(z, c, head), sec


@pytest.mark.parametrize("name", VALIDATED)
@settings(max_examples=200, deadline=None)
@given(frac=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
       step=st.integers(min_value=1, max_value=5000))
def test_mapping_is_monotonic(name, frac, step):
    lay = LAYOUTS[name]
    a = int(frac * (SPECS[name].capacity - step))
    assert _position(lay, a) < _position(lay, a + step)


@pytest.mark.parametrize("name", VALIDATED)
def test_slips_and_spares_hold_no_lbn(name):
    spec, lay = SPECS[name], LAYOUTS[name]
    track_sparing = spec.layout.sparing == "tracks_per_zone"
    for i, z in enumerate(spec.zones):
        spt, spc = z.sectors_per_track, z.sectors_per_track * spec.heads
        slots = [t * spt + k for t in z.slips for k in (0, spt - 1)] if track_sparing \
            else list(z.slips)
        for slot in slots:
            c, rem = divmod(slot, spc)
            h, k = divmod(rem, spt)
            head = lay._phys_head(i, c, h)
            with pytest.raises(ValueError, match="holds no LBN"):
                lay.chs_to_lbn(z.first_cyl + c, head, k)


@pytest.mark.parametrize("name", VALIDATED)
def test_block_count(name):
    # the zones lay out at least the drive's Block count (DiskSim's checknumblocks would use
    # the zones' count); the four HP/DEC drives match exactly
    spec = SPECS[name]
    assert spec.capacity <= spec.zoned_capacity
    if name in ("dec_rz26", "hp_c2247a", "hp_c2490a", "hp_c3323a"):
        assert spec.capacity == spec.zoned_capacity


def test_angle_follows_disksim_formula():
    # hp_c2247a zone 1: offset 14, track skew 13, cylinder skew 30, 92 sectors per track
    spec, lay = SPECS["hp_c2247a"], LAYOUTS["hp_c2247a"]
    z = spec.zones[1]
    c, h = 7, 5
    sectors = (z.first_block_offset_sectors + (h + (spec.heads - 1) * c) * z.track_skew_sectors
               + c * z.cylinder_skew_sectors) % z.sectors_per_track
    assert lay.track_angle(z.first_cyl + c, h) == pytest.approx(sectors / z.sectors_per_track)


def test_serpentine_mapping_keeps_the_surface_across_cylinders():
    lay, spec = LAYOUTS["atlas10k"], SPECS["atlas10k"]  # LBN-to-PBN mapping scheme 1
    z = spec.zones[0]
    per_cyl = lay.zoned_capacity  # find the first LBN of cylinder 1 by walking tracks
    lbn = 0
    while lay.lbn_to_chs(lbn)[0] == 0:
        lbn += z.sectors_per_track - 1
    while lay.lbn_to_chs(lbn - 1)[0] == 1:
        lbn -= 1
    assert lay.lbn_to_chs(lbn - 1)[1] == spec.heads - 1
    assert lay.lbn_to_chs(lbn)[:2] == (1, spec.heads - 1)
    assert per_cyl > lbn


# ------------------------------------------------------------- the schemes, by hand

def segs_lbns(segs):
    out = []
    for off, count, slot0, D, U, _ in segs:
        for o in range(count):
            out.append(slot0 + (o // D) * U + o % D if D else slot0 + o)
    return out


def test_sectors_per_zone_skips_slips_and_ends_in_spares():
    # 2 cylinders x 2 heads x 5 sectors = 20 slots, 3 spares, slips at 4 and 9
    slots = segs_lbns(zone_segments("sectors_per_zone", 2, 2, 5, 0, 3, [9, 4], []))
    assert slots == [0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18]
    assert blocks_in_zone("sectors_per_zone", 2, 2, 5, 0, 3, 2) == 17


def test_sectors_per_track_spares_at_each_track_end():
    slots = segs_lbns(zone_segments("sectors_per_track", 1, 2, 5, 0, 1, [6], []))
    assert slots == [0, 1, 2, 3, 5, 7, 8, 9]


def test_sectors_per_range_and_empty_front():
    # ranges of 2 cylinders x 1 head x 4 sectors = 8 slots, 2 spares; 5 cylinders: 2 ranges
    # and a partial one (no spares, as DiskSim counts it); 3 empty slots at the front
    segs = zone_segments("sectors_per_range", 5, 1, 4, 3, 2, [1], [], range_cyl=2)
    slots = segs_lbns(segs)
    assert slots == [4, 5, 6, 8, 9, 10, 11, 12, 13, 16, 17, 18, 19]
    assert len(slots) == blocks_in_zone("sectors_per_range", 5, 1, 4, 3, 2, 1, 2)


def test_track_sparing_slips_whole_tracks_and_remaps_defects():
    # 3 cylinders x 2 heads, 4 sectors per track, 2 spare tracks; track 1 slipped
    segs = zone_segments("tracks_per_zone", 3, 2, 4, 0, 2, [1], [(2, 5)])
    slots = segs_lbns(segs)
    assert slots == [0, 1, 2, 3] + [20, 21, 22, 23] + [12, 13, 14, 15, 16, 17, 18, 19]


def test_sector_defect_remap_and_errors():
    segs = zone_segments("sectors_per_zone", 1, 1, 10, 0, 2, [], [(3, 9)])
    assert segs_lbns(segs) == [0, 1, 2, 9, 4, 5, 6, 7]
    with pytest.raises(LayoutError, match="already holds data"):
        zone_segments("sectors_per_zone", 1, 1, 10, 0, 2, [], [(3, 4)])
    with pytest.raises(LayoutError, match="fewer than"):
        zone_segments("sectors_per_zone", 1, 1, 10, 0, 1, [1, 2], [])
    with pytest.raises(LayoutError, match="outside the zone"):
        zone_segments("sectors_per_zone", 1, 1, 10, 0, 1, [10], [])


def test_g1_spec_loads_and_errors_name_the_zone():
    spec = SPECS["cheetah9LP"]
    assert DriveSpec.from_dict(spec.to_dict()) == spec
    d = spec.to_dict()
    d["zones"][2]["spares"] = 0
    from blksim.disk_models.base import DeviceError
    with pytest.raises(DeviceError, match=r"zones\[2\]"):
        DriveSpec.from_dict(d, origin="x.toml")
    d = SPECS["hp_c2247a"].to_dict()
    del d["layout"]
    with pytest.raises(DeviceError, match=r"only valid with a \[layout\]"):
        DriveSpec.from_dict(d)
