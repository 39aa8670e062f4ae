"""Where a synthetic job's next I/O goes, and when an open-loop job's next I/O arrives.

``IoPattern`` is the per-I/O path of a synthetic workload, so it is plain
Python arithmetic on precomputed tables: no numpy here. Randomness comes from
a ``random.Random`` the caller supplies; ``make_rngs`` derives independent ones
from a run's seed with ``numpy.random.SeedSequence`` (one seed per run, a child
generator per component: docs/architecture.md, "Conventions").
"""

from __future__ import annotations

import random
from bisect import bisect_right
from math import log

import numpy as np

from blksim.traces.jobs import JobSpec


def make_rngs(seed: int, n: int) -> list[random.Random]:
    """``n`` independent ``random.Random`` generators derived from ``seed``.

    Child ``i`` is seeded from ``SeedSequence(seed).spawn(n)[i]``, so the same
    seed always gives the same generators, and child ``i`` does not depend on
    ``n``.
    """
    children = np.random.SeedSequence(seed).spawn(n)
    return [random.Random(int.from_bytes(child.generate_state(4).tobytes(), "little"))
            for child in children]


class IoPattern:
    """The sequence of I/Os of one clone (process) of a ``JobSpec``.

    ``next_io()`` returns ``(sector, nr_sectors, op)``, ``op`` being the bio's
    operation (`blksim.block.request`'s ``REQ_OP_READ`` 0, ``REQ_OP_WRITE`` 1 or
    ``REQ_OP_DISCARD`` 3: true for a write or a discard). Sequential jobs
    continue where the previous I/O of the same direction ended (fio keeps one
    position per direction, a trim's too) and wrap to the region's start when the next block
    would cross its end. Random jobs draw uniformly, with replacement, among the
    blockalign-aligned offsets of the region (measured from its start) at which
    the block fits: uniformly, or as ``random_distribution`` says (zipf, pareto,
    normal, zoned: `traces.distributions`). Draws per I/O, in order: direction
    (mixed jobs only), block size (bssplit with more than one entry only), offset
    (random jobs only; a skewed distribution may draw more than once).
    With ``bs=R,W`` writes have their own block size. A trim job (fio's ``trim``,
    ``randtrim``) discards; ``trimwrite`` and ``randtrimwrite`` discard a block and
    then write the same block (fio's ``get_rw_ddir``: a trim when the write position
    has caught up with the trim position, else the write).
    """

    __slots__ = ("_random", "_read_pct", "_cum", "_total", "_sizes", "_slots",
                 "_start", "_end", "_align", "_seq", "_pos", "_fixed_write",
                 "_rate", "_poisson", "_choose", "_write_size", "_write_choose",
                 "_rate_bytes", "_last_bytes", "_trim", "_then_write")

    def __init__(self, job: JobSpec, clone_index: int, rng: random.Random) -> None:
        start, nr = job.region_sectors(clone_index)
        sizes = job.bs_sectors
        align = job.blockalign_sectors
        if nr < max(sizes):
            raise ValueError(f"job {job.name!r}: clone {clone_index}'s region ({nr} sectors) "
                             f"is smaller than its largest block ({max(sizes)} sectors)")
        self._random = rng.random
        self._start = start
        self._end = start + nr
        self._align = align
        self._sizes = sizes
        # Number of aligned offsets at which each block size still fits in the region.
        self._slots = tuple((nr - size) // align + 1 for size in sizes)
        cum, total = [], 0.0
        for _, pct in job.bssplit:
            total += pct
            cum.append(total)
        self._cum = cum
        self._total = total
        self._seq = not job.random
        self._pos = [start, start, start, start]   # next sequential sector per op
        fraction = job.read_fraction
        self._read_pct = fraction
        self._fixed_write = None if 0.0 < fraction < 1.0 else int(fraction == 0.0)
        # 0: no trims; 3: every I/O a discard; 1: a discard, then a write of its block
        self._trim = 0 if not job.trims else (1 if job.rw.endswith("write") else 3)
        self._then_write = None                   # (sector, size) a trimwrite writes next
        if self._trim:
            self._fixed_write = 3
        self._rate = job.rate_iops
        self._poisson = job.rate_process == "poisson"
        self._rate_bytes = job.rate_bytes
        self._last_bytes = 0
        from blksim.traces.distributions import slot_chooser
        dist = job.random_distribution
        self._choose = None if dist[0] == "random" else \
            [slot_chooser(dist, n) for n in self._slots]
        self._write_size = None
        if job.write_bs:
            size = job.write_bs // 512
            if nr < size:
                raise ValueError(f"job {job.name!r}: clone {clone_index}'s region ({nr} "
                                 f"sectors) is smaller than its write block ({size} sectors)")
            self._write_size = (size, (nr - size) // align + 1)
            self._write_choose = slot_chooser(dist, self._write_size[1])

    def next_io(self) -> tuple[int, int, int]:
        """The next I/O: (first sector, number of sectors, op: 0 read, 1 write, 3 discard)."""
        if self._then_write is not None:
            sector, size = self._then_write
            self._then_write = None
            return sector, size, 1
        rand = self._random
        write = self._fixed_write
        if write is None:
            write = int(rand() >= self._read_pct)
        if write and self._write_size is not None:
            size, slots = self._write_size
            choose = self._write_choose
        else:
            if len(self._sizes) == 1:
                index = 0
            else:
                index = bisect_right(self._cum, rand() * self._total)
                if index == len(self._sizes):   # rand() * total rounded up to total
                    index -= 1
            size = self._sizes[index]
            slots = self._slots[index]
            choose = self._choose[index] if self._choose is not None else None
        self._last_bytes = size * 512
        if self._seq:
            sector = self._pos[write]
            if sector + size > self._end:
                sector = self._start
            self._pos[write] = sector + size
        elif choose is None:
            sector = self._start + int(rand() * slots) * self._align
        else:
            sector = self._start + choose(rand) * self._align
        if self._trim == 1:
            self._then_write = (sector, size)
        return sector, size, write

    def next_interarrival(self) -> float:
        """Seconds from this arrival to the next, for a job with ``rate_iops`` or ``rate``.

        Exponential with mean 1/rate_iops for rate_process "poisson", exactly
        1/rate_iops for "linear"; with ``rate`` (bytes/s), the I/O just drawn's bytes
        over the rate, as the mean or exactly.
        """
        rate = self._rate
        if self._rate_bytes is not None:
            rate = self._rate_bytes / self._last_bytes if self._last_bytes else None
        if rate is None:
            raise ValueError("next_interarrival() needs a job with rate_iops or rate, "
                             "after next_io()")
        if self._poisson:
            # 1 - random() lies in (0, 1], so the logarithm is finite.
            return -log(1.0 - self._random()) / rate
        return 1.0 / rate
