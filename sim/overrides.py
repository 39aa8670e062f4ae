"""``--set PATH=VALUE`` overrides by sysfs path, and the checks a comparison makes of the
tunables it applies to several schedulers."""

from __future__ import annotations

from blksim._compat import tomllib
from blksim.common.config_values import ConfigError
from blksim.schedulers import check_name, get_scheduler
from blksim.sim.storage_config import PRIMARY


def iosched_leniency(scheduler: str | None, sets: list):
    """``resolve``'s ``lenient_iosched`` for a run whose scheduler the caller chooses
    (``scheduler``, or a ``--set .../queue/scheduler`` among ``sets``): False when none is
    chosen; else the names of the queue/iosched tunables ``sets`` asks for explicitly (a
    frozenset, maybe empty), which stay errors while the configured scheduler's other
    tunables that the chosen one lacks are left out."""
    paths = [str(item).split("=", 1)[0].strip().strip("/") for item in sets]
    if scheduler is None and not any(p.endswith("queue/scheduler") for p in paths):
        return False
    return frozenset(p.split("/")[-1] for p in paths if "/iosched/" in f"/{p}")


def parse_override_value(text: str):
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except ValueError:          # not TOML (or an integer beyond int()'s digit limit): text
        return text


def apply_overrides(raw: dict, sets: list[str]) -> dict:
    """Apply ``--set PATH=VALUE`` overrides; PATH is a sysfs-style path such as
    ``queue/iosched/fifo_batch``, ``queue/nr_requests``, ``device/queue_depth`` or
    ``run/seed``; a disk's name before it (``sdb/queue/scheduler``) addresses that disk
    (without one: sda); ``cgroups/GROUP/FILE`` writes a group's interface file
    (``cgroups/bulk/io.max``). Returns a new dict."""
    out = _deep_copy(raw)
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected PATH=VALUE, e.g. queue/nr_requests=64")
        path, text = item.split("=", 1)
        parts = [p for p in path.strip().strip("/").split("/") if p]
        if parts[:1] == ["sys"] or parts[:2] == ["block"]:
            raise ConfigError(f"--set {item!r}: give the path below the device, e.g. "
                              f"queue/iosched/fifo_batch=8")
        if parts[:1] == ["cgroups"]:
            _set_cgroup_file(out, item, parts[1:], parse_override_value(text.strip()))
            continue
        base = out
        if len(parts) >= 3 and parts[0] not in ("queue", "device", "run") \
                and parts[1] in ("queue", "device"):
            disk, parts = parts[0], parts[1:]
            disks = out.get("devices")
            if isinstance(disks, dict) and isinstance(disks.get(disk), dict):
                base = disks[disk]
                # [devices.NAME] holds the device keys itself and its queue as a sub-table
                if parts[0] == "device":
                    parts = parts[1:]
                    if len(parts) != 1:
                        raise ConfigError(f"--set {item!r}: unknown path {path!r}")
            elif disk != PRIMARY:
                known = [PRIMARY] + [d for d in (disks or {}) if d != PRIMARY]
                raise ConfigError(f"--set {item!r}: no disk {disk!r} in the configuration; "
                                  f"disks: {', '.join(known)}")
            if not parts:
                raise ConfigError(f"--set {item!r}: unknown path {path!r}")
        if base is out or parts[0] == "queue":
            if len(parts) < 2 or parts[0] not in ("queue", "device", "run"):
                raise ConfigError(f"--set {item!r}: PATH must start with queue/, device/ or "
                                  f"run/, or a disk's name and queue/ or device/ (e.g. "
                                  f"queue/iosched/fifo_batch=8, sdb/queue/scheduler=cfq)")
            if parts[0] == "queue" and len(parts) == 3 and parts[1] != "iosched":
                raise ConfigError(f"--set {item!r}: unknown path; queue tunables are "
                                  f"queue/<name> and queue/iosched/<name>")
            if len(parts) > 3 or (parts[0] != "queue" and len(parts) != 2):
                raise ConfigError(f"--set {item!r}: unknown path {path!r}")
            if base is not out and parts[0] == "run":
                raise ConfigError(f"--set {item!r}: run/ settings belong to no disk")
        node = base
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {item!r}: {p} is not a table")
            node = nxt
        node[parts[-1]] = parse_override_value(text.strip())
    return out


def _set_cgroup_file(raw: dict, item: str, parts: list, value) -> None:
    """``--set cgroups/PATH/FILE=VALUE``: write a group's interface file, as writing
    /sys/fs/cgroup/PATH/FILE does (``cgroups/bulk/io.max="sda wbps=1048576"``). The group
    must be one of the configuration's ``[cgroups.NAME]`` tables (nested, or a quoted
    path); the value is checked as the table's own would be (docs/cgroups.md). The
    root's own files, ``cgroups/io.cost.qos`` and ``cgroups/io.cost.model``, are keys of
    ``[cgroups]`` itself. A --set replaces the key's whole value."""
    from blksim.sim.cgroup_config import ROOT_KEYS
    if len(parts) < 2 and not (parts and parts[0] in ROOT_KEYS):
        raise ConfigError(f"--set {item!r}: expected cgroups/GROUP/FILE=VALUE, e.g. "
                          f"cgroups/bulk/io.max=\"sda wbps=1048576\", or a root file, "
                          f"cgroups/io.cost.qos=\"sda enable=1\"")
    if len(parts) == 1 and parts[0] in ROOT_KEYS:
        # the root's own files (/sys/fs/cgroup/io.cost.qos): keys of [cgroups] itself
        groups = raw.setdefault("cgroups", {})
        if not isinstance(groups, dict):
            raise ConfigError(f"--set {item!r}: [cgroups] is not a table")
        groups[parts[0]] = value
        return
    path, key = "/".join(parts[:-1]), parts[-1]
    groups = raw.get("cgroups")
    node = groups.get(path) if isinstance(groups, dict) else None
    if not isinstance(node, dict):
        node = groups
        for name in parts[:-1]:
            node = node.get(name) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise ConfigError(f"--set {item!r}: no group {path!r} in the configuration (make it "
                          f"with [cgroups.{path.replace('/', '.')}])")
    node[key] = value


def _deep_copy(x):
    if isinstance(x, dict):
        return {k: _deep_copy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_deep_copy(v) for v in x]
    return x


def check_iosched_known(raw: dict, schedulers: list[str], source: str,
                        devices=None) -> None:
    """For a comparison: every ``queue/iosched`` key of the disks compared (``devices``,
    default every disk) must belong to at least one of the schedulers."""
    from blksim.sim.storage_config import PRIMARY
    known: set[str] = set()
    for name in schedulers:
        known |= {t.name for t in check_name(name).tunables}
    tables = [(PRIMARY, "queue/iosched", raw.get("queue", {}))]
    for disk, table in (raw.get("devices") or {}).items():
        if isinstance(table, dict):
            tables.append((disk, f"{disk}/queue/iosched", table.get("queue", {})))
    for disk, path, queue in tables:
        if devices is not None and disk not in devices:
            continue
        given = (queue.get("iosched", {}) if isinstance(queue, dict) else {}) or {}
        for key in (given if isinstance(given, dict) else {}):
            if key not in known:
                raise ConfigError(
                    f"{source}: unknown tunable {path}/{key} for schedulers "
                    f"{', '.join(schedulers)}; valid: {', '.join(sorted(known)) or '(none)'}")
