"""The DiskSim-mode drive's media timing: where the head goes and when each sector
passes under it, by DiskSim 4.0's g1 mechanics (diskmodel/mech_g1.c, dm_seek_time_g1 /
dm_acctime_track).

Positioning is the larger of the seek and the head switch, plus the write settle for a
write whenever it is non-zero (`G1Media._pos_time`). A transfer reaches each track, waits
for its first sector to come round, then runs over that track's consecutive LBNs; a slip
inside a track costs nothing. `G1Media._runs` gives the timeline as runs, one per
stretch of consecutive sectors on one track, which the drive's request service
(disk_models/disksim_drive.py) and the on-board cache's read-ahead (disk_models/cache.py,
through ``stream``, ``position``, ``track_bounds`` and ``cylinder_bounds``) both read.
"""

from __future__ import annotations

import array
import math

from blksim.disk_models.mechanical import _EPS_REV


class G1Media:
    """The media timing of `DiskSimDrive`, a mixin over `MechanicalDrive`'s geometry.

    It reads the drive's layout, seek table and platter (``_layout_locate``,
    ``_seek_tab``, ``_hsw``, ``_settle``, ``_rps``, ``_rev``, ``angle0``, ``cur_cyl``,
    ``cur_head``, ``_mech_free``) and keeps, in slots the drive declares, where the
    last timeline ended (``_end_lbn``, ``_end_t``, ``_end_cyl``, ``_end_h``,
    ``_end_next``) and a memo of track bounds (``_tb_first``, ``_tb_end``), set up by
    `_init_media`. Methods without a leading underscore have no side effects on the
    head (``positioning_time``, and the cache's media interface).
    """

    __slots__ = ()

    def _init_media(self) -> None:
        """The timeline's end state and the track-bounds memo, empty."""
        # track_bounds memo, indexed by cylinder * heads + head (-1: not computed yet)
        n_tracks = self.spec.cylinders * self._heads
        self._tb_first = array.array("q", [-1]) * n_tracks
        self._tb_end = array.array("q", [-1]) * n_tracks
        # the last `_runs` ended just before LBN _end_lbn, on track (_end_cyl, _end_h);
        # _end_next: (cyl, head, sector, run, sectors per track) of _end_lbn, as
        # `locate` gives them without the angle, when it follows on the same track
        self._end_lbn = -1
        self._end_t = 0.0
        self._end_cyl = self._end_h = 0
        self._end_next = None

    def _cyl_of(self, lbn: int) -> int:
        """The cylinder holding ``lbn`` (the queue policy's seek distances)."""
        return self._layout_locate(lbn)[0]

    def positioning_time(self, rq, now: float) -> float:
        """Seek (or head switch, + write settle) and rotational wait to ``rq``'s first
        sector from the head's position, mechanics free at max(now, their free time);
        no side effects (SPTF)."""
        t0 = self._mech_free if self._mech_free > now else now
        cyl, h, k, angle, run, s = self._layout_locate(rq.sector)
        pos = self._pos_time(self.cur_cyl, self.cur_head, cyl, h, rq.write)
        wait = (angle - self.angle0 - (t0 + pos) * self._rps) % 1.0
        if wait > 1.0 - _EPS_REV:
            wait = 0.0
        return pos + wait * self._rev + (t0 - now)

    def _pos_time(self, cyl0: int, h0: int, cyl: int, h: int, write: bool) -> float:
        """Positioning from track (cyl0, h0) to (cyl, h): DiskSim 4.0's g1 rule
        (diskmodel/mech_g1.c, dm_seek_time_g1): the larger of the seek and the head
        switch, plus the write settle for a write whenever it is non-zero (not below 0).
        The one copy of the rule: `_runs` times every track it reaches with it, SPTF
        ranks requests with it (`positioning_time`)."""
        t = 0.0
        if cyl != cyl0:
            t = self._seek_tab[cyl - cyl0 if cyl > cyl0 else cyl0 - cyl]
        if h != h0 and self._hsw > t:
            t = self._hsw
        if t and write:
            t += self._settle
            if t < 0.0:
                t = 0.0
        return t

    def _runs(self, lbn: int, count: int, t: float, cyl: int, h: int, write: bool,
              t_min: float = 0.0, follow: bool = False, pos_min: float = 0.0,
              avail: tuple | None = None) -> list:
        """The media timeline of ``lbn..lbn+count-1`` from head (cyl, h) free at ``t``:
        one run ``(lbn0, count, t_arrive, t_first, dt, cyl, head)`` per stretch of
        consecutive sectors on one track (cyl, head). ``t_min``: the first sector not before then (a write's
        data). ``follow``: sector lbn-1 just passed under the head (read-ahead), so a
        sector on the same track follows at once. ``pos_min``: the first positioning
        takes at least this long. ``avail = (t_bus, per_sector)``: a write whose data
        cross the bus from ``t_bus``; sector ``i`` of the request may only start passing
        under the head once its data are wholly in the buffer (``t_bus + (i+1) *
        per_sector``), else the head goes round once more for it (DiskSim:
        ``disk_buffer_sector_done`` / ``disk_buffer_block_available``)."""
        locate = self._layout_locate
        rps, rev, a0 = self._rps, self._rev, self.angle0
        out = []
        first = True
        i0 = 0
        # a read-ahead continuing the last timeline on its track (`stream` passes that
        # track as (cyl, h)): where lbn is is known (`_end_next`, the same track), and a
        # sector that follows at once needs no angle
        known = self._end_next if follow and lbn == self._end_lbn else None
        while count:
            if known is not None:
                n_cyl, n_h, k, run, s = known
                known = None
            else:
                n_cyl, n_h, k, angle, run, s = locate(lbn)
            loc_lbn = lbn
            dt = rev / s
            same = n_cyl == cyl and n_h == h
            if same and (follow or not first):
                # same track, next LBN (after a slip or spare: DiskSim counts no gap)
                t_arr = t_first = t
                if avail is not None:
                    a = avail[0] + (i0 + 1) * avail[1]
                    if t_first < a - 1e-12:
                        t_first += math.ceil((a - t_first) / rev - 1e-9) * rev
            else:
                pos = self._pos_time(cyl, h, n_cyl, n_h, write)
                if first and pos < pos_min:
                    pos = pos_min
                t_arr = t + pos
                t_r = t_arr if t_arr > t_min else t_min
                if avail is not None:
                    a = avail[0] + (i0 + 1) * avail[1]
                    if t_r < a:
                        t_r = a
                wait = (angle - a0 - t_r * rps) % 1.0
                if wait > 1.0 - _EPS_REV:
                    wait = 0.0
                t_first = t_r + wait * rev
            m = count if count < run else run
            if avail is not None and avail[1] > dt:
                # the bus is slower than the media: the head may catch up with the data
                tb, bw = avail
                slope = bw - dt
                while True:
                    f0 = t_first - tb - (i0 + 1) * bw   # >= 0: the run's first sector is in
                    j = int(f0 / slope + 1e-9) + 1       # first sector of the run not in time
                    if j < 1:
                        j = 1
                    if j >= m:
                        break
                    out.append((lbn, j, t_arr, t_first, dt, n_cyl, n_h))
                    lbn += j
                    m -= j
                    count -= j
                    i0 += j
                    t_pass = t_first + j * dt
                    a = tb + (i0 + 1) * bw
                    t_arr = t_pass
                    t_first = t_pass + math.ceil((a - t_pass) / rev - 1e-9) * rev
            out.append((lbn, m, t_arr, t_first, dt, n_cyl, n_h))
            t = t_first + m * dt
            count -= m
            lbn += m
            i0 += m
            cyl, h = n_cyl, n_h
            first = False
            if not count:
                # the common case, one run: leave before the loop's back edge, so that
                # PyPy's JIT traces this call inline in its caller's loop instead of
                # entering a loop compiled on its own (a jump in and out for one pass)
                break
        if out:
            self._end_lbn = lbn
            self._end_t = t
            self._end_cyl = cyl
            self._end_h = h
            used = lbn - loc_lbn   # of the `run` contiguous sectors located last
            self._end_next = (cyl, h, k + used, run - used, s) if used < run else None
        return out

    # ---- the cache's media interface (no side effects)

    def stream(self, lbn: int, count: int, t_prev_end: float) -> list:
        if lbn + count > self.capacity:
            count = self.capacity - lbn
        if count <= 0 or lbn <= 0:
            return []
        if lbn == self._end_lbn:   # lbn - 1 ended the last timeline computed
            cyl, h = self._end_cyl, self._end_h
        else:
            cyl, h = self._layout_locate(lbn - 1)[:2]
        return self._runs(lbn, count, t_prev_end, cyl, h, False, 0.0, True)   # follow

    def position(self, lbn: int, count: int, t_free: float) -> list:
        if lbn + count > self.capacity:
            count = self.capacity - lbn
        if count <= 0:
            return []
        return self._runs(lbn, count, t_free, self.cur_cyl, self.cur_head, False)

    def track_bounds(self, lbn: int) -> tuple:
        if lbn == self._end_lbn and self._end_next is not None:
            cyl, h, k, run, s = self._end_next
        else:
            cyl, h, k, _a, run, s = self._layout_locate(lbn)
        key = cyl * self._heads + h
        first = self._tb_first[key]
        if first < 0:
            first, end = self._track_bounds(lbn, cyl, h, k, run, s)
            self._tb_first[key] = first
            self._tb_end[key] = end
            return first, end
        return first, self._tb_end[key]

    def _track_bounds(self, lbn: int, cyl: int, h: int, k: int, run: int, s: int) -> tuple:
        """(first, end) LBNs of track (cyl, h), which holds ``lbn`` at sector ``k``, the
        ``run`` LBNs from it consecutive there; the track has ``s`` sectors."""
        locate = self._layout_locate
        end = lbn + run
        cap = self.capacity
        monotone = self.layout.monotone
        # LBNs in physical order: a run reaching the track's last sector ends its LBNs
        if not (monotone and k + run == s):
            while end < cap:
                c2, h2, _k, _a, r2, _s = locate(end)
                if c2 != cyl or h2 != h:
                    break
                end += r2
        first = lbn - k if lbn - k > 0 else 0
        if monotone:
            # LBNs in physical order: none before the one on the track's sector 0
            if k == 0:
                return lbn, end
            c2, h2, k2, _a, _r, _s = locate(first)
            if c2 == cyl and h2 == h and k2 == 0:
                return first, end
        while first < lbn and locate(first)[:2] != (cyl, h):
            first += 1
        while first > 0 and locate(first - 1)[:2] == (cyl, h):
            first -= 1
        return first, end

    def cylinder_bounds(self, lbn: int) -> tuple:
        cyl = self._layout_locate(lbn)[0]
        first, end = self.track_bounds(lbn)
        cap = self.capacity
        while end < cap and self._layout_locate(end)[0] == cyl:
            end = self.track_bounds(end)[1]
        while first > 0 and self._layout_locate(first - 1)[0] == cyl:
            first = self.track_bounds(first - 1)[0]
        return first, end

    def _media(self, lbn: int, n: int, write: bool, t0: float, t_min: float = 0.0,
               pos_min: float = 0.0, avail: tuple | None = None):
        """Move the head over ``lbn..lbn+n-1`` from ``t0``; return (t_arrive, t_first, t_end,
        runs), ``runs`` as `_runs` gives them."""
        runs = self._runs(lbn, n, t0, self.cur_cyl, self.cur_head, write, t_min, False,
                          pos_min, avail)
        self.cur_cyl = self._end_cyl
        self.cur_head = self._end_h
        self._mech_free = t_end = self._end_t
        return runs[0][2], runs[0][3], t_end, runs

    def _free_start(self, lbn: int, t_arr: float, t_first: float) -> int:
        """First LBN of the run of sectors, on ``lbn``'s track and just before it, that
        passed whole under the head between its arrival on the track (``t_arr``) and the
        start of ``lbn`` (``t_first``): what "Read any free blocks" puts in the buffer.

        DiskSim 4.0 (src/disksim_diskctlr.c, disk_buffer_seekdone / disk_buffer_sector_done)
        lets a read start reading as soon as the head has landed on the track; a sector
        read before the wanted ones becomes the segment's new start. Here: the whole
        sectors that went by during the rotational wait, not wrapping past the track's
        first sector (an earlier LBN would not be contiguous with the request)."""
        cyl, h, k, _a, _run, s = self._layout_locate(lbn)
        m = int((t_first - t_arr) * s / self._rev + 1e-9)
        if m > k:
            m = k
        if m <= 0:
            return lbn
        first = lbn - m
        if self._layout_locate(first)[:2] != (cyl, h):   # a spare or slip in between
            first = self.track_bounds(lbn)[0]
        return first
