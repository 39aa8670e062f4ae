"""What a trace holds, in one streaming pass and bounded memory.

``TraceStats`` takes records one at a time (``add``) and keeps: counts and
bytes by direction; request sizes (exact counts of each size, up to 10,000
distinct sizes, and a log histogram); interarrival times (a log histogram
with 1 % buckets: percentiles within 1 %); sequentiality (the share of
requests that start where the previous request of the same process on the
same device ended, and of the same device alone); the footprint (distinct
1 MiB units touched: exact while they form up to 65,536 disjoint ranges, then a
HyperLogLog estimate within about 1 %); requests per process and per device (the 10,000 first
seen, the rest counted together); first and last time.

``measure_parse_speed`` is the parsing benchmark (lines per second for every
CSV format and the blkparse text reader on generated 1,000,000-line inputs).
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import time
from bisect import bisect_left, bisect_right
from collections import Counter

MIB_SECTORS = 2048
_MAX_KEYS = 10_000
_MAX_STREAMS = 65_536
_EXACT_FOOTPRINT = 1 << 16
_MASK64 = (1 << 64) - 1


class LogHistogram:
    """Non-negative values in buckets 1 % wide (relative): percentiles within 1 %,
    a few thousand buckets at most over any range of floats."""

    __slots__ = ("buckets", "zeros", "count", "total", "total_sq", "lo", "hi")
    _LOG_BASE = math.log(1.01)

    def __init__(self) -> None:
        self.buckets: Counter = Counter()
        self.zeros = 0
        self.count = 0
        self.total = 0.0
        self.total_sq = 0.0
        self.lo = math.inf
        self.hi = 0.0

    def add(self, x: float) -> None:
        self.count += 1
        self.total += x
        self.total_sq += x * x
        if x < self.lo:
            self.lo = x
        if x > self.hi:
            self.hi = x
        if x <= 0.0:
            self.zeros += 1
        else:
            self.buckets[math.floor(math.log(x) / self._LOG_BASE)] += 1

    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan

    def cv(self) -> float:
        """Coefficient of variation (standard deviation / mean)."""
        if self.count < 2 or self.total <= 0.0:
            return math.nan
        mean = self.total / self.count
        var = max(self.total_sq / self.count - mean * mean, 0.0)
        return math.sqrt(var) / mean

    def percentile(self, p: float) -> float:
        """Nearest-rank percentile (bucket midpoint, clamped to min and max)."""
        if not self.count:
            return math.nan
        rank = max(1, math.ceil(p / 100.0 * self.count))
        if rank <= self.zeros:
            return 0.0
        seen = self.zeros
        for key in sorted(self.buckets):
            seen += self.buckets[key]
            if seen >= rank:
                mid = math.exp((key + 0.5) * self._LOG_BASE)
                return min(max(mid, self.lo), self.hi)
        return self.hi


class Footprint:
    """Distinct units (1 MiB of one device) touched by requests, each request a range of
    units: exact while the units form at most ``bound`` disjoint ranges (per device, a
    sorted union of ranges, so a request of any size costs one insertion), then a
    HyperLogLog estimate (2^14 registers) fed unit by unit.

    In the estimate, a request spanning more than ``SPAN`` units adds its first ``SPAN``
    units to the sketch and counts the rest as distinct: bounded work per request, exact
    for huge requests that do not overlap."""

    __slots__ = ("exact", "covered", "ranges", "registers", "bound", "bulk")
    P = 14
    SPAN = 64

    def __init__(self, bound: int = _EXACT_FOOTPRINT) -> None:
        self.exact: dict | None = {}      # device -> (starts, ends), sorted, disjoint
        self.covered = 0
        self.ranges = 0
        self.registers: bytearray | None = None
        self.bound = bound
        self.bulk = 0

    @property
    def estimated(self) -> bool:
        return self.exact is None

    def add(self, key: int, device: int = 0) -> None:
        """One unit ``key`` of ``device``."""
        self.add_range(device, key, key)

    def add_range(self, device: int, first: int, last: int) -> None:
        """Units ``first`` to ``last`` (inclusive) of ``device``."""
        if self.exact is None:
            self._hll_range(device, first, last)
            return
        starts, ends = self.exact.setdefault(device, ([], []))
        lo = bisect_left(ends, first - 1)          # first range that touches or follows
        hi = bisect_right(starts, last + 1)        # past the last range that touches
        if lo < hi:
            merged = sum(e - s + 1 for s, e in zip(starts[lo:hi], ends[lo:hi]))
            first = min(first, starts[lo])
            last = max(last, ends[hi - 1])
        else:
            merged = 0
        starts[lo:hi] = [first]
        ends[lo:hi] = [last]
        self.covered += (last - first + 1) - merged
        self.ranges += 1 - (hi - lo)
        if self.ranges > self.bound:
            self._to_estimate()

    def _to_estimate(self) -> None:
        ranges, self.exact = self.exact, None
        self.registers = bytearray(1 << self.P)
        for device, (starts, ends) in ranges.items():
            for first, last in zip(starts, ends):
                self._hll_range(device, first, last)

    def _hll_range(self, device: int, first: int, last: int) -> None:
        if last - first + 1 > self.SPAN:
            self.bulk += last - first + 1 - self.SPAN
            last = first + self.SPAN - 1
        for unit in range(first, last + 1):
            self._hll((device << 64) | unit)

    def _hll(self, key: int) -> None:
        # splitmix64 of the key folded to 64 bits: deterministic, unlike hash() of strings
        z = ((key ^ (key >> 64)) + 0x9E3779B97F4A7C15) & _MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        z ^= z >> 31
        index = z >> (64 - self.P)
        rest = (z << self.P) & _MASK64
        rank = 65 - rest.bit_length() if rest else 64 - self.P + 1
        regs = self.registers
        if rank > regs[index]:
            regs[index] = rank

    def count(self) -> int:
        """Distinct units touched (exact, or the estimate)."""
        if self.exact is not None:
            return self.covered
        regs = self.registers
        m = len(regs)
        estimate = (0.7213 / (1 + 1.079 / m)) * m * m / sum(2.0 ** -r for r in regs)
        zeros = regs.count(0)
        if estimate <= 2.5 * m and zeros:
            estimate = m * math.log(m / zeros)
        return round(estimate) + self.bulk


class TraceStats:
    """Streaming summary of a trace; ``add`` every record, then ``summary()``."""

    def __init__(self) -> None:
        self.requests = 0
        self.reads = 0
        self.writes = 0
        self.read_sectors = 0
        self.write_sectors = 0
        self.sizes: Counter = Counter()
        self.sizes_other = 0
        self.size_hist = LogHistogram()
        self.gaps = LogHistogram()
        self.first: float | None = None
        self.last: float | None = None
        self.stream_end: dict = {}
        self.device_end: dict = {}
        self.seq_stream = 0
        self.seq_device = 0
        self.streams_reset = False
        self.footprint = Footprint()
        self.dev_ids: dict = {}
        self.devices: Counter = Counter()
        self.devices_other = 0
        self.processes: Counter = Counter()
        self.processes_other = 0
        self.known_pids = 0

    def add(self, rec) -> None:
        t = rec.time
        if self.first is None:
            self.first = t
        else:
            self.gaps.add(max(t - self.last, 0.0))
        self.last = t
        self.requests += 1
        n = rec.nr_sectors
        if rec.write:
            self.writes += 1
            self.write_sectors += n
        else:
            self.reads += 1
            self.read_sectors += n
        if n in self.sizes or len(self.sizes) < _MAX_KEYS:
            self.sizes[n] += 1
        else:
            self.sizes_other += 1
        self.size_hist.add(n)
        dev = rec.devno
        if dev in self.devices or len(self.devices) < _MAX_KEYS:
            self.devices[dev] += 1
        else:
            self.devices_other += 1
        pid = rec.pid
        if pid is not None:
            self.known_pids += 1
            key = (pid, getattr(rec, "name", None))
            if key in self.processes or len(self.processes) < _MAX_KEYS:
                self.processes[key] += 1
            else:
                self.processes_other += 1
        sector = rec.sector
        end = sector + n
        skey = (dev, pid)
        if self.stream_end.get(skey) == sector:
            self.seq_stream += 1
        if self.device_end.get(dev) == sector:
            self.seq_device += 1
        if len(self.stream_end) >= _MAX_STREAMS and skey not in self.stream_end:
            self.stream_end.clear()
            self.streams_reset = True
        self.stream_end[skey] = end
        if len(self.device_end) >= _MAX_STREAMS and dev not in self.device_end:
            self.device_end.clear()
        self.device_end[dev] = end
        dev_id = self.dev_ids.get(dev)
        if dev_id is None:
            dev_id = self.dev_ids[dev] = len(self.dev_ids) if len(self.dev_ids) < (1 << 19) \
                else hash(dev) & 0x7FFFF
        self.footprint.add_range(dev_id, sector // MIB_SECTORS, (end - 1) // MIB_SECTORS)

    def add_all(self, records) -> "TraceStats":
        add = self.add
        for rec in records:
            add(rec)
        return self

    # -------------------------------------------------------------- results

    def summary(self) -> dict:
        """Every figure, with units in the key names."""
        n = self.requests
        duration = (self.last - self.first) if n else 0.0
        sizes_exact = not self.sizes_other

        def size_pct(p):
            if not n:
                return None
            if sizes_exact:
                rank = max(1, math.ceil(p / 100.0 * n))
                seen = 0
                for size in sorted(self.sizes):
                    seen += self.sizes[size]
                    if seen >= rank:
                        return size * 512
            return round(self.size_hist.percentile(p) * 512)

        gaps = self.gaps
        return {
            "requests": n,
            "reads": self.reads,
            "writes": self.writes,
            "read_pct": 100.0 * self.reads / n if n else None,
            "write_pct": 100.0 * self.writes / n if n else None,
            "bytes_read": self.read_sectors * 512,
            "bytes_written": self.write_sectors * 512,
            "first_time_s": self.first,
            "duration_s": duration,
            "requests_per_s": n / duration if duration > 0 else None,
            "size_mean_bytes": self.size_hist.mean() * 512 if n else None,
            "size_p50_bytes": size_pct(50),
            "size_p95_bytes": size_pct(95),
            "size_max_bytes": self.size_hist.hi * 512 if n else None,
            "size_top": [(size * 512, count) for size, count in self.sizes.most_common(5)],
            "interarrival_mean_s": gaps.mean() if gaps.count else None,
            "interarrival_cv": gaps.cv() if gaps.count > 1 else None,
            "interarrival_p50_s": gaps.percentile(50) if gaps.count else None,
            "interarrival_p99_s": gaps.percentile(99) if gaps.count else None,
            "sequential_pct": 100.0 * self.seq_stream / n if n else None,
            "sequential_device_pct": 100.0 * self.seq_device / n if n else None,
            "footprint_mib": self.footprint.count(),
            "footprint_estimated": self.footprint.estimated,
            "devices": len(self.devices) + (1 if self.devices_other else 0),
            "devices_top": [(str(d), c) for d, c in self.devices.most_common(5)],
            "processes": len(self.processes),
            "processes_top": [(pid, name, c) for (pid, name), c in
                              self.processes.most_common(5)],
            "requests_with_pid": self.known_pids,
        }


# ------------------------------------------------------------------ formatting

def fmt_bytes(b) -> str:
    """Bytes with a binary unit: 512 B, 4 KiB, 1.5 MiB."""
    if b is None:
        return "-"
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= size:
            v = b / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{b:.0f} B"


def fmt_seconds(s) -> str:
    """Seconds with a readable unit: 850 ns, 12.5 us, 3.2 ms, 4.1 s."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    if s == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def format_summary(s: dict, source: str = "", fmt: str = "") -> str:
    """The summary as the lines ``blksim trace stats`` prints."""
    out = []

    def row(label, text):
        out.append(f"{label:<15} {text}")

    if source:
        row("trace", f"{source}" + (f" (format {fmt})" if fmt else ""))
    n = s["requests"]
    row("requests", f"{n:,}" + (f" (reads {s['read_pct']:.1f} %, writes {s['write_pct']:.1f} %)"
                                 if n else ""))
    if not n:
        return "\n".join(out) + "\n"
    row("data", f"{fmt_bytes(s['bytes_read'])} read, {fmt_bytes(s['bytes_written'])} written")
    rate = f", {s['requests_per_s']:,.1f} requests/s" if s["requests_per_s"] else ""
    row("duration", f"{s['duration_s']:.6f} s (first request at {s['first_time_s']:.6f} s)"
        f"{rate}")
    row("request size", f"mean {fmt_bytes(s['size_mean_bytes'])}, p50 "
        f"{fmt_bytes(s['size_p50_bytes'])}, p95 {fmt_bytes(s['size_p95_bytes'])}, max "
        f"{fmt_bytes(s['size_max_bytes'])}")
    row("  top sizes", ", ".join(f"{fmt_bytes(b)} {100.0 * c / n:.1f} %"
                                 for b, c in s["size_top"]))
    if s["interarrival_mean_s"] is not None:
        cv = s["interarrival_cv"]
        row("interarrival", f"mean {fmt_seconds(s['interarrival_mean_s'])}, CV "
            f"{'-' if cv is None or math.isnan(cv) else f'{cv:.2f}'}, p50 "
            f"{fmt_seconds(s['interarrival_p50_s'])}, p99 {fmt_seconds(s['interarrival_p99_s'])}")
    row("sequential", f"{s['sequential_pct']:.1f} % of requests start where the previous one "
        f"of the same process and device ended ({s['sequential_device_pct']:.1f} % of the "
        f"same device)")
    approx = "about " if s["footprint_estimated"] else ""
    row("footprint", f"{approx}{s['footprint_mib']:,} MiB distinct (1 MiB units touched)")
    row("devices", f"{s['devices']}: " + ", ".join(f"{d} ({c:,})" for d, c in s["devices_top"]))
    if s["processes"]:
        row("processes", f"{s['processes']}: " + ", ".join(
            f"{pid}{' ' + name if name else ''} ({c:,})" for pid, name, c in s["processes_top"]))
    else:
        row("processes", "not recorded in this format")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ parsing speed

def _write_msr_input(path: str, n: int) -> None:
    rng = random.Random(20261122)
    tick = 128_166_372_003_061_629
    with open(path, "w") as fh:
        batch = []
        for _ in range(n):
            tick += rng.randrange(1, 20_000)
            batch.append(f"{tick},hm,1,{'Read' if rng.random() < 0.6 else 'Write'},"
                         f"{rng.randrange(1 << 30) * 512},{rng.choice((4096, 8192, 65536))},"
                         f"{rng.randrange(100_000)}\n")
            if len(batch) == 10_000:
                fh.writelines(batch)
                batch.clear()
        fh.writelines(batch)


def _write_lines(path: str, n: int, line) -> None:
    """``n`` lines from ``line(rng, i)`` (a str with its newline), 10,000 at a time."""
    rng = random.Random(20261122)
    with open(path, "w") as fh:
        for start in range(0, n, 10_000):
            fh.writelines([line(rng, i) for i in range(start, min(start + 10_000, n))])


def _write_spc_input(path: str, n: int) -> None:
    state = [0.0]

    def line(rng, i):
        state[0] += rng.random() * 2e-3
        return (f"{rng.randrange(4)},{rng.randrange(1 << 30)},{rng.choice((4096, 8192, 65536))},"
                f"{'r' if rng.random() < 0.6 else 'w'},{state[0]:.6f}\n")
    _write_lines(path, n, line)


def _write_alibaba_input(path: str, n: int) -> None:
    state = [1_577_808_144_360_767]

    def line(rng, i):
        state[0] += rng.randrange(1, 2_000)
        return (f"{rng.randrange(100, 110)},{'R' if rng.random() < 0.6 else 'W'},"
                f"{rng.randrange(1 << 30) * 512},{rng.choice((4096, 8192, 65536))},{state[0]}\n")
    _write_lines(path, n, line)


def _write_tencent_input(path: str, n: int) -> None:
    state = [1_538_323_200]

    def line(rng, i):
        if rng.random() < 0.001:
            state[0] += 1
        return (f"{state[0]},{rng.randrange(1 << 30)},{rng.choice((8, 16, 128))},"
                f"{0 if rng.random() < 0.6 else 1},{rng.randrange(1000, 1010)}\n")
    _write_lines(path, n, line)


def _write_blkparse_input(path: str, n: int, actions: str = "QGIDC") -> None:
    rng = random.Random(20261122)
    t = 0.0
    seq = 0
    with open(path, "w") as fh:
        batch = []
        while seq < n:
            t += rng.random() * 1e-3
            sector = rng.randrange(10 ** 9)
            rwbs = "WS" if rng.random() < 0.3 else "R"
            for act in actions:
                if seq == n:
                    break
                seq += 1
                pid, name = (0, "0") if act == "C" else (4321, "postgres")
                batch.append(f"  8,16   1 {seq:8d} {t:14.9f} {pid:5d}  {act} {rwbs:>3} {sector} "
                             f"+ 8 [{name}]\n")
            if len(batch) >= 10_000:
                fh.writelines(batch)
                batch.clear()
        fh.writelines(batch)


def measure_parse_speed(lines: int = 1_000_000, directory: str | None = None) -> dict:
    """Parse generated ``lines``-line inputs and return lines per second (CPU time)
    for each: the CSV formats ``msr`` (MSR Cambridge), ``spc`` (UMass / SPC),
    ``alibaba`` and ``tencent`` (every line a record), ``blkparse`` (blkparse text
    with Q G I D C lines, one request per five lines) and ``blkparse-q`` (Q lines
    only, every line a record). Inputs go to a temporary directory, removed
    afterwards."""
    from blksim.traces.detect import open_trace
    results = {}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        cases = (("msr", "msr", _write_msr_input, {}),
                 ("spc", "spc", _write_spc_input, {}),
                 ("alibaba", "alibaba", _write_alibaba_input, {}),
                 ("tencent", "tencent", _write_tencent_input, {}),
                 ("blkparse", "blkparse", _write_blkparse_input, {}),
                 ("blkparse-q", "blkparse", _write_blkparse_input, {"actions": "Q"}))
        for label, fmt, make, extra in cases:
            path = os.path.join(tmp, label)
            make(path, lines, **extra)
            start = time.process_time()
            count = 0
            for _ in open_trace(path, fmt):
                count += 1
            elapsed = max(time.process_time() - start, 1e-9)
            results[label] = {"lines": lines, "records": count, "seconds": elapsed,
                              "lines_per_s": lines / elapsed}
            os.unlink(path)
    return results


def main(argv=None) -> int:
    """``python -m blksim.traces.stats``: run the parsing benchmark, print its figures."""
    import argparse
    parser = argparse.ArgumentParser(
        prog="python -m blksim.traces.stats",
        description="The trace-parsing benchmark: generate inputs of every CSV format and "
                    "blkparse text in a temporary folder (removed afterwards), parse them "
                    "and print lines per second (CPU time) for each.")
    parser.add_argument("--lines", type=int, default=1_000_000,
                        help="lines of each generated input (default 1,000,000)")
    args = parser.parse_args(argv)
    if args.lines < 1:
        parser.error(f"--lines: expected a whole number >= 1, found {args.lines}")
    for label, r in measure_parse_speed(args.lines).items():
        print(f"{label:12} {r['lines_per_s']:>12,.0f} lines/s  ({r['records']:,} records, "
              f"{r['seconds']:.2f} s CPU)")
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
