"""Never freeze the program the inject engine traces (issue 23).

A lossless producer (record, stacks counted) waits for room only while uscope
makes progress, at most --max-wait a wait: a stopped uscope costs the target
one bound, then nothing. When uscope dies however it dies, the agent in the
target notices (a robust futex uscope holds) and writes the original bytes
back by itself, with atomic stores; what no atomic store covers (a patch
across 16 bytes, a springboard) stays a jump to a trampoline that passes
through, and the next uscope that attaches takes it out, then traces as
usual.

tests/targets/hot.c: work (a patch inside an aligned 8 bytes), work_mid
(inside an aligned 16 bytes, not 8), work_cross (across 16 bytes) and
work_spring (a return through a springboard), all called in a hot loop that
reports its progress; progress, not time, is what these tests wait on."""

import ctypes
import os
import re
import select
import signal
import subprocess
import threading
import time

import pytest

import uscope_e2e as u
from uscope_e2e import Target, target

HOT = target("hot")
FUNCS = ["work", "work_mid", "work_cross", "work_spring"]
INJ = ["-e", "inject"]
PROGRESS_RE = re.compile(r"^hot progress (\d+)$")


def total(n):
    """What hot's loop adds up over n iterations: work, work_mid and
    work_cross return i + 1, work_spring i + 1 for an odd i, else 0."""
    m = n // 2
    return 3 * n * (n + 1) // 2 + m * (m + 1)


def hot_text(pid):
    """(mapping start, file offset, bytes in memory, bytes in the file) of
    hot's executable mapping in process pid."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            p = line.split()
            if len(p) >= 6 and p[5] == HOT and "x" in p[1]:
                lo, hi = (int(x, 16) for x in p[0].split("-"))
                off = int(p[2], 16)
                break
        else:
            raise AssertionError(f"no executable mapping of {HOT} in process {pid}")
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(lo)
        mem = f.read(hi - lo)
    with open(HOT, "rb") as f:
        f.seek(off)
        fil = f.read(hi - lo)
    return lo, off, mem, fil.ljust(len(mem), b"\0")


def text_diff(pid):
    """The link-time addresses where hot's code in pid differs from the file."""
    _, off, mem, fil = hot_text(pid)
    return {vaddr_of(off + i) for i in range(len(mem)) if mem[i] != fil[i]}


_SEGS = None


def vaddr_of(file_off):
    """Link-time address of a file offset in hot's LOAD segments."""
    global _SEGS
    if _SEGS is None:
        _SEGS = []
        for line in u._run(["readelf", "-lW", HOT]).splitlines():
            f = line.split()
            if f and f[0] == "LOAD":
                _SEGS.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
    for off, va, size in _SEGS:
        if off <= file_off < off + size:
            return file_off - off + va
    return None


def func_range(name):
    (addr, size), = u.nm_funcs(HOT)[name]
    return range(addr, addr + size)


def left_allowed():
    """What an agent that let go may leave: work_cross's jump (across 16
    bytes) and a springboard in the filler after work_spring (up to the next
    16-byte boundary)."""
    cross = func_range("work_cross")
    spring = func_range("work_spring")
    filler = range(spring.stop, (spring.stop + 15) & ~15)
    return set(range(cross.start, cross.start + 5)) | set(filler)


class Lines:
    """A target's stdout (a pipe), read by a thread: its progress, its
    other lines, conditions waited on."""

    def __init__(self, fd):
        self.fd = fd
        self.lines = []
        self.cond = threading.Condition()
        self.eof = False
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            *done, buf = buf.split(b"\n")
            with self.cond:
                self.lines += [d.decode() for d in done]
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def progress(self):
        with self.cond:
            got = [int(m.group(1)) for m in map(PROGRESS_RE.match, self.lines) if m]
        return got[-1] if got else 0

    def count(self):
        with self.cond:
            return len(self.lines)

    def wait(self, pred, what, timeout=u.TIMEOUT):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError(f"the target never {what}: its last lines "
                                         f"{self.lines[-5:]} (eof={self.eof})")
                self.cond.wait(left)
            return list(self.lines)

    def wait_line(self, prefix, timeout=u.TIMEOUT):
        lines = self.wait(lambda ls: any(x.startswith(prefix) for x in ls),
                          f"printed {prefix!r}", timeout)
        return next(x for x in lines if x.startswith(prefix))

    def wait_more(self, n, timeout=u.TIMEOUT):
        """n more lines than there are now: the target ran on meanwhile."""
        have = self.count()
        self.wait(lambda ls: len(ls) >= have + n, f"printed {n} more lines", timeout)


def uscope_popen(args, stdout=subprocess.DEVNULL):
    p = subprocess.Popen([str(u.uscope_path())] + [str(a) for a in args],
                         stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                         text=True, errors="surrogateescape")
    u.REGISTRY.uscopes.append(p)
    return p


class Stderr:
    """uscope's stderr, read by a thread; the readiness line waited on."""

    def __init__(self, p):
        self.p = p
        self.lines = []
        self.ready = threading.Event()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.p.stderr:
            self.lines.append(line)
            if u.READY_RE.match(line.rstrip("\n")):
                self.ready.set()
        self.ready.set()

    def wait_ready(self):
        self.ready.wait(u.TIMEOUT)
        assert any(u.READY_RE.match(x.rstrip("\n")) for x in self.lines), \
            f"uscope never got ready (rc={self.p.poll()}):\n{self.text()}"

    def text(self):
        self._t.join(0)
        return "".join(self.lines)

    def finish(self):
        self._t.join(u.TIMEOUT)
        return "".join(self.lines)


def uscope_sigkill(p):
    p.send_signal(signal.SIGKILL)
    assert p.wait(u.TIMEOUT) == -signal.SIGKILL


def check_let_go(pid, lines):
    """After uscope's death: once the target has run on (two progress lines
    printed after it: hits that saw the tracer gone), its code is the file's
    but for what no atomic store covers."""
    have = lines.count()
    lines.wait(lambda ls: len(ls) >= have + 2, "ran on after uscope died")
    left = text_diff(pid)
    assert left <= left_allowed(), \
        f"bytes not put back: {sorted(hex(a) for a in left - left_allowed())}"
    for f in ("work", "work_mid", "work_spring"):
        assert not left & set(func_range(f)), f"{f}: its bytes are not the file's"
    return left


# ---------------------------------------------------------------------------


def test_ustack_count_of_a_hot_loop_ends_and_is_exact():
    """Every stack counted: each wait for room ends as uscope frees it, record
    by record (no 1 ms poll, no lost wake-up). --max-wait 10s: a loaded
    machine may hold uscope off the CPU for more than the default 100 ms."""
    n = 300000
    cp = u.run_uscope(["count"] + INJ + ["--max-wait", "10s", "work $ustack", "--", HOT, n],
                      timeout=240)
    assert cp.returncode == 0, cp.stderr
    assert f"hot done total={total(n)}" in cp.stdout.splitlines()
    rows = [ln for ln in cp.stdout.splitlines() if re.match(r"^work\s+\d+$", ln)]
    assert [int(r.split()[-1]) for r in rows] == [n], cp.stdout[-2000:]
    assert "lost" not in cp.stderr, cp.stderr


@pytest.mark.parametrize("cmd", ["record", "count"])
def test_sigstopped_uscope_costs_the_target_one_bound(cmd, tmp_path):
    """SIGSTOP uscope: the target, whose ring fills and whose thread waits
    for room, runs on after one wait of --max-wait: it makes every one of
    its calls (millions, each of which would wait if waits were not bounded)
    while uscope is stopped. After SIGCONT, every call is an event or counted
    as lost, and the summary says per probe how many of the lost found no
    room within the bound (the recording too: its report says the same)."""
    if cmd == "record":
        n, every = 30000000, 1000000
        args = ["record", "-v"] + INJ + ["-o", tmp_path / "r.usc", "work"]
    else:
        # stacks copied: each goes through the ring to uscope, which counts
        # them (walked, they are counted in the process and never wait)
        n, every = 1000000, 20000
        args = ["count", "-v"] + INJ + ["--stack-mode", "copy", "work $ustack"]
    r, w = os.pipe()
    p = uscope_popen(args + ["--", HOT, n, every], stdout=w)
    os.close(w)
    lines = Lines(r)
    err = Stderr(p)
    try:
        err.wait_ready()
        lines.wait_more(1)
        p.send_signal(signal.SIGSTOP)
        lines.wait_line("hot done")     # every call, uscope stopped
        p.send_signal(signal.SIGCONT)
        assert p.wait(u.TIMEOUT * 4) == 0, err.text()
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
    stderr = err.finish()
    assert f"hot done total={total(n)}" in lines.lines
    m = re.search(r"inject: (\d+) waits for room ran out", stderr)
    assert m and int(m.group(1)) >= 1, stderr
    if cmd == "record":
        s = u.parse_summary(stderr)
        assert s, stderr
        report = u.run_uscope(["report", "-r", tmp_path / "r.usc"])
        assert report.returncode == 0, report.stderr
        for site in ("work", "work__return"):
            events, lost = s.per_event[site]
            assert events + lost == n and lost > 0, (site, s.per_event)
            waited = int(re.search(rf"^  {site}: {events} events, {lost} lost \((\d+) found no "
                                   rf"room within --max-wait\)$", stderr, re.M).group(1))
            assert 0 < waited <= lost, (site, waited, lost)
            # the recording's counts: the same
            assert re.search(rf"^\s+{events}\s+{lost}\s+{site} \({waited} of the lost found "
                             rf"no room within --max-wait\)$", report.stdout, re.M), \
                report.stdout
    else:
        m = re.search(r"work: (\d+) hits lost before they were aggregated \((\d+) found no "
                      r"room within --max-wait;", stderr)
        assert m, stderr
        lost, waited = int(m.group(1)), int(m.group(2))
        counted = [int(ln.split()[-1]) for ln in lines.lines if re.match(r"^work\s+\d+$", ln)]
        assert len(counted) == 1 and counted[0] + lost == n and lost > 0, (counted, lost)
        assert 0 < waited <= lost, (waited, lost)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_janitor(p):
    """uscope p's janitor killed first (a whole cgroup killed, the OOM
    killer): what the agent leaves stays for the next uscope."""
    jan = u.janitor_of(p.pid)
    os.kill(jan, signal.SIGKILL)
    deadline = time.monotonic() + u.TIMEOUT
    while alive(jan):
        assert time.monotonic() < deadline, f"the janitor {jan} does not die"
        time.sleep(0.02)


def wait_gone(pid, what):
    deadline = time.monotonic() + u.TIMEOUT
    while alive(pid):
        assert time.monotonic() < deadline, f"{what} ({pid}) never ended"
        time.sleep(0.02)


@pytest.mark.parametrize("cmd", ["record", "count"])
def test_sigkilled_uscope_lets_the_target_go_and_the_next_one_finishes(cmd, tmp_path):
    """kill -9 uscope and its janitor while it records (or counts stacks) in
    a running process: the agent puts the code back by itself, the program
    runs to its normal end; a second uscope takes out what was left and
    counts exactly."""
    n, every, m = 300000000, 200000 if cmd == "record" else 20000, 1000000
    t = Target([HOT, n, every, 2, m], stdin=False)
    lines = Lines(t.p.stdout.fileno())
    if cmd == "record":
        args = ["record"] + INJ + ["-o", tmp_path / "r.usc", "-p", t.pid] + FUNCS
    else:
        args = ["count"] + INJ + ["-p", t.pid, "work $ustack", "work_mid", "work_cross",
                                  "r:work_spring"]
    p = uscope_popen(args)
    err = Stderr(p)
    err.wait_ready()
    lines.wait_more(1)
    assert text_diff(t.pid) - left_allowed(), "the probes are not patched in"
    kill_janitor(p)
    uscope_sigkill(p)
    check_let_go(t.pid, lines)
    assert lines.wait_line("hot done") == f"hot done total={total(n)}"

    # the next uscope: the dead one's leftovers out, then exact counts
    p2 = uscope_popen(["count", "-v"] + INJ + ["-p", t.pid] + FUNCS + ["r:work_spring"],
                      stdout=subprocess.PIPE)
    err2 = Stderr(p2)
    err2.wait_ready()
    t.p.send_signal(signal.SIGUSR1)
    assert lines.wait_line("hot burst") == f"hot burst total={total(m)}"
    p2.send_signal(signal.SIGINT)
    out = p2.stdout.read()
    assert p2.wait(u.TIMEOUT) == 0, err2.finish()
    stderr = err2.finish()
    assert re.search(r"patch(es)? left by a uscope that died there taken out", stderr), stderr
    counts = {f.split()[0]: int(f.split()[1]) for f in out.splitlines()
              if re.match(r"^work\S*\s+\d+$", f)}
    assert counts == {"work": m, "work_mid": m, "work_cross": m, "work_spring": m,
                      "work_spring__return": m}, out
    assert text_diff(t.pid) == set(), "the code is not the file's after a clean detach"
    have = lines.count()
    t.p.send_signal(signal.SIGUSR1)
    lines.wait(lambda ls: len(ls) > have, "ran its last burst")
    assert lines.lines[-1] == f"hot burst total={total(m)}"
    assert t.wait() == 0


@pytest.mark.parametrize("busy", [True, False], ids=["hit", "idle"])
def test_sigkilled_uscope_janitor_takes_out_the_rest(busy):
    """kill -9 uscope: its janitor outlives it and takes out, with every
    thread of the process stopped, what the agent could not (work_cross's
    jump across 16 bytes, work_spring's springboard), once the agent has let
    go; or everything, when no probe is hit (idle: the agent never runs)."""
    n, every, m = (300000000, 200000, 1000) if busy else (1000, 0, 100000)
    t = Target([HOT, n, every, 1, m], stdin=False)
    lines = Lines(t.p.stdout.fileno())
    if not busy:
        assert lines.wait_line("hot done") == f"hot done total={total(n)}"
    p = uscope_popen(["count"] + INJ + ["-p", t.pid] + FUNCS + ["r:work_spring"])
    err = Stderr(p)
    err.wait_ready()
    if busy:
        lines.wait_more(1)
    assert text_diff(t.pid) - left_allowed(), "the probes are not patched in"
    jan = u.janitor_of(p.pid)
    uscope_sigkill(p)
    wait_gone(jan, "the janitor")
    assert text_diff(t.pid) == set(), "the code is not the file's once the janitor ended"
    if busy:
        assert lines.wait_line("hot done") == f"hot done total={total(n)}"
    t.p.send_signal(signal.SIGUSR1)
    assert lines.wait_line("hot burst") == f"hot burst total={total(m)}"
    assert t.wait() == 0


PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture
def subreaper():
    """This process adopts the orphans of the processes it starts: COMMAND
    outlives a killed uscope, and its exit status is then ours to read."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    orphans = []
    yield orphans
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    for pid in orphans:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def test_sigkilled_recorder_of_a_command_lets_it_finish(subreaper, tmp_path):
    """uscope record -- COMMAND, kill -9 uscope: COMMAND (no longer traced by
    ptrace either) finishes with its normal output and exit status, its code
    put back."""
    n, every = 200000000, 200000
    r, w = os.pipe()
    p = uscope_popen(["record"] + INJ + ["-o", tmp_path / "r.usc"] + FUNCS +
                     ["--", HOT, n, every], stdout=w)
    os.close(w)
    lines = Lines(r)
    err = Stderr(p)
    err.wait_ready()
    lines.wait_more(1)
    kids = children(p.pid)
    assert len(kids) == 1, kids
    subreaper.append(kids[0])
    uscope_sigkill(p)
    check_let_go(kids[0], lines)
    _, status = os.waitpid(kids[0], 0)
    subreaper.remove(kids[0])
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    lines.wait(lambda ls: "hot done" in " ".join(ls), "ended")
    assert lines.lines[-1] == f"hot done total={total(n)}"


def test_sigkilled_uscope_before_the_entry_point_lets_the_command_run(subreaper):
    """kill -9 uscope after COMMAND's exec, before its entry point (a
    preloaded library's constructor holds it there): COMMAND runs to its
    normal end, unpatched; nothing of uscope's traps it on the way (an int3
    at the entry point would have killed it with SIGTRAP)."""
    n = 1000
    r, w = os.pipe()
    p = subprocess.Popen([str(u.uscope_path()), "count"] + INJ + [f"{HOT}:work", "--", "env",
                          "USCOPE_TEST_HOLD=1", f"LD_PRELOAD={target('libhold.so')}", HOT,
                          str(n)],
                         stdin=subprocess.PIPE, stdout=w, stderr=subprocess.PIPE)
    u.REGISTRY.uscopes.append(p)
    os.close(w)
    lines = Lines(r)
    assert lines.wait_line("held") == "held"
    kids = children(p.pid)
    assert len(kids) == 1, kids
    subreaper.append(kids[0])
    with open(f"/proc/{kids[0]}/exe", "rb"):
        assert os.readlink(f"/proc/{kids[0]}/exe") == HOT
    uscope_sigkill(p)
    p.stdin.write(b"\n")
    p.stdin.close()
    _, status = os.waitpid(kids[0], 0)
    subreaper.remove(kids[0])
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert lines.wait_line("hot done") == f"hot done total={total(n)}"
