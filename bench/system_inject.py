#!/usr/bin/env python3
"""System-wide on the inject engine: how long `uscope count -e inject
PATH:PATTERN` (neither -p nor COMMAND) takes to patch every running process
of one binary, from its start to its readiness line ("uscope: tracing 1
function in N processes"), RUNS times. TARGET (bench/gen_funcs.py's program,
which calls every function each millisecond) is copied, so that only the
bench's processes map it, and NPROCS copies of it run meanwhile; every
session is stopped with SIGINT and must have counted hits.

usage: system_inject.py USCOPE TARGET NPROCS RUNS PATTERN"""
import os, re, shutil, signal, statistics, subprocess, sys, tempfile, time

us, target, nprocs, runs, pattern = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), sys.argv[5]
LIMIT = 1000	# ms, for 50 processes (issue 27)

tmp = tempfile.mkdtemp(prefix="uscope-bench-sys-")
exe = os.path.join(tmp, "sys-target")
shutil.copy(target, exe)
procs = [subprocess.Popen([exe], stdout=subprocess.DEVNULL) for _ in range(nprocs)]
try:
    ready = []
    for _ in range(runs):
        t0 = time.monotonic()
        p = subprocess.Popen([us, "count", "-e", "inject", f"{exe}:{pattern}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = ""
        for line in p.stderr:
            if line.startswith("uscope: tracing"):
                break
        else:
            sys.exit(f"system_inject: no readiness line: {p.communicate()[1].strip()[-500:]}")
        ready.append((time.monotonic() - t0) * 1e3)
        m = re.search(r" in (\d+) process", line)
        if not m or int(m.group(1)) != nprocs:
            sys.exit(f"system_inject: {line.strip()}: not {nprocs} processes")
        time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate()
        if p.returncode != 0 or not re.search(r"^\S+\s+[1-9]\d*\s*$", out, re.M):
            sys.exit(f"system_inject: nothing counted ({p.returncode}): {out}{err}")
        if any(q.poll() is not None for q in procs):
            sys.exit("system_inject: a target died")
    med = statistics.median(ready)
    verdict = f"  target <= {LIMIT} ms: {'MET' if med <= LIMIT else 'MISSED'}" \
        if nprocs == 50 else ""
    print(f"  {nprocs:3d} processes ({pattern}) min {min(ready):7.1f}  median {med:7.1f}  "
          f"max {max(ready):7.1f}{verdict}")
finally:
    for q in procs:
        q.kill()
        q.wait()
    shutil.rmtree(tmp, ignore_errors=True)
