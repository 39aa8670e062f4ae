"""blk-iocost's period timer (``ioc_timer_fn``, block/blk-iocost.c): what happens to a
device's iocost once a period, for `blksim.block.mq.iocost.Ioc`.

In order (5.10-6.6, the 6.x copy): the period's latency and tag-wait figures
(``ioc_lat_stat``); the groups with waiters or debt are kicked, idle ones deactivated
(``ioc_check_iocgs``); usage figures flushed up the tree (``iocg_flush_stat``); each
active group's usage decides whether it donates (``hweight_after_donation``) or is
short; donations are transferred when someone is short (``transfer_surpluses``);
``busy_level`` moves and vrate with it (``ioc_adjust_base_vrate``); the device class
is re-chosen (``ioc_refresh_params``); debts are forgiven on an idle device
(``ioc_forgive_debts``); the next period starts, or iocost goes idle; vrate is
nudged to make up the budget thrown away (``ioc_refresh_vrate``).

5.4 (the pre-5.10 copy) has the same skeleton with its own usage history and
donation (`blksim.block.mq.iocost_donation`), no forgiveness or compensation, and
ignores io.cost.qos's min while requests wait for tags.
"""

from __future__ import annotations

from blksim.block.mq.iocost_donation import (give_away_54, hweight_after_donation,
                                             record_usage_54, sdiv,
                                             surplus_adjusted_hweight_inuse,
                                             transfer_surpluses)
from blksim.block.mq.iocost_params import (
    DFGV_PERIOD, DFGV_USAGE_PCT, INUSE_MARGIN_PCT, MAX_LAGGING_PERIODS, MILLION,
    RQ_WAIT_BUSY_PCT, SURPLUS_SCALE_ABS, SURPLUS_SCALE_PCT, UNBUSY_THR_PCT,
    VRATE_ADJ_PCT, VRATE_CLAMP_ADJ_PCT, VRATE_MIN, WEIGHT_ONE, div_round_up)
from blksim.block.mq.iocost_wait import kick_delay, kick_waitq


def missed_ppm(ioc, rw: int) -> int:
    """One direction's (0 read, 1 write) requests that missed the target this period,
    in ppm; its counts start again."""
    met, missed = ioc.nr_met[rw], ioc.nr_missed[rw]
    ioc.nr_met[rw] = ioc.nr_missed[rw] = 0
    return div_round_up(missed * MILLION, met + missed) if met + missed else 0


def lat_stat(ioc) -> tuple:
    """``ioc_lat_stat``: ([read, write] missed ppm, rq_wait %) of the period."""
    missed = [missed_ppm(ioc, 0), missed_ppm(ioc, 1)]
    rq_wait_pct = ioc.rq_wait_ns * 100 // (ioc.period_us * 1000)
    ioc.rq_wait_ns = 0
    return missed, rq_wait_pct


def is_idle(ioc, iocg) -> bool:
    """``iocg_is_idle``: nothing issued this period and nothing in flight."""
    return iocg.active_period != ioc.cur_period and iocg.done_vtime == iocg.vtime


def lagging(ioc, iocg, ppm_rthr: int, ppm_wthr: int, vnow: int, period_vtime: int) -> bool:
    """An I/O in flight since before the period (``nr_lagging``): vrate is not raised."""
    return ((ppm_rthr != MILLION or ppm_wthr != MILLION) and not iocg.use_delay
            and iocg.vtime > iocg.done_vtime
            and iocg.vtime > vnow - MAX_LAGGING_PERIODS * period_vtime
            and iocg.done_vtime < vnow - period_vtime)


def next_busy_level(busy: int, rq_wait_pct: int, missed: list, ppm_rthr: int,
                    ppm_wthr: int, nr_shortages: int, hold_back: bool) -> int:
    """``busy_level``: up (from at least 0) while tags are waited for over 5 % of the
    period or a percentile misses its target; down (from at most 0) while all are met
    with a 25 % margin and groups are short of budget, unless ``hold_back`` (lagging
    I/O; 5.4 also surpluses); 0 otherwise. Within -1000..1000."""
    if rq_wait_pct > RQ_WAIT_BUSY_PCT or missed[0] > ppm_rthr or missed[1] > ppm_wthr:
        busy = max(busy, 0) + 1
    elif (rq_wait_pct <= RQ_WAIT_BUSY_PCT * UNBUSY_THR_PCT // 100
          and missed[0] <= ppm_rthr * UNBUSY_THR_PCT // 100
          and missed[1] <= ppm_wthr * UNBUSY_THR_PCT // 100):
        if nr_shortages:
            busy = min(busy, 0)
            if not hold_back:
                busy -= 1
        else:
            busy = 0
    else:
        busy = 0
    return min(max(busy, -1000), 1000)


def adjust_vrate(vrate: int, busy: int, vrate_min: int, vrate_max: int) -> int:
    """``ioc_adjust_base_vrate``'s step: out of bounds, 4 % towards them; else
    ``vrate_adj_pct[|busy_level|]`` % down (busy) or up, rounded up, within bounds."""
    if vrate < vrate_min:
        return min(vrate * (100 + VRATE_CLAMP_ADJ_PCT) // 100, vrate_min)
    if vrate > vrate_max:
        return max(vrate * (100 - VRATE_CLAMP_ADJ_PCT) // 100, vrate_max)
    adj = VRATE_ADJ_PCT[min(abs(busy), len(VRATE_ADJ_PCT) - 1)]
    adj = 100 - adj if busy > 0 else 100 + adj
    return min(max(div_round_up(vrate * adj, 100), vrate_min), vrate_max)


def ioc_timer_fn(ioc, now: float) -> list:
    """One period's end; returns the bios woken."""
    missed, rq_wait_pct = lat_stat(ioc)
    ppm_rthr = MILLION - ioc.qos[0]
    ppm_wthr = MILLION - ioc.qos[2]
    ns, us, vnow = ioc.now(now)
    period_vtime = vnow - ioc.period_at_vtime
    if not period_vtime:
        ioc.start_period(us, vnow, now)
        return []
    if ioc.line.rework:
        woken = _period_rework(ioc, now, ns, us, vnow, period_vtime, missed, rq_wait_pct,
                               ppm_rthr, ppm_wthr)
    else:
        woken = _period_54(ioc, now, ns, us, vnow, period_vtime, missed, rq_wait_pct,
                           ppm_rthr, ppm_wthr)
    ioc.record_vrate(now)
    return woken


def _end_period(ioc, now: float, us: int, vnow: int) -> None:
    ioc.cur_period += 1
    if ioc.active:
        ioc.start_period(us, vnow, now)
    else:
        ioc.busy_level = 0
        ioc.vtime_err = 0
        ioc.running = False


def _period_rework(ioc, now, ns, us, vnow, period_vtime, missed, rq_wait_pct,
                   ppm_rthr, ppm_wthr) -> list:
    woken: list = []
    nr_debtors = _check_iocgs(ioc, ns, us, vnow, woken)
    _flush_stat(ioc)
    surpluses: list = []
    nr_shortages = nr_lagging = 0
    usage_us_sum = 0
    for iocg in ioc.active:
        hwa, hwi = ioc.current_hweight(iocg)
        vdone, vtime = iocg.done_vtime, iocg.vtime
        if lagging(ioc, iocg, ppm_rthr, ppm_wthr, vnow, period_vtime):
            nr_lagging += 1
        usage_us = iocg.usage_delta_us
        usage_us_sum += usage_us
        if hwi < hwa or (not iocg.waitq and vtime < vnow - ioc.margin_low):
            if vdone != vtime:
                inflight_us = div_round_up(div_round_up((vtime - vdone) * hwi, WEIGHT_ONE),
                                           ioc.vtime_base_rate)
                usage_us = max(usage_us, inflight_us)
            if iocg.activated_at > ioc.period_at:
                usage_dur = max(us - iocg.activated_at, 1)
            else:
                usage_dur = max(us - ioc.period_at, 1)
            usage = min(max(div_round_up(usage_us * WEIGHT_ONE, usage_dur), 1), WEIGHT_ONE)
            hwa, old_hwi = ioc.current_hweight(iocg)
            hwm = ioc.current_hweight_max(iocg)
            new_hwi = hweight_after_donation(ioc, iocg, old_hwi, hwm, usage, vnow)
            if new_hwi < hwm and hwa >= 2:
                iocg.hweight_donating = hwa
                iocg.hweight_after_donation = new_hwi
                surpluses.insert(0, iocg)
            elif not iocg.abs_vdebt:
                ioc.propagate_weights(iocg, iocg.active, iocg.active, True, vnow,
                                      commit=False)
                nr_shortages += 1
        else:
            nr_shortages += 1
    if surpluses and nr_shortages:
        transfer_surpluses(ioc, surpluses)
    ioc.commit_weights()
    ioc.busy_level = next_busy_level(ioc.busy_level, rq_wait_pct, missed, ppm_rthr,
                                     ppm_wthr, nr_shortages, nr_lagging > 0)
    if ioc.busy_level and not (ioc.busy_level < 0 and nr_lagging):
        ioc.vtime_base_rate = adjust_vrate(ioc.vtime_base_rate, ioc.busy_level,
                                           ioc.vrate_min, ioc.vrate_max)
        ioc.refresh_margins()
    ioc.refresh_params(ns, False)
    _forgive_debts(ioc, usage_us_sum, nr_debtors, ns, us, vnow, woken)
    _end_period(ioc, now, us, vnow)
    _refresh_vrate(ioc, us)
    return woken


def _check_iocgs(ioc, ns, us, vnow, woken: list) -> int:
    """``ioc_check_iocgs``: kick groups with waiters or debt (a raised vrate may have
    made them oversleep), deactivate idle ones (their budget above the target is
    counted as vtime error). Returns the number of debtors."""
    nr_debtors = 0
    for iocg in list(ioc.active):
        if not iocg.waitq and not iocg.abs_vdebt and not iocg.delay and \
                not is_idle(ioc, iocg):
            continue
        if iocg.wait_since:
            iocg.stat[1] += us - iocg.wait_since
            iocg.wait_since = us
        if iocg.indebt_since:
            iocg.stat[2] += us - iocg.indebt_since
            iocg.indebt_since = us
        if iocg.indelay_since:
            iocg.stat[3] += us - iocg.indelay_since
            iocg.indelay_since = us
        if iocg.waitq or iocg.abs_vdebt or iocg.delay:
            woken.extend(kick_waitq(ioc, iocg, ns, us, vnow, True))
            if iocg.abs_vdebt or iocg.delay:
                nr_debtors += 1
        elif is_idle(ioc, iocg):
            excess = vnow - iocg.vtime - ioc.margin_target
            if excess > 0:
                old_hwi = ioc.current_hweight(iocg)[1]
                ioc.vtime_err -= excess * old_hwi // WEIGHT_ONE
            ioc.propagate_weights(iocg, 0, 0, False, vnow, commit=False)
            ioc.active.remove(iocg)
            iocg.is_active = False
    ioc.commit_weights()
    return nr_debtors


def _flush_upward(iocg) -> None:
    """``iocg_flush_stat_upward``: the deltas since the last flush to the parent."""
    stat, last = iocg.stat, iocg.last_stat
    if iocg.level > 0:
        parent_stat = iocg.ancestors[iocg.level - 1].stat
        for i in range(4):
            parent_stat[i] += stat[i] - last[i]
    last[:] = stat


def _flush_stat(ioc) -> None:
    """``iocg_flush_stat`` (5.10-6.6): each active group's usage (its absolute cost at
    vrate, µs) and stat deltas to its parent; its not yet visited ancestors are listed
    top down (``iocg_build_inner_walk``, marked by ``in_walk`` as the kernel's
    ``walk_list``), then flushed upward in reverse, children before parents."""
    inner: list = []
    for iocg in ioc.active:
        delta = iocg.abs_vusage - iocg.last_stat_abs_vusage
        iocg.last_stat_abs_vusage = iocg.abs_vusage
        iocg.usage_delta_us = delta // ioc.vtime_base_rate
        iocg.stat[0] += iocg.usage_delta_us
        _flush_upward(iocg)
        ancestors = iocg.ancestors
        lvl = iocg.level - 1
        while lvl >= 0 and not ancestors[lvl].in_walk:
            lvl -= 1
        for lvl in range(lvl + 1, iocg.level):
            ancestors[lvl].in_walk = True
            inner.append(ancestors[lvl])
    for iocg in reversed(inner):
        _flush_upward(iocg)
        iocg.in_walk = False


def _forgive_debts(ioc, usage_us_sum, nr_debtors, ns, us, vnow, woken: list) -> None:
    """``ioc_forgive_debts``: while debtors exist and the device was used under 50 %
    over the last 100 ms or more, halve their debts and delays once per 100 ms."""
    if not nr_debtors:
        ioc.dfgv_period_at = us
        ioc.dfgv_period_rem = 0
        ioc.dfgv_usage_us_sum = 0
        return
    if ioc.busy_level > 0:
        usage_us_sum = max(usage_us_sum, ioc.period_us)
    ioc.dfgv_usage_us_sum += usage_us_sum
    if us < ioc.dfgv_period_at + DFGV_PERIOD:
        return
    dur = us - ioc.dfgv_period_at
    usage_pct = 100 * ioc.dfgv_usage_us_sum // dur
    ioc.dfgv_period_at = us
    ioc.dfgv_usage_us_sum = 0
    if usage_pct > DFGV_USAGE_PCT:
        ioc.dfgv_period_rem = 0
        return
    nr_cycles, ioc.dfgv_period_rem = divmod(dur + ioc.dfgv_period_rem, DFGV_PERIOD)
    shift = min(nr_cycles, 63)
    for iocg in ioc.active:
        if not iocg.abs_vdebt and not iocg.delay:
            continue
        if iocg.abs_vdebt:
            iocg.abs_vdebt = (iocg.abs_vdebt >> shift) or 1
        if iocg.delay:
            iocg.delay = (iocg.delay >> shift) or 1
        woken.extend(kick_waitq(ioc, iocg, ns, us, vnow, True))


def _refresh_vrate(ioc, us: int) -> None:
    """``ioc_refresh_vrate``: over the period left, run vrate faster (at most 2x) or
    slower (at least 1/2) to make up the accumulated vtime error."""
    pleft = ioc.period_at + ioc.period_us - us
    vperiod = ioc.period_us * ioc.vtime_base_rate
    if pleft > 0:
        vcomp = -sdiv(ioc.vtime_err, pleft)
        vcomp = min(max(vcomp, -(ioc.vtime_base_rate >> 1)), ioc.vtime_base_rate)
        ioc.vtime_err += vcomp * pleft
        ioc.vtime_rate = ioc.vtime_base_rate + vcomp
    ioc.vtime_err = min(max(ioc.vtime_err, -vperiod), vperiod)


def _period_54(ioc, now, ns, us, vnow, period_vtime, missed, rq_wait_pct,
               ppm_rthr, ppm_wthr) -> list:
    woken: list = []
    for iocg in list(ioc.active):
        if not iocg.waitq and not iocg.abs_vdebt and not is_idle(ioc, iocg):
            continue
        if iocg.waitq or iocg.abs_vdebt:
            woken.extend(kick_waitq(ioc, iocg, ns, us, vnow, True))
            kick_delay(ioc, iocg, us, vnow)
        elif is_idle(ioc, iocg):
            iocg.last_inuse = iocg.inuse
            ioc.propagate_weights(iocg, 0, 0, False, vnow, commit=False)
            ioc.active.remove(iocg)
            iocg.is_active = False
    ioc.commit_weights()
    nr_surpluses = nr_shortages = nr_lagging = 0
    for iocg in ioc.active:
        vdone, vtime = iocg.done_vtime, iocg.vtime
        hwa, hwi = ioc.current_hweight(iocg)
        if lagging(ioc, iocg, ppm_rthr, ppm_wthr, vnow, period_vtime):
            nr_lagging += 1
        if iocg.waitq:
            vusage = vnow - iocg.last_vtime
        elif iocg.last_vtime < vtime:
            vusage = vtime - iocg.last_vtime
        else:
            vusage = 0
        iocg.last_vtime += vusage
        vusage = max(vusage, vtime - vdone)      # in-flight cost counts as used
        usage = 0
        if vusage:
            usage = div_round_up(vusage * hwi, period_vtime)
            record_usage_54(iocg, usage)
        vmin = vnow - ioc.margin_us * ioc.vtime_rate
        iocg.has_surplus = False
        if not iocg.waitq and vtime < vmin:
            delta = vmin - vtime                 # budget above one margin is lost
            iocg.vtime += delta
            iocg.done_vtime += delta
            iocg.last_vtime += delta
            if surplus_adjusted_hweight_inuse(usage, hwi):
                iocg.has_surplus = True
                nr_surpluses += 1
        elif hwi < hwa:
            # a donor taking back: all of it with waiters, else its usage's worth
            if iocg.waitq:
                new_hwi = hwa
            else:
                new_hwi = max(hwi, usage * SURPLUS_SCALE_PCT // 100 + SURPLUS_SCALE_ABS)
            new_inuse = min(max(iocg.inuse * new_hwi // hwi, 1), iocg.active)
            if new_inuse > iocg.inuse:
                ioc.propagate_weights(iocg, iocg.weight, new_inuse, False, vnow,
                                      commit=False)
        else:
            nr_shortages += 1
    if nr_shortages and nr_surpluses:
        give_away_54(ioc)
    ioc.commit_weights()
    ioc.busy_level = next_busy_level(ioc.busy_level, rq_wait_pct, missed, ppm_rthr,
                                     ppm_wthr, nr_shortages,
                                     nr_lagging > 0 or nr_surpluses > 0)
    if ioc.busy_level > 0 or (ioc.busy_level < 0 and not nr_lagging):
        vrate_min = ioc.vrate_min
        if ioc.line.rq_wait_ignores_min and rq_wait_pct > RQ_WAIT_BUSY_PCT:
            vrate_min = VRATE_MIN           # "rq_wait signal is always reliable"
        vrate = adjust_vrate(ioc.vtime_rate, ioc.busy_level, vrate_min, ioc.vrate_max)
        ioc.vtime_rate = ioc.vtime_base_rate = vrate
        ioc.inuse_margin_vtime = div_round_up(ioc.period_us * vrate * INUSE_MARGIN_PCT,
                                              100)
    ioc.refresh_params(ns, False)
    _end_period(ioc, now, us, vnow)
    return woken
