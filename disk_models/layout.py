"""LBN <-> physical mapping of a zoned drive, with track and cylinder skew.

LBNs fill a track, then the next head of the same cylinder, then the next
cylinder. Angles are in revolutions [0, 1): sector ``k`` of a track starts
passing under the head at ``track_angle + k / sectors_per_track``. Every head
switch adds the zone's track skew and every cylinder switch its cylinder skew
(in that zone's sectors), cumulatively from LBN 0 at angle 0.
"""

from __future__ import annotations

import bisect


class ZonedLayout:
    """Precomputed zone table of a `DriveSpec`; lookups are a bisect plus arithmetic.

    Per zone ``i`` the lists hold: first LBN, first cylinder, sectors per track,
    sectors per cylinder, the angle of the zone's first track, the angle added
    per cylinder and per head (revolutions), and the skews in sectors.
    """

    __slots__ = ("heads", "cylinders", "zoned_capacity", "z_lbn", "z_cyl", "z_last_cyl",
                 "z_spt", "z_spc", "z_angle0", "z_cyl_step", "z_head_step",
                 "z_track_skew", "z_cyl_skew")

    def __init__(self, spec) -> None:
        self.heads = h = spec.heads
        self.cylinders = spec.cylinders
        self.z_lbn, self.z_cyl, self.z_last_cyl, self.z_spt, self.z_spc = [], [], [], [], []
        self.z_angle0, self.z_cyl_step, self.z_head_step = [], [], []
        self.z_track_skew, self.z_cyl_skew = [], []
        lbn = 0
        angle = 0.0
        for i, z in enumerate(spec.zones):
            s = z.sectors_per_track
            ts = spec.track_skew_sectors if z.track_skew_sectors is None else z.track_skew_sectors
            cs = (spec.cylinder_skew_sectors if z.cylinder_skew_sectors is None
                  else z.cylinder_skew_sectors)
            if i > 0:
                angle = (angle + cs / s) % 1.0  # the cylinder switch into this zone
            self.z_lbn.append(lbn)
            self.z_cyl.append(z.first_cyl)
            self.z_last_cyl.append(z.last_cyl)
            self.z_spt.append(s)
            self.z_spc.append(s * h)
            self.z_angle0.append(angle)
            cyl_step = ((h - 1) * ts + cs) / s
            self.z_cyl_step.append(cyl_step)
            self.z_head_step.append(ts / s)
            self.z_track_skew.append(ts)
            self.z_cyl_skew.append(cs)
            n_cyl = z.last_cyl - z.first_cyl + 1
            lbn += n_cyl * s * h
            # angle of the last track of the zone (the next zone adds its own cylinder skew)
            angle = (angle + (n_cyl - 1) * cyl_step + (h - 1) * ts / s) % 1.0
        self.zoned_capacity = lbn

    def zone_of_lbn(self, lbn: int) -> int:
        """Index of the zone holding ``lbn``."""
        return bisect.bisect_right(self.z_lbn, lbn) - 1

    def lbn_to_chs(self, lbn: int) -> tuple:
        """(cylinder, head, sector-in-track) of ``lbn``."""
        if not 0 <= lbn < self.zoned_capacity:
            raise ValueError(f"LBN {lbn} outside 0..{self.zoned_capacity - 1}")
        i = bisect.bisect_right(self.z_lbn, lbn) - 1
        c, r = divmod(lbn - self.z_lbn[i], self.z_spc[i])
        h, s = divmod(r, self.z_spt[i])
        return self.z_cyl[i] + c, h, s

    def chs_to_lbn(self, cyl: int, head: int, sector: int) -> int:
        """Inverse of `lbn_to_chs`."""
        if not 0 <= cyl < self.cylinders or not 0 <= head < self.heads:
            raise ValueError(f"cylinder {cyl} / head {head} outside the drive")
        i = bisect.bisect_right(self.z_cyl, cyl) - 1
        if not 0 <= sector < self.z_spt[i]:
            raise ValueError(f"sector {sector} outside 0..{self.z_spt[i] - 1} of cylinder {cyl}")
        return self.z_lbn[i] + (cyl - self.z_cyl[i]) * self.z_spc[i] + head * self.z_spt[i] + sector

    def track_angle(self, cyl: int, head: int) -> float:
        """Angle (revolutions) at which sector 0 of track (cyl, head) starts."""
        i = bisect.bisect_right(self.z_cyl, cyl) - 1
        return (self.z_angle0[i] + (cyl - self.z_cyl[i]) * self.z_cyl_step[i]
                + head * self.z_head_step[i]) % 1.0

    def physical_angle(self, lbn: int) -> float:
        """Angle (revolutions, [0, 1)) at which ``lbn`` starts passing under its head."""
        i = bisect.bisect_right(self.z_lbn, lbn) - 1
        s = self.z_spt[i]
        c, r = divmod(lbn - self.z_lbn[i], self.z_spc[i])
        h, k = divmod(r, s)
        return (self.z_angle0[i] + c * self.z_cyl_step[i] + h * self.z_head_step[i] + k / s) % 1.0

    def sectors_per_track(self, cyl: int) -> int:
        """Sectors per track at cylinder ``cyl``."""
        return self.z_spt[bisect.bisect_right(self.z_cyl, cyl) - 1]
