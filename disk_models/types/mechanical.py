"""Device type ``drive``: a mechanical drive (`blksim.disk_models.drive`), the default.

``[device] drive`` names a preset (``cheetah15k4``, the default) or a drive TOML file
(relative to the configuration file); `make_drive` chooses the plain model or the
DiskSim-mode one from what the file describes. The tuning keys override the file: the
drive's own queue policy (``policy``, DiskSim's names or tcq.py's short ones, and
``age_weight`` for ``asptf_opt``) and where the head and platter are when the run
starts (``start_cylinder``, ``start_angle``; default cylinder 0, an angle drawn from the
seed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from blksim.common.config_values import ConfigError, int_value
from blksim.disk_models.registry import DeviceType, register

DEFAULT_DRIVE = "cheetah15k4"

#: The drive-queue policies by their short names (disk_models/tcq.py's) -> DiskSim's.
POLICY_ALIASES = {"look_lbn": "elevator_lbn", "clook_lbn": "cycle_lbn", "look": "elevator_cyl",
                  "clook": "cycle_cyl", "sstf": "sstf_cyl", "sptf": "sptf_opt",
                  "asptf": "asptf_opt"}


@dataclass
class DriveSettings:
    """A mechanical drive's ``[device]`` settings (None: the drive file's own)."""

    drive: str                         # a preset name or an absolute path
    policy: str | None = None          # the drive's own queue policy (DiskSim's name)
    age_weight: float | None = None    # its asptf_opt weight
    start_cylinder: int | None = None  # the head's cylinder at the start
    start_angle: float | None = None   # the platter's angle at the start (rev)


def drive_file(name: str) -> str:
    """The file a drive name reads, as `blksim.disk_models.presets.load_drive` finds it."""
    from blksim.disk_models.presets import PRESET_DIR
    return name if name.endswith(".toml") or "/" in name or "\\" in name \
        else str(PRESET_DIR / f"{name}.toml")


def _load(drive: str, where):
    from blksim.disk_models.base import DeviceError
    from blksim.disk_models.presets import load_drive
    try:
        return load_drive(drive)
    except DeviceError as exc:
        raise ConfigError(f"{where}: drive: {exc}") from None


def parse(device: dict, where) -> DriveSettings:
    """The drive and its tuning keys, checked."""
    drive = device.get("drive", DEFAULT_DRIVE)
    if not isinstance(drive, str):
        raise ConfigError(f"{where}: drive must be a preset name or a path, "
                          f"found {drive!r}")
    if not os.path.isabs(drive) and (drive.endswith(".toml") or "/" in drive):
        drive = os.path.join(where.base_dir, drive) if os.path.exists(where.source) else drive
    policy, age_weight = _policy(device, where)
    start_cylinder, start_angle = _start(device, where, drive)
    return DriveSettings(drive, policy, age_weight, start_cylinder, start_angle)


def _policy(device: dict, where) -> tuple:
    """[device] policy and age_weight: (DiskSim's policy name or None, weight or None)."""
    if "policy" not in device and "age_weight" not in device:
        return None, None
    from blksim.disk_models.tcq import DISKSIM_POLICY
    from blksim.disk_models.spec import QUEUE_POLICIES
    supported = [QUEUE_POLICIES[n - 1] for n in sorted(DISKSIM_POLICY)]
    policy = device.get("policy")
    if policy is not None:
        policy = POLICY_ALIASES.get(policy, policy)
        if policy not in supported:
            raise ConfigError(f"{where}: policy = {device['policy']!r}: expected one of "
                              f"{', '.join(supported)} (or "
                              f"{', '.join(POLICY_ALIASES)})")
    weight = device.get("age_weight")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))
                               or not 0 <= weight <= 10000):
        raise ConfigError(f"{where}: age_weight expected 0 to 10000 (ms per second waited), "
                          f"found {weight!r}")
    return policy, None if weight is None else float(weight)


def _start(device: dict, where, drive: str) -> tuple:
    """[device] start_cylinder and start_angle (None where not given)."""
    if "start_cylinder" not in device and "start_angle" not in device:
        return None, None
    cylinder = None
    if "start_cylinder" in device:
        cylinders = _load(drive, where).cylinders
        cylinder = int_value(device, "start_cylinder", str(where), 0, 0, cylinders - 1)
    angle = device.get("start_angle")
    if angle is not None and (isinstance(angle, bool) or not isinstance(angle, (int, float))
                              or not 0 <= angle < 1):
        raise ConfigError(f"{where}: start_angle expected a fraction of a revolution, from 0 "
                          f"up to (not including) 1, found {angle!r}")
    return cylinder, None if angle is None else float(angle)


def misplaced(key: str, chosen: str) -> str:
    """A drive's key given with another type of device (``chosen``)."""
    if key == "drive":
        return f"give either drive or {chosen}, not both"
    pair = "policy and age_weight" if key in ("policy", "age_weight") else \
        "start_cylinder and start_angle"
    return (f"{pair} belong to a drive, not to a service-law device or a RAID "
            f"controller")


def build(s: DriveSettings, name: str, queue_depth: int | None, seed: int):
    """The drive `make_drive` chooses for the file, with the settings' overrides."""
    from blksim.disk_models.drive import make_drive
    drive = make_drive(_spec(s), seed=seed, queue_depth=queue_depth)
    if s.start_cylinder is not None:
        drive.cur_cyl = s.start_cylinder
    if s.start_angle is not None:
        drive.angle0 = s.start_angle
    return drive


def _spec(s: DriveSettings):
    from blksim.disk_models.presets import load_drive
    spec = load_drive(s.drive)
    if s.policy is not None or s.age_weight is not None:
        import dataclasses
        spec = dataclasses.replace(
            spec, queue_policy=s.policy if s.policy is not None else spec.queue_policy,
            queue_age_weight=s.age_weight if s.age_weight is not None
            else spec.queue_age_weight)
    return spec


def table(s: DriveSettings, queue_depth) -> dict:
    """The drive, the depth and the tuning keys the configuration gave."""
    out = {"drive": s.drive, "queue_depth": queue_depth}
    for key in ("policy", "age_weight", "start_cylinder", "start_angle"):
        if getattr(s, key) is not None:
            out[key] = getattr(s, key)
    return out


TYPE = register(DeviceType(
    name="drive", module=__name__,
    kind_keys={"drive": "a drive preset name or a path to a drive TOML file"},
    tuning_keys={
        "policy": "the drive's own queue policy, as DiskSim names it (fcfs, elevator_lbn, "
                  "cycle_lbn, sstf_lbn, elevator_cyl, cycle_cyl, sstf_cyl, sptf_opt, "
                  "asptf_opt; or sptf, asptf, look, clook, sstf; default: the drive's)",
        "age_weight": "with asptf_opt: ms of positioning time forgiven per second a request "
                      "has waited (default: the drive's)",
        "start_cylinder": "the cylinder the head is on when the run starts (default 0)",
        "start_angle": "the platter's angle when the run starts, in revolutions from 0 up "
                       "to 1 (default: drawn from the seed)",
    },
    parse=parse, build=build, table=table,
    sectors=lambda s, where: _load(s.drive, where).capacity,
    files=lambda s: [drive_file(s.drive)],
    misplaced=misplaced))
