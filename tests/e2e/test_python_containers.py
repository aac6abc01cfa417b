"""CPython in containers, and the real 3.14 and 3.15 (issue 38).

A container is made as people make one by hand, no runtime: a Debian root
made by debootstrap (scripts/roots.sh: cached under /var/cache/uscope, made
in about a minute on a fresh machine) run in a PID and mount namespace of
its own,

    unshare -p -f -m --mount-proc=ROOT/proc chroot ROOT python3.X app.py

and uscope is pointed at the interpreter's host pid. The Pythons:

  sid-3.14, sid-3.15   Debian unstable's python3.14 and python3.15 (built
                       without --enable-shared: the runtime in the
                       executable; glibc 2.43, whose struct pthread uscope
                       has not read: a thread's state from the thread list)
  bullseye-3.9         Debian 11's python3.9 (PyFrameObjects; glibc 2.31)
  host-3.11            the host's own python3.11, in a PID and mount
                       namespace of its own (unshare -p -f -m --mount-proc)

Checked against what the interpreter says of itself in the same run:
counts of named functions against its own sys.monitoring tool (3.12 on) or
sys.setprofile (before), $pystack against traceback.extract_stack() at a
native probe (inject and bpf), arguments and returns, flow, latency,
record; -p attached, then left with no tool of ours behind. 3.14 and 3.15
also as COMMAND (`-- chroot ROOT python3.X app.py`, and through unshare),
and system-wide with --root ROOT.

The test files are copied into a directory of the root's /tmp of this run
(the container sees them there) and removed at the end."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import uscope_e2e as u
from test_python import workload_stacks
from test_python_versions import TOOLS_SCRIPT, json_lines, py_rows

REPO = Path(__file__).resolve().parents[2]
# case -> (the Debian suite of its root, or None: the host's; its python)
CASES = {
    "sid-3.14": ("sid", "python3.14"),
    "sid-3.15": ("sid", "python3.15"),
    "bullseye-3.9": ("bullseye", "python3.9"),
    "host-3.11": (None, "/usr/bin/python3.11"),
}
SID = ["sid-3.14", "sid-3.15"]
ROOT_PKGS = {"sid": ["python3.14", "python3.15"], "bullseye": ["python3.9"]}
FILES = ["pycalls.py", "pystack.py"]

_roots = {}


def root_of(suite):
    """The cached root of a suite (made once, about a minute), or skip."""
    if suite not in _roots:
        p = subprocess.run([str(REPO / "scripts/roots.sh"), suite] + ROOT_PKGS[suite],
                           capture_output=True, text=True, timeout=900)
        _roots[suite] = Path(p.stdout.strip()) if p.returncode == 0 else None
        if p.returncode:
            _roots[suite + "-why"] = p.stderr.strip().splitlines()[-1:]
    if not _roots[suite]:
        pytest.skip(f"no {suite} root: {_roots.get(suite + '-why')}")
    return _roots[suite]


@pytest.fixture(scope="module")
def work(targets_built):
    """-> case -> (root or None, python, the directory of the test files as
    the interpreter names it, as the host does). The files are copied into
    each root's /tmp, removed at the end."""
    made = []

    def get(case):
        suite, py = CASES[case]
        if suite is None and not Path(py).exists():
            pytest.skip(f"no {py} here")
        root = root_of(suite) if suite else None
        inside = f"/tmp/uscope-e2e-py-{os.getpid()}"
        host = (root / inside.lstrip("/")) if root else Path(inside)
        if not host.exists():
            host.mkdir(parents=True)
            made.append(host)
            for f in FILES:
                shutil.copy(u.TARGETS / f, host / f)
            shutil.copy(u.target("libpymark.so"), host / "libpymark.so")
        return root, py, inside, host
    yield get
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


class Container:
    """python ARGV in a PID and mount namespace of its own: chrooted into
    root, or the host's files (root None). .pid: the interpreter's host
    pid (PID 1 inside)."""

    def __init__(self, root, py, argv):
        cmd = ["unshare", "-p", "-f", "-m"] + \
            ([f"--mount-proc={root}/proc", "chroot", str(root)] if root else ["--mount-proc"]) + \
            [py] + [str(a) for a in argv]
        self.t = u.Target(cmd)
        self.pid = None
        try:
            self.t.expect("ready")
            kids = Path(f"/proc/{self.t.pid}/task/{self.t.pid}/children").read_text().split()
            assert len(kids) == 1, kids
            self.pid = int(kids[0])
            line = [l for l in Path(f"/proc/{self.pid}/status").read_text().splitlines()
                    if l.startswith("NSpid:")][0]
            assert line.split()[-1] == "1", line    # the namespace's init
        except BaseException:
            self.close()
            raise

    def say(self, line):
        self.t.write(line + "\n")

    def close(self):
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)  # the namespace ends with its init
            except ProcessLookupError:
                pass
        if self.t.alive():
            self.t.kill()
        self.t.wait()


@pytest.fixture
def container(work):
    started = []

    def start(case, argv):
        root, py, inside, _ = work(case)
        c = Container(root, py, [a.format(dir=inside) for a in argv])
        started.append(c)
        return c
    yield start
    for c in started:
        c.close()


def read_all(t):
    """Everything t prints until it exits."""
    text = t._buf + t.p.stdout.read()
    t._buf = b""
    return text.decode()


def minor(case):
    return int(CASES[case][1].rsplit(".", 1)[1])


def tools(c):
    c.say("tools")
    line = c.t.readline()
    assert line.startswith("tools "), line
    return json.loads(line[6:])


def armed(c, case):
    """-p: once the main thread has run Python since the attach, py: probes
    are in (3.12 on: our sys.monitoring tool, set by the pending call)."""
    for _ in range(300):
        t = tools(c)
        if minor(case) < 12 or "uscope" in t:
            return
        time.sleep(0.01)
    raise AssertionError(f"no tool of ours: {t}")


def own_and_rows(case, c, bg):
    """The workload's own counts of its run, and uscope's rows."""
    c.say("go")
    line = c.t.readline()
    assert line.startswith("own "), line
    own = json.loads(line[4:])
    bg.signal(signal.SIGINT)
    r = bg.result()
    assert r.rc == 0, r.stderr
    got = py_rows(r.stdout)
    # the function that counts, called before its own counting was set
    got.pop("monitored" if minor(case) >= 12 else "profiled", None)
    return own, got


# ---- by host pid ---------------------------------------------------------------------

@pytest.mark.parametrize("case", list(CASES))
def test_count_by_host_pid(case, container, monkeypatch):
    """-p HOSTPID of a CPython in a container: every call of the workload's
    functions, as many as its own count of the same run (sys.monitoring
    from 3.12, sys.setprofile before)."""
    if case == "host-3.11":
        # Debian's 3.11.2 counts through the profile function unless asked
        # (its evaluator misses gh-104405's calls: doc/python.md), and the
        # workload's own sys.setprofile would take that one's place: the
        # evaluator, asked for (the workload has no __getitem__ in Python)
        monkeypatch.setenv("USCOPE_PY_PROFILE", "0")
    c = container(case, ["{dir}/pycalls.py", "serve"])
    bg = u.Background(["count", "--json", "-p", c.pid, "py:__main__:*"])
    bg.wait_ready()
    armed(c, case)
    own, got = own_and_rows(case, c, bg)
    assert own["recurse"] == 26 and own[qual(case, "Account.add")] == 67, own
    assert got == own
    c.say("end")
    assert c.t.wait() == 0


def qual(case, q):
    return q if minor(case) >= 11 else q.rsplit(".", 1)[-1]


@pytest.mark.parametrize("engine", ["inject", "bpf"])
@pytest.mark.parametrize("case", list(CASES))
def test_pystack_by_host_pid(case, engine, container, tmp_path):
    """$pystack at a native probe in a container's CPython, by its host pid:
    the frames traceback.extract_stack() takes at the same point (20 of
    them, in four threads), each event's thread by its TID inside; and the
    same frames spliced into $ustack."""
    c = container(case, ["{dir}/pystack.py", "{dir}/libpymark.so", "first"])
    out = tmp_path / "ev.json"
    bg = u.Background(["trace", "--json", "-o", str(out), "-e", engine, "-p", c.pid,
                       "libpymark:pymark tag=$arg1:s32 $pystack:128 $ustack:128"])
    bg.wait_ready()
    c.say("go")
    # its 20 checkpoints' events; then it prints its stacks, and waits on
    # stdin (uscope names the frames' code objects from its memory)
    for _ in range(3000):
        if out.exists() and out.read_text().count("\n") >= 20:
            break
        time.sleep(0.01)    # (a bounded poll of uscope's output file)
    bg.signal(signal.SIGINT)
    assert bg.wait() == 0, bg.stderr
    # $ustack walked where the probe runs, as on the host (the agent knows
    # its process by the pid it has inside): no copy of the stack
    assert "fell back" not in bg.stderr, bg.stderr
    c.t.close_stdin()
    want = workload_stacks(read_all(c.t))
    events = json_lines(out.read_text())
    assert len(want) == 20 and len(events) == 20, (len(want), len(events), bg.stderr)
    for e in events:
        tid, frames = want[e["args"]["tag"]]
        got = [(f.get("sym"), f.get("file"), f.get("line")) for f in e["args"]["pystack"]]
        # (a thread that has ended by the time its event is read has no
        # TID inside to be told by: /proc no longer has it)
        assert e["pid"] == c.pid and e.get("ns_tid", tid) == tid, e
        assert got == frames, (case, engine, e["args"]["tag"], got, frames)
        # the same frames in $ustack, each run of them where the evaluator
        # that runs it was (in a stripped Debian build of 3.14 and 3.15,
        # in the part GCC split off it, which no symbol names)
        ust = e["args"]["ustack"]
        spliced = [(f.get("sym"), f.get("file"), f.get("line")) for f in ust if f.get("python")]
        # (a deep recursion before 3.11 takes 3 native frames a Python one:
        # a $ustack:128 cut short holds the innermost Python frames)
        cut = "end" in ust[-1]
        assert spliced == (frames[:len(spliced)] if cut else frames) and spliced, \
            (case, engine, e["args"]["tag"], ust)


@pytest.mark.parametrize("how", ["detach", "kill"])
@pytest.mark.parametrize("case", SID)
def test_attach_then_no_tool_left(case, how, container):
    """3.14 and 3.15 in a container, -p: our sys.monitoring tool claimed,
    recurse's 26 calls counted; detached (or uscope killed) the process's
    own sys.monitoring.get_tool() shows no tool of ours."""
    c = container(case, ["-c", TOOLS_SCRIPT])

    def tools_now():
        c.say("x")
        return json.loads(c.t.readline())
    assert tools_now() == [None] * 6
    s = u.Background(["count", "--json", "-p", c.pid, "py:__main__:recurse"])
    s.wait_ready()
    for _ in range(300):
        if tools_now()[4] == "uscope":
            break
    else:
        raise AssertionError("no tool was claimed")
    c.say("go")
    c.t.readline()
    if how == "detach":
        s.signal(signal.SIGINT)
        r = s.result()
        assert r.rc == 0, r.stderr
        assert py_rows(r.stdout) == {"recurse": 26}
    else:
        s.signal(signal.SIGKILL)
        s.wait()
    for _ in range(300):
        if how == "kill":
            c.say("go")     # (the agent lets go at the next probed call)
            c.t.readline()
        if tools_now() == [None] * 6:
            break
    else:
        raise AssertionError(f"a tool is left: {tools_now()}")
    c.say("end")
    assert c.t.wait() == 0


# ---- 3.14 and 3.15 as COMMAND ----------------------------------------------------------

def command(work, case, how="chroot"):
    """-> (COMMAND's argv prefix that runs the root's python, the test
    files' directory inside)."""
    root, py, inside, _ = work(case)
    pre = ["unshare", "-p", "-f", "-m", f"--mount-proc={root}/proc"] if how == "unshare" else []
    return pre + ["chroot", str(root), py], inside


@pytest.mark.parametrize("how", ["chroot", "unshare"])
@pytest.mark.parametrize("case", SID)
def test_command_counts_equal_monitoring(case, how, work):
    """-- chroot ROOT python3.X (and unshare -p -f -m ... chroot ...): the
    root's CPython found by reading the launchers, py: probes resolved in
    it; every call as the workload's own sys.monitoring tool counts it in
    the same run."""
    argv, inside = command(work, case, how)
    cp = u.run_uscope(["count", "--json", "py:__main__:*", "--"] + argv +
                      [f"{inside}/pycalls.py", "monitor"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    own = [json.loads(l[4:]) for l in cp.stdout.splitlines() if l.startswith("own ")]
    assert len(own) == 1, cp.stdout
    got = py_rows(cp.stdout)
    assert got.pop("<module>") == 1 and got.pop("Account") == 1
    got.pop("monitored", None)
    assert own[0]["recurse"] == 26 and got == own[0]


@pytest.mark.parametrize("case", SID)
def test_command_arguments_returns_raised(case, work):
    argv, inside = command(work, case)
    calls = f"{inside}/pycalls.py"
    cp = u.run_uscope(["trace", "--json", "py:recurse n", "py:Account.add x self", "r:py:fail",
                       "r:py:unwind", "r:py:numbers", "py:late n", "r:py:pause", "--"] + argv +
                      [calls, "plain"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    ev = json_lines(cp.stdout)

    def args(event, arg):
        return [e["args"][arg] for e in ev if e["event"] == f"__main__:{event}"]
    assert args("recurse", "n") == list(range(25, -1, -1))
    assert len(args("Account.add", "x")) == 67
    assert all(s == "<Account>" for s in args("Account.add", "self"))
    assert args("fail__return", "retval") == ["(raised)"] * 5
    assert args("unwind__return", "retval") == [1]
    assert args("numbers__return", "retval") == [0, 1, 2, 3, 4, "None"]
    assert args("late", "n") == [0, 1, 2, 3]
    assert args("pause__return", "retval") == ["None", 0, "None", 1, "None", 2]
    late = [e for e in ev if e["event"] == "__main__:late"]
    assert late[0]["file"] == calls and late[0]["line"] == 1


@pytest.mark.parametrize("case", SID)
def test_command_flow_latency_record(case, work, tmp_path):
    argv, inside = command(work, case)
    calls = [f"{inside}/pycalls.py", "plain"]
    cp = u.run_uscope(["flow", "--json", "py:__main__:unwind", "py:__main__:fail", "--"] +
                      argv + calls, timeout=120)
    assert cp.returncode == 0, cp.stderr
    fl = [(o["type"], o["function"], o["depth"]) for o in json_lines(cp.stdout)]
    assert fl == [("entry", "__main__:unwind", 0)] + \
        [("entry", "__main__:fail", d) for d in range(1, 6)] + \
        [("return", "__main__:fail", d) for d in range(5, 0, -1)] + \
        [("return", "__main__:unwind", 0)]
    cp = u.run_uscope(["latency", "--json", "py:__main__:recurse", "py:__main__:worker", "--"] +
                      argv + calls, timeout=120)
    assert cp.returncode == 0, cp.stderr
    rows = {o["key"]["function"]: o["count"] for o in json_lines(cp.stdout) if o.get("final")}
    assert rows == {"__main__:recurse": 26, "__main__:worker": 3}
    rec = tmp_path / "py.usc"
    cp = u.run_uscope(["record", "-o", rec, "py:__main__:recurse", "py:__main__:worker", "--"] +
                      argv + calls, timeout=120)
    assert cp.returncode == 0, cp.stderr
    cp = u.run_uscope(["report", "-r", rec, "--json"])
    assert cp.returncode == 0, cp.stderr
    calls_ = {o["function"]: o["calls"] for o in json_lines(cp.stdout) if "function" in o}
    assert calls_ == {"__main__:recurse": 26, "__main__:worker": 3}
    cp = u.run_uscope(["export", "-r", rec, "--format", "folded", "-o", tmp_path / "f"])
    assert cp.returncode == 0, cp.stderr
    paths = [l.rsplit(" ", 1)[0] for l in (tmp_path / "f").read_text().splitlines()]
    assert ";".join(["__main__:recurse"] * 26) in paths


@pytest.mark.parametrize("case", SID)
def test_command_pystack(case, work, tmp_path):
    """-- chroot ROOT env LD_PRELOAD=... python3.X pystack.py: $pystack at a
    probe on the root's file (named by its path on the host) equals
    traceback.extract_stack()."""
    root, py, inside, host = work(case)
    out = tmp_path / "ev.json"
    p = subprocess.Popen([str(u.uscope_path()), "trace", "--json", "-o", str(out),
                          f"{host}/libpymark.so:pymark tag=$arg1:s32 $pystack:128", "--",
                          "chroot", str(root), "env", f"LD_PRELOAD={inside}/libpymark.so", py,
                          f"{inside}/pystack.py", f"{inside}/libpymark.so", "wait"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    u.REGISTRY.uscopes.append(p)
    try:
        for _ in range(6000):
            if out.exists() and out.read_text().count("\n") >= 20 or p.poll() is not None:
                break
            time.sleep(0.01)    # (a bounded poll of the output, as test_python's)
        stdout, stderr = p.communicate("", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stderr
    want = workload_stacks(stdout)
    events = json_lines(out.read_text())
    assert len(want) == 20 and len(events) == 20
    for e in events:
        tid, frames = want[e["args"]["tag"]]
        got = [(f["sym"], f["file"], f["line"]) for f in e["args"]["pystack"]]
        assert e["tid"] == tid and got == frames, (e["args"]["tag"], got, frames)


# ---- system-wide, --root -----------------------------------------------------------------

TICKS = """
import json, sys
def uscope_issue38_tick(i):
    return i
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "tools":
        print("tools " + json.dumps([sys.monitoring.get_tool(i) for i in range(6)]), flush=True)
    elif cmd == "go":
        for i in range(1000):
            uscope_issue38_tick(i)
        print("done", flush=True)
    elif cmd == "end":
        break
"""


def test_system_wide_root(container, work):
    """-e inject --root ROOT, no -p: every process that runs one of the
    root's CPythons (3.14 and 3.15 here, each in its container) gets the
    py: probe, and counts each of its calls (1,000 each)."""
    cs = [container(case, ["-c", TICKS]) for case in SID]
    root = work(SID[0])[0]
    bg = u.Background(["count", "--json", "-e", "inject", "--root", str(root),
                       "py:__main__:uscope_issue38_tick"])
    bg.wait_ready()
    for c, case in zip(cs, SID):
        armed(c, case)
        c.say("go")
        c.t.expect("done")
    bg.signal(signal.SIGINT)
    r = bg.result()
    assert r.rc == 0, r.stderr
    # a row each process (each its own code object)
    rows = [o for o in json_lines(r.stdout) if o.get("final")]
    assert sorted(o["count"] for o in rows) == [1000, 1000], rows
    assert {o["key"]["function"] for o in rows} == {"__main__:uscope_issue38_tick"}
    for c in cs:
        c.say("end")
        assert c.t.wait() == 0
