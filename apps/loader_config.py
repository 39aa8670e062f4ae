"""The ``[[app]] type = "loader"`` table: a bulk load of tables from export files into a
database's data volumes, with savepoints, index builds and statistics."""

from __future__ import annotations

from dataclasses import dataclass, field

from blksim.apps import size_value
from blksim.common.config_values import ConfigError, int_value, time_value

KEYS = {
    "name": "a label for reports (default loader)",
    "tables": "the tables to load: [[size, count], ...], e.g. [[\"2g\", 4], [\"100m\", 20]] "
              "(sizes of the tables' data; at most 10000 tables)",
    "scale": "the fraction of that load to run: every table's size (and tables_in_files) "
             "times this, and with create also volume_size and log_size (default 1)",
    "order": "the order the queue hands tables out: given (default) or largest_first",
    "tables_in_files": "the tables the export files hold in all, shared among the files "
                       "by size; a savepoint follows each (default: a table per file)",
    "export_ratio": "bytes of export file per byte of table data (default 1.0)",
    "data_volumes": "data volumes on each data device (default 1)",
    "volume_size": "the size of each data volume (default: what the load needs)",
    "loaders": "loader processes, each loading one table at a time (default 4)",
    "export_device": "the device of the export files (one file per table, as large as "
                     "the table)",
    "data_device": "the data volume, or a list of data volumes (pages in 1 MiB clusters "
                   "across them in turn)",
    "log_device": "the device of the log volume (default: the first data volume)",
    "page_size": "bytes per database page (default 8k)",
    "read_size": "bytes an export file read asks for (default 256k)",
    "cpu_per_mb": "CPU time of a loader per MB (10^6 bytes) inserted or indexed "
                  "(default 10ms, blksim's choice: no published figure, docs/apps.md)",
    "row_size": "bytes of table data per row, to count rows (default 200)",
    "cpu_per_row": "CPU time of a loader per row inserted: the database's own work per "
                   "row (the insert, its log record, the row's checks), besides "
                   "cpu_per_mb's conversion (default 0: no published figure; measure it, "
                   "docs/apps.md)",
    "cpu_per_table": "CPU time of a loader per table, before its first row (opening it, "
                     "its catalog work) (default 0: no published figure)",
    "index_cpu_per_row": "CPU time of a loader per row of a table whose index it builds "
                         "(sorting the keys, building the tree) (default 0: no published "
                         "figure)",
    "redo_ratio": "bytes of log per byte inserted (default 1.0)",
    "log_buffer": "the log queue a loader appends to; a loader waits while it is full "
                  "(default 1m)",
    "log_io_size": "the most bytes one log write carries (default 64k)",
    "log_size": "the log volume's size; it is written round and round (default 1g)",
    "data_cache": "the data cache: when this much is changed and not yet written, a "
                  "savepoint runs and the loaders wait for it (default 1g)",
    "savepoint_writers": "writer threads per data volume during a savepoint (default 2)",
    "savepoint_io_size": "the most bytes one savepoint write carries (default 512k)",
    "index_ratio": "an index's size as a fraction of its table's (default 0.1; 0: none)",
    "stats_sample": "the fraction of each table read to gather statistics (default 0.2; "
                    "0: none)",
    "direct": "1 (default): data and log volumes opened with O_DIRECT; 0: buffered",
    "create": "how the data and log volumes are made before the load, all in parallel "
              "(a phase of its own): none (default: they exist), zeros (written whole by "
              "create_threads threads a volume) or fallocate (posix_fallocate: extents "
              "only where the filesystem and kernel have fallocate, else glibc's "
              "emulation writes every block)",
    "create_threads": "create = zeros: threads writing each volume, each its own "
                      "contiguous part (default 2)",
    "create_io_size": "create = zeros: bytes per write call (default 1m)",
    "stats_rows": "rows of each table the statistics read (MaxDB's SAMPLE default: "
                  "20000; times scale); instead of stats_sample",
    "stats_catalog": "1: each table's statistics change a catalog page and commit (a log "
                     "write waited for), and a savepoint ends the phase; 0 (default): the "
                     "sample is read only",
}
CREATE = ("none", "zeros", "fallocate")
FALLOCATE_KERNEL = "2.6.23"   # sys_fallocate came with Linux 2.6.23 (fs/open.c)
EMULATED_WRITE = 4096         # glibc's emulation: a byte per f_bsize (4 KiB blocks)
CLUSTER_BYTES = 1 << 20
MAX_TABLES = 10000     # blksim's choice: each table has an export file, a [[file]] table
MAX_PROCESSES = 10000  # blksim's choice, as OLTP sessions: a process has figures of its own
MAX_OPENS = 100000     # blksim's choice: a loader opens every data volume


@dataclass
class LoaderConfig:
    """A bulk load, validated."""

    type = "loader"

    name: str
    tables: tuple              # bytes of each export file's data, in queue order (scaled)
    tables_per_file: tuple     # tables in each export file (a savepoint after each)
    export_ratio: float
    loaders: int
    page_size: int
    read_size: int
    cpu_per_mb: float
    row_size: int
    cpu_per_row: float
    cpu_per_table: float
    index_cpu_per_row: float
    redo_ratio: float
    log_buffer: int
    log_io_size: int
    log_size: int
    cache_pages: int
    savepoint_writers: int
    savepoint_io_pages: int
    index_ratio: float
    stats_sample: float
    direct: bool
    export_files: tuple        # a path per export file
    data_files: tuple          # a path per data volume (devices in turn, then volumes)
    log_file: str
    table: dict = field(default_factory=dict)
    volume_size: int = 0       # bytes of each data volume
    create: str = "none"       # how the volumes are made (CREATE)
    create_threads: int = 2
    create_io_size: int = 1 << 20
    native_fallocate: tuple = ()   # per volume (data files, then the log): fallocate(2)
    stats_rows: int | None = None  # rows sampled per table (instead of stats_sample)
    stats_catalog: bool = False

    @property
    def volumes(self) -> tuple:
        """The volumes the creation phase makes: the data volumes, then the log."""
        return self.data_files + (self.log_file,)

    def stats_fraction(self, t: int) -> float:
        """The fraction of export file ``t``'s data its tables' statistics read:
        ``stats_sample``, or ``stats_rows`` rows of each of its tables."""
        if self.stats_rows is None:
            return self.stats_sample
        rows = max(1, self.tables[t] // self.row_size)
        return min(1.0, self.stats_rows * self.tables_per_file[t] / rows)

    @property
    def files(self) -> tuple:
        """Every file of the load."""
        return self.export_files + self.data_files + (self.log_file,)

    def horizon(self) -> None:
        """A load runs until it is done."""
        return None


def index_pages(pages: int, ratio: float) -> int:
    """Pages of the index of a table of ``pages`` pages."""
    import math
    return math.ceil(pages * ratio)


def export_bytes(table_bytes: int, ratio: float) -> int:
    """The size of the export file of ``table_bytes`` of data (whole 4 KiB blocks)."""
    return max(4096, -(-round(table_bytes * ratio) // 4096) * 4096)


def _share(count: int, sizes: list) -> tuple:
    """``count`` tables shared among files of ``sizes`` in proportion (at least one each;
    the largest remainders take the rest)."""
    total = sum(sizes)
    exact = [count * s / total for s in sizes]
    out = [max(1, int(e)) for e in exact]
    left = count - sum(out)
    for k in sorted(range(len(sizes)), key=lambda k: int(exact[k]) - exact[k])[:max(0, left)]:
        out[k] += 1
    return tuple(out)


def _fraction(table: dict, key: str, where: str, default: float, lo: float, hi: float,
              lo_open: bool = False) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (lo < value if lo_open else lo <= value) or value > hi:
        bound = "(" if lo_open else "["
        raise ConfigError(f"{where}: {key} expected a number in {bound}{lo:g}, {hi:g}], "
                          f"found {value!r}")
    return float(value)


def _tables(table: dict, where: str, page: int, scale: float) -> list:
    """The bytes of each table to load, in the order given; their count is checked
    before the list is built."""
    spec = table.get("tables")
    if not isinstance(spec, list) or not spec:
        raise ConfigError(f"{where}: tables expected [[size, count], ...], found {spec!r}")
    entries, total = [], 0
    for k, pair in enumerate(spec):
        if not isinstance(pair, list) or len(pair) != 2 or isinstance(pair[1], bool) or \
                not isinstance(pair[1], int) or not 1 <= pair[1] <= MAX_TABLES:
            raise ConfigError(f"{where}: tables #{k + 1} expected [size, count], count from 1 "
                              f"to {MAX_TABLES}, found {pair!r}")
        total += pair[1]
        if total > MAX_TABLES:
            raise ConfigError(f"{where}: tables: {total} tables by entry #{k + 1}; a load has "
                              f"at most {MAX_TABLES} (an export file each)")
        nbytes = size_value({"tables": pair[0]}, "tables", f"{where}: tables #{k + 1}", None)
        entries.append((max(page, round(nbytes * scale / page) * page), pair[1]))
    return [size for size, count in entries for _ in range(count)]


def _check_processes(volumes: int, loaders: int, writers: int, where: str) -> None:
    """The load's processes (a writer thread per volume and savepoint_writers, and the
    loaders) and the loaders' opens of the data volumes (each loader opens every one),
    checked before they are built."""
    processes = volumes * writers + loaders + 1
    if processes > MAX_PROCESSES:
        raise ConfigError(f"{where}: savepoint_writers = {writers} on each of {volumes} data "
                          f"volumes (data_volumes x data devices) and loaders = {loaders} "
                          f"make {processes} processes; a load has at most {MAX_PROCESSES}")
    if volumes * loaders > MAX_OPENS:
        raise ConfigError(f"{where}: loaders = {loaders} each opening {volumes} data volumes "
                          f"make {volumes * loaders} open files; a load has at most "
                          f"{MAX_OPENS}")


def parse(table: dict, where: str, host, seed: str) -> LoaderConfig:
    """A ``type = "loader"`` table, checked against ``host`` (a `apps.HostContext`),
    its files laid out by ``host.placer``."""
    placer = host.placer
    name = str(table.get("name", "loader"))
    page = size_value(table, "page_size", where, "8k", 4096, 4096)
    scale = _fraction(table, "scale", where, 1.0, 0.0, 1000.0, lo_open=True)
    sizes = _tables(table, where, page, scale)
    cache = size_value(table, "data_cache", where, "1g", page, page)
    host.reserve(cache, "data_cache", table.get("data_cache", "1g"), where)
    order = table.get("order", "given")
    if order not in ("given", "largest_first"):
        raise ConfigError(f"{where}: order expected given or largest_first, found {order!r}")
    if order == "largest_first":
        sizes.sort(reverse=True)
    in_files = int_value(table, "tables_in_files", where, len(sizes), len(sizes), 10 ** 8)
    in_files = max(len(sizes), round(in_files * min(scale, 1.0))) \
        if "tables_in_files" in table else len(sizes)
    per_file = _share(in_files, sizes)
    export_ratio = _fraction(table, "export_ratio", where, 1.0, 0.0, 100.0, lo_open=True)
    devices = placer.device_list(table.get("data_device"), where, "data_device")
    nvol = int_value(table, "data_volumes", where, 1, 1, 4096)
    loaders = int_value(table, "loaders", where, 4, 1, 1024)
    writers = int_value(table, "savepoint_writers", where, 2, 1, 256)
    _check_processes(nvol * len(devices), loaders, writers, where)
    volumes = [d for _ in range(nvol) for d in devices]     # clusters alternate devices
    export = placer.device(table.get("export_device"), where, "export_device")
    log = placer.device(table.get("log_device", f"/dev/{volumes[0]}"), where, "log_device")
    index_ratio = _fraction(table, "index_ratio", where, 0.1, 0.0, 10.0)
    per_cluster = max(1, CLUSTER_BYTES // page)
    clusters = sum(-(-(s // page) // per_cluster) + -(-index_pages(s // page, index_ratio)
                                                      // per_cluster) for s in sizes)
    if _flag(table, "stats_catalog", where):
        clusters += -(-sum(per_file) // per_cluster)  # a catalog page per table
    volume_bytes = -(-clusters // len(volumes)) * per_cluster * page
    create = table.get("create", "none")
    if create not in CREATE:
        raise ConfigError(f"{where}: create expected one of {', '.join(CREATE)}, found "
                          f"{create!r}")
    # with a creation phase, scale makes the volumes the same fraction of their size
    vscale = scale if create != "none" else 1.0
    if "volume_size" in table:
        given = size_value(table, "volume_size", where, None, CLUSTER_BYTES, CLUSTER_BYTES)
        if given < volume_bytes and vscale == 1.0:
            raise ConfigError(f"{where}: volume_size {table['volume_size']!r} is too small: "
                              f"the load needs {volume_bytes} bytes on each of its "
                              f"{len(volumes)} data volumes")
        # scaled, a volume still holds what the scaled load needs
        volume_bytes = max(volume_bytes, _mib(given * vscale))
    threads = int_value(table, "create_threads", where, 2, 1, 256)
    create_io = size_value(table, "create_io_size", where, "1m", 4096, 4096)
    if create != "none":
        makers = (nvol * len(devices) + 1) * (threads if create == "zeros" else 1)
        if makers + nvol * len(devices) * writers + loaders + 1 > MAX_PROCESSES:
            raise ConfigError(f"{where}: create_threads = {threads}: the volumes' creators "
                              f"and the load's processes make more than {MAX_PROCESSES}")
    if "stats_rows" in table and "stats_sample" in table:
        raise ConfigError(f"{where}: stats_rows: give stats_rows or stats_sample, not both")
    stem = f"/db/{name}"
    spec_text = repr(table["tables"]) if len(repr(table["tables"])) <= 80 else \
        repr(table["tables"])[:77] + "..."
    export_files = tuple(placer.place(f"/export/{name}/t{k:04d}.dat", export,
                                      export_bytes(s, export_ratio),
                                      f"{where}: tables = {spec_text}")
                         for k, s in enumerate(sizes))
    log_size = _mib(size_value(table, "log_size", where, "1g", 1 << 20, 1 << 20) * vscale)
    native = tuple(_native_fallocate(placer.layer(d)) for d in (*volumes, log))
    written = [_written(create, threads, create_io, n, nbytes)
               for n, nbytes in zip(native, [volume_bytes] * len(volumes) + [log_size])]
    data_files = tuple(placer.place(f"{stem}/data{k + 1:02d}", v, volume_bytes,
                                    f"{where}: tables = {spec_text} ({len(volumes)} "
                                    f"data volumes)", *written[k])
                       for k, v in enumerate(volumes))
    log_file = placer.place(f"{stem}/log", log, log_size,
                            f"{where}: log_size = {table.get('log_size', '1g')!r}",
                            *written[-1])
    log_io = size_value(table, "log_io_size", where, "64k", 4096, 4096)
    direct = table.get("direct", 1)
    if direct not in (0, 1, True, False) or isinstance(direct, float):
        raise ConfigError(f"{where}: direct expected 1 or 0, found {direct!r}")
    return LoaderConfig(
        name=name, tables=tuple(sizes), tables_per_file=per_file, export_ratio=export_ratio,
        loaders=loaders, page_size=page,
        read_size=size_value(table, "read_size", where, "256k", 4096, 4096),
        cpu_per_mb=time_value(table, "cpu_per_mb", where, 0.010),
        row_size=int_value(table, "row_size", where, 200, 1, 1 << 30),
        cpu_per_row=time_value(table, "cpu_per_row", where, 0.0),
        cpu_per_table=time_value(table, "cpu_per_table", where, 0.0),
        index_cpu_per_row=time_value(table, "index_cpu_per_row", where, 0.0),
        redo_ratio=_fraction(table, "redo_ratio", where, 1.0, 0.0, 100.0),
        log_buffer=size_value(table, "log_buffer", where, "1m", 4096, log_io),
        log_io_size=log_io, log_size=log_size,
        cache_pages=cache // page,
        savepoint_writers=writers,
        savepoint_io_pages=size_value(table, "savepoint_io_size", where, "512k", page, page)
        // page,
        index_ratio=index_ratio,
        stats_sample=_fraction(table, "stats_sample", where, 0.2, 0.0, 1.0),
        direct=bool(direct), export_files=export_files, data_files=data_files,
        log_file=log_file, table=dict(table), volume_size=volume_bytes, create=create, create_threads=threads,
        create_io_size=create_io, native_fallocate=native,
        stats_rows=_scaled_rows(int_value(table, "stats_rows", where, None, 1, 10 ** 12),
                                scale),
        stats_catalog=_flag(table, "stats_catalog", where))


def _scaled_rows(rows: int | None, scale: float) -> int | None:
    """``stats_rows`` times ``scale`` (at least one row): a scaled load samples the same
    fraction of its smaller tables."""
    return None if rows is None else max(1, round(rows * scale))


def _mib(nbytes: float) -> int:
    """``nbytes`` in whole MiB, rounded up, at least one."""
    return max(1, -(-int(nbytes) // (1 << 20))) << 20


def _flag(table: dict, key: str, where: str) -> bool:
    value = table.get(key, 0)
    if value not in (0, 1, True, False) or isinstance(value, float):
        raise ConfigError(f"{where}: {key} expected 1 or 0, found {value!r}")
    return bool(value)


def _native_fallocate(layer) -> bool:
    """Whether posix_fallocate on this filesystem is the fallocate system call (the
    filesystem says ``fallocate = True``, on its class or for its kernel; a filesystem
    without the attribute has none; and the kernel has the call, 2.6.23 on), not
    glibc's emulation (sysdeps/posix/posix_fallocate.c)."""
    from blksim.block.elevator import kernel_version
    return layer is not None and bool(getattr(layer, "fallocate", False)) and \
        kernel_version(getattr(layer, "kernel", "2.6.18")) >= kernel_version(FALLOCATE_KERNEL)


def _written(create: str, threads: int, io_size: int, native: bool, nbytes: int) -> tuple:
    """(writers, write size) of a volume as the creation writes it, for the allocator
    (None: not created, placed as one writer writes it in 1 MiB calls, as before)."""
    if create == "zeros":
        return threads, io_size
    if create == "fallocate":
        # fallocate(2) allocates the whole range in one call; the emulation writes a
        # byte in every block, one after another from one thread
        return 1, (nbytes if native else EMULATED_WRITE)
    return 1, None
