"""File read-ahead as Linux 2.6.18 does it: a current window and an ahead window per open
file (mm/readahead.c, ``page_cache_readahead`` and its helpers; the on-demand read-ahead
that replaced it came in 2.6.23).

Pages are the unit (4 KiB). The state of one open file (``struct file_ra_state``):
``start`` and ``size`` (the current window), ``ahead_start`` and ``ahead_size`` (the ahead
window, 0 when there is none), ``prev_page`` (the last page the algorithm looked at, -1
before the first read) and the flags ``miss`` (a page read ahead was gone when wanted) and
``incache`` (read-ahead is off because everything it asked for was cached).

A read of ``req_size`` pages from page ``offset`` calls `page_cache_readahead`:

1. A read starting at ``prev_page`` (the same page again) counts from the next page.
   The read is *sequential* when it starts right after ``prev_page``. Then
   ``prev_page`` moves to the read's last page (at most ``ra_pages`` pages on).
2. Nothing more happens when read-ahead is off for this file (``ra_pages`` 0, or
   ``incache``).
3. **First sequential read** (no window yet): the current window starts at the read with
   the *initial size*: the read's size rounded up to a power of two, times 4 if that is
   at most ``ra_pages / 32``, times 2 if at most ``ra_pages / 4``, else ``ra_pages``.
   Those pages are read at once. If the read itself is at least ``ra_pages`` long, the
   ahead window is read straight away too.
4. **A random read** (not sequential): read-ahead is switched off (windows cleared) and
   just the read's own pages are read.
5. **A sequential read with a window**: if there is no ahead window, one is made right
   after the current window, of the *next size*. Otherwise, once the read has reached
   the ahead window, the ahead window becomes the current one and a new ahead window is
   made after it. The next size is the current size minus 2 (at least
   ``VM_MIN_READAHEAD``, 16 KiB) after a miss; 4 times it while below ``ra_pages / 16``;
   else twice it; never above ``ra_pages``.

An ahead window is read only when the reader has reached it (it must wait for it) or the
queue is not read-congested; when reading it found every page cached, or it was skipped
for congestion, the ahead window is dropped and made again on the next sequential read.
Reading a window counts how many of its pages were missing; after 256
(``VM_MAX_CACHE_HIT``) pages asked for in a row were all cached, read-ahead is switched
off for the file (``incache``) until a page read ahead turns out to be gone (`miss`).

`page_cache_readahead` returns the page at which the reader must call it again (the page
after ``prev_page``). The caller supplies ``read_pages(start, count, block)``: read the
pages of ``[start, start + count)`` that are not cached and return how many were missing,
or None when ``block`` is false and the queue is read-congested (nothing read).
"""

from __future__ import annotations

PAGE_SECTORS = 8                 # 4 KiB pages
VM_MAX_READAHEAD_KB = 128        # include/linux/mm.h: the default read_ahead_kb
VM_MIN_READAHEAD_KB = 16
VM_MAX_CACHE_HIT = 256           # cached pages asked for in a row before read-ahead stops


class ReadaheadState:
    """The read-ahead state of one open file (``struct file_ra_state``); ``ra_pages`` is
    the device's ``read_ahead_kb`` in pages."""

    __slots__ = ("ra_pages", "start", "size", "ahead_start", "ahead_size", "prev_page",
                 "miss", "incache", "cache_hit")

    def __init__(self, ra_pages: int) -> None:
        self.ra_pages = ra_pages
        self.start = 0
        self.size = 0
        self.ahead_start = 0
        self.ahead_size = 0
        self.prev_page = -1
        self.miss = False
        self.incache = False
        self.cache_hit = 0

    def note_miss(self) -> None:
        """``handle_ra_miss``: a page that should have been cached was not (evicted):
        the next window shrinks, and read-ahead is back on if it was off for a cached
        file."""
        self.miss = True
        self.incache = False
        self.cache_hit = 0

    def _off(self) -> None:
        """``ra_off``: no current window; the ahead window's end is kept (see ``recheck``)."""
        self.start = 0
        self.size = 0
        self.miss = False
        self.incache = False
        self._reset_ahead()

    def _reset_ahead(self) -> None:
        # keeps ahead_start + ahead_size in ahead_size, as 2.6.18 does; ahead_size is only
        # read while ahead_start is not 0
        self.ahead_size += self.ahead_start
        self.ahead_start = 0


def initial_size(req: int, ra_pages: int) -> int:
    """``get_init_ra_size``: the first window for a read of ``req`` pages."""
    size = 1
    while size < req:
        size *= 2
    if size <= ra_pages // 32:
        return size * 4
    if size <= ra_pages // 4:
        return size * 2
    return ra_pages


def next_size(ra: ReadaheadState) -> int:
    """``get_next_ra_size``: the size of a new ahead window (clears the miss flag)."""
    cur = ra.size
    least = VM_MIN_READAHEAD_KB * 1024 // 4096
    if ra.miss:
        ra.miss = False
        size = max(cur - 2, least)
    elif cur < ra.ra_pages // 16:
        size = 4 * cur
    else:
        size = 2 * cur
    return min(size, ra.ra_pages)


def _read_window(ra: ReadaheadState, read_pages, start: int, count: int, block: bool) -> bool:
    """``blockable_page_cache_readahead`` with ``check_ra_success``: False when nothing
    was read (skipped for congestion, or every page cached)."""
    missing = read_pages(start, count, block)
    if missing is None:
        return False
    if missing == 0:
        ra.cache_hit += count
        if ra.cache_hit >= VM_MAX_CACHE_HIT:
            ra._off()
            ra.incache = True
            return False
    else:
        ra.cache_hit = 0
    return True


def _make_ahead(ra: ReadaheadState, read_pages, force: bool) -> bool:
    """``make_ahead_window``: read the window after the current one."""
    ra.ahead_size = next_size(ra)
    ra.ahead_start = ra.start + ra.size
    block = force or ra.prev_page >= ra.ahead_start
    ok = _read_window(ra, read_pages, ra.ahead_start, ra.ahead_size, block)
    if not ok and not force:
        ra._reset_ahead()
    return ok


def page_cache_readahead(ra: ReadaheadState, offset: int, req_size: int, read_pages) -> int:
    """Read ahead for a read of ``req_size`` pages from page ``offset``; return the page at
    which to call again (module docstring)."""
    if offset == ra.prev_page:
        req_size -= 1
        if req_size:
            offset += 1
    sequential = offset == ra.prev_page + 1
    ra.prev_page = offset
    size = min(req_size, ra.ra_pages)
    if size == 0 or ra.incache:
        return ra.prev_page + 1
    ra.prev_page += size - 1

    if sequential and ra.size == 0:
        ra.size = initial_size(size, ra.ra_pages)
        ra.start = offset
        if _read_window(ra, read_pages, offset, ra.size, True) and req_size >= ra.ra_pages:
            _make_ahead(ra, read_pages, True)
        return ra.prev_page + 1

    if not sequential:
        ra._off()
        _read_window(ra, read_pages, offset, size, True)
        return ra.prev_page + 1

    if ra.ahead_start == 0 and not _make_ahead(ra, read_pages, False):
        # recheck: the reader must not run past the end of the ahead window it meant to make
        ra.prev_page = min(ra.prev_page, ra.ahead_start + ra.ahead_size - 1)
        return ra.prev_page + 1
    if ra.prev_page >= ra.ahead_start:
        ra.start = ra.ahead_start
        ra.size = ra.ahead_size
        _make_ahead(ra, read_pages, False)
        ra.prev_page = min(ra.prev_page, ra.ahead_start + ra.ahead_size - 1)
    return ra.prev_page + 1
