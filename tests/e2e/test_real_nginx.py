"""Debian's nginx (nginx-light), one process (master_process off) serving a
directory of its own on 127.0.0.1, traced with -p while curl asks it for a
bounded list of pages, and compared with its own access log (one line a
request, written when the request ends) and the files the requests name.

Per request nginx calls ngx_http_create_request and ngx_http_free_request
once, and ngx_open_cached_file once a file it serves (twice for "/": the
index module looks for index.html, then the static module opens it after
an internal redirect). ngx_http_handler ends in a tail call (a jmp) to
ngx_http_core_run_phases; "/" runs both twice, nested."""

import subprocess

import pytest

import real_programs as rp
import uscope_e2e as u
from real_programs import ENGINES, attach

rp.need(rp.NGINX, "curl")

FAST_ENGINES = ["inject", "bpf"]    # tracefs: see test_real_redis.py
PAGES = {"index.html": "home\n", "a.html": "page a\n", "b.html": "page b\n"}
# the requests, and what nginx answers
PATHS = ["/a.html", "/b.html", "/a.html", "/", "/a.html", "/b.html"]
# after a reload: connections, and the requests of each
CONNS = 4
RELOAD_PATHS = ["/a.html", "/", "/b.html", "/a.html", "/b.html"]


@pytest.fixture
def nginx(tmp_path):
    n = rp.Nginx(tmp_path, PAGES)
    yield n
    n.stop()


def serve(nginx, paths=PATHS):
    """curl the paths; -> the access log lines they added."""
    before = len(nginx.logged())
    bodies = nginx.get(*paths)
    assert bodies == [PAGES["index.html" if p == "/" else p[1:]] for p in paths]
    new = nginx.logged(before + len(paths))[before:]
    assert [l.split('"')[1] for l in new] == [f"GET {p} HTTP/1.1" for p in paths], new
    return new


def opened(nginx, paths=PATHS):
    """The files ngx_open_cached_file gets, in order."""
    out = []
    for p in paths:
        name = "index.html" if p == "/" else p[1:]
        out += [str(nginx.dir / "html" / name)] * (2 if p == "/" else 1)
    return out


# --------------------------------------------------------------------------
# count, trace

@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_count_equals_access_log(nginx, engine):
    s = attach("count", nginx.pid, "ngx_http_create_request", "ngx_http_free_request",
               "ngx_open_cached_file", engine=engine)
    logged = serve(nginx)
    s.stop().ok()
    assert rp.count_table(s.stdout) == {"ngx_http_create_request": len(logged),
                                        "ngx_http_free_request": len(logged),
                                        "ngx_open_cached_file": len(opened(nginx))}, \
        s.describe()


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_trace_files_opened(nginx, engine):
    # ngx_open_cached_file(cache, ngx_str_t *name, ...): name->data at +8,
    # NUL-terminated for open(); NGX_OK (0) when it opened, NGX_ERROR (-1)
    s = attach("trace", nginx.pid, "--json", "ngx_open_cached_file path=+0(+8($arg2)):string",
               "r:ngx_open_cached_file rc=$retval:s64", "ngx_http_free_request r=$arg1",
               engine=engine)
    before = len(nginx.logged())
    bodies = nginx.get(*PATHS)
    assert subprocess_get_status(nginx, "/missing") == 404
    logged = len(nginx.logged(before + len(PATHS) + 1))  # each request freed
    s.stop().ok()
    assert len(bodies) == len(PATHS)
    r = rp.events_of(s, json_out=True)
    files = opened(nginx) + [str(nginx.dir / "html" / "missing")]
    assert [e.args["path"] for e in r.named("ngx_open_cached_file")] == files
    assert [e.args["rc"] for e in r.named("ngx_open_cached_file__return")] == \
        [0] * (len(files) - 1) + [-1]
    # one request a log line, each freed once
    assert len(r.named("ngx_http_free_request")) == logged - before \
        == len(PATHS) + 1, s.describe()


def subprocess_get_status(nginx, path):
    r = nginx.curl(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", nginx.url(path)])
    return int(r.stdout)


# --------------------------------------------------------------------------
# flow and latency through a tail call

ONE_INDEX = [("->", "ngx_http_handler", 0), ("->", "ngx_http_core_run_phases", 1),
             ("->", "ngx_http_handler", 2), ("->", "ngx_http_core_run_phases", 3),
             ("<-", "ngx_http_core_run_phases", 3), ("<-", "ngx_http_handler", 2),
             ("<-", "ngx_http_core_run_phases", 1), ("<-", "ngx_http_handler", 0)]
# tracefs does not follow a tail call: ngx_http_handler returns at its jmp
ONE_INDEX_AT_JMP = [("->", "ngx_http_handler", 0), ("<-", "ngx_http_handler", 0),
                    ("->", "ngx_http_core_run_phases", 0), ("->", "ngx_http_handler", 1),
                    ("<-", "ngx_http_handler", 1), ("->", "ngx_http_core_run_phases", 1),
                    ("<-", "ngx_http_core_run_phases", 1), ("<-", "ngx_http_core_run_phases", 0)]


@pytest.mark.parametrize("engine", ENGINES)
def test_flow_through_a_tail_call(nginx, engine):
    s = attach("flow", nginx.pid, "--json", "ngx_http_handler", "ngx_http_core_run_phases",
               engine=engine)
    serve(nginx, ["/", "/"])
    s.stop().ok()
    fl = rp.flow_of(s)
    want = ONE_INDEX_AT_JMP if engine == "tracefs" else ONE_INDEX
    assert fl.seq() == want * 2, s.describe()
    assert all(x.duration_ns is not None for x in fl.lines if x.dir == "<-"), s.describe()


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_latency_through_a_tail_call(nginx, engine):
    s = attach("latency", nginx.pid, "--json", "ngx_http_handler", "ngx_http_core_run_phases",
               engine=engine)
    serve(nginx, ["/", "/a.html", "/"])
    s.stop().ok()
    rows = {r["probe"]: r for r in rp.agg_rows(s.stdout)}
    # twice a "/", once a page
    assert {p: r["count"] for p, r in rows.items()} == \
        {"ngx_http_handler": 5, "ngx_http_core_run_phases": 5}, s.describe()
    for r in rows.values():
        rp.agg_consistent(r)


# --------------------------------------------------------------------------
# $ustack against gdb, record then report, a glob

@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_ustack_is_gdbs_backtrace(nginx, engine):
    from test_stacks import compare_with_gdb
    s = attach("trace", nginx.pid, "--json", "ngx_open_cached_file $ustack", engine=engine)
    serve(nginx, ["/a.html"])
    s.stop().ok()
    (ev,) = rp.events_of(s, json_out=True).named("ngx_open_cached_file")
    stack = ev.args["ustack"]
    gframes = rp.gdb_frames_attached(nginx.pid, "ngx_open_cached_file",
                                     lambda: nginx.get("/b.html"))
    compare_with_gdb(stack, gframes)
    # the functions with a symbol (static ones, as the epoll module's, have
    # none: gdb agrees above); ngx_http_handler tail-called run_phases
    named = [f["sym"] for f in stack if f["sym"] and f["module"] == "nginx"]
    assert named == ["ngx_open_cached_file", "ngx_http_core_content_phase",
                     "ngx_http_core_run_phases", "ngx_process_events_and_timers",
                     "ngx_single_process_cycle", "main", "_start"], named


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_record_then_report(nginx, engine, tmp_path):
    rec = tmp_path / "nginx.usc"
    s = attach("record", nginx.pid, "-o", rec, "ngx_http_free_request",
               "ngx_open_cached_file", engine=engine)
    logged = serve(nginx)
    s.stop().ok()
    cp = u.run_uscope(["report", "-r", rec, "--json"])
    assert cp.returncode == 0, cp.stderr
    rows = {o["function"]: o for o in u.parse_json_objects(cp.stdout) if "function" in o}
    assert {f: r["calls"] for f, r in rows.items()} == \
        {"ngx_http_free_request": len(logged), "ngx_open_cached_file": len(opened(nginx))}
    for r in rows.values():      # neither calls the other
        assert r["self_ns"] == r["total_ns"] and r["min_ns"] <= r["avg_ns"] <= r["max_ns"], r


def test_count_over_a_glob_shows_the_functions_hit(nginx):
    s = attach("count", nginx.pid, "ngx_http_*", engine="inject")
    serve(nginx)
    s.stop().ok()
    rows = rp.count_table(s.stdout)
    assert rows["ngx_http_create_request"] == len(PATHS), s.describe()
    assert all(n > 0 for n in rows.values()), \
        f"{sum(n == 0 for n in rows.values())} rows of {len(rows)} were never hit"


# --------------------------------------------------------------------------
# a master and its workers, reloaded while traced (issue 27)

@pytest.mark.parametrize("engine", ENGINES)
def test_reload_while_traced(tmp_path, engine):
    """nginx as it runs in production: a master and 2 workers. -p MASTER
    follows the workers the master forks after attach: `nginx -s reload`
    twice while traced, each time new workers forked and the old ones
    finishing their connections and exiting, N requests served after each.
    Each request is freed once by the worker that served it (then logged):
    the counts, by pid, are the access log's lines, the first N in the
    first new workers, the next N in the second, none lost or counted twice
    as the workers come and go. (The workers running at attach are traced
    too, test_workers_running_at_attach: here they serve nothing, they end
    at the first reload.)"""
    n = rp.Nginx(tmp_path, PAGES, workers=2)
    try:
        s = attach("count", n.pid, "--json", "ngx_http_free_request pid=$pid", engine=engine)
        served = []
        for _ in range(2):
            old, new = n.reload()
            logged = len(n.logged())
            for c in range(CONNS):
                serve(n, RELOAD_PATHS)
            assert len(n.logged()) == logged + CONNS * len(RELOAD_PATHS)
            served.append(new)
        s.stop().ok()
        rows = {r["key"]["pid"]: r["count"] for r in rp.agg_rows(s.stdout)}
        assert all(r["probe"] == "ngx_http_free_request" for r in rp.agg_rows(s.stdout))
        per = CONNS * len(RELOAD_PATHS)
        # every request by a worker of its generation, each counted once
        assert sum(rows.get(p, 0) for p in served[0]) == per, (served, rows, s.describe())
        assert sum(rows.get(p, 0) for p in served[1]) == per, (served, rows, s.describe())
        assert set(rows) <= set(served[0] + served[1]), (served, rows)
        # the access log agrees: one line a request, none while not traced
        assert len(n.logged()) == 2 * per
    finally:
        n.stop()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("children", [True, False])
def test_workers_running_at_attach(tmp_path, engine, children):
    """-p MASTER traces the workers the master has already: they serve
    every request (the master serves none), each freed once by the worker
    that served it. The counts, by pid, are the access log's lines, all in
    the workers running at attach; with --no-children, none."""
    n = rp.Nginx(tmp_path, PAGES, workers=2)
    try:
        workers = n.workers()
        extra = () if children else ("--no-children",)
        s = attach("count", n.pid, "--json", *extra, "ngx_http_free_request pid=$pid",
                   engine=engine)
        for c in range(CONNS):
            serve(n, RELOAD_PATHS)
        per = CONNS * len(RELOAD_PATHS)
        assert len(n.logged()) == per
        assert n.workers() == workers       # the same workers served them
        s.stop().ok()
        rows = {r["key"]["pid"]: r["count"] for r in rp.agg_rows(s.stdout)}
        if not children:
            assert rows == {}, (rows, s.describe())
            return
        assert set(rows) <= set(workers), (workers, rows, s.describe())
        assert sum(rows.values()) == per, (workers, rows, s.describe())
    finally:
        n.stop()
