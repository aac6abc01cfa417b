"""uscope record, and what reads a recording back: trace|flow|count|hist|
latency -r FILE, report -r FILE and export -r FILE --format chrome|ctf|folded.

The targets' calls are known exactly (tests/targets/aggapp.c, flowthreads.c,
flowlate.c, args.c, tailcall.c), so every count, name and value is asserted
exactly. No assertion depends on how fast anything runs: durations are
compared between readers of the same recording, where they must be equal to
the nanosecond (report, flow, chrome, folded and latency all pair the same
entry and return).

A recording of each kind is made once per module (on inject, bpf and
tracefs where cheap: a kernel uprobe costs ~12 us a hit) and read by
several tests.

Known bugs outside the sinks are marked xfail(strict=True) with the
command, what is expected and what happens."""

import collections
import json
import os
import re
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import error_lines, run_uscope, target

AGG = target("aggapp")
FLOWTHREADS = target("flowthreads")
FLOWLATE = target("flowlate")
ARGS = target("args")
TAILCALL = target("tailcall")
ENGINES = ["inject", "bpf", "tracefs"]
FT_M = {"inject": 5, "bpf": 3, "tracefs": 3}     # flowthreads iterations per thread
NAMES = [("alpha", 1)] * 3 + [("beta", 2)] * 2 + [("gamma", 3), ("gadget", 4), ("x" * 100, 5)]
NAMES_PROBE = "lookup name=$arg1:string n=$arg2:s32"
FT_PROBES = ["outer", "inner"]
REC_PATHS = ["deep", "deep;deep", "deep;deep;deep", "deep;deep;deep;deep",
             "deep;deep;deep;deep;nap"]





ENGINE_PARAMS = ENGINES


# --------------------------------------------------------------------------
# Running uscope

def record_argv(path, probes, cmd, engine=None, extra=()):
    a = ["record", "-o", str(path)]
    if engine:
        a += ["-e", engine]
    return a + list(extra) + list(probes) + ["--"] + [str(c) for c in cmd]


def uscope(*args, rc=0):
    cp = run_uscope(list(args))
    if rc is not None:
        assert cp.returncode == rc, \
            f"{cp.args} exited {cp.returncode}, expected {rc}\nstderr:\n{cp.stderr[-3000:]}"
    return cp


class Recording:
    def __init__(self, path, cp):
        self.path = path
        self.cp = cp

    def check(self):
        assert self.cp.returncode == 0, \
            f"record failed ({self.cp.returncode}): {self.cp.args}\n{self.cp.stderr[-3000:]}"
        return self


@pytest.fixture(scope="module")
def recs(tmp_path_factory):
    """recs(KEY, PROBES, COMMAND, ENGINE) -> Recording, made once per module."""
    d = tmp_path_factory.mktemp("recordings")
    cache = {}

    def get(key, probes, cmd, engine=None, extra=()):
        if key not in cache:
            path = d / f"{key}.usc"
            cache[key] = Recording(path, run_uscope(record_argv(path, probes, cmd, engine,
                                                                extra)))
        return cache[key]
    return get


def ft_rec(recs, engine="inject"):
    m = FT_M[engine]
    return recs(f"ft-{engine}", FT_PROBES, [FLOWTHREADS, m], engine).check(), m


def names_rec(recs, engine="inject"):
    return recs(f"names-{engine}", [NAMES_PROBE], [AGG, "names"], engine).check()


def rec_rec(recs):
    return recs("rec", ["deep", "nap"], [AGG, "rec"]).check()


def report_json(path, *extra):
    """-> ({function: row}, [functions in order], {probe: (events, lost)})"""
    cp = uscope("report", "-r", path, "--json", *extra)
    funcs, order, probes = {}, [], {}
    for o in u.parse_json_objects(cp.stdout):
        if "function" in o:
            assert set(o) == {"function", "calls", "total_ns", "self_ns", "min_ns", "avg_ns",
                              "max_ns", "v"}, o
            assert o["function"] not in funcs, f"two rows for {o['function']}"
            funcs[o["function"]] = o
            order.append(o["function"])
        else:
            assert set(o) == {"probe", "events", "lost", "lost_wait", "v"}, o
            assert 0 <= o["lost_wait"] <= (o["lost"] or 0), o
            assert o["probe"] not in probes, f"two rows for {o['probe']}"
            probes[o["probe"]] = (o["events"], o["lost"])
    return funcs, order, probes


def flow_replay(path, *extra) -> u.FlowResult:
    cp = uscope("flow", "-r", path, "--json", *extra)
    return u.FlowResult(cp.args, cp.returncode, cp.stdout, cp.stderr, cp.stdout,
                        json=True).check()


def trace_replay(path, *extra, json=False) -> u.TraceResult:
    cp = run_uscope(["trace", "-r", path] + (["--json"] if json else []) + list(extra))
    return u.TraceResult(cp.args, cp.returncode, cp.stdout, cp.stderr, cp.stdout, json=json)


def durations(fl: u.FlowResult):
    """{function: [duration_ns of each paired return]}"""
    d = collections.defaultdict(list)
    for line in fl.lines:
        if line.dir == "<-" and line.duration_ns is not None:
            d[line.function].append(line.duration_ns)
    return dict(d)


def summary_of(cp):
    s = u.parse_summary(cp.stderr)
    assert s is not None, f"no summary on stderr:\n{cp.stderr}"
    return s


def fmt_time(ns):
    """report's time column (uftrace's)."""
    if ns >= 1_000_000_000:
        return "%.3f  s" % (ns / 1e9)
    if ns >= 1_000_000:
        return "%.3f ms" % (ns / 1e6)
    if ns >= 1000:
        return "%.3f us" % (ns / 1e3)
    return f"{ns} ns"


def chrome(path, out):
    uscope("export", "-r", path, "--format", "chrome", "-o", out)
    doc = json.loads(Path(out).read_text(), parse_float=Decimal)
    assert set(doc) == {"displayTimeUnit", "traceEvents"} and doc["displayTimeUnit"] == "ns"
    assert isinstance(doc["traceEvents"], list)
    return doc["traceEvents"]


def ns(us: Decimal) -> int:
    """A chrome time (us, 3 decimals) -> ns, exactly."""
    assert isinstance(us, Decimal) and us == us.quantize(Decimal("0.001")), us
    return int(us * 1000)


# --------------------------------------------------------------------------
# 1. record, report and flow -r of a multi-threaded program

def ft_structure(fl, m):
    """Two threads, each outer -> inner m times; main calls neither."""
    tids = fl.tids()
    assert len(tids) == 2, fl.describe()
    for tid in tids:
        assert fl.seq(tid) == [("->", "outer", 0), ("->", "inner", 1), ("<-", "inner", 1),
                               ("<-", "outer", 0)] * m, fl.describe()
    return tids


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_report_of_threads_equals_flow_of_the_recording(recs, engine):
    rec, m = ft_rec(recs, engine)
    assert f"flowthreads done m={m} total={30 * m}\n" in rec.cp.stdout, \
        "COMMAND's stdout passes through"
    s = summary_of(rec.cp)
    assert (s.total, s.lost) == (8 * m, 0)
    assert s.per_event == {f: (2 * m, 0) for f in ["outer", "inner", "outer__return",
                                                   "inner__return"]}

    funcs, order, probes = report_json(rec.path)
    assert set(funcs) == {"outer", "inner"}
    assert probes == {f: (2 * m, 0) for f in ["outer", "inner", "outer__return",
                                              "inner__return"]}

    fl = flow_replay(rec.path)
    tids = ft_structure(fl, m)
    pids = {o["pid"] for o in fl.objects}
    assert len(pids) == 1 and pids.isdisjoint(tids), "main calls neither function"
    assert {o["comm"] for o in fl.objects} == {"flowthreads"}
    dur = durations(fl)
    for f in ("outer", "inner"):
        row = funcs[f]
        assert row["calls"] == len(dur[f]) == 2 * m
        assert row["total_ns"] == sum(dur[f]), f
        assert (row["min_ns"], row["max_ns"]) == (min(dur[f]), max(dur[f])), f
        assert row["avg_ns"] == row["total_ns"] // row["calls"], f
    assert funcs["inner"]["self_ns"] == funcs["inner"]["total_ns"]
    assert funcs["outer"]["self_ns"] == funcs["outer"]["total_ns"] - funcs["inner"]["total_ns"]
    # heaviest total first (then by name)
    assert order == sorted(funcs, key=lambda f: (-funcs[f]["total_ns"], f))

    # a live flow of the same probes: the same calls (times differ)
    live = u.flow(*FT_PROBES, cmd=[FLOWTHREADS, m], json=True, extra=["-e", engine]).check()
    ft_structure(live, m)
    assert {f: len(v) for f, v in durations(live).items()} == {"outer": 2 * m, "inner": 2 * m}


def test_report_text_and_sort_orders(recs):
    rec, m = ft_rec(recs)
    funcs, order, _ = report_json(rec.path)
    out = uscope("report", "-r", rec.path).stdout.splitlines()
    assert out[0].split() == ["Total", "time", "Self", "time", "Calls", "Min", "Avg", "Max",
                              "Function"]
    assert out[1].split() == ["==========="] * 2 + ["=========="] + ["==========="] * 3 + \
        ["========"]
    for line, f in zip(out[2:4], order):
        r = funcs[f]
        assert line == "  %11s  %11s  %10d  %11s  %11s  %11s  %s" % (
            fmt_time(r["total_ns"]), fmt_time(r["self_ns"]), r["calls"], fmt_time(r["min_ns"]),
            fmt_time(r["avg_ns"]), fmt_time(r["max_ns"]), f)
    assert out[4] == ""
    assert out[5].split() == ["Events", "Lost", "Probe"]
    assert [l.split() for l in out[7:]] == [[str(2 * m), "0", p] for p in
                                            ["outer", "inner", "outer__return", "inner__return"]]

    # --sort calls: equal calls, so by name; --sort self: heaviest self first
    assert report_json(rec.path, "--sort", "calls")[1] == ["inner", "outer"]
    assert report_json(rec.path, "--sort", "self")[1] == \
        sorted(funcs, key=lambda f: (-funcs[f]["self_ns"], f))
    assert report_json(rec.path, "--sort", "total")[1] == order


def test_report_lists_no_hidden_probe(recs):
    """A tail call's callee gets hidden return sites (leaf__return): the
    report's probe table, like the summary, does not show them."""
    rec = recs("tailcall", ["chain*"], [TAILCALL, 1]).check()
    funcs, _, probes = report_json(rec.path)
    assert probes == {"chain1": (2, 0), "chain2": (1, 0), "chain1__return": (2, 0),
                      "chain2__return": (1, 0)}
    assert {f: r["calls"] for f, r in funcs.items()} == {"chain1": 2, "chain2": 1}
    # chain2 -> chain1 (a tail call to leaf, which sleeps): chain2's self
    # time is its own, less the chain1 call it made
    dur = durations(flow_replay(rec.path))
    assert funcs["chain2"]["total_ns"] == dur["chain2"][0]
    assert funcs["chain2"]["self_ns"] == dur["chain2"][0] - dur["chain1"][1]


# --------------------------------------------------------------------------
# 2. trace -r prints what a live trace prints

def norm(ev: u.Event):
    """An event line less its pid, time and load address (ASLR keeps the
    low 12 bits)."""
    rest = u.EVENT_RE.match(ev.line).group("rest")
    return (ev.comm, ev.event, ev.type, ev.ip & 0xfff,
            ev.func & 0xfff if ev.func is not None else None, rest)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_trace_replay_equals_live_trace(recs, engine):
    rec = names_rec(recs, engine)
    rep = trace_replay(rec.path).check()
    lookups = rep.named("lookup")
    assert [(e.args["name"], e.args["n"]) for e in lookups] == NAMES
    assert [e.event for e in rep.events] == ["lookup", "lookup__return"] * 8
    assert len({e.tid for e in rep.events}) == 1

    live = u.trace(NAMES_PROBE, "r:lookup", cmd=[AGG, "names"], extra=["-e", engine]).check()
    assert [norm(e) for e in rep.events] == [norm(e) for e in live.events]

    js = trace_replay(rec.path, json=True).check()
    assert len(js.events) == len(rep.events) == 16
    for t, j, o in zip(rep.events, js.events, js.objects):
        assert (j.event, j.type, j.tid, j.comm, j.cpu, j.ip, j.func) == \
            (t.event, t.type, t.tid, t.comm, t.cpu, t.ip, t.func)
        assert j.args == t.args
        assert o["pid"] == o["tid"]
        sec, usec = u.EVENT_RE.match(t.line).group("sec", "usec")
        assert o["time_ns"] // 1000 == int(sec) * 1_000_000 + int(usec)


def test_trace_replay_filters_on_recorded_arguments(recs):
    rec = names_rec(recs)
    cp = run_uscope(["trace", "-r", rec.path, "lookup if n == 2"])
    res = u.TraceResult(cp.args, cp.returncode, cp.stdout, cp.stderr, cp.stdout).check()
    assert [(e.event, e.args["name"], e.args["n"]) for e in res.events] == \
        [("lookup", "beta", 2)] * 2


def test_trace_replay_selects_probes(recs):
    rec = names_rec(recs)
    res = trace_replay(rec.path, "lookup")
    assert res.rc == 0, res.describe()
    assert [e.event for e in res.events] == ["lookup"] * 8, res.describe()
    res.check()


def test_trace_replay_filter_summary(recs):
    rec = names_rec(recs)
    res = trace_replay(rec.path, "lookup n=$arg2:s32 if n == 2", "r:lookup")
    assert res.rc == 0, res.describe()
    assert [(e.event, e.args.get("n")) for e in res.events if e.event == "lookup"] == \
        [("lookup", 2)] * 2
    assert len(res.named("lookup__return")) == 8
    res.check()


# --------------------------------------------------------------------------
# 3. count, latency and hist -r

def agg_rows(cp):
    return [o for o in u.parse_json_objects(cp.stdout) if o.get("final") and not o.get("call")]


def buckets(r):
    return [(b.get("min"), b.get("max"), b["count"]) for b in r["buckets"]]


def log2_buckets(values):
    """hist's and latency's log2 buckets: [(min, max, count)] of the non-empty ones."""
    c = collections.Counter((1 << (v.bit_length() - 1)) if v else 0 for v in values)
    return [(lo, 2 * lo - 1 if lo else 0, c[lo]) for lo in sorted(c)]


def test_count_replay(recs):
    rec = recs("sleep", ["nap us=$arg1:s64"], [AGG, "sleep"]).check()
    rows = agg_rows(uscope("count", "-r", rec.path, "--json"))
    assert {r["probe"]: r["count"] for r in rows} == {"nap": 6, "nap__return": 6}
    assert len(rows) == 2
    text = uscope("count", "-r", rec.path).stdout.splitlines()
    assert [l.split() for l in text] == [["PROBE", "COUNT"], ["nap", "6"], ["nap__return", "6"]]
    rows = agg_rows(uscope("count", "-r", names_rec(recs).path, "--json"))
    assert {r["probe"]: r["count"] for r in rows} == {"lookup": 8, "lookup__return": 8}


def test_latency_replay_equals_flow_durations(recs):
    rec = recs("sleep", ["nap us=$arg1:s64"], [AGG, "sleep"]).check()
    fl = flow_replay(rec.path)
    assert fl.seq() == [("->", "nap", 0), ("<-", "nap", 0)] * 6
    by_key = collections.defaultdict(list)
    for entry, ret in zip(fl.lines[::2], fl.lines[1::2]):
        by_key[entry.args["us"]].append(ret.duration_ns)
    assert {k: len(v) for k, v in by_key.items()} == {600: 3, 3000: 2, 12000: 1}

    rows = agg_rows(uscope("latency", "-r", rec.path, "--json"))
    assert sorted(r["key"]["us"] for r in rows) == [600, 3000, 12000]
    for r in rows:
        d = by_key[r["key"]["us"]]
        assert (r["probe"], r["unit"], r["count"]) == ("nap", "ns", len(d))
        assert (r["min"], r["max"]) == (min(d), max(d)), r

    # in us: each call in its power-of-2 bucket (nap(us) sleeps at least us,
    # how much longer is the machine's: the buckets come from the durations)
    rows = agg_rows(uscope("latency", "-r", rec.path, "--json", "--unit", "us"))
    got = {r["key"]["us"]: (r["count"], buckets(r), r["min"], r["max"]) for r in rows}
    assert got == {k: (len(d), log2_buckets(x // 1000 for x in d), min(d) // 1000,
                       max(d) // 1000) for k, d in by_key.items()}
    assert all(x >= k * 1000 for k, d in by_key.items() for x in d)


def test_hist_replay(recs):
    rec = recs("sizes", ["take n=$arg1:u64"], [AGG, "sizes"]).check()
    rows = {r["probe"]: r for r in agg_rows(uscope("hist", "-r", rec.path, "--json"))}
    r = rows["take"]
    assert (r["key"], r["value"], r["count"], r["sum"], r["min"], r["max"]) == \
        ({}, "n", 100, 5050, 1, 100)
    assert buckets(r) == [(1, 1, 1), (2, 3, 2), (4, 7, 4), (8, 15, 8), (16, 31, 16),
                          (32, 63, 32), (64, 127, 37)]


def test_hist_replay_skips_probes_without_a_value(recs):
    rec = recs("sizes", ["take n=$arg1:u64"], [AGG, "sizes"]).check()
    rows = agg_rows(uscope("hist", "-r", rec.path, "--json"))
    assert [r["probe"] for r in rows] == ["take"]


def test_replay_selects_probes(recs):
    sizes = recs("sizes", ["take n=$arg1:u64"], [AGG, "sizes"]).check()
    rows = agg_rows(uscope("hist", "-r", sizes.path, "--json", "take"))
    assert [(r["probe"], r["count"]) for r in rows] == [("take", 100)]
    ft, m = ft_rec(recs)
    rows = agg_rows(uscope("latency", "-r", ft.path, "--json", "outer"))
    assert [(r["probe"], r["count"]) for r in rows] == [("outer", 2 * m)]
    rows = agg_rows(uscope("count", "-r", names_rec(recs).path, "--json",
                           "lookup name=$arg1:string"))
    assert sorted(r["count"] for r in rows) == [1, 1, 1, 2, 3]
    fl = flow_replay(ft.path, "outer")
    assert {line.function for line in fl.lines} == {"outer"}
    funcs, _, _ = report_json(ft.path, "outer")
    assert {f: r["calls"] for f, r in funcs.items()} == {"outer": 2 * m}


# --------------------------------------------------------------------------
# 4. export chrome

def by_ph(events):
    d = collections.defaultdict(list)
    for e in events:
        d[e["ph"]].append(e)
    return d


def test_chrome_of_threads(recs, tmp_path):
    rec, m = ft_rec(recs)
    ev = by_ph(chrome(rec.path, tmp_path / "ft.json"))
    assert set(ev) == {"M", "X"}
    fl = flow_replay(rec.path)
    pid = fl.objects[0]["pid"]
    tids = set(fl.tids())

    xs = ev["X"]
    assert collections.Counter(x["name"] for x in xs) == {"outer": 2 * m, "inner": 2 * m}
    for x in xs:
        assert set(x) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}, x
        assert (x["cat"], x["pid"], x["args"]) == ("function", pid, {})
        assert x["tid"] in tids
    # each slice is a call of flow: its entry's time and its duration
    u.assert_multiset([(x["name"], x["tid"], ns(x["ts"]), ns(x["dur"])) for x in xs],
                      [(o["function"], o["tid"], o["time_ns"] - o["duration_ns"],
                        o["duration_ns"]) for o in fl.objects if o["type"] == "return"],
                      "chrome slices vs flow calls")

    meta = ev["M"]
    assert [(e["name"], e["pid"], e["tid"], e["args"]) for e in meta
            if e["name"] == "process_name"] == [("process_name", pid, pid,
                                                 {"name": "flowthreads"})]
    threads = [(e["pid"], e["tid"], e["args"]["name"]) for e in meta
               if e["name"] == "thread_name"]
    assert sorted(threads) == sorted((pid, t, "flowthreads") for t in tids)
    assert len(meta) == 3


def test_chrome_recursion_nests(recs, tmp_path):
    rec = rec_rec(recs)
    ev = by_ph(chrome(rec.path, tmp_path / "rec.json"))
    assert set(ev) == {"M", "X"}
    xs = sorted(ev["X"], key=lambda x: (ns(x["ts"]), -ns(x["dur"])))
    assert [x["name"] for x in xs] == ["deep"] * 4 + ["nap"]
    assert len({x["tid"] for x in xs}) == 1
    for outer, inner in zip(xs, xs[1:]):
        o0, o1 = ns(outer["ts"]), ns(outer["ts"]) + ns(outer["dur"])
        i0, i1 = ns(inner["ts"]), ns(inner["ts"]) + ns(inner["dur"])
        assert o0 <= i0 and i1 <= o1, f"{inner} is not inside {outer}"
    funcs, _, _ = report_json(rec.path)
    assert ns(xs[0]["dur"]) == funcs["deep"]["max_ns"]
    assert sum(ns(x["dur"]) for x in xs[:4]) == funcs["deep"]["total_ns"]
    assert ns(xs[4]["dur"]) == funcs["nap"]["total_ns"]


def test_chrome_args_and_return_values(recs, tmp_path):
    rec = recs("ret", [NAMES_PROBE, "r:lookup ret=$retval:s32"], [AGG, "names"]).check()
    ev = by_ph(chrome(rec.path, tmp_path / "ret.json"))
    assert set(ev) == {"M", "X"}
    xs = sorted(ev["X"], key=lambda x: ns(x["ts"]))
    assert [x["args"] for x in xs] == [{"name": s, "n": n, "return": {"ret": n}}
                                       for s, n in NAMES]
    fl = flow_replay(rec.path)
    assert [ns(x["dur"]) for x in xs] == durations(fl)["lookup"]


def test_open_call_is_a_begin_event(tmp_path):
    """flowlate blocks inside longcall() until its stdin ends: a recording
    stopped by -d has longcall's entry and no return."""
    path = tmp_path / "late.usc"
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        p = subprocess.Popen([str(u.uscope_path())] + record_argv(
            path, ["longcall", "after"], [FLOWLATE], extra=["-d", "2"]),
            stdin=subprocess.PIPE, stdout=out, stderr=err)
        u.REGISTRY.uscopes.append(p)
        try:
            rc = p.wait(u.TIMEOUT)
        finally:
            p.stdin.close()         # flowlate, left running, ends
    assert rc == 0, (tmp_path / "err").read_text()
    assert (tmp_path / "out").read_text().startswith("ready\n")
    res = trace_replay(path).check()
    assert [(e.event, e.type) for e in res.events] == [("longcall", "p")]

    ev = by_ph(chrome(path, tmp_path / "late.json"))
    assert set(ev) == {"M", "B"}
    (b,) = ev["B"]
    assert (b["name"], b["cat"], b["tid"], b["args"]) == ("longcall", "function",
                                                          res.events[0].tid, {})
    assert "dur" not in b
    assert ns(b["ts"]) == trace_replay(path, json=True).objects[0]["time_ns"]
    funcs, _, probes = report_json(path)
    assert funcs == {}
    assert probes == {"longcall": (1, 0), "after": (0, 0), "longcall__return": (0, 0),
                      "after__return": (0, 0)}
    uscope("export", "-r", path, "--format", "folded", "-o", tmp_path / "late.folded")
    assert (tmp_path / "late.folded").read_text() == "", "a call counts once it returned"


def test_return_without_entry_is_an_instant(tmp_path):
    """Attached (-p) while flowlate is inside longcall(): longcall's return
    has no entry, after() is a whole call."""
    path = tmp_path / "att.usc"
    t = u.Target([FLOWLATE])
    t.expect("ready")
    bg = u.Background(["record", "-o", path, "-p", t.pid, "longcall", "after"])
    assert bg.wait_ready() == 4
    t.write("go\n")
    t.expect("flowlate done")
    assert t.wait() == 0
    res = bg.result()
    assert res.rc == 0, res.describe()

    fl = flow_replay(path)
    assert fl.seq() == [("<-", "longcall", 0), ("->", "after", 0), ("<-", "after", 0)]
    assert fl.lines[0].duration_ns is None
    ev = by_ph(chrome(path, tmp_path / "att.json"))
    assert set(ev) == {"M", "i", "X"}
    (i,) = ev["i"]
    assert (i["name"], i["cat"], i["s"], i["args"]) == ("longcall", "probe", "t", {})
    assert ns(i["ts"]) == fl.objects[0]["time_ns"]
    (x,) = ev["X"]
    assert (x["name"], ns(x["dur"])) == ("after", fl.lines[2].duration_ns)
    funcs, _, _ = report_json(path)
    assert {f: r["calls"] for f, r in funcs.items()} == {"after": 1}


# --------------------------------------------------------------------------
# 5. export ctf, read by babeltrace2

BT_RE = re.compile(r'^\[(?P<ts>\d+(?:\.\d{9})?)\] \((?P<delta>\S+)\) (?P<host>\S+) (?P<event>\S+): '
                   r'\{ pid = (?P<pid>\d+), tid = (?P<tid>\d+), cpu = (?P<cpu>\d+), '
                   r'comm = "(?P<comm>[^"]*)" \}, \{ ?(?P<fields>.*?) ?\}$')
BT_FIELD_RE = re.compile(r'(\w+) = ("(?:[^"\\]|\\.)*"|[^,]+)(?:, |$)')


def babeltrace(d, *extra):
    cp = subprocess.run(["babeltrace2", *extra, str(d)], capture_output=True, text=True,
                        timeout=u.TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    events = []
    for line in cp.stdout.splitlines():
        m = BT_RE.match(line)
        assert m, f"babeltrace2 line not understood: {line!r}"
        fields = {}
        for k, v in BT_FIELD_RE.findall(m.group("fields")):
            fields[k] = u.c_unescape(v[1:-1]) if v.startswith('"') else \
                int(v, 16) if v.startswith("0x") else int(v)
        events.append(dict(m.groupdict(), fields=fields))
    return events


def test_ctf_of_names(recs, tmp_path):
    rec = names_rec(recs)
    d = tmp_path / "names-ctf"
    uscope("export", "-r", rec.path, "--format", "ctf", "-o", d)
    assert sorted(os.listdir(d)) == ["metadata", "stream"]
    bt = babeltrace(d, "--clock-cycles")
    js = trace_replay(rec.path, json=True).check()
    assert len(bt) == len(js.objects) == 16
    for b, o in zip(bt, js.objects):
        assert (int(b["ts"]), b["event"], int(b["pid"]), int(b["tid"]), int(b["cpu"]),
                b["comm"]) == (o["time_ns"], o["event"], o["pid"], o["tid"], o["cpu"],
                               o["comm"])
    assert [(b["event"], b["fields"]) for b in bt] == \
        [x for s, n in NAMES for x in (("lookup", {"unread": 0, "name": s, "n": n}),
                                       ("lookup__return", {}))]
    # nothing lost, nothing said discarded
    cp = subprocess.run(["babeltrace2", str(d), "-c", "sink.utils.counter"],
                        capture_output=True, text=True, timeout=u.TIMEOUT)
    assert cp.returncode == 0 and "WARNING" not in cp.stderr, cp.stderr
    counts = {}
    for line in cp.stdout.splitlines():
        m = re.match(r"^\s*(\d+) (.+?)s?$", line)     # "1 ... message", "2 ... messages"
        if m:
            counts[m.group(2)] = int(m.group(1))
    assert (counts["Event message"], counts["Discarded event message"]) == (16, 0)
    # the clock's offset: CLOCK_REALTIME less CLOCK_MONOTONIC when recorded
    wall = babeltrace(d, "--clock-seconds")
    meta = (d / "metadata").read_text()
    offset = int(re.search(r"\boffset_s = (\d+);", meta).group(1)) * 10**9 + \
        int(re.search(r"\boffset = (\d+);", meta).group(1))
    assert [int(w["ts"].replace(".", "")) for w in wall] == [o["time_ns"] + offset
                                                            for o in js.objects]
    assert abs(time.time_ns() - time.monotonic_ns() - offset) < 60 * 10**9


def test_ctf_marks_unread_values(recs, tmp_path):
    rec = recs("fault", [NAMES_PROBE + " bad=+0($arg2):u64 hx=$arg2:x16"],
               [AGG, "names"]).check()
    d = tmp_path / "fault-ctf"
    uscope("export", "-r", rec.path, "--format", "ctf", "-o", d)
    bt = [b for b in babeltrace(d, "--clock-cycles") if b["event"] == "lookup"]
    # bad (argument 2) reads address n: a fault, written 0 with bit 2 set
    assert [b["fields"] for b in bt] == [{"unread": 4, "name": s, "n": n, "bad": 0, "hx": n}
                                         for s, n in NAMES]
    assert "integer { size = 16; align = 8; signed = false; base = 16; } _hx;" in \
        (d / "metadata").read_text()


def test_ctf_of_threads(recs, tmp_path):
    rec, m = ft_rec(recs)
    d = tmp_path / "ft-ctf"
    uscope("export", "-r", rec.path, "--format", "ctf", "-o", d)
    bt = babeltrace(d, "--clock-cycles")
    assert collections.Counter(b["event"] for b in bt) == \
        {f: 2 * m for f in ["outer", "inner", "outer__return", "inner__return"]}
    fl = flow_replay(rec.path)
    assert [(int(b["ts"]), int(b["tid"])) for b in bt] == \
        [(o["time_ns"], o["tid"]) for o in fl.objects]
    ts = [int(b["ts"]) for b in bt]
    assert ts == sorted(ts)


def test_ctf_of_stacks(recs, tmp_path):
    """A $ustack is a sequence of its addresses (frame 0 first) with its
    length, as LTTng's callstack contexts: the frames of the recording's own
    JSON, the inlined ones (which share their caller's address) once."""
    rec = recs("stacks", ["leaf x=$arg1 $ustack"], [u.BIN / "stacks", "inline"],
               "inject").check()
    d = tmp_path / "stacks-ctf"
    uscope("export", "-r", rec.path, "--format", "ctf", "-o", d)
    cp = subprocess.run(["babeltrace2", str(d)], capture_output=True, text=True,
                        timeout=u.TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    got = [l for l in cp.stdout.splitlines() if " leaf: " in l]
    js = [o for o in trace_replay(rec.path, json=True).check().objects if o["event"] == "leaf"]
    assert len(got) == len(js) == 1
    m = re.search(r"x = (0x[0-9A-Fa-f]+), ustack_length = (\d+), ustack = \[ (.*) \] \}$",
                  got[0])
    assert m, got[0]
    addrs = [int(a, 16) for a in re.findall(r"\[\d+\] = (0x[0-9A-Fa-f]+)", m.group(3))]
    want = [int(f["addr"], 16) for f in js[0]["args"]["ustack"] if not f["inlined"]]
    assert int(m.group(1), 16) == int(js[0]["args"]["x"], 16)
    assert int(m.group(2)) == len(addrs) == len(want) >= 4 and addrs == want
    assert "_ustack[_ustack_length];" in (d / "metadata").read_text()


# --------------------------------------------------------------------------
# 6. export folded

def folded(path, out):
    uscope("export", "-r", path, "--format", "folded", "-o", out)
    lines = Path(out).read_text().splitlines()
    assert lines == sorted(lines)
    got = {}
    for line in lines:
        m = re.fullmatch(r"(\S+) (\d+)", line)
        assert m, f"folded line {line!r}"
        assert m.group(1) not in got
        got[m.group(1)] = int(m.group(2))
    return got


def test_folded_recursion(recs, tmp_path):
    rec = rec_rec(recs)
    got = folded(rec.path, tmp_path / "rec.folded")
    assert sorted(got) == REC_PATHS
    assert all(v > 0 for v in got.values()), got
    funcs, _, _ = report_json(rec.path)
    assert sum(got.values()) == funcs["deep"]["max_ns"]     # the outermost deep
    # each path's self time: its duration less its callee's
    fl = flow_replay(rec.path)
    dur = {(fl_.function, fl_.depth): fl_.duration_ns for fl_ in fl.lines if fl_.dir == "<-"}
    chain = [dur[("deep", d)] for d in range(4)] + [dur[("nap", 4)]]
    assert [got[p] for p in REC_PATHS] == [a - b for a, b in zip(chain, chain[1:])] + [chain[4]]


def test_folded_threads_sum_over_threads(recs, tmp_path):
    rec, _ = ft_rec(recs)
    got = folded(rec.path, tmp_path / "ft.folded")
    funcs, _, _ = report_json(rec.path)
    assert got == {"outer": funcs["outer"]["self_ns"], "outer;inner": funcs["inner"]["total_ns"]}


# --------------------------------------------------------------------------
# 7. bad input

def one_error(cp, rc):
    assert cp.returncode == rc, f"{cp.args}: exit {cp.returncode}, expected {rc}\n{cp.stderr}"
    lines = error_lines(cp.stderr)
    assert len(lines) == 1 and lines[0].startswith("uscope: "), cp.stderr
    assert cp.stdout == ""
    return lines[0]


def test_bad_input(recs, tmp_path):
    rec, _ = ft_rec(recs)
    one_error(run_uscope(["report"]), 2)
    line = one_error(run_uscope(["report", "-r", rec.path, "--sort", "bogus"]), 2)
    assert "bogus" in line
    assert "--format" in one_error(run_uscope(["export", "-r", rec.path, "-o",
                                               tmp_path / "x"]), 2)
    assert "-o" in one_error(run_uscope(["export", "-r", rec.path, "--format", "chrome"]), 2)
    assert "bogus" in one_error(run_uscope(["export", "-r", rec.path, "--format", "bogus",
                                            "-o", tmp_path / "x"]), 2)
    one_error(run_uscope(["export", "-r", rec.path]), 2)
    assert not (tmp_path / "x").exists()
    missing = tmp_path / "missing.usc"
    for args in (["report", "-r", missing], ["trace", "-r", missing],
                 ["export", "-r", missing, "--format", "ctf", "-o", tmp_path / "ctf"]):
        cp = run_uscope(args)
        assert cp.returncode != 0
        assert str(missing) in one_error(cp, cp.returncode)
    assert not (tmp_path / "ctf").exists()
    # -r reads a recording: no COMMAND, -p or -e with it
    one_error(run_uscope(["trace", "-r", rec.path, "--", "/bin/true"]), 2)
    one_error(run_uscope(["flow", "-r", rec.path, "-e", "inject"]), 2)
    # record needs -o
    one_error(run_uscope(["record", "outer", "--", FLOWTHREADS]), 2)


def test_report_without_r_asks_for_r():
    assert "-r" in one_error(run_uscope(["report"]), 2)
    assert "-r" in one_error(run_uscope(["export", "--format", "chrome", "-o", "/dev/null"]), 2)


def test_failed_export_leaves_no_file(tmp_path):
    cp = run_uscope(["export", "-r", tmp_path / "missing.usc", "--format", "chrome",
                     "-o", tmp_path / "out.json"])
    one_error(cp, 1)
    assert not (tmp_path / "out.json").exists()


# --------------------------------------------------------------------------
# 8. record's exit status is COMMAND's

def test_record_exit_status_is_the_commands(tmp_path):
    for argv, rc in (([ARGS, 2, 7], 7), ([ARGS, 2, 0, 15], 128 + signal.SIGTERM)):
        path = tmp_path / f"args-{rc}.usc"
        cp = run_uscope(record_argv(path, ["add"], argv))
        assert cp.returncode == rc, cp.stderr
        assert cp.stdout == "args done n=2 total=900406\n"
        funcs, _, probes = report_json(path)
        assert {f: r["calls"] for f, r in funcs.items()} == {"add": 2}
        assert probes == {"add": (2, 0), "add__return": (2, 0)}
    cp = run_uscope(record_argv(tmp_path / "none.usc", ["add"], [tmp_path / "no-such-program"]))
    assert cp.returncode == 127, cp.stderr


# --------------------------------------------------------------------------
# Recordings without events, and the flight recorder

def test_recording_without_events(recs):
    """distinct() is never called in names mode."""
    rec = recs("none", ["distinct"], [AGG, "names"]).check()
    assert (summary_of(rec.cp).total, summary_of(rec.cp).lost) == (0, 0)
    res = trace_replay(rec.path).check()
    assert res.events == []
    funcs, _, probes = report_json(rec.path)
    assert funcs == {} and probes == {"distinct": (0, 0), "distinct__return": (0, 0)}


def test_snapshot_written_at_the_end(tmp_path):
    path = tmp_path / "snap.usc"
    cp = run_uscope(record_argv(path, ["distinct i=$arg1:s64"], [AGG, "keys", 1000],
                                extra=["--snapshot", "1M"]))
    assert cp.returncode == 0, cp.stderr
    assert summary_of(cp).total == 2000, cp.stderr
    res = trace_replay(path).check()
    assert [e.args["i"] for e in res.named("distinct")] == list(range(1000))


def test_snapshot_when_command_dies_by_a_signal(tmp_path):
    """aggapp crash 1000 calls distinct(0..999), then writes through NULL: the
    flight recorder keeps the newest 4 KiB of records, written as it dies."""
    path = tmp_path / "snap.usc"
    cp = run_uscope(record_argv(path, ["distinct i=$arg1:s64"], [AGG, "crash", 1000],
                                extra=["--snapshot", "4K"]))
    assert cp.returncode == 128 + signal.SIGSEGV, cp.stderr
    m = re.search(r"the flight recorder kept the newest (\d+) of (\d+) records", cp.stderr)
    assert m and int(m.group(2)) == 2000 and 0 < int(m.group(1)) < 2000, cp.stderr
    res = trace_replay(path, "-v").check()
    assert "snapshot: the traced process died of SIGSEGV" in res.stderr
    ids = [e.args["i"] for e in res.named("distinct")]
    # the newest calls, in order, up to the last one before the crash
    assert ids and ids == list(range(ids[0], 1000)) and ids[0] > 0, ids
    assert len(res.events) == int(m.group(1))


def test_snapshot_on_sigusr1(tmp_path):
    path = tmp_path / "snap.usc"
    t = u.start_spin()
    bg = u.Background(["record", "-o", path, "--snapshot", "64K", "-p", t.pid,
                       "tick n=$arg1:s32"])
    bg.wait_ready()
    bg.signal(signal.SIGUSR1)
    with pytest.raises(subprocess.TimeoutExpired):
        bg.p.wait(2)                # SIGUSR1 does not end it
    bg.signal(signal.SIGTERM)
    res = bg.result()
    assert res.rc == 0, res.describe()
    res = trace_replay(path, "-v").check()
    assert "snapshot: SIGUSR1, then the end of the run" in res.stderr
    ticks = [e.args["n"] for e in res.named("tick")]
    # each dump writes the newest 64K that the one before did not: the ticks
    # rise, none twice, in at most two runs (what the ring overwrote between
    # the dumps is the gap)
    runs = 1 + sum(1 for a, b in zip(ticks, ticks[1:]) if b != a + 1)
    assert ticks and all(b > a for a, b in zip(ticks, ticks[1:])) and runs <= 2, ticks


# --------------------------------------------------------------------------
# A recording made by two engines

def test_mixed_engine_recording(recs):
    rec = recs("mixed", ["handle *r", "area"], [ARGS, 2]).check()
    rep = trace_replay(rec.path).check()
    live = u.trace("handle *r", "area", "r:handle", "r:area", cmd=[ARGS, 2]).check()
    area = u.func_addr(ARGS, "area") & 0xfff
    assert [e.ip & 0xfff for e in rep.named("area")] == [area, area]
    assert [e.args["r"]["id"] for e in rep.named("handle")] == [1, 2]
    u.assert_multiset([norm(e) for e in rep.events], [norm(e) for e in live.events],
                      "replayed vs live events")
