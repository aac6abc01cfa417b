#!/usr/bin/env python3
"""The README's tour, on every engine: the kernel matrix's checks (tests/vm).

Run inside each guest by tests/vm/guest.sh, and on the host by the driver
(tests/vm/test_vm.py) to know which checks the host passes. Only the standard
library: the guest's root has python3.11 and little else.

    python3 tests/vm/checks.py [--engines inject,tracefs,bpf,auto] [--only NAME,...]

Each check is one example of the tour (trace, count by key, latency, flow,
$ustack, record/report, py:, Go, -p, system-wide, script) run through the real CLI
with -e ENGINE, its output asserted exactly where the target makes it exact.
One line a check:

    CHECK <name> <engine> PASS|FAIL|REFUSED <seconds>

then, for FAIL and REFUSED, the command, its exit status and its output,
each line indented by four spaces. REFUSED: uscope exited 1 before tracing,
with one line on stderr (the engine cannot take the probe, or cannot
load), which is kept as the line after the status line, prefixed `why: `.
"""

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
T = REPO / "tests" / "targets" / "bin"
USCOPE = os.environ.get("USCOPE", str(REPO / "uscope"))
TIMEOUT = int(os.environ.get("USCOPE_VM_TIMEOUT", "180"))


class Refused(Exception):
    pass


class Failed(Exception):
    pass


def stuck(p, argv):
    """What a command that did not finish was doing (its processes, their
    kernel stacks): then it is killed, with its process group."""
    out = [f"$ {' '.join(argv)}", f"did not finish in {TIMEOUT} s; the processes:"]
    ps = subprocess.run(["ps", "-eo", "pid,ppid,stat,wchan:32,args"], capture_output=True,
                        text=True).stdout
    out += [l for l in ps.splitlines() if "[" not in l]
    for pid in [l.split()[0] for l in ps.splitlines()[1:] if "[" not in l]:
        try:
            stack = open(f"/proc/{pid}/stack").read().strip()
        except OSError:
            continue
        if stack:
            out.append(f"-- {pid}'s kernel stack:\n{stack}")
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    o, e = p.communicate()
    return "\n".join(out) + f"\n{o}{e}"


def run(args, **kw):
    """uscope ARGS: (stdout, stderr); an exit status of 1 before the
    readiness line is a refusal, any other failure a failure."""
    p = subprocess.Popen([USCOPE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failed(stuck(p, [USCOPE, *args]))
    ctx = f"$ uscope {' '.join(args)}\nexit {p.returncode}\n{out}{err}"
    if p.returncode:
        refused(p.returncode, err, ctx)
        raise Failed(ctx)
    return out, err, ctx


def refused(rc, err, ctx):
    lines = [l for l in err.splitlines() if l.strip()]
    if rc == 1 and len(lines) == 1 and lines[0].startswith("uscope: ") and \
            not lines[0].startswith("uscope: tracing"):
        raise Refused(lines[0] + "\n" + ctx)


def want(cond, ctx, what):
    if not cond:
        raise Failed(f"{what}\n{ctx}")


def jlines(out):
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def c_trace(e):
    out, err, ctx = run(["trace", "--json", "-e", e,
                         "handle id=+0($arg1):s32 path=+0(+8($arg1)):string size=+16($arg1):s64",
                         "r:handle cost=$retval:s64", "--", str(REPO / "build/demo/server"), "4"])
    ev = jlines(out)
    ent = [x["args"] for x in ev if x["event"] == "handle"]
    ret = [x for x in ev if x["event"] == "handle__return"]
    want(ent == [{"id": 0, "path": "/index.html", "size": 1024},
                 {"id": 1, "path": "/api/users", "size": 2048},
                 {"id": 2, "path": "/img/logo.png", "size": 3072},
                 {"id": 3, "path": "/api/orders?id=42", "size": 4096}], ctx, "the entries")
    want(len(ret) == 4, ctx, "4 returns")
    want("uscope: 8 events, 0 lost" in err, ctx, "8 events, 0 lost")


def rows(out):
    return {tuple(sorted(r["key"].items())): r["count"] for r in jlines(out)}


def c_count(e):
    out, err, ctx = run(["count", "--json", "-e", e, "lookup name=$arg1:string", "--",
                         str(T / "aggapp"), "names"])
    r = rows(out)
    want(r.get((("name", "alpha"),)) == 3 and r.get((("name", "beta"),)) == 2 and
         r.get((("name", "gamma"),)) == 1 and r.get((("name", "gadget"),)) == 1 and
         sum(r.values()) == 8, ctx, "alpha 3, beta 2, gamma 1, gadget 1, the long one 1")


def c_latency(e):
    out, err, ctx = run(["latency", "--json", "-e", e, "--unit", "us", "nap", "--",
                         str(T / "aggapp"), "sleep"])
    r = jlines(out)
    # a guest's sleeps run long, never short
    want(len(r) == 1 and r[0]["count"] == 6 and r[0]["min"] >= 600 and r[0]["max"] >= 12000,
         ctx, "6 calls, from 600 us, one of 12 ms or more")


def c_flow(e):
    out, err, ctx = run(["flow", "--json", "-e", e, "-q", "fib", "--", str(T / "flowfib"), "3"])
    ev = [(x["type"], x["depth"]) for x in jlines(out)]
    want(ev == [("entry", 0), ("entry", 1), ("entry", 2), ("return", 2), ("entry", 2),
                ("return", 2), ("return", 1), ("entry", 1), ("return", 1), ("return", 0)],
         ctx, "fib(3)'s calls, nested")


def c_ustack(e):
    out, err, ctx = run(["count", "-e", e, "--folded", "leaf $ustack", "--",
                         str(T / "stacks"), "mixed", "16"])
    got = sorted(l for l in out.splitlines() if ";" in l)
    want(got == ["_start;__libc_start_main;__libc_start_call_main;main;d4;d3;d2;d1;outer;mid;leaf 16",
                 "_start;__libc_start_main;__libc_start_call_main;main;outer;mid;leaf 16"],
         ctx, "the two stacks, 16 each")


def c_record(e):
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "app.usc")
        out, err, ctx = run(["record", "-e", e, "-o", f, "deep", "nap", "--",
                             str(T / "aggapp"), "rec"])
        want("uscope: 10 events, 0 lost" in err, ctx, "10 events, 0 lost")
        fo = os.path.join(d, "app.folded")
        out, err, ctx2 = run(["export", "-r", f, "--format", "folded", "-o", fo, "-q"])
        out = Path(fo).read_text()
        stacks = sorted(l.rsplit(" ", 1)[0] for l in out.splitlines() if l.strip())
        want(stacks == ["deep", "deep;deep", "deep;deep;deep", "deep;deep;deep;deep",
                        "deep;deep;deep;deep;nap"], ctx + ctx2, "the recursion, folded")


def c_python(e):
    py = "/usr/bin/python3.11"
    if not os.path.exists(py):
        py = shutil.which("python3.11")
    if not py:
        raise Failed("no python3.11")
    out, err, ctx = run(["count", "--json", "-e", e, "py:__main__:*", "--", py,
                         str(REPO / "tests/targets/pycalls.py"), "plain"])
    r = {x["key"]["function"]: x["count"] for x in jlines(out)}
    want(r.get("__main__:Account.add") == 67 and r.get("__main__:Account.__init__") == 61 and
         r.get("__main__:recurse") == 26, ctx, "Account.add 67, Account.__init__ 61, recurse 26")


def c_go(e):
    out, err, ctx = run(["trace", "--json", "-e", e, "main.(*Controller).syncDeployment $params",
                         "main.check $params", "--", str(T / "goctl"), "2"])
    ev = jlines(out)
    sync = [(x["args"]["key"], x["args"]["replicas"]) for x in ev
            if x["event"] == "main.(*Controller).syncDeployment"]
    chk = [x["args"]["err"] for x in ev if x["event"] == "main.check"]
    want(sync == [("deploy-1", 1), ("deploy-2", 2)] and len(chk) == 2 and chk[0] is None and
         chk[1]["type"] == "*main.roundError", ctx, "two syncs, two checks")


def c_pid(e):
    p = subprocess.Popen([str(T / "spin")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        if not select.select([p.stdout], [], [], TIMEOUT)[0]:
            raise Failed("spin did not start")
        p.stdout.readline()	# ready
        out, err, ctx = run(["trace", "--json", "-e", e, "-p", str(p.pid),
                             "tick n=$arg1:s32", "-d", "3"])
    finally:
        p.kill()
        p.wait()
    n = [x["args"]["n"] for x in jlines(out)]
    want(len(n) >= 3 and n == list(range(n[0], n[0] + len(n))) and
         all(x["pid"] == p.pid for x in jlines(out)), ctx, "consecutive ticks of the process")


def c_system(e):
    """System-wide: a copy of aggapp of the check's own (so no other
    process's calls count), run twice once uscope is ready."""
    with tempfile.TemporaryDirectory() as d:
        app = os.path.join(d, "aggapp")
        shutil.copy(T / "aggapp", app)
        args = ["count", "--json", "-e", e, f"{app}:lookup name=$arg1:string"]
        u = subprocess.Popen([USCOPE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        try:
            if not select.select([u.stderr], [], [], TIMEOUT)[0]:
                raise Failed(stuck(u, [USCOPE, *args]))
            line = u.stderr.readline()
            if not line.startswith("uscope: tracing"):
                out, rest = u.communicate(timeout=TIMEOUT)
                ctx = f"$ uscope {' '.join(args)}\nexit {u.returncode}\n{out}{line}{rest}"
                refused(u.returncode, line + rest, ctx)
                raise Failed(ctx)
            for _ in range(2):
                subprocess.run([app, "names"], stdout=subprocess.DEVNULL, timeout=TIMEOUT,
                               check=True)
            u.send_signal(signal.SIGINT)
            try:
                out, rest = u.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                raise Failed(stuck(u, [USCOPE, *args]))
        finally:
            if u.poll() is None:
                u.kill()
                u.wait()
        ctx = f"$ uscope {' '.join(args)}\nexit {u.returncode}\n{out}{line}{rest}"
        r = rows(out)
        want(u.returncode == 0 and r.get((("name", "alpha"),)) == 6 and
             r.get((("name", "beta"),)) == 4 and sum(r.values()) == 16, ctx,
             "two runs' calls: alpha 6, beta 4, 16 in all")


def c_script(e):
    """uscope script (bpftrace's language): its own program per engine, in
    the kernel on bpf (an object of its own, loaded by this kernel)."""
    app = T / "scriptapp"
    out, err, ctx = run(["script", "-e", e, "-q", "-x",
                         f"uprobe:{app}:work /arg1 >= 4/ {{ @[arg0] = sum(arg1); }} "
                         f"uretprobe:{app}:work {{ @r = count(); }}", "--", str(app), "keys", "10"])
    got = [l for l in out.splitlines() if l.startswith("@")]
    want(sorted(got) == ["@[0]: 5", "@[1]: 6", "@[2]: 7", "@[3]: 8", "@[4]: 13", "@r: 10"],
         ctx, "@[0..4] summed, 10 returns")


CHECKS = {"trace": c_trace, "count": c_count, "latency": c_latency, "flow": c_flow,
          "ustack": c_ustack, "record": c_record, "python": c_python, "go": c_go,
          "pid": c_pid, "system": c_system, "script": c_script}
ENGINES = ["inject", "tracefs", "bpf", "auto"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--only", default=",".join(CHECKS))
    a = ap.parse_args()
    for e in a.engines.split(","):
        for name in a.only.split(","):
            t0 = time.monotonic()
            why = ctx = ""
            try:
                CHECKS[name](e)
                st = "PASS"
            except Refused as x:
                st = "REFUSED"
                why, _, ctx = str(x).partition("\n")
            except Failed as x:
                st, ctx = "FAIL", str(x)
            except Exception as x:  # a timeout, a target that did not start
                st, ctx = "FAIL", f"{type(x).__name__}: {x}"
            print(f"CHECK {name} {e} {st} {time.monotonic() - t0:.1f}", flush=True)
            if why:
                print(f"why: {why}")
            for l in ctx.splitlines()[:60]:
                print("    " + l)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
