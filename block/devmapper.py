"""Linux device-mapper tables as LVM builds them: linear and striped targets, read in
``dmsetup table`` format, and the bio splitting and remapping of a 2.6 kernel.

A table maps a logical device (``dm-0``, ``/dev/vg0/data``) onto block devices. Each line
is ``<start> <length> <target> <arguments>`` in 512-byte sectors; the lines must follow
one another from sector 0 without gaps (``dm_table_complete``). Targets:

``linear <device> <offset>``
    the target's sectors, in order, from ``offset`` on ``device`` (drivers/md/dm-linear.c).
``striped <stripes> <chunk> <device> <offset> [<device> <offset> ...]``
    chunks of ``chunk`` sectors dealt round-robin over the stripes
    (drivers/md/dm-stripe.c, ``stripe_map``): logical chunk ``c`` of the target goes to
    stripe ``c mod stripes``, at that stripe's ``offset + (c div stripes) * chunk``. As
    ``stripe_ctr`` requires, ``chunk`` is a power of two of at least 8 sectors (a 4 KiB
    page), and the target's length is a multiple of both ``stripes`` and ``chunk``.

Splitting (drivers/md/dm.c, 2.6.18: ``__split_bio``, ``__clone_and_map``,
``max_io_len``): a bio is cut where it leaves a target, and a striped target also cuts
it at every chunk boundary (``ti->split_io = chunk``), so every piece lies in one
target and, for a striped one, in one chunk of one stripe. Each piece is remapped and
submitted to its device's own request queue; a dm device has no elevator of its own.

`DmDevice` is the volume itself (``dm-N``): it splits, remaps and submits clones from the
submitter's own context (a clone that finds no free request puts the submitter to sleep
before the next clone is made: ``__split_bio`` calls ``generic_make_request`` per
clone, drivers/md/dm.c, 2.6.18); the bio completes when its last clone does. Its
statistics are those of ``start_io_acct``/``end_io_acct``: in flight from submission to
completion, no merges.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

from blksim.block.diskstats import DiskStats
from blksim.block.elevator_boundary import SimulationError
from blksim.block.request import Bio
from blksim.block.tracepoints import Traced


class DmTableError(ValueError):
    """A device-mapper table blksim cannot use; the message names the table and line."""


@dataclass(frozen=True)
class Piece:
    """A part of a bio after splitting and remapping: ``nr_sectors`` sectors from
    ``sector`` of ``device``, which hold logical sectors from ``logical``."""

    device: str
    sector: int
    nr_sectors: int
    logical: int


@dataclass(frozen=True)
class LinearTarget:
    """``linear``: the target's sectors from ``offset`` on ``device``."""

    start: int
    length: int
    device: str
    offset: int

    split: int = 0          # no boundary inside the target (dm-linear sets no split_io)

    def map(self, sector: int) -> tuple:
        return self.device, self.offset + (sector - self.start)

    def devices(self) -> list:
        return [(self.device, self.offset, self.length)]


@dataclass(frozen=True)
class StripedTarget:
    """``striped``: chunks of ``chunk`` sectors round-robin over ``stripes`` ((device,
    offset) pairs)."""

    start: int
    length: int
    chunk: int
    stripes: tuple

    @property
    def split(self) -> int:
        return self.chunk

    def map(self, sector: int) -> tuple:
        offset = sector - self.start
        chunk, within = divmod(offset, self.chunk)
        row, stripe = divmod(chunk, len(self.stripes))
        device, start = self.stripes[stripe]
        return device, start + row * self.chunk + within

    def devices(self) -> list:
        per_stripe = self.length // len(self.stripes)
        return [(device, offset, per_stripe) for device, offset in self.stripes]


class DmTable:
    """A complete table: targets from sector 0, one after another."""

    def __init__(self, targets, name: str = "dm-0") -> None:
        self.targets = list(targets)
        self.name = name
        self._starts = [t.start for t in self.targets]
        if not self.targets:
            raise DmTableError(f"{name}: the table has no target")
        end = 0
        for t in self.targets:
            if t.start != end:
                raise DmTableError(f"{name}: a target starts at sector {t.start}, expected "
                                   f"{end} (targets must follow one another from 0)")
            end = t.start + t.length
        self.size = end

    def map_bio(self, sector: int, nr_sectors: int) -> list:
        """The pieces a bio of ``nr_sectors`` sectors from ``sector`` becomes, in order."""
        if nr_sectors <= 0 or sector < 0 or sector + nr_sectors > self.size:
            raise DmTableError(f"{self.name}: a bio {sector}+{nr_sectors} lies outside the "
                               f"device ({self.size} sectors)")
        from bisect import bisect_right
        pieces = []
        i = bisect_right(self._starts, sector) - 1
        left = nr_sectors
        while left:
            target = self.targets[i]
            offset = sector - target.start
            length = target.length - offset                     # max_io_len
            split = target.split
            if split:
                boundary = ((offset + split) & ~(split - 1)) - offset
                if length > boundary:
                    length = boundary
            if length > left:
                length = left
            device, physical = target.map(sector)
            pieces.append(Piece(device, physical, length, sector))
            sector += length
            left -= length
            if sector == target.start + target.length:
                i += 1
        return pieces

    def devices(self) -> list:
        """(device, first sector, sectors) of every extent the table uses."""
        return [extent for t in self.targets for extent in t.devices()]


def _int(text: str, what: str, where: str, lowest: int = 0) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < lowest:
        raise DmTableError(f"{where}: {what} expected an integer >= {lowest}, found {text!r}")
    return int(text)


def parse_dm_table(text: str, name: str = "dm-0", origin: str = "<table>") -> DmTable:
    """A `DmTable` from ``dmsetup table`` text (one target a line; blank lines and lines
    starting with ``#`` are skipped)."""
    targets = []
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{origin}:{lineno}"
        if len(fields) < 4:
            raise DmTableError(f"{where}: line expected '<start> <length> <target> "
                               f"<arguments>', found {line.strip()!r}")
        start = _int(fields[0], "start", where)
        length = _int(fields[1], "length", where, 1)
        kind, args = fields[2], fields[3:]
        if kind == "linear":
            if len(args) != 2:
                raise DmTableError(f"{where}: linear expected '<device> <offset>', found "
                                   f"{' '.join(args)!r}")
            targets.append(LinearTarget(start, length, args[0],
                                        _int(args[1], "offset", where)))
        elif kind == "striped":
            stripes = _int(args[0], "stripes", where, 1)
            if len(args) < 2:
                raise DmTableError(f"{where}: striped expected '<stripes> <chunk> <device> "
                                   f"<offset> ...', found {' '.join(args)!r}")
            chunk = _int(args[1], "chunk", where, 1)
            if chunk < 8 or chunk & (chunk - 1):
                raise DmTableError(f"{where}: chunk expected a power of two of at least 8 "
                                   f"sectors (a page), found {chunk}")
            pairs = args[2:]
            if len(pairs) != 2 * stripes:
                raise DmTableError(f"{where}: striped expected {stripes} '<device> <offset>' "
                                   f"pairs, found {len(pairs) / 2:g}")
            if length % stripes:
                raise DmTableError(f"{where}: length {length} is not divisible by the "
                                   f"{stripes} stripes")
            if length % chunk:
                raise DmTableError(f"{where}: length {length} is not divisible by the chunk "
                                   f"size {chunk}")
            targets.append(StripedTarget(start, length, chunk, tuple(
                (pairs[k], _int(pairs[k + 1], "offset", where))
                for k in range(0, len(pairs), 2))))
        else:
            raise DmTableError(f"{where}: target expected linear or striped, found {kind!r}")
    if not targets:
        raise DmTableError(f"{origin}: the table has no target")
    try:
        return DmTable(targets, name)
    except DmTableError as exc:
        raise DmTableError(f"{origin}: {exc}") from None


class _DmIo:
    """One bio in a dm device: its pieces, the next one to submit, clones in flight."""

    __slots__ = ("bio", "pieces", "next", "left", "t_dispatch", "disk_s")

    def __init__(self, bio, pieces) -> None:
        self.bio = bio
        self.pieces = pieces
        self.next = 0
        self.left = len(pieces)
        self.t_dispatch = -1.0
        self.disk_s = 0.0


class DmDevice(Traced):
    """A device-mapper volume (``dm-N``): splits, remaps and passes bios on.

    ``below``: the devices its table names, by name (queues, partitions or other dm
    devices). Its tracepoints: ``block_bio_queue`` when a bio is submitted to it,
    ``block_split`` at every cut of a bio, ``block_bio_remap`` of each clone on the
    device the clone goes to, and ``block_bio_complete`` when its last clone completes
    (``dec_pending``), before the bio's ``on_complete``."""

    kind = "dm"

    def __init__(self, name: str, label: str, table, below: dict, clock,
                 number: tuple, clone_ids) -> None:
        self.latency = None               # a DeviceLatency (set by Host)
        self.name = name
        self.label = label
        self.table = table
        self.capacity = table.size
        self.below = below
        self.clock = clock
        self.number = number
        self.stats = DiskStats()
        self._wake: dict = {}             # bio id -> its sleeping submitter's wake-up
        self._clone_id = clone_ids        # ids for clones (negative: apart from bios)

    def submit_bio(self, bio, now: float | None = None) -> bool:
        """Split ``bio``, and submit its clones in order. False when the submitter
        sleeps for a free request before all are submitted (`when_request`)."""
        if now is None:
            now = self.clock.now
        if self._tp_block_bio_queue is not None:
            self.fire_tracepoint("block_bio_queue", bio, now)
        bio.t_queue = now
        if bio.sector < 0 or bio.nr_sectors <= 0 or bio.sector + bio.nr_sectors > self.capacity:
            raise SimulationError(
                f"bio {bio.sector}+{bio.nr_sectors} sectors from pid {bio.pid} lies outside "
                f"{self.name} ({self.label}, {self.capacity} sectors)")
        io = _DmIo(bio, self.table.map_bio(bio.sector, bio.nr_sectors))
        if self._tp_block_split is not None:
            for piece in io.pieces[1:]:
                self.fire_tracepoint("block_split", bio, piece.logical, now)
        self.stats.request_added(now)
        return self._submit_clones(io, now)

    def _submit_clones(self, io: _DmIo, now: float) -> bool:
        bio = io.bio
        pieces = io.pieces
        while io.next < len(pieces):
            piece = pieces[io.next]
            io.next += 1
            clone = Bio(self._clone_id(), piece.sector, piece.nr_sectors, bio.write, bio.sync,
                        bio.pid, bio.ioprio, self._clone_done)
            clone.origin = io
            clone.buffered = bio.buffered
            clone.cpu = bio.cpu
            clone.cgroup = bio.cgroup     # bio_clone_blkg_association
            target = self.below[piece.device]
            # __map_bio: the remap is traced on the device the clone goes to
            target.fire_tracepoint("block_bio_remap", clone, self.number, piece.logical, now)
            if not target.submit_bio(clone, now):
                target.when_request(clone, self._resume)
                return False
        return True

    def _resume(self, clone) -> None:
        """The clone the submitter slept on has its request: go on with the next ones."""
        io = clone.origin
        if self._submit_clones(io, self.clock.now):
            wake = self._wake.pop(io.bio.id, None)
            if wake is not None:
                wake(io.bio)

    def when_request(self, bio, wake) -> None:
        """Call ``wake(bio)`` once every clone of ``bio`` is submitted (see
        `RequestQueue.when_request`)."""
        self._wake[bio.id] = wake

    def _clone_done(self, clone) -> None:
        io = clone.origin
        io.left -= 1
        if clone.t_dispatch > io.t_dispatch:
            io.t_dispatch = clone.t_dispatch
        io.disk_s += clone.disk_s
        if io.left == 0:
            bio = io.bio
            now = clone.t_complete
            bio.t_dispatch = io.t_dispatch
            bio.t_complete = now
            bio.disk_s = io.disk_s
            bio.rq = clone.rq                       # the request of its last clone
            bio.dev = self.name
            self.stats.request_completed(bio.write, bio.nr_sectors, bio.t_queue, now)
            if self._tp_block_bio_complete is not None:
                self.fire_tracepoint("block_bio_complete", bio, now)
            end_io = bio.on_complete
            if end_io is not None:
                end_io(bio)

    def process_exited(self, pid: int) -> None:
        """Tell the elevators below that process ``pid`` has ended."""
        for q in self.queues():
            q.process_exited(pid)

    def throttle_delay(self, pid: int, now: float) -> float:
        """See `QueueProtocol.throttle_delay`: a task holds one mark
        (``current->throttle_disk``), so at most one queue below answers."""
        return max(q.throttle_delay(pid, now) for q in self.queues())

    def start_plug(self, pid: int, now: float) -> None:
        """``blk_start_plug`` is per task: the plug covers every queue below."""
        for q in self.queues():
            q.start_plug(pid, now)

    def finish_plug(self, pid: int, now: float) -> None:
        """``blk_finish_plug``: flush the task's plug on every queue below."""
        for q in self.queues():
            q.finish_plug(pid, now)

    def queues(self) -> list:
        """The request queues below this device, each once."""
        out = []
        for dev in self.below.values():
            for q in target_queues(dev):
                if q not in out:
                    out.append(q)
        return out


def target_queues(target) -> list:
    """The request queues a device's bios reach (a disk's own queue is itself)."""
    queues = getattr(target, "queues", None)
    return [target] if queues is None else queues()


def dm_clone_ids():
    """A source of ids for dm clones: -1, -2, ..."""
    ids = count(1)
    return lambda: -next(ids)
