"""blksim's flash drive beside MQSim's shipped outputs (docs/flash-mqsim.md).

MQSim (Tavakkol et al., FAST 2018) ran once on this machine; its outputs, the
configurations and the request streams it generated are in
``disk_models/flash/reference/mqsim/`` (its README says how). Here:

- the reference data checks out against itself: each run's stream is the one recorded,
  the IOPS derived from the exact simulated time obey Little's law for a closed loop,
  MQSim's own IOPS are the count over whole seconds, and a hand sum of MQSim's timing
  terms gives its depth-1 read time;
- `MqsimStream` regenerates MQSim's synthetic streams (its generator, its seeding) and
  reproduces the shipped ones exactly, so longer runs (the bench) need no stored stream;
- blksim's flash drive, built through its ``[device]`` table from a translation of
  MQSim's ssdconfig (`blksim_flash_preset`), gets exactly MQSim's request stream in a
  closed loop at MQSim's depth (`closed_loop`), and its mean response time and IOPS
  are within 5 % of MQSim's where the two model the same things (`AGREE`), or on the
  side the documented difference predicts where they do not (`DIRECTION`).

``benchmarks/mqsim_side_by_side.py`` imports the helpers from this module (one copy).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
from pathlib import Path

import pytest

import blksim.disk_models

REF = Path(blksim.disk_models.__file__).resolve().parent / "flash" / "reference" / "mqsim"
RESULTS = json.loads((REF / "results.json").read_text()) if (REF / "results.json").exists() \
    else {"runs": [], "bench": []}
RUNS = {e["name"]: e for e in RESULTS["runs"]}
BENCH = {e["name"]: e for e in RESULTS["bench"]}
NS = 1e-9


# ---------------------------------------------------------------- MQSim's files
def mqsim_params(xml_path: Path) -> dict:
    """The leaf elements of an MQSim XML file (ssdconfig or a one-flow workload), by tag:
    numbers as int or float, the rest as text."""
    out = {}
    for tag, text in re.findall(r"<(\w+)>([^<]*)</\1>", Path(xml_path).read_text()):
        text = text.strip()
        try:
            out[tag] = int(text)
        except ValueError:
            try:
                out[tag] = float(text)
            except ValueError:
                out[tag] = text
    return out


def shipped_stream(entry: dict) -> list:
    """The start sectors of a run's requests, as MQSim generated them: the shipped stream
    file (MQSim's default device), else regenerated (`MqsimStream`, which reproduces the
    shipped files exactly; the SHA-1 recorded for every run checks it)."""
    if entry.get("stream"):
        with gzip.open(REF / entry["stream"], "rt") as f:
            return [int(x) for x in f.read().split()[:entry["requests"]]]
    return MqsimStream(mqsim_params(REF / entry["ssdconfig"]),
                       mqsim_params(REF / entry["workload"])).take(entry["requests"])


# ---------------------------------------------------------------- MQSim's generator
_M1, _M2 = 4294967087, 4294944443
# The two component recurrences of MRG32k3a (L'Ecuyer, "Good parameters and
# implementations for combined multiple recursive random number generators",
# Operations Research 47(1), 1999) as 3x3 companion matrices acting on the last three
# states: x1[n] = 1403580 x1[n-2] - 810728 x1[n-3] (mod m1),
#         x2[n] = 527612 x2[n-1] - 1370589 x2[n-3] (mod m2).
_STEP = (((0, 1, 0), (0, 0, 1), (_M1 - 810728, 1403580, 0)),
         ((0, 1, 0), (0, 0, 1), (_M2 - 1370589, 0, 527612)))


def _c_muladd(a: int, b: int, acc: int, m: int) -> int:
    """``(a * b + acc) % m`` as MQSim's jump-ahead computes it in int64: the sum wraps
    at 2**64 and C's ``%`` keeps the dividend's sign. A product of two residues below
    2**32 can pass 2**63, so the wrap happens, and MQSim's streams depend on it."""
    p = (a * b + acc) & 0xFFFFFFFFFFFFFFFF
    if p >= 1 << 63:
        p -= 1 << 64
    r = abs(p) % m
    return -r if p < 0 else r


def _dot(row, column, m: int) -> int:
    acc = 0
    for a, b in zip(row, column):
        acc = _c_muladd(a, b, acc, m)
    return acc


def _matmul(a, b, m: int):
    columns = list(zip(*b))
    return [[_dot(r, c, m) for c in columns] for r in a]


def _matvec(a, v, m: int):
    return [_dot(r, v, m) for r in a]


class MqsimRandom:
    """MQSim's random numbers (``Utils::RandomGenerator`` over its combined multiple
    recursive generator), reimplemented from the algorithm: MRG32k3a started from the
    all-ones state and advanced ``(seed // 200 + 1) * 2**(seed % 200)`` steps (MQSim's
    way of giving each seed its own substream: the step matrix squared ``seed % 200``
    times, then raised to ``seed // 200 + 1`` by squaring), each draw in (0, 1)."""

    __slots__ = ("s1", "s2")

    def __init__(self, seed: int) -> None:
        states = []
        for comp, m in ((0, _M1), (1, _M2)):
            b = [list(r) for r in _STEP[comp]]
            v = [1, 1, 1]
            for _ in range(seed % 200):
                b = _matmul(b, b, m)
            n = seed // 200 + 1
            while n:
                if n & 1:
                    v = _matvec(b, v, m)
                n >>= 1
                if n:
                    b = _matmul(b, b, m)
            states.append([float(x) for x in v])
        self.s1, self.s2 = states

    def draw(self) -> float:
        """The next number: the two recurrences in floating point, as MQSim steps them."""
        s1, s2 = self.s1, self.s2
        x = 1403580.0 * s1[1] - 810728.0 * s1[0]
        p1 = x - float(int(x / _M1)) * _M1
        if p1 < 0.0:
            p1 += _M1
        s1[0], s1[1], s1[2] = s1[1], s1[2], p1
        x = 527612.0 * s2[2] - 1370589.0 * s2[0]
        p2 = x - float(int(x / _M2)) * _M2
        if p2 < 0.0:
            p2 += _M2
        s2[0], s2[1], s2[2] = s2[1], s2[2], p2
        p = p1 - p2
        if p < 0.0:
            p += _M1
        return (p + 1.0) * 2.328306549295728e-10

    def uniform_int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi], as MQSim's ``Uniform_ulong``: lo + floor((hi - lo + 1) u)."""
        return lo + int(float(hi - lo + 1) * self.draw())


def mqsim_logical_sectors(ssd: dict) -> int:
    """The sectors MQSim's host may address: per plane, blocks x pages x sectors per page
    x (1 - over-provisioning), truncated, over all planes
    (``Logical_Address_Partitioning_Unit``, one flow owning every plane)."""
    planes = (ssd["Flash_Channel_Count"] * ssd["Chip_No_Per_Channel"] * ssd["Die_No_Per_Chip"]
              * ssd["Plane_No_Per_Die"])
    per_plane = int(ssd["Block_No_Per_Plane"] * ssd["Page_No_Per_Block"]
                    * (ssd["Page_Capacity"] // 512) * (1.0 - ssd["Overprovisioning_Ratio"]))
    return planes * per_plane


class MqsimStream:
    """The start sectors of one synthetic flow of MQSim (``IO_Flow_Synthetic``), from its
    workload and ssdconfig: fixed-size requests, uniform random or streaming addresses,
    aligned, over the flow's whole range (one flow, working set 100 %)."""

    def __init__(self, ssd: dict, flow: dict) -> None:
        self.size = flow["Average_Request_Size"]
        self.align = flow["Address_Alignment_Unit"] if flow["Generated_Aligned_Addresses"] \
            in ("true", 1) else 1
        self.end = mqsim_logical_sectors(ssd) - 1
        # seed: the request-type generator; seed + 1: the addresses
        self.rng = MqsimRandom(flow["Seed"] + 1)
        self.streaming = flow["Address_Distribution"] == "STREAMING"
        if flow["Address_Distribution"] not in ("STREAMING", "RANDOM_UNIFORM"):
            raise ValueError(f"address distribution {flow['Address_Distribution']}")
        if self.streaming:
            nxt = self.rng.uniform_int(0, self.end)
            self.next = nxt - nxt % self.align

    def take(self, n: int) -> list:
        """The next ``n`` start sectors."""
        out = []
        size, align, end = self.size, self.align, self.end
        for _ in range(n):
            if self.streaming:
                s = self.next
                if s + size > end:
                    s = 0
                self.next += size
                if self.next > end:
                    self.next = 0
                if self.next % align:
                    self.next += align - self.next % align
            else:
                s = self.rng.uniform_int(0, end)
                if s + size > end:
                    s = 0
            out.append(s - s % align)
        return out


# ---------------------------------------------------------------- blksim's side
#: MQSim's ONFI NV-DDR2 command timings (``ONFI_Channel_NVDDR2`` defaults, ns): a read's
#: command and address cycles, t_CS + 6 t_WC + t_WB + t_RR, before tR.
MQSIM_READ_COMMAND_NS = 20 + 6 * 25 + 100 + 20
#: The ready/busy signal's delay MQSim adds to every tR (``Flash_Chip``,
#: commProtocolDelayRead; 0 for programs and erases).
MQSIM_READ_RB_NS = 20
#: MQSim's PCIe messages before a command is in the controller (``PCIe_Link::
#: estimate_transfer_time``: 28 bytes of overhead per TLP, 4 lanes of 1 GB/s): the
#: doorbell write (8-byte payload, 9 ns) and the 64-byte entry's read (request 8 ns,
#: completion 23 ns).
MQSIM_FETCH_NS = 9 + 8 + 23


def mqsim_channel_mts(rate) -> float:
    """The channel rate MQSim really simulates: it keeps whole nanoseconds per byte,
    ``int(1000 / rate)`` (``SSD_Device`` building ``ONFI_Channel_NVDDR2``), so only
    1000/k MT/s mean what they say."""
    ns = int(1000 / rate)
    if ns < 1:
        raise ValueError(f"MQSim simulates a channel of {rate} MT/s as free transfers")
    return 1000.0 / ns


def blksim_flash_preset(ssd: dict, *, one_die_per_chip: bool) -> dict:
    """A blksim flash preset (the table of a flash TOML file, docs/flash.md) for the drive
    an MQSim ssdconfig describes.

    ``one_die_per_chip``: MQSim's transaction scheduler gives a chip one command at a
    time (``TSU_Priority_OutOfOrder::service_read_transaction`` and
    ``service_write_transaction`` issue only to a chip whose status, kept per chip by
    ``NVM_PHY_ONFI_NVDDR2``, is idle), so its dies never overlap; with this flag the dies
    of a chip become planes of one die, which keeps the chip's capacity and gives blksim
    MQSim's parallelism."""
    dies = ssd["Die_No_Per_Chip"]
    planes = ssd["Plane_No_Per_Die"]
    if one_die_per_chip:
        dies, planes = 1, dies * planes
    cell = ssd["Flash_Technology"].lower()
    bits = {"slc": 1, "mlc": 2, "tlc": 3}[cell]
    read = [ssd[f"Page_Read_Latency_{t}"] / 1000 for t in ("LSB", "CSB", "MSB")][:bits]
    program = [ssd[f"Page_Program_Latency_{t}"] / 1000 for t in ("LSB", "CSB", "MSB")][:bits]
    lanes_gbs = ssd["PCIe_Lane_Bandwidth"]
    gen = {1.0: 3, 2.0: 4, 4.0: 5}[round(lanes_gbs, 1)]    # ~0.98, 1.97, 3.94 GB/s a lane
    geometry = {"channels": ssd["Flash_Channel_Count"],
                "chips_per_channel": ssd["Chip_No_Per_Channel"],
                "dies_per_chip": dies, "planes_per_die": planes,
                "blocks_per_plane": ssd["Block_No_Per_Plane"],
                "pages_per_block": ssd["Page_No_Per_Block"],
                "page_bytes": ssd["Page_Capacity"]}
    return {
        "name": "mqsim", "description": "an MQSim ssdconfig, translated",
        "interface": ssd["HostInterface_Type"].lower(),
        "pcie_gen": gen, "pcie_lanes": ssd["PCIe_Lane_Count"],
        "max_io_queues": 1,                       # one flow, one SQ
        "max_queue_entries": min(ssd["IO_Queue_Depth"], 65536),
        "command_fetch_us": MQSIM_FETCH_NS / 1000,
        "fw_read_us": 0, "fw_write_us": 0,        # MQSim models no firmware time
        "capacity": mqsim_logical_sectors(ssd) * 512,   # what MQSim's host addresses
        "plp": False,
        "geometry": geometry,
        "nand": {"cell": cell, "read_us": read, "program_us": program,
                 "erase_us": ssd["Block_Erase_Latency"] / 1000,
                 "channel_mts": mqsim_channel_mts(ssd["Channel_Transfer_Rate"]),
                 "command_us": (MQSIM_READ_COMMAND_NS + MQSIM_READ_RB_NS) / 1000},
    }


def mqsim_rate_for(mts: float) -> int:
    """The channel rate an MQSim translation gives for a blksim ``channel_mts``: the
    fastest rate MQSim simulates as meant (1000/k MT/s) not above it, as a whole number."""
    k = max(1, math.ceil(1000 / mts - 1e-9))
    return int(1000 / k)


def mqsim_ssdconfig_for(preset: dict, blocks_per_plane: int | None = None) -> dict:
    """The values (by MQSim ssdconfig tag) that translate a blksim flash preset (an NVMe
    drive) to MQSim, with ``blocks_per_plane`` for a smaller drive of the same build. The
    other tags keep MQSim's shipped defaults. Where MQSim cannot say what the preset says,
    the nearest it can: the channel's rate (`mqsim_rate_for`); one SQ per flow; no SLC
    cache (MQSim has none: the comparison's blksim drive has none either)."""
    g = preset["geometry"]
    nand = preset["nand"]
    bits = {"slc": 1, "mlc": 2, "tlc": 3}[nand["cell"]]

    def per_type(key):
        v = nand[key] if isinstance(nand[key], list) else [nand[key]] * bits
        return v + [v[-1]] * (3 - len(v))

    raw = g["channels"] * g["chips_per_channel"] * g["dies_per_chip"] * g["planes_per_die"] \
        * g["blocks_per_plane"] * g["pages_per_block"] * g["page_bytes"]
    from blksim.common.units import parse_size
    values = {
        "PCIe_Lane_Bandwidth": {3: 1.0, 4: 2.0, 5: 4.0}[preset.get("pcie_gen", 4)],
        "PCIe_Lane_Count": preset.get("pcie_lanes", 4),
        "HostInterface_Type": preset.get("interface", "nvme").upper(),
        "IO_Queue_Depth": min(preset.get("max_queue_entries", 1024), 65535),
        "Data_Cache_Capacity": parse_size(preset.get("write_buffer", 0), "write_buffer"),
        "Ideal_Mapping_Table": "true",
        "Overprovisioning_Ratio": round(1 - preset["capacity"] / raw, 6),
        "GC_Block_Selection_Policy": "GREEDY",
        "Use_Copyback_for_GC": "true",
        "Flash_Channel_Count": g["channels"],
        "Channel_Transfer_Rate": mqsim_rate_for(nand["channel_mts"]),
        "Chip_No_Per_Channel": g["chips_per_channel"],
        "Flash_Technology": nand["cell"].upper(),
        "CMD_Suspension_Support": "NONE",
        "Block_Erase_Latency": round(nand["erase_us"] * 1000),
        "Die_No_Per_Chip": g["dies_per_chip"],
        "Plane_No_Per_Die": g["planes_per_die"],
        "Block_No_Per_Plane": blocks_per_plane or g["blocks_per_plane"],
        "Page_No_Per_Block": g["pages_per_block"],
        "Page_Capacity": g["page_bytes"],
    }
    for kind, key in (("Read", "read_us"), ("Program", "program_us")):
        for t, us in zip(("LSB", "CSB", "MSB"), per_type(key)):
            values[f"Page_{kind}_Latency_{t}"] = round(us * 1000)
    return values


def write_toml(table: dict, path: Path) -> None:
    """``table`` as a TOML file (tomli_w ships with blksim)."""
    import tomli_w
    path.write_bytes(tomli_w.dumps(table).encode())


#: Blocks per plane of the comparison drives: MQSim's geometry with a sixteenth of its
#: blocks (a fresh or full drive's timing does not depend on the block count, and the
#: FTL's arrays stay small; with 7 % over-provisioning 128 blocks leave the FTL room for
#: its open blocks and GC threshold). MQSim's addresses are folded into it (`fold`).
SMALL_BLOCKS = 128


def flash_device(entry: dict, tmp_path: Path, *, one_die_per_chip: bool = True):
    """blksim's flash drive for a reference run, built through the ``[device]`` table:
    ``flash`` = the translated preset, and the run's keys:

    - ``mapping_unit``: 8 KiB, MQSim's (it maps whole flash pages), except for 4 KiB
      reads: blksim moves whole mapping units over the channel and MQSim only the
      sectors asked for, so 4 KiB units move the same 4 KiB;
    - ``start_state``: ``full`` for reads (MQSim reads a never-written page from flash,
      giving it a page as if it had been written, ``online_create_entry_for_reads``;
      blksim answers it without the flash), ``fresh`` for writes;
    - ``write_buffer``: 0 with MQSim's cache off (writes complete when programmed), the
      DRAM cache's size with it on;
    - ``mapping_cache``: 0 (the whole table in DRAM) for the ideal mapping table, else
      DRAM for the same fraction of the map as MQSim's CMT covers (`cmt_fraction`), at
      blksim's 4 bytes an entry;
    - ``copyback``: MQSim's ``Use_Copyback_for_GC``; ``allocation`` ``cwdp``."""
    from blksim.disk_models import registry
    ssd = mqsim_params(REF / entry["ssdconfig"])
    preset = blksim_flash_preset(ssd, one_die_per_chip=one_die_per_chip)
    path = tmp_path / "mqsim-flash.toml"
    write_toml(preset, path)
    reads = entry["kind"] in ("randread", "read")
    table = {
        "flash": str(path),
        "blocks_per_plane": SMALL_BLOCKS,
        "over_provisioning": ssd["Overprovisioning_Ratio"],
        "mapping_unit": 4096 if reads and entry["request_bytes"] == 4096 else ssd["Page_Capacity"],
        "start_state": "full" if reads else "fresh",
        "write_buffer": ssd["Data_Cache_Capacity"] if entry["data_cache"] != "TURNED_OFF" else 0,
        "mapping_cache": 0,
        "copyback": ssd["Use_Copyback_for_GC"] == "true",
        "allocation": "cwdp",
        "io_queues": 1,
    }
    where = registry.Where(str(tmp_path / "run.toml"), "[device]")
    dtype, settings = registry.parse(table, where)
    if ssd["Ideal_Mapping_Table"] != "true":
        units = settings.spec.logical_pages
        table["mapping_cache"] = max(1, math.ceil(cmt_fraction(ssd) * units / 1024)) * 4096
        dtype, settings = registry.parse(table, where)
    return dtype.build(settings, "nvme0n1", None, 1)


def cmt_fraction(ssd: dict) -> float:
    """The fraction of the logical pages whose entries MQSim's CMT holds: ``CMT_Capacity``
    over its entry size, ``ceil((2 log2(physical pages) + sectors per page) / 8)`` bytes
    (``Address_Mapping_Unit_Page_Level``: 9 bytes on the default device, 233,016 entries
    of 2 MiB), over the logical pages. The comparison drive is smaller than MQSim's, so
    its cache keeps the fraction, not the bytes (a uniform stream's hit ratio)."""
    spp = ssd["Page_Capacity"] // 512
    pages = (ssd["Flash_Channel_Count"] * ssd["Chip_No_Per_Channel"] * ssd["Die_No_Per_Chip"]
             * ssd["Plane_No_Per_Die"] * ssd["Block_No_Per_Plane"] * ssd["Page_No_Per_Block"])
    entry = math.ceil((2 * math.log2(pages) + spp) / 8)
    return (ssd["CMT_Capacity"] // entry) / (mqsim_logical_sectors(ssd) // spp)


def fold(sectors: list, device) -> list:
    """MQSim's start sectors on a smaller drive of the same build: modulo the largest
    multiple of (planes x the flash page's sectors) that fits, which keeps each flash
    page's place in the channel-first (CWDP) order of the planes, so every request lands
    on the chip it has in MQSim (blksim keeps a flash page's worth of consecutive mapping
    units on one plane, as MQSim keeps its page)."""
    g = device.spec.flash_geometry
    step = g.planes * (g.page_bytes // 512)
    span = device.capacity // step * step
    return [s % span for s in sectors]


class _Hctx:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class _Rq:
    """A request as the multi-queue layer hands it to the device."""

    __slots__ = ("sector", "nr_sectors", "write", "op", "fua", "hctx", "t_submit")

    def __init__(self, op: int, sector: int, nr_sectors: int, now: float,
                 hctx: _Hctx) -> None:
        self.op = op
        self.write = op == 1
        self.sector = sector
        self.nr_sectors = nr_sectors
        self.fua = False
        self.hctx = hctx
        self.t_submit = now


def closed_loop(device, sectors, nr_sectors: int, write: bool, depth: int):
    """MQSim's ``QUEUE_DEPTH`` flow on a blksim device: ``depth`` requests in flight, a new
    one (the next of ``sectors``) each time one completes. Returns (mean response time
    in seconds, IOPS over the time of the last completion, completions)."""
    it = iter(sectors)
    hctx = _Hctx(0)
    op = 1 if write else 0
    now = 0.0
    inflight = 0
    total = 0.0
    done = 0

    def fill() -> int:
        n = 0
        while inflight + n < depth and device.can_accept():
            s = next(it, None)
            if s is None:
                break
            device.submit(_Rq(op, s, nr_sectors, now, hctx), now)
            n += 1
        return n

    inflight += fill()
    while inflight:
        t = device.next_event_time()
        assert t is not None, "requests in flight but no event due"
        if t > now:
            now = t
        for rq in device.pop_completed(now):
            total += now - rq.t_submit
            done += 1
            inflight -= 1
        inflight += fill()
    return total / done, done / now, done


def run_blksim(entry: dict, tmp_path: Path, *, one_die_per_chip: bool = True):
    """(mean response us, IOPS) of blksim on a reference run's own stream."""
    dev = flash_device(entry, tmp_path, one_die_per_chip=one_die_per_chip)
    sectors = fold(shipped_stream(entry), dev)
    mean, iops, done = closed_loop(dev, sectors, entry["request_bytes"] // 512,
                                   entry["kind"] in ("randwrite", "write"),
                                   entry["queue_depth"])
    assert done == entry["requests"]
    return mean * 1e6, iops


# ---------------------------------------------------------------- the reference data
def test_reference_data_ships_with_licence_and_runs():
    assert (REF / "LICENSE-MQSim").read_text().startswith("Copyright (c) 2018, SAFARI")
    assert len(RUNS) == 32 and len(BENCH) == 2
    for e in list(RUNS.values()) + list(BENCH.values()):
        assert (REF / e["ssdconfig"]).is_file() and (REF / e["workload"]).is_file()
        m = e["mqsim"]
        assert m["serviced"] == e["requests"] == m["reads"] + m["writes"]
        assert m["gc_executions"] == 0           # a fresh drive, never full enough


@pytest.mark.parametrize("name", sorted(RUNS))
def test_shipped_stream_is_the_runs_own(name):
    """The workload file says what the stream holds, and the run's first lines of the
    stream hash to the SHA-1 recorded when MQSim generated them."""
    e = RUNS[name]
    flow = mqsim_params(REF / e["workload"])
    assert flow["Average_No_of_Reqs_in_Queue"] == e["queue_depth"]
    assert flow["Total_Requests_To_Generate"] == e["requests"]
    assert flow["Average_Request_Size"] * 512 == e["request_bytes"]
    assert flow["Seed"] == e["seed"]
    sectors = shipped_stream(e)
    assert len(sectors) == e["requests"]
    lines = "".join(f"{s}\n" for s in sectors)
    assert hashlib.sha1(lines.encode()).hexdigest() == e["stream_sha1"]


@pytest.mark.parametrize("name", sorted(RUNS) + sorted(BENCH))
def test_exact_iops_obey_littles_law(name):
    """A closed loop keeps ``depth`` requests in the device, so IOPS x mean response =
    depth (Little's law) up to the ramp at the ends and MQSim's truncation of the mean to
    whole microseconds: the derived IOPS use the right time."""
    e = RUNS.get(name) or BENCH[name]
    m = e["mqsim"]
    assert m["iops"] == pytest.approx(e["requests"] / m["simulated_time_s"])
    in_flight = m["iops"] * m["mean_response_us"] * 1e-6
    assert in_flight <= e["queue_depth"] * 1.001
    assert in_flight == pytest.approx(e["queue_depth"],
                                      rel=0.01 + 1 / m["mean_response_us"])


@pytest.mark.parametrize("name", sorted(RUNS) + sorted(BENCH))
def test_mqsim_prints_iops_over_whole_seconds(name):
    """MQSim's own IOPS divide by the simulated time rounded down to whole seconds."""
    e = RUNS.get(name) or BENCH[name]
    m = e["mqsim"]
    whole = math.floor(m["simulated_time_s"])
    printed = float(m["iops_as_mqsim_prints"])
    assert printed == (math.inf if whole == 0 else pytest.approx(e["requests"] / whole))


def test_depth_one_read_is_the_sum_of_mqsims_terms():
    """MQSim's 88 us for a 4 KiB read on its default device with the whole map in DRAM,
    term by term (the terms blksim's translation carries over): the doorbell and the
    command's fetch, the read's command cycles, tR and its 20 ns ready/busy delay, the
    data-out preamble (t_RPRE + t_DQSRE = 30 ns), the 4 KiB over the 8-bit channel at 3 ns
    a byte, the data and the completion entry over PCIe (32 TLPs of 128 + 28 bytes and
    16 + 28 bytes on 4 lanes of 1 GB/s)."""
    e = RUNS["default-idealmap/rr4k_qd1"]
    ssd = mqsim_params(REF / e["ssdconfig"])
    channel_ns_per_byte = 1000 / mqsim_channel_mts(ssd["Channel_Transfer_Rate"])
    total_ns = (MQSIM_FETCH_NS + MQSIM_READ_COMMAND_NS + ssd["Page_Read_Latency_LSB"]
                + MQSIM_READ_RB_NS + 30
                + 4096 * channel_ns_per_byte + 32 * (128 + 28) / 4 + (16 + 28) / 4)
    assert int(total_ns / 1000) == e["mqsim"]["mean_response_us"] == 88


def test_mqsim_channel_rate_is_quantised():
    assert mqsim_channel_mts(333) == pytest.approx(333.333, abs=1e-3)
    assert mqsim_channel_mts(400) == 500.0 and mqsim_channel_mts(800) == 1000.0
    with pytest.raises(ValueError):
        mqsim_channel_mts(1200)


@pytest.mark.parametrize("stream", ["random-4k-seed12345", "sequential-128k-seed23456"])
def test_generator_reproduces_mqsims_streams(stream):
    """`MqsimStream` gives exactly the addresses MQSim generated, all of them."""
    e = next(r for r in RUNS.values() if r["stream"] and Path(r["stream"]).name.startswith(
        stream) and r["requests"] == max(x["requests"] for x in RUNS.values()
                                         if x["stream"] == r["stream"]))
    ssd = mqsim_params(REF / e["ssdconfig"])
    flow = mqsim_params(REF / e["workload"])
    assert e["stream"]
    assert MqsimStream(ssd, flow).take(e["requests"]) == shipped_stream(e)


def test_generator_differs_with_the_seed():
    a, b = MqsimRandom(12346), MqsimRandom(12347)
    assert [a.draw() for _ in range(5)] != [b.draw() for _ in range(5)]
    assert all(0.0 < MqsimRandom(7).draw() < 1.0 for _ in range(3))


# ---------------------------------------------------------------- blksim against MQSim
def _flash_missing() -> str | None:
    """Why blksim's flash drive cannot be built here, or None."""
    try:
        from blksim.disk_models import registry
        registry.device_type("flash")
        import blksim.disk_models.flash.ftl  # noqa: F401  (the FTL the drive is built on)
    except Exception as exc:                 # noqa: BLE001 (any reason: report it)
        return f"blksim's flash drive is not in this tree yet ({type(exc).__name__}: {exc})"
    return None


needs_flash = pytest.mark.skipif(_flash_missing() is not None,
                                 reason=str(_flash_missing()))

#: Runs where blksim and MQSim model the same things (docs/flash-mqsim.md, "What the
#: comparison shows"): mean response time and IOPS within 5 %.
PRESETS = ("samsung980pro1tb", "samsungpm9a3_7t68")
AGREE = [
    # one read at a time: fetch, command, tR, data out, PCIe; nothing queues
    "default-idealmap/rr4k_qd1",
    # writes without the cache: data in, tPROG, a chip busy for its program in both
    "default-idealmap/rw4k_qd1_nocache",
    "default-idealmap/rw4k_qd8_nocache",
] + [f"{p}/{w}" for p in PRESETS for w in ("rr4k_qd1", "rw4k_qd1_nocache", "rw4k_qd8_nocache")]

#: Runs where one models what the other does not, and the side blksim must be on:
#: +1 = blksim at least as fast (IOPS >= MQSim's, mean response <= MQSim's).
DIRECTION = {
    # blksim gives a read its command on the die and its data-out the channel's first
    # free stretch; MQSim puts the command cycles on the channel, issues commands only
    # while the channel is idle and visits the chips round robin
    "default-idealmap/rr4k_qd8": +1,
    "default-idealmap/rr4k_qd32": +1,
    "default-idealmap/rr4k_qd64": +1,
    "default-idealmap/sr128k_qd8": +1,
    # MQSim's multi-plane programs need the same page offset in each plane; blksim's do
    # not check it (docs/flash.md), so more of a sequential write runs in parallel
    "default-idealmap/sw128k_qd8_nocache": +1,
    # MQSim's cache writes back every first-written page at once and admits writes only
    # while one page per plane is on its way to flash; blksim's buffer takes them all
    "default-idealmap/rw4k_qd8": +1,
    "default-idealmap/sw128k_qd8": +1,
    # the same three differences on the two translated presets
    **{f"{p}/{w}": +1 for p in PRESETS for w in ("rr4k_qd32", "sr128k_qd8", "sw128k_qd8_nocache")},
    # with MQSim's CMT: MQSim reads a write's translation page before the write, blksim
    # marks the cached page dirty without reading it; and the differences above
    "default/rw4k_qd1_nocache": +1,
    "default/rw4k_qd8_nocache": +1,
    "default/sw128k_qd8_nocache": +1,
    "default/rw4k_qd8": +1,
    "default/sw128k_qd8": +1,
    "default/sr128k_qd8": +1,
}


@needs_flash
@pytest.mark.parametrize("name", AGREE)
def test_blksim_agrees_with_mqsim(name, tmp_path):
    e = RUNS[name]
    mean_us, iops = run_blksim(e, tmp_path)
    m = e["mqsim"]
    # MQSim truncates its mean to whole microseconds: compare with the interval's middle
    assert mean_us == pytest.approx(m["mean_response_us"] + 0.5, rel=0.05)
    assert iops == pytest.approx(m["iops"], rel=0.05)


@needs_flash
@pytest.mark.parametrize("name", sorted(DIRECTION))
def test_blksim_differs_from_mqsim_on_the_documented_side(name, tmp_path):
    e = RUNS[name]
    mean_us, iops = run_blksim(e, tmp_path)
    m = e["mqsim"]
    assert DIRECTION[name] == +1
    assert iops >= m["iops"]
    assert mean_us <= m["mean_response_us"] + 1


@needs_flash
def test_a_cmt_miss_at_depth_one_costs_the_translation_reads_transfer(tmp_path):
    """With MQSim's CMT, a 4 KiB read at depth 1 first reads its translation page in
    both; MQSim moves one sector of it over the channel, blksim a whole mapping unit, so
    blksim is slower by the rest of the unit's transfer, and by nothing else."""
    e = RUNS["default/rr4k_qd1"]
    mean_us, _ = run_blksim(e, tmp_path)
    ssd = mqsim_params(REF / e["ssdconfig"])
    extra_us = (4096 - 512) / mqsim_channel_mts(ssd["Channel_Transfer_Rate"])
    assert mean_us > e["mqsim"]["mean_response_us"] + 1
    assert mean_us == pytest.approx(e["mqsim"]["mean_response_us"] + 0.5 + extra_us, rel=0.02)


@pytest.mark.parametrize("preset", PRESETS)
def test_shipped_ssdconfig_translates_the_preset(preset):
    """The MQSim configuration the reference ran is `mqsim_ssdconfig_for` of blksim's
    preset as it is now (a smaller drive of the same build where the XML says so): a
    preset changed since means MQSim must run again (the README says how)."""
    try:
        from blksim.disk_models.flash_presets import load_flash_preset
        table = load_flash_preset(preset)
    except Exception as exc:                 # noqa: BLE001
        pytest.skip(f"blksim's flash presets are not in this tree yet ({exc})")
    shipped = mqsim_params(REF / "configs" / preset / "ssdconfig.xml")
    want = mqsim_ssdconfig_for(table, shipped["Block_No_Per_Plane"])
    assert table["geometry"]["blocks_per_plane"] % shipped["Block_No_Per_Plane"] == 0
    assert {k: shipped[k] for k in want} == want


@needs_flash
def test_mqsims_dies_never_overlap(tmp_path):
    """With MQSim's geometry as written (two dies a chip), blksim's dies overlap and it
    reads faster than MQSim at depth 64; with the dies folded into one it stays slower
    than that, and at depth 1 the two geometries give the same time."""
    deep = RUNS["default-idealmap/rr4k_qd64"]
    _, iops_two = run_blksim(deep, tmp_path, one_die_per_chip=False)
    _, iops_one = run_blksim(deep, tmp_path, one_die_per_chip=True)
    assert iops_two > iops_one * 1.2
    one = RUNS["default-idealmap/rr4k_qd1"]
    assert run_blksim(one, tmp_path, one_die_per_chip=False)[0] == \
        pytest.approx(run_blksim(one, tmp_path, one_die_per_chip=True)[0], rel=1e-6)


def comparison_table() -> str:
    """Every reference run whose drive blksim can build here: MQSim's mean response and
    IOPS beside blksim's, with the dies of a chip folded into one and as MQSim's
    geometry writes them (the table in docs/flash-mqsim.md)."""
    import tempfile
    rows = ["| run | MQSim mean us | MQSim IOPS | blksim, one die a chip | blksim, MQSim's dies |",
            "|---|---|---|---|---|"]
    for name, e in sorted(RUNS.items()):
        m = e["mqsim"]
        cells = []
        for one in (True, False):
            with tempfile.TemporaryDirectory() as d:
                try:
                    mean, iops = run_blksim(e, Path(d), one_die_per_chip=one)
                except ImportError as exc:
                    cells.append(f"not built ({exc.name})")
                    continue
            cells.append(f"{mean:.1f} us ({mean / (m['mean_response_us'] + 0.5) - 1:+.1%}), "
                         f"{iops:,.0f} ({iops / m['iops'] - 1:+.1%})")
        tag = " (5 %)" if name in AGREE else " (side)" if name in DIRECTION else ""
        rows.append(f"| `{name}`{tag} | {m['mean_response_us']} | {m['iops']:,.0f} | "
                    f"{cells[0]} | {cells[1]} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(comparison_table())
