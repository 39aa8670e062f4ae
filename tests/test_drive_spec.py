"""Drive descriptions: validation errors, presets, loading by name or path."""

import copy

import pytest

from blksim.disk_models.base import DeviceError
from blksim.disk_models.drive import make_drive
from blksim.disk_models.presets import PRESET_DIR, list_presets, load_drive, load_preset
from blksim.disk_models.spec import DriveSpec

GOOD = {
    "name": "t", "rpm": 7200, "heads": 2, "cylinders": 10,
    "zones": [{"first_cyl": 0, "last_cyl": 4, "sectors_per_track": 50},
              {"first_cyl": 5, "last_cyl": 9, "sectors_per_track": 40}],
    "track_skew_sectors": 3, "cylinder_skew_sectors": 5, "head_switch_ms": 0.3,
    "seek": {"form": "curve", "single_cyl_ms": 0.5, "avg_ms": 2.0, "full_stroke_ms": 4.0},
    "bus_mb_per_s": 320,
}


def bad(path, value=None, delete=False):
    d = copy.deepcopy(GOOD)
    *parents, last = path
    node = d
    for p in parents:
        node = node[p]
    if delete:
        del node[last]
    else:
        node[last] = value
    return d


def test_good_spec_loads_with_defaults():
    s = DriveSpec.from_dict(GOOD)
    assert s.capacity == s.zoned_capacity == 2 * (5 * 50 + 5 * 40)
    assert s.queue_depth == 1 and s.write_settle_ms == 0.0 and s.command_overhead_ms == 0.0
    assert DriveSpec.from_dict(s.to_dict()) == s


@pytest.mark.parametrize("path,value,key", [
    (("rpm",), 0, "rpm"),
    (("rpm",), -7200, "rpm"),
    (("heads",), 0, "heads"),
    (("heads",), 2.5, "heads"),
    (("bus_mb_per_s",), "fast", "bus_mb_per_s"),
    (("queue_depth",), 0, "queue_depth"),
    (("head_switch_ms",), -1, "head_switch_ms"),
    (("track_skew_sectors",), True, "track_skew_sectors"),
    (("zones", 1, "sectors_per_track"), 0, "zones[1].sectors_per_track"),
    (("zones", 0, "sectors_per_track"), -3, "zones[0].sectors_per_track"),
    (("zones", 1, "first_cyl"), 4, "zones[1].first_cyl"),   # overlap
    (("zones", 1, "first_cyl"), 6, "zones[1].first_cyl"),   # gap
    (("zones", 1, "last_cyl"), 8, "zones[1].last_cyl"),     # stops short of the last cylinder
    (("zones", 0, "last_cyl"), -1, "zones[0].last_cyl"),
    (("zones",), [], "zones"),
    (("sectors",), 10**9, "sectors"),
    (("seek", "avg_ms"), 5.0, "seek.avg_ms"),
    (("seek", "form"), "spline", "seek.form"),
    (("seek",), {"form": "table", "points": [[10, 1.0], [5, 2.0]]}, "seek.points[1]"),
    (("seek",), {"form": "table", "points": [[1, -1.0]]}, "seek.points[0]"),
    (("seek",), {"form": "table", "points": [[1]]}, "seek.points[0]"),
    # NaN passes every range check (comparisons with it are false); infinity is absurd
    (("rpm",), float("nan"), "rpm"),
    (("rpm",), float("inf"), "rpm"),
    (("rpm",), 1e-300, "rpm"),
    (("rpm",), 30, "rpm"),
    (("write_settle_ms",), float("nan"), "write_settle_ms"),
    (("head_switch_ms",), float("inf"), "head_switch_ms"),
    (("bus_mb_per_s",), float("nan"), "bus_mb_per_s"),
    (("seek", "avg_ms"), float("nan"), "seek.avg_ms"),
    (("seek",), {"form": "table", "points": [[1, float("nan")]]}, "seek.points[0][1]"),
    (("zones", 0, "sectors_per_track"), float("inf"), "zones[0].sectors_per_track"),
])
def test_bad_values_name_the_key(path, value, key):
    with pytest.raises(DeviceError) as e:
        DriveSpec.from_dict(bad(path, value), origin="drive.toml")
    msg = str(e.value)
    assert "drive.toml" in msg and f"'{key}'" in msg
    assert "expected" in msg and "found" in msg


def test_unknown_key_lists_valid_keys():
    with pytest.raises(DeviceError) as e:
        DriveSpec.from_dict(bad(("rpms",), 7200), origin="x.toml")
    msg = str(e.value)
    assert "'rpms'" in msg and "rpm" in msg and "cylinder_skew_sectors" in msg
    with pytest.raises(DeviceError, match="sectors_per_track"):
        DriveSpec.from_dict(bad(("zones", 0, "spt"), 5))
    with pytest.raises(DeviceError, match="full_stroke_ms"):
        DriveSpec.from_dict(bad(("seek", "max_ms"), 5))


def test_missing_key_is_named():
    with pytest.raises(DeviceError, match="missing key 'rpm'"):
        DriveSpec.from_dict(bad(("rpm",), delete=True))
    with pytest.raises(DeviceError, match="missing key 'zones\\[0\\].sectors_per_track'"):
        DriveSpec.from_dict(bad(("zones", 0, "sectors_per_track"), delete=True))


def test_toml_file_errors_name_the_file(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text('name = "x"\nrpm = 0\n')
    with pytest.raises(DeviceError, match=r"d\.toml"):
        DriveSpec.from_toml(p)
    p.write_text("name = \n")
    with pytest.raises(DeviceError, match="not valid TOML"):
        DriveSpec.from_toml(p)
    with pytest.raises(DeviceError, match="no such"):
        DriveSpec.from_toml(tmp_path / "missing.toml")


def test_presets_list_and_load():
    names = list_presets()
    assert "cheetah15k4" in names and "cheetah10k7" in names
    s = load_preset("cheetah15k4")
    assert s.rpm == 15000 and s.capacity == 71687372 and s.bus_mb_per_s == 320
    assert any("100220456" in x for x in s.source) and any("derived" in x for x in s.source)
    s10 = load_preset("cheetah10k7")
    assert s10.rpm == 10000 and s10.capacity == 143374744
    with pytest.raises(DeviceError) as e:
        load_preset("cheetah99")
    assert "cheetah15k4" in str(e.value) and "cheetah10k7" in str(e.value)
    with pytest.raises(DeviceError):
        load_preset("../presets/cheetah15k4")


def test_load_drive_by_name_or_path(tmp_path):
    assert load_drive("cheetah10k7").name == "cheetah10k7"
    assert load_drive(PRESET_DIR / "cheetah15k4.toml").name == "cheetah15k4"
    p = tmp_path / "mine.toml"
    p.write_text("""
name = "mine"
rpm = 5400
heads = 1
cylinders = 3
track_skew_sectors = 0
cylinder_skew_sectors = 0
head_switch_ms = 0.0
bus_mb_per_s = 100
zones = [{ first_cyl = 0, last_cyl = 2, sectors_per_track = 10 }]
[seek]
form = "table"
points = [[1, 1.0], [2, 1.5]]
""")
    spec = load_drive(str(p))
    assert spec.capacity == 30 and spec.origin == str(p)
    d = make_drive(spec)
    assert d.seek_time(2) == pytest.approx(1.5e-3)


def test_presets_skews_cover_the_switch_times():
    # the derived skews let the next track's first sector arrive just after a switch
    for name in list_presets():
        s = load_preset(name)
        if s.layout is not None:  # imported from DiskSim: its skews are measured, not derived
            continue
        if name == "teaching":    # the textbook's drive has no skews, on purpose
            continue
        for z in s.zones:
            sector_ms = 60e3 / s.rpm / z.sectors_per_track
            assert z.track_skew_sectors * sector_ms >= s.head_switch_ms
            assert z.cylinder_skew_sectors * sector_ms >= s.seek.single_cyl_ms
            assert (z.track_skew_sectors - 2) * sector_ms < s.head_switch_ms


def test_an_infinitely_fast_bus_is_allowed():
    """DiskSim's "Bulk sector transfer time = 0": no bus time per sector."""
    d = copy.deepcopy(GOOD)
    d["bus_mb_per_s"] = float("inf")
    assert DriveSpec.from_dict(d).bus_mb_per_s == float("inf")


def test_a_nan_in_a_seek_file_is_refused_on_import(tmp_path):
    from blksim.disk_models.disksim.importer import import_diskspecs
    from blksim.disk_models.disksim.params import DiskSimError
    from blksim.disk_models.disksim.validation_set import shipped_folder
    import shutil
    disks = shipped_folder() / "disks"
    for f in ("barracuda.diskspecs", "barracuda.model", "barracuda.seek"):
        shutil.copy(disks / f, tmp_path / f)
    seek = tmp_path / "barracuda.seek"
    lines = seek.read_text().splitlines()
    lines[2] = "2, nan"
    seek.write_text("\n".join(lines) + "\n")
    with pytest.raises(DiskSimError, match=r"barracuda\.seek:3: distances must increase from 1 "
                                           r"and times be >= 0, found 2, nan"):
        import_diskspecs(tmp_path / "barracuda.diskspecs")
