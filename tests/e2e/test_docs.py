"""The documentation's examples, run: every block of README.md, bench/README.md
and doc/*.md marked with an HTML comment

    <!-- test: NAME [needs=PROG,...] [unordered="REGEX"] -->
    ```console
    $ uscope trace ... -- build/demo/server 4
    expected output
    ...
    ```

is run, and its output must have the documented shape. A `$ ` line is a
command (a leading `sudo ` is dropped: the tests run as root); the lines up
to the next command are its expected output, stdout and stderr together. The
commands of a block run one after another in one bash, in a scratch directory
where `build`, `tests`, `demo` and `sdt` lead to the repository's and
`uscope` on PATH is the build under test ($USCOPE); its path shows in the
output as /src/uscope.

The shape: numbers (decimal and hex), and so pids, addresses, times and
counts, are normalised, and runs of blanks are one; blank lines are ignored.
A line `...` in the expected output stands for any number of lines. Lines
matching `unordered` (a target's own output, which may fall anywhere among
the tracer's) are compared apart, as a multiset. `needs` skips the example,
saying so, when a program (on PATH, or a path under the repository) is
missing.

Also: every relative link of those files leads to a file, and to a heading
of it when the link names an anchor."""

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

import uscope_e2e as u

REPO = u.REPO
DOCS = sorted([REPO / "README.md", REPO / "bench" / "README.md", REPO / "sdt" / "README.md",
               *(REPO / "doc").glob("*.md")])
DOCS = [p for p in DOCS if p.exists()]
MARK = re.compile(r"^<!--\s*test:\s*(\S+)(.*?)-->\s*$")
ATTR = re.compile(r'(\w+)=("([^"]*)"|\S+)')
SEP = "@@uscope-doc-example@@"
BLOCK_TIMEOUT = 120
# The scratch directory's path, as the examples show it (a checkout's).
SHOWN_ROOT = "/src/uscope"


class Example:
    def __init__(self, path, line, name, attrs, body):
        self.path, self.line, self.name, self.attrs = path, line, name, attrs
        self.steps = []  # (command, [expected lines])
        for l in body:
            if l.startswith("$ "):
                self.steps.append((l[2:], []))
            elif self.steps:
                self.steps[-1][1].append(l)
            elif l.strip():
                raise ValueError(f"{path.name}:{line}: output before the first command: {l!r}")

    @property
    def id(self):
        return f"{self.path.relative_to(REPO)}:{self.name}"


def _examples():
    out = []
    for path in DOCS:
        lines = path.read_text().split("\n")
        fence = False
        for i, l in enumerate(lines):
            if l.startswith("```"):
                fence = not fence
            m = MARK.match(l)
            if fence or not m:
                continue
            attrs = {a.group(1): a.group(3) if a.group(3) is not None else a.group(2)
                     for a in ATTR.finditer(m.group(2))}
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j >= len(lines) or not lines[j].startswith("```"):
                raise ValueError(f"{path.name}:{i + 1}: a test marker not before a block")
            k = j + 1
            while k < len(lines) and not lines[k].startswith("```"):
                k += 1
            out.append(Example(path, i + 1, m.group(1), attrs, lines[j + 1:k]))
    return out


EXAMPLES = _examples()

_NUM = re.compile(r"0x[0-9a-fA-F]+|\d+(?:[.,]\d+)*")
_TIME_UNIT = re.compile(r"\bN ?(?:ns|us|µs|ms|s)\b")


def normalise(line):
    line = re.sub(r"\|[@ ]*\|", "|BAR|", line)
    line = _NUM.sub(lambda m: "0xH" if m.group(0).startswith("0x") else "N", line)
    line = _TIME_UNIT.sub("N T", line)
    return " ".join(line.split())


def _match(exp, got):
    """Does the list exp (with '...' wildcards) match got, line for line?"""
    memo = {}

    def m(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(exp):
            r = j == len(got)
        elif exp[i] == "...":
            r = any(m(i + 1, k) for k in range(j, len(got) + 1))
        else:
            r = j < len(got) and exp[i] == got[j] and m(i + 1, j + 1)
        memo[key] = r
        return r

    return m(0, 0)


def shape_diff(expected, actual, unordered=None):
    """None when actual has the shape of expected, else why not. expected
    and actual are lists of steps, each a list of lines; the lines matching
    unordered are compared apart, over the whole block, as a multiset."""
    rx = re.compile(unordered) if unordered else None
    eu, gu, why = [], [], []
    for i, (e, g) in enumerate(zip(expected, actual)):
        exp = [normalise(l) if l.strip() != "..." else "..." for l in e if l.strip()]
        got = [normalise(l) for l in g if l.strip()]
        if rx:
            eu += [l for l in exp if rx.search(l)]
            gu += [l for l in got if rx.search(l)]
            exp = [l for l in exp if not rx.search(l)]
            got = [l for l in got if not rx.search(l)]
        if not _match(exp, got):
            why.append(f"command {i + 1}: expected (normalised):\n  " + "\n  ".join(exp) +
                       "\ngot (normalised):\n  " + "\n  ".join(got))
    if sorted(eu) != sorted(gu):
        why.append(f"the lines matching {unordered!r} differ: expected {sorted(eu)}, "
                   f"got {sorted(gu)}")
    return "\n".join(why) or None


def _missing(needs):
    for prog in needs.split(","):
        if "/" in prog:
            if not (REPO / prog).exists() and not Path(prog).exists():
                return prog
        elif not shutil.which(prog):
            return prog
    return None


def _make_scratch(uscope_bin):
    """A directory that looks like the repository (build, tests, demo, sdt)
    for relative paths, its own for the files examples write; uscope on
    PATH; the demo server built as `make demo` builds it."""
    demo = REPO / "build" / "demo"
    demo.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["cc", "-O1", "-g", "-o", str(demo / "server"), str(REPO / "demo" / "server.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = Path(tempfile.mkdtemp(prefix="uscope-docs-"))
    for name in ("build", "tests", "demo", "sdt", "bench"):
        (d / name).symlink_to(REPO / name)
    bindir = d / ".bin"
    bindir.mkdir()
    (bindir / "uscope").symlink_to(uscope_bin)
    yield d, bindir
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def scratch(uscope_bin):
    yield from _make_scratch(uscope_bin)


def run_example(ex, scratch):
    d, bindir = scratch
    script = ["set +e"]
    for cmd, _ in ex.steps:
        if cmd.startswith("sudo "):
            cmd = cmd[5:]
        script.append(f"echo {SEP}")
        script.append(cmd)
    script.append(f"echo {SEP}")
    script.append("wait")
    # Debian's programs first (python3.11, not a pyenv shim)
    env = dict(os.environ, PATH=f"{bindir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               LC_ALL="C.UTF-8")
    p = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=d, env=env, text=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        pytest.fail(f"{ex.id}: did not finish in {BLOCK_TIMEOUT} s; output:\n{out}")
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # anything it left in the background
        except ProcessLookupError:
            pass
    out = out.replace(str(d), SHOWN_ROOT).replace(str(REPO), SHOWN_ROOT)
    parts = out.split(SEP + "\n")
    # parts[0] is before the first command; then one part per command
    return [part.split("\n") for part in parts[1:len(ex.steps) + 1]]


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example(ex, scratch):
    if "needs" in ex.attrs:
        miss = _missing(ex.attrs["needs"])
        if miss:
            pytest.skip(f"{ex.id} needs {miss}, which this machine lacks")
    outputs = run_example(ex, scratch)
    assert len(outputs) == len(ex.steps), f"{ex.id}: the block did not run to its end"
    why = shape_diff([e for _, e in ex.steps], outputs, ex.attrs.get("unordered"))
    assert why is None, f"{ex.id} ({ex.path.name}:{ex.line}):\n{why}"


def test_examples_found():
    """The README's tour is tested: the marked examples are there."""
    names = {e.name for e in EXAMPLES if e.path.name == "README.md" and e.path.parent == REPO}
    assert len(names) >= 8, names


# ---- the shape comparison itself ----

def test_shape_numbers_and_wildcards():
    doc = ["server-5453 [001] 651.322242: handle: (0x56270f43d159) id=0", "...",
           "uscope: 8 events, 0 lost"]
    got = ["server-77 [000] 9.000001: handle: (0x5555) id=3", "a", "b",
           "uscope: 12 events, 0 lost"]
    assert shape_diff([doc], [got]) is None
    assert shape_diff([doc], [got[:1] + got[3:]]) is None        # ... matches no line too
    assert shape_diff([doc], [["server-77 [000] 9.1: handle: (0x5) path=3"] + got[1:]]) is not None
    assert shape_diff([doc], [got[:1]]) is not None               # a line missing
    assert shape_diff([["a 1", "b 2"]], [["b 2", "a 1"]]) is not None  # order matters
    assert shape_diff([["x", "ready", "y"], ["z"]], [["x", "y"], ["ready", "z"]], "^ready$") is None
    assert shape_diff([["x", "ready", "y"]], [["x", "y"]], "^ready$") is not None


# ---- links ----

def _slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[`*_]", lambda m: "_" if m.group(0) == "_" else "", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(path):
    seen, out, fence = {}, set(), False
    for l in path.read_text().split("\n"):
        if l.startswith("```"):
            fence = not fence
        if fence:
            continue
        m = re.match(r"^#{1,6} (.*)", l)
        if m:
            s = _slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def _links(path):
    fence = False
    for n, l in enumerate(path.read_text().split("\n"), 1):
        if l.startswith("```"):
            fence = not fence
        if fence:
            continue
        for m in re.finditer(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", l)):
            yield n, m.group(1)


# Files another branch of issue 30 adds: a link to one is checked once it exists.
PENDING = set()


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_links_resolve(doc):
    bad = []
    for n, link in _links(doc):
        if re.match(r"^[a-z]+:", link):
            continue  # http:, https:, mailto:
        target, _, anchor = link.partition("#")
        t = (doc.parent / target).resolve() if target else doc
        if not t.exists() and str(t.relative_to(REPO)) in PENDING:
            continue
        if not t.exists():
            bad.append(f"{doc.name}:{n}: {link}: no such file")
        elif anchor and t.suffix == ".md" and anchor not in _anchors(t):
            bad.append(f"{doc.name}:{n}: {link}: no heading #{anchor} in {t.name}")
    assert not bad, "\n".join(bad)


if __name__ == "__main__":
    # Print what the examples give today (a maintainer's aid when writing one):
    #   USCOPE=build/san/uscope python3 tests/e2e/test_docs.py [NAME...]
    import sys
    want = set(sys.argv[1:])
    binp = u.uscope_path()
    gen = _make_scratch(binp)
    sc = next(gen)
    for ex in EXAMPLES:
        if want and ex.name not in want:
            continue
        print(f"<!-- {ex.id} -->")
        for (cmd, _), got in zip(ex.steps, run_example(ex, sc)):
            print("$ " + cmd)
            print("\n".join(got).rstrip("\n"))
    next(gen, None)
