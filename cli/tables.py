"""Terminal tables of a run's results (the dict of `blksim.sim.results`).

Units are in the column heads: latencies in milliseconds, throughput in I/Os
per second and MB/s (1 MB = 10^6 bytes).
"""

from __future__ import annotations

from blksim.sim.results import LATENCY_KEYS

#: The plain line a run table prints instead of its totals when no bio completed in the
#: measured window (every latency, rate and share of such a run is null).
NOTHING_COMPLETED = "no I/O completed in the measured window"


def _fmt(x: float | None, width: int = 9) -> str:
    """A figure in a column ``width`` wide; "-" for a figure that is None (an empty
    window's: docs/results.md, "Empty windows")."""
    if x is None:
        return f"{'-':>{width}}"
    if x >= 1e5:
        return f"{x:{width}.0f}"
    if x >= 100:
        return f"{x:{width}.1f}"
    return f"{x:{width}.3f}"


def _fmt_p(x: float | None, width: int = 9) -> str:
    """A percentile: the three significant digits its histogram gives it."""
    import math
    from blksim.common.histogram import PERCENTILE_DIGITS
    if x is None or x == 0.0 or not math.isfinite(x):
        return _fmt(x, width)
    decimals = max(0, PERCENTILE_DIGITS - 1 - math.floor(math.log10(abs(x))))
    # never wider than the column: a tiny percentile (under a microsecond, in ms) keeps a
    # leading space and as many decimals as fit
    decimals = min(decimals, width - 3)
    return f"{x:{width}.{decimals}f}"


def _cell(x: float | None, width: int = 9, percentile: bool = False) -> str:
    """A figure's cell: a percentile to the digits its histogram gives it, any other
    figure as `_fmt` prints it (the formatter the application models' tables get)."""
    return (_fmt_p if percentile else _fmt)(x, width)


def _lat_cells(d: dict) -> list[str]:
    return [_cell(d[f"{k}_ms"], percentile=k.startswith("p")) for k in LATENCY_KEYS]


def app_lines(results: dict) -> list:
    """The applications' own figures, each in its model's table."""
    from blksim.apps import models
    out = []
    for name, figures in results.get("apps", {}).items():
        out += ["", *models()[figures["type"]].lines(name, figures, _cell)]
    return out


def run_table(results: dict) -> str:
    """The table of one run: the applications' figures first, then totals per direction,
    Q2D / D2C split, per-process lines."""
    from blksim.sim.results import drive_text, scheduler_text
    sched, drive = scheduler_text(results), drive_text(results)
    lines = [
        f"{results['name']}: scheduler{'s' if '(' in sched else ''} {sched}, "
        f"drive{'s' if '(' in drive else ''} {drive}, "
        f"seed {results['seed']}, {results['simulated_s']:.3f} s simulated, "
        f"{results['measured_s']:.3f} s measured",
        *app_lines(results),
        *device_lines(results.get("devices", {})),
        "",
    ]
    if results["totals"]["all"]["ios"] == 0:
        lines.append(nothing_completed_line(results))
    else:
        lines.append(f"{'':8}{'IOPS':>9}{'MB/s':>9} | {'latency (ms): mean':>18}{'p50':>9}"
                     f"{'p95':>9}{'p99':>9}{'max':>9}")
    for dname in ("read", "write", "all"):
        d = results["totals"][dname]
        if d["ios"] == 0:
            continue
        lines.append(f"{dname:8}{_fmt(d['iops'])}{_fmt(d['mb_per_s'])} | {'Q2C':>9}"
                     + "".join(_lat_cells(d["q2c"])))
        for part in ("q2d", "d2c"):
            lines.append(f"{'':8}{'':9}{'':9} | {part.upper():>9}" + "".join(_lat_cells(d[part])))
    rows = []
    for p in results["processes"]:
        for dname in ("read", "write"):
            d = p[dname]
            if d["ios"] == 0:
                continue
            rows.append(f"{p['pid']:>6} {p['name'][:16]:16}{dname[0].upper():>4}"
                         f"{_fmt(d['iops'])}{_fmt(d['mb_per_s'])} | {'':5}"
                         + "".join(_lat_cells(d["q2c"])))
    if rows:                # a process line only for what completed
        lines += ["", f"{'pid':>6} {'process':16}{'dir':>4}{'IOPS':>9}{'MB/s':>9} | "
                      f"{'Q2C (ms): mean':>14}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}", *rows]
    lines.append("")
    lines.extend(_fairness_lines(results))
    phases = results.get("phases", ())
    if len(phases) > 1:
        lines.append("")
        lines.extend(_phase_lines(results))
    for r in results.get("replay", ()):
        lines.append("")
        lines.append(replay_line(r))
    lines.extend(call_lines(results))
    bl = results["block_layer"]
    lines.append("")
    lines.append(f"block layer: {bl['bios_completed']:,} bios completed, "
                 f"{bl['requests_allocated']:,} requests, {bl['bio_merges']:,} bio merges, "
                 f"{bl['request_merges']:,} request merges")
    lines.extend(hw_queue_lines(results.get("devices", {})))
    lines.extend(flash_lines(results))
    lines.extend(cpu_lines(results))
    lines.extend(iostat_lines(results.get("iostat", {})))
    lines.extend(cgroup_lines(results.get("cgroups", {})))
    if "explain" in results:            # --explain: where each process's time went
        from blksim.sim.explain_report import explain_lines
        lines.extend(explain_lines(results["explain"]))
    for b in results.get("behind_schedule", ()):
        # (a multi-queue default nr_requests is left out of the resolved configuration
        # when it lies below sysfs's minimum: then the requests are the tags)
        nr = results.get("config", {}).get("queue", {}).get("nr_requests")
        pool = f"all {nr} requests" if nr is not None else "every request (tag)"
        lines.append(f"{b['source']} fell behind its schedule: the device did not keep up, and "
                     f"with {pool} in use it "
                     f"slept and submitted late, up to {b['max_lag_s']:.3f} s behind "
                     f"({b['end_lag_s']:.3f} s at the end)")
    return "\n".join(lines) + "\n"


def nothing_completed_line(results: dict) -> str:
    """The one line that stands for the totals of a run in whose measured window no bio
    completed: there is no latency, rate or share to give, only what was left over."""
    unfinished = results.get("fairness", {}).get("unfinished") or 0
    ramp = ((results.get("config") or {}).get("run") or {}).get("ramp_time")
    from blksim.common.units import parse_time
    window = (f"from ramp_time {ramp}; " if ramp and parse_time(ramp, "ramp_time", "s") > 0
              else "")
    text = (f"{NOTHING_COMPLETED} ({window}the run ended at {results['simulated_s']:.6g} s): "
            f"no latency, rate or share to report")
    if unfinished:
        text += f"; {unfinished:,} I/Os were still outstanding"
    return text


def call_lines(results: dict) -> list:
    """Calls to files per process, as fio reports them (completion latency), and the page
    cache's hit ratio."""
    rows = []
    for p in results["processes"]:
        for dname in ("read", "write", "fsync"):
            c = p.get("calls", {}).get(dname)
            if c and c["calls"]:
                lat = c["lat"]
                rows.append(f"{p['pid']:>6} {p['name'][:16]:16}"
                            f"{'fsync' if dname == 'fsync' else dname[0].upper():>5}"
                            f"{_fmt(c['calls_per_s'])}{_fmt(c['mb_per_s'])} | {'':4}"
                            + "".join(_lat_cells(lat)))
    if not rows:
        return []
    out = ["", f"{'pid':>6} {'calls to files':16}{'call':>5}{'calls/s':>9}{'MB/s':>9} | "
               f"{'lat (ms): mean':>14}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}", *rows]
    throttled = [(p["name"], p["calls"]["throttled_s"]) for p in results["processes"]
                 if p.get("calls", {}).get("throttled_s")]
    for name, sec in throttled:
        out.append(f"{name} was throttled for {sec:.3f} s (dirty pages over dirty_ratio)")
    wb = results.get("writeback")
    if wb and wb["pages_dirtied"]:
        out.append(f"writeback: {wb['pages_dirtied'] * 4096 / 1e6:.1f} MB dirtied, "
                   f"{wb['pages_written'] * 4096 / 1e6:.1f} MB written back; at most "
                   f"{wb['max_dirty_pages'] * 4096 / 1e6:.1f} MB dirty (limits: background "
                   f"{wb['background_limit_pages'] * 4096 / 1e6:.1f} MB, dirty "
                   f"{wb['dirty_limit_pages'] * 4096 / 1e6:.1f} MB)")
    pc = results.get("page_cache")
    if pc and pc["hit_ratio"] is not None:
        out.append(f"page cache: {pc['hit_ratio'] * 100:.1f} % of page lookups hit "
                   f"({pc['hits']:,} hits, {pc['waits']:,} waited for a read, "
                   f"{pc['misses']:,} misses); {pc['pages']:,} of {pc['capacity_pages']:,} "
                   f"pages in use")
    return out


def device_lines(devices: dict) -> list:
    """A line per disk (drive, elevator, queue depth, partitions) and per volume, for a
    run with more than one block device."""
    if len(devices) < 2:
        return []
    out = [""]
    for name, d in devices.items():
        if d["kind"] == "disk":
            parts = [p for p, e in devices.items() if e.get("disk") == name]
            text = (f"{name:6} {d['device'].get('name', '?')}, scheduler {d['scheduler']}, "
                    f"queue depth {d['queue_depth']}, {d['sectors'] * 512 / 1e9:.1f} GB")
            if parts:
                text += f"; partitions {', '.join(parts)}"
            out.append(text + _latency_text(d))
        elif d["kind"] == "member":
            continue
        elif d["kind"] == "dm":
            out.append(f"{name:6} {d['volume']}: {d['sectors'] * 512 / 1e9:.1f} GB, "
                       + "; ".join(d["table"]) + _latency_text(d))
    return out


def hw_queue_lines(devices: dict) -> list:
    """A line per multi-queue disk with more than one hardware queue: each queue's CPUs,
    requests, tag waits and requeues."""
    out = []
    for name, d in devices.items():
        hw = d.get("hw_queues") or []
        if len(hw) < 2:
            continue
        parts = []
        for h in hw:
            cpus = ",".join(map(str, h["cpus"])) or "none"
            parts.append(f"hctx{h['hctx']} (CPUs {cpus}) {h['requests']:,} requests, "
                         f"{h['tag_waits']:,} tag waits, {h['requeues']:,} requeues")
        out.append(f"hardware queues of {name}: " + "; ".join(parts))
    return out


def _flash_drives(results: dict) -> list:
    """(disk name, device entry) of every flash disk of a run (its entry has the
    ``measured`` figures `blksim.sim.flash_figures` adds)."""
    devices = results.get("devices") or {}
    out = [(name, d["device"]) for name, d in devices.items()
           if d.get("kind") == "disk" and "measured" in d.get("device", {})]
    if not devices and "measured" in results.get("device", {}):
        out.append(("sda", results["device"]))
    return out


def _busiest(shares: list, what: str) -> str:
    """The busiest of ``shares`` (0..1) and their mean, in per cent."""
    top = max(range(len(shares)), key=shares.__getitem__)
    return (f"{what} busiest {100 * shares[top]:.1f} % ({what[:-1] if what.endswith('s') else what}"
            f" {top}), mean {100 * sum(shares) / len(shares):.1f} %")


def flash_lines(results: dict) -> list:
    """A flash disk's figures (docs/results.md, "Flash drives"), each with its window:
    write amplification, GC runs and time, erases, the GC read-latency tail and
    utilisation over the measured window (ramp_time to the end); free blocks and cache
    hit ratios over the whole run. A figure of an empty window is not printed."""
    out = []
    for name, dev in _flash_drives(results):
        m = dev["measured"]
        f = dev["figures"]
        window = m["end_s"] - m["start_s"]
        out += ["", f"flash {name} ({dev.get('name', '?')}):",
                f"  measured window {m['start_s']:.3f}-{m['end_s']:.3f} s:"]
        if window <= 0:
            out.append("    the measured window is empty: no flash figures for it")
        else:
            if m["write_amplification"] is None:
                out.append("    write amplification: - (no host page written)")
            else:
                out.append(f"    write amplification {m['write_amplification']:.3f} (pages "
                           f"programmed / host pages written, in 4 KiB mapping units: "
                           f"{m['host_pages_written']:,} host + {m['gc_pages_written']:,} "
                           f"moved by GC)")
            if m["gc_runs"] == 0 and m["slc_folds"] == 0:
                out.append(f"    garbage collection: none; {m['erases']:,} erases")
            else:
                dies = len(f.get("utilisation", {}).get("dies") or ()) or "?"
                out.append(f"    garbage collection: {m['gc_runs']:,} runs ({m['gc_foreground_runs']:,}"
                           f" foreground, {m['gc_background_runs']:,} background), "
                           f"{m['slc_folds']:,} SLC folds, {m['erases']:,} erases")
                out.append(f"    GC time {_seconds(m['gc_time_s'])} summed over the dies = "
                           f"{m['gc_time_pct_of_die_time']:.1f} % of {dies} dies x "
                           f"{window:.3f} s")
            out.extend(_tail_lines(dev.get("gc_tail") or {}))
            util = m.get("utilisation") or {}
            if util.get("channels") and util.get("dies"):
                out.append("    utilisation: " + _busiest(util["channels"], "channels") + "; "
                           + _busiest(util["dies"], "dies"))
        out.append(f"  whole run 0.000-{results['simulated_s']:.3f} s:")
        free = [v for _, v in f.get("free_blocks_series") or ()]
        if "free_blocks" in f:
            low = f", lowest sampled {min(free):,}" if free else ""
            out.append(f"    free blocks {f['free_blocks']:,} now{low}")
        ratios = []
        if f.get("host_pages_written"):
            ratios.append(f"SLC cache took {100 * f['slc_cache_hit_ratio']:.1f} % of host writes")
        if "mapping_cache_hit_ratio" in f:
            ratios.append(f"mapping cache hit ratio {100 * f['mapping_cache_hit_ratio']:.1f} %")
        if ratios:
            out.append("    " + "; ".join(ratios))
    return out


def _seconds(s: float) -> str:
    """A time in ms below a second, else in s."""
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s"


def _tail_lines(tail: dict) -> list:
    """The GC read-latency tail: reads whose device time overlapped GC against the
    others (Q2C, ms); nothing when no read overlapped GC."""
    gc, other = tail.get("during_gc"), tail.get("other")
    if not gc or not gc["reads"]:
        return []

    def text(t: dict) -> str:
        return (f"{t['reads']:,} reads, Q2C p50 {_fmt_p(t['p50_ms'], 12).strip()} ms, "
                f"p99 {_fmt_p(t['p99_ms'], 12).strip()} ms, "
                f"p99.9 {_fmt_p(t['p999_ms'], 12).strip()} ms")
    out = [f"    reads during GC: {text(gc)}"]
    out.append(f"    other reads:     {text(other)}" if other and other["reads"]
               else "    other reads:     none")
    return out


def cpu_lines(results: dict) -> list:
    """A run with CPU costs: each CPU's time as ``mpstat -P ALL`` gives it, and each
    process's as fio's ``usr_cpu``/``sys_cpu`` (per cent of its run time)."""
    cpus = results.get("cpus")
    if not cpus:
        return []
    out = ["", f"CPUs over the {cpus['elapsed_s']:.6f} s measured (mpstat -P ALL, %):",
           f"{'CPU':>6}{'%usr':>9}{'%sys':>9}{'%irq':>9}{'%soft':>9}{'%idle':>9}"
           f"{'spin (s)':>12}"]
    for row in (cpus["all"], *cpus["per_cpu"]):
        out.append(f"{row['cpu']:>6}" + "".join(f"{row[k]:9.2f}" for k in
                                               ("usr_pct", "sys_pct", "irq_pct", "soft_pct",
                                                "idle_pct")) + f"{row['spin_s']:12.6f}")
    for name, lk in cpus.get("scheduler_locks", {}).items():
        out.append(f"scheduler lock of {name}: {lk['acquisitions']:,} acquisitions, "
                   f"{lk['contended']:,} found it held, {lk['spin_s']:.6f} s spinning")
    procs = [p for p in results["processes"] if "sys_cpu_pct" in p]
    if procs:
        out.append(f"{'pid':>6} {'process':16}{'usr_cpu %':>11}{'sys_cpu %':>11}")
        for p in procs:
            out.append(f"{p['pid']:>6} {p['name'][:16]:16}{p['usr_cpu_pct']:11.2f}"
                       f"{p['sys_cpu_pct']:11.2f}")
    return out


def cgroup_lines(cgroups: dict) -> list:
    """io.stat per group and device (a group's figures include its descendants') and
    io.pressure per group, when the run has groups."""
    rows = []
    for path, figures in cgroups.items():
        for dev, st in figures["io_stat"].items():
            rows.append(f"{path[:20]:20} {dev:8}{st['rbytes'] / 1e6:>11.3f}"
                        f"{st['wbytes'] / 1e6:>11.3f}{st['rios']:>10}{st['wios']:>10}"
                        f"{st['dbytes'] / 1e6:>11.3f}{st['dios']:>10}")
    out = []
    if rows:
        out += ["", "io.stat per cgroup (whole run; a group includes its children):",
                f"{'cgroup':20} {'device':8}{'rMB':>11}{'wMB':>11}{'rios':>10}{'wios':>10}"
                f"{'dMB':>11}{'dios':>10}", *rows]
    pressure = [(path, f["io_pressure"]) for path, f in cgroups.items() if "io_pressure" in f]
    if pressure:
        out += ["", "io.pressure per cgroup at the end (averages in %, totals in s):",
                f"{'cgroup':20} {'some avg10':>11}{'avg60':>8}{'avg300':>8}{'total':>10}"
                f"{'full avg10':>12}{'avg60':>8}{'avg300':>8}{'total':>10}"]
        for path, p in pressure:
            cells = "".join(f"{p[k]['avg10']:>{w}.2f}{p[k]['avg60']:>8.2f}"
                            f"{p[k]['avg300']:>8.2f}{p[k]['total_us'] / 1e6:>10.3f}"
                            for k, w in (("some", 11), ("full", 12)))
            out.append(f"{path[:20]:20} {cells}")
    return out


def _latency_text(d: dict) -> str:
    """A device's mean Q2C and D2C, as btt gives them for it."""
    lat = d.get("latency")
    if not lat or not lat["bios"]:
        return ""
    return (f"; {lat['bios']:,} bios, Q2C {lat['q2c_mean_ms']:.3f} ms, "
            f"D2C {lat['d2c_mean_ms']:.3f} ms (mean)")


def iostat_lines(iostat: dict) -> list:
    """``iostat -x``'s table: a row per device, iostat's columns and spellings."""
    if not iostat:
        return []
    from blksim.block.diskstats import IOSTAT12_COLUMNS, IOSTAT_COLUMNS
    first = next(iter(iostat.values()))
    itv = first["interval_s"]
    if "aqu-sz" in first:                 # a multi-queue kernel's: today's sysstat
        columns = IOSTAT12_COLUMNS
        units = "kB = 1024 bytes; areq-sz in kB; await in ms; %util in percent"
    else:
        columns = IOSTAT_COLUMNS
        units = ("MB = 2^20 bytes; avgrq-sz in 512-byte sectors; await, svctm in ms; "
                 "%util in percent")
    # a column is as wide as its name and its widest figure, plus a space: figures of
    # 10,000/s and more no longer run into their neighbour
    widths = [max(8, len(c) + 1, *(len(f"{fig[c]:.2f}") + 1 for fig in iostat.values()
                                   if fig.get(c) is not None))
              for c in columns]
    out = ["", f"iostat -x over {itv:.3f} s (rates per second, {units})",
           "Device:  " + "".join(f"{c:>{w}}" for c, w in zip(columns, widths))]
    for name, figures in iostat.items():
        out.append(f"{name:9}" + "".join(f"{'-':>{w}}" if figures[c] is None
                                         else f"{figures[c]:>{w}.2f}"
                                         for c, w in zip(columns, widths)))
    return out


def _share_text(share) -> str:
    """A disk share in percent, "-" when no device time was given out."""
    return "-" if share is None else f"{share * 100:.1f} %"


def _prio(p: dict) -> str:
    return f"{p.get('ioprio_class', 'be')}/{p.get('ioprio_level', 4)}"


def _timeouts_text(n, pct) -> str:
    if n is None:
        return "-"
    return f"{n:,} (-)" if pct is None else f"{n:,} ({pct:.2f} %)"


def _jain_text(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def fairness_summary(f: dict) -> str:
    """One line: Jain's indexes, worst wait and timeouts of a stretch."""
    text = (f"fairness over {f['processes']} processes: Jain's index "
            f"{_jain_text(f['jain_throughput'])} (throughput), "
            f"{_jain_text(f['jain_disk_time'])} (disk time); worst wait "
            + ("-" if f["worst_wait_ms"] is None else f"{f['worst_wait_ms']:.3f} ms"))
    if f.get("worst_wait_pid") is not None:
        text += f" (pid {f['worst_wait_pid']})"
    if f.get("client_timeout_ms") is not None:
        text += (f"; timeouts (Q2C > {f['client_timeout_ms']:g} ms): "
                 f"{_timeouts_text(f['timeouts'], f['timeouts_pct'])}")
    if f.get("unfinished"):
        text += f"; {f['unfinished']:,} I/Os unfinished at the end"
    return text


def _fairness_lines(results: dict) -> list[str]:
    """Per-process disk time, share, worst wait and timeouts, then the summary line."""
    timeouts = results["fairness"].get("client_timeout_ms") is not None
    lines = [f"{'pid':>6} {'process':16}{'ioprio':>7}{'nice':>5}{'disk (s)':>10}"
             f"{'share':>9}{'worst wait (ms)':>17}" + (f"{'timeouts':>18}" if timeouts else "")]
    for p in results["processes"]:
        if not p["issued"]:
            continue
        lines.append(f"{p['pid']:>6} {p['name'][:16]:16}{_prio(p):>7}{p['nice']:>5}"
                     f"{p['disk_time_s']:>10.3f}{_share_text(p['disk_share']):>9}"
                     f"{_fmt(p['worst_wait_ms'], 17)}"
                     + (f"{_timeouts_text(p['timeouts'], p['timeouts_pct']):>18}"
                        if timeouts else ""))
    lines.append(fairness_summary(results["fairness"]))
    return lines


def _phase_labels(results: dict) -> list[str]:
    """What each phase's scheduler column says. With one disk, the scheduler. With
    several, a phase after a switch names the disk switched (``sdb: noop``) and phase 0
    the schedulers the switched disks ran in it (``sdb: cfq``), from each phase's own
    ``device``, ``scheduler`` and ``schedulers``."""
    phases = results["phases"]
    if not any("device" in ph for ph in phases):
        return [ph["scheduler"] for ph in phases]
    switched = list(dict.fromkeys(ph["device"] for ph in phases[1:])) or [phases[0]["device"]]
    first = phases[0]
    # (a results.json written before phases said their disk has no phase-0 device: "?")
    ran = first.get("schedulers") or {first.get("device"): first["scheduler"]}
    return [", ".join(f"{disk}: {ran.get(disk, '?')}" for disk in switched),
            *(f"{ph['device']}: {ph['scheduler']}" for ph in phases[1:])]


def _phase_lines(results: dict) -> list[str]:
    """One line per phase (a bio belongs to the phase it was queued in)."""
    labels = _phase_labels(results)
    width = max(13, *(len(label) + 1 for label in labels))
    lines = ["phases (each bio counts in the phase it was queued in):",
             f"{'#':>2} {'scheduler':{width}}{'from (s)':>9}{'to (s)':>9}{'drain (ms)':>11}"
             f"{'IOPS':>9}{'MB/s':>9}{'Q2C mean':>10}{'p99':>9}{'max':>9}"
             f"{'Jain tput':>10}{'disk':>7}{'timeouts':>10}"]
    for ph, label in zip(results["phases"], labels):
        a = ph["totals"]["all"]
        sw = ph.get("switch")
        if sw is None:
            drain = ""
        elif sw["drain_ms"] is None:
            drain = "unfinished"
        else:
            drain = f"{sw['drain_ms']:.1f}"
        f = ph["fairness"]
        lines.append(f"{ph['index']:>2} {label:{width}}{ph['start_s']:>9.3f}"
                     f"{ph['end_s']:>9.3f}{drain:>11}{_fmt(a['iops'])}{_fmt(a['mb_per_s'])}"
                     f"{_fmt(a['q2c']['mean_ms'], 10)}{_cell(a['q2c']['p99_ms'], percentile=True)}"
                     f"{_fmt(a['q2c']['max_ms'])}{_jain_text(f['jain_throughput']):>10}"
                     f"{_jain_text(f['jain_disk_time']):>7}"
                     f"{'-' if f['timeouts'] is None else format(f['timeouts'], ','):>10}")
    return lines


def replay_line(r: dict) -> str:
    """One line stating how a trace was replayed (the choices that shape the results)."""
    parts = [f"{r['mode']} loop", f"speed {r['speed']:g}"]
    if "max_gap" in r:
        parts.append(f"gaps capped at {r['max_gap'] * 1e3:g} ms")
    if "start" in r or "end" in r:
        parts.append(f"window {r.get('start', 0):g} s..{r['end']:g} s" if "end" in r
                     else f"from {r['start']:g} s")
    if "device" in r:
        parts.append(f"device {r['device']}")
    elif "volume" in r:
        parts.append(f"volume {r['volume']}")
    remap = f"remap {r['remap']}"
    if r["remap"] != "none":
        remap += f" ({r.get('remapped', 0):,} requests moved"
        if r["remap"] == "scale":
            remap += f", trace volume {r.get('trace_sectors')} sectors"
        remap += ")"
    parts.append(remap)
    if "offset_sectors" in r:
        parts.append(f"at sector {r['offset_sectors']:,}")
    if "align" in r:
        parts.append(f"recorded clock ({r['clock']}): starts at {r['shift_s']:g} s")
    line = (f"replay {r['name']} ({r['format']}): {r['requests']:,} requests, "
            + ", ".join(parts))
    if r.get("completions_recorded") is False and r["requests"]:
        line += ("\n  (the trace records no completions: each process's think time is the "
                 "recorded gap between its issues, so a slower simulated device stretches "
                 "the run)")
    return line


def compare_table(all_results: list[dict]) -> str:
    """One table, a column per scheduler, a row per figure (units in the row names)."""
    names = [r["scheduler"] for r in all_results]
    width = max(12, *(len(n) + 2 for n in names))
    first = all_results[0]
    from blksim.sim.results import drive_text
    drive = drive_text(first)
    head = (f"{first['name']}: drive{'s' if '(' in drive else ''} {drive}, seed {first['seed']}, "
            f"{first['simulated_s']:.3f} s simulated")
    label_w = 34
    rows = [head, ""]
    empty = [n for n, r in zip(names, all_results) if r["totals"]["all"]["ios"] == 0]
    if empty:                           # their columns are "-": say why, once
        rows += [f"{', '.join(empty)}: {NOTHING_COMPLETED}", ""]
    rows.append(f"{'':{label_w}}" + "".join(f"{n:>{width}}" for n in names))

    def row(label: str, values: list[float]) -> None:
        percentile = any(f" {p} " in f" {label} " for p in ("p50", "p95", "p99"))
        rows.append(f"{label:{label_w}}"
                    + "".join(_cell(v, width, percentile=percentile) for v in values))

    # the applications' own figures first
    from blksim.apps import models
    for name, figures in first.get("apps", {}).items():
        heading, app_rows = models()[figures["type"]].compare_rows(
            name, [r["apps"][name] for r in all_results])
        rows.append(heading)
        for label, values in app_rows:
            row(label, values)
        rows.append("")

    for dname in ("read", "write", "all"):
        if all(r["totals"][dname]["ios"] == 0 for r in all_results) and dname != "all":
            continue
        row(f"{dname} IOPS", [r["totals"][dname]["iops"] for r in all_results])
        row(f"{dname} MB/s", [r["totals"][dname]["mb_per_s"] for r in all_results])
        for part in ("q2c", "q2d", "d2c"):
            for k in LATENCY_KEYS:
                row(f"{dname} {part.upper()} {k} (ms)",
                    [r["totals"][dname][part][f"{k}_ms"] for r in all_results])
        rows.append("")

    def opt_row(label: str, values: list) -> None:
        rows.append(f"{label:{label_w}}" + "".join(
            f"{'-':>{width}}" if v is None else f"{v:>{width},}" if isinstance(v, int)
            else _fmt(v, width) for v in values))

    fair = [r.get("fairness", {}) for r in all_results]
    opt_row("fairness: Jain, throughput", [f.get("jain_throughput") for f in fair])
    opt_row("fairness: Jain, disk time", [f.get("jain_disk_time") for f in fair])
    opt_row("worst wait (ms)", [f.get("worst_wait_ms") for f in fair])
    timeout_ms = fair[0].get("client_timeout_ms")
    if timeout_ms is not None:
        opt_row(f"timeouts (Q2C > {timeout_ms:g} ms)", [f.get("timeouts") for f in fair])
    if any(p.get("calls") for p in first["processes"]):
        rows.append("")
        rows.append("calls to files (fio's view; latency in ms):")
        for i, p in enumerate(first["processes"]):
            for call in ("read", "write", "fsync"):
                per = [r["processes"][i].get("calls", {}).get(call) for r in all_results]
                if not any(c and c["calls"] for c in per):
                    continue
                tag = f"{p['pid']} {p['name'][:14]} {call}"
                row(f"  {tag} /s", [c["calls_per_s"] if c else 0.0 for c in per])
                row(f"  {tag} mean", [c["lat"]["mean_ms"] if c else 0.0 for c in per])
                row(f"  {tag} p99", [c["lat"]["p99_ms"] if c else 0.0 for c in per])
    rows.append("")
    rows.append("per process:")
    for i, p in enumerate(first["processes"]):
        for dname in ("read", "write"):
            if all(r["processes"][i][dname]["ios"] == 0 for r in all_results):
                continue
            tag = f"{p['pid']} {p['name'][:14]} {dname[0].upper()}"
            row(f"  {tag} IOPS", [r["processes"][i][dname]["iops"] for r in all_results])
            row(f"  {tag} Q2C mean (ms)",
                [r["processes"][i][dname]["q2c"]["mean_ms"] for r in all_results])
            row(f"  {tag} Q2C p99 (ms)",
                [r["processes"][i][dname]["q2c"]["p99_ms"] for r in all_results])
        if any(r["processes"][i].get("disk_time_s") for r in all_results):
            tag = f"{p['pid']} {p['name'][:14]}"
            row(f"  {tag} disk share (%)",
                [None if r["processes"][i]["disk_share"] is None
                 else r["processes"][i]["disk_share"] * 100 for r in all_results])
    if any("explain" in r for r in all_results):     # --explain: why they differ
        from blksim.sim.explain_report import why_paragraph
        why = why_paragraph([(r["scheduler"], r) for r in all_results])
        rows += ["", why or "Why: the schedulers' explain sections differ in nothing "
                            "larger than noise."]
    return "\n".join(rows) + "\n"

