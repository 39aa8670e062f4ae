"""The deep-queue cases of issue 33, as a small harness for the hand-traced tests
(tests/test_deep_queue_*.py).

Sixteen readers, each with one synchronous direct-I/O read outstanding at a time, and one
writer, on a LUN with 128 tags whose every request takes exactly ``service`` seconds
(a `ServiceLawDevice` with as many servers as tags: nothing waits inside the device), in
front of a 2.6.18 elevator in the legacy request queue. The writer is either

* ``"dio"``: a process submitting asynchronous direct-I/O writes (io_submit on a file
  opened O_DIRECT). 2.6.18's ``__blockdev_direct_IO`` (fs/direct-io.c) turns every
  direct write into ``WRITE_SYNC``: the bio carries ``BIO_RW_SYNC``, which
  ``init_request_from_bio`` (block/ll_rw_blk.c) turns into ``REQ_RW_SYNC``, and
  ``__make_request`` unplugs the queue for it at once; or
* ``"pdflush"``: pdflush writing dirty pages back, plain ``WRITE`` bios
  (``mpage_writepages`` -> ``mpage_bio_submit(WRITE, ...)``, fs/mpage.c), from its own
  process.

Everything is deterministic: fixed service time, a fixed think time between a reader's
read completing and its next one (``think``: a session's CPU time), fixed sectors. The
tests run the clock to chosen instants (`Case.run_until`) and look at the elevator and
at the issue log in between.
"""

from __future__ import annotations

import itertools

import simpy

from blksim.block.legacy_queue import QueueSettings, RequestQueue
from blksim.block.request import Bio
from blksim.disk_models.synthetic import ServiceLawDevice
from blksim.schedulers import get_scheduler
from blksim.sim.clock import SimpyClock

HZ = 250
JIFFY = 1.0 / HZ
TAGS = 128
READERS = tuple(range(1, 17))      # the sixteen reader pids
WRITER = 100                       # the process submitting direct-I/O writes
PDFLUSH = 200                      # pdflush
#: Each reader works in its own 4 GiB region and alternates between two points 1 GiB
#: apart, so every read seeks 2M sectors from the process's last one: seeky by CFQ's
#: CIC_SEEKY (mean above 128*1024 sectors) once its statistics are valid.
REGION = 1 << 23                   # sectors (4 GiB)
SWING = 1 << 21                    # sectors (1 GiB)
WRITE_BASE = 40 * REGION           # the writer's area, past the readers'
CAPACITY = 64 * REGION


class RecordingLun(ServiceLawDevice):
    """A LUN with ``TAGS`` tags, each request served in exactly ``service`` seconds
    in parallel with the others; remembers what it was given: (time, pid, write,
    sector)."""

    def __init__(self, service: float) -> None:
        super().__init__("fixed", service, capacity=CAPACITY, queue_depth=TAGS, servers=TAGS)
        self.log: list = []

    def submit(self, rq, now):
        self.log.append((now, rq.pid, rq.write, rq.sector))
        super().submit(rq, now)


class Case:
    """One deep-queue case: the queue, the elevator, the device and the processes."""

    def __init__(self, scheduler: str, writer: str, service: float, writes: int = 32,
                 writer_depth: int = 8, reads_each: int | None = None, params=None,
                 write_start: float = 0.0, think: float = 0.0013) -> None:
        self.env = simpy.Environment()
        self.clock = SimpyClock(self.env)
        self.lun = RecordingLun(service)
        cls = get_scheduler(scheduler)
        self.q = RequestQueue(lambda dq: cls.create(dq, dict(params or {}), hz=HZ,
                                                    kernel="2.6.18"),
                              self.lun, self.clock, QueueSettings(hz=HZ))
        self.el = self.q.elevator
        self._ids = itertools.count()
        self.reads_each = reads_each
        self.think = think
        self.reads_done = {pid: 0 for pid in READERS}
        self.completions: list = []          # (time, pid, write)
        for pid in READERS:
            self.clock.call_at(0.0, lambda _ev, pid=pid: self._read(pid))
        self.writes_left = writes
        self.writes_in_flight = 0
        self.writer_depth = writer_depth
        self._wsector = WRITE_BASE
        if writer == "dio":
            self.clock.call_at(write_start, lambda _ev: self._dio_fill())
        elif writer == "pdflush":
            self.clock.call_at(write_start, lambda _ev: self._pdflush())
        elif writer != "none":
            raise ValueError(writer)

    # ------------------------------------------------------------------ processes
    def _bio(self, sector: int, write: bool, sync: bool, pid: int, done) -> Bio:
        return Bio(next(self._ids), sector, 8, write, sync, pid, on_complete=done)

    def _read(self, pid: int) -> None:
        n = self.reads_done[pid]
        if self.reads_each is not None and n >= self.reads_each:
            return
        sector = (pid - 1) * REGION + (n % 2) * SWING
        # a direct read: READ (no BIO_RW_SYNC in 2.6.18), but the reader waits at once
        # (dio_await_one -> blk_run_address_space unplugs): blksim's sync flag
        self.q.submit_bio(self._bio(sector, False, True, pid, self._read_done))

    def _read_done(self, bio) -> None:
        self.completions.append((bio.t_complete, bio.pid, False))
        self.reads_done[bio.pid] += 1
        if self.think:
            self.clock.call_at(bio.t_complete + self.think, lambda _ev: self._read(bio.pid))
        else:
            self._read(bio.pid)

    def _next_write_sector(self) -> int:
        s = self._wsector
        self._wsector += 64                    # scattered blocks: no two bios merge
        return s

    def _dio_fill(self) -> None:
        # io_submit keeps writer_depth writes in flight; each is WRITE_SYNC
        while self.writes_left and self.writes_in_flight < self.writer_depth:
            self.writes_left -= 1
            self.writes_in_flight += 1
            self.q.submit_bio(self._bio(self._next_write_sector(), True, True, WRITER,
                                        self._write_done))

    def _write_done(self, bio) -> None:
        self.completions.append((bio.t_complete, bio.pid, True))
        self.writes_in_flight -= 1
        if bio.pid == WRITER:
            self._dio_fill()

    def _pdflush(self) -> None:
        # pdflush hands its whole batch to the queue at once: plain WRITEs
        while self.writes_left:
            self.writes_left -= 1
            self.writes_in_flight += 1
            b = self._bio(self._next_write_sector(), True, False, PDFLUSH, self._write_done)
            if not self.q.submit_bio(b):
                self.q.when_request(b, lambda _b: None)

    # ------------------------------------------------------------------ looking
    def run_until(self, t: float) -> None:
        """Run every event before `t` (events at `t` itself have not run yet)."""
        self.env.run(until=t)

    def issued(self, since: float = -1.0, until: float = 1e9) -> list:
        """(time, pid, write) of the requests issued in [since, until)."""
        return [(t, pid, w) for t, pid, w, _ in self.lun.log if since <= t < until]

    def in_device(self) -> int:
        return self.q.in_flight
