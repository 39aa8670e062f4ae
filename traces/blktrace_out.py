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

The tap costs nothing when not installed: it replaces the queue's
``submit_bio`` and ``_add_new_request`` with wrapping closures on the queue
instance, puts a proxy in front of the device (for ``D`` and ``C``), and sets
the queue's ``event_hook`` (checked only after a successful merge).
"""

from __future__ import annotations

import os

import struct

from blksim.traces.blktrace import (TA_BACKMERGE, TA_COMPLETE, TA_FRONTMERGE, TA_GETRQ, TA_INSERT,
                             TA_ISSUE, TA_QUEUE, TA_REMAP, TA_SLEEPRQ, BlktraceFile,
                             action_value, encode_device)
from blksim.traces.records import DEVICE_NAME, make_directory

DEFAULT_DEVICE = (8, 0)
DEFAULT_NAME = DEVICE_NAME


def remap_payload(device_from: tuple, device_to: int, sector_from: int) -> bytes:
    """The payload of an ``A`` event: ``struct blk_io_trace_remap`` (device_from,
    device_to, sector_from), big-endian; ``device_to`` already encoded."""
    return struct.pack(">IIQ", encode_device(*device_from), device_to, sector_from)


def _actions(code: int, fs: bool = False) -> dict:
    """(write, sync) -> action value for one action code."""
    return {(w, s): action_value(code, w, s, fs) for w in (False, True) for s in (False, True)}


class _TracedDevice:
    """Stands in front of the device: records ``D`` on submit and ``C`` on completion."""

    def __init__(self, device, recorder: "BlktraceRecorder") -> None:
        self._device = device
        self._rec = recorder
        self.capacity = device.capacity
        self.can_accept = device.can_accept
        self.next_event_time = device.next_event_time
        self.outstanding = device.outstanding

    def submit(self, rq, now: float) -> None:
        self._rec.issue(rq, now)
        self._device.submit(rq, now)

    def pop_completed(self, now: float):
        done = self._device.pop_completed(now)
        complete = self._rec.complete
        for rq in done:
            complete(rq, now)
        return done

    def __getattr__(self, name):
        return getattr(self._device, name)


class BlktraceRecorder:
    """Records one queue's events into ``DIR/NAME.blktrace.0``.

    ``name_of(pid)`` gives a process's name (for the process records).
    Call `install` before the run, then `close` (or `discard` after a failure).
    """

    def __init__(self, directory: str, name_of, device: tuple[int, int] = DEFAULT_DEVICE,
                 device_name: str = DEFAULT_NAME) -> None:
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
        self.queue = None

    # ------------------------------------------------------------------ wiring
    def install(self, queue) -> None:
        """Tap ``queue`` (a `sim.blocklayer.RequestQueue`)."""
        self.queue = queue
        clock = queue.clock
        submit = queue.submit_bio
        add_new = queue._add_new_request
        rec = self

        def submit_bio(bio, now=None):
            if now is None:
                now = clock.now
            rec.bio_event(rec._q, bio, now)
            ok = submit(bio, now)
            if not ok:
                rec.bio_event(rec._s, bio, now)
            return ok

        def add_new_request(bio, now):
            rec.bio_event(rec._g, bio, now)
            rec.bio_event(rec._i, bio, now)
            add_new(bio, now)

        queue.submit_bio = submit_bio
        queue._add_new_request = add_new_request
        queue.device = _TracedDevice(queue.device, self)
        queue.event_hook = self

    # ------------------------------------------------------------------ events
    def _name(self, pid: int, t_ns: int) -> None:
        self._named.add(pid)
        self.file.notify_process(t_ns, pid, self.name_of(pid))

    def bio_event(self, actions: dict, bio, now: float) -> None:
        t_ns = int(now * 1e9 + 0.5)
        pid = bio.pid
        if pid not in self._named:
            self._name(pid, t_ns)
        self._event(t_ns, actions[(bio.write, bio.sync)], bio.sector, bio.nr_sectors << 9, pid)

    def remap_event(self, bio, now: float, device_from: tuple, sector_from: int) -> None:
        """An ``A`` event: device-mapper remapped ``bio`` (now at its sector here) from
        ``sector_from`` of ``device_from`` ((major, minor)), as ``blk_add_trace_remap``
        records it: the payload (``struct blk_io_trace_remap``, big-endian) is written in
        the layout today's blkparse and btt read, source device, this device, source
        sector."""
        t_ns = int(now * 1e9 + 0.5)
        pid = bio.pid
        if pid not in self._named:
            self._name(pid, t_ns)
        pdu = remap_payload(device_from, self.file.device, sector_from)
        self._event(t_ns, self._a[(bio.write, bio.sync)], bio.sector, bio.nr_sectors << 9, pid,
                    0, pdu)

    def merged(self, bio, front: bool, now: float) -> None:
        """The queue merged ``bio`` into a pending request (its ``event_hook``)."""
        self.bio_event(self._f if front else self._m, bio, now)

    def issue(self, rq, now: float) -> None:
        t_ns = int(now * 1e9 + 0.5)
        self._event(t_ns, self._d[(rq.write, rq.sync)], rq.sector, rq.nr_sectors << 9, rq.pid)

    def complete(self, rq, now: float) -> None:
        t_ns = int(now * 1e9 + 0.5)
        self._event(t_ns, self._c[(rq.write, rq.sync)], rq.sector, rq.nr_sectors << 9, rq.pid)

    # ------------------------------------------------------------------ finishing
    def close(self) -> None:
        """Finish the file (renamed into place)."""
        self.file.close()

    def discard(self) -> None:
        """Remove the unfinished file."""
        self.file.discard()


class DmBlktraceRecorder(BlktraceRecorder):
    """Records a device-mapper volume into ``DIR/dm-N.blktrace.0``: ``Q`` when a bio is
    submitted to it and ``C`` when its last clone completes (``dec_pending``), as 2.6.18
    traces a bio-based device; and, through the recorder of each device below, the ``A``
    event of every clone before its ``Q`` there. ``below``: the recorder of each device a
    clone may go to (a disk's queue, or another volume), by the device object. Its
    events and file are a queue recorder's; only the tap differs."""

    def __init__(self, directory: str, name_of, dm, below: dict) -> None:
        super().__init__(directory, name_of, dm.number, dm.name)
        self.dm = dm
        self.below = below

    def install(self, dm) -> None:
        """Tap ``dm`` (a `sim.host.DmDevice`)."""
        submit = dm.submit_bio
        finish = dm.finish
        clock = dm.clock
        rec = self

        def submit_bio(bio, now=None):
            if now is None:
                now = clock.now
            rec.bio_event(rec._q, bio, now)
            return submit(bio, now)

        def finished(bio):
            rec.bio_event(rec._c, bio, bio.t_complete)
            finish(bio)

        dm.submit_bio = submit_bio
        dm.finish = finished
        dm.event_hook = self

    def remapped(self, dm, clone, now: float, logical: int, target) -> None:
        """A clone of a bio at ``logical`` on ``dm`` goes to ``target``: its ``A`` event on
        the target's trace (a partition's is its disk's)."""
        rec = self.below.get(getattr(target, "disk", target))
        if rec is not None:
            rec.remap_event(clone, now, dm.number, logical)
