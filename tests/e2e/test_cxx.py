"""C++ names (demangled in list, labels and symbolization; probes by
demangled name, by signature, by glob, or mangled) and inlined copies of
functions (every copy probed, one label; --no-inlines; r: skips them)."""

import pytest

from uscope_e2e import run_uscope, target, trace

N = 3
CXX = ["cxxapp-O0", "cxxapp-O2"]
ADD1 = "shop::Cart::add(int)"
ADD2 = "shop::Cart::add(int, int)"
ADDS = "shop::Cart::add(char const*)"


def col(res, label, name):
    return [e.args[name] for e in res.events if e.event == label]


@pytest.mark.parametrize("build", CXX)
def test_method_by_signature_with_args_by_name(build):
    res = trace("shop::Cart::add(int, int) price qty", "shop::Cart::add(char const*) name",
                cmd=[target(build), str(N)], json=True).check(rc=0)
    assert res.counts() == {ADD2: N, ADDS: N}
    assert col(res, ADD2, "price") == list(range(1, N + 1))
    assert col(res, ADD2, "qty") == [2 * i for i in range(1, N + 1)]
    assert col(res, ADDS, "name") == ["x"] * N


@pytest.mark.parametrize("build", CXX)
def test_glob_probes_every_overload(build):
    res = trace("shop::Cart::add*", cmd=[target(build), str(N)], json=True).check(rc=0)
    assert res.counts() == {ADD1: N, ADD2: N, ADDS: N}


def test_ambiguous_overload_is_an_error_listing_the_signatures():
    cp = run_uscope(["trace", "shop::Cart::add", "--", target("cxxapp-O0"), "1"])
    assert cp.returncode == 1
    line = cp.stderr.strip().splitlines()[-1]
    assert "overloaded" in line
    for sig in (ADD1, ADD2, ADDS):
        assert sig in line
    assert "shop::Cart::add*" in line


def test_template_and_mangled_names_and_bpf_engine():
    res = trace("shop::twice<long> v", "_ZN4shop4Cart3addEi price",
                cmd=[target("cxxapp-O0"), str(N)], json=True,
                extra=["-e", "bpf"]).check(rc=0)
    assert res.counts() == {"shop::twice<long>(long)": N, ADD1: N}
    assert col(res, "shop::twice<long>(long)", "v") == [10 * i for i in range(1, N + 1)]
    assert col(res, ADD1, "price") == list(range(1, N + 1))


def test_return_value_and_text_output_show_demangled_names():
    cp = run_uscope(["trace", "r:shop::twice<int>(int) $retval:s32", "--",
                     target("cxxapp-O2"), str(N)])
    assert cp.returncode == 0, cp.stderr
    lines = [ln for ln in cp.stdout.splitlines() if "__return" in ln]
    assert len(lines) == N
    assert all(": shop::twice<int>(int)__return: (" in ln for ln in lines)
    assert [int(ln.rsplit("=", 1)[1]) for ln in lines] == [2 * i for i in range(1, N + 1)]
    assert "shop::twice<int>(int)__return: 3 events, 0 lost" in cp.stderr


def test_unknown_name_suggests_demangled_names():
    cp = run_uscope(["trace", "shop::Cart::ad", "--", target("cxxapp-O0"), "1"])
    assert cp.returncode == 1
    line = cp.stderr.strip().splitlines()[-1]
    assert "did you mean" in line and ADD1 in line


def test_list_demangles_and_matches_demangled_globs():
    cp = run_uscope(["list", target("cxxapp-O0"), "shop::*"])
    assert cp.returncode == 0, cp.stderr
    names = cp.stdout.splitlines()
    assert names == sorted(set(names), key=names.index)   # C1/C2 constructors once
    for n in (ADD1, ADD2, ADDS, "shop::Cart::Cart(int)", "shop::twice<int>(int)",
              "shop::twice<long>(long)"):
        assert n in names
    cp = run_uscope(["list", "-v", target("cxxapp-O0"), "shop::Cart::add(int*"])
    rows = cp.stdout.splitlines()
    assert len(rows) == 2 and all("shop::Cart::add(int" in r for r in rows)
    assert any(r.endswith("[_ZN4shop4Cart3addEi]") for r in rows)


# --------------------------------------------------------------------------
# Inlined copies (inl.c, -O2): scale() is inlined into step_a and step_b and
# also called out of line through a pointer; tick() exists only inlined.

def test_inlined_copies_all_hit_with_one_label():
    res = trace("scale", "tick", cmd=[target("inl"), str(N)], json=True).check(rc=0, ready=5)
    assert res.counts() == {"scale": 3 * N, "tick": 2 * N}
    assert len({e.ip for e in res.events if e.event == "scale"}) == 3


def test_no_inlines_probes_the_out_of_line_copy_only():
    res = trace("scale", cmd=[target("inl"), str(N)], json=True,
                extra=["--no-inlines"]).check(rc=0, ready=1)
    assert res.counts() == {"scale": N}


def test_inlined_copies_with_the_bpf_engine_and_count():
    res = trace("scale", cmd=[target("inl"), str(N)], json=True,
                extra=["-e", "bpf"]).check(rc=0, ready=3)
    assert res.counts() == {"scale": 3 * N}
    cp = run_uscope(["count", "scale", "tick", "--", target("inl"), str(N)])
    assert cp.returncode == 0, cp.stderr
    rows = dict(ln.split() for ln in cp.stdout.splitlines()
                if len(ln.split()) == 2 and ln.split()[1].isdigit())
    assert rows == {"scale": str(3 * N), "tick": str(2 * N)}


def test_inlined_copy_argument_or_skip_with_a_warning():
    # in step_a the copy's v is i (a register); in step_b it is i + 100,
    # a computed value: that copy is skipped, saying why
    res = trace("scale v", cmd=[target("inl"), str(N)], json=True).check(rc=0, ready=2)
    assert "skipping the copy of scale inlined at inl.c:" in res.stderr
    vs = sorted(e.args["v"] for e in res.events)
    assert vs == sorted(list(range(1, N + 1)) + [1000 + i for i in range(1, N + 1)])


def test_return_probe_skips_inlined_copies_with_a_note():
    res = trace("r:scale", cmd=[target("inl"), str(N)], json=True).check(rc=0)
    assert res.counts() == {"scale__return": N}
    assert "inlined at 2 places" in res.stderr
    cp = run_uscope(["trace", "r:tick", "--", target("inl"), "1"])
    assert cp.returncode == 1
    assert "no out-of-line copy" in cp.stderr
