"""The textbook disk-scheduling algorithms as elevators, for teaching.

FCFS, SSTF, SCAN, C-SCAN, LOOK, C-LOOK and SPTF as operating-systems texts define
them (Silberschatz, Galvin and Gagne, "Operating System Concepts", ch. "Mass-Storage
Structure"; Arpaci-Dusseau and Arpaci-Dusseau, "Operating Systems: Three Easy Pieces",
ch. "Hard Disk Drives"), registered as ``fcfs``, ``sstf``, ``scan``, ``cscan``,
``look``, ``clook`` and ``sptf``. Unlike the kernel's elevators they work on
*cylinders*, not sectors, so they need the device's geometry: an elevator with
``wants_device`` gets the device once, through `attach_device`, right after the
block layer has built it. `DeviceGeometry` finds what it needs on the device (see
there); with no device attached a sector counts as its own cylinder.

Conventions, the textbook's:

* The *head* is the cylinder of the last request dispatched (``start_cylinder``
  before the first). The device's real arm follows the requests; the elevator
  only keeps the textbook count of cylinders travelled (``head_movement``).
* One request per `dispatch` call, appended to the dispatch queue's tail
  (``add_tail``), so the device sees exactly the elevator's order.
* SCAN and C-SCAN travel to the last cylinder (or cylinder 0) before they turn or
  return, as Silberschatz et al. define them ("moves toward the other end,
  servicing requests until it gets to the other end of the disk, where the head
  movement is reversed"; C-SCAN "immediately returns to the beginning of the disk
  without servicing any requests on the return trip"); LOOK and C-LOOK turn at the
  last request. The elevator's head makes those trips: each dispatch that turns at
  an edge or returns is recorded in ``routes`` (dispatch number -> the legs the
  head took to reach that request, each ``(cylinder, returning)``), and the trips
  are in ``head_movement``. The circular variants' returns (C-SCAN's edge to edge,
  C-LOOK's jump) count as head movement, as the arm really travels them, and are
  also kept apart in ``return_movement`` for the textbooks that leave them out.
  The block layer can only hand a drive requests, not bare seeks, so the modelled
  drive's arm goes from the last request of a sweep straight to the next request:
  its timing leaves the trip to the edge out. Since nothing is decided while the
  head is on its way, SCAN and LOOK (and C-SCAN and C-LOOK) serve the requests
  queued at the turn in the same order.
* Requests on one cylinder are taken in ascending sector order by the sweeps;
  SSTF takes the oldest of the nearest; ties in SPTF go to the oldest.
* No merge lookup of their own (`merge_candidate` is None): the block layer's
  generic merging still applies (the one-hit ``last_merge`` cache, from 2.6.19
  its back-merge hash), and a grown request is coalesced with its neighbour in
  sector order (`former`/`latter`).
"""

from __future__ import annotations

from bisect import bisect_left

from blksim.block.elevator import Elevator, Tunable

INT_MAX = 2**31 - 1

#: Sectors per pseudo-cylinder for devices without a geometry (RAID, service-law
#: devices): 1 MiB.
PSEUDO_CYLINDER_SECTORS = 2048


class DeviceGeometry:
    """What the textbook elevators need to know of a device, found on it.

    ``cylinder_of(sector)`` and ``cylinders`` come, in order of preference, from
    the device's own ``cylinder_of`` method and ``cylinders`` attribute; from its
    ``layout`` (a `disk_models.layout.ZonedLayout`: ``locate(lbn)[0]`` and
    ``layout.cylinders``), as `disk_models.drive.MechanicalDrive` has; else from
    pseudo-cylinders of `PSEUDO_CYLINDER_SECTORS` over its ``capacity``; with no
    device at all a sector is its own cylinder and the cylinder count is unknown
    (None).

    ``positioning_time(rq, now)`` (seconds of seek plus rotational latency to the
    request's first sector from where the arm is) comes from the device's
    ``positioning_time(sector, write, now)`` or ``positioning_time(rq, now)`` (the
    DiskSim-mode drive's estimate, what its SPTF queue uses); else it is
    computed from a `MechanicalDrive`'s public mechanics (``cur_cyl``,
    ``cur_head``, ``seek_time``, ``platter_angle``, ``layout.locate``); else it is
    the seek distance in cylinders from the device's (or the elevator's) head, so
    SPTF falls back to SSTF.
    """

    __slots__ = ("device", "cylinders", "cylinder_of", "kind", "_pos", "_pos_kind")

    def __init__(self, device=None) -> None:
        self.device = device
        self._pos = None
        self._pos_kind = "distance"
        if device is None:
            self.cylinders = None
            self.cylinder_of = _identity
            self.kind = "sector"
            return
        own = getattr(device, "cylinder_of", None)
        layout = getattr(device, "layout", None)
        if callable(own):
            self.cylinder_of = own
            n = getattr(device, "cylinders", None)
            if n is None and layout is not None:
                n = getattr(layout, "cylinders", None)
            self.cylinders = n
            self.kind = "device"
        elif layout is not None and hasattr(layout, "locate"):
            locate = layout.locate
            self.cylinder_of = lambda sector: locate(sector)[0]
            self.cylinders = getattr(layout, "cylinders", None) or getattr(
                getattr(device, "spec", None), "cylinders", None)
            self.kind = "layout"
        else:
            cap = getattr(device, "capacity", 0) or 0
            self.cylinder_of = _pseudo_cylinder
            self.cylinders = -(-cap // PSEUDO_CYLINDER_SECTORS) if cap > 0 else None
            self.kind = "pseudo"
        pos = getattr(device, "positioning_time", None)
        if callable(pos):
            if _arity(pos) == 2:     # positioning_time(rq, now), as TaggedQueue takes it
                self._pos = pos
            else:                    # positioning_time(sector, write, now)
                self._pos = lambda rq, now: pos(rq.sector, rq.write, now)
            self._pos_kind = "device"
        elif (layout is not None and hasattr(device, "seek_time")
              and hasattr(device, "platter_angle") and hasattr(device, "cur_cyl")):
            self._pos = self._mechanical_positioning
            self._pos_kind = "mechanics"

    @property
    def positioning_kind(self) -> str:
        """Where positioning times come from: device, disksim, mechanics or distance."""
        return self._pos_kind

    def positioning_time(self, rq, now: float, head: int = 0) -> float:
        """Estimated positioning time (s) to `rq`; cylinders of seek when no estimate exists."""
        if self._pos is not None:
            return self._pos(rq, now)
        dev_head = getattr(self.device, "cur_cyl", None)
        if dev_head is None:
            dev_head = head
        return float(abs(self.cylinder_of(rq.sector) - dev_head))

    def _mechanical_positioning(self, rq, now: float) -> float:
        """`MechanicalDrive`'s own rule (drive.py ``_service``), without side effects:
        the arm is free at max(now + command overhead, end of the last media transfer);
        seek (write settle for writes) or head switch, then wait for the first sector."""
        d = self.device
        spec = d.spec
        t0 = now + spec.command_overhead_ms / 1e3
        mech = getattr(d, "_mech_free", 0.0)
        if mech > t0:
            t0 = mech
        cyl, head, _k, angle, _run = d.layout.locate(rq.sector)
        if cyl != d.cur_cyl:
            pos = d.seek_time(cyl - d.cur_cyl, rq.write)
        elif head != d.cur_head:
            pos = spec.head_switch_ms / 1e3
        else:
            pos = 0.0
        wait = (angle - d.platter_angle(t0 + pos)) % 1.0
        if wait > 1.0 - 1e-7:
            wait = 0.0
        return (t0 - now) + pos + wait * 60.0 / spec.rpm


def _arity(fn) -> int:
    """Number of positional parameters of a bound callable (3 if it cannot be told)."""
    import inspect
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _identity(sector: int) -> int:
    return sector


def _pseudo_cylinder(sector: int) -> int:
    return sector // PSEUDO_CYLINDER_SECTORS


class _Node:
    """A queued request's bookkeeping: its sort key (cylinder, sector, arrival number)."""

    __slots__ = ("key",)

    def __init__(self, key: tuple) -> None:
        self.key = key


_START = Tunable("start_cylinder", 0, "cylinder", 0, INT_MAX,
                 "cylinder under the head before the first request (a start beyond the "
                 "device's last cylinder is taken as the last cylinder)")
_DIRECTION = Tunable("direction", 1, "bool", 0, 1,
                     "first sweep: 1 = towards higher cylinders, 0 = towards cylinder 0")


class TextbookElevator(Elevator):
    """Shared state of the textbook elevators: a queue kept in cylinder order and in
    arrival order, the head, the sweep direction and the textbook head movement.

    Read-only state for displays and checks: ``head`` (cylinder of the last
    dispatched request), ``up`` (sweep direction), ``head_movement`` (cylinders
    travelled, as the textbook counts them), ``return_movement`` (the part spent
    returning without serving, C-SCAN and C-LOOK), ``routes`` (dispatch number ->
    ``((cylinder, returning), ...)``, the legs the head took to that request when it
    did not go straight there: via an edge, or on a return), ``dispatched``,
    ``geometry``.
    """

    tunables = (_START,)
    own_backmerge_hash = False
    wants_device = True

    def __init__(self, dispatch_queue, params=None, hz: int = 250) -> None:
        super().__init__(dispatch_queue, params, hz)
        self._keys: list[tuple] = []   # (cylinder, sector, seq), ascending
        self._rqs: list = []           # parallel to _keys
        self._fifo: dict = {}          # seq -> rq, arrival order
        self._seq = 0
        self.geometry = DeviceGeometry(None)
        self.head = self.params["start_cylinder"]
        self.up = bool(self.params.get("direction", 1))
        self.head_movement = 0
        self.return_movement = 0
        self.routes: dict = {}   # dispatch number -> legs ((cylinder, returning), ...)
        self.dispatched = 0

    # --- the device ---------------------------------------------------------
    def attach_device(self, device) -> None:
        """Learn the device's geometry (called once by the block layer; idempotent)."""
        self.geometry = geo = DeviceGeometry(device)
        if geo.cylinders is not None and self.head > geo.cylinders - 1:
            self.head = max(geo.cylinders - 1, 0)
        # requests queued before the device was known are filed again
        if self._rqs:
            self._keys.clear()
            self._rqs.clear()
            for seq, rq in self._fifo.items():
                self._file(rq, seq)

    def cylinder_of(self, sector: int) -> int:
        """The cylinder holding `sector` on the attached device."""
        return self.geometry.cylinder_of(sector)

    @property
    def cylinders(self):
        """The device's number of cylinders (None when unknown)."""
        return self.geometry.cylinders

    def _last_cylinder(self) -> int:
        n = self.geometry.cylinders
        if n is None:  # unknown: the furthest point anything has reached
            top = self._keys[-1][0] if self._keys else 0
            return max(top, self.head)
        return n - 1

    # --- filing -------------------------------------------------------------
    def _file(self, rq, seq: int) -> None:
        """Put `rq` in the cylinder order under arrival number `seq` (not the FIFO)."""
        key = (self.geometry.cylinder_of(rq.sector), rq.sector, seq)
        rq.sched = _Node(key)
        i = bisect_left(self._keys, key)
        self._keys.insert(i, key)
        self._rqs.insert(i, rq)

    def _unfile(self, rq) -> None:
        """Take `rq` out of the cylinder order (not the FIFO)."""
        i = bisect_left(self._keys, rq.sched.key)
        del self._keys[i]
        del self._rqs[i]

    def _move(self, i: int, travel: int | None = None, via: tuple = ()) -> int:
        """Dispatch the request at sorted index `i`. The head goes straight there
        (``travel``: cylinders, default the distance), or through the legs `via`
        (``(cylinder, returning)`` each, ending at the request), recorded in
        ``routes`` and counted leg by leg."""
        rq = self._rqs[i]
        key = self._keys[i]
        del self._keys[i]
        del self._rqs[i]
        del self._fifo[key[2]]
        rq.sched = None
        if via:
            at = self.head
            for cyl, returning in via:
                leg = abs(cyl - at)
                self.head_movement += leg
                if returning:
                    self.return_movement += leg
                at = cyl
            self.routes[self.dispatched] = via
        else:
            self.head_movement += abs(key[0] - self.head) if travel is None else travel
        self.head = key[0]
        self.dispatched += 1
        self.dq.add_tail(rq)
        return 1

    def _index_of(self, rq) -> int:
        return bisect_left(self._keys, rq.sched.key)

    # --- hooks --------------------------------------------------------------
    def add(self, rq, now: float) -> None:
        """Queue `rq` under its cylinder and its arrival number."""
        seq = self._seq
        self._seq = seq + 1
        self._file(rq, seq)
        self._fifo[seq] = rq

    def merged(self, rq, front: bool, now: float) -> None:
        """A front merge moved `rq`'s start: file it again under its new cylinder."""
        key = rq.sched.key
        if rq.sector != key[1]:
            self._unfile(rq)
            self._file(rq, key[2])

    def requests_merged(self, rq, nxt, now: float) -> None:
        """`nxt` was absorbed by `rq`: drop it; `rq` keeps the earlier arrival (taking
        `nxt`'s place in the FIFO when `nxt` came first)."""
        seq, vseq = rq.sched.key[2], nxt.sched.key[2]
        self._unfile(nxt)
        nxt.sched = None
        self._unfile(rq)
        if vseq < seq:
            del self._fifo[seq]
            self._fifo[vseq] = rq      # the victim's slot keeps its position
            seq = vseq
        else:
            del self._fifo[vseq]
        self._file(rq, seq)

    def former(self, rq):
        """The queued request just below `rq` in (cylinder, sector) order."""
        if rq.sched is None:
            return None
        i = self._index_of(rq)
        return self._rqs[i - 1] if i > 0 else None

    def latter(self, rq):
        """The queued request just above `rq` in (cylinder, sector) order."""
        if rq.sched is None:
            return None
        i = self._index_of(rq) + 1
        return self._rqs[i] if i < len(self._rqs) else None

    def empty(self) -> bool:
        """True when nothing is queued."""
        return not self._keys

    def queued(self) -> int:
        """Number of queued requests."""
        return len(self._keys)

    def dispatch(self, now: float, force: bool = False) -> int:
        """Move the request the algorithm picks to the dispatch queue; 1, or 0 if empty.

        One request per call even when forced; the block layer drains by calling until 0.
        """
        if not self._keys:
            return 0
        return self._pick(now)

    def _pick(self, now: float) -> int:
        raise NotImplementedError

    # --- introspection --------------------------------------------------------
    def sort_order(self) -> list:
        """The queued requests in (cylinder, sector) order."""
        return list(self._rqs)

    def fifo_order(self) -> list:
        """The queued requests, oldest first."""
        return list(self._fifo.values())

    # --- sweeps -----------------------------------------------------------------
    def _first_at_or_above(self, cyl: int) -> int:
        """Sorted index of the first request on a cylinder >= `cyl` (len if none)."""
        return bisect_left(self._keys, (cyl,))

    def _last_at_or_below(self, cyl: int) -> int:
        """Sorted index of the highest-keyed request on a cylinder <= `cyl` (-1 if none),
        taking the lowest sector of that cylinder (so a down sweep still reads each
        cylinder in ascending sector order)."""
        i = bisect_left(self._keys, (cyl + 1,)) - 1
        if i < 0:
            return -1
        c = self._keys[i][0]
        return bisect_left(self._keys, (c,))


class FcfsElevator(TextbookElevator):
    """First come, first served: arrival order, whatever the distance."""

    name = "fcfs"

    def _pick(self, now: float) -> int:
        seq = next(iter(self._fifo))
        rq = self._fifo[seq]
        i = self._index_of(rq)
        return self._move(i, abs(self._keys[i][0] - self.head))


class SstfElevator(TextbookElevator):
    """Shortest seek time first: the request on the cylinder nearest the head
    (the oldest of those equally near)."""

    name = "sstf"

    def _pick(self, now: float) -> int:
        head = self.head
        best_d = None
        best_seq = 0
        # the nearest cylinder below-or-at and at-or-above the head, then the oldest there
        keys = self._keys
        cands = []
        j = bisect_left(keys, (head,))
        if j < len(keys):
            cands.append(keys[j][0])
        if j > 0:
            cands.append(keys[j - 1][0])
        for c in cands:
            d = abs(c - head)
            lo = bisect_left(keys, (c,))
            hi = bisect_left(keys, (c + 1,))
            seq = min(k[2] for k in keys[lo:hi])
            if best_d is None or d < best_d or (d == best_d and seq < best_seq):
                best_d, best_seq = d, seq
        rq = self._fifo[best_seq]
        return self._move(self._index_of(rq), best_d)


class ScanElevator(TextbookElevator):
    """SCAN, the elevator: sweep to the last cylinder (or cylinder 0) serving requests
    on the way, then sweep back. ``direction`` sets the first sweep. The trip from the
    last request of a sweep to the edge is a leg of the next dispatch's route."""

    name = "scan"
    tunables = (_START, _DIRECTION)
    #: True: turn at the last request (LOOK); False: at the disk's edge (SCAN).
    look = False

    def _pick(self, now: float) -> int:
        head = self.head
        keys = self._keys
        if self.up:
            i = self._first_at_or_above(head)
            if i < len(keys):
                return self._move(i, keys[i][0] - head)
            self.up = False
            i = self._last_at_or_below(head)
            if self.look:
                return self._move(i)
            return self._move(i, via=((self._last_cylinder(), False), (keys[i][0], False)))
        i = self._last_at_or_below(head)
        if i >= 0:
            return self._move(i, head - keys[i][0])
        self.up = True
        i = self._first_at_or_above(head)
        if self.look:
            return self._move(i)
        return self._move(i, via=((0, False), (keys[i][0], False)))


class LookElevator(ScanElevator):
    """LOOK: SCAN that turns at the last request in its direction, not at the edge."""

    name = "look"
    look = True


class CscanElevator(TextbookElevator):
    """C-SCAN: sweep one way only (``direction``); at the edge, return to the other
    edge without serving and sweep again. The route of the first request after the
    turn is: to the edge, back to the other edge (returning), on to the request. The
    return counts as head movement, as the arm travels it (and is in
    ``return_movement``, for the count without it)."""

    name = "cscan"
    tunables = (_START, _DIRECTION)
    look = False

    def _pick(self, now: float) -> int:
        head = self.head
        keys = self._keys
        if self.up:
            i = self._first_at_or_above(head)
            if i < len(keys):
                return self._move(i, keys[i][0] - head)
            c = keys[0][0]  # wrap to the lowest request
            if self.look:
                return self._move(0, via=((c, True),))
            edge = self._last_cylinder()
            return self._move(0, via=((edge, False), (0, True), (c, False)))
        i = self._last_at_or_below(head)
        if i >= 0:
            return self._move(i, head - keys[i][0])
        c = keys[-1][0]  # wrap to the highest request
        i = bisect_left(keys, (c,))
        if self.look:
            return self._move(i, via=((c, True),))
        edge = self._last_cylinder()
        return self._move(i, via=((0, False), (edge, True), (c, False)))


class ClookElevator(CscanElevator):
    """C-LOOK: C-SCAN that jumps back to the lowest request, not to cylinder 0
    (the jump counts as head movement and in ``return_movement``)."""

    name = "clook"
    look = True


class SptfElevator(TextbookElevator):
    """Shortest positioning time first: the request the device reaches soonest (seek
    plus rotational latency, from the device's estimate; see `DeviceGeometry`).
    Ties go to the oldest. Without an estimate it is SSTF by seek distance."""

    name = "sptf"

    def _pick(self, now: float) -> int:
        geo = self.geometry
        head = self.head
        best = None
        best_t = 0.0
        for rq in self._fifo.values():   # oldest first: strict < keeps the oldest on ties
            t = geo.positioning_time(rq, now, head)
            if best is None or t < best_t:
                best, best_t = rq, t
        i = self._index_of(best)
        return self._move(i, abs(self._keys[i][0] - head))


TEXTBOOK_SCHEDULERS = {
    cls.name: cls for cls in (FcfsElevator, SstfElevator, ScanElevator, CscanElevator,
                              LookElevator, ClookElevator, SptfElevator)
}

__all__ = ["DeviceGeometry", "TextbookElevator", "FcfsElevator", "SstfElevator",
           "ScanElevator", "CscanElevator", "LookElevator", "ClookElevator", "SptfElevator",
           "TEXTBOOK_SCHEDULERS", "PSEUDO_CYLINDER_SECTORS"]
