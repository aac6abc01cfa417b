"""A Go net/http server (real_goserver.go, built here with Debian's
golang-go, with its debug info and stripped), traced with -p while clients
on 127.0.0.1 send it a bounded number of requests, and compared with its
own counters: the requests it served and how long each process() call
took, timed from inside it.

Its process() blocks in a quarter of the calls: the goroutine sleeps and
may go on on another OS thread (GOMAXPROCS=2, four clients at once), so a
call's entry and its return are often on two threads. Pairing them per
thread is wrong for Go (issue 24.2): uscope pairs a Go function's calls by
their goroutine (its g, in R14 at every entry and return), and compute(),
which never blocks, pairs either way."""

import collections
import re

import pytest

import real_programs as rp
import uscope_e2e as u
from real_programs import ENGINES, attach

rp.need("go")

FAST_ENGINES = ["inject", "bpf"]    # tracefs: see test_real_redis.py
IDS = list(range(1, 161))


@pytest.fixture(scope="module")
def go_builds(tmp_path_factory):
    return rp.build_go_server(tmp_path_factory.mktemp("goserver"))


@pytest.fixture
def server(go_builds, tmp_path):
    s = rp.GoServer(go_builds["plain"], tmp_path)
    yield s
    s.stop()


@pytest.fixture
def stripped(go_builds, tmp_path):
    s = rp.GoServer(go_builds["stripped"], tmp_path)
    yield s
    s.stop()


def run_load(server, ids=IDS, clients=4):
    answers = server.load(ids, clients)
    assert answers == {i: str(len(f"user{i}") + i) for i in ids}
    return server.stats()


# --------------------------------------------------------------------------
# count, trace

@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_count_equals_requests_served(server, engine):
    s = attach("count", server.pid, "main.process", "main.compute", engine=engine)
    st = run_load(server)
    s.stop().ok()
    assert st["served"] == len(IDS)
    assert rp.count_table(s.stdout) == {"main.process": len(IDS), "main.compute": len(IDS)}, \
        s.describe()


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_trace_ids_and_names_by_debug_info(server, engine):
    s = attach("trace", server.pid, "--json", "main.process id name", engine=engine)
    run_load(server)
    s.stop().ok()
    r = rp.events_of(s, json_out=True)
    got = [(e.args["id"], e.args["name"]) for e in r.named("main.process")]
    u.assert_multiset(got, [(i, f"user{i}") for i in IDS], "(id, name)")


@pytest.mark.parametrize("engine", ENGINES)
def test_string_argument_of_a_stripped_binary(stripped, engine):
    s = attach("trace", stripped.pid, "--json", "main.process id=$arg1:s64 name=$arg2:string",
               engine=engine)
    run_load(stripped, IDS[:20], clients=1)
    s.stop().ok()
    got = [(e.args["id"], e.args["name"]) for e in rp.events_of(s, json_out=True).events]
    assert got == [(i, f"user{i}") for i in IDS[:20]], s.describe()


@pytest.mark.parametrize("engine", ["bpf"])
def test_goid_pairs_each_return_with_its_entry(server, engine):
    """$goid at the entry and the return: each goroutine's calls alternate
    entry, return, with the id it was called with (the pairing Go needs);
    $tid shows returns on another thread than their entry.

    What it can promise on a machine others share: every event in its
    goroutine's order, and none missing but those uscope counts as lost (a
    hit the bpf program could not record: its thread's task storage
    refused, the ring buffer full; the last round's one failure of this
    test was not reproduced in 50 runs since, and it asserted no loss at
    all). Each break in a goroutine's entry/return alternation and each id
    without its entry needs one loss uscope reported."""
    s = attach("trace", server.pid, "--json", "main.process id=$arg1:s64 g=$goid t=$tid",
               "r:main.process g=$goid t=$tid", engine=engine)
    run_load(server)
    s.stop().ok()
    r = u.TraceResult(s.bg.argv, s.rc, s.stdout, s.stderr, s.stdout,
                      json=True).check(rc=0, lost0=False)
    lost = r.summary.lost
    assert lost <= len(IDS) // 20, s.describe()     # a few, not a broken probe
    per_g = collections.defaultdict(list)
    for e in r.events:
        assert e.args["g"] is not None, e	# $goid read at every hit
        per_g[e.args["g"]].append((e.type, e.args.get("id"), e.args["t"]))
    ids, breaks = [], 0
    for g, seq in per_g.items():
        kinds = [k for k, _, _ in seq]
        # a break: an entry without its return, a return without its entry
        breaks += sum(1 for a, b in zip(["r"] + kinds, kinds + ["p"]) if a == b)
        ids += [i for k, i, _ in seq if k == "p"]
    assert breaks <= lost, (lost, {g: seq for g, seq in per_g.items()
                                   if [k for k, _, _ in seq] != ["p", "r"] * (len(seq) // 2)})
    assert len(ids) == len(set(ids)) and set(ids) <= set(IDS), sorted(ids)
    assert len(IDS) - len(ids) <= lost, (sorted(set(IDS) - set(ids)), lost)


# --------------------------------------------------------------------------
# latency, flow, report

@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_latency_of_a_function_that_never_blocks(server, engine):
    s = attach("latency", server.pid, "--json", "main.compute", engine=engine)
    st = run_load(server)
    s.stop().ok()
    (r,) = rp.agg_rows(s.stdout)
    assert (r["probe"], r["count"]) == ("main.compute", st["served"]), s.describe()
    rp.agg_consistent(r)


@pytest.mark.parametrize("engine", ENGINES)
def test_latency_pairs_each_call_by_goroutine(server, engine):
    s = attach("latency", server.pid, "--json", "main.process id=$arg1:s64", engine=engine)
    st = run_load(server)
    s.stop().ok()
    rows = {r["key"]["id"]: r for r in rp.agg_rows(s.stdout)}
    assert {i: r["count"] for i, r in rows.items()} == {i: 1 for i in IDS}, s.describe()
    # from its entry to its return: at least what the server timed inside
    # it, whatever the clock (a 2% margin for the TSC's rate, measured)
    short = {i: (rows[i]["max"], st["took"][str(i)]) for i in IDS
             if rows[i]["max"] < 0.98 * st["took"][str(i)]}
    assert not short, f"calls shorter than the server timed them: {short}"


def test_flow_pairs_each_return_by_goroutine(server):
    s = attach("flow", server.pid, "--json", "main.process", engine="bpf")
    st = run_load(server)
    s.stop().ok()
    fl = rp.flow_of(s)
    rets = [fl_ for fl_ in fl.lines if fl_.dir == "<-"]
    assert len(rets) == st["served"]
    assert all(r.duration_ns is not None and r.depth == 0 for r in rets), s.describe()
    assert max(r.duration_ns for r in rets) >= max(st["took"].values())
    assert sum(r.duration_ns for r in rets) <= 1.5 * sum(st["took"].values()) + \
        len(rets) * 200_000, "durations from the wrong entries"


def test_record_then_report(server, tmp_path):
    rec = tmp_path / "go.usc"
    s = attach("record", server.pid, "-o", rec, "main.process", engine="inject")
    st = run_load(server)
    s.stop().ok()
    cp = u.run_uscope(["report", "-r", rec, "--json"])
    assert cp.returncode == 0, cp.stderr
    (f,) = [o for o in u.parse_json_objects(cp.stdout) if "function" in o]
    assert f["calls"] == st["served"]
    assert f["self_ns"] == f["total_ns"], "a leaf: all its time is its own"
    assert f["total_ns"] >= 0.98 * sum(st["took"].values())


# --------------------------------------------------------------------------
# $ustack, and a return probe's mistake

GO_FRAMES = ["main.compute", "main.process", "main.main.func1",
             "net/http.HandlerFunc.ServeHTTP", "net/http.(*ServeMux).ServeHTTP",
             "net/http.serverHandler.ServeHTTP", "net/http.(*conn).serve",
             "net/http.(*Server).Serve.func3", "runtime.goexit.abi0"]


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_ustack_of_a_handler(server, engine):
    s = attach("trace", server.pid, "--json", "main.compute $ustack", engine=engine)
    run_load(server, IDS[:3], clients=1)
    s.stop().ok()
    evs = rp.events_of(s, json_out=True).named("main.compute")
    assert len(evs) == 3
    for e in evs:
        assert [f["sym"] for f in e.args["ustack"]] == GO_FRAMES, e.args["ustack"]


def unabi(name):
    """A Go name without the ".abi0" Go's linker gives an assembly function
    in .symtab (its ABI), which Go's function table does not record."""
    return name[:-len(".abi0")] if name.endswith(".abi0") else name


def ustack_frames(srv, engine):
    """main.compute's $ustack in srv, once: [(sym, off, file, line)], the
    names without .abi0."""
    s = attach("trace", srv.pid, "--json", "main.compute $ustack", engine=engine)
    run_load(srv, IDS[:1], clients=1)
    s.stop().ok()
    (e,) = rp.events_of(s, json_out=True).named("main.compute")
    return [(unabi(f["sym"]), f["off"], f["file"], f["line"]) for f in e.args["ustack"]]


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_ustack_of_a_stripped_handler(server, stripped, engine):
    """-s -w leaves Go's code without CFI (no .eh_frame for Go, no
    .debug_frame): Go's pcsp tables unwind it as the unstripped build's
    .debug_frame does, and pcfile/pcln give each frame the line its debug
    info gives (the two builds' code is the same, byte for byte)."""
    plain = ustack_frames(server, engine)
    got = ustack_frames(stripped, engine)
    assert [f[0] for f in got] == [unabi(n) for n in GO_FRAMES], got
    assert got == plain
    assert all(f[2] and f[3] > 0 for f in got), got
    assert got[0][2].endswith("/real_goserver.go")


def test_return_probe_naming_a_variable_says_use_retval(server):
    cp = u.run_uscope(["trace", "-p", server.pid, "-d", "0.1", "r:main.process id"])
    assert cp.returncode != 0
    lines = u.error_lines(cp.stderr)
    assert "expected an event name" not in cp.stderr, lines
    assert len(lines) == 1 and "$retval" in lines[0], lines
    assert re.search(r"\bid\b", lines[0]), lines
