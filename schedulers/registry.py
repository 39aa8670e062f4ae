"""Schedulers by name: the built-in elevators, and plugins defined outside blksim.

A name written to ``queue/scheduler`` (configuration files, ``--set``, ``blksim
compare --schedulers``, ``blksim plot heads --scheduler``, ``[[switch]]``) is looked
up in this order:

1. a built-in elevator (``noop``, ``deadline``, ...);
2. ``module:Class``: the class ``Class`` of the importable module ``module``;
3. an installed plugin: an entry point of the group ``blksim.schedulers`` whose
   name is the scheduler's name and whose value is ``module:Class``.

A plugin class must be a subclass of `blksim.block.elevator.Elevator` that
implements the hooks the base class leaves open and declares valid tunables;
anything else is a `PluginError` naming the plugin and what is wrong, a module
whose import raises anything at all (``sys.exit()`` included; only
KeyboardInterrupt goes on) among them, with the module's file. Plugins are
imported only when named or listed, so a broken one never stops the built-in
schedulers from being listed or run.
"""

from __future__ import annotations

import importlib
import re

from blksim._compat import entry_points_in
from blksim.block.elevator import Elevator, Tunable
from blksim.block.mq.elevator import MqElevator

GROUP = "blksim.schedulers"

#: Hooks every scheduler must implement (the base class leaves them open).
REQUIRED_HOOKS = ("add", "dispatch", "requests_merged", "empty", "queued")
#: The same for a multi-queue scheduler (`blksim.block.mq.elevator.MqElevator`).
MQ_REQUIRED_HOOKS = ("insert_requests", "has_work", "dispatch_request", "requests_merged",
                     "empty", "queued")

_SYSFS_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class PluginError(ValueError):
    """A scheduler plugin that cannot be used: one line naming it and what is wrong."""


def _check(cls, label: str) -> type[Elevator]:
    """``cls`` if it is a usable scheduler class, else PluginError."""
    def fail(what: str) -> PluginError:
        return PluginError(f"scheduler plugin {label}: {what}")

    if isinstance(cls, type) and issubclass(cls, MqElevator):
        base, required = MqElevator, MQ_REQUIRED_HOOKS
    elif isinstance(cls, type) and issubclass(cls, Elevator):
        base, required = Elevator, REQUIRED_HOOKS
    else:
        raise fail(f"{cls!r} is not a subclass of blksim.block.elevator.Elevator (2.6 "
                   f"kernels) or blksim.block.mq.elevator.MqElevator (multi-queue kernels)")
    missing = [h for h in required if getattr(cls, h) is getattr(base, h)]
    if missing:
        raise fail(f"{cls.__name__} lacks the hook(s) {', '.join(missing)} (every scheduler "
                   f"of its kind implements {', '.join(required)})")
    if not isinstance(cls.tunables, (tuple, list)):
        raise fail(f"{cls.__name__}.tunables must be a tuple of Tunable, "
                   f"found {type(cls.tunables).__name__}")
    seen = set()
    for t in cls.tunables:
        if not isinstance(t, Tunable):
            raise fail(f"tunable {t!r} is not a blksim.block.elevator.Tunable")
        if not isinstance(t.name, str) or not _SYSFS_NAME.match(t.name):
            raise fail(f"tunable name {t.name!r} is not a sysfs file name "
                       f"(lower-case letters, digits and _, starting with a letter)")
        if t.name in seen:
            raise fail(f"tunable {t.name!r} is declared twice")
        seen.add(t.name)
        numbers = (t.default, t.minimum, t.maximum)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in numbers):
            raise fail(f"tunable {t.name!r}: default, minimum and maximum must be whole "
                       f"numbers, found {numbers}")
        if not t.minimum <= t.default <= t.maximum:
            raise fail(f"tunable {t.name!r}: default {t.default} is outside its range "
                       f"[{t.minimum}, {t.maximum}]")
    return cls


def load_class(spec: str, label: str | None = None) -> type[Elevator]:
    """The scheduler class ``spec`` (``module:Class``) names, checked."""
    label = label or repr(spec)
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise PluginError(f"scheduler plugin {label}: expected module:Class, found {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise                  # the user's Ctrl-C (or blksim's stop request) goes on
    except BaseException as exc:   # noqa: B036 -- see below
        # A plugin's import may fail in any way, sys.exit() and other BaseExceptions
        # included (they would end blksim without a word): say how, in one line,
        # naming the file that raised.
        raise PluginError(f"scheduler plugin {label}: cannot import {module_name}"
                          f"{_file_of(module_name)}: {_one_line(exc)}") from None
    cls = module
    for part in attr.split("."):
        try:
            cls = getattr(cls, part)
        except AttributeError:
            raise PluginError(f"scheduler plugin {label}: module {module_name} has no "
                              f"{attr}") from None
    return _check(cls, label)


def _file_of(module_name: str) -> str:
    """`` (path)``: the file module ``module_name`` is loaded from, when it can be found
    without running anything more of it; else the empty string."""
    import importlib.util
    import sys
    sys.modules.pop(module_name, None)      # a half-run import leaves no module behind
    try:
        spec = importlib.util.find_spec(module_name)
    except BaseException:  # noqa: B036 -- a parent package that raises too: no path
        return ""
    origin = getattr(spec, "origin", None)
    return f" ({origin})" if origin and origin not in ("built-in", "frozen") else ""


def _one_line(exc: BaseException) -> str:
    """``Type: message`` of an exception on one line (``Type`` alone without a message)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def installed_plugins() -> dict:
    """The entry points of group ``blksim.schedulers``, by name (not imported)."""
    return {ep.name: ep for ep in entry_points_in(GROUP)}


def _entry_point_label(ep) -> str:
    return f"{ep.name!r} ({ep.value})"


def load_plugin(name: str) -> type[Elevator] | None:
    """The class of the installed plugin ``name``, checked; None when none is installed."""
    ep = installed_plugins().get(name)
    if ep is None:
        return None
    return load_class(ep.value, _entry_point_label(ep))


def plugin_listing() -> tuple[list, list]:
    """Every installed plugin: ([(name, class, entry point value)], [error line, ...])."""
    good, bad = [], []
    for name, ep in sorted(installed_plugins().items()):
        try:
            good.append((name, load_class(ep.value, _entry_point_label(ep)), ep.value))
        except PluginError as exc:
            bad.append(str(exc))
    return good, bad
