"""make bench: every function of Debian's python3.11 counted over a fixed
Python workload (bench/pywork.py), side by side in one run:
  - the workload unprobed;
  - uscope count -e auto (each function on the fastest engine that can take
    it: inject, or bpf for the few it cannot patch);
  - uscope count -e tracefs (every function a kernel uprobe).
The time is the workload's own (measured inside, so that the tracer's start
and end, which grow with the number of probes, are not counted; the wall
time of each run is shown too). Every function must be counted, and the
counts of the two uscope runs must be equal.

    python3 bench/python.py USCOPE [SCALE] [REPS]"""

import json
import os
import re
import statistics
import subprocess
import sys
import time

US = sys.argv[1]
SCALE = sys.argv[2] if len(sys.argv) > 2 else "20"
REPS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
PY = "/usr/bin/python3.11"
WORK = [PY, "-I", "-S", os.path.join(os.path.dirname(__file__), "pywork.py"), SCALE]
ENV = dict(os.environ, PYTHONHASHSEED="0")


def run(argv):
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=ENV)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:6])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"pywork total (\d+) seconds ([0-9.]+)", p.stdout)
    if not m:
        sys.exit(f"bench: no workload line in:\n{p.stdout[-500:]}")
    counts = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            if o.get("final"):
                counts = counts or {}
                counts[o["probe"]] = o["count"]
    return float(m.group(2)), wall, counts, p.stderr


def count_argv(engine):
    return [US, "count", "--json", "-e", engine, f"{PY}:*", "--"] + WORK


print(f"== every function of {PY} counted over bench/pywork.py {SCALE} "
      f"(fast runs: median of {REPS}; tracefs: one)")
free, auto = [], []
split = ""
auto_counts = None
for _ in range(REPS):	# interleaved, so that drift hits them alike
    free.append(run(WORK)[:2])
    t, w, auto_counts, err = run(count_argv("auto"))
    auto.append((t, w))
    m = re.search(r"^uscope: \S+: (\d+ sites? on .*)$", err, re.M)
    split = m.group(1) if m else split
tfs_t, tfs_w, tfs_counts, _ = run(count_argv("tracefs"))

f_t = statistics.median(t for t, _ in free)
f_w = statistics.median(w for _, w in free)
a_t = statistics.median(t for t, _ in auto)
a_w = statistics.median(w for _, w in auto)
hits = sum(auto_counts.values())
print(f"  {'unprobed':34s} {f_t:8.3f} s workload {f_w:8.3f} s wall")
print(f"  {'uscope count -e auto':34s} {a_t:8.3f} s workload {a_w:8.3f} s wall  "
      f"{a_t / f_t:6.2f}x the unprobed workload")
print(f"  {'uscope count -e tracefs':34s} {tfs_t:8.3f} s workload {tfs_w:8.3f} s wall  "
      f"{tfs_t / f_t:6.1f}x the unprobed workload")
print(f"  -e auto: {split}")
print(f"  {len(auto_counts)} functions, {hits} hits counted; -e auto is {tfs_t / a_t:.0f}x faster "
      f"than tracefs alone on the workload, {tfs_w / a_w:.0f}x on the wall clock")
diff = {k: (auto_counts.get(k), tfs_counts.get(k))
        for k in set(auto_counts) | set(tfs_counts) if auto_counts.get(k) != tfs_counts.get(k)}
print(f"  counts equal to tracefs's: {'yes' if not diff else 'NO: ' + str(list(diff.items())[:10])}")
ok = "MET" if a_t <= 2 * f_t else "MISSED"
print(f"  target -e auto <= 2x the unprobed run: {a_t / f_t:.2f}x, {ok}")
