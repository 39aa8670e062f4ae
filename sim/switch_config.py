"""The ``[[switch]]`` tables: a scheduler written to a disk's ``queue/scheduler`` at a given
simulated time, with the new elevator's tunables (docs/schedulers.md)."""

from __future__ import annotations

from dataclasses import dataclass

from blksim.block.elevator import resolve_tunables
from blksim.common.config_values import ConfigError, seconds_text
from blksim.common.config_values import check_keys as _check_keys, time_value as _time
from blksim.schedulers import get_scheduler
from blksim.sim.storage_config import PRIMARY


SWITCH_KEYS = {
    "at": "simulated time of the switch, e.g. \"30s\" (after the previous switch, before "
          "[run] duration)",
    "scheduler": "the elevator written to queue/scheduler at that time",
    "iosched": "table of the new scheduler's tunables (queue/iosched/...)",
    "device": "the disk whose queue/scheduler is written (default sda)",
}


@dataclass(frozen=True)
class SwitchSpec:
    """A ``[[switch]]``: at ``at`` seconds write ``scheduler`` to ``queue/scheduler``;
    the new elevator gets the ``iosched`` tunables (every one resolved). A switch to
    the scheduler already active does nothing and has no ``iosched`` (empty)."""

    at: float
    scheduler: str
    iosched: dict
    device: str = "sda"

    def table(self) -> dict:
        """The [[switch]] table that gives this spec back."""
        t = {"at": seconds_text(self.at), "scheduler": self.scheduler}
        if self.device != PRIMARY:
            t["device"] = self.device
        if self.iosched:
            t["iosched"] = dict(self.iosched)
        return t


def parse_switches(tables, source: str, devices: dict, duration: float | None, run: dict,
                   kernel: str = "2.6.18") -> list:
    """Validate the [[switch]] tables: times increasing and within the run, known
    disks, schedulers and tunables."""
    if not isinstance(tables, list):
        raise ConfigError(f"{source}: switch must be an array of tables ([[switch]])")
    out = []
    active = {name: dev.scheduler for name, dev in devices.items()}
    prev = None
    for i, table in enumerate(tables):
        where = f"{source}: [[switch]] #{i + 1}"
        _check_keys(table, SWITCH_KEYS, where)
        for key in ("at", "scheduler"):
            if key not in table:
                raise ConfigError(f"{where}: {key} is required ({SWITCH_KEYS[key]})")
        at = _time(table, "at", where, None)
        if at <= 0:
            raise ConfigError(f"{where}: at must be after the start of the run, "
                              f"found {table['at']!r}")
        if prev is not None and at <= prev[0]:
            raise ConfigError(f"{where}: at = {table['at']!r} must be later than the previous "
                              f"switch's at = {prev[1]!r} (switches in time order)")
        if duration is not None and at >= duration:
            raise ConfigError(f"{where}: at = {table['at']!r} is not before [run] duration = "
                              f"{run.get('duration')!r}")
        device = table.get("device", PRIMARY)
        if isinstance(device, str) and device.startswith("/dev/"):
            device = device[5:]
        if device not in active:
            raise ConfigError(f"{where}: device = {table['device']!r} is not a disk of this "
                              f"run; disks: {', '.join(active)}")
        current = active[device]
        name = str(table["scheduler"])
        try:
            cls = get_scheduler(name, kernel)
        except ValueError as exc:
            raise ConfigError(f"{where}: scheduler: {exc}") from None
        given = table.get("iosched", {})
        if not isinstance(given, dict):
            raise ConfigError(f"{where}: iosched must be a table of tunables")
        if name == current and given:
            raise ConfigError(f"{where}: scheduler {name!r} is already the active one, so "
                              f"the switch does nothing (as writing the same name to "
                              f"queue/scheduler) and cannot apply an iosched table")
        try:
            tunables = cls.tunables_for(kernel) if hasattr(cls, "tunables_for") else cls.tunables
            iosched = resolve_tunables(tunables, given, name)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if name == current:
            iosched = {}                  # nothing changes, the tunables stay as they were
        out.append(SwitchSpec(at, name, iosched, device))
        active[device] = name
        prev = (at, table["at"])
    return out
