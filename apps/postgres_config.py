"""PostgreSQL's parameters for ``[[app]] type = "oltp"``, ``engine = "postgresql"``: their
names, units and defaults as postgresql.conf has them, and what they make of the engine's
I/O modes (`apps.oltp_config.IoModes`) and of its background processes (`PgParams`).

Two servers are modelled where their defaults differ (``server_version``): 8.4, of the
2.6 era (the default), and 16. The sources are the PostgreSQL manual of each version:
chapter 18 (8.4) / 20 (16) "Server Configuration" for every parameter, chapter 28 (8.4) /
30 (16) "Reliability and the Write-Ahead Log" for how they act; docs/apps.md lists them.

=====================================  =====================  ==========================
parameter                              8.4 default            16 default
=====================================  =====================  ==========================
shared_buffers                         32MB (initdb's)        128MB
checkpoint_segments / max_wal_size     3 segments (48 MB)     1GB
checkpoint_completion_target           0.5                    0.9 (since 14)
wal_sync_method with open_*sync        O_DIRECT (no archive)  no O_DIRECT
=====================================  =====================  ==========================

Every other default is the same in both: ``checkpoint_timeout`` 5min, ``fsync`` on,
``synchronous_commit`` on, ``wal_sync_method`` fdatasync (on Linux), ``wal_writer_delay``
200ms, ``commit_delay`` 0, ``commit_siblings`` 5, ``full_page_writes`` on,
``bgwriter_delay`` 200ms, ``bgwriter_lru_maxpages`` 100, ``bgwriter_lru_multiplier`` 2.0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blksim.apps import choice_value, size_value
from blksim.common.config_values import ConfigError, int_value, time_value

#: PostgreSQL's page (BLCKSZ, a compile-time constant: 8 kB by default) and WAL segment
#: (XLOG_SEG_SIZE, 16 MB; ``initdb --wal-segsize`` from 11 on).
BLOCK_SIZE = 8192
WAL_SEGMENT = 16 << 20
#: The WAL's page (XLOG_BLCKSZ, 8 kB): ``XLogWrite`` writes whole pages, the last one
#: partly filled, and rewrites that page with the next write.
WAL_BLOCK = 8192

VERSIONS = ("8.4", "16")

PG_KEYS = {
    "server_version": "8.4 (default, the 2.6 era) or 16: the defaults that differ",
    "shared_buffers": "the shared buffer pool, bytes (default 32MB in 8.4, 128MB in 16)",
    "fsync": "on (default) or off: no WAL or data file is ever flushed",
    "wal_sync_method": "fdatasync (default on Linux), fsync, open_datasync or open_sync",
    "synchronous_commit": "on (default): a commit waits for its WAL flush; off: it does "
                          "not, the WAL writer flushes every wal_writer_delay",
    "wal_writer_delay": "the WAL writer's sleep between flushes (default 200ms)",
    "commit_delay": "microseconds a committing backend waits before its flush when "
                    "commit_siblings others are in a transaction (default 0)",
    "commit_siblings": "transactions that must be open for commit_delay (default 5)",
    "full_page_writes": "on (default): the first change of a page after a checkpoint "
                        "logs the whole page; off: not",
    "checkpoint_timeout": "time between automatic checkpoints (default 5min)",
    "checkpoint_segments": "8.4: WAL segments (16 MB) between checkpoints (default 3)",
    "max_wal_size": "16: WAL that triggers a checkpoint (default 1GB)",
    "checkpoint_completion_target": "share of the interval a checkpoint's writes are "
                                    "spread over (default 0.5 in 8.4, 0.9 in 16)",
    "bgwriter_delay": "the background writer's sleep between rounds (default 200ms)",
    "bgwriter_lru_maxpages": "buffers it writes per round at most (default 100)",
    "bgwriter_lru_multiplier": "its estimate of the next round's buffer allocations, as "
                               "a multiple of recent ones (default 2.0)",
}
_DEFAULTS = {"8.4": {"shared_buffers": "32m", "checkpoint_completion_target": 0.5},
             "16": {"shared_buffers": "128m", "checkpoint_completion_target": 0.9}}


@dataclass(frozen=True)
class PgParams:
    """What PostgreSQL's own processes need beyond the common engine parameters."""

    version: str
    fsync: bool
    checkpoint_timeout: float          # s
    checkpoint_segments: int           # CheckPointSegments: WAL segments between checkpoints
    checkpoint_distance: int           # the same in bytes
    completion_target: float
    full_page_writes: bool
    bgwriter_delay: float              # s
    lru_maxpages: int
    lru_multiplier: float
    commit_delay: float                # s
    commit_siblings: int


def _on_off(table: dict, key: str, where: str, default: bool) -> bool:
    """A boolean parameter as postgresql.conf spells it (on/off, true/false) or TOML's."""
    value = table.get(key, default)
    if isinstance(value, bool):
        return value
    word = value.lower() if isinstance(value, str) else None
    if word in ("on", "true", "yes", "1"):
        return True
    if word in ("off", "false", "no", "0"):
        return False
    raise ConfigError(f"{where}: {key} expected on or off, found {value!r}")


def _fraction(table: dict, key: str, where: str, default: float, lo: float, hi: float):
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not lo <= value <= hi:
        raise ConfigError(f"{where}: {key} expected a number from {lo:g} to {hi:g}, found "
                          f"{value!r}")
    return float(value)


def _seconds(table, key, where, default, lo, hi) -> float:
    s = time_value(table, key, where, default)
    if not lo <= s <= hi:
        raise ConfigError(f"{where}: {key} expected {lo:g} s to {hi:g} s, found "
                          f"{table.get(key)!r}")
    return s


def engine(table: dict, where: str) -> tuple:
    """The engine tuple `apps.oltp_config.parse` takes from each engine (page size, pool
    bytes, writers, I/O modes, the writers' policy, bytes per log file, log files, whether a
    log switch checkpoints) and the `PgParams`; the I/O modes and the policy as the
    keywords of `apps.oltp_config.IoModes` and ``WriterPolicy``."""
    version = str(table.get("server_version", "8.4"))
    if version not in VERSIONS:
        raise ConfigError(f"{where}: server_version expected one of {', '.join(VERSIONS)}, "
                          f"found {table.get('server_version')!r}")
    defaults = _DEFAULTS[version]
    pool = size_value(table, "shared_buffers", where, defaults["shared_buffers"], 1,
                      16 * BLOCK_SIZE)
    fsync = _on_off(table, "fsync", where, True)
    method = choice_value(table, "wal_sync_method", where, "fdatasync",
                          ("fdatasync", "fsync", "open_datasync", "open_sync"))
    sync_commit = _on_off(table, "synchronous_commit", where, True)
    writer_delay = _seconds(table, "wal_writer_delay", where, "200ms", 0.001, 10.0)
    opened_sync = method.startswith("open_")
    # get_sync_bit (xlog.c): open_datasync = O_DSYNC, open_sync = O_SYNC, and in 8.4 with
    # O_DIRECT too when WAL is not archived (its default); 16 adds no O_DIRECT. fdatasync and
    # fsync write(), then issue_xlog_fsync calls fdatasync() or fsync(); blksim's fsync of
    # a file is the same call for both (hostio.fileio). fsync = off skips every flush.
    modes = dict(data_direct=False, data_write_sync=False, data_async=False,
                    data_fsync=False,
                    log_direct=fsync and opened_sync and version == "8.4",
                    log_write_sync=fsync and opened_sync,
                    log_fsync=fsync and not opened_sync,
                    commit_waits="flush" if sync_commit else "none",
                    log_timer=0.0 if sync_commit else writer_delay,
                    timer_writes=not sync_commit)
    completion = _fraction(table, "checkpoint_completion_target", where,
                           defaults["checkpoint_completion_target"], 0.0, 1.0)
    if version == "8.4":
        if "max_wal_size" in table:
            raise ConfigError(f"{where}: max_wal_size is a parameter of 9.5 and later; "
                              f"server_version 8.4 has checkpoint_segments")
        segments = int_value(table, "checkpoint_segments", where, 3, 1, 1 << 20)
    else:
        if "checkpoint_segments" in table:
            raise ConfigError(f"{where}: checkpoint_segments was removed in 9.5; "
                              f"server_version 16 has max_wal_size")
        max_wal = size_value(table, "max_wal_size", where, "1g", 1, 2 * WAL_SEGMENT)
        # CalculateCheckpointSegments (xlog.c, 11 and later): a checkpoint every
        # max_wal_size / (1 + checkpoint_completion_target) of WAL, in whole segments
        segments = max(1, int(max_wal // WAL_SEGMENT / (1.0 + completion)))
    distance = segments * WAL_SEGMENT
    # WAL kept: "normally not more than (2 + checkpoint_completion_target) *
    # checkpoint_segments + 1" segments (8.4 manual, 28.4); the same bound, in bytes of
    # WAL between checkpoints, for 16
    files = math.ceil((2.0 + completion) * distance / WAL_SEGMENT) + 1
    delay_us = int_value(table, "commit_delay", where, 0, 0, 100000)
    params = PgParams(
        version=version, fsync=fsync,
        checkpoint_timeout=_seconds(table, "checkpoint_timeout", where, "5min", 30.0,
                                    86400.0),
        checkpoint_segments=segments, checkpoint_distance=distance,
        completion_target=completion,
        full_page_writes=_on_off(table, "full_page_writes", where, True),
        bgwriter_delay=_seconds(table, "bgwriter_delay", where, "200ms", 0.01, 10.0),
        lru_maxpages=int_value(table, "bgwriter_lru_maxpages", where, 100, 0, 1000),
        lru_multiplier=_fraction(table, "bgwriter_lru_multiplier", where, 2.0, 0.0, 10.0),
        commit_delay=delay_us * 1e-6,
        commit_siblings=int_value(table, "commit_siblings", where, 5, 0, 1000))
    policy = dict(interval=params.bgwriter_delay, background_pages=0,
                          dirty_high=1.0, pressed_rate=None,
                          batch=max(1, params.lru_maxpages))
    return BLOCK_SIZE, pool, 1, modes, policy, WAL_SEGMENT, files, False, params
