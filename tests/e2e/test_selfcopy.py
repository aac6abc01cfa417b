"""One hit per call: a function's inlined copy of itself is not a second
site. GCC splits a function's unlikely tail into F.part.0 and inlines it
back into F; the DWARF then shows an inlined copy of F inside F (glibc's
syscall wrappers: __libc_write in write). Probing it counted every call on
that path twice. Real inlined copies in other functions, and recursive
calls inlined into F, stay sites."""

import json
import re
import shutil
import subprocess

import pytest

from uscope_e2e import run_uscope, target

ENGINES = ["inject", "bpf", "tracefs"]
N = 40          # small: a tracefs hit costs a kernel uprobe

# libc's wrapper -> the system call strace names
WRAPPERS = {"pread": "pread64", "read": "read", "recv": "recvfrom", "send": "sendto",
            "write": "write", "close": "close", "fsync": "fsync", "openat": "openat",
            "poll": "poll"}


def counts(cp):
    """count --json's final rows -> {probe: count}."""
    assert cp.returncode == 0, cp.stderr
    rows = {}
    for line in cp.stdout.splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            rows[o["probe"]] = o["count"]
    return rows


@pytest.mark.parametrize("engine", ENGINES)
def test_libc_wrappers_count_once_a_call_in_a_threaded_process(engine, tmp_path):
    probes = [f"libc:{w}" for w in WRAPPERS]
    cp = run_uscope(["count", "--json", "-e", engine, *probes, "--",
                     target("wrappers"), str(N), tmp_path / "f"])
    assert counts(cp) == {w: N for w in WRAPPERS}


def strace_counts(n, path):
    """strace -f -c of `wrappers n` -> {syscall: calls}."""
    cp = subprocess.run(["strace", "-f", "-c", "-o", str(path) + ".st", target("wrappers"),
                         str(n), str(path)], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    rows = {}
    for line in open(str(path) + ".st"):
        f = line.split()
        if len(f) >= 5 and f[-1] in WRAPPERS.values() and f[3].isdigit():
            rows[f[-1]] = int(f[3])
    return rows


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed")
def test_libc_wrappers_agree_with_strace(tmp_path):
    """The system calls the loop adds (strace of N calls less strace of 0:
    ld.so's own openat, read and close are in both) are what uscope counts."""
    with_n, without = strace_counts(N, tmp_path / "a"), strace_counts(0, tmp_path / "b")
    cp = run_uscope(["count", "--json", *[f"libc:{w}" for w in WRAPPERS], "--",
                     target("wrappers"), str(N), tmp_path / "f"])
    got = counts(cp)
    for w, sc in WRAPPERS.items():
        assert got[w] == with_n.get(sc, 0) - without.get(sc, 0) == N, (w, sc)


def selfcopy(engine, *extra, probes=("sc_write",)):
    cp = run_uscope(["count", "--json", "-e", engine, *extra, *probes, "--",
                     target("selfcopy"), str(N)])
    m = re.search(r"selfcopy writes=(\d+) msort=(\d+)", cp.stdout)
    assert m, cp.stdout
    return cp, int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("engine", ENGINES)
def test_copy_inlined_back_into_itself_is_not_a_second_site(engine):
    """sc_write runs 6N times: 2N out of line, 4N inlined into sc_via_a and
    sc_via_b; half on the slow path, GCC's sc_write.part.0 inlined back into
    each of those three instances of sc_write."""
    cp, writes, _ = selfcopy(engine)
    assert writes == 6 * N
    assert counts(cp) == {"sc_write": writes}
    cp, _, _ = selfcopy(engine, "--no-inlines")
    assert counts(cp) == {"sc_write": 2 * N}


def test_the_copies_left_out_and_kept_are_said_with_v():
    cp, _, _ = selfcopy("inject", "-v", probes=("sc_write", "sc_msort"))
    assert cp.returncode == 0, cp.stderr
    left = re.findall(r"the copy of sc_write at (0x[0-9a-f]+) is inside sc_write's own code",
                      cp.stderr)
    kept = re.findall(r"inlined copy of (sc_\w+) at 0x[0-9a-f]+ \(\S*selfcopy\.c:(\d+)\)",
                      cp.stderr)
    assert len(left) == 3, cp.stderr
    assert sorted(f for f, _ in kept if f == "sc_write") == ["sc_write"] * 2
    # sc_msort's recursive calls, inlined into sc_msort.part.0 (an instance
    # of sc_msort): real calls, kept
    src = open(target("selfcopy").replace("/bin/selfcopy", "/selfcopy.c")).read()
    recurse = {str(i + 1) for i, ln in enumerate(src.splitlines()) if "RECURSE" in ln
               and "sc_msort(" in ln}
    assert len(recurse) == 2
    assert recurse <= {line for f, line in kept if f == "sc_msort"}, cp.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_real_inlined_copies_in_other_functions_stay(engine):
    """inl.c at -O2: scale() inlined into step_a and step_b plus out of line
    (3N), tick() only inlined (2N)."""
    cp = run_uscope(["count", "--json", "-e", engine, "scale", "tick", "--",
                     target("inl"), str(N)])
    assert counts(cp) == {"scale": 3 * N, "tick": 2 * N}


@pytest.mark.parametrize("engine", ENGINES)
def test_cxx_operator_new_once_a_call_in_a_threaded_process(engine):
    new, delete = "operator new(unsigned long)", "operator delete(void*, unsigned long)"
    cp = run_uscope(["count", "--json", "-e", engine, f"libstdc++:{new}",
                     f"libstdc++:{delete}", "--", target("newloop"), str(N)])
    assert f"newloop n={N} " in cp.stdout
    assert counts(cp) == {new: N, delete: N}
