"""`blksim drive import`: DiskSim descriptions -> presets; warnings, errors, CLI, smoke runs."""

import re
import argparse
import io
import shutil
from blksim._compat import tomllib
from pathlib import Path

import pytest

from blksim.disk_models.disksim.importer import import_diskspecs
from blksim.disk_models.disksim.params import DiskSimError, parse_file
from blksim.disk_models.disksim.regenerate import VALIDATED, preset_text
from blksim.disk_models.disksim.validation_set import shipped_folder
from blksim.disk_models.drive import make_drive
from blksim.disk_models.presets import PRESET_DIR, list_presets, load_preset
from blksim.disk_models.spec import DriveSpec
from blksim.cli.drive import add_drive_commands, handle

DISKS = shipped_folder() / "disks"


@pytest.mark.parametrize("stem", VALIDATED)
def test_reimport_gives_the_shipped_preset(stem):
    assert preset_text(DISKS, stem) == (PRESET_DIR / f"{stem}.toml").read_text()


@pytest.mark.parametrize("stem", VALIDATED)
def test_every_parameter_is_mapped_or_warned(stem):
    drive, warnings = import_diskspecs(DISKS / f"{stem}.diskspecs")
    ignored = [w for w in warnings if ": ignored: " in w]
    assert all(" = " in w and w.endswith(")") for w in ignored)
    (disk,) = parse_file(DISKS / f"{stem}.diskspecs")
    sched = disk.get("Scheduler").value
    # every scheduler key but the policy, and the two hint keys, are reported
    assert sum("Scheduling policy" not in p.key for p in sched.params) + 2 <= len(ignored)
    spec = DriveSpec.from_dict(drive)
    assert spec.capacity == disk.get("Model").value.get("Block count").value
    assert spec.layout is not None and spec.queue_policy == "fcfs"


def _copy(tmp_path, stem="hp_c3323a"):
    for f in DISKS.glob(f"{stem}*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / f"{stem}.diskspecs"


@pytest.mark.parametrize("old,new,match", [
    ("Sparing scheme used = 1", "Sparing scheme used = 5",
     r"hp_c3323a\.model:7: Sparing scheme used: blksim supports sparing schemes .*found 5"),
    ("Access time type = trackSwitchPlusRotation", "Access time type = averageRotation",
     r"hp_c3323a\.model:\d+: Access time type: blksim supports trackSwitchPlusRotation"),
    ("Seek type = extracted", "Seek type = linear", r"Seek type: blksim supports seek types"),
    ("Head switch time = 0.650000", "Head switch time = fast", r"Head switch time: expected a number"),
    ("Number of spares = 224", "Spare count = 224", r"unknown dm_layout_g1_zone parameter"),
])
def test_unsupported_or_malformed_parameters_are_errors(tmp_path, old, new, match):
    path = _copy(tmp_path)
    model = tmp_path / "hp_c3323a.model"
    text = model.read_text()
    assert old in text, old
    model.write_text(text.replace(old, new, 1))
    with pytest.raises(DiskSimError, match=match):
        import_diskspecs(path)


@pytest.mark.parametrize("value, expected", [("1e309", "a finite number"),
                                             ("-1e309", "a finite number"),
                                             ("nan", "an integer")])
def test_a_value_that_is_not_finite_is_named(tmp_path, value, expected):
    path = _copy(tmp_path)
    text = path.read_text()
    assert "Set watermark by reqsize = 1" in text
    path.write_text(text.replace("Set watermark by reqsize = 1",
                                 f"Set watermark by reqsize = {value}"))
    with pytest.raises(DiskSimError, match=r"hp_c3323a\.diskspecs:\d+: Set watermark by "
                                           r"reqsize: expected " + expected):
        import_diskspecs(path)


def test_bad_queue_policy_names_file_line_and_choices(tmp_path):
    path = _copy(tmp_path)
    path.write_text(path.read_text().replace("Scheduling policy = 1", "Scheduling policy = 99"))
    with pytest.raises(DiskSimError, match=r"hp_c3323a\.diskspecs:\d+: Scheduling policy: "
                                           r"expected a DiskSim policy number 1\.\.18 .*1 fcfs"):
        import_diskspecs(path)


def test_aged_sptf_takes_its_weight_from_timeout_time_weight(tmp_path):
    path = _copy(tmp_path)
    text = path.read_text()
    text = text.replace("Scheduling policy = 1", "Scheduling policy = 14")
    text = re.sub(r"Timeout time/weight = [0-9.]+", "Timeout time/weight = 6", text)
    path.write_text(text)
    drive, warnings = import_diskspecs(path)[:2]
    assert drive["queue"] == {"policy": "asptf_opt", "age_weight": 6.0}
    assert not any("Timeout time/weight" in w for w in warnings)
    spec = DriveSpec.from_dict(drive, origin="imported")
    assert make_drive(spec, queue_depth=4)._tq.age_weight == 6.0


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_runs_in_the_drive(name):
    spec = load_preset(name)
    d = make_drive(spec, seed=3)

    class Rq:
        def __init__(self, sector, n, write):
            self.sector, self.nr_sectors, self.write = sector, n, write

    now = 0.0
    cap = spec.capacity
    for i, (lbn, n, w) in enumerate([(0, 8, False), (cap // 2, 64, True), (cap - 300, 300, False),
                                     (1234567 % cap, 1, True), (cap // 3, 1000, False)]):
        d.submit(Rq(lbn, n, w), now)
        t = d.next_event_time()
        assert t > now
        (done,) = d.pop_completed(t)
        b = d.service_breakdown
        assert b["total"] == pytest.approx(b["overhead"] + b["queue"] + b["seek"] + b["rotation"]
                                           + b["transfer"] + b["bus"], abs=1e-12)
        # a transfer takes at least its sectors' share of revolutions (a fast write's
        # media transfer, the destage, comes after its completion and is not in it)
        fast = w and spec.cache_params["enabled"] and spec.cache_params["fast_write_level"]
        assert fast or b["transfer"] >= n / max(z.sectors_per_track for z in spec.zones) * 60 / spec.rpm \
            - 1e-12
        now = t


def test_slip_in_a_transfer_costs_nothing_as_in_disksim():
    # DiskSim's g1 mechanics (diskmodel/mech_g1.c) time a track's transfer by the LBNs it
    # moves, so the slipped slot adds no time; the DiskSim presets follow it
    spec = load_preset("atlas10k")  # zone 0 slips at zone-relative sector 55017
    d = make_drive(spec)
    lay = d.layout

    class Rq:
        sector, nr_sectors, write = 55015, 4, False  # LBNs 55015..55018: slots 55015, 55016,
    cyl, head, sec = lay.lbn_to_chs(55015)           # 55018, 55019 (55017 is slipped)
    end = lay.lbn_to_chs(55015 + 4)
    assert end[:2] == (cyl, head) and end[2] - sec == 5  # one sector skipped on the track
    d.submit(Rq(), 0.0)
    spt = spec.zones[0].sectors_per_track
    assert d.service_breakdown["transfer"] == pytest.approx(4 / spt * 60 / spec.rpm, rel=1e-9)


def _cli(*argv):
    p = argparse.ArgumentParser()
    add_drive_commands(p.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    rc = handle(p.parse_args(list(argv)), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_cli_import_writes_toml_and_warnings(tmp_path):
    dest = tmp_path / "c.toml"
    rc, out, err = _cli("drive", "import", str(DISKS / "barracuda.diskspecs"), "--out", str(dest))
    assert rc == 0 and "wrote" in out
    lines = err.strip().splitlines()
    assert lines and all(line.startswith("warning: ") for line in lines)
    data = tomllib.loads(dest.read_text())
    assert data["name"] == "c" and any("blksim drive import" in s for s in data["source"])
    assert DriveSpec.from_toml(dest).capacity > 0


def test_cli_list_and_show():
    rc, out, _ = _cli("drive", "list")
    assert rc == 0 and "atlas10k" in out and "cheetah15k4" in out and "capacity GB" in out
    rc, out, _ = _cli("drive", "show", "barracuda")
    assert rc == 0
    for word in ("capacity", "rpm", "heads", "cylinders", "sectors/track", "seek", "head switch",
                 "settle", "overheads", "cache", "queue", "sectors_per_range"):
        assert word in out
    rc, out, _ = _cli("drive", "show", str(PRESET_DIR / "cheetah15k4.toml"))
    assert "curve" in out and "cache       none" in out


def test_parv_bus_times_reach_the_hp_presets():
    from blksim.disk_models.disksim.importer import read_parv_bus_times
    parv = DISKS.parent / "parv"
    assert read_parv_bus_times(parv / "hp_c2247a.parv") == (0.1701, 0.18686)
    assert read_parv_bus_times(parv / "cheetah9LP.parv") == (0.0, 0.0)
    ov = dict(load_preset("hp_c2247a").overheads)
    assert ov["bus_sector_ms"] == 0.1701 and ov["bus_write_sector_ms"] == 0.18686
    # the drive's own figure wins when it is the slower one (cheetah9LP: 0.105 ms)
    assert dict(load_preset("cheetah9LP").overheads)["bus_sector_ms"] == 0.105


def test_a_preset_is_made_from_the_description_its_validation_run_sources(tmp_path):
    # DiskSim validated hp_c3323a with hp_c3323a.parv, which sources
    # hp_c3323a_validate.diskspecs (the measured drive: 5396 rpm), not hp_c3323a.diskspecs
    # (the nominal 5400); every other drive's run sources its own stem's description
    from blksim.disk_models.disksim.validation_set import drive_files
    folder = DISKS.parent
    for stem in VALIDATED:
        path, parv = drive_files(folder, stem)
        assert parv == folder / "parv" / f"{stem}.parv"
        expected = "hp_c3323a_validate" if stem == "hp_c3323a" else stem
        assert path == DISKS / f"{expected}.diskspecs"
    assert load_preset("hp_c3323a").rpm == 5396
    rc, out, _ = _cli("drive", "import", "hp_c3323a", "--out", str(tmp_path / "h.toml"))
    assert rc == 0 and tomllib.loads((tmp_path / "h.toml").read_text())["rpm"] == 5396


def test_without_a_single_sourced_description_the_stem_names_it(tmp_path):
    from blksim.disk_models.disksim.importer import read_parv_diskspecs
    from blksim.disk_models.disksim.validation_set import drive_files
    (tmp_path / "disks").mkdir()
    (tmp_path / "parv").mkdir()
    for name in ("a.diskspecs", "b.diskspecs"):
        (tmp_path / "disks" / name).write_text("")
    parv = tmp_path / "parv" / "x.parv"
    assert drive_files(tmp_path, "x") == (tmp_path / "disks" / "x.diskspecs", None)
    parv.write_text("source a.diskspecs\n  source  b.diskspecs \n# source c.diskspecs\n")
    assert read_parv_diskspecs(parv) == ["a.diskspecs", "b.diskspecs"]
    assert drive_files(tmp_path, "x") == (tmp_path / "disks" / "x.diskspecs", parv)
    parv.write_text("source a.diskspecs\nsource missing.diskspecs\n")
    assert drive_files(tmp_path, "x") == (tmp_path / "disks" / "a.diskspecs", parv)
