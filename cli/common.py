"""What the ``blksim`` subcommands share: the user-error type and the reporting of
user errors, loading a configuration with the command line's overrides, and
resolving it for one scheduler."""

from __future__ import annotations

import os
import sys

SET_HELP = ("override a tunable by its sysfs path below /sys/block/<dev>/, e.g. "
            "queue/iosched/fifo_batch=8, queue/nr_requests=64, device/queue_depth=4, "
            "or a [run] key such as run/seed=7; another disk than sda by its name first, "
            "e.g. sdb/queue/scheduler=cfq; a group's interface file as cgroups/GROUP/FILE, "
            "e.g. cgroups/bulk/io.max=\"sda wbps=1048576\" (repeatable)")


class UserError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


def positive_time(text: str, flag: str, what: str = "time") -> float:
    """A command-line time (``"500ms"``, bare seconds) that must be positive, in seconds;
    a `UserError` naming ``flag`` otherwise."""
    from blksim.common.units import parse_time
    try:
        seconds = parse_time(text, flag, "s")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not seconds > 0.0:
        raise UserError(f"{flag}: expected a positive {what}, found {text!r}")
    return seconds


def user_errors():
    from blksim.disk_models.base import DeviceError
    from blksim.disk_models.disksim.params import DiskSimError
    from blksim.block.legacy_queue import SimulationError
    from blksim.experiments.validation.study import ValidationError
    from blksim.sim.replay import ReplayError
    from blksim.traces.disksim_ascii import TraceError
    from blksim.sim.config import ConfigError
    return (ConfigError, DeviceError, DiskSimError, TraceError, SimulationError,
            ValidationError, UserError, ReplayError)


def load(args, raw_text: str | None = None, raw: dict | None = None,
         source: str | None = None) -> tuple[dict, str]:
    """The raw configuration ``args`` names (or ``raw_text``, or the tables ``raw`` named
    ``source``), with the command line's replay flags and overrides applied, and its
    source name."""
    from blksim.sim import config as cfgmod
    from blksim._compat import tomllib
    if raw is not None:
        raw = dict(raw)
    elif raw_text is not None:
        raw = tomllib.loads(raw_text)
        from blksim.api import BUILTIN_SOURCE
        source = BUILTIN_SOURCE
    elif args.config.endswith(".fio"):
        source = args.config
        if not os.path.isfile(source):
            raise UserError(f"{source}: no such fio job file")
        raw = cfgmod.config_for_fio_jobfile(source)
    else:
        source = args.config
        raw = cfgmod.load_file(source)
    _apply_replay_flags(args, raw)
    name = getattr(args, "iolog_filename", None)
    if name is not None and (not name or any(c.isspace() for c in name)):
        raise UserError(f"--iolog-filename {name!r}: fio's iolog needs a name without spaces")
    sets = list(args.set)
    if args.seed is not None:
        sets.append(f"run/seed={args.seed}")
    if args.duration is not None:
        sets.append(f'run/duration="{args.duration}"')
    return cfgmod.apply_overrides(raw, sets), source


_REPLAY_FLAGS = (("mode", "mode"), ("speed", "speed"), ("max_gap", "max_gap"),
                 ("trace_start", "start"), ("trace_end", "end"),
                 ("max_requests", "max_requests"), ("device", "device"), ("volume", "volume"),
                 ("remap", "remap"), ("trace_format", "format"), ("events", "events"),
                 ("align", "align"))


def _apply_replay_flags(args, raw: dict) -> None:
    """Copy the trace replay flags into every [[trace]] table of ``raw``."""
    given = {key: getattr(args, attr) for attr, key in _REPLAY_FLAGS
             if getattr(args, attr, None) is not None}
    if not given:
        return
    tables = raw.get("trace")
    if not tables or not isinstance(tables, list):
        flags = ", ".join("--" + attr.replace("_", "-") for attr, key in _REPLAY_FLAGS
                          if key in given)
        raise UserError(f"{flags}: trace replay options, but the configuration has no "
                        f"[[trace]] to replay")
    for table in tables:
        if isinstance(table, dict):
            if "volume" in given or "device" in given:
                for k in ("device", "volume", "devno"):
                    table.pop(k, None)
            table.update(given)


def prepare(raw: dict, source: str, scheduler: str | None, lenient):
    """``raw`` resolved for ``scheduler`` (lenient: drop tunables it lacks, as compare does;
    a frozenset as `sim.config.iosched_leniency` gives it)."""
    from blksim.sim import config as cfgmod
    return cfgmod.resolve(raw, source, scheduler=scheduler, lenient_iosched=lenient)


def print_warnings(cfg) -> None:
    for line in cfg.warnings:
        print(f"blksim: warning: {line}", file=sys.stderr)
