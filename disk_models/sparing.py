"""Which physical sectors of a zone hold which LBNs: DiskSim 4.0's g1 sparing schemes.

Read from DiskSim 4.0's diskmodel (``diskmodel/layout_g1.c``: the ``g1_ltop_*`` and
``g1_ptol_*`` functions; ``diskmodel/layout_g1_load.c``: ``dm_layout_g1_compute_blksinband``;
``diskmodel/layout_g1.h``: the scheme numbers) and re-expressed here; no code is copied.

A zone's physical sectors ("slots") are numbered from 0 at its first cylinder, head 0,
sector 0: ``slot = cyl_in_zone * heads * spt + logical_head * spt + sector``. What DiskSim
does for every scheme comes down to one rule: the *data slots* of the zone form a
sequence in slot order; the first ``empty`` of them are left unused ("Empty space at
zone front"), and the zone's LBNs fill the next ``blocks_in_zone`` of them in order.
The schemes differ only in which slots are data slots:

- ``none`` (0): every slot.
- ``tracks_per_zone`` (1): whole tracks; slips are *track* numbers, skipped; the spare
  tracks are the unused tail of the zone.
- ``sectors_per_cylinder`` (2), ``sectors_per_track`` (3), ``sectors_per_range`` (8):
  units of one cylinder, one track or ``range_cylinders`` cylinders, each holding
  ``spares`` spare slots at its end; a slip in a unit removes that slot and the unit's
  data slide into its spares (the first ``unit - spares`` non-slipped slots hold data).
- ``sectors_at_end`` (7): every slot except slips (DiskSim requires no per-unit spares).
- ``sectors_per_zone`` (9), ``sectors_per_zone_slip_to_end`` (10): every slot except
  slips; the spares are the unused tail of the zone.

Defects are ``(defect_slot, remap_slot)`` pairs: the LBN of the defect slot lives in the
remap slot instead (for ``tracks_per_zone``, whole tracks). A pair whose remap equals
its defect changes nothing, as in DiskSim's LBN-to-physical mapping.

The result is a short list of *segments* ``(lbn_offset, count, slot0, D, U, slip_offset)``:
``count`` consecutive LBNs from ``lbn_offset`` (zone-relative) live at
``slot0 + (o // D) * U + o % D`` for ``o`` in ``0..count-1`` (``D == 0``: at ``slot0 + o``).
``slip_offset`` is the number of slips DiskSim counts as pushing the track's angle
forward (schemes 2 and 3 only; see ``g1_map_pbn_skew``).
"""

from __future__ import annotations

import bisect

# DiskSim number -> blksim name (layout_g1.h)
SCHEMES = {
    0: "none",
    1: "tracks_per_zone",
    2: "sectors_per_cylinder",
    3: "sectors_per_track",
    4: "sectors_per_cylinder_slip_to_end",
    5: "sectors_per_cylinder_at_front",
    6: "sectors_per_cylinder_at_front_slip_to_end",
    7: "sectors_at_end",
    8: "sectors_per_range",
    9: "sectors_per_zone",
    10: "sectors_per_zone_slip_to_end",
}
SUPPORTED = ("none", "tracks_per_zone", "sectors_per_cylinder", "sectors_per_track",
             "sectors_at_end", "sectors_per_range", "sectors_per_zone",
             "sectors_per_zone_slip_to_end")
# schemes whose slips push the angle of later tracks forward (g1_map_pbn_skew)
_SLIP_SKEW = {"sectors_per_cylinder": "cylinder", "sectors_per_track": "track"}


class LayoutError(ValueError):
    """A zone whose sparing description cannot be laid out."""


def blocks_in_zone(scheme: str, cyls: int, heads: int, spt: int, empty: int, spares: int,
                   n_slips: int, range_cyl: int = 1) -> int:
    """LBNs the zone holds, as DiskSim computes it (``dm_layout_g1_compute_blksinband``)."""
    n = cyls * heads * spt - empty
    if scheme == "tracks_per_zone":
        return n - spares * spt
    if scheme == "sectors_per_track":
        return n - spares * cyls * heads
    if scheme == "sectors_at_end":
        return n - n_slips
    if scheme == "sectors_per_zone":
        return n - spares
    if scheme == "sectors_per_zone_slip_to_end":
        return n - spares - n_slips
    if scheme == "sectors_per_cylinder":
        return n - spares * cyls
    if scheme == "sectors_per_range":
        return n - spares * (cyls // range_cyl)
    if scheme == "none":
        return n
    raise LayoutError(f"sparing scheme {scheme!r} is not supported; supported: "
                      f"{', '.join(SUPPORTED)}")


def _plain_minus(start: int, end: int, holes: list) -> list:
    """Runs of data slots in [start, end) without the (sorted, unique) hole slots."""
    runs = []
    a = start
    for h in holes[bisect.bisect_left(holes, start):bisect.bisect_left(holes, end)]:
        if h > a:
            runs.append((a, h - a, 0, 0))
        a = h + 1
    if end > a:
        runs.append((a, end - a, 0, 0))
    return runs


def _unit_runs(total: int, unit: int, spares: int, slips: list) -> list:
    """Data-slot runs for units of ``unit`` slots with ``spares`` spare slots at each end."""
    runs = []
    n_full, last = divmod(total, unit)
    data = unit - spares
    slipped_units = sorted({s // unit for s in slips})
    u = 0
    for su in slipped_units + [None]:
        stop = n_full if su is None else min(su, n_full)
        if stop > u:
            if spares:
                runs.append((u * unit, (stop - u) * data, data, unit))
            else:
                runs.append((u * unit, (stop - u) * unit, 0, 0))
        if su is None or su >= n_full:
            break
        # a slipped unit: its first `data` non-slipped slots
        pieces = _plain_minus(su * unit, (su + 1) * unit, slips)
        runs.extend(_truncate(pieces, data))
        u = su + 1
    if last:
        if last > data:
            raise LayoutError(f"the zone's last, partial unit of {last} sectors is larger than "
                              f"a full unit's {data} data sectors; DiskSim cannot map it either")
        runs.extend(_plain_minus(n_full * unit, total, slips))
    return runs


def _truncate(runs: list, n: int) -> list:
    out = []
    for r in runs:
        if n <= 0:
            break
        if r[1] > n:
            r = (r[0], n, r[2], r[3])
        out.append(r)
        n -= r[1]
    return out


def _split(run: tuple, k: int) -> tuple:
    """Split a run (slot0, count, D, U) after its first k data slots: (head runs, tail runs)."""
    slot0, count, D, U = run
    if k <= 0:
        return [], [run]
    if k >= count:
        return [run], []
    if not D:
        return [(slot0, k, 0, 0)], [(slot0 + k, count - k, 0, 0)]
    q, r = divmod(k, D)
    head = [(slot0, k, D, U)]
    base = slot0 + q * U
    tail = []
    rest = count - k
    if r:
        first = min(D - r, rest)
        tail.append((base + r, first, 0, 0))
        rest -= first
        base += U
    if rest:
        tail.append((base, rest, D, U))
    return head, tail


def _slot_of(seg: tuple, o: int) -> int:
    _, _, slot0, D, U, _ = seg
    if not D:
        return slot0 + o
    q, r = divmod(o, D)
    return slot0 + q * U + r


def offset_in(seg: tuple, slot: int) -> int | None:
    """The LBN offset within ``seg`` of zone slot ``slot``, or None if the segment has none there."""
    lbn_off, count, slot0, D, U, _ = seg
    rel = slot - slot0
    if rel < 0:
        return None
    if D:
        q, r = divmod(rel, U)
        if r >= D:
            return None
        o = q * D + r
    else:
        o = rel
    return o if o < count else None


def zone_segments(scheme: str, cyls: int, heads: int, spt: int, empty: int, spares: int,
                  slips, defects, range_cyl: int = 1) -> list:
    """The segments (see the module docstring) of one zone, in LBN order."""
    slips = sorted(slips)
    if len(set(slips)) != len(slips):
        raise LayoutError("a slip is listed twice")
    spc = heads * spt
    total = cyls * spc
    n_lbn = blocks_in_zone(scheme, cyls, heads, spt, empty, spares, len(slips), range_cyl)
    track_unit = scheme == "tracks_per_zone"
    limit = cyls * heads if track_unit else total
    for s in slips:
        if not 0 <= s < limit:
            raise LayoutError(f"slip {s} outside the zone (0..{limit - 1} "
                              f"{'tracks' if track_unit else 'sectors'})")
    if scheme in ("none", "sectors_at_end", "sectors_per_zone", "sectors_per_zone_slip_to_end"):
        if scheme == "none" and slips:
            raise LayoutError("sparing scheme 'none' cannot have slips")
        if scheme == "sectors_at_end" and spares:
            raise LayoutError("sparing scheme 'sectors_at_end' (DiskSim 7) needs 0 spares per "
                              "zone (DiskSim counts none), found " + str(spares))
        runs = _plain_minus(0, total, slips)
    elif track_unit:
        runs = []
        for a, n, _, _ in _plain_minus(0, cyls * heads, slips):
            runs.append((a * spt, n * spt, 0, 0))
    elif scheme == "sectors_per_track":
        runs = _unit_runs(total, spt, spares, slips)
    elif scheme == "sectors_per_cylinder":
        runs = _unit_runs(total, spc, spares, slips)
    elif scheme == "sectors_per_range":
        if range_cyl < 1:
            raise LayoutError(f"range size must be >= 1 cylinder, found {range_cyl}")
        runs = _unit_runs(total, spc * range_cyl, spares, slips)
    else:
        raise LayoutError(f"sparing scheme {scheme!r} is not supported; supported: "
                          f"{', '.join(SUPPORTED)}")
    if n_lbn < 0:
        raise LayoutError(f"the zone holds no room for its LBNs ({n_lbn})")
    have = sum(r[1] for r in runs)
    if have < empty + n_lbn:
        raise LayoutError(f"the zone has {have} data sectors after spares and slips, fewer than "
                          f"the {empty} empty + {n_lbn} LBNs DiskSim assigns to it "
                          f"(more slips than spares?)")

    # drop the empty space at the zone front, keep n_lbn LBNs
    segs = []
    skip, left, lbn = empty, n_lbn, 0
    slip_mode = _SLIP_SKEW.get(scheme)
    for run in runs:
        if left <= 0:
            break
        if skip:
            if run[1] <= skip:
                skip -= run[1]
                continue
            _, tail = _split(run, skip)
            skip = 0
        else:
            tail = [run]
        for r in tail:
            if left <= 0:
                break
            head, _ = _split(r, left)
            r = head[0]
            segs.append((lbn, r[1], r[0], r[2], r[3], _slip_offset(slip_mode, r[0], slips, spt, spc)))
            lbn += r[1]
            left -= r[1]
    for pair in defects:
        segs = _apply_defect(segs, pair, track_unit, spt, slip_mode, slips, spc)
    return segs


def _slip_offset(mode, slot: int, slips: list, spt: int, spc: int) -> int:
    if mode is None or not slips:
        return 0
    cutoff = slot - slot % (spt if mode == "track" else spc)
    return bisect.bisect_left(slips, cutoff)


def _apply_defect(segs: list, pair, track_unit: bool, spt: int, slip_mode, slips, spc) -> list:
    defect, remap = pair
    if defect == remap:
        return segs
    width = spt if track_unit else 1
    d_slot, m_slot = (defect * spt, remap * spt) if track_unit else (defect, remap)
    for s in segs:
        if offset_in(s, m_slot) is not None:
            raise LayoutError(f"defect {defect} is remapped to {remap}, which already holds data")
    for i, s in enumerate(segs):
        o = offset_in(s, d_slot)
        if o is None:
            continue
        if o + width > s[1] or (s[3] and o % s[3] + width > s[3]):
            raise LayoutError(f"defective track {defect} is not laid out contiguously")
        lbn_off, count, slot0, D, U, so = s
        run = (slot0, count, D, U)
        head, rest = _split(run, o)
        mid, tail = [], []
        for r in rest:
            if mid or tail:
                tail.append(r)
                continue
            h2, t2 = _split(r, width)
            mid, tail = h2, t2
        out = []
        lbn = lbn_off
        for r in head:
            out.append((lbn, r[1], r[0], r[2], r[3], so))
            lbn += r[1]
        out.append((lbn, width, m_slot, 0, 0, _slip_offset(slip_mode, m_slot, slips, spt, spc)))
        lbn += width
        for r in tail:
            out.append((lbn, r[1], r[0], r[2], r[3], _slip_offset(slip_mode, r[0], slips, spt, spc)))
            lbn += r[1]
        return segs[:i] + out + segs[i + 1:]
    raise LayoutError(f"defect {defect} is not a sector that holds an LBN")
