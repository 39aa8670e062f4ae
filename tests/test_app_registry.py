"""The application registry: the built-in models, and a module that registers what another
already owns (or too little) failing at import with one line naming both."""

from __future__ import annotations

import sys

import pytest

from blksim.apps import registry
from blksim.sim.config import ConfigError, resolve


def test_the_built_in_models_in_the_order_messages_list_them():
    assert list(registry.models()) == ["fileserver", "oltp", "loader"]
    assert all(list(m.table_keys)[:2] == ["type", "name"] for m in registry.models().values())
    with pytest.raises(ConfigError) as exc:
        resolve({"app": [{"type": "mail"}]}, "t.toml")
    assert str(exc.value) == ("t.toml: [[app]] #1: type expected one of fileserver, oltp, "
                              "loader, found 'mail'")


def _throwaway(tmp_path, monkeypatch, name: str, body: str):
    (tmp_path / f"{name}.py").write_text(
        "from blksim.apps.registry import AppModel, register\n"
        "f = lambda *args: None\n" + body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.parametrize("module, body, message", [
    ("oltp2", "register(AppModel(type='oltp', module=__name__, keys={}, parse=f, start=f,\n"
              "                  lines=f, compare_rows=f))\n",
     "oltp2: application type 'oltp' is already registered by blksim.apps.oltp"),
    ("typed", "register(AppModel(type='mail', module=__name__, keys={'type': 'x'}, parse=f,\n"
              "                  start=f, lines=f, compare_rows=f))\n",
     "typed: [[app]] key 'type' is already owned by blksim.apps.registry (every [[app]] "
     "table has it)"),
    ("nostart", "register(AppModel(type='mail', module=__name__, keys={}, parse=f,\n"
                "                  start=None, lines=f, compare_rows=f))\n",
     "nostart: application model 'mail' has no start function"),
])
def test_a_module_that_registers_what_another_owns_fails_at_import(tmp_path, monkeypatch,
                                                                    module, body, message):
    _throwaway(tmp_path, monkeypatch, module, body)
    before = registry.models()
    with pytest.raises(registry.RegistrationError) as exc:
        __import__(module)
    assert str(exc.value) == message
    assert registry.models() == before
