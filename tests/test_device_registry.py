"""The device registry: the built-in types' keys and messages, and a module that registers
what another already owns failing at import with one line naming both."""

from __future__ import annotations

import sys

import pytest

from blksim.disk_models import registry
from blksim.sim.config import ConfigError, resolve


def _resolve(device: dict):
    return resolve({"device": device, "job": [{"name": "j", "rw": "read", "number_ios": 1}]}, "t.toml")


def test_the_device_keys_in_the_order_messages_list_them():
    from blksim.disk_models.types.flash import TUNING_KEYS as FLASH_KEYS
    assert list(registry.device_keys()) == [
        "drive", "queue_depth", "service", "service_time", "capacity", "servers",
        "nr_hw_queues", "raid", "flash", "policy", "age_weight", "start_cylinder",
        "start_angle", *FLASH_KEYS]
    assert [t.name for t in registry.device_types()][:4] == ["drive", "service", "raid",
                                                             "flash"]
    with pytest.raises(ConfigError, match=r"^t.toml: \[device\]: unknown key 'rpm'; valid keys: "
                                          r"drive, queue_depth, service, service_time, "
                                          r"capacity, servers, nr_hw_queues, raid, flash, "
                                          r"policy, age_weight, "
                                          r"start_cylinder, start_angle, "
                                          + ", ".join(FLASH_KEYS) + r", partition$"):
        _resolve({"rpm": 1})


@pytest.mark.parametrize("device, message", [
    ({"service": "fixed", "service_time": "1ms", "drive": "cheetah15k4"},
     "give either drive or service, not both"),
    ({"capacity": "1g"}, "capacity goes with service, which is not set"),
    ({"service": "fixed", "service_time": "1ms", "start_angle": 0.5},
     "start_cylinder and start_angle belong to a drive, not to a service-law device or a "
     "RAID controller"),
    ({"raid": {"level": "raid0", "members": 2}, "service": "fixed"},
     "service with raid: the members' drive goes in the raid table"),
    ({"raid": {"level": "raid0", "members": 2}, "policy": "sptf"},
     "policy and age_weight belong to a drive, not to a service-law device or a RAID "
     "controller"),
])
def test_another_types_key_is_refused_in_the_words_of_today(device, message):
    with pytest.raises(ConfigError) as exc:
        _resolve(device)
    assert str(exc.value) == f"t.toml: [device]: {message}"


def test_each_disk_is_built_by_its_type():
    cfg = resolve({"device": {"service": "fixed", "service_time": "2ms", "capacity": "1g"},
                   "devices": {"sdb": {"raid": {"level": "raid0", "members": 2,
                                                "service": "fixed", "service_time": "1ms",
                                                "capacity": "1g"}}},
                   "job": [{"name": "j", "rw": "read", "number_ios": 1}]}, "t.toml")
    assert [(d.type, d.sectors) for d in cfg.devices.values()] == [
        ("service", 2 << 20), ("raid", 4 << 20)]
    assert cfg.devices["sdb"].queue_depth == 128           # the controller's, by default


def _throwaway(tmp_path, monkeypatch, name: str, body: str):
    (tmp_path / f"{name}.py").write_text(
        "from blksim.disk_models.registry import DeviceType, register\n" + body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_a_module_registering_a_key_another_owns_fails_at_import(tmp_path, monkeypatch):
    _throwaway(tmp_path, monkeypatch, "twodrives", (
        "register(DeviceType(name='ssd', module=__name__, selected_by='ssd',\n"
        "    kind_keys={'ssd': 'x'}, tuning_keys={'start_angle': 'y'},\n"
        "    parse=lambda t, w: t, build=lambda s, n, q, seed: None,\n"
        "    table=lambda s, q: {}, sectors=lambda s, w: 1))\n"))
    before = registry.device_types()
    with pytest.raises(registry.RegistrationError) as exc:
        __import__("twodrives")
    assert str(exc.value) == ("twodrives: device key 'start_angle' is already owned by "
                              "blksim.disk_models.types.mechanical (device type 'drive')")
    assert "\n" not in str(exc.value)
    assert registry.device_types() == before


def test_a_module_without_a_builder_fails_at_import(tmp_path, monkeypatch):
    _throwaway(tmp_path, monkeypatch, "nobuild", (
        "register(DeviceType(name='ssd', module=__name__, selected_by='ssd',\n"
        "    kind_keys={'ssd': 'x'}, parse=lambda t, w: t, build=None,\n"
        "    table=lambda s, q: {}, sectors=lambda s, w: 1))\n"))
    with pytest.raises(registry.RegistrationError, match=r"^nobuild: device type 'ssd' has "
                                                         r"no build function"):
        __import__("nobuild")
    assert "ssd" not in [t.name for t in registry.device_types()]


def test_a_second_default_type_or_a_taken_name_fails(tmp_path, monkeypatch):
    _throwaway(tmp_path, monkeypatch, "default2", (
        "register(DeviceType(name='ssd', module=__name__, kind_keys={'ssd': 'x'},\n"
        "    parse=lambda t, w: t, build=lambda s, n, q, seed: None,\n"
        "    table=lambda s, q: {}, sectors=lambda s, w: 1))\n"))
    with pytest.raises(registry.RegistrationError, match=r"^default2: device type 'ssd' has "
                                                         r"no selecting key, and "
                                                         r"blksim.disk_models.types.mechanical"):
        __import__("default2")
    _throwaway(tmp_path, monkeypatch, "raid2", (
        "register(DeviceType(name='raid', module=__name__, selected_by='array',\n"
        "    kind_keys={'array': 'x'}, parse=lambda t, w: t, build=lambda s, n, q, seed: None,\n"
        "    table=lambda s, q: {}, sectors=lambda s, w: 1))\n"))
    with pytest.raises(registry.RegistrationError, match=r"^raid2: device type 'raid' is "
                                                         r"already registered by "
                                                         r"blksim.disk_models.types.raid$"):
        __import__("raid2")
