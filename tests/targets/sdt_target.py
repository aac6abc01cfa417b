"""uscope e2e target: the C target sdt.c's provider, probes and rounds,
defined from Python with uscope_sdt (sdt/python).

    sdt_target.py wait | traced N [PROBE...]     (as sdt.c; see there)

Found from the source tree: sdt/python for the module, build/sdt for the
library (or $USCOPE_SDT_LIB)."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdt" / "python"))
import uscope_sdt as sdt  # noqa: E402

MSGS = ["hello", "with space", 'quote " and \\ backslash']
PATHS = ["/etc/hosts", "/tmp/a b", "/var/log/x.log"]

prov = sdt.Provider("sdtapp")
probes = {
    "ints": prov.add_probe("ints", sdt.INT8, sdt.UINT8, sdt.INT16, sdt.UINT16, sdt.INT32,
                           sdt.UINT32),
    "wide": prov.add_probe("wide", sdt.INT64, sdt.UINT64, sdt.STRING, sdt.INT32),
    "str": prov.add_probe("str", "string"),
    "noargs": prov.add_probe("noargs"),
}
prov.load()


def round_(i):
    e = sum(p.enabled for p in probes.values())
    probes["ints"].fire(-(i + 1), 250 + i, -30000 - i, 65000 + i, -2000000000 - i,
                        4000000000 + i)
    probes["wide"].fire(-9000000000000000000 - i, 18000000000000000000 + i, MSGS[i % 3], i)
    probes["str"].fire(PATHS[i % 3].encode())     # bytes work as well as str
    probes["noargs"].fire()
    return e


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "wait":
        print(f"ready {os.getpid()} {prov.fd}", flush=True)
        k = 0
        for _ in sys.stdin:
            e = round_(k)
            k += 1
            print(f"round {k} enabled={e}", flush=True)
        print("sdt done", flush=True)
    elif len(sys.argv) > 2 and sys.argv[1] == "traced":
        n = int(sys.argv[2])
        wanted = [probes[name] for name in sys.argv[3:]] or [probes["ints"]]
        deadline = time.monotonic() + 20
        while not all(p.enabled for p in wanted):
            if time.monotonic() > deadline:
                print("sdt: not all enabled", flush=True)
                return 3
            time.sleep(0.001)
        e = 0
        for i in range(n):
            e = round_(i)
        print(f"sdt done n={n} enabled={e}", flush=True)
    else:
        print("usage: sdt_target.py wait | traced N [PROBE...]", file=sys.stderr)
        return 2
    prov.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
