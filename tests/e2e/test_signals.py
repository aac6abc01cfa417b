"""Ending uscope: SIGINT/SIGTERM in -p mode exit cleanly with the events
drained; after a SIGKILL the next uscope run removes what was left; a run
never removes what a live uscope is using."""

import signal

import pytest

import uscope_e2e as u
from uscope_e2e import Waiter, target, trace, trace_bg


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_in_pid_mode_exits_cleanly(sig, tmp_path):
    w = Waiter()
    out = tmp_path / "ev.txt"
    bg = trace_bg("on_line $arg1:string len=$arg2:s32", pid=w.pid, out=out)
    bg.wait_ready()
    w.send("before signal")          # on_line has run: the event is recorded
    bg.signal(sig)
    res = bg.result(output_file=out).check(rc=0)
    assert [(e.args["arg1"], e.args["len"]) for e in res.events] == [("before signal", 13)]
    assert u.leftovers() == ([], []), "tracefs not cleaned on " + sig.name
    # the target is unharmed and no longer traced
    w.send("after")
    w.close_stdin()
    assert w.wait() == 0


def test_sigkill_leftovers_removed_by_next_run():
    w = Waiter()
    bg = trace_bg("on_line $arg1:string", pid=w.pid)
    bg.wait_ready()
    dead = bg.pid
    bg.signal(signal.SIGKILL)
    assert bg.wait() == -signal.SIGKILL
    w.send("while stale probes may remain")
    w.close_stdin()
    assert w.wait() == 0
    # the next run (of any kind that creates probes) removes the dead one's
    # instance and events
    r = trace("add a=$arg1:s32", cmd=[target("args"), 1]).check(rc=0, ready=1)
    assert [e.args["a"] for e in r.events] == [1]
    events, insts = u.leftovers()
    assert not [l for l in events if f"uscope_{dead}" in l], events
    assert f"uscope_{dead}" not in insts, insts
    assert (events, insts) == ([], [])


def test_concurrent_session_is_left_alone():
    w = Waiter()
    a = trace_bg("on_line $arg1:string", pid=w.pid)
    a.wait_ready()
    w.send("one")
    # another complete session meanwhile must not touch the live one
    r = trace("add", cmd=[target("args"), 2]).check(rc=0, ready=1)
    assert r.counts() == {"add": 2}
    w.send("two")
    a.signal(signal.SIGINT)
    res = a.result().check(rc=0)
    assert sorted(e.args["arg1"] for e in res.events) == ["one", "two"]
    w.close_stdin()
    assert w.wait() == 0
