#!/usr/bin/env python3
"""Attach latency of the inject engine. Starts TARGET (bench/gen_funcs.py's
program: it calls each of its functions every millisecond), then for each
probe pattern runs `uscope trace -e inject -p PID PATTERN` RUNS times and
times it from its start to its readiness line ("uscope: tracing N probes" on
stderr, printed once every patch is in place and the process runs again):
what a user waits for, process start, symbol lookup and planning included.
Each session is then stopped with SIGINT and must have recorded events.
usage: attach.py USCOPE TARGET RUNS PATTERN..."""
import re, signal, statistics, subprocess, sys, time

us, target, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
limits = {1: 20, 1000: 200}	# the targets, ms
tgt = subprocess.Popen([target], stdin=subprocess.DEVNULL)
time.sleep(0.3)
try:
    for pattern in sys.argv[4:]:
        ready = []
        for _ in range(runs):
            t0 = time.monotonic()
            p = subprocess.Popen([us, "trace", "-e", "inject", "-o", "/dev/null", "-p",
                                  str(tgt.pid), pattern], stderr=subprocess.PIPE, text=True)
            line = ""
            for line in p.stderr:
                if line.startswith("uscope: tracing"):
                    ready.append((time.monotonic() - t0) * 1e3)
                    break
            else:
                sys.exit(f"attach: no readiness line for {pattern}: {line.strip()}")
            n = int(line.split()[2])
            time.sleep(0.02)
            p.send_signal(signal.SIGINT)
            _, err = p.communicate()
            m = re.search(r"^uscope: (\d+) events", err, re.M)
            if not m or int(m.group(1)) == 0:
                sys.exit(f"attach: {pattern}: no events recorded: {err.strip()}")
            if tgt.poll() is not None:
                sys.exit("attach: the target died")
        lim = limits.get(n)
        verdict = ""
        if lim:
            med = statistics.median(ready)
            verdict = f"  target <= {lim} ms: {'MET' if med <= lim else 'MISSED'}"
        print(f"  {n:5d} probe{'s' if n > 1 else ' '} ({pattern:7s}) min {min(ready):7.1f}  "
              f"median {statistics.median(ready):7.1f}  max {max(ready):7.1f}{verdict}")
finally:
    tgt.kill()
    tgt.wait()
