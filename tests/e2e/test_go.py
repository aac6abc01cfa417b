"""Go programs: functions of stripped binaries from Go's .gopclntab (the
target built with -ldflags='-s -w', and Debian's own stripped gofmt), Go's
compressed DWARF without .debug_aranges, register-passed parameters, Go
values in several registers (strings, slices, interfaces) shown as Go shows
them, $argN/$retvalN by Go's register ABI and $goid, on every engine."""

import re
import subprocess
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import run_uscope, target, trace

GO = target("goctl")                   # unstripped: .symtab, compressed DWARF
GO_STRIPPED = target("goctl-stripped")  # -s -w: only .gopclntab
GOFMT = "/usr/lib/go-1.19/bin/gofmt"    # Debian's golang-1.19-go, stripped
MAIN_FUNCS = ["main.(*Controller).syncDeployment", "main.(*roundError).Error", "main.add",
              "main.check", "main.divmod", "main.goid", "main.main", "main.main.func1",
              "main.scale", "main.step", "main.tally", "main.worker"]
ENGINES = ["inject", "bpf", "tracefs"]


def count_table(stdout):
    """uscope count's last PROBE/COUNT table -> {probe: count}."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("PROBE"):
            rows = {}
        elif re.match(r"^\S+\s+\d+$", line):
            name, n = line.split()
            rows[name] = int(n)
    return rows


def expected_rounds(n):
    """(add's a, b), step's i and syncDeployment's result, round by round
    (tests/targets/goctl/main.go)."""
    total, rows = 0, []
    for i in range(1, n + 1):
        a, b = total, 3 * i
        total = a + b
        sync = len(f"deploy-{i}") + i * i      # c.syncs == i
        total += sync
        rows.append((a, b, i, sync))
    return rows, total


def round_totals(n):
    """total after each round's step: what divmod(total, 7) gets."""
    rows, _ = expected_rounds(n)
    return [a + b + sync for a, b, _, sync in rows]


def worker_goid(stdout):
    m = re.search(r"^worker goroutine (\d+)$", stdout, re.M)
    assert m, stdout
    return int(m.group(1))


def list_v(binary, pattern=None):
    cp = run_uscope(["list", "-v", binary] + ([pattern] if pattern else []))
    assert cp.returncode == 0, cp.stderr
    out = {}
    for line in cp.stdout.splitlines():
        addr, size, _off, name = line.split(None, 3)
        out[name] = (int(addr, 16), int(size, 16))
    return out


GROW = target("gogrow")


@pytest.mark.parametrize("engine", ENGINES)
def test_one_hit_a_call_where_the_stack_grows_at_the_entry(engine):
    """tests/targets/gogrow: grow recurses with 4 KiB frames on a new
    goroutine per round, so its stack check fails at grow's entry several
    times a round: runtime.morestack copies the stack and starts grow over
    from its entry. The probe sits past the check: one hit a call, and
    grow's argument as at the entry (50+r down to 0, round by round)."""
    rounds = 4
    cp = run_uscope(["count", "--json", "-e", engine, "main.grow", "main.square", "--", GROW,
                     str(rounds)], timeout=120)
    assert cp.returncode == 0, cp.stderr
    rows = {o["probe"]: o["count"] for o in u.json_lines(cp.stdout) if o.get("final")}
    assert rows == {"main.grow": sum(51 + r for r in range(rounds)), "main.square": rounds}
    res = trace("main.grow n=$arg1:s64", cmd=[GROW, "2"], extra=["-e", engine])
    assert [e.args["n"] for e in res.named("main.grow")] == \
        list(range(50, -1, -1)) + list(range(51, -1, -1))


def test_stripped_target_has_no_symtab_yet_lists_its_functions():
    secs = subprocess.run(["readelf", "-SW", GO_STRIPPED], capture_output=True,
                          text=True).stdout
    assert ".symtab" not in secs and ".debug_info" not in secs and ".gopclntab" in secs
    got = list_v(GO_STRIPPED)
    assert len(got) > 1000
    # main's functions where nm finds them in the unstripped build, with
    # their sizes
    ref = u.nm_funcs(GO)
    for name in MAIN_FUNCS:
        assert got[name] == ref[name][0], f"{name}: {got[name]} vs nm {ref[name]}"
    for name in ["runtime.main", "fmt.Fprintln", "strconv.FormatInt"]:
        assert name in got


def test_glob_on_the_stripped_target():
    cp = run_uscope(["list", GO_STRIPPED, "main.*"])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split("\n")[:-1] == MAIN_FUNCS
    # a glob in a probe: every match counted, exactly
    cp = run_uscope(["count", "main.s*", "--", GO_STRIPPED, "4"])
    assert cp.returncode == 0, cp.stderr
    assert count_table(cp.stdout) == {"main.scale": 4, "main.step": 4}
    assert f"total {expected_rounds(4)[1]} syncs 4" in cp.stdout


@pytest.mark.parametrize("engine", [None, "tracefs"])
def test_count_on_the_stripped_target_is_exact(engine):
    extra = ["-e", engine] if engine else []
    cp = run_uscope(["count"] + extra + ["main.add", "main.(*Controller).syncDeployment",
                                          "--", GO_STRIPPED, "7"])
    assert cp.returncode == 0, cp.stderr
    assert count_table(cp.stdout) == {"main.add": 7, "main.(*Controller).syncDeployment": 7}
    assert f"total {expected_rounds(7)[1]} syncs 7" in cp.stdout


def test_debians_stripped_gofmt_lists_its_functions():
    cp = run_uscope(["list", GOFMT])
    assert cp.returncode == 0, cp.stderr
    names = set(cp.stdout.split("\n")[:-1])
    assert len(names) > 2000
    for name in ["main.main", "main.gofmtMain", "main.processFile",
                 "go/parser.ParseFile", "go/printer.(*printer).print",
                 "go/printer.(*Config).fprint", "go/scanner.(*Scanner).Scan", "go/ast.Walk",
                 "runtime.main"]:
        assert name in names, name
    cp = run_uscope(["list", GOFMT, "go/parser.Parse*"])
    assert cp.returncode == 0, cp.stderr
    assert "go/parser.ParseFile" in cp.stdout.split("\n")


def test_count_in_gofmt_formatting_files(tmp_path):
    files = []
    for k in range(3):
        f = tmp_path / f"f{k}.go"
        f.write_text(f"package p\nfunc  f{k}( ) {{  }}\n")
        files.append(str(f))
    cp = run_uscope(["count", f"{GOFMT}:main.main", "main.processFile", "go/parser.ParseFile",
                     "--", GOFMT, "-l"] + files)
    assert cp.returncode == 0, cp.stderr
    # one main, one processFile and one ParseFile per file
    assert count_table(cp.stdout) == {"main.main": 1, "main.processFile": 3,
                                      "go/parser.ParseFile": 3}
    # gofmt -l: the files it would change, untouched by the probes
    assert sorted(l for l in cp.stdout.splitlines() if l.endswith(".go")) == files


def test_go_debug_info_is_compressed_and_has_no_aranges():
    """What the DWARF tests below rely on (Go >= 1.11, no .debug_aranges)."""
    secs = subprocess.run(["readelf", "-SW", GO], capture_output=True, text=True).stdout
    info = [l for l in secs.splitlines() if ".debug_info" in l]
    assert info and re.search(r"\sC\s", info[0]), info
    assert ".debug_aranges" not in secs


@pytest.mark.parametrize("engine", [None, "tracefs"])
def test_params_of_go_functions_in_registers(engine):
    n = 4
    rows, total = expected_rounds(n)
    res = trace("main.add $params", "main.step $params",
                "main.(*Controller).syncDeployment replicas c", cmd=[GO, str(n)], json=True,
                extra=["-e", engine] if engine else []).check(rc=0)
    assert f"total {total} syncs {n}" in res.stdout
    adds = [(e.args["a"], e.args["b"]) for e in res.named("main.add")]
    assert adds == [(a, b) for a, b, _, _ in rows]
    # no result (~r0) among the parameters
    assert all(set(e.args) == {"a", "b"} for e in res.named("main.add"))
    steps = res.named("main.step")
    syncs = res.named("main.(*Controller).syncDeployment")
    assert [e.args["i"] for e in steps] == list(range(1, n + 1))
    assert [e.args["replicas"] for e in syncs] == list(range(1, n + 1))
    # one Controller: the pointer step gets is the receiver syncDeployment has
    ptrs = {e.args["c"] for e in steps} | {e.args["c"] for e in syncs}
    assert len(ptrs) == 1 and int(ptrs.pop(), 16) != 0


@pytest.mark.parametrize("engine", ENGINES)
def test_go_strings_slices_interfaces_by_name(engine):
    """Values in several registers, as Go shows them: a string (rbx, rcx), a
    slice (rax, rbx, rcx), an error and an any (two words each), and *c's
    fields (a string among them, in memory)."""
    n = 4
    res = trace("main.(*Controller).syncDeployment $params", "main.tally $params",
                "main.check $params", "main.(*Controller).syncDeployment p=*c",
                cmd=[GO, str(n)], json=True, extra=["-e", engine]).check(rc=0)
    syncs = [o["args"] for o in res.objects if o["event"].endswith("syncDeployment")]
    assert [(a["key"], a["replicas"]) for a in syncs if "key" in a] == \
        [(f"deploy-{i}", i) for i in range(1, n + 1)]
    assert [a["p"] for a in syncs if "p" in a] == \
        [{"name": "ctl", "syncs": i - 1} for i in range(1, n + 1)]
    # the parts (key__len ...) are not shown on their own
    assert all(set(a) in ({"c", "key", "replicas"}, {"p"}) for a in syncs)
    tallies = [o["args"] for o in res.objects if o["event"] == "main.tally"]
    assert tallies == [{"xs": [k * k for k in range(1, min(i, 4) + 1)], "label": "round"}
                       for i in range(1, n + 1)]
    checks = [o["args"] for o in res.objects if o["event"] == "main.check"]
    assert len(checks) == n
    for i, a in enumerate(checks, 1):
        if i % 2:
            assert a["err"] is None
        else:
            assert a["err"]["type"] == "*main.roundError" and int(a["err"]["data"], 16)
        assert a["v"]["type"] == "int" and int(a["v"]["data"], 16)


@pytest.mark.parametrize("engine", ENGINES)
def test_go_values_in_text(engine):
    n = 5
    res = trace("main.tally $params", "main.check err", "main.(*Controller).syncDeployment key",
                cmd=[GO, str(n)], extra=["-e", engine])
    # a slice's text has spaces, which the e2e text parser does not split on
    assert res.rc == 0 and res.summary.total == 3 * n, res.describe()
    lines = [l.split(": ", 2)[2] for l in res.output.splitlines() if ": main." in l]
    tally = [re.sub(r"^\(0x[0-9a-f]+\) ", "", l) for l in lines if "xs=" in l]
    assert tally == ['xs=[]int{len=1 cap=2: 1} label="round"',
                     'xs=[]int{len=2 cap=3: 1, 4} label="round"',
                     'xs=[]int{len=3 cap=4: 1, 4, 9} label="round"',
                     'xs=[]int{len=4 cap=5: 1, 4, 9, 16} label="round"',
                     'xs=[]int{len=5 cap=6: 1, 4, 9, 16, ...} label="round"']
    errs = [re.sub(r"\(0x[0-9a-f]+\)", "(PTR)", l.split(") ", 1)[1]) for l in lines
            if "err=" in l]
    assert errs == ["err=nil", "err=*main.roundError(PTR)"] * 2 + ["err=nil"]
    keys = [l.split(") ", 1)[1] for l in lines if "key=" in l]
    assert keys == [f'key="deploy-{i}"' for i in range(1, n + 1)]


def test_a_go_string_is_whole_not_by_member():
    cp = run_uscope(["trace", "main.(*Controller).syncDeployment key.len", "--", GO, "1"])
    assert cp.returncode != 0
    assert "'key' is in registers, in pieces: uscope fetches it whole" in cp.stderr


@pytest.mark.parametrize("binary", [GO, GO_STRIPPED])
@pytest.mark.parametrize("engine", ENGINES)
def test_go_register_abi_args_results_and_goid(binary, engine):
    """$argN by Go's register ABI (rax, rbx, rcx, rdi...: a method's receiver
    first, a string two words), $retval/$retval2 of a two-result function,
    $goid from R14's g: 1 on the main goroutine, the worker's own id on its
    goroutine (from DWARF unstripped, from the Go 1.19 table stripped);
    $argN:string a Go string, its length the next word (no NUL after it)."""
    n = 3
    res = trace("main.divmod a=$arg1:s64 b=$arg2:s64 g=$goid",
                "r:main.divmod q=$retval:s64 r=$retval2:s64",
                "main.worker w=$arg1:s64 g=$goid",
                "main.(*Controller).syncDeployment klen=$arg3:s64 replicas=$arg4:s64 "
                "key=+0($arg2):u8 ks=$arg2:string",
                cmd=[binary, str(n)], json=True, extra=["-e", engine]).check(rc=0)
    totals = round_totals(n)
    assert [(o["args"]["a"], o["args"]["b"], o["args"]["g"]) for o in res.objects
            if o["event"] == "main.divmod"] == [(t, 7, 1) for t in totals]
    assert [(o["args"]["q"], o["args"]["r"]) for o in res.objects
            if o["event"] == "main.divmod__return"] == [(t // 7, t % 7) for t in totals]
    assert [(o["args"]["w"], o["args"]["g"]) for o in res.objects
            if o["event"] == "main.worker"] == [(n, worker_goid(res.stdout))]
    assert worker_goid(res.stdout) != 1
    assert [(o["args"]["klen"], o["args"]["replicas"], o["args"]["key"], o["args"]["ks"])
            for o in res.objects if o["event"].endswith("syncDeployment")] == \
        [(len(f"deploy-{i}"), i, ord("d"), f"deploy-{i}") for i in range(1, n + 1)]


def test_go_only_variables_on_c_are_refused():
    cp = run_uscope(["trace", "main $goid", "--", target("args")])
    assert cp.returncode != 0 and "$goid: works on Go programs only" in cp.stderr
    cp = run_uscope(["trace", "main $arg7", "--", target("args")])
    assert cp.returncode != 0
    assert "$argN takes N from 1 to 6 on a C function (9 on a Go one)" in cp.stderr
    cp = run_uscope(["trace", "main $retval2", "--", target("args")])
    assert cp.returncode != 0 and "$retval needs a return probe" in cp.stderr


def test_list_vars_shows_go_parameters_not_results():
    cp = run_uscope(["list", "--vars", "main.add", GO])
    assert cp.returncode == 0, cp.stderr
    lines = [l.split() for l in cp.stdout.splitlines()[1:]]
    assert ["int", "a", "(parameter)"] in lines and ["int", "b", "(parameter)"] in lines
    assert ["int", "~r0"] in lines


def test_zdebug_sections_of_older_go(tmp_path):
    """Go 1.11-era .zdebug_* sections (zlib-gnu) read the same."""
    z = tmp_path / "goctl-zdebug"
    plain = tmp_path / "plain"
    subprocess.run(["objcopy", "--decompress-debug-sections", GO, str(plain)], check=True)
    subprocess.run(["objcopy", "--compress-debug-sections=zlib-gnu", str(plain), str(z)],
                   check=True)
    secs = subprocess.run(["readelf", "-SW", str(z)], capture_output=True, text=True).stdout
    assert ".zdebug_info" in secs
    res = trace("main.add $params", cmd=[str(z), "2"], extra=["-e", "tracefs"]).check(rc=0)
    rows, _ = expected_rounds(2)
    assert [(e.args["a"], e.args["b"]) for e in res.events] == [(a, b) for a, b, _, _ in rows]


@pytest.mark.parametrize("binary", [GO, GO_STRIPPED])
def test_events_are_labelled_with_the_go_name(binary):
    """Not the kernel's event name (main_Controller_syncDeployment): Go's own,
    in text, in JSON, for a glob, an offset and a return."""
    n = 2
    res = trace("main.(*Controller).sync*", "main.step+0x4", "r:main.add",
                cmd=[binary, str(n)], labels=True).check(rc=0)
    assert [e.event for e in res.events] == [
        "main.add__return", "main.step+0x4", "main.(*Controller).syncDeployment"] * n
    res = trace("main.(*Controller).syncDeployment", cmd=[binary, str(n)], json=True).check(rc=0)
    assert [o["event"] for o in res.objects] == ["main.(*Controller).syncDeployment"] * n


# --------------------------------------------------------------------------
# $ustack of a stripped Go program across cgo calls

GOCGO = target("gocgo")                   # cgo both ways (tests/targets/gocgo)
GOCGO_STRIPPED = target("gocgo-stripped")  # -s -w: C keeps .eh_frame, Go has no CFI


def unabi(name):
    """A Go name without the .abi0 Go's linker gives an assembly function in
    .symtab, which Go's function table does not record."""
    return name[:-len(".abi0")] if name and name.endswith(".abi0") else name


def cgo_stacks(binary, engine, n=3):
    """{probe: [[(sym, off, file, line), ...] per hit]} of cLeaf (C called
    from Go) and main.goCallback (Go called from C), and each stack's end."""
    res = trace("cLeaf $ustack", "main.goCallback $ustack", cmd=[binary, str(n)], json=True,
                extra=["-e", engine], timeout=120).check(rc=0)
    assert f"callbacks {n}" in res.stdout, res.describe()
    out = {}
    for name in ("cLeaf", "main.goCallback"):
        hits = res.named(name)
        assert len(hits) == n, res.describe()
        out[name] = [([(unabi(f["sym"]), f["off"], f["file"], f["line"])
                       for f in e.args["ustack"] if "end" not in f],
                      [f["end"] for f in e.args["ustack"] if "end" in f]) for e in hits]
    return out


def go_source_line(path, text):
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.startswith(text):
                return i
    raise AssertionError(f"{text!r} not in {path}")


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_ustack_across_cgo_stripped_as_unstripped(engine):
    """A stripped cgo program: C's frames walk by its .eh_frame, Go's by
    .gopclntab's pcsp tables, frame for frame as the unstripped build's
    CFI walks them, as far as CFI can: Go called from C (through crosscall2
    and cgocallback) up to the runtime's switch back from the system stack,
    C called from Go up to asmcgocall's switch to it (the word it leaves
    there is no return address: not compared). Go's frames are named from
    the table, with main.go's lines."""
    plain, stripped = cgo_stacks(GOCGO, engine), cgo_stacks(GOCGO_STRIPPED, engine)
    src = str(Path(__file__).resolve().parents[1] / "targets" / "gocgo" / "main.go")
    for (pf, pend), (sf, send) in zip(plain["main.goCallback"], stripped["main.goCallback"]):
        assert [f[:2] for f in sf] == [f[:2] for f in pf], (sf, pf)
        assert [f[0] for f in sf[:6]] == [
            "main.goCallback", sf[1][0], "runtime.cgocallbackg1", "runtime.cgocallbackg",
            "runtime.cgocallbackg", "runtime.cgocallback"], sf
        assert sf[1][0].startswith("_cgoexp_") and sf[1][0].endswith("_goCallback"), sf
        assert len(send) == 1 and send[0].startswith("no CFI for ") and len(pend) == 1, send
        assert sf[0][2].endswith("/gocgo/main.go") and \
            sf[0][3] == go_source_line(src, "\tcallbacks++"), sf     # a leaf: no prologue
    for (pf, _), (sf, _) in zip(plain["cLeaf"], stripped["cLeaf"]):
        assert [f[:2] for f in sf[:3]] == [f[:2] for f in pf[:3]], (sf, pf)
        assert sf[0][:2] == ("cLeaf", 0) and sf[1][0].endswith("_Cfunc_cLeaf") and \
            sf[2][0] == "runtime.asmcgocall", sf
        assert sf[0][2] is None and sf[2][2].endswith("/runtime/asm_amd64.s"), sf
