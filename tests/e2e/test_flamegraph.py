"""uscope flamegraph and export --format svg: flame graphs from folded
stacks (a file, standard input) and from a recording (tests/targets/aggapp
rec: deep(3) recursing to deep(0), which calls nap; as test_record.py).

Every SVG is parsed with xml.etree; its frames (one <g> each, under
g#frames) are read back from their <title> ("name (N samples, P%)"), and
their depth and place from their <rect>, and compared with what this file
computes itself from the folded text: the merge by common prefix,
flamegraph.pl's order (children by name, right of their parent's own
samples) and the widths, to the hundredth of a pixel it prints. No SVG may
reference anything outside itself."""

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from uscope_e2e import error_lines, run_uscope, target

SVG_NS = "http://www.w3.org/2000/svg"
NS = {"s": SVG_NS}
AGG = target("aggapp")
REC_PATHS = ["deep", "deep;deep", "deep;deep;deep", "deep;deep;deep;deep",
             "deep;deep;deep;deep;nap"]

# C++ templates and operators, Go methods, quotes, ampersands, UTF-8, a space
FOLDED = """\
main;std::vector<int>::push_back(int const&);operator new(unsigned long) 300
main;main.(*Server).handle;say "hi" & 'bye' 120
main;main.(*Server).handle 80
main;caf\u00e9 50
main 25
idle 400
main;std::vector<int>::push_back(int const&) 25
main;main.(*Server).handle;say "hi" & 'bye' 100
"""


def uscope(*args, rc=0, input=None):
    cp = run_uscope(list(args), input=input)
    if rc is not None:
        assert cp.returncode == rc, \
            f"{cp.args} exited {cp.returncode}, expected {rc}\nstderr:\n{cp.stderr[-3000:]}"
    return cp


def one_error(cp, rc):
    assert cp.returncode == rc, f"{cp.args}: exit {cp.returncode}, expected {rc}\n{cp.stderr}"
    lines = error_lines(cp.stderr)
    assert len(lines) == 1 and lines[0].startswith("uscope: "), cp.stderr
    assert cp.stdout == ""
    return lines[0]


# --------------------------------------------------------------------------
# What the graph should hold, computed here from the folded text

def merge(folded):
    """{path tuple: samples, the callees' included}, the root () included."""
    tot = {}
    for line in folded.splitlines():
        if not line.strip():
            continue
        stack, count = line.rsplit(" ", 1)
        frames = tuple(stack.split(";"))
        for d in range(len(frames) + 1):
            tot[frames[:d]] = tot.get(frames[:d], 0) + int(count)
    return tot


def layout(tot, width=1200):
    """[(path, samples, start)] depth first, children by name (their UTF-8
    bytes), each parent's own samples left of its children."""
    scale = (width - 20) / tot[()]
    out = []

    def walk(path, start):
        out.append((path, tot[path], start))
        kids = sorted((p for p in tot if len(p) == len(path) + 1 and p[:-1] == path),
                      key=lambda p: p[-1].encode())
        at = start + tot[path] - sum(tot[k] for k in kids)
        for k in kids:
            if tot[k] * scale >= 0.1:
                walk(k, at)
            at += tot[k]
    walk((), 0)
    return out


# --------------------------------------------------------------------------
# What the graph holds

TITLE_RE = re.compile(r"^(.*) \(([\d,]+) (\S+), (\d+\.\d\d)%\)$", re.S)


def parse_svg(path):
    """-> (root element, [frame dicts] in document order)"""
    text = Path(path).read_text(encoding="utf-8")
    root = ET.fromstring(text.encode())      # well-formed XML, or this raises
    assert root.tag == f"{{{SVG_NS}}}svg"
    # self-contained: no URL but the namespaces, no external reference
    urls = set(re.findall(r"https?://[^\s\"'<>]*", text))
    assert urls <= {SVG_NS, "http://www.w3.org/1999/xlink"}, urls
    for el in root.iter():
        for attr in el.attrib:
            assert not attr.endswith("href") and attr != "src", (el.tag, attr)
    scripts = root.findall("s:script", NS)
    assert len(scripts) == 1 and "function zoom(" in scripts[0].text
    assert "function search(" in scripts[0].text and "function unzoom(" in scripts[0].text
    assert root.find("s:style", NS) is not None
    height = float(root.get("height"))
    frames = []
    for g in root.find("s:g[@id='frames']", NS).findall("s:g", NS):
        m = TITLE_RE.match(g.find("s:title", NS).text)
        assert m, g.find("s:title", NS).text
        r = g.find("s:rect", NS)
        y = float(r.get("y"))
        depth = (height - 34 + 1 - y) / 16 - 1
        assert depth == int(depth), (y, height)
        frames.append({"name": m.group(1), "count": int(m.group(2).replace(",", "")),
                       "unit": m.group(3), "pct": m.group(4), "depth": int(depth),
                       "x": r.get("x"), "width": r.get("width"), "fill": r.get("fill"),
                       "label": g.find("s:text", NS).text or ""})
    return root, frames


def check_graph(svg, folded, unit="samples", width=1200):
    """The SVG's frames are exactly those of folded, in order, in place."""
    root, frames = parse_svg(svg)
    assert root.get("width") == str(width)
    tot = merge(folded)
    want = layout(tot, width)
    scale = (width - 20) / tot[()]
    got = [(f["name"], f["count"], f["depth"]) for f in frames]
    assert got == [(p[-1] if p else "all", n, len(p)) for p, n, _ in want]
    for f, (p, n, start) in zip(frames, want):
        assert f["unit"] == unit
        assert f["pct"] == f"{100 * n / tot[()]:.2f}"
        assert f["x"] == f"{10 + start * scale:.2f}", (p, f)
        assert f["width"] == f"{n * scale:.2f}", (p, f)
    return frames


# --------------------------------------------------------------------------
# From folded stacks

def test_from_folded_file(tmp_path):
    src = tmp_path / "app.folded"
    src.write_text(FOLDED, encoding="utf-8")
    out = tmp_path / "app.svg"
    cp = uscope("flamegraph", "-i", src, "-o", out)
    assert cp.stdout == "" and cp.stderr == ""
    frames = check_graph(out, FOLDED)
    names = [f["name"] for f in frames]
    assert names == ["all", "idle", "main", "caf\u00e9", "main.(*Server).handle",
                     'say "hi" & \'bye\'', "std::vector<int>::push_back(int const&)",
                     "operator new(unsigned long)"]
    counts = {f["name"]: f["count"] for f in frames}
    assert counts == {"all": 1100, "idle": 400, "main": 700, "caf\u00e9": 50,
                      "main.(*Server).handle": 300, 'say "hi" & \'bye\'': 220,
                      "std::vector<int>::push_back(int const&)": 325,
                      "operator new(unsigned long)": 300}
    # labels: whole where they fit, cut with ".." where not
    labels = {f["name"]: f["label"] for f in frames}
    assert labels["main"] == "main"
    vec = "std::vector<int>::push_back(int const&)"   # 348.64 px: 49 characters
    assert labels[vec] == vec
    # a function keeps its color from graph to graph
    other = tmp_path / "other.folded"
    other.write_text("x;y;main 5\nidle 3\n")
    uscope("flamegraph", "-i", other, "-o", tmp_path / "other.svg")
    _, oframes = parse_svg(tmp_path / "other.svg")
    fill = {f["name"]: f["fill"] for f in frames}
    ofill = {f["name"]: f["fill"] for f in oframes}
    assert ofill["main"] == fill["main"] and ofill["idle"] == fill["idle"]
    assert fill["main"] != fill["idle"]


def test_stdin_and_stdout(tmp_path):
    src = tmp_path / "app.folded"
    src.write_text(FOLDED, encoding="utf-8")
    a = uscope("flamegraph", "-i", src).stdout
    b = uscope("flamegraph", "-i", "-", input=FOLDED).stdout
    c = uscope("flamegraph", input=FOLDED).stdout
    assert a == b == c
    (tmp_path / "a.svg").write_text(a, encoding="utf-8")
    check_graph(tmp_path / "a.svg", FOLDED)


def test_options(tmp_path):
    src = tmp_path / "app.folded"
    src.write_text(FOLDED, encoding="utf-8")
    out = tmp_path / "app.svg"
    uscope("flamegraph", "-i", src, "-o", out, "--title", "<app> & \"friends\"", "--width", "600",
           "--colors", "mem", "--countname", "bytes")
    root, frames = parse_svg(out)
    assert root.find("s:text[@id='title']", NS).text == "<app> & \"friends\""
    check_graph(out, FOLDED, unit="bytes", width=600)
    for f in frames:
        r, g, b = map(int, re.fullmatch(r"rgb\((\d+),(\d+),(\d+)\)", f["fill"]).groups())
        assert r == 0 and 190 <= g <= 240 and 0 <= b <= 210, f


def test_narrow_frames_left_out(tmp_path):
    # 1180 px for 100000 samples: 0.0118 px a sample; 8 samples, 0.094 px, are left out
    folded = "big 99980\nsmall;callee 12\nsmaller;callee 8\n"
    src = tmp_path / "f.folded"
    src.write_text(folded)
    uscope("flamegraph", "-i", src, "-o", tmp_path / "f.svg")
    frames = check_graph(tmp_path / "f.svg", folded)
    assert [f["name"] for f in frames] == ["all", "big", "small", "callee"]


# --------------------------------------------------------------------------
# The graph's own script, run in a DOM (jsdom): zoom, reset, search

DOM_DRIVER = Path(__file__).with_name("flame_dom.js")


def run_script(svg, *actions):
    """-> [state] after each "state" action (see flame_dom.js)"""
    node = shutil.which("node") or shutil.which("nodejs")
    env = dict(os.environ, NODE_PATH="/usr/share/nodejs")
    if not node or subprocess.run([node, "-e", "require('jsdom')"], env=env,
                                  capture_output=True).returncode:
        pytest.skip("node and jsdom are needed (Debian's node-jsdom, scripts/deps.sh)")
    r = subprocess.run([node, str(DOM_DRIVER), str(svg)] + list(actions), env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [json.loads(l) for l in r.stdout.splitlines()]


def test_script_zoom_and_search(tmp_path):
    src = tmp_path / "app.folded"
    src.write_text(FOLDED, encoding="utf-8")
    out = tmp_path / "app.svg"
    uscope("flamegraph", "-i", src, "-o", out)
    _, frames = parse_svg(out)
    names = [f["name"] for f in frames]
    handle = names.index("main.(*Server).handle")
    say = names.index('say "hi" & \'bye\'')
    start, zoomed, hover, unzoomed, found, reset = run_script(
        out, "state", f"click:{handle}", "state", f"over:{say}", "state", "unzoom", "state",
        "search:handle|say", "state", "key:ESC", "state")
    # as drawn
    assert [(f["x"], f["width"]) for f in start["frames"]] == \
        [(float(f["x"]), float(f["width"])) for f in frames]
    assert [f["label"] for f in start["frames"]] == [f["label"] for f in frames]
    assert start["unzoom_hidden"] and start["search"] == "Search"
    # a click on handle (300 of 1100 samples): it spans the 1180 px, its callee
    # say (220 samples, right of handle's own 80) scales with it, its callers
    # main and all stay whole and faded, the rest hides
    z = zoomed["frames"]
    assert not zoomed["unzoom_hidden"]
    assert [n for n, f in zip(names, z) if f["hidden"]] == \
        ["idle", "caf\u00e9", "std::vector<int>::push_back(int const&)",
         "operator new(unsigned long)"]
    assert [n for n, f in zip(names, z) if f["parent"]] == ["all", "main"]
    for i in (0, names.index("main"), handle):
        assert (z[i]["x"], z[i]["width"]) == (10, 1180), names[i]
    assert z[say]["x"] == pytest.approx(10 + 80 * 1180 / 300, abs=0.1)
    assert z[say]["width"] == pytest.approx(220 * 1180 / 300, abs=0.1)
    assert z[say]["label"] == 'say "hi" & \'bye\''
    assert hover["details"] == 'Function: say "hi" & \'bye\' (220 samples, 20.00%)'
    # Reset Zoom: as drawn
    assert [(f["x"], f["width"], f["hidden"], f["parent"]) for f in unzoomed["frames"]] == \
        [(f["x"], f["width"], False, False) for f in start["frames"]]
    assert unzoomed["unzoom_hidden"]
    # a search: the matches highlighted, their share counted once (say is in handle)
    hit = [n for n, f in zip(names, found["frames"]) if f["fill"] == "rgb(230,0,230)"]
    assert hit == ["main.(*Server).handle", 'say "hi" & \'bye\'']
    assert found["matched"] == f"Matched: {100 * 300 / 1100:.1f}%"
    assert found["search"] == "Reset Search"
    # Esc: the colors back
    assert [f["fill"] for f in reset["frames"]] == [f["fill"] for f in start["frames"]]
    assert reset["matched"].strip() == "" and reset["search"] == "Search"


# --------------------------------------------------------------------------
# From a recording

@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    d = tmp_path_factory.mktemp("flame")
    path = d / "rec.usc"
    cp = run_uscope(["record", "-o", path, "deep", "nap", "--", AGG, "rec"])
    assert cp.returncode == 0, cp.stderr
    return path


def folded_of(rec, out, *probes):
    uscope("export", "-r", rec, "--format", "folded", "-o", out, *probes)
    return Path(out).read_text()


def test_from_recording(rec, tmp_path):
    folded = folded_of(rec, tmp_path / "rec.folded")
    assert sorted(l.rsplit(" ", 1)[0] for l in folded.splitlines()) == REC_PATHS
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    cp = uscope("flamegraph", "-r", rec, "-o", a)
    assert cp.stdout == ""
    uscope("export", "-r", rec, "--format", "svg", "-o", b, "-q")
    assert a.read_bytes() == b.read_bytes()
    frames = check_graph(a, folded, unit="ns")
    assert [(f["name"], f["depth"]) for f in frames] == \
        [("all", 0), ("deep", 1), ("deep", 2), ("deep", 3), ("deep", 4), ("nap", 5)]
    # the outermost deep holds every nanosecond; nap sleeps 2 ms
    assert frames[1]["count"] == sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines())
    assert frames[5]["count"] >= 2_000_000


def test_recording_probes_select(rec, tmp_path):
    """PROBEs with -r select recorded probes, as export's: without nap its
    time is deep(0)'s own."""
    folded = folded_of(rec, tmp_path / "deep.folded", "deep")
    out = tmp_path / "deep.svg"
    uscope("flamegraph", "-r", rec, "-o", out, "-q", "deep")
    frames = check_graph(out, folded, unit="ns")
    assert [f["name"] for f in frames] == ["all"] + ["deep"] * 4


def test_recording_nothing_returned(tmp_path):
    """No call returned (distinct is never called in rec mode): nothing to
    draw is an error, and no file is left."""
    path = tmp_path / "none.usc"
    cp = run_uscope(["record", "-o", path, "distinct", "--", AGG, "rec"])
    assert cp.returncode == 0, cp.stderr
    assert folded_of(path, tmp_path / "none.folded") == ""
    for args in (["flamegraph", "-r", path, "-q", "-o", tmp_path / "a.svg"],
                 ["export", "-r", path, "-q", "--format", "svg", "-o", tmp_path / "b.svg"]):
        assert "no call returned" in one_error(run_uscope(args), 1)
    assert not (tmp_path / "a.svg").exists() and not (tmp_path / "b.svg").exists()


def test_recording_with_options(rec, tmp_path):
    folded = folded_of(rec, tmp_path / "rec.folded")
    out = tmp_path / "rec.svg"
    uscope("flamegraph", "-r", rec, "-o", out, "-q", "--width", "800", "--countname",
           "nanoseconds", "--title", "aggapp rec")
    root, _ = parse_svg(out)
    assert root.find("s:text[@id='title']", NS).text == "aggapp rec"
    check_graph(out, folded, unit="nanoseconds", width=800)


# --------------------------------------------------------------------------
# Bad input: one line, with the line number; no file left behind

@pytest.mark.parametrize("text,line,words", [
    ("main;parse 3\nmain;parse\n", 2, "no count"),
    ("a 1\n\nb 12x\n", 3, "'12x' is not a number"),
    ("a 1\nb -7\n", 2, "negative count, -7"),
    ("a 123456789012345678901234567890\n", 1, "too large"),
    ("a 9223372036854775807\nb 1\n", 2, "add up to more than"),
    ("a;;b 4\n", 1, "empty frame name at column 3"),
])
def test_bad_folded(tmp_path, text, line, words):
    src = tmp_path / "bad.folded"
    src.write_text(text)
    out = tmp_path / "bad.svg"
    err = one_error(run_uscope(["flamegraph", "-i", src, "-o", out]), 1)
    assert err.startswith(f"uscope: {src}:{line}: ") and words in err, err
    assert not out.exists()
    err = one_error(run_uscope(["flamegraph"], input=text), 1)
    assert err.startswith(f"uscope: stdin:{line}: ") and words in err, err


def test_bad_usage(rec, tmp_path):
    src = tmp_path / "ok.folded"
    src.write_text("a 1\n")
    one_error(run_uscope(["flamegraph", "-i", src, "-r", rec]), 2)
    assert "pink" in one_error(run_uscope(["flamegraph", "-i", src, "--colors", "pink"]), 2)
    assert "--width" in one_error(run_uscope(["flamegraph", "-i", src, "--width", "50"]), 2)
    assert "--width" in one_error(run_uscope(["flamegraph", "-i", src, "--width", "wide"]), 2)
    assert "-r" in one_error(run_uscope(["flamegraph", "-i", src, "deep"]), 2)
    missing = tmp_path / "missing.folded"
    assert str(missing) in one_error(run_uscope(["flamegraph", "-i", missing]), 1)
    # nothing to draw
    assert "no samples" in one_error(run_uscope(["flamegraph"], input="\n\na 0\n"), 1)
    # a recording given as folded stacks
    assert "-r" in one_error(run_uscope(["flamegraph", "-i", rec]), 1)
    # export knows svg
    assert "svg" in one_error(run_uscope(["export", "-r", rec, "--format", "bogus", "-o",
                                          tmp_path / "x"]), 2)
    assert not (tmp_path / "x").exists()
