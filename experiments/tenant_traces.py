"""The three per-volume traces of the tenants study (experiments/tenants.toml), generated.

They are synthetic: no excerpt of the public traces ships with blksim (experiments/data/
README.md says why and how to cut one instead). Each volume is written in the format of
the public trace it stands for, so it replays through the same reader a real excerpt
would: the Alibaba block traces' CSV (``device_id,opcode,offset,length,timestamp``, bytes
and microseconds since 1970) and Tencent CBS's (``Timestamp,Offset,Size,IOType,VolumeID``,
whole seconds since 1970 and 512-byte sectors).

A volume is drawn from five choices, written in `VOLUMES` with what each stands for:

* **arrivals**: a two-state Markov-modulated Poisson process, the usual model of bursty
  storage arrivals: ``on`` periods (exponential, mean ``on_s``) at ``rate_on`` requests
  per second, ``off`` periods (mean ``off_s``) at ``rate_off``;
* **direction**: read with probability ``read_fraction``;
* **size**: drawn from ``read_sizes`` / ``write_sizes`` (bytes -> weight);
* **place**: with probability ``sequential`` a request continues where the previous
  request of its direction ended; otherwise it starts at a 4 KiB-aligned place, in the
  volume's first ``hot_fraction`` with probability ``hot_share`` (skewed access), else
  anywhere on the volume;
* **volume**: ``volume_bytes`` in size; times start at ``start_s`` (s since 1970).

The numbers are blksim's choices, picked to give three recognisable tenants (a
latency-sensitive reader of small random blocks, a write-dominant bulk writer, a
sequential backup reader) in the directions the published analyses of these traces
describe for their volumes (bursty arrivals, small requests, skewed and partly
sequential access): they are not fitted to those analyses' tables, which could not be
reached (experiments/data/README.md lists, per parameter, what was searched and found:
no per-volume figure). Same seed, same bytes:
``python -m blksim.experiments.tenant_traces DIR`` writes the files the study replays.
"""

from __future__ import annotations

import lzma
import os
import sys
from dataclasses import dataclass

import numpy as np

#: 2020-01-01 00:00 in Beijing (UTC+8), the first day of the Alibaba traces' month.
ALIBABA_START = 1_577_808_000
#: a day of October 2018 (an arbitrary date for the Tencent-format volume).
TENCENT_START = 1_538_323_200

SECTOR = 512
ALIGN = 4096


@dataclass(frozen=True)
class Volume:
    """One synthetic volume (the module docstring says what each field draws)."""

    name: str
    format: str                 # "alibaba" or "tencent"
    volume_id: int
    requests: int
    seed: int
    rate_on: float              # requests per second in an on period
    rate_off: float
    on_s: float                 # mean length of an on / off period (s)
    off_s: float
    read_fraction: float
    read_sizes: dict
    write_sizes: dict
    sequential: float
    hot_fraction: float
    hot_share: float
    volume_bytes: int
    start_s: int

    @property
    def file_name(self) -> str:
        return f"{self.name}.{self.format}.csv.xz"


GIB = 1 << 30

#: The study's three tenants (blksim's choices, see the module docstring).
VOLUMES = (
    Volume("reader", "alibaba", 17, 20000, 1, rate_on=1500.0, rate_off=300.0, on_s=0.5,
           off_s=1.0, read_fraction=0.9,
           read_sizes={4096: 70, 8192: 15, 16384: 10, 65536: 5},
           write_sizes={4096: 60, 16384: 30, 65536: 10},
           sequential=0.1, hot_fraction=0.1, hot_share=0.8, volume_bytes=40 * GIB,
           start_s=ALIBABA_START + 3600),
    Volume("bulk", "alibaba", 233, 12000, 2, rate_on=900.0, rate_off=20.0, on_s=2.0,
           off_s=1.0, read_fraction=0.05,
           read_sizes={4096: 50, 65536: 50},
           write_sizes={65536: 20, 131072: 30, 262144: 30, 524288: 20},
           sequential=0.8, hot_fraction=0.3, hot_share=0.5, volume_bytes=100 * GIB,
           start_s=ALIBABA_START + 3600),
    Volume("backup", "tencent", 4096, 8000, 3, rate_on=400.0, rate_off=400.0, on_s=1.0,
           off_s=1.0, read_fraction=0.98,
           read_sizes={524288: 80, 1048576: 20},
           write_sizes={4096: 100},
           sequential=0.95, hot_fraction=1.0, hot_share=0.0, volume_bytes=200 * GIB,
           start_s=TENCENT_START + 7200),
)


def _choice(rng, table: dict, n: int) -> np.ndarray:
    values = np.array(list(table), dtype=np.int64)
    weights = np.array(list(table.values()), dtype=float)
    return rng.choice(values, size=n, p=weights / weights.sum())


def arrivals(rng, vol: Volume) -> np.ndarray:
    """``vol.requests`` arrival times (s from 0) of the on/off Poisson process."""
    times = []
    t = 0.0
    on = True
    while len(times) < vol.requests:
        length = rng.exponential(vol.on_s if on else vol.off_s)
        rate = vol.rate_on if on else vol.rate_off
        n = rng.poisson(rate * length)
        times.extend(np.sort(t + rng.uniform(0.0, length, n)).tolist())
        t += length
        on = not on
    return np.array(times[:vol.requests])


def requests(vol: Volume):
    """(time s from 0, is_write, offset bytes, length bytes) of every request, in order."""
    rng = np.random.default_rng(vol.seed)
    times = arrivals(rng, vol)
    n = len(times)
    writes = rng.random(n) >= vol.read_fraction
    rsizes = _choice(rng, vol.read_sizes, n)
    wsizes = _choice(rng, vol.write_sizes, n)
    seq = rng.random(n) < vol.sequential
    hot = rng.random(n) < vol.hot_share
    spots = rng.random(n)
    slots = vol.volume_bytes // ALIGN
    hot_slots = max(1, int(slots * vol.hot_fraction))
    nxt = {False: 0, True: 0}           # where the last read / write ended
    out = []
    for i in range(n):
        w = bool(writes[i])
        size = int(wsizes[i] if w else rsizes[i])
        if seq[i] and nxt[w] + size <= vol.volume_bytes:
            offset = nxt[w]
        else:
            span = hot_slots if hot[i] else slots
            offset = int(spots[i] * span) * ALIGN
            if offset + size > vol.volume_bytes:
                offset = vol.volume_bytes - size
        nxt[w] = offset + size
        out.append((float(times[i]), w, offset, size))
    return out


def lines(vol: Volume):
    """The volume's trace as lines of its format."""
    for t, w, offset, size in requests(vol):
        if vol.format == "alibaba":
            stamp = vol.start_s * 1_000_000 + int(t * 1e6)
            yield f"{vol.volume_id},{'W' if w else 'R'},{offset},{size},{stamp}\n"
        else:
            stamp = vol.start_s + int(t)
            yield (f"{stamp},{offset // SECTOR},{size // SECTOR},{1 if w else 0},"
                   f"{vol.volume_id}\n")


def write_volume(vol: Volume, directory: str) -> str:
    """Write ``vol``'s trace, xz-compressed, into ``directory``; return its path. The
    bytes depend on the volume's fields alone (the xz stream carries no time stamp)."""
    path = os.path.join(directory, vol.file_name)
    text = "".join(lines(vol)).encode()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(lzma.compress(text, preset=9 | lzma.PRESET_EXTREME))
    os.replace(tmp, path)
    return path


def main(argv=None) -> int:
    """``python -m blksim.experiments.tenant_traces [DIR]``: write the three volumes."""
    import argparse
    parser = argparse.ArgumentParser(
        prog="python -m blksim.experiments.tenant_traces",
        description="Write the tenants study's three synthetic per-volume traces "
                    "(experiments/data/README.md says what they are); the same bytes "
                    "every time.")
    parser.add_argument("directory", nargs="?",
                        default=os.path.join(os.path.dirname(__file__), "data"),
                        help="where to write them (default: the study's own data folder)")
    args = parser.parse_args(argv)
    os.makedirs(args.directory, exist_ok=True)
    for vol in VOLUMES:
        print(write_volume(vol, args.directory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
