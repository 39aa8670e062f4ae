"""Which hardware queue each CPU's software queue feeds (``blk_mq_map_queues``).

The generic map of a driver without interrupt-affinity information
(block/blk-mq-cpumap.c):

* **5.4 to 6.1**: the first ``nr_queues`` CPUs get queues 0, 1, 2, ... in order;
  every further CPU takes the next queue round the ring (the kernel first gives the
  second thread of a core its sibling's queue: blksim's CPUs have no SMT siblings).
* **6.6**: ``group_cpus_evenly``: the CPUs are cut into ``nr_queues`` groups of
  consecutive CPUs, as even as can be (the first ``ncpus % nr_queues`` groups one CPU
  larger), and every CPU of group ``g`` maps to queue ``g`` (blksim's CPUs are one
  NUMA node).

With one hardware queue every CPU maps to it; with as many queues as CPUs each CPU
has its own. An NVMe driver builds its map from its interrupts' affinity, which for
one node gives the same grouping.
"""

from __future__ import annotations


def map_queues(nr_cpus: int, nr_queues: int, groups: bool) -> tuple:
    """The hardware queue of each CPU 0..nr_cpus-1 (``groups``: 6.6's even groups)."""
    if nr_cpus < 1 or nr_queues < 1:
        raise ValueError(f"need at least one CPU and one queue, got {nr_cpus} CPUs and "
                         f"{nr_queues} queues")
    if not groups:
        return tuple(cpu % nr_queues for cpu in range(nr_cpus))
    if nr_queues >= nr_cpus:
        return tuple(range(nr_cpus))
    size, larger = divmod(nr_cpus, nr_queues)
    out = []
    for group in range(nr_queues):
        out.extend([group] * (size + (1 if group < larger else 0)))
    return tuple(out)
