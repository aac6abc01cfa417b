"""uscope flow: entry and return probes on every match of each PROBE, shown
as a per-thread call tree.

Text: a header ` TID     TIME(us)   DURATION  FUNCTION`, then one line per
entry or return, "%-6d %10.3f %10s  " + 2*depth spaces + "-> FUNC" or
"<- FUNC"; DURATION ("2.589 us", ms or s above 1 ms / 1 s) on returns only.
A return and its entry have the same depth; a return whose entry was never
seen is at depth 0 without a duration.
--json: one object per entry/return with time_ns, pid, tid, comm, type
(entry|return|event), function, depth, duration_ns (null for entries and
unmatched returns), args.

Targets: flowfib (fib(4), then a() -> b() twice), flowthreads (2 threads,
outer -> inner 3 times each), flowlate (blocks inside longcall() so that
uscope can attach there), and Debian's python3.11 (%python:function__entry
and function__return, paired by their stem)."""

import os

import pytest

import uscope_e2e as u
from uscope_e2e import FLOW_HEADER, Target, flow, flow_bg, target

FLOWFIB = target("flowfib")
FLOWTHREADS = target("flowthreads")
FLOWLATE = target("flowlate")
PYTHON = "/usr/bin/python3.11"

JSON_KEYS = {"time_ns", "pid", "tid", "comm", "type", "function", "depth", "duration_ns", "args", "v"}


def fib_tree(n, depth=0):
    """The (direction, function, depth) sequence of fib(n)."""
    seq = [("->", "fib", depth)]
    if n >= 2:
        seq += fib_tree(n - 1, depth + 1) + fib_tree(n - 2, depth + 1)
    return seq + [("<-", "fib", depth)]


A_TREE = [("->", "a", 0), ("->", "b", 1), ("<-", "b", 1), ("->", "b", 1), ("<-", "b", 1),
          ("<-", "a", 0)]


def test_fib_tree_shape():
    """The expectation itself: fib(4) is 9 calls."""
    t = fib_tree(4)
    assert len(t) == 18 and max(d for _, _, d in t) == 3
    assert t[:5] == [("->", "fib", 0), ("->", "fib", 1), ("->", "fib", 2), ("->", "fib", 3),
                     ("<-", "fib", 3)]


def _durations_nest(lines, slack_of=lambda fl: 0):
    """Every return has a duration > 0 that is >= the sum of its children's
    (the returns one level deeper since its entry). slack_of: rounding
    allowance of a printed duration, in ns."""
    stack = []          # per open frame: [sum of children, their slack]
    for fl in lines:
        if fl.dir == "->":
            assert fl.duration_ns is None, f"an entry with a duration: {fl.line}"
            stack.append([0, 0])
            continue
        assert fl.duration_ns is not None and fl.duration_ns > 0, \
            f"return without a positive duration: {fl.line}"
        kids, slack = stack.pop()
        assert fl.duration_ns + slack + slack_of(fl) >= kids, \
            f"{fl.line}: {fl.duration_ns} ns < its children's {kids} ns"
        if stack:
            stack[-1][0] += fl.duration_ns
            stack[-1][1] += slack_of(fl)
    assert not stack


def _text_slack(fl):
    """Half a unit of the last printed digit."""
    return {"us": 1, "ms": 500, "s": 500_000}[fl.duration_text.split()[1]]


def _check_times_ordered(res):
    for tid in res.tids():
        ts = [fl.time_us for fl in res.of_tid(tid)]
        assert ts == sorted(ts), f"times of {tid} not in order: {ts}"


def _check_text_format(res):
    """Each line exactly "%-6d %10.3f %10s  " + 2*depth spaces + "-> FUNC"."""
    for fl in res.lines:
        exp = "%-6d %10.3f %10s  %s%s %s" % (fl.tid, fl.time_us, fl.duration_text,
                                              "  " * fl.depth, fl.dir, fl.function)
        assert fl.line == exp, f"line format:\n  got {fl.line!r}\n  exp {exp!r}"
        if fl.duration_text:
            num, unit = fl.duration_text.split()
            assert unit == "us" and fl.duration_ns < 1_000_000 or \
                unit == "ms" and 1_000_000 <= fl.duration_ns < 1_000_000_000 or \
                unit == "s" and fl.duration_ns >= 1_000_000_000, \
                f"unit of {fl.duration_text!r}: us below 1 ms, ms below 1 s"


def test_fib_call_tree_text():
    res = flow("fib", "a", "b", cmd=[FLOWFIB, 4]).check(rc=0)
    assert res.stdout == "flowfib done n=4 fib=3\n", "COMMAND's stdout unchanged"
    assert res.header.split() == FLOW_HEADER
    assert len(res.tids()) == 1, res.describe()
    assert res.seq() == fib_tree(4) + A_TREE, res.describe()
    _check_times_ordered(res)
    _durations_nest(res.lines, _text_slack)


def test_text_line_format():
    res = flow("fib", "a", "b", cmd=[FLOWFIB, 3]).check(rc=0)
    assert res.seq() == fib_tree(3) + A_TREE, res.describe()
    _check_text_format(res)


def test_fib_call_tree_json():
    res = flow("fib", "[ab]", cmd=[FLOWFIB, 4], json=True, quiet=True).check(rc=0)
    assert u.parse_ready(res.stderr) is None and "uscope:" not in res.stderr, \
        f"-q: nothing on stderr expected:\n{res.stderr}"
    assert res.seq() == fib_tree(4) + A_TREE, res.describe()
    pid = res.objects[0]["pid"]
    for o in res.objects:
        assert set(o) == JSON_KEYS, o
        assert o["type"] in ("entry", "return"), o
        assert type(o["time_ns"]) is int and o["time_ns"] > 0
        assert o["pid"] == o["tid"] == pid and type(pid) is int
        assert o["comm"] == "flowfib"
        assert type(o["depth"]) is int and o["depth"] >= 0
        assert isinstance(o["args"], dict)
        if o["type"] == "entry":
            assert o["duration_ns"] is None, o
        else:
            assert type(o["duration_ns"]) is int, o
    ts = [o["time_ns"] for o in res.objects]
    assert ts == sorted(ts)
    _durations_nest(res.lines)
    # a duration is the time from the entry to the return
    stack = []
    for o in res.objects:
        if o["type"] == "entry":
            stack.append(o["time_ns"])
        else:
            d = o["time_ns"] - stack.pop()
            assert abs(o["duration_ns"] - d) <= 1000, (o, d)


def test_glob_probes():
    res = flow("fi?", "[ab]", cmd=[FLOWFIB, 2]).check(rc=0)
    assert res.seq() == fib_tree(2) + A_TREE, res.describe()


@pytest.mark.parametrize("json", [False, True], ids=["text", "json"])
def test_two_threads_per_tid(json):
    m = 3
    res = flow("outer", "inner", cmd=[FLOWTHREADS, m], json=json).check(rc=0)
    assert res.stdout == f"flowthreads done m={m} total=90\n"
    tids = res.tids()
    assert len(tids) == 2, res.describe()
    one = [("->", "outer", 0), ("->", "inner", 1), ("<-", "inner", 1), ("<-", "outer", 0)]
    for tid in tids:
        assert res.seq(tid) == one * m, f"thread {tid}:\n{res.describe()}"
        _durations_nest(res.of_tid(tid), (lambda fl: 0) if json else _text_slack)
    if json:
        pids = {fl.pid for fl in res.lines}
        assert len(pids) == 1, f"pid is the process's, the same for both threads: {pids}"
        assert not (pids & set(tids)), "the calls are in the threads, not in main"
        assert {fl.comm for fl in res.lines} == {"flowthreads"}
    else:
        _check_times_ordered(res)


@pytest.mark.parametrize("json", [False, True], ids=["text", "json"])
def test_attach_inside_call_unmatched_return(json, tmp_path):
    t = Target([FLOWLATE])
    t.expect("ready")           # printed inside longcall, which now blocks
    out = tmp_path / "flow.out"
    bg = flow_bg("longcall", "after", pid=t.pid, json=json, out=out)
    bg.wait_ready()
    t.write("go\n")
    t.expect("flowlate done")
    assert t.wait() == 0
    res = bg.result(output_file=out).check(rc=0)   # the process exit ends uscope
    assert res.seq() == [("<-", "longcall", 0), ("->", "after", 0), ("<-", "after", 0)], \
        res.describe()
    ret, entry, ret2 = res.lines
    assert ret.duration_ns is None, f"no entry seen, no duration: {ret.line}"
    assert entry.duration_ns is None
    assert ret2.duration_ns is not None and ret2.duration_ns > 0, ret2.line
    assert {fl.tid for fl in res.lines} == {t.pid}
    if json:
        assert [o["type"] for o in res.objects] == ["return", "entry", "return"]
        assert res.objects[0]["duration_ns"] is None
    else:
        assert ret.duration_text == "" and ret.line.split()[2:] == ["<-", "longcall"], ret.line


# Python 3.11 fires function__entry only while a profiler or tracer is set
# (its dtrace hook sits behind use_tracing); function__return always. So the
# script starts cProfile (a C profiler: no Python frames of its own) first:
# the returns before that (startup, the module) are unmatched, at depth 0.
PY_SCRIPT = """\
import cProfile
p = cProfile.Profile()
p.enable()
def g():
    return 1
def f():
    return g()
for _ in range(3):
    f()
p.disable()
"""
F_LINE, G_LINE = 6, 4         # function__entry's arg3: the line of the def


def test_python_function_entry_return_pairs():
    if not os.path.exists(PYTHON):
        pytest.skip(f"{PYTHON} is not installed")
    labels = {s.label for s in u.usdt_notes(PYTHON)}
    if not {"python:function__entry", "python:function__return"} <= labels:
        pytest.skip(f"{PYTHON} has no function__entry/function__return probes")
    res = flow("%python:function__*", cmd=[PYTHON, "-I", "-S", "-c", PY_SCRIPT],
               json=True).check(rc=0)
    lines = res.lines
    assert {fl.dir for fl in lines} <= {"->", "<-"}, \
        f"function__entry/return are entries and returns: {set(fl.dir for fl in lines)}"
    assert all(isinstance(fl.function, str) and fl.function for fl in lines)
    for fl in lines:
        assert {"arg1", "arg2", "arg3"} <= set(fl.args), f"the probe's arguments: {fl.line}"
    f_entries = [k for k, fl in enumerate(lines) if fl.dir == "->" and fl.args["arg3"] == F_LINE]
    assert len(f_entries) == 3, f"f() called 3 times, {len(f_entries)} entries at line " \
        f"{F_LINE}:\n" + "\n".join(fl.line for fl in lines[-30:])
    f_name = {lines[k].args["arg2"] for k in f_entries}
    assert len(f_name) == 1, "arg2 (the function name) differs between calls of f"
    g_name = set()
    for k in f_entries:
        fe, ge, gr, fr = lines[k:k + 4]
        ctx = "\n".join(fl.line for fl in lines[k - 1:k + 5])
        assert (fe.dir, ge.dir, gr.dir, fr.dir) == ("->", "->", "<-", "<-"), ctx
        assert ge.args["arg3"] == G_LINE, ctx
        assert ge.depth == fe.depth + 1 and gr.depth == ge.depth and fr.depth == fe.depth, ctx
        assert gr.args["arg2"] == ge.args["arg2"] and fr.args["arg2"] == fe.args["arg2"], ctx
        assert ge.args["arg2"] != fe.args["arg2"], ctx
        assert gr.duration_ns is not None and fr.duration_ns is not None, ctx
        assert fr.duration_ns >= gr.duration_ns > 0, ctx
        assert fe.duration_ns is None and ge.duration_ns is None, ctx
        g_name.add(ge.args["arg2"])
    assert len(g_name) == 1
    assert len({lines[k].depth for k in f_entries}) == 1
    # returns from before the profiler (startup): unmatched, at depth 0
    early = lines[:f_entries[0]]
    assert any(fl.dir == "<-" and fl.depth == 0 and fl.duration_ns is None for fl in early), \
        "no unmatched return before the profiler started"
