"""The ``[cgroups.NAME]`` tables and the ``cgroup`` key of ``[[job]]``, ``[[trace]]`` and
``[[app]]`` (docs/cgroups.md).

A ``[cgroups.NAME]`` table makes the group NAME under the root; NAME is its path
("db", or quoted "tenants/a"), and a table inside a group's table is a child group
(``[cgroups.tenants.a]`` is "tenants/a"). The parent of a path must be given too: mkdir(2)
of a directory whose parent does not exist fails (ENOENT). The root is implicit. A
group's keys are the cgroup v2 interface files in their own spelling; blksim parses
``io.max`` (`parse_io_max`), ``io.latency`` (`parse_io_latency`), ``io.prio.class``
(`parse_io_prio_class`), ``io.weight`` (iocost's weights) and ``io.bfq.weight``
(`parse_io_bfq_weight`), and refuses the io controllers' other files as not modelled
yet. The root's own files, ``io.cost.qos`` and ``io.cost.model`` (cgroup v2 has them on
the root only), are keys of ``[cgroups]`` itself (`parse_iocost`). Groups need cgroup
v2's io controller (Linux 4.5): the multi-queue kernel lines.

``cgroup = "PATH"`` on a ``[[job]]``, ``[[trace]]`` or ``[[app]]`` puts every process of
it in that group (default: the root). `take_placements` takes the key out of those
tables before their own parsers see them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blksim.block.cgroup import IO_MAX_KEYS, CgroupTree
from blksim.common.config_values import ConfigError

#: the interface files blksim parses, and what they mean
CGROUP_KEYS = {
    "io.max": "blk-throttle's limits per device: \"DEVICE rbps=N wbps=N riops=N wiops=N\" "
              "(each a positive whole number or max), one line per device, or a list",
    "io.latency": "blk-iolatency's target per disk: \"DEVICE target=US\" (µs, or max: none), "
                  "one line per disk, or a list",
    "io.prio.class": "blk-ioprio's policy (5.14 on): no-change, none-to-rt, restrict-to-be, "
                     "idle; promote-to-rt from 6.5",
    "io.weight": "iocost's weight: \"default N\" (or N) and \"DEVICE N\" lines, N 1..10000",
    "io.bfq.weight": "bfq's group weight, 1..1000 (default 100): \"N\" or \"default N\", "
                     "and \"DEVICE N\" or \"DEVICE default\" per disk; lines in order",
}
#: the root's files (keys of [cgroups] itself): iocost's, per disk
ROOT_KEYS = {
    "io.cost.qos": "\"DEVICE enable=1 ctrl=auto|user rpct=P rlat=US wpct=P wlat=US min=P "
                   "max=P\" lines",
    "io.cost.model": "\"DEVICE ctrl=auto|user model=linear rbps=N rseqiops=N rrandiops=N "
                     "wbps=N wseqiops=N wrandiops=N\" lines",
}
#: the io controllers' other files: known, not modelled yet
NOT_MODELLED = ("io.low",)
#: cgroup v1 names of files blksim reads under their v2 name
V1_NAMES = {"bfq.weight": "io.bfq.weight", "blkio.bfq.weight": "io.bfq.weight"}
#: The tables that take a ``cgroup`` key.
PLACED = ("job", "trace", "app")


@dataclass
class CgroupSpec:
    """One group: its ``path``, its parsed ``io_max`` (device -> {limit: value or
    None for max}, the limits given only) and ``bfq_weight`` (None, or {"default":
    weight, "devices": {disk: weight}})."""

    path: str
    io_max: dict = field(default_factory=dict)
    io_latency: dict = field(default_factory=dict)     # disk -> target µs (0: max)
    io_prio_class: str | None = None
    io_weight: dict = field(default_factory=dict)
    bfq_weight: dict | None = None

    def table(self) -> dict:
        """The group's keys as a resolved configuration writes them."""
        out = {}
        if self.io_max:
            out["io.max"] = [io_max_line(dev, lim) for dev, lim in self.io_max.items()]
        if self.io_latency:
            out["io.latency"] = [f"{dev} target={us or 'max'}"
                                 for dev, us in self.io_latency.items()]
        if self.io_prio_class is not None:
            out["io.prio.class"] = self.io_prio_class
        if self.io_weight:
            out["io.weight"] = [f"{dev} {w}" for dev, w in self.io_weight.items()]
        if self.bfq_weight is not None:
            out["io.bfq.weight"] = ([f"default {self.bfq_weight['default']}"]
                                    + [f"{d} {w}" for d, w in
                                       self.bfq_weight["devices"].items()])
        return out


@dataclass
class CgroupConfig:
    """The run's groups (parents before children) and the group of each ``[[job]]``,
    ``[[trace]]`` and ``[[app]]`` table, by index (None: the root)."""

    groups: list = field(default_factory=list)
    placements: dict = field(default_factory=lambda: {k: [] for k in PLACED})
    #: io.cost.qos / io.cost.model per disk (`blksim.block.mq.iocost_params.IocostDevice`)
    iocost: dict = field(default_factory=dict)

    def build(self) -> CgroupTree:
        """A run's `CgroupTree` of these groups (no process placed yet)."""
        tree = CgroupTree()
        for spec in self.groups:
            group = tree.add(spec.path)
            group.io_max = {d: dict(v) for d, v in spec.io_max.items()}
            group.io_latency = {d: us for d, us in spec.io_latency.items() if us}
            if spec.io_prio_class is not None:
                group.io_prio_class = spec.io_prio_class
            group.io_weight = dict(spec.io_weight)
            if spec.bfq_weight is not None:
                group.bfq_weight = {"default": spec.bfq_weight["default"],
                                    "devices": dict(spec.bfq_weight["devices"])}
        return tree

    def tables(self) -> dict:
        """``[cgroups]`` as a resolved configuration writes it (paths quoted, flat; the
        root's io.cost files first)."""
        out: dict = {}
        qos = [d.qos_line(n) for n, d in self.iocost.items() if d.qos_written]
        model = [d.model_line(n) for n, d in self.iocost.items() if d.model_written]
        if qos:
            out["io.cost.qos"] = qos
        if model:
            out["io.cost.model"] = model
        out.update({spec.path: spec.table() for spec in self.groups})
        return out


def io_max_line(device: str, limits: dict) -> str:
    """One io.max line: ``DEVICE rbps=N ...`` (None written as max)."""
    return " ".join([device] + [f"{k}={'max' if v is None else v}" for k, v in limits.items()])


def take_placements(raw: dict, source: str) -> tuple:
    """(``raw`` without the ``cgroup`` keys of its job, trace and app tables, those keys:
    {"job": [path or None per table], ...}). ``raw`` itself is not changed."""
    placements = {k: [] for k in PLACED}
    out = dict(raw)
    for kind in PLACED:
        tables = raw.get(kind)
        if not isinstance(tables, list):
            continue
        stripped = []
        for i, table in enumerate(tables):
            if isinstance(table, dict) and "cgroup" in table:
                value = table["cgroup"]
                where = f"{source}: [[{kind}]] #{i + 1}"
                if not isinstance(value, str):
                    raise ConfigError(f"{where}: cgroup must be a group's path such as "
                                      f"\"db\", found {value!r}")
                placements[kind].append(value.strip("/") or None)
                table = {k: v for k, v in table.items() if k != "cgroup"}
            else:
                placements[kind].append(None)
            stripped.append(table)
        out[kind] = stripped
    return out, placements


def parse_cgroups(raw: dict, source: str, kernel: str, devices: dict, volumes: list,
                  placements: dict) -> CgroupConfig | None:
    """The ``[cgroups]`` tables and the placements `take_placements` took, checked: None
    when the run has no groups. ``devices``: the disks by name; ``volumes``: the dm
    volumes (io.max names a disk or a volume)."""
    table = raw.get("cgroups")
    used = [(kind, i, p) for kind, paths in placements.items()
            for i, p in enumerate(paths) if p is not None]
    if table is None and not used:
        return None
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: cgroups must be tables [cgroups.NAME], found "
                          f"{type(table).__name__}")
    from blksim.block.mq.elevator import is_multiqueue
    if not is_multiqueue(kernel):
        raise ConfigError(f"{source}: [cgroups] needs cgroup v2's io controller (Linux 4.5): "
                          f"set [run] kernel to a multi-queue line (5.4-6.6), found {kernel}")
    names = {**{d: d for d in devices}, **{v.name: v.dm_name for v in volumes},
             **{v.dm_name: v.dm_name for v in volumes}}
    config = CgroupConfig()
    seen: set = set()
    table = dict(table)
    root_files = {k: table.pop(k) for k in (*ROOT_KEYS, "io.weight")
                  if k in table and not isinstance(table[k], dict)}
    config.iocost = parse_iocost(root_files, source, kernel, devices, names)
    _groups(table, "", source, set(devices), names, config.groups, seen, kernel)
    for kind, i, path in used:
        if path not in seen:
            raise ConfigError(f"{source}: [[{kind}]] #{i + 1}: cgroup {path!r} is not a "
                              f"group; groups: {', '.join(sorted(seen)) or 'none'} "
                              f"(make one with [cgroups.NAME])")
    config.placements = placements
    from blksim.block.mq.throttle import io_max_problem
    for spec in config.groups:
        for device, limits in spec.io_max.items():
            # what this kernel line's tg_set_limit accepts (blk-throttle's own check)
            problem = io_max_problem(limits, kernel)
            if problem is not None:
                raise ConfigError(f"{source}: [cgroups.{spec.path!r}] io.max {device}: "
                                  f"{problem}")
    return config


def parse_iocost(files: dict, source: str, kernel: str, devices: dict, names: dict) -> dict:
    """The root's ``io.cost.qos`` and ``io.cost.model`` (keys of ``[cgroups]``) as disk
    name -> `IocostDevice`, each line applied as ``ioc_qos_write`` /
    ``ioc_cost_model_write`` (block/blk-iocost.c) applies a write to the file: the
    device (a disk: a device-mapper volume has no request queue of its own, EOPNOTSUPP),
    then its tokens. ``io.weight`` is not a file of the root (CFTYPE_NOT_ON_ROOT)."""
    from blksim.block.mq.iocost_params import IocostDevice, line, parse_model, parse_qos
    if "io.weight" in files:
        raise ConfigError(f"{source}: [cgroups] io.weight: the root has no io.weight "
                          f"(give it to a group, [cgroups.NAME])")
    enable_checked = line(kernel).enable_checked
    out: dict = {}
    for key in ROOT_KEYS:
        if key not in files:
            continue
        where = f"{source}: [cgroups] {key}"
        for text in _lines(files[key], where, "\"DEVICE KEY=VALUE ...\""):
            tokens = text.split()
            if not tokens:
                continue
            dev = tokens[0]
            if dev not in devices:
                if dev in names:
                    raise ConfigError(f"{where}: {dev!r} is a device-mapper volume: iocost "
                                      f"needs a disk's request queue (EOPNOTSUPP)")
                raise ConfigError(f"{where}: {dev!r} is not a disk of the run; valid: "
                                  f"{', '.join(sorted(devices))}")
            spec = out.setdefault(dev, IocostDevice())
            if key == "io.cost.qos":
                problem = parse_qos(tokens[1:], spec, enable_checked)
            else:
                problem = parse_model(tokens[1:], spec)
            if problem is not None:
                raise ConfigError(f"{where}: {dev}: {problem}")
    return out


def _lines(value, where: str, expected: str) -> list:
    """A file's text as lines: a string of lines or a list of strings (``expected``
    names the line's form in the error)."""
    if isinstance(value, str):
        return value.splitlines()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ConfigError(f"{where}: expected {expected} lines (a string or a list of "
                      f"strings), found {value!r}")


def parse_io_weight(value, where: str, disks: set) -> dict:
    """io.weight's text (lines, a list of lines, or a whole number: the default) as
    {"default": N, DEVICE: N}, as ``ioc_weight_write`` reads each line."""
    from blksim.block.mq.iocost_params import parse_weight_line
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    out: dict = {}
    for text in _lines(value, where, "\"default N\" or \"DEVICE N\""):
        problem = parse_weight_line(text, out, disks.__contains__)
        if problem is not None:
            raise ConfigError(f"{where}: {problem}")
    return out


def _groups(table: dict, prefix: str, source: str, disks: set, names: dict, out: list,
            seen: set, kernel: str) -> None:
    """The groups of ``table`` (group name -> its keys) under path ``prefix``, in
    ``out``: each before its children, explicit paths checked for their parent."""
    for name, keys in table.items():
        path = f"{prefix}/{name}" if prefix else name
        where = f"{source}: [cgroups.{path!r}]"
        if not isinstance(keys, dict):
            raise ConfigError(f"{where}: expected a table of interface files, found "
                              f"{keys!r}")
        parts = path.split("/")
        if any(p in ("", ".", "..") or "\n" in p for p in parts):
            raise ConfigError(f"{where}: a group's path is names joined by /, none empty, "
                              f". or ..")
        parent = "/".join(parts[:-1])
        if parent and parent not in seen:
            raise ConfigError(f"{where}: its parent {parent!r} is not a group: make "
                              f"[cgroups.{parent!r}] too (mkdir of a child needs its "
                              f"parent)")
        if path in seen:
            raise ConfigError(f"{where}: the group is given twice")
        seen.add(path)
        spec = CgroupSpec(path)
        out.append(spec)
        children = {}
        for key, value in keys.items():
            if isinstance(value, dict):
                children[key] = value
            elif key in NOT_MODELLED:
                raise ConfigError(f"{where}: {key} is not modelled yet (blksim models "
                                  f"{', '.join(CGROUP_KEYS)})")
            elif key in V1_NAMES:
                raise ConfigError(f"{where}: {key} is cgroup v1's blkio.bfq.weight: on "
                                  f"cgroup v2 the file is {V1_NAMES[key]}")
            elif key in ROOT_KEYS:
                raise ConfigError(f"{where}: {key} is a file of the root only: give it "
                                  f"in [cgroups] itself")
            elif key == "io.max":
                spec.io_max = parse_io_max(value, f"{where} io.max", names)
            elif key == "io.latency":
                spec.io_latency = parse_io_latency(value, f"{where} io.latency", disks,
                                                   names)
            elif key == "io.prio.class":
                spec.io_prio_class = parse_io_prio_class(value, f"{where} io.prio.class",
                                                         kernel)
            elif key == "io.weight":
                spec.io_weight = parse_io_weight(value, f"{where} io.weight", disks)
            elif key == "io.bfq.weight":
                spec.bfq_weight = parse_io_bfq_weight(value, f"{where} io.bfq.weight",
                                                      names, disks)
            else:
                raise ConfigError(f"{where}: unknown key {key!r}; valid keys: "
                                  f"{', '.join(CGROUP_KEYS)} (and child groups as tables)")
        _groups(children, path, source, disks, names, out, seen, kernel)


def parse_io_max(value, where: str, names: dict) -> dict:
    """io.max's text (a string of lines, or a list of lines) as device -> {limit:
    value}, as ``tg_set_limit`` (block/blk-throttle.c, 5.4-6.6) reads each line: the
    device, then ``KEY=VALUE`` tokens, KEY one of rbps wbps riops wiops, VALUE a
    positive whole number (0 is ERANGE) or ``max`` (no limit); a later line for the
    same device changes only the limits it names. blksim names the device by its name
    (``names``: every accepted name -> the device) where the kernel takes MAJ:MIN."""
    out: dict = {}
    for line in _lines(value, where, "\"DEVICE rbps=N ...\""):
        tokens = line.split()
        if not tokens:
            continue
        dev = tokens[0]
        if dev not in names:
            raise ConfigError(f"{where}: {dev!r} is not a disk or volume of the run; "
                              f"valid: {', '.join(sorted(names))}")
        if len(tokens) == 1:
            raise ConfigError(f"{where}: {line.strip()!r} names no limit; expected "
                              f"{' '.join(k + '=N' for k in IO_MAX_KEYS)} (N or max)")
        limits = out.setdefault(names[dev], {})
        for tok in tokens[1:]:
            key, eq, text = tok.partition("=")
            if key not in IO_MAX_KEYS or not eq:
                raise ConfigError(f"{where}: {tok!r}: expected KEY=N or KEY=max, KEY one of "
                                  f"{', '.join(IO_MAX_KEYS)}")
            if text == "max":
                limits[key] = None
            elif text.isdigit() and 0 < int(text) < 1 << 64:
                limits[key] = int(text)
            else:
                raise ConfigError(f"{where}: {tok!r}: {key} must be a positive whole number "
                                  f"or max")
    return out


def parse_io_latency(value, where: str, disks, names: dict) -> dict:
    """io.latency's text as disk -> target (µs; 0 for max), as ``iolatency_set_limit``
    (block/blk-iolatency.c, 5.4-6.6) reads each line: the device, then ``target=N``
    (N µs, a whole number) or ``target=max`` (no target; so is 0); any other token is
    EINVAL, and so is a line with none. A later line for a disk replaces its target.
    Only a disk: blk-iolatency is an rq_qos policy of a request queue, and a
    device-mapper volume's queue is bio-based."""
    out: dict = {}
    for line in _lines(value, where, "\"DEVICE target=US\""):
        tokens = line.split()
        if not tokens:
            continue
        dev = tokens[0]
        if dev not in disks:
            what = " (a device-mapper volume has no request queue for it)" \
                if dev in names else ""
            raise ConfigError(f"{where}: {dev!r} is not a disk of the run{what}; valid: "
                              f"{', '.join(sorted(disks))}")
        if len(tokens) == 1:
            raise ConfigError(f"{where}: {line.strip()!r} names no target; expected "
                              f"{dev} target=US (µs) or target=max")
        for tok in tokens[1:]:
            key, eq, text = tok.partition("=")
            if key != "target" or not eq:
                raise ConfigError(f"{where}: {tok!r}: expected target=US (µs) or target=max")
            if text == "max":
                out[dev] = 0
            elif text.isdigit() and int(text) * 1000 < 1 << 64:
                out[dev] = int(text)
            else:
                raise ConfigError(f"{where}: {tok!r}: target must be a whole number of µs "
                                  f"or max")
    return out


def parse_io_prio_class(value, where: str, kernel: str) -> str:
    """io.prio.class's policy name, one the run's kernel line accepts
    (``ioprio_set_prio_policy``'s ``sysfs_match_string``, block/blk-ioprio.c): refused
    before 5.14, which has no blk-ioprio."""
    from blksim.block.mq.ioprio import FIRST, line_for_kernel
    line = line_for_kernel(kernel)
    if line is None:
        raise ConfigError(f"{where}: io.prio.class needs Linux {FIRST} (blk-ioprio); the "
                          f"run's kernel is {kernel}")
    if not isinstance(value, str) or value.strip() not in line["names"]:
        raise ConfigError(f"{where}: expected one of {', '.join(line['names'])} (kernel "
                          f"{kernel}), found {value!r}")
    return value.strip()


def _bfq_weight_value(text: str, where: str, line: str) -> int:
    """A weight of io.bfq.weight: 1..1000 (``BFQ_MIN_WEIGHT``..``BFQ_MAX_WEIGHT``; the
    kernel answers ERANGE outside, EINVAL for what is not a number)."""
    if not text.isdigit():
        raise ConfigError(f"{where}: {line!r}: expected \"N\", \"default N\", \"DEVICE N\" "
                          f"or \"DEVICE default\", N a whole number from 1 to 1000")
    weight = int(text)
    if not 1 <= weight <= 1000:
        raise ConfigError(f"{where}: {line!r}: the weight must be from 1 to 1000 "
                          f"(ERANGE), found {weight}")
    return weight


def parse_io_bfq_weight(value, where: str, names: dict, disks: set) -> dict:
    """io.bfq.weight (an integer, a string of lines or a list of lines) as {"default":
    weight, "devices": {disk: weight}}, each line taken as a write to the file in
    order (``bfq_io_set_weight``, block/bfq-cgroup.c, 5.4-6.6):

    * ``N`` or ``default N`` sets the group's default weight and, as
      ``bfq_io_set_weight_legacy`` calls ``bfq_group_set_weight(bfqg, N, 0)`` on every
      device the group has a weight on already, replaces those per-device weights;
    * ``DEVICE N`` sets the weight on one disk (``bfq_io_set_device_weight``; the
      per-device form came with 5.4, "bfq: Add per-device weight");
    * ``DEVICE default`` drops the device's own weight; the kernel then sets its
      weight to the group entity's current one (``bfqg->entity.weight``), which before
      any I/O is the default the group had when the device was first named.

    A weight is 1..1000. blksim names the disk by its name where the kernel takes
    MAJ:MIN; a device-mapper volume has no scheduler (the kernel answers EOPNOTSUPP)."""
    if isinstance(value, int) and not isinstance(value, bool):
        lines = [str(value)]
    elif isinstance(value, str):
        lines = value.splitlines()
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        lines = value
    else:
        raise ConfigError(f"{where}: expected a weight (1..1000) or lines \"default N\", "
                          f"\"DEVICE N\" (a string or a list of strings), found {value!r}")
    default = 100                         # CGROUP_WEIGHT_DFL (bfq_cpd_init on cgroup v2)
    created: dict = {}                    # device -> the weight its group started with
    devices: dict = {}                    # device -> its weight (bfqg->entity.new_weight)
    for raw_line in lines:
        line = raw_line.strip()
        if not line:
            continue
        tokens = line.split()
        if len(tokens) == 1 or (len(tokens) == 2 and tokens[0] == "default"):
            default = _bfq_weight_value(tokens[-1], where, line)
            for dev in devices:
                devices[dev] = default
            continue
        if len(tokens) != 2:
            _bfq_weight_value("", where, line)
        dev, body = tokens
        if dev not in names:
            raise ConfigError(f"{where}: {dev!r} is not a disk of the run; valid: "
                              f"{', '.join(sorted(disks))}")
        if names[dev] not in disks:
            raise ConfigError(f"{where}: {dev!r} is a device-mapper volume, which has no "
                              f"I/O scheduler (EOPNOTSUPP): name a disk")
        dev = names[dev]
        created.setdefault(dev, default)
        devices[dev] = created[dev] if body == "default" else _bfq_weight_value(body, where,
                                                                               line)
    return {"default": default,
            "devices": {d: w for d, w in devices.items() if w != default}}
