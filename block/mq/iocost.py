"""blk-iocost, the io.cost controller (block/blk-iocost.c, Linux 5.4-6.6), as an rq_qos
policy (`blksim.block.mq.rq_qos`, ``RQ_QOS_COST``) of a multi-queue queue.

The algorithm
-------------
**Cost.** Every bio is given a cost in device time by the linear model
(``calc_vtime_cost_builtin``): a base cost, *sequential* when the bio starts within
4096 pages (16 MiB) of the end of its group's last bio (``cursor``), else *random*,
plus a cost per 4 KiB page (at least one page)::

    cost = (seqio or randio) + pages * page          (vtime: 2^37 per second)
    page = 1 s / ceil(bps / 4096),  seqio = 1 s / seqiops - page,
    randio = 1 s / randiops - page                   (calc_lcoefs; not below 0)

with each direction's ``bps``/``seqiops``/``randiops`` from io.cost.model or the device
class's table. A bio merged into a request costs its pages only. Discards and flushes
cost nothing; 5.10 on, nor does an empty bio.

**Vtime.** The device has a virtual clock ``vnow`` running at ``vrate`` (100 %: one
second of modelled device time per second). Each active group has a hierarchical
share ``hweight`` (its weight over its siblings', multiplied down the tree, among the
groups with I/O: ``current_hweight``) and its own ``vtime``; a bio of cost ``c``
advances it by ``c / hweight_inuse`` (``abs_cost_to_cost``). A bio goes when its
group's vtime plus its cost is not past ``vnow``; otherwise its submitter sleeps on
the group's wait queue until ``vnow`` has caught up (``iocg_kick_waitq`` and its
timer, ``iocg_waitq_timer_fn``), in order. A group starts (``iocg_activate``) with a
budget of half a period (5.10+: set to exactly that; 5.4: at most that).

**The period** (``ioc_timer_fn``, every ``period_us``: twice the higher latency
target, up to 10 times at lower percentiles, 1 ms..1 s, in jiffies): the share of
completed reads/writes over their latency target (``rlat``/``wlat``, from request
allocation to completion less the size cost) against ``rpct``/``wpct``, and the time
requests waited for a tag (``rq_wait``, over 5 % of the period is "busy") move
``busy_level``; a busy device lowers vrate, spare capacity while groups wait for
budget raises it, by ``vrate_adj_pct[|busy_level|]`` %, within io.cost.qos's min and
max. Groups idle for a period are deactivated; those not using their share donate it
(`blksim.block.mq.iocost_donation`).

**Debt.** A bio that may not wait (the kernel's ``bio_issue_as_root_blkg``: REQ_META,
REQ_SWAP; or a merge over budget) goes at once and its cost becomes the group's debt
(``iocg_incur_debt``), paid from its budget before any waiter (``iocg_kick_waitq``);
a large debt asks the submitting task to sleep on its return to user space
(``iocg_kick_delay``). The wait queues, debt and delay are
`blksim.block.mq.iocost_wait`'s; the period `blksim.block.mq.iocost_period`'s.

Versions (`blksim.block.mq.iocost_params.LINES`)
------------------------------------------------
==========================  ===============================  ============================
rule                        5.4 (pre-5.10 copy)              5.10-6.6 (6.x copy)
==========================  ===============================  ============================
donation                    give-away/take-back (1.25x+2%)   Andy's method
budget margins              one: 50 % of a period            min 10, low 20, target 50 %
inuse during a period       reset to weight near the margin  raised in 25 % steps
                                                             (adjust_inuse_and_calc_cost)
lost budget                 lost                             vrate compensates
                                                             (ioc_refresh_vrate)
vrate_min under rq_wait     ignored (down to 1 %)            kept
debt delay                  overage / vrate, a timer         500 %..25000 % overage ->
                                                             0.25..250 ms, halving per s
debt forgiveness            none                             halved per 100 ms at <50 %
                                                             use (ioc_forgive_debts)
wbt while enabled           left on                          off (wbt_disable_default)
io.stat cost.*              none                             vrate, usage, wait, indebt,
                                                             indelay (ioc_pd_stat)
==========================  ===============================  ============================

Simplifications (docs/cgroups.md): blksim's bios carry no REQ_META/REQ_SWAP (the
journal's and log's are the root's already), so only merges incur debt; a debtor's
delay is slept before the task's next submitting call (fio-style jobs only); 5.4's
delay timer is not kept (the period re-kicks debtors); time is read in whole µs; the
per-group hrtimer fires exactly at its time.
"""

from __future__ import annotations

from collections import deque

from blksim._compat import trace_boundary
from blksim.block.mq.iocost_period import ioc_timer_fn
from blksim.block.mq.iocost_params import (
    AUTOP, AUTOP_HDD, AUTOP_NAMES, AUTOP_SSD_DFL, AUTOP_SSD_QD1, AUTOP_CYCLE_NSEC,
    CGROUP_WEIGHT_DFL, INUSE_ADJ_STEP_PCT, INUSE_MARGIN_PCT, IOC_SECT_TO_PAGE_SHIFT,
    LCOEF_RANDIO_PAGES, MARGIN_LOW_PCT, MARGIN_MIN_PCT, MARGIN_PCT, MARGIN_TARGET_PCT,
    MILLION, TIMER_SLACK_PCT, VTIME_PER_NSEC, VTIME_PER_USEC, WEIGHT_ONE,
    IocostDevice, calc_lcoefs, div_round_up, initial_autop, line, period_us)
from blksim.block.mq.iocost_wait import (incur_debt, kick_delay, kick_waitq,
                                         maybe_throttle)
from blksim.block.mq.rq_qos import RQ_QOS_COST, RqQosPolicy
from blksim.block.request import REQ_OP_READ, REQ_OP_WRITE

#: io.stat's cost figures (µs), in ``ioc_pd_stat``'s order
COST_STAT_KEYS = ("cost.usage", "cost.wait", "cost.indebt", "cost.indelay")
#: the most points the vrate series keeps (thinned by 2 when full)
VRATE_SERIES_CAP = 2048


class IocGroup:
    """``struct ioc_gq``: one group on one device (see the module docstring).
    ``ancestors[level]`` is the group itself, ``ancestors[0]`` the root's."""

    __slots__ = ("cgroup", "level", "ancestors", "cfg_weight", "weight", "active",
                 "inuse", "last_inuse", "saved_margin", "cursor", "vtime", "done_vtime",
                 "abs_vdebt", "delay", "delay_at", "delay_ns", "use_delay", "active_period",
                 "is_active", "child_active_sum", "child_inuse_sum", "child_adjusted_sum",
                 "hweight_gen", "hweight_active", "hweight_inuse", "hweight_donating",
                 "hweight_after_donation", "waitq", "wait_due", "activated_at",
                 "abs_vusage", "stat", "last_stat", "last_stat_abs_vusage",
                 "usage_delta_us", "wait_since", "indebt_since", "indelay_since",
                 "last_vtime", "usages", "usage_idx", "has_surplus", "in_walk")

    def __init__(self, cgroup, parent, vnow: int, cur_period: int) -> None:
        self.cgroup = cgroup
        self.level = 0 if parent is None else parent.level + 1
        self.ancestors = ([] if parent is None else parent.ancestors) + [self]
        self.cfg_weight = self.weight = self.active = self.inuse = self.last_inuse = 0
        self.saved_margin = 0
        self.cursor = 0
        self.vtime = self.done_vtime = vnow
        self.abs_vdebt = 0
        self.delay = self.delay_at = 0
        self.delay_ns = 0                  # blkg->delay_nsec (blkcg_set_delay)
        self.use_delay = False
        self.active_period = cur_period
        self.is_active = False
        self.child_active_sum = self.child_inuse_sum = self.child_adjusted_sum = 0
        self.hweight_gen = -1
        self.hweight_active = self.hweight_inuse = WEIGHT_ONE
        self.hweight_donating = self.hweight_after_donation = 0
        self.waitq: deque = deque()        # (bio, abs_cost), in order
        self.wait_due = None               # the wait queue's timer (s), or None
        self.activated_at = 0
        self.abs_vusage = 0
        self.stat = [0, 0, 0, 0]           # usage, wait, indebt, indelay (µs)
        self.last_stat = [0, 0, 0, 0]
        self.last_stat_abs_vusage = 0
        self.usage_delta_us = 0
        self.wait_since = self.indebt_since = self.indelay_since = 0
        self.last_vtime = 0                 # 5.4's usage bookkeeping
        self.usages = [0, 0, 0]
        self.usage_idx = 0
        self.has_surplus = False
        self.in_walk = False               # on iocg_flush_stat's inner walk (walk_list)

    @property
    def name(self) -> str:
        """The group's path for reports ("/" for the root)."""
        return "/" if self.cgroup is None else self.cgroup.name


class Ioc(RqQosPolicy):
    """``struct ioc``: iocost on one device. ``settings``: the device's io.cost.qos and
    io.cost.model (`IocostDevice`); ``device``: its name (io.weight's per-device
    lines); ``queue_depth`` and ``rotational`` choose the device class
    (``ioc_autop_idx``)."""

    rq_qos_id = RQ_QOS_COST
    uses_timers = True

    def __init__(self, settings: IocostDevice, device: str, queue_depth: int,
                 rotational: bool, kernel: str = "6.6", hz: int = 250) -> None:
        self.settings = settings
        self.device = device
        self.queue_depth = queue_depth
        self.rotational = rotational
        self.line = line(kernel)
        self.hz = hz
        self.enabled = settings.enable
        self.disables_wbt = self.line.disables_wbt
        self.weight_one = WEIGHT_ONE if self.line.rework else 1
        self.user_qos = settings.qos_user
        self.user_model = settings.model_user
        self.running = False
        self.vtime_rate = self.vtime_base_rate = VTIME_PER_USEC
        self.vtime_err = 0
        self.period_at = 0                   # µs
        self.period_at_vtime = 0
        self.cur_period = 0
        self.busy_level = 0
        self.hweight_gen = 0
        self.weights_updated = False
        self.dfgv_period_at = self.dfgv_period_rem = self.dfgv_usage_us_sum = 0
        self.autop_idx = 0
        self.autop_too_fast_at = self.autop_too_slow_at = None
        self.active: list = []               # the active groups, newest first
        self.groups: dict = {}               # Cgroup (None: the root) -> IocGroup
        self.nr_met = [0, 0]
        self.nr_missed = [0, 0]
        self.rq_wait_ns = 0
        self.period_due = None               # the period timer (s), or None
        self.wakeup_at = None
        self.timers_changed = False
        self.throttled: dict = {}            # pid -> IocGroup: current->throttle_disk
        self.costs: dict = {}                 # bio id -> (group, cost) (bi_iocost_cost)
        self.alloc_at: dict = {}             # bio id -> when it went to allocation (ns)
        self.rq_alloc: dict = {}             # request id -> its alloc_time_ns (an int key:
                                             # PyPy hashes an object by identity, dearly)
        self.released: list = []             # woken at once, handed out by timer_fired
        self.released_at = None
        self.vrate_series: list = []         # [time s, vrate %, busy_level]
        self._series_stride = 1
        self._series_skip = 0
        self.refresh_params(0, force=True)
        self.root = self._group(None, 0)

    # ------------------------------------------------------------------ time
    def now(self, now: float) -> tuple:
        """``ioc_now``: (ns, µs, vnow)."""
        ns = int(now * 1e9 + 0.5)
        us = ns // 1000
        return ns, us, self.period_at_vtime + (us - self.period_at) * self.vtime_rate

    @property
    def waiting(self) -> int:
        """Bios asleep on the groups' wait queues."""
        return sum(len(g.waitq) for g in self.groups.values())

    def _retime(self) -> None:
        """``wakeup_at``: the earliest of the period timer and the wait queues'."""
        due = self.period_due
        for g in self.active:
            if g.wait_due is not None and (due is None or g.wait_due < due):
                due = g.wait_due
        if self.released:
            due = self.released_at
        if due != self.wakeup_at:
            self.wakeup_at = due
            self.timers_changed = True

    # ------------------------------------------------------------------ params
    def refresh_params(self, now_ns: int, force: bool) -> bool:
        """``ioc_refresh_params``: the device class (``ioc_autop_idx``), and from it
        (unless the user set them) the qos parameters and the model; the period,
        margins and vrate bounds."""
        idx = self._autop_idx(now_ns)
        if idx == self.autop_idx and not force:
            return False
        if idx != self.autop_idx:
            self.vtime_rate = self.vtime_base_rate = VTIME_PER_USEC
        self.autop_idx = idx
        self.autop_too_fast_at = self.autop_too_slow_at = None
        self.qos = self.settings.qos_params(idx)
        self.i_lcoefs = self.settings.model_params(idx)
        u = self.i_lcoefs
        self.lcoefs = calc_lcoefs(u[0], u[1], u[2]) + calc_lcoefs(u[3], u[4], u[5])
        self.period_us = period_us(self.qos)
        self.timer_slack_ns = self.period_us * 1000 * TIMER_SLACK_PCT // 100
        self.refresh_margins()
        self.vrate_min = div_round_up(self.qos[4] * VTIME_PER_USEC, MILLION)
        self.vrate_max = div_round_up(self.qos[5] * VTIME_PER_USEC, MILLION)
        return True

    def refresh_margins(self) -> None:
        """``ioc_refresh_margins`` (5.10+), or 5.4's ``margin_us`` and
        ``inuse_margin_vtime``."""
        p, vrate = self.period_us, self.vtime_base_rate
        self.margin_min = (p * MARGIN_MIN_PCT // 100) * vrate
        self.margin_low = (p * MARGIN_LOW_PCT // 100) * vrate
        self.margin_target = (p * MARGIN_TARGET_PCT // 100) * vrate
        self.margin_us = p * MARGIN_PCT // 100
        self.inuse_margin_vtime = div_round_up(p * vrate * INUSE_MARGIN_PCT, 100)

    def _autop_idx(self, now_ns: int) -> int:
        """``ioc_autop_idx``: HDD, SSD_QD1, or SSD_DFL/SSD_FAST stepped by a vrate held
        over/under the class's bound for 10 s (not while the user set parameters)."""
        idx = self.autop_idx
        first = initial_autop(self.rotational, self.queue_depth)
        if first in (AUTOP_HDD, AUTOP_SSD_QD1):
            return first
        if idx < AUTOP_SSD_DFL:
            return AUTOP_SSD_DFL
        if self.user_qos or self.user_model:
            return idx
        p = AUTOP[idx]
        vrate_pct = self.vtime_base_rate * 100 // VTIME_PER_USEC
        if p.too_fast_vrate_pct and p.too_fast_vrate_pct <= vrate_pct:
            if self.autop_too_fast_at is None:
                self.autop_too_fast_at = now_ns
            if now_ns - self.autop_too_fast_at >= AUTOP_CYCLE_NSEC:
                return idx + 1
        else:
            self.autop_too_fast_at = None
        if p.too_slow_vrate_pct and p.too_slow_vrate_pct >= vrate_pct:
            if self.autop_too_slow_at is None:
                self.autop_too_slow_at = now_ns
            if now_ns - self.autop_too_slow_at >= AUTOP_CYCLE_NSEC:
                return idx - 1
        else:
            self.autop_too_slow_at = None
        return idx

    # ------------------------------------------------------------------ weights
    def _group(self, cgroup, now_us: int):
        """The group's `IocGroup` (``ioc_pd_init`` on its first bio), its parents first."""
        if cgroup is not None and cgroup.parent is None:
            cgroup = None                     # the tree's root is the root's IocGroup
        iocg = self.groups.get(cgroup)
        if iocg is None:
            parent = None if cgroup is None else self._group(cgroup.parent, now_us)
            vnow = self.period_at_vtime + (now_us - self.period_at) * self.vtime_rate
            iocg = self.groups[cgroup] = IocGroup(cgroup, parent, vnow, self.cur_period)
            self._weight_updated(iocg)
        return iocg

    def _weight_updated(self, iocg) -> None:
        """``weight_updated``: io.weight's line for this device, else its default."""
        weights = {} if iocg.cgroup is None else iocg.cgroup.io_weight
        weight = weights.get(self.device) or weights.get("default", CGROUP_WEIGHT_DFL)
        iocg.cfg_weight = weights.get(self.device, 0) * self.weight_one
        iocg.weight = weight * self.weight_one

    def propagate_weights(self, iocg, active: int, inuse: int, save: bool,
                          vnow: int = 0, commit: bool = True) -> None:
        """``__propagate_weights`` (``propagate_weights`` with ``commit``): set the
        group's active and inuse weights and carry the sums up the tree."""
        if not iocg.is_active and iocg.child_active_sum:
            inuse = div_round_up(active * iocg.child_inuse_sum, iocg.child_active_sum)
        else:
            inuse = min(max(inuse, 1), active)
        iocg.last_inuse = iocg.inuse
        if save:
            iocg.saved_margin = vnow - iocg.vtime
        if active != iocg.active or inuse != iocg.inuse:
            for lvl in range(iocg.level - 1, -1, -1):
                parent = iocg.ancestors[lvl]
                child = iocg.ancestors[lvl + 1]
                parent.child_active_sum += active - child.active
                parent.child_inuse_sum += inuse - child.inuse
                child.active = active
                child.inuse = inuse
                p_active = p_inuse = 0
                if parent.child_active_sum:
                    p_active = parent.weight
                    p_inuse = div_round_up(p_active * parent.child_inuse_sum,
                                           parent.child_active_sum)
                if p_active == parent.active and p_inuse == parent.inuse:
                    break
                active, inuse = p_active, p_inuse
            self.weights_updated = True
        if commit:
            self.commit_weights()

    def commit_weights(self) -> None:
        """``commit_weights``: cached hweights are stale from now."""
        if self.weights_updated:
            self.hweight_gen += 1
            self.weights_updated = False

    def current_hweight(self, iocg) -> tuple:
        """``current_hweight``: (hweight_active, hweight_inuse) in 1/65536, recomputed
        when weights changed since the group's last look."""
        if iocg.hweight_gen != self.hweight_gen:
            hwa = hwi = WEIGHT_ONE
            for lvl in range(iocg.level):
                parent = iocg.ancestors[lvl]
                child = iocg.ancestors[lvl + 1]
                active_sum, inuse_sum = parent.child_active_sum, parent.child_inuse_sum
                if not active_sum or not inuse_sum:
                    continue
                hwa = hwa * child.active // max(child.active, active_sum)
                hwi = hwi * child.inuse // max(child.inuse, inuse_sum)
            iocg.hweight_active = max(hwa, 1)
            iocg.hweight_inuse = max(hwi, 1)
            iocg.hweight_gen = self.hweight_gen
        return iocg.hweight_active, iocg.hweight_inuse

    def current_hweight_max(self, iocg) -> int:
        """``current_hweight_max``: the hweight_inuse the group would have at full inuse."""
        hwm = WEIGHT_ONE
        inuse = iocg.active
        for lvl in range(iocg.level - 1, -1, -1):
            parent = iocg.ancestors[lvl]
            child = iocg.ancestors[lvl + 1]
            child_inuse_sum = parent.child_inuse_sum + inuse - child.inuse
            hwm = hwm * inuse // child_inuse_sum
            inuse = div_round_up(parent.active * child_inuse_sum, parent.child_active_sum)
        return max(hwm, 1)

    # ------------------------------------------------------------------ activation
    def _activate(self, iocg, now_us: int, vnow: int, now: float) -> bool:
        """``iocg_activate``: False when the group may not be controlled (an inner
        group, or one under an active group: its bios go as the root's)."""
        if iocg.is_active:
            iocg.active_period = self.cur_period
            return True
        if iocg.child_active_sum:
            return False
        last_period = iocg.active_period
        iocg.active_period = self.cur_period
        for i in range(iocg.level - 1, 0, -1):
            if iocg.ancestors[i].is_active:
                return False
        if self.line.rework:
            # always start with the target budget (the excess was thrown away)
            delta = vnow - self.margin_target - iocg.vtime
            iocg.vtime += delta
            iocg.done_vtime += delta
        else:
            # 5.4: at most one margin of budget; a vtime from over 5 minutes ago is stale
            vmin = vnow - self.margin_us * self.vtime_rate
            max_period_delta = div_round_up(300 * MILLION, self.period_us)
            if last_period + max_period_delta < self.cur_period or iocg.vtime < vmin:
                delta = vmin - iocg.vtime
                iocg.vtime += delta
                iocg.done_vtime += delta
            iocg.last_vtime = iocg.vtime
        iocg.hweight_gen = self.hweight_gen - 1
        self.active.insert(0, iocg)
        iocg.is_active = True
        self.propagate_weights(iocg, iocg.weight, iocg.last_inuse or iocg.weight, True, vnow)
        iocg.activated_at = now_us
        if not self.running:
            self.running = True
            self.dfgv_period_at = now_us
            self.dfgv_period_rem = 0
            self._start_period(now_us, vnow, now)
        return True

    def _start_period(self, now_us: int, vnow: int, now: float) -> None:
        """``ioc_start_period``: the period timer, ``usecs_to_jiffies(period_us)`` on."""
        self.period_at = now_us
        self.period_at_vtime = vnow
        jiffies = int(now * self.hz + 1e-9)
        ticks = div_round_up(self.period_us * self.hz, MILLION)
        self.period_due = (jiffies + ticks) / self.hz
        self._retime()

    # ------------------------------------------------------------------ cost
    def bio_cost(self, bio, iocg, is_merge: bool) -> int:
        """``calc_vtime_cost_builtin``: the bio's absolute cost (vtime units)."""
        if bio.op == REQ_OP_READ:
            page, seqio, randio = self.lcoefs[0], self.lcoefs[1], self.lcoefs[2]
        elif bio.op == REQ_OP_WRITE:
            page, seqio, randio = self.lcoefs[3], self.lcoefs[4], self.lcoefs[5]
        else:
            return 0
        if not bio.nr_sectors and self.line.rework:
            return 0                          # an empty bio (5.10+)
        pages = max(bio.nr_sectors >> IOC_SECT_TO_PAGE_SHIFT, 1)
        cost = 0
        if not is_merge:
            seek_pages = 0
            if iocg.cursor:
                seek_pages = abs(bio.sector - iocg.cursor) >> IOC_SECT_TO_PAGE_SHIFT
            cost = randio if seek_pages > LCOEF_RANDIO_PAGES else seqio
        return cost + pages * page

    def _commit(self, iocg, bio, abs_cost: int, cost: int) -> None:
        """``iocg_commit_bio``."""
        self.costs[bio.id] = (iocg, cost)
        iocg.vtime += cost
        iocg.abs_vusage += abs_cost

    def _adjust_inuse_and_calc_cost(self, iocg, vtime: int, abs_cost: int,
                                    vnow: int) -> int:
        """The bio's cost at the group's hweight_inuse. 5.10+
        (``adjust_inuse_and_calc_cost``): a donor whose margin fell below the low margin
        and below its last look raises inuse in 25 % steps until the bio fits. 5.4: a
        donor within ``inuse_margin_vtime`` of vnow is reset to its full weight."""
        hwa, hwi = self.current_hweight(iocg)
        if not self.line.rework:
            if hwi < hwa and vtime + self.inuse_margin_vtime >= vnow:
                self.propagate_weights(iocg, iocg.weight, iocg.weight, False, vnow)
                hwi = self.current_hweight(iocg)[1]
            return div_round_up(abs_cost * WEIGHT_ONE, hwi)
        cost = div_round_up(abs_cost * WEIGHT_ONE, hwi)
        margin = vnow - vtime - cost
        if iocg.abs_vdebt:
            return cost
        if margin >= iocg.saved_margin or margin >= self.margin_low or \
                iocg.inuse == iocg.active:
            return cost
        if not iocg.is_active:
            return cost
        new_inuse = iocg.inuse
        adj_step = div_round_up(iocg.active * INUSE_ADJ_STEP_PCT, 100)
        while True:
            new_inuse += adj_step
            self.propagate_weights(iocg, iocg.active, new_inuse, True, vnow)
            hwi = self.current_hweight(iocg)[1]
            cost = div_round_up(abs_cost * WEIGHT_ONE, hwi)
            if not (vtime + cost > vnow and iocg.inuse != iocg.active):
                return cost

    # ------------------------------------------------------------------ rq_qos hooks
    @trace_boundary
    def throttle(self, bio, now: float) -> bool:
        """``ioc_rqos_throttle``: True when ``bio`` goes on now, False when its
        submitter sleeps on its group's wait queue."""
        ns, us, vnow = self.now(now)
        self.alloc_at[bio.id] = ns
        cgroup = bio.cgroup
        if cgroup is None or not self.enabled:
            return True
        iocg = self._group(cgroup, us)
        if self.line.rework:
            abs_cost = self.bio_cost(bio, iocg, False)
            if not abs_cost or not self._activate(iocg, us, vnow, now):
                return True
        else:
            if not self._activate(iocg, us, vnow, now):
                return True        # 5.4 activates even for a bio that costs nothing
            abs_cost = self.bio_cost(bio, iocg, False)
            if not abs_cost:
                return True
        iocg.cursor = bio.sector + bio.nr_sectors
        vtime = iocg.vtime
        cost = self._adjust_inuse_and_calc_cost(iocg, vtime, abs_cost, vnow)
        if not iocg.waitq and not iocg.abs_vdebt and vtime + cost <= vnow:
            self._commit(iocg, bio, abs_cost, cost)
            return True
        if not iocg.is_active:
            self._commit(iocg, bio, abs_cost, cost)
            return True
        # (bio_issue_as_root_blkg: blksim's bios carry no REQ_META/REQ_SWAP)
        if self.line.rework and not iocg.abs_vdebt and iocg.inuse != iocg.active:
            self.propagate_weights(iocg, iocg.active, iocg.active, True, vnow)
        del self.alloc_at[bio.id]          # it allocates when it wakes
        iocg.waitq.append((bio, abs_cost))
        woken = kick_waitq(self, iocg, ns, us, vnow, self.line.rework)
        if woken:
            # let go at once: the first is this bio's turn only if it was alone
            if woken[-1] is bio:
                woken.pop()
                self.alloc_at[bio.id] = ns
                self._release(woken, now)
                return True
            self._release(woken, now)
        self._retime()
        return False

    def _release(self, bios: list, now: float) -> None:
        """Bios woken outside `timer_fired` (by a throttle or a merge): handed out by
        an immediate timer."""
        if bios:
            self.released.extend(bios)
            self.released_at = now
            self._retime()

    def merge(self, rq, bio, now: float) -> None:
        """``ioc_rqos_merge``: a merged bio costs its pages; charged if within budget
        (and the request was charged), else as debt."""
        cgroup = bio.cgroup
        if cgroup is None or not self.enabled:
            return
        ns, us, vnow = self.now(now)
        iocg = self._group(cgroup, us)
        abs_cost = self.bio_cost(bio, iocg, True)
        if not abs_cost:
            return
        cost = self._adjust_inuse_and_calc_cost(iocg, iocg.vtime, abs_cost, vnow)
        bio_end = bio.sector + bio.nr_sectors
        if rq.sector < bio_end and rq.sector + rq.nr_sectors == iocg.cursor:
            iocg.cursor = bio_end
        if rq.bios and rq.bios[0].id in self.costs and iocg.vtime + cost <= vnow:
            self._commit(iocg, bio, abs_cost, cost)
            return
        if iocg.is_active:
            incur_debt(self, iocg, abs_cost, us, vnow)
            if kick_delay(self, iocg, us, vnow):
                self.throttled[bio.pid] = iocg      # blkcg_schedule_throttle
        else:
            self._commit(iocg, bio, abs_cost, cost)

    def throttle_delay(self, pid: int, now: float) -> float:
        """``blkcg_maybe_throttle_current``: the seconds task ``pid``, marked by a debt's
        delay since it last asked, sleeps on its return to user space (0.0: none). The
        mark is used up; the delay is the group's as of ``now``."""
        iocg = self.throttled.pop(pid, None)
        if iocg is None:
            return 0.0
        return maybe_throttle(iocg) / 1e9

    def process_exited(self, pid: int) -> None:
        """A task ended: its mark goes with it."""
        self.throttled.pop(pid, None)

    def track(self, rq, bio) -> None:
        """The request's ``alloc_time_ns`` (when its bio went to allocation)."""
        self.rq_alloc[rq.id] = self.alloc_at.pop(bio.id, None)

    def done_bio(self, bio, now: float) -> None:
        """``ioc_rqos_done_bio``: the bio's cost is done (``done_vtime``)."""
        entry = self.costs.pop(bio.id, None)
        if entry is not None:
            entry[0].done_vtime += entry[1]

    def done(self, rq, now: float) -> list:
        """``ioc_rqos_done``: a read or write request met or missed its latency target
        (allocation to completion, less its size cost); its tag wait is ``rq_wait``."""
        alloc_ns = self.rq_alloc.pop(rq.id, None)
        if alloc_ns is None or not self.enabled:
            return []
        if rq.op == REQ_OP_READ:
            rw, lat = 0, self.qos[1]
        elif rq.op == REQ_OP_WRITE:
            rw, lat = 1, self.qos[3]
        else:
            return []
        now_ns = int(now * 1e9 + 0.5)
        start_ns = int(rq.t_insert * 1e9 + 0.5)
        on_q_ns = now_ns - alloc_ns
        pages = rq.nr_sectors >> IOC_SECT_TO_PAGE_SHIFT
        size_nsec = pages * self.lcoefs[3 * rw] // VTIME_PER_NSEC
        if on_q_ns <= size_nsec or on_q_ns - size_nsec <= lat * 1000:
            self.nr_met[rw] += 1
        else:
            self.nr_missed[rw] += 1
        self.rq_wait_ns += start_ns - alloc_ns
        return []

    # ------------------------------------------------------------------ timers
    @trace_boundary
    def timer_fired(self, now: float) -> list:
        """The due timers: bios woken at once, each group's wait timer
        (``iocg_waitq_timer_fn``), then the period's (``ioc_timer_fn``)."""
        woken = self.released
        self.released = []
        ns, us, vnow = self.now(now)
        for iocg in list(self.active):
            if iocg.wait_due is not None and iocg.wait_due <= now:
                iocg.wait_due = None
                woken.extend(kick_waitq(self, iocg, ns, us, vnow,
                                              bool(iocg.abs_vdebt) and self.line.rework))
        if self.period_due is not None and self.period_due <= now:
            self.period_due = None
            woken.extend(ioc_timer_fn(self, now))
        for bio in woken:
            self.alloc_at[bio.id] = ns
        self.timers_changed = True
        self.wakeup_at = None
        self._retime()
        return woken

    def start_period(self, now_us: int, vnow: int, now: float) -> None:
        """`_start_period` for the period's code."""
        self._start_period(now_us, vnow, now)

    def record_vrate(self, now: float) -> None:
        """One point of the vrate series per period, thinned to stay bounded."""
        self._series_skip += 1
        if self._series_skip < self._series_stride:
            return
        self._series_skip = 0
        self.vrate_series.append([round(now, 6), self.vrate_pct, self.busy_level])
        if len(self.vrate_series) >= VRATE_SERIES_CAP:
            self.vrate_series = self.vrate_series[::2]
            self._series_stride *= 2

    # ------------------------------------------------------------------ figures
    @property
    def vrate_pct(self) -> float:
        """``cost.vrate``: vrate in % of the model's rate, two decimals."""
        vp10k = (self.vtime_base_rate * 10000 * 2 + VTIME_PER_USEC) // (2 * VTIME_PER_USEC)
        return vp10k / 100

    def io_stat(self) -> dict:
        """io.stat's cost figures per group (its path): the root's ``cost.vrate`` (%),
        every group's ``cost.usage``, ``cost.wait``, ``cost.indebt``, ``cost.indelay``
        (µs, as of the last period: ``last_stat``). Empty on 5.4 (no ``ioc_pd_stat``)."""
        if not self.line.io_stat:
            return {}
        out = {}
        for iocg in self.groups.values():
            entry = {}
            if iocg.level == 0:
                entry["cost.vrate"] = self.vrate_pct
            entry.update(zip(COST_STAT_KEYS, iocg.last_stat))
            out[iocg.name] = entry
        return out

    def figures(self) -> dict:
        """The run's iocost summary for results.json: the device class, period,
        vrate now and its series ([time s, vrate %, busy_level] per period)."""
        return {"autop": AUTOP_NAMES.get(self.autop_idx, "?"),
                "period_us": self.period_us,
                "vrate_pct": self.vrate_pct,
                "vrate_min_pct": self.qos[4] / 10000, "vrate_max_pct": self.qos[5] / 10000,
                "busy_level": self.busy_level,
                "vrate_series": [list(p) for p in self.vrate_series]}
