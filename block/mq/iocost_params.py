"""blk-iocost's parameters: the constants, the built-in device classes (``autop``), the
linear cost model's coefficients, the version table, and the syntax of ``io.cost.qos``,
``io.cost.model`` and ``io.weight`` (block/blk-iocost.c).

Two copies of block/blk-iocost.c were read: a pre-5.10 one (commit 00410f1b, 5.9
development; its algorithm is 5.4's: the first donation scheme, one margin, a debt
delay timer) and a 6.x one (commit 4e6bd13a: Andy's donation method, three margins,
vtime error compensation, debt forgiveness, the decaying delay, io.stat's ``cost.*``),
which blksim follows for 5.10, 5.15, 6.1 and 6.6 (`LINES`; the rework that made it
landed in 5.10: "blk-iocost: implement Andy's method for donation weight updates").

Units as the kernel keeps them: time in µs, vtime in units of ``VTIME_PER_SEC`` = 2^37
per second of device time, ``vrate`` in vtime per µs (``VTIME_PER_USEC`` is 100 %),
percentiles and vrate bounds in ppm, hierarchical weights in 1/65536 (``WEIGHT_ONE``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

MILLION = 1_000_000
NSEC_PER_USEC = 1000
#: the period's bounds (``MIN_PERIOD``, ``MAX_PERIOD``, µs)
MIN_PERIOD, MAX_PERIOD = 1000, 1_000_000
VTIME_PER_SEC = 1 << 37
VTIME_PER_USEC = VTIME_PER_SEC // MILLION
VTIME_PER_NSEC = VTIME_PER_SEC // 1_000_000_000
#: io.cost.qos's min/max bounds (ppm of the model's rate: 1 % to 10000 %)
VRATE_MIN_PPM, VRATE_MAX_PPM = 10_000, 100_000_000
VRATE_MIN = VTIME_PER_USEC * VRATE_MIN_PPM // MILLION
VRATE_CLAMP_ADJ_PCT = 4
WEIGHT_ONE = 1 << 16
#: cgroup weights (include/linux/cgroup.h): CGROUP_WEIGHT_MIN, _DFL, _MAX
CGROUP_WEIGHT_MIN, CGROUP_WEIGHT_DFL, CGROUP_WEIGHT_MAX = 1, 100, 10_000
RQ_WAIT_BUSY_PCT = 5
UNBUSY_THR_PCT = 75
MAX_LAGGING_PERIODS = 10
AUTOP_CYCLE_NSEC = 10 * 1_000_000_000
IOC_PAGE_SHIFT = 12
IOC_PAGE_SIZE = 1 << IOC_PAGE_SHIFT
IOC_SECT_TO_PAGE_SHIFT = IOC_PAGE_SHIFT - 9
#: further apart than 16 MiB (4096 pages) from the group's last I/O end: random
LCOEF_RANDIO_PAGES = 4096
#: ``vrate_adj_pct``: the vrate step (%) by |busy_level|
VRATE_ADJ_PCT = (0, 0, 0, 0) + (1,) * 16 + (2,) * 16 + (4,) * 8 + (8,) * 8 + (16,)

# 5.10+ (the 6.x copy): the three margins (% of a period), inuse steps, the timer
# slack, the debt delay and debt forgiveness
MARGIN_MIN_PCT, MARGIN_LOW_PCT, MARGIN_TARGET_PCT = 10, 20, 50
INUSE_ADJ_STEP_PCT = 25
TIMER_SLACK_PCT = 1
MIN_DELAY_THR_PCT, MAX_DELAY_THR_PCT = 500, 25_000
MIN_DELAY, MAX_DELAY = 250, 250_000            # µs
DFGV_USAGE_PCT, DFGV_PERIOD = 50, 100_000       # %, µs
# 5.4 (the pre-5.10 copy): one margin, the surplus thresholds, usage history
MARGIN_PCT, INUSE_MARGIN_PCT = 50, 10
WAITQ_TIMER_MARGIN_PCT = 5
NR_USAGE_SLOTS, MIN_VALID_USAGES = 3, 2
SURPLUS_SCALE_PCT = 125
SURPLUS_SCALE_ABS = WEIGHT_ONE // 50
SURPLUS_MIN_ADJ_DELTA = WEIGHT_ONE // 33

#: io.cost.qos's parameters in ``struct ioc_params.qos``'s order
QOS_KEYS = ("rpct", "rlat", "wpct", "wlat", "min", "max")
#: io.cost.model's linear coefficients (``i_lcoefs``), in the file's order
MODEL_KEYS = ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops")

AUTOP_HDD, AUTOP_SSD_QD1, AUTOP_SSD_DFL, AUTOP_SSD_FAST = 1, 2, 3, 4
AUTOP_NAMES = {AUTOP_HDD: "HDD", AUTOP_SSD_QD1: "SSD_QD1", AUTOP_SSD_DFL: "SSD_DFL",
               AUTOP_SSD_FAST: "SSD_FAST"}


@dataclass(frozen=True)
class Autop:
    """One built-in device class (``autop[]``, the same in both copies): qos as
    (rppm, rlat µs, wppm, wlat µs, min ppm, max ppm), the model's six inputs, and the
    vrate (%) over/under which for 10 s the next/previous class is taken."""

    qos: tuple
    i_lcoefs: tuple
    too_fast_vrate_pct: int = 0
    too_slow_vrate_pct: int = 0


AUTOP = {
    AUTOP_HDD: Autop((0, 250_000, 0, 250_000, VRATE_MIN_PPM, VRATE_MAX_PPM),
                     (174019176, 41708, 370, 178075866, 42705, 378)),
    AUTOP_SSD_QD1: Autop((0, 25_000, 0, 25_000, VRATE_MIN_PPM, VRATE_MAX_PPM),
                         (245855193, 61575, 6946, 141365009, 33716, 26796)),
    AUTOP_SSD_DFL: Autop((0, 25_000, 0, 25_000, VRATE_MIN_PPM, VRATE_MAX_PPM),
                         (488636629, 8932, 8518, 427891549, 28755, 21940),
                         too_fast_vrate_pct=500),
    AUTOP_SSD_FAST: Autop((0, 5_000, 0, 5_000, VRATE_MIN_PPM, VRATE_MAX_PPM),
                          (3102524156, 724816, 778122, 1742780862, 425702, 443193),
                          too_slow_vrate_pct=10),
}


@dataclass(frozen=True)
class IocostLine:
    """What differs between the kernel lines (see the module docstring)."""

    #: "andy" (5.10+: transfer_surpluses) or "surplus" (5.4: inuse give-away/take-back)
    donation: str
    #: 5.10+: three margins, adjust_inuse_and_calc_cost, vtime error compensation
    #: (ioc_refresh_vrate), debt forgiveness, the decaying delay, weights x WEIGHT_ONE
    rework: bool
    #: 5.4: while requests wait for tags (rq_wait_pct > 5) vrate may fall to 1 %
    #: whatever io.cost.qos's min says
    rq_wait_ignores_min: bool
    #: ioc_qos_write turns writeback throttling off while iocost is enabled
    disables_wbt: bool
    #: io.stat prints cost.vrate, cost.usage (and cost.wait/indebt/indelay): ioc_pd_stat
    io_stat: bool
    #: enable=%u checked (EINVAL on a bad number); 5.4 ignores match_u64's error
    enable_checked: bool


LINES = {
    "5.4": IocostLine("surplus", False, True, False, False, False),
    "5.10": IocostLine("andy", True, False, True, True, True),
    "5.15": IocostLine("andy", True, False, True, True, True),
    "6.1": IocostLine("andy", True, False, True, True, True),
    "6.6": IocostLine("andy", True, False, True, True, True),
}


def line(kernel: str) -> IocostLine:
    """The `IocostLine` of a multi-queue kernel line."""
    major_minor = ".".join(kernel.split(".")[:2])
    try:
        return LINES[major_minor]
    except KeyError:
        raise ValueError(f"iocost: no line for kernel {kernel}; lines: "
                         f"{', '.join(LINES)}") from None


def div_round_up(a: int, b: int) -> int:
    """``DIV64_U64_ROUND_UP`` for non-negative integers."""
    return -(-a // b)


def calc_lcoefs(bps: int, seqiops: int, randiops: int) -> tuple:
    """``calc_lcoefs``: (page, seqio, randio) vtime costs from a direction's maximum
    sequential bytes/s, sequential 4k IOPS and random 4k IOPS: a page costs
    1 s / (bps / 4096), an I/O 1 s / iops minus one page's cost (not below 0)."""
    page = seqio = randio = 0
    if bps:
        bps_pages = div_round_up(bps, IOC_PAGE_SIZE)
        page = div_round_up(VTIME_PER_SEC, bps_pages) if bps_pages else 1
    if seqiops:
        v = div_round_up(VTIME_PER_SEC, seqiops)
        if v > page:
            seqio = v - page
    if randiops:
        v = div_round_up(VTIME_PER_SEC, randiops)
        if v > page:
            randio = v - page
    return page, seqio, randio


def period_us(qos: tuple) -> int:
    """``ioc_refresh_period_us``: the period is a multiple of the higher latency
    target, 2x at the 90th percentile or above up to 10x at the 50th
    (``max((MILLION - ppm) / 50000, 2)``), within 1 ms..1 s."""
    rppm, rlat, wppm, wlat = qos[0], qos[1], qos[2], qos[3]
    ppm, lat = (rppm, rlat) if rlat >= wlat else (wppm, wlat)
    multi = max((MILLION - ppm) // 50000, 2) if ppm else 2
    return min(max(multi * lat, MIN_PERIOD), MAX_PERIOD)


def initial_autop(rotational: bool, queue_depth: int) -> int:
    """``ioc_autop_idx`` on a fresh ioc: HDD for a rotational disk, SSD_QD1 for a queue
    depth of 1 (SATA SSDs with broken NCQ), else SSD_DFL."""
    if rotational:
        return AUTOP_HDD
    if queue_depth == 1:
        return AUTOP_SSD_QD1
    return AUTOP_SSD_DFL


# ---------------------------------------------------------------------- the files

@dataclass
class IocostDevice:
    """io.cost.qos and io.cost.model as written for one disk. ``qos``/``model``: the
    parameters the lines named (the others are the device class's, as the kernel starts
    from its current values); ``qos_user``/``model_user``: ctrl=user (a parameter given
    makes it user, a later ctrl=auto undoes that and drops them)."""

    enable: bool = False
    qos_user: bool = False
    qos: dict = field(default_factory=dict)
    qos_written: bool = False
    model_user: bool = False
    model: dict = field(default_factory=dict)
    model_written: bool = False

    def qos_line(self, device: str) -> str:
        """The io.cost.qos line that gives these settings again."""
        parts = [device, f"enable={int(self.enable)}", f"ctrl={'user' if self.qos_user else 'auto'}"]
        if self.qos_user:
            for key in QOS_KEYS:
                if key in self.qos:
                    parts.append(f"{key}={_format_qos(key, self.qos[key])}")
        return " ".join(parts)

    def model_line(self, device: str) -> str:
        """The io.cost.model line that gives these settings again."""
        parts = [device, f"ctrl={'user' if self.model_user else 'auto'}", "model=linear"]
        if self.model_user:
            parts += [f"{k}={self.model[k]}" for k in MODEL_KEYS if k in self.model]
        return " ".join(parts)

    def qos_params(self, autop_idx: int) -> tuple:
        """The six qos parameters in effect (the class's, overridden by the user's)."""
        base = AUTOP[autop_idx].qos
        if not self.qos_user:
            return base
        return tuple(self.qos.get(k, v) for k, v in zip(QOS_KEYS, base))

    def model_params(self, autop_idx: int) -> tuple:
        """The six model inputs in effect."""
        base = AUTOP[autop_idx].i_lcoefs
        if not self.model_user:
            return base
        return tuple(self.model.get(k, v) for k, v in zip(MODEL_KEYS, base))


def _format_qos(key: str, v: int) -> str:
    if key in ("rlat", "wlat"):
        return str(v)
    return f"{v // 10000}.{v % 10000 // 100:02d}"      # ioc_qos_prfill's %u.%02u


def _parse_float2(text: str):
    """``cgroup_parse_float(buf, 2)``: a decimal number scaled by 100 (extra decimals
    are cut), or None when it is not one."""
    neg = text.startswith("-")
    body = text[1:] if neg else text
    whole, dot, frac = body.partition(".")
    if not whole.isdigit() or (dot and not frac.isdigit()):
        return None
    v = int(whole) * 100 + int((frac + "00")[:2] if dot else 0)
    return -v if neg else v


def _u64(text: str):
    return int(text) if text.isdigit() and int(text) < 1 << 64 else None


def parse_qos(tokens: list, dev: IocostDevice, enable_checked: bool) -> str | None:
    """Apply one io.cost.qos line's tokens (after the device) to ``dev`` as
    ``ioc_qos_write`` does; returns the problem (the kernel's EINVAL) or None."""
    qos = dict(dev.qos)
    enable, user = dev.enable, dev.qos_user
    for tok in tokens:
        key, eq, text = tok.partition("=")
        if not eq:
            return f"{tok!r}: expected KEY=VALUE"
        if key == "enable":
            v = _u64(text)
            if v is None and enable_checked:
                return f"{tok!r}: enable must be a whole number (0 or 1)"
            enable = bool(v)
        elif key == "ctrl":
            if text not in ("auto", "user"):
                return f"{tok!r}: ctrl must be auto or user"
            user = text == "user"
        elif key in ("rpct", "wpct"):
            v = _parse_float2(text)
            if v is None or not 0 <= v <= 10000:
                return f"{tok!r}: {key} must be a percentage from 0 to 100"
            qos[key] = v * 100
            user = True
        elif key in ("rlat", "wlat"):
            v = _u64(text)
            if v is None:
                return f"{tok!r}: {key} must be a whole number of microseconds"
            qos[key] = v
            user = True
        elif key in ("min", "max"):
            v = _parse_float2(text)
            if v is None or v < 0:
                return f"{tok!r}: {key} must be a percentage of at least 0"
            qos[key] = min(max(v * 100, VRATE_MIN_PPM), VRATE_MAX_PPM)
            user = True
        else:
            return (f"{tok!r}: unknown key {key!r}; io.cost.qos takes enable, ctrl, "
                    f"{', '.join(QOS_KEYS)}")
    lo = qos.get("min", VRATE_MIN_PPM) if user else VRATE_MIN_PPM
    hi = qos.get("max", VRATE_MAX_PPM) if user else VRATE_MAX_PPM
    if lo > hi:
        return f"min {lo / 10000:g}% is above max {hi / 10000:g}%"
    dev.enable, dev.qos_user, dev.qos_written = enable, user, True
    dev.qos = qos if user else {}
    return None


def parse_model(tokens: list, dev: IocostDevice) -> str | None:
    """Apply one io.cost.model line's tokens to ``dev`` as ``ioc_cost_model_write``
    does; returns the problem or None."""
    model = dict(dev.model)
    user = dev.model_user
    for tok in tokens:
        key, eq, text = tok.partition("=")
        if not eq:
            return f"{tok!r}: expected KEY=VALUE"
        if key == "ctrl":
            if text not in ("auto", "user"):
                return f"{tok!r}: ctrl must be auto or user"
            user = text == "user"
        elif key == "model":
            if text != "linear":
                return f"{tok!r}: the only model is linear"
        elif key in MODEL_KEYS:
            v = _u64(text)
            if v is None:
                return f"{tok!r}: {key} must be a whole number"
            model[key] = v
            user = True
        else:
            return (f"{tok!r}: unknown key {key!r}; io.cost.model takes ctrl, model, "
                    f"{', '.join(MODEL_KEYS)}")
    dev.model_user, dev.model_written = user, True
    dev.model = model if user else {}
    return None


def parse_weight_line(line_text: str, out: dict, is_device) -> str | None:
    """One io.weight line into ``out`` (``"default"`` -> N, device -> N), as
    ``ioc_weight_write`` reads it: ``default N`` or ``N`` sets the group's default;
    ``DEVICE N`` the weight on one device, ``DEVICE default`` takes it back to the
    default. N is 1..10000. Returns the problem or None."""
    tokens = line_text.split()
    if not tokens:
        return None
    first = tokens[0]
    if first == "default" or first.isdigit():
        value = tokens[1] if first == "default" and len(tokens) == 2 else \
            (first if len(tokens) == 1 else None)
        key = "default"
    elif is_device(first):
        if len(tokens) != 2:
            return f"{line_text.strip()!r}: expected \"DEVICE N\" or \"DEVICE default\""
        if tokens[1] == "default":
            out.pop(first, None)
            return None
        value, key = tokens[1], first
    else:
        return (f"{line_text.strip()!r}: expected \"default N\", \"N\" or \"DEVICE N\" "
                f"with a disk of the run")
    if value is None or not value.isdigit() or \
            not CGROUP_WEIGHT_MIN <= int(value) <= CGROUP_WEIGHT_MAX:
        return (f"{line_text.strip()!r}: a weight is a whole number from "
                f"{CGROUP_WEIGHT_MIN} to {CGROUP_WEIGHT_MAX}")
    out[key] = int(value)
    return None
