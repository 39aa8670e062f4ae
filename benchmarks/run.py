"""blksim's speed and memory benchmarks (``make bench``). Prints figures; asserts nothing.

Replay benchmark: a 1,000,000-request open-loop trace of random 4 KiB reads with
Poisson arrivals (mean interarrival 12 ms), written once as a DiskSim ASCII file
so other simulators can replay the very same file, replayed on the 10,000 rpm
preset with deadline. Each replay runs in its own process so that its peak
memory (max RSS) is its own; a 100,000-request replay beside it shows that
memory does not grow with the trace's length.

Validation benchmark: the time `blksim validate` takes on each calibration
drive's 10,000-request DiskSim trace (needs ../shared/validation).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")
sys.path.insert(0, ROOT)

DRIVE = "cheetah10k7"
MEAN_INTERARRIVAL_MS = 12.0
TRACE_SEED = 20261121


def trace_path(n: int) -> str:
    """Where the n-request benchmark trace lives."""
    return os.path.join(DATA, f"randread4k-poisson12ms-{n}.trace")


def make_trace(n: int) -> str:
    """Write the benchmark trace once (deterministic); return its path."""
    from disk_models.presets import load_drive
    from traces.disksim_ascii import TraceRecord, write_disksim_ascii

    path = trace_path(n)
    if os.path.exists(path):
        return path
    os.makedirs(DATA, exist_ok=True)
    capacity = load_drive(DRIVE).capacity
    blocks = capacity // 8
    rng = random.Random(TRACE_SEED)

    def records():
        t = 0.0
        for _ in range(n):
            t += rng.expovariate(1.0 / MEAN_INTERARRIVAL_MS)
            yield TraceRecord(t / 1e3, 0, rng.randrange(blocks) * 8, 8, False, None)

    write_disksim_ascii(path, records())
    return path


def replay(path: str, scheduler: str) -> dict:
    """Replay `path` on the benchmark drive in this process; return its figures."""
    import tomllib

    from sim.config import resolve
    from sim.engine import Simulation

    raw = tomllib.loads(f"""
[run]
name = "bench"
seed = 1
[device]
drive = "{DRIVE}"
queue_depth = 1
[queue]
scheduler = "{scheduler}"
[[trace]]
path = "{path}"
format = "disksim"
""")
    cfg = resolve(raw, os.path.join(DATA, "bench.toml"))
    t0 = time.perf_counter()
    sim = Simulation(cfg)
    outcome = sim.run()
    wall = time.perf_counter() - t0
    done = outcome.metrics.completed
    return {
        "requests": done,
        "wall_s": wall,
        "requests_per_s": done / wall,
        "simulated_s": outcome.sim_time,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "read_q2c_mean_ms": outcome.metrics.read.q2c.mean * 1e3,
    }


def replay_in_subprocess(n: int, scheduler: str) -> dict:
    """Run `replay` in a fresh interpreter (its own peak memory)."""
    path = make_trace(n)
    out = subprocess.run([sys.executable, __file__, "--child", path, scheduler],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    """Run the benchmarks and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=2, metavar=("TRACE", "SCHEDULER"), help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=1_000_000,
                        help="length of the main replay (default 1,000,000)")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(replay(*args.child)))
        return

    print(f"blksim benchmarks ({os.cpu_count()} cores, Python {sys.version.split()[0]})")
    print(f"replay: open-loop random 4 KiB reads, Poisson, mean interarrival "
          f"{MEAN_INTERARRIVAL_MS} ms, drive {DRIVE}, queue_depth 1")
    print(f"{'scheduler':10}{'requests':>11}{'wall (s)':>10}{'requests/s':>12}"
          f"{'peak RSS (MB)':>15}{'read Q2C mean (ms)':>20}")
    for n in (100_000, args.requests):
        r = replay_in_subprocess(n, "deadline")
        print(f"{'deadline':10}{r['requests']:>11,}{r['wall_s']:>10.2f}"
              f"{r['requests_per_s']:>12,.0f}{r['peak_rss_mb']:>15.1f}"
              f"{r['read_q2c_mean_ms']:>20.3f}")
    print("targets: >= 80,000 requests/s; peak memory < 150 MB whatever the trace length")
    print()
    validation_timing()


def validation_timing() -> None:
    """Time `blksim validate` on each calibration drive's 10,000-request trace."""
    from sim.validate import ValidationError, validate_drive
    print("validate: closed-loop replay of a DiskSim validation trace, queue depth 1")
    print(f"{'drive':12}{'requests':>10}{'wall (s)':>10}{'demerit (ms)':>14}")
    for drive in ("cheetah9LP", "hp_c2247a", "atlas10k", "hp_c3323a"):
        t0 = time.perf_counter()
        try:
            r = validate_drive(drive, drive)
        except ValidationError as exc:
            print(f"{drive:12} skipped: {exc}")
            continue
        wall = time.perf_counter() - t0
        print(f"{drive:12}{r.n:>10,}{wall:>10.3f}{r.demerit_ms:>14.3f}")
    print("target: under 1 s per 10,000-request trace")


if __name__ == "__main__":
    main()
