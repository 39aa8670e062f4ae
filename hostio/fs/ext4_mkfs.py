"""ext4's on-disk geometry as ``mkfs.ext4`` (``mke2fs -t ext4``, e2fsprogs 1.47.4, 2026: the
current line) lays it out, and ext4's mount options as Linux 2.6.32 and 5.4-6.6 parse them.

mke2fs options (``misc/mke2fs.c`` ``PRS`` and ``parse_extended_opts``, 1.47.4; defaults
from ``misc/mke2fs.conf.in``): as ext3's (`hostio.fs.ext3_mkfs.Ext3Geometry`, which this
subclasses: one copy of the shared rules) with the ext4 defaults: ``-O``
``sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr`` (``base_features``)
plus ext4's ``has_journal,extent,huge_file,flex_bg,metadata_csum,metadata_csum_seed,64bit,
dir_nlink,extra_isize,orphan_file``; ``-I`` 256 (``inode_size``), ``-i`` 16384
(``inode_ratio``); usage types by size ``floppy`` < 3 MiB, ``small`` < 512 MiB, ``big``
from 4 TiB, ``huge`` from 16 TiB (``PRS``), ``big`` 32768 and ``huge`` 65536 bytes per
inode. Added: ``-E`` extended options (``stride=``, ``stripe_width=``/``stripe-width=``,
``lazy_itable_init=``, ``lazy_journal_init=``) and ``-G`` (groups per flex group, a power
of 2; default 16, ``flex_bg_size`` in ``PRS``).

Layout with ``flex_bg`` (``lib/ext2fs/alloc_tables.c`` ``ext2fs_allocate_group_table``,
``flexbg_offset``, 1.47.4): the block bitmaps of a flex group's groups lie together from
the first free block of its first group, then (``table_offset`` blocks after the first)
its inode bitmaps, then its inode tables, each first-fit at or after the one before;
``table_offset`` is the flex size, or in the last flex group its number of groups (the
flex size when it has one). The other groups keep only their superblock backups.
Group descriptors are 64 bytes with ``64bit`` (``EXT2_DESC_SIZE``), which sizes the
descriptor and reserved-GDT blocks (``calc_reserved_gdt_blocks``).

The journal (``ext2fs_default_journal_size``, ``lib/ext2fs/mkjournal.c``): 1024 blocks
under 32768, 4096 under 256 Ki, 8192 under 512 Ki, 16384 under 4 Mi, 32768 under 8 Mi,
65536 under 16 Mi, 131072 under 32 Mi blocks, else 262144; ``-J size=`` must give 1024 to
10,240,000 blocks (``JBD2_MIN/MAX_JOURNAL_BLOCKS``) and at most half the free blocks
(``figure_journal_size``, ``misc/util.c``). Its place: the middle of the filesystem
(``get_midpoint_journal_block``, mkjournal.c; e2fsprogs 1.41.1, 2008, commit 1af01e94
"Create the journal in the middle of the filesystem", made flex-aware the next day,
b55d7398).
"""

from __future__ import annotations

from blksim.hostio.fs.ext3_mkfs import DATA_MODES, Ext3Geometry, _int

#: -O features mke2fs 1.47 knows that this model accepts (``extents`` is mke2fs's alias)
FEATURES = ("sparse_super", "large_file", "filetype", "resize_inode", "dir_index", "ext_attr",
            "has_journal", "extent", "huge_file", "flex_bg", "metadata_csum",
            "metadata_csum_seed", "64bit", "dir_nlink", "extra_isize", "orphan_file",
            "uninit_bg", "gdt_csum")
#: mke2fs.conf.in's [defaults] base_features and [fs_types] ext4 features (1.47.4)
DEFAULT_FEATURES = ("sparse_super", "large_file", "filetype", "resize_inode", "dir_index",
                    "ext_attr", "has_journal", "extent", "huge_file", "flex_bg",
                    "metadata_csum", "metadata_csum_seed", "64bit", "dir_nlink",
                    "extra_isize", "orphan_file")
#: mke2fs.conf.in's usage types (1.47.4): bytes per inode, block size where set
USAGE_TYPES = {"news": (4096, None), "largefile": (1048576, None),
               "largefile4": (4194304, None), "small": (4096, 1024), "floppy": (8192, 1024),
               "big": (32768, None), "huge": (65536, None)}
JBD2_MIN_JOURNAL_BLOCKS = 1024
JBD2_MAX_JOURNAL_BLOCKS = 1024 * 10000


class Ext4Geometry(Ext3Geometry):
    """The result of ``mkfs.ext4`` with the given options on a device of ``device_bytes``
    (module docstring). Raises ``ValueError`` (one line naming the option) on what
    mke2fs would refuse, or on what this model leaves out (an ext4 without extents or
    without its journal)."""

    FEATURES = FEATURES
    DEFAULT_FEATURES = DEFAULT_FEATURES
    USAGE_TYPES = USAGE_TYPES
    DEFAULT_RATIO = 16384
    DEFAULT_INODE_SIZE = 256
    EXTRA_OPTIONS = ("-E", "-G")
    KNOWN = "-b -E -G -i -I -j -J -O -T"

    def __init__(self, device_bytes: int, options: str = "") -> None:
        self.flex_size = None                 # -G
        self.stride = self.stripe_width = 0   # -E stride=, stripe_width= (blocks)
        self.lazy_itable_init = self.lazy_journal_init = True
        super().__init__(device_bytes, options)
        if "flex_bg" not in self.features:
            if self.flex_size is not None:
                raise ValueError("mkfs option -G: the flex_bg feature is not enabled")
            self.flex_size = 1
        elif self.flex_size is None:
            self.flex_size = 16               # flex_bg_size (PRS, mke2fs.conf's default)

    def _groups(self) -> None:
        """As ext3's, then ``ext2fs_initialize``'s retry (lib/ext2fs/initialize.c,
        1.47.4): a last group shorter than its metadata plus 50 blocks is dropped (the
        block count cut to whole groups) and the layout worked out again; a single group
        too short for its metadata is refused."""
        while True:
            super()._groups()
            overhead = 2 + self.inode_table_blocks
            if self.has_super(self.groups - 1):
                overhead += 1 + self.desc_blocks + self.reserved_gdt
            rem = (self.blocks - self.first_data_block) % self.blocks_per_group
            if self.groups == 1 and rem and rem < overhead:
                raise ValueError(f"mkfs: {self.blocks} blocks are too few for a filesystem "
                                 f"with these options")
            if not rem or rem >= overhead + 50:
                return
            self.blocks -= rem

    @staticmethod
    def _usage_by_size(megs: int):
        """``PRS`` (1.47.4): floppy < 3 MiB, small < 512 MiB, big from 4 TiB, huge from
        16 TiB, else the defaults."""
        if megs < 3:
            return "floppy"
        if megs < 512:
            return "small"
        if megs >= 16 * 1024 * 1024:
            return "huge"
        return "big" if megs >= 4 * 1024 * 1024 else None

    def _check_features(self, features: set) -> None:
        if "extents" in features:
            features.discard("extents")
            features.add("extent")
        if "has_journal" not in features:
            raise ValueError("mkfs option -O ^has_journal: blksim's ext4 has its journal "
                             "(a journal-less ext4 is not modelled)")
        if "extent" not in features:
            raise ValueError("mkfs option -O ^extent: blksim's ext4 maps files by extents "
                             "(an ext4 on the block map is type = \"ext3\")")
        if "metadata_csum" in features:       # it supersedes the group checksums
            features.discard("uninit_bg")
            features.discard("gdt_csum")

    def _option(self, option: str, value: str) -> None:
        """``-G`` flex size; ``-E`` extended options (``parse_extended_opts``)."""
        if option == "-G":
            n = _int(value, "-G")
            if n < 1 or n & (n - 1):
                raise ValueError(f"mkfs option -G expected a power of 2, found {value!r}")
            self.flex_size = n
            return
        for item in filter(None, value.split(",")):
            name, eq, arg = item.partition("=")
            if name == "stride":
                self.stride = _int(arg, "-E stride")
            elif name in ("stripe_width", "stripe-width"):
                self.stripe_width = _int(arg, "-E stripe_width")
            elif name in ("lazy_itable_init", "lazy_journal_init"):
                n = _int(arg, f"-E {name}") if eq else 1
                setattr(self, name, bool(n))
            else:
                raise ValueError(f"mkfs option -E: unknown extended option {item!r} (known: "
                                 f"stride=, stripe_width=, lazy_itable_init=, "
                                 f"lazy_journal_init=)")

    @property
    def desc_size(self) -> int:
        """Bytes per group descriptor: 64 with ``64bit`` (``EXT2_MIN_DESC_SIZE_64BIT``)."""
        return 64 if "64bit" in self.features else 32

    def _journal_blocks(self, mb) -> int:
        """``ext2fs_default_journal_size`` / ``figure_journal_size`` (1.47.4)."""
        n = self.blocks
        if n < 2048:
            raise ValueError(f"mkfs: a filesystem of {n} blocks is too small for a journal "
                             f"(mke2fs wants 2048 blocks)")
        if mb is not None:
            j = mb * 1024 // (self.block_size // 1024)
            if not JBD2_MIN_JOURNAL_BLOCKS <= j <= JBD2_MAX_JOURNAL_BLOCKS:
                raise ValueError(f"mkfs option -J size={mb}: the journal must be 1024 to "
                                 f"10240000 blocks, found {j}")
            if j > (n - self.overhead_blocks()) // 2:
                raise ValueError(f"mkfs option -J size={mb}: the journal ({j} blocks) is "
                                 f"larger than half the filesystem's free blocks")
            return j
        for limit, size in ((32768, 1024), (256 * 1024, 4096), (512 * 1024, 8192),
                            (4096 * 1024, 16384), (8192 * 1024, 32768),
                            (16384 * 1024, 65536), (32768 * 1024, 131072)):
            if n < limit:
                return size
        return 262144

    # ------------------------------------------------------------------ layout
    def _super_blocks(self, group: int) -> int:
        """Blocks at the start of ``group`` for its superblock and descriptor copies."""
        return 1 + self.desc_blocks + self.reserved_gdt if self.has_super(group) else 0

    def metadata_runs(self) -> list:
        """(first block, blocks) of the metadata: each group's superblock copies, then per
        flex group its bitmaps and inode tables packed (module docstring)."""
        if self.flex_size == 1:
            return super().metadata_runs()
        used = bytearray(self.blocks)
        runs = []

        def take(at: int, n: int) -> int:
            """``flexbg_offset`` / ``ext2fs_get_free_blocks2``: the first ``n`` free
            blocks in a row at or after ``at``."""
            while True:
                at = used.find(0, at)
                stop = used.find(1, at, at + n)
                if at < 0 or at + n > self.blocks:
                    raise ValueError("mkfs: no room for the group tables (the device is too "
                                     "small for these options)")
                if stop < 0:
                    used[at:at + n] = b"\x01" * n
                    runs.append((at, n))
                    return at
                at = stop
        for group in range(self.groups):
            n = min(self._super_blocks(group), self.blocks - self.group_start(group))
            if n:
                used[self.group_start(group):self.group_start(group) + n] = b"\x01" * n
                runs.append((self.group_start(group), n))
        size = self.flex_size
        for first in range(0, self.groups, size):
            last = min(first | (size - 1), self.groups - 1)
            offset = size
            if last == self.groups - 1:           # the last flex group: kept contiguous
                offset = (last & (size - 1)) + 1 if last & (size - 1) else size
            members = range(first, last + 1)
            bb = [take(self.group_start(first), 1)]
            bb += [take(bb[-1] + 1, 1) for _ in members[1:]]
            ib = [take(bb[0] + offset, 1)]
            ib += [take(ib[-1] + 1, 1) for _ in members[1:]]
            it = [take(ib[0] + offset, self.inode_table_blocks)]
            it += [take(it[-1] + self.inode_table_blocks, self.inode_table_blocks)
                   for _ in members[1:]]
        merged = []
        for at, n in sorted(runs):
            if merged and merged[-1][0] + merged[-1][1] == at:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((at, n))
        return merged

    def journal_goal(self, free_in_group) -> int:
        """``get_midpoint_journal_block`` (lib/ext2fs/mkjournal.c, 1.47.4): the first block
        of the group with the most free blocks around the middle of the filesystem
        (``free_in_group(group)``: its free blocks then)."""
        group = ((self.blocks - self.first_data_block) // 2 - self.first_data_block) \
            // self.blocks_per_group
        flex = self.flex_size
        if flex > 1 and group > flex:
            group &= ~(flex - 1)
            while group < self.groups and free_in_group(group) == 0:
                group += 1
            if group == self.groups:
                group = 0
            start = group
        else:
            start = group - 1 if group > 0 else group
        end = group + 1 if group + 1 < self.groups else group
        best = start
        for g in range(start + 1, end + 1):
            if free_in_group(g) > free_in_group(best):
                best = g
        return self.group_start(best)


#: the kernel lines whose ext4 this follows: 2.6.32's, or today's (the multi-queue lines)
def ext4_rules(kernel: str) -> str:
    """``"2.6.32"`` or ``"mq"`` (5.4-6.6) for the run's kernel line; ``ValueError`` for a
    kernel before ext4 (it was merged as ext4dev in 2.6.19 and became ext4 in 2.6.28)."""
    if kernel in ("2.6.18", "2.6.24"):
        raise ValueError(f"type ext4 needs Linux 2.6.28 or later (the run's kernel is "
                         f"{kernel}; use 2.6.32 or a multi-queue line)")
    return "2.6.32" if kernel == "2.6.32" else "mq"


class Ext4MountOptions:
    """ext4's mount options (fs/ext4/super.c ``parse_options``/``ext4_fill_super``, 2.6.32
    and 5.4-6.6; the atime options are the VFS's, fs/namespace.c ``do_mount``). ``rules``:
    `ext4_rules`' answer. Raises ``ValueError`` with one line naming a bad option."""

    def __init__(self, options: str = "", rules: str = "mq") -> None:
        self.data = "ordered"        # ext4_fill_super: ordered when the journal can
        self.commit = 5.0            # JBD2_DEFAULT_MAX_COMMIT_AGE
        self.barrier = True          # ext4_fill_super: set_opt(BARRIER) by default
        self.delalloc = True         # ext4_fill_super: set_opt(DELALLOC) by default
        self.journal_checksum = False
        self.journal_async_commit = False
        self.atime = "relatime"      # do_mount: MS_RELATIME by default since 2.6.30
        self.diratime = True
        self.stripe = 0
        self.max_batch_time = 15000  # EXT4_DEF_MAX_BATCH_TIME (us)
        self.min_batch_time = 0      # EXT4_DEF_MIN_BATCH_TIME
        self.auto_da_alloc = True
        explicit_delalloc = False
        for opt in filter(None, (o.strip() for o in options.split(","))):
            name, eq, val = opt.partition("=")
            if name == "data" and val in DATA_MODES:
                self.data = val
            elif name == "data":
                raise ValueError(f"mount option data= expected ordered, writeback or "
                                 f"journal, found {val!r}")
            elif name == "commit":
                n = _int(val, "commit")
                self.commit = float(n) if n else 5.0   # commit=0: the default
            elif opt == "barrier" or opt == "nobarrier":
                self.barrier = opt == "barrier"
            elif name == "barrier" and val in ("0", "1"):
                self.barrier = val == "1"
            elif name == "barrier":
                raise ValueError(f"mount option barrier= expected 0 or 1, found {val!r}")
            elif opt in ("delalloc", "nodelalloc"):
                self.delalloc = opt == "delalloc"
                explicit_delalloc = self.delalloc
            elif opt == "journal_checksum":
                self.journal_checksum = True
            elif opt == "journal_async_commit":       # implies journal_checksum
                self.journal_async_commit = self.journal_checksum = True
            elif opt in ("noatime", "relatime", "strictatime"):
                self.atime = opt
            elif opt == "atime":
                self.atime = "relatime"               # the kernel's default
            elif opt in ("nodiratime", "diratime"):
                self.diratime = opt == "diratime"
            elif name in ("stripe", "max_batch_time", "min_batch_time") and eq:
                setattr(self, name, _int(val, name))
            elif opt in ("auto_da_alloc", "noauto_da_alloc") or name == "auto_da_alloc":
                self.auto_da_alloc = opt != "noauto_da_alloc" and val != "0"
            elif opt in ("rw", "defaults", "user_xattr", "nouser_xattr", "acl", "noacl") or \
                    name == "errors" and val in ("continue", "remount-ro", "panic"):
                pass                 # no I/O of their own
            else:
                raise ValueError(f"unknown ext4 mount option {opt!r} (known: data=, commit=, "
                                 f"barrier, nobarrier, delalloc, nodelalloc, journal_checksum, "
                                 f"journal_async_commit, noatime, relatime, strictatime, "
                                 f"nodiratime, stripe=, max_batch_time=, min_batch_time=, "
                                 f"auto_da_alloc, errors=, user_xattr, acl)")
        if self.data == "journal" and self.delalloc:
            # 2.6.32: "Ignoring delalloc option - requested data journaling mode";
            # 5.x/6.x: delalloc given with data=journal fails the mount
            if explicit_delalloc and rules == "mq":
                raise ValueError("mount options data=journal and delalloc: ext4 can't mount "
                                 "with both (ext4_fill_super)")
            self.delalloc = False
        if rules == "mq" and self.data == "ordered" and self.journal_async_commit:
            raise ValueError("mount option journal_async_commit: ext4 can't mount with it in "
                             "data=ordered mode (ext4_fill_super)")

    def text(self) -> str:
        """The options as mount writes them."""
        out = [f"data={self.data}", f"commit={self.commit:g}",
               "barrier" if self.barrier else "nobarrier",
               "delalloc" if self.delalloc else "nodelalloc", self.atime]
        if self.journal_async_commit:
            out.append("journal_async_commit")
        elif self.journal_checksum:
            out.append("journal_checksum")
        if not self.diratime:
            out.append("nodiratime")
        if self.stripe:
            out.append(f"stripe={self.stripe}")
        if not self.auto_da_alloc:
            out.append("noauto_da_alloc")
        if self.max_batch_time != 15000:
            out.append(f"max_batch_time={self.max_batch_time}")
        if self.min_batch_time:
            out.append(f"min_batch_time={self.min_batch_time}")
        return ",".join(out)
