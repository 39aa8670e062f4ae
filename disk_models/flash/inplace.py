"""Media written in place (3D XPoint): a fixed map and no garbage collection.

A 3D XPoint drive writes a logical page over the cells that hold it, with no erase
before write and so nothing to collect (Intel Optane SSD DC P4800X product brief,
2017). blksim models it as the same flash drive with this map in place of the FTL:
logical page ``lpn`` lives on plane ``lpn % planes`` at offset ``lpn // planes``
(consecutive pages on consecutive planes, so a large transfer spreads over every die:
blksim's choice), and the GC questions are always answered no.
"""

from __future__ import annotations


class InPlaceMap:
    """The FTL interface the drive uses, for in-place media."""

    def __init__(self, geometry, logical_pages: int) -> None:
        self.geometry = geometry
        self.logical_pages = logical_pages
        self.planes = geometry.channels * geometry.chips_per_channel * \
            geometry.dies_per_chip * geometry.planes_per_die
        self.pages_per_plane = geometry.blocks_per_plane * geometry.pages_per_block
        self.host_pages_written = 0
        self.gc_pages_written = 0
        self.erases = 0
        self.gc_runs = 0

    def lookup(self, lpn: int) -> int:
        planes = self.planes
        return (lpn % planes) * self.pages_per_plane + lpn // planes

    def plane_for_write(self, lpn: int) -> int:
        return lpn % self.planes

    def write(self, lpn: int, now: float) -> int:
        self.host_pages_written += 1
        return self.lookup(lpn)

    def is_slc(self, block: int) -> bool:
        return False

    def trim(self, lpn: int, count: int) -> None:
        pass

    def gc_needed(self, plane: int) -> bool:
        return False

    def gc_wanted(self, plane: int) -> bool:
        return False

    def fold_wanted(self, plane: int) -> bool:
        return False

    def write_amplification(self) -> float:
        return 1.0

    def precondition(self, state: str, seed: int = 0) -> None:
        pass
