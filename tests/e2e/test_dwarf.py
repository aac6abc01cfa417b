"""Arguments by name from debug info: parameters, struct fields through
pointers, char arrays and char pointers as strings, globals, $params; at -O0
and -O2, and with the DWARF in a separate file (.gnu_debuglink)."""

import re
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
    assert col(res, "c") == ["GREEN" if i % 3 else "RED" for i in range(1, N + 1)]
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


# --------------------------------------------------------------------------
# Where debug info comes from: /usr/lib/debug/.build-id, and debuginfod

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request


def build_id(path):
    out = subprocess.check_output(["readelf", "-n", path], text=True)
    return next(l.split()[-1] for l in out.splitlines() if "Build ID" in l)


def nodebug_copy(d):
    """A copy of dwarfapp-O0 without DWARF, and its DWARF apart."""
    full = target("dwarfapp-O0")
    app, dbg = os.path.join(d, "app"), os.path.join(d, "app.debug")
    subprocess.check_call(["objcopy", "--only-keep-debug", full, dbg])
    subprocess.check_call(["objcopy", "--strip-debug", full, app])
    return app, dbg


def check_handle(cp):
    assert cp.returncode == 0, cp.stderr
    lines = [l for l in cp.stdout.splitlines() if ": handle: " in l]
    assert [l.split("r_id=")[1] for l in lines] == ["10", "20"]


def test_separate_debug_file_by_build_id():
    with tempfile.TemporaryDirectory() as d:
        app, dbg = nodebug_copy(d)
        bid = build_id(app)
        dest = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
        made = [p for p in ("/usr/lib/debug", "/usr/lib/debug/.build-id", os.path.dirname(dest))
                if not os.path.isdir(p)]
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(dbg, dest)
        try:
            check_handle(run_uscope(["trace", "-o", "/dev/stdout", "handle r->id", "--", app, "2"]))
        finally:
            os.unlink(dest)
            for p in reversed(made):    # leave the system as it was
                os.rmdir(p)


def test_debuginfod_on_loopback():
    with tempfile.TemporaryDirectory() as d:
        app, dbg = nodebug_copy(d)
        srv = os.path.join(d, "srv")
        os.mkdir(srv)
        shutil.move(dbg, srv)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen(["debuginfod", "-F", srv, "-p", str(port),
                                   "-d", os.path.join(d, "db.sqlite")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.time() + 30
            while True:     # until it has scanned the directory
                try:
                    urllib.request.urlopen(f"{url}/buildid/{build_id(app)}/debuginfo", timeout=2)
                    break
                except Exception:
                    assert time.time() < deadline, "debuginfod did not serve the debug file"
                    time.sleep(0.3)
            env = ["env", f"DEBUGINFOD_URLS={url}",
                   f"DEBUGINFOD_CACHE_PATH={os.path.join(d, 'cache')}"]
            # without the server: no debug info
            cp = run_uscope(["trace", "handle r->id", "--", app, "2"])
            assert cp.returncode == 1 and "no debug info" in cp.stderr
            check_handle(run_uscope(["trace", "-o", "/dev/stdout", "handle r->id", "--", app, "2"],
                                    prefix=env))
        finally:
            server.terminate()
            server.wait(timeout=10)


def test_bare_retval_takes_the_functions_return_type():
    res = trace("r:handle $retval", cmd=[target("dwarfapp-O0"), str(N)], json=True).check(rc=0)
    assert [e.args["arg1"] for e in res.events] == [expected_v(i) for i in range(1, N + 1)]
    # no debug info: the default x64
    res = trace("r:handle $retval", cmd=[target("args-nodebug"), "2"], json=True).check(rc=0)
    assert [e.args["arg1"] for e in res.events] == ["0x8", "0x9"]


# --------------------------------------------------------------------------
# How DWARF types show: enums by name, bools, a struct whole, <optimized out>

ENGINES = ["tracefs", "bpf"]
# run_job(&j, verbose, m, s) for i = 1, 2, 3 (see dwarfapp.c)
MODES = ["M_READ", "M_READ|M_EXEC", "M_READ|0x8"]
STATES = ["RUNNING", "DONE", 3]
JOBS = [{"name": f"job{i}", "state": STATES[i - 1], "urgent": bool(i % 2),
         "mode": MODES[i - 1], "span": "{...}", "prio": "[...]"} for i in (1, 2, 3)]


def args_text(res, event):
    """The text after '(ADDRESS) ' of each line of the event (or of the
    events EVENT_*: the sites of a line probe that names its event)."""
    pat = re.compile(rf": {event}(_\w+)?: \(")
    return [l.split(") ", 1)[1] for l in res.output.splitlines() if pat.search(l)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("build", ["dwarfapp-O0", "dwarfapp-O2"])
def test_enums_bools_and_a_struct_whole(build, engine):
    res = trace("run_job *j verbose m s", "r:job_done $retval",
                cmd=[target(build), "3"], json=True, extra=["-e", engine]).check(rc=0)
    ev = res.named("run_job")
    assert [e.args for e in ev] == [
        {"j": JOBS[i], "verbose": bool((i + 1) % 2), "m": MODES[i], "s": STATES[i]}
        for i in range(3)]
    assert [e.args["arg1"] for e in res.named("job_done__return")] == [False, True, False]
    # the same in text
    res = trace("run_job *j verbose m s", "r:job_done $retval",
                cmd=[target(build), "3"], extra=["-e", engine]).check(rc=0)
    assert args_text(res, "run_job") == [
        'j={name="job1" state=RUNNING urgent=true mode=M_READ span={...} prio=[...]} '
        'verbose=true m=M_READ s=RUNNING',
        'j={name="job2" state=DONE urgent=false mode=M_READ|M_EXEC span={...} prio=[...]} '
        'verbose=false m=M_READ|M_EXEC s=DONE',
        'j={name="job3" state=3 urgent=true mode=M_READ|0x8 span={...} prio=[...]} '
        'verbose=true m=M_READ|0x8 s=3']
    assert args_text(res, "job_done__return") == ["arg1=false", "arg1=true", "arg1=false"]


def test_type_overrides_the_names():
    res = trace("run_job s:s32 v=verbose:u8 st=j->state",
                cmd=[target("dwarfapp-O0"), "2"], json=True).check(rc=0)
    assert [(e.args["s"], e.args["v"], e.args["st"]) for e in res.events] == \
        [(2, 1, "RUNNING"), (7, 0, "DONE")]


def test_a_struct_takes_no_type():
    cp = run_uscope(["trace", "run_job *j:u32", "--", target("dwarfapp-O0"), "1"])
    assert cp.returncode == 1
    assert "a struct takes no :TYPE; pick a member" in cp.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_optimized_out_where_a_site_lacks_the_value(engine):
    """twice() is inlined into keep_k and drop_k: its line has two sites. At
    -O2, k lives on in keep_k only; at -O0 it is everywhere."""
    line = marker_line("twice-call")
    for build, dropped in (("dwarfapp-O0", None), ("dwarfapp-O2", "<optimized out>")):
        res = trace(f"p:twice dwarfapp.c:{line} k use", cmd=[target(build), "2"],
                    extra=["-e", engine]).check(rc=0)
        want = []
        for i in (1, 2):
            want += [f"k={10 * i} use=1", f"k={dropped or 20 * i} use=0"]
        assert args_text(res, "twice") == want, build
    res = trace(f"dwarfapp.c:{line} k", cmd=[target("dwarfapp-O2"), "1"], json=True,
                extra=["-e", engine]).check(rc=0)
    assert [e.args["k"] for e in res.events] == [10, None]


def line_addrs_in(build, line, func):
    """Link-time addresses of the statements of dwarfapp.c:LINE inside FUNC."""
    path = target(build)
    start, size = next((int(f[0], 16), int(f[1], 16))
                       for f in (l.split() for l in subprocess.check_output(
                           ["nm", "-S", path], text=True).splitlines())
                       if len(f) == 4 and f[3] == func)
    out = subprocess.check_output(["readelf", "--debug-dump=decodedline", path], text=True)
    addrs = set()
    for l in out.splitlines():
        f = l.split()
        if len(f) >= 4 and f[0] == "dwarfapp.c" and f[1] == str(line) and f[-1] == "x":
            a = int(f[2], 16)
            if start <= a < start + size:
                addrs.add(a)
    return sorted(addrs)


def test_optimized_out_at_every_site_is_an_error():
    """The site in drop_k alone, by address: k is optimized out at all of its
    (one) sites, so the probe is refused, naming k and where."""
    line = marker_line("twice-call")
    addrs = line_addrs_in("dwarfapp-O2", line, "drop_k")
    assert len(addrs) == 1
    cp = run_uscope(["trace", f"{hex(addrs[0])} k", "--", target("dwarfapp-O2"), "1"])
    assert cp.returncode == 1
    assert f"'k' is optimized out at {hex(addrs[0])}" in cp.stderr
    assert "in drop_k" in cp.stderr
    # at -O0 the same site has it
    addrs = line_addrs_in("dwarfapp-O0", line, "drop_k")
    res = trace(f"{hex(addrs[0])} k", cmd=[target("dwarfapp-O0"), "1"], json=True).check(rc=0)
    assert [e.args["k"] for e in res.events] == [20]


def func_addr(build, func):
    return next(int(f[0], 16) for f in (l.split() for l in subprocess.check_output(
        ["nm", target(build)], text=True).splitlines()) if len(f) == 3 and f[2] == func)


@pytest.mark.parametrize("engine", ["tracefs", "bpf", "inject"])
def test_o2_leaf_reads_its_parameter_at_the_entry(engine):
    """At -O2 req_size is `mov 0x18(%rdi),%edi; jmp sink`: after its first
    instruction r is gone, at its entry r is %rdi. The probe goes to the entry;
    at -O0 it stays after the prologue, where r is in its frame slot."""
    for build in ("dwarfapp-O2", "dwarfapp-O0"):
        res = trace("req_size r->size r->id", "p:all req_size $params",
                    cmd=[target(build), str(N)], json=True,
                    extra=["-e", engine]).check(rc=0)
        ev = res.named("req_size")
        assert [(e.args["r_size"], e.args["r_id"]) for e in ev] == [
            (1000 * i, 10 * i) for i in range(1, N + 1)], build
        entry = func_addr(build, "req_size")
        if build == "dwarfapp-O2":
            assert {e.ip & 0xfff for e in ev} == {entry & 0xfff}
        else:
            assert {e.ip & 0xfff for e in ev} != {entry & 0xfff}
        assert [list(e.args) for e in res.named("all")] == [["r"]] * N


def test_readable_after_the_prologue_stays_there():
    """spare(a) at -O2 sets up a frame first; a is still in %rdi after it."""
    res = trace("spare a", cmd=[target("dwarfapp-O2"), str(N)], json=True).check(rc=0)
    ev = res.named("spare")
    assert [e.args["a"] for e in ev] == list(range(1, N + 1))
    assert {e.ip & 0xfff for e in ev} != {func_addr("dwarfapp-O2", "spare") & 0xfff}


def test_readable_neither_after_the_prologue_nor_at_the_entry_is_refused():
    cp = run_uscope(["trace", "spare lost", "--", target("dwarfapp-O2"), "1"])
    assert cp.returncode == 1
    assert re.search(r"spare lost: lost: 'lost' is optimized out at 0x[0-9a-f]+ in spare$",
                     cp.stderr.strip()), cp.stderr


@pytest.mark.parametrize("engine", ["tracefs", "bpf"])
@pytest.mark.parametrize("build", ["dwarfapp-O0", "dwarfapp-O2"])
def test_line_probe_fires_once_per_execution(build, engine):
    """As gdb's break: the lowest address of the line in each block. At -O0
    the handle() and run_job() lines have several is_stmt rows each."""
    h, rj = marker_line("handle-call"), marker_line("run-job-call")
    res = trace(f"p:h dwarfapp.c:{h} i", f"p:rj dwarfapp.c:{rj}",
                cmd=[target(build), str(N)], json=True, extra=["-e", engine]).check(rc=0)
    assert res.counts() == {"h": N, "rj": N}
    assert [e.args["i"] for e in res.named("h")] == list(range(1, N + 1))
    for ev, line in (("h", h), ("rj", rj)):
        assert {e.ip & 0xfff for e in res.named(ev)} == \
            {min(line_addrs_in(build, line, "main")) & 0xfff}, (ev, build)


@pytest.mark.parametrize("build", ["dwarfapp-O0", "dwarfapp-O2"])
def test_all_sites_probes_every_statement_of_the_line(build):
    """--all-sites keeps one site per is_stmt row: at -O0 the run_job line has
    several, each hit once per execution; the loop's own line (init, test,
    increment) fires once per run without it, once per row hit with it."""
    rj, loop = marker_line("run-job-call"), marker_line("first-loop")
    addrs = line_addrs_in(build, rj, "main")
    if build == "dwarfapp-O0":
        assert len(addrs) > 1
    res = trace(f"p:rj dwarfapp.c:{rj}", cmd=[target(build), str(N)], json=True,
                extra=["--all-sites"]).check(rc=0)
    assert len(res.events) == len(addrs) * N
    assert sorted({e.ip & 0xfff for e in res.events}) == sorted({a & 0xfff for a in addrs})
    res = trace(f"p:loop dwarfapp.c:{loop}", cmd=[target(build), str(N)],
                json=True).check(rc=0)
    assert len(res.events) == 1
    res = trace(f"p:loop dwarfapp.c:{loop}", cmd=[target(build), str(N)], json=True,
                extra=["--all-sites"]).check(rc=0)
    assert len(res.events) > N
