"""-p PID traces PID, its descendants running at attach, and the processes
any of them forks after attach (issue 27).

tests/targets/prefork is a forking server: uscope attaches to it with -p,
then the test has it fork children (and grandchildren) that each call
handle() a known number of times, on every engine and with every command:
count, latency, trace and record count them exactly, each process named by
its own pid; children held since before attach are traced too.
--no-children traces the parent alone; a child that execs
another program leaves the trace. A kill -9 of uscope while children are
patched (inject) leaves every child with the file's code, and running.
Then Debian's PostgreSQL, when installed: pgbench's backends are forked by
the postmaster after attach, psql's backends before."""

import collections
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import run_uscope, target

PREFORK = target("prefork")
PREFORK2 = target("prefork2")      # the same program, another file
ENGINES = ["inject", "bpf", "tracefs"]
# self calls, children, calls a child; tracefs traps on every hit: fewer
SIZES = {"inject": (7, 4, 60), "bpf": (7, 4, 60), "tracefs": (3, 2, 5)}


class Server(u.Target):
    def __init__(self):
        super().__init__([PREFORK])
        self.expect("ready")

    def say(self, line):
        """A command; returns once what it started has ended (its line)."""
        self.write(line + "\n")
        got = self.readline()
        want = {"hold": "held", "release": "released", "serve": "served"}.get(line.split()[0], line.split()[0])
        assert got.split()[0] == want, (line, got)
        return got

    def end(self):
        self.close_stdin()
        assert self.wait() == 0


def attach(cmd, engine, pid, *argv, extra=()):
    js = cmd in ("trace", "count", "latency")
    bg = u.Background([cmd, "-e", engine, "-p", pid] + (["--json"] if js else []) +
                      list(extra) + list(argv), json=cmd == "trace")	# (events: trace's)
    bg.wait_ready()
    return bg


def json_rows(stdout):
    return [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]


def work(srv, engine):
    """The parent's own calls, children's, grandchildren's. -> (calls of
    the parent, {number of processes: calls each} of the others)."""
    s, n, k = SIZES[engine]
    srv.say(f"self {s}")
    srv.say(f"serve {n} {k}")
    srv.say(f"grand {n} {k}")
    srv.end()
    return s, n, k


def calls_by_pid(events):
    """{pid: the v of each of its events, in order}."""
    by_pid = collections.defaultdict(list)
    for e in events:
        by_pid[e.pid].append(e.args["v"])
    return by_pid


def check_events(events, parent, s, n, k):
    by_pid = calls_by_pid(events)
    assert by_pid.pop(parent) == list(range(s))
    # n children of serve, n of grand and their n grandchildren: 3n
    # processes that called handle(0..k-1) in order, each as itself
    assert len(by_pid) == 3 * n, sorted(by_pid)
    assert all(v == list(range(k)) for v in by_pid.values()), by_pid
    assert all(p > 0 for p in by_pid)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cmd", ["count", "latency"])
def test_count_and_latency_of_forked_children(cmd, engine):
    srv = Server()
    bg = attach(cmd, engine, srv.pid, "handle")
    s, n, k = work(srv, engine)
    res = bg.result()
    assert res.rc == 0, res.stderr
    (row,) = [r for r in json_rows(res.stdout) if r.get("final")]
    assert (row["probe"], row["count"]) == ("handle", s + 3 * n * k), row


@pytest.mark.parametrize("engine", ENGINES)
def test_trace_names_each_forked_process(engine):
    srv = Server()
    bg = attach("trace", engine, srv.pid, "handle v=$arg1:s32")
    s, n, k = work(srv, engine)
    res = bg.result().check(rc=0)
    check_events(res.events, srv.pid, s, n, k)
    assert {e.comm for e in res.events} == {"prefork"}


@pytest.mark.parametrize("engine", ENGINES)
def test_record_of_forked_children_reads_back(engine, tmp_path):
    rec = tmp_path / "children.usc"
    srv = Server()
    bg = attach("record", engine, srv.pid, "handle v=$arg1:s32", extra=["-o", rec])
    s, n, k = work(srv, engine)
    assert bg.wait() == 0, bg.stderr
    cp = run_uscope(["trace", "--json", "-r", rec])
    assert cp.returncode == 0, cp.stderr
    events = [u.json_to_event(o) for o in u.parse_json_objects(cp.stdout)]
    check_events([e for e in events if e.event == "handle"], srv.pid, s, n, k)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_children_counts_the_parent_alone(engine):
    srv = Server()
    bg = attach("count", engine, srv.pid, "handle", extra=["--no-children"])
    s, n, k = work(srv, engine)
    res = bg.result()
    assert res.rc == 0, res.stderr
    (row,) = [r for r in json_rows(res.stdout) if r.get("final")]
    assert row["count"] == s, row


def test_no_children_wants_a_pid():
    cp = run_uscope(["count", "--no-children", "handle", "--", PREFORK, "calls", "1"])
    assert cp.returncode == 2
    assert cp.stderr.startswith("uscope: count: --no-children") and cp.stderr.count("\n") == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_a_child_that_execs_leaves(engine):
    """Each child calls handle k times, then execs prefork2, which calls
    its own handle k times: a probe on prefork's does not name it."""
    s, n, k = SIZES[engine]
    srv = Server()
    bg = attach("trace", engine, srv.pid, "handle v=$arg1:s32")
    srv.say(f"exec {n} {k} {PREFORK2}")
    srv.say(f"self {s}")
    srv.end()
    res = bg.result().check(rc=0)
    by_pid = calls_by_pid(res.events)
    assert by_pid.pop(srv.pid) == list(range(s))
    assert len(by_pid) == n and all(v == list(range(k)) for v in by_pid.values()), by_pid


# ---- children running at attach -------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("children", [True, False])
def test_children_running_at_attach(engine, children):
    """Children forked before attach, waiting: -p PARENT traces them too
    (--no-children: not). Each called handle k times before attach (not
    counted), and k times more on release, each as itself; then the parent
    forks children and grandchildren after attach, followed as before."""
    s, n, k = SIZES[engine]
    srv = Server()
    held = [int(p) for p in srv.say(f"hold {n} {k}").split()[1].split(",")]
    bg = attach("trace", engine, srv.pid, "handle v=$arg1:s32",
                extra=[] if children else ["--no-children"])
    assert srv.say("release") == f"released ok={n}"
    srv.say(f"self {s}")
    srv.say(f"serve {n} {k}")
    srv.end()
    res = bg.result().check(rc=0)
    by_pid = calls_by_pid(res.events)
    assert by_pid.pop(srv.pid) == list(range(s))
    if not children:
        assert not by_pid, by_pid
        return
    assert {p: by_pid.pop(p, None) for p in held} == {p: list(range(k)) for p in held}
    # serve's n children, forked after attach
    assert len(by_pid) == n and all(v == list(range(k)) for v in by_pid.values()), by_pid


# ---- uscope killed while children are patched --------------------------------

def code_is_the_files(pid, path=PREFORK):
    return u.code_is_the_file(pid, path)


wait_for = u.wait_true


@pytest.mark.parametrize("cmd", [["count", "handle"], ["trace", "handle v=$arg1:s32"]])
def test_kill_uscope_restores_every_forked_child(cmd):
    srv = Server()
    bg = attach(cmd[0], "inject", srv.pid, *cmd[1:])
    held = [int(p) for p in srv.say("hold 4 30").split()[1].split(",")]
    # the children run patched code of their own (the parent's copy)
    assert all(code_is_the_files(p) is not True for p in held + [srv.pid])
    bg.signal(signal.SIGKILL)
    bg.wait()
    for p in held + [srv.pid]:
        wait_for("a process's code is not the file's", lambda: code_is_the_files(p), 10)
    assert srv.say("release") == "released ok=4"
    srv.say("serve 2 5")     # and forks on, unpatched
    srv.end()


def test_kill_uscope_restores_children_running_at_attach():
    """Children forked before attach are patched each on its own (inject):
    a kill -9 of uscope restores each, and the parent."""
    srv = Server()
    held = [int(p) for p in srv.say("hold 3 2").split()[1].split(",")]
    bg = attach("count", "inject", srv.pid, "handle")
    assert all(code_is_the_files(p) is not True for p in held + [srv.pid])
    bg.signal(signal.SIGKILL)
    bg.wait()
    for p in held + [srv.pid]:
        wait_for("a process's code is not the file's", lambda: code_is_the_files(p), 10)
    assert srv.say("release") == "released ok=3"
    srv.say("serve 2 5")
    srv.end()


# ---- PostgreSQL ---------------------------------------------------------------

def pg_bindir():
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / "postgres").exists() and (d / "initdb").exists() and shutil.which("pgbench"):
            return d
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PSQLS = []     # psql clients the tests leave to the fixture to end


@pytest.fixture(scope="module")
def postgres():
    bindir = pg_bindir()
    if not bindir:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user")
    tmp = tempfile.mkdtemp(prefix="uscope-pg-")
    os.chown(tmp, pw.pw_uid, pw.pw_gid)
    data, port = f"{tmp}/data", free_port()

    def as_pg(*argv, **kw):
        return subprocess.run(["runuser", "-u", "postgres", "--"] + [str(a) for a in argv],
                              capture_output=True, text=True, timeout=120, **kw)

    cp = as_pg(bindir / "initdb", "-D", data, "-A", "trust", "--no-sync")
    assert cp.returncode == 0, cp.stderr
    opts = f"-p {port} -k {tmp} -c listen_addresses='' -c fsync=off"
    cp = as_pg(bindir / "pg_ctl", "-D", data, "-o", opts, "-w", "-l", f"{tmp}/log", "start")
    assert cp.returncode == 0, cp.stderr + Path(f"{tmp}/log").read_text()
    pgb = ["pgbench", "-h", tmp, "-p", port, "postgres"]
    psql = ["runuser", "-u", "postgres", "--", bindir / "psql", "-X", "-q", "-A", "-t",
            "-h", tmp, "-p", str(port), "postgres"]
    cp = as_pg(*pgb[:1], "-i", "-s", "1", *pgb[1:])
    assert cp.returncode == 0, cp.stderr
    pid = int(Path(f"{data}/postmaster.pid").read_text().split()[0])
    # -S's select as a script of our own: a built-in script has pgbench ask
    # the server for the scale and the partitions first (2 queries more)
    script = Path(f"{tmp}/select.sql")
    script.write_text("\\set aid random(1, 100000 * :scale)\n"
                      "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n")
    Psql.argv = psql
    yield pid, bindir, script, lambda *a: as_pg(*(pgb[:1] + list(a) + pgb[1:]))
    for c in PSQLS:
        c.kill()
        c.wait()
    PSQLS.clear()
    as_pg(bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop")
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cmd", ["count", "latency", "trace", "record"])
def test_postgres_backends_forked_after_attach(postgres, cmd, engine, tmp_path):
    """pgbench -S's select: one a transaction, each one PortalRun in a
    backend the postmaster forks for pgbench's connection after attach:
    every command counts exactly pgbench's transactions, each event named by
    the backend that ran it (one of pgbench's connections: as many
    backends as clients)."""
    pid, bindir, script, pgbench = postgres
    clients, tx = 2, 100
    probe = f"{bindir}/postgres:PortalRun"
    rec = tmp_path / "pg.usc"
    bg = attach(cmd, engine, pid, probe, extra=["-o", rec] if cmd == "record" else ())
    cp = pgbench("-f", script, "-n", "-c", clients, "-t", tx)
    assert cp.returncode == 0, cp.stderr
    assert f"number of transactions actually processed: {clients * tx}/" in cp.stdout
    bg.signal(signal.SIGINT)
    if cmd in ("count", "latency"):
        res = bg.result()
        assert res.rc == 0, res.stderr
        (row,) = [r for r in json_rows(res.stdout) if r.get("final")]
        assert row["count"] == clients * tx, row
        return
    if cmd == "trace":
        res = bg.result().check(rc=0)
        events = res.events
    else:
        assert bg.wait() == 0, bg.stderr
        cp = run_uscope(["trace", "--json", "-r", rec])
        assert cp.returncode == 0, cp.stderr
        events = [u.json_to_event(o) for o in u.parse_json_objects(cp.stdout)]
    events = [e for e in events if e.event == "PortalRun"]
    assert len(events) == clients * tx
    by_pid = collections.Counter(e.pid for e in events)
    assert len(by_pid) == clients and pid not in by_pid, by_pid
    assert set(by_pid.values()) == {tx}, by_pid   # -t: each client's transactions


def injected_backends(postmaster):
    """The postmaster's children that map uscope's shared memory (patched)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) != postmaster:
                continue
            if "memfd:uscope" in (d / "maps").read_text():
                found.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_postgres_kill_uscope_under_pgbench(postgres):
    """uscope killed (SIGKILL) while 4 of pgbench's backends, forked after
    attach, run patched: pgbench ends with every transaction done and none
    failed, and each backend's code is its file's again while it runs."""
    pid, bindir, script, pgbench_argv = postgres
    bg = attach("count", "inject", pid, f"{bindir}/postgres:PortalRun")
    # pgbench for a while (-T: its length, not a timed check), 4 clients
    tmp = Path(script).parent
    pgb = subprocess.Popen(["runuser", "-u", "postgres", "--", "pgbench", "-f", str(script),
                            "-n", "-c", "4", "-j", "4", "-T", "8", "-h", str(tmp), "-p",
                            Path(f"{tmp}/data/postmaster.pid").read_text().split()[3],
                            "postgres"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        u.wait_true("4 backends patched",
                    lambda: len(injected_backends(pid)) >= 4 or injected_backends(pid),
                    u.TIMEOUT)
        backends = injected_backends(pid)
        bg.signal(signal.SIGKILL)
        bg.wait()
        for b in backends:
            u.wait_true(f"backend {b}'s code is the file's",
                        lambda: u.code_is_the_file(b, bindir / "postgres"), u.TIMEOUT)
    finally:
        out, err = pgb.communicate(timeout=120)
    assert pgb.returncode == 0, err
    assert re.search(r"^number of failed transactions: 0 ", out, re.M), out
    assert "number of transactions actually processed" in out, out


# ---- a Python prefork server: py: probes through -p of the parent ---------------

PYPREFORK = u.TARGETS / "pyprefork.py"


def python_named(name):
    from test_python_versions import PYTHONS
    p = PYTHONS[name]
    if not p.exists():
        pytest.skip(f"no CPython {name} here")
    return str(p)


def py_workers(t, cmd, n):
    """Have pyprefork.py fork n workers (cmd: fork or mp) -> {pid: the
    calls of handle() the worker counted itself}."""
    t.write(f"{cmd} {n}\n")
    own = {}
    while True:
        line = t.readline()
        if not line.startswith("worker "):
            assert line == f"{'forked' if cmd == 'fork' else 'mp'} {n}", line
            return own
        _, pid, calls = line.split()
        own[int(pid)] = int(calls)


PY_NAMES = ["debian-3.11", "3.12.1", "3.13.0"]


@pytest.mark.parametrize("name", PY_NAMES)
@pytest.mark.parametrize("cmd", ["fork", "mp"])
def test_python_prefork_workers_counted(name, cmd):
    """pyprefork.py's parent attached; it forks 3 workers (os.fork, or
    multiprocessing's fork), each calling handle() as many times as it
    draws and says, then calls handle() itself, then forks 2 more: the
    calls and the returns by pid are the parent's and each worker's own.
    (Returns on 3.12 and later: each process arms handle's code object in
    its own interpreter, whichever called it first.)"""
    py = python_named(name)
    t = u.Target([py, PYPREFORK])
    try:
        t.expect("ready")
        bg = attach("count", "inject", t.pid, "py:__main__:handle pid=$pid",
                    "r:py:__main__:handle pid=$pid")
        own = py_workers(t, cmd, 3)
        t.write("self 4\n")
        t.expect("self 4")
        own.update(py_workers(t, cmd, 2))
        t.close_stdin()
        assert t.wait() == 0
        res = bg.result()
        assert res.rc == 0, res.stderr
        rows = [r for r in json_rows(res.stdout) if r.get("final")]
        assert {r["key"]["function"] for r in rows} == {"__main__:handle"}, rows
        assert len(own) == 5 and t.pid not in own
        for probe in ("py:__main__:handle", "py:__main__:handle__return"):
            got = {r["key"]["pid"]: r["count"] for r in rows if r["probe"] == probe}
            assert got == {t.pid: 4, **own}, (probe, got, own, res.stderr)
    finally:
        if t.alive():
            t.kill()


@pytest.mark.parametrize("name", PY_NAMES)
def test_python_prefork_worker_pystack(name):
    """$pystack of handle() in a forked worker: the frames the worker's own
    traceback.extract_stack() sees, handle() at its def line."""
    py = python_named(name)
    t = u.Target([py, PYPREFORK])
    try:
        t.expect("ready")
        bg = attach("trace", "inject", t.pid, "py:__main__:handle $pystack")
        t.write("stack\n")
        _, pid, frames = t.readline().split(" ", 2)
        t.expect("stacked")
        t.close_stdin()
        assert t.wait() == 0
        res = bg.result()
        assert res.rc == 0, res.stderr
        (ev,) = json_rows(res.stdout)
        assert ev["pid"] == int(pid) != t.pid and ev["event"] == "__main__:handle", (ev, pid)
        assert all(f["python"] for f in ev["args"]["pystack"]), ev
        got = [(f["sym"], f["file"], f["line"]) for f in ev["args"]["pystack"]]
        own = [(q, str(PYPREFORK), line) for q, line in reversed(json.loads(frames))]
        handle_def = 1 + PYPREFORK.read_text().splitlines().index("def handle(i):")
        assert got == [("handle", str(PYPREFORK), handle_def)] + own[1:], (got, own)
    finally:
        if t.alive():
            t.kill()


def py_call(t, k):
    """Each held worker calls handle() k times -> {pid: (its calls, its
    sys.monitoring tool 4)}."""
    t.write(f"call {k}\n")
    out = {}
    while (line := t.readline()) != "called":
        _, pid, calls, tool = line.split()
        out[int(pid)] = (int(calls), tool)
    return out


@pytest.mark.parametrize("name", ["3.12.1", "3.13.0"])
@pytest.mark.parametrize("how", ["detach", "kill"])
def test_python_prefork_workers_left_without_our_tool(name, how):
    """Workers that outlive the trace (sys.monitoring, 3.12 and later): once
    uscope has let go (or was killed), each worker's next probed call takes
    our tool out of its own interpreter, as the parent's does. (The tool's
    state is in the memory the forks share: the first process to let go
    marked it done for all, and the others kept the tool.)"""
    py = python_named(name)
    t = u.Target([py, PYPREFORK])
    try:
        t.expect("ready")
        bg = attach("count", "inject", t.pid, "py:__main__:handle pid=$pid")
        pids = [int(p) for p in t.readline().split()[1].split(",")] \
            if not t.write("hold 2\n") else None
        got = py_call(t, 3)
        assert got == {p: (3, "uscope") for p in pids}, got
        if how == "detach":
            bg.signal(signal.SIGINT)
            res = bg.result()
            assert res.rc == 0, res.stderr
            rows = {r["key"]["pid"]: r["count"] for r in json_rows(res.stdout) if r.get("final")}
            assert rows == {p: 3 for p in pids}, rows
        else:
            bg.signal(signal.SIGKILL)
            bg.wait()
        assert py_call(t, 2) == {p: (5, "none") for p in pids}
        t.write("release\n")
        t.expect("released")
        t.close_stdin()
        assert t.wait() == 0
    finally:
        if t.alive():
            t.kill()


@pytest.mark.parametrize("name", PY_NAMES)
def test_python_prefork_functions_made_in_workers(name):
    """Each worker compiles a function of its own after the fork (late<k>):
    code objects the parent never had, perhaps at one address in two
    workers. Each is counted, by pid, under its own name."""
    py = python_named(name)
    t = u.Target([py, PYPREFORK])
    try:
        t.expect("ready")
        bg = attach("count", "inject", t.pid, "py:__main__:late* pid=$pid",
                    "r:py:__main__:late* pid=$pid")
        t.write("late 3\n")
        own = {}
        while (line := t.readline()) != "lated 3":
            _, pid, k, calls = line.split()
            own[(int(pid), f"__main__:late{k}")] = int(calls)
        t.close_stdin()
        assert t.wait() == 0
        res = bg.result()
        assert res.rc == 0, res.stderr
        rows = [r for r in json_rows(res.stdout) if r.get("final")]
        for probe in ("py:__main__:late*", "py:__main__:late*__return"):
            got = {(r["key"]["pid"], r["key"]["function"]): r["count"]
                   for r in rows if r["probe"] == probe}
            assert got == own, (probe, got, own, res.stderr)
    finally:
        if t.alive():
            t.kill()


class Psql:
    """A psql session of its own, connected: its backend (a child of the
    postmaster) runs each query sent, one PortalRun a simple SELECT."""
    argv = None

    def __init__(self):
        self.p = subprocess.Popen([str(a) for a in self.argv], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        PSQLS.append(self.p)
        self.backend = int(self.ask("SELECT pg_backend_pid();"))

    def ask(self, sql):
        self.p.stdin.write(sql + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, "psql ended"
        return line.strip()

    def end(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=60) == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_postgres_backends_connected_before_attach(postgres, engine):
    """Clients connected before uscope starts: their backends are the
    postmaster's children at attach, and every query they run after is
    counted, by backend."""
    pid, bindir, script, pgbench = postgres
    clients, queries = 2, 25
    ps = [Psql() for _ in range(clients)]
    bg = attach("count", engine, pid, f"{bindir}/postgres:PortalRun pid=$pid")
    for q in range(queries):
        for c in ps:
            assert c.ask(f"SELECT {q} + 1;") == str(q + 1)
    for c in ps:
        c.end()
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.stderr
    rows = {r["key"]["pid"]: r["count"] for r in json_rows(res.stdout) if r.get("final")}
    assert rows == {c.backend: queries for c in ps}, (rows, res.stderr)
