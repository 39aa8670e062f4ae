"""Flash drive presets shipped as TOML files in ``disk_models/flash_presets/``.

A preset name is the file's stem (``samsung980pro1tb`` -> ``samsung980pro1tb.toml``).
Each file gives every value with its source in comments and in ``source`` (the
format: `blksim.disk_models.flash.spec`).
"""

from __future__ import annotations

from pathlib import Path

from blksim.disk_models.base import DeviceError

FLASH_PRESET_DIR = Path(__file__).parent


def list_flash_presets() -> list:
    """Names of the shipped flash presets, sorted."""
    return sorted(p.stem for p in FLASH_PRESET_DIR.glob("*.toml"))


def flash_file(name: str) -> str:
    """The file a flash name reads: a path as given, else the preset's file."""
    if name.endswith(".toml") or "/" in name or "\\" in name:
        return name
    return str(FLASH_PRESET_DIR / f"{name}.toml")


def load_flash_preset(name_or_path: str) -> dict:
    """The table of a preset name or a flash TOML file; unknown names raise
    `DeviceError` listing the valid ones."""
    path = Path(flash_file(str(name_or_path)))
    if not path.is_file():
        if path.parent == FLASH_PRESET_DIR:
            raise DeviceError(f"unknown flash preset {name_or_path!r}; valid presets are: "
                              f"{', '.join(list_flash_presets())}")
        raise DeviceError(f"flash file {str(path)!r} not found")
    from blksim._compat import TomlFileError, load_toml
    try:
        return load_toml(path)
    except IsADirectoryError:
        raise DeviceError(f"{path}: is a directory, expected a flash TOML file") from None
    except TomlFileError as exc:
        raise DeviceError(str(exc)) from None
