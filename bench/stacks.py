#!/usr/bin/env python3
"""make bench: $ustack, the user stack at a hit. On tests/targets/stacks.c
`loop` (-O2 -fomit-frame-pointer: leaf <- mid [inlined] <- outer <- main),
side by side in one run, after an untimed run that warms the page cache and
uscope's first read of the debug info:
  - the unprobed loop;
  - uscope -e inject, the plain entry probe on leaf;
  - uscope -e inject 'leaf $ustack': the registers and 8 KiB of stack
    copied at each hit (a 16 KiB environment puts the stack's end that far:
    the copy stops there, and where the kernel starts the stack is random);
  - the copy alone: 8 KiB by rep movsb into a 4 MiB ring (bench/memcopy.c),
    what the memory costs whoever copies;
then the same without pauses, every hit kept: the flight recorder (record
--snapshot: nobody reads the ring, the oldest records are overwritten), with
and without $ustack (and its return probe both times); then the kernel's,
fewer calls (a uprobe costs microseconds): uscope -e bpf 'leaf $ustack' and
bpftrace's ustack (@[ustack] = count()), with the frames each got: bpftrace
walks frame pointers, which this code has not; last, the tracer's side:
stacks unwound, symbolized and formatted a second, reading a recording of
them with the cache warm.

The target calls leaf in bursts of BURST calls with an untimed pause after
each (the tracer drains its ring meanwhile: a hit dropped on a full ring
costs less than one recorded, and would flatter the figure), after WARM
untimed calls that touch the ring's pages once. ns a hit counts only the
hits recorded: each run's losses are shown, and a run's cost above the
unprobed loop is divided among the hits it recorded. The pauses cost the
calls after them: on a VM an idle vCPU's caches are cold again (the bare
copy shows by how much).

usage: stacks.py USCOPE STACKS N N_PROBED REPS (bench/memcopy.c is built here)
Timings on a VM are noisy: read the ratios."""

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
BURST, GAP_MS, WARM = 384, 30, 1536     # 384 stacks of 8 KiB fit the 4 MiB ring
SHM = tempfile.mkdtemp(prefix="uscope-bench-", dir="/dev/shm")
BIG_ENV = dict(os.environ, USCOPE_BENCH_PAD="x" * 16384)
MEMCOPY = os.path.join(SHM, "memcopy")
subprocess.run(["cc", "-O2", "-o", MEMCOPY,
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "memcopy.c")],
               check=True)
FRAMES = ["leaf+0x0", "mid [inlined]", "outer+", "main+", "__libc_start_call_main+",
          "__libc_start_main+", "_start+"]


def loop(n, warm=WARM, burst=BURST, gap=GAP_MS):
    return [T, "loop", str(n), str(burst), str(gap), str(warm)]


def run(argv, env=None, what=""):
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:8])}... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"ns_per_call ([0-9.]+)", p.stdout)
    if not m:
        sys.exit(f"bench: no timing from {what or argv[0]}:\n{p.stdout[-500:]}")
    return float(m.group(1)), p.stdout, p.stderr


def summary(stderr):
    m = re.search(r"uscope: (\d+) events, (\d+) lost", stderr)
    if not m:
        sys.exit(f"bench: no summary in:\n{stderr[-1000:]}")
    return int(m.group(1)), int(m.group(2))


def text_stacks(out):
    """uscope's text output -> [(event line, [frames])]"""
    evs = []
    for line in out.splitlines():
        if line.startswith("    "):
            evs[-1][1].append(line[4:])
        elif line.strip():
            evs.append((line, []))
    return evs


def check_frames(frames, what):
    if len(frames) != len(FRAMES) or not all(f.startswith(w) for f, w in zip(frames, FRAMES)):
        sys.exit(f"bench: {what}: unexpected frames:\n  " + "\n  ".join(frames))


def med(v):
    return statistics.median(v)


TRACE = [US, "trace", "-e", "inject", "-o", "/dev/null"]
CONFIGS = [
    # key, label, argv (None: the target alone; "copy": bench/memcopy.c)
    ("free", "unprobed loop (outer -> leaf)", None),
    ("plain", "uscope -e inject 'leaf'", TRACE + ["leaf"]),
    ("stack", "uscope -e inject 'leaf $ustack'", TRACE + ["leaf $ustack"]),
    ("copy", "the copy alone: 8 KiB rep movsb to a ring", "copy"),
]


def fast_runs():
    ns, lost = {k: [] for k, *_ in CONFIGS}, {k: 0 for k, *_ in CONFIGS}
    # untimed: the page cache, the debug info read once
    run(TRACE + ["leaf $ustack", "--"] + loop(N // 10), env=BIG_ENV)
    for _ in range(REPS):           # interleaved: drift hits them alike
        for key, _, pre in CONFIGS:
            if pre is None:
                ns[key].append((run(loop(N), env=BIG_ENV)[0], 0))
                continue
            if pre == "copy":
                argv = [MEMCOPY, str(N), str(BURST), str(GAP_MS), str(WARM), "8192"]
                ns[key].append((run(argv, what="memcopy")[0], 0))
                continue
            t, _, err = run(pre + ["--"] + loop(N), env=BIG_ENV)
            ev, lo = summary(err)
            if ev + lo != N + WARM:
                sys.exit(f"bench: {key}: {ev} events + {lo} lost, {N + WARM} calls")
            ns[key].append((t, lo))
            lost[key] += lo
    free = med([t for t, _ in ns["free"]])
    # above the unprobed call, shared among the hits recorded (every loss
    # counted as if timed)
    above = {k: med([(t - free) * N / (N - lo) for t, lo in v]) for k, v in ns.items()}
    above["copy"] = med([t for t, _ in ns["copy"]])     # no loop around it
    return free, above, lost, {k: med([t for t, _ in v]) for k, v in ns.items()}


def continuous_runs(n):
    """No pauses, nothing lost, nothing waiting: the flight recorder (nobody
    reads the ring; each hit overwrites the oldest records)."""
    path = os.path.join(SHM, "snap.usc")
    rec = [US, "record", "-q", "--snapshot", "4M", "-o", path, "-e", "inject"]
    t = {k: [] for k in ("free", "plain", "stack", "copy")}
    warm = 50000        # the ring's pages touched: 4 MiB of the smallest records
    for _ in range(REPS):
        t["free"].append(run(loop(n, warm, 0, 0), env=BIG_ENV)[0])
        t["plain"].append(run(rec + ["leaf", "--"] + loop(n, warm, 0, 0), env=BIG_ENV)[0])
        t["stack"].append(run(rec + ["leaf $ustack", "--"] + loop(n, warm, 0, 0),
                              env=BIG_ENV)[0])
        t["copy"].append(run([MEMCOPY, str(n), "0", "0", str(warm), "8192"],
                             what="memcopy")[0])
    os.unlink(path)
    return {k: med(v) for k, v in t.items()}


def copied_bytes(env=None, m=5000):
    """Bytes of stack copied a hit: a recording with $ustack against one
    without (lossless, on tmpfs)."""
    a, b = os.path.join(SHM, "s.usc"), os.path.join(SHM, "p.usc")
    for path, probe in ((a, "leaf $ustack"), (b, "leaf")):
        p = subprocess.run([US, "record", "--max-wait", "2s", "-o", path, "-e", "inject", probe, "--"] +
                           loop(m, warm=0, gap=0), capture_output=True, text=True, env=env)
        if p.returncode != 0 or summary(p.stderr) != (2 * m, 0):
            sys.exit(f"bench: record failed:\n{p.stderr[-1000:]}")
    n = (os.path.getsize(a) - os.path.getsize(b)) / m
    os.unlink(a)
    os.unlink(b)
    return n


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


def kernel_runs():
    rows = []
    t, _, err = run([US, "trace", "-e", "bpf", "-o", "/dev/null", "leaf $ustack", "--"] +
                    loop(N_PROBED), env=BIG_ENV)
    ev, lo = summary(err)
    rows.append(("uscope -e bpf 'leaf $ustack'", t, ev, lo))
    if not shutil.which("bpftrace"):
        rows.append(("bpftrace", None, None, None))
        return rows, None, None
    t, out, _ = run(["bpftrace", "-e", f"uprobe:{T}:leaf {{ @[ustack] = count(); }}",
                     "-c", " ".join(loop(N_PROBED))], env=BIG_ENV, what="bpftrace")
    bt_map = [([f.strip() for f in k.splitlines()], int(c))
              for k, c in re.findall(r"@\[\n(.*?)\n\]: (\d+)", out, re.S)]
    rows.append(("bpftrace uprobe { @[ustack] = count() }", t, sum(c for _, c in bt_map), 0))
    # symbolized: printed while the process runs (the map is printed once
    # it has exited, when bpftrace can no longer read its maps)
    p = subprocess.run(["bpftrace", "-e", f"uprobe:{T}:leaf {{ printf(\"%s\\n\", ustack); }}",
                        "-c", " ".join(loop(2, warm=0, burst=1, gap=300))],
                       capture_output=True, text=True)
    got = bpftrace_stacks(p.stdout)
    return rows, bt_map, got[0] if got else []


def unwind_rate(m):
    """Stacks a second `trace -r` unwinds, symbolizes and prints (-o
    /dev/null), the cache warm: a recording of m stacks against one of m/10
    (the difference leaves out start-up and the first read of debug info),
    less the same for recordings without $ustack."""
    def rec(path, probe, n):
        p = subprocess.run([US, "record", "--max-wait", "2s", "-o", path, "-e", "inject", probe, "--"] +
                           loop(n, warm=0, gap=0), capture_output=True, text=True,
                           env=BIG_ENV)
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
    for probe, key in (("leaf $ustack", "s"), ("leaf", "p")):
        for n in (m, m // 10):
            path = os.path.join(SHM, f"{key}{n}.usc")
            rec(path, probe, n)
            t[key, n] = read(path)
            os.unlink(path)
    per = ((t["s", m] - t["s", m // 10]) - (t["p", m] - t["p", m // 10])) / (m - m // 10)
    return t, per


def main():
    print(f"== $ustack on leaf (tests/targets/stacks.c loop: -O2 -fomit-frame-pointer), "
          f"{N} calls in bursts of {BURST}, {GAP_MS} ms apart, after {WARM} untimed; "
          f"median of {REPS}")
    free, above, lost, ns = fast_runs()
    copied = copied_bytes(BIG_ENV)
    notes = {"stack": f"{copied:.0f} bytes of stack a hit in the record",
             "copy": "(no loop around it: above is the copy's)"}
    print(f"  {'':42} {'ns/call':>9} {'above':>8} {'ratio':>7} {'lost':>6}")
    for key, label, _ in CONFIGS:
        a = above.get(key)
        print(f"  {label:42} {ns[key]:9.1f} {'-' if key == 'free' else f'{a:8.1f}':>8} "
              f"{ns[key] / free:7.1f} {lost[key] if key in ('plain', 'stack') else '-':>6}  "
              f"{notes.get(key, '')}")
    print(f"  $ustack alone (above the plain probe): {above['stack'] - above['plain']:.1f} ns "
          f"a hit; the bare copy in the same bursts: {above['copy']:.1f} ns")
    ok = "MET" if above["stack"] <= 150 else "MISSED"
    print(f"  target: an entry probe with $ustack <= 150 ns a hit above the unprobed call: "
          f"{above['stack']:.1f} ns, {ok}")

    nc = 5 * N
    c = continuous_runs(nc)
    print(f"== the same without pauses, {nc} calls after 50000 untimed, every hit written: "
          f"the flight recorder (record --snapshot 4M, nobody reads; entry and return "
          f"probes), median of {REPS}")
    print(f"  unprobed loop {c['free']:.1f} ns/call; 'leaf' {c['plain']:.1f} "
          f"(+{c['plain'] - c['free']:.1f}); 'leaf $ustack' {c['stack']:.1f} "
          f"(+{c['stack'] - c['free']:.1f}); the bare 8 KiB copy {c['copy']:.1f} ns")
    print(f"  $ustack alone: {c['stack'] - c['plain']:.1f} ns a hit")

    print(f"== the kernel's, {N_PROBED} calls (same bursts, after {WARM} untimed)")
    rows, bt_map, bt_frames = kernel_runs()
    for label, t, ev, lo in rows:
        if t is None:
            print(f"  {label:42} (not installed)")
            continue
        print(f"  {label:42} {t:9.1f} {t - free:8.1f} {t / free:7.1f} {lo:>6}  "
              f"{ev} hits counted")

    # uscope's frames for the same hit, read back from a recording
    path = os.path.join(SHM, "one.usc")
    p = subprocess.run([US, "record", "-q", "-o", path, "-e", "inject", "leaf $ustack", "--"] +
                       loop(1, warm=0, burst=0, gap=0), capture_output=True, text=True)
    out = subprocess.run([US, "trace", "-r", path, "-q"], capture_output=True, text=True).stdout
    ours = [fr for _, fr in text_stacks(out) if fr]
    if p.returncode != 0 or len(ours) != 1:
        sys.exit(f"bench: no stack read back:\n{p.stderr}\n{out}")
    check_frames(ours[0], "uscope")
    print("  the frames at leaf's entry:")
    print("    uscope $ustack (the CFI), read back from a recording:")
    for f in ours[0]:
        print(f"      {f}")
    if bt_map is not None:
        print("    bpftrace ustack (frame pointers), symbolized while the process ran:")
        for f in bt_frames or ["(none)"]:
            print(f"      {f}")
        print(f"    bpftrace's map after {N_PROBED + WARM} hits, {len(bt_map)} distinct "
              f"stack(s) (printed once the process is gone: not symbolized): " +
              "; ".join(f"[{', '.join(k)}] x{n}" for k, n in bt_map))
        print("    (at leaf's first instruction rbp is outer's, which uses it for a "
              "value: the walk has no caller to go to)")

    m = N // 2
    t, per = unwind_rate(m)
    print(f"== the tracer's side: trace -r of a recording of {m} stacks, -o /dev/null "
          f"(best of {REPS})")
    print(f"  {m} stacks {t['s', m]:.3f} s, {m // 10}: {t['s', m // 10]:.3f} s; without "
          f"$ustack {t['p', m]:.3f} s and {t['p', m // 10]:.3f} s")
    print(f"  unwound, symbolized and formatted, the cache warm: {1 / per:,.0f} stacks/s "
          f"({per * 1e6:.2f} us a stack of {len(FRAMES)} frames)")


try:
    main()
finally:
    shutil.rmtree(SHM, ignore_errors=True)
