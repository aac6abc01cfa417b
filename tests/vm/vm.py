#!/usr/bin/env python3
"""The kernel matrix's machinery: Debian's kernels booted under QEMU with a
Debian 12 root and this checkout, a job run inside, its console read back.

    python3 tests/vm/vm.py bookworm                 # the checks (tests/vm/checks.py)
    python3 tests/vm/vm.py bookworm -- ./uscope -vv count -e bpf ...   # a command
    python3 tests/vm/vm.py bullseye --checks "--engines bpf --only count"
    python3 tests/vm/vm.py trixie --job my.sh        # a script of the host's

What is cached (outside the checkout, in $USCOPE_CACHE, /var/cache/uscope by
default, as scripts/roots.sh's roots), so a second run only boots:
  - the kernels: scripts/kernels.sh SUITE (the package, its virtio and ext4
    modules in an initramfs with tests/vm/rdinit.c);
  - the guest root: scripts/roots.sh bookworm with what uscope and the
    checks need, made into an ext4 image (vm/root-KEY.ext4) once. The guest
    opens it with snapshot=on: what it writes is thrown away.
The checkout goes in a second, small disk made each run (the release build,
the test programs, tests/vm), mounted at /src/uscope. The guest's init
(tests/vm/guest.sh) runs .vm/job.sh from it and prints the kernel's log.

QEMU's TCG (`-accel tcg,thread=multi -cpu max`): this machine's /dev/kvm
cannot boot a guest (see DESIGN-NOTES, "Kernels people run"). One virtual
CPU by default: with two, a guest kernel now and then took an int3 of its
own text patching (a tracepoint's static key turned off as tracefs disables
an event: "Oops: int3" in ttwu_do_activate, on 6.12) or hung, which QEMU's
multi-threaded TCG does not order as a CPU does; with one there is no other
CPU to see the patch half made. --cpus 2 for a run that wants two."""

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("USCOPE_CACHE", "/var/cache/uscope"))
SUITES = {"bookworm": "6.1", "trixie": "6.12", "bullseye": "5.10"}
# What the guest root holds besides a minimal Debian 12: uscope's shared
# libraries, python3.11 (py: probes, the checks), procps, libc6-dbg (the
# names of libc's local functions in $ustack, as the host has them).
ROOT_PKGS = ["libbpf1", "libdw1", "libelf1", "libtraceevent1", "libtracefs1", "libzydis4.0",
             "python3.11", "procps", "libc6-dbg"]
# What of the checkout the guest needs (the build is the host's: the root
# is the same Debian 12)
STAGE = ["uscope", "build/demo/server", "tests/targets", "tests/vm"]
BOOT_TIMEOUT = int(os.environ.get("USCOPE_VM_BOOT_TIMEOUT", "1200"))


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout.strip()


def kernel(suite):
    """The suite's kernel directory (vmlinuz, initrd.img, release)."""
    return Path(sh("bash", str(REPO / "scripts/kernels.sh"), suite))


def root_image():
    """The guest's root as an ext4 image, made once from the cached root."""
    root = Path(sh("bash", str(REPO / "scripts/roots.sh"), "bookworm", *ROOT_PKGS))
    img = CACHE / "vm" / f"root-{root.name}.ext4"
    if img.exists():
        return img
    img.parent.mkdir(parents=True, exist_ok=True)
    tmp = img.with_suffix(f".tmp{os.getpid()}")
    size = int(sh("du", "-sm", str(root)).split()[0]) + 1024
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "uscope-root", "-d", str(root), str(tmp),
                    f"{size}M"], check=True)
    os.replace(tmp, img)
    return img


def checkout_image(job, into):
    """The checkout's disk: the build, the test programs and the job."""
    stage = Path(into) / "stage"
    for p in STAGE:
        src = REPO / p
        if not src.exists():
            raise FileNotFoundError(f"{src}: build it first (make uscope targets; "
                                    "build/demo/server: make demo)")
        dst = stage / p
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True,
                            ignore=shutil.ignore_patterns("*.o", "__pycache__", "*.d"))
        else:
            shutil.copy2(src, dst)
    (stage / ".vm").mkdir()
    (stage / ".vm/job.sh").write_text(job)
    img = Path(into) / "src.ext4"
    size = int(sh("du", "-sm", str(stage)).split()[0]) + 256
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "uscope-src", "-d", str(stage), str(img),
                    f"{size}M"], check=True)
    shutil.rmtree(stage)
    return img


class Boot:
    """One guest's run: its console, the job's exit status, its kernel log."""

    def __init__(self, suite, console, seconds):
        self.suite, self.console, self.seconds = suite, console, seconds
        m = re.search(r"^@@vm-job-exit (\d+)", console, re.M)
        self.exit = int(m.group(1)) if m else None
        m = re.search(r"^@@vm-dmesg-begin\n(.*?)^@@vm-dmesg-end", console, re.M | re.S)
        self.dmesg = m.group(1) if m else None
        m = re.search(r"@@vm-begin (\S+)", console)
        self.release = m.group(1) if m else None
        out = console.split("@@vm-dmesg-begin")[0]
        self.job = out.split("@@vm-begin", 1)[1].split("\n", 1)[1] if "@@vm-begin" in out else ""

    def bad_kernel_lines(self):
        """WARNING, BUG and Oops lines of the guest's kernel log."""
        if self.dmesg is None:
            return ["(no kernel log: the guest did not finish)"]
        return [l for l in self.dmesg.splitlines()
                if re.search(r"\b(WARNING|BUG|Oops)\b", l)]


def boot(suite, job, cpus=1, mem="2G", timeout=BOOT_TIMEOUT, echo=False):
    """Boot SUITE's kernel with the root and the checkout, run job (a shell
    script) inside; the guest's Boot."""
    k = kernel(suite)
    root = root_image()
    with tempfile.TemporaryDirectory(prefix="uscope-vm-") as d:
        src = checkout_image(job, d)
        cmd = ["qemu-system-x86_64", "-accel", "tcg,thread=multi", "-cpu", "max",
               "-m", mem, "-smp", str(cpus), "-nographic", "-no-reboot", "-nodefaults",
               "-serial", "stdio", "-kernel", str(k / "vmlinuz"), "-initrd", str(k / "initrd.img"),
               "-append", "console=ttyS0 quiet panic=-1 uscope.init=/src/uscope/tests/vm/guest.sh",
               "-drive", f"file={root},format=raw,if=virtio,snapshot=on",
               "-drive", f"file={src},format=raw,if=virtio"]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        out = []
        try:
            deadline = t0 + timeout
            os.set_blocking(p.stdout.fileno(), False)
            while p.poll() is None and time.monotonic() < deadline:
                chunk = p.stdout.read()
                if chunk:
                    text = chunk.decode(errors="replace")
                    out.append(text)
                    if echo:
                        sys.stdout.write(text)
                        sys.stdout.flush()
                else:
                    time.sleep(0.2)
            rest = p.stdout.read()
            if rest:
                out.append(rest.decode(errors="replace"))
        finally:
            if p.poll() is None:
                p.kill()
                out.append(f"\n@@vm: killed after {timeout} s\n")
            p.wait()
        console = "".join(out).replace("\r\n", "\n")
        return Boot(suite, console, time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("suite", choices=SUITES)
    ap.add_argument("--checks", default="", help="arguments for tests/vm/checks.py")
    ap.add_argument("--cpus", type=int, default=1)
    ap.add_argument("--job", help="a shell script of the host's to run in the guest")
    ap.add_argument("cmd", nargs="*", help="a command to run in the guest instead of the checks")
    a = ap.parse_args()
    if a.job:
        job = Path(a.job).read_text()
    elif a.cmd:
        job = "set -x\n" + " ".join(shlex.quote(c) for c in a.cmd) + "\n"
    else:
        job = f"python3.11 tests/vm/checks.py {a.checks}\n"
    b = boot(a.suite, job, cpus=a.cpus, echo=True)
    print(f"\n@@vm: {b.suite} ({b.release}) in {b.seconds:.0f} s, job exit {b.exit}")
    for l in b.bad_kernel_lines():
        print(f"@@vm: kernel log: {l}")
    return 0 if b.exit == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
