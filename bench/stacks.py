#!/usr/bin/env python3
"""make bench: $ustack, the user stack at a hit (issue 19), side by side in
one run. The stack is tests/targets/stacks.c `deep` (-O2
-fomit-frame-pointer: leaf <- mid [inlined] <- outer <- d1 <- d2 <- d3 <-
d4 <- main <- __libc_start_call_main <- __libc_start_main <- _start: ten
frames and an inlined one). $ustack is walked where the probe runs by
default (the inject agent, the bpf program: return addresses from unwind
tables, nothing copied); --stack-mode copy copies the registers and 8 KiB
of stack at each hit for uscope to unwind (the old way). After an untimed
run that warms the page cache and the unwind tables' disk cache:

 1. inject, N calls in bursts: the unprobed loop; the plain probe (count
    'leaf'); count 'leaf $ustack' walked and counted in place; the same
    with --stack-mode copy; trace 'leaf $ustack' walked, its addresses
    recorded (-o /dev/null); the bare 8 KiB copy (bench/memcopy.c: what
    the memory costs whoever copies). $ustack's cost is the walked count
    above the plain count. Target: <= 60 ns a hit, 0 lost, 0 waits.
 2. the same without pauses, every hit written: the flight recorder
    (record --snapshot: nobody reads the ring, the oldest records are
    overwritten), 'leaf' against 'leaf $ustack' walked and copied; and the
    bytes of $ustack a hit in a recording.
 3. the kernel's, N_PROBED calls (a uprobe costs microseconds): count -e
    bpf 'leaf' (the kernel's trap and a count), 'leaf $ustack' walked by
    the program, the same with --stack-mode copy, bpftrace's ustack
    (@[ustack] = count()); the frames each got (bpftrace walks frame
    pointers, which this code has not). Target: $ustack <= the plain bpf
    probe + 1 us, in the traced thread's CPU time (where the trap and the
    program run; the wall time is shown beside it), the target on CPU 0 in
    every run (this VM's second CPU takes a trap ~5 us longer: which CPU a
    run landed on decided the comparison).
 4. inject's and bpf's counted stacks of the same workload (stacks.c
    `mixed`: leaf by two paths, cmp from glibc's qsort at several depths)
    folded (count --folded): identical stacks and counts, or not.
 5. the tracer's side: recordings of stacks read back (trace -r -o
    /dev/null), walked ones (symbolized and formatted) and copied ones
    (unwound by uscope too), the cache warm.

The target calls leaf in bursts of BURST calls with an untimed pause after
each (the tracer drains its ring meanwhile: a hit dropped on a full ring
costs less than one recorded, and would flatter the figure), after WARM
untimed calls that touch the ring's pages once. ns a hit counts only the
hits recorded or counted: every run's losses are shown (calls less the
hits its counts or its summary hold), and its cost above the unprobed loop
is divided among the hits it kept. Each run shows its fallbacks (walks
that could not go on, copied instead: uscope's summary) and the waits for
room that ran out (--max-wait; uscope counts no other waits); the walked
and copied counts run once more with --drop, where a hit that would wait
for room is dropped instead: its losses are the hits that found the
buffer full. The pauses cost the calls after them: on a VM an idle vCPU's
caches are cold again (the bare copy shows by how much).

usage: stacks.py USCOPE STACKS N N_PROBED REPS (bench/memcopy.c is built here)
Timings on a VM are noisy: read the ratios."""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

US, T = sys.argv[1], os.path.realpath(sys.argv[2])
N, N_PROBED, REPS = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
BURST, GAP_MS, WARM = 384, 30, 1536     # 384 stacks of 8 KiB fit a 4 MiB ring
SHM = tempfile.mkdtemp(prefix="uscope-bench-", dir="/dev/shm")
# a 16 KiB environment puts the stack's end that far: an 8 KiB copy is not
# cut short by it (where the kernel starts the stack is random); verbose:
# uscope says how many waits for room ran out
ENV = dict(os.environ, USCOPE_BENCH_PAD="x" * 16384, USCOPE_VERBOSE="1")
MEMCOPY = os.path.join(SHM, "memcopy")
subprocess.run(["cc", "-O2", "-o", MEMCOPY,
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "memcopy.c")],
               check=True)
SYMS = ["leaf", "mid", "outer", "d1", "d2", "d3", "d4", "main", "__libc_start_call_main",
        "__libc_start_main", "_start"]
FRAMES = ["leaf+0x0", "mid [inlined]", "outer+", "d1+", "d2+", "d3+", "d4+", "main+",
          "__libc_start_call_main+", "__libc_start_main+", "_start+"]
LIMIT_INJ_NS, LIMIT_BPF_US = 60, 1.0


def deep(n, warm=WARM, burst=BURST, gap=GAP_MS):
    return [T, "deep", str(n), str(burst), str(gap), str(warm)]


def verdict(ok):
    return "met" if ok else "missed"


def run(argv, what="", peer=False):
    """(ns a call, stdout, stderr); a peer tool's (bpftrace's) failure: one
    line and None, the bench goes on without it."""
    p = subprocess.run(argv, capture_output=True, text=True, env=ENV)
    if p.returncode != 0 and peer:
        last = [l for l in p.stderr.splitlines() if l.strip()][-1:] or [f"exit {p.returncode}"]
        print(f"bench: {argv[0]} failed, left out: {last[0].strip()[:300]}", file=sys.stderr)
        return None
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:8])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"ns_per_call ([0-9.]+)", p.stdout)
    if not m:
        sys.exit(f"bench: no timing from {what or argv[0]}:\n{p.stdout[-500:]}")
    return float(m.group(1)), p.stdout, p.stderr


def cpu_ns(stdout):
    """stacks.c's thread CPU time a call (its trap and bpf program included)."""
    m = re.search(r"cpu_ns_per_call ([0-9.]+)", stdout)
    return float(m.group(1)) if m else None


def summary(stderr):
    """trace's and record's summary: (events, lost)."""
    m = re.search(r"uscope: (\d+) events, (\d+) lost", stderr)
    if not m:
        sys.exit(f"bench: no summary in:\n{stderr[-1000:]}")
    return int(m.group(1)), int(m.group(2))


def side(stderr):
    """What uscope says of a run beside its counts: (hits that fell back to
    a copy, and why; waits for room that ran out)."""
    fb = re.search(r"^uscope: (\d+) hits? fell back to a copy of the stack: (.*)$", stderr, re.M)
    wt = re.search(r"inject: (\d+) waits for room ran out", stderr)
    return (int(fb.group(1)) if fb else 0, fb.group(2) if fb else ""), int(wt.group(1)) if wt else 0


def counted(stdout, probe="leaf", syms=None):
    """count --json's rows of probe: the hits counted; with syms, every
    row's stack must be those frames."""
    n = 0
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if row.get("probe") != probe or not row.get("final"):
            continue
        if syms is not None:
            got = [f.get("sym") for f in row["key"]["ustack"]]
            if got != syms:
                sys.exit(f"bench: {probe}: unexpected frames {got}")
        n += row["count"]
    return n


def med(v):
    return statistics.median(v)


def per_hit(t, free, n, lost):
    """ns above the unprobed loop, shared among the hits kept (every loss
    counted as if timed)."""
    return (t - free) * n / (n - lost) if lost < n else float("inf")


COUNT = [US, "count", "--json", "-e", "inject"]
CONFIGS = [
    # key, label, argv (None: the target alone; "copy": bench/memcopy.c)
    ("free", "unprobed loop (d4 -> ... -> leaf)", None),
    ("plain", "count 'leaf' (the plain probe)", COUNT + ["leaf"]),
    ("walk", "count 'leaf $ustack' walked", COUNT + ["leaf $ustack"]),
    ("copy", "... --stack-mode copy (8 KiB a hit)", COUNT + ["--stack-mode", "copy",
                                                             "leaf $ustack"]),
    ("trace", "trace -o /dev/null 'leaf $ustack' walked",
     [US, "trace", "-e", "inject", "-o", "/dev/null", "leaf $ustack"]),
    ("bare", "the bare copy: 8 KiB rep movsb to a ring", "copy"),
]


def one_run(key, pre, n, calls):
    """A timed inject run: (ns/call, lost, (fallbacks, why), waits ran out)."""
    t, out, err = run(pre + ["--"] + deep(n))
    fb, waits = side(err)
    if key == "trace":
        ev, lo = summary(err)
        if ev + lo != calls:
            sys.exit(f"bench: {key}: {ev} events + {lo} lost, {calls} calls")
        return t, lo, fb, waits
    got = counted(out, syms=None if key == "plain" else SYMS)
    if got > calls:
        sys.exit(f"bench: {key}: {got} hits counted of {calls} calls")
    return t, calls - got, fb, waits


def fast_runs():
    res = {k: [] for k, *_ in CONFIGS}
    calls = N + WARM
    # untimed: the page cache, the debug info and the unwind tables read once
    run(COUNT + ["leaf $ustack", "--"] + deep(N // 10))
    for _ in range(REPS):           # interleaved: drift hits them alike
        for key, _, pre in CONFIGS:
            if pre is None:
                res[key].append((run(deep(N))[0], 0, (0, ""), 0))
            elif pre == "copy":
                argv = [MEMCOPY, str(N), str(BURST), str(GAP_MS), str(WARM), "8192"]
                res[key].append((run(argv, what="memcopy")[0], 0, (0, ""), 0))
            else:
                res[key].append(one_run(key, pre, N, calls))
    # the walked and copied counts again, a full buffer dropping at once
    full = {}
    for key in ("walk", "copy"):
        pre = dict((k, p) for k, _, p in CONFIGS)[key]
        full[key] = one_run(key, pre[:3] + ["--drop"] + pre[3:], N, calls)[1]
    free = med([r[0] for r in res["free"]])
    above = {k: med([per_hit(r[0], free, N, r[1]) for r in v]) for k, v in res.items()}
    above["bare"] = med([r[0] for r in res["bare"]])     # no loop around it
    ns = {k: med([r[0] for r in v]) for k, v in res.items()}
    lost = {k: sum(r[1] for r in v) for k, v in res.items()}
    fbs = {k: (sum(r[2][0] for r in v), "; ".join(sorted({r[2][1] for r in v if r[2][1]})))
           for k, v in res.items()}
    waits = {k: sum(r[3] for r in v) for k, v in res.items()}
    return free, above, ns, lost, fbs, waits, full


def continuous_runs(n):
    """No pauses, nothing lost, nothing waiting: the flight recorder (nobody
    reads the ring; each hit overwrites the oldest records)."""
    path = os.path.join(SHM, "snap.usc")
    rec = [US, "record", "-q", "--snapshot", "4M", "-o", path, "-e", "inject"]
    t = {k: [] for k in ("free", "plain", "walk", "copy", "bare")}
    warm = 50000        # the ring's pages touched: 4 MiB of the smallest records
    for _ in range(REPS):
        t["free"].append(run(deep(n, warm, 0, 0))[0])
        t["plain"].append(run(rec + ["leaf", "--"] + deep(n, warm, 0, 0))[0])
        t["walk"].append(run(rec + ["leaf $ustack", "--"] + deep(n, warm, 0, 0))[0])
        t["copy"].append(run(rec + ["--stack-mode", "copy", "leaf $ustack", "--"] +
                             deep(n, warm, 0, 0))[0])
        t["bare"].append(run([MEMCOPY, str(n), "0", "0", str(warm), "8192"],
                             what="memcopy")[0])
    os.unlink(path)
    return {k: med(v) for k, v in t.items()}


def recorded_bytes(m=5000):
    """Bytes of $ustack a call in a recording, walked and copied: a
    recording with $ustack against one without (lossless, on tmpfs; entry
    and return records)."""
    size = {}
    for key, argv in (("plain", ["leaf"]), ("walk", ["leaf $ustack"]),
                      ("copy", ["--stack-mode", "copy", "leaf $ustack"])):
        path = os.path.join(SHM, f"{key}.usc")
        p = subprocess.run([US, "record", "--max-wait", "2s", "-o", path, "-e", "inject"] +
                           argv + ["--"] + deep(m, warm=0, gap=0),
                           capture_output=True, text=True, env=ENV)
        if p.returncode != 0 or summary(p.stderr) != (2 * m, 0):
            sys.exit(f"bench: record failed:\n{p.stderr[-1000:]}")
        size[key] = os.path.getsize(path)
        os.unlink(path)
    return {k: (size[k] - size["plain"]) / m for k in ("walk", "copy")}


def bpftrace_stacks(out):
    """bpftrace's printed stacks (a frame a line, indented; a blank line
    after each) -> [[frames]]"""
    stacks, cur = [], []
    for line in out.splitlines():
        if line.startswith((" ", "\t")) and line.strip():
            cur.append(line.strip())
        elif cur:
            stacks.append(cur)
            cur = []
    return stacks + ([cur] if cur else [])


CPU = {}     # kernel_runs: the median thread CPU time a call of each config


def kernel_runs(free):
    """(key, label, ns/call, ns a hit above the unprobed loop, hits kept,
    lost, (fallbacks, why)): the plain
    and walked probes the median of REPS (interleaved), the others one run;
    bpftrace's map and the frames it printed."""
    calls = N_PROBED + WARM
    bpf = [US, "count", "--json", "-e", "bpf"]
    # the target on one CPU, the same for every run: this VM's two CPUs take
    # a uprobe's trap ~5 us apart, which would decide the comparison
    pin = [shutil.which("taskset") or "/usr/bin/taskset", "-c", "0"]
    configs = (("bpf_plain", "count -e bpf 'leaf'", [f"{T}:leaf"], None, REPS),
               ("bpf_walk", "count -e bpf 'leaf $ustack' walked", [f"{T}:leaf $ustack"], SYMS,
                REPS),
               ("bpf_copy", "... --stack-mode copy (8 KiB a hit)",
                ["--stack-mode", "copy", f"{T}:leaf $ustack"], SYMS, 1))
    res = {k: [] for k, *_ in configs}
    for r in range(REPS):
        for key, label, argv, syms, reps in configs:
            if r >= reps:
                continue
            t, out, err = run(bpf + argv + ["--"] + pin + deep(N_PROBED))
            got = counted(out, syms=syms)
            if got > calls:
                sys.exit(f"bench: {key}: {got} hits counted of {calls} calls")
            res[key].append((t, got, calls - got, side(err)[0], cpu_ns(out)))
    rows = []
    for key, label, *_ in configs:
        v = res[key]
        CPU[key] = med([x[4] for x in v])
        rows.append((key, label, med([x[0] for x in v]),
                     med([per_hit(x[0], free, N_PROBED, x[2]) for x in v]), sum(x[1] for x in v),
                     sum(x[2] for x in v), (sum(x[3][0] for x in v),
                                            "; ".join(sorted({x[3][1] for x in v if x[3][1]})))))
    if not shutil.which("bpftrace"):
        rows.append(("bpftrace", "bpftrace", None, None, None, None, None))
        return rows, None, None
    r = run(["bpftrace", "-e", f"uprobe:{T}:leaf {{ @[ustack] = count(); }}",
             "-c", " ".join(pin + deep(N_PROBED))], what="bpftrace", peer=True)
    if not r:
        rows.append(("bpftrace", "bpftrace", "failed (above)", None, None, None, None))
        return rows, None, None
    t, out, _ = r
    bt_map = [([f.strip() for f in k.splitlines()], int(c))
              for k, c in re.findall(r"@\[\n(.*?)\n\]: (\d+)", out, re.S)]
    got = sum(c for _, c in bt_map)
    rows.append(("bpftrace", "bpftrace uprobe { @[ustack] = count() }", t,
                 per_hit(t, free, N_PROBED, calls - got), got, calls - got, (0, "")))
    # symbolized: printed while the process runs (the map is printed once
    # it has exited, when bpftrace can no longer read its maps)
    p = subprocess.run(["bpftrace", "-e", f"uprobe:{T}:leaf {{ printf(\"%s\\n\", ustack); }}",
                        "-c", " ".join(deep(2, warm=0, burst=1, gap=300))],
                       capture_output=True, text=True)
    got = bpftrace_stacks(p.stdout)
    return rows, bt_map, got[0] if got else []


def folded(engine, m):
    """count --folded of leaf's and cmp's stacks on stacks.c `mixed`:
    {stack: count}, fallbacks."""
    p = subprocess.run([US, "count", "--folded", "-e", engine, "leaf $ustack", "cmp $ustack",
                        "--", T, "mixed", str(m)], capture_output=True, text=True, env=ENV)
    if p.returncode != 0:
        sys.exit(f"bench: count --folded -e {engine} failed:\n{p.stderr[-2000:]}")
    out = {}
    for line in p.stdout.splitlines():
        m_ = re.match(r"^(\S.*) (\d+)$", line)
        if m_ and ";" in m_.group(1):
            out[m_.group(1)] = out.get(m_.group(1), 0) + int(m_.group(2))
    return out, side(p.stderr)[0]


def tracer_rate(m):
    """Stacks a second `trace -r` reads back, symbolizes and prints (-o
    /dev/null), the cache warm: a recording of m stacks against one of m/10
    (the difference leaves out start-up and the first read of debug info),
    less the same for recordings without $ustack; walked (addresses) and
    copied (uscope unwinds each)."""
    def rec(path, argv, n):
        p = subprocess.run([US, "record", "--max-wait", "2s", "-o", path, "-e", "inject"] +
                           argv + ["--"] + deep(n, warm=0, gap=0),
                           capture_output=True, text=True, env=ENV)
        if p.returncode != 0 or summary(p.stderr)[1]:
            sys.exit(f"bench: record failed:\n{p.stderr[-1000:]}")

    def read(path):
        best = None
        for _ in range(REPS):
            t0 = time.monotonic()
            p = subprocess.run([US, "trace", "-r", path, "-o", "/dev/null", "-q"],
                               capture_output=True, text=True)
            dt = time.monotonic() - t0
            if p.returncode != 0:
                sys.exit(f"bench: trace -r failed:\n{p.stderr[-1000:]}")
            best = dt if best is None else min(best, dt)
        return best

    t = {}
    for key, argv in (("walk", ["leaf $ustack"]), ("copy", ["--stack-mode", "copy",
                                                            "leaf $ustack"]),
                      ("plain", ["leaf"])):
        for n in (m, m // 10):
            path = os.path.join(SHM, f"{key}{n}.usc")
            rec(path, argv, n)
            t[key, n] = read(path)
            os.unlink(path)
    per = {k: ((t[k, m] - t[k, m // 10]) - (t["plain", m] - t["plain", m // 10])) /
           (m - m // 10) for k in ("walk", "copy")}
    return t, per


def section_inject():
    print(f"== 1. inject, $ustack on leaf ten frames deep (tests/targets/stacks.c deep: -O2 "
          f"-fomit-frame-pointer), {N} calls in bursts of {BURST}, {GAP_MS} ms apart, after "
          f"{WARM} untimed; median of {REPS}; losses, fallbacks and waits summed over the runs")
    free, above, ns, lost, fbs, waits, full = fast_runs()
    print(f"  {'':44} {'ns/call':>9} {'above':>8} {'ratio':>6} {'lost':>6} {'fallbk':>6} "
          f"{'waits':>6}")
    for key, label, pre in CONFIGS:
        a = "-" if key == "free" else f"{above[key]:8.1f}"
        tracer = pre is not None and pre != "copy"
        print(f"  {label:44} {ns[key]:9.1f} {a:>8} {ns[key] / free:6.1f} "
              f"{lost[key] if tracer else '-':>6} {fbs[key][0] if tracer else '-':>6} "
              f"{waits[key] if tracer else '-':>6}"
              f"{'  (no loop around it: above is the copy)' if key == 'bare' else ''}")
    for key in ("walk", "copy", "trace"):
        if fbs[key][1]:
            print(f"  {key}: fell back to a copy: {fbs[key][1]}")
    print("  (above: ns a hit above the unprobed loop, shared among the hits counted or "
          "recorded; waits: waits for room that ran out, --max-wait)")
    print(f"  hits that found the buffer full, the same runs with --drop (a hit that would "
          f"wait is dropped): walked {full['walk']}, copied {full['copy']}")
    walk, copy = above["walk"] - above["plain"], above["copy"] - above["plain"]
    print(f"  $ustack a hit above the plain probe: walked {walk:.1f} ns, copied "
          f"{copy:.1f} ns ({copy / walk if walk > 0 else float('inf'):.1f}x); the bare "
          f"8 KiB copy in the same bursts: {above['bare']:.1f} ns")
    ok = walk <= LIMIT_INJ_NS and lost["walk"] == 0 and waits["walk"] == 0 and full["walk"] == 0
    print(f"  target: count 'leaf $ustack' <= {LIMIT_INJ_NS} ns a hit above the plain probe, "
          f"0 lost, 0 waits: {walk:.1f} ns, {lost['walk']} lost, {waits['walk']} waits ran "
          f"out, {full['walk']} found the buffer full: {verdict(ok)}")
    return free


def section_continuous():
    nc = 5 * N
    c = continuous_runs(nc)
    print(f"== 2. the same without pauses, {nc} calls after 50000 untimed, every hit written: "
          f"the flight recorder (record --snapshot 4M, nobody reads; entry and return "
          f"records), median of {REPS}")
    print(f"  unprobed loop {c['free']:.1f} ns/call; 'leaf' {c['plain']:.1f} "
          f"(+{c['plain'] - c['free']:.1f}); 'leaf $ustack' walked {c['walk']:.1f} "
          f"(+{c['walk'] - c['free']:.1f}); copied {c['copy']:.1f} "
          f"(+{c['copy'] - c['free']:.1f}); the bare 8 KiB copy {c['bare']:.1f} ns")
    print(f"  $ustack alone: walked {c['walk'] - c['plain']:.1f} ns a hit, copied "
          f"{c['copy'] - c['plain']:.1f} ns")
    b = recorded_bytes()
    print(f"  bytes of $ustack a call in a recording: walked {b['walk']:.0f} "
          f"({len(SYMS) - 1} frames' addresses and their header), copied {b['copy']:.0f}")


def section_kernel(free):
    print(f"== 3. the kernel's, {N_PROBED} calls (same bursts, after {WARM} untimed); the plain "
          f"and walked probes median of {REPS}, the others one run")
    rows, bt_map, bt_frames = kernel_runs(free)
    print(f"  {'':44} {'ns/call':>9} {'above':>8} {'ratio':>6} {'lost':>6} {'fallbk':>6}")
    above = {}
    for key, label, t, a, got, lo, fb in rows:
        if t is None or isinstance(t, str):
            print(f"  {label:44} ({t or 'not installed'})")
            continue
        above[key] = a
        print(f"  {label:44} {t:9.1f} {above[key]:8.1f} {t / free:6.1f} {lo:>6} "
              f"{fb[0]:>6}  {got} hits counted in all{'; fell back: ' + fb[1] if fb[1] else ''}")
    d = (above["bpf_walk"] - above["bpf_plain"]) / 1e3
    print(f"  $ustack a hit above the plain bpf probe: walked {d:+.2f} us, copied "
          f"{(above['bpf_copy'] - above['bpf_plain']) / 1e3:.2f} us" +
          (f"; bpftrace's ustack {(above['bpftrace'] - above['bpf_plain']) / 1e3:.2f} us"
           if 'bpftrace' in above else ""))
    # the trap and the program run in the traced thread: its CPU time has
    # them, without the other tasks that take this 2-CPU VM's CPUs (the wall
    # time of a 20 us trap moves by microseconds from run to run)
    dc = (CPU["bpf_walk"] - CPU["bpf_plain"]) / 1e3
    print(f"  the same in the thread's CPU time a call: 'leaf' {CPU['bpf_plain']:.1f} ns, "
          f"'leaf $ustack' walked {CPU['bpf_walk']:.1f} ns: {dc:+.2f} us")
    lost = [r for r in rows if r[0] == "bpf_walk"][0][5]
    print(f"  target: bpf $ustack <= the kernel's trap (the plain bpf probe, "
          f"{CPU['bpf_plain'] / 1e3:.2f} us of CPU) + {LIMIT_BPF_US:.0f} us, in the thread's "
          f"CPU time: {dc:+.2f} us (wall: {d:+.2f}), {lost} lost: "
          f"{verdict(dc <= LIMIT_BPF_US and lost == 0)}")

    # uscope's frames for the same hit, read back from a recording
    path = os.path.join(SHM, "one.usc")
    p = subprocess.run([US, "record", "-q", "-o", path, "-e", "inject", "leaf $ustack", "--"] +
                       deep(1, warm=0, burst=0, gap=0), capture_output=True, text=True)
    out = subprocess.run([US, "trace", "-r", path, "-q"], capture_output=True, text=True).stdout
    ours = [line[4:] for line in out.splitlines() if line.startswith("    ")]
    if p.returncode != 0 or len(ours) != len(FRAMES) or \
            not all(f.startswith(w) for f, w in zip(ours, FRAMES)):
        sys.exit(f"bench: unexpected frames read back:\n{p.stderr}\n{out}")
    print("  the frames at leaf's entry:")
    print("    uscope $ustack (walked from the CFI's tables), read back from a recording:")
    for f in ours:
        print(f"      {f}")
    if bt_map is not None:
        print("    bpftrace ustack (frame pointers), symbolized while the process ran:")
        for f in bt_frames or ["(none)"]:
            print(f"      {f}")
        print(f"    bpftrace's map after {N_PROBED + WARM} calls, {len(bt_map)} distinct "
              f"stack(s) (printed once the process is gone: not symbolized): " +
              "; ".join(f"[{', '.join(k)}] x{n}" for k, n in bt_map))
        print("    (at leaf's first instruction rbp is outer's, which uses it for a "
              "value: the walk has no caller to go to)")


def section_folded():
    m = max(N_PROBED // 2, 16)
    inj, inj_fb = folded("inject", m)
    bpf, bpf_fb = folded("bpf", m)
    same = inj == bpf and bool(inj)
    print(f"== 4. counted stacks folded, inject against bpf: count --folded 'leaf $ustack' "
          f"'cmp $ustack' -- stacks mixed {m}")
    print(f"  inject: {len(inj)} stacks, {sum(inj.values())} hits (fell back: {inj_fb[0]}); "
          f"bpf: {len(bpf)} stacks, {sum(bpf.values())} hits (fell back: {bpf_fb[0]})")
    for k in sorted(set(inj) | set(bpf)):
        if inj.get(k) != bpf.get(k):
            print(f"    differ: inject {inj.get(k, 0)}, bpf {bpf.get(k, 0)}: {k}")
    print(f"  target: inject and bpf fold to identical stacks and counts: "
          f"{'identical' if same else 'not identical'}: {verdict(same)}")


def section_tracer():
    m = N // 2
    t, per = tracer_rate(m)
    print(f"== 5. the tracer's side: trace -r -o /dev/null of a recording of {m} stacks "
          f"(best of {REPS}), less one of {m // 10}, less the same without $ustack")
    for k, what in (("walk", "walked (addresses: symbolized, formatted)"),
                    ("copy", "copied (unwound by uscope, symbolized, formatted)")):
        print(f"  {what:52} {m} stacks {t[k, m]:.3f} s, {m // 10}: {t[k, m // 10]:.3f} s: "
              f"{1 / per[k] if per[k] > 0 else float('inf'):,.0f} stacks/s "
              f"({per[k] * 1e6:.2f} us a stack of {len(SYMS)} frames)")
    print(f"  (without $ustack: {t['plain', m]:.3f} s and {t['plain', m // 10]:.3f} s)")


def main():
    free = section_inject()
    section_continuous()
    section_kernel(free)
    section_folded()
    section_tracer()


try:
    main()
finally:
    shutil.rmtree(SHM, ignore_errors=True)
