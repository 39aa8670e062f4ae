"""BFQ's insertion side (block/bfq-iosched.c, Linux 5.4 to 6.6): process contexts and
their queues (``bfq_init_rq``, ``bfq_get_queue``, ``bfq_check_ioprio_change``,
``bfq_exit_icq``), a queue becoming busy (``bfq_add_bfqq_busy``,
``bfq_bfqq_handle_idle_busy_switch``: budget, weight raising, preemption), a request
entering its queue (``__bfq_insert_request``, ``bfq_add_request``, ``bfq_rq_enqueued``)
or leaving it (``bfq_remove_request``, ``bfq_find_next_rq``), and the merge hooks
(``bfq_request_merge``, ``bfq_allow_bio_merge``, ``bfq_request_merged``,
``bfq_requests_merged``). A mixin of `blksim.schedulers.bfq.BfqElevator`, whose
state it reads and writes.
"""

from __future__ import annotations

from blksim.schedulers.bfq import idling
from blksim.schedulers.bfq import weight_raising as wr
from blksim.schedulers.bfq import budget as bud
from blksim.schedulers.bfq.budget import BUDGET_TIMEOUT, PREEMPTED
from blksim.schedulers.bfq.groups import BfqGroup, count_allocated, parent_weight
from blksim.schedulers.bfq.queue import (BfqQueue, IoContext, async_key, choose_req,
                                         class_and_level, ioprio_to_weight)


class Insertion:
    """The insertion and merge hooks of `BfqElevator` and the queue bookkeeping they
    share with dispatch."""

    # --- queues and contexts ----------------------------------------------------------------
    def _bic(self, pid: int, ioprio: int) -> IoContext:
        """The process's context (``ioc_find_get_icq``), made on its first request."""
        bic = self.bics.get(pid)
        if bic is None:
            bic = self.bics[pid] = IoContext(pid, ioprio)
        elif bic.ioprio != ioprio:
            self._ioprio_changed(bic, ioprio)
        return bic

    def _ioprio_changed(self, bic: IoContext, ioprio: int) -> None:
        """``bfq_check_ioprio_change``: a new async queue; the sync queue takes the new
        weight and class at its next activation."""
        bic.ioprio = ioprio
        old = bic.bfqq[0]
        if old is not None:
            bic.bfqq[0] = self._get_queue(bic, False)
            self.release_process_ref(old)
        sync_q = bic.bfqq[1]
        if sync_q is not None:
            cls, level = class_and_level(ioprio)
            sync_q.new_ioprio_class = cls
            sync_q.ioprio = level
            sync_q.new_weight = ioprio_to_weight(level)
            sync_q.prio_changed = True

    def _get_queue(self, bic: IoContext, is_sync: bool) -> BfqQueue:
        """``bfq_get_queue``: the shared async queue of the process's priority in its
        group, or a new sync queue in its group (which may be stably merged, from
        5.15)."""
        group = bic.bfqg or self.root_group
        if not is_sync:
            key = async_key(bic.ioprio)
            bfqq = group.async_queues.get(("async",) + key if group is self.root_group
                                          else key)
            if bfqq is None:
                if group is self.root_group:
                    bfqq = self._new_queue(bic, False, ("async",) + key)
                    group.async_queues[("async",) + key] = bfqq
                else:
                    bfqq = self._new_queue(bic, False, ("async",) + key + (group.cgroup.path,))
                    group.async_queues[key] = bfqq
                bfqq.ref += 1                       # the group's reference
            bfqq.ref += 1
            return bfqq
        bfqq = self._new_queue(bic, True, (bic.pid, True))
        bfqq.ref += 1
        if self.variant["stable_merge"]:
            bfqq = self.merging.do_or_sched_stable_merge(bfqq, bic)
        return bfqq

    def new_sync_queue(self, bic: IoContext) -> BfqQueue:
        """A new sync queue for a process whose merged queue was split (``bfq_get_queue``
        with ``respawn``: no stable merge)."""
        bfqq = self._new_queue(bic, True, (bic.pid, True))
        bfqq.ref += 1
        return bfqq

    def wr_duration(self) -> int:
        """``bfq_wr_duration``."""
        return wr.wr_duration(self)

    def _new_queue(self, bic: IoContext, is_sync: bool, key) -> BfqQueue:
        """``bfq_init_bfqq`` and ``bfq_init_entity``: the queue is in the process's
        group."""
        bfqq = BfqQueue(bic.pid, is_sync, bic.ioprio, self.now_ns, self.jiffies,
                        bud.max_budget(self))
        group = bic.bfqg or self.root_group
        bfqq.parent = group if isinstance(group, BfqGroup) else None
        bfqq.sched_data = group.my_sched_data
        self.queues[key] = bfqq
        return bfqq

    def _bic_update_cgroup(self, bic: IoContext, rq) -> None:
        """``bfq_bic_update_cgroup``: when the request's cgroup is not the one last seen
        for the process, ``__bfq_bic_change_cgroup``: its async queue of another group
        is dropped, its sync queue moved to the new group."""
        cgroup = rq.bios[0].cgroup if rq.bios else None
        if cgroup is bic.blkcg:
            return
        bic.blkcg = cgroup
        group = self.groups.group_of(cgroup, self.jiffies)
        bic.bfqg = group
        async_q = bic.bfqq[0]
        if async_q is not None and async_q.sched_data is not group.my_sched_data:
            bic.bfqq[0] = None
            self.release_process_ref(async_q)
        sync_q = bic.bfqq[1]
        if sync_q is not None and sync_q.sched_data is not group.my_sched_data:
            self._bfqq_move(sync_q, group)

    def _bfqq_move(self, bfqq, group) -> None:
        """``bfq_bfqq_move``: expire the queue if in service, take it off its group's
        trees (not into the idle tree), put it in ``group`` and activate it there if
        busy. 6.2+ move its pending-requests count along."""
        pending = bfqq.in_groups_with_pending_reqs
        if pending:
            self.groups.queue_done(bfqq)
        if bfqq is self.in_service_queue:
            self._expire(bfqq, False, PREEMPTED)
        if bfqq.busy:
            self.wf2q.deactivate(bfqq, False, False)
        elif bfqq.on_st_or_in_serv:
            self.wf2q.put_idle_entity(self.wf2q.tree_of(bfqq), bfqq)
        bfqq.parent = group if isinstance(group, BfqGroup) else None
        bfqq.sched_data = group.my_sched_data
        if pending:
            self.groups.queue_pending(bfqq)
        if bfqq.busy:
            if not self.nonrot_with_queueing:
                self.merging.pos_tree_add_move(bfqq)
            self.wf2q.activate_requeue(bfqq, bfqq.non_blocking_wait_rq, False)
            bfqq.non_blocking_wait_rq = False
        if self.in_service_queue is None and not self.tot_rq_in_driver:
            self._schedule_dispatch()

    def _init_rq(self, rq) -> BfqQueue:
        """``bfq_init_rq``: the queue of a request being inserted."""
        if rq.sched is not None:
            return rq.sched
        bic = self._bic(rq.pid, rq.ioprio)
        self._bic_update_cgroup(bic, rq)
        is_sync = bool(rq.sync)
        bfqq = bic.bfqq[is_sync]
        if bfqq is None:
            bfqq = bic.bfqq[is_sync] = self._get_queue(bic, is_sync)
        elif is_sync and bfqq.coop and bfqq.split_coop and not bic.stably_merged:
            bfqq = self.merging.split(bic, bfqq)
        count_allocated(bfqq, 1)
        bic.requests += 1
        rq.sched = bfqq
        if bfqq.ref == 1:
            bfqq.bic = bic
        if bfqq.just_created and (self.burst_size > 0 or self.tot_busy_queues == 0):
            wr.handle_burst(self, bfqq)
        return bfqq

    def release_process_ref(self, bfqq) -> None:
        """``bfq_release_process_ref``."""
        if bfqq.busy and not bfqq.sort_list and bfqq is not self.in_service_queue:
            self._del_busy(bfqq, False)
        self.merging.reassign_last_created(bfqq, None)
        bfqq.ref -= 1

    def process_exited(self, pid: int, now: float) -> None:
        """``bfq_exit_icq``: the process's queues lose its reference; its in-service
        queue expires."""
        self._tick(now)
        bic = self.bics.pop(pid, None)
        if bic is None:
            return
        for is_sync in (True, False):
            bfqq = bic.bfqq[is_sync]
            if bfqq is None:
                continue
            bic.bfqq[is_sync] = None
            if bfqq.bic is bic:
                bfqq.bic = None
            if bfqq is self.in_service_queue:
                self._expire_now(bfqq, BUDGET_TIMEOUT)
                self._schedule_dispatch()
            self.merging.put_cooperator(bfqq)
            self.release_process_ref(bfqq)

    # --- busy / idle ----------------------------------------------------------------------
    def _add_busy(self, bfqq) -> None:
        """``bfq_add_bfqq_busy``."""
        self.wf2q.activate_requeue(bfqq, bfqq.non_blocking_wait_rq, False)
        bfqq.non_blocking_wait_rq = False
        bfqq.busy = True
        self.busy_queues[bfqq.ioprio_class - 1] += 1
        if not bfqq.dispatched:
            self.groups.queue_pending(bfqq)
            if bfqq.wr_coeff == 1:
                self.weights_tree_add(bfqq)
        if bfqq.wr_coeff > 1:
            self.wr_busy_queues += 1
        waker = bfqq.waker_bfqq
        if waker is not None and bfqq in waker.woken_list:
            waker.woken_list.remove(bfqq)
            waker.woken_list.insert(0, bfqq)

    def _del_busy(self, bfqq, expiration: bool) -> None:
        """``bfq_del_bfqq_busy``."""
        bfqq.busy = False
        self.busy_queues[bfqq.ioprio_class - 1] -= 1
        if bfqq.wr_coeff > 1:
            self.wr_busy_queues -= 1
        self.wf2q.deactivate(bfqq, True, expiration)
        if not bfqq.dispatched:
            self.groups.queue_done(bfqq)
            self.weights_tree_remove(bfqq)

    def _schedule_dispatch(self) -> None:
        """``bfq_schedule_dispatch``: have the hardware queues run."""
        if self.nr_queued:
            self.kick_queue = True

    # --- insertion ----------------------------------------------------------------------------
    def insert_requests(self, rqs, at_head: bool, now: float) -> None:
        """``bfq_insert_requests``: a requeued request goes to the head of the dispatch
        list; others into their queue."""
        self._tick(now)
        for rq in rqs:
            bfqq = self._init_rq(rq)
            if at_head:
                self.dispatch_list.insert(0, rq)
            else:
                self._insert_request(rq, bfqq)

    def _insert_request(self, rq, bfqq) -> None:
        """``__bfq_insert_request``."""
        new_bfqq = self.merging.setup_cooperator(bfqq, rq, True, self.bics.get(rq.pid))
        if new_bfqq is not None:
            bfqq = self.merging.redirect_request(rq, bfqq, new_bfqq)
        idling.update_io_thinktime(self, bfqq)
        idling.update_has_short_ttime(self, bfqq)
        idling.update_io_seektime(self, bfqq, rq)
        self._add_request(rq, bfqq)
        rq.fifo_time = self.now + self.bfq_fifo_expire[bool(rq.sync)] / 1e9
        bfqq.fifo.append(rq)
        self._rq_enqueued(bfqq, rq)

    def _add_request(self, rq, bfqq) -> None:
        """``bfq_add_request``."""
        old_wr_coeff = bfqq.wr_coeff
        interactive = False
        jiffies = self.jiffies
        sync = bool(rq.sync)
        bfqq.queued[sync] += 1
        self.nr_queued += 1
        bic = self.bics.get(rq.pid)
        waker_rule = self.variant["waker"]
        if waker_rule is None:          # 5.4, 5.10: when the queue was empty
            first_of_burst = bfqq.is_sync and not bfqq.sort_list
        else:                           # 5.15+: when it is the process's only request
            first_of_burst = bfqq.is_sync and bic is not None and bic.requests <= 1
        if first_of_burst:
            if waker_rule is not None:
                idling.check_waker(self, bfqq)
            if bfqq.decrease_time_jif + self.msecs_to_jiffies(1000) <= jiffies:
                idling.reset_inject_limit(self, bfqq)
            if (bfqq is self.in_service_queue
                    and (self.tot_rq_in_driver == 0
                         or (bfqq.last_serv_time_ns > 0 and self.rqs_injected
                             and self.tot_rq_in_driver > 0))
                    and bfqq.decrease_time_jif + self.msecs_to_jiffies(10) <= jiffies):
                self.last_empty_occupied_ns = self.now_ns
                self.wait_dispatch = True
                if self.tot_rq_in_driver == 0:
                    self.rqs_injected = False
        if bfqq.is_sync and self.variant["io_bound_by_intensity"]:
            idling.update_io_intensity(self, bfqq)
        bfqq.sort_list.add(rq)
        prev = bfqq.next_rq
        bfqq.next_rq = choose_req(prev, rq, self.last_position, self.bfq_back_max * 2,
                                  self.bfq_back_penalty)
        if not self.nonrot_with_queueing and prev is not bfqq.next_rq:
            self.merging.pos_tree_add_move(bfqq)
        if not bfqq.busy:
            interactive = self._idle_busy_switch(bfqq, old_wr_coeff, rq, bic)
        else:
            if (self.low_latency and old_wr_coeff == 1 and not rq.sync
                    and bfqq.last_wr_start_finish + self.bfq_wr_min_inter_arr_async < jiffies):
                bfqq.wr_coeff = self.bfq_wr_coeff
                bfqq.wr_cur_max_time = wr.wr_duration(self)
                self.wr_busy_queues += 1
                bfqq.prio_changed = True
            if prev is not bfqq.next_rq:
                self._updated_next_req(bfqq)
        if self.low_latency and (old_wr_coeff == 1 or bfqq.wr_coeff == 1 or interactive):
            bfqq.last_wr_start_finish = jiffies

    def _idle_busy_switch(self, bfqq, old_wr_coeff: int, rq, bic) -> bool:
        """``bfq_bfqq_handle_idle_busy_switch``: a queue becomes busy: its budget, its
        weight raising, and whether it preempts the queue in service. Returns whether
        it counts as interactive."""
        jiffies = self.jiffies
        idle_for_long_time = (bfqq.dispatched == 0
                              and bfqq.budget_timeout + self.bfq_wr_min_idle_time < jiffies)
        arrived_in_time = self.now_ns <= bfqq.last_end_request + self.bfq_slice_idle * 3
        non_merged_or_stably = bfqq.bic is not None or (
            self.variant["stable_merge"] and bic is not None and bic.stably_merged)
        in_burst = bfqq.in_large_burst
        default_weight = bfqq.new_weight == 40 or not self.variant["default_weight_raising"]
        soft_rt = (self.bfq_wr_max_softrt_rate > 0 and not bfqq.totally_seeky
                   and not in_burst and bfqq.soft_rt_next_start < jiffies
                   and bfqq.dispatched == 0 and default_weight)
        interactive = not in_burst and idle_for_long_time and default_weight
        wr_or_deserves_wr = self.low_latency and (
            bfqq.wr_coeff > 1
            or (bfqq.is_sync and non_merged_or_stably and (interactive or soft_rt)))
        wants_to_preempt = self._update_budg_for_activation(bfqq, arrived_in_time)
        if (not bfqq.just_created and idle_for_long_time
                and bfqq.budget_timeout + self.msecs_to_jiffies(10000) < jiffies):
            if bfqq in self.burst_list:
                self.burst_list.remove(bfqq)
            bfqq.in_burst_list = False
            bfqq.in_large_burst = False
        bfqq.just_created = False
        if not self.variant["io_bound_by_intensity"]:
            idling.update_io_bound_on_activation(self, bfqq, arrived_in_time)
        if self.low_latency:
            if bfqq.split_time > jiffies:
                bfqq.split_time = jiffies - self.bfq_wr_min_idle_time - 1
            if bfqq.split_time + self.bfq_wr_min_idle_time < jiffies:
                wr.update_wr_on_rq_arrival(self, bfqq, old_wr_coeff, wr_or_deserves_wr,
                                           interactive, in_burst, soft_rt)
                if old_wr_coeff != bfqq.wr_coeff:
                    bfqq.prio_changed = True
        bfqq.last_idle_bklogged = jiffies
        bfqq.service_from_backlogged = 0
        bfqq.softrt_update = False
        self._add_busy(bfqq)
        in_serv = self.in_service_queue
        if (in_serv is not None
                and ((wants_to_preempt and bfqq.wr_coeff >= in_serv.wr_coeff)
                     or _higher_class_or_weight(bfqq, in_serv)
                     or (self.variant["preempt_unless_idling"]
                         and not idling.better_to_idle(self, in_serv)))
                and self.wf2q.next_may_preempt()):
            self._expire(in_serv, False, PREEMPTED)
        return interactive

    def _update_budg_for_activation(self, bfqq, arrived_in_time: bool) -> bool:
        """``bfq_bfqq_update_budg_for_activation``: a queue that emptied while in service
        and comes back in time keeps what was left of its budget (and its back-shifted
        timestamps: it may preempt); otherwise a fresh budget."""
        if bfqq.non_blocking_wait_rq and arrived_in_time and bfqq.budget_left > 0:
            bfqq.budget = min(bfqq.budget_left, bfqq.max_budget)
            bfqq.service = 0
            return True
        bfqq.service = 0
        bfqq.budget = max(bfqq.max_budget, self.serv_to_charge(bfqq.next_rq, bfqq))
        bfqq.non_blocking_wait_rq = False
        return False

    def _updated_next_req(self, bfqq) -> None:
        """``bfq_updated_next_req``: a waiting queue's budget must cover its next request."""
        next_rq = bfqq.next_rq
        if next_rq is None or bfqq is self.in_service_queue:
            return
        new_budget = max(bfqq.max_budget, self.serv_to_charge(next_rq, bfqq), bfqq.service)
        if bfqq.budget != new_budget:
            bfqq.budget = new_budget
            self.wf2q.activate_requeue(bfqq, False, False)

    def _rq_enqueued(self, bfqq, rq) -> None:
        """``bfq_rq_enqueued``: a request for the idled in-service queue ends the idling
        (unless it is small and more may come soon), or its budget timeout."""
        bfqq.last_request_pos = rq.sector + rq.nr_sectors
        if bfqq is self.in_service_queue and bfqq.wait_request:
            small_req = bfqq.queued[bool(rq.sync)] == 1 and rq.nr_sectors < 32
            budget_timeout = bfqq.budget_timeout <= self.jiffies
            if (small_req and idling.idling_boosts_thr_without_issues(self, bfqq)
                    and not budget_timeout):
                return
            if self.msg is not None:
                self._hold_end("hit")
            self._stop_idling(bfqq)
            if budget_timeout:
                self._expire(bfqq, False, BUDGET_TIMEOUT)

    def _stop_idling(self, bfqq) -> None:
        bfqq.wait_request = False
        if self._wakeup_at is not None:
            self.wakeup_at = None

    def _remove_request(self, rq) -> None:
        """``bfq_remove_request``: ``rq`` leaves its queue (dispatched or merged away)."""
        bfqq = rq.sched
        if bfqq.next_rq is rq:
            bfqq.next_rq = self._find_next_rq(bfqq, rq)
            self._updated_next_req(bfqq)
        if rq in bfqq.fifo:
            bfqq.fifo.remove(rq)
        bfqq.queued[bool(rq.sync)] -= 1
        self.nr_queued -= 1
        bfqq.sort_list.remove_rq(rq)
        if not bfqq.sort_list:
            bfqq.next_rq = None
            if bfqq.busy and bfqq is not self.in_service_queue:
                self._del_busy(bfqq, False)
                bfqq.budget = bfqq.service = 0
            self.merging.pos_tree_remove(bfqq)
        elif not self.nonrot_with_queueing:
            self.merging.pos_tree_add_move(bfqq)

    def _find_next_rq(self, bfqq, last):
        """``bfq_find_next_rq``: the expired FIFO head (once per slot), else the better of
        ``last``'s neighbours in sector order (the successor wrapping to the first)."""
        nxt = self._check_fifo(bfqq, last)
        if nxt is not None:
            return nxt
        tree = bfqq.sort_list
        prev = tree.prev(last)
        nxt = tree.next(last)
        if nxt is None:
            first = tree.first()
            nxt = first if first is not last else None
        return choose_req(nxt, prev, last.sector, self.bfq_back_max * 2,
                          self.bfq_back_penalty)

    def _check_fifo(self, bfqq, last):
        """``bfq_check_fifo``."""
        if bfqq.fifo_expire:
            return None
        bfqq.fifo_expire = True
        rq = bfqq.fifo[0]
        if rq is last or self.now < rq.fifo_time:
            return None
        return rq

    # --- merging hooks ------------------------------------------------------------------
    def _bio_bfqq(self, bio):
        """``bfq_bio_merge``'s ``bio_bfqq``: the queue a bio of this process would join."""
        bic = self.bics.get(bio.pid)
        if bic is None:
            return None, None
        return bic.bfqq[bool(bio.sync)], bic

    def request_merge(self, bio, now: float):
        """``bfq_request_merge``: a request of the bio's queue starting where it ends."""
        bfqq, _ = self._bio_bfqq(bio)
        if bfqq is None:
            return None
        return bfqq.sort_list.find(bio.sector + bio.nr_sectors)

    def allow_merge(self, rq, bio) -> bool:
        """``bfq_allow_bio_merge``: only into a request of the bio's own queue (after a
        possible cooperator merge), never a sync bio into an async request."""
        if bio.sync and not rq.sync:
            return False
        bfqq, bic = self._bio_bfqq(bio)
        if bfqq is None:
            return False
        new_bfqq = self.merging.setup_cooperator(bfqq, bio, False, bic)
        if new_bfqq is not None:
            self.merging.merge_bfqqs(bic, bfqq, new_bfqq)
            bfqq = new_bfqq
        return bfqq is rq.sched

    def request_merged(self, rq, front: bool, now: float) -> None:
        """``bfq_request_merged``: a front merge moved ``rq`` below its predecessor:
        re-file it and reconsider the queue's next request."""
        bfqq = rq.sched
        if not front or bfqq is None:
            return
        prev_rq = bfqq.sort_list.prev(rq)
        if prev_rq is None or not rq.sector < prev_rq.sector:
            if rq in bfqq.sort_list.rqs:
                bfqq.sort_list.rekey(rq)
            return
        self._tick(now)
        bfqq.sort_list.remove_rq(rq)
        bfqq.sort_list.add(rq)
        prev = bfqq.next_rq
        bfqq.next_rq = choose_req(prev, rq, self.last_position, self.bfq_back_max * 2,
                                  self.bfq_back_penalty)
        if prev is not bfqq.next_rq:
            self._updated_next_req(bfqq)
            if not self.nonrot_with_queueing:
                self.merging.pos_tree_add_move(bfqq)

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``bfq_requests_merged``: ``rq`` takes ``nxt``'s FIFO place if that expires
        first; ``nxt`` leaves its queue."""
        self._tick(now)
        bfqq = rq.sched
        nbfqq = nxt.sched
        if bfqq is not None:
            if (bfqq is nbfqq and rq in bfqq.fifo and nxt in bfqq.fifo
                    and nxt.fifo_time < rq.fifo_time):
                bfqq.fifo.remove(rq)
                bfqq.fifo[bfqq.fifo.index(nxt)] = rq
                bfqq.fifo.append(nxt)       # removed with nxt just below
                rq.fifo_time = nxt.fifo_time
            if bfqq.next_rq is nxt:
                bfqq.next_rq = rq
        if nbfqq is not None and nxt in nbfqq.sort_list.rqs:
            self._remove_request(nxt)

    def former_request(self, rq):
        """``elv_rb_former_request``."""
        return rq.sched.sort_list.prev(rq) if rq.sched is not None else None

    def next_request(self, rq):
        """``elv_rb_latter_request``."""
        return rq.sched.sort_list.next(rq) if rq.sched is not None else None


def _higher_class_or_weight(bfqq, in_serv) -> bool:
    """``bfq_bfqq_higher_class_or_weight``: a higher class, or a larger weight: the
    queues' own in the same group, else their groups' entities' (a queue of the root
    group its own)."""
    if bfqq.ioprio_class < in_serv.ioprio_class:
        return True
    if bfqq.parent is in_serv.parent:
        return bfqq.weight > in_serv.weight
    return parent_weight(bfqq) > parent_weight(in_serv)
