"""The creation of a bulk load's volumes: the loader's first phase when ``create`` is
not ``none``. Every data volume and the log volume are made at once, in parallel:

* **zeros**: each volume is written whole by ``create_threads`` threads, thread k
  writing the k-th contiguous part from its start to its end in ``create_io_size``
  calls, one call at a time, through the volume's own open mode (O_DIRECT unless
  ``direct = 0``; a buffered volume is fsynced by each thread after its part). This is
  how a database formats a volume by writing it (MaxDB formats its volumes when the
  instance is activated; the threads, their parts and the call size are blksim's
  choice, with two threads a volume from the fs-maxdb study's description).
* **fallocate**: ``posix_fallocate`` over the whole volume from one thread. Where the
  filesystem says ``fallocate = True`` (its class, or the object for its kernel line;
  without the attribute it has none) and the kernel has the call (2.6.23 on,
  ``sys_fallocate`` in fs/open.c) only the metadata is written: the file's inode is
  journalled (its extents, unwritten, are not counted apart: blksim's simplification)
  and committed by an fsync. Elsewhere (ext3; any kernel before 2.6.23; a device with no
  filesystem) glibc's emulation runs (sysdeps/posix/posix_fallocate.c): a one-byte
  ``pwrite`` of zero at every block (``f_bsize``) from the start (a new file has no
  bytes to read back first); the page cache turns each into a whole dirty page, so
  every block of the volume is written once, by writeback. The emulation's calls are
  issued as buffered writes of 256 blocks (1 MiB) each: the same pages dirtied in the
  same order, the calls' own CPU time not counted (blksim's simplification). The
  volume is then fsynced, so the phase ends with the volumes on disk (blksim's choice:
  the kernel would write the pages before the first O_DIRECT access anyway,
  ``generic_file_direct_IO`` -> ``filemap_write_and_wait``, mm/filemap.c, 2.6.18).

The allocator places each volume as it is written here (``writers``/``write_size`` of
its ``[[file]]`` table, `blksim.apps.loader_config`): zeros by ``create_threads``
writers in ``create_io_size`` calls, the emulation by one writer a block at a time,
fallocate(2) by one call over the whole file.
"""

from __future__ import annotations

from blksim.apps import AppProcess
from blksim.block.request import Bio

EMULATION_CALL = 1 << 20     # bytes of one-byte pwrites issued as one buffered write


def parts(nbytes: int, threads: int) -> list:
    """The byte ranges [first, last) of a volume of ``nbytes`` that ``threads`` threads
    write, thread k the k-th: whole 4 KiB blocks, ceil(blocks / threads) each, the last
    ones shorter or empty, as the allocator splits a file among its writers
    (`blksim.hostio.fs.ext3.Ext3.place_file`)."""
    part = -(-(nbytes // 4096) // threads) * 4096
    return [(min(nbytes, k * part), min(nbytes, (k + 1) * part)) for k in range(threads)]


class VolumeMaker(AppProcess):
    """One thread making part of a volume: bytes [first, last) written in calls of
    ``io_size`` one after another (``io_size`` 0: nothing written), then an fsync when
    ``fsync``; ``creation.part_done()`` after."""

    def __init__(self, creation, pid: int, name: str, file, first: int, last: int,
                 io_size: int, fsync: bool, metadata: bool = False) -> None:
        super().__init__(pid, name, [file])
        self.creation = creation
        self.file = file
        self.at = first
        self.last = last
        self.io_size = io_size
        self.fsync = fsync
        self.metadata = metadata           # fallocate(2): the inode changes, no data
        self.bytes = 0

    def begin(self) -> None:
        """Start writing."""
        if self.metadata and self.file.journal is not None:
            self.file.journal.note_mtime(self.file)   # the extents' inode, journalled
        self._next()

    def _next(self) -> None:
        ids = self.creation.ids
        if self.io_size and self.at < self.last:
            n = min(self.io_size, self.last - self.at)
            self.file.submit_bio(Bio(ids.take(), self.at // 512, n // 512, True, False,
                                     self.pid, 0, lambda _c: self._wrote(n)))
        elif self.fsync:
            self.fsync = False
            self.file.submit_bio(Bio(ids.take(), 0, 0, True, True, self.pid, 0,
                                     lambda _c: self.creation.part_done()))
        else:
            self.creation.part_done()

    def _wrote(self, n: int) -> None:
        self.at += n
        self.bytes += n
        self._next()


class VolumeCreation:
    """The creation phase of a load: its makers (built when the run starts, as every
    process of the load) and when they are all done."""

    def __init__(self, ctx, app) -> None:
        self.ids = ctx.ids
        self.clock = ctx.clock
        self.makers: list = []
        self.left = 0
        self.then = None
        log = len(app.volumes) - 1
        for v, path in enumerate(app.volumes):
            kind = "log" if v == log else f"data{v + 1:02d}"
            size = app.log_size if v == log else app.volume_size
            if app.create == "zeros":
                for k, (first, last) in enumerate(parts(size, app.create_threads)):
                    self._add(ctx, f"{app.name}.create.{kind}.{k}", path, app.direct,
                              first, last, app.create_io_size, not app.direct)
            elif app.native_fallocate[v]:
                self._add(ctx, f"{app.name}.create.{kind}", path, False, 0, size, 0, True,
                          metadata=True)
            else:
                self._add(ctx, f"{app.name}.create.{kind}", path, False, 0, size,
                          EMULATION_CALL, True)

    def _add(self, ctx, name: str, path: str, direct: bool, *args, **kw) -> None:
        maker = VolumeMaker(self, ctx.new_process(name), name, ctx.open_file(path, direct),
                            *args, **kw)
        self.makers.append(maker)
        ctx.add(maker)

    def begin(self, then) -> None:
        """Make every volume at once; ``then()`` when the last is made."""
        self.then = then
        self.left = len(self.makers)
        for m in self.makers:
            m.begin()

    def part_done(self) -> None:
        """A maker has finished its part."""
        self.left -= 1
        if self.left == 0:
            self.then()

    @property
    def bytes(self) -> int:
        """Bytes the makers' write calls carried."""
        return sum(m.bytes for m in self.makers)
