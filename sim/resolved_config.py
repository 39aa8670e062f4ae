"""What a run writes beside its results: the configuration with every default written out
(``config.resolved.toml``, which runs again to the same figures), and the files besides it
whose content the results depend on."""

from __future__ import annotations

import os

from blksim.common.config_values import seconds_text
from blksim.schedulers import get_scheduler
from blksim.sim.disk_config import disk_tables
from blksim.sim.job_config import job_table


def resolved_dict(cfg: RunConfig, queue_depths) -> dict:
    """The configuration as a TOML-ready dict, every default written out.
    ``queue_depths``: each disk's queue depth by name (one number: sda's)."""
    from blksim.sim.storage_config import PRIMARY
    if not isinstance(queue_depths, dict):
        queue_depths = {PRIMARY: queue_depths}
    run = {"name": cfg.name, "seed": cfg.seed, "kernel": cfg.kernel, "hz": cfg.hz,
           "ramp_time": seconds_text(cfg.ramp_time)}
    if cfg.duration is not None:
        run["duration"] = seconds_text(cfg.duration)
    if cfg.client_timeout is not None:
        run["client_timeout"] = seconds_text(cfg.client_timeout)
    device, queue = disk_tables(cfg.primary, queue_depths[PRIMARY])
    out = {"run": run, "device": device, "queue": queue}
    others = {}
    for name, dev in cfg.devices.items():
        if name != PRIMARY:
            device, queue = disk_tables(dev, queue_depths[name])
            others[name] = {**device, "queue": queue}
    if others:
        out["devices"] = others
    if cfg.volumes:
        out["volumes"] = {v.name: {"table": v.table} for v in cfg.volumes}
    if cfg.files:
        out["host"] = {"memory": cfg.memory, "page_cache": cfg.page_cache,
                       "copy_mb_per_s": cfg.copy_rate / 1e6}
        out["vm"] = dict(cfg.vm)
        out["file"] = [f.table() for f in cfg.files]
    from blksim.sim.cpus import DEFAULT_CPUS
    if cfg.cpus != DEFAULT_CPUS:          # (written when not the default: older runs' files)
        out.setdefault("host", {})["cpus"] = cfg.cpus
    if getattr(cfg, "cpu_costs", None) is not None:   # every figure, the preset's included
        out.setdefault("host", {})["cpu_costs"] = cfg.cpu_costs
    if cfg.filesystems:
        out["filesystems"] = {f"/dev/{d}": f.table() for d, f in cfg.filesystems.items()}
    if cfg.apps:
        app_files = {p for a in cfg.apps for p in a.files}
        out["file"] = [f for f in out.get("file", []) if f["path"] not in app_files]
        if not out["file"]:
            del out["file"]
        out["app"] = [dict(a.table) for a in cfg.apps]
    if cfg.jobs:
        out["job"] = [job_table(job, "iodepth" in table)
                      for job, table in zip(cfg.jobs, cfg.job_tables)]
    if cfg.traces:
        out["trace"] = [t.table() for t in cfg.traces]
    if cfg.switches:
        out["switch"] = [sw.table() for sw in cfg.switches]
    groups = getattr(cfg, "cgroups", None)
    if groups is not None:
        out["cgroups"] = groups.tables()
        for kind, paths in groups.placements.items():
            for table, path in zip(out.get(kind, ()), paths):
                if path is not None:
                    table["cgroup"] = path
    return out


def input_files(cfg: RunConfig, raw: dict) -> list[str]:
    """Every file the run of ``cfg`` (resolved from ``raw``) reads besides its configuration,
    whose content its results depend on: drive and controller descriptions (the shipped
    presets' files included), traces (every per-CPU file of a blktrace capture), fio job
    files and the source of every scheduler plugin it loads (an experiment's run key hashes
    them, so that changing one makes a new run)."""
    import sys
    from blksim.disk_models.registry import device_type
    from blksim.traces.blktrace import trace_files

    base = os.path.dirname(os.path.abspath(cfg.source))
    files = []
    schedulers = [s.scheduler for s in cfg.switches]
    for dev in cfg.devices.values():
        schedulers.append(dev.scheduler)
        files += device_type(dev.type).files(dev.settings)
    for spec in cfg.traces:
        try:
            files += trace_files(spec.path)
        except (OSError, ValueError):
            files.append(spec.path)
    fio = raw.get("fio")
    for p in (fio if isinstance(fio, list) else [] if fio is None else [fio]):
        files.append(p if os.path.isabs(p) else os.path.join(base, p))
    for name in schedulers:
        module = sys.modules.get(get_scheduler(name, cfg.kernel).__module__)
        path = getattr(module, "__file__", None)
        if path and not module.__name__.startswith("blksim."):
            files.append(path)
    return sorted({os.path.abspath(f) for f in files})
