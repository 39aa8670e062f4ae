"""Device models: mechanical drives (and later RAID controllers, SSDs) behind one small interface."""

from blksim.disk_models.base import Device, DeviceError
from blksim.disk_models.drive import MechanicalDrive
from blksim.disk_models.presets import list_presets, load_drive, load_preset
from blksim.disk_models.spec import DriveSpec

__all__ = ["Device", "DeviceError", "DriveSpec", "MechanicalDrive", "list_presets",
           "load_drive", "load_preset"]
