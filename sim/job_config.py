"""The ``[[job]]`` tables and fio job files (``fio``): the devices or files each job works
on, what the I/O path models of them, fio's engines' depths, and a job written back as a
table for the resolved configuration (docs/workloads.md). The options themselves are
`blksim.traces.jobs`'."""

from __future__ import annotations

import os

from blksim.common.config_values import ConfigError, seconds_text


def target(text, where: str, aliases: dict) -> str:
    """The device a ``filename`` names (a disk, partition or volume)."""
    if not isinstance(text, str) or not text:
        raise ConfigError(f"{where}: expected a device such as \"/dev/sdb\", found {text!r}")
    name = aliases.get(text.strip())
    if name is None:
        known = sorted({k for k in aliases if k.startswith("/dev/")})
        raise ConfigError(f"{where}: no device {text!r} in this run; devices: "
                          f"{', '.join(known)}")
    return name


def job_files(table, index: int, source: str, aliases: dict) -> tuple:
    """The devices a job's ``filename`` names: one, or several separated by ':' as fio
    separates them (default: sda)."""
    from blksim.sim.storage_config import PRIMARY
    if not isinstance(table, dict) or table.get("filename") is None:
        return (PRIMARY,)
    name = table.get("name")
    where = f"{source}: job {name!r}: filename" if isinstance(name, str) \
        else f"{source}: job #{index + 1}: filename"
    text = table["filename"]
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: expected a device such as \"/dev/sdb\", found {text!r}")
    files = tuple(target(part, where, aliases) for part in text.split(":"))
    if len(set(files)) != len(files):
        raise ConfigError(f"{where}: {text!r} names a device twice")
    return files


def check_file_io(job, files, aliases: dict, source: str) -> None:
    """What the I/O path models: buffered reads and direct I/O to files, direct I/O to
    devices."""
    where = f"{source}: job {job.name!r}"
    on_files = [f for f in files if f.startswith("/") and aliases.get(f) == f]
    if on_files and len(on_files) != len(files):
        raise ConfigError(f"{where}: filename mixes files and devices; give one kind")
    if not on_files and (job.fsync or job.end_fsync):
        raise ConfigError(f"{where}: fsync needs a file: a job on a device writes no dirty "
                          f"pages to sync; put a [[file]] on it")
    if not on_files and job.direct is False:
        raise ConfigError(f"{where}: direct = 0 on a device: buffered I/O through a block "
                          f"device's own page cache is not modelled (a job on a device "
                          f"submits its bios directly); put a [[file]] on it instead")


def check_trims(job, targets, aliases: dict, source: str, kernel: str,
                discard_of: dict) -> None:
    """A trim job (fio's trim, randtrim, trimwrite, randtrimwrite) needs a multi-queue
    kernel line (blksim models discards there only) and disks or partitions whose device
    takes discards (``discard_of``: a disk's or partition's name -> its device's
    ``max_discard_sectors``, 0 without discard support): the kernel fails a discard to
    any other with EOPNOTSUPP (``submit_bio_noacct``), and so would fio's job."""
    if not job.trims:
        return
    from blksim.block.mq.elevator import is_multiqueue
    where = f"{source}: job {job.name!r}: rw = {job.rw!r}"
    if not is_multiqueue(kernel):
        raise ConfigError(f"{where}: discards are modelled on the multi-queue kernel lines "
                          f"only; [run] kernel is {kernel}")
    for target in targets:
        name = aliases.get(target, target)
        limit = discard_of.get(name)
        if limit is None:
            raise ConfigError(f"{where}: {target} is not a disk or a partition; blksim "
                              f"discards only on those (not files or device-mapper volumes)")
        if limit == 0:
            raise ConfigError(f"{where}: {target}'s device does not support discard "
                              f"(queue/discard_max_bytes is 0)")
        if job.max_bs // 512 > limit:
            raise ConfigError(f"{where}: a {job.max_bs}-byte trim exceeds {target}'s "
                              f"queue/discard_max_bytes ({limit * 512} bytes)")


def engine_depth(job, targets, aliases: dict, source: str, warnings: list,
                 kernel: str = "2.6.18"):
    """fio's I/O engines (`blksim.sim.ioengine`): a synchronous one keeps one I/O in
    flight, as fio notes (backend.c); libaio keeps ``iodepth``, except on buffered files,
    where Linux's io_submit does the I/O synchronously. A capped depth is said in a
    warning. An engine the kernel line lacks (io_uring before 5.1) is an error."""
    from dataclasses import replace
    from blksim.sim.ioengine import ENGINES, engine_available
    if job.ioengine is None:
        return job
    if not engine_available(job.ioengine, kernel):
        raise ConfigError(f"{source}: job {job.name!r}: ioengine = {job.ioengine!r} needs "
                          f"Linux {ENGINES[job.ioengine].since} or later "
                          f"({ENGINES[job.ioengine].calls}); [run] kernel is {kernel}")
    if job.iodepth <= 1:
        return job
    on_files = all(t.startswith("/") and aliases.get(t) == t for t in targets)
    if ENGINES[job.ioengine].synchronous:
        why = (f"ioengine {job.ioengine} is synchronous; fio: \"note: both iodepth >= 1 "
               f"and synchronous I/O engine are selected, queue depth will be capped at 1\"")
    elif on_files and not job.direct and job.ioengine == "libaio":
        why = "libaio on a buffered file is synchronous: io_submit does the I/O itself"
    else:
        return job
    warnings.append(f"{source}: job {job.name!r}: iodepth {job.iodepth} capped at 1 ({why})")
    return replace(job, iodepth=1, iodepth_batch_submit=1, iodepth_batch_complete_min=1,
                   iodepth_batch_complete_max=1)


def fio_jobs(value, source: str) -> tuple[list, list]:
    """The jobs of the fio job file(s) named by the top-level ``fio`` key."""
    from blksim.traces.fiofile import FioFileError, read_fio_jobfile
    if value is None:
        return [], []
    paths = value if isinstance(value, list) else [value]
    tables: list = []
    warnings: list = []
    for p in paths:
        if not isinstance(p, str):
            raise ConfigError(f"{source}: fio must be a path to an fio job file (or a list of "
                              f"them), found {p!r}")
        path = p if os.path.isabs(p) else os.path.join(os.path.dirname(os.path.abspath(source)), p)
        try:
            t, w = read_fio_jobfile(path)
        except FioFileError as exc:
            raise ConfigError(str(exc)) from None
        tables += t
        warnings += w
    return tables, warnings


def config_for_fio_jobfile(path: str) -> dict:
    """A raw configuration that runs an fio job file with every other setting at its default."""
    return {"fio": os.path.abspath(path)}


def distribution_text(dist: tuple) -> str:
    """fio's spelling of a parsed random_distribution."""
    if dist[0] == "zoned":
        return "zoned:" + ":".join(f"{a:g}/{s:g}" for a, s in dist[1])
    return f"{dist[0]}:{dist[1]:g}" if len(dist) > 1 else dist[0]


def job_table(job, iodepth_given: bool) -> dict:
    """A parsed job written back as a ``[[job]]`` table with every option explicit."""
    t = {"name": job.name, "rw": job.rw}
    if job.rw in ("rw", "randrw"):
        t["rwmixread"] = job.rwmixread
    if job.write_bs:
        t["bs"] = f"{job.bssplit[0][0]},{job.write_bs}"
    elif len(job.bssplit) == 1:
        t["bs"] = job.bssplit[0][0]
    else:
        t["bssplit"] = [[bs, pct] for bs, pct in job.bssplit]
    if job.random_distribution[0] != "random":
        t["random_distribution"] = distribution_text(job.random_distribution)
    t["blockalign"] = job.blockalign
    t["offset"] = job.offset
    if job.size is not None:
        t["size"] = job.size
    t["offset_increment"] = job.offset_increment
    t["numjobs"] = job.numjobs
    if not job.rate_iops or iodepth_given:
        t["iodepth"] = job.iodepth
    t["thinktime"] = seconds_text(job.thinktime)
    if job.thinktime_blocks != 1:
        t["thinktime_blocks"] = job.thinktime_blocks
    if job.rate_iops:
        t["rate_iops"] = job.rate_iops
        t["rate_process"] = job.rate_process
    if job.rate_bytes:
        t["rate"] = int(job.rate_bytes) if job.rate_bytes == int(job.rate_bytes) \
            else job.rate_bytes
        t["rate_process"] = job.rate_process
    if job.ramp_time:
        t["ramp_time"] = seconds_text(job.ramp_time)
    if job.number_ios:
        t["number_ios"] = job.number_ios
    if job.runtime:
        t["runtime"] = seconds_text(job.runtime)
    t["startdelay"] = seconds_text(job.startdelay)
    if job.sync is not None:
        t["sync"] = job.sync
    t["nice"] = job.nice
    if job.prio is not None:
        t["prio"] = job.prio
    if job.prioclass is not None:
        t["prioclass"] = job.prioclass
    if job.filename is not None:
        t["filename"] = job.filename
    if job.direct is not None:
        t["direct"] = int(job.direct)
    if job.ioengine is not None:
        t["ioengine"] = job.ioengine
        if job.ioengine in ("libaio", "io_uring"):
            t["iodepth_batch_submit"] = job.iodepth_batch_submit
            t["iodepth_batch_complete_min"] = job.iodepth_batch_complete_min
            t["iodepth_batch_complete_max"] = job.iodepth_batch_complete_max
    if job.cpus_allowed is not None:
        t["cpus_allowed"] = cpu_list_text(job.cpus_allowed)
        t["cpus_allowed_policy"] = job.cpus_allowed_policy
    if not job.invalidate:
        t["invalidate"] = 0
    if job.fsync:
        t["fsync"] = job.fsync
    if job.end_fsync:
        t["end_fsync"] = 1
    return t


def cpu_list_text(cpus) -> str:
    """fio's spelling of a CPU list: runs of consecutive CPUs as ranges ("0-3,6")."""
    parts = []
    for cpu in cpus:
        if parts and parts[-1][1] == cpu - 1:
            parts[-1][1] = cpu
        else:
            parts.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def check_cpus(job, cpus: int, source: str) -> None:
    """A job's ``cpus_allowed`` names CPUs of the host (fio: "CPU %d too large (max=%ld)",
    options.c ``set_cpus_allowed``)."""
    if job.cpus_allowed and job.cpus_allowed[-1] >= cpus:
        raise ConfigError(f"{source}: job {job.name!r}: cpus_allowed = "
                          f"{cpu_list_text(job.cpus_allowed)!r} names CPU "
                          f"{job.cpus_allowed[-1]}, but the host has CPUs 0 to {cpus - 1} "
                          f"([host] cpus = {cpus})")


def resolve_jobs(raw: dict, source: str, aliases: dict, sizes: dict,
                 kernel: str = "2.6.18", cpus: int | None = None,
                 discard_of: dict | None = None) -> tuple:
    """The run's jobs, from its fio job files (``fio``) and ``[[job]]`` tables: (the jobs,
    their tables, the devices or files each works on, warnings). ``kernel``: the run's
    kernel line (which engines it has); ``cpus``: the host's CPUs (default: blksim's)."""
    from blksim.sim.cpus import DEFAULT_CPUS
    if cpus is None:
        cpus = DEFAULT_CPUS
    from blksim.traces.jobs import parse_jobs
    jobs = []
    job_tables = raw.get("job", [])
    if not isinstance(job_tables, list):
        raise ConfigError(f"{source}: job must be an array of tables ([[job]])")
    fio_tables, warnings = fio_jobs(raw.get("fio"), source)
    job_tables = fio_tables + list(job_tables)
    job_targets = [job_files(t, i, source, aliases) for i, t in enumerate(job_tables)]
    if job_tables:
        try:
            # a job over several files works on each one; its region must fit the smallest
            jobs = parse_jobs(job_tables, source, [min(sizes[f] for f in files)
                                                   for files in job_targets])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for k, (job, targets) in enumerate(zip(jobs, job_targets)):
            check_file_io(job, targets, aliases, source)
            check_cpus(job, cpus, source)
            check_trims(job, targets, aliases, source, kernel, discard_of or {})
            jobs[k] = engine_depth(job, targets, aliases, source, warnings, kernel)
    return jobs, job_tables, job_targets, warnings
