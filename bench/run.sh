#!/usr/bin/env bash
# make bench: per-hit cost of the tracefs engine, side by side in one run with
# the unprobed call and a raw uprobe written by hand to uprobe_events, on the
# same function; then the highest event rate the consumer keeps up with.
# Timings on a VM are noisy: read the ratios, not the absolute numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bench
mkdir -p $B
cc -O2 -g -pthread -o $B/target bench/target.c
T=$(realpath $B/target)
US=./uscope
TFS=/sys/kernel/tracing
N_FREE=${N_FREE:-5000000}
N_PROBED=${N_PROBED:-200000}

if [ "$(id -u)" != 0 ]; then echo "bench: the kernel engine needs root" >&2; exit 1; fi
[ -e $TFS/uprobe_events ] || mount -t tracefs nodev $TFS

ns_of() { sed -n 's/.*ns_per_call \([0-9.]*\).*/\1/p'; }
rate_of() { sed -n 's/.*rate \([0-9]*\).*/\1/p'; }

off=$(python3 - "$T" <<'PY'
import subprocess, sys
# file offset of bench_fn through its PT_LOAD segment, as uscope computes it
out = subprocess.check_output(['readelf', '-sW', sys.argv[1]]).decode()
vaddr = next(int(l.split()[1], 16) for l in out.splitlines() if l.split()[-1:] == ['bench_fn'])
for l in subprocess.check_output(['readelf', '-lW', sys.argv[1]]).decode().splitlines():
    f = l.split()
    if f and f[0] == 'LOAD':
        o, va, fs = int(f[1], 16), int(f[2], 16), int(f[4], 16)
        if va <= vaddr < va + fs:
            print(hex(vaddr - va + o)); break
PY
)

echo "== per-hit cost, entry probe on bench_fn recording 2 integer arguments"
free=$($T $N_FREE | ns_of)
ours=$($US trace -q -o /dev/null 'bench_fn a=%di:s64 b=%si:s64' -- $T $N_PROBED | ns_of)
bpf=$($US trace -q -e bpf -o /dev/null 'bench_fn a=%di:s64 b=%si:s64' -- $T $N_PROBED | ns_of)

# The same probe by hand, in an instance of its own, nobody reading.
raw_inst=$TFS/instances/uscope_bench_raw_$$
cleanup() {
	[ -d $raw_inst ] && { echo 0 > $raw_inst/events/uscope_bench_raw/enable 2>/dev/null || true; rmdir $raw_inst; }
	grep -q uscope_bench_raw $TFS/uprobe_events && echo "-:uscope_bench_raw/raw" >> $TFS/uprobe_events
	return 0
}
trap cleanup EXIT
echo "p:uscope_bench_raw/raw $T:$off a=%di:s64 b=%si:s64" >> $TFS/uprobe_events
mkdir $raw_inst
echo 1 > $raw_inst/events/uscope_bench_raw/raw/enable
raw=$($T $N_PROBED | ns_of)
cleanup; trap - EXIT

python3 - "$free" "$ours" "$raw" "$bpf" <<'PY'
import sys
free, ours, raw, bpf = map(float, sys.argv[1:])
print(f"  unprobed call           {free:10.1f} ns/call")
print(f"  raw uprobe_events probe {raw:10.1f} ns/call  (+{raw-free:.0f} ns/hit, {raw/free:.0f}x the call)")
print(f"  uscope -e tracefs       {ours:10.1f} ns/call  (+{ours-free:.0f} ns/hit, {ours/free:.0f}x the call)")
print(f"  uscope -e bpf           {bpf:10.1f} ns/call  (+{bpf-free:.0f} ns/hit, {bpf/free:.0f}x the call)")
print(f"  uscope / raw probe      {(ours-free)/(raw-free):10.2f}x per hit (tracefs), {(bpf-free)/(raw-free):.2f}x (bpf)")
PY

echo "== return probe on bench_fn with its return value"
rsite=$($US trace -q -o /dev/null 'r:bench_fn ret=$retval:s64' -- $T $N_PROBED | ns_of)
uret=$($US trace -q -o /dev/null --uretprobe 'r:bench_fn ret=$retval:s64' -- $T $N_PROBED | ns_of)
python3 - "$free" "$rsite" "$uret" <<'PY'
import sys
free, rsite, uret = map(float, sys.argv[1:])
print(f"  uscope r: on the ret instruction   {rsite:10.1f} ns/call  (+{rsite-free:.0f} ns/hit)")
print(f"  uscope --uretprobe (kernel swap)   {uret:10.1f} ns/call  (+{uret-free:.0f} ns/hit)")
print(f"  return site / uretprobe            {(rsite-free)/(uret-free):10.2f}x per hit")
PY

echo "== highest event rate kept without loss (2 threads)"
best=""
for r in 0 400000 200000 100000 50000 25000; do
	out=$($US trace -o /dev/null 'bench_fn a=%di:s64 b=%si:s64' -- $T 100000 2 $r 2>$B/summary)
	lost=$(sed -n 's/^uscope: \([0-9]*\) events, \([0-9]*\) lost.*/\2/p' $B/summary)
	events=$(sed -n 's/^uscope: \([0-9]*\) events.*/\1/p' $B/summary)
	rate=$(echo "$out" | rate_of)
	label=$([ "$r" = 0 ] && echo "unpaced" || echo "paced $((r*2))/s")
	echo "  $label: $rate events/s offered, $events recorded, $lost lost"
	if [ "$lost" = 0 ]; then best=$rate; break; fi
done
[ -n "$best" ] && echo "  sustained without loss: $best events/s" || echo "  losses at every rate tried"
