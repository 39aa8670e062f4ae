"""I/O pressure stall information (PSI) as the kernel computes it: ``io.pressure`` per
cgroup and ``/proc/pressure/io`` for the system (kernel/sched/psi.c, Linux 4.20-6.6).

**Task states.** Each task is idle (sleeping, thinking), running (on a CPU or runnable:
``NR_RUNNING``) or in iowait (asleep in ``io_schedule``, waiting for I/O it needs:
``NR_IOWAIT``). A group counts, per CPU, its tasks in each state, its descendants' included
(``psi_task_change`` changes the counts of the task's group and of every ancestor up to
the root, whose group is the system's, ``psi_system``). Which states hold on a CPU follows
``test_state``: ``some`` while at least one task is in iowait (PSI_IO_SOME), ``full`` while
one is in iowait and none is running (PSI_IO_FULL), ``nonidle`` while any task is in
either. ``record_times`` adds the time since the last change to each state that held.

**Totals and averages.** Every ``psi_period`` (``PSI_FREQ`` = 2 HZ + 1 jiffies: 2 s and
one tick) the aggregator (``psi_avgs_work``) folds the per-CPU times into the group's
(``collect_percpu_times``): each CPU's stall time weighted by its non-idle time in
jiffies (``nsecs_to_jiffies``), ``total += sum(stall * nonidle) / max(sum(nonidle), 1)``;
then ``update_averages``: the period's sample is the growth of ``total`` (at most the
period), its percentage ``pct = sample * 100 / period`` (integer) in fixed point
(``FIXED_1`` = 2048, ``FSHIFT`` = 11), and each average decays as the load average does
(``calc_load``: ``new = (old * e + pct * (2048 - e) [+ 2047 when pct >= old]) / 2048``)
with ``e`` = 1677, 1981, 2034 for 10 s, 60 s and 300 s (EXP_10s, EXP_60s, EXP_300s: 2048 /
exp(2 s / window)). ``psi_show`` prints ``LOAD_INT.LOAD_FRAC`` of each average and
``total`` in µs.

blksim's simplifications (docs/cgroups.md): the aggregator runs every period from time 0
whether or not the group was active (the kernel stops it while a group is idle and
catches the missed periods up with ``calc_load_n``, which rounds once instead of once
per period); it runs lazily, when a group's task changes state or when the figures are
read, at the period boundaries it passed (its states are constant in between, so the
figures are the same as a timer's, at no event's cost).
"""

from __future__ import annotations

IDLE, IOWAIT, RUNNING = 0, 1, 2
#: 2048 / exp(2 s / 10 s, 60 s, 300 s), the kernel's fixed-point decays (psi.c)
EXP = (1677, 1981, 2034)
FSHIFT = 11
FIXED_1 = 1 << FSHIFT
SOME, FULL, NONIDLE = 0, 1, 2


def calc_load(load: int, exp: int, active: int) -> int:
    """One step of the fixed-point decaying average (``calc_load``,
    include/linux/sched/loadavg.h, 4.20-6.6: rounded up when the load grows)."""
    new = load * exp + active * (FIXED_1 - exp)
    if active >= load:
        new += FIXED_1 - 1
    return new // FIXED_1


def avg_text(avg: int) -> str:
    """An average as psi_show prints it: ``LOAD_INT.LOAD_FRAC`` (two decimals)."""
    return f"{avg >> FSHIFT}.{((avg & (FIXED_1 - 1)) * 100) >> FSHIFT:02d}"


class _PsiCpu:
    """One group's tasks and state times on one CPU (``struct psi_group_cpu``)."""

    __slots__ = ("iowait", "running", "mask", "start", "times", "prev")

    def __init__(self, now: int) -> None:
        self.iowait = 0
        self.running = 0
        self.mask = 0                 # bit SOME, FULL, NONIDLE
        self.start = now              # when the current states began (ns)
        self.times = [0, 0, 0]        # ns each state held, up to ``start``
        self.prev = [0, 0, 0]         # ``times`` (with the active part) at the last fold

    def change(self, d_iowait: int, d_running: int, now: int) -> None:
        """``psi_group_change``: record the time in the states that held, change the
        counts, and work out which states hold now (``test_state``)."""
        delta = now - self.start
        self.start = now
        mask = self.mask
        if mask:
            times = self.times
            if mask & 1:
                times[SOME] += delta
            if mask & 2:
                times[FULL] += delta
            if mask & 4:
                times[NONIDLE] += delta
        self.iowait += d_iowait
        self.running += d_running
        iowait, running = self.iowait, self.running
        self.mask = ((1 if iowait else 0) | (2 if iowait and not running else 0)
                     | (4 if iowait or running else 0))

    def recent(self, now: int) -> list:
        """``get_recent_times``: each state's time since the last fold, the state that
        holds now counted up to ``now``."""
        out = []
        for s in (SOME, FULL, NONIDLE):
            t = self.times[s] + (now - self.start if self.mask & (1 << s) else 0)
            out.append(t - self.prev[s])
            self.prev[s] = t
        return out


class PsiGroup:
    """One group's io pressure (``struct psi_group``, its io states): per-CPU records,
    ``total`` (ns of some, full) and the three averages of each (fixed point)."""

    __slots__ = ("cpus", "total", "avg_total", "avg", "last_update", "next_update",
                 "period", "ns_per_jiffy")

    def __init__(self, hz: int, now: int = 0) -> None:
        self.ns_per_jiffy = 1_000_000_000 // hz
        self.period = (2 * hz + 1) * self.ns_per_jiffy      # jiffies_to_nsecs(PSI_FREQ)
        self.cpus: dict = {}
        self.total = [0, 0]
        self.avg_total = [0, 0]
        self.avg = [[0, 0, 0], [0, 0, 0]]
        self.last_update = now
        self.next_update = now + self.period

    def change(self, cpu: int, d_iowait: int, d_running: int, now: int) -> None:
        """A task on ``cpu`` changed state at ``now`` (ns): the counts move by the deltas."""
        if now >= self.next_update:
            self.advance(now)
        rec = self.cpus.get(cpu)
        if rec is None:
            rec = self.cpus[cpu] = _PsiCpu(now)
        rec.change(d_iowait, d_running, now)

    def advance(self, now: int) -> None:
        """Run the aggregator at every period boundary up to ``now`` (ns)."""
        while self.next_update <= now:
            t = self.next_update
            self._collect(t)
            self._update_averages(t)

    def _collect(self, now: int) -> None:
        """``collect_percpu_times``: fold the CPUs' recent times into ``total``."""
        deltas = [0, 0]
        nonidle_total = 0
        for rec in self.cpus.values():
            some, full, nonidle_ns = rec.recent(now)
            nonidle = nonidle_ns // self.ns_per_jiffy            # nsecs_to_jiffies
            nonidle_total += nonidle
            deltas[SOME] += some * nonidle
            deltas[FULL] += full * nonidle
        div = max(nonidle_total, 1)
        self.total[SOME] += deltas[SOME] // div
        self.total[FULL] += deltas[FULL] // div

    def _update_averages(self, now: int) -> None:
        """``update_averages`` at a period boundary (no missed periods: see the module
        docstring)."""
        period = now - self.last_update
        self.last_update = now
        self.next_update = now + self.period
        for s in (SOME, FULL):
            sample = self.total[s] - self.avg_total[s]
            if sample > period:
                sample = period
            self.avg_total[s] += sample
            pct = sample * 100 // period * FIXED_1
            avg = self.avg[s]
            for i, e in enumerate(EXP):
                avg[i] = calc_load(avg[i], e, pct)

    def figures(self, now: int) -> dict:
        """io.pressure at ``now`` (ns), as ``psi_show`` reads it: the averages (percent,
        two decimals) and the totals (µs) of ``some`` and ``full``."""
        self.advance(now)
        self._collect(now)
        out = {}
        for s, name in ((SOME, "some"), (FULL, "full")):
            avg = self.avg[s]
            out[name] = {"avg10": float(avg_text(avg[0])), "avg60": float(avg_text(avg[1])),
                         "avg300": float(avg_text(avg[2])), "total_us": self.total[s] // 1000}
        return out


class Pressure:
    """The io pressure of a run's groups (`blksim.block.cgroup.CgroupTree`): each
    process's state, and a `PsiGroup` per group (``groups``: `Cgroup` -> `PsiGroup`; the
    root's is the system's, /proc/pressure/io)."""

    def __init__(self, tree, hz: int) -> None:
        self.tree = tree
        self.groups = {g: PsiGroup(hz) for g in tree.groups.values()}
        self.state: dict = {}             # pid -> (state, cpu)

    def set(self, pid: int, cpu: int, state: int, now: float) -> None:
        """Process ``pid`` on ``cpu`` is now ``state`` (IDLE, IOWAIT, RUNNING) at ``now``
        (s): its group's and every ancestor's counts change (``psi_task_change``)."""
        old = self.state.get(pid)
        if old is not None and old[0] == state and old[1] == cpu:
            return
        tree = self.tree
        if now >= tree.next_mark:        # cgroups.csv's samples before the change
            tree.passed(now)
        ns = round(now * 1e9)
        group = tree.of_pid.get(pid, tree.root)
        if old is not None and old[0] != IDLE:
            self._move(group, old[1], -(old[0] == IOWAIT), -(old[0] == RUNNING), ns)
        if state != IDLE:
            self._move(group, cpu, int(state == IOWAIT), int(state == RUNNING), ns)
        self.state[pid] = (state, cpu)

    def _move(self, group, cpu: int, d_iowait: int, d_running: int, ns: int) -> None:
        while group is not None:
            self.groups[group].change(cpu, d_iowait, d_running, ns)
            group = group.parent

    def figures(self, group, now: float) -> dict:
        """``group``'s io.pressure at ``now`` (s): see `PsiGroup.figures`."""
        return self.groups[group].figures(round(now * 1e9))
