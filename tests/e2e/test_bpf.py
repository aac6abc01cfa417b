"""The bpf engine: the same probe language and output on eBPF uprobes. It
interprets the fetch program in the kernel, so it computes USDT base+index
(SIB) arguments, which uprobe_events cannot; -e auto picks it for them.

It links its program to the sites of a file with one multi-uprobe link
where the kernel has them (6.6), one link a site where not: the `links`
fixture runs a test both ways (USCOPE_BPF_MULTI=0 forces the second)."""

import collections
import re
import signal
import subprocess

import pytest

import uscope_e2e as u
from uscope_e2e import Background, Target, Waiter, run_uscope, target, trace

ARGS = target("args")
USDT = target("usdt")
MANY = target("manyfuncs")	# f_0000 ... f_0399: `manyfuncs K` calls each K times a line
NMANY = 400
BPF = ["-e", "bpf"]


@pytest.fixture(params=["multi", "single"])
def links(request, monkeypatch):
    """One multi-uprobe link a file, or one link a site."""
    if request.param == "single":
        monkeypatch.setenv("USCOPE_BPF_MULTI", "0")
    return request.param


def table(stdout):
    """count's PROBE/COUNT rows -> {probe: count}."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+(\d+)$", stdout, re.M)}


def test_sib_argument_auto_picks_bpf():
    n = 10
    for extra in ([], BPF):
        res = trace("%app:sib", cmd=[USDT, str(n)], extra=extra, labels=True,
                    json=True).check(rc=0)
        got = sorted((e.args["arg1"], e.args["arg2"]) for e in res.events)
        assert got == [(i, 1000000 + i % 8) for i in range(n)]


def test_entry_args_deref_strings_fault_and_return_sites(links):
    res = trace("add a=$arg1:s32 b=$arg2:s32", "note m=$arg1:string",
                "peek s=$arg1:string c=+0($arg1):u8", "r:compute ret=$retval:s64",
                cmd=[ARGS, "4"], extra=BPF, json=True).check(rc=0)
    c = res.counts()
    assert c == {"add": 4, "note": 4, "peek": 3, "compute__return": 4}
    assert [(e.args["a"], e.args["b"]) for e in res.named("add")] == \
        [(i, 2 * i) for i in range(1, 5)]
    # note's buffer is on the stack: always resident
    assert [e.args["m"] for e in res.named("note")] == [f"note {i}" for i in range(1, 5)]
    # peek((char *)1) faults, and is marked so; the target is unharmed
    assert [e.args["s"] for e in res.named("peek")] == [None, "ok", None]
    # a number behind a bad pointer is a fault marker too, not a made-up value
    assert [e.args["c"] for e in res.named("peek")] == [None, ord("o"), None]
    assert [e.args["ret"] for e in res.named("compute__return")] == \
        [100003 * i * 3 + 1 for i in range(1, 5)]
    for e in res.named("compute__return"):
        assert e.type == "r" and e.func and e.ip


def test_semaphore_raised_through_the_ref_counter(links):
    res = trace("%prov:sema_event", cmd=[USDT, "5"], extra=BPF, labels=True).check(rc=0)
    assert res.stdout == "usdt done n=5 enabled=5\n"
    assert [e.args["arg1"] for e in res.events] == list(range(5))
    # and lowered after the session
    out = subprocess.run([USDT, "3"], capture_output=True, text=True).stdout
    assert out == "usdt done n=3 enabled=0\n"


def test_pid_attach_is_per_process(links):
    w, other = Waiter(), Waiter()
    bg = u.trace_bg("on_line s=$arg1:string n=$arg2:s32", pid=w.pid, extra=BPF)
    bg.wait_ready()
    for i in range(3):
        w.send(f"mine {i}")
        other.send("not mine")
    w.close_stdin()
    assert w.wait() == 0
    res = bg.result().check(rc=0)
    assert [e.args["s"] for e in res.events] == [f"mine {i}" for i in range(3)]
    assert {e.tid for e in res.events} == {w.pid}
    other.close_stdin()
    other.wait()


def test_count_uses_the_kernels_per_site_hits():
    cp = run_uscope(["count", "-e", "bpf", "a*", "--", ARGS, "6"])
    assert cp.returncode == 0
    rows = dict(l.split() for l in cp.stdout.splitlines()[-3:])
    assert rows == {"add": "6", "adjust": "6", "area": "6"}


def test_uretprobe_is_tracefs_only():
    cp = run_uscope(["trace", "-e", "bpf", "--uretprobe", "r:compute", "--", ARGS, "1"])
    assert cp.returncode == 1
    assert "--uretprobe needs -e tracefs" in cp.stderr


def test_many_sites_of_one_file_system_wide_counted_exactly():
    """400 functions of one file, system-wide: each hit counted, from two
    processes, none lost or misattributed (each site's cookie)."""
    bg = Background(["count", "-e", "bpf", f"{MANY}:f_*"])
    assert bg.wait_ready() == NMANY
    for _ in range(2):
        p = subprocess.run([MANY, "3"], input="go\n", capture_output=True, text=True,
                           timeout=u.TIMEOUT)
        assert (p.returncode, p.stdout) == (0, "called 1\n")
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.stderr
    assert table(res.stdout) == {f"f_{i:04d}": 6 for i in range(NMANY)}


def code_at(pid, path, vaddrs):
    """The byte at each link-time address of path's code in process pid."""
    base = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == path and parts[2] == "00000000":
                base = int(parts[0].split("-")[0], 16)
                break
    assert base is not None, f"{path} not mapped in {pid}"
    with open(f"/proc/{pid}/mem", "rb") as f:
        out = []
        for a in vaddrs:
            f.seek(base + a)
            out.append(f.read(1))
        return out


def test_many_sites_pid_only_that_process_and_code_restored(links):
    """-p on one of two processes running the file: only its hits, and when
    the session ends every breakpoint is gone from its code. On one link a
    site, 20 sites (each takes the kernel ~0.1 s to remove)."""
    glob, n = ("f_*", NMANY) if links == "multi" else ("f_001*", 10)
    funcs = [f"f_{i:04d}" for i in range(NMANY) if re.fullmatch(glob.replace("*", ".*"),
                                                                     f"f_{i:04d}")]
    assert len(funcs) == n
    mine, other = Target([MANY, "2"]), Target([MANY, "5"])
    syms = u.nm_funcs(MANY)
    addrs = [syms[f][0][0] for f in funcs]
    before = code_at(mine.pid, MANY, addrs)
    bg = Background(["count", "-e", "bpf", "-p", mine.pid, glob])
    assert bg.wait_ready() == n
    assert set(code_at(mine.pid, MANY, addrs)) == {b"\xcc"}, "no breakpoint while attached"
    for t in (mine, other, mine):
        t.write("go\n")
    mine.expect("called 1")
    mine.expect("called 2")
    other.expect("called 1")
    bg.signal(signal.SIGINT)
    res = bg.result()
    assert res.rc == 0, res.stderr
    assert table(res.stdout) == {f: 4 for f in funcs}
    assert code_at(mine.pid, MANY, addrs) == before
    for t in (mine, other):
        t.close_stdin()
        assert t.wait() == 0


def test_the_site_the_kernel_refuses_is_named(tmp_path, links):
    """A site the kernel cannot probe (an EVEX prefix, refused on x86-64)
    among others of its file: the error names it, and nothing stays."""
    src = tmp_path / "bad.c"
    src.write_text("\n".join(f"__attribute__((noinline)) int g{i}(int x) {{ return x + {i}; }}"
                             for i in range(8)) +
                   "\nint main(void) { return g0(1) + g7(2) - 10; }\n"
                   "__asm__(\".globl badop\\n.type badop,@function\\nbadop:\\n"
                   ".byte 0x62,0,0,0\\nret\\n.size badop,.-badop\\n\");\n")
    prog = tmp_path / "bad"
    subprocess.run(["cc", "-O1", "-o", str(prog), str(src)], check=True)
    off = u.func_addr(prog, "badop")
    cp = run_uscope(["trace", "-e", "bpf", "g*", "badop", "--", prog])
    assert cp.returncode == 1
    assert f"uscope: cannot attach badop at {prog}:{off:#x}: Exec format error\n" in cp.stderr
