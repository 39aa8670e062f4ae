"""The DiskSim parameter-file reader: syntax, includes, line numbers, errors."""

import pytest

from blksim.disk_models.disksim.params import Block, DiskSimError, PList, parse_file, parse_text


def test_blocks_values_lists_and_comments(tmp_path):
    (tmp_path / "inner.model").write_text(
        "dm_disk Inner {\n  Number of cylinders = 10,   # a comment\n"
        "  Layout Model = dm_layout_g1 {\n    Zones = [ dm_layout_g1_zone { # band 0\n"
        "      slips = [ 1, 2 ], defects = [ ] } ]\n  }\n} # end of Inner spec\n")
    (tmp_path / "x.diskspecs").write_text(
        "# header\ndisksim_disk X {\n  Model = source inner.model,\n"
        "  Rotation speed (in rpms) = 7200,\n  Read hit over. after read = 0.25,\n"
        "  Seek type = extracted,\n  Scheduler = disksim_ioqueue { Scheduling policy = 1 },\n"
        "  Timeout time/weight = 1e-3\n}\n")
    (b,) = parse_file(tmp_path / "x.diskspecs")
    assert (b.type, b.name) == ("disksim_disk", "X")
    assert b.get("Rotation speed (in rpms)").value == 7200
    assert b.get("Read hit over. after read").value == 0.25
    assert b.get("Read hit over. after read").line == 5
    assert b.get("Seek type").value == "extracted"
    assert b.get("Timeout time/weight").value == 1e-3
    assert b.get("Scheduler").value.get("Scheduling policy").value == 1
    m = b.get("Model").value
    assert isinstance(m, Block) and m.name == "Inner" and m.file.endswith("inner.model")
    assert m.get("Number of cylinders").line == 2
    zones = m.get("Layout Model").value.get("Zones").value
    assert isinstance(zones, PList)
    z = zones.items[0]
    assert z.type == "dm_layout_g1_zone" and z.get("slips").value.items == [1, 2]
    assert z.get("defects").value.items == [] and z.get("slips").line == 5


@pytest.mark.parametrize("text,line,what", [
    ("disksim_disk X {\n a = 1,\n b 2\n}", 3, "expected '='"),
    ("disksim_disk X {\n a = [1, 2\n", 3, "expected ',' or ']' in a list"),
    ("disksim_disk X {\n a = 1\n b = 2\n}", 3, "expected ',' or '}'"),
    ("disksim_disk X {\n a = ,\n}", 2, "expected a value"),
    ("disksim_disk X {\n a = 1,\n", 3, "end of file inside block"),
])
def test_malformed_files_name_file_and_line(text, line, what):
    with pytest.raises(DiskSimError) as e:
        parse_text(text, "bad.diskspecs")
    assert str(e.value).startswith(f"bad.diskspecs:{line}:") and what in str(e.value)


def test_missing_source_names_the_including_line(tmp_path):
    (tmp_path / "x.diskspecs").write_text("disksim_disk X {\n\n  Model = source nope.model\n}\n")
    with pytest.raises(DiskSimError, match=r"x\.diskspecs:3: .*nope\.model"):
        parse_file(tmp_path / "x.diskspecs")
