"""The multi-queue elevator hook table: what every blk-mq I/O scheduler implements,
written out as Linux 5.4 to 6.6 write ``struct elevator_mq_ops``
(include/linux/elevator.h; block/elevator.h from 6.x), with the pull model of dispatch.

The 2.6 table (`blksim.block.elevator`) pushes: the queue asks the elevator to move
requests to a dispatch list. The multi-queue layer pulls: when a hardware queue runs
(``__blk_mq_sched_dispatch_requests``), it asks the elevator ``has_work`` and, for
each request the driver has room for (a budget and a driver tag), calls
``dispatch_request`` and sends what it gets. A request handed back is the queue's
from that moment. ``none`` is not an elevator: the queue then works without one
(`blksim.block.mq.queue`).

The hook table
--------------
Every hook gets ``now`` in seconds. An elevator holds requests in its own
structures; what else a hook may touch is said in its row.

==================  ============================  ===========================================
hook                kernel (elevator_mq_ops)      when the queue calls it; what it may do
==================  ============================  ===========================================
init_hctx           init_hctx                     once per hardware queue, after the
                                                  constructor: per-hctx data goes in
                                                  ``hctx.sched_data``.
depth_updated       depth_updated                 ``nr_requests`` was set (and once after
                                                  init): recompute depth limits.
limit_depth         limit_depth                   before a request is allocated for a bio of
                                                  direction ``write``, ``sync``, from
                                                  process ``pid``: the most
                                                  scheduler tags *per word* of the map
                                                  such a request may take
                                                  (``shallow_depth``, as
                                                  ``sbitmap_get_shallow`` reads it in
                                                  5.4-6.6), or None for the whole map.
prepare_request     prepare_request               the request got its scheduler tag: reset
                                                  the elevator's fields (``rq.sched``).
merge_list          bio_merge (Kyber's            a bio looks for a request to merge into:
                    ``blk_bio_list_merge`` on     a list of queued requests (newest last)
                    its per-ctx lists)            the queue scans as ``blk_bio_list_merge``
                                                  does, or None (the default) for the
                                                  generic ``elv_merge``: the one-hit cache,
                                                  the queue's back-merge hash, then
                                                  `request_merge`.
request_merge       request_merge                 a queued request starting where ``bio``
                                                  ends (front merge), or None.
allow_merge         allow_merge                   False vetoes merging ``bio`` into ``rq``.
request_merged      request_merged                ``rq`` grew by a bio (at the front when
                                                  ``front``: its sector moved, re-file it).
requests_merged     requests_merged               ``nxt`` was merged into ``rq``: drop
                                                  ``nxt`` (``rq`` keeps the earlier
                                                  deadline, if the elevator keeps them).
former_request /    former_request /              the queued neighbour before / after ``rq``
next_request        next_request                  in sector order, or None.
insert_requests     insert_requests               file ``rqs`` (at the head of the queue when
                                                  ``at_head``: a requeue). Returns None.
has_work            has_work                      True when ``dispatch_request`` on ``hctx``
                                                  could hand back a request now or later
                                                  without a new insert. Cheap; no change.
dispatch_request    dispatch_request              the driver has room on ``hctx``: the next
                                                  request to send (of any hctx for the
                                                  queue-wide elevators) removed from every
                                                  structure of the elevator, or None (none
                                                  queued, idling, no token). May set a timer.
completed_request   completed_request             the device completed ``rq`` at ``now``
                                                  (its latency: ``now - rq.t_dispatch``).
finish_request      finish_request                ``rq`` is freed (completed, or merged into
                                                  another before dispatch): release what it
                                                  holds.
requeue_request     requeue_request               the driver gave ``rq`` back: undo the
                                                  dispatch accounting (it is inserted again
                                                  at the head).
process_exited      exit_icq                      a process ended: forget its context.
timer_fired         (the elevator's own timer:    the time set in ``wakeup_at`` has come;
                    bfq's idle slice, kyber's     the queue runs its hardware queues after.
                    stats timer)
empty / queued      (for reports and checks)      no request held / how many are held.
==================  ============================  ===========================================

``insert_requests``, ``dispatch_request``, ``has_work``, ``requests_merged``, ``empty``
and ``queued`` have no default (the kernel makes ``insert_requests``,
``dispatch_request`` and ``finish_request`` mandatory; a no-op ``finish_request`` is
this table's default). ``init_sched``/``exit_sched`` are the constructor and the end
of the run; ``init_icq`` is the first request of a process.

What a hook may touch besides its own structures
------------------------------------------------
* A request: read any field; write only ``rq.sched`` (the elevator's record) and
  ``rq.fifo_time`` (a deadline, for displays). ``rq.hctx`` is the hardware queue it
  maps to (``blk_mq_hw_ctx``: ``index``, ``sched_data``), ``rq.ctx`` the software
  queue (the submitting CPU).
* Timers: ``wakeup_at`` (absolute seconds; None cancels) and ``kick_queue`` as in the
  2.6 table, with ``timers_changed`` raised on every change.
* ``self.info`` (`MqQueueInfo`): the queue's geometry, read only.
* Nothing else: not the device, not the clock, no global random state.

The queue keeps the back-merge hash (``elv_rqhash_add``/``elv_rqhash_del`` of
block/elevator.c) for an elevator with ``uses_merge_hash``: a request enters it when
inserted and leaves it when dispatched or merged away. What a hook hands back is
checked where the queue takes it (`blksim.block.elevator_boundary`).
"""

from __future__ import annotations

from dataclasses import dataclass

from blksim.block.elevator import ElevatorTimers, Tunable, kernel_version, resolve_tunables

#: The multi-queue kernel lines blksim models (each LTS line from 5.4).
MQ_KERNELS = ("5.4", "5.10", "5.15", "6.1", "6.6")


def is_multiqueue(kernel: str) -> bool:
    """Whether kernel ``kernel`` has only the multi-queue block layer (5.0 removed
    the legacy request_fn path and its elevators)."""
    return kernel_version(kernel) >= (5, 0)


def kernel_at_least(kernel: str, version: str) -> bool:
    """Whether kernel line ``kernel`` is ``version`` or later."""
    return kernel_version(kernel) >= kernel_version(version)


@dataclass(frozen=True)
class MqQueueInfo:
    """A multi-queue request queue's geometry, as an elevator may read it.

    ``nr_requests`` (the scheduler tag map's depth per hctx), ``nr_hw_queues``,
    ``queue_depth`` (driver tags per hctx), ``rotational`` (``queue/rotational``),
    ``kernel`` (the line followed), ``hz``, ``nr_cpus`` (software queues: one per CPU
    of the host; ``rq.ctx`` is one of ``range(nr_cpus)``), ``device`` (the disk's name,
    which per-device cgroup settings such as io.bfq.weight name)."""

    nr_requests: int
    nr_hw_queues: int
    queue_depth: int
    rotational: bool
    kernel: str
    hz: int = 250
    nr_cpus: int = 1
    device: str = ""


class MqHctx:
    """A hardware queue (``struct blk_mq_hw_ctx``). An elevator reads its ``index`` and
    the CPUs mapped to it (``cpus``), and keeps its own data in ``sched_data``; the rest
    is the queue's: ``dispatch`` (requests that left the elevator but could not be
    sent: always sent first), ``ctx_lists`` (the software queues' requests, without an
    elevator: CPU -> deque), ``tags`` and ``sched_tags`` (`blksim.block.mq.tags.TagMap`),
    ``restart`` (SCHED_RESTART: run again when a request is freed), ``dispatch_busy``
    (the EWMA of busy dispatches), ``in_flight`` and ``run_due`` (an async run pending
    at that time, or None), ``dispatched`` and ``requeued`` (counts, for reports)."""

    __slots__ = ("index", "cpus", "sched_data", "dispatch", "ctx_lists", "tags",
                 "sched_tags", "restart", "dispatch_busy", "in_flight", "run_due",
                 "dispatched", "requeued")

    def __init__(self, index: int, cpus: tuple = ()) -> None:
        self.index = index
        self.cpus = cpus
        self.sched_data = None
        self.dispatch = None
        self.ctx_lists = None
        self.tags = None
        self.sched_tags = None
        self.restart = False
        self.dispatch_busy = 0
        self.in_flight = 0
        self.run_due = None
        self.dispatched = 0
        self.requeued = 0

    def __repr__(self) -> str:
        return f"hctx{self.index}"


class MqElevator(ElevatorTimers):
    """``struct elevator_type`` for blk-mq: a scheduler's declarations and its hooks (the
    table in this module's docstring).

    A subclass declares ``name`` (as ``queue/scheduler`` lists it), ``tunables``
    (each with the kernel line it appeared in, ``Tunable.since``), ``uses_merge_hash``
    (the queue keeps the back-merge hash for it), ``uses_timers``, and implements the
    hooks. The constructor (``init_sched``) receives the queue's geometry
    (`MqQueueInfo`) and the user's tunable values, resolved against the tunables of
    the run's kernel; `create` is what the block layer calls.
    """

    name: str = ""
    tunables: tuple[Tunable, ...] = ()
    uses_merge_hash: bool = True
    uses_timers: bool = False
    #: Whether the elevator turns writeback throttling off while it is attached
    #: (``wbt_disable_default`` in ``init_sched``: bfq).
    disables_wbt: bool = False
    #: Whether the kernel sets QUEUE_FLAG_SQ_SCHED for it (one queue-wide structure:
    #: mq-deadline and bfq from 6.1): ``dispatch_request`` may return requests of any hctx.
    queue_wide: bool = True

    def __init__(self, info: MqQueueInfo, params: dict | None = None) -> None:
        self.info = info
        self.hz = info.hz
        self.kernel = info.kernel
        self.params = resolve_for_kernel(type(self), info.kernel, params or {})
        self._wakeup_at: float | None = None
        self._kick_queue = False
        self.timers_changed = False

    @classmethod
    def tunables_for(cls, kernel: str) -> tuple[Tunable, ...]:
        """The files under ``queue/iosched/`` this elevator has in kernel ``kernel``."""
        return tuple(t for t in cls.tunables
                     if not t.since or kernel_at_least(kernel, t.since))

    @classmethod
    def create(cls, info: MqQueueInfo, params: dict | None = None) -> "MqElevator":
        """``init_sched``: build this elevator for a queue (``info.kernel`` picks the
        behaviour of that line)."""
        return cls(info, params)

    # --- hooks ------------------------------------------------------------------
    def init_hctx(self, hctx: MqHctx) -> None:
        """``init_hctx``: per-hardware-queue data into ``hctx.sched_data``."""

    def depth_updated(self, nr_requests: int) -> None:
        """``depth_updated``: ``queue/nr_requests`` is now ``nr_requests``."""

    @property
    def min_shallow_depth(self) -> int | None:
        """The smallest ``limit_depth`` answer (``sbitmap_queue_min_shallow_depth``): the
        scheduler tag map sizes its wake-up batches by it. None: no cap."""
        return None

    def limit_depth(self, write: bool, sync: bool, pid: int | None = None) -> int | None:
        """``limit_depth``: the shallow depth for a new request's scheduler tag, or None
        (``pid``: the submitting process, whose context the kernel passes too)."""
        return None

    def prepare_request(self, rq, now: float) -> None:
        """``prepare_request``: ``rq`` got its scheduler tag."""

    def merge_list(self, bio, ctx: int):
        """Kyber's ``bio_merge``: the list of requests to try (newest last), or None for
        the generic ``elv_merge``."""
        return None

    def request_merge(self, bio, now: float):
        """``request_merge``: a queued request starting where ``bio`` ends, or None."""
        return None

    def allow_merge(self, rq, bio) -> bool:
        """``allow_merge``: False vetoes merging ``bio`` into ``rq``."""
        return True

    def request_merged(self, rq, front: bool, now: float) -> None:
        """``request_merged``: ``rq`` grew by a bio (at its front when ``front``)."""

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``requests_merged``: ``nxt`` was merged into ``rq`` and leaves the elevator."""
        raise NotImplementedError

    def former_request(self, rq):
        """``former_request``: the queued request before ``rq`` in sector order, or None."""
        return None

    def next_request(self, rq):
        """``next_request``: the queued request after ``rq`` in sector order, or None."""
        return None

    def insert_requests(self, rqs, at_head: bool, now: float) -> None:
        """``insert_requests``: file ``rqs`` (a requeue goes ``at_head``)."""
        raise NotImplementedError

    def has_work(self, hctx: MqHctx) -> bool:
        """``has_work``: whether ``dispatch_request(hctx)`` has something to look at."""
        raise NotImplementedError

    def dispatch_request(self, hctx: MqHctx, now: float):
        """``dispatch_request``: the next request to send, or None."""
        raise NotImplementedError

    def completed_request(self, rq, now: float) -> None:
        """``completed_request``: the device completed ``rq``."""

    def finish_request(self, rq, now: float) -> None:
        """``finish_request``: ``rq`` is freed."""

    def requeue_request(self, rq, now: float) -> None:
        """``requeue_request``: the driver gave ``rq`` back."""

    def process_exited(self, pid: int, now: float) -> None:
        """``exit_icq``: process ``pid`` has ended."""

    def timer_fired(self, now: float) -> None:
        """The time set in ``wakeup_at`` has come (the queue runs its hctxs after)."""

    def empty(self) -> bool:
        """True when the elevator holds no request."""
        raise NotImplementedError

    def queued(self) -> int:
        """How many requests the elevator holds (not counting those at the device)."""
        raise NotImplementedError


def resolve_for_kernel(cls, kernel: str, params: dict) -> dict:
    """``params`` checked against the tunables ``cls`` has in ``kernel`` (ValueError
    naming a file the line does not have and the line that introduced it)."""
    present = {t.name for t in cls.tunables_for(kernel)}
    for key in params:
        if key not in present:
            later = next((t for t in cls.tunables if t.name == key), None)
            if later is not None:
                raise ValueError(f"queue/iosched/{key} of {cls.name} appeared in Linux "
                                 f"{later.since}; kernel {kernel} does not have it")
    return resolve_tunables(cls.tunables_for(kernel), params, cls.name)
