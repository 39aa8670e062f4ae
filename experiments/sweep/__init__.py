"""Studies as runnable experiments: a grid of runs (schedulers x variants x tunables x
seeds) over a configuration, run one at a time, on a process pool or on a Dask cluster,
kept on disk run by run, and reported as summary.csv, report.md and plots.

`definition` reads an experiment file (a configuration with an ``[experiment]`` table)
into `Task`s; `runner` runs them and keeps their results; `summary` and `report` write
what a sweep found. `open_choices` reads the file's open choices and samples them (a
Latin hypercube), `robustness` plans a robustness run and reports it. ``blksim experiment`` and ``blksim sweep`` are the command line
(`blksim.cli.experiment`); the shipped experiments are the ``*.toml`` files of
`blksim.experiments` that have an ``[experiment]`` table.
"""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def shipped() -> dict:
    """The shipped experiments: name -> path."""
    from blksim._compat import tomllib
    out = {}
    for path in sorted(HERE.glob("*.toml")):
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("experiment")
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if table is not None:
            out[str(table.get("name", path.stem))] = path
    return out


def find(name_or_path: str) -> Path:
    """A shipped experiment by name, or an experiment file by path."""
    if os.path.exists(name_or_path):
        return Path(name_or_path)
    found = shipped().get(name_or_path)
    if found is None:
        from blksim.common.config_values import ConfigError
        raise ConfigError(f"{name_or_path}: no such file, and no shipped experiment of that "
                          f"name; shipped: {', '.join(shipped()) or 'none'}")
    return found


def _figure_paths(exp) -> list:
    """(path, the setting that gave it) of the headline figure and the columns."""
    return ([(exp.figure, exp.figure_where)] if exp.figure else []) + \
        [(path, exp.columns_where) for path, _ in exp.columns]


def figure_check(exp):
    """A check for `runner.run_tasks`: the experiment's headline figure and its columns
    must each name a number in every run's results (`summary.check_figure`), so that a
    misspelt path stops the sweep instead of leaving blank cells."""
    from blksim.experiments.sweep.definition import _point_text
    from blksim.experiments.sweep.summary import check_figure
    paths = _figure_paths(exp)

    def check(task, record) -> None:
        for path, where in paths:
            check_figure(record["figures"], path, where, _point_text(task))
    return check


def check_figures_before(exp, tasks: list) -> None:
    """Resolve the figure paths before the sweep runs: against a probe of each point of
    the grid (`runner.probe_figures`; the seed changes no figure's path), raising the
    one-line `ConfigError` of `summary.check_figure` for a path that names no number. A
    path inside an application's figures that the probe lacks (a window it never reached,
    a phase it never began) is left to `figure_check` on the first finished run."""
    from blksim.experiments.sweep.definition import _point_text, get_path
    from blksim.experiments.sweep.runner import probe_figures
    from blksim.experiments.sweep.summary import ABSENT, check_figure
    paths = _figure_paths(exp)
    if not paths:
        return
    seen = set()
    for task in tasks:
        point = (task.scheduler, task.variant, task.tunables)
        if point in seen:
            continue
        seen.add(point)
        figures = probe_figures(task.raw, task.source)
        for path, where in paths:
            parts = path.split(".")
            if parts[0] == "apps" and len(parts) > 2 and \
                    get_path(figures, ".".join(parts[:2]), ABSENT) is not ABSENT and \
                    get_path(figures, path, ABSENT) is ABSENT:
                continue            # the application's own figures: known once it has run
            check_figure(figures, path, where, _point_text(task))


def run_experiment(exp, out_dir, jobs: int = 1, dask: str | None = None,
                   seeds: int | None = None, scale: float = 1.0,
                   progress: bool = False, tasks: list | None = None,
                   robustness=None) -> dict:
    """Run every task of ``exp`` not already finished under ``out_dir`` and write its
    report there; the report's paths, with ``ran`` (runs done now) and ``cached``.
    ``tasks``: ``exp.tasks(seeds, scale)`` if the caller has them already.
    ``robustness``: a robustness run's plan (`robustness.plan`), whose tasks run with the
    grid's; its report is then ``robustness`` in the result (JSON), written to
    robustness.json and robustness.csv and as a section of report.md."""
    from blksim.experiments.sweep.report import _write, write_report
    from blksim.experiments.sweep.runner import ResultStore, run_tasks
    if tasks is None:
        tasks = exp.tasks(seeds=seeds, scale=scale)
    every = tasks + (robustness.tasks if robustness is not None else [])
    store = ResultStore(out_dir)
    # the points still to run (a stored run's paths are checked on its record)
    check_figures_before(exp, [t for t in every if not os.path.exists(store.path(t.key))])
    failures: dict = {}
    records, cached = run_tasks(every, store, jobs=jobs, dask=dask,
                                progress=progress, check=figure_check(exp),
                                failures=failures if robustness is not None else None)
    extra: dict = {}
    rep = None
    if robustness is not None:
        from blksim.experiments.sweep import robustness as rb
        rep = rb.report(exp, robustness, records, tasks, failures)
        extra = {**rb.write_files(rep, str(out_dir), _write), "robustness": rep}
    paths = write_report(exp, tasks, records, str(out_dir), scale,
                         exp.seeds if seeds is None else seeds, robustness=rep)
    return {**paths, **extra, "runs": len(every), "cached": cached,
            "ran": len(every) - cached - sum(t.key in failures for t in every),
            "failed": sum(t.key in failures for t in every)}
