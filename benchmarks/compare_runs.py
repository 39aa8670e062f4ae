"""compare_runs.py A B: two captures of benchmarks/saved_runs.sh hold the same files, byte
for byte, except the CPU seconds an experiment's run records (runs/*.json's cpu_s).
Prints what differs; exit status 1 if anything does."""

import re
import sys
from pathlib import Path

CPU_S = re.compile(rb'"cpu_s": [0-9.e-]+')


def differences(a: Path, b: Path) -> list[str]:
    """What differs between captures ``a`` and ``b``: files only in one, files whose bytes
    differ (a sweep run's ``cpu_s`` aside)."""
    fa = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    bad = [f"only in {a}: {p}" for p in sorted(fa - fb)]
    bad += [f"only in {b}: {p}" for p in sorted(fb - fa)]
    for p in sorted(fa & fb):
        x, y = (a / p).read_bytes(), (b / p).read_bytes()
        if x == y:
            continue
        if len(p.parts) > 1 and p.parts[-2] == "runs" and p.suffix == ".json" \
                and CPU_S.sub(b"", x) == CPU_S.sub(b"", y):
            continue
        bad.append(f"differs: {p}")
    return bad


def main(argv=None) -> int:
    """Compare two captures; print what differs; 1 if anything does."""
    import argparse
    parser = argparse.ArgumentParser(prog="compare_runs.py", description=__doc__)
    parser.add_argument("first", type=Path, metavar="A", help="a capture folder")
    parser.add_argument("second", type=Path, metavar="B", help="another capture folder")
    args = parser.parse_args(argv)
    found = differences(args.first, args.second)
    n = sum(1 for p in args.first.rglob("*") if p.is_file())
    print("\n".join(found) or f"identical: {n} files")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
