"""Mechanical drives: the two models and the factory that chooses between them.

* `MechanicalDrive` (disk_models/mechanical.py): a zoned, skewed drive serving
  requests first come, first served, its service time written out term by term there.
* `DiskSimDrive` (disk_models/disksim_drive.py): DiskSim 4.0's controller overheads by
  case, on-board cache (disk_models/cache.py) and drive-side queue policy
  (disk_models/tcq.py), with DiskSim's g1 media timing (disk_models/disksim_media.py).

`make_drive` chooses the model a spec asks for; constructing either class builds that
model and no other. See docs/drives.md ("DiskSim mode") and docs/drive-cache.md.
"""

from __future__ import annotations

from blksim.disk_models.base import DeviceError
from blksim.disk_models.disksim_drive import DiskSimDrive
from blksim.disk_models.mechanical import (BREAKDOWN_KEYS, MechanicalDrive, read_bus_end,
                                           request_breakdown, sector_in_at)
from blksim.disk_models.spec import DriveSpec

__all__ = ["BREAKDOWN_KEYS", "DeviceError", "DiskSimDrive", "MechanicalDrive", "make_drive",
           "read_bus_end", "request_breakdown", "sector_in_at"]


def _needs_full(spec) -> bool:
    """True when ``spec`` asks for DiskSim's overheads, cache or a drive-queue policy."""
    return bool(spec.overheads) or bool(spec.cache) or spec.queue_policy != "fcfs"


def make_drive(spec: DriveSpec, seed=0, queue_depth: int | None = None) -> MechanicalDrive:
    """The drive model ``spec`` asks for: `DiskSimDrive` when it has DiskSim's overheads,
    on-board cache or a drive-queue policy other than FCFS, else the plain
    `MechanicalDrive`. ``seed`` (int, SeedSequence or numpy Generator) sets the
    platter's initial angle; ``queue_depth`` overrides the spec's."""
    model = DiskSimDrive if _needs_full(spec) else MechanicalDrive
    return model(spec, seed=seed, queue_depth=queue_depth)
