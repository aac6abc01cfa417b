#!/usr/bin/env python3
"""make bench: Debian's redis-server under redis-benchmark, traced with -p as
a user would, as throughput ratios against the unprobed server, measured
side by side in one run (each round runs every configuration once, in turn,
on the same server; the median of the rounds):
  - unprobed;
  - uscope record -o (tmpfs) processCommand call     target: at most 1.3x;
  - uscope latency processCommand                    target: at most 1.3x;
  - uscope count 'zmalloc $ustack'                   target: at most 1.3x
    (issue 41), walked and counted where the probe runs; and it must never
    block: every benchmark ends (a hit whose walk falls back copies 8 KiB,
    and the server waits at most --max-wait for room, then drops).
A ratio is the unprobed requests per second over the probed ones (SET and
GET, their geometric mean). Each uscope run is checked: it attached, ended
cleanly on SIGINT, and its losses are shown (a recording's, per probe, with
how many found no room within --max-wait).

usage: redis.py USCOPE REQUESTS REPS [PIPELINE [OTHER_USCOPE]]
OTHER_USCOPE: another build measured in the same rounds (an older release).
Timings on a VM are noisy: read the ratios."""

import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REDIS = "/usr/bin/redis-server"
US, N, REPS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
PIPE = int(sys.argv[4]) if len(sys.argv) > 4 else 16
OTHER = sys.argv[5] if len(sys.argv) > 5 else None
# "uscope: tracing 2 functions (4 sites)", "tracing 1 function"
READY = re.compile(r"^uscope: tracing \d+ \w+.*$", re.M)
BENCH_TIMEOUT = 120     # a benchmark that takes this long: the server is blocked

if not shutil.which(REDIS) or not shutil.which("redis-benchmark"):
    print("== redis: not installed (apt-get install redis-server redis-tools): skipped")
    sys.exit(0)

TMP = tempfile.mkdtemp(prefix="uscope-bench-redis-", dir="/dev/shm")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis():
    port = free_port()
    p = subprocess.Popen([REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", TMP, "--daemonize", "no",
                          "--logfile", os.path.join(TMP, "redis.log")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            if p.poll() is not None:
                sys.exit("bench: redis-server did not start")
            time.sleep(0.05)
    sys.exit("bench: redis-server does not listen")


def benchmark(port):
    """{test: requests per second} of SET and GET, or None: it did not end
    within BENCH_TIMEOUT (the server blocked)."""
    try:
        r = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q",
                            "-n", str(N), "-P", str(PIPE), "-t", "set,get"],
                           capture_output=True, text=True, timeout=BENCH_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0:
        sys.exit(f"bench: redis-benchmark failed: {r.stderr[-500:]}")
    rps = {m.group(1): float(m.group(2))
           for m in re.finditer(r"(\w+): ([0-9.]+) requests per second", r.stdout)}
    if set(rps) != {"SET", "GET"}:
        sys.exit(f"bench: redis-benchmark said: {r.stdout[-500:]}")
    return rps


def traced(us, argv, pid):
    """uscope ARGV -p PID started and attached: (process, its stderr file)."""
    err = open(os.path.join(TMP, "stderr"), "w+")
    p = subprocess.Popen([us, argv[0], "-p", str(pid)] + argv[1:], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 60
    while True:
        err.seek(0)
        text = err.read()
        if READY.search(text):
            return p, err
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            sys.exit(f"bench: {' '.join(argv)}: uscope did not attach:\n{text[-1000:]}")
        time.sleep(0.02)


def stop(p, err, what):
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        sys.exit(f"bench: {what}: uscope did not end on SIGINT")
    err.seek(0)
    text = err.read()
    err.close()
    if rc != 0:
        sys.exit(f"bench: {what}: uscope exited {rc}:\n{text[-1000:]}")
    return text


def losses(text):
    """What the run's summary says it lost: 'N lost' lines, and the agg
    sinks' 'hits lost' warnings."""
    out = [ln.strip() for ln in text.splitlines()
           if re.search(r"\d+ lost|hits lost|waits for room", ln) and " 0 lost" not in ln]
    return "; ".join(out) if out else "0 lost"


CONFIGS = [
    ("record processCommand call", ["record", "-o", os.path.join(TMP, "r.usc"),
                                    "processCommand", "call"], 1.3),
    ("latency processCommand", ["latency", "processCommand"], 1.3),
    ("count 'zmalloc $ustack'", ["count", "zmalloc $ustack"], 1.3),
]
BUILDS = [("this", US)] + ([("other", OTHER)] if OTHER else [])

server, port = start_redis()
pairs = {}      # (build, config) -> [(unprobed, probed) {test: rps}, a round each]
notes = {}
blocked = set()
try:
    if not benchmark(port):     # warm: the keys exist, the allocator has its pages
        sys.exit("bench: redis-benchmark does not end, unprobed")
    for r in range(REPS):
        for bname, us in BUILDS:
            for name, argv, _ in CONFIGS:
                print(f"bench: redis: round {r + 1}: {bname}: {name}", file=sys.stderr)
                free = benchmark(port)      # unprobed, just before: the pair's ratio
                if not free:
                    sys.exit("bench: redis-benchmark does not end, unprobed")
                p, err = traced(us, argv, server.pid)
                t0 = time.monotonic()
                got = benchmark(port)
                dt = time.monotonic() - t0
                if not got:
                    # the server blocked: uscope is stopped, the benchmark
                    # given up, and the server restarted for what follows
                    blocked.add((bname, name))
                    p.kill()
                    p.wait()
                    err.close()
                    server.kill()
                    server.wait()
                    server, port = start_redis()
                    benchmark(port)
                    continue
                text = stop(p, err, name)
                pairs.setdefault((bname, name), []).append((free, got))
                notes[(bname, name)] = f"{losses(text)} ({dt:.1f} s)"
finally:
    server.terminate()
    server.wait(30)
    shutil.rmtree(TMP, ignore_errors=True)


def ratio(key, test):
    """The median over the rounds of unprobed / probed requests a second."""
    return statistics.median(f[test] / g[test] for f, g in pairs[key])


print(f"== Debian's redis-server, redis-benchmark -n {N} -P {PIPE} -t set,get, uscope -p: the "
      f"time against the unprobed run just before, median of {REPS} rounds")
for bname, us in BUILDS:
    if OTHER:
        print(f"  {bname}: {us}")
    for name, _, target in CONFIGS:
        key = (bname, name)
        if key in blocked:
            print(f"    {name:30s} BLOCKED: redis-benchmark did not end within "
                  f"{BENCH_TIMEOUT} s")
        if key not in pairs:
            continue
        rs = {t: ratio(key, t) for t in ("SET", "GET")}
        gm = math.sqrt(rs["SET"] * rs["GET"])
        free = statistics.median(f["SET"] for f, _ in pairs[key])
        verdict = "" if target is None else \
            f"  target <= {target}x: {'MET' if gm <= target else 'MISSED'}"
        print(f"    {name:30s} {gm:5.2f}x (SET {rs['SET']:.2f}x, GET {rs['GET']:.2f}x; "
              f"unprobed SET {free:.0f}/s){verdict}")
        print(f"      {notes[key]}")
if any(b == "this" for b, _ in blocked):
    sys.exit("bench: redis: the server blocked under this uscope")
