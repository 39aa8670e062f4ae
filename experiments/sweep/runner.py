"""Running an experiment's tasks: one at a time, on a process pool, or on a Dask cluster,
with every finished run kept on disk so that a sweep resumes where it stopped.

A run's result is ``DIR/runs/KEY.json`` (KEY: the hash of its configuration, of the
content of every file it reads and of blksim's version, `Task.key`): written whole to a temporary name in the same folder and renamed
into place, so a file with that name is always a finished run, and a sweep killed at any
moment loses nothing finished and leaves nothing half-written that could be taken for a
result. Temporary files of a killed sweep are removed when the next one starts; a file
that is not a whole record anyway (empty, cut, junk) is taken for a run not finished.
Pool workers die with the sweep that started them (`_worker_start`).

Every task is deterministic from its configuration (which holds its seed), so the same
sweep gives the same results one at a time, on a pool and on a cluster.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time

#: What every record of a finished run holds (`run_task`'s result), and its type.
RECORD_KEYS = {"figures": dict, "q2c_cdf_ms": list, "mb_per_s_by_second": list}


def run_task(raw: dict, source: str) -> dict:
    """Run one configuration (in whatever process or worker this is called): its
    results.json figures, a latency CDF and a throughput timeline (for the report), and
    the CPU time it took."""
    from blksim.api import simulate
    from blksim.sim.config import resolve
    from blksim.common.histogram import StreamingHistogram

    cpu0 = time.process_time()
    cfg = resolve(raw, source)
    hist = StreamingHistogram()
    per_second: dict = {}
    start = cfg.ramp_time
    apps = _AppLatency()

    def hook(bio):
        if bio.t_queue >= start:
            hist.add(bio.t_complete - bio.t_queue)
        # the timeline has the ramp too, for the report to shade it as not measured
        second = int(bio.t_complete)
        per_second[second] = per_second.get(second, 0) + bio.nr_sectors
    hook.bind = apps.bind                  # the run's applications, for their latency
    # with the mechanism report for the report's section (docs/explain.md): it costs
    # about 1 % of an application study's CPU time (benchmarks/run.py --only explain)
    result = simulate(cfg, per_request=False, complete_hooks=(hook,), explain=True)
    figures = result.figures
    timeline = _timeline(per_second, figures["simulated_s"])
    return {"figures": figures, "q2c_cdf_ms": cdf_points(hist),
            "mb_per_s_by_second": timeline, "app_cdf_ms": apps.cdfs(),
            "cpu_s": time.process_time() - cpu0}


#: The percentiles a record's CDFs keep.
CDF_PERCENTILES = (1, *range(2, 100, 2), 99, 99.5, 99.9, 100)


def cdf_points(hist) -> list:
    """[[ms, fraction], ...] of a `StreamingHistogram` of seconds at `CDF_PERCENTILES`
    (empty for an empty one)."""
    if not hist.n:
        return []
    return [[round(hist.percentile(q) * 1e3, 6), q / 100.0] for q in CDF_PERCENTILES]


class _AppLatency:
    """The run's application models (the engine's ``app_stats``, learnt by binding to the
    simulation), and after the run each one's latency CDF where its model keeps a
    latency histogram (`blksim.apps`, ``latency_histogram``)."""

    def __init__(self) -> None:
        self.stats: dict = {}

    def bind(self, sim) -> None:
        self.stats = sim.app_stats

    def cdfs(self) -> dict:
        """name -> {"what": what it counts, "cdf": `cdf_points`}."""
        out = {}
        for name, st in self.stats.items():
            if hasattr(st, "latency_histogram"):
                what, hist = st.latency_histogram()
                out[name] = {"what": what, "cdf": cdf_points(hist)}
        return out


#: How long a probe runs (s of simulated time): long enough to start every process and
#: build every figure, too short for any I/O to complete.
PROBE_SECONDS = 1e-9


def probe_figures(raw: dict, source: str) -> dict:
    """The results.json figures of one configuration run for `PROBE_SECONDS` (no ramp):
    every figure the run will report, each null or 0, at a fraction of a run's cost (the
    configuration's checks and the building of its stack included), so that a figure's
    path can be checked before the sweep runs. An application reports the figures of what
    it did; those of a window it never reached are known only after a real run."""
    import dataclasses
    from blksim.api import simulate
    from blksim.sim.config import resolve
    cfg = dataclasses.replace(resolve(raw, source), duration=PROBE_SECONDS, ramp_time=0.0)
    return simulate(cfg, per_request=False).figures


#: The figures the summary reads from every record (`summary.row_of`).
SUMMARY_FIGURES = ("totals.all.iops", "totals.all.mb_per_s", "totals.all.q2c.mean_ms",
                   "totals.all.q2c.p99_ms")


def _missing(record) -> list:
    """What a record lacks to be a finished run's (empty if nothing)."""
    from blksim.experiments.sweep.definition import get_path
    from blksim.experiments.sweep.summary import ABSENT, is_figure
    if not isinstance(record, dict):
        return ["a table"]
    missing = [k for k, kind in RECORD_KEYS.items() if not isinstance(record.get(k), kind)]
    if not missing:
        missing = [f"figures.{p}" for p in SUMMARY_FIGURES
                   if not is_figure(get_path(record["figures"], p, absent=ABSENT))]
    return missing


#: At most this many points in a run's throughput timeline (its report's plot).
TIMELINE_POINTS = 10_000


def _timeline(per_second: dict, simulated_s: float) -> list:
    """[[bin start (s), MB/s (10^6 bytes)], ...] from sectors completed per whole second,
    from the run's start (its ramp included: the report shades it) to the end of its last
    full bin: a point per second, or per wider bin (a whole number of seconds) when the
    run is longer than `TIMELINE_POINTS` seconds, so that the record stays small whatever
    the run's length. A bin the run ended inside has no point: its rate would be over
    part of a bin, and what completed in it is cut short by the end of the run (a 4.8 s
    run's bin [4, 5) used to show a false drop)."""
    if math.isfinite(simulated_s) and simulated_s < 2**62:
        end = simulated_s
    else:                                   # a run too long to bin: up to its last I/O
        end = max(per_second, default=-1) + 1.0
    width = max(1, -(-math.ceil(end) // TIMELINE_POINTS))
    bins: dict = {}
    for second, sectors in per_second.items():
        # a completion at the very end of the run counts in the window's last second
        b = min(second, math.ceil(end) - 1) // width
        bins[b] = bins.get(b, 0) + sectors
    return [[b * width, round(bins.get(b, 0) * 512 / 1e6 / width, 6)]
            for b in range(int(end // width))]


class ResultStore:
    """Finished runs under ``DIR/runs``, one JSON file each, written atomically."""

    def __init__(self, directory) -> None:
        self.dir = os.path.join(str(directory), "runs")
        if os.path.isdir(self.dir):                # made by the first `put`
            for name in os.listdir(self.dir):
                if name.endswith(".tmp"):          # left by a sweep that was killed
                    os.remove(os.path.join(self.dir, name))

    def path(self, key: str) -> str:
        """Where the run ``key`` is kept."""
        return os.path.join(self.dir, f"{key}.json")

    def get(self, key: str) -> dict | None:
        """The finished run ``key``, or None: also when the file is not a whole record
        (empty, cut short, not JSON, not UTF-8: written by something else than `put`), after
        a warning line, so that the run is run again and its file replaced."""
        path = self.path(key)
        try:
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:       # UnicodeDecodeError is a ValueError
            why = exc.strerror if isinstance(exc, OSError) else (
                "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not whole JSON")
            self.warn(f"{path}: not a finished run ({why}); running it again")
            return None
        missing = _missing(record)
        if missing:
            self.warn(f"{path}: not a finished run (no {', '.join(missing)}); "
                      f"running it again")
            return None
        return record

    @staticmethod
    def warn(line: str) -> None:
        """Say something about the store on stderr, as one line."""
        print(f"blksim: warning: {line}", file=sys.stderr)

    def put(self, key: str, record: dict) -> None:
        """Keep a finished run: the whole file under a temporary name, then renamed."""
        final = self.path(key)
        os.makedirs(self.dir, exist_ok=True)
        tmp = f"{final}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)


def run_tasks(tasks: list, store: ResultStore, jobs: int = 1, dask: str | None = None,
              progress: bool = True, check=None, failures: dict | None = None) -> tuple:
    """Run the tasks not already in ``store``: (every task's record by key, how many of
    the tasks were finished already). ``jobs``: worker processes (1: in this process);
    ``dask``: "local" (a LocalCluster of ``jobs`` workers) or a scheduler's address,
    instead of the pool. ``check(task, record)``, if given, sees every record (stored ones
    first, then each as it finishes) and may raise to stop the sweep: the runs still
    going are stopped, the finished ones kept. ``failures``: where given, a robustness
    run (``task.sample``) that raises does not stop the sweep: its error is kept there by
    key, a warning line says so, and it has no record (so its figure is missing, and it
    runs again when the sweep is resumed). A run of the grid that raises, or a broken pool
    or cluster, still stops the sweep."""
    from collections import Counter
    per_key = Counter(t.key for t in tasks)          # a key several tasks share runs once
    records, todo = {}, []
    for task in tasks:
        if task.key not in records:
            got = store.get(task.key)
            if got is not None:
                if check is not None:
                    check(task, got)
                records[task.key] = got
    queued: set = set()
    for task in tasks:
        if task.key not in records and task.key not in queued:
            queued.add(task.key)
            todo.append(task)
    cached = sum(n for key, n in per_key.items() if key in records)
    bar = _bar(len(tasks), cached, progress)

    def finish(task, result) -> None:
        """Keep what ``result()`` gives (the run's output; it raises if the run did)."""
        try:
            out = result()
        except Exception as exc:
            if failures is None or not task.sample or isinstance(exc, _broken()):
                raise
            why = " ".join(f"{type(exc).__name__}: {exc}".split())
            failures[task.key] = why
            ResultStore.warn(f"robustness point {task.sample}, {task.scheduler}, seed "
                             f"{task.seed}: the run failed ({why}); its figure is missing")
            if bar is not None:
                bar.update(per_key[task.key])
            return
        keep(task, out)

    def keep(task, out):
        record = {"point": task.point(), **out}
        store.put(task.key, record)
        records[task.key] = record
        if bar is not None:
            bar.update(per_key[task.key])
        if check is not None:
            check(task, record)
    try:
        if not todo:
            pass
        elif dask is not None:
            _run_dask(todo, finish, dask, jobs)
        elif jobs > 1:
            _run_pool(todo, finish, jobs)
        else:
            for task in todo:
                finish(task, lambda t=task: run_task(t.raw, t.source))
    finally:
        if bar is not None:
            bar.close()
    return records, cached


def _bar(total: int, done: int, wanted: bool):
    if not wanted:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=done, unit="run", desc="runs", dynamic_ncols=True)


def _broken() -> tuple:
    """The errors that say the pool or the cluster broke, not a run (Dask's only where
    Dask is in use: it is not imported for them)."""
    from concurrent.futures import CancelledError
    from concurrent.futures.process import BrokenProcessPool
    out = [BrokenProcessPool, CancelledError]
    distributed = sys.modules.get("distributed")
    if distributed is not None and hasattr(distributed, "KilledWorker"):
        out.append(distributed.KilledWorker)
    return tuple(out)


def _run_pool(todo: list, finish, jobs: int) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_start,
                               initargs=(os.getpid(),))
    futures: dict = {}
    try:
        for t in todo:
            futures[pool.submit(run_task, t.raw, t.source)] = t
        for fut in as_completed(futures):
            finish(futures[fut], fut.result)
    except BaseException:
        # stop now (an error, Ctrl-C): the runs still going are not waited for
        for fut in futures:
            fut.cancel()
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


#: prctl(2)'s PR_SET_PDEATHSIG (include/uapi/linux/prctl.h): the signal a process gets
#: when the thread that created it exits.
PR_SET_PDEATHSIG = 1


def _worker_start(parent: int) -> None:
    """A pool worker's first act: die with the sweep that started it, even when that one
    is killed outright (SIGKILL runs no cleanup, and a worker left running would go on
    computing and hold the terminal's or a caller's pipes open).

    On Linux the kernel sends it SIGKILL when its parent exits (prctl PR_SET_PDEATHSIG,
    set through the C library); the pool's workers are started by the sweep's main thread,
    which lives as long as the sweep. Everywhere, a daemon thread also checks once a
    second that the parent is still its parent (a dead parent's children are adopted),
    which also covers a parent that died before the prctl took effect."""
    import signal
    # the sweep decides what a signal means: a worker forked from it would otherwise keep
    # its handlers and send a Ctrl-C or SIGTERM back as the run's result
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass                                   # the thread below still watches
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, name="blksim-parent-watch", daemon=True).start()


def dask_available() -> bool:
    """Whether dask.distributed can be imported (the optional extra)."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        return False
    return True


def check_dask_address(address: str) -> None:
    """Refuse (`ConfigError`, one line) a ``--dask`` value that is neither ``local`` nor a
    scheduler's address Dask can parse, before anything runs."""
    from blksim.common.config_values import ConfigError
    if address == "local":
        return
    try:
        from distributed.comm.addressing import parse_address, parse_host_port
        scheme, location = parse_address(address)
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--dask {address}: expected local or a scheduler's address such "
                          f"as tcp://host:8786 ({' '.join(str(exc).split())})") from None


def _run_dask(todo: list, finish, address: str, jobs: int) -> None:
    from blksim.common.config_values import ConfigError
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise RuntimeError("--dask needs Dask distributed, an optional extra: "
                           "pip install 'blksim[dask]'") from None
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1,
                                   processes=True, dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(address, timeout="20s")
    except (OSError, ValueError, TypeError) as exc:    # a bad address, nobody there
        if cluster is not None:
            cluster.close()
        raise ConfigError(f"--dask {address}: cannot reach a Dask scheduler there: "
                          f"{' '.join(str(exc).split()) or type(exc).__name__}") from None
    try:
        futures = {}
        for t in todo:
            futures[client.submit(run_task, t.raw, t.source, pure=False, key=f"blksim-{t.key}")] = t
        for fut in as_completed(list(futures)):
            finish(futures[fut], fut.result)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
