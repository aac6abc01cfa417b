#!/usr/bin/env python3
"""make bench: the static binary (make static: build/static/uscope) against
the dynamic one (./uscope), side by side in one run, on the inject engine's
hot path: the entry probe recording 2 integer arguments and a timestamp
(trace), the count-only probe (count) and entry + return with the duration
(flow), on bench_fn (bench/target.c) as bench/run.sh's first table measures
them, with the unprobed call beside them.

Both binaries are the same objects (build/rel) linked two ways, and a hit
runs in the agent, which is the same bytes in both: what the link could change
is the tracer's side (its glibc, static or shared, its consumer of the rings).
The runs are interleaved, each round in the other order (dynamic first, then
static first), so that drift on the machine hits both alike; each figure is
the median of REPS runs. Only what was recorded counts: every trace and flow
run's events are checked against the calls made and its losses shown; every
count run's count must be the calls made.

The figures are the target thread's CPU time a timed call (the target's
cpu_per_call): what the calls cost the thread itself, without the time it
waited for a CPU, which on a machine shared with other work is most of the
spread of the wall times (shown too). The target: static / dynamic <= 1.05
on the probed call's time, each probe (no slower, within this VM's noise);
the hit's cost above the unprobed call is shown too (a count-only hit is
about 1 ns: its ratio alone would be noise).

usage: static.py DYNAMIC STATIC TARGET N REPS BURST GAP_MS WARM
Timings on a VM are noisy: read the ratios."""

import json
import os
import re
import statistics
import subprocess
import sys

DYN, STA, T = sys.argv[1], sys.argv[2], sys.argv[3]
N, REPS, BURST, GAP, WARM = (int(a) for a in sys.argv[4:9])
ARGS = "bench_fn a=%di:s64 b=%si:s64"
LIMIT = 1.05


def target():
    return [T, str(N), "1", "0", str(BURST), str(GAP)]


def run(mode, us):
    """(ns a call, records lost) of one run; exits on a failure or a count
    that is not the calls made."""
    if mode == "free":
        argv = target()
    elif mode == "entry":
        argv = [us, "trace", "-e", "inject", "-o", "/dev/null", ARGS, "--"] + target()
    elif mode == "count":
        argv = [us, "count", "-e", "inject", "--json", "bench_fn", "--"] + target()
    else:
        argv = [us, "flow", "-e", "inject", "-o", "/dev/null", "bench_fn", "--"] + target()
    p = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, BENCH_WARM=str(WARM)))
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:6])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"ns_per_call ([0-9.]+)", p.stdout)
    if not m:
        sys.exit(f"bench: no timing in:\n{p.stdout[-500:]}")
    calls, lost = N + WARM, 0
    if mode == "count":
        rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        got = sum(o["count"] for o in rows if o.get("final"))
        if got != calls:
            sys.exit(f"bench: {us} count: {got} hits counted of {calls} calls")
    elif mode in ("entry", "flow"):
        m2 = re.search(r"uscope: (\d+) events, (\d+) lost", p.stderr)
        if not m2:
            sys.exit(f"bench: no summary in:\n{p.stderr[-1000:]}")
        events, lost = int(m2.group(1)), int(m2.group(2))
        want = calls * (2 if mode == "flow" else 1)
        if events + lost != want:
            sys.exit(f"bench: {us} {mode}: {events} events + {lost} lost of {want} records")
    c = re.search(r"cpu_per_call ([0-9.]+)", p.stdout)
    return float(m.group(1)), lost, float(c.group(1))


def spread(k):
    v = sorted(r[2] for r in res[k])
    return f"{v[0]:.1f}-{v[-1]:.1f}"


MODES = ["entry", "count", "flow"]
res = {(m, b): [] for m in MODES for b in ("dyn", "sta")}
res[("free", "-")] = []
for r in range(REPS):
    res[("free", "-")].append(run("free", None))
    for m in MODES:
        order = [("dyn", DYN), ("sta", STA)]
        if r % 2:
            order.reverse()
        for b, us in order:
            res[(m, b)].append(run(m, us))

med = {k: statistics.median(v[0] for v in vs) for k, vs in res.items()}
cpu = {k: statistics.median(v[2] for v in vs) for k, vs in res.items()}
lost = {k: sum(v[1] for v in vs) for k, vs in res.items()}
free, cfree = med[("free", "-")], cpu[("free", "-")]
print(f"== the static binary against the dynamic one (inject engine, bench_fn, {N} calls "
      f"in bursts of {BURST} after {WARM} untimed; median of {REPS}, interleaved)")
print(f"  unprobed call {cfree:.1f} ns (thread CPU time), {free:.1f} ns (wall)")
labels = {"entry": "entry probe, 2 integer args + timestamp",
          "count": "count-only probe",
          "flow": "entry + return with duration (flow)"}
worst, invalid = 0.0, []
print(f"  {'thread CPU time, ns a call':40s} {'dynamic':>8s} {'static':>8s} {'ratio':>6s}   "
      f"{'+ns a hit: dynamic':>18s} {'static':>7s}   {'wall: dynamic':>13s} {'static':>7s}")
for m in MODES:
    d, s = cpu[(m, "dyn")], cpu[(m, "sta")]
    lo = lost[(m, "dyn")] + lost[(m, "sta")]
    if lo:      # a lost record costs less than a recorded one: no figure of recorded hits
        invalid.append(m)
    else:
        worst = max(worst, s / d)
    print(f"  {labels[m]:40s} {d:8.1f} {s:8.1f} {s / d:5.2f}x   {d - cfree:18.1f} {s - cfree:7.1f}   "
          f"{med[(m, 'dyn')]:13.1f} {med[(m, 'sta')]:7.1f}"
          + (f"  ({lost[(m, 'dyn')]} / {lost[(m, 'sta')]} lost)" if lo else ""))
    print(f"  {'':40s} runs {spread((m, 'dyn'))} / {spread((m, 'sta'))}")
print(f"  target static/dynamic <= {LIMIT} a probed call, each probe: worst {worst:.2f}x, "
      + ("MISSED" if worst > LIMIT else "MET")
      + (f" ({', '.join(invalid)} left out: records lost)" if invalid else ""))
