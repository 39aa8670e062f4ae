"""The block layer's tracepoints: the kernel's names, its arguments, any number of subscribers.

The kernel marks the points of a bio's and a request's life with tracepoints
(``include/trace/events/block.h``, Linux 2.6.32, the first kernel whose legacy block
layer has them as ``TRACE_EVENT``s; 2.6.18 called ``blk_add_trace_*`` at the same
places). blktrace, perf and every other tracer are subscribers: the code that fires a
tracepoint knows none of them. blksim does the same. A block device (a request queue, a
partition, a device-mapper volume) fires these, each with the kernel's arguments as
Python ones plus the simulated time ``now`` (s):

=======================  ==============================  ==========================================
tracepoint               arguments                       fired (kernel function, 2.6.32)
=======================  ==============================  ==========================================
``block_bio_queue``      ``(q, bio, now)``               a bio enters a device (``__make_request``,
                                                         ``dm_request``)
``block_bio_backmerge``  ``(q, bio, now)``               merged at the back of a request
                                                         (``__make_request``, ``ELEVATOR_BACK_MERGE``)
``block_bio_frontmerge`` ``(q, bio, now)``               merged at the front of a request
``block_bio_remap``      ``(q, bio, dev, from_, now)``   a bio was remapped to another device:
                                                         ``dev`` the (major, minor) it came from,
                                                         ``from_`` its sector there
                                                         (``__map_bio``; ``block_remap`` in 2.6.32)
``block_split``          ``(q, bio, new_sector, now)``   a bio is cut at ``new_sector``
                                                         (dm's ``__split_bio``)
``block_getrq``          ``(q, bio, rw, now)``           a request was allocated for the bio
                                                         (``get_request``)
``block_sleeprq``        ``(q, bio, rw, now)``           no free request: the submitter sleeps
                                                         (``get_request_wait``)
``block_rq_insert``      ``(q, rq, now)``                a request goes to the elevator (``elv_insert``)
``block_rq_issue``       ``(q, rq, now)``                the driver takes it (``elv_next_request``)
``block_rq_complete``    ``(q, rq, now)``                the device completed it (``blk_end_request``)
``block_bio_complete``   ``(q, bio, now)``               a bio completes, before its submitter's
                                                         ``end_io`` (``bio_endio``; dm's
                                                         ``dec_pending``)
``block_plug``           ``(q, now)``                    the queue is plugged (``blk_plug_device``)
``block_unplug_timer``   ``(q, nr_rq, now)``             the unplug timer fired (``blk_unplug_timeout``)
``block_unplug_io``      ``(q, nr_rq, now)``             the queue is unplugged for I/O
                                                         (``__generic_unplug_device``)
=======================  ==============================  ==========================================

The multi-queue layer (`blksim.block.mq.queue`, Linux 5.4-6.6) fires the same names
where its kernel does (never ``block_sleeprq``, ``block_unplug_timer`` or
``block_unplug_io``: blk-mq has no queue plugging) and three of its own:

=======================  ==============================  ==========================================
``block_unplug``         ``(q, nr_rq, explicit, now)``   a task's plug is flushed onto this queue
                                                         with ``nr_rq`` requests; ``explicit``
                                                         False when the task slept
                                                         (``blk_mq_flush_plug_list``; blkparse: U,
                                                         UT)
``block_rq_requeue``     ``(q, rq, now)``                the driver gave ``rq`` back
                                                         (``blk_mq_requeue_request``)
``block_rq_merge``       ``(q, rq, now)``                ``rq`` was merged into a neighbour
                                                         (``attempt_merge``, from 5.10)
=======================  ==============================  ==========================================

Both queues also fire the elevator's own messages, as ``blk_add_trace_msg`` writes them
(CFQ's ``cfq_log`` from 2.6.30, bfq's ``bfq_log``; blkparse shows them as ``m``):

=======================  ==============================  ==========================================
``block_elv_msg``        ``(q, event, pid, detail, now)`` the elevator sent ``event`` (a name its
                                                         class declares in ``events``) about
                                                         process ``pid`` (0: none), with
                                                         ``detail`` (None, a number or a word)
=======================  ==============================  ==========================================

``rw`` is 1 for a write, 0 for a read; ``nr_rq`` the requests allocated
(``q->rq.count[READ] + q->rq.count[WRITE]``). The legacy queue never requeues a request,
so it has no ``block_rq_requeue``.

Subscribing: ``device.subscribe("block_rq_issue", fn)``. A device keeps, per
tracepoint, ``None`` or a tuple of its subscribers, and the firing site tests that
before it builds anything: a tracepoint no one subscribed to costs one attribute test.
A subscriber that raises stops the run with a `TracepointFault` naming the subscriber,
the tracepoint and the device (one line, ``blksim: error: ...``); a subscriber that
wants the run to end early raises `StopRun`, which passes through untouched.
"""

from __future__ import annotations

from blksim.block.elevator_boundary import SimulationError

#: Every tracepoint and its arguments after the device (the kernel's ``TP_PROTO``, with
#: ``now``).
TRACEPOINTS = {
    "block_bio_queue": ("bio", "now"),
    "block_bio_backmerge": ("bio", "now"),
    "block_bio_frontmerge": ("bio", "now"),
    "block_bio_remap": ("bio", "dev", "from_", "now"),
    "block_split": ("bio", "new_sector", "now"),
    "block_getrq": ("bio", "rw", "now"),
    "block_sleeprq": ("bio", "rw", "now"),
    "block_rq_insert": ("rq", "now"),
    "block_rq_issue": ("rq", "now"),
    "block_rq_complete": ("rq", "now"),
    "block_bio_complete": ("bio", "now"),
    "block_plug": ("now",),
    "block_unplug_timer": ("nr_rq", "now"),
    "block_unplug_io": ("nr_rq", "now"),
    # the multi-queue layer's (Linux 5.4-6.6)
    "block_unplug": ("nr_rq", "explicit", "now"),
    "block_rq_requeue": ("rq", "now"),
    "block_rq_merge": ("rq", "now"),
    # the elevator's own messages (blk_add_trace_msg; blkparse: m)
    "block_elv_msg": ("event", "pid", "detail", "now"),
}


class TracepointFault(SimulationError):
    """A subscriber raised: one line naming the subscriber, the tracepoint and the device."""


class StopRun(Exception):
    """Raised by a subscriber to end the run early (not a fault: passes through)."""


def subscriber_name(fn) -> str:
    """``module:Qualified.name`` of a subscriber (a function or a bound method)."""
    while hasattr(fn, "__wrapped__"):       # an adapter names what it adapts
        fn = fn.__wrapped__
    target = getattr(fn, "__func__", fn)
    module = getattr(target, "__module__", None) or type(fn).__module__
    name = getattr(target, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{name}"


def subscriber_fault(fn, tracepoint: str, device, exc: Exception) -> Exception:
    """What to raise for ``exc``, raised by subscriber ``fn`` of ``tracepoint``: a
    `StopRun` as it is, anything else as a one-line `TracepointFault`."""
    if isinstance(exc, StopRun):
        return exc
    text = " ".join(str(exc).split())
    text = text if len(text) <= 200 else text[:197] + "..."
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return TracepointFault(f"tracepoint {tracepoint} on {getattr(device, 'name', device)}: "
                           f"subscriber {subscriber_name(fn)} raised {what}")


def fire(subscribers: tuple, tracepoint: str, device, *args) -> None:
    """Call every subscriber of ``tracepoint`` with ``(device, *args)``; an exception one
    raises becomes `subscriber_fault`'s (the ``try`` costs nothing until one does)."""
    # Written out for one and two subscribers (a run with the mechanism report has two
    # on several tracepoints): no loop in PyPy's traces of the block layer's paths.
    fn = subscribers[0]
    try:
        fn(device, *args)
        if len(subscribers) > 1:
            fn = subscribers[1]
            fn(device, *args)
            if len(subscribers) > 2:
                for fn in subscribers[2:]:
                    fn(device, *args)
    except Exception as exc:
        fault = subscriber_fault(fn, tracepoint, device, exc)
        if fault is exc:
            raise
        raise fault from exc


class Traced:
    """The tracepoints of a block device (a base of the request queue, partitions and
    device-mapper volumes): ``_tp_<name>`` is None or the tuple of its subscribers."""

    _tp_block_bio_queue = None
    _tp_block_bio_backmerge = None
    _tp_block_bio_frontmerge = None
    _tp_block_bio_remap = None
    _tp_block_split = None
    _tp_block_getrq = None
    _tp_block_sleeprq = None
    _tp_block_rq_insert = None
    _tp_block_rq_issue = None
    _tp_block_rq_complete = None
    _tp_block_bio_complete = None
    _tp_block_plug = None
    _tp_block_unplug_timer = None
    _tp_block_unplug_io = None
    _tp_block_unplug = None
    _tp_block_rq_requeue = None
    _tp_block_rq_merge = None
    _tp_block_elv_msg = None

    def subscribe(self, tracepoint: str, fn) -> None:
        """Call ``fn(device, *args)`` each time this device fires ``tracepoint`` (after
        the subscribers already there). Unknown names list the valid ones."""
        if tracepoint not in TRACEPOINTS:
            raise ValueError(f"tracepoint {tracepoint!r}: expected one of "
                             f"{', '.join(TRACEPOINTS)}")
        if not callable(fn):
            raise TypeError(f"subscriber of {tracepoint}: expected a callable, found {fn!r}")
        attr = "_tp_" + tracepoint
        setattr(self, attr, (getattr(self, attr) or ()) + (fn,))
        if tracepoint == "block_elv_msg":
            self.wire_elevator_msg()

    def unsubscribe(self, tracepoint: str, fn) -> None:
        """Stop calling ``fn`` at ``tracepoint`` (its last subscription)."""
        attr = "_tp_" + tracepoint
        subs = list(getattr(self, attr) or ())
        subs.reverse()
        subs.remove(fn)
        subs.reverse()
        setattr(self, attr, tuple(subs) or None)
        if tracepoint == "block_elv_msg":
            self.wire_elevator_msg()

    def wire_elevator_msg(self) -> None:
        """Give the attached elevator (if this device has one) its ``msg`` sink: None
        when no one subscribed to ``block_elv_msg``, else a function that fires it with
        the clock's ``now``. The queues call this whenever they attach an elevator."""
        elevator = getattr(self, "elevator", None)
        if elevator is None:
            return
        if self._tp_block_elv_msg is None:
            elevator.msg = None
            return
        clock = self.clock

        def msg(event: str, pid: int, detail=None) -> None:
            fire(self._tp_block_elv_msg, "block_elv_msg", self, event, pid, detail,
                 clock.now)
        elevator.msg = msg

    def fire_tracepoint(self, tracepoint: str, *args) -> None:
        """Fire ``tracepoint`` of this device with ``args`` (after the device): for a device
        that traces an event on another one (device-mapper's remap on the device below).
        The block layer's own hot paths test ``_tp_<name>`` in line instead."""
        subs = getattr(self, "_tp_" + tracepoint)
        if subs is not None:
            fire(subs, tracepoint, self, *args)

    def subscribers(self, tracepoint: str) -> tuple:
        """The subscribers of ``tracepoint``, in calling order."""
        return getattr(self, "_tp_" + tracepoint) or ()
