"""$ustack: the user stack at a hit, unwound with the CFI (the inject
engine's agent copies the registers and the top of the stack; the session
unwinds the copy with libdw and names the frames).

The reference is gdb: the same program stopped by a breakpoint at the
probed function's first instruction, its `bt` read through gdb's Python API
(tests/e2e/gdb_frames.py), frame by frame. Both processes load at their own
addresses (gdb disables ASLR), so a frame compares as (its file, its offset
in that file), by name too for our own binary and python3.11, and by file
offset only in libc, whose functions have aliases (gdb's __GI___qsort_r is
the ELF symbol qsort_r, __GI_raise is gsignal).

The targets: tests/targets/stacks.c, built -O2 -fomit-frame-pointer as
Debian builds its packages (a frame-pointer walk goes wrong there), and
Debian's own /usr/bin/python3.11 (no frame pointers, no .symtab)."""

import functools
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import run_uscope, target

# bpf gets $ustack in parallel with this file (on main): its cases fail until
# that lands.
ENGINES_STACK = ["inject", "bpf"]

STACKS = target("stacks")
STACKS_C = u.TARGETS / "stacks.c"
PYTHON = "/usr/bin/python3.11"
GDB_SCRIPT = Path(__file__).resolve().parent / "gdb_frames.py"
SIGFRAME = "<signal handler called>"
LIMIT_END = "more frames: a larger :N shows more"
COPY_END = "the stack copied ends (--stack-size copies more)"
FRAME_KEYS = {"addr", "sym", "off", "module", "file", "line", "inlined"}

# mode of tests/targets/stacks.c -> the function probed (and where gdb stops)
MODES = {"qsort": "cmp", "inline": "leaf", "signal": "in_handler", "thread": "thread_work"}

# modules whose frames also compare by name (libc's only by offset: aliases)
NAMED = {"stacks", "python3.11"}


# --------------------------------------------------------------------------
# gdb

def gdb_frames(func, argv):
    """gdb's backtrace at the first hit of a breakpoint on func's first
    instruction (`break *func`: no prologue skip, where uscope's probe
    fires), past main and the entry point as uscope's stacks go, as
    gdb_frames.py prints it: [dict]."""
    cmd = ["gdb", "-batch", "-nx", "-q",
           "-iex", "set debuginfod enabled off",
           "-iex", "set auto-load python-scripts off",
           "-ex", "set pagination off",
           "-ex", "set backtrace past-main on",
           "-ex", "set backtrace past-entry on",
           "-ex", "handle SIGUSR1 nostop noprint pass",
           "-ex", f"break *{func}",
           "-ex", "run",
           "-x", str(GDB_SCRIPT),
           "-ex", "kill",
           "--args"] + [str(a) for a in argv]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    out = r.stdout
    assert re.search(rf'^(Thread \d+ "[^"]*" hit )?Breakpoint 1, (0x[0-9a-f]+ in )?'
                     rf"{re.escape(func)} ", out, re.M), \
        f"gdb did not stop at {func}:\n{out}\n{r.stderr}"
    frames = [json.loads(l[len("FRAME "):]) for l in out.splitlines() if l.startswith("FRAME ")]
    assert "FRAMES END" in out.splitlines() and frames, f"no backtrace from gdb:\n{out}\n{r.stderr}"
    return frames


# --------------------------------------------------------------------------
# Symbols of a module, to place uscope's frames in their files

def _nm(args):
    r = subprocess.run(["nm", "--defined-only"] + args, capture_output=True, text=True)
    syms = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TtWwi":
            name = f[2].split("@")[0]
            syms.setdefault(name, set()).add(int(f[0], 16))
            # a clone (msort_with_tmp.part.0) goes by its function's name
            # in the debug info, as uscope and gdb name it
            syms.setdefault(name.split(".")[0], set()).add(int(f[0], 16))
    return syms


def debug_file(path):
    """The separate debug file of path (by build ID), or None."""
    m = re.search(r"Build ID: ([0-9a-f]+)", u._run(["readelf", "-nW", str(path)]))
    if not m:
        return None
    p = Path("/usr/lib/debug/.build-id") / m.group(1)[:2] / (m.group(1)[2:] + ".debug")
    return p if p.exists() else None


@functools.lru_cache(maxsize=None)
def module_syms(path):
    """name -> {link-time addresses}: .symtab, .dynsym and the debug file's."""
    syms = {}
    srcs = [[str(path)], ["-D", str(path)]]
    dbg = debug_file(path)
    if dbg:
        srcs.append([str(dbg)])
    for args in srcs:
        for name, addrs in _nm(args).items():
            syms.setdefault(name, set()).update(addrs)
    return syms


def file_offset(path, vaddr):
    try:
        return u.file_offset(path, vaddr)
    except ValueError:
        return None


def file_bases(frames, paths):
    """uscope's frames carry absolute addresses (of a process now gone) and
    symbol+offset or, where no symbol covers them, the file offset: the
    address where each module's file offset 0 was, one that every frame of
    it agrees with. -> {module: address}"""
    cands = {}
    for fr in frames:
        if fr["inlined"] or fr["sym"] == SIGFRAME or not fr["module"]:
            continue
        path, addr = paths[fr["module"]], int(fr["addr"], 16)
        if fr["sym"] is None:
            c = {addr - fr["off"]}
        else:
            offs = {file_offset(path, a + fr["off"]) for a in module_syms(path).get(fr["sym"], ())}
            c = {addr - o for o in offs if o is not None}
        assert c, f"{fr['sym']} is no symbol of {path}: {fr}"
        cands[fr["module"]] = cands[fr["module"]] & c if fr["module"] in cands else c
    for m, c in cands.items():
        assert len(c) == 1, f"the frames of {m} disagree on where it is loaded: {sorted(c)}\n" \
            + "\n".join(map(str, frames))
    return {m: c.pop() for m, c in cands.items()}


# --------------------------------------------------------------------------
# Both sides as comparable rows

def row(kind, module, fileoff, name, file, line):
    return (kind, module, fileoff, name if module in NAMED and kind != "signal" else None,
            os.path.basename(file) if file else None, line)


def gdb_rows(frames):
    rows = []
    for f in frames:
        if f["type"] == "tailcall":
            # gdb makes up a frame for a call it finds replaced by a jump
            # (DWARF call site info: libc's qsort tail-calls qsort_r, and
            # __pthread_kill_internal __pthread_kill_implementation); it is
            # not on the stack, no unwinder that reads the stack sees it
            continue
        kind = {"inline": "inline", "sigtramp": "signal", "normal": "call"}[f["type"]]
        rows.append(row(kind, os.path.basename(f["path"]) if f["path"] else None,
                        f["fileoff"], f["name"], f["file"], f["line"]))
    return rows


def uscope_rows(frames, bases):
    rows = []
    for fr in frames:
        kind = "inline" if fr["inlined"] else "signal" if fr["sym"] == SIGFRAME else "call"
        base = bases.get(fr["module"])
        rows.append(row(kind, fr["module"],
                        int(fr["addr"], 16) - base if base is not None else None,
                        fr["sym"], fr["file"], fr["line"]))
    return rows


def fmt_rows(rows):
    return "\n".join(f"  {k:6} {m}+{o:#x} {n or ''} {f or ''}:{l}" if o is not None else
                     f"  {k:6} {m} {n or ''} {f or ''}:{l}" for k, m, o, n, f, l in rows)


EVAL = "_PyEval_EvalFrameDefault"


def python_runs(stack):
    """A stack in which uscope put Python frames in place of each
    _PyEval_EvalFrameDefault frame: the native stack, each run of Python
    frames one EVAL frame again (where it was is not kept: no offset), and
    the runs, innermost first."""
    native, runs = [], []
    for fr in stack:
        if not fr.get("python"):
            native.append(fr)
        elif native and native[-1].get("eval"):
            runs[-1].append((fr["sym"], fr["file"], fr["line"]))
        else:
            native.append({"eval": True})
            runs.append([(fr["sym"], fr["file"], fr["line"])])
    return native, runs


def compare_with_gdb(stack, gframes, python=False):
    """uscope's stack (a JSON array, complete) against gdb's frames; python:
    gdb's _PyEval_EvalFrameDefault frames are where uscope's runs of Python
    frames are (python_runs)."""
    evals = []
    if python:
        stack, _ = python_runs(stack)
        evals = [i for i, fr in enumerate(stack) if fr.get("eval")]
        stack = [fr for fr in stack if not fr.get("eval")]
    assert stack and all(set(fr) == FRAME_KEYS for fr in stack), \
        f"the stack is incomplete or not frames: {stack}"
    paths = {os.path.basename(f["path"]): f["path"] for f in gframes if f["path"]}
    missing = {fr["module"] for fr in stack} - set(paths)
    assert not missing, f"uscope's stack has modules gdb's has not: {missing}\n{stack}"
    ours = uscope_rows(stack, file_bases(stack, paths))
    for i in evals:
        ours.insert(i, ("call", "python3.11", None, EVAL, None, 0))
    theirs = gdb_rows(gframes)
    if python:
        theirs = [("call", m, None, n, f, l) if n == EVAL else (k, m, o, n, f, l)
                  for k, m, o, n, f, l in theirs]
    assert ours == theirs, \
        f"uscope's stack:\n{fmt_rows(ours)}\ngdb's bt:\n{fmt_rows(theirs)}"
    return ours


def fallbacks(stderr):
    """The summary's "N hits fell back to a copy of the stack: why n, ..."
    as {why: n} ({} without it)."""
    m = re.search(r"^uscope: (\d+) hits? fell back to a copy of the stack: (.*)$", stderr, re.M)
    if not m:
        return {}
    got = {w: int(n) for w, n in (kv.split() for kv in m.group(2).split(", "))}
    assert sum(got.values()) == int(m.group(1)), m.group(0)
    return got


def first_stack(r, event):
    r.check(ready=1)
    evs = r.named(event)
    assert evs, f"no {event} event\n{r.describe()}"
    st = evs[0].args.get("ustack")
    assert isinstance(st, list), f"no stack in {evs[0].line}"
    return st


# --------------------------------------------------------------------------
# 1. stacks.c: uscope's frames are gdb's

@pytest.mark.parametrize("stack_mode", ["walk", "copy"])
@pytest.mark.parametrize("engine", ENGINES_STACK)
@pytest.mark.parametrize("mode", list(MODES))
def test_stack_is_gdbs_backtrace(engine, mode, stack_mode):
    """Walked where the probe runs (the tables) or copied and unwound by
    uscope (libdw): gdb's frames both ways."""
    func = MODES[mode]
    r = u.trace(f"{func} $ustack", cmd=[STACKS, mode], json=True,
                extra=["-e", engine, "--stack-mode", stack_mode])
    stack = first_stack(r, func)
    # walked, not copied (bpf: COMMAND's first hits may come before its
    # mappings are known, and are copied: noproc)
    fb = fallbacks(r.stderr)
    assert not fb or (engine == "bpf" and set(fb) <= {"noproc", "nomodule"}), r.stderr
    rows = compare_with_gdb(stack, gdb_frames(func, [STACKS, mode]))
    # both stopped at the function's first instruction
    assert rows[0][:4] == ("call", "stacks", u.file_offset(STACKS, u.func_addr(STACKS, func)),
                           func)
    assert stack[0]["off"] == 0 and int(stack[0]["addr"], 16) == r.named(func)[0].ip
    # the frames this mode is about, in our binary
    ours = [(n, k) for k, m, _, n, _, _ in rows if m == "stacks"] + \
        [("<signal>", "signal") for k, *_ in rows if k == "signal"]
    expect = {"qsort": [("cmp", "call"), ("sort_ints", "call"), ("main", "call")],
              "inline": [("leaf", "call"), ("mid", "inline"), ("outer", "call"),
                         ("main", "call")],
              "signal": [("in_handler", "call"), ("on_usr1", "call"), ("main", "call"),
                         ("<signal>", "signal")],
              "thread": [("thread_work", "call"), ("thread_main", "call")]}[mode]
    assert [o for o in ours if o[0] != "_start"] == expect, rows
    # the outermost frame: _start, or clone3 for a thread
    outermost = {"thread": "libc.so.6"}.get(mode, "stacks")
    assert rows[-1][1] == outermost, rows


# --------------------------------------------------------------------------
# 2. Debian's python3.11 (no frame pointers, no .symtab: .dynsym only)

PY_FUNC = "PyOS_double_to_string"   # float.__repr__ calls it; nothing else does in -I -S


@pytest.mark.parametrize("engine", ENGINES_STACK)
def test_python_stack_is_gdbs_backtrace(engine):
    if not os.access(PYTHON, os.X_OK):
        pytest.skip(f"{PYTHON} is not installed")
    assert PY_FUNC in u._run(["nm", "-D", "--defined-only", PYTHON]).split(), \
        f"{PY_FUNC} is not an exported function of {PYTHON}"
    # once per repr() of a float, never at start-up (-I -S: no site, no env)
    for script, calls in (("pass", 0), ("repr(1.5); repr(2.5)", 2)):
        r = u.trace(f"python3.11:{PY_FUNC}", cmd=[PYTHON, "-I", "-S", "-c", script],
                    extra=["-e", "inject"]).check(ready=1)
        assert len(r.events) == calls, f"{script!r}: {len(r.events)} calls\n{r.describe()}"

    # (the script's code object lives on a while: uscope reads its name
    # after the hit, and bpf has no agent to copy it before it is freed)
    argv = [PYTHON, "-I", "-S", "-c", "repr(1.5); import time; time.sleep(3)"]
    r = u.trace(f"python3.11:{PY_FUNC} $ustack", cmd=argv, json=True, extra=["-e", engine])
    stack = first_stack(r, PY_FUNC)
    assert len(r.events) == 1
    # the interpreter's frame runs the script: uscope shows it as Python
    assert python_runs(stack)[1] == [[("<module>", "<string>", 1)]], stack
    rows = compare_with_gdb(stack, gdb_frames(PY_FUNC, argv), python=True)
    assert rows[0][3] == PY_FUNC and rows[-1][1:4:2] == ("python3.11", "_start"), rows
    # the frames with no symbol (static functions of the stripped
    # interpreter) are there, compared by file offset
    assert any(m == "python3.11" and n is None for _, m, _, n, _, _ in rows), rows
    assert [n for _, m, _, n, _, _ in rows if n and n.startswith("Py")][:2] == \
        [PY_FUNC, "PyObject_Vectorcall"], rows


# --------------------------------------------------------------------------
# 3. The forms: text, JSON, $ustack:N, NAME=, errors, engines

def parse_stack_text(out):
    """Text output -> [(Event, [frame lines, the 4-space indent removed])]."""
    evs = []
    for line in out.splitlines():
        if line.startswith("    "):
            assert evs, f"a frame line before any event: {line!r}"
            evs[-1][1].append(line[4:])
            continue
        ev = u.parse_text_line(line)
        assert ev is not None, f"neither an event line nor a frame: {line!r}"
        evs.append((ev, []))
    return evs


def frame_text(fr):
    """A JSON frame as the text output prints it."""
    if set(fr) == {"end"}:
        return f"[{fr['end']}]"
    if fr["sym"] == SIGFRAME:
        return SIGFRAME
    s = (f"{fr['sym']} [inlined]" if fr["inlined"] else f"{fr['sym']}+{fr['off']:#x}") \
        if fr["sym"] else fr["addr"]
    if fr["module"]:
        s += f" ({fr['module']})" if fr["sym"] else f" ({fr['module']}+{fr['off']:#x})"
    if fr["file"]:
        s += f" {os.path.basename(fr['file'])}" + (f":{fr['line']}" if fr["line"] else "")
    return s


def src_line(text):
    """The line number of the only line of stacks.c containing text."""
    hits = [n for n, l in enumerate(STACKS_C.read_text().splitlines(), 1) if text in l]
    assert len(hits) == 1, f"{text!r} on lines {hits} of {STACKS_C}"
    return hits[0]


def call_at_line(path, caller, callee, line):
    """The return address of the call to callee in caller on source line
    line (addr2line), link-time."""
    ins = u.disasm(path, caller)
    ks = [k for k, (_, t) in enumerate(ins) if t.startswith("call") and f"<{callee}>" in t]
    at = [l.split()[0] for l in
          u._run(["addr2line", "-e", str(path)] + [hex(ins[k][0]) for k in ks]).splitlines()]
    hits = [ins[k + 1][0] for k, fl in zip(ks, at) if fl.endswith(f":{line}")]
    assert len(hits) == 1, f"calls to {callee} in {caller}: {list(zip(ks, at))}"
    return hits[0]


def trace_text(*probes, cmd, engine="inject", extra=()):
    r = u.trace(*probes, cmd=cmd, extra=["-e", engine] + list(extra))
    assert r.rc == 0, r.describe()
    s = r.summary
    evs = parse_stack_text(r.output)
    assert s is not None and s.total == len(evs) and s.lost == 0, r.describe()
    return r, evs


@pytest.mark.parametrize("mode", list(MODES))
def test_text_shows_the_json_frames(mode):
    """Every event of the run (qsort: every comparison), text and JSON."""
    func = MODES[mode]
    _, text = trace_text(f"{func} $ustack", cmd=[STACKS, mode])
    js = u.trace(f"{func} $ustack", cmd=[STACKS, mode], json=True, extra=["-e", "inject"])
    js.check(ready=1)
    assert len(text) == len(js.events) >= 1
    assert len(text) == (17 if mode == "qsort" else 1)    # merge sort of 8: 17 compares
    for (tev, lines), jev in zip(text, js.events):
        assert tev.raw == {}, f"the stack shows under the event line, not in it: {tev.line}"
        assert lines == [frame_text(fr) for fr in jev.args["ustack"]]
        assert not lines[-1].startswith("["), "a complete stack ends with no reason"


def test_text_frames_exact():
    """leaf <- mid (inlined) <- outer <- main, offsets and lines from the
    binary and the source, not from uscope."""
    _, evs = trace_text("leaf $ustack", cmd=[STACKS, "inline"])
    assert len(evs) == 1
    ev, lines = evs[0]
    assert ev.ip & 0xfff == u.func_addr(STACKS, "leaf") & 0xfff   # (ASLR keeps these)
    outer_off = u.call_return_addr(STACKS, "outer", "leaf") - u.func_addr(STACKS, "outer")
    main_off = call_at_line(STACKS, "main", "outer", src_line("outer(4)")) - \
        u.func_addr(STACKS, "main")
    assert lines[:4] == [
        f"leaf+0x0 (stacks) stacks.c:{src_line('sink += x;')}",
        f"mid [inlined] (stacks) stacks.c:{src_line('long r = leaf(x + 1);')}",
        f"outer+{outer_off:#x} (stacks) stacks.c:{src_line('a += mid(x);')}",
        f"main+{main_off:#x} (stacks) stacks.c:{src_line('outer(4)')}",
    ], lines
    assert re.fullmatch(r"__libc_start_call_main\+0x[0-9a-f]+ \(libc\.so\.6\) "
                        r"libc_start_call_main\.h:\d+", lines[4]), lines
    assert re.fullmatch(r"__libc_start_main\+0x[0-9a-f]+ \(libc\.so\.6\) libc-start\.c:\d+",
                        lines[5]), lines
    # _start calls __libc_start_main through the GOT: the return address is
    # the instruction after that call
    ins = u.disasm(STACKS, "_start")
    k, = [k for k, (_, t) in enumerate(ins) if t.startswith("call")]
    assert lines[6:] == [f"_start+{ins[k + 1][0] - u.func_addr(STACKS, '_start'):#x} (stacks)"], \
        lines


def test_json_form():
    r = u.trace("leaf $ustack", cmd=[STACKS, "inline"], json=True, extra=["-e", "inject"])
    r.check(ready=1)
    o = r.objects[0]
    assert set(o) == {"time_ns", "comm", "pid", "tid", "cpu", "event", "type", "ip", "args",
                      "v"}
    assert list(o["args"]) == ["ustack"]
    st = o["args"]["ustack"]
    assert [set(fr) for fr in st] == [FRAME_KEYS] * 7, st
    for fr in st:
        assert re.fullmatch(r"0x[0-9a-f]+", fr["addr"]) and isinstance(fr["off"], int)
        assert isinstance(fr["line"], int) and isinstance(fr["inlined"], bool)
    assert [(fr["sym"], fr["module"], fr["inlined"]) for fr in st[:4]] == [
        ("leaf", "stacks", False), ("mid", "stacks", True), ("outer", "stacks", False),
        ("main", "stacks", False)]
    assert st[0]["addr"] == o["ip"] and st[0]["off"] == 0
    assert st[0]["file"] == str(STACKS_C) and st[0]["line"] == src_line("sink += x;")
    # an inlined call is at its caller's address, with no offset of its own
    assert st[1]["addr"] == st[2]["addr"] and st[1]["off"] == 0
    assert st[2]["off"] == u.call_return_addr(STACKS, "outer", "leaf") - \
        u.func_addr(STACKS, "outer")
    assert int(st[2]["addr"], 16) - st[2]["off"] - int(o["ip"], 16) == \
        u.func_addr(STACKS, "outer") - u.func_addr(STACKS, "leaf")
    assert st[-1]["sym"] == "_start" and st[-1]["file"] is None and st[-1]["line"] == 0


def test_limit_text_and_json():
    """$ustack:N: N frames (an inlined call is no frame of its own: it is
    where its caller is), then why the stack stops there."""
    _, evs = trace_text("thread_work $ustack:3", cmd=[STACKS, "thread"])
    assert [len(evs)] == [1]
    lines = evs[0][1]
    assert [l.split()[0].split("+")[0] for l in lines[:3]] == \
        ["thread_work", "thread_main", "start_thread"], lines
    assert lines[3:] == [f"[{LIMIT_END}]"], lines

    # the thread's stack has exactly 4 frames: $ustack:4 shows them all, no limit
    _, evs = trace_text("thread_work $ustack:4", cmd=[STACKS, "thread"])
    assert len(evs[0][1]) == 4 and not evs[0][1][-1].startswith("["), evs[0][1]

    r = u.trace("leaf $ustack:2", cmd=[STACKS, "inline"], json=True, extra=["-e", "inject"])
    r.check(ready=1)
    st = r.events[0].args["ustack"]
    assert [(fr.get("sym"), fr.get("inlined")) for fr in st[:3]] == \
        [("leaf", False), ("mid", True), ("outer", False)], st
    assert st[3:] == [{"end": LIMIT_END}], st


def test_named_stack_beside_other_arguments():
    probe = "leaf x=$arg1:s64 st=$ustack:1"
    _, evs = trace_text(probe, cmd=[STACKS, "inline"])
    (ev, lines), = evs
    assert ev.raw == {"x": "5"}, ev.line       # outer(4) calls leaf(4 + 1)
    assert lines == [f"leaf+0x0 (stacks) stacks.c:{src_line('sink += x;')}", f"[{LIMIT_END}]"]
    r = u.trace(probe, cmd=[STACKS, "inline"], json=True, extra=["-e", "inject"]).check(ready=1)
    args = r.objects[0]["args"]
    assert list(args) == ["x", "st"] and args["x"] == 5
    assert [fr.get("sym") for fr in args["st"]] == ["leaf", None]
    assert args["st"][-1] == {"end": LIMIT_END}


@pytest.mark.parametrize("engine", ENGINES_STACK)
def test_stack_size_cut_says_so(engine):
    """--stack-mode copy --stack-size 64: the copy holds the return
    addresses of leaf and outer, not those of main's callers: the frames it
    has, then why it stops there (never a stack that looks whole). A walk
    copies nothing: --stack-size does not cut it."""
    whole = u.trace("leaf $ustack", cmd=[STACKS, "inline"], json=True,
                    extra=["-e", engine]).check(ready=1).events[0].args["ustack"]
    assert len(whole) == 7 and "end" not in whole[-1], whole
    r = u.trace("leaf $ustack", cmd=[STACKS, "inline"], json=True,
                extra=["-e", engine, "--stack-size", "64"]).check(ready=1)
    def named(st):
        return [(f.get("sym"), f.get("off"), f.get("line"), f.get("end")) for f in st]

    if "fell back" not in r.stderr:     # (bpf: COMMAND's first hits are copied)
        assert named(r.events[0].args["ustack"]) == named(whole)
    else:
        assert engine == "bpf" and set(fallbacks(r.stderr)) <= {"noproc", "nomodule"}, r.stderr
    r = u.trace("leaf $ustack", cmd=[STACKS, "inline"], json=True,
                extra=["-e", engine, "--stack-size", "64", "--stack-mode", "copy"]).check(ready=1)
    st = r.events[0].args["ustack"]
    assert st[-1] == {"end": COPY_END}, st
    assert 1 <= len(st) - 1 < len(whole)
    assert [(f["sym"], f["off"], f["line"]) for f in st[:-1]] == \
        [(f["sym"], f["off"], f["line"]) for f in whole[:len(st) - 1]]
    _, evs = trace_text("leaf $ustack", cmd=[STACKS, "inline"], engine=engine,
                        extra=["--stack-size", "64", "--stack-mode", "copy"])
    assert evs[0][1][-1] == f"[{COPY_END}]" and len(evs[0][1]) == len(st)


@pytest.mark.parametrize("probe,caret", [
    ("leaf $ustack:0", "0"),
    ("leaf $ustack:257", "257"),
    ("leaf +8($ustack)", "$ustack"),
])
def test_bad_ustack_caret(probe, caret):
    r = run_uscope(["trace", "-e", "inject", probe, "--", STACKS, "inline"])
    assert r.returncode == 1, f"exit {r.returncode}; stderr:\n{r.stderr}"
    lines = r.stderr.rstrip("\n").splitlines()
    assert len(lines) == 3, f"expected 3 lines:\n{r.stderr}"
    assert lines[0].startswith("uscope: bad probe: ") and "$ustack" in lines[0], lines[0]
    assert lines[1] == "  " + probe
    assert lines[2] == " " * (2 + probe.index(caret)) + "^", f"\n{r.stderr}"
    assert r.stdout == "", "the command ran despite the error"


def test_tracefs_refuses_ustack():
    r = run_uscope(["trace", "-e", "tracefs", "leaf $ustack", "--", STACKS, "inline"])
    lines = u.error_lines(r.stderr)
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert lines[0].startswith("uscope: ") and "frame pointers" in lines[0], lines[0]
    assert r.stdout == "", "the command ran despite the error"


def test_auto_puts_ustack_on_inject():
    r = u.trace("leaf $ustack", cmd=[STACKS, "inline"], extra=["-e", "auto", "-v"])
    assert r.rc == 0, r.describe()
    assert "uscope: leaf $ustack: 1 site on inject" in r.stderr.splitlines(), r.stderr
    (ev, lines), = parse_stack_text(r.output)
    assert lines[0] == f"leaf+0x0 (stacks) stacks.c:{src_line('sink += x;')}"
    assert len(lines) == 7 and lines[-1].startswith("_start+"), lines


# --------------------------------------------------------------------------
# 4. Recordings: the stack is stored as copied, unwound when read

def test_recording_replays_the_live_frames(tmp_path):
    f = tmp_path / "st.usc"
    cp = run_uscope(["record", "-o", f, "-e", "inject", "leaf $ustack", "--", STACKS, "inline"])
    assert cp.returncode == 0, cp.stderr
    cp = run_uscope(["trace", "-r", f])
    assert cp.returncode == 0, cp.stderr
    # a recording has each function's returns too: no stack there
    rep = parse_stack_text(cp.stdout)
    assert [(e.event, lines) for e, lines in rep[1:]] == [("leaf__return", [])]
    rep = rep[:1]
    _, live = trace_text("leaf $ustack", cmd=[STACKS, "inline"])
    assert len(rep) == len(live) == 1
    assert rep[0][1] == live[0][1]
    assert len(rep[0][1]) == 7 and rep[0][1][2].startswith("outer+"), rep[0][1]
    assert rep[0][0].ip & 0xfff == live[0][0].ip & 0xfff

    cp = run_uscope(["trace", "-r", f, "--json"])
    assert cp.returncode == 0, cp.stderr
    o, ret = u.parse_json_objects(cp.stdout)
    assert ret["event"] == "leaf__return" and ret["args"] == {}
    assert [frame_text(fr) for fr in o["args"]["ustack"]] == live[0][1]
    assert o["args"]["ustack"][0]["addr"] == o["ip"]


# --------------------------------------------------------------------------
# count by stack, folded stacks

# sorting 8 ints with libc's merge sort: 17 comparisons, each from cmp's
# caller chain, which depends on how deep msort_with_tmp recursed
QSORT_CALLS = 17
QSORT_ROOT = ("_start;__libc_start_main;__libc_start_call_main;main;sort_ints;qsort_r;"
              "msort_with_tmp")


def folded_lines(out):
    got = {}
    for line in out.splitlines():
        path, _, n = line.rpartition(" ")
        assert path and n.isdigit(), line
        assert path not in got, f"a stack twice: {path}"
        got[path] = int(n)
    return got


@pytest.mark.parametrize("engine", ENGINES_STACK)
def test_count_by_stack(engine):
    cp = run_uscope(["count", "--json", "-e", engine, "cmp $ustack", "--", STACKS, "qsort"])
    assert cp.returncode == 0, cp.stderr
    rows = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
    assert sum(r["count"] for r in rows) == QSORT_CALLS
    counts = [r["count"] for r in rows]
    assert counts == sorted(counts, reverse=True)        # the heaviest first
    stacks = [tuple(f["addr"] for f in r["key"]["ustack"]) for r in rows]
    assert len(set(stacks)) == len(stacks)               # each distinct stack once
    for r in rows:
        names = [f["sym"] for f in r["key"]["ustack"]]
        assert names[0] == "cmp" and names[-1] == "_start", names
        assert "sort_ints" in names and "main" in names


@pytest.mark.parametrize("engine", ENGINES_STACK)
def test_count_folded(engine):
    cp = run_uscope(["count", "--folded", "-e", engine, "cmp $ustack", "--", STACKS, "qsort"])
    assert cp.returncode == 0, cp.stderr
    got = folded_lines("\n".join(l for l in cp.stdout.splitlines() if ";" in l))
    assert sum(got.values()) == QSORT_CALLS
    for path in got:
        # outermost first; an inlined call is a frame of its own
        assert path.startswith(QSORT_ROOT + ";") and path.endswith(";cmp"), path
        assert set(path[len(QSORT_ROOT) + 1:].split(";")) <= {"msort_with_tmp", "cmp"}, path
    # the same names are one line: three depths of recursion
    assert len(got) == 3, got


def test_folded_of_a_recording(tmp_path):
    rec = tmp_path / "st.usc"
    cp = run_uscope(["record", "-o", str(rec), "-e", "inject", "cmp $ustack", "--",
                     STACKS, "qsort"])
    assert cp.returncode == 0, cp.stderr
    out = tmp_path / "st.folded"
    cp = run_uscope(["export", "-r", str(rec), "--format", "folded", "-o", str(out)])
    assert cp.returncode == 0, cp.stderr
    exported = folded_lines(out.read_text())
    cp = run_uscope(["count", "-r", str(rec), "--folded"])
    assert cp.returncode == 0, cp.stderr
    counted = folded_lines(cp.stdout)
    # the recording's stacks only (its hidden return probe adds no stack)
    assert {k: v for k, v in counted.items() if ";" in k} == exported
    assert sum(exported.values()) == QSORT_CALLS


def test_folded_needs_stacks():
    cp = run_uscope(["count", "--folded", "-e", "inject", "cmp", "--", STACKS, "qsort"])
    assert cp.returncode == 2
    assert cp.stderr.strip().splitlines()[-1] == (
        "uscope: count: --folded writes the probes' stacks: give a probe $ustack, and no "
        "--json (see uscope count --help)")


# --------------------------------------------------------------------------
# 5. Walked where the probe runs: the frames of the copies, counted there

# (probe, stacks.c's mode and arguments, calls): leaf ten frames deep, a
# frame whose CFA is a DWARF expression (no walk: every hit copied), a
# module loaded after the start (walked once uscope has its mappings),
# libc's merge sort, a signal handler, a thread
FOLD_RUNS = [
    ("cmp", ["qsort"], QSORT_CALLS),
    ("leaf", ["deep", "300"], 300),
    ("leaf", ["expr", "20"], 20),
    ("leaf", ["dlopen", "50", "1000"], 50),  # 1 s: uscope reads the new mappings
    ("in_handler", ["signal"], 1),
    ("thread_work", ["thread"], 1),
]


def count_folded(engine, func, args, stack_mode="walk"):
    cp = run_uscope(["count", "--folded", "-e", engine, "--stack-mode", stack_mode,
                     f"{func} $ustack", "--", STACKS] + args)
    assert cp.returncode == 0, cp.stderr
    return folded_lines("\n".join(l for l in cp.stdout.splitlines() if ";" in l)), \
        fallbacks(cp.stderr)


@pytest.mark.parametrize("func,args,calls", FOLD_RUNS, ids=[a[0] for _, a, _ in FOLD_RUNS])
def test_engines_fold_alike(func, args, calls):
    """The same program, its stacks counted where the probe runs by the
    inject engine's agent and by the bpf program, and copied and unwound by
    uscope (--stack-mode copy): the same stacks, the same counts."""
    inj, fb_inj = count_folded("inject", func, args)
    bpf, fb_bpf = count_folded("bpf", func, args)
    copy, fb_copy = count_folded("inject", func, args, "copy")
    assert inj == bpf == copy, f"inject {inj}\nbpf {bpf}\ncopy {copy}"
    assert sum(inj.values()) == calls and all(p.startswith("_start;") or
                                              p.startswith("__clone3;") for p in inj), inj
    assert fb_copy == {}, "a copy asked for is no fallback"
    # what falls back, and why: a CFA by an expression (every hit), a module
    # loaded since (until uscope has read the new mappings); on bpf COMMAND's
    # first hits too, until the kernel's mmap records of its exec are read
    # (noproc, then nomodule while the libraries are being mapped, or changed:
    # its mappings were replaced during the walk)
    start = {"noproc", "nomodule", "changed"}
    if args[0] == "expr":
        assert fb_inj == {"expr": calls}, fb_inj
        assert sum(fb_bpf.values()) == calls and set(fb_bpf) <= start | {"expr"}, fb_bpf
    elif args[0] == "dlopen":
        assert set(fb_inj) <= {"nomodule"} and fb_inj.get("nomodule", 0) < calls, fb_inj
        assert set(fb_bpf) <= start, fb_bpf
    else:
        assert fb_inj == {} and set(fb_bpf) <= start, (fb_inj, fb_bpf)


def test_expr_frame_copied_and_gdbs():
    """A frame whose CFA the CFI gives by an expression: the walk stops
    there and the hit is copied, unwound by libdw as gdb unwinds it; said in
    the summary, by probe with -v."""
    argv = [STACKS, "expr", "1"]
    r = u.trace("leaf $ustack", cmd=argv, json=True, extra=["-e", "inject", "-v"])
    stack = first_stack(r, "leaf")
    assert fallbacks(r.stderr) == {"expr": 1}, r.stderr
    leaf = u.func_addr(STACKS, "leaf")
    assert re.search(rf"^uscope:   leaf at {leaf:#x}: expr 1$", r.stderr, re.M), r.stderr
    rows = compare_with_gdb(stack, gdb_frames("leaf", argv))
    assert [n for _, m, _, n, _, _ in rows if m == "stacks"][:3] == ["leaf", "expr_call", "main"]


def test_stack_mode_words():
    r = run_uscope(["trace", "-e", "inject", "--stack-mode", "bottom", "leaf $ustack", "--",
                    STACKS, "inline"])
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert u.error_lines(r.stderr) == ["uscope: trace: --stack-mode wants walk or copy, not 'bottom' "
                                        "(see uscope trace --help)"]


def test_recording_keeps_walks(tmp_path):
    """A recording keeps what the engine walked: the return addresses, not
    8 KiB of stack a hit; read back, the frames of a copy's recording."""
    files = {}
    for mode in ("walk", "copy"):
        f = tmp_path / f"{mode}.usc"
        cp = run_uscope(["record", "-o", f, "-e", "inject", "--stack-mode", mode,
                         "leaf $ustack", "--", STACKS, "deep", "200"])
        assert cp.returncode == 0, cp.stderr
        files[mode] = f
    assert files["walk"].stat().st_size * 10 < files["copy"].stat().st_size
    out = {}
    for mode, f in files.items():
        cp = run_uscope(["trace", "-r", f])
        assert cp.returncode == 0, cp.stderr
        evs = [(e.event, lines) for e, lines in parse_stack_text(cp.stdout)]
        assert len([1 for e, _ in evs if e == "leaf"]) == 200
        out[mode] = evs
    assert out["walk"] == out["copy"]
    assert len(out["walk"][0][1]) == 11 and out["walk"][0][1][3].startswith("d1+"), out["walk"][0]


@pytest.mark.parametrize("engine", ENGINES_STACK)
def test_running_process_walked(engine):
    """-p: the process's mappings are known before the first hit: every
    stack walked, none copied; the agent's and the program's alike."""
    p = subprocess.Popen([str(STACKS), "loop", "100000000", "200", "5"],
                         stdout=subprocess.DEVNULL)
    u.REGISTRY.targets.append(p)
    try:
        # attached once ld.so has mapped libc (its frames are in every stack)
        deadline = time.monotonic() + u.TIMEOUT
        while "/libc.so" not in Path(f"/proc/{p.pid}/maps").read_text():
            assert time.monotonic() < deadline and p.poll() is None, "stacks never mapped libc"
            time.sleep(0.01)
        cp = run_uscope(["count", "--folded", "-e", engine, "-p", str(p.pid), "-d", "1",
                         "leaf $ustack"])
    finally:
        p.kill()
        p.wait()
    assert cp.returncode == 0, cp.stderr
    got = folded_lines(cp.stdout)
    assert list(got) == ["_start;__libc_start_main;__libc_start_call_main;main;outer;mid;leaf"], got
    assert list(got.values())[0] > 100
    assert fallbacks(cp.stderr) == {}, cp.stderr
