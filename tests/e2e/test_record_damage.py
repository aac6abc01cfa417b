"""Damaged recordings: a file cut short (a crash mid-record, a short copy)
or with garbage written over a chunk is read up to the damage, with one
line on stderr saying where it stopped, and the events before it exactly
as the whole file prints them; a file that is no recording (another file,
an empty one) is one error line and exit 1. Never a crash, never a
sanitizer report (stderr is compared whole).

A recording (src/record/format.h): a 352-byte header, then chunks, each
u32 type, u32 length, then the payload (8-aligned). Events are in EVENT
and BPF chunks (one each: the tracefs and bpf engines) or in INJECT chunks
(a thread's ring bytes: the inject engine's records, as many as a poll
found). A chunk cut short keeps its whole records."""

import re
import struct
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import target

AGG = target("aggapp")
HDR_LEN = 352
REC_SITES, REC_INJECT, REC_BPF, REC_EVENT, REC_STATS = 1, 6, 7, 8, 10
INJ_REC_PAD = u.INJ_REC_PAD
GARBAGE = b"\xde\xad\xbe\xef" * 2
GARBAGE_U32 = 0xEFBEADDE
TIME_RE = re.compile(r"\] \d+\.\d{6}: ")


def chunks(data):
    """[(offset, type, payload)] of a whole recording."""
    out, at = [], HDR_LEN
    while at + 8 <= len(data):
        t, n = struct.unpack_from("<II", data, at)
        out.append((at, t, data[at + 8:at + 8 + n]))
        at += 8 + n
    assert at == len(data), "the recording itself does not parse"
    return out


def records(data):
    """[(chunk's offset, its payload's length, record's offset, its length)]:
    every event record of a whole recording, in file order."""
    out = []
    for at, t, p in chunks(data):
        if t == REC_BPF:
            out.append((at, len(p), at + 16, struct.unpack_from("<I", p, 0)[0]))
        elif t == REC_EVENT:
            q = 0
            while q < len(p):
                ln = struct.unpack_from("<I", p, q)[0]
                out.append((at, len(p), at + 8 + q, ln))
                q += ln
        elif t == REC_INJECT:
            q, end = 24, 24 + struct.unpack_from("<I", p, 16)[0]
            while q < end:
                ln = struct.unpack_from("<I", p, q)[0]
                if not ln & INJ_REC_PAD:
                    out.append((at, len(p), at + 8 + q, u.inj_rec_len(ln)))
                q += u.inj_rec_len(ln)
    return out


def record(tmp_path: Path, engine: str) -> bytes:
    """A real recording: nap(us) x6, 50 ms apart (aggapp spread), entries and
    returns: 12 events over several polls, so over several chunks."""
    f = tmp_path / f"{engine}.usc"
    r = u.run_uscope(["record", "-q", "-o", f, "-e", engine, f"{AGG}:nap us=$arg1:s64",
                      "--", AGG, "spread"])
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    return f.read_bytes()


def read(path, quiet=True):
    r = u.run_uscope(["trace"] + (["-q"] if quiet else []) + ["-r", path])
    return r


def whole(tmp_path, engine):
    data = record(tmp_path, engine)
    path = tmp_path / "whole.usc"
    path.write_bytes(data)
    r = read(path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 12, r.stdout
    assert all(u.parse_text_line(line) for line in lines), r.stdout
    return data, lines


def middle(data):
    """The middle event record: its index, its chunk's offset and payload
    length, its offset and length; and how many records come before its
    chunk (the inject engine's chunks are a thread's ring bytes: as many
    records as a poll found)."""
    recs = records(data)
    assert len(recs) == 12
    k = len(recs) // 2
    before = sum(1 for r in recs if r[0] < recs[k][0])
    return k, recs[k], before


def warning(path, what):
    return f"uscope: warning: {path} ends early, {what}: read up to there\n"


def single_error(r, line):
    assert r.returncode == 1, f"exit {r.returncode}\nstderr:\n{r.stderr}"
    assert r.stdout == ""
    assert r.stderr == f"uscope: {line}\n"


# ---- (a) cut short ---------------------------------------------------------

@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_cut_in_the_events(tmp_path, engine):
    """Cut inside a record: every record before it reads, those of its own
    chunk too (a chunk of the inject engine holds many)."""
    data, lines = whole(tmp_path, engine)
    k, (at, clen, rat, rlen), _ = middle(data)
    cut = rat + rlen // 2 // 8 * 8 + 4                # inside the record
    path = tmp_path / "cut.usc"
    path.write_bytes(data[:cut])
    r = read(path)
    assert r.returncode == 0, r.stderr
    got = r.stdout.splitlines()
    if engine == "inject" and got != lines[:k]:
        # the inject engine's records are stamped with the TSC, converted
        # through the clock samples: past the last one the cut file has,
        # along its last two (or as the only one), where the whole file
        # has samples after them
        def untimed(ls):
            return [TIME_RE.sub("] ", line, count=1) for line in ls]
        assert untimed(got) == untimed(lines[:k])
        times = [u.parse_text_line(line).time for line in got]
        assert times == sorted(times)
    else:
        assert got == lines[:k]
    assert r.stderr == warning(path, f"at byte {at}: a chunk of {clen} bytes is cut "
                                     f"short, the file ends at byte {cut} (a crash, a short copy)")


@pytest.mark.parametrize("engine", ["inject", "tracefs"])
def test_cut_in_a_chunk_header(tmp_path, engine):
    data, lines = whole(tmp_path, engine)
    _, (at, _, _, _), before = middle(data)
    path = tmp_path / "cut.usc"
    path.write_bytes(data[:at + 5])
    r = read(path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines[:before]
    assert r.stderr == warning(path, f"at byte {at}: the file ends in a chunk's header (cut "
                                     "short: a crash, a short copy)")


def test_cut_between_chunks(tmp_path):
    """Cut where a chunk ends: every chunk reads, the end is missing."""
    data, lines = whole(tmp_path, "bpf")
    _, (at, _, _, _), before = middle(data)
    path = tmp_path / "cut.usc"
    path.write_bytes(data[:at])
    r = read(path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines[:before]
    assert r.stderr == warning(path, f"at byte {at}: the recording has no end (cut short: a "
                                     "crash, a short copy)")


def test_cut_summary(tmp_path):
    """Without -q: the damage line first, then the usual lines, the summary
    counting the events read."""
    data, lines = whole(tmp_path, "inject")
    _, (at, clen, _, _), before = middle(data)
    path = tmp_path / "cut.usc"
    path.write_bytes(data[:at + 8 + 8])               # in the ring's header
    r = read(path, quiet=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines[:before]
    err = r.stderr.splitlines(keepends=True)
    assert err[0] == warning(path, f"at byte {at}: a chunk of {clen} bytes is cut "
                                   f"short, the file ends at byte {at + 16} (a crash, a short "
                                   "copy)")
    assert not any("ends early" in line or "ERROR" in line for line in err[1:]), r.stderr
    s = u.parse_summary(r.stderr)
    assert s is not None and s.total == before, r.stderr


# ---- (b) garbage over a chunk header ------------------------------------

@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_garbage_over_a_chunk_header(tmp_path, engine):
    data, lines = whole(tmp_path, engine)
    _, (at, _, _, _), before = middle(data)
    path = tmp_path / "garbage.usc"
    path.write_bytes(data[:at] + GARBAGE + data[at + 8:])
    r = read(path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines[:before]
    assert r.stderr == warning(path, f"at byte {at}: a damaged chunk header (type "
                                     f"{GARBAGE_U32}, length {GARBAGE_U32})")


def test_garbage_over_the_sites_header(tmp_path):
    """The probes are the first chunk: without them nothing can be read."""
    data, _ = whole(tmp_path, "tracefs")
    assert chunks(data)[0][:2] == (HDR_LEN, REC_SITES)
    path = tmp_path / "garbage.usc"
    path.write_bytes(data[:HDR_LEN] + GARBAGE + data[HDR_LEN + 8:])
    single_error(read(path), f"{path}: no probes in the recording (at byte {HDR_LEN}: a "
                             f"damaged chunk header (type {GARBAGE_U32}, length {GARBAGE_U32}))")


def test_garbage_in_the_sites(tmp_path):
    """A SITES chunk whose bytes do not read (an argument count past the
    chunk): no half-read probes, the file does not open."""
    data, _ = whole(tmp_path, "bpf")
    at, t, payload = chunks(data)[0]
    assert t == REC_SITES
    bad = bytearray(data)
    bad[at + 8 + 4:at + 8 + len(payload)] = b"\xff" * (len(payload) - 4)
    path = tmp_path / "garbage.usc"
    path.write_bytes(bytes(bad))
    single_error(read(path), f"{path}: no probes in the recording (at byte {HDR_LEN}: a "
                             f"chunk of type {REC_SITES} that does not read as one)")


# ---- (c) not a recording; (d) empty ---------------------------------------

def test_not_a_recording(tmp_path):
    path = tmp_path / "aggapp.c"
    path.write_bytes((u.TARGETS / "aggapp.c").read_bytes())
    single_error(read(path), f"{path} is not a uscope recording")


def test_an_executable(tmp_path):
    single_error(read(AGG), f"{AGG} is not a uscope recording")


def test_another_version(tmp_path):
    data, _ = whole(tmp_path, "tracefs")
    path = tmp_path / "v3.usc"
    path.write_bytes(data[:8] + struct.pack("<I", 3) + data[12:])
    single_error(read(path), f"{path} is a recording of version 3; this uscope reads versions 1 to 2")


def test_version_1_still_read(tmp_path):
    """Version 2 added the inject engine's short records; a file of version 1
    (which holds none) reads as it did."""
    data, _ = whole(tmp_path, "tracefs")
    old = tmp_path / "v1.usc"
    old.write_bytes(data[:8] + struct.pack("<I", 1) + data[12:])
    new = tmp_path / "v2.usc"
    new.write_bytes(data)
    a, b = read(old), read(new)
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout.strip()


def test_too_short(tmp_path):
    path = tmp_path / "short.usc"
    path.write_bytes(b"USCOPE\x1aR\x01\0\0\0")
    single_error(read(path), f"{path} is not a uscope recording (too short)")


def test_empty(tmp_path):
    path = tmp_path / "empty.usc"
    path.write_bytes(b"")
    single_error(read(path), f"{path} is not a uscope recording (empty)")


def test_a_directory(tmp_path):
    single_error(read(tmp_path), f"{tmp_path} is not a uscope recording (not a file)")


def test_missing(tmp_path):
    path = tmp_path / "none.usc"
    single_error(read(path), f"cannot read {path}: No such file or directory")


def test_no_site(tmp_path):
    """Probes that placed no site: nothing to read (trace -r waited for
    ever)."""
    data, _ = whole(tmp_path, "tracefs")
    out = data[:HDR_LEN]
    for _, t, payload in chunks(data):
        if t == REC_SITES:
            payload = struct.pack("<II", 0, 0)     # no probe, no site
        if t != REC_STATS:                         # (they count per site)
            out += struct.pack("<II", t, len(payload)) + payload
    path = tmp_path / "nosite.usc"
    path.write_bytes(out)
    single_error(read(path), f"{path}: no probes in the recording (not one site)")
