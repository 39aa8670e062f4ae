"""The on-board cache's parameters, with DiskSim 4.0's meanings and its loader's rules.

`CacheParams` checks each value, maps DiskSim's ``.diskspecs`` names to ours
(`CacheParams.from_disksim`) and applies what DiskSim's loader applies (no read-ahead
mode forces both read-ahead limits to zero; a maximum below the minimum is raised to
it; a disabled cache neither reads ahead nor writes back). The buffer that uses them is
`blksim.disk_models.cache.SegmentCache`; docs/drive-cache.md gives every parameter.
"""

from __future__ import annotations


class CacheParams:
    """The buffer/cache parameters, with DiskSim 4.0's meanings (docs/drive-cache.md).

    ``read_ahead_over_requested`` keeps DiskSim's meaning ("can newly prefetched data
    replace the data returned to the host by the most recent read?"): 1 or -1 make the
    segment a stream buffer, whose data already sent to the host are free space (a later
    read of them misses); 0 keeps them (docs/drive-cache.md, "Stream segments").

    ``random_hit_overhead`` (a blksim addition, not DiskSim's): ``"auto"`` (the default)
    is ``"miss"`` on stream segments (``read_ahead_over_requested`` 1 or -1) and ``"hit"``
    otherwise. ``"miss"`` marks a whole read hit that does not start where the previous
    request ended (`CacheResult.random`), and the drive charges it at least the read
    *miss* command overhead; ``"hit"`` charges every hit the hit overhead, as DiskSim 4.0
    does.

    ``limited_fastwrite`` selects how "Fast write level" 1 behaves: ``"disksim"``
    (the default) follows DiskSim 4.0's code, where level 1 reports every write
    from the buffer just like level 2 (the levels differ only in how appends
    are scheduled when several requests are queued); ``"documented"`` follows
    DiskSim's manual: only a write appending to the dirty data of the segment
    being written back is reported early, any other write goes to the media first.
    """

    __slots__ = ("enabled", "segments", "segment_size", "write_segments",
                 "separate_write_segment", "continuous_read", "min_read_ahead",
                 "max_read_ahead", "read_ahead_over_requested", "read_ahead_on_idle_hit",
                 "fast_write_level", "combine_seq_writes", "stop_prefetch_in_sector",
                 "write_hit_stop_prefetch", "read_hits_on_write_data",
                 "immed_transfer_partial_hit", "almost_read_hits", "limited_fastwrite",
                 "read_any_free_blocks", "random_hit_overhead")

    DISKSIM_NAMES = {
        "Enable caching in buffer": "enabled",
        "Number of buffer segments": "segments",
        "Segment size (in blks)": "segment_size",
        "Maximum number of write segments": "write_segments",
        "Use separate write segment": "separate_write_segment",
        "Buffer continuous read": "continuous_read",
        "Minimum read-ahead (blks)": "min_read_ahead",
        "Maximum read-ahead (blks)": "max_read_ahead",
        "Read-ahead over requested": "read_ahead_over_requested",
        "Read-ahead on idle hit": "read_ahead_on_idle_hit",
        "Fast write level": "fast_write_level",
        "Combine seq writes": "combine_seq_writes",
        "Stop prefetch in sector": "stop_prefetch_in_sector",
        "Write hit stop prefetch": "write_hit_stop_prefetch",
        "Allow read hits on write data": "read_hits_on_write_data",
        "Immed transfer partial hit": "immed_transfer_partial_hit",
        "Allow almost read hits": "almost_read_hits",
        "Read any free blocks": "read_any_free_blocks",
    }

    def __init__(self, *, enabled: bool = True, segments: int = 1, segment_size: int = 256,
                 write_segments: int | None = None, separate_write_segment: bool = False,
                 continuous_read: int = 3, min_read_ahead: int = 0, max_read_ahead: int = 0,
                 read_ahead_over_requested: int = 1, read_ahead_on_idle_hit: bool = False,
                 fast_write_level: int = 0, combine_seq_writes: bool = True,
                 stop_prefetch_in_sector: bool = False, write_hit_stop_prefetch: bool = True,
                 read_hits_on_write_data: bool = True, immed_transfer_partial_hit: bool = True,
                 almost_read_hits: bool = False, limited_fastwrite: str = "disksim",
                 read_any_free_blocks: bool = False, random_hit_overhead: str = "auto") -> None:
        def _int(name, v, lo, hi=None):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
                rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
                raise ValueError(f"drive cache: {name}: expected an integer {rng}, found {v!r}")
            return v

        self.enabled = bool(enabled)
        self.segments = _int("segments", segments, 1)
        self.segment_size = _int("segment_size", segment_size, 1)
        if write_segments is None:
            write_segments = segments
        self.write_segments = _int("write_segments", write_segments, 1, segments)
        self.separate_write_segment = bool(separate_write_segment) and segments > 1
        self.continuous_read = _int("continuous_read", continuous_read, 0, 4)
        self.min_read_ahead = _int("min_read_ahead", min_read_ahead, 0, segment_size)
        self.max_read_ahead = _int("max_read_ahead", max_read_ahead, 0, segment_size)
        self.read_ahead_over_requested = _int("read_ahead_over_requested",
                                              read_ahead_over_requested, -1, 1)
        self.read_ahead_on_idle_hit = bool(read_ahead_on_idle_hit)
        self.fast_write_level = _int("fast_write_level", fast_write_level, 0, 2)
        self.combine_seq_writes = bool(combine_seq_writes)
        self.stop_prefetch_in_sector = bool(stop_prefetch_in_sector)
        self.write_hit_stop_prefetch = bool(write_hit_stop_prefetch)
        self.read_hits_on_write_data = bool(read_hits_on_write_data)
        self.immed_transfer_partial_hit = bool(immed_transfer_partial_hit)
        self.almost_read_hits = bool(almost_read_hits)
        self.read_any_free_blocks = bool(read_any_free_blocks)
        if limited_fastwrite not in ("disksim", "documented"):
            raise ValueError(f"drive cache: limited_fastwrite: expected 'disksim' or 'documented', "
                             f"found {limited_fastwrite!r}")
        self.limited_fastwrite = limited_fastwrite
        if random_hit_overhead not in ("auto", "miss", "hit"):
            raise ValueError(f"drive cache: random_hit_overhead: expected 'auto', 'miss' or "
                             f"'hit', found {random_hit_overhead!r}")
        if random_hit_overhead == "auto":
            random_hit_overhead = "miss" if self.stream_segments else "hit"
        self.random_hit_overhead = random_hit_overhead
        # DiskSim's loader: no read-ahead mode forces both read-ahead limits to zero,
        # and a maximum below the minimum is raised to it
        if self.continuous_read == 0:
            self.min_read_ahead = self.max_read_ahead = 0
        elif self.max_read_ahead and self.max_read_ahead < self.min_read_ahead:
            self.max_read_ahead = self.min_read_ahead
        if not self.enabled:
            self.continuous_read = 0
            self.fast_write_level = 0

    @property
    def stream_segments(self) -> bool:
        """Whether the data a read sends to the host are free space in its segment
        ("Read-ahead over requested" 1 or -1; docs/drive-cache.md, "Stream segments")."""
        return self.read_ahead_over_requested != 0

    @classmethod
    def from_disksim(cls, params: dict, **overrides) -> "CacheParams":
        """From DiskSim ``.diskspecs`` values keyed by DiskSim's names (others ignored)."""
        kw = {}
        for name, key in cls.DISKSIM_NAMES.items():
            if name in params:
                v = params[name]
                kw[key] = int(v) if not isinstance(v, bool) else v
        kw.update(overrides)
        return cls(**kw)

    def describe(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}
