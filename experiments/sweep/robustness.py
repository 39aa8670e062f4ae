"""The robustness of an experiment's conclusion over its open choices: a robustness run's
plan (`plan`: the Latin hypercube sample and its tasks) and its report (`report`), for
the terminal, report.md and robustness.json.

For each case (a variant, and a combination of the grid's tunables) and each pair of
schedulers (a, b), over the N points of the sample:

- **the ranking**: at how many points a beats b, b beats a, or they tie ("beats": a
  higher headline figure, or a lower one where the experiment says ``better =
  "lower"``). A scheduler's figure at a point is its mean over the seeds; a point where
  any of the pair's runs has no figure (a run not finished, a figure that is null because
  nothing completed in its window) is counted as missing, never as 0.
- **the ratio** of the leader's figure to the other's: min, median and max over the
  points where both figures are above 0.
- **which choice moves the ratio most**: the first-order share of the variance of the
  ratio's logarithm that a choice explains, estimated from the sample itself as the
  correlation ratio of binned values (the "given data" estimator of the first-order
  Sobol' index: Plischke, Borgonovo and Smith, "Global sensitivity measures from given
  data", European Journal of Operational Research 226(3), 2013). A set's bins are its
  values; a range's are its sampled values where they are few (at most B), else B
  bins of equal probability of its unit coordinate, B = round(sqrt(m)) between 2 and 10
  for m points. The logarithm makes the share the same whichever scheduler is on top.
  Each share is tested against `PERMUTATIONS` random permutations of the ratios over the
  points (seeded from the sample's seed): a share no larger than the permutations' at the
  `LEVEL` level is no measurable effect. Spearman's rank correlation of a range with the
  ratio gives its direction.
- **choices that cannot change the ranking**: every choice, where the ranking holds at
  every compared point; otherwise each choice whose effect on the ratio is nil (no
  variance at all, or not distinguishable from the permutations').
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass

#: Permutations of the ratios each variance share is tested against.
PERMUTATIONS = 999
#: The test's level: a share beaten by more than this fraction of permutations is nil.
LEVEL = 0.05
#: Sensitivity needs at least this many points with a ratio.
MIN_POINTS = 4


@dataclass
class RobustnessPlan:
    """A robustness run: its sample (``points``, over ``choices``) and its ``tasks``."""

    n: int
    seed: int
    first_only: bool
    choices: list
    points: list
    tasks: list
    seeds: int


def plan(exp, n: int, seed: int = 1, seeds: int | None = None, scale: float = 1.0,
         first_only: bool = False) -> RobustnessPlan:
    """The robustness run of ``exp``: ``n`` points of a Latin hypercube over its open
    choices (``seed``: the sample's seed), every scheduler at each (`Experiment.
    robustness_tasks`)."""
    from blksim.common.config_values import ConfigError
    from blksim.experiments.sweep.open_choices import sample_points
    if not exp.open:
        raise ConfigError(f"{exp.path}: --robustness: the experiment has no open choices "
                          f"(an [experiment.open] table, docs/experiments.md)")
    if not exp.figure:
        raise ConfigError(f"{exp.path}: --robustness: the experiment has no headline figure "
                          f"([experiment] figure) to rank the schedulers by")
    points = sample_points(exp.open, n, seed)
    seeds = exp.seeds if seeds is None else seeds
    tasks = exp.robustness_tasks(points, seeds=seeds, scale=scale, first_only=first_only)
    return RobustnessPlan(n, seed, first_only, list(exp.open), points, tasks, seeds)


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _means(exp, tasks: list, records: dict, sample: bool) -> dict:
    """(case, point, scheduler) -> the figure's mean over the seeds, or None where any
    seed's run or figure is missing; case = (variant, tunables)."""
    from blksim.experiments.sweep.definition import get_path
    runs: dict = {}
    for t in tasks:
        if bool(t.sample) != sample:
            continue
        record = records.get(t.key)
        value = None if record is None else _number(get_path(record["figures"], exp.figure))
        runs.setdefault(((t.variant, t.tunables), t.sample, t.scheduler), []).append(value)
    return {k: None if any(v is None for v in vs) else sum(vs) / len(vs)
            for k, vs in runs.items()}


def _ranks(values: list) -> list:
    """Ranks 1..n, ties given their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: list, y: list) -> float | None:
    """Spearman's rank correlation of ``x`` and ``y`` (None if either is constant)."""
    rx, ry = _ranks(x), _ranks(y)
    n = len(x)
    mx, my = sum(rx) / n, sum(ry) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def variance_share(y: list, groups: list) -> float:
    """The share of the variance of ``y`` between the ``groups`` (the correlation ratio
    eta squared); 0 where ``y`` does not vary."""
    n = len(y)
    mean = sum(y) / n
    total = sum((v - mean) ** 2 for v in y)
    if total == 0:
        return 0.0
    sums: dict = {}
    for v, g in zip(y, groups):
        s = sums.setdefault(g, [0.0, 0])
        s[0] += v
        s[1] += 1
    between = sum(c * (s / c - mean) ** 2 for s, c in sums.values())
    return min(1.0, between / total)


def permutation_p(y: list, groups: list, observed: float, seed: list) -> float:
    """The share of `PERMUTATIONS` random permutations of ``y`` (and ``y`` itself) whose
    variance share between ``groups`` is at least ``observed``."""
    import numpy as np
    rng = np.random.default_rng(seed)
    ys = np.asarray(y, dtype=float)
    labels = sorted(set(groups), key=str)
    index = np.asarray([labels.index(g) for g in groups])
    counts = np.bincount(index, minlength=len(labels)).astype(float)
    onehot = np.zeros((len(y), len(labels)))
    onehot[np.arange(len(y)), index] = 1.0
    perms = np.stack([rng.permutation(ys) for _ in range(PERMUTATIONS)])
    mean = ys.mean()
    total = float(((ys - mean) ** 2).sum())
    between = (((perms @ onehot) / counts - mean) ** 2 * counts).sum(axis=1) / total
    # a margin for rounding: a permutation that is the same grouping counts as as large
    return float((1 + int((between >= observed - 1e-12).sum())) / (PERMUTATIONS + 1))


def _groups(choice, j: int, points: list) -> list:
    """The bins of choice number ``j``'s values at ``points`` (the `SamplePoint`s with a
    ratio): its values where they are few, else equal-probability bins of its unit
    coordinate."""
    col = [p.values[j][1] for p in points]
    bins = _bins(len(points))
    if choice.kind == "set" or len(set(col)) <= bins:
        return [str(v) for v in col]
    return [min(bins - 1, int(p.unit[j] * bins)) for p in points]


def _bins(m: int) -> int:
    return max(2, min(10, round(math.sqrt(m))))


def _order_value(choice, value) -> float:
    """A range's value as a number (bytes, seconds), for its rank correlation."""
    from blksim.common.units import parse_size, parse_time
    if choice.kind == "size":
        return float(parse_size(value, choice.path))
    if choice.kind == "time":
        return parse_time(value, choice.path, "s")
    return float(value)


def _sensitivity(choices: list, points: list, logs: list, seed: list) -> list:
    """Each choice's effect on the log-ratios ``logs`` at ``points``."""
    out = []
    for j, choice in enumerate(choices):
        entry = {"path": choice.path, "share": None, "p": None, "rho": None,
                 "effect": "too few points"}
        if len(logs) >= MIN_POINTS:
            groups = _groups(choice, j, points)
            share = variance_share(logs, groups)
            if len(set(logs)) == 1 or len(set(groups)) == 1:
                p = 1.0                          # nothing varied that could show an effect
            else:
                p = permutation_p(logs, groups, share, [*seed, j])
            entry.update(share=share, p=p, effect="nil" if p > LEVEL else "moves")
            if choice.ordered:
                entry["rho"] = spearman(
                    [_order_value(choice, pt.values[j][1]) for pt in points], logs)
        out.append(entry)
    return out


def _pair(exp, plan_, case_means: dict, base: dict, a: str, b: str, seed: list) -> dict:
    """The ranking, ratio and sensitivities of one pair in one case. In the result, "a"
    is the scheduler ahead at more points (the first of the two on a draw), "b" the
    other; the ratio is a's figure over b's."""
    lower = exp.better == "lower"
    a_wins = b_wins = ties = missing = 0
    both = []                                   # (point, fa, fb)
    for point in plan_.points:
        fa, fb = case_means.get((point.index, a)), case_means.get((point.index, b))
        if fa is None or fb is None:
            missing += 1
            continue
        both.append((point, fa, fb))
        if fa == fb:
            ties += 1
        elif (fa > fb) != lower:
            a_wins += 1
        else:
            b_wins += 1
    leader, other = (a, b) if a_wins >= b_wins else (b, a)
    ratios, logs, at = [], [], []
    for point, fa, fb in both:
        fl, fo = (fa, fb) if leader == a else (fb, fa)
        if fl > 0 and fo > 0:
            ratios.append(fl / fo)
            logs.append(math.log(fl / fo))
            at.append(point)
    srt = sorted(ratios)
    ratio = None if not srt else {
        "min": srt[0], "max": srt[-1], "n": len(srt),
        "median": srt[len(srt) // 2] if len(srt) % 2 else (srt[len(srt) // 2 - 1] +
                                                          srt[len(srt) // 2]) / 2}
    compared = len(both)
    sens = _sensitivity(plan_.choices, at, logs, seed)
    # one outcome at every compared point: one scheduler ahead, or a tie, everywhere
    holds = compared > 0 and (max(a_wins, b_wins) == compared or ties == compared)
    moving = [s for s in sens if s["effect"] == "moves"]
    most = max(moving, key=lambda s: s["share"])["path"] if moving else None
    cannot = [c.path for c in plan_.choices] if holds else \
        [s["path"] for s in sens if s["effect"] == "nil"]
    fl, fo = base.get(leader), base.get(other)
    at_file = None
    if fl is not None and fo is not None:           # the grid's runs, the file's choices
        at_file = {"leader": None if fl == fo else leader if (fl > fo) != lower else other,
                   "ratio": fl / fo if fo > 0 and fl > 0 else None}
    return {"a": leader, "b": other, "a_wins": max(a_wins, b_wins),
            "b_wins": min(a_wins, b_wins), "ties": ties, "compared": compared,
            "missing": missing, "holds_everywhere": holds, "ratio": ratio,
            "choices": sens, "moves_most": most, "cannot_change_ranking": cannot,
            "at_file_choices": at_file}


def report(exp, plan_: RobustnessPlan, records: dict, grid_tasks: list = (),
           failures: dict | None = None) -> dict:
    """The robustness report of a finished (or partly finished) robustness run, as JSON:
    its sample, and per case the figures at every point and each pair's statistics.
    ``failures``: the runs that failed (key -> error), listed; their figures are
    missing."""
    from blksim.experiments.sweep.open_choices import value_text
    means = _means(exp, plan_.tasks, records, sample=True)
    base = _means(exp, list(grid_tasks), records, sample=False)
    cases = []
    for t in plan_.tasks:
        case = (t.variant, t.tunables)
        if case not in cases:
            cases.append(case)
    out_cases = []
    for c, case in enumerate(cases):
        case_means = {(p, s): v for (cs, p, s), v in means.items() if cs == case}
        case_base = {s: v for (cs, _, s), v in base.items() if cs == case}
        pairs = []
        for i, a in enumerate(exp.schedulers):
            for j in range(i + 1, len(exp.schedulers)):
                pairs.append(_pair(exp, plan_, case_means, case_base, a,
                                   exp.schedulers[j], [plan_.seed, c, i, j]))
        out_cases.append({
            "variant": case[0], "tunables": {p: v for p, v in case[1]},
            "points": [{"point": pt.index, "values": pt.as_dict(),
                        "figures": {s: case_means.get((pt.index, s))
                                    for s in exp.schedulers}} for pt in plan_.points],
            "at_file_choices": {s: case_base.get(s) for s in exp.schedulers},
            "pairs": pairs})
    return {"experiment": exp.name, "figure": exp.figure,
            "figure_label": exp.figure_label or exp.figure, "better": exp.better,
            "points": plan_.n, "sample_seed": plan_.seed, "seeds": plan_.seeds,
            "first_only": plan_.first_only, "schedulers": list(exp.schedulers),
            "runs": len(plan_.tasks),
            "failed": [{"point": t.sample, "variant": t.variant, "scheduler": t.scheduler,
                        "seed": t.seed, "error": (failures or {})[t.key]}
                       for t in plan_.tasks if t.key in (failures or {})],
            "method": {"sample": "Latin hypercube (McKay, Beckman and Conover 1979)",
                       "share": "first-order variance share of the log-ratio, binned "
                                "(Plischke, Borgonovo and Smith 2013)",
                       "test": f"{PERMUTATIONS} permutations, level {LEVEL}",
                       "direction": "Spearman's rank correlation"},
            "choices": [c.table() for c in plan_.choices],
            "sample": [{"point": p.index, "values": {k: v for k, v in p.values},
                        "text": {k: value_text(v) for k, v in p.values}}
                       for p in plan_.points],
            "cases": out_cases}


def _num(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _ranking_text(pair: dict, rep: dict) -> str:
    """"deadline beats cfq at 27 of 30 points (cfq beats deadline at 3; ...)"."""
    a, b = pair["a"], pair["b"]
    if not pair["compared"]:
        return f"{a} vs {b}: no point where both have a figure ({pair['missing']} missing)"
    if pair["ties"] == pair["compared"]:
        text = f"{a} and {b} tie at {pair['ties']} of {pair['compared']} points"
        return text + (f" ({pair['missing']} of {rep['points']} missing)"
                       if pair["missing"] else "")
    text = f"{a} beats {b} at {pair['a_wins']} of {pair['compared']} points"
    rest = []
    if pair["b_wins"]:
        rest.append(f"{b} beats {a} at {pair['b_wins']}")
    if pair["ties"]:
        rest.append(f"tied at {pair['ties']}")
    if pair["missing"]:
        rest.append(f"{pair['missing']} of {rep['points']} missing")
    return text + (f" ({'; '.join(rest)})" if rest else "")


def _ratio_text(pair: dict) -> str:
    r = pair["ratio"]
    if r is None:
        return "no ratio (no point where both figures are above 0)"
    return (f"{pair['a']}/{pair['b']} min {_num(r['min'])}, median {_num(r['median'])}, "
            f"max {_num(r['max'])}")


def _effect_text(entry: dict) -> str:
    rho = "" if entry["rho"] is None else f", rho {entry['rho']:+.2f}"
    return f"{entry['path']} ({100 * entry['share']:.0f} % of the log-ratio's variance" \
           f"{rho}, p {entry['p']:.3f})"


def _moves_text(pair: dict) -> str:
    if pair["moves_most"] is None:
        few = any(e["effect"] == "too few points" for e in pair["choices"])
        return "too few points to measure" if few else "no choice measurably"
    entry = next(e for e in pair["choices"] if e["path"] == pair["moves_most"])
    return _effect_text(entry)


def _cannot_text(pair: dict) -> str:
    if not pair["cannot_change_ranking"]:
        return "none"
    n = pair["ratio"]["n"] if pair["ratio"] else 0
    why = f"no measurable effect at {n} points"
    if pair["holds_everywhere"]:
        why = "the tie holds at every point" if pair["ties"] else \
            "the ranking holds at every point"
    return f"{', '.join(pair['cannot_change_ranking'])} ({why})"


def _file_text(pair: dict) -> str:
    at = pair["at_file_choices"]
    if at is None:
        return "-"
    if at["leader"] is None:
        return "tied"
    other = pair["b"] if at["leader"] == pair["a"] else pair["a"]
    return f"{at['leader']} beats {other}" + (
        "" if at["ratio"] is None else f" ({pair['a']}/{pair['b']} {_num(at['ratio'])})")


def _case_name(case: dict) -> str:
    parts = [case["variant"]] + [f"{p.split('/')[-1]}={v}" for p, v in case["tunables"].items()]
    return ", ".join(parts)


def _intro(rep: dict) -> str:
    per = "lower" if rep["better"] == "lower" else "higher"
    return (f"{rep['points']} points of a Latin hypercube over {len(rep['choices'])} open "
            f"choices (sample seed {rep['sample_seed']}), every scheduler at each point, "
            f"{rep['seeds']} seed(s) each: {rep['runs']} runs"
            + (" (the first variant only)" if rep["first_only"] else "")
            + f". Figure: {rep['figure_label']}; \"beats\" is a {per} figure (its mean over "
              f"the seeds; a point where a run has no figure is missing, not 0).")


def _failed_lines(rep: dict) -> list:
    """A line on the runs that failed (their figures are missing), if any."""
    failed = rep.get("failed", [])
    if not failed:
        return []
    first = failed[0]
    return [f"{len(failed)} of {rep['runs']} runs failed, their figures missing (the first: "
            f"point {first['point']}, {first['scheduler']}, seed {first['seed']}: "
            f"{first['error']}); robustness.json lists them"]


def terminal_lines(rep: dict) -> list:
    """The report for the terminal."""
    lines = [f"robustness of {rep['experiment']}: {_intro(rep)}"] + _failed_lines(rep)
    for case in rep["cases"]:
        lines.append(f"  {_case_name(case)}:")
        for pair in case["pairs"]:
            lines.append(f"    {_ranking_text(pair, rep)}; at the file's choices: "
                         f"{_file_text(pair)}")
            lines.append(f"      ratio {_ratio_text(pair)}; moved most by "
                         f"{_moves_text(pair)}")
            lines.append(f"      cannot change the ranking: {_cannot_text(pair)}")
    return lines


def markdown_lines(rep: dict) -> list:
    """The report as a section of report.md."""
    lines = ["## Robustness over the open choices", "", _intro(rep), "",
             f"How much a choice moves a ratio: the share of the variance of the ratio's "
             f"logarithm that the choice explains alone (first-order, estimated from the "
             f"sample by binning: Plischke, Borgonovo and Smith 2013), tested against "
             f"{PERMUTATIONS} permutations at the {100 * LEVEL:g} % level (p); rho is "
             f"Spearman's rank correlation of a range with the ratio. A choice \"cannot "
             f"change the ranking\" where the ranking holds at every point, or where its "
             f"effect is not measurable. Every run is in robustness.json and robustness.csv.",
             "", *[line for f in _failed_lines(rep) for line in (f, "")],
             "| open choice | range or set | source |", "|---|---|---|"]
    for c in rep["choices"]:
        from blksim.experiments.sweep.open_choices import OpenChoice
        choice = OpenChoice(c["path"], c["kind"], c["source"], c.get("low"), c.get("high"),
                            c.get("scale", "linear"), tuple(c.get("values", ())))
        lines.append(f"| `{c['path']}` | {choice.describe()} | {c['source']} |")
    lines.append("")
    for case in rep["cases"]:
        lines += [f"### {_case_name(case)}", "",
                  "| pair | over the points | at the file's choices | ratio | moved most by "
                  "| cannot change the ranking |", "|---|---|---|---|---|---|"]
        for pair in case["pairs"]:
            lines.append(f"| {pair['a']} vs {pair['b']} | {_ranking_text(pair, rep)} | "
                         f"{_file_text(pair)} | {_ratio_text(pair)} | {_moves_text(pair)} | "
                         f"{_cannot_text(pair)} |")
        lines.append("")
    return lines


def csv_text(rep: dict) -> str:
    """A row per case and point: its choices' values and each scheduler's figure (blank
    where missing)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    paths = [c["path"] for c in rep["choices"]]
    tunables = list(rep["cases"][0]["tunables"]) if rep["cases"] else []
    w.writerow(["variant", *tunables, "point", *paths,
                *[f"figure.{s}" for s in rep["schedulers"]]])
    for case in rep["cases"]:
        for pt in case["points"]:
            w.writerow([case["variant"], *[case["tunables"][t] for t in tunables],
                        pt["point"], *[pt["values"][p] for p in paths],
                        *["" if pt["figures"][s] is None else repr(pt["figures"][s])
                          for s in rep["schedulers"]]])
    return buf.getvalue()


def write_files(rep: dict, out_dir: str, write) -> dict:
    """robustness.json and robustness.csv in ``out_dir``, each by ``write(path, text)``
    (the report's writer: whole or not at all); their paths."""
    import json
    paths = {"robustness_json": os.path.join(out_dir, "robustness.json"),
             "robustness_csv": os.path.join(out_dir, "robustness.csv")}
    write(paths["robustness_json"], json.dumps(rep, indent=1, sort_keys=True) + "\n")
    write(paths["robustness_csv"], csv_text(rep))
    return paths
