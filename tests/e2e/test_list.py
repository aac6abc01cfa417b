"""uscope list: functions of a binary (plain, glob, -v) and of a process (-p)."""

from pathlib import Path

import uscope_e2e as u
from uscope_e2e import Target, target

ARGS = target("args")
OURS = {"add", "adjust", "area", "compute", "handle", "main", "note", "pack", "peek", "sum3"}


def test_list_binary_sorted():
    r = u.run_uscope(["list", ARGS])
    assert r.returncode == 0, r.stderr
    names = r.stdout.splitlines()
    assert names == sorted(names)
    assert len(names) == len(set(names))
    assert OURS <= set(names), OURS - set(names)
    assert all(n and " " not in n for n in names), names
    assert not ({"g_iter", "g_magic", "g_sink"} & set(names)), "data symbols listed"


def test_list_glob():
    r = u.run_uscope(["list", ARGS, "a*"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["add", "adjust", "area"]
    r = u.run_uscope(["list", ARGS, "?dd"])
    assert r.stdout.splitlines() == ["add"]


def test_list_verbose():
    r = u.run_uscope(["list", "-v", ARGS, "[ac]*"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    nm = u.nm_funcs(ARGS)
    assert [l.split()[-1] for l in lines] == ["add", "adjust", "area", "compute"]
    for line in lines:
        f = line.split()
        assert len(f) == 4, line
        assert all(x.startswith("0x") for x in f[:3]), line
        addr, size, off = (int(x, 16) for x in f[:3])
        name = f[3]
        assert (addr, size) == nm[name][0], (line, nm[name])
        assert off == u.file_offset(ARGS, addr), line


def test_list_verbose_nopie_file_offset():
    nopie = target("args-nopie")
    r = u.run_uscope(["list", "-v", nopie, "add"])
    assert r.returncode == 0, r.stderr
    f = r.stdout.split()
    assert int(f[0], 16) == u.func_addr(nopie, "add")
    assert int(f[2], 16) == u.file_offset(nopie, int(f[0], 16)) == int(f[0], 16) - 0x400000


def test_list_pid():
    t = Target([target("uselib"), 1, "wait"])
    t.expect("uselib done n=1 total=2")
    t.expect("ready")
    r = u.run_uscope(["list", "-p", t.pid, "lib_*"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "libdemo.so:lib_mul" in lines, lines
    assert all(":" in l and l.split(":", 1)[1].startswith("lib_") for l in lines), lines
    r = u.run_uscope(["list", "-p", t.pid, "main"])
    assert "uselib:main" in r.stdout.splitlines(), r.stdout
    r = u.run_uscope(["list", "-p", t.pid, "malloc"])
    assert "libc.so.6:malloc" in r.stdout.splitlines(), r.stdout
    t.close_stdin()
    assert t.wait() == 0


PATCHME = target("patchme")


def test_list_patchable_verbose():
    """--patchable -v: a line per function, the rule that refuses it named."""
    r = u.run_uscope(["list", "--patchable", "-v", PATCHME, "pm_*"])
    assert r.returncode == 0, r.stderr
    lines = {l.split()[0]: l for l in r.stdout.splitlines() if "  entry: " in l}
    assert set(lines) == {"pm_switch", "pm_plain", "pm_into_prologue", "pm_shared_ret",
                          "pm_tiny", "pm_unknown_table"}, r.stdout
    # its jump table read, its .cold part (the default case) included
    assert lines["pm_switch"] == "pm_switch  entry: ok  return: ok"
    assert lines["pm_plain"] == "pm_plain  entry: ok  return: ok"
    entry, ret = lines["pm_into_prologue"].split("  entry: ")[1].split("  return: ")
    assert entry.startswith("a branch targets the displaced bytes"), entry
    assert ret == "ok"
    entry, ret = lines["pm_shared_ret"].split("  entry: ")[1].split("  return: ")
    assert entry == "ok"
    assert ret.startswith("a branch targets the displaced bytes") and "to the return" in ret
    entry, ret = lines["pm_tiny"].split("  entry: ")[1].split("  return: ")
    assert entry.startswith("function shorter than the patch"), entry
    assert ret.startswith("the return's block is shorter than the patch"), ret
    entry, ret = lines["pm_unknown_table"].split("  entry: ")[1].split("  return: ")
    assert entry.startswith("a jump table whose targets are unknown"), entry
    assert ret.startswith("a jump table whose targets are unknown"), ret
    assert "6 functions: entry ok 3 (50.0%), return ok 3 (50.0%)" in r.stdout


def test_list_patchable_summary():
    r = u.run_uscope(["list", "--patchable", PATCHME, "pm_*"])
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "6 functions: entry ok 3 (50.0%), return ok 3 (50.0%)", r.stdout
    assert "  entry refused:      1  function shorter than the patch" in out
    assert "  return refused:      1  a jump table whose targets are unknown" in out
    assert not [l for l in out if "  entry: " in l]
    # the whole file: every function of a real binary is accounted for
    r = u.run_uscope(["list", "--patchable", PATCHME])
    assert r.returncode == 0, r.stderr
    assert " functions: entry ok " in r.stdout.splitlines()[0]


def test_list_patchable_usage():
    r = u.run_uscope(["list", "--patchable", "-p", "1"])
    assert r.returncode == 2
    assert "--patchable" in r.stderr


def test_list_vars_and_lines_take_a_short_library_name():
    """--vars and --lines find BINARY as list and trace do: libdemo is
    libdemo.so on LD_LIBRARY_PATH, libc the system's libc.so.6."""
    lib = Path(target("libdemo.so"))
    env = {"LD_LIBRARY_PATH": str(lib.parent)}
    r = u.run_uscope(["list", "--vars", "lib_mul", "libdemo"], env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("lib_mul at 0x") and lines[0].endswith("/libdemo.so):"), lines
    assert [l.split() for l in lines[1:]] == [["int", "a", "(parameter)"],
                                              ["int", "b", "(parameter)"]]
    r = u.run_uscope(["list", "--lines", "lib_mul", "libdemo"], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"lib_mul ({lib.parent.parent / 'libdemo.c'}):"
    assert [l.split()[0] for l in r.stdout.splitlines()[1:] if l[:7].strip()] == ["3", "4"]
    # libc: found by its short name; its variables if its debug info is installed
    r = u.run_uscope(["list", "--vars", "malloc", "libc"])
    assert "no such file" not in r.stderr, r.stderr
    assert (r.returncode == 0 and "libc.so.6):" in r.stdout.splitlines()[0]) or \
        (r.returncode == 1 and "has no debug info" in r.stderr), (r.stdout, r.stderr)
    r = u.run_uscope(["list", "--vars", "lib_mul", "libnosuchthing"])
    assert r.returncode == 1
    assert "no such file, command or library: libnosuchthing" in r.stderr
