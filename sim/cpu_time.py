"""The host's CPUs as a cost: each CPU a server of work, the schedulers' locks, and the
accounting that fio's ``usr_cpu``/``sys_cpu`` and ``mpstat -P ALL`` report
(docs/cpus.md). Multi-queue kernels only (5.4 on); the 2.6 lines have no CPU model.

**A CPU runs one piece of work at a time, first come first served.** A piece is a list
of segments, each a cost in seconds, the class ``mpstat`` counts it in (usr, sys, irq,
soft) and, for some, a lock. Three kinds of piece:

- *a system call that submits* (``io_submit``, ``io_uring_enter``, ``pread``: one
  `JobProcess._commit`), on the process's CPU: per I/O the engine's and the block
  layer's submission (``submit_ns`` of the engine) and the scheduler's insert and
  dispatch (``submit_ns`` of the scheduler), the latter under the scheduler's lock
  when it has a queue-wide one. The bios reach the block layer when the piece ends.
- *a completion*, per interrupt (one `MqQueue` device event): the hard interrupt
  (``irq_ns`` per request) on the CPU the hardware queue's interrupt is affine to (its
  first mapped CPU), then per request the block layer's completion (``complete_ns``)
  and the scheduler's (``complete_ns``, under its lock for bfq) on
  the CPU ``rq_affinity`` chooses (`completion_cpu`). The bios' ``end_io`` run when
  that work is done.
- *a reap* (``io_getevents``, the ring's reap, ``pread``'s return: one
  `JobProcess._reap`), on the process's CPU: ``reap_ns`` per I/O reaped. The process
  goes on when it is done.

A process whose CPU is busy waits for it: its piece queues behind the CPU's others.
Segments without a lock need no event; a piece costs one clock event at its end and
one each time it reaches a lock.

**Locks** (`SpinLock`): mq-deadline holds ``dd->lock`` in ``dd_insert_requests`` and
``dd_dispatch_request``, bfq ``bfqd->lock`` in ``bfq_insert_requests``,
``bfq_dispatch_request`` and ``bfq_finish_requeue_request`` (block/mq-deadline.c,
block/bfq-iosched.c, 5.4-6.6): one lock per queue. A CPU that reaches a held lock
spins, busy, until it is free (queued spinlocks are handed over in arrival order:
kernel/locking/qspinlock.c), the spinning counted in the segment's class. kyber's
per-domain and per-software-queue locks and ``none``'s per-software-queue locks are
not modelled (a software queue is one CPU's).

**Where a completion runs** (``blk_mq_complete_request_remote``,
``blk_mq_complete_need_ipi``, block/blk-mq.c; ``__blk_mq_complete_request`` in 5.4):
with ``rq_affinity`` 1 (the default, QUEUE_FLAG_SAME_COMP) a request completes on its
submitting CPU only when that CPU shares no cache with the interrupted one; blksim's
CPUs share one last-level cache, so it completes where the interrupt lands. With 2
(SAME_FORCE) it completes on the submitting CPU (an IPI), with 0 where the interrupt
lands. In which ``mpstat`` column the completion is counted is data, `_LINES`:

=================================  =====  =====  =====  =====  =====
completion counted in              5.4    5.10   5.15   6.1    6.6
=================================  =====  =====  =====  =====  =====
local, one hardware queue          soft   soft   soft   soft   soft
local, several hardware queues     irq    irq    irq    irq    irq
remote (IPI), one hardware queue   soft   soft   soft   soft   soft
remote (IPI), several hw queues    irq    irq    soft   soft   soft
=================================  =====  =====  =====  =====  =====

(single-queue devices complete in BLOCK_SOFTIRQ on every line; a multi-queue device's
driver ``complete`` runs in the interrupt handler, and inside the IPI on 5.4 and 5.10,
whose IPI handler raised the softirq only for single-queue devices; from 5.15 the IPI
only raises BLOCK_SOFTIRQ.)

Simplifications (docs/cpus.md): a hard interrupt does not preempt the piece a CPU is
running (it waits its turn); the block layer's bookkeeping (tags, the scheduler's
hooks, the next dispatch) happens at the device event, only the bios' end waits for
the completion work, and a dispatch made from the completion path costs nothing
there (its cost is counted once, in the submission); the tracepoints, and so the
latency figures, keep their device-time stamps (btt's C); open-loop jobs, traces,
applications and the page cache's writeback submit without a CPU cost (their
completions do cost).
"""

from __future__ import annotations

from collections import deque

from blksim.common.config_values import ConfigError

#: mpstat's classes of busy time, in its column order.
CLASSES = ("usr", "sys", "irq", "soft")
_USR, _SYS, _IRQ, _SOFT = range(4)

#: Kernel line -> whether a remote completion of a multi-queue device is counted as
#: softirq (see the module docstring's table): from 5.15 the IPI only raises
#: BLOCK_SOFTIRQ (blk_mq_complete_send_ipi / __blk_mq_complete_request_remote).
_LINES = {"5.4": False, "5.10": False, "5.15": True, "6.1": True, "6.6": True}


# ---------------------------------------------------------------------- the preset
#: The engines' costs, ns per I/O: the engine's and the block layer's (with ``none``
#: and the driver) submission, and the reap. Sources and derivations in docs/cpus.md
#: ("The preset"); in short: Jens Axboe, "Efficient IO with io_uring"
#: (kernel.dk/io_uring.pdf, 2019), per-core 4 KiB random reads: libaio 608K IOPS (QD 128,
#: interrupts) = 1645 ns per I/O, io_uring 1620K IOPS (polled) = 617 ns. blksim's choice
#: of split: 60 % submission, 30 % completion, 10 % reap, by the relative length of the
#: paths. io_uring: 370 + 185 + 62. libaio: 987 + 494 + 164, its completion being the
#: interrupt and the block layer's completion; the polled figure has none, so blksim
#: takes the completion without the interrupt to be io_uring's 185 ns
#: (``complete_ns``) and the interrupt the rest, 494 - 185 = 309 ns (``irq_ns``). The
#: synchronous engines and blksim's default engine take libaio's figures (blksim's
#: choice: the same block path, one system call instead of two).
_LIBAIO = {"submit_ns": 987.0, "reap_ns": 164.0}
ENGINE_COSTS = {
    "io_uring": {"submit_ns": 370.0, "reap_ns": 62.0},
    "libaio": dict(_LIBAIO),
    "psync": dict(_LIBAIO),
    "sync": dict(_LIBAIO),
    "pvsync": dict(_LIBAIO),
    "default": dict(_LIBAIO),
}

#: The schedulers' extra cost over ``none``, ns per request, and whether it takes one
#: queue-wide lock. Documentation/block/bfq-iosched.rst (5.15-6.6): bfq's insert,
#: dispatch and completion hooks take about 1.9 us per request, mq-deadline's 0.7 us
#: (Intel Core i7-2760QM, 2.4 GHz). blksim's choice of split: mq-deadline all at
#: submission (dd_finish_request takes no lock on a non-zoned device: nothing in 5.4 and
#: 5.10, an atomic completion counter per priority from 5.14), bfq two thirds at
#: submission and one third at completion (bfq_completed_request's think-time, budget
#: and weight-raising updates); kyber, for which no figure is published, mq-deadline's
#: 0.7 us by a count of its operations (a list insert, a token taken, a histogram
#: bucket incremented: as many as mq-deadline's tree and FIFO inserts and pick), 0.5 at
#: submission and 0.2 at completion.
SCHEDULER_COSTS = {
    "none": {"submit_ns": 0.0, "complete_ns": 0.0, "lock": False},
    "mq-deadline": {"submit_ns": 700.0, "complete_ns": 0.0, "lock": True},
    "kyber": {"submit_ns": 500.0, "complete_ns": 200.0, "lock": False},
    "bfq": {"submit_ns": 1270.0, "complete_ns": 630.0, "lock": True},
}

#: The preset's other keys: the hard interrupt per request completed, the block
#: layer's completion of a request with ``none`` (``blk_mq_end_request``, the bios'
#: end, the engine's completion event), and the process's own user-space time per I/O
#: (fio's io_u handling), which blksim does not estimate (0: usr_cpu reads 0).
HOST_COSTS = {"irq_ns": 309.0, "complete_ns": 185.0, "usr_ns": 0.0}

COST_KEYS = {
    "irq_ns": "the hard interrupt's cost per request completed, ns (default 309)",
    "complete_ns": "the block layer's completion of a request with none, ns (default 185)",
    "usr_ns": "the process's user-space time per I/O, ns (default 0)",
    "engine": "a table per engine (io_uring, libaio, psync, sync, pvsync, default) of "
              "submit_ns, reap_ns: ns per I/O",
    "scheduler": "a table per scheduler (none, mq-deadline, kyber, bfq, or a plugin's "
                 "name) of submit_ns, complete_ns (ns per request) and lock (true: one "
                 "queue-wide lock)",
}


class CpuCosts:
    """The resolved ``[host] cpu_costs``: the preset with the user's overrides, in
    seconds (`engine`, `scheduler` give one name's figures)."""

    __slots__ = ("irq", "complete", "usr", "engines", "schedulers")

    def __init__(self, irq_ns: float, complete_ns: float, usr_ns: float, engines: dict,
                 schedulers: dict) -> None:
        self.irq = irq_ns * 1e-9
        self.complete = complete_ns * 1e-9
        self.usr = usr_ns * 1e-9
        self.engines = {name: (c["submit_ns"] * 1e-9, c["reap_ns"] * 1e-9)
                        for name, c in engines.items()}
        self.schedulers = {name: (c["submit_ns"] * 1e-9, c["complete_ns"] * 1e-9,
                                  bool(c["lock"])) for name, c in schedulers.items()}

    def engine(self, name: str) -> tuple:
        """(submit, reap) seconds per I/O of engine ``name``."""
        return self.engines.get(name, self.engines["default"])

    def scheduler(self, name: str) -> tuple:
        """(submit, complete, lock) of scheduler ``name`` (a plugin not in the table: no
        cost, no lock)."""
        return self.schedulers.get(name, (0.0, 0.0, False))


def parse_cpu_costs(value, where: str):
    """``[host] cpu_costs``: false (or absent) for none, true for the preset, or a table
    overriding it (`COST_KEYS`). Returns a dict of the resolved figures in ns, or None."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: cpu_costs expected true, false or a table, found "
                          f"{value!r}")
    where = f"{where}.cpu_costs"
    unknown = sorted(set(value) - set(COST_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; valid keys: "
                          f"{', '.join(COST_KEYS)}")
    out = {key: _ns(value, key, where, default) for key, default in HOST_COSTS.items()}
    out["engine"] = _named(value.get("engine", {}), ENGINE_COSTS, f"{where}.engine",
                           ("submit_ns", "reap_ns"), closed=True)
    out["scheduler"] = _named(value.get("scheduler", {}), SCHEDULER_COSTS,
                              f"{where}.scheduler", ("submit_ns", "complete_ns", "lock"),
                              closed=False)
    return out


def _ns(table: dict, key: str, where: str, default: float) -> float:
    x = table.get(key, default)
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1e9:
        raise ConfigError(f"{where}: {key} expected a number of ns from 0 to 10^9, found "
                          f"{x!r}")
    return float(x)


def _named(table, preset: dict, where: str, keys: tuple, closed: bool) -> dict:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table of names, found {table!r}")
    if closed:
        unknown = sorted(set(table) - set(preset))
        if unknown:
            raise ConfigError(f"{where}: unknown engine {unknown[0]!r}; valid: "
                              f"{', '.join(preset)}")
    out = {name: dict(c) for name, c in preset.items()}
    for name, sub in table.items():
        if not isinstance(sub, dict):
            raise ConfigError(f"{where}.{name}: expected a table, found {sub!r}")
        bad = sorted(set(sub) - set(keys))
        if bad:
            raise ConfigError(f"{where}.{name}: unknown key {bad[0]!r}; valid keys: "
                              f"{', '.join(keys)}")
        entry = out.setdefault(name, {k: False if k == "lock" else 0.0 for k in keys})
        for key in keys:
            if key == "lock":
                lock = sub.get(key, entry.get(key, False))
                if not isinstance(lock, bool):
                    raise ConfigError(f"{where}.{name}: lock expected true or false, found "
                                      f"{lock!r}")
                entry[key] = lock
            else:
                entry[key] = _ns(sub, key, f"{where}.{name}", entry.get(key, 0.0))
    return out


def build_costs(resolved: dict) -> CpuCosts:
    """The `CpuCosts` of what `parse_cpu_costs` resolved."""
    return CpuCosts(resolved["irq_ns"], resolved["complete_ns"], resolved["usr_ns"],
                    resolved["engine"], resolved["scheduler"])


# ---------------------------------------------------------------------- CPUs and locks
class SpinLock:
    """A queue-wide scheduler lock: ``free_at`` is when its current holder lets go.
    Acquisitions are decided at the instant a CPU reaches the lock, in the clock's
    order, so it is handed over first come first served (a ticket lock)."""

    __slots__ = ("free_at", "acquired", "contended", "spun")

    def __init__(self) -> None:
        self.free_at = 0.0
        self.acquired = 0       # acquisitions
        self.contended = 0      # of which found it held
        self.spun = 0.0         # seconds spent spinning on it, all CPUs


class Piece:
    """A piece of work: ``segments`` ((cost s, class, lock or None), ...) run in turn;
    ``done()`` when the last ends. ``pid`` is the process it is done for (None: an
    interrupt's)."""

    __slots__ = ("segments", "index", "pid", "done", "start")

    def __init__(self, segments: list, pid, done) -> None:
        self.segments = segments
        self.index = 0
        self.pid = pid
        self.done = done
        self.start = 0.0


class Cpu:
    """One CPU: the piece it runs, those waiting, and its busy seconds per class."""

    __slots__ = ("index", "running", "waiting", "busy", "spin", "t", "record", "at_lock",
                 "at_end")

    def __init__(self, index: int) -> None:
        self.index = index
        self.running = None
        self.waiting = deque()
        self.busy = [0.0, 0.0, 0.0, 0.0]     # usr, sys, irq, soft (spinning included)
        self.spin = 0.0                      # of which spent spinning on a lock
        self.t = 0.0                         # where the running piece has got to
        self.record = None                   # [(start, end)] of each piece, when kept
        self.at_lock = None                  # clock callbacks (set by CpuTime)
        self.at_end = None


class CpuTime:
    """The host's CPUs as servers of work (see the module docstring).

    Built by the host for a multi-queue run with ``[host] cpu_costs``; `attach` gives a
    queue its completion hook (``queue.cpu_time``). Job processes call `syscall` and
    `reap`; the queue calls `completed`. ``record``: keep each CPU's pieces' (start,
    end) (tests)."""

    def __init__(self, clock, cpus: int, costs: CpuCosts, kernel: str,
                 record: bool = False) -> None:
        from blksim.block.mq.versions import variant
        self.clock = clock
        self.costs = costs
        self.cpus = [Cpu(i) for i in range(cpus)]
        for cpu in self.cpus:
            cpu.at_lock = lambda ev, cpu=cpu: self._advance(cpu, ev.when)
            cpu.at_end = lambda ev, cpu=cpu: self._end(cpu, ev.when)
        if record:
            for cpu in self.cpus:
                cpu.record = []
        self.ipi_softirq = _LINES[variant(kernel).kernel]
        self.locks: dict = {}           # disk queue -> SpinLock
        self.affinity: dict = {}        # disk queue -> rq_affinity
        self.multi: dict = {}           # disk queue -> several hardware queues
        self.by_pid: dict = {}          # pid -> [usr s, sys s]
        self.life: dict = {}            # pid -> [its first piece's start, last one's end]
        self.work_done = 0.0            # seconds of cost charged (spinning excluded)
        self.pieces = 0
        # each CPU's (busy by class, spin) when measurement started (ramp_time)
        self._marked = [([0.0, 0.0, 0.0, 0.0], 0.0) for _ in self.cpus]

    def mark(self) -> None:
        """Measurement starts now (ramp_time): `figures` counts the work charged from
        here on."""
        self._marked = [(list(cpu.busy), cpu.spin) for cpu in self.cpus]

    # ------------------------------------------------------------------ wiring
    def attach(self, queue, rq_affinity: int) -> None:
        """Make ``queue`` (an `MqQueue`) hand its completions to this model."""
        queue.cpu_time = self
        self.affinity[queue] = rq_affinity
        self.multi[queue] = len(queue.hw_queue_counts()) > 1
        self.locks[queue] = SpinLock()

    def _disk(self, target):
        """The disk queue below a process's target (a partition's disk), or None (a
        volume, a file: no scheduler cost is charged)."""
        if target in self.locks:
            return target
        disk = getattr(target, "disk", None)
        return disk if disk in self.locks else None

    # ------------------------------------------------------------------ the three pieces
    def syscall(self, pid: int, cpu: int, engine: str, target, ios: int, done) -> None:
        """A system call of process ``pid`` on ``cpu`` submitting ``ios`` I/Os of
        ``engine`` to ``target``; ``done()`` when it has run (then the bios go)."""
        costs = self.costs
        submit = costs.engine(engine)[0]
        disk = self._disk(target)
        sched, lock = 0.0, None
        if disk is not None:
            sched, _complete, locked = costs.scheduler(disk.elevator_name)
            if locked and sched > 0.0:
                lock = self.locks[disk]
        usr = costs.usr
        # (the user-space part of the batch first: the order within one piece changes
        # neither its length nor what each column counts)
        segments = [(usr * ios, _USR, None)] if usr > 0.0 else []
        if lock is None:
            segments.append(((submit + sched) * ios, _SYS, None))
        else:
            segments += [(submit, _SYS, None), (sched, _SYS, lock)] * ios
        self._run(cpu, Piece(segments, pid, done))

    def reap(self, pid: int, cpu: int, engine: str, ios: int, done) -> None:
        """Process ``pid`` on ``cpu`` reaps ``ios`` completions; ``done()`` after."""
        cost = self.costs.engine(engine)[1] * ios
        self._run(cpu, Piece([(cost, _SYS, None)], pid, done))

    def completed(self, queue, requests: list) -> None:
        """One interrupt of ``queue``'s device completed ``requests``: the hard
        interrupt on the CPU its hardware queue's interrupt is affine to, then each
        request's completion where `completion_cpu` says; then each bio's ``end_io``."""
        costs = self.costs
        multi = self.multi[queue]
        _sub, sched, locked = costs.scheduler(queue.elevator_name)
        lock = self.locks[queue] if locked and sched > 0.0 else None
        affinity = self.affinity[queue]
        by_irq: dict = {}
        for rq in requests:
            irq_cpu = rq.hctx.cpus[0] if rq.hctx.cpus else 0
            by_irq.setdefault(irq_cpu, []).append(rq)
        for irq_cpu, rqs in by_irq.items():
            local, remote = [], {}
            for rq in rqs:
                cpu = completion_cpu(affinity, irq_cpu, rq.ctx)
                if cpu == irq_cpu:
                    local.append(rq)
                else:
                    remote.setdefault(cpu, []).append(rq)
            klass = _IRQ if multi else _SOFT
            segments = [(costs.irq * len(rqs), _IRQ, None)]
            if local:
                segments += self._completion(len(local), klass, sched, lock)
            if not remote:
                self._run(irq_cpu, Piece(segments, None, lambda local=local: _end_bios(local)))
                continue

            def after_irq(local=local, remote=remote):
                # the IPIs go out as the interrupt's work ends
                rklass = _SOFT if (not multi or self.ipi_softirq) else _IRQ
                for cpu, rqs in remote.items():
                    self._run(cpu, Piece(self._completion(len(rqs), rklass, sched, lock),
                                         None, lambda rqs=rqs: _end_bios(rqs)))
                _end_bios(local)
            self._run(irq_cpu, Piece(segments, None, after_irq))

    def _completion(self, n: int, klass: int, sched: float, lock) -> list:
        """The segments of the block layer's and the scheduler's completion of ``n``
        requests (the scheduler's each under its lock, if it has one)."""
        complete = self.costs.complete
        if lock is None:
            return [((complete + sched) * n, klass, None)]
        return [(complete, klass, None), (sched, klass, lock)] * n

    # ------------------------------------------------------------------ the CPUs
    def _run(self, index: int, piece: Piece) -> None:
        cpu = self.cpus[index % len(self.cpus)]
        self.pieces += 1
        if cpu.running is None:
            self._start(cpu, piece, self.clock.now)
        else:
            cpu.waiting.append(piece)

    def _start(self, cpu: Cpu, piece: Piece, now: float) -> None:
        cpu.running = piece
        piece.start = now
        pid = piece.pid
        if pid is not None and pid not in self.life:
            self.life[pid] = [now, now]
        cpu.t = now
        self._advance(cpu, now)

    def _advance(self, cpu: Cpu, now: float) -> None:
        """Run the piece's segments from where it stands: on to the next lock (an event
        when the CPU reaches it) or to its end (an event then)."""
        piece = cpu.running
        segments = piece.segments
        t = cpu.t
        busy = cpu.busy
        while piece.index < len(segments):
            cost, klass, lock = segments[piece.index]
            if lock is not None:
                if t > now:
                    cpu.t = t
                    self.clock.call_at(t, cpu.at_lock)
                    return
                lock.acquired += 1
                if lock.free_at > t:            # held: spin until it is let go
                    spin = lock.free_at - t
                    lock.contended += 1
                    lock.spun += spin
                    cpu.spin += spin
                    busy[klass] += spin
                    self._charge_pid(piece.pid, klass, spin)
                    t = lock.free_at
                lock.free_at = t + cost
            t += cost
            busy[klass] += cost
            self.work_done += cost
            self._charge_pid(piece.pid, klass, cost)
            piece.index += 1
        cpu.t = t
        self.clock.call_at(t, cpu.at_end)

    def _charge_pid(self, pid, klass: int, seconds: float) -> None:
        if pid is not None:
            acct = self.by_pid.get(pid)
            if acct is None:
                acct = self.by_pid[pid] = [0.0, 0.0]
            acct[0 if klass == _USR else 1] += seconds

    def _end(self, cpu: Cpu, now: float) -> None:
        piece = cpu.running
        if cpu.record is not None:
            cpu.record.append((piece.start, now))
        cpu.running = None
        if piece.pid is not None:
            self.life[piece.pid][1] = now
        if cpu.waiting:
            self._start(cpu, cpu.waiting.popleft(), now)
        piece.done()

    # ------------------------------------------------------------------ figures
    def figures(self, elapsed: float) -> dict:
        """results.json's ``cpus``: per CPU and for all, as ``mpstat -P ALL`` (per cent
        of ``elapsed``, the measured window: the work charged since `mark`, the reaps of
        the window's last completions included), with the busy and spinning seconds; the
        scheduler locks' contention per disk."""
        def pct(x: float, whole: float) -> float:
            return round(min(100.0, 100.0 * x / whole), 3) if whole > 0 else 0.0

        rows = []
        measured = []
        for cpu, (busy0, spin0) in zip(self.cpus, self._marked):
            classes = [b - b0 for b, b0 in zip(cpu.busy, busy0)]
            spin = cpu.spin - spin0
            busy = sum(classes)
            if busy > elapsed > 0:
                # work charged after the window's end (the last reaps): the window
                # holds only `elapsed` of it, shared in the same proportions
                classes = [x * elapsed / busy for x in classes]
                busy = elapsed
            measured.append((classes, spin))
            row = {"cpu": cpu.index}
            for name, x in zip(CLASSES, classes):
                row[f"{name}_pct"] = pct(x, elapsed)
            row["idle_pct"] = round(max(0.0, 100.0 - pct(busy, elapsed)), 3)
            row["busy_s"] = round(busy, 9)
            row["spin_s"] = round(spin, 9)
            rows.append(row)
        n = len(self.cpus)
        total = {"cpu": "all"}
        for k, name in enumerate(CLASSES):
            total[f"{name}_pct"] = pct(sum(c[k] for c, _ in measured), elapsed * n)
        total["idle_pct"] = round(max(0.0, 100.0 - sum(total[f"{c}_pct"] for c in CLASSES)), 3)
        total["busy_s"] = round(sum(sum(c) for c, _ in measured), 9)
        total["spin_s"] = round(sum(s for _, s in measured), 9)
        locks = {q.name: {"acquisitions": lk.acquired, "contended": lk.contended,
                          "spin_s": round(lk.spun, 9)}
                 for q, lk in self.locks.items() if lk.acquired}
        return {"elapsed_s": round(elapsed, 9), "per_cpu": rows, "all": total,
                "scheduler_locks": locks}

    def process_figures(self, pid: int) -> dict:
        """fio's ``usr_cpu`` and ``sys_cpu`` of process ``pid``: per cent of its run
        time (fio's: the thread's), from the start of its first system call to the end
        of its last."""
        usr, sys_ = self.by_pid.get(pid, (0.0, 0.0))
        first, last = self.life.get(pid, (0.0, 0.0))
        elapsed = last - first
        if elapsed <= 0:
            return {"usr_cpu_pct": 0.0, "sys_cpu_pct": 0.0}
        return {"usr_cpu_pct": round(100.0 * usr / elapsed, 3),
                "sys_cpu_pct": round(100.0 * sys_ / elapsed, 3)}


def completion_cpu(rq_affinity: int, irq_cpu: int, submit_cpu: int) -> int:
    """The CPU a request completes on (``blk_mq_complete_need_ipi``, block/blk-mq.c,
    5.10-6.6; ``__blk_mq_complete_request`` 5.4): the submitting CPU with
    ``rq_affinity`` 2 (QUEUE_FLAG_SAME_FORCE); with 1 (SAME_COMP) only if it shares no
    cache with the interrupted CPU, which blksim's CPUs all share; else where the
    interrupt lands."""
    if rq_affinity == 2:
        return submit_cpu
    return irq_cpu


def _end_bios(rqs: list) -> None:
    for rq in rqs:
        for bio in rq.bios:
            end_io = bio.on_complete
            if end_io is not None:
                end_io(bio)

