"""The cached mapping table: which part of the FTL's map is in the controller's DRAM.

A page-mapping FTL keeps its whole map in flash, in *translation pages* of 4-byte
entries (``page_bytes / 4`` logical pages each), and caches part of it in DRAM
(DFTL: Gupta, Kim & Urgaonkar, "DFTL: a flash translation layer employing
demand-based selective caching of page-level address mappings", ASPLOS 2009,
section 3; MQSim's cached mapping table, ``CMT_Capacity``, default 2 MiB,
``src/exec/Device_Parameter_Set.cpp``). A request whose entry is not cached costs a
flash read of its translation page first; making room may evict a *dirty*
translation page (one whose entries changed since it was read), which costs a
program to write it back.

blksim's simplifications, each its own choice:

- the cache holds whole translation pages, least recently used first out (DFTL and
  MQSim cache single entries; under uniform random access both cover ``capacity / 4``
  logical pages, and whole pages add the spatial locality of neighbouring entries);
- an entry changes (its page turns dirty) on a host write and on each page the
  collector moves, when the timing side reports them with ``access(lpn, True)``;
- translation page ``t`` lives on the die that CWDP allocation gives logical page
  ``t`` (`FlashGeometry.cwdp_planes`), so consecutive translation pages sit on
  different channels; the flash space they take and their own garbage collection
  are not modelled;
- a cache as large as the whole map (``whole_table``) always hits: the table was read
  at power-on, as MQSim's ``Ideal_Mapping_Table``.
"""

from __future__ import annotations

from collections import OrderedDict

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash.geometry import FlashGeometry

#: Bytes of one map entry (DFTL: 4-byte physical page numbers).
ENTRY_BYTES = 4


class MappingCache:
    """An LRU of translation pages in ``capacity_bytes`` of DRAM (module docstring).

    `access` says whether a logical page's entry was cached; after it, ``written_back``
    is the dirty translation page it evicted (-1 for none). Figures: ``hits``,
    ``misses``, ``evictions``, ``dirty_evictions``, `hit_ratio`.
    """

    __slots__ = ("geometry", "entries_per_page", "translation_pages", "capacity_pages",
                 "whole_table", "_lru", "_die_of", "written_back", "hits", "misses",
                 "evictions", "dirty_evictions")

    def __init__(self, geometry: FlashGeometry, logical_pages: int, capacity_bytes: int,
                 where: str = "flash mapping cache") -> None:
        self.geometry = geometry
        self.entries_per_page = geometry.page_bytes // ENTRY_BYTES
        self.translation_pages = -(-logical_pages // self.entries_per_page)
        if not isinstance(capacity_bytes, int) or capacity_bytes < geometry.page_bytes:
            raise DeviceError(f"{where}: mapping_cache must hold at least one translation "
                              f"page ({geometry.page_bytes} bytes), found {capacity_bytes!r}")
        self.capacity_pages = capacity_bytes // geometry.page_bytes
        self.whole_table = self.capacity_pages >= self.translation_pages
        self._lru: OrderedDict = OrderedDict()    # translation page -> dirty
        cwdp = geometry.cwdp_planes()
        ppd = geometry.planes_per_die
        self._die_of = [p // ppd for p in cwdp]   # by translation page mod planes
        self.written_back = -1
        self.hits = self.misses = self.evictions = self.dirty_evictions = 0

    def translation_page(self, lpn: int) -> int:
        """The translation page holding ``lpn``'s entry."""
        return lpn // self.entries_per_page

    def where(self, lpn: int) -> int:
        """The die holding ``lpn``'s translation page (where a miss reads)."""
        return self.die_of_page(lpn // self.entries_per_page)

    def die_of_page(self, tpage: int) -> int:
        """The die holding translation page ``tpage`` (where a write-back programs)."""
        return self._die_of[tpage % len(self._die_of)]

    def access(self, lpn: int, write: bool = False) -> bool:
        """Look ``lpn``'s entry up (``write``: and change it). True on a hit; on a miss
        the translation page is loaded, evicting the least recently used one, whose
        number is left in ``written_back`` if it was dirty."""
        self.written_back = -1
        if self.whole_table:
            self.hits += 1
            return True
        t = lpn // self.entries_per_page
        lru = self._lru
        dirty = lru.get(t)
        if dirty is not None:
            lru.move_to_end(t)
            if write and not dirty:
                lru[t] = True
            self.hits += 1
            return True
        self.misses += 1
        if len(lru) >= self.capacity_pages:
            old, old_dirty = lru.popitem(last=False)
            self.evictions += 1
            if old_dirty:
                self.dirty_evictions += 1
                self.written_back = old
        lru[t] = write
        return False

    def hit_ratio(self) -> float:
        """Hits per access (1.0 before any access)."""
        n = self.hits + self.misses
        return self.hits / n if n else 1.0

    def figures(self) -> dict:
        """The cache's counters, for results."""
        return {"hits": self.hits, "misses": self.misses, "hit_ratio": self.hit_ratio(),
                "evictions": self.evictions, "dirty_evictions": self.dirty_evictions,
                "capacity_pages": self.capacity_pages,
                "translation_pages": self.translation_pages}
