"""$ustack through JIT-compiled code: frames without CFI (in anonymous
executable memory, or V8's builtins in node's .text) stepped by frame
pointer, and named from the process's perf map (/tmp/perf-PID.map), as
perf does.

The target: node 20 under --perf-basic-prof running
tests/targets/jit/emitline.js, where driveLoop() calls emitLine() N times
and each calls fs.writeSync() (a write(2)). Its tiers are pinned
(--always-sparkplug: every function is compiled to baseline code before
it first runs; --no-opt: never optimized again, so emitLine is not inlined
and no call runs other code than the others): each of the N calls runs the
same code, so its stack is one stack. uscope attaches (-p) once node is up
(its mappings, the JIT's code space among them, known before the first
hit), then the script makes its calls and exits.

Skipped where node is absent."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import uscope_e2e as u

NODE = shutil.which("node") or shutil.which("nodejs")
SCRIPT = u.TARGETS / "jit" / "emitline.js"
CALLS = 2000
LINE = len("line 0\n")	# the bytes emitLine writes
ENGINES = ["inject", "bpf"]

pytestmark = pytest.mark.skipif(not NODE, reason="node is not installed")


def node_run(args, calls=CALLS):
    """Start the script under node --perf-basic-prof, attach `uscope ARGS
    -p PID`, let the script make its calls: (uscope's CompletedProcess, the
    node pid)."""
    # (V8's log, which --perf-basic-prof starts, in a directory of its own)
    with tempfile.TemporaryDirectory() as d:
        return attached_run([NODE, "--perf-basic-prof", "--always-sparkplug", "--no-opt",
                             f"--logfile={d}/v8.log", "--no-logfile-per-isolate", SCRIPT,
                             calls], args, f"done {calls} {calls * LINE}")


def attached_run(target_argv, args, done):
    """Start a target that prints "ready", then waits for a line, does its
    calls and prints done; attach `uscope ARGS -p PID` between:
    (uscope's CompletedProcess, the target's pid)."""
    t = u.Target(target_argv)
    perf_map = Path(f"/tmp/perf-{t.pid}.map")
    # uscope's output to a file, not a pipe read at the end: with -p, the
    # inject engine holds the target under ptrace to follow its forks, and a
    # uscope blocked on a full pipe would hold the target's exit too
    err = tempfile.TemporaryFile("w+")
    outf = tempfile.TemporaryFile("w+")
    try:
        t.expect("ready")
        argv = [str(u.uscope_path())] + [str(a) for a in args] + ["-p", str(t.pid)]
        p = subprocess.Popen(argv, stdout=outf, stderr=err, text=True)
        u.REGISTRY.uscopes.append(p)
        deadline = time.monotonic() + u.TIMEOUT
        while True:
            err.seek(0)
            text = err.read()
            if re.search(r"^uscope: tracing", text, re.M):
                break
            assert p.poll() is None, f"uscope ended before it was ready:\n{text}"
            assert time.monotonic() < deadline, f"uscope was not ready:\n{text}"
            time.sleep(0.02)
        t.write("go\n")
        t.expect(done)
        assert t.wait() == 0
        try:
            p.wait(timeout=u.TIMEOUT)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)
            p.wait(timeout=u.TIMEOUT)
        outf.seek(0)
        out = outf.read()
        err.seek(0)
        return subprocess.CompletedProcess(argv, p.returncode, out, err.read()), t.pid
    finally:
        if t.alive():
            t.kill()
        err.close()
        outf.close()
        try:
            perf_map.unlink()
        except OSError:
            pass


def lost_hits(stderr):
    """The hits uscope says it lost (its warnings)."""
    return sum(int(n) for n in re.findall(r"^uscope: warning: .*?(\d+) hits lost", stderr, re.M))


def emit_rows(rows):
    """The counted rows of fs.writeSync's writes (node::fs::WriteString's)
    in emitLine: not those of V8's perf map, which it writes as it compiles
    (the first call compiles writeSync's callees)."""
    def has(r, name):
        return any(name in (f.get("sym") or "") for f in r["key"]["ustack"])
    return [r for r in rows if has(r, "emitLine") and has(r, "node::fs::WriteString")]


@pytest.mark.parametrize("stack_mode", ["walk", "copy"])
@pytest.mark.parametrize("engine", ENGINES)
def test_node_frames_named_and_one_stack(engine, stack_mode):
    """write's stack goes from libc through node's C++ and V8's builtins
    (CFI-less: frame pointers) into the JIT code of writeSync, emitLine and
    driveLoop (named from the perf map, marked jit), then back into
    CFI-described code (node::, the C++ that started the script) to
    _start; the 2,000 calls are one stack (a site). Alike walked where the
    probe runs and from a copy of the stack (libdw's frame-pointer step
    kept where the walker takes it)."""
    cp, pid = node_run(["count", "--json", "-e", engine, "--stack-mode", stack_mode,
                        "libc:write $ustack"])
    assert cp.returncode == 0, cp.stderr
    rows = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
    mine = emit_rows(rows)
    assert mine, f"no stack through emitLine:\n{cp.stdout[-3000:]}\n{cp.stderr}"
    # libc's write is one site (its copy of itself, the inlined
    # __libc_write, is not a second one: one hit a call), one stack
    by_site = {}
    for r in mine:
        by_site.setdefault(r["key"]["ustack"][0]["addr"], []).append(r["count"])
    # one stack a site, every call of it, but the hits uscope says it lost
    # (a loaded machine: a copy of 8 KiB a hit that found no room)
    lost = lost_hits(cp.stderr)
    assert len(by_site) == 1 and all(len(v) == 1 for v in by_site.values()), by_site
    got = sum(v[0] for v in by_site.values())
    assert CALLS - lost <= got <= CALLS, (by_site, cp.stderr)
    for r in mine:
        st = [f for f in r["key"]["ustack"] if "sym" in f]
        names = [f["sym"] or "" for f in st]
        jit = [f.get("jit", False) for f in st]
        assert "end" not in r["key"]["ustack"][-1], r["key"]["ustack"][-1]
        assert names[-1] == "_start", names
        i = next(k for k, n in enumerate(names) if "emitLine" in n)
        j = next(k for k, n in enumerate(names) if "driveLoop" in n)
        w = next(k for k, n in enumerate(names) if "writeSync" in n)
        # innermost first: write's caller chain up to the script's functions
        assert 0 < w < i < j, names
        assert names[i].startswith("JS:") and "emitline.js" in names[i], names[i]
        assert jit[i] and jit[j] and jit[w], list(zip(names, jit))
        assert st[i]["module"] is None
        # below them: libc's write, then node's C++ (CFI) reached through
        # V8's CEntry builtin (no CFI); above: node's C++ again
        assert any(n.startswith("Builtins_CEntry") for n in names[:w]), names
        assert any("node::fs::WriteString" in n for n in names[:w]), names
        assert any(n.startswith("node::") for n in names[j:]), names
        # only the perf map's frames are marked
        assert all(f.get("jit", False) == (f["module"] is None) for f in st), st
    # every stack walked where the probe ran: none needed a copy but those
    # whose JIT code was compiled since the attach (nomodule: read again)
    if stack_mode == "copy":
        return
    m = re.search(r"^uscope: \d+ hits? fell back to a copy of the stack: (.*)$",
                  cp.stderr, re.M)
    # (noproc: a hit before bpf had the process's tables, on a loaded machine)
    assert not m or set(kv.split()[0] for kv in m.group(1).split(", ")) <= \
        {"nomodule", "noproc"}, \
        cp.stderr


def test_node_first_calls_interpreted():
    """node's own tiers (no --always-sparkplug): a function's first calls run
    in V8's interpreter, whose frames are one builtin for every function
    (Builtins_InterpreterEntryTrampoline), then in its compiled code, named
    in the perf map. Every one of the 4,000 writes is counted with its whole
    stack (to _start), and each names emitLine, or the interpreter's builtin
    where emitLine ran interpreted: a row never just lacks the JS frames."""
    calls = 4000
    with tempfile.TemporaryDirectory() as d:
        cp, _ = attached_run([NODE, "--perf-basic-prof", f"--logfile={d}/v8.log",
                              "--no-logfile-per-isolate", SCRIPT, calls],
                             ["count", "--json", "-e", "inject", "libc:write $ustack"],
                             f"done {calls} {calls * LINE}")
    assert cp.returncode == 0, cp.stderr
    rows = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]

    def names(r):
        return [f.get("sym") or "" for f in r["key"]["ustack"] if "addr" in f]
    mine = [r for r in rows if any("node::fs::WriteString" in n for n in names(r))]
    named = sum(r["count"] for r in mine if any("emitLine" in n for n in names(r)))
    interp = sum(r["count"] for r in mine if not any("emitLine" in n for n in names(r)))
    assert calls - lost_hits(cp.stderr) <= named + interp <= calls, (named, interp, cp.stderr)
    assert named > calls // 2, (named, interp)
    for r in mine:
        n = names(r)
        assert n[-1] == "_start" and "end" not in r["key"]["ustack"][-1], n
        assert any("emitLine" in x for x in n) or \
            any(x.startswith("Builtins_InterpreterEntryTrampoline") for x in n), n


@pytest.mark.parametrize("engine", ENGINES)
def test_node_folded_marks_jit(engine):
    """count --folded: a JIT frame ends in perf's _[j] mark, its name's
    spaces as underscores; one line for the calls of a site."""
    cp, _ = node_run(["count", "--folded", "-e", engine, "libc:__write $ustack"])
    assert cp.returncode == 0, cp.stderr
    # libc's __write is one site (not also its inlined copy of itself):
    # one line for every call
    lines = sorted(l for l in cp.stdout.splitlines() if "emitLine" in l and "WriteString" in l)
    assert len(lines) == 1, lines
    path, _, n = lines[0].rpartition(" ")
    got = int(n)
    assert CALLS - lost_hits(cp.stderr) <= got <= CALLS, (lines, cp.stderr)
    frames = path.split(";")
    assert frames[0] == "_start" and frames[-1] == "__write", frames
    jit = [f for f in frames if f.endswith("_[j]")]
    assert [f for f in jit if "emitLine" in f or "driveLoop" in f] == [
        next(f for f in frames if "driveLoop" in f), next(f for f in frames if "emitLine" in f)]
    assert all(f.startswith("JS:") and " " not in f for f in jit), jit


def test_node_text_marks_jit():
    """trace: a JIT frame's line is "NAME+0xOFF [jit]"."""
    cp, _ = node_run(["trace", "-e", "inject", "libc:__write $ustack"], calls=3)
    assert cp.returncode == 0, cp.stderr
    # the events' stacks (an event's line, then its frames indented)
    events = re.split(r"^(?=\S)", cp.stdout, flags=re.M)
    mine = [e for e in events if "WriteString" in e and "emitLine" in e]
    assert len(mine) == 3, cp.stdout[-3000:]	# one hit a call
    emit = [l.strip() for e in mine for l in e.splitlines() if "emitLine" in l]
    assert len(emit) == len(mine), mine
    for l in emit:
        assert re.fullmatch(r"JS:\S*emitLine \S*emitline\.js:\d+:\d+\+0x[0-9a-f]+ \[jit\]", l), l


PYS = {v: Path.home() / f".pyenv/versions/{v}/bin/python{v.rsplit('.', 1)[0]}"
       for v in ("3.12.1", "3.13.0")}


@pytest.mark.parametrize("version", sorted(PYS))
@pytest.mark.parametrize("engine", ENGINES)
def test_python_perf_trampolines(engine, version):
    """python3.12 and 3.13 -X perf: each Python call goes through a
    trampoline in anonymous memory, named py::QUALNAME:FILE in the perf map:
    the stack names it (jit), and $pystack's splice still puts the Python
    frame in place of the evaluator's call it makes. Their x86-64
    trampoline keeps no frame pointer (sub $8, %rsp; call *%rcx): a step by
    frame pointer through it would read a frame that is not there. Known by
    its shape (stack/unwjit.c), it is stepped as its code says, and the walk
    goes on with its caller's CFI (py_trampoline_evaluator) through each
    Python call's trampoline to main's and _start: every walker, where the
    probe runs and from a copy alike (a hit that met the trampolines'
    arena before uscope had read its mapping falls back to a copy). On
    inject each call's stack is one stack."""
    py = PYS[version]
    if not py.exists():
        pytest.skip(f"no CPython {version} (~/.pyenv/versions/{version})")
    script = u.TARGETS / "jit" / "emitline.py"
    cp, _ = attached_run([py, "-X", "perf", script, CALLS],
                         ["count", "--json", "-e", engine, "libc:__write $ustack"],
                         f"done {CALLS} {CALLS * LINE}")
    assert cp.returncode == 0, cp.stderr
    rows = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]

    def names(r):
        return [f.get("sym") or "" for f in r["key"]["ustack"] if "addr" in f]

    # every write of emit_line's: through its trampoline
    mine = [r for r in rows if any(n.startswith("py::emit_line:") for n in names(r))]
    assert mine, cp.stdout[-3000:]
    by_site = {}
    for r in mine:
        by_site.setdefault(r["key"]["ustack"][0]["addr"], []).append(r["count"])
    got = sum(sum(v) for v in by_site.values())
    assert all(sum(v) <= CALLS for v in by_site.values()), by_site
    assert len(by_site) * CALLS - lost_hits(cp.stderr) <= got <= len(by_site) * CALLS, \
        (by_site, cp.stderr)
    if engine == "inject":	# one stack a site
        assert all(len(v) == 1 for v in by_site.values()), (by_site, cp.stderr)
    spliced = 0
    for r in mine:
        st = [f for f in r["key"]["ustack"] if "addr" in f]
        n = names(r)
        t = next(k for k, x in enumerate(n) if x.startswith("py::emit_line:"))
        assert "os_write" in n[:t], n
        # the trampoline that entered the evaluator: named, marked; its
        # caller by the trampoline's own rule, then by the CFI
        assert n[t].endswith("emitline.py") and st[t]["jit"] and st[t]["module"] is None, st[t]
        assert n[t + 1] == "py_trampoline_evaluator", n
        # each Python call's trampoline in turn (drive_loop's, the
        # module's), then CPython's C to main (python's main jumps to
        # Py_BytesMain: no frame of its own) and _start, the outermost
        rest = [x[:x.index(":", 4)] for x in n[t + 1:] if x.startswith("py::")]
        assert rest == ["py::drive_loop", "py::<module>"], n
        assert "Py_BytesMain" in n and n[-1] == "_start", n
        assert "end" not in r["key"]["ustack"][-1], r["key"]["ustack"][-1]
        assert all(f.get("jit", False) == (f["module"] is None) for f in st if
                   not f.get("python")), st
        # the evaluator's frame below it, replaced by the Python frame it
        # ran (bpf reads the Python frames where the probe runs: a read
        # that faults leaves the evaluator's frame, as without -X perf)
        if engine == "inject" or n[t - 1] != "_PyEval_EvalFrameDefault":
            assert n[t - 1] == "emit_line" and st[t - 1].get("python"), n
            assert not st[t - 1].get("jit"), st[t - 1]
            spliced += r["count"]
    assert spliced, by_site
