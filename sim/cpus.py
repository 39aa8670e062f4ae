"""The host's CPUs and where each process runs: ``[host] cpus``, fio's ``cpus_allowed`` and
``cpus_allowed_policy``, and the CPU a replayed trace recorded.

Every bio a process submits carries the process's CPU (``Bio.cpu``): the multi-queue
layer queues it on that CPU's software queue (``blk_mq_ctx``), which maps to a hardware
queue. blksim models where a process runs, not what running costs (no CPU time yet).

**Placement** (`CpuPlacer`), in the order the run starts its processes (jobs in the order
of the configuration, each job's clones in turn, then the traces' processes as they
first appear):

- ``cpus_allowed_policy = "split"`` (fio, backend.c ``thread_main`` with
  ``fio_cpus_split``, options.c): the process with fio's thread number *n* (1, 2, ...
  over every job and clone of the run, in order) runs on CPU number ``(n - 1) mod k``
  of its ``cpus_allowed`` list of *k* CPUs, counted from the list's lowest.
- Otherwise (``shared``, fio's default, or no ``cpus_allowed``: every CPU of the host),
  the kernel places it: a new task goes to the idlest allowed CPU
  (``select_task_rq_fair`` with ``SD_BALANCE_FORK``, ``find_idlest_cpu``,
  kernel/sched/fair.c, 5.4-6.6), and the periodic load balancer keeps the running
  tasks spread over the CPUs they may use. blksim places it, once, on the allowed CPU
  that holds the fewest processes placed so far, the lowest-numbered one among equals.
  Simplifications: load is the count of processes (an I/O-bound process sleeps much of
  the time, which the kernel's load average would weigh less), ties go to the lowest
  number (the kernel prefers the idle CPU in the shallowest idle state, then the one
  idle the longest), and a process never migrates afterwards.
- A replayed trace's process runs on the CPU its records carry (blktrace records the
  CPU of every event), folded onto the host's as ``cpu mod cpus`` when the trace was
  captured on a larger machine; without one it is placed as above.
"""

from __future__ import annotations

#: blksim's default ``[host] cpus``: a small server or a desktop of today. A host with
#: fewer CPUs than a device has hardware queues leaves queues unused (1.2 of the
#: multi-queue notes: one software queue per CPU).
DEFAULT_CPUS = 4

#: The most CPUs blksim models (the kernel's NR_CPUS of a distribution kernel is 8192;
#: blksim's bound keeps a typo from making a host of millions of CPUs).
MAX_CPUS = 4096


class CpuPlacer:
    """Places a run's processes on the host's ``cpus`` CPUs (see the module docstring)."""

    __slots__ = ("cpus", "load", "threads")

    def __init__(self, cpus: int = DEFAULT_CPUS) -> None:
        if not 1 <= cpus <= MAX_CPUS:
            raise ValueError(f"cpus: expected 1 to {MAX_CPUS}, found {cpus!r}")
        self.cpus = cpus
        self.load = [0] * cpus      # processes placed on each CPU
        self.threads = 0            # fio's thread number of the last job process placed

    def place_job(self, allowed: tuple | None, policy: str = "shared") -> int:
        """The CPU of the next job process (a clone of a job: fio's next thread)."""
        self.threads += 1
        if policy == "split" and allowed:
            cpu = allowed[(self.threads - 1) % len(allowed)]
            self.load[cpu] += 1
            return cpu
        return self.place(allowed)

    def place(self, allowed: tuple | None = None) -> int:
        """The CPU the kernel gives a new process that may run on ``allowed`` (None: any):
        the least loaded, the lowest-numbered among equals."""
        load = self.load
        candidates = range(self.cpus) if allowed is None else allowed
        cpu = min(candidates, key=load.__getitem__)
        load[cpu] += 1
        return cpu

    def recorded(self, cpu: int) -> int:
        """The host CPU of a traced process that ran on ``cpu`` when it was recorded."""
        cpu %= self.cpus
        self.load[cpu] += 1
        return cpu
