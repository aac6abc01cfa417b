// SPDX-License-Identifier: GPL-2.0
/* The inject engine's gate (gate.c): one uprobe per probed file, for every
 * process, at the file's first point. A process not in procs yet is added
 * and uscope told (seen); one without a controlling terminal is stopped
 * first (SIGSTOP) for uscope to attach before its first probed call. One
 * with a terminal is not: a job-control shell would see its foreground job
 * stop and take the terminal back. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "engine/inject/gate_shared.h"

#define SIGSTOP 19

char LICENSE[] SEC("license") = "GPL";

/* Where the program reads a task's signal_struct and its controlling
 * terminal: set by uscope from the kernel's BTF before the load (gate_btf.c;
 * no CO-RE, whose parse of the whole BTF cost uscope's readiness) */
const volatile __u32 task_signal_off = 0;
const volatile __u32 signal_tty_off = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);	/* (its creation: 4 ms, not 20; preallocated
						 * where a kernel warns: gate.c) */
	__uint(max_entries, GATE_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u32);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, GATE_RING_SIZE);
} seen SEC(".maps");

/* processes let go untraced: uscope's ring or map was full */
__u64 missed = 0;
/* uscope takes no more (--max-procs): the new ones are told, not stopped */
__u32 full = 0;

SEC("uprobe")
int gate_hit(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	char *t = (char *)bpf_get_current_task();
	char *sig = NULL;
	void *tty = NULL;
	struct gate_seen *s;
	__u32 v;

	if (bpf_map_lookup_elem(&procs, &tgid))
		return 0;	/* known */
	bpf_probe_read_kernel(&sig, sizeof(sig), t + task_signal_off);
	if (sig)
		bpf_probe_read_kernel(&tty, sizeof(tty), sig + signal_tty_off);
	v = tty ? GATE_SEEN : full ? GATE_GO : GATE_STOPPED;
	if (bpf_map_update_elem(&procs, &tgid, &v, BPF_NOEXIST)) {
		if (!bpf_map_lookup_elem(&procs, &tgid))
			__sync_fetch_and_add(&missed, 1);	/* full */
		return 0;	/* (else another of its threads was first) */
	}
	s = bpf_ringbuf_reserve(&seen, sizeof(*s), 0);
	if (!s) {
		v = GATE_GO;	/* nobody would let it go */
		bpf_map_update_elem(&procs, &tgid, &v, BPF_ANY);
		__sync_fetch_and_add(&missed, 1);
		return 0;
	}
	s->tgid = tgid;
	s->stopped = 0;
	if (v == GATE_STOPPED && bpf_send_signal(SIGSTOP) == 0)
		s->stopped = 1;
	else if (v == GATE_STOPPED) {
		v = GATE_SEEN;
		bpf_map_update_elem(&procs, &tgid, &v, BPF_ANY);
	}
	bpf_ringbuf_submit(s, 0);
	return 0;
}
