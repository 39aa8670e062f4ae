"""Drive presets shipped as TOML files in ``disk_models/presets/``.

A preset name is the file's stem (``cheetah15k4`` -> ``presets/cheetah15k4.toml``).
"""

from __future__ import annotations

from pathlib import Path

from blksim.disk_models.base import DeviceError
from blksim.disk_models.spec import DriveSpec

PRESET_DIR = Path(__file__).with_name("presets")
#: RAID controller presets (``disk_models/controllers/NAME.toml``): their keys are
#: those of a device's ``raid`` table (`blksim.disk_models.types.raid.RAID_KEYS`).
CONTROLLER_DIR = Path(__file__).with_name("controllers")


def list_controllers() -> list:
    """Names of the shipped RAID controller presets, sorted."""
    return sorted(p.stem for p in CONTROLLER_DIR.glob("*.toml"))


def list_presets() -> list:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load_preset(name: str) -> DriveSpec:
    """The `DriveSpec` of preset ``name``; unknown names raise `DeviceError` listing the valid ones."""
    path = PRESET_DIR / f"{name}.toml"
    if not name or "/" in name or "\\" in name or not path.is_file():
        raise DeviceError(f"unknown drive preset {name!r}; valid presets are: "
                          f"{', '.join(list_presets())}")
    return DriveSpec.from_toml(path)


def load_drive(name_or_path) -> DriveSpec:
    """A preset name, or a path to a drive TOML file (anything ending in .toml or containing a
    path separator is taken as a path)."""
    s = str(name_or_path)
    if isinstance(name_or_path, Path) or s.endswith(".toml") or "/" in s or "\\" in s:
        return DriveSpec.from_toml(s)
    return load_preset(s)
