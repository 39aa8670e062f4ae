"""A hardware RAID controller: one logical unit to the host, member drives behind it, and
a cache in between.

The host's block layer sees one device with the controller's queue depth. Inside, each
host request goes through these steps (times in seconds):

1. **Command processing**: ``overhead`` after the request reaches the controller, its
   firmware has decoded it (no contention: the controller's processor is not modelled).
2. **Reads.** The request's 4 KiB cache lines are looked up. Lines in the cache are hits;
   lines being fetched are waited for; the others are read from the members
   (`raid_layout.RaidLayout.plan_read`: a mirrored piece from the copy whose member has
   the fewest I/Os outstanding, then the nearest to its last position; a piece on a
   failed RAID 5 or 6 member from the row's other data members and P) and kept in the
   cache. The
   data then crosses the host bus: ``nr_sectors * 512 / host_rate``. With read-ahead
   (``read_policy = "read-ahead"``, or ``"adaptive"`` once two reads in a row were
   sequential, as LSI/Dell controllers describe their policies) the next stripe rows
   after the request are fetched too, without delaying it.
3. **Writes.** The data crosses the host bus first. *Write-through*: the member writes
   (`plan_write`: RAID 5 or 6 full-stripe, read-modify-write or reconstruct-write, whichever
   reads less) are done, then the request completes; the lines stay in the cache, clean.
   *Write-back* (battery-backed): the lines are marked dirty and the request completes at
   once, unless the cache has no room (every line dirty): then it waits for destaging to
   free lines, and its latency climbs to the members' speed.
4. **Destaging** (write-back): once dirty lines reach ``high_water`` of the cache, rows
   of dirty data are written back in ascending stripe order (a sweep) until they fall to
   ``low_water``; after ``destage_idle`` without host requests everything dirty is
   written back. Each destage write takes the next row of the sweep and the consecutive
   rows after it holding dirty lines, up to ``max_member_io`` sectors on a member, and a
   member's pieces that follow one another go as one I/O. A RAID 5 or 6 row whose data the
   cache holds whole needs no reads; otherwise the row is written as `plan_write` plans
   it. At most ``destage_rows`` rows are written back at once.
5. **The flush timer** (write-back, ``flush_interval`` > 0: LSI MegaRAID firmware's
   cache flush interval): ``flush_interval`` after the cache first holds dirty data,
   and every ``flush_interval`` after that while it still does, the controller writes
   back as many dirty lines as the cache holds at that tick (a forced sweep that goes
   on until that many lines are written), whatever the watermarks and the host's load.

Member I/Os wait in a FIFO per member while that member's own tagged queue
(``member_queue_depth``) is full. When the member takes the next, the waiting I/Os of the
same direction adjacent to it are joined into it (a back or front merge, the rule of
``attempt_merge`` in block/ll_rw_blk.c, 2.6.18: the firmware's own is not published), up
to ``max_member_io`` sectors; each joined piece completes its own step. Each member drive
orders its queue as its model does.
The controller counts every member I/O (`member_ios`), and reports each member's
/proc/diskstats-like counters through ``member_stats`` objects the caller supplies.

``probe``: None, or ``probe(kind, now, value)``, which a watcher sets to follow the
cache (it costs one attribute test where it would be called): ``dirty`` (value: the
dirty lines, after each change), ``destage_start`` and ``destage_end`` (value: the
sectors of dirty data in that destage write), ``flush_tick`` (value: the dirty lines
the flush timer found).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import OrderedDict, deque

from blksim.disk_models.base import Device, DeviceError
from blksim.disk_models.raid_layout import MemberIO, RaidLayout

LINE = 8                     # sectors per cache line (4 KiB)
# The largest member I/O the controller makes by joining (destaging consecutive rows,
# joining waiting I/Os): 1024 sectors (512 KiB), the block layer's own default largest
# request (BLK_DEF_MAX_SECTORS, include/linux/blkdev.h, 2.6.18). The firmware's limit is
# not published: blksim's choice.
MAX_MEMBER_IO = 1024
INF = float("inf")
WRITE_POLICIES = ("write-back", "write-through")
READ_POLICIES = ("none", "read-ahead", "adaptive")


class _MemberIO:
    """One I/O at a member drive (the request object the drive sees). ``joined``: the
    I/Os joined into it while they waited (each completes its own step with it);
    ``gone``: it was joined into another and is no longer in its member's FIFO."""

    __slots__ = ("sector", "nr_sectors", "write", "member", "step", "t_start", "joined",
                 "gone")

    def __init__(self, member: int, sector: int, nr_sectors: int, write: bool, step) -> None:
        self.member = member
        self.sector = sector
        self.nr_sectors = nr_sectors
        self.write = write
        self.step = step
        self.t_start = 0.0
        self.joined = None
        self.gone = False


class _Steps:
    """A sequence of phases of member I/Os (a RAID 5/6 update: reads, then writes); calls
    ``done(now)`` when the last phase completes."""

    __slots__ = ("phases", "left", "done")

    def __init__(self, phases: list, done) -> None:
        self.phases = [p for p in phases if p]
        self.left = 0
        self.done = done


class _Fill:
    """Lines being read into the cache, and the host reads waiting for them."""

    __slots__ = ("lines", "waiters")

    def __init__(self, lines) -> None:
        self.lines = lines
        self.waiters = []


class _HostRead:
    __slots__ = ("rq", "waiting")

    def __init__(self, rq) -> None:
        self.rq = rq
        self.waiting = 0


class HostLink:
    """The link between the host and a controller's port (a PCI Express slot, a Fibre
    Channel path): one transfer at a time at ``rate`` bytes a second. LUNs of one array
    behind one port share theirs (``host_link`` in their raid tables)."""

    __slots__ = ("rate", "free")

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.free = 0.0                  # when the link is free


class RaidController(Device):
    """A RAID controller presenting ``layout`` over ``members`` (drive models) as one
    device. Parameters as in the module docstring; ``cache_sectors`` 0 is a controller
    without a cache (an HBA: no read caching, writes through)."""

    def __init__(self, name: str, layout: RaidLayout, members: list, *, queue_depth: int,
                 cache_sectors: int = 0, write_policy: str = "write-through",
                 read_policy: str = "none", high_water: float = 0.75,
                 low_water: float = 0.5, destage_idle: float = 0.05,
                 destage_rows: int | None = None, read_ahead_rows: int = 1,
                 overhead: float = 0.0, host_rate: float = 1e9, member_stats=None,
                 label: str | None = None, max_member_io: int = MAX_MEMBER_IO,
                 flush_interval: float = 0.0, host_link: str | None = None) -> None:
        if write_policy not in WRITE_POLICIES:
            raise DeviceError(f"{name}: write_policy: expected one of "
                              f"{', '.join(WRITE_POLICIES)}, found {write_policy!r}")
        if read_policy not in READ_POLICIES:
            raise DeviceError(f"{name}: read_policy: expected one of "
                              f"{', '.join(READ_POLICIES)}, found {read_policy!r}")
        if not 0.0 <= low_water < high_water <= 1.0:
            raise DeviceError(f"{name}: expected 0 <= low_water < high_water <= 1, found "
                              f"{low_water} and {high_water}")
        if cache_sectors and layout.strip < LINE:
            raise DeviceError(f"{name}: a strip of {layout.strip} sectors is smaller than "
                              f"the cache's line ({LINE} sectors)")
        if max_member_io < 1:
            raise DeviceError(f"{name}: max_member_io: expected a positive number of "
                              f"sectors, found {max_member_io}")
        if not flush_interval >= 0.0:
            raise DeviceError(f"{name}: flush_interval: expected 0 (no timer) or a positive "
                              f"time, found {flush_interval}")
        self.name = name
        self.label = label or "raid controller"
        self.array = layout
        self.members = members
        self.queue_depth = queue_depth
        self.capacity = layout.capacity
        self.lines_max = cache_sectors // LINE
        self.write_back = write_policy == "write-back" and self.lines_max > 0
        self.write_policy = write_policy
        self.read_policy = read_policy if self.lines_max > 0 else "none"
        self.high = high_water * self.lines_max
        self.low = low_water * self.lines_max
        self.destage_idle = destage_idle
        self.max_member_io = max_member_io
        # a destage write takes up to this many consecutive rows (each member's share of
        # them at most max_member_io), and by default two such writes are in progress
        self._batch_rows = max(1, max_member_io // layout.strip)
        self.destage_rows = destage_rows or 2 * self._batch_rows
        self.read_ahead_rows = read_ahead_rows
        self.overhead = overhead
        self.host_rate = host_rate
        self.member_stats = member_stats
        n = len(members)
        self._waiting = [deque() for _ in range(n)]   # member I/Os for a full member queue
        self._nwait = [0] * n                            # ... how many (not joined away)
        self._by_start = [{} for _ in range(n)]          # ... (sector, write) -> I/O
        self._by_end = [{} for _ in range(n)]            # ... (end sector, write) -> I/O
        self._busy = [0] * n                            # member I/Os at each member drive
        self._member_due = [INF] * n                     # each member's pending event
        self._last = [0] * n                            # each member's last sector
        self.member_ios = [[0, 0] for _ in range(n)]    # [reads, writes] per member
        self._timers: list = []                          # (time, seq, action, arg)
        self._seq = 0
        self._done: list = []                            # (time, seq, rq): host completions
        self._outstanding = 0
        # cache: clean lines in LRU order, dirty lines with a version, lines being read
        self._clean: OrderedDict = OrderedDict()
        self._dirty: dict = {}
        self._dirty_rows: dict = {}                      # row -> its dirty lines
        self._row_order: list = []                       # rows with dirty lines, sorted
        self._fills: dict = {}                           # line -> _Fill
        self._destaging = 0
        self._writing: dict = {}                         # dirty lines being written back
        self._flushing = False                           # idle: write back everything
        self._sweep = 0                                  # next row of the destage sweep
        self._blocked: deque = deque()                   # write-back writes with no room
        self._last_read_end = -1
        self.link = HostLink(host_rate)                  # its own, or shared (`share_link`)
        self.host_link = host_link                       # the shared link's name, or None
        self._sequential = False
        self._idle_token = 0
        self._row_lines = layout.strip * layout.data_members // LINE
        self.hits = 0
        self.misses = 0
        self.flush_interval = flush_interval
        self._flush_armed = False                        # a flush tick is pending
        self._flush_left = 0                             # lines the flush still writes

    #: The cache's watcher, ``probe(kind, now, value)``, or None (module docstring).
    probe = None
    #: A write-back cache here is battery-backed, and a cache flush costs the host nothing:
    #: the MegaRAID SAS driver completes SYNCHRONIZE CACHE to a logical drive itself,
    #: without sending it to the firmware ("FW takes care of flush cache on its own":
    #: ``megasas_queue_command``, drivers/scsi/megaraid/megaraid_sas.c, 2.6.18; 4.x on
    #: unless the firmware asks for it, ``megasas_sync_cache_behavior``). blksim gives the
    #: controller no volatile cache: the host sends it no flush and a barrier costs only
    #: the queue's drain, the same time as a flush that costs nothing
    #: (`blksim.block.flush`). (Member drives' caches are off, as controllers set them.)
    volatile_write_cache = False

    # ------------------------------------------------------------------ Device
    def can_accept(self) -> bool:
        """True while fewer than ``queue_depth`` host requests are outstanding."""
        return self._outstanding < self.queue_depth

    def outstanding(self) -> int:
        """Host requests accepted and not yet completed."""
        return self._outstanding

    def submit(self, rq, now: float) -> None:
        """Take a host request; its processing starts after the command overhead."""
        if self._outstanding >= self.queue_depth:
            raise DeviceError(f"{self.name}: submit with {self._outstanding} requests "
                              f"outstanding (queue_depth {self.queue_depth})")
        if rq.sector < 0 or rq.nr_sectors <= 0 or rq.sector + rq.nr_sectors > self.capacity:
            raise DeviceError(f"{self.name}: request {rq.sector}+{rq.nr_sectors} outside the "
                              f"array (0..{self.capacity - 1})")
        self._outstanding += 1
        self._idle_token += 1
        self._flushing = False
        if self.service_probe is not None:      # no host queue: it starts on it at once
            self.service_probe(rq, now)
        start = now + self.overhead
        if rq.write:
            # the data crosses the host link into the controller first (booked now:
            # transfers use the link in the order they are booked)
            self._timer(self._transfer(rq.nr_sectors, start), self._write_in, rq)
        else:
            self._timer(start, self._read, rq)

    def next_event_time(self) -> float | None:
        """The earliest of the controller's own next event (its members' completions
        among them) and its next host completion."""
        due = self._timers[0][0] if self._timers else None
        if self._done and (due is None or self._done[0][0] < due):
            due = self._done[0][0]
        return due

    def pop_completed(self, now: float) -> list:
        """Run everything due by ``now``; return the host requests completed."""
        timers = self._timers
        pop = heapq.heappop
        while timers and timers[0][0] <= now:
            t, _s, action, arg = pop(timers)
            action(arg, t)
        out = []
        done = self._done
        while done and done[0][0] <= now:
            out.append(heapq.heappop(done)[2])
        if out:
            self._outstanding -= len(out)
            if self._outstanding == 0 and self.write_back and self._dirty:
                self._idle_token += 1
                self._timer(now + self.destage_idle, self._idle_destage, self._idle_token)
        return out

    def describe(self) -> dict:
        """Facts for reports: the array, its cache and its members."""
        lay = self.array
        member = self.members[0].describe().get("name", "?")
        return {"name": f"{self.label} {lay.level} {len(self.members)}x{member}",
                "model": "raid controller", "controller": self.label, "level": lay.level,
                "members": len(self.members), "failed_member": lay.failed,
                "stripe_size_kb": lay.strip // 2, "capacity_sectors": self.capacity,
                "capacity_bytes": self.capacity * 512,
                "cache_mb": self.lines_max * LINE / 2048, "write_policy": self.write_policy
                if self.lines_max else "write-through (no cache)",
                "read_policy": self.read_policy, "queue_depth": self.queue_depth,
                "member_drive": member,
                "member_queue_depth": self.members[0].queue_depth,
                **({"flush_interval_s": self.flush_interval}
                   if self.write_back and self.flush_interval else {})}

    # ------------------------------------------------------------------ plumbing
    def _timer(self, when: float, action, arg) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (when, self._seq, action, arg))

    def _complete(self, rq, when: float) -> None:
        self._seq += 1
        heapq.heappush(self._done, (when, self._seq, rq))

    def share_link(self, link: HostLink) -> None:
        """Transfer over ``link``, which other controllers' LUNs use too."""
        self.link = link

    def _transfer(self, nr_sectors: int, now: float) -> float:
        """When ``nr_sectors`` sent over the host link from ``now`` have arrived: one
        transfer at a time on the link (shared by the LUNs naming it), at its rate."""
        link = self.link
        start = now if now > link.free else link.free
        link.free = start + nr_sectors * 512 / link.rate
        return link.free

    def _run(self, phases: list, done, now: float) -> None:
        """Issue ``phases`` of member I/Os one after another, then call ``done(now)``.
        Strips that follow one another on a member go as one I/O, as controllers
        coalesce them."""
        steps = _Steps([_coalesce(p) for p in phases], done)
        if not steps.phases:
            done(now)
            return
        self._issue_phase(steps, now)

    def _issue_phase(self, steps: _Steps, now: float) -> None:
        phase = steps.phases.pop(0)
        steps.left = len(phase)
        for mio in phase:
            io = _MemberIO(mio.member, mio.sector, mio.nr_sectors, mio.write, steps)
            self.member_ios[io.member][1 if io.write else 0] += 1
            io.t_start = now
            if self.member_stats is not None:
                self.member_stats[io.member].request_added(now)
            self._send(io, now)

    def _send(self, io: _MemberIO, now: float) -> None:
        m = io.member
        if self._nwait[m] or not self.members[m].can_accept():
            self._enqueue(io)
            return
        self._start(io, now)
        self._watch(m)

    def _start(self, io: _MemberIO, now: float) -> None:
        m = io.member
        self._busy[m] += 1
        self._last[m] = io.sector + io.nr_sectors
        self.members[m].submit(io, now)

    # The member FIFO. An I/O waits here while its member's tagged queue is full; when
    # the member takes the next one, the waiting I/Os of the same direction that start
    # where it ends (a back merge) or end where it starts (a front merge) are joined
    # into it, up to ``max_member_io`` sectors: the rule of Linux's attempt_merge
    # (block/ll_rw_blk.c, 2.6.18) for requests in one queue, applied to the controller's
    # queue of a member (docs/raid.md: the firmware's own rule is not published).
    def _enqueue(self, io: _MemberIO) -> None:
        m = io.member
        self._waiting[m].append(io)
        self._nwait[m] += 1
        self._by_start[m].setdefault((io.sector, io.write), io)
        self._by_end[m].setdefault((io.sector + io.nr_sectors, io.write), io)

    def _unindex(self, io: _MemberIO) -> None:
        m = io.member
        key = (io.sector, io.write)
        if self._by_start[m].get(key) is io:
            del self._by_start[m][key]
        key = (io.sector + io.nr_sectors, io.write)
        if self._by_end[m].get(key) is io:
            del self._by_end[m][key]
        self._nwait[m] -= 1
        if not self._nwait[m]:
            self._waiting[m].clear()         # only I/Os joined away were left

    def _next_waiting(self, m: int, now: float) -> _MemberIO:
        """The first I/O of member ``m``'s FIFO, with the waiting I/Os adjacent to it
        joined into it."""
        waiting = self._waiting[m]
        io = waiting.popleft()
        while io.gone:
            io = waiting.popleft()
        self._unindex(io)
        by_start, by_end = self._by_start[m], self._by_end[m]
        limit = self.max_member_io
        while self._nwait[m]:
            nxt = by_start.get((io.sector + io.nr_sectors, io.write))
            if nxt is not None and io.nr_sectors + nxt.nr_sectors <= limit:
                self._join(io, nxt, now)
                io.nr_sectors += nxt.nr_sectors
                continue
            prv = by_end.get((io.sector, io.write))
            if prv is not None and io.nr_sectors + prv.nr_sectors <= limit:
                self._join(io, prv, now)
                io.sector = prv.sector
                io.nr_sectors += prv.nr_sectors
                continue
            break
        return io

    def _join(self, io: _MemberIO, other: _MemberIO, now: float) -> None:
        """``other`` (waiting) becomes part of ``io``: one member I/O fewer, counted as
        a merge in the member's statistics."""
        self._unindex(other)
        other.gone = True
        if io.joined is None:
            io.joined = []
        io.joined.append(other)
        if other.t_start < io.t_start:
            io.t_start = other.t_start
        self.member_ios[io.member][1 if io.write else 0] -= 1
        if self.member_stats is not None:
            stats = self.member_stats[io.member]
            stats.request_merged_away(now)
            stats.bio_merged(io.write)

    def _watch(self, m: int) -> None:
        """Have `_member_event` run when member ``m``'s next completion is due (unless an
        earlier or equal call is already pending)."""
        due = self.members[m].next_event_time()
        if due is not None and due < self._member_due[m]:
            self._member_due[m] = due
            self._timer(due, self._member_event, m)

    def _member_event(self, m: int, now: float) -> None:
        if now < self._member_due[m]:
            return                       # superseded by an earlier call
        self._member_due[m] = INF
        for io in self.members[m].pop_completed(now):
            self._member_done(m, io, now)
        self._watch(m)

    def _member_done(self, m: int, io: _MemberIO, now: float) -> None:
        self._busy[m] -= 1
        if self.member_stats is not None:
            self.member_stats[m].request_completed(io.write, io.nr_sectors, io.t_start, now)
        drive = self.members[m]
        while self._nwait[m] and drive.can_accept():
            self._start(self._next_waiting(m, now), now)
        self._step_done(io.step, now)
        if io.joined:
            for part in io.joined:
                self._step_done(part.step, now)

    def _step_done(self, steps: _Steps, now: float) -> None:
        """One member I/O of ``steps``' current phase is done."""
        steps.left -= 1
        if steps.left == 0:
            if steps.phases:
                self._issue_phase(steps, now)
            else:
                steps.done(now)

    def _choose(self, sector: int):
        """The mirror copy to read: the member with the fewest I/Os outstanding, then the
        one whose last position is nearest."""
        def pick(copies):
            return min(copies, key=lambda m: (self._busy[m] + self._nwait[m],
                                              abs(self._last[m] - sector), m))
        return pick

    # ------------------------------------------------------------------ host requests
    def _read(self, rq, now: float) -> None:
        lay = self.array
        if not self.lines_max:
            self.misses += 1
            plan = lay.plan_read(rq.sector, rq.nr_sectors, self._choose(rq.sector))
            self._run([plan], lambda t: self._complete(rq, self._transfer(rq.nr_sectors, t)),
                      now)
            return
        sequential = rq.sector == self._last_read_end
        self._last_read_end = rq.sector + rq.nr_sectors
        read_ahead = self.read_policy == "read-ahead" or (
            self.read_policy == "adaptive" and sequential and self._sequential)
        self._sequential = sequential
        first, last = rq.sector // LINE, (rq.sector + rq.nr_sectors - 1) // LINE
        host = _HostRead(rq)
        missing = []
        for line in range(first, last + 1):
            if line in self._clean:
                self._clean.move_to_end(line)
            elif line in self._dirty:
                pass
            elif line in self._fills:
                fill = self._fills[line]
                if host not in fill.waiters:
                    fill.waiters.append(host)
                    host.waiting += 1
            else:
                missing.append(line)
        if missing:
            self.misses += 1
            for run in _runs(missing):
                fill = self._fetch(run, now)
                fill.waiters.append(host)
                host.waiting += 1
        elif not host.waiting:
            self.hits += 1
        if not host.waiting:
            self._complete(rq, self._transfer(rq.nr_sectors, now))
        if read_ahead:
            row_sectors = self._row_lines * LINE
            row = (rq.sector + rq.nr_sectors - 1) // row_sectors
            ahead = [line for r in range(row + 1, row + 1 + self.read_ahead_rows)
                     for line in range(r * self._row_lines, (r + 1) * self._row_lines)
                     if line * LINE < self.capacity and line not in self._clean
                     and line not in self._dirty and line not in self._fills]
            for run in _runs(ahead):
                self._fetch(run, now)

    def _fetch(self, lines: list, now: float) -> _Fill:
        """Read consecutive ``lines`` from the members into the cache."""
        fill = _Fill(lines)
        for line in lines:
            self._fills[line] = fill
        start = lines[0] * LINE
        end = min((lines[-1] + 1) * LINE, self.capacity)
        plan = self.array.plan_read(start, end - start, self._choose(start))
        self._run([plan], lambda t: self._filled(fill, t), now)
        return fill

    def _filled(self, fill: _Fill, now: float) -> None:
        for line in fill.lines:
            if self._fills.get(line) is fill:
                del self._fills[line]
                if line not in self._dirty:
                    self._cache_clean(line)
        for host in fill.waiters:
            host.waiting -= 1
            if host.waiting == 0:
                self._complete(host.rq, self._transfer(host.rq.nr_sectors, now))

    def _cache_clean(self, line: int) -> None:
        """Keep ``line`` as clean, evicting the least recently used clean line for room."""
        clean = self._clean
        if line in clean:
            clean.move_to_end(line)
            return
        if len(clean) + len(self._dirty) >= self.lines_max:
            if not clean:
                return                      # the cache is all dirty: do not keep it
            clean.popitem(last=False)
        clean[line] = None

    def _write_in(self, rq, now: float) -> None:
        """The write's data is in the controller."""
        lines = (rq.sector + rq.nr_sectors - 1) // LINE - rq.sector // LINE + 1
        if self.write_back and lines <= self.lines_max:
            # (a write larger than the whole cache goes through to the members)
            if self._blocked or not self._absorb(rq, now):
                self._blocked.append(rq)
                self._destage(now, force=True)
            return
        lay = self.array
        plan = lay.plan_write(rq.sector, rq.nr_sectors)
        reads = [io for io in plan if not io.write]
        writes = [io for io in plan if io.write]

        def written(t, rq=rq):
            if self.lines_max:
                for line in range(rq.sector // LINE, (rq.sector + rq.nr_sectors - 1) // LINE + 1):
                    self._fills.pop(line, None)
                    if line in self._dirty:      # the members now hold newer data
                        self._drop_dirty(line)
                    self._cache_clean(line)
                if self.probe is not None and self.write_back:
                    self.probe("dirty", t, len(self._dirty))
            self._complete(rq, t)
        self._run([reads, writes], written, now)

    # ------------------------------------------------------------------ write-back
    def _absorb(self, rq, now: float) -> bool:
        """Put a write's lines in the cache as dirty; False when there is no room."""
        lines = range(rq.sector // LINE, (rq.sector + rq.nr_sectors - 1) // LINE + 1)
        new = sum(1 for line in lines if line not in self._dirty)
        free = self.lines_max - len(self._dirty)       # clean lines can be evicted
        if new > free:
            return False
        clean = self._clean
        for line in lines:
            if line in clean:
                del clean[line]
            self._mark_dirty(line)
        while clean and len(clean) + len(self._dirty) > self.lines_max:
            clean.popitem(last=False)
        self._complete(rq, now)
        if self.probe is not None:
            self.probe("dirty", now, len(self._dirty))
        if self.flush_interval and not self._flush_armed:
            self._flush_armed = True
            self._timer(now + self.flush_interval, self._flush_tick, None)
        if len(self._dirty) >= self.high:
            self._destage(now)
        return True

    def _mark_dirty(self, line: int) -> None:
        self._dirty[line] = self._dirty.get(line, 0) + 1
        row = line // self._row_lines
        lines = self._dirty_rows.get(row)
        if lines is None:
            self._dirty_rows[row] = {line}
            insort(self._row_order, row)
        else:
            lines.add(line)

    def _drop_dirty(self, line: int) -> None:
        del self._dirty[line]
        row = line // self._row_lines
        lines = self._dirty_rows[row]
        lines.discard(line)
        if not lines and not any(ln in self._writing for ln in range(
                row * self._row_lines, (row + 1) * self._row_lines)):
            del self._dirty_rows[row]
            self._row_order.remove(row)

    def _destage(self, now: float, force: bool = False) -> None:
        """Write back rows in sweep order while above the low watermark (``force``:
        while writes wait for room), at most ``destage_rows`` at once. Each destage
        write takes the next row with dirty lines and the consecutive rows after it
        that have dirty lines too, up to ``max_member_io`` sectors on a member."""
        while self._destaging < self.destage_rows and self._row_order and (
                force or len(self._dirty) > self.low):
            row = self._next_row()
            if row is None:
                return
            rows = [row]
            room = min(self._batch_rows, self.destage_rows - self._destaging)
            nxt = row + 1
            while len(rows) < room and nxt in self._dirty_rows and self._unwritten(nxt):
                rows.append(nxt)
                nxt += 1
            self._sweep = nxt
            self._destage_rows(rows, now)

    def _unwritten(self, row: int) -> bool:
        """True if ``row`` has a dirty line not being written back."""
        writing = self._writing
        return any(line not in writing for line in self._dirty_rows[row])

    def _next_row(self):
        """The next row with dirty lines not already being written, from the sweep's
        position on, wrapping round."""
        order = self._row_order
        i = bisect_left(order, self._sweep)
        for k in range(len(order)):
            row = order[(i + k) % len(order)]
            if self._unwritten(row):
                self._sweep = row + 1
                return row
        return None

    def _destage_rows(self, rows: list, now: float) -> None:
        """Write back the dirty lines of ``rows`` (consecutive) as one destage: each
        member's pieces that follow one another go as one I/O (`_run`)."""
        lay = self.array
        per_row = self._row_lines
        versions = {}
        reads, writes = [], []
        for row in rows:
            lines = sorted(ln for ln in self._dirty_rows[row] if ln not in self._writing)
            for line in lines:
                versions[line] = self._dirty[line]
                self._writing[line] = True
            first_line = row * per_row
            whole = all(line in self._dirty or line in self._clean
                        for line in range(first_line, first_line + per_row))
            row_writes = []
            for run in _runs(lines):
                start = run[0] * LINE
                nr = min((run[-1] + 1) * LINE, self.capacity) - start
                plan = lay.plan_write(start, nr)
                if whole:               # the cache holds the row: parity without reads
                    plan = [io for io in plan if io.write]
                reads += [io for io in plan if not io.write]
                row_writes += [io for io in plan if io.write]
            for parity in lay.parity_members(row):     # RAID 5: P; RAID 6: P and Q
                row_writes = _merge_parity(row_writes, parity)
            writes += row_writes
        self._destaging += len(rows)
        if self.probe is not None:
            self.probe("destage_start", now, len(versions) * LINE)

        def done(t):
            self._destaging -= len(rows)
            if self._flush_left:
                self._flush_left = max(0, self._flush_left - len(versions))
            for line, version in versions.items():
                del self._writing[line]
                if self._dirty.get(line) == version:     # not written again meanwhile
                    del self._dirty[line]
                    self._dirty_rows[line // per_row].discard(line)
                    self._cache_clean(line)
            for row in rows:
                if row in self._dirty_rows and not self._dirty_rows[row]:
                    del self._dirty_rows[row]
                    self._row_order.remove(row)
            if self.probe is not None:
                self.probe("destage_end", t, len(versions) * LINE)
                self.probe("dirty", t, len(self._dirty))
            while self._blocked:
                rq = self._blocked[0]
                if not self._absorb(rq, t):
                    break
                self._blocked.popleft()
            self._destage(t, force=bool(self._blocked) or self._flushing
                          or self._flush_left > 0)
        self._run([reads, writes], done, now)

    def _idle_destage(self, token: int, now: float) -> None:
        """``destage_idle`` after the last host request: write back everything."""
        if token != self._idle_token or self._outstanding:
            return
        self._flushing = True
        self._destage(now, force=True)

    def _flush_tick(self, _arg, now: float) -> None:
        """The flush timer (``flush_interval``): write back as many lines as are dirty
        now, below the watermarks too; tick again while dirty data remains."""
        dirty = len(self._dirty)
        if self.probe is not None:
            self.probe("flush_tick", now, dirty)
        if not dirty:
            self._flush_armed = False
            return
        self._flush_left = dirty
        self._destage(now, force=True)
        self._timer(now + self.flush_interval, self._flush_tick, None)


def _coalesce(ios: list) -> list:
    """``ios`` with each member's contiguous I/Os of one direction joined."""
    if len(ios) < 2:
        return ios
    out = []
    for io in sorted(ios, key=lambda io: (io.member, io.write, io.sector)):
        last = out[-1] if out else None
        if last is not None and last.member == io.member and last.write == io.write \
                and last.sector + last.nr_sectors == io.sector:
            out[-1] = MemberIO(io.member, last.sector, last.nr_sectors + io.nr_sectors, io.write)
        else:
            out.append(io)
    return out


def _runs(lines: list) -> list:
    """Consecutive stretches of a sorted list of line numbers."""
    out = []
    for line in lines:
        if out and out[-1][-1] + 1 == line:
            out[-1].append(line)
        else:
            out.append([line])
    return out


def _merge_parity(writes: list, parity: int) -> list:
    """One write per row to the parity member ``parity``: the union of the parity ranges
    several runs of the row planned."""
    data = [io for io in writes if io.member != parity]
    par = [io for io in writes if io.member == parity and io.write]
    if len(par) <= 1:
        return writes
    lo = min(io.sector for io in par)
    hi = max(io.sector + io.nr_sectors for io in par)
    return data + [MemberIO(parity, lo, hi - lo, True)]
