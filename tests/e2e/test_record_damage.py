"""Damaged recordings: a file cut short (a crash mid-record, a short copy)
or with garbage written over a chunk is read up to the damage, with one
line on stderr saying where it stopped, and the events before it exactly
as the whole file prints them; a file that is no recording (another file,
an empty one) is one error line and exit 1. Never a crash, never a
sanitizer report (stderr is compared whole).

A recording (src/record/format.h): a 352-byte header, then chunks, each
u32 type, u32 length, then the payload (8-aligned). Events are in EVENT
chunks (one each: the bpf and tracefs engines) or in INJECT chunks (a
thread's ring bytes: the inject engine's records)."""

import struct
from pathlib import Path

import pytest

import uscope_e2e as u
from uscope_e2e import target

AGG = target("aggapp")
HDR_LEN = 352
REC_SITES, REC_INJECT, REC_BPF, REC_EVENT, REC_STATS = 1, 6, 7, 8, 10
INJ_REC_PAD = 0x80000000
GARBAGE = b"\xde\xad\xbe\xef" * 2
GARBAGE_U32 = 0xEFBEADDE


def chunks(data):
    """[(offset, type, payload)] of a whole recording."""
    out, at = [], HDR_LEN
    while at + 8 <= len(data):
        t, n = struct.unpack_from("<II", data, at)
        out.append((at, t, data[at + 8:at + 8 + n]))
        at += 8 + n
    assert at == len(data), "the recording itself does not parse"
    return out


def records_in(t, payload):
    """How many events a chunk holds."""
    if t in (REC_EVENT, REC_BPF):
        return 1
    if t != REC_INJECT:
        return 0
    nbytes = struct.unpack_from("<I", payload, 16)[0]
    at, n, end = 24, 0, 24 + nbytes
    while at < end:
        ln = struct.unpack_from("<I", payload, at)[0]
        if not ln & INJ_REC_PAD:
            n += 1
        at += ln & ~INJ_REC_PAD
    return n


def event_chunks(data):
    return [(at, t, p) for at, t, p in chunks(data) if t in (REC_INJECT, REC_BPF, REC_EVENT)]


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
    """The event chunk in the middle of the events, and how many events come
    before it."""
    ev = event_chunks(data)
    assert len(ev) >= 3, f"the events are in {len(ev)} chunks only"
    k = len(ev) // 2
    before = sum(records_in(t, p) for _, t, p in ev[:k])
    assert 0 < before < 12
    return ev[k], before


def warning(path, what):
    return f"uscope: warning: {path} ends early, {what}: read up to there\n"


def single_error(r, line):
    assert r.returncode == 1, f"exit {r.returncode}\nstderr:\n{r.stderr}"
    assert r.stdout == ""
    assert r.stderr == f"uscope: {line}\n"


# ---- (a) cut short ---------------------------------------------------------

@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_cut_in_the_events(tmp_path, engine):
    data, lines = whole(tmp_path, engine)
    (at, _, payload), before = middle(data)
    cut = at + 8 + len(payload) // 2 // 8 * 8 + 4    # inside the chunk's payload
    path = tmp_path / "cut.usc"
    path.write_bytes(data[:cut])
    r = read(path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines[:before]
    assert r.stderr == warning(path, f"at byte {at}: a chunk of {len(payload)} bytes is cut "
                                     f"short, the file ends at byte {cut} (a crash, a short copy)")


@pytest.mark.parametrize("engine", ["inject", "tracefs"])
def test_cut_in_a_chunk_header(tmp_path, engine):
    data, lines = whole(tmp_path, engine)
    (at, _, _), before = middle(data)
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
    (at, _, _), before = middle(data)
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
    (at, _, payload), before = middle(data)
    path = tmp_path / "cut.usc"
    path.write_bytes(data[:at + 8 + 8])
    r = read(path, quiet=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines[:before]
    err = r.stderr.splitlines(keepends=True)
    assert err[0] == warning(path, f"at byte {at}: a chunk of {len(payload)} bytes is cut "
                                   f"short, the file ends at byte {at + 16} (a crash, a short "
                                   "copy)")
    assert not any("ends early" in line or "ERROR" in line for line in err[1:]), r.stderr
    s = u.parse_summary(r.stderr)
    assert s is not None and s.total == before, r.stderr


# ---- (b) garbage over a chunk header ------------------------------------

@pytest.mark.parametrize("engine", ["inject", "bpf", "tracefs"])
def test_garbage_over_a_chunk_header(tmp_path, engine):
    data, lines = whole(tmp_path, engine)
    (at, _, _), before = middle(data)
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
    path = tmp_path / "v2.usc"
    path.write_bytes(data[:8] + struct.pack("<I", 2) + data[12:])
    single_error(read(path), f"{path} is a recording of version 2; this uscope reads version 1")


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
