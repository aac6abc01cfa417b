"""uscope script on bpftrace's own tools, unchanged (/usr/sbin/*.bt), on
programs that call what they trace a known number of times; a running
process (-p) stopped by SIGINT, system-wide, COMMAND; programs with
mistakes, refused before any process is touched; a hostile program on a
real target; --json."""

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import time

import pytest

import script_util as s
import uscope_e2e as u

APP = s.APP
TOOLS = "/usr/sbin"


def tool(name):
    p = os.path.join(TOOLS, name)
    if not os.path.exists(p):
        pytest.skip(f"{p}: bpftrace's tools are not installed")
    return p


@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_gethostlatency(engine):
    """getaddrinfo on three names, gethostbyname twice: a line each, with the
    name saved at entry (str(@name[tid]) at the return)."""
    r = s.script(tool("gethostlatency.bt"), [APP, "resolve", 4], engine, path=True)
    assert r.returncode == 0, r.stderr
    lines = s.printf_lines(r.stdout)
    assert lines[0] == "Tracing getaddr/gethost calls... Hit Ctrl-C to end."
    assert lines[1].split() == ["TIME", "PID", "COMM", "LATms", "HOST"]
    calls = [l.split() for l in lines[2:]]
    assert [c[-1] for c in calls] == ["localhost", "ip6-localhost", "127.0.0.1", "localhost",
                                      "localhost", "localhost"]
    assert all(c[2] == "scriptapp" and c[1].isdigit() for c in calls)


@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_threadsnoop(engine):
    """uprobe:libpthread:pthread_create: glibc 2.34 moved it into libc."""
    r = s.script(tool("threadsnoop.bt"), [APP, "threads", 3], engine, path=True)
    assert r.returncode == 0, r.stderr
    lines = s.printf_lines(r.stdout)
    assert lines[0].split() == ["TIME(ms)", "PID", "COMM", "FUNC"]
    rows = [l.split() for l in lines[1:]]
    assert len(rows) == 4
    assert all(r[2] == "scriptapp" and r[3] == "thread_main" for r in rows)


class Pty:
    """An interactive bash on a pseudo-terminal: readline reads its lines."""

    def __init__(self):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
        self.drain(1.0)

    def drain(self, t):
        end = time.monotonic() + t
        out = b""
        while time.monotonic() < end:
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                try:
                    out += os.read(self.fd, 4096)
                except OSError:
                    break
        return out

    def line(self, text):
        os.write(self.fd, (text + "\n").encode())
        self.drain(0.3)

    def close(self):
        try:
            os.write(self.fd, b"exit\n")
            self.drain(0.3)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_bashreadline(engine):
    """uretprobe:/bin/bash:readline, -p a shell's PID, stopped by SIGINT."""
    sh = Pty()
    try:
        bg = u.Background(["script", "-e", engine, "-p", sh.pid, tool("bashreadline.bt")])
        bg.wait_ready()
        for c in ["echo one", "echo two", "true three"]:
            sh.line(c)
        time.sleep(0.5)
        bg.signal(signal.SIGINT)
        res = bg.result()
    finally:
        sh.close()
    assert res.rc == 0, res.stderr
    lines = s.printf_lines(res.stdout)
    assert lines[:2] == ["Tracing bash commands... Hit Ctrl-C to end.",
                         "TIME      PID    COMMAND"]
    assert [l.split(None, 2)[1:] for l in lines[2:]] == \
        [[str(sh.pid), "echo one"], [str(sh.pid), "echo two"], [str(sh.pid), "true three"]]


TLS = os.path.join(os.path.dirname(__file__), "script_tls.py")


def test_ssllatency():
    """A TLS handshake on loopback, client and server in one python3: two
    SSL_do_handshake, one RSA_sign (the server's key); the libcrypto
    functions bpftrace's tool names that are local (no symbol) are left out
    with a warning, as bpftrace does."""
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/libssl.so.3") or not shutil.which("openssl"):
        pytest.skip("no libssl.so.3 or openssl")
    r = s.script(tool("ssllatency.bt"), ["/usr/bin/python3", TLS, 3], path=True)
    assert r.returncode == 0, r.stderr
    assert "left out" in r.stderr
    m = s.parse_maps(r.stdout)
    assert m["stat"]["SSL_do_handshake"].startswith("count 2,")
    assert m["stat"]["RSA_sign"].startswith("count 1,")
    assert sum(c for _, c in m["hist"]["SSL_do_handshake"]) == 2


COUNT = f"uprobe:{APP}:work {{ @[arg0] = count(); }} END {{ printf(\"bye\\n\"); }}"


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_pid_sigint_prints_maps(engine):
    t = u.Target([APP, "keys", 10, "wait"])
    t.expect("ready")
    bg = u.Background(["script", "-e", engine, "-p", t.pid, "-x", COUNT])
    bg.wait_ready()
    for k in (1, 2):
        t.write("go\n")
        t.expect(f"round {k}")
    bg.signal(signal.SIGINT)
    res = bg.result()
    t.close_stdin()
    t.wait()
    assert res.rc == 0, res.stderr
    assert s.printf_lines(res.stdout) == ["bye"]
    assert s.parse_maps(res.stdout)[""] == {str(k): "4" for k in range(5)}


def test_system_wide():
    """No -p, no COMMAND: every process that runs the binary."""
    prog = f"uprobe:{APP}:work {{ @[pid, arg0] = count(); }}"
    bg = u.Background(["script", "-x", prog])
    bg.wait_ready()
    t = subprocess.run([APP, "keys", "10"], capture_output=True, text=True)
    t2 = subprocess.Popen([APP, "keys", "5"], stdout=subprocess.DEVNULL)
    t2.wait()
    time.sleep(0.3)
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.stderr
    assert t.stdout == "scriptapp done keys 10\n"
    m = s.parse_maps(res.stdout)[""]
    mine = {k: v for k, v in m.items() if k.split(", ")[0] in (str(t2.pid),)}
    assert mine == {f"{t2.pid}, {k}": "1" for k in range(5)}
    assert sum(int(v) for v in m.values()) >= 15


def test_command_and_params():
    """-- COMMAND, and $1 $2 (a number and a string) after the program."""
    prog = f"uprobe:{APP}:work /arg0 == $1/ {{ @[$2] = count(); }}"
    r = u.run_uscope(["script", "-q", "-x", prog, 3, "three", "--", APP, "keys", 20])
    assert r.returncode == 0, r.stderr
    assert s.parse_maps(r.stdout)[""] == {"three": "4"}


def test_file_and_stdin(tmp_path):
    f = tmp_path / "c.bt"
    f.write_text("#!/usr/bin/env bpftrace\n" + COUNT + "\n")
    r = u.run_uscope(["script", "-q", f, "--", APP, "keys", 5])
    assert r.returncode == 0, r.stderr
    assert s.parse_maps(r.stdout)[""] == {str(k): "1" for k in range(5)}
    r = u.run_uscope(["script", "-q", "-", "--", APP, "keys", 5], input=COUNT)
    assert r.returncode == 0, r.stderr
    assert s.parse_maps(r.stdout)[""] == {str(k): "1" for k in range(5)}


BAD = [
    ("uprobe:APP:work { @x = ; }", "PROGRAM:1:", "expected an expression"),
    ("uprobe:APP:work { @x = count() }\nuprobe:APP:work { printf(\"%d\\n\", \"s\"); }",
     "PROGRAM:2:", "%d specifier expects a value of type integer (string supplied)"),
    ("uprobe:APP:work { @x = nosuch; }", "PROGRAM:1:", "unknown identifier: 'nosuch'"),
    ("uprobe:APP:work { @x = nosuch(1); }", "PROGRAM:1:", "unknown function: nosuch"),
    ("kprobe:do_sys_open { @ = count(); }", "PROGRAM:1:1:", "kprobe: probes are bpftrace's"),
    ("tracepoint:syscalls:sys_enter_open { @ = count(); }", "PROGRAM:1:1:",
     "tracepoint: probes are bpftrace's"),
    ("uprobe:APP:work { @x = 1; @x = \"s\"; }", "PROGRAM:1:", "type mismatch for @x"),
    ("BEGIN { @x = retval; }", "PROGRAM:1:", "retval builtin can only be used"),
    ("uprobe:APP:work { $a = 1 + \"s\"; }", "PROGRAM:1:", "can not be used on expressions"),
    ("uprobe:APP:work { @x[1] = 1; @x[\"a\"] = 2; }", "PROGRAM:1:", "key 1 is string here"),
    ("uprobe:APP:work { @x = 1 / 0; }", "PROGRAM:1:", "division by zero"),
    ("uprobe:APP:work { \"unterminated }", "PROGRAM:1:", "unterminated string"),
]


@pytest.mark.parametrize("prog,where,msg", BAD, ids=range(len(BAD)))
def test_bad_programs(tmp_path, prog, where, msg):
    """One message with the place and a caret; the COMMAND never runs."""
    marker = tmp_path / "ran"
    r = u.run_uscope(["script", "-x", prog.replace("APP", APP), "--", "touch", marker])
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert lines[0].startswith("uscope: " + where) and msg in lines[0], r.stderr
    assert len(lines) == 3 and lines[2].strip().startswith("^"), r.stderr
    assert s.no_process_started(marker)


def test_bad_file_line_column(tmp_path):
    f = tmp_path / "bad.bt"
    f.write_text("BEGIN {\n  printf(\"hi\\n\");\n  @x = pid +;\n}\n")
    r = u.run_uscope(["script", f])
    assert r.returncode == 1
    first, line, caret = r.stderr.splitlines()
    assert first.startswith(f"uscope: {f}:3:13: expected an expression")
    assert line == "    @x = pid +;" and caret == "              ^"


def test_trace_points_at_script():
    r = u.run_uscope(["trace", f"uprobe:{APP}:work {{ @ = count(); }}"])
    assert r.returncode != 0
    assert "uscope script" in r.stderr


HOSTILE = f"""
uprobe:{APP}:take
{{
	@s[str(arg0)] = count();
	@n[nsecs] = count();
	@r = *(uint64 *)arg0;
	$i = 0;
	@z = 100 / ($i * 0);
	while ($i >= 0) {{ $i++; }}
}}
"""


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_hostile(engine):
    """str() and a load of garbage pointers (1, -1, NULL, an unmapped page),
    a map filled past its bound, a loop that never ends and a division by
    zero: the target finishes with its own output; the reads give "" and 0,
    the loop stops at its bound, the division gives 0, each counted and said
    once; the map's losses said."""
    r = s.script(HOSTILE, [APP, "bad", 400], engine, extra=["--max-keys", "100"])
    assert r.returncode == 0, r.stderr
    assert "scriptapp done bad 400" in r.stdout
    m = s.parse_maps(r.stdout)
    assert m["s"] == {"": "400"}
    assert m["r"][""] == "0"
    assert len(m["n"]) == 100
    assert "@n: 300 updates lost: the map holds 100 keys" in r.stderr
    assert "reads of the process's memory failed" in r.stderr
    assert m["z"][""] == "0"
    assert "400 hits stopped after 100000 turns of their loops" in r.stderr, r.stderr
    assert "400 divisions by zero" in r.stderr, r.stderr


def test_json():
    prog = f"""uprobe:{APP}:work {{ @c[arg0] = count(); @h = hist(arg1); @st = stats(arg1);
               printf("x %d\\n", arg0); }}"""
    r = s.script(prog, [APP, "keys", 5], "inject", extra=["--json"])
    assert r.returncode == 0, r.stderr
    objs = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    assert [o["data"] for o in objs if o["type"] == "printf"] == [f"x {k}\n" for k in range(5)]
    maps = {list(o["data"])[0]: o for o in objs if o["type"] in ("map", "hist", "stats")}
    assert maps["@c"]["data"]["@c"] == {str(k): 1 for k in range(5)}
    assert maps["@st"]["type"] == "stats"
    assert maps["@st"]["data"]["@st"] == {"count": 5, "average": 2, "total": 10}
    assert maps["@h"]["data"]["@h"][0] == {"min": 0, "max": 0, "count": 1}
    if s.have_bpftrace():
        bt = s.bpftrace(prog, [APP, "keys", 5], json=True)
        bobjs = [json.loads(l) for l in bt.splitlines() if l.startswith("{")]
        assert sorted(json.dumps(o, sort_keys=True) for o in bobjs) == \
            sorted(json.dumps(o, sort_keys=True) for o in objs)
