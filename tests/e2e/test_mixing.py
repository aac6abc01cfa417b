"""uscope beside other tracers on the same function (issue 40): the target
must never pay for it.

A kernel uprobe (bpftrace, perf, a uscope session on the kernel engines)
writes an int3 over the instruction at its offset and, when it is hit, runs
the file's instruction out of line and goes on after it: over an inject
patch's jump, into the middle of it. So:
  - bpftrace started while uscope -e inject has patched f, and the other
    order: the target finishes right, and each tool counts what it can
    (said below for each case);
  - two uscope sessions on two workers of one nginx, one after the other,
    both on the bpf engine, then both on inject: each counts its worker's
    requests (nginx's own error log says which worker closed each
    connection), and the counts add up to the access log.
The functions: chaos's obj_new starts with a push (the inject patch goes
after it: a uprobe at the entry runs the push and lands on the jump, both
tools count every call); work's first instruction is 5 bytes (the patch
covers it exactly: bpftrace's int3 lands on the jump, which uscope takes out
at once, saying so; from then on bpftrace counts alone)."""

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
    the process (an int3 at fn's entry)."""

    def __init__(self, exe, pid, fn):
        self.p = subprocess.Popen(["bpftrace", "-p", str(pid), "-e",
                                   f"uprobe:{exe}:{fn} {{ @ = count(); }}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        at = entry(exe, pid, fn)
        u.wait_true("bpftrace's breakpoint in the target",
                    lambda: byte_at(pid, at) == 0xcc or self.p.poll() or "no int3 yet", 30)
        assert self.p.poll() is None, self.p.communicate()[0]

    def count(self):
        self.p.send_signal(signal.SIGINT)
        out = self.p.communicate(timeout=u.TIMEOUT)[0]
        m = re.search(r"^@: (\d+)$", out, re.M)
        return int(m.group(1)) if m else 0


def uscope_count(res, fn):
    m = re.search(rf"^{fn}\s+(\d+)$", res.stdout, re.M)
    assert m, res.stdout
    return int(m.group(1))


@pytest.mark.parametrize("fn", ["obj_new", "work"])
def test_bpftrace_started_while_uscope_has_patched_it(fn, chaos):
    """uscope -e inject patches fn, then bpftrace puts its uprobe on it.
    obj_new: both count every call. work: uscope takes its patch out as
    bpftrace's int3 comes (said once) and counts none of the calls after;
    bpftrace counts them all."""
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
    assert counted["bpftrace"] == CALLED[fn], counted
    if fn == "obj_new":
        assert counted["uscope"] == CALLED[fn], (counted, res.stderr)
    else:
        assert counted["uscope"] == 0, (counted, res.stderr)
        assert res.stderr.count("another tool's uprobe") == 1, res.stderr
        assert "taken out there at once" in res.stderr, res.stderr
    assert u.code_is_the_file(t.pid, chaos) is True
    t.close_stdin()
    assert t.wait() == 0


@pytest.mark.parametrize("fn", ["obj_new", "work"])
def test_uscope_started_while_bpftrace_is_on_it(fn, chaos):
    """bpftrace's uprobe on fn first, then uscope (-e auto). obj_new: the
    inject patch goes after the push, beside bpftrace's int3. work: its
    patch would cover the int3, so the site goes to the bpf engine, which
    shares bpftrace's uprobe. Both count every call either way; -e inject
    alone refuses work, saying why."""
    t = u.Target([chaos, ROUNDS, CALLS])
    t.expect("ready")
    b = Bpftrace(chaos, t.pid, fn)
    if fn == "work":
        r = u.run_uscope(["count", "-e", "inject", "-d", "0.5", "-p", t.pid, fn])
        assert r.returncode == 1 and "another tool's uprobe is on it" in r.stderr, r.stderr
    bg = u.Background(["count", "-v", "-p", t.pid, fn])
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
