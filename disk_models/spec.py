"""`DriveSpec`: the description of a mechanical drive, read from TOML or a dict.

Every number carries its unit in its name (``_ms``, ``_mb_per_s``, ``_sectors``).
Validation is strict: an unknown key, a missing key, a value of the wrong type or
an impossible geometry raises `DeviceError` naming the file, the key, what was
expected and what was found.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from disk_models.base import DeviceError

# key -> (required, allowed python types, description of what is expected)
_TOP_KEYS = {
    "name": (True, (str,), "a string"),
    "description": (False, (str,), "a string"),
    "source": (False, (str, list), "a string or a list of strings"),
    "rpm": (True, (int, float), "a number > 0 (revolutions per minute)"),
    "heads": (True, (int,), "an integer > 0 (recording surfaces)"),
    "cylinders": (True, (int,), "an integer > 0"),
    "sectors": (False, (int,), "an integer > 0, at most the capacity of the zones"),
    "zones": (True, (list,), "an array of tables {first_cyl, last_cyl, sectors_per_track}"),
    "track_skew_sectors": (True, (int,), "an integer >= 0"),
    "cylinder_skew_sectors": (True, (int,), "an integer >= 0"),
    "head_switch_ms": (True, (int, float), "a number >= 0"),
    "write_settle_ms": (False, (int, float), "a number >= 0"),
    "seek": (True, (dict,), 'a table with form = "curve" or "table"'),
    "command_overhead_ms": (False, (int, float), "a number >= 0"),
    "completion_overhead_ms": (False, (int, float), "a number >= 0"),
    "bus_mb_per_s": (True, (int, float), "a number > 0 (1 MB = 10^6 bytes)"),
    "queue_depth": (False, (int,), "an integer >= 1"),
}

_ZONE_KEYS = {
    "first_cyl": (True, (int,), "an integer >= 0"),
    "last_cyl": (True, (int,), "an integer >= first_cyl"),
    "sectors_per_track": (True, (int,), "an integer > 0"),
    "track_skew_sectors": (False, (int,), "an integer >= 0 (overrides the drive's)"),
    "cylinder_skew_sectors": (False, (int,), "an integer >= 0 (overrides the drive's)"),
}

_SEEK_CURVE_KEYS = {
    "form": (True, (str,), '"curve"'),
    "single_cyl_ms": (True, (int, float), "a number > 0"),
    "avg_ms": (True, (int, float), "a number > single_cyl_ms"),
    "full_stroke_ms": (True, (int, float), "a number > avg_ms"),
}

_SEEK_TABLE_KEYS = {
    "form": (True, (str,), '"table"'),
    "points": (True, (list,), "an array of [distance_cyl, ms] pairs"),
}


@dataclass(frozen=True)
class ZoneSpec:
    """Cylinders ``first_cyl..last_cyl`` (inclusive) with ``sectors_per_track`` sectors per track.

    ``track_skew_sectors`` / ``cylinder_skew_sectors`` are the skews used inside
    this zone (None = the drive's default).
    """

    first_cyl: int
    last_cyl: int
    sectors_per_track: int
    track_skew_sectors: int | None = None
    cylinder_skew_sectors: int | None = None

    @property
    def cylinders(self) -> int:
        """Number of cylinders in the zone."""
        return self.last_cyl - self.first_cyl + 1


@dataclass(frozen=True)
class SeekSpec:
    """Seek description: ``form`` "curve" (three data-sheet times) or "table" (measured points)."""

    form: str
    single_cyl_ms: float = 0.0
    avg_ms: float = 0.0
    full_stroke_ms: float = 0.0
    points: tuple = ()


@dataclass(frozen=True)
class DriveSpec:
    """A mechanical drive: geometry, zones, mechanics and interface timings.

    Times are in milliseconds as written in the file; the drive model converts
    them to seconds. ``capacity`` is in 512-byte sectors.
    """

    name: str
    rpm: float
    heads: int
    cylinders: int
    zones: tuple
    track_skew_sectors: int
    cylinder_skew_sectors: int
    head_switch_ms: float
    seek: SeekSpec
    bus_mb_per_s: float
    description: str = ""
    source: tuple = ()
    sectors: int | None = None
    write_settle_ms: float = 0.0
    command_overhead_ms: float = 0.0
    completion_overhead_ms: float = 0.0
    queue_depth: int = 1
    origin: str = field(default="<dict>", compare=False)

    @property
    def zoned_capacity(self) -> int:
        """Sectors the zones hold: sum over zones of cylinders * heads * sectors_per_track."""
        return sum(z.cylinders * z.sectors_per_track for z in self.zones) * self.heads

    @property
    def capacity(self) -> int:
        """Addressable sectors: ``sectors`` when given, else the zoned capacity."""
        return self.sectors if self.sectors is not None else self.zoned_capacity

    @classmethod
    def from_dict(cls, data: dict, origin: str = "<dict>") -> "DriveSpec":
        """Build and validate a spec from a parsed TOML table (``origin`` names it in errors)."""
        return _parse(data, origin)

    @classmethod
    def from_toml(cls, path) -> "DriveSpec":
        """Read and validate a spec from a TOML file."""
        path = Path(path)
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise DeviceError(f"{path}: no such drive description file") from None
        except tomllib.TOMLDecodeError as e:
            raise DeviceError(f"{path}: not valid TOML: {e}") from None
        return _parse(data, str(path))

    def to_dict(self) -> dict:
        """The spec as a TOML-ready dict (the inverse of `from_dict`)."""
        d = {"name": self.name}
        if self.description:
            d["description"] = self.description
        if self.source:
            d["source"] = list(self.source)
        d.update(rpm=self.rpm, heads=self.heads, cylinders=self.cylinders)
        if self.sectors is not None:
            d["sectors"] = self.sectors
        d.update(track_skew_sectors=self.track_skew_sectors,
                 cylinder_skew_sectors=self.cylinder_skew_sectors,
                 head_switch_ms=self.head_switch_ms, write_settle_ms=self.write_settle_ms,
                 command_overhead_ms=self.command_overhead_ms,
                 completion_overhead_ms=self.completion_overhead_ms,
                 bus_mb_per_s=self.bus_mb_per_s, queue_depth=self.queue_depth)
        if self.seek.form == "curve":
            d["seek"] = {"form": "curve", "single_cyl_ms": self.seek.single_cyl_ms,
                         "avg_ms": self.seek.avg_ms, "full_stroke_ms": self.seek.full_stroke_ms}
        else:
            d["seek"] = {"form": "table", "points": [list(p) for p in self.seek.points]}
        zones = []
        for z in self.zones:
            zd = {"first_cyl": z.first_cyl, "last_cyl": z.last_cyl,
                  "sectors_per_track": z.sectors_per_track}
            if z.track_skew_sectors is not None:
                zd["track_skew_sectors"] = z.track_skew_sectors
            if z.cylinder_skew_sectors is not None:
                zd["cylinder_skew_sectors"] = z.cylinder_skew_sectors
            zones.append(zd)
        d["zones"] = zones
        return d


def _fail(origin: str, key: str, expected: str, found) -> DeviceError:
    return DeviceError(f"{origin}: key '{key}': expected {expected}, found {found!r}")


def _check_keys(table: dict, schema: dict, origin: str, where: str) -> None:
    if not isinstance(table, dict):
        raise _fail(origin, where or "<top>", "a table", table)
    unknown = sorted(set(table) - set(schema))
    if unknown:
        prefix = f"{where}." if where else ""
        raise DeviceError(f"{origin}: unknown key '{prefix}{unknown[0]}'; valid keys"
                          f"{' in ' + where if where else ''} are: {', '.join(sorted(schema))}")
    for key, (required, types, expected) in schema.items():
        full = f"{where}.{key}" if where else key
        if key not in table:
            if required:
                raise DeviceError(f"{origin}: missing key '{full}' ({expected})")
            continue
        value = table[key]
        # bool is an int subclass; a boolean is never a valid number here
        if isinstance(value, bool) or not isinstance(value, types):
            raise _fail(origin, full, expected, value)


def _positive(origin, key, value, strict=True):
    if (value <= 0) if strict else (value < 0):
        raise _fail(origin, key, "a number > 0" if strict else "a number >= 0", value)


def _parse(data: dict, origin: str) -> DriveSpec:
    _check_keys(data, _TOP_KEYS, origin, "")
    for key in ("rpm", "heads", "cylinders", "bus_mb_per_s"):
        _positive(origin, key, data[key])
    for key in ("track_skew_sectors", "cylinder_skew_sectors", "head_switch_ms",
                "write_settle_ms", "command_overhead_ms", "completion_overhead_ms"):
        if key in data:
            _positive(origin, key, data[key], strict=False)
    qd = data.get("queue_depth", 1)
    if qd < 1:
        raise _fail(origin, "queue_depth", "an integer >= 1", qd)
    source = data.get("source", ())
    if isinstance(source, str):
        source = (source,)
    elif not all(isinstance(s, str) for s in source):
        raise _fail(origin, "source", "a string or a list of strings", source)

    zones = _parse_zones(data["zones"], data["cylinders"], origin)
    seek = _parse_seek(data["seek"], data["cylinders"], origin)
    spec = DriveSpec(
        name=data["name"], description=data.get("description", ""), source=tuple(source),
        rpm=float(data["rpm"]), heads=data["heads"], cylinders=data["cylinders"],
        sectors=data.get("sectors"), zones=zones,
        track_skew_sectors=data["track_skew_sectors"],
        cylinder_skew_sectors=data["cylinder_skew_sectors"],
        head_switch_ms=float(data["head_switch_ms"]),
        write_settle_ms=float(data.get("write_settle_ms", 0.0)),
        seek=seek,
        command_overhead_ms=float(data.get("command_overhead_ms", 0.0)),
        completion_overhead_ms=float(data.get("completion_overhead_ms", 0.0)),
        bus_mb_per_s=float(data["bus_mb_per_s"]), queue_depth=qd, origin=origin)
    if spec.sectors is not None:
        if spec.sectors <= 0 or spec.sectors > spec.zoned_capacity:
            raise _fail(origin, "sectors",
                        f"an integer in 1..{spec.zoned_capacity} (the capacity of the zones)",
                        spec.sectors)
    return spec


def _parse_zones(zones: list, cylinders: int, origin: str) -> tuple:
    if not zones:
        raise _fail(origin, "zones", "at least one zone", zones)
    out = []
    expect_first = 0
    for i, z in enumerate(zones):
        where = f"zones[{i}]"
        _check_keys(z, _ZONE_KEYS, origin, where)
        if z["sectors_per_track"] <= 0:
            raise _fail(origin, f"{where}.sectors_per_track", "an integer > 0",
                        z["sectors_per_track"])
        if z["first_cyl"] != expect_first:
            what = "overlaps the previous zone" if z["first_cyl"] < expect_first else \
                "leaves a gap after the previous zone"
            raise DeviceError(f"{origin}: key '{where}.first_cyl': expected {expect_first} "
                              f"(zones must cover cylinders 0..{cylinders - 1} in order without "
                              f"gaps or overlaps), found {z['first_cyl']}: {what}")
        if z["last_cyl"] < z["first_cyl"]:
            raise _fail(origin, f"{where}.last_cyl", f"an integer >= first_cyl ({z['first_cyl']})",
                        z["last_cyl"])
        for k in ("track_skew_sectors", "cylinder_skew_sectors"):
            if k in z and z[k] < 0:
                raise _fail(origin, f"{where}.{k}", "an integer >= 0", z[k])
        out.append(ZoneSpec(z["first_cyl"], z["last_cyl"], z["sectors_per_track"],
                            z.get("track_skew_sectors"), z.get("cylinder_skew_sectors")))
        expect_first = z["last_cyl"] + 1
    if expect_first != cylinders:
        raise DeviceError(f"{origin}: key 'zones[{len(zones) - 1}].last_cyl': expected "
                          f"{cylinders - 1} (the last cylinder, cylinders = {cylinders}), "
                          f"found {expect_first - 1}")
    return tuple(out)


def _parse_seek(seek: dict, cylinders: int, origin: str) -> SeekSpec:
    if not isinstance(seek, dict):
        raise _fail(origin, "seek", "a table", seek)
    form = seek.get("form")
    if form == "curve":
        _check_keys(seek, _SEEK_CURVE_KEYS, origin, "seek")
        s, a, f = seek["single_cyl_ms"], seek["avg_ms"], seek["full_stroke_ms"]
        if s <= 0:
            raise _fail(origin, "seek.single_cyl_ms", "a number > 0", s)
        if not s < a < f:
            raise DeviceError(f"{origin}: key 'seek.avg_ms': expected single_cyl_ms < avg_ms < "
                              f"full_stroke_ms, found {s} / {a} / {f}")
        if cylinders < 3:
            raise _fail(origin, "cylinders", "at least 3 for a seek curve", cylinders)
        return SeekSpec("curve", float(s), float(a), float(f))
    if form == "table":
        _check_keys(seek, _SEEK_TABLE_KEYS, origin, "seek")
        pts = []
        prev = 0
        for i, p in enumerate(seek["points"]):
            key = f"seek.points[{i}]"
            if (not isinstance(p, list) or len(p) != 2
                    or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in p)):
                raise _fail(origin, key, "a pair [distance_cyl, ms]", p)
            d, ms = p
            if d != int(d) or d <= prev:
                raise _fail(origin, key, f"an integer distance > {prev} (increasing order)", d)
            if ms < 0:
                raise _fail(origin, key, "a time >= 0 ms", ms)
            pts.append((int(d), float(ms)))
            prev = d
        if not pts:
            raise _fail(origin, "seek.points", "at least one [distance_cyl, ms] pair", [])
        return SeekSpec("table", points=tuple(pts))
    raise DeviceError(f"{origin}: key 'seek.form': expected \"curve\" or \"table\", found {form!r}")
