#!/usr/bin/env python3
"""make bench: live trace, sustained. bench_fn called N times in a row (no
pauses) under `uscope trace -e inject`, text and JSON, to /dev/null and to a
file, and its entry with its return (flow's records), beside the same
commands of an earlier tree (OLD, built once into build/bench/old-COMMIT),
interleaved run by run so that the machine's drift hits both alike.

No live consumer formats tens of millions of events a second: the thread
never waits for it, and what finds the ring full is dropped and counted.
So each row shows the program's cost a call (wall, and its thread's CPU
time, which the other work of a shared machine does not inflate), the
events uscope wrote and those it lost; a faster consumer writes more of
them.

usage: sustained.py USCOPE OLD_USCOPE|- TARGET N REPS OUTDIR
Timings on a VM are noisy: read the ratios, and the CPU columns."""

import os
import re
import statistics
import subprocess
import sys

US, OLD, T, N, REPS, OUT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
    int(sys.argv[5]), sys.argv[6]
ARGS = "bench_fn a=$arg1:s64 b=$arg2:s64"
FILE = os.path.join(OUT, "sustained.out")
CASES = [
    # label, uscope's arguments before the probes, the probes
    ("text, -o /dev/null", ["-o", "/dev/null"], [ARGS]),
    ("JSON, -o /dev/null", ["--json", "-o", "/dev/null"], [ARGS]),
    ("text, -o FILE", ["-o", FILE], [ARGS]),
    ("JSON, -o FILE", ["--json", "-o", FILE], [ARGS]),
    ("entry + return, text, -o /dev/null", ["-o", "/dev/null"], ["bench_fn", "r:bench_fn"]),
]


def run(argv):
    """(wall ns a call, CPU ns a call, events, lost)."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:8])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"ns_per_call ([0-9.]+)", p.stdout)
    c = re.search(r"cpu_per_call ([0-9.]+)", p.stdout)
    if not m or not c:
        sys.exit(f"bench: no timing in:\n{p.stdout[-500:]}")
    s = re.search(r"uscope: (\d+) events, (\d+) lost", p.stderr)
    ev, lost = (int(s.group(1)), int(s.group(2))) if s else (0, 0)
    if argv[0] != T and ev + lost != N * (2 if "r:bench_fn" in argv else 1):
        sys.exit(f"bench: {ev} events + {lost} lost != the calls made:\n{p.stderr[-1000:]}")
    return float(m.group(1)), float(c.group(1)), ev, lost


target = [T, str(N), "1", "0", "0", "0"]
trees = [("now", US)] + ([("old", OLD)] if OLD != "-" else [])
res = {}
for _ in range(REPS):
    res.setdefault("free", []).append(run(target))
    for i, (_label, opts, probes) in enumerate(CASES):
        for tree, us in trees:
            res.setdefault((i, tree), []).append(
                run([us, "trace", "-e", "inject", *opts, *probes, "--", *target]))
try:
    os.unlink(FILE)
except OSError:
    pass


def med(k, f):
    return statistics.median(r[f] for r in res[k])


def spread(k, f):
    v = [r[f] for r in res[k]]
    return f"{min(v):.1f}-{max(v):.1f}"


free_w, free_c = med("free", 0), med("free", 1)
old_name = os.path.basename(os.path.dirname(os.path.abspath(OLD))) if OLD != "-" else ""
print(f"== live trace, sustained: bench_fn {N:,} calls in a row, trace -e inject, median of "
      f"{REPS} (min-max)")
print(f"   now: this tree; old: {old_name or 'not built'}; ns a call of the program, wall "
      f"and its thread's CPU time;")
print(f"   unprobed {free_w:.1f} wall, {free_c:.1f} CPU. The events written and lost, of "
      f"{N:,} hits (twice that with the return)")
print(f"  {'':38} {'':4} {'wall ns':>8} {'(spread)':>13} {'CPU ns':>7} {'(spread)':>13} "
      f"{'written':>9} {'lost':>9}")
worse = []
for i, (label, _o, _p) in enumerate(CASES):
    for tree, _us in trees:
        k = (i, tree)
        print(f"  {label if tree == 'now' else '':38} {tree:4} {med(k, 0):8.1f} "
              f"{'(' + spread(k, 0) + ')':>13} {med(k, 1):7.1f} {'(' + spread(k, 1) + ')':>13} "
              f"{int(med(k, 2)):9d} {int(med(k, 3)):9d}")
    if len(trees) > 1 and med((i, "now"), 0) > med((i, "old"), 0):
        worse.append(label)
if len(trees) > 1:
    print(f"  target: every case at least as fast as {old_name} side by side (wall): "
          f"{'MET' if not worse else 'MISSED (' + '; '.join(worse) + ')'}")
