#!/usr/bin/env python3
"""make bench: aggregations where the probe runs. count with a one-integer
key, hist of one integer and latency (entry to return) on bench_fn, side by
side in one run: the unprobed call, uscope's three engines and bpftrace doing
the same (@[arg0] = count(), @ = hist(arg1), uprobe + uretprobe latency).
Counts only what was aggregated, checks every run's rows against the exact
values the target's calls give (and against bpftrace's, run on the same
program with the same calls), and shows each run's losses.

usage: agg.py USCOPE TARGET N_FAST N_PROBED REPS
Timings on a VM are noisy: read the ratios."""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys

US, T = sys.argv[1], sys.argv[2]
N_FAST, N_PROBED, REPS = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
KEYS = 8        # bench_fn(i & 7, 2 * i): 8 distinct first arguments


def target(n):
    return [T, str(n), "1", "0", "0", "0", str(KEYS)]


def peer_failed(argv, p):
    """A peer tool's run (bpftrace, uftrace) failed: one line, and the bench
    goes on without it."""
    last = [l for l in p.stderr.splitlines() if l.strip()][-1:] or [f"exit {p.returncode}"]
    print(f"bench: {argv[0]} failed, left out: {last[0].strip()[:300]}", file=sys.stderr)


def run(argv, peer=False):
    """(ns a call, stdout, stderr); a peer's failure: None."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0 and peer:
        return peer_failed(argv, p)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:8])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"ns_per_call ([0-9.]+)", p.stdout)
    if not m:
        sys.exit(f"bench: no timing in:\n{p.stdout[-500:]}")
    return float(m.group(1)), p.stdout, p.stderr


def losses(stderr):
    """Hits uscope says it did not aggregate, from its warnings."""
    return sum(int(m.group(1)) for m in re.finditer(
        r"uscope: warning: .*?(\d+) (?:hits|events|values) (?:lost|not counted|could not)",
        stderr))


def rows(stdout):
    return [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]


# what the rows must be: bench_fn(i & 7, 2 * i) for i < n
def want_count(n):
    return {k: n // KEYS for k in range(KEYS)}


def want_hist(n):
    """log2 buckets of b = 2 * i: {lower bound: count} (0 for b = 0)"""
    out = {}
    for lo_exp in range(0, 64):
        lo, hi = 1 << lo_exp, 2 << lo_exp
        # even b in [lo, hi) with b < 2n
        c = max(0, (min(hi, 2 * n) - lo + (lo & 1)) // 2) if lo < 2 * n else 0
        if lo == 1:
            c = 0       # b is even: none is 1
        if c:
            out[lo] = c
    out[0] = 1
    return out


def us_count(o):
    return {r["key"]["a"]: r["count"] for r in rows(o) if r["final"]}


def us_hist(o):
    (r,) = [r for r in rows(o) if r["final"]]
    return {b.get("min", -1): b["count"] for b in r["buckets"]}


def us_latency(o):
    (r,) = [r for r in rows(o) if r["final"]]
    return r["count"]


def bt_count(o):
    return {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"^@\[(\d+)\]: (\d+)$", o, re.M)}


_SFX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def bt_hist(o):
    out = {}
    for m in re.finditer(r"^\[(\d+)([KMGT]?)(?:, [^)]*\))?\]?\s+(\d+) \|", o, re.M):
        out[int(m.group(1)) * _SFX[m.group(2)]] = int(m.group(3))
    return {k: v for k, v in out.items() if v}


def bt_total(o):
    return sum(bt_hist(o).values())


probe = "bench_fn"
shapes = {
    "count": (["count", "--json", f"{probe} a=%di:s64"],
              f"uprobe:{T}:{probe} {{ @[arg0] = count(); }}", us_count, bt_count, want_count),
    "hist": (["hist", "--json", f"{probe} b=%si:s64"],
             f"uprobe:{T}:{probe} {{ @ = hist(arg1); }}", us_hist, bt_hist, want_hist),
    "latency": (["latency", "--json", probe],
                f"uprobe:{T}:{probe} {{ @s[tid] = nsecs; }} "
                f"uretprobe:{T}:{probe} /@s[tid]/ {{ @ = hist(nsecs - @s[tid]); "
                f"delete(@s[tid]); }}", us_latency, bt_total, lambda n: n),
}

ns, lost, bad = {}, {}, []


def record(key, t, l):
    ns.setdefault(key, []).append(t)
    lost[key] = lost.get(key, 0) + l


def check(key, got, want):
    if got != want:
        bad.append(f"{key}: {str(got)[:200]} != {str(want)[:200]}")


print(f"== aggregations on bench_fn (inject: median of {REPS} runs of {N_FAST:,} calls; "
      f"the kernel's: one run of {N_PROBED:,})")
for _ in range(REPS):   # interleaved, so that drift hits them alike
    t, _o, _e = run(target(N_FAST))
    record("free", t, 0)
    for name, (argv, _bt, parse, _btp, want) in shapes.items():
        t, o, e = run([US, *argv[:1], "-q", "-e", "inject", *argv[1:], "--", *target(N_FAST)])
        record(f"inject {name}", t, losses(e))
        check(f"inject {name}", parse(o), want(N_FAST))

agree = {}
bt_failed = False
for name, (argv, bt, parse, btparse, want) in shapes.items():
    for engine in ("inject", "bpf", "tracefs"):
        n = N_PROBED
        t, o, e = run([US, *argv[:1], "-q", "-e", engine, *argv[1:], "--", *target(n)])
        if engine != "inject":
            record(f"{engine} {name}", t, losses(e))
        check(f"{engine} {name} ({n:,} calls)", parse(o), want(n))
        agree[(name, engine)] = parse(o)
    if shutil.which("bpftrace") and not bt_failed:
        r = run(["bpftrace", "-q", "-e", bt, "-c", " ".join(target(N_PROBED))], peer=True)
        if not r:
            bt_failed = True
            continue
        t, o, e = r
        record(f"bpftrace {name}", t, 0)
        agree[(name, "bpftrace")] = btparse(o)

free = statistics.median(ns["free"])


def row(label, key, per="hit"):
    if key not in ns:
        why = "(failed: above)" if key.startswith("bpftrace") and bt_failed else "(not installed)"
        print(f"  {label:44s} {why:>12s}")
        return
    t = statistics.median(ns[key])
    lo = f", {lost[key]} lost" if lost.get(key) else ""
    print(f"  {label:44s} {t:10.1f} ns/call  +{t - free:8.1f} ns/{per:4s} "
          f"{t / free:7.1f}x the call{lo}")


def extra(key):
    return statistics.median(ns[key]) - free if key in ns else None


for name, per, limit in (("count", "hit", 12), ("hist", "hit", 12), ("latency", "call", 30)):
    what = {"count": "count with a one-integer key (@[arg0] = count())",
            "hist": "hist of one integer (@ = hist(arg1))",
            "latency": "latency, entry to return (2 hits a call)"}[name]
    print(f"== {what}")
    row("unprobed call", "free")
    for engine in ("inject", "bpf", "tracefs", "bpftrace"):
        row(f"{'uscope -e ' if engine != 'bpftrace' else ''}{engine}", f"{engine} {name}", per)
    x = extra(f"inject {name}")
    out = [f"{extra(f'{o} {name}') / x:.0f}x cheaper a {per} than {o}"
           for o in ("bpf", "tracefs", "bpftrace") if extra(f"{o} {name}") and x and x > 0]
    if out:
        print("  inject: " + "; ".join(out))
    if x is not None:
        print(f"  target inject <= {limit} ns a {per}: {x:.1f} ns, "
              f"{'MET' if x <= limit else 'MISSED'}")
    if name == "latency" and x and os.environ.get("BENCH_CLOCK"):
        # the floor under any latency timed in the process: two reads of
        # the CPU's clock a call (bench/clock.c), whatever the tool
        c = subprocess.run([os.environ["BENCH_CLOCK"]], capture_output=True, text=True)
        m = re.search(r"rdtsc_ns ([0-9.]+)", c.stdout)
        if m:
            tsc = float(m.group(1))
            print(f"  the clock: one rdtsc costs {tsc:.1f} ns here; two a call are "
                  f"{2 * tsc:.1f} ns of inject's {x:.1f} ({200 * tsc / x:.0f}%)")
    if (name, "bpftrace") in agree:
        same = all(agree[(name, e)] == agree[(name, "bpftrace")]
                   for e in ("inject", "bpf", "tracefs"))
        print(f"  the same {N_PROBED:,} calls: uscope's three engines and bpftrace "
              f"{'agree exactly' if same else 'DISAGREE'}")
        if not same:
            bad.append(f"{name}: engines and bpftrace disagree: " +
                       "; ".join(f"{e}={str(agree[(name, e)])[:120]}"
                                 for e in ("inject", "bpf", "tracefs", "bpftrace")))
if bad:
    print("bench: rows not as the calls give:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("  every run's rows are exactly what the calls give")
