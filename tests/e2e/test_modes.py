"""Targets: -p PID, -- COMMAND (exit status), system-wide; -o FILE, -d,
--json, and a multi-threaded target with every event counted."""

import os
import re
import signal
import subprocess
import time

import pytest

import uscope_e2e as u
from uscope_e2e import Waiter, assert_multiset, start_spin, target, trace, trace_bg

ARGS = target("args")
LINES = ["hello", "with space", "", "tab\tand \"quote\""]


def _check_on_line(res, lines, pid=None):
    assert res.counts() == ({"on_line": len(lines)} if lines else {})
    assert_multiset([(e.args["arg1"], e.args["len"]) for e in res.events],
                    [(l, len(l)) for l in lines])
    for e in res.events:
        assert e.comm == "waiter"
        if pid is not None:
            assert e.tid == pid


def test_attach_pid_output_file(tmp_path):
    w = Waiter()
    other = Waiter()           # same program, not attached: no events from it
    out = tmp_path / "ev.txt"
    bg = trace_bg("on_line $arg1:string len=$arg2:s32", pid=w.pid, out=out)
    assert bg.wait_ready() == 1
    for line in LINES:
        w.send(line)
        other.send(line + "!")
    w.close_stdin()
    assert w.wait() == 0
    res = bg.result(output_file=out).check(rc=0)
    _check_on_line(res, LINES, pid=w.pid)
    assert res.stdout == ""
    assert r'arg1="tab\tand \"quote\""' in res.output
    other.close_stdin()
    assert other.wait() == 0


def test_attach_pid_stdout_json():
    w = Waiter()
    bg = trace_bg("on_line $arg1:string len=$arg2:s32", pid=w.pid, json=True)
    bg.wait_ready()
    for line in LINES:
        w.send(line)
    w.close_stdin()
    res = bg.result().check(rc=0)
    _check_on_line(res, LINES)
    assert {e.pid for e in res.events} == {w.pid}


def test_attach_duration_leaves_target_running():
    spin = start_spin()
    bg = trace_bg("tick n=$arg1:s32", pid=spin.pid, duration=1)
    bg.wait_ready()
    res = bg.result().check(rc=0)
    assert spin.alive(), "uscope -d must not harm the target"
    ns = sorted(e.args["n"] for e in res.events)
    assert ns, "no tick in 1 s"
    assert ns == list(range(ns[0], ns[0] + len(ns))), "tick events missing in the middle"
    spin.kill()


def test_attach_target_exit_ends_trace():
    spin = start_spin()
    bg = trace_bg("tick n=$arg1:s32", pid=spin.pid)
    bg.wait_ready()
    time.sleep(0.3)
    spin.kill(signal.SIGKILL)
    res = bg.result().check(rc=0)
    ns = sorted(e.args["n"] for e in res.events)
    assert ns and ns == list(range(ns[0], ns[0] + len(ns)))


@pytest.mark.parametrize("argv,rc", [([2], 0), ([2, 3], 3), ([2, 0, 15], 128 + 15),
                                     ([2, 0, 9], 128 + 9)])
def test_command_exit_status(argv, rc):
    r = trace("add a=$arg1:s32", cmd=[ARGS] + argv).check(rc=rc, ready=1)
    assert_multiset([e.args["a"] for e in r.events], [1, 2])
    assert r.stdout.startswith("args done n=2")


def test_command_stdout_is_not_in_output_file(tmp_path):
    out = tmp_path / "events.txt"
    cp = u.run_uscope(u.trace_argv(["add a=$arg1:s32"], [ARGS, 3], out=out))
    assert cp.returncode == 0, cp.stderr
    direct = subprocess.run([ARGS, "3"], capture_output=True, text=True, timeout=30)
    assert cp.stdout == direct.stdout and direct.stdout.startswith("args done n=3 ")
    text = out.read_text()
    assert "args done" not in text
    events, other = u.parse_text(text)
    assert other == [] and len(events) == 3
    assert_multiset([e.args["a"] for e in events], [1, 2, 3])


def test_output_file_is_replaced(tmp_path):
    out = tmp_path / "events.txt"
    out.write_text("old content\n" * 100)
    cp = u.run_uscope(u.trace_argv(["add"], [ARGS, 1], out=out))
    assert cp.returncode == 0, cp.stderr
    events, other = u.parse_text(out.read_text())
    assert other == [] and len(events) == 1


def test_system_wide_spin():
    spin = start_spin()
    res = trace(f"{target('spin')}:tick n=$arg1:s32", duration=2, json=True).check(rc=0, ready=1)
    assert spin.alive()
    mine = [e for e in res.events if e.pid == spin.pid]
    assert mine, "no event from the running spin"
    assert all(e.comm == "spin" and e.event == "tick" for e in mine)
    ns = sorted(e.args["n"] for e in mine)
    assert ns == list(range(ns[0], ns[0] + len(ns))), "tick events missing in the middle"
    spin.kill()


def test_system_wide_exact_counts():
    bg = trace_bg(f"{ARGS}:add a=$arg1:s32 b=$arg2:s32", f"r {ARGS}:add r=$retval:s32",
                  duration=4, json=True)
    assert bg.wait_ready() == 2
    p1 = subprocess.run([ARGS, "7"], capture_output=True, text=True, timeout=30)
    p2 = subprocess.run([target("args-nopie"), "3"], capture_output=True, timeout=30)
    assert p1.returncode == 0 and p2.returncode == 0
    res = bg.result().check(rc=0)
    assert res.counts() == {"add": 7, "add__return": 7}, "args-nopie is another file"
    assert_multiset([(e.args["a"], e.args["b"]) for e in res.named("add")],
                    [(i, 2 * i) for i in range(1, 8)])
    assert_multiset([e.args["r"] for e in res.named("add__return")], [3 * i for i in range(1, 8)])
    assert len({e.pid for e in res.events}) == 1


def test_threads_every_event_counted():
    nthreads, m = 4, 2000
    res = trace("work t=$arg1:s32 i=$arg2:s32", "r work v=$retval:s64",
                cmd=[target("threads"), nthreads, m], json=True, timeout=50)
    res.check(rc=0, ready=2)
    total = nthreads * m
    assert res.counts() == {"work": total, "work__return": total}
    s = res.summary
    assert (s.total, s.lost) == (2 * total, 0)
    assert s.per_event == {"work": (total, 0), "work__return": (total, 0)}
    work = res.named("work")
    assert_multiset([(e.args["t"], e.args["i"]) for e in work],
                    [(t, i) for t in range(nthreads) for i in range(m)], "(thread, i)")
    assert_multiset([e.args["v"] for e in res.named("work__return")],
                    [t * 100000 + i for t in range(nthreads) for i in range(m)], "retvals")
    pids = {e.pid for e in res.events}
    assert len(pids) == 1
    tid_of = {}
    for e in work:
        tid_of.setdefault(e.args["t"], set()).add(e.tid)
    assert all(len(v) == 1 for v in tid_of.values()), tid_of
    tids = {next(iter(v)) for v in tid_of.values()}
    assert len(tids) == nthreads and not (tids & pids), "each thread its own tid"
    assert all(e.comm == "threads" for e in res.events)


def test_json_fields_and_types():
    res = trace("add a=$arg1:s32 h=$arg1:x32", "r compute ret=$retval:s64",
                "peek s=$arg1:string", "handle path=+0(+8($arg1)):string",
                "pack mid=$arg1:b5@3/32", cmd=[ARGS, 3], json=True).check(rc=0, ready=5)
    assert res.counts() == {"add": 3, "compute__return": 3, "peek": 3, "handle": 3, "pack": 3}
    base = {"time_ns", "comm", "pid", "tid", "cpu", "event", "type", "ip", "args", "v"}
    pid = res.objects[0]["pid"]
    for o in res.objects:
        assert set(o) == (base | {"func"} if o["type"] == "r" else base), o
        assert type(o["time_ns"]) is int and o["time_ns"] > 0
        assert o["comm"] == "args"
        assert type(o["pid"]) is int and o["pid"] == pid
        assert type(o["tid"]) is int and o["tid"] == pid
        assert type(o["cpu"]) is int and 0 <= o["cpu"] < os.cpu_count() + 64
        assert o["type"] in ("p", "r")
        assert o["type"] == ("r" if o["event"].endswith("__return") else "p")
        assert re.fullmatch(r"0x[0-9a-f]+", o["ip"]), o
        if "func" in o:
            assert re.fullmatch(r"0x[0-9a-f]+", o["func"]), o
        assert isinstance(o["args"], dict)
    by = lambda name: [o["args"] for o in res.objects if o["event"] == name]
    for a in by("add"):
        assert type(a["a"]) is int and isinstance(a["h"], str)
    assert_multiset([(a["a"], a["h"]) for a in by("add")], [(i, hex(i)) for i in (1, 2, 3)])
    assert_multiset([a["ret"] for a in by("compute__return")],
                    [3 * 100003 * i + 1 for i in (1, 2, 3)])
    assert all(type(a["ret"]) is int for a in by("compute__return"))
    assert_multiset([a["s"] for a in by("peek")], [None, "ok", None])
    assert_multiset([a["path"] for a in by("handle")], u.ARGS_PATHS)
    assert_multiset([a["mid"] for a in by("pack")], [1, 2, 3])
    assert all(type(a["mid"]) is int for a in by("pack"))
    ts = [o["time_ns"] for o in res.objects]
    assert max(ts) - min(ts) < 60 * 10**9


def test_attach_pid_excludes_forked_children_even_short_lived():
    """--no-children: the kernel's pid filter follows forks; uscope keeps the
    target's threads (a new thread's work() is reported) and drops its forked
    processes, which exit before their events are read."""
    f = u.Target([target("forker")])
    f.expect("ready")
    bg = trace_bg("work v=$arg1:s32", pid=f.pid, json=True, extra=["--no-children"])
    bg.wait_ready()
    f.write("go\n")
    f.close_stdin()
    assert f.wait() == 0
    res = bg.result().check(rc=0)
    assert sorted(e.args["v"] for e in res.events) == [0, 0, 1, 1, 2, 2]
    assert {e.pid for e in res.events} == {f.pid}
    assert len({e.tid for e in res.events}) == 2
