"""The protocol every elevator implements, and the tunable declarations they share.

The hooks mirror the 2.6.18 kernel's elevator operations (block/elevator.c):
``add`` (elevator_add_req_fn), ``dispatch`` (elevator_dispatch_fn),
``merge_candidate`` (elevator_merge_fn, front-merge lookup), ``merged``
(elevator_merged_fn), ``requests_merged`` (elevator_merge_req_fn),
``former``/``latter`` (neighbours for request-request merging), ``activate``,
``completed``, ``empty``. Every hook receives ``now`` in seconds.

Elevators are plain Python: no simpy, no engine. They move requests to the
`DispatchQueue` they are given; the block layer feeds the device from it.
An elevator that needs to be run again later (an anticipation or idle timer)
sets ``wakeup_at`` to the absolute time (None cancels it); the block layer then
calls ``timer_fired(now)`` and runs the queue. One that wants the queue run as
soon as possible (the kernel's kblockd "kick") sets ``kick_queue``. Setting
either raises ``timers_changed``; for elevators with ``uses_timers`` the block
layer looks at the two after a hook call only when that flag is up (and lowers
it), so the many hook calls that touch no timer cost one attribute test.

The block layer does not trust an elevator with a request's existence: what a
hook hands back (a request on the dispatch list, the count ``dispatch`` returns,
``wakeup_at``, ``merge_candidate``/``former``/``latter``'s answers, what
``create`` builds) is checked where it is taken, and anything that cannot mean
anything stops the run with one line naming the elevator, the hook and the value
(`blksim.block.elevator_boundary.ElevatorFault`; docs/plugins.md lists the checks).
"""

from __future__ import annotations

from dataclasses import dataclass

from blksim.block.dispatch_queue import DispatchQueue


@dataclass(frozen=True)
class Tunable:
    """One file under ``queue/iosched/``: its kernel name, unit, default and range.

    ``jiffies`` marks values the kernel keeps in jiffies though sysfs shows
    milliseconds: they are quantised with ``msecs_to_jiffies`` at the run's HZ.
    """

    name: str
    default: int
    unit: str
    minimum: int
    maximum: int
    doc: str
    jiffies: bool = False


def msecs_to_jiffies(ms: int, hz: int) -> int:
    """Kernel rounding of a millisecond value to jiffies (rounds up, as 2.6.18 does)."""
    if ms <= 0:
        return 0
    return (ms * hz + 999) // 1000


def jiffies_to_seconds(jiffies: int, hz: int) -> float:
    """Seconds in a whole number of jiffies."""
    return jiffies / hz


def resolve_tunables(declared: tuple[Tunable, ...], given: dict, scheduler: str) -> dict:
    """Check user values against the declared tunables and fill in defaults.

    Raises ValueError naming the tunable, the valid names or the valid range.
    """
    by_name = {t.name: t for t in declared}
    out = {t.name: t.default for t in declared}
    for key, value in given.items():
        if key not in by_name:
            valid = ", ".join(sorted(by_name)) or "(none: this scheduler has no tunables)"
            raise ValueError(
                f"unknown tunable queue/iosched/{key} for scheduler {scheduler!r}; valid: {valid}")
        tun = by_name[key]
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            raise ValueError(
                f"queue/iosched/{key} must be a whole number ({tun.unit}), got {value!r}")
        if not tun.minimum <= value <= tun.maximum:
            raise ValueError(
                f"queue/iosched/{key} = {value} is out of range "
                f"[{tun.minimum}, {tun.maximum}] ({tun.unit})")
        out[key] = value
    return out


def kernel_version(text: str) -> tuple[int, ...]:
    """A kernel version string ("2.6.18") as a tuple of ints, for comparisons."""
    try:
        return tuple(int(part) for part in text.split("."))
    except (AttributeError, ValueError):
        raise ValueError(f"kernel version must look like 2.6.18, got {text!r}") from None


class Elevator:
    """Base class and protocol of an I/O scheduler.

    Subclasses set ``name``, ``tunables`` and ``own_backmerge_hash`` and
    implement the hooks. ``own_backmerge_hash`` says whether, before Linux
    2.6.19 moved the back-merge hash into the generic layer, this elevator kept
    one of its own (deadline, AS and CFQ did; noop did not).
    """

    name: str = ""
    tunables: tuple[Tunable, ...] = ()
    own_backmerge_hash: bool = False
    #: True for elevators that set ``wakeup_at`` (anticipation, idle slices); the
    #: block layer skips the timer bookkeeping for the others.
    uses_timers: bool = False
    #: True for elevators that need the device's geometry (cylinders, positioning
    #: times); the block layer then calls `attach_device` once.
    wants_device: bool = False

    def __init__(self, dispatch_queue: DispatchQueue, params: dict | None = None,
                 hz: int = 250) -> None:
        self.dq = dispatch_queue
        self.hz = hz
        self.params = resolve_tunables(self.tunables, params or {}, self.name)
        self._wakeup_at: float | None = None
        self._kick_queue = False
        #: Raised whenever ``wakeup_at`` or ``kick_queue`` is set; the block layer
        #: lowers it once it has acted on them.
        self.timers_changed = False

    @property
    def wakeup_at(self) -> float | None:
        """When the elevator wants ``timer_fired`` (absolute, seconds); None: no timer."""
        return self._wakeup_at

    @wakeup_at.setter
    def wakeup_at(self, when: float | None) -> None:
        self._wakeup_at = when
        self.timers_changed = True

    @property
    def kick_queue(self) -> bool:
        """True when the elevator asks for a queue run as soon as possible."""
        return self._kick_queue

    @kick_queue.setter
    def kick_queue(self, kick: bool) -> None:
        self._kick_queue = kick
        self.timers_changed = True

    @classmethod
    def create(cls, dispatch_queue: DispatchQueue, params: dict | None = None,
               hz: int = 250, kernel: str = "2.6.18") -> "Elevator":
        """Build this elevator for a run that follows kernel version `kernel` ("2.6.18", ...).

        Elevators that behave the same in every supported kernel ignore `kernel`;
        those that differ override this to pick the matching behaviour.
        """
        return cls(dispatch_queue, params, hz=hz)

    # --- hooks -----------------------------------------------------------
    def add(self, rq, now: float) -> None:
        """A new request enters the elevator."""
        raise NotImplementedError

    def dispatch(self, now: float, force: bool = False) -> int:
        """Move request(s) to the dispatch queue; return how many were moved.

        ``force`` drains everything (scheduler switch, barriers).
        """
        raise NotImplementedError

    def merge_candidate(self, bio, now: float):
        """Return a request that `bio` could be front-merged into, or None."""
        return None

    def merged(self, rq, front: bool, now: float) -> None:
        """`rq` grew by a bio merge (at its front when ``front``)."""

    def requests_merged(self, rq, nxt, now: float) -> None:
        """`nxt` was merged into `rq` and must leave the elevator."""
        raise NotImplementedError

    def former(self, rq):
        """The request before `rq` in this elevator's order, or None."""
        return None

    def latter(self, rq):
        """The request after `rq` in this elevator's order, or None."""
        return None

    def activate(self, rq, now: float) -> None:
        """The device took `rq`."""

    def completed(self, rq, now: float) -> None:
        """The device completed `rq`."""

    def attach_device(self, device) -> None:
        """The device this elevator feeds (only called when ``wants_device``)."""

    def timer_fired(self, now: float) -> None:
        """The time set in ``wakeup_at`` has come (the block layer runs the queue after)."""

    def process_exited(self, pid: int, now: float) -> None:
        """Process `pid` has ended (AS and CFQ forget or age its context)."""

    def empty(self) -> bool:
        """True when the elevator holds no request."""
        raise NotImplementedError

    def queued(self) -> int:
        """How many requests the elevator holds (for reports and checks)."""
        raise NotImplementedError
