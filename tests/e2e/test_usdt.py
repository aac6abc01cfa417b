"""USDT probes (.note.stapsdt): `uscope list --usdt`, `%PROVIDER:NAME`
locations, $argN decoded from the argument specs, semaphores, Python's and
libstdc++'s probes, SIB arguments refused, unknown probes, malformed notes.

The `usdt` target (tests/targets/usdt.c, gcc 12.2 at -O2) has these specs
(readelf -n tests/targets/bin/usdt):
    app:inl          -4@%edi                       3 sites (inlined)
    app:stack        -8@-8(%rbp)                   frame slot
    app:sib          -4@%edi -8@(%rax,%rsi,8)      arg2 SIB (base + index*8)
    app:sizes        -2@%dx 1@%cl -4@%eax 8@%rdi   sizes and signs
    app:msg          8@%rdi                        char *
    app:global       -4@counter(%rip)              global read in place
    app:tick         -4@%ebx -8@%rax
    app:konst        -4@$5                         constant
    app:noargs       (none)
    prov:sema_event  -4@%edi                       semaphore prov_sema_event_semaphore
A test about one operand form checks that the built binary has it (parsed
from readelf -n) and is skipped, saying so, when the compiler produced
another form."""

import os
import re
import signal
import subprocess

import pytest

import uscope_e2e as u
from uscope_e2e import Target, assert_multiset, target, trace, trace_bg

USDT = target("usdt")
THROWER = target("thrower")
PYTHON = "/usr/bin/python3.11"
N = 5
MSGS = ["hello", "with space", "third message"]
PROBES = {"app:inl", "app:stack", "app:sib", "app:sizes", "app:msg", "app:global",
          "app:tick", "app:konst", "app:noargs", "prov:sema_event"}


@pytest.fixture(scope="module")
def notes(targets_built):
    return u.usdt_notes(USDT)


def sites(notes, label):
    return [s for s in notes if s.label == label]


def require_form(notes, label, argn, form):
    """Skip unless the (first) site of label has arg argn (1-based) in this form."""
    ss = sites(notes, label)
    assert ss, f"{label} is not in {USDT} (readelf -n)"
    spec = ss[0].args[argn - 1] if len(ss[0].args) >= argn else None
    if spec is None or u.spec_form(spec) != form:
        pytest.skip(f"the compiler gave {label} arg{argn} the spec {spec!r}, "
                    f"not the {form} form this test is about")
    return spec


def single_error(r, rc=1, ran="usdt done"):
    lines = u.error_lines(r.stderr)
    assert r.returncode == rc, f"exit {r.returncode}, expected {rc}; stderr:\n{r.stderr}"
    assert len(lines) == 1, f"expected one line on stderr:\n{r.stderr}"
    assert lines[0].startswith("uscope: "), lines[0]
    assert ran not in r.stdout, "the command ran despite the error"
    return lines[0]


def no_sanitizer_report(r):
    for bad in ("Sanitizer", "runtime error:", "Segmentation", "core dumped"):
        assert bad not in r.stderr, f"{bad!r} on stderr:\n{r.stderr}"
    assert r.returncode > 0, f"exit {r.returncode}; stderr:\n{r.stderr}"


def utrace(*probes, **kw):
    return trace(*probes, labels=True, **kw)


# --------------------------------------------------------------------------
# The notes as built

def test_notes_as_built(notes):
    assert {s.label for s in notes} == PROBES
    assert len(sites(notes, "app:inl")) == 3, "always_inline probe: 3 sites"
    assert len({s.location for s in sites(notes, "app:inl")}) == 3
    assert all(len(sites(notes, l)) == 1 for l in PROBES - {"app:inl"})
    sema = sites(notes, "prov:sema_event")[0]
    assert sema.semaphore == u.nm_addr(USDT, "prov_sema_event_semaphore")
    assert all(s.semaphore == 0 for s in notes if s.provider == "app")
    assert sites(notes, "app:noargs")[0].args == []
    assert [len(s.args) for s in sites(notes, "app:sizes")] == [4]
    assert [a.split("@")[0] for a in sites(notes, "app:sizes")[0].args] == ["-2", "1", "-4", "8"]


def assert_semaphore_down():
    """A run of usdt now: its semaphore is 0, PROV_SEMA_EVENT_ENABLED() never true."""
    r = subprocess.run([USDT, "3"], capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout) == (0, "usdt done n=3 enabled=0\n")


def test_untraced_semaphore_is_zero():
    assert_semaphore_down()


# --------------------------------------------------------------------------
# uscope list --usdt

def test_list_usdt():
    r = u.run_uscope(["list", "--usdt", USDT])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(set(lines)), f"a probe listed twice (one line per probe):\n{r.stdout}"
    assert set(lines) == {f"{USDT} %{l}" for l in PROBES}, r.stdout


@pytest.mark.parametrize("pattern,labels", [
    ("app:t*", ["app:tick"]),
    ("*:sema_*", ["prov:sema_event"]),
    ("prov:*", ["prov:sema_event"]),
    ("app:[gk]*", ["app:global", "app:konst"]),
    ("a?p:s*", ["app:sib", "app:sizes", "app:stack"]),
])
def test_list_usdt_pattern(pattern, labels):
    r = u.run_uscope(["list", "--usdt", USDT, pattern])
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"{USDT} %{l}" for l in labels], r.stdout


SITE_RE = re.compile(r"^  site (0x[0-9a-f]+) semaphore (0x[0-9a-f]+) args: (.+)$")


def _verbose_pairs(out):
    lines = out.splitlines()
    assert len(lines) % 2 == 0, f"-v: expected pairs of lines:\n{out}"
    pairs = []
    for k in range(0, len(lines), 2):
        head, site = lines[k], lines[k + 1]
        m = SITE_RE.match(site)
        assert m, f"not a site line: {site!r}\n{out}"
        assert head.startswith(f"{USDT} %"), head
        pairs.append((head.split(" %", 1)[1], int(m.group(1), 16), int(m.group(2), 16),
                      m.group(3)))
    return pairs


def test_list_usdt_verbose(notes):
    r = u.run_uscope(["list", "--usdt", "-v", USDT])
    assert r.returncode == 0, r.stderr
    exp = [(s.label, s.location, s.semaphore, " ".join(s.args) or "(none)") for s in notes]
    assert_multiset(_verbose_pairs(r.stdout), exp, "(probe, site, semaphore, args)")
    r = u.run_uscope(["list", "--usdt", "-v", USDT, "app:inl"])
    assert r.returncode == 0, r.stderr
    pairs = _verbose_pairs(r.stdout)
    assert len(pairs) == 3 and {p[0] for p in pairs} == {"app:inl"}, r.stdout
    r = u.run_uscope(["list", "--usdt", "-v", USDT, "app:noargs"])
    assert [p[3] for p in _verbose_pairs(r.stdout)] == ["(none)"], r.stdout


def _mapped(pid, base):
    """The path of the file mapped in pid whose name starts with base."""
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and os.path.basename(f[5]).startswith(base):
            return f[5]
    raise AssertionError(f"no {base}* mapped in {pid}")


def test_list_usdt_pid():
    t = Target([USDT, 1, "wait"])
    t.expect("ready")
    r = u.run_uscope(["list", "--usdt", "-p", t.pid])
    assert r.returncode == 0, r.stderr
    lines = set(r.stdout.splitlines())
    assert {f"{USDT} %{l}" for l in PROBES} <= lines, r.stdout
    r = u.run_uscope(["list", "--usdt", "-p", t.pid, "prov:*"])
    assert r.stdout.splitlines() == [f"{USDT} %prov:sema_event"], r.stdout
    t.close_stdin()
    assert t.wait() == 0

    # a library's probes: libstdc++ in the C++ target (which has none of its own)
    t = Target([THROWER, 1, "wait"])
    t.expect("ready")
    lib = _mapped(t.pid, "libstdc++")
    r = u.run_uscope(["list", "--usdt", "-p", t.pid])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    ok = {f"{lib} %libstdcxx:throw", f"{os.path.realpath(lib)} %libstdcxx:throw"}
    assert ok & set(lines), f"none of {ok} in:\n{r.stdout}"
    assert not [l for l in lines if l.startswith(THROWER + " ")], "thrower has no probes"
    r = u.run_uscope(["list", "--usdt", "-p", t.pid, "libstdcxx:th*"])
    assert len(r.stdout.splitlines()) == 1 and set(r.stdout.splitlines()) <= ok, r.stdout
    t.close_stdin()
    assert t.wait() == 0


# --------------------------------------------------------------------------
# Tracing: the arguments decoded from their specs

# label -> (operand form of arg1 the probe depends on, or None; expected args for i)
ALL_ARGS = {
    "app:tick": (None, lambda i: {"arg1": i, "arg2": 10 * i}),
    "app:konst": ("constant", lambda i: {"arg1": 5}),
    "app:global": ("rip", lambda i: {"arg1": i + 1}),
    "app:stack": ("frame", lambda i: {"arg1": 1000 * i + 7}),
    "app:sizes": (None, lambda i: {"arg1": -(i + 1), "arg2": 250 + i, "arg3": -1000 * (i + 1),
                                   "arg4": 0xFFFFFFFF00000000 + i}),
}


@pytest.mark.parametrize("label", list(ALL_ARGS))
def test_no_fetchargs_carries_all_arguments(label, notes):
    form, exp = ALL_ARGS[label]
    if form:
        require_form(notes, label, 1, form)
    r = utrace(f"%{label}", cmd=[USDT, N]).check(rc=0)
    assert r.stdout == f"usdt done n={N} enabled=0\n"
    assert r.counts() == {label: N}, r.describe()
    assert r.summary.per_event == {label: (N, 0)}
    assert_multiset([tuple(sorted(e.args.items())) for e in r.events],
                    [tuple(sorted(exp(i).items())) for i in range(N)], f"{label} args")
    for e in r.events:
        assert e.comm == "usdt" and e.type == "p", e.line
        assert re.match(rf"^usdt-\d+ \[\d{{3}}\] \d+\.\d{{6}}: {label}: \(0x[0-9a-f]+\)( |$)",
                        e.line), e.line
    if label == "app:sizes":
        for e in r.events:
            assert re.fullmatch(r"\d+", e.raw["arg4"]), f"8@ is u64 in decimal: {e.line}"
            assert re.fullmatch(r"-\d+", e.raw["arg1"]), f"-2@ is s16: {e.line}"


def test_no_arguments_probe():
    r = utrace("%app:noargs", cmd=[USDT, N]).check(rc=0)
    assert r.counts() == {"app:noargs": 1}
    assert r.events[0].args == {}, r.events[0].line


def test_bare_argn_keeps_spec_size_and_sign():
    r = utrace("%app:sizes s=$arg1 c=$arg2 n=$arg3 u=$arg4",
               "%app:tick $arg1 $arg2", cmd=[USDT, N]).check(rc=0)
    assert r.counts() == {"app:sizes": N, "app:tick": N}
    assert_multiset([(e.args["s"], e.args["c"], e.args["n"], e.args["u"])
                     for e in r.named("app:sizes")],
                    [(-(i + 1), 250 + i, -1000 * (i + 1), 2**64 - 2**32 + i) for i in range(N)])
    for e in r.named("app:sizes"):
        assert re.fullmatch(r"-\d+", e.raw["s"]) and re.fullmatch(r"-\d+", e.raw["n"]), e.line
        assert re.fullmatch(r"\d+", e.raw["c"]) and re.fullmatch(r"\d+", e.raw["u"]), e.line
    ticks = r.named("app:tick")
    assert all(set(e.args) == {"arg1", "arg2"} for e in ticks), ticks[0].line
    assert_multiset([(e.args["arg1"], e.args["arg2"]) for e in ticks],
                    [(i, 10 * i) for i in range(N)])


def test_explicit_types_override_the_spec():
    r = utrace("%app:sizes x=$arg1:x16 u=$arg3:u32 b=$arg4:u8 w=$arg2:s8",
               cmd=[USDT, N]).check(rc=0)
    assert_multiset([(e.args["x"], e.args["u"], e.args["b"], e.args["w"]) for e in r.events],
                    [(hex(-(i + 1) & 0xFFFF), -1000 * (i + 1) & 0xFFFFFFFF, i, 250 + i - 256)
                     for i in range(N)])


def test_strings_and_dereferences():
    r = utrace("%app:msg s=$arg1:string c=+0($arg1):u8 t=+4($arg1):string p=$arg1",
               cmd=[USDT, N]).check(rc=0)
    assert r.counts() == {"app:msg": N}
    strs = [MSGS[i % 3] for i in range(N)]
    assert_multiset([(e.args["s"], e.args["c"], e.args["t"]) for e in r.events],
                    [(s, ord(s[0]), s[4:]) for s in strs])
    by_ptr = {}
    for e in r.events:
        assert isinstance(e.args["p"], int) and e.args["p"] > 0, f"8@ is u64 in decimal: {e.line}"
        by_ptr.setdefault(e.args["p"], set()).add(e.args["s"])
    assert len(by_ptr) == 3 and all(len(v) == 1 for v in by_ptr.values()), by_ptr


def test_inlined_probe_every_site(notes):
    r = utrace("%app:inl x=$arg1", cmd=[USDT, N]).check(rc=0)
    assert r.counts() == {"app:inl": 3 * N}
    assert r.summary.per_event == {"app:inl": (3 * N, 0)}, "one summary line per label"
    assert_multiset([e.args["x"] for e in r.events],
                    [base + i for base in (100, 200, 300) for i in range(N)])
    ips = {e.ip for e in r.events}
    assert len(ips) == 3, [hex(i) for i in ips]
    locs = sorted(s.location for s in sites(notes, "app:inl"))
    bias = {ip - loc for ip, loc in zip(sorted(ips), locs)}
    assert len(bias) == 1 and next(iter(bias)) % 4096 == 0, \
        f"sites {[hex(i) for i in sorted(ips)]} are not the notes' {[hex(l) for l in locs]}"
    per_site = {}
    for e in r.events:
        per_site.setdefault(e.ip, set()).add(e.args["x"] // 100)
    assert sorted(per_site.values(), key=min) == [{1}, {2}, {3}]


def test_event_name_and_module():
    r = utrace(f"p:myev {USDT}:%app:tick a=$arg1", "%app:konst", cmd=[USDT, N]).check(rc=0)
    assert r.counts() == {"myev": N, "app:konst": N}
    assert_multiset([e.args["a"] for e in r.named("myev")], range(N))
    assert set(r.summary.per_event) == {"myev", "app:konst"}


def test_name_glob():
    r = utrace("%app:[gk]*", "%app:noarg?", cmd=[USDT, N]).check(rc=0)
    assert r.counts() == {"app:global": N, "app:konst": N, "app:noargs": 1}
    assert set(r.summary.per_event) == {"app:global", "app:konst", "app:noargs"}


@pytest.mark.parametrize("probe", ["%*:noargs", "%ap?:noargs", "%[a]pp:noa*"])
def test_provider_glob(probe):
    r = utrace(probe, cmd=[USDT, N]).check(rc=0)
    assert r.counts() == {"app:noargs": 1}


def test_json_usdt_event():
    r = utrace("%app:tick", cmd=[USDT, 2], json=True).check(rc=0)
    assert [o["event"] for o in r.objects] == ["app:tick", "app:tick"]
    assert_multiset([(o["args"]["arg1"], o["args"]["arg2"]) for o in r.objects],
                    [(0, 0), (1, 10)])
    assert all(type(o["args"]["arg2"]) is int for o in r.objects)


# --------------------------------------------------------------------------
# SIB arguments: the kernel's fetch args cannot add two registers

@pytest.mark.parametrize("probe", ["%app:sib", "%app:sib v=$arg2", "%app:sib $arg2:s64",
                                   "%app:si?"])
def test_sib_argument_refused(probe, notes):
    require_form(notes, "app:sib", 2, "sib")
    r = u.run_uscope(["trace", "-e", "tracefs", probe, "--", USDT, N])
    msg = single_error(r)
    assert "register" in msg.lower(), f"the error should say why (two registers): {msg}"


def test_sib_probe_other_argument_works(notes):
    require_form(notes, "app:sib", 2, "sib")
    r = trace("%app:sib i=$arg1", cmd=[USDT, N], extra=["-e", "tracefs"],
              labels=True).check(rc=0)
    assert r.counts() == {"app:sib": N}
    assert_multiset([e.args["i"] for e in r.events], range(N))


# --------------------------------------------------------------------------
# Semaphores

def test_semaphore_command():
    r = utrace("%prov:sema_event", cmd=[USDT, N]).check(rc=0)
    assert r.stdout == f"usdt done n={N} enabled={N}\n", "the semaphore was not raised"
    assert r.counts() == {"prov:sema_event": N}
    assert_multiset([e.args["arg1"] for e in r.events], range(N))
    assert_semaphore_down()


def test_semaphore_process_started_before():
    n = 3
    t = Target([USDT, n, "wait"])
    t.expect("ready")
    t.write("\n")
    t.expect("round 1 enabled=0")
    bg = trace_bg("%prov:sema_event i=$arg1", pid=t.pid, labels=True)
    bg.wait_ready()
    t.write("\n")
    t.expect(f"round 2 enabled={n}")    # raised in the running process
    bg.signal(signal.SIGINT)
    res = bg.result().check(rc=0)
    assert res.counts() == {"prov:sema_event": n}
    assert_multiset([e.args["i"] for e in res.events], range(n))
    assert all(e.tid == t.pid for e in res.events)
    t.write("\n")
    t.expect(f"round 3 enabled={n}")    # back to 0 once uscope has gone
    t.close_stdin()
    t.expect(f"usdt done n={n} enabled={n}")
    assert t.wait() == 0


def test_semaphore_process_started_after():
    bg = trace_bg(f"{USDT}:%prov:sema_event i=$arg1", duration=3, json=True, labels=True)
    bg.wait_ready()
    t = Target([USDT, 4], stdin=False)
    t.expect("usdt done n=4 enabled=4")
    assert t.wait() == 0
    res = bg.result().check(rc=0)
    mine = [e for e in res.events if e.pid == t.pid]
    assert [e.event for e in mine] == ["prov:sema_event"] * 4
    assert_multiset([e.args["i"] for e in mine], range(4))
    assert_semaphore_down()


# --------------------------------------------------------------------------
# Python 3.11 and libstdc++ (Debian's builds have USDT notes)

def _need(path, label):
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    if label not in {s.label for s in u.usdt_notes(path)}:
        pytest.skip(f"{path} has no USDT probe {label}")


def test_python_gc_start():
    _need(PYTHON, "python:gc__start")
    r = utrace("%python:gc__start",
               cmd=[PYTHON, "-c", "import gc; gc.collect(); gc.collect(1)"]).check(rc=0)
    gens = [e.args["arg1"] for e in r.events]
    assert set(r.counts()) == {"python:gc__start"}, r.describe()
    assert all(set(e.args) == {"arg1"} for e in r.events)
    k = gens.index(2) if 2 in gens else -1
    assert k >= 0 and 1 in gens[k + 1:], \
        f"expected gc.collect() (2) then gc.collect(1) (1) among the generations {gens}"


def test_python_import_module_names():
    _need(PYTHON, "python:import__find__load__start")
    r = utrace("%python:import__find__load__start name=$arg1:string",
               cmd=[PYTHON, "-c", "import json"]).check(rc=0)
    names = [e.args["name"] for e in r.events]
    assert "json" in names and "json.decoder" in names, names


LIBSTDCXX_THROW = "libstdc++:%libstdcxx:throw type=+0(+8($arg2)):string"


def test_libstdcxx_throw_type_names():
    _need("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "libstdcxx:throw")
    r = utrace(LIBSTDCXX_THROW, cmd=[THROWER, 3]).check(rc=0)
    assert r.stdout == "thrower done n=3 caught=4\n"
    assert r.counts() == {"libstdcxx:throw": 4}
    assert_multiset([e.args["type"] for e in r.events], ["St13runtime_error"] * 3 + ["5MyErr"])


def test_libstdcxx_throw_attached():
    _need("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "libstdcxx:throw")
    t = Target([THROWER, 2, "wait"])
    t.expect("ready")
    bg = trace_bg(LIBSTDCXX_THROW, pid=t.pid, labels=True)
    bg.wait_ready()
    t.write("\n")
    t.expect("round 1 caught=3")
    t.close_stdin()
    t.expect("thrower done n=2 caught=3")
    assert t.wait() == 0
    res = bg.result().check(rc=0)
    assert [e.args["type"] for e in res.events] == ["St13runtime_error"] * 2 + ["5MyErr"]


# --------------------------------------------------------------------------
# Errors

@pytest.mark.parametrize("probe", ["%app:nosuch", "%nope:tick", "%app:tick2 $arg1"])
def test_unknown_probe_names_existing(probe):
    r = u.run_uscope(["trace", probe, "--", USDT, 1])
    msg = single_error(r)
    assert "app:tick" in msg or "tick" in msg, f"the existing probes are not named: {msg}"


@pytest.mark.parametrize("binary", ["usdt-badnote1", "usdt-badnote2"])
def test_malformed_note_list(binary):
    r = u.run_uscope(["list", "--usdt", target(binary)])
    no_sanitizer_report(r)
    lines = u.error_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith("uscope: "), r.stderr


@pytest.mark.parametrize("binary", ["usdt-badnote1", "usdt-badnote2"])
def test_malformed_note_trace(binary):
    r = u.run_uscope(["trace", "%app:tick", "--", target(binary), 1])
    no_sanitizer_report(r)
    lines = u.error_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith("uscope: "), r.stderr
    assert "usdt done" not in r.stdout, "the command ran despite the error"
