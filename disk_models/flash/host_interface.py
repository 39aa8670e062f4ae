"""The drive's host interface: NVMe over PCIe, or SATA with AHCI's native command queueing.

**NVMe** (NVM Express Base Specification 2.0, 2021): the host places commands in
submission queues (SQs), one per hardware queue of the multi-queue layer
(``rq.hctx.index``; the kernel's nvme driver pairs each blk-mq hardware context with one
SQ/CQ pair: drivers/nvme/host/pci.c, nvme_init_hctx). Each SQ has ``entries`` slots, of
which ``entries - 1`` can hold commands (a queue is full when the tail is one behind the
head: 3.3.1.2 "Queue Full Condition"). The controller fetches commands one at a time,
``fetch`` seconds each (the 64-byte entry read over the link and its decoding: blksim's
choice of value), choosing the SQ by arbitration (3.4.4 "Command Arbitration"):

* round robin (``rr``): the SQs in turn, up to ``burst`` commands from each (the
  Arbitration Burst of feature 01h, 5.27.1.1, as a count of commands);
* weighted round robin with urgent priority class (``wrr``): SQs of class ``urgent``
  first (strict priority, round robin among them), then the ``high``, ``medium`` and
  ``low`` classes served in weighted turns (``weights``: commands per turn, the spec's
  HPW/MPW/LPW + 1), round robin with ``burst`` inside each class. The class of SQ ``i``
  is ``classes[i % len(classes)]``.

The arbiter runs when the fetch engine comes free, over the commands waiting then,
and fetches that round back to back (blksim's choice: a command arriving while a round
is being fetched waits for the next round). A read's data goes to the host over the
link after the flash read (device to host); a write's data is fetched from the host
before it enters the write buffer (host to device). PCIe links are full duplex: one
timeline per direction. Rate: ``gen`` gives the transfer rate per lane and the line
code (PCI Express Base Specification 4.0, 4.2: 2.5 and 5 GT/s with 8b/10b, 8, 16 and 32
GT/s with 128b/130b); each TLP carries at most 256 payload bytes (a common
Max_Payload_Size) and 26 bytes of framing, sequence number, 16-byte header and LCRC
(2.1, 4.2.2), so the data rate is lanes x GT/s x code x 256/282 / 8 bytes per second.

**SATA** (Serial ATA Revision 3.x; AHCI 1.3.1): one queue of 32 tags (NCQ), the link's
6 Gb/s line rate with 8b/10b coding = 600 MB/s, half duplex: every FIS crosses the one
link in turn, so a command's FIS, the data FISes (at most 8,192 bytes each) and the
Set Device Bits FIS of its completion never overlap another's (SATA 3.x, 10.5 and
13.6). Each FIS costs its bytes plus 28 bytes of SOF, header, CRC and EOF (blksim's
rounding of the FIS framing).
"""

from __future__ import annotations

from collections import deque

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash.timeline import Timeline

#: PCIe generation -> (GT/s per lane, line-code efficiency).
PCIE_GENS = {1: (2.5, 0.8), 2: (5.0, 0.8), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
             5: (32.0, 128 / 130)}
TLP_PAYLOAD, TLP_OVERHEAD = 256, 26
#: NVMe: at most 65,535 I/O queues (Number of Queues feature, 16-bit count minus one).
NVME_MAX_IO_QUEUES = 65535
#: NVMe: at most 65,536 entries per I/O queue (CAP.MQES is a 16-bit count minus one).
NVME_MAX_ENTRIES = 65536
#: The Linux nvme driver's default queue entries (module parameter io_queue_depth).
LINUX_IO_QUEUE_DEPTH = 1024
SQ_CLASSES = ("urgent", "high", "medium", "low")
#: SATA: NCQ tags, line rate, FIS framing.
NCQ_TAGS = 32
SATA_BYTES_PER_S = 6e9 * 0.8 / 8
FIS_OVERHEAD = 28
FIS_MAX_DATA = 8192
REG_FIS_BYTES = 20          # Register H2D FIS
SDB_FIS_BYTES = 8           # Set Device Bits FIS
DMA_SETUP_FIS_BYTES = 28


def pcie_bytes_per_s(gen: int, lanes: int) -> float:
    """Data bytes per second one direction of a PCIe link carries."""
    gts, code = PCIE_GENS[gen]
    return lanes * gts * 1e9 * code / 8 * TLP_PAYLOAD / (TLP_PAYLOAD + TLP_OVERHEAD)


class NvmeInterface:
    """SQs, their arbitration and the command fetch; the PCIe link's two directions.

    `submit` returns the time the command is fetched, or None when it waits for the
    arbiter; then `arbitration_due` says when to call `arbitrate`, which returns the
    waiting commands as (request, fetch time) in the order fetched.
    """

    kind = "nvme"

    def __init__(self, queues: int, *, fetch_s: float, gen: int, lanes: int,
                 arbitration: str = "rr", burst: int = 1, classes=("medium",),
                 weights=(1, 1, 1)) -> None:
        if arbitration not in ("rr", "wrr"):
            raise DeviceError(f"arbitration expected rr or wrr, found {arbitration!r}")
        self.sqs = [deque() for _ in range(queues)]
        self.fetch_s = fetch_s
        self.byte_s = 1.0 / pcie_bytes_per_s(gen, lanes)
        self.arbitration = arbitration
        self.burst = burst
        self.classes = [classes[i % len(classes)] for i in range(queues)]
        self.weights = tuple(weights)
        self.fetch_free = 0.0
        self.waiting = 0
        self._rr = {c: 0 for c in SQ_CLASSES}     # next SQ position per class
        self.up = Timeline()         # device -> host (read data)
        self.down = Timeline()       # host -> device (write data)
        self.fetched = 0

    def submit(self, rq, sq: int, now: float):
        """The command enters SQ ``sq``: fetched at once when the engine is free and no
        other command waits (returns the fetch time), else it waits (None)."""
        if self.waiting == 0 and self.fetch_free <= now:
            self.fetch_free = now + self.fetch_s
            self.fetched += 1
            return self.fetch_free
        self.sqs[sq].append(rq)
        self.waiting += 1
        return None

    def arbitration_due(self):
        """When the arbiter runs next (None: no command waits)."""
        return self.fetch_free if self.waiting else None

    def arbitrate(self, now: float) -> list:
        """Fetch every waiting command, in arbitration order: [(rq, fetch time)]."""
        order = self.arbitration_order()
        t = self.fetch_free if self.fetch_free > now else now
        out = []
        for rq in order:
            t += self.fetch_s
            out.append((rq, t))
        self.fetch_free = t
        self.waiting = 0
        self.fetched += len(out)
        return out

    def arbitration_order(self) -> list:
        """Empty the SQs in the order the arbiter fetches from them."""
        if self.arbitration == "rr":
            return self._round_robin(list(range(len(self.sqs))), "medium", None)
        by_class = {c: [i for i, k in enumerate(self.classes) if k == c] for c in SQ_CLASSES}
        out = self._round_robin(by_class["urgent"], "urgent", None)
        weighted = [(c, w) for c, w in zip(SQ_CLASSES[1:], self.weights) if by_class[c]]
        while any(self.sqs[i] for c, _ in weighted for i in by_class[c]):
            for c, w in weighted:
                out.extend(self._round_robin(by_class[c], c, w))
        return out

    def _round_robin(self, sqs: list, cls: str, limit) -> list:
        """Up to ``limit`` commands (None: all) from ``sqs`` in turn, ``burst`` from
        each; the class's position in the turn is kept for the next round."""
        out = []
        if not sqs:
            return out
        n = len(sqs)
        pos = self._rr[cls] % n
        sqs_ = self.sqs
        while any(sqs_[i] for i in sqs) and (limit is None or len(out) < limit):
            q = sqs_[sqs[pos]]
            take = self.burst
            while q and take and (limit is None or len(out) < limit):
                out.append(q.popleft())
                take -= 1
            pos = (pos + 1) % n
        self._rr[cls] = pos
        return out

    def to_host(self, ready: float, nbytes: int, now: float) -> float:
        """A read's data crosses the link to the host; returns when it has."""
        return self.up.book(ready, nbytes * self.byte_s, now)

    def from_host(self, ready: float, nbytes: int, now: float) -> float:
        """A write's data crosses the link from the host; returns when it has."""
        return self.down.book(ready, nbytes * self.byte_s, now)

    def describe(self) -> dict:
        return {"interface": "nvme", "io_queues": len(self.sqs),
                "arbitration": self.arbitration, "arbitration_burst": self.burst,
                "link_mb_per_s": round(1 / self.byte_s / 1e6, 1)}


def _fis_time(nbytes: int) -> float:
    frames = max(1, -(-nbytes // FIS_MAX_DATA))
    return (nbytes + frames * FIS_OVERHEAD) / SATA_BYTES_PER_S


class SataInterface:
    """One NCQ queue behind one half-duplex 600 MB/s link; every FIS is booked on it."""

    kind = "sata"

    def __init__(self) -> None:
        self.link = Timeline()
        self.byte_s = 1.0 / SATA_BYTES_PER_S
        self.fetched = 0
        self._cmd = _fis_time(REG_FIS_BYTES)

    def submit(self, rq, sq: int, now: float):
        """The command FIS crosses the link; returns when the drive has it."""
        self.fetched += 1
        return self.link.book(now, self._cmd, now)

    def arbitration_due(self):
        return None

    def arbitrate(self, now: float) -> list:
        return []

    def to_host(self, ready: float, nbytes: int, now: float) -> float:
        """DMA Setup, the data FISes and the Set Device Bits FIS, one after the other."""
        t = _fis_time(DMA_SETUP_FIS_BYTES) + _fis_time(nbytes) + _fis_time(SDB_FIS_BYTES)
        return self.link.book(ready, t, now)

    def from_host(self, ready: float, nbytes: int, now: float) -> float:
        """DMA Setup FIS to the host, then the host's data FISes."""
        return self.link.book(ready, _fis_time(DMA_SETUP_FIS_BYTES) + _fis_time(nbytes), now)

    def complete_write(self, ready: float, now: float) -> float:
        """The Set Device Bits FIS that completes a write."""
        return self.link.book(ready, _fis_time(SDB_FIS_BYTES), now)

    def describe(self) -> dict:
        return {"interface": "sata", "ncq_tags": NCQ_TAGS, "link_mb_per_s": 600.0}
