"""The inject engine: probes patched into the traced process, recording into
shared-memory rings. The same probe language and output as the kernel
engines; these tests check what is particular to it: attaching to a running
process and leaving its code byte-identical, many threads, the target's and
the tracer's deaths, forks, and refusals with their reasons."""

import collections
import ctypes
import os
import re
import signal
import subprocess
import time

import pytest

import uscope_e2e as u
from uscope_e2e import Target, Waiter, run_uscope, target, trace

ARGS = target("args")
THREADS = target("threads")
SPIN = target("spin")
GO = target("gogrow")
INJ = ["-e", "inject"]


def code_ranges(pid):
    """Every executable file mapping of process pid."""
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "x" in parts[1] and parts[5].startswith("/"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi, parts[5]))
    return out


def read_code(pid, ranges):
    chunks = {}
    with open(f"/proc/{pid}/mem", "rb") as f:
        for lo, hi, path in ranges:
            f.seek(lo)
            chunks[(lo, path)] = f.read(hi - lo)
    return chunks


def test_entry_args_strings_faults_and_return_sites():
    res = trace("area a=%di:s32 b=%si:s32", "note m=$arg1:string",
                "pack w=$arg1:x32", "r:compute ret=$retval:s64",
                cmd=[ARGS, "4"], extra=INJ, json=True).check(rc=0, ready=4)
    assert res.counts() == {"area": 4, "note": 4, "pack": 4, "compute__return": 4}
    assert [(e.args["a"], e.args["b"]) for e in res.named("area")] == \
        [(i, i + 1) for i in range(1, 5)]
    assert [e.args["m"] for e in res.named("note")] == [f"note {i}" for i in range(1, 5)]
    assert [e.args["ret"] for e in res.named("compute__return")] == \
        [100003 * i * 3 + 1 for i in range(1, 5)]
    for e in res.named("compute__return"):
        assert e.type == "r" and e.func and e.ip
    # the target's own output is untouched
    plain = subprocess.run([ARGS, "4"], capture_output=True, text=True).stdout
    assert res.stdout == plain


def test_same_events_as_the_kernel_engine():
    probes = ("area a=%di:s32 b=%si:s32", "note m=+0(%di):string", "r:compute ret=$retval:s64")
    a = trace(*probes, cmd=[ARGS, "3"], extra=INJ).check(rc=0)
    b = trace(*probes, cmd=[ARGS, "3"], extra=["-e", "tracefs"]).check(rc=0)
    strip = [(e.event, tuple(sorted(e.args.items()))) for e in a.events]
    assert strip == [(e.event, tuple(sorted(e.args.items()))) for e in b.events]
    # the same offsets in the module (ASLR aside)
    assert [e.ip & 0xfff for e in a.events] == [e.ip & 0xfff for e in b.events]


def test_bad_pointer_is_a_fault_marker_and_the_target_lives():
    res = trace("pack w=$arg1:x32 s=+0(%di):string", "peek c=+0(%di):u8 s=+0(%di):string",
                cmd=[ARGS, "2"], extra=INJ, json=True)
    if res.rc != 0 and "cannot patch" in res.stderr:
        # peek is a rip-relative store and a ret: refused by older planners
        return
    res.check(rc=0)
    assert [e.args["s"] for e in res.named("peek")] == [None, "ok", None]
    assert [e.args["c"] for e in res.named("peek")] == [None, ord("o"), None]
    # a word taken for a pointer: unreadable, never a crash
    assert all(e.args["s"] is None for e in res.named("pack"))


def test_threads_under_load_exact_counts():
    n, m = 4, 5000
    res = trace("work t=%di:s32 i=%si:s32", cmd=[THREADS, str(n), str(m)], extra=INJ,
                json=True).check(rc=0)
    assert res.counts() == {"work": n * m}
    u.assert_multiset([(e.args["t"], e.args["i"]) for e in res.events],
                      [(t, i) for t in range(n) for i in range(m)], "work arguments")
    # one thread per t, and each thread's calls in order
    by_tid = collections.defaultdict(list)
    for e in res.events:
        by_tid[e.tid].append((e.args["t"], e.args["i"]))
    assert len(by_tid) == n
    for calls in by_tid.values():
        assert len({t for t, _ in calls}) == 1
        assert [i for _, i in calls] == list(range(m))
    # time runs forward within a thread
    for tid in by_tid:
        ts = [e.time for e in res.events if e.tid == tid]
        assert ts == sorted(ts)


def test_count_keeps_counters_in_process():
    n, m = 4, 200000
    cp = run_uscope(["count", "-e", "inject", "work", "--", THREADS, str(n), str(m)])
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    k = lines.index(next(x for x in lines if x.split() == ["PROBE", "COUNT"]))
    assert lines[k + 1].split() == ["work", str(n * m)]


def test_attach_detach_cycles_leave_code_byte_identical():
    w = Waiter()
    ranges = code_ranges(w.pid)
    before = read_code(w.pid, ranges)
    for cycle in range(3):
        bg = u.trace_bg("on_line s=$arg1:string n=$arg2:s32", "r:on_line ret=$retval:s32",
                        pid=w.pid, extra=INJ)
        assert bg.wait_ready() == 2
        for i in range(3):
            w.send(f"cycle {cycle} line {i}")
        bg.signal(signal.SIGINT)
        res = bg.result().check(rc=0)
        assert [e.args["s"] for e in res.named("on_line")] == \
            [f"cycle {cycle} line {i}" for i in range(3)]
        assert [e.args["ret"] for e in res.named("on_line__return")] == \
            [len(f"cycle {cycle} line {i}") for i in range(3)]
        assert read_code(w.pid, code_ranges(w.pid)) == before, "code changed after detach"
    # and it still works, untraced
    w.send("after")
    w.close_stdin()
    assert w.wait() == 0


def anon_rx_and_memfds(pid):
    """(bytes of anonymous r-x mappings, uscope memfd mappings, VmSize kB)
    of process pid."""
    rx, memfds = 0, []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            p = line.split()
            lo, hi = (int(x, 16) for x in p[0].split("-"))
            path = " ".join(p[5:])
            if "memfd:uscope" in path:
                memfds.append(line.strip())
            elif p[1] == "r-xp" and p[4] == "0" and not path:
                rx += hi - lo
    with open(f"/proc/{pid}/status") as f:
        vm = next(int(x.split()[1]) for x in f if x.startswith("VmSize:"))
    return rx, memfds, vm


def test_five_sessions_leave_only_their_trampolines():
    """Five clean sessions on one running process (count, record, stacks
    counted, latency, trace): each unmaps its shared memory (1 GiB of rings
    and more), its agent and its pages at detach; only its trampolines stay,
    one page for a probe or two, and the process runs on. A pad (a page the
    jump lands on where its bytes are the file's, doc/engines.md "Beside
    other tracers": `work $ustack` reads everything work's first
    instruction changes) stays too, said with -v."""
    t = Target([target("chaos"), "signals"])
    assert t.readline().startswith("ready pid=")
    rx0, memfds0, vm0 = anon_rx_and_memfds(t.pid)
    assert not memfds0
    pads = 0
    for k, argv in enumerate([["count", "work"], ["record", "-o", "/dev/null", "work"],
                              ["count", "work $ustack"], ["latency", "work"],
                              ["trace", "work i=$arg2:s64"]]):
        r = run_uscope(argv[:1] + INJ + ["-v", "-p", t.pid, "-d", "0.5"] + argv[1:])
        assert r.returncode == 0, r.stderr
        assert re.search(rf"inject: process {t.pid}: the shared memory \(\d+ MiB\) and the "
                         r"agent unmapped; 4096 bytes of trampolines stay", r.stderr), r.stderr
        rx, memfds, vm = anon_rx_and_memfds(t.pid)
        assert not memfds, memfds
        pads += len(re.findall(r"lands on a pad", r.stderr))
        assert rx - rx0 <= 4096 * (k + 1 + pads), (rx, rx0, pads)
        assert vm - vm0 < 16 * 1024, (vm, vm0)     # kB: not the GiB of a session
    t.kill()


def test_target_killed_mid_trace():
    t = Target([SPIN], stdin=False)
    t.expect("ready")
    bg = u.trace_bg("tick n=$arg1:s32", pid=t.pid, extra=INJ)
    bg.wait_ready()
    time.sleep(0.3)
    t.kill(signal.SIGKILL)
    res = bg.result().check(rc=0)
    ticks = [e.args["n"] for e in res.events]
    assert ticks and ticks == list(range(ticks[0], ticks[0] + len(ticks)))


def test_tracer_sigkilled_mid_trace_target_survives():
    w = Waiter()
    bg = u.trace_bg("on_line s=$arg1:string", pid=w.pid, extra=INJ)
    bg.wait_ready()
    w.send("traced")
    bg.signal(signal.SIGKILL)
    bg.wait()
    # the patches stay, nobody drains the ring: the target runs on
    for i in range(200):
        w.send(f"orphan {i}")
    w.close_stdin()
    assert w.wait() == 0


def test_forked_children_are_not_traced_and_not_broken():
    """--no-children: the children keep the patched code and record nothing."""
    f = Target([target("forker")])
    f.expect("ready")
    bg = u.trace_bg("work v=$arg1:s32", pid=f.pid, json=True, extra=INJ + ["--no-children"])
    bg.wait_ready()
    f.write("go\n")
    f.close_stdin()
    assert f.wait() == 0
    res = bg.result()
    if res.rc != 0 and "cannot patch" in res.stderr:
        return  # work() is a rip-relative store: see test_bad_pointer...
    res.check(rc=0)
    assert sorted(e.args["v"] for e in res.events) == [0, 0, 1, 1, 2, 2]
    assert {e.pid for e in res.events} == {f.pid}
    assert len({e.tid for e in res.events}) == 2


@pytest.mark.parametrize("rdfsbase", [None, "0"])
def test_go_return_sites_survive_stack_growth(rdfsbase, monkeypatch):
    """rdfsbase "0": as on a CPU without FSGSBASE (a VM's model may lack it),
    where Go's threads have no TCB at %fs:0 (their key, the fs base, is
    asked of the kernel: the word there is 0 on every Go thread)."""
    rounds = 3
    extra = INJ
    if rdfsbase is not None:
        monkeypatch.setenv("USCOPE_INJECT_RDFSBASE", rdfsbase)
        extra = INJ + ["-v"]
    res = trace("r:main.grow ret=$retval:s64", "r:main.square ret=$retval:s64",
                cmd=[GO, str(rounds)], json=True, extra=extra).check(rc=0)
    if rdfsbase is not None:
        assert re.search(r"inject: threads of process \d+ keyed by fs base "
                         r"\(asked: arch_prctl\)", res.stderr), res.stderr
    want = collections.Counter(1 + k * (k + 1) // 2
                               for r in range(rounds) for k in range(50 + r + 1))
    assert collections.Counter(e.args["ret"] for e in res.named("main.grow__return")) == want
    total = sum(1 + (50 + r) * (51 + r) // 2 + r * r for r in range(rounds))
    assert f"total {total}" in res.stdout


@pytest.mark.parametrize("how", ["rseq", "instruction", "segment"])
def test_each_event_on_one_of_the_machines_cpus(how, monkeypatch):
    """rseq: glibc's threads each registered an rseq area, whose cpu_id the
    kernel keeps current (a load). instruction: rdpid or rdtscp, where the
    CPU has one. segment: as on a CPU whose CPUID has neither (a VM's model
    may lack both): the kernel then sets no TSC_AUX, and the CPU is read from
    its per-CPU segment instead."""
    if how != "rseq":
        monkeypatch.setenv("USCOPE_INJECT_RSEQ", "0")
    if how == "segment":
        monkeypatch.setenv("USCOPE_INJECT_RDTSCP", "0")
    res = trace("work c=$cpu", cmd=[THREADS, 4, 50], json=True,
                extra=INJ + ["-v"]).check(rc=0)
    said = re.search(r"inject: process \d+ reads a hit's CPU (.*)", res.stderr)
    assert said, res.stderr
    if how == "rseq":
        assert said.group(1) == "from its threads' rseq areas"
    elif how == "segment":
        assert said.group(1) == "from the per-CPU segment (lsl)"
    else:
        assert "rseq" not in said.group(1)
    ncpus = os.sysconf("SC_NPROCESSORS_CONF")
    assert len(res.events) == 200
    # the record's CPU and $cpu (read a moment apart: the thread may move)
    assert all(0 <= e.cpu < ncpus and 0 <= e.args["c"] < ncpus for e in res.events), \
        sorted({(e.cpu, e.args["c"]) for e in res.events})


def test_unpatchable_function_is_refused_with_the_reason():
    # add is `lea; ret`: 4 bytes, less than the jump
    cp = run_uscope(["trace", "-e", "inject", "add", "--", ARGS, "1"])
    assert cp.returncode != 0
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, cp.stderr
    assert "add" in lines[0] and "shorter than the patch" in lines[0]
    assert "-e auto puts each site on an engine that can take it" in lines[0]


def test_process_held_by_another_tracer():
    w = Waiter()
    libc = ctypes.CDLL(None, use_errno=True)
    PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
    assert libc.ptrace(PTRACE_SEIZE, w.pid, None, None) == 0
    try:
        cp = run_uscope(["trace", "-e", "inject", "-p", w.pid, "on_line"])
    finally:
        libc.ptrace(PTRACE_DETACH, w.pid, None, None)
    assert cp.returncode != 0
    assert f"process {w.pid} is already traced by process {os.getpid()}" in cp.stderr
    w.send("still fine")
    w.close_stdin()
    assert w.wait() == 0


def test_gone_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    cp = run_uscope(["trace", "-e", "inject", "-p", p.pid, "on_line"])
    assert cp.returncode != 0
    assert cp.stderr.strip().splitlines() == [f"uscope: no such process: {p.pid}"], cp.stderr


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_no_root_for_ones_own_processes():
    # a command, and a running process of the same user, both by default (-e auto)
    cp = run_uscope(["trace", "area a=%di:s32", "--", ARGS, "2"], prefix=AS_NOBODY)
    assert cp.returncode == 0, cp.stderr
    got = [line.split("a=")[1] for line in cp.stdout.splitlines() if ": area: " in line]
    assert got == ["1", "2"], cp.stdout
    w = subprocess.Popen(AS_NOBODY + [SPIN], stdout=subprocess.PIPE, text=True)
    u.REGISTRY.targets.append(w)
    assert w.stdout.readline() == "ready\n"
    cp = run_uscope(["count", "-d", "0.5", "-p", w.pid, "tick"], prefix=AS_NOBODY)
    w.kill()
    w.wait()
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0].split() == ["PROBE", "COUNT"] and lines[1].split()[0] == "tick"
    assert int(lines[1].split()[1]) > 50    # a tick a millisecond


def test_another_users_process_is_refused():
    w = Waiter()    # root's
    cp = run_uscope(["trace", "-e", "inject", "-p", w.pid, "on_line"], prefix=AS_NOBODY)
    assert cp.returncode != 0
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("uscope: "), cp.stderr
    assert str(w.pid) in lines[0] and ("Permission denied" in lines[0] or
                                       "no permission" in lines[0]), cp.stderr
    w.send("unharmed")
    w.close_stdin()
    assert w.wait() == 0


def test_signal_handler_hits_and_exec():
    """Hits from a signal handler that interrupts the traced loop (possibly in
    the middle of a hit) are recorded or counted as lost, never corrupt; after
    exec the new image is patched at its entry point and traced too."""
    res = trace("work k=%di:s64", cmd=[target("sigexec"), "20000"], extra=INJ)
    out = res.stdout.splitlines()
    assert out[1] == "after exec", res.stdout
    main_n, handler_n = int(out[0].split()[1]), int(out[0].split()[3])
    assert main_n == 20000 and handler_n > 0
    kinds = collections.Counter(e.args["k"] for e in res.events)
    s = res.summary
    # every hit is an event or a counted loss (a hit nested in a hit)
    assert kinds[1] == main_n
    assert kinds[2] + s.lost == handler_n
    assert kinds[3] == 5
    # the kernel names the exec'd task after the file: /proc/self/exe
    assert {e.comm for e in res.events if e.args["k"] < 3} == {"sigexec"}
    assert {e.comm for e in res.events if e.args["k"] == 3} == {"exe"}
    assert len({e.pid for e in res.events}) == 1


def test_exited_threads_give_their_ring_back():
    # 400 threads over time, more than the 256 rings: all recorded
    n = 400
    res = trace("work t=%di:s32 i=%si:s32", cmd=[target("churn"), str(n)], extra=INJ,
                json=True).check(rc=0)
    u.assert_multiset([(e.args["t"], e.args["i"]) for e in res.events],
                      [(t, i) for t in range(n) for i in range(3)], "work arguments")
    assert len({e.tid for e in res.events}) == n


def test_short_return_block_through_a_springboard():
    # springy's second ret ends a 4-byte block: a 2-byte jmp to a 5-byte jmp
    # in the alignment filler after the function
    res = trace("springy x=%di:s64", "r:springy r=$retval:s64",
                cmd=[target("springy"), "4"], extra=INJ, json=True).check(rc=0, ready=3)
    assert [e.args["x"] for e in res.named("springy")] == [0, 1, 2, 3]
    assert [e.args["r"] for e in res.named("springy__return")] == [0, 2, 3, 4]
    assert res.stdout == "springy done total=9\n"


def test_process_under_seccomp_is_refused_and_auto_takes_tracefs():
    t = Target([target("seccomped")], stdin=False)
    t.expect("ready")
    cp = run_uscope(["trace", "-e", "inject", "-d", "0.3", "-p", t.pid, "tick"])
    assert cp.returncode != 0
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "seccomp" in lines[0] and "-e tracefs" in lines[0], cp.stderr
    cp = run_uscope(["count", "-d", "0.5", "-p", t.pid, "tick"])
    assert cp.returncode == 0, cp.stderr
    assert int(cp.stdout.splitlines()[1].split()[1]) > 50
    assert t.alive()


@pytest.mark.parametrize("children", [True, False])
def test_detach_after_exec_leaves_the_new_image_alone(children):
    """A non-PIE program that execs another non-PIE program: the new image's
    code sits at the addresses that were patched, and detach must not write
    the old bytes into it: the process no longer maps the image's shared
    memory (the exec dropped it), and is left alone, quietly (-p does not
    hold the process by ptrace after the attach, with or without
    --no-children: the exec is not seen as it happens)."""
    exe, other = target("waiter-nopie"), target("spin-nopie")
    w = Target([exe])
    w.expect("ready")
    bg = u.trace_bg("on_line s=$arg1:string", pid=w.pid,
                    extra=INJ + ([] if children else ["--no-children"]))
    bg.wait_ready()
    w.write("hello\n")
    w.expect("got 1")
    w.write(f"exec {other}\n")
    w.expect("ready")      # spin runs, in the same process
    bg.signal(signal.SIGINT)
    res = bg.result().check(rc=0)
    assert [e.args["s"] for e in res.events] == ["hello", f"exec {other}"]
    assert "no longer runs the code that was patched" not in res.stderr, res.stderr
    with open(other, "rb") as f:
        image = f.read()
    with open(f"/proc/{w.pid}/maps") as m:
        maps = [l.split() for l in m]
    checked = 0
    for parts in maps:
        if len(parts) >= 6 and "x" in parts[1] and parts[5] == other:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            code = read_code(w.pid, [(lo, hi, other)])[(lo, other)]
            want = image[int(parts[2], 16):int(parts[2], 16) + (hi - lo)]
            assert code[:len(want)] == want, "the new image's code was written to"
            checked += 1
    assert checked
    assert w.alive()
    w.kill()
