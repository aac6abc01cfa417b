"""Return probes on return sites: an r: probe is placed on every ret and
tail-call jmp of the function, so the stack is never touched (Go survives);
--uretprobe asks for the kernel's return-address swap instead."""

import collections

import pytest

import uscope_e2e as u
from uscope_e2e import target, trace

RET = target("retsites")
GO = target("gogrow")


def values(res, name, arg="ret"):
    return collections.Counter(e.args[arg] for e in res.events if e.event == name)


def test_go_stack_growth_survives_and_values_are_right():
    rounds = 3
    res = trace("r:main.grow ret=$retval:s64", "r:main.square ret=$retval:s64",
                cmd=[GO, str(rounds)], json=True).check(rc=0)
    # grow(k) = 1 + k(k+1)/2, called for k = 50+r down to 0 in each round
    want = collections.Counter(1 + k * (k + 1) // 2
                               for r in range(rounds) for k in range(50 + r + 1))
    assert values(res, "main.grow__return") == want
    assert values(res, "main.square__return") == collections.Counter(r * r for r in range(rounds))
    total = sum(1 + (50 + r) * (51 + r) // 2 + r * r for r in range(rounds))
    assert f"total {total}" in res.stdout


def test_return_site_events_match_the_kernels_uretprobe():
    a = trace("r:compute ret=$retval:s64", cmd=[target("args"), "4"]).check(rc=0)
    b = trace("r:compute ret=$retval:s64", cmd=[target("args"), "4"],
              extra=["--uretprobe"]).check(rc=0)
    assert [e.args["ret"] for e in a.events] == [100003 * i * 3 + 1 for i in range(1, 5)]
    assert [e.args["ret"] for e in a.events] == [e.args["ret"] for e in b.events]
    # the same return address and function offset in both (ASLR aside)
    for x, y in zip(a.events, b.events):
        assert x.type == y.type == "r"
        assert (x.ip - x.func) == (y.ip - y.func)


@pytest.mark.parametrize("engine", ["auto", "bpf"])
def test_tail_call_return_comes_at_the_callees_ret(engine):
    res = trace("p:ent tail", "r:tail ret=$retval:s32", cmd=[RET, "4"], json=True,
                extra=["-e", engine]).check(rc=0)
    entries = [e for e in res.events if e.event == "ent"]
    rets = [e for e in res.events if e.event == "tail__return"]
    assert len(entries) == len(rets) == 4
    # tail() leaves through `jmp helper`: its value is helper's, read at
    # helper's ret with tail's stack pointer
    assert [e.args["ret"] for e in rets] == [2 * (i + 1) for i in range(4)]
    assert {e.func for e in rets} == {e.ip for e in entries}


def test_tail_call_site_has_no_retval_on_tracefs():
    res = trace("p:ent tail", "r:tail ret=$retval:s32", cmd=[RET, "4"], json=True,
                extra=["-e", "tracefs"]).check(rc=0)
    rets = [e for e in res.events if e.event == "tail__return"]
    assert len(rets) == 4
    # the kernel's uprobe at `jmp helper`: the value does not exist yet
    assert all(e.args["ret"] is None for e in rets)
    warn = [l for l in res.stderr.splitlines() if "warning" in l]
    assert warn == ["uscope: warning: r:tail ret=$retval:s32: $retval is (unavailable) at 1 "
                    "tail call: the tracefs engine does not follow a tail call to its "
                    "callee's return (inject and bpf do)"], res.stderr


def test_tail_call_through_a_pointer_cannot_be_followed():
    res = trace("r:ptail ret=$retval:s32", cmd=[RET, "3"], json=True).check(rc=0)
    assert [e.args["ret"] for e in res.events] == [None] * 3
    assert "$retval is (unavailable) at 1 tail call whose callee cannot be followed" in \
        res.stderr


def test_several_ret_instructions_one_event_per_call():
    res = trace("r:multi ret=$retval:s32", cmd=[RET, "4"]).check(rc=0)
    assert [e.args["ret"] for e in res.events] == [-100, -100, 0, 10]
    assert res.summary.per_event["multi__return"][0] == 4


def test_jump_table_read_from_the_file():
    res = trace("r:jtab ret=$retval:s32", cmd=[RET, "4"]).check(rc=0)
    assert [e.args["ret"] for e in res.events] == [11, 23, 37, 41]


def test_conditional_tail_call_is_refused_with_the_reason_and_uretprobe_works():
    res = trace("r:condtail ret=$retval:s32", cmd=[RET, "4"])
    assert res.rc == 1
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "a conditional tail call" in err[0] and "--uretprobe" in err[0]
    res = trace("r:condtail ret=$retval:s32", cmd=[RET, "4"], extra=["--uretprobe"]).check(rc=0)
    assert [e.args["ret"] for e in res.events] == [5, 2, 4, 6]


def test_glob_skips_what_it_cannot_probe_and_says_so():
    res = trace("r:[cjmt]*", cmd=[RET, "2"]).check(rc=0)
    assert "skipping condtail" in res.stderr
    assert set(res.counts()) == {"jtab__return", "main__return", "multi__return", "tail__return"}
