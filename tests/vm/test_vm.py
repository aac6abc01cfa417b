"""The kernel matrix: Debian's own kernels (bookworm's 6.1, trixie's 6.12,
bullseye's 5.10) booted under QEMU with a Debian 12 root and this checkout,
the README's tour run inside on every engine (tests/vm/checks.py), compared
with the same checks run on the host.

    sudo /usr/bin/python3 -m pytest -q tests/vm          # (make check: make vm)
    USCOPE_VM_SUITES=bookworm sudo ... pytest tests/vm   # one kernel

- On 6.1 and 6.12 every check that passes on the host passes in the guest.
- On 5.10 every check passes on inject, tracefs and auto as on the host, and
  -e bpf is refused in one line that names what the kernel lacks.
- No WARNING, BUG or Oops in any guest's kernel log.
A failing check prints the guest's output (the checks' and the kernel's).

The kernels, the guest root and its image are cached in /var/cache/uscope
(tests/vm/vm.py says how): the first run on a machine fetches and makes them
(a few minutes, with network), later ones only boot (about 1.5 minutes a
kernel under TCG here)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vm  # noqa: E402

SUITES = os.environ.get("USCOPE_VM_SUITES", "bookworm,trixie,bullseye").split(",")
CHECK = re.compile(r"^CHECK (\S+) (\S+) (PASS|FAIL|REFUSED) ")


def parse(text):
    """{(check, engine): (status, why, the lines it printed)}"""
    out, cur = {}, None
    for line in text.splitlines():
        m = CHECK.match(line)
        if m:
            cur = (m.group(1), m.group(2))
            out[cur] = [m.group(3), "", [line]]
        elif cur:
            if line.startswith("why: "):
                out[cur][1] = line[5:]
            out[cur][2].append(line)
    return {k: (v[0], v[1], "\n".join(v[2])) for k, v in out.items()}


@pytest.fixture(scope="session")
def host():
    if os.geteuid() != 0:
        pytest.skip("the kernel matrix needs root (QEMU's disks, the checks' probes)")
    for p in vm.STAGE:
        if not (vm.REPO / p).exists():
            pytest.fail(f"{p} is missing: make uscope targets build/demo/server")
    p = subprocess.run([sys.executable, str(vm.REPO / "tests/vm/checks.py")],
                       capture_output=True, text=True, timeout=1800)
    r = parse(p.stdout)
    assert r, f"the checks did not run on the host:\n{p.stdout}{p.stderr}"
    return r


@pytest.mark.parametrize("suite", SUITES)
def test_tour_on_every_engine(suite, host):
    b = vm.boot(suite, "python3.11 tests/vm/checks.py\n")
    guest = parse(b.job)
    bad = []
    for key, (st, why, _) in sorted(host.items()):
        name, engine = key
        g = guest.get(key)
        if not g:
            bad.append(f"{name} on {engine}: did not run in the guest")
            continue
        gst, gwhy, gout = g
        if suite == "bullseye" and engine == "bpf":
            # refused in one line, naming what the kernel lacks (a check
            # the host refuses too may say its own reason)
            if gst != "REFUSED" or ("lacks" not in gwhy and not (st == "REFUSED" and gwhy == why)):
                bad.append(f"{name} on bpf: not refused for what 5.10 lacks:\n{gout}")
        elif st == "PASS" and gst != "PASS":
            bad.append(f"{name} on {engine}: passes on the host, {gst} here:\n{gout}")
    kern = b.bad_kernel_lines()
    if bad or kern or b.exit != 0:
        msg = [f"{suite} ({b.release}), {b.seconds:.0f} s, the job's exit {b.exit}:"]
        msg += bad
        msg += [f"kernel log: {l}" for l in kern]
        msg += ["--- the guest's output ---", b.job[-20000:]]
        pytest.fail("\n".join(msg), pytrace=False)
