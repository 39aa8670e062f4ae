"""The tenants benchmark (issue 35): three tenants' traces replayed together, each in its
cgroup, under each I/O controller, against the same replay with no controller.

The traces are the tenants study's three volumes (`blksim.experiments.tenant_traces`:
a latency-sensitive reader, a bulk writer and a backup, in the Alibaba and Tencent
formats), drawn at ``requests`` requests each, written once per size into the
benchmark's cache folder. They replay open loop on a fast service-law device (8 servers,
exponential service of 100 us, queue depth 128, kernel 6.6, no scheduler), so the figure
is the block layer's and the controllers' CPU, not a drive model's. Each run is a fresh
process (start-up included); ``rounds`` interleaved rounds, CPU seconds the best of
them, ``x none`` the median of each round's ratio.

Target (PyPy, 300,000 requests per tenant): iocost within 1.5x the CPU of no controller.

`CONTROLLERS` holds the variants: a name and the ``[cgroups.NAME]`` tables (and any
other top-level tables) it changes. A controller is added as one more entry.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile

#: Requests per tenant: the target's, and ``--quick``'s.
REQUESTS = 300_000
QUICK_REQUESTS = 30_000

#: The variants timed, by name: tables merged into the run's configuration.
CONTROLLERS = {
    "none": {},
    "io.max": {"cgroups": {"bulk": {"io.max": "sda wbps=100000000"},
                           "backup": {"io.max": "sda rbps=100000000"}}},
    # iocost with the device modelled as it is: 8 servers of 100 us mean service are
    # 80,000 I/Os a second whatever the size, so every I/O costs 1/80,000 s (seq and
    # rand alike) and a page next to nothing (bps far above the device's); latency
    # targets at 10x the service time (1 ms at p95) and vrate within 50-150 % leave the
    # controller working every period (a 2 ms period: the most timer work per request)
    "iocost": {"cgroups": {
        "io.cost.qos": "sda enable=1 ctrl=user rpct=95 rlat=1000 wpct=95 wlat=1000 "
                       "min=50 max=150",
        "io.cost.model": "sda ctrl=user model=linear rbps=100000000000 rseqiops=80000 "
                         "rrandiops=80000 wbps=100000000000 wseqiops=80000 "
                         "wrandiops=80000",
        "reader": {"io.weight": "default 500"},
        "bulk": {"io.weight": "default 100"},
        "backup": {"io.weight": "default 50"}}},
}

BASE = {
    "run": {"seed": 1, "kernel": "6.6"},
    "device": {"service": "exponential", "service_time": "100us", "servers": 8,
               "queue_depth": 128, "capacity": "1t"},
    "queue": {"scheduler": "none"},
    "cgroups": {"reader": {}, "bulk": {}, "backup": {}},
}

#: Where each tenant's volume lands on the device.
OFFSETS = {"reader": 0, "bulk": "100g", "backup": "300g"}


def tenant_traces(requests: int, folder: str) -> dict:
    """The three volumes at ``requests`` requests each, written into ``folder`` once
    (deterministic); name -> path."""
    from blksim.experiments import tenant_traces as tt
    out = {}
    for vol in tt.VOLUMES:
        vol = dataclasses.replace(vol, requests=requests)
        sub = os.path.join(folder, f"tenants-{requests}")
        os.makedirs(sub, exist_ok=True)
        path = os.path.join(sub, vol.file_name)
        if not os.path.exists(path):
            tt.write_volume(vol, sub)
        out[vol.name] = path
    return out


def config(traces: dict, controller: str) -> dict:
    """The run's configuration tables under ``controller`` (a key of `CONTROLLERS`)."""
    raw = {k: dict(v) for k, v in BASE.items()}
    raw["cgroups"] = {k: dict(v) for k, v in BASE["cgroups"].items()}
    for key, tables in CONTROLLERS[controller].items():
        target = raw.setdefault(key, {})
        for name, table in tables.items():
            target[name] = {**target.get(name, {}), **table} if isinstance(table, dict) \
                else table
    raw["trace"] = [{"name": name, "path": path, "cgroup": name, "offset": OFFSETS[name]}
                    for name, path in traces.items()]
    return raw


def tenants_timing(python: str, name: str, run_config_cpu, cache: str,
                   requests: int = REQUESTS, rounds: int = 3) -> None:
    """Print each controller's CPU seconds and its ratio to no controller's."""
    import tomli_w
    traces = tenant_traces(requests, cache)
    print(f"tenants, {name}: three tenants' traces of {requests:,} requests each replayed "
          f"together, a cgroup each, on 8 exponential 100 us servers, kernel 6.6; "
          f"CPU the best of {rounds} interleaved runs, x none the median ratio; whole process")
    best: dict = {}
    ratios: dict = {}                     # controller -> its CPU over none's, per round
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for ctl in CONTROLLERS:
            paths[ctl] = os.path.join(tmp, f"{ctl}.toml")
            with open(paths[ctl], "wb") as f:
                tomli_w.dump(config(traces, ctl), f)
        for _ in range(rounds):
            this: dict = {}
            for ctl in CONTROLLERS:
                cpu, rss = run_config_cpu(python, paths[ctl])
                this[ctl] = cpu
                if ctl not in best or cpu < best[ctl][0]:
                    best[ctl] = (cpu, rss)
            for ctl, cpu in this.items():
                ratios.setdefault(ctl, []).append(cpu / this["none"])
    total = 3 * requests
    print(f"{'controller':14}{'requests':>11}{'CPU (s)':>9}{'requests/CPU s':>16}"
          f"{'peak RSS (MB)':>15}{'x none':>8}")
    for ctl, (cpu, rss) in best.items():
        # x none: the median over the rounds of the round's CPU over none's
        print(f"{ctl:14}{total:>11,}{cpu:>9.2f}{total / cpu:>16,.0f}{rss:>15.1f}"
              f"{statistics.median(ratios[ctl]):>8.2f}")
    print(f"target (PyPy, {REQUESTS:,} requests per tenant): iocost within 1.5x the CPU of "
          f"none")
