"""fio job files (the INI format fio reads) turned into blksim ``[[job]]`` tables.

A job file has sections: ``[global]`` sets defaults for the jobs after it, and
every other section is a job named after it. Lines are ``key=value`` or a bare
``key`` (a flag); ``;`` and ``#`` start comments. Values keep fio's syntax
(``4k``, ``2ms``, ``50%``), which `traces.jobs.parse_job` understands.

Options that only matter to a real machine (``direct``, ``filename``, reporting
and logging) are dropped with a warning each, naming the file and line; an
option blksim does not know is an error, so a job is never silently different
from what its file says. A job that names no ``ioengine`` gets fio's default,
``psync`` (`FIO_DEFAULT_ENGINE`), as fio would run it.
"""

from __future__ import annotations

import re

from blksim.traces.jobs import VALID_KEYS

#: Options that do not change what reaches the simulated block device, or that
#: blksim sets elsewhere; each is dropped with a warning saying why.
IGNORED = {
    "direct": "the simulated device is always reached directly (no page cache)",
    "buffered": "the simulated device is always reached directly (no page cache)",
    "filename": "an fio file's jobs run on sda; a [[job]] table's filename names a device "
                "of the configuration (docs/storage.md)",
    "directory": "an fio file's jobs run on sda; a [[job]] table's filename names a device "
                 "of the configuration (docs/storage.md)",
    "group_reporting": "blksim reports every process and the totals",
    "time_based": "blksim jobs always run until runtime, number_ios or the run's duration",
    "randrepeat": "randomness comes from the run's seed",
    "norandommap": "random offsets are always drawn with replacement",
    "invalidate": "there is no page cache to invalidate",
    "thread": "processes and threads are the same to the block layer",
    "gtod_reduce": "reporting option",
    "clocksource": "reporting option",
    "lat_percentiles": "reporting option",
    "clat_percentiles": "reporting option",
    "percentile_list": "reporting option",
    "unified_rw_reporting": "reporting option",
    "description": "comment",
    "stonewall": "jobs all start together (use startdelay)",
    "wait_for_previous": "jobs all start together (use startdelay)",
    "new_group": "reporting option",
    "exitall": "every job runs to its own end",
    "write_bw_log": "logging option",
    "write_lat_log": "logging option",
    "write_iops_log": "logging option",
    "log_avg_msec": "logging option",
    "per_job_logs": "logging option",
}


#: fio's engine when a job names none: ``FIO_PREFERRED_ENGINE`` of fio's os/os.h, "psync"
#: since fio 2.10 (2016; "sync" before) on every system but Windows. It is synchronous: fio
#: keeps one I/O in flight whatever the job's iodepth.
FIO_DEFAULT_ENGINE = "psync"


class FioFileError(ValueError):
    """A job file blksim cannot read; the message names the file and line."""


_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _value(text: str):
    """fio values stay strings, except plain numbers in ASCII digits (counts like iodepth):
    not Python's other spellings ("1_000", "nan", full-width digits), which fio's own
    parser does not take either."""
    stripped = text.strip()
    if _INTEGER.fullmatch(stripped):
        try:
            return int(stripped)
        except ValueError:              # beyond int()'s digit limit: it stays text
            return stripped
    if _DECIMAL.fullmatch(stripped):
        return float(stripped)
    return stripped


def read_fio_jobfile(path: str) -> tuple[list[dict], list[str]]:
    """Read an fio job file; return its jobs as ``[[job]]`` tables and the warnings."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise FioFileError(f"{path}: no such fio job file") from None
    except UnicodeDecodeError:
        raise FioFileError(f"{path}: not a text file") from None
    warnings: list[str] = []
    global_opts: dict = {}
    jobs: list[tuple[str, dict, int]] = []
    current: dict | None = None
    for lineno, raw in enumerate(lines, 1):
        line = raw.split(";", 1)[0].split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise FioFileError(f"{where}: expected a section header like [name], found {raw!r}")
            name = line[1:-1].strip()
            if name == "global":
                current = global_opts
            else:
                current = {}
                jobs.append((name, current, lineno))
            continue
        if current is None:
            raise FioFileError(f"{where}: option before any [section]: {raw!r}")
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep and " " in key:          # fio's directive form: "include file.fio"
            key = key.split()[0]
        if "$" in value:
            raise FioFileError(f"{where}: {key}: environment variables (${{...}}) are not "
                               f"supported, found {value.strip()!r}")
        if key in IGNORED:
            warnings.append(f"{where}: ignored {line!r} ({IGNORED[key]})")
            continue
        if key == "include" or key == "name":
            raise FioFileError(f"{where}: {key!r} is not supported in blksim job files")
        if key not in VALID_KEYS:
            raise FioFileError(
                f"{where}: unknown or unsupported fio option {key!r}; blksim reads: "
                f"{', '.join(sorted(k for k in VALID_KEYS if k != 'name'))}; and ignores: "
                f"{', '.join(sorted(IGNORED))}")
        current[key] = _value(value) if sep else True
    if not jobs:
        raise FioFileError(f"{path}: no job sections (only [global] or nothing)")
    tables = []
    for name, opts, lineno in jobs:
        table = {"name": name, **global_opts, **opts}
        if "ioengine" not in table:
            table["ioengine"] = FIO_DEFAULT_ENGINE
            if isinstance(table.get("iodepth"), int) and table["iodepth"] > 1:
                warnings.append(f"{path}:{lineno}: job {name!r} names no ioengine: it runs "
                                f"on fio's default, {FIO_DEFAULT_ENGINE} (write "
                                f"ioengine=libaio or io_uring for iodepth="
                                f"{table['iodepth']} I/Os in flight)")
        tables.append(table)
    return tables, warnings
