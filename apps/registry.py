"""The application models a run can start, each registered by its own module.

An application model is one module (the built-ins: `blksim.apps.fileserver`,
`blksim.apps.oltp`, `blksim.apps.loader`) that ends by handing an `AppModel` record to
`register`: its ``type`` name (the ``[[app]]`` table's ``type``), its keys with their
meanings (every key of its table but ``type``, which is the registry's), and the four
parts the `blksim.apps` package docstring describes: ``parse``, ``start``, ``lines`` and
``compare_rows``.

A module that registers a type name another module already has, declares the
registry's own key ``type``, or leaves out one of the four parts fails at import with one
line naming both modules (`RegistrationError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from blksim.common.builtins import BuiltinModules

#: The built-in models, in the order messages list their types.
_BUILTINS = BuiltinModules(("blksim.apps.fileserver", "blksim.apps.oltp",
                            "blksim.apps.loader"))
#: The key every ``[[app]]`` table has: the model's name.
TYPE_KEY = "type"


class RegistrationError(Exception):
    """An application model's module declares what another already owns, or too little to
    be started; raised when the module is imported."""


@dataclass(frozen=True)
class AppModel:
    """One application model's declaration (see `blksim.apps` for each part)."""

    type: str
    module: str
    keys: dict
    parse: Callable | None
    start: Callable | None
    lines: Callable | None
    compare_rows: Callable | None

    @property
    def table_keys(self) -> dict:
        """Every key of the model's ``[[app]]`` table, ``type`` first."""
        return {TYPE_KEY: f"the application: {self.type}", **self.keys}


_models: dict = {}           # type -> AppModel, in registration order
def register(model: AppModel) -> AppModel:
    """Add ``model`` to the registry (called by its module, at import)."""
    _BUILTINS.load()
    where = model.module
    for part in ("parse", "start", "lines", "compare_rows"):
        if getattr(model, part) is None:
            raise RegistrationError(f"{where}: application model {model.type!r} has no "
                                    f"{part} function")
    other = _models.get(model.type)
    if other is not None:
        raise RegistrationError(f"{where}: application type {model.type!r} is already "
                                f"registered by {other.module}")
    if TYPE_KEY in model.keys:
        raise RegistrationError(f"{where}: [[app]] key {TYPE_KEY!r} is already owned by "
                                f"{__name__} (every [[app]] table has it)")
    _models[model.type] = model
    return model


def unregister(type_name: str) -> None:
    """Remove the model ``type_name`` (tests register throwaway models)."""
    _models.pop(type_name, None)


def models() -> dict:
    """Every registered model by its type, in registration order."""
    _BUILTINS.load()
    return dict(_models)
