#!/bin/bash
# The kernel matrix's guest init (PID 1, run by tests/vm/rdinit.c from the
# checkout's disk, mounted at /src/uscope): mounts what uscope needs, runs
# the job the driver put beside the checkout (/src/uscope/.vm/job.sh: the
# checks, or a command given by hand), prints the kernel's log between
# markers and powers the guest off. Everything goes to the console
# (ttyS0), which the driver (tests/vm/vm.py) reads.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tracefs nodev /sys/kernel/tracing
mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
hostname uscope-vm
ip link set lo up 2>/dev/null
echo 1 >/proc/sys/kernel/sysrq
echo "@@vm-begin $(uname -r) $(nproc) cpus"
cd /src/uscope
# the job bounded: one that does not end says what every process was doing
timeout -k 5 "${USCOPE_VM_JOB_TIMEOUT:-900}" bash .vm/job.sh 2>&1
rc=$?
if [ $rc = 124 ] || [ $rc = 137 ]; then
	echo "@@vm: the job did not end; the processes:"
	ps -eo pid,ppid,stat,wchan:32,args 2>/dev/null | grep -v ' \['
	for s in /proc/[0-9]*/stack; do
		[ -s "$s" ] && { echo "-- $s"; cat "$s"; }
	done 2>/dev/null
fi
echo "@@vm-job-exit $rc"
echo "@@vm-dmesg-begin"
dmesg
echo "@@vm-dmesg-end"
echo "@@vm-end"
sync
echo o >/proc/sysrq-trigger
sleep 10
