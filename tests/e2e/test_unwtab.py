"""The stack walker of issue 19 (src/stack/stack_walk.h, with the unwind
tables src/stack/unwtab.c compiles from the CFI) against the libdw unwinder
$ustack uses today (src/stack/unwind.c), on the same stacks, frame by frame.

tests/tools/unwcheck runs a program under ptrace and, at each stop, copies
the registers and 8 KiB of stack as an engine's $ustack does, unwinds the
copy with libdw and walks it with the tables: the two must be the same
stack (frames, exact and signal-frame bits, the end and where), or the walk
must stop on a row it cannot follow (a fallback: the engine would copy the
stack then). The stops: breakpoints (every hit), single steps (every
instruction for a while: each row of the functions crossed), and random
moments of a busy program. No engine is involved (part 1 of the issue).

The fallbacks allowed, each where it is:
  expr  a PLT entry (its CFA is a DWARF expression), at frame 0 only
  reg   ld.so's lazy-binding resolver (_dl_runtime_resolve_*: its CFA is
        rbx-based), the first call of each function through the PLT"""

import functools
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import target

UNWCHECK = u.REPO / "build" / "san" / "tests" / "unwcheck"
STACKS = target("stacks")
PYTHON = "/usr/bin/python3.11"
REDIS = "/usr/bin/redis-server"
RUN_TIMEOUT = 600     # a safety net; runs wait on their program, not on time

# mode of tests/targets/stacks.c -> the function stopped at, its hits
MODES = {"qsort": ("cmp", 17), "inline": ("leaf", 1), "signal": ("in_handler", 1),
         "thread": ("thread_work", 1)}


@pytest.fixture(scope="module", autouse=True)
def unwcheck_built():
    if not os.access(UNWCHECK, os.X_OK):
        pytest.fail(f"{UNWCHECK} is missing: make build/san/tests/unwcheck", pytrace=False)


def sym_offset(path, name):
    """The file offset of an ELF symbol of path (.symtab or .dynsym)."""
    for args in (["nm", "--defined-only", path], ["nm", "-D", "--defined-only", path]):
        r = subprocess.run(args, capture_output=True, text=True)
        for line in r.stdout.splitlines():
            f = line.split()
            if len(f) == 3 and f[2].split("@")[0] == name:
                return u.file_offset(path, int(f[0], 16))
    raise KeyError(f"{name} is no symbol of {path}")


class Result:
    def __init__(self, out):
        self.out = out
        m = re.search(r"^SUMMARY stops=(\d+) same=(\d+) fallback=(\d+) differ=(\d+) "
                      r"frames=(\d+) sig=(\d+) sig_same=(\d+)$", out, re.M)
        assert m, f"no summary from unwcheck:\n{out[-4000:]}"
        self.stops, self.same, self.fallback, self.differ, self.frames, self.sig, \
            self.sig_same = map(int, m.groups())
        self.fallbacks = [dict(kv.split("=", 1) for kv in l.split()[1:])
                          for l in out.splitlines() if l.startswith("FALLBACK ")]
        m = re.search(r"^ENDS(.*)$", out, re.M)
        self.ends = dict((k, int(v)) for k, v in (kv.split("=") for kv in m.group(1).split()))

    def check(self):
        """The same stack at every stop, or a fallback of the kinds allowed."""
        diffs = [b for b in re.split(r"^(?=DIFF )", self.out, flags=re.M) if b.startswith("DIFF")]
        assert self.differ == 0 and not diffs, \
            f"{self.differ} stacks differ:\n" + "".join(diffs[:3])
        assert self.same + self.fallback == self.stops and self.stops > 0, self.out[-2000:]
        assert len(self.fallbacks) == self.fallback
        for f in self.fallbacks:
            assert_allowed(f)
        return self


@functools.lru_cache(maxsize=None)
def plt_ranges(path):
    """[(start, end)]: the file offsets of path's PLT sections."""
    rs = []
    for line in u._run(["readelf", "-SW", path]).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\.plt\S*)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+"
                     r"([0-9a-f]+)", line)
        if m:
            off, size = int(m.group(2), 16), int(m.group(3), 16)
            rs.append((off, off + size))
    return rs


def assert_allowed(f):
    if f["why"] == "expr":
        off = int(f["fileoff"], 16)
        assert f["frame"] == "0" and any(a <= off < b for a, b in plt_ranges(f["path"])), \
            f"a DWARF-expression CFA outside a PLT, or above frame 0: {f}"
    elif f["why"] == "reg":
        assert os.path.basename(f["path"]).startswith("ld-linux") and \
            f["sym"].startswith("_dl_runtime_resolve"), f"a CFA from another register: {f}"
    else:
        raise AssertionError(f"a fallback of an unexpected kind: {f}")


def unwcheck(args, cmd, **kw):
    r = subprocess.run([str(UNWCHECK)] + [str(a) for a in args] + ["--"] + [str(c) for c in cmd],
                       capture_output=True, text=True, timeout=RUN_TIMEOUT,
                       stdin=subprocess.DEVNULL, **kw)
    assert r.returncode == 0, f"unwcheck failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr}"
    return Result(r.stdout)


# --------------------------------------------------------------------------
# tests/targets/stacks: the stacks test_stacks.py checks against gdb

@pytest.mark.parametrize("mode", list(MODES))
def test_stacks_at_the_probe(mode):
    """Every hit of the probed function: the same stack, complete, no fallback."""
    func, hits = MODES[mode]
    r = unwcheck(["-b", f"{STACKS}:{sym_offset(STACKS, func):#x}"], [STACKS, mode]).check()
    assert (r.stops, r.same, r.fallback) == (hits, hits, 0), r.out
    assert r.ends == {"outermost": hits}, r.out


@pytest.mark.parametrize("mode", list(MODES))
def test_stacks_every_instruction(mode):
    """2000 instructions from the probed function on (through qsort's merge
    sort, the signal trampoline and back, a thread's exit): each stop's
    stack the same as libdw's, or an allowed fallback."""
    func, _ = MODES[mode]
    r = unwcheck(["-S", 2000, "-b", f"{STACKS}:{sym_offset(STACKS, func):#x}"],
                 [STACKS, mode]).check()
    assert r.stops == (2001 if mode != "thread" else r.stops) and r.stops > 100, r.out[-2000:]
    assert r.same > r.stops // 2, r.out[-2000:]


def test_signal_frames_followed():
    """The walker follows the signal trampoline itself (no fallback there):
    every stop in the handler, and in the trampoline until sigreturn, has a
    signal frame on its stack, and every one is libdw's stack."""
    func, _ = MODES["signal"]
    r = unwcheck(["-S", 400, "-b", f"{STACKS}:{sym_offset(STACKS, func):#x}"],
                 [STACKS, "signal"]).check()
    assert r.sig > 10 and r.sig_same == r.sig, r.out[-2000:]


# --------------------------------------------------------------------------
# Debian's python3.11: stripped, no frame pointers, .eh_frame only

PY_SCRIPT = "import json; [repr(x / 7) for x in range(200)]; json.dumps([1.5] * 10)"
PY_WORK = """
import collections, decimal, json, re
while True:
    d = collections.Counter()
    for i in range(20000):
        s = json.dumps({'a': i, 'b': [i * 1.5, str(i)]})
        d[len(re.findall(r'\\d', s))] += 1
        decimal.Decimal(i) / 7
"""


def python_off():
    if not os.access(PYTHON, os.X_OK):
        pytest.skip(f"{PYTHON} is not installed")
    return f"{PYTHON}:{sym_offset(PYTHON, 'PyOS_double_to_string'):#x}"


def test_python_at_the_probe():
    """PyOS_double_to_string, once per float repr: 210 stacks, all the same."""
    r = unwcheck(["-b", python_off()], [PYTHON, "-I", "-S", "-c", PY_SCRIPT]).check()
    assert (r.stops, r.same, r.fallback) == (210, 210, 0), r.out[-2000:]
    assert r.frames > 210 * 10


def test_python_every_instruction():
    r = unwcheck(["-S", 20000, "-b", python_off()], [PYTHON, "-I", "-S", "-c", PY_SCRIPT]).check()
    assert r.stops == 20001 and r.same > 19000, r.out[-2000:]


def test_python_sampled():
    """1000 moments of a busy interpreter (json, re, decimal: extension
    modules loaded while it runs)."""
    python_off()
    r = unwcheck(["-q", "-s", 1000, "-i", 500], [PYTHON, "-I", "-c", PY_WORK]).check()
    assert r.stops == 1000, r.out[-2000:]


# --------------------------------------------------------------------------
# Debian's redis-server under redis-benchmark

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_answers(p, port, last):
    """Wait until redis-server (under unwcheck) answers on port (every poll
    waits on the server, no deadline but the safety net). False when the
    port was taken meanwhile (free_port's port is anyone's until bound) and
    another may be tried."""
    t0 = time.monotonic()
    while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                         text=True).stdout.strip() != "PONG":
        if p.poll() is not None:
            out = p.communicate()
            if not last and "Address already in use" in "".join(out):
                return False
            raise AssertionError(out)
        assert time.monotonic() - t0 < RUN_TIMEOUT, "redis-server did not start"
        time.sleep(0.05)
    return True


def redis_run(args):
    """redis-server under unwcheck while redis-benchmark runs against it;
    then a SHUTDOWN ends both. -> Result"""
    if not (os.access(REDIS, os.X_OK) and os.access("/usr/bin/redis-benchmark", os.X_OK)):
        pytest.skip("redis-server and redis-tools are not installed")
    for attempt in range(5):
        port = free_port()
        p = subprocess.Popen([str(UNWCHECK)] + [str(a) for a in args] +
                             ["--", REDIS, "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--daemonize", "no"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
        try:
            if redis_answers(p, port, last=attempt == 4):
                break
        except BaseException:
            if p.poll() is None:
                p.kill()
                p.wait()
            raise
    try:
        b = subprocess.run(["redis-benchmark", "-p", str(port), "-n", "3000", "-c", "4", "-q",
                            "-t", "set,get,incr,lpush,lpop,sadd,hset"],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert b.returncode == 0, b.stderr
        subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
        out, err = p.communicate(timeout=RUN_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, f"{out[-3000:]}\n{err}"
    return Result(out)


def test_redis_zmalloc():
    """Every zmalloc of 21,000 requests: its stack through redis-server's
    .eh_frame, the same as libdw's."""
    r = redis_run(["-q", "-b", f"{REDIS}:{sym_offset(REDIS, 'zmalloc'):#x}"]).check()
    assert r.stops >= 21000 and r.fallback == 0, r.out[-2000:]


def test_redis_sampled():
    r = redis_run(["-q", "-s", 100000, "-i", 300]).check()
    assert r.stops > 100, r.out[-2000:]


# --------------------------------------------------------------------------
# The walker in a bpf program (tests/tools/walk.bpf.c): the verifier takes
# it, and it walks the stacks the user-space walker walks

BPFWALK = u.REPO / "build" / "san" / "tests" / "bpfwalk"
WALK_OBJ = u.REPO / "build" / "tools" / "walk.bpf.o"


def test_bpf_walker():
    """A uprobe's program walks bpfwalk's own stacks with the tables in BPF
    array maps: a chain of calls, qsort's comparator (through libc), a
    signal handler (through the trampoline) and a recursion cut at 64
    frames; each the stack the walker finds in user space."""
    for p in (BPFWALK, WALK_OBJ):
        if not p.exists():
            pytest.fail(f"{p} is missing: make {p.relative_to(u.REPO)}", pytrace=False)
    r = subprocess.run([str(BPFWALK), str(WALK_OBJ), "2000"], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    cases = dict(re.findall(r"^CASE (\w+) (.*)$", r.stdout, re.M))
    assert set(cases) == {"chain", "qsort", "signal", "deep"}, r.stdout
    end = {"outermost": 1, "limit": 2}
    # bpfwalk's main <- __libc_start_call_main <- __libc_start_main <- _start
    # above each case's own frames
    assert cases["chain"] == f"same frames={10 + 4} end={end['outermost']} sig=0", r.stdout
    assert cases["signal"].startswith("same ") and cases["signal"].endswith(" sig=1"), r.stdout
    assert cases["qsort"].startswith("same ") and cases["qsort"].endswith(" sig=0"), r.stdout
    assert cases["deep"] == f"same frames=64 end={end['limit']} sig=0", r.stdout
    assert int(re.search(r"^bpf_verified_insns (\d+)$", r.stdout, re.M).group(1)) > 0
