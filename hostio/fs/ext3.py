"""ext3's block allocator and block map, as Linux 2.6.18 allocates a file's blocks when
it is written (fs/ext3/inode.c, fs/ext3/balloc.c, fs/ext3/ialloc.c).

**The block map** (fs/ext3/inode.c ``ext3_block_to_path``): the inode holds 12 direct
pointers, then one single, one double and one triple indirect block; an indirect block
holds block size / 4 pointers. A file block past the twelfth is found through 1, 2 or 3
indirect blocks, which a read must have in memory first (``ext3_get_branch``).

**Where a block goes** (``ext3_get_blocks_handle`` -> ``ext3_find_goal``,
``ext3_alloc_branch``): the goal is the block after the one last allocated if this
block follows it in the file (``last_alloc_logical_block + 1``); otherwise, as
``ext3_find_near``, the nearest earlier pointer in the same indirect block (or in the
inode), else the indirect block's own place, else the start of the inode's block group
plus a colour, ``(pid % 16) * blocks_per_group / 16``. The missing indirect blocks of
the path and the data block are allocated together from that goal (``ext3_alloc_blocks``):
the indirect blocks land just before the data they map.

**The reservation window** (fs/ext3/balloc.c ``ext3_try_to_allocate_with_rsv``,
``alloc_new_reservation``): each inode being written owns a window of free blocks, 8 at
first (``EXT3_DEFAULT_RESERVE_BLOCKS``). A goal inside the window is allocated there, at
the goal or the next free block after it; a goal outside it gets a new window starting at
the first free block from the goal, twice as large as the last if more than half of that
was used (at most ``EXT3_MAX_RESERVE_BLOCKS``, 1027). A group without room sends the
search to the next groups (``ext3_new_blocks``).

**Inodes** (fs/ext3/ialloc.c): a regular file's inode goes in its directory's group if
that has free inodes and blocks, else in a group found by a quadratic hash from it, else
the next with free inodes (``find_group_other``). A directory's goes where Orlov's
allocator says (``find_group_orlov``): a top-level directory in the group with the fewest
directories among those with at least the average free inodes and blocks, searched from
a random group (``get_random_bytes``: here a generator seeded from the run's seed and the
device); a deeper one in the first group from its parent's with fewer than ``max_dirs``
directories and at least ``min_inodes`` and ``min_blocks`` free; else the first group
with the average free inodes. A file's data goal is its inode's group, so the files of
one top-level directory gather in that directory's group. A directory holds one block.

**mke2fs's own files** (misc/mke2fs.c, e2fsprogs 1.39, in this order): the root
directory (1 block), lost+found (16 KiB, at most 12 blocks), the resize inode's double-indirect block
(``resize_inode``), then the journal (inode 8), each first-fit from the filesystem's
start with its indirect blocks in block-map order (``ext2fs_block_iterate``).
"""

from __future__ import annotations

import random
from array import array

from blksim.hostio.fs.ext3_mkfs import Ext3Geometry, Ext3MountOptions

DEFAULT_RESERVE = 8          # EXT3_DEFAULT_RESERVE_BLOCKS (include/linux/ext3_fs.h, 2.6.18)
MAX_RESERVE = 1027           # EXT3_MAX_RESERVE_BLOCKS
NDIR = 12                    # EXT3_NDIR_BLOCKS
FIRST_INO = 11               # EXT3_GOOD_OLD_FIRST_INO: lost+found; files from 12


class Inode:
    """A file being placed: its block map (containers of pointers, keyed by their path
    from the inode), its reservation window and its last allocation."""

    __slots__ = ("number", "group", "containers", "where", "last_logical", "last_physical",
                 "rsv_start", "rsv_end", "rsv_goal", "rsv_hit")

    def __init__(self, number: int, group: int, addrs: int) -> None:
        self.number = number
        self.group = group
        self.containers = {(): array("l", [0] * (NDIR + 3))}   # () is the inode's i_data
        self.where = {}                # container key -> its block (indirect blocks)
        self.last_logical = -2
        self.last_physical = 0
        self.rsv_start = self.rsv_end = -1
        self.rsv_goal = DEFAULT_RESERVE
        self.rsv_hit = 0


class Ext3:
    """An ext3 filesystem made by ``mke2fs -j <mkfs>`` on a device of ``device_sectors``
    and mounted with ``-o <mount>`` (see `hostio.fs` for the protocol)."""

    kind = "ext3"
    #: fallocate(2) allocating unwritten extents: ext3 has none (``ext3`` has no
    #: ``fallocate`` inode operation in any line; glibc falls back to writing zeros)
    fallocate = False

    def __init__(self, device_sectors: int, mkfs: str = "", mount: str = "",
                 seed: str = "", kernel: str = "2.6.18") -> None:
        self._follow(kernel)
        self.kernel = kernel                       # the run's kernel line
        self.geometry = g = self._make_geometry(device_sectors * 512, mkfs)
        self._random = random.Random(f"{self.kind}/{seed}")  # find_group_orlov's start
        self.mount = self._mount_options(mount)
        self.mkfs = mkfs
        self.addrs = self._addrs(g.block_size)
        self.sectors_per_block = g.block_size // 512
        self.used = bytearray(g.blocks)            # 1: allocated
        self.owner_count = 0                       # blocks allocated (metadata included)
        for start, n in g.metadata_runs():
            self._mark(start, n)
        if g.first_data_block:
            self._mark(0, 1)                       # the boot block before group 0
        self.files = {}                            # path -> Inode
        self.placed = {}                           # path -> (how it was written, extents)
        self.dirs = {"/": (2, 0)}                  # directory -> (inode number, group)
        self.used_dirs = [0] * g.groups            # bg_used_dirs_count
        self.used_dirs[0] = 2                      # the root and lost+found
        self.inodes_used = [0] * g.groups
        self.inodes_used[0] = FIRST_INO            # inodes 1 to 10 reserved, lost+found
        self.journal_runs = self._mkfs_files()

    # ------------------------------------------------------------------ what ext4 changes
    def _follow(self, kernel: str) -> None:
        """Check that the run's kernel has this driver (ValueError if not)."""
        if kernel not in ("2.6.18", "2.6.24", "2.6.32"):
            # ext3's driver left Linux in 4.3; a later kernel mounts an ext3 with the ext4
            # driver (CONFIG_EXT4_USE_FOR_EXT2): jbd2, barriers, delalloc on the block map,
            # which is not modelled (docs/filesystems.md)
            raise ValueError(f"type ext3 made by mkfs follows the ext3 driver of Linux 2.6, "
                             f"removed in 4.3; on kernel {kernel} the ext4 driver would mount "
                             f"it: use type = \"ext4\" (or a 2.6 kernel)")

    def _make_geometry(self, device_bytes: int, mkfs: str) -> Ext3Geometry:
        return Ext3Geometry(device_bytes, mkfs)

    def _mount_options(self, mount: str) -> Ext3MountOptions:
        return Ext3MountOptions(mount)

    @staticmethod
    def _addrs(block_size: int) -> int:
        """Pointers per indirect block."""
        return block_size // 4

    def _mkfs_files(self) -> list:
        """mke2fs's own files: root, lost+found, resize inode, journal (first-fit);
        lost+found grows a block at a time until 16 KiB, within its 12 direct blocks
        (create_lost_and_found, misc/mke2fs.c 1.39). The journal's runs."""
        g = self.geometry
        self._first_fit(1 + min(NDIR, 16384 // g.block_size)
                        + (1 if g.reserved_gdt else 0))
        journal = Inode(8, 0, self.addrs)
        return self._write_first_fit(journal, g.journal_blocks)

    # ------------------------------------------------------------------ protocol
    @property
    def data_mode(self) -> str:
        """``ordered``, ``writeback`` or ``journal`` (the ``data=`` mount option)."""
        return self.mount.data

    @property
    def barrier(self) -> bool:
        """Whether the journal's commit block is a barrier write (``barrier=1``)."""
        return self.mount.barrier

    @property
    def atime(self) -> bool:
        """Whether reads update the inode's access time (not ``noatime``)."""
        return self.mount.atime

    @property
    def commit_interval(self) -> float:
        """kjournald's commit interval in seconds (``commit=``)."""
        return self.mount.commit

    def journal_extents(self) -> tuple:
        """The journal's (device sector, sectors) pieces, in journal order."""
        return self._sectors(self.journal_runs)

    def place_file(self, path: str, nbytes: int, writers: int = 1,
                   write_bytes: int = 1 << 20) -> tuple:
        """Create ``path`` and write its ``nbytes`` as ``writers`` threads (pids 0, 1, ...)
        do in turn, ``write_bytes`` a call each, thread k writing the k-th contiguous
        part; close it (the reservation window is dropped). The file's extents."""
        how = (nbytes, writers, write_bytes)
        if path in self.placed:
            return self._placed_again(path, how)
        inode = self._create(path)
        runs = []
        for k, a, n in self._calls(nbytes, writers, write_bytes):
            runs += self._write(inode, a, n, k)
        inode.rsv_start = inode.rsv_end = -1       # ext3_discard_reservation at close
        inode.containers = {}          # the pointers served placement; `where` stays
        runs.sort()
        extents = self._sectors([(p, n) for _, p, n in runs])
        self.placed[path] = (how, extents)
        return extents

    def _placed_again(self, path: str, how: tuple) -> tuple:
        """The configuration is read more than once: the same file written the same way
        has the same extents; written another way it is a second file of that name."""
        if self.placed[path][0] != how:
            raise ValueError(f"{path} exists already")
        return self.placed[path][1]

    def _create(self, path: str) -> Inode:
        """Create ``path``: its directories as needed, its inode near its directory
        (``find_group_other``)."""
        parent, group = self._directory(path.rsplit("/", 1)[0] or "/")
        inode = self._new_inode(self._group_other(group, parent))
        self.files[path] = inode
        return inode

    def _calls(self, nbytes: int, writers: int, write_bytes: int):
        """The write calls of ``writers`` threads writing ``nbytes`` in turn, thread k its
        k-th contiguous part, ``write_bytes`` a call: (thread, first block, blocks)."""
        bs = self.geometry.block_size
        nblocks = -(-nbytes // bs)
        part = -(-nblocks // writers)
        per_call = max(1, write_bytes // bs)
        cursors = [(k * part, min(nblocks, (k + 1) * part)) for k in range(writers)]
        while any(a < b for a, b in cursors):
            for k, (a, b) in enumerate(cursors):
                if a < b:
                    n = min(per_call, b - a)
                    yield k, a, n
                    cursors[k] = (a + n, b)

    def metadata_blocks(self, path: str, block: int) -> list:
        """The device sectors of the indirect blocks that map file block ``block`` of
        ``path``, outermost first (what ``ext3_get_branch`` reads)."""
        inode = self.files[path]
        return [(inode.where[key] * self.sectors_per_block, self.sectors_per_block)
                for key, _ in self._path(block)[1:]]

    def free_blocks(self) -> int:
        """Blocks not allocated."""
        return self.geometry.blocks - self.owner_count

    # ------------------------------------------------------------------ block map
    def _path(self, block: int) -> list:
        """``ext3_block_to_path``: (container key, slot) from the inode down."""
        a = self.addrs
        if block < NDIR:
            return [((), block)]
        block -= NDIR
        if block < a:
            return [((), NDIR), (("i",), block)]
        block -= a
        if block < a * a:
            return [((), NDIR + 1), (("d",), block // a), (("d", block // a), block % a)]
        block -= a * a
        hi, mid = block // (a * a), block // a % a
        return [((), NDIR + 2), (("t",), hi), (("t", hi), mid), (("t", hi, mid), block % a)]

    def _find_goal(self, inode: Inode, block: int, path: list, pid: int) -> int:
        """``ext3_find_goal`` / ``ext3_find_near`` (fs/ext3/inode.c, 2.6.18)."""
        if block == inode.last_logical + 1 and inode.last_physical:
            return inode.last_physical + 1
        deepest = 0                   # the deepest container of the path that exists
        while deepest + 1 < len(path) and path[deepest + 1][0] in inode.containers:
            deepest += 1
        key, slot = path[deepest]
        ptrs = inode.containers[key]
        for p in range(slot - 1, -1, -1):
            if ptrs[p]:
                return ptrs[p]
        if key:
            return inode.where[key]
        g = self.geometry
        return g.group_start(inode.group) + (pid % 16) * (g.blocks_per_group // 16)

    def _write(self, inode: Inode, block: int, count: int, pid: int) -> list:
        """Allocate file blocks [block, block + count) one after another, as
        ``ext3_get_block`` does for each buffer of a buffered write; the runs
        (logical, physical, blocks)."""
        out = []
        end = block + count
        while block < end:
            path = self._path(block)
            missing = [key for key, _ in path[1:] if key not in inode.containers]
            goal = self._find_goal(inode, block, path, pid)
            # the leaf's slots left: data blocks allocatable in one sequential run
            leaf_left = (NDIR - block if block < NDIR else
                         self.addrs - path[-1][1])
            want = len(missing) + min(end - block, leaf_left)
            at, got = self._new_blocks(inode, goal, want)
            for key in missing[:got]:
                inode.where[key] = at
                inode.containers[key] = array("l", [0] * self.addrs)
                parent, slot = path[len(path) - len(missing) - 1 + missing.index(key)]
                inode.containers[parent][slot] = at
                at += 1
            data = got - len(missing)
            if data <= 0:
                continue                   # only indirect blocks this time
            leaf, slot = path[-1]
            ptrs = inode.containers[leaf]
            ptrs[slot:slot + data] = array("l", range(at, at + data))
            out.append((block, at, data))
            inode.last_logical = block + data - 1
            inode.last_physical = at + data - 1
            block += data
        return out

    # ------------------------------------------------------------------ balloc
    def _new_blocks(self, inode: Inode, goal: int, want: int) -> tuple:
        """``ext3_new_blocks`` with a reservation window: (first block, count) of a
        contiguous run of at most ``want`` blocks, at or after ``goal``."""
        g = self.geometry
        if not 0 <= goal < g.blocks:
            goal = g.first_data_block
        group = (goal - g.first_data_block) // g.blocks_per_group
        for k in range(g.groups):
            grp = (group + k) % g.groups
            lo = g.group_start(grp)
            hi = min(lo + g.blocks_per_group, g.blocks)
            start = goal if k == 0 else lo
            if not inode.rsv_start <= start <= inode.rsv_end:
                if not self._new_window(inode, start, hi):
                    continue
                if not inode.rsv_start <= start <= inode.rsv_end:
                    start = inode.rsv_start
            at = self.used.find(0, start, inode.rsv_end + 1)
            if at < 0:
                inode.rsv_start = inode.rsv_end = -1
                if self._new_window(inode, start, hi):
                    at = self.used.find(0, inode.rsv_start, inode.rsv_end + 1)
                if at < 0:
                    continue
            stop = self.used.find(1, at, min(at + want, inode.rsv_end + 1))
            n = (min(at + want, inode.rsv_end + 1) if stop < 0 else stop) - at
            self._mark(at, n)
            inode.rsv_hit += n
            return at, n
        raise ValueError("the filesystem is full")

    def _new_window(self, inode: Inode, start: int, hi: int) -> bool:
        """``alloc_new_reservation``: a window from the first free block at or after
        ``start`` in its group, doubled when the last one was more than half used."""
        if inode.rsv_start >= 0 and inode.rsv_hit > (inode.rsv_end - inode.rsv_start + 1) // 2:
            inode.rsv_goal = min(inode.rsv_goal * 2, MAX_RESERVE)
        first = self.used.find(0, start, hi)
        if first < 0:
            return False
        inode.rsv_start, inode.rsv_end = first, min(first + inode.rsv_goal, hi) - 1
        inode.rsv_hit = 0
        return True

    # ------------------------------------------------------------------ ialloc
    def _new_inode(self, group: int) -> Inode:
        """The next free inode of ``group``."""
        g = self.geometry
        if group < 0:
            raise ValueError(f"no free inodes ({g.inodes} made by mke2fs)")
        self.inodes_used[group] += 1
        return Inode(group * g.inodes_per_group + self.inodes_used[group], group,
                     self.addrs)

    def _free_inodes(self, group: int) -> int:
        return self.geometry.inodes_per_group - self.inodes_used[group]

    def _free_blocks(self, group: int) -> int:
        g = self.geometry
        lo = g.group_start(group)
        hi = min(lo + g.blocks_per_group, g.blocks)
        return hi - lo - self.used.count(1, lo, hi)

    def _group_other(self, parent_group: int, parent_ino: int) -> int:
        """``find_group_other`` (fs/ext3/ialloc.c, 2.6.18): a regular file's group."""
        n = self.geometry.groups
        if self._free_inodes(parent_group) and self._free_blocks(parent_group):
            return parent_group
        group = (parent_group + parent_ino) % n
        i = 1
        while i < n:
            group = (group + i) % n
            if self._free_inodes(group) and self._free_blocks(group):
                return group
            i <<= 1
        for i in range(1, n + 1):
            group = (parent_group + i) % n
            if self._free_inodes(group):
                return group
        return -1

    def _group_orlov(self, parent: str) -> int:
        """``find_group_orlov`` (fs/ext3/ialloc.c, 2.6.18): a directory's group."""
        g = self.geometry
        n = g.groups
        avefreei = sum(self._free_inodes(k) for k in range(n)) // n
        avefreeb = self.free_blocks() // n
        if parent == "/":                          # a top-level directory
            start = self._random.randrange(n)
            best, best_ndir = -1, g.inodes_per_group
            for i in range(n):
                k = (start + i) % n
                if (self._free_inodes(k) and self.used_dirs[k] < best_ndir
                        and self._free_inodes(k) >= avefreei
                        and self._free_blocks(k) >= avefreeb):
                    best, best_ndir = k, self.used_dirs[k]
            if best >= 0:
                return best
        else:
            start = self.dirs[parent][1]
            max_dirs = sum(self.used_dirs) // n + g.inodes_per_group // 16
            min_inodes = avefreei - g.inodes_per_group // 4
            min_blocks = avefreeb - g.blocks_per_group // 4
            for i in range(n):
                k = (start + i) % n
                if (self._free_inodes(k) and self.used_dirs[k] < max_dirs
                        and self._free_inodes(k) >= min_inodes
                        and self._free_blocks(k) >= min_blocks):
                    return k
        for i in range(n):                        # fallback
            k = (start + i) % n
            if self._free_inodes(k) and self._free_inodes(k) >= avefreei:
                return k
        return -1

    def _directory(self, path: str) -> tuple:
        """(inode number, group) of directory ``path``, made (with its parents) if new:
        an inode by Orlov, one block from its group's start (``ext3_mkdir``)."""
        if path in self.dirs:
            return self.dirs[path]
        parent = path.rsplit("/", 1)[0] or "/"
        self._directory(parent)
        inode = self._new_inode(self._group_orlov(parent))
        self.used_dirs[inode.group] += 1
        self._write(inode, 0, 1, 0)
        self.dirs[path] = (inode.number, inode.group)
        return self.dirs[path]

    # ------------------------------------------------------------------ helpers
    def _mark(self, start: int, n: int) -> None:
        self.used[start:start + n] = b"\x01" * n
        self.owner_count += n

    def _first_fit(self, n: int) -> list:
        """mke2fs's ``ext2fs_new_block`` from block 0: the first ``n`` free blocks."""
        runs = []
        at = 0
        while n:
            at = self.used.find(0, at)
            stop = self.used.find(1, at, at + n)
            k = (at + n if stop < 0 else stop) - at
            self._mark(at, k)
            runs.append((at, k))
            n -= k
        return runs

    def _write_first_fit(self, inode: Inode, nblocks: int) -> list:
        """The journal's blocks, first-fit with its indirect blocks in block-map order
        (``ext2fs_block_iterate``); the runs of its data blocks, in journal order."""
        runs = []
        block = 0
        while block < nblocks:
            path = self._path(block)
            missing = [key for key, _ in path[1:] if key not in inode.containers]
            for key in missing:
                inode.containers[key] = ()
                inode.where[key] = self._first_fit(1)[0][0]
            leaf_left = NDIR - block if block < NDIR else self.addrs - path[-1][1]
            n = min(nblocks - block, leaf_left)
            for at, k in self._first_fit(n):
                if runs and runs[-1][0] + runs[-1][1] == at:
                    runs[-1] = (runs[-1][0], runs[-1][1] + k)
                else:
                    runs.append((at, k))
            block += n
        return runs

    def _sectors(self, runs) -> tuple:
        """Block runs as (sector, sectors) extents, adjacent runs merged."""
        spb = self.sectors_per_block
        out = []
        for at, n in runs:
            if out and out[-1][0] + out[-1][1] == at * spb:
                out[-1] = (out[-1][0], out[-1][1] + n * spb)
            else:
                out.append((at * spb, n * spb))
        return tuple(out)
