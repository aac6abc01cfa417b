"""Fetch arguments: registers and their aliases, $argN, dereferences, strings,
types (signed, unsigned, hex, bitfields), $stack, $comm, @ADDR, @+OFFSET.
Every value is computed from what tests/targets/args.c does."""

import pytest

import uscope_e2e as u
from uscope_e2e import ARGS_MAGIC, ARGS_PATHS, assert_multiset, target, trace

ARGS = target("args")
NOPIE = target("args-nopie")
N = 5


def xs(n=N):
    return [100003 * i for i in range(1, n + 1)]


def test_registers_and_aliases_at_entry():
    r = trace("compute r=%rdi:s64 x=%rdi e=%edi d=%di dl=%di:u16 ue=%edi:u32",
              cmd=[ARGS, N]).check(ready=1)
    assert r.counts() == {"compute": N}
    assert_multiset([tuple(sorted(e.args.items())) for e in r.events],
                    [tuple(sorted({"r": x, "x": hex(x), "e": hex(x & 0xFFFFFFFF),
                                   "d": hex(x & 0xFFFF), "dl": x & 0xFFFF,
                                   "ue": x & 0xFFFFFFFF}.items())) for x in xs()])


def test_register_aliases_at_return():
    r = trace("r compute rax=%rax eax=%eax ax=%ax al=%al ret=$retval:s64 u8=%al:u8",
              cmd=[ARGS, N]).check(ready=1)
    assert r.counts() == {"compute__return": N}
    exp = []
    for x in xs():
        v = 3 * x + 1
        exp.append((hex(v), hex(v & 0xFFFFFFFF), hex(v & 0xFFFF), hex(v & 0xFF), v, v & 0xFF))
    assert_multiset([(e.args["rax"], e.args["eax"], e.args["ax"], e.args["al"],
                      e.args["ret"], e.args["u8"]) for e in r.events], exp)
    for e in r.events:
        assert e.raw["al"].startswith("0x") and e.raw["al"] == e.raw["al"].lower()


def test_argn_default_names_and_types():
    # default names are by position among the fetchargs, default type x64
    r = trace("compute $arg1", "add $arg2:s32 a=$arg1:s32 $arg2:u32", cmd=[ARGS, N]).check(ready=2)
    assert_multiset([e.args["arg1"] for e in r.named("compute")], [hex(x) for x in xs()])
    adds = r.named("add")
    assert all(set(e.args) == {"arg1", "a", "arg3"} for e in adds), adds[0].line
    assert_multiset([(e.args["arg1"], e.args["a"], e.args["arg3"]) for e in adds],
                    [(2 * i, i, 2 * i) for i in range(1, N + 1)])


def test_argn_same_as_registers():
    r = trace("area w=$arg1:s32 h=$arg2:s32 rw=%edi:s32 rh=%esi:s32 rh16=%si:s16",
              cmd=[ARGS, N]).check(ready=1)
    for e in r.events:
        assert e.args["w"] == e.args["rw"]
        assert e.args["h"] == e.args["rh"] == e.args["rh16"] == e.args["w"] + 1
    assert_multiset([e.args["w"] for e in r.events], range(1, N + 1))


def test_signed_unsigned_hex():
    r = trace("adjust s=$arg1:s32 u=$arg1:u32 x=$arg1:x32 s8=%di:s8 b=$arg1:s8 "
              "u8=$arg1:u8 x8=$arg1:x8 s16=$arg1:s16 u16=$arg1:u16 x16=%di:x16",
              "r adjust ret=$retval:s32 hex=$retval:x32",
              cmd=[ARGS, N]).check(ready=2)
    got = sorted((e.args["s"], e.args["u"], e.args["x"], e.args["b"], e.args["u8"],
                  e.args["x8"], e.args["s16"], e.args["u16"], e.args["x16"])
                 for e in r.named("adjust"))
    exp = sorted((-i, 2**32 - i, hex(2**32 - i), -i, 256 - i, hex(256 - i), -i,
                  65536 - i, hex(65536 - i)) for i in range(1, N + 1))
    assert got == exp
    assert_multiset([e.args["s8"] for e in r.named("adjust")], [-i for i in range(1, N + 1)])
    assert_multiset([(e.args["ret"], e.args["hex"]) for e in r.named("adjust__return")],
                    [(-i - 1, hex(2**32 - i - 1)) for i in range(1, N + 1)])
    e = [e for e in r.named("adjust") if e.args["s"] == -1][0]
    assert e.raw["x"] == "0xffffffff" and e.raw["u"] == "4294967295" and e.raw["s"] == "-1"


def test_dereference_struct_fields():
    r = trace("handle id=+0($arg1):s32 path=+0(+8($arg1)):string size=+16($arg1):s64 "
              "up=+0(+8(%rdi)):ustring p=+8($arg1)",
              cmd=[ARGS, N]).check(ready=1)
    exp = [(i, ARGS_PATHS[i % 3], 1000 * i, ARGS_PATHS[i % 3]) for i in range(1, N + 1)]
    assert_multiset([(e.args["id"], e.args["path"], e.args["size"], e.args["up"])
                     for e in r.events], exp)
    for e in r.events:
        assert e.args["p"].startswith("0x") and int(e.args["p"], 16) != 0


def test_negative_offsets():
    r = trace("sum3 prev=-8($arg1):s64 cur=+0($arg1):s64 next=+8($arg1):s64 "
              "pp=-0x8($arg1):s64 nn=+0x8(%rdi):s64", cmd=[ARGS, N]).check(ready=1)
    assert_multiset([(e.args["prev"], e.args["cur"], e.args["next"], e.args["pp"],
                      e.args["nn"]) for e in r.events],
                    [(i, 10 * i, 100 * i, i, 100 * i) for i in range(1, N + 1)])


def test_string_shorthand():
    r = trace("note $arg1:string", "p:named_note note m=$arg1:string",
              cmd=[ARGS, N]).check(ready=2)
    assert_multiset([e.args["arg1"] for e in r.named("note")],
                    [f"note {i}" for i in range(1, N + 1)])
    assert_multiset([e.args["m"] for e in r.named("named_note")],
                    [f"note {i}" for i in range(1, N + 1)])
    assert all(e.raw["arg1"] == f'"{e.args["arg1"]}"' for e in r.named("note"))


def test_string_escapes_in_text():
    r = trace("handle path=+0(+8($arg1)):string id=+0($arg1):s32", cmd=[ARGS, 3]).check()
    raw = {e.args["id"]: e.raw["path"] for e in r.events}
    assert raw == {1: '"/tmp/with space"', 2: r'"tab\there \"q\"\\"', 3: '"/etc/hosts"'}


def test_unreadable_string_is_fault():
    r = trace("peek s=$arg1:string", cmd=[ARGS, 1]).check(ready=1)
    assert sorted(e.raw["s"] for e in r.events) == ['"ok"', "(fault)", "(null)"]
    assert_multiset([e.args["s"] for e in r.events], [None, "ok", None])


@pytest.mark.parametrize("engine", ["tracefs", "bpf", "inject"])
def test_null_string_is_null_not_a_fault(engine):
    """peek((char *)1), peek("ok"), peek(NULL): a bad pointer is (fault), a
    NULL one (null); both JSON null."""
    r = trace("peek s=$arg1:string", cmd=[ARGS, 1], extra=["-e", engine]).check(rc=0)
    assert [e.raw["s"] for e in r.named("peek")] == ["(fault)", '"ok"', "(null)"]
    j = trace("peek s=$arg1:string", cmd=[ARGS, 1], json=True,
              extra=["-e", engine]).check(rc=0)
    assert [e.args["s"] for e in j.named("peek")] == [None, "ok", None]


def test_bitfields():
    r = trace("pack lo=$arg1:b3@0/32 mid=$arg1:b5@3/32 hi=%edi:b8@8/32 "
              "smid=+0($arg2):b5@3/32 top=+0($arg2):b16@16/32 w=+2($arg2):b8@0/16",
              cmd=[ARGS, N]).check(ready=1)
    assert_multiset([(e.args["lo"], e.args["mid"], e.args["hi"], e.args["smid"],
                      e.args["top"], e.args["w"]) for e in r.events],
                    [(5, i, 0xAB, i, 7 * i, 7 * i) for i in range(1, N + 1)])
    for e in r.events:
        assert e.raw["hi"] == "171"   # bitfields print in decimal


def test_comm_and_stack():
    r = trace("add c=$comm:string ra=$stack0 sp=$stack", cmd=[NOPIE, 3]).check(ready=1)
    ret_site = u.call_return_addr(NOPIE, "main", "add")
    for e in r.events:
        assert e.args["c"] == "args-nopie"
        assert int(e.args["ra"], 16) == ret_site
        assert int(e.args["sp"], 16) % 16 == 8, "at entry %rsp is 8 mod 16 (SysV)"


def test_absolute_address_nopie():
    g_iter = u.nm_addr(NOPIE, "g_iter")
    g_magic = u.nm_addr(NOPIE, "g_magic")
    r = trace(f"add it=@{g_iter:#x}:s64 m=@{g_magic:#x}:x64 a=$arg1:s32", cmd=[NOPIE, N]).check()
    assert_multiset([(e.args["it"], e.args["m"], e.args["a"]) for e in r.events],
                    [(i, hex(ARGS_MAGIC), i) for i in range(1, N + 1)])


@pytest.mark.parametrize("binary", ["args", "args-nopie"])
def test_file_offset_fetch(binary):
    path = target(binary)
    off = u.file_offset(path, u.nm_addr(path, "g_magic"))
    r = trace(f"note m=@+{off:#x}:x64 d=@+{off}:u64", cmd=[path, 2]).check(ready=1)
    assert [(e.args["m"], e.args["d"]) for e in r.events] == [(hex(ARGS_MAGIC), ARGS_MAGIC)] * 2
