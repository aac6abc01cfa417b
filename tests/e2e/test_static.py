"""The static binary (make static: build/static/uscope) in other Debian
userlands: the README's tour in debootstrap roots of bullseye (Debian 11,
glibc 2.31), bookworm (12, 2.36), trixie (13, 2.41) and sid, each entered with
chroot, where the dynamically linked ./uscope does not even start.

The roots come from scripts/roots.sh (made once by debootstrap, cached under
/var/cache/uscope: about a minute each on a fresh machine, then nothing). Each
command runs in a mount namespace of its own (unshare -m): /proc, /sys (with
tracefs) and /dev are mounted into the root there, and a directory of the
test's own over the root's /tmp, which holds the static uscope and the test
targets; so the cached roots, which other tests share, are never written to
and nothing stays mounted after a command.

The targets are programs that run in the root: the root's own (coreutils'
sleep and sh over the root's libc, its CPython) and the tests' targets
(tests/targets, demo/server.c) built static, whose answers are known exactly.
Each suite runs: trace with arguments (a static target and the root's libc),
count by key on every engine, latency, flow, $ustack (through the root's
libc, CFI only: its libc has no debug info), record/report, -p, uscope
killed with SIGKILL (the code restored), system-wide (every process of a
file: on the kernel engines, and on inject), py: where the root's CPython is
one uscope reads (3.11 and later: not bullseye's 3.9, which is refused in one
line), --serve; and uscope maps nothing but itself."""

import collections
import os
import re
import signal
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import uscope_e2e as u

STATIC = u.REPO / "build" / "static" / "uscope"
# suite -> the CPython in its root (its only package beyond minbase: the roots
# are shared with the tests of Python in containers, scripts/roots.sh keys
# them by their packages), and whether uscope reads it
SUITES = {
    "bullseye": (["python3.9"], False),     # before 3.11: functions named by co_name
    "bookworm": (["python3.11"], True),
    "trixie": (["python3.13"], True),
    "sid": (["python3.14", "python3.15"], True),
}
ROOT_TIMEOUT = 900      # a fresh root: debootstrap, a minute or a few

# Enters ROOT with WORK over its /tmp, in the mount namespace unshare made;
# execs CMD there (so the process's pid is CMD's).
ENTER = r'''
r=$1; w=$2; shift 2
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
mount --bind "$w" "$r/tmp"
cd /
exec chroot "$r" "$@"'''


def build_targets(work: Path):
    """The tests' targets, static (they run on any glibc), into work."""
    t = u.TARGETS
    base = ["cc", "-static", "-g", "-Wall"]
    low = base + ["-O1", "-fno-inline", "-fno-omit-frame-pointer"]
    builds = [
        (low, "aggapp", [t / "aggapp.c"]),
        (low + ["-fno-optimize-sibling-calls"], "flowfib", [t / "flowfib.c"]),
        (low, "waiter", [t / "waiter.c"]),
        (base + ["-O2"], "server", [u.REPO / "demo" / "server.c"]),
        # as Debian builds: -O2, no frame pointers (stacks.c's dlopen mode,
        # unused here, makes ld warn in a static link)
        (base + ["-O2", "-fomit-frame-pointer", "-pthread"], "stacks", [t / "stacks.c"]),
    ]
    for flags, name, srcs in builds:
        subprocess.run(flags + ["-o", str(work / name)] + [str(s) for s in srcs] + ["-ldl"],
                       check=True, capture_output=True)
    (work / "pycalls.py").write_bytes((t / "pycalls.py").read_bytes())


@pytest.fixture(scope="module")
def work():
    if not STATIC.is_file():
        pytest.fail(f"{STATIC} is missing: run `make static`", pytrace=False)
    with tempfile.TemporaryDirectory(prefix="uscope-static-") as d:
        w = Path(d)
        os.chmod(w, 0o1777)
        (w / "uscope").write_bytes(STATIC.read_bytes())
        os.chmod(w / "uscope", 0o755)
        build_targets(w)
        yield w


class Root:
    """A cached root of a suite, and commands run inside it."""

    def __init__(self, suite: str, path: str, work: Path):
        self.suite, self.path, self.work = suite, path, work
        self.python, self.has_qualname = SUITES[suite][0][0], SUITES[suite][1]
        # has_qualname: the root's CPython has co_qualname (3.11 and later)

    def argv(self, *cmd):
        return ["unshare", "-m", "--propagation", "private", "sh", "-ec", ENTER, "sh",
                self.path, str(self.work)] + [str(c) for c in cmd]

    # the unwind tables' cache under the test's /tmp, not the root's /root
    ENV = {"XDG_CACHE_HOME": "/tmp/cache", "HOME": "/root", "LC_ALL": "C"}

    def env(self, extra=None):
        return dict(os.environ, **self.ENV, **(extra or {}))

    def uscope(self, *args, input=None, env=None, timeout=u.TIMEOUT):
        """/tmp/uscope ARGS in the root, to completion."""
        argv = self.argv("/tmp/uscope", *args)
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             errors="surrogateescape", env=self.env(env))
        u.REGISTRY.uscopes.append(p)
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            u._stop(p)
            out, err = p.communicate()
            raise AssertionError(f"uscope did not finish within {timeout}s in {self.suite}: "
                                 f"{args}\nstderr:\n{err}")
        u.check_json_output(["uscope"] + [str(a) for a in args], out)
        return subprocess.CompletedProcess(argv, p.returncode, out, err)

    def ok(self, *args, **kw):
        cp = self.uscope(*args, **kw)
        assert cp.returncode == 0, f"{self.suite}: uscope {args} exited {cp.returncode}:\n{cp.stderr}"
        return cp

    def trace(self, *args):
        """uscope trace --json ARGS, its events to a file: -> TraceResult."""
        out = self.work / "events.json"
        out.unlink(missing_ok=True)
        cp = self.ok("trace", "--json", "-o", "/tmp/events.json", *args)
        return u.TraceResult(cp.args, cp.returncode, cp.stdout, cp.stderr, out.read_text(),
                             json=True).check(rc=0)

    def sleeps(self, *cmd):
        """Counter of the (seconds, nanoseconds) CMD asks the kernel to sleep,
        as strace sees its system calls (the truth to hold the probes of
        libc's nanosleep to: trixie's coreutils sleeps 1 ns more than asked)."""
        with tempfile.NamedTemporaryFile(mode="r", suffix=".strace") as f:
            subprocess.run(["strace", "-f", "-qq", "-e", "signal=none", "-e",
                            "trace=nanosleep,clock_nanosleep", "-o", f.name] + self.argv(*cmd),
                           check=True, capture_output=True, env=self.env(), timeout=u.TIMEOUT)
            return collections.Counter(
                (int(a), int(b)) for a, b in
                re.findall(r"\{tv_sec=(\d+), tv_nsec=(\d+)\}", f.read()))

    def background(self, *args):
        return Bg(self, args)

    def run(self, *cmd, timeout=u.TIMEOUT):
        return subprocess.run(self.argv(*cmd), capture_output=True, text=True, env=self.env(),
                              timeout=timeout)


class Bg(u.Background):
    """uscope in the background in a root (u.Background runs the host's)."""

    def __init__(self, root: Root, args):
        self.dir = tempfile.TemporaryDirectory(prefix="uscope-e2e-")
        self.stdout_path = Path(self.dir.name) / "stdout"
        self.json = "--json" in args
        self.labels = False
        self.argv = root.argv("/tmp/uscope", *args)
        self._stdout = open(self.stdout_path, "w")
        self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._stdout,
                                  stderr=subprocess.PIPE, text=True, errors="surrogateescape",
                                  env=root.env())
        u.REGISTRY.uscopes.append(self.p)
        self.pid = self.p.pid
        self.err_lines = []
        self.ready_n = None
        self._ready = threading.Event()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()


@pytest.fixture(scope="module", params=list(SUITES))
def root(request, work):
    suite = request.param
    cp = subprocess.run(["bash", str(u.REPO / "scripts" / "roots.sh"), suite] + SUITES[suite][0],
                        capture_output=True, text=True, timeout=ROOT_TIMEOUT)
    if cp.returncode != 0:
        pytest.fail(f"scripts/roots.sh {suite} failed:\n{cp.stderr}", pytrace=False)
    return Root(suite, cp.stdout.strip(), work)


def counts(cp):
    """{(probe, key values...): count} of count --json's final rows."""
    rows = [o for o in u.json_lines(cp.stdout, "count") if o["final"]]
    return {(o["probe"],) + tuple(o["key"].values()): o["count"] for o in rows}


# --------------------------------------------------------------------------

def test_one_file_with_nothing_of_the_build_host():
    """No interpreter, no shared library, no RPATH: ldd and readelf agree."""
    assert STATIC.is_file(), "run `make static`"
    ldd = subprocess.run(["ldd", str(STATIC)], capture_output=True, text=True)
    assert "statically linked" in ldd.stdout + ldd.stderr, ldd
    dyn = subprocess.check_output(["readelf", "-dW", str(STATIC)], text=True)
    assert not [l for l in dyn.splitlines() if any(t in l for t in ("NEEDED", "RPATH", "RUNPATH"))]
    assert "INTERP" not in subprocess.check_output(["readelf", "-lW", str(STATIC)], text=True)


def test_the_dynamic_build_does_not_start_in_bullseye(work):
    """Why the static binary: ./uscope (Debian 12's libraries) in Debian 11."""
    if not (u.REPO / "uscope").is_file():
        pytest.skip("./uscope is not built")
    cp = subprocess.run(["bash", str(u.REPO / "scripts" / "roots.sh"), "bullseye"] +
                        SUITES["bullseye"][0],
                        capture_output=True, text=True, timeout=ROOT_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    r = Root("bullseye", cp.stdout.strip(), work)
    (work / "uscope-dynamic").write_bytes((u.REPO / "uscope").read_bytes())
    os.chmod(work / "uscope-dynamic", 0o755)
    try:
        cp = r.run("/tmp/uscope-dynamic", "--version")
    finally:
        (work / "uscope-dynamic").unlink()
    assert cp.returncode == 127 and "error while loading shared libraries" in cp.stderr, cp


def test_trace_arguments_and_return(root):
    """The README's first example, on the static demo server."""
    res = root.trace("handle id=+0($arg1):s32 path=+0(+8($arg1)):string size=+16($arg1):s64",
                     "r:handle cost=$retval:s64", "--", "/tmp/server", "4")
    got = [(e.event, e.args) for e in res.events]
    paths = ["/index.html", "/api/users", "/img/logo.png", "/api/orders?id=42"]
    costs = [13, 14, -19, 25]
    want = []
    for i in range(4):
        want += [("handle", {"id": i, "path": paths[i], "size": 1024 * (i + 1)}),
                 ("handle__return", {"cost": costs[i]})]
    assert got == want, res.describe()
    assert res.stdout == "server: handled 4 requests, total cost 33\n"


def test_trace_the_roots_own_libc(root):
    """The root's coreutils sleep, through the root's libc (another glibc)."""
    res = root.trace("libc:nanosleep sec=+0($arg1):s64 nsec=+8($arg1):s64", "--", "sleep", "0.25")
    want = root.sleeps("sleep", "0.25")
    assert sum(want.values()) == 1 and list(want)[0][1] in (250000000, 250000001), want
    (sec, nsec), = want
    assert [(e.comm, e.args) for e in res.events] == [("sleep", {"sec": sec, "nsec": nsec})], \
        res.describe()


SLEEPS = ["sh", "-c", "sleep 0.01; sleep 0.01; sleep 0.02"]


@pytest.fixture(scope="module")
def sleeps(root):
    """What SLEEPS asks the kernel for, nanoseconds: count."""
    want = root.sleeps(*SLEEPS)
    assert sorted(want.elements()) in ([(0, 10000000)] * 2 + [(0, 20000000)],
                                       [(0, 10000001)] * 2 + [(0, 20000001)]), want
    return {("nanosleep", nsec): n for (sec, nsec), n in want.items()}


@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_count_by_key_on_every_engine(root, sleeps, engine):
    """Three sleeps under the root's sh, each a process of its own: the
    COMMAND's tree is followed, its libc probed."""
    cp = root.ok("count", "--json", "-e", engine, "libc:nanosleep nsec=+8($arg1):s64", "--",
                 *SLEEPS)
    assert counts(cp) == sleeps, cp.stderr


def test_count_names(root):
    cp = root.ok("count", "--json", "lookup name=$arg1:string", "--", "/tmp/aggapp", "names")
    assert counts(cp) == {("lookup", "alpha"): 3, ("lookup", "beta"): 2, ("lookup", "gamma"): 1,
                          ("lookup", "gadget"): 1, ("lookup", "x" * 64): 1}, cp.stdout


def test_latency(root):
    cp = root.ok("latency", "--json", "--unit", "us", "nap", "--", "/tmp/aggapp", "sleep")
    (row,) = [o for o in u.json_lines(cp.stdout, "latency") if o["final"]]
    # nap(600) x3, nap(3000) x2, nap(12000) x1: asleep at least that long
    assert row["count"] == 6 and row["min"] >= 600 and row["max"] >= 12000, row
    assert sum(b["count"] for b in row["buckets"]) == 6, row


def test_flow(root):
    cp = root.ok("flow", "--json", "-q", "fib", "--", "/tmp/flowfib", "3")
    lines = [o for o in u.json_lines(cp.stdout, "flow")]
    # fib(3) -> fib(2) -> (fib(1), fib(0)), fib(1)
    assert [(o["type"], o["function"], o["depth"]) for o in lines] == [
        ("entry", "fib", 0), ("entry", "fib", 1), ("entry", "fib", 2), ("return", "fib", 2),
        ("entry", "fib", 2), ("return", "fib", 2), ("return", "fib", 1), ("entry", "fib", 1),
        ("return", "fib", 1), ("return", "fib", 0)], cp.stdout
    assert "flowfib done n=3 fib=2" in cp.stdout
    assert all(o["duration_ns"] > 0 for o in lines if o["type"] == "return")


def test_ustack_of_a_static_target(root):
    """The README's stacks: -O2 without frame pointers, walked with the CFI."""
    cp = root.ok("count", "--folded", "leaf $ustack", "--", "/tmp/stacks", "mixed", "16")
    assert sorted(l for l in cp.stdout.splitlines() if ";" in l) == [
        "_start;__libc_start_main;__libc_start_call_main;main;d4;d3;d2;d1;outer;mid;leaf 16",
        "_start;__libc_start_main;__libc_start_call_main;main;outer;mid;leaf 16"], cp.stdout


def entry_point(path):
    """The ELF entry point of path (a PIE's: from its base)."""
    with open(path, "rb") as f:
        return struct.unpack_from("<Q", f.read(32), 24)[0]


def test_ustack_through_the_roots_libc(root):
    """sleep's call of nanosleep, through the root's libc (no debug info: its
    CFI and its dynamic symbols) down to the stripped sleep's _start."""
    cp = root.ok("count", "--folded", "libc:nanosleep $ustack", "--", "sleep", "0.01")
    (line,) = [l for l in cp.stdout.splitlines() if ";" in l]
    stack, n = line.rsplit(" ", 1)
    frames = stack.split(";")
    assert n == "1" and frames[-1] in ("nanosleep", "__nanosleep"), line
    assert "__libc_start_main" in frames, line
    # the outermost frame: in _start, right after its call
    assert frames[0].startswith("sleep+0x"), line
    entry = entry_point(Path(root.path) / "usr/bin/sleep")
    assert 0 < int(frames[0][len("sleep+"):], 16) - entry < 64, (line, hex(entry))
    assert len(frames) >= 5, line


def test_record_report(root):
    rec = root.ok("record", "-o", "/tmp/app.usc", "deep", "nap", "--", "/tmp/aggapp", "rec")
    s = u.parse_summary(rec.stderr)
    assert (s.total, s.lost) == (10, 0), rec.stderr
    cp = root.ok("report", "-r", "/tmp/app.usc", "--json")
    objs = u.parse_json_objects(cp.stdout)
    assert {o["function"]: o["calls"] for o in objs if "function" in o} == {"deep": 4, "nap": 1}
    assert {o["probe"]: (o["events"], o["lost"]) for o in objs if "probe" in o} == {
        "deep": (4, 0), "nap": (1, 0), "deep__return": (4, 0), "nap__return": (1, 0)}
    # recursion: deep(3) to deep(0), which sleeps 2 ms; at least as long in all
    deep = next(o for o in objs if o.get("function") == "deep")
    assert deep["min_ns"] >= 2_000_000, deep


def test_pid_and_only_itself_mapped(root):
    """-p of a process started in the root; meanwhile uscope's executable
    mappings are its own file and the kernel's vDSO: no shared object."""
    w = u.Waiter.__new__(u.Waiter)     # tests/targets' waiter, the static one in the root
    u.Target.__init__(w, root.argv("/tmp/waiter"))
    w.expect("ready")
    bg = root.background("trace", "--json", "-p", w.pid, "on_line len=$arg2:s32")
    bg.wait_ready()
    exe = os.stat(root.work / "uscope")
    for line in Path(f"/proc/{bg.pid}/maps").read_text().splitlines():
        f = line.split(None, 5)
        if "x" in f[1] and f[5:] not in (["[vdso]"], ["[vsyscall]"]):
            assert int(f[4]) == exe.st_ino, f"uscope maps code of another file: {line}"
    w.k = 0
    for line in ("a", "bb", "ccc"):
        w.send(line)
    bg.signal(signal.SIGINT)
    res = bg.result()
    res.check(rc=0)
    assert [e.args["len"] for e in res.events] == [1, 2, 3], res.describe()
    w.close_stdin()
    assert w.wait() == 0


def code_is_the_files(pid, path):
    """True when every executable mapping of path (by inode) in process pid
    holds the file's bytes, else what differs."""
    ino, seen = os.stat(path).st_ino, False
    with open(f"/proc/{pid}/maps") as m, open(f"/proc/{pid}/mem", "rb") as mem, \
            open(path, "rb") as f:
        for line in m:
            p = line.split()
            if len(p) < 6 or "x" not in p[1] or int(p[4]) != ino:
                continue
            seen = True
            lo, hi = (int(x, 16) for x in p[0].split("-"))
            f.seek(int(p[2], 16))
            want = f.read(hi - lo)
            mem.seek(lo)
            if mem.read(len(want)) != want:
                return f"the code at {lo:#x} is not the file's"
    return seen or "no executable mapping of the file"


def test_sigkilled_uscope_leaves_nothing_patched(root):
    """uscope killed while its agent is in the process: the code becomes the
    file's again (the agent lets go at the next hit, the janitor, the static
    binary run again from /proc/self/exe in the root, undoes the rest)."""
    w = u.Waiter.__new__(u.Waiter)
    u.Target.__init__(w, root.argv("/tmp/waiter"))
    w.expect("ready")
    w.k = 0
    bg = root.background("trace", "-e", "inject", "-p", w.pid, "on_line len=$arg2:s32")
    bg.wait_ready()
    w.send("traced")
    assert code_is_the_files(w.pid, root.work / "waiter") is not True, "not patched?"
    bg.signal(signal.SIGKILL)
    bg.wait()
    w.send("after")
    u.wait_true("the waiter's code is the file's again",
                lambda: code_is_the_files(w.pid, root.work / "waiter"), 10)
    w.close_stdin()
    assert w.wait() == 0


def test_system_wide(root):
    """No -p, no COMMAND: every process that runs /tmp/aggapp (on the kernel
    engines with -e auto), here one started after uscope is ready."""
    bg = root.background("count", "--json", "/tmp/aggapp:lookup name=$arg1:string")
    bg.wait_ready()
    cp = root.run("/tmp/aggapp", "names")
    assert cp.returncode == 0 and "aggapp done" in cp.stdout, cp
    bg.signal(signal.SIGINT)
    assert bg.wait() == 0, bg.stderr
    rows = [o for o in u.json_lines(bg.stdout_path.read_text(), "count") if o["final"]]
    assert {o["key"]["name"]: o["count"] for o in rows} == {
        "alpha": 3, "beta": 2, "gamma": 1, "gadget": 1, "x" * 64: 1}, bg.stderr


def test_system_wide_on_inject(root):
    """-e inject without -p: every running process of /tmp/waiter is found
    (by its maps, from a mount namespace not its own) and patched."""
    w = u.Waiter.__new__(u.Waiter)
    u.Target.__init__(w, root.argv("/tmp/waiter"))
    w.expect("ready")
    w.k = 0
    bg = root.background("count", "--json", "-e", "inject", "/tmp/waiter:on_line len=$arg2:s32")
    bg.wait_ready()
    assert "uscope: tracing 1 function in 1 process\n" in bg.stderr, bg.stderr
    for line in ("a", "bb", "bb"):
        w.send(line)
    bg.signal(signal.SIGINT)
    assert bg.wait() == 0, bg.stderr
    rows = [o for o in u.json_lines(bg.stdout_path.read_text(), "count") if o["final"]]
    assert {o["key"]["len"]: o["count"] for o in rows} == {1: 1, 2: 2}, bg.stderr
    assert code_is_the_files(w.pid, root.work / "waiter") is True
    w.close_stdin()
    assert w.wait() == 0


def test_python(root):
    """The README's py: example with the root's own CPython."""
    cp = root.ok("count", "--json", "py:__main__:*", "--", root.python, "/tmp/pycalls.py", "plain")
    c = {}
    for k, n in counts(cp).items():
        c[k[1]] = c.get(k[1], 0) + n
    # the functions every version names alike (3.12 inlines comprehensions)
    same = {"__main__:" + f: n for f, n in [
        ("Account.add", 67), ("Account.__init__", 61), ("recurse", 26), ("numbers", 6),
        ("pause", 6), ("fail", 5), ("late", 4), ("gather", 4), ("worker", 3), ("key", 3),
        ("define_late", 1), ("<module>", 1), ("Account", 1), ("Account.check", 1), ("work", 1),
        ("unwind", 1)]}
    if not root.has_qualname:
        # bullseye's 3.9 has no co_qualname: a method is named by its
        # co_name alone, as cProfile and py-spy name it (doc/python.md)
        same = {k.replace("Account.", ""): n for k, n in same.items()}
    assert {f: c.get(f) for f in same} == same, c


def test_serve_takes_numeric_addresses(root):
    """--serve without NSS: a number or localhost serves, a name is refused."""
    cp = root.uscope("count", "--serve", "nosuchhost.invalid:9464", "lookup", "--",
                     "/tmp/aggapp", "names")
    assert cp.returncode != 0
    assert ("uscope: this static uscope takes a numeric address, not the name "
            "'nosuchhost.invalid'") in cp.stderr, cp.stderr
    port = free_port()
    p = subprocess.Popen(root.argv("/tmp/uscope", "count", "--serve", f"localhost:{port}",
                                   "lookup", "--", "/tmp/aggapp", "names", "hold"),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=root.env())
    u.REGISTRY.uscopes.append(p)
    lines = []
    while "ready" not in lines:     # aggapp has made its calls (names, then hold)
        line = p.stdout.readline()
        assert line, f"uscope ended: {p.wait()}: {p.stderr.read()}"
        lines.append(line.strip())
    # until a snapshot taken after the calls is served: the hits of aggapp names
    hits, deadline = None, time.monotonic() + u.TIMEOUT
    while hits != ["8"] and time.monotonic() < deadline:
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
            hits = [l.rsplit(" ", 1)[1] for l in body.decode().splitlines()
                    if l.startswith("uscope_probe_hits_total{")]
        except OSError:
            pass
        time.sleep(0.1)
    out, err = p.communicate("", timeout=u.TIMEOUT)
    assert hits == ["8"], (hits, err)
    assert p.returncode == 0, err


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_debuginfod_is_said_not_asked(root):
    """libdwfl would dlopen libdebuginfod: the static binary says, once, that
    it does not, and goes on as without a server."""
    subprocess.run(["objcopy", "--strip-debug", str(root.work / "server"),
                    str(root.work / "server-nodebug")], check=True)
    cp = root.uscope("trace", "handle r->id", "--", "/tmp/server-nodebug", "2",
                     env={"DEBUGINFOD_URLS": "http://127.0.0.1:9"})
    assert cp.returncode == 1
    assert u.error_lines(cp.stderr) == [
        "uscope: warning: this static uscope does not ask debuginfod servers (DEBUGINFOD_URLS "
        "is set): fetch a file's debug info with debuginfod-find and put it at "
        "/usr/lib/debug/.build-id/xx/yyyy.debug, or use a dynamically linked uscope",
        "uscope: handle r->id: /tmp/server-nodebug has no debug info (DWARF) to find variables "
        "by name in: build it with -g, or install its separate debug file"], cp.stderr
