"""traces.jobs: [[job]] tables in fio's option names."""

import pytest

from blksim.traces.jobs import VALID_KEYS, JobSpec, parse_job, parse_jobs

WHERE = "config.toml: job 'writer'"
DEVICE = 2_000_000          # sectors, about 1 GB


def job(device=DEVICE, **keys) -> JobSpec:
    return parse_job({"name": "writer", **keys}, WHERE, device)


def error(device=DEVICE, **keys) -> str:
    with pytest.raises(ValueError) as info:
        job(device, **keys)
    return str(info.value)


def test_defaults_follow_fio_except_rate_process():
    spec = job()
    assert spec.rw == "read" and not spec.random
    assert spec.bssplit == ((4096, 100.0),) and spec.blockalign == 4096
    assert (spec.offset, spec.size, spec.offset_increment) == (0, None, 0)
    assert (spec.numjobs, spec.iodepth, spec.thinktime, spec.thinktime_blocks) == (1, 1, 0.0, 1)
    assert spec.rate_iops is None and spec.rate_process == "poisson"
    assert spec.number_ios is None and spec.runtime is None and spec.startdelay == 0.0
    assert spec.rwmixread == 50.0 and spec.sync is None
    assert (spec.nice, spec.prio, spec.prioclass, spec.filename) == (0, None, None, None)
    assert spec.device_size == DEVICE * 512
    assert spec.region(0) == (0, DEVICE * 512)


def test_every_key():
    spec = job(rw="randrw", rwmixread=70, bs="16k", blockalign="8k", offset="1m",
               size="64m", offset_increment="128m", numjobs=3, iodepth=8, thinktime=250,
               thinktime_blocks=4, rate_iops=200, rate_process="linear", number_ios=1000,
               runtime="2m", startdelay="500ms", sync=True, nice=5, prio=2, prioclass=1,
               filename="sdb")
    assert spec.rw == "randrw" and spec.random and spec.read_fraction == pytest.approx(0.7)
    assert spec.bssplit == ((16384, 100.0),) and spec.bs_sectors == (32,)
    assert spec.blockalign == 8192 and spec.blockalign_sectors == 16
    assert spec.offset == 1 << 20 and spec.size == 64 << 20 and spec.offset_increment == 128 << 20
    assert spec.region(2) == ((1 << 20) + 2 * (128 << 20), 64 << 20)
    assert spec.region_sectors(1) == ((1 << 20) // 512 + (128 << 20) // 512, (64 << 20) // 512)
    assert (spec.numjobs, spec.iodepth, spec.thinktime_blocks) == (3, 8, 4)
    assert spec.thinktime == pytest.approx(250e-6)          # fio: microseconds by default
    assert spec.rate_iops == 200.0 and spec.rate_process == "linear"
    assert spec.number_ios == 1000 and spec.runtime == 120.0 and spec.startdelay == 0.5
    assert spec.sync is True and spec.is_sync(True) and spec.is_sync(False)
    assert (spec.nice, spec.prio, spec.prioclass, spec.filename) == (5, 2, 1, "sdb")
    assert spec.ioprio() == (1, 2)


@pytest.mark.parametrize("value, canonical, fraction", [
    ("read", "read", 1.0), ("write", "write", 0.0), ("randread", "randread", 1.0),
    ("randwrite", "randwrite", 0.0), ("rw", "rw", 0.5), ("readwrite", "rw", 0.5),
    ("randrw", "randrw", 0.5),
])
def test_rw_values_and_aliases(value, canonical, fraction):
    spec = job(rw=value)
    assert spec.rw == canonical and spec.read_fraction == fraction
    assert job(readwrite=value).rw == canonical


def test_rwmixwrite_is_the_complement():
    assert job(rw="randrw", rwmixwrite=30).rwmixread == 70.0
    assert job(rw="randrw", rwmixread=70, rwmixwrite=30).rwmixread == 70.0
    assert "rwmixwrite" in error(rw="randrw", rwmixread=70, rwmixwrite=40)


def test_sync_default_reads_not_writes():
    spec = job(rw="randrw")
    assert spec.is_sync(False) and not spec.is_sync(True)
    assert not job(sync=False).is_sync(False)
    assert job(sync=1).sync is True


def test_ioprio_from_nice_when_prio_unset():
    assert job().ioprio() == (2, 4)
    assert job(nice=-20).ioprio() == (2, 0)
    assert job(nice=19).ioprio() == (2, 7)
    # fio sets the priority with ioprio_set(class, prio) once either is given: prio 0 if
    # only the class is (fio's os/os-linux.h ioprio_value)
    assert job(prioclass=3).ioprio() == (3, 0)
    assert job(prioclass=1, nice=10).ioprio() == (1, 0)
    assert job(prio=6, nice=-20).ioprio() == (2, 6)


@pytest.mark.parametrize("value, expected", [
    ("4k/50:64k/50", ((4096, 50.0), (65536, 50.0))),
    ("4k/10:64k/50:32k", ((4096, 10.0), (65536, 50.0), (32768, 40.0))),
    ("4k/50:8k/:16k", ((4096, 50.0), (8192, 25.0), (16384, 25.0))),
    ("4k/0:8k/100", ((8192, 100.0),)),
    ([[4096, 30], ["64k", 70]], ((4096, 30.0), (65536, 70.0))),
    ([["1k", 12.5], ["2k", 87.5]], ((1024, 12.5), (2048, 87.5))),
])
def test_bssplit_forms(value, expected):
    spec = job(bssplit=value)
    assert spec.bssplit == expected
    assert spec.blockalign == min(size for size, _ in expected)


@pytest.mark.parametrize("value, fragment", [
    ("4k/50:8k/20", "adding up to 100"),
    ("4k/60:8k/60", "adding up to 100"),
    ("4k/50,8k/100", "read,write"),
    ("4k/x", "a number after each '/'"),
    ("/50:4k/50", "bssplit syntax"),
    ("3000/100", "multiple of 512"),
    ("4q/100", "expected a size"),
    ("4k/-10:8k/110", "between 0 and 100"),
    ([[4096]], "bssplit syntax"),
    ([], "bssplit syntax"),
    (4096, "bssplit syntax"),
])
def test_bssplit_errors(value, fragment):
    message = error(bssplit=value)
    assert message.startswith(f"{WHERE}: bssplit: expected ") and fragment in message


def test_bs_and_bssplit_together_rejected():
    assert "either bs or bssplit" in error(bs="4k", bssplit="4k/100")


def test_unknown_key_lists_valid_keys_and_suggests():
    message = error(iodpeth=4)
    assert message.startswith(f"{WHERE}: unknown key 'iodpeth'")
    assert "did you mean 'iodepth'" in message
    for key in VALID_KEYS:
        assert key in message


def test_unknown_key_without_near_match():
    message = error(numa_cpu_nodes="0")
    assert "unknown key 'numa_cpu_nodes'" in message and "did you mean" not in message
    assert "valid keys: blockalign, bs, bssplit" in message


@pytest.mark.parametrize("key, value", [
    ("name", ""), ("name", 3), ("rw", "trims"), ("rw", "randread:8"), ("rwmixread", 101),
    ("rwmixread", "50"), ("bs", "4x"), ("bs", 0), ("bs", "1000"), ("blockalign", 0),
    ("offset", "1.2k"), ("offset", "1.5k1"), ("offset", -512), ("size", "1k"), ("size", "101%"),
    ("offset_increment", "100"), ("numjobs", 0), ("numjobs", 1.5), ("iodepth", 0),
    ("iodepth", True), ("thinktime", "soon"), ("thinktime", -1), ("thinktime_blocks", 0),
    ("rate_iops", 0), ("rate_iops", "100"), ("rate_process", "uniform"), ("number_ios", -1),
    ("runtime", "1 fortnight"), ("startdelay", -2), ("sync", "yes"), ("sync", 2),
    ("nice", 20), ("nice", -21), ("prio", 8), ("prioclass", 0), ("prioclass", 4),
    ("filename", 7),
])
def test_bad_values_name_where_and_key(key, value):
    keys = {"name": "writer", key: value}
    with pytest.raises(ValueError) as info:
        parse_job(keys, WHERE, DEVICE)
    message = str(info.value)
    assert message.startswith(f"{WHERE}: {key}: expected "), message
    assert "found " in message


def test_rw_and_readwrite_together_rejected():
    assert "only one of 'rw'" in error(rw="read", readwrite="write")


def test_zero_means_unlimited_like_fio():
    spec = job(number_ios=0, runtime=0)
    assert spec.number_ios is None and spec.runtime is None


def test_percentages_of_the_device():
    spec = job(offset="25%", size="50%", bs="64k")
    assert spec.offset == DEVICE * 512 // 4 // 65536 * 65536     # rounded down to blockalign
    assert spec.size == DEVICE * 512 // 2
    spec = job(numjobs=4, offset_increment="25%")
    assert [spec.region(i)[0] for i in range(4)] == [i * DEVICE * 128 for i in range(4)]


def test_percentages_need_the_device_size():
    message = error(device=None, size="50%")
    assert message.startswith(f"{WHERE}: size: expected ") and "device size" in message


def test_region_beyond_the_device_rejected():
    assert "inside the device" in error(offset="900m", size="200m")
    assert "inside the device" in error(numjobs=3, offset_increment="600m", size="100m")
    assert error(numjobs=3, offset_increment="600m").startswith(f"{WHERE}: offset_increment: ")
    assert "inside the device" in error(offset=DEVICE * 512)


def test_region_without_size_runs_to_device_end_per_clone():
    spec = job(numjobs=2, offset="1m", offset_increment="100m")
    assert spec.region(0) == (1 << 20, DEVICE * 512 - (1 << 20))
    assert spec.region(1) == ((101 << 20), DEVICE * 512 - (101 << 20))
    with pytest.raises(ValueError, match="clone_index"):
        spec.region(2)


def test_region_unknown_without_device_or_size():
    spec = job(device=None)
    assert spec.device_size is None
    with pytest.raises(ValueError, match="device size is unknown"):
        spec.region(0)
    assert job(device=None, size="1m").region(0) == (0, 1 << 20)


def test_jobspec_is_frozen():
    spec = job()
    with pytest.raises(AttributeError):
        spec.iodepth = 4


def test_parse_jobs_names_and_duplicates():
    jobs = parse_jobs([{"name": "a"}, {"name": "b", "rw": "write"}], "cfg.toml", DEVICE)
    assert [j.name for j in jobs] == ["a", "b"]
    with pytest.raises(ValueError, match=r"cfg.toml: job 'a': name: .* found 'a' again"):
        parse_jobs([{"name": "a"}, {"name": "a"}], "cfg.toml", DEVICE)
    with pytest.raises(ValueError, match=r"cfg.toml: job #2: name: expected"):
        parse_jobs([{"name": "a"}, {"rw": "read"}], "cfg.toml", DEVICE)
    with pytest.raises(ValueError, match=r"cfg.toml: job 'a': iodepth"):
        parse_jobs([{"name": "a", "iodepth": 0}], "cfg.toml", DEVICE)
    with pytest.raises(ValueError, match="at least one job"):
        parse_jobs([], "cfg.toml", DEVICE)
