"""Probe locations: PIE and non-PIE executables, a shared library by short
name and by path, a stripped binary by address, SYMBOL+OFFSET, globs."""

import pytest

import uscope_e2e as u
from uscope_e2e import assert_multiset, target, trace

ARGS = target("args")
LIB = target("libdemo.so")
USELIB = target("uselib")


@pytest.mark.parametrize("binary", ["args", "args-nopie"])
def test_pie_and_nopie_values(binary):
    path = target(binary)
    r = trace("add a=$arg1:s32 b=$arg2:s32", "area w=%edi:s32 h=%esi:s32",
              cmd=[path, 7]).check(ready=2)
    assert r.counts() == {"add": 7, "area": 7}
    assert_multiset([(e.args["a"], e.args["b"]) for e in r.named("add")],
                    [(i, 2 * i) for i in range(1, 8)])
    assert_multiset([(e.args["w"], e.args["h"]) for e in r.named("area")],
                    [(i, i + 1) for i in range(1, 8)])
    if binary == "args-nopie":
        assert {e.ip for e in r.named("add")} == {u.func_addr(path, "add")}
        assert {e.ip for e in r.named("area")} == {u.func_addr(path, "area")}


@pytest.mark.parametrize("module", ["libdemo", "libdemo.so", LIB])
def test_shared_library(module):
    n = 4
    r = trace(f"{module}:lib_mul a=$arg1:s32 b=$arg2:s32",
              f"r {module}:lib_mul ret=$retval:s32", cmd=[USELIB, n]).check(ready=2)
    assert r.stdout.splitlines() == ["uselib done n=4 total=40"]
    assert r.counts() == {"lib_mul": n, "lib_mul__return": n}
    assert_multiset([(e.args["a"], e.args["b"]) for e in r.named("lib_mul")],
                    [(i, i + 1) for i in range(1, n + 1)])
    assert_multiset([e.args["ret"] for e in r.named("lib_mul__return")],
                    [i * (i + 1) for i in range(1, n + 1)])
    lib_mul = u.func_addr(LIB, "lib_mul")
    for e in r.named("lib_mul"):
        assert e.comm == "uselib"
        assert e.ip & 0xFFF == lib_mul & 0xFFF
    for e in r.named("lib_mul__return"):
        assert e.func & 0xFFF == lib_mul & 0xFFF


def test_stripped_binary_by_address():
    stripped = target("args-stripped")
    dyn = [l.split()[-1] for l in u._run(["nm", "-D", stripped]).splitlines() if l.strip()]
    assert "add" not in dyn
    add = u.func_addr(ARGS, "add")       # same addresses as the unstripped copy
    n = 3
    r = trace(f"p:byhex {add:#x} a=%di:s32 b=%si:s32", f"p:bydec {add} a=$arg1:s32",
              f"p:byoct 0{add:o} a=$arg1:s32", cmd=[stripped, n]).check(ready=3)
    assert r.counts() == {"byhex": n, "bydec": n, "byoct": n}
    assert_multiset([(e.args["a"], e.args["b"]) for e in r.named("byhex")],
                    [(i, 2 * i) for i in range(1, n + 1)])
    for name in ("bydec", "byoct"):
        assert_multiset([e.args["a"] for e in r.named(name)], range(1, n + 1))
    for e in r.events:
        assert e.comm == "args-stripped"
        assert e.ip & 0xFFF == add & 0xFFF


def test_address_probe_nopie_is_exact():
    nopie = target("args-nopie")
    area = u.func_addr(nopie, "area")
    r = trace(f"p:at {area:#x} w=%di:s32", f"r:at_ret {area:#x} v=$retval:s32",
              cmd=[nopie, 2]).check(ready=2)
    assert [e.ip for e in r.named("at")] == [area, area]
    assert_multiset([e.args["w"] for e in r.named("at")], [1, 2])
    assert [e.func for e in r.named("at_ret")] == [area, area]
    assert {e.ip for e in r.named("at_ret")} == {u.call_return_addr(nopie, "main", "area")}
    assert_multiset([e.args["v"] for e in r.named("at_ret")], [2, 6])


def _boundary_and_mid():
    offs = u.insn_offsets(ARGS, "add")
    assert len(offs) >= 2, offs
    boundary = offs[1][0]
    first_long = next(o for o, ln in offs if ln > 1)
    return boundary, first_long + 1


def test_symbol_plus_offset():
    boundary, _ = _boundary_and_mid()
    # add is `lea (%rdi,%rsi,1),%eax; ret`: at the second instruction %rdi and
    # %rsi still hold the arguments and %eax holds the sum.
    r = trace("p:entry add", f"p:inside add+{boundary:#x} a=%di:s32 b=%si:s32 sum=%eax:s32",
              f"p:inside_dec add+{boundary} a=%di:s32", cmd=[ARGS, 4]).check(ready=3)
    assert r.counts() == {"entry": 4, "inside": 4, "inside_dec": 4}
    entry = {e.ip for e in r.named("entry")}
    assert len(entry) == 1
    assert {e.ip for e in r.named("inside")} == {next(iter(entry)) + boundary}
    assert {e.ip for e in r.named("inside_dec")} == {next(iter(entry)) + boundary}
    assert_multiset([(e.args["a"], e.args["b"], e.args["sum"]) for e in r.named("inside")],
                    [(i, 2 * i, 3 * i) for i in range(1, 5)])


def test_symbol_plus_offset_mid_instruction_refused():
    _, mid = _boundary_and_mid()
    r = u.run_uscope(["trace", f"p:mid add+{mid}", "--", ARGS, 1])
    assert r.returncode == 1, r.stderr
    lines = u.error_lines(r.stderr)
    assert lines and lines[0].startswith("uscope: "), r.stderr
    assert "args done" not in r.stdout


def test_glob_entry():
    n = 3
    r = trace("a*", cmd=[ARGS, n]).check(ready=3)
    assert set(r.counts()) == {"add", "adjust", "area"}
    assert r.counts() == {"add": n, "adjust": n, "area": n}
    assert set(r.summary.per_event) == {"add", "adjust", "area"}


def test_glob_with_args_and_return():
    n = 3
    r = trace("a* x=$arg1:s32", "r ar?a v=$retval:s32", cmd=[ARGS, n]).check(ready=4)
    assert r.counts() == {"add": n, "adjust": n, "area": n, "area__return": n}
    exp = {"add": [i for i in range(1, n + 1)], "adjust": [-i for i in range(1, n + 1)],
           "area": [i for i in range(1, n + 1)]}
    for name, vals in exp.items():
        assert_multiset([e.args["x"] for e in r.named(name)], vals, name)
    assert_multiset([e.args["v"] for e in r.named("area__return")],
                    [i * (i + 1) for i in range(1, n + 1)])


def test_glob_in_library():
    r = trace("libdemo:lib_*", cmd=[USELIB, 2]).check(ready=1)
    assert r.counts() == {"lib_mul": 2}
