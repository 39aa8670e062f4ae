"""The device types a run can build, each declared and registered by one module.

A device type is one module (the built-ins are `blksim.disk_models.types.mechanical`,
`~.service_law` and `~.raid`) that fills in one `DeviceType` record and hands it to
`register` when it is imported. The record says everything the rest of blksim needs:

- the ``[device]`` keys it owns, each with what it means: ``kind_keys``, the keys that
  say what the device is (the first, ``selected_by``, chooses the type: a table with
  ``raid`` is a RAID controller; the one type without a selecting key, the mechanical
  drive, is the default), and ``tuning_keys``, the keys that tune it;
- ``parse(table, where)``: the ``[device]`` table (every key known, none owned by
  another type) -> the type's settings, every default filled in, or a `ConfigError`
  that names the file and key (``where``, a `Where`);
- ``build(settings, name, queue_depth, seed)``: the `blksim.disk_models.base.Device`
  the host puts under the disk's request queue (``queue_depth`` None: the model's own);
- ``table(settings, queue_depth)``: the ``[device]`` keys that give the settings back,
  for the resolved configuration a run writes beside its results;
- ``sectors(settings, where)``: the device's size, for the disk's partitions and jobs;
- optional: ``queue_depth(settings)``, the depth when ``[device] queue_depth`` is not
  given (None: the model's own); ``hw_queues(settings)``, the hardware queues it offers
  a multi-queue kernel (default 1: a SCSI or SATA disk, a RAID controller);
  ``rotational(settings)``, ``queue/rotational`` (default True);
  ``refuse_kernel(settings, kernel)``, the one-line reason the device cannot run under
  that kernel line, or None (default: every line takes it); ``limit_hw_queues(settings,
  cpus)``, the settings with at most ``cpus`` hardware queues, for a device whose driver
  asks one queue per CPU (default None: the type's count stands);
  ``max_discard_sectors(settings)``, the longest discard the device takes (default 0: no
  discard support, as a disk's; the built device says the same in its
  ``max_discard_sectors``); ``files(settings)``,
  the files besides the
  configuration whose content the run depends on; ``rejects(key)``, the message for
  another type's key given with this one; ``misplaced(key, chosen)``, the message for
  one of this type's keys given with the type named ``chosen``;
- its figures in results.json: the device entry shows the model's `Device.describe`.

The keys ``queue_depth`` (every device has one), ``queue`` and ``partition`` (the disk's
request queue and partitions) belong to the ``[device]`` table itself. A module that
registers a type name or a key another module already owns, a second default type, or
a record without ``parse`` or ``build`` fails at import with one line naming both
modules (`RegistrationError`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from blksim.common.builtins import BuiltinModules

#: The built-in device types, in the order their keys are listed.
_BUILTINS = BuiltinModules(("blksim.disk_models.types.mechanical",
                            "blksim.disk_models.types.service_law",
                            "blksim.disk_models.types.raid",
                            "blksim.disk_models.types.flash"))

#: Keys of every ``[device]`` table, whatever its type.
COMMON_KEYS = {
    "queue_depth": "requests the device holds at once, sysfs device/queue_depth (default: "
                   "the drive's)",
}
#: Keys a disk's table has besides its device's (the request queue, the partitions).
_TABLE_KEYS = ("queue", "partition")


class RegistrationError(Exception):
    """A device type's module declares something another module already owns, or too
    little to be built; raised when the module is imported."""


@dataclass(frozen=True)
class Where:
    """Where a device's table is, for messages: ``source`` (the configuration file) and
    ``table`` (``[device]`` or ``[devices.sdb]``)."""

    source: str
    table: str

    def __str__(self) -> str:
        return f"{self.source}: {self.table}"

    def sub(self, key: str) -> str:
        """Where the sub-table ``key`` is: ``file: [device.raid]``."""
        return f"{self.source}: {self.table[:-1]}.{key}]"

    @property
    def base_dir(self) -> str:
        """The directory relative paths in the table start from (the file's own)."""
        return os.path.dirname(os.path.abspath(self.source))


@dataclass(frozen=True)
class DeviceType:
    """One device type's declaration (see the module docstring for each field)."""

    name: str
    module: str
    kind_keys: dict
    parse: Callable | None
    build: Callable | None
    table: Callable
    sectors: Callable
    tuning_keys: dict = None
    selected_by: str | None = None
    queue_depth: Callable = lambda settings: None
    hw_queues: Callable = lambda settings: 1
    rotational: Callable = lambda settings: True
    max_discard_sectors: Callable = lambda settings: 0
    refuse_kernel: Callable = lambda settings, kernel: None
    limit_hw_queues: Callable | None = None
    files: Callable = lambda settings: []
    rejects: Callable = lambda key: None
    misplaced: Callable = None

    def keys(self) -> dict:
        """Every key this type owns."""
        return {**self.kind_keys, **(self.tuning_keys or {})}


_types: list = []            # in registration order
def register(dtype: DeviceType) -> DeviceType:
    """Add ``dtype`` to the registry (called by its module, at import)."""
    _BUILTINS.load()
    where = dtype.module
    if dtype.parse is None or dtype.build is None:
        missing = "parse" if dtype.parse is None else "build"
        raise RegistrationError(f"{where}: device type {dtype.name!r} has no {missing} "
                                f"function (a builder from its [device] keys is required)")
    if dtype.selected_by is not None and dtype.selected_by not in dtype.kind_keys:
        raise RegistrationError(f"{where}: device type {dtype.name!r} is selected by "
                                f"{dtype.selected_by!r}, which is not one of its kind_keys")
    for other in _types:
        if other.name == dtype.name:
            raise RegistrationError(f"{where}: device type {dtype.name!r} is already "
                                    f"registered by {other.module}")
        if dtype.selected_by is None and other.selected_by is None:
            raise RegistrationError(f"{where}: device type {dtype.name!r} has no selecting "
                                    f"key, and {other.module}'s {other.name!r} is already "
                                    f"the default")
        for key in dtype.keys():
            if key in other.keys():
                raise RegistrationError(f"{where}: device key {key!r} is already owned by "
                                        f"{other.module} (device type {other.name!r})")
    for key in dtype.keys():
        if key in COMMON_KEYS or key in _TABLE_KEYS:
            raise RegistrationError(f"{where}: device key {key!r} is already owned by "
                                    f"{__name__} (every [device] table has it)")
    _types.append(dtype)
    return dtype


def unregister(name: str) -> None:
    """Remove the type ``name`` (tests register throwaway types)."""
    _types[:] = [t for t in _types if t.name != name]


def device_types() -> list:
    """Every registered `DeviceType`: the built-in ones in `_BUILTINS`' order (whichever
    module a program imported first), then the others in registration order."""
    _BUILTINS.load()
    builtin = _BUILTINS.names
    return sorted(_types, key=lambda t: builtin.index(t.module) if t.module in builtin
                  else len(builtin))


def device_type(name: str) -> DeviceType:
    """The registered type ``name``."""
    for t in device_types():
        if t.name == name:
            return t
    raise KeyError(f"unknown device type {name!r}; registered: "
                   f"{', '.join(t.name for t in device_types())}")


def device_keys() -> dict:
    """Every key a ``[device]`` table may have, with its meaning, in the order messages
    list them: what the device is (the default type's keys, the common ones, then the
    other types' in registration order), then every type's tuning keys."""
    types = device_types()
    default = [t for t in types if t.selected_by is None]
    keys = {}
    for t in default:
        keys.update(t.kind_keys)
    keys.update(COMMON_KEYS)
    for t in types:
        if t not in default:
            keys.update(t.kind_keys)
    for t in types:
        keys.update(t.tuning_keys or {})
    return keys


def _owner(key: str) -> DeviceType | None:
    for t in _types:
        if key in t.keys():
            return t
    return None


def select(table: dict) -> DeviceType:
    """The type a ``[device]`` table describes: the latest registered whose selecting key
    it has (a RAID controller's ``raid`` over its members' ``service``), else the default."""
    types = device_types()
    for t in reversed(types):
        if t.selected_by is not None and t.selected_by in table:
            return t
    return next(t for t in types if t.selected_by is None)


def parse(table: dict, where: Where) -> tuple:
    """``(type, settings)`` of a ``[device]`` table whose keys are all known: another
    type's key is refused (in the chosen type's words if it has them, else its owner's),
    then the chosen type parses the rest."""
    from blksim.common.config_values import ConfigError
    dtype = select(table)
    for key in device_keys():
        if key not in table or key in COMMON_KEYS or key in dtype.keys():
            continue
        message = dtype.rejects(key)
        if message is None:
            owner = _owner(key)
            message = owner.misplaced(key, dtype.name) if owner.misplaced is not None else \
                f"{key} belongs to a {owner.name} device, not to a {dtype.name} one"
        raise ConfigError(f"{where}: {message}")
    return dtype, dtype.parse(table, where)
