#!/usr/bin/env bash
# Install what uscope needs to build and test, on Debian 12. Idempotent:
# installs nothing when everything is present. `deps.sh bench` also installs
# the tool make bench compares with (uftrace); make check does not need it.
# bpftrace is for both: the e2e tests check that it attaches to run-time
# USDT probes (tests/e2e/test_sdt.py); babeltrace2 reads the CTF that
# export writes (tests/e2e/test_record.py). groff-base and man-db lint and
# render the man pages (tests/e2e/test_man.py). gdb and libc6-dbg: the
# stack tests compare $ustack with gdb's bt, frame by frame, through libc
# (tests/e2e/test_stacks.py). node-jsdom runs the flame graph's own script
# (zoom, search) in a DOM (tests/e2e/test_flamegraph.py). redis-server,
# redis-tools (redis-cli, redis-benchmark), nginx-light and curl: real
# programs the e2e tests trace and compare with their own counters, on
# servers of their own on free ports (tests/e2e/test_real_*.py, with
# sqlite3, python3 and golang-go). prometheus: the e2e tests start their own
# to scrape --serve (tests/e2e/test_metrics.py); it is installed without its
# recommends, and a service the package started is stopped and disabled.
# zlib1g-dev: pprof profiles are gzipped.
# python3-jsonschema: the e2e tests check every --json line against doc/json/*.schema.json.
# strace: libc's syscall wrappers are counted against strace -f -c (tests/e2e/test_selfcopy.py).
# postgresql (with pgbench): -p of the postmaster follows its backends (tests/e2e/test_children.py,
# a cluster of the test's own on a free port); the cluster the package starts is stopped.
# libpython3.11-dev: a C program that embeds CPython is built against it (tests/e2e/test_python_versions.py).
# debootstrap: roots of other Debian suites (scripts/roots.sh), to run uscope in other userlands and
# Pythons in containers; qemu-system-x86: the kernel matrix boots Debian's kernels under TCG (tests/vm);
# cpio and kmod (depmod): scripts/kernels.sh makes each kernel's initramfs of its virtio and ext4 modules.
# cmake: make static builds the static Zydis Debian does not ship from Debian's source package
# (scripts/static-deps.sh; the other libraries' -dev packages ship their static archives).
set -euo pipefail
pkgs=(build-essential pkg-config clang libclang-rt-14-dev
      libelf-dev libdw-dev libtracefs-dev libtraceevent-dev libzydis-dev
      libcmocka-dev python3 python3-pytest systemtap-sdt-dev binutils file golang-go
      libbpf-dev bpftool debuginfod libdebuginfod1 libiberty-dev sqlite3 bpftrace
      babeltrace2 groff-base man-db gdb libc6-dbg node-jsdom
      redis-server redis-tools nginx-light curl zlib1g-dev strace python3-jsonschema
      postgresql libpython3.11-dev debootstrap qemu-system-x86 cmake cpio kmod)
[ "${1:-}" = bench ] && pkgs+=(uftrace)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${missing[@]}" >/dev/null
	if [[ " ${missing[*]} " == *" postgresql "* ]] && command -v systemctl >/dev/null; then
		systemctl disable --now postgresql >/dev/null 2>&1 || true
	fi
fi
# Prometheus: the binary only; the tests run their own on a free port.
if ! dpkg-query -W -f='${Status}' prometheus 2>/dev/null | grep -q 'install ok installed'; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing prometheus; run as root or: sudo apt-get install --no-install-recommends prometheus" >&2
		exit 1
	fi
	echo "deps: installing prometheus"
	export DEBIAN_FRONTEND=noninteractive
	[ ${#missing[@]} -gt 0 ] || apt-get update -qq
	apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
		systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi
fi
# The kernel engine needs tracefs mounted.
if [ "$(id -u)" = 0 ] && [ ! -e /sys/kernel/tracing/uprobe_events ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
