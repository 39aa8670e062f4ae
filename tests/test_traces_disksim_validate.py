"""traces.disksim_validate: DiskSim validation traces with measured response times."""

from pathlib import Path

import pytest

from blksim.disk_models.disksim.validation_set import shipped_folder
from blksim.traces.disksim_ascii import TraceError
from blksim.traces.disksim_validate import ValidateRecord, read_disksim_validate

TRACES = shipped_folder() / "traces"


def test_reads_fields_in_seconds(tmp_path):
    path = tmp_path / "v.trace"
    path.write_text("R Miss  564347     2     14095.370     13876.270\n\n"
                    "W Trip 1205090 13 10133.39 0\n")
    assert list(read_disksim_validate(path)) == [
        ValidateRecord(False, "Miss", 564347, 2, pytest.approx(0.01409537), pytest.approx(0.01387627)),
        ValidateRecord(True, "Trip", 1205090, 13, pytest.approx(0.01013339), 0.0),
    ]


@pytest.mark.parametrize("line, field, found", [
    ("R Hit 1 2 3", "line", "R Hit 1 2 3"),
    ("X Hit 1 2 3 4", "type", "X"),
    ("r Hit 1 2 3 4", "type", "r"),
    ("R Maybe 1 2 3 4", "cache", "Maybe"),
    ("R Hit -1 2 3 4", "blkno", "-1"),
    ("R Hit 1 0 3 4", "size", "0"),
    ("R Hit 1 2 x 4", "measured_us", "x"),
    ("R Hit 1 2 3 -4", "delay_us", "-4"),
    ("R Hit 1 2 3 inf", "delay_us", "inf"),
    ("R Hit 1_000 2 3 4", "blkno", "1_000"),
    ("R Hit 1 2 1_0.5 4", "measured_us", "1_0.5"),
    # beyond int()'s 4,300-digit limit: named (and cut), not a traceback
    ("R Hit " + "9" * 5000 + " 2 3 4", "blkno", "9" * 120 + "... (4,880 more bytes)"),
])
def test_malformed_line_names_file_line_field(tmp_path, line, field, found):
    path = tmp_path / "v.trace"
    path.write_text("R Hit 1 2 3 4\n" + line + "\n")
    with pytest.raises(TraceError) as info:
        list(read_disksim_validate(path))
    message = str(info.value)
    assert message.startswith(f"{path}:2: {field} expected "), message
    assert message.endswith(f"found {found!r}"), message


# (stem, requests, measured mean ms), as the shipped set's README tabulates them.
DRIVES = [
    ("cheetah9LP", 10000, 4.273), ("hp_c2247a", 9999, 15.298), ("atlas10k", 10000, 3.893),
    ("hp_c3323a", 9074, 15.765), ("atlas_III", 10000, 6.263), ("barracuda", 10000, 6.627),
    ("cheetah4LP", 10000, 5.328), ("ibm18es", 10000, 5.261), ("hp_c2490a", 9984, 12.550),
    ("dec_rz26", 7980, 15.809),
]


@pytest.mark.parametrize("stem, count, mean_ms", DRIVES)
def test_real_validation_traces(stem, count, mean_ms):
    records = list(read_disksim_validate(TRACES / f"{stem}.trace"))
    assert len(records) == count
    mean = sum(r.measured for r in records) / count
    assert mean * 1e3 == pytest.approx(mean_ms, abs=0.0006)
    assert all(r.delay >= 0 for r in records)
