"""`DriveSpec`: the description of a mechanical drive, read from TOML or a dict.

Every number carries its unit in its name (``_ms``, ``_mb_per_s``, ``_sectors``).
Validation is strict: an unknown key, a missing key, a value of the wrong type or
an impossible geometry raises `DeviceError` naming the file, the key, what was
expected and what was found.
"""

from __future__ import annotations

import math

from blksim._compat import TomlFileError, load_toml
from dataclasses import dataclass, field
from pathlib import Path

from blksim.disk_models.base import DeviceError
from blksim.disk_models.layout import MAPPINGS
from blksim.disk_models.sparing import SUPPORTED as SPARING_SCHEMES

#: Spindle speeds a drive description may give: no disk ever spun slower than 60 rpm or
#: faster than 100,000 (a rotation of 1 s to 0.6 ms).
MIN_RPM, MAX_RPM = 60, 100_000
#: The longest time (ms) a drive description may give for one mechanical or controller step.
MAX_MS = 10_000

# DiskSim's ioqueue "Scheduling policy" numbers (disksim_ioqueue.h) -> names
QUEUE_POLICIES = ("fcfs", "elevator_lbn", "cycle_lbn", "sstf_lbn", "elevator_cyl", "cycle_cyl",
                  "sstf_cyl", "sptf_opt", "spctf_opt", "satf_opt", "wptf_opt", "wpctf_opt",
                  "watf_opt", "asptf_opt", "aspctf_opt", "asatf_opt", "vscan_lbn", "vscan_cyl")

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
    "write_settle_ms": (False, (int, float), "a number (ms; DiskSim allows < 0)"),
    "seek": (True, (dict,), 'a table with form = "curve", "table" or "hpl"'),
    "command_overhead_ms": (False, (int, float), "a number >= 0"),
    "completion_overhead_ms": (False, (int, float), "a number >= 0"),
    "bus_mb_per_s": (True, (int, float), "a number > 0 (1 MB = 10^6 bytes)"),
    "queue_depth": (False, (int,), "an integer >= 1"),
    "layout": (False, (dict,), "a table {sparing, range_cylinders, mapping}"),
    "overheads": (False, (dict,), "a table of controller overheads (see docs/disksim-import.md)"),
    "cache": (False, (dict,), "a table of on-disk cache parameters"),
    "queue": (False, (dict,), "a table {policy}"),
}

_ZONE_KEYS = {
    "first_cyl": (True, (int,), "an integer >= 0"),
    "last_cyl": (True, (int,), "an integer >= first_cyl"),
    "sectors_per_track": (True, (int,), "an integer > 0"),
    "track_skew_sectors": (False, (int,), "an integer >= 0 (overrides the drive's)"),
    "cylinder_skew_sectors": (False, (int,), "an integer >= 0 (overrides the drive's)"),
    # g1 layout only (a [layout] table)
    "first_block_offset_sectors": (False, (int,), "an integer >= 0"),
    "empty_sectors_at_front": (False, (int,), "an integer >= 0"),
    "spares": (False, (int,), "an integer >= 0"),
    "slips": (False, (list,), "a list of integers >= 0 (zone-relative sectors, or tracks)"),
    "defects": (False, (list,), "a list of [defect, remap] pairs of integers >= 0"),
}
_G1_ZONE_KEYS = ("first_block_offset_sectors", "empty_sectors_at_front", "spares", "slips",
                 "defects")

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

_SEEK_HPL_KEYS = {
    "form": (True, (str,), '"hpl"'),
    "boundary_cyl": (True, (int,), "an integer >= 0 (sqrt part below it, linear part from it)"),
    "sqrt_const_ms": (True, (int, float), "a number >= 0"),
    "sqrt_mult_ms": (True, (int, float), "a number >= 0"),
    "linear_const_ms": (True, (int, float), "a number >= 0"),
    "linear_mult_ms": (True, (int, float), "a number >= 0"),
    "single_cyl_ms": (False, (int, float), "a number >= 0 (default: the equation)"),
    "first_ten_ms": (False, (list,), "a list of 10 numbers >= 0 (distances 1..10)"),
}

_LAYOUT_KEYS = {
    "sparing": (True, (str,), "one of " + ", ".join(SPARING_SCHEMES)),
    "range_cylinders": (False, (int,), "an integer >= 1 (sectors_per_range only)"),
    "mapping": (False, (str,), "one of " + ", ".join(MAPPINGS)),
}

_NUM = (int, float)
_MS = "a number >= 0 (ms)"
_OVERHEAD_KEYS = {k: (False, _NUM, _MS) for k in (
    "per_request_ms",
    "read_hit_after_read_ms", "read_hit_after_write_ms",
    "read_miss_after_read_ms", "read_miss_after_write_ms",
    "write_hit_after_read_ms", "write_hit_after_write_ms",
    "write_miss_after_read_ms", "write_miss_after_write_ms",
    "read_completion_ms", "write_completion_ms", "data_preparation_ms",
    "first_reselect_ms", "other_reselect_ms",
    "read_disconnect_after_read_ms", "read_disconnect_after_write_ms", "write_disconnect_ms",
    "minimum_seek_delay_ms", "bus_sector_ms", "bus_write_sector_ms",
    "extradisc_command_ms", "extradisc_disconnect_ms", "extradisc_inter_disconnect_ms",
    "extradisc_second_disconnect_ms", "extradisc_seek_delta_ms")}
_OVERHEAD_KEYS["time_scale"] = (False, _NUM, "a number > 0 (multiplies every overhead)")
_OVERHEAD_KEYS.update({k: (False, (bool,), "true or false") for k in (
    "hold_bus_entire_read", "hold_bus_entire_write", "never_disconnect",
    "extra_write_disconnect")})

_CACHE_BOOLS = (
    "enabled", "separate_write_segment", "watermark_by_request_size", "calc_sector_by_sector",
    "read_ahead_on_idle_hit", "read_any_free_blocks", "immediate_buffer_read",
    "immediate_buffer_write", "combine_seq_writes", "stop_prefetch_in_sector",
    "disconnect_write_if_seek", "write_hit_stop_prefetch", "read_directly_to_buffer",
    "immediate_transfer_partial_hit", "allow_read_hits_on_write_data", "allow_almost_read_hits",
    "allow_sneaky_full_read_hits", "allow_sneaky_partial_read_hits",
    "allow_sneaky_intermediate_read_hits", "allow_write_prebuffering")
_CACHE_KEYS = {k: (False, (bool,), "true or false") for k in _CACHE_BOOLS}
_CACHE_KEYS.update({
    "segments": (False, (int,), "an integer >= 1"),
    "segment_size_sectors": (False, (int,), "an integer >= 1"),
    "write_segments": (False, (int,), "an integer >= 0"),
    "low_water_mark": (False, _NUM, "a fraction 0..1"),
    "high_water_mark": (False, _NUM, "a fraction 0..1"),
    "continuous_read": (False, (int,), "an integer 0..4 (DiskSim 'Buffer continuous read')"),
    "read_ahead_min_sectors": (False, (int,), "an integer >= 0"),
    "read_ahead_max_sectors": (False, (int,), "an integer >= 0"),
    "read_ahead_over_requested": (False, (int,), "an integer (DiskSim semantics)"),
    "fast_write_level": (False, (int,), "0 (no write-back), 1 or 2"),
    "preseeking_level": (False, (int,), "an integer 0..2"),
})
_CACHE_DEFAULTS = {k: False for k in _CACHE_BOOLS}
_CACHE_DEFAULTS.update(segments=1, segment_size_sectors=1, write_segments=0, low_water_mark=0.0,
                       high_water_mark=0.0, continuous_read=0, read_ahead_min_sectors=0,
                       read_ahead_max_sectors=0, read_ahead_over_requested=0, fast_write_level=0,
                       preseeking_level=0)

_QUEUE_KEYS = {"policy": (False, (str,), "one of " + ", ".join(QUEUE_POLICIES)),
               "age_weight": (False, (int, float), "a number >= 0 (ms of credit per second "
                                                   "waited, asptf_opt)")}


@dataclass(frozen=True)
class ZoneSpec:
    """Cylinders ``first_cyl..last_cyl`` (inclusive) with ``sectors_per_track`` sectors per track.

    ``track_skew_sectors`` / ``cylinder_skew_sectors`` are the skews used inside
    this zone (None = the drive's default). The other fields describe DiskSim's g1
    layout and are used only with a `LayoutSpec`: the angle of the zone's first
    sector, LBN slots left empty at the zone front, spares (per unit of the sparing
    scheme), slipped sectors (or tracks) and ``(defect, remap)`` pairs, all in
    zone-relative physical sectors (tracks for ``tracks_per_zone`` sparing).
    """

    first_cyl: int
    last_cyl: int
    sectors_per_track: int
    track_skew_sectors: int | None = None
    cylinder_skew_sectors: int | None = None
    first_block_offset_sectors: int = 0
    empty_sectors_at_front: int = 0
    spares: int = 0
    slips: tuple = ()
    defects: tuple = ()

    @property
    def cylinders(self) -> int:
        """Number of cylinders in the zone."""
        return self.last_cyl - self.first_cyl + 1


@dataclass(frozen=True)
class SeekSpec:
    """Seek description: ``form`` "curve" (three data-sheet times), "table" (measured
    points) or "hpl" (Ruemmler and Wilkes's equation, DiskSim's "hpl"/"hplplus10").

    For "hpl": ``boundary_cyl``, ``sqrt_const_ms`` + ``sqrt_mult_ms`` * sqrt(d) below
    the boundary, ``linear_const_ms`` + ``linear_mult_ms`` * d from it on;
    ``single_cyl_ms`` (None: the equation) and ``first_ten_ms`` (distances 1..10,
    empty: the equation) override short seeks.
    """

    form: str
    single_cyl_ms: float | None = 0.0
    avg_ms: float = 0.0
    full_stroke_ms: float = 0.0
    points: tuple = ()
    boundary_cyl: int = 0
    sqrt_const_ms: float = 0.0
    sqrt_mult_ms: float = 0.0
    linear_const_ms: float = 0.0
    linear_mult_ms: float = 0.0
    first_ten_ms: tuple = ()


@dataclass(frozen=True)
class LayoutSpec:
    """DiskSim g1 layout options: sparing scheme, range size (cylinders) and LBN mapping."""

    sparing: str = "none"
    range_cylinders: int = 1
    mapping: str = "normal"


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
    layout: LayoutSpec | None = None
    overheads: tuple = ()
    cache: tuple = ()
    queue_policy: str = "fcfs"
    queue_age_weight: float = 0.0
    origin: str = field(default="<dict>", compare=False)
    g1_lbns: int | None = field(default=None, compare=False, repr=False)

    @property
    def zoned_capacity(self) -> int:
        """LBNs the zones hold: cylinders * heads * sectors_per_track summed over zones, or
        for a g1 layout what remains after spares, slips and empty space."""
        if self.layout is None:
            return sum(z.cylinders * z.sectors_per_track for z in self.zones) * self.heads
        if self.g1_lbns is None:  # built directly rather than through from_dict
            object.__setattr__(self, "g1_lbns", _g1_capacity(self))
        return self.g1_lbns

    @property
    def overheads_ms(self) -> dict:
        """Controller overheads (the ``[overheads]`` table; every key, zeros by default)."""
        d = {k: 0.0 for k in _OVERHEAD_KEYS}
        d.update(time_scale=1.0, hold_bus_entire_read=False, hold_bus_entire_write=False,
                 never_disconnect=False, extra_write_disconnect=False)
        d.update(self.overheads)
        return d

    @property
    def cache_params(self) -> dict:
        """On-disk cache parameters (the ``[cache]`` table; ``enabled`` false by default)."""
        d = dict(_CACHE_DEFAULTS)
        d.update(self.cache)
        return d

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
            data = load_toml(path)
        except FileNotFoundError:
            raise DeviceError(f"{path}: no such drive description file") from None
        except IsADirectoryError:
            raise DeviceError(f"{path}: is a directory, expected a drive TOML file") from None
        except TomlFileError as e:
            raise DeviceError(str(e)) from None
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
        sk = self.seek
        if sk.form == "curve":
            d["seek"] = {"form": "curve", "single_cyl_ms": sk.single_cyl_ms,
                         "avg_ms": sk.avg_ms, "full_stroke_ms": sk.full_stroke_ms}
        elif sk.form == "hpl":
            d["seek"] = {"form": "hpl", "boundary_cyl": sk.boundary_cyl,
                         "sqrt_const_ms": sk.sqrt_const_ms, "sqrt_mult_ms": sk.sqrt_mult_ms,
                         "linear_const_ms": sk.linear_const_ms,
                         "linear_mult_ms": sk.linear_mult_ms}
            if sk.single_cyl_ms is not None:
                d["seek"]["single_cyl_ms"] = sk.single_cyl_ms
            if sk.first_ten_ms:
                d["seek"]["first_ten_ms"] = list(sk.first_ten_ms)
        else:
            d["seek"] = {"form": "table", "points": [list(p) for p in sk.points]}
        if self.layout is not None:
            d["layout"] = {"sparing": self.layout.sparing,
                           "range_cylinders": self.layout.range_cylinders,
                           "mapping": self.layout.mapping}
        if self.overheads:
            d["overheads"] = dict(self.overheads)
        if self.cache:
            d["cache"] = dict(self.cache)
        if self.queue_policy != "fcfs":
            d["queue"] = {"policy": self.queue_policy}
            if self.queue_age_weight:
                d["queue"]["age_weight"] = self.queue_age_weight
        zones = []
        for z in self.zones:
            zd = {"first_cyl": z.first_cyl, "last_cyl": z.last_cyl,
                  "sectors_per_track": z.sectors_per_track}
            if z.track_skew_sectors is not None:
                zd["track_skew_sectors"] = z.track_skew_sectors
            if z.cylinder_skew_sectors is not None:
                zd["cylinder_skew_sectors"] = z.cylinder_skew_sectors
            if self.layout is not None:
                zd.update(first_block_offset_sectors=z.first_block_offset_sectors,
                          empty_sectors_at_front=z.empty_sectors_at_front, spares=z.spares,
                          slips=list(z.slips), defects=[list(p) for p in z.defects])
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
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise _fail(origin, full, expected, value)
        _finite(origin, full, value)
        if key.endswith("_ms") and isinstance(value, (int, float)) and abs(value) > MAX_MS:
            raise _fail(origin, full, f"a time within {MAX_MS:,} ms (no drive operation "
                                      f"takes longer)", value)


#: Keys whose value may be infinite: an infinitely fast bus (no bus time per sector, as
#: DiskSim's "Bulk sector transfer time = 0" means).
_INFINITE_OK = {"bus_mb_per_s"}


def _finite(origin: str, key: str, value) -> None:
    """No NaN or infinity in a number, or in the numbers of a list or inline table: every
    comparison with NaN is false, so a range check alone lets it through."""
    if isinstance(value, float) and not math.isfinite(value) \
            and not (value == math.inf and key in _INFINITE_OK):
        raise _fail(origin, key, "a finite number", value)
    if isinstance(value, list):
        for i, v in enumerate(value):
            _finite(origin, f"{key}[{i}]", v)
    elif isinstance(value, dict):
        for k, v in value.items():
            _finite(origin, f"{key}.{k}", v)


def _positive(origin, key, value, strict=True):
    if (value <= 0) if strict else (value < 0):
        raise _fail(origin, key, "a number > 0" if strict else "a number >= 0", value)


def _parse(data: dict, origin: str) -> DriveSpec:
    _check_keys(data, _TOP_KEYS, origin, "")
    for key in ("rpm", "heads", "cylinders", "bus_mb_per_s"):
        _positive(origin, key, data[key])
    if not MIN_RPM <= data["rpm"] <= MAX_RPM:
        raise _fail(origin, "rpm", f"a spindle speed from {MIN_RPM:,} to {MAX_RPM:,} rpm",
                    data["rpm"])
    for key in ("track_skew_sectors", "cylinder_skew_sectors", "head_switch_ms",
                "command_overhead_ms", "completion_overhead_ms"):
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

    layout = _parse_layout(data["layout"], origin) if "layout" in data else None
    zones = _parse_zones(data["zones"], data["cylinders"], origin, layout is not None)
    seek = _parse_seek(data["seek"], data["cylinders"], origin)
    overheads = _parse_overheads(data.get("overheads", {}), origin)
    cache = _parse_cache(data.get("cache", {}), origin)
    queue = data.get("queue", {})
    _check_keys(queue, _QUEUE_KEYS, origin, "queue")
    policy = queue.get("policy", "fcfs")
    if policy not in QUEUE_POLICIES:
        raise _fail(origin, "queue.policy", "one of " + ", ".join(QUEUE_POLICIES), policy)
    age_weight = queue.get("age_weight", 0.0)
    if isinstance(age_weight, bool) or not 0.0 <= age_weight <= MAX_MS:
        raise _fail(origin, "queue.age_weight", f"a number from 0 to {MAX_MS:,} (ms of credit "
                    f"per second waited)", age_weight)
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
        bus_mb_per_s=float(data["bus_mb_per_s"]), queue_depth=qd, layout=layout,
        overheads=overheads, cache=cache, queue_policy=policy,
        queue_age_weight=float(age_weight), origin=origin)
    if layout is not None:
        object.__setattr__(spec, "g1_lbns", _g1_capacity(spec))
    if spec.sectors is not None:
        if spec.sectors <= 0 or spec.sectors > spec.zoned_capacity:
            raise _fail(origin, "sectors",
                        f"an integer in 1..{spec.zoned_capacity} (the capacity of the zones)",
                        spec.sectors)
    return spec


def _parse_zones(zones: list, cylinders: int, origin: str, g1: bool) -> tuple:
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
        # a g1 layout may leave cylinders between zones unmapped (DiskSim's extracted drives do)
        if z["first_cyl"] != expect_first and not (g1 and z["first_cyl"] > expect_first):
            what = "overlaps the previous zone" if z["first_cyl"] < expect_first else \
                "leaves a gap after the previous zone"
            raise DeviceError(f"{origin}: key '{where}.first_cyl': expected {expect_first} "
                              f"(zones must cover cylinders 0..{cylinders - 1} in order without "
                              f"gaps or overlaps), found {z['first_cyl']}: {what}")
        if z["last_cyl"] < z["first_cyl"]:
            raise _fail(origin, f"{where}.last_cyl", f"an integer >= first_cyl ({z['first_cyl']})",
                        z["last_cyl"])
        for k in ("track_skew_sectors", "cylinder_skew_sectors", "first_block_offset_sectors",
                  "empty_sectors_at_front", "spares"):
            if k in z and z[k] < 0:
                raise _fail(origin, f"{where}.{k}", "an integer >= 0", z[k])
        extra = [k for k in _G1_ZONE_KEYS if k in z]
        if extra and not g1:
            raise DeviceError(f"{origin}: key '{where}.{extra[0]}': only valid with a [layout] "
                              f"table (DiskSim g1 layout); add [layout] or remove the key")
        slips = z.get("slips", [])
        for j, s in enumerate(slips):
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise _fail(origin, f"{where}.slips[{j}]", "an integer >= 0", s)
        defects = []
        for j, p in enumerate(z.get("defects", [])):
            if (not isinstance(p, list) or len(p) != 2
                    or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in p)):
                raise _fail(origin, f"{where}.defects[{j}]", "a pair [defect, remap] of integers "
                            ">= 0", p)
            defects.append((p[0], p[1]))
        out.append(ZoneSpec(z["first_cyl"], z["last_cyl"], z["sectors_per_track"],
                            z.get("track_skew_sectors"), z.get("cylinder_skew_sectors"),
                            z.get("first_block_offset_sectors", 0),
                            z.get("empty_sectors_at_front", 0), z.get("spares", 0),
                            tuple(slips), tuple(defects)))
        expect_first = z["last_cyl"] + 1
    if expect_first != cylinders and not (g1 and expect_first < cylinders):
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
    if form == "hpl":
        _check_keys(seek, _SEEK_HPL_KEYS, origin, "seek")
        for k in ("boundary_cyl", "sqrt_const_ms", "sqrt_mult_ms", "linear_const_ms",
                  "linear_mult_ms", "single_cyl_ms"):
            if k in seek:
                _positive(origin, f"seek.{k}", seek[k], strict=False)
        ten = seek.get("first_ten_ms", [])
        if ten and (len(ten) != 10 or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                          or v < 0 for v in ten)):
            raise _fail(origin, "seek.first_ten_ms", "a list of 10 numbers >= 0", ten)
        one = seek.get("single_cyl_ms")
        return SeekSpec("hpl", single_cyl_ms=None if one is None else float(one),
                        boundary_cyl=seek["boundary_cyl"],
                        sqrt_const_ms=float(seek["sqrt_const_ms"]),
                        sqrt_mult_ms=float(seek["sqrt_mult_ms"]),
                        linear_const_ms=float(seek["linear_const_ms"]),
                        linear_mult_ms=float(seek["linear_mult_ms"]),
                        first_ten_ms=tuple(float(v) for v in ten))
    raise DeviceError(f"{origin}: key 'seek.form': expected \"curve\", \"table\" or \"hpl\", "
                      f"found {form!r}")


def _parse_layout(lay: dict, origin: str) -> LayoutSpec:
    _check_keys(lay, _LAYOUT_KEYS, origin, "layout")
    if lay["sparing"] not in SPARING_SCHEMES:
        raise _fail(origin, "layout.sparing", "one of " + ", ".join(SPARING_SCHEMES),
                    lay["sparing"])
    mapping = lay.get("mapping", "normal")
    if mapping not in MAPPINGS:
        raise _fail(origin, "layout.mapping", "one of " + ", ".join(MAPPINGS), mapping)
    rc = lay.get("range_cylinders", 1)
    if rc < 1:
        raise _fail(origin, "layout.range_cylinders", "an integer >= 1", rc)
    return LayoutSpec(lay["sparing"], rc, mapping)


def _parse_overheads(ov: dict, origin: str) -> tuple:
    _check_keys(ov, _OVERHEAD_KEYS, origin, "overheads")
    for k, v in ov.items():
        if isinstance(v, bool):
            continue
        _positive(origin, f"overheads.{k}", v, strict=(k == "time_scale"))
    return tuple((k, float(v) if not isinstance(v, bool) else v) for k, v in ov.items())


def _parse_cache(c: dict, origin: str) -> tuple:
    _check_keys(c, _CACHE_KEYS, origin, "cache")
    for k in ("segments", "segment_size_sectors"):
        if k in c and c[k] < 1:
            raise _fail(origin, f"cache.{k}", "an integer >= 1", c[k])
    for k in ("write_segments", "read_ahead_min_sectors", "read_ahead_max_sectors",
              "preseeking_level"):
        if k in c and c[k] < 0:
            raise _fail(origin, f"cache.{k}", "an integer >= 0", c[k])
    for k in ("low_water_mark", "high_water_mark"):
        if k in c and not 0 <= c[k] <= 1:
            raise _fail(origin, f"cache.{k}", "a fraction 0..1", c[k])
    if "continuous_read" in c and not 0 <= c["continuous_read"] <= 4:
        raise _fail(origin, "cache.continuous_read", "an integer 0..4", c["continuous_read"])
    if "fast_write_level" in c and c["fast_write_level"] not in (0, 1, 2):
        raise _fail(origin, "cache.fast_write_level", "0, 1 or 2", c["fast_write_level"])
    if c.get("read_ahead_max_sectors", 0) < c.get("read_ahead_min_sectors", 0):
        raise _fail(origin, "cache.read_ahead_max_sectors", "a value >= read_ahead_min_sectors",
                    c["read_ahead_max_sectors"])
    return tuple((k, float(v) if k.endswith("water_mark") else v) for k, v in c.items())


def _g1_capacity(spec) -> int:
    from blksim.disk_models.layout import ZonedLayout
    from blksim.disk_models.sparing import LayoutError
    try:
        return ZonedLayout(spec).zoned_capacity
    except LayoutError as e:
        raise DeviceError(f"{spec.origin}: {e}") from None
