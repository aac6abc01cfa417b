"""uscope count (with keys), hist and latency, and filters: exact counts,
buckets and latencies from tests/targets/aggapp.c, on every engine, and
where each engine aggregates (in place, or uscope from its events)."""

import json

import pytest

from uscope_e2e import error_lines, run_uscope, target

AGG = target("aggapp")
ENGINES = ["inject", "bpf", "tracefs"]
LONG = "x" * 64     # aggapp's 100-byte name, cut to the key's 64 bytes


def rows(cp, final=True):
    """--json rows of the final report (or the interval ones)."""
    assert cp.returncode == 0, cp.stderr
    out = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
    return [r for r in out if r.get("final") == final and not r.get("call")]


def counts(cp):
    """{(probe, ((name, value), ...)): count} of the final report."""
    return {(r["probe"], tuple(sorted(r["key"].items()))): r["count"] for r in rows(cp)}


def where(cp):
    """How -v says the probes were aggregated."""
    return {l.split(": ", 2)[2] for l in cp.stderr.splitlines()
            if "aggregated" in l and " at 0x" in l}


IN_PLACE = {"inject": "aggregated where the probe runs on inject",
            "bpf": "aggregated where the probe runs on bpf",
            "tracefs": "aggregated by uscope from its events on tracefs"}


@pytest.mark.parametrize("engine", ENGINES)
def test_count_by_string_key(engine):
    cp = run_uscope(["count", "-v", "--json", "-e", engine, "lookup name=$arg1:string",
                     "--", AGG, "names"])
    assert counts(cp) == {("lookup", (("name", "alpha"),)): 3,
                          ("lookup", (("name", "beta"),)): 2,
                          ("lookup", (("name", "gamma"),)): 1,
                          ("lookup", (("name", "gadget"),)): 1,
                          ("lookup", (("name", LONG),)): 1}
    cut = {r["key"]["name"]: r["cut"] for r in rows(cp)}
    assert cut == {"alpha": False, "beta": False, "gamma": False, "gadget": False, LONG: True}
    assert where(cp) == {IN_PLACE[engine]}


@pytest.mark.parametrize("engine", ENGINES)
def test_count_by_integer_key_text(engine):
    cp = run_uscope(["count", "-e", engine, "lookup n=$arg2:s32", "--", AGG, "names"])
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    head = lines.index(f"{'PROBE KEY':40} {'COUNT':>12}")
    # by count, then by key; PROBE KEY then COUNT, as without keys
    assert lines[head + 1:head + 6] == [f"{'lookup n=' + k:40} {c:12}" for k, c in
                                        [("1", 3), ("2", 2), ("3", 1), ("4", 1), ("5", 1)]]


def test_count_top_and_keyless_rows():
    cp = run_uscope(["count", "--top", "2", "lookup n=$arg2:s32", "take", "--", AGG, "names"])
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    head = lines.index(f"{'PROBE KEY':40} {'COUNT':>12}")
    assert lines[head + 1:head + 4] == [f"{'lookup n=1':40} {3:12}", f"{'lookup n=2':40} {2:12}",
                                        "(3 more)"]


def hist_buckets(r):
    return [(b.get("min"), b.get("max"), b["count"]) for b in r["buckets"]]


@pytest.mark.parametrize("engine", ENGINES)
def test_hist_log2(engine):
    cp = run_uscope(["hist", "--json", "-e", engine, "take n=$arg1:u64", "--", AGG, "sizes"])
    (r,) = rows(cp)
    assert (r["probe"], r["key"], r["value"]) == ("take", {}, "n")
    assert (r["count"], r["sum"], r["min"], r["max"]) == (100, 5050, 1, 100)
    assert hist_buckets(r) == [(1, 1, 1), (2, 3, 2), (4, 7, 4), (8, 15, 8), (16, 31, 16),
                               (32, 63, 32), (64, 127, 37)]


@pytest.mark.parametrize("engine", ENGINES)
def test_hist_linear_text(engine):
    cp = run_uscope(["hist", "-e", engine, "--linear", "0,100,10", "take n=$arg1:u64",
                     "--", AGG, "sizes"])
    assert cp.returncode == 0, cp.stderr
    lines = [l for l in cp.stdout.splitlines() if l.startswith(("[", "(", "take", "count"))]
    full = "|" + "@" * 52 + "|"
    assert lines[0] == "take: n"
    assert lines[1] == "[0, 10)                 9 |" + "@" * 47 + " " * 5 + "|"
    assert lines[2:11] == [f"[{lo}, {lo + 10})".ljust(16) + "       10 " + full
                           for lo in range(10, 100, 10)]
    assert lines[11] == "[100, ...)              1 |" + "@" * 6 + " " * 46 + "|"
    assert lines[12] == "count 100  min 1  avg 50.5  max 100  sum 5050"


def test_hist_keyed_by_the_other_arguments():
    cp = run_uscope(["hist", "--json", "lookup name=$arg1:string n=$arg2:s32", "--", AGG,
                     "names"])
    got = {r["key"]["name"]: (r["count"], hist_buckets(r)) for r in rows(cp)}
    assert got == {"alpha": (3, [(1, 1, 3)]), "beta": (2, [(2, 3, 2)]),
                   "gamma": (1, [(2, 3, 1)]), "gadget": (1, [(4, 7, 1)]),
                   LONG: (1, [(4, 7, 1)])}


@pytest.mark.parametrize("engine", ENGINES)
def test_latency_of_known_sleeps(engine):
    cp = run_uscope(["latency", "-v", "--json", "--unit", "us", "-e", engine, "nap",
                     "--", AGG, "sleep"])
    (r,) = rows(cp)
    assert (r["probe"], r["unit"], r["count"]) == ("nap", "us", 6)
    # nap(600) x3, nap(3000) x2, nap(12000): each sleeps at least that long.
    # A loaded machine (CI) can wake a sleeper late (a 600 us sleep took
    # 2 ms there), never early: each call, in order, lands in its own
    # bucket or up to three above (8x); a wrong unit would be 1000x off.
    got = sorted(lo for lo, _, n in hist_buckets(r) for _ in range(n))
    want = [512, 512, 512, 2048, 2048, 8192]
    assert all(w <= g <= 8 * w for g, w in zip(got, want)), (got, want)
    assert 600 <= r["min"] < 8 * 1024 and 12000 <= r["max"] < 8 * 16384
    assert r["p50"] <= r["p99"] <= r["max"]
    assert where(cp) == {IN_PLACE[engine]}


@pytest.mark.parametrize("engine", ENGINES)
def test_latency_of_a_recursive_function(engine):
    # deep(3) -> deep(2) -> deep(1) -> deep(0), which sleeps 2 ms: four calls
    # of 2 to 4 ms, each paired with its own return
    cp = run_uscope(["latency", "--json", "--unit", "us", "-e", engine, "deep",
                     "--", AGG, "rec"])
    (r,) = rows(cp)
    assert r["count"] == 4
    # a sleep never ends early: each call, paired with its own return, took
    # 2 ms or more (how much later a loaded machine wakes is not asserted:
    # no timed tests); a return paired with no entry would be a row of 0
    assert sum(n for lo, _, n in hist_buckets(r) if lo >= 1024) == 4
    assert r["min"] >= 2000


def test_latency_per_call_and_key():
    cp = run_uscope(["latency", "--json", "--per-call", "--unit", "ms",
                     "nap us=$arg1:s64", "--", AGG, "sleep"])
    assert cp.returncode == 0, cp.stderr
    objs = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
    calls = [o for o in objs if o.get("call")]
    assert [(c["key"]["us"], c["unit"]) for c in calls] == \
        [(600, "ms")] * 3 + [(3000, "ms")] * 2 + [(12000, "ms")]
    # whole ms; a sleep never ends early (how late a loaded machine wakes is
    # not asserted: no timed tests)
    lat = [c["latency"] for c in calls]
    assert all(l >= 0 for l in lat[:3]) and all(l >= 3 for l in lat[3:5]) and \
        lat[5] >= 12, lat
    by_key = {r["key"]["us"]: r["count"] for r in rows(cp)}
    assert by_key == {600: 3, 3000: 2, 12000: 1}


@pytest.mark.parametrize("engine", ENGINES)
def test_filters_on_integers_strings_and_globs(engine):
    def run(probe):
        return counts(run_uscope(["count", "--json", "-e", engine, probe, "--", AGG, "names"]))

    assert run("lookup n=$arg2:s32 if n >= 2 && n != 4") == {
        ("lookup", (("n", 2),)): 2, ("lookup", (("n", 3),)): 1, ("lookup", (("n", 5),)): 1}
    assert run('lookup name=$arg1:string if name == "beta" || name == "alpha"') == {
        ("lookup", (("name", "alpha"),)): 3, ("lookup", (("name", "beta"),)): 2}
    assert run('lookup name=$arg1:string if name == "ga*" && !(name == "*et")') == {
        ("lookup", (("name", "gamma"),)): 1}
    # an operand that is no argument: fetched, not a key
    assert run("lookup if $arg2 > 3") == {("lookup", ()): 2}


@pytest.mark.parametrize("engine", ENGINES)
def test_trace_filter(engine):
    cp = run_uscope(["trace", "-q", "-e", engine,
                     'lookup name=$arg1:string if name == "[bg]*" && $arg2:s32 < 4',
                     "--", AGG, "names"])
    assert cp.returncode == 0, cp.stderr
    names = [l.split("name=")[1] for l in cp.stdout.splitlines() if "name=" in l]
    assert names == ['"beta"', '"beta"', '"gamma"']


@pytest.mark.parametrize("engine", ENGINES)
def test_key_table_overflow_is_counted(engine):
    cp = run_uscope(["count", "--json", "--max-keys", "10", "-e", engine,
                     "distinct i=$arg1:s64", "--", AGG, "keys", "100"])
    got = counts(cp)
    assert got == {("distinct", (("i", i),)): 1 for i in range(10)}
    assert any("90 hits not counted: the key table was full" in l
               for l in cp.stderr.splitlines()), cp.stderr


def test_interval_reports_add_up():
    # spread: the naps 50 ms apart, so the run lasts several intervals even
    # when the machine is busy (sleep's 22 ms could end before the first)
    cp = run_uscope(["hist", "--json", "-i", "0.02", "nap us=$arg1:s64", "--", AGG, "spread"])
    assert cp.returncode == 0, cp.stderr
    intervals, final = rows(cp, final=False), rows(cp)
    assert sum(r["count"] for r in intervals) <= sum(r["count"] for r in final) == 6
    assert len(intervals) >= 1


def test_bad_aggregations_are_refused_with_a_caret():
    cp = run_uscope(["hist", "take", "--", AGG, "sizes"])
    assert cp.returncode == 1
    assert error_lines(cp.stderr)[0].startswith("uscope: bad probe: hist needs a value")
    cp = run_uscope(["hist", "lookup name=$arg1:string", "--", AGG, "names"])
    assert cp.returncode == 1
    assert cp.stderr.splitlines()[1:] == ["  lookup name=$arg1:string", "         ^"]
    cp = run_uscope(["latency", "lookup+4", "--", AGG, "names"])
    assert cp.returncode == 1
    assert "latency takes functions" in cp.stderr
    cp = run_uscope(["count", "lookup n=$arg2:s32 if size > 3", "--", AGG, "names"])
    assert cp.returncode == 1
    assert cp.stderr.splitlines() == [
        "uscope: bad probe: no fetch argument of this name in the probe",
        "  lookup n=$arg2:s32 if size > 3",
        "                        ^"]
    cp = run_uscope(["count", 'lookup n=$arg2:s32 if n == "x"', "--", AGG, "names"])
    assert cp.returncode == 1
    assert "'n' is a number, and is compared with a string" in cp.stderr


@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_threads_add_up_exactly(engine):
    # 8 threads call work(t, i) 3000 times each: every thread's own values
    # (inject) or every CPU's (bpf) summed, key by key; latency of every call
    cp = run_uscope(["count", "--json", "-e", engine, "work t=$arg1:s32",
                     "--", target("threads"), "8", "3000"])
    assert counts(cp) == {("work", (("t", t),)): 3000 for t in range(8)}
    cp = run_uscope(["latency", "--json", "-e", engine, "work",
                     "--", target("threads"), "8", "3000"])
    (r,) = rows(cp)
    assert r["count"] == 24000


def test_latency_of_a_stripped_library_function():
    # Debian's libsqlite3 has no .symtab; sqlite3_step tail-calls through its
    # PLT: those jumps are calls of other functions, not parts of it (once
    # they put every PLT entry's jmp among its returns)
    cp = run_uscope(["latency", "--json", "-v", "libsqlite3:sqlite3_step", "--", "sqlite3",
                     ":memory:", "create table t(a); insert into t values (1), (2);",
                     "select a from t;"])
    (r,) = rows(cp)
    assert r["probe"] == "sqlite3_step" and r["count"] >= 3
    sites = [l for l in cp.stderr.splitlines() if "sqlite3_step" in l and " at 0x" in l]
    assert 2 <= len(sites) <= 16, sites
