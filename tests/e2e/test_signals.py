"""Ending uscope: SIGINT/SIGTERM in -p mode exit cleanly with the events
drained; with a COMMAND, a signal sent to uscope alone ends the run at once
and COMMAND gets it once the probes are gone, while the terminal's Ctrl-C
is COMMAND's first; a traced process that dies by a signal is said; after
a SIGKILL its janitor removes what was left, or failing that the next
uscope run; a run never removes what a live uscope is using."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import Waiter, janitor_of, target, trace, trace_bg

CHAOS = target("chaos")
GOT_RE = re.compile(r"^got (SIG[A-Z]+) at i=(\d+)$", re.M)


def wait_for(what, cond, timeout=u.TIMEOUT):
    """cond()'s first true value, within timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.02)


def alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def code_is_the_files(pid):
    return u.code_is_the_file(pid, CHAOS) is True


def calls(path):
    """The i of every work event in a trace output file."""
    events, _ = u.parse_text(Path(path).read_text(errors="surrogateescape"))
    return [e.args["i"] for e in events]


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


def test_sigkill_leftovers_removed_by_the_janitor():
    """uscope killed: its janitor removes its tracefs events and instance,
    and ends; nothing runs again."""
    w = Waiter()
    bg = trace_bg("on_line $arg1:string", pid=w.pid, extra=["-e", "tracefs"])
    bg.wait_ready()
    dead = bg.pid
    jan = janitor_of(dead)
    assert (u.INSTANCES / f"uscope_{dead}").is_dir()
    bg.signal(signal.SIGKILL)
    assert bg.wait() == -signal.SIGKILL
    wait_for("the janitor removes the dead uscope's probes",
             lambda: not [l for l in u.UPROBE_EVENTS.read_text().splitlines()
                          if f"uscope_{dead}/" in l] and
             not (u.INSTANCES / f"uscope_{dead}").exists())
    wait_for("the janitor ends", lambda: not alive(jan))
    w.send("untraced")
    w.close_stdin()
    assert w.wait() == 0


def test_sigkill_leftovers_removed_by_next_run():
    """uscope and its janitor both killed (a whole cgroup, the OOM killer):
    the next run removes what was left."""
    w = Waiter()
    bg = trace_bg("on_line $arg1:string", pid=w.pid, extra=["-e", "tracefs"])
    bg.wait_ready()
    dead = bg.pid
    jan = janitor_of(dead)
    os.kill(jan, signal.SIGKILL)
    wait_for("the janitor is gone", lambda: not alive(jan))
    bg.signal(signal.SIGKILL)
    assert bg.wait() == -signal.SIGKILL
    assert (u.INSTANCES / f"uscope_{dead}").is_dir()     # left behind
    w.send("while stale probes may remain")
    w.close_stdin()
    assert w.wait() == 0
    # the next run (of any kind that creates probes) removes the dead one's
    # instance and events
    r = trace("add a=$arg1:s32", cmd=[target("args"), 1],
              extra=["-e", "tracefs"]).check(rc=0, ready=1)
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


# --------------------------------------------------------------------------
# A COMMAND and the signals sent to uscope

class Command:
    """uscope trace work -- chaos signals, traced until work has run. Its
    output goes to files: COMMAND keeps them open when it outlives uscope."""

    def __init__(self, tmp_path, *extra, stdin=subprocess.DEVNULL, prefix=()):
        self.out, self.so, self.se = (tmp_path / n for n in ("events.txt", "stdout", "stderr"))
        argv = list(prefix) + [str(u.uscope_path())] + \
            u.trace_argv(["work i=$arg2:s64"], cmd=[CHAOS, "signals"], out=self.out,
                         extra=extra)
        with open(self.so, "w") as f, open(self.se, "w") as g:
            self.p = subprocess.Popen(argv, stdin=stdin, stdout=f, stderr=g)
        u.REGISTRY.uscopes.append(self.p)
        self.pid = int(wait_for("COMMAND says its pid", lambda: re.search(
            r"^ready pid=(\d+)$", self.so.read_text(), re.M)).group(1))
        wait_for("an event", lambda: self.out.exists() and calls(self.out))

    @property
    def stderr(self):
        return self.se.read_text()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # COMMAND outlives uscope here: ended whatever happened
        if alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)

    def got(self):
        """The signals COMMAND had: [(name, i)]"""
        return GOT_RE.findall(self.so.read_text())

    def wait(self):
        return self.p.wait(u.TIMEOUT)


@pytest.mark.parametrize("sig,engine", [(signal.SIGTERM, "inject"), (signal.SIGTERM, "bpf"),
                                        (signal.SIGTERM, "tracefs"), (signal.SIGINT, None),
                                        (signal.SIGHUP, None)])
def test_signal_to_uscope_alone_ends_a_command_run(sig, engine, tmp_path):
    """kill(1) to uscope while COMMAND runs (and would not end of it): the
    run ends at once, with every event drained; COMMAND gets the signal
    once nothing of uscope's is in it, and runs on; uscope exits 128+N."""
    with Command(tmp_path, *(["-e", engine] if engine else [])) as c:
        c.p.send_signal(sig)
        assert c.wait() == 128 + sig, c.stderr
        s = u.parse_summary(c.stderr)
        ns = calls(c.out)
        assert s is not None and s.total == len(ns) and s.lost == 0, c.stderr
        assert ns == list(range(len(ns))), ns
        got = wait_for("COMMAND had the signal", c.got)
        assert [g[0] for g in got] == [sig.name]
        assert alive(c.pid) and code_is_the_files(c.pid)


def test_target_killed_by_a_signal_is_said(tmp_path):
    """-p: the kernel's exit status of the traced process (PIDFD_INFO_EXIT)."""
    t = u.start_spin()
    bg = trace_bg("tick n=$arg1:s32", pid=t.pid, extra=["-e", "bpf"])
    bg.wait_ready()
    assert t.kill(signal.SIGSEGV) == -signal.SIGSEGV
    res = bg.result().check(rc=0)
    assert f"uscope: process {t.pid} killed by SIGSEGV\n" in res.stderr, res.stderr


def test_command_killed_by_a_signal_is_said(tmp_path):
    with Command(tmp_path, "-e", "bpf") as c:
        os.kill(c.pid, signal.SIGKILL)
        assert c.wait() == 128 + signal.SIGKILL
        assert f"uscope: process {c.pid} killed by SIGKILL\n" in c.stderr, c.stderr


def test_terminal_ctrl_c(tmp_path):
    """Ctrl-C on a terminal goes to uscope and COMMAND: the first is
    COMMAND's (uscope traces on); the second ends the run, COMMAND running
    on, untraced."""
    master, slave = os.openpty()
    try:
        # uscope in a session of its own, the terminal its controlling one
        with Command(tmp_path, stdin=slave, prefix=["setsid", "-c"]) as c:
            os.close(slave)
            slave = -1
            os.write(master, b"\x03")
            got = wait_for("COMMAND had Ctrl-C", c.got)
            assert [g[0] for g in got] == ["SIGINT"]
            wait_for("calls traced after Ctrl-C",
                     lambda: max(calls(c.out)) > int(got[0][1]) + 10)
            assert c.p.poll() is None
            os.write(master, b"\x03")
            assert c.wait() == 0, c.stderr
            # (and as uscope led the terminal's session, its end hung it up;
            # COMMAND says so from its loop, which may run after uscope ends)
            got = wait_for("COMMAND had the second Ctrl-C", lambda: len(c.got()) >= 2 and c.got())
            assert [g[0] for g in got][:2] == ["SIGINT", "SIGINT"]
            assert calls(c.out) == list(range(len(calls(c.out))))
            assert alive(c.pid) and code_is_the_files(c.pid)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


def test_ctrl_z_suspends_uscope_and_nothing_waits_for_it():
    """Without a COMMAND, uscope holds no process after the attach (-e
    inject lets it go; what it forks takes itself up): Ctrl-Z's SIGTSTP
    stops uscope, the process takes its signals and answers meanwhile, and
    once uscope goes on it has counted every call."""
    w = Waiter()
    bg = u.Background(["count", "-e", "inject", "-p", w.pid, "on_line"])
    bg.wait_ready()
    bg.signal(signal.SIGTSTP)
    u.wait_true("uscope stopped", lambda: proc_state(bg.pid) == "T" or proc_state(bg.pid),
                u.TIMEOUT)
    os.kill(w.pid, signal.SIGWINCH)   # a signal: nothing of uscope's waits for it
    w.send("one")
    w.send("two")
    assert proc_state(bg.pid) == "T"
    bg.signal(signal.SIGCONT)
    bg.signal(signal.SIGINT)
    assert bg.wait() == 0, bg.stderr
    out = bg.stdout_path.read_text()
    assert re.search(r"^on_line\s+2$", out, re.M), out
    assert "not suspended" not in bg.stderr, bg.stderr
    w.close_stdin()
    assert w.wait() == 0


def proc_state(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat.rsplit(")", 1)[1].split()[0]


def test_a_stopped_uscope_holds_no_traced_process():
    """uscope stopped by SIGSTOP: the process it injected takes its signals
    and answers as if it were not traced (it is not held: nothing stops
    for uscope after the attach), the janitor lets uscope be, and once it
    goes on it counts every call; its end restores the process's code."""
    w = Waiter()
    bg = u.Background(["count", "-e", "inject", "-p", w.pid, "on_line"])
    bg.wait_ready()
    janitor_of(bg.pid)
    w.send("before")
    bg.signal(signal.SIGSTOP)
    os.kill(w.pid, signal.SIGWINCH)
    for k in range(3):
        w.send(f"during {k}")
    time.sleep(1.5)   # longer than the janitor ever waited for a stopped uscope
    assert proc_state(bg.pid) == "T", "uscope was ended while stopped"
    bg.signal(signal.SIGCONT)
    w.send("after")
    bg.signal(signal.SIGINT)
    assert bg.wait() == 0, bg.stderr
    assert re.search(r"^on_line\s+5$", bg.stdout_path.read_text(), re.M), \
        bg.stdout_path.read_text()
    assert u.code_is_the_file(w.pid, u.target("waiter")) is True
    w.close_stdin()
    assert w.wait() == 0


FORKS, GAP_MS, MAX_WAIT_MS = 60, 10, 2


def forker():
    t = u.Target([target("chaos"), "forks", FORKS, GAP_MS])
    assert t.readline() == f"ready pid={t.pid}"
    return t


def forks_ms(t):
    t.write("go\n")
    m = re.fullmatch(rf"forks done n={FORKS} bad=0 ms=(\d+)", t.readline())
    assert m, "the forker did not say how long it took"
    return int(m.group(1))


@pytest.mark.parametrize("cmd", [["count", "work $ustack"],
                                 ["record", "-o", "{rec}", "work i=$arg2:s64"]])
def test_a_stopped_uscope_costs_a_forking_process_at_most_max_wait_a_fork(cmd, tmp_path):
    """A process that forks every 10 ms, traced with -p by a uscope that is
    stopped (SIGSTOP) all along, lossless (counted stacks, a recording: a
    thread whose ring is full waits for room, within --max-wait): its own
    time to run its forks grows by at most --max-wait per fork over an
    untraced run of the same (the better of two, just before), and once
    uscope goes on, it has every child's calls."""
    rec = tmp_path / "forks.usc"
    cmd = [str(rec) if a == "{rec}" else a for a in cmd]
    base = forker()
    untraced = min(forks_ms(base), forks_ms(base))
    base.close_stdin()
    assert base.wait() == 0
    t = forker()
    bg = u.Background([cmd[0], "-e", "inject", "--max-wait", f"{MAX_WAIT_MS}ms", "-p", t.pid] +
                      cmd[1:])
    bg.wait_ready()
    bg.signal(signal.SIGSTOP)
    took = forks_ms(t)
    bound = untraced + FORKS * MAX_WAIT_MS + 250   # (250 ms: a loaded machine's noise)
    assert took <= bound, f"{took} ms with uscope stopped, {untraced} ms untraced"
    bg.signal(signal.SIGCONT)
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.stderr
    if cmd[0] == "count":
        total = sum(int(line.split()[-1]) for line in res.stdout.splitlines()
                    if line.strip() and line.split()[-1].isdigit())
        assert total == 10 * FORKS, res.stdout
    else:
        r = u.run_uscope(["trace", "-r", rec])
        assert r.returncode == 0, r.stderr
        by_pid = {}
        for e in u.parse_text(r.stdout)[0]:
            if e.event == "work":
                by_pid.setdefault(e.tid, []).append(int(e.args["i"]))
        assert len(by_pid) == FORKS and all(v == list(range(10)) for v in by_pid.values()), \
            {p: v for p, v in list(by_pid.items())[:3]}
    t.close_stdin()
    assert t.wait() == 0
