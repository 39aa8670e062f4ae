"""The mechanism report in words: the terminal's table of ``explain`` (`explain_lines`),
the "why" paragraph from two schedulers' sections (`why_paragraph`), and an experiment
report's section (`experiment_lines`). Everything here reads results.json's ``explain``
(`blksim.sim.explain`, docs/explain.md); nothing runs a simulation.
"""

from __future__ import annotations

import math

import re

from blksim.sim.explain import CAUSES
from blksim.sim.explain_decisions import decision_differences
from blksim.sim.explain_decisions import lines as decision_lines
from blksim.sim.explain_device import device_lines

#: What each cause is, in a sentence ("... spent N % of its time <phrase>").
PHRASES = {
    "slot": "waiting for a request slot",
    "plug": "plugged",
    "elevator": "queued in the elevator",
    "held": "held back for other processes",
    "requeue": "requeued by the driver",
    "device_queue": "queued in the device",
    "service": "in service",
    "device": "at the device",
}
#: Short column heads of the causes (the table's).
HEADS = {"slot": "slot", "plug": "plug", "elevator": "elev", "held": "held",
         "requeue": "requeue", "device_queue": "devq", "service": "service",
         "device": "device"}
#: A difference between two schedulers smaller than this (seconds of a role's summed
#: Q2C, and percentage points of its share) makes no sentence (blksim's choice: below
#: it, a sentence would report noise).
MIN_SECONDS = 1e-3
MIN_POINTS = 5.0


def role_of(name: str) -> str:
    """A process's role: its name without a clone's number (``session.3`` -> ``session``,
    ``reader.0`` -> ``reader``)."""
    return re.sub(r"\.\d+$", "", name or "")


def roles(section: dict) -> dict:
    """A device section's processes summed by role: role -> [bios, Q2C s, {cause: s}]."""
    out: dict = {}
    for p in section.get("processes", []):
        role = role_of(p.get("name") or f"pid{p['pid']}")
        row = out.setdefault(role, [0, 0.0, dict.fromkeys(CAUSES, 0.0)])
        row[0] += p["bios"]
        row[1] += p["q2c_total_s"]
        for c in CAUSES:
            row[2][c] += p["seconds"].get(c, 0.0)
    return out


# ---------------------------------------------------------------------- the terminal

def _pct(x) -> str:
    return f"{'-':>7}" if x is None else f"{x:7.1f}"


def explain_lines(explain: dict, top: int = 8) -> list:
    """The terminal's table of results.json's ``explain``: per device, a row per process
    (the ``top`` largest by summed Q2C): bios, Q2C mean (ms), then each cause's share of
    its Q2C (%); the causes no process spent time on are left out."""
    out = []
    for dev, section in explain.items():
        procs = section.get("processes", [])
        whole = section.get("all", {})
        out += ["", f"Where the I/O time went on {dev} (share of each process's Q2C, %):"]
        if not whole.get("bios"):
            out.append("  no I/O completed in the measured window")
            out += _unfinished_lines(section)
            continue
        used = [c for c in CAUSES if whole["seconds"].get(c, 0.0) > 0.0]
        width = max([7] + [len(p.get("name") or "") for p in procs[:top]]) + 1
        out.append(f"  {'process':<{width}} {'bios':>8} {'Q2C ms':>9} "
                   + " ".join(f"{HEADS[c]:>7}" for c in used))
        rows = procs[:top] + [dict(whole, name="all")]
        for p in rows:
            out.append(f"  {(p.get('name') or str(p.get('pid'))):<{width}} {p['bios']:>8} "
                       f"{p['q2c_mean_ms']:9.3f} "
                       + " ".join(_pct(p["share_pct"].get(c)) for c in used))
        if len(procs) > top:
            out.append(f"  ({len(procs) - top} more processes in results.json)")
        if not section.get("service_split", True):
            out.append("  (the device reports no service start: D2C is all 'device')")
        for what, h in section.get("holds", {}).items():
            ends = ", ".join(f"{k} {v}" for k, v in h["ends"].items())
            out.append(f"  holds ({what}): {h['count']}, {h['seconds'] * 1e3:.1f} ms in all"
                       + (f" ({ends})" if ends else ""))
        out += _unfinished_lines(section)
        decisions = section.get("decisions")
        if decisions and (decisions.get("meanings") or decisions.get("events")):
            # (an elevator that declares no decisions, noop or none, gets no lines)
            out += ["  " + line for line in decision_lines(decisions)]
        if section.get("device"):
            out += ["  " + line for line in device_lines(section["device"])]
    return out


def _unfinished_lines(section: dict) -> list:
    """The bios still in flight at the end, the five oldest processes' (none: [])."""
    late = section.get("unfinished") or []
    if not late:
        return []
    return ["  still in flight at the end (not in the table): " + "; ".join(
        f"{u.get('name') or u['pid']} {u['bios']} bios, the oldest {u['oldest_ms']:.1f} ms"
        for u in late[:5]) + (f"; {len(late) - 5} more processes" if len(late) > 5 else "")]


# ---------------------------------------------------------------------- why

def _held_phrase(section: dict) -> str:
    what = [w for w in section.get("holds", {})]
    if not what:
        return PHRASES["held"]
    return f"held by {' and '.join(what)} for other processes"


def cause_differences(a_label: str, a: dict, b_label: str, b: dict) -> list:
    """(magnitude, sentence) for each role and cause whose share of the role's Q2C
    differs between the device sections ``a`` and ``b`` by at least `MIN_POINTS`
    percentage points (and `MIN_SECONDS` of summed time). The magnitude is that
    difference weighted by the role's part of all the device's Q2C (the mean of the two
    runs'), so that a role that waits for most of the time comes first. The side that
    spent more is named first. A role with no bio in either window makes none."""
    ra, rb = roles(a), roles(b)
    wa = (a.get("all") or {}).get("q2c_total_s") or 0.0
    wb = (b.get("all") or {}).get("q2c_total_s") or 0.0
    out = []
    for role in ra:
        if role not in rb:
            continue
        na, qa, sa = ra[role]
        nb, qb, sb = rb[role]
        if not (na and nb and qa > 0 and qb > 0 and wa > 0 and wb > 0):
            continue
        weight = (qa / wa + qb / wb) / 2.0
        for c in CAUSES:
            pa, pb = 100.0 * sa[c] / qa, 100.0 * sb[c] / qb
            if abs(sa[c] - sb[c]) < MIN_SECONDS or abs(pa - pb) < MIN_POINTS:
                continue
            first = [(a_label, a, pa, sa[c] / na), (b_label, b, pb, sb[c] / nb)]
            if pb > pa:
                first.reverse()
            (l1, sec1, p1, m1), (l2, _sec2, p2, m2) = first
            # the phrase of the side that spent more on it (held: its mechanisms)
            phrase = _held_phrase(sec1) if c == "held" else PHRASES[c]
            sentence = (f"{l1}: {role}'s I/O spent {p1:.0f} % of its time {phrase} "
                        f"({m1 * 1e3:.1f} ms per bio); {l2}: {p2:.0f} % "
                        f"({m2 * 1e3:.1f} ms per bio)")
            out.append((abs(pa - pb) * weight, sentence))
    return out


#: The functions that find differences: ``fn(a_label, a_section, b_label, b_section)``
#: -> [(magnitude, sentence), ...]; another collector appends its own (`why_paragraph`
#: takes them as ``sources``).
DIFFERENCE_SOURCES = [cause_differences]


def elevator_differences(a_label: str, a: dict, b_label: str, b: dict) -> list:
    """The elevators' decisions that differ most between the device sections ``a`` and
    ``b`` (`blksim.sim.explain_decisions.decision_differences`; its sentences name the
    schedulers), when both have a ``decisions`` section with a window."""
    da, db = a.get("decisions"), b.get("decisions")
    if not (da and db and da.get("window_s") and db.get("window_s")):
        return []
    return decision_differences(da, db)


def device_differences(a_label: str, a: dict, b_label: str, b: dict) -> list:
    """How deep the device's queue was kept (``device.tags``: the time-weighted mean of
    requests at the device), when the two means differ by at least a quarter of the
    larger: magnitude the relative difference (0 to 1), as the decisions' are."""
    ta = ((a.get("device") or {}).get("tags") or {})
    tb = ((b.get("device") or {}).get("tags") or {})
    ma, mb = ta.get("mean"), tb.get("mean")
    if ma is None or mb is None or max(ma, mb) <= 0.0:
        return []
    rel = abs(ma - mb) / max(ma, mb)
    if rel < 0.25:
        return []
    (l1, t1, m1), (l2, t2, m2) = sorted([(a_label, ta, ma), (b_label, tb, mb)],
                                        key=lambda x: -x[2])
    return [(rel, f"{l1} kept {m1:.1f} requests at the device on average (at most "
                  f"{t1.get('max', 0)}); {l2} {m2:.1f} (at most {t2.get('max', 0)})")]


#: The functions that find the mechanisms behind the differences, in the same form as
#: `DIFFERENCE_SOURCES`; the paragraph gives their largest after the causes' ("Behind
#: it: ..."). Their magnitudes are compared only among themselves.
MECHANISM_SOURCES = [elevator_differences, device_differences]


def why_sentences(labelled: list, device: str | None = None, sources=None) -> list:
    """Every (magnitude, sentence) between each pair of ``labelled`` results
    ([(label, results.json dict), ...]) on ``device`` (default: every device both
    explain), largest first."""
    sources = DIFFERENCE_SOURCES if sources is None else sources
    found = []
    for i in range(len(labelled)):
        for j in range(i + 1, len(labelled)):
            la, ra = labelled[i]
            lb, rb = labelled[j]
            ea, eb = ra.get("explain") or {}, rb.get("explain") or {}
            for dev in ea:
                if dev not in eb or (device is not None and dev != device):
                    continue
                prefix = f"on {dev}, " if len(ea) > 1 else ""
                for fn in sources:
                    for mag, text in fn(la, ea[dev], lb, eb[dev]):
                        found.append((mag, prefix + text))
    found.sort(key=lambda x: -x[0])
    return found


def why_paragraph(labelled: list, limit: int = 3, sources=None) -> str:
    """The "why" paragraph: the ``limit`` largest differences between the schedulers'
    explain sections, as sentences; "" when there is none to tell (no explain, or no
    bio in a window)."""
    found = why_sentences(labelled, None, sources)
    if not found:
        return ""
    text = "Why: " + ". ".join(_first_distinct(found, limit)) + "."
    behind = _first_distinct(why_sentences(labelled, None, MECHANISM_SOURCES), 3)
    if behind:
        text += " Behind it: " + ". ".join(behind) + "."
    return text


def _first_distinct(found: list, limit: int) -> list:
    seen = []
    for _mag, text in found:
        if text not in seen:
            seen.append(text)
        if len(seen) == limit:
            break
    return seen


# ---------------------------------------------------------------------- experiments

def mean_roles(figures_list: list, device: str) -> dict:
    """Per role, over runs (seeds): the mean of its bios, Q2C mean (ms) and share of
    each cause (%), from the runs whose ``explain`` has ``device`` and that role."""
    acc: dict = {}
    for figures in figures_list:
        section = (figures.get("explain") or {}).get(device)
        if section is None:
            continue
        for role, (n, q2c, secs) in roles(section).items():
            if not n or q2c <= 0:
                continue
            row = acc.setdefault(role, [0, 0.0, 0.0, dict.fromkeys(CAUSES, 0.0)])
            row[0] += 1
            row[1] += n
            row[2] += q2c / n * 1e3
            for c in CAUSES:
                row[3][c] += 100.0 * secs[c] / q2c
    return {role: {"runs": k, "bios": n / k, "q2c_mean_ms": ms / k,
                   "share_pct": {c: v / k for c, v in shares.items()}}
            for role, (k, n, ms, shares) in acc.items()}


def experiment_lines(groups: list, devices: list | None = None, top: int = 4) -> list:
    """An experiment report's section (markdown): per scheduler group and device, the
    ``top`` roles with the most bios: bios, Q2C mean (ms) and the share of each cause
    (%), means over seeds; then the "why" sentences between the groups. ``groups``:
    [(label, [figures of each seed's run]), ...]. [] when no run has ``explain``."""
    have = [(label, runs) for label, runs in groups
            if any(f.get("explain") for f in runs)]
    if not have:
        return []
    out = ["## Where the I/O time went", "",
           "Each process's Q2C cut into causes (docs/explain.md), the processes of one "
           "role together; means over the seeds.", ""]
    all_devs = []
    for _label, runs in have:
        for f in runs:
            for dev in f.get("explain") or {}:
                if dev not in all_devs:
                    all_devs.append(dev)
    devs = [d for d in all_devs if devices is None or d in devices]
    merged = []
    for dev in devs:
        tables = [(label, mean_roles(runs, dev)) for label, runs in have]
        used = [c for c in CAUSES
                if any(r["share_pct"][c] > 0.05 for _, t in tables for r in t.values())]
        if not used:
            continue
        out += [f"### {dev}", "",
                "| scheduler | role | bios | Q2C mean (ms) | "
                + " | ".join(f"{HEADS[c]} %" for c in used) + " |",
                "|---|---|---|---|" + "---|" * len(used)]
        for label, table in tables:
            ranked = sorted(table.items(), key=lambda kv: (-kv[1]["bios"], kv[0]))[:top]
            for role, r in ranked:
                out.append(f"| {label} | {role} | {r['bios']:,.0f} | {_sig3(r['q2c_mean_ms'])} | "
                           + " | ".join(f"{r['share_pct'][c]:.1f}" for c in used) + " |")
        out.append("")
        merged.append(dev)
    # the why paragraph between the groups, on the first seed's runs of each
    firsts = [(label, runs[0]) for label, runs in have if runs]
    why = why_paragraph(firsts) if len(firsts) > 1 else ""
    if why:
        out += [why + " (first seed's runs)", ""]
    return out if merged else []


def _sig3(x: float) -> str:
    """A mean to three significant digits, as a report writes numbers: thousands
    separated, no exponent (1,230 and 0.000548, not 1.23e+03 and 5.48e-04)."""
    if not x or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{round(x, decimals):,.{decimals}f}"


def report_section(tasks: list, records: dict, devices: list | None = None) -> list:
    """`experiment_lines` for a sweep's tasks and their records (`blksim.experiments.sweep`):
    one group per variant, tunables and scheduler, in the tasks' order; after a blank
    line, and with none at its end (report.md adds one)."""
    groups: dict = {}
    for t in tasks:
        parts = [] if t.variant == "base" else [t.variant]
        parts += [f"{p.split('/')[-1]}={v}" for p, v in t.tunables]
        label = ", ".join(parts + [t.scheduler])
        record = records.get(t.key)
        if record is not None:
            groups.setdefault(label, []).append(record.get("figures") or {})
    lines = experiment_lines(list(groups.items()), devices)
    while lines and lines[-1] == "":
        lines.pop()
    return ["", *lines] if lines else []
