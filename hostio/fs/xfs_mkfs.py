"""XFS's on-disk geometry as ``mkfs.xfs`` lays it out, and XFS's mount options as the
kernel parses them, for two eras:

* **xfsprogs 2.8.x with Linux 2.6.18** (SLES 10; kernel lines 2.6.18, 2.6.24, 2.6.32), and
* **a current xfsprogs (5.15 and later) with Linux 5.4-6.6** (the multi-queue lines).

mkfs.xfs options (``mkfs/xfs_mkfs.c``): ``-b size=`` block size (512 to 65536, a power of
2; default 4096), ``-d agcount=|agsize=|size=|su=|sw=|sunit=|swidth=``, ``-l size=|version=|
sunit=|su=|internal``, ``-i size=|maxpct=``, ``-n size=`` (directory block size), ``-f``,
``-m crc=`` (current only); the data section is the whole device unless ``-d size=``
says less.

**Allocation groups** (``calc_default_ag_geometry``): xfsprogs 2.8.0 (its ``v2.8.0`` git
tag; the version without the ``multidisk`` argument): under 16 MiB one AG, under 128 MiB 16 MiB AGs, then
``dblocks >> shift`` with shift 3 up to 8 GiB, 4 up to 512 GiB, 5 above, the 1 TiB
maximum from 32 TiB. Current xfsprogs: a single device (no stripe geometry) of 128 MiB
to 4 TiB gets 4 AGs (``XFS_NOMULTIDISK_AGLOG``), 4 TiB and more the maximum AG size; with
a stripe (``multidisk``) shifts 5/4/3/2/1/0 above 512 GiB, 8 GiB, 128 MiB, 64 MiB, 32 MiB;
``agsize`` is rounded up so the last blocks are not lost. ``agcount = ceil(dblocks /
agsize)``; a last AG smaller than 16 MiB is refused (``validate_ag_geometry``).

**The AG's head** (``xfs_ag.h``): block 0 holds the superblock (sector 0), AGF (1), AGI
(2) and AGFL (3); then one block each for the root of the free-space B+tree by block
(``XFS_BNO_BLOCK``), by size (``XFS_CNT_BLOCK``) and of the inode B+tree
(``XFS_IBT_BLOCK``); current mkfs adds the free-inode B+tree (``finobt=1``) and the
reference-count B+tree (``reflink=1``). ``XFS_PREALLOC_BLOCKS`` is the first block after
them (2.8: 4; current: 6). mkfs then fills each AG's free list (``xfs_alloc_fix_freelist``,
4 blocks for one-level trees: ``XFS_MIN_FREELIST_PAG``).

**The internal log** (``-l internal``): in AG ``agcount / 2`` at ``XFS_PREALLOC_BLOCKS``.
Default size: xfsprogs 2.8.0: ``max(dblocks / 2048, min_logblocks, XFS_DFL_LOG_SIZE
(1000), max_tr_res * XFS_DFL_LOG_FACTOR (16))``, ``min_logblocks`` being ``max(512,
max_tr_res * 3)`` and at least 10 MiB from 1 GiB of filesystem; at most 64 Ki blocks and
128 MiB (``XFS_MAX_LOG_BLOCKS``, ``XFS_MAX_LOG_BYTES``), and at most the AG less its head;
log version 1 (``logversion = 1``; 2 when a log stripe unit is given). Current
(``calculate_log_size``, xfsprogs 5.15 on):
``max(dblocks / 2048, 64 MiB)`` (``XFS_MIN_REALISTIC_LOG_BLOCKS``), the minimum under
512 MiB, the minimum again if it does not fit in an AG, at most 2 GiB; log version 2
with a one-block log stripe unit. ``max_tr_res`` and the minimum log size (computed by
libxfs from the geometry) are blksim's constants (docs/filesystems.md, simplifications).

**Inodes**: 2.8: 256 bytes (``XFS_DINODE_DFL_LOG``); current: 512 with ``crc=1``
(``XFS_DINODE_DFL_CRC_LOG``), 256 with ``crc=0``; a chunk is 64 inodes
(``XFS_INODES_PER_CHUNK``). ``maxpct`` 25 below 1 TiB, 5 below 50 TiB, else 1
(``calc_default_imaxpct``; 2.8: 25 always).
"""

from __future__ import annotations

import shlex

from blksim.block.elevator import kernel_version
from blksim.hostio.fs import option_int as _int

MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40
AG_MIN_BYTES = 16 * MIB               # XFS_AG_MIN_BYTES (xfs_mkfs.h)
AG_MAX_BYTES = TIB - 1                # XFS_AG_MAX_BYTES - 1 (1 TiB less one byte)
INODES_PER_CHUNK = 64                 # XFS_INODES_PER_CHUNK (xfs_ialloc.h)
MIN_FREELIST = 4                      # XFS_MIN_FREELIST_PAG for one-level bno/cnt trees
#: the maximum transaction reservation in bytes (libxfs's max_trans_res for 4 KiB blocks
#: and 256-byte inodes gives 160 blocks): blksim's constant, see the module docstring
MAX_TR_RES_BYTES = 160 * 4096
#: the smallest log mkfs makes (libxfs_log_calc_minimum_size): blksim's constant, 10 MiB
#: (XFS_MIN_LOG_BYTES)
MIN_LOG_BYTES = 10 * MIB


def current_kernel(kernel: str) -> bool:
    """Whether ``kernel`` is one of today's lines (5.x/6.x, current xfsprogs) rather than
    the 2.6 era (xfsprogs 2.8)."""
    return kernel_version(kernel) >= (3,)


class XfsGeometry:
    """The result of ``mkfs.xfs <options>`` on a device of ``device_bytes`` for the
    ``kernel`` line's era. Raises ``ValueError`` (one line naming the option)."""

    def __init__(self, device_bytes: int, options: str = "", kernel: str = "2.6.18") -> None:
        self.current = current = current_kernel(kernel)
        sub = {"b": {}, "d": {}, "l": {}, "i": {}, "n": {}, "m": {}}
        known = {"b": ("size",), "d": ("agcount", "agsize", "size", "su", "sw", "sunit", "swidth"),
                 "l": ("size", "version", "sunit", "su", "internal"),
                 "i": ("size", "maxpct"), "n": ("size",), "m": ("crc",)}
        if not current:
            del known["m"]
        words = shlex.split(options)
        i = 0
        while i < len(words):
            w = words[i]
            if w == "-f":
                i += 1
                continue
            letter = w[1:] if w.startswith("-") else ""
            if letter not in known:
                raise ValueError(f"unknown mkfs.xfs option {w!r} (known: "
                                 f"{' '.join('-' + k for k in known)} -f)")
            if i + 1 >= len(words):
                raise ValueError(f"mkfs.xfs option {w} expects name=value")
            for item in words[i + 1].split(","):
                name, eq, value = item.partition("=")
                if name not in known[letter]:
                    raise ValueError(f"unknown mkfs.xfs suboption {w} {name!r} (known: "
                                     f"{', '.join(known[letter])})")
                if not eq and not (letter == "l" and name == "internal"):
                    raise ValueError(f"mkfs.xfs option {w} {name} expects a value")
                sub[letter][name] = value or "1"
            i += 2
        # blocks
        bs = _size(sub["b"].get("size", "4096"), "-b size", 512)
        if bs < 512 or bs > 65536 or bs & (bs - 1):
            raise ValueError(f"mkfs.xfs option -b size= expected a power of 2 from 512 to "
                             f"65536, found {bs}")
        self.block_size = bs
        self.dblocks = device_bytes // bs
        if "size" in sub["d"]:
            nbytes = _size(sub["d"]["size"], "-d size", bs)
            if nbytes > device_bytes:
                raise ValueError(f"mkfs.xfs option -d size={sub['d']['size']}: {nbytes} bytes "
                                 f"is larger than the device ({device_bytes} bytes)")
            self.dblocks = nbytes // bs
        crc = _int(sub["m"].get("crc", "1"), "-m crc") if current else 0
        if crc not in (0, 1):
            raise ValueError(f"mkfs.xfs option -m crc= expected 0 or 1, found {crc}")
        self.crc = bool(crc)
        # inodes
        isize = _size(sub["i"].get("size", "512" if crc else "256"), "-i size", 1)
        if isize & (isize - 1) or not (512 if crc else 256) <= isize <= min(2048, bs):
            raise ValueError(f"mkfs.xfs option -i size= expected a power of 2 from "
                             f"{512 if crc else 256} to {min(2048, bs)}, found {isize}")
        self.inode_size = isize
        default_pct = 25 if not current or device_bytes < TIB else \
            5 if device_bytes < 50 * TIB else 1
        self.imaxpct = _int(sub["i"].get("maxpct", str(default_pct)), "-i maxpct")
        if self.imaxpct > 100:
            raise ValueError(f"mkfs.xfs option -i maxpct= expected 0 to 100, found "
                             f"{self.imaxpct}")
        self.dir_block_size = _size(sub["n"].get("size", str(max(4096, bs))), "-n size", bs)
        d = self.dir_block_size
        if d & (d - 1) or not max(4096, bs) <= d <= 65536:
            raise ValueError(f"mkfs.xfs option -n size= expected a power of 2 from "
                             f"{max(4096, bs)} to 65536, found {d}")
        # stripe geometry (-d su=/sw= in bytes, sunit=/swidth= in 512-byte sectors)
        d_opts = sub["d"]
        if ("su" in d_opts) != ("sw" in d_opts) or \
                ("sunit" in d_opts) != ("swidth" in d_opts):
            raise ValueError("mkfs.xfs option -d: su and sw (or sunit and swidth) go together")
        if "su" in d_opts:
            su = _size(d_opts["su"], "-d su", 1)
            sw = _int(d_opts["sw"], "-d sw")
            self.sunit, self.swidth = su, su * sw
        elif "sunit" in d_opts:
            self.sunit = _int(d_opts["sunit"], "-d sunit") * 512
            self.swidth = _int(d_opts["swidth"], "-d swidth") * 512
        else:
            self.sunit = self.swidth = 0
        if self.sunit and (self.sunit % bs or not self.swidth or self.swidth % self.sunit):
            raise ValueError(f"mkfs.xfs option -d: the stripe unit ({self.sunit} bytes) must "
                             f"be a multiple of the block size and divide the stripe width "
                             f"({self.swidth} bytes)")
        self._ag_geometry(d_opts)
        self._log(sub["l"])

    # ------------------------------------------------------------------ AGs
    def _ag_geometry(self, d_opts: dict) -> None:
        bs, dblocks = self.block_size, self.dblocks
        ag_min, ag_max = AG_MIN_BYTES // bs, AG_MAX_BYTES // bs
        if dblocks < ag_min:
            raise ValueError(f"mkfs.xfs: the device ({dblocks * bs} bytes) is smaller than "
                             f"one 16 MiB allocation group")
        if "agcount" in d_opts and "agsize" in d_opts:
            raise ValueError("mkfs.xfs option -d: give agcount or agsize, not both")
        if "agsize" in d_opts:
            nbytes = _size(d_opts["agsize"], "-d agsize", 1)
            if nbytes % bs:
                raise ValueError(f"mkfs.xfs option -d agsize= must be a multiple of the "
                                 f"block size {bs}, found {nbytes}")
            agsize = nbytes // bs
        elif "agcount" in d_opts:
            count = _int(d_opts["agcount"], "-d agcount")
            if count < 1:
                raise ValueError("mkfs.xfs option -d agcount= expected at least 1")
            agsize = -(-dblocks // count)
        else:
            agsize = self.default_agsize()
        if agsize < ag_min or agsize > ag_max:
            raise ValueError(f"mkfs.xfs: agsize {agsize} blocks is outside {ag_min} to "
                             f"{ag_max} blocks (16 MiB to 1 TiB)")
        if agsize > dblocks:
            raise ValueError(f"mkfs.xfs: agsize {agsize} blocks is larger than the data "
                             f"area ({dblocks} blocks)")
        last = dblocks % agsize
        if last and last < ag_min:
            dblocks -= last                   # mkfs drops a too small last AG
        self.dblocks = dblocks
        self.agsize = agsize
        self.agcount = -(-dblocks // agsize)

    def default_agsize(self) -> int:
        """``calc_default_ag_geometry`` of the era (see the module docstring)."""
        bs, dblocks = self.block_size, self.dblocks
        nbytes = dblocks * bs
        if nbytes >= 32 * TIB:
            return AG_MAX_BYTES // bs
        if not self.current:                          # xfsprogs 2.8
            if nbytes < 16 * MIB:
                return dblocks
            if nbytes < 128 * MIB:
                return 16 * MIB // bs
            shift = 5 if nbytes > 512 * GIB else 4 if nbytes > 8 * GIB else 3
            return dblocks >> shift
        multidisk = bool(self.sunit)
        if not multidisk and nbytes >= 4 * TIB:
            return AG_MAX_BYTES // bs
        if not multidisk and nbytes >= 128 * MIB:
            shift = 2                                 # XFS_NOMULTIDISK_AGLOG
        else:
            shift = (5 if nbytes > 512 * GIB else 4 if nbytes > 8 * GIB else
                     3 if nbytes >= 128 * MIB else 2 if nbytes >= 64 * MIB else
                     1 if nbytes >= 32 * MIB else 0)
        blocks = dblocks >> shift
        if dblocks & ((1 << shift) - 1):
            blocks += 1                               # do not lose the last blocks
        return blocks

    # ------------------------------------------------------------------ the AG's head
    @property
    def prealloc_blocks(self) -> int:
        """``XFS_PREALLOC_BLOCKS``: the AG's first block after its headers and B+tree roots
        (block 0: SB, AGF, AGI, AGFL; then bnobt, cntbt, inobt; current: finobt,
        refcountbt)."""
        return 6 if self.current and self.crc else 4

    def ag_start(self, agno: int) -> int:
        """The first block of AG ``agno``."""
        return agno * self.agsize

    def ag_blocks(self, agno: int) -> int:
        """Blocks in AG ``agno`` (the last may be shorter)."""
        return min(self.agsize, self.dblocks - agno * self.agsize)

    @property
    def inode_chunk_blocks(self) -> int:
        """Blocks of one chunk of 64 inodes."""
        return max(1, INODES_PER_CHUNK * self.inode_size // self.block_size)

    # ------------------------------------------------------------------ the log
    def _log(self, l_opts: dict) -> None:
        bs = self.block_size
        if l_opts.get("internal", "1") != "1":
            raise ValueError("mkfs.xfs option -l internal=0: an external log device is not "
                             "modelled (only -l internal)")
        version = _int(l_opts.get("version", "2" if self.current else "1"), "-l version")
        if version not in (1, 2) or (self.crc and version != 2):
            raise ValueError(f"mkfs.xfs option -l version= expected 1 or 2 (2 with crc=1), "
                             f"found {version}")
        self.log_version = version
        if "su" in l_opts or "sunit" in l_opts:
            lsu = (_size(l_opts["su"], "-l su", 1) if "su" in l_opts
                   else _int(l_opts["sunit"], "-l sunit") * 512)
            if "version" in l_opts and version == 1:
                raise ValueError("mkfs.xfs option -l su/sunit: a log stripe unit needs a "
                                 "version 2 log, not version=1")
            if not lsu or lsu % bs or lsu > 256 * 1024:
                raise ValueError(f"mkfs.xfs option -l su/sunit: the log stripe unit must be a "
                                 f"multiple of the block size up to 256 KiB, found {lsu} bytes")
            version = self.log_version = 2      # "log stripe unit specified, using v2 logs"
        else:
            lsu = bs if version == 2 and self.current else 0
        self.log_sunit = lsu               # bytes; log writes round up to it (xlog_sync)
        usable = self.agsize - self.prealloc_blocks
        max_tr_res = MAX_TR_RES_BYTES // bs
        if self.current:
            min_log = max(MIN_LOG_BYTES // bs, 512)
            max_blocks, max_bytes = 1 << 20, 2 * GIB   # XFS_MAX_LOG_BLOCKS, _BYTES
        else:                                          # xfsprogs 2.8.0
            min_log = max(512, max_tr_res * 3)         # XFS_MIN_LOG_BLOCKS, _FACTOR
            if self.dblocks * bs >= GIB:
                min_log = max(min_log, 10 * MIB // bs)
            max_blocks, max_bytes = 64 * 1024, 128 * MIB
        if "size" in l_opts:
            nbytes = _size(l_opts["size"], "-l size", bs)
            blocks = -(-nbytes // bs)
            if blocks < min_log:
                raise ValueError(f"mkfs.xfs option -l size=: {blocks} blocks is below the "
                                 f"minimum {min_log} blocks")
        elif self.current:                             # calculate_log_size, 5.15 on
            blocks = max(self.dblocks // 2048, 64 * MIB // bs)
            if self.dblocks * bs < 512 * MIB:
                blocks = min_log
            blocks = max(blocks, min_log)
            if blocks >= usable:
                blocks = min_log
            blocks = min(blocks, max_blocks, max_bytes // bs)
        else:                                          # xfsprogs 2.8.0
            blocks = max(self.dblocks // 2048, min_log, 1000, max_tr_res * 16)
            blocks = min(blocks, max_blocks, max_bytes // bs, usable)
        if blocks > max_blocks or blocks * bs > max_bytes:
            raise ValueError(f"mkfs.xfs option -l size=: {blocks * bs} bytes is above the "
                             f"maximum log size ({max_blocks} blocks, {max_bytes} bytes)")
        if blocks > usable:
            raise ValueError(f"mkfs.xfs: the internal log ({blocks} blocks) does not fit in "
                             f"an allocation group ({usable} blocks free of {self.agsize})")
        self.log_blocks = blocks
        self.log_agno = self.agcount // 2
        self.log_start = self.ag_start(self.log_agno) + self.prealloc_blocks

    @property
    def blocks(self) -> int:
        """The data section's blocks."""
        return self.dblocks


class XfsMountOptions:
    """XFS's mount options (2.6.18: ``xfs_parseargs``, fs/xfs/xfs_vfsops.c; 5.x/6.x:
    ``xfs_fs_parse_param``, fs/xfs/xfs_super.c) and the VFS's atime flags."""

    def __init__(self, options: str = "", kernel: str = "2.6.18", log_version: int = 2) -> None:
        v = kernel_version(kernel)
        self.kernel = kernel
        self.logbufs = 0                 # 0: the default (xlog_get_iclog_buffer_size)
        self.logbsize = 0
        self.allocsize = 0               # bytes; 0: the default speculative preallocation
        # barriers on by default since 2.6.17 (xfs_parseargs sets XFSMNT_BARRIER); the
        # option is gone in 4.19 (always on)
        self.barrier = True
        self.atime = True
        self.relatime = v >= (2, 6, 30)  # the VFS default from 2.6.30 (MS_RELATIME)
        self.diratime = True
        self.inode64 = v >= (3, 7)       # inode64 the default from 3.7
        self.largeio = False
        self.swalloc = False
        given = []
        for opt in filter(None, (o.strip() for o in options.split(","))):
            name, eq, val = opt.partition("=")
            given.append(opt)
            if name in ("logbufs", "logbsize", "allocsize") and not val:
                raise ValueError(f"XFS mount option {name}= requires a value")
            if name == "logbufs":
                n = _int(val, "logbufs")
                if n and not 2 <= n <= 8:          # XLOG_MIN_ICLOGS, XLOG_MAX_ICLOGS
                    raise ValueError(f"XFS mount option logbufs= expected 2 to 8, found {n}")
                self.logbufs = n
            elif name == "logbsize":
                n = _size(val, "logbsize", 1)
                if n and (n & (n - 1) or not 16384 <= n <= 262144):
                    raise ValueError(f"XFS mount option logbsize= expected 16k, 32k, 64k, "
                                     f"128k or 256k, found {val!r}")
                if n > 32768 and log_version == 1:
                    raise ValueError(f"XFS mount option logbsize={val}: a version 1 log takes "
                                     f"16k or 32k")
                self.logbsize = n
            elif name == "allocsize":
                n = _size(val, "allocsize", 1)
                if n & (n - 1) or not 4096 <= n <= GIB:    # XFS_MIN_IO_LOG .. XFS_MAX_IO_LOG
                    raise ValueError(f"XFS mount option allocsize= expected a power of 2 from "
                                     f"4k to 1g, found {val!r}")
                self.allocsize = n
            elif opt in ("barrier", "nobarrier") and v < (4, 19):
                self.barrier = opt == "barrier"
            elif opt == "inode64":
                self.inode64 = True
            elif opt == "inode32" and v >= (3, 7):
                self.inode64 = False
            elif opt in ("largeio", "nolargeio"):
                self.largeio = opt == "largeio"
            elif opt == "swalloc":
                self.swalloc = True
            elif opt in ("noatime", "atime") or opt == "strictatime" and v >= (2, 6, 30):
                self.atime = opt != "noatime"
                if opt == "strictatime":            # MS_STRICTATIME, 2.6.30
                    self.relatime = False
            elif opt in ("relatime", "norelatime") and v >= (2, 6, 20):
                self.relatime = opt == "relatime"
            elif opt in ("nodiratime", "diratime"):
                self.diratime = opt == "diratime"
            elif opt in ("rw", "defaults"):
                pass
            elif opt in ("delaylog", "nodelaylog"):
                why = "the only mode from 3.3" if v >= (3, 3) else "not yet there"
                raise ValueError(f"XFS mount option {opt!r} exists only in Linux 2.6.35 to "
                                 f"3.2 (delayed logging: {why}), not in {kernel}")
            else:
                raise ValueError(f"unknown XFS mount option {opt!r} on Linux {kernel} (known: "
                                 f"logbufs=, logbsize=, allocsize=, "
                                 f"{'barrier, nobarrier, ' if v < (4, 19) else ''}inode64, "
                                 f"{'inode32, ' if v >= (3, 7) else ''}largeio, swalloc, "
                                 f"noatime, {'relatime, ' if v >= (2, 6, 20) else ''}"
                                 f"nodiratime)")
        self.given = given

    def text(self) -> str:
        """The options as given (mount's -o string gives the same filesystem back)."""
        return ",".join(self.given)




_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _size(text: str, opt: str, block: int) -> int:
    """A byte count as mkfs.xfs and mount take it (``cvtnum``, ``suffix_kstrtoint``):
    digits with an optional k/m/g/t suffix, or ``b`` for blocks of ``block`` bytes."""
    t = text.strip().lower()
    mult = 1
    if t and t[-1] in _SUFFIX:
        mult, t = _SUFFIX[t[-1]], t[:-1]
    elif t.endswith("b") and t[:-1].isdigit():
        mult, t = block, t[:-1]
    if not t.isdigit():
        raise ValueError(f"option {opt} expected a size (e.g. 64k, 4m), found {text!r}")
    return int(t) * mult
