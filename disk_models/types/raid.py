"""Device type ``raid``: a hardware RAID controller and its array (`blksim.disk_models.raid`).

A device's ``[device.raid]`` (or ``[devices.NAME.raid]``) table, the controller preset or
file it names, and the checks that turn them into a `RaidConfig`, which `build_raid`
makes a `RaidController` of (docs/raid.md).

A controller file (``controller = "perc5i"`` or a path) gives the controller's own keys
(`RAID_KEYS`, and the preset-only ``name``, ``levels``, ``stripe_sizes_kb``,
``queue_depth``); the table's keys override it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blksim.common.config_values import (ConfigError, check_keys, int_value, sectors_value,
                                          seconds_text)
from blksim.disk_models.registry import DeviceType, register


RAID_KEYS = {
    "controller": "a controller preset (perc5i, perch755, sas5ir) or a path to a controller "
                  "TOML file",
    "level": "raid0, raid1, raid5, raid6 or raid10",
    "members": "the number of member drives",
    "drive": "the members' drive: a preset or a drive TOML file (default cheetah15k4)",
    "service": "instead of a drive, members with fixed or exponential service times",
    "service_time": "with service: the members' (mean) service time",
    "capacity": "with service: each member's size (default 1t)",
    "member_queue_depth": "each member's tagged queue depth (default: the drive's)",
    "stripe_size": "the stripe unit: bytes on one member before the next, a power of two "
                   "of at least 4k (default 64k)",
    "cache": "the controller's cache, bytes, a multiple of its 4k line (0: none)",
    "write_policy": "write-back (battery-backed) or write-through",
    "read_policy": "none, read-ahead or adaptive",
    "read_ahead_rows": "stripe rows read ahead (default 1)",
    "high_water": "write-back: dirty share of the cache that starts destaging (default 0.75)",
    "low_water": "write-back: dirty share destaging stops at (default 0.5)",
    "destage_idle": "write-back: idle time after which everything dirty is written (default 50ms)",
    "flush_interval": "write-back: the cache flush timer's period, whole seconds 1s to 255s "
                      "(LSI MegaRAID's cache flush interval; default 0, no timer; the PERC "
                      "presets: 4s)",
    "destage_rows": "write-back: rows written back at once (default: two destage writes of "
                    "max_member_io a member, 2 x max_member_io / stripe_size)",
    "max_member_io": "the largest member I/O the controller makes by joining pieces, bytes "
                     "(default 512k, blksim's choice)",
    "overhead": "the controller's time to process a command (default 0)",
    "host_mb_per_s": "the host transfer rate, MB/s of 10^6 bytes (default 1000)",
    "host_link": "a name: the LUNs whose raid tables give the same name share one host "
                 "link (one port and path, e.g. one 2 Gb Fibre Channel link), one "
                 "transfer at a time at their common host_mb_per_s (default: a link of "
                 "its own)",
    "failed": "a failed member, 0..members-1 (degraded mode; raid1, raid5, raid6, raid10)",
}
#: The [device] keys of a drive or service-law device, which a RAID controller's members
#: take from its raid table instead.
_MEMBER_KEYS = ("drive", "service", "service_time", "capacity")
_PRESET_ONLY = ("name", "levels", "stripe_sizes_kb", "queue_depth")


@dataclass
class RaidConfig:
    """A hardware RAID controller and its array, every default filled in."""

    controller: str | None
    level: str
    members: int
    drive: str
    service: str | None
    service_time: float
    member_sectors: int
    member_queue_depth: int | None
    strip: int
    cache_sectors: int
    write_policy: str
    read_policy: str
    read_ahead_rows: int
    high_water: float
    low_water: float
    destage_idle: float
    destage_rows: int | None
    flush_interval: float
    max_member_io: int
    overhead: float
    host_rate: float
    failed: int | None
    queue_depth: int
    sectors: int
    host_link: str | None = None

    def table(self) -> dict:
        """The ``raid`` table that gives this configuration back."""
        t = {"level": self.level, "members": self.members,
             **({"controller": self.controller} if self.controller else {}),
             "stripe_size": self.strip * 512, "cache": self.cache_sectors * 512,
             "write_policy": self.write_policy, "read_policy": self.read_policy,
             "read_ahead_rows": self.read_ahead_rows, "high_water": self.high_water,
             "low_water": self.low_water, "destage_idle": seconds_text(self.destage_idle),
             **({"flush_interval": seconds_text(self.flush_interval)}
                if self.flush_interval or self.controller else {}),
             "max_member_io": self.max_member_io * 512,
             "overhead": seconds_text(self.overhead), "host_mb_per_s": self.host_rate / 1e6,
             **({"host_link": self.host_link} if self.host_link else {})}
        if self.service is None:
            t["drive"] = self.drive
        else:
            t.update(service=self.service, service_time=seconds_text(self.service_time),
                     capacity=self.member_sectors * 512)
        for key in ("member_queue_depth", "destage_rows", "failed"):
            if getattr(self, key) is not None:
                t[key] = getattr(self, key)
        return t


def _controller_preset(name, where: str, base_dir: str) -> dict:
    import os
    from blksim._compat import TomlFileError, load_toml
    from blksim.disk_models.presets import CONTROLLER_DIR, list_controllers
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: controller expected a preset name or a path, found "
                          f"{name!r}")
    if name.endswith(".toml") or "/" in name:
        path = name if os.path.isabs(name) else os.path.join(base_dir, name)
    else:
        if name not in list_controllers():
            raise ConfigError(f"{where}: controller: unknown preset {name!r}; presets: "
                              f"{', '.join(list_controllers())}")
        path = CONTROLLER_DIR / f"{name}.toml"
    if os.path.exists(path) and not os.path.isfile(path):
        raise ConfigError(f"{where}: controller = {name!r}: expected a controller TOML file, "
                          f"found {str(path)!r}, which is not a regular file")
    try:
        data = load_toml(str(path))
    except FileNotFoundError:
        raise ConfigError(f"{where}: controller: no such file {str(path)!r}") from None
    except TomlFileError as exc:
        raise ConfigError(f"{where}: controller: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{where}: controller = {name!r}: cannot read it "
                          f"({exc.strerror or exc})") from None
    if not data:
        raise ConfigError(f"{where}: controller = {name!r}: the file sets nothing; expected "
                          f"a controller's keys (`blksim docs raid` lists them)")
    check_keys(data, {**{k: v for k, v in RAID_KEYS.items()
                         if k not in ("controller", "level", "members", "failed")},
                      **{k: "" for k in _PRESET_ONLY}}, f"{where}: controller {str(path)}")
    _check_preset_only(data, f"{where}: controller {str(path)}")
    return data


def _check_preset_only(data: dict, where: str) -> None:
    """The keys only a controller file gives: its name, the levels and stripe sizes it
    offers and its LUN's queue depth (the [device] table's bounds)."""
    from blksim.disk_models.raid_layout import LEVELS
    if "name" in data and (not isinstance(data["name"], str) or not data["name"]):
        raise ConfigError(f"{where}: name expected a string, found {data['name']!r}")
    levels = data.get("levels", list(LEVELS))
    if not isinstance(levels, list) or not levels or any(v not in LEVELS for v in levels):
        raise ConfigError(f"{where}: levels expected a list of {', '.join(LEVELS)}, found "
                          f"{levels!r}")
    sizes = data.get("stripe_sizes_kb", [4])
    if not isinstance(sizes, list) or not sizes or any(
            isinstance(k, bool) or not isinstance(k, int) or k < 4 or k & (k - 1)
            for k in sizes):
        raise ConfigError(f"{where}: stripe_sizes_kb expected a list of powers of two from 4 "
                          f"(KiB), found {sizes!r}")
    int_value(data, "queue_depth", where, 128, 1, 256)


def raid_config(table, where: str, base_dir: str) -> RaidConfig:
    """A device's ``raid`` table (over its controller preset) as a `RaidConfig`. An error
    in a value the controller file gave (not the table) names that file too."""
    check_keys(table, RAID_KEYS, where)
    preset = {}
    if "controller" in table:
        preset = _controller_preset(table["controller"], where, base_dir)
    try:
        return _raid_config(table, preset, where, base_dir)
    except ConfigError as exc:
        given = [k for k in preset if k not in table and k not in _PRESET_ONLY
                 and re.search(rf"\b{k}\b", str(exc))]
        if not given or not (table["controller"].endswith(".toml") or "/" in
                             table["controller"]):
            raise
        raise ConfigError(f"{exc} (the value of controller file "
                          f"{table['controller']!r})") from None


def _raid_config(table: dict, preset: dict, where: str, base_dir: str) -> RaidConfig:
    from blksim.disk_models.raid import LINE, MAX_MEMBER_IO, READ_POLICIES, WRITE_POLICIES
    from blksim.disk_models.raid_layout import LEVELS, RaidLayout, RaidLayoutError
    from blksim.common.config_values import time_value
    t = {**{k: v for k, v in preset.items() if k not in _PRESET_ONLY}, **table}
    for key in ("level", "members"):
        if key not in t:
            raise ConfigError(f"{where}: {key} is required ({RAID_KEYS[key]})")
    level = t["level"]
    allowed = preset.get("levels", LEVELS)
    if level not in allowed:
        owner = f"controller {preset.get('name', table.get('controller'))!r} offers" \
            if preset else "valid:"
        raise ConfigError(f"{where}: level = {level!r}; {owner} {', '.join(allowed)}"
                          f"{' (its levels)' if preset else ''}")
    members = int_value(t, "members", where, None, 1, 256)

    def size(key, default):
        return sectors_value(t, key, where, default)

    strip = size("stripe_size", "64k")
    # at least the cache's 4 KiB line (and Linux md's own least chunk, PAGE_SIZE:
    # do_md_run, drivers/md/md.c, 2.6.18)
    if strip < LINE or strip & (strip - 1):
        raise ConfigError(f"{where}: stripe_size expected a power of two of at least 4k, "
                          f"found {t.get('stripe_size')!r}")
    sizes = preset.get("stripe_sizes_kb")
    if sizes and strip // 2 not in sizes:
        raise ConfigError(f"{where}: stripe_size = {t.get('stripe_size')!r}; controller "
                          f"{preset.get('name')!r} offers "
                          f"{', '.join(f'{k}k' for k in sizes)} (its stripe_sizes_kb)")
    max_io = sectors_value(t, "max_member_io", where, MAX_MEMBER_IO * 512, positive=True)
    if max_io % LINE or max_io > 1 << 16:
        raise ConfigError(f"{where}: max_member_io expected a multiple of 4k up to 32m, "
                          f"found {t.get('max_member_io')!r}")
    cache = size("cache", 0)
    if cache % LINE:
        raise ConfigError(f"{where}: cache expected 0 (no cache) or a multiple of 4k (its "
                          f"line), found {t.get('cache')!r}")
    service = t.get("service")
    service_time = 0.0
    drive = t.get("drive", "cheetah15k4")
    if service is not None:
        if "drive" in table:
            raise ConfigError(f"{where}: give either drive or service, not both")
        if service not in ("fixed", "exponential"):
            raise ConfigError(f"{where}: service = {service!r}; valid: fixed, exponential")
        service_time = time_value(t, "service_time", where, None)
        if not service_time:
            raise ConfigError(f"{where}: service_time expected a positive time with service")
        member_sectors = sectors_value(t, "capacity", where, "1t", positive=True)
    else:
        import os
        from blksim.disk_models.base import DeviceError
        from blksim.disk_models.presets import load_drive
        if not isinstance(drive, str):
            raise ConfigError(f"{where}: drive expected a preset name or a path, found "
                              f"{drive!r}")
        if (drive.endswith(".toml") or "/" in drive) and not os.path.isabs(drive):
            drive = os.path.join(base_dir, drive)
        try:
            member_sectors = load_drive(drive).capacity
        except DeviceError as exc:
            raise ConfigError(f"{where}: drive: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{where}: drive = {t.get('drive')!r}: cannot read it "
                              f"({exc.strerror or exc})") from None
    for key in ("write_policy", "read_policy"):
        valid = WRITE_POLICIES if key == "write_policy" else READ_POLICIES
        value = t.get(key, valid[-1] if key == "write_policy" else "none")
        if value not in valid:
            raise ConfigError(f"{where}: {key} = {value!r}; valid: {', '.join(valid)}")
    fractions = {}
    for key, default in (("high_water", 0.75), ("low_water", 0.5)):
        value = t.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0.0 <= value <= 1.0:
            raise ConfigError(f"{where}: {key} expected a fraction from 0 to 1, found "
                              f"{value!r}")
        fractions[key] = float(value)
    if fractions["low_water"] >= fractions["high_water"]:
        raise ConfigError(f"{where}: low_water ({fractions['low_water']}) must be below "
                          f"high_water ({fractions['high_water']})")
    rate = t.get("host_mb_per_s", 1000)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < 1e9:
        raise ConfigError(f"{where}: host_mb_per_s expected a positive number, found {rate!r}")
    failed = int_value(t, "failed", where, None, 0, members - 1)
    link = t.get("host_link")
    if link is not None and (not isinstance(link, str) or not link.strip()):
        raise ConfigError(f"{where}: host_link expected a name (a string), found {link!r}")
    try:
        layout = RaidLayout(level, members, member_sectors, strip, failed)
    except RaidLayoutError as exc:
        key = "failed" if "fail" in str(exc) or "redundancy" in str(exc) else \
            "stripe_size" if "strip" in str(exc) else "members"
        given = f" (capacity = {t['capacity']!r})" if key == "stripe_size" and \
            "capacity" in t and service is not None else ""
        raise ConfigError(f"{where}: {key}: {exc}{given}") from None
    controller = table.get("controller")
    if isinstance(controller, str) and (controller.endswith(".toml") or "/" in controller):
        import os
        controller = os.path.join(base_dir, controller)       # found from anywhere
    return RaidConfig(
        controller=controller, level=level, members=members, drive=drive,
        service=service, service_time=service_time, member_sectors=member_sectors,
        member_queue_depth=int_value(t, "member_queue_depth", where, None, 1, 256),
        strip=strip, cache_sectors=cache,
        write_policy=t.get("write_policy", "write-through"),
        read_policy=t.get("read_policy", "none"),
        read_ahead_rows=int_value(t, "read_ahead_rows", where, 1, 0, 64),
        high_water=fractions["high_water"], low_water=fractions["low_water"],
        destage_idle=time_value(t, "destage_idle", where, 0.05),
        destage_rows=int_value(t, "destage_rows", where, None, 1, 1024),
        flush_interval=_flush_interval(t, where),
        max_member_io=max_io,
        overhead=time_value(t, "overhead", where, 0.0), host_rate=float(rate) * 1e6,
        failed=failed, queue_depth=int(preset.get("queue_depth", 128)),
        sectors=layout.capacity, host_link=link)


#: The longest flush interval accepted (blksim's bound: we found no published range for
#: MegaCLI's ``-AdpSetProp CacheFlushInterval -val``; a longer period is no timer at all
#: for any run blksim makes).
_FLUSH_INTERVAL_MAX = 255.0


def _flush_interval(t: dict, where: str) -> float:
    """``flush_interval``: 0 (no timer) or whole seconds from 1 to 255 (MegaCLI's
    ``CacheFlushInterval -val`` takes a whole number of seconds)."""
    from blksim.common.config_values import time_value
    value = time_value(t, "flush_interval", where, 0.0)
    if value and (value > _FLUSH_INTERVAL_MAX or value < 1.0 or value != int(value)):
        raise ConfigError(f"{where}: flush_interval expected 0 (no timer) or whole seconds "
                          f"from 1s to 255s, found {t.get('flush_interval')!r}")
    return value


def build_raid(name: str, r: RaidConfig, queue_depth: int, seed: int):
    """A `blksim.disk_models.raid.RaidController` for ``r``: its members drawn their seeds
    in turn from ``seed``, each with /proc/diskstats-like counters
    (``controller.member_stats``)."""
    import os
    import random
    from blksim.block.diskstats import DiskStats
    from blksim.disk_models.drive import make_drive
    from blksim.disk_models.presets import load_drive
    from blksim.disk_models.raid import RaidController
    from blksim.disk_models.raid_layout import RaidLayout
    from blksim.disk_models.synthetic import ServiceLawDevice
    rng = random.Random(seed)
    spec = None if r.service is not None else load_drive(r.drive)
    members = []
    for _ in range(r.members):
        s = rng.getrandbits(63)
        if spec is None:
            members.append(ServiceLawDevice(r.service, r.service_time, capacity=r.member_sectors,
                                            queue_depth=r.member_queue_depth or 1, seed=s))
        else:
            members.append(make_drive(spec, seed=s, queue_depth=r.member_queue_depth))
    layout = RaidLayout(r.level, r.members, r.member_sectors, r.strip, r.failed)
    return RaidController(
        name, layout, members, queue_depth=queue_depth, cache_sectors=r.cache_sectors,
        write_policy=r.write_policy, read_policy=r.read_policy, high_water=r.high_water,
        low_water=r.low_water, destage_idle=r.destage_idle, destage_rows=r.destage_rows,
        flush_interval=r.flush_interval, read_ahead_rows=r.read_ahead_rows, overhead=r.overhead, host_rate=r.host_rate,
        max_member_io=r.max_member_io, host_link=r.host_link,
        member_stats=[DiskStats() for _ in members],
        label=os.path.splitext(os.path.basename(r.controller))[0] if r.controller else None)


def _files(r: RaidConfig) -> list:
    """The controller file (a preset's too) and the members' drive file."""
    import os
    from blksim.disk_models.presets import CONTROLLER_DIR
    from blksim.disk_models.types.mechanical import drive_file
    files = []
    if r.controller:
        files.append(r.controller if os.path.isabs(r.controller)
                     else str(CONTROLLER_DIR / f"{r.controller}.toml"))
    if r.service is None:
        files.append(drive_file(r.drive))
    return files


TYPE = register(DeviceType(
    name="raid", module=__name__, selected_by="raid",
    kind_keys={"raid": "instead of a drive, a hardware RAID controller and its array "
                       "(docs/raid.md)"},
    parse=lambda device, where: raid_config(device["raid"], where.sub("raid"), where.base_dir),
    build=lambda r, name, queue_depth, seed: build_raid(name, r, queue_depth, seed),
    table=lambda r, queue_depth: {"queue_depth": queue_depth, "raid": r.table()},
    sectors=lambda r, where: r.sectors,
    queue_depth=lambda r: r.queue_depth,
    files=_files,
    rejects=lambda key: f"{key} with raid: the members' drive goes in the raid table"
    if key in _MEMBER_KEYS else None))
