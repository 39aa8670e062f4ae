"""A bulk load into a database, in phases one after another, the last three shared by
the loader processes taking tables from a queue:

0. **create** (when ``create`` is ``zeros`` or ``fallocate``): the data and log volumes
   are made, all at once (`blksim.apps.loader_create`).
1. **load**: a loader reads the table's export file (``export_ratio`` times the table's
   size) from start to end (``read_size`` calls through the page cache, with read-ahead),
   spends CPU time on the data of each chunk, inserts it as new pages of the table in the
   data cache (the table's pages are allocated in
   1 MiB clusters on the data volumes in turn), and appends its log to the log queue (it
   waits while the queue is full; the log writer writes the queue to the log volume
   sequentially). After each table (an export file may hold several,
   ``tables_in_files``), and whenever the cache's changed pages reach its size, a
   **savepoint** writes every changed page: W writer threads per data volume
   each write runs of consecutive pages, one write at a time; the loader waits for it.
2. **index**: a loader reads each table's pages and writes its index (``index_ratio`` of
   the table, new pages written by a savepoint).
3. **statistics** (MaxDB's UPDATE STATISTICS): a loader reads a sample of each table,
   spread over it: ``stats_sample`` of its pages, or the pages of ``stats_rows`` rows
   of each of the file's tables
   (MaxDB's default sample is 20,000 rows: SAMPLE definition, MaxDB 7.8 SQL Reference
   Manual). With ``stats_catalog``, each table's statistics then change its catalog
   page (one page a table, in clusters after the data) and commit: a log record of
   ``STATS_LOG_BYTES`` that the loader waits to see written; a savepoint at the
   phase's end writes the catalog pages.

The figure is the time of each phase and the total, the sum of the phases. ``scale``
runs a proportional fraction of a large load (every table's size times it).
"""

from __future__ import annotations

import math
from collections import deque
from itertools import accumulate

from blksim.apps import AppProcess
from blksim.apps.loader_config import (CLUSTER_BYTES, KEYS, LoaderConfig,  # noqa: F401
                                       index_pages, parse)
from blksim.apps.loader_create import VolumeCreation
from blksim.apps.registry import AppModel, register
from blksim.block.request import Bio

PHASES = ("create", "load", "index", "statistics")
STATS_LOG_BYTES = 512   # a table's statistics' log record (blksim's choice: one row's change)


class LogVolume(AppProcess):
    """The log writer: the log queue (``log_buffer`` bytes) written to the log volume in
    writes of at most ``log_io_size``, round and round."""

    def __init__(self, load, pid: int, name: str, open_file) -> None:
        app = load.app
        self.file = open_file(app.log_file, app.direct)
        super().__init__(pid, name, [self.file])
        self.load = load
        self.used = 0                            # bytes in the queue, not yet written
        self.position = 0
        self.busy = False
        self.waiters: deque = deque()            # (bytes, done, since when)
        self.bytes = 0
        self.wait_time = 0.0
        self.queued = 0                          # bytes ever put in the queue
        self.commits: deque = deque()            # (queued bytes to be written, done)

    def append(self, nbytes: int, done) -> None:
        """Put ``nbytes`` of log in the queue (waiting while it is full); ``done()``."""
        if not self.waiters and self._fits(nbytes):
            self.used += nbytes
            self.queued += nbytes
            self._kick()
            done()
            return
        self.waiters.append((nbytes, done, self.load.clock.now))

    def commit(self, nbytes: int, done) -> None:
        """Append ``nbytes`` and wait until they are written (a commit); ``done()``."""
        def queued():
            if self.bytes >= self.queued:
                done()
            else:
                self.commits.append((self.queued, done))
        self.append(nbytes, queued)

    def _fits(self, nbytes: int) -> bool:
        return self.used == 0 or self.used + nbytes <= self.load.app.log_buffer

    def _kick(self) -> None:
        if self.busy or self.used == 0:
            return
        app = self.load.app
        n = min(self.used, app.log_io_size)
        size = -(-n // 4096) * 4096
        at = self.position % app.log_size
        size = min(size, app.log_size - at)
        n = min(n, size)
        self.busy = True

        def written(_call):
            self.busy = False
            self.used -= n
            self.bytes += n
            self.position += size
            now = self.load.clock.now
            while self.commits and self.commits[0][0] <= self.bytes:
                self.commits.popleft()[1]()
            while self.waiters and self._fits(self.waiters[0][0]):
                nbytes, done, since = self.waiters.popleft()
                self.used += nbytes
                self.queued += nbytes
                self.wait_time += now - since
                done()
            self._kick()
        self.file.submit_bio(Bio(self.load.ids.take(), at // 512, size // 512, True, True,
                                 self.pid, 0, written))


class SavepointWriter(AppProcess):
    """One writer thread of a data volume."""

    def __init__(self, load, pid: int, name: str, volume: int, file) -> None:
        super().__init__(pid, name, [file])
        self.load = load
        self.volume = volume
        self.file = file
        self.idle = True

    def pull(self) -> None:
        """Write the volume's next run, if any; then the next."""
        todo = self.load.savepoint_todo[self.volume]
        if not todo:
            self.idle = True
            return
        self.idle = False
        sector, count = todo.popleft()
        self.file.submit_bio(Bio(self.load.ids.take(), sector, count * self.load.block, True,
                                 False, self.pid, 0, lambda _c: self._written(count)))

    def _written(self, count: int) -> None:
        self.load.run_written(count)
        self.pull()


class Loader(AppProcess):
    """One loader process: tables from the phase's queue, one at a time."""

    def __init__(self, load, pid: int, name: str, open_file) -> None:
        app = load.app
        self.volumes = [open_file(p, app.direct) for p in app.data_files]
        super().__init__(pid, name, list(self.volumes))
        self.load = load
        self.open_file = open_file
        self._cluster_left = 0
        self._next_page = 0

    def start(self) -> None:
        """The first loader starts the load when the run starts."""
        if self is self.load.loaders[0]:
            self.load.begin()

    # ------------------------------------------------------------------ phases
    def next_table(self) -> None:
        """Take the phase's next table, or tell the load this loader is done."""
        load = self.load
        if not load.table_queue:
            load.loader_done()
            return
        t = load.table_queue.popleft()
        self._cluster_left = 0
        if load.phase == "load":
            self._load_table(t)
        elif load.phase == "index":
            self._chunks = deque(load.chunks(t, 1.0))
            self._table = t
            self._read_chunks(self._index_written)
        else:
            app = load.app
            # the file's tables one after another (with stats_rows, a read at least each);
            # with stats_catalog, each table's statistics stored before the next
            tables = app.tables_per_file[t]
            self._stat_chunks = load.chunks(t, app.stats_fraction(t),
                                            tables if app.stats_rows is not None else 1)
            self._stat = (t, tables if app.stats_catalog else 1, 0)
            self._statistics_next()

    def _statistics_next(self) -> None:
        """Read the sample of the file's next table (its share of the file's chunks)."""
        t, n, j = self._stat
        if j == n:
            self.next_table()
            return
        chunks = self._stat_chunks
        self._chunks = deque(chunks[j * len(chunks) // n:(j + 1) * len(chunks) // n])
        self._stat = (t, n, j + 1)
        self._read_chunks(lambda: self._statistics_stored(t, j))

    def _statistics_stored(self, t: int, j: int) -> None:
        """UPDATE STATISTICS of the file's table ``j`` stores them (``stats_catalog``):
        its catalog page changes and the statement commits; then the next table."""
        load = self.load
        if not load.app.stats_catalog:
            self._statistics_next()
            return
        load.changed(load.catalog_first + load.catalog_index[t] + j, 1)
        load.log.commit(STATS_LOG_BYTES, self._statistics_next)

    def _load_table(self, t: int) -> None:
        app = self.load.app
        export = self.open_file(app.export_files[t], False)
        self.files.append(export)
        self._export = export
        self._table = t
        self._at = 0                                # bytes of the export file read
        self._inserted = 0                          # bytes of table data inserted
        self._pages_made = 0
        self._tables_done = 0                       # tables of the file (savepoints) done
        self._rows = 0                              # rows of the table inserted
        # the database's work per table before its first row (cpu_per_table)
        self.load.spend(app.cpu_per_table, self.on_cpu(self._read_export))

    def _read_export(self) -> None:
        size = self._export.capacity * 512
        if self._at >= size:
            self.load.savepoint(self.next_table)
            return
        n = min(self.load.app.read_size, size - self._at)
        self._export.submit_bio(Bio(self.load.ids.take(), self._at // 512, n // 512, False,
                                    True, self.pid, 0, lambda _c: self._got_export(n)))

    def _got_export(self, n: int) -> None:
        app = self.load.app
        self._at += n
        whole = app.tables[self._table]
        done = whole if self._at >= self._export.capacity * 512 else \
            min(whole, round(self._at / app.export_ratio))
        inserted, self._inserted = done - self._inserted, done
        rows, self._rows = done // app.row_size - self._rows, done // app.row_size
        self.load.cpu(inserted, self.on_cpu(lambda: self._insert(inserted)),
                      rows * app.cpu_per_row)

    def _insert(self, n: int) -> None:
        load = self.load
        app = load.app
        pages = self._inserted // app.page_size - self._pages_made
        self._pages_made += pages
        self._new_pages(self._table, pages, load.extents[self._table])
        load.log.append(round(n * app.redo_ratio), self._after_log)

    def _after_log(self) -> None:
        app = self.load.app
        t = self._table
        tables = app.tables_per_file[t]
        # a savepoint after each table of the file (the last one's when the file ends)
        ended = min(tables - 1, self._inserted * tables // app.tables[t])
        if ended > self._tables_done:
            self._tables_done = ended
            self.load.savepoint(self._read_export)
        elif self.load.cache_full():
            self.load.savepoint(self._read_export, cache_full=True)
        else:
            self._read_export()

    def _new_pages(self, t: int, count: int, extents: list) -> None:
        """Allocate ``count`` new pages of table ``t`` (in this loader's cluster, then new
        clusters) and mark them changed."""
        load = self.load
        while count:
            if self._cluster_left == 0:
                self._next_page = load.new_cluster()
                self._cluster_left = load.per_cluster
            n = min(count, self._cluster_left)
            first = self._next_page
            if extents and extents[-1][0] + extents[-1][1] == first:
                extents[-1] = (extents[-1][0], extents[-1][1] + n)
            else:
                extents.append((first, n))
            load.changed(first, n)
            self._next_page += n
            self._cluster_left -= n
            count -= n

    def _read_chunks(self, then) -> None:
        """Read the chunks (volume, sector, sectors) one after another; then ``then()``."""
        if not self._chunks:
            then()
            return
        volume, sector, sectors = self._chunks.popleft()

        def got(_c):
            load = self.load
            # building an index: its rows' keys sorted and inserted (index_cpu_per_row)
            extra = sectors * 512 / load.app.row_size * load.app.index_cpu_per_row \
                if load.phase == "index" else 0.0
            load.cpu(sectors * 512, self.on_cpu(lambda: self._read_chunks(then)), extra)
        self.volumes[volume].submit_bio(Bio(self.load.ids.take(), sector, sectors, False,
                                            True, self.pid, 0, got))

    def _index_written(self) -> None:
        load = self.load
        t = self._table
        self._cluster_left = 0
        self._new_pages(t, index_pages(load.app.tables[t] // load.app.page_size,
                                       load.app.index_ratio), [])
        load.savepoint(self.next_table)


class BulkLoad:
    """The load: its processes, the data cache's changed pages, savepoints and phases."""

    def __init__(self, ctx, app: LoaderConfig) -> None:
        self.app = app
        self.clock = ctx.clock
        self.ids = ctx.ids
        self.block = app.page_size // 512
        self.per_cluster = max(1, CLUSTER_BYTES // app.page_size)
        self.log = LogVolume(self, ctx.new_process(f"{app.name}.log"), f"{app.name}.log",
                             ctx.open_file)
        self.writers = []
        for v, path in enumerate(app.data_files):
            for w in range(app.savepoint_writers):
                name = f"{app.name}.sp{v}.{w}"
                self.writers.append(SavepointWriter(self, ctx.new_process(name), name, v,
                                                    ctx.open_file(path, app.direct)))
        self.loaders = [Loader(self, ctx.new_process(f"{app.name}.{k}"), f"{app.name}.{k}",
                               ctx.open_file) for k in range(app.loaders)]
        for proc in [*self.loaders, self.log, *self.writers]:
            ctx.add(proc)
        self.creation = VolumeCreation(ctx, app) if app.create != "none" else None
        self.catalog_first = 0
        # each export file's first table's catalog page (after the tables before it)
        self.catalog_index = [0, *accumulate(app.tables_per_file)][:-1]
        self.extents = [[] for _ in app.tables]     # (first page, pages), per table
        self.dirty: list = []                       # runs (first page, pages) changed
        self.dirty_pages = 0
        self.clusters = 0
        self.savepoint_todo = [deque() for _ in app.data_files]
        self.savepoint_running = False
        self.savepoint_left = 0
        self.savepoint_waiters: list = []
        self.savepoint_next: list = []
        self.savepoint_began = 0.0
        self.savepoint_pages_left = 0
        self.stats = LoadStats(self)
        self.phase = None
        self.table_queue: deque = deque()
        self.active = 0

    # ------------------------------------------------------------------ phases
    def begin(self) -> None:
        """Start the first phase."""
        self._phase(0)

    def _phase(self, k: int) -> None:
        now = self.clock.now
        if self.phase is not None:
            self.stats.phase_end[self.phase] = now
        while k < len(PHASES) and not self._phase_has_work(PHASES[k]):
            k += 1
        if k == len(PHASES):
            self.phase = None
            self.stats.done_at = now
            return
        self.phase = PHASES[k]
        self.stats.phase_start[self.phase] = now
        self._phase_index = k
        if self.phase == "create":
            self.creation.begin(lambda: self._phase(k + 1))
            return
        if self.phase == "statistics" and self.app.stats_catalog:
            # the catalog's pages, one a table, in whole clusters after the data's
            self.catalog_first = self.new_cluster()
            self.clusters += -(-sum(self.app.tables_per_file) // self.per_cluster) - 1
        self.table_queue = deque(range(len(self.app.tables)))
        self.active = len(self.loaders)
        for loader in self.loaders:
            loader.next_table()

    def _phase_has_work(self, phase: str) -> bool:
        if phase == "create":
            return self.creation is not None
        if phase == "index":
            return self.app.index_ratio > 0
        if phase == "statistics":
            return self.app.stats_sample > 0
        return True

    def loader_done(self) -> None:
        """A loader found the phase's queue empty; the last one ends the phase."""
        self.active -= 1
        if self.active == 0:
            if self.phase == "statistics" and self.app.stats_catalog:
                # the statistics' catalog pages written before the phase ends
                self.savepoint(lambda: self._phase(self._phase_index + 1))
                return
            self._phase(self._phase_index + 1)

    # ------------------------------------------------------------------ pages
    def new_cluster(self) -> int:
        """The first page of a new cluster."""
        first = self.clusters * self.per_cluster
        self.clusters += 1
        return first

    def page_map(self, page: int) -> tuple:
        """(data volume, sector in it) of a page: clusters on the volumes in turn."""
        unit, within = divmod(page, self.per_cluster)
        nvol = len(self.app.data_files)
        return unit % nvol, ((unit // nvol) * self.per_cluster + within) * self.block

    def changed(self, first: int, count: int) -> None:
        """Pages [first, first + count) are new or changed in the data cache."""
        self.dirty.append((first, count))
        self.dirty_pages += count
        self.stats.pages_changed += count

    def cache_full(self) -> bool:
        """Whether the changed pages fill the data cache."""
        return self.dirty_pages >= self.app.cache_pages

    def chunks(self, t: int, sample: float, least: int = 1) -> list:
        """(volume, sector, sectors) reads of at most ``read_size`` covering table ``t``
        (a ``sample`` of them, at least ``least``, spread evenly)."""
        out = []
        most = self.app.read_size // self.app.page_size
        for first, count in self.extents[t]:
            while count:
                n = min(count, most)
                volume, sector = self.page_map(first)
                out.append((volume, sector, n * self.block))
                first += n
                count -= n
        if sample >= 1.0 or not out:
            return out
        wanted = min(len(out), max(least, math.ceil(len(out) * sample)))
        return [out[int(j * len(out) / wanted)] for j in range(wanted)]

    def cpu(self, nbytes: int, done, extra: float = 0.0) -> None:
        """A loader's CPU time for ``nbytes`` (``cpu_per_mb``) and ``extra`` seconds (the
        rows' own work), then ``done()``."""
        self.spend(self.app.cpu_per_mb * nbytes / 1e6 + extra, done, True)

    def spend(self, seconds: float, done, as_event: bool = False) -> None:
        """A loader uses its processor for ``seconds`` (one of its own: each loader is a
        process on a processor, blksim's choice), then ``done()``: as a later event, or
        at once when there is nothing to spend and ``as_event`` is not asked."""
        self.stats.cpu_s += seconds
        if seconds <= 0.0 and not as_event:
            done()
            return
        self.clock.call_at(self.clock.now + seconds, lambda _ev: done())

    # ------------------------------------------------------------------ savepoints
    def savepoint(self, done, cache_full: bool = False) -> None:
        """Have every page changed so far written; ``done()`` after."""
        if cache_full:
            self.stats.cache_full_savepoints += 1
        if self.savepoint_running:
            self.savepoint_next.append(done)       # the next savepoint covers this one
            return
        self.savepoint_waiters.append(done)
        self._start_savepoint()

    def _start_savepoint(self) -> None:
        runs, self.dirty = self.dirty, []
        self.dirty_pages = 0
        most = self.app.savepoint_io_pages
        for first, count in sorted(runs):
            while count:
                n = min(count, most, self.per_cluster - first % self.per_cluster)
                volume, sector = self.page_map(first)
                todo = self.savepoint_todo[volume]
                if todo and todo[-1][0] + todo[-1][1] * self.block == sector and \
                        todo[-1][1] + n <= most:
                    todo[-1] = (todo[-1][0], todo[-1][1] + n)
                else:
                    todo.append((sector, n))
                first += n
                count -= n
        self.savepoint_running = True
        self.savepoint_began = self.clock.now
        self.savepoint_pages_left = sum(n for todo in self.savepoint_todo for _, n in todo)
        self.stats.savepoints += 1
        if self.savepoint_pages_left == 0:
            self._savepoint_done()
            return
        for w in self.writers:
            if w.idle:
                w.pull()

    def run_written(self, count: int) -> None:
        """A writer wrote ``count`` pages of the savepoint."""
        self.stats.pages_written += count
        self.savepoint_pages_left -= count
        if self.savepoint_pages_left == 0:
            self._savepoint_done()

    def _savepoint_done(self) -> None:
        self.stats.savepoint_time += self.clock.now - self.savepoint_began
        self.savepoint_running = False
        waiters, self.savepoint_waiters = self.savepoint_waiters, []
        if self.savepoint_next:
            self.savepoint_waiters, self.savepoint_next = self.savepoint_next, []
            self._start_savepoint()
        for done in waiters:
            done()


class LoadStats:
    """The load's figures."""

    def __init__(self, load: BulkLoad) -> None:
        self.load = load
        self.phase_start: dict = {}
        self.phase_end: dict = {}
        self.done_at = None
        self.savepoints = 0
        self.cache_full_savepoints = 0
        self.savepoint_time = 0.0
        self.pages_changed = 0
        self.pages_written = 0
        self.cpu_s = 0.0                 # loaders' CPU time (conversion, rows, tables)

    def figures(self, end_of_run: float) -> dict:
        """Time per phase and in all (s); a phase not finished by the end of the run
        says so."""
        app = self.load.app
        phases = []
        for name in PHASES:
            if name not in self.phase_start:
                continue
            t0 = self.phase_start[name]
            t1 = self.phase_end.get(name)
            phases.append({"name": name, "start_s": round(t0, 9),
                           "end_s": None if t1 is None else round(t1, 9),
                           "seconds": round((end_of_run if t1 is None else t1) - t0, 9),
                           "finished": t1 is not None})
        total = sum(p["seconds"] for p in phases)
        data = sum(app.tables)
        load = next((p for p in phases if p["name"] == "load"), None)
        return {
            "type": "loader", "tables": len(app.tables), "loaders": app.loaders,
            "data_mb": round(data / 1e6, 6), "finished": self.done_at is not None,
            "total_s": round(total, 9), "phases": phases,
            "load_mb_per_s": round(data / 1e6 / load["seconds"], 6)
            if load and load["finished"] and load["seconds"] > 0 else None,
            "savepoints": self.savepoints, "cache_full_savepoints": self.cache_full_savepoints,
            "savepoint_s": round(self.savepoint_time, 9),
            "pages_changed": self.pages_changed, "pages_written": self.pages_written,
            "log_mb": round(self.load.log.bytes / 1e6, 6),
            "log_wait_s": round(self.load.log.wait_time, 9),
            "rows": sum(t // app.row_size for t in app.tables),
            "cpu_s": round(self.cpu_s, 9),
            **self._created(),
        }

    def _created(self) -> dict:
        """The creation phase's own figures (none when the volumes were not made)."""
        creation = self.load.creation
        if creation is None:
            return {}
        app = self.load.app
        how = "zeros" if app.create == "zeros" else ", ".join(sorted(
            {"fallocate(2)" if n else "glibc emulation" for n in app.native_fallocate}))
        return {"create": how, "create_written_mb": round(creation.bytes / 1e6, 6)}


def start(ctx, app: LoaderConfig) -> LoadStats:
    """The load's processes (the first loader starts it); its statistics."""
    return BulkLoad(ctx, app).stats


def lines(name: str, f: dict, fmt) -> list:
    """The terminal table of one run."""
    state = "" if f["finished"] else " (not finished when the run ended)"
    out = [f"{name} (bulk load of {f['tables']} tables, {f['data_mb']:.1f} MB, "
           f"{f['loaders']} loaders): {f['total_s']:.3f} s in all{state}",
           f"{'phase':>12}{'from (s)':>12}{'seconds':>12}"]
    for p in f["phases"]:
        out.append(f"{p['name']:>12}{p['start_s']:>12.3f}{p['seconds']:>12.3f}"
                   + ("" if p["finished"] else "  (unfinished)"))
    rate = "" if f["load_mb_per_s"] is None else f"load {f['load_mb_per_s']:.2f} MB/s; "
    out.append(f"{rate}{f['savepoints']} savepoints ({f['cache_full_savepoints']} for a full "
               f"cache) took {f['savepoint_s']:.3f} s; {f['log_mb']:.1f} MB of log, loaders "
               f"waited {f['log_wait_s']:.3f} s for log space")
    if "create" in f:
        out.append(f"volumes made by {f['create']}: {f['create_written_mb']:.1f} MB in the "
                   f"creators' write calls")
    return out


def compare_rows(name: str, runs: list) -> tuple:
    """``blksim compare``'s rows: (heading, [(label, a value per run), ...])."""
    rows = [("  total (s)", [r["total_s"] for r in runs])]
    for k, p in enumerate(runs[0]["phases"]):
        rows.append((f"  {p['name']} (s)", [r["phases"][k]["seconds"] for r in runs]))
    rows.append(("  savepoints (s)", [r["savepoint_s"] for r in runs]))
    return f"{name} (bulk load)", rows


register(AppModel(type="loader", module=__name__, keys=KEYS, parse=parse, start=start,
                  lines=lines, compare_rows=compare_rows))
