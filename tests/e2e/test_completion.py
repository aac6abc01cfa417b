"""Bash completion (doc/bash-completion/uscope), driven as bash drives it:
COMP_WORDS split at spaces, ':' and '=', COMP_CWORD, COMP_LINE and
COMP_POINT set, then _uscope, whose answers come from compgen."""

import os
import re
import subprocess
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import target

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "doc/bash-completion/uscope"
# the release build, as installed (the sanitized one is slower to start)
REL = ROOT / "uscope"

DRIVER = r'''
source "$SCRIPT"
full=$LINE
[[ $full == *@@* ]] || full+=@@
COMP_LINE=${full/@@/}; before=${full%%@@*}; COMP_POINT=${#before}
split() { sed -E 's/([:=])/ \1 /g' <<< "$1"; }
read -ra COMP_WORDS <<< "$(split "$COMP_LINE")"
read -ra bw <<< "$(split "$before")"
COMP_CWORD=$((${#bw[@]} - 1))
if [[ $before == *[[:space:]] || $before == *[:=] ]]; then
	COMP_CWORD=$((COMP_CWORD + 1))
	[[ $COMP_LINE == "$before" ]] && COMP_WORDS+=("")
fi
t0=$EPOCHREALTIME
_uscope
t1=$EPOCHREALTIME
echo "TIME $t0 $t1"
printf '%s\n' "${COMPREPLY[@]}"
'''


def uscope_bin():
    return str(REL if REL.exists() else u.uscope_path())


def complete(line):
    """-> (candidates, seconds _uscope took). '@@' marks the cursor."""
    r = subprocess.run(["bash", "-c", DRIVER], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, SCRIPT=str(SCRIPT), LINE=line))
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    t = out[0].split()
    return [l for l in out[1:] if l], float(t[2]) - float(t[1])


def test_syntax():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_commands():
    got, _ = complete(f"{uscope_bin()} ")
    assert {"trace", "flow", "count", "hist", "latency", "objtrace", "record", "report",
            "export", "flamegraph", "script", "list"} <= set(got), got
    got, _ = complete(f"{uscope_bin()} la")
    assert got == ["latency"], got
    got, _ = complete(f"{uscope_bin()} --")
    assert {"--help", "--version"} <= set(got), got


COMMANDS = ["trace", "flow", "count", "hist", "latency", "objtrace", "record", "report",
            "export", "flamegraph", "script", "list"]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_options(cmd):
    helptext = subprocess.run([uscope_bin(), cmd, "--help"], capture_output=True,
                              text=True).stdout
    want = set()
    for line in helptext.splitlines():
        if re.match(r"^ +-", line):
            for w in line.split():
                w = w.rstrip(",")
                if not re.match(r"^--?[a-zA-Z]", w):
                    break
                want.add(w)
    got, _ = complete(f"{uscope_bin()} {cmd} -")
    assert want and want <= set(got), f"missing {want - set(got)}"


def test_count_all():
    """count's --all (a glob's functions never hit too), count's alone."""
    got, _ = complete(f"{uscope_bin()} count --al")
    assert sorted(got) == ["--all", "--all-sites"], got
    got, _ = complete(f"{uscope_bin()} trace --al")
    assert got == ["--all-sites"], got


@pytest.mark.parametrize("opt,words", [
    ("-e", {"auto", "inject", "bpf", "tracefs"}),
    ("--engine", {"auto", "inject", "bpf", "tracefs"}),
])
def test_engines(opt, words):
    got, _ = complete(f"{uscope_bin()} trace {opt} ")
    assert set(got) == words, got
    got, _ = complete(f"{uscope_bin()} trace {opt} tr")
    assert got == ["tracefs"], got


def test_objtrace_probes():
    """--from and --until take a PROBE: completed as one; --max-objects a number."""
    lib = u.target("libobj.so")
    got, _ = complete(f"{uscope_bin()} objtrace --from r:{lib}:obj_n")
    assert got == ["obj_new"], got
    got, _ = complete(f"{uscope_bin()} objtrace --from x --until {lib}:obj_f")
    assert got == ["obj_free"], got
    got, _ = complete(f"{uscope_bin()} objtrace --max-objects ")
    assert got == [], got


def test_export_formats_and_sorts():
    got, _ = complete(f"{uscope_bin()} export --format ")
    assert set(got) == {"chrome", "ctf", "folded", "svg", "pprof"}
    got, _ = complete(f"{uscope_bin()} report --sort ")
    assert set(got) == {"total", "self", "calls"}


def test_metrics_options(tmp_path):
    """--serve, --label and --pprof are offered where they are taken; --pprof
    completes a file, --serve and --label nothing (an address, a label)."""
    for cmd, opts in [("count", {"--serve", "--label", "--pprof"}),
                      ("hist", {"--serve", "--label"}),
                      ("latency", {"--serve", "--label", "--pprof"}),
                      ("objtrace", {"--serve", "--label"})]:
        got, _ = complete(f"{uscope_bin()} {cmd} --")
        assert opts <= set(got), (cmd, got)
    got, _ = complete(f"{uscope_bin()} trace --")
    assert not {"--serve", "--label", "--pprof"} & set(got), got
    (tmp_path / "prof.pb.gz").write_text("")
    got, _ = complete(f"{uscope_bin()} count --pprof {tmp_path}/prof.p")
    assert got == [f"{tmp_path}/prof.pb.gz"], got
    for opt in ("--serve", "--label"):
        got, _ = complete(f"{uscope_bin()} count {opt} ")
        assert got == [], (opt, got)


def test_flamegraph(tmp_path):
    got, _ = complete(f"{uscope_bin()} flamegraph --colors ")
    assert set(got) == {"hot", "mem", "io", "red", "green", "blue", "aqua", "yellow", "purple",
                        "orange"}, got
    got, _ = complete(f"{uscope_bin()} flamegraph --colors m")
    assert got == ["mem"], got
    (tmp_path / "app.folded").write_text("a 1\n")
    for opt in ("-i", "--input", "-r", "-o"):
        got, _ = complete(f"{uscope_bin()} flamegraph {opt} {tmp_path}/app.f")
        assert got == [f"{tmp_path}/app.folded"], (opt, got)
    # elsewhere -i is --interval: no file
    got, _ = complete(f"{uscope_bin()} count -i {tmp_path}/app.f")
    assert got == [], got
    got, _ = complete(f"{uscope_bin()} flamegraph --width ")
    assert got == [], got


def test_pid_with_command_names():
    p = subprocess.Popen([target("spin")], stdout=subprocess.DEVNULL)
    try:
        pid = str(p.pid)
        got, _ = complete(f"{uscope_bin()} trace -p {pid[:-1]}")
        assert f"{pid}  spin" in got or got == [pid], got
        got, _ = complete(f"{uscope_bin()} count -p {pid}")
        assert got == [pid] or f"{pid}  spin" in got, got
        got, _ = complete(f"{uscope_bin()} trace -p spi")
        assert f"{pid}  spin" in got or got == [pid], got
        # hand<Tab> with -p: the functions of the process
        got, _ = complete(f"{uscope_bin()} trace -p {pid} tic")
        assert "tick" in got, got
    finally:
        p.kill()
        p.wait()


def test_libc_functions():
    # (how long a completion takes is not asserted: no timed tests)
    got, _ = complete(f"{uscope_bin()} trace libc:mal")
    # bash replaces what follows the ':'
    assert "malloc" in got and all(g.startswith("mal") for g in got), got
    got, _ = complete(f"{uscope_bin()} trace r:libc:mallo")
    assert "malloc" in got, got


def test_module_names():
    got, _ = complete(f"{uscope_bin()} trace libc")
    assert "libc:" in got, got


def test_path_module_functions():
    app = target("args")
    got, _ = complete(f"{uscope_bin()} trace {app}:hand")
    assert got == ["handle"], got


def test_function_of_command():
    got, _ = complete(f"{uscope_bin()} trace hand@@ -- {target('args')} 1")
    assert "handle" in got, got
    # after '--' the words are COMMAND's: nothing of ours
    got, _ = complete(f"{uscope_bin()} trace handle -- {target('args')} -")
    assert got == [], got


def test_usdt_probes():
    app = target("usdt")
    listed = subprocess.run([uscope_bin(), "list", "--usdt", app], capture_output=True,
                            text=True).stdout.split()
    want = {w for w in listed if w.startswith("%")}
    assert want
    got, _ = complete(f"{uscope_bin()} trace {app}:%")
    assert set(got) == want, got
    got, _ = complete(f"{uscope_bin()} trace %@@ -- {app}")
    assert set(got) == want, got


def test_root_directories():
    """--root takes a directory; after it, a path completes under it (the
    functions too: tests/e2e/test_containers.py, in a container)."""
    got, _ = complete(f"{uscope_bin()} trace --root /us")
    assert got == ["/usr"], got
    got, _ = complete(f"{uscope_bin()} trace --root /etc/hostn")
    assert got == [], got
    # /etc/hostname is not under /usr; /usr/bin/ls is /bin/ls there
    got, _ = complete(f"{uscope_bin()} trace --root /usr /etc/hostn")
    assert got == [], got
    got, _ = complete(f"{uscope_bin()} trace --root /usr /bin/ls")
    assert "/bin/ls" in got, got


def test_script_file(tmp_path):
    """script: FILE is a file (a bpftrace program); -x's PROGRAM is text."""
    (tmp_path / "lat.bt").write_text("BEGIN { exit(); }\n")
    got, _ = complete(f"{uscope_bin()} script {tmp_path}/la")
    assert got == [f"{tmp_path}/lat.bt"], got
    got, _ = complete(f"{uscope_bin()} script -x ")
    assert got == [], got
