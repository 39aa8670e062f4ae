"""Device type ``flash``: a flash drive (`blksim.disk_models.flash.drive`), NVMe or SATA.

``[device] flash`` names a preset (`blksim.disk_models.flash_presets`: ``list_flash_presets``)
or a flash TOML file (relative to the configuration file); the tuning keys below
override the preset's values (`blksim.disk_models.flash.spec.build_spec` checks them,
one line naming the key). docs/flash.md describes the model.

The drive offers a multi-queue kernel ``min(io_queues, the drive's maximum)`` hardware
queues (NVMe; the kernel's nvme driver asks for one I/O queue per CPU and the controller
grants at most its own count: drivers/nvme/host/pci.c, nvme_setup_io_queues), each
``queue_entries - 1`` commands deep; a SATA drive one queue of 32 (NCQ).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from blksim.common.config_values import ConfigError
from blksim.disk_models.registry import DeviceType, register

TUNING_KEYS = {
    "interface": "nvme or sata (default: the preset's)",
    "io_queues": "NVMe I/O queue pairs asked for, one per hardware queue; the drive grants "
                 "at most its own maximum (1 to 65535; default: the drive's maximum)",
    "queue_entries": "NVMe entries per submission queue, the nvme driver's io_queue_depth "
                     "(default 1024, at most the drive's); commands per queue = entries - 1",
    "arbitration": "NVMe command arbitration: rr (round robin) or wrr (weighted round robin "
                   "with urgent priority class) (default rr)",
    "arbitration_burst": "NVMe Arbitration Burst: commands fetched from one SQ per turn "
                         "(default 1)",
    "sq_priority": "with wrr: the SQs' classes, urgent, high, medium or low, a list repeated "
                   "over the SQs (default [\"medium\"])",
    "wrr_weights": "with wrr: commands per turn of the high, medium and low classes "
                   "(default [1, 1, 1])",
    "command_fetch": "NVMe: the controller's time to fetch one command, e.g. \"0.2us\" "
                     "(default: the preset's)",
    "pcie_gen": "PCIe generation 1 to 5 (default: the preset's)",
    "pcie_lanes": "PCIe lanes, 1, 2, 4, 8 or 16 (default: the preset's)",
    "fw_read": "firmware time per read command, e.g. \"3us\" (default: the preset's)",
    "fw_write": "firmware time per write, flush or discard command (default: the preset's)",
    "write_buffer": "DRAM write buffer, bytes (\"64m\"; 0: none, writes complete when "
                    "programmed; default: the preset's)",
    "plp": "power-loss protection: true or false (default: the preset's)",
    "over_provisioning": "spare fraction of the physical flash, above 0 and at most 0.5; "
                         "sets the capacity (default: 1 - capacity / raw bytes)",
    "blocks_per_plane": "erase blocks per plane: a smaller (or larger) drive of the same "
                        "build, its capacity from the over-provisioning",
    "mapping_unit": "bytes the FTL maps with one entry (default 4k)",
    "start_state": "fresh (empty), full (written once, in order) or steady (full, then "
                   "overwritten at random until steady) (default fresh)",
    "gc_policy": "garbage-collection victim choice: greedy or cost_benefit (default greedy)",
    "allocation": "plane allocation of writes: cwdp (static, channel first) or dynamic "
                  "(default cwdp)",
    "slc_cache": "SLC write cache, bytes of host data (0: none; default: the preset's)",
    "mapping_cache": "DRAM for the cached mapping table, bytes (0: the whole table in DRAM; "
                     "default 0)",
    "suspend": "program/erase suspension for reads: true or false (default false)",
    "copyback": "GC moves pages inside the plane (copyback), true or false (default true)",
    "multi_plane": "multi-plane programs, true or false (default true)",
    "channel_mts": "the flash channel's rate, mega-transfers per second of one byte "
                   "(default: the preset's)",
}


@dataclass
class FlashSettings:
    """A flash drive's ``[device]`` settings: the preset or file, the tuning keys given,
    and the resolved `FlashSpec`."""

    flash: str
    tuning: dict
    spec: object
    where: str = "[device]"            # for the FTL's messages at build time


def parse(device: dict, where) -> FlashSettings:
    """The preset and its tuning keys, resolved and checked."""
    from blksim.disk_models.base import DeviceError
    from blksim.disk_models.flash.spec import build_spec
    from blksim.disk_models.flash_presets import flash_file, load_flash_preset
    flash = device["flash"]
    if not isinstance(flash, str):
        raise ConfigError(f"{where}: flash must be a preset name or a path, found {flash!r}")
    if not os.path.isabs(flash) and (flash.endswith(".toml") or "/" in flash):
        flash = os.path.join(where.base_dir, flash) if os.path.exists(where.source) else flash
    tuning = {k: device[k] for k in TUNING_KEYS if k in device}
    try:
        preset = load_flash_preset(flash)
        spec = build_spec(preset, tuning, str(where), flash_file(flash))
    except DeviceError as exc:
        text = str(exc)
        raise ConfigError(text if text.startswith(str(where)) or ".toml" in text.split(":")[0]
                          else f"{where}: flash: {text}") from None
    return FlashSettings(flash, tuning, spec, str(where))


def build(s: FlashSettings, name: str, queue_depth: int | None, seed: int):
    """The drive: its FTL (preconditioned to the start state), interface and drive."""
    return make_flash_drive(s.spec, seed=seed, queue_depth=queue_depth, where=s.where)


def make_flash_drive(spec, seed: int = 0, queue_depth: int | None = None, ftl=None,
                     where: str = "flash drive"):
    """A `FlashDrive` of ``spec`` (``ftl``: one made beforehand, e.g. in tests)."""
    from blksim.disk_models.flash.drive import FlashDrive
    from blksim.disk_models.flash.host_interface import NvmeInterface, SataInterface
    if ftl is None:
        ftl = make_ftl(spec, seed, where)
    if spec.interface == "nvme":
        hi = NvmeInterface(spec.hw_queues, fetch_s=spec.fetch_s, gen=spec.pcie_gen,
                           lanes=spec.pcie_lanes, arbitration=spec.arbitration,
                           burst=spec.arbitration_burst, classes=spec.sq_priority,
                           weights=spec.wrr_weights)
    else:
        hi = SataInterface()
    mc = None
    if spec.mapping_cache_bytes and not spec.cells.in_place:
        from blksim.disk_models.flash.mapping_cache import MappingCache
        mc = MappingCache(spec.geometry, spec.logical_pages, spec.mapping_cache_bytes, where)
    drive = FlashDrive(spec, ftl, hi, queue_depth=queue_depth or spec.queue_depth,
                       mapping_cache=mc)
    drive.max_discard_sectors = max_discard_sectors(spec)
    return drive


def max_discard_sectors(spec) -> int:
    """``queue/discard_max_bytes`` / 512 as the kernel sets it for the drive: NVMe
    (Dataset Management, deallocate) ``UINT_MAX`` sectors (drivers/nvme/host/core.c,
    ``nvme_config_discard``, 5.4-6.6); SATA (TRIM, through SCSI WRITE SAME(16) with
    UNMAP) the Maximum Write Same Length libata reports, 65535 x ATA_MAX_TRIM_RNUM (64)
    blocks (drivers/ata/libata-scsi.c, ``ata_scsiop_inq_b0``); neither beyond the drive."""
    limit = 0xFFFFFFFF if spec.interface == "nvme" else 65535 * 64
    return min(limit, spec.capacity_sectors)


def make_ftl(spec, seed: int, where: str = "flash drive"):
    """The FTL of ``spec``, in its start state (the in-place map for 3D XPoint);
    ``where`` starts its messages (e.g. over-provisioning too small for its rules)."""
    if spec.cells.in_place:
        from blksim.disk_models.flash.inplace import InPlaceMap
        return InPlaceMap(spec.geometry, spec.logical_pages)
    from blksim.disk_models.flash.ftl import PageMappingFtl
    kwargs = {}
    if spec.slc_cache_blocks:
        kwargs = {"slc_cache_blocks_per_plane": spec.slc_cache_blocks,
                  "slc_pages_per_block": spec.geometry.pages_per_block // spec.cells.bits}
    ftl = PageMappingFtl(spec.geometry, spec.logical_pages, allocation=spec.allocation,
                         gc_policy=spec.gc_policy, seed=seed, where=where, **kwargs)
    ftl.precondition(spec.start_state, seed)
    return ftl


def kernel_refusal(s: FlashSettings, kernel: str) -> str | None:
    """The message refusing this drive on ``kernel`` (an NVMe drive on the 2.6 line,
    which predates the nvme driver, merged in Linux 3.3), or None. The host decides the
    kernel; the device type cannot see it, so the caller asks."""
    from blksim.block.mq.elevator import is_multiqueue
    if s.spec.interface == "nvme" and not is_multiqueue(str(kernel)):
        return (f"an NVMe drive needs a multi-queue kernel (5.4 to 6.6); kernel {kernel} "
                f"has no nvme driver (give interface = \"sata\" or another kernel)")
    return None


def limit_hw_queues(s: FlashSettings, cpus: int) -> FlashSettings:
    """An NVMe drive's I/O queues on a host of ``cpus`` CPUs: the nvme driver asks one per
    possible CPU (``nvme_max_io_queues``, with no write or poll queues by default) and the
    drive grants at most its own maximum (``nvme_set_queue_count``); drivers/nvme/host/
    pci.c, ``nvme_setup_io_queues``, 5.4-6.6."""
    from dataclasses import replace
    if s.spec.interface != "nvme" or s.spec.hw_queues <= cpus:
        return s
    return replace(s, spec=replace(s.spec, hw_queues=cpus))


def table(s: FlashSettings, queue_depth) -> dict:
    """The preset, the tuning keys given and the depth."""
    out = {"flash": s.flash, "queue_depth": queue_depth}
    out.update(s.tuning)
    return out


def misplaced(key: str, chosen: str) -> str:
    """A flash drive's key given with another type of device."""
    if key == "flash":
        return f"give either flash or {chosen}, not both"
    return f"{key} belongs to a flash drive ([device] flash), which is not set"


TYPE = register(DeviceType(
    name="flash", module=__name__, selected_by="flash",
    kind_keys={"flash": "instead of a drive, a flash drive: a flash preset name "
                        "(list_flash_presets) or a flash TOML file (docs/flash.md)"},
    tuning_keys=TUNING_KEYS,
    parse=parse, build=build, table=table,
    queue_depth=lambda s: s.spec.queue_depth,
    hw_queues=lambda s: s.spec.hw_queues, rotational=lambda s: False,
    refuse_kernel=kernel_refusal, limit_hw_queues=limit_hw_queues,
    max_discard_sectors=lambda s: max_discard_sectors(s.spec),
    sectors=lambda s, where: s.spec.capacity_sectors,
    files=lambda s: [__import__("blksim.disk_models.flash_presets",
                                fromlist=["flash_file"]).flash_file(s.flash)],
    rejects=lambda key: "give either drive or flash, not both" if key == "drive" else None,
    misplaced=misplaced))
