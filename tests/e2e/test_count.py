"""uscope count: hits per probe at the end and every interval (funccount)."""

import json
import re
import subprocess
import time

import uscope_e2e as u
from uscope_e2e import Background, Waiter, run_uscope, target

ARGS = target("args")


def table(stdout):
    """The last PROBE/COUNT table -> {probe: count}."""
    rows, cur = {}, None
    for line in stdout.splitlines():
        if line.startswith("PROBE"):
            cur = {}
            rows = cur
        elif cur is not None and re.match(r"^\S+\s+\d+$", line):
            name, n = line.split()
            cur[name] = int(n)
    return rows


def test_count_command_exact():
    cp = run_uscope(["count", "a*", "compute", "--", ARGS, "7", "3"])
    assert cp.returncode == 3
    assert table(cp.stdout) == {"add": 7, "adjust": 7, "area": 7, "compute": 7}
    # the command's own output is untouched
    assert "args done n=7" in cp.stdout


def test_count_lists_a_globs_functions_hit_unless_all():
    """As funccount: of a glob's functions, those hit (args 0 calls only
    peek); a probe that is no glob keeps its row of 0; --all lists them
    all, with 0 for the others."""
    cp = run_uscope(["count", "a*", "p*", "handle", "--", ARGS, "0"])
    assert cp.returncode == 0, cp.stderr
    assert table(cp.stdout) == {"peek": 3, "handle": 0}
    assert "(4 not hit: --all lists them)" in cp.stdout.splitlines()
    cp = run_uscope(["count", "--all", "--json", "a*", "p*", "handle", "--", ARGS, "0"])
    assert cp.returncode == 0, cp.stderr
    rows = {r["probe"]: r["count"] for r in map(json.loads, cp.stdout.splitlines()[1:])}
    assert rows == {"peek": 3, "add": 0, "adjust": 0, "area": 0, "pack": 0, "handle": 0}


def test_count_system_wide_uses_the_kernels_hit_counts():
    bg = Background(["count", "-d", "3", f"{ARGS}:add", f"{ARGS}:area"])
    bg.wait_ready()
    for n in (4, 2):
        subprocess.run([ARGS, str(n)], stdout=subprocess.DEVNULL, check=True)
    cp = bg.result()
    assert cp.rc == 0
    assert table(cp.stdout) == {"add": 6, "area": 6}


def test_count_pid_counts_only_that_process():
    w = Waiter()
    other = Waiter()
    bg = Background(["count", "-p", w.pid, "--json", "on_line"])
    bg.wait_ready()
    for i in range(5):
        w.send(f"line {i}")
    for i in range(3):
        other.send("other")
    w.close_stdin()
    assert w.wait() == 0
    res = bg.result()
    rows = [json.loads(l) for l in res.stdout.splitlines() if l.strip()]
    assert rows == [{"probe": "on_line", "count": 5, "final": True, "v": 1}]
    other.close_stdin()
    other.wait()


def test_count_interval_reports():
    spin = u.start_spin()
    cp = run_uscope(["count", "-p", spin.pid, "-d", "2.6", "-i", "1", "--json", "tick"])
    spin.kill()
    assert cp.returncode == 0
    rows = [json.loads(l) for l in cp.stdout.splitlines() if l.strip()]
    intervals = [r for r in rows if not r["final"]]
    finals = [r for r in rows if r["final"]]
    assert len(intervals) == 2 and len(finals) == 1 and rows[-1]["final"]
    # about a tick per millisecond; the intervals add up to no more than the total
    assert all(r["probe"] == "tick" and r["count"] > 100 for r in intervals)
    assert sum(r["count"] for r in intervals) <= finals[0]["count"]
