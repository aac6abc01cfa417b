#!/usr/bin/env python3
"""make bench: uscope script, bpftrace's language, beside bpftrace on the
same programs (issue 39's targets).

Per hit, on bench_fn (bench/target.c), side by side in one run: the unprobed
call, `uscope script` on each engine and bpftrace running the same program
text, for
  count    uprobe:T:bench_fn { @[arg0] = count(); }
  latency  uprobe:T:bench_fn { @s[tid] = nsecs; }
           uretprobe:T:bench_fn /@s[tid]/ { @ = hist(nsecs - @s[tid]); delete(@s[tid]); }
Every run's maps are checked: count's rows exactly what the calls give, on
every engine and under bpftrace; latency's histogram holds one value a call.
Beside them, uscope's own command for the same aggregation on inject (count
by an argument, latency): what the language costs over the built-in path.

Then start time: a 20-probe script (20 functions of bench/gen_funcs.py's
program, each `@c[N] = count(); @h = hist(arg0);`, and a BEGIN that prints a
line) run on a running process with -p, from the command's start to BEGIN's
line (BEGIN runs once every probe is in place, in uscope as in bpftrace):
parse, compile, attach. bpftrace runs it system-wide (its BEGIN does not
fire with -p), on the same file.

Targets: inject count <= 15 ns a hit above the unprobed call, inject latency
<= 60 ns a call; bpf within 10% of bpftrace's cost on the same program
(latency also with --uretprobe: bpftrace's return probe, the kernel's, one
trap a call; uscope's default probes the ret instruction, which the kernel
steps out of line: a second trap); parse + compile + attach <= 100 ms for
the 20-probe script.

usage: script.py USCOPE TARGET FUNCS N_FAST N_PROBED REPS START_RUNS
Timings on a VM are noisy: read the ratios."""

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

US, T, FUNCS = sys.argv[1], os.path.realpath(sys.argv[2]), os.path.realpath(sys.argv[3])
N_FAST, N_PROBED, REPS, START_RUNS = (int(a) for a in sys.argv[4:8])
KEYS = 8        # bench_fn(i & 7, 2 * i)
BURST, GAP_MS = 8192, 20
ENGINES = ("inject", "bpf", "tracefs")

PROGS = {
    "count": f"uprobe:{T}:bench_fn {{ @[arg0] = count(); }}",
    "latency": (f"uprobe:{T}:bench_fn {{ @s[tid] = nsecs; }}\n"
                f"uretprobe:{T}:bench_fn /@s[tid]/ {{ @ = hist(nsecs - @s[tid]); "
                f"delete(@s[tid]); }}"),
}
LIMITS = {"count": 15, "latency": 60}
BUILTIN = {"count": ["count", "-q", "-e", "inject", "bench_fn a=$arg1"],
           "latency": ["latency", "-q", "-e", "inject", "bench_fn"]}


def target(n):
    return [T, str(n), "1", "0", str(BURST), str(GAP_MS), str(KEYS)]


def run(argv, peer=False):
    """(ns a call, stdout, stderr); a peer's failure: None."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        last = [l for l in p.stderr.splitlines() if l.strip()][-1:] or [f"exit {p.returncode}"]
        if peer:
            print(f"bench: {argv[0]} failed, left out: {last[0].strip()[:300]}", file=sys.stderr)
            return None
        sys.exit(f"bench: {' '.join(argv[:6])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"ns_per_call ([0-9.]+)", p.stdout)
    if not m:
        sys.exit(f"bench: no timing in:\n{p.stdout[-500:]}")
    return float(m.group(1)), p.stdout, p.stderr


_SFX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def maps(o):
    """count: {key: value}; latency: the histogram's total"""
    rows = {int(m.group(1)): int(m.group(2))
            for m in re.finditer(r"^@\[(\d+)\]: (\d+)$", o, re.M)}
    if rows:
        return rows
    return sum(int(m.group(3)) for m in re.finditer(
        r"^\[(\d+)([KMGT]?)(?:, [^)]*\))?\]?\s+(\d+) \|", o, re.M))


def want(name, n):
    return {k: n // KEYS for k in range(KEYS)} if name == "count" else n


ns, bad, agree = {}, [], {}
bt = shutil.which("bpftrace")
bt_failed = False


def record(key, t):
    ns.setdefault(key, []).append(t)


def check(key, name, out, n):
    got = maps(out)
    agree[key] = got
    if got != want(name, n):
        bad.append(f"{key}: {str(got)[:200]} != {str(want(name, n))[:200]}")


print(f"== uscope script beside bpftrace on bench_fn (inject: median of {REPS} runs of "
      f"{N_FAST:,} calls; the kernel's engines and bpftrace: median of {REPS} of {N_PROBED:,})")
for _ in range(REPS):   # interleaved, so that drift hits them alike
    record("free", run(target(N_FAST))[0])
    for name, prog in PROGS.items():
        t, o, _e = run([US, "script", "-e", "inject", "-x", prog, "--", *target(N_FAST)])
        record(f"inject {name}", t)
        check(f"inject {name}", name, o, N_FAST)
        # beside it, uscope's own command for the same aggregation
        t, _o, _e = run([US, *BUILTIN[name], "--", *target(N_FAST)])
        record(f"builtin {name}", t)
        for engine in ENGINES[1:]:
            t, o, _e = run([US, "script", "-e", engine, "-x", prog, "--", *target(N_PROBED)])
            record(f"{engine} {name}", t)
            check(f"{engine} {name}", name, o, N_PROBED)
        if name == "latency":   # the kernel's uretprobe, as bpftrace's
            t, o, _e = run([US, "script", "-e", "bpf", "--uretprobe", "-x", prog, "--",
                            *target(N_PROBED)])
            record(f"bpfk {name}", t)
            check(f"bpfk {name}", name, o, N_PROBED)
        if bt and not bt_failed:
            r = run([bt, "-e", prog, "-c", " ".join(target(N_PROBED))], peer=True)
            if not r:
                bt_failed = True
                continue
            record(f"bpftrace {name}", r[0])
            check(f"bpftrace {name}", name, r[1], N_PROBED)

free = statistics.median(ns["free"])


def extra(key):
    return statistics.median(ns[key]) - free if key in ns else None


for name, per in (("count", "hit"), ("latency", "call")):
    first, more = PROGS[name].splitlines()[0], len(PROGS[name].splitlines()) > 1
    print(f"== {name}: {first}{' ...' if more else ''}")
    print(f"  {'unprobed call':28s} {free:10.1f} ns/call")
    for who in ENGINES + ("bpfk", "bpftrace", "builtin"):
        key = f"{who} {name}"
        if who == "bpfk" and key not in ns:
            continue
        label = (f"uscope script -e {who}" if who in ENGINES else "bpftrace" if who == "bpftrace"
                 else "uscope script -e bpf --uretprobe" if who == "bpfk"
                 else f"(uscope {name} -e inject)")
        if key not in ns:
            why = "(failed: above)" if bt_failed else "(not installed)"
            print(f"  {label:28s} {why:>14s}")
            continue
        t = statistics.median(ns[key])
        print(f"  {label:28s} {t:10.1f} ns/call  +{t - free:9.1f} ns/{per:4s} {t / free:7.1f}x the call")
    x = extra(f"inject {name}")
    print(f"  target inject <= {LIMITS[name]} ns a {per}: {x:.1f} ns, "
          f"{'MET' if x <= LIMITS[name] else 'MISSED'}")
    # beside bpftrace, the same mechanism: its uretprobe is the kernel's
    # (uscope's default return probe, on the ret instructions, is a second
    # trap a call on bpf: a breakpoint on a ret is stepped out of line)
    b = extra(f"bpfk {name}") if f"bpfk {name}" in ns else extra(f"bpf {name}")
    p = extra(f"bpftrace {name}")
    if b is not None and p:
        how = " (--uretprobe)" if f"bpfk {name}" in ns else ""
        print(f"  target bpf{how} within 10% of bpftrace: {b:.0f} ns beside {p:.0f} ns "
              f"({100 * (b / p - 1):+.0f}%), {'MET' if b <= 1.1 * p else 'MISSED'}")

# start time: 20 probes, -p on a running process, to BEGIN's line
src = "BEGIN { printf(\"ready\\n\"); }\n" + "".join(
    f"uprobe:{FUNCS}:f_{i:04d} {{ @c[{i}] = count(); @h = hist(arg0); }}\n" for i in range(20))
fd, path = tempfile.mkstemp(suffix=".bt")
os.write(fd, src.encode())
os.close(fd)
victim = subprocess.Popen([FUNCS], stdout=subprocess.DEVNULL)
time.sleep(0.3)


def ready(argv):
    """ms from the start to BEGIN's line; None when it failed"""
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    while line and "ready" not in line:     # bpftrace's "Attaching N probes..." first
        line = p.stdout.readline()
    ms = (time.monotonic() - t) * 1e3
    p.send_signal(signal.SIGINT)
    out, err = p.communicate()
    if "ready" not in line:
        if argv[0] != US:
            print(f"bench: {argv[0]} printed no BEGIN line, left out: {err.strip()[-300:]}",
                  file=sys.stderr)
            return None
        sys.exit(f"bench: {' '.join(argv)}: no BEGIN line:\n{line}{out[-500:]}{err[-1000:]}")
    if argv[0] == US and not re.search(r"^@c\[\d+\]: [1-9]", out, re.M):
        bad.append(f"{' '.join(argv[:4])}: nothing counted")
    return ms


starts = {}
try:
    for _ in range(START_RUNS):
        for engine in ENGINES:
            starts.setdefault(engine, []).append(
                ready([US, "script", "-e", engine, "-p", str(victim.pid), path]))
        if bt and not bt_failed:
            # its output unbuffered: BEGIN's line at once (a pipe is not a
            # tty); system-wide: bpftrace 0.17 runs no BEGIN with -p
            ms = ready([bt, "-B", "none", path])
            if ms is not None:
                starts.setdefault("bpftrace", []).append(ms)
finally:
    victim.kill()
    victim.wait()
    os.unlink(path)
print(f"== start: a 20-probe script on a running process, to BEGIN (median of {START_RUNS})")
for who, v in starts.items():
    label = f"uscope script -e {who}" if who != "bpftrace" else "bpftrace"
    print(f"  {label:28s} {statistics.median(v):8.1f} ms")
for engine in ENGINES:
    m = statistics.median(starts[engine])
    print(f"  target {engine} <= 100 ms: {m:.1f} ms, {'MET' if m <= 100 else 'MISSED'}")

if bad:
    print("bench: maps not as the calls give:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("  every run's maps are what the calls give" +
      (", bpftrace's too" if "bpftrace count" in agree else ""))
