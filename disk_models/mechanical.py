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
than FCFS is served by `DiskSimDrive` (disk_models/disksim_drive.py) instead;
`blksim.disk_models.drive.make_drive` chooses between the two models.
"""

from __future__ import annotations

from collections import deque

from blksim.disk_models.base import Device, DeviceError
from blksim.disk_models.first_draw import first_random
from blksim.disk_models.layout import ZonedLayout
from blksim.disk_models.seek import make_seek
from blksim.disk_models.spec import DriveSpec

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
        "_place",
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
        self._place = lay.place
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
        if self.service_probe is not None:      # it waited _b_queue for those ahead
            self.service_probe(rq, now + self._b_queue)
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
        # where the request starts (`ZonedLayout.place`); ``angle`` not reduced to one
        # revolution, and ``run`` its sectors up to the track's end, a slip or a spare
        cyl, h, k, angle, run, s = self._place(lbn)

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
        wait = (angle - a0 - t_ready * rps) % 1.0
        if wait > 1.0 - _EPS_REV:
            wait = 0.0
        t_media = t_ready + wait * rev

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
