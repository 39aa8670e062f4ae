"""Queue merging: BFQ's Early Queue Merge of cooperating processes and, from 5.15, stable
merging, as block/bfq-iosched.c of Linux 5.4 to 6.6 does them.

* **EQM** (``bfq_setup_cooperator``), not on non-rotational devices that queue
  (``nonrot_with_queueing``): a sync queue that got its first service less than
  ``bfq_merge_time_limit`` = HZ/10 ago (``bfq_too_late_for_merging``), while other
  queues are busy, is merged with the in-service queue when its new I/O is within
  ``BFQQ_CLOSE_THR`` = 8192 sectors of where the in-service queue's last request
  ended, or else with the queue whose next request is nearest to it in the
  position tree (``bfqq_find_close``), both sync, same class, neither IDLE nor
  seeky (``bfq_may_be_close_cooperator``). The merge is recorded first
  (``bfq_setup_merge``: ``new_bfqq``) and done at the process's next request or bio
  merge (``bfq_merge_bfqqs``): the process's context then points at the shared
  queue, which inherits I/O-boundness and weight raising; the state of both is
  saved in their contexts. A merged (``coop``) queue found seeky when it expires
  is marked for splitting; each process then gets its own queue back at its next
  request (``bfq_split_bfqq``) with its saved state (``bfq_bfqq_resume_state``).
* **Stable merge** (5.15+, ``bfq_do_or_sched_stable_merge``): a sync queue created
  within ``bfq_burst_interval`` = 180 ms of the previous one of the same class and
  level is merged with it at once on a non-rotational queueing device; elsewhere the
  merge is scheduled and done at a request arriving 600 ms
  (``bfq_late_stable_merging``) after both creation and last split, unless idling
  boosts the queue's throughput (``bfq_setup_stable_merge``).

The position tree (``rq_pos_tree``: queues by the sector of their next request) is a
sorted list here; the kernel's ``bfqq_find_close`` checks the rbtree node where its
search ends, then that node's neighbour on the other side of the sector: here the
nearer of the sector's two neighbours is checked first (docs/bfq.md).
"""

from __future__ import annotations

import weakref

from bisect import bisect_left

from blksim.block.request import IOPRIO_CLASS_IDLE

from blksim.schedulers.bfq.groups import count_allocated

BFQQ_CLOSE_THR = 8 * 1024
BFQ_LATE_STABLE_MERGING_MS = 600
BFQ_ACTIVATION_STABLE_MERGING_MS = 600


class Merging:
    """The queue-merging state of one BFQ instance: the position tree and the last
    sync queue created (``last_bfqq_created``)."""

    __slots__ = ("bfqd", "pos_keys", "pos_queues", "last_bfqq_created")

    def __init__(self, bfqd) -> None:
        # a proxy: the elevator holds this object, a reference back would be a cycle
        # that only the cycle collector frees (tests/test_engine_refcycles.py)
        self.bfqd = weakref.proxy(bfqd)
        self.pos_keys: list[int] = []
        self.pos_queues: list = []
        self.last_bfqq_created = None

    # --- the position tree -------------------------------------------------------------
    def too_late_for_merging(self, bfqq) -> bool:
        """``bfq_too_late_for_merging``."""
        bfqd = self.bfqd
        return (bfqq.service_from_backlogged > 0
                and bfqq.first_io_time + bfqd.hz // 10 < bfqd.jiffies)

    def pos_tree_remove(self, bfqq) -> None:
        """Take the queue out of the position tree."""
        if bfqq.pos_key is None:
            return
        i = bisect_left(self.pos_keys, bfqq.pos_key)
        while self.pos_queues[i] is not bfqq:
            i += 1
        del self.pos_keys[i]
        del self.pos_queues[i]
        bfqq.pos_key = None

    def pos_tree_add_move(self, bfqq) -> None:
        """``bfq_pos_tree_add_move``: (re)file the queue under its next request's sector
        (not if too late for merging, IDLE class, empty, or the sector is taken)."""
        self.pos_tree_remove(bfqq)
        if (self.too_late_for_merging(bfqq) or bfqq.ioprio_class == IOPRIO_CLASS_IDLE
                or bfqq.next_rq is None):
            return
        key = bfqq.next_rq.sector
        i = bisect_left(self.pos_keys, key)
        if i < len(self.pos_keys) and self.pos_keys[i] == key:
            return
        self.pos_keys.insert(i, key)
        self.pos_queues.insert(i, bfqq)
        bfqq.pos_key = key

    def find_close(self, bfqq, sector: int):
        """``bfqq_find_close`` / ``bfq_find_close_cooperator``: a queue whose next request
        is within ``BFQQ_CLOSE_THR`` of ``sector``, not ``bfqq`` itself."""
        keys = self.pos_keys
        if not keys:
            return None
        i = bisect_left(keys, sector)
        if i < len(keys) and keys[i] == sector:
            found = self.pos_queues[i]
            return None if found is bfqq else found
        near = [j for j in (i - 1, i) if 0 <= j < len(keys)]
        near.sort(key=lambda j: abs(keys[j] - sector))
        for j in near:
            if abs(keys[j] - sector) <= BFQQ_CLOSE_THR:
                found = self.pos_queues[j]
                return None if found is bfqq else found
        return None

    # --- EQM ----------------------------------------------------------------------------
    def may_be_close_cooperator(self, bfqq, new_bfqq) -> bool:
        """``bfq_may_be_close_cooperator``."""
        if self.too_late_for_merging(new_bfqq):
            return False
        if (bfqq.ioprio_class == IOPRIO_CLASS_IDLE or new_bfqq.ioprio_class == IOPRIO_CLASS_IDLE
                or bfqq.ioprio_class != new_bfqq.ioprio_class):
            return False
        if bfqq.seeky or new_bfqq.seeky:
            return False
        return bfqq.is_sync and new_bfqq.is_sync

    @staticmethod
    def setup_merge(bfqq, new_bfqq):
        """``bfq_setup_merge``: schedule the merge of ``bfqq`` into the end of
        ``new_bfqq``'s merge chain; ``new_bfqq`` takes ``bfqq``'s process references."""
        if not new_bfqq.ref:
            return None
        while new_bfqq.new_bfqq is not None:
            if new_bfqq.new_bfqq is bfqq:
                return None
            new_bfqq = new_bfqq.new_bfqq
        if bfqq.ref == 0 or new_bfqq.ref == 0:
            return None
        bfqq.new_bfqq = new_bfqq
        new_bfqq.ref += bfqq.ref
        return new_bfqq

    def setup_cooperator(self, bfqq, io, request: bool, bic):
        """``bfq_setup_cooperator``: the queue ``bfqq`` should be merged with, if any, for
        new I/O ``io`` (a request or a bio)."""
        bfqd = self.bfqd
        if bfqq.new_bfqq is not None:
            return bfqq.new_bfqq
        if not bfqd.nonrot_with_queueing:
            if (bfqd.variant["stable_merge"] and bfqq.is_sync and bic is not None
                    and bic.stable_merge_bfqq is not None and not bfqq.just_created
                    and bfqq.split_time + bfqd.msecs_to_jiffies(BFQ_LATE_STABLE_MERGING_MS)
                    < bfqd.jiffies
                    and bfqq.creation_time + bfqd.msecs_to_jiffies(BFQ_LATE_STABLE_MERGING_MS)
                    < bfqd.jiffies):
                return self._setup_stable_merge(bfqq, bic)
        if bfqd.nonrot_with_queueing:
            return None
        if self.too_late_for_merging(bfqq) or io is None:
            return None
        if bfqd.tot_busy_queues == 1:
            return None
        in_serv = bfqd.in_service_queue
        if (in_serv is not None and in_serv is not bfqq
                and abs(io.sector - bfqd.in_serv_last_pos) <= BFQQ_CLOSE_THR
                and bfqq.parent is in_serv.parent           # the same group
                and self.may_be_close_cooperator(bfqq, in_serv)):
            new_bfqq = self.setup_merge(bfqq, in_serv)
            if new_bfqq is not None:
                return new_bfqq
        new_bfqq = self.find_close(bfqq, io.sector)
        # the kernel keeps a position tree per group (bfqg->rq_pos_tree): a queue of
        # another group is not a candidate (docs/cgroups.md names the simplification)
        if (new_bfqq is not None and new_bfqq.parent is bfqq.parent
                and self.may_be_close_cooperator(bfqq, new_bfqq)):
            return self.setup_merge(bfqq, new_bfqq)
        return None

    def redirect_request(self, rq, bfqq, new_bfqq):
        """``__bfq_insert_request``'s merge: the request goes to ``new_bfqq`` (the merge
        is done if the process's context still points at ``bfqq``)."""
        count_allocated(new_bfqq, 1)
        count_allocated(bfqq, -1)
        bic = self.bfqd.bics.get(rq.pid)
        if bic is not None and bic.bfqq[1] is bfqq:
            self.merge_bfqqs(bic, bfqq, new_bfqq)
        bfqq.just_created = False
        rq.sched = new_bfqq
        return new_bfqq

    def merge_bfqqs(self, bic, bfqq, new_bfqq) -> None:
        """``bfq_merge_bfqqs``: the process's context now points at ``new_bfqq``, which
        inherits I/O-boundness, a waker and weight raising."""
        bfqd = self.bfqd
        self.save_state(bfqq)
        self.save_state(new_bfqq)
        if bfqq.io_bound:
            new_bfqq.io_bound = True
        bfqq.io_bound = False
        if (bfqq.waker_bfqq is not None and new_bfqq.waker_bfqq is None
                and bfqq.waker_bfqq is not new_bfqq):
            new_bfqq.waker_bfqq = bfqq.waker_bfqq
            new_bfqq.tentative_waker_bfqq = None
            new_bfqq.waker_bfqq.woken_list.insert(0, new_bfqq)
        if new_bfqq.wr_coeff == 1 and bfqq.wr_coeff > 1:
            new_bfqq.wr_coeff = bfqq.wr_coeff
            new_bfqq.wr_cur_max_time = bfqq.wr_cur_max_time
            new_bfqq.last_wr_start_finish = bfqq.last_wr_start_finish
            new_bfqq.wr_start_at_switch_to_srt = bfqq.wr_start_at_switch_to_srt
            if new_bfqq.busy:
                bfqd.wr_busy_queues += 1
            new_bfqq.prio_changed = True
        if bfqq.wr_coeff > 1:
            bfqq.wr_coeff = 1
            bfqq.prio_changed = True
            if bfqq.busy:
                bfqd.wr_busy_queues -= 1
        bic.bfqq[1] = new_bfqq
        if bic.stable_merge_bfqq is new_bfqq:
            bic.stable_merge_bfqq = None
        new_bfqq.coop = True
        new_bfqq.bic = None
        new_bfqq.pid = -1
        bfqq.bic = None
        self.reassign_last_created(bfqq, new_bfqq)
        bfqd.release_process_ref(bfqq)

    def put_cooperator(self, bfqq) -> None:
        """``bfq_put_cooperator``: drop the references a scheduled merge took."""
        q = bfqq.new_bfqq
        while q is not None:
            q.ref -= 1
            q = q.new_bfqq

    def reassign_last_created(self, bfqq, new_bfqq) -> None:
        """``bfq_reassign_last_bfqq``: the last queue created in the queue's group (the
        root group's kept here)."""
        if bfqq.parent is not None and bfqq.parent.last_bfqq_created is bfqq:
            bfqq.parent.last_bfqq_created = new_bfqq
        elif self.last_bfqq_created is bfqq:
            self.last_bfqq_created = new_bfqq

    # --- stable merge (5.15+) ---------------------------------------------------------------
    def do_or_sched_stable_merge(self, bfqq, bic):
        """``bfq_do_or_sched_stable_merge``: a sync queue created right after the previous
        one (same class and level) is merged with it now on a queueing SSD, else later."""
        bfqd = self.bfqd
        # the last sync queue created in the queue's group (entity.parent's, 5.15+)
        holder = bfqq.parent if bfqq.parent is not None else self
        last = holder.last_bfqq_created
        if (last is None
                or last.creation_time + bfqd.msecs_to_jiffies(BFQ_ACTIVATION_STABLE_MERGING_MS)
                < bfqq.creation_time
                or bfqq.ioprio != last.ioprio or bfqq.ioprio_class != last.ioprio_class):
            holder.last_bfqq_created = bfqq
        elif last.creation_time + bfqd.bfq_burst_interval >= bfqq.creation_time:
            if bfqd.nonrot_with_queueing:
                new_bfqq = self.setup_merge(bfqq, last)
                if new_bfqq is not None:
                    if new_bfqq.bic is not None:
                        new_bfqq.bic.stably_merged = True
                    bic.stably_merged = True
                    bfqq.bic = bic
                    bic.bfqq[1] = bfqq
                    self.merge_bfqqs(bic, bfqq, new_bfqq)
                    return new_bfqq
            else:
                last.stable_ref += 1
                bic.stable_merge_bfqq = last
        return bfqq

    def _setup_stable_merge(self, bfqq, bic):
        """``bfq_setup_stable_merge``: not for a queue that idling serves well."""
        from blksim.schedulers.bfq import idling
        stable = bic.stable_merge_bfqq
        bic.stable_merge_bfqq = None
        stable.stable_ref -= 1
        if (idling.idling_boosts_thr_without_issues(self.bfqd, bfqq)
                or min(bfqq.ref, stable.ref) == 0):
            return None
        new_bfqq = self.setup_merge(bfqq, stable)
        if new_bfqq is not None:
            bic.stably_merged = True
            if new_bfqq.bic is not None:
                new_bfqq.bic.stably_merged = True
        return new_bfqq

    # --- split ----------------------------------------------------------------------------
    def split(self, bic, bfqq):
        """``bfq_init_rq``'s split of a seeky merged queue: the process gets its own queue
        (the same one if it is the last process using it) with its saved state."""
        bfqd = self.bfqd
        if bfqq.in_large_burst:
            bic.saved = dict(bic.saved or {}, in_large_burst=True)
        if bfqq.ref == 1:                                      # bfq_split_bfqq
            bfqq.pid = bic.pid
            bfqq.coop = False
            bfqq.split_coop = False
            already_existing = True
        else:
            bic.bfqq[1] = None
            self.put_cooperator(bfqq)
            bfqd.release_process_ref(bfqq)
            old = bfqq
            bfqq = bfqd.new_sync_queue(bic)                     # respawn: no stable merge
            bic.bfqq[1] = bfqq
            saved = bic.saved or {}
            if saved.get("in_large_burst") or (saved.get("was_in_burst_list")
                                               and bfqd.large_burst):
                bfqq.in_large_burst = True
            bfqq.split_time = bfqd.jiffies
            already_existing = False
            bfqq.waker_bfqq = old.waker_bfqq
            bfqq.tentative_waker_bfqq = None
            if bfqq.waker_bfqq is not None:
                bfqq.waker_bfqq.woken_list.insert(0, bfqq)
        if bfqq.ref == 1:
            bfqq.bic = bic
            self.resume_state(bfqq, bic, already_existing)
        return bfqq

    def save_state(self, bfqq) -> None:
        """``bfq_bfqq_save_state``: what a process's queue knew, kept in its context."""
        bic = bfqq.bic
        if bic is None:
            return
        bfqd = self.bfqd
        s = {"last_serv_time_ns": bfqq.last_serv_time_ns,
             "inject_limit": bfqq.inject_limit,
             "decrease_time_jif": bfqq.decrease_time_jif,
             "weight": bfqq.orig_weight,
             "ttime": (bfqq.ttime_samples, bfqq.ttime_total, bfqq.ttime_mean,
                       bfqq.last_end_request),
             "has_short_ttime": bfqq.has_short_ttime, "io_bound": bfqq.io_bound,
             "io_start_time": bfqq.io_start_time, "tot_idle_time": bfqq.tot_idle_time,
             "in_large_burst": bfqq.in_large_burst, "was_in_burst_list": bfqq.in_burst_list}
        if bfqq.just_created and not bfqq.in_large_burst and bfqd.low_latency:
            s.update(wr_coeff=bfqd.bfq_wr_coeff, wr_start_at_switch_to_srt=-(1 << 62),
                     wr_cur_max_time=bfqd.wr_duration(),
                     last_wr_start_finish=bfqd.jiffies, service_from_wr=0)
        else:
            s.update(wr_coeff=bfqq.wr_coeff,
                     wr_start_at_switch_to_srt=bfqq.wr_start_at_switch_to_srt,
                     service_from_wr=bfqq.service_from_wr,
                     last_wr_start_finish=bfqq.last_wr_start_finish,
                     wr_cur_max_time=bfqq.wr_cur_max_time)
        bic.saved = s

    def resume_state(self, bfqq, bic, already_existing: bool) -> None:
        """``bfq_bfqq_resume_state``: a split process's queue takes back its saved state
        (its raising only if not over and not in a large burst)."""
        from blksim.schedulers.bfq import weight_raising as wr
        s = bic.saved
        if not s:
            return
        bfqd = self.bfqd
        busy = already_existing and bfqq.busy
        old_wr_coeff = bfqq.wr_coeff
        bfqq.has_short_ttime = s["has_short_ttime"]
        bfqq.io_bound = s["io_bound"]
        bfqq.last_serv_time_ns = s["last_serv_time_ns"]
        bfqq.inject_limit = s["inject_limit"]
        bfqq.decrease_time_jif = s["decrease_time_jif"]
        bfqq.new_weight = s["weight"]
        (bfqq.ttime_samples, bfqq.ttime_total, bfqq.ttime_mean,
         bfqq.last_end_request) = s["ttime"]
        bfqq.io_start_time = s["io_start_time"]
        bfqq.tot_idle_time = s["tot_idle_time"]
        if bfqd.low_latency:
            bfqq.wr_coeff = s["wr_coeff"]
        else:
            old_wr_coeff = bfqq.wr_coeff
        bfqq.service_from_wr = s.get("service_from_wr", 0)
        bfqq.wr_start_at_switch_to_srt = s["wr_start_at_switch_to_srt"]
        bfqq.last_wr_start_finish = s["last_wr_start_finish"]
        bfqq.wr_cur_max_time = s["wr_cur_max_time"]
        if bfqq.wr_coeff > 1 and (bfqq.in_large_burst or bfqq.last_wr_start_finish
                                  + bfqq.wr_cur_max_time < bfqd.jiffies):
            if (bfqq.wr_cur_max_time == bfqd.bfq_wr_rt_max_time and not bfqq.in_large_burst
                    and bfqq.wr_start_at_switch_to_srt + wr.wr_duration(bfqd) >= bfqd.jiffies):
                wr.switch_back_to_interactive_wr(bfqd, bfqq)
            else:
                bfqq.wr_coeff = 1
        bfqq.prio_changed = True
        if not busy:
            return
        if old_wr_coeff == 1 and bfqq.wr_coeff > 1:
            bfqd.wr_busy_queues += 1
        elif old_wr_coeff > 1 and bfqq.wr_coeff == 1:
            bfqd.wr_busy_queues -= 1
