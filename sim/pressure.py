"""Watching processes for pressure stall information (`blksim.block.psi`): which
processes are watched, and which of their waits are iowait.

A run with cgroups watches its ``[[job]]`` processes: each method the clock, the queue or
the CPUs call back (`JobProcess.ENTRY_POINTS`) is wrapped, on that process only, so that
after it runs the process's state (`JobProcess.psi_state`) goes to the run's `Pressure`.
A run without groups wraps nothing and pays nothing. Trace replays report their
processes' states themselves (`TraceReplay.psi`: an open-loop replayer is in iowait only
while it sleeps for a request or tag; `ClosedTraceReplay.psi`). Applications' processes
report through `AppTasks`: their open files tell it the waits of each call
(`blksim.hostio.fileio.OpenFile.watch`: a call is in iowait, as its sleeps are in
``io_schedule``, but for its copy, which runs, and a journal commit's wait, a plain
``wait_event``), and the models their CPU work (`blksim.apps.AppProcess.on_cpu`);
docs/cgroups.md tabulates each wait with its kernel function.
"""

from __future__ import annotations

import functools

from blksim.block.elevator import kernel_version
from blksim.block.psi import IDLE, IOWAIT, RUNNING


def waits_in_iowait(engine, kernel: str) -> bool:
    """Whether a job's wait for its own I/O is iowait (a task asleep in ``io_schedule``,
    counted by PSI) with fio engine ``engine`` on ``kernel``:

    - a synchronous engine (psync, sync, pvsync): yes: direct I/O waits in
      ``blk_io_schedule`` (block/fops.c ``__blkdev_direct_IO_simple``, 5.10-6.6;
      fs/block_dev.c 5.4), a buffered read for its page and fsync for writeback in
      ``folio_wait_bit`` / ``wait_on_page_bit`` (io_schedule);
    - libaio (and blksim's default engine, libaio's loop): no: ``io_getevents`` sleeps in
      ``read_events`` with ``wait_event_interruptible_hrtimeout`` (fs/aio.c, 5.4-6.6), a
      plain sleep;
    - io_uring: from 6.5 (on blksim's 6.6 line) ``io_cqring_wait_schedule`` marks the
      waiter ``in_iowait`` while it has requests in flight (io_uring/io_uring.c, "Use
      io_schedule* in cqring wait"); before, a plain ``schedule_hrtimeout`` (5.4-6.1)."""
    if engine.synchronous:
        return True
    if engine.name == "io_uring":
        return kernel_version(kernel) >= (6, 5)
    return False


def watch(proc, pressure, clock, kernel: str) -> None:
    """Report ``proc``'s state to ``pressure`` after each of its entry points."""
    iowait = waits_in_iowait(proc.engine, kernel)

    def note():
        pressure.set(proc.pid, proc.cpu, proc.psi_state(iowait), clock.now)

    for name in proc.ENTRY_POINTS:
        method = getattr(proc, name)

        @functools.wraps(method)
        def wrapped(*args, _method=method, **kwargs):
            result = _method(*args, **kwargs)
            note()
            return result
        setattr(proc, name, wrapped)


class AppTasks:
    """The task states of a run's applications' processes (`blksim.apps`), for its
    `Pressure`: the one helper the application models and the host's I/O path
    (`blksim.hostio.fileio.OpenFile`, its journals) report to.

    A process of a model may be in several waits at once where the kernel's task would
    do them one after another (an asynchronous writer's batch of buffered writes), so
    each process keeps counts: of the reasons it is asleep in ``io_schedule``
    (`iowait`) and of the CPU work it is doing (`running`). It is running while any CPU
    work is, else in iowait while any reason holds, else idle. Every application
    process is counted on CPU 0, the CPU its bios carry (docs/cgroups.md)."""

    __slots__ = ("pressure", "clock", "counts")

    #: the CPU an application's processes run on (their bios' ``Bio.cpu``)
    CPU = 0

    def __init__(self, pressure, clock) -> None:
        self.pressure = pressure
        self.clock = clock
        self.counts: dict = {}          # pid -> [iowait reasons, running work]

    def iowait(self, pid: int, delta: int) -> None:
        """Process ``pid`` enters (``delta`` 1) or leaves (-1) a sleep in
        ``io_schedule`` now."""
        self._change(pid, 0, delta)

    def running(self, pid: int, delta: int) -> None:
        """Process ``pid`` starts (1) or ends (-1) a piece of CPU work now (on a CPU or
        waiting for one: runnable is running for PSI, ``TSK_RUNNING``)."""
        self._change(pid, 1, delta)

    def _change(self, pid: int, which: int, delta: int) -> None:
        counts = self.counts.get(pid)
        if counts is None:
            counts = self.counts[pid] = [0, 0]
        counts[which] += delta
        if counts[which] < 0:
            raise AssertionError(f"pid {pid}: more ends than starts of its "
                                 f"{('iowait', 'running')[which]}")
        state = RUNNING if counts[1] else IOWAIT if counts[0] else IDLE
        self.pressure.set(pid, self.CPU, state, self.clock.now)
