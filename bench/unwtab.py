#!/usr/bin/env python3
"""make bench: the unwind tables $ustack walks with (issue 19): building
them for glibc's libc and Debian's python3.11, and the disk cache that
keeps them (by build-id, in $XDG_CACHE_HOME/uscope/unwind; none with
USCOPE_NO_UNWIND_CACHE). Side by side:

 1. each module's table alone (bench/unwalk.c build): rows, bytes, the
    time to build it from the CFI (CPU and wall, median of 3), to read it
    back from a disk cache, to find it again in a session. Target: libc's
    and python3.11's together <= 100 ms.
 2. uscope itself, count -e inject '...:PyObject_GetIter $ustack' on
    python3.11: every table of the process (python3.11, libc, libm, libz,
    libexpat, ld.so), as uscope says it took them (-v's "ms to have
    them"): cold (a new, empty cache directory each run), warm (the same
    directory again: the tables read from it) and with the cache turned
    off (USCOPE_NO_UNWIND_CACHE=1: built every run). The cache is taken
    if the cold run wrote libc's and python3.11's tables, the warm runs
    left those files as they were (same inode and time: read, not
    rebuilt) and took less time. Target: cached after the first build.
 3. the walker alone on a stack of its own (bench/unwalk.c walk, 10
    frames and the whole stack), beside libdw unwinding the same 8 KiB
    copy (--stack-mode copy's way), for scale.

usage: unwtab.py USCOPE UNWALK REPS [WALK_ITERS]
Timings on a VM are noisy: read the ratios."""

import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

US, UNWALK, REPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
ITERS = sys.argv[4] if len(sys.argv) > 4 else "200000"
PY = "/usr/bin/python3.11"
LIMIT_MS = 100


def verdict(ok):
    return "met" if ok else "missed"


def libc_path():
    out = subprocess.run(["ldd", "/bin/true"], capture_output=True, text=True).stdout
    m = re.search(r"libc\.so\.6 => (\S+)", out)
    if not m:
        sys.exit("bench: no libc.so.6 in ldd /bin/true")
    return os.path.realpath(m.group(1))


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def unwalk(*args):
    p = subprocess.run([UNWALK] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench: unwalk {args[0]} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p.stdout


def section_build(mods):
    out = unwalk("build", *mods)
    print("== 1. unwind tables built from the CFI (bench/unwalk.c build: median of 3; the disk "
          "cache in a temporary directory)")
    print(f"  {'':14} {'rows':>8} {'KiB':>7} {'build CPU':>10} {'wall':>8} {'from disk':>10} "
          f"{'in session':>11}")
    wall = 0.0
    for m in mods:
        b = os.path.basename(m)

        def get(what, pat=r"([0-9.]+)"):
            r = re.search(rf"^{re.escape(b)} {what} {pat}", out, re.M)
            if not r:
                sys.exit(f"bench: unwalk build: no {what} for {b}:\n{out}")
            return r

        rows, size = int(get("rows").group(1)), int(get("bytes").group(1))
        bm = get("build_ms", r"([0-9.]+) ms \(wall ([0-9.]+) ms\)")
        disk = get("disk_ms", r"([0-9.]+) ms(.*)$")
        sess = float(get("session_us").group(1))
        wall += float(bm.group(2))
        print(f"  {b:14} {rows:8d} {size / 1024:7.0f} {float(bm.group(1)):7.1f} ms "
              f"{float(bm.group(2)):5.1f} ms {float(disk.group(1)):7.2f} ms {sess:8.2f} us"
              f"{disk.group(2)}")
        fb = re.search(rf"^{re.escape(b)} fallback_rows (.*)$", out, re.M)
        if fb:
            print(f"  {'':14} rows the walker cannot use (a hit there falls back to a copy): "
                  f"{fb.group(1)}")
    names = " and ".join(os.path.basename(m) for m in mods)
    print(f"  target: the tables of {names} built in <= {LIMIT_MS} ms: {wall:.1f} ms (wall): "
          f"{verdict(wall <= LIMIT_MS)}")


def have_tables(env):
    """uscope on python3.11: its -v's "N unwind tables, R rows, X ms to have them"."""
    p = subprocess.run([US, "count", "-v", "-e", "inject", f"{PY}:PyObject_GetIter $ustack",
                        "--", PY, "-I", "-S", "-c", "iter(())"],
                       capture_output=True, text=True, env=env)
    m = re.search(r"stack: (\d+) unwind tables, (\d+) rows, ([0-9.]+) ms to have them", p.stderr)
    if p.returncode != 0 or not m:
        sys.exit(f"bench: count '$ustack' on {PY} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return int(m.group(1)), int(m.group(2)), float(m.group(3))


def files(d, ids):
    out = {}
    for i in ids:
        # <build-id>.v<format version>.unw
        found = glob.glob(os.path.join(d, "uscope", "unwind", f"{i}.v*.unw"))
        path = found[0] if found else os.path.join(d, "uscope", "unwind", f"{i}.unw")
        try:
            st = os.stat(path)
            out[i] = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            out[i] = None
    return out


def section_session(mods):
    ids = {os.path.basename(m): build_id(m) for m in mods}
    base = dict(os.environ)
    base.pop("USCOPE_NO_UNWIND_CACHE", None)
    cold, warm, off, kept, written = [], [], [], True, True
    tabs = None
    for _ in range(REPS):
        d = tempfile.mkdtemp(prefix="uscope-bench-cache-")
        try:
            env = dict(base, XDG_CACHE_HOME=d)
            tabs = have_tables(env)
            cold.append(tabs[2])
            first = files(d, ids.values())
            written &= all(first.values())
            for _ in range(REPS):
                warm.append(have_tables(env)[2])
            kept &= files(d, ids.values()) == first
        finally:
            shutil.rmtree(d, ignore_errors=True)
        off.append(have_tables(dict(base, USCOPE_NO_UNWIND_CACHE="1"))[2])
    c, w, o = (statistics.median(v) for v in (cold, warm, off))
    print(f"== 2. uscope count -e inject '$ustack' on {PY}: {tabs[0]} unwind tables, {tabs[1]} "
          f"rows, ms to have them all (uscope -v); medians of {REPS} cold, {REPS * REPS} warm, "
          f"{REPS} off")
    print(f"  {'cold (an empty cache directory)':36} {c:7.1f} ms")
    print(f"  {'warm (the same directory again)':36} {w:7.1f} ms  "
          f"({c / w if w else float('inf'):.1f}x less)")
    print(f"  {'cache off (USCOPE_NO_UNWIND_CACHE=1)':36} {o:7.1f} ms")
    names = ", ".join(f"{b} {i[:12]}..." for b, i in ids.items())
    print(f"  tables on disk after the cold run ({names}): {'yes' if written else 'no'}; "
          f"left as they were by the warm runs: {'yes' if kept else 'no'}")
    ok = written and kept and w < c
    print(f"  target: cached after the first build (a second run takes the cache): "
          f"{w:.1f} ms against {c:.1f} ms: {verdict(ok)}")


def section_walk():
    out = unwalk("walk", ITERS)
    v = dict(re.findall(r"^(\S+) ([0-9.]+)", out, re.M))
    full = [k for k in v if re.match(r"walker_ns_per_stack_\d+_frames", k) and "_10_" not in k]
    n = re.search(r"_(\d+)_frames", full[0]).group(1) if full else "?"
    print(f"== 3. the walker alone (bench/unwalk.c walk: {ITERS} walks, median of 15 rounds, "
          f"CPU time), ns a stack")
    print(f"  {'':30} {'10 frames':>10} {n + ' frames':>10}")
    for label, k in (("walker, rows looked up", "walker"), ("walker, rows cached",
                                                            "walker_cached"),
                     ("libdw on an 8 KiB copy", "libdw")):
        print(f"  {label:30} {float(v[k + '_ns_per_stack_10_frames']):10.1f} "
              f"{float(v[f'{k}_ns_per_stack_{n}_frames']):10.1f}")


def main():
    mods = [libc_path()] + ([PY] if os.access(PY, os.X_OK) else [])
    section_build(mods)
    if PY in mods:
        section_session(mods)
    else:
        print(f"== 2. uscope's tables on python3.11: skipped ({PY} not installed)")
    section_walk()


main()
