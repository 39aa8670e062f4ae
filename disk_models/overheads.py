"""Controller overheads of a disk drive, DiskSim 4.0 style.

A drive's controller spends time on every command before it moves the arm or
touches the buffer, and again before it reports completion. DiskSim 4.0 splits
the command overhead by case — read or write, cache hit or miss, and whether the
previous request was a read or a write — and scales every overhead by a "Time
scale for overheads". Semantics read in DiskSim 4.0's ``src/disksim_diskctlr.c``
(``disk_read_arrive``, ``disk_write_arrive``, ``disk_request_complete``,
``disk_check_bus``) and ``src/modules/disk.modspec``; written here in our own words.

What DiskSim charges, as used by the drive (see docs/drive-cache.md):

* read hit:  "Read hit over. after read/write" before the first byte leaves the
  buffer (plus "Data preparation overhead");
* read miss: "Read miss over. after read/write" before any mechanical activity
  (a read that has to wait for the mechanism also pays this one, whatever the
  cache holds);
* write: with write-back ("Fast write level" > 0) DiskSim charges the *write hit*
  overhead to every write, with write-through (level 0) the *write miss* one;
  the overhead comes before positioning and before the data crosses the bus;
* completion: "Read/Write completion overhead" before the completion message,
  in parallel with background media work (prefetch, destage);
* "after read/after write" refers to the last request whose completion the drive
  sent (DiskSim's ``lastflags``).

All values are stored in seconds, already multiplied by the time scale.
"""

from __future__ import annotations


class ControllerOverheads:
    """Per-case command overheads, completion overheads and the bus time per sector.

    Construct with milliseconds (DiskSim's unit) through the keyword arguments,
    `from_disksim` (a mapping of DiskSim parameter names) or `simple` (one
    command and one completion overhead, the existing TOML drives). Every
    overhead is multiplied by ``time_scale``; ``bus_sector_ms`` is not (DiskSim's
    time scale applies to processing overheads only).
    """

    __slots__ = (
        "read_hit_after_read", "read_hit_after_write", "read_miss_after_read",
        "read_miss_after_write", "write_hit_after_read", "write_hit_after_write",
        "write_miss_after_read", "write_miss_after_write", "read_complete", "write_complete",
        "data_prep", "reselect_first", "reselect_other", "disconnect_read_after_read",
        "disconnect_read_after_write", "disconnect_write", "per_request", "time_scale",
        "bus_sector", "_cmd",
    )

    def __init__(self, *, read_hit_after_read_ms: float = 0.0,
                 read_hit_after_write_ms: float = 0.0, read_miss_after_read_ms: float = 0.0,
                 read_miss_after_write_ms: float = 0.0, write_hit_after_read_ms: float = 0.0,
                 write_hit_after_write_ms: float = 0.0, write_miss_after_read_ms: float = 0.0,
                 write_miss_after_write_ms: float = 0.0, read_complete_ms: float = 0.0,
                 write_complete_ms: float = 0.0, data_prep_ms: float = 0.0,
                 reselect_first_ms: float = 0.0, reselect_other_ms: float = 0.0,
                 disconnect_read_after_read_ms: float = 0.0,
                 disconnect_read_after_write_ms: float = 0.0, disconnect_write_ms: float = 0.0,
                 per_request_ms: float = 0.0, time_scale: float = 1.0,
                 bus_sector_ms: float = 0.0) -> None:
        vals = dict(locals())
        del vals["self"]
        for k, v in vals.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v < 0:
                raise ValueError(f"controller overheads: {k}: expected a number >= 0, found {v!r}")
        k = time_scale / 1e3  # ms -> s, scaled
        self.time_scale = float(time_scale)
        self.read_hit_after_read = read_hit_after_read_ms * k
        self.read_hit_after_write = read_hit_after_write_ms * k
        self.read_miss_after_read = read_miss_after_read_ms * k
        self.read_miss_after_write = read_miss_after_write_ms * k
        self.write_hit_after_read = write_hit_after_read_ms * k
        self.write_hit_after_write = write_hit_after_write_ms * k
        self.write_miss_after_read = write_miss_after_read_ms * k
        self.write_miss_after_write = write_miss_after_write_ms * k
        self.read_complete = read_complete_ms * k
        self.write_complete = write_complete_ms * k
        self.data_prep = data_prep_ms * k
        self.reselect_first = reselect_first_ms * k
        self.reselect_other = reselect_other_ms * k
        self.disconnect_read_after_read = disconnect_read_after_read_ms * k
        self.disconnect_read_after_write = disconnect_read_after_write_ms * k
        self.disconnect_write = disconnect_write_ms * k
        self.per_request = per_request_ms * k
        self.bus_sector = bus_sector_ms / 1e3
        # index = 4*write + 2*hit + prev_write  (bools are ints)
        self._cmd = (
            self.read_miss_after_read, self.read_miss_after_write,
            self.read_hit_after_read, self.read_hit_after_write,
            self.write_miss_after_read, self.write_miss_after_write,
            self.write_hit_after_read, self.write_hit_after_write,
        )

    # DiskSim parameter name -> keyword of __init__ (milliseconds)
    DISKSIM_NAMES = {
        "Read hit over. after read": "read_hit_after_read_ms",
        "Read hit over. after write": "read_hit_after_write_ms",
        "Read miss over. after read": "read_miss_after_read_ms",
        "Read miss over. after write": "read_miss_after_write_ms",
        "Write hit over. after read": "write_hit_after_read_ms",
        "Write hit over. after write": "write_hit_after_write_ms",
        "Write miss over. after read": "write_miss_after_read_ms",
        "Write miss over. after write": "write_miss_after_write_ms",
        "Read completion overhead": "read_complete_ms",
        "Write completion overhead": "write_complete_ms",
        "Data preparation overhead": "data_prep_ms",
        "First reselect overhead": "reselect_first_ms",
        "Other reselect overhead": "reselect_other_ms",
        "Read disconnect afterread": "disconnect_read_after_read_ms",
        "Read disconnect afterwrite": "disconnect_read_after_write_ms",
        "Write disconnect overhead": "disconnect_write_ms",
        "Per-request overhead time": "per_request_ms",
        "Time scale for overheads": "time_scale",
        "Bulk sector transfer time": "bus_sector_ms",
    }

    @classmethod
    def from_disksim(cls, params: dict) -> "ControllerOverheads":
        """From DiskSim ``.diskspecs`` values (milliseconds), keyed by DiskSim's names.

        Unknown keys are ignored (a diskspecs block holds many other parameters);
        missing ones default to 0 (time scale 1). ``Bulk sector transfer time`` is the
        drive's own figure; DiskSim uses the largest of it and the bus's and
        controller's block transfer times, which the caller may pass instead.
        """
        kw = {}
        for name, key in cls.DISKSIM_NAMES.items():
            if name in params:
                kw[key] = float(params[name])
        return cls(**kw)

    @classmethod
    def simple(cls, command_ms: float, completion_ms: float, bus_sector_ms: float) -> "ControllerOverheads":
        """One command overhead for every case and one completion overhead (the TOML drives)."""
        return cls(read_hit_after_read_ms=command_ms, read_hit_after_write_ms=command_ms,
                   read_miss_after_read_ms=command_ms, read_miss_after_write_ms=command_ms,
                   write_hit_after_read_ms=command_ms, write_hit_after_write_ms=command_ms,
                   write_miss_after_read_ms=command_ms, write_miss_after_write_ms=command_ms,
                   read_complete_ms=completion_ms, write_complete_ms=completion_ms,
                   bus_sector_ms=bus_sector_ms)

    # ------------------------------------------------------------------ lookups

    def command_overhead(self, write: bool, hit: bool, prev_write: bool) -> float:
        """Command overhead (s) of a request: ``write`` or read, cache ``hit`` or miss,
        previous request a write (``prev_write``) or a read. Includes the per-request
        overhead. For writes, ``hit`` means "completion reported from the buffer"
        (write-back), as DiskSim's "Write hit over." parameters define it."""
        return self._cmd[(write << 2) | (hit << 1) | prev_write] + self.per_request

    def command_table(self) -> tuple:
        """`command_overhead` of every case, indexed by ``4*write + 2*hit + prev_write``."""
        return tuple(c + self.per_request for c in self._cmd)

    def completion_overhead(self, write: bool) -> float:
        """Time (s) between the end of the data transfer and the completion message."""
        return self.write_complete if write else self.read_complete

    def disconnect_overhead(self, write: bool, prev_write: bool) -> float:
        """Time (s) to disconnect from the bus (a request that must wait for the media)."""
        if write:
            return self.disconnect_write
        return self.disconnect_read_after_write if prev_write else self.disconnect_read_after_read

    def reconnect_overhead(self, first: bool = True, with_data: bool = True) -> float:
        """Time (s) to reselect the host after a disconnect, plus data preparation when
        data follow."""
        t = self.reselect_first if first else self.reselect_other
        return t + self.data_prep if with_data else t

    def bus_time(self, sectors: int) -> float:
        """Time (s) for ``sectors`` sectors to cross the bus."""
        return sectors * self.bus_sector

    def describe(self) -> dict:
        """The values in milliseconds (after the time scale), for reports."""
        out = {}
        for name, key in self.DISKSIM_NAMES.items():
            if key == "time_scale":
                out[name] = self.time_scale
            elif key == "bus_sector_ms":
                out[name] = self.bus_sector * 1e3
            else:
                out[name] = getattr(self, key[:-3]) * 1e3
        return out
