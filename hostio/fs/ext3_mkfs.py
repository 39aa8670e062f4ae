"""ext3's on-disk geometry as ``mke2fs -j`` (e2fsprogs 1.39, 2006, the SLES 10 / RHEL 5
era) lays it out, and ext3's mount options as Linux 2.6.18 parses them.

mke2fs options (``misc/mke2fs.c`` ``PRS``, e2fsprogs 1.39; defaults from its
``misc/mke2fs.conf``): ``-b`` block size (1024, 2048, 4096; default 4096, 1024 for a
filesystem of 512 MiB or less, the ``small`` type; ``floppy`` for 3 MiB or less), ``-j``
(a journal; implied, as ``mkfs.ext3`` is ``mke2fs -j``), ``-O`` features (default
``sparse_super,filetype,resize_inode,dir_index``; ``^name`` clears one), ``-T`` usage type
(``news`` 4096, ``largefile`` 1 MiB, ``largefile4`` 4 MiB bytes per inode), ``-i`` bytes
per inode (default 8192), ``-I`` inode size (default 128, ``EXT2_GOOD_OLD_INODE_SIZE``),
``-J size=`` journal MiB (1024 to 102400 blocks, ``figure_journal_size`` in
``misc/util.c``; default by the block count, the same function), and a block count as
the last word (default: the whole device).

The layout (``lib/ext2fs/initialize.c`` ``ext2fs_initialize`` and ``alloc_tables.c``,
1.39): blocks per group = 8 x block size; the groups start at block 1 for 1 KiB blocks,
else 0; each group begins with a superblock and group descriptor copy if it holds a
backup (all groups, or with ``sparse_super`` groups 0, 1 and powers of 3, 5 and 7:
``ext2fs_bg_has_super``), the descriptors followed by the blocks reserved for online
resizing (``calc_reserved_gdt_blocks``: enough descriptors for 1024 times the size, at
most one block's worth of addresses); then the block bitmap, the inode bitmap and the
inode table. Inodes: the size divided by the inode ratio, spread over the groups and
rounded up to fill whole inode-table blocks, a multiple of 8 (``ext2fs_initialize``).

Mount options (fs/ext3/super.c ``parse_options``, 2.6.18): ``data=ordered|writeback|
journal`` (default ordered, ``ext3_fill_super``), ``commit=N`` seconds (default 5,
``JBD_DEFAULT_MAX_COMMIT_AGE``; 0 means the default), ``barrier=0|1`` (default 0: 2.6.18
mounts ext3 without barriers), ``noatime``, ``nodiratime``, ``atime``, ``diratime``.
"""

from __future__ import annotations

import shlex

from blksim.hostio.fs import option_int as _int

#: mke2fs.conf's usage types (e2fsprogs 1.39): bytes per inode, and block size where set
USAGE_TYPES = {"news": (4096, None), "largefile": (1048576, None),
               "largefile4": (4194304, None), "small": (4096, 1024), "floppy": (8192, 1024)}
#: -O features mke2fs 1.39 knows that matter for ext3's layout or behaviour
FEATURES = ("sparse_super", "filetype", "resize_inode", "dir_index", "has_journal",
            "ext_attr", "large_file")
DEFAULT_FEATURES = ("sparse_super", "filetype", "resize_inode", "dir_index")
DATA_MODES = ("ordered", "writeback", "journal")


class Ext3Geometry:
    """The result of ``mke2fs -j`` with the given options on a device of ``device_bytes``:
    block size, counts and the features. Raises ``ValueError`` (one line naming the
    option) on what mke2fs would refuse.

    A later mke2fs (`hostio.fs.ext4_mkfs.Ext4Geometry`) subclasses it: the class
    attributes below are its defaults, `_option` takes the options only it knows, and
    `_journal_blocks` sizes its journal."""

    #: -O features known, and those on by default
    FEATURES = FEATURES
    DEFAULT_FEATURES = DEFAULT_FEATURES
    #: usage type -> (bytes per inode, block size or None); the default bytes per inode
    USAGE_TYPES = USAGE_TYPES
    DEFAULT_RATIO = 8192
    DEFAULT_INODE_SIZE = 128
    #: options taking a value that only a subclass knows (see `_option`)
    EXTRA_OPTIONS: tuple = ()
    KNOWN = "-b -i -I -j -J -O -T"

    def __init__(self, device_bytes: int, options: str = "") -> None:
        words = shlex.split(options)
        block_size = ratio = blocks = journal_mb = None
        inode_size = self.DEFAULT_INODE_SIZE
        usage = None
        features = set(self.DEFAULT_FEATURES)
        USAGE_TYPES = self.USAGE_TYPES
        FEATURES = self.FEATURES
        i = 0

        def value(opt):
            if i + 1 >= len(words):
                raise ValueError(f"mkfs option {opt} expects a value")
            return words[i + 1]
        while i < len(words):
            w = words[i]
            if w == "-j":
                i += 1
                continue
            if w in ("-b", "-i", "-I", "-T", "-O", "-J"):
                v = value(w)
                if w == "-b":
                    block_size = _int(v, w)
                    if block_size not in (1024, 2048, 4096):
                        raise ValueError(f"mkfs option -b expected 1024, 2048 or 4096, "
                                         f"found {v!r}")
                elif w == "-i":
                    ratio = _int(v, w)
                    if not 1024 <= ratio <= 4096 * 1024:
                        raise ValueError(f"mkfs option -i expected 1024 to 4194304 bytes "
                                         f"per inode, found {v!r}")
                elif w == "-I":
                    inode_size = _int(v, w)
                    if inode_size < 128 or inode_size & (inode_size - 1) or inode_size > 4096:
                        raise ValueError(f"mkfs option -I expected a power of 2 from 128 to "
                                         f"the block size, found {v!r}")
                elif w == "-T":
                    if v not in USAGE_TYPES:
                        raise ValueError(f"mkfs option -T expected one of "
                                         f"{', '.join(USAGE_TYPES)}, found {v!r}")
                    usage = v
                elif w == "-O":
                    for name in v.split(","):
                        clear = name.startswith("^")
                        bare = name[1:] if clear else name
                        if bare not in FEATURES:
                            raise ValueError(f"mkfs option -O: unknown feature {name!r} "
                                             f"(known: {', '.join(FEATURES)})")
                        (features.discard if clear else features.add)(bare)
                else:                                # -J size=MiB
                    if not v.startswith("size="):
                        raise ValueError(f"mkfs option -J expected size=<MiB>, found {v!r}")
                    journal_mb = _int(v[5:], "-J size")
                i += 2
                continue
            if w in self.EXTRA_OPTIONS:
                self._option(w, value(w))
                i += 2
                continue
            if i == len(words) - 1 and w.isdigit():
                blocks = int(w)                      # the block count, mke2fs's last word
                i += 1
                continue
            raise ValueError(f"unknown mkfs option {w!r} (known: {self.KNOWN}, "
                             f"then a block count)")
        self._check_features(features)
        # the usage type by size when -T is not given (mke2fs.c PRS, 1.39)
        size_guess = blocks * (block_size or 4096) if blocks else device_bytes
        if usage is None:
            usage = self._usage_by_size(size_guess // (1024 * 1024))
        type_ratio, type_block = USAGE_TYPES.get(usage, (self.DEFAULT_RATIO, None))
        self.block_size = block_size or type_block or 4096
        if inode_size > self.block_size:
            raise ValueError(f"mkfs option -I {inode_size} is larger than the block size "
                             f"{self.block_size}")
        self.inode_ratio = ratio or type_ratio
        if self.inode_ratio < self.block_size:
            self.inode_ratio = self.block_size       # mke2fs: never below the block size
        self.inode_size = inode_size
        self.features = frozenset(features)
        self.usage = usage
        device_blocks = device_bytes // self.block_size
        if blocks is None:
            blocks = device_blocks
        elif blocks > device_blocks:
            raise ValueError(f"mkfs block count {blocks} ({blocks * self.block_size} bytes) "
                             f"is larger than the device ({device_bytes} bytes)")
        self.blocks = blocks
        self.first_data_block = 1 if self.block_size == 1024 else 0
        self.blocks_per_group = 8 * self.block_size
        self._groups()
        self.journal_blocks = self._journal_blocks(journal_mb)

    def _groups(self) -> None:
        """The groups, inodes and descriptor blocks of ``self.blocks`` blocks."""
        self.groups = -(-(self.blocks - self.first_data_block) // self.blocks_per_group)
        self._inodes()
        self.desc_blocks = -(-self.groups // (self.block_size // self.desc_size))
        self.reserved_gdt = self._reserved_gdt() if "resize_inode" in self.features else 0

    @staticmethod
    def _usage_by_size(megs: int):
        """The usage type mke2fs 1.39 picks for ``megs`` MiB when -T is not given."""
        return "floppy" if megs <= 3 else "small" if megs <= 512 else None

    def metadata_runs(self) -> list:
        """(first block, blocks) of every group's metadata (`group_metadata`), clipped at
        the filesystem's end."""
        out = []
        for group in range(self.groups):
            start, n = self.group_metadata(group)
            out.append((start, min(n, self.blocks - start)))
        return out

    def _check_features(self, features: set) -> None:
        """What the features chosen may not be (ext3: none; ``has_journal`` is implied)."""
        features.discard("has_journal")              # ext3 always has one (-j)

    def _option(self, option: str, value: str) -> None:
        """An option of `EXTRA_OPTIONS` with its value (none here)."""
        raise AssertionError(option)

    @property
    def desc_size(self) -> int:
        """Bytes per group descriptor (``EXT2_MIN_DESC_SIZE``, 32)."""
        return 32

    def _inodes(self) -> None:
        """``ext2fs_initialize``: inodes per group, whole inode-table blocks, multiple of 8."""
        bs, isz = self.block_size, self.inode_size
        inodes = self.blocks * bs // self.inode_ratio
        ipg = min(-(-inodes // self.groups), bs * 8)
        table = -(-ipg * isz // bs)
        ipg = min(table * bs // isz, bs * 8) & ~7
        self.inodes_per_group = ipg
        self.inode_table_blocks = -(-ipg * isz // bs)

    def _reserved_gdt(self) -> int:
        """``calc_reserved_gdt_blocks`` (lib/ext2fs/initialize.c, 1.39)."""
        max_blocks = 0xFFFFFFFF
        if self.blocks < max_blocks // 1024:
            max_blocks = self.blocks * 1024
        groups = -(-(max_blocks - self.first_data_block) // self.blocks_per_group)
        rsv = -(-groups // (self.block_size // self.desc_size)) - self.desc_blocks
        return max(0, min(rsv, self.block_size // 4))

    def _journal_blocks(self, mb) -> int:
        """``figure_journal_size`` (misc/util.c, e2fsprogs 1.39)."""
        n = self.blocks
        if n < 2048:
            raise ValueError(f"mkfs: a filesystem of {n} blocks is too small for a journal "
                             f"(mke2fs wants 2048 blocks)")
        if mb is not None:
            j = mb * 1024 // (self.block_size // 1024)
            if j > n - self.overhead_blocks():
                raise ValueError(f"mkfs option -J size={mb}: the journal ({j} blocks) is "
                                 f"larger than the filesystem's free space")
            if not 1024 <= j <= 102400:
                raise ValueError(f"mkfs option -J size={mb}: the journal must be 1024 to "
                                 f"102400 blocks, found {j}")
            return j
        for limit, size in ((32768, 1024), (256 * 1024, 4096), (512 * 1024, 8192),
                            (1024 * 1024, 16384)):
            if n < limit:
                return size
        return 32768

    # ------------------------------------------------------------------ layout
    def has_super(self, group: int) -> bool:
        """``ext2fs_bg_has_super``: does ``group`` hold a superblock backup?"""
        if "sparse_super" not in self.features or group <= 1:
            return True
        for base in (3, 5, 7):
            n = base
            while n < group:
                n *= base
            if n == group:
                return True
        return False

    def group_start(self, group: int) -> int:
        """The first block of ``group``."""
        return self.first_data_block + group * self.blocks_per_group

    def group_metadata(self, group: int) -> tuple:
        """(first block, blocks) of the group's metadata at its start: superblock and
        descriptor copies (if it has them), bitmaps, inode table."""
        n = 2 + self.inode_table_blocks
        if self.has_super(group):
            n += 1 + self.desc_blocks + self.reserved_gdt
        return self.group_start(group), n

    def overhead_blocks(self) -> int:
        """Blocks every group's metadata takes, summed."""
        return sum(self.group_metadata(g)[1] for g in range(self.groups)) + \
            self.first_data_block

    @property
    def inodes(self) -> int:
        """The filesystem's inode count."""
        return self.inodes_per_group * self.groups


class Ext3MountOptions:
    """ext3's mount options (fs/ext3/super.c ``parse_options``, 2.6.18)."""

    def __init__(self, options: str = "") -> None:
        self.data = "ordered"       # ext3_fill_super: ordered when the journal can
        self.commit = 5.0           # JBD_DEFAULT_MAX_COMMIT_AGE (include/linux/jbd.h)
        self.barrier = False        # 2.6.18: barrier=0 unless asked
        self.atime = True
        self.diratime = True
        for opt in filter(None, (o.strip() for o in options.split(","))):
            name, _, val = opt.partition("=")
            if name == "data" and val in DATA_MODES:
                self.data = val
            elif name == "data":
                raise ValueError(f"mount option data= expected ordered, writeback or "
                                 f"journal, found {val!r}")
            elif name == "commit":
                n = _int(val, "commit")
                self.commit = float(n) if n else 5.0   # commit=0: the default
            elif name == "barrier" and val in ("0", "1"):
                self.barrier = val == "1"
            elif name == "barrier":
                raise ValueError(f"mount option barrier= expected 0 or 1, found {val!r}")
            elif opt in ("noatime", "atime", "nodiratime", "diratime"):
                setattr(self, opt.removeprefix("no"), not opt.startswith("no"))
            elif opt in ("rw", "defaults"):
                pass                # nothing this model distinguishes
            else:
                raise ValueError(f"unknown ext3 mount option {opt!r} (known: data=, "
                                 f"commit=, barrier=, noatime, nodiratime)")

    def text(self) -> str:
        """The options as mount writes them."""
        out = [f"data={self.data}", f"commit={self.commit:g}",
               f"barrier={int(self.barrier)}"]
        if not self.atime:
            out.append("noatime")
        if not self.diratime:
            out.append("nodiratime")
        return ",".join(out)


