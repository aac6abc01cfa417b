"""Debian's python3.11, through its USDT probes (%python:*), traced with -p
while a script does a known amount of work between two lines it reads, and
compared with Python's own counters: gc.get_stats()'s collections per
generation, and the generator resumes the script makes.

Python 3.11 fires function__return at every Python function's return but
function__entry only for frames entered from C (bpftrace sees the same):
the tests count returns."""

import subprocess

import pytest

import real_programs as rp
import uscope_e2e as u

PYTHON = "/usr/bin/python3.11"
rp.need(PYTHON)

FAST_ENGINES = ["inject", "bpf"]    # tracefs: see test_real_redis.py
GENS, ITEMS = 5, 3      # generators, and the values each yields
# gc off: an automatic collection (allocating readline, get_stats) could fall
# in uscope's window and out of before..after; gc.collect() still collects
SCRIPT = f"""
import gc, sys
gc.disable()
def squares(n):
    for i in range(n):
        yield i * i
print("ready", flush=True)
sys.stdin.readline()
before = [s["collections"] for s in gc.get_stats()]
total = sum(sum(squares({ITEMS})) for _ in range({GENS}))
gc.collect(0); gc.collect(2); gc.collect(1); gc.collect(2)
after = [s["collections"] for s in gc.get_stats()]
print("total", total, "collections", *[a - b for a, b in zip(after, before)], flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def python():
    t = u.Target([PYTHON, "-c", SCRIPT])
    t.expect("ready")
    yield t
    if t.alive():
        t.kill()


def work(python, session):
    """Let the script work; -> the collections it counted, per generation."""
    python.write("go\n")
    line = python.readline().split()
    assert line[:2] == ["total", str(GENS * sum(i * i for i in range(ITEMS)))], line
    session.stop().ok()
    python.close_stdin()
    assert python.wait() == 0
    return [int(x) for x in line[3:]]


@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_gc_collections_equal_pythons(python, engine):
    s = rp.attach("count", python.pid, "--json", "%python:gc__start gen=$arg1:s32",
                  engine=engine)
    collections = work(python, s)
    got = {r["key"]["gen"]: r["count"] for r in rp.agg_rows(s.stdout)}
    assert got == {g: n for g, n in enumerate(collections) if n}, s.describe()


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_returns_equal_generator_resumes(python, engine):
    s = rp.attach("count", python.pid, "--json",
                  '%python:function__return f=$arg2:string if f == "squares"', engine=engine)
    work(python, s)
    # each generator returns at each of its yields and at its end
    assert [(r["key"]["f"], r["count"]) for r in rp.agg_rows(s.stdout)] == \
        [("squares", GENS * (ITEMS + 1))], s.describe()


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_latency_of_each_collection(python, engine):
    # gc__start pairs with gc__done by name, as flow pairs them
    s = rp.attach("latency", python.pid, "--json", "%python:gc__start", "%python:gc__done",
                  engine=engine)
    collections = work(python, s)
    (r,) = rp.agg_rows(s.stdout)
    assert r["count"] == sum(collections), s.describe()
    rp.agg_consistent(r)


def test_usdt_probes_listed():
    cp = u.run_uscope(["list", "--usdt", PYTHON, "python:gc*"])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == [f"{PYTHON} %python:gc__done",
                                      f"{PYTHON} %python:gc__start"]
    r = subprocess.run(["readelf", "-nW", PYTHON], capture_output=True, text=True)
    assert r.stdout.count("Name: gc__start") == 1
