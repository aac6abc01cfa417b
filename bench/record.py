#!/usr/bin/env python3
"""make bench: recording. Entry and return of bench_fn, N calls in a row (no
pauses: the recorder must keep up or the thread waits), side by side in one
run, after one untimed recording that warms tmpfs (a VM's first touch of
its memory costs 2-3x):
  - the unprobed call;
  - uscope record (inject), lossless, to a file on tmpfs (/dev/shm);
  - uftrace record -P bench_fn (lossless, dynamic patching), when installed;
  - uscope trace -o /dev/null: the live text consumer, which drops;
then the sustained recording rate for one and two threads, and report on
the recording: its time and peak memory, against a ten times smaller one
(memory must follow the functions, not the records).

Counts only what was recorded: every uscope recording is checked with
report --json (calls of bench_fn == N per thread), and each run's losses are
shown.

usage: record.py USCOPE TARGET N REPS
Timings on a VM are noisy: read the ratios."""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

US, T, N, REPS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# A recorder descheduled for more than --max-wait (100 ms) on a busy VM drops
# records; these runs check that it keeps up, not that the VM never stalls
# it: a thread waits up to 2 s here.
RECORD = [US, "record", "--max-wait", "2s"]
SHM = tempfile.mkdtemp(prefix="uscope-bench-", dir="/dev/shm")
LIMIT_NS = 40   # a call's entry and return recorded, above the unprobed call (bench/README)
PROBE = f"{T}:bench_fn"


def target(n, threads=1):
    return [T, str(n), str(threads), "0", "0", "0"]


def run(argv, peer=False, **kw):
    """(ns a call, rate, stderr); a peer tool's (uftrace's) failure: one line
    and None, the bench goes on without it."""
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if p.returncode != 0 and peer:
        last = [l for l in p.stderr.splitlines() if l.strip()][-1:] or [f"exit {p.returncode}"]
        print(f"bench: {argv[0]} failed, left out: {last[0].strip()[:300]}", file=sys.stderr)
        return None
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:8])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"ns_per_call ([0-9.]+) rate ([0-9.]+)", p.stdout)
    if not m:
        sys.exit(f"bench: no timing in:\n{p.stdout[-500:]}")
    return float(m.group(1)), float(m.group(2)), p.stderr


def summary(stderr):
    m = re.search(r"uscope: (\d+) events, (\d+) lost", stderr)
    if not m:
        sys.exit(f"bench: no summary in:\n{stderr[-1000:]}")
    return int(m.group(1)), int(m.group(2))


def peak_rss(argv):
    """Peak RSS (KiB) and wall time of argv, from wait4's rusage."""
    import time
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execv(argv[0], argv)
    _, status, ru = os.wait4(pid, 0)
    dt = time.monotonic() - t0
    if status != 0:
        sys.exit(f"bench: {' '.join(argv)} failed ({status})")
    return dt, ru.ru_maxrss


def calls_in(path):
    p = subprocess.run([US, "report", "-r", path, "--json", "-q"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"bench: report -r {path} failed:\n{p.stderr[-1000:]}")
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return {r["function"]: r["calls"] for r in rows if "function" in r}


def med(v):
    return statistics.median(v)


rows = []
try:
    base = med([run(target(N))[0] for _ in range(REPS)])
    rows.append(("unprobed call", base, None, ""))

    rec = os.path.join(SHM, "r.usc")
    # one recording first, not timed: on a VM the first writes of this
    # size into tmpfs pay for the guest's memory being touched the first
    # time (2-3x slower here); the timed runs then measure the recorder
    run(RECORD + ["-o", rec, PROBE, "--"] + target(N))
    ns, lost = [], []
    for _ in range(REPS):
        t, _, err = run(RECORD + ["-o", rec, PROBE, "--"] + target(N))
        ev, lo = summary(err)
        calls = calls_in(rec).get("bench_fn", 0)
        if calls != N or ev != 2 * N:
            sys.exit(f"bench: record kept {calls} calls ({ev} events) of {N}")
        ns.append(t)
        lost.append(lo)
    size = os.path.getsize(rec)
    rows.append(("uscope record (inject, tmpfs)", med(ns), max(lost),
                 f"{size / (2 * N):.0f} bytes a record in the file"))

    if shutil.which("uftrace"):
        d = os.path.join(SHM, "uftrace.data")
        ns = []
        for _ in range(REPS):
            r = run(["uftrace", "record", "-P", "bench_fn", "-d", d] + target(N), peer=True)
            if not r:
                break
            ns.append(r[0])
        if len(ns) == REPS:
            rows.append(("uftrace record -P (lossless)", med(ns), None, ""))
        else:
            rows.append(("uftrace record -P", None, None, "failed (above)"))
        shutil.rmtree(d, ignore_errors=True)
    else:
        rows.append(("uftrace record -P", None, None, "not installed"))

    ns, lost = [], []
    for _ in range(REPS):
        t, _, err = run([US, "trace", "-o", "/dev/null", PROBE, f"r:{PROBE}", "--"] + target(N))
        ns.append(t)
        lost.append(summary(err)[1])
    rows.append(("uscope trace -o /dev/null (live)", med(ns), max(lost), "drops when behind"))

    print(f"== recording: entry + return of bench_fn, {N} calls in a row, median of {REPS}")
    print(f"  {'':34} {'ns/call':>9} {'above':>8} {'ratio':>7} {'lost':>10}")
    for name, t, lo, note in rows:
        if t is None:
            print(f"  {name:34} {'-':>9}  {note}")
            continue
        print(f"  {name:34} {t:9.1f} {t - base:8.1f} {t / base:7.2f} "
              f"{'-' if lo is None else lo:>10}  {note}")
    above = rows[1][1] - base
    print(f"  target: uscope record <= {LIMIT_NS} ns a call above the unprobed call, 0 lost: "
          f"{above:.1f} ns, {rows[1][2]} lost: "
          f"{'MET' if above <= LIMIT_NS and rows[1][2] == 0 else 'MISSED'}")

    print("== sustained recording rate (record, inject, tmpfs; lossless)")
    for threads in (1, 2):
        rates = []
        for _ in range(REPS):
            _, rate, err = run(RECORD + ["-o", rec, PROBE, "--"] + target(N, threads))
            ev, lo = summary(err)
            if ev != 2 * N * threads or lo:
                sys.exit(f"bench: {threads} threads: {ev} events, {lo} lost of {2 * N * threads}")
            rates.append(2 * rate)      # an entry and a return a call
        print(f"  {threads} thread{'s' if threads > 1 else ' '}: {med(rates) / 1e6:7.1f} M events/s "
              f"({2 * N * threads} events, 0 lost)")

    print("== report on the recording: time and peak memory")
    small = os.path.join(SHM, "small.usc")
    run(RECORD + ["-o", small, PROBE, "--"] + target(N // 10))
    run(RECORD + ["-o", rec, PROBE, "--"] + target(N))
    for path, n in ((small, N // 10), (rec, N)):
        dt, kib = peak_rss([US, "report", "-r", path, "-q"])
        print(f"  {2 * n:>10} records ({os.path.getsize(path) >> 20} MiB): "
              f"{dt:6.2f} s, peak RSS {kib >> 10} MiB")
finally:
    shutil.rmtree(SHM, ignore_errors=True)
