"""The maintainers' tool that re-derives DiskSim's per-request response times
(experiments/validation/disksim_rerun.py), run against a stand-in for the DiskSim binary."""

import stat
import sys
import textwrap

import pytest

from blksim.experiments.validation import disksim_rerun as rr

PARV = textwrap.dedent("""\
    disksim_global Global {
    Init Seed = 42,
    Real Seed = 42,
    Stat definition file = statdefs

    }
    source drive.diskspecs
    """)


def test_response_times_follow_from_arrivals_and_delays():
    # closed loop: arrival 0 at 0; each next one its delay after the previous completes
    responses, delays = [5.0, 2.5, 7.25], [1.0, 0.5, 3.0]
    arrivals = [0.0, 6.0, 9.0]
    mean = sum(responses) / 3
    assert rr.response_times_ms(arrivals, delays, mean) == pytest.approx(responses)


def test_a_run_that_does_not_fit_the_trace_is_refused():
    with pytest.raises(rr.RerunError, match="wrote 2 arrivals for 3 requests"):
        rr.response_times_ms([0.0, 1.0], [0.0, 0.0, 0.0], 1.0)
    with pytest.raises(rr.RerunError, match="negative"):
        rr.response_times_ms([0.0, 1.0], [2.0, 0.0], 1.0)


def test_output_trace_line_is_added_or_replaced():
    added = rr.with_output_trace(PARV, "x.ios")
    assert ("Stat definition file = statdefs,\n"
            "Output file for trace of I/O requests simulated = x.ios\n") in added
    replaced = rr.with_output_trace(added, "y.ios")
    assert "= y.ios" in replaced and "x.ios" not in replaced
    with pytest.raises(rr.RerunError, match="Stat definition file"):
        rr.with_output_trace("disksim_global G {\n}\n", "x.ios")


def test_arrivals_reader_names_the_bad_line(tmp_path):
    path = tmp_path / "a.ios"
    path.write_text("0.000000\t0\t8\t8\t1\n\nlate\t0\t8\t8\t1\n")
    with pytest.raises(rr.RerunError, match=r"a.ios:3: expected an arrival time"):
        rr.read_arrivals_ms(path)


FAKE_DISKSIM = """\
#!{python}
# Stands in for DiskSim in validate mode: every request takes (1 + its index) ms.
import re, sys
parv, outv, _mode, trace = sys.argv[1:5]
ios = re.search(r"Output file for trace of I/O requests simulated = (\\S+)", open(parv).read())
rows = [l.split() for l in open(trace) if l.strip()]
t, arrivals, total = 0.0, [], 0.0
for i, row in enumerate(rows):
    arrivals.append(t)
    t += (1 + i) + float(row[5]) / 1000
    total += 1 + i
open(ios.group(1), "w").write("".join(f"{{a:.6f}}\\t0\\t{{r[2]}}\\t{{r[3]}}\\t1\\n"
                                      for a, r in zip(arrivals, rows)))
open(outv, "w").write(f"IOdriver Physical access time average: {{total / len(rows):.6f}}\\n")
"""


@pytest.fixture
def valid_folder(tmp_path):
    for sub in ("disks", "parv", "traces"):
        (tmp_path / sub).mkdir()
    (tmp_path / "parv" / "drive.parv").write_text(PARV)
    (tmp_path / "parv" / "statdefs").write_text("")
    (tmp_path / "disks" / "drive.diskspecs").write_text("")
    (tmp_path / "traces" / "drive.trace").write_text(
        "R Miss 0 8 1500 2000\nW Miss 80 8 2500 0\nR Miss 8 8 3000 500\n")
    fake = tmp_path / "disksim"
    fake.write_text(FAKE_DISKSIM.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def test_rerun_derives_each_requests_time_from_disksims_output(valid_folder):
    times = rr.rerun(valid_folder / "disksim", valid_folder, "drive")
    assert times == pytest.approx([1.0, 2.0, 3.0])


def test_main_prints_both_demerits_per_drive(valid_folder, capsys):
    assert rr.main(["--disksim", str(valid_folder / "disksim"), "--data", str(valid_folder),
                    "drive"]) == 0
    out = capsys.readouterr().out
    # simulated 1, 2, 3 ms against measured 1.5, 2.5, 3 ms
    assert out.startswith("[drives.drive]  disksim_exact_demerit_ms = 0.")
    assert "# binned: 0." in out


def test_a_failing_binary_is_one_clear_line(valid_folder, capsys):
    broken = valid_folder / "broken"
    broken.write_text("#!/bin/sh\necho 'cannot open drive.model' >&2\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    assert rr.main(["--disksim", str(broken), "--data", str(valid_folder), "drive"]) == 2
    assert "failed (exit 3): cannot open drive.model" in capsys.readouterr().err
    assert rr.main(["--disksim", str(valid_folder / "absent"), "--data",
                    str(valid_folder), "drive"]) == 2
    assert "cannot run it" in capsys.readouterr().err
