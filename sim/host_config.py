"""The ``[host]`` and ``[vm]`` tables: the host's CPUs (docs/jobs.md), memory, page cache
and copy rate, and the writeback tunables by their /proc/sys/vm names (docs/host-io.md)."""

from __future__ import annotations

from blksim.common.config_values import ConfigError
from blksim.common.config_values import check_keys as _check_keys, int_value as _int


HOST_KEYS = {
    "cpus": "the host's CPUs, on which the processes run and submit their bios, an integer "
            "from 1 to 4096 (default 4)",
    "memory": "the host's memory, bytes, whole 4 KiB pages (default 4g)",
    "page_cache": "memory the page cache may use, bytes, whole 4 KiB pages, more than 0 "
                  "(default 3/4 of memory)",
    "copy_mb_per_s": "how fast a buffered call copies between the page cache and the "
                     "process, MB/s of 10^6 bytes (default 2000)",
    "cpu_costs": "the CPU cost of the I/O path on a multi-queue kernel (docs/cpus.md): "
                 "false (default: none), true (blksim's preset) or a table overriding "
                 "the preset (irq_ns, complete_ns, usr_ns, engine.<name>, "
                 "scheduler.<name>)",
}


VM_KEYS = {
    "dirty_ratio": "per cent of memory dirty before writers are throttled (default 40)",
    "dirty_background_ratio": "per cent of memory dirty that starts background writeback "
                              "(default 10)",
    "dirty_expire_centisecs": "age at which dirty data is written back, 1/100 s (default 3000)",
    "dirty_writeback_centisecs": "interval of pdflush's periodic writeback, 1/100 s "
                                 "(default 500; 0: none)",
}


def parse_vm(table, source: str) -> dict:
    """``[vm]``: the writeback tunables, by their /proc/sys/vm names."""
    from blksim.hostio.writeback import VM_DEFAULTS
    where = f"{source}: [vm]"
    _check_keys(table, VM_KEYS, where)
    out = {}
    for key, default in VM_DEFAULTS.items():
        hi = 100 if key.endswith("ratio") else 10 ** 8
        out[key] = _int(table, key, where, default, 0, hi)
    if out["dirty_ratio"] < out["dirty_background_ratio"]:
        raise ConfigError(f"{where}: dirty_ratio = {out['dirty_ratio']} is below "
                          f"dirty_background_ratio = {out['dirty_background_ratio']}: "
                          f"expected dirty_ratio >= dirty_background_ratio")
    return out


PAGE_BYTES = 4096


def parse_host(table, source: str) -> tuple:
    """``[host]``: the memory and the page cache's share of it, in bytes."""
    from blksim.common.units import parse_size
    where = f"{source}: [host]"
    _check_keys(table, HOST_KEYS, where)
    values = {}
    for key, default in (("memory", "4g"), ("page_cache", None)):
        if key not in table and default is None:
            continue
        try:
            values[key] = parse_size(table.get(key, default), key)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    memory = values["memory"]
    if memory < 1 << 20 or memory % PAGE_BYTES:
        raise ConfigError(f"{where}: memory expected a multiple of 4 KiB (a page), at least "
                          f"1m, found {table['memory']!r}")
    # the kernel counts memory and the page cache in pages (mm/page_alloc.c): neither
    # holds a part of one, and a cache of no page holds no file data to read or write
    page_cache = values.get("page_cache", memory * 3 // 4 // PAGE_BYTES * PAGE_BYTES)
    if "page_cache" in values and (page_cache <= 0 or page_cache % PAGE_BYTES):
        raise ConfigError(f"{where}: page_cache expected a positive multiple of 4 KiB (a "
                          f"page), found {table['page_cache']!r}")
    if page_cache > memory:
        raise ConfigError(f"{where}: page_cache = {table['page_cache']!r} is more than memory "
                          f"({memory} bytes)")
    rate = table.get("copy_mb_per_s", 2000)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < 1e9:
        raise ConfigError(f"{where}: copy_mb_per_s expected a positive number, found {rate!r}")
    return memory, page_cache, float(rate) * 1e6


def parse_cpu_costs(table, source: str, kernel: str):
    """``[host] cpu_costs``: the resolved cost table in ns (`blksim.sim.cpu_time`), or
    None when the run has no CPU costs. Refused on a 2.6 kernel, which has no CPU
    model."""
    from blksim.block.mq.elevator import is_multiqueue
    from blksim.sim.cpu_time import parse_cpu_costs as parse
    table = table if isinstance(table, dict) else {}
    costs = parse(table.get("cpu_costs"), f"{source}: [host]")
    if costs is not None and not is_multiqueue(kernel):
        raise ConfigError(f"{source}: [host] cpu_costs: the CPU cost model is the "
                          f"multi-queue layer's (kernel 5.4 on); kernel = {kernel!r} has "
                          f"none: remove cpu_costs or choose a 5.x or 6.x kernel")
    return costs


def parse_cpus(table, source: str) -> int:
    """``[host] cpus``: how many CPUs the host has (`blksim.sim.cpus`)."""
    from blksim.sim.cpus import DEFAULT_CPUS, MAX_CPUS
    return _int(table if isinstance(table, dict) else {}, "cpus", f"{source}: [host]",
                DEFAULT_CPUS, 1, MAX_CPUS)
