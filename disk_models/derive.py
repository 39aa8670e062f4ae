"""Derive a zone table and skews from data-sheet numbers, for writing a preset.

Data sheets give the sustained media rate at the outer and inner zones, the
capacity and the seek times, not the zone table. This module fills the gap the
same way every time, so a preset says "derived" and means this:

- skews: the smallest whole number of sectors that covers the head switch
  (track skew) or the single-cylinder seek (cylinder skew), plus ``margin``;
- sectors per track at a zone: the smallest value whose *sustained* rate, with
  the skews' lost time counted (heads tracks per cylinder, heads-1 track
  switches and one cylinder switch), reaches the data sheet's rate;
- ``n_zones`` zones of equal cylinder count, sectors per track interpolated
  linearly from the outer to the inner zone;
- cylinders: the fewest that hold ``sectors``;
- a drive with 4 KiB physical sectors under 512-byte logical ones (512e) holds whole
  physical sectors on a track: ``physical_sectors`` = 8 rounds every zone's sectors per
  track up to a multiple of 8 (the default, 1, leaves them as they are, so the older
  presets derive exactly as before). Skews stay counted in 512-byte sectors.

The rate of a zone (`sustained_mb_per_s`) is what `tests/test_modern_disks.py` checks the
presets built here against.
"""

from __future__ import annotations

import math


def skews(spt: int, rpm: float, head_switch_ms: float, single_cyl_ms: float,
          margin: int = 1) -> tuple:
    """(track_skew_sectors, cylinder_skew_sectors) for a track of ``spt`` sectors."""
    per_ms = spt * rpm / 60e3  # sectors passing per millisecond
    return (math.ceil(head_switch_ms * per_ms) + margin,
            math.ceil(single_cyl_ms * per_ms) + margin)


def sustained_mb_per_s(spt: int, heads: int, rpm: float, track_skew: int, cyl_skew: int) -> float:
    """Sequential media rate (10^6 B/s) over whole cylinders with the given skews."""
    revs = heads + ((heads - 1) * track_skew + cyl_skew) / spt
    return heads * spt * 512 * (rpm / 60.0) / revs / 1e6


def spt_for_rate(rate_mb_per_s: float, heads: int, rpm: float, head_switch_ms: float,
                 single_cyl_ms: float, margin: int = 1, physical_sectors: int = 1) -> int:
    """Smallest sectors per track (a multiple of ``physical_sectors``) whose sustained rate,
    with its skews, reaches the rate."""
    spt = max(1, int(rate_mb_per_s * 1e6 / 512 / (rpm / 60.0)))
    spt = _round_up(spt, physical_sectors)
    while True:
        ts, cs = skews(spt, rpm, head_switch_ms, single_cyl_ms, margin)
        if sustained_mb_per_s(spt, heads, rpm, ts, cs) >= rate_mb_per_s:
            return spt
        spt += physical_sectors


def _round_up(n: int, step: int) -> int:
    """``n`` rounded up to a multiple of ``step``."""
    return -(-n // step) * step


def zone_table(sectors: int, heads: int, rpm: float, outer_mb_per_s: float,
               inner_mb_per_s: float, n_zones: int, head_switch_ms: float,
               single_cyl_ms: float, margin: int = 1, physical_sectors: int = 1) -> tuple:
    """(cylinders, zones) for a preset: zones are dicts with first_cyl, last_cyl,
    sectors_per_track, track_skew_sectors and cylinder_skew_sectors. With
    ``physical_sectors`` > 1 every zone's sectors per track is a multiple of it."""
    ps = physical_sectors
    if isinstance(ps, bool) or not isinstance(ps, int) or ps < 1:
        raise ValueError(f"physical_sectors: expected an integer >= 1 (logical sectors per "
                         f"physical sector), found {ps!r}")
    s_out = spt_for_rate(outer_mb_per_s, heads, rpm, head_switch_ms, single_cyl_ms, margin, ps)
    s_in = spt_for_rate(inner_mb_per_s, heads, rpm, head_switch_ms, single_cyl_ms, margin, ps)
    spts = [_round_up(round(s_out + (s_in - s_out) * j / (n_zones - 1)), ps)
            for j in range(n_zones)]

    def capacity(cyls):
        per, extra = divmod(cyls, n_zones)
        return heads * sum((per + (1 if j < extra else 0)) * s for j, s in enumerate(spts))

    lo, hi = n_zones, n_zones
    while capacity(hi) < sectors:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if capacity(mid) >= sectors:
            hi = mid
        else:
            lo = mid + 1
    cylinders = lo
    per, extra = divmod(cylinders, n_zones)
    zones = []
    first = 0
    for j, s in enumerate(spts):
        n = per + (1 if j < extra else 0)
        ts, cs = skews(s, rpm, head_switch_ms, single_cyl_ms, margin)
        zones.append({"first_cyl": first, "last_cyl": first + n - 1, "sectors_per_track": s,
                      "track_skew_sectors": ts, "cylinder_skew_sectors": cs})
        first += n
    return cylinders, zones


def zones_toml(zones: list) -> str:
    """The zones as TOML ``[[zones]]`` inline rows."""
    lines = ["zones = ["]
    for z in zones:
        lines.append("  { " + ", ".join(f"{k} = {v}" for k, v in z.items()) + " },")
    lines.append("]")
    return "\n".join(lines)
