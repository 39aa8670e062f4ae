"""Turn a finished run into figures: a results dict (results.json) and terminal tables.

Units are in the names: latencies in milliseconds (``*_ms``), throughput in
I/Os per second and MB/s (1 MB = 10^6 bytes, as iostat's MB/s at base 1000).
"""

from __future__ import annotations

import json

from sim.metrics import DirectionStats

SCHEMA_VERSION = 1
VERSION = "0.1.0"

_LAT_KEYS = ("mean", "p50", "p95", "p99", "max")


def _ms(summary: dict) -> dict:
    out = {"count": summary["count"]}
    for key in ("mean", "min", "p50", "p95", "p99", "max"):
        out[f"{key}_ms"] = round(summary[key] * 1e3, 6)
    return out


def _direction(st, elapsed: float, split: bool) -> dict:
    s = st.summary(elapsed)
    out = {"ios": s["ios"], "bytes": s["bytes"], "iops": round(s["iops"], 6),
           "mb_per_s": round(s["mb_per_s"], 6), "q2c": _ms(s["q2c"])}
    if split:
        out["q2d"] = _ms(s["q2d"])
        out["d2c"] = _ms(s["d2c"])
    return out


def _combined(a: DirectionStats, b: DirectionStats) -> DirectionStats:
    both = DirectionStats()
    for st in (a, b):
        both.ios += st.ios
        both.sectors += st.sectors
        for name in ("q2d", "d2c", "q2c"):
            getattr(both, name).merge(getattr(st, name))
    return both


def results_dict(outcome, resolved_config: dict) -> dict:
    """Everything a run measured, as the documented results.json structure."""
    m = outcome.metrics
    elapsed = m.elapsed
    q = outcome.queue
    procs = []
    for pid in sorted(m.processes):
        p = m.processes[pid]
        procs.append({"pid": pid, "name": p.name,
                      "read": _direction(p.read, elapsed, False),
                      "write": _direction(p.write, elapsed, False)})
    out = {
        "schema": SCHEMA_VERSION,
        "blksim_version": VERSION,
        "name": outcome.config.name,
        "scheduler": outcome.config.scheduler,
        "seed": outcome.config.seed,
        "device": outcome.device.describe(),
        "simulated_s": round(outcome.sim_time, 9),
        "measured_s": round(elapsed, 9),
        "totals": {
            "read": _direction(m.read, elapsed, True),
            "write": _direction(m.write, elapsed, True),
            "all": _direction(_combined(m.read, m.write), elapsed, True),
        },
        "block_layer": {
            "bios_completed": m.completed,
            "requests_allocated": q.requests_allocated,
            "bio_merges": q.bio_merges,
            "request_merges": q.request_merges,
        },
        "processes": procs,
        "config": resolved_config,
    }
    replays = getattr(outcome, "replays", None)
    if replays:
        out["replay"] = replays       # per [[trace]]: replay options and what was done
    return out


def results_json(results: dict) -> str:
    """Deterministic JSON text (sorted keys, fixed separators)."""
    return json.dumps(results, indent=2, sort_keys=True) + "\n"


# ---------------------------------------------------------------------- tables

def _fmt(x: float, width: int = 9) -> str:
    if x >= 1e5:
        return f"{x:{width}.0f}"
    if x >= 100:
        return f"{x:{width}.1f}"
    return f"{x:{width}.3f}"


def _lat_cells(d: dict) -> list[str]:
    return [_fmt(d[f"{k}_ms"]) for k in _LAT_KEYS]


def run_table(results: dict) -> str:
    """The table of one run: totals per direction, Q2D / D2C split, per-process lines."""
    dev = results["device"]
    lines = [
        f"{results['name']}: scheduler {results['scheduler']}, drive {dev.get('name', '?')}, "
        f"seed {results['seed']}, {results['simulated_s']:.3f} s simulated, "
        f"{results['measured_s']:.3f} s measured",
        "",
        f"{'':8}{'IOPS':>9}{'MB/s':>9} | {'latency (ms): mean':>18}{'p50':>9}{'p95':>9}"
        f"{'p99':>9}{'max':>9}",
    ]
    for dname in ("read", "write", "all"):
        d = results["totals"][dname]
        if d["ios"] == 0 and dname != "all":
            continue
        lines.append(f"{dname:8}{_fmt(d['iops'])}{_fmt(d['mb_per_s'])} | {'Q2C':>9}"
                     + "".join(_lat_cells(d["q2c"])))
        for part in ("q2d", "d2c"):
            lines.append(f"{'':8}{'':9}{'':9} | {part.upper():>9}" + "".join(_lat_cells(d[part])))
    lines.append("")
    lines.append(f"{'pid':>6} {'process':16}{'dir':>4}{'IOPS':>9}{'MB/s':>9} | "
                 f"{'Q2C (ms): mean':>14}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}")
    for p in results["processes"]:
        for dname in ("read", "write"):
            d = p[dname]
            if d["ios"] == 0:
                continue
            lines.append(f"{p['pid']:>6} {p['name'][:16]:16}{dname[0].upper():>4}"
                         f"{_fmt(d['iops'])}{_fmt(d['mb_per_s'])} | {'':5}"
                         + "".join(_lat_cells(d["q2c"])))
    for r in results.get("replay", ()):
        lines.append("")
        lines.append(replay_line(r))
    bl = results["block_layer"]
    lines.append("")
    lines.append(f"block layer: {bl['bios_completed']:,} bios completed, "
                 f"{bl['requests_allocated']:,} requests, {bl['bio_merges']:,} bio merges, "
                 f"{bl['request_merges']:,} request merges")
    return "\n".join(lines) + "\n"


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
    return (f"replay {r['name']} ({r['format']}): {r['requests']:,} requests, "
            + ", ".join(parts))


def compare_table(all_results: list[dict]) -> str:
    """One table, a column per scheduler, a row per figure (units in the row names)."""
    names = [r["scheduler"] for r in all_results]
    width = max(12, *(len(n) + 2 for n in names))
    first = all_results[0]
    dev = first["device"]
    head = (f"{first['name']}: drive {dev.get('name', '?')}, seed {first['seed']}, "
            f"{first['simulated_s']:.3f} s simulated")
    label_w = 34
    rows = [head, "", f"{'':{label_w}}" + "".join(f"{n:>{width}}" for n in names)]

    def row(label: str, values: list[float]) -> None:
        rows.append(f"{label:{label_w}}" + "".join(_fmt(v, width) for v in values))

    for dname in ("read", "write", "all"):
        if all(r["totals"][dname]["ios"] == 0 for r in all_results) and dname != "all":
            continue
        row(f"{dname} IOPS", [r["totals"][dname]["iops"] for r in all_results])
        row(f"{dname} MB/s", [r["totals"][dname]["mb_per_s"] for r in all_results])
        for part in ("q2c", "q2d", "d2c"):
            for k in _LAT_KEYS:
                row(f"{dname} {part.upper()} {k} (ms)",
                    [r["totals"][dname][part][f"{k}_ms"] for r in all_results])
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
    return "\n".join(rows) + "\n"

