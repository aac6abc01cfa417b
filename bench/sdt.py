"""Benchmark of uscope_sdt (Python, ctypes) with no tracer attached: an
empty loop, `if probe.enabled: probe.fire(...)` with the probe disabled,
and the same enabled by hand (its semaphore raised, as a tracer would),
firing two integers, then an integer and a string. Median of R runs of N
iterations, ns per iteration.
    usage: sdt.py [N [R]]"""

import ctypes
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdt" / "python"))
import uscope_sdt as sdt  # noqa: E402


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    prov = sdt.Provider("benchpy")
    ints = prov.add_probe("ints", sdt.INT64, sdt.INT64)
    strs = prov.add_probe("strs", sdt.INT64, sdt.STRING)
    prov.load()
    semas = [ctypes.c_uint16.from_address(p._handle.contents.semaphore) for p in (ints, strs)]

    def empty():
        for i in range(n):
            pass

    def probe_ints():
        for i in range(n):
            if ints.enabled:
                ints.fire(i, 2 * i)

    def probe_strs():
        for i in range(n):
            if strs.enabled:
                strs.fire(i, "/some/path")

    cases = [("empty loop", empty, 0), ("disabled: if probe.enabled: ...", probe_ints, 0),
             ("enabled, fired (2 ints), no tracer", probe_ints, 1),
             ("enabled, fired (int, str), no tracer", probe_strs, 1)]
    res = {c[0]: [] for c in cases}
    for _ in range(reps):
        for label, fn, up in cases:
            for s in semas:
                s.value = up
            t0 = time.perf_counter()
            fn()
            res[label].append((time.perf_counter() - t0) * 1e9 / n)
    for s in semas:
        s.value = 0
    base = statistics.median(res["empty loop"])
    print(f"(python {sys.version.split()[0]}, median of {reps} runs of {n} iterations)")
    for label, _, _ in cases:
        m = statistics.median(res[label])
        print(f"  {label:48s} {m:8.1f} ns/iter  {m - base:+8.1f} ns  {m / base:6.1f}x the empty loop")
    prov.close()


if __name__ == "__main__":
    main()
