"""Kernels without what the bpf engine needs, on this one: what uscope does
where a feature is missing (issue 37), seen here through USCOPE_BPF_LACK
(features taken as absent, engine/kfeat.c) and a load the kernel refuses
(a verifier log too small for it: ENOSPC). The real kernels, Debian's 6.1,
6.12 and 5.10, are booted by the kernel matrix (tests/vm).

- -e bpf is refused in one line naming what the kernel lacks;
- -e auto never fails because the bpf engine cannot be used or loaded: each
  site goes to the next engine that can take it (tracefs for system-wide
  sites and flow's returns) and -v says why;
- a kernel without sleepable uprobes reads memory not paged in as (fault),
  one with them but without bpf_copy_from_user_str reads it all the same;
- without the BPF memory allocator every hash map is preallocated (a run-time
  allocated one makes such a kernel warn in its log)."""

import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

import uscope_e2e as u
from uscope_e2e import Background, run_uscope, target

AGG = target("aggapp")
COLD = target("coldstr")
FLOWFIB = target("flowfib")
NAMES = {"alpha": 3, "beta": 2, "gamma": 1, "gadget": 1}
REFUSE_LOAD = {"USCOPE_BPF_LOG": "/dev/null", "USCOPE_BPF_LOG_LEVEL": "2",
               "USCOPE_BPF_LOG_SIZE": "256"}


def rows(stdout):
    return {r["key"]["name"]: r["count"] for r in map(json.loads, stdout.splitlines())
            if r.get("key", {}).get("name") in NAMES}


@pytest.mark.parametrize("lack,said", [
    ("loop", "the bpf_loop helper"),
    ("task_storage,cookie", "task storage maps and uprobe attach cookies"),
    ("btf", "its own BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF)"),
])
def test_bpf_refused_in_one_line_naming_what_is_missing(lack, said):
    cp = run_uscope(["count", "-e", "bpf", "lookup", "--", AGG, "names"],
                    env={"USCOPE_BPF_LACK": lack})
    assert cp.returncode == 1
    lines = [l for l in cp.stderr.splitlines() if l.strip()]
    assert lines == [f"uscope: the bpf engine needs what this kernel lacks: {said} "
                     "(-e inject and -e tracefs do without)"]
    assert cp.stdout == ""


def test_bpf_refused_in_one_line_when_its_program_does_not_load():
    cp = run_uscope(["count", "-e", "bpf", "lookup", "--", AGG, "names"], env=REFUSE_LOAD)
    assert cp.returncode == 1
    assert [l for l in cp.stderr.splitlines() if l.strip()] == [
        "uscope: the bpf engine's program does not load on this kernel: No space left on "
        "device; -e inject and -e tracefs do without"]


@pytest.mark.parametrize("how", ["lacks", "load"])
def test_auto_system_wide_goes_to_tracefs(how, monkeypatch):
    """The README's system-wide count on a kernel where bpf cannot be used:
    tracefs takes it, and the answer is the same (a copy of the target of
    the test's own: no other process's calls)."""
    if how == "lacks":
        monkeypatch.setenv("USCOPE_BPF_LACK", "loop")
    else:
        for k, v in REFUSE_LOAD.items():
            monkeypatch.setenv(k, v)
    with tempfile.TemporaryDirectory() as d:
        app = os.path.join(d, "aggapp")
        shutil.copy(AGG, app)
        bg = Background(["count", "-v", "--json", f"{app}:lookup name=$arg1:string"])
        bg.wait_ready()
        for _ in range(2):
            subprocess.run([app, "names"], check=True, stdout=subprocess.DEVNULL)
        bg.signal(2)
        res = bg.result()
    assert res.rc == 0, res.stderr
    assert rows(res.stdout) == {k: 2 * v for k, v in NAMES.items()}
    why = "what this kernel lacks: the bpf_loop helper" if how == "lacks" else \
        "program does not load on this kernel"
    assert re.search(r"^uscope: not using the bpf engine: .*" + re.escape(why), res.stderr, re.M)
    assert re.search(r"^uscope: .*: 1 site on tracefs$", res.stderr, re.M), res.stderr


@pytest.mark.parametrize("how", ["lacks", "load"])
def test_auto_flow_goes_to_the_next_engine(how):
    """flow fib: the return that inject cannot patch went to bpf; without
    bpf, to tracefs, and the flow is whole."""
    env = {"USCOPE_BPF_LACK": "loop"} if how == "lacks" else REFUSE_LOAD
    cp = run_uscope(["flow", "--json", "-v", "-q", "fib", "--", FLOWFIB, "3"], env=env)
    assert cp.returncode == 0, cp.stderr
    ev = [(e["type"], e["depth"]) for e in map(json.loads, cp.stdout.splitlines()[1:])
          if e.get("function") == "fib"]
    assert ev == [("entry", 0), ("entry", 1), ("entry", 2), ("return", 2), ("entry", 2),
                  ("return", 2), ("return", 1), ("entry", 1), ("return", 1), ("return", 0)]
    assert "uscope: not using the bpf engine: " in cp.stderr


@pytest.mark.parametrize("lack,want", [
    ("", ["the first cold string", "the second cold string", "the third cold string",
          "the fourth cold string"]),
    ("copy_str", ["the first cold string", "the second cold string", "the third cold string",
                  "the fourth cold string"]),
    ("sleepable", [None] * 4),
])
def test_strings_not_paged_in(lack, want):
    """Strings on pages no one touched: the sleepable program faults them in
    (with the kfunc, or without it by a one-byte copy of each page first);
    without sleepable uprobes they are faults, and -v says why in one line."""
    cp = run_uscope(["trace", "--json", "-v", "-e", "bpf", "report s=$arg1:string", "--", COLD],
                    env={"USCOPE_BPF_LACK": lack})
    assert cp.returncode == 0, cp.stderr
    got = [json.loads(l)["args"]["s"] for l in cp.stdout.splitlines() if l.startswith("{")]
    assert got == want
    lacks = [l for l in cp.stderr.splitlines() if l.startswith("uscope: bpf: this kernel lacks")]
    if lack == "sleepable":
        assert lacks == ["uscope: bpf: this kernel lacks sleepable uprobes: values in memory "
                         "not paged in yet show as (fault)"]


def maps_of(pid):
    """The BPF maps process pid holds: {name: bpftool's record} (their ids
    from its fds' fdinfo, their names from bpftool)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            m = re.search(r"^map_id:\s*(\d+)", open(f"/proc/{pid}/fdinfo/{fd}").read(), re.M)
        except OSError:
            continue
        if m:
            ids.add(int(m.group(1)))
    out = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {m["name"]: m for m in json.loads(out) if m["id"] in ids}


@pytest.mark.parametrize("lack", ["", "mem_alloc"])
def test_hash_maps_preallocated_where_the_kernel_would_warn(lack, monkeypatch):
    """The engine's hash maps (and the inject gate's) are allocated as they
    fill where the kernel has the BPF memory allocator, preallocated where it
    has not (bpftool shows their flags: BPF_F_NO_PREALLOC is 1)."""
    monkeypatch.setenv("USCOPE_BPF_LACK", lack)
    t = u.start_spin()
    try:
        bg = Background(["count", "-e", "bpf", "-p", t.pid, "tick n=$arg1:s32"])
        bg.wait_ready()
        maps = maps_of(bg.pid)
        bg.signal(2)
        assert bg.wait() == 0
    finally:
        t.kill()
    assert {"agg", "tgids"} <= set(maps), sorted(maps)
    for name in ("agg", "tgids"):
        assert bool(maps[name]["flags"] & 1) == (lack == ""), (name, maps[name])
