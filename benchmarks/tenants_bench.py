"""The tenants benchmark (issue 35): three tenants' traces replayed together, each in its
cgroup, under each I/O controller, against the same replay with no controller.

The traces are the tenants study's three volumes (`blksim.experiments.tenant_traces`:
a latency-sensitive reader, a bulk writer and a backup, in the Alibaba and Tencent
formats), drawn at ``requests`` requests each, written once per size into the
benchmark's cache folder. They replay open loop on a fast service-law device (8 servers,
exponential service of 100 us, queue depth 128, kernel 6.6, no scheduler), so the figure
is the block layer's and the controllers' CPU, not a drive model's. Each run is a fresh
process (start-up included), best of ``rounds`` interleaved runs.

Target (PyPy, 300,000 requests per tenant): iocost within 1.5x the CPU of no controller.

`CONTROLLERS` holds the variants: a name and the ``[cgroups.NAME]`` tables (and any
other top-level tables) it changes. A controller is added as one more entry.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

#: Requests per tenant: the target's, and ``--quick``'s.
REQUESTS = 300_000
QUICK_REQUESTS = 30_000

#: The variants timed, by name: tables merged into the run's configuration.
CONTROLLERS = {
    "none": {},
    "io.max": {"cgroups": {"bulk": {"io.max": "sda wbps=100000000"},
                           "backup": {"io.max": "sda rbps=100000000"}}},
    # once iocost is modelled, e.g.:
    # "iocost": {"cgroups": {"reader": {"io.weight": "default 500"},
    #                        "bulk": {"io.weight": "default 100"},
    #                        "backup": {"io.weight": "default 50"}}},
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
          f"together, a cgroup each, on 8 exponential 100 us servers, kernel 6.6; best of "
          f"{rounds} interleaved runs; whole process")
    best: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for ctl in CONTROLLERS:
            paths[ctl] = os.path.join(tmp, f"{ctl}.toml")
            with open(paths[ctl], "wb") as f:
                tomli_w.dump(config(traces, ctl), f)
        for _ in range(rounds):
            for ctl in CONTROLLERS:
                cpu, rss = run_config_cpu(python, paths[ctl])
                if ctl not in best or cpu < best[ctl][0]:
                    best[ctl] = (cpu, rss)
    total = 3 * requests
    print(f"{'controller':14}{'requests':>11}{'CPU (s)':>9}{'requests/CPU s':>16}"
          f"{'peak RSS (MB)':>15}{'x none':>8}")
    base = best["none"][0]
    for ctl, (cpu, rss) in best.items():
        print(f"{ctl:14}{total:>11,}{cpu:>9.2f}{total / cpu:>16,.0f}{rss:>15.1f}"
              f"{cpu / base:>8.2f}")
    print(f"target (PyPy, {REQUESTS:,} requests per tenant): iocost within 1.5x the CPU of "
          f"none")
