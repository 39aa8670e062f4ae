"""BFQ's service side (block/bfq-iosched.c, Linux 5.4 to 6.6): dispatch
(``__bfq_dispatch_request``, ``bfq_select_queue``, ``bfq_set_in_service_queue``,
``bfq_dispatch_rq_from_bfqq``), expiration (``bfq_bfqq_expire``,
``__bfq_bfqq_expire``), completion (``bfq_finish_requeue_request``,
``bfq_completed_request``) and the idle slice (``bfq_arm_slice_timer``,
``bfq_idle_slice_timer_body``). A mixin of `blksim.schedulers.bfq.BfqElevator`, whose
state it reads and writes.
"""

from __future__ import annotations

from blksim.block.request import IOPRIO_CLASS_IDLE

from blksim.schedulers.bfq import budget as bud
from blksim.schedulers.bfq import idling
from blksim.schedulers.bfq import weight_raising as wr
from blksim.schedulers.bfq.groups import count_allocated
from blksim.schedulers.bfq.budget import (BUDGET_EXHAUSTED, BUDGET_TIMEOUT, NO_MORE_REQUESTS,
                                          PREEMPTED, REASON_NAMES, TOO_IDLE)


class Service:
    """The dispatch, expiration and completion hooks of `BfqElevator`."""

    # --- dispatch -----------------------------------------------------------------------
    def has_work(self, hctx) -> bool:
        """``bfq_has_work``."""
        return bool(self.dispatch_list) or self.nr_queued > 0

    def dispatch_request(self, hctx, now: float):
        """``__bfq_dispatch_request``: the head of the dispatch list, else the next
        request of the queue ``bfq_select_queue`` picks (None while idling)."""
        self._tick(now)
        if self.dispatch_list:
            rq = self.dispatch_list.pop(0)
            bfqq = rq.sched
            if bfqq is not None:
                bfqq.dispatched += 1
                self.tot_rq_in_driver += 1
                self.started.add(rq)
            return rq
        if self.tot_busy_queues == 0:
            return None
        if self.strict_guarantees and self.tot_rq_in_driver > 0:
            return None
        bfqq = self._select_queue()
        if bfqq is None:
            return None
        rq = self._dispatch_rq_from_bfqq(bfqq)
        self.tot_rq_in_driver += 1
        self.started.add(rq)
        return rq

    def _select_queue(self):
        """``bfq_select_queue``: keep the in-service queue while its next request fits
        its budget; expire it for budget timeout, exhausted budget or no more
        requests; while it is idled, serve its async queue, its waker, a queue it
        woke, or an injected queue; else put the next queue in service."""
        bfqq = self.in_service_queue
        if bfqq is not None:
            if self._may_expire_for_budg_timeout(bfqq) and not idling.must_idle(self, bfqq):
                reason = BUDGET_TIMEOUT
            else:
                chosen, reason = self._check_queue(bfqq)
                if reason is None:
                    return chosen
        while True:
            if bfqq is not None:
                self._expire(bfqq, False, reason)
            bfqq = self._set_in_service_queue()
            if bfqq is None:
                return None
            chosen, reason = self._check_queue(bfqq)
            if reason is None:
                return chosen

    def _check_queue(self, bfqq):
        """The ``check_queue`` part of ``bfq_select_queue``: (queue to serve, None), or
        (None, reason) to expire ``bfqq``."""
        next_rq = bfqq.next_rq
        if next_rq is not None:
            if self.serv_to_charge(next_rq, bfqq) > bfqq.budget_left:
                return None, BUDGET_EXHAUSTED
            if bfqq.wait_request:
                if self.msg is not None:     # a small request it waited on for more
                    self._hold_end("hit")
                self._stop_idling(bfqq)
            return bfqq, None
        if bfqq.wait_request or (bfqq.dispatched != 0 and idling.better_to_idle(self, bfqq)):
            return self._while_idling(bfqq), None
        return None, NO_MORE_REQUESTS

    def _while_idling(self, bfqq):
        """What ``bfq_select_queue`` serves while the in-service queue is idled."""
        bic = bfqq.bic
        async_q = bic.bfqq[0] if bic is not None else None
        if (async_q is not None and async_q.busy and async_q.next_rq is not None
                and async_q.next_rq.pid == bfqq.pid
                and self.serv_to_charge(async_q.next_rq, async_q) <= async_q.budget_left):
            return async_q
        if self.variant["waker"] is not None:       # 5.4, 5.10: see variants.py
            waker = bfqq.waker_bfqq
            if (waker is not None and waker.busy and waker.next_rq is not None
                    and self.serv_to_charge(waker.next_rq, waker) <= waker.budget_left):
                return waker
            blocked = bfqq.woken_list[0] if bfqq.woken_list else None
            if (blocked is not None and blocked.busy and blocked.next_rq is not None
                    and self.serv_to_charge(blocked.next_rq, blocked) <= blocked.budget_left):
                return blocked
        if (not idling.idling_boosts_thr_without_issues(self, bfqq)
                and (bfqq.wr_coeff == 1 or self.wr_busy_queues > 1
                     or not bfqq.has_short_ttime)):
            return idling.choose_bfqq_for_injection(self)
        return None

    def _may_expire_for_budg_timeout(self, bfqq) -> bool:
        """``bfq_may_expire_for_budg_timeout``: the timeout has passed and the queue is
        not waiting for a request, or a third of its budget is still left."""
        return ((not bfqq.wait_request or bfqq.budget_left >= bfqq.budget // 3)
                and bfqq.budget_timeout <= self.jiffies)

    def _set_in_service_queue(self):
        """``bfq_set_in_service_queue`` / ``__bfq_set_in_service_queue``."""
        bfqq = self.wf2q.get_next_queue() if self.tot_busy_queues else None
        if bfqq is not None:
            jiffies = self.jiffies
            bfqq.fifo_expire = False
            self.budgets_assigned = (self.budgets_assigned * 7 + 256) // 8
            if (bfqq.last_wr_start_finish < jiffies and bfqq.wr_coeff > 1
                    and bfqq.wr_cur_max_time == self.bfq_wr_rt_max_time
                    and bfqq.budget_timeout < jiffies):
                # a soft real-time queue does not lose the raising time it waited
                if bfqq.budget_timeout > bfqq.last_wr_start_finish:
                    bfqq.last_wr_start_finish += jiffies - bfqq.budget_timeout
                else:
                    bfqq.last_wr_start_finish = jiffies
            # bfq_set_budget_timeout
            if bfqq.wr_cur_max_time == self.bfq_wr_rt_max_time:
                coeff = 1
            else:
                coeff = bfqq.weight // bfqq.orig_weight
            self.last_budget_start = self.now_ns
            bfqq.budget_timeout = jiffies + self.bfq_timeout * coeff
        self.in_service_queue = bfqq
        self.in_serv_last_pos = 0
        return bfqq

    def _dispatch_rq_from_bfqq(self, bfqq):
        """``bfq_dispatch_rq_from_bfqq``: charge the queue, take its next request."""
        rq = bfqq.next_rq
        self.wf2q.served(bfqq, self.serv_to_charge(rq, bfqq), self.jiffies)
        if bfqq is self.in_service_queue and self.wait_dispatch:
            self.wait_dispatch = False
            self.waited_rq = rq
        bfqq.dispatched += 1                         # bfq_dispatch_remove
        bud.update_peak_rate(self, rq)
        self._remove_request(rq)
        if bfqq is not self.in_service_queue:
            return rq
        wr.update_wr_data(self, bfqq)
        if self.tot_busy_queues > 1 and bfqq.ioprio_class == IOPRIO_CLASS_IDLE:
            self._expire(bfqq, False, BUDGET_EXHAUSTED)
        return rq

    # --- expiration ---------------------------------------------------------------------
    def _expire(self, bfqq, compensate: bool, reason: int) -> None:
        """``bfq_bfqq_expire``: charge time to a slow queue, update the soft real-time
        bookkeeping, compute the next budget and take the queue out of service."""
        if self.log_expirations:
            self.expirations.append((self.now, bfqq.pid, reason, bfqq.service))
        if self.msg is not None:
            self.msg("expire", bfqq.pid or 0, REASON_NAMES[reason])
        slow, delta_ms = bud.bfqq_is_slow(self, bfqq, compensate)
        if bfqq.wr_coeff == 1 and (slow or (reason == BUDGET_TIMEOUT
                                            and bfqq.budget_left >= bfqq.budget // 3)):
            # bfq_bfqq_charge_time divides by the *default* timeout (the constant
            # bfq_timeout = HZ/8), not the timeout_sync tunable
            self.wf2q.charge_time(bfqq, delta_ms, self.bfq_max_budget,
                                  (self.hz // 8) * 1000 // self.hz, self.jiffies)
        if (not self.variant["io_bound_by_intensity"] and reason == TOO_IDLE
                and bfqq.service <= 2 * bfqq.budget // 10):
            bfqq.io_bound = False
        if self.low_latency and bfqq.wr_coeff == 1:
            bfqq.last_wr_start_finish = self.jiffies
        if self.low_latency and self.bfq_wr_max_softrt_rate > 0 and not bfqq.sort_list:
            if bfqq.dispatched == 0:
                if (not self.variant["softrt_skips_interactive"]
                        or bfqq.wr_coeff != self.bfq_wr_coeff):
                    bfqq.soft_rt_next_start = wr.softrt_next_start(self, bfqq)
            else:
                bfqq.softrt_update = True
        self.rqs_injected = self.wait_dispatch = False
        self.waited_rq = None
        bud.recalc_budget(self, bfqq, reason)
        self._expire_now(bfqq, reason)
        if not bfqq.busy and reason != BUDGET_TIMEOUT and reason != BUDGET_EXHAUSTED:
            bfqq.non_blocking_wait_rq = True
        else:
            bfqq.service = 0
        # the groups above it start their next service from 0 (bfq_bfqq_expire)
        group = bfqq.parent
        while group is not None:
            group.service = 0
            group = group.parent

    def _expire_now(self, bfqq, reason: int) -> None:
        """``__bfq_bfqq_expire`` and ``__bfq_bfqd_reset_in_service``: an empty queue
        leaves the busy set (unless preempted while idling guards its share), a
        non-empty one is requeued; no queue is in service afterwards."""
        if bfqq.coop and bfqq.seeky:
            bfqq.split_coop = True
        if not bfqq.sort_list and not (
                reason == PREEMPTED and idling.idling_needed_for_service_guarantees(self, bfqq)):
            if bfqq.dispatched == 0:
                bfqq.budget_timeout = self.jiffies
            self._del_busy(bfqq, True)
        else:
            self.wf2q.activate_requeue(bfqq, False, True, requeue=True)
            if not self.nonrot_with_queueing and bfqq.sort_list:
                self.merging.pos_tree_add_move(bfqq)
        if self.msg is not None and bfqq.wait_request:
            self._hold_end(REASON_NAMES[reason])
        self._stop_idling(bfqq)
        self.in_service_queue = None
        self.wf2q.reset_in_service(bfqq)

    # --- completion ------------------------------------------------------------------------
    def finish_request(self, rq, now: float) -> None:
        """``bfq_finish_requeue_request``: a dispatched request completed (or a request
        was freed without being dispatched)."""
        bfqq = rq.sched
        if bfqq is None:
            return
        self._tick(now)
        if rq in self.started:
            self.started.discard(rq)
            if rq is self.waited_rq:
                idling.update_inject_limit(self, bfqq)
            self._completed_request(bfqq)
        count_allocated(bfqq, -1)
        bic = self.bics.get(rq.pid)
        if bic is not None:
            bic.requests -= 1
        rq.sched = None

    def requeue_request(self, rq, now: float) -> None:
        """``requeue_request`` is ``bfq_finish_requeue_request`` too: the request is
        inserted again (at the head) as a new one."""
        self.finish_request(rq, now)

    def _completed_request(self, bfqq) -> None:
        """``bfq_completed_request``: the in-service queue's last request completed:
        idle if better, else expire it (budget timeout, or no more requests)."""
        idling.update_hw_tag(self)
        self.tot_rq_in_driver -= 1
        bfqq.dispatched -= 1
        if not bfqq.dispatched and not bfqq.busy:
            bfqq.budget_timeout = self.jiffies
            self.groups.queue_done(bfqq)
            self.weights_tree_remove(bfqq)
        now_ns = self.now_ns
        bfqq.last_end_request = now_ns
        delta_us = (now_ns - self.last_completion) // 1000
        if (delta_us > bud.BFQ_MIN_TT_NS // 1000
                and (self.last_rq_max_size << bud.BFQ_RATE_SHIFT) // delta_us
                < 1 << (bud.BFQ_RATE_SHIFT - 10)):
            bud.update_rate_reset(self, None)
        self.last_completion = now_ns
        self.last_completed_rq_bfqq = None if bfqq.coop else bfqq
        if (bfqq.softrt_update and bfqq.dispatched == 0 and not bfqq.sort_list
                and bfqq.wr_coeff != self.bfq_wr_coeff):
            bfqq.soft_rt_next_start = wr.softrt_next_start(self, bfqq)
        if self.in_service_queue is bfqq:
            if idling.must_idle(self, bfqq):
                if bfqq.dispatched == 0:
                    self._arm_slice_timer(bfqq)
                return
            if self._may_expire_for_budg_timeout(bfqq):
                self._expire(bfqq, False, BUDGET_TIMEOUT)
            elif not bfqq.sort_list and (bfqq.dispatched == 0
                                         or not idling.better_to_idle(self, bfqq)):
                self._expire(bfqq, False, NO_MORE_REQUESTS)
        if not self.tot_rq_in_driver:
            self._schedule_dispatch()

    def _arm_slice_timer(self, bfqq) -> None:
        """``bfq_arm_slice_timer``: keep the empty in-service queue, wait for its next
        request (an hrtimer: not quantised to jiffies)."""
        if self.msg is not None and not bfqq.wait_request:
            # the hold is named after the queue's process now; it ends under that name
            # even if the queue is merged meanwhile (its pid then -1, bfq_merge_bfqqs)
            self.hold_pid = bfqq.pid or 0
            self.msg("hold_start", self.hold_pid, "idling")
        bfqq.wait_request = True
        self.last_idling_start = self.now_ns
        self.last_idling_start_jiffies = self.jiffies
        self.wakeup_at = self.now + idling.slice_idle_ns(self, bfqq) / 1e9

    def _hold_end(self, detail: str) -> None:
        """The ``hold_end`` message of the idling armed last (``hold_pid``'s)."""
        self.msg("hold_end", self.hold_pid, detail)

    def timer_fired(self, now: float) -> None:
        """``bfq_idle_slice_timer_body``: the idle slice ended without a request: expire
        the queue (too idle, or budget timeout)."""
        self._tick(now)
        self._wakeup_at = None
        self.timers_changed = True
        bfqq = self.in_service_queue
        if bfqq is None:
            return
        if self.msg is not None and bfqq.wait_request:
            self._hold_end("timeout")
        bfqq.wait_request = False
        if bfqq.budget_timeout <= self.jiffies:
            self._expire(bfqq, True, BUDGET_TIMEOUT)
        elif bfqq.queued[0] == 0 and bfqq.queued[1] == 0:
            self._expire(bfqq, True, TOO_IDLE)
        self._schedule_dispatch()
