"""The elevator hook table: what every 2.6 I/O scheduler implements, written out as
Linux 2.6.18 writes ``struct elevator_type`` and ``struct elevator_ops``
(include/linux/elevator.h), with the helpers an elevator may use.

The hook table
--------------
The legacy request queue (`blksim.block.legacy_queue.RequestQueue`, block/ll_rw_blk.c
and block/elevator.c of 2.6.18) calls these methods of its `Elevator`; every hook gets
``now`` in seconds (an elevator that keeps kernel time reads ``jiffies`` from it as
``int(now * hz + 1e-9)``). Each hook may read and change the elevator's own
structures; what else it may touch is said in its row.

==================  ===========================  ==========================================
hook                kernel (elevator_ops)         when the queue calls it; what it may do
==================  ===========================  ==========================================
add                 elevator_add_req_fn           a new request (no merge found for its bio)
                    (``elv_insert``, sorted)      enters: file it. Never dispatch from here,
                                                  except an alias (a queued request with the
                                                  same start sector, which 2.6.18's deadline,
                                                  AS and CFQ dispatch at once). Returns None.
dispatch            elevator_dispatch_fn          the dispatch list is empty and the device
                    (``elv_next_request``)        has room; ``force``: drain everything
                                                  (scheduler switch, barriers). Moves zero or
                                                  more requests to the dispatch list through
                                                  its operations (below) and returns how many
                                                  it moved: 0 = nothing to dispatch now.
merge_candidate     elevator_merge_fn (front      a bio found no back merge: a queued request
                    half; the back-merge hash     starting where the bio ends, or None. Reads
                    is the queue's or, with       the bio only.
                    ``own_backmerge_hash``, the
                    2.6.18 elevator's own)
merged              elevator_merged_fn            `rq` grew by a bio (at its front if
                                                  ``front``: its ``sector`` changed: re-file
                                                  it). Returns None.
requests_merged     elevator_merge_req_fn         `rq` absorbed its neighbour `nxt`: drop
                                                  `nxt` (and keep the earlier deadline for
                                                  `rq`, if the elevator keeps deadlines).
former / latter     elevator_former_req_fn,       the queue looks for a neighbour to coalesce
                    elevator_latter_req_fn        after a merge: the queued request before /
                                                  after `rq` in the elevator's order, or None.
activate            elevator_activate_req_fn      the device took `rq` off the dispatch list.
completed           elevator_completed_req_fn     the device finished `rq`.
empty               elevator_queue_empty_fn       True when the elevator holds no request.
queued              (none: for reports, checks)   how many requests it holds.
timer_fired         (none: the kernel elevator    the time it set in ``wakeup_at`` has come;
                    owns a timer_list; here the   the queue is run right after.
                    queue runs it)
process_exited      (``exit_io_context``: AS's    a process ended: forget or age its context.
                    and CFQ's io-context exit)
attach_device       (none)                        once, before the run, when ``wants_device``:
                                                  the device, for its geometry.
==================  ===========================  ==========================================

``add``, ``dispatch``, ``requests_merged``, ``empty`` and ``queued`` have no default.
The kernel's ``elevator_set_req_fn``/``put_req_fn``/``may_queue_fn`` (per-request
allocation) and ``deactivate_req_fn`` (requeue) have no counterpart here.

What a hook may touch besides its own structures
------------------------------------------------
* A request: read any field; write only ``rq.sched`` (the elevator's per-request
  record) and ``rq.fifo_time`` (its deadline, for displays). ``sector``,
  ``nr_sectors``, ``bios``, ``started`` and the timing fields are the queue's.
* The dispatch list ``self.dq`` (`DispatchQueue`, the queue's ``q->queue_head``),
  only through its operations: `DispatchQueue.add_tail` (``elv_dispatch_add_tail``),
  `DispatchQueue.add_sorted` (``elv_dispatch_sort``); it may read it as a sequence
  (its length, its tail ``dq[-1]``, iteration). A request it puts there is no longer
  the elevator's: it leaves every structure of the elevator in the same hook.
* Timers: ``wakeup_at`` (an absolute time in seconds; None cancels) to have
  ``timer_fired`` called then; ``kick_queue = True`` to have the queue run as soon as
  possible (the kernel's kblockd work). Setting either raises ``timers_changed``;
  for elevators with ``uses_timers`` the queue looks at the two after a hook call
  only when that flag is up (and lowers it), so the many hook calls that touch no
  timer cost one attribute test.
* Nothing else: not the device, not the clock, no global random state.

Helpers an elevator may use: `blksim.block.sorttree.SectorTree` (the per-direction
rbtree keyed by start sector: add with the alias rule, find, remove, neighbours,
predecessor/successor, first), `Tunable` and `resolve_tunables` (the sysfs files
under ``queue/iosched/``), `msecs_to_jiffies`, `jiffies_to_seconds`,
`kernel_version`.

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
    ``since`` is the first kernel line that has the file (``""``: every line the
    elevator is modelled for); a multi-queue elevator offers only the files of the
    run's kernel (`blksim.block.mq.elevator.MqElevator.tunables_for`).
    """

    name: str
    default: int
    unit: str
    minimum: int
    maximum: int
    doc: str
    jiffies: bool = False
    since: str = ""


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


def record_unchanged_switch(switches_done: list, name: str, asked: float, now: float,
                            on_done) -> None:
    """A switch to the elevator already attached: the kernel returns at once when the
    name is the current one (2.6 ``elv_iosched_store``; 5.4-6.1 ``__elevator_change``,
    6.6 ``elevator_change``, block/elevator.c), so the switch is recorded as done at
    ``now`` with nothing drained, and ``on_done`` gets its record. Both request queues'
    switches use it."""
    info = {"scheduler": name, "asked_s": asked, "started_s": now, "done_s": now,
            "drained": 0, "bypassed": 0, "noop": True}
    switches_done.append(info)
    if on_done is not None:
        on_done(info)


def kernel_version(text: str) -> tuple[int, ...]:
    """A kernel version string ("2.6.18") as a tuple of ints, for comparisons."""
    try:
        return tuple(int(part) for part in text.split("."))
    except (AttributeError, ValueError):
        raise ValueError(f"kernel version must look like 2.6.18, got {text!r}") from None


class ElevatorTimers:
    """What an elevator of either hook table asks of the queue's timers: ``wakeup_at``
    (an absolute time in seconds at which to call its ``timer_fired``; None: no timer)
    and ``kick_queue`` (run the queue as soon as possible, the kernel's kblockd work).
    Setting either raises ``timers_changed``, which the queue lowers once it has acted
    on them."""

    _wakeup_at: float | None = None
    _kick_queue: bool = False
    #: Raised whenever ``wakeup_at`` or ``kick_queue`` is set; the block layer lowers it.
    timers_changed: bool = False
    #: The queue's trace-message sink, ``msg(event, pid, detail=None)``, or None when no
    #: one subscribed to the queue's ``block_elv_msg`` tracepoint (the kernel's
    #: ``blk_add_trace_msg``, which CFQ's ``cfq_log`` calls from 2.6.30). An elevator
    #: tests it before it builds a message: ``if self.msg is not None: self.msg(...)``.
    #: The queue sets it whenever the tracepoint's subscribers change and when an
    #: elevator is attached; an elevator driven without a queue keeps None.
    msg = None
    #: The messages an elevator sends: event name -> what it means and the kernel
    #: function it marks. Two names are common to every elevator that holds dispatch
    #: back for one process (CFQ's idle window, AS's anticipation, bfq's idling):
    #: ``hold_start`` (``pid`` the process waited for, ``detail`` the mechanism) and
    #: ``hold_end`` (``detail``: "hit" its request came, "timeout", or another reason).
    #: While a hold lasts, requests of other processes wait for it.
    events: dict = {}

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


class Elevator(ElevatorTimers):
    """``struct elevator_type``: an I/O scheduler, its declarations and its hooks
    (the table in this module's docstring).

    A subclass declares ``name`` (``elevator_name``), ``tunables``
    (``elevator_attrs``, the files under ``queue/iosched/``),
    ``own_backmerge_hash``, ``uses_timers``, ``wants_device``, and implements the
    hooks. ``own_backmerge_hash`` says whether, before Linux 2.6.19 moved the
    back-merge hash into the generic layer, this elevator kept one of its own
    (deadline, AS and CFQ did; noop did not). The constructor
    (``elevator_init_fn``) receives the dispatch list (``self.dq``), the user's
    tunable values (resolved into ``self.params``) and ``hz``; `create` picks the
    behaviour of a kernel version.
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
        """``elevator_add_req_fn``: a new request enters the elevator: file it.

        Dispatches nothing, except an alias (see the table). Returns None."""
        raise NotImplementedError

    def dispatch(self, now: float, force: bool = False) -> int:
        """``elevator_dispatch_fn``: move request(s) to the dispatch list through its
        operations (``add_tail``, ``add_sorted``); return how many were moved (0:
        nothing to dispatch now; the elevator may have set a timer).

        Called when the dispatch list is empty and the device has room. ``force``
        drains everything (scheduler switch, barriers).
        """
        raise NotImplementedError

    def merge_candidate(self, bio, now: float):
        """``elevator_merge_fn``'s front-merge lookup: a queued request starting where
        `bio` ends, or None (the default: no front merges)."""
        return None

    def merged(self, rq, front: bool, now: float) -> None:
        """``elevator_merged_fn``: `rq` grew by a bio (at its front when ``front``:
        its start sector moved, re-file it)."""

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``elevator_merge_req_fn``: `nxt` was merged into `rq` and must leave the
        elevator; `rq` keeps the earlier deadline if the elevator keeps them."""
        raise NotImplementedError

    def former(self, rq):
        """``elevator_former_req_fn``: the request before `rq` in this elevator's
        order, or None."""
        return None

    def latter(self, rq):
        """``elevator_latter_req_fn``: the request after `rq` in this elevator's
        order, or None."""
        return None

    def activate(self, rq, now: float) -> None:
        """``elevator_activate_req_fn``: the device took `rq` off the dispatch list."""

    def completed(self, rq, now: float) -> None:
        """``elevator_completed_req_fn``: the device completed `rq`."""

    def attach_device(self, device) -> None:
        """The device this elevator feeds (only called when ``wants_device``)."""

    def timer_fired(self, now: float) -> None:
        """The time set in ``wakeup_at`` has come (the block layer runs the queue after)."""

    def process_exited(self, pid: int, now: float) -> None:
        """Process `pid` has ended (AS and CFQ forget or age its context)."""

    def empty(self) -> bool:
        """``elevator_queue_empty_fn``: True when the elevator holds no request."""
        raise NotImplementedError

    def queued(self) -> int:
        """How many requests the elevator holds (for reports and checks)."""
        raise NotImplementedError
