"""blk-throttle: cgroup v2's ``io.max`` on one device (block/blk-throttle.c, Linux 5.4-6.6).

A group's ``io.max`` limits its reads and writes on a device in bytes per second (rbps,
wbps) and I/Os per second (riops, wiops). The throttle sits above the request queue:
``blk_throtl_bio`` (called from ``generic_make_request_checks`` in 5.4,
``submit_bio_checks`` in 5.15, ``submit_bio_noacct`` in 6.6) either lets a bio
through or holds it in its group; a held bio goes on to the queue later, from the
throttle's timer.

The algorithm, per group and direction (``struct throtl_grp``):

- **Slices.** A group counts what it dispatched (``bytes_disp``, ``io_disp``) since
  ``slice_start``; the slice ends at ``slice_end``. ``throtl_slice`` is
  ``DFL_THROTL_SLICE_HD`` (HZ/10, 100 ms) unless the kernel was built with
  ``CONFIG_BLK_DEV_THROTTLING_LOW`` and the disk is non-rotational: then
  ``DFL_THROTL_SLICE_SSD`` (HZ/50, 20 ms) (``blk_throtl_register_queue`` 5.4,
  ``blk_throtl_register`` 6.6: "if no low limit, use previous default").
- **May it go?** (``tg_may_dispatch``) With no limit in that direction, yes. Else an
  expired slice with nothing queued starts afresh (``throtl_start_new_slice``), or the
  slice is extended to at least now + one slice (``throtl_extend_slice``: its end is
  rounded up to a multiple of the slice). Then, with ``elapsed`` = now - slice_start:

  * IOPS (``tg_with_in_iops_limit``): ``rnd`` = elapsed + 1 rounded up to a whole slice;
    allowed = iops * rnd / HZ (integer division); the bio goes when io_disp + 1 <=
    allowed, else it waits rnd - elapsed jiffies.
  * bytes (``tg_with_in_bps_limit``): ``rnd`` = elapsed (one slice if 0) rounded up to a
    whole slice; allowed = bps * rnd / HZ; the bio goes when bytes_disp + size <=
    allowed, else it waits (bytes over) * HZ / bps jiffies (at least 1) plus rnd -
    elapsed.

  A bio that must wait extends the slice to now + its wait.
- **Charging and trimming.** A bio that goes is charged (``throtl_charge_bio``) and the
  slice trimmed (``throtl_trim_slice``): whole slices elapsed are cut off the front
  (slice_start moves on) and the bytes/IOs they allowed are taken off the counts (not
  below 0); the end becomes now + one slice, rounded up.
- **Hierarchy.** A bio passes its group's limits, then its parent's, up to the root
  group, charged at each (``blk_throtl_bio``'s climb). Held, it waits in the first group
  it did not pass; a group's queue is FIFO per direction (a bio never overtakes one
  queued before it), served round-robin between the group's own bios and each child's
  (``throtl_qnode``). The parent's pending timer moves a child's dispatchable bios up
  into the parent (``throtl_pending_timer_fn`` -> ``throtl_select_dispatch`` ->
  ``throtl_dispatch_tg``: at most 8 bios per group per round, ``THROTL_GRP_QUANTUM``,
  6 reads then 2 writes; 32 per round, ``THROTL_QUANTUM``), where they must pass the
  parent's limits in turn (a parent with an expired slice restarts it from the child's
  slice start: ``start_parent_slice_with_credit``). Bios that leave the root group go
  to the device's queue (``blk_throtl_dispatch_work_fn``). A pending timer is set at
  most 8 slices ahead (``throtl_schedule_pending_timer``).

Version differences modelled (`LINES`):

=====================  =====  =====  =====  =====  ==================================
switch                 5.4    5.15   6.1    6.6    where
=====================  =====  =====  =====  =====  ==================================
wait_max_of_both       no     no     no     yes    tg_may_dispatch: 5.4-6.1 check bytes
                                                   first and return the bytes wait
                                                   alone when that fails; 6.6 computes
                                                   both waits and takes the longer
positive_allowance     no     no     no     yes    tg_within_bps_limit: 6.6 holds a
                                                   bio while the slice allows 0 bytes
                                                   (``bytes_allowed > 0 &&``)
=====================  =====  =====  =====  =====  ==================================

(5.10 is taken as 5.4; 6.1 as read in 6.1.20.) Not modelled, named in docs/cgroups.md:
split bios (the multi-queue layer of blksim does not split), ``io.max`` changed during a
run (6.x's carryover), the ``.low`` limits, the timer wheel's coarser slots, blktrace's
throtl messages.
"""

from __future__ import annotations

from collections import deque

from blksim.block.elevator import kernel_version
from blksim.block.request import REQ_OP_DISCARD

_SWITCHES = ("wait_max_of_both", "positive_allowance")
LINES = {
    "5.4": (False, False),
    "5.15": (False, False),
    "6.1": (False, False),
    "6.6": (True, True),
}

#: Bios a group moves per dispatch round (``THROTL_GRP_QUANTUM``, ``throtl_grp_quantum``
#: in 5.4), 3/4 of them reads; bios per service queue round (``THROTL_QUANTUM``).
GRP_QUANTUM = 8
QUANTUM = 32
_MAX_READS = GRP_QUANTUM * 3 // 4
_MAX_WRITES = GRP_QUANTUM - _MAX_READS

#: The io.max keys, per direction (0 read, 1 write).
BPS_KEYS = ("rbps", "wbps")
IOPS_KEYS = ("riops", "wiops")


def throtl_slice(hz: int, rotational: bool, throttling_low: bool = False) -> int:
    """``td->throtl_slice`` in jiffies: HZ/10 (``DFL_THROTL_SLICE_HD``), or HZ/50
    (``DFL_THROTL_SLICE_SSD``) for a non-rotational disk of a kernel built with
    ``CONFIG_BLK_DEV_THROTTLING_LOW`` (``blk_throtl_register``, 5.4-6.6)."""
    if throttling_low and not rotational:
        return hz // 50
    return hz // 10


def switches(kernel: str) -> dict:
    """The `LINES` switches of the newest listed line not newer than ``kernel``."""
    wanted = kernel_version(kernel)
    fits = [k for k in LINES if kernel_version(k) <= wanted]
    if not fits:
        raise ValueError(f"blk-throttle is modelled from Linux 5.4 on, got {kernel!r}; "
                         f"valid: {', '.join(LINES)}")
    return dict(zip(_SWITCHES, LINES[max(fits, key=kernel_version)]))


def io_max_problem(limits: dict, kernel: str = "6.6") -> str | None:
    """What is wrong with one device's ``io.max`` (``{"rbps": int or None, ...}``), or
    None: the keys are rbps, wbps, riops, wiops; a value is None (``max``) or a whole
    number of at least 1 (5.4: ``tg_set_limit`` refuses 0 with -ERANGE) or 2 (6.6 also
    refuses 1 with -EINVAL: ``val > 1``)."""
    least = 2 if kernel_version(kernel) >= (6, 6) else 1
    for key, value in limits.items():
        if key not in BPS_KEYS + IOPS_KEYS:
            return (f"unknown io.max key {key!r}; valid: "
                    f"{', '.join(BPS_KEYS + IOPS_KEYS)}")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < least):
            return (f"io.max {key} must be max or a whole number of at least {least} "
                    f"(Linux {kernel}), found {value!r}")
    return None


def _roundup(x: int, step: int) -> int:
    return -(-x // step) * step


def bio_size(bio) -> int:
    """The bytes a bio is charged (``throtl_bio_data_size``: a discard counts as one
    sector, 4.13-6.6)."""
    return 512 if bio.op == REQ_OP_DISCARD else bio.nr_sectors * 512


class _Qnode:
    """``struct throtl_qnode``: the bios one source (a group itself, or one child)
    queued in a group, in arrival order."""

    __slots__ = ("bios", "on_list")

    def __init__(self) -> None:
        self.bios = deque()
        self.on_list = False


class _ServiceQueue:
    """``struct throtl_service_queue``: a group's queued bios per direction (a list of
    qnodes, served round-robin), its children waiting to dispatch (the pending tree,
    ordered by dispatch time) and its pending timer."""

    __slots__ = ("tg", "parent_sq", "queued", "nr_queued", "pending", "seq",
                 "timer_expires", "timer_gen")

    def __init__(self, tg, parent_sq) -> None:
        self.tg = tg                    # None for the device's own (``td->service_queue``)
        self.parent_sq = parent_sq
        self.queued = (deque(), deque())
        self.nr_queued = [0, 0]
        self.pending = {}               # child group -> (disptime, order of insertion)
        self.seq = 0
        self.timer_expires = -1         # jiffy the pending timer is armed for, or -1
        self.timer_gen = 0

    def first(self):
        """``throtl_rb_first``: the child with the earliest dispatch time (equal times
        in insertion order, as the rb-tree inserts an equal key to the right)."""
        return min(self.pending, key=self.pending.__getitem__)


class _Group:
    """``struct throtl_grp``: one group's limits and slice state on one device, and its
    figures."""

    __slots__ = ("cgroup", "parent", "sq", "bps", "iops", "has_rules", "slice_start",
                 "slice_end", "bytes_disp", "io_disp", "qnode_on_self", "qnode_on_parent",
                 "disptime", "was_empty", "throttled_bios", "throttled_bytes", "held_s")

    def __init__(self, cgroup, parent, parent_sq, limits: dict) -> None:
        self.cgroup = cgroup
        self.parent = parent
        self.sq = _ServiceQueue(self, parent_sq)
        self.bps = [limits.get(k) for k in BPS_KEYS]
        self.iops = [limits.get(k) for k in IOPS_KEYS]
        # tg_update_has_rules: a limit here or on any ancestor
        self.has_rules = [
            (parent is not None and parent.has_rules[rw])
            or self.bps[rw] is not None or self.iops[rw] is not None for rw in (0, 1)]
        # before any slice: long ago, so the first bio starts one (the kernel's
        # zeroed throtl_grp against a jiffies counter far from 0)
        self.slice_start = [-1, -1]
        self.slice_end = [-1, -1]
        self.bytes_disp = [0, 0]
        self.io_disp = [0, 0]
        self.qnode_on_self = (_Qnode(), _Qnode())
        self.qnode_on_parent = (_Qnode(), _Qnode())
        self.disptime = 0
        self.was_empty = False
        self.throttled_bios = 0
        self.throttled_bytes = 0
        self.held_s = 0.0


class Throttle:
    """blk-throttle's state for one device (``struct throtl_data``), driven by jiffies.

    ``issue(bios, now)`` is called with the bios the throttle releases (reads first, as
    ``blk_throtl_dispatch_work_fn`` takes them); ``clock`` gives ``call_at`` for the
    pending timers. `bio_may_go` is the entry (``blk_throtl_bio``)."""

    def __init__(self, device: str, clock, issue, rotational: bool, kernel: str,
                 hz: int = 250, throttling_low: bool = False) -> None:
        self.device = device
        self.clock = clock
        self.issue = issue
        self.hz = hz
        self.slice = throtl_slice(hz, rotational, throttling_low)
        sw = switches(kernel)
        self.kernel = kernel
        self.wait_max_of_both = sw["wait_max_of_both"]
        self.positive_allowance = sw["positive_allowance"]
        self.sq = _ServiceQueue(None, None)
        self.nr_queued = [0, 0]
        self.groups = {}                # cgroup (None: the root) -> _Group
        self._since = {}                # bio id -> (time it was held, its group)
        self.root = self._group(None)

    # ---------------------------------------------------------------- groups
    def _group(self, cgroup) -> _Group:
        """The group of ``cgroup`` on this device, made with its ancestors on first use
        (``throtl_pd_init``: on cgroup v2 a group's parent queue is its parent's)."""
        tg = self.groups.get(cgroup)
        if tg is None:
            if cgroup is None:
                tg = _Group(None, None, self.sq, {})     # the root has no io.max
            else:
                parent = self._group(cgroup.parent)
                limits = (cgroup.io_max or {}).get(self.device, {})
                problem = io_max_problem(limits, self.kernel)
                if problem is not None:
                    raise ValueError(f"cgroup {getattr(cgroup, 'name', cgroup)!r} on "
                                     f"{self.device}: {problem}")
                tg = _Group(cgroup, parent, parent.sq, limits)
            self.groups[cgroup] = tg
        return tg

    def jiffies(self, now: float) -> int:
        """The jiffy of ``now`` (jiffy 0 at the run's start: blksim's choice)."""
        return int(now * self.hz + 1e-9)

    # ---------------------------------------------------------------- slices
    def _slice_used(self, tg: _Group, rw: int, j: int) -> bool:
        """``throtl_slice_used``: now is outside [slice_start, slice_end]."""
        return not tg.slice_start[rw] <= j <= tg.slice_end[rw]

    def _start_new_slice(self, tg: _Group, rw: int, j: int) -> None:
        tg.bytes_disp[rw] = 0
        tg.io_disp[rw] = 0
        tg.slice_start[rw] = j
        tg.slice_end[rw] = j + self.slice

    def _extend_slice(self, tg: _Group, rw: int, end: int) -> None:
        """``throtl_set_slice_end``: the end rounded up to a multiple of the slice."""
        tg.slice_end[rw] = _roundup(end, self.slice)

    def _trim_slice(self, tg: _Group, rw: int, j: int) -> None:
        """``throtl_trim_slice``: drop the whole slices elapsed and what they allowed."""
        if self._slice_used(tg, rw, j):
            return
        self._extend_slice(tg, rw, j + self.slice)
        nr = (j - tg.slice_start[rw]) // self.slice
        if not nr:
            return
        elapsed = nr * self.slice
        bps, iops = tg.bps[rw], tg.iops[rw]
        # An unlimited direction's allowance is the kernel's U64_MAX / UINT_MAX: the
        # trim goes ahead and clears its count (which is never compared anyway).
        bytes_trim = bps * elapsed // self.hz if bps is not None else -1
        io_trim = iops * elapsed // self.hz if iops is not None else -1
        if not bytes_trim and not io_trim:
            return
        tg.bytes_disp[rw] = max(0, tg.bytes_disp[rw] - bytes_trim) if bytes_trim >= 0 else 0
        tg.io_disp[rw] = max(0, tg.io_disp[rw] - io_trim) if io_trim >= 0 else 0
        tg.slice_start[rw] += elapsed

    # ---------------------------------------------------------------- limits
    def _iops_wait(self, tg: _Group, rw: int, j: int, iops: int) -> int:
        """``tg_with_in_iops_limit``: 0, or the jiffies to the end of this slice."""
        elapsed = j - tg.slice_start[rw]
        rnd = _roundup(elapsed + 1, self.slice)
        if tg.io_disp[rw] + 1 <= iops * rnd // self.hz:
            return 0
        return rnd - elapsed

    def _bps_wait(self, tg: _Group, rw: int, j: int, bps: int, size: int) -> int:
        """``tg_with_in_bps_limit``: 0, or the jiffies until the bytes over are allowed."""
        elapsed = j - tg.slice_start[rw]
        rnd = _roundup(elapsed or self.slice, self.slice)
        allowed = bps * rnd // self.hz
        if tg.bytes_disp[rw] + size <= allowed and (allowed > 0 or not self.positive_allowance):
            return 0
        wait = (tg.bytes_disp[rw] + size - allowed) * self.hz // bps
        return (wait or 1) + rnd - elapsed

    def _may_dispatch(self, tg: _Group, rw: int, size: int, j: int) -> int:
        """``tg_may_dispatch``: 0 when the bio at the head of ``tg``'s ``rw`` queue (or
        arriving to an empty one) may go now, else the jiffies it must wait."""
        bps, iops = tg.bps[rw], tg.iops[rw]
        if bps is None and iops is None:
            return 0
        if self._slice_used(tg, rw, j) and not tg.sq.nr_queued[rw]:
            self._start_new_slice(tg, rw, j)
        elif tg.slice_end[rw] < j + self.slice:
            self._extend_slice(tg, rw, j + self.slice)
        bps_wait = self._bps_wait(tg, rw, j, bps, size) if bps is not None else 0
        if bps_wait and not self.wait_max_of_both:
            wait = bps_wait                 # 5.4-6.1: `bps && iops`, short-circuited
        else:
            iops_wait = self._iops_wait(tg, rw, j, iops) if iops is not None else 0
            wait = max(bps_wait, iops_wait)
        if wait and tg.slice_end[rw] < j + wait:
            self._extend_slice(tg, rw, j + wait)
        return wait

    @staticmethod
    def _charge(tg: _Group, rw: int, size: int) -> None:
        """``throtl_charge_bio``."""
        tg.bytes_disp[rw] += size
        tg.io_disp[rw] += 1

    # ---------------------------------------------------------------- queues
    @staticmethod
    def _qnode_add(bio, qn: _Qnode, queued: deque) -> None:
        """``throtl_qnode_add_bio``: a qnode joins the round at the tail."""
        qn.bios.append(bio)
        if not qn.on_list:
            qn.on_list = True
            queued.append(qn)

    @staticmethod
    def _peek(queued: deque):
        return queued[0].bios[0] if queued else None

    @staticmethod
    def _pop(queued: deque):
        """``throtl_pop_queued``: the first qnode's first bio; the qnode goes to the
        tail if it has more (round-robin between the sources)."""
        qn = queued.popleft()
        bio = qn.bios.popleft()
        if qn.bios:
            queued.append(qn)
        else:
            qn.on_list = False
        return bio

    def _enqueue_tg(self, tg: _Group) -> None:
        """``throtl_enqueue_tg``: on its parent's pending tree, at its current time."""
        psq = tg.sq.parent_sq
        if tg not in psq.pending:
            psq.seq += 1
            psq.pending[tg] = (tg.disptime, psq.seq)

    def _add_bio_tg(self, bio, qn, tg: _Group, rw: int) -> None:
        """``throtl_add_bio_tg``."""
        sq = tg.sq
        if not sq.nr_queued[rw]:
            tg.was_empty = True
        self._qnode_add(bio, qn or tg.qnode_on_self[rw], sq.queued[rw])
        sq.nr_queued[rw] += 1
        self._enqueue_tg(tg)

    def _update_disptime(self, tg: _Group, j: int) -> None:
        """``tg_update_disptime``: the earlier of its two heads' waits."""
        waits = [self._may_dispatch(tg, rw, bio_size(self._peek(tg.sq.queued[rw])), j)
                 for rw in (0, 1) if tg.sq.nr_queued[rw]]
        tg.disptime = j + min(waits)
        psq = tg.sq.parent_sq
        psq.seq += 1
        psq.pending[tg] = (tg.disptime, psq.seq)
        tg.was_empty = False

    # ---------------------------------------------------------------- timers
    def _schedule_next_dispatch(self, sq: _ServiceQueue, force: bool, j: int) -> bool:
        """``throtl_schedule_next_dispatch``: arm ``sq``'s timer for its first child;
        False when that child may go now (the caller dispatches on)."""
        if not sq.pending:
            return True
        first = sq.pending[sq.first()][0]
        if force or first > j:
            expires = min(first, j + 8 * self.slice)    # throtl_schedule_pending_timer
            self._mod_timer(sq, expires, j)
            return True
        return False

    def _mod_timer(self, sq: _ServiceQueue, expires: int, j: int) -> None:
        """``mod_timer``: re-arm ``sq``'s one timer; a time not after now fires at the
        next tick."""
        expires = max(expires, j + 1)
        if sq.timer_expires == expires:
            return
        sq.timer_expires = expires
        sq.timer_gen += 1
        gen = sq.timer_gen
        self.clock.call_at(expires / self.hz, lambda ev: self._timer(sq, gen, ev.when))

    def _timer(self, sq: _ServiceQueue, gen: int, now: float) -> None:
        if gen != sq.timer_gen:
            return                      # re-armed since (mod_timer replaced it)
        sq.timer_expires = -1
        self._pending_timer_fn(sq, now)

    def _pending_timer_fn(self, sq: _ServiceQueue, now: float) -> None:
        """``throtl_pending_timer_fn``: move the children's dispatchable bios into
        ``sq``, and on up while the parent may take them now; at the top, issue."""
        j = self.jiffies(now)
        while True:
            dispatched = False
            while True:
                if self._select_dispatch(sq, j):
                    dispatched = True
                if self._schedule_next_dispatch(sq, False, j):
                    break
            if not dispatched:
                return
            tg = sq.tg
            if tg is None:
                self._issue_ready(now)
                return
            if not tg.was_empty:
                return
            self._update_disptime(tg, j)
            if self._schedule_next_dispatch(tg.sq.parent_sq, False, j):
                return
            sq = tg.sq.parent_sq        # the parent's window is open: go on up

    def _select_dispatch(self, sq: _ServiceQueue, j: int) -> int:
        """``throtl_select_dispatch``: children whose time has come, earliest first."""
        nr = 0
        while sq.pending:
            tg = sq.first()
            if j < sq.pending[tg][0]:
                break
            nr += self._dispatch_tg(tg, j)
            if tg.sq.nr_queued[0] or tg.sq.nr_queued[1]:
                self._update_disptime(tg, j)
            else:
                del sq.pending[tg]      # throtl_dequeue_tg
            if nr >= QUANTUM:
                break
        return nr

    def _dispatch_tg(self, tg: _Group, j: int) -> int:
        """``throtl_dispatch_tg``: up to 6 reads, then up to 2 writes, while they may go."""
        nr = 0
        for rw, most in ((0, _MAX_READS), (1, _MAX_WRITES)):
            queued = tg.sq.queued[rw]
            done = 0
            while queued and not self._may_dispatch(tg, rw, bio_size(queued[0].bios[0]), j):
                self._dispatch_one(tg, rw, j)
                done += 1
                if done >= most:
                    break
            nr += done
        return nr

    def _dispatch_one(self, tg: _Group, rw: int, j: int) -> None:
        """``tg_dispatch_one_bio``: charge the head bio and move it to the parent."""
        bio = self._pop(tg.sq.queued[rw])
        tg.sq.nr_queued[rw] -= 1
        self._charge(tg, rw, bio_size(bio))
        parent = tg.parent
        if parent is not None:
            self._add_bio_tg(bio, tg.qnode_on_parent[rw], parent, rw)
            if self._slice_used(parent, rw, j):
                # start_parent_slice_with_credit
                parent.bytes_disp[rw] = 0
                parent.io_disp[rw] = 0
                if tg.slice_start[rw] > parent.slice_start[rw]:
                    parent.slice_start[rw] = tg.slice_start[rw]
                parent.slice_end[rw] = j + self.slice
        else:
            self._qnode_add(bio, tg.qnode_on_parent[rw], self.sq.queued[rw])
            self.nr_queued[rw] -= 1
        self._trim_slice(tg, rw, j)

    def _issue_ready(self, now: float) -> None:
        """``blk_throtl_dispatch_work_fn``: the released bios to the queue, reads first."""
        bios = []
        for rw in (0, 1):
            queued = self.sq.queued[rw]
            while queued:
                bios.append(self._pop(queued))
        since = self._since
        for bio in bios:
            t0, leaf = since.pop(bio.id)
            leaf.held_s += now - t0
        self.issue(bios, now)

    # ---------------------------------------------------------------- entry
    def bio_may_go(self, bio, cgroup, now: float) -> bool:
        """``blk_throtl_bio``: True when ``bio`` passes every limit up to the root now
        (charged on the way), False when the throttle keeps it (it is issued later)."""
        tg = self.groups.get(cgroup) or self._group(cgroup)
        rw = 1 if bio.write else 0
        if not tg.has_rules[rw]:
            return True
        j = self.jiffies(now)
        size = bio_size(bio)
        leaf = tg
        qn = None
        while True:
            if tg.sq.nr_queued[rw] or self._may_dispatch(tg, rw, size, j):
                break                   # FIFO behind queued bios, or over a limit
            self._charge(tg, rw, size)
            self._trim_slice(tg, rw, j)
            qn = tg.qnode_on_parent[rw]
            tg = tg.parent
            if tg is None:
                return True
        self.nr_queued[rw] += 1
        leaf.throttled_bios += 1
        leaf.throttled_bytes += size
        self._since[bio.id] = (now, leaf)
        self._add_bio_tg(bio, qn, tg, rw)
        if tg.was_empty:
            self._update_disptime(tg, j)
            self._schedule_next_dispatch(tg.sq.parent_sq, True, j)
        return False

    def held(self) -> int:
        """Bios the throttle holds now."""
        return len(self._since)

    def figures(self) -> dict:
        """Per group (the cgroup object; None is the root) with any bio held so far:
        ``throttled_bios``, ``throttled_bytes`` (bytes) and ``held_s`` (seconds the
        released ones were held, summed)."""
        return {cg: {"throttled_bios": tg.throttled_bios,
                     "throttled_bytes": tg.throttled_bytes,
                     "held_s": tg.held_s}
                for cg, tg in self.groups.items() if tg.throttled_bios}


class ThrottledQueue:
    """A front for one device's multi-queue request queue that applies ``io.max``
    (blk-throttle sits above the queue: ``submit_bio_noacct``), as `block.partition`
    is a front for a disk.

    ``submit_bio(bio, now)`` passes ``bio`` to ``queue.submit_bio`` now when its group
    (``bio.cgroup``; None or absent: the root, never throttled) is within its limits,
    else holds it and submits it when the throttle releases it (the submitter does not
    wait: it is told True, as ``submit_bio`` returns at once for a throttled bio).
    Everything else is the queue's. A held bio fires no tracepoint until it is released;
    its ``block_bio_queue`` (Q) is fired then, as both kernels trace Q after
    ``blk_throtl_bio``. Put it in front of a disk only when a group has io.max for it.

    ``rotational`` chooses the slice only with ``throttling_low`` (see `throtl_slice`);
    ``kernel`` a line of `LINES`; ``hz`` the kernel's HZ; ``device`` the name io.max
    keys name (the queue's ``name`` if None)."""

    def __init__(self, queue, clock, rotational: bool, kernel: str, hz: int = 250,
                 throttling_low: bool = False, device: str | None = None) -> None:
        self.queue = queue
        self.throttle = Throttle(device if device is not None else queue.name,
                                 clock, self._issue, rotational, kernel, hz, throttling_low)
        self._clock = clock
        # gives a bio its submitter's group before it is judged (``bio_associate_blkg``
        # happens at submit_bio, before blk_throtl_bio); set by whoever knows the groups
        self.associate = None

    def __getattr__(self, name: str):
        return getattr(self.queue, name)

    def submit_bio(self, bio, now: float | None = None) -> bool:
        """See `QueueProtocol.submit_bio`; a held bio counts as queued (True)."""
        if now is None:
            now = self._clock.now
        if self.associate is not None:
            self.associate(bio)
        cgroup = getattr(bio, "cgroup", None)
        if cgroup is None or self.throttle.bio_may_go(bio, cgroup, now):
            return self.queue.submit_bio(bio, now)
        return True

    def _issue(self, bios: list, now: float) -> None:
        """The throttle's released bios go to the queue (a submission left waiting for
        a tag retries by itself: nobody waits on it)."""
        submit = self.queue.submit_bio
        for bio in bios:
            submit(bio, now)

    def pending(self) -> int:
        """See `QueueProtocol.pending`: the queue's, plus the bios held here."""
        return self.queue.pending() + self.throttle.held()

    def idle(self) -> bool:
        """See `QueueProtocol.idle`: also nothing held here."""
        return not self.throttle.held() and self.queue.idle()

    def figures(self) -> dict:
        """See `Throttle.figures`."""
        return self.throttle.figures()
