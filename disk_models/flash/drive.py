"""`FlashDrive`: a flash drive as a `Device` -- host interface, controller, FTL, back end.

A request's life, term by term:

* **fetch**: the host interface takes the command (NVMe: the arbiter fetches it from
  its SQ, ``fetch`` seconds; SATA: the command FIS crosses the link); time ``t0``;
* **read**: ``t0 + fw_read``; then per flash page it touches (its mapping units grouped
  by flash page): nothing if the unit is in the write buffer or was never written (the
  controller returns it from DRAM or as zeros), else the back end's read on the page's
  die and channel (`blksim.disk_models.flash.backend`), after the translation page's
  read when the mapping cache misses; the request's data then crosses the host link:
  completion = link end after the last page;
* **write**: ``t0 + fw_write``, then it waits for room in the write buffer
  (`blksim.disk_models.flash.controller`), its data crosses the host link and its units
  enter the buffer, queued on the plane the FTL will write them to, complete (the FTL
  allocates their flash pages when their program starts); without a buffer, or FUA
  without power-loss protection: complete when the units are programmed;
* **flush** (``op`` 2): ``t0 + fw_write``; without PLP it also waits until every unit
  buffered before it is programmed (the buffer is drained: partial flash pages are
  programmed);
* **discard** (``op`` 3): the FTL's ``trim`` of the whole mapping units inside the range,
  complete at ``t0 + fw_write``.

Internal events (a heap): a die's wake-up (an operation ends or the die may start the
next) and the NVMe arbiter's round. A read takes none: its completion is known when it
is fetched, from the free-at times of its die, channel and link. ``describe`` gives the
figures (`figures`).
"""

from __future__ import annotations

import heapq

from blksim.block.request import REQ_OP_DISCARD, REQ_OP_FLUSH, REQ_OP_READ, REQ_OP_WRITE
from blksim.disk_models.base import Device, DeviceError
from blksim.disk_models.flash.backend import PROGRAM, FlashBackend
from blksim.disk_models.flash.controller import WriteBuffer

# the request's operation (``enum req_op``: the block layer's numbers)
READ, WRITE, FLUSH, DISCARD = REQ_OP_READ, REQ_OP_WRITE, REQ_OP_FLUSH, REQ_OP_DISCARD
_WAKE, _ARBITRATE, _ENQUEUE = 0, 1, 2
#: Samples kept of the free-block series (halved, keeping every other, when full).
FREE_SERIES_MAX = 256


class FlashDrive(Device):
    """A flash drive built from a resolved `FlashSpec` (`blksim.disk_models.types.flash`).

    ``ftl``: the FTL (a `PageMappingFtl`, already preconditioned, or the in-place map);
    ``interface``: an `NvmeInterface` or `SataInterface`; ``mapping_cache``: a
    `MappingCache` or None; ``queue_depth``: commands per hardware queue.
    """

    def __init__(self, spec, ftl, interface, *, queue_depth: int, mapping_cache=None,
                 name: str | None = None) -> None:
        self.spec = spec
        self.name = name or spec.name
        self.capacity = spec.capacity_sectors
        self.queue_depth = queue_depth
        self.nr_hw_queues = spec.hw_queues
        self.volatile_write_cache = spec.buffer_units > 0 and not spec.plp
        # FUA: the NVMe driver announces it with the volatile cache (nvme_update_disk_info,
        # drivers/nvme/host/core.c, 5.4-6.6: blk_queue_write_cache(q, vwc, vwc)); libata
        # does not by default (drivers/ata/libata-core.c: the libata.fua parameter, 0)
        self.fua = self.volatile_write_cache and spec.interface == "nvme"
        self._limit = queue_depth * spec.hw_queues
        self.ftl = ftl
        self.hi = interface
        self.mc = mapping_cache
        g = spec.geometry
        self.geometry = g
        self.cells = spec.cells
        self.upp = spec.units_per_page
        self.unit_bytes = g.page_bytes
        self.spu = g.page_bytes // 512
        self.ppb = g.pages_per_block
        self.pages_per_die = g.pages_per_plane * g.planes_per_die
        self.pages_per_plane = g.pages_per_plane
        # the FTL stripes its pages over the planes; a flash page's worth of consecutive
        # host units must share a plane, so the drive renumbers them (`_ftl_page`)
        self.planes = g.planes
        self.stripe = self.upp * g.planes
        self.striped = (spec.logical_pages // self.stripe) * self.stripe if self.upp > 1 else 0
        self.backend = FlashBackend(g, ftl, spec.cells, unit_bytes=g.page_bytes,
                                    units_per_page=self.upp, mts=spec.channel_mts,
                                    command_s=spec.command_s, multi_plane=spec.multi_plane,
                                    copyback=spec.copyback, suspend=spec.suspend)
        self.buffer = WriteBuffer(spec.buffer_units, g.planes)
        self.backend.buffered = self.buffer.dirty   # units leave it when programming starts
        self.fw_read = spec.fw_read_s
        self.fw_write = spec.fw_write_s
        self.plp = spec.plp
        self._events: list = []          # (time, seq, kind, arg)
        # completions: -time ascending (the next to complete last), and the requests in
        # the same order (two lists: a list of floats bisects fast on PyPy, tuples do not)
        self._done_at: list = []
        self._done: list = []
        self._seq = 0
        self._outstanding = 0
        self._writes_waiting: list = []  # [rq, ready time, fua], waiting for buffer room
        self._arb_due = None
        self._arriving: dict = {}        # event id -> units whose data is on the link
        self._last_event = 0.0
        self.flush_waiting = 0
        self.completed = 0
        self.host_units_written = 0
        self.free_series: list = []
        self._series_every = max(1, g.planes * g.pages_per_block // 4)
        self._update_drain()

    # ------------------------------------------------------------------ Device
    def can_accept(self) -> bool:
        return self._outstanding < self._limit

    def outstanding(self) -> int:
        return self._outstanding

    def submit(self, rq, now: float) -> None:
        self._outstanding += 1
        hctx = getattr(rq, "hctx", None)
        sq = hctx.index if hctx is not None else 0
        hi = self.hi
        t = hi.submit(rq, sq, now)
        if t is None:
            due = hi.arbitration_due()
            if self._arb_due is None or due < self._arb_due:
                self._arb_due = due
                self._push(due, _ARBITRATE, 0)
            return
        self._start(rq, t, now)

    def next_event_time(self):
        t = self._events[0][0] if self._events else None
        if self._done_at:
            d = -self._done_at[-1]
            if t is None or d < t:
                t = d
        return t

    def pop_completed(self, now: float) -> list:
        events = self._events
        while events and events[0][0] <= now:
            t, _, kind, arg = heapq.heappop(events)
            self._last_event = t
            if kind == _WAKE:
                self._wake(arg, t)
            elif kind == _ENQUEUE:
                self._enqueue(self._arriving.pop(arg), t)
            else:
                self._arbitrate(t)
        out = []
        at = self._done_at
        done = self._done
        limit = -now
        while at and at[-1] >= limit:
            at.pop()
            out.append(done.pop())
        self._outstanding -= len(out)
        self.completed += len(out)
        if now > self._last_event:
            self._last_event = now
        return out

    # ------------------------------------------------------------------ commands
    def _start(self, rq, t: float, now: float) -> None:
        """The command was fetched at ``t`` (>= ``now``): run it."""
        if self.service_probe is not None:
            self.service_probe(rq, t)
        op = rq.op
        if op == READ:
            self._read(rq, t + self.fw_read, now)
        elif op == WRITE:
            fua = rq.fua and not self.plp
            self._write(rq, t + self.fw_write, now, fua)
        elif op == FLUSH:
            self._flush(rq, t + self.fw_write, now)
        elif op == DISCARD:
            self._discard(rq)
            self._complete(rq, t + self.fw_write)
        else:
            raise DeviceError(f"{self.name}: request operation {op!r} is not supported")

    def _read(self, rq, t: float, now: float) -> None:
        spu = self.spu
        first = rq.sector // spu
        last = (rq.sector + rq.nr_sectors - 1) // spu
        dirty = self.buffer.dirty
        ftl = self.ftl
        mc = self.mc
        end = t
        if first == last:                   # one mapping unit: the common case
            if first not in dirty:
                x = self._ftl_page(first)
                ppn = ftl.lookup(x)
                if ppn >= 0:
                    if mc is not None and not mc.access(x, False):
                        t = self._translation_read(x, t, now)
                    end = self._read_page(ppn, 1, t, now)
        else:
            pages = {}                      # flash page -> [its first ppn, units read]
            upp = self.upp
            for lpn in range(first, last + 1):
                if lpn in dirty:
                    continue
                x = self._ftl_page(lpn)
                ppn = ftl.lookup(x)
                if ppn < 0:
                    continue
                if mc is not None and not mc.access(x, False):
                    t = self._translation_read(x, t, now)
                entry = pages.get(ppn // upp)
                if entry is None:
                    pages[ppn // upp] = [ppn, 1]
                else:
                    entry[1] += 1
            for ppn, units in pages.values():
                e = self._read_page(ppn, units, t, now)
                if e > end:
                    end = e
        self._complete(rq, self.hi.to_host(end, rq.nr_sectors * 512, now))

    def _read_page(self, ppn: int, units: int, ready: float, now: float) -> float:
        """Read ``units`` mapping units of the flash page holding ``ppn``."""
        ppb = self.ppb
        block = ppn // ppb
        t_read = self.cells.read_time((ppn - block * ppb) // self.upp, self.ftl.is_slc(block))
        return self.backend.read(ppn // self.pages_per_die, ready, units * self.unit_bytes,
                                 t_read, now)

    def _translation_read(self, lpn: int, ready: float, now: float) -> float:
        """A mapping-cache miss: the translation page's read (its data stays in the
        controller: one mapping unit over the channel)."""
        return self.backend.read(self.mc.where(lpn), ready, self.unit_bytes,
                                 self.cells.mean_read(), now)

    def _ftl_page(self, lpn: int) -> int:
        """The FTL's page number for the host's mapping unit ``lpn``.

        The FTL puts page ``x`` on the plane of ``x mod planes`` (CWDP striping, its
        module docstring). Striping host units that way would scatter the four 4 KiB
        units of a 16 KiB stretch over four planes, so a sequential 16 KiB could never
        be one flash page. Drives stripe flash pages (MQSim's CWDP stripes its pages,
        which are flash pages), so the drive hands the FTL ``x`` such that units
        ``g * upp .. g * upp + upp - 1`` (flash-page group ``g``) share plane ``g mod
        planes``: ``x = (g // planes) * upp * planes + r * planes + g mod planes``
        with ``r`` the unit inside the group, a bijection of the first ``striped``
        units; the rest (fewer than one stripe) keep their numbers."""
        if lpn >= self.striped:
            return lpn
        g, r = divmod(lpn, self.upp)
        planes = self.planes
        return (g // planes) * self.stripe + r * planes + g % planes

    def _units(self, rq) -> range:
        spu = self.spu
        return range(rq.sector // spu, (rq.sector + rq.nr_sectors - 1) // spu + 1)

    def _write(self, rq, t: float, now: float, fua: bool) -> None:
        if self._writes_waiting or not self.buffer.has_room(len(self._units(rq))):
            self._writes_waiting.append((rq, t, fua))
            self._update_drain(now)
            return
        self._admit(rq, t, now, fua)

    def _admit(self, rq, t: float, now: float, fua: bool) -> None:
        """The write's data crosses the link and its units enter the buffer."""
        ready = self.hi.from_host(t, rq.nr_sectors * 512, now)
        buf = self.buffer
        dirty = buf.dirty
        ftl = self.ftl
        entered = buf.entered
        planes = {}
        units = []
        for lpn in self._units(rq):
            if lpn in dirty:                 # still buffered: overwritten in DRAM
                planes[dirty[lpn]] = None
                continue
            page = self._ftl_page(lpn)
            plane = ftl.plane_for_write(page)   # its flash page is allocated at program
            dirty[lpn] = plane
            units.append((plane, lpn, page))
            entered[plane] += 1
            planes[plane] = None
        new = len(units)
        if units:
            if ready > now:                 # programs may start once the data is here
                self._seq += 1
                self._arriving[self._seq] = units
                heapq.heappush(self._events, (ready, self._seq, _ENQUEUE, self._seq))
            else:
                self._enqueue(units, now)
        self.host_units_written += new
        buf.add(new)
        if self._writes_waiting:
            self._update_drain(now)
        if self.mc is not None:
            for lpn in self._units(rq):
                self.mc.access(self._ftl_page(lpn), True)
        if self.host_units_written // self._series_every != \
                (self.host_units_written - new) // self._series_every:
            self._sample_free(now)
        sync = fua or buf.capacity == 0
        if sync and buf.wait(rq, {p: entered[p] for p in planes}):
            self.flush_waiting += 1
            self._update_drain(now)
        else:
            self._complete(rq, self._write_done(ready, now))

    def _enqueue(self, units: list, t: float) -> None:
        """Buffered units whose data has arrived join their planes' program queues."""
        backend = self.backend
        ppd = self.geometry.planes_per_die
        dies = set()
        for plane, lpn, page in units:
            backend.enqueue(plane, lpn, page)
            dies.add(plane // ppd)
        for die in dies:
            self._wake_die(die, t)

    def _write_done(self, ready: float, now: float) -> float:
        complete = getattr(self.hi, "complete_write", None)
        return complete(ready, now) if complete is not None else ready

    def _flush(self, rq, t: float, now: float) -> None:
        if self.plp or self.buffer.capacity == 0 or \
                not self.buffer.wait(rq, self.buffer.targets_all()):
            self._complete(rq, t)
            return
        self.flush_waiting += 1
        self._update_drain(now)

    def _discard(self, rq) -> None:
        """TRIM of the mapping units wholly inside the range."""
        spu = self.spu
        first = -(-rq.sector // spu)
        end = (rq.sector + rq.nr_sectors) // spu
        if end > first:
            dirty = self.buffer.dirty
            trim = self.ftl.trim
            for lpn in range(first, end):
                dirty.pop(lpn, None)
                trim(self._ftl_page(lpn), 1)

    def _complete(self, rq, t: float) -> None:
        """``rq`` completes at ``t`` (ties: in the order they were completed here)."""
        at = self._done_at
        key = -t
        i = 0                               # bisect_left, written out (see Timeline.book)
        hi = len(at)
        while i < hi:
            mid = (i + hi) >> 1
            if at[mid] < key:
                i = mid + 1
            else:
                hi = mid
        at.insert(i, key)
        self._done.insert(i, rq)

    # ------------------------------------------------------------------ events
    def _push(self, t: float, kind: int, arg: int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, kind, arg))

    def _wake_die(self, die: int, at: float) -> None:
        d = self.backend.dies[die]
        if d.wake_at is None or at < d.wake_at:
            d.wake_at = at
            self._push(at, _WAKE, die)

    def _wake_all(self, now: float) -> None:
        pending = self.backend.pending
        ppd = self.geometry.planes_per_die
        for die in {p // ppd for p, q in enumerate(pending) if q}:
            self._wake_die(die, now)

    def _arbitrate(self, t: float) -> None:
        self._arb_due = None
        for rq, fetched in self.hi.arbitrate(t):
            self._start(rq, fetched, t)

    def _wake(self, die: int, t: float) -> None:
        d = self.backend.dies[die]
        if d.wake_at != t:
            return                        # superseded by an earlier wake-up
        d.wake_at = None
        finished, nxt = self.backend.wake(die, t)
        if finished is not None and finished.kind == PROGRAM:
            self._programmed(finished, t)
        if nxt is not None:
            self._wake_die(die, nxt)

    def _programmed(self, op, t: float) -> None:
        """A program ended: its units leave the buffer; release the waiters, admit the
        waiting writes."""
        buf = self.buffer
        for plane, units in op.planes:
            buf.programmed_units(plane, len(units))
        for rq in buf.released():
            self.flush_waiting -= 1
            # a FUA or unbuffered write ends with its completion (SATA: a FIS); a flush now
            self._complete(rq, self._write_done(t, t) if rq.nr_sectors else t)
        waiting = self._writes_waiting
        while waiting and buf.has_room(len(self._units(waiting[0][0]))):
            rq, ready, fua = waiting.pop(0)
            self._admit(rq, ready if ready > t else t, t, fua)
        self._update_drain(t)

    def _update_drain(self, now: float | None = None) -> None:
        """Program partial flash pages while a flush or FUA write waits, always without a
        buffer, and while writes wait for room with fewer than ``planes x
        units_per_page`` units buffered (with that many, by pigeonhole, some plane has a
        full page to program or some units are being programmed, so room will come
        without padding pages; with fewer, none may come)."""
        buf = self.buffer
        starved = self._writes_waiting and buf.used < self.geometry.planes * self.upp
        self.backend.drain = self.flush_waiting + (1 if buf.capacity == 0 else 0) + \
            (1 if starved else 0)
        if now is not None and self.backend.drain:
            self._wake_all(now)              # partial pages may now be programmed

    # ------------------------------------------------------------------ figures
    def _sample_free(self, now: float) -> None:
        free = getattr(self.ftl, "free_blocks_total", None)
        if free is None:
            return
        series = self.free_series
        series.append((round(now, 6), int(free())))
        if len(series) >= FREE_SERIES_MAX:
            del series[1::2]
            self._series_every *= 2

    def gc_intervals(self) -> list:
        """The last GC intervals, (start, end, die), oldest first (bounded)."""
        return list(self.backend.gc_intervals)

    def figures(self) -> dict:
        """Write amplification, GC, erases, free blocks, utilisation, cache hit ratios,
        the buffer's dirty units."""
        ftl = self.ftl
        b = self.backend
        out = {
            "write_amplification": round(float(ftl.write_amplification()), 4),
            "host_pages_written": int(getattr(ftl, "host_pages_written", 0)),
            "gc_runs": b.gc_foreground_runs + b.gc_background_runs,
            "gc_foreground_runs": b.gc_foreground_runs,
            "gc_background_runs": b.gc_background_runs,
            "slc_folds": b.folds,
            "gc_time_s": round(b.gc_time, 9),
            "erases": int(getattr(ftl, "erases", 0)),
            "flash_reads": b.flash_reads,
            "flash_programs": b.flash_programs,
            "buffer_dirty_units": self.buffer.used,
            "buffer_peak_units": self.buffer.peak,
            "slc_cache_hit_ratio": round(b.slc_units / b.units_programmed, 4)
            if b.units_programmed else 0.0,
        }
        if hasattr(ftl, "free_blocks_total"):
            out["free_blocks"] = int(ftl.free_blocks_total())
            out["free_blocks_series"] = [list(s) for s in self.free_series]
        if self.mc is not None:
            out["mapping_cache_hit_ratio"] = round(float(self.mc.hit_ratio()), 4)
        out["utilisation"] = b.utilisation(self._last_event)
        return out

    def describe(self) -> dict:
        spec = self.spec
        out = {"name": self.name, "capacity_sectors": self.capacity, "rotational": False,
               "cell": self.cells.kind, "plp": self.plp,
               "write_buffer_bytes": spec.buffer_units * self.unit_bytes,
               "over_provisioning": spec.over_provisioning,
               "start_state": spec.start_state}
        out.update(self.hi.describe())
        out["geometry"] = self.geometry.describe()
        out["figures"] = self.figures()
        return out
