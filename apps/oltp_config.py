"""The ``[[app]] type = "oltp"`` table: the database's workload, its engine (Oracle or
InnoDB) with the engine's own parameter names, and the I/O each of its files gets.

The defaults and their sources are listed in docs/apps.md. The engine's I/O mode is turned
into an `IoModes` record here, so that the processes of `apps.oltp` only ask "is this
file open with O_DIRECT?", "does this write wait for the device?", "is an fsync due?".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blksim.apps import choice_value, size_value, weight_value
from blksim.apps.postgres_config import PG_KEYS, WAL_BLOCK
from blksim.common.config_values import ConfigError, check_keys, int_value, time_value

COMMON_KEYS = {
    "name": "a label for reports (default oltp)",
    "engine": "oracle (default), innodb or postgresql: the process structure, I/O modes "
              "and parameter names",
    "sessions": "client sessions, each a process (default 10, at most 10000)",
    "think_time": "a session's mean pause between transactions (default 0)",
    "think_distribution": "exponential (default, as TPC-C's think times) or fixed",
    "rate": "open loop: transactions per second arriving (Poisson, seeded), each served by "
            "the first idle session; 0 (default): the closed loop of sessions and think "
            "time",
    "cpu_time": "mean CPU time of a transaction (default 1.07ms: a 2007 TPC-C result's "
                "server CPU per transaction, docs/apps.md)",
    "cpu_distribution": "exponential (default) or fixed",
    "cpus": "processors the sessions share (default 0: a processor per session)",
    "reads": "pages a transaction reads (default 10)",
    "writes": "of those, pages it changes (default 2)",
    "redo_per_change": "bytes of redo a changed page generates (default 512)",
    "user_calls": "client calls a transaction makes, counted for user calls/s (default: "
                  "as client says)",
    "client": "how the client issues a transaction: procedures (default: one stored "
              "procedure call, as HammerDB's TPC-C kit) or statements (each SQL statement "
              "and the commit a call; TPC-C's five transactions get their profiles' counts)",
    "cpu_per_call": "server CPU time of each user call (parse, execute, the round trip's "
                    "server side), spent besides cpu_time (default 0: no published "
                    "figure splits a transaction's CPU by call; cpu_time holds it whole)",
    "mix": "transaction types: [[app.mix]] tables with name, weight, reads, writes, "
           "cpu_time (default: one type, \"txn\", from the keys above)",
    "access": "which pages: uniform, zipf (default) or hotset",
    "zipf_theta": "with access = zipf: the skew, 0 < theta < 1 (default 0.99)",
    "hot_set": "with access = hotset: [per cent of accesses, per cent of pages] "
               "(default [80, 20])",
    "data_device": "the device of the data files, or a list of devices (a data file on "
                   "each, striped in 1 MiB units)",
    "data_size": "bytes of data, over all data files (default 1g)",
    "log_device": "the device of the redo logs (default: the first data device)",
    "hit_ratio": "instead of a buffer pool size, the share of reads found in it "
                 "(0 < hit_ratio < 1)",
    "duration": "how long sessions run without a [run] duration (default 60s)",
    "warmup": "transactions completing before this are not counted (default 0)",
}
ORACLE_KEYS = {
    "db_block_size": "bytes per block (default 8192)",
    "db_cache_size": "the buffer cache, bytes (default 256m)",
    "db_writer_processes": "database writers DBW0.. (default 1)",
    "filesystemio_options": "none (default), asynch, directio or setall",
    "log_file_size": "bytes per online redo log group (default 200m)",
    "log_groups": "online redo log groups (default 3)",
}
INNODB_KEYS = {
    "innodb_page_size": "bytes per page (default 16k)",
    "innodb_buffer_pool_size": "the buffer pool, bytes (default 128m)",
    "innodb_page_cleaners": "page cleaner threads (default 4)",
    "innodb_flush_method": "fsync (default; fdatasync is its older name), O_DSYNC, "
                           "O_DIRECT or O_DIRECT_NO_FSYNC",
    "innodb_flush_log_at_trx_commit": "1 (default: write and flush at commit), 2 (write at "
                                      "commit, flush every second) or 0 (both every second)",
    "innodb_flush_log_at_timeout": "seconds between those flushes (default 1)",
    "innodb_log_file_size": "bytes per redo log file (default 48m)",
    "innodb_log_files_in_group": "redo log files (default 2)",
    "innodb_io_capacity": "pages per second the cleaners write in the background "
                          "(default 200)",
    "innodb_io_capacity_max": "pages per second they write at most when pressed "
                              "(default 2000)",
    "innodb_max_dirty_pages_pct": "per cent of the pool dirty before cleaners press on "
                                  "(default 90)",
    "innodb_doublewrite": "1 (default): pages go to the doublewrite file first; 0: not",
}
KEYS = {**COMMON_KEYS, **ORACLE_KEYS, **INNODB_KEYS, **PG_KEYS}
#: Each engine's own keys, and how messages name it.
ENGINE_KEYS = {"oracle": ("Oracle", ORACLE_KEYS), "innodb": ("InnoDB", INNODB_KEYS),
               "postgresql": ("PostgreSQL", PG_KEYS)}
MIX_KEYS = {"name": "the transaction type's name", "weight": "its share (relative)",
            "reads": "pages it reads", "writes": "pages of those it changes",
            "cpu_time": "its mean CPU time", "user_calls": "client calls it makes"}
#: User calls per transaction when the client issues each SQL statement (and the commit)
#: as its own call, from TPC-C's transaction profiles (Standard Specification 5.11):
#: New-Order (clause 2.4.2): 6 statements, then 4 per order line (select item, select and
#: update stock, insert order line) for 10 lines on average (5 to 15), and the commit;
#: Payment (2.5.2): warehouse, district and customer each read and updated, the history
#: row inserted, the commit; Order-Status (2.6.2): customer, last order, its lines, the
#: commit; Delivery (2.7.4): 7 statements for each of the 10 districts, the commit;
#: Stock-Level (2.8.2): the district, the stock count, the commit. blksim's reading of
#: the profiles (a customer found by last name counted as one call, fetches not
#: counted).
TPCC_STATEMENT_CALLS = {"new_order": 47, "payment": 8, "order_status": 4,
                        "delivery": 71, "stock_level": 3}
#: The server CPU per transaction of a TPC-C result of the studies' era (docs/apps.md,
#: "CPU per transaction"): HP and Oracle, 8 June 2007, 100,926 tpmC with Oracle Database
#: Standard Edition One on Oracle Enterprise Linux and one quad-core Xeon 5355, as K.
#: Closson summarised its full disclosure report ("10 Years to Replace 64 CPU Systems
#: with a Single Socket", kevinclosson.net, 26 June 2007). tpmC counts New-Order
#: transactions only, at most 45 % of all (the minimum mix of clause 5.2.3 leaves 55 % to
#: the others), so the server ran at least 100,926 / 0.45 = 224,280 transactions a minute
#: on 4 cores: 4 x 60 s / 224,280 = 1.070 ms of processor time each, an upper bound (the
#: report does not give the utilisation; at 100 % busy it is this figure).
TPCC_2007_TPMC = 100926
TPCC_2007_CORES = 4
TPCC_NEW_ORDER_SHARE = 0.45
CPU_PER_TRANSACTION = TPCC_2007_CORES * 60.0 / (TPCC_2007_TPMC / TPCC_NEW_ORDER_SHARE)
STRIPE_BYTES = 1 << 20
MIN_TXN_TIME = 1e-6    # s; blksim's choice: float seconds still resolve it at 10^9 s


@dataclass(frozen=True)
class TxnType:
    """One transaction type of the mix."""

    name: str
    weight: float
    reads: int
    writes: int
    cpu_time: float
    user_calls: int


@dataclass(frozen=True)
class IoModes:
    """How the engine opens and syncs its files (from its I/O mode parameters)."""

    data_direct: bool          # data files opened with O_DIRECT
    data_write_sync: bool      # each data write waits for the device (O_DSYNC)
    data_async: bool           # a writer's batch is in flight at once (asynchronous I/O)
    data_fsync: bool           # a writer's batch is followed by fsync of the data files
    log_direct: bool           # redo logs opened with O_DIRECT
    log_write_sync: bool       # each redo write waits for the device (O_DSYNC / O_SYNC)
    log_fsync: bool            # a redo flush is fsync after the write
    commit_waits: str          # "flush", "write" or "none": what a commit waits for
    log_timer: float           # seconds between the periodic redo write/flush (0: none)
    timer_writes: bool         # the periodic action also writes (not only flushes)


@dataclass(frozen=True)
class WriterPolicy:
    """When the database writers write, and how much."""

    interval: float            # a writer's timeout between passes (s)
    background_pages: int      # pages written per interval without pressure (all writers)
    dirty_high: float          # share of the pool dirty above which writers press on
    pressed_rate: float | None  # pages/s at most when pressed (None: no limit)
    batch: int                 # pages a writer takes per pass


@dataclass
class OltpConfig:
    """An OLTP database application, validated."""

    type = "oltp"

    name: str
    engine: str
    sessions: int
    think_time: float
    think_exponential: bool
    cpu_exponential: bool
    cpus: int
    mix: tuple                 # TxnType, ...
    redo_per_change: int
    access: str
    zipf_theta: float
    hot_set: tuple             # (per cent of accesses, per cent of pages)
    block_size: int
    pages: int                 # pages of data
    pool_pages: int | None     # buffer pool pages (None: hit_ratio)
    hit_ratio: float | None
    writers: int
    modes: IoModes
    policy: WriterPolicy
    data_files: tuple          # paths, one per data device
    log_files: tuple           # paths, in the order they are written
    log_file_size: int         # bytes per log file (Oracle: per group)
    log_switch_checkpoints: bool   # Oracle: a checkpoint at each log switch
    doublewrite_file: str | None   # InnoDB's doublewrite file (None: no doublewrite)
    duration: float
    warmup: float
    table: dict = field(default_factory=dict)
    cpu_per_call: float = 0.0  # s of server CPU per user call
    rate: float = 0.0          # open loop: transactions arriving per second (0: closed)
    pg: object = None          # PostgreSQL's own parameters (`apps.postgres_config.PgParams`)
    log_block: int = 512       # bytes: a log write starts and ends on this boundary

    @property
    def files(self) -> tuple:
        """Every file of the database."""
        extra = (self.doublewrite_file,) if self.doublewrite_file else ()
        return self.data_files + self.log_files + extra

    def horizon(self) -> float:
        """When sessions stop without a ``[run] duration``."""
        return self.duration


def _oracle(table: dict, where: str) -> tuple:
    for key in INNODB_KEYS:
        if key in table:
            raise ConfigError(f"{where}: {key} is an InnoDB parameter; this database's "
                              f"engine is oracle")
    block = int_value(table, "db_block_size", where, 8192, 2048, 32768)
    if block & (block - 1):
        raise ConfigError(f"{where}: db_block_size expected 2048, 4096, 8192, 16384 or "
                          f"32768, found {block}")
    pool = size_value(table, "db_cache_size", where, "256m", 1, block)
    writers = int_value(table, "db_writer_processes", where, 1, 1, 100)
    option = str(table.get("filesystemio_options", "none")).lower()
    if option not in ("none", "asynch", "directio", "setall"):
        raise ConfigError(f"{where}: filesystemio_options expected none, asynch, directio "
                          f"or setall, found {table.get('filesystemio_options')!r}")
    direct = option in ("directio", "setall")
    # Oracle writes data and redo synchronously whatever the option (O_DSYNC when not
    # direct); asynchronous I/O on buffered files is not asynchronous on Linux (io_submit
    # completes the I/O before it returns), so only setall has batches in flight.
    modes = IoModes(data_direct=direct, data_write_sync=not direct,
                    data_async=option == "setall", data_fsync=False, log_direct=direct,
                    log_write_sync=not direct, log_fsync=False, commit_waits="flush",
                    log_timer=0.0, timer_writes=False)
    policy = WriterPolicy(interval=3.0, background_pages=0, dirty_high=0.4,
                          pressed_rate=None, batch=256)
    log_size = size_value(table, "log_file_size", where, "200m", 1 << 20, 1 << 20)
    groups = int_value(table, "log_groups", where, 3, 2, 255)
    return block, pool, writers, modes, policy, log_size, groups, True


def _innodb(table: dict, where: str) -> tuple:
    for key in ORACLE_KEYS:
        if key in table:
            raise ConfigError(f"{where}: {key} is an Oracle parameter; this database's "
                              f"engine is innodb")
    block = size_value(table, "innodb_page_size", where, "16k", 4096, 4096)
    if block not in (4096, 8192, 16384, 32768, 65536):
        raise ConfigError(f"{where}: innodb_page_size expected 4k, 8k, 16k, 32k or 64k, "
                          f"found {table.get('innodb_page_size')!r}")
    pool = size_value(table, "innodb_buffer_pool_size", where, "128m", 1, block)
    writers = int_value(table, "innodb_page_cleaners", where, 4, 1, 64)
    method = choice_value(table, "innodb_flush_method", where, "fsync",
                          ("fsync", "fdatasync", "O_DSYNC", "O_DIRECT", "O_DIRECT_NO_FSYNC"))
    at_commit = int_value(table, "innodb_flush_log_at_trx_commit", where, 1, 0, 2)
    timeout = int_value(table, "innodb_flush_log_at_timeout", where, 1, 1, 2700)
    direct = method.startswith("O_DIRECT")
    log_sync = method == "O_DSYNC"
    modes = IoModes(data_direct=direct, data_write_sync=False, data_async=True,
                    data_fsync=method != "O_DIRECT_NO_FSYNC", log_direct=False,
                    log_write_sync=log_sync, log_fsync=not log_sync,
                    commit_waits={1: "flush", 2: "write", 0: "none"}[at_commit],
                    log_timer=0.0 if at_commit == 1 else float(timeout),
                    timer_writes=at_commit == 0)
    capacity = int_value(table, "innodb_io_capacity", where, 200, 100, 10 ** 7)
    cap_max = int_value(table, "innodb_io_capacity_max", where, max(2000, 2 * capacity),
                        capacity, 10 ** 8)
    dirty = table.get("innodb_max_dirty_pages_pct", 90)
    if isinstance(dirty, bool) or not isinstance(dirty, (int, float)) or not 0 <= dirty <= 99.99:
        raise ConfigError(f"{where}: innodb_max_dirty_pages_pct expected 0 to 99.99, found "
                          f"{dirty!r}")
    policy = WriterPolicy(interval=1.0, background_pages=capacity, dirty_high=dirty / 100.0,
                          pressed_rate=float(cap_max), batch=max(1, capacity // writers))
    log_size = size_value(table, "innodb_log_file_size", where, "48m", 1 << 20, 1 << 20)
    files = int_value(table, "innodb_log_files_in_group", where, 2, 2, 100)
    return block, pool, writers, modes, policy, log_size, files, False


def _type_calls(name: str, client: str, default: int) -> int:
    """A mix type's user calls without its own ``user_calls``: one per transaction with
    stored procedures; with statements, its TPC-C profile's count if it is one of
    TPC-C's transactions (by name: New-Order, new_order, neword, ...), else
    ``default``."""
    if client == "procedures":
        return default
    key = name.lower().replace("-", "_").replace(" ", "_")
    key = {"neword": "new_order", "ostat": "order_status", "slev": "stock_level",
           "neworder": "new_order", "orderstatus": "order_status",
           "stocklevel": "stock_level"}.get(key, key)
    return TPCC_STATEMENT_CALLS.get(key, default)


def _mix(table: dict, where: str) -> tuple:
    cpu = time_value(table, "cpu_time", where, CPU_PER_TRANSACTION)
    reads = int_value(table, "reads", where, 10, 0, 100000)
    writes = int_value(table, "writes", where, min(2, reads), 0, reads)
    client = choice_value(table, "client", where, "procedures", ("procedures", "statements"))
    given = "user_calls" in table
    calls = int_value(table, "user_calls", where, 1, 0, 100000)
    spec = table.get("mix")
    if spec is None:
        return (TxnType("txn", 1.0, reads, writes, cpu, calls),)
    if not isinstance(spec, list) or not spec:
        raise ConfigError(f"{where}: mix expected [[app.mix]] tables, found {spec!r}")
    out = []
    for k, t in enumerate(spec):
        w = f"{where}: mix #{k + 1}"
        check_keys(t, MIX_KEYS, w)
        weight = weight_value(t.get("weight", 1), w, "weight")
        r = int_value(t, "reads", w, reads, 0, 100000)
        out.append(TxnType(str(t.get("name", f"t{k + 1}")), float(weight), r,
                           int_value(t, "writes", w, min(writes, r), 0, r),
                           time_value(t, "cpu_time", w, cpu),
                           int_value(t, "user_calls", w, calls if given else _type_calls(
                               str(t.get("name", f"t{k + 1}")), client, calls), 0, 100000)))
    if len({t.name for t in out}) != len(out):
        raise ConfigError(f"{where}: mix: two transaction types have the same name")
    return tuple(out)


def _distribution(table: dict, key: str, where: str) -> bool:
    return choice_value(table, key, where, "exponential", ("exponential", "fixed")) == \
        "exponential"


def _window(table: dict, where: str, host) -> tuple:
    """(duration, warmup): the measured window, from warmup to the end of the sessions'
    time (the run's duration, else the table's own), must not be empty."""
    duration = time_value(table, "duration", where, 60.0)
    warmup = time_value(table, "warmup", where, 0.0)
    end = host.window_end(duration)
    if not warmup < end:
        ends = (f"the run ends at {end:g} s ([run] duration)" if host.duration is not None
                else f"the sessions stop at {end:g} s (duration = "
                     f"{table.get('duration', '60s')!r})")
        raise ConfigError(f"{where}: warmup = {table.get('warmup')!r} leaves nothing to "
                          f"measure: {ends}; make warmup shorter than that")
    return duration, warmup


def _check_redo(mix: tuple, redo: int, log_size: int, log_key: str, table: dict,
                where: str) -> None:
    """A transaction's redo must fit in one log file: blksim appends it all at commit and
    the log writer writes it at once (a real engine writes it as it is generated; InnoDB
    refuses a mini-transaction larger than its log, "The transaction log files are too
    small for the single transaction log", log0log.cc, MySQL 5.7)."""
    big = max(mix, key=lambda t: t.writes)
    if big.writes * redo > log_size:
        raise ConfigError(f"{where}: redo_per_change = {table.get('redo_per_change', 512)!r}"
                          f" ({redo} bytes): a {big.name!r} transaction changes "
                          f"{big.writes} pages, {big.writes * redo} bytes of redo at its "
                          f"commit, more than one log file holds ({log_key} = {log_size} "
                          f"bytes)")


def parse(table: dict, where: str, host, seed: str) -> OltpConfig:
    """A ``type = "oltp"`` table, checked against ``host`` (a `apps.HostContext`),
    its data files and redo logs laid out by ``host.placer``."""
    placer = host.placer
    name = str(table.get("name", "oltp"))
    engine = choice_value(table, "engine", where, "oracle", tuple(ENGINE_KEYS))
    for other, (label, keys) in ENGINE_KEYS.items():
        given = next((k for k in keys if k in table), None) if other != engine else None
        if given is not None:
            raise ConfigError(f"{where}: {given} is {'an' if label[0] in 'AEIOU' else 'a'} "
                              f"{label} parameter; this database's engine is {engine}")
    pg = None
    if engine == "postgresql":
        from blksim.apps.postgres_config import engine as postgresql
        block, pool, writers, modes, policy, log_size, log_count, switch_ckpt, pg = \
            postgresql(table, where)
        modes, policy = IoModes(**modes), WriterPolicy(**policy)
    else:
        block, pool, writers, modes, policy, log_size, log_count, switch_ckpt = \
            (_oracle if engine == "oracle" else _innodb)(table, where)
    duration, warmup = _window(table, where, host)
    sessions = int_value(table, "sessions", where, 10, 1, 10000)
    mix = _mix(table, where)
    think = time_value(table, "think_time", where, 0.0)
    rate = _rate(table, where)
    # a transaction that finds its pages in the pool and need not wait for its commit
    # takes only its CPU and think time: with none (or less than the clock's float
    # seconds resolve late in a long run) the session would run forever at one instant
    # (an open loop's arrivals pace the sessions instead)
    idle = [t.name for t in mix if not think + t.cpu_time >= MIN_TXN_TIME] if not rate \
        else []
    if idle:
        raise ConfigError(f"{where}: cpu_time + think_time is under 1 us for "
                          f"{', '.join(map(repr, idle))} (think_time = "
                          f"{table.get('think_time', 0)!r}): a transaction must take at least "
                          f"1 us; give cpu_time or think_time")
    redo = size_value(table, "redo_per_change", where, 512)
    log_key, pool_key, pool_default = _ENGINE_NAMES[engine]
    if pg is not None and pg.version != "8.4":
        log_key = "max_wal_size"
    _check_redo(mix, redo, log_size, log_key, table, where)
    hit = table.get("hit_ratio")
    if hit is not None and (isinstance(hit, bool) or not isinstance(hit, (int, float))
                            or not 0 < hit < 1):
        raise ConfigError(f"{where}: hit_ratio expected a number between 0 and 1, found "
                          f"{hit!r}")
    if hit is not None and pool_key in table:
        raise ConfigError(f"{where}: give {pool_key} or hit_ratio, not both")
    if hit is None:
        host.reserve(pool, pool_key, table.get(pool_key, pool_default if pg is None
                                               else f"{pool >> 20}MB"), where)
    data_devices = placer.device_list(table.get("data_device"), where, "data_device")
    log_device = placer.device(table.get("log_device", f"/dev/{data_devices[0]}"), where,
                               "log_device")
    data_size = size_value(table, "data_size", where, "1g", block, block)
    pages = data_size // block
    per_unit = max(1, STRIPE_BYTES // block)
    units = -(-pages // per_unit)
    file_bytes = -(-units // len(data_devices)) * per_unit * block
    stem = f"/db/{name}"
    doublewrite = None
    # a file that does not fit names the key that sized it
    data_where = f"{where}: data_size = {table.get('data_size', '1g')!r}"
    log_where = f"{where}: {log_key} = {table.get(log_key, log_size)!r}"
    if engine == "oracle":
        data_files = tuple(placer.place(f"{stem}/data{k + 1:02d}.dbf", d, file_bytes,
                                        data_where)
                           for k, d in enumerate(data_devices))
        log_files = tuple(placer.place(f"{stem}/redo{g + 1:02d}.log", log_device, log_size,
                                       log_where) for g in range(log_count))
    elif engine == "postgresql":
        # a table's relation files under base/ (one per data device here), the WAL's
        # 16 MB segments under pg_xlog/ (pg_wal/ from 10 on), written in turn and recycled
        wal_dir = "pg_xlog" if pg.version == "8.4" else "pg_wal"
        data_files = tuple(placer.place(f"{stem}/base/{16384 + k}", d, file_bytes, data_where)
                           for k, d in enumerate(data_devices))
        log_files = tuple(placer.place(f"{stem}/{wal_dir}/{g + 1:024X}", log_device,
                                       log_size, log_where) for g in range(log_count))
    else:
        data_files = tuple(placer.place(f"{stem}/ibdata{k + 1}", d, file_bytes, data_where)
                           for k, d in enumerate(data_devices))
        log_files = tuple(placer.place(f"{stem}/ib_logfile{g}", log_device, log_size,
                                       log_where) for g in range(log_count))
        if int_value(table, "innodb_doublewrite", where, 1, 0, 1):
            # MySQL 8.0.20's doublewrite files: a part per page cleaner, beside the data
            from blksim.apps.dbwriter import DOUBLEWRITE_PAGES
            doublewrite = placer.place(f"{stem}/ib_{block}_0.dblwr", data_devices[0],
                                       writers * DOUBLEWRITE_PAGES * block,
                                       f"{where}: innodb_doublewrite = 1")
    access = choice_value(table, "access", where, "zipf", ("uniform", "zipf", "hotset"))
    theta = table.get("zipf_theta", 0.99)
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not 0 < theta < 1:
        raise ConfigError(f"{where}: zipf_theta expected a number between 0 and 1 (not "
                          f"included), found {theta!r}")
    hot = table.get("hot_set", [80, 20])
    if not isinstance(hot, list) or len(hot) != 2 or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 100
            for v in hot):
        raise ConfigError(f"{where}: hot_set expected [per cent of accesses, per cent of "
                          f"pages], each in (0, 100], found {hot!r}")
    return OltpConfig(
        name=name, engine=engine, sessions=sessions,
        think_time=think,
        think_exponential=_distribution(table, "think_distribution", where),
        cpu_exponential=_distribution(table, "cpu_distribution", where),
        cpus=int_value(table, "cpus", where, 0, 0, 4096),
        mix=mix, redo_per_change=redo,
        access=access, zipf_theta=float(theta), hot_set=(float(hot[0]), float(hot[1])),
        block_size=block, pages=pages,
        pool_pages=None if hit is not None else max(1, pool // block),
        hit_ratio=None if hit is None else float(hit), writers=writers, modes=modes,
        policy=policy, data_files=data_files, log_files=log_files, log_file_size=log_size,
        log_switch_checkpoints=switch_ckpt, doublewrite_file=doublewrite, duration=duration,
        warmup=warmup,
        table=dict(table),
        cpu_per_call=time_value(table, "cpu_per_call", where, 0.0), rate=rate, pg=pg,
        log_block=512 if pg is None else WAL_BLOCK)


#: Per engine: the key sizing its log files, the key sizing its pool and that key's
#: default as written.
_ENGINE_NAMES = {"oracle": ("log_file_size", "db_cache_size", "256m"),
                 "innodb": ("innodb_log_file_size", "innodb_buffer_pool_size", "128m"),
                 "postgresql": ("checkpoint_segments", "shared_buffers", None)}


def _rate(table: dict, where: str) -> float:
    """The open loop's arrival rate (transactions per second; 0: the closed loop)."""
    import math
    value = table.get("rate", 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not 0 <= value <= 1e7:
        raise ConfigError(f"{where}: rate expected transactions per second, from 0 (the "
                          f"closed loop) to 1e7, found {value!r}")
    if value and "think_time" in table:
        raise ConfigError(f"{where}: rate = {value!r} is an open loop: arrivals, not "
                          f"think_time, pace the sessions; give one of them")
    return float(value)
