"""A page-mapping flash translation layer: where each logical page lives, no timing.

Every logical page (lpn, ``page_bytes`` of the user's space) maps to one physical
page (ppn, `blksim.disk_models.flash.geometry` numbering) or to nothing (never
written, or trimmed). Flash pages are programmed once between erases, in order
within a block, so a write never updates in place:

1. the write goes to a plane: under ``cwdp`` allocation a function of the lpn
   (`FlashGeometry.cwdp_planes`, MQSim's default static allocation), under
   ``dynamic`` allocation the next plane in CWDP order, round robin by write order,
   skipping a plane that holds all the valid data it may (see "Space" below);
2. the old copy, if any, becomes invalid;
3. the data goes to the next free page of the plane's open block: the open SLC
   block while the SLC cache has room, else the open TLC block; a full block is
   closed and the next one taken from the plane's pool of erased blocks.

Garbage collection (`collect`, rules in `blksim.disk_models.flash.gc_policy`)
chooses a closed victim, copies its valid pages to the plane's collector block (a
separate open block, as MQSim keeps separate write frontiers for user and GC data,
``src/ssd/Flash_Block_Manager_Base.h``), updates the map at once and leaves the
victim "erasing" until the timing side says the erase is over (`erase_done`).
Copies stay in the victim's plane so that a drive may use copyback.

The SLC cache (blksim's choice, the simplest static form of the caches consumer TLC
drives describe): the last ``slc_cache_blocks_per_plane`` blocks of every plane are
SLC blocks holding ``slc_pages_per_block`` pages each (a third of a TLC block by
default: one bit per cell instead of three). Host writes fill them first; when none
is left, writes go straight to TLC. `fold` (when idle) copies an SLC block's valid
data into TLC and erases it, which gives it back to the cache.

Space. Host writes never take a plane's last free TLC block (it is held for the
collector), and a plane never holds more valid pages than ``(TLC blocks -
foreground threshold - 3) x pages_per_block``, checked when the FTL is built, so a
closed block with an invalid page always exists. If the host needs a block and the
pool has fewer than two (the timing side fell behind), `write` reclaims space itself
(an *emergency*): it collects a block in place (greedy's victim, erased first and
its valid pages copied back out of the controller's buffer, so no free block is
needed), or, when no closed block has an invalid page, finishes one of the plane's
pending erases at once (the timing side's `erase_done` for it is then absorbed). Emergencies are counted and their jobs kept in
`emergency_jobs` for the timing side; with the thresholds kept they do not happen.

State: the two maps, 4 bytes a page (`blksim.disk_models.flash.unitmap`: chunks of
`array.array`, made when first written, so that a fresh drive costs next to
nothing and a run pays for the parts of the drive it writes; a preconditioned
drive's chunks not yet written read the start layout,
`blksim.disk_models.flash.startlayout`), and per-block Python
lists (valid pages, erase count, write pointer, state, age, SLC flag, capacity:
about 60 bytes a block on PyPy, 16 MB for a 1 TB drive of 262,144 blocks).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash import gc_policy as gcp
from blksim.disk_models.flash.geometry import FlashGeometry
from blksim.disk_models.flash.unitmap import MASK, SHIFT, UnitMap

ALLOCATIONS = ("cwdp", "dynamic")
#: The age stamp of a block with no data yet: older than any (preconditioned data
#: carries negative stamps).
_NO_DATA = -(1 << 62)
#: Write frontiers (open blocks) per plane: host data in TLC, collector copies, SLC.
HOST, GC, SLC = 0, 1, 2


class GcJob:
    """One collection (or fold) for the timing side to time: read and program each
    page of ``moved`` (``(old_ppn, new_ppn)`` pairs, same plane), then erase
    ``victim``. ``slc``: the victim was an SLC block (folding). ``emergency``: run by
    `write` itself, with the erase already done (do not call `erase_done`)."""

    __slots__ = ("victim", "moved", "slc", "emergency")

    def __init__(self, victim: int, moved: list, slc: bool, emergency: bool = False):
        self.victim = victim
        self.moved = moved
        self.slc = slc
        self.emergency = emergency

    def __repr__(self) -> str:
        return (f"GcJob(victim={self.victim}, moved={len(self.moved)}, slc={self.slc}, "
                f"emergency={self.emergency})")


class PageMappingFtl:
    """The page-mapping FTL of a flash drive (module docstring: the rules).

    ``logical_pages`` comes from `blksim.disk_models.flash.geometry.logical_pages`.
    ``gc_threshold``/``gc_background_threshold``: fractions of a plane's blocks
    (`gc_policy.thresholds`); ``wear_limit``: the erase-count spread that triggers
    static wear levelling (None: off). ``seed`` seeds the preconditioning.
    """

    def __init__(self, geometry: FlashGeometry, logical_pages: int, *, allocation: str = "cwdp",
                 gc_policy: str = "greedy", gc_threshold: float = gcp.DEFAULT_GC_THRESHOLD,
                 gc_background_threshold: float | None = None,
                 slc_cache_blocks_per_plane: int = 0, slc_pages_per_block: int | None = None,
                 wear_limit: int | None = None, seed: int = 0, where: str = "flash FTL") -> None:
        geometry.validate(where)
        g = self.geometry = geometry
        if allocation not in ALLOCATIONS:
            raise DeviceError(f"{where}: allocation {allocation!r} is not supported; valid: "
                              f"{', '.join(ALLOCATIONS)}")
        self.allocation = allocation
        self.gc_policy = gcp.check_policy(gc_policy, where)
        self.seed = seed
        if wear_limit is not None and (not isinstance(wear_limit, int) or wear_limit < 1):
            raise DeviceError(f"{where}: wear_limit must be a positive number of erases, "
                              f"found {wear_limit!r}")
        self.wear_limit = wear_limit
        ppb = self.pages_per_block = g.pages_per_block
        bpp = g.blocks_per_plane
        self.planes = g.planes
        self.fg_threshold, self.bg_threshold = gcp.thresholds(
            bpp, gc_threshold, gc_background_threshold, where)
        slc = slc_cache_blocks_per_plane
        if not isinstance(slc, int) or slc < 0 or bpp - slc < self.fg_threshold + 4:
            raise DeviceError(f"{where}: slc_cache_blocks_per_plane must be an integer from 0 "
                              f"to {bpp - self.fg_threshold - 4}, found {slc!r}")
        self.slc_blocks_per_plane = slc
        if slc_pages_per_block is None:
            slc_pages_per_block = max(1, ppb // 3)
        if not 1 <= slc_pages_per_block <= ppb:
            raise DeviceError(f"{where}: slc_pages_per_block must be from 1 to {ppb}, "
                              f"found {slc_pages_per_block!r}")
        self.slc_pages_per_block = slc_pages_per_block
        self.tlc_blocks_per_plane = bpp - slc

        # -- logical space and where it goes ----------------------------------------
        if not isinstance(logical_pages, int) or logical_pages < 1:
            raise DeviceError(f"{where}: logical pages must be a positive integer, "
                              f"found {logical_pages!r}")
        self.logical_pages = logical_pages
        self.cwdp = g.cwdp_planes()
        self.cwdp_position = [0] * self.planes    # plane -> its place in CWDP order
        for i, p in enumerate(self.cwdp):
            self.cwdp_position[p] = i
        # the most valid pages a plane may hold (module docstring, "Space")
        self.plane_limit = (self.tlc_blocks_per_plane - self.fg_threshold - 3) * ppb
        busiest = -(-logical_pages // self.planes)
        if busiest > self.plane_limit:
            raise DeviceError(
                f"{where}: over_provisioning too small: {busiest} logical pages per plane "
                f"do not fit in {self.plane_limit} (the TLC blocks less the collector's "
                f"free-block threshold {self.fg_threshold} and 3 open blocks, times "
                f"{ppb} pages); raise over_provisioning or lower "
                f"slc_cache_blocks_per_plane or gc_threshold")

        # -- the maps -----------------------------------------------------------------
        # l2p: lpn -> ppn, p2l: ppn -> lpn; -1 for none. The hot paths index their
        # chunk lists (_l2p, _p2l) directly (unitmap's module docstring)
        self.l2p = UnitMap(logical_pages, g.pages)
        self.p2l = UnitMap(g.pages, g.pages)
        self._l2p, self._p2l = self.l2p.chunks, self.p2l.chunks
        self._l2p_empty, self._p2l_empty = self.l2p.empty, self.p2l.empty

        # -- per block ------------------------------------------------------------------
        nb = g.blocks
        self.valid = [0] * nb
        self.erase_count = [0] * nb
        self.wp = [0] * nb                       # next page to program
        self.state = [gcp.FREE] * nb
        self.written_at = [0] * nb               # host-page clock of its youngest data
        self.slc_flag = [0] * nb
        self.cap = [ppb] * nb                    # pages the block holds in its mode
        self.free_pool = [deque() for _ in range(self.planes)]
        self.slc_pool = [deque() for _ in range(self.planes)]
        self.erasing = [set() for _ in range(self.planes)]
        self.erased_early: set = set()            # pending erases an emergency finished
        for p in range(self.planes):
            first = g.first_block_of_plane(p)
            for b in range(first, first + self.tlc_blocks_per_plane):
                self.free_pool[p].append(b)
            for b in range(first + self.tlc_blocks_per_plane, first + bpp):
                self.slc_flag[b] = 1
                self.cap[b] = slc_pages_per_block
                self.slc_pool[p].append(b)
        self.open = [[-1] * self.planes for _ in range(3)]
        self.plane_valid = [0] * self.planes
        self.rr = 0                               # dynamic allocation: next CWDP index

        # -- figures --------------------------------------------------------------------
        self.host_pages_written = 0
        self.gc_pages_written = 0                 # every relocation, folding included
        self.fold_pages_written = 0
        self.slc_pages_written = 0                # host pages that went to SLC
        self.erases = 0                           # erases completed
        self.gc_runs = 0
        self.fold_runs = 0
        self.trimmed_pages = 0
        self.emergencies = 0
        self.emergency_jobs: list[GcJob] = []
        self.start_state = "fresh"

    # -- looking up --------------------------------------------------------------------
    def lookup(self, lpn: int) -> int:
        """The physical page holding ``lpn``, or -1 if it was never written or was trimmed."""
        chunk = self._l2p[lpn >> SHIFT]
        if chunk is self._l2p_empty:                 # unchanged since the start
            return self.l2p.base(lpn)
        return chunk[lpn & MASK]

    def is_slc(self, block: int) -> bool:
        """Whether ``block`` is in SLC mode (the timing side uses SLC read/program times)."""
        return self.slc_flag[block] == 1

    def plane_for_write(self, lpn: int) -> int:
        """The plane the next write of ``lpn`` goes to (see `write`); no state changes."""
        if self.allocation == "cwdp":
            return self.cwdp[lpn % self.planes]
        planes = self.planes
        i = self.rr
        for _ in range(planes):
            p = self.cwdp[i]
            if self.plane_valid[p] < self.plane_limit:
                return p
            i = (i + 1) % planes
        raise AssertionError("no plane has room: the construction check failed")

    # -- writing -------------------------------------------------------------------------
    def write(self, lpn: int, now: float = 0.0) -> int:
        """Map ``lpn`` to a fresh page of `plane_for_write`'s plane and invalidate its old
        copy; returns the new ppn. Never fails (module docstring, "Space"). ``now`` is
        taken for the timing side's sake: ages count host pages written, not seconds."""
        plane = self.plane_for_write(lpn)
        if self.allocation == "dynamic":
            self.rr = (self.cwdp_position[plane] + 1) % self.planes
        chunk = self._l2p[lpn >> SHIFT]
        if chunk is self._l2p_empty:
            chunk = self.l2p.own(lpn >> SHIFT)
        old = chunk[lpn & MASK]
        if old >= 0:
            self._drop(old)
        ppn = -1
        if self.slc_blocks_per_plane:
            ppn = self._append(SLC, plane)
            if ppn >= 0:
                self.slc_pages_written += 1
        if ppn < 0:
            ppn = self._append(HOST, plane)
        self.host_pages_written += 1
        clock = self.host_pages_written
        b = ppn // self.pages_per_block
        self.written_at[b] = clock
        chunk[lpn & MASK] = ppn
        back = self._p2l[ppn >> SHIFT]
        if back is self._p2l_empty:
            back = self.p2l.own(ppn >> SHIFT)
        back[ppn & MASK] = lpn
        self.valid[b] += 1
        self.plane_valid[plane] += 1
        return ppn

    def trim(self, lpn: int, count: int = 1) -> int:
        """Unmap ``count`` logical pages from ``lpn`` (TRIM/DISCARD): their physical pages
        become invalid. Returns how many were mapped."""
        n = 0
        for x in range(lpn, lpn + count):
            old = self.lookup(x)
            if old >= 0:
                self._drop(old)
                self.l2p.own(x >> SHIFT)[x & MASK] = -1
                n += 1
        self.trimmed_pages += n
        return n

    def _drop(self, old: int) -> None:
        """Physical page ``old`` (mapped) turns invalid."""
        back = self._p2l[old >> SHIFT]
        if back is self._p2l_empty:
            back = self.p2l.own(old >> SHIFT)
        back[old & MASK] = -1
        b = old // self.pages_per_block
        self.valid[b] -= 1
        self.plane_valid[b // self.geometry.blocks_per_plane] -= 1

    def _move(self, lpn: int, new: int) -> None:
        """Mapped ``lpn`` now lives at ``new`` (the caller unmapped its old page)."""
        chunk = self._l2p[lpn >> SHIFT]
        if chunk is self._l2p_empty:
            chunk = self.l2p.own(lpn >> SHIFT)
        chunk[lpn & MASK] = new
        back = self._p2l[new >> SHIFT]
        if back is self._p2l_empty:
            back = self.p2l.own(new >> SHIFT)
        back[new & MASK] = lpn

    def _append(self, frontier: int, plane: int) -> int:
        """Program the next page of the plane's ``frontier`` open block; a new block is
        opened when there is none. Returns the ppn, or -1 for SLC with no room."""
        opens = self.open[frontier]
        b = opens[plane]
        if b < 0:
            b = self._take_block(frontier, plane)
            if b < 0:
                return -1
            opens[plane] = b
        page = self.wp[b]
        self.wp[b] = page + 1
        if page + 1 == self.cap[b]:
            self.state[b] = gcp.FULL
            opens[plane] = -1
        return b * self.pages_per_block + page

    def _take_block(self, frontier: int, plane: int) -> int:
        if frontier == SLC:
            pool = self.slc_pool[plane]
            if not pool:
                return -1
        else:
            pool = self.free_pool[plane]
            if frontier == HOST and len(pool) < 2:
                self._emergency(plane)
            if not pool:
                raise AssertionError(f"plane {plane}: no free block for the collector")
        b = pool.popleft()
        self.state[b] = gcp.OPEN
        self.written_at[b] = _NO_DATA    # the first page written sets it
        return b

    # -- garbage collection ----------------------------------------------------------------
    def free_blocks(self, plane: int) -> int:
        """Erased TLC blocks in the plane's pool."""
        return len(self.free_pool[plane])

    def free_blocks_total(self) -> int:
        """Erased TLC blocks over the drive."""
        return sum(len(p) for p in self.free_pool)

    def gc_needed(self, plane: int) -> bool:
        """The pool is below the foreground threshold: collect before more host writes."""
        return len(self.free_pool[plane]) < self.fg_threshold

    def gc_wanted(self, plane: int) -> bool:
        """The pool is below the background threshold: collect when the drive is idle."""
        return len(self.free_pool[plane]) < self.bg_threshold

    def _victim(self, plane: int, want_slc: int, policy: str | None = None) -> int:
        g = self.geometry
        lo = g.first_block_of_plane(plane)
        return gcp.choose_victim(
            policy or self.gc_policy, lo, lo + g.blocks_per_plane, want_slc, self.state,
            self.valid, self.cap, self.erase_count, self.written_at, self.slc_flag,
            self.host_pages_written, self.wear_limit)

    def _room(self, plane: int) -> int:
        """Pages the collector can still program in the plane without waiting for an erase."""
        b = self.open[GC][plane]
        room = self.cap[b] - self.wp[b] if b >= 0 else 0
        return room + len(self.free_pool[plane]) * self.pages_per_block

    def collect(self, plane: int, now: float = 0.0) -> GcJob | None:
        """Collect one TLC block of ``plane``: choose the victim, copy its valid pages to
        the collector's block of the same plane (the map changes at once), and leave it
        erasing until `erase_done`. None when there is no closed block, or when the copy
        must wait for a pending erase to free a block."""
        victim = self._victim(plane, 0)
        if victim < 0 or self._room(plane) < self.valid[victim]:
            return None
        moved = self._relocate(victim, plane)
        self.state[victim] = gcp.ERASING
        self.erasing[plane].add(victim)
        self.gc_runs += 1
        return GcJob(victim, moved, False)

    def _relocate(self, victim: int, plane: int) -> list:
        """Copy the victim's valid pages to the plane's collector block; returns the moves."""
        ppb = self.pages_per_block
        p2l, valid = self._p2l, self.valid
        age = self.written_at[victim]
        base = victim * ppb
        moved = []
        for ppn in range(base, base + self.wp[victim]):
            chunk = p2l[ppn >> SHIFT]
            if chunk is self._p2l_empty:  # its valid pages are unmapped below
                chunk = self.p2l.own(ppn >> SHIFT)
            lpn = chunk[ppn & MASK]
            if lpn < 0:
                continue
            chunk[ppn & MASK] = -1
            new = self._append(GC, plane)
            nb = new // ppb
            if self.written_at[nb] < age:
                self.written_at[nb] = age
            self._move(lpn, new)
            valid[nb] += 1
            moved.append((ppn, new))
        valid[victim] = 0
        self.gc_pages_written += len(moved)
        return moved

    def collect_now(self, plane: int, background: bool = False) -> list:
        """Collect ``plane`` until it is above the foreground threshold (the background
        one with ``background``), each erase done at once; returns the jobs. For users of
        the FTL without timing (studies of write amplification, tests)."""
        jobs = []
        wanted = self.gc_wanted if background else self.gc_needed
        while wanted(plane):
            job = self.collect(plane)
            if job is None:
                break
            self.erase_done(job.victim)
            jobs.append(job)
        return jobs

    def erase_done(self, block: int) -> None:
        """The erase of a collected block is over: it rejoins its plane's pool (SLC or
        TLC) and its erase count grows by one."""
        if block in self.erased_early:
            self.erased_early.discard(block)      # an emergency erased it already
            return
        if self.state[block] != gcp.ERASING:
            raise ValueError(f"block {block} is not erasing (state {self.state[block]})")
        plane = block // self.geometry.blocks_per_plane
        self.erasing[plane].discard(block)
        self._erase(block)
        (self.slc_pool if self.slc_flag[block] else self.free_pool)[plane].append(block)

    def _erase(self, block: int) -> None:
        self.state[block] = gcp.FREE
        self.wp[block] = 0
        self.erase_count[block] += 1
        self.erases += 1

    def _emergency(self, plane: int) -> None:
        """Reclaim TLC blocks at once until the host may take one (module docstring)."""
        pool = self.free_pool[plane]
        while len(pool) < 2:
            self.emergencies += 1
            victim = self._victim(plane, 0, "greedy")
            if victim < 0 or self.valid[victim] == self.cap[victim]:
                # nothing to gain in place: finish one of the plane's pending erases now;
                # the timing side's own erase_done for it later is then absorbed
                erasing = sorted(b for b in self.erasing[plane] if not self.slc_flag[b])
                if not erasing:
                    raise AssertionError(f"plane {plane}: no block to reclaim")
                self.erase_done(erasing[0])
                self.erased_early.add(erasing[0])
                self.emergency_jobs.append(GcJob(erasing[0], [], False, True))
                continue
            # erase first, holding the valid pages in the controller's buffer, so the
            # copies need no free block
            ppb = self.pages_per_block
            base = victim * ppb
            p2l = self.p2l
            held = [(ppn, p2l[ppn]) for ppn in range(base, base + self.wp[victim])
                    if p2l[ppn] >= 0]
            age = self.written_at[victim]
            for ppn, _ in held:
                p2l[ppn] = -1
            self.valid[victim] = 0
            self._erase(victim)
            pool.appendleft(victim)
            moved = []
            for ppn, lpn in held:
                new = self._append(GC, plane)
                nb = new // ppb
                if self.written_at[nb] < age:
                    self.written_at[nb] = age
                self._move(lpn, new)
                self.valid[nb] += 1
                moved.append((ppn, new))
            self.gc_pages_written += len(moved)
            self.gc_runs += 1
            self.emergency_jobs.append(GcJob(victim, moved, False, True))

    # -- SLC cache ---------------------------------------------------------------------------
    def fold_wanted(self, plane: int) -> bool:
        """The plane has a closed SLC block and TLC room to fold it into."""
        if not self.slc_blocks_per_plane or len(self.free_pool[plane]) < 2:
            return False
        return self._victim(plane, 1) >= 0

    def fold(self, plane: int, now: float = 0.0) -> GcJob | None:
        """Fold one closed SLC block of ``plane`` into TLC (its valid pages move to the
        collector's block; the block is erasing until `erase_done`, then rejoins the SLC
        cache). None when there is nothing to fold or no TLC room."""
        if not self.fold_wanted(plane):
            return None
        victim = self._victim(plane, 1)
        moved = self._relocate(victim, plane)
        self.fold_pages_written += len(moved)
        self.state[victim] = gcp.ERASING
        self.erasing[plane].add(victim)
        self.fold_runs += 1
        return GcJob(victim, moved, True)

    def slc_free_pages(self) -> int:
        """SLC pages the host can still write before writes go to TLC."""
        n = sum(len(p) for p in self.slc_pool) * self.slc_pages_per_block
        for b in self.open[SLC]:
            if b >= 0:
                n += self.cap[b] - self.wp[b]
        return n

    # -- figures ---------------------------------------------------------------------------
    def write_amplification(self) -> float:
        """Flash pages programmed (host + relocations) per host page written (1.0 before
        any write)."""
        if not self.host_pages_written:
            return 1.0
        return (self.host_pages_written + self.gc_pages_written) / self.host_pages_written

    def erase_count_stats(self) -> tuple[int, float, int]:
        """(min, mean, max) erase count over the blocks."""
        e = np.asarray(self.erase_count)
        return int(e.min()), float(e.mean()), int(e.max())

    def figures(self) -> dict:
        """The FTL's counters, for results."""
        lo, mean, hi = self.erase_count_stats()
        return {"start_state": self.start_state, "host_pages_written": self.host_pages_written,
                "gc_pages_written": self.gc_pages_written,
                "fold_pages_written": self.fold_pages_written,
                "slc_pages_written": self.slc_pages_written,
                "write_amplification": self.write_amplification(), "erases": self.erases,
                "gc_runs": self.gc_runs, "fold_runs": self.fold_runs,
                "trimmed_pages": self.trimmed_pages, "emergencies": self.emergencies,
                "free_blocks": self.free_blocks_total(), "erase_count_min": lo,
                "erase_count_mean": mean, "erase_count_max": hi}

    def precondition(self, state: str, seed: int | None = None) -> None:
        """Set up a start state directly: ``fresh``, ``full`` or ``steady``
        (`blksim.disk_models.flash.precondition`)."""
        from blksim.disk_models.flash.precondition import precondition
        precondition(self, state, self.seed if seed is None else seed)

