"""What uscope says to its user (issues 30 and 31): every option declared
once and taken where its --help lists it, one line for every usage mistake,
one reading of a duration, one column order in count's tables, the
readiness line of py: probes, a hint for bpftrace's and perf probe's syntax,
the closest module names, list's MODULE:PATTERN, "0 hits" said, and the
files uscope writes readable by their owner alone."""

import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import error_lines, run_uscope, target

ARGS = target("args")
AGG = target("aggapp")
STACKS = target("stacks")
PYTHON = "/usr/bin/python3.11"
TRACING = ["trace", "flow", "count", "hist", "latency", "objtrace", "record"]
COMMANDS = TRACING + ["report", "export", "flamegraph", "list"]
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def one_line(cp, rc=2):
    assert cp.returncode == rc, f"{cp.args}: exit {cp.returncode}, expected {rc}\n{cp.stderr}"
    lines = error_lines(cp.stderr)
    assert len(lines) == 1 and lines[0].startswith("uscope: "), cp.stderr
    assert cp.stdout == "", cp.stdout
    return lines[0]


def help_options(cmd):
    """{option: the line --help shows it on} of uscope CMD --help."""
    out = run_uscope([cmd, "--help"]).stdout
    opts = {}
    for line in out.splitlines():
        if re.match(r"^ +-", line):
            for w in line.split():
                w = w.rstrip(",")
                if not re.match(r"^--?[a-zA-Z]", w):
                    break
                opts[w] = line
    return out, opts


# --------------------------------------------------------------------------
# 1. each option declared once: its help the same in every command that
#    takes it, and taken by exactly the commands whose --help lists it

def test_shared_option_help_is_one_text():
    seen = {}
    for cmd in TRACING:
        _, opts = help_options(cmd)
        for o in ("-e", "-p", "-d", "-q", "--root", "--stack-size", "--uretprobe"):
            if o in opts:
                seen.setdefault(o, set()).add(opts[o].strip())
    # -e's text was written six times; now once
    assert len(seen["-e"]) == 1 and len(seen["-p"]) == 1 and len(seen["-d"]) == 1, seen
    assert all(len(v) == 1 for v in seen.values()), seen


@pytest.mark.parametrize("cmd", COMMANDS)
def test_parser_takes_what_help_lists(cmd):
    """Every long option --help lists is known to the parser (a mistake in
    its value, or a missing PROBE, is not 'unknown option'); one it does not
    list is unknown."""
    _, opts = help_options(cmd)
    longs = [o for o in opts if o.startswith("--")]
    assert longs, cmd
    for o in longs:
        cp = run_uscope([cmd, o, "@@bad@@"])
        assert "unknown option" not in cp.stderr, (o, cp.stderr)
    every = set()
    for c in COMMANDS:
        every |= {o for o in help_options(c)[1] if o.startswith("--")}
    # (not one that abbreviates an option of cmd's: getopt takes it as that)
    others = [o for o in every - set(longs) if not any(l.startswith(o) for l in longs)]
    assert others, cmd
    for o in sorted(others)[:6]:
        line = one_line(run_uscope([cmd, o, "x"]))
        assert f"unknown option '{o}'" in line, line


# --------------------------------------------------------------------------
# 2. one line for every usage mistake

@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("args,words", [
    (["--foo", "x"], "unknown option '--foo'"),
    (["-Z"], "unknown option '-Z'"),
], ids=["long", "short"])
def test_unknown_option_is_one_line(cmd, args, words):
    line = one_line(run_uscope([cmd] + args))
    assert line.startswith(f"uscope: {cmd}: ") and words in line, line
    assert line.endswith(f"(see uscope {cmd} --help)"), line


@pytest.mark.parametrize("cmd,args,words", [
    ("trace", ["-p"], "-p needs a value"),
    ("count", ["--top"], "--top needs a value"),
    ("hist", ["--json=yes", "x"], "--json takes no value"),
    ("count", ["--max", "1", "x"], "'--max' is ambiguous"),
    ("count", ["-p", "abc", "x"], "-p wants a process id, not 'abc'"),
    ("latency", ["--unit", "s", "x"], "--unit wants ns, us or ms, not 's'"),
    ("record", ["x", "--", ARGS], "give -o FILE"),
    ("report", [], "give -r FILE"),
    ("list", ["-p", "1", "a", "b"], "one PATTERN at most"),
    ("list", [], "give a BINARY"),
    ("flamegraph", ["--width", "wide"], "--width wants a number of pixels"),
], ids=["missing", "missing-long", "no-value", "ambiguous", "bad-pid", "bad-unit",
        "record-o", "report-r", "list-two", "list-none", "flamegraph-width"])
def test_usage_mistake_is_one_line(cmd, args, words):
    line = one_line(run_uscope([cmd] + args))
    assert line.startswith(f"uscope: {cmd}: ") and words in line, line
    assert line.endswith(f"(see uscope {cmd} --help)"), line


def test_no_command_is_one_line():
    line = one_line(run_uscope([]))
    assert "give a command" in line and "uscope --help" in line, line
    line = one_line(run_uscope(["tarce"]))
    assert "unknown command 'tarce'" in line and "uscope --help" in line, line


def test_perf_probe_x_gets_the_uscope_form():
    line = one_line(run_uscope(["count", "-x", "/bin/ls", "main"]))
    assert "uscope-probes(7)" in line and "uscope count '/bin/ls:main'" in line, line


# --------------------------------------------------------------------------
# 3. durations: one reading everywhere

@pytest.mark.parametrize("opts", [["-d", "1s"], ["-d", "500ms"], ["-d", "0.5"], ["-d", "2m"],
                                  ["-i", "100ms"], ["--max-wait", "1s"], ["--max-wait", "0"]],
                         ids=lambda o: " ".join(o))
def test_durations_taken(opts):
    cp = run_uscope(["count"] + opts + ["add", "--", ARGS, 3])
    assert cp.returncode == 0, cp.stderr
    assert re.search(r"^add\s+3$", cp.stdout, re.M), cp.stdout


@pytest.mark.parametrize("opt,value", [("-d", "0"), ("-d", "-1"), ("-d", "soon"), ("-d", "1x"),
                                       ("-d", "0ms"), ("-i", "0"), ("--max-wait", "1h"),
                                       ("--max-wait", "-5ms")])
def test_durations_refused(opt, value):
    line = one_line(run_uscope(["count", opt, value, "add", "--", ARGS, 1]))
    assert f"not '{value}'" in line and "ms" in line, line


# --------------------------------------------------------------------------
# 4. count: PROBE [KEY] then COUNT, with and without keys

def table(stdout, head):
    lines = stdout.splitlines()
    k = next(i for i, l in enumerate(lines) if l.split()[:len(head.split())] == head.split())
    assert lines[k].split()[-1] == "COUNT", lines[k]
    rows = []
    for l in lines[k + 1:]:
        if not re.match(r"^\S.*\s\d+$", l) or l.startswith("("):
            break
        *what, n = l.split()
        rows.append((" ".join(what), int(n)))
    return rows


def test_count_columns_one_order():
    plain = run_uscope(["count", "lookup", "--", AGG, "names"])
    assert plain.returncode == 0, plain.stderr
    assert table(plain.stdout, "PROBE") == [("lookup", 8)]
    keyed = run_uscope(["count", "lookup n=$arg2:s32", "--", AGG, "names"])
    assert keyed.returncode == 0, keyed.stderr
    assert table(keyed.stdout, "PROBE KEY") == [("lookup n=1", 3), ("lookup n=2", 2),
                                                ("lookup n=3", 1), ("lookup n=4", 1),
                                                ("lookup n=5", 1)]


# --------------------------------------------------------------------------
# 5. the readiness line of a py: probe

def test_py_readiness_line(tmp_path):
    if not Path(PYTHON).exists():
        pytest.skip(f"{PYTHON} is not installed")
    script = tmp_path / "six.py"
    script.write_text("def a(): pass\ndef b(): pass\ndef c(): pass\ndef d(): pass\n"
                      "def e(): pass\ndef f():\n    a(); b(); c(); d(); e()\n"
                      "for i in range(3):\n    f()\n")
    for cmd in ("count", "latency"):
        cp = run_uscope([cmd, "py:__main__:*", "--", PYTHON, script])
        assert cp.returncode == 0, cp.stderr
        ready = [l for l in cp.stderr.splitlines() if l.startswith("uscope: tracing")]
        assert ready == ["uscope: tracing py:__main__:* (the Python functions it names, "
                         "as they are called)"], cp.stderr
    rows = dict(table(run_uscope(["count", "py:__main__:*", "--", PYTHON, script]).stdout,
                      "PROBE KEY"))
    assert rows == {f"__main__:{x}": 3 for x in "abcdef"} | {"__main__:<module>": 1}, rows


# --------------------------------------------------------------------------
# 6. bpftrace's and perf probe's syntax: a hint

@pytest.mark.parametrize("probe,want", [
    ("uprobe:/bin/ls:main { @ = count(); }", "uscope count '/bin/ls:main'"),
    ("uretprobe:/bin/ls:main { printf(\"%d\\n\", retval); }", "uscope trace 'r:/bin/ls:main'"),
    ("u:/bin/ls:main { @[ustack] = count(); }", "uscope count '/bin/ls:main $ustack'"),
    ("usdt:/bin/app:prov:tick { @ = hist(arg0); }", "uscope hist '/bin/app:%prov:tick'"),
    ("uprobe:libc:malloc", "uscope trace 'libc:malloc'"),
    ("main%return", "uscope trace 'r:main'"),
])
def test_other_tools_syntax_hint(probe, want):
    cp = run_uscope(["trace", probe, "--", ARGS, 1])
    assert cp.returncode == 1, cp.stderr
    lines = error_lines(cp.stderr)
    assert len(lines) == 4 and lines[0].startswith("uscope: bad probe: "), cp.stderr
    assert lines[1] == "  " + probe and lines[2].strip().startswith("^"), cp.stderr
    assert "uscope-probes(7)" in lines[3] and lines[3].endswith(want), lines[3]
    assert "args done" not in cp.stdout


def test_no_hint_for_uscope_mistakes():
    cp = run_uscope(["trace", "add a=$arg1:u33", "--", ARGS, 1])
    assert len(error_lines(cp.stderr)) == 3, cp.stderr


# --------------------------------------------------------------------------
# 7. unknown modules: the closest names; 8. list's MODULE:PATTERN

def test_unknown_module_in_pid_suggests():
    spin = u.start_spin()
    try:
        line = one_line(run_uscope(["count", "-p", spin.p.pid, "libcc:malloc"]), rc=1)
        assert "'libcc'" in line and str(spin.p.pid) in line, line
        assert line.endswith("did you mean: libc?"), line
        line = one_line(run_uscope(["list", "-p", spin.p.pid, "libcc:*"]), rc=1)
        assert line.endswith("did you mean: libc?"), line
    finally:
        spin.kill()


def test_unknown_module_in_command_suggests():
    cp = run_uscope(["trace", "libdemoo:lib_mul", "--", target("uselib"), 1])
    line = error_lines(cp.stderr)
    assert cp.returncode == 1 and len(line) == 1, cp.stderr
    assert line[0].endswith("did you mean: libdemo?"), line


def test_list_module_pattern():
    spin = u.start_spin()
    try:
        cp = run_uscope(["list", "-p", spin.p.pid, "libc:memc*"])
        own = run_uscope(["list", "libc", "memc*"])
        allp = run_uscope(["list", "-p", spin.p.pid, "memc*"])
    finally:
        spin.kill()
    assert cp.returncode == 0 and own.returncode == 0, cp.stderr + own.stderr
    got = cp.stdout.splitlines()
    assert got and all(l.startswith("libc.so.6:memc") for l in got), got
    assert [l.split(":", 1)[1] for l in got] == own.stdout.splitlines()
    # without MODULE: every module's, libc's among them
    assert set(got) <= set(allp.stdout.splitlines())


# --------------------------------------------------------------------------
# 9. empty is said

@pytest.mark.parametrize("cmd,probe", [("count", "libc:fsync"), ("count", "libc:fsync $arg1"),
                                       ("hist", "libc:fsync n=$arg1"), ("latency", "libc:fsync"),
                                       ("trace", "libc:fsync")])
def test_zero_hits_said(cmd, probe):
    cp = run_uscope([cmd, probe, "--", ARGS, 2])
    assert cp.returncode == 0, cp.stderr
    assert f"uscope: 0 hits: {ARGS} ran to its end without calling what was probed" in \
        cp.stderr.splitlines(), cp.stderr
    # and not when there were
    cp = run_uscope([cmd, "add a=$arg1:s32" if cmd == "hist" else "add", "--", ARGS, 2])
    assert cp.returncode == 0 and "0 hits" not in cp.stderr, cp.stderr
    cp = run_uscope([cmd, "-q", probe, "--", ARGS, 2])
    assert "0 hits" not in cp.stderr, cp.stderr


def test_zero_hits_when_the_process_ends():
    spin = u.start_spin()
    bg = u.Background(["count", "-p", spin.p.pid, "libc:fsync"])
    try:
        bg.wait_ready()
        spin.kill()
        bg.wait()
    finally:
        spin.kill()
    assert f"uscope: 0 hits: process {spin.p.pid} ended before any hit" in \
        "".join(bg.err_lines).splitlines(), bg.err_lines


# --------------------------------------------------------------------------
# 10. files uscope writes: its user's alone

def mode(p):
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_outputs_are_0600(tmp_path):
    old = os.umask(0o022)
    try:
        rec = tmp_path / "r.usc"
        assert run_uscope(["record", "-q", "-o", rec, "add", "--", ARGS, 2]).returncode == 0
        assert run_uscope(["trace", "-q", "-o", tmp_path / "t.out", "add", "--", ARGS,
                           2]).returncode == 0
        for fmt, out in [("chrome", "c.json"), ("ctf", "ctf"), ("folded", "f.folded"),
                         ("svg", "f.svg")]:
            cp = run_uscope(["export", "-q", "-r", rec, "--format", fmt, "-o", tmp_path / out])
            assert cp.returncode == 0, cp.stderr
        cp = run_uscope(["count", "-q", "--pprof", tmp_path / "p.pb.gz", "add $ustack", "--",
                         ARGS, 2])
        assert cp.returncode == 0, cp.stderr
    finally:
        os.umask(old)
    for f in ["r.usc", "t.out", "c.json", "f.folded", "f.svg", "p.pb.gz", "ctf/metadata",
              "ctf/stream"]:
        assert mode(tmp_path / f) == 0o600, (f, oct(mode(tmp_path / f)))
    assert mode(tmp_path / "ctf") == 0o700


def test_existing_file_narrowed_not_widened(tmp_path):
    """An existing file loses what group and others could do, and gains
    nothing."""
    wide, narrow = tmp_path / "wide", tmp_path / "narrow"
    wide.write_text("old\n")
    narrow.write_text("old\n")
    wide.chmod(0o664)
    narrow.chmod(0o200)
    for f in (wide, narrow):
        cp = run_uscope(["trace", "-q", "-o", f, "add", "--", ARGS, 1])
        assert cp.returncode == 0, cp.stderr
    assert mode(wide) == 0o600 and mode(narrow) == 0o200
    assert "add" in wide.read_text() and "old" not in wide.read_text()


@pytest.fixture
def shared():
    """A directory as /tmp is: sticky, everyone's (under /tmp: user nobody
    reaches it)."""
    d = Path(tempfile.mkdtemp(prefix="uscope-e2e-shared-", dir="/tmp"))
    d.chmod(0o1777)
    yield d
    shutil.rmtree(d)


def test_shared_directory_plants_refused(tmp_path, shared):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    chk = subprocess.run(AS_NOBODY + ["ln", "-s", str(victim), str(shared / "link")])
    if chk.returncode:
        pytest.skip("cannot act as user nobody")
    subprocess.run(AS_NOBODY + ["sh", "-c", f"echo theirs > {shared / 'theirs'}"], check=True)
    line = one_line(run_uscope(["trace", "-o", shared / "link", "add", "--", ARGS, 1]), rc=1)
    assert "symbolic link" in line and "not followed" in line, line
    line = one_line(run_uscope(["record", "-o", shared / "theirs", "add", "--", ARGS, 1]), rc=1)
    assert "another user owns it" in line, line
    assert victim.read_text() == "keep\n" and (shared / "theirs").read_text() == "theirs\n"
    # uscope's own file there is written, 0600
    cp = run_uscope(["trace", "-q", "-o", shared / "mine", "add", "--", ARGS, 1])
    assert cp.returncode == 0 and mode(shared / "mine") == 0o600, cp.stderr


def test_unwind_cache_is_private(tmp_path):
    cache = tmp_path / "cache"
    cp = run_uscope(["trace", "-q", "-e", "inject", "leaf $ustack", "--", STACKS, "inline"],
                    env={"XDG_CACHE_HOME": str(cache)})
    assert cp.returncode == 0, cp.stderr
    d = cache / "uscope" / "unwind"
    files = list(d.iterdir())
    assert files, "no unwind table was cached"
    assert mode(cache / "uscope") == 0o700 and mode(d) == 0o700
    assert all(mode(f) == 0o600 for f in files), [(f, oct(mode(f))) for f in files]
