#!/usr/bin/env python3
"""Kill uscope with SIGKILL at random instants of its start, many times, under
load (issue 40's target: no broken target in 1,000 kills). Outside make check
(it takes a while): the same kills as tests/e2e/test_chaos.py's, more of them,
with CPU-bound processes running meanwhile.

    bench/chaos_kills.py [N] [--load L] [--seed S] [--modes pid,py,command,system]

N kills in all (1000), split evenly over the modes; L CPU-bound processes
(2) for the whole run. Prints each failure as it comes, then one line per
mode: kills, broken targets, and the run's time. USCOPE picks the build
(the release build ./uscope by default). Exit status 1 when a target broke."""

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "e2e"))
os.environ.setdefault("USCOPE", str(HERE.parent / "uscope"))

import chaos_kills  # noqa: E402


def spin():
    while True:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=1000)
    ap.add_argument("--load", type=int, default=2)
    ap.add_argument("--seed", default="40")
    ap.add_argument("--modes", default="pid,py,command,system")
    a = ap.parse_args()
    modes = a.modes.split(",")
    load = [multiprocessing.Process(target=spin, daemon=True) for _ in range(a.load)]
    for p in load:
        p.start()
    bad = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i, mode in enumerate(modes):
                n = a.n // len(modes) + (i < a.n % len(modes))
                t0 = time.monotonic()
                res = chaos_kills.run(mode, n, a.seed, tmp)
                broken = [r for r in res if r["error"]]
                for r in broken:
                    print(f"broken: {r}", flush=True)
                bad += len(broken)
                print(f"{mode}: {len(res)} kills, {len(broken)} broken targets, "
                      f"{time.monotonic() - t0:.0f} s (load {a.load})", flush=True)
    finally:
        for p in load:
            p.terminate()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
