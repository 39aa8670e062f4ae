"""Tagged command queueing: which of the queued requests a drive serves next.

A drive that holds several commands (SCSI TCQ, SATA NCQ) orders them itself.
`TaggedQueue.pick` chooses among the requests waiting in the drive, by one of
the policies below. It needs nothing of the drive's internals: a request is any
object with ``sector`` (first LBN), ``nr_sectors`` and ``write``; the drive
passes a ``cylinder_of(lbn)`` callable at construction (for the cylinder-based
policies) and, for SPTF, a ``positioning_time(rq, now)`` callable at each pick
(seek + rotational latency from the drive's current head position and angle).

Policies (``policy=`` name, then the DiskSim 4.0 "Scheduling policy" number that
selects the same rule in ``src/disksim_ioqueue.c`` / ``disksim_ioqueue.h``):

=============  ===  ==========================================================
``fcfs``        1   oldest first (DiskSim FCFS)
``look_lbn``    2   elevator over LBNs: keep going in the current direction,
                    reverse when nothing is left ahead (DiskSim ELEVATOR_LBN)
``clook_lbn``   3   C-LOOK over LBNs: the lowest LBN at or above the last one
                    served, else wrap to the lowest (DiskSim CYCLE_LBN)
``sstf_lbn``    4   nearest LBN to the end of the last request (DiskSim SSTF_LBN)
``look``        5   elevator over cylinders (DiskSim ELEVATOR_CYL)
``clook``       6   C-LOOK over cylinders (DiskSim CYCLE_CYL)
``sstf``        7   nearest cylinder to the head (DiskSim SSTF_CYL)
``sptf``        8   shortest positioning time first, seek + rotation from the
                    drive's rotational model (DiskSim SPTF_OPT)
``asptf``      14   aged SPTF: positioning time less ``age_weight`` ms for every
                    second the request has waited (DiskSim ASPTF_OPT, with
                    "Timeout time/weight" as the weight; Jacobson and Wilkes,
                    "Disk scheduling algorithms based on rotational position",
                    HP Labs TR HPL-CSP-91-7, 1991): a request far from the
                    others is served at last, where plain SPTF can pass it over
                    for as long as closer ones keep arriving
=============  ===  ==========================================================

DiskSim's other numbers (9 SPCTF_OPT, 10 SATF_OPT, 11-13 weighted and 15-16
aged variants, 17-18 VSCAN, 19-21 priority variants, 22-23 SDF, 24-26 SPTF rotation/
seek weights, 27 TSPS, 28 BATCH_FCFS) are not implemented; `policy_from_disksim`
names them in its error. Ties are broken by age (the request queued first wins);
DiskSim's SSTF alternates direction on ties, which is not reproduced.
"""

from __future__ import annotations

POLICIES = ("fcfs", "look_lbn", "clook_lbn", "sstf_lbn", "look", "clook", "sstf", "sptf",
            "asptf")

DISKSIM_POLICY = {1: "fcfs", 2: "look_lbn", 3: "clook_lbn", 4: "sstf_lbn", 5: "look",
                  6: "clook", 7: "sstf", 8: "sptf", 14: "asptf"}

_DISKSIM_UNSUPPORTED = {
    9: "SPCTF_OPT", 10: "SATF_OPT", 11: "WPTF_OPT", 12: "WPCTF_OPT", 13: "WATF_OPT",
    15: "ASPCTF_OPT", 16: "ASATF_OPT", 17: "VSCAN_LBN", 18: "VSCAN_CYL",
    19: "PRI_VSCAN_LBN", 20: "PRI_ASPTF_OPT", 21: "PRI_ASPCTF_OPT", 22: "SDF_APPROX",
    23: "SDF_EXACT", 24: "SPTF_ROT_OPT", 25: "SPTF_ROT_WEIGHT", 26: "SPTF_SEEK_WEIGHT",
    27: "TSPS", 28: "BATCH_FCFS",
}


def policy_from_disksim(number: int) -> str:
    """The policy name for DiskSim's "Scheduling policy" ``number``."""
    if number in DISKSIM_POLICY:
        return DISKSIM_POLICY[number]
    if number in _DISKSIM_UNSUPPORTED:
        raise ValueError(f"DiskSim scheduling policy {number} ({_DISKSIM_UNSUPPORTED[number]}) "
                         f"is not implemented; supported: "
                         + ", ".join(f"{k} ({v})" for k, v in DISKSIM_POLICY.items()))
    raise ValueError(f"DiskSim scheduling policy: expected 1..28, found {number!r}")


class TaggedQueue:
    """The drive's own scheduler. State: the last position served and the sweep
    direction (for the elevator policies)."""

    __slots__ = ("policy", "cylinder_of", "age_weight", "_code", "_last_lbn", "_last_cyl",
                 "_up")

    def __init__(self, policy: str = "fcfs", cylinder_of=None, age_weight: float = 0.0) -> None:
        if isinstance(policy, int) and not isinstance(policy, bool):
            policy = policy_from_disksim(policy)
        if policy not in POLICIES:
            raise ValueError(f"tagged queue policy: unknown {policy!r}; valid: {', '.join(POLICIES)}")
        if policy in ("look", "clook", "sstf") and cylinder_of is None:
            raise ValueError(f"tagged queue policy {policy!r} needs cylinder_of(lbn)")
        if not (age_weight >= 0.0 and age_weight < float("inf")):
            raise ValueError(f"tagged queue age_weight: expected a finite number >= 0, "
                             f"found {age_weight!r}")
        self.policy = policy
        self.cylinder_of = cylinder_of
        self.age_weight = age_weight
        self._code = POLICIES.index(policy)
        self._last_lbn = 0
        self._last_cyl = None  # None until the first pick: the head's cylinder is used
        self._up = True

    def pick(self, queue, head_cyl: int, now: float, positioning_time=None,
             arrived=None) -> int:
        """Index in ``queue`` (a sequence in arrival order) of the request to serve next.

        ``head_cyl`` is the cylinder under the heads (used by ``sstf``, and by
        ``look``/``clook`` for the first pick); ``positioning_time(rq, now)`` is
        required for ``sptf`` and ``asptf``, and ``arrived`` (each request's arrival
        time, s) for ``asptf``. The choice updates the queue's sweep state.
        """
        n = len(queue)
        if n == 0:
            raise ValueError("pick from an empty queue")
        code = self._code
        if n == 1 or code == 0:
            best = 0
        elif code == 7:  # sptf
            if positioning_time is None:
                raise ValueError("sptf needs positioning_time(rq, now)")
            best = 0
            bt = positioning_time(queue[0], now)
            for i in range(1, n):
                t = positioning_time(queue[i], now)
                if t < bt:
                    bt = t
                    best = i
        elif code == 8:  # asptf: DiskSim's "delay -= age * weight * 0.001" (ms and ms)
            if positioning_time is None or arrived is None:
                raise ValueError("asptf needs positioning_time(rq, now) and arrival times")
            credit = self.age_weight * 0.001
            best = 0
            bt = positioning_time(queue[0], now) - (now - arrived[0]) * credit
            for i in range(1, n):
                t = positioning_time(queue[i], now) - (now - arrived[i]) * credit
                if t < bt:
                    bt = t
                    best = i
        elif code == 6:  # sstf by cylinder
            cyl_of = self.cylinder_of
            best = 0
            bd = abs(cyl_of(queue[0].sector) - head_cyl)
            for i in range(1, n):
                d = abs(cyl_of(queue[i].sector) - head_cyl)
                if d < bd:
                    bd = d
                    best = i
        elif code == 3:  # sstf by lbn, from the end of the last request
            pos = self._last_lbn
            best = 0
            bd = abs(queue[0].sector - pos)
            for i in range(1, n):
                d = abs(queue[i].sector - pos)
                if d < bd:
                    bd = d
                    best = i
        else:
            if code in (1, 2):
                keys = [rq.sector for rq in queue]
                pos = self._last_lbn
            else:
                cyl_of = self.cylinder_of
                keys = [cyl_of(rq.sector) for rq in queue]
                pos = head_cyl if self._last_cyl is None else self._last_cyl
            if code in (2, 5):  # C-LOOK: lowest key >= pos, else lowest key
                best = _lowest_at_or_above(keys, pos)
                if best < 0:
                    best = _lowest_at_or_above(keys, min(keys))
            else:  # LOOK: continue in the current direction, else reverse
                if self._up:
                    best = _lowest_at_or_above(keys, pos)
                    if best < 0:
                        self._up = False
                        best = _highest_at_or_below(keys, pos)
                else:
                    best = _highest_at_or_below(keys, pos)
                    if best < 0:
                        self._up = True
                        best = _lowest_at_or_above(keys, pos)
        rq = queue[best]
        self._last_lbn = rq.sector + rq.nr_sectors if code == 3 else rq.sector
        if self.cylinder_of is not None:
            self._last_cyl = self.cylinder_of(rq.sector)
        return best


def _lowest_at_or_above(keys, pos) -> int:
    best = -1
    bk = None
    for i, k in enumerate(keys):
        if k >= pos and (bk is None or k < bk):
            bk = k
            best = i
    return best


def _highest_at_or_below(keys, pos) -> int:
    best = -1
    bk = None
    for i, k in enumerate(keys):
        if k <= pos and (bk is None or k > bk):
            bk = k
            best = i
    return best
