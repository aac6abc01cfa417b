"""uscope objtrace: objects followed through the calls of tests/targets/libobj.c
(driven by objdrv), on every engine: exact events for objects made, used,
freed and an address reused, two threads, --field, --json, the set's limit
(--max-objects) reported, and the command line's mistakes."""

import json
import re

import pytest

from uscope_e2e import run_uscope, target

DRV = target("objdrv")
ENGINES = ["inject", "bpf", "tracefs"]
FROM = "r:libobj:obj_new obj=$retval"
UNTIL = "libobj:obj_free $arg1"
LINE_RE = re.compile(r"^(\S+)-(\d+) \[(\d+)\] (\d+\.\d+): (\S+): \(([^)]*)\) (.*)$")


def objtrace(engine, scenario, *extra, probes=("libobj:op_*",), until=True):
    args = ["objtrace", "-e", engine, "--from", FROM]
    if until:
        args += ["--until", UNTIL]
    return run_uscope(args + list(extra) + list(probes) + ["--", DRV, scenario])


def named(out):
    """The driver's NAME=0x... lines: {NAME: address}."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^(\w+)=(0x[0-9a-f]+)$", out, re.M)}


def addresses(out):
    """{address: the first NAME the driver gave it}"""
    names = {}
    for name, addr in named(out).items():
        names.setdefault(addr, name)
    return names


def events(cp):
    """[(tid, event, rest with the objects' addresses named)]"""
    assert cp.returncode == 0, cp.stderr
    names = addresses(cp.stdout)
    out = []
    for line in cp.stdout.splitlines():
        m = LINE_RE.match(line)
        if not m:
            continue
        rest = re.sub(r"object:(0x[0-9a-f]+)", lambda a: "object:" + names.get(a.group(1), a.group(1)),
                      m.group(7))
        out.append((int(m.group(2)), m.group(5), rest))
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_objects_made_used_freed_and_reused(engine):
    cp = objtrace(engine, "basic")
    names = named(cp.stdout)
    assert sorted(names) == ["a", "b", "c"]
    assert names["c"] == names["a"]     # freed, then given out anew
    got = [(ev, rest.replace("object:a", "object:c") if i >= 6 else rest)
           for i, (_, ev, rest) in enumerate(events(cp))]
    assert got == [
        ("obj_new__return", "object:a followed"),
        ("obj_new__return", "object:b followed"),
        ("op_use", "arg1 object:a"),
        ("op_touch", "arg2 object:b"),
        # op_peek(3, 4, 0...) passes no object: nothing
        ("op_link", "arg3 object:b"),          # b in arg3, a in arg6: the first
        ("obj_free", "object:a released"),
        # op_use(a) after its free: not followed any more
        ("obj_new__return", "object:c followed"),
        ("op_use", "arg1 object:c"),
        ("obj_free", "object:b released"),
        ("obj_free", "object:c released"),
        # op_touch(6, b) after b's free: nothing
    ]
    # a probe whose calls matched nothing has no event, on every engine
    # (tracefs records every call and uscope keeps the set: what it drops
    # is not counted either)
    peek = re.search(r"^\s+op_peek: (\d+) events, 0 lost$", cp.stderr, re.M)
    assert peek and int(peek.group(1)) == 0, cp.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_field_and_json(engine):
    cp = objtrace(engine, "basic", "--json", "--field", "8:u32")
    assert cp.returncode == 0, cp.stderr
    names = addresses(cp.stdout)    # a's address is c's too
    objs = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
    for o in objs:
        assert o["comm"] == "objdrv" and o["pid"] == o["tid"]
        assert re.fullmatch(r"0x[0-9a-f]+", o["ip"])
        assert set(o) >= {"time_ns", "cpu", "event", "type", "role", "object"}
    got = [(o["event"], o["role"], names[o["object"]], o.get("arg"), o.get("value"),
            o.get("followed")) for o in objs]
    assert got == [
        ("obj_new__return", "from", "a", None, None, True),
        ("obj_new__return", "from", "b", None, None, True),
        ("op_use", "match", "a", 1, 100, None),       # a->value: 1 * 100
        ("op_touch", "match", "b", 2, 200, None),
        ("op_link", "match", "b", 3, 200, None),
        ("obj_free", "until", "a", None, None, None),
        ("obj_new__return", "from", "a", None, None, True),   # c
        ("op_use", "match", "a", 1, 300, None),       # the new object: id 3
        ("obj_free", "until", "b", None, None, None),
        ("obj_free", "until", "a", None, None, None),
    ]
    assert [o["type"] for o in objs if o["role"] == "from"] == ["r"] * 3
    assert all("func" in o for o in objs if o["role"] == "from")


@pytest.mark.parametrize("engine", ENGINES)
def test_field_text_types(engine):
    cp = objtrace(engine, "basic", "--field", "0:s64", probes=("libobj:op_use",))
    got = [(ev, rest) for _, ev, rest in events(cp) if ev == "op_use"]
    assert got == [("op_use", "arg1 object:a value:1"), ("op_use", "arg1 object:a value:3")]
    cp = objtrace(engine, "basic", "--field", "8", probes=("libobj:op_touch",))
    got = [(ev, rest) for _, ev, rest in events(cp) if ev == "op_touch"]
    assert got == [("op_touch", "arg2 object:b value:0xc8")]


@pytest.mark.parametrize("engine", ENGINES)
def test_two_threads(engine):
    cp = objtrace(engine, "threads", "--field", "8:u32", probes=("libobj:op_use",))
    assert sorted(named(cp.stdout)) == ["t1", "t2"]
    by_tid = {}
    for tid, ev, rest in events(cp):
        by_tid.setdefault(tid, []).append((ev, rest))
    assert len(by_tid) == 2, by_tid
    seqs = sorted(by_tid.values(), key=lambda s: s[0][1])
    for n, seq in zip((1, 2), seqs):
        assert seq == [("obj_new__return", f"object:t{n} followed")] + \
            [("op_use", f"arg1 object:t{n} value:{n * 100}")] * 3 + \
            [("obj_free", f"object:t{n} released")], seq


@pytest.mark.parametrize("engine", ENGINES)
def test_set_full_is_reported(engine):
    cp = objtrace(engine, "full", "--max-objects", "1")
    got = [(ev, rest) for _, ev, rest in events(cp)]
    assert got == [
        ("obj_new__return", "object:a followed"),
        ("obj_new__return", "object:b not followed: the set is full"),
        ("op_use", "arg1 object:a"),
        # op_use(b): b was never followed
        ("obj_free", "object:a released"),
        # obj_free(b): not followed, nothing to release
    ]
    warn = [l for l in cp.stderr.splitlines() if "warning" in l]
    assert warn == [
        "uscope: warning: the set of followed objects is full (1, --max-objects): "
        f"obj_new__return's object {named(cp.stdout)['b']} "
        "is not followed, nor any new one until one is released",
        "uscope: warning: 1 object was not followed: the set was full (--max-objects 1)",
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_without_until_objects_stay_followed(engine):
    cp = objtrace(engine, "basic", probes=("libobj:op_use",), until=False)
    got = [(ev, rest) for _, ev, rest in events(cp)]
    # a stays followed after its free (no --until), and c is that address
    assert got == [("obj_new__return", "object:a followed"),
                   ("obj_new__return", "object:b followed"),
                   ("op_use", "arg1 object:a"),
                   ("op_use", "arg1 object:a"),
                   ("obj_new__return", "object:a followed"),
                   ("op_use", "arg1 object:a")]


@pytest.mark.parametrize("args,message", [
    (["libobj:op_*"],
     "uscope: objtrace: give --from PROBE: the probe whose fetch argument is an object to "
     "follow (see uscope objtrace --help)"),
    (["--from", "r:libobj:obj_new a=$retval b=$retval", "libobj:op_*"],
     "uscope: bad probe: --from takes a function probe with one fetch argument, the object's "
     "address (an integer), and no 'if'"),
    (["--from", "r:libobj:obj_new $retval:string", "libobj:op_*"],
     "uscope: bad probe: --from takes a function probe with one fetch argument, the object's "
     "address (an integer), and no 'if'"),
    (["--from", FROM, "--until", "libobj:obj_free", "libobj:op_*"],
     "uscope: bad probe: --until takes a function probe with one fetch argument, the object's "
     "address (an integer), and no 'if'"),
    (["--from", FROM, "libobj:op_use $arg1"],
     "uscope: bad probe: objtrace follows objects into function entries: no 'r:', USDT, fetch "
     "arguments nor 'if' (--field shows a value)"),
    (["--from", FROM, "r:libobj:op_use"],
     "uscope: bad probe: objtrace follows objects into function entries: no 'r:', USDT, fetch "
     "arguments nor 'if' (--field shows a value)"),
    (["--from", FROM, "--field", "x:u32", "libobj:op_*"],
     "uscope: objtrace: --field wants OFFS[:TYPE] (8, 0x10:u32, -8:s64), not 'x:u32'"
     " (see uscope objtrace --help)"),
    (["--from", FROM, "--field", "8:u33", "libobj:op_*"],
     "uscope: objtrace: --field 8:u33: expected a type: u8..u64, s8..s64, x8..x64, string, "
     "ustring, symbol or b<width>@<offset>/<size> (see uscope objtrace --help)"),
    (["--from", FROM, "--max-objects", "0", "libobj:op_*"],
     "uscope: objtrace: --max-objects wants a number of objects from 1 to 65535, not '0'"
     " (see uscope objtrace --help)"),
    (["--from", FROM, "--from", FROM, "libobj:op_*"],
     "uscope: objtrace: --from is given once (see uscope objtrace --help)"),
])
def test_command_line_mistakes(args, message):
    cp = run_uscope(["objtrace"] + args + ["--", DRV, "basic"])
    assert cp.returncode in (1, 2), cp
    assert cp.stderr.splitlines()[0] == message, cp.stderr
    assert "a=" not in cp.stdout    # COMMAND never ran
