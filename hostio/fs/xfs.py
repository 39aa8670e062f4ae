"""XFS's allocator, as Linux 2.6.18 (fs/xfs/xfs_bmap.c, xfs_alloc.c, xfs_ialloc.c,
xfs_iomap.c) places a file's blocks, with today's (5.4-6.6) differences where they matter.

**Allocation groups** (`hostio.fs.xfs_mkfs`): each AG keeps its free space as extents
(the by-block and by-size B+trees: here one sorted list per AG).

**Inodes** (``xfs_ialloc_ag_select``): a new directory's inode goes to the next AG of a
rotor (``xfs_ialloc_next_ag``: ``m_agirotor``, from AG 0), a file's to its parent
directory's AG; an AG without a free inode or room for a new chunk of 64 sends the
search to the next. A chunk is allocated just after the AG's last one, else near the
AG's start (``xfs_ialloc_ag_alloc``). Small directories are short-form (their entries in
the inode): no block. With ``inode32`` (the default before 3.7) on a filesystem whose
inode numbers could pass 32 bits, inodes stay in the AGs whose numbers fit
(``xfs_initialize_perag``) and a file's first data go to the next AG of a second rotor
(``xfs_alloc_vextent`` ``XFS_ALLOCTYPE_START_BNO`` with ``m_agfrotor``).

**Delayed allocation** (``xfs_iomap_write_delay``): a buffered write reserves blocks
without placing them; beyond EOF the reservation is extended (speculative preallocation:
2.6.18 to the next multiple of ``m_writeio_blocks``, 64 KiB by default
(``XFS_WRITEIO_LOG_LARGE``) or ``allocsize=``; from 2.6.38 ``xfs_iomap_prealloc_size``:
twice the contiguous extents ending at the write, a power of 2, at least 64 KiB, at most
``MAXEXTLEN``; none while the file is under 64 KiB). Writeback places them
(``xfs_iomap_write_allocate`` / ``xfs_bmapi_convert_delalloc``): a delayed extent is
allocated **whole** (``xfs_bmapi``: ``alen = got.br_blockcount`` of the delayed extent),
in as few pieces as the free space allows. Adjacent delayed ranges merge
(``xfs_bmap_add_extent_hole_delay``); blocks already allocated are overwritten in place.

**Where** (``xfs_bmap_btalloc``, ``xfs_bmap_adjacent``): the first extent of a file near
its inode; after a real extent at end of file, at that extent's end plus the gap in file
offsets (same AG); inside the file, the nearer of the previous extent's end (plus the gap
if it is under 4 x the length, ``XFS_ALLOC_GAP_UNITS``) and the next extent's start less
the length. ``minlen`` is the request or the longest free extent of any AG
(the ``nullfb`` scan); the goal AG's free extent nearest the goal that holds the request
(``xfs_alloc_ag_vextent_near``), else its largest; an AG whose longest extent is under
``minlen`` passes the request to the next (``xfs_alloc_vextent``).

**The extent map**: the inode holds the extents while they fit its data fork (2.6.18: 256 -
100 bytes / 16 per extent = 9; with 512-byte v3 inodes 21); beyond, a bmap B+tree whose
leaves hold (block size - header) / 16 records, its blocks allocated near the inode
(``xfs_bmap_extents_to_btree``). A read of a file block must have the leaf (and any
node) mapping it: `Xfs.metadata_blocks`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from blksim.block.elevator import kernel_version
from blksim.hostio.fs.xfs_mkfs import XfsGeometry, XfsMountOptions, INODES_PER_CHUNK, \
    MIN_FREELIST

MAXEXTLEN = (1 << 21) - 1         # XFS_MAX_BMBT_EXTLEN (xfs_bmap_btree.h)
GAP_UNITS = 4                     # XFS_ALLOC_GAP_UNITS (xfs_bmap.c)
#: how much a thread writes between writeback passes that convert the file's delayed
#: extents: MAX_WRITEBACK_PAGES (1024 pages, mm/page-writeback.c, 2.6.18), one pass of
#: the flusher over the inode (blksim's reading of it; docs/filesystems.md)
WRITEBACK_BYTES = 1024 * 4096


class _Inode:
    """A file being placed: its real extents (file block, device block, blocks), sorted;
    its delayed ranges (file block, blocks); its size; its B+tree blocks."""

    __slots__ = ("number", "agno", "block", "extents", "delay", "size", "tree")

    def __init__(self, number: int, agno: int, block: int) -> None:
        self.number = number
        self.agno = agno
        self.block = block            # the device block holding the inode
        self.extents = []
        self.delay = []
        self.size = 0                 # in blocks: the in-core EOF
        self.tree = []                # [(first file block covered, [(device block) ...])]


class Xfs:
    """An XFS filesystem made by ``mkfs.xfs <mkfs>`` on a device of ``device_sectors`` and
    mounted with ``-o <mount>`` under the ``kernel`` line (see `hostio.fs`)."""

    kind = "xfs"

    def __init__(self, device_sectors: int, mkfs: str = "", mount: str = "",
                 seed: str = "", kernel: str = "2.6.18") -> None:
        self.kernel = kernel
        self.version = v = kernel_version(kernel)
        self.geometry = g = XfsGeometry(device_sectors * 512, mkfs, kernel)
        self.mount = XfsMountOptions(mount, kernel, g.log_version)
        self.mkfs = mkfs
        self.sectors_per_block = g.block_size // 512
        # fallocate(2) allocating unwritten extents: xfs_vn_fallocate from 2.6.23 (before,
        # only the XFS_IOC_RESVSP ioctl)
        self.fallocate = v >= (2, 6, 23)
        self._free = []               # per AG: [starts], [lengths] of its free extents
        for agno in range(g.agcount):
            lo = g.ag_start(agno) + g.prealloc_blocks
            self._free.append(([lo], [g.ag_start(agno) + g.ag_blocks(agno) - lo]))
        # the internal log, at the middle AG's first free block
        self._take(g.log_start, g.log_blocks)
        for agno in range(g.agcount):             # mkfs fills each AG's free list
            self._take(*self._near(agno, g.ag_start(agno), MIN_FREELIST, MIN_FREELIST))
        self._chunks = [[] for _ in range(g.agcount)]   # per AG: [inode chunk block, used]
        self.agirotor = 0
        self.agfrotor = 0
        self._inode32 = not self.mount.inode64 and self._max_ino() > 0xFFFFFFFF
        root = self._new_inode(0)                 # mkfs's root directory
        self.dirs = {"/": (root.number, 0)}
        self.files = {}
        self.placed = {}
        self._leaf_min = None

    # ------------------------------------------------------------------ protocol
    @property
    def data_mode(self) -> str:
        """XFS has no ordered data mode: the log never waits for file data. ``writeback``
        tells the I/O path that fsync writes and waits for the pages itself."""
        return "writeback"

    @property
    def barrier(self) -> bool:
        """Whether log writes are barriers (``barrier``, the default since 2.6.17; no
        ``nobarrier`` from 4.19)."""
        return self.mount.barrier

    @property
    def atime(self) -> bool:
        """Whether reads may update the access time (not ``noatime``)."""
        return self.mount.atime

    @property
    def commit_interval(self) -> float:
        """The log's periodic force in seconds: xfssyncd (2.6.18) / the log worker
        (``xfs_log_worker``) every ``xfs_syncd_centisecs``, 3000."""
        return 30.0

    def journal_extents(self) -> tuple:
        """The internal log: one (sector, sectors) piece."""
        g = self.geometry
        spb = self.sectors_per_block
        return ((g.log_start * spb, g.log_blocks * spb),)

    @property
    def journal_thread(self) -> str:
        """The process whose context writes the log: 2.6.18 has the forcing process
        write it and xfslogd complete it; today the CIL push runs in the ``xfs-cil``
        workqueue."""
        return "xfslogd" if self.version < (3,) else "xfs-cil"

    def make_journal(self, fs, device, clock, ids, writeback, submitter):
        """The XFS log (`hostio.fs.xfs_log.XfsLog`) the I/O path tells of writes,
        atime/mtime changes and fsyncs."""
        from blksim.hostio.fs.xfs_log import XfsLog
        return XfsLog(fs, device, clock, ids, writeback, submitter)

    @property
    def addrs(self) -> int:
        """File blocks a caller may step by when asking `metadata_blocks` across a range:
        the fewest file blocks any bmap B+tree leaf covers (no B+tree: one step)."""
        return self._leaf_min or (1 << 40)

    def place_file(self, path: str, nbytes: int, writers: int = 1,
                   write_bytes: int = 1 << 20) -> tuple:
        """Create ``path`` and write its ``nbytes`` as ``writers`` threads do in turn,
        ``write_bytes`` a call each, thread k writing the k-th contiguous part; writeback
        converts the delayed extents every `WRITEBACK_BYTES` written and at close, which
        frees what was preallocated beyond EOF (``xfs_free_eofblocks``). The extents."""
        g = self.geometry
        how = (nbytes, writers, write_bytes)
        if path in self.placed:
            if self.placed[path][0] != how:
                raise ValueError(f"{path} exists already")
            return self.placed[path][1]
        parent = self._directory(path.rsplit("/", 1)[0] or "/")
        inode = self._new_inode(self._ag_select(parent[1], False))
        self.files[path] = inode
        nblocks = -(-nbytes // g.block_size)
        part = -(-nblocks // writers)
        per_call = max(1, write_bytes // g.block_size)
        cursors = [(k * part, min(nblocks, (k + 1) * part)) for k in range(writers)]
        since = 0
        while any(a < b for a, b in cursors):
            for k, (a, b) in enumerate(cursors):
                if a < b:
                    n = min(per_call, b - a)
                    self._delay_write(inode, a, n)
                    cursors[k] = (a + n, b)
                    since += n * g.block_size
                    if since >= WRITEBACK_BYTES:
                        self._writeback(inode)
                        since = 0
        self._writeback(inode)
        self._free_eofblocks(inode, nblocks)
        self._build_tree(inode)
        spb = self.sectors_per_block
        out = []
        for _off, blk, n in inode.extents:
            if out and out[-1][0] + out[-1][1] == blk * spb:
                out[-1] = (out[-1][0], out[-1][1] + n * spb)
            else:
                out.append((blk * spb, n * spb))
        extents = tuple(out)
        self.placed[path] = (how, extents)
        return extents

    def metadata_blocks(self, path: str, block: int) -> list:
        """The bmap B+tree blocks (node, then leaf) a read of file block ``block`` of
        ``path`` must have (``xfs_bmap_read_extents`` / ``xfs_iread_extents``); none while
        the extents fit in the inode."""
        inode = self.files[path]
        if not inode.tree:
            return []
        firsts = [f for f, _ in inode.tree]
        k = max(0, bisect_right(firsts, block) - 1)
        spb = self.sectors_per_block
        return [(b * spb, spb) for b in inode.tree[k][1]]

    def extent_count(self, path: str) -> int:
        """The file's extents as the inode records them (contiguous ones merged)."""
        return len(self.placed[path][1])

    def free_blocks(self) -> int:
        """Blocks not allocated."""
        return sum(sum(lens) for _, lens in self._free)

    # ------------------------------------------------------------------ delayed allocation
    def _delay_write(self, inode: _Inode, off: int, n: int) -> None:
        """``xfs_iomap_write_delay``: reserve the blocks of [off, off + n) not yet
        allocated, with speculative preallocation when the write passes EOF."""
        end = off + n
        if end > inode.size:
            end = max(end, off + n + self._prealloc(inode, off, off + n))
            inode.size = off + n
        for a, b in self._holes(inode, off, end):
            self._add_delay(inode, a, b - a)

    def _prealloc(self, inode: _Inode, off: int, end: int) -> int:
        """Blocks reserved beyond the write's end (see the module docstring)."""
        bs = self.geometry.block_size
        fixed = self.mount.allocsize // bs
        if self.version < (2, 6, 38) or fixed:
            unit = fixed or max(1, 65536 // bs)       # m_writeio_blocks
            last = -(-end // unit) * unit
            # xfs_iomap_eof_align_last_fsb: to the stripe width (swalloc) or unit once
            # the file is at least that large
            g = self.geometry
            stripe = (g.swidth if self.mount.swalloc else g.sunit) // bs
            if stripe and inode.size * bs >= stripe * bs:
                last = -(-last // stripe) * stripe
            return last - end
        min_blocks = max(1, 65536 // bs)
        if inode.size * bs < 65536:
            return 0
        # the extent (real or delayed) ending at the write's start; after a hole, the
        # minimum (contiguous real extents are merged already, so one is all of them)
        plen = 0
        for ranges, key in ((inode.extents, (off,)), (inode.delay, (off,))):
            i = bisect_left(ranges, key) - 1
            if i >= 0 and ranges[i][0] + ranges[i][-1] == off:
                plen = ranges[i][-1]
        if not plen:
            return min_blocks
        blocks = min(min(plen, MAXEXTLEN // 2) * 2, MAXEXTLEN)
        blocks = 1 << (blocks.bit_length() - 1)       # rounddown_pow_of_two
        return max(blocks, min_blocks)

    def _holes(self, inode: _Inode, a: int, b: int) -> list:
        """The parts of [a, b) neither allocated nor delayed."""
        cover = []
        for ranges in (inode.extents, inode.delay):
            i = max(0, bisect_left(ranges, (a,)) - 1)
            while i < len(ranges) and ranges[i][0] < b:
                o, n = ranges[i][0], ranges[i][-1]
                if o + n > a:
                    cover.append((o, o + n))
                i += 1
        cover.sort()
        out = []
        at = a
        for s, e in cover:
            if s > at:
                out.append((at, s))
            at = max(at, e)
        if at < b:
            out.append((at, b))
        return out

    def _add_delay(self, inode: _Inode, off: int, n: int) -> None:
        """Insert a delayed range, merged with adjacent ones up to MAXEXTLEN
        (``xfs_bmap_add_extent_hole_delay``)."""
        d = inode.delay
        i = bisect_left(d, (off,))
        d.insert(i, (off, n))
        if i + 1 < len(d) and off + n == d[i + 1][0] and n + d[i + 1][1] <= MAXEXTLEN:
            n += d.pop(i + 1)[1]
            d[i] = (off, n)
        if i and d[i - 1][0] + d[i - 1][1] == off and d[i - 1][1] + n <= MAXEXTLEN:
            d[i - 1] = (d[i - 1][0], d[i - 1][1] + n)
            d.pop(i)

    def _writeback(self, inode: _Inode) -> None:
        """Convert every delayed range, each whole, in file order."""
        delayed, inode.delay = inode.delay, []
        for off, n in delayed:
            while n:
                goal = self._goal(inode, off, n)
                blk, got = self._alloc(goal, n, initial=off == 0)
                self._add_extent(inode, off, blk, got)
                off += got
                n -= got

    def _free_eofblocks(self, inode: _Inode, nblocks: int) -> None:
        """``xfs_free_eofblocks`` at close: blocks past EOF are given back."""
        keep = []
        for off, blk, n in inode.extents:
            if off >= nblocks:
                self._give(blk, n)
            elif off + n > nblocks:
                self._give(blk + nblocks - off, off + n - nblocks)
                keep.append((off, blk, nblocks - off))
            else:
                keep.append((off, blk, n))
        inode.extents = keep
        inode.delay = []

    def _add_extent(self, inode: _Inode, off: int, blk: int, n: int) -> None:
        ext = inode.extents
        i = bisect_right(ext, (off, 1 << 62, 0))
        ext.insert(i, (off, blk, n))
        # merge with neighbours contiguous in file and on disk (xfs_bmap_add_extent_*)
        j = max(0, i - 1)
        while j + 1 < len(ext):
            o1, b1, n1 = ext[j]
            o2, b2, n2 = ext[j + 1]
            if o1 + n1 == o2 and b1 + n1 == b2 and n1 + n2 <= MAXEXTLEN:
                ext[j:j + 2] = [(o1, b1, n1 + n2)]
            elif j >= i:
                break
            else:
                j += 1

    # ------------------------------------------------------------------ the goal
    def _goal(self, inode: _Inode, off: int, n: int) -> int:
        """``xfs_bmap_btalloc``'s goal block for file blocks [off, off + n): the inode's
        block, moved by ``xfs_bmap_adjacent`` after the neighbouring real extents."""
        ext = inode.extents
        i = bisect_right(ext, (off, 1 << 62, 0))
        prev = ext[i - 1] if i else None
        nxt = ext[i] if i < len(ext) else None
        goal = inode.block
        if nxt is None:                               # at EOF
            if prev is not None and self._same_ag(prev[1], prev[1] + prev[2]):
                goal = prev[1] + prev[2]
                gap = off - (prev[0] + prev[2])
                if gap and self._same_ag(prev[1], goal + gap):
                    goal += gap
            return goal
        prev_bno = got_bno = None
        if prev is not None and self._same_ag(prev[1], prev[1] + prev[2]):
            prev_bno = prev[1] + prev[2]
            prev_diff = gap = off - (prev[0] + prev[2])
            if prev_diff <= GAP_UNITS * n and self._same_ag(prev[1], prev_bno + gap):
                prev_bno += gap
            else:
                prev_diff += gap
        g_off, got_bno, _g_n = nxt
        got_diff = gap = g_off - off
        if got_diff <= GAP_UNITS * n and self._same_ag(got_bno, got_bno - gap):
            got_bno -= gap
        elif self._same_ag(got_bno, got_bno - n):
            got_bno -= n
            got_diff += gap - n
        else:
            got_diff += gap
        if prev_bno is not None:
            return prev_bno if prev_diff <= got_diff else got_bno
        return got_bno

    def _same_ag(self, a: int, b: int) -> bool:
        g = self.geometry
        return 0 <= b < g.dblocks and a // g.agsize == b // g.agsize

    # ------------------------------------------------------------------ free space
    def _alloc(self, goal: int, want: int, initial: bool = False) -> tuple:
        """``xfs_alloc_vextent`` (START_BNO) for a data extent: (block, blocks). The
        file's first data (``XFS_ALLOC_INITIAL_USER_DATA``) under inode32 start at the AG
        rotor, which then moves past the AG used (``m_agfrotor``)."""
        g = self.geometry
        want = min(want, MAXEXTLEN, g.agsize)
        rotor = initial and self._inode32
        if rotor:
            goal = g.ag_start(self.agfrotor % g.agcount)
        longest = [max(lens, default=0) for _, lens in self._free]
        minlen = min(want, max(longest))
        if minlen == 0:
            raise ValueError("the filesystem is full")
        start = min(goal // g.agsize, g.agcount - 1)
        for k in range(g.agcount):
            agno = (start + k) % g.agcount
            if longest[agno] < minlen:
                continue
            at, n = self._near(agno, goal if k == 0 else g.ag_start(agno), want, minlen)
            self._take(at, n)
            if rotor:
                self.agfrotor = agno + 1 if k else self.agfrotor + 1
            return at, n
        raise ValueError("the filesystem is full")

    def _near(self, agno: int, goal: int, want: int, minlen: int) -> tuple:
        """``xfs_alloc_ag_vextent_near``: the free extent of AG ``agno`` nearest ``goal``
        holding ``want`` blocks (at the goal when it is free), else the largest."""
        starts, lens = self._free[agno]
        best = None
        for s, n in zip(starts, lens):
            if n < want:
                continue
            if s <= goal < s + n:
                at = goal if s + n - goal >= want else s + n - want
            elif s > goal:
                at = s
            else:
                at = s + n - want
            d = abs(at - goal)
            if best is None or d < best[0]:
                best = (d, at)
        if best is not None:
            return best[1], want
        k = max(range(len(lens)), key=lambda i: lens[i])
        if lens[k] < minlen:
            raise ValueError("the filesystem is full")
        return starts[k], lens[k]

    def _take(self, at: int, n: int) -> None:
        """Mark [at, at + n) allocated (it lies in one free extent)."""
        agno = at // self.geometry.agsize
        starts, lens = self._free[agno]
        i = bisect_right(starts, at) - 1
        s, k = starts[i], lens[i]
        if i < 0 or at + n > s + k:
            raise AssertionError(f"blocks {at}+{n} are not free")
        pieces = [(s, at - s), (at + n, s + k - at - n)]
        pieces = [(a, b) for a, b in pieces if b > 0]
        starts[i:i + 1] = [a for a, _ in pieces]
        lens[i:i + 1] = [b for _, b in pieces]

    def _give(self, at: int, n: int) -> None:
        """Free [at, at + n), merged with its free neighbours."""
        agno = at // self.geometry.agsize
        starts, lens = self._free[agno]
        i = bisect_right(starts, at)
        starts.insert(i, at)
        lens.insert(i, n)
        if i + 1 < len(starts) and at + n == starts[i + 1]:
            lens[i] += lens.pop(i + 1)
            starts.pop(i + 1)
        if i > 0 and starts[i - 1] + lens[i - 1] == at:
            lens[i - 1] += lens.pop(i)
            starts.pop(i)

    # ------------------------------------------------------------------ inodes
    def _max_ino(self) -> int:
        """The largest inode number the geometry can give (``XFS_AGINO_TO_INO``)."""
        g = self.geometry
        agblklog = (g.agsize - 1).bit_length()
        inopblog = (g.block_size // g.inode_size).bit_length() - 1
        return ((g.agcount - 1) << (agblklog + inopblog)) | ((1 << (agblklog + inopblog)) - 1)

    def _ino_ok(self, agno: int) -> bool:
        """Whether AG ``agno`` may hold inodes (inode32 on a large filesystem: only the
        AGs whose inode numbers fit in 32 bits)."""
        if not self._inode32:
            return True
        g = self.geometry
        agblklog = (g.agsize - 1).bit_length()
        inopblog = (g.block_size // g.inode_size).bit_length() - 1
        return ((agno + 1) << (agblklog + inopblog)) - 1 <= 0xFFFFFFFF

    def _ag_select(self, parent_ag: int, directory: bool) -> int:
        """``xfs_ialloc_ag_select``: the rotor for a directory, the parent's AG for a file,
        then onwards to an AG with a free inode or room for a chunk."""
        g = self.geometry
        if directory:
            start = self.agirotor
            self.agirotor = (self.agirotor + 1) % g.agcount
        else:
            start = parent_ag
        for k in range(g.agcount):
            agno = (start + k) % g.agcount
            if not self._ino_ok(agno):
                continue
            chunks = self._chunks[agno]
            if chunks and chunks[-1][1] < INODES_PER_CHUNK:
                return agno
            if max(self._free[agno][1], default=0) >= g.inode_chunk_blocks:
                return agno
        raise ValueError("no free inodes (no AG has room for a chunk of 64)")

    def _new_inode(self, agno: int) -> _Inode:
        """The next inode of AG ``agno``, a new chunk allocated if needed (after the AG's
        last chunk, else near its start, aligned to the chunk: ``xfs_ialloc_ag_alloc``)."""
        g = self.geometry
        chunks = self._chunks[agno]
        if not chunks or chunks[-1][1] == INODES_PER_CHUNK:
            size = g.inode_chunk_blocks
            after = chunks[-1][0] + size if chunks else None
            at = None
            if after is not None and self._is_free(after, size):
                at = after
            else:
                starts, lens = self._free[agno]
                for s, n in zip(starts, lens):
                    a = -(-s // size) * size
                    if a + size <= s + n:
                        at = a
                        break
            if at is None:
                raise ValueError(f"no room for an inode chunk in AG {agno}")
            self._take(at, size)
            chunks.append([at, 0])
        chunk = chunks[-1]
        index = chunk[1]
        chunk[1] += 1
        per_block = g.block_size // g.inode_size
        agblklog = (g.agsize - 1).bit_length()
        inopblog = per_block.bit_length() - 1
        agbno = chunk[0] - g.ag_start(agno) + index // per_block
        number = (agno << (agblklog + inopblog)) | (agbno << inopblog) | (index % per_block)
        return _Inode(number, agno, chunk[0] + index // per_block)

    def _is_free(self, at: int, n: int) -> bool:
        g = self.geometry
        if at + n > g.dblocks or at // g.agsize != (at + n - 1) // g.agsize:
            return False
        starts, lens = self._free[at // g.agsize]
        i = bisect_right(starts, at) - 1
        return i >= 0 and at + n <= starts[i] + lens[i]

    def _directory(self, path: str) -> tuple:
        """(inode number, AG) of directory ``path``, made with its parents if new (a
        short-form directory: an inode, no block)."""
        if path in self.dirs:
            return self.dirs[path]
        parent = self._directory(path.rsplit("/", 1)[0] or "/")
        inode = self._new_inode(self._ag_select(parent[1], True))
        self.dirs[path] = (inode.number, inode.agno)
        return self.dirs[path]

    # ------------------------------------------------------------------ the bmap B+tree
    def _build_tree(self, inode: _Inode) -> None:
        """The extents that do not fit in the inode go into a bmap B+tree: full leaves
        of (block size - header) / 16 records, a node level while the inode's root cannot
        point at them all; its blocks near the inode."""
        g = self.geometry
        core = 176 if g.crc else 100        # xfs_dinode core (+ di_next_unlinked)
        in_inode = (g.inode_size - core) // 16
        ext = inode.extents
        if len(ext) <= in_inode:
            return
        per_leaf = (g.block_size - (72 if g.crc else 24)) // 16
        per_node = (g.block_size - (72 if g.crc else 24)) // 16
        root_ptrs = (g.inode_size - core - 4) // 16
        leaves = [ext[i:i + per_leaf] for i in range(0, len(ext), per_leaf)]
        goal = inode.block
        blocks = []
        for _ in leaves:
            at, _n = self._alloc(goal, 1)
            blocks.append(at)
            goal = at + 1
        paths = [[b] for b in blocks]
        if len(leaves) > root_ptrs:                 # one node level under the root
            if len(leaves) > root_ptrs * per_node:
                raise ValueError(f"{len(ext)} extents need a bmap B+tree deeper than "
                                 f"blksim models (two levels below the inode)")
            for first in range(0, len(leaves), per_node):
                at, _n = self._alloc(goal, 1)
                goal = at + 1
                for path in paths[first:first + per_node]:
                    path.insert(0, at)
        inode.tree = [(leaf[0][0], paths[k]) for k, leaf in enumerate(leaves)]
        span = min((leaves[k + 1][0][0] - leaves[k][0][0] for k in range(len(leaves) - 1)),
                   default=None)
        if span:
            self._leaf_min = min(self._leaf_min or span, span)
