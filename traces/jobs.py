"""Synthetic workload jobs: one TOML ``[[job]]`` table, in fio's option names.

``parse_job`` checks a table and returns a frozen ``JobSpec`` with sizes in
bytes and times in seconds; the ``*_sectors`` helpers give 512-byte sectors.
docs/workloads.md lists the keys, their units and defaults, and where blksim
differs from fio.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from blksim.common.units import parse_size, parse_time

SECTOR = 512

# fio's rw values and their aliases -> canonical name.
RW_MODES = {
    "read": "read", "write": "write",
    "randread": "randread", "randwrite": "randwrite",
    "rw": "rw", "readwrite": "rw",
    "randrw": "randrw",
    "trim": "trim", "randtrim": "randtrim", "trimwrite": "trimwrite",
    "randtrimwrite": "randtrimwrite",
}
RATE_PROCESSES = ("poisson", "linear")

VALID_KEYS = (
    "name", "rw", "readwrite", "rwmixread", "rwmixwrite", "bs", "bssplit", "blockalign",
    "offset", "size", "offset_increment", "numjobs", "iodepth", "thinktime",
    "thinktime_blocks", "rate_iops", "rate_process", "number_ios", "runtime",
    "startdelay", "sync", "nice", "prio", "prioclass", "filename", "direct", "buffered",
    "fsync", "fdatasync", "end_fsync", "ioengine", "invalidate", "random_distribution",
    "rate", "ramp_time", "iodepth_batch_submit", "iodepth_batch", "iodepth_batch_complete_min",
    "iodepth_batch_complete", "iodepth_batch_complete_max", "cpus_allowed",
    "cpus_allowed_policy",
)

#: fio's engines blksim models (`blksim.sim.ioengine` has what each does): the synchronous
#: ones keep one I/O in flight, libaio and io_uring keep iodepth (docs/jobs.md)
SYNC_ENGINES = ("psync", "sync", "pvsync")
IOENGINES = (*SYNC_ENGINES, "libaio", "io_uring")
#: fio's cpus_allowed_policy values (options.c): every clone on the whole set, or one CPU each
CPUS_POLICIES = ("shared", "split")
#: The most CPUs a cpus_allowed list may name (fio's FIO_MAX_CPUS is the host's; blksim's
#: own bound keeps a typo such as "0-99999999" from building a huge list)
MAX_CPUS = 4096

IOPRIO_CLASS_RT, IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE = 1, 2, 3

#: The most clones of one job, and I/Os one clone keeps in flight.
MAX_NUMJOBS = 4096
MAX_IODEPTH = 65536


@dataclass(frozen=True)
class JobSpec:
    """One synthetic job, as fio would run it, with sizes in bytes and times in seconds.

    ``bssplit`` is always set: a single ``bs`` becomes ``((bs, 100.0),)``.
    ``size`` is None when the job covers the device from its offset to the
    end; ``device_size`` is the device it was resolved against (None when
    unknown). ``numjobs`` clones run as separate processes; clone ``i``
    starts at ``offset + i * offset_increment``. ``sync`` None means "reads
    sync, writes not" (see ``is_sync``). ``number_ios`` and ``runtime`` are
    None when unlimited.
    """

    name: str
    rw: str
    rwmixread: float
    bssplit: tuple[tuple[int, float], ...]
    blockalign: int
    offset: int
    size: int | None
    offset_increment: int
    device_size: int | None
    numjobs: int
    iodepth: int
    thinktime: float
    thinktime_blocks: int
    rate_iops: float | None
    rate_process: str
    number_ios: int | None
    runtime: float | None
    startdelay: float
    sync: bool | None
    nice: int
    prio: int | None
    prioclass: int | None
    filename: str | None
    direct: bool | None = None
    fsync: int = 0              # an fsync after every this many writes (0: none)
    end_fsync: bool = False
    ioengine: str | None = None
    invalidate: bool = True     # a job on a file drops the file's cached pages at start
    random_distribution: tuple = ("random",)   # traces.distributions.parse_random_distribution
    rate_bytes: float | None = None            # fio's rate: bytes per second
    ramp_time: float = 0.0                     # fio's ramp_time (the run measures after it)
    write_bs: int | None = None                # bs=R,W: the writes' block size (bytes)
    # fio's batching, after fio's fixup_options (init.c): submit this many at once (0 or
    # more than iodepth: iodepth), reap at least/at most this many completions at once
    iodepth_batch_submit: int = 1
    iodepth_batch_complete_min: int = 1
    iodepth_batch_complete_max: int = 1
    cpus_allowed: tuple | None = None          # the CPUs the job may run on (None: all)
    cpus_allowed_policy: str = "shared"

    @property
    def random(self) -> bool:
        """True for randread/randwrite/randrw/randtrim/randtrimwrite: offsets drawn
        uniformly, not sequential."""
        return self.rw.startswith("rand")

    @property
    def trims(self) -> bool:
        """True for the jobs that discard (fio's trim, randtrim, trimwrite and
        randtrimwrite)."""
        return "trim" in self.rw

    @property
    def read_fraction(self) -> float:
        """Probability that an I/O is a read: 1 or 0 for pure jobs, rwmixread/100 for mixed."""
        if self.rw in ("read", "randread"):
            return 1.0
        if self.rw in ("write", "randwrite") or self.trims:
            return 0.0
        return self.rwmixread / 100.0

    @property
    def min_bs(self) -> int:
        """Smallest block size in bytes (reads' and writes')."""
        return min([bs for bs, _ in self.bssplit] + ([self.write_bs] if self.write_bs else []))

    @property
    def max_bs(self) -> int:
        """Largest block size in bytes (reads' and writes')."""
        return max([bs for bs, _ in self.bssplit] + ([self.write_bs] if self.write_bs else []))

    @property
    def blockalign_sectors(self) -> int:
        """``blockalign`` in sectors."""
        return self.blockalign // SECTOR

    @property
    def bs_sectors(self) -> tuple[int, ...]:
        """The block sizes of ``bssplit`` in sectors, in the same order."""
        return tuple(bs // SECTOR for bs, _ in self.bssplit)

    def is_sync(self, write: bool) -> bool:
        """Whether a bio in this direction carries REQ_SYNC."""
        return (not write) if self.sync is None else self.sync

    def ioprio(self) -> tuple[int, int]:
        """(class, level) of the job's bios. fio calls ioprio_set(2) when the job sets
        ``prio`` or ``prioclass`` (backend.c ``thread_main``), with class best-effort when
        none is given and level ``prio``, 0 when none is given (os/os-linux.h
        ``ioprio_value``); otherwise the process keeps class NONE, which the kernel serves
        as best-effort at level (nice + 20) / 5 (``task_nice_ioprio``)."""
        if self.prio is None and self.prioclass is None:
            return IOPRIO_CLASS_BE, (self.nice + 20) // 5
        cls = IOPRIO_CLASS_BE if self.prioclass is None else self.prioclass
        return cls, 0 if self.prio is None else self.prio

    def region(self, clone_index: int) -> tuple[int, int]:
        """(first byte, length in bytes) of the region clone ``clone_index`` works on."""
        if not 0 <= clone_index < self.numjobs:
            raise ValueError(f"job {self.name!r}: clone_index must be in 0..{self.numjobs - 1}, "
                             f"found {clone_index}")
        start = self.offset + clone_index * self.offset_increment
        if self.size is not None:
            return start, self.size
        if self.device_size is None:
            raise ValueError(f"job {self.name!r}: no size given and the device size is unknown")
        return start, self.device_size - start

    def region_sectors(self, clone_index: int) -> tuple[int, int]:
        """(first sector, number of sectors) of clone ``clone_index``'s region."""
        start, length = self.region(clone_index)
        return start // SECTOR, length // SECTOR


def parse_job(table: dict, where: str, device_sectors: int | None) -> JobSpec:
    """Check one ``[[job]]`` table and return its ``JobSpec``.

    ``where`` prefixes every error (e.g. ``"config.toml: job 'writer'"``).
    ``device_sectors`` is the size of the target device, needed for
    percentages and for a job without ``size``; None when not known yet.
    Raises ``ValueError`` naming ``where``, the key, what was expected and
    what was found; unknown keys list the valid ones.
    """
    if not isinstance(table, dict):
        raise ValueError(f"{where}: expected a table of job options, found {table!r}")
    unknown = [k for k in table if k not in VALID_KEYS]
    if unknown:
        key = unknown[0]
        hint = difflib.get_close_matches(str(key), VALID_KEYS, n=1)
        hint_text = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ValueError(f"{where}: unknown key {key!r}{hint_text}; valid keys: "
                         f"{', '.join(sorted(VALID_KEYS))}")
    p = _Fields(table, where)
    device_size = None if device_sectors is None else device_sectors * SECTOR

    name = table.get("name")
    if not isinstance(name, str) or not name.strip():
        p.fail("name", "a non-empty string", name)

    if "rw" in table and "readwrite" in table:
        p.fail("readwrite", "only one of 'rw' and its alias 'readwrite'", table["readwrite"])
    rw_key = "readwrite" if "readwrite" in table else "rw"
    rw_text = table.get(rw_key, "read")
    if not isinstance(rw_text, str) or rw_text not in RW_MODES:
        p.fail(rw_key, f"one of {', '.join(RW_MODES)}", rw_text)
    rw = RW_MODES[rw_text]

    rwmixread = p.number("rwmixread", 0, 100, None)
    rwmixwrite = p.number("rwmixwrite", 0, 100, None)
    if rwmixread is None:
        rwmixread = 50.0 if rwmixwrite is None else 100.0 - rwmixwrite
    elif rwmixwrite is not None and not math.isclose(rwmixread + rwmixwrite, 100.0):
        p.fail("rwmixwrite", f"100 - rwmixread = {100 - rwmixread:g}", table["rwmixwrite"])

    if "bs" in table and "bssplit" in table:
        p.fail("bssplit", "either bs or bssplit, not both", table["bssplit"])
    write_bs = None
    if "bssplit" in table:
        bssplit = _parse_bssplit(table["bssplit"], p)
    elif isinstance(table.get("bs"), str) and "," in table["bs"]:
        # fio's bs=READ,WRITE: a block size per direction
        parts = [v.strip() for v in table["bs"].split(",")]
        if len(parts) != 2 or not all(parts):
            p.fail("bs", "one size, or READ,WRITE sizes such as 4k,16k", table["bs"])
        bssplit = ((p.sectors_size("bs", None, True, parts[0]), 100.0),)
        write_bs = p.sectors_size("bs", None, True, parts[1])
    else:
        bssplit = ((p.sectors_size("bs", 4096, positive=True), 100.0),)
    min_bs = min([bs for bs, _ in bssplit] + ([write_bs] if write_bs else []))
    max_bs = max([bs for bs, _ in bssplit] + ([write_bs] if write_bs else []))
    if device_size is not None and max_bs > device_size:
        key = "bssplit" if "bssplit" in table else "bs"
        p.fail(key, f"a block size no larger than the device ({device_size} bytes)",
               table.get(key, max_bs))
    blockalign = p.sectors_size("blockalign", min_bs, positive=True)

    offset = p.region_size("offset", 0, device_size, align=blockalign)
    offset_increment = p.region_size("offset_increment", 0, device_size, align=SECTOR)
    size = p.region_size("size", None, device_size, align=SECTOR)
    if size is not None and size < max_bs:
        p.fail("size", f"at least the largest block size ({max_bs} bytes)", table["size"])

    # Bounds of blksim's own: every clone is a simulated process and every I/O in flight a
    # queued bio, so an unbounded value would only exhaust memory.
    numjobs = p.integer("numjobs", 1, MAX_NUMJOBS, 1)
    iodepth = p.integer("iodepth", 1, MAX_IODEPTH, 1)
    thinktime = p.time("thinktime", "us", 0.0)
    thinktime_blocks = p.integer("thinktime_blocks", 1, None, 1)
    rate_iops = p.number("rate_iops", 0, None, None)
    if rate_iops is not None and rate_iops <= 0:
        p.fail("rate_iops", "a positive number of I/Os per second", table["rate_iops"])
    rate_bytes = None
    if "rate" in table:
        value = table["rate"]
        if isinstance(value, str) and "," in value:
            p.fail("rate", "one bandwidth for reads and writes together, e.g. 1m (separate "
                           "read,write rates are not simulated)", value)
        try:
            rate_bytes = parse_size(value, "rate")
        except ValueError:
            rate_bytes = 0
        if not rate_bytes > 0:
            p.fail("rate", "a positive bandwidth in bytes per second, e.g. 500k or 10m", value)
        if rate_iops is not None:
            p.fail("rate", "rate or rate_iops, not both", value)
    random_distribution = ("random",)
    if "random_distribution" in table:
        from blksim.traces.distributions import parse_random_distribution
        try:
            random_distribution = parse_random_distribution(table["random_distribution"])
        except ValueError as exc:
            p.fail("random_distribution", str(exc).rsplit(", found", 1)[0],
                   table["random_distribution"])
    ramp_time = p.time("ramp_time", "s", 0.0)
    rate_process = table.get("rate_process", "poisson")
    if rate_process not in RATE_PROCESSES:
        p.fail("rate_process", f"one of {', '.join(RATE_PROCESSES)}", rate_process)
    number_ios = p.integer("number_ios", 0, None, 0) or None   # fio: 0 = no limit
    runtime = p.time("runtime", "s", 0.0) or None              # fio: 0 = no limit
    startdelay = p.time("startdelay", "s", 0.0)

    sync = table.get("sync")
    if sync is not None:
        if sync not in (True, False, 0, 1) or isinstance(sync, float):
            p.fail("sync", "true or false (or 1 or 0)", sync)
        sync = bool(sync)
    nice = p.integer("nice", -20, 19, 0)
    prio = p.integer("prio", 0, 7, None)
    prioclass = p.integer("prioclass", 1, 3, None)
    direct = None
    for key, inverse in (("direct", False), ("buffered", True)):
        if key in table:
            value = table[key]
            if value not in (True, False, 0, 1) or isinstance(value, float):
                p.fail(key, "1 or 0 (or true or false)", value)
            flag = bool(value) != inverse
            if direct is not None and flag != direct:
                p.fail(key, "a value agreeing with direct", value)
            direct = flag
    fsync = p.integer("fsync", 0, 1 << 31, 0)
    fdatasync = p.integer("fdatasync", 0, 1 << 31, 0)
    if fsync and fdatasync and fsync != fdatasync:
        p.fail("fdatasync", f"the same count as fsync ({fsync}), or only one of them",
               fdatasync)
    fsync = fsync or fdatasync        # the same here: blksim has no metadata to skip
    end_fsync = table.get("end_fsync", False)
    if end_fsync not in (True, False, 0, 1) or isinstance(end_fsync, float):
        p.fail("end_fsync", "1 or 0 (or true or false)", end_fsync)
    ioengine = table.get("ioengine")
    if ioengine is not None and ioengine not in IOENGINES:
        p.fail("ioengine", f"one of {', '.join(IOENGINES)}", ioengine)
    batch_submit, complete_min, complete_max = _batching(table, p, iodepth)
    cpus_allowed = None
    if "cpus_allowed" in table:
        cpus_allowed = parse_cpu_list(table["cpus_allowed"], p)
    policy = table.get("cpus_allowed_policy", "shared")
    if policy not in CPUS_POLICIES:
        p.fail("cpus_allowed_policy", f"one of {', '.join(CPUS_POLICIES)}", policy)
    invalidate = table.get("invalidate", True)
    if invalidate not in (True, False, 0, 1) or isinstance(invalidate, float):
        p.fail("invalidate", "1 or 0 (or true or false)", invalidate)
    filename = table.get("filename")
    if filename is not None and (not isinstance(filename, str) or not filename):
        p.fail("filename", "a device name", filename)

    if device_size is not None:
        last_start = offset + (numjobs - 1) * offset_increment
        end = last_start + (size if size is not None else max_bs)
        if end > device_size:
            if size is not None and "size" in table:
                key = "size"
            elif numjobs > 1 and offset_increment:
                key = "offset_increment"
            else:
                key = "offset"
            p.fail(key, f"a region inside the device ({device_size} bytes), but the last "
                   f"clone's region would end at byte {end}", table.get(key))

    return JobSpec(
        name=name, rw=rw, rwmixread=float(rwmixread), bssplit=bssplit, blockalign=blockalign,
        offset=offset, size=size, offset_increment=offset_increment, device_size=device_size,
        numjobs=numjobs, iodepth=iodepth, thinktime=thinktime, thinktime_blocks=thinktime_blocks,
        rate_iops=None if rate_iops is None else float(rate_iops), rate_process=rate_process,
        number_ios=number_ios, runtime=runtime, startdelay=startdelay, sync=sync, nice=nice,
        prio=prio, prioclass=prioclass, filename=filename, direct=direct, fsync=fsync,
        end_fsync=bool(end_fsync), ioengine=ioengine, invalidate=bool(invalidate),
        random_distribution=random_distribution,
        rate_bytes=None if rate_bytes is None else float(rate_bytes), ramp_time=ramp_time,
        write_bs=write_bs, iodepth_batch_submit=batch_submit,
        iodepth_batch_complete_min=complete_min, iodepth_batch_complete_max=complete_max,
        cpus_allowed=cpus_allowed, cpus_allowed_policy=policy,
    )


def _batching(table: dict, p: "_Fields", iodepth: int) -> tuple[int, int, int]:
    """fio's iodepth_batch_submit (alias iodepth_batch), iodepth_batch_complete_min (alias
    iodepth_batch_complete) and iodepth_batch_complete_max, defaults 1, 1 and 0 (options.c),
    then fixed up as fio's ``fixup_options`` (init.c) does: a submit batch of 0 or above
    iodepth becomes iodepth; a maximum below the minimum becomes the minimum."""
    values = []
    for key, alias, default in (("iodepth_batch_submit", "iodepth_batch", 1),
                                ("iodepth_batch_complete_min", "iodepth_batch_complete", 1),
                                ("iodepth_batch_complete_max", None, 0)):
        if alias is not None and key in table and alias in table:
            p.fail(alias, f"only one of {key!r} and its alias {alias!r}", table[alias])
        name = alias if alias is not None and alias in table else key
        values.append(p.integer(name, 0, MAX_IODEPTH, default))
    submit, complete_min, complete_max = values
    if submit == 0 or submit > iodepth:
        submit = iodepth
    if complete_min > complete_max:
        complete_max = complete_min
    return submit, complete_min, complete_max


def parse_cpu_list(value, p: "_Fields") -> tuple[int, ...]:
    """fio's cpus_allowed: CPU numbers and ranges separated by commas ("0-3,6"), or one
    number; the CPUs in increasing order, each once."""
    expected = "a CPU list such as \"0-3,6\" (numbers and ranges from 0)"
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        p.fail("cpus_allowed", expected, value)
    cpus: set[int] = set()
    for part in value.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or not lo.isascii() or (dash and (not hi.isdigit()
                                                             or not hi.isascii())):
            p.fail("cpus_allowed", expected, value)
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first or last >= MAX_CPUS:
            p.fail("cpus_allowed", f"{expected}, each range increasing and below {MAX_CPUS}",
                   value)
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def parse_jobs(tables, source: str, device_sectors) -> list[JobSpec]:
    """Parse a list of ``[[job]]`` tables from ``source`` (a file name); names must be unique.
    ``device_sectors``: the size of the device every job works on, or a list with each
    job's (see `parse_job`)."""
    if not isinstance(tables, list) or not tables:
        raise ValueError(f"{source}: [[job]]: expected at least one job table, found {tables!r}")
    jobs: list[JobSpec] = []
    seen: set[str] = set()
    for index, table in enumerate(tables, 1):
        name = table.get("name") if isinstance(table, dict) else None
        where = f"{source}: job {name!r}" if isinstance(name, str) else f"{source}: job #{index}"
        sectors = device_sectors[index - 1] if isinstance(device_sectors, list) \
            else device_sectors
        job = parse_job(table, where, sectors)
        if job.name in seen:
            raise ValueError(f"{where}: name: expected a name not used by another job, "
                             f"found {job.name!r} again")
        seen.add(job.name)
        jobs.append(job)
    return jobs


def _parse_bssplit(value, p: "_Fields") -> tuple[tuple[int, float], ...]:
    """fio's "4k/50:64k/50" string, or a list of [size, percent]; entries without a
    percentage share what is left of 100 equally, as fio does."""
    expected = ("fio's bssplit syntax such as '4k/50:64k/50', or a list such as "
                "[[4096, 50], ['64k', 50]]")
    entries: list[tuple[object, object]] = []
    if isinstance(value, str):
        if "," in value:
            p.fail("bssplit", "one split for reads and writes alike (separate read,write "
                   "splits are not supported)", value)
        for part in value.split(":"):
            size_text, slash, pct_text = part.partition("/")
            if not size_text.strip():
                p.fail("bssplit", expected, value)
            blank = not pct_text.strip()
            entries.append((size_text.strip(), None if blank else _percent_text(pct_text, p, value)))
    elif isinstance(value, list) and value:
        for item in value:
            if not isinstance(item, list) or len(item) != 2:
                p.fail("bssplit", expected, value)
            entries.append((item[0], item[1]))
    else:
        p.fail("bssplit", expected, value)

    given = 0.0
    for _, pct in entries:
        if pct is not None:
            if isinstance(pct, bool) or not isinstance(pct, (int, float)) \
                    or not 0 <= pct <= 100 or not math.isfinite(pct):
                p.fail("bssplit", "percentages between 0 and 100", value)
            given += pct
    blank = sum(1 for _, pct in entries if pct is None)
    if given > 100 + 1e-9 or (blank == 0 and not math.isclose(given, 100.0)):
        p.fail("bssplit", f"percentages adding up to 100 (they add up to {given:g})", value)
    share = (100.0 - given) / blank if blank else 0.0

    split = []
    for size, pct in entries:
        nbytes = p.sectors_size("bssplit", None, positive=True, value=size)
        pct = share if pct is None else float(pct)
        if pct > 0:
            split.append((nbytes, pct))
    if not split:
        p.fail("bssplit", "at least one block size with a percentage above 0", value)
    return tuple(split)


def _percent_text(text: str, p: "_Fields", whole) -> float:
    try:
        return float(text)
    except ValueError:
        p.fail("bssplit", "a number after each '/'", whole)


class _Fields:
    """Reads typed values from one job table; every failure names `where` and the key."""

    def __init__(self, table: dict, where: str) -> None:
        self.table = table
        self.where = where

    def fail(self, key: str, expected: str, found) -> None:
        raise ValueError(f"{self.where}: {key}: expected {expected}, found {found!r}")

    def integer(self, key, lo, hi, default):
        value = self.table.get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int) \
                or value < lo or (hi is not None and value > hi):
            bounds = f"from {lo} to {hi}" if hi is not None else f"of at least {lo}"
            self.fail(key, f"an integer {bounds}", value)
        return value

    def number(self, key, lo, hi, default):
        value = self.table.get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < lo or (hi is not None and value > hi):
            bounds = f"from {lo} to {hi}" if hi is not None else f"of at least {lo}"
            self.fail(key, f"a number {bounds}", value)
        return value

    def time(self, key, default_unit, default):
        if key not in self.table:
            return default
        try:
            return parse_time(self.table[key], key, default_unit)
        except ValueError as exc:
            raise ValueError(f"{self.where}: {exc}") from None

    def sectors_size(self, key, default, positive, value=None):
        """A size in bytes that must be a whole number of 512-byte sectors."""
        if value is None:
            if key not in self.table:
                return default
            value = self.table[key]
        try:
            nbytes = parse_size(value, key)
        except ValueError as exc:
            raise ValueError(f"{self.where}: {exc}") from None
        if nbytes % SECTOR or (positive and nbytes == 0):
            self.fail(key, f"a {'positive ' if positive else ''}multiple of {SECTOR} bytes", value)
        return nbytes

    def region_size(self, key, default, device_size, align):
        """A size, or an fio percentage of the device ("50%") rounded down to `align`."""
        if key not in self.table:
            return default
        value = self.table[key]
        if isinstance(value, str) and value.strip().endswith("%"):
            try:
                pct = float(value.strip()[:-1])
            except ValueError:
                pct = -1.0
            if not 0 <= pct <= 100:
                self.fail(key, "a percentage from 0% to 100%", value)
            if device_size is None:
                self.fail(key, "a size in bytes (a percentage needs the device size, "
                          "which is not known here)", value)
            return int(device_size * pct / 100) // align * align
        return self.sectors_size(key, default, positive=False)
