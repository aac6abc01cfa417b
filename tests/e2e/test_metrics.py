"""Metrics and profiles for many machines, end to end with the real readers:
a real Prometheus (Debian's package) scrapes `uscope --serve` every second
and its HTTP API is compared with what the target did (tests/targets/aggapp.c)
and with uscope's own report of the same run; `go tool pprof` reads the
profiles of `count --pprof` and `export --format pprof`.

Every wait is on a condition: the target says "ready" once its calls are
done, and a served snapshot counts every hit before the time it says
(uscope_snapshot_timestamp_seconds); the test waits for Prometheus to hold
one taken after "ready", then reads the other series of that same scrape."""

import gzip
import json
import math
import os
import queue
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from uscope_e2e import REGISTRY, check_json_output, error_lines, run_uscope, target, uscope_path

AGG = target("aggapp")
STACKS = target("stacks")
PROMETHEUS = shutil.which("prometheus")
GO = shutil.which("go")
WAIT = 40          # seconds a condition may take on a loaded 2-core machine


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, dict(r.headers), r.read().decode()


class Prometheus:
    """A Prometheus of the test's own: 127.0.0.1, a free port, its storage in
    a temporary directory, scraping one target every second."""

    def __init__(self, target_port):
        self.dir = tempfile.mkdtemp(prefix="uscope-prom-")
        self.port = free_port()
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: uscope\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{target_port}']\n")
        # free_port's port can be taken before Prometheus binds it (any
        # connection's ephemeral port): then another
        for attempt in range(5):
            self.log = open(os.path.join(self.dir, "log"), "w")
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={self.dir}/data",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=self.log, stderr=subprocess.STDOUT)
            REGISTRY.targets.append(self.proc)
            try:
                self.until(lambda: self._ready(), "Prometheus is ready")
                return
            except AssertionError:
                if attempt == 4 or "address already in use" not in self.logtext():
                    raise
                self.proc.wait()
                self.log.close()
                self.port = free_port()

    def _ready(self):
        try:
            return http_get(f"http://127.0.0.1:{self.port}/-/ready")[0] == 200
        except OSError:
            return False

    def until(self, cond, what):
        deadline = time.monotonic() + WAIT
        while True:
            got = cond()
            if got:
                return got
            if self.proc.poll() is not None:
                raise AssertionError(f"Prometheus exited waiting for {what}:\n{self.logtext()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {WAIT}s for {what}")
            time.sleep(0.1)

    def logtext(self):
        self.log.flush()
        with open(os.path.join(self.dir, "log")) as f:
            return f.read()[-3000:]

    def query(self, q, at=None):
        args = {"query": q}
        if at is not None:
            args["time"] = repr(at)
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(args)
        status, _, body = http_get(url)
        out = json.loads(body)
        assert out["status"] == "success", out
        return out["data"]["result"]

    def scrape_after(self, t):
        """The time of the first scrape that holds a snapshot taken after t."""
        res = self.until(lambda: self.query(f"uscope_snapshot_timestamp_seconds > {t!r}"),
                         f"a snapshot taken after {t}")
        return res[0]["value"][0]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Served:
    """uscope with --serve running COMMAND (an aggapp MODE ... hold): its
    stdout read line by line; closing its stdin lets the target end."""

    def __init__(self, args):
        self.args = args
        self.tries = 0
        self._start()

    def _start(self):
        self.port = free_port()
        self.tries += 1
        argv = [str(uscope_path())] + [a if a != "SERVE" else f"127.0.0.1:{self.port}"
                                       for a in self.args]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        REGISTRY.uscopes.append(self.proc)
        self.lines = queue.Queue()
        self.out = []
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()

    @staticmethod
    def _read(proc, lines):
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def wait_ready(self):
        """The time the target said ready. free_port's port is anyone's until
        uscope binds it: taken meanwhile, uscope is run again on another."""
        deadline = time.monotonic() + WAIT
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                err = self.proc.stderr.read()
                self.proc.wait()
                if "the port is in use" in err and self.tries < 5:
                    self._start()
                    continue
                raise AssertionError("uscope ended before the target was ready:\n" + err)
            self.out.append(line)
            if line.strip() == "ready":
                return time.time()

    def finish(self):
        self.proc.stdin.close()
        rc = self.proc.wait(WAIT)
        while True:
            line = self.lines.get(timeout=WAIT)
            if line is None:
                break
            self.out.append(line)
        err = self.proc.stderr.read()
        assert rc == 0, err
        check_json_output(self.proc.args, "".join(self.out))
        return "".join(self.out), err


needs_prometheus = pytest.mark.skipif(not PROMETHEUS, reason="prometheus is not installed "
                                      "(scripts/deps.sh installs it)")


def run_served(args):
    """Start uscope --serve and a Prometheus scraping it; once the target is
    ready, the series of the first scrape after that. -> (prometheus, time
    of that scrape, uscope's stdout, stderr)."""
    sv = Served(args)
    ready = sv.wait_ready()     # (the target holds until finish())
    prom = Prometheus(sv.port)
    try:
        at = prom.scrape_after(ready)
        out, err = sv.finish()
        return prom, at, out, err
    except BaseException:
        prom.close()
        raise


def series(prom, q, at, key=None):
    """{label value (key) or labels: value} of q at time at."""
    res = prom.query(q, at)
    if key is None:
        return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in res}
    return {r["metric"][key]: float(r["value"][1]) for r in res}


@needs_prometheus
def test_prometheus_counts_exact_hits():
    prom, at, out, err = run_served(["count", "--serve", "SERVE", "--label", "env=ci",
                                     "--json", "distinct", "--", AGG, "keys", "37", "hold"])
    try:
        got = prom.query('uscope_probe_hits_total{probe="distinct"}', at)
        assert len(got) == 1, got
        labels, value = got[0]["metric"], float(got[0]["value"][1])
        assert value == 37
        assert labels["env"] == "ci" and labels["comm"] == "aggapp"
        assert labels["binary"] == AGG and labels["job"] == "uscope"
        assert int(labels["pid"]) > 0
        assert series(prom, "uscope_lost_total", at, "probe") == {"distinct": 0}
        # the same run's own report says the same
        rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        assert [(r["probe"], r["count"]) for r in rows] == [("distinct", 37)]
    finally:
        prom.close()


@needs_prometheus
def test_prometheus_counts_by_key():
    # names: "alpha" x3, "beta" x2, "gamma", "gadget", and a 100-byte name
    prom, at, out, err = run_served(["count", "--serve", "SERVE",
                                     "lookup name=$arg1:string n=$arg2:s32", "--", AGG,
                                     "names", "hold"])
    try:
        got = {(r["metric"]["name"], r["metric"]["n"]): float(r["value"][1])
               for r in prom.query("uscope_probe_hits_total", at)}
        assert got == {("alpha", "1"): 3, ("beta", "2"): 2, ("gamma", "3"): 1,
                       ("gadget", "4"): 1, ("x" * 64, "5"): 1}
    finally:
        prom.close()


def le_ns(le):
    return math.inf if le == "+Inf" else round(float(le) * 1e9)


@needs_prometheus
def test_prometheus_latency_buckets_match_each_call():
    # --per-call: a line per call with its exact latency, the truth the
    # buckets, the sum, the count and histogram_quantile are checked with
    prom, at, out, err = run_served(["latency", "--serve", "SERVE", "--per-call", "--json",
                                     "nap", "--", AGG, "sleep", "hold"])
    try:
        calls = [json.loads(l)["latency"] for l in out.splitlines()
                 if l.startswith('{"call":true')]
        assert len(calls) == 6
        # naps of 600, 600, 600, 3000, 3000 and 12000 us: never shorter
        assert sorted(calls)[0] >= 600000 and sorted(calls)[3] >= 3000000
        buckets = series(prom, 'uscope_latency_seconds_bucket{probe="nap"}', at, "le")
        assert buckets["+Inf"] == 6
        for le, n in buckets.items():
            assert n == sum(1 for c in calls if c <= le_ns(le)), (le, n, calls)
        # cumulative, and every call's power of two has its bound
        bounds = sorted(le_ns(le) for le in buckets)
        assert [buckets[k] for k in sorted(buckets, key=le_ns)] == sorted(buckets.values())
        for c in calls:
            assert (2 << (c.bit_length() - 1)) - 1 in bounds, (c, bounds)
        (count,) = series(prom, 'uscope_latency_seconds_count{probe="nap"}', at).values()
        (total,) = series(prom, 'uscope_latency_seconds_sum{probe="nap"}', at).values()
        assert count == 6 and math.isclose(total, sum(calls) / 1e9, rel_tol=1e-9)
        # histogram_quantile: within the bucket that holds the third call
        (q,) = series(prom, 'histogram_quantile(0.5, uscope_latency_seconds_bucket'
                      '{probe="nap"})', at).values()
        third = sorted(calls)[2]
        hi = min(b for b in bounds if b >= third)
        lo = max([b for b in bounds if b < hi], default=0)
        assert lo / 1e9 <= q <= hi / 1e9, (q, lo, hi, calls)
    finally:
        prom.close()


def cumulative(rows, le):
    """How many values uscope's JSON buckets (by power of two) hold at or
    below le."""
    return sum(b["count"] for b in rows if b["max"] <= le)


@needs_prometheus
@pytest.mark.parametrize("engine", ["inject", "bpf"])
def test_prometheus_latency_aggregated_in_place(engine):
    prom, at, out, err = run_served(["latency", "-v", "--serve", "SERVE", "--json", "-e", engine,
                                     "nap", "--", AGG, "sleep", "hold"])
    try:
        assert "aggregated where the probe runs" in err
        (row,) = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        buckets = series(prom, 'uscope_latency_seconds_bucket{probe="nap"}', at, "le")
        got = {le_ns(le): n for le, n in buckets.items() if le != "+Inf"}
        assert got == {le: cumulative(row["buckets"], le) for le in got}
        assert {b["max"] for b in row["buckets"]} <= set(got)
        assert buckets["+Inf"] == row["count"] == 6
        # never early: nothing at or below 524287 ns (the 600 us naps)
        assert all(n == 0 for le, n in got.items() if le < 600000)
        (total,) = series(prom, 'uscope_latency_seconds_sum{probe="nap"}', at).values()
        assert math.isclose(total, row["avg"] * 6 / 1e9, rel_tol=1e-3) and total >= 0.0198
    finally:
        prom.close()


@needs_prometheus
def test_prometheus_hist_buckets():
    # take(n) for n = 1..100
    prom, at, out, err = run_served(["hist", "--serve", "SERVE", "take n=$arg1:u64",
                                     "--", AGG, "sizes", "hold"])
    try:
        buckets = series(prom, 'uscope_value_bucket{probe="take"}', at, "le")
        assert buckets == {"1.0": 1, "3.0": 3, "7.0": 7, "15.0": 15, "31.0": 31, "63.0": 63,
                           "127.0": 100, "+Inf": 100}
        assert series(prom, "uscope_value_sum", at, "probe") == {"take": 5050}
        assert series(prom, "uscope_value_count", at, "probe") == {"take": 100}
        (q,) = series(prom, 'histogram_quantile(0.5, uscope_value_bucket)', at).values()
        assert 31 < q <= 63     # the 50th value, 50, is in (31, 63]
    finally:
        prom.close()


def test_served_formats_and_escaping():
    # the exposition itself, as curl and an OpenMetrics client see it
    sv = Served(["count", "--serve", "SERVE", "--label", 'note=a"b\\c', "lookup name=$arg1:string",
                 "--", AGG, "names", "hold"])
    try:
        sv.wait_ready()
        url = f"http://127.0.0.1:{sv.port}/metrics"

        def snapshot_has_all():
            try:
                status, hdr, body = http_get(url)
            except urllib.error.HTTPError as e:
                assert e.code == 503, e     # no snapshot yet
                return None
            return (status, hdr, body) if 'name="alpha"' in body and "} 3\n" in body else None

        deadline = time.monotonic() + WAIT
        while not (got := snapshot_has_all()):
            assert time.monotonic() < deadline, "no snapshot with the calls"
            time.sleep(0.1)
        status, hdr, text = got
        assert hdr["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "# TYPE uscope_probe_hits_total counter\n" in text
        assert re.search(r'^uscope_probe_hits_total\{probe="lookup",name="alpha",pid="\d+",'
                         r'comm="aggapp",binary="[^"]+",note="a\\"b\\\\c"\} 3$', text, re.M), text
        assert not text.rstrip().endswith("# EOF")
        status, hdr, om = http_get(url, {"Accept": "application/openmetrics-text;"
                                         "version=1.0.0,text/plain;version=0.0.4;q=0.5"})
        assert hdr["Content-Type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
        assert om.endswith("# EOF\n")
        assert "# TYPE uscope_probe_hits counter\n" in om
        assert "# UNIT uscope_snapshot_timestamp_seconds seconds\n" in om
        with pytest.raises(urllib.error.HTTPError) as e:
            http_get(f"http://127.0.0.1:{sv.port}/other")
        assert e.value.code == 404
    finally:
        sv.finish()


def scrape_after(port, t):
    """/metrics once it holds a snapshot taken after t: {series: value}."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            _, _, body = http_get(f"http://127.0.0.1:{port}/metrics")
        except urllib.error.HTTPError as e:
            assert e.code == 503, e     # no snapshot yet
            body = ""
        got = dict(l.rsplit(" ", 1) for l in body.splitlines() if l and not l.startswith("#"))
        stamp = [v for k, v in got.items() if k.startswith("uscope_snapshot_timestamp_seconds")]
        if stamp and float(stamp[0]) > t:
            return {k: float(v) for k, v in got.items()}
        assert time.monotonic() < deadline, f"no snapshot after {t}: {body}"
        time.sleep(0.1)


@pytest.mark.parametrize("engine", ["inject", "tracefs"])
def test_objtrace_serves_each_probes_events(engine):
    sv = Served(["objtrace", "--serve", "SERVE", "--json", "-e", engine,
                 "--from", "r:libobj:obj_new obj=$retval", "--until", "libobj:obj_free $arg1",
                 "libobj:op_*", "--", target("objdrv"), "basic", "hold"])
    ready = sv.wait_ready()
    got = scrape_after(sv.port, ready)
    out, err = sv.finish()
    events = {}
    for o in (json.loads(l) for l in out.splitlines() if l.startswith("{")):
        events[o["event"]] = events.get(o["event"], 0) + 1
    served = {re.search(r'probe="([^"]+)"', k).group(1): v for k, v in got.items()
              if k.startswith("uscope_probe_hits_total")}
    assert served == {p: events.get(p, 0) for p in served}
    assert events and set(events) <= set(served)
    assert all(v == 0 for k, v in got.items() if k.startswith("uscope_lost_total"))


def test_bad_serve_address_is_one_line():
    for addr, code, msg in [
            ("nonsense", 2, "--serve wants ADDR:PORT"),
            ("127.0.0.1:99999", 2, "--serve wants ADDR:PORT"),
            ("::1:9464", 2, "--serve wants ADDR:PORT"),
            ("[::1:9464", 2, "--serve wants ADDR:PORT"),
            ("127.0.0.1:", 2, "--serve wants ADDR:PORT"),
            (":9464", 2, "--serve wants ADDR:PORT")]:
        cp = run_uscope(["count", "--serve", addr, "distinct", "--", AGG, "keys", "3"])
        assert cp.returncode == code, (addr, cp.stderr)
        lines = error_lines(cp.stderr)
        assert len(lines) == 1 and lines[0].startswith("uscope: ") and msg in lines[0], lines
        assert "aggapp done" not in cp.stdout    # nothing ran, nothing was attached


def test_serve_port_in_use_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        cp = run_uscope(["latency", "--serve", f"127.0.0.1:{port}", "nap", "--", AGG, "sleep"])
    assert cp.returncode == 1
    assert error_lines(cp.stderr) == [f"uscope: cannot serve on 127.0.0.1:{port}: "
                                      "the port is in use"]
    assert "aggapp done" not in cp.stdout


def test_bad_label_is_one_line():
    for label, msg in [("9x=1", "a label name is"), ("probe=x", "uscope sets that label"),
                       ("novalue", "--label wants NAME=VALUE")]:
        cp = run_uscope(["count", "--serve", "127.0.0.1:0", "--label", label, "distinct",
                         "--", AGG, "keys", "3"])
        assert cp.returncode == 2, cp.stderr
        lines = error_lines(cp.stderr)
        assert len(lines) == 1 and msg in lines[0], lines
    cp = run_uscope(["count", "--label", "a=b", "distinct", "--", AGG, "keys", "3"])
    assert cp.returncode == 2 and "give --serve" in cp.stderr


# ---- pprof ------------------------------------------------------------------

needs_go = pytest.mark.skipif(not GO, reason="go is not installed (golang-go)")


def pprof_raw(path):
    """go tool pprof -raw: (sample types, [values per sample], locations text)."""
    cp = subprocess.run([GO, "tool", "pprof", "-raw", path], capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    i = lines.index("Samples:")
    types = lines[i + 1].split()
    samples = []
    for l in lines[i + 2:]:
        m = re.match(r"^\s+([\d ]+): [\d ]+$", l)
        if not m:
            break
        samples.append([int(x) for x in m.group(1).split()])
    return types, samples, cp.stdout


def pprof_top(path, extra=()):
    cp = subprocess.run([GO, "tool", "pprof", "-top", *extra, path], capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    total = re.search(r"of ([\d.]+\S*) total", cp.stdout).group(1)
    return total, cp.stdout


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


@needs_go
def test_count_pprof_total_and_frames(tmp_path):
    prof = tmp_path / "cmp.pb.gz"
    cp = run_uscope(["count", "--json", "--pprof", prof, "cmp $ustack", "--", STACKS, "qsort"])
    assert cp.returncode == 0, cp.stderr
    rows = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
    counted = sum(r["count"] for r in rows)
    assert counted > 0
    with open(prof, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"     # gzip
    total, top = pprof_top(str(prof))
    assert int(total) == counted
    # every frame named: the probed function flat, its callers cumulative
    for fn in ("cmp", "sort_ints", "main", "qsort_r", "__libc_start_main"):
        assert re.search(rf"\s{re.escape(fn)}( \(inline\))?$", top, re.M), (fn, top)
    assert re.search(rf"^\s+{counted}\s+100%\s+100%\s+{counted}\s+100%\s+cmp$", top, re.M), top
    types, samples, raw = pprof_raw(str(prof))
    assert types == ["calls/count"]
    assert sum(s[0] for s in samples) == counted
    # the mappings carry the files' build ids; lines are named
    assert build_id(STACKS) in raw
    assert re.search(r"cmp \S*stacks\.c:\d+", raw), raw


@needs_go
def test_export_pprof_of_a_recording_with_stacks_and_returns(tmp_path):
    rec, prof = tmp_path / "s.usc", tmp_path / "s.pb.gz"
    cp = run_uscope(["record", "-o", rec, "sort_ints $ustack", "r:sort_ints", "cmp $ustack",
                     "--", STACKS, "qsort"])
    assert cp.returncode == 0, cp.stderr
    cp = run_uscope(["export", "-r", rec, "--format", "pprof", "-o", prof])
    assert cp.returncode == 0, cp.stderr
    # the truth: the recording's own calls and times
    rep = run_uscope(["report", "-r", rec, "--json"])
    assert rep.returncode == 0, rep.stderr
    funcs = {r["function"]: r for r in map(json.loads, rep.stdout.splitlines())
             if r.get("function")}
    assert funcs["sort_ints"]["calls"] == 1 and funcs["cmp"]["calls"] > 0
    types, samples, raw = pprof_raw(str(prof))
    assert types == ["calls/count", "wall/nanoseconds"]
    assert sum(s[0] for s in samples) == funcs["cmp"]["calls"] + 1
    # self times: cmp's calls run inside sort_ints, which is the whole
    assert sum(s[1] for s in samples) == funcs["sort_ints"]["total_ns"] == \
        funcs["sort_ints"]["self_ns"] + funcs["cmp"]["self_ns"]
    total, top = pprof_top(str(prof), ["-sample_index=calls"])
    assert int(total) == funcs["cmp"]["calls"] + 1
    assert re.search(r"\ssort_ints$", top, re.M) and re.search(r"\scmp$", top, re.M)


def test_export_pprof_without_stacks_is_refused(tmp_path):
    rec, prof = tmp_path / "n.usc", tmp_path / "n.pb.gz"
    cp = run_uscope(["record", "-o", rec, "nap", "--", AGG, "sleep"])
    assert cp.returncode == 0, cp.stderr
    cp = run_uscope(["export", "-r", rec, "--format", "pprof", "-o", prof])
    assert cp.returncode == 1
    assert error_lines(cp.stderr).count(
        "uscope: the recording has no stacks: record a probe with $ustack for a pprof "
        "profile (--format folded draws its call paths)") == 1
    assert not prof.exists()    # nothing written: no empty file left


def test_count_pprof_needs_a_stack(tmp_path):
    cp = run_uscope(["count", "--pprof", tmp_path / "x.pb.gz", "distinct", "--", AGG, "keys"])
    assert cp.returncode == 2
    assert error_lines(cp.stderr) == ["uscope: count: --pprof writes the probes' stacks: give a "
                                      "probe $ustack (see uscope count --help)"]
    assert not (tmp_path / "x.pb.gz").exists()
