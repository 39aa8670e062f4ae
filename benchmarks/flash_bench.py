"""The flash drive's speed and memory figures (issue 32), printed by ``make bench``
(`benchmarks/run.py --only flash`); asserts nothing.

Three runs, each a whole ``blksim run`` process (start-up included), timed in CPU
seconds with its peak resident memory:

- 1,000,000 random 4 KiB reads at iodepth 128 (io_uring) on the NVMe preset under
  ``none``, kernel 6.6, on a full drive (every unit written once: a fresh drive answers
  reads of never-written units from DRAM), whole and net of the full start;
- a preconditioned steady-state start of the 1 TB NVMe preset: the same run with one
  read, whose time is the set-up's;
- 10,000,000 random 4 KiB writes at iodepth 32 on the steady-state drive, to the end,
  with their latency percentiles (Q2C, from the run's results.json; ``--flash-writes``
  sets the count).

MQSim's figures for the same kind of runs, measured on this machine, come from
``disk_models/flash/reference/mqsim`` when it is there (benchmarks/mqsim_side_by_side.py
runs MQSim itself when ``MQSIM`` points at a built binary).
"""

from __future__ import annotations

import json
import os
import tempfile

NVME_PRESET = "samsung980pro1tb"

FLASH_CONFIG = """\
[run]
kernel = "6.6"
[device]
flash = "{preset}"
start_state = "{state}"
[queue]
scheduler = "none"
[[job]]
name = "{name}"
rw = "{rw}"
bs = "4k"
ioengine = "io_uring"
iodepth = {depth}
number_ios = {requests}
"""


def _run(python: str, run_config_cpu, text: str, latency: list | None = None) -> tuple:
    """(CPU s, peak RSS MB) of the run; with ``latency``, appends the writes' Q2C
    figures (ms) from its results.json."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "flash.toml")
        with open(path, "w") as f:
            f.write(text)
        out = os.path.join(tmp, "out")
        cpu, rss = run_config_cpu(python, path, ("--out", out))
        if latency is not None:
            with open(os.path.join(out, "results.json")) as f:
                latency.append(json.load(f)["processes"][0]["write"]["q2c"])
        return cpu, rss


def flash_timing(python: str, name: str, run_config_cpu, reads: int = 1_000_000,
                 writes: int = 10_000_000, preset: str = NVME_PRESET) -> None:
    """Print the figures for interpreter ``python`` (called ``name``)."""
    print(f"flash, {name}: preset {preset}, kernel 6.6, none, io_uring; whole process")
    rows = []
    # a full drive: a fresh one answers reads of never-written units from DRAM (zeros)
    cpu_f, rss_f = _run(python, run_config_cpu, FLASH_CONFIG.format(
        preset=preset, state="full", name="one", rw="randread", depth=1, requests=1))
    rows.append(("full start (1 read)", 1, cpu_f, rss_f))
    cpu, rss = _run(python, run_config_cpu, FLASH_CONFIG.format(
        preset=preset, state="full", name="randread", rw="randread", depth=128,
        requests=reads))
    rows.append((f"{reads:,} random reads, QD128, full", reads, cpu, rss))
    rows.append(("  the same, net of the start", reads, cpu - cpu_f, rss))
    cpu0, rss0 = _run(python, run_config_cpu, FLASH_CONFIG.format(
        preset=preset, state="steady", name="one", rw="randread", depth=1, requests=1))
    rows.append(("steady-state start (1 read)", 1, cpu0, rss0))
    latency: list = []
    if writes:
        cpu, rss = _run(python, run_config_cpu, FLASH_CONFIG.format(
            preset=preset, state="steady", name="randwrite", rw="randwrite", depth=32,
            requests=writes), latency)
        rows.append((f"{writes:,} random writes, QD32, steady", writes, cpu, rss))
        rows.append(("  the same, net of the start", writes, cpu - cpu0, rss))
    print(f"{'run':40}{'CPU (s)':>9}{'requests/CPU s':>16}{'peak RSS (MB)':>15}")
    for label, n, cpu, rss in rows:
        rate = f"{n / cpu:,.0f}" if n > 1 and cpu > 0 else "-"
        print(f"{label:40}{cpu:>9.2f}{rate:>16}{rss:>15.1f}")
    for q2c in latency:
        print("  the writes' latency (Q2C, ms): " + ", ".join(
            f"{k[:-3]} {q2c[k]:.4g}" for k in ("min_ms", "p50_ms", "mean_ms", "p95_ms",
                                               "p99_ms", "max_ms") if k in q2c))
    print("target (PyPy): reads at least 150,000 requests per CPU second and faster than "
          "MQSim on the same stream; steady-state start under 5 CPU s; writes at 10x "
          "MQSim's rate (MQSim about 3,700 per CPU s here: 37,000) or better; peak memory "
          "under 200 MB (the write run makes the whole map: docs/flash.md, Cost). "
          "MQSim here (disk_models/flash/reference/mqsim): 1M reads at QD64 on its default "
          "device 31.6 CPU s, 6.3 with its whole map in DRAM")
