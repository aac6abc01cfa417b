"""Interposition said: a probe on MODULE:FUNCTION whose FUNCTION the
process's calls never reach, because an object earlier in its lookup scope
(an LD_PRELOAD, a library first in DT_NEEDED: jemalloc before libc) defines
the same symbol, gets one warning at attach naming the object that takes
the calls and the probe to use instead. Targets: ipmain.c, libipa.c (the
interposer), libipb.c; each program says whose definition its calls
reached."""

import os
import re
import subprocess

import pytest

import real_programs as rp
import uscope_e2e as u
from uscope_e2e import Background, run_uscope, target

ENGINES = ["inject", "bpf", "tracefs"]
LIBIPA = target("libipa.so")
LINE = ("uscope: warning: libipb:ip_alloc is interposed by libipa.so:ip_alloc in process "
        "{pid}; its calls go there (probe libipa:ip_alloc)")


def interposed_lines(stderr):
    return [ln for ln in stderr.splitlines() if "interposed" in ln]


class Preloaded(u.Target):
    """ipmain run with LD_PRELOAD=libipa.so (or without), ready."""

    def __init__(self, preload=True):
        env = dict(os.environ, LD_PRELOAD=LIBIPA) if preload else None
        self.p = subprocess.Popen([target("ipmain")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        u.REGISTRY.targets.append(self.p)
        self.pid = self.p.pid
        self._buf = b""
        self.expect("ready")


def run_p(prog, *probes, engine="inject", k=3):
    """count -p on prog while it makes k rounds of calls -> (rows, stderr,
    the program's own lines)."""
    bg = Background(["count", "--json", "-e", engine, "-p", prog.pid, *probes])
    bg.wait_ready()
    said = []
    for i in range(1, k + 1):
        prog.write("x\n")
        said.append(prog.readline())
    prog.close_stdin()
    assert prog.wait() == 0
    res = bg.result()
    assert res.rc == 0, res.stderr
    return rp.agg_rows(res.stdout), res.stderr, said


@pytest.mark.parametrize("engine", ENGINES)
def test_an_ld_preload_interposer_is_said_once_at_attach(engine):
    prog = Preloaded()
    rows, err, said = run_p(prog, "libipb:ip_alloc", "libipb:ip_ver", "libipb:ip_only_b",
                            engine=engine)
    # the program's own word: ip_alloc went to libipa, ip_ver (another
    # version there) and ip_only_b stayed libipb's
    assert said == [f"got {i} alloc=ipa ver=ipb" for i in (1, 2, 3)]
    assert interposed_lines(err) == [LINE.format(pid=prog.pid)], err
    assert {r["probe"]: r["count"] for r in rows} == {"ip_alloc": 0, "ip_ver": 3,
                                                      "ip_only_b": 3}


def test_no_interposer_nothing_said():
    prog = Preloaded(preload=False)
    rows, err, said = run_p(prog, "libipb:ip_alloc", "libipb:ip_ver")
    assert said == [f"got {i} alloc=ipb ver=ipb" for i in (1, 2, 3)]
    assert interposed_lines(err) == [], err
    assert {r["probe"]: r["count"] for r in rows} == {"ip_alloc": 3, "ip_ver": 3}


def test_globs_and_the_interposer_itself_are_not_looked_at():
    prog = Preloaded()
    rows, err, _ = run_p(prog, "libipb:ip_a*", "libipa:ip_alloc")
    assert interposed_lines(err) == [], err


def test_the_probe_it_offers_counts_the_calls():
    prog = Preloaded()
    rows, err, _ = run_p(prog, "libipa:ip_alloc", k=4)
    assert {r["probe"]: r["count"] for r in rows} == {"ip_alloc": 4}


@pytest.mark.parametrize("engine", ENGINES)
def test_command_a_library_first_in_dt_needed(engine, tmp_path):
    """ipdeps needs libipa.so before libipb.so. COMMAND is looked at once
    ld.so has loaded them: ipdeps waits on a FIFO until uscope has said it."""
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    bg = Background(["count", "--json", "-e", engine, "libipb:ip_alloc", "libipb:ip_only_b",
                     "--", target("ipdeps"), "5", fifo])
    try:
        rp.wait_until(lambda: interposed_lines(bg.stderr), "the interposition line",
                      proc=bg.p)
    finally:
        def release():
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                return bg.p.poll() is not None   # no reader yet (or ever)
            os.close(fd)
            return True
        rp.wait_until(release, "ipdeps reading its FIFO")
    res = bg.result()
    assert res.rc == 0, res.stderr
    assert "ipmain n=5 alloc=ipa" in res.stdout
    pid = re.search(r"in process (\d+);", res.stderr).group(1)
    assert interposed_lines(res.stderr) == [LINE.format(pid=pid)], res.stderr
    rows = {r["probe"]: r["count"] for r in rp.agg_rows(res.stdout)}
    assert rows == {"ip_alloc": 0, "ip_only_b": 5}


@pytest.mark.skipif(not (os.path.exists(rp.REDIS) and rp.shutil.which("redis-cli")),
                    reason="redis-server is not installed")
def test_debian_redis_malloc_is_jemallocs(tmp_path):
    redis = rp.Redis(tmp_path)
    try:
        s = rp.attach("count", redis.pid, "libc:malloc", "libjemalloc:malloc")
        redis.send([("SET", f"k{i}", "v" * 100) for i in range(20)])
        s.stop().ok()
    finally:
        redis.stop()
    assert interposed_lines(s.stderr) == [
        f"uscope: warning: libc:malloc is interposed by libjemalloc.so.2:malloc in process "
        f"{redis.pid}; its calls go there (probe libjemalloc:malloc)"], s.stderr
