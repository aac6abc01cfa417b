"""Kill uscope with SIGKILL at random instants of its start, on targets that
are busy: threads, system calls, forks (issue 40). Used by test_chaos.py
(200 kills in make check) and by bench/chaos_kills.py (1,000, under load).

Each kill starts uscope on a target, sleeps a time drawn uniformly from
[0, 0.5) s from its launch, sends it SIGKILL, and checks the target:
  - it finishes its work with its own correct output (a known line);
  - it does not die of a signal, and does not hang (a bound on each wait);
  - once the janitor is done, its code is the file's again.
Four ways uscope meets its target:
  pid      -p PID of tests/targets/chaos storm (threads that call work,
           sleep, use a pipe; the main one forks every 4th round), several
           kills on one target, one batch of work each;
  py       -p PID with a py: probe on tests/targets/pystorm.py (Debian's
           python3.11), several kills a target;
  command  uscope ... -- chaos storm ... once: COMMAND, a new one each kill
           (this process adopts it when uscope dies: a subreaper);
  system   -e inject system-wide on a copy of chaos; the target started at
           a random instant after uscope (before or after its attach).
A kill is a dict: its mode, seed, when, and what went wrong ("" when
nothing did)."""

import ctypes
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import uscope_e2e as u

CHAOS = u.target("chaos")
PYSTORM = str(u.TARGETS / "pystorm.py")
PYTHON = "/usr/bin/python3.11"
WINDOW = 0.5                 # the kill instant, uniform over uscope's first WINDOW s
THREADS, ROUNDS = 4, 1200    # chaos storm: a batch lasts ~0.4-1.5 s here
PY_THREADS, PY_ROUNDS = 3, 300
WAIT = 30                    # a bound on every wait for the target
PR_SET_CHILD_SUBREAPER = 36

PID_CMDS = [["count", "work $ustack"], ["count", "work"], ["trace", "work i=$arg2:s64"],
            ["latency", "work"], ["record", "-o", "{rec}", "work i=$arg2:s64"]]


def storm_line(threads=THREADS, rounds=ROUNDS):
    calls = rounds * 10
    return (f"storm done threads={threads} calls={threads * calls} "
            f"sum={threads * (sum(3 * i + 1 for i in range(calls)) + rounds)} "
            f"forks={(rounds + 3) // 4} bad=0")


def pystorm_line(threads=PY_THREADS, rounds=PY_ROUNDS):
    calls = rounds * 10
    return (f"pystorm done threads={threads} calls={threads * calls} "
            f"sum={threads * sum(3 * i + 1 for i in range(calls))} "
            f"forks={(rounds + 7) // 8} bad=0")


def _uscope(argv, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL):
    err = tempfile.TemporaryFile()
    p = subprocess.Popen([str(u.uscope_path())] + [str(a) for a in argv], stdin=stdin,
                         stdout=stdout, stderr=err)
    u.REGISTRY.uscopes.append(p)
    return p, err


def _kill_after(p, rnd):
    """SIGKILL p at an instant uniform over [0, WINDOW) s from now (its
    launch); wait for its end. The instant."""
    at = rnd.uniform(0, WINDOW)
    t0 = time.monotonic()
    time.sleep(max(0.0, at - (time.monotonic() - t0)))
    p.send_signal(signal.SIGKILL)
    p.wait(WAIT)
    return at


def _stderr(err):
    err.seek(0)
    return err.read().decode(errors="replace")[-1500:]


def _janitors(pid):
    """uscope-janitor processes (and their uscope --janitor children) of a
    session on pid (a number: -p's; a path: a probe's file's)."""
    token = str(pid)
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            comm = (d / "comm").read_text().strip()
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv]
        if comm == "uscope-janitor" and (token in args or "--janitor" in args or
                                         any(token in a for a in args if "/" in token)):
            out.append(int(d.name))
    return out


def _tracer(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _settled(pid, path, timeout=10):
    """The target's code is the file's and nothing of uscope's is on it
    (janitors gone, no tracer): "" or what is left."""
    deadline = time.monotonic() + timeout
    while True:
        code = u.code_is_the_file(pid, path)
        jan = _janitors(pid)
        tracer = _tracer(pid)
        if code is True and not jan and not tracer:
            return ""
        if time.monotonic() >= deadline:
            return f"after {timeout}s: code {code}, janitors {jan}, tracer {tracer}"
        time.sleep(0.02)


def _status_text(st):
    if os.WIFSIGNALED(st):
        return f"killed by signal {os.WTERMSIG(st)}"
    return f"exit {os.WEXITSTATUS(st)}"


# ---- -p: several kills on one target -------------------------------------------

def kills_pid(n, seed, per_target=5, tmp=None):
    """n kills of uscope -p on chaos storm targets, per_target on each."""
    out = []
    k = 0
    while k < n:
        t = u.Target([CHAOS, "storm", THREADS, ROUNDS])
        line = t.readline(WAIT)
        if line != f"ready pid={t.pid}":
            out.append({"mode": "pid", "seed": seed, "error": f"target said {line!r}"})
            t.kill()
            k += per_target
            continue
        for _ in range(min(per_target, n - k)):
            rnd = random.Random(f"{seed}-pid-{k}")
            cmd = [a.replace("{rec}", str(Path(tmp or tempfile.gettempdir()) / f"c{k}.usc"))
                   for a in rnd.choice(PID_CMDS)]
            t.write("go\n")
            p, err = _uscope(cmd[:1] + ["-e", "inject", "-p", t.pid] + cmd[1:])
            at = _kill_after(p, rnd)
            why = ""
            try:
                got = t.readline(WAIT)
                if got != storm_line():
                    why = f"the target printed {got!r}"
            except AssertionError as e:
                why = f"{e}; target state {_state(t.pid)}"
            why = why or _settled(t.pid, CHAOS)
            out.append({"mode": "pid", "seed": seed, "k": k, "at": round(at, 3), "cmd": cmd,
                        "error": why and f"{why}\nuscope stderr: {_stderr(err)}"})
            err.close()
            k += 1
            if why:
                break
        t.close_stdin()
        try:
            rc = t.p.wait(WAIT)
            if rc != 0:
                out[-1]["error"] += f"; the target ended: rc {rc}"
        except subprocess.TimeoutExpired:
            out[-1]["error"] += "; the target did not end"
            t.kill()
    return out


def _state(pid):
    try:
        st = Path(f"/proc/{pid}/status").read_text().splitlines()
        return " ".join(x for x in st if x.startswith(("State", "TracerPid")))
    except OSError as e:
        return str(e)


# ---- py: -p with a py: probe ------------------------------------------------------

def kills_py(n, seed, per_target=5):
    out = []
    k = 0
    while k < n:
        t = u.Target([PYTHON, PYSTORM, PY_THREADS, PY_ROUNDS])
        line = t.readline(WAIT)
        if line != f"ready pid={t.pid}":
            out.append({"mode": "py", "seed": seed, "error": f"target said {line!r}"})
            t.kill()
            k += per_target
            continue
        for _ in range(min(per_target, n - k)):
            rnd = random.Random(f"{seed}-py-{k}")
            t.write("go\n")
            p, err = _uscope(["count", "-e", "inject", "-p", t.pid, "py:step"])
            at = _kill_after(p, rnd)
            why = ""
            try:
                got = t.readline(WAIT)
                if got != pystorm_line():
                    why = f"the target printed {got!r}"
            except AssertionError as e:
                why = f"{e}; target state {_state(t.pid)}"
            why = why or _settled(t.pid, PYTHON)
            out.append({"mode": "py", "seed": seed, "k": k, "at": round(at, 3),
                        "error": why and f"{why}\nuscope stderr: {_stderr(err)}"})
            err.close()
            k += 1
            if why:
                break
        t.close_stdin()
        try:
            rc = t.p.wait(WAIT)
            if rc != 0:
                out[-1]["error"] += f"; the target ended: rc {rc}"
        except subprocess.TimeoutExpired:
            out[-1]["error"] += "; the target did not end"
            t.kill()
    return out


# ---- COMMAND ------------------------------------------------------------------------

def _children_of(pid):
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d.name))
    return kids


def _exe(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _reap(pid, timeout):
    """Wait for child pid: its status, or None past timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got, st = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if got == pid:
            return st
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


class Subreaper:
    """This process adopts the orphans of what it starts (COMMAND outlives a
    killed uscope; its exit status is then ours to read)."""

    def __enter__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        assert self.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        return self

    def __exit__(self, *a):
        self.libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _read_all(fd, timeout):
    buf = b""
    deadline = time.monotonic() + timeout
    os.set_blocking(fd, False)
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        if not chunk:
            return buf.decode(errors="replace"), True
        buf += chunk
    return buf.decode(errors="replace"), False


def kills_command(n, seed):
    out = []
    with Subreaper():
        for k in range(n):
            rnd = random.Random(f"{seed}-command-{k}")
            r, w = os.pipe()
            p, err = _uscope(["count", "-e", "inject", "work $ustack", "--", CHAOS, "storm",
                              THREADS, ROUNDS, "once"], stdout=w)
            os.close(w)
            # the target, once uscope has started it (it outlives uscope)
            kids = []
            at = rnd.uniform(0, WINDOW)
            t0 = time.monotonic()
            while time.monotonic() - t0 < at:
                kids = kids or [c for c in _children_of(p.pid)]
                time.sleep(0.002)
            kids = kids or _children_of(p.pid)
            p.send_signal(signal.SIGKILL)
            p.wait(WAIT)
            why = ""
            # every process this kill left us (the command, the janitor, its
            # uscope --janitor) ends; the command with exit 0
            ours = {CHAOS, str(u.uscope_path())}
            for c in set(kids) | set(_children_of(os.getpid())):
                exe = _exe(c)
                if c == p.pid or (c not in kids and exe not in ours):
                    continue
                st = _reap(c, WAIT)
                if st is None:
                    why += f"process {c} ({exe}) did not end; "
                    os.kill(c, signal.SIGKILL)
                    _reap(c, 5)
                elif exe == CHAOS and (not os.WIFEXITED(st) or os.WEXITSTATUS(st)):
                    why += f"the target {c} ended: {_status_text(st)}; "
            text, eof = _read_all(r, WAIT)
            os.close(r)
            lines = [x for x in text.splitlines() if x.startswith(("ready", "storm"))]
            if lines and lines[-1] != storm_line(THREADS, ROUNDS) and \
                    not (len(lines) == 1 and lines[0].startswith("ready") and why):
                why += f"the target printed {lines!r}; "
            if lines and lines[0].startswith("ready") and storm_line() not in lines:
                why += f"the target printed {lines!r}; "
            out.append({"mode": "command", "seed": seed, "k": k, "at": round(at, 3),
                        "started": bool(lines),
                        "error": why and f"{why}\nuscope stderr: {_stderr(err)}"})
            err.close()
    return out


# ---- system-wide, a process started after uscope ----------------------------------

def kills_system(n, seed, tmp):
    out = []
    exe = str(Path(tmp) / "chaos-sys")
    shutil.copy(CHAOS, exe)
    for k in range(n):
        rnd = random.Random(f"{seed}-system-{k}")
        p, err = _uscope(["count", "-e", "inject", f"{exe}:work"])
        start = rnd.uniform(0, WINDOW)
        at = rnd.uniform(0, WINDOW)
        t0 = time.monotonic()
        t = None
        for when, what in sorted([(start, "start"), (at, "kill")]):
            time.sleep(max(0.0, when - (time.monotonic() - t0)))
            if what == "start":
                t = u.Target([exe, "storm", THREADS, ROUNDS])
                t.write("go\n")
            else:
                p.send_signal(signal.SIGKILL)
        p.wait(WAIT)
        why = ""
        try:
            got = [t.readline(WAIT), t.readline(WAIT)]
            if got != [f"ready pid={t.pid}", storm_line()]:
                why = f"the target printed {got!r}"
        except AssertionError as e:
            why = f"{e}; target state {_state(t.pid)}"
        if not why:
            why = _settled(t.pid, exe)
        t.close_stdin()
        try:
            st = t.p.wait(WAIT)
            if st != 0:
                why += f"; the target ended: rc {st}"
        except subprocess.TimeoutExpired:
            why += "; the target did not end"
            t.kill()
        out.append({"mode": "system", "seed": seed, "k": k, "at": round(at, 3),
                    "start": round(start, 3),
                    "error": why and f"{why}\nuscope stderr: {_stderr(err)}"})
        err.close()
        # the janitor of this one done before the next uscope starts
        deadline = time.monotonic() + 10
        while _janitors(exe) and time.monotonic() < deadline:
            time.sleep(0.02)
    return out


MODES = {"pid": kills_pid, "py": kills_py, "command": kills_command, "system": kills_system}


def run(mode, n, seed, tmp):
    """n kills of one mode: the list of kills (each with its "error")."""
    if mode == "pid":
        return kills_pid(n, seed, tmp=tmp)
    if mode == "system":
        return kills_system(n, seed, tmp)
    return MODES[mode](n, seed)
