"""Programs in containers (issue 22): a process in its own mount and PID
namespaces traced from the host by its host PID, on every engine.

The test builds its container itself, with no runtime: a root directory
holding test targets (tests/targets), the libraries ldd lists and the
dynamic loader, and their debug info split off into the root's own debug
directories: the build-id tree (server), a .debug directory next to the
binary (ctrthreads) and /usr/lib/debug/DIR (usdt). A process is started in
it with `unshare --pid --mount --uts --fork` and either

  chroot   `chroot ROOT APP`: the kernel shows its files under ROOT's path
  pivot    the root copied into a tmpfs only the container sees, then
           pivot_root: the kernel shows its files by the container's own
           paths, as with a container runtime.

A DIFFERENT program (waiter-nopie, which has an on_line too) sits at the
same path on the host, and runs: it must never be probed, and a probe that
names the path must find the container's function. Every process and the
host files are removed after each test, whatever happens."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import target

ENGINES = ["inject", "bpf", "tracefs"]
MODES = ["pivot", "chroot"]
TAG = f"uscope-ctr-{os.getpid()}"
APP_DIR = f"/opt/{TAG}"          # the same path inside the container and on the host
SERVER = f"{APP_DIR}/server"      # waiter; its debug info in ROOT's build-id tree
THREADS = f"{APP_DIR}/ctrthreads"  # its debug info in APP_DIR/.debug (debuglink)
USDT = f"{APP_DIR}/usdt"          # its debug info in ROOT/usr/lib/debug/APP_DIR
PREFORK = f"{APP_DIR}/prefork"    # a forking server (its debug info inside)
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

PIVOT = r'''set -e
mount --make-rprivate /
mount -t tmpfs uscope-ctr "$1"
cp -a "$2"/. "$1"/
mkdir "$1/.old"
cd "$1"
pivot_root . .old
cd /
shift 2
exec "$@"
'''


def _run(argv):
    subprocess.run(argv, check=True, capture_output=True)


def _build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True,
                         check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def _copy_libs(binary, root):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    for lib in re.findall(r"(/\S+) \(0x", out):
        dst = Path(root + lib)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            shutil.copy2(os.path.realpath(lib), dst)


@pytest.fixture(scope="module")
def root(targets_built):
    """The container's root directory (removed at the end)."""
    base = tempfile.mkdtemp(prefix="uscope-ctr-root-")
    r = base + "/root"
    app = Path(r + APP_DIR)
    try:
        (app / ".debug").mkdir(parents=True)
        # server: the debug info by build-id only, under the root
        bid = _build_id(target("waiter"))
        dbg = Path(f"{r}/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug")
        dbg.parent.mkdir(parents=True)
        _run(["objcopy", "--only-keep-debug", target("waiter"), str(dbg)])
        _run(["objcopy", "--strip-debug", target("waiter"), str(app / "server")])
        # ctrthreads: a debuglink to .debug/ctrthreads.debug next to it
        tmp = Path(base) / "ctrthreads.debug"
        _run(["objcopy", "--only-keep-debug", target("ctrthreads"), str(tmp)])
        _run(["objcopy", "--strip-debug", f"--add-gnu-debuglink={tmp}", target("ctrthreads"),
              str(app / "ctrthreads")])
        shutil.move(str(tmp), app / ".debug" / "ctrthreads.debug")
        # usdt: a debuglink to ROOT/usr/lib/debug/APP_DIR/usdt.debug
        tmp = Path(base) / "usdt.debug"
        _run(["objcopy", "--only-keep-debug", target("usdt"), str(tmp)])
        _run(["objcopy", "--strip-debug", f"--add-gnu-debuglink={tmp}", target("usdt"),
              str(app / "usdt")])
        d = Path(f"{r}/usr/lib/debug{APP_DIR}")
        d.mkdir(parents=True)
        shutil.move(str(tmp), d / "usdt.debug")
        shutil.copy2(target("prefork"), app / "prefork")
        for b in ("waiter", "ctrthreads", "usdt", "prefork"):
            _copy_libs(target(b), r)
        yield r
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def decoy(root):
    """A different program at the container's paths on the host, running:
    waiter-nopie (it has an on_line, at other addresses)."""
    Path(APP_DIR).mkdir(parents=True, exist_ok=True)
    for name in ("server", "missing"):
        shutil.copy2(target("waiter-nopie"), f"{APP_DIR}/{name}")
    t = None
    try:
        t = u.Target([SERVER])
        t.expect("ready")
        t.k = 0
        yield t
    finally:
        if t and t.alive():
            t.kill()
        shutil.rmtree(APP_DIR, ignore_errors=True)


class Container:
    """APP [ARGS] running in its own PID, mount and UTS namespaces."""

    def __init__(self, root, argv, mode):
        self.newroot = None
        if mode == "chroot":
            cmd = ["unshare", "--pid", "--mount", "--uts", "--fork", "chroot", root] + argv
        else:
            self.newroot = tempfile.mkdtemp(prefix="uscope-ctr-new-")
            cmd = ["unshare", "--pid", "--mount", "--uts", "--fork", "/bin/sh", "-c", PIVOT,
                   "sh", self.newroot, root] + argv
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True)
        self.t = u.Target.__new__(u.Target)   # its line reader, on this process
        self.t.p, self.t._buf, self.t.pid = self.p, b"", self.p.pid
        self.pid = None
        self.k = 0
        try:
            self.t.expect("ready")
            kids = Path(f"/proc/{self.p.pid}/task/{self.p.pid}/children").read_text().split()
            assert len(kids) == 1, kids
            self.pid = int(kids[0])     # the container's init: APP, PID 1 inside
            assert self.nspid(self.pid) == (self.pid, 1)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def nspid(tid):
        line = [l for l in Path(f"/proc/{tid}/status").read_text().splitlines()
                if l.startswith("NSpid:")][0]
        ids = [int(x) for x in line.split()[1:]]
        return ids[0], ids[-1]

    def inner_tids(self):
        """host tid -> its tid inside, for every thread of the app."""
        return {int(t): self.nspid(int(t))[1] for t in os.listdir(f"/proc/{self.pid}/task")}

    def send(self, line, expect):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()
        self.k += 1
        self.t.expect(expect.format(k=self.k))

    def close(self):
        # the namespace ends with its init: its mounts go with it
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait(u.TIMEOUT)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            f.close()
        if self.newroot:
            os.rmdir(self.newroot)  # never mounted on the host: empty


@pytest.fixture
def containers(root):
    started = []

    def start(argv, mode="pivot"):
        c = Container(root, argv, mode)
        started.append(c)
        return c
    yield start
    for c in started:
        c.close()


def send_decoy(decoy, line):
    decoy.write(line + "\n")
    decoy.k += 1
    decoy.expect(f"got {decoy.k}")


def error_line(cp):
    lines = cp.stderr.strip().splitlines()
    assert cp.returncode != 0 and len(lines) == 1 and lines[0].startswith("uscope: "), \
        f"rc={cp.returncode}\n{cp.stderr}"
    return lines[0]


# --------------------------------------------------------------------------
# By host PID, on every engine

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("engine", ENGINES)
def test_trace_by_host_pid(containers, decoy, engine, mode):
    """The container's server by its host PID: a DWARF name (the debug info
    found by build-id inside the root) and a MODULE path (the container's
    file, not the host's program at that path), exact events with both
    PIDs; the host's program at the same path, running, is not probed."""
    c = containers([SERVER], mode)
    bg = u.trace_bg("on_line line len", f"{SERVER}:on_line n=$arg2:s32", pid=c.pid,
                    json=True, extra=["-e", engine])
    assert bg.wait_ready() == 2
    for line in ("alpha", "be ta"):
        c.send(line, "got {k}")
        send_decoy(decoy, line + "!")
    bg.signal(signal.SIGINT)
    res = bg.result().check(ready=2)
    # the entry first, then after the prologue (where DWARF has line, len)
    got = [(e.event, e.args) for e in res.events]
    assert got == [("on_line_2", {"n": 5}), ("on_line", {"line": "alpha", "len": 5}),
                   ("on_line_2", {"n": 5}), ("on_line", {"line": "be ta", "len": 5})], got
    for o in res.objects:
        assert (o["pid"], o["tid"], o["ns_pid"], o["ns_tid"], o["comm"]) == \
            (c.pid, c.pid, 1, 1, "server"), o
    # the container's PIE, not the host's waiter-nopie (at 0x401000...)
    assert all(e.ip > 0x400000000 for e in res.events), [hex(e.ip) for e in res.events]
    maps = Path(f"/proc/{c.pid}/maps").read_text()
    if mode == "pivot":     # the kernel names the file by the host decoy's path
        assert f" {SERVER}\n" in maps, maps


def test_text_and_json_pid_columns(containers):
    """Threads inside: each event carries its thread's host TID and, after
    it, its TID inside (text COMM-TID/NSTID, JSON ns_pid and ns_tid); the
    debug info found by the debuglink in .debug next to the binary."""
    c = containers([THREADS, "3"])
    inner = c.inner_tids()
    assert len(set(inner.values())) == 4 and inner[c.pid] == 1, inner
    for engine in ENGINES:
        for js in (False, True):
            bg = u.trace_bg("work t k", pid=c.pid, json=js, extra=["-e", engine])
            bg.wait_ready()
            c.send("go", "round {k}")
            k = c.k
            bg.signal(signal.SIGINT)
            res = bg.result().check(ready=1)
            # three threads: a live trace shows each thread's events in
            # order, not the threads' in time order
            assert sorted((e.args["t"], e.args["k"]) for e in res.events) == \
                [(t, k) for t in range(3)], res.describe()
            tids = {e.args["t"]: e.tid for e in res.events}
            assert len(set(tids.values())) == 3 and all(tid in inner for tid in tids.values())
            if js:
                for o in res.objects:
                    assert (o["pid"], o["ns_pid"], o["ns_tid"]) == \
                        (c.pid, 1, inner[o["tid"]]), (engine, o)
            else:
                for e in res.events:
                    assert e.line.startswith(f"ctrthreads-{e.tid}/{inner[e.tid]} ["), \
                        (engine, e.line)


@pytest.mark.parametrize("engine", ENGINES)
def test_forked_children_by_host_pid(containers, engine):
    """-p of a server in a container follows the children it forks after
    attach: each event names its process by the host's pid, with its pid
    inside beside it, on every engine alike."""
    c = containers([PREFORK])
    bg = u.trace_bg("handle v=$arg1:s32", pid=c.pid, json=True, extra=["-e", engine])
    bg.wait_ready()
    c.p.stdin.write(b"hold 2 3\n")
    c.p.stdin.flush()
    line = c.t.readline()
    kids = [int(p) for p in line.split()[1].split(",")]    # their pids inside
    hosts = {Container.nspid(h)[1]: h for h in
             Path(f"/proc/{c.pid}/task/{c.pid}/children").read_text().split() for h in [int(h)]}
    assert sorted(hosts) == sorted(kids), (hosts, kids)
    bg.signal(signal.SIGINT)     # while they live: their ids are there to read
    res = bg.result().check(ready=1)
    c.p.stdin.write(b"release\n")
    c.p.stdin.flush()
    assert c.t.readline() == "released ok=2"
    got = sorted((o["pid"], o["tid"], o.get("ns_pid"), o.get("ns_tid"), o["args"]["v"])
                 for o in res.objects)
    assert got == sorted((hosts[k], hosts[k], k, k, v) for k in kids for v in range(3)), got


def test_host_process_output_unchanged():
    """A process in our namespaces: no inner ids, text and JSON as before."""
    res = u.trace("area", cmd=[target("args"), "1"], json=True, extra=["-e", "bpf"])
    res.check()
    assert [list(o)[:5] for o in res.objects] == [["time_ns", "comm", "pid", "tid", "cpu"]]
    res = u.trace("area", cmd=[target("args"), "1"], extra=["-e", "bpf"])
    res.check()
    assert re.match(r"^args-\d+ \[", res.events[0].line), res.events[0].line


# --------------------------------------------------------------------------
# Names: list -p, USDT, completion's source

def test_list_by_host_pid(containers, decoy):
    c = containers([SERVER])
    cp = u.run_uscope(["list", "-p", c.pid, "on_l*"])
    assert cp.returncode == 0 and cp.stdout.splitlines() == ["server:on_line"], cp
    cp = u.run_uscope(["list", "-v", "-p", c.pid, "on_line"])
    addr = int(cp.stdout.split()[0], 16)
    assert addr == u.nm_addr(target("waiter"), "on_line"), cp.stdout      # the PIE's
    assert addr != u.nm_addr(target("waiter-nopie"), "on_line")
    # libraries are the container's too: libc by its short name
    cp = u.run_uscope(["list", "-p", c.pid, "malloc"])
    assert cp.stdout.splitlines() == ["libc.so.6:malloc"], cp
    # a path lists the host's file without --root, the container's with it
    cp = u.run_uscope(["list", "-v", SERVER, "on_line"])
    assert int(cp.stdout.split()[0], 16) == u.nm_addr(target("waiter-nopie"), "on_line")
    cp = u.run_uscope(["list", "-v", "--root", f"/proc/{c.pid}/root", SERVER, "on_line"])
    assert int(cp.stdout.split()[0], 16) == addr, cp
    cp = u.run_uscope(["list", "--vars", "on_line", "-p", c.pid])
    assert cp.returncode == 0, cp.stderr
    assert re.fullmatch(rf"on_line at 0x[0-9a-f]+ \({SERVER}\):\n"
                        r" +const char \* +line  \(parameter\)\n +int +len  \(parameter\)\n",
                        cp.stdout), cp.stdout


@pytest.mark.parametrize("engine", ENGINES)
def test_usdt_in_container(containers, engine):
    """USDT notes of the container's binary: listed under its own path, and
    traced, the semaphore raised in the container's process; its debug info
    found under ROOT/usr/lib/debug/DIR."""
    c = containers([USDT, "3", "wait"])
    cp = u.run_uscope(["list", "--usdt", "-p", c.pid, "app:t*"])
    assert cp.stdout.splitlines() == [f"{USDT} %app:tick"], cp
    bg = u.trace_bg("%app:tick", "%prov:sema_event", pid=c.pid, labels=True,
                    extra=["-e", engine])
    assert bg.wait_ready() == 2
    c.send("go", "round {k} enabled=3")
    bg.signal(signal.SIGINT)
    res = bg.result().check(ready=2)
    got = [(e.event, tuple(e.args.values())) for e in res.events]
    assert got == [("app:tick", (0, 0)), ("prov:sema_event", (0,)), ("app:tick", (1, 10)),
                   ("prov:sema_event", (1,)), ("app:tick", (2, 20)),
                   ("prov:sema_event", (2,))], got
    assert all(e.line.startswith(f"usdt-{c.pid}/1 [") for e in res.events)
    c.send("again", "round {k} enabled=3")     # lowered again
    cp = u.run_uscope(["list", "--vars", "sizes_probe", "-p", c.pid])
    assert cp.returncode == 0 and re.search(r"^ +int +i  \(parameter\)$", cp.stdout, re.M), cp


# --------------------------------------------------------------------------
# System-wide on the container's file: --root

def _our_uprobes(bg):
    return [l for l in u.UPROBE_EVENTS.read_text().splitlines()
            if l.startswith(f"p:uscope_{bg.pid}/") or l.startswith(f"r:uscope_{bg.pid}/")]


@pytest.mark.parametrize("engine", ["bpf", "tracefs"])
def test_root_system_wide(containers, decoy, engine):
    """--root /proc/PID/root: the probe goes on the container's file, one
    probe on its inode, and fires in the processes that map it; the host's
    program at the same path does not."""
    c = containers([SERVER])
    bg = u.trace_bg(f"{SERVER}:on_line line len", json=True,
                    extra=["-e", engine, "--root", f"/proc/{c.pid}/root"])
    assert bg.wait_ready() == 1
    if engine == "tracefs":
        probes = _our_uprobes(bg)
        assert len(probes) == 1 and f"/proc/{c.pid}/root{SERVER}:" in probes[0], probes
    c.send("sys", "got {k}")
    send_decoy(decoy, "host")
    bg.signal(signal.SIGINT)
    res = bg.result().check(ready=1)
    assert [(e.pid, e.args) for e in res.events] == [(c.pid, {"line": "sys", "len": 3})], \
        res.describe()
    assert res.objects[0]["ns_pid"] == 1


def test_root_directory(containers, root, decoy):
    """--root DIR: the files under DIR, here the chroot's own; the library
    by its short name from DIR's directories."""
    c = containers([SERVER], "chroot")
    bg = u.trace_bg(f"{SERVER}:on_line line", "libc:fflush", extra=["-e", "tracefs", "--root", root])
    assert bg.wait_ready() == 2
    probes = _our_uprobes(bg)
    assert len(probes) == 2 and all(f"{root}/" in p for p in probes), probes
    c.send("dir", "got {k}")
    send_decoy(decoy, "host")
    bg.signal(signal.SIGINT)
    res = bg.result().check(ready=2)
    assert [(e.event, e.tid) for e in res.events if e.event == "on_line"] == \
        [("on_line", c.pid)], res.describe()
    assert res.named("on_line")[0].args == {"line": "dir"}
    assert res.events[0].line.startswith(f"server-{c.pid}/1 [")
    # fflush: its calls in the chroot's libc only (the container's printf of
    # "got 1", ...); the decoy's libc is the host's
    assert {e.tid for e in res.named("fflush")} == {c.pid}, res.describe()


# --------------------------------------------------------------------------
# Refusals: one line each

def test_refusals(containers, decoy):
    c = containers([SERVER])
    # a file missing inside the root, though the host has one at that path
    cp = u.run_uscope(["trace", "-p", c.pid, f"{APP_DIR}/missing:on_line", "-d", "1"])
    line = error_line(cp)
    assert f"no file {APP_DIR}/missing in the root of process {c.pid}" in line, line
    cp = u.run_uscope(["trace", "--root", f"/proc/{c.pid}/root", f"{APP_DIR}/missing:on_line",
                       "-d", "1"])
    assert f"no file {APP_DIR}/missing under --root /proc/{c.pid}/root" in error_line(cp)
    # a namespace gone: --root of a process that has ended
    gone = u.unused_pid()
    cp = u.run_uscope(["trace", "--root", f"/proc/{gone}/root", f"{SERVER}:on_line", "-d", "1"])
    assert f"process {gone} has gone" in error_line(cp)
    # no permission: another user's container
    if subprocess.run(AS_NOBODY + [str(u.uscope_path()), "--version"],
                      capture_output=True).returncode == 0:
        cp = u.run_uscope(["trace", "-p", c.pid, "on_line"], prefix=AS_NOBODY)
        line = error_line(cp)
        assert str(c.pid) in line and "Permission denied" in line, line
        cp = u.run_uscope(["trace", "--root", f"/proc/{c.pid}/root", f"{SERVER}:on_line"],
                          prefix=AS_NOBODY)
        assert "permission denied" in error_line(cp).lower()
    # --root is for system-wide tracing
    cp = u.run_uscope(["trace", "-p", c.pid, "--root", "/", "on_line"])
    assert "--root is for system-wide tracing" in error_line(cp)
    cp = u.run_uscope(["trace", "--root", "/etc/hostname", "x:on_line"])
    assert "not a directory" in error_line(cp)
    c.send("still fine", "got {k}")


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_stack_in_container(containers, decoy, engine):
    """$ustack unwound and named with the container's files (its CFI, its
    symbols), not the host program at the same path."""
    c = containers([SERVER])
    bg = u.trace_bg("on_line $ustack:3", pid=c.pid, extra=["-e", engine])
    bg.wait_ready()
    c.send("stack", "got {k}")
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.describe()
    lines = res.output.splitlines()
    assert lines[0].startswith(f"server-{c.pid}/1 [") and ": on_line: " in lines[0], lines
    # its debug info (the root's build-id tree) names the lines
    assert re.fullmatch(r"on_line\+0x0 \(server\) waiter\.c:\d+", lines[1].strip()), lines
    assert re.fullmatch(r"main\+0x[0-9a-f]+ \(server\) waiter\.c:\d+", lines[2].strip()), lines
    assert "(libc.so.6+0x" in lines[3], lines
    # walked where the probe runs, as on the host: the agent knows the
    # process by the pid it has inside (PID 1), the mappings are the host's
    assert "fell back" not in res.stderr, res.stderr


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_counted_stack_in_container(containers, decoy, engine):
    """count by $ustack in a container: each stack counted where the probe
    runs (no copy), named after the container's process by its host PID."""
    c = containers([SERVER])
    bg = u.Background(["count", "--json", "-e", engine, "-p", c.pid, "on_line $ustack:3"])
    bg.wait_ready()
    for _ in range(3):
        c.send("stack", "got {k}")
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.describe()
    assert "fell back" not in res.stderr, res.stderr
    rows = [o for o in u.json_lines(res.output) if o.get("final")]
    assert len(rows) == 1 and rows[0]["count"] == 3, rows
    st = rows[0]["key"]["ustack"]
    assert [f.get("sym") for f in st[:2]] == ["on_line", "main"], st
    assert st[2].get("module", "").endswith("libc.so.6"), st


def test_completion_sees_the_container(containers, decoy):
    """Bash completion: with -p PID (or --root), paths and their functions
    are the container's: usdt exists only inside, 'missing' only on the
    host."""
    from test_completion import complete, uscope_bin
    c = containers([USDT, "3", "wait"])
    got, _ = complete(f"{uscope_bin()} trace -p {c.pid} {APP_DIR}/u")
    assert got == [USDT], got
    got, _ = complete(f"{uscope_bin()} trace -p {c.pid} {APP_DIR}/mi")
    assert got == [], got
    got, _ = complete(f"{uscope_bin()} trace -p {c.pid} {USDT}:site_")
    assert got == ["site_a", "site_b", "site_c"], got
    got, _ = complete(f"{uscope_bin()} trace --root /proc/{c.pid}/root {USDT}:sizes_")
    assert got == ["sizes_probe"], got
    got, _ = complete(f"{uscope_bin()} trace -p {c.pid} {USDT}:%app:ti")
    assert got == ["tick"], got      # bash replaces what follows the last ':'
    got, _ = complete(f"{uscope_bin()} trace -p {c.pid} %app:ti")
    assert got == ["tick"], got
    got, _ = complete(f"{uscope_bin()} list --root /proc/{c.pid}/root {APP_DIR}/u")
    assert got == [USDT], got
