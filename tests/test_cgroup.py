"""cgroup v2 groups: the [cgroups] configuration, placement of processes, io.stat."""

from __future__ import annotations


import pytest
from hypothesis import given, settings, strategies as st

from blksim.block.cgroup import CgroupTree
from blksim.block.request import REQ_OP_DISCARD, Bio
from blksim.sim.config import ConfigError, resolve
from blksim.sim.engine import Simulation
from tests.simhelpers import runs_again_to_the_same_figures


def raw_config(groups=None, jobs=None, kernel="6.6", duration=None, **extra):
    """A run on a 5 ms fixed-service device with ``groups`` ([cgroups]) and ``jobs``."""
    raw = {"run": {"seed": 1, "kernel": kernel},
           "device": {"service": "fixed", "service_time": "5ms"},
           "queue": {"scheduler": "mq-deadline"},
           "job": jobs if jobs is not None else [{"name": "j", "rw": "randread",
                                                  "number_ios": 10}]}
    if groups is not None:
        raw["cgroups"] = groups
    if duration is not None:
        raw["run"]["duration"] = duration
    raw.update(extra)
    return raw


def error_of(raw) -> str:
    with pytest.raises(ConfigError) as exc:
        resolve(raw, "t.toml")
    text = str(exc.value)
    assert "\n" not in text                       # one line
    return text


# --------------------------------------------------------------------- configuration

def test_groups_nested_tables_and_paths_make_one_hierarchy():
    cfg = resolve(raw_config({"db": {}, "tenants": {"a": {}}, "tenants/b": {}},
                             [{"name": "j", "rw": "read", "number_ios": 4,
                               "cgroup": "tenants/a"}]), "t.toml")
    tree = cfg.cgroups.build()
    assert sorted(tree.groups) == ["", "db", "tenants", "tenants/a", "tenants/b"]
    assert tree.groups["tenants/a"].parent is tree.groups["tenants"]
    assert tree.groups["tenants"].parent is tree.root
    assert cfg.cgroups.placements["job"] == ["tenants/a"]


def test_no_groups_no_cgroup_config():
    assert resolve(raw_config(), "t.toml").cgroups is None


@pytest.mark.parametrize("groups,jobs,expected", [
    ({"tenants/a": {}}, None, "its parent 'tenants' is not a group"),
    ({"db": {"io.cost.qos": "x"}}, None, "io.cost.qos is a file of the root only"),
    ({"db": {"bfq.weight": 100}}, None, "bfq.weight is cgroup v1's blkio.bfq.weight: on cgroup v2 the file is io.bfq.weight"),
    ({"db": {"io.low": "x"}}, None, "io.low is not modelled yet"),
    ({"db": {"io.maxx": "sda rbps=1"}}, None, "unknown key 'io.maxx'"),
    ({"db": {"io.max": "sda wiops=1"}}, None,
     "io.max sda: io.max wiops must be max or a whole number of at least 2 (Linux 6.6)"),
    ({"db": {"io.max": "sdz rbps=1"}}, None, "'sdz' is not a disk or volume"),
    ({"db": {"io.max": "sda rbps=0"}}, None, "rbps must be a positive whole number or max"),
    ({"db": {"io.max": "sda rbps=-4"}}, None, "rbps must be a positive whole number or max"),
    ({"db": {"io.max": "sda rbs=4"}}, None, "expected KEY=N or KEY=max"),
    ({"db": {"io.max": "sda"}}, None, "names no limit"),
    ({"db": {"io.max": 5}}, None, "expected \"DEVICE rbps=N ...\" lines"),
    ({"db": 3}, None, "expected a table of interface files"),
    ({"a/../b": {}}, None, "none empty, . or .."),
    ({"db": {}}, [{"name": "j", "rw": "read", "cgroup": "web"}], "cgroup 'web' is not a group"),
    ({"db": {}}, [{"name": "j", "rw": "read", "cgroup": 7}], "cgroup must be a group's path"),
    (None, [{"name": "j", "rw": "read", "cgroup": "db"}], "cgroup 'db' is not a group"),
])
def test_bad_cgroup_input_is_one_line_naming_file_and_key(groups, jobs, expected):
    text = error_of(raw_config(groups, jobs))
    assert text.startswith("t.toml: ")
    assert expected in text


def test_cgroups_on_a_2_6_kernel_are_refused():
    raw = raw_config({"db": {}}, kernel="2.6.32")
    raw["queue"] = {"scheduler": "deadline"}
    assert "cgroup v2's io controller (Linux 4.5)" in error_of(raw)


def test_io_max_is_parsed_as_tg_set_limit_reads_it(monkeypatch):
    raw = raw_config({"db": {"io.max": "sda rbps=1048576 wiops=120\nsda wiops=max riops=9"}})
    cfg = resolve(raw, "t.toml")
    tree = cfg.cgroups.build()
    # a later line changes only the limits it names; max is None (no limit)
    assert tree.groups["db"].io_max == {"sda": {"rbps": 1048576, "wiops": None, "riops": 9}}
    listed = raw_config({"db": {"io.max": ["sda rbps=max", "sda wbps=5"]}})
    assert resolve(listed, "t.toml").cgroups.build().groups["db"].io_max == \
        {"sda": {"rbps": None, "wbps": 5}}


def test_the_resolved_configuration_keeps_groups_and_placements(tmp_path):
    from blksim.cli import main
    path = tmp_path / "c.toml"
    path.write_text("""
[run]
kernel = "6.6"
[device]
service = "fixed"
service_time = "1ms"
[queue]
scheduler = "none"
nr_requests = 64
[cgroups.db]
[cgroups."db/x"]
[[job]]
name = "r"
rw = "randread"
number_ios = 20
cgroup = "db/x"
""")
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o")]) == 0
    text = (tmp_path / "o" / "config.resolved.toml").read_text()
    assert 'cgroup = "db/x"' in text and '[cgroups."db/x"]' in text
    a = runs_again_to_the_same_figures(tmp_path / "o", tmp_path / "o2")
    assert a["cgroups"]["db"]["io_stat"]["sda"]["rios"] == 20


# --------------------------------------------------------------------- io.stat

class _Dev:
    def __init__(self, name):
        self.name = name


def _bio(pid, op, sectors):
    bio = Bio(0, 0, sectors, op != 0, False, pid)
    bio.op = op
    return bio


def test_io_stat_counts_by_blk_cgroup_io_type_and_sums_up_the_tree():
    tree = CgroupTree()
    a = tree.add("a")
    b = tree.add("a/b")
    tree.place(10, b)
    tree.place(11, a)
    sda = _Dev("sda")
    tree.bio_queued(sda, _bio(10, 0, 8), 0.0)                 # read 4 KiB
    tree.bio_queued(sda, _bio(10, 1, 16), 0.0)                # write 8 KiB
    tree.bio_queued(sda, _bio(11, REQ_OP_DISCARD, 64), 0.0)   # discard 32 KiB
    tree.bio_queued(sda, _bio(11, 1, 0), 0.0)                 # an empty flush: a write
    tree.bio_queued(sda, _bio(99, 0, 2), 0.0)                 # the root's
    assert tree.io_stat(b) == {"sda": {"rbytes": 4096, "wbytes": 8192, "rios": 1, "wios": 1,
                                       "dbytes": 0, "dios": 0}}
    assert tree.io_stat(a) == {"sda": {"rbytes": 4096, "wbytes": 8192, "rios": 1, "wios": 2,
                                       "dbytes": 32768, "dios": 1}}
    assert tree.io_stat(tree.root)["sda"]["rbytes"] == 4096 + 1024
    assert tree.io_stat_text(a, {"sda": (8, 0)}) == \
        "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=32768 dios=1"


def test_a_bio_keeps_a_group_given_before_it_was_queued():
    tree = CgroupTree()
    a, b = tree.add("a"), tree.add("b")
    tree.place(1, a)
    bio = _bio(1, 1, 8)
    bio.cgroup = b                    # a writeback bio: the inode's owner (wbc_init_bio)
    tree.bio_queued(_Dev("sda"), bio, 0.0)
    assert bio.cgroup is b and "sda" in b.stat and not a.stat


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 1, REQ_OP_DISCARD]),
                          st.integers(0, 256)), max_size=40))
def test_the_roots_io_stat_is_every_groups_own_counts_summed(bios):
    tree = CgroupTree()
    groups = [tree.root, tree.add("a"), tree.add("a/b"), tree.add("c")]
    for pid, g in enumerate(groups):
        tree.place(pid, g)
    dev = _Dev("sda")
    for pid, op, n in bios:
        tree.bio_queued(dev, _bio(pid, op, n), 0.0)
    whole = tree.io_stat(tree.root).get("sda", dict.fromkeys(range(6), 0))
    own = [sum(g.stat.get("sda", [0] * 6)[i] for g in groups) for i in range(6)]
    assert list(whole.values()) == own
    assert sum(whole[k] for k in ("rios", "wios", "dios")) == len(bios) if bios else True
    a = tree.io_stat(groups[1]).get("sda")
    ab = [sum(g.stat.get("sda", [0] * 6)[i] for g in groups[1:3]) for i in range(6)]
    assert (list(a.values()) if a else [0] * 6) == ab


def _run(raw):
    cfg = resolve(raw, "t.toml")
    sim = Simulation(cfg)
    outcome = sim.run()
    return sim, outcome


def test_io_stat_of_the_groups_adds_up_to_what_reached_the_device():
    """Every bio is counted once, at submission: the groups' bios are diskstats' requests
    plus its merges (a merged bio is counted in io.stat and in diskstats' merges), and the
    groups' bytes are diskstats' sectors, when every I/O has completed."""
    jobs = [{"name": "seq", "rw": "write", "bs": "4k", "number_ios": 300, "iodepth": 8,
             "cgroup": "bulk"},
            {"name": "rnd", "rw": "randread", "bs": "8k", "number_ios": 200, "iodepth": 4,
             "cgroup": "db/a"},
            {"name": "plain", "rw": "randrw", "number_ios": 100}]
    raw = raw_config({"bulk": {}, "db": {"a": {}}}, jobs)
    sim, outcome = _run(raw)
    stats = sim.host.disks["sda"].stats
    tree = sim.cgroups
    root = tree.io_stat(tree.root)["sda"]
    assert root["rios"] == stats.ios[0] + stats.merges[0]
    assert root["wios"] == stats.ios[1] + stats.merges[1]
    assert stats.merges[1] > 0                  # the sequential writes merged
    assert root["rbytes"] == stats.sectors[0] * 512
    assert root["wbytes"] == stats.sectors[1] * 512
    assert tree.io_stat(tree.groups["bulk"])["sda"] == {
        "rbytes": 0, "wbytes": 300 * 4096, "rios": 0, "wios": 300, "dbytes": 0, "dios": 0}
    assert tree.io_stat(tree.groups["db"]) == tree.io_stat(tree.groups["db/a"])
    assert tree.io_stat(tree.groups["db"])["sda"]["rbytes"] == 200 * 8192
    from blksim.sim.results import results_dict
    res = results_dict(outcome, {})
    assert res["cgroups"]["db/a"]["io_stat"]["sda"]["rios"] == 200


def test_a_volumes_clones_are_counted_on_its_disks_for_the_bios_group():
    raw = raw_config({"db": {}}, [{"name": "v", "rw": "randread", "bs": "64k",
                                   "number_ios": 50, "filename": "/dev/mapper/vol",
                                   "cgroup": "db"}])
    raw["devices"] = {"sdb": {"service": "fixed", "service_time": "5ms"}}
    raw["volumes"] = {"vol": {"table": "0 2097152 striped 2 64 /dev/sda 0 /dev/sdb 0"}}
    sim, _ = _run(raw)
    db = sim.cgroups.io_stat(sim.cgroups.groups["db"])
    dm = next(n for n in db if n.startswith("dm-"))
    assert db[dm]["rios"] == 50 and db[dm]["rbytes"] == 50 * 65536
    # each 64 KiB bio is cut into two 32 KiB clones, one per disk
    assert db["sda"]["rbytes"] + db["sdb"]["rbytes"] == 50 * 65536
    assert db["sda"]["rios"] + db["sdb"]["rios"] == 100


def test_writeback_is_charged_to_the_group_that_dirtied_the_pages():
    raw = raw_config({"bulk": {}}, [{"name": "w", "rw": "write", "bs": "64k",
                                     "filename": "/data/f", "number_ios": 64,
                                     "end_fsync": 1, "cgroup": "bulk"}])
    raw["file"] = [{"path": "/data/f", "device": "/dev/sda", "size": "16m"}]
    sim, _ = _run(raw)
    bulk = sim.cgroups.io_stat(sim.cgroups.groups["bulk"])["sda"]
    assert bulk["wbytes"] == 64 * 65536          # every written page, by the flusher too
    assert sim.cgroups.io_stat(sim.cgroups.root)["sda"]["wbytes"] == bulk["wbytes"]


def test_the_terminal_shows_io_stat_per_group(tmp_path, capsys):
    from blksim.cli import main
    path = tmp_path / "c.toml"
    path.write_text("""
[run]
kernel = "6.1"
[device]
service = "fixed"
service_time = "1ms"
[queue]
scheduler = "none"
[cgroups.db]
[[job]]
name = "r"
rw = "randread"
number_ios = 20
cgroup = "db"
""")
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "io.stat per cgroup" in out
    line = next(x for x in out.splitlines() if x.startswith("db "))
    assert line.split()[1:] == ["sda", "0.082", "0.000", "20", "0", "0.000", "0"]


def test_a_traces_and_an_apps_processes_are_charged_to_their_groups():
    import os
    trace = os.path.join(os.path.dirname(__file__), "..", "examples", "teaching-queue.trace")
    raw = raw_config({"replay": {}, "files": {}}, [], duration="3s")
    del raw["job"]
    raw["trace"] = [{"path": os.path.abspath(trace), "cgroup": "replay"}]
    raw["host"] = {"memory": "1g", "page_cache": "64m"}
    raw["app"] = [{"type": "fileserver", "device": "/dev/sda", "files": 20,
                   "file_sizes": [["64k", 1]], "step_time": "3s", "direct": 1,
                   "cgroup": "files"}]
    sim, _ = _run(raw)
    tree = sim.cgroups
    replay = tree.io_stat(tree.groups["replay"])["sda"]
    # the trace's 9 reads of 8 sectors (DiskSim's flags 1: read)
    assert (replay["rios"], replay["rbytes"], replay["wios"]) == (9, 9 * 4096, 0)
    files = tree.io_stat(tree.groups["files"])["sda"]
    assert files["rios"] > 0 and files["wios"] == 0
    root = tree.io_stat(tree.root)["sda"]
    assert root["rios"] == files["rios"] + 9
