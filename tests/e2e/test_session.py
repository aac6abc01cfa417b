"""One session, several engines: each site on the fastest engine that can
take it (inject, then bpf, then tracefs), one event stream in time order;
return probes through tail calls; the inject engine following COMMAND's
forks and execs; the bpf engine reading memory nobody touched yet."""

import json
import re

import pytest

import uscope_e2e as u
from uscope_e2e import run_uscope, target, trace

ARGS = target("args")
TAIL = target("tailcall")
FORKER = target("forker")
USDT_STRIPPED = target("usdt-stripped")
COLD = target("coldstr")


def count_json(args):
    """uscope count --json ... -> ({label: count}, stderr)"""
    cp = run_uscope(["count", "--json"] + [str(a) for a in args])
    assert cp.returncode == 0, cp.stderr
    rows = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
    assert rows and all(r["final"] for r in rows), cp.stdout
    return {r["probe"]: r["count"] for r in rows}, cp.stderr


def engines_line(stderr, probe):
    """The readiness report's line for a probe: {engine: sites}."""
    for line in stderr.splitlines():
        if line.startswith(f"uscope: {probe}: ") and " on " in line:
            return {m.group(2): int(m.group(1))
                    for m in re.finditer(r"(\d+) sites? on (\w+)", line)}
    return None


# --------------------------------------------------------------------------
# Mixed engines

def test_glob_splits_across_engines_with_the_kernel_engines_counts():
    """add() and adjust() are 4 bytes (lea; ret): the inject engine cannot
    patch them, nor crtstuff's functions (symbols without a size, no
    call-frame entry); bpf takes those; every other function of args stays in
    process. The counts are exactly tracefs's."""
    glob = f"{ARGS}:[a-z]*"
    mixed, err = count_json(["-v", glob, "--", ARGS, "5"])
    alone, _ = count_json(["-e", "tracefs", glob, "--", ARGS, "5"])
    assert mixed == alone
    assert mixed["add"] == 5 and mixed["area"] == 5 and mixed["main"] == 1
    split = engines_line(err, glob)
    assert split == {"bpf": 5, "inject": 8}, err
    # why add left the inject engine, with -v
    assert re.search(r"uscope:   add at 0x[0-9a-f]+: on bpf: function shorter than the patch",
                     err), err


def test_mixed_events_in_one_stream_in_time_order():
    res = trace("add a=%di:s32", "area w=%di:s32", "compute x=%di:s64",
                cmd=[ARGS, "4"], json=True, extra=["-v"]).check(rc=0, ready=3)
    # add on bpf, the others on inject: one stream, in the program's order
    assert [(e.event, list(e.args.values())[0]) for e in res.events] == \
        [(ev, v) for i in range(1, 5)
         for ev, v in (("add", i), ("area", i), ("compute", 100003 * i))]
    times = [e.time for e in res.events]
    assert times == sorted(times)
    assert engines_line(res.stderr, "add a=%di:s32") == {"bpf": 1}
    assert engines_line(res.stderr, "area w=%di:s32") == {"inject": 1}


def test_inject_alone_skips_a_globs_unpatchable_functions_in_one_line():
    cp = run_uscope(["count", "-e", "inject", f"{ARGS}:[a-z]*", "--", ARGS, "3"])
    assert cp.returncode == 0, cp.stderr
    warn = [l for l in cp.stderr.splitlines() if "warning" in l]
    assert len(warn) == 1, cp.stderr
    assert re.search(r"skipping 5 of its functions that inject cannot probe: 3 no known "
                     r"function bounds around it to check the patch against, 2 function "
                     r"shorter than the patch$", warn[0]), warn[0]
    counts = dict(l.split() for l in cp.stdout.splitlines()[1:])
    assert "add" not in counts and "adjust" not in counts and counts["area"] == "3"


def test_usdt_sites_of_a_stripped_binary_on_inject():
    """No symbol surrounds these sites: the function around each comes from
    its call-frame entry (.eh_frame)."""
    res = trace("%app:tick i=$arg1 t=$arg2", "%app:msg s=$arg1:string", cmd=[USDT_STRIPPED, "3"],
                extra=["-e", "inject"], labels=True).check(rc=0)
    assert [(e.args["i"], e.args["t"]) for e in res.named("app:tick")] == \
        [(i, 10 * i) for i in range(3)]
    assert [e.args["s"] for e in res.named("app:msg")] == ["hello", "with space",
                                                            "third message"]


# --------------------------------------------------------------------------
# Return values through tail calls

@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_tail_calls_chain_and_recursion_return_values(engine):
    """chain1 is `jmp leaf`, chain2 `jmp chain1` (two tail calls), even and
    odd call each other by tail calls: every return is delivered at leaf's
    ret, with leaf's value; a recursive chain returns every call it made."""
    res = trace("r:chain1 r=$retval:s64", "r:chain2 r=$retval:s64", "r:even r=$retval:s64",
                cmd=[TAIL, "4"], json=True, extra=["-e", engine]).check(rc=0)
    leaf = lambda x: x * 3 + 7
    got = [(e.event, e.args["r"]) for e in res.events]
    want = []
    for i in range(1, 5):
        want.append(("chain1__return", leaf(i + 1)))
        # chain2(i) runs chain1(2i), which returns with it: both at leaf's ret
        want += [("chain1__return", leaf(2 * i + 1)), ("chain2__return", leaf(2 * i + 1))]
        # even(i) -> odd(i-1) -> even(i-2)...: even is entered i//2 + 1 times
        want += [("even__return", leaf(100 if i % 2 == 0 else 200))] * (i // 2 + 1)
    assert got == want
    assert res.stdout.strip() == f"tailcall done {sum_tailcall(4)}"


def sum_tailcall(n):
    leaf = lambda x: x * 3 + 7
    return sum(leaf(i + 1) + leaf(2 * i + 1) + leaf(100 if i % 2 == 0 else 200)
               for i in range(1, n + 1))


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_tail_call_durations_end_at_the_real_return(engine):
    """leaf sleeps 2 ms: at the jmp, a return would take a few microseconds."""
    fl = u.flow("chain1", "chain2", cmd=[TAIL, "3"], json=True,
                extra=["-e", engine]).check(rc=0)
    rets = [l for l in fl.lines if l.dir == "<-"]
    assert [l.function for l in rets] == ["chain1", "chain1", "chain2"] * 3
    assert all(l.duration_ns >= 2_000_000 for l in rets), [l.duration_ns for l in rets]
    # chain2 and the chain1 it tail-calls return together, at leaf's ret
    for k in range(3):
        inner, outer = rets[3 * k + 1], rets[3 * k + 2]
        assert abs(inner.time_us - outer.time_us) < 50 and inner.depth == outer.depth + 1


# --------------------------------------------------------------------------
# Following the program

def test_inject_follows_a_shell_that_runs_the_program_twice(tmp_path):
    script = f"{ARGS} 2; {ARGS} 3"
    res = trace(f"{ARGS}:area w=%di:s32", cmd=["/bin/sh", "-c", script], json=True,
                extra=["-e", "inject"]).check(rc=0)
    by_pid = {}
    for e in res.events:
        by_pid.setdefault(e.pid, []).append(e.args["w"])
    assert sorted(by_pid.values()) == [[1, 2], [1, 2, 3]]
    assert {e.comm for e in res.events} == {"args"}


def test_inject_follows_forked_children():
    """forker forks 3 children that call work(100..102), and calls work(0..2)
    on two threads."""
    res = trace("work v=%di:s32", cmd=[FORKER], json=True, extra=["-e", "inject"],
                input="go\n").check(rc=0)
    values = sorted(e.args["v"] for e in res.events)
    assert values == [0, 0, 1, 1, 2, 2, 100, 101, 102]
    parent = {e.pid for e in res.events if e.args["v"] < 100}
    children = {e.pid for e in res.events if e.args["v"] >= 100}
    assert len(parent) == 1 and len(children) == 3 and not parent & children


# --------------------------------------------------------------------------
# The bpf engine reads memory nobody touched yet

def test_bpf_reads_a_string_first_touched_by_the_probe():
    res = trace("report s=$arg1:string", cmd=[COLD], extra=["-e", "bpf"]).check(rc=0)
    assert [e.args["s"] for e in res.events] == [
        "the first cold string", "the second cold string", "the third cold string",
        "the fourth cold string"]


def test_without_page_faults_the_same_strings_are_faults():
    """What the sleepable program is for: the non-sleepable one, which the
    engine uses only where the kernel has no sleepable uprobes, cannot read
    them. (This also shows the strings really are untouched.)"""
    cp = run_uscope(["trace", "-e", "bpf", "report s=$arg1:string", "--", COLD],
                    env={"USCOPE_BPF_SLEEPABLE": "0"})
    assert cp.returncode == 0, cp.stderr
    events, _ = u.parse_text(cp.stdout)
    assert [e.args["s"] for e in events] == [None] * 4


# --------------------------------------------------------------------------
# -p TID

@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_p_of_a_thread_traces_its_process_and_ends_with_it(engine):
    """-p names a thread, not its process: the process is traced (said with
    -v), and the run ends when the process exits (a pidfd is a process's)."""
    t = u.Target([target("chaos"), "thread"])
    m = re.fullmatch(r"ready tid=(\d+)", t.readline())
    assert m, "chaos thread did not say its thread id"
    tid = int(m.group(1))
    assert tid != t.pid
    bg = u.Background(["count", "-v", "-e", engine, "-p", tid, "work"])
    bg.wait_ready()
    t.write("\n")
    t.expect(f"thread done sum={sum(3 * i + 1 for i in range(100))}")
    t.close_stdin()
    assert t.wait() == 0
    res = bg.result()           # ends by itself, the process gone
    assert res.rc == 0, res.stderr
    assert f"uscope: -p {tid} is a thread of process {t.pid}: tracing the process\n" \
        in res.stderr
    assert f"uscope: process {t.pid} exited with status 0\n" in res.stderr
    assert res.stdout.split()[-2:] == ["work", "100"], res.stdout
