"""uscope script: bpftrace's language, the same programs under uscope script
(on each engine: inject in the process, inject with uscope running the
program on its events, bpf, tracefs) and under bpftrace -c, on
tests/targets/scriptapp.c's calls with known arguments: the maps equal the
values the calls give, and bpftrace's."""

import collections
import os

import pytest

import script_util as s
import uscope_e2e as u

APP = s.APP

pytestmark = pytest.mark.parametrize("engine", s.ENGINE_IDS)

_BT = {}


def bt_maps(prog, cmd):
    """bpftrace's maps for the program on the command (once a session)."""
    key = (prog, tuple(cmd))
    if key not in _BT:
        _BT[key] = s.bpftrace(prog, cmd) if s.have_bpftrace() else None
    return _BT[key]


def run(prog, cmd, engine):
    r = s.script(prog, cmd, engine)
    assert r.returncode == 0, r.stderr
    return r.stdout


KEYS = f"""
uprobe:{APP}:work
{{
	@calls[arg0] = count();
	@sum[arg0] = sum(arg1);
	@min[arg0] = min(arg1);
	@max[arg0] = max(arg1);
	@avg[arg0] = avg(arg1);
	@st[arg0] = stats(arg1);
	@last[arg0] = arg1;
	if (arg1 >= 20) {{ @big++; }} else {{ @small += 1; }}
	$x = arg0 * 2 + 1;
	@pair[$x, comm] = count();
}}
uretprobe:{APP}:work /retval > 20/ {{ @ret[retval] = count(); }}
END {{ printf("end %d %s\\n", 7, "x"); }}
"""


def test_maps_keyed_by_an_argument(engine):
    """work(i % 5, i), i < 30: key k's values are k, k + 5 ... k + 25."""
    out = run(KEYS, [APP, "keys", 30], engine)
    m = s.parse_maps(out)
    for k in range(5):
        vals = [k + 5 * j for j in range(6)]
        assert m["calls"][str(k)] == "6"
        assert m["sum"][str(k)] == str(sum(vals))
        assert m["min"][str(k)] == str(k) and m["max"][str(k)] == str(k + 25)
        assert m["avg"][str(k)] == str(sum(vals) // 6)
        assert m["st"][str(k)] == f"count 6, average {sum(vals) // 6}, total {sum(vals)}"
        assert m["last"][str(k)] == str(k + 25)
        assert m["pair"][f"{2 * k + 1}, scriptapp"] == "6"
    assert m["big"][""] == "10" and m["small"][""] == "20"
    rets = collections.Counter(k + v for v in range(30) for k in [v % 5] if k + v > 20)
    assert m["ret"] == {str(r): str(c) for r, c in rets.items()}
    assert s.printf_lines(out) == ["end 7 x"]
    bt = bt_maps(KEYS, [APP, "keys", 30])
    if bt is not None:
        assert m == s.parse_maps(bt)


HISTS = f"""
uprobe:{APP}:work
{{
	@h = hist(arg1);
	@hk[arg0 % 2] = hist(arg1 * 3);
	@l = lhist(arg1, 0, 50, 10);
	@l2 = lhist(arg1, 5, 25, 5);
	@s = stats(arg1);
}}
"""


def test_hist_lhist_stats(engine):
    out = run(HISTS, [APP, "keys", 30], engine)
    m = s.parse_maps(out)
    assert m["h"][""] == (("[0]", 1), ("[1]", 1), ("[2, 4)", 2), ("[4, 8)", 4), ("[8, 16)", 8),
                          ("[16, 32)", 14))
    assert m["l"][""] == (("[0, 10)", 10), ("[10, 20)", 10), ("[20, 30)", 10))
    assert m["l2"][""] == (("(..., 5)", 5), ("[5, 10)", 5), ("[10, 15)", 5), ("[15, 20)", 5),
                           ("[20, 25)", 5), ("[25, ...)", 5))
    assert m["s"][""] == "count 30, average 14, total 435"
    assert sum(c for _, c in m["hk"]["0"]) == 18 and sum(c for _, c in m["hk"]["1"]) == 12
    bt = bt_maps(HISTS, [APP, "keys", 30])
    if bt is not None:
        assert m == s.parse_maps(bt)


LAT = f"""
uprobe:{APP}:handle /arg1 >= 300/
{{
	@start[tid] = nsecs;
	@name[tid] = str(arg0);
}}
uretprobe:{APP}:handle /@start[tid]/
{{
	@calls[@name[tid]] = count();
	@ret[@name[tid]] = sum(retval);
	@lat = hist(nsecs - @start[tid]);
	delete(@start[tid]);
	delete(@name[tid]);
}}
"""


def test_per_thread_start_end_predicate_delete(engine):
    """handle(NAMES[i % 3], 100 i), i < 9, returns 10 i: i >= 3 pass the
    predicate; every start is deleted at its return."""
    out = run(LAT, [APP, "lat", 9], engine)
    m = s.parse_maps(out)
    assert m["calls"] == {"alpha": "2", "beta": "2", "gamma": "2"}
    assert m["ret"] == {"alpha": "90", "beta": "110", "gamma": "130"}
    assert sum(c for _, c in m["lat"][""]) == 6
    assert "start" not in m and "name" not in m      # printed empty
    bt = bt_maps(LAT, [APP, "lat", 9])
    if bt is not None:
        b = s.parse_maps(bt)
        assert {k: v for k, v in m.items() if k != "lat"} == \
            {k: v for k, v in b.items() if k != "lat"}
        assert sum(c for _, c in b["lat"][""]) == 6


PRINTF = f"""
uprobe:{APP}:handle
{{
	printf("%s %d %5x|%-6s|%c|%05d|%u\\n", str(arg0), arg1, arg1, str(arg0), 65, (int32)arg1 - 500, arg1);
}}
uretprobe:{APP}:handle {{ printf("ret %d\\n", retval); }}
"""


def test_printf_lines(engine):
    out = run(PRINTF, [APP, "lat", 6], engine)
    names = ["alpha", "beta", "gamma"]
    want = []
    for i in range(6):
        n = names[i % 3]
        want.append(f"{n} {100 * i} {100 * i:5x}|{n:<6}|A|{100 * i - 500:05d}|{100 * i}")
        want.append(f"ret {10 * i}")
    got = s.printf_lines(out)
    assert got == want
    bt = bt_maps(PRINTF, [APP, "lat", 6])
    if bt is not None:
        assert s.printf_lines(bt) == want


STACK = f"""
uprobe:{APP}:leaf {{ @[ustack] = count(); }}
uprobe:{APP}:mid {{ @s[ustack(3)] = count(); }}
"""


def test_ustack_count(engine):
    if engine == "tracefs":
        pytest.skip("the tracefs engine has no $ustack (the kernel walks frame pointers)")
    out = run(STACK, [APP, "stack", 4], engine)
    m = s.parse_maps(out)

    def names(stack):
        return [f.split("+")[0] for f in stack.split(";")]
    stacks = {tuple(names(k)[:5]): v for k, v in m[""].items()}
    assert stacks == {("leaf", "mid", "outer", "round_of", "main"): "4",
                      ("leaf", "mid", "round_of", "main", "__libc_start_call_main"): "4"}
    assert {tuple(names(k)): v for k, v in m["s"].items()} == \
        {("mid", "outer", "round_of"): "4", ("mid", "round_of", "main"): "4"}


USDT = f"""
usdt:{APP}:app:req {{ @req[str(arg0)] = count(); @size = sum(arg1); }}
usdt:{APP}:app:pick {{ @pick[str(arg1)] = count(); @i = sum(arg0); }}
"""


def test_usdt_string_argument(engine):
    """app:req's name is in a register; app:pick's is loaded through an
    index register (8@(%rax,%rsi,8)), which uprobe_events cannot compute."""
    if engine == "tracefs":
        r = s.script(USDT, [APP, "usdt", 6], engine)
        assert r.returncode == 1 and "adds two registers" in r.stderr
        return
    out = run(USDT, [APP, "usdt", 6], engine)
    m = s.parse_maps(out)
    assert m["req"] == {"alpha": "2", "beta": "2", "gamma": "2"}
    assert m["size"][""] == str(100 * sum(range(6)))
    assert m["pick"] == {"alpha": "2", "beta": "2", "gamma": "2"}
    assert m["i"][""] == str(sum(range(6)))
    bt = bt_maps(USDT, [APP, "usdt", 6])
    if bt is not None:
        b = s.parse_maps(bt)
        assert b["req"] == m["req"] and b["size"] == m["size"] and b["i"] == m["i"]
        # bpftrace 0.17 reads an empty string for a USDT argument addressed
        # with an index register: it is wrong there, uscope is checked above
        assert b["pick"] in ({"": "6"}, m["pick"])


MISC = f"""
BEGIN {{ @b = 1; printf("begin\\n"); }}
uprobe:{APP}:work /arg0 == 3/
{{
	$t = (int16)(arg1 - 200);
	@neg[$t < 0] = count();
	@sh = arg1 << 2 | 1;
	@div = arg1 / 4;
	@mod = arg1 % 7;
	@tern[arg1 > 10 ? "big" : "small"] = count();
	@str[comm] = count();
	@cmp = strncmp("alphabet", "alpine", 3);
	@tuple = (arg0, "t", arg1);
	$i = 0;
	while ($i < 3) {{ $i++; @loop++; }}
	unroll(2) {{ @unroll++; }}
	@f[func] = count();
	@p[probe] = count();
	@u[usym(reg("ip"))] = count();
}}
END {{ @e = @b + 41; print(@tuple); print(@e); }}
"""


def test_language(engine):
    out = run(MISC, [APP, "keys", 20], engine)
    m = s.parse_maps(out)
    assert m["neg"] == {"1": "4"}
    assert m["sh"][""] == str((18 << 2) | 1)
    assert m["div"][""] == str(18 // 4) and m["mod"][""] == str(18 % 7)
    assert m["tern"] == {"small": "2", "big": "2"}
    assert m["str"] == {"scriptapp": "4"}
    assert m["cmp"][""] == "0"
    assert m["tuple"][""] == "(3, t, 18)"
    assert m["loop"][""] == "12" and m["unroll"][""] == "8"
    assert m["f"] == {"work": "4"}
    assert m["p"] == {f"uprobe:{APP}:work": "4"}
    assert m["u"] == {"work": "4"}
    assert m["e"][""] == "42" and m["b"][""] == "1"
    lines = s.printf_lines(out)
    assert lines == ["begin", "@tuple: (3, t, 18)", "@e: 42"]


TUPLES = f"""
uprobe:{APP}:work
{{
	$t = (arg0, "w", arg1 * 2);
	$u = $t;
	$t = ($t.2, $t.1, $t.0);
	@first[$u.0] = sum($t.0);
	@pair = $u;
	@s[$t.1] = count();
	if ($u.2 > 30) {{ printf("t %d %s %d\\n", $t.0, $t.1, $t.2); print($t); }}
}}
"""


def test_tuples_in_variables(engine):
    """$t = (a, b, c), its elements $t.0 ..., copied whole ($u = $t), its
    elements swapped ($t = ($t.2, $t.1, $t.0): all read first), stored
    whole in a map and printed whole: work(i % 5, i), i < 20."""
    out = run(TUPLES, [APP, "keys", 20], engine)
    m = s.parse_maps(out)
    assert m["first"] == {str(k): str(8 * k + 60) for k in range(5)}
    assert m["pair"][""] == "(4, w, 38)"
    assert m["s"] == {"w": "20"}
    want = []
    for i in range(16, 20):
        want += [f"t {2 * i} w {i % 5}", f"({2 * i}, w, {i % 5})"]
    assert s.printf_lines(out) == want
    bt = bt_maps(TUPLES, [APP, "keys", 20])
    if bt is not None:
        b = s.parse_maps(bt)
        assert b["first"] == m["first"] and b["pair"] == m["pair"] and b["s"] == m["s"]
        assert s.printf_lines(bt) == want


FAST = f"""
uprobe:{APP}:work {{ @s[tid] = nsecs; @c[arg0] = count(); @v[arg0] = arg1; }}
uretprobe:{APP}:work /@s[tid]/ {{ @h = hist(nsecs - @s[tid]); @n = count(); delete(@s[tid]); }}
"""


def test_integer_probes(engine):
    """Probes of integers and maps only: on inject, agent_script_fast runs
    them (stores, loads, deletes, aggregations)."""
    out = run(FAST, [APP, "keys", 30], engine)
    m = s.parse_maps(out)
    assert m["n"][""] == "30" and sum(c for _, c in m["h"][""]) == 30
    assert m["c"] == {str(k): "6" for k in range(5)}
    assert m["v"] == {str(k): str(k + 25) for k in range(5)}
    assert "s" not in m


UNITS = f"""
uprobe:{APP}:work {{ @u[tid] = arg1; @c = count(); @m = max(arg1); }}
uretprobe:{APP}:work /@u[tid]/ {{ @d = sum(uid - @u[tid]); @r = count(); delete(@u[tid]); }}
"""


def test_few_updates_and_a_stop(engine):
    """Probes of a few map updates each (run as units, no machine), the
    return's predicate, read and subtraction one fused step (a latency's
    stop, nsecs - @s[tid], here uid - @u[tid] for a value to check):
    work(i % 5, i), i < 30; i = 0 fails the predicate."""
    out = run(UNITS, [APP, "keys", 30], engine)
    m = s.parse_maps(out)
    uid = os.getuid()
    assert m["c"][""] == "30" and m["m"][""] == "29" and m["r"][""] == "29"
    assert m["d"][""] == str(sum(uid - i for i in range(1, 30)))
    assert "u" not in m


DWARF = u.target("dwarfapp-O2")
ARGS = f"""
uprobe:{DWARF}:handle
{{
	@[args->n, args->r->id, str(args->r->path)] = count();
	@flags = sum(args->flag);
	@next = max(args->r->next->id);
}}
"""


def test_args_by_name(engine):
    """args.NAME and its member chains (args->r->next->id), read through
    the debug info: handle(&r, i, i % 2, ...) with r.id 10 i, r.path
    PATHS[i % 3], r.next->id 77."""
    out = run(ARGS, [DWARF, 3], engine)
    m = s.parse_maps(out)
    assert m[""] == {"1, 10, /one": "1", "2, 20, /two": "1", "3, 30, /zero": "1"}
    assert m["flags"][""] == "2" and m["next"][""] == "77"
    bt = bt_maps(ARGS, [DWARF, 3])
    if bt is not None:
        assert m == s.parse_maps(bt)
