"""CFQ's slices (Linux 2.6.18 block/cfq-iosched.c): the round-robin lists, which
queue is active, how its slice ends, idling for its next request, preemption and
the two timers.

Queues holding requests sit on round-robin lists: ``rr_list[level]`` (best-effort
queues without requests at the device, by ``service_last``), ``busy_rr``
(best-effort queues with requests at the device), ``cur_rr`` (RT queues and the
best-effort level being served) and ``idle_rr`` (the IDLE class).
``cfq_set_active_queue`` takes the first of ``cur_rr`` (splicing the next level in
when it is empty), else of ``busy_rr``, else, after a grace period, of ``idle_rr``;
``__cfq_slice_expired`` ends its slice and files it again. `CfqSlices` holds these
rules as methods of `blksim.schedulers.cfq.CfqElevator`, whose constructor sets up
the state they read (the lists, ``busy_queues``, ``active_queue``, ``active_cic``,
``dispatch_slice``, the timers and the tunables in jiffies).
"""

from __future__ import annotations

from itertools import compress

from blksim.block.request import IOPRIO_CLASS_IDLE, IOPRIO_CLASS_RT
from blksim.schedulers.cfq_queue import CFQ_PRIO_LISTS, NEVER, CfqQueue

_LEVELS = range(CFQ_PRIO_LISTS)
# The classes as slice_start messages name them.
_CLASS_WORDS = {IOPRIO_CLASS_RT: "rt", IOPRIO_CLASS_IDLE: "idle"}


def _next_cursors(prio: int, end: int, found: bool) -> tuple[int, int]:
    """``cur_prio``, ``cur_end_prio`` after ``cfq_get_next_prio_level`` (2.6.18) spliced
    level `prio`; `found` tells whether its search of ``cur_prio..end`` found it, else
    `prio` is the lowest non-empty level and ``cur_end_prio`` was raised past `end`."""
    if not found:
        end += 1
        if end == CFQ_PRIO_LISTS or end < prio:
            end = prio
    cur = prio + 1
    if cur > end:
        end = cur
        cur = 0
    if end == CFQ_PRIO_LISTS:
        cur = 0
        end = 0
    return cur, end


# _next_cursors(low, end, low <= end) by [end][low]: the cursors after a search
# that starts at or below the lowest non-empty level `low` (the common case).
_CURSORS_AFTER_LOW = tuple(tuple(_next_cursors(low, end, low <= end) for low in _LEVELS)
                           for end in _LEVELS)


def _insert_by_service(lst: list, cfqq: CfqQueue) -> None:
    """Insert `cfqq` into a round-robin list kept sorted by ``service_last``
    (``cfq_resort_rr_list``): walk back from the tail, stop at a never-serviced
    queue or one serviced before this one, insert after it."""
    sl = cfqq.service_last
    i = len(lst)
    while i:
        other = lst[i - 1].service_last
        if other < sl or other == NEVER:
            break
        i -= 1
    lst.insert(i, cfqq)


class CfqSlices:
    """The round-robin lists, the active queue and its slice: a part of `CfqElevator`."""

    # ------------------------------------------------------------------ timers
    def _set_wakeup(self) -> None:
        """``wakeup_at``: the earlier of the idle-slice and idle-class timers."""
        a = self.idle_slice_timer
        b = self.idle_class_timer
        if a is None:
            due = b
        elif b is None or a <= b:
            due = a
        else:
            due = b
        self.wakeup_at = None if due is None else due / self.hz

    def _del_idle_slice_timer(self) -> bool:
        """``del_timer(&idle_slice_timer)``: True if it was pending."""
        if self.idle_slice_timer is None:
            return False
        self.idle_slice_timer = None
        self._set_wakeup()
        return True

    def _schedule_dispatch(self) -> None:
        """``cfq_schedule_dispatch``: kick the queue (kblockd) if any queue is busy."""
        if self.busy_queues:
            self.kick_queue = True

    def prio_slice(self, cfqq: CfqQueue) -> int:
        """The slice `cfqq` gets, in jiffies (``cfq_prio_to_slice``)."""
        return self._slice_of[1 if cfqq.sync else 0][cfqq.ioprio]

    # ------------------------------------------------------------------ round-robin lists
    def _resort_rr_list(self, cfqq: CfqQueue, preempted: bool) -> None:
        """``cfq_resort_rr_list`` (2.6.18)."""
        old = cfqq.rr
        if old is not None:
            old.remove(cfqq)
        cls = cfqq.ioprio_class
        if cls == IOPRIO_CLASS_RT:
            lst = self.cur_rr
        elif cls == IOPRIO_CLASS_IDLE:
            lst = self.idle_rr
        elif cfqq.dispatched:
            # requests in flight: not selectable from rr_list until they finish
            lst = self.busy_rr
        else:
            lst = self.rr_list[cfqq.ioprio]
        cfqq.rr = lst
        if preempted:
            # 2.6.18: list_add_tail(&cfqq->cfq_list, list->prev) puts it before the
            # last entry (or alone in an empty list), despite the "add to front" comment.
            if lst:
                lst.insert(len(lst) - 1, cfqq)
            else:
                lst.append(cfqq)
            return
        if lst is self.busy_rr or not lst:
            lst.append(cfqq)
        else:
            _insert_by_service(lst, cfqq)

    def _get_next_prio_level(self) -> int:
        """``cfq_get_next_prio_level``: splice the next best-effort level into cur_rr
        in the pattern 0 | 0,1 | 0,1,2 | ... | 0..7.

        The kernel searches ``cur_prio..cur_end_prio``, then raises ``cur_end_prio``
        one level at a time (searching ``0..cur_end_prio``), wrapping to 0 at 8 and
        giving up at the second wrap. With L the lowest non-empty level, that walk
        ends at L with ``cur_end_prio`` = max(cur_end_prio + 1, L) (just L after a
        wrap); with every level empty it ends with both cursors at 0. Computed
        directly here rather than walked.

        Like the kernel's, its callers call it only when cur_rr is empty: the
        level's list (which its queues' ``rr`` already names) becomes cur_rr and
        the empty one takes its place (``list_splice_init``).
        """
        rr_list = self.rr_list
        low = next(compress(_LEVELS, rr_list), -1)     # the lowest non-empty level
        if low < 0:
            self._cursors = (0, 0)            # every level empty
            return -1
        cur, end = self._cursors
        if low >= cur:
            # levels cur..low-1 are empty: the search of cur..end finds low if it
            # reaches it (the cursors that follow are tabulated)
            self._cursors = _CURSORS_AFTER_LOW[end][low]
        else:
            prio = next(compress(range(cur, end + 1), rr_list[cur:end + 1]), -1)
            if prio >= 0:
                low = prio                    # found between the cursors
                self._cursors = _next_cursors(prio, end, True)
            else:
                self._cursors = _next_cursors(low, end, False)
        rr_list[low], self.cur_rr = self.cur_rr, rr_list[low]    # the level spliced
        return low


    # ------------------------------------------------------------------ the active queue
    def _set_active_queue(self, j: int):
        """``cfq_set_active_queue``: the first queue of cur_rr (splicing the next
        level in when it is empty), else of busy_rr, else of the IDLE class once
        ``CFQ_IDLE_GRACE`` has passed since the last non-idle completion (else arm
        the grace timer). Returns the new active queue, or None."""
        if not self.busy_queues:
            # Every list is empty (busy_queues counts the queues on them): the level
            # search finds nothing and resets its cursors; no queue becomes active.
            self._cursors = (0, 0)
            self.active_queue = None
            return None
        cfqq = None
        if self.cur_rr or self._get_next_prio_level() != -1:
            cfqq = self.cur_rr[0]           # (re-read: the level search may replace it)
        elif self.busy_rr:
            cfqq = self.busy_rr[0]
        elif self.idle_rr:
            end = self.last_end_request + self.idle_grace
            if j >= end:
                cfqq = self.idle_rr[0]
            else:
                self.idle_class_timer = end             # mod_timer(&idle_class_timer)
                self._set_wakeup()
        self._set_active_queue_to(cfqq, j)
        return cfqq

    def _set_active_queue_to(self, cfqq, j: int) -> None:
        """``__cfq_set_active_queue``: `cfqq` (or None) becomes the active queue; its
        slice starts at its first dispatch (``slice_end`` 0 until then)."""
        if cfqq is not None:
            if self.idle_class_timer is not None:
                self.idle_class_timer = None            # del_timer(&idle_class_timer)
                self._set_wakeup()
            cfqq.slice_end = 0
            cfqq.slice_left = 0
            cfqq.fifo_expire = False
        self.active_queue = cfqq

    def _slice_expired(self, preempted: bool, j: int) -> None:
        """``cfq_slice_expired``: end the active queue's slice, if there is one."""
        cfqq = self.active_queue
        if cfqq is not None:
            self._expire_queue(cfqq, preempted, j)

    def _expire_queue(self, cfqq: CfqQueue, preempted: bool, j: int) -> None:
        """``__cfq_slice_expired``: stop idling for `cfqq`, keep what is left of its
        slice, file it again (a queue with nothing in flight counts as serviced
        now) and leave no queue active."""
        if cfqq.wait_request:
            self._del_idle_slice_timer()
        if not preempted and not cfqq.dispatched:
            cfqq.service_last = j
            self._schedule_dispatch()
        cfqq.must_dispatch = False
        cfqq.wait_request = False
        cfqq.slice_left = cfqq.slice_end - j if cfqq.slice_end > j else 0
        if cfqq.rr is not None:
            self._resort_rr_list(cfqq, preempted)
        if cfqq is self.active_queue:
            self.active_queue = None
        self.active_cic = None
        self.dispatch_slice = 0

    def _arm_slice_timer(self, cfqq: CfqQueue, j: int) -> bool:
        """``cfq_arm_slice_timer``: idle for the active sync queue's next request."""
        if not self.slice_idle or not cfqq.idle_window:
            return False
        cic = self.active_cic
        if cic is None or not cic.alive:
            return False                  # task has exited, don't wait
        cfqq.must_dispatch = True
        cfqq.wait_request = True
        # 2.6.18 takes min(slice_end - 1, slice_idle) with an absolute slice_end:
        # on a running system that is slice_idle.
        sl = self.slice_idle
        if cic.stats[0] > 80 and cic.seeky():
            sl = min(sl, self.seeky_idle)
        if self.msg is not None and self.idle_slice_timer is None:
            self.msg("hold_start", cfqq.pid, "idle_window")
        self.idle_slice_timer = j + sl
        self._set_wakeup()
        return True

    # ------------------------------------------------------------------ preemption
    def _should_preempt(self, new: CfqQueue, rq) -> bool:
        """``cfq_should_preempt`` (2.6.18), including its test of ``wait_request`` on
        the *new* queue, which never holds: only an IDLE-class slice is preempted."""
        if new.ioprio_class == IOPRIO_CLASS_IDLE:
            return False
        active = self.active_queue
        if active is None:
            return False
        if active.ioprio_class == IOPRIO_CLASS_IDLE:
            return True
        if not new.wait_request:
            return False
        if new.slice_left < self.slice_idle:
            return False
        if not rq.write and not active.sync:
            return True
        return False

    def _preempt_queue(self, cfqq: CfqQueue, j: int) -> None:
        """``cfq_preempt_queue`` (2.6.18)."""
        for q in list(self.cur_rr):
            self._resort_rr_list(q, True)
        if not cfqq.slice_left:
            cfqq.slice_left = self.prio_slice(cfqq) // 2
        cfqq.slice_end = cfqq.slice_left + j
        self._slice_expired(True, j)
        self._set_active_queue_to(cfqq, j)   # 2.6.18: clears the slice_end just set

    # ------------------------------------------------------------------ the idle timer
    def _idle_slice_timer_fn(self, j: int) -> None:
        """``cfq_idle_slice_timer`` (2.6.18)."""
        cfqq = self.active_queue
        if self.msg is not None and cfqq is not None:
            self.msg("hold_end", cfqq.pid or 0, "timeout")
        if cfqq is not None:
            if j <= cfqq.slice_end:
                if not self.busy_queues:
                    return                      # nobody else waits: keep the slice
                if cfqq.tree.keys:
                    cfqq.must_dispatch = True
                    self._schedule_dispatch()
                    return
        if self.msg is not None and cfqq is not None:
            self._say_expiry(cfqq, "idle_timeout")
        self._slice_expired(False, j)
        self._schedule_dispatch()

    # ------------------------------------------------------------------ messages
    # (block_elv_msg: sent only while someone subscribes; the callers test self.msg)
    def _say_slice_start(self, cfqq: CfqQueue) -> None:
        """``slice_start`` of ``cfqq``, with its class and sync-ness."""
        self.msg("slice_start", cfqq.pid or 0,
                 f"{_CLASS_WORDS.get(cfqq.ioprio_class, 'be')}/"
                 f"{'sync' if cfqq.sync else 'async'}")

    def _say_expiry(self, cfqq: CfqQueue, why: str) -> None:
        """Before ``cfqq``'s slice is ended for ``why``: ``hold_end`` if CFQ was idling
        for it, then ``slice_end`` if its slice had started."""
        pid = cfqq.pid or 0
        if cfqq.wait_request and self.idle_slice_timer is not None:
            self.msg("hold_end", pid, why)
        if cfqq.slice_end:
            self.msg("slice_end", pid, why)

    def _say_idle_window(self, cfqq: CfqQueue, seek_mean: int) -> None:
        """``idle_window_on``/``_off`` after cfq_update_idle_window changed the flag,
        with the rule that changed it."""
        if cfqq.idle_window:
            self.msg("idle_window_on", cfqq.pid or 0, "think_time")
        elif not self.slice_idle:
            self.msg("idle_window_off", cfqq.pid or 0, "slice_idle_0")
        elif self.hw_tag and seek_mean > 128 * 1024:
            self.msg("idle_window_off", cfqq.pid or 0, "seeky")
        else:
            self.msg("idle_window_off", cfqq.pid or 0, "think_time")

