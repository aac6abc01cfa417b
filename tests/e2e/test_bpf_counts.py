"""Counts by stack on the bpf engine lose no hit, whatever the burst (issue
41): a walked $ustack is counted in the kernel by its hash (the stacks
table, as large as the rows: --max-keys), and a walk that stopped is copied
for uscope to unwind while the ring buffer has room, counted as far as it
went when it has not; the summary says how many and why.

The burst: node, whose start-up writes its perf map (--perf-basic-prof)
with a write(2) a line, then 4,000 fs.writeSync calls from JS. The same
run counts write(2) without a stack, so the stacks' rows must add up to
it exactly."""

import re
import shutil
import tempfile
from pathlib import Path

import pytest

from uscope_e2e import run_uscope, target

NODE = shutil.which("node")
APP = """
const fs = require('fs');
function emit(i) { fs.writeSync(1, 'line ' + i + '\\n'); }
function run(n) { for (let i = 0; i < n; i++) emit(i); }
// (after uscope has read what node mapped at its start: a burst then
// walks through its JIT code with the tables of every module)
setTimeout(() => run(4000), 2000);
"""


def rows(stdout):
    """count's rows: [(probe, count, [frame lines])]."""
    out, cur = [], None
    at = stdout.find("\nPROBE ")
    for line in stdout[at + 1 if at >= 0 else 0:].splitlines():
        m = re.match(r"^(\S+)\s+(\d+)$", line)
        if m and m.group(1) != "PROBE":
            cur = (m.group(1), int(m.group(2)), [])
            out.append(cur)
        elif cur and line.startswith("    "):
            cur[2].append(line.strip())
    return out


@pytest.mark.skipif(not NODE, reason="node is not installed")
def test_node_burst_every_hit_counted_with_js_frames():
    with tempfile.TemporaryDirectory() as d:
        app = Path(d) / "app.js"
        app.write_text(APP)
        # (V8's log in the test's directory, not the current one)
        cp = run_uscope(["count", "-e", "bpf", "libc:write", "libc:write $ustack", "--", NODE,
                         "--perf-basic-prof", "--no-logfile-per-isolate",
                         f"--logfile={d}/v8.log", str(app)], timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert "lost" not in cp.stderr, cp.stderr
    r = rows(cp.stdout)
    # the first probe's one row, the second's (write_2) a row a stack
    plain = [n for p, n, f in r if p == "write"]
    stacks = [(n, f) for p, n, f in r if p != "write"]
    assert len(plain) == 1 and plain[0] >= 4000, cp.stdout[-3000:]
    # every hit is in a stack's row, and every row has its frames
    assert sum(n for n, _ in stacks) == plain[0], (plain, cp.stderr)
    assert all(f and "__write" in f[0] for n, f in stacks), cp.stdout[-3000:]
    # the JS-called writes: JS frames (node's perf map names them) in
    # their rows, each but those the summary says were counted as far as
    # the walk went
    js = sum(n for n, f in stacks if any("emit" in x and "app.js" in x for x in f) and
             any("run" in x and "app.js" in x for x in f))
    m = re.search(r"^uscope: (\d+) hits? counted with the stack as far as it was walked",
                  cp.stderr, re.M)
    partial = int(m.group(1)) if m else 0
    assert js > 0 and js + partial >= 4000, (js, partial, cp.stderr)


def test_burst_of_copies_counted_as_far_as_walked(monkeypatch):
    """A burst whose walks all stop (the process's mappings not known to
    the program: USCOPE_BPF_STK_PUBLISH=0 keeps them from it) fills the ring
    buffer with copies; what does not fit is counted as far as walked
    (frame 0 here), and nothing is lost."""
    monkeypatch.setenv("USCOPE_BPF_STK_PUBLISH", "0")
    cp = run_uscope(["count", "-e", "bpf", "leaf", "leaf $ustack", "--", target("stacks"),
                     "mixed", "20000"], timeout=300)
    assert cp.returncode == 0, cp.stderr
    r = rows(cp.stdout)
    assert [n for p, n, f in r if p == "leaf"] == [40000]
    assert sum(n for p, n, f in r if p != "leaf") == 40000
    # frame 0 at least, and where the walk stopped
    assert all(f and f[0].startswith("leaf") for p, n, f in r if p != "leaf"), cp.stdout
    m = re.search(r"^uscope: (\d+) hits counted with the stack as far as it was walked.*"
                  r": noproc (\d+)$", cp.stderr, re.M)
    assert m and int(m.group(1)) == int(m.group(2)) > 0, cp.stderr
    assert "lost" not in cp.stderr


PY = "/usr/bin/python3.11"
PYAPP = """
import os
def leaf(i): os.getpid()
def mid(i): leaf(i)
def top(n):
    for i in range(n): mid(i)
top(30000)
for i in range(500): leaf(i)
"""


def test_pystack_counted_in_the_kernel_as_inject_counts_it():
    """count by $pystack on bpf: in the kernel (-v says so), the rows named
    after the process has exited, the same rows as inject's."""
    with tempfile.TemporaryDirectory() as d:
        app = Path(d) / "app.py"
        app.write_text(PYAPP.lstrip())
        got = {}
        for e in ("bpf", "inject"):
            cp = run_uscope(["count", "-v", "-e", e, "libc:getpid $pystack", "--", PY,
                             str(app)], timeout=300)
            assert cp.returncode == 0, cp.stderr
            got[e] = sorted((n, tuple(f)) for p, n, f in rows(cp.stdout) if f)
            if e == "bpf":
                assert "getpid at 0x" in cp.stderr and \
                    "aggregated where the probe runs on bpf" in cp.stderr
    want = [(500, ("leaf (%s:2)" % app, "<module> (%s:7)" % app)),
            (30000, ("leaf (%s:2)" % app, "mid (%s:3)" % app, "top (%s:5)" % app,
                     "<module> (%s:6)" % app))]
    assert [r for r in got["bpf"] if r[0] >= 500] == want, got["bpf"]
    assert got["bpf"] == got["inject"]
