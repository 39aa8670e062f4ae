"""Turn a finished run into figures: the results dict written as results.json.

The terminal tables drawn from it are the command line's (`blksim.cli.tables`).

Units are in the names: latencies in milliseconds (``*_ms``), throughput in
I/Os per second and MB/s (1 MB = 10^6 bytes, as iostat's MB/s at base 1000).
"""

from __future__ import annotations

import json

from blksim.sim.metrics import DirectionStats, ProcessDirectionStats, jain_index
from blksim.block.request import ioprio_class, ioprio_level
from blksim.common.histogram import latency_ms

SCHEMA_VERSION = 1
VERSION = "0.1.0"

LATENCY_KEYS = ("mean", "p50", "p95", "p99", "max")


def _ms(summary: dict) -> dict:
    """A latency summary in ms: the mean, min and max as measured, the percentiles to the
    digits their histogram gives them."""
    return {"count": summary["count"], **latency_ms(summary, ("mean", "min", "p50", "p95",
                                                              "p99", "max"), "_ms")}


_CLASS_NAMES = {0: "none", 1: "rt", 2: "be", 3: "idle"}


def _round(x, digits: int):
    """``round``, keeping None (a figure of an empty window) None."""
    return None if x is None else round(x, digits)


def _ratio(part, whole, scale: float = 1.0, digits: int = 6):
    """part / whole (times ``scale``), or None when ``whole`` is 0: the convention for
    every mean, share and percentage of results.json (docs/results.md, "Empty windows")."""
    return round(scale * part / whole, digits) if whole else None


def _direction(st, elapsed: float, split: bool, timeouts: bool = False) -> dict:
    s = st.summary(elapsed)
    out = {"ios": s["ios"], "bytes": s["bytes"], "iops": _round(s["iops"], 6),
           "mb_per_s": _round(s["mb_per_s"], 6), "q2c": _ms(s["q2c"]),
           "disk_time_s": round(st.disk_s, 9),
           "timeouts": st.timeouts if timeouts else None}
    if split:
        out["q2d"] = _ms(s["q2d"])
        out["d2c"] = _ms(s["d2c"])
    return out


def _pct(part: int, whole: int) -> float | None:
    return _ratio(part, whole, 100.0)


def _counted(p) -> bool:
    """A process counts in a stretch's fairness figures if it queued I/O in it."""
    return p.issued > 0 or p.ios > 0


def _process_entry(p, elapsed: float, total_disk: float, timeouts: bool) -> dict:
    both = ProcessDirectionStats()
    both.merge(p.read)
    both.merge(p.write)
    return {
        "pid": p.pid, "name": p.name, "nice": p.nice,
        "ioprio_class": _CLASS_NAMES.get(ioprio_class(p.ioprio), "none"),
        "ioprio_level": ioprio_level(p.ioprio),
        "read": _direction(p.read, elapsed, False, timeouts),
        "write": _direction(p.write, elapsed, False, timeouts),
        "all": _direction(both, elapsed, False, timeouts),
        "issued": max(p.issued, p.ios),
        "unfinished": max(0, p.issued - p.ios),
        "disk_time_s": round(p.disk_s, 9),
        "disk_share": _ratio(p.disk_s, total_disk) if total_disk > 0 else None,
        "worst_wait_ms": round(p.worst_wait * 1e3, 6) if p.ios else None,
        "timeouts": p.timeouts if timeouts else None,
        "timeouts_pct": _pct(p.timeouts, p.ios) if timeouts else None,
    }


def _fairness(procs: list, elapsed: float, client_timeout) -> dict:
    """Jain's index of throughput and of disk time over the processes that queued
    I/O, worst wait, timeouts (see docs/results.md)."""
    counted = [p for p in procs if _counted(p)]
    worst = max(counted, key=lambda p: (p.worst_wait, -p.pid), default=None)
    ios = sum(p.ios for p in counted)
    timeouts = sum(p.timeouts for p in counted)
    jt = jain_index(p.sectors for p in counted)
    jd = jain_index(p.disk_s for p in counted)
    return {
        "processes": len(counted),
        "jain_throughput": None if jt is None else round(jt, 6),
        "jain_disk_time": None if jd is None else round(jd, 6),
        "worst_wait_ms": round(worst.worst_wait * 1e3, 6) if ios else None,
        "worst_wait_pid": worst.pid if worst is not None and worst.ios else None,
        "client_timeout_ms": None if client_timeout is None else round(client_timeout * 1e3, 6),
        "timeouts": timeouts if client_timeout is not None else None,
        "timeouts_pct": _pct(timeouts, ios) if client_timeout is not None else None,
        "disk_time_s": round(sum(p.disk_s for p in counted), 9),
        "unfinished": sum(max(0, p.issued - p.ios) for p in counted),
    }


def _stretch(st, client_timeout) -> dict:
    """Totals, per-process figures and fairness of one stretch (run or phase)."""
    # as reported (to the ns): a window or disk time that rounds to 0 gives no rate or share
    elapsed = round(st.elapsed, 9)
    timeouts = client_timeout is not None
    procs = [st.processes[pid] for pid in sorted(st.processes)]
    total_disk = round(sum(p.disk_s for p in procs), 9)
    return {
        "measured_s": elapsed,
        "totals": {
            "read": _direction(st.read, elapsed, True, timeouts),
            "write": _direction(st.write, elapsed, True, timeouts),
            "all": _direction(_combined(st.read, st.write), elapsed, True, timeouts),
        },
        "processes": [_process_entry(p, elapsed, total_disk, timeouts) for p in procs],
        "fairness": _fairness(procs, elapsed, client_timeout),
    }


def _combined(a: DirectionStats, b: DirectionStats) -> DirectionStats:
    both = DirectionStats()
    for st in (a, b):
        both.merge(st)
    return both


def _iostat(blocks: dict, columns: tuple) -> dict:
    """``iostat -x`` per block device over the measured interval (ramp_time to the end):
    name -> (fields, (sample at the start, sample at the end)); ``columns``: the run's
    iostat (`blksim.block.diskstats.run_columns`)."""
    from blksim.block.diskstats import iostat_x
    out = {}
    for name, (fields, (before, after)) in blocks.items():
        if after.time <= before.time:
            return {}
        figures = iostat_x(before, after, fields, columns)
        out[name] = {"interval_s": round(after.time - before.time, 9),
                     **{k: None if v is None else round(v, 6) for k, v in figures.items()}}
    return out


def _calls(st, elapsed: float) -> dict:
    """A process's calls to files in one direction (fio's view): ms."""
    s = st.summary(elapsed)
    return {"calls": s["calls"], "bytes": s["bytes"],
            "calls_per_s": _round(s["calls_per_s"], 6), "mb_per_s": _round(s["mb_per_s"], 6),
            "lat": _ms(s["lat"])}


def _page_cache(cache) -> dict:
    """The page cache's size and its lookups over the whole run."""
    looked = cache.hits + cache.waits + cache.misses
    return {"capacity_pages": cache.capacity, "pages": len(cache), "hits": cache.hits,
            "waits": cache.waits, "misses": cache.misses, "evicted": cache.evicted,
            "hit_ratio": round(cache.hits / looked, 6) if looked else None}


def _block_layer(q, at_start: tuple) -> dict:
    """A disk's block-layer counters since measurement started."""
    allocated0, bio_merges0, request_merges0, waited0 = at_start
    return {"requests_allocated": q.requests_allocated - allocated0,
            "bio_merges": q.bio_merges - bio_merges0,
            "request_merges": q.request_merges - request_merges0,
            "bios_waited_for_request": q.waited - waited0}


def _hw_queues(q, at_start) -> list:
    """A multi-queue disk's figures per hardware queue since measurement started."""
    counts = q.hw_queue_counts()
    if not counts:
        return []
    at_start = at_start or tuple((c, 0, 0, 0) for c, *_ in counts)
    return [{"hctx": i, "cpus": list(cpus), "requests": d - d0, "tag_waits": w - w0,
             "requeues": r - r0}
            for i, ((cpus, d, w, r), (_, d0, w0, r0)) in enumerate(zip(counts, at_start))]


def _devices(outcome) -> dict:
    """Every block device: what it is, and a disk's queue, elevator and counters."""
    host = outcome.host
    out = {}
    for name, dev in host.blocks.items():
        major, minor = dev.number or (None, None)
        entry = {"kind": dev.kind, "major": major, "minor": minor,
                 "sectors": dev.capacity}
        if getattr(dev, "latency", None) is not None:
            entry["latency"] = dev.latency.figures()
        if dev.kind == "disk":
            entry["scheduler"] = dev.elevator_name
            entry["queue_depth"] = dev.device.queue_depth
            entry["device"] = dev.device.describe()
            watch = getattr(host, "flash_watches", {}).get(name)
            if watch is not None:        # beside the drive's own figures (docs/results.md)
                entry["device"].update(watch.figures(outcome.sim_time))
            entry["block_layer"] = _block_layer(dev, outcome.queues_at_start[name])
            hw = _hw_queues(dev, outcome.hctx_at_start.get(name))
            if hw:
                entry["hw_queues"] = hw
            ordered = getattr(dev, "ordered", None)      # barriers (block/flush.py), if any
            if ordered is not None and ordered.barriers:
                entry["barriers"] = ordered.figures()
            flush = getattr(dev, "flush", None)          # blk-mq's flushes (block/mq/flush.py)
            if flush is not None and (flush.flushes or flush.sequences):
                entry["flushes"] = flush.figures()
        elif dev.kind == "member":
            ctrl = dev.controller
            entry["array"] = ctrl.name
            entry["member"] = dev.index
            entry["failed"] = ctrl.array.failed == dev.index
            entry["ios"] = {"read": ctrl.member_ios[dev.index][0],
                            "write": ctrl.member_ios[dev.index][1]}
        elif dev.kind == "partition":
            entry["disk"] = dev.disk.name
            entry["start_sector"] = dev.start
        else:
            entry["volume"] = dev.label
            entry["table"] = [f"{t.start} {t.length} {_target_text(t)}"
                              for t in dev.table.targets]
        out[name] = entry
    return out


def _primary_name(host) -> str | None:
    """The name of the disk whose drive is results.json's top-level ``device``."""
    for name, q in host.disks.items():
        if q is host.primary:
            return name
    return None


def _target_text(t) -> str:
    """A dm target as ``dmsetup table`` writes it, after start and length."""
    if hasattr(t, "stripes"):
        pairs = " ".join(f"{d} {o}" for d, o in t.stripes)
        return f"striped {len(t.stripes)} {t.chunk} {pairs}"
    return f"linear {t.device} {t.offset}"


def results_dict(outcome, resolved_config: dict) -> dict:
    """Everything a run measured, as the documented results.json structure."""
    m = outcome.metrics
    host = getattr(outcome, "host", None)
    from blksim.block.diskstats import run_columns
    if host is not None:
        blocks = {name: (dev.stats.FIELDS, outcome.block_samples[name])
                  for name, dev in host.blocks.items()}
        columns = run_columns(dev.stats for dev in host.blocks.values())
        block_layer = {}
        for name, q in host.disks.items():
            for key, value in _block_layer(q, outcome.queues_at_start[name]).items():
                block_layer[key] = block_layer.get(key, 0) + value
    else:               # a bare outcome (tests): one queue
        from blksim.block.diskstats import IOSTAT_COLUMNS
        from blksim.traces.records import DEVICE_NAME
        samples = getattr(outcome, "diskstats", ())
        blocks = {DEVICE_NAME: (IOSTAT_COLUMNS, samples)} if len(samples) == 2 else {}
        columns = run_columns([getattr(outcome.queue, "stats", None)])
        block_layer = _block_layer(outcome.queue, getattr(outcome, "queue_at_start",
                                                           (0, 0, 0, 0)))
    timeout = getattr(m, "client_timeout", None)
    whole = _stretch(m.totals, timeout)
    phases = []
    info = getattr(outcome, "phases", None) or [{"scheduler": outcome.config.scheduler,
                                                 "iosched": dict(outcome.config.iosched),
                                                 "asked_s": 0.0, "done_s": 0.0}]
    for k, (st, meta) in enumerate(zip(m.phases, info)):
        end = info[k + 1]["asked_s"] if k + 1 < len(info) else outcome.sim_time
        ph = {"index": k, "scheduler": meta["scheduler"], "iosched": dict(meta["iosched"]),
              "start_s": round(meta["asked_s"], 9), "end_s": round(end, 9)}
        if "device" in meta:            # a run with several disks: whose scheduler it is
            ph["device"] = meta["device"]
            ph["schedulers"] = dict(meta["schedulers"])
        if k:
            done = meta.get("done_s")
            ph["switch"] = {
                "noop": bool(meta.get("noop", False)),
                "started_s": None if "started_s" not in meta else round(meta["started_s"], 9),
                "done_s": None if done is None else round(done, 9),
                "drain_ms": None if done is None else round((done - meta["asked_s"]) * 1e3, 6),
                "drained_requests": meta.get("drained", 0),
                "bypassed_requests": meta.get("bypassed", 0),
            }
        ph.update(whole if st is m.totals else _stretch(st, timeout))
        ph["bios_completed"] = ph["totals"]["all"]["ios"]
        phases.append(ph)
    out = {
        "schema": SCHEMA_VERSION,
        "blksim_version": VERSION,
        "name": outcome.config.name,
        "scheduler": getattr(outcome.config, "compared", None) or outcome.config.scheduler,
        # a run with several disks: each disk's (`scheduler` stays the first disk's, or
        # the one compared; `scheduler_text` names them together)
        **({"schedulers": {name: q.elevator_name for name, q in host.disks.items()}}
           if host is not None and len(host.disks) > 1 else {}),
        "seed": outcome.config.seed,
        "device": outcome.device.describe(),
        "simulated_s": round(outcome.sim_time, 9),
        "measured_s": whole["measured_s"],
        "totals": whole["totals"],
        "fairness": whole["fairness"],
        "phases": phases,
        "block_layer": {"bios_completed": m.completed, **block_layer},
        "behind_schedule": list(getattr(outcome, "behind", [])),
        "iostat": _iostat(blocks, columns),
        "processes": whole["processes"],
        "config": resolved_config,
    }
    apps = getattr(outcome, "apps", None) or {}
    if apps:
        out["apps"] = {name: st.figures(outcome.sim_time) for name, st in apps.items()}
    if host is not None:
        out["devices"] = _devices(outcome)
        watch = getattr(host, "flash_watches", {}).get(_primary_name(host))
        if watch is not None:
            out["device"].update(watch.figures(outcome.sim_time))
        if host.page_cache is not None:
            out["page_cache"] = _page_cache(host.page_cache)
        wb = getattr(outcome, "writeback", None)
        if wb is not None:
            out["writeback"] = {
                "dirty_limit_pages": wb.limit, "background_limit_pages": wb.background,
                "ratelimit_pages": wb.ratelimit, "pages_dirtied": wb.dirtied,
                "pages_written": wb.written, "max_dirty_pages": wb.max_dirty,
                "dirty_pages_at_end": wb.nr_dirty, "writeback_pages_at_end": wb.nr_writeback}
        journals = getattr(outcome, "journals", None) or {}
        if journals:
            out["journals"] = {name: {"commits": j.commits, "data_pages": j.data_pages,
                                      "journal_blocks": j.journal_blocks,
                                      "journal_start_sector": j.fs.journal_start,
                                      "journal_sectors": j.fs.journal_sectors,
                                      "commit_interval_s": j.fs.commit_interval,
                                      # jbd2's explicit cache flushes (ext4's fsync)
                                      **({"cache_flushes": j.cache_flushes}
                                         if hasattr(j, "cache_flushes") else {})}
                               for name, j in sorted(journals.items())}
    explain = getattr(outcome, "explain", None)
    if explain is not None:
        out["explain"] = explain.summary()     # docs/explain.md
    calls = getattr(m, "calls", None)
    if calls:
        elapsed = whole["measured_s"]
        by_pid = {p["pid"]: p for p in out["processes"]}
        for pid, (read, write, fsync) in sorted(calls.items()):
            entry = {"read": _calls(read, elapsed), "write": _calls(write, elapsed),
                     "fsync": _calls(fsync, elapsed),
                     "throttled_s": round(m.throttled.get(pid, 0.0), 9)}
            if pid in by_pid:
                by_pid[pid]["calls"] = entry
    cpu_time = getattr(host, "cpu_time", None)
    if cpu_time is not None:
        _cpu_figures(out, cpu_time, out["measured_s"])
    out["steady_state"] = steady_state(m, apps, outcome.sim_time)
    cgroups = getattr(outcome, "cgroups", None)
    if cgroups is not None:
        pressure = getattr(outcome, "pressure", None)
        out["cgroups"] = cgroup_figures(cgroups, pressure, outcome.sim_time,
                                        getattr(getattr(outcome, "host", None),
                                                "iolatency", None))
        if pressure is not None:          # /proc/pressure/io: the root's
            out["io_pressure"] = out["cgroups"]["/"]["io_pressure"]
        iocost_figures(out, host)
    replays = getattr(outcome, "replays", None)
    if replays:
        out["replay"] = replays       # per [[trace]]: replay options and what was done
    return out


def _names_text(names: list) -> str:
    """Device names together: a run of three or more that differ only in a last letter
    one after another as its first and last (``sdb-sdd``), the others listed."""
    out: list = []
    run: list = []

    def close() -> None:
        out.extend([f"{run[0]}-{run[-1]}"] if len(run) >= 3 else run)

    for name in names:
        prev = run[-1] if run else None
        if prev is not None and len(name) == len(prev) and name[:-1] == prev[:-1] and \
                ord(name[-1]) == ord(prev[-1]) + 1:
            run.append(name)
            continue
        if run:
            close()
        run = [name]
    if run:
        close()
    return ", ".join(out)


def per_device_text(values: dict) -> str:
    """``{device: value}`` as one phrase: the value alone when every device has the
    same, else each value with its devices, in the devices' order (``deadline (sda), cfq
    (sdb-sdd)``)."""
    by: dict = {}
    for name, value in values.items():
        by.setdefault(value, []).append(name)
    if len(by) == 1:
        return str(next(iter(by)))
    return ", ".join(f"{value} ({_names_text(names)})" for value, names in by.items())


def scheduler_text(results: dict) -> str:
    """The scheduler of a run as a reader should see it: results.json's ``scheduler``
    when every disk runs it (or there is one disk), else each disk's (``schedulers``):
    ``deadline (sda), cfq (sdb-sdd)``."""
    per = results.get("schedulers")
    if not per:
        return str(results.get("scheduler", "?"))
    return per_device_text(per)


def drive_text(results: dict) -> str:
    """The drive of a run, or each disk's when they differ (as `scheduler_text`)."""
    disks = {name: (d.get("device") or {}).get("name", "?")
             for name, d in (results.get("devices") or {}).items() if d.get("kind") == "disk"}
    if len(disks) < 2:
        return str(results.get("device", {}).get("name", "?"))
    return per_device_text(disks)


def cgroup_figures(tree, pressure=None, end: float = 0.0, iolatency=None) -> dict:
    """results.json ``cgroups``: per group (the root as "/", then each by its path, parents
    first) its ``io_stat``, device -> the six io.stat figures (bytes and I/Os, whole run,
    its descendants' included), and its ``io_pressure`` at the end of the run ``end`` (s)
    when ``pressure`` (a `blksim.block.psi.Pressure`) is given; with blk-iolatency on
    some disks (``iolatency``: disk -> `blksim.block.mq.iolatency.IoLatency`), each group
    it saw has ``io_latency``: disk -> its figures (docs/cgroups.md)."""
    out = {}
    for g in tree.groups.values():
        out[g.name] = {"io_stat": tree.io_stat(g)}
        if pressure is not None:
            out[g.name]["io_pressure"] = pressure.figures(g, end)
        if iolatency and g.parent is not None:
            lat = {dev: policy.stat_of(g) for dev, policy in iolatency.items()}
            lat = {dev: v for dev, v in lat.items() if v is not None}
            if lat:
                out[g.name]["io_latency"] = lat
    return out


def iocost_figures(out: dict, host) -> None:
    """With iocost on a disk (docs/cgroups.md, "io.cost"): io.stat's ``cost.*`` figures
    into each group's ``io_stat`` line for the disk (5.10+), and ``iocost``: per disk
    its device class, period, vrate and vrate series."""
    disks = getattr(host, "disks", None) or {}
    policies = {n: q.iocost for n, q in disks.items() if getattr(q, "iocost", None)}
    if not policies:
        return
    out["iocost"] = {}
    for name, ioc in policies.items():
        for group, extra in ioc.io_stat().items():
            if group in out["cgroups"]:
                out["cgroups"][group]["io_stat"].setdefault(name, {}).update(extra)
        out["iocost"][name] = ioc.figures()


def _cpu_figures(out: dict, cpu_time, elapsed: float) -> None:
    """A run with CPU costs (`blksim.sim.cpu_time`): ``cpus`` as ``mpstat -P ALL`` gives
    them, and each process's ``usr_cpu_pct``/``sys_cpu_pct`` as fio's ``usr_cpu`` and
    ``sys_cpu`` (over its own run time)."""
    out["cpus"] = cpu_time.figures(elapsed)
    for p in out["processes"]:
        p.update(cpu_time.process_figures(p["pid"]))


#: The steady-state section's figures of a run: (results.json path, what the series
#: gives, unit for the terminal).
STEADY_FIGURES = (("totals.all.iops", True, "I/Os per second"),
                  ("totals.all.q2c.mean_ms", False, "ms"))


def steady_state(metrics, apps: dict, end_of_run: float) -> dict:
    """results.json's ``steady_state``: per headline figure (by its results.json path),
    whether it is stationary over the measured window (`blksim.common.stationarity`): the
    run's throughput and mean latency from its completions per interval, and each
    application's own figure (a model whose statistics have ``steady_state(end)``). A run
    that switches elevators is not checked (verdict "not checked")."""
    from blksim.common.stationarity import METHOD, series_report
    series = getattr(metrics, "series", None)
    out = {}
    if len(getattr(metrics, "phases", ())) > 1:
        # a switch of elevator changes the figures on purpose: no window holds one law
        skip = {"method": METHOD, "verdict": "not checked",
                "reason": "the run switches elevators: its phases differ by design"}
        paths = [p for p, _, _ in STEADY_FIGURES] + [f"apps.{name}.{key}" for name, st in
                                                       sorted(apps.items())
                                                       if hasattr(st, "steady_state")
                                                       for key in st.steady_state(end_of_run)]
        return {p: dict(skip) for p in paths}
    if series is not None:
        end = metrics.last_completion
        for path, rate, _ in STEADY_FIGURES:
            out[path] = series_report(series, end, rate=rate, scale=1e-6)
    for name, st in sorted(apps.items()):
        check = getattr(st, "steady_state", None)
        if check is not None:
            for key, report in check(end_of_run).items():
                out[f"apps.{name}.{key}"] = report
    return out


def steady_state_lines(results: dict) -> list:
    """One line per headline figure that drifts over its measured window."""
    from blksim.common.stationarity import drift_line
    units = {path: unit for path, _, unit in STEADY_FIGURES}
    out = []
    for path, report in sorted((results.get("steady_state") or {}).items()):
        line = drift_line(path, report, units.get(path, report.get("unit", "")))
        if line is not None:
            out.append(line)
    return out


def results_json(results: dict) -> str:
    """Deterministic JSON text (sorted keys, fixed separators)."""
    return json.dumps(results, indent=2, sort_keys=True) + "\n"


#: Above this many I/Os per second, a multi-queue run without CPU costs says that the
#: host's CPUs would bound it (blksim's choice: a sixth of a CPU at libaio's 1.6 us per
#: I/O, docs/cpus.md).
CPU_NOTE_IOPS = 100_000


def after_run_warnings(results: dict) -> list:
    """What a finished run warns about beyond its configuration: a replayed trace of
    several devices on one (`blksim.sim.replay.multi_device_warnings`), a headline figure
    that drifts over the measured window (`steady_state_lines`), and a fast multi-queue
    run that charged no CPU time."""
    from blksim.block.mq.elevator import is_multiqueue
    from blksim.sim.replay import multi_device_warnings
    out = multi_device_warnings(results) + steady_state_lines(results)
    kernel = ((results.get("config") or {}).get("run") or {}).get("kernel", "2.6.18")
    iops = ((results.get("totals") or {}).get("all") or {}).get("iops") or 0
    if is_multiqueue(kernel) and "cpus" not in results and iops > CPU_NOTE_IOPS:
        out.append(f"{iops:,.0f} I/Os per second with no CPU time charged: at this rate "
                   f"the host's CPUs bound throughput (about 1.6 us of CPU per I/O with "
                   f"libaio); [host] cpu_costs = true charges it (docs/cpus.md)")
    return out
