"""Re-create the presets of the ten DiskSim validation drives from their parameter files.

    python -m blksim.disk_models.disksim.regenerate [DISKS_DIR]

DISKS_DIR defaults to the ``disks/`` folder of the validation set that ships with
blksim (`blksim.disk_models.disksim.validation_set`).
Each drive ``X`` becomes ``disk_models/presets/X.toml`` through the same importer
``blksim drive import`` uses; nothing in a preset is written by hand. When the sibling
``../parv/X.parv`` (the DiskSim run the drive was validated in) exists, the preset is
made from the ``.diskspecs`` that run sources (for hp_c3323a, hp_c3323a_validate.diskspecs)
and its bus and controller transfer times per sector are carried into it too; otherwise
from ``X.diskspecs``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from blksim.disk_models.disksim.importer import import_diskspecs
from blksim.disk_models.disksim.tomlout import to_toml, write_atomically
from blksim.disk_models.disksim.validation_set import DRIVES as VALIDATED
from blksim.disk_models.disksim.validation_set import drive_files
from blksim.disk_models.disksim.validation_set import shipped_folder
from blksim.disk_models.presets import PRESET_DIR


def preset_text(disks_dir, stem: str) -> str:
    """The preset TOML text for drive ``stem`` of ``disks_dir``: the description its
    validation run sources (`drive_files`)."""
    path, parv = drive_files(Path(disks_dir).parent, stem)
    drive, warnings = import_diskspecs(path, name=stem, parv=parv)
    return to_toml(drive, warnings, strip_dir=str(Path(disks_dir)))


def main(argv=None) -> int:
    """Write the ten presets; print one line per drive."""
    import argparse
    parser = argparse.ArgumentParser(
        prog="python -m blksim.disk_models.disksim.regenerate",
        description="Re-create disk_models/presets/X.toml for the ten DiskSim validation "
                    "drives from their parameter files, through the importer `blksim drive "
                    "import` uses (overwrites those ten presets).")
    parser.add_argument("disks", nargs="?", metavar="DISKS_DIR",
                        help="a DiskSim disks/ folder (default: the validation set shipped "
                             "with blksim)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    disks = Path(args.disks) if args.disks else shipped_folder() / "disks"
    if not disks.is_dir():
        print(f"regenerate: no DiskSim disks folder at {disks}", file=sys.stderr)
        return 2
    for stem in VALIDATED:
        text = preset_text(disks, stem)
        write_atomically(PRESET_DIR / f"{stem}.toml", text)
        print(f"{stem}: {PRESET_DIR / (stem + '.toml')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
