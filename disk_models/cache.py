"""The on-board buffer/cache of a disk drive, DiskSim 4.0 style, modelled in time.

The drive owns the mechanics and the clock; this module owns the buffer's
contents and the policy. The buffer is split into ``segments`` segments of
``segment_size`` sectors. Each segment holds one run of consecutive LBNs
``[start, end)`` and behaves as a circular queue: when more sectors are pushed
in than it holds, the oldest fall out. Segments are replaced least recently
used first.

Semantics read in DiskSim 4.0's ``src/disksim_diskcache.c`` (segment selection
and priorities, ``disk_buffer_get_max_readahead``), ``src/disksim_diskctlr.c``
(``disk_buffer_stopable_access``, ``disk_check_hda``, ``disk_read_arrive``,
``disk_write_arrive``, ``disk_buffer_request_complete``) and
``src/modules/disk.modspec``; implemented here in our own words, see
docs/drive-cache.md for the parameter-by-parameter account.

Time. After a read has taken its sectors off the media, the drive keeps reading
("prefetch", "read-ahead") into the same segment until a limit set by the
read-ahead policy, or until a new request stops it. The cache does not
simulate that sector by sector: it asks the drive, through the ``media``
object given at construction, *when* each sector will pass under the head
(a list of runs, one per track), and at the next request it folds in exactly
the sectors complete by then. ``media`` must provide::

    media.stream(lbn, count, t_prev_end) -> runs
        continue reading sequentially: sector lbn-1 finished passing under the
        head at t_prev_end; read lbn .. lbn+count-1 (track switches included)
    media.position(lbn, count, t_free) -> runs
        from the drive's current head position, mechanics free at t_free:
        seek, rotate, then read lbn .. lbn+count-1
    media.track_bounds(lbn) -> (first_lbn, end_lbn)      the track holding lbn
    media.cylinder_bounds(lbn) -> (first_lbn, end_lbn)   the cylinder holding lbn

A run is a tuple ``(lbn0, count, t_arrive, t_first, dt, ...)``: the head reaches
the run's track at ``t_arrive`` (after the seek or head switch), sector
``lbn0 + i`` passes under it during ``[t_first + i*dt, t_first + (i+1)*dt)``.
Runs are consecutive in LBN and in time. Fields after the fifth are the media's
own (the drive adds the track's cylinder and head); the cache hands the run the
head stopped on back in `CacheResult.head_run`.

Write-back ("Fast write level" 1 or 2): a write's completion is reported once
its data are in the buffer; the drive computes the media write (the destage) at
once, as it would a write-through, and tells the cache when it ends. Until
then the segment is dirty and the head assembly busy: the next request waits
for the destage, except a write that appends to the dirty data (with "Combine
seq writes"), whose data go to the buffer at once and whose media write
continues where the destage is.

Speed: plain attributes and short loops over the segments; a `lookup` makes a bare
`CacheResult` whose fields default on the class and sets only those that differ. With
the cache disabled a `lookup` is one attribute test. The read miss, the commonest
request, has no path of its own: `lookup_read` and `read_done` serve it.

The parameters are `CacheParams` (disk_models/cache_params.py, imported here).
"""

from __future__ import annotations

from blksim.disk_models.cache_params import CacheParams

MISS = 0
HIT = 1       # every requested sector is (or is being read into) the buffer
PARTIAL = 2   # the first sectors are in the buffer, the rest must come from the media

KIND_NAMES = {MISS: "miss", HIT: "hit", PARTIAL: "partial"}

__all__ = ["HIT", "KIND_NAMES", "MISS", "PARTIAL", "CacheParams", "CacheResult", "Segment",
           "SegmentCache"]


class Segment:
    """One buffer segment: valid LBNs ``[start, end)``; ``dirty_until`` is when the
    last media write of its data ends (write-back), ``from_write`` whether its
    data came from the host; ``extent`` (a read segment) the first LBN the drive has
    counted as the segment's since the read miss that filled it: a write from there to
    ``end`` empties the segment, even where the sectors are no longer valid."""

    __slots__ = ("index", "start", "end", "from_write", "dirty_until", "dirty_start",
                 "ra_min", "ra_max", "dedicated", "extent")

    def __init__(self, index: int, dedicated: bool = False) -> None:
        self.index = index
        self.start = 0
        self.end = 0
        self.from_write = False
        self.dirty_until = 0.0
        self.dirty_start = 0
        self.ra_min = 0
        self.ra_max = 0
        self.dedicated = dedicated
        self.extent = 0

    def __repr__(self) -> str:
        return (f"Segment({self.index}, [{self.start}, {self.end}), write={self.from_write}, "
                f"dirty_until={self.dirty_until:.6f})")


class CacheResult:
    """What `SegmentCache.lookup` found, and what the drive must do about it.

    kind          MISS, HIT or PARTIAL
    cmd_hit       which command overhead DiskSim charges: hit (True) or miss (False)
    fast          (writes) completion is reported once the data are in the buffer
    append        (writes) the data append to a segment being written back: no wait
    stream       (reads) the hit is on the segment being prefetched; the prefetch goes on
    cached        (reads) requested sectors already in the buffer, from the first one
    t_ready       (HIT/stream PARTIAL) when the last requested sector is in the buffer
    media_lbn, media_n   sectors the drive must take off (reads) or put on (writes)
                  the media itself; media_n == 0 means none
    wait_until    the head assembly is busy until then with work the request cannot
                  interrupt (a destage, or a prefetch short of its minimum): the
                  request's data transfer and its media access both wait
    head_lbn      >= 0: a prefetch moved the head; it is on the track of this LBN and
                  free at ``head_free`` (the drive sets its head state from them)
    head_run      the prefetch run holding ``head_lbn`` (with whatever fields the
                  media added after the five, such as the track)
    prefetch_after  (HIT) call `hit_done`: a prefetch starts from the segment's end
    random        (whole HIT, not on the prefetch in progress) the request does not start
                  where the previous request ended, and ``random_hit_overhead`` is
                  "miss": the drive charges at least the read miss command overhead
    """

    # Defaults live on the class: a lookup creates a bare result and sets only what
    # differs (cheaper than assigning all eighteen fields per request).
    kind = MISS
    cmd_hit = False
    fast = False
    append = False
    stream = False
    cached = 0
    t_ready = 0.0
    wait_until = 0.0
    head_lbn = -1
    head_free = 0.0
    head_run = None
    prefetch_after = False
    random = False
    seg = None

    def __init__(self, lbn: int = 0, n: int = 0, write: bool = False) -> None:
        self.lbn = self.media_lbn = lbn
        self.n = self.media_n = n
        self.write = write

    def __repr__(self) -> str:
        return (f"CacheResult({KIND_NAMES[self.kind]}, lbn={self.lbn}, n={self.n}, "
                f"write={self.write}, cmd_hit={self.cmd_hit}, fast={self.fast}, "
                f"append={self.append}, stream={self.stream}, cached={self.cached}, "
                f"t_ready={self.t_ready}, media=({self.media_lbn}, {self.media_n}), "
                f"wait_until={self.wait_until}, head=({self.head_lbn}, {self.head_free}), "
                f"prefetch_after={self.prefetch_after})")


class SegmentCache:
    """DiskSim-style segmented buffer/cache with read-ahead and write-back in time.

    See the module docstring for ``media`` and docs/drive-cache.md for the call
    sequence the drive follows (``lookup`` at the start of every request, then
    ``read_done``, ``hit_done`` or ``write_done``).
    """

    __slots__ = ("p", "media", "capacity", "enabled", "size", "_segs", "_lru", "_wseg",
                 "_res", "_pf_seg", "_pf_runs", "_pf_stop", "_pf_min", "_pf_covered",
                 "_pf_end", "_destage_until", "stats", "_last_end", "_stream_segs")

    def __init__(self, params: CacheParams, media=None, capacity: int = 1 << 62) -> None:
        self.p = params
        self.media = media
        self.capacity = capacity
        self.enabled = params.enabled
        self.size = params.segment_size
        nread = params.segments - (1 if params.separate_write_segment else 0)
        self._segs = [Segment(i) for i in range(nread)]
        self._lru = list(self._segs)            # least recently used first
        self._wseg = Segment(nread, dedicated=True) if params.separate_write_segment else None
        self._res = CacheResult()   # the last lookup's result
        self._pf_seg = None      # segment being prefetched into (None: no prefetch)
        self._pf_runs = []
        self._pf_end = 0.0       # when the prefetch's last run ends
        self._pf_stop = 0        # prefetch ends before this LBN
        self._pf_min = 0         # ... and cannot be stopped before this LBN
        self._pf_covered = 0     # the runs reach this LBN
        self._destage_until = 0.0
        self._last_end = -1      # one past the last sector of the previous request
        # `CacheParams.stream_segments` (a property), read once per read
        self._stream_segs = params.stream_segments
        self.stats = {"read_hits": 0, "read_partial": 0, "read_misses": 0,
                      "write_fast": 0, "write_appends": 0, "write_through": 0,
                      "prefetch_started": 0, "prefetch_stopped": 0}
        if self.enabled and params.continuous_read and media is None:
            raise ValueError("drive cache: read-ahead needs a media object (stream/position)")

    # ---------------------------------------------------------------- queries

    @property
    def segments(self) -> list:
        """All segments (the dedicated write segment last)."""
        return self._segs + ([self._wseg] if self._wseg is not None else [])

    def prefetching(self) -> bool:
        """True while a prefetch is registered (it may have finished by now)."""
        return self._pf_seg is not None

    def contents(self, now: float) -> list:
        """``[(start, end), ...]`` of every non-empty segment as it is at ``now``
        (prefetched sectors complete by ``now`` included). Does not change state."""
        out = []
        for s in self.segments:
            start, end = s.start, s.end
            if s is self._pf_seg:
                end = self._progress(now)[0]
                if end - start > self.size:
                    start = end - self.size
            if s.from_write and not self.p.read_hits_on_write_data and s.dirty_until <= now:
                continue
            if end > start:
                out.append((start, end))
        return out

    def sector_ready_time(self, lbn: int) -> float:
        """When sector ``lbn`` of the current prefetch is complete in the buffer
        (``lbn`` must lie in the prefetch's runs)."""
        run = self._pf_run_of(lbn)
        return run[3] + (lbn - run[0] + 1) * run[4]

    def _pf_run_of(self, lbn: int) -> tuple:
        """The run of the current prefetch holding sector ``lbn``."""
        for run in self._pf_runs:
            if lbn < run[0] + run[1]:
                return run
        raise ValueError(f"sector {lbn} is not in the prefetch")

    # ---------------------------------------------------------------- prefetch in time

    def _progress(self, t: float):
        """Where the prefetch is at ``t``: (end of the sectors complete, lbn of the
        sector under way or next, run index, sector start time or track arrival)."""
        runs = self._pf_runs
        j = 0
        for run in runs:
            t_first = run[3]
            cnt = run[1]
            dt = run[4]
            if t < t_first + cnt * dt:
                lbn0 = run[0]
                if t < t_first:
                    return lbn0, lbn0, j, run[2]
                k = int((t - t_first) / dt)
                if k >= cnt:
                    k = cnt - 1
                return lbn0 + k, lbn0 + k, j, t_first + k * dt
            j += 1
        if runs:
            lbn0, cnt, _ta, t_first, dt = runs[-1][:5]
            return lbn0 + cnt, -1, len(runs), t_first + cnt * dt
        return self._pf_seg.end, -1, 0, 0.0

    def _stop_prefetch(self, t: float, res: CacheResult, force: bool, progress=None) -> None:
        """End the prefetch at ``t`` (or at its minimum read-ahead if it may not stop
        before, unless ``force``); fold its sectors into the segment; report where
        the head is and when it is free."""
        seg = self._pf_seg
        runs = self._pf_runs
        t_end = self._pf_end
        if not runs or t >= t_end:
            end = self._pf_covered if runs else seg.end
            if runs:
                res.head_lbn = end - 1
                res.head_run = runs[-1]
            res.head_free = t_end
        else:
            end, cur, j, ts = progress if progress is not None else self._progress(t)
            if not force and end < self._pf_min:
                # DiskSim: not stoppable before the minimum read-ahead; it stops there
                end = self._pf_min
                run = self._pf_run_of(end - 1)
                tm = run[3] + (end - run[0]) * run[4]
                res.head_lbn = end - 1
                res.head_run = run
                res.head_free = tm
                if tm > res.wait_until:
                    res.wait_until = tm
            else:
                # stop in runs[j], the run the head is in (``cur``: the sector under the
                # head or next, ``ts``: when that sector starts, or the track arrival
                # before the run's first sector); the segment gains the sectors before
                # ``end``
                run = runs[j]
                res.head_run = run
                self.stats["prefetch_stopped"] += 1
                end = cur
                if t < run[2]:            # switching tracks: the switch completes
                    res.head_lbn = run[0]
                    res.head_free = run[2]
                elif t < run[3]:          # waiting for the sector: stop now
                    res.head_lbn = run[0]
                    res.head_free = t
                elif self.p.stop_prefetch_in_sector:
                    res.head_lbn = cur    # abort mid-sector: that sector is lost
                    res.head_free = t
                else:                     # finish the sector under the head
                    res.head_lbn = cur
                    res.head_free = ts + run[4]
                    end = cur + 1
        if end > seg.end:
            seg.end = end
            if end - seg.start > self.size:
                seg.start = end - self.size
        self._pf_seg = None
        self._pf_runs = []
        self._pf_end = 0.0

    def _start_prefetch(self, seg: Segment, stop: int, runs_fn, t: float) -> None:
        first = seg.end
        if stop <= first:
            return
        runs = runs_fn(first, stop - first, t)
        if not runs:
            return
        self._pf_seg = seg
        self._pf_runs = list(runs)
        self._pf_stop = stop
        self._pf_min = seg.ra_min if seg.ra_min < stop else stop
        last = runs[-1]           # (lbn0, count, t_arrive, t_first, dt, ...)
        cnt = last[1]
        self._pf_covered = last[0] + cnt
        self._pf_end = last[3] + cnt * last[4]
        self.stats["prefetch_started"] += 1

    def _extend_prefetch(self, stop: int) -> None:
        """Raise the prefetch's limit to ``stop`` (a read hit on the segment)."""
        if stop <= self._pf_stop:
            return
        covered = self._pf_covered
        if stop > covered:
            more = self.media.stream(covered, stop - covered, self._pf_end)
            self._pf_runs.extend(more)
            if more:
                lbn0, cnt, _ta, t_first, dt = more[-1][:5]
                self._pf_covered = lbn0 + cnt
                self._pf_end = t_first + cnt * dt
        self._pf_stop = stop

    def _limits(self, lbn: int, n: int, seg_start: int):
        """(minimum, maximum) prefetch limit after a read of ``lbn..lbn+n-1``, as
        DiskSim's ``disk_buffer_get_max_readahead`` plus the track/cylinder stops."""
        p = self.p
        end = lbn + n
        cap = self.capacity
        mode = p.continuous_read
        if mode == 0 or end >= cap:
            return end, end
        if mode == 4:
            # one track ahead of a sequential stream: to the end of the track holding
            # the next sector, plus one track more when the segment already holds
            # sectors from before that track
            first, tend = self.media.track_bounds(end)
            if seg_start < first:
                f0, e0 = self.media.track_bounds(lbn)
                tend += e0 - f0
            hi = tend
        else:
            if p.max_read_ahead:
                hi = end + p.max_read_ahead
            elif p.read_ahead_over_requested == 0:   # keep the request's data
                if n >= self.size or self.size - n < p.min_read_ahead:
                    hi = end + p.min_read_ahead
                else:
                    hi = lbn + self.size
            else:
                hi = end + self.size
            # modes 1 and 2 stop at the end of the track (cylinder) the read-ahead starts
            # on, the one holding the sector after the request
            if mode == 1:
                hi = min(hi, self.media.track_bounds(end)[1])
            elif mode == 2:
                hi = min(hi, self.media.cylinder_bounds(end)[1])
        if hi > cap:
            hi = cap
        if hi < end:
            hi = end
        lo = end + p.min_read_ahead
        if lo > hi:
            lo = hi
        return lo, hi

    # ---------------------------------------------------------------- the request path

    def lookup(self, lbn: int, n: int, write: bool, now: float) -> CacheResult:
        """Classify request ``lbn..lbn+n-1`` starting service at ``now`` and settle the
        background work (prefetch stopped or continued). Returns the shared result."""
        if write:
            return self.lookup_write(lbn, n, now)
        return self.lookup_read(lbn, n, now)

    def _clean_write_seg(self, s: Segment, now: float) -> None:
        # a segment filled by a write that reads may not use is emptied once on media
        if s.from_write and s.dirty_until <= now and not self.p.read_hits_on_write_data:
            s.start = s.end = 0
            s.from_write = False

    def lookup_read(self, lbn: int, n: int, now: float) -> CacheResult:
        """`lookup` of a read."""
        self._res = res = CacheResult(lbn, n, False)
        if not self.enabled:
            self.stats["read_misses"] += 1
            return res
        if self._destage_until > now:
            res.wait_until = self._destage_until
        p = self.p
        end = lbn + n
        pseg = self._pf_seg
        pf_end = -1
        progress = None
        if pseg is not None:
            if now >= self._pf_end:     # finished on its own: fold it in
                self._stop_prefetch(now, res, True)
                pseg = None
            else:
                progress = self._progress(now)
                pf_end = progress[0]
        best = None
        best_v = 0
        best_whole = False
        best_hit = False
        best_end = 0
        size = self.size
        no_write_hits = not p.read_hits_on_write_data
        for s in self._lru:
            if no_write_hits and s.from_write and s.dirty_until <= now:
                self._clean_write_seg(s, now)
            s_start = s.start
            if s is pseg:
                s_end = pf_end
                if s_end - s_start > size:
                    s_start = s_end - size
            else:
                s_end = s.end
            if s_start <= lbn < s_end:
                if no_write_hits and s.from_write:
                    continue         # dirty data reads may not use (priority -1): wait
                # DiskSim's read priorities: dirty 11, being read 9, clean 8; partial -4
                v = 11 if s.dirty_until > now else (9 if s is pseg else 8)
                whole = s_end >= end
                if not whole:
                    v -= 4
                if v > best_v:
                    best, best_v, best_whole, best_hit, best_end = s, v, whole, True, s_end
            else:
                if s_end <= s_start:
                    v = 3 if s.dirty_until <= now else -1
                elif s is pseg:
                    if lbn == s_end and p.almost_read_hits:
                        # the sector being read is the first one wanted
                        if 5 > best_v:
                            best, best_v, best_whole, best_hit, best_end = s, 5, False, True, s_end
                        continue
                    v = 1
                else:
                    v = 2 if s.dirty_until <= now else -1
                if v > best_v:
                    best, best_v, best_whole, best_hit, best_end = s, v, False, False, s_end
        if best is None:
            # every segment holds dirty data: take the one written back first
            best = min(self._segs, key=_dirty_key)
            if best.dirty_until > res.wait_until:
                res.wait_until = best.dirty_until
            best_v = 0
        res.seg = best
        stream = best_hit and best is pseg
        if pseg is not None and not stream:
            self._stop_prefetch(now, res, False, progress)
        if best_hit:
            cached = (best_end if best_end < end else end) - lbn
            if cached < 0:
                cached = 0
            res.cached = cached
            res.kind = HIT if best_whole else PARTIAL
            if res.kind == HIT:
                self.stats["read_hits"] += 1
            else:
                self.stats["read_partial"] += 1
            res.cmd_hit = best_whole or p.immed_transfer_partial_hit
            if res.wait_until > now:
                res.cmd_hit = False     # DiskSim: waits disconnected, miss overhead
            lo, hi = self._limits(lbn, n, best.start)
            if lo > best.ra_min:
                best.ra_min = lo
            if hi > best.ra_max:
                best.ra_max = hi
            if stream:
                res.stream = True
                self._pf_min = max(self._pf_min, best.ra_min)
                self._extend_prefetch(max(best.ra_max, end))
                res.t_ready = now if best_whole else self.sector_ready_time(end - 1)
                res.media_n = 0
            elif best_whole:
                res.t_ready = now
                res.media_n = 0
                res.random = lbn != self._last_end and p.random_hit_overhead == "miss"
                res.prefetch_after = (p.read_ahead_on_idle_hit and p.continuous_read != 0
                                      and best.end < best.ra_max)
            else:
                res.media_lbn = best_end
                res.media_n = end - best_end
            if self._stream_segs and not best.from_write and best.start < end:
                # a stream segment: the data sent to the host become free space
                best.start = end if end < best_end else best_end
        else:
            self.stats["read_misses"] += 1
        self._touch(best)
        self._last_end = lbn + n
        return res

    def destage_end(self) -> float:
        """When the last write the cache holds dirty is on the media (0.0: none ever)."""
        return self._destage_until

    def lookup_write(self, lbn: int, n: int, now: float, fua: bool = False) -> CacheResult:
        """`lookup` of a write; a ``fua`` write (REQ_FUA) is written through whatever the
        fast-write level (it never reports completion before its data are on the media)."""
        self._res = res = CacheResult(lbn, n, True)
        if not self.enabled:
            self.stats["write_through"] += 1
            return res
        if self._destage_until > now:
            res.wait_until = self._destage_until
        p = self.p
        end = lbn + n
        pseg = self._pf_seg
        if pseg is not None:
            if now >= self._pf_end:
                self._stop_prefetch(now, res, True)
            else:
                force = False
                if p.write_hit_stop_prefetch:
                    pe = self._progress(now)[0]
                    force = lbn < pe and end > pseg.start
                self._stop_prefetch(now, res, force)
        level = p.fast_write_level
        # an append to dirty data still being written back?
        seg = None
        if p.combine_seq_writes and level and not fua:
            cands = [self._wseg] if self._wseg is not None else self._segs
            for s in cands:
                if (s.from_write and s.dirty_until > now and s.end == lbn
                        and end - s.dirty_start <= self.size):
                    seg = s
                    break
        if seg is not None:
            res.append = True
            res.fast = True
            res.wait_until = 0.0       # joins the write in progress
            self.stats["write_appends"] += 1
        else:
            if self._wseg is not None:
                seg = self._wseg
                if seg.dirty_until > res.wait_until:
                    res.wait_until = seg.dirty_until
            else:
                ndirty = 0
                for s in self._segs:
                    if s.dirty_until > now:
                        ndirty += 1
                best_v = 0
                for s in self._lru:
                    self._clean_write_seg(s, now)
                    if s.dirty_until > now:
                        continue
                    if ndirty >= p.write_segments:
                        break
                    if s.end <= s.start:
                        v = 3
                    elif s.start < end and lbn < s.end:
                        v = 4
                    else:
                        v = 2
                    if v > best_v:
                        seg, best_v = s, v
                if seg is None:    # no write segment free: wait for the first destage
                    seg = min([s for s in self._segs if s.dirty_until > now] or self._segs,
                              key=_dirty_key)
                    if seg.dirty_until > res.wait_until:
                        res.wait_until = seg.dirty_until
            res.fast = not fua and (level == 2 or (level == 1
                                                   and p.limited_fastwrite == "disksim"))
            if res.fast:
                self.stats["write_fast"] += 1
            else:
                self.stats["write_through"] += 1
        # DiskSim charges the write *hit* overhead whenever write-back is on
        res.cmd_hit = res.fast if p.limited_fastwrite == "documented" else level > 0
        res.kind = HIT if res.fast else MISS
        res.seg = seg
        self._touch(seg)
        self._last_end = lbn + n
        return res

    def _touch(self, seg: Segment) -> None:
        """``seg`` becomes the most recently used (the dedicated write segment is not
        in the LRU order)."""
        lru = self._lru
        if seg is not None and not seg.dedicated and lru[-1] is not seg:
            lru.remove(seg)
            lru.append(seg)

    # ---------------------------------------------------------------- commits

    def read_done(self, res: CacheResult, t_media_end: float, free_start: int = -1) -> None:
        """The drive has read ``res.media_lbn .. +res.media_n`` off the media, the last
        sector ending at ``t_media_end`` (head still on its track). Fills the segment
        and starts the prefetch that follows. ``free_start`` (a miss, "Read any free
        blocks"): the drive also read the sectors ``free_start .. lbn-1`` that passed
        under the head while it waited for the first wanted one; they join the segment."""
        if not self.enabled or res.seg is None:
            return
        seg = res.seg
        lbn, n = res.lbn, res.n
        end = lbn + n
        p = self.p
        if res.kind == MISS:
            seg.start = start = free_start if 0 <= free_start < lbn else lbn
            seg.extent = self._extent_start(lbn, start) if p.read_any_free_blocks else start
            seg.from_write = False
            seg.dirty_until = 0.0
            seg.ra_min = seg.ra_max = 0
        seg.end = end
        if end - seg.start > self.size:
            seg.start = end - self.size
        lo, hi = self._limits(lbn, n, seg.start)
        if lo > seg.ra_min:
            seg.ra_min = lo
        if hi > seg.ra_max:
            seg.ra_max = hi
        if self._stream_segs:
            seg.start = end       # the data sent to the host are free space
        if p.continuous_read and seg.ra_max > end:
            self._start_prefetch(seg, seg.ra_max, self.media.stream, t_media_end)

    def _extent_start(self, lbn: int, start: int) -> int:
        """Where the extent of a segment filled by a read miss of ``lbn`` (its data
        starting at ``start``) begins with "Read any free blocks" (`read_done` asks only
        then; without it, ``start``): the first LBN of ``lbn``'s track, where DiskSim
        starts the access (src/disksim_diskctlr.c, disk_buffer_seekdone)."""
        first = self.media.track_bounds(lbn)[0]
        return first if first < start else start

    def hit_done(self, res: CacheResult, t_mech: float) -> None:
        """After a HIT with ``res.prefetch_after``: the mechanics may start at ``t_mech``
        (DiskSim: arrival + read miss overhead, and not before ``res.head_free`` /
        ``res.wait_until``); the prefetch from the segment's end starts then."""
        if not res.prefetch_after or res.seg is None:
            return
        seg = res.seg
        self._start_prefetch(seg, seg.ra_max, self.media.position, t_mech)

    def write_done(self, res: CacheResult, t_media_end: float) -> None:
        """The drive has written (or, write-back, will have written) the request's data
        to the media by ``t_media_end``; until then the segment is dirty."""
        if not self.enabled or res.seg is None:
            return
        seg = res.seg
        lbn, n = res.lbn, res.n
        end = lbn + n
        if res.append:
            seg.end = end
            if end - seg.start > self.size:
                seg.start = end - self.size
        else:
            seg.start = lbn
            seg.end = end
            seg.dirty_start = lbn
            if n > self.size:
                seg.start = end - self.size
        seg.from_write = True
        seg.ra_min = seg.ra_max = 0
        if t_media_end > seg.dirty_until:
            seg.dirty_until = t_media_end
        if t_media_end > self._destage_until:
            self._destage_until = t_media_end
        # no other segment may keep a stale copy of the written sectors. A read segment
        # whose extent the write overlaps is emptied whole (DiskSim 4.0,
        # src/disksim_diskcache.c, disk_buffer_set_segment: "clear out clean, non-active,
        # overlapping segments if write"); another write segment loses those sectors.
        for s in self.segments:
            if s is seg or s.end <= s.start or lbn >= s.end:
                continue
            if s.from_write:
                if s.start < end:
                    _cut(s, lbn, end)
            elif min(s.start, s.extent) < end:
                s.start = s.end = 0


def _dirty_key(s: Segment) -> float:
    return s.dirty_until


def _cut(s: Segment, lbn: int, end: int) -> None:
    """Remove ``[lbn, end)`` from segment ``s``, keeping the larger remaining run."""
    left = lbn - s.start
    right = s.end - end
    if left <= 0 and right <= 0:
        s.start = s.end = 0
    elif left >= right:
        s.end = lbn
    else:
        s.start = end
