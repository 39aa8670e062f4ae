"""The interface every device model implements.

A device is a plain state machine, with no simpy and no engine: the block layer
hands it requests with `submit`, asks `next_event_time` when it must look again,
and collects finished requests with `pop_completed`. Requests are any objects
with ``sector``, ``nr_sectors`` and ``write`` attributes; the device returns the
same objects it was given. A request may also carry ``op`` (a cache flush is
``REQ_OP_FLUSH`` with no sectors, sent only to a device with ``volatile_write_cache``)
and ``fua``; one without them is a plain read or write.
"""

from __future__ import annotations


class DeviceError(ValueError):
    """A device description is impossible or a request does not fit the device."""


class Device:
    """Protocol of a block device model.

    ``queue_depth`` is how many requests it holds at once (``device/queue_depth``
    in sysfs; 1 = no tagged queueing). ``capacity`` is in 512-byte sectors.
    """

    queue_depth: int = 1
    capacity: int = 0
    name: str = "device"
    #: Whether the device reports completion of writes its volatile cache still holds
    #: (the kernel's QUEUE_FLAG_WC; writeback throttling reads it).
    volatile_write_cache: bool = False
    #: Whether it honours REQ_FUA itself (the kernel's QUEUE_FLAG_FUA; SCSI's DPOFUA bit):
    #: without it the block layer follows a FUA write with a cache flush
    #: (`blksim.block.flush`). It matters only with a volatile write cache.
    fua: bool = False
    #: The longest discard it takes, in sectors (``queue/discard_max_bytes`` / 512, what its
    #: driver sets with ``blk_queue_max_discard_sectors``); 0: no discard support.
    max_discard_sectors: int = 0
    #: The service-start probe: None (the default, and then a device calls nothing), or
    #: ``fn(rq, when)``, which the device calls once per request with the time (s, at or
    #: after its submission; a device that plans ahead may call it at submission) at which
    #: it starts serving the request: a drive when its head starts working on it rather
    #: than on the requests ahead of it, a controller when it starts working on it (a
    #: cache hit is service), a flash drive when it fetches the command. Whoever watches
    #: the run sets it (`blksim.sim.explain`); a device without it reports no split of
    #: D2C. Testing it costs one attribute test per request.
    service_probe = None

    def can_accept(self) -> bool:
        """True while fewer than ``queue_depth`` requests are outstanding."""
        raise NotImplementedError

    def submit(self, rq, now: float) -> None:
        """Take a request at time ``now`` (seconds). Only when `can_accept`."""
        raise NotImplementedError

    def next_event_time(self) -> float | None:
        """Absolute time of the next completion, or None when idle."""
        raise NotImplementedError

    def pop_completed(self, now: float) -> list:
        """Remove and return every request whose completion time is <= ``now``, in order."""
        raise NotImplementedError

    def outstanding(self) -> int:
        """Requests accepted and not yet completed."""
        raise NotImplementedError

    def describe(self) -> dict:
        """Facts a user sees in reports (name, capacity, rpm, ...)."""
        return {"name": self.name, "capacity_sectors": self.capacity}
