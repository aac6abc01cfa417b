"""A library the target loads later (dlopen: here ctypes.CDLL) is seen on
every engine choice that can see it. An in-process engine patches what is
mapped when it attaches, so with -e auto its probes go to an engine with
kernel uprobes; -e inject says it cannot see it, instead of counting 0."""

import json
import shutil

import pytest

from uscope_e2e import Background, Target, run_uscope, target

PYTHON = "/usr/bin/python3"
N = 7
LATE = """
import ctypes, sys
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
lib = ctypes.CDLL(sys.argv[1])
lib.pymark.argtypes = [ctypes.c_int]
for i in range(%d):
    lib.pymark(i)
print("done", flush=True)
""" % N

pytestmark = pytest.mark.skipif(not shutil.which(PYTHON), reason="no python3")


def count_of(stdout):
    rows = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
    return {r["probe"]: r["count"] for r in rows}


def script(tmp_path):
    p = tmp_path / "late.py"
    p.write_text(LATE)
    return str(p)


@pytest.mark.parametrize("engine", ["auto", "bpf", "tracefs"])
def test_command_dlopen_counted(engine, tmp_path):
    mark = target("libpymark.so")
    cp = run_uscope(["count", "--json", "-e", engine, f"{mark}:pymark", "--", PYTHON,
                     script(tmp_path), mark], input="go\n")
    assert cp.returncode == 0, cp.stderr
    assert count_of(cp.stdout) == {"pymark": N}, cp.stderr


def test_command_dlopen_inject_says_so(tmp_path):
    mark = target("libpymark.so")
    cp = run_uscope(["count", "--json", "-e", "inject", f"{mark}:pymark", "--", PYTHON,
                     script(tmp_path), mark], input="go\n")
    assert cp.returncode == 0, cp.stderr
    assert f"warning: {mark}:pymark: {mark} is not mapped by COMMAND when inject " \
           "patches it" in cp.stderr
    assert "-e auto" in cp.stderr


def test_command_linked_library_stays_on_inject(tmp_path):
    """libc, linked by COMMAND, is mapped at start: its probes stay in the
    process (no kernel uprobe, no warning)."""
    cp = run_uscope(["count", "-v", "--json", "libc:getpid", "--", target("wrappers"), "3",
                     str(tmp_path / "f")])
    assert cp.returncode == 0, cp.stderr
    assert "on inject" in cp.stderr and "dlopen" not in cp.stderr


@pytest.mark.parametrize("engine", ["auto", "bpf"])
def test_pid_dlopen_after_attach_counted(engine, tmp_path):
    mark = target("libpymark.so")
    t = Target([PYTHON, script(tmp_path), mark])
    t.expect("ready")
    bg = Background(["count", "--json", "-e", engine, "-p", t.pid, f"{mark}:pymark"])
    bg.wait_ready()
    t.write("go\n")
    t.expect("done")
    t.wait()
    r = bg.result()
    assert r.rc == 0, r.stderr
    assert count_of(r.stdout) == {"pymark": N}, r.stderr
