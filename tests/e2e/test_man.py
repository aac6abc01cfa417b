"""The man pages (doc/man, written by hand): each one lints clean with
groff -ww, renders with man -l without a warning, and names every command and
every option its --help gives; make install puts them and the bash
completion where man and bash-completion look."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import uscope_e2e as u

ROOT = Path(__file__).resolve().parents[2]
MAN = ROOT / "doc/man"
COMMANDS = ["trace", "flow", "count", "hist", "latency", "objtrace", "record", "report",
            "export", "flamegraph", "script", "list"]
PAGES = sorted(p.name for p in MAN.iterdir())


def test_every_page_is_there():
    want = {"uscope.1", "uscope-probes.7"} | {f"uscope-{c}.1" for c in COMMANDS}
    assert want <= set(PAGES), f"missing {want - set(PAGES)}"


@pytest.mark.parametrize("page", PAGES)
def test_groff_lint(page):
    r = subprocess.run(["groff", "-ww", "-z", "-man", str(MAN / page)], capture_output=True,
                       text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr


@pytest.mark.parametrize("page", PAGES)
def test_man_renders(page):
    if not shutil.which("man"):
        pytest.skip("man-db is not installed")
    r = subprocess.run(["man", "--warnings", "-l", str(MAN / page)], capture_output=True,
                       text=True, env={"MANWIDTH": "80", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    assert "SYNOPSIS" in r.stdout or page.endswith(".7")


def page_text(name):
    """The page as man shows it, in ASCII, without hyphenation, its lines
    wide and its spaces collapsed."""
    r = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", "-rHY=0", "-rLL=250n",
                        str(MAN / name)], capture_output=True, text=True, check=True)
    return " ".join(r.stdout.split())


def help_options(args):
    out = subprocess.run([str(u.uscope_path())] + args + ["--help"], capture_output=True,
                         text=True).stdout
    opts = set()
    for line in out.splitlines():
        if re.match(r"^ +-", line):
            for w in line.split():
                w = w.rstrip(",")
                if not re.match(r"^--?[a-zA-Z]", w):
                    break
                opts.add(w)
    return out, opts


@pytest.mark.parametrize("cmd", COMMANDS)
def test_page_has_every_option(cmd):
    _, opts = help_options([cmd])
    assert opts, f"uscope {cmd} --help lists no options"
    text = page_text(f"uscope-{cmd}.1")
    missing = [o for o in sorted(opts) if not re.search(r"(?<![\w-])" + re.escape(o) + r"(?![\w-])", text)]
    assert not missing, f"uscope-{cmd}.1 does not mention {missing}"


def test_main_page_has_every_command():
    out, _ = help_options([])
    cmds = re.findall(r"^  ([a-z]+) ", out.split("commands:", 1)[1], re.M)
    assert set(cmds) == set(COMMANDS), cmds
    text = page_text("uscope.1")
    for c in cmds + ["--help", "--version", "DEBUGINFOD_URLS", "USCOPE_VERBOSE", "EXIT STATUS"]:
        assert c in text, c
    for c in cmds:
        assert f"uscope-{c}" in text, c


def test_probe_page_has_the_language():
    text = page_text("uscope-probes.7")
    for w in ["$arg1", "$retval", "$stack", "$comm", "$pid", "$tid", "$cpu", "@ADDR",
              "@+FILE_OFFSET", "+OFFS(EXPR)", "$params", "->", "%rax", "u8", "s64", "x32",
              "string", "ustring", "symbol", "if COND", "==", "!=", "<=", ">=", "&&", "||",
              "%PROVIDER:NAME", "FILE:LINE", "SYMBOL+OFFSET", "$pystack", "py:QUALNAME",
              "r:py:"]:
        assert w in text, w


def test_install(tmp_path):
    dest = tmp_path / "root"
    r = subprocess.run(["make", "-s", "-C", str(ROOT), "install", f"DESTDIR={dest}",
                        "PREFIX=/usr/local", "BASHCOMPDIR=/usr/share/bash-completion/completions"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    man = dest / "usr/local/share/man"
    for c in COMMANDS:
        assert (man / "man1" / f"uscope-{c}.1").is_file()
    assert (man / "man1/uscope.1").is_file() and (man / "man7/uscope-probes.7").is_file()
    assert (dest / "usr/share/bash-completion/completions/uscope").is_file()


def test_install_prefix_holds_everything(tmp_path):
    """A user's own prefix (make install PREFIX=$HOME/.local, no root) gets
    every file, the completion included, and nothing is written outside it."""
    home = tmp_path / "home"
    prefix = home / ".local"
    site = home / "site"
    r = subprocess.run(["make", "-s", "-C", str(ROOT), "install", f"PREFIX={prefix}",
                        f"PYTHON_SITE={site}"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (prefix / "share/bash-completion/completions/uscope").is_file()
    assert (prefix / "bin/uscope").is_file()
    assert (prefix / "share/man/man1/uscope.1").is_file()
    outside = [p for p in home.rglob("*") if p.is_file()
               and not (str(p).startswith(str(prefix)) or str(p).startswith(str(site)))]
    assert outside == []
