"""The DiskSim 4.0 validation set that ships with blksim: ten drives measured on real
hardware (parameter files, validation traces with measured response times, DiskSim's
own outputs), as one xz-compressed tar archive of package data (about 1 MB; CMU's
licence in ``data/COPYING``).

`shipped_folder` unpacks the archive once into a cache folder and returns it, laid out
as DiskSim's ``valid/`` directory is: ``disks/``, ``parv/``, ``traces/``,
``reference-outputs/``. Later calls, in any process, find it there. The cache is
``$BLKSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/blksim``, else ``~/.cache/blksim``; the
folder's name carries the archive's checksum (CRC-32 and size), so a newer blksim never
reads an older unpacking. It is written under a temporary name and renamed into place, so a reader
never sees half of it; where the cache cannot be written, a temporary folder removed at
exit stands in.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

DATA = Path(__file__).with_name("data")
ARCHIVE = DATA / "disksim-4.0-validation.tar.xz"

#: The drives of the set, by DiskSim's file stem (each has a trace and a preset).
DRIVES = ("atlas10k", "atlas_III", "barracuda", "cheetah4LP", "cheetah9LP", "dec_rz26",
          "hp_c2247a", "hp_c2490a", "hp_c3323a", "ibm18es")

_unpacked: Path | None = None


def cache_root() -> Path:
    """The folder blksim keeps unpacked data in."""
    env = os.environ.get("BLKSIM_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "blksim"


def _checksum(path: Path) -> str:
    # CRC-32 and size: enough to tell one archive from another (nothing here guards
    # against tampering), and zlib is loaded anyway where hashlib would cost several ms
    # of every command's start-up
    data = path.read_bytes()
    return f"{zlib.crc32(data):08x}-{len(data)}"


def _extract(archive: Path, into: Path) -> None:
    import tarfile
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar.getmembers():
            name = Path(member.name)
            if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                raise OSError(f"{archive}: unexpected member {member.name!r}")
        tar.extractall(into)


def shipped_folder() -> Path:
    """The shipped validation set, unpacked: the folder holding ``disks/``, ``parv/``,
    ``traces/`` and ``reference-outputs/``."""
    global _unpacked
    if _unpacked is not None and _unpacked.is_dir():
        return _unpacked
    target = cache_root() / f"disksim-4.0-validation-{_checksum(ARCHIVE)}"
    if not (target / "traces").is_dir():
        import atexit
        import shutil
        import tempfile
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=target.parent))
        except OSError:
            target = Path(tempfile.mkdtemp(prefix="blksim-validation-"))
            atexit.register(shutil.rmtree, target, True)
            _extract(ARCHIVE, target)
        else:
            try:
                _extract(ARCHIVE, staging)
                os.replace(staging, target)
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)
                if not (target / "traces").is_dir():   # not another process's unpacking
                    raise
    _unpacked = target
    return target


def drive_files(folder, stem: str) -> tuple:
    """(diskspecs, parv) of drive ``stem`` in a validation ``folder`` laid out as the
    shipped one (``disks/``, ``parv/``): the ``.diskspecs`` its validation run
    ``parv/STEM.parv`` sources, and that ``.parv``; without the ``.parv`` (None), or
    when it sources no single ``.diskspecs`` of ``disks/``, ``disks/STEM.diskspecs``."""
    from blksim.disk_models.disksim.importer import read_parv_diskspecs

    folder = Path(folder)
    own = folder / "disks" / f"{stem}.diskspecs"
    parv = folder / "parv" / f"{stem}.parv"
    if not parv.is_file():
        return own, None
    found = [folder / "disks" / Path(n).name for n in read_parv_diskspecs(parv)]
    found = [p for p in found if p.is_file()]
    return (found[0] if len(found) == 1 else own), parv


def diskspecs(name: str) -> Path:
    """The shipped ``.diskspecs`` file of drive ``name`` (one of `DRIVES`): the one its
    validation run sources (`drive_files`)."""
    if name not in DRIVES:
        raise KeyError(name)
    return drive_files(shipped_folder(), name)[0]
