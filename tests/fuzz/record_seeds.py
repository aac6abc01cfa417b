#!/usr/bin/python3
"""Make the seeds of fuzz_record (tests/fuzz/seeds/fuzz_record/): small real
recordings, made by the real CLI.

    make uscope targets && sudo python3 tests/fuzz/record_seeds.py

Needs root and tracefs (as the e2e tests do). The recordings:

  waiter-{inject,bpf,tracefs}.usc   `uscope record -e ENGINE -p PID` of a
        static copy of tests/targets/waiter (its symbols stripped but
        on_line's and main's, so that its module chunk is small), five lines
        fed to on_line(line, len): strings (one with a tab and quotes, one
        empty), integers, entries and returns; REC_INJECT for inject,
        REC_EVENT for the others
  waiter-snapshot.usc               waiter-inject.usc with a REC_SNAPSHOT chunk
        before its records: --snapshot records no event yet, so no real
        file has one
  dwarf-{inject,tracefs}.usc        dwarfapp-O0 1 with arguments from DWARF:
        a struct shown whole (grouped arguments), enums, a flags enum, bools
  waiter-bpfraw.usc                 waiter-bpf.usc with each REC_EVENT turned
        into the REC_BPF record the bpf program writes (struct bpfeng_rec):
        the bpf engine has no .record yet, so no real file has REC_BPF
  waiter-inject-cut.usc             waiter-inject.usc cut in its REC_INJECT
  waiter-events1.usc                waiter-tracefs.usc with its events in one
        REC_EVENT chunk (the format allows many; the writer makes one each)
  waiter-events1-cut.usc            that, cut in its third event: a chunk cut
        short whose whole records read
  waiter-stats-words.usc            waiter-inject.usc with two counts a site
        after REC_STATS's sites (format.h): records that found no room
        within --max-wait, and a word a later version would add

Every recording of a COMMAND also holds the modules uscope itself maps
(hundreds of KiB of symbols); the dwarf ones have their REC_MODULE chunks
dropped to stay small (the reader does not read them yet). Each seed must
stay under 64 KiB.

The regress-* files beside them are not made here: inputs that found a bug
in the reader (fuzz_record's crashes, and files crafted from these seeds),
kept so that every fuzz run tries them again."""

import os
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
USCOPE = os.environ.get("USCOPE", str(REPO / "uscope"))
OUT = REPO / "tests" / "fuzz" / "seeds" / "fuzz_record"
UPROBE_EVENTS = Path("/sys/kernel/tracing/uprobe_events")

REC_SITES, REC_MODULE, REC_INJECT, REC_BPF, REC_EVENT, REC_STATS, REC_SNAPSHOT = \
    1, 2, 6, 7, 8, 10, 12
SITE_STATS_LEN = 40     # struct rec_site_stats
HDR_LEN = 352


def chunks(data):
    at = struct.unpack_from("<I", data, 12)[0]
    while at + 8 <= len(data):
        t, n = struct.unpack_from("<II", data, at)
        yield at, t, data[at + 8:at + 8 + n]
        at += 8 + n


def chunk(t, payload):
    payload += b"\0" * (-len(payload) % 8)
    return struct.pack("<II", t, len(payload)) + payload


class Get:
    def __init__(self, b):
        self.b, self.at = b, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.at)
        self.at += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def str(self):
        n = self.take("I")
        if n == 0xFFFFFFFF:
            return None
        s = self.b[self.at:self.at + n]
        self.at += n
        return s.decode(errors="replace")


def sites_of(payload):
    """The sites of a REC_SITES chunk (what the bpf records need)."""
    g = Get(payload)
    for _ in range(g.take("I")):
        g.str()
        g.take("4B")
    sites = []
    for _ in range(g.take("I")):
        probe, fl, group, vaddr, fvaddr, off = g.take("IIiQQQ")
        path, sym, label, event = g.str(), g.str(), g.str(), g.str()
        nargs = g.take("I")
        for _ in range(nargs):
            g.str()
            g.take("4B")
            ne, _flags = g.take("IB")
            for _ in range(ne):
                g.take("Q")
                g.str()
            g.take("B")
        engine = g.str()
        sites.append(dict(ret_site=bool(fl & 2), vaddr=vaddr, func_vaddr=fvaddr, nargs=nargs,
                          engine=engine))
    return sites


def event_to_bpf(payload, sites):
    """A REC_EVENT's event as the bpf program's struct bpfeng_rec."""
    ln, site, ts, pid, tid, cpu, nvals, comm_len, ip, func = struct.unpack_from(
        "<IIQiiiHHQQ", payload, 0)
    vals, at = [], 48
    for _ in range(nvals):
        kind, vlen, u = struct.unpack_from("<B3xIQ", payload, at)
        vals.append([kind, vlen, u, b""])
        at += 16
    for v in vals:
        if v[0] == 1:   # USC_V_STR
            v[3] = payload[at:at + v[1]]
            at += v[1]
    comm = payload[at:at + comm_len]
    s = sites[site]
    bpf_index = [i for i, x in enumerate(sites) if x["engine"] == "bpf"].index(site)
    if s["ret_site"]:
        # the hidden last value: the return address; ip: the ret's address
        vals.append([0, 0, ip, b""])
        ip = func - s["func_vaddr"] + s["vaddr"]
    head = 64 + 16 * 16
    strs, out_vals = b"", []
    for kind, vlen, u, sb in vals:
        if kind == 1:
            out_vals.append(struct.pack("<QHHB3x", 0, head + len(strs), len(sb), 1))
            strs += sb + b"\0"
        else:
            out_vals.append(struct.pack("<QHHB3x", u, 0, 0, kind))
    out_vals += [b"\0" * 16] * (16 - len(out_vals))
    total = head + len(strs)
    rec = struct.pack("<QQIIIIIIII16s", ts, ip, pid, tid, bpf_index, bpf_index, cpu,
                      len(vals), total, 0, comm) + b"".join(out_vals) + strs
    return struct.pack("<II", len(rec), 0) + rec


def to_bpf(data):
    sites, out = None, bytearray(data[:HDR_LEN])
    for _, t, p in chunks(data):
        if t == REC_SITES:
            sites = sites_of(p)
        out += chunk(REC_BPF, event_to_bpf(p, sites)) if t == REC_EVENT else chunk(t, p)
    return bytes(out)


def drop_modules(data):
    out = bytearray(data[:HDR_LEN])
    for _, t, p in chunks(data):
        if t != REC_MODULE:
            out += chunk(t, p)
    return bytes(out)


def snapshot(data, why):
    out, done = bytearray(data[:HDR_LEN]), False
    for _, t, p in chunks(data):
        if t == REC_INJECT and not done:
            out += chunk(REC_SNAPSHOT, struct.pack("<I", len(why)) + why.encode())
            done = True
        out += chunk(t, p)
    return bytes(out)


def cut_in(data, kind):
    for at, t, p in chunks(data):
        if t == kind:
            return data[:at + 8 + len(p) // 2]
    raise SystemExit(f"no chunk of type {kind}")


def one_event_chunk(data):
    """Every REC_EVENT chunk's events in the first one's place."""
    out, events, at = bytearray(data[:HDR_LEN]), b"", None
    for _, t, p in chunks(data):
        if t == REC_EVENT:
            if at is None:
                at = len(out)
                out += chunk(REC_EVENT, b"")
            events += p
        else:
            out += chunk(t, p)
    if at is None:
        raise SystemExit("no REC_EVENT chunk")
    return bytes(out[:at]) + chunk(REC_EVENT, events) + bytes(out[at + 8:])


def cut_in_event(data, k):
    """data cut in the middle of the k-th event of its first REC_EVENT chunk."""
    for at, t, p in chunks(data):
        if t == REC_EVENT:
            q = 0
            for _ in range(k):
                q += struct.unpack_from("<I", p, q)[0]
            return data[:at + 8 + q + 12]
    raise SystemExit("no REC_EVENT chunk")


def stats_words(data, nwords):
    """data with nwords counts a site after its REC_STATS's sites (word 0:
    records that found no room within --max-wait, 3 + the site; the others
    1000 + the site), whatever it had there."""
    out = data[:HDR_LEN]
    for _, t, p in chunks(data):
        if t == REC_STATS:
            n = struct.unpack_from("<Q", p, 0)[0]
            p = p[:24 + n * SITE_STATS_LEN] + struct.pack("<Q", nwords) + b"".join(
                struct.pack("<Q", (3 if w == 0 else 1000) + i)
                for i in range(n) for w in range(nwords))
        out += chunk(t, p)
    return out


def static_waiter(d):
    full, exe = Path(d) / "waiter-full", Path(d) / "waiter"
    subprocess.run(["cc", "-static", "-O1", "-g0", "-o", full,
                    REPO / "tests" / "targets" / "waiter.c"], check=True)
    subprocess.run(["objcopy", "--strip-all", "-K", "on_line", "-K", "main", full, exe],
                   check=True)
    return exe


def record_waiter(exe, engine, out, extra=()):
    w = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert w.stdout.readline() == "ready\n"
    u = subprocess.Popen([USCOPE, "record", "-o", out, "-e", engine, "-p", str(w.pid), *extra,
                          f"{exe}:on_line line=$arg1:string len=$arg2:s32"],
                         stderr=subprocess.PIPE, text=True)
    line = u.stderr.readline()
    assert line.startswith("uscope: tracing"), line
    for s in ["alpha", "x" * 40, 'tab\there "q"\\', "", "beta"]:
        w.stdin.write(s + "\n")
        w.stdin.flush()
        assert w.stdout.readline().startswith("got ")
    u.send_signal(signal.SIGINT)
    err = u.communicate(timeout=30)[1]
    assert u.returncode == 0, err
    w.stdin.close()
    w.wait(10)


def main():
    if os.geteuid() != 0 or not UPROBE_EVENTS.exists():
        sys.exit("needs root and tracefs (mount -t tracefs nodev /sys/kernel/tracing)")
    OUT.mkdir(parents=True, exist_ok=True)
    seeds = {}
    with tempfile.TemporaryDirectory() as d:
        exe = static_waiter(d)
        for eng in ("inject", "bpf", "tracefs"):
            f = Path(d) / f"{eng}.usc"
            record_waiter(exe, eng, f)
            seeds[f"waiter-{eng}.usc"] = f.read_bytes()
        for eng in ("inject", "tracefs"):
            f = Path(d) / f"dwarf-{eng}.usc"
            subprocess.run([USCOPE, "record", "-q", "-o", f, "-e", eng, "run_job *j verbose m s",
                            "r:job_done $retval", "handle r->tag c flag", "--",
                            REPO / "tests" / "targets" / "bin" / "dwarfapp-O0", "1"],
                           check=True, stdout=subprocess.DEVNULL)
            seeds[f"dwarf-{eng}.usc"] = drop_modules(f.read_bytes())
    seeds["waiter-bpfraw.usc"] = to_bpf(seeds["waiter-bpf.usc"])
    seeds["waiter-snapshot.usc"] = snapshot(seeds["waiter-inject.usc"], "SIGUSR1")
    seeds["waiter-inject-cut.usc"] = cut_in(seeds["waiter-inject.usc"], REC_INJECT)
    seeds["waiter-events1.usc"] = one_event_chunk(seeds["waiter-tracefs.usc"])
    seeds["waiter-events1-cut.usc"] = cut_in_event(seeds["waiter-events1.usc"], 2)
    seeds["waiter-stats-words.usc"] = stats_words(seeds["waiter-inject.usc"], 2)
    left = UPROBE_EVENTS.read_text().strip()
    assert not left, f"uprobe_events not empty: {left}"
    for name, data in sorted(seeds.items()):
        assert len(data) < 64 * 1024, f"{name}: {len(data)} bytes"
        (OUT / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
