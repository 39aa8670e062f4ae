"""The rq_qos chain of a multi-queue queue (block/blk-rq-qos.c, blk-rq-qos.h, Linux 5.4-6.6).

The kernel's request-based I/O control policies (writeback throttling, blk-wbt.c;
io.latency, blk-iolatency.c; io.cost, blk-iocost.c) are *rq_qos policies*: each is a
``struct rq_qos`` with a table of hooks (``struct rq_qos_ops``) on the queue's list
``q->rq_qos``, and the block layer calls every policy's hook in list order at fixed
points of a bio's and a request's life. `RqQosPolicy` is that table for blksim (a hook a
policy leaves alone is the base class's and is never called); `RqQos` is the list of
one queue.

The order (``rq_qos_add``)
--------------------------
``rq_qos_add`` puts a new policy at the *head* of the list (``rqos->next = q->rq_qos;
q->rq_qos = rqos``: the inline ``rq_qos_add`` of block/blk-rq-qos.h in 5.4; the
``rq_qos_add`` of block/blk-rq-qos.c in 6.6, which also refuses a second policy of the
same id with -EBUSY). The list is not sorted by ``enum rq_qos_id`` (RQ_QOS_WBT,
RQ_QOS_LATENCY, RQ_QOS_COST): the id only names a policy for ``rq_qos_id`` lookups. So
each hook runs the policies newest first. `RqQos.add` does the same.

When the kernel adds them: wbt when the queue is registered (``blk_register_queue`` ->
``wbt_enable_default`` -> ``wbt_init``); io.latency at queue allocation in 5.4
(``blkcg_init_queue`` -> ``blk_iolatency_init``); io.cost when ``io.cost.qos`` or
``io.cost.model`` is first written (``blk_iocost_init``). The chain takes them in the
order its owner adds them.

The hooks (``rq_qos_ops``) and where the queue calls them
---------------------------------------------------------
=====================  ==========================================================
hook                   the kernel's call, and blksim's
=====================  ==========================================================
``throttle(bio, now)`` ``rq_qos_throttle``: ``blk_mq_make_request`` (5.4),
-> bool               ``blk_mq_get_new_requests`` from ``blk_mq_submit_bio``
                       (6.6), after the bio failed to merge and before a request
                       is allocated. A policy may make the task sleep
                       (``rq_qos_wait``): it returns False and keeps the bio; it
                       lets it go later by returning it from ``done``,
                       ``cleanup``, ``timer_fired`` or ``queue_depth_changed``.
                       The submitter's plug is flushed as it sleeps
                       (``io_schedule`` -> ``sched_submit_work``). A bio let go
                       goes on through the *next* policies (the kernel's loop
                       resumes after the policy it slept in), then to request
                       allocation, after the current handler (a woken task runs
                       after the code that woke it).
``track(rq, bio)``     ``rq_qos_track``: the request ``rq`` was allocated for
                       ``bio`` (both versions, just after ``block_getrq``).
``merge(rq, bio,       ``rq_qos_merge``: ``bio`` merges into ``rq``
now)``                 (``bio_attempt_back_merge``/``bio_attempt_front_merge``,
                       after the merge tracepoint). A merged bio never reaches
                       ``throttle``.
``issue(rq, now)``     ``rq_qos_issue``: ``blk_mq_start_request``, the driver
                       takes ``rq`` (after the ``block_rq_issue`` tracepoint).
``requeue(rq, now)``   ``rq_qos_requeue``: ``__blk_mq_requeue_request``, the
                       driver gave ``rq`` back (BLK_STS_RESOURCE).
``done(rq, now)``      ``rq_qos_done``: ``blk_mq_free_request`` (and
-> list                ``__blk_mq_end_request`` with an ``end_io``): ``rq`` is
                       freed, completed or merged away into another request.
                       Returns the sleeping bios it lets go.
``done_bio(bio, now)`` ``rq_qos_done_bio``: ``bio_endio``, each bio of a
                       completed request as ``blk_update_request`` ends it,
                       before the request is freed (so before ``done``). 5.4:
                       every bio of a disk; from 5.10 the bios that went
                       through ``rq_qos_throttle`` or ``rq_qos_merge``
                       (BIO_TRACKED, later BIO_QOS_THROTTLED/BIO_QOS_MERGED):
                       in blksim the bios of completed requests.
``cleanup(bio, now)``  ``rq_qos_cleanup``: a bio that went through ``throttle``
-> list                got no request (``blk_mq_make_request`` 5.4,
                       ``blk_mq_get_new_requests`` 6.6: the allocation failed,
                       REQ_NOWAIT). Returns the bios it lets go. blksim's
                       submitters sleep for a tag instead of failing: the
                       queue has no call site (the chain has the hook for
                       the policies' sake).
``queue_depth_changed  ``rq_qos_queue_depth_changed``: ``blk_set_queue_depth``
(depth, now) -> list`` (blksim's queue depth is fixed for a run: no call site).
``exit()``             ``rq_qos_exit``: the queue is torn down.
=====================  ==========================================================

A policy with a timer (wbt's window, iolatency's and iocost's periods) sets
``uses_timers`` and keeps ``wakeup_at`` (absolute s, or None) and ``timers_changed``
as the elevators do; ``timer_fired(now)`` runs at ``wakeup_at`` and returns the bios it
lets go.

Cost: a hook no policy implements is None on the chain, and the queue skips it with
one test (``if qos.track is not None``); a hook one policy implements is that policy's
bound method itself; only with two or more does a call go through the chain's loop.

Simplification: policies are added and removed only while no bio sleeps in the chain
(the kernel freezes the queue for ``rq_qos_add``/``rq_qos_del``, and a sleeping bio
holds the queue's usage count, so the freeze waits for it).
"""

from __future__ import annotations

from collections import deque

#: ``enum rq_qos_id`` (block/blk-rq-qos.h, 5.4-6.6; RQ_QOS_IOPRIO only 5.14-5.19, when
#: blk-ioprio was an rq_qos policy).
RQ_QOS_WBT, RQ_QOS_LATENCY, RQ_QOS_COST, RQ_QOS_IOPRIO = 0, 1, 2, 3
#: The ids' names (``rq_qos_id_to_name``).
RQ_QOS_NAMES = {RQ_QOS_WBT: "wbt", RQ_QOS_LATENCY: "latency", RQ_QOS_COST: "cost",
                RQ_QOS_IOPRIO: "ioprio"}

#: The hooks a policy may implement, in ``struct rq_qos_ops``'s order.
HOOKS = ("throttle", "track", "merge", "issue", "requeue", "done", "done_bio", "cleanup",
         "queue_depth_changed")


class RqQosPolicy:
    """One rq_qos policy (``struct rq_qos`` with its ``rq_qos_ops``): a subclass
    overrides the hooks it has (the module docstring says when each is called).
    ``rq_qos_id`` is its ``enum rq_qos_id`` (one policy of an id per queue)."""

    __slots__ = ()

    rq_qos_id: int = -1
    #: True when the policy keeps ``wakeup_at``/``timers_changed``/``timer_fired``.
    uses_timers: bool = False
    wakeup_at = None
    timers_changed = False
    #: Bios asleep in this policy (a policy that keeps bios says how many).
    waiting = 0

    def throttle(self, bio, now: float) -> bool:
        """``rq_qos_throttle``: True to let ``bio`` go on, False to keep it asleep."""
        return True

    def track(self, rq, bio) -> None:
        """``rq_qos_track``: ``rq`` was allocated for ``bio``."""

    def merge(self, rq, bio, now: float) -> None:
        """``rq_qos_merge``: ``bio`` merges into ``rq``."""

    def issue(self, rq, now: float) -> None:
        """``rq_qos_issue``: the driver takes ``rq``."""

    def requeue(self, rq, now: float) -> None:
        """``rq_qos_requeue``: the driver gave ``rq`` back."""

    def done(self, rq, now: float) -> list:
        """``rq_qos_done``: ``rq`` is freed. Returns the bios let go."""
        return []

    def done_bio(self, bio, now: float) -> None:
        """``rq_qos_done_bio``: ``bio`` ended."""

    def cleanup(self, bio, now: float) -> list:
        """``rq_qos_cleanup``: ``bio`` passed ``throttle`` but got no request."""
        return []

    def queue_depth_changed(self, depth: int, now: float) -> list:
        """``rq_qos_queue_depth_changed``: the queue depth is now ``depth``."""
        return []

    def timer_fired(self, now: float) -> list:
        """At ``wakeup_at`` (``uses_timers``): returns the bios let go."""
        return []

    def exit(self) -> None:
        """``rq_qos_exit``: the queue is torn down."""


class RqWait:
    """``struct rq_wait`` (block/blk-rq-qos.h, 5.4-6.6): a wait queue's in-flight count
    and its sleepers in order (what each sleeper is, is its policy's business)."""

    __slots__ = ("inflight", "sleepers")

    def __init__(self) -> None:
        self.inflight = 0
        self.sleepers: deque = deque()

    def inc_below(self, limit: int) -> bool:
        """``rq_wait_inc_below`` (block/blk-rq-qos.c): take a slot if fewer than
        ``limit`` are in flight."""
        if self.inflight < limit:
            self.inflight += 1
            return True
        return False


def _implements(policy, hook: str) -> bool:
    return getattr(type(policy), hook) is not getattr(RqQosPolicy, hook)


class _Timer:
    """One timed policy's pending event (one at a time, as ``_check_elevator_timer``).
    It keeps no reference to the chain or the queue (a finished run is freed by
    reference counting: tests/test_engine_refcycles.py); the event it queues holds the
    clock and the queue's release until it fires.

    A superseded event stays on the clock until its time (it then does nothing), so
    ``queued`` keeps the times that have an event on the clock: a ``wakeup_at`` that
    comes back to one of them (a policy's period timer, after an earlier wait timer)
    uses that event instead of queuing another at the same time."""

    __slots__ = ("policy", "due", "queued")

    def __init__(self, policy) -> None:
        self.policy = policy
        self.due = None
        self.queued: set = set()

    def check(self, clock, release) -> None:
        """Arm the event of the policy's ``wakeup_at`` (a new time supersedes the old)."""
        policy = self.policy
        policy.timers_changed = False
        due = policy.wakeup_at
        if due is not None and due != self.due:
            if not (isinstance(due, (int, float)) and due >= clock.now):
                raise ValueError(f"rq_qos policy {type(policy).__qualname__}: wakeup_at = "
                                 f"{due!r}: expected None or a time (s) at or after now")
            self.due = due
            if due not in self.queued:
                self.queued.add(due)
                clock.call_at(due, lambda event: self.fire(event, clock, release))

    def fire(self, event, clock, release) -> None:
        self.queued.discard(event.when)
        if self.due is None or event.when != self.due:
            return                       # superseded by a later time
        self.due = None
        policy = self.policy
        if policy.wakeup_at is not None and policy.wakeup_at <= event.when:
            for bio in policy.timer_fired(event.when):
                release(bio)
        self.check(clock, release)


class _AnyTimerChanged:
    """Stands for several timed policies in `RqQos.timer_watch`: ``timers_changed`` is
    whether any of them changed its ``wakeup_at``."""

    __slots__ = ("policies",)

    def __init__(self, policies) -> None:
        self.policies = tuple(policies)

    @property
    def timers_changed(self) -> bool:
        # a plain loop: tested twice a request, where a generator (any()) is an object
        # PyPy's JIT allocates each time
        for p in self.policies:
            if p.timers_changed:
                return True
        return False


class RqQos:
    """``q->rq_qos`` of one queue: its policies newest first, and per hook the callable
    the queue calls (None: no policy has it; see the module docstring).

    ``timer_watch`` is None without a timed policy, else an object whose
    ``timers_changed`` says whether `check_timers` has work (the policy itself when
    there is one): the queue tests it after the hooks that may move a timer."""

    __slots__ = ("policies", "throttle", "track", "merge", "issue",
                 "requeue", "done", "done_bio", "cleanup", "queue_depth_changed",
                 "timer_watch", "_have", "_timers", "_slept_in",
                 "_throttlers", "_trackers", "_mergers", "_issuers", "_requeuers",
                 "_doners", "_done_bioers", "_cleaners", "_depth_changers")

    def __init__(self) -> None:
        self.policies: list = []
        self._slept_in: dict = {}          # bio id -> the policy index it sleeps in
        self._rewire()

    # ------------------------------------------------------------------ the list
    def add(self, policy) -> None:
        """``rq_qos_add``: ``policy`` goes to the head of the list; a second policy of
        an id the chain has is refused (-EBUSY in 6.6)."""
        if not isinstance(policy, RqQosPolicy):
            raise TypeError(f"rq_qos: expected an RqQosPolicy, got {type(policy).__qualname__}")
        if policy.rq_qos_id >= 0 and self.get(policy.rq_qos_id) is not None:
            raise ValueError(f"rq_qos: the queue already has a "
                             f"{RQ_QOS_NAMES.get(policy.rq_qos_id, policy.rq_qos_id)} policy")
        self._check_quiet("add")
        self.policies.insert(0, policy)
        self._rewire()

    def remove(self, policy) -> None:
        """``rq_qos_del``: ``policy`` leaves the list."""
        self._check_quiet("remove")
        self.policies.remove(policy)
        self._rewire()

    def get(self, rq_qos_id: int):
        """``rq_qos_id``: the policy of that id, or None."""
        for policy in self.policies:
            if policy.rq_qos_id == rq_qos_id:
                return policy
        return None

    def exit(self) -> None:
        """``rq_qos_exit``: every policy's ``exit``, head first; the list emptied."""
        while self.policies:
            self.policies.pop(0).exit()
        self._rewire()

    def _check_quiet(self, what: str) -> None:
        if self._slept_in or any(p.waiting for p in self.policies):
            raise RuntimeError(f"rq_qos: cannot {what} a policy while bios sleep in the "
                               f"chain (the kernel freezes the queue first)")

    def _rewire(self) -> None:
        """Per hook, the policies that have it, in list order, and the callable."""
        policies = self.policies
        self._have = {hook: tuple(p for p in policies if _implements(p, hook))
                      for hook in HOOKS}
        # the fan-outs' lists, one attribute each (a hook call reads one slot, not a
        # dict entry)
        have = self._have
        self._throttlers = have["throttle"]
        self._trackers = have["track"]
        self._mergers = have["merge"]
        self._issuers = have["issue"]
        self._requeuers = have["requeue"]
        self._doners = have["done"]
        self._done_bioers = have["done_bio"]
        self._cleaners = have["cleanup"]
        self._depth_changers = have["queue_depth_changed"]

        def single(hook, fan_out):
            have = self._have[hook]
            if not have:
                return None
            if len(have) == 1:
                return getattr(have[0], hook)
            return fan_out

        self.throttle = single("throttle", self._throttle_all)
        self.track = single("track", self._track_all)
        self.merge = single("merge", self._merge_all)
        self.issue = single("issue", self._issue_all)
        self.requeue = single("requeue", self._requeue_all)
        self.done = single("done", self._done_all)
        self.done_bio = single("done_bio", self._done_bio_all)
        self.cleanup = single("cleanup", self._cleanup_all)
        self.queue_depth_changed = single("queue_depth_changed", self._depth_all)
        self._timers = tuple(_Timer(p) for p in policies if p.uses_timers)
        if not self._timers:
            self.timer_watch = None
        elif len(self._timers) == 1:
            self.timer_watch = self._timers[0].policy
        else:
            self.timer_watch = _AnyTimerChanged([t.policy for t in self._timers])

    # ------------------------------------------------------------------ throttling
    def _throttle_all(self, bio, now: float) -> bool:
        return self._throttle_from(bio, now, 0)

    def _throttle_from(self, bio, now: float, start: int) -> bool:
        throttlers = self._throttlers
        for i in range(start, len(throttlers)):
            if not throttlers[i].throttle(bio, now):
                self._slept_in[bio.id] = i
                return False
        return True

    def resume(self, bio, now: float) -> bool:
        """A bio let go by the policy it slept in goes through the next ones: True when
        it passed them all, False when it sleeps again (in a later policy)."""
        start = self._slept_in.pop(bio.id, 0) + 1
        if start >= len(self._throttlers):
            return True
        return self._throttle_from(bio, now, start)

    def check_timers(self, clock, release) -> None:
        """Arm, on ``clock``, the event of each timed policy whose ``wakeup_at`` changed;
        the bios its ``timer_fired`` lets go are handed to ``release(bio)`` (the
        queue's: they resume after the current handler)."""
        for timer in self._timers:
            if timer.policy.timers_changed:
                timer.check(clock, release)

    # ------------------------------------------------------------------ fan-outs
    def _track_all(self, rq, bio) -> None:
        for p in self._trackers:
            p.track(rq, bio)

    def _merge_all(self, rq, bio, now: float) -> None:
        for p in self._mergers:
            p.merge(rq, bio, now)

    def _issue_all(self, rq, now: float) -> None:
        for p in self._issuers:
            p.issue(rq, now)

    def _requeue_all(self, rq, now: float) -> None:
        for p in self._requeuers:
            p.requeue(rq, now)

    def _done_all(self, rq, now: float) -> list:
        woken = []
        for p in self._doners:
            woken.extend(p.done(rq, now))
        return woken

    def _done_bio_all(self, bio, now: float) -> None:
        for p in self._done_bioers:
            p.done_bio(bio, now)

    def _cleanup_all(self, bio, now: float) -> list:
        woken = []
        for p in self._cleaners:
            woken.extend(p.cleanup(bio, now))
        return woken

    def _depth_all(self, depth: int, now: float) -> list:
        woken = []
        for p in self._depth_changers:
            woken.extend(p.queue_depth_changed(depth, now))
        return woken
