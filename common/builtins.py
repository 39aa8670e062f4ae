"""The built-in entries of a registry, imported once on the registry's first use.

A registry (device types, application models) holds what modules register when they
are imported. Its built-in modules are imported the first time the registry is used,
so that a module registered from outside is checked against them and the built-ins
keep their order; a registration made while they load (their own) does not load them
again.
"""

from __future__ import annotations

import importlib


class BuiltinModules:
    """Modules (dotted names) that register a registry's built-in entries."""

    def __init__(self, names: tuple) -> None:
        self.names = names
        self.state = "unloaded"          # -> "loading" -> "loaded"

    def load(self) -> None:
        """Import the modules, the first time only (each registers itself)."""
        if self.state != "unloaded":
            return
        self.state = "loading"
        try:
            for name in self.names:
                importlib.import_module(name)
        finally:
            self.state = "loaded"
