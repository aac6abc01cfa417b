"""make bench: Python as Python (issue 20), on Debian's python3.11.

1. `uscope count 'py:*'`: every Python call of a mixed workload
   (bench/pywork.py: recursion, methods, comprehensions, json, sorting with
   a key function) counted, side by side with the unprobed run and with
   cProfile on the same run (python -m cProfile: CPython's own profiler,
   whose hook is the one py: probes use), each run's time measured inside
   the workload. Target: count 'py:*' <= 1.5x the unprobed run.

2. `$pystack` at a native probe on inject: the cost a hit pays to take the
   thread's Python frames. A loop calls iter() (PyObject_GetIter, a native
   probe) N times at a known depth of Python frames; the probe runs with a
   filter that never passes, so what is timed is the probe and the walk,
   not the records' way to uscope. Beside it: the probe without $pystack,
   and the probe with $pystack recorded (trace to /dev/null: a full ring
   drops, each run's losses shown). Target: <= 200 ns a hit.

    python3 bench/pyprobes.py USCOPE [SCALE] [REPS] [N]"""

import os
import re
import statistics
import subprocess
import sys

US = sys.argv[1]
SCALE = sys.argv[2] if len(sys.argv) > 2 else "8"
REPS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
N = int(sys.argv[4]) if len(sys.argv) > 4 else 1000000
PY = "/usr/bin/python3.11"
HERE = os.path.dirname(os.path.abspath(__file__))
WORK = [PY, "-I", "-S", os.path.join(HERE, "pywork.py"), SCALE]
ENV = dict(os.environ, PYTHONHASHSEED="0")


def run(argv, pattern, what):
    p = subprocess.run(argv, capture_output=True, text=True, env=ENV)
    if p.returncode != 0:
        sys.exit(f"bench: {what} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(pattern, p.stdout + p.stderr)
    if not m:
        sys.exit(f"bench: {what}: no result in:\n{p.stdout[-500:]}\n{p.stderr[-500:]}")
    lost = re.search(r"^uscope: \d+ events, (\d+) lost", p.stderr, re.M)
    return float(m.group(1)), int(lost.group(1)) if lost else 0, p


def median_of(argv, pattern, what):
    runs = [run(argv, pattern, what) for _ in range(REPS)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2]


# ---- 1. count 'py:*' ------------------------------------------------------------

WORK_RE = r"pywork total \d+ seconds ([0-9.]+)"
print(f"== every Python call counted: bench/pywork.py {SCALE} on {PY} (median of {REPS})")
free = cprof = counted = None
free_t, cprof_t, count_t = [], [], []
for _ in range(REPS):	# interleaved, so that drift hits them alike
    free_t.append(run(WORK, WORK_RE, "the unprobed run")[0])
    cprof_t.append(run(WORK[:3] + ["-m", "cProfile", "-o", os.devnull] + WORK[3:], WORK_RE,
                       "cProfile")[0])
    t, _, p = run([US, "count", "--json", "py:*", "--"] + WORK, WORK_RE, "count 'py:*'")
    count_t.append(t)
    counted = p
free, cprof, count = (statistics.median(x) for x in (free_t, cprof_t, count_t))
calls = sum(int(c) for c in re.findall(r'"count":(\d+),"cut":false,"final":true', counted.stdout))
funcs = len(re.findall(r'"final":true', counted.stdout))
print(f"  {'unprobed':28s} {free:8.3f} s")
print(f"  {'python -m cProfile':28s} {cprof:8.3f} s  {cprof / free:5.2f}x the unprobed run")
print(f"  {'uscope count py:*':28s} {count:8.3f} s  {count / free:5.2f}x the unprobed run")
print(f"  {calls} Python calls of {funcs} functions counted, "
      f"{(count - free) * 1e9 / max(calls, 1):.0f} ns a call above the unprobed run")
print(f"  target count 'py:*' <= 1.5x the unprobed run: {count / free:.2f}x, "
      f"{'MET' if count <= 1.5 * free else 'MISSED'}")

# ---- 2. $pystack at a native probe ------------------------------------------------

LOOP = f"""
import sys, time
def down(n, k):
    if n:
        return down(n - 1, k)
    x = (1, 2)
    t0 = time.perf_counter()
    for _ in range(k):
        iter(x)
    return time.perf_counter() - t0
for depth in {{depths}}:
    print("depth", depth, "ns", down(depth, {N}) * 1e9 / {N}, flush=True)
"""
DEPTHS = (3, 10, 30)
SCRIPT = [PY, "-I", "-S", "-c", LOOP.replace("{depths}", repr(DEPTHS))]
FN = f"{PY}:PyObject_GetIter"


def per_depth(argv, what):
    out = {}
    for _ in range(REPS):
        p = subprocess.run(argv, capture_output=True, text=True, env=ENV)
        if p.returncode != 0:
            sys.exit(f"bench: {what} failed:\n{p.stderr[-2000:]}")
        lost = re.search(r"^uscope: \d+ events, (\d+) lost", p.stderr, re.M)
        for d, ns in re.findall(r"^depth (\d+) ns ([0-9.]+)$", p.stdout, re.M):
            out.setdefault(int(d), []).append(float(ns))
    return {d: statistics.median(v) for d, v in out.items()}, lost.group(1) if lost else "0"


print(f"== $pystack at a native probe (iter() -> PyObject_GetIter), inject, {N} hits a depth")
base, _ = per_depth(SCRIPT, "the unprobed loop")
probe, _ = per_depth([US, "trace", "-q", "-e", "inject", f"{FN} if $pid == 0", "--"] + SCRIPT,
                     "the probe")
walk, _ = per_depth([US, "trace", "-q", "-e", "inject", f"{FN} $pystack:128 if $pid == 0",
                     "--"] + SCRIPT, "the probe with $pystack")
rec, lost = per_depth([US, "trace", "-e", "inject", "-o", os.devnull, f"{FN} $pystack:128",
                       "--"] + SCRIPT, "the probe with $pystack, recorded")
print(f"  {'Python frames at the hit':26s} {'probe':>8s} {'+$pystack':>10s} {'walk':>8s} "
      f"{'recorded':>9s}   (ns a hit above the unprobed loop)")
worst = 0
for d in DEPTHS:
    frames = d + 2	# down's frames, and <module>
    p, w, r = probe[d] - base[d], walk[d] - base[d], rec[d] - base[d]
    worst = max(worst, w) if d <= 10 else worst
    print(f"  {frames:26d} {p:8.0f} {w:10.0f} {w - p:8.0f} {r:9.0f}")
print(f"  (recorded: trace -o /dev/null; records lost on a full ring: {lost})")
print(f"  target $pystack at a native probe on inject <= 200 ns a hit (up to 12 frames): "
      f"{worst:.0f} ns, {'MET' if worst <= 200 else 'MISSED'}")
