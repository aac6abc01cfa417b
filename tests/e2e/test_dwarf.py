"""Arguments by name from debug info: parameters, struct fields through
pointers, char arrays and char pointers as strings, globals, $params; at -O0
and -O2, and with the DWARF in a separate file (.gnu_debuglink)."""

from pathlib import Path

import pytest

from uscope_e2e import run_uscope, target, trace

BUILDS = ["dwarfapp-O0", "dwarfapp-O2", "dwarfapp-split"]
N = 3
PATHS = ["/zero", "/one", "/two"]


def col(res, name):
    return [e.args[name] for e in res.events]


@pytest.mark.parametrize("build", BUILDS)
def test_fields_strings_and_globals_by_name(build):
    res = trace("handle r->id r->tag r->path r->size r->next->id n flag c g_counter",
                cmd=[target(build), str(N)], json=True).check(rc=0)
    assert res.counts() == {"handle": N}
    assert col(res, "r_id") == [10 * i for i in range(1, N + 1)]
    assert col(res, "r_tag") == [f"t{i}" for i in range(1, N + 1)]
    assert col(res, "r_path") == [PATHS[i % 3] for i in range(1, N + 1)]
    assert col(res, "r_size") == [1000 * i for i in range(1, N + 1)]
    assert col(res, "r_next_id") == [77] * N
    assert col(res, "n") == list(range(1, N + 1))
    assert col(res, "flag") == [i % 2 for i in range(1, N + 1)]
    assert col(res, "c") == [5 if i % 3 else 0 for i in range(1, N + 1)]
    assert col(res, "g_counter") == list(range(1, N + 1))


@pytest.mark.parametrize("build", ["dwarfapp-O0", "dwarfapp-O2"])
def test_bpf_engine_lowers_the_same_names(build):
    res = trace("handle id=r->id n flag size=r->size g_counter",
                cmd=[target(build), str(N)], json=True, extra=["-e", "bpf"]).check(rc=0)
    assert col(res, "id") == [10 * i for i in range(1, N + 1)]
    assert col(res, "n") == list(range(1, N + 1))
    assert col(res, "size") == [1000 * i for i in range(1, N + 1)]
    assert col(res, "g_counter") == list(range(1, N + 1))


def test_params_and_type_override():
    res = trace("handle $params", "p:h2 handle n:x8 p=r->path:x64",
                cmd=[target("dwarfapp-O0"), str(N)], json=True).check(rc=0)
    ev = [e for e in res.events if e.event == "handle"]
    assert list(ev[0].args) == ["r", "n", "flag", "c"]
    assert [e.args["n"] for e in ev] == list(range(1, N + 1))
    assert all(isinstance(e.args["r"], str) and e.args["r"].startswith("0x") for e in ev)
    h2 = [e for e in res.events if e.event == "h2"]
    assert [e.args["n"] for e in h2] == [hex(i) for i in range(1, N + 1)]


def test_unknown_variable_and_member_name_what_exists():
    cp = run_uscope(["trace", "handle zz", "--", target("dwarfapp-O0"), "1"])
    assert cp.returncode == 1
    line = cp.stderr.strip().splitlines()[-1]
    assert "zz" in line and "r" in line and "flag" in line
    cp = run_uscope(["trace", "handle r->nope", "--", target("dwarfapp-O0"), "1"])
    assert cp.returncode == 1
    line = cp.stderr.strip().splitlines()[-1]
    assert "nope" in line and "path" in line and "size" in line


def test_no_debug_info_is_a_clear_error():
    cp = run_uscope(["trace", "add r->x", "--", target("args-nodebug"), "1"])
    assert cp.returncode == 1
    assert "debug info" in cp.stderr


# --------------------------------------------------------------------------
# Source lines: FILE:LINE and FUNCTION:+N

SRC = Path(__file__).resolve().parents[1] / "targets" / "dwarfapp.c"


def marker_line(tag):
    for n, text in enumerate(SRC.read_text().splitlines(), 1):
        if f"LINE:{tag}" in text:
            return n
    raise AssertionError(f"no marker {tag}")


def decl_line(func):
    for n, text in enumerate(SRC.read_text().splitlines(), 1):
        if f" {func}(" in text and not text[:1].isspace():
            return n
    raise AssertionError(f"no {func}")


def expected_v(i):
    return 1000 * i + i + i % 2 + (5 if i % 3 else 0) + 77


@pytest.mark.parametrize("build", ["dwarfapp-O0", "dwarfapp-split"])
def test_file_line_probe_sees_locals(build):
    line = marker_line("v-computed")
    res = trace(f"dwarfapp.c:{line} v n", cmd=[target(build), str(N)], json=True).check(rc=0)
    assert {e.event for e in res.events} == {f"dwarfapp.c:{line}"}
    assert [(e.args["n"], e.args["v"]) for e in res.events] == \
        [(i, expected_v(i)) for i in range(1, N + 1)]


def test_function_relative_line():
    line = marker_line("v-computed")
    rel = line - decl_line("handle")
    res = trace(f"handle:+{rel} v", cmd=[target("dwarfapp-O0"), str(N)], json=True).check(rc=0)
    assert [e.args["v"] for e in res.events] == [expected_v(i) for i in range(1, N + 1)]


def test_line_without_code_names_the_next_one():
    cp = run_uscope(["trace", "dwarfapp.c:1", "--", target("dwarfapp-O0"), "1"])
    assert cp.returncode == 1
    assert "no code at dwarfapp.c:1" in cp.stderr


# --------------------------------------------------------------------------
# Discovery: list --lines, list --vars

def test_list_lines_numbers_the_probeable_lines():
    cp = run_uscope(["list", "--lines", "handle", target("dwarfapp-O0")])
    assert cp.returncode == 0
    numbered = [int(l.split()[0]) for l in cp.stdout.splitlines()[1:] if l[:7].strip()]
    v = marker_line("v-computed")
    assert v in numbered and v + 1 in numbered     # the asm line and the return
    assert decl_line("handle") not in numbered      # the declaration has no code
    assert all(decl_line("handle") < n <= v + 2 for n in numbered)


@pytest.mark.parametrize("build", ["dwarfapp-O0", "dwarfapp-O2", "dwarfapp-split"])
def test_list_vars_at_a_function_and_a_line(build):
    for loc in ("handle", f"dwarfapp.c:{marker_line('v-computed')}"):
        cp = run_uscope(["list", "--vars", loc, target(build)])
        assert cp.returncode == 0, cp.stderr
        rows = {l.split()[-1] if "(parameter)" not in l else l.split()[-2]: l
                for l in cp.stdout.splitlines()[1:]}
        assert set(rows) >= {"r", "n", "flag", "c"}
        assert "struct req *" in rows["r"] and "(parameter)" in rows["r"]
        assert "enum color" in rows["c"]
