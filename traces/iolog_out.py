"""Write the bios of a simulated run as an fio iolog (version 3), for real hardware.

`IologRecorder` subscribes to a `RequestQueue`'s ``block_bio_queue`` tracepoint and
writes one line per bio submitted, at its submission time::

    fio version 3 iolog
    0 /dev/sdX add
    0 /dev/sdX open
    <t> /dev/sdX read|write <offset bytes> <length bytes>
    ...
    <t> /dev/sdX close

Timestamps are whole microseconds from the start of the run: fio's iolog v3
reader (fio >= 3.31) takes the difference between consecutive timestamps as
microseconds, and fio's own ``write_iolog`` writes them so. The file name is a
placeholder (default ``/dev/sdX``); replay it on a real device with fio's
``--replay_redirect``, e.g.
``fio --name=replay --read_iolog=FILE --replay_redirect=/dev/sdb --direct=1``.
The file is written to a temporary name and renamed into place by `close`.

A run with several devices names each: every device a process submits to is added and
opened at the start under its own name (``/dev/sdb1``, ``/dev/mapper/vg0-data``), each
bio is written as its process submitted it (a partition's or volume's own sector, before
any remapping), and each device is closed at the end; fio replays it on those devices.
"""

from __future__ import annotations

import os

from blksim.traces.records import PendingFile, make_directory

DEFAULT_FILENAME = "/dev/sdX"
HEADER = "fio version 3 iolog"


class IologRecorder:
    """Records every bio submitted to one queue into an fio iolog v3 file."""

    def __init__(self, path: str, filename: str | None = None) -> None:
        self.path = os.fspath(path)
        self.filename = filename or DEFAULT_FILENAME
        if any(c.isspace() for c in self.filename):
            raise ValueError(f"iolog file name {self.filename!r}: fio's iolog cannot hold "
                             f"white space in a file name")
        make_directory(os.path.dirname(os.path.abspath(self.path)))
        self._pending = PendingFile(self.path, binary=False, buffering=1 << 20)
        self._fh = self._pending.file
        self._fh.write(f"{HEADER}\n0 {self.filename} add\n0 {self.filename} open\n")
        self.count = 0
        self.last_us = 0
        self.queue = None

    def install(self, queue) -> None:
        """Subscribe to ``queue``'s ``block_bio_queue``: every bio submitted is written
        with its submission time."""
        self.queue = queue
        self._fmt = "%d " + self.filename.replace("%", "%%") + " %s %d %d\n"
        queue.subscribe("block_bio_queue", self.queued)

    def queued(self, q, bio, now: float) -> None:
        """One I/O line (``block_bio_queue``)."""
        t_us = int(now * 1e6 + 0.5)
        self.last_us = t_us
        self.count += 1
        self._fh.write(self._fmt % (t_us, "write" if bio.write else "read", bio.sector << 9,
                                    bio.nr_sectors << 9))

    def close(self) -> None:
        """Write the closing line and rename the file into place."""
        self._fh.write(f"{self.last_us} {self.filename} close\n")
        self._pending.commit()

    def discard(self) -> None:
        """Remove the unfinished file."""
        self._pending.discard()


class StackIologRecorder:
    """Records every bio a process submits, to whichever device, into one fio iolog v3
    naming each device. ``devices``: the file name of every device, in the order to add
    them. Give each process the `proxy` of its device instead of the device itself."""

    def __init__(self, path: str, devices: list) -> None:
        self.path = os.fspath(path)
        for name in devices:
            if any(c.isspace() for c in name):
                raise ValueError(f"iolog file name {name!r}: fio's iolog cannot hold white "
                                 f"space in a file name")
        self.devices = list(devices)
        make_directory(os.path.dirname(os.path.abspath(self.path)))
        self._pending = PendingFile(self.path, binary=False, buffering=1 << 20)
        self._fh = self._pending.file
        self._fh.write(f"{HEADER}\n" + "".join(f"0 {d} add\n" for d in self.devices)
                       + "".join(f"0 {d} open\n" for d in self.devices))
        self.count = 0
        self.last_us = 0

    def proxy(self, target, filename: str, clock):
        """``target`` as a process sees it, every submission written under ``filename``."""
        return _LoggedTarget(self, target, filename, clock)

    def write(self, filename: str, bio, now: float) -> None:
        """One I/O line."""
        t_us = int(now * 1e6 + 0.5)
        self.last_us = t_us
        self.count += 1
        self._fh.write(f"{t_us} {filename} {'write' if bio.write else 'read'} "
                       f"{bio.sector << 9} {bio.nr_sectors << 9}\n")

    def close(self) -> None:
        """Write the closing lines and rename the file into place."""
        self._fh.write("".join(f"{self.last_us} {d} close\n" for d in self.devices))
        self._pending.commit()

    def discard(self) -> None:
        """Remove the unfinished file."""
        self._pending.discard()


class _LoggedTarget:
    """A device as one process sees it through a `StackIologRecorder`."""

    def __init__(self, recorder: StackIologRecorder, target, filename: str, clock) -> None:
        self._rec = recorder
        self._target = target
        self._filename = filename
        self._clock = clock
        self.when_request = target.when_request
        self.process_exited = target.process_exited

    def __getattr__(self, name):
        # the rest (capacity, an open file's bios_issued, invalidate, throttled ...) is
        # the target's
        return getattr(self._target, name)

    def submit_bio(self, bio, now=None) -> bool:
        """Write the bio's line, then submit it."""
        self._rec.write(self._filename, bio, self._clock.now if now is None else now)
        return self._target.submit_bio(bio, now)
