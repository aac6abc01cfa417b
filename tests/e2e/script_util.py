"""Helpers of uscope script's end-to-end tests (test_script*.py): running a
program under uscope script (on each engine) and under bpftrace -c, and
reading bpftrace's map dumps into dicts, so that two outputs compare
whatever the order of rows with equal values (bpftrace sorts them by value
and leaves ties in its hash map's order)."""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import uscope_e2e as u

APP = u.target("scriptapp")

# (engine, environment): inject runs the program in the process; "events"
# is inject with uscope running it on the streamed events instead; bpf runs
# it in the kernel (script.bpf.c), "bpfall" the same with every case of the
# executor verified (as a program with every op would be), "bpfev" has uscope
# run it on bpf's events, "bpfret" in the kernel with the kernel's uretprobes
# (--uretprobe); tracefs (kernel uprobes: 10-16 us a hit, few calls)
ENGINES = [("inject", {}), ("events", {"USCOPE_SCRIPT_EVENTS": "1"}), ("bpf", {}),
           ("bpfall", {"USCOPE_BPF_SCRIPT_ALL": "1"}), ("bpfev", {"USCOPE_BPF_SCRIPT": "0"}),
           ("bpfret", {}), ("tracefs", {})]
ENGINE_IDS = [e for e, _ in ENGINES]


def engine_args(engine):
    if engine == "bpfret":     # bpf with the kernel's uretprobes
        return ["-e", "bpf", "--uretprobe"]
    return ["-e", {"events": "inject", "bpfall": "bpf", "bpfev": "bpf"}.get(engine, engine)]


def engine_env(engine):
    return dict(ENGINES)[engine]


def script(prog, cmd=None, engine=None, args=(), extra=(), timeout=u.TIMEOUT, path=False,
           input=None):
    """uscope script -x PROG (or the file PROG with path) [ARGS] -- CMD."""
    a = ["script", "-q"] + (engine_args(engine) if engine else []) + list(extra)
    a += [str(prog)] if path else ["-x", prog]
    a += [str(x) for x in args]
    if cmd:
        a += ["--"] + [str(c) for c in cmd]
    return u.run_uscope(a, timeout=timeout, env=engine_env(engine) if engine else None,
                        input=input)


def have_bpftrace():
    return shutil.which("bpftrace") is not None


def bpftrace(prog, cmd, path=False, timeout=120, json=False):
    """bpftrace -c CMD on the same program: its stdout (the 'Attaching'
    line dropped)."""
    with tempfile.TemporaryDirectory(prefix="uscope-bt-") as d:
        f = Path(d) / "prog.bt"
        if not path:
            f.write_text(prog)
        argv = ["bpftrace"] + (["-f", "json"] if json else []) + \
               ["-c", " ".join(str(c) for c in cmd), str(prog if path else f)]
        # its maps count against RLIMIT_MEMLOCK where that is still charged
        p = subprocess.run(["sh", "-c", 'ulimit -l unlimited 2>/dev/null; exec "$@"', "sh"] + argv,
                           capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"bpftrace failed ({p.returncode}):\n{p.stderr[-2000:]}"
    lines = [l for l in p.stdout.split("\n") if not l.startswith("Attaching ")
             and '"type": "attached_probes"' not in l]
    return "\n".join(lines)


MAP_RE = re.compile(r"^@(\w*)(?:\[(.*)\])?: (.*)$")
BUCKET_RE = re.compile(r"^([\[(][^|]*?)\s+(\d+) \|")


def parse_maps(out):
    """bpftrace's map dump: {name: {key: value}}; a hist's value is the tuple
    of its (bucket, count) lines; a stack key is its frames joined by ';'."""
    maps = {}
    lines = out.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^@(\w*)\[$", line)
        if m:
            # a key of several lines: a stack's frames
            frames = []
            i += 1
            while i < len(lines) and not lines[i].startswith("]: "):
                frames.append(lines[i].strip())
                i += 1
            if i < len(lines):
                maps.setdefault(m.group(1), {})[";".join(frames)] = lines[i][3:]
            i += 1
            continue
        m = MAP_RE.match(line)
        if not m:
            i += 1
            continue
        name, key, val = m.group(1), m.group(2) or "", m.group(3)
        if val == "":
            buckets = []
            while i + 1 < len(lines) and BUCKET_RE.match(lines[i + 1]):
                b = BUCKET_RE.match(lines[i + 1])
                buckets.append((b.group(1).strip(), int(b.group(2))))
                i += 1
            maps.setdefault(name, {})[key] = tuple(buckets)
        else:
            maps.setdefault(name, {})[key] = val
        i += 1
    return maps


def printf_lines(out):
    """The lines before the maps' dump (bpftrace prints two newlines, then
    the maps)."""
    head = out.split("\n\n\n")[0] if "\n\n\n" in out else out
    return [l for l in head.split("\n") if l and not l.startswith("scriptapp done")]


def no_process_started(marker):
    """The COMMAND a refused program would have run never ran."""
    return not os.path.exists(marker)
