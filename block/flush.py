"""Cache flushes and FUA writes in the block layer: 2.6.18's barriers and the multi-queue
flush sequence.

A filesystem that must know a block is on stable media (a journal's commit block) marks
its bio: ``bio.preflush`` (Linux 2.6.18: a barrier, ``BIO_RW_BARRIER``; 2.6.37 on:
``REQ_PREFLUSH``, called ``REQ_FLUSH`` before 4.8) asks that everything the device
completed before it be on the media first, ``bio.fua`` (``REQ_FUA``) that the bio's own
data be on the media when it completes. What the block layer does with them depends on
two capabilities of the device (`device_caps`): a **volatile write cache**
(``Device.volatile_write_cache``: the drive reports writes done before they are on the
media; the kernel's ``QUEUE_FLAG_WC``) and **FUA support** (``Device.fua``:
``QUEUE_FLAG_FUA``, the SCSI disk's DPOFUA bit).

**Linux 2.6.18** (block/ll_rw_blk.c; the legacy queue, `LegacyOrdered`):

* the SCSI disk driver chooses the queue's ordered mode from the drive
  (drivers/scsi/sd.c ``sd_revalidate_disk``, 2.6.18): write cache on and DPOFUA set:
  ``QUEUE_ORDERED_DRAIN_FUA`` (drain, pre-flush, the barrier written with FUA); write cache
  on without FUA: ``QUEUE_ORDERED_DRAIN_FLUSH`` (drain, pre-flush, the barrier, post-flush);
  write cache off: ``QUEUE_ORDERED_DRAIN`` (drain only: no flush is ever sent);
  `sd_ordered_mode`;
* a barrier bio is never merged and gets a request of its own (``__make_request``); its
  insertion drains the elevator onto the dispatch list and puts the barrier at its back
  (``__elv_add_request`` turns ELEVATOR_INSERT_SORT into ELEVATOR_INSERT_BACK for a
  barrier; ``elv_insert`` then calls ``elv_drain_elevator``): the barrier is a scheduling
  boundary, nothing queued after it passes it;
* when the barrier reaches the head of the dispatch list, ``blk_do_ordered`` starts the
  sequence (``start_ordered``): the barrier is replaced by its steps, pre-flush, the
  barrier write (with FUA in the FUA mode) and post-flush, as the mode asks; with
  draining, the first step waits until the device has nothing in flight, and each step
  waits until the one before it completed (``blk_ordered_req_seq`` > ``blk_ordered_cur_seq``:
  no request is handed out). Nothing else is dispatched until the sequence is done, then
  the barrier bio completes (``req_bar_endio``/``blk_ordered_complete_seq``).
* flush requests are not file-system requests: they bypass the elevator (no hook sees them)
  and /proc/diskstats of 2.6.18 does not count them (``end_that_request_last`` counts
  ``blk_fs_request`` requests only). The barrier write itself is counted as a write.

**Linux 5.4-6.6** (block/blk-flush.c; `flush_policy`, `flush_sequence`): a bio's flags are
kept only where the device needs them (``blk_queue_write_cache`` clears both without a
volatile cache, ``submit_bio_noacct``'s check); ``blk_flush_policy`` gives the steps:
DATA if the request has sectors, PREFLUSH if the device has a volatile cache and the
request asks for one, POSTFLUSH if it asks for FUA and the device has a volatile cache but
no FUA (FUA emulated by a flush after the write); ``blk_insert_flush`` runs the steps in
the order PREFLUSH -> DATA -> POSTFLUSH (``blk_flush_complete_seq``); a data-only policy
issues the request directly, bypassing the scheduler (``blk_mq_request_bypass_insert``).

Simplifications (docs/host-io.md, "Flushes and barriers"): a barrier request does not wait
for a free request (``nr_requests`` may be passed by the barriers in progress); the flush
steps' device time is not attributed to the barrier bio's ``disk_s`` (its data step's is);
2.6.18's tagged ordering (``QUEUE_ORDERED_TAG``, which sd never chooses) is not modelled.
"""

from __future__ import annotations

from blksim.block.request import REQ_OP_FLUSH, Bio, Request
from blksim.block.tracepoints import fire

# ---------------------------------------------------------------- 2.6.18 ordered modes
#: ``QUEUE_ORDERED_*`` (include/linux/blkdev.h, 2.6.18): the flag bits and the modes.
QUEUE_ORDERED_NONE = 0x00
QUEUE_ORDERED_DRAIN = 0x01
QUEUE_ORDERED_TAG = 0x02
QUEUE_ORDERED_PREFLUSH = 0x10
QUEUE_ORDERED_POSTFLUSH = 0x20
QUEUE_ORDERED_FUA = 0x40
QUEUE_ORDERED_DRAIN_FLUSH = QUEUE_ORDERED_DRAIN | QUEUE_ORDERED_PREFLUSH | QUEUE_ORDERED_POSTFLUSH
QUEUE_ORDERED_DRAIN_FUA = QUEUE_ORDERED_DRAIN | QUEUE_ORDERED_PREFLUSH | QUEUE_ORDERED_FUA

ORDERED_MODE_NAMES = {QUEUE_ORDERED_NONE: "none", QUEUE_ORDERED_DRAIN: "drain",
                      QUEUE_ORDERED_DRAIN_FLUSH: "drain_flush",
                      QUEUE_ORDERED_DRAIN_FUA: "drain_fua"}

# ---------------------------------------------------------------- blk-mq flush sequence
#: ``REQ_FSEQ_*`` (block/blk-flush.c, 5.4-6.6): the steps of a flush sequence.
REQ_FSEQ_PREFLUSH, REQ_FSEQ_DATA, REQ_FSEQ_POSTFLUSH = 1, 2, 4
STEP_NAMES = {REQ_FSEQ_PREFLUSH: "preflush", REQ_FSEQ_DATA: "data",
              REQ_FSEQ_POSTFLUSH: "postflush"}


def device_caps(device) -> tuple:
    """``(volatile_write_cache, fua)`` of a device model: what the kernel learns from its
    driver (``QUEUE_FLAG_WC``, ``QUEUE_FLAG_FUA``). FUA counts only with a volatile cache:
    without one every write is on stable media when it completes."""
    volatile = bool(getattr(device, "volatile_write_cache", False))
    return volatile, volatile and bool(getattr(device, "fua", False))


def sd_ordered_mode(device) -> int:
    """The ordered mode drivers/scsi/sd.c ``sd_revalidate_disk`` (2.6.18) gives the queue of
    ``device``: DRAIN_FUA with the write cache on and DPOFUA, DRAIN_FLUSH with the write
    cache on and no FUA, DRAIN with the write cache off."""
    volatile, fua = device_caps(device)
    if not volatile:
        return QUEUE_ORDERED_DRAIN
    return QUEUE_ORDERED_DRAIN_FUA if fua else QUEUE_ORDERED_DRAIN_FLUSH


def ordered_steps(mode: int, has_data: bool = True) -> tuple:
    """The requests 2.6.18's ``start_ordered`` queues for a barrier under ``mode``, in the
    order they are issued: ``("preflush", "barrier", "postflush")`` or a part of it
    (``"barrier_fua"`` when the barrier write carries FUA). Without ``has_data``, an empty
    barrier (``blkdev_issue_flush``, 2.6.32) keeps only its pre-flush: 2.6.32's
    ``start_ordered`` clears QUEUE_ORDERED_DO_BAR and DO_POSTFLUSH for it (block/blk-barrier.c),
    so under DRAIN it is the drain alone."""
    steps = []
    if mode & QUEUE_ORDERED_PREFLUSH:
        steps.append("preflush")
    if has_data:
        steps.append("barrier_fua" if mode & QUEUE_ORDERED_FUA else "barrier")
    if has_data and mode & QUEUE_ORDERED_POSTFLUSH:
        steps.append("postflush")
    return tuple(steps)


def flush_policy(volatile: bool, fua_supported: bool, has_data: bool, preflush: bool,
                 fua: bool) -> int:
    """``blk_flush_policy`` (block/blk-flush.c, 5.4-6.6): the ``REQ_FSEQ_*`` steps a request
    needs. Without a volatile cache only its data remain; FUA on a device without FUA is
    emulated by a post-flush."""
    policy = REQ_FSEQ_DATA if has_data else 0
    if volatile:
        if preflush:
            policy |= REQ_FSEQ_PREFLUSH
        if fua and not fua_supported:
            policy |= REQ_FSEQ_POSTFLUSH
    return policy


def flush_sequence(policy: int) -> tuple:
    """The steps of ``policy`` in the order ``blk_flush_complete_seq`` runs them
    (PREFLUSH, DATA, POSTFLUSH), by name."""
    return tuple(STEP_NAMES[s] for s in (REQ_FSEQ_PREFLUSH, REQ_FSEQ_DATA, REQ_FSEQ_POSTFLUSH)
                 if policy & s)


def data_fua(volatile: bool, fua_supported: bool, fua: bool) -> bool:
    """Whether the data write reaches the device with FUA set (``blk_insert_flush`` keeps
    REQ_FUA only where the device supports it and has a volatile cache)."""
    return fua and volatile and fua_supported


# ---------------------------------------------------------------- the 2.6.18 queue
class OrderedRequest(Request):
    """A request of a barrier sequence on the 2.6 queue: the barrier itself while it waits
    on the dispatch list (``step`` "barrier"), then its steps (``preflush``, ``barrier``,
    ``postflush``). It never enters an elevator; a flush step carries no bios."""

    __slots__ = ("step", "seq", "barrier")
    softbarrier = True

    def __init__(self, id: int, bio: Bio, now: float, owner, step: str, seq: int) -> None:
        super().__init__(id, bio, now, owner)
        self.step = step
        self.seq = seq             # its place in the sequence (0 first)
        self.barrier = None        # the barrier request the step belongs to
        self.elvpriv = False       # no elevator sees it
        self.nomerge = True        # REQ_NOMERGE | REQ_SOFTBARRIER
        self.in_elevator = False
        if step in ("preflush", "postflush", "end"):     # a flush (or the end): no data
            self.op = REQ_OP_FLUSH
            self.write = True
            self.nr_sectors = 0
            self.bios = []
            self.fua = False


class LegacyOrdered:
    """2.6.18's barrier handling for one `blksim.block.legacy_queue.RequestQueue`
    (module docstring). The queue calls `submit` for a bio with ``preflush`` or ``fua``,
    `dispatch` when an `OrderedRequest` is at the head of its dispatch list, and
    `completed` with the requests its device completed while ``active``."""

    def __init__(self, device) -> None:
        # (the queue is passed to each call, not kept: no reference cycle with it)
        self.mode = sd_ordered_mode(device)
        self.active = 0            # barriers queued or in sequence
        self.allocated = 0         # its requests allocated and not freed (no elevator data)
        self._steps: list = []     # the sequence in progress: its step requests in order
        self._cur = -1             # index of the step in flight (-1: none started)
        self.barriers = 0          # barrier bios completed
        self.flushes = 0           # flush requests completed (pre- and post-flushes)
        self.flush_time = 0.0      # their summed device time (s)

    def figures(self) -> dict:
        """The run's barriers, from its start: the queue's ordered mode, barriers done,
        flush requests done and their device time (ms)."""
        return {"ordered_mode": ORDERED_MODE_NAMES[self.mode], "barriers": self.barriers,
                "flushes": self.flushes, "flush_time_ms": round(self.flush_time * 1e3, 6)}

    # -------------------------------------------------------------- submission
    def submit(self, q, bio, now: float) -> bool:
        """``__make_request`` for a barrier bio: a request of its own (never merged), the
        elevator drained, the barrier at the back of the dispatch list, the queue run."""
        w = 1 if bio.write else 0
        q._drain_elevator(now)     # elv_insert's elv_drain_elevator, done first here: the
        #                            barrier is on the list, counted, only after it
        if q._tp_block_getrq is not None:
            fire(q._tp_block_getrq, "block_getrq", q, bio, w, now)
        q.count[w] += 1
        q.queued += 1
        rq = OrderedRequest(q.requests_allocated, bio, now, q, "barrier", 0)
        q.requests_allocated += 1
        q.stats.request_added(now)
        self.active += 1
        self.allocated += 1
        if q._tp_block_rq_insert is not None:
            fire(q._tp_block_rq_insert, "block_rq_insert", q, rq, now)
        q.dq.append(rq)
        q.plugged = False          # elv_insert, ELEVATOR_INSERT_BACK: blk_remove_plug, run
        q.run_queue(now)
        return True

    # -------------------------------------------------------------- dispatch
    def dispatch(self, q, now: float, vt: float) -> bool:
        """``blk_do_ordered``, with the ordered request at the head of the dispatch list:
        start the sequence if it is the barrier, then issue the next step if its turn has
        come and the device is drained. True when a request was issued. (An ordered request
        is never activated in an elevator: ``elv_next_request`` activates sorted requests
        only.)"""
        head = q.dq[0]
        if head.barrier is None:
            self._start(q, head, now)           # start_ordered
            head = q.dq[0]
        if not self._steps:                     # an empty barrier under DRAIN: the drain
            if q.in_flight:
                return False
            self._finish(q, head.barrier, now)
            return True
        if head.seq != self._cur + 1 or q.in_flight:
            return False                      # its turn has not come, or still draining
        self._cur = head.seq
        q.dq.pop_head()
        head.started = True
        head.t_dispatch = now
        head.v_start = vt
        for bio in head.bios:
            bio.t_dispatch = now
        q.in_flight += 1
        q.queued -= 1
        if q._tp_block_rq_issue is not None:
            fire(q._tp_block_rq_issue, "block_rq_issue", q, head, now)
        q.device.submit(head, now)
        return True

    def _start(self, q, bar, now: float) -> None:
        """``start_ordered``: the barrier's steps replace it at the head of the list."""
        q.dq.popleft()
        q.count[1 if bar.write else 0] -= 1     # (each step is counted as its own request)
        q.queued -= 1
        steps = []
        for name in ordered_steps(self.mode, bar.nr_sectors > 0):
            if name.startswith("barrier"):
                rq = bar
                rq.fua = name == "barrier_fua"
            else:
                rq = OrderedRequest(q.requests_allocated, bar.bios[0], now, q, name, 0)
                q.requests_allocated += 1
                self.allocated += 1
            q.count[1 if rq.write else 0] += 1
            q.queued += 1
            rq.seq = len(steps)
            rq.barrier = bar
            steps.append(rq)
        # The sequence's end, held at the head of the list while the last step is at the
        # device: the queue hands out nothing else until the sequence is done (a request
        # queued after the barrier has the sequence number QUEUE_ORDSEQ_DONE).
        end = OrderedRequest(-1, bar.bios[0], now, q, "end", len(steps))
        end.barrier = bar
        self._steps = steps
        self._cur = -1
        q.dq.appendleft(end)
        q.queued += 1                  # (on the list: counted, as every request there)
        for rq in reversed(steps):
            q.dq.appendleft(rq)

    # -------------------------------------------------------------- completion
    def completed(self, q, done: list, now: float) -> list:
        """Take the ordered steps out of the device's completions ``done`` and finish them
        here (no elevator hook sees them); the barrier bio completes once the last step
        has. Returns the other requests, for the queue's own completion."""
        if not any(rq.__class__ is OrderedRequest for rq in done):
            return done
        rest = []
        vt = q._advance_vtime(now) if q._vt_on else now
        for rq in done:
            if rq.__class__ is not OrderedRequest:
                rest.append(rq)
                continue
            if q._tp_block_rq_complete is not None:
                fire(q._tp_block_rq_complete, "block_rq_complete", q, rq, now)
            rq.v_start = vt - rq.v_start
            q.in_flight -= 1
            if rq.op == REQ_OP_FLUSH:
                self.flushes += 1
                self.flush_time += now - rq.t_dispatch
            else:      # the barrier write is a file-system request: diskstats count it
                q.stats.request_completed(rq.write, rq.nr_sectors, rq.t_insert, now)
            q._free_request(rq)
            self.allocated -= 1
            if rq.seq == len(self._steps) - 1:
                self._finish(q, rq.barrier, now)
        if not rest:
            q.plugged = False
            if not q.run_queue(now):
                q._arm_device()
        return rest

    def _finish(self, q, bar, now: float) -> None:
        """The sequence is done (``blk_ordered_complete_seq``): the barrier bio ends
        (``bio_endio``, its disk time the barrier write's own), the queue goes on."""
        self._steps = []
        self._cur = -1
        self.active -= 1
        self.barriers += 1
        end = q.dq.popleft()            # the sequence's end marker
        assert end.step == "end", end
        bar.barrier = None              # (it pointed at itself: no cycle left behind)
        if not bar.nr_sectors:          # an empty barrier was no step: freed here
            self.allocated -= 1
        q.queued -= 1
        subscribers = q._tp_block_bio_complete
        for bio in bar.bios:
            bio.t_complete = now
            bio.disk_s = bar.v_start * bio.nr_sectors / bar.nr_sectors if bar.nr_sectors \
                else 0.0
            bio.rq = bar.id
            bio.dev = q.name
            bio.bd = bar.breakdown
            if subscribers is not None:
                fire(subscribers, "block_bio_complete", q, bio, now)
            if bio.on_complete is not None:
                bio.on_complete(bio)
