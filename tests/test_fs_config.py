"""[filesystems] with mkfs and mount options (sim.storage_config): the filesystem places
its journal and its files; the resolved table gives the same run back; the outline
without mkfs/mount is unchanged; bad input is one line naming the option."""

import pytest

from blksim.sim.config import ConfigError, resolve, resolved_dict

DEVICE = {"service": "fixed", "service_time": "1ms", "capacity": "2g"}
JOB = [{"name": "w", "rw": "write", "bs": "4k", "number_ios": 10, "filename": "/d/a"}]


def config(fs, files=None):
    return {"run": {"seed": 1}, "device": DEVICE, "queue": {"scheduler": "noop"},
            "file": files or [{"path": "/d/a", "device": "/dev/sda", "size": "8m"}],
            "job": JOB, "filesystems": {"/dev/sda": fs}}


def test_files_are_placed_by_the_allocator_in_creation_order():
    files = [{"path": "/d/a", "device": "/dev/sda", "size": "8m"},
             {"path": "/d/b", "device": "/dev/sda", "size": "8m", "writers": 2,
              "write_size": "64k"}]
    cfg = resolve(config({"type": "ext3", "mkfs": "-j -T largefile",
                          "mount": "data=writeback,noatime"}, files), "t.toml")
    fs = cfg.filesystems["sda"]
    a, b = cfg.files
    assert (fs.data, fs.atime, fs.barrier, fs.commit_interval) == ("writeback", False,
                                                                   False, 5.0)
    journal_end = max(s + n for s, n in fs.journal_layout.extents)
    assert a.extents[0][0] >= journal_end and b.extents[0][0] > a.extents[-1][0]
    assert len(a.extents) == 3 and len(b.extents) > 100       # interleaved writers
    # the resolved table names the options and gives the same layout back
    table = resolved_dict(cfg, {"sda": 1})["filesystems"]["/dev/sda"]
    assert table == {"type": "ext3", "mkfs": "-j -T largefile",
                     "mount": "data=writeback,commit=5,barrier=0,noatime"}
    again = resolved_dict(cfg, {"sda": 1})
    again = resolve({k: again[k] for k in ("run", "device", "queue", "file", "job",
                                           "filesystems") if k in again}, "again.toml")
    assert [f.extents for f in again.files] == [a.extents, b.extents]


def test_the_outline_without_mkfs_is_unchanged():
    cfg = resolve(config({"type": "ext3"}), "t.toml")
    fs = cfg.filesystems["sda"]
    assert fs.layer is None and fs.journal_start == 0 and fs.atime is False
    assert cfg.files[0].extents == ((fs.journal_sectors, 8 * 2048),)


@pytest.mark.parametrize("fs, files, message", [
    ({"type": "ext3", "mkfs": "-j -X"}, None, r"unknown mkfs option '-X'"),
    ({"type": "ext3", "mount": "data=ordered,user_xattr"}, None,
     r"unknown ext3 mount option 'user_xattr'"),
    ({"type": "ext3", "mkfs": "-b 4096 1048576"}, None,
     r"block count 1048576 .* is larger than the device"),
    ({"type": "ext3", "mkfs": "-J size=2048"}, None,
     r"-J size=2048: the journal .* is larger than the filesystem"),
    ({"type": "ext3", "mkfs": "-j", "journal_size": "32m"}, None,
     r"journal_size is ext3's outline's; with mkfs/mount give -J size="),
    ({"type": "none", "mount": "noatime"}, None, r"mkfs and mount need a filesystem type"),
    ({"type": "ext3", "mkfs": 4096}, None, r"mkfs expected a string of options"),
    ({"type": "ext3", "mkfs": "-j"},
     [{"path": "/d/a", "device": "/dev/sda", "size": "8m", "offset": "1g"}],
     r"offset: on sda's ext3 \(made by mkfs\) the filesystem places its files"),
    ({"type": "ext3"}, [{"path": "/d/a", "device": "/dev/sda", "size": "8m", "writers": 2}],
     r"writers needs a filesystem made by mkfs"),
    ({"type": "ext3", "mkfs": "-j"},
     [{"path": "/d/a", "device": "/dev/sda", "size": "4g"}], r"the filesystem is full"),
])
def test_bad_input_is_one_line_naming_file_and_option(fs, files, message):
    with pytest.raises(ConfigError, match=message) as err:
        resolve(config(fs, files), "t.toml")
    text = str(err.value)
    assert text.startswith("t.toml: ") and "\n" not in text


def test_o_direct_on_data_journal_is_refused_as_the_kernel_does():
    raw = config({"type": "ext3", "mount": "data=journal"})
    raw["job"] = [{**JOB[0], "direct": 1}]
    with pytest.raises(ConfigError, match=r"job 'w': direct = 1 on /d/a, whose ext3 is "
                                          r"mounted data=journal"):
        resolve(raw, "t.toml")
    raw["filesystems"]["/dev/sda"]["mount"] = "data=ordered"
    assert resolve(raw, "t.toml").jobs[0].direct


def test_an_apps_files_on_a_filesystem_made_by_mkfs_are_placed_by_its_allocator():
    raw = {"device": {"drive": "cheetah15k4"}, "host": {"memory": "1g"},
           "run": {"seed": 1, "duration": "1s"},
           "app": [{"type": "oltp", "data_device": "/dev/sda", "data_size": "64m",
                    "db_cache_size": "16m"}],
           "filesystems": {"/dev/sda": {"type": "ext3", "mkfs": "-j"}}}
    cfg = resolve(raw, "t.toml")
    layer = cfg.filesystems["sda"].layer
    assert cfg.files and all(f.written is not None for f in cfg.files)
    assert sorted(layer.placed) == sorted(f.path for f in cfg.files)
    journal_end = max(s + n for s, n in cfg.filesystems["sda"].journal_layout.extents)
    assert min(f.extents[0][0] for f in cfg.files) >= journal_end
