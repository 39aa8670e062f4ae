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

So both directions are a few integer operations. The block of a slot is found from a
table of the block holding every ``2^q``-th slot (``q`` such that ``2^q`` is at most
half a block), then stepping forward over the block starts at or before the
slot (none or one, except at a plane's end, where blocks with no slots start where
the next plane does, or after blocks of fewer than ``2^q`` slots): for 1,024-page
blocks one 8-byte entry per 512 slots (3.8 MB for 1 TB in 4 KiB units), and on
PyPy an eighth of a bisection's cost.

- forward, ``lpn -> ppn``: ``k, i = divmod(lpn, planes)``,
  ``j = (a^-1 k - s_i) mod n_i``, the block ``b`` with ``start[b] <= j < start[b + 1]``,
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

import numpy as np


class StartLayout:
    """The start state's map as a function (module docstring).

    ``counts[b]`` (numpy): the start's valid pages of block ``b``, its first
    ``counts[b]`` pages (0 for blocks holding none); ``a``: the multiplier;
    ``shifts[i]``: the rotation of the plane at CWDP position ``i``; ``cwdp``: the
    planes in CWDP order. Refuses counts whose plane totals are not the planes'
    logical pages.
    """

    __slots__ = ("planes", "ppb", "bpp", "logical_pages", "cwdp", "position", "a",
                 "start", "counts", "n", "shift", "inverse", "plane_start", "q",
                 "block_at", "used", "used_start", "_np", "_scratch")

    def __init__(self, geometry, logical_pages: int, cwdp: list, counts, a: int,
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
        # The single entries read array.array copies (a list from numpy's tolist
        # holds boxed integers on PyPy, ten times slower to read, and converting
        # between lists and numpy makes an object per element; bytes cross at once);
        # the chunks read numpy views of the same memory.
        self.counts = array("q", np.asarray(counts, dtype=np.int64).tobytes())
        counts = np.frombuffer(self.counts, dtype=np.int64)
        self.start = array("q", bytes(8 * (len(counts) + 1)))   # start[nb]: every slot
        start = np.frombuffer(self.start, dtype=np.int64)
        np.cumsum(counts, out=start[1:])
        # the blocks holding slots, their starts (and every slot's count at the end),
        # and the table: entry t is the one holding slot t << q (the last one starting
        # at or before it; made a piece at a time, no temporary as large as the table)
        used = np.flatnonzero(counts)
        self.used = array("q", used.tobytes())
        self.used_start = array("q", bytes(8 * (len(used) + 1)))
        used_start = np.frombuffer(self.used_start, dtype=np.int64)
        np.take(start, used, out=used_start[:-1])
        used_start[-1] = start[-1]
        self.q = q = max(0, self.ppb.bit_length() - 2)
        rows = (int(start[-1]) >> q) + 1
        self.block_at = array("q", bytes(8 * rows))
        block_at = np.frombuffer(self.block_at, dtype=np.int64)
        for t in range(0, rows, 1 << 16):
            at = np.arange(t, min(rows, t + (1 << 16)), dtype=np.int64) << q
            block_at[t:t + len(at)] = np.searchsorted(used_start, at, side="right") - 1
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
                    as_np(self.position), block_at, used, used_start)
        self._scratch = None

    # -- single entries ---------------------------------------------------------------
    def forward(self, lpn: int) -> int:
        """The start's physical page of logical page ``lpn`` (-1 beyond the logical pages)."""
        if not 0 <= lpn < self.logical_pages:
            return -1
        k, i = divmod(lpn, self.planes)
        j = self.plane_start[i] + (self.inverse[i] * k - self.shift[i]) % self.n[i]
        start = self.used_start
        u = self.block_at[j >> self.q]
        while start[u + 1] <= j:
            u += 1
        return self.used[u] * self.ppb + j - start[u]

    def reverse(self, ppn: int) -> int:
        """The start's logical page in physical page ``ppn``, or -1 (none there)."""
        b, page = divmod(ppn, self.ppb)
        if page >= self.counts[b]:
            return -1
        i = self.position[b // self.bpp]
        j = self.start[b] + page - self.plane_start[i]
        return i + self.planes * (self.a * (j + self.shift[i]) % self.n[i])

    # -- a chunk at a time ------------------------------------------------------------
    # Both directions work on numpy arrays made once per chunk size (PyPy frees numpy
    # temporaries late, and one set per chunk would add up to the map's size; making
    # an array of a chunk's size costs PyPy about 0.6 ms, as does np.take's default
    # bounds check: the indices here are in range, and mode="clip" skips it): the
    # per-position values repeat with period ``planes`` along consecutive lpns, and the
    # page in the block with period ``pages_per_block`` along consecutive ppns, so
    # each is a slice of an array tiled once.
    def _buffers(self, size: int) -> dict:
        if self._scratch is None or self._scratch["size"] != size:
            start, counts, n, shift, inverse, plane_start, position = self._np[:7]
            planes, ppb = self.planes, self.ppb
            ramp = np.arange(size + max(planes, ppb), dtype=np.int64)
            by_pos = ramp[:size + planes] % planes
            self._scratch = {
                "size": size,
                "pos": by_pos, "k": ramp[:size + planes] // planes,
                "inverse": inverse[by_pos], "shift": shift[by_pos], "n": n[by_pos],
                "plane_start": plane_start[by_pos],
                "page": ramp[:size + ppb] % ppb, "block": ramp[:size + ppb] // ppb,
                "x": np.empty(size, dtype=np.int64), "y": np.empty(size, dtype=np.int64),
                "b": np.empty(size, dtype=np.int64), "mask": np.empty(size, dtype=bool)}
        return self._scratch

    def forward_chunk(self, first: int, out: np.ndarray) -> None:
        """``out[x] = forward(first + x)`` for every x (vectorised)."""
        block_at, used, start = self._np[7:]
        size = len(out)
        s = self._buffers(size)
        off = first % self.planes
        cut = slice(off, off + size)
        j, t, b, step = s["x"], s["y"], s["b"], s["mask"]
        np.add(s["k"][cut], (first - off) // self.planes, out=t)          # k
        np.multiply(s["inverse"][cut], t, out=j)
        np.subtract(j, s["shift"][cut], out=j)
        np.remainder(j, s["n"][cut], out=j)
        np.add(j, s["plane_start"][cut], out=j)                           # the slot
        np.minimum(j, int(start[-1]) - 1, out=j)   # lpns past the end (set -1 below)
        # the block: from the table, then forward over the starts at or before j
        # (one step for all, the rare further ones for the few that need them)
        np.right_shift(j, self.q, out=t)
        np.take(block_at, t, out=b, mode="clip")
        for _ in range(2):       # one step for many; a second for none, mostly
            np.add(b, 1, out=t)
            np.less_equal(np.take(start, t, out=t, mode="clip"), j, out=step)
            np.add(b, step, out=b)
        if step.any():           # more starts in the bucket: blocks under 2^q slots
            late = np.flatnonzero(step)
            late = late[start[b[late] + 1] <= j[late]]
            while len(late):
                b[late] += 1
                late = late[start[b[late] + 1] <= j[late]]
        np.subtract(j, np.take(start, b, out=t, mode="clip"), out=j)      # the page
        np.multiply(np.take(used, b, out=t, mode="clip"), self.ppb, out=t)
        np.add(t, j, out=j)
        end = self.logical_pages - first
        if end < size:
            j[max(end, 0):] = -1
        out[:] = j

    def reverse_chunk(self, first: int, out: np.ndarray) -> None:
        """``out[x] = reverse(first + x)`` for every x (vectorised; -1 beyond the
        drive's pages)."""
        start, counts, n, shift, _, plane_start, position = self._np[:7]
        size = len(out)
        s = self._buffers(size)
        ppb = self.ppb
        nb = len(counts)
        off = first % ppb
        b0 = first // ppb
        cut = slice(off, off + size)
        # per block of the chunk: its slots' first k before the multiplier, n, position
        blocks = np.arange(b0, min(nb, b0 + (off + size - 1) // ppb + 1), dtype=np.int64)
        i = position[blocks // self.bpp]
        first_j = start[blocks] - plane_start[i] + shift[i]
        block = s["block"][cut]
        x, t, mask = s["x"], s["y"], s["mask"]
        if b0 + int(block[-1]) >= nb:                    # the chunk runs past the end
            block = np.minimum(block, len(blocks) - 1)
        page = s["page"][cut]
        np.take(first_j, block, out=x, mode="clip")
        np.add(x, page, out=x)
        np.multiply(x, self.a, out=x)
        np.remainder(x, np.take(n[i], block, out=t, mode="clip"), out=x)    # k
        np.multiply(x, self.planes, out=x)
        np.add(x, np.take(i, block, out=t, mode="clip"), out=x)             # the lpn
        np.less_equal(np.take(counts[blocks], block, out=t, mode="clip"), page, out=mask)
        np.putmask(x, mask, -1)                                              # no slot
        end = nb * ppb - first
        if end < size:
            x[max(end, 0):] = -1
        out[:] = x
