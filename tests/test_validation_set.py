"""The DiskSim 4.0 validation set shipped as package data: complete, licensed,
unpacked once and atomically, and reachable from the command line by drive name."""

from __future__ import annotations

import tarfile

import pytest

from blksim.disk_models.disksim import validation_set as vs
from blksim.disk_models.presets import PRESET_DIR
from blksim.cli import main


def test_the_archive_holds_every_file_of_the_ten_drives():
    with tarfile.open(vs.ARCHIVE, "r:xz") as tar:
        names = set(tar.getnames())
    for stem in vs.DRIVES:
        for path in (f"disks/{stem}.diskspecs", f"parv/{stem}.parv", f"traces/{stem}.trace",
                     f"reference-outputs/{stem}.outv"):
            assert path in names, path
    # and the description each drive's validation run sources (hp_c3323a: its _validate one)
    for ext in ("diskspecs", "model", "seek"):
        assert f"disks/hp_c3323a_validate.{ext}" in names
    assert len(vs.DRIVES) == 10
    assert vs.ARCHIVE.stat().st_size < 1_200_000          # "about 1 MB"


def test_the_licence_travels_with_the_data():
    text = (vs.DATA / "COPYING").read_text()
    assert "Carnegie Mellon University" in text and "NO WARRANTY" in text


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A cache of its own and no unpacking remembered by this process."""
    monkeypatch.setattr(vs, "_unpacked", None)
    monkeypatch.setenv("BLKSIM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_unpacked_once_into_the_cache_with_nothing_half_written(fresh, monkeypatch):
    folder = vs.shipped_folder()
    assert folder.parent == fresh and (folder / "traces" / "cheetah9LP.trace").is_file()
    assert [p.name for p in fresh.iterdir()] == [folder.name]      # no staging left over
    monkeypatch.setattr(vs, "_unpacked", None)
    monkeypatch.setattr(vs, "_extract", lambda *a: pytest.fail("unpacked twice"))
    assert vs.shipped_folder() == folder


def test_an_unwritable_cache_falls_back_to_a_temporary_folder(fresh):
    fresh.parent.mkdir(exist_ok=True)
    fresh.write_text("a file where the cache folder should be")
    folder = vs.shipped_folder()
    assert not str(folder).startswith(str(fresh))
    assert (folder / "disks" / "cheetah9LP.diskspecs").is_file()


def test_drive_import_by_name_gives_the_preset(tmp_path, capsys):
    out = tmp_path / "cheetah9LP.toml"
    assert main(["drive", "import", "cheetah9LP", "--out", str(out)]) == 0
    assert out.read_text() == (PRESET_DIR / "cheetah9LP.toml").read_text()


def test_drive_import_of_an_unknown_name_lists_the_shipped_drives(tmp_path, capsys):
    assert main(["drive", "import", "cheetah9", "--out", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("blksim: error: cheetah9: no such file, and not a drive of the "
                          "shipped DiskSim validation set; valid: atlas10k, ")
    assert not (tmp_path / "x.toml").exists()


def test_the_cache_folder_is_named_by_the_archive_content(tmp_path):
    # an archive of the same size but other bytes must not reuse an older unpacking
    a, b = tmp_path / "a.tar.xz", tmp_path / "b.tar.xz"
    a.write_bytes(b"x" * 1000)
    b.write_bytes(b"x" * 999 + b"y")
    assert vs._checksum(a) != vs._checksum(b)
    assert vs._checksum(a) == vs._checksum(tmp_path / "a.tar.xz")
