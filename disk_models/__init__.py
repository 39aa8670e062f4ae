"""Device models: mechanical drives (and later RAID controllers, SSDs) behind one small interface.

The names below are loaded when first used, so that importing one small module of
this package (``blksim.disk_models.base`` for its error type, say) does not load the
drive model and numpy with it.
"""

import importlib

_EXPORTS = {
    "Device": "blksim.disk_models.base",
    "DeviceError": "blksim.disk_models.base",
    "DriveSpec": "blksim.disk_models.spec",
    "MechanicalDrive": "blksim.disk_models.drive",
    "list_presets": "blksim.disk_models.presets",
    "load_drive": "blksim.disk_models.presets",
    "load_preset": "blksim.disk_models.presets",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)


def __dir__():
    return sorted(list(globals()) + __all__)
