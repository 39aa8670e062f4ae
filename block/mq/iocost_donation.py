"""blk-iocost's work conservation: how a group that does not use its share gives it to the
others by lowering its ``inuse`` weight (block/blk-iocost.c).

5.10-6.6 (``hweight_after_donation``, ``transfer_surpluses``, the 6.x copy): each period a
donor's target share is what it used, scaled so that its budget ends the next period at
the 50 % margin target (``new_hwi = usage / (1 - target + delta)``, ``delta`` its budget
left as a fraction of the period). Then Andy's method works out the inuse weights that
give every donor its target while the non-donors keep their relative shares: the tree's
donating (``t``) and after-donation (``t'``) shares are summed up the tree, the global
rate ``gamma = (1 - t'_root) / (1 - t_root)`` scales the non-donating parts, and each
inner node and donating leaf gets ``inuse = s' * b' / b'_parent`` where ``s'`` is its
parent's children's weight sum adjusted for the donation.

5.4 (``surplus_adjusted_hweight_inuse`` in ``ioc_timer_fn``, the pre-5.10 copy): a group
whose budget ran over one margin and whose usage, x 1.25 + 2 %, is below its hweight by
more than 3 % may donate; with at least two usages of the last three periods recorded,
its inuse is scaled to the largest of them (x 1.25 + 2 %). A donor short of budget
takes back (its usage x 1.25 + 2 %, all of its weight when it has waiters).
"""

from __future__ import annotations

from blksim.block.mq.iocost_params import (MARGIN_TARGET_PCT, MIN_VALID_USAGES,
                                           NR_USAGE_SLOTS, SURPLUS_MIN_ADJ_DELTA,
                                           SURPLUS_SCALE_ABS, SURPLUS_SCALE_PCT,
                                           WEIGHT_ONE, div_round_up)


def sdiv(a: int, b: int) -> int:
    """``div64_s64``: integer division truncating towards zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def hweight_after_donation(ioc, iocg, old_hwi: int, hwm: int, usage: int,
                           vnow: int) -> int:
    """``hweight_after_donation`` (5.10-6.6): ``iocg``'s hweight_inuse after donating
    (``hwm``: no donation); the budget above the margin target is thrown away and
    counted as vtime error."""
    if iocg.abs_vdebt:
        return 1
    if iocg.waitq or iocg.vtime > vnow - ioc.margin_min:
        return hwm
    excess = vnow - iocg.vtime - ioc.margin_target
    if excess > 0:
        iocg.vtime += excess
        iocg.done_vtime += excess
        ioc.vtime_err -= excess * old_hwi // WEIGHT_ONE
    delta = sdiv(WEIGHT_ONE * (vnow - iocg.vtime), vnow - ioc.period_at_vtime)
    target = WEIGHT_ONE * MARGIN_TARGET_PCT // 100
    new_hwi = sdiv(WEIGHT_ONE * usage, WEIGHT_ONE - target + delta)
    return min(max(new_hwi, 1), hwm)


def _inner_walk(surpluses: list) -> list:
    """The donors' ancestors, each once, parents before children (pre-order:
    ``iocg_build_inner_walk``)."""
    walk: list = []
    seen: set = set()
    for iocg in surpluses:
        for anc in iocg.ancestors[:-1]:
            if id(anc) not in seen:
                seen.add(id(anc))
                walk.append(anc)
    return walk


def transfer_surpluses(ioc, surpluses: list) -> None:
    """``transfer_surpluses`` (5.10-6.6): set each donor's inuse so that it gets its
    ``hweight_after_donation`` (see the module docstring)."""
    # a sum of targets of a whole or more: scale those above their full share down
    after_sum = over_sum = 0
    over = []
    for iocg in surpluses:
        hwa = ioc.current_hweight(iocg)[0]
        after_sum += iocg.hweight_after_donation
        if iocg.hweight_after_donation > hwa:
            over_sum += iocg.hweight_after_donation
            over.append(iocg)
    over_target = over_sum - (after_sum - (WEIGHT_ONE - 1)) if after_sum >= WEIGHT_ONE else 0
    if over_target:
        for iocg in over:
            iocg.hweight_after_donation = iocg.hweight_after_donation * over_target // over_sum

    walk = _inner_walk(surpluses)
    root = walk[0]
    for iocg in walk:
        iocg.child_adjusted_sum = 0
        iocg.hweight_donating = 0
        iocg.hweight_after_donation = 0
    # the donating (b_t) and after-donation (b'_t) shares, summed up the tree
    for iocg in surpluses:
        parent = iocg.ancestors[iocg.level - 1]
        parent.hweight_donating += iocg.hweight_donating
        parent.hweight_after_donation += iocg.hweight_after_donation
    for iocg in reversed(walk):
        if iocg.level > 0:
            parent = iocg.ancestors[iocg.level - 1]
            parent.hweight_donating += iocg.hweight_donating
            parent.hweight_after_donation += iocg.hweight_after_donation
    # inner nodes' full shares (b), the donation values kept in range
    for iocg in walk:
        if iocg.level:
            parent = iocg.ancestors[iocg.level - 1]
            iocg.hweight_active = div_round_up(parent.hweight_active * iocg.active,
                                               parent.child_active_sum)
        iocg.hweight_donating = min(iocg.hweight_donating, iocg.hweight_active)
        iocg.hweight_after_donation = min(iocg.hweight_after_donation,
                                          iocg.hweight_donating - 1)
    # gamma = (1 - t'_r) / (1 - t_r): the rate the non-donating shares grow by
    gamma = div_round_up((WEIGHT_ONE - root.hweight_after_donation) * WEIGHT_ONE,
                         WEIGHT_ONE - min(root.hweight_donating, WEIGHT_ONE - 1))
    for iocg in walk:
        if iocg.level == 0:
            # s' = s * b_pf / b'_pf for the first level
            iocg.child_adjusted_sum = div_round_up(
                iocg.child_active_sum * (WEIGHT_ONE - iocg.hweight_donating),
                WEIGHT_ONE - iocg.hweight_after_donation)
            continue
        parent = iocg.ancestors[iocg.level - 1]
        # b' = gamma * b_f + b'_t; w' = s'_parent * b' / b'_parent
        iocg.hweight_inuse = div_round_up(
            gamma * (iocg.hweight_active - iocg.hweight_donating), WEIGHT_ONE) \
            + iocg.hweight_after_donation
        inuse = div_round_up(parent.child_adjusted_sum * iocg.hweight_inuse,
                             parent.hweight_inuse)
        # the children's adjusted sum: s' = s_f + s_t * w'_pt / w_pt
        st = div_round_up(iocg.child_active_sum * iocg.hweight_donating,
                          iocg.hweight_active)
        sf = iocg.child_active_sum - st
        wpt = div_round_up(iocg.active * iocg.hweight_donating, iocg.hweight_active)
        wptp = div_round_up(inuse * iocg.hweight_after_donation, iocg.hweight_inuse)
        iocg.child_adjusted_sum = sf + div_round_up(st * wptp, wpt)
    for iocg in surpluses:
        if iocg.abs_vdebt:
            continue                      # debt handling owns a debtor's inuse
        parent = iocg.ancestors[iocg.level - 1]
        inuse = div_round_up(parent.child_adjusted_sum * iocg.hweight_after_donation,
                             parent.hweight_inuse)
        ioc.propagate_weights(iocg, iocg.active, inuse, True, commit=False)


def surplus_adjusted_hweight_inuse(usage: int, hw_inuse: int) -> int:
    """``surplus_adjusted_hweight_inuse`` (5.4): usage x 1.25 + 2 %, or 0 when that is
    within 3 % of ``hw_inuse`` (too small a surplus to give)."""
    usage = div_round_up(usage * SURPLUS_SCALE_PCT, 100) + SURPLUS_SCALE_ABS
    if usage + SURPLUS_MIN_ADJ_DELTA > hw_inuse:
        return 0
    return usage


def give_away_54(ioc) -> None:
    """5.4's transfer (``ioc_timer_fn`` when there are both shortages and surpluses):
    each donor with enough usage history gives down to its largest recent usage."""
    for iocg in ioc.active:
        if not iocg.has_surplus:
            continue
        valid = [u for u in iocg.usages if u]
        if len(valid) < MIN_VALID_USAGES:
            continue
        usage = max(valid)
        hw_inuse = ioc.current_hweight(iocg)[1]
        new_hwi = surplus_adjusted_hweight_inuse(usage, hw_inuse)
        if not new_hwi:
            continue
        new_inuse = div_round_up(iocg.inuse * new_hwi, hw_inuse)
        if new_inuse < iocg.inuse:
            ioc.propagate_weights(iocg, iocg.weight, new_inuse, False, commit=False)


def record_usage_54(iocg, usage: int) -> None:
    """5.4: the period's usage into the three-slot history."""
    iocg.usage_idx = (iocg.usage_idx + 1) % NR_USAGE_SLOTS
    iocg.usages[iocg.usage_idx] = usage
