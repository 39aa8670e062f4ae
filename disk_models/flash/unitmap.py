"""A map from one numbering of mapping units to another, stored in chunks made on first write.

The FTL's two maps (logical to physical and back) hold one entry per mapping unit:
4 bytes per 4 KiB, 2 GB for the two maps of a 1 TB drive. A run that touches a few
megabytes should not pay that, so a `UnitMap` keeps its entries in chunks of
``CHUNK`` (2^16) entries, each an `array.array` (indexing one from PyPy costs ~40 ns
against ~2 us for a numpy array, measured on this machine). Every chunk starts as
one shared, read-only chunk of -1 (``empty``): an entry never written reads as
unmapped, and a chunk gets its own storage the first time one of its entries is
written (blksim's choice: the simplest lazy table; drives themselves keep the whole
map in DRAM, loaded from flash).

Hot paths index the chunks directly (``chunks[i >> SHIFT][i & MASK]``) and, before
writing, replace a chunk that ``is`` the empty one with `UnitMap.own`; everything else
uses the methods. The empty chunk must never be written: every writer checks.
"""

from __future__ import annotations

from array import array

import numpy as np

#: log2 of the entries in a chunk (2^16 entries: 256 KiB of 4-byte entries).
SHIFT = 16
CHUNK = 1 << SHIFT
MASK = CHUNK - 1


class UnitMap:
    """``n`` entries, each its base value (-1, unmapped, unless `set_base` gave
    another) until set, in 4-byte entries when every value is below ``limit`` <= 2^31,
    else 8-byte ones (module docstring: the chunks).

    ``chunks[c]`` holds entries ``c * CHUNK .. (c + 1) * CHUNK - 1`` (the last chunk
    is full-sized too: entries from ``n`` on are never used); it ``is`` ``empty``
    until one of them is written, and its entries are then ``base(i)``.
    """

    __slots__ = ("n", "typecode", "dtype", "empty", "chunks", "base", "base_chunk")

    def __init__(self, n: int, limit: int) -> None:
        self.n = n
        self.typecode = "i" if limit < 2**31 else "q"
        self.dtype = np.int32 if self.typecode == "i" else np.int64
        self.empty = array(self.typecode, [-1]) * CHUNK
        self.chunks = [self.empty] * (-(-n // CHUNK))
        self.base = _unmapped
        self.base_chunk = None

    def set_base(self, entry, fill) -> None:
        """Give the entries not yet written the base values ``entry(i)``; ``fill(first,
        out)`` sets the numpy array ``out`` to ``entry(first + x)`` for each x. Only
        on a map with no chunk of its own (the start state is set before any write)."""
        if self.owned_chunks():
            raise ValueError("set_base needs a map with nothing written")
        self.base = entry
        self.base_chunk = fill

    # -- single entries (not the hot paths: see the module docstring) -----------------
    def own(self, c: int) -> array:
        """Chunk ``c`` with storage of its own (made now, from its base values, if it
        had none)."""
        ch = self.chunks[c]
        if ch is self.empty:
            ch = self.chunks[c] = self.empty[:]
            if self.base_chunk is not None:
                self.base_chunk(c * CHUNK, np.frombuffer(ch, dtype=self.dtype))
        return ch

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(f"map index {i} out of range 0..{self.n - 1}")
        ch = self.chunks[i >> SHIFT]
        return self.base(i) if ch is self.empty else ch[i & MASK]

    def __setitem__(self, i: int, value: int) -> None:
        if not 0 <= i < self.n:
            raise IndexError(f"map index {i} out of range 0..{self.n - 1}")
        self.own(i >> SHIFT)[i & MASK] = value

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        for i in range(self.n):
            yield self[i]

    # -- bulk ----------------------------------------------------------------------------
    def owned_chunks(self) -> int:
        """Chunks with storage of their own."""
        empty = self.empty
        return sum(1 for ch in self.chunks if ch is not empty)

    def nbytes(self) -> int:
        """Bytes of entry storage: the owned chunks and the shared empty one."""
        return (self.owned_chunks() + 1) * CHUNK * self.empty.itemsize

    def view(self, c: int) -> np.ndarray:
        """A writable numpy view of chunk ``c`` (given storage first)."""
        return np.frombuffer(self.own(c), dtype=self.dtype)

    def put(self, start: int, values: np.ndarray) -> None:
        """Set entries ``start .. start + len(values) - 1`` to ``values``."""
        i, end = start, start + len(values)
        while i < end:
            c, off = i >> SHIFT, i & MASK
            stop = min(end, (c + 1) * CHUNK)
            self.view(c)[off:off + stop - i] = values[i - start:stop - start]
            i = stop

    def scatter(self, at: np.ndarray, values: np.ndarray) -> None:
        """Set entry ``at[j]`` to ``values[j]`` for each j (``at`` strictly ascending)."""
        if not len(at):
            return
        first, last = int(at[0]) >> SHIFT, int(at[-1]) >> SHIFT
        ends = np.searchsorted(at, np.arange(first + 1, last + 1, dtype=np.int64) << SHIFT)
        lo = 0
        offsets = np.empty(CHUNK, dtype=np.int64)   # reused: no temporary per chunk
        for c, hi in zip(range(first, last + 1), ends.tolist() + [len(at)]):
            if hi > lo:
                off = np.bitwise_and(at[lo:hi], MASK, out=offsets[:hi - lo])
                self.view(c)[off] = values[lo:hi]
            lo = hi

    def to_numpy(self) -> np.ndarray:
        """A copy of the whole map as one numpy array (for checks and tests)."""
        if not self.chunks:
            return np.empty(0, dtype=self.dtype)
        out = np.full(len(self.chunks) * CHUNK, -1, dtype=self.dtype)
        for c, ch in enumerate(self.chunks):
            part = out[c * CHUNK:(c + 1) * CHUNK]
            if ch is not self.empty:
                part[:] = np.frombuffer(ch, dtype=self.dtype)
            elif self.base_chunk is not None:
                self.base_chunk(c * CHUNK, part)
        return out[:self.n]

    def __array__(self, dtype=None, copy=None):
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype)


def _unmapped(i: int) -> int:
    """The base value of a map with no start layout: unmapped."""
    return -1
