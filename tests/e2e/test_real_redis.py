"""Debian's redis-server, traced with -p as a user would, compared with its
own counters: INFO commandstats and total_commands_processed (every
command goes through processCommand and call once), INFO keyspace (every
new key through dbAdd), and the commands the tests send themselves (each
argument of a command is one createStringObject(ptr, len) when redis parses
it). The commands come from redis-cli, redis-benchmark, or a connection the
test speaks RESP on, so that it knows every byte; all on 127.0.0.1, bounded.

The stack reference is gdb attached to the same server (gdb_frames.py), and
bpftrace, on the same hits at the same time, for the histograms."""

import collections
import re
import signal
import subprocess

import pytest

import real_programs as rp
import uscope_e2e as u
from real_programs import ENGINES, attach

rp.need(rp.REDIS, "redis-cli", "redis-benchmark")

STACK_ENGINES = ["inject", "bpf"]     # $ustack (tests/e2e/test_stacks.py)
KERNEL_ENGINES = ["bpf", "tracefs"]   # kernel uprobes: bpftrace's side by side
# tracefs's kernel uprobes cost 11-14 us a hit here, and their events go
# through the trace buffer: each command runs on tracefs on one program
# only, to keep the suite short (count, hist, latency, trace and objtrace
# here; flow on nginx; record on sqlite3; USDT on python3.11).
FAST_ENGINES = ["inject", "bpf"]


@pytest.fixture
def redis(tmp_path):
    r = rp.Redis(tmp_path)
    yield r
    r.stop()


def stats_after(redis):
    """(INFO commandstats as {command: calls}, total_commands_processed),
    read in one INFO: the INFO itself is in neither."""
    info = redis.cli("info", "stats", "commandstats")
    calls = {m.group(1): int(m.group(2))
             for m in re.finditer(r"^cmdstat_(\S+):calls=(\d+),", info, re.M)}
    total = int(re.search(r"^total_commands_processed:(\d+)", info, re.M).group(1))
    return calls, total


# The commands of the tests that count arguments: 7 SETs of new keys with
# values of 7 to 49 bytes, then 7 GETs of them.
SETS = [("SET", f"key{i}", "v" * (7 * i)) for i in range(1, 8)]
GETS = [("GET", f"key{i}") for i in range(1, 8)]


def arg_lengths(commands):
    return [len(a) for c in commands for a in c]


def log2_buckets(values):
    """{(min, max): count} as bpftrace's hist() and uscope's log2 buckets."""
    out = collections.Counter()
    for v in values:
        lo = 0 if v == 0 else 1 << (v.bit_length() - 1)
        out[(lo, 2 * lo - 1 if lo else 0)] += 1
    return dict(out)


# --------------------------------------------------------------------------
# count

@pytest.mark.parametrize("engine", ENGINES)
def test_count_equals_commandstats(redis, engine):
    s = attach("count", redis.pid, "processCommand", "call", engine=engine)
    redis.reset_stats()
    redis.benchmark("-n", 150, "-c", 2, "-t", "set,get")
    s.stop().ok()
    calls, total = stats_after(redis)
    assert (calls["set"], calls["get"], calls["config|resetstat"]) == (150, 150, 1), calls
    assert rp.count_table(s.stdout) == {"processCommand": total, "call": total}, s.describe()
    assert total == sum(calls.values())


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_count_keyed_by_argument_length(redis, engine):
    s = attach("count", redis.pid, "--json", "createStringObject len=$arg2:u64", engine=engine)
    replies = redis.send(SETS + GETS)
    s.stop().ok()
    assert replies == ["+OK"] * 7 + ["v" * (7 * i) for i in range(1, 8)]
    got = {r["key"]["len"]: r["count"] for r in rp.agg_rows(s.stdout)}
    assert got == dict(collections.Counter(arg_lengths(SETS + GETS))), s.describe()
    assert redis.info("keyspace")["db0"].startswith("keys=7,")


# --------------------------------------------------------------------------
# hist

@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_hist_of_argument_lengths(redis, engine):
    s = attach("hist", redis.pid, "--json", "createStringObject len=$arg2:u64", engine=engine)
    redis.send(SETS + GETS)
    s.stop().ok()
    (r,) = rp.agg_rows(s.stdout)
    lens = arg_lengths(SETS + GETS)
    assert (r["count"], r["sum"], r["min"], r["max"]) == (len(lens), sum(lens), 3, 49)
    assert {(b["min"], b["max"]): b["count"] for b in r["buckets"]} == log2_buckets(lens)
    rp.agg_consistent(r)


def bpftrace_hist(text, name):
    """bpftrace's printed hist() @name -> {(min, max): count}."""
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

    def num(t):
        m = re.fullmatch(r"(\d+)([KMG]?)", t.strip())
        return int(m.group(1)) * mult[m.group(2)]
    out, on = {}, False
    for line in text.splitlines():
        if line.startswith("@"):
            on = line.startswith(f"@{name}:")
            continue
        m = re.match(r"^\[([^,\]]+)(?:, ([^)]+)\))?\]?\s+(\d+) \|", line)
        if on and m:
            lo = num(m.group(1))
            hi = num(m.group(2)) - 1 if m.group(2) else lo
            out[(lo, hi)] = int(m.group(3))
    return out


@pytest.mark.skipif(not rp.shutil.which("bpftrace"), reason="bpftrace is not installed")
@pytest.mark.parametrize("engine", KERNEL_ENGINES)
def test_hist_and_count_equal_bpftraces(redis, engine):
    """uscope and bpftrace on the same hits: the same buckets, the same
    count, and that count redis's own."""
    s = attach("hist", redis.pid, "--json", "createStringObject len=$arg2:u64", engine=engine)
    prog = (f"BEGIN {{ printf(\"ready\\n\"); }} "
            f"uprobe:{rp.REDIS}:createStringObject {{ @len = hist(arg1); }} "
            f"uprobe:{rp.REDIS}:processCommand {{ @cmds = count(); }}")
    bt = subprocess.Popen(["bpftrace", "-p", str(redis.pid), "-e", prog], text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    u.REGISTRY.targets.append(bt)
    out = []
    for line in bt.stdout:    # BEGIN runs once every probe is attached
        out.append(line)
        if line.strip() == "ready":
            break
    redis.reset_stats()
    redis.send(SETS + GETS)
    rest, err = u.interrupt(bt)
    s.stop().ok()
    text = "".join(out) + rest
    calls, total = stats_after(redis)
    (r,) = rp.agg_rows(s.stdout)
    theirs = bpftrace_hist(text, "len")
    ours = {(b["min"], b["max"]): b["count"] for b in r["buckets"]}
    # resetstat's arguments, then the test's
    lens = arg_lengths([("config", "resetstat")] + SETS + GETS)
    assert ours == theirs == log2_buckets(lens), text
    m = re.search(r"^@cmds: (\d+)$", text, re.M)
    assert m and int(m.group(1)) == total == 15, text


# --------------------------------------------------------------------------
# latency

@pytest.mark.parametrize("engine", ENGINES)
def test_latency_counts_every_command(redis, engine):
    s = attach("latency", redis.pid, "--json", "processCommand", engine=engine)
    redis.reset_stats()
    redis.benchmark("-n", 200, "-c", 1, "-t", "ping")
    s.stop().ok()
    calls, total = stats_after(redis)
    assert calls["ping"] == 400, calls     # PING_INLINE and PING_MBULK
    (r,) = rp.agg_rows(s.stdout)
    assert (r["probe"], r["unit"], r["count"]) == ("processCommand", "ns", total), s.describe()
    rp.agg_consistent(r)


def test_latency_of_a_server_uscope_starts(tmp_path):
    """redis-server as uscope's COMMAND: redis-cli clients, then SHUTDOWN,
    whose processCommand never returns (redis exits inside it)."""
    prefix = [u.uscope_path(), "latency", "--json", "-e", "inject", "processCommand", "--"]
    with open(tmp_path / "uscope.out", "w") as out:
        server = rp.Redis(tmp_path, command_prefix=prefix, stdout=out)
        try:
            server.cli("-r", 300, "ping")
            total = redis_cli_int(server.port, "info", "stats", key="total_commands_processed")
            subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(server.port), "shutdown",
                            "nosave"], capture_output=True, timeout=u.TIMEOUT)
            rc = server.p.wait(u.TIMEOUT)
        finally:
            server.stop()
    assert rc == 0, (tmp_path / "stderr").read_text()
    (r,) = rp.agg_rows((tmp_path / "uscope.out").read_text())
    # every command returned but SHUTDOWN; the INFO too, not in its own total
    assert r["count"] == total + 1, r
    rp.agg_consistent(r)


def redis_cli_int(port, *args, key):
    r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port)] + list(args),
                       capture_output=True, text=True, timeout=u.TIMEOUT)
    m = re.search(rf"^{key}:(\d+)", r.stdout, re.M)
    assert m, r.stdout
    return int(m.group(1))


# --------------------------------------------------------------------------
# trace, flow, $ustack

@pytest.mark.parametrize("engine", ENGINES)
def test_trace_keys_and_values_of_new_keys(redis, engine):
    # dbAdd(db, key, val): robj's ptr (an sds) at offset 8
    s = attach("trace", redis.pid, "--json",
               "dbAdd key=+0(+8($arg2)):string val=+0(+8($arg3)):string",
               "r:setKey", engine=engine)
    replies = redis.send(SETS + [("SET", "key1", "again")] + GETS[:1])
    s.stop().ok()
    r = rp.events_of(s, json_out=True)
    # a new key is added, an existing one overwritten (no dbAdd)
    adds = [(e.args["key"], e.args["val"]) for e in r.named("dbAdd")]
    assert adds == [(c[1], c[2]) for c in SETS], s.describe()
    assert len(r.named("setKey__return")) == 8
    assert replies[-1] == "again"
    assert redis.info("keyspace")["db0"].startswith("keys=7,")


@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_flow_of_commands(redis, engine):
    s = attach("flow", redis.pid, "--json", "processCommand", "call", engine=engine)
    redis.reset_stats()
    redis.cli("-r", 4, "ping")
    s.stop().ok()
    fl = rp.flow_of(s)
    calls, total = stats_after(redis)
    assert calls == {"config|resetstat": 1, "ping": 4} and total == 5
    assert fl.seq() == [("->", "processCommand", 0), ("->", "call", 1), ("<-", "call", 1),
                        ("<-", "processCommand", 0)] * total, s.describe()
    rets = [fl.lines[k] for k in range(len(fl.lines)) if fl.lines[k].dir == "<-"]
    for inner, outer in zip(rets[0::2], rets[1::2]):
        assert 0 < inner.duration_ns < outer.duration_ns, (inner, outer)


@pytest.mark.parametrize("engine", STACK_ENGINES)
def test_ustack_is_gdbs_backtrace(redis, engine):
    from test_stacks import compare_with_gdb
    s = attach("trace", redis.pid, "--json", "dbAdd $ustack", engine=engine)
    redis.send([("SET", "first", "1")])
    s.stop().ok()
    (ev,) = rp.events_of(s, json_out=True).named("dbAdd")
    stack = ev.args["ustack"]
    gframes = rp.gdb_frames_attached(redis.pid, "dbAdd",
                                     lambda: redis.send([("SET", "second", "2")]))
    rows = compare_with_gdb(stack, gframes)
    named = [f["sym"] for f in stack if f["sym"]]
    assert named[:8] == ["dbAdd", "setKey", "setGenericCommand", "setCommand", "call",
                         "processCommand", "processInputBuffer", "readQueryFromClient"], rows
    assert "aeMain" in named and "main" in named


@pytest.mark.parametrize("engine", STACK_ENGINES)
def test_zmalloc_stacks_are_gdbs(redis, engine):
    """Who calls zmalloc (redis's allocator: many callers, walked through
    redis-server's .eh_frame): the stacks uscope counts for a SET, walked
    where the probe runs (none copied: -p, the mappings known before the
    first hit); gdb's backtrace at zmalloc for the same command is one of
    them, frame for frame. Both see the same command (the key deleted
    before each: creating it allocates where overwriting does not), and
    gdb stops only under processCommand (serverCron allocates too, at any
    time: uscope's window may not hold such a hit)."""
    from test_stacks import compare_with_gdb, fallbacks
    redis.send([("DEL", "zkey")])
    s = attach("count", redis.pid, "--json", "zmalloc $ustack", engine=engine)
    redis.send([("SET", "zkey", "v" * 40)])
    s.stop().ok()
    assert fallbacks(s.stderr) == {}, s.stderr
    rows = [r for r in rp.agg_rows(s.stdout) if r.get("key", {}).get("ustack")]
    stacks = [r["key"]["ustack"] for r in rows]
    assert stacks and all(st[0]["sym"] == "zmalloc" and st[0]["off"] == 0 for st in stacks)
    assert any("processCommand" in [f["sym"] for f in st] for st in stacks), stacks
    redis.send([("DEL", "zkey")])
    gframes = rp.gdb_frames_attached(redis.pid, "zmalloc",
                                     lambda: redis.send([("SET", "zkey", "v" * 40)]),
                                     caller="processCommand")
    errors = []
    for st in stacks:
        if any(set(f) == {"end"} for f in st):
            continue
        try:
            compare_with_gdb(st, gframes)
            return
        except AssertionError as e:
            errors.append(str(e))
    pytest.fail(f"gdb's stack is none of uscope's {len(stacks)}:\n" + "\n".join(errors[:5]))


# --------------------------------------------------------------------------
# record, then report

@pytest.mark.parametrize("engine", FAST_ENGINES)
def test_record_then_report(redis, engine, tmp_path):
    rec = tmp_path / "redis.usc"
    s = attach("record", redis.pid, "-o", rec, "processCommand", "call", engine=engine)
    redis.reset_stats()
    redis.cli("-r", 20, "ping")
    s.stop().ok()
    calls, total = stats_after(redis)
    assert total == 21
    cp = u.run_uscope(["report", "-r", rec, "--json"])
    assert cp.returncode == 0, cp.stderr
    rows = {o["function"]: o for o in u.parse_json_objects(cp.stdout) if "function" in o}
    assert set(rows) == {"processCommand", "call"}
    pc, call = rows["processCommand"], rows["call"]
    assert (pc["calls"], call["calls"]) == (total, total)
    # call is processCommand's only probed callee: its time is not processCommand's own
    assert call["self_ns"] == call["total_ns"]
    assert pc["self_ns"] == pc["total_ns"] - call["total_ns"]
    assert pc["min_ns"] <= pc["avg_ns"] <= pc["max_ns"]
    probes = {o["probe"]: (o["events"], o["lost"]) for o in u.parse_json_objects(cp.stdout)
              if "probe" in o}
    assert probes == {"processCommand": (total, 0), "call": (total, 0),
                      "processCommand__return": (total, 0), "call__return": (total, 0)}


# --------------------------------------------------------------------------
# objtrace: a client from createClient to freeClient

@pytest.mark.parametrize("engine", ENGINES)
def test_objtrace_follows_each_client(redis, engine):
    redis.reset_stats()     # its client is made before uscope comes: not followed
    s = attach("objtrace", redis.pid, "--from", "r:createClient c=$retval",
               "--until", "freeClient $arg1", "processCommand", engine=engine)
    pings = [2, 3, 4]
    for n in pings:
        redis.cli("-r", n, "ping")
    # redis frees a client when it sees its connection closed: wait for it
    rp.wait_until(lambda: sum(l.endswith(" released") for l in s.stdout_lines()) == len(pings),
                  "the three clients freed", proc=s.bg.p)
    s.stop().ok()
    calls, _ = stats_after(redis)
    assert calls == {"config|resetstat": 1, "ping": sum(pings)}, calls
    seq = []
    for line in s.stdout.splitlines():
        m = re.match(r"^\S+ \[\d+\] \S+ (\w+): \([^)]*\) (?:arg1 )?object:(0x[0-9a-f]+)"
                     r"(?: (followed|released))?$", line)
        assert m, f"not an objtrace line: {line!r}\n{s.describe()}"
        seq.append(m.groups())
    want, at = [], 0
    for n in pings:
        obj = seq[at][1] if at < len(seq) else None
        want += [("createClient__return", obj, "followed")] + \
            [("processCommand", obj, None)] * n + [("freeClient", obj, "released")]
        at += n + 2
    assert seq == want, s.describe()
