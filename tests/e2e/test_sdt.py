"""USDT probes defined at run time (libuscope-sdt, sdt/): a C program
(tests/targets/sdt.c) and a Python script (tests/targets/sdt_target.py,
uscope_sdt) make provider "sdtapp" at run time; uscope lists its probes in
the running process, traces them with every engine, with -p and with
-- COMMAND, with exact argument values; the semaphores are up while traced
and down after; bpftrace attaches to them too; the Python http.server
example (sdt/python/examples/http_server.py) is traced for a request made
with urllib.

The provider is a memfd: /proc/PID/maps shows it as "/memfd:sdtapp
(deleted)", and uscope reaches it through /proc/PID/map_files/START-END."""

import collections
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import Background, Target, assert_multiset, target, trace, trace_argv, trace_bg

SDT = target("sdt")
SDT_PY = str(u.TARGETS / "sdt_target.py")
HTTP = str(u.REPO / "sdt" / "python" / "examples" / "http_server.py")
PYTHON = "/usr/bin/python3"
TARGETS = {"c": [SDT], "python": [PYTHON, SDT_PY]}

MSGS = ["hello", "with space", 'quote " and \\ backslash']
PATHS = ["/etc/hosts", "/tmp/a b", "/var/log/x.log"]
PROBES = ["ints", "wide", "str", "noargs"]
SPECS = {
    "ints": "-1@%dil 1@%sil -2@%dx 2@%cx -4@%r8d 4@%r9d",
    "wide": "-8@%rdi 8@%rsi 8@%rdx -4@%ecx",
    "str": "8@%rdi",
    "noargs": "",
}
# ints with no FETCHARG: every argument, typed by its spec
TRACE_PROBES = [
    "sdtapp:%sdtapp:ints",
    "sdtapp:%sdtapp:wide a=$arg1 b=$arg2 msg=$arg3:string n=$arg4",
    "sdtapp:%sdtapp:str path=$arg1:string",
    "sdtapp:%sdtapp:noargs",
]


def expected(i):
    """label -> args of round i (tests/targets/sdt.c)."""
    return {
        "sdtapp:ints": {"arg1": -(i + 1), "arg2": 250 + i, "arg3": -30000 - i,
                        "arg4": 65000 + i, "arg5": -2000000000 - i, "arg6": 4000000000 + i},
        "sdtapp:wide": {"a": -9000000000000000000 - i, "b": 18000000000000000000 + i,
                        "msg": MSGS[i % 3], "n": i},
        "sdtapp:str": {"path": PATHS[i % 3]},
        "sdtapp:noargs": {},
    }


def expected_events(rounds):
    return [(label, tuple(sorted(args.items())))
            for i in rounds for label, args in expected(i).items()]


def seen_events(r):
    return [(e.event, tuple(sorted(e.args.items()))) for e in r.events]


def start(kind):
    """The target in wait mode: (Target, its memfd's fd)."""
    t = Target(TARGETS[kind] + ["wait"])
    m = re.fullmatch(r"ready (\d+) (\d+)", t.readline())
    assert m and int(m.group(1)) == t.pid, "the target's ready line"
    return t, int(m.group(2))


def memfd_maps(pid):
    """The mappings of the provider's memfd in pid: [(start, end, perms)]."""
    out = []
    for line in open(f"/proc/{pid}/maps"):
        f = line.split(None, 5)
        if len(f) == 6 and f[5].strip() == "/memfd:sdtapp (deleted)":
            start, end = f[0].split("-")
            out.append((start, end, f[1]))
    return out


def round_(t, k):
    """Fire round k (1-based) in the wait-mode target: how many of its four
    probes were enabled then."""
    t.write("x\n")
    m = re.fullmatch(rf"round {k} enabled=(\d)", t.readline())
    assert m, f"target's round {k} line"
    return int(m.group(1))


# --------------------------------------------------------------------------
# The object as consumers see it

@pytest.mark.parametrize("kind", ["c", "python"])
def test_notes_and_list(kind):
    t, fd = start(kind)
    maps = memfd_maps(t.pid)
    assert [m[2] for m in maps] == ["r--p", "r-xp", "rw-p"], maps
    obj = f"/proc/{t.pid}/fd/{fd}"
    assert os.readlink(obj) == "/memfd:sdtapp (deleted)"

    # the notes, as readelf reads them: sys/sdt.h's format
    notes = u.usdt_notes(obj)
    assert [(n.provider, n.name) for n in notes] == [("sdtapp", p) for p in PROBES]
    syms = {}
    for line in u._run(["nm", "-D", obj]).splitlines():
        addr, kind_, name = line.split()
        syms[name] = (int(addr, 16), kind_)
    base = int(re.search(r"\.stapsdt\.base\s+PROGBITS\s+([0-9a-f]+)",
                         u._run(["readelf", "-SW", obj])).group(1), 16)
    for n in notes:
        assert " ".join(n.args) == SPECS[n.name], (n.name, n.args)
        assert syms[n.name] == (n.location, "T"), f"{n.name}: the stub is the site"
        assert syms[f"sdtapp_{n.name}_semaphore"] == (n.semaphore, "D")
        assert n.base == base
    assert len({n.semaphore for n in notes}) == len(notes)

    # uscope list --usdt -p: the module as /proc/PID/map_files/ of its first mapping
    path = f"/proc/{t.pid}/map_files/{maps[0][0]}-{maps[0][1]}"
    r = u.run_uscope(["list", "--usdt", "-p", t.pid])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [l for l in lines if "sdtapp:" in l] == [f"{path} %sdtapp:{p}" for p in PROBES], \
        r.stdout
    r = u.run_uscope(["list", "--usdt", "-v", "-p", t.pid, "sdtapp:wide"])
    assert r.returncode == 0, r.stderr
    wide = notes[1]
    assert r.stdout.splitlines() == [
        f"{path} %sdtapp:wide",
        f"  site {wide.location:#x} semaphore {wide.semaphore:#x} args: {SPECS['wide']}"], r.stdout
    # and its functions, under the module's short name (the memfd's)
    r = u.run_uscope(["list", "-p", t.pid])
    assert r.returncode == 0, r.stderr
    assert {f"sdtapp:{p}" for p in PROBES} <= set(r.stdout.splitlines()), r.stdout
    # the path works as a MODULE, and in list
    r = u.run_uscope(["list", "--usdt", path])
    assert r.stdout.splitlines() == [f"{path} %sdtapp:{p}" for p in PROBES], r.stderr
    t.close_stdin()
    t.expect("sdt done")
    assert t.wait() == 0


# --------------------------------------------------------------------------
# uscope trace -p

@pytest.mark.parametrize("engine", ["tracefs", "bpf", "inject", None])
@pytest.mark.parametrize("kind", ["c", "python"])
def test_trace_pid(kind, engine):
    t, _ = start(kind)
    assert round_(t, 1) == 0, "nothing traced yet: every semaphore is 0"
    extra = ["-e", engine] if engine else []
    bg = trace_bg(*TRACE_PROBES, pid=t.pid, extra=extra, labels=True)
    assert bg.wait_ready() == 4
    for k in (2, 3, 4, 5):
        assert round_(t, k) == 4, f"round {k}: every probe is enabled while traced"
    bg.signal(signal.SIGINT)
    r = bg.result().check(ready=4)
    assert_multiset(seen_events(r), expected_events(range(1, 5)), "(probe, args)")
    assert all(e.tid == t.pid for e in r.events)
    # the tracer is gone: so are the semaphores' counts
    assert round_(t, 6) == 0, "after tracing, every semaphore is back to 0"
    t.close_stdin()
    t.expect("sdt done")
    assert t.wait() == 0


def test_trace_pid_json():
    t, _ = start("c")
    bg = trace_bg(*TRACE_PROBES, pid=t.pid, json=True, extra=["-e", "tracefs"])
    bg.wait_ready()
    assert round_(t, 1) == 4
    bg.signal(signal.SIGINT)
    r = bg.result().check(ready=4)
    by = {o["event"]: o["args"] for o in r.objects}
    assert by == expected(0), by
    t.close_stdin()
    assert t.wait() == 0


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_no_root_inject():
    """Without CAP_SYS_ADMIN /proc/PID/map_files cannot be opened: a user's
    own process's provider is reached through the memfd the library keeps
    open (/proc/PID/fd/N), and the inject engine, which needs no root,
    traces it."""
    if subprocess.run(AS_NOBODY + [str(u.uscope_path()), "--version"],
                      capture_output=True).returncode != 0:
        pytest.skip(f"user nobody cannot execute {u.uscope_path()}")
    t = Target(AS_NOBODY + [SDT, "wait"])
    m = re.fullmatch(r"ready (\d+) (\d+)", t.readline())
    pid, fd = int(m.group(1)), int(m.group(2))
    r = u.run_uscope(["list", "--usdt", "-p", pid, "sdtapp:*"], prefix=AS_NOBODY)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"/proc/{pid}/fd/{fd} %sdtapp:{p}" for p in PROBES]
    argv = AS_NOBODY + [str(u.uscope_path()), "trace", "-e", "inject", "-p", str(pid)] + \
        TRACE_PROBES
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    u.REGISTRY.uscopes.append(p)
    k, deadline = 1, time.monotonic() + 20
    while round_(t, k) != 4:        # until attached: the semaphores are up
        assert time.monotonic() < deadline and p.poll() is None, "uscope did not attach"
        k += 1
        time.sleep(0.1)
    round_(t, k + 1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    r = u.TraceResult(argv, p.returncode, out, err, out, labels=True).check(ready=4)
    assert_multiset(seen_events(r), expected_events([k - 1, k]), "(probe, args)")
    assert round_(t, k + 2) == 0
    t.close_stdin()
    assert t.wait() == 0


# --------------------------------------------------------------------------
# uscope trace -- COMMAND: the provider does not exist before the program
# runs; uscope waits for it, then attaches

@pytest.mark.parametrize("engine", ["tracefs", "bpf", None])
@pytest.mark.parametrize("kind", ["c", "python"])
def test_trace_command(kind, engine):
    n = 3
    extra = ["-e", engine] if engine else []
    r = trace(*TRACE_PROBES, cmd=TARGETS[kind] + ["traced", n] + PROBES, extra=extra,
              labels=True).check(ready=4)
    # the wait is said with -v, or once it has lasted a second: not here
    assert "waiting for it to load it" not in r.stderr, r.stderr
    assert r.stdout.splitlines()[-1] == f"sdt done n={n} enabled=4", r.describe()
    assert_multiset(seen_events(r), expected_events(range(n)), "(probe, args)")


def test_trace_command_never_loaded():
    r = u.run_uscope(["trace", "nosuchprov:%nosuchprov:x", "--", SDT, "wait"], input="")
    lines = u.error_lines(r.stderr)
    assert r.returncode == 1, r.stderr
    assert lines == [f"uscope: {SDT} exited before it loaded a module named 'nosuchprov' "
                     "(uscope list -p PID names a running process's modules)"], r.stderr
    assert "sdt done" in r.stdout, "the command ran to its end"


# --------------------------------------------------------------------------
# bpftrace (Debian's, through BCC's USDT support)

BPFTRACE = shutil.which("bpftrace")


def missing_lines(lines, rounds):
    """The lines of these rounds (0-based) not in bpftrace's output, as
    many times as they are missing (a round's str line is another's too)."""
    want = collections.Counter(l + "\n" for i in rounds for l in bpftrace_expected(i))
    return want - collections.Counter(lines)


def bpftrace_run(argv, t):
    """Run bpftrace, firing rounds until one shows whole in its output (its
    semaphores go up before its probes are attached: BCC raises them
    first), then three more; stop it. -> (its output lines, the first
    round seen whole, the next round's number)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    u.REGISTRY.targets.append(p)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()

    def whole(i):
        return all(l + "\n" in lines for l in bpftrace_expected(i))

    k, full = 1, None
    deadline = time.monotonic() + 25
    while full is None:
        assert p.poll() is None, f"bpftrace exited {p.returncode}: {p.stderr.read()}"
        assert time.monotonic() < deadline, f"no round seen whole by bpftrace: {lines}"
        round_(t, k)
        time.sleep(0.2)
        if whole(k - 1):
            full = k
        k += 1
    for _ in range(3):
        assert round_(t, k) == 3, "bpftrace holds the three semaphores up"
        k += 1
    # bpftrace reads a CPU's buffer when an event wakes it: a line can wait
    # in the buffer of a CPU the target has left (a loaded machine moves it).
    # Wait for the four rounds' lines before stopping it (it does not drain
    # at exit), firing a round now and then to wake every buffer; the rounds
    # fired meanwhile are checked like the others. A wait on the lines, not a
    # deadline: the bound is only there to report a bpftrace that never shows
    # them.
    window = range(full - 1, k - 1)
    deadline = time.monotonic() + 120
    while missing_lines(lines, window):
        assert p.poll() is None, f"bpftrace exited {p.returncode}: {p.stderr.read()}"
        if time.monotonic() >= deadline:
            lost = [l for l in lines if l.startswith("Lost ")]
            p.kill()
            if lost:    # bpftrace's own perf buffer overflowed: its loss, said
                pytest.skip(f"bpftrace lost events on a loaded machine: {lost}")
            raise AssertionError(
                f"bpftrace never printed {sorted(missing_lines(lines, window).elements())}; "
                f"its stderr: {p.stderr.read()!r}")
        time.sleep(0.2)
        if missing_lines(lines, window):
            round_(t, k)
            k += 1
    # bpftrace 0.17 acts on SIGINT only when it interrupts its epoll_wait
    # (u.interrupt): sent again until it exits, with a round between
    # (its lines are checked like the others')
    for _ in range(5):
        p.send_signal(signal.SIGINT)
        try:
            p.wait(3)
            break
        except subprocess.TimeoutExpired:
            round_(t, k)
            k += 1
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        raise AssertionError(f"bpftrace did not exit on SIGINT:\nstdout:\n{lines}\n"
                             f"stderr:\n{err}")
    reader.join(10)
    return [l.rstrip("\n") for l in lines if l.strip() and not l.startswith("Attaching")], \
        full, k


BPF_PROG = (
    'usdt:{path}:sdtapp:ints {{ printf("ints %d %u %d %u %d %u\\n", '
    'arg0, arg1, arg2, arg3, arg4, arg5); }} '
    'usdt:{path}:sdtapp:wide {{ printf("wide %ld %lu %s %d\\n", arg0, arg1, str(arg2), arg3); }} '
    'usdt:{path}:sdtapp:str {{ printf("str %s\\n", str(arg0)); }}')


def bpftrace_expected(i):
    e = expected(i)
    ints = e["sdtapp:ints"]
    wide = e["sdtapp:wide"]
    return ["ints " + " ".join(str(ints[f"arg{k}"]) for k in range(1, 7)),
            f"wide {wide['a']} {wide['b']} {wide['msg']} {wide['n']}",
            f"str {PATHS[i % 3]}"]


@pytest.mark.skipif(BPFTRACE is None, reason="bpftrace is not installed (scripts/deps.sh)")
@pytest.mark.parametrize("how", ["pid-glob", "fd-path"])
def test_bpftrace(how):
    t, fd = start("c")
    path = "*" if how == "pid-glob" else f"/proc/{t.pid}/fd/{fd}"
    argv = [BPFTRACE, "-p", str(t.pid), "-e", BPF_PROG.format(path=path)]
    lines, full, end = bpftrace_run(argv, t)
    # every line of the first round seen whole and of the three after it;
    # before and after, whatever was attached, with the right values, and
    # no line more often than the rounds fired print it
    missing = missing_lines([l + "\n" for l in lines], range(full - 1, full + 3))
    assert not missing, f"bpftrace lines of the rounds traced whole: missing {missing}"
    allowed = collections.Counter(l for i in range(end - 1) for l in bpftrace_expected(i))
    extra = collections.Counter(lines) - allowed
    assert not extra, f"unexpected lines: {extra}"
    assert round_(t, end) == 0, "bpftrace is gone: the semaphores are down"
    t.close_stdin()
    assert t.wait() == 0


# --------------------------------------------------------------------------
# The Python http.server example

HTTP_PROBE = ("simplehttp:%simplehttp:file_transfer client=$arg1:string path=$arg2:string "
              "size=$arg3")
SERVING_RE = re.compile(r"^serving (.+) on http://127\.0\.0\.1:(\d+)/ pid (\d+)$")


@pytest.fixture
def www():
    with tempfile.TemporaryDirectory(prefix="uscope-e2e-www-") as d:
        Path(d, "hello.txt").write_text("hello from uscope\n")
        Path(d, "sub dir").mkdir()
        Path(d, "sub dir", "data.bin").write_bytes(bytes(range(256)) * 40)
        yield d


def fetch(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        return resp.read()


def http_checks(r, www):
    # the listing's size is what the server sent: its bytes
    want = [("127.0.0.1", f"{www}/hello.txt", 18),
            ("127.0.0.1", f"{www}/sub dir/data.bin", 10240)]
    got = [(e.args["client"], e.args["path"], e.args["size"]) for e in r.events]
    assert got[:2] == want, r.describe()
    assert len(got) == 3 and got[2][:2] == ("127.0.0.1", f"{www}/sub dir/"), r.describe()
    assert {e.event for e in r.events} == {"simplehttp:file_transfer"}


@pytest.mark.parametrize("engine", ["tracefs", "bpf"])
def test_http_server_pid(www, engine):
    t = Target([PYTHON, HTTP, "0", "--directory", www], stdin=False)
    m = SERVING_RE.match(t.readline())
    assert m and int(m.group(3)) == t.pid
    port = int(m.group(2))
    assert fetch(port, "/hello.txt") == b"hello from uscope\n"    # not traced: no event
    bg = trace_bg(HTTP_PROBE, pid=t.pid, extra=["-e", engine], labels=True)
    bg.wait_ready()
    assert fetch(port, "/hello.txt") == b"hello from uscope\n"
    assert len(fetch(port, "/sub%20dir/data.bin")) == 10240
    listing = fetch(port, "/sub%20dir/")
    bg.signal(signal.SIGINT)
    r = bg.result().check(ready=1)
    http_checks(r, www)
    assert r.events[2].args["size"] == len(listing)
    t.kill(signal.SIGTERM)


def test_http_server_command(www):
    """-- COMMAND, the default engine: uscope starts the server, waits for
    its provider, traces it; SIGTERM to uscope ends the run at once (128+15),
    and is passed on to the server, which exits on its own."""
    with tempfile.TemporaryDirectory(prefix="uscope-e2e-") as d:
        out = Path(d) / "events.out"
        bg = Background(trace_argv([HTTP_PROBE], cmd=[PYTHON, HTTP, "0", "--directory", www],
                                   out=out), labels=True)
        bg.wait_ready()
        deadline = time.monotonic() + 20
        while not (m := SERVING_RE.match(bg.stdout_path.read_text().split("\n")[0])):
            assert time.monotonic() < deadline, "the server never said where it serves"
            time.sleep(0.05)
        port = int(m.group(2))
        fetch(port, "/hello.txt")
        fetch(port, "/sub%20dir/data.bin")
        listing = fetch(port, "/sub%20dir/")
        bg.signal(signal.SIGTERM)
        r = bg.result(output_file=out).check(rc=128 + signal.SIGTERM, ready=1)
        http_checks(r, www)
        assert r.events[2].args["size"] == len(listing)
        while server_runs(m.group(3)):
            assert time.monotonic() < deadline + 20, "the server did not end on SIGTERM"
            time.sleep(0.05)


def server_runs(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


# --------------------------------------------------------------------------
# make install (DESTDIR, PREFIX): the library, its header, pkg-config file
# and the Python module, which knows where the library went

def test_make_install():
    with tempfile.TemporaryDirectory(prefix="uscope-e2e-install-") as d:
        prefix = "/opt/uscope-e2e"
        r = subprocess.run(["make", "-C", str(u.REPO), "install", f"DESTDIR={d}",
                            f"PREFIX={prefix}"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        root = Path(d) / prefix.lstrip("/")
        lib = root / "lib"
        site = [p for p in root.glob("lib/python3*/site-packages/uscope_sdt.py")]
        assert (root / "bin" / "uscope").is_file()
        assert (root / "include" / "uscope" / "sdt.h").is_file()
        assert (lib / "libuscope-sdt.a").is_file()
        assert os.readlink(lib / "libuscope-sdt.so") == "libuscope-sdt.so.0"
        assert "libuscope-sdt.so.0" in u._run(["readelf", "-dW", str(lib / "libuscope-sdt.so.0")])
        # only the public API is exported
        exported = {l.split()[-1] for l in
                    u._run(["nm", "-D", "--defined-only", str(lib / "libuscope-sdt.so.0")]).splitlines()}
        assert exported == {"usc_sdt_error", "usc_provider_new", "usc_provider_add_probe",
                            "usc_provider_add_probev", "usc_provider_load", "usc_provider_unload",
                            "usc_provider_free", "usc_provider_fd"}, exported
        pc = (lib / "pkgconfig" / "uscope-sdt.pc").read_text()
        assert f"libdir={prefix}/lib" in pc and "-luscope-sdt" in pc
        assert len(site) == 1
        text = site[0].read_text()
        assert f'_INSTALLED_LIB = "{prefix}/lib/libuscope-sdt.so.0"' in text
        # the installed pieces work: a program built against them, and the
        # module loading the installed library (named by the environment,
        # since DESTDIR is not where PREFIX points)
        prog = Path(d) / "prog"
        src = Path(d) / "prog.c"
        src.write_text('#include <uscope/sdt.h>\n#include <stdio.h>\n'
                       'int main(void) { struct usc_provider *p; struct usc_probe *q;\n'
                       '  if (usc_provider_new("inst", &p) || usc_provider_add_probe(p, &q, "x",'
                       ' USC_ARG_INT32, USC_ARG_END) || usc_provider_load(p)) return 1;\n'
                       '  usc_probe_fire(q, -1); printf("%d\\n", usc_probe_enabled(q));\n'
                       '  usc_provider_free(p); return 0; }\n')
        r = subprocess.run(["cc", "-O2", f"-I{root}/include", "-o", str(prog), str(src),
                            str(lib / "libuscope-sdt.a"), "-lelf"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert subprocess.run([str(prog)], capture_output=True, text=True).stdout == "0\n"
        env = dict(os.environ, PYTHONPATH=str(site[0].parent),
                   USCOPE_SDT_LIB=str(lib / "libuscope-sdt.so.0"))
        r = subprocess.run([PYTHON, "-c", "import uscope_sdt as u; p = u.Provider('inst');"
                            "q = p.add_probe('x', u.INT32); p.load(); q.fire(-1);"
                            "print(u.__file__, u._lib._name, q.enabled)"],
                           capture_output=True, text=True, env=env, cwd=d)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [str(site[0]), str(lib / "libuscope-sdt.so.0"), "False"]
