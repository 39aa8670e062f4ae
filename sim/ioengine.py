"""fio's I/O engines as a job process runs them: how many I/Os it keeps in flight, how
many it submits in one system call, how many completions it waits for and reaps, and
where the kernel wraps a submission in a per-task plug.

**The submission loop** is fio's ``do_io`` (backend.c, fio 3.x), with no CPU time spent:

1. While fewer than ``iodepth`` I/Os are in flight (fio's ``cur_depth``: submitted or
   queued, and not yet reaped), the process prepares one more and queues it
   (``td_io_queue``, ioengines.c). A synchronous engine (``psync``, ``sync``,
   ``pvsync``: fio's ``FIO_SYNCIO``) does the I/O in that call and returns when it has
   completed, so one I/O is in flight whatever ``iodepth`` says; fio notes "both iodepth
   >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1"
   (backend.c, ``thread_main``). An asynchronous engine (``libaio``, ``io_uring``)
   only queues it; once ``iodepth_batch_submit`` I/Os are queued they are submitted in
   one system call (``td_io_commit``: ``io_submit``, ``io_uring_enter``).
2. When ``iodepth`` I/Os are in flight (``queue_full``), or after every I/O when both
   ``iodepth_batch_complete_min`` and ``_max`` are 0 (``io_in_polling``), the process
   reaps (``wait_for_completions``): it asks for at least ``min(complete_min,
   in flight)`` completions, raised to 1 when ``complete_min`` is 0 (fio's code does so
   whenever ``complete_min`` is 0, although its HOWTO calls that polling), and at most
   ``complete_max`` (no more than are in flight, no fewer than the minimum:
   ``td_io_getevents``). Before it waits it submits what it has queued
   (``td_io_getevents`` commits when the minimum is above 0). It sleeps until that many
   have completed, then takes every completion there is, up to the maximum
   (``io_getevents``; io_uring's ring reap likewise), and goes back to 1.
3. When the job is done (``number_ios``, ``runtime``, the run's end) it submits what is
   queued and reaps everything in flight, then exits.

fio's defaults (``iodepth_batch_submit`` 1, ``_complete_min`` 1, ``_complete_max`` 0,
raised to the minimum by ``fixup_options``) therefore submit each I/O on its own and reap
one completion at a time: the process resubmits as each I/O completes.

**Plugging** (the queue protocol's ``start_plug``/``finish_plug``, ``blk_start_plug``/
``blk_finish_plug``): the kernel, not fio, decides. ``io_submit`` plugs around a batch of
more than ``AIO_PLUG_THRESHOLD`` = 2 iocbs (fs/aio.c, ``io_submit``, 5.4-6.6).
``io_uring_enter`` plugs around a batch of SQEs: of more than 2 in 5.4
(``IO_PLUG_THRESHOLD``, fs/io_uring.c ``io_submit_sqes``), of any size in 5.10
(``io_submit_state_start`` plugs unconditionally, fs/io_uring.c), of more than 1 in 5.15
(``io_init_req`` plugs at the first read or write with more than one SQE left,
io_uring/io_uring.c of 5.15.100), of more than 2 in 6.1 and 6.6
(``io_submit_state_start``'s ``need_plug = max_ios > 2``, io_uring/io_uring.c).
Inside, a block device's own paths plug one I/O at a time, a nested plug being ignored:
``blkdev_write_iter`` plugs every write (fs/block_dev.c 5.4-5.10, block/fops.c 5.15-6.1;
gone in 6.6's block/fops.c); an asynchronous direct I/O goes through
``__blkdev_direct_IO``, which plugs around its bios (5.4-5.15), until 5.16 gave a
single-bio asynchronous I/O ``__blkdev_direct_IO_async``, which does not (6.1, 6.6).
A synchronous read of one bio (``__blkdev_direct_IO_simple``) is never plugged. The 2.6
lines have no per-task plugging (it came with 2.6.39): their queue plugs itself, and a
job calls neither.

================  ===============  ================  ==========  ===========
kernel line       io_submit batch  io_uring batch    lone async  every write
================  ===============  ================  ==========  ===========
2.6.18 .. 2.6.32  no               (no io_uring)     no          no
5.4               more than 2      more than 2       yes         yes
5.10              more than 2      any               yes         yes
5.15              more than 2      more than 1       yes         yes
6.1               more than 2      more than 2       no          yes
6.6               more than 2      more than 2       no          no
================  ===============  ================  ==========  ===========

**A bio that finds no free request** (``submit_bio`` returns False): ``libaio``'s and the
synchronous engines' submitter sleeps in the block layer until the bio has one
(``get_request_wait`` in 2.6, ``blk_mq_get_tag`` in 5.x and 6.x), its plug still in
place (the queue flushes what the plug holds as the task sleeps: ``sched_submit_work``),
and submits the rest of its batch into it when woken. ``io_uring`` issues block I/O with
``IOCB_NOWAIT`` (``io_read``/``io_write``, io_uring/rw.c) and hands an I/O that would
block to an io-wq worker (``io_queue_async``, io_uring/io_uring.c, 6.6), so its
submitter goes on: the bio waits in the queue with its submission time. A job that
names no engine (blksim's default) behaves as ``libaio`` with fio's default batching,
except that it too goes on as ``io_uring`` does: blksim's behaviour before it modelled
engines, kept so that existing results stay the same (docs/jobs.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    """One of fio's I/O engines as blksim models it."""

    name: str
    #: fio's FIO_SYNCIO: the system call returns once its one I/O has completed
    synchronous: bool
    #: the system calls that submit (and, for a synchronous engine, complete) an I/O
    calls: str
    #: the first kernel that has the calls, as [run] kernel spells a line ("2.6": all)
    since: str
    #: whether the submitter sleeps when its bio finds no free request (see the module)
    sleeps_for_request: bool


ENGINES = {
    "psync": Engine("psync", True, "pread(2)/pwrite(2)", "2.6", True),
    "sync": Engine("sync", True, "lseek(2) then read(2)/write(2)", "2.6", True),
    "pvsync": Engine("pvsync", True, "preadv(2)/pwritev(2)", "2.6", True),
    "libaio": Engine("libaio", False, "io_submit(2), io_getevents(2)", "2.6", True),
    # io_uring_setup(2) appeared in Linux 5.1
    "io_uring": Engine("io_uring", False, "io_uring_enter(2)", "5.1", False),
}

#: What a [[job]] without ioengine runs: fio's libaio loop with fio's default batching,
#: its submitter never sleeping for a request (see the module docstring).
DEFAULT_ENGINE = Engine("default", False, "libaio's, submitter never sleeping for a request",
                        "2.6", False)


@dataclass(frozen=True)
class PlugRule:
    """Where the kernel plugs a job's submissions (see the module docstring's table).
    `blksim.sim.workload.JobProcess` turns it into three flags once, for its engine: a
    batch of more than ``aio_batch_over`` (io_submit: libaio and blksim's default) or
    ``uring_batch_over`` (io_uring_enter) in one plug; otherwise each I/O in a plug of its
    own when ``lone_async`` (asynchronous engines) or, for a write, ``every_write``."""

    #: an io_submit of more than this many I/Os is plugged as a whole (None: never)
    aio_batch_over: int | None
    #: an io_uring_enter of more than this many I/Os is plugged as a whole (None: never)
    uring_batch_over: int | None
    #: an asynchronous direct I/O submitted on its own is plugged on its own
    lone_async: bool
    #: every write is plugged on its own (``blkdev_write_iter``)
    every_write: bool


NO_PLUG = PlugRule(None, None, False, False)

#: Kernel line -> plug rule; a line not here (the 2.6 lines) has no per-task plugging.
PLUG_RULES = {
    "5.4": PlugRule(2, 2, True, True),
    "5.10": PlugRule(2, 0, True, True),
    "5.15": PlugRule(2, 1, True, True),
    "6.1": PlugRule(2, 2, False, True),
    "6.6": PlugRule(2, 2, False, False),
}


def plug_rule(kernel: str) -> PlugRule:
    """The plug rule of ``[run] kernel``: the nearest line at or below it that differs
    (a later LTS line than 6.6 keeps 6.6's; the 2.6 lines have none)."""
    if kernel in PLUG_RULES:
        return PLUG_RULES[kernel]
    version = _version(kernel)
    if version is None or version < (5, 4):
        return NO_PLUG
    best = max((v for v in PLUG_RULES if _version(v) <= version), key=_version)
    return PLUG_RULES[best]


def _version(text: str):
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return None


def engine_of(job) -> Engine:
    """The engine a job runs (`DEFAULT_ENGINE` when it names none)."""
    return DEFAULT_ENGINE if job.ioengine is None else ENGINES[job.ioengine]


def engine_available(name: str, kernel: str) -> bool:
    """Whether the kernel line has the engine's system calls."""
    version = _version(kernel)
    since = _version(ENGINES[name].since)
    return version is None or version >= since
