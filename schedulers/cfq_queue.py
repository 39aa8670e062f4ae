"""CFQ's state (Linux 2.6.18 block/cfq-iosched.c): the per-process io context, the
per-queue record, and the priority arithmetic they are built with.

`CfqIoContext` is ``struct cfq_io_context`` (one process's think-time and seek
statistics on this device), `CfqQueue` is ``struct cfq_queue`` (one process's sync
requests, or one priority's async ones: a sector-sorted tree, a FIFO, ``next_crq``,
the slice bookkeeping and the per-queue flags). The rules that move queues between
the round-robin lists and give them slices are in `blksim.schedulers.cfq_slice`;
those that move requests, in `blksim.schedulers.cfq`.
"""

from __future__ import annotations

from blksim.block.request import (IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE, IOPRIO_CLASS_RT,
                                  IOPRIO_CLASS_SHIFT)
from blksim.block.sorttree import SectorTree

UINT_MAX = 2**32 - 1
CFQ_SLICE_SCALE = 5          # 2.6.18 cfq-iosched.c
CFQ_PRIO_LISTS = 8           # IOPRIO_BE_NR
NEVER = -1                   # service_last of a queue never serviced (the kernel's 0)
_LEVEL_MASK = (1 << IOPRIO_CLASS_SHIFT) - 1
# The sample count of cfq_update_io_thinktime / cfq_update_io_seektime (2.6.18),
# ``samples = (7 * samples + 256) / 8``, tabulated: 0, 32, 60, ... settling at 249.
_EWMA_SAMPLES = tuple((7 * s + 256) // 8 for s in range(257))
# cfq_update_io_seektime's clamp on a new seek distance, 4 * seek_mean plus this
# slack, by the sample count before the update: 2*1024*1024 sectors while it is
# at most 60 (the first three samples), 2*1024*64 after.
_SEEK_SLACK = tuple(2 * 1024 * 1024 if s <= 60 else 2 * 1024 * 64 for s in range(257))


def _kernel_default_jiffies(hz: int) -> dict:
    """2.6.18's defaults as the kernel computes them, in jiffies (integer division of HZ).

    ``cfq_init`` raises slice_async and slice_idle to 1 jiffy where HZ makes them 0.
    """
    return {
        "fifo_expire_sync": hz // 8,
        "fifo_expire_async": hz // 4,
        "slice_sync": hz // 10,
        "slice_async": max(1, hz // 25),
        "slice_idle": max(1, hz // 125),
    }


def prio_to_slice(base: int, level: int) -> int:
    """``cfq_prio_to_slice`` (2.6.18): ``base + base/CFQ_SLICE_SCALE * (4 - level)`` jiffies."""
    return base + base // CFQ_SLICE_SCALE * (4 - level)


def prio_to_maxrq(slice_async_rq: int, level: int) -> int:
    """``cfq_prio_to_maxrq`` (2.6.18): most requests an async queue dispatches in a slice."""
    return 2 * (slice_async_rq + slice_async_rq * (CFQ_PRIO_LISTS - 1 - level))


def normalise_ioprio(value: int) -> tuple[int, int]:
    """(class, level) CFQ gives a packed ioprio (``cfq_init_prio_data``, 2.6.18).

    Class NONE (and any unknown class, which 2.6.18 logs and treats as NONE)
    becomes best-effort; the workload has already put the nice-derived level
    ``(nice + 20) / 5`` in the level bits. IDLE is forced to level 7.
    """
    cls = value >> IOPRIO_CLASS_SHIFT
    level = value & _LEVEL_MASK
    if level > 7:
        level = 7
    if cls == IOPRIO_CLASS_IDLE:
        return IOPRIO_CLASS_IDLE, 7
    if cls == IOPRIO_CLASS_RT:
        return IOPRIO_CLASS_RT, level
    return IOPRIO_CLASS_BE, level


def _stat(i: int, doc: str) -> property:
    """A read-only view of ``CfqIoContext.stats[i]``."""
    return property(lambda cic: cic.stats[i], doc=doc)


class CfqIoContext:
    """``struct cfq_io_context``: one process's view of this device.

    Its think-time and seek statistics change together, once per sync request
    (``cfq_crq_enqueued``): they are kept as one tuple, ``stats`` = (samples,
    ttime_total, seek_total, seek_mean, last_request_pos), replaced whole, and
    shown below under the kernel's names. The two EWMAs' sample counts are
    always equal, so one ``samples`` serves as both ``ttime_samples`` and
    ``seek_samples``; the mean think time is computed when asked for (the
    idle-window rule computes it in place). The kernel's ``last_queue``, written
    there and read nowhere in 2.6.18, is not kept.
    """

    __slots__ = ("pid", "alive", "ioprio", "raw_ioprio", "sync_q", "async_q", "last_end_request",
                 "stats")

    def __init__(self, pid: int, ioprio: int, j: int) -> None:
        self.pid = pid
        self.alive = True                # cic->ioc->task != NULL
        self.ioprio = ioprio
        self.raw_ioprio = -1
        self.sync_q = None
        self.async_q = None
        self.last_end_request = j        # cfq_alloc_io_context stamps jiffies
        self.stats = (0, 0, 0, 0, 0)

    samples = ttime_samples = seek_samples = _stat(0, "Samples in both EWMAs (settles at 249).")
    ttime_total = _stat(1, "Think-time EWMA total (256 times the mean).")
    seek_total = _stat(2, "Seek-distance EWMA total (256 times the mean).")
    seek_mean = _stat(3, "Mean seek distance, sectors.")
    last_request_pos = _stat(4, "End sector of the process's last sync request.")

    @property
    def ttime_mean(self) -> int:
        """Mean think time in jiffies (0 before the first sample)."""
        samples, total = self.stats[:2]
        return (total + 128) // samples if samples else 0

    def seeky(self) -> bool:
        """``CIC_SEEKY`` (2.6.18): mean seek distance above 128*1024 sectors (64 MiB)."""
        return self.stats[3] > 128 * 1024


class _Contexts(dict):
    """pid -> `CfqIoContext`. Looking up a pid without one gives `_NO_CONTEXT`,
    whose ``raw_ioprio`` no request carries: `CfqElevator.add`'s one test then
    sends both a new process and a changed priority to `CfqElevator._cic`."""

    __slots__ = ()

    def __missing__(self, pid):
        return _NO_CONTEXT


_NO_CONTEXT = CfqIoContext(-1, 0, 0)      # never stored, never changed
_NO_CONTEXT.raw_ioprio = None             # unequal to every request's ioprio


class CfqQueue:
    """``struct cfq_queue``: one process's sync requests, or one priority's async ones."""

    __slots__ = ("pid", "sync", "ioprio", "ioprio_class", "prio_value", "tree",
                 "fifo", "next_crq", "dispatched", "slice_end", "slice_left", "service_last",
                 "slice_len", "fifo_ttl", "rr", "wait_request", "must_dispatch", "fifo_expire",
                 "idle_window", "prio_changed")

    def __init__(self, pid, sync: bool, prio_value: int, slice_idle: int) -> None:
        self.pid = pid                    # None for a shared async queue (CFQ_KEY_ASYNC)
        self.sync = sync                  # cfq_cfqq_class_sync
        self.prio_value = prio_value
        self.ioprio_class, self.ioprio = normalise_ioprio(prio_value)
        self.tree = SectorTree()          # requests by start sector
        self.fifo: dict = {}              # request -> jiffy it was queued, in FIFO order
        self.next_crq = None
        self.dispatched = 0               # on_dispatch[ASYNC] + on_dispatch[SYNC]
        self.slice_end = 0
        self.slice_left = 2 * slice_idle  # cfq_get_queue: "to allow preemption for a new process"
        self.service_last = NEVER
        self.slice_len = 0                # cfq_prio_to_slice of its class and level
        self.fifo_ttl = 0                 # cfq_fifo_expire[sync]; both set by the elevator
        self.rr = None                    # the round-robin list it is on, if any
        self.wait_request = False
        self.must_dispatch = False
        self.fifo_expire = False
        self.idle_window = self.ioprio_class != IOPRIO_CLASS_IDLE
        self.prio_changed = False

    @property
    def on_rr(self) -> bool:
        """``cfq_cfqq_on_rr``: on a round-robin list (exactly when it holds requests)."""
        return self.rr is not None

    def __repr__(self) -> str:
        kind = f"pid={self.pid}" if self.sync else "async"
        return f"CfqQueue({kind} class={self.ioprio_class} level={self.ioprio} queued={len(self.tree)})"


# A request's ``rq.sched`` is its ``struct cfq_rq``: the tuple (key, cfqq, cic) of
# the sector it is filed under (``rb_key``), its queue and its process's io
# context. The jiffy it was queued is its value in the queue's FIFO dict.
