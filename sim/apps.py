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

import random
from dataclasses import dataclass

from blksim.sim.config_values import ConfigError, check_keys, int_value, time_value
from blksim.sim.histogram import StreamingHistogram
from blksim.sim.request import Bio

APP_KEYS = {
    "type": "the application: fileserver",
    "name": "a label for reports (default: the type)",
    "device": "where its files live: a disk, partition or volume, e.g. \"/dev/sdb1\"",
    "files": "files in the file set (default 1000)",
    "file_sizes": "file sizes and their weights, [[\"16k\", 50], [\"256k\", 50]] "
                  "(default [[\"64k\", 100]])",
    "read_size": "bytes a read call asks for (default 64k)",
    "think_time": "a client's pause between files (default 0)",
    "timeout": "an operation longer than this is a client error (default 1s)",
    "clients_start": "clients from the start (default 1)",
    "clients_step": "clients added at every step (default 1)",
    "clients_end": "the most clients (default clients_start)",
    "step_time": "the length of a step of the ramp (default 30s)",
    "direct": "1: O_DIRECT reads; 0: through the page cache (default)",
}


@dataclass
class FileServerConfig:
    """A file server application, validated."""

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

    @property
    def steps(self) -> int:
        """Steps of the ramp."""
        if self.clients_step == 0:
            return 1
        return (self.clients_end - self.clients_start) // self.clients_step + 1


def parse_apps(tables, source: str, aliases: dict, sizes: dict, seed: int,
               ends: dict) -> tuple:
    """The ``[[app]]`` tables: (apps, the [[file]]-like tables of their files).
    ``ends``: where each device's last file ends (sectors)."""
    from blksim.traces.units import parse_size
    if not isinstance(tables, list):
        raise ConfigError(f"{source}: app must be an array of tables ([[app]])")
    apps, files = [], []
    for i, table in enumerate(tables):
        where = f"{source}: [[app]] #{i + 1}"
        check_keys(table, APP_KEYS, where)
        if table.get("type") != "fileserver":
            raise ConfigError(f"{where}: type expected fileserver, found {table.get('type')!r}")
        name = str(table.get("name", "fileserver"))
        device = aliases.get(table.get("device")) if isinstance(table.get("device"), str) \
            else None
        if device is None or device not in sizes or device.startswith("/") and \
                not device.startswith("/dev/"):
            raise ConfigError(f"{where}: device {table.get('device')!r} is not a disk, "
                              f"partition or volume of this run")
        count = int_value(table, "files", where, 1000, 1, 10 ** 6)
        spec = table.get("file_sizes", [["64k", 100]])
        if not isinstance(spec, list) or not spec:
            raise ConfigError(f"{where}: file_sizes expected [[size, weight], ...], found "
                              f"{spec!r}")
        choices, weights = [], []
        for k, pair in enumerate(spec):
            if not isinstance(pair, list) or len(pair) != 2 or isinstance(pair[1], bool) or \
                    not isinstance(pair[1], (int, float)) or pair[1] <= 0:
                raise ConfigError(f"{where}: file_sizes #{k + 1} expected [size, weight > 0], "
                                  f"found {pair!r}")
            try:
                nbytes = parse_size(pair[0], "file_sizes")
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            if nbytes < 4096 or nbytes % 4096:
                raise ConfigError(f"{where}: file_sizes #{k + 1}: expected a multiple of 4k, "
                                  f"found {pair[0]!r}")
            choices.append(nbytes)
            weights.append(float(pair[1]))
        try:
            read_size = parse_size(table.get("read_size", "64k"), "read_size")
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if read_size < 512 or read_size % 512:
            raise ConfigError(f"{where}: read_size expected a multiple of 512 bytes")
        start = int_value(table, "clients_start", where, 1, 1, 100000)
        step = int_value(table, "clients_step", where, 1, 0, 100000)
        end = int_value(table, "clients_end", where, start, start, 100000)
        step_time = time_value(table, "step_time", where, 30.0)
        timeout = time_value(table, "timeout", where, 1.0)
        if not step_time > 0 or not timeout > 0:
            raise ConfigError(f"{where}: step_time and timeout must be positive")
        direct = table.get("direct", 0)
        if direct not in (0, 1, True, False) or isinstance(direct, float):
            raise ConfigError(f"{where}: direct expected 1 or 0, found {direct!r}")
        rng = random.Random(f"{seed}/app/{i}")
        at = ends.get(device, 0)
        paths = []
        for n in range(count):
            nbytes = rng.choices(choices, weights)[0]
            path = f"/srv/{name}/f{n:06d}"
            files.append({"path": path, "device": f"/dev/{device}", "size": nbytes,
                          "offset": at * 512})
            at += nbytes // 512
            paths.append(path)
        if at > sizes[device]:
            raise ConfigError(f"{where}: its {count} files need {at * 512} bytes; {device} "
                              f"has {sizes[device] * 512} after its other files")
        ends[device] = at
        apps.append(FileServerConfig(name, device, tuple(paths), read_size,
                                     time_value(table, "think_time", where, 0.0), timeout,
                                     start, step, end, step_time, bool(direct), dict(table)))
    return apps, files


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
                "lat_ms": {key: round(s[key] * 1e3, 6)
                           for key in ("mean", "p50", "p95", "p99", "max")}})
        return {"type": "fileserver", "timeout_ms": round(app.timeout * 1e3, 6),
                "steps": steps}


class FileServerClient:
    """One client of a file server: open a file, read it whole, think, again."""

    kind = "app"

    def __init__(self, clock, ids, pid: int, name: str, app: FileServerConfig, stats,
                 open_file, rng: random.Random, start: float, horizon: float | None) -> None:
        self.clock = clock
        self.ids = ids
        self.pid = pid
        self.name = name
        self.app = app
        self.stats = stats
        self.open_file = open_file          # path -> a new sim.fileio.OpenFile
        self.rng = rng
        self.start_at = start
        self.horizon = horizon
        self.queue = None                   # the file open now
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

    def schedule_lag(self):
        """A closed-loop client keeps no schedule."""
        return None
