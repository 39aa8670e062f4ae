"""A small stand-in for the FTL (disk_models/flash/ftl.py) while it is being written:
the same interface, plain Python, greedy GC, static CWDP-style plane allocation
(lpn % planes). Tests of the timing side use it; it goes once the real FTL lands."""

from __future__ import annotations

from collections import deque


class GcJob:
    __slots__ = ("victim", "moved", "slc")

    def __init__(self, victim, moved, slc):
        self.victim = victim
        self.moved = moved
        self.slc = slc


class StubFtl:
    def __init__(self, geometry, logical_pages, *, gc_threshold=2, gc_background=3,
                 slc_cache_blocks_per_plane=0, slc_pages_per_block=None, **_):
        g = geometry
        self.g = g
        self.ppb = g.pages_per_block
        self.planes = g.planes
        self.bpp = g.blocks_per_plane
        self.l2p = [-1] * logical_pages
        self.p2l = {}
        self.valid = [0] * g.blocks
        self.erasing = set()
        self.free = [deque(range(p * self.bpp + 1, (p + 1) * self.bpp)) for p in range(g.planes)]
        self.open = [p * self.bpp for p in range(g.planes)]
        self.next = [0] * g.planes
        self.gc_threshold = gc_threshold
        self.gc_background = gc_background
        self.slc_blocks = set()
        self.slc_left = [slc_cache_blocks_per_plane] * g.planes
        self.slc_ppb = slc_pages_per_block or self.ppb
        if slc_cache_blocks_per_plane:
            for p in range(g.planes):
                self.slc_blocks.add(self.open[p])
                self.slc_left[p] -= 1
        self.host_pages_written = 0
        self.gc_pages_written = 0
        self.erases = 0
        self.gc_runs = 0
        self.trims = 0

    def lookup(self, lpn):
        return self.l2p[lpn]

    def plane_for_write(self, lpn):
        return lpn % self.planes

    def is_slc(self, block):
        return block in self.slc_blocks

    def _cap(self, block):
        return self.slc_ppb if block in self.slc_blocks else self.ppb

    def _alloc(self, plane):
        b = self.open[plane]
        if self.next[plane] >= self._cap(b):
            b = self.free[plane].popleft()
            if self.slc_left[plane] > 0:
                self.slc_blocks.add(b)
                self.slc_left[plane] -= 1
            self.open[plane] = b
            self.next[plane] = 0
        ppn = b * self.ppb + self.next[plane]
        self.next[plane] += 1
        return ppn

    def _place(self, lpn, ppn):
        old = self.l2p[lpn]
        if old >= 0:
            self.valid[old // self.ppb] -= 1
            del self.p2l[old]
        self.l2p[lpn] = ppn
        self.p2l[ppn] = lpn
        self.valid[ppn // self.ppb] += 1

    def write(self, lpn, now):
        ppn = self._alloc(self.plane_for_write(lpn))
        self._place(lpn, ppn)
        self.host_pages_written += 1
        return ppn

    def trim(self, lpn, count):
        for x in range(lpn, lpn + count):
            old = self.l2p[x]
            if old >= 0:
                self.valid[old // self.ppb] -= 1
                del self.p2l[old]
                self.l2p[x] = -1

    def free_blocks(self, plane):
        return len(self.free[plane])

    def free_blocks_total(self):
        return sum(len(f) for f in self.free)

    def gc_needed(self, plane):
        return len(self.free[plane]) < self.gc_threshold

    def gc_wanted(self, plane):
        return len(self.free[plane]) < self.gc_background

    def fold_wanted(self, plane):
        return False

    def fold(self, plane, now):
        return None

    def collect(self, plane, now):
        lo = plane * self.bpp
        cands = [b for b in range(lo, lo + self.bpp)
                 if b != self.open[plane] and b not in self.free[plane]
                 and b not in self.erasing and self.valid[b] < self._cap(b)]
        if not cands:
            return None
        victim = min(cands, key=lambda b: self.valid[b])
        moved = []
        for ppn in range(victim * self.ppb, victim * self.ppb + self._cap(victim)):
            lpn = self.p2l.get(ppn)
            if lpn is not None:
                new = self._alloc(plane)
                self._place(lpn, new)
                moved.append((ppn, new))
                self.gc_pages_written += 1
        self.erasing.add(victim)
        self.gc_runs += 1
        return GcJob(victim, moved, victim in self.slc_blocks)

    def erase_done(self, block):
        self.erasing.discard(block)
        self.slc_blocks.discard(block)
        self.erases += 1
        self.free[block // self.bpp].append(block)

    def write_amplification(self):
        h = self.host_pages_written
        return (h + self.gc_pages_written) / h if h else 1.0

    def precondition(self, state, seed=0):
        if state in ("full", "steady"):
            for lpn in range(len(self.l2p)):
                self.write(lpn, 0.0)
            self.host_pages_written = 0
