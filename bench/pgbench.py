#!/usr/bin/env python3
"""make bench: Debian's PostgreSQL under pgbench -S, with PortalRun's latency
traced system-wide (a probe on the postgres file, neither -p nor COMMAND), on
each engine, side by side in one run (issue 27):
  - unprobed;
  - uscope latency -e inject POSTGRES:PortalRun     target: >= 0.9x the
    unprobed transactions a second;
  - the same on -e bpf and on -e tracefs (a kernel trap a hit).
A private cluster (initdb as the postgres user, in a temporary directory, on a
free port) runs from a copy of the postgres binary, so that the system-wide
probe sees only this cluster: another PostgreSQL on the machine (a test's,
another user's) is neither patched nor counted. pgbench connects after uscope
is ready: every backend that runs a query is forked after attach, and must be
traced.

Each round runs each engine once, in turn, with
pgbench -S -n -c 2 -j 2 -T SECS (KSECS on the kernel engines, whose hits trap:
10-14 us each), and an unprobed run after each: a ratio is the probed run's TPS
over the mean of the unprobed runs just before and after it, the median of the
rounds. Beside TPS, the backends' CPU time a transaction (the postmaster's
reaped children's: the probes' own cost, which another job on the machine
disturbs less than it does TPS). Every probed run's count of PortalRun calls
is checked against the transactions pgbench reports plus the PortalRun calls
of pgbench's own setup queries, measured first on each engine with -t and 1
and 2 clients (a run's and a connection's); its losses are shown. A count
that is neither fails the bench.

usage: pgbench.py USCOPE SECS KSECS REPS
Timings on a VM are noisy: read the ratios."""

import json
import os
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

US, SECS, KSECS, REPS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
CLIENTS = 2
SCALE = 1
TARGET = 0.9    # inject: at least this much of the unprobed TPS (issue 27)
ENGINES = ["inject", "bpf", "tracefs"]
READY = re.compile(r"^uscope: tracing \d+ \w+.*$", re.M)


def pg_bindir():
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / "postgres").exists() and (d / "initdb").exists() and shutil.which("pgbench"):
            return d
    return None


BIN = pg_bindir()
try:
    PW = pwd.getpwnam("postgres")
except KeyError:
    PW = None
if not BIN or not PW:
    print("== pgbench: PostgreSQL is not installed (apt-get install postgresql): skipped")
    sys.exit(0)

TMP = tempfile.mkdtemp(prefix="uscope-bench-pg-")
os.chown(TMP, PW.pw_uid, PW.pw_gid)
DATA = f"{TMP}/data"
# the cluster's own postgres: its directory is not named bin, so it finds its
# libraries and share files at the paths it was built with
POSTGRES = f"{TMP}/pgbin/postgres"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT = free_port()


def as_pg(*argv, timeout=300):
    return subprocess.run(["runuser", "-u", "postgres", "--"] + [str(a) for a in argv],
                          capture_output=True, text=True, timeout=timeout)


def must(cp, what):
    if cp.returncode != 0:
        sys.exit(f"bench: pgbench: {what} failed: {cp.stderr.strip()[-1000:]}")
    return cp


def start_cluster():
    os.mkdir(os.path.dirname(POSTGRES))
    shutil.copy(BIN / "postgres", POSTGRES)
    must(as_pg(BIN / "initdb", "-D", DATA, "-A", "trust", "--no-sync"), "initdb")
    log = open(f"{TMP}/log", "w")
    p = subprocess.Popen(["runuser", "-u", "postgres", "--", POSTGRES, "-D", DATA,
                          "-p", str(PORT), "-k", TMP, "-c", "listen_addresses=",
                          "-c", "fsync=off"],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while as_pg(BIN / "pg_isready", "-q", "-h", TMP, "-p", PORT).returncode != 0:
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            p.wait()
            sys.exit("bench: pgbench: postgres did not start: " +
                     Path(f"{TMP}/log").read_text()[-1000:])
        time.sleep(0.1)
    return p


def stop_cluster(p):
    as_pg(BIN / "pg_ctl", "-D", DATA, "-m", "fast", "-w", "stop", timeout=120)
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def stat(pid):
    """/proc/PID/stat's fields after the command's name (field 3 first)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def children(pid):
    out = set()
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and int(stat(d)[1]) == pid:
                out.add(int(d))
        except (OSError, IndexError):
            pass
    return out


def reaped_cpu(pid):
    """The CPU time, s, of PID's children that PID has waited for."""
    f = stat(pid)
    return (int(f[13]) + int(f[14])) / TICK


def pgbench(*args):
    """pgbench -S ARGS -> (transactions, TPS without the connections' time,
    the backends' CPU time a transaction, us: the postmaster's reaped
    children's, once the backends of the run have ended)."""
    before = children(PM)
    cpu0 = reaped_cpu(PM)
    cp = must(as_pg("pgbench", "-h", TMP, "-p", PORT, "-S", "-n", *args, "postgres"), "pgbench")
    tx = re.search(r"^number of transactions actually processed: (\d+)", cp.stdout, re.M)
    failed = re.search(r"^number of failed transactions: (\d+)", cp.stdout, re.M)
    tps = re.search(r"^tps = ([0-9.]+) \(without initial connection time\)", cp.stdout, re.M)
    if not tx or not tps or (failed and int(failed.group(1))):
        sys.exit(f"bench: pgbench said: {cp.stdout[-1000:]}")
    deadline = time.monotonic() + 30
    while children(PM) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    tx = int(tx.group(1))
    return tx, float(tps.group(1)), (reaped_cpu(PM) - cpu0) * 1e6 / max(tx, 1)


def traced(engine):
    """uscope latency -e ENGINE system-wide, ready: (process, stderr file,
    its readiness line)."""
    err = open(f"{TMP}/stderr", "w+")
    out = open(f"{TMP}/stdout", "w+")
    p = subprocess.Popen([US, "latency", "--json", "-e", engine, f"{POSTGRES}:PortalRun"],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    deadline = time.monotonic() + 60
    while True:
        err.seek(0)
        text = err.read()
        m = READY.search(text)
        if m:
            return p, out, err, m.group(0)
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            sys.exit(f"bench: pgbench: uscope latency -e {engine} did not attach:\n"
                     f"{text[-1000:]}")
        time.sleep(0.02)


def stop(p, out, err, engine):
    """SIGINT uscope -> (PortalRun calls counted, hits said lost, loss lines)."""
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(120)
    except subprocess.TimeoutExpired:
        p.kill()
        sys.exit(f"bench: pgbench: uscope latency -e {engine} did not end on SIGINT")
    out.seek(0)
    err.seek(0)
    rows, text = out.read(), err.read()
    out.close()
    err.close()
    if rc != 0:
        sys.exit(f"bench: pgbench: uscope latency -e {engine} exited {rc}:\n{text[-1000:]}")
    count = sum(r.get("count", 0) for r in map(json.loads, rows.splitlines())
                if r.get("final"))
    lines = [ln.strip() for ln in text.splitlines()
             if re.search(r"\d+ (hits |events )?lost", ln) and " 0 lost" not in ln]
    lost = sum(int(m.group(1)) for ln in lines
               for m in [re.search(r"(\d+) (hits |events )?lost", ln)] if m)
    return count, lost, lines


def probed(engine, *args):
    """pgbench -S ARGS under system-wide latency on ENGINE ->
    (transactions, TPS, CPU a transaction, count, lost, loss lines,
    readiness line)."""
    p, out, err, ready = traced(engine)
    try:
        tx, tps, cpu = pgbench(*args)
    except BaseException:
        p.send_signal(signal.SIGINT)    # no uscope left attached
        p.wait(120)
        raise
    count, lost, lines = stop(p, out, err, engine)
    return tx, tps, cpu, count, lost, lines, ready


TICK = os.sysconf("SC_CLK_TCK")
LOAD = open("/proc/loadavg").read().split()[0]
server = None
try:
    server = start_cluster()
    PM = int(Path(f"{DATA}/postmaster.pid").read_text().split()[0])
    must(as_pg("pgbench", "-h", TMP, "-p", PORT, "-i", "-s", SCALE, "-q", "postgres"),
         "pgbench -i")
    pgbench("-c", CLIENTS, "-j", CLIENTS, "-T", 2)     # warm: the tables in the cache
    version = as_pg(POSTGRES, "--version").stdout.strip()

    # pgbench's own PortalRun calls: -t 50 with 1 and 2 clients on each engine
    setup = {}
    wrong = []
    for e in ENGINES:
        got = {}
        for c in (1, 2):
            tx, _, _, count, lost, lines, _ = probed(e, "-c", c, "-j", c, "-t", 50)
            got[c] = count - tx
            if lost:
                wrong.append(f"setup -e {e} -c {c}: {'; '.join(lines)}")
        per_conn = got[2] - got[1]
        setup[e] = (got[1] - per_conn, per_conn)
    if len(set(setup.values())) != 1:
        wrong.append(f"pgbench's own PortalRun calls differ by engine: {setup}")
    per_run, per_conn = setup["inject"]
    extra = per_run + per_conn * CLIENTS

    # every probed run between two unprobed ones: U inject U bpf U tracefs U ...
    free = [pgbench("-c", CLIENTS, "-j", CLIENTS, "-T", SECS)]
    runs = {e: [] for e in ENGINES}     # [(tx, tps, cpu, count, lost, lines, ready, ratio)]
    for r in range(REPS):
        print(f"bench: pgbench: round {r + 1}", file=sys.stderr)
        for e in ENGINES:
            got = probed(e, "-c", CLIENTS, "-j", CLIENTS, "-T", SECS if e == "inject" else KSECS)
            free.append(pgbench("-c", CLIENTS, "-j", CLIENTS, "-T", SECS))
            tx, _, _, count, lost = got[:5]
            runs[e].append(got + (got[1] * 2 / (free[-2][1] + free[-1][1]),))
            if count + lost != tx + extra:
                wrong.append(f"round {r + 1}, -e {e}: {count} PortalRun counted, {lost} lost, "
                             f"for {tx} transactions + {extra} of pgbench's own")
finally:
    if server:
        stop_cluster(server)
    shutil.rmtree(TMP, ignore_errors=True)

med = statistics.median
print(f"== {version}: pgbench -S -n -c {CLIENTS} -j {CLIENTS} (scale {SCALE}), connected after "
      f"uscope is ready,\n   under system-wide `uscope latency -e ENGINE postgres:PortalRun`: "
      f"TPS of -T {SECS} s runs (kernel engines -T {KSECS} s),\n   {REPS} rounds; a ratio is "
      f"against the mean of the unprobed runs just before and after; load average {LOAD} at "
      f"the start")
print(f"  pgbench's own queries through PortalRun: {per_run} a run + {per_conn} a connection "
      f"(-t 50 with 1 and 2 clients; " +
      ", ".join(f"{e} {a}+{b}" for e, (a, b) in setup.items()) + ")")
print(f"  unprobed  TPS median {med(x[1] for x in free):.0f} ({min(x[1] for x in free):.0f}-"
      f"{max(x[1] for x in free):.0f}, {len(free)} runs); backends' CPU "
      f"{med(x[2] for x in free):.1f} us a transaction")
for e, rs in runs.items():
    procs = re.search(r" in (\d+ process\w*)", rs[0][6])
    print(f"  {e:9s} TPS {' '.join(f'{x[1]:.0f}' for x in rs)}: median ratio "
          f"{med(x[7] for x in rs):.2f}x ({' '.join(f'{x[7]:.2f}' for x in rs)}); backends' CPU "
          f"{med(x[2] for x in rs):.1f} us a transaction"
          f"{'; attached to ' + procs.group(1) if procs else ''}")
    print(f"            PortalRun counted {' '.join(str(x[3]) for x in rs)}, "
          f"{sum(x[4] for x in rs)} lost; pgbench's transactions "
          f"{' '.join(str(x[0]) for x in rs)} (+ {extra} each)")
    for x in rs:
        for ln in x[5]:
            print(f"      {ln}")
inj = med(x[7] for x in runs["inject"])
print(f"  target inject >= {TARGET}x the unprobed TPS: {inj:.2f}x, "
      f"{'MET' if inj >= TARGET else 'MISSED'}")
if wrong:
    for w in wrong:
        print(f"  WRONG: {w}")
    sys.stdout.flush()
    sys.exit("bench: pgbench: uscope's PortalRun count is not pgbench's")
