"""The bpf engine: the same probe language and output on eBPF uprobes. It
interprets the fetch program in the kernel, so it computes USDT base+index
(SIB) arguments, which uprobe_events cannot; -e auto picks it for them."""

import collections
import subprocess

import uscope_e2e as u
from uscope_e2e import Waiter, run_uscope, target, trace

ARGS = target("args")
USDT = target("usdt")
BPF = ["-e", "bpf"]


def test_sib_argument_auto_picks_bpf():
    n = 10
    for extra in ([], BPF):
        res = trace("%app:sib", cmd=[USDT, str(n)], extra=extra, labels=True,
                    json=True).check(rc=0)
        got = sorted((e.args["arg1"], e.args["arg2"]) for e in res.events)
        assert got == [(i, 1000000 + i % 8) for i in range(n)]


def test_entry_args_deref_strings_fault_and_return_sites():
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


def test_semaphore_raised_through_the_ref_counter():
    res = trace("%prov:sema_event", cmd=[USDT, "5"], extra=BPF, labels=True).check(rc=0)
    assert res.stdout == "usdt done n=5 enabled=5\n"
    assert [e.args["arg1"] for e in res.events] == list(range(5))
    # and lowered after the session
    out = subprocess.run([USDT, "3"], capture_output=True, text=True).stdout
    assert out == "usdt done n=3 enabled=0\n"


def test_pid_attach_is_per_process():
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
