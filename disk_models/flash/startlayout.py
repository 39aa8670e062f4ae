"""The map of a preconditioned start state as a function, so that it need not be stored.

The ``full`` and ``steady`` start states (`blksim.disk_models.flash.precondition`) lay
each plane's logical pages out by a rule:

- the plane at CWDP position ``i`` holds the logical pages ``lpn = i + planes k``,
  ``k = 0 .. n_i - 1`` (the ones CWDP allocation sends it);
- its *slots* are the first ``count[b]`` pages of each of its blocks ``b``, in block
  order: slot ``j`` is page ``j - start[b]`` of the block with
  ``start[b] <= j < start[b] + count[b]`` (``start`` counts the slots before the block);
- slot ``j`` holds ``k = a (j + s_i) mod n_i`` (``a`` coprime to every ``n_i``, one for
  the drive, ``s_i`` one per plane): ``full`` is ``a = 1, s_i = 0`` (the pages in
  order), ``steady`` a random affine order.

So both directions are a few integer operations and a bisection:

- forward, ``lpn -> ppn``: ``k, i = divmod(lpn, planes)``,
  ``j = (a^-1 k - s_i) mod n_i``, the block by bisection over the plane's ``start``,
  ``ppn = b x pages_per_block + j - start[b]``;
- reverse, ``ppn -> lpn``: ``b, page = divmod(ppn, pages_per_block)``; no page if
  ``page >= count[b]``; else ``j = start[b] + page``, ``lpn = i + planes (a (j + s_i)
  mod n_i)``.

The FTL's maps (`blksim.disk_models.flash.unitmap.UnitMap`) answer any entry of a chunk
never written since the start through `forward` / `reverse`, and give a chunk storage,
filled by `forward_chunk` / `reverse_chunk` (numpy, a chunk at a time), on its first
write. The slots are numbered drive-wide here (plane by plane in plane order), so one
sorted array of block starts serves every plane.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

import numpy as np


class StartLayout:
    """The start state's map as a function (module docstring).

    ``counts[b]``: the start's valid pages of block ``b`` (its first ``counts[b]``
    pages; 0 for blocks holding none; a numpy array); ``a``: the multiplier; ``shifts[i]``: the
    rotation of the plane at CWDP position ``i``; ``cwdp``: the planes in CWDP order.
    """

    __slots__ = ("planes", "ppb", "bpp", "logical_pages", "cwdp", "position", "a",
                 "start", "counts", "n", "shift", "inverse", "plane_start",
                 "_np", "_scratch")

    def __init__(self, geometry, logical_pages: int, cwdp: list, counts: list, a: int,
                 shifts: list) -> None:
        planes = self.planes = geometry.planes
        self.ppb = geometry.pages_per_block
        self.bpp = geometry.blocks_per_plane
        self.logical_pages = logical_pages
        self.cwdp = list(cwdp)
        self.position = [0] * planes
        for i, p in enumerate(self.cwdp):
            self.position[p] = i
        self.a = a
        counts = np.asarray(counts, dtype=np.int64)
        start = np.cumsum(counts)
        start -= counts
        # the single entries read array.array copies (a list from numpy's tolist holds
        # boxed integers on PyPy, ten times slower to bisect, and converting between
        # lists and numpy makes an object per element; bytes cross at once)
        self.counts = array("q", counts.tobytes())
        self.start = array("q", start.tobytes())
        # per CWDP position: its logical pages, rotation, a^-1 mod n, first slot
        self.n = [len(range(i, logical_pages, planes)) for i in range(planes)]
        self.shift = list(shifts)
        self.inverse = [pow(a, -1, n) if n > 1 else 0 for n in self.n]
        self.plane_start = [self.start[p * self.bpp] for p in self.cwdp]
        per_plane = counts.reshape(planes, self.bpp).sum(axis=1)
        for i, p in enumerate(self.cwdp):
            if int(per_plane[p]) != self.n[i]:
                raise ValueError(f"plane {p}: the block counts do not sum to its "
                                 f"{self.n[i]} logical pages")
        as_np = lambda xs: np.asarray(xs, dtype=np.int64)   # noqa: E731
        self._np = (start, counts, as_np([max(1, n) for n in self.n]),
                    as_np(self.shift), as_np(self.inverse), as_np(self.plane_start),
                    as_np(self.position))
        self._scratch = None

    # -- single entries ---------------------------------------------------------------
    def forward(self, lpn: int) -> int:
        """The start's physical page of logical page ``lpn`` (-1 beyond the logical pages)."""
        if not 0 <= lpn < self.logical_pages:
            return -1
        k, i = divmod(lpn, self.planes)
        j = self.plane_start[i] + (self.inverse[i] * k - self.shift[i]) % self.n[i]
        lo = self.cwdp[i] * self.bpp
        b = bisect_right(self.start, j, lo, lo + self.bpp) - 1
        return b * self.ppb + j - self.start[b]

    def reverse(self, ppn: int) -> int:
        """The start's logical page in physical page ``ppn``, or -1 (none there)."""
        b, page = divmod(ppn, self.ppb)
        if page >= self.counts[b]:
            return -1
        i = self.position[b // self.bpp]
        j = self.start[b] + page - self.plane_start[i]
        return i + self.planes * (self.a * (j + self.shift[i]) % self.n[i])

    # -- a chunk at a time ------------------------------------------------------------
    def _buffers(self, size: int) -> list:
        # preallocated scratch arrays: PyPy frees numpy temporaries late, and one set
        # per chunk would add up to the map's size
        if self._scratch is None or len(self._scratch[0]) != size:
            self._scratch = [np.empty(size, dtype=np.int64) for _ in range(4)]
        return self._scratch

    def forward_chunk(self, first: int, out: np.ndarray) -> None:
        """``out[x] = forward(first + x)`` for every x (vectorised)."""
        start, _, n, shift, inverse, plane_start, _ = self._np
        lpn, i, j, t = self._buffers(len(out))
        lpn[:] = np.arange(first, first + len(out), dtype=np.int64)
        np.remainder(lpn, self.planes, out=i)
        np.floor_divide(lpn, self.planes, out=lpn)                 # now k
        np.multiply(np.take(inverse, i, out=t), lpn, out=j)
        np.subtract(j, np.take(shift, i, out=t), out=j)
        np.remainder(j, np.take(n, i, out=t), out=j)
        np.add(j, np.take(plane_start, i, out=t), out=j)           # the drive-wide slot
        # the last block starting at or before the slot: it holds it (a block with
        # no slots starts where the next one does, so it is never the last such)
        b = np.searchsorted(start, j, side="right")
        np.subtract(b, 1, out=b)
        np.subtract(j, np.take(start, b, out=t), out=j)            # page in the block
        np.multiply(b, self.ppb, out=b)
        np.add(b, j, out=j)
        end = self.logical_pages - first
        if end < len(out):
            j[max(end, 0):] = -1
        out[:] = j

    def reverse_chunk(self, first: int, out: np.ndarray) -> None:
        """``out[x] = reverse(first + x)`` for every x (vectorised; -1 beyond the
        drive's pages)."""
        start, counts, n, shift, _, plane_start, position = self._np
        ppn, b, i, t = self._buffers(len(out))
        ppn[:] = np.arange(first, first + len(out), dtype=np.int64)
        np.minimum(ppn, len(self.counts) * self.ppb - 1, out=ppn)   # past the end: below
        np.floor_divide(ppn, self.ppb, out=b)
        np.subtract(ppn, np.multiply(b, self.ppb, out=t), out=ppn)    # page in block
        np.floor_divide(b, self.bpp, out=i)
        np.take(position, i, out=i)                                  # CWDP position
        valid = ppn < np.take(counts, b, out=t)
        np.add(ppn, np.take(start, b, out=t), out=ppn)
        np.subtract(ppn, np.take(plane_start, i, out=t), out=ppn)   # slot j in the plane
        np.add(ppn, np.take(shift, i, out=t), out=ppn)
        np.multiply(ppn, self.a, out=ppn)
        np.remainder(ppn, np.take(n, i, out=t), out=ppn)            # k
        np.multiply(ppn, self.planes, out=ppn)
        np.add(ppn, i, out=ppn)
        ppn[~valid] = -1
        end = len(self.counts) * self.ppb - first
        if end < len(out):
            ppn[max(end, 0):] = -1
        out[:] = ppn
