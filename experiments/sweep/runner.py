"""Running an experiment's tasks: one at a time, on a process pool, or on a Dask cluster,
with every finished run kept on disk so that a sweep resumes where it stopped.

A run's result is ``DIR/runs/KEY.json`` (KEY: the hash of its configuration and blksim's
version, `Task.key`): written whole to a temporary name in the same folder and renamed
into place, so a file with that name is always a finished run, and a sweep killed at any
moment loses nothing finished and leaves nothing half-written that could be taken for a
result. Temporary files of a killed sweep are removed when the next one starts.

Every task is deterministic from its configuration (which holds its seed), so the same
sweep gives the same results one at a time, on a pool and on a cluster.
"""

from __future__ import annotations

import json
import os
import time


def run_task(raw: dict, source: str) -> dict:
    """Run one configuration (in whatever process or worker this is called): its
    results.json figures, a latency CDF and a throughput timeline (for the report), and
    the CPU time it took."""
    from blksim.sim.api import simulate
    from blksim.sim.config import resolve
    from blksim.sim.histogram import StreamingHistogram

    cpu0 = time.process_time()
    cfg = resolve(raw, source)
    hist = StreamingHistogram()
    per_second: dict = {}
    start = cfg.ramp_time

    def hook(bio):
        if bio.t_queue >= start:
            hist.add(bio.t_complete - bio.t_queue)
            second = int(bio.t_complete)
            per_second[second] = per_second.get(second, 0) + bio.nr_sectors
    result = simulate(cfg, per_request=False, complete_hooks=(hook,))
    figures = result.figures
    cdf = []
    if hist.n:
        for q in (1, *range(2, 100, 2), 99, 99.5, 99.9, 100):
            cdf.append([round(hist.percentile(q) * 1e3, 6), q / 100.0])
    end = int(figures["simulated_s"]) + 1
    timeline = [[s, round(per_second.get(s, 0) * 512 / 1e6, 6)] for s in range(end)]
    return {"figures": figures, "q2c_cdf_ms": cdf, "mb_per_s_by_second": timeline,
            "cpu_s": time.process_time() - cpu0}


class ResultStore:
    """Finished runs under ``DIR/runs``, one JSON file each, written atomically."""

    def __init__(self, directory) -> None:
        self.dir = os.path.join(str(directory), "runs")
        os.makedirs(self.dir, exist_ok=True)
        for name in os.listdir(self.dir):
            if name.endswith(".tmp"):              # left by a sweep that was killed
                os.remove(os.path.join(self.dir, name))

    def path(self, key: str) -> str:
        """Where the run ``key`` is kept."""
        return os.path.join(self.dir, f"{key}.json")

    def get(self, key: str) -> dict | None:
        """The finished run ``key``, or None."""
        try:
            with open(self.path(key), encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def put(self, key: str, record: dict) -> None:
        """Keep a finished run: the whole file under a temporary name, then renamed."""
        final = self.path(key)
        tmp = f"{final}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)


def run_tasks(tasks: list, store: ResultStore, jobs: int = 1, dask: str | None = None,
              progress: bool = True) -> tuple:
    """Run the tasks not already in ``store``: (every task's record by key, how many of
    the tasks were finished already). ``jobs``: worker processes (1: in this process);
    ``dask``: "local" (a LocalCluster of ``jobs`` workers) or a scheduler's address,
    instead of the pool."""
    from collections import Counter
    per_key = Counter(t.key for t in tasks)          # a key several tasks share runs once
    records, todo = {}, []
    for key in per_key:
        got = store.get(key)
        if got is not None:
            records[key] = got
    queued: set = set()
    for task in tasks:
        if task.key not in records and task.key not in queued:
            queued.add(task.key)
            todo.append(task)
    cached = sum(n for key, n in per_key.items() if key in records)
    bar = _bar(len(tasks), cached, progress)

    def keep(task, out):
        record = {"point": task.point(), **out}
        store.put(task.key, record)
        records[task.key] = record
        if bar is not None:
            bar.update(per_key[task.key])
    try:
        if not todo:
            pass
        elif dask is not None:
            _run_dask(todo, keep, dask, jobs)
        elif jobs > 1:
            _run_pool(todo, keep, jobs)
        else:
            for task in todo:
                keep(task, run_task(task.raw, task.source))
    finally:
        if bar is not None:
            bar.close()
    return records, cached


def _bar(total: int, done: int, wanted: bool):
    if not wanted:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=done, unit="run", desc="runs", dynamic_ncols=True)


def _run_pool(todo: list, keep, jobs: int) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_task, t.raw, t.source): t for t in todo}
        try:
            for fut in as_completed(futures):
                keep(futures[fut], fut.result())
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


def dask_available() -> bool:
    """Whether dask.distributed can be imported (the optional extra)."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        return False
    return True


def _run_dask(todo: list, keep, address: str, jobs: int) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise RuntimeError("--dask needs Dask distributed, an optional extra: "
                           "pip install 'blksim[dask]'") from None
    cluster = None
    if address == "local":
        cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(address)
    try:
        futures = {}
        for t in todo:
            futures[client.submit(run_task, t.raw, t.source, pure=False, key=f"blksim-{t.key}")] = t
        for fut in as_completed(list(futures)):
            keep(futures[fut], fut.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
