"""LBN <-> physical mapping of a zoned drive: skews, and DiskSim's g1 sparing when described.

Two kinds of drive description share one representation:

- *plain* (no ``[layout]`` table): LBNs fill a track, then the next head of the same
  cylinder, then the next cylinder; every head switch adds the zone's track skew and
  every cylinder switch its cylinder skew (in that zone's sectors), cumulatively from
  LBN 0 at angle 0, across zone boundaries too.
- *g1* (a ``[layout]`` table, as imported from DiskSim): DiskSim 4.0's ``dm_layout_g1``.
  Spare sectors, slipped and remapped defects, empty space at the zone front and a
  sparing scheme decide which physical sectors hold LBNs (`disk_models.sparing`). The
  angle restarts in every zone: sector ``k`` of the track at cylinder ``c`` (counted
  from the zone's first cylinder) and logical head ``h`` starts at
  ``(first_block_offset + (h + (heads - 1) * c) * track_skew + c * cylinder_skew
  + slip_offset + k) / sectors_per_track`` revolutions (mod 1), as DiskSim's
  ``g1_map_pbn_skew`` computes it (diskmodel/layout_g1.c). With mapping
  ``surface_serpentine`` / ``surface_serpentine_per_zone`` the physical head runs
  backwards on odd cylinders (all odd cylinders / odd cylinders counted from the
  zone start), so a cylinder switch stays on the same surface.

Angles are in revolutions [0, 1). Physical sector numbers count every sector of a track
(spares and slipped ones included) from the track's sector 0.

Lookups are a bisect over *segments* — runs of LBNs laid out regularly, split at
zones, slips, ranges and defects (a few hundred at most for the DiskSim drives) — and
integer arithmetic.
"""

from __future__ import annotations

import bisect

from blksim.disk_models import sparing

MAPPINGS = {"normal": 0, "surface_serpentine_per_zone": 1, "surface_serpentine": 2}


class ZonedLayout:
    """Precomputed zone and segment tables of a `DriveSpec`.

    Per zone ``i``: ``z_lbn`` first LBN, ``z_cyl`` / ``z_last_cyl`` cylinders,
    ``z_spt`` sectors per track, ``z_spc`` sectors per cylinder, ``z_angle0`` angle of
    the zone's first track, ``z_cyl_step`` / ``z_head_step`` angle added per cylinder /
    per head (revolutions), ``z_track_skew`` / ``z_cyl_skew`` skews (sectors),
    ``z_serp`` (0 normal, 1 serpentine per zone, 2 serpentine).
    Per segment ``j``: ``s_lbn`` first LBN (one more entry: the capacity), ``s_zone``,
    ``s_slot`` first zone slot, ``s_D`` / ``s_U`` pattern (D data sectors every U
    slots; D = 0: contiguous), ``s_a0`` zone angle plus the segment's slip offset.
    ``monotone``: LBNs grow with the physical sector order (no remapped defect out of
    order).
    """

    __slots__ = ("heads", "cylinders", "zoned_capacity", "exact",
                 "z_lbn", "z_cyl", "z_last_cyl", "z_spt", "z_spc", "z_angle0", "z_cyl_step",
                 "z_head_step", "z_track_skew", "z_cyl_skew", "z_serp",
                 "s_lbn", "s_zone", "s_slot", "s_D", "s_U", "s_a0", "_zone_segs",
                 "_last_lbn", "_last_loc", "_seg_rec", "monotone")

    def __init__(self, spec) -> None:
        self.heads = h = spec.heads
        self.cylinders = spec.cylinders
        lay = getattr(spec, "layout", None)
        self.exact = lay is not None
        serp = MAPPINGS[lay.mapping] if lay is not None else 0
        for name in self.__slots__[4:-4]:
            setattr(self, name, [])
        self._last_lbn = -1       # one-entry memo of locate_spt
        self._last_loc = None
        self._zone_segs = []
        lbn = 0
        angle = 0.0
        for i, z in enumerate(spec.zones):
            s = z.sectors_per_track
            ts = spec.track_skew_sectors if z.track_skew_sectors is None else z.track_skew_sectors
            cs = (spec.cylinder_skew_sectors if z.cylinder_skew_sectors is None
                  else z.cylinder_skew_sectors)
            n_cyl = z.last_cyl - z.first_cyl + 1
            if lay is None:
                if i > 0:
                    angle = (angle + cs / s) % 1.0  # the cylinder switch into this zone
                a0 = angle
                segs = [(0, n_cyl * s * h, 0, 0, 0, 0)]
            else:
                a0 = (z.first_block_offset_sectors % s) / s
                try:
                    segs = sparing.zone_segments(
                        lay.sparing, n_cyl, h, s, z.empty_sectors_at_front, z.spares, z.slips,
                        z.defects, lay.range_cylinders)
                except sparing.LayoutError as e:
                    raise sparing.LayoutError(f"zones[{i}]: {e}") from None
            self.z_lbn.append(lbn)
            self.z_cyl.append(z.first_cyl)
            self.z_last_cyl.append(z.last_cyl)
            self.z_spt.append(s)
            self.z_spc.append(s * h)
            self.z_angle0.append(a0)
            cyl_step = ((h - 1) * ts + cs) / s
            self.z_cyl_step.append(cyl_step)
            self.z_head_step.append(ts / s)
            self.z_track_skew.append(ts)
            self.z_cyl_skew.append(cs)
            self.z_serp.append(serp)
            zsegs = []
            for (off, count, slot0, D, U, slip_off) in segs:
                if count <= 0:
                    continue
                self.s_lbn.append(lbn + off)
                self.s_zone.append(i)
                self.s_slot.append(slot0)
                self.s_D.append(D)
                self.s_U.append(U)
                self.s_a0.append(a0 + slip_off / s)
                zsegs.append(len(self.s_lbn) - 1)
            self._zone_segs.append(sorted(zsegs, key=lambda j: self.s_slot[j]))
            lbn += sum(c for _, c, *_ in segs)
            # angle of the last track of the zone (plain layouts: the next zone continues)
            angle = (a0 + (n_cyl - 1) * cyl_step + (h - 1) * ts / s) % 1.0
        self.zoned_capacity = lbn
        # LBNs grow with the physical position (zone, cylinder, head, sector) when, in
        # each zone, the segments in slot order hold increasing LBNs: no remapped defect
        # sends an LBN out of order (the drive's track-bounds short cuts rely on it)
        self.monotone = all(
            all(self.s_lbn[a] < self.s_lbn[b] for a, b in zip(zs, zs[1:]))
            for zs in self._zone_segs)
        self.s_lbn.append(lbn)  # sentinel: the end of the last segment
        # everything `locate_spt` needs of segment j in one tuple (one index, one unpack)
        self._seg_rec = [
            (self.s_lbn[j], self.s_lbn[j + 1], self.s_slot[j], self.s_D[j], self.s_U[j],
             self.s_a0[j], self.z_spt[z], self.z_spc[z], self.z_cyl_step[z],
             self.z_head_step[z], self.z_serp[z], self.z_cyl[z])
            for j, z in enumerate(self.s_zone)]

    # ------------------------------------------------------------------ lookups

    def zone_of_lbn(self, lbn: int) -> int:
        """Index of the zone holding ``lbn``."""
        return bisect.bisect_right(self.z_lbn, lbn) - 1

    def locate(self, lbn: int) -> tuple:
        """(cylinder, physical head, physical sector, angle, run) of ``lbn``.

        ``run`` is how many LBNs from ``lbn`` on lie on consecutive sectors of that track.
        """
        return self.locate_spt(lbn)[:5]

    def locate_spt(self, lbn: int) -> tuple:
        """`locate` plus the track's sectors per track, as a 6-tuple: `place` with the
        angle reduced to [0, 1) revolution."""
        if lbn == self._last_lbn:   # the drive often asks for the same LBN twice in a row
            return self._last_loc
        cyl, h, k, angle, run, s = self.place(lbn)
        loc = (cyl, h, k, angle % 1.0, run, s)
        self._last_lbn = lbn
        self._last_loc = loc
        return loc

    def place(self, lbn: int) -> tuple:
        """(cylinder, physical head, physical sector, angle, run, sectors per track) of
        ``lbn``, the angle (revolutions) not reduced modulo one revolution: the track's
        first sector's angle plus ``sector / sectors per track``. The one copy of the
        LBN-to-position rule: the plain drive times its rotation from this angle, the
        DiskSim-mode drive from `locate_spt`'s."""
        if not 0 <= lbn < self.zoned_capacity:
            raise ValueError(f"LBN {lbn} outside 0..{self.zoned_capacity - 1}")
        first, seg_end, slot0, D, U, a0, s, spc, cyl_step, head_step, serp, cyl0 = \
            self._seg_rec[bisect.bisect_right(self.s_lbn, lbn) - 1]
        seg_left = seg_end - lbn
        if D:
            o = lbn - first
            q = o // D
            r = o - q * D
            slot = slot0 + q * U + r
            run = D - r
            if seg_left < run:
                run = seg_left
        else:
            slot = slot0 + lbn - first
            run = seg_left
        c = slot // spc
        rem = slot - c * spc
        hl = rem // s
        k = rem - hl * s
        if s - k < run:
            run = s - k
        angle = a0 + c * cyl_step + hl * head_step + k / s
        if serp and ((c if serp == 1 else cyl0 + c) & 1):
            hl = self.heads - 1 - hl   # serpentine: odd cylinders run the heads backwards
        return (cyl0 + c, hl, k, angle, run, s)

    def _phys_head(self, z: int, c: int, hl: int) -> int:
        serp = self.z_serp[z]
        if serp and ((c if serp == 1 else self.z_cyl[z] + c) & 1):
            return self.heads - 1 - hl
        return hl

    def lbn_to_chs(self, lbn: int) -> tuple:
        """(cylinder, head, sector-in-track) of ``lbn`` (physical head and sector)."""
        cyl, head, sec, _, _ = self.locate(lbn)
        return cyl, head, sec

    def _zone_of_cyl(self, cyl: int) -> int:
        if not 0 <= cyl < self.cylinders:
            raise ValueError(f"cylinder {cyl} outside 0..{self.cylinders - 1}")
        return bisect.bisect_right(self.z_cyl, cyl) - 1

    def chs_to_lbn(self, cyl: int, head: int, sector: int) -> int:
        """Inverse of `lbn_to_chs`; a sector holding no LBN (spare, slip, defect, empty
        space) raises ValueError."""
        i = self._zone_of_cyl(cyl)
        if not 0 <= head < self.heads:
            raise ValueError(f"head {head} outside 0..{self.heads - 1}")
        if not 0 <= sector < self.z_spt[i]:
            raise ValueError(f"sector {sector} outside 0..{self.z_spt[i] - 1} of cylinder {cyl}")
        c = cyl - self.z_cyl[i]
        hl = self._phys_head(i, c, head)  # the reversal is its own inverse
        slot = c * self.z_spc[i] + hl * self.z_spt[i] + sector
        segs = self._zone_segs[i]
        slots = [self.s_slot[j] for j in segs]
        for idx in range(bisect.bisect_right(slots, slot) - 1, -1, -1):
            j = segs[idx]
            seg = (0, self.s_lbn[j + 1] - self.s_lbn[j], self.s_slot[j], self.s_D[j],
                   self.s_U[j], 0)
            o = sparing.offset_in(seg, slot)
            if o is not None:
                return self.s_lbn[j] + o
            if not self.exact:
                break
        raise ValueError(f"cylinder {cyl} head {head} sector {sector} holds no LBN "
                         f"(spare, slipped or remapped sector, or empty space)")

    def track_angle(self, cyl: int, head: int) -> float:
        """Angle (revolutions) at which physical sector 0 of track (cyl, head) starts."""
        i = self._zone_of_cyl(cyl)
        c = cyl - self.z_cyl[i]
        hl = self._phys_head(i, c, head)
        a = self.z_angle0[i]
        if self.exact:
            # the slip offset of the track: that of any segment on it, else of the nearest before
            slot = c * self.z_spc[i] + hl * self.z_spt[i]
            segs = self._zone_segs[i]
            slots = [self.s_slot[j] for j in segs]
            idx = bisect.bisect_right(slots, slot + self.z_spt[i] - 1) - 1
            if idx >= 0:
                a = self.s_a0[segs[idx]]
        return (a + c * self.z_cyl_step[i] + hl * self.z_head_step[i]) % 1.0

    def physical_angle(self, lbn: int) -> float:
        """Angle (revolutions, [0, 1)) at which ``lbn`` starts passing under its head."""
        return self.locate(lbn)[3]

    def sectors_per_track(self, cyl: int) -> int:
        """Sectors per track at cylinder ``cyl`` (spares included)."""
        return self.z_spt[self._zone_of_cyl(cyl)]
