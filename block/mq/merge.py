"""Merging in the multi-queue layer: a bio into a plugged request, into the elevator's
requests (``elv_merge``) or a software queue's (``blk_bio_list_merge``), and a new request
into a queued one at insertion (``elv_attempt_insert_merge``); block/blk-merge.c,
blk-mq-sched.c and elevator.c of 5.4 to 6.6. A base of `blksim.block.mq.queue.MqQueue`,
whose attributes it uses (the elevator, the merge hash, the one-hit cache, the counts).
"""

from __future__ import annotations

from collections import deque

from blksim.block.elevator_boundary import describe
from blksim.block.request import REQ_OP_DISCARD, STAT_GROUP_OF_OP, MqRequest
from blksim.block.tracepoints import fire

#: Requests of a software queue a bio is tried against (``blk_bio_list_merge``).
SW_QUEUE_MERGE_SCAN = 8


class MqMerging:
    """The merging and insertion steps of `MqQueue` (see the module docstring)."""

    def _merge_limit(self, rq) -> int:
        """The most sectors ``rq`` may grow to (``blk_rq_get_max_sectors``): a discard's
        ``max_discard_sectors``, any other request's ``max_sectors``. Requests and bios of
        different ops never merge (``blk_rq_merge_ok``); discards merge by position only
        (the multi-range discard merge of a device with ``max_discard_segments`` > 1,
        ``ELEVATOR_DISCARD_MERGE``, is not modelled)."""
        return self.max_discard_sectors if rq.op == REQ_OP_DISCARD else self.max_sectors

    def _mergeable(self, rq, bio) -> bool:
        return not rq.started and not rq.nomerge and rq.op == bio.op

    def _plug_merge(self, plug, bio, now: float) -> bool:
        """``blk_attempt_plug_merge``: 5.x tries every plugged request, newest first;
        6.x only the newest."""
        candidates = plug.rqs[-1:] if self.variant.plug_merge_newest_only \
            else reversed(plug.rqs)
        for rq in candidates:
            if self._try_bio_into(rq, bio, now, in_elevator=False):
                return True
        return False

    def _sched_bio_merge(self, bio, now: float) -> bool:
        """``blk_mq_sched_bio_merge``: the elevator's merge, or the software queue's."""
        elevator = self.elevator
        if elevator is None:
            ctx = bio.cpu % self.settings.nr_cpus
            lst = self.hctxs[self.cpu_map[ctx]].ctx_lists.get(ctx)
            return bool(lst) and self._list_merge(lst, bio, now, False)
        lst = elevator.merge_list(bio, bio.cpu % self.settings.nr_cpus)
        if lst is not None:
            return self._list_merge(lst, bio, now, True)
        return self._elv_merge(bio, now)

    def _list_merge(self, lst, bio, now: float, in_elevator: bool) -> bool:
        """``blk_bio_list_merge``: the newest requests first, at most 8, stopping at the
        first that refuses the bio for a reason other than position."""
        checked = 0
        for rq in reversed(lst):
            if checked >= SW_QUEUE_MERGE_SCAN:
                break
            checked += 1
            if rq.op != bio.op or rq.nomerge:
                continue
            if rq.end == bio.sector or rq.sector == bio.end:
                return self._try_bio_into(rq, bio, now, in_elevator)
        return False

    def _elv_merge(self, bio, now: float) -> bool:
        """``elv_merge``: the one-hit cache, the back-merge hash, the elevator's
        ``request_merge`` (front); ``queue/nomerges`` 1 keeps only the cache."""
        elevator = self.elevator
        rq = self.last_merge
        if rq is not None and self._mergeable(rq, bio) and \
                (rq.end == bio.sector or rq.sector == bio.end):
            if self._try_bio_into(rq, bio, now, True):
                return True
        if self._nomerges == 1:
            return False
        if self.use_hash:
            rq = self.merge_hash.get(bio.sector)
            if rq is not None and self._mergeable(rq, bio) and \
                    self._try_bio_into(rq, bio, now, True):
                return True
        rq = elevator.request_merge(bio, now)
        if rq is None:
            return False
        if rq.__class__ is not MqRequest or rq.owner is not self:
            raise self.elevator_fault("request_merge()", f"returned {describe(rq)}: "
                                      f"expected a request it holds, or None")
        return (self._mergeable(rq, bio) and rq.sector == bio.end
                and self._try_bio_into(rq, bio, now, True))

    def _try_bio_into(self, rq, bio, now: float, in_elevator: bool) -> bool:
        """Merge ``bio`` at the back or front of ``rq`` (``bio_attempt_back_merge``/
        ``bio_attempt_front_merge``), then coalesce ``rq`` with its neighbour in the
        elevator (``attempt_back_merge``/``attempt_front_merge``)."""
        if rq.op != bio.op or rq.nomerge or rq.started:
            return False
        if rq.end == bio.sector:
            front = False
        elif rq.sector == bio.end:
            front = True
        else:
            return False
        if rq.nr_sectors + bio.nr_sectors > self._merge_limit(rq):
            return False
        elevator = self.elevator
        if in_elevator and elevator is not None and not elevator.allow_merge(rq, bio):
            return False
        if bio.ioprio < rq.ioprio:
            rq.ioprio = bio.ioprio
        if front:
            if self._tp_block_bio_frontmerge is not None:
                fire(self._tp_block_bio_frontmerge, "block_bio_frontmerge", self, bio, now)
            if self.rq_qos.merge is not None:
                self.rq_qos.merge(rq, bio, now)          # rq_qos_merge
            rq.bios.insert(0, bio)
            rq.sector = bio.sector
            rq.nr_sectors += bio.nr_sectors
        else:
            if self._tp_block_bio_backmerge is not None:
                fire(self._tp_block_bio_backmerge, "block_bio_backmerge", self, bio, now)
            if self.rq_qos.merge is not None:
                self.rq_qos.merge(rq, bio, now)          # rq_qos_merge
            self._unhash(rq)
            rq.bios.append(bio)
            rq.nr_sectors += bio.nr_sectors
            if self.use_hash and rq.in_elevator:
                self.merge_hash[rq.end] = rq
        self.stats.bio_merged(STAT_GROUP_OF_OP[bio.op], now)
        if in_elevator and elevator is not None and rq.in_elevator:
            self.last_merge = rq
            if front:
                elevator.request_merged(rq, True, now)
                self._attempt_merge(self._neighbour("former_request", rq), rq, now)
            elif not self._attempt_merge(rq, self._neighbour("next_request", rq), now):
                elevator.request_merged(rq, False, now)
        return True

    def _neighbour(self, hook: str, rq):
        other = getattr(self.elevator, hook)(rq)
        if other is not None and (other.__class__ is not MqRequest or other.owner is not self):
            raise self.elevator_fault(f"{hook}()", f"returned {describe(other)}: expected a "
                                      f"request it holds, or None")
        return other

    def _attempt_merge(self, rq, nxt, now: float) -> bool:
        """``attempt_merge``: ``nxt`` joins ``rq`` (both queued in the elevator)."""
        if rq is None or nxt is None or not (rq.in_elevator and nxt.in_elevator):
            return False
        if rq.nomerge or nxt.nomerge or rq.end != nxt.sector or rq.op != nxt.op:
            return False
        if rq.nr_sectors + nxt.nr_sectors > self._merge_limit(rq):
            return False
        self._unhash(rq)
        self._unhash(nxt)
        rq.bios.extend(nxt.bios)
        rq.nr_sectors += nxt.nr_sectors
        if nxt.t_insert < rq.t_insert:
            rq.t_insert = nxt.t_insert
        if nxt.ioprio < rq.ioprio:
            rq.ioprio = nxt.ioprio
        if self.variant.rq_merge_tracepoint and self._tp_block_rq_merge is not None:
            fire(self._tp_block_rq_merge, "block_rq_merge", self, nxt, now)
        self.elevator.requests_merged(rq, nxt, now)
        nxt.in_elevator = False
        nxt.started = True               # gone: its bios are rq's
        if self.use_hash:
            self.merge_hash[rq.end] = rq
        self.last_merge = rq
        self.request_merges += 1
        self.stats.request_merged_away(now, STAT_GROUP_OF_OP[nxt.op])
        self.queued -= 1
        self._free(nxt, now)
        return True

    def _unhash(self, rq) -> None:
        if self.use_hash:
            key = rq.end
            if self.merge_hash.get(key) is rq:
                del self.merge_hash[key]

    # ------------------------------------------------------------------ insertion
    def _insert(self, rqs, at_head: bool, now: float) -> None:
        """``blk_mq_sched_insert_requests``: a list of requests (a plug's flush, a
        requeue) into the elevator (after an insert merge, ``elv_attempt_insert_merge``,
        for an elevator with the merge hash), or into the software queues
        (``blk_mq_insert_requests``). Traces I."""
        insert = self._tp_block_rq_insert
        elevator = self.elevator
        if elevator is None:
            for rq in rqs:
                if insert is not None:
                    fire(insert, "block_rq_insert", self, rq, now)
                lst = rq.hctx.ctx_lists.get(rq.ctx)
                if lst is None:
                    lst = rq.hctx.ctx_lists[rq.ctx] = deque()
                if at_head:
                    lst.appendleft(rq)
                else:
                    lst.append(rq)
                rq.in_elevator = False
            return
        kept = [rq for rq in rqs if self._to_elevator(rq, at_head, now)]
        if kept:
            elevator.insert_requests(kept, at_head, now)
        self._inserted(kept[-1] if kept else None)

    def _insert_request(self, rq, now: float) -> None:
        """One new request (``blk_mq_sched_insert_request`` 5.4-6.3,
        ``blk_mq_insert_request`` 6.4 on): as `_insert` of a list of one, whose
        loop PyPy would enter for every request. The elevator's ``insert_requests``
        still gets a list, as the kernel hands it one."""
        elevator = self.elevator
        if elevator is None:
            self._insert([rq], False, now)
            return
        if self._to_elevator(rq, False, now):
            elevator.insert_requests([rq], False, now)
            self._inserted(rq)
        else:
            self._inserted(None)

    def _to_elevator(self, rq, at_head: bool, now: float) -> bool:
        """A request on its way into the elevator: False when an insert merge took it
        (it is freed); else it is traced I and, unless a requeue, hashed for back merges."""
        if not at_head and self.use_hash and self._insert_merge(rq, now):
            return False
        if self._tp_block_rq_insert is not None:
            fire(self._tp_block_rq_insert, "block_rq_insert", self, rq, now)
        rq.in_elevator = True
        if self.use_hash and not at_head:        # a requeue is not a merge candidate
            self.merge_hash[rq.end] = rq
        return True

    def _inserted(self, last) -> None:
        """After an insertion: the one-hit cache takes the last request inserted if it is
        empty; the elevator's timers are looked at."""
        if last is not None and self.last_merge is None:
            self.last_merge = last
        elevator = self.elevator
        if self._elv_timers and elevator.timers_changed:
            self._check_elevator_timer()

    def _insert_merge(self, rq, now: float) -> bool:
        """``elv_attempt_insert_merge``: a new request joins the back of a queued one
        ending where it starts. The elevator is told its request grew
        (``request_merged``), not that two of its requests merged: the new one never
        entered it (docs/blk-mq.md)."""
        target = self.merge_hash.get(rq.sector)
        if target is None or not target.in_elevator or target.nomerge or rq.nomerge \
                or target.op != rq.op or \
                target.nr_sectors + rq.nr_sectors > self._merge_limit(target):
            return False
        self._unhash(target)
        target.bios.extend(rq.bios)
        target.nr_sectors += rq.nr_sectors
        if rq.ioprio < target.ioprio:
            target.ioprio = rq.ioprio
        self.merge_hash[target.end] = target
        if self.variant.rq_merge_tracepoint and self._tp_block_rq_merge is not None:
            fire(self._tp_block_rq_merge, "block_rq_merge", self, rq, now)
        self.elevator.request_merged(target, False, now)
        rq.started = True
        self.request_merges += 1
        self.stats.request_merged_away(now, STAT_GROUP_OF_OP[rq.op])
        self.queued -= 1
        self._free(rq, now)
        return True

