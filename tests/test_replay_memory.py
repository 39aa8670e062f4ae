"""Replaying a long trace keeps memory flat: streamed reading, bounded closed-loop read-ahead.

The 1,000,000-request check runs a replay in a child process and reads its peak
RSS; it takes a minute or so, so it is marked slow (``make test-all``).
``python tests/test_replay_memory.py N`` measures an N-request replay by hand.
"""

import os
import random
import resource
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT_MB = 150


def make_blktrace(path: str, n: int, pids: int = 8, seed: int = 5) -> None:
    """n random 4 KiB reads from ``pids`` processes, 1 ms apart, each with its C event."""
    sys.path.insert(0, ROOT)
    from blksim.traces.blktrace import TA_COMPLETE, TA_QUEUE, BlktraceFile, action_value
    rng = random.Random(seed)
    f = BlktraceFile(path, 8 << 20)
    q = action_value(TA_QUEUE, False, True)
    c = action_value(TA_COMPLETE, False, True, fs=True)
    pending = []
    for i in range(n):
        t = i * 1_000_000
        while pending and pending[0][0] <= t:
            done, sector, pid = pending.pop(0)
            f.event(done, c, sector, 4096, pid)
        pid = 100 + i % pids
        sector = rng.randrange(1 << 26) * 8
        f.event(t, q, sector, 4096, pid)
        pending.append((t + 3_000_000, sector, pid))
    for done, sector, pid in pending:
        f.event(done, c, sector, 4096, pid)
    f.close()


def replay_peak_mb(path: str, mode: str) -> tuple[float, int]:
    """Replay ``path`` in a child process; its (peak RSS in MB, requests completed)."""
    code = f"""
import resource, sys
sys.path.insert(0, {ROOT!r})
from blksim.sim.config import resolve
from blksim.sim.engine import Simulation
raw = {{"device": {{"service": "fixed", "service_time": "0.5ms", "capacity": "1t"}},
        "queue": {{"scheduler": "deadline"}},
        "trace": [{{"path": {path!r}, "mode": {mode!r}}}]}}
out = Simulation(resolve(raw, "mem.toml")).run()
try:   # VmHWM starts afresh at exec; ru_maxrss may carry the forking parent's peak
    with open("/proc/self/status") as f:
        mb = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
except (OSError, StopIteration):
    mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(mb, out.metrics.completed)
"""
    # PyPy: its nursery as the make targets set it (README, "PyPy"); by default it is half
    # the last-level cache, hundreds of MB on a large server.
    env = dict(os.environ)
    env.setdefault("PYPY_GC_NURSERY", "4MB")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    mb, done = res.stdout.split()
    return float(mb), int(done)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["open", "closed"])
def test_million_request_replay_stays_under_the_memory_limit(tmp_path, mode):
    path = str(tmp_path / "big.blktrace.0")
    make_blktrace(path, 1_000_000)
    mb, done = replay_peak_mb(path, mode)
    assert done == 1_000_000
    assert mb < LIMIT_MB, f"peak RSS {mb:.1f} MB"


def test_small_replay_memory_helper_works(tmp_path):
    path = str(tmp_path / "small.blktrace.0")
    make_blktrace(path, 2000)
    mb, done = replay_peak_mb(path, "closed")
    assert done == 2000 and 0 < mb < LIMIT_MB


if __name__ == "__main__":
    import tempfile
    import time
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "big.blktrace.0")
        t0 = time.time()
        make_blktrace(p, n)
        print(f"generated {n:,} requests ({os.path.getsize(p) / 1e6:.0f} MB) in "
              f"{time.time() - t0:.0f} s", flush=True)
        for mode in sys.argv[2:] or ["open", "closed"]:
            t0 = time.time()
            mb, done = replay_peak_mb(p, mode)
            print(f"{mode}: {done:,} requests, peak RSS {mb:.1f} MB, {time.time() - t0:.0f} s",
                  flush=True)
