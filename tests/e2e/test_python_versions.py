"""py: probes on every CPython here (issues 28, 38): pyenv's 3.8.18,
3.9.18 and 3.10.13 (a code object's co_name for its qualified name),
Debian's python3.11 and pyenv's 3.11.7 through a profile function or a
frame evaluator, 3.12.1 and 3.13.0 through sys.monitoring (PEP 669), each
skipped only where it is absent. Debian's 3.14 and 3.15, in a container:
test_python_containers.py.

- counts equal CPython's own profiling (sys.setprofile) of the same
  workload, and on 3.12 and later the workload's own sys.monitoring tool
  counting in the same run, beside ours: a recursion, methods, a generator,
  an exception, threads, an async def, a function compiled while it runs;
- arguments by name, r:py: with the value or (raised), flow, latency,
  record, report and folded stacks;
- a running 3.12/3.13 attached with -p, then left (or uscope killed): the
  process's own sys.monitoring.get_tool() shows no tool of ours after;
- $pystack equals traceback.extract_stack();
- 3.13 with its own _Py_DebugOffsets forced over the table gives the same
  frames and counts;
- the launchers people use: a pyenv shim, env, a venv's bin/python, -m,
  a shell script that ends in exec python."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import uscope_e2e as u

HOME = Path(os.path.expanduser("~"))
PYTHONS = {
    "3.8.18": HOME / ".pyenv/versions/3.8.18/bin/python3.8",
    "3.9.18": HOME / ".pyenv/versions/3.9.18/bin/python3.9",
    "3.10.13": HOME / ".pyenv/versions/3.10.13/bin/python3.10",
    "debian-3.11": Path("/usr/bin/python3.11"),
    "3.11.7": HOME / ".pyenv/versions/3.11.7/bin/python3.11",
    "3.12.1": HOME / ".pyenv/versions/3.12.1/bin/python3.12",
    "3.13.0": HOME / ".pyenv/versions/3.13.0/bin/python3.13",
}
MONITORED = ["3.12.1", "3.13.0"]
OLD = ["3.8.18", "3.9.18", "3.10.13"]     # PyFrameObjects, no co_qualname
CALLS = str(u.TARGETS / "pycalls.py")


def python(name):
    p = PYTHONS[name]
    if not p.exists():
        pytest.skip(f"no CPython {name} here")
    return str(p)


def json_lines(text):
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def py_rows(stdout, prefix="__main__:"):
    rows = {}
    for o in json_lines(stdout):
        if o.get("final"):
            f = o["key"]["function"]
            assert f.startswith(prefix), o
            # (two code objects may share a name: two comprehensions)
            rows[f[len(prefix):]] = rows.get(f[len(prefix):], 0) + o["count"]
    return rows


def own_counts(py, mode):
    p = subprocess.run([py, CALLS, mode], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def def_line(name):
    for i, line in enumerate(Path(CALLS).read_text().splitlines(), 1):
        if line.lstrip().startswith((f"def {name}(", f"async def {name}(")):
            return i
    raise AssertionError(name)


# ---- counts ---------------------------------------------------------------------

@pytest.mark.parametrize("name", list(PYTHONS))
def test_counts_equal_setprofile(name):
    py = python(name)
    want = own_counts(py, "profile")
    assert want["recurse"] == 26 and want["late"] == 4 and want["pause"] == 6
    cp = u.run_uscope(["count", "--json", "py:__main__:*", "--", py, CALLS, "plain"],
                      timeout=90)
    assert cp.returncode == 0, cp.stderr
    got = py_rows(cp.stdout)
    # the module's body and the class body ran before profiling was set
    assert got.pop("<module>") == 1 and got.pop("Account") == 1
    assert got == want


GETITEM = """
import json
calls = {}
def note(name):
    calls[name] = calls.get(name, 0) + 1
class Seq:
    def __getitem__(self, i):
        note("Seq.__getitem__")
        return i
def lookup(self, k):
    note("lookup")
    return k
class Table:
    __getitem__ = lookup
def get(s, i, flag):
    if flag:
        return s[i]
    return 0
def run():
    s, t = Seq(), Table()
    n = 0
    for i in range(1000):
        n += s[i] + t[i]
    for _ in range(100):
        get(s, 0, False)
    return n + get(s, 1, True)  # (its first run, the code long warm)
run()
print("own " + json.dumps(calls, sort_keys=True), flush=True)
"""
EVALUATOR = "py: probes' calls through the agent's frame evaluator (PEP 523)"
MISSES = "without the frame evaluator (CPython gh-104405, fixed in 3.11.4)"


@pytest.mark.parametrize("name", list(PYTHONS))
def test_getitem_from_a_subscript_counted(name, tmp_path):
    """A __getitem__ written in Python, called by subscripts 1,001 and
    1,000 times (one a function of another name the class takes as its
    __getitem__): counted as the functions count themselves, by default and
    through the profile function. 3.11.0 to 3.11.3 (Debian 12's 3.11.2)
    call it from a specialized subscript without a PEP 523 evaluator
    (CPython gh-104405): there uscope counts through the profile function
    unless USCOPE_PY_PROFILE=0 asks for the evaluator, which then misses
    those calls, as doc/python.md says; 3.11.4 on, and 3.8 to 3.10, the
    evaluator counts them all."""
    py = python(name)
    script = tmp_path / "getitem.py"
    script.write_text(GETITEM)
    minor = int(subprocess.run([py, "-c", "import sys; print(sys.version_info[1])"],
                               capture_output=True, text=True).stdout)
    micro = int(subprocess.run([py, "-c", "import sys; print(sys.version_info[2])"],
                               capture_output=True, text=True).stdout)
    misses = minor == 11 and micro < 4
    ways = {"default": None}
    if minor <= 11:
        ways.update(profilefunc={"USCOPE_PY_PROFILE": "1"}, evaluator={"USCOPE_PY_PROFILE": "0"})
    for way, env in ways.items():
        cp = u.run_uscope(["count", "--json", "-vv", "py:__main__:*", "--", py, script],
                          timeout=90, env=env)
        assert cp.returncode == 0, cp.stderr
        own = [json.loads(l[4:]) for l in cp.stdout.splitlines() if l.startswith("own ")]
        assert own == [{"Seq.__getitem__": 1001, "lookup": 1000}], cp.stdout
        got = py_rows(cp.stdout)
        if minor <= 11:
            through_eval = way == "evaluator" or (way == "default" and not misses)
            assert (EVALUATOR in cp.stderr) == through_eval, (way, cp.stderr)
            assert (MISSES in cp.stderr) == (way == "default" and misses), (way, cp.stderr)
        if way == "evaluator" and misses:
            # the documented miss: the calls of the specialized subscripts
            assert got[qual(name, "Seq.__getitem__")] < 1001 and got["lookup"] < 1000, got
            assert got["note"] == 2001, got     # (called by them, through the evaluator)
            continue
        assert got[qual(name, "Seq.__getitem__")] == 1001 and got["lookup"] == 1000, (way, got)
        assert got["note"] == 2001 and got["get"] == 101 and got["run"] == 1, (way, got)


EXECS = """
for i in range(200):
    exec(f"def f{i}(x):\\n    return x\\nf{i}(1)\\nf{i}(2)\\n", {"__name__": "gen"})
"""


@pytest.mark.parametrize("name", list(PYTHONS))
def test_code_objects_made_where_freed_ones_were_count_apart(name, tmp_path):
    """200 functions made by exec, each called twice, then freed: the next
    one is often made at the same address (with an interned name such as
    <module>, the same name too). Each is its own row, named after itself:
    f0 ... f199 twice each, the 200 module bodies once each."""
    script = tmp_path / "execs.py"
    script.write_text(EXECS)
    cp = u.run_uscope(["count", "--json", "py:gen:*", "--", python(name), script], timeout=90)
    assert cp.returncode == 0, cp.stderr
    rows = py_rows(cp.stdout, prefix="gen:")
    assert rows.pop("<module>") == 200
    assert rows == {f"f{i}": 2 for i in range(200)}


@pytest.mark.parametrize("name", MONITORED)
def test_counts_equal_monitoring_in_the_same_run(name):
    """The workload counts its own calls through sys.monitoring (its own
    tool, PROFILER_ID) while uscope counts through another."""
    py = python(name)
    cp = u.run_uscope(["count", "--json", "py:__main__:*", "--", py, CALLS, "monitor"],
                      timeout=90)
    assert cp.returncode == 0, cp.stderr
    own = [json.loads(l[4:]) for l in cp.stdout.splitlines() if l.startswith("own ")]
    assert len(own) == 1, cp.stdout
    want = own[0]
    assert want["recurse"] == 26 and want["Account.add"] == 67
    got = py_rows(cp.stdout)
    assert got.pop("<module>") == 1 and got.pop("Account") == 1
    got.pop("monitored", None)      # called before its tool was set
    assert got == want


# ---- what a hit carries ------------------------------------------------------------

@pytest.mark.parametrize("name", list(PYTHONS))
def test_arguments_returns_and_raised(name):
    check_arguments(name)


def qual(name, q):
    """A qualified name as uscope names it on CPython name: before 3.11 a
    code object has no co_qualname, and its co_name stands for it."""
    return q.rsplit(".", 1)[-1] if name in OLD else q


def check_arguments(name, env=None):
    py = python(name)
    add = qual(name, "Account.add")
    cp = u.run_uscope(["trace", "--json", "-vv", "py:recurse n", f"py:{add} x self",
                       "r:py:fail", "r:py:unwind", "r:py:numbers", "py:late n", "r:py:pause",
                       "--", py, CALLS, "plain"], timeout=90, env=env)
    assert cp.returncode == 0, cp.stderr
    assert (BY_LIST in cp.stderr) == (env is not None)
    ev = json_lines(cp.stdout)

    def args(event, arg):
        return [e["args"][arg] for e in ev if e["event"] == f"__main__:{event}"]

    assert args("recurse", "n") == list(range(25, -1, -1))
    assert len(args(add, "x")) == 67
    assert all(s == "<Account>" for s in args(add, "self"))
    assert args("fail__return", "retval") == ["(raised)"] * 5
    assert args("unwind__return", "retval") == [1]
    # a generator returns at each yield, and last with None
    assert args("numbers__return", "retval") == [0, 1, 2, 3, 4, "None"]
    assert args("late", "n") == [0, 1, 2, 3]
    # a coroutine: suspended once at its await (None), then its value
    assert args("pause__return", "retval") == ["None", 0, "None", 1, "None", 2]
    late = [e for e in ev if e["event"] == "__main__:late"]
    assert late[0]["file"] == CALLS and late[0]["line"] == 1     # compiled from a string


@pytest.mark.parametrize("name", list(PYTHONS))
def test_flow_nests_calls_and_unwinds(name):
    py = python(name)
    cp = u.run_uscope(["flow", "--json", "py:__main__:unwind", "py:__main__:fail", "--", py,
                       CALLS, "plain"], timeout=90)
    assert cp.returncode == 0, cp.stderr
    fl = [(o["type"], o["function"], o["depth"]) for o in json_lines(cp.stdout)]
    assert fl == [("entry", "__main__:unwind", 0)] + \
        [("entry", "__main__:fail", d) for d in range(1, 6)] + \
        [("return", "__main__:fail", d) for d in range(5, 0, -1)] + \
        [("return", "__main__:unwind", 0)]


@pytest.mark.parametrize("name", OLD + MONITORED)
def test_latency_record_report_folded(name, tmp_path):
    py = python(name)
    cp = u.run_uscope(["latency", "--json", "py:__main__:recurse", "py:__main__:worker", "--",
                       py, CALLS, "plain"], timeout=90)
    assert cp.returncode == 0, cp.stderr
    rows = {o["key"]["function"]: o["count"] for o in json_lines(cp.stdout) if o.get("final")}
    assert rows == {"__main__:recurse": 26, "__main__:worker": 3}
    rec = tmp_path / "py.usc"
    cp = u.run_uscope(["record", "-o", rec, "py:__main__:recurse", "py:__main__:worker", "--",
                       py, CALLS, "plain"], timeout=90)
    assert cp.returncode == 0, cp.stderr
    cp = u.run_uscope(["report", "-r", rec, "--json"])
    assert cp.returncode == 0, cp.stderr
    calls = {o["function"]: o["calls"] for o in json_lines(cp.stdout) if "function" in o}
    assert calls == {"__main__:recurse": 26, "__main__:worker": 3}
    cp = u.run_uscope(["export", "-r", rec, "--format", "folded", "-o", tmp_path / "f"])
    assert cp.returncode == 0, cp.stderr
    paths = [l.rsplit(" ", 1)[0] for l in (tmp_path / "f").read_text().splitlines()]
    assert ";".join(["__main__:recurse"] * 26) in paths


# ---- attached, then left --------------------------------------------------------------

TOOLS_SCRIPT = """
import json, sys
def tick(i):
    return i
def recurse(n):
    return recurse(n - 1) + 1 if n else 0
print("ready", flush=True)
while True:
    line = sys.stdin.readline().strip()
    if line == "end":
        break
    if line == "go":
        recurse(25)
    for i in range(100):
        tick(i)
    print(json.dumps([sys.monitoring.get_tool(i) for i in range(6)]), flush=True)
"""


def tools(t):
    t.write("x\n")
    return json.loads(t.readline())


@pytest.mark.parametrize("name", MONITORED)
@pytest.mark.parametrize("how", ["detach", "kill"])
def test_attach_then_no_tool_left(name, how):
    py = python(name)
    t = u.Target([py, "-c", TOOLS_SCRIPT])
    try:
        t.expect("ready")
        assert tools(t) == [None] * 6
        s = u.Background(["count", "--json", "-p", t.pid, "py:__main__:recurse"])
        s.wait_ready()
        # the pending call claims the tool once the main thread runs Python
        for _ in range(200):
            if tools(t)[4] == "uscope":
                break
        else:
            raise AssertionError("no tool was claimed")
        t.write("go\n")
        t.readline()
        if how == "detach":
            s.signal(signal.SIGINT)
            r = s.result()
            assert r.rc == 0, r.stderr
            assert py_rows(r.stdout) == {"recurse": 26}
        else:
            s.signal(signal.SIGKILL)
            s.wait()
        # killed: the agent lets go at the next event it gets, a probed
        # function's call (the others answered DISABLE: no event)
        for _ in range(200):
            if how == "kill":
                t.write("go\n")
                t.readline()
            if tools(t) == [None] * 6:
                break
        else:
            raise AssertionError(f"a tool is left: {tools(t)}")
        t.write("end\n")
        assert t.wait() == 0
    finally:
        if t.alive():
            t.kill()


@pytest.mark.parametrize("name", OLD)
@pytest.mark.parametrize("how", ["detach", "kill"])
@pytest.mark.parametrize("way", ["evaluator", "profilefunc"])
def test_old_attach_then_nothing_left(name, how, way, monkeypatch):
    """3.8 to 3.10 as 3.11 (test_python.py's test_profile_function_removed):
    a count by function through the agent's frame evaluator (3.8:
    PyInterpreterState.eval_frame itself), or with USCOPE_PY_PROFILE=1
    the profile function (3.8: PyThreadState's fields, as
    PyEval_SetProfile sets them), set once the main thread runs Python
    after attach, every call counted, and taken out by the process itself
    after a detach and after uscope's kill -9."""
    from test_python import PF_SCRIPT
    if way == "profilefunc":
        monkeypatch.setenv("USCOPE_PY_PROFILE", "1")
    other = "evaluator" if way == "profilefunc" else "profilefunc"
    t = u.Target([python(name), "-c", PF_SCRIPT])
    try:
        t.expect("ready")
        t.write("x\n")
        t.expect("profilefunc none evaluator none")
        s = u.Background(["count", "--json", "-p", t.pid, "py:tick"])
        s.wait_ready()
        rounds = 0
        for _ in range(200):
            t.write("x\n")
            line = t.readline()
            if f"{way} set" in line:
                break
        else:
            raise AssertionError(f"the {way} was never set")
        assert f"{other} none" in line
        for _ in range(3):      # 100 calls a line, each counted once it is set
            t.write("x\n")
            assert f"{way} set" in t.readline()
            rounds += 1
        if how == "detach":
            s.signal(2)
            r = s.result()
            assert r.rc == 0, r.stderr
            got = py_rows(r.stdout)["tick"]
            assert got % 100 == 0 and got >= 100 * rounds, got
        else:
            s.signal(9)     # the agent lets go when it sees us dead
            s.wait()
        t.write("x\n")
        t.readline()
        t.write("x\n")
        t.expect("profilefunc none evaluator none")
        t.write("end\n")
        assert t.wait() == 0
    finally:
        if t.alive():
            t.kill()


TAKEN_SCRIPT = """
import sys
m = sys.monitoring
m.use_tool_id(3, "a")
m.use_tool_id(4, "b")
def f():
    pass
print("ready", flush=True)
while sys.stdin.readline().strip() != "end":
    f()
    print("ok", flush=True)
"""


@pytest.mark.parametrize("name", MONITORED)
def test_tool_ids_taken_refused_in_one_line(name):
    """Tool ids 4 and 3 both held by the program's own tools: said in one
    line, and the program runs on untouched."""
    py = python(name)
    t = u.Target([py, "-c", TAKEN_SCRIPT])
    try:
        t.expect("ready")
        s = u.Background(["count", "-p", t.pid, "py:f"])
        s.wait_ready()
        for _ in range(2000):
            t.write("x\n")
            t.expect("ok")
            if "both in use" in s.stderr:
                break
        s.signal(signal.SIGINT)
        r = s.result()
        lines = [l for l in u.error_lines(r.stderr) if not l.startswith("uscope: tracing")]
        assert len(lines) == 1 and "4 and 3 are both in use" in lines[0], r.stderr
        t.write("end\n")
        assert t.wait() == 0
    finally:
        if t.alive():
            t.kill()


# ---- launchers ----------------------------------------------------------------------

def launched(argv, env=None, cwd=None):
    """count py:recurse through a launcher: the rows."""
    full = dict(os.environ)
    full.update(env or {})
    cp = subprocess.run([str(u.uscope_path()), "count", "--json", "py:__main__:recurse",
                         "py:__main__:late", "--"] + [str(a) for a in argv],
                        capture_output=True, text=True, timeout=90, env=full, cwd=cwd)
    assert cp.returncode == 0, cp.stderr
    return py_rows(cp.stdout)


WANT = {"recurse": 26, "late": 4}


@pytest.mark.parametrize("name", MONITORED)
def test_through_a_pyenv_shim(name):
    python(name)
    minor = name.rsplit(".", 1)[0]
    shim = HOME / f".pyenv/shims/python{minor}"
    if not shim.exists():
        pytest.skip("no pyenv shim here")
    assert launched([shim, CALLS, "plain"], env={"PYENV_VERSION": name}) == WANT


@pytest.mark.parametrize("name", MONITORED)
def test_through_env(name):
    py = python(name)
    path = f"{Path(py).parent}:/usr/bin:/bin"
    assert launched(["env", "PYTHONUNBUFFERED=1", Path(py).name, CALLS, "plain"],
                    env={"PATH": path}) == WANT


@pytest.mark.parametrize("name", MONITORED)
def test_through_a_venv(name, tmp_path):
    py = python(name)
    subprocess.run([py, "-m", "venv", "--without-pip", tmp_path / "venv"], check=True,
                   timeout=120)
    assert (tmp_path / "venv/bin/python").is_symlink()
    assert launched([tmp_path / "venv/bin/python", CALLS, "plain"]) == WANT


@pytest.mark.parametrize("name", MONITORED)
def test_with_dash_m(name):
    py = python(name)
    assert launched([py, "-m", "pycalls", "plain"], cwd=str(u.TARGETS)) == WANT


@pytest.mark.parametrize("name", MONITORED)
def test_through_a_shell_script_ending_in_exec(name, tmp_path):
    py = python(name)
    sh = tmp_path / "run.sh"
    sh.write_text(f"#!/bin/sh\nset -e\ncd /\nexec {py} \"$@\"\n")
    sh.chmod(0o755)
    assert launched([sh, CALLS, "plain"]) == WANT


# ---- $pystack ------------------------------------------------------------------------

PYSTACK = str(u.TARGETS / "pystack.py")
MARK = u.target("libpymark.so")


def pystack_events(name, tmp_path, env=None, verbose=False, engine=None):
    """At libpymark's pymark the workload takes traceback.extract_stack() on
    the same line. -> (the workload's stacks by tag, the events, stderr)."""
    from test_python import workload_stacks
    py = python(name)
    out = tmp_path / "ev.json"
    argv = [str(u.uscope_path()), "trace", "--json", "-o", str(out)] + \
        (["-vv"] if verbose else []) + (["-e", engine] if engine else []) + \
        [f"{MARK}:pymark tag=$arg1:s32 $pystack:128", "--", "env", f"LD_PRELOAD={MARK}",
         py, PYSTACK, MARK, "wait"]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **env) if env else None)
    u.REGISTRY.uscopes.append(p)
    try:
        # the workload waits at its end for a line: every event written first
        for _ in range(6000):
            # (whole lines only: the file is being written)
            if out.exists() and out.read_text().count("\n") >= 20:
                break
            if p.poll() is not None:
                break
            time.sleep(0.01)    # (a bounded poll of the output, as test_python's)
        stdout, stderr = p.communicate("", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stderr
    return workload_stacks(stdout), json_lines(out.read_text()), stderr


def check_pystack(name, want, events):
    assert len(want) == 20 and len(events) == len(want)
    for e in events:
        tid, frames = want[e["args"]["tag"]]
        got = [(f["sym"], f["file"], f["line"]) for f in e["args"]["pystack"]]
        assert e["tid"] == tid and got == frames, (name, e["args"]["tag"], got, frames)


@pytest.mark.parametrize("name", list(PYTHONS))
def test_pystack_equals_traceback(name, tmp_path):
    """$pystack must be the workload's own stack (inject: walked where the
    probe runs), on each CPython."""
    want, events, _ = pystack_events(name, tmp_path)
    check_pystack(name, want, events)


DEBUG_OFFSETS = {"USCOPE_PY_DEBUG_OFFSETS": "1"}
TAKEN = "(CPython 3.13.0): walking with its own _Py_DebugOffsets"
# what 3.14 rests on: no thread-specific key, the interpreter's thread list
BY_LIST = "a thread's state found in its interpreter's thread list"


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_debug_offsets_over_the_table_pystack(engine, tmp_path):
    """3.13 with its own _Py_DebugOffsets forced over uscope's table
    (USCOPE_PY_DEBUG_OFFSETS=1), and each thread's state found as on 3.14
    (its interpreter's thread list: no thread-specific key), where the
    probe runs (the inject agent by the thread's pthread_t, the bpf program
    by its TID): the same frames as the workload's own
    (traceback.extract_stack(), in each of its threads), the same as with
    the table and the key."""
    want, events, stderr = pystack_events("3.13.0", tmp_path, DEBUG_OFFSETS, verbose=True,
                                          engine=engine)
    assert TAKEN in stderr and BY_LIST in stderr
    check_pystack("3.13.0", want, events)
    assert len({e["tid"] for e in events}) > 1     # (more than one thread's state looked for)
    (tmp_path / "table").mkdir()
    want2, events2, stderr2 = pystack_events("3.13.0", tmp_path / "table", verbose=True,
                                             engine=engine)
    assert TAKEN not in stderr2 and BY_LIST not in stderr2
    check_pystack("3.13.0", want2, events2)

    def by_tag(evs):
        return {e["args"]["tag"]: [(f["sym"], f["file"], f["line"]) for f in e["args"]["pystack"]]
                for e in evs}
    assert by_tag(events) == by_tag(events2)


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_debug_offsets_thread_states_made_and_deleted(engine, tmp_path, monkeypatch):
    """A C thread that makes a thread state at each call into Python and
    deletes it after (PyGILState_Ensure, PyGILState_Release), read as 3.14
    is (3.13 with USCOPE_PY_DEBUG_OFFSETS=1: the thread list, the inject
    agent keeping the state it found): $pystack at each call names that
    call's own function. The program finalises CPython (which frees every
    code object) only once the test has seen the 8 events: on bpf uscope
    names a code object after the event, from the living process."""
    d, minor = libpython("3.13.0")
    exe = tmp_path / "pygilstate"
    subprocess.run(["cc", "-O1", "-g", "-rdynamic", "-o", str(exe),
                    str(u.TARGETS / "pygilstate.c"), f"-L{d}", f"-lpython{minor}",
                    f"-Wl,-rpath,{d}", "-lpthread"], check=True, capture_output=True,
                   timeout=120)
    fifo = tmp_path / "finalise"
    os.mkfifo(fifo)
    for k, v in DEBUG_OFFSETS.items():
        monkeypatch.setenv(k, v)
    bg = u.Background(["trace", "--json", "-vv", "-e", engine,
                       f"{exe}:mark i=$arg1:s32 $pystack", "--", str(exe), "8", str(fifo)],
                      json=True)

    def marks():
        text = bg.stdout_path.read_text(errors="surrogateescape")
        text = text[:text.rfind("\n") + 1]         # whole lines only
        return [e for e in json_lines(text) if e.get("event") == "mark"]
    def eight():
        n = len(marks())
        if n != 8 and bg.p.poll() is not None:
            raise AssertionError(f"uscope exited after {n} mark events: {bg.stderr}")
        return n == 8 or n
    try:
        u.wait_true("8 mark events", eight, 90)
    finally:
        with open(fifo, "w"):                       # (the program finalises CPython, exits)
            pass
    assert bg.wait(90) == 0, bg.stderr
    assert BY_LIST in bg.stderr
    ev = marks()
    assert [e["args"]["i"] for e in ev] == list(range(8))
    for e in ev:
        i = e["args"]["i"]
        got = [(f["sym"], f["file"], f["line"]) for f in e["args"]["pystack"]]
        want = [(f"cycle{i}", "<string>", 3), ("<module>", "<string>", 4)]
        if engine == "bpf":
            # (each call's module code is freed once it has run, before
            # uscope names it from the bpf event: doc/python.md)
            got, want = got[:1] + [len(got)], want[:1] + [2]
        assert got == want, got


def test_debug_offsets_over_the_table_counts():
    """py: counts on 3.13 with its debug offsets forced over the table:
    those of the table, and CPython's own profiling's."""
    py = python("3.13.0")
    want = own_counts(py, "profile")
    rows = []
    for env in (DEBUG_OFFSETS, None):
        cp = u.run_uscope(["count", "--json", "-vv", "py:__main__:*", "--", py, CALLS, "plain"],
                          timeout=90, env=env)
        assert cp.returncode == 0, cp.stderr
        assert (TAKEN in cp.stderr) == (env is not None)
        got = py_rows(cp.stdout)
        assert got.pop("<module>") == 1 and got.pop("Account") == 1
        assert got == want
        rows.append(got)
    assert rows[0] == rows[1]


def test_debug_offsets_over_the_table_arguments():
    """py: arguments and returns on 3.13 with its debug offsets forced over
    the table, as 3.14 takes them (no thread-specific key: the callback's
    thread state from PyThreadState_GetUnchecked): the same values."""
    check_arguments("3.13.0", DEBUG_OFFSETS)


@pytest.mark.parametrize("name", MONITORED)
def test_pystack_where_no_python_runs_says_so(name):
    """Every row of a $pystack count says what it is: frames, or that the
    thread ran no Python code there (CPython starting, a program that is
    not CPython)."""
    py = python(name)
    cp = u.run_uscope(["count", "--json", "libc:malloc $pystack", "--", "/bin/sh", "-c",
                       f"/bin/true; exec {py} -c 'def f():\n    return [0] * 100000\nf()'"],
                      timeout=60)
    assert cp.returncode == 0, cp.stderr
    rows = [o for o in json_lines(cp.stdout) if o.get("final")]
    assert rows
    none = [o for o in rows if o["key"]["pystack"] ==
            [{"end": "no Python frames: the thread runs no Python code here"}]]
    framed = [o for o in rows if o not in none]
    assert none and framed
    assert all(f.get("python") for o in framed for f in o["key"]["pystack"] if "end" not in f)


# ---- a C program that embeds CPython ------------------------------------

def libpython(name):
    """-> (the directory of libpythonX.Y.so, X.Y) of a CPython, or skip."""
    minor = {"debian-3.11": "3.11"}.get(name, name.rsplit(".", 1)[0])
    d = Path("/usr/lib/x86_64-linux-gnu") if name == "debian-3.11" else \
        PYTHONS[name].parent.parent / "lib"
    if not (d / f"libpython{minor}.so").exists():
        pytest.skip(f"no libpython{minor}.so to link for {name}")
    return d, minor


def embedder(name, tmp_path):
    """tests/targets/pyembed.c linked with the CPython's libpython."""
    d, minor = libpython(name)
    exe = tmp_path / f"pyembed{minor}"
    subprocess.run(["cc", "-O1", "-g", "-o", str(exe), str(u.TARGETS / "pyembed.c"),
                    f"-L{d}", f"-lpython{minor}", f"-Wl,-rpath,{d}"], check=True,
                   capture_output=True, timeout=120)
    return exe


@pytest.mark.parametrize("name", list(PYTHONS))
def test_embedded_command(name, tmp_path):
    """py: probes in a C program that links libpython and runs a script:
    its CPython is the library's."""
    assert launched([embedder(name, tmp_path), CALLS, "plain"]) == WANT


@pytest.mark.parametrize("name", list(PYTHONS))
def test_embedded_pid(name, tmp_path):
    exe = embedder(name, tmp_path)
    t = u.Target([exe, CALLS, "wait"])
    try:
        t.expect("ready")
        bg = u.Background(["count", "--json", "-p", t.pid, "py:__main__:recurse",
                           "py:__main__:late"])
        bg.wait_ready()
        t.write("go\n")
        t.expect("done")
        t.write("end\n")
        assert t.wait() == 0
        r = bg.result()
    finally:
        if t.alive():
            t.kill()
    assert r.rc == 0, r.stderr
    assert py_rows(r.stdout) == WANT, r.stderr
