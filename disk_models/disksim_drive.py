"""`DiskSimDrive`: a drive served the DiskSim 4.0 way, one request at a time.

Used when a drive's spec carries an ``[overheads]`` or ``[cache]`` table, or a
drive-queue policy other than FCFS (the DiskSim-imported presets); `make_drive`
(disk_models/drive.py) chooses it. On top of `MechanicalDrive`'s geometry it has:

* DiskSim's controller overheads by case (disk_models/overheads.py): read or write, hit
  or miss, after a read or a write; completion, data preparation, disconnect and
  reselection (src/disksim_diskctlr.c);
* the on-board cache (disk_models/cache.py): segments, read-ahead in time, write-back;
* the drive-side queue policy (disk_models/tcq.py): the next request is chosen when
  the previous one completes, among those submitted by then;
* DiskSim's g1 mechanics for every media access (disk_models/disksim_media.py).

A request's time: the command overhead of its case; for a read miss, positioning,
rotation and the media transfer, the bus from the high-water mark; for a hit, the bus
from the buffer; for a write, the data over the bus, then (write-through) the media
write and reselection, or (write-back) completion once the data are in the buffer;
then the completion overhead. docs/drive-cache.md gives the rules with their sources.
"""

from __future__ import annotations

from blksim.disk_models.base import DeviceError
from blksim.block.request import REQ_OP_FLUSH
from blksim.disk_models.cache import MISS
from blksim.disk_models.disksim_media import G1Media
from blksim.disk_models.mechanical import (MechanicalDrive, read_bus_end,
                                           request_breakdown, sector_in_at)
from blksim.disk_models.spec import DriveSpec

# [overheads] key -> ControllerOverheads keyword
_OVH_KEYS = {
    "read_hit_after_read_ms": "read_hit_after_read_ms",
    "read_hit_after_write_ms": "read_hit_after_write_ms",
    "read_miss_after_read_ms": "read_miss_after_read_ms",
    "read_miss_after_write_ms": "read_miss_after_write_ms",
    "write_hit_after_read_ms": "write_hit_after_read_ms",
    "write_hit_after_write_ms": "write_hit_after_write_ms",
    "write_miss_after_read_ms": "write_miss_after_read_ms",
    "write_miss_after_write_ms": "write_miss_after_write_ms",
    "read_completion_ms": "read_complete_ms",
    "write_completion_ms": "write_complete_ms",
    "data_preparation_ms": "data_prep_ms",
    "first_reselect_ms": "reselect_first_ms",
    "other_reselect_ms": "reselect_other_ms",
    "read_disconnect_after_read_ms": "disconnect_read_after_read_ms",
    "read_disconnect_after_write_ms": "disconnect_read_after_write_ms",
    "write_disconnect_ms": "disconnect_write_ms",
    "per_request_ms": "per_request_ms",
    "time_scale": "time_scale",
    "bus_sector_ms": "bus_sector_ms",
}

# [cache] key -> CacheParams keyword
_CACHE_KEYS = {
    "enabled": "enabled",
    "segments": "segments",
    "segment_size_sectors": "segment_size",
    "write_segments": "write_segments",
    "separate_write_segment": "separate_write_segment",
    "continuous_read": "continuous_read",
    "read_ahead_min_sectors": "min_read_ahead",
    "read_ahead_max_sectors": "max_read_ahead",
    "read_ahead_over_requested": "read_ahead_over_requested",
    "read_ahead_on_idle_hit": "read_ahead_on_idle_hit",
    "fast_write_level": "fast_write_level",
    "combine_seq_writes": "combine_seq_writes",
    "stop_prefetch_in_sector": "stop_prefetch_in_sector",
    "write_hit_stop_prefetch": "write_hit_stop_prefetch",
    "allow_read_hits_on_write_data": "read_hits_on_write_data",
    "immediate_transfer_partial_hit": "immed_transfer_partial_hit",
    "allow_almost_read_hits": "almost_read_hits",
    "read_any_free_blocks": "read_any_free_blocks",
}


class DiskSimDrive(G1Media, MechanicalDrive):
    """`MechanicalDrive` with DiskSim 4.0's controller overheads by case, on-board cache
    (segments, read-ahead, write-back) and drive-side queue policy. `make_drive` builds
    one when the spec has an ``[overheads]`` or ``[cache]`` table or a queue policy other
    than FCFS; other specs keep the plain (and faster) path."""

    __slots__ = ("_ovh", "_cache", "_cache_on", "_tq", "_fcfs", "_pend", "_act",
                 "_prev_write", "_busbus", "_busw", "_ccmd", "_bd", "_hwm", "_hwm_req",
                 "_reconn", "_lwm", "_free_blocks", "_min_wseek", "_ewd", "_xdisc", "_last_wend",
                 "_seq_gate_delay",
                 # G1Media's state (`G1Media._init_media`): a mixin declares no slots
                 "_tb_first", "_tb_end", "_end_lbn", "_end_t", "_end_cyl", "_end_h",
                 "_end_next")

    #: a write-through write on the track the head is on starts no earlier than
    #: "Minimum seek delay" after its data gate (blksim's rule; docs/validation.md)
    seq_gate_delay = True

    def __init__(self, spec: DriveSpec, seed=0, queue_depth: int | None = None) -> None:
        super().__init__(spec, seed=seed, queue_depth=queue_depth)
        self._init_full(spec)

    @property
    def volatile_write_cache(self) -> bool:
        """A write-back cache (``fast_write_level`` 1 or 2) reports writes done early (the
        SCSI caching page's WCE bit, which drivers/scsi/sd.c reads)."""
        return self._cache is not None and self._cache.p.fast_write_level > 0

    @property
    def fua(self) -> bool:
        """The drive honours FUA: a FUA write is written through, its completion sent once
        it is on the media. SCSI drives report it in the mode parameter header's DPOFUA
        bit (SBC-2, 5.0.1); blksim's drives all do (blksim's choice: the DiskSim drives
        are SCSI drives of SBC-2's era). It matters only with a write-back cache."""
        return True

    def can_accept(self) -> bool:
        return len(self._pend) + (self._act is not None) < self.queue_depth

    def outstanding(self) -> int:
        return len(self._pend) + (self._act is not None)

    def submit(self, rq, now: float) -> None:
        """Accept ``rq`` at ``now``; it is chosen by the queue policy when the drive frees."""
        pend = self._pend
        n_out = len(pend) + (self._act is not None)
        if n_out >= self.queue_depth:
            raise self._full_error(n_out)
        lbn = rq.sector
        n = rq.nr_sectors
        if (lbn < 0 or n <= 0 or lbn + n > self.capacity) and not (
                n == 0 and getattr(rq, "op", None) == REQ_OP_FLUSH):    # (a flush: no data)
            raise self._range_error(lbn, n)
        if not n_out and self._fcfs:   # an idle FCFS drive starts it at once
            if self.service_probe is not None:
                self.service_probe(rq, now)
            if rq.write:
                self._serve_write(rq, now, now)
            else:
                self._serve_read(rq, now, now)
        else:
            pend.append((rq, now))

    def next_event_time(self) -> float | None:
        """Completion time of the request being served (choosing one first if the drive
        is idle with requests waiting), or None when idle."""
        act = self._act
        if act is None:
            if not self._pend:
                return None
            self._start_next(max(self._free_at, min(t for _, t in self._pend)))
            act = self._act
        return act[1]

    def pop_completed(self, now: float) -> list:
        """Remove and return the requests completed by ``now``, in completion order."""
        act = self._act
        if act is not None and act[1] > now:
            return []
        out = []
        while True:
            if act is None:
                if not self._pend:
                    break
                self._start_next(max(self._free_at, min(t for _, t in self._pend)))
                act = self._act
            if act[1] > now:
                break
            out.append(act[0])
            self._act = act = None
            if not self._pend:
                break
        return out

    @property
    def service_breakdown(self) -> dict:
        """As `MechanicalDrive.service_breakdown`; ``overhead`` is the command overhead of
        the case that applied plus the completion overhead, ``bus`` whatever else the
        request waited for (bus transfer not overlapped, a destage or prefetch to end)."""
        started, seek, rot, xfer, ovh, end = self._bd
        start = self._b_start
        queue = started - start
        total = end - start
        return {"start": start, "end": end, "overhead": ovh, "queue": queue, "seek": seek,
                "rotation": rot, "transfer": xfer,
                "bus": total - (ovh + queue + seek + rot + xfer), "total": total}

    # ---- construction

    def _init_full(self, spec) -> None:
        from blksim.disk_models.cache import CacheParams, SegmentCache
        from blksim.disk_models.overheads import ControllerOverheads
        from blksim.disk_models.tcq import TaggedQueue

        ov = spec.overheads_ms
        kw = {}
        for toml_key, arg in _OVH_KEYS.items():
            kw[arg] = float(ov.get(toml_key, 0.0))
        given = dict(spec.overheads)
        if "bus_sector_ms" not in given:
            # no figure in the table: the spec's bus speed (0 when infinite)
            kw["bus_sector_ms"] = 512.0 / (spec.bus_mb_per_s * 1e3) if spec.bus_mb_per_s else 0.0
        self._ovh = o = ControllerOverheads(**kw)
        c = spec.cache_params
        if spec.cache and c.get("enabled"):
            ckw = {arg: c[key] for key, arg in _CACHE_KEYS.items() if key in c}
            if not ckw.get("write_segments"):
                ckw["write_segments"] = ckw.get("segments", 1)
            ckw["write_segments"] = min(ckw["write_segments"], ckw.get("segments", 1))
            params = CacheParams(**ckw)
        else:
            params = CacheParams(enabled=False)
        self._cache = SegmentCache(params, media=self, capacity=self.capacity)
        self._cache_on = params.enabled
        self._free_blocks = params.enabled and params.read_any_free_blocks
        # the spec names DiskSim's policies (spec.QUEUE_POLICIES, in DiskSim's numbering);
        # TaggedQueue takes the number and refuses the ones it does not implement
        from blksim.disk_models.spec import QUEUE_POLICIES
        try:
            self._tq = TaggedQueue(QUEUE_POLICIES.index(spec.queue_policy) + 1,
                                   cylinder_of=self._cyl_of,
                                   age_weight=spec.queue_age_weight)
        except ValueError as e:
            raise DeviceError(f"{spec.name}: queue.policy {spec.queue_policy!r}: {e}") from None
        self._fcfs = spec.queue_policy == "fcfs"
        self._pend = []          # (rq, submit time) accepted, not started
        self._act = None         # (rq, t_done) being served
        self._prev_write = False
        self._busbus = o.bus_sector
        # a read that went to the media reconnects to the bus once the buffer holds the
        # high-water mark: that fraction of the request (Set watermark by reqsize) or of
        # a segment (src/disksim_diskctlr.c, disk_check_reconnect / "High water mark")
        self._hwm = float(c.get("high_water_mark", 0.0)) if spec.cache else 0.0
        self._hwm_req = bool(c.get("watermark_by_request_size", True))
        self._reconn = 0.0
        # a write-through write starts on the media before all its data are in: once the
        # low-water-mark share of them is (Set watermark by reqsize: of the request, else
        # of a segment), and not so early that the head would overtake the bus
        self._lwm = float(c.get("low_water_mark", 0.0)) if spec.cache else 0.0
        # "Minimum seek delay": a write's positioning takes at least this long
        # (src/disksim_diskctlr.c: disk_check_hda_pending sets it for every write that
        # does not stream on from the previous one, disk_initiate_seek applies it)
        self._min_wseek = float(ov.get("minimum_seek_delay_ms", 0.0)) * o.time_scale / 1e3
        # blksim's rule for writes that need no positioning: the minimum seek delay runs
        # from the data gate (`_write_start`), not from the command (class attribute
        # `seq_gate_delay`; False gives DiskSim's rule alone)
        self._seq_gate_delay = self.seq_gate_delay
        self._ewd = bool(ov.get("extra_write_disconnect", False))
        ts = o.time_scale / 1e3
        self._xdisc = tuple(float(ov.get(k, 0.0)) * ts for k in (
            "extradisc_command_ms", "extradisc_disconnect_ms", "extradisc_inter_disconnect_ms",
            "extradisc_second_disconnect_ms", "extradisc_seek_delta_ms"))
        self._last_wend = -1
        bw = given.get("bus_write_sector_ms")
        self._busw = bw / 1e3 if bw is not None else o.bus_sector
        self._ccmd = o.command_table()   # index 4*write + 2*hit + previous-was-write
        self._init_media()
        self._bd = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    # ---- Device, full path

    def _start_next(self, t: float) -> None:
        """Choose the next request at ``t`` (the drive free, requests waiting) and serve it."""
        pend = self._pend
        if len(pend) == 1 or self._fcfs:
            i = 0
        else:
            ready = [p for p in pend if p[1] <= t]
            if not ready:
                t = min(p[1] for p in pend)
                ready = [p for p in pend if p[1] <= t]
            rqs = [p[0] for p in ready]
            j = self._tq.pick(rqs, self.cur_cyl, t, self.positioning_time,
                              [p[1] for p in ready])
            i = pend.index(ready[j])
        rq, t_sub = pend.pop(i)
        if t < t_sub:
            t = t_sub
        if self.service_probe is not None:
            self.service_probe(rq, t)
        if rq.write:
            self._serve_write(rq, t_sub, t)
        else:
            self._serve_read(rq, t_sub, t)

    # ---- one request

    def _write_start(self, n: int, t_bus: float, busw: float, append: bool) -> float:
        """Earliest time the first sector of a write-through write may pass under the head,
        its ``n`` sectors crossing the bus from ``t_bus`` at ``busw`` per sector.

        DiskSim (src/disksim_diskcache.c, disk_buffer_block_available; called for every
        sector by disk_buffer_sector_done in src/disksim_diskctlr.c) writes a sector only
        if its data are in the buffer when it starts passing under the head; with
        "Extra write disconnect" set it also writes nothing before the buffer holds
        min(n, 10) sectors of the request (n < 45) or 15 (n >= 45). blksim takes the
        second rule from DiskSim as it is; without it, the first sector waits for the
        "Low (write) water mark" share of the data (of the request, or of a segment
        without "Set watermark by reqsize"; at least one sector), a rule of blksim's
        own (DiskSim uses the mark only to refill a write bigger than its segment). The
        per-sector rule is applied by `_runs` (``avail``)."""
        if not busw:
            return t_bus
        if self._ewd and not append:
            need = n if n < 10 else 10 if n < 45 else 15
        else:
            if self._hwm_req:
                need = int(self._lwm * n + 0.999999)
            else:
                need = int(self._lwm * self._cache.size + 0.999999)
            if need > n:
                need = n
            if need < 1:
                need = 1
        return t_bus + need * busw

    def _head_from_prefetch(self, res) -> None:
        """A prefetch the lookup stopped has moved the head: put it where the prefetch
        stopped (``res.head_lbn``), its mechanics free at ``res.head_free``."""
        run = res.head_run
        if run is not None and len(run) > 5:   # the prefetch run carries its track
            self.cur_cyl, self.cur_head = run[5], run[6]
        else:
            self.cur_cyl, self.cur_head = self._layout_locate(res.head_lbn)[:2]
        self._mech_free = res.head_free

    def _serve_read(self, rq, t_sub: float, now: float) -> None:
        """A read (DiskSim 4.0, src/disksim_diskctlr.c: disk_read_arrive,
        disk_check_hda, disk_reconnection_or_transfer_complete).

        A whole hit sends the buffer's data after the read hit overhead (a hit on the
        prefetch in progress, as each sector arrives). A miss, or the part of a partial
        hit the buffer lacks, is read off the media after the read miss overhead; a miss
        reconnects to the bus at the high-water mark, a partial hit
        sends its cached sectors at once. A miss is the commonest request, so its
        branch comes first and computes nothing it does not need."""
        lbn = rq.sector
        n = rq.nr_sectors
        cache = self._cache
        res = cache.lookup_read(lbn, n, now)
        if res.head_lbn >= 0:
            self._head_from_prefetch(res)
        pw = self._prev_write
        cmd = self._ccmd          # index 4*write + 2*hit + previous-was-write
        t_miss = now + cmd[pw]
        wait = res.wait_until
        mech = self._mech_free
        done = self._ovh.read_complete
        hit = res.kind != MISS
        if not hit:
            t_cmd = t_miss
            t0 = t_miss if t_miss > mech else mech
            if wait > t0:
                t0 = wait
            t_arr, t_first, t_cur, runs = self._media(lbn, n, False, t0)
            # the bus: `read_bus_end` from the moment the buffer holds the high-water
            # mark's share of the request (Set watermark by reqsize) or of a segment, at
            # least one sector, at most n (with no bus time, when the last one is read)
            need = 1
            if self._hwm:
                need = int(self._hwm * (n if self._hwm_req else cache.size) + 1e-9)
                need = n if need > n else 1 if need < 1 else need
            t_end = read_bus_end(runs, 0, n, sector_in_at(runs, need), self._busbus)
            free = -1
            if self._free_blocks:
                free = self._free_start(lbn, t_arr, t_first)
            cache.read_done(res, t_cur, free)
            seek, rot, xfer = t_arr - t0, t_first - t_arr, t_cur - t_first
            t_done = t_end + done
            ovh = t_cmd - now + done
        else:
            t_cmd = now + cmd[2 | pw] if res.cmd_hit else t_miss
            if res.random and t_miss > t_cmd:
                # a hit that does not continue the previous request: the command takes
                # the read-miss path (docs/drive-cache.md, "Random read hits"; not
                # DiskSim's rule)
                t_cmd = t_miss
            bus = self._busbus
            t_bus = t_cmd if t_cmd > wait else wait
            if res.media_n == 0:     # all in the buffer, or on its way from the prefetch
                seek = rot = xfer = 0.0
                t_end = max(t_bus + n * bus, res.t_ready + bus)
                if res.prefetch_after:
                    cache.hit_done(res, max(t_miss, mech, wait))
                t_done = t_end + done
                ovh = t_cmd - now + done
                if ovh > t_done - now:
                    ovh = t_done - now
            else:                    # a partial hit: the rest from the media
                t0 = t_miss if t_miss > mech else mech
                if wait > t0:
                    t0 = wait
                t_arr, t_first, t_cur, runs = self._media(res.media_lbn, res.media_n,
                                                          False, t0)
                seek, rot, xfer = t_arr - t0, t_first - t_arr, t_cur - t_first
                t_end = read_bus_end(runs, res.media_lbn - lbn, n, t_bus, bus)
                cache.read_done(res, t_cur)
                t_done = t_end + done
                ovh = t_cmd - now + done
        self._prev_write = False
        self._finish(rq, t_sub, now, seek, rot, xfer, ovh, t_done, hit)

    def _serve_write(self, rq, t_sub: float, now: float) -> None:
        """A write. DiskSim's write path (src/disksim_diskctlr.c: disk_write_arrive,
        disk_reconnection_or_transfer_complete, disk_disconnect, disk_check_bus): the
        data cross the bus after the command and data-preparation overheads; a
        write-through write then disconnects, and reselects once its last sector is on
        the media to send the completion. With "Extra write disconnect", a write
        following a write it does not continue disconnects first and takes its data
        after a delay (docs/drive-cache.md, "Write-through writes"). A write-back write
        completes once its data are in the buffer; its media write (the destage) is
        timed at once and the cache holds the segment dirty until it ends."""
        lbn = rq.sector
        n = rq.nr_sectors
        if not n:                     # a cache flush (the only request without sectors)
            self._serve_flush(rq, t_sub, now)
            return
        cache = self._cache
        # (a request without ``fua`` is a plain write: the device protocol asks only for
        # sector, nr_sectors and write)
        res = cache.lookup_write(lbn, n, now, getattr(rq, "fua", False))
        if res.head_lbn >= 0:
            self._head_from_prefetch(res)
        pw = self._prev_write
        t_cmd = now + self._ccmd[4 | (res.cmd_hit << 1) | pw]
        wait = res.wait_until
        o = self._ovh
        mech = self._mech_free
        busw = self._busw
        xd = (self._ewd and pw and not res.append and not res.fast
              and lbn != self._last_wend)
        if xd:
            x = self._xdisc
            t_cmd = now + x[0]
            t_mech = t_cmd + x[4]
            t_bus = t_cmd + x[1] + x[2] + o.reselect_first + o.data_prep
        else:
            t_mech = t_cmd
            t_bus = t_cmd + o.data_prep
        if not res.append and wait > t_bus:
            t_bus = wait
        t_data = t_bus + n * busw
        t0 = max(t_mech, mech, 0.0 if res.append else wait)
        if res.fast:
            t_min = t_data
            avail = None
        else:
            t_min = self._write_start(n, t_bus, busw, res.append)
            avail = (t_bus, busw) if busw else None
            if (self._min_wseek and self._seq_gate_delay and not res.append
                    and self._layout_locate(lbn)[:2] == (self.cur_cyl, self.cur_head)):
                # blksim's own rule (not DiskSim's): a write on the track the head is
                # already on writes its first sector no earlier than "Minimum seek
                # delay" after its data gate (docs/validation.md, "sequential writes")
                t_min += self._min_wseek
        t_arr, t_first, t_cur, _runs = self._media(lbn, n, True, t0, t_min,
                                                   0.0 if res.append else self._min_wseek,
                                                   avail)
        if t_cur < t_data:   # the last sector cannot be written before it is in
            t_cur = t_data
        self._last_wend = lbn + n
        cache.write_done(res, t_cur)
        if res.fast:
            # the media write happens after the completion: none of it is the request's
            seek = rot = xfer = 0.0
            t_done = t_data + o.write_complete
        else:
            seek, rot, xfer = t_arr - t0, t_first - t_arr, t_cur - t_first
            if xd:
                t_disc, resel = t_data + self._xdisc[3], o.reselect_other
            else:
                t_disc, resel = t_data + o.disconnect_write, o.reselect_first
            t_done = (t_cur if t_cur > t_disc else t_disc) + resel + o.write_complete
        ovh = t_cmd - now + o.write_complete
        self._prev_write = True
        self._finish(rq, t_sub, now, seek, rot, xfer, ovh, t_done, res.kind != MISS)

    def _serve_flush(self, rq, t_sub: float, now: float) -> None:
        """A cache flush (SCSI SYNCHRONIZE CACHE, ATA FLUSH CACHE): it completes once every
        write the cache reported done is on the media. The cache's destages are timed
        when their writes arrive (`_serve_write`), so the flush ends when the last of them
        does, or after its command when none is pending. Its command and completion
        overheads are the write hit's (DiskSim 4.0 has no flush command: blksim's
        choice); the head does not move."""
        o = self._ovh
        t_cmd = now + self._ccmd[4 | 2 | self._prev_write]
        dirty_end = self._cache.destage_end()
        t_done = (dirty_end if dirty_end > t_cmd else t_cmd) + o.write_complete
        if t_done > self._mech_free:
            self._mech_free = t_done
        ovh = t_cmd - now + o.write_complete
        self._finish(rq, t_sub, now, 0.0, 0.0, 0.0, ovh, t_done, False)

    def _finish(self, rq, t_sub: float, now: float, seek: float, rot: float, xfer: float,
                ovh: float, t_done: float, cache_hit: bool) -> None:
        """Record where the request's time went (`service_breakdown`: submitted at
        ``t_sub``, served from ``now``) and make it the one being served until
        ``t_done``."""
        self._bd = (now, seek, rot, xfer, ovh, t_done)
        self._b_start = t_sub
        if self.record_breakdown:
            rq.breakdown = request_breakdown(self.service_breakdown, cache_hit)
        self._free_at = t_done
        self._act = (rq, t_done)
