"""COMMAND shares uscope's stdout: uscope writes only whole lines there, so
the program's own lines fall between uscope's, never inside one. The
`chatter` target's threads each write a line of their own (one write(2))
after every call of say(); uscope traces say() to the same stdout, a file
or a pipe, in JSON and in text. Every line of the output is then a whole
event or a whole line of chatter, and each side has all of its lines."""

import json
import re

import pytest

import uscope_e2e as u
from uscope_e2e import target

CHATTER = target("chatter")
THREADS, CALLS = 4, 3000
PROBE = "say t=$arg1:s32 i=$arg2:s32 line=$arg3:string"
OWN_RE = re.compile(r"^chatter t=(\d+) i=(\d+) (\.*)$")
DONE = f"chatter done n={THREADS} m={CALLS} lines={THREADS * CALLS}"
RUNS = 3


def run(json_out, to_file):
    """uscope trace [--json] PROBE -- chatter, its stdout a file or a pipe.
    -> (stdout, stderr)"""
    argv = ["trace"] + (["--json"] if json_out else []) + \
        [PROBE, "--", CHATTER, THREADS, CALLS]
    if not to_file:
        cp = u.run_uscope(argv, timeout=3 * u.TIMEOUT)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout, cp.stderr
    bg = u.Background(argv)     # its stdout: a file
    rc = bg.wait(3 * u.TIMEOUT)
    bg._stdout.close()
    out = bg.stdout_path.read_text(errors="surrogateescape")
    bg.dir.cleanup()
    assert rc == 0, bg.stderr
    return out, bg.stderr


def own_line(line, seen):
    """Is it one of chatter's lines? (counted in seen)"""
    m = OWN_RE.match(line)
    if m:
        t, i, dots = int(m.group(1)), int(m.group(2)), m.group(3)
        if t >= THREADS or i >= CALLS or len(dots) != i % 64:
            return False
        key = (t, i)
    elif line == DONE:
        key = "done"
    else:
        return False
    seen[key] = seen.get(key, 0) + 1
    return True


@pytest.mark.parametrize("to_file", [True, False], ids=["file", "pipe"])
@pytest.mark.parametrize("json_out", [True, False], ids=["json", "text"])
def test_command_output_between_lines(json_out, to_file):
    for k in range(RUNS):
        out, err = run(json_out, to_file)
        seen, events = {}, []
        for n, line in enumerate(out.splitlines(), 1):
            if own_line(line, seen):
                continue
            if json_out:
                try:
                    o = json.loads(line)
                except json.JSONDecodeError:
                    raise AssertionError(f"run {k}, line {n} is neither an event nor "
                                         f"chatter's: {line!r}")
                u.check_json(o, "trace", f" {n}")
                ev = u.json_to_event(o)
            else:
                ev = u.parse_text_line(line)
                assert ev is not None, f"run {k}, line {n} is neither an event nor " \
                    f"chatter's: {line!r}"
            events.append(ev)
        # chatter's own lines, each once
        assert seen.pop("done", 0) == 1, out[-2000:]
        assert sorted(seen) == [(t, i) for t in range(THREADS) for i in range(CALLS)]
        assert set(seen.values()) == {1}
        # the events, each whole: its arguments are the line chatter wrote after it
        s = u.parse_summary(err)
        assert s is not None and s.total == len(events), err
        assert len(events) + s.lost == THREADS * CALLS, err
        for ev in events:
            assert ev.event == "say", ev.line
            t, i = ev.args["t"], ev.args["i"]
            want = f"chatter t={t} i={i} {'.' * (i % 64)}\n"
            assert ev.args["line"] == want, ev.line
        assert len({(e.args["t"], e.args["i"]) for e in events}) == len(events)
