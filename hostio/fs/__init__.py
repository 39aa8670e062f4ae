"""The filesystem layer: one module per filesystem behind one small protocol.

A filesystem on a device (a ``[filesystems."/dev/X"]`` table) answers three questions for
the host's I/O path, and nothing else:

1. **Where a file's blocks go** (allocation): ``place_file(path, nbytes, writers,
   write_bytes)`` returns the file's extents ((device sector, sectors), in file order) as
   the filesystem's allocator would lay them out when ``writers`` threads write the file
   in turn, ``write_bytes`` each, every thread its own contiguous part; files are placed
   in creation order. ``journal_extents()`` says where the journal lies.
2. **Which extra I/O the filesystem itself does**: ``metadata_blocks(path, block)`` -- the
   (device sector, sectors) of the blocks a read of file block ``block`` must have read
   first, outermost first (ext3: the indirect blocks that map it); ``atime`` -- whether
   reads update the inode's access time (a metadata write, journalled); the journal's
   writes are `hostio.journal.Journal`'s. ``geometry.block_size`` and ``addrs`` (pointers
   per indirect block) let the caller ask once per indirect block's worth of blocks.
3. **What fsync does**: ``data_mode`` (``ordered``, ``writeback``, ``journal``: what the
   journal's commit writes and waits for) and ``barrier`` (whether the commit block is a
   barrier write, `hostio.journal.submit_commit_block`).

4. **Its journal or log**: ``make_journal(fs, device, clock, ids, writeback, submitter)``
   builds the object the host's I/O path tells of writes, atime/mtime changes and fsyncs
   (`hostio.journal.Journal`'s methods ``note_write``, ``note_atime``, ``note_mtime``,
   ``fsync``, ``fsync_writes``); ``journal_thread`` names the process that writes it
   (ext3's ``kjournald``).

A module implements these for its filesystem and is registered by name in `FILESYSTEMS`;
ext3 (`hostio.fs.ext3`) is the first.
"""

from __future__ import annotations

from importlib import import_module

#: type name -> (module, class): the filesystems a ``[filesystems]`` table may name.
FILESYSTEMS = {
    "ext3": ("blksim.hostio.fs.ext3", "Ext3"),
    "ext4": ("blksim.hostio.fs.ext4", "Ext4"),
    "xfs": ("blksim.hostio.fs.xfs", "Xfs"),
}


def build(kind: str, device_sectors: int, mkfs: str, mount: str, seed: str = "",
          kernel: str = "2.6.18"):
    """The filesystem object of type ``kind`` made by ``mkfs`` (its mkfs program's
    options) and mounted with ``mount`` (mount's -o string) on a device of
    ``device_sectors``; ``seed`` seeds what the kernel draws at random (the run's seed
    and the device); ``kernel`` is the run's kernel line, whose rules it follows. Raises
    ``ValueError`` with one line naming the bad option."""
    if kind not in FILESYSTEMS:
        raise ValueError(f"type expected one of {', '.join(FILESYSTEMS)}, found {kind!r}")
    module, name = FILESYSTEMS[kind]
    return getattr(import_module(module), name)(device_sectors, mkfs, mount, seed, kernel)


def option_int(text: str, opt: str) -> int:
    """A whole number of at least 0 given to a mkfs or mount option ``opt``; ValueError
    naming the option otherwise."""
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"option {opt} expected a whole number, found {text!r}") from None
    if n < 0:
        raise ValueError(f"option {opt} expected a whole number, found {text!r}")
    return n
