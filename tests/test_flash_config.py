"""Selecting a flash drive in a configuration: its keys, the queues it offers, bad input
(one line naming the key), and `blksim run` end to end on every preset."""

from __future__ import annotations

import json

import pytest

from blksim.common.config_values import ConfigError
from blksim.disk_models import registry
from blksim.disk_models.types.flash import TYPE, kernel_refusal

W = registry.Where("cfg.toml", "[device]")


def parse(**device):
    dtype, settings = registry.parse({"flash": "samsung980pro1tb", **device}, W)
    assert dtype is TYPE
    return settings


def test_the_flash_key_selects_the_type_and_its_queues():
    s = parse()
    assert TYPE.hw_queues(s) == 128 and TYPE.queue_depth(s) == 1023
    assert TYPE.rotational(s) is False
    assert TYPE.sectors(s, W) == 1953525168
    # the drive grants at most its own count; the kernel asks one per CPU
    assert TYPE.hw_queues(parse(io_queues=4)) == 4
    assert TYPE.hw_queues(parse(io_queues=1000)) == 128
    # queue entries: the kernel's 1024 by default, fewer when asked
    assert TYPE.queue_depth(parse(queue_entries=64)) == 63
    sata = registry.parse({"flash": "samsung870evo1tb"}, W)[1]
    assert (TYPE.hw_queues(sata), TYPE.queue_depth(sata)) == (1, 32)


def test_tuning_keys_override_the_preset_and_come_back_in_the_table():
    s = parse(plp=True, write_buffer="8m", start_state="steady", suspend=True,
              blocks_per_plane=128)
    spec = s.spec
    assert spec.plp and spec.buffer_units == 2048 and spec.suspend
    assert spec.start_state == "steady"
    assert spec.over_provisioning == pytest.approx(parse().spec.over_provisioning, abs=1e-6)
    assert spec.capacity_sectors < parse().spec.capacity_sectors / 30
    table = TYPE.table(s, 1023)
    assert table["flash"] == "samsung980pro1tb" and table["plp"] is True
    again = registry.parse({k: v for k, v in table.items() if k != "queue_depth"}, W)[1]
    assert again.spec == s.spec


@pytest.mark.parametrize("device, words", [
    ({"over_provisioning": 0}, "over_provisioning"),
    ({"over_provisioning": 0.6}, "over_provisioning"),
    ({"io_queues": 70000}, "io_queues"),
    ({"queue_entries": 1}, "queue_entries"),
    ({"start_state": "dirty"}, "start_state"),
    ({"gc_policy": "lru"}, "gc_policy"),
    ({"pcie_gen": 7}, "pcie_gen"),
    ({"sq_priority": ["top"]}, "sq_priority"),
    ({"wrr_weights": [1, 2]}, "wrr_weights"),
    ({"plp": "yes"}, "plp"),
    ({"mapping_unit": 3000}, "mapping_unit"),
])
def test_bad_values_are_refused_in_one_line_naming_the_key(device, words):
    with pytest.raises(ConfigError) as err:
        parse(**device)
    text = str(err.value)
    assert "\n" not in text and words in text and text.startswith("cfg.toml: [device]")


def test_a_queue_count_above_sata_s_one_is_refused():
    with pytest.raises(ConfigError, match=r"cfg.toml: \[device\]: io_queues is an NVMe "):
        registry.parse({"flash": "samsung870evo1tb", "io_queues": 2}, W)
    with pytest.raises(ConfigError, match="io_queues is an NVMe"):
        parse(interface="sata", io_queues=4)


def test_a_geometry_smaller_than_the_capacity_is_refused(tmp_path):
    text = (__import__("blksim.disk_models.flash_presets", fromlist=["x"]).FLASH_PRESET_DIR
            / "samsung980pro1tb.toml").read_text()
    bad = tmp_path / "small.toml"
    bad.write_text(text.replace("blocks_per_plane = 4096", "blocks_per_plane = 3000"))
    with pytest.raises(ConfigError) as err:
        registry.parse({"flash": str(bad)}, W)
    msg = str(err.value)
    assert "\n" not in msg and "capacity" in msg and "small.toml" in msg


def test_unknown_keys_and_presets_are_refused():
    from blksim.sim.disk_config import parse_disk
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        parse_disk("sda", {"flash": "samsung980pro1tb", "bogus": 1}, {}, "cfg.toml", False,
                   None, False, None, kernel="6.6")
    with pytest.raises(ConfigError, match="unknown flash preset 'nonesuch'.*samsung980pro1tb"):
        registry.parse({"flash": "nonesuch"}, W)
    with pytest.raises(ConfigError, match="either drive or flash"):
        registry.parse({"flash": "samsung980pro1tb", "drive": "cheetah15k4"}, W)


def test_an_nvme_drive_is_refused_on_the_2_6_line():
    assert "kernel 2.6.18" in kernel_refusal(parse(), "2.6.18")
    assert kernel_refusal(parse(), "6.6") is None
    assert kernel_refusal(registry.parse({"flash": "samsung870evo1tb"}, W)[1], "2.6.18") is None


# ---------------------------------------------------------------- end to end
#: Each preset in a small build (its parallelism, a few GB of flash).
SMALL = {"samsung980pro1tb": 128, "samsungpm9a3_7t68": 64, "samsung870evo1tb": 128,
         "optanep4800x375g": 64}


def _run(tmp_path, preset, kernel, extra=""):
    cfg = tmp_path / f"{preset}-{kernel}.toml"
    cfg.write_text(f"""
[run]
name = "e2e"
seed = 1
kernel = "{kernel}"

[device]
flash = "{preset}"
blocks_per_plane = {SMALL[preset]}
start_state = "full"
{extra}

[[job]]
name = "mix"
rw = "randrw"
bs = "4k"
iodepth = 8
ioengine = "libaio"
direct = 1
number_ios = 2000
""")
    from blksim.cli import main
    out = tmp_path / f"out-{preset}-{kernel}"
    assert main(["run", str(cfg), "-q", "--out", str(out)]) == 0
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("preset", sorted(SMALL))
def test_blksim_runs_each_preset_on_a_multi_queue_kernel(tmp_path, preset):
    res = _run(tmp_path, preset, "6.6")
    text = json.dumps(res)
    assert '"figures"' in text and '"write_amplification"' in text
    assert '"rotational": false' in text


def test_blksim_runs_the_sata_preset_on_2_6_18(tmp_path):
    res = _run(tmp_path, "samsung870evo1tb", "2.6.18")
    assert '"interface": "sata"' in json.dumps(res)


def test_an_unknown_key_in_a_flash_file_is_refused(tmp_path):
    from blksim.disk_models.flash_presets import FLASH_PRESET_DIR
    text = (FLASH_PRESET_DIR / "samsung870evo1tb.toml").read_text()
    bad = tmp_path / "typo.toml"
    bad.write_text(text.replace("read_us = 45", "raed_us = 45"))
    with pytest.raises(ConfigError) as err:
        registry.parse({"flash": str(bad)}, W)
    msg = str(err.value)
    assert "\n" not in msg and "typo.toml" in msg and "[nand] unknown key 'raed_us'" in msg
