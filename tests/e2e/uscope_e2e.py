"""Helpers for the uscope end-to-end tests: running uscope, parsing its text
and JSON output and its summary, driving target programs, and reading
addresses out of the targets with nm/objdump/readelf.

Imported by conftest.py and by the test modules (tests/e2e is on sys.path
under pytest's default import mode)."""

import collections
import functools
import json
import os
import re
import select
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
TARGETS = REPO / "tests" / "targets"
BIN = TARGETS / "bin"
TRACEFS = Path("/sys/kernel/tracing")
UPROBE_EVENTS = TRACEFS / "uprobe_events"
INSTANCES = TRACEFS / "instances"

TIMEOUT = 30          # one uscope run; pytest's own limit is 60 s per test


def uscope_path() -> Path:
    env = os.environ.get("USCOPE")
    if env:
        return Path(env).resolve()
    return REPO / "uscope"



# The inject agent's ring records (engine/inject/inject_shared.h): the first
# u32 of a record is its length, flagged for a pad to the ring's end or a
# short record (struct inj_rec_short: the length in the low 8 bits).
INJ_REC_PAD = 0x80000000
INJ_REC_SHORT = 0x40000000


def inj_rec_len(word):
    """The bytes of the inject record or pad whose first u32 is word."""
    return word & 0xFF if word & INJ_REC_SHORT else word & ~INJ_REC_PAD


def target(name: str) -> str:
    return str(BIN / name)


# The strings handle() receives: PATHS[i % 3] (see tests/targets/args.c).
ARGS_PATHS = ["/etc/hosts", "/tmp/with space", 'tab\there "q"\\']
ARGS_MAGIC = 0x5EED1234ABCD


# --------------------------------------------------------------------------
# Output parsing

# COMM-TID[/NSTID] [CPU] SECONDS.MICROSECONDS: EVENT: (0xADDR[ <- 0xFUNC]) args...
# (NSTID: the thread's id in its PID namespace, when below ours: a container)
EVENT_RE = re.compile(
    r"^(?P<comm>.+)-(?P<tid>\d+)(?:/(?P<nstid>\d+))? \[(?P<cpu>\d{3,})\] (?P<sec>\d+)\.(?P<usec>\d{6}): "
    r"(?P<event>[A-Za-z0-9_./()*+]+): \((?P<ip>0x[0-9a-f]+)(?: <- (?P<func>0x[0-9a-f]+))?\)"
    r"(?P<rest>.*)$")
_VAL = r'"(?:[^"\\]|\\.)*"|<optimized out>|\{\.\.\.\}|\[\.\.\.\]|[^ "{}]*'
ARG_RE = re.compile(rf' ([A-Za-z_][A-Za-z0-9_]*)=({_VAL})')
# a struct shown whole: NAME={MEMBER=VALUE MEMBER=VALUE}
GROUP_RE = re.compile(r' ([A-Za-z_][A-Za-z0-9_]*)=\{')
MEMBER_RE = re.compile(rf' ?([A-Za-z_][A-Za-z0-9_]*)=({_VAL})')
SUMMARY_RE = re.compile(r"^uscope:\s+(\d+)\s+events?,\s+(\d+)\s+lost\s*$")
# "lost (N found no room within --max-wait)": of the lost, waits for room that ran out
_WAITED = r"(?: \(\d+ found no room within --max-wait\))?"
PER_EVENT_RE = re.compile(rf"^\s+(\S.*?):\s+(\d+)\s+events?,\s+(\d+)\s+lost{_WAITED}\s*$")  # C++ labels have spaces
# "uscope: tracing 163 functions (429 sites)", "tracing 1 function", "tracing
# 2 functions and 1 USDT probe (5 sites)": what is traced, then the sites
# when they are more (the number parse_ready and wait_ready give)
_UNIT = r"\d+ (?:functions?|USDT probes?|lines?|address(?:es)?)"
# py: probes last, as the probe ("py:app:* (the Python functions it names, as
# they are called)", with its arguments if any) or how many: their functions
# are matched as CPython calls them
_PY = (r"(?:\S.*? \(the Python functions it names, as they are called\)|"
       r"\d+ py: probes \(the Python functions they name, as they are called\))")
READY_RE = re.compile(rf"^uscope: tracing (?:({_UNIT}(?:(?:, | and ){_UNIT})*)"
                      rf"(?: \((\d+) sites\))?(?: and {_PY})?|{_PY})"
                      r"(?: in \d+ process(?:es)?)?\s*$")   # system-wide on inject


def ready_sites(m) -> int:
    """The sites of a READY_RE match: given, or as many as what is traced."""
    if m.group(2):
        return int(m.group(2))
    if not m.group(1):
        return 1    # py: probes alone
    return sum(int(n) for n in re.findall(r"\d+", m.group(1)))
# USDT events are labelled PROVIDER:NAME (app:tick): the same line formats
# with one colon allowed in the event name (labels=True below); Go's are
# its own names (main.(*Controller).syncDeployment, go/parser.ParseFile),
# which EVENT_RE takes too.
_LABEL = r"[A-Za-z0-9_./()*+]+(?::[A-Za-z0-9_]+)?"
LABEL_EVENT_RE = re.compile(EVENT_RE.pattern.replace(r"(?P<event>[A-Za-z0-9_./()*+]+)",
                                                     rf"(?P<event>{_LABEL})"))
LABEL_PER_EVENT_RE = re.compile(rf"^\s+({_LABEL}):\s+(\d+)\s+events?,\s+(\d+)\s+lost{_WAITED}\s*$")
assert LABEL_EVENT_RE.pattern != EVENT_RE.pattern

_ESC = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
        "v": "\v", "e": "\x1b", "\\": "\\", '"': '"', "'": "'", "?": "?"}


def c_unescape(s: str) -> str:
    """Decode the C escapes of a double-quoted text value (quotes removed)."""
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        i += 1
        if i >= len(s):
            raise ValueError(f"dangling backslash in {s!r}")
        c = s[i]
        if c in _ESC:
            out += _ESC[c].encode()
            i += 1
        elif c == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", s[i + 1:])
            if not m:
                raise ValueError(f"bad \\x escape in {s!r}")
            out.append(int(m.group(0), 16))
            i += 1 + len(m.group(0))
        elif c in "01234567":
            m = re.match(r"[0-7]{1,3}", s[i:])
            out.append(int(m.group(0), 8) & 0xFF)
            i += len(m.group(0))
        else:
            raise ValueError(f"unknown escape \\{c} in {s!r}")
    return out.decode("utf-8", "surrogateescape")


def decode_text_value(raw: str):
    """Text value -> the Python value the JSON output would carry:
    strings -> str, (fault) and (null) -> None, decimal -> int, 0x... and symbols -> str."""
    if raw.startswith('"'):
        return c_unescape(raw[1:-1])
    if raw in ("(fault)", "(null)", "<optimized out>"):
        return None
    if raw in ("true", "false"):
        return raw == "true"
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    return raw


@dataclass
class Event:
    comm: str
    tid: int
    cpu: int
    time: float           # seconds
    event: str
    type: str             # "p" or "r"
    ip: int               # return probes: the return address
    func: Optional[int]   # return probes: the function's address
    args: dict            # name -> decoded value (same shape for text and JSON)
    pid: Optional[int] = None   # JSON only
    raw: Optional[dict] = None  # text only: name -> value as printed
    line: str = ""
    ns_tid: Optional[int] = None    # a container's: the thread's id in it


def parse_text_line(line: str, labels: bool = False) -> Optional[Event]:
    m = (LABEL_EVENT_RE if labels else EVENT_RE).match(line)
    if not m:
        return None
    rest = m.group("rest")
    raw = {}
    pos = 0
    while pos < len(rest):
        gm = GROUP_RE.match(rest, pos)
        if gm and not rest.startswith("{...}", gm.end() - 1):
            members, pos = {}, gm.end()
            while pos < len(rest) and rest[pos] != "}":
                mm = MEMBER_RE.match(rest, pos)
                if not mm or (mm.group(0)[0] == " ") != bool(members):
                    return None
                members[mm.group(1)] = mm.group(2)
                pos = mm.end()
            if pos >= len(rest) or not members or gm.group(1) in raw:
                return None
            raw[gm.group(1)] = members
            pos += 1
            continue
        am = ARG_RE.match(rest, pos)
        if not am:
            return None
        if am.group(1) in raw:
            return None
        raw[am.group(1)] = am.group(2)
        pos = am.end()
    try:
        args = {k: {mk: decode_text_value(mv) for mk, mv in v.items()} if isinstance(v, dict)
                else decode_text_value(v) for k, v in raw.items()}
    except ValueError:
        return None
    func = m.group("func")
    return Event(comm=m.group("comm"), tid=int(m.group("tid")), cpu=int(m.group("cpu")),
                 time=int(m.group("sec")) + int(m.group("usec")) / 1e6,
                 event=m.group("event"), type="r" if func else "p",
                 ip=int(m.group("ip"), 16), func=int(func, 16) if func else None,
                 args=args, raw=raw, line=line,
                 ns_tid=int(m.group("nstid")) if m.group("nstid") else None)


def parse_text(out: str, labels: bool = False):
    """-> (events, other non-empty lines that are not event lines)
    labels: event names may be PROVIDER:NAME (USDT)."""
    events, other = [], []
    for line in out.splitlines():
        if not line.strip():
            continue
        ev = parse_text_line(line, labels)
        if ev is None:
            other.append(line)
        else:
            events.append(ev)
    return events, other


# --------------------------------------------------------------------------
# The --json output's schema (doc/json.md, doc/json/KIND.schema.json): every
# line of --json output a test reads is checked against its command's.

SCHEMA_DIR = REPO / "doc" / "json"
JSON_KINDS = ("trace", "flow", "count", "hist", "latency", "objtrace", "report")


@functools.lru_cache(maxsize=None)
def json_validator(kind: Optional[str] = None):
    """The validator of a command's --json lines (kind None: any command's)."""
    import jsonschema    # Debian's python3-jsonschema (scripts/deps.sh)
    store = {p.resolve().as_uri(): json.loads(p.read_text())
             for p in SCHEMA_DIR.glob("*.schema.json")}
    if kind is None:
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                  "anyOf": [{"$ref": f"{k}.schema.json"} for k in JSON_KINDS]}
        base = (SCHEMA_DIR / "any.schema.json").resolve().as_uri()
    else:
        base = (SCHEMA_DIR / f"{kind}.schema.json").resolve().as_uri()
        schema = store[base]
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, resolver=jsonschema.RefResolver(base, schema, store=store))


def check_json(obj, kind: Optional[str] = None, where: str = ""):
    """AssertionError unless obj is a valid --json line of kind (None: of any)."""
    errors = sorted(json_validator(kind).iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        import jsonschema
        e = jsonschema.exceptions.best_match(errors)
        raise AssertionError(f"--json line{where} does not match doc/json/"
                             f"{kind or '*'}.schema.json: {e.message} at "
                             f"{'/'.join(map(str, e.absolute_path)) or 'the top'}: "
                             f"{json.dumps(obj)[:2000]}")


def json_lines(out: str, kind: Optional[str] = None, strict: bool = False):
    """The --json objects of out, each checked against the schema of kind
    (None: any). strict: every non-empty line is one (an -o file); else a
    line that does not begin with '{' is COMMAND's own (stdout)."""
    objs = []
    for n, line in enumerate(out.splitlines(), 1):
        if not line.strip() or (not strict and not line.startswith("{")):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise AssertionError(f"--json output line {n} is not JSON ({e}): {line!r}")
        assert isinstance(obj, dict), f"--json line {n} is not an object: {line!r}"
        check_json(obj, kind, f" {n}")
        objs.append(obj)
    return objs


def parse_json_objects(out: str, kind: Optional[str] = None):
    """json.loads on every non-empty line (AssertionError naming the line),
    each checked against the schema of kind (None: of any command)."""
    return json_lines(out, kind, strict=True)


def _json_run(argv):
    """(the command, its -o file or None) of a uscope argv that has --json,
    else None."""
    argv = [str(a) for a in argv]
    if "--" in argv:
        argv = argv[:argv.index("--")]
    kind = next((a for a in argv if a in JSON_KINDS), None)
    if kind is None or "--json" not in argv:
        return None
    out = None
    for i, a in enumerate(argv):
        if a in ("-o", "--output") and i + 1 < len(argv):
            out = argv[i + 1]
        elif a.startswith("--output="):
            out = a[len("--output="):]
    return kind, out


def check_json_output(argv, stdout: str):
    """A finished uscope run with --json: every line of its -o file, or every
    line of its stdout that is not COMMAND's, valid against its schema."""
    run = _json_run(argv)
    if run is None:
        return
    kind, out = run
    if out is None:
        json_lines(stdout, kind)
    elif out != "-" and Path(out).is_file():
        json_lines(Path(out).read_text(errors="surrogateescape"), kind, strict=True)


def json_to_event(o: dict) -> Event:
    def addr(v):
        return int(v, 16) if isinstance(v, str) else v
    return Event(comm=o.get("comm"), tid=o.get("tid"), cpu=o.get("cpu"),
                 time=(o.get("time_ns") or 0) / 1e9, event=o.get("event"),
                 type=o.get("type"), ip=addr(o.get("ip")),
                 func=addr(o["func"]) if "func" in o else None,
                 args=o.get("args") or {}, pid=o.get("pid"), line=json.dumps(o),
                 ns_tid=o.get("ns_tid"))


@dataclass
class Summary:
    total: int
    lost: int
    per_event: dict = field(default_factory=dict)   # EVENT -> (events, lost)


def parse_summary(stderr: str, labels: bool = False) -> Optional[Summary]:
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        m = SUMMARY_RE.match(line)
        if not m:
            continue
        s = Summary(int(m.group(1)), int(m.group(2)))
        for nxt in lines[i + 1:]:
            pm = (LABEL_PER_EVENT_RE if labels else PER_EVENT_RE).match(nxt)
            if not pm:
                break
            s.per_event[pm.group(1)] = (int(pm.group(2)), int(pm.group(3)))
        return s
    return None


def parse_ready(stderr: str) -> Optional[int]:
    for line in stderr.splitlines():
        m = READY_RE.match(line)
        if m:
            return ready_sites(m)
    return None


@dataclass
class TraceResult:
    argv: list
    rc: int
    stdout: str           # uscope's stdout (the COMMAND's output when -o is used)
    stderr: str
    output: str           # the event output (the -o file, or stdout)
    json: bool = False
    labels: bool = False  # text: event names may be PROVIDER:NAME (USDT)
    events: list = field(default_factory=list)
    objects: list = field(default_factory=list)   # raw JSON objects
    other: list = field(default_factory=list)     # output lines that are not events

    def __post_init__(self):
        if self.json:
            self.objects = parse_json_objects(self.output, "trace")
            self.events = [json_to_event(o) for o in self.objects]
        else:
            self.events, self.other = parse_text(self.output, self.labels)

    @property
    def summary(self) -> Optional[Summary]:
        return parse_summary(self.stderr, self.labels)

    @property
    def ready(self) -> Optional[int]:
        return parse_ready(self.stderr)

    def named(self, name: str) -> list:
        return [e for e in self.events if e.event == name]

    def counts(self) -> dict:
        return dict(collections.Counter(e.event for e in self.events))

    def describe(self) -> str:
        return (f"argv: {self.argv}\nrc: {self.rc}\nstderr:\n{self.stderr[-4000:]}\n"
                f"output (first lines):\n" + "\n".join(self.output.splitlines()[:15]))

    def check(self, rc: int = 0, ready: Optional[int] = None, lost0: bool = True):
        """rc, every output line an event, readiness count, summary consistent."""
        assert self.rc == rc, f"uscope exited {self.rc}, expected {rc}\n{self.describe()}"
        assert not self.other, f"non-event lines in the output: {self.other[:5]}\n{self.describe()}"
        if ready is not None:
            assert self.ready == ready, \
                f"readiness line says {self.ready} probes, expected {ready}\n{self.describe()}"
        s = self.summary
        assert s is not None, f"no summary line on stderr\n{self.describe()}"
        assert s.total == len(self.events), \
            f"summary says {s.total} events, output has {len(self.events)}\n{self.describe()}"
        for name, n in self.counts().items():
            assert name in s.per_event, f"no summary line for {name}\n{self.describe()}"
            assert s.per_event[name][0] == n, \
                f"summary {name}: {s.per_event[name]}, output has {n}\n{self.describe()}"
        if lost0:
            assert s.lost == 0 and all(v[1] == 0 for v in s.per_event.values()), \
                f"events lost\n{self.describe()}"
        return self


def assert_multiset(actual, expected, what="values"):
    a, e = collections.Counter(actual), collections.Counter(expected)
    if a != e:
        missing = list((e - a).elements())[:10]
        extra = list((a - e).elements())[:10]
        raise AssertionError(f"{what} differ: {len(list(a.elements()))} seen, "
                             f"{len(list(e.elements()))} expected; "
                             f"missing {missing}; unexpected {extra}")


# --------------------------------------------------------------------------
# Processes. Every process a test starts is registered and ended (uscope
# first, politely, so that it can clean up) before the leftover check.

class Registry:
    def __init__(self):
        self.uscopes = []
        self.targets = []

    def cleanup(self):
        for p in self.uscopes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for p in self.targets:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
            for f in (p.stdin, p.stdout, p.stderr):
                if f:
                    try:
                        f.close()
                    except OSError:
                        pass
        self.uscopes.clear()
        self.targets.clear()


REGISTRY = Registry()


def _stop(p: subprocess.Popen):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_uscope(args, timeout=TIMEOUT, prefix=(), input=None, env=None):
    """Run uscope to completion. -> CompletedProcess (text). On timeout the
    process gets SIGTERM (so it can clean up), then SIGKILL, and the test fails.
    env: variables added to the environment."""
    argv = list(prefix) + [str(uscope_path())] + [str(a) for a in args]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="surrogateescape",
                         env=dict(os.environ, **env) if env else None)
    REGISTRY.uscopes.append(p)
    try:
        out, err = p.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(p)
        out, err = p.communicate()
        raise AssertionError(f"uscope did not finish within {timeout}s: {argv}\nstderr:\n{err}")
    check_json_output(argv, out)
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def trace_argv(probes, cmd=None, pid=None, json=False, duration=None, out=None, extra=(),
               command="trace"):
    """argv of `uscope COMMAND ...` (trace, or flow: they share their options)."""
    a = [command]
    if pid is not None:
        a += ["-p", str(pid)]
    if json:
        a.append("--json")
    if out is not None:
        a += ["-o", str(out)]
    if duration is not None:
        a += ["-d", str(duration)]
    a += list(extra) + list(probes)
    if cmd is not None:
        a += ["--"] + [str(c) for c in cmd]
    return a


def trace(*probes, cmd=None, pid=None, json=False, duration=None, use_file=True,
          extra=(), timeout=TIMEOUT, labels=False, input=None) -> TraceResult:
    """uscope trace ... to completion; events go to an -o file unless
    use_file=False (then they are read from stdout). labels: event names
    may be PROVIDER:NAME (USDT). input: uscope's (and so COMMAND's) stdin."""
    with tempfile.TemporaryDirectory(prefix="uscope-e2e-") as d:
        outf = Path(d) / "events.out" if use_file else None
        args = trace_argv(probes, cmd, pid, json, duration, outf, extra)
        cp = run_uscope(args, timeout=timeout, input=input)
        output = cp.stdout
        if outf is not None:
            output = outf.read_text(errors="surrogateescape") if outf.exists() else ""
        return TraceResult(cp.args, cp.returncode, cp.stdout, cp.stderr, output, json=json,
                           labels=labels)


class Background:
    """uscope running in the background. stdout goes to a file; stderr is read
    by a thread, which notices the readiness line."""

    def __init__(self, args, json=False, labels=False):
        self.dir = tempfile.TemporaryDirectory(prefix="uscope-e2e-")
        self.stdout_path = Path(self.dir.name) / "stdout"
        self.json = json
        self.labels = labels
        self.argv = [str(uscope_path())] + [str(a) for a in args]
        self._stdout = open(self.stdout_path, "w")
        self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._stdout,
                                  stderr=subprocess.PIPE, text=True, errors="surrogateescape")
        REGISTRY.uscopes.append(self.p)
        self.pid = self.p.pid
        self.err_lines = []
        self.ready_n = None
        self._ready = threading.Event()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.p.stderr:
            self.err_lines.append(line)
            m = READY_RE.match(line.rstrip("\n"))
            if m and self.ready_n is None:
                self.ready_n = ready_sites(m)
                self._ready.set()
        self._ready.set()   # EOF: wake any waiter

    @property
    def stderr(self):
        return "".join(self.err_lines)

    def wait_ready(self, timeout=TIMEOUT):
        self._ready.wait(timeout)
        if self.ready_n is None:
            if self.p.poll() is None:
                _stop(self.p)
            raise AssertionError(f"uscope never printed 'uscope: tracing N functions' "
                                 f"(rc={self.p.poll()}): {self.argv}\nstderr:\n{self.stderr}")
        return self.ready_n

    def signal(self, sig):
        self.p.send_signal(sig)

    def wait(self, timeout=TIMEOUT):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            _stop(self.p)
            raise AssertionError(f"uscope did not exit within {timeout}s: {self.argv}\n"
                                 f"stderr:\n{self.stderr}")
        self._t.join(10)
        check_json_output(self.argv, self.stdout_path.read_text(errors="surrogateescape"))
        return rc

    def result(self, output_file=None, timeout=TIMEOUT) -> TraceResult:
        rc = self.wait(timeout)
        self._stdout.close()
        stdout = self.stdout_path.read_text(errors="surrogateescape")
        output = stdout
        if output_file is not None:
            output = Path(output_file).read_text(errors="surrogateescape") \
                if Path(output_file).exists() else ""
        self.dir.cleanup()
        return TraceResult(self.argv, rc, stdout, self.stderr, output, json=self.json,
                           labels=self.labels)


def trace_bg(*probes, pid=None, json=False, duration=None, out=None, extra=(),
             labels=False) -> Background:
    return Background(trace_argv(probes, None, pid, json, duration, out, extra), json=json,
                      labels=labels)


class Target:
    """A target program with piped stdin/stdout, read line by line."""

    def __init__(self, argv, stdin=True):
        self.p = subprocess.Popen([str(a) for a in argv],
                                  stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        REGISTRY.targets.append(self.p)
        self.pid = self.p.pid
        self._buf = b""

    def readline(self, timeout=TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"target {self.p.args} printed no line within {timeout}s")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise AssertionError(f"target {self.p.args} closed stdout "
                                         f"(rc={self.p.poll()}), partial {self._buf!r}")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def expect(self, text, timeout=TIMEOUT):
        line = self.readline(timeout)
        assert line == text, f"target printed {line!r}, expected {text!r}"

    def write(self, data: str):
        self.p.stdin.write(data.encode())
        self.p.stdin.flush()

    def close_stdin(self):
        self.p.stdin.close()

    def alive(self):
        return self.p.poll() is None

    def kill(self, sig=signal.SIGKILL):
        self.p.send_signal(sig)
        return self.p.wait(TIMEOUT)

    def wait(self, timeout=TIMEOUT):
        return self.p.wait(timeout)


class Waiter(Target):
    def __init__(self):
        super().__init__([target("waiter")])
        self.k = 0
        self.expect("ready")

    def send(self, line: str):
        """Write a line and wait until on_line() has run for it."""
        self.write(line + "\n")
        self.k += 1
        self.expect(f"got {self.k}")


def start_spin() -> Target:
    t = Target([target("spin")], stdin=False)
    t.expect("ready")
    return t


# --------------------------------------------------------------------------
# Leftovers in tracefs

def janitor_of(pid):
    """The janitor of live uscope process pid: named uscope-janitor, forked
    from it (the same command line)."""
    def read(p, name):
        try:
            return (p / name).read_bytes()
        except OSError:
            return b""
    argv = read(Path(f"/proc/{pid}"), "cmdline")
    found = [int(d.name) for d in Path("/proc").iterdir()
             if d.name.isdigit() and read(d, "comm") == b"uscope-janitor\n" and
             read(d, "cmdline") == argv]
    assert len(found) == 1, f"janitors of uscope {pid}: {found}"
    return found[0]


def leftovers(include_live_sessions=False):
    """(uprobe_events lines containing "uscope", instances named uscope*).

    Entries named uscope_<PID> whose PID is a uscope process still running
    are another live session (e.g. someone using uscope on this machine
    meanwhile), not something left behind: they are skipped unless
    include_live_sessions. Every uscope a test starts has ended before
    this is checked."""
    events = [l for l in UPROBE_EVENTS.read_text().splitlines() if "uscope" in l]
    insts = sorted(n for n in os.listdir(INSTANCES) if n.startswith("uscope")) \
        if INSTANCES.is_dir() else []
    if not include_live_sessions:
        events = [l for l in events if not _owned_by_live_uscope(l.split()[0])]
        insts = [n for n in insts if not _owned_by_live_uscope(n)]
    return events, insts


def _write(path, text):
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        pass


def _owned_by_live_uscope(name: str) -> bool:
    """Is this uscope_<PID>... name owned by a uscope process still running
    (another session, not ours to remove)?"""
    m = re.search(r"uscope_(\d+)", name)
    if not m or any(p.pid == int(m.group(1)) for p in REGISTRY.uscopes):
        return False
    try:
        comm = Path(f"/proc/{m.group(1)}/comm").read_text()
        stat = Path(f"/proc/{m.group(1)}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    return "uscope" in comm and not zombie


def force_cleanup():
    """Best effort removal of what a broken uscope left, so that one failure
    does not make every later test fail its leftover check. Never touches
    what a live uscope process owns."""
    events, insts = leftovers()
    for name in insts:
        d = INSTANCES / name
        _write(d / "tracing_on", "0")
        _write(d / "events" / "enable", "0")
        try:
            os.rmdir(d)
        except OSError:
            pass
    for line in events:
        m = re.match(r"^[pr]:(\S+)/(\S+)\s", line)
        if not m:
            continue
        group, ev = m.group(1), m.group(2)
        _write(TRACEFS / "events" / group / ev / "enable", "0")
        with open(UPROBE_EVENTS, "a") as f:
            try:
                f.write(f"-:{group}/{ev}\n")
            except OSError:
                pass


# --------------------------------------------------------------------------
# Binary inspection

def _run(argv) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def nm_funcs(path) -> dict:
    """name -> [(address, size or None)] for defined function symbols."""
    out = collections.defaultdict(list)
    for line in _run(["nm", "-S", "--defined-only", str(path)]).splitlines():
        f = line.split()
        if len(f) == 4:
            addr, size, typ, name = f
        elif len(f) == 3:
            addr, typ, name = f
            size = None
        else:
            continue
        if typ in "TtWwi":
            out[name].append((int(addr, 16), int(size, 16) if size else None))
    return dict(out)


def nm_addr(path, name) -> int:
    for line in _run(["nm", "--defined-only", str(path)]).splitlines():
        f = line.split()
        if len(f) == 3 and f[2] == name:
            return int(f[0], 16)
    raise KeyError(f"{name} not in nm {path}")


def func_addr(path, name) -> int:
    c = nm_funcs(path)[name]
    assert len(c) == 1, f"{name} is ambiguous in {path}: {c}"
    return c[0][0]


def disasm(path, func):
    """[(address, instruction text)] of one function, from objdump."""
    out = _run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={func}", str(path)])
    insns = []
    for line in out.splitlines():
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2).strip()))
    return insns


def insn_offsets(path, func):
    """Offsets of the instruction boundaries in func, with each length."""
    start = func_addr(path, func)
    size = nm_funcs(path)[func][0][1]
    ins = disasm(path, func)
    res = []
    for k, (a, _) in enumerate(ins):
        nxt = ins[k + 1][0] if k + 1 < len(ins) else start + size
        res.append((a - start, nxt - a))
    return res


def call_return_addr(path, caller, callee) -> int:
    """Address of the instruction after the (only) call to callee in caller."""
    ins = disasm(path, caller)
    hits = [k for k, (_, t) in enumerate(ins) if t.startswith("call") and f"<{callee}>" in t]
    assert len(hits) == 1, f"{len(hits)} calls to {callee} in {caller}"
    return ins[hits[0] + 1][0]


def file_offset(path, vaddr) -> int:
    """File offset of a link-time virtual address (from the LOAD headers)."""
    for line in _run(["readelf", "-lW", str(path)]).splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, va, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if va <= vaddr < va + filesz:
                return vaddr - va + off
    raise ValueError(f"{vaddr:#x} not in a LOAD segment of {path}")


def unused_pid() -> int:
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    for cand in range(pid_max - 1, 1000, -1):
        if not os.path.exists(f"/proc/{cand}"):
            return cand
    raise RuntimeError("no free pid")


def error_lines(stderr: str):
    return [l for l in stderr.splitlines() if l.strip()]


# --------------------------------------------------------------------------
# USDT notes (readelf -n), for tests/e2e/test_usdt.py

@dataclass
class UsdtSite:
    provider: str
    name: str
    location: int
    base: int
    semaphore: int
    args: list            # the argument specs, e.g. ["-4@%edi", "8@(%rax,%rdx,8)"]

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.name}"


def usdt_notes(path) -> list:
    """Every site of every USDT probe of a file, in note order, from
    `readelf -nW` (its .note.stapsdt section)."""
    sites, cur = [], {}
    for line in _run(["readelf", "-nW", str(path)]).splitlines():
        s = line.strip()
        if "Provider: " in s:     # with -W, on the line of the note's owner
            cur = {"provider": s.split("Provider: ", 1)[1].strip()}
        elif s.startswith("Name: ") and "provider" in cur:
            cur["name"] = s.split(": ", 1)[1]
        elif s.startswith("Location: ") and "name" in cur:
            m = re.match(r"Location: (0x[0-9a-f]+), Base: (0x[0-9a-f]+), "
                         r"Semaphore: (0x[0-9a-f]+)", s)
            cur.update(location=int(m.group(1), 16), base=int(m.group(2), 16),
                       semaphore=int(m.group(3), 16))
        elif s.startswith("Arguments:") and "location" in cur:
            sites.append(UsdtSite(args=s[len("Arguments:"):].split(), **cur))
            cur = {}
    return sites


# x86-64 arg spec operand forms (GNU as AT&T syntax, after "SIZE@")
SPEC_RE = re.compile(r"^(?P<size>-?(?:1|2|4|8))@(?P<op>.+)$")
SPEC_FORMS = {
    "register": re.compile(r"^%[a-z0-9]+$"),
    "constant": re.compile(r"^\$-?\d+$"),
    "rip": re.compile(r"^[A-Za-z_.][A-Za-z0-9_.$]*(?:[+-]\d+)?\(%rip\)$"),
    "frame": re.compile(r"^-?\d+\(%r[bs]p\)$"),
    "sib": re.compile(r"^(?:-?\w*)\(%?[a-z0-9]*,%[a-z0-9]+(?:,\d)?\)$"),
}


def spec_form(spec: str) -> Optional[str]:
    """-> register, constant, rip, frame, sib or None (another form)."""
    m = SPEC_RE.match(spec)
    if not m:
        return None
    for form, rx in SPEC_FORMS.items():
        if rx.match(m.group("op")):
            return form
    return None


# --------------------------------------------------------------------------
# uscope flow, for tests/e2e/test_flow.py

FLOW_HEADER = ["TID", "TIME(us)", "DURATION", "FUNCTION"]
# "%-6d %10.3f %10s  " + 2*depth spaces + "-> FUNC" | "<- FUNC"
FLOW_LINE_RE = re.compile(r"^(?P<tid>\d+) +(?P<time>-?\d+\.\d{3}) (?P<dur>.{10})  "
                          r"(?P<indent> *)(?P<dir>->|<-) (?P<func>\S.*)$")
DURATION_RE = re.compile(r"^(\d+\.\d{3}) (us|ms|s)$")
_UNIT_NS = {"us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_duration(text: str) -> Optional[int]:
    """"2.589 us" -> 2589 (ns, rounded), "" -> None; ValueError otherwise."""
    text = text.strip()
    if not text:
        return None
    m = DURATION_RE.match(text)
    if not m:
        raise ValueError(f"bad duration {text!r}")
    return round(float(m.group(1)) * _UNIT_NS[m.group(2)])


@dataclass
class FlowLine:
    tid: int
    time_us: float
    dir: str                      # "->" entry, "<-" return, "event" (JSON only)
    function: str
    depth: int
    duration_ns: Optional[int]
    duration_text: str = ""       # text: as printed (stripped)
    pid: Optional[int] = None     # JSON only
    comm: Optional[str] = None    # JSON only
    args: dict = field(default_factory=dict)   # JSON only
    line: str = ""


def parse_flow_line(line: str) -> Optional[FlowLine]:
    m = FLOW_LINE_RE.match(line)
    if not m:
        return None
    indent = len(m.group("indent"))
    if indent % 2:
        return None
    dur = m.group("dur")
    if dur.strip() and dur != dur.strip().rjust(10):
        return None
    try:
        ns = parse_duration(dur)
    except ValueError:
        return None
    return FlowLine(tid=int(m.group("tid")), time_us=float(m.group("time")),
                    dir=m.group("dir"), function=m.group("func"), depth=indent // 2,
                    duration_ns=ns, duration_text=dur.strip(), line=line)


_FLOW_DIR = {"entry": "->", "return": "<-", "event": "event"}


def flow_json_line(o: dict) -> FlowLine:
    return FlowLine(tid=o.get("tid"), time_us=(o.get("time_ns") or 0) / 1000,
                    dir=_FLOW_DIR.get(o.get("type"), str(o.get("type"))),
                    function=o.get("function"), depth=o.get("depth"),
                    duration_ns=o.get("duration_ns"), pid=o.get("pid"), comm=o.get("comm"),
                    args=o.get("args") or {}, line=json.dumps(o))


@dataclass
class FlowResult:
    argv: list
    rc: int
    stdout: str
    stderr: str
    output: str           # the flow output (the -o file, or stdout)
    json: bool = False
    header: Optional[str] = None                  # text: the first non-empty line
    lines: list = field(default_factory=list)     # FlowLine
    objects: list = field(default_factory=list)   # JSON: the raw objects
    other: list = field(default_factory=list)     # text lines that are neither

    def __post_init__(self):
        if self.json:
            self.objects = parse_json_objects(self.output, "flow")
            self.lines = [flow_json_line(o) for o in self.objects]
            return
        for line in self.output.splitlines():
            if not line.strip():
                continue
            if self.header is None and not self.lines and not self.other:
                self.header = line
                continue
            fl = parse_flow_line(line)
            if fl is None:
                self.other.append(line)
            else:
                self.lines.append(fl)

    def describe(self) -> str:
        return (f"argv: {self.argv}\nrc: {self.rc}\nstderr:\n{self.stderr[-3000:]}\n"
                f"output (first lines):\n" + "\n".join(self.output.splitlines()[:40]))

    def check(self, rc: int = 0):
        """rc, the header (text), every line a flow line."""
        assert self.rc == rc, f"uscope flow exited {self.rc}, expected {rc}\n{self.describe()}"
        if not self.json:
            assert self.header is not None and self.header.split() == FLOW_HEADER, \
                f"header {self.header!r}, expected the columns {FLOW_HEADER}\n{self.describe()}"
            assert not self.other, f"lines that are not flow lines: {self.other[:5]}\n" \
                f"{self.describe()}"
        return self

    def tids(self) -> list:
        return sorted({fl.tid for fl in self.lines})

    def of_tid(self, tid) -> list:
        return [fl for fl in self.lines if fl.tid == tid]

    def seq(self, tid=None) -> list:
        """[(dir, function, depth)], of one thread or of all."""
        return [(fl.dir, fl.function, fl.depth) for fl in self.lines
                if tid is None or fl.tid == tid]


def flow_argv(probes, cmd=None, pid=None, json=False, duration=None, out=None, quiet=False,
              extra=()):
    return trace_argv(probes, cmd, pid, json, duration, out,
                      (["-q"] if quiet else []) + list(extra), command="flow")


def flow(*probes, cmd=None, pid=None, json=False, duration=None, quiet=False, extra=(),
         use_file=True, timeout=TIMEOUT) -> FlowResult:
    """uscope flow ... to completion; the output goes to an -o file unless
    use_file=False."""
    with tempfile.TemporaryDirectory(prefix="uscope-e2e-") as d:
        outf = Path(d) / "flow.out" if use_file else None
        cp = run_uscope(flow_argv(probes, cmd, pid, json, duration, outf, quiet, extra),
                        timeout=timeout)
        output = cp.stdout
        if outf is not None:
            output = outf.read_text(errors="surrogateescape") if outf.exists() else ""
        return FlowResult(cp.args, cp.returncode, cp.stdout, cp.stderr, output, json=json)


class FlowBackground(Background):
    """uscope flow running in the background (see Background)."""

    def result(self, output_file=None, timeout=TIMEOUT) -> FlowResult:
        rc = self.wait(timeout)
        self._stdout.close()
        stdout = self.stdout_path.read_text(errors="surrogateescape")
        output = stdout
        if output_file is not None:
            output = Path(output_file).read_text(errors="surrogateescape") \
                if Path(output_file).exists() else ""
        self.dir.cleanup()
        return FlowResult(self.argv, rc, stdout, self.stderr, output, json=self.json)


def flow_bg(*probes, pid=None, json=False, duration=None, out=None, extra=()) -> FlowBackground:
    return FlowBackground(flow_argv(probes, None, pid, json, duration, out, False, extra),
                          json=json)


def code_differences(pid, path):
    """For each executable mapping of path in process pid: (its start, the
    offsets in it where its bytes differ from the file's, its bytes)."""
    path = str(path)
    with open(f"/proc/{pid}/maps") as m, open(f"/proc/{pid}/mem", "rb") as mem, \
            open(path, "rb") as f:
        for line in m:
            parts = line.split()
            if len(parts) < 6 or "x" not in parts[1] or parts[5] != path:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            f.seek(int(parts[2], 16))
            want = f.read(hi - lo)
            mem.seek(lo)
            got = mem.read(len(want))
            yield lo, ([] if got == want else
                       [i for i in range(len(want)) if got[i] != want[i]]), got


def code_is_the_file(pid, path):
    """True when every executable mapping of path in process pid holds the
    file's bytes (no patch left), else what differs (a string)."""
    seen = False
    for lo, diff, _ in code_differences(pid, path):
        seen = True
        if diff:
            return f"process {pid}: {len(diff)} bytes differ, the first at {lo + diff[0]:#x}"
    return True if seen else f"process {pid}: no executable mapping of {path}"


def wait_true(what, cond, timeout):
    """cond() is True within timeout seconds, or fail saying what (with
    cond's last value, when it says why)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v is True:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} (after {timeout}s): {v}")
        time.sleep(0.02)


def interrupt(p, timeout=TIMEOUT):
    """Ctrl-C a peer tool p (bpftrace) until it exits: communicate()'s
    (stdout, stderr). bpftrace 0.17 looks at the flag its SIGINT handler
    sets only when epoll_wait returns EINTR (poll_perf_events): a SIGINT
    that lands while it reads events or checks its -p process is noted and
    never acted on, and it runs on. So the signal is sent again every half
    second, within timeout (retrying communicate() loses no output)."""
    deadline = time.monotonic() + timeout
    while True:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        try:
            return p.communicate(timeout=0.5)
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
