"""Real programs for the uscope end-to-end tests (tests/e2e/test_real_*.py):
Debian's redis-server, nginx and sqlite3, python3.11, and a Go net/http
server built by the tests, each compared with its own counters.

Every server listens on 127.0.0.1 only, on a port free when it starts (a
server that finds it taken meanwhile is started again on another), runs in
its own temporary directory, and is killed by its fixture's teardown (it is
also registered with uscope_e2e.REGISTRY, which ends whatever a test left).
Nothing here sleeps for a fixed time: it waits for a condition (a port that
answers, a line in a file, a process gone), with TIMEOUT as the bound of a
wait that never comes true.

Not a test module: the test modules import it (tests/e2e is on sys.path)."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import uscope_e2e as u

TIMEOUT = u.TIMEOUT
ENGINES = ["inject", "bpf", "tracefs"]
GO_SERVER_SRC = Path(__file__).resolve().parent / "real_goserver.go"


def need(*paths):
    """Skip the module when a program it drives is not installed
    (scripts/deps.sh installs them all)."""
    missing = [p for p in paths if not (shutil.which(p) or os.path.exists(p))]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (run scripts/deps.sh)",
                    allow_module_level=True)


# --------------------------------------------------------------------------
# Waiting on conditions

def wait_until(cond, what, timeout=TIMEOUT, proc=None):
    """Poll cond() until it is true (its value is returned). The timeout is
    the bound of a condition that never comes true, not a delay: a slow
    machine only polls longer. proc: a process whose death ends the wait
    (AssertionError naming what was awaited)."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited ({proc.returncode}) first")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not true within {timeout}s")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_answers(port) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def lines_of(path) -> list:
    try:
        return Path(path).read_text(errors="surrogateescape").splitlines()
    except FileNotFoundError:
        return []


def stop(p: subprocess.Popen, sig=signal.SIGTERM):
    """End a process we started: sig, then SIGKILL if it lingers."""
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def start_server(argv, port_of, what, tmp: Path, env=None, stdout=None, attempts=5):
    """Start a server on a free port, in tmp: argv(port) is its command
    line; port_of(p, port) says whether p listens (None: not yet; False:
    the port was taken meanwhile, another is tried). Its stderr goes to
    tmp/stderr. -> (Popen, port)."""
    last = ""
    for _ in range(attempts):
        port = free_port()
        with open(tmp / "stderr", "w") as err:
            p = subprocess.Popen([str(a) for a in argv(port)], stdin=subprocess.DEVNULL,
                                 stdout=stdout or subprocess.DEVNULL, stderr=err, env=env,
                                 cwd=tmp)
        u.REGISTRY.targets.append(p)

        def up():
            if p.poll() is not None:
                return "exited"
            ok = port_of(p, port)
            return "up" if ok else "taken" if ok is False else None
        state = wait_until(up, f"{what} listening on 127.0.0.1:{port}")
        if state == "up":
            return p, port
        stop(p)
        last = "\n".join(lines_of(tmp / "stderr"))
    raise AssertionError(f"{what} did not start on a free port: {last}")


# --------------------------------------------------------------------------
# uscope in the background, as a user runs it with -p

class Session:
    """uscope running in the background (uscope_e2e.Background), stopped
    with SIGINT as Ctrl-C does: its stdout, stderr and exit status."""

    def __init__(self, args):
        self.bg = u.Background(args)
        self.bg.wait_ready()
        self.rc = None

    def stdout_lines(self):
        return lines_of(self.bg.stdout_path)

    def stop(self, sig=signal.SIGINT):
        if self.bg.p.poll() is None:
            self.bg.signal(sig)
        self.rc = self.bg.wait()
        self.bg._stdout.close()
        self.stdout = self.bg.stdout_path.read_text(errors="surrogateescape")
        self.stderr = self.bg.stderr
        self.bg.dir.cleanup()
        return self

    def describe(self):
        return (f"argv: {self.bg.argv}\nrc: {self.rc}\nstderr:\n{self.stderr[-3000:]}\n"
                f"stdout (first lines):\n" + "\n".join(self.stdout.splitlines()[:30]))

    def ok(self):
        assert self.rc == 0, self.describe()
        return self


def attach(command, pid, *args, engine=None):
    """uscope COMMAND -p PID [-e ENGINE] ARGS..., ready (its probes live)."""
    argv = [command, "-p", str(pid)] + (["-e", engine] if engine else []) + list(args)
    return Session(argv)


def agg_rows(stdout, final=True):
    """--json rows of count/hist/latency's final report."""
    rows = u.json_lines(stdout)
    return [r for r in rows if r.get("final") == final and not r.get("call")]


def count_table(stdout) -> dict:
    """count's PROBE/COUNT table (no keys) -> {probe: count}."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("PROBE"):
            rows = {}
        elif re.match(r"^\S+\s+\d+$", line):
            name, n = line.split()
            rows[name] = int(n)
    return rows


def events_of(session, json_out=False, labels=False):
    """The session's stdout as events (a TraceResult, checked)."""
    r = u.TraceResult(session.bg.argv, session.rc, session.stdout, session.stderr,
                      session.stdout, json=json_out, labels=labels)
    return r.check(rc=0)


def flow_of(session):
    return u.FlowResult(session.bg.argv, session.rc, session.stdout, session.stderr,
                        session.stdout, json=True).check()


def agg_consistent(r):
    """An aggregation row's own numbers agree: the buckets add up to the
    count, min <= avg <= max, min <= p50 <= p99 <= max (latency)."""
    assert sum(b["count"] for b in r["buckets"]) == r["count"], r
    if r["count"]:
        assert r["min"] <= r["avg"] <= r["max"], r
        if "p50" in r:
            assert r["min"] <= r["p50"] <= r["p99"] <= r["max"], r


# --------------------------------------------------------------------------
# gdb's backtrace of a running process (the reference for $ustack)

GDB_SCRIPT = Path(__file__).resolve().parent / "gdb_frames.py"
GDB_CALLER = Path(__file__).resolve().parent / "gdb_caller.py"


def gdb_frames_attached(pid, func, trigger, caller=None):
    """Attach gdb to pid, stop at func's first instruction, hit by
    trigger() (run once gdb waits), print its backtrace through
    gdb_frames.py and detach. -> [dict] (gdb_frames.py's frames).
    caller: stop only where a frame above is that function
    (gdb_caller.py's $_called_from), so that a hit of func from elsewhere (redis's
    serverCron allocates too) is not the one gdb shows."""
    brk = f"break *{func}"
    if caller:
        brk += f' if $_called_from("{caller}")'
    cmd = ["gdb", "-batch", "-nx", "-q", "-p", str(pid),
           "-iex", "set debuginfod enabled off",
           "-iex", "set auto-load python-scripts off",
           "-iex", f"source {GDB_CALLER}",
           "-ex", "set pagination off",
           "-ex", "set backtrace past-main on",
           "-ex", brk,
           "-ex", "echo GDB-WAITS\\n",
           "-ex", "continue",
           "-x", str(GDB_SCRIPT),
           "-ex", "delete",
           "-ex", "detach"]
    g = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    u.REGISTRY.targets.append(g)
    out = []
    # gdb prints GDB-WAITS just before it lets the process go
    for line in g.stdout:
        out.append(line)
        if line.startswith("GDB-WAITS"):
            break
    trigger()
    rest, err = g.communicate(timeout=TIMEOUT)
    out = "".join(out) + rest
    frames = [json.loads(l[len("FRAME "):]) for l in out.splitlines() if l.startswith("FRAME ")]
    assert "FRAMES END" in out.splitlines() and frames, f"no backtrace from gdb:\n{out}\n{err}"
    return frames


# --------------------------------------------------------------------------
# redis

REDIS = "/usr/bin/redis-server"


def resp(*args) -> bytes:
    """One command in RESP (the protocol redis-cli speaks)."""
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Redis:
    def __init__(self, tmp: Path, command_prefix=(), stdout=None):
        self.dir = tmp
        self.log = tmp / "redis.log"

        def argv(port):
            return list(command_prefix) + [
                REDIS, "--port", port, "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", tmp, "--logfile", self.log,
                "--daemonize", "no", "--protected-mode", "yes"]

        def listening(p, port):
            if "Address already in use" in "".join(lines_of(self.log)):
                return False
            return self.cli_ok(port) or None

        self.p, self.port = start_server(argv, listening, "redis-server", tmp, stdout=stdout)
        self.pid = self.p.pid

    @staticmethod
    def cli_ok(port):
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "ping"],
                           capture_output=True, text=True)
        return r.stdout.strip() == "PONG"

    def cli(self, *args, input=None) -> str:
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port)] +
                           [str(a) for a in args], capture_output=True, text=True,
                           input=input, timeout=TIMEOUT)
        assert r.returncode == 0, f"redis-cli {args}: {r.stderr}"
        return r.stdout

    def benchmark(self, *args):
        r = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(self.port), "-q"] +
                           [str(a) for a in args], capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert r.returncode == 0, f"redis-benchmark {args}: {r.stderr}"
        return r.stdout

    def send(self, commands):
        """Send commands (lists of arguments) on one connection, pipelined,
        and read their replies (one line each: +OK, $N<data>, :N)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT) as s:
            s.sendall(b"".join(resp(*c) for c in commands))
            f = s.makefile("rb")
            replies = []
            for _ in commands:
                line = f.readline()
                assert line[:1] in (b"+", b":", b"$"), f"redis answered {line!r}"
                if line[:1] == b"$" and int(line[1:]) >= 0:
                    line = f.readline()
                replies.append(line.rstrip(b"\r\n").decode())
            return replies

    def info(self, section) -> dict:
        out = {}
        for line in self.cli("info", section).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def commandstats(self) -> dict:
        """{command: calls} from INFO commandstats."""
        stats = {}
        for k, v in self.info("commandstats").items():
            m = re.match(r"calls=(\d+),", v)
            stats[k[len("cmdstat_"):]] = int(m.group(1))
        return stats

    def total_commands(self) -> int:
        return int(self.info("stats")["total_commands_processed"])

    def reset_stats(self):
        assert self.cli("config", "resetstat").strip() == "OK"

    def stop(self):
        stop(self.p)


# --------------------------------------------------------------------------
# nginx (nginx-light): one process (master_process off), or a master and
# its workers; its access log

NGINX = "/usr/sbin/nginx"
ONE_PROCESS = "master_process off;\nworker_processes 1;\n"
# (the workers as root: the test's directory is root's alone)
MASTER = "master_process on;\nworker_processes {n};\nuser root;\n"
NGINX_CONF = """\
daemon off;
{processes}\
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {d}/html;
    }}
}}
"""


class Nginx:
    """nginx serving pages from tmp/html: one process, or (workers=N) a
    master (self.pid) and N workers it forks."""

    def __init__(self, tmp: Path, pages, workers=0):
        self.dir = tmp
        self.conf = tmp / "nginx.conf"
        processes = MASTER.format(n=workers) if workers else ONE_PROCESS
        (tmp / "html").mkdir()
        for name, text in pages.items():
            (tmp / "html" / name).write_text(text)
        self.access_log = tmp / "access.log"

        def argv(port):
            self.conf.write_text(NGINX_CONF.format(d=tmp, port=port, processes=processes))
            return [NGINX, "-p", tmp, "-c", self.conf, "-e", tmp / "error.log"]

        def listening(p, port):
            if "Address already in use" in "".join(lines_of(tmp / "error.log")):
                return False
            return port_answers(port) or None

        self.p, self.port = start_server(argv, listening, "nginx", tmp)
        self.pid = self.p.pid
        if workers:     # the master listens before it forks them
            wait_until(lambda: len(self.workers()) == workers,
                       f"nginx's {workers} workers forked", proc=self.p)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def closed(self):
        """How many connections nginx has seen closed after their requests
        (error.log at info)."""
        return sum("closed keepalive connection" in l for l in lines_of(self.dir / "error.log"))

    def curl(self, argv):
        """Run curl, then wait (bounded) until nginx has seen its connection
        closed: curl has its answers before nginx has finished their requests
        (the access log, ngx_http_free_request, the frames they run in);
        the close is read on a later turn of nginx's event loop, once every
        frame of them has returned."""
        before = self.closed()
        r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while self.closed() <= before and time.monotonic() < deadline:
            time.sleep(0.02)
        return r

    def get(self, *paths):
        """curl the paths on one connection, in order; -> their bodies."""
        r = self.curl(["curl", "-sS", "--fail"] +
                      [x for p in paths for x in (self.url(p), "-w", "\\n<end>\\n")])
        assert r.returncode == 0, f"curl: {r.stderr}"
        bodies = r.stdout.split("\n<end>\n")
        assert bodies[-1] == "", r.stdout
        return bodies[:-1]

    def logged(self, at_least=0):
        """The access log's lines, waiting (bounded) for at_least of them:
        nginx logs a request when it frees it, after the answer is sent, so
        curl may have its answer before the line is written."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            lines = lines_of(self.access_log)
            if len(lines) >= at_least or time.monotonic() > deadline:
                return lines
            time.sleep(0.02)

    def workers(self):
        """The pids of the master's children (its workers), sorted."""
        try:
            text = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text()
        except FileNotFoundError:
            return []
        return sorted(int(x) for x in text.split())

    def reload(self):
        """nginx -s reload (the master reads its configuration again, forks
        new workers and tells the old ones to finish), then wait (bounded)
        until the master's workers are all new ones, as many as before.
        -> (old workers, new workers)"""
        old = self.workers()
        r = subprocess.run([NGINX, "-p", self.dir, "-c", self.conf, "-e",
                            self.dir / "error.log", "-s", "reload"],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, f"nginx -s reload: {r.stderr}"

        def renewed():
            now = self.workers()
            return now if len(now) == len(old) and not set(now) & set(old) else None
        new = wait_until(renewed, f"nginx's workers {old} replaced", proc=self.p)
        return old, new

    def stop(self):
        stop(self.p, signal.SIGQUIT)


# --------------------------------------------------------------------------
# The Go server (real_goserver.go), built once per test session

GO_ENV_DIR = u.BIN  # the build cache the targets' Go builds use (tests/targets)


def build_go_server(out_dir: Path) -> dict:
    """go build real_goserver.go, unstripped (DWARF) and stripped (-s -w).
    -> {"plain": path, "stripped": path}"""
    env = dict(os.environ, HOME=str(out_dir), GOCACHE=str(GO_ENV_DIR / "gocache"),
               GOPATH=str(out_dir / "gopath"), GOFLAGS="-mod=mod")
    res = {}
    for kind, extra in (("plain", []), ("stripped", ["-ldflags=-s -w"])):
        exe = out_dir / f"goserver-{kind}"
        r = subprocess.run(["go", "build"] + extra + ["-o", str(exe), str(GO_SERVER_SRC)],
                           capture_output=True, text=True, env=env, cwd=out_dir,
                           timeout=300)
        assert r.returncode == 0, f"go build {kind}: {r.stdout}\n{r.stderr}"
        res[kind] = exe
    return res


class GoServer:
    def __init__(self, exe, tmp: Path, command_prefix=()):
        self.out = tmp / "goserver.out"
        self._out = open(self.out, "w")

        def argv(port):
            return list(command_prefix) + [exe, str(port)]

        def listening(p, port):
            text = "".join(lines_of(self.out))
            if "address already in use" in text:
                return False
            return (f"listening {port}" in text and port_answers(port)) or None

        self.p, self.port = start_server(argv, listening, "the Go server", tmp,
                                         stdout=self._out, env=dict(os.environ, GOMAXPROCS="2"))
        self.pid = self.p.pid

    def get(self, path):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        assert r.status == 200, (path, r.status, body)
        return body

    def load(self, ids, clients=4):
        """GET /u/user<id>?id=<id> for each id, from `clients` connections
        at once (ids dealt round-robin). -> {id: the server's answer}"""
        import http.client
        import threading
        answers, errors = {}, []

        def client(k):
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
                for i in ids[k::clients]:
                    c.request("GET", f"/u/user{i}?id={i}")
                    r = c.getresponse()
                    answers[i] = r.read().decode().strip()
                c.close()
            except Exception as e:  # reported below, in the test's thread
                errors.append(e)
        ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(TIMEOUT)
        assert not errors, errors
        return answers

    def stats(self) -> dict:
        """The server's own counters: {"served": N, "max_ns": M, "took": {id: ns}}."""
        return json.loads(self.get("/stats"))

    def stop(self):
        stop(self.p)
        self._out.close()
