"""Where each process's I/O time went: every second of every bio's Q2C, cut into causes.

A tracepoint subscriber (`blksim.block.tracepoints`) follows each bio from
``block_bio_queue`` to ``block_bio_complete`` and gives every instant of its Q2C to
exactly one cause (docs/explain.md):

==================  =============================================================================
``slot``            waiting for a request: from ``block_bio_queue`` to ``block_getrq`` (2.6:
                    ``get_request_wait``, traced ``block_sleeprq``; multi-queue: asleep for a
                    tag in ``blk_mq_get_tag``, or throttled by wbt, or frozen by a switch)
``plug``            held in a plug: the 2.6 queue's plug (``block_plug`` .. ``block_unplug_io``
                    or the run of a completion) while the bio's request is in the elevator;
                    on blk-mq, the task's plug (``block_getrq`` or the plug merge .. the
                    flush's ``block_rq_insert`` or direct ``block_rq_issue``)
``elevator``        in the scheduler: from ``block_rq_insert`` (or the merge into a request
                    already there) to ``block_rq_issue``, less ``plug`` and ``held``
``held``            the part of that during which the elevator held dispatch back for another
                    process (``block_elv_msg`` ``hold_start``/``hold_end`` with a pid that
                    is not the bio's), while the queue was not plugged
``requeue``         multi-queue: given back by the driver (``block_rq_requeue``) until issued
``device_queue``    issued, waiting in the device (``block_rq_issue`` until the device starts
                    serving it: `Device.service_probe`)
``service``         the device serving it, until ``block_rq_complete``
``device``          D2C of a device that reports no service start (no probe)
==================  =============================================================================

A merged bio takes its request's times from the moment it joins it. A device-mapper
volume's bio is explained by its clones on the devices below: their causes are summed
and scaled to the volume bio's Q2C (the clones of a split bio run side by side), so
the volume's parts sum to its Q2C as well. A partition's bio is its disk's.

Memory: one small record per bio in flight (its request's service start included); a
completed bio leaves only its process's sums.
"""

from __future__ import annotations

#: The causes, in the order of a bio's life.
CAUSES = ("slot", "plug", "elevator", "held", "requeue", "device_queue", "service", "device")
_SLOT, _PLUG, _ELV, _HELD, _REQUEUE, _DEVQ, _SERVICE, _DEVICE = range(8)
_N = len(CAUSES)

# A bio's phase: queued (Q; on the 2.6 queue also: merged or inserted at once, in the
# elevator), asleep for a request on the 2.6 queue (S), has a request not yet in the
# elevator (P), merged into a request (M), in the elevator (E), requeued (R), at the
# device (D).
_Q, _S, _P, _M, _E, _R, _D = range(7)

#: The two messages every holding elevator sends (docs/tracepoints.md).
HOLD_START, HOLD_END = "hold_start", "hold_end"


#: A row of sums: the causes' seconds, then bios and Q2C seconds.
_BIOS, _Q2C = _N, _N + 1


def _row() -> list:
    # all floats, the count too: PyPy keeps a list of floats unboxed
    return [0.0] * (_N + 2)


#: The places in `_Live.x` of the seconds of its rarer causes and, for a bio that entered
#: the elevator while the queue's clocks ran, their readings then.
_XPLUG, _XHELD, _XREQUEUE, _XPLUG0, _XHOLD0, _XOWN0 = range(6)


class _Live:
    """One bio in flight: its phase, when it entered it, its seconds per cause so far
    and (``x``, made when first needed: most bios never need it) its plug, held and
    requeue seconds and the queue's plug and hold clocks when it entered the elevator;
    ``start``: when the device began serving its request. Few fields: the record is
    made for every bio."""

    __slots__ = ("phase", "mark", "slot", "elv", "devq", "service", "d2c", "x", "bio",
                 "start")

    def __init__(self, now: float, bio) -> None:
        self.phase = _Q
        self.mark = now
        self.bio = bio                  # for the bios still in flight at the end
        self.slot = self.elv = self.devq = self.service = self.d2c = 0.0
        self.x = None
        self.start = -1.0               # its request's service start (s; -1: none told)

    def extra(self) -> list:
        """``x``, made now if it is not yet."""
        x = self.x
        if x is None:
            x = self.x = [0.0] * 6
        return x

    def seconds(self) -> list:
        """Its seconds per cause, in `CAUSES`' order."""
        x = self.x or (0.0,) * 6
        return [self.slot, x[_XPLUG], self.elv, x[_XHELD], x[_XREQUEUE], self.devq,
                self.service, self.d2c]


class Attribution:
    """Per-process sums of attributed bios: pid -> [*cause seconds, bios, Q2C seconds]."""

    def __init__(self) -> None:
        self.by_pid: dict = {}

    def row(self, pid: int) -> list:
        """The sums of process ``pid`` (made on first use)."""
        row = self.by_pid.get(pid)
        if row is None:
            row = self.by_pid[pid] = _row()
        return row

    def add(self, pid: int, q2c: float, secs) -> None:
        """Fold one completed bio's Q2C and cause seconds into its process's sums."""
        row = self.row(pid)
        row[_BIOS] += 1.0
        row[_Q2C] += q2c
        for i in range(_N):
            row[i] += secs[i]


class DeviceExplain:
    """The attribution of one disk's queue (legacy or multi-queue): subscribe it with
    `install`. ``start``: bios queued before it (ramp_time) are followed but not summed;
    ``parents``: the shared dict in which a device-mapper clone leaves its causes for
    its volume's bio; ``per_bio``: None, or ``fn(bio, q2c, seconds)`` called with every
    completed bio's own seconds per cause (tests)."""

    def __init__(self, start: float = 0.0, parents: dict | None = None,
                 per_bio=None) -> None:
        self.start = start
        self.parents = parents if parents is not None else {}
        self.per_bio = per_bio
        self.sums = Attribution()
        self.live: dict = {}            # bio id -> _Live (an int key: cheaper than the bio)
        self._pid = None                # the process of the latest bio summed, and its
        self._pid_row = None            # row of sums (most runs' bios come from one or few)
        self._sleepers = 0              # 2.6: bios asleep for a request
        self._plugs_seen = False        # blk-mq: a task's plug has held a request
        self._last = None               # blk-mq: the bio of the latest block_getrq
        self._issues = True             # block_rq_issue is followed (blk-mq: once needed)
        self.legacy = True
        self.probed = False             # the device reports service starts
        # the queue's clocks: seconds plugged, seconds held (not plugged), per pid held for
        self._plug_acc = 0.0
        self._plug_since = None         # the 2.6 queue's plug in place since (s)
        self._hold_acc = 0.0
        self._hold_by_pid: dict = {}
        self._hold_pid = None           # the process the elevator holds for
        self._hold_since = None         # its unplugged stretch began (s)
        self._hold_what = None
        self._hold_t0 = 0.0
        self._clocks = False            # a plug or a hold has happened: snapshots needed
        self.holds: dict = {}           # mechanism -> [count, seconds, {end: count}]

    # ------------------------------------------------------------------ wiring
    def install(self, q) -> None:
        """Subscribe to ``q``'s tracepoints and ask its device for service starts.

        The 2.6 queue merges a bio, or allocates and inserts its request, at the
        instant it is queued, unless it sleeps for a request (``block_sleeprq``): there
        a bio is in the elevator from ``block_bio_queue`` on, and ``block_getrq`` is
        subscribed only while a bio sleeps. On blk-mq a request may wait in its task's
        plug between ``block_getrq`` (or the plug merge) and ``block_rq_insert``."""
        self.legacy = not getattr(q, "multiqueue", False)
        self.clock = getattr(q, "clock", None)
        sub = q.subscribe
        sub("block_rq_issue", self.issue)
        if not self.legacy:
            # followed from the first task plug, hold or requeue on (`_follow_issues`);
            # until then a bio's issue is its ``t_dispatch``, read at its completion
            q.unsubscribe("block_rq_issue", self.issue)
            self._issues = False
        sub("block_bio_complete", self.bio_complete)
        sub("block_elv_msg", self.elv_msg)
        if self.legacy:
            # getrq is followed while a bio sleeps for a request, bio_queue once the
            # queue's clocks run; each is subscribed once now so that the queue's
            # attributes keep their layout during the run (PyPy compiles for it)
            for tp, fn in (("block_getrq", self.getrq), ("block_bio_queue", self.bio_queue)):
                sub(tp, fn)
                q.unsubscribe(tp, fn)
            sub("block_sleeprq", self.sleeprq)
            sub("block_plug", self.plug)
            sub("block_unplug_io", self.unplug)
        else:
            sub("block_getrq", self.getrq)
            sub("block_bio_backmerge", self.merged)
            sub("block_bio_frontmerge", self.merged)
            sub("block_rq_requeue", self.requeue)
            sub("block_plug", self.task_plug)
            # followed from the first task plug on (before it, a request is inserted or
            # issued the instant it is allocated); subscribed once now, as getrq above
            sub("block_rq_insert", self.insert)
            q.unsubscribe("block_rq_insert", self.insert)
        device = q.device
        if hasattr(device, "service_probe"):
            device.service_probe = self.service_started
            self.probed = True

    # ------------------------------------------------------------------ the queue's clocks
    def _plugged(self, now: float) -> float:
        since = self._plug_since
        return self._plug_acc if since is None else self._plug_acc + (now - since)

    def _held(self, now: float) -> float:
        since = self._hold_since
        return self._hold_acc if since is None else self._hold_acc + (now - since)

    def _held_for(self, pid: int, now: float) -> float:
        base = self._hold_by_pid.get(pid, 0.0)
        if self._hold_pid == pid and self._hold_since is not None:
            base += now - self._hold_since
        return base

    def _pause_hold(self, now: float) -> None:
        """Close the hold's unplugged stretch (a plug, or the hold's end)."""
        since = self._hold_since
        if since is not None:
            dt = now - since
            self._hold_acc += dt
            pid = self._hold_pid
            self._hold_by_pid[pid] = self._hold_by_pid.get(pid, 0.0) + dt
            self._hold_since = None

    def plug(self, q, now: float) -> None:
        """``block_plug`` (2.6): the queue's plug is in place."""
        if self._plug_since is None:
            if not self._clocks:
                self._start_clocks(q)
            self._pause_hold(now)
            self._plug_since = now

    def unplug(self, q, nr_rq=0, now: float = 0.0) -> None:
        """``block_unplug_io`` (2.6), or the plug removed without one (a completion's
        queue run, an elevator switch: seen at the next issue or completion)."""
        since = self._plug_since
        if since is not None:
            self._plug_acc += now - since
            self._plug_since = None
            if self._hold_pid is not None:
                self._hold_since = now

    def _follow_issues(self, q) -> None:
        """blk-mq: from now on follow ``block_rq_issue``. Until now every bio went from
        its request or merge straight into the elevator (no task plug, no hold, no
        requeue), so its issue closed nothing but its elevator time: a bio issued
        already (``t_dispatch`` set by the issue that carried it) is closed now as
        `issue` would have closed it then."""
        self._issues = True
        q.subscribe("block_rq_issue", self.issue)
        for st in self.live.values():
            t = st.bio.t_dispatch
            if st.phase == _E and t >= 0.0:
                st.elv += t - st.mark
                st.mark = t
                st.phase = _D

    def _start_clocks(self, q) -> None:
        """The first plug or hold: from now on bios entering the elevator take the
        clocks' readings (until now they all read 0, as the snapshot of every bio
        queued before does); on the 2.6 queue, from ``block_bio_queue`` on."""
        if not self._issues:
            self._follow_issues(q)
        self._clocks = True
        if self.legacy:
            q.subscribe("block_bio_queue", self.bio_queue)

    def elv_msg(self, q, event: str, pid: int, detail, now: float) -> None:
        """``block_elv_msg``: ``hold_start``/``hold_end`` move the hold clock."""
        if event == HOLD_START:
            if not self._clocks:
                self._start_clocks(q)
            if self._hold_pid is not None:
                self._end_hold("replaced", now)
            self._hold_pid = pid
            self._hold_what = str(detail) if detail is not None else "hold"
            self._hold_t0 = now
            if self._plug_since is None:
                self._hold_since = now
        elif event == HOLD_END and self._hold_pid is not None:
            self._end_hold(str(detail) if detail is not None else "end", now)

    def _end_hold(self, why: str, now: float) -> None:
        self._pause_hold(now)
        entry = self.holds.get(self._hold_what)
        if entry is None:
            entry = self.holds[self._hold_what] = [0, 0.0, {}]
        entry[0] += 1
        entry[1] += now - self._hold_t0
        entry[2][why] = entry[2].get(why, 0) + 1
        self._hold_pid = None

    # ------------------------------------------------------------------ a bio's life
    def _seen(self, bio) -> _Live:
        """The record of ``bio``, made at the first of its tracepoints this follows (its
        Q2C started at ``bio.t_queue``)."""
        st = self.live.get(bio.id)
        if st is None:
            st = self.live[bio.id] = _Live(bio.t_queue, bio)
        return st

    def bio_queue(self, q, bio, now: float) -> None:
        """``block_bio_queue`` (2.6, once the queue's clocks run): the bio's Q2C starts;
        it merges (if it does) at once, and so takes the elevator's clocks now. (Before
        the clocks run, and on blk-mq, where its elevator time starts at insert or merge,
        a bio is followed from its first other tracepoint.)"""
        st = self.live[bio.id] = _Live(now, bio)
        self._enter_elevator(st, bio.pid, now)

    def sleeprq(self, q, bio, rw, now: float) -> None:
        """``block_sleeprq`` (2.6): the bio's submitter sleeps for a request; follow
        ``block_getrq`` until every sleeper has one."""
        st = self._seen(bio)
        st.phase = _S
        if not self._sleepers:
            q.subscribe("block_getrq", self.getrq)
        self._sleepers += 1

    def getrq(self, q, bio, rw, now: float) -> None:
        """``block_getrq``: the wait for a request (blk-mq: a tag) ends; on the 2.6
        queue the request goes into the elevator at once."""
        if not self.legacy:
            # (on blk-mq a bio's getrq is nearly always the first tracepoint followed:
            # its record is made here with its slot time, `_seen` written out)
            live = self.live
            st = live.get(bio.id)
            if st is None:
                st = live[bio.id] = _Live(now, bio)
                st.slot = now - bio.t_queue
            else:
                st.slot += now - st.mark
                st.mark = now
            if self._plugs_seen:
                st.phase = _P               # into a plug, or inserted: told at insert
            else:
                st.phase = _E               # inserted (or issued) at once
                if self._clocks:
                    self._enter_elevator(st, bio.pid, now)
            self._last = st
            return
        st = self._seen(bio)
        if st.phase == _S:
            st.slot += now - st.mark
            st.phase = _Q
            st.mark = now
            if self._clocks:
                self._enter_elevator(st, bio.pid, now)
            self._sleepers -= 1
            if not self._sleepers:
                q.unsubscribe("block_getrq", self.getrq)

    def merged(self, q, bio, now: float) -> None:
        """``block_bio_backmerge``/``frontmerge``: the bio joins a request (in the
        elevator, or on blk-mq possibly in its task's plug: told at insert or issue)."""
        st = self._seen(bio)
        st.slot += now - st.mark
        # (before any task plug held a request, every request is in the elevator)
        st.phase = _M if self._plugs_seen or self.legacy else _E
        st.mark = now
        if self._clocks:
            self._enter_elevator(st, bio.pid, now)

    def task_plug(self, q, now: float) -> None:
        """``block_plug`` (blk-mq): a task's plug holds a request, the one whose
        ``block_getrq`` came just before; from now on insertions are followed."""
        if not self._plugs_seen:
            if not self._issues:
                self._follow_issues(q)
            self._plugs_seen = True
            q.subscribe("block_rq_insert", self.insert)
            last = self._last
            if last is not None and last.mark == now and last.phase == _E:
                last.phase = _P

    def _enter_elevator(self, st: _Live, pid: int, now: float) -> None:
        st.mark = now
        since = self._plug_since
        x = st.extra()
        x[_XPLUG0] = self._plug_acc if since is None else self._plug_acc + (now - since)
        since = self._hold_since
        x[_XHOLD0] = self._hold_acc if since is None else self._hold_acc + (now - since)
        x[_XOWN0] = self._held_for(pid, now)

    def insert(self, q, rq, now: float) -> None:
        """``block_rq_insert`` (blk-mq): the request is in the elevator (or a software
        queue); the time its bios spent since their request or merge was a plug's."""
        live = self.live
        clocks = self._clocks
        for bio in rq.bios:
            st = live.get(bio.id)
            if st is None:
                st = live[bio.id] = _Live(bio.t_queue, bio)
            phase = st.phase
            if phase == _P or phase == _M:
                if now > st.mark:
                    st.extra()[_XPLUG] += now - st.mark
            else:
                continue
            st.phase = _E
            st.mark = now
            if clocks:
                self._enter_elevator(st, bio.pid, now)

    def _leave_queue(self, q, rq, now: float, phase_after: int) -> None:
        """A request leaves the block layer's hands (issued, or given back): close each
        bio's elevator, plug or requeue time up to ``now``."""
        if self._plug_since is not None and not q.plugged:
            # the 2.6 queue removed its plug without a tracepoint (an elevator switch's
            # queue run): it is gone by now
            self.unplug(q, 0, now)
        live = self.live
        clocks = self._clocks
        bios = rq.bios
        was_inserted = False
        if len(bios) > 1:
            # a bio merged into it (_M) joined a request that was inserted (one of its
            # bios is in the elevator) or one going straight from its task's plug
            for bio in bios:
                st = live.get(bio.id)
                if st is not None and st.phase == _E:
                    was_inserted = True
                    break
        for bio in bios:
            st = live.get(bio.id)
            if st is None:
                st = live[bio.id] = _Live(bio.t_queue, bio)
            phase = st.phase
            if phase == _E or phase == _Q or (phase == _M and was_inserted):
                # (_Q: the 2.6 queue's: in its elevator since it was queued or had one)
                dt = now - st.mark
                if clocks:
                    # (a bio without x entered before the clocks ran: they read 0)
                    x = st.extra()
                    since = self._plug_since
                    plug = (self._plug_acc if since is None
                            else self._plug_acc + (now - since)) - x[_XPLUG0]
                    since = self._hold_since
                    held = ((self._hold_acc if since is None
                             else self._hold_acc + (now - since)) - x[_XHOLD0]
                            - (self._held_for(bio.pid, now) - x[_XOWN0]))
                    x[_XPLUG] += plug
                    x[_XHELD] += held
                    st.elv += dt - plug - held
                else:
                    st.elv += dt
            elif phase == _P or phase == _M:
                if now > st.mark:               # straight from the task's plug
                    st.extra()[_XPLUG] += now - st.mark
            elif phase == _R:
                st.extra()[_XREQUEUE] += now - st.mark
            st.mark = now
            st.phase = phase_after

    def requeue(self, q, rq, now: float) -> None:
        """``block_rq_requeue`` (blk-mq): the driver gave the request back."""
        if not self._issues:
            self._follow_issues(q)
        self._leave_queue(q, rq, now, _R)

    def issue(self, q, rq, now: float) -> None:
        """``block_rq_issue``: the request goes to the device."""
        self._leave_queue(q, rq, now, _D)

    def service_started(self, rq, when: float) -> None:
        """The device's probe (`Device.service_probe`): it starts serving ``rq`` at
        ``when`` (at or after the issue)."""
        if rq.nr_sectors:        # (a flush request's bios take no service start from it)
            # kept in each bio's record (its request's only one, nearly always: no loop)
            live = self.live
            bios = rq.bios
            st = live.get(bios[0].id)
            if st is not None:
                st.start = when
            if len(bios) > 1:
                for bio in bios[1:]:
                    st = live.get(bio.id)
                    if st is not None:
                        st.start = when

    def bio_complete(self, q, bio, now: float) -> None:
        """``block_bio_complete``: the bio's Q2C ends: counted in its process's sums
        (measured bios only) and, for a dm clone, in its volume bio's."""
        st = self.live.pop(bio.id, None)
        if st is None:
            return
        start = st.start                    # its request's service start
        if self._plug_since is not None and not q.plugged:
            self.unplug(q, 0, now)          # 2.6: a completion runs the queue, unplugged
        if not self._issues and st.phase == _E and bio.t_dispatch >= 0.0:
            # blk-mq before any plug, hold or requeue: its issue, as `issue` closes it
            st.elv += bio.t_dispatch - st.mark
            st.mark = bio.t_dispatch
            st.phase = _D
        q2c = now - bio.t_queue
        mark = st.mark
        if st.phase != _D or start < 0.0:
            st.d2c += now - mark         # D2C of a device that tells no service start
        else:
            start = start if start > mark else mark
            start = start if start < now else now
            st.devq += start - mark
            st.service += now - start
        if self.per_bio is not None:
            self.per_bio(bio, q2c, st.seconds())
        origin = bio.origin
        if origin is not None:
            _to_parent(self.parents, origin.bio, q2c, st.seconds())
        if bio.t_queue >= self.start:
            pid = bio.pid
            if pid == self._pid:
                row = self._pid_row
            else:
                row = self.sums.row(pid)
                self._pid = pid
                self._pid_row = row
            row[_BIOS] += 1.0
            row[_Q2C] += q2c
            row[_SLOT] += st.slot
            row[_ELV] += st.elv
            row[_DEVQ] += st.devq
            row[_SERVICE] += st.service
            row[_DEVICE] += st.d2c
            x = st.x
            if x is not None:
                row[_PLUG] += x[_XPLUG]
                row[_HELD] += x[_XHELD]
                row[_REQUEUE] += x[_XREQUEUE]

    # ------------------------------------------------------------------ report
    def unfinished(self) -> dict:
        """The bios still in flight now (the end of the run), per process: pid ->
        (bios, their summed age in seconds, the oldest's age), an age counted from the
        bio's queueing or the window's start, whichever is later. On blk-mq a bio asleep
        for a tag since its queueing is not followed yet, and not counted."""
        end = self.clock.now if self.clock is not None else None
        out: dict = {}
        if end is None:
            return out
        for st in self.live.values():
            bio = st.bio
            age = end - max(bio.t_queue, self.start)
            if age <= 0.0:
                continue
            n, total, oldest = out.get(bio.pid, (0, 0.0, 0.0))
            out[bio.pid] = (n + 1, total + age, max(oldest, age))
        return out

    def holds_summary(self) -> dict:
        """Per hold mechanism: holds ended, their seconds and how they ended."""
        return {what: {"count": n, "seconds": round(s, 9), "ends": dict(sorted(ends.items()))}
                for what, (n, s, ends) in sorted(self.holds.items())}


def _to_parent(parents: dict, parent, q2c: float, secs) -> None:
    row = parents.get(parent)
    if row is None:
        row = parents[parent] = [0.0] * (_N + 1)
    row[0] += q2c
    for i in range(_N):
        row[1 + i] += secs[i]


class VolumeExplain:
    """The attribution of a device-mapper volume: its bios' causes are their clones',
    summed and scaled to the volume bio's Q2C (`DeviceExplain` of the devices below
    leaves them in ``parents``)."""

    def __init__(self, start: float, parents: dict) -> None:
        self.start = start
        self.parents = parents
        self.sums = Attribution()
        self.legacy = False
        self.probed = True
        self.holds: dict = {}

    def install(self, dev) -> None:
        """Subscribe to the volume's ``block_bio_complete``."""
        dev.subscribe("block_bio_complete", self.bio_complete)

    def bio_complete(self, q, bio, now: float) -> None:
        """A volume bio ended: its clones' causes, scaled to its Q2C."""
        row = self.parents.pop(bio, None)
        q2c = now - bio.t_queue
        if row is None or row[0] <= 0.0:
            secs = [0.0] * _N
            secs[_DEVICE] = q2c            # no clone time to split: the devices'
        else:
            k = q2c / row[0]
            secs = [x * k for x in row[1:]]
        if bio.origin is not None:
            _to_parent(self.parents, bio.origin.bio, q2c, secs)
        if bio.t_queue >= self.start:
            self.sums.add(bio.pid, q2c, secs)

    def holds_summary(self) -> dict:
        """A volume holds nothing itself."""
        return {}


def _cause_block(secs, q2c: float) -> dict:
    return {"seconds": {c: round(secs[i], 9) for i, c in enumerate(CAUSES)},
            "share_pct": {c: (round(100.0 * secs[i] / q2c, 4) if q2c > 0 else None)
                          for i, c in enumerate(CAUSES)}}


def _entry(row) -> dict:
    bios, q2c = int(row[_BIOS]), row[_Q2C]
    out = {"bios": bios, "q2c_total_s": round(q2c, 9),
           "q2c_mean_ms": round(q2c / bios * 1e3, 6) if bios else None}
    out.update(_cause_block(row, q2c))
    return out


def device_summary(tracker, names=None) -> dict:
    """One device's ``explain`` section: ``processes`` (largest Q2C total first), ``all``
    and ``holds``; ``names(pid)`` gives a process's name."""
    procs = []
    total = _row()
    for pid, row in tracker.sums.by_pid.items():
        if not row[_BIOS]:
            continue                    # (its bios are still in flight)
        entry = {"pid": pid}
        if names is not None:
            entry["name"] = names(pid)
        entry.update(_entry(row))
        procs.append(entry)
        for i, x in enumerate(row):
            total[i] += x
    procs.sort(key=lambda e: (-e["q2c_total_s"], e["pid"]))
    unfinished = []
    for pid, (n, waited, oldest) in getattr(tracker, "unfinished", dict)().items():
        entry = {"pid": pid}
        if names is not None:
            entry["name"] = names(pid)
        entry.update({"bios": n, "waited_s": round(waited, 9),
                      "oldest_ms": round(oldest * 1e3, 6)})
        unfinished.append(entry)
    unfinished.sort(key=lambda e: (-e["oldest_ms"], e["pid"]))
    return {"processes": procs, "all": _entry(total), "unfinished": unfinished,
            "holds": tracker.holds_summary(),
            "service_split": bool(tracker.probed)}


class Explain:
    """The mechanism report of a run: a `DeviceExplain` on every disk, a `VolumeExplain`
    on every device-mapper volume, and any ``extra`` collectors.

    ``extra``: name -> factory; ``factory(dev)`` is called for every disk and volume and
    returns a collector already subscribed to ``dev`` (anything with ``summary()``), or
    None; each one's summary goes under its name in that device's section (as
    ``decisions``). ``names(pid)``: a process's name."""

    def __init__(self, host, start: float = 0.0, names=None, extra: dict | None = None) -> None:
        self.names = names
        self.parents: dict = {}
        self.trackers: dict = {}
        self.extra: dict = {}
        for name, dev in host.blocks.items():
            kind = getattr(dev, "kind", None)
            if kind == "disk":
                tracker = DeviceExplain(start, self.parents)
            elif kind == "dm":
                tracker = VolumeExplain(start, self.parents)
            else:
                continue                # a partition's bios are its disk's
            tracker.install(dev)
            self.trackers[name] = tracker
            for what, factory in (extra or {}).items():
                collector = factory(dev)
                if collector is not None:
                    self.extra.setdefault(name, {})[what] = collector

    def summary(self) -> dict:
        """results.json's ``explain``: per device, its section (`device_summary`) with
        the extra collectors' summaries under their names."""
        out = {}
        for name, tracker in self.trackers.items():
            section = device_summary(tracker, self.names)
            for what, collector in self.extra.get(name, {}).items():
                section[what] = collector.summary()
            out[name] = section
        return out


def standard_extra(start: float) -> dict:
    """The collectors every explained run has besides the causes, from the measured
    window's ``start``: on each disk, ``decisions`` (`blksim.sim.explain_decisions.
    DecisionLog`: what its elevator decided) and ``device`` (`blksim.sim.explain_device.
    DeviceLog`: tags in use, a RAID controller's cache)."""
    from blksim.sim.explain_decisions import DecisionLog
    from blksim.sim.explain_device import DeviceLog

    def on_disk(cls):
        def factory(dev):
            return cls(dev, start=start) if getattr(dev, "kind", None) == "disk" else None
        return factory
    return {"decisions": on_disk(DecisionLog), "device": on_disk(DeviceLog)}
