#!/usr/bin/env python3
"""Attach (and detach) latency. Starts TARGET (bench/gen_funcs.py's program:
it calls each of its functions every millisecond), then for each probe
pattern runs a session on it RUNS times.

Without --bpf: `uscope trace -e inject -p PID PATTERN`, timed from its start
to its readiness line ("uscope: tracing N probes" on stderr, printed once
every patch is in place and the process runs again): what a user waits for,
process start, symbol lookup and planning included. Each session is then
stopped with SIGINT and must have recorded events.

With --bpf: `uscope count -e bpf -p PID PATTERN`, timed to its readiness
line (attach) and then from SIGINT to its exit (detach: every uprobe
removed, the counts read and printed); every pattern's functions must have
been counted. Beside it, bpftrace on the same sites where it is installed
(`uprobe:TARGET:PATTERN { @[probe] = count(); }`, ready when its BEGIN
prints, which it runs once every probe is attached; its attach includes
compiling the script), BPFTRACE_RUNS times (1: it detaches a site at a
time).
usage: attach.py [--bpf] USCOPE TARGET RUNS PATTERN..."""
import os, re, shutil, signal, statistics, subprocess, sys, time

bpf = sys.argv[1] == "--bpf"
if bpf:
    del sys.argv[1]
us, target, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
patterns = sys.argv[4:]
limits = {1: 20, 1000: 200}	# the inject engine's targets, ms
BPF_LIMIT = 500			# attach + detach of 1,000 sites, ms


def wait_line(stream, prefix, what):
    """Read stream up to the line starting with prefix: that line."""
    line = ""
    for line in stream:
        if line.startswith(prefix):
            return line
    sys.exit(f"attach: no readiness line from {what}: {line.strip()}")


def inject_runs(tgt):
    for pattern in patterns:
        ready = []
        for _ in range(runs):
            t0 = time.monotonic()
            p = subprocess.Popen([us, "trace", "-e", "inject", "-o", "/dev/null", "-p",
                                  str(tgt.pid), pattern], stderr=subprocess.PIPE, text=True)
            line = wait_line(p.stderr, "uscope: tracing", pattern)
            ready.append((time.monotonic() - t0) * 1e3)
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


def peer_failed(what, err):
    """A peer tool (bpftrace) failed: one line; the bench goes on without it."""
    last = [l for l in err.splitlines() if l.strip()][-1:] or ["no output"]
    print(f"bench: {what} failed, left out: {last[0].strip()[:300]}", file=sys.stderr)


def timed(argv, ready_prefix, ready_stream, what, peer=False):
    """Start argv, wait for its readiness line, let it count, SIGINT it:
    (attach ms, detach ms, stdout); a peer's failure: None."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, BPFTRACE_MAX_PROBES="100000",
                                  BPFTRACE_MAX_BPF_PROGS="100000"))
    for line in getattr(p, ready_stream):
        if line.startswith(ready_prefix):
            break
    else:
        p.wait()
        err = p.stderr.read()
        if peer:
            return peer_failed(what, err)
        sys.exit(f"attach: no readiness line from {what}: {err.strip()[-500:]}")
    t1 = time.monotonic()
    time.sleep(0.1)
    t2 = time.monotonic()
    p.send_signal(signal.SIGINT)
    # bpftrace 0.17 misses a SIGINT now and then: say it again every 0.2 s
    # until it goes (its handler only sets a flag), so that its detach may
    # read up to 0.2 s long; uscope is told once (a second SIGINT is a
    # user's second Ctrl-C: it stops at once, a slow detach cut short)
    while True:
        try:
            out, err = p.communicate(timeout=0.2 if peer else None)
            break
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)
    t3 = time.monotonic()
    if p.returncode != 0 and peer:
        return peer_failed(what, err)
    if p.returncode != 0:
        sys.exit(f"attach: {what} failed ({p.returncode}): {err.strip()[-500:]}")
    return (t1 - t0) * 1e3, (t3 - t2) * 1e3, out


def counted(out, row):
    """The functions a run's output counted a hit of."""
    return {m.group(1) for m in re.finditer(row, out, re.M) if int(m.group(2)) > 0}


def expect(tgt, pattern, rows, what, peer=False):
    nm = subprocess.run(["nm", target], capture_output=True, text=True).stdout
    want = {l.split()[2] for l in nm.splitlines()
            if len(l.split()) == 3 and re.fullmatch(pattern.replace("*", ".*"), l.split()[2])}
    if rows != want and peer:
        return peer_failed(what, f"{pattern}: {len(rows)} of {len(want)} functions counted")
    if rows != want:
        sys.exit(f"attach: {what} {pattern}: {len(rows)} of {len(want)} functions counted")
    if tgt.poll() is not None:
        sys.exit("attach: the target died")
    return len(want)


def fmt(label, n, att, det):
    tot = [a + d for a, d in zip(att, det)]
    med = statistics.median
    verdict = ""
    if label == "uscope -e bpf" and n == 1000:
        verdict = f"  target <= {BPF_LIMIT} ms: {'MET' if med(tot) <= BPF_LIMIT else 'MISSED'}"
    print(f"  {label:14s} {n:5d} site{'s' if n > 1 else ' '}  attach {med(att):8.1f}  "
          f"detach {med(det):8.1f}  total {med(tot):8.1f} (min {min(tot):.1f}, max "
          f"{max(tot):.1f}, {len(tot)} run{'s' if len(tot) > 1 else ''}){verdict}")


def bpf_runs(tgt):
    bpftrace = shutil.which("bpftrace")
    bt_runs = int(os.environ.get("BPFTRACE_RUNS", "1"))
    for pattern in patterns:
        att, det = [], []
        for _ in range(runs):
            a, d, out = timed([us, "count", "-e", "bpf", "-p", str(tgt.pid), pattern],
                              "uscope: tracing", "stderr", f"uscope {pattern}")
            n = expect(tgt, pattern, counted(out, r"^(\S+)\s+(\d+)$"), "uscope")
            att.append(a)
            det.append(d)
        fmt("uscope -e bpf", n, att, det)
        if not bpftrace or bt_runs < 1:
            continue
        att, det = [], []
        for _ in range(bt_runs):
            r = timed([bpftrace, "-p", str(tgt.pid), "-e",
                       'BEGIN { printf("ready\\n"); } '
                       f'uprobe:{target}:{pattern} {{ @[probe] = count(); }}'],
                      "ready", "stdout", f"bpftrace {pattern}", peer=True)
            if not r:
                break
            a, d, out = r
            if not expect(tgt, pattern, counted(out, r"^@\[uprobe:[^:]*:(\S+)\]: (\d+)$"),
                          "bpftrace", peer=True):
                att = []
                break
            att.append(a)
            det.append(d)
        if not att:
            print(f"  {'bpftrace':14s} {n:5d} site{'s' if n > 1 else ' '}  (failed: above)")
            continue
        fmt("bpftrace", n, att, det)


target = os.path.realpath(target)
tgt = subprocess.Popen([target], stdin=subprocess.DEVNULL)
time.sleep(0.3)
try:
    bpf_runs(tgt) if bpf else inject_runs(tgt)
finally:
    tgt.kill()
    tgt.wait()
