"""blk-iocost's wait queues, debt and delay (block/blk-iocost.c, Linux 5.4-6.6), for
`blksim.block.mq.iocost.Ioc`.

**Waiting.** A bio over its group's budget sleeps on the group's wait queue, in order;
``kick_waitq`` (``iocg_kick_waitq``) wakes the waiters the budget (``vnow - vtime``)
covers, each charged its cost at the group's hweight_inuse, and sets the queue's timer
(``iocg_waitq_timer_fn``) for the next one's shortfall at the current vrate plus slack.

**Debt.** A bio that may not wait goes at once and its absolute cost becomes the group's
debt (``iocg_incur_debt``), paid from the budget before any waiter wakes
(``iocg_pay_debt``, in ``iocg_kick_waitq``). 5.10+: a new debtor's inuse drops to the
minimum until it has paid.

**Delay.** A large debt marks the submitting task (``iocg_kick_delay``,
``blkcg_schedule_throttle``): on its return to user space it sleeps for the group's
delay (``blkcg_maybe_throttle_current``), which the process models take through the
queue protocol's ``throttle_delay`` before their next submission.
"""

from __future__ import annotations

from blksim.block.mq.iocost_donation import sdiv
from blksim.block.mq.iocost_params import (MAX_DELAY, MAX_DELAY_THR_PCT, MILLION,
                                           MIN_DELAY, MIN_DELAY_THR_PCT,
                                           WAITQ_TIMER_MARGIN_PCT, WEIGHT_ONE,
                                           div_round_up)


# ---------------------------------------------------------------------- waiting


def kick_waitq(ioc, iocg, ns: int, us: int, vnow: int, pay: bool) -> list:
    """``iocg_kick_waitq``: pay debt from the budget, wake the waiters the budget
    covers (in order), and set the wait timer for the next. Returns the woken."""
    hwa = ioc.current_hweight(iocg)[0]
    vbudget = vnow - iocg.vtime
    if not ioc.line.rework:
        return kick_waitq_54(ioc, iocg, ns, vnow, vbudget)
    if pay and iocg.abs_vdebt and vbudget > 0:
        abs_vbudget = div_round_up(vbudget * hwa, WEIGHT_ONE)
        abs_vpay = min(abs_vbudget, iocg.abs_vdebt)
        vpay = div_round_up(abs_vpay * WEIGHT_ONE, hwa)
        iocg.vtime += vpay
        iocg.done_vtime += vpay
        pay_debt(ioc, iocg, abs_vpay, us, vnow)
        vbudget -= vpay
    if iocg.abs_vdebt or iocg.delay:
        kick_delay(ioc, iocg, us, vnow)
    if iocg.abs_vdebt:
        vdebt = div_round_up(iocg.abs_vdebt * WEIGHT_ONE, hwa)
        vbudget = min(0, vbudget - vdebt)
    hwi = ioc.current_hweight(iocg)[1]
    woken, vbudget = wake(ioc, iocg, vbudget, hwi)
    slack = ioc.timer_slack_ns
    if not iocg.waitq:
        if iocg.wait_since:
            iocg.stat[1] += us - iocg.wait_since
            iocg.wait_since = 0
        iocg.wait_due = None
        return woken
    if not iocg.wait_since:
        iocg.wait_since = us
    expires = ns + div_round_up(-vbudget, ioc.vtime_base_rate) * 1000 + slack
    set_wait_timer(ioc, iocg, expires, slack)
    return woken


def kick_waitq_54(ioc, iocg, ns: int, vnow: int, vbudget: int) -> list:
    """5.4's ``iocg_kick_waitq``: debt paid at hweight_inuse, the timer's slack a
    quarter of 5 % of the period."""
    hwi = ioc.current_hweight(iocg)[1]
    vdebt = div_round_up(iocg.abs_vdebt * WEIGHT_ONE, hwi)
    if vdebt and vbudget > 0:
        delta = min(vbudget, vdebt)
        abs_delta = min(div_round_up(delta * hwi, WEIGHT_ONE), iocg.abs_vdebt)
        iocg.vtime += delta
        iocg.done_vtime += delta
        iocg.abs_vdebt -= abs_delta
    woken, vbudget = wake(ioc, iocg, vbudget - vdebt, hwi)
    if not iocg.waitq:
        iocg.wait_due = None
        return woken
    margin_ns = (ioc.period_us * WAITQ_TIMER_MARGIN_PCT // 100) * 1000
    expires = ns + div_round_up(-vbudget, ioc.vtime_rate) * 1000 + margin_ns // 4
    set_wait_timer(ioc, iocg, expires, margin_ns // 4)
    return woken


def wake(ioc, iocg, vbudget: int, hwi: int) -> tuple:
    """``__wake_up_locked_key`` with ``iocg_wake_fn``: waiters in order while the
    budget covers their cost at ``hwi``; (the woken, the budget left)."""
    woken = []
    waitq = iocg.waitq
    while waitq:
        bio, abs_cost = waitq[0]
        cost = div_round_up(abs_cost * WEIGHT_ONE, hwi)
        vbudget -= cost
        if vbudget < 0:
            break
        waitq.popleft()
        ioc._commit(iocg, bio, abs_cost, cost)
        woken.append(bio)
    return woken, vbudget


def set_wait_timer(ioc, iocg, expires_ns: int, slack_ns: int) -> None:
    """``hrtimer_start_range_ns`` unless the armed one is within the slack."""
    old = iocg.wait_due
    if old is not None and abs(int(old * 1e9 + 0.5) - expires_ns) <= slack_ns:
        return
    iocg.wait_due = expires_ns / 1e9


# ---------------------------------------------------------------------- debt


def incur_debt(ioc, iocg, abs_cost: int, us: int, vnow: int) -> None:
    """``iocg_incur_debt``: 5.10+, a new debtor's inuse drops to the minimum."""
    if ioc.line.rework and not iocg.abs_vdebt and abs_cost:
        iocg.indebt_since = us
        ioc.propagate_weights(iocg, iocg.active, 0, False, vnow)
    iocg.abs_vdebt += abs_cost
    iocg.abs_vusage += abs_cost


def pay_debt(ioc, iocg, abs_vpay: int, us: int, vnow: int) -> None:
    """``iocg_pay_debt``: paid in full, inuse is restored."""
    iocg.abs_vdebt -= min(abs_vpay, iocg.abs_vdebt)
    if not iocg.abs_vdebt:
        iocg.stat[2] += us - iocg.indebt_since
        iocg.indebt_since = 0
        ioc.propagate_weights(iocg, iocg.active, iocg.last_inuse, False, vnow)


def kick_delay(ioc, iocg, us: int, vnow: int) -> bool:
    """``iocg_kick_delay``: the delay the debt asks of the submitter. 5.10+: from
    the overage in % of a period, 500 %..25000 % -> 250 µs..250 ms, the higher of
    that and the current one halved per second since set. 5.4: the overage's time
    at vrate, once it exceeds a margin. True: the submitter is to sleep on its return
    to user space (``blkcg_schedule_throttle``) for ``delay_ns``, the group's
    ``blkg->delay_nsec`` (``blkcg_set_delay``; ``blkcg_clear_delay`` zeroes it)."""
    hwa, hwi = ioc.current_hweight(iocg)
    if not ioc.line.rework:
        vtime = iocg.vtime + div_round_up(iocg.abs_vdebt * WEIGHT_ONE, hwi)
        if not iocg.abs_vdebt or vtime <= vnow:
            iocg.use_delay = False
            iocg.delay_ns = 0
            return False
        if not iocg.use_delay and vtime <= vnow + ioc.margin_us * ioc.vtime_rate:
            return False
        iocg.use_delay = True
        # the overage's time at the current vrate, in whole µs
        iocg.delay_ns = div_round_up(vtime - vnow, ioc.vtime_rate) * 1000
        return True
    if us < iocg.delay_at:
        return False
    shift = (us - iocg.delay_at) // MILLION
    delay = iocg.delay >> shift if iocg.delay and shift < 64 else 0
    vover = iocg.vtime + div_round_up(iocg.abs_vdebt * WEIGHT_ONE, hwa) - vnow
    vover_pct = sdiv(100 * vover, ioc.period_us * ioc.vtime_base_rate)
    if vover_pct <= MIN_DELAY_THR_PCT:
        new_delay = 0
    elif vover_pct >= MAX_DELAY_THR_PCT:
        new_delay = MAX_DELAY
    else:
        new_delay = MIN_DELAY + (MAX_DELAY - MIN_DELAY) * (vover_pct - MIN_DELAY_THR_PCT) \
            // (MAX_DELAY_THR_PCT - MIN_DELAY_THR_PCT)
    if new_delay > delay:
        iocg.delay = new_delay
        iocg.delay_at = us
        delay = new_delay
    if delay >= MIN_DELAY:
        if not iocg.indelay_since:
            iocg.indelay_since = us
        iocg.use_delay = True
        iocg.delay_ns = delay * 1000
        return True
    if iocg.indelay_since:
        iocg.stat[3] += us - iocg.indelay_since
        iocg.indelay_since = 0
    iocg.delay = 0
    iocg.use_delay = False
    iocg.delay_ns = 0
    return False


def maybe_throttle(iocg) -> int:
    """``blkcg_maybe_throttle_blkg`` (block/blk-cgroup.c, 5.4-6.6): how long (ns) a task
    of ``iocg``'s group marked by `kick_delay` sleeps on its return to user space: the
    largest delay of the group and its ancestors below the root that use one. iocost
    sets delays with ``blkcg_set_delay`` (a negative ``use_delay``), so neither the
    250 ms clamp nor ``blkcg_scale_delay``'s decay applies; 5.10+ bounds its delays to
    250 ms itself (MAX_DELAY)."""
    delay_ns = 0
    for anc in iocg.ancestors[1:]:
        if anc.use_delay and anc.delay_ns > delay_ns:
            delay_ns = anc.delay_ns
    return delay_ns
