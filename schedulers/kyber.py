"""Kyber, the token-based multi-queue scheduler of Linux 4.20 to 6.6 (block/kyber-iosched.c).

Kyber sorts nothing. It splits requests into four *scheduling domains* by operation
(``kyber_sched_domain``): reads, writes, discards, and everything else (flushes and the
rest). Each domain has a queue-wide pool of *tokens* (an ``sbitmap_queue`` in the kernel);
a request must hold a token of its domain to be dispatched and gives it back when it is
freed. Limiting the tokens limits how many requests of a domain are at the device at once,
and so how long a request of another domain waits behind them there.

Requests wait per hardware queue (hctx) in per-software-queue (ctx) lists, one per domain,
where later bios may still merge into them (``kyber_bio_merge`` scans the submitting ctx's
list). Dispatch (``kyber_dispatch_request``) serves the current domain for up to a batch of
requests (16 reads, 8 writes, 1 discard, 1 other) and then moves round to the next domain
that can hand out a request. Taking from a domain (``kyber_dispatch_cur_domain``): a request
already on the hctx's own list of that domain needs only a token; otherwise, if some ctx
holds requests of the domain, Kyber first takes a token and only then moves *all* those ctx
lists onto the hctx list (``kyber_flush_busy_kcqs``), so requests stay mergeable until they
can go. Without a token the hctx waits on the pool (``kyber_get_domain_token``) and is run
again when a token is freed (``kyber_domain_wake``).

Depths follow latency (the 4.20 rewrite, commit 6e25cb01ea20). Each completion of a read,
write or discard adds two samples to that domain's histograms
(``kyber_completed_request``, ``add_latency_sample``): the *total* latency (completion
minus the request's allocation) and the *I/O* latency (completion minus its issue to the
device), in 8 buckets a quarter of the domain's target wide (buckets 0-3 are within the
target, "good"). Then the statistics timer is set to fire within ``HZ/10`` jiffies
(``timer_reduce``). When it fires (``kyber_timer_fn``):

1. The device is *congested* when some domain's p90 I/O latency lies in a bad bucket.
2. For each domain, the p99 total latency bucket is taken (``calculate_percentile``: only
   once the histogram has 500 samples or a second has passed since the domain's timeout
   was armed; the histogram is then cleared). If congested, a domain with no p99 this
   window uses the one remembered from an earlier window, and the memory is cleared; if
   not congested, a p99 found is remembered.
3. A domain with a p99, if congested or if its own p99 is bad, gets the depth
   ``depth * (p99 + 1) / 4`` (``>> 2``), clamped to [1, its maximum]
   (``kyber_resize_domain``). So congestion shrinks domains meeting their target (by 1/4
   up to 4/4) and grows the ones missing it (up to twice), and without congestion only
   domains missing their own target grow.

Domain constants (``kyber_depth``, ``kyber_batch_size``, ``kyber_latency_targets``):

=========  ========================  =====  ==================================
domain     maximum (= first) depth   batch  latency target
=========  ========================  =====  ==================================
READ       256                       16     ``read_lat_nsec`` (2 ms)
WRITE      128                       8      ``write_lat_nsec`` (10 ms)
DISCARD    64                        1      5 s (no file)
OTHER      16                        1      none: no statistics, never resized
=========  ========================  =====  ==================================

Asynchronous requests (writes without REQ_SYNC/FUA/PREFLUSH: ``!op_is_sync``) may take
only ``KYBER_ASYNC_PERCENT`` = 75 % of each word of the scheduler tag bitmap
(``kyber_limit_depth``, ``sbitmap_get_shallow``), so a write flood cannot take every
scheduler tag from the readers.

Version differences (block/kyber-iosched.c of 5.4.214, 5.10.13, 5.15.100, 6.1.20 and 6.6;
the algorithm above is the same in all of them):

* 5.4 and 5.10 compute the async depth once, in ``kyber_queue_data_alloc`` at
  ``init_sched``, from the scheduler tag bitmap's word size at that time; writing
  ``queue/nr_requests`` later leaves it as it was. 5.15 added ``kyber_depth_updated``
  (the ``depth_updated`` hook, 5.12's "kyber: introduce kyber_depth_updated()"), which
  recomputes it from the bitmap every time the depth changes.

Everything else that differs between those trees is the kernel's interfaces (tracepoints
keyed by ``dev_t`` from 5.15, ``bio_merge`` getting the queue instead of the hctx,
ELEVATOR_F_MQ_AWARE in 5.15 and clearing QUEUE_FLAG_SQ_SCHED in 6.1 -- both saying Kyber
is per hctx, as it always was -- the insert flags of 6.6), not behaviour.
"""

from __future__ import annotations

from collections import deque

from blksim.block.elevator import Tunable, kernel_version
from blksim.block.mq.elevator import MqElevator, MqHctx, MqQueueInfo
from blksim.block.mq.tags import bits_per_word

# The scheduling domains, in the kernel's order (which is the order dispatch rotates in).
READ, WRITE, DISCARD, OTHER = 0, 1, 2, 3
NUM_DOMAINS = 4
DOMAIN_NAMES = ("READ", "WRITE", "DISCARD", "OTHER")

#: ``kyber_depth``: the most tokens each domain's pool can have (also its first depth).
KYBER_DEPTH = (256, 128, 64, 16)
#: ``kyber_batch_size``: requests dispatched from one domain in a row.
KYBER_BATCH_SIZE = (16, 8, 1, 1)
#: ``kyber_latency_targets`` of the discard domain (read and write are the tunables), ns.
DISCARD_LAT_NSEC = 5_000_000_000
#: ``KYBER_ASYNC_PERCENT``: share of each scheduler-tag word async requests may take.
KYBER_ASYNC_PERCENT = 75

# Histogram buckets are target >> KYBER_LATENCY_SHIFT wide; the first GOOD_BUCKETS are
# within the target; there are LATENCY_BUCKETS in all (the last one open-ended).
KYBER_LATENCY_SHIFT = 2
GOOD_BUCKETS = 1 << KYBER_LATENCY_SHIFT
LATENCY_BUCKETS = 2 << KYBER_LATENCY_SHIFT

# The two latencies measured per completion (kyber_completed_request).
TOTAL_LATENCY, IO_LATENCY = 0, 1
LATENCY_TYPE_NAMES = ("total", "I/O")

#: calculate_percentile waits for this many samples (or one second) before it answers.
PERCENTILE_MIN_SAMPLES = 500

_U64_MAX = 2**64 - 1
_EPS = 1e-9          # jiffies = floor(now * HZ), robust to float error at a tick

# Behaviour switches per kernel line; see the module docstring.
_VARIANTS = {
    "5.4": {"depth_updated": False},
    "5.10": {"depth_updated": False},
    "5.15": {"depth_updated": True},
    "6.1": {"depth_updated": True},
    "6.6": {"depth_updated": True},
}


def variant_for_kernel(kernel: str) -> str:
    """The Kyber variant kernel line ``kernel`` behaves like (newest not newer than it)."""
    wanted = kernel_version(kernel)
    fits = [v for v in _VARIANTS if kernel_version(v) <= wanted]
    if not fits:
        raise ValueError(f"kyber is modelled from kernel 5.4 on, got {kernel!r}; valid: "
                         + ", ".join(_VARIANTS))
    return max(fits, key=kernel_version)


#: ``kyber_sched_domain``'s choice per ``enum req_op`` (READ, WRITE, FLUSH, DISCARD):
#: a flush, like every other op, is OTHER.
_DOMAIN_OF_OP = (READ, WRITE, OTHER, DISCARD)


def sched_domain(rq) -> int:
    """``kyber_sched_domain``: a request's domain from its operation (``rq.op``)."""
    return _DOMAIN_OF_OP[rq.op]


def latency_bucket(latency_ns: int, target_ns: int) -> int:
    """``add_latency_sample``: the histogram bucket of a latency against a target."""
    if latency_ns <= 0:
        return 0
    divisor = max(target_ns >> KYBER_LATENCY_SHIFT, 1)
    return min((latency_ns - 1) // divisor, LATENCY_BUCKETS - 1)


def percentile_bucket(buckets, percentile: int) -> int:
    """The bucket holding the ``percentile``-th sample of a histogram (the walk of
    ``calculate_percentile``: the first bucket whose running count reaches
    ``ceil(samples * percentile / 100)``; the last bucket otherwise)."""
    samples = sum(buckets)
    wanted = -(-samples * percentile // 100)
    for bucket in range(LATENCY_BUCKETS - 1):
        if buckets[bucket] >= wanted:
            return bucket
        wanted -= buckets[bucket]
    return LATENCY_BUCKETS - 1


class KyberHctx:
    """``struct kyber_hctx_data``: one hardware queue's requests and dispatch state.

    ``kcqs[ctx][domain]`` is a software queue's list of requests of a domain (newest
    last); ``kcq_map[domain]`` the ctxs whose list of that domain is not empty;
    ``rqs[domain]`` the hctx's own list, requests already flushed from the ctxs;
    ``cur_domain`` and ``batching`` where dispatch is; ``queued`` how many requests it
    holds in all."""

    __slots__ = ("hctx", "kcqs", "kcq_map", "rqs", "cur_domain", "batching", "queued")

    def __init__(self, hctx: MqHctx) -> None:
        self.hctx = hctx
        self.kcqs: dict[int, tuple] = {}
        self.kcq_map = tuple(set() for _ in range(NUM_DOMAINS))
        self.rqs = tuple(deque() for _ in range(NUM_DOMAINS))
        self.cur_domain = READ
        self.batching = 0
        self.queued = 0

    def kcq(self, ctx: int) -> tuple:
        """The per-domain lists of software queue ``ctx`` (made on first use)."""
        lists = self.kcqs.get(ctx)
        if lists is None:
            lists = self.kcqs[ctx] = tuple([] for _ in range(NUM_DOMAINS))
        return lists


class KyberElevator(MqElevator):
    """Kyber: per-domain token pools sized by measured latency (module docstring).

    Read-only state for reports and tests: ``depth`` (each domain's current token
    depth), ``tokens_in_use``, ``async_depth`` (the per-word shallow depth),
    ``domain_p99`` (the remembered p99 buckets, -1 for none), ``throttled`` (per domain,
    how often a dispatch found no token: the ``kyber_throttled`` tracepoint),
    ``depth_log`` (``(time s, domain, old depth, new depth)`` for every resize: the
    ``kyber_adjust`` tracepoint) and ``latency_log`` (``(time s, domain, type,
    percentile, bucket + 1, samples)`` for every percentile computed, the percentile
    being at most ``(bucket + 1) / 4`` of the domain's target: ``kyber_latency``).
    """

    name = "kyber"
    tunables = (
        Tunable("read_lat_nsec", 2_000_000, "ns", 0, _U64_MAX,
                "latency target of reads: histogram buckets are a quarter of it wide"),
        Tunable("write_lat_nsec", 10_000_000, "ns", 0, _U64_MAX,
                "latency target of writes (all writes since 4.20)"),
    )
    uses_merge_hash = False   # kyber merges through its ctx lists only (kyber_bio_merge)
    uses_timers = True        # the statistics timer
    queue_wide = False        # kyber_init_sched clears QUEUE_FLAG_SQ_SCHED: per hctx
    VARIANTS = tuple(_VARIANTS)
    #: The messages Kyber sends (``block_elv_msg``), the same moments as its own
    #: ``kyber_throttled`` and ``kyber_adjust`` tracepoints; the detail names the
    #: domain (read, write, discard, other) and, for an adjustment, the way it went.
    events = {
        "throttled": "a dispatch found no token in the domain (detail: the domain) "
                     "(kyber_dispatch_cur_domain, kyber_get_domain_token)",
        "depth_adjusted": "the statistics timer resized a domain's token pool (detail: "
                          "domain:grow or domain:shrink) (kyber_timer_fn, "
                          "kyber_resize_domain)",
    }

    def __init__(self, info: MqQueueInfo, params: dict | None = None) -> None:
        super().__init__(info, params)
        self.variant = variant_for_kernel(info.kernel)
        self._recompute_async = _VARIANTS[self.variant]["depth_updated"]
        p = self.params
        self.latency_targets = (p["read_lat_nsec"], p["write_lat_nsec"], DISCARD_LAT_NSEC)

        # kyber_queue_data_alloc: full token pools, no statistics yet.
        self.depth = list(KYBER_DEPTH)
        self.tokens_in_use = [0] * NUM_DOMAINS
        self._waiting: tuple[set, ...] = tuple(set() for _ in range(NUM_DOMAINS))
        self._buckets = [[[0] * LATENCY_BUCKETS for _ in (TOTAL_LATENCY, IO_LATENCY)]
                         for _ in range(OTHER)]
        self._latency_timeout: list[int | None] = [None] * OTHER
        self.domain_p99 = [-1] * OTHER
        self._timer_expires: int | None = None  # jiffies, while the timer is pending

        # The scheduler tag bitmap's word size (sbitmap_calculate_shift), fixed when the
        # map is made: blk_mq_tag_update_depth makes a new map only to grow beyond the
        # depth it was made with. The async depth is a share of one word.
        self._map_made_for = info.nr_requests
        self._map_word = bits_per_word(info.nr_requests)
        self.async_depth = self._map_word * KYBER_ASYNC_PERCENT // 100

        self._khd_by_ctx: dict[int, KyberHctx] = {}
        self._khds: list[KyberHctx] = []
        self._queued = 0

        self.throttled = [0] * NUM_DOMAINS
        self.depth_log: list[tuple] = []
        self.latency_log: list[tuple] = []

    @classmethod
    def create(cls, info: MqQueueInfo, params: dict | None = None) -> "KyberElevator":
        """``kyber_init_sched``: Kyber as kernel line ``info.kernel`` has it."""
        return cls(info, params)

    # --- set-up and depth limits ------------------------------------------------
    def init_hctx(self, hctx: MqHctx) -> None:
        """``kyber_init_hctx``: empty ctx and hctx lists, dispatch at READ, no batch."""
        khd = KyberHctx(hctx)
        hctx.sched_data = khd
        self._khds.append(khd)
        for cpu in hctx.cpus:
            self._khd_by_ctx[cpu] = khd
            khd.kcq(cpu)

    def depth_updated(self, nr_requests: int) -> None:
        """``queue/nr_requests`` is now ``nr_requests``. The scheduler tag map keeps its
        word size unless it had to be made anew to grow (``blk_mq_tag_update_depth``);
        from 5.15 ``kyber_depth_updated`` recomputes the async depth from that word size,
        before 5.15 it keeps the one of ``init_sched``."""
        if nr_requests > self._map_made_for:
            self._map_made_for = nr_requests
            self._map_word = bits_per_word(nr_requests)
        if self._recompute_async:
            self.async_depth = self._map_word * KYBER_ASYNC_PERCENT // 100

    @property
    def min_shallow_depth(self) -> int:
        """What Kyber passes to ``sbitmap_queue_min_shallow_depth`` for the scheduler tag
        map (``kyber_init_hctx`` in 5.4/5.10, ``kyber_depth_updated`` from 5.15): the
        smallest shallow depth it asks for, which sets the map's wake batch."""
        return self.async_depth

    def limit_depth(self, write: bool, sync: bool, pid: int | None = None) -> int | None:
        """``kyber_limit_depth``: an async request (``!op_is_sync``: a write without
        REQ_SYNC) may take a scheduler tag only among the first ``async_depth`` bits of a
        word (``sbitmap_get_shallow``); other requests, the whole map. A shallow depth
        of 0 (words of 1 bit: ``nr_requests`` under 8) means no limit, as
        ``__blk_mq_get_tag`` reads it."""
        if write and not sync and self.async_depth:
            return self.async_depth
        return None

    def prepare_request(self, rq, now: float) -> None:
        """``kyber_prepare_request``: the request holds no token (``rq.sched`` = -1)."""
        rq.sched = -1

    # --- merging ------------------------------------------------------------------
    def _khd_for_ctx(self, ctx: int) -> KyberHctx:
        khd = self._khd_by_ctx.get(ctx)
        if khd is None:
            # A ctx the hctxs did not list (a queue that maps every CPU to its only hctx
            # without naming them): the kernel maps every ctx to some hctx.
            khd = self._khds[ctx % len(self._khds)]
            self._khd_by_ctx[ctx] = khd
        return khd

    def merge_list(self, bio, ctx: int):
        """``kyber_bio_merge``: the submitting ctx's list of the bio's domain, for the
        queue's ``blk_bio_list_merge`` scan."""
        domain = WRITE if bio.write else READ
        return self._khd_for_ctx(ctx).kcq(ctx)[domain]

    def requests_merged(self, rq, nxt, now: float) -> None:
        """``nxt`` was merged into ``rq``: it leaves Kyber. (Kyber's own merging joins
        bios only; this is for a queue that merges requests all the same.)"""
        self._unlink(nxt)

    def _unlink(self, rq) -> None:
        khd = rq.hctx.sched_data
        domain = sched_domain(rq)
        lists = khd.kcqs.get(rq.ctx)
        if lists is not None and rq in lists[domain]:
            lists[domain].remove(rq)
            if not lists[domain]:
                khd.kcq_map[domain].discard(rq.ctx)
        else:
            khd.rqs[domain].remove(rq)
        khd.queued -= 1
        self._queued -= 1

    # --- insert and dispatch -----------------------------------------------------
    def insert_requests(self, rqs, at_head: bool, now: float) -> None:
        """``kyber_insert_requests``: each request onto its ctx's list of its domain (at
        the head for a requeue) and the ctx marked busy in that domain's map."""
        for rq in rqs:
            khd = rq.hctx.sched_data
            domain = sched_domain(rq)
            lst = khd.kcq(rq.ctx)[domain]
            if at_head:
                lst.insert(0, rq)
            else:
                lst.append(rq)
            khd.kcq_map[domain].add(rq.ctx)
            khd.queued += 1
            self._queued += 1

    def has_work(self, hctx: MqHctx) -> bool:
        """``kyber_has_work``: a request on the hctx's lists or a busy ctx."""
        return hctx.sched_data.queued > 0

    def _get_domain_token(self, khd: KyberHctx, domain: int) -> bool:
        """``kyber_get_domain_token``: take a token of ``domain``, or put the hctx on the
        pool's wait queue (it is run again when a token is freed) and fail."""
        if self.tokens_in_use[domain] < self.depth[domain]:
            self.tokens_in_use[domain] += 1
            self._waiting[domain].discard(khd)
            return True
        self._waiting[domain].add(khd)
        return False

    def _flush_busy_kcqs(self, khd: KyberHctx, domain: int) -> None:
        """``kyber_flush_busy_kcqs``: move every busy ctx's list of ``domain``, in ctx
        order (``sbitmap_for_each_set``), to the tail of the hctx's list."""
        dest = khd.rqs[domain]
        busy = khd.kcq_map[domain]
        for ctx in sorted(busy):
            lst = khd.kcqs[ctx][domain]
            dest.extend(lst)
            lst.clear()
        busy.clear()

    def _dispatch_cur_domain(self, khd: KyberHctx):
        """``kyber_dispatch_cur_domain``: the next request of the current domain if a
        token can be had; the ctx lists are flushed only once the token is held."""
        domain = khd.cur_domain
        rqs = khd.rqs[domain]
        if rqs or khd.kcq_map[domain]:
            if not self._get_domain_token(khd, domain):
                self.throttled[domain] += 1
                if self.msg is not None:
                    self.msg("throttled", 0, DOMAIN_NAMES[domain].lower())
                return None
            if not rqs:
                self._flush_busy_kcqs(khd, domain)
            rq = rqs.popleft()
            khd.batching += 1
            rq.sched = domain
            khd.queued -= 1
            self._queued -= 1
            return rq
        return None

    def dispatch_request(self, hctx: MqHctx, now: float):
        """``kyber_dispatch_request``: continue the current domain's batch; else start a
        batch at the next domain (wrapping round to the current one) that hands out a
        request."""
        khd = hctx.sched_data
        if khd.batching < KYBER_BATCH_SIZE[khd.cur_domain]:
            rq = self._dispatch_cur_domain(khd)
            if rq is not None:
                return rq
        khd.batching = 0
        for _ in range(NUM_DOMAINS):
            khd.cur_domain = (khd.cur_domain + 1) % NUM_DOMAINS
            rq = self._dispatch_cur_domain(khd)
            if rq is not None:
                return rq
        return None

    # --- completion, freeing, requeue ------------------------------------------------
    def finish_request(self, rq, now: float) -> None:
        """``kyber_finish_request`` (``rq_clear_domain_token``): give back the request's
        token; an hctx waiting on that pool is run again (``kyber_domain_wake``)."""
        domain = rq.sched
        if domain is None or domain < 0:
            return
        rq.sched = -1
        self.tokens_in_use[domain] -= 1
        waiting = self._waiting[domain]
        if waiting:
            waiting.clear()
            self.kick_queue = True

    def requeue_request(self, rq, now: float) -> None:
        """``requeue_request`` is ``kyber_finish_request``: the token goes back."""
        self.finish_request(rq, now)

    def completed_request(self, rq, now: float) -> None:
        """``kyber_completed_request``: a read, write or discard adds its total latency
        (since the request was made) and I/O latency (since it was issued) to its
        domain's histograms; the statistics timer is brought to within HZ/10."""
        domain = sched_domain(rq)
        if domain == OTHER:
            return
        target = self.latency_targets[domain]
        hist = self._buckets[domain]
        hist[TOTAL_LATENCY][latency_bucket(_nsec(now - rq.t_insert), target)] += 1
        hist[IO_LATENCY][latency_bucket(_nsec(now - rq.t_dispatch), target)] += 1
        # timer_reduce(&timer, jiffies + HZ / 10): arm it, or bring it earlier.
        expires = int(now * self.hz + _EPS) + self.hz // 10
        if self._timer_expires is None or expires < self._timer_expires:
            self._timer_expires = expires
            self.wakeup_at = expires / self.hz

    # --- the statistics timer ---------------------------------------------------------
    def _calculate_percentile(self, domain: int, kind: int, percentile: int,
                              jiffies: int, now: float) -> int:
        """``calculate_percentile``: the bucket of a percentile of one histogram, or -1
        while it has no samples, or fewer than 500 and its domain's timeout (armed on
        the first look, ``HZ`` ahead, shared by both histograms of the domain) has not
        passed. A histogram that answers is cleared."""
        buckets = self._buckets[domain][kind]
        samples = sum(buckets)
        if not samples:
            return -1
        if self._latency_timeout[domain] is None:
            self._latency_timeout[domain] = jiffies + self.hz
        if samples < PERCENTILE_MIN_SAMPLES and self._latency_timeout[domain] > jiffies:
            return -1
        self._latency_timeout[domain] = None
        bucket = percentile_bucket(buckets, percentile)
        buckets[:] = [0] * LATENCY_BUCKETS
        self.latency_log.append((now, DOMAIN_NAMES[domain], LATENCY_TYPE_NAMES[kind],
                                 percentile, bucket + 1, samples))
        return bucket

    def _resize_domain(self, domain: int, depth: int, now: float) -> None:
        """``kyber_resize_domain``: clamp to [1, the domain's maximum] and log a change."""
        depth = max(1, min(depth, KYBER_DEPTH[domain]))
        old = self.depth[domain]
        if depth != old:
            self.depth[domain] = depth
            self.depth_log.append((now, DOMAIN_NAMES[domain], old, depth))
            if self.msg is not None:
                self.msg("depth_adjusted", 0, f"{DOMAIN_NAMES[domain].lower()}:"
                                              f"{'grow' if depth > old else 'shrink'}")

    def timer_fired(self, now: float) -> None:
        """``kyber_timer_fn``: congestion from the p90 I/O latencies, then each domain's
        depth scaled by its p99 total latency (module docstring, steps 1-3)."""
        self._timer_expires = None
        self.wakeup_at = None
        jiffies = int(now * self.hz + _EPS)

        bad = False
        for domain in range(OTHER):
            p90 = self._calculate_percentile(domain, IO_LATENCY, 90, jiffies, now)
            if p90 >= GOOD_BUCKETS:
                bad = True

        for domain in range(OTHER):
            p99 = self._calculate_percentile(domain, TOTAL_LATENCY, 99, jiffies, now)
            # A domain may lack the samples this window: under congestion use the p99
            # of an earlier window (once); otherwise remember this one for such a time.
            if bad:
                if p99 < 0:
                    p99 = self.domain_p99[domain]
                self.domain_p99[domain] = -1
            elif p99 >= 0:
                self.domain_p99[domain] = p99
            if p99 < 0:
                continue
            if bad or p99 >= GOOD_BUCKETS:
                depth = (self.depth[domain] * (p99 + 1)) >> KYBER_LATENCY_SHIFT
                self._resize_domain(domain, depth, now)

    # --- reports ----------------------------------------------------------------------
    def empty(self) -> bool:
        """True when no request waits in Kyber."""
        return self._queued == 0

    def queued(self) -> int:
        """Requests waiting in Kyber's ctx and hctx lists."""
        return self._queued


def _nsec(seconds: float) -> int:
    """A duration in whole nanoseconds, as the kernel's ``u64`` ns clock gives it."""
    return int(round(seconds * 1e9))
