"""Cache flushes and FUA on the multi-queue layer: blk-mq's flush machinery (block/blk-flush.c
and the flush steps of block/blk-mq.c, Linux 5.4 and 6.6), for one `MqQueue`.

The rules of which steps a request needs are `blksim.block.flush`'s (``flush_policy`` =
``blk_flush_policy``, ``data_fua``); this module runs them:

* **Submission** (`MqFlush.check_bio`: ``submit_bio_noacct`` 6.6, ``generic_make_request_checks``
  5.4): on a device without a volatile write cache a bio loses REQ_PREFLUSH and REQ_FUA,
  and an empty flush (no sectors) ends at once, successfully. Bios with either flag are
  never merged, nor is anything merged into their requests (``REQ_NOMERGE_FLAGS``:
  ``bio_mergeable``, ``rq_mergeable``), and their requests are not plugged
  (``blk_mq_make_request`` 5.4: the flush branch comes before the plug's;
  ``blk_mq_submit_bio`` 6.6: ``blk_insert_flush`` before ``blk_add_rq_to_plug``).
* **blk_insert_flush** (`MqFlush.insert`): REQ_PREFLUSH is cleared from the request,
  REQ_FUA kept only where the device has FUA, REQ_SYNC set. Policy DATA only (FUA
  native, or no flush needed): 5.4-6.1 put the request at the back of the hctx's
  dispatch list, bypassing the elevator (``blk_mq_request_bypass_insert``); 6.5 on
  (``blk_insert_flush`` returns false) it goes the normal way, as does DATA|POSTFLUSH,
  whose completion then starts the post-flush (``mq_flush_data_end_io``). Otherwise the
  request enters the sequence (``blk_flush_complete_seq`` with the steps it does not
  need marked done).
* **blk_flush_complete_seq** (`MqFlush._advance`): the next step of PREFLUSH -> DATA ->
  POSTFLUSH. PREFLUSH and POSTFLUSH wait on the flush queue's pending list
  (``flush_queue[flush_pending_idx]``, ``flush_pending_since`` set when it was empty);
  DATA goes to the head of the hctx's dispatch list (5.4: ``blk_flush_queue_rq(rq, true)``,
  the requeue list's front, then ``blk_mq_sched_bypass_insert``); when all are done the
  request ends (``blk_flush_restore_request``, ``blk_mq_end_request``): only then its
  bios end (``req_bio_endio`` does not end a bio of a flush sequence).
* **blk_kick_flush** (`MqFlush._kick`): one flush request in flight per flush queue
  (one per hctx, ``hctx->fq``): none is issued while the previous one runs
  (``flush_pending_idx != flush_running_idx``), nor while data of a sequence is in flight
  unless the pending list is older than ``FLUSH_PENDING_TIMEOUT`` (5 s) (5.4: only with an
  elevator; from 5.9 with or without, "block: defer flush request no matter whether we
  have elevator"). Issuing it flips
  ``flush_pending_idx``: every request pending then is served by this one flush, and
  later ones wait for the next (flush coalescing). The flush request borrows the first
  pending request's driver tag without an elevator, its scheduler tag with one (and then
  takes a driver tag at dispatch, which it may have to wait for); it goes to the head
  of the hctx's dispatch list, bypassing the elevator, as ``REQ_OP_FLUSH``.
* **flush_end_io** (`MqFlush._flush_done`): ``flush_running_idx`` flips, the flush is
  counted in /proc/diskstats (``blk_account_io_flush``, 5.5 on), its driver tag is given
  back (with an elevator), and every request that waited on it goes to its next step.
* **mq_flush_data_end_io** (`MqFlush._data_done`): the data step completed: its driver
  tag is given back with an elevator (kept without one), the sequence goes on.

Simplifications (docs/blk-mq.md, "Flushes and FUA"): from 6.5 the DATA step after a
PREFLUSH is inserted into the elevator at its head (``blk_mq_insert_request`` from the
requeue work) and such requests are prepared by the elevator; blksim sends it to the head
of the dispatch list and keeps it from the elevator on every line, as 5.4 does. The
requeue list's work (kblockd) is the hctx's asynchronous run at the same instant. A
flush-sequence request gets no ``limit_depth`` and no elevator hooks (5.4's
``op_is_flush`` rule for every line). The block layer's ``block_rq_insert`` is fired when a
request enters the sequence (the kernel fires it only where the request enters an
elevator or a software queue).
"""

from __future__ import annotations

from blksim.block.flush import (REQ_FSEQ_DATA, REQ_FSEQ_POSTFLUSH, REQ_FSEQ_PREFLUSH,
                                data_fua, device_caps, flush_policy)
from blksim.block.request import REQ_OP_FLUSH, MqRequest
from blksim.block.tracepoints import fire

#: ``REQ_FSEQ_ACTIONS``/``REQ_FSEQ_DONE`` (block/blk-flush.c, 5.4-6.6).
REQ_FSEQ_ACTIONS = REQ_FSEQ_PREFLUSH | REQ_FSEQ_DATA | REQ_FSEQ_POSTFLUSH
REQ_FSEQ_DONE = 8
#: ``FLUSH_PENDING_TIMEOUT`` (block/blk-flush.c, 5.4-6.6: 5 * HZ): how long pending flushes
#: may wait for data of a sequence in flight before a flush is issued anyway (s).
FLUSH_PENDING_TIMEOUT_S = 5.0


class MqFlushRequest(MqRequest):
    """The flush queue's flush request (``fq->flush_rq``): ``REQ_OP_FLUSH``, no sectors.
    ``bios`` holds the empty flush bios it ends (for the bios' issue time and tracing);
    ``borrowed`` is True while it holds the first pending request's driver tag."""

    __slots__ = ("fq", "borrowed")

    def __init__(self, id: int, first, now: float, fq, bios: list) -> None:
        super().__init__(id, first.bios[0], now, first.owner, first.hctx, first.ctx)
        self.op = REQ_OP_FLUSH
        self.write = True
        self.sync = True
        self.fua = False
        self.sector = 0
        self.nr_sectors = 0
        self.nomerge = True
        self.elvpriv = False
        self.bios = bios
        self.fq = fq
        self.borrowed = False


class FlushQueue:
    """``struct blk_flush_queue`` of one hctx: the two pending lists and their indices,
    the data steps in flight, and the flush request in flight (or None)."""

    __slots__ = ("hctx", "lists", "pending_idx", "running_idx", "pending_since",
                 "data_in_flight", "flush_rq")

    def __init__(self, hctx) -> None:
        self.hctx = hctx
        self.lists = [[], []]
        self.pending_idx = 0
        self.running_idx = 0
        self.pending_since = 0.0
        self.data_in_flight = 0
        self.flush_rq = None


class _Seq:
    """A request in a flush sequence: its steps done (``REQ_FSEQ_*`` bits), its flush
    queue, and whether the sequence started it (``rq.flush.seq``, RQF_FLUSH_SEQ)."""

    __slots__ = ("rq", "seq", "fq")

    def __init__(self, rq, seq: int, fq) -> None:
        self.rq = rq
        self.seq = seq
        self.fq = fq


class MqFlush:
    """The flush machinery of one `MqQueue` (module docstring). ``live`` counts the
    requests it follows (sequences and flush requests): 0 means the queue's completion
    need not look here."""

    def __init__(self, queue) -> None:
        # (the queue is passed to each call, not kept: no reference cycle with it)
        self.volatile, self.fua = device_caps(queue.device)
        self.data_normal_path = queue.variant.flush_data_normal_path
        self.defer_always = queue.variant.flush_defer_always
        self.fqs = {}                # hctx index -> FlushQueue, made when first needed
        self.seqs: dict = {}         # request id -> _Seq
        self.live = 0
        self.flushes = 0             # flush requests completed
        self.flush_time = 0.0        # their summed device time (s)
        self.sequences = 0           # requests whose sequence ended

    def figures(self) -> dict:
        """The run's flushes from its start: flush requests done and their device time
        (ms), requests that ended a flush sequence."""
        return {"flushes": self.flushes, "flush_time_ms": round(self.flush_time * 1e3, 6),
                "flush_sequences": self.sequences}

    # -------------------------------------------------------------- submission
    def check_bio(self, q, bio, now: float) -> bool:
        """``submit_bio_noacct`` for a bio with REQ_PREFLUSH or REQ_FUA: without a volatile
        cache both are cleared; an empty bio left without REQ_PREFLUSH then ends, successfully
        (True: the caller stops; the bio ends after the current handler, untraced, as the
        kernel's ``bio_endio`` there runs before ``block_bio_queue``)."""
        if not self.volatile:
            bio.preflush = False
            bio.fua = False
        if bio.nr_sectors or bio.preflush:
            return False
        q.clock.call_at(now, lambda _ev: q._end_empty_bio(bio, _ev.when))
        return True

    def wants_flush_path(self, bio) -> bool:
        """Whether the request made for ``bio`` (with REQ_PREFLUSH or REQ_FUA left) is taken
        by ``blk_insert_flush`` rather than placed the normal way: always before 6.5;
        from 6.5 only when its policy has a PREFLUSH step (or no step)."""
        if not self.data_normal_path:
            return True
        policy = flush_policy(self.volatile, self.fua, bio.nr_sectors > 0, bio.preflush,
                              bio.fua)
        return policy != REQ_FSEQ_DATA and policy != REQ_FSEQ_DATA | REQ_FSEQ_POSTFLUSH

    def _fq(self, hctx) -> FlushQueue:
        fq = self.fqs.get(hctx.index)
        if fq is None:
            fq = self.fqs[hctx.index] = FlushQueue(hctx)
        return fq

    def prepare(self, rq, bio) -> int:
        """The flags ``blk_insert_flush`` leaves the request (REQ_PREFLUSH cleared, REQ_FUA
        only where the device honours it, REQ_SYNC set), its merges stopped; returns its
        policy. A request going the normal way with a POSTFLUSH step is followed from
        here (its completion starts the post-flush)."""
        policy = flush_policy(self.volatile, self.fua, bio.nr_sectors > 0, bio.preflush,
                              bio.fua)
        rq.fua = data_fua(self.volatile, self.fua, bio.fua)
        rq.sync = True
        rq.nomerge = True
        if policy == REQ_FSEQ_DATA | REQ_FSEQ_POSTFLUSH and self.data_normal_path:
            # 6.5+: blk_rq_init_flush, the request on flush_data_in_flight, then the
            # normal path; its data completion (mq_flush_data_end_io) goes on from there
            fq = self._fq(rq.hctx)
            self.seqs[rq.id] = _Seq(rq, REQ_FSEQ_PREFLUSH, fq)
            fq.data_in_flight += 1
            self.live += 1
        return policy

    def insert(self, q, rq, policy: int, now: float) -> None:
        """``blk_insert_flush`` for a request the flush path takes (see
        `wants_flush_path`), then the hctx run (asynchronously)."""
        hctx = rq.hctx
        if q._tp_block_rq_insert is not None:
            fire(q._tp_block_rq_insert, "block_rq_insert", q, rq, now)
        if policy == REQ_FSEQ_DATA:
            # 5.4-6.1: data only, issued bypassing the elevator (tail of hctx->dispatch)
            hctx.dispatch.append(rq)
        else:
            fq = self._fq(hctx)
            st = self.seqs[rq.id] = _Seq(rq, 0, fq)
            self.live += 1
            ended: list = []
            self._advance(q, st, REQ_FSEQ_ACTIONS & ~policy, now, ended)
            assert not ended, "a sequence with a flush step cannot end at insertion"
        q._run_async(hctx, now)

    # -------------------------------------------------------------- the sequence
    def _advance(self, q, st: _Seq, done: int, now: float, ended) -> None:
        """``blk_flush_complete_seq``: steps ``done`` are done; go to the next. A request
        whose sequence ends is appended to ``ended`` (the queue ends it and its bios)."""
        st.seq |= done
        seq = st.seq
        rq = st.rq
        fq = st.fq
        # the next step is the first not done (blk_flush_cur_seq: ffz of rq->flush.seq)
        if not seq & REQ_FSEQ_PREFLUSH or (seq & REQ_FSEQ_DATA and not seq & REQ_FSEQ_POSTFLUSH):
            # PREFLUSH or POSTFLUSH: wait on the pending list for the next flush
            pending = fq.lists[fq.pending_idx]
            if not pending:
                fq.pending_since = now
            pending.append(rq)
        elif not seq & REQ_FSEQ_DATA:
            # DATA: at the head of the hctx's dispatch list, run asynchronously
            fq.data_in_flight += 1
            fq.hctx.dispatch.appendleft(rq)
            q._run_async(fq.hctx, now)
        else:
            # REQ_FSEQ_DONE: blk_flush_restore_request, blk_mq_end_request
            del self.seqs[rq.id]
            self.live -= 1
            self.sequences += 1
            ended.append(rq)
        self._kick(q, fq, now)

    def _kick(self, q, fq: FlushQueue, now: float) -> None:
        """``blk_kick_flush``: issue the flush request if none runs, requests are pending
        and no data of a sequence is in flight (or the pending list is old enough)."""
        if fq.pending_idx != fq.running_idx:
            return
        pending = fq.lists[fq.pending_idx]
        if not pending:
            return
        if fq.data_in_flight and now < fq.pending_since + FLUSH_PENDING_TIMEOUT_S and \
                (self.defer_always or q.elevator is not None):
            return
        fq.pending_idx ^= 1
        first = pending[0]
        # the empty flushes it ends ride on it (their issue time is the flush's)
        bios = [rq.bios[0] for rq in pending if not rq.nr_sectors]
        frq = MqFlushRequest(q.requests_allocated, first, now, fq, bios)
        q.requests_allocated += 1
        if q.elevator is None:
            frq.tag = first.tag             # borrowed: the first request waits meanwhile
            frq.borrowed = True
        fq.flush_rq = frq
        self.live += 1
        q.queued += 1
        fq.hctx.dispatch.appendleft(frq)    # blk_mq_request_bypass_insert at the head
        q._run_async(fq.hctx, now)

    # -------------------------------------------------------------- completion
    def follows(self, rq) -> bool:
        """Whether ``rq``, just completed by the device, is this machinery's."""
        return rq.__class__ is MqFlushRequest or rq.id in self.seqs

    def completed(self, q, rq, now: float, woken: list, ended: list) -> None:
        """The device completed ``rq`` (a flush request, or a sequence's data step):
        ``flush_end_io`` or ``mq_flush_data_end_io``. Requests whose sequence ended are
        appended to ``ended``; sleepers a freed driver tag wakes to ``woken``."""
        if rq.__class__ is MqFlushRequest:
            fq = rq.fq
            fq.flush_rq = None
            self.live -= 1
            self.flushes += 1
            self.flush_time += now - rq.t_dispatch
            q.stats.flush_completed(rq.t_insert, now)        # blk_account_io_flush
            if rq.borrowed:
                rq.tag = -1                   # the tag goes back to the first request
            elif rq.tag >= 0:
                woken += rq.hctx.tags.put(rq.tag)
                rq.tag = -1
            share = rq.v_start / len(rq.bios) if rq.bios else 0.0
            running = fq.lists[fq.running_idx]
            fq.lists[fq.running_idx] = []
            fq.running_idx ^= 1
            for waiter in running:
                st = self.seqs[waiter.id]
                if not waiter.nr_sectors:
                    waiter.v_start = share    # an empty flush: its share of the device time
                # the step it waited for (blk_flush_cur_seq: the first not done)
                step = REQ_FSEQ_PREFLUSH if not st.seq & REQ_FSEQ_PREFLUSH else REQ_FSEQ_POSTFLUSH
                self._advance(q, st, step, now, ended)
            return
        st = self.seqs[rq.id]
        st.fq.data_in_flight -= 1
        if q.elevator is not None and rq.tag >= 0:
            woken += rq.hctx.tags.put(rq.tag)
            rq.tag = -1
        self._advance(q, st, REQ_FSEQ_DATA, now, ended)
