"""`MechanicalDrive`: a single-actuator SCSI drive serving requests FCFS, one at a time.

The service time of a request is computed from the mechanics, when it starts:

    command overhead
  + positioning: seek to the target cylinder (+ write settle for writes), or a
    head switch if only the head changes; a write also waits for its data to
    cross the bus (no write cache), overlapped with positioning
  + rotational latency from the actual platter angle when positioning ends (the
    platter turns continuously from t = 0, starting at an angle drawn from the
    seed, and keeps turning during seeks) until the first sector arrives
  + media transfer, track by track: each track boundary costs a head switch or a
    one-cylinder seek and then whatever rotation the skew leaves
  + for reads, the bus transfer of the last sector (the rest overlaps the media
    transfer, unless the bus is the slower of the two)
  + completion overhead.

Requests are served in arrival order; since the order is fixed and the drive is
deterministic, a request's completion time is computed when it is submitted.
The head's cylinder and head are kept between requests. A request queued behind
another (queue_depth > 1) has had its command processed meanwhile: its
positioning starts as soon as the previous media transfer ends, overlapping the
previous request's bus tail and completion overhead, as a tagged-queueing drive
pipelines them; completions stay in arrival order.

The LBN layout is `disk_models.layout.ZonedLayout`: plain zones, or DiskSim's g1
layout with spares, slips and defects; a transfer moves run by run (a run ends at a
track end, a slip or a spare).

A spec with an ``[overheads]`` or ``[cache]`` table or a drive-queue policy other
than FCFS is served by `DiskSimDrive`: DiskSim
4.0's overheads by case, the on-board cache (disk_models/cache.py) and the drive-side
queue policy (disk_models/tcq.py), with DiskSim's g1 positioning rules. See
docs/drives.md ("DiskSim mode") and docs/drive-cache.md. `make_drive` chooses
between the two models; constructing either class builds that model and no other.
"""

from __future__ import annotations

import array
import bisect
import math
from collections import deque

from blksim.disk_models.base import Device, DeviceError
from blksim.disk_models.layout import ZonedLayout
from blksim.disk_models.seek import make_seek
from blksim.disk_models.spec import DriveSpec
from blksim.disk_models.cache import MISS
from blksim.disk_models.first_draw import first_random

# A wait this close to a full revolution is floating-point noise on a wait of zero
# (t * rps loses ~1e-8 rev of precision after a simulated day at 15,000 rpm).
_EPS_REV = 1e-7


def _angle0_from_seed(seed) -> float:
    """The platter's angle at t = 0 (in revolutions): the seed's first uniform draw."""
    if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0:
        return first_random(seed)          # the same double numpy would draw
    import numpy as np

    if isinstance(seed, np.random.Generator):
        rng = seed
    else:
        rng = np.random.default_rng(seed)
    return float(rng.random())


#: The parts of a request's time in the drive, as ``rq.breakdown`` carries them (s), and
#: whether the on-board cache served it.
BREAKDOWN_KEYS = ("queue", "overhead", "seek", "rotation", "transfer", "bus")


def request_breakdown(b: dict, cache_hit: bool) -> dict:
    """A request's own breakdown, from the drive's `service_breakdown` of it."""
    out = {k: b[k] for k in BREAKDOWN_KEYS}
    out["cache_hit"] = cache_hit
    return out


def read_bus_end(runs, skip: int, n: int, start: float, bus: float) -> float:
    """When the last of a read's ``n`` sectors has crossed the bus to the host.

    The bus takes one sector every ``bus`` seconds from ``start`` and sends each sector
    only once it is wholly in the buffer. The first ``skip`` sectors are in the buffer
    already (a partial hit); the others come off the media in ``runs``, each
    ``(lbn, count, t_arrive, t_first, dt, ...)`` as `DiskSimDrive._runs` gives them, in
    request order. When the bus is slower than the media it drains the buffer and, at a
    track or cylinder switch, catches up and waits for the next sector: the end is then
    set by the first sector after the switch, not by the mean rate of the whole read.
    DiskSim 4.0 (src/disksim_diskctlr.c, disk_reconnection_or_transfer_complete): each
    transfer sends what the buffer holds beyond what was sent; with none, the drive keeps
    the bus and waits for the next sector ("Hold bus entire read xfer"), or disconnects
    and reconnects once the high-water mark is in again. blksim times both as the first:
    they agree when the mark is one sector and reselection is free, as on every drive of
    DiskSim's validation set that releases the bus.

    With sector i (1..n) in the buffer at a_i, the bus ends at
    max(start + n * bus, max_i a_i + (n - i + 1) * bus); within a run a_i grows by ``dt``
    a sector, so the inner maximum is at the run's first or last sector.
    """
    end = start + n * bus
    i = skip                                   # sectors of the request before the run
    for run in runs:
        count, t_first, dt = run[1], run[3], run[4]
        head = t_first + dt + (n - i) * bus    # the run's first sector, then the rest
        tail = t_first + count * dt + (n - i - count + 1) * bus
        if head > end:
            end = head
        if tail > end:
            end = tail
        i += count
    return end


def sector_in_at(runs, k: int) -> float:
    """When the ``k``-th sector (1-based) read off the media in ``runs`` (as for
    `read_bus_end`) is wholly in the buffer; past the last run, when the last one is."""
    i = 0
    for run in runs:
        count = run[1]
        if k <= i + count:
            return run[3] + (k - i) * run[4]
        i += count
    last = runs[-1]
    return last[3] + last[1] * last[4]


class MechanicalDrive(Device):
    """A zoned, skewed, single-head-assembly drive described by a `DriveSpec`.

    ``queue_depth`` requests may be outstanding; they are served first come,
    first served. Times are seconds; sectors are 512 bytes.
    """

    __slots__ = (
        "spec", "name", "capacity", "queue_depth", "layout", "seek_model", "angle0",
        "record_breakdown",
        "cur_cyl", "cur_head", "_free_at", "_mech_free", "_done_t", "_done_rq",
        # hot-path constants (plain floats / lists)
        "_rps", "_rev", "_cmd", "_cpl", "_settle", "_hsw", "_bus", "_heads",
        "_seek_fn", "_seek_tab",
        "_s_lbn", "_s_zone", "_s_slot", "_s_D", "_s_U", "_s_a0",
        "_z_cyl", "_z_spt", "_z_spc", "_z_cstep", "_z_hstep", "_z_serp",
        # breakdown of the last request
        "_b_start", "_b_queue", "_b_seek", "_b_rot", "_b_xfer", "_b_bus", "_b_end",
        "_layout_locate",
    )

    def __init__(self, spec: DriveSpec, seed=0, queue_depth: int | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.capacity = spec.capacity
        qd = spec.queue_depth if queue_depth is None else queue_depth
        if isinstance(qd, bool) or not isinstance(qd, int) or qd < 1:
            raise DeviceError(f"{spec.name}: queue_depth: expected an integer >= 1, found {qd!r}")
        self.queue_depth = qd
        self.layout = lay = ZonedLayout(spec)
        self.seek_model = sk = make_seek(spec)
        self.angle0 = _angle0_from_seed(seed)
        self.cur_cyl = 0
        self.cur_head = 0
        self._free_at = 0.0    # completion time of the last request accepted
        self._mech_free = 0.0  # when the last request's media transfer ends
        self._done_t = deque()
        self._done_rq = deque()

        self._rps = spec.rpm / 60.0
        self._rev = 60.0 / spec.rpm
        self._cmd = spec.command_overhead_ms / 1e3
        self._cpl = spec.completion_overhead_ms / 1e3
        self._settle = spec.write_settle_ms / 1e3
        self._hsw = spec.head_switch_ms / 1e3
        self._bus = 512.0 / (spec.bus_mb_per_s * 1e6)
        self._heads = spec.heads
        self._seek_fn = sk.time
        # seek time by every distance the arm can travel, shared with like drives
        self._seek_tab = sk.by_distance(spec.cylinders)
        self._s_lbn, self._s_zone, self._s_slot = lay.s_lbn, lay.s_zone, lay.s_slot
        self._s_D, self._s_U, self._s_a0 = lay.s_D, lay.s_U, lay.s_a0
        self._z_cyl, self._z_spt, self._z_spc = lay.z_cyl, lay.z_spt, lay.z_spc
        self._z_cstep, self._z_hstep, self._z_serp = lay.z_cyl_step, lay.z_head_step, lay.z_serp
        self._layout_locate = lay.locate_spt
        self._b_start = self._b_queue = self._b_seek = self._b_rot = self._b_xfer = 0.0
        # True: each request carries where its time went (``rq.breakdown``), for
        # per-request output; off by default (a dict per request)
        self.record_breakdown = False
        self._b_bus = 0.0
        self._b_end = 0.0

    # ------------------------------------------------------------------ Device

    def can_accept(self) -> bool:
        """True while fewer than ``queue_depth`` requests are outstanding."""
        return len(self._done_t) < self.queue_depth

    def outstanding(self) -> int:
        """Requests accepted and not yet completed."""
        return len(self._done_t)

    def next_event_time(self) -> float | None:
        """Completion time of the oldest outstanding request, or None when idle."""
        dt = self._done_t
        return dt[0] if dt else None

    def submit(self, rq, now: float) -> None:
        """Accept ``rq`` at ``now``; it starts when the previous request completes."""
        dt = self._done_t
        if len(dt) >= self.queue_depth:
            raise self._full_error(len(dt))
        lbn = rq.sector
        n = rq.nr_sectors
        if lbn < 0 or n <= 0 or lbn + n > self.capacity:
            raise self._range_error(lbn, n)
        t_done = self._service(lbn, n, rq.write, now)
        dt.append(t_done)
        self._done_rq.append(rq)
        if self.record_breakdown:
            rq.breakdown = request_breakdown(self.service_breakdown, False)

    def _full_error(self, n_out: int) -> DeviceError:
        return DeviceError(f"{self.name}: submit with {n_out} requests outstanding "
                           f"(queue_depth {self.queue_depth})")

    def _range_error(self, lbn: int, n: int) -> DeviceError:
        return DeviceError(f"{self.name}: request {lbn}+{n} outside the drive "
                           f"(0..{self.capacity - 1}, at least one sector)")

    def pop_completed(self, now: float) -> list:
        """Remove and return the requests completed by ``now``, in completion order."""
        dt = self._done_t
        out = []
        if dt and dt[0] <= now:
            rqs = self._done_rq
            while dt and dt[0] <= now:
                dt.popleft()
                out.append(rqs.popleft())
        return out

    def describe(self) -> dict:
        """Facts for reports: name, capacity, rpm, geometry, seek, bus and queue depth."""
        s = self.spec
        return {
            "name": s.name, "model": "mechanical", "capacity_sectors": self.capacity,
            "capacity_bytes": self.capacity * 512, "rpm": s.rpm, "heads": s.heads,
            "cylinders": s.cylinders, "zones": len(s.zones),
            "sectors_per_track_outer": s.zones[0].sectors_per_track,
            "sectors_per_track_inner": s.zones[-1].sectors_per_track,
            "seek": (f"curve {s.seek.single_cyl_ms}/{s.seek.avg_ms}/{s.seek.full_stroke_ms} ms"
                     if s.seek.form == "curve" else "hpl equation" if s.seek.form == "hpl"
                     else f"table of {len(s.seek.points)} points"),
            "bus_mb_per_s": s.bus_mb_per_s, "queue_depth": self.queue_depth,
        }

    # ---------------------------------------------------------------- mechanics

    def platter_angle(self, t: float) -> float:
        """Angle (revolutions, [0, 1)) of the platter under the heads at time ``t``."""
        return (self.angle0 + t * self._rps) % 1.0

    def physical_angle(self, lbn: int) -> float:
        """Angle (revolutions) at which sector ``lbn`` starts passing under its head."""
        return self.layout.physical_angle(lbn)

    def seek_time(self, distance: int, write: bool = False) -> float:
        """Arm movement time (s) over ``distance`` cylinders, with write settle for writes."""
        if distance == 0:
            return 0.0
        return self._seek_fn(abs(distance)) + (self._settle if write else 0.0)

    @property
    def service_breakdown(self) -> dict:
        """Where the last request's time went (s), from submission (``start``) to
        completion (``end``): ``overhead`` (command + completion), ``queue`` (waiting
        for the previous request), ``seek`` (or head switch, with write settle),
        ``rotation`` (latency to the first sector), ``transfer`` (media, including
        track switches) and ``bus`` (the part not overlapped); they sum to ``total``."""
        return {"start": self._b_start, "end": self._b_end, "overhead": self._cmd + self._cpl,
                "queue": self._b_queue, "seek": self._b_seek, "rotation": self._b_rot,
                "transfer": self._b_xfer, "bus": self._b_bus,
                "total": self._b_end - self._b_start}

    def _service(self, lbn: int, n: int, write: bool, now: float) -> float:
        """Serve sectors ``lbn..lbn+n-1`` submitted at ``now``; return the completion time.

        Moves the head, advances the drive's busy times and records the breakdown.
        """
        s_lbn = self._s_lbn
        j = bisect.bisect_right(s_lbn, lbn) - 1
        z = self._s_zone[j]
        s = self._z_spt[z]
        D = self._s_D[j]
        if D:  # D data sectors in every unit of U (spares at each unit's end)
            q, r = divmod(lbn - s_lbn[j], D)
            c, r = divmod(self._s_slot[j] + q * self._s_U[j] + r, self._z_spc[z])
            run = D - r if D - r < s_lbn[j + 1] - lbn else s_lbn[j + 1] - lbn
        else:
            c, r = divmod(self._s_slot[j] + lbn - s_lbn[j], self._z_spc[z])
            run = s_lbn[j + 1] - lbn
        h, k = divmod(r, s)
        cyl = self._z_cyl[z] + c
        track_a = self._s_a0[j] + c * self._z_cstep[z] + h * self._z_hstep[z]
        if self._z_serp[z] and ((c if self._z_serp[z] == 1 else cyl) & 1):
            h = self._heads - 1 - h  # serpentine: odd cylinders run the heads backwards

        t_cmd = now + self._cmd
        prev_done = self._free_at
        mech = self._mech_free
        t = t_cmd if t_cmd > mech else mech
        dist = cyl - self.cur_cyl
        if dist:
            seek = self._seek_tab[dist if dist > 0 else -dist]
            if write:
                seek += self._settle
                if seek < 0.0:  # a negative settle delta (DiskSim allows it)
                    seek = 0.0
        elif h != self.cur_head:
            seek = self._hsw
        else:
            seek = 0.0
        t_pos = t + seek
        if write:
            # the data crosses the bus once the command is in and the bus is free
            t_data = (t_cmd if t_cmd > prev_done else prev_done) + n * self._bus
            t_ready = t_data if t_data > t_pos else t_pos
        else:
            t_ready = t_pos

        rps = self._rps
        rev = self._rev
        a0 = self.angle0
        wait = (track_a + k / s - a0 - t_ready * rps) % 1.0
        if wait > 1.0 - _EPS_REV:
            wait = 0.0
        t_media = t_ready + wait * rev

        left = s - k
        if run < left:
            left = run
        if n <= left:
            t_cur = t_media + n * rev / s
            runs = ((lbn, n, t_ready, t_media, rev / s),)
        else:
            # run by run: a run ends at a track end, a slip or a spare; then switch
            # (seek, head switch, or nothing after a slip) and wait for the next run
            t_cur = t_media + left * rev / s
            runs = [(lbn, left, t_ready, t_media, rev / s)]
            remaining = n - left
            nxt = lbn + left
            locate = self._layout_locate
            seek_tab = self._seek_tab
            settle = self._settle if write else 0.0
            hsw = self._hsw
            while remaining:
                n_cyl, n_h, k, angle, run, s = locate(nxt)
                if n_cyl != cyl:
                    t_sw = seek_tab[n_cyl - cyl if n_cyl > cyl else cyl - n_cyl] + settle
                    t_r = t_cur + (t_sw if t_sw > 0.0 else 0.0)
                elif n_h != h:
                    t_r = t_cur + hsw
                else:
                    t_r = t_cur
                cyl, h = n_cyl, n_h
                wait = (angle - a0 - t_r * rps) % 1.0
                if wait > 1.0 - _EPS_REV:
                    wait = 0.0
                m = remaining if remaining < run else run
                runs.append((nxt, m, t_r, t_r + wait * rev, rev / s))
                t_cur = t_r + (wait + m / s) * rev
                remaining -= m
                nxt += m
        self.cur_cyl = cyl
        self.cur_head = h
        self._mech_free = t_cur

        if write:
            t_end = t_cur
            bus = t_ready - t_pos
        else:
            t_end = read_bus_end(runs, 0, n, t_media, self._bus)
            bus = t_end - t_cur
        t_done = t_end + self._cpl
        queue = t - t_cmd
        if t_done < prev_done:  # completions stay in arrival order
            queue += prev_done - t_done
            t_done = prev_done
        self._free_at = t_done

        self._b_start = now
        self._b_queue = queue
        self._b_seek = seek
        self._b_rot = t_media - t_ready
        self._b_xfer = t_cur - t_media
        self._b_bus = bus
        self._b_end = t_done
        return t_done


class DiskSimDrive(MechanicalDrive):
    """`MechanicalDrive` with DiskSim 4.0's controller overheads by case, on-board cache
    (segments, read-ahead, write-back) and drive-side queue policy. `make_drive` builds
    one when the spec has an ``[overheads]`` or ``[cache]`` table or a queue policy other
    than FCFS; other specs keep the plain (and faster) path."""

    __slots__ = ("_ovh", "_cache", "_cache_on", "_tq", "_fcfs", "_pend", "_act",
                 "_prev_write", "_busbus", "_busw", "_ccmd", "_bd", "_hwm", "_hwm_req",
                 "_reconn", "_lwm", "_free_blocks", "_min_wseek", "_ewd", "_xdisc", "_last_wend",
                 "_seq_gate_delay", "_tb_first", "_tb_end", "_end_lbn", "_end_t",
                 "_end_cyl", "_end_h", "_end_next")

    #: a write-through write on the track the head is on starts no earlier than
    #: "Minimum seek delay" after its data gate (blksim's rule; docs/validation.md)
    seq_gate_delay = True

    def __init__(self, spec: DriveSpec, seed=0, queue_depth: int | None = None) -> None:
        super().__init__(spec, seed=seed, queue_depth=queue_depth)
        self._init_full(spec)

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
        if lbn < 0 or n <= 0 or lbn + n > self.capacity:
            raise self._range_error(lbn, n)
        if not n_out and self._fcfs:   # an idle FCFS drive starts it at once
            self._serve(rq, now, now)
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

    # ======================================================= DiskSim-style drive path
    #
    # Used when the spec carries an [overheads] or [cache] table, or a drive-queue policy
    # other than FCFS (the DiskSim-imported presets). Requests are served one at a time
    # by the head assembly; the next one is chosen (TaggedQueue) when the previous one
    # completes, among those submitted by then. The mechanics follow DiskSim 4.0's g1
    # model (diskmodel/mech_g1.c, dm_seek_time_g1 / dm_acctime_track): positioning is the
    # larger of the seek and the head switch, plus the write settle for writes whenever
    # it is non-zero; each track is reached, then the transfer runs over its LBNs, a slip
    # inside a track costing nothing. Cache and overheads: docs/drive-cache.md.

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
        self._bd = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def _cyl_of(self, lbn: int) -> int:
        return self._layout_locate(lbn)[0]

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
        self._serve(rq, t_sub, t if t > t_sub else t_sub)

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
        return self._runs(lbn, count, t_prev_end, cyl, h, False, follow=True)

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

    # ---- one request

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

    def _miss_bus_end(self, runs, n: int) -> float:
        """When a read miss of ``n`` sectors, read off the media in ``runs``, has crossed
        the bus: `read_bus_end` from the moment the buffer holds the high-water mark's
        share of the request (Set watermark by reqsize) or of a segment, at least one
        sector, at most ``n`` (with no bus time, when the last sector is read)."""
        need = 1
        if self._hwm:
            need = int(self._hwm * (n if self._hwm_req else self._cache.size) + 1e-9)
            need = n if need > n else 1 if need < 1 else need
        return read_bus_end(runs, 0, n, sector_in_at(runs, need), self._busbus)

    def _serve(self, rq, t_sub: float, now: float) -> None:
        """Serve ``rq`` (submitted at ``t_sub``) from ``now``: the drive is busy with it
        until its completion, ``self._act[1]``."""
        if rq.write:
            self._serve_write(rq, t_sub, now)
        else:
            self._serve_read(rq, t_sub, now)

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
        reconnects to the bus at the high-water mark (`_miss_bus_end`), a partial hit
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
            t_end = self._miss_bus_end(runs, n)
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
        cache = self._cache
        res = cache.lookup_write(lbn, n, now)
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


def _needs_full(spec) -> bool:
    """True when ``spec`` asks for DiskSim's overheads, cache or a drive-queue policy."""
    return bool(spec.overheads) or bool(spec.cache) or spec.queue_policy != "fcfs"


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


def make_drive(spec: DriveSpec, seed=0, queue_depth: int | None = None) -> MechanicalDrive:
    """The drive model ``spec`` asks for: `DiskSimDrive` when it has DiskSim's overheads,
    on-board cache or a drive-queue policy other than FCFS, else the plain
    `MechanicalDrive`. ``seed`` (int, SeedSequence or numpy Generator) sets the
    platter's initial angle; ``queue_depth`` overrides the spec's."""
    model = DiskSimDrive if _needs_full(spec) else MechanicalDrive
    return model(spec, seed=seed, queue_depth=queue_depth)
