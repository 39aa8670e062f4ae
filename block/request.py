"""The two units of I/O that flow through the block layer: `Bio` and `Request`.

A `Bio` is what a process submits; a `Request` is what the elevator and the device
see, one or more merged bios covering a contiguous sector range. Both are plain
objects with ``__slots__``: they sit on the per-request hot path.
"""

from __future__ import annotations

SECTOR_SIZE = 512

#: I/O priority classes and the kernel's packing of class and level into one
#: value (include/linux/ioprio.h, 2.6.18): ``class << 13 | level``.
IOPRIO_CLASS_NONE, IOPRIO_CLASS_RT, IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE = 0, 1, 2, 3
IOPRIO_CLASS_SHIFT = 13


def ioprio_value(cls: int, level: int) -> int:
    """The kernel's packed I/O priority (``IOPRIO_PRIO_VALUE``)."""
    return (cls << IOPRIO_CLASS_SHIFT) | level


def ioprio_class(value: int) -> int:
    """The class of a packed priority (``IOPRIO_PRIO_CLASS``)."""
    return value >> IOPRIO_CLASS_SHIFT


def ioprio_level(value: int) -> int:
    """The level (0 highest .. 7) of a packed priority (``IOPRIO_PRIO_DATA``)."""
    return value & ((1 << IOPRIO_CLASS_SHIFT) - 1)


#: What a process that never set one gets: best effort, level 4 (nice 0).
DEFAULT_IOPRIO = ioprio_value(IOPRIO_CLASS_BE, 4)

#: The operations a bio or request carries, with the kernel's numbers (``enum req_op``,
#: include/linux/blk_types.h, 4.10-6.6). ``write`` is True for every odd one
#: (``op_is_write``): a discard is a write for the schedulers' directions.
REQ_OP_READ, REQ_OP_WRITE, REQ_OP_FLUSH, REQ_OP_DISCARD = 0, 1, 2, 3
REQ_OP_NAMES = {REQ_OP_READ: "read", REQ_OP_WRITE: "write", REQ_OP_FLUSH: "flush",
                REQ_OP_DISCARD: "discard"}
#: ``op_stat_group`` (include/linux/blkdev.h, 4.18-6.6): the diskstats group of each op
#: (``STAT_READ`` 0, ``STAT_WRITE`` 1, ``STAT_DISCARD`` 2, ``STAT_FLUSH`` 3).
STAT_GROUP_OF_OP = (0, 1, 3, 2)


class Bio:
    """One contiguous I/O submitted by a process.

    ``ioprio`` is the kernel's packed value (see `ioprio_value`).
    Times are seconds of simulated time: ``t_queue`` (Q, submitted to the block
    layer), ``t_dispatch`` (D, its request issued to the device) and
    ``t_complete`` (C). ``on_complete`` is called with the bio once it completes.
    ``disk_s`` is the device time attributed to it once it completes (its
    request's share of the device's busy time, split among the request's bios
    by sectors; see `block.legacy_queue.RequestQueue` and docs/results.md).
    ``origin`` is None for a bio a process submitted; a device-mapper clone holds
    there the I/O it is part of (`block.devmapper.DmDevice`). ``op`` is the operation
    (``REQ_OP_READ``, ``_WRITE``, ``_FLUSH``, ``_DISCARD``; set from ``write`` unless the
    submitter says otherwise) and ``fua`` is REQ_FUA (the data must be on stable media
    when the bio completes); ``preflush`` is REQ_PREFLUSH (what the device completed
    before must be on stable media first; on the 2.6 queue a bio with either flag is a
    barrier, BIO_RW_BARRIER: `blksim.block.flush`). ``cgroup`` is the cgroup v2 group it
    is charged to (`blksim.block.cgroup`; None: the root).
    """

    __slots__ = ("id", "sector", "nr_sectors", "write", "sync", "pid", "ioprio",
                 "t_queue", "t_dispatch", "t_complete", "on_complete", "disk_s", "origin",
                 "rq", "dev", "bd", "cpu", "buffered", "op", "fua", "preflush", "cgroup")

    def __init__(self, id: int, sector: int, nr_sectors: int, write: bool,
                 sync: bool, pid: int, ioprio: int = DEFAULT_IOPRIO,
                 on_complete=None) -> None:
        self.id = id
        self.sector = sector
        self.nr_sectors = nr_sectors
        self.write = write
        self.sync = sync
        self.pid = pid
        self.ioprio = ioprio
        self.t_queue = -1.0
        self.t_dispatch = -1.0
        self.t_complete = -1.0
        self.on_complete = on_complete
        self.disk_s = 0.0
        self.origin = None
        self.rq = -1              # the request that carried it (set when it completes)
        self.dev = None           # the device whose sectors ``sector`` counts, on completion
        self.bd = None            # its request's drive breakdown, when the drive keeps them
        self.cpu = 0              # the CPU its submitter ran on (the multi-queue ctx)
        self.buffered = False     # a write of the page cache's writeback (not direct I/O)
        self.op = 1 if write else 0
        self.fua = False
        self.preflush = False
        self.cgroup = None        # its cgroup (`blksim.block.cgroup.Cgroup`); None: the root

    @property
    def end(self) -> int:
        """First sector after this bio."""
        return self.sector + self.nr_sectors

    def __repr__(self) -> str:
        return (f"Bio(#{self.id} {'W' if self.write else 'R'}{'S' if self.sync else ''} "
                f"{self.sector}+{self.nr_sectors} pid={self.pid})")


class Request:
    """A contiguous run of merged bios, as an elevator and a device see it.

    ``fifo_time`` is the deadline an elevator gives it (absolute seconds);
    ``t_insert`` when it entered the elevator; ``sched`` is free for the
    elevator's own bookkeeping. ``started`` is set once the device took it,
    ``nomerge`` once it may no longer grow. ``v_start`` is the block layer's
    device virtual time when the request was issued (disk-time accounting; set
    at dispatch, then replaced by the request's disk time at completion).
    ``elvpriv`` is False for a request made while the elevator was being
    switched: it bypasses every elevator, whose hooks never see it. ``owner`` is
    the request queue that allocated it (None for a request made elsewhere): the
    queue takes off its dispatch list only requests it owns that have not started
    (one merged into another is marked started, with no dispatch time). ``op`` and
    ``fua`` are its first bio's (bios of other ops never merge into it).
    """

    __slots__ = ("id", "sector", "nr_sectors", "write", "sync", "pid", "ioprio",
                 "bios", "t_insert", "fifo_time", "t_dispatch", "started", "nomerge",
                 "sched", "in_elevator", "v_start", "elvpriv", "breakdown", "owner",
                 "op", "fua")

    #: REQ_SOFTBARRIER | REQ_HARDBARRIER: a barrier's request, which ``elv_dispatch_sort``
    #: never sorts a request ahead of (`blksim.block.flush.OrderedRequest`)
    softbarrier = False

    def __init__(self, id: int, bio: Bio, now: float, owner=None) -> None:
        self.id = id
        self.sector = bio.sector
        self.nr_sectors = bio.nr_sectors
        self.write = bio.write
        self.sync = bio.sync
        self.pid = bio.pid
        self.ioprio = bio.ioprio
        self.bios = [bio]
        self.t_insert = now
        self.fifo_time = 0.0
        self.t_dispatch = -1.0
        self.started = False
        self.nomerge = False
        self.sched = None
        self.in_elevator = False
        self.elvpriv = True
        self.breakdown = None      # where its time in the drive went (drives that keep it)
        self.owner = owner         # the queue that allocated it
        self.op = bio.op
        self.fua = bio.fua

    @property
    def end(self) -> int:
        """First sector after this request."""
        return self.sector + self.nr_sectors

    def __repr__(self) -> str:
        return (f"Request(#{self.id} {'W' if self.write else 'R'} {self.sector}+{self.nr_sectors} "
                f"bios={len(self.bios)})")


class MqRequest(Request):
    """A request of the multi-queue layer (`blksim.block.mq.queue`): a `Request` that also
    knows the hardware queue it maps to (``hctx``), the software queue it was made on
    (``ctx``: the submitting CPU), its driver tag (``tag``, -1 until it has one) and its
    scheduler tag (``sched_tag``, -1 without an elevator)."""

    __slots__ = ("hctx", "ctx", "tag", "sched_tag")

    def __init__(self, id: int, bio: Bio, now: float, owner=None, hctx=None,
                 ctx: int = 0) -> None:
        super().__init__(id, bio, now, owner)
        self.hctx = hctx
        self.ctx = ctx
        self.tag = -1
        self.sched_tag = -1
