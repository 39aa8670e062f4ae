"""Application models that drive the host's I/O path and report the application's figure.

**File server** (``type = "fileserver"``, in the manner of NetBench): clients each
repeatedly open a file of the server's file set (chosen uniformly), read it whole in
``read_size`` calls one after another, and think for ``think_time``. The client count
ramps: ``clients_start`` clients from the start, ``clients_step`` more at every
``step_time``, up to ``clients_end``. An operation (a whole file read) taking longer than
``timeout`` is a client error, as a client that gives up would see it. The figures are
per step: operations/s, MB/s, errors and the operations' latency.

The file set is ``files`` files on ``device``, with sizes drawn from ``file_sizes``
(sizes and weights, as fio's bssplit) by the run's seed, laid out one after another
after the device's other files. Each open reads through the page cache (or with
``direct = 1``), with a read-ahead state of its own, as a new open file has.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from blksim.apps import AppProcess, shares, size_value, weight_value
from blksim.apps.registry import AppModel, register
from blksim.common.config_values import ConfigError, int_value, time_value
from blksim.common.histogram import StreamingHistogram
from blksim.common.histogram import latency_ms
from blksim.block.request import Bio

MAX_FILES = 20000      # blksim's choice: its files are [[file]] tables of the run, laid
                       # out and checked before it starts (20,000 in under a second;
                       # 12,000 in experiments/fileserver-ramp)
MAX_CLIENTS = 10000    # blksim's choice: each client is a process with figures of its own

KEYS = {
    "name": "a label for reports (default: the type)",
    "device": "where its files live: a disk, partition or volume, e.g. \"/dev/sdb1\"",
    "files": "files in the file set (default 1000, at most 20000)",
    "file_sizes": "file sizes and their weights, [[\"16k\", 50], [\"256k\", 50]] "
                  "(default [[\"64k\", 100]])",
    "read_size": "bytes a read call asks for (default 64k)",
    "think_time": "a client's pause between files (default 0)",
    "timeout": "an operation longer than this is a client error (default 1s)",
    "clients_start": "clients from the start (default 1)",
    "clients_step": "clients added at every step (default 1; 0 only when clients_end = "
                    "clients_start)",
    "clients_end": "the most clients (default clients_start, at most 10000)",
    "step_time": "the length of a step of the ramp (default 30s)",
    "direct": "1: O_DIRECT reads; 0: through the page cache (default)",
}


@dataclass
class FileServerConfig:
    """A file server application, validated."""

    type = "fileserver"
    name: str
    device: str
    files: tuple            # the paths of its files, in order
    read_size: int          # bytes
    think_time: float
    timeout: float
    clients_start: int
    clients_step: int
    clients_end: int
    step_time: float
    direct: bool
    table: dict

    def horizon(self) -> float:
        """When the run ends without a ``[run] duration``: the ramp's last step's end."""
        return self.steps * self.step_time

    @property
    def steps(self) -> int:
        """Steps of the ramp."""
        if self.clients_step == 0:
            return 1
        return (self.clients_end - self.clients_start) // self.clients_step + 1


def parse(table: dict, where: str, host, seed: str) -> FileServerConfig:
    """A ``type = "fileserver"`` table, checked against ``host`` (a
    `apps.HostContext`), its file set laid out by ``host.placer``."""
    placer = host.placer
    name = str(table.get("name", "fileserver"))
    device = placer.device(table.get("device"), where)
    count = int_value(table, "files", where, 1000, 1, MAX_FILES)
    spec = table.get("file_sizes", [["64k", 100]])
    if not isinstance(spec, list) or not spec:
        raise ConfigError(f"{where}: file_sizes expected [[size, weight], ...], found "
                          f"{spec!r}")
    choices, weights = [], []
    for k, pair in enumerate(spec):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ConfigError(f"{where}: file_sizes #{k + 1} expected [size, weight > 0], "
                              f"found {pair!r}")
        weights.append(weight_value(pair[1], f"{where}: file_sizes #{k + 1}", "weight"))
        choices.append(size_value({"file_sizes": pair[0]}, "file_sizes", f"{where}: "
                                  f"file_sizes #{k + 1}", None, 4096, 4096))
    read_size = size_value(table, "read_size", where, "64k", 512, 512)
    start, step, end, step_time = _ramp(table, where, host)
    timeout = time_value(table, "timeout", where, 1.0)
    if not timeout > 0:
        raise ConfigError(f"{where}: timeout must be positive, found {table['timeout']!r}")
    direct = table.get("direct", 0)
    if direct not in (0, 1, True, False) or isinstance(direct, float):
        raise ConfigError(f"{where}: direct expected 1 or 0, found {direct!r}")
    rng = random.Random(seed)
    weights = shares(weights)
    sizes = [rng.choices(choices, weights)[0] for _ in range(count)]
    if placer.ends.get(device, 0) + sum(sizes) // 512 > placer.sizes[device]:
        raise ConfigError(f"{where}: its {count} files need {sum(sizes)} bytes (files, "
                          f"file_sizes); {device} has "
                          f"{(placer.sizes[device] - placer.ends.get(device, 0)) * 512} "
                          f"after its other files")
    paths = tuple(placer.place(f"/srv/{name}/f{n:06d}", device, nbytes, where)
                  for n, nbytes in enumerate(sizes))
    return FileServerConfig(name, device, paths, read_size,
                            time_value(table, "think_time", where, 0.0), timeout,
                            start, step, end, step_time, bool(direct), dict(table))


def _ramp(table: dict, where: str, host) -> tuple:
    """(clients_start, clients_step, clients_end, step_time): a ramp whose every step
    starts before the run ends (a step that never ran has no figure: it is an error
    here, not a row of zeros in the results)."""
    start = int_value(table, "clients_start", where, 1, 1, MAX_CLIENTS)
    end = int_value(table, "clients_end", where, start, start, MAX_CLIENTS)
    step = int_value(table, "clients_step", where, 1, 0, MAX_CLIENTS)
    if step == 0 and end > start:
        raise ConfigError(f"{where}: clients_step = 0 never reaches clients_end = {end} "
                          f"from clients_start = {start}: give clients_step >= 1, or "
                          f"clients_end = clients_start for a constant load")
    step_time = time_value(table, "step_time", where, 30.0)
    if not step_time > 0:
        raise ConfigError(f"{where}: step_time must be positive, found "
                          f"{table['step_time']!r}")
    steps = 1 if step == 0 else (end - start) // step + 1
    if host.duration is not None and (steps - 1) * step_time >= host.duration:
        ran = min(steps, math.ceil(host.duration / step_time))
        raise ConfigError(f"{where}: the ramp has {steps} steps of {step_time:g} s, but the "
                          f"run ends at {host.duration:g} s ([run] duration): only {ran} "
                          f"would run; lengthen the run to more than "
                          f"{(steps - 1) * step_time:g} s, or shorten step_time or the ramp")
    return start, step, end, step_time


class FileServerStats:
    """Per step of the ramp: operations, bytes, errors, latency (s)."""

    def __init__(self, app: FileServerConfig) -> None:
        self.app = app
        self.ops = [0] * app.steps
        self.bytes = [0] * app.steps
        self.errors = [0] * app.steps
        self.lat = [StreamingHistogram() for _ in range(app.steps)]

    def record(self, start: float, end: float, nbytes: int) -> None:
        """An operation that completed at ``end``."""
        step = min(int(end // self.app.step_time), self.app.steps - 1)
        self.ops[step] += 1
        self.bytes[step] += nbytes
        self.lat[step].add(end - start)
        if end - start > self.app.timeout:
            self.errors[step] += 1

    def latency_histogram(self) -> tuple:
        """("operations", the latency of every operation of every step in one histogram
        (s)): what an experiment's application-latency CDF draws."""
        total = StreamingHistogram()
        for h in self.lat:
            total.merge(h)
        return "operations", total

    def figures(self, end_of_run: float) -> dict:
        """The application's figures, per step."""
        app = self.app
        steps = []
        for k in range(app.steps):
            t0 = k * app.step_time
            t1 = min((k + 1) * app.step_time, end_of_run) if k < app.steps - 1 else end_of_run
            span = max(t1 - t0, 1e-12)
            s = self.lat[k].summary()
            steps.append({
                "clients": min(app.clients_start + k * app.clients_step, app.clients_end),
                "start_s": round(t0, 9), "end_s": round(t1, 9), "ops": self.ops[k],
                "ops_per_s": round(self.ops[k] / span, 6),
                "mb_per_s": round(self.bytes[k] / 1e6 / span, 6), "errors": self.errors[k],
                "errors_pct": round(100.0 * self.errors[k] / self.ops[k], 6) if self.ops[k]
                else 0.0,
                "lat_ms": latency_ms(s, ("mean", "p50", "p95", "p99", "max"))})
        return {"type": "fileserver", "timeout_ms": round(app.timeout * 1e3, 6),
                "steps": steps}


class FileServerClient(AppProcess):
    """One client of a file server: open a file, read it whole, think, again."""

    def __init__(self, clock, ids, pid: int, name: str, app: FileServerConfig, stats,
                 open_file, rng: random.Random, start: float, horizon: float | None) -> None:
        super().__init__(pid, name, [])
        self.clock = clock
        self.ids = ids
        self.app = app
        self.stats = stats
        self.open_file = open_file          # path -> a new hostio.fileio.OpenFile
        self.rng = rng
        self.start_at = start
        self.horizon = horizon
        self.issued = 0
        self.outstanding = 0
        self._bios = 0
        self._op_start = 0.0
        self._at = 0
        self._size = 0

    def start(self) -> None:
        """Begin at the client's step."""
        self.clock.call_at(self.start_at, self._next_file)

    def _next_file(self, _ev=None) -> None:
        now = self.clock.now
        if self.horizon is not None and now >= self.horizon:
            return
        if self.queue is not None:
            self._bios += self.queue.bios_issued
        path = self.app.files[self.rng.randrange(len(self.app.files))]
        self.queue = self.open_file(path)
        self._size = self.queue.capacity
        self._at = 0
        self._op_start = now
        self._read()

    def _read(self) -> None:
        n = min(self.app.read_size // 512, self._size - self._at)
        call = Bio(self.ids.take(), self._at, n, False, True, self.pid, 0, self._done)
        self._at += n
        self.issued += 1
        self.outstanding += 1
        self.queue.submit_bio(call)

    def _done(self, _call) -> None:
        self.outstanding -= 1
        if self._at < self._size:
            self._read()
            return
        now = self.clock.now
        self.stats.record(self._op_start, now, self._size * 512)
        self.clock.call_at(now + self.app.think_time, self._next_file)

    def issued_by_pid(self) -> dict:
        """Bios submitted so far (in every file it opened)."""
        current = self.queue.bios_issued if self.queue is not None else 0
        return {self.pid: self._bios + current}


def start(ctx, app: FileServerConfig) -> FileServerStats:
    """The server's clients, each starting at its step of the ramp; its statistics."""
    stats = FileServerStats(app)
    end = app.horizon() if ctx.horizon is None else ctx.horizon
    for c in range(app.clients_end):
        step = 0 if c < app.clients_start else \
            1 + (c - app.clients_start) // max(app.clients_step, 1)
        name = f"{app.name}.{c}"
        pid = ctx.new_process(name)
        ctx.add(FileServerClient(ctx.clock, ctx.ids, pid, name, app, stats,
                                 lambda path: ctx.open_file(path, app.direct),
                                 random.Random(f"{ctx.seed}/{app.name}/{c}"),
                                 step * app.step_time, end))
    return stats


def lines(name: str, figures: dict, fmt) -> list:
    """The terminal table of one run: a row per step of the ramp (``fmt(x, width,
    percentile=False)`` formats a figure)."""
    out = [f"{name} (file server): client errors are operations over "
           f"{figures['timeout_ms']:g} ms",
           f"{'clients':>8}{'from (s)':>10}{'ops/s':>10}{'MB/s':>10}{'errors':>8}"
           f"{'errors %':>10} | {'op (ms): mean':>14}{'p99':>9}{'max':>9}"]
    for st in figures["steps"]:
        lat = st["lat_ms"]
        out.append(f"{st['clients']:>8}{st['start_s']:>10.1f}{fmt(st['ops_per_s'], 10)}"
                   f"{fmt(st['mb_per_s'], 10)}{st['errors']:>8}{st['errors_pct']:>10.2f}"
                   f" | {fmt(lat['mean'], 14)}{fmt(lat['p99'], 9, percentile=True)}"
                   f"{fmt(lat['max'], 9)}")
    return out


def compare_rows(name: str, runs: list) -> tuple:
    """``blksim compare``'s rows: (heading, [(label, a value per run), ...])."""
    rows = []
    for k, st in enumerate(runs[0]["steps"]):
        per = [r["steps"][k] for r in runs]
        rows.append((f"  {st['clients']} clients ops/s", [p["ops_per_s"] for p in per]))
        rows.append((f"  {st['clients']} clients errors %", [p["errors_pct"] for p in per]))
        rows.append((f"  {st['clients']} clients op mean (ms)",
                     [p["lat_ms"]["mean"] for p in per]))
    return (f"{name} (file server; errors: operations over {runs[0]['timeout_ms']:g} ms)",
            rows)


register(AppModel(type="fileserver", module=__name__, keys=KEYS, parse=parse, start=start,
                  lines=lines, compare_rows=compare_rows))
