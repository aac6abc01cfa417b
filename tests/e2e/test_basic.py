"""Entry and return probes on the `args` target: event names, the text line
format, addresses, the readiness line and the summary."""

import re

import pytest

import uscope_e2e as u
from uscope_e2e import assert_multiset, target, trace

ARGS = target("args")
NOPIE = target("args-nopie")


def test_help_and_version():
    r = u.run_uscope(["--help"])
    assert r.returncode == 0, r.stderr
    assert "trace" in r.stdout + r.stderr and "list" in r.stdout + r.stderr
    r = u.run_uscope(["--version"])
    assert r.returncode == 0, r.stderr
    assert re.search(r"\d+\.\d+", r.stdout + r.stderr)
    for cmd in ("trace", "list"):
        r = u.run_uscope([cmd, "--help"])
        assert r.returncode == 0, (cmd, r.stderr)
        assert (r.stdout + r.stderr).strip()


def test_entry_probe_text_format():
    r = trace("add", cmd=[ARGS, 5]).check(rc=0, ready=1)
    assert r.counts() == {"add": 5}
    assert r.stdout.splitlines() == ["args done n=5 total=4501995"], \
        "COMMAND's stdout must reach uscope's stdout unchanged"
    add = u.func_addr(ARGS, "add")
    tids = {e.tid for e in r.events}
    assert len(tids) == 1
    for e in r.events:
        assert e.comm == "args"
        assert e.type == "p" and e.func is None
        assert e.args == {}, e.line
        assert e.ip & 0xFFF == add & 0xFFF, f"{e.ip:#x} is not add ({add:#x}) relocated"
        assert re.match(r"^args-\d+ \[\d{3}\] \d+\.\d{6}: add: \(0x[0-9a-f]+\)$", e.line), e.line
    assert len({e.ip for e in r.events}) == 1
    s = r.summary
    assert (s.total, s.lost) == (5, 0)
    assert s.per_event == {"add": (5, 0)}


def test_explicit_kind_and_event_name():
    r = trace("p add a=$arg1:s32", "p:myadd add b=$arg2:s32", cmd=[ARGS, 4]).check(ready=2)
    assert r.counts() == {"add": 4, "myadd": 4}
    assert_multiset([e.args["a"] for e in r.named("add")], range(1, 5))
    assert_multiset([e.args["b"] for e in r.named("myadd")], [2, 4, 6, 8])
    assert all(set(e.args) == {"a"} for e in r.named("add"))


@pytest.mark.parametrize("binary", ["args", "args-nopie"])
def test_entry_and_return(binary):
    path = target(binary)
    n = 6
    r = trace("add a=$arg1:s32 b=$arg2:s32", "r add ret=$retval:s32",
              cmd=[path, n]).check(ready=2)
    assert r.counts() == {"add": n, "add__return": n}
    assert_multiset([(e.args["a"], e.args["b"]) for e in r.named("add")],
                    [(i, 2 * i) for i in range(1, n + 1)])
    rets = r.named("add__return")
    assert_multiset([e.args["ret"] for e in rets], [3 * i for i in range(1, n + 1)])
    entry_ip = {e.ip for e in r.named("add")}
    assert len(entry_ip) == 1
    add = u.func_addr(path, "add")
    ret_site = u.call_return_addr(path, "main", "add")
    for e in rets:
        assert e.type == "r" and e.comm == binary
        assert e.func == next(iter(entry_ip)), e.line
        assert e.ip - e.func == ret_site - add, \
            f"return address {e.ip:#x}: expected the instruction after the call in main"
        assert re.match(rf"^{binary}-\d+ \[\d{{3}}\] \d+\.\d{{6}}: add__return: "
                        r"\(0x[0-9a-f]+ <- 0x[0-9a-f]+\) ret=\d+$", e.line), e.line
    if binary == "args-nopie":
        assert entry_ip == {add}
        assert {e.ip for e in rets} == {ret_site}


def test_explicit_return_event_name():
    r = trace("r:addret add $retval:s32", cmd=[ARGS, 3]).check(ready=1)
    assert r.counts() == {"addret": 3}
    assert_multiset([e.args["arg1"] for e in r.events], [3, 6, 9])


def test_probe_on_main_is_in_place_before_main():
    r = trace("main", "r main ret=$retval:s32", cmd=[ARGS, 1, 7]).check(rc=7, ready=2)
    assert r.counts() == {"main": 1, "main__return": 1}
    assert r.named("main__return")[0].args == {"ret": 7}


def test_several_functions_one_run():
    n = 3
    r = trace("add", "adjust", "area", "compute", "handle", "note", "pack", "sum3", "peek",
              cmd=[ARGS, n]).check(ready=9)
    assert r.counts() == {"add": n, "adjust": n, "area": n, "compute": n, "handle": n,
                          "note": n, "pack": n, "sum3": n, "peek": 3}
    ips = {}
    for e in r.events:
        ips.setdefault(e.event, set()).add(e.ip)
    addrs = u.nm_funcs(ARGS)
    base = {ip - addrs[name][0][0] for name, s in ips.items() for ip in s}
    assert len(base) == 1, f"functions not at one consistent load bias: {base}"
    assert next(iter(base)) % 4096 == 0
