"""The disks of a run: ``[device]`` and ``[queue]`` (sda) and ``[devices.NAME]`` with its
``queue`` sub-table, checked and with every default filled in, and written back for the
resolved configuration. A device's own keys are its type's
(`blksim.disk_models.registry`); the queue's carry the kernel's sysfs names.
Partitions and volumes are `blksim.sim.storage_config`'s."""

from __future__ import annotations

from blksim.block.elevator import resolve_tunables
from blksim.block.mq.elevator import is_multiqueue, resolve_for_kernel
from blksim.common.config_values import ConfigError
from blksim.common.config_values import check_keys as _check_keys, int_value as _int
from blksim.schedulers import MQ_SCHEDULERS, SCHEDULERS, NoneScheduler, get_scheduler


QUEUE_KEYS = {
    "scheduler": "the elevator: " + ", ".join(SCHEDULERS) + " (2.6 kernels); "
                 + ", ".join(MQ_SCHEDULERS) + " (5.4 to 6.6; default: the kernel's choice "
                 "for the device)",
    "nr_requests": "requests per direction before submitters block (default 128, range "
                   "4..1048576); multi-queue kernels: scheduler tags per hardware queue "
                   "(default 2 * min(queue_depth, 128), without a scheduler the tag depth)",
    "max_sectors_kb": "largest request in KiB (default 512, range 4..max_hw_sectors_kb)",
    "max_hw_sectors_kb": "the driver's limit in KiB (default 512 = SCSI's 1024 sectors)",
    "nomerges": "0 all merges, 1 only the one-hit cache, 2 none (default 0)",
    "read_ahead_kb": "file read-ahead's largest window, KiB (default 128; 0: none)",
    "iosched": "table of the scheduler's tunables (queue/iosched/...)",
    "rq_affinity": "multi-queue kernels: 0, 1 (default) or 2: on which CPU a request "
                   "completes (queue/rq_affinity)",
    "wbt_lat_usec": "multi-queue kernels: writeback throttling's read latency target, us "
                    "(-1 default: 75000 rotational, 2000 otherwise; 0 off)",
    "rotational": "multi-queue kernels: 1 for spinning media (default: the device's)",
    "nr_hw_queues": "not a queue file: hardware queues are the device's ([device] "
                    "nr_hw_queues of a service device; a SCSI disk has one)",
}
#: [queue] keys only the multi-queue kernels have.
MQ_ONLY_KEYS = ("rq_affinity", "wbt_lat_usec", "rotational")


#: A disk's table besides its device's keys (`blksim.disk_models.registry.device_keys`).
DISK_TABLE_KEYS = {"queue": "the disk's request queue: a table with the keys of [queue]",
                   "partition": "the disk's partitions ([[devices.NAME.partition]])"}


def parse_disks(raw: dict, source: str, scheduler: str | None, lenient_iosched: bool,
             device_sectors: int | None, scheduler_devices, kernel: str = "2.6.18",
             cpus: int | None = None) -> tuple:
    """The run's disks (with partitions) and volumes: (devices by name, volumes, every
    name a job may use -> the device's name, sectors by device name)."""
    from blksim.sim import storage_config as sc
    device = raw.get("device", {})
    queue = raw.get("queue", {})
    from blksim.disk_models.registry import device_keys
    _check_keys(device, {**device_keys(), "partition": "partitions ([[device.partition]])"},
                f"{source}: [device]")
    _check_keys(queue, QUEUE_KEYS, f"{source}: [queue]")
    extra = raw.get("devices", {})
    if not isinstance(extra, dict):
        raise ConfigError(f"{source}: devices must be a table of disks ([devices.sdb])")
    tables = {}
    if sc.PRIMARY in extra:
        if device or queue:
            raise ConfigError(f"{source}: [devices.{sc.PRIMARY}] and [device]/[queue] both "
                              f"describe {sc.PRIMARY}; give one of them")
    else:
        tables[sc.PRIMARY] = (device, queue, False)
    for name, table in extra.items():
        sc.check_disk_name(name, f"{source}: [devices.{name}]")
        _check_keys(table, {**device_keys(), **DISK_TABLE_KEYS}, f"{source}: [devices.{name}]")
        tables[name] = (table, table.get("queue", {}), True)
    if len(tables) > 16 + 16 * 15:
        sc.disk_numbers(len(tables))          # raises: more disks than Linux numbers
    if scheduler_devices is not None:
        unknown = [d for d in scheduler_devices if d not in tables]
        if unknown:
            raise ConfigError(f"{source}: no disk {unknown[0]!r} to vary the scheduler of; "
                              f"disks: {', '.join(tables)}")
    devices = {}
    aliases: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for name, (dev, q, in_devices) in tables.items():
        varied = scheduler_devices is None or name in scheduler_devices
        cfg = parse_disk(name, dev, q, source, in_devices, scheduler if varied else None,
                      lenient_iosched if varied else False,
                      device_sectors if name == sc.PRIMARY else None, kernel, cpus)
        where = f"{source}: [devices.{name}]" if in_devices else f"{source}: [device]"
        cfg.partitions = sc.partitions(dev.get("partition", []), name, cfg.sectors, where)
        devices[name] = cfg
        for block in [name] + [p.name for p in cfg.partitions]:
            for alias in sc.device_aliases(block):
                aliases[alias] = block
        sizes[name] = cfg.sectors
        for part in cfg.partitions:
            sizes[part.name] = part.sectors
    volumes = sc.volumes(raw.get("volumes", {}), dict(sizes), aliases, source)
    for vol in volumes:
        for alias in sc.volume_aliases(vol.name, vol.dm_name):
            if alias in aliases:
                raise ConfigError(f"{source}: [volumes.{vol.name}]: the name {alias!r} is "
                                  f"already a disk's or partition's")
            aliases[alias] = vol.dm_name
        sizes[vol.dm_name] = vol.sectors
    return devices, volumes, aliases, sizes


def parse_disk(name: str, device: dict, queue: dict, source: str, in_devices: bool,
            scheduler: str | None, lenient_iosched: bool,
            device_sectors: int | None, kernel: str = "2.6.18",
            cpus: int | None = None) -> "DeviceConfig":
    """One disk's device and queue tables, validated, every default filled in.

    ``sda`` is ``[device]`` and ``[queue]`` (sysfs paths ``queue/...``), any other disk
    ``[devices.NAME]`` and ``[devices.NAME.queue]`` (``NAME/queue/...``). The device's
    own keys are its type's (`blksim.disk_models.registry`)."""
    from blksim.disk_models import registry
    from blksim.sim.storage_config import DeviceConfig
    if in_devices:
        where_d, where_q = f"{source}: [devices.{name}]", f"{source}: [devices.{name}.queue]"
        where_top, qpath = where_q, f"{name}/queue/"
        where = registry.Where(source, f"[devices.{name}]")
    else:
        where_d, where_q = f"{source}: [device]", f"{source}: [queue]"
        where_top, qpath = source, "queue/"
        where = registry.Where(source, "[device]")
    device = {k: v for k, v in device.items() if k not in ("queue", "partition")}
    _check_keys(device, registry.device_keys(), where_d)
    _check_keys(queue, QUEUE_KEYS, where_q)
    dtype, settings = registry.parse(device, where)
    refusal = dtype.refuse_kernel(settings, kernel)
    if refusal is not None:
        raise ConfigError(f"{where_d}: {refusal}")
    if cpus and dtype.limit_hw_queues is not None and is_multiqueue(kernel):
        settings = dtype.limit_hw_queues(settings, cpus)
    queue_depth = _int(device, "queue_depth", where_d, None, 1, 256)
    if queue_depth is None:
        queue_depth = dtype.queue_depth(settings)
    if not device_sectors:
        device_sectors = dtype.sectors(settings, where)

    multi = is_multiqueue(kernel)
    if "nr_hw_queues" in queue:
        raise ConfigError(f"{where_q}: nr_hw_queues is not a queue file: the hardware queues "
                          f"are the device's ([device] nr_hw_queues of a service device; a "
                          f"SCSI or SATA disk and a RAID controller have one)")
    if not multi:
        for key in MQ_ONLY_KEYS:
            if key in queue:
                raise ConfigError(f"{where_q}: {key} is a multi-queue kernel's (5.4 to 6.6); "
                                  f"kernel {kernel} has no {qpath}{key}")
    nr_hw_queues = dtype.hw_queues(settings)
    chosen = None
    sched = scheduler or queue.get("scheduler")
    if sched is None:
        if multi:
            # elevator_get_default (5.4-6.6): one hardware queue mq-deadline, several none
            sched = "mq-deadline" if nr_hw_queues == 1 else "none"
            chosen = (f"{name}: kernel {kernel} chose {sched} "
                      f"({'one hardware queue' if nr_hw_queues == 1 else f'{nr_hw_queues} hardware queues'}"
                      f": elevator_get_default)")
        else:
            sched = "deadline"
    try:
        elevator_cls = get_scheduler(str(sched), kernel)
        # the name as given: a built-in's, an installed plugin's, or module:Class
        sched_name = str(sched)
    except ValueError as exc:
        raise ConfigError(f"{where_top}: {qpath}scheduler: {exc}") from None
    if multi:
        nr_requests = _int(queue, "nr_requests", where_q, None, 4, 2048)
    else:
        nr_requests = _int(queue, "nr_requests", where_q, 128, 4, 1 << 20)
    max_hw = _int(queue, "max_hw_sectors_kb", where_q, 512, 4, 32767)
    # BLK_DEF_MAX_SECTORS: 1280 KiB on the multi-queue lines, 512 on 2.6
    max_kb = _int(queue, "max_sectors_kb", where_q, min(1280 if multi else 512, max_hw), 4,
                  max_hw)
    nomerges = _int(queue, "nomerges", where_q, 0, 0, 2)
    read_ahead_kb = _int(queue, "read_ahead_kb", where_q, 128, 0, 1 << 20)
    rq_affinity = wbt = rotational = None
    if multi:
        rq_affinity = _int(queue, "rq_affinity", where_q, 1, 0, 2)
        wbt = _int(queue, "wbt_lat_usec", where_q, -1, -1, 2**31 - 1)
        rotational = bool(_int(queue, "rotational", where_q,
                               1 if dtype.rotational(settings) else 0, 0, 1))
    given = queue.get("iosched", {})
    if not isinstance(given, dict):
        raise ConfigError(f"{where_q}: iosched must be a table of tunables")
    tunables = (elevator_cls.tunables_for(kernel) if hasattr(elevator_cls, "tunables_for")
                else elevator_cls.tunables)
    dropped = []
    if lenient_iosched is not False:
        # a set of names (iosched_leniency): those were asked for explicitly and stay errors
        strict = lenient_iosched if isinstance(lenient_iosched, frozenset) else ()
        names = {t.name for t in tunables}
        dropped = sorted(k for k in given if k not in names and k not in strict)
        given = {k: v for k, v in given.items() if k not in dropped}
    try:
        if elevator_cls is NoneScheduler or not hasattr(elevator_cls, "tunables_for"):
            iosched = resolve_tunables(tunables, given, sched_name)
        else:
            iosched = resolve_for_kernel(elevator_cls, kernel, given)
    except ValueError as exc:
        raise ConfigError(f"{where_top}: {exc}") from None

    cfg = DeviceConfig(
        name=name, type=dtype.name, settings=settings, queue_depth=queue_depth,
        scheduler=sched_name, nr_requests=nr_requests, max_sectors_kb=max_kb,
        max_hw_sectors_kb=max_hw, nomerges=nomerges, iosched=iosched, sectors=device_sectors,
        read_ahead_kb=read_ahead_kb, rq_affinity=rq_affinity, wbt_lat_usec=wbt,
        rotational=rotational, nr_hw_queues=nr_hw_queues, chosen_by_kernel=chosen)
    cfg.dropped_tunables = dropped       # another scheduler's tunables, left out
    return cfg


def dropped_notes(devices: dict, source: str) -> list:
    """A note per disk whose scheduler the kernel chose, and per disk whose configured
    tunables the run's scheduler does not have (a comparison or --scheduler leaves them
    out)."""
    out = []
    for name, dev in devices.items():
        if dev.chosen_by_kernel:
            out.append(f"{source}: {dev.chosen_by_kernel}")
        dropped = getattr(dev, "dropped_tunables", [])
        if dropped:
            out.append(f"{source}: {name}: {dev.scheduler} has no tunable "
                       f"{', '.join('queue/iosched/' + t for t in dropped)}; left out for this "
                       f"run")
    return out


def disk_tables(dev, queue_depth: int) -> tuple[dict, dict]:
    """A disk's device and queue tables, every default written out."""
    from blksim.disk_models.registry import device_type
    device = device_type(dev.type).table(dev.settings, queue_depth)
    if dev.partitions:
        device["partition"] = [{"start": p.start * 512, "size": p.sectors * 512}
                               for p in dev.partitions]
    queue = {"scheduler": dev.scheduler, "nr_requests": dev.nr_requests,
             "max_sectors_kb": dev.max_sectors_kb, "max_hw_sectors_kb": dev.max_hw_sectors_kb,
             "nomerges": dev.nomerges, "read_ahead_kb": dev.read_ahead_kb,
             "iosched": dict(dev.iosched)}
    if dev.nr_requests is None:          # the kernel's default for the scheduler
        from blksim.block.mq.queue import default_nr_requests
        queue["nr_requests"] = default_nr_requests(queue_depth, dev.scheduler != "none")
        if queue["nr_requests"] < 4:
            # below what sysfs takes (BLKDEV_MIN_RQ): written out, it would be refused on
            # reading back; left out, the same default is computed again
            del queue["nr_requests"]
    if dev.rq_affinity is not None:
        queue.update(rq_affinity=dev.rq_affinity, wbt_lat_usec=dev.wbt_lat_usec,
                     rotational=int(dev.rotational))
    return device, queue
