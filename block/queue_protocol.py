"""The queue protocol: what the rest of blksim may call and read on a request queue.

The block layer's one contract with everything above it (the host's devices and files,
the workload processes, the applications, the tracers, the engine, the results and the
API). `blksim.block.legacy_queue.RequestQueue`, the 2.6 single queue, is its first
implementation; the multi-queue layer will be the second. A caller that needs anything
not written here asks for it to be added here, with its meaning, rather than reading the
queue's own attributes (`tests/test_queue_protocol.py` runs configurations with every
queue checked against this list).

Partitions and device-mapper volumes offer the submission half (`submit_bio`,
`when_request`, `process_exited`, `start_plug`, `finish_plug`, `throttle_delay`, `capacity`, `name`, `number`, `kind`, `stats`,
the tracepoints) as well, so a process submits to any of them the same way.
"""

from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable


@runtime_checkable
class QueueProtocol(Protocol):
    """A block device's request queue, as callers above the block layer see it."""

    # ------------------------------------------------------------------ identity
    #: The disk's name (``sda``) and (major, minor), set by whoever builds the host.
    name: str
    number: tuple
    #: ``"disk"``: a device with a queue of its own (partitions say ``"partition"``,
    #: volumes ``"dm"``).
    kind: str
    #: True for the multi-queue layer (`blksim.block.mq.queue.MqQueue`), False for the
    #: 2.6 queue.
    multiqueue: bool
    #: The device behind the queue (a `disk_models.base.Device`): read for its figures
    #: (results, ``plot heads``), never replaced.
    device: object
    #: The attached elevator, read for its figures and its geometry (``plot heads``).
    elevator: object
    #: The attached elevator's name (``queue/scheduler``'s bracketed entry).
    elevator_name: str
    #: Per-device Q2C/D2C counts in a run with several devices (`sim.host.DeviceLatency`),
    #: or None; set by the host.
    latency: object
    #: /proc/diskstats' counters of the disk (`blksim.block.diskstats.DiskStats`).
    stats: object
    #: The host's CPU cost model, set by the host on a multi-queue disk of a run with
    #: ``[host] cpu_costs`` (`blksim.sim.cpu_time.CpuTime`): the queue hands each
    #: device event's completed requests to its ``completed(queue, requests)``, which
    #: ends their bios once the completion's CPU work has run. None (always on the 2.6
    #: queue, which has no CPU model): the bios end at the device event.
    cpu_time: object

    # ------------------------------------------------------------------ limits
    #: ``queue/nr_requests``: requests per direction before a submitter sleeps.
    nr_requests: int
    #: ``queue/max_sectors_kb`` in sectors: the largest request.
    max_sectors: int

    @property
    def capacity(self) -> int:
        """The device's size in sectors."""

    def allocated(self, direction: int) -> int:
        """Requests of ``direction`` (0 read, 1 write) allocated and not yet freed
        (``q->rq.count[]``: what ``queue_congestion_on_threshold`` compares)."""

    # ------------------------------------------------------------------ submission
    def submit_bio(self, bio, now: float | None = None) -> bool:
        """Queue ``bio`` at ``now`` (the clock's time if None). True when it was merged
        or got a request; False when its submitter must sleep for a free request (call
        `when_request`)."""

    def when_request(self, bio, wake: Callable) -> None:
        """Call ``wake(bio)`` once ``bio``, which `submit_bio` left waiting, has a
        request."""

    def process_exited(self, pid: int) -> None:
        """A submitting process has ended (elevators keep per-process state)."""

    def start_plug(self, pid: int, now: float) -> None:
        """Process ``pid`` starts a batch of submissions (``blk_start_plug``, Linux
        2.6.39 on: a per-task plug). The 2.6 queue plugs itself and ignores this."""

    def finish_plug(self, pid: int, now: float) -> None:
        """Process ``pid``'s batch is complete: what its plug holds goes on to the
        queue (``blk_finish_plug``). The 2.6 queue ignores this."""

    def throttle_delay(self, pid: int, now: float) -> float:
        """Seconds process ``pid`` sleeps on its return to user space before it submits
        again (``blkcg_maybe_throttle_current``, block/blk-cgroup.c, 5.4-6.6): a
        controller marked it (``blkcg_schedule_throttle``: iocost's debt delay) since it
        last asked; 0.0 when not. Asking uses the mark up. The 2.6 queue has no
        controller that marks: always 0.0."""

    def run_backing_dev(self) -> None:
        """A 2.6 process is about to wait for its own I/O: run the queue now if it is
        plugged (``blk_run_backing_dev`` from ``blk_run_address_space``; callers:
        `blksim.hostio.fileio.run_backing_dev`). The multi-queue queue has no queue plug:
        nothing to do."""

    # ------------------------------------------------------------------ elevator
    def switch_elevator(self, elevator_factory: Callable, name: str,
                        on_done: Callable | None = None) -> None:
        """Write ``name`` to ``queue/scheduler`` now; ``on_done(info)`` when done."""

    @property
    def switching(self) -> bool:
        """True while an elevator switch is in progress."""

    #: One dict per finished switch (scheduler, asked_s, started_s, done_s, drained,
    #: bypassed, noop).
    switches_done: list

    # ------------------------------------------------------------------ tracepoints
    def subscribe(self, tracepoint: str, fn: Callable) -> None:
        """Call ``fn(queue, *args)`` at every firing of ``tracepoint``
        (`blksim.block.tracepoints`)."""

    def unsubscribe(self, tracepoint: str, fn: Callable) -> None:
        """Stop calling ``fn`` at ``tracepoint``."""

    def subscribers(self, tracepoint: str) -> tuple:
        """The subscribers of ``tracepoint``."""

    def fire_tracepoint(self, tracepoint: str, *args) -> None:
        """Fire ``tracepoint`` on this queue (a device above traces a remap onto it)."""

    # ------------------------------------------------------------------ state and counters
    def pending(self) -> int:
        """Requests allocated and not completed, plus bios waiting for one."""

    def idle(self) -> bool:
        """Nothing queued, waiting or at the device."""

    def hw_queue_counts(self) -> tuple:
        """Per hardware queue (multi-queue layer; () for the 2.6 queue): (its CPUs,
        requests sent to the device, submitters that slept for its tags, requests the
        device gave back), counted from the start of the run."""

    #: Requests allocated so far (each got an id).
    requests_allocated: int
    #: Bios that had to wait for a free request.
    waited: int
    #: Requests coalesced into a neighbour.
    request_merges: int

    @property
    def bio_merges(self) -> int:
        """Bios merged into a queued request, both directions."""


#: The names `QueueProtocol` allows a caller to use.
PROTOCOL_NAMES = frozenset(
    name for klass in (QueueProtocol,)
    for name in (*klass.__annotations__, *vars(klass))
    if not name.startswith("_"))
