"""An OLTP database in the manner of TPC-C, with the process structure real engines have.

* **Sessions**, one process each, run transactions back to back or with a think time. A
  transaction of the mix spends CPU time (on the run's processors, if they are shared),
  reads its pages through the buffer pool one after another (a miss is a read of one
  block from a data file: Oracle's "db file sequential read"), changes the first
  ``writes`` of them, and commits: its redo goes to the log writer and, as the engine's
  mode says, the session waits for the write ("log file sync").
* **The log writer** (`apps.redo`) writes redo with group commit.
* **Database writers** (`apps.dbwriter`) write dirty pages back, at checkpoints and
  when buffers run short.

The engine (Oracle, InnoDB or PostgreSQL, whose own processes are in `apps.postgres`)
and its I/O parameters decide how each file is opened (`apps.oltp_config`). With a
``rate`` the sessions serve an open loop of arrivals instead (`apps.openloop`). The
figures are the engine's users' own: transactions per second and per minute,
response-time percentiles per transaction type, the share of DB time each wait takes
(as Oracle's AWR reports it), physical reads and writes per second, redo writes and
commits per redo write.
"""

from __future__ import annotations

import random

from blksim.apps import AppProcess, shares
from blksim.apps.access import PageChooser
from blksim.apps.bufferpool import BufferPool
from blksim.apps.dbwriter import DatabaseWriter, WriterGroup
from blksim.apps.openloop import Arrivals
from blksim.apps.oltp_config import KEYS, STRIPE_BYTES, OltpConfig, parse  # noqa: F401
from blksim.apps.redo import LogWriter
from blksim.apps.registry import AppModel, register
from blksim.common.histogram import StreamingHistogram
from blksim.common.histogram import latency_ms
from blksim.common.stationarity import IntervalSeries, series_report
from blksim.block.request import Bio

LATENCY = ("mean", "p50", "p95", "p99", "max")

#: Per engine: its log writer's and its data writers' process names.
PROCESS_NAMES = {"oracle": ("lgwr", "dbw"), "innodb": ("log_writer", "page_cleaner"),
                 "postgresql": ("walwriter", "bgwriter")}

#: The waits of a session, named as Oracle's AWR names them.
WAITS = ("db file sequential read", "read by other session", "free buffer waits",
         "log file sync", "CPU queue")


class CpuPool:
    """``n`` processors shared first come, first served (n = 0: one per session)."""

    def __init__(self, clock, n: int) -> None:
        self.clock = clock
        self.n = n
        self.busy = 0
        self.queue: list = []
        self._head = 0

    def run(self, seconds: float, done) -> None:
        """Use a processor for ``seconds``; ``done(queued_s)`` after."""
        now = self.clock.now
        if self.n == 0 or self.busy < self.n:
            self.busy += 1
            self.clock.call_at(now + seconds, lambda _ev: self._release(done, 0.0))
            return
        self.queue.append((now, seconds, done))

    def _release(self, done, queued: float) -> None:
        now = self.clock.now
        if self._head < len(self.queue):
            t0, seconds, nxt = self.queue[self._head]
            self.queue[self._head] = None
            self._head += 1
            if self._head > 1024 and self._head * 2 > len(self.queue):
                del self.queue[:self._head]
                self._head = 0
            self.clock.call_at(now + seconds,
                               lambda _ev, nxt=nxt, q=now - t0: self._release(nxt, q))
        else:
            self.busy -= 1
        done(queued)


class OltpStats:
    """What the sessions and background processes did, counted from ``warmup`` on."""

    def __init__(self, app: OltpConfig, pool: BufferPool, log: LogWriter,
                 writers: WriterGroup, horizon: float) -> None:
        self.app = app
        self.pool = pool
        self.log = log
        self.writers = writers
        self.horizon = horizon
        self.response = {t.name: StreamingHistogram() for t in app.mix}
        self.count = {t.name: 0 for t in app.mix}
        self.think = 0.0
        self.cpu = 0.0
        self.user_calls = 0
        self.waits = {w: [0, 0.0] for w in WAITS}    # waits, seconds
        self.lookups = 0
        self.hits = 0
        self.reads = 0
        self.series = IntervalSeries(app.warmup)   # transactions per interval (bounded)
        self._at_warmup = None
        self.db = None                             # the Database (the engine's extra figures)

    def counting(self, now: float) -> bool:
        """Whether an event at ``now`` is in the measured window."""
        return self.app.warmup <= now <= self.horizon

    def mark_warmup(self) -> None:
        """At warmup: the background processes' counters so far are not counted."""
        log = self.log
        self._at_warmup = (log.writes, log.bytes, log.commits, log.write_time,
                           log.stall_time, log.switches, self.writers.checkpoints,
                           self.writers.checkpoints_done, self.pool.written,
                           self.pool.episodes)

    def figures(self, end_of_run: float) -> dict:
        """The application's figures (times in ms, rates per second)."""
        app = self.app
        t0, t1 = app.warmup, min(self.horizon, end_of_run)
        if not t1 > t0:
            # parse rejects a warmup at or after the window's end; a run that stopped
            # before it (every process done early) measured nothing: no rate is a figure
            return {"type": "oltp", "engine": app.engine, "sessions": app.sessions,
                    "window_s": [round(t0, 9), round(t1, 9)], "measured": False}
        span = t1 - t0
        n = sum(self.count.values())
        by_type = {}
        db_time = 0.0
        for t in app.mix:
            h = self.response[t.name]
            db_time += h.total
            s = h.summary()
            by_type[t.name] = {"count": self.count[t.name],
                               "tps": round(self.count[t.name] / span, 6),
                               "tpm": round(60.0 * self.count[t.name] / span, 6),
                               "response_ms": latency_ms(s, LATENCY)}
        log, group, pool = self.log, self.writers, self.pool
        base = self._at_warmup or (0,) * 10
        writes = log.writes - base[0]
        stall = log.stall_time - base[4]
        if log.stalled_since is not None:
            stall += end_of_run - max(log.stalled_since, t0)
        page_writes = group.pages_counted
        waits = {}
        for name, (count, seconds) in self.waits.items():
            waits[name] = {"waits": count, "time_s": round(seconds, 6),
                           "avg_ms": round(seconds / count * 1e3, 6) if count else 0.0,
                           "pct_db_time": round(100.0 * seconds / db_time, 6) if db_time
                           else 0.0}
        response = self._all_response()
        out = {
            "type": "oltp", "engine": app.engine, "sessions": app.sessions,
            "window_s": [round(t0, 9), round(t1, 9)], "transactions": n,
            "tps": round(n / span, 6), "tpm": round(60.0 * n / span, 6),
            "response_ms": response, "think_s": round(self.think / n, 9) if n else 0.0,
            "by_transaction": by_type,
            "db_time_s": round(db_time, 6),
            "cpu": {"time_s": round(self.cpu, 6),
                    "pct_db_time": round(100.0 * self.cpu / db_time, 6) if db_time else 0.0},
            "waits": waits,
            "user_calls_per_s": round(self.user_calls / span, 6),
            "user_calls_per_transaction": round(self.user_calls / n, 6) if n else None,
            "physical_reads_per_s": round(self.reads / span, 6),
            "physical_writes_per_s": round(page_writes / span, 6),
            "buffer_pool": {"pages": app.pool_pages, "hit_ratio": round(
                self.hits / self.lookups, 6) if self.lookups else 0.0,
                "changes": pool.episodes - base[9], "pages_written": pool.written - base[8],
                "unfinished": pool.unfinished()},
            "redo": {"writes": writes, "writes_per_s": round(writes / span, 6),
                     "mb_per_s": round((log.bytes - base[1]) / 1e6 / span, 6),
                     "commits_per_write": round((log.commits - base[2]) / writes, 6)
                     if writes else 0.0,
                     "write_ms": round((log.write_time - base[3]) / writes * 1e3, 6)
                     if writes else 0.0,
                     "stall_s": round(stall, 6), "log_switches": log.switches - base[5]},
            "checkpoints": {"requested": group.checkpoints - base[6],
                            "completed": group.checkpoints_done - base[7]},
        }
        db = self.db
        if db is not None and db.arrivals is not None:
            out["open_loop"] = db.arrivals.figures(t0, t1, n)
        if app.pg is not None:
            from blksim.apps.postgres import figures as pg_figures
            out["postgresql"] = pg_figures(db, span)
        return out

    def steady_state(self, end_of_run: float) -> dict:
        """Whether transactions per second are stationary over the measured window
        (`blksim.common.stationarity`), by its results.json key."""
        end = min(self.horizon, end_of_run)
        report = series_report(self.series, end)
        report["unit"] = "transactions per second"
        return {"tps": report}

    def latency_histogram(self) -> tuple:
        """("transactions", the response time of every transaction completed in the
        measured window, of every type, in one histogram (s)): what an experiment's
        application-latency CDF draws."""
        total = StreamingHistogram()
        for h in self.response.values():
            total.merge(h)
        return "transactions", total

    def _all_response(self) -> dict:
        return latency_ms(self.latency_histogram()[1].summary(), LATENCY)


class Session(AppProcess):
    """One client session: transactions one after another (``files``: its open data
    files)."""

    def __init__(self, db, pid: int, name: str, files: list, rng: random.Random) -> None:
        super().__init__(pid, name, files)
        self.db = db
        self.clock = db.clock
        self.rng = rng
        self.outstanding = 0
        self._txn = None
        self._todo = 0
        self._t_start = 0.0
        self._t_wait = 0.0
        self._wal = 0                            # full page images' WAL bytes, this transaction

    def start(self) -> None:
        """The first transaction, after a first think time."""
        self._think()

    def _think(self) -> None:
        db = self.db
        now = self.clock.now
        if now >= db.horizon:
            return
        if db.arrivals is not None:             # the open loop: wait for an arrival
            self._pause = 0.0
            db.arrivals.ready(self)
            return
        app = db.app
        pause = app.think_time
        if app.think_exponential and pause > 0:
            pause = self.rng.expovariate(1.0 / pause)
        self._pause = pause
        self.clock.call_at(now + pause, self._begin)

    def serve(self, arrived: float) -> None:
        """The open loop: serve the transaction that arrived at ``arrived``."""
        self._begin(None, arrived)

    def _begin(self, _ev=None, arrived: float | None = None) -> None:
        db = self.db
        app = db.app
        db.active += 1
        self._txn = db.pick_type(self.rng)
        self._t_start = self.clock.now if arrived is None else arrived
        self._wal = 0
        self._todo = self._txn.reads
        self._done_reads = 0
        # the transaction's own CPU and its user calls' server CPU (cpu_per_call each)
        cpu = self._txn.cpu_time + self._txn.user_calls * app.cpu_per_call
        if app.cpu_exponential and cpu > 0:
            cpu = self.rng.expovariate(1.0 / cpu)
        self._cpu = cpu
        db.cpus.run(cpu, self.on_cpu(self._after_cpu))

    def _after_cpu(self, queued: float) -> None:
        if queued:
            self._wait("CPU queue", queued)
        self._next_page()

    def _wait(self, name: str, seconds: float) -> None:
        st = self.db.stats
        if st.counting(self.clock.now):
            w = st.waits[name]
            w[0] += 1
            w[1] += seconds

    def _next_page(self) -> None:
        while self._done_reads < self._todo:
            if not self._fetch(self.db.chooser.draw(self.rng), True):
                return
        self._commit()

    def _fetch(self, page: int, first: bool) -> bool:
        """Find ``page`` in the pool (True: found, go on) or start waiting for it: for
        another session's read of it, for a free buffer, or for this session's read."""
        db = self.db
        pool = db.pool
        where = pool.lookup(page, self.rng)
        now = self.clock.now
        if first:
            self._t_wait = now
            if db.stats.counting(now):
                db.stats.lookups += 1
                db.stats.hits += where == "hit"
        elif now > self._t_wait:                  # woken after waiting for a free buffer
            self._wait("free buffer waits", now - self._t_wait)
            self._t_wait = now
        if where == "hit":
            self._use(page)
            return True
        if where == "reading":
            pool.wait_read(page, lambda: self._waited_read(page))
            return False
        if not pool.take_free(page):
            retry = lambda: self._fetch(page, False) and self._next_page()  # noqa: E731
            if db.backend_write is None or not db.backend_write(db, self, retry):
                pool.wait_free(retry)
            return False
        f, sector = db.page_map(page)
        self.outstanding += 1
        self.files[f].submit_bio(Bio(db.ids.take(), sector, db.app.block_size // 512, False,
                                     True, self.pid, 0, lambda _c: self._got(page)))
        return False

    def _use(self, page: int) -> None:
        if self._done_reads < self._txn.writes:
            db = self.db
            db.pool.modify(page, db.log.lsn)
            if db.full_pages is not None:
                self._wal += db.full_pages.extra(page)
        self._done_reads += 1

    def _waited_read(self, page: int) -> None:
        self._wait("read by other session", self.clock.now - self._t_wait)
        self._use(page)
        self._next_page()

    def _got(self, page: int) -> None:
        db = self.db
        self.outstanding -= 1
        now = self.clock.now
        self._wait("db file sequential read", now - self._t_wait)
        if db.stats.counting(now):
            db.stats.reads += 1
        woken = db.pool.read_done(page)
        self._use(page)
        self._next_page()
        for wake in woken:
            wake()

    def _commit(self) -> None:
        changes = self._txn.writes
        if changes == 0:
            self._finish()
            return
        self._t_wait = self.clock.now
        self.db.log.commit(changes * self.db.app.redo_per_change + self._wal, self._committed)

    def _committed(self) -> None:
        self._wait("log file sync", self.clock.now - self._t_wait)
        self._finish()

    def _finish(self) -> None:
        db = self.db
        now = self.clock.now
        db.active -= 1
        if db.arrivals is not None:
            db.arrivals.finished(now)
        st = db.stats
        if st.counting(now):
            name = self._txn.name
            st.count[name] += 1
            st.response[name].add(now - self._t_start)
            st.think += self._pause
            st.cpu += self._cpu
            st.user_calls += self._txn.user_calls
            st.series.add(now)
        self._think()


class Database:
    """One database: its pool, log writer, writers and sessions."""

    def __init__(self, ctx, app: OltpConfig) -> None:
        self.app = app
        self.clock = ctx.clock
        self.ids = ctx.ids
        self.horizon = app.horizon() if ctx.horizon is None else ctx.horizon
        self.cpus = CpuPool(ctx.clock, app.cpus)
        self.chooser = PageChooser(app.pages, app.access, app.zipf_theta, *app.hot_set)
        self.pool = BufferPool(app.pool_pages, app.hit_ratio)
        share = shares([t.weight for t in app.mix])
        self._cum = [sum(share[:k + 1]) for k in range(len(share))]
        self.per_unit = max(1, STRIPE_BYTES // app.block_size)
        self.block_sectors = app.block_size // 512
        modes = app.modes
        names = PROCESS_NAMES[app.engine]
        lgwr = f"{app.name}.{names[0]}"
        log_files = [ctx.open_file(p, modes.log_direct, modes.log_write_sync)
                     for p in app.log_files]
        self.log = LogWriter(ctx.clock, ctx.ids, ctx.new_process(lgwr), lgwr, app, log_files,
                             self.pool, self.horizon)
        self.group = WriterGroup(ctx.clock, app, self.pool, self.horizon)
        self.group.log = self.log
        self.log.request_checkpoint = self.group.request_checkpoint
        self.active = 0                          # sessions in a transaction
        self.full_pages = None                   # PostgreSQL's full-page writes
        self.backend_write = None                # PostgreSQL: (db, session, then) -> bool
        self.arrivals = None if not app.rate else Arrivals(
            ctx.clock, app.rate, f"{ctx.seed}/{app.name}", app.warmup, self.horizon)
        writer = DatabaseWriter
        if app.pg is not None:
            from blksim.apps.postgres import BackgroundWriter
            writer = BackgroundWriter
        for k in range(app.writers):
            name = f"{app.name}.{names[1]}{k if app.pg is None else ''}"
            files = [ctx.open_file(p, modes.data_direct, modes.data_write_sync,
                                   aio=modes.data_async) for p in app.data_files]
            doublewrite = ctx.open_file(app.doublewrite_file, modes.data_direct) \
                if app.doublewrite_file else None
            w = writer(ctx.clock, ctx.ids, ctx.new_process(name), name, self.group, files,
                       self.page_map, k, doublewrite)
            self.group.writers.append(w)
        self.stats = OltpStats(app, self.pool, self.log, self.group, self.horizon)
        self.stats.db = self
        if app.pg is not None:
            from blksim.apps.postgres import attach
            attach(self, ctx)
        self.sessions = []
        for s in range(app.sessions):
            name = f"{app.name}.{s}"
            files = [ctx.open_file(p, modes.data_direct) for p in app.data_files]
            self.sessions.append(Session(self, ctx.new_process(name), name, files,
                                         random.Random(f"{ctx.seed}/{app.name}/{s}")))
        for proc in [self.log, *self.group.writers, *self.sessions]:
            ctx.add(proc)
        if app.warmup > 0:
            ctx.clock.call_at(app.warmup, lambda _ev: self.stats.mark_warmup())
        if self.arrivals is not None:
            self.arrivals.start()

    def pick_type(self, rng):
        """A transaction type of the mix, by weight."""
        if len(self._cum) == 1:
            return self.app.mix[0]
        u = rng.random()
        for t, c in zip(self.app.mix, self._cum):
            if u < c:
                return t
        return self.app.mix[-1]

    def page_map(self, page: int) -> tuple:
        """(data file, sector in it) of a page: data files striped in 1 MiB units."""
        unit, within = divmod(page, self.per_unit)
        nfiles = len(self.app.data_files)
        f, row = unit % nfiles, unit // nfiles
        return f, (row * self.per_unit + within) * self.block_sectors


def start(ctx, app: OltpConfig) -> OltpStats:
    """The database's processes; its statistics."""
    return Database(ctx, app).stats


def lines(name: str, f: dict, fmt) -> list:
    """The terminal table of one run (``fmt(x, width, percentile=False)`` formats a
    figure)."""
    if not f.get("measured", True):
        return [f"{name} ({f['engine']} OLTP, {f['sessions']} sessions): nothing measured: "
                f"the run ended at {f['window_s'][1]:g} s, before warmup ({f['window_s'][0]:g}"
                f" s)"]
    r = f["response_ms"]
    redo = f["redo"]
    out = [f"{name} ({f['engine']} OLTP, {f['sessions']} sessions): "
           f"{f['tps']:.1f} transactions/s, {f['tpm']:.0f} per minute; "
           f"from {f['window_s'][0]:g} s to {f['window_s'][1]:g} s",
           f"{'transaction':>14}{'count':>9}{'tps':>10} | {'response (ms): mean':>20}"
           f"{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}"]
    rows = list(f["by_transaction"].items())
    if len(rows) > 1:
        rows.append(("all", {"count": f["transactions"], "tps": f["tps"], "response_ms": r}))
    for tname, t in rows:
        s = t["response_ms"]
        out.append(f"{tname:>14}{t['count']:>9}{fmt(t['tps'], 10)} | {fmt(s['mean'], 20)}"
                   + "".join(fmt(s[p], 9, percentile=True) for p in ("p50", "p95", "p99"))
                   + f"{fmt(s['max'], 9)}")
    out.append(f"{'wait (as AWR names it)':>28}{'waits':>10}{'avg (ms)':>10}{'% DB time':>11}")
    out.append(f"{'CPU':>28}{'':>10}{'':>10}{f['cpu']['pct_db_time']:>11.1f}")
    for wname, w in sorted(f["waits"].items(), key=lambda kv: -kv[1]["time_s"]):
        if w["waits"]:
            out.append(f"{wname:>28}{w['waits']:>10}{fmt(w['avg_ms'], 10)}"
                       f"{w['pct_db_time']:>11.1f}")
    bp = f["buffer_pool"]
    per_txn = f.get("user_calls_per_transaction")
    out.append(f"user calls/s {f['user_calls_per_s']:.1f}"
               + ("" if per_txn is None else f" ({per_txn:.1f} per transaction)") + ", "
               f"physical reads/s {f['physical_reads_per_s']:.1f}, physical writes/s "
               f"{f['physical_writes_per_s']:.1f}, buffer pool hit ratio "
               f"{100 * bp['hit_ratio']:.1f} %, {bp['unfinished']} changes not yet written "
               f"at the end")
    out.append(f"redo: {redo['writes_per_s']:.1f} writes/s, {redo['mb_per_s']:.3f} MB/s, "
               f"{redo['commits_per_write']:.2f} commits per write, {redo['write_ms']:.3f} ms "
               f"per write, {redo['stall_s']:.3f} s stalled for checkpoints; checkpoints "
               f"{f['checkpoints']['requested']} asked, {f['checkpoints']['completed']} done")
    if "open_loop" in f:
        o = f["open_loop"]
        w = o["session_wait_ms"]["mean"]
        out.append(f"open loop: {o['rate']:g} transactions/s offered, {o['arrivals_per_s']:.1f}"
                   f" arrived/s, {o['tps']:.1f} completed/s: rate "
                   f"{'held' if o['held'] else 'NOT held'}; {o['waited']} waited for a "
                   f"session" + ("" if w is None else f" ({fmt(w, 0).strip()} ms mean)") +
                   f", {o['mean_in_system']:.2f} in the system on average, "
                   f"{o['waiting_at_end']} waiting at the end, {o['dropped']} dropped")
    if "postgresql" in f:
        from blksim.apps.postgres import lines as pg_lines
        out += pg_lines(f["postgresql"])
    return out


def compare_rows(name: str, runs: list) -> tuple:
    """``blksim compare``'s rows: (heading, [(label, a value per run), ...]); a run that
    measured nothing has no figures (None: "-" in the table), never 0."""
    model = next((r for r in runs if r.get("measured", True)), None)
    if model is None:
        return f"{name} ({runs[0]['engine']} OLTP): nothing measured in any run", []
    runs = [r if r.get("measured", True) else _unmeasured(model) for r in runs]
    rows = [("  transactions/s", [r["tps"] for r in runs]),
            ("  transactions/min", [r["tpm"] for r in runs]),
            ("  response mean (ms)", [r["response_ms"]["mean"] for r in runs]),
            ("  response p95 (ms)", [r["response_ms"]["p95"] for r in runs]),
            ("  response p99 (ms)", [r["response_ms"]["p99"] for r in runs]),
            ("  log file sync (% DB time)",
             [r["waits"]["log file sync"]["pct_db_time"] for r in runs]),
            ("  db file seq. read (% DB time)",
             [r["waits"]["db file sequential read"]["pct_db_time"] for r in runs]),
            ("  db file seq. read avg (ms)",
             [r["waits"]["db file sequential read"]["avg_ms"] for r in runs]),
            ("  user calls/s", [r["user_calls_per_s"] for r in runs]),
            ("  physical reads/s", [r["physical_reads_per_s"] for r in runs]),
            ("  physical writes/s", [r["physical_writes_per_s"] for r in runs]),
            ("  commits per redo write", [r["redo"]["commits_per_write"] for r in runs])]
    if "open_loop" in model:
        rows += [("  open loop: arrivals/s", [r["open_loop"]["arrivals_per_s"] for r in runs]),
                 ("  open loop: session wait mean (ms)",
                  [r["open_loop"]["session_wait_ms"]["mean"] for r in runs]),
                 ("  open loop: mean in system", [r["open_loop"]["mean_in_system"]
                                                  for r in runs])]
    if "postgresql" in model:
        rows += [("  WAL generated (MB/s)", [r["postgresql"]["wal_generated_mb_per_s"]
                                             for r in runs]),
                 ("  checkpoint write phase (s)",
                  [r["postgresql"]["checkpoint_write_s_mean"] for r in runs]),
                 ("  checkpoint sync phase (s)",
                  [r["postgresql"]["checkpoint_sync_s_mean"] for r in runs])]
    if len(model["by_transaction"]) > 1:
        for tname in model["by_transaction"]:
            rows.append((f"  {tname} response p95 (ms)",
                         [r["by_transaction"][tname]["response_ms"]["p95"] for r in runs]))
    return f"{name} ({model['engine']} OLTP, {model['sessions']} sessions)", rows


def _unmeasured(model):
    """``model``'s figures with every number None (a run that measured nothing)."""
    if isinstance(model, dict):
        return {k: _unmeasured(v) for k, v in model.items()}
    if isinstance(model, bool) or not isinstance(model, (int, float)):
        return model
    return None


register(AppModel(type="oltp", module=__name__, keys=KEYS, parse=parse, start=start,
                  lines=lines, compare_rows=compare_rows))
