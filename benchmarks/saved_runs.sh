#!/bin/bash
# saved_runs.sh REPO OUTDIR: run a fixed set of blksim commands (every example under every
# 2.6 scheduler with results, requests.csv, iostat.csv, blktrace and iolog outputs; kernel
# lines; an fio file; a plug-in; the demo; validate --all; a replay; plot heads; the shipped
# experiments at a small scale; a sweep; trace stats and convert) with REPO's .venv (or
# $PY) and keep every output in OUTDIR. Run it before and after a change that must not
# change any answer (a move, a re-cut, a speed-up) and compare the two with
# benchmarks/compare_runs.py. About a minute with CPython. Paths in the outputs name REPO,
# so capture both from checkouts at the same path (or normalise them).
set -u
REPO=$1; OUT=$2; PY=${PY:-$REPO/.venv/bin/python}
rm -rf "$OUT"; mkdir -p "$OUT"; cd "$OUT"
B="$PY -m blksim"
EX=$REPO/examples
run() { name=$1; shift; "$@" > "$name.stdout" 2> "$name.stderr"; echo "rc=$?" >> "$name.stdout"; }
for exd in buffered-read:1s bulk-load:1s ext3-fsync:3s lvm-linear:3s mixed:1s oltp-raid10:12s raid10-writeback:3s teaching-queue:1s teaching-random:1s; do
  ex=${exd%%:*}; d=${exd#*:}
  run $ex $B compare $EX/$ex.toml --schedulers noop,deadline,anticipatory,cfq,sstf --duration $d --out $ex.out --per-request --iostat 100ms --blktrace $ex.bt --iolog $ex.iolog -q
done
for k in 2.6.24 2.6.32; do
  run mixed-$k $B compare $EX/mixed.toml --schedulers noop,deadline,anticipatory,cfq --duration 1s --set run/kernel=$k --out mixed-$k.out --per-request -q
done
run oltp-fio $B run $EX/oltp.fio --duration 1s --out oltpfio.out --per-request -q
run plugin env PYTHONPATH=$EX/plugins/deadline_early $B run $EX/mixed.toml --scheduler deadline_early:DeadlineEarlyElevator --duration 1s --out plugin.out -q
run demo $B demo -q
run validate $B validate --all
run replay $B replay --drive cheetah9LP --schedulers noop,deadline,anticipatory,cfq $REPO/examples/teaching-queue.trace --out replay.out --blktrace replay.bt -q
run heads-req $B plot heads --requests 98,183,37,122,14,124,65,67 --start 53 --out heads-req.png --scheduler cfq
run heads-cfg $B plot heads $EX/teaching-queue.toml --out heads-cfg.png --csv heads-cfg.csv
for exp in fileserver-ramp maxdb-load mysql-tpcc oracle-tpcc; do
  run exp-$exp $B experiment run $exp --scale 0.02 --seeds 1 --out exp-$exp -q
done
run sweep $B sweep $EX/teaching-random.toml --schedulers deadline,cfq --grid queue/nr_requests=16,128 --out sweep.out -q
# trace conversions
run trace-stats $B trace stats mixed.bt/cfq/sda.blktrace.0
run trace-conv $B trace convert --to fio mixed.bt/cfq/sda.blktrace.0 mixed-cfq.iolog
true
