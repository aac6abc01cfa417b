"""Error cases: one `uscope: ` line on stderr and exit 1 (a malformed probe:
three lines with a caret; COMMAND not found: 127)."""

import re
import subprocess

import pytest

import uscope_e2e as u
from uscope_e2e import target

ARGS = target("args")


def single_error(r, rc=1):
    lines = u.error_lines(r.stderr)
    assert r.returncode == rc, f"exit {r.returncode}, expected {rc}; stderr:\n{r.stderr}"
    assert len(lines) == 1, f"expected one line on stderr:\n{r.stderr}"
    assert lines[0].startswith("uscope: "), lines[0]
    assert "args done" not in r.stdout, "the command ran despite the error"
    return lines[0]


@pytest.mark.parametrize("sym", ["ad", "addd", "adf"])
def test_unknown_symbol_suggests(sym):
    r = u.run_uscope(["trace", f"{sym} a=$arg1:s32", "--", ARGS, 1])
    msg = single_error(r)
    assert "did you mean" in msg.lower(), msg
    assert re.search(r"\badd\b", msg.lower().split("did you mean", 1)[1]), msg


def test_unknown_symbol_in_library_suggests():
    r = u.run_uscope(["trace", "libdemo:lib_mull", "--", target("uselib"), 1])
    msg = single_error(r)
    assert "did you mean" in msg.lower() and re.search(r"\blib_mul\b", msg), msg


# (probe, the caret offsets into the probe text that are acceptable)
MALFORMED = [
    ("add a=$arg1:u33", lambda p: {p.index("u33"), p.index(":u33")}),
    ("add a=$arg10", lambda p: {p.index("$arg10"), p.index("10")}),
    ("add $arg0:s32", lambda p: {p.index("$arg0"), p.index("0:")}),
    ("add x=+8($arg1", lambda p: {len(p), p.index("(")}),
    ("add path=+0(+8($arg1):string", lambda p: {p.index(":string"), len(p), p.index("(")}),
    ("add ret=$retval", lambda p: {p.index("$retval")}),
    ("add a=%rxx", lambda p: {p.index("%rxx"), p.index("rxx")}),
]


@pytest.mark.parametrize("probe,carets", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_probe_caret(probe, carets):
    r = u.run_uscope(["trace", probe, "--", ARGS, 1])
    assert r.returncode == 1, f"exit {r.returncode}; stderr:\n{r.stderr}"
    lines = r.stderr.rstrip("\n").splitlines()
    assert len(lines) == 3, f"expected 3 lines:\n{r.stderr}"
    assert lines[0].startswith("uscope: bad probe: ") and len(lines[0]) > len("uscope: bad probe: ")
    assert lines[1] == "  " + probe, lines[1]
    assert lines[2].strip().startswith("^") and set(lines[2].strip()) <= set("^~"), lines[2]
    col = lines[2].index("^") - 2
    ok = carets(probe)
    assert col in ok, (f"caret at offset {col} of {probe!r}, expected one of {sorted(ok)}:\n"
                       + r.stderr)
    assert "args done" not in r.stdout


def test_no_such_process():
    r = u.run_uscope(["trace", "-p", u.unused_pid(), "add"])
    msg = single_error(r)
    assert "no such process" in msg.lower(), msg


def test_list_no_such_process():
    r = u.run_uscope(["list", "-p", u.unused_pid()])
    msg = single_error(r)
    assert "no such process" in msg.lower(), msg


@pytest.mark.parametrize("mode", ["command", "system"])
def test_no_such_file(mode):
    path = "/nonexistent/uscope-e2e/libnothing.so"
    if mode == "command":
        args = ["trace", f"{path}:foo", "--", ARGS, 1]
    else:
        args = ["trace", "-d", "1", f"{path}:foo"]
    msg = single_error(u.run_uscope(args))
    assert "no such file" in msg.lower() or path in msg, msg


def test_list_no_such_file():
    path = "/nonexistent/uscope-e2e/binary"
    msg = single_error(u.run_uscope(["list", path]))
    assert "no such file" in msg.lower() or path in msg, msg


def test_command_not_found():
    r = u.run_uscope(["trace", "main", "--", "uscope-e2e-no-such-command"])
    lines = u.error_lines(r.stderr)
    assert r.returncode == 127, f"exit {r.returncode}; stderr:\n{r.stderr}"
    assert lines and lines[0].startswith("uscope: "), r.stderr
    assert any("not found" in l for l in lines), r.stderr


def test_system_wide_needs_a_module():
    single_error(u.run_uscope(["trace", "-d", "1", "add"]))


def test_not_root():
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    chk = subprocess.run(pre + ["test", "-x", str(u.uscope_path())])
    if chk.returncode != 0:
        pytest.skip(f"user nobody cannot execute {u.uscope_path()}")
    for engine in ("auto", "tracefs", "bpf"):
        r = u.run_uscope(["trace", "-e", engine, "add", "--", ARGS, 1], prefix=pre)
        msg = single_error(r)
        assert re.search(r"root|permission", msg, re.I), msg


def test_ambiguous_symbol():
    dups = target("dups")
    cands = [a for a, _ in u.nm_funcs(dups)["twin"]]
    assert len(cands) == 2
    r = u.run_uscope(["trace", "twin", "--", dups])
    single_error(r)
    assert "dups 11" not in r.stdout, "the command ran despite the error"
    shown = {int(h, 16) for h in re.findall(r"\b(?:0x)?([0-9a-fA-F]{3,16})\b", r.stderr)}
    assert set(cands) <= shown, f"candidates {[hex(c) for c in cands]} not listed:\n{r.stderr}"


# Every error once: each failure below is one line, said by the layer that
# knows what the user should do (the library's details only with -v).

@pytest.mark.parametrize("args", [
    ["trace", "/etc/passwd:foo", "--", ARGS, 1],
    ["trace", "-e", "tracefs", "/etc/passwd:foo", "--", ARGS, 1],
    ["trace", "-d", "1", "/etc/passwd:foo"],
    ["count", "-d", "1", "/etc/passwd:foo"],
    ["list", "/etc/passwd"],
    ["list", "--usdt", "/etc/passwd"],
], ids=["command", "tracefs", "system", "count", "list", "list-usdt"])
def test_not_elf_once(args):
    msg = single_error(u.run_uscope(args))
    assert "/etc/passwd" in msg and "ELF" in msg, msg


def test_not_elf_details_at_verbose():
    r = u.run_uscope(["trace", "-v", "-d", "1", "/etc/passwd:foo"])
    assert r.returncode == 1
    assert len([l for l in u.error_lines(r.stderr) if "ELF" in l]) >= 2, r.stderr


@pytest.mark.parametrize("args", [
    ["trace", "-d", "1", "libnope:foo"],
    ["trace", "-e", "tracefs", "-d", "1", "libnope:foo"],
    ["list", "libnope"],
], ids=["system", "tracefs", "list"])
def test_unknown_module_once(args):
    msg = single_error(u.run_uscope(args))
    assert "libnope" in msg, msg


def test_unknown_module_in_pid_once():
    with _spin() as pid:
        msg = single_error(u.run_uscope(["trace", "-p", pid, "libnope:foo"]))
        assert "libnope" in msg and str(pid) in msg, msg


class _spin:
    def __enter__(self):
        self.p = subprocess.Popen([target("spin")], stdout=subprocess.DEVNULL)
        return self.p.pid

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()


@pytest.mark.parametrize("engine", ["auto", "tracefs"])
def test_unknown_module_command_one_error(engine):
    # COMMAND may load the module later: uscope waits (it says so with -v,
    # or once the wait has lasted a second), and says once that it never
    # came: one line in all.
    r = u.run_uscope(["trace", "-e", engine, "libnope:foo", "--", target("threads"), 1, 1])
    assert r.returncode == 1, r.stderr
    errors = u.error_lines(r.stderr)
    assert len(errors) == 1 and errors[0].startswith("uscope: "), r.stderr
    assert "libnope" in errors[0], errors[0]


@pytest.mark.parametrize("engine", ["auto", "tracefs", "inject"])
def test_unknown_symbol_once(engine):
    msg = single_error(u.run_uscope(["trace", "-e", engine, "nosuch_fn", "--", ARGS, 1]))
    assert "nosuch_fn" in msg, msg


@pytest.mark.parametrize("args", [
    ["trace", "-p", "0", "add"],
    ["trace", "-p", "abc", "add"],
    ["count", "-p", "-3", "add"],
], ids=["zero", "word", "negative"])
def test_bad_pid_once(args):
    single_error(u.run_uscope(args), rc=2)


def test_refused_site_once():
    msg = single_error(u.run_uscope(["trace", "r:condtail", "--", target("retsites")]))
    assert "--uretprobe" in msg, msg

