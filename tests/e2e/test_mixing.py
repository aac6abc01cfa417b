"""uscope beside other tracers on the same function (issue 40): the target
must never pay for it, at any instant.

A kernel uprobe (bpftrace, perf, a uscope session on the kernel engines)
writes an int3 over the instruction at its offset and, when it is hit, runs
the file's instruction out of line and goes on after it: over an inject
patch's jump, that is inside the jump, unless the patch is placed so that
it is not (doc/engines.md, "Beside other tracers"):
  - the patch goes after the function's first instruction when the probe
    reads nothing that instruction changes (a push or a sub of rsp is
    undone by the trampoline): the uprobe at the entry runs it and lands on
    the jump, and both tools count every call;
  - else the jump's target is chosen so that its bytes after that
    instruction are the file's own (a pad there): the uprobe's hit goes on
    in the file's code; from its first hit on the calls are the other
    tool's, and uscope takes its patch out (said once);
  - where no such target can be mapped, uscope says at attach which sites
    stay exposed.
Tested with bpftrace (both orders), perf probe and a uscope session on
tracefs, started while the target calls the function at a steady rate (so
that the uprobe is hit in the first instants), on entries that are a push,
a 5-byte instruction, and 2-, 3- and 4-byte ones (tests/targets/mixentry.c,
built -O2 with Debian's flags); and two sessions on two workers of one
nginx. Each tool's count is printed (pytest -s shows them)."""

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import uscope_e2e as u

ROUNDS, CALLS = 300, 20
DONE = f"chaos done rounds={ROUNDS} calls={ROUNDS * CALLS} " \
       f"sum={sum(3 * i + 1 for i in range(ROUNDS * CALLS))}"
CALLED = {"obj_new": ROUNDS, "work": ROUNDS * CALLS}

if not shutil.which("bpftrace"):
    pytest.skip("bpftrace is needed", allow_module_level=True)


@pytest.fixture
def chaos(tmp_path):
    """A copy of tests/targets/chaos that only this test runs (bpftrace's
    uprobe is on the file: every process of it would be counted)."""
    path = tmp_path / "chaos-mix"
    shutil.copy(u.target("chaos"), path)
    return str(path)


def entry(exe, pid, fn):
    """fn's runtime address in process pid, which runs exe."""
    off = u.file_offset(exe, u.func_addr(exe, fn))
    with open(f"/proc/{pid}/maps") as m:
        for line in m:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == exe:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                start = int(parts[2], 16)
                if start <= off < start + hi - lo:
                    return lo + off - start
    raise AssertionError(f"process {pid} does not map {fn}")


def byte_at(pid, addr):
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(addr)
        return mem.read(1)[0]


class Bpftrace:
    """bpftrace -p PID counting fn's calls; ready once its breakpoint is in
    the process (an int3 at fn's entry). once: it exits at its first hit
    (its uprobe comes and goes within milliseconds)."""

    def __init__(self, exe, pid, fn, once=False):
        body = "@ = count(); exit();" if once else "@ = count();"
        self.p = subprocess.Popen(["bpftrace", "-p", str(pid), "-e",
                                   f"uprobe:{exe}:{fn} {{ {body} }}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        u.REGISTRY.targets.append(self.p)
        if once:
            return
        at = entry(exe, pid, fn)
        u.wait_true("bpftrace's breakpoint in the target",
                    lambda: byte_at(pid, at) == 0xcc or self.p.poll() or "no int3 yet", 30)
        assert self.p.poll() is None, self.p.communicate()[0]

    def count(self):
        out = u.interrupt(self.p)[0]
        m = re.search(r"^@: (\d+)$", out, re.M)
        return int(m.group(1)) if m else 0


def uscope_count(res, fn):
    """fn's count: its row, or its rows' sum when the probe has a key."""
    rows = re.findall(rf"^{re.escape(fn)}(?:\s+\S+=\S+)*\s+(\d+)$", res.stdout, re.M)
    assert rows, res.stdout
    return sum(int(r) for r in rows)


@pytest.mark.parametrize("fn", ["obj_new", "work"])
def test_bpftrace_started_while_uscope_has_patched_it(fn, chaos):
    """uscope -e inject patches fn, then bpftrace puts its uprobe on it.
    obj_new starts with a push, work with a 5-byte add to memory, which a
    count reads nothing of: uscope's patch goes after either, and both
    tools count every call."""
    t = u.Target([chaos, ROUNDS, CALLS])
    t.expect("ready")
    bg = u.Background(["count", "-e", "inject", "-p", t.pid, fn])
    bg.wait_ready()
    b = Bpftrace(chaos, t.pid, fn)
    time.sleep(0.5)   # uscope's look at its patches (every 0.2 s) has seen it
    t.write("go\n")
    assert t.readline() == DONE
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.stderr
    counted = {"bpftrace": b.count(), "uscope": uscope_count(res, fn)}
    print(f"{fn}: {counted}")
    assert counted == {"bpftrace": CALLED[fn], "uscope": CALLED[fn]}, (counted, res.stderr)
    assert "another tool's uprobe" not in res.stderr, res.stderr
    assert u.code_is_the_file(t.pid, chaos) is True
    t.close_stdin()
    assert t.wait() == 0


@pytest.mark.parametrize("fn", ["obj_new", "work"])
def test_uscope_started_while_bpftrace_is_on_it(fn, chaos):
    """bpftrace's uprobe on fn first, then uscope -e inject, whose patch
    goes after the first instruction, beside bpftrace's int3. Both count
    every call."""
    t = u.Target([chaos, ROUNDS, CALLS])
    t.expect("ready")
    b = Bpftrace(chaos, t.pid, fn)
    bg = u.Background(["count", "-v", "-e", "inject", "-p", t.pid, fn])
    bg.wait_ready()
    t.write("go\n")
    assert t.readline() == DONE
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.stderr
    counted = {"bpftrace": b.count(), "uscope": uscope_count(res, fn)}
    print(f"{fn}: {counted}")
    assert counted == {"bpftrace": CALLED[fn], "uscope": CALLED[fn]}, (counted, res.stderr)
    assert u.code_is_the_file(t.pid, chaos) is True
    t.close_stdin()
    assert t.wait() == 0


# ---- short entries, at a steady call rate -----------------------------------------

# mixentry's functions: the first instruction's length, and a probe on each
# that reads nothing it changes (the patch goes after it)
SHORT = {"sum2": 2, "tab3": 3, "pair4": 4, "bump4": 4}
GAP = 50        # us between two calls: ~10,000 calls a second


@pytest.fixture
def mixentry(tmp_path):
    """A copy of mixentry only this test runs, its entries checked."""
    path = tmp_path / "mixentry-mix"
    shutil.copy(u.target("mixentry"), path)
    for fn, n in SHORT.items():
        first = u.insn_offsets(path, fn)[0]
        assert first == (0, n), f"{fn}'s first instruction, {first}: not what " \
                                f"tests/targets/mixentry.c expects of the compiler"
    return str(path)


class Steady:
    """mixentry calling fn every GAP us from start() to stop()."""

    def __init__(self, exe):
        self.t = u.Target([exe])
        line = self.t.readline()
        assert line.startswith("ready pid="), line

    @property
    def pid(self):
        return self.t.pid

    def start(self, fn):
        self.fn = fn
        self.t.write(f"run {fn} {GAP}\n")

    def stop(self):
        """The calls made, each with the right result."""
        self.t.write("stop\n")
        line = self.t.readline()
        m = re.fullmatch(rf"{self.fn} n=(\d+) bad=(\d+)", line)
        assert m and m.group(2) == "0", line
        return int(m.group(1))

    def end(self, exe):
        assert u.code_is_the_file(self.pid, exe) is True
        self.t.close_stdin()
        assert self.t.wait() == 0


def uscope_then(exe, probe, fn, other, rounds):
    """`rounds` times: a target calling fn, uscope -e inject on it (probe),
    then `other` (start(pid) -> stop() -> its count) put on fn while the
    calls go on. Each round's counts: (calls, uscope's, other's, uscope's
    stderr)."""
    out = []
    for _ in range(rounds):
        st = Steady(exe)
        bg = u.Background(["count", "-v", "-e", "inject", "-p", st.pid, probe])
        bg.wait_ready()
        st.start(fn)
        time.sleep(0.1)
        o = other(st.pid)
        time.sleep(0.5)   # hits on the other tool's uprobe, and uscope's looks
        n = st.stop()
        bg.signal(signal.SIGINT)
        res = bg.result()
        assert res.rc == 0, res.stderr
        out.append((n, uscope_count(res, fn), o.stop(), res.stderr))
        st.end(exe)
    return out


class BpftraceOn:
    def __init__(self, exe, fn, once=False):
        self.exe, self.fn, self.once = exe, fn, once

    def __call__(self, pid):
        self.b = Bpftrace(self.exe, pid, self.fn, self.once)
        return self

    def stop(self):
        return self.b.count()


@pytest.mark.parametrize("fn", list(SHORT))
def test_bpftrace_after_uscope_on_short_entries(fn, mixentry):
    """fn's first instruction is 2-4 bytes, not a push; uscope counts its
    calls, which reads nothing of it: the patch goes after it. bpftrace put
    on it while the calls go on at ~10,000 a second: the target goes on
    right, uscope counts every call, bpftrace every call after its start.
    Three rounds."""
    for n, mine, theirs, err in uscope_then(mixentry, fn, fn, BpftraceOn(mixentry, fn), 3):
        print(f"{fn}: calls {n}, uscope {mine}, bpftrace {theirs}")
        assert mine == n and 0 < theirs < n, (n, mine, theirs, err)
        assert "another tool's uprobe" not in err and "stays exposed" not in err, err


def test_bpftrace_after_uscope_reading_what_the_entry_changes(mixentry):
    """tab3 starts with movslq %edi,%rdi, which changes the $arg1 uscope
    reads: the patch covers it, its jump onto a pad where its bytes after
    the movslq are the file's. bpftrace's hits run the file's code; uscope
    takes its patch out at its next look, saying so once. Each call is
    counted by one of them: uscope's before bpftrace's breakpoint came,
    bpftrace's after (but those it makes before its program is attached).
    Three rounds."""
    for n, mine, theirs, err in uscope_then(mixentry, "tab3 v=$arg1", "tab3",
                                            BpftraceOn(mixentry, "tab3"), 3):
        print(f"tab3 $arg1: calls {n}, uscope {mine}, bpftrace {theirs}")
        assert "lands on a pad" in err, err
        assert err.count("another tool's uprobe") == 1, err
        assert "taken out there at once" in err, err
        assert 0 < mine < n and 0 < theirs < n and n - 5 <= mine + theirs <= n, \
            (n, mine, theirs, err)


@pytest.mark.parametrize("probe", ["tab3", "tab3 v=$arg1"])
def test_a_uprobe_that_comes_and_goes_at_once(probe, mixentry):
    """bpftrace exits at its first hit: its uprobe comes and goes within
    milliseconds, before uscope looks at its patches, and the kernel writes
    the file's first byte back where its int3 was, over uscope's jump. With
    the patch after the movslq, that is outside it; with the jump's other
    bytes the file's (the pad), the file's code: uscope's next look puts
    its jump's first byte back. The target goes on right either way."""
    for n, mine, theirs, err in uscope_then(mixentry, probe, "tab3",
                                            BpftraceOn(mixentry, "tab3", once=True), 3):
        print(f"{probe}: calls {n}, uscope {mine}, bpftrace {theirs}")
        assert theirs >= 1, (n, mine, theirs, err)
        if probe == "tab3":
            assert mine == n, (n, mine, err)
        else:
            assert 0 < mine < n, (n, mine, err)
            assert "has gone: the patch is back" in err, err


class PerfProbe:
    """perf probe -x EXE fn (an event of a group of its own), and perf
    record of it in one process."""

    def __init__(self, exe, fn, tmp):
        self.exe, self.fn, self.tmp = exe, fn, tmp
        self.event = f"mix{os.getpid()}:{fn}"
        r = subprocess.run(["perf", "probe", "-q", "-x", exe, "-a", f"{self.event}={fn}"],
                           capture_output=True, text=True, timeout=u.TIMEOUT)
        assert r.returncode == 0, r.stderr

    def __call__(self, pid):
        self.data = self.tmp / f"perf-{pid}.data"
        self.p = subprocess.Popen(["perf", "record", "-q", "-e", self.event, "-p", str(pid),
                                   "-o", str(self.data)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        u.REGISTRY.targets.append(self.p)
        at = entry(self.exe, pid, self.fn)
        u.wait_true("perf's breakpoint in the target",
                    lambda: byte_at(pid, at) == 0xcc or self.p.poll() or "no int3 yet", 30)
        assert self.p.poll() is None, self.p.stderr.read()
        return self

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        self.p.wait(u.TIMEOUT)
        r = subprocess.run(["perf", "script", "-i", str(self.data)], capture_output=True,
                           text=True, timeout=u.TIMEOUT)
        return len([x for x in r.stdout.splitlines() if self.event in x])

    def delete(self):
        if getattr(self, "p", None) and self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        subprocess.run(["perf", "probe", "-q", "-d", self.event.split(":")[0] + ":*"],
                       capture_output=True, timeout=u.TIMEOUT)


@pytest.mark.skipif(not shutil.which("perf"), reason="perf (linux-perf) is needed")
@pytest.mark.parametrize("probe", ["tab3", "tab3 v=$arg1"])
def test_perf_after_uscope(probe, mixentry, tmp_path):
    """perf probe on tab3 and perf record of it, while uscope has patched
    it: the target goes on right. After the movslq (a count): uscope counts
    every call, perf those after its start. Over it ($arg1): uscope those
    before perf's breakpoint came, perf those after its event was enabled
    (perf record arms the breakpoint some milliseconds before: the calls in
    between are nobody's)."""
    perf = PerfProbe(mixentry, "tab3", tmp_path)
    try:
        for n, mine, theirs, err in uscope_then(mixentry, probe, "tab3", perf, 2):
            print(f"{probe}: calls {n}, uscope {mine}, perf {theirs}")
            assert 0 < theirs < n, (n, mine, theirs, err)
            if probe == "tab3":
                assert mine == n, (n, mine, err)
            else:
                assert 0 < mine and mine + theirs <= n, (n, mine, theirs, err)
                assert "taken out there at once" in err, err
    finally:
        perf.delete()


class UscopeTracefs:
    """uscope count -e tracefs -p PID fn."""

    def __init__(self, exe, fn):
        self.exe, self.fn = exe, fn

    def __call__(self, pid):
        self.bg = u.Background(["count", "-e", "tracefs", "-p", pid, self.fn])
        self.bg.wait_ready()
        return self

    def stop(self):
        self.bg.signal(signal.SIGINT)
        res = self.bg.result()
        assert res.rc == 0, res.stderr
        return uscope_count(res, self.fn)


@pytest.mark.parametrize("probe", ["tab3", "tab3 v=$arg1"])
def test_uscope_on_tracefs_after_uscope_on_inject(probe, mixentry):
    """A second uscope session, on the tracefs engine, on tab3 while the
    first has patched it in the process: as bpftrace."""
    for n, mine, theirs, err in uscope_then(mixentry, probe, "tab3",
                                            UscopeTracefs(mixentry, "tab3"), 2):
        print(f"{probe}: calls {n}, uscope inject {mine}, uscope tracefs {theirs}")
        assert 0 < theirs < n, (n, mine, theirs, err)
        if probe == "tab3":
            assert mine == n, (n, mine, err)
        else:
            assert n - 5 <= mine + theirs <= n, (n, mine, theirs, err)


def test_uscope_started_while_bpftrace_is_on_a_short_entry(mixentry):
    """bpftrace's uprobe on tab3 first. A count (nothing the movslq changes):
    the inject patch goes after it, both count every call. $arg1: the patch
    would cover bpftrace's int3: -e inject refuses, saying why; -e auto puts
    the site on the bpf engine, which shares the uprobe."""
    for probe, engine in (("tab3", "inject"), ("tab3 v=$arg1", "auto")):
        st = Steady(mixentry)
        b = Bpftrace(mixentry, st.pid, "tab3")
        if engine == "auto":
            r = u.run_uscope(["count", "-e", "inject", "-d", "0.5", "-p", st.pid, probe])
            assert r.returncode == 1 and "another tool's uprobe is on it" in r.stderr, r.stderr
        bg = u.Background(["count", "-v", "-e", engine, "-p", st.pid, probe])
        bg.wait_ready()
        st.start("tab3")
        time.sleep(0.5)
        n = st.stop()
        bg.signal(signal.SIGINT)
        res = bg.result()
        assert res.rc == 0, res.stderr
        counted = {"calls": n, "bpftrace": b.count(), "uscope": uscope_count(res, "tab3")}
        print(f"{probe} on {engine}: {counted}")
        assert counted["uscope"] == counted["bpftrace"] == n, (counted, res.stderr)
        st.end(mixentry)


def test_exposed_sites_are_said(tmp_path):
    """gap4's bytes after its 4-byte add, read as the jump's displacement,
    point below address 0 in mixentry-nopie (loaded at 0x400000): no pad can
    be mapped for a probe that reads the $arg1 the add changes. uscope says
    so at attach, in one line naming the site (a count, which reads nothing
    of it, goes after the add, and is not said). In the PIE build, the pad
    goes below the executable."""
    exe = tmp_path / "mixentry-gap"
    shutil.copy(u.target("mixentry-nopie"), exe)
    for probe, said in (("gap4 v=$arg1", True), ("gap4", False)):
        st = Steady(str(exe))
        r = u.run_uscope(["count", "-e", "inject", "-d", "0.3", "-p", st.pid, probe])
        assert r.returncode == 0, r.stderr
        warned = [x for x in r.stderr.splitlines() if "stays exposed" in x]
        print(f"{probe}: {warned}")
        if said:
            assert len(warned) == 1 and "1 site (gap4) stays exposed in process" in warned[0], \
                r.stderr
        else:
            assert not warned, r.stderr
        st.end(str(exe))
    exe = tmp_path / "mixentry-pie"
    shutil.copy(u.target("mixentry"), exe)
    st = Steady(str(exe))
    r = u.run_uscope(["count", "-v", "-e", "inject", "-d", "0.3", "-p", st.pid, "gap4 v=$arg1"])
    assert r.returncode == 0 and "gap4: its jump in process" in r.stderr, r.stderr
    assert "stays exposed" not in r.stderr, r.stderr
    st.end(str(exe))


# ---- two sessions, two workers of one nginx -------------------------------------

NGINX = "/usr/sbin/nginx"
REQUESTS = 24


def per_worker(nginx, workers):
    """{worker: the connections it closed}, from nginx's error log (info:
    "PID#TID: *N ... closed keepalive connection")."""
    text = (nginx.dir / "error.log").read_text()
    return {w: len(re.findall(rf"^\S+ \S+ \[info\] {w}#\d+: .*closed keepalive connection",
                              text, re.M)) for w in workers}


@pytest.mark.skipif(not Path(NGINX).exists() or not shutil.which("curl"),
                    reason="nginx and curl are needed")
@pytest.mark.parametrize("engine", ["bpf", "inject"])
def test_two_sessions_on_two_workers_of_one_nginx(engine, tmp_path):
    import real_programs as rp
    n = rp.Nginx(tmp_path, {"a.html": "page a\n"}, workers=2)
    try:
        w1, w2 = n.workers()
        sessions = {}
        for w in (w1, w2):    # one after the other
            s = u.Background(["latency", "-e", engine, "-p", w, "ngx_http_process_request"])
            s.wait_ready()
            sessions[w] = s
        before = len(n.logged())
        for _ in range(REQUESTS):     # a connection each: either worker takes it
            assert n.get("/a.html") == ["page a\n"]
        logged = len(n.logged(before + REQUESTS)) - before
        counts = {}
        for w, s in sessions.items():
            s.signal(signal.SIGINT)
            res = s.result()
            assert res.rc == 0, res.stderr
            m = re.search(r"^count (\d+) ", res.stdout, re.M)
            counts[w] = int(m.group(1)) if m else 0
        print(f"{engine}: {counts}, access log {logged}")
        assert counts == per_worker(n, (w1, w2)), (counts, res.stderr)
        assert sum(counts.values()) == logged == REQUESTS
    finally:
        n.stop()
