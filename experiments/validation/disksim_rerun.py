"""DiskSim 4.0's own response times, request by request, on a validation trace.

    python -m blksim.experiments.validation.disksim_rerun --disksim PATH [STEM ...]

For maintainers: it needs a DiskSim 4.0 binary, which blksim neither ships nor uses.
It re-derives the ``disksim_exact_demerit_ms`` figures of ``disksim_scores.toml``.

DiskSim's published figure for each drive (``disksim_demerit_ms``) is computed by its
``rms`` tool from the two *binned* distributions of its output (1750 buckets about 1 %
wide, `blksim.experiments.validation.demerit.disksim_binned_demerit`), whereas
``blksim validate`` scores the raw times. To compare like with like on the raw ruler
too, this runs DiskSim on each drive of the shipped validation set with its own
parameter file plus one line, ``Output file for trace of I/O requests simulated``,
which makes it write every request's arrival time. A validate run is closed-loop: the
next request arrives the trace's ``delay_us`` after the previous one completes, so

    response_i = arrival_{i+1} - arrival_i - delay_i

and the last request's follows from the mean DiskSim prints ("IOdriver Physical
access time average"). Binned as DiskSim bins them, the times so derived give back
the simulated distribution of DiskSim's ``.outv`` (within 0.003 ms, the last request's
rounding), which checks the derivation.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from blksim.experiments.validation.demerit import demerit, disksim_binned_demerit
from blksim.experiments.validation.disksim_outv import read_average
from blksim.traces.disksim_validate import read_disksim_validate

#: The global parameter that makes DiskSim write each request as it arrives.
OUTPUT_TRACE_KEY = "Output file for trace of I/O requests simulated"


class RerunError(RuntimeError):
    """DiskSim could not be run, or its output does not fit the trace."""


def read_arrivals_ms(path) -> list:
    """The arrival times (ms, DiskSim's first column) of DiskSim's output trace."""
    out = []
    with open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            fields = line.split()
            if not fields:
                continue
            try:
                out.append(float(fields[0]))
            except ValueError:
                raise RerunError(f"{path}:{lineno}: expected an arrival time in ms, "
                                 f"found {fields[0]!r}") from None
    return out


def response_times_ms(arrivals_ms, delays_ms, mean_ms: float) -> list:
    """Each request's response time (ms) in a closed-loop validate run, from the
    arrival times, the trace's delays and the mean of all response times."""
    n = len(delays_ms)
    if len(arrivals_ms) != n:
        raise RerunError(f"DiskSim wrote {len(arrivals_ms)} arrivals for {n} requests")
    times = [arrivals_ms[i + 1] - arrivals_ms[i] - delays_ms[i] for i in range(n - 1)]
    times.append(mean_ms * n - sum(times))
    if min(times) < 0:
        raise RerunError("a derived response time is negative: the run is not closed-loop")
    return times


def with_output_trace(parv_text: str, filename: str) -> str:
    """``parv_text`` with its global block naming ``filename`` as the output trace."""
    line = f"{OUTPUT_TRACE_KEY} = {filename}"
    if OUTPUT_TRACE_KEY in parv_text:
        return re.sub(re.escape(OUTPUT_TRACE_KEY) + r"\s*=\s*\S+", line, parv_text, count=1)
    text, found = re.subn(r"(Stat definition file\s*=\s*\S+?)(,?)\s*\n",
                          lambda m: f"{m.group(1)},\n{line}{m.group(2)}\n", parv_text, count=1)
    if not found:
        raise RerunError("the .parv has no 'Stat definition file' line to add the "
                         "output trace after")
    return text


def rerun(disksim, folder, stem: str) -> list:
    """DiskSim's response times (ms) for drive ``stem`` of the validation ``folder``
    (DiskSim's layout: disks/, parv/, traces/), run in a scratch directory."""
    folder = Path(folder)
    with tempfile.TemporaryDirectory(prefix="disksim-rerun-") as tmp:
        work = Path(tmp)
        for sub in ("disks", "parv"):
            for f in (folder / sub).iterdir():
                shutil.copy(f, work / f.name)
        trace = folder / "traces" / f"{stem}.trace"
        shutil.copy(trace, work / trace.name)
        parv = work / f"{stem}.parv"
        parv.write_text(with_output_trace(parv.read_text(), f"{stem}.ios"))
        try:
            subprocess.run([str(disksim), parv.name, f"{stem}.outv", "validate", trace.name,
                            "0"], cwd=work, check=True, capture_output=True)
        except OSError as exc:
            raise RerunError(f"{disksim}: cannot run it: {exc.strerror or exc}") from None
        except subprocess.CalledProcessError as exc:
            said = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
            raise RerunError(f"{disksim} on {stem} failed (exit {exc.returncode}): "
                             f"{' / '.join(said[:3])}") from None
        mean = read_average(work / f"{stem}.outv", "IOdriver Physical access time")
        delays = [r.delay * 1e3 for r in read_disksim_validate(trace)]
        return response_times_ms(read_arrivals_ms(work / f"{stem}.ios"), delays, mean)


def main(argv=None) -> int:
    """Print each drive's DiskSim demerits, raw and binned, as TOML-ready lines."""
    from blksim.disk_models.disksim.validation_set import DRIVES, shipped_folder
    parser = argparse.ArgumentParser(prog="python -m blksim.experiments.validation."
                                     "disksim_rerun", description=__doc__.split("\n\n")[2])
    parser.add_argument("--disksim", required=True, help="a DiskSim 4.0 binary")
    parser.add_argument("--data", metavar="DIR",
                        help="a DiskSim validation folder (disks/, parv/, traces/) instead "
                             "of the shipped set")
    parser.add_argument("stems", nargs="*", default=list(DRIVES),
                        help="drives of the validation set (default: all ten)")
    args = parser.parse_args(argv)
    folder = Path(args.data) if args.data else shipped_folder()
    for stem in args.stems:
        try:
            times = rerun(args.disksim, folder, stem)
        except RerunError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        meas = [r.measured * 1e3 for r in read_disksim_validate(
            folder / "traces" / f"{stem}.trace")]
        print(f"[drives.{stem}]  disksim_exact_demerit_ms = {demerit(times, meas):.4f}"
              f"  # binned: {disksim_binned_demerit(times, meas):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
