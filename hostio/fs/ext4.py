"""ext4's extents, its multi-block allocator and delayed allocation, as Linux 2.6.32 and
5.4-6.6 lay out a file's blocks (fs/ext4/extents.c, mballoc.c, inode.c, ialloc.c).

**Extents** (fs/ext4/extents.c): a file maps runs of blocks, at most 32768 each
(``EXT_INIT_MAX_LEN``); neighbours contiguous on both sides merge
(``ext4_ext_try_to_merge``). The inode holds 4 extents (``i_data``: a 12-byte header and
12-byte entries); a fifth makes the tree one level deeper (``ext4_ext_grow_indepth``: a
leaf block, goal the inode's goal block, as ``ext4_ext_find_goal`` gives without a path);
a leaf holds (block size - 12) / 12 extents, and a full one gets a new leaf near the new
extent (``ext4_ext_split``, ``ext4_ext_new_meta_block``); more than 4 leaves, an index
level. A read of a block must first read the index and leaf blocks on its path
(``ext4_find_extent`` -> ``read_extent_tree_block``): `metadata_blocks`.

**The goal** (``ext4_ext_find_goal``, ``ext4_inode_to_goal_block``): next to the nearest
extent before the block (its physical start plus the logical distance); without extents,
the inode's group, with flex_bg of 4 groups or more the flex group's first group for a
directory and its second for a regular file (``EXT4_FLEX_SIZE_DIR_ALLOC_SCHEME``), plus,
without delalloc, a colour ``(pid % 16) * blocks_per_group / 16``.

**mballoc** (fs/ext4/mballoc.c ``ext4_mb_new_blocks``): a data request of a file whose size
(``max(end of request, i_size)``) is at most ``s_mb_stream_request`` (16 blocks) is served
from the locality group's preallocation, 512 blocks (``s_mb_group_prealloc``;
``ext4_mb_group_or_file``), unless the file is closed and the request covers its tail
(``EXT4_MB_HINT_NOPREALLOC``); a larger file's request is normalised
(``ext4_mb_normalize_request``): to 16 KiB ... 1 MiB by the size from the file's start,
above that (4 KiB blocks) an 8 MiB-aligned 8 MiB chunk, trimmed against the file's blocks
on either side, and what is not used now stays the inode's preallocation
(``ext4_mb_new_inode_pa``) for the blocks after it. The chunk is found
(``ext4_mb_regular_allocator``): at the goal if that many blocks are free there
(``ext4_mb_find_by_goal``); else, a power-of-2 request of 4 blocks or more
(``s_mb_order2_reqs``), the first aligned free buddy of that size in the groups from the
goal's (criterion 0); else the first free run long enough (criteria 1-2); else the first
free run at all (criterion 3). A stream request that misses its goal searches from where
the last stream allocation ended (``s_mb_last_group``/``s_mb_last_start``).

**Delayed allocation** (``delalloc``, the default): a write only reserves; the flusher
allocates when it writes the pages back (``ext4_writepages`` ->
``mpage_prepare_extent_to_map`` -> ``mpage_map_and_submit_extent``), in file order, one
contiguous run of dirty pages per mapping, at most 2048 blocks in 5.4-6.6
(``MAX_WRITEPAGES_EXTENT_LEN``) and 8 MiB in 2.6.32 (``mpage_add_bh_to_extent``). So
threads writing one file in turn, or many small appends, end up as a few large extents.
With ``nodelalloc`` each write maps its blocks at once (``ext4_get_block`` per buffer), in
the order the threads write, from the inode's preallocations.
"""

from __future__ import annotations

from bisect import bisect_right

from blksim.hostio.fs.ext3 import Ext3
from blksim.hostio.fs.ext4_mkfs import Ext4Geometry, Ext4MountOptions, ext4_rules

EXT_INIT_MAX_LEN = 32768            # fs/ext4/ext4_extents.h
IN_INODE = 4                        # extents (or index entries) in i_data
STREAM_REQUEST = 16                 # MB_DEFAULT_STREAM_THRESHOLD (blocks)
GROUP_PREALLOC = 512                # MB_DEFAULT_GROUP_PREALLOC (blocks)
ORDER2_REQS = 2                     # MB_DEFAULT_ORDER2_REQS
FLEX_DIR_SCHEME = 4                 # EXT4_FLEX_SIZE_DIR_ALLOC_SCHEME
#: time granularity of a 256-byte inode's times: the coarse clock's tick (current_time),
#: a jiffy at HZ 250 (blksim's choice: the run's default HZ); 128-byte inodes: 1 s
JIFFY = 1 / 250


class Ext4Inode:
    """A file or directory being placed: its extents ([logical, physical, length], in
    logical order), its extent-tree blocks and its preallocations."""

    __slots__ = ("number", "group", "is_dir", "extents", "leaves", "index", "pas",
                 "size_blocks")

    def __init__(self, number: int, group: int, is_dir: bool = False) -> None:
        self.number = number
        self.group = group
        self.is_dir = is_dir
        self.extents: list = []
        self.leaves: list = []         # leaf blocks, in logical order
        self.index: list = []          # index blocks (depth 2)
        self.pas: list = []            # [lstart, length, pstart, mapped bytearray]
        self.size_blocks = 0           # i_size in blocks


class Ext4(Ext3):
    """An ext4 filesystem made by ``mkfs.ext4 <mkfs>`` on a device of ``device_sectors``
    and mounted with ``-o <mount>``, following the run's ``kernel`` (see `hostio.fs` for
    the protocol). Inodes and directories are placed by ext3's rules (`Ext3`) made
    flex-aware as ext4's ``find_group_other`` and ``find_group_orlov``."""

    kind = "ext4"
    journal_thread = "jbd2"

    lg_pa = None                        # the locality group's preallocation [pstart, left]
    last_stream = 0                     # s_mb_last_group/start, as a block

    def _follow(self, kernel: str) -> None:
        self.rules = ext4_rules(kernel)

    def _make_geometry(self, device_bytes: int, mkfs: str) -> Ext4Geometry:
        g = Ext4Geometry(device_bytes, mkfs)
        newer = sorted(g.features & {"metadata_csum", "metadata_csum_seed"})
        if self.rules == "2.6.32" and newer:
            # RO_COMPAT_METADATA_CSUM came with 3.5, INCOMPAT_CSUM_SEED with 4.4
            raise ValueError(f"mkfs: Linux 2.6.32's ext4 cannot mount a filesystem with "
                             f"{' and '.join(newer)}; give -O "
                             f"{','.join('^' + f for f in newer)}")
        return g

    def _mount_options(self, mount: str) -> Ext4MountOptions:
        return Ext4MountOptions(mount, self.rules)

    @staticmethod
    def _addrs(block_size: int) -> int:
        """Extents per leaf block, entries per index block."""
        return (block_size - 12) // 12

    def _mkfs_files(self) -> list:
        """mke2fs 1.47: root, lost+found (16 KiB), the resize inode's block, first-fit
        from the first flex group (``ext2fs_find_inode_goal``), then the journal from the
        middle (``get_midpoint_journal_block``, ``ext2fs_fallocate``). Its runs."""
        g = self.geometry
        self._first_fit(1 + min(12, 16384 // g.block_size)
                        + (1 if g.reserved_gdt else 0))
        return self._take_from(g.journal_goal(self._free_blocks), g.journal_blocks)

    # ------------------------------------------------------------------ protocol
    @property
    def atime(self) -> bool:
        """Whether reads may update the access time (not ``noatime``)."""
        return self.mount.atime != "noatime"

    @property
    def delalloc(self) -> bool:
        """Whether blocks are allocated at writeback (``delalloc``)."""
        return self.mount.delalloc

    @property
    def time_granularity(self) -> float:
        """Seconds between two different inode times: a jiffy with the 256-byte inode's
        nanosecond times (``s_time_gran``, the coarse clock), 1 s with 128-byte inodes."""
        return JIFFY if self.geometry.inode_size > 128 else 1.0

    def make_journal(self, fs, device, clock, ids, writeback, submitter):
        """The filesystem's jbd2 journal (`hostio.fs.jbd2.Jbd2Journal`)."""
        from blksim.hostio.fs.jbd2 import Jbd2Journal
        return Jbd2Journal(fs, device, clock, ids, writeback, submitter)

    def place_file(self, path: str, nbytes: int, writers: int = 1,
                   write_bytes: int = 1 << 20) -> tuple:
        """Create ``path`` and write its ``nbytes`` as ``writers`` threads do in turn,
        ``write_bytes`` a call each, thread k writing the k-th contiguous part; close
        it. With delalloc the flusher then allocates it in file order; without, each
        call allocates. The file's extents (device sector, sectors), in file order."""
        g = self.geometry
        how = (nbytes, writers, write_bytes)
        if path in self.placed:
            return self._placed_again(path, how)
        inode = self._create(path)
        nblocks = -(-nbytes // g.block_size)
        if self.delalloc:
            inode.size_blocks = nblocks             # written (and closed) before writeback
            chunk = 2048 if self.rules == "mq" else (8 << 20) // g.block_size
            for at in range(0, nblocks, chunk):
                self._map(inode, at, min(chunk, nblocks - at), 0, closed=True)
        else:
            for k, a, n in self._calls(nbytes, writers, write_bytes):
                inode.size_blocks = max(inode.size_blocks, a + n)
                # ext4_get_block per buffer: the call's blocks in order, each from the
                # preallocation the first one made
                self._map(inode, a, n, k, closed=False)
        self._discard(inode)                        # ext4_discard_preallocations
        extents = self._sectors([(p, n) for _, p, n in inode.extents])
        self.placed[path] = (how, extents)
        return extents

    def metadata_blocks(self, path: str, block: int) -> list:
        """The device sectors of the extent-tree blocks (index, then leaf) a read of
        file block ``block`` of ``path`` reads first (``ext4_find_extent``)."""
        inode = self.files[path]
        if len(inode.extents) <= IN_INODE:
            return []
        k = max(0, bisect_right(inode.extents, [block, float("inf")]) - 1)
        leaf = min(k // self.addrs, len(inode.leaves) - 1)
        out = []
        if inode.index:
            out.append(inode.index[min(leaf // self.addrs, len(inode.index) - 1)])
        out.append(inode.leaves[leaf])
        spb = self.sectors_per_block
        return [(b * spb, spb) for b in out]

    def extent_count(self, path: str) -> int:
        """The extents of ``path`` in its extent tree."""
        return len(self.files[path].extents)

    # ------------------------------------------------------------------ inodes
    def _flex_stats(self, flex: int) -> tuple:
        """``get_orlov_stats``: (free inodes, free blocks, directories) of flex group
        ``flex``."""
        size = self.geometry.flex_size
        members = range(flex * size, min((flex + 1) * size, self.geometry.groups))
        return (sum(self._free_inodes(k) for k in members),
                sum(self._free_blocks(k) for k in members),
                sum(self.used_dirs[k] for k in members))

    def _first_with_inodes(self, flex: int) -> int:
        """The first group of flex group ``flex`` with a free inode, or -1."""
        size = self.geometry.flex_size
        for k in range(flex * size, min((flex + 1) * size, self.geometry.groups)):
            if self._free_inodes(k):
                return k
        return -1

    def _group_other(self, parent_group: int, parent_ino: int) -> int:
        """``find_group_other`` (fs/ext4/ialloc.c, 2.6.32 and 5.4-6.6): with flex groups,
        the first group of the parent's flex group with a free inode, else Orlov's
        search for another flex group (without the top-level rule)."""
        g = self.geometry
        if g.flex_size == 1:
            return super()._group_other(parent_group, parent_ino)
        found = self._first_with_inodes(parent_group // g.flex_size)
        return found if found >= 0 else self._orlov_flex(None, parent_group)

    def _group_orlov(self, parent: str) -> int:
        """``find_group_orlov`` (fs/ext4/ialloc.c): with flex groups, over flex groups."""
        if self.geometry.flex_size == 1:
            return super()._group_orlov(parent)
        return self._orlov_flex(parent, self.dirs[parent][1])

    def _orlov_flex(self, parent, parent_group: int) -> int:
        """ext4's Orlov on flex groups: a top-level directory (``parent`` "/") in the flex
        group with the fewest directories among those with at least the average free
        inodes and blocks, searched from a random one (the kernel starts at the name's
        directory hash: here the seeded generator); other inodes in the first flex group
        from the parent's under ``max_dirs`` with ``min_inodes`` and ``min_blocks`` free;
        then the first group of it with a free inode; else the first group from the
        parent's with the average free inodes."""
        g = self.geometry
        size = g.flex_size
        n = -(-g.groups // size)
        stats = [self._flex_stats(f) for f in range(n)]
        freei = sum(s[0] for s in stats)
        avefreei, avefreeb = freei // n, sum(s[1] for s in stats) // n
        chosen = -1
        if parent == "/":
            start = self._random.randrange(n)
            best = g.inodes_per_group
            for i in range(n):
                f = (start + i) % n
                fi, fb, dirs = stats[f]
                if fi and dirs < best and fi >= avefreei and fb >= avefreeb:
                    chosen, best = f, dirs
        else:
            ndirs = sum(self.used_dirs)
            max_dirs = ndirs // n + g.inodes_per_group * size // 16
            min_inodes = max(1, avefreei - g.inodes_per_group * size // 4)
            min_blocks = avefreeb - g.blocks_per_group * size // 4
            start = parent_group // size
            for i in range(n):
                f = (start + i) % n
                fi, fb, dirs = stats[f]
                if dirs < max_dirs and fi >= min_inodes and fb >= min_blocks:
                    chosen = f
                    break
        if chosen >= 0:
            found = self._first_with_inodes(chosen)
            if found >= 0:
                return found
        avefreei = freei // g.groups                  # fallback: on groups
        for i in range(g.groups):
            k = (parent_group + i) % g.groups
            if self._free_inodes(k) and self._free_inodes(k) >= avefreei:
                return k
        return -1

    def _new_inode(self, group: int) -> Ext4Inode:
        g = self.geometry
        if group < 0:
            raise ValueError(f"no free inodes ({g.inodes} made by mke2fs)")
        self.inodes_used[group] += 1
        return Ext4Inode(group * g.inodes_per_group + self.inodes_used[group], group)

    def _write(self, inode: Ext4Inode, block: int, count: int, pid: int) -> list:
        """A directory's block (``ext4_append``: allocated at once, no preallocation)."""
        inode.is_dir = True
        at, n = self._find(self._inode_goal(inode, pid), count, count, data=False)
        self._mark(at, n)
        self._insert(inode, block, at, n)
        return [(block, at, n)]

    def _inode_goal(self, inode: Ext4Inode, pid: int) -> int:
        """``ext4_inode_to_goal_block`` (fs/ext4/balloc.c 5.4-6.6; ``ext4_ext_find_goal``
        in 2.6.32)."""
        g = self.geometry
        group = inode.group
        if g.flex_size >= FLEX_DIR_SCHEME:
            group &= ~(g.flex_size - 1)
            if not inode.is_dir:
                group += 1
        if group >= g.groups:       # past the end: ext4_mb_initialize_context's fallback
            return g.first_data_block
        start = g.group_start(group)
        if self.delalloc:
            return start
        span = g.blocks_per_group if start + g.blocks_per_group <= g.blocks - 1 \
            else g.blocks - 1 - start
        return start + (pid % 16) * (span // 16)

    def _find_goal(self, inode: Ext4Inode, block: int, pid: int) -> int:
        """``ext4_ext_find_goal``: beside the nearest extent, else the inode's goal (in
        2.6.32, without delalloc, plus the logical block: ``bg_start + colour + block``)."""
        if not inode.extents:
            goal = self._inode_goal(inode, pid)
            if self.rules == "2.6.32" and not self.delalloc:
                goal += block
            return goal if goal < self.geometry.blocks else self.geometry.first_data_block
        k = max(0, bisect_right(inode.extents, [block, float("inf")]) - 1)
        lblk, pblk, _ = inode.extents[k]
        goal = pblk + (block - lblk)
        return goal if 0 <= goal < self.geometry.blocks else pblk

    # ------------------------------------------------------------------ mballoc
    def _map(self, inode: Ext4Inode, block: int, count: int, pid: int, closed: bool) -> None:
        """``ext4_map_blocks`` with create: allocate file blocks [block, block + count),
        from a preallocation that covers them or from ``ext4_mb_new_blocks``."""
        while count:
            n = self._use_pa(inode, block, count)
            if n:
                block += n
                count -= n
                continue
            goal = self._find_goal(inode, block, pid)
            size = max(block + count, inode.size_blocks)
            if closed and block + count >= inode.size_blocks:          # NOPREALLOC
                at, got = self._find(goal, count, count)
                self._mark(at, got)
                self._insert(inode, block, at, got)
            elif size <= STREAM_REQUEST:                               # locality group
                self._from_group_pa(inode, block, count, goal)
                got = count
            else:                                                      # inode PA
                start, length = self._normalize(inode, block, count, size)
                end = start + length
                at, length = self._find(goal - (block - start), length,
                                        block - start + 1, stream=True)
                if start + length <= block:
                    # less than the normaliser wanted (criterion 3): the found space must
                    # cover the request (ext4_mb_new_inode_pa moves the start to it)
                    start = block
                    length = min(length, end - block)
                self._mark(at, length)
                self.last_stream = at        # ext4_mb_use_best_found: the found start
                inode.pas.append([start, length, at, bytearray(length)])
                got = self._use_pa(inode, block, count)
            block += got
            count -= got

    def _normalize(self, inode: Ext4Inode, block: int, count: int, size: int) -> tuple:
        """``ext4_mb_normalize_request``: (logical start, blocks) of the request rounded
        as the file's size says, trimmed against its blocks and preallocations."""
        bs = self.geometry.block_size
        nbytes = size * bs
        start = 0
        for limit in (16, 32, 64, 128, 256, 512, 1024):
            if nbytes <= limit << 10:
                length = (limit << 10) // bs
                break
        else:
            # NRL_CHECK_SIZE(req, size, max, chunk): req <= size or max <= chunk, where
            # max = 2 << bsbits (twice the block size)
            top = 2 * bs
            if nbytes <= 4 << 20 or top <= 2 * 1024:
                chunk = 2 << 20
            elif nbytes <= 8 << 20 or top <= 4 * 1024:
                chunk = 4 << 20
            elif count * bs <= 8 << 20 or top <= 8 * 1024:
                chunk = 8 << 20
            else:
                chunk = 0                # the request as it is
            if chunk:
                length = chunk // bs
                start = block // length * length
            else:
                start, length = block, count
        # a small group must not move the chunk to another one
        bpg = self.geometry.blocks_per_group
        start = max(start, block // bpg * bpg)
        end = max(start + length, block + count)
        # the file's blocks and preallocations on either side (ar->lleft/lright, PAs)
        ext = inode.extents
        k = bisect_right(ext, [block, float("inf")])
        taken = [(p[0], p[0] + p[1]) for p in inode.pas]
        if k:
            taken.append((ext[k - 1][0], ext[k - 1][0] + ext[k - 1][2]))
        if k < len(ext):
            taken.append((ext[k][0], ext[k][0] + ext[k][2]))
        for lo, hi in taken:
            if hi <= block:
                start = max(start, hi)
            elif lo >= block + count:
                end = min(end, lo)
        return start, end - start

    def _use_pa(self, inode: Ext4Inode, block: int, count: int) -> int:
        """``ext4_mb_use_preallocated``: map what an inode preallocation covers."""
        for pa in inode.pas:
            lstart, length, pstart, mapped = pa
            if lstart <= block < lstart + length:
                n = min(count, lstart + length - block)
                off = block - lstart
                mapped[off:off + n] = b"\x01" * n
                self._insert(inode, block, pstart + off, n)
                if mapped.count(0) == 0:       # used up: ext4_mb_pa_free
                    inode.pas.remove(pa)
                return n
        return 0

    def _from_group_pa(self, inode: Ext4Inode, block: int, count: int, goal: int) -> None:
        """``ext4_mb_use_group_pa`` / ``ext4_mb_new_group_pa``: the locality group's
        preallocation, a new one of ``s_mb_group_prealloc`` blocks when it is short."""
        if self.lg_pa is None or self.lg_pa[1] < count:
            at, n = self._find(goal, GROUP_PREALLOC, count)
            self._mark(at, n)
            self.lg_pa = [at, n]
        at = self.lg_pa[0]
        self.lg_pa = [at + count, self.lg_pa[1] - count]
        self._insert(inode, block, at, count)

    def _discard(self, inode: Ext4Inode) -> None:
        """``ext4_discard_preallocations``: the unused blocks of the inode's
        preallocations are freed."""
        for _, length, pstart, mapped in inode.pas:
            for off in range(length):
                if not mapped[off]:
                    self.used[pstart + off] = 0
                    self.owner_count -= 1
        inode.pas = []

    def _find(self, goal: int, want: int, least: int, stream: bool = False,
              data: bool = True) -> tuple:
        """``ext4_mb_regular_allocator``: (first block, count) of a free run of ``want``
        blocks (at least ``least``; see the module docstring), not yet marked; ``data``:
        a file's data (EXT4_MB_HINT_DATA), kept out of a flex group's first group by
        criterion 0 (``ext4_mb_good_group``)."""
        g = self.geometry
        used = self.used
        if not 0 <= goal < g.blocks:
            goal = g.first_data_block
        group_end = min(g.group_start((goal - g.first_data_block) // g.blocks_per_group)
                        + g.blocks_per_group, g.blocks)
        if goal + want <= group_end and used.find(1, goal, goal + want) < 0:
            return goal, want                                 # ext4_mb_find_by_goal
        if stream and self.last_stream < g.blocks:
            goal = self.last_stream
        first = (goal - g.first_data_block) // g.blocks_per_group
        order = [(first + k) % g.groups for k in range(g.groups)]
        flex = g.flex_size
        if want >= 1 << (ORDER2_REQS - 1) and not want & (want - 1):    # criterion 0
            for grp in order:
                if data and flex >= FLEX_DIR_SCHEME and grp % flex == 0:
                    continue
                lo = g.group_start(grp)
                for at, end in self._free_runs(grp):
                    aligned = lo + -(-(at - lo) // want) * want    # a buddy of the size
                    if aligned + want <= end:
                        return aligned, want
        for need in (want, least, 1):                               # criteria 1-3
            for grp in order:
                for at, end in self._free_runs(grp):
                    if end - at >= need:
                        return at, min(want, end - at)
        raise ValueError("the filesystem is full")

    def _free_runs(self, group: int):
        """The free runs [start, end) of ``group``, in block order."""
        g = self.geometry
        used = self.used
        lo = g.group_start(group)
        hi = min(lo + g.blocks_per_group, g.blocks)
        at = used.find(0, lo, hi)
        while at >= 0:
            stop = used.find(1, at, hi)
            end = hi if stop < 0 else stop
            yield at, end
            at = used.find(0, end, hi) if end < hi else -1

    def _take_from(self, goal: int, n: int) -> list:
        """``ext2fs_fallocate`` from ``goal``: the first ``n`` free blocks at or after it
        (wrapping to the start), as runs."""
        runs = []
        at = goal
        while n:
            at = self.used.find(0, at)
            if at < 0:
                at = self.used.find(0, 0)
                if at < 0:
                    raise ValueError("mkfs: no room for the journal")
            stop = self.used.find(1, at, at + n)
            k = (min(at + n, len(self.used)) if stop < 0 else stop) - at
            self._mark(at, k)
            runs.append((at, k))
            n -= k
        return runs

    # ------------------------------------------------------------------ extent tree
    def _insert(self, inode: Ext4Inode, block: int, at: int, n: int) -> None:
        """``ext4_ext_insert_extent``: add [block, at, n], merged with a neighbour
        contiguous on both sides (``ext4_ext_try_to_merge``), growing the tree as the
        extents outgrow it."""
        ext = inode.extents
        k = bisect_right(ext, [block, float("inf")])
        if k and ext[k - 1][0] + ext[k - 1][2] == block and \
                ext[k - 1][1] + ext[k - 1][2] == at and ext[k - 1][2] + n <= EXT_INIT_MAX_LEN:
            ext[k - 1][2] += n
            k -= 1
        else:
            ext.insert(k, [block, at, n])
        if k + 1 < len(ext) and ext[k][0] + ext[k][2] == ext[k + 1][0] and \
                ext[k][1] + ext[k][2] == ext[k + 1][1] and \
                ext[k][2] + ext[k + 1][2] <= EXT_INIT_MAX_LEN:
            ext[k][2] += ext[k + 1][2]
            del ext[k + 1]
        inode.size_blocks = max(inode.size_blocks, block + n)
        count = len(ext)
        if count <= IN_INODE:
            return
        leaves = -(-count // self.addrs)
        while len(inode.leaves) < leaves:
            # the first leaf: ext4_ext_grow_indepth, goal the inode's; a later one:
            # ext4_ext_split, goal beside the new extent
            goal = self._inode_goal(inode, 0) if not inode.leaves else at + n
            blk, _ = self._find(goal, 1, 1, data=False)
            self._mark(blk, 1)
            inode.leaves.append(blk)
        if len(inode.leaves) > IN_INODE:
            while len(inode.index) < -(-len(inode.leaves) // self.addrs):
                blk, _ = self._find(self._inode_goal(inode, 0), 1, 1, data=False)
                self._mark(blk, 1)
                inode.index.append(blk)
