/* What the running kernel's BPF can do, probed: never its version number
 * (distributions backport, and a release says nothing of its config). Each
 * feature is asked the kernel once a process, the first time it is wanted:
 * a map created, a one-instruction program loaded that calls the helper,
 * or a name looked up among the kernel's own BTF strings (a kfunc, a type).
 *
 * The bpf engine refuses in one line naming what is missing (engine/bpf),
 * and takes an older way where one exists; the inject engine's gate
 * preallocates its map where a run-time allocated one would warn. Needs
 * CAP_BPF (or root) for the probes that load; without it, they say no. */
#ifndef USC_ENGINE_KFEAT_H
#define USC_ENGINE_KFEAT_H

#include <stdbool.h>
#include <stddef.h>

struct kfeat {
	bool btf;		/* the kernel's own BTF (/sys/kernel/btf/vmlinux) */
	bool ringbuf;		/* BPF ring buffers (5.8) */
	bool task_storage;	/* task storage maps (5.11) */
	bool task_btf;		/* bpf_get_current_task_btf (5.11) */
	bool cookie;		/* bpf_get_attach_cookie in a uprobe program (5.15) */
	bool loop;		/* bpf_loop (5.17) */
	/* the BPF memory allocator (6.1): a map allocated at run time is safe
	 * in a tracing program. Without it a kernel warns at the load of a
	 * uprobe program that uses one (5.10: "trace type BPF program uses
	 * run-time allocation", a WARNING in the kernel's log), and refuses
	 * one in a sleepable program: such maps are preallocated. */
	bool mem_alloc;
	/* sleepable uprobe programs (6.0): they read memory not paged in yet
	 * (bpf_copy_from_user faults it in) */
	bool sleepable;
	/* the bpf_copy_from_user_str kfunc (6.12): strings read so in a
	 * sleepable uprobe program */
	bool copy_str;
};

/* The kernel's features (probed at the first call). */
const struct kfeat *kfeat_get(void);

/* What the bpf engine's program cannot do without, missing here: "" when
 * nothing is, else a list for a sentence ("task storage maps and the
 * bpf_loop helper") in buf. */
const char *kfeat_bpf_missing(const struct kfeat *k, char *buf, size_t len);

#endif
