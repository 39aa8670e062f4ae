"""Write a simulated run as blktrace binary files, so blkparse and btt can read it.

`BlktraceRecorder` taps one `RequestQueue` and writes, for every bio, the events
a 2.6.18 kernel traces: ``Q`` (queued), ``M``/``F`` (back / front merge into a
pending request) or ``G`` (request allocated; after ``S`` when the submitter
had to sleep for a free request) and ``I`` (inserted into the elevator), then
per request ``D`` (issued to the device) and ``C`` (completed). The first event
of each process is preceded by a process-name record, as the kernel's
``BLK_TN_PROCESS`` notes are. Times are nanoseconds from the start of the run;
everything goes to CPU 0 of one device (default 8,0, "sda"), so the directory
holds ``sda.blktrace.0``: ``blkparse -i DIR/sda`` and ``btt`` read it as they
read a real capture.

The recorder is a subscriber of the block layer's tracepoints
(`blksim.block.tracepoints`), as blktrace is of the kernel's: ``block_bio_queue``
(Q), ``block_bio_backmerge``/``block_bio_frontmerge`` (M/F), ``block_getrq`` (G),
``block_sleeprq`` (S), ``block_rq_insert`` (I), ``block_rq_issue`` (D),
``block_rq_complete`` (C) and ``block_bio_remap`` (A). A run that records nothing
pays one test per tracepoint passed.

On a multi-queue kernel (``multiqueue=True``, Linux 5.4-6.6) it also writes what
blk-mq's tracepoints give blktrace (kernel/trace/blktrace.c of 6.6,
``blk_add_trace_plug``, ``blk_add_trace_unplug``, ``blk_add_trace_rq_requeue``,
``blk_add_trace_rq_merge``): ``P`` when a task's plug takes its first request
(``block_plug``), ``U`` when the task flushes its plug and ``UT`` when it is flushed
because the task sleeps (``block_unplug``; the payload the number of requests, a
big-endian u64), ``R`` when the driver gives a request back (``block_rq_requeue``), and
``M`` for a request merged into its neighbour (``block_rq_merge``, from 5.10: its
sector and size). A request the queue issues directly (``none``) has no ``I``: its
sequence is Q G D C, as blk-mq traces it. The kernel records a plug event with the
task that plugs or unplugs (``current``); blksim's ``block_plug``/``block_unplug`` do not
name it, so the recorder gives them the process of the last bio it recorded, which is
that task's: a process submits its plugged bios and flushes its plug (or sleeps) at one
instant, with no other process between.
The 2.6 recorder writes none of these (``block_plug`` and the 2.6 unplug events are not
recorded there), so its files are as they were.
"""

from __future__ import annotations

import os

import struct

from blksim.traces.blktrace import (TA_BACKMERGE, TA_COMPLETE, TA_FRONTMERGE, TA_GETRQ, TA_INSERT,
                             TA_ISSUE, TA_PLUG, TA_QUEUE, TA_REMAP, TA_REQUEUE,
                             TA_SLEEPRQ, TA_UNPLUG_IO, TA_UNPLUG_TIMER, BlktraceFile,
                             TC_FUA, TC_SHIFT, action_value, encode_device)
from blksim.traces.records import DEVICE_NAME, make_directory

DEFAULT_DEVICE = (8, 0)
DEFAULT_NAME = DEVICE_NAME


def remap_payload(device_from: tuple, device_to: int, sector_from: int) -> bytes:
    """The payload of an ``A`` event: ``struct blk_io_trace_remap`` (device_from,
    device_to, sector_from), big-endian; ``device_to`` already encoded."""
    return struct.pack(">IIQ", encode_device(*device_from), device_to, sector_from)


#: BLK_TC_FUA in an action value (``__blk_add_trace``: a request with REQ_FUA)
_FUA = TC_FUA << TC_SHIFT


def _actions(code: int, fs: bool = False) -> dict:
    """(op, sync) -> action value for one action code (``op``: ``enum req_op``, 0-3)."""
    return {(op, s): action_value(code, op & 1 == 1, s, fs, op)
            for op in range(4) for s in (False, True)}


class BlktraceRecorder:
    """Records one queue's events into ``DIR/NAME.blktrace.0``.

    ``name_of(pid)`` gives a process's name (for the process records).
    ``multiqueue``: the queue is a multi-queue kernel's (P, U/UT, R and request M
    events are written too; see the module docstring).
    Call `install` before the run, then `close` (or `discard` after a failure).
    """

    def __init__(self, directory: str, name_of, device: tuple[int, int] = DEFAULT_DEVICE,
                 device_name: str = DEFAULT_NAME, multiqueue: bool = False) -> None:
        make_directory(directory)
        self.path = os.path.join(directory, f"{device_name}.blktrace.0")
        self.file = BlktraceFile(self.path, encode_device(*device), cpu=0)
        self.name_of = name_of
        self._event = self.file.event
        self._named: set[int] = set()
        self._q = _actions(TA_QUEUE)
        self._m = _actions(TA_BACKMERGE)
        self._f = _actions(TA_FRONTMERGE)
        self._g = _actions(TA_GETRQ)
        self._s = _actions(TA_SLEEPRQ)
        self._i = _actions(TA_INSERT, fs=True)
        self._d = _actions(TA_ISSUE, fs=True)
        self._c = _actions(TA_COMPLETE, fs=True)
        self._a = _actions(TA_REMAP)
        self.multiqueue = multiqueue
        self._last_pid = 0                # the process of the last bio event (P, U/UT)
        self._r = _actions(TA_REQUEUE, fs=True)
        self._mrq = _actions(TA_BACKMERGE, fs=True)
        # P and U/UT: no request, so no direction (op 0 is REQ_OP_READ: the R bit)
        self._p = action_value(TA_PLUG, False)
        self._u = action_value(TA_UNPLUG_IO, False)
        self._ut = action_value(TA_UNPLUG_TIMER, False)
        self.queue = None

    # ------------------------------------------------------------------ wiring
    def install(self, queue, partitions=()) -> None:
        """Subscribe to ``queue``'s tracepoints (a `blksim.block.legacy_queue.RequestQueue`),
        and to the remaps onto each of its ``partitions`` (a device-mapper clone remapped
        onto a partition is queued on, and traced in, its disk)."""
        self.queue = queue
        sub = queue.subscribe
        sub("block_bio_queue", self.queued)
        sub("block_bio_backmerge", self.backmerge)
        sub("block_bio_frontmerge", self.frontmerge)
        sub("block_sleeprq", self.sleeprq)
        sub("block_getrq", self.getrq)
        sub("block_rq_insert", self.insert)
        sub("block_rq_issue", self.issue)
        sub("block_rq_complete", self.complete)
        sub("block_bio_remap", self.remap_event)
        if self.multiqueue:
            sub("block_plug", self.plug)
            sub("block_unplug", self.unplug)
            sub("block_rq_requeue", self.requeue)
            sub("block_rq_merge", self.rq_merge)
        for part in partitions:
            part.subscribe("block_bio_remap", self.remap_event)

    # ------------------------------------------------------------------ events
    def _name(self, pid: int, t_ns: int) -> None:
        self._named.add(pid)
        self.file.notify_process(t_ns, pid, self.name_of(pid))

    def bio_event(self, actions: dict, bio, now: float) -> None:
        t_ns = int(now * 1e9 + 0.5)
        pid = self._last_pid = bio.pid
        if pid not in self._named:
            self._name(pid, t_ns)
        self._event(t_ns, actions[(bio.op, bio.sync)], bio.sector, bio.nr_sectors << 9, pid)

    def queued(self, q, bio, now: float) -> None:
        """``Q`` (``block_bio_queue``)."""
        self.bio_event(self._q, bio, now)

    def backmerge(self, q, bio, now: float) -> None:
        """``M`` (``block_bio_backmerge``)."""
        self.bio_event(self._m, bio, now)

    def frontmerge(self, q, bio, now: float) -> None:
        """``F`` (``block_bio_frontmerge``)."""
        self.bio_event(self._f, bio, now)

    def sleeprq(self, q, bio, rw: int, now: float) -> None:
        """``S`` (``block_sleeprq``)."""
        self.bio_event(self._s, bio, now)

    def getrq(self, q, bio, rw: int, now: float) -> None:
        """``G`` (``block_getrq``)."""
        self.bio_event(self._g, bio, now)

    def insert(self, q, rq, now: float) -> None:
        """``I`` (``block_rq_insert``): the new request, which holds its one bio."""
        self.bio_event(self._i, rq, now)

    def remap_event(self, q, bio, device_from: tuple, sector_from: int, now: float) -> None:
        """An ``A`` event (``block_bio_remap``): device-mapper remapped ``bio`` (now at its
        sector here) from ``sector_from`` of ``device_from`` ((major, minor)), as
        ``blk_add_trace_remap`` records it: the payload (``struct blk_io_trace_remap``, big-endian) is written in
        the layout today's blkparse and btt read, source device, this device, source
        sector."""
        t_ns = int(now * 1e9 + 0.5)
        pid = bio.pid
        if pid not in self._named:
            self._name(pid, t_ns)
        pdu = remap_payload(device_from, self.file.device, sector_from)
        self._event(t_ns, self._a[(bio.op, bio.sync)], bio.sector, bio.nr_sectors << 9, pid,
                    0, pdu)

    def issue(self, q, rq, now: float) -> None:
        """``D`` (``block_rq_issue``)."""
        t_ns = int(now * 1e9 + 0.5)
        action = self._d[(rq.op, rq.sync)]
        if rq.fua:                  # REQ_FUA: BLK_TC_FUA (blkparse's trailing F)
            action |= _FUA
        self._event(t_ns, action, rq.sector, rq.nr_sectors << 9, rq.pid)

    def complete(self, q, rq, now: float) -> None:
        """``C`` (``block_rq_complete``)."""
        t_ns = int(now * 1e9 + 0.5)
        action = self._c[(rq.op, rq.sync)]
        if rq.fua:
            action |= _FUA
        self._event(t_ns, action, rq.sector, rq.nr_sectors << 9, rq.pid)

    # the multi-queue layer's
    def requeue(self, q, rq, now: float) -> None:
        """``R`` (``block_rq_requeue``)."""
        t_ns = int(now * 1e9 + 0.5)
        self._event(t_ns, self._r[(rq.op, rq.sync)], rq.sector, rq.nr_sectors << 9, rq.pid)

    def rq_merge(self, q, rq, now: float) -> None:
        """``M`` of a request merged into its neighbour (``block_rq_merge``)."""
        t_ns = int(now * 1e9 + 0.5)
        self._event(t_ns, self._mrq[(rq.op, rq.sync)], rq.sector, rq.nr_sectors << 9,
                    rq.pid)

    def plug(self, q, now: float) -> None:
        """``P`` (``block_plug``): a task's plug took its first request."""
        self._event(int(now * 1e9 + 0.5), self._p, 0, 0, self._last_pid)

    def unplug(self, q, nr_rq: int, explicit: bool, now: float) -> None:
        """``U`` (the task flushed its plug) or ``UT`` (flushed as it slept), with the
        number of requests as the payload (``block_unplug``)."""
        self._event(int(now * 1e9 + 0.5), self._u if explicit else self._ut, 0, 0,
                    self._last_pid, 0, struct.pack(">Q", nr_rq))

    # ------------------------------------------------------------------ finishing
    def close(self) -> None:
        """Finish the file (renamed into place)."""
        self.file.close()

    def discard(self) -> None:
        """Remove the unfinished file."""
        self.file.discard()


class DmBlktraceRecorder(BlktraceRecorder):
    """Records a device-mapper volume into ``DIR/dm-N.blktrace.0``: ``Q`` when a bio is
    submitted to it (``block_bio_queue``) and ``C`` when its last clone completes
    (``block_bio_complete``, fired by ``dec_pending``), as 2.6.18 traces a bio-based
    device; the ``A`` of each clone is traced on the device the clone goes to (its
    recorder's), and ``A`` onto this volume from a volume above it here. Its events and
    file are a queue recorder's; only the tracepoints differ."""

    def __init__(self, directory: str, name_of, dm) -> None:
        super().__init__(directory, name_of, dm.number, dm.name)
        self.dm = dm

    def install(self, dm, partitions=()) -> None:
        """Subscribe to ``dm``'s tracepoints (a `blksim.block.devmapper.DmDevice`)."""
        dm.subscribe("block_bio_queue", self.queued)
        dm.subscribe("block_bio_remap", self.remap_event)
        dm.subscribe("block_bio_complete", self.bio_complete)

    def bio_complete(self, q, bio, now: float) -> None:
        """``C`` of a bio whose last clone completed."""
        self.bio_event(self._c, bio, now)
