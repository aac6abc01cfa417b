"""Python as Python (issue 20), on Debian's /usr/bin/python3.11:

- py: probes count every Python call, Python-to-Python calls included,
  exactly as CPython's own profiling (sys.setprofile) sees them, on a
  workload with known calls (tests/targets/pycalls.py: a recursion, methods,
  a generator, an exception unwinding through frames, a function sorted()
  calls from C, threads); arguments by name; returns; flow, latency,
  record and report; attached to a running interpreter and left clean;
- $pystack at a native probe equals the traceback.extract_stack() the
  workload takes at the same point (tests/targets/pystack.py, through
  libpymark's pymark), on inject and on bpf, and $ustack has the same
  Python frames spliced in where _PyEval_EvalFrameDefault ran them;
- Python's http.server: do_GET calls copyfile, in flow;
- what cannot be is refused with one line."""

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import uscope_e2e as u

PYTHON = "/usr/bin/python3.11"
if not os.path.exists(PYTHON):
    pytest.skip("Debian's python3.11 is needed", allow_module_level=True)

CALLS = str(u.TARGETS / "pycalls.py")
PYSTACK = str(u.TARGETS / "pystack.py")
MARK = u.target("libpymark.so")


def def_line(name):
    """The line of pycalls.py's `def NAME`."""
    for i, line in enumerate(Path(CALLS).read_text().splitlines(), 1):
        if line.lstrip().startswith(f"def {name}("):
            return i
    raise AssertionError(name)


def json_lines(text):
    return u.json_lines(text)


def profiled_counts():
    """What sys.setprofile sees of pycalls.py's functions."""
    p = subprocess.run([PYTHON, CALLS, "profile"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def py_rows(stdout, prefix="__main__:"):
    """count --json rows of py: probes -> {qualname: count}."""
    rows = {}
    for o in json_lines(stdout):
        if o.get("final"):
            f = o["key"]["function"]
            assert f.startswith(prefix), o
            # (two code objects may share a name: two comprehensions)
            rows[f[len(prefix):]] = rows.get(f[len(prefix):], 0) + o["count"]
    return rows


# ---- py: probes --------------------------------------------------------------

EVALUATOR = "py: probes' calls through the agent's frame evaluator (PEP 523)"
# Debian 12's python3.11 is 3.11.2, whose evaluator misses the calls of a
# __getitem__ from a specialized subscript (CPython gh-104405): uscope
# counts through the profile function there unless USCOPE_PY_PROFILE=0
# asks for the evaluator; the tests of the evaluator itself ask (their
# workloads have no __getitem__ written in Python)
EVAL_ASKED = {"USCOPE_PY_PROFILE": "0"}


@pytest.mark.parametrize("way", ["evaluator", "profilefunc"])
def test_counts_equal_setprofile(way):
    """Counted through the agent's frame evaluator (3.11 with no return
    probe and no stack: agent/pyeval.c), or the profile function
    (USCOPE_PY_PROFILE=1): the same as sys.setprofile."""
    want = profiled_counts()
    assert want["recurse"] == 26 and want["Account.add"] == 67 and want["numbers"] == 6
    env = {"USCOPE_PY_PROFILE": "1" if way == "profilefunc" else "0"}
    cp = u.run_uscope(["count", "--json", "-vv", "py:__main__:*", "--", PYTHON, CALLS, "plain"],
                      timeout=60, env=env)
    assert cp.returncode == 0, cp.stderr
    assert (EVALUATOR in cp.stderr) == (way == "evaluator"), cp.stderr
    got = py_rows(cp.stdout)
    # uscope sees the module's body and the class body too: profiling was
    # set after them
    assert got.pop("<module>") == 1 and got.pop("Account") == 1
    assert got == want


def test_counts_equal_the_programs_own_setprofile_in_the_same_run(tmp_path):
    """The workload counts its own calls with sys.setprofile (and takes it
    out at the end) while uscope counts through its frame evaluator: the
    same counts, and uscope's are not cut short by the program's own
    profile function. (Its counts go to a file, through a shell script that
    ends in exec: uscope follows it to CPython.)"""
    own = tmp_path / "own.json"
    sh = tmp_path / "run.sh"
    sh.write_text(f"#!/bin/sh\nexec {PYTHON} {CALLS} profile > {own}\n")
    sh.chmod(0o755)
    # (Debian's 3.11.2 takes the profile function unless asked: EVAL_ASKED)
    cp = u.run_uscope(["count", "--json", "-vv", "py:__main__:*", "--", sh], timeout=60,
                      env=EVAL_ASKED)
    assert cp.returncode == 0, cp.stderr
    assert EVALUATOR in cp.stderr
    own = json.loads(own.read_text().splitlines()[-1])
    got = py_rows(cp.stdout)
    # (and profiled(), which sets the program's profile function)
    assert got.pop("<module>") == 1 and got.pop("Account") == 1 and got.pop("profiled") == 1
    assert own["recurse"] == 26 and got == own


def test_every_call_the_same_through_either_way():
    """count 'py:*' of pycalls.py (the stdlib's calls too: re's parser
    subscripts a SubPattern, whose __getitem__ is Python) by default and
    through the profile function: the same rows, every one. On Debian's
    3.11.2 the default is the profile function (its evaluator misses
    gh-104405's calls, -vv says so), on a 3.11.4 and later the evaluator."""
    rows = {}
    for way, env in (("default", {"PYTHONHASHSEED": "0"}),
                     ("profilefunc", {"PYTHONHASHSEED": "0", "USCOPE_PY_PROFILE": "1"})):
        cp = u.run_uscope(["count", "--json", "-vv", "py:*", "--", PYTHON, CALLS, "plain"],
                          timeout=120, env=env)
        assert cp.returncode == 0, cp.stderr
        rows[way] = {o["key"]["function"]: o["count"] for o in json_lines(cp.stdout)
                     if o.get("final")}
        if way == "default":
            v = subprocess.run([PYTHON, "-c", "import sys; print(sys.version_info[2])"],
                               capture_output=True, text=True).stdout
            assert ("gh-104405" in cp.stderr) == (int(v) < 4), cp.stderr
    assert rows["default"]["re._parser:SubPattern.__getitem__"] > 100
    assert rows["default"] == rows["profilefunc"]


DEEP = """
import sys, threading
sys.setrecursionlimit(300000)
def r(n):
    return 0 if n == 0 else 1 + r(n - 1)
def main():
    print(r(200000))
    if sys.argv[1] == "thread":
        threading.stack_size(256 * 1024)
        t = threading.Thread(target=lambda: print(r(1500)))
        t.start()
        t.join()
main() if sys.argv[1] == "main" else threading.Thread(target=main).start()
"""


@pytest.mark.parametrize("where", ["main", "thread"])
def test_evaluator_gives_way_before_the_stack_runs_out(where, tmp_path):
    """With an evaluator each Python call nests on the C stack (~400 bytes):
    a recursion of 200,000 where the program raised its limit (the main
    thread's 8 MiB, or a thread's), and one of 1,500 in a thread of a
    256 KiB stack, would overflow it. The evaluator gives way to the profile
    function once half a thread's stack is used: the program runs to its
    end, every call counted."""
    script = tmp_path / "deep.py"
    script.write_text(DEEP)
    arg = "main" if where == "main" else "thread"
    cp = u.run_uscope(["count", "--json", "-v", "py:r", "--", PYTHON, script, arg],
                      timeout=120, env=EVAL_ASKED)
    assert cp.returncode == 0, cp.stderr
    assert "killed by" not in cp.stderr
    assert "a thread had used half of its C stack" in cp.stderr, cp.stderr
    want = 200001 + (1501 if where == "thread" else 0)
    rows = [o for o in json_lines(cp.stdout) if o.get("final")]
    assert sum(o["count"] for o in rows) == want


def test_globs_module_and_returns():
    cp = u.run_uscope(["count", "--json", "py:__main__:Account.*", "r:py:recurse",
                       "py:*:numbers", "--", PYTHON, CALLS, "plain"], timeout=60)
    assert cp.returncode == 0, cp.stderr
    rows = {(o["probe"], o["key"]["function"]): o["count"]
            for o in json_lines(cp.stdout) if o.get("final")}
    assert rows == {
        ("py:__main__:Account.*", "__main__:Account.__init__"): 61,
        ("py:__main__:Account.*", "__main__:Account.add"): 67,
        ("py:__main__:Account.*", "__main__:Account.check"): 1,
        ("py:recurse__return", "__main__:recurse"): 26,
        ("py:numbers", "__main__:numbers"): 6,
    }


def test_arguments_by_name():
    cp = u.run_uscope(["trace", "--json", "py:recurse n", "py:Account.add x self",
                       "r:py:unwind", "r:py:fail", "--", PYTHON, CALLS, "plain"], timeout=60)
    assert cp.returncode == 0, cp.stderr
    ev = json_lines(cp.stdout)
    # fail(4) raises through its 5 frames: none returns a value
    raised = [e["args"]["retval"] for e in ev if e["event"] == "__main__:fail__return"]
    assert raised == ["(raised)"] * 5
    rec = [e["args"]["n"] for e in ev if e["event"] == "__main__:recurse"]
    assert rec == list(range(25, -1, -1))
    adds = [e["args"] for e in ev if e["event"] == "__main__:Account.add"]
    assert len(adds) == 67
    assert sorted(a["x"] for a in adds[:7]) == list(range(7))     # the main thread's first
    assert all(a["self"] == "<Account>" for a in adds)
    ret = [e for e in ev if e["event"] == "__main__:unwind__return"]
    assert len(ret) == 1 and ret[0]["args"]["retval"] == 1
    assert ret[0]["file"] == CALLS and ret[0]["line"] == def_line("unwind")


def test_all_arguments_and_reprs():
    cp = u.run_uscope(["trace", "py:fail", "py:numbers", "py:key", "--", PYTHON, CALLS, "plain"],
                      timeout=60)
    assert cp.returncode == 0, cp.stderr
    lines = [l.split(": ", 2)[1:] for l in cp.stdout.splitlines() if ": __main__:" in l]
    shown = [(name, rest) for name, rest in lines]
    fail, numbers, key = (f"(pycalls.py:{def_line(n)})" for n in ("fail", "numbers", "key"))
    assert [r for n, r in shown if n == "__main__:fail"] == \
        [f"{fail} depth={d}" for d in range(4, -1, -1)]
    assert [r for n, r in shown if n == "__main__:numbers"] == [f"{numbers} n=5"] * 6
    assert [r for n, r in shown if n == "__main__:key"] == \
        [f"{key} x=3", f"{key} x=1", f"{key} x=2"]


def test_flow_nests_python_calls():
    cp = u.run_uscope(["flow", "--json", "py:__main__:unwind", "py:__main__:fail", "--", PYTHON,
                       CALLS, "plain"], timeout=60)
    assert cp.returncode == 0, cp.stderr
    fl = [(o["type"], o["function"], o["depth"]) for o in json_lines(cp.stdout)]
    # the exception unwinds every frame: each returns, innermost first
    assert fl == [("entry", "__main__:unwind", 0)] + \
        [("entry", "__main__:fail", d) for d in range(1, 6)] + \
        [("return", "__main__:fail", d) for d in range(5, 0, -1)] + \
        [("return", "__main__:unwind", 0)]


def test_latency_per_function():
    cp = u.run_uscope(["latency", "--json", "py:__main__:recurse", "py:__main__:worker", "--",
                       PYTHON, CALLS, "plain"], timeout=60)
    assert cp.returncode == 0, cp.stderr
    rows = {o["key"]["function"]: o for o in json_lines(cp.stdout) if o.get("final")}
    assert rows["__main__:recurse"]["count"] == 26
    assert rows["__main__:worker"]["count"] == 3


def test_record_report_after_exit(tmp_path):
    rec = tmp_path / "py.usc"
    cp = u.run_uscope(["record", "-o", rec, "py:__main__:recurse", "py:__main__:worker", "--",
                       PYTHON, CALLS, "plain"], timeout=60)
    assert cp.returncode == 0, cp.stderr
    cp = u.run_uscope(["report", "-r", rec, "--json"])
    assert cp.returncode == 0, cp.stderr
    rows = {o["function"]: o["calls"] for o in json_lines(cp.stdout) if "function" in o}
    assert rows == {"__main__:recurse": 26, "__main__:worker": 3}
    cp = u.run_uscope(["export", "-r", rec, "--format", "folded", "-o", tmp_path / "f"])
    assert cp.returncode == 0, cp.stderr
    paths = [l.rsplit(" ", 1)[0] for l in (tmp_path / "f").read_text().splitlines()]
    assert ";".join(["__main__:recurse"] * 26) in paths


def test_attach_and_leave_clean():
    """-p: a running interpreter gets the profile function (a pending call),
    every call is seen while attached, and it is gone after."""
    t = u.Target([PYTHON, CALLS, "wait"])
    try:
        t.expect("ready")
        s = u.Background(["count", "--json", "-p", t.pid, "py:__main__:recurse"])
        s.wait_ready()
        # the pending call runs when the main thread next runs Python
        t.write("go\n")
        t.expect("done")
        s.signal(2)
        r = s.result()
        assert r.rc == 0, r.stderr
        assert py_rows(r.stdout) == {"recurse": 26}
        t.write("end\n")
        assert t.wait() == 0
    finally:
        if t.alive():
            t.kill()


PF_SCRIPT = """
import ctypes, sys, time
api = ctypes.pythonapi
api.PyThreadState_Get.restype = ctypes.c_void_p
if sys.version_info < (3, 9):
    api.PyInterpreterState_Get = api._PyInterpreterState_Get    # (3.8's name)
api.PyInterpreterState_Get.restype = ctypes.c_void_p
default = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value
if sys.version_info >= (3, 9):
    api._PyInterpreterState_GetEvalFrameFunc.restype = ctypes.c_void_p
    api._PyInterpreterState_GetEvalFrameFunc.argtypes = [ctypes.c_void_p]
    def eval_frame():
        return api._PyInterpreterState_GetEvalFrameFunc(api.PyInterpreterState_Get())
else:
    def eval_frame():
        # 3.8: PyInterpreterState.eval_frame (at 0x238)
        return ctypes.c_void_p.from_address(api.PyInterpreterState_Get() + 0x238).value
def tick(i):
    return i
def profilefunc():
    # PyThreadState.c_profilefunc (3.11: at 0x40; 3.8 to 3.10: 0x38)
    at = 0x40 if sys.version_info >= (3, 11) else 0x38
    return ctypes.c_void_p.from_address(api.PyThreadState_Get() + at).value
def evaluator():
    return eval_frame() != default
print("ready", flush=True)
while True:
    line = sys.stdin.readline().strip()
    if line == "end":
        break
    for i in range(100):
        tick(i)
    print("profilefunc", "set" if profilefunc() else "none",
          "evaluator", "set" if evaluator() else "none", flush=True)
"""


@pytest.mark.parametrize("how", ["detach", "kill"])
@pytest.mark.parametrize("way", ["evaluator", "profilefunc"])
def test_profile_function_removed(how, way, monkeypatch):
    """3.11's py: probes come through a frame evaluator of the agent's
    (PEP 523), or with USCOPE_PY_PROFILE=1 the profile function: set once
    the main thread runs Python after attach, and taken out by the process
    itself after a detach, and after uscope's kill -9. A count by function
    takes the evaluator; the other is never set."""
    if way == "profilefunc":
        monkeypatch.setenv("USCOPE_PY_PROFILE", "1")
    else:
        monkeypatch.setenv("USCOPE_PY_PROFILE", EVAL_ASKED["USCOPE_PY_PROFILE"])
    other = "evaluator" if way == "profilefunc" else "profilefunc"
    t = u.Target([PYTHON, "-c", PF_SCRIPT])
    try:
        t.expect("ready")
        t.write("x\n")
        t.expect("profilefunc none evaluator none")
        s = u.Background(["count", "-p", t.pid, "py:tick"])
        s.wait_ready()
        # set by the pending call once the main thread runs Python again
        for _ in range(200):
            t.write("x\n")
            line = t.readline()
            if f"{way} set" in line:
                break
        else:
            raise AssertionError(f"the {way} was never set")
        assert f"{other} none" in line
        if how == "detach":
            s.signal(2)
            assert s.wait() == 0, s.stderr
        else:
            s.signal(9)     # the agent lets go when it sees us dead
            s.wait()
        # each thread takes it out at its next call
        t.write("x\n")
        t.readline()
        t.write("x\n")
        t.expect("profilefunc none evaluator none")
        t.write("end\n")
        assert t.wait() == 0
    finally:
        if t.alive():
            t.kill()


THREADS_SCRIPT = PF_SCRIPT.split("print(\"ready\"")[0] + """
import threading
stop = threading.Event()
sums = [0] * 4
def work(k):
    n = 0
    while not stop.is_set():
        for i in range(1000):
            n += tick(i) - i + 1
    sums[k] = n
ths = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for th in ths:
    th.start()
print("ready", flush=True)
while True:
    line = sys.stdin.readline().strip()
    if line == "end":
        break
    print("evaluator", "set" if evaluator() else "none", flush=True)
stop.set()
for th in ths:
    th.join()
print("ok", all(n > 0 and n % 1000 == 0 for n in sums), flush=True)
"""


@pytest.mark.parametrize("way", ["evaluator", "profilefunc"])
def test_kill_under_four_threads(way, monkeypatch):
    """uscope killed with SIGKILL while four threads call a probed function
    through the agent's frame evaluator (or its profile function): every
    thread runs on to its end with its calls' results right, and the
    evaluator is taken out by the process itself."""
    if way == "profilefunc":
        monkeypatch.setenv("USCOPE_PY_PROFILE", "1")
    else:
        monkeypatch.setenv("USCOPE_PY_PROFILE", EVAL_ASKED["USCOPE_PY_PROFILE"])
    t = u.Target([PYTHON, "-c", THREADS_SCRIPT])
    try:
        t.expect("ready")
        s = u.Background(["count", "-p", t.pid, "py:tick"])
        s.wait_ready()
        if way == "evaluator":
            for _ in range(200):
                t.write("x\n")
                if "evaluator set" in t.readline():
                    break
            else:
                raise AssertionError("the evaluator was never set")
        time.sleep(0.5)     # the four threads' calls go through it meanwhile
        s.signal(9)
        s.wait()
        for _ in range(200):
            t.write("x\n")
            if "evaluator none" in t.readline():
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the evaluator stayed after uscope's death")
        t.write("end\n")
        t.expect("ok True")
        assert t.wait() == 0
    finally:
        if t.alive():
            t.kill()


def test_http_server_do_get_calls_copyfile(tmp_path):
    (tmp_path / "hello.txt").write_text("hello\n")
    server = tmp_path / "serve.py"
    server.write_text(
        "import functools, http.server, socketserver, sys\n"
        "class S(socketserver.TCPServer):\n"
        "    allow_reuse_address = True\n"
        f"h = functools.partial(http.server.SimpleHTTPRequestHandler, directory={str(tmp_path)!r})\n"
        "with S(('127.0.0.1', 0), h) as s:\n"
        "    print(s.server_address[1], flush=True)\n"
        "    s.handle_request()\n")
    out = tmp_path / "flow.json"
    s = u.Background(["flow", "--json", "-o", out, "py:http.server:SimpleHTTPRequestHandler.*",
                      "py:shutil:copyfileobj", "--", PYTHON, server])
    s.wait_ready()
    port = None
    for _ in range(3000):
        lines = s.stdout_path.read_text().split()
        if lines:
            port = int(lines[0])
            break
        time.sleep(0.01)
    assert port, s.stderr
    import urllib.request
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/hello.txt", timeout=10).read()
    assert body == b"hello\n"
    r = s.result()
    assert r.rc == 0, r.stderr
    fl = [(o["type"], o["function"], o["depth"]) for o in json_lines(out.read_text())]
    # the handler's __init__ handles the request: do_GET runs inside it
    assert fl[0] == ("entry", "http.server:SimpleHTTPRequestHandler.__init__", 0)
    get = fl.index(("entry", "http.server:SimpleHTTPRequestHandler.do_GET", 1))
    end = fl.index(("return", "http.server:SimpleHTTPRequestHandler.do_GET", 1))
    inside = fl[get + 1:end]
    assert ("entry", "http.server:SimpleHTTPRequestHandler.send_head", 2) in inside
    copy = inside.index(("entry", "http.server:SimpleHTTPRequestHandler.copyfile", 2))
    assert inside[copy + 1:copy + 4] == [
        ("entry", "shutil:copyfileobj", 3),
        ("return", "shutil:copyfileobj", 3),
        ("return", "http.server:SimpleHTTPRequestHandler.copyfile", 2)]


# ---- $pystack -----------------------------------------------------------------

def workload_stacks(text):
    """pystack.py's own stacks: {tag: (tid, [(qualname, file, line)] innermost first)}."""
    stacks, cur = {}, None
    for line in text.splitlines():
        if line.startswith("stack "):
            _, tag, tid, _n = line.split()
            cur = stacks.setdefault(int(tag), (int(tid), []))[1]
        elif line.startswith("frame "):
            q, f, ln = line[6:].split("\t")
            cur.append((q, f, int(ln)))
    return {t: (tid, fr[::-1]) for t, (tid, fr) in stacks.items()}


def traced_stacks(engine, probe_stack, tmp_path):
    """pystack.py traced: its own stacks, and the events. The workload waits
    at its end until uscope has written every event (the code objects its
    frames name are read by uscope after the hit, from its memory)."""
    out = tmp_path / f"ev-{engine}.json"
    # libpymark preloaded: patched before the workload runs (env execs it)
    argv = [str(u.uscope_path()), "trace", "--json", "-e", engine, "-o", str(out),
            f"{MARK}:pymark tag=$arg1:s32 {probe_stack}", "--", "env", f"LD_PRELOAD={MARK}",
            PYTHON, PYSTACK, MARK, "wait"]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    u.REGISTRY.uscopes.append(p)
    try:
        for _ in range(6000):
            # whole lines only: uscope may be writing the last one
            text = out.read_text() if out.exists() else ""
            if len(json_lines(text[:text.rfind("\n") + 1])) >= 20:
                break
            if p.poll() is not None:
                break
            time.sleep(0.01)
        stdout, stderr = p.communicate("", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stderr
    return workload_stacks(stdout), json_lines(out.read_text())


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_pystack_equals_traceback(engine, tmp_path):
    want, events = traced_stacks(engine, "$pystack:128", tmp_path)
    assert len(want) == 20 and len(events) == len(want)
    for e in events:
        tid, frames = want[e["args"]["tag"]]
        got = [(f["sym"], f["file"], f["line"]) for f in e["args"]["pystack"]]
        assert e["tid"] == tid
        assert all(f["python"] for f in e["args"]["pystack"])
        assert got == frames, (e["args"]["tag"], got, frames)


def test_pystack_same_on_inject_and_bpf(tmp_path):
    _, ij = traced_stacks("inject", "$pystack:128", tmp_path)
    _, bp = traced_stacks("bpf", "$pystack:128", tmp_path)
    def strip(evs):
        return sorted((e["args"]["tag"], [(f["sym"], f["file"], f["line"])
                                          for f in e["args"]["pystack"]]) for e in evs)
    assert strip(ij) == strip(bp)


def recorded_events(rec, tmp_path, n):
    """The --json events of `trace -r REC`, once it holds n of pymark's (a
    recording is read while it is written: whole chunks only)."""
    for _ in range(600):
        cp = u.run_uscope(["trace", "-r", rec, "--json", "-o", tmp_path / "r.json", "pymark"])
        if cp.returncode == 0:
            ev = json_lines((tmp_path / "r.json").read_text())
            if len(ev) >= n:
                return ev
        time.sleep(0.05)    # (a bounded poll of the recording)
    raise AssertionError(f"fewer than {n} events in {rec}: {cp.stderr}")


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_pystack_from_a_recording(engine, tmp_path):
    """$pystack recorded, read back after the process has gone: the frames
    traceback.extract_stack() took at each point, as a live run shows them
    (the recording carries the code objects' names and line tables), in
    trace -r, count -r, report and export --format chrome."""
    rec = tmp_path / "py.usc"
    argv = [str(u.uscope_path()), "record", "-e", engine, "-o", str(rec),
            f"{MARK}:pymark tag=$arg1:s32 $pystack:128", "--", "env", f"LD_PRELOAD={MARK}",
            PYTHON, PYSTACK, MARK, "wait"]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    u.REGISTRY.uscopes.append(p)
    try:
        # the workload waits at its end (its code objects alive) until every
        # event is in the file
        for _ in range(6000):
            if rec.exists() and rec.stat().st_size > 0:
                break
            time.sleep(0.01)
        recorded_events(rec, tmp_path, 20)
        stdout, stderr = p.communicate("", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stderr
    want = workload_stacks(stdout)
    assert len(want) == 20
    # the process has gone: the names come from the recording alone
    events = recorded_events(rec, tmp_path, 20)
    assert len(events) == 20
    for e in events:
        tid, frames = want[e["args"]["tag"]]
        assert e["args"]["pystack"] is not None, e
        got = [(f["sym"], f["file"], f["line"]) for f in e["args"]["pystack"]]
        assert e["tid"] == tid and all(f["python"] for f in e["args"]["pystack"])
        assert got == frames, (e["args"]["tag"], got, frames)
    # count -r: a row a stack, the same frames
    cp = u.run_uscope(["count", "-r", rec, "--json", "pymark tag=$arg1:s32 $pystack"])
    assert cp.returncode == 0, cp.stderr
    rows = [o for o in json_lines(cp.stdout) if o.get("final")]
    assert sorted(o["key"]["tag"] for o in rows) == sorted(want)
    for o in rows:
        got = [(f["sym"], f["file"], f["line"]) for f in o["key"]["pystack"]]
        assert got == want[o["key"]["tag"]][1][:len(got)] and got, o
    cp = u.run_uscope(["report", "-r", rec, "--json"])
    assert cp.returncode == 0, cp.stderr
    calls = {o["function"]: o["calls"] for o in json_lines(cp.stdout) if "function" in o}
    assert calls == {"pymark": 20}
    cp = u.run_uscope(["export", "-r", rec, "--format", "chrome", "-o", tmp_path / "c.json"])
    assert cp.returncode == 0, cp.stderr
    chrome = json.loads((tmp_path / "c.json").read_text())
    chrome = chrome["traceEvents"] if isinstance(chrome, dict) else chrome
    marks = [c for c in chrome if c.get("name") == "pymark"]
    assert len(marks) == 20
    for c in marks:
        got = [(f["sym"], f["file"], f["line"]) for f in c["args"]["pystack"]]
        assert got == want[c["args"]["tag"]][1], c


NOT_YET = "Python frames not read: the process's CPython was not known yet"


def system_wide_stacks(engine, tmp_path, started_before):
    """pystack.py traced system-wide (no -p, no COMMAND): its own stacks,
    and its events (other processes that map libpymark, another test's,
    may hit too: left out by pid). started_before: it runs when uscope
    starts, else it starts after."""
    out = tmp_path / f"sw-{engine}.json"
    argv = ["env", f"LD_PRELOAD={MARK}", PYTHON, PYSTACK, MARK, "first"]
    t = u.Target(argv) if started_before else None
    if t:
        t.expect("ready")
    bg = u.Background(["trace", "--json", "-e", engine, "-o", out,
                       f"{MARK}:pymark tag=$arg1:s32 $pystack:128"])
    try:
        bg.wait_ready()
        if not t:
            t = u.Target(argv)
            t.expect("ready")
        t.write("go\n")
        mine = []
        for _ in range(3000):
            text = out.read_text() if out.exists() else ""
            mine = [e for e in json_lines(text[:text.rfind("\n") + 1]) if e["pid"] == t.pid]
            if len(mine) >= 20:
                break
            time.sleep(0.01)    # (a bounded poll of uscope's output file)
        bg.signal(2)
        assert bg.wait() == 0, bg.stderr
        t.close_stdin()
        stdout = (t._buf + t.p.stdout.read()).decode()
        assert t.wait() == 0
    finally:
        if t and t.alive():
            t.kill()
    events = [e for e in json_lines(out.read_text()) if e["pid"] == t.pid]
    return workload_stacks(stdout), events, bg.stderr


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_pystack_system_wide(engine, tmp_path):
    """$pystack with no -p and no COMMAND: each process's CPython found
    where it runs (inject: as each process is attached; bpf: the processes
    running CPython when uscope starts told to the program at once): the
    frames traceback.extract_stack() took, every one."""
    want, events, err = system_wide_stacks(engine, tmp_path, True)
    assert len(want) == 20 and len(events) == 20, err
    for e in events:
        tid, frames = want[e["args"]["tag"]]
        got = [(f.get("sym"), f.get("file"), f.get("line")) for f in e["args"]["pystack"]]
        assert e["tid"] == tid and got == frames, (e["args"]["tag"], got, frames)
    assert NOT_YET not in json.dumps(events)


def test_pystack_system_wide_process_started_after(tmp_path):
    """bpf, system-wide: a CPython started after uscope is found at its
    first hit and told to the program; the hits that came before (its
    first ones) say so, each, and are counted in one line at the end; every
    later hit has the frames traceback.extract_stack() took."""
    want, events, err = system_wide_stacks("bpf", tmp_path, False)
    assert len(want) == 20 and len(events) == 20, err
    events.sort(key=lambda e: e["time_ns"])
    early = [e for e in events if e["args"]["pystack"][-1].get("end", "").startswith(NOT_YET)]
    assert events[:len(early)] == early     # the first hits only
    assert len(early) < 20
    for e in early:
        assert len(e["args"]["pystack"]) == 1, e
    for e in events[len(early):]:
        tid, frames = want[e["args"]["tag"]]
        got = [(f.get("sym"), f.get("file"), f.get("line")) for f in e["args"]["pystack"]]
        assert got == frames, (e["args"]["tag"], got, frames)
    if early:
        # (another test's processes may add theirs to the count)
        n = [int(l.split("$pystack: ")[1].split()[0]) for l in err.splitlines()
             if "came before uscope knew" in l]
        assert len(n) == 1 and n[0] >= len(early), err


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_ustack_has_the_python_frames(engine, tmp_path):
    want, events = traced_stacks(engine, "$ustack:256", tmp_path)
    for e in events:
        tag = e["args"]["tag"]
        if tag == 11:
            continue    # 100 deep: the native stack copied ends before
        st = e["args"]["ustack"]
        py = [(f["sym"], f["file"], f["line"]) for f in st if f.get("python")]
        assert py == want[tag][1], tag
        assert not any(f["sym"] == "_PyEval_EvalFrameDefault" for f in st)
        assert st[0]["sym"] == "pymark"


def test_count_stacks_of_malloc():
    """Which Python code allocates: count libc:malloc by $pystack."""
    script = ("def make(n):\n    return [str(i) * 40 for i in range(n)]\n"
              "def work():\n    for _ in range(3):\n        make(300)\nwork()\n")
    cp = u.run_uscope(["count", "--json", "libc:malloc $pystack", "--", PYTHON, "-c", script],
                      timeout=60)
    assert cp.returncode == 0, cp.stderr
    top = [[(f["sym"], f["line"]) for f in o["key"]["pystack"] if "sym" in f]
           for o in json_lines(cp.stdout) if o.get("final")]
    assert [("make.<locals>.<listcomp>", 2), ("make", 2), ("work", 5), ("<module>", 6)] in top


# ---- what cannot be ------------------------------------------------------------

@pytest.mark.parametrize("shebang", [PYTHON, "/usr/bin/env python3.11",
                                     "/usr/bin/env -S python3.11 -u"])
def test_a_script_as_command(tmp_path, shebang):
    """COMMAND a Python script run by its #! line (as py-spy's `-- ./app.py`):
    the probes resolve in the interpreter the kernel runs for it (env's
    program found on PATH), the script itself is what runs."""
    want = profiled_counts()
    script = tmp_path / "app.py"
    script.write_text(f"#!{shebang}\n" + Path(CALLS).read_text())
    script.chmod(0o755)
    cp = u.run_uscope(["count", "--json", "-v", "py:__main__:*", "libc:malloc",
                       "--", str(script), "plain"], timeout=60,
                      env={"PATH": "/usr/bin:/bin"})   # Debian's python3.11, no shims
    assert cp.returncode == 0, cp.stderr
    assert f"{script} is a script: its probes resolve in {PYTHON}" in cp.stderr, cp.stderr
    rows = json_lines(cp.stdout)
    # the interpreter's libc: Python allocates
    assert [o["count"] > 1000 for o in rows if o.get("probe") == "malloc"] == [True], rows
    got = py_rows("\n".join(json.dumps(o) for o in rows if "function" in o.get("key", {})))
    assert got.pop("<module>") == 1 and got.pop("Account") == 1
    assert got == want


@pytest.mark.parametrize("argv, says", [
    (["trace", "-e", "bpf", "py:fib", "--", PYTHON, "-c", "pass"],
     "py: probes run in the process"),
    (["trace", "-e", "tracefs", "py:fib", "--", PYTHON, "-c", "pass"],
     "py: probes run in the process"),
    (["trace", "-e", "tracefs", "libc:malloc $pystack", "--", PYTHON, "-c", "pass"],
     "$pystack: CPython's frames are walked where the probe runs"),
    (["trace", "-e", "tracefs", "libc:malloc $pystack", "-d", "1"],
     "$pystack: CPython's frames are walked where the probe runs"),
    # system-wide, py: probes are the inject engine's, when named
    (["trace", "py:fib", "-d", "1"], "-e inject to use it"),
    (["trace", "py:fib", "--", "/bin/true"], "runs no CPython of its own"),
    (["trace", "libc:malloc", "--", str(u.TARGETS / "no-interpreter.sh")],
     "a script whose interpreter is not found"),
])
def test_refused(argv, says):
    cp = u.run_uscope(argv)
    assert cp.returncode != 0
    lines = u.error_lines(cp.stderr)
    assert len(lines) == 1 and says in lines[0], cp.stderr


def test_refused_process_without_python():
    w = u.Waiter()
    try:
        cp = u.run_uscope(["trace", "-p", w.pid, "libc:malloc $pystack", "-d", "1"])
        assert cp.returncode != 0
        lines = u.error_lines(cp.stderr)
        assert len(lines) == 1 and f"process {w.pid} runs no CPython" in lines[0]
    finally:
        w.kill()


def test_refused_other_version():
    py37 = Path(os.path.expanduser("~/.pyenv/versions/3.7.16/bin/python3.7"))
    if not py37.exists():
        pytest.skip("no CPython 3.7 here")
    t = u.Target([py37, "-c", "import sys; print('ready', flush=True); sys.stdin.readline()"])
    try:
        t.expect("ready")
        cp = u.run_uscope(["trace", "-p", t.pid, "py:x"])
        assert cp.returncode != 0
        lines = u.error_lines(cp.stderr)
        assert len(lines) == 1 and "CPython 3.7;" in lines[0] and "3.8 to 3.15" in lines[0], \
            cp.stderr
    finally:
        t.kill()
