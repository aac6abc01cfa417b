#!/usr/bin/env python3
"""Readiness on the bpf engine: how long each command takes from its start
to its readiness line ("uscope: tracing ..." on stderr, printed once every
probe is attached), on one site of a running process, beside bpftrace's
attach of the same site.

Starts TARGET (bench/gen_funcs.py's program: it calls each of its functions
every millisecond), then runs `uscope CMD -e bpf -p PID FUNC` RUNS times for
each command (trace, latency, flow, count, hist): the median, min and max
from its start to its readiness line, what a user waits for (process start,
symbol lookup, planning, the program's load and verification, attach). Each
run is then stopped with SIGINT and must have seen the function's calls.
Beside it, bpftrace on the same site (`uprobe:TARGET:FUNC { @ = count(); }`,
ready when its BEGIN prints, which it runs once its probe is attached; its
attach includes compiling the script) where it is installed.
usage: ready.py USCOPE TARGET RUNS FUNC"""
import os, re, shutil, signal, statistics, subprocess, sys, time

us, target, runs, func = sys.argv[1], os.path.realpath(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
LIMIT = 150		# ms: issue 27's target for trace, latency and count
# each command, and what its output shows when it saw the calls
COMMANDS = [
    ("trace", ["trace", func], rf"\b{func}\b"),
    ("latency", ["latency", func], r"^count [1-9]"),
    ("flow", ["flow", func], rf"\b{func}\b"),
    ("count", ["count", func], rf"^{func}\s+[1-9]"),
    ("hist", ["hist", f"{func} a=%di:s64"], r"^count [1-9]"),
]


def stop(p, what):
    """SIGINT, again every 0.5 s (bpftrace 0.17 misses one now and then):
    the output; a run that will not stop ends the bench."""
    p.send_signal(signal.SIGINT)
    for _ in range(20):
        try:
            return p.communicate(timeout=0.5)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)
    p.kill()
    sys.exit(f"ready: {what} did not stop")


def timed(argv, prefix, stream, what, peer=False):
    """argv's ms from its start to its readiness line, and its output once
    stopped; a peer's failure: None (one line said)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    for line in getattr(p, stream):
        if line.startswith(prefix):
            break
    else:
        out, err = p.communicate()
        if peer:
            last = [l for l in err.splitlines() if l.strip()][-1:] or ["no output"]
            print(f"bench: {what} failed, left out: {last[0].strip()[:300]}", file=sys.stderr)
            return None
        sys.exit(f"ready: no readiness line from {what}: {err.strip()[-500:]}")
    ms = (time.monotonic() - t0) * 1e3
    time.sleep(0.05)
    out, err = stop(p, what)
    if p.returncode != 0 and not peer:
        sys.exit(f"ready: {what} failed ({p.returncode}): {err.strip()[-500:]}")
    return ms, out


def row(label, ms, verdict=""):
    med = statistics.median(ms)
    print(f"  {label:26s} median {med:7.1f}  min {min(ms):7.1f}  max {max(ms):7.1f} ms"
          f"{verdict}")


tgt = subprocess.Popen([target], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
time.sleep(0.3)
try:
    for name, args, seen in COMMANDS:
        ms = []
        for _ in range(runs):
            t, out = timed([us] + args[:1] + ["-e", "bpf", "-p", str(tgt.pid)] + args[1:],
                           "uscope: tracing", "stderr", f"uscope {name}")
            if not re.search(seen, out, re.M):
                sys.exit(f"ready: uscope {name} -e bpf saw no call of {func}: {out[-300:]}")
            ms.append(t)
        row(f"uscope {name} -e bpf", ms,
            f"  target <= {LIMIT} ms: {'MET' if statistics.median(ms) <= LIMIT else 'MISSED'}")
    bpftrace = shutil.which("bpftrace")
    if not bpftrace:
        print(f"  {'bpftrace':26s} (not installed)")
    else:
        ms = []
        for _ in range(runs):
            r = timed([bpftrace, "-p", str(tgt.pid), "-e",
                       f'BEGIN {{ printf("ready\\n"); }} uprobe:{target}:{func} {{ @ = count(); }}'],
                      "ready", "stdout", "bpftrace", peer=True)
            if not r:
                ms = []
                break
            ms.append(r[0])
        if ms:
            row("bpftrace (one uprobe)", ms)
        else:
            print(f"  {'bpftrace':26s} (failed: above)")
    if tgt.poll() is not None:
        sys.exit("ready: the target died")
finally:
    tgt.kill()
    tgt.wait()
