"""The flash back end: channels, dies and planes, and the time of every flash transaction.

Geometry (`FlashGeometry`): ``channels`` buses, ``chips_per_channel`` chips sharing each
bus, ``dies_per_chip`` dies per chip (each die runs one array operation at a time; the
dies of a chip and of a channel interleave), ``planes_per_die`` planes per die. Times
(`CellTimes`, the preset's ``[nand]``) are per flash page; the FTL's page is a *mapping
unit* of ``unit_bytes`` (4 KiB), and ``units_per_page`` of them fill one flash page.

Transactions, term by term (the order of ONFI 4.x's READ PAGE and PROGRAM PAGE
sequences, Open NAND Flash Interface Specification 4.2, 2020, section 5):

* read:    die: command + tR(page type)  ->  channel: bytes / rate (data out);
* program: channel: bytes / rate (data in)  ->  die: tPROG(page type);
  multi-plane: one page per plane of the die, transferred one after the other, then one
  tPROG for them all (ONFI's multi-plane program, 5.x "Multi-plane operations"): the
  planes need the same page offset, which blksim does not check (see docs/flash.md);
* erase:   die: tBERS;
* GC move: die: tR + tPROG with copyback (ONFI COPYBACK READ / PROGRAM: the page stays in
  the die), else tR, the page out and back on the channel, then tPROG.

The channel's rate is ``mts`` mega-transfers per second of one byte each (an 8-bit
ONFI NV-DDR or Toggle DDR bus).

Scheduling at a die (MQSim's transaction scheduling unit, Tavakkol et al., "MQSim: A
Framework for Enabling Realistic Studies of Modern Multi-Queue SSD Devices", FAST 2018,
section 4: reads before writes before erases): a host read is booked when it arrives
(the die's reads are first come first served and never wait behind a program the die
has not started); a program or a GC step starts only when the die is idle; foreground
GC (the FTL's ``gc_needed``) goes before the die's buffered programs, background GC
(``gc_wanted``) and SLC folding only when the die has no full page to program. With
``suspend`` on, a read arriving during a program or erase suspends it (Wu and He,
"Reducing SSD read latency via NAND flash program and erase suspension", FAST 2012): the
read waits ``suspend``, runs, and the operation resumes after ``resume``, finishing
that much later.

The data of a read stays in the die's page register until the channel has carried it
out, so the die starts its next operation only then (ONFI READ PAGE without the cache
commands; MQSim does the same): a die serves at most one read per tR + transfer. The
first free stretch of the channel at or after tR is booked (`Timeline`), so a transfer
never waits behind one booked earlier for data ready later.
"""

from __future__ import annotations

from collections import deque

from blksim.disk_models.flash.timeline import Timeline

#: Kinds of die operation.
PROGRAM, GC_MOVE, ERASE = 0, 1, 2
#: Bound on the GC intervals kept for plots.
GC_INTERVALS_KEPT = 10000


class DieOp:
    """An operation a die runs: ``kind``, the planes and mapping units it programs
    (``planes``: list of (plane, [(lpn, ppn)])), when it started."""

    __slots__ = ("kind", "planes", "start")

    def __init__(self, kind: int, planes, start: float) -> None:
        self.kind = kind
        self.planes = planes
        self.start = start


class GcRun:
    """A GC (or SLC fold) job the die is working through: its moves in flash pages,
    then one erase."""

    __slots__ = ("job", "plane", "foreground", "next_move", "start", "erased")

    def __init__(self, job, plane: int, foreground: bool, start: float) -> None:
        self.job = job
        self.plane = plane
        self.foreground = foreground
        self.next_move = 0
        self.start = start
        self.erased = False


class Die:
    """One die: its booked time (``free_at``), its running operation (``op``, ending at
    ``op_end``), the end of its last booked read, the GC job it works through and the
    time it was busy."""

    __slots__ = ("index", "channel", "planes", "free_at", "op", "op_end", "read_end",
                 "gc", "busy", "wake_at")

    def __init__(self, index: int, channel: int, planes: range) -> None:
        self.index = index
        self.channel = channel
        self.planes = planes
        self.free_at = 0.0
        self.op = None
        self.op_end = 0.0
        self.read_end = 0.0
        self.gc = None
        self.busy = 0.0
        self.wake_at = None


class FlashBackend:
    """The channels and dies of one drive, and the per-plane queues of buffered
    programs.

    ``ftl``: the `PageMappingFtl` (or the in-place map) the GC jobs come from;
    ``cells``: `CellTimes`; ``unit_bytes``: the mapping unit; ``mts``: the channel's
    rate; ``command_s``: the command and address cycles of a read (on the die, before
    tR); ``multi_plane``, ``copyback``, ``suspend``: the options above.
    """

    def __init__(self, geometry, ftl, cells, *, unit_bytes: int, units_per_page: int,
                 mts: float, command_s: float = 0.0, multi_plane: bool = True,
                 copyback: bool = True, suspend: bool = False) -> None:
        self.geometry = geometry
        self.ftl = ftl
        self.cells = cells
        self.unit_bytes = unit_bytes
        self.units_per_page = units_per_page
        self.byte_s = 1.0 / (mts * 1e6)
        self.command_s = command_s
        self.multi_plane = multi_plane
        self.copyback = copyback
        self.suspend = suspend and not cells.in_place
        g = geometry
        self.pages_per_block = g.pages_per_block
        self.planes_per_die = g.planes_per_die
        self.channels = [Timeline() for _ in range(g.channels)]
        dies = g.channels * g.chips_per_channel * g.dies_per_chip
        self.dies = [Die(d, g.channel_of_die(d),
                         range(d * g.planes_per_die, (d + 1) * g.planes_per_die))
                     for d in range(dies)]
        # per plane, the buffered units waiting for their program: (host lpn, FTL page)
        self.pending = [deque() for _ in range(dies * g.planes_per_die)]
        self.buffered: dict = {}       # the write buffer's lpn -> plane, not yet programming
        # collections the FTL ran itself (its "emergencies"), to be timed first on their die
        self.emergencies = [deque() for _ in range(dies)]
        self.drain = 0                 # > 0: program partial pages too (a flush waits)
        self.gc_time = 0.0
        self.gc_intervals = deque(maxlen=GC_INTERVALS_KEPT)   # (start, end, die)
        self.gc_foreground_runs = 0
        self.gc_background_runs = 0
        self.folds = 0
        self.flash_reads = 0
        self.flash_programs = 0      # flash pages programmed (each plane's page counts)
        self.units_programmed = 0    # host units programmed
        self.slc_units = 0           # ... of which into SLC-mode blocks

    # ------------------------------------------------------------------ reads
    def read(self, die: int, ready: float, nbytes: int, t_read: float, now: float) -> float:
        """Book a read of ``nbytes`` on ``die`` whose command may start at ``ready``;
        returns when its data has crossed the channel."""
        d = self.dies[die]
        dur = self.command_s + t_read
        self.flash_reads += 1
        if self.suspend and d.op is not None and d.op_end > ready and d.op.kind != GC_MOVE:
            # program/erase suspension: the read runs inside the operation
            cells = self.cells
            if d.read_end > ready:                 # already suspended for an earlier read
                start = d.read_end
                d.op_end += dur
            else:
                start = ready + cells.suspend
                d.op_end += dur + cells.suspend + cells.resume
            end = start + dur
            if d.op_end > d.free_at:
                d.free_at = d.op_end
            d.read_end = end
            d.busy += dur
            return self.channels[d.channel].book(end, nbytes * self.byte_s, now)
        start = d.free_at if d.free_at > ready else ready
        end = self.channels[d.channel].book(start + dur, nbytes * self.byte_s, now)
        d.free_at = end                    # the page register is busy until read out
        d.read_end = end
        d.busy += end - start
        return end

    # ------------------------------------------------------------------ programs
    def enqueue(self, plane: int, lpn: int, page: int) -> int:
        """Queue a buffered mapping unit's program on ``plane`` (the FTL's
        ``plane_for_write`` of its FTL page ``page``); returns the die to wake."""
        self.pending[plane].append((lpn, page))
        return plane // self.planes_per_die

    def wake(self, die: int, now: float) -> tuple:
        """The die's wake-up at ``now``: ``(finished, next)``: the `DieOp` that finished
        (None if none), and when to wake it next (None: nothing to do)."""
        d = self.dies[die]
        finished = None
        op = d.op
        if op is not None:
            if d.op_end > now:
                return None, d.op_end
            finished = op
            d.op = None
            self._finish(d, op, now)
        if d.free_at > now:
            return finished, d.free_at
        self._start_next(d, now)
        return finished, (d.op_end if d.op is not None else None)

    def _finish(self, d: Die, op: DieOp, now: float) -> None:
        if op.kind == ERASE:
            run = d.gc
            d.gc = None
            if not getattr(run.job, "emergency", False):   # an emergency's erase is done
                self.ftl.erase_done(run.job.victim)
            self.gc_time += now - run.start
            self.gc_intervals.append((run.start, now, d.index))

    def _start_next(self, d: Die, now: float) -> None:
        """Start the die's next operation: foreground GC, else buffered programs, else
        background GC or folding."""
        ftl = self.ftl
        run = d.gc
        if run is None and self.emergencies[d.index]:
            job = self.emergencies[d.index].popleft()
            plane = self.geometry.plane_of_block(job.victim)
            run = d.gc = GcRun(job, plane, True, now)
            self.gc_foreground_runs += 1
        if run is None:
            for plane in d.planes:
                if ftl.gc_needed(plane):
                    job = ftl.collect(plane, now)
                    if job is not None:
                        run = d.gc = GcRun(job, plane, True, now)
                        self.gc_foreground_runs += 1
                        break
        elif not run.foreground and any(ftl.gc_needed(p) for p in d.planes):
            # a background run the programs held back: a plane now needs the space, so
            # it goes first (one run at a time per die)
            run.foreground = True
        if run is not None and run.foreground:
            self._gc_step(d, run, now)
            return
        if self._program(d, now):
            return
        if run is None:
            for plane in d.planes:
                job = None
                if ftl.gc_wanted(plane):
                    job = ftl.collect(plane, now)
                    if job is not None:
                        self.gc_background_runs += 1
                if job is None and ftl.fold_wanted(plane):
                    job = ftl.fold(plane, now)
                    if job is not None:
                        self.folds += 1
                if job is not None:
                    run = d.gc = GcRun(job, plane, False, now)
                    break
        if run is not None:
            self._gc_step(d, run, now)

    def _program(self, d: Die, now: float) -> bool:
        """Program one flash page on every plane of the die that has one buffered
        (multi-plane), or partial pages while a flush drains the buffer."""
        upp = self.units_per_page
        need = 1 if self.drain else upp
        chosen = []
        nunits = 0
        ftl = self.ftl
        buffered = self.buffered
        ppn0 = -1
        for plane in d.planes:
            q = self.pending[plane]
            if len(q) >= need:
                take = [q.popleft() for _ in range(min(upp, len(q)))]
                for lpn, page in take:
                    buffered.pop(lpn, None)
                    # the FTL allocates the flash page now, as the program starts
                    ppn = ftl.write(page, now)
                    if ppn0 < 0:
                        ppn0 = ppn
                    if ftl.is_slc(ppn // self.pages_per_block):
                        self.slc_units += 1
                chosen.append((plane, take))
                nunits += len(take)
                if not self.multi_plane:
                    break
        if not chosen:
            return False
        self.units_programmed += nunits
        jobs = getattr(ftl, "emergency_jobs", None)
        if jobs:                    # the FTL collected by itself: time it on its die next
            for job in jobs:
                self.emergency(job)
            jobs.clear()
        cells = self.cells
        t_prog = cells.program_time((ppn0 % self.pages_per_block) // upp,
                                    self.ftl.is_slc(ppn0 // self.pages_per_block))
        xfer = nunits * self.unit_bytes * self.byte_s
        ch_end = self.channels[d.channel].book(now, xfer, now)
        self._run(d, DieOp(PROGRAM, chosen, now), now, ch_end + t_prog,
                  t_prog + xfer)
        self.flash_programs += len(chosen)
        return True

    def _gc_step(self, d: Die, run: GcRun, now: float) -> None:
        """The next flash page of a GC job (read, then program in the same plane), or
        its erase once every page is moved."""
        moved = run.job.moved
        upp = self.units_per_page
        i = run.next_move
        cells = self.cells
        if i < len(moved):
            n = min(upp, len(moved) - i)
            run.next_move = i + n
            old, new = moved[i]
            ppb = self.pages_per_block
            ftl = self.ftl
            t_read = cells.read_time((old % ppb) // upp, ftl.is_slc(old // ppb))
            t_prog = cells.program_time((new % ppb) // upp, ftl.is_slc(new // ppb))
            end = now + self.command_s + t_read
            if not self.copyback:
                ch = self.channels[d.channel]
                xfer = n * self.unit_bytes * self.byte_s
                end = ch.book(end, xfer, now)
                end = ch.book(end, xfer, now)
            self.flash_reads += 1
            self.flash_programs += 1
            self._run(d, DieOp(GC_MOVE, None, now), now, end + t_prog,
                      self.command_s + t_read + t_prog)
            return
        self._run(d, DieOp(ERASE, None, now), now, now + cells.erase, cells.erase)

    def _run(self, d: Die, op: DieOp, now: float, end: float, busy: float) -> None:
        d.op = op
        d.op_end = end
        d.free_at = end
        d.busy += busy

    def emergency(self, job) -> int:
        """Time a collection the FTL already ran (moves, then its erase) before the die's
        other work; returns the die to wake."""
        die = self.geometry.plane_of_block(job.victim) // self.planes_per_die
        self.emergencies[die].append(job)
        return die

    # ------------------------------------------------------------------ figures
    def pending_units(self) -> int:
        """Mapping units buffered and not yet being programmed."""
        return sum(len(q) for q in self.pending)

    def utilisation(self, elapsed: float) -> dict:
        """Busy share of each channel and die over ``elapsed`` seconds."""
        if elapsed <= 0:
            return {"channels": [], "dies": []}
        return {"channels": [round(min(1.0, c.busy / elapsed), 4) for c in self.channels],
                "dies": [round(min(1.0, d.busy / elapsed), 4) for d in self.dies]}
