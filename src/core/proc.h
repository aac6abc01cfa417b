/* /proc/PID/status, read in one place: the fields uscope asks of a task.
 * Tracers, engines and the session each needed a line or two of it (its
 * thread group, parent, tracer, namespace ids, seccomp mode, shadow stack,
 * capabilities, user and group); they all read it through proc_status_read. */
#ifndef USC_CORE_PROC_H
#define USC_CORE_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_status {
	char name[64];		/* Name: (the kernel's comm, up to 15 bytes) */
	pid_t tgid, ppid;	/* Tgid:, PPid: (0 when absent) */
	pid_t tracer;		/* TracerPid: */
	/* NStgid:, NSpid: their last fields (the ids in the task's own pid
	 * namespace); ns_nested: they have more than one field (the task is
	 * in a namespace below ours); ns_known: the kernel prints NSpid */
	pid_t ns_tgid, ns_tid;
	bool ns_nested, ns_known;
	int seccomp;		/* Seccomp: mode (0: none) */
	bool shstk;		/* x86_Thread_features: has shstk */
	unsigned long long cap_eff;	/* CapEff: */
	uint32_t uid, gid;	/* Uid:, Gid: their first fields (the real ids) */
};

/* Task pid's status (pid 0: ours). 0, -ESRCH (no such task), -errno. Not
 * logged. */
int proc_status_read(pid_t pid, struct proc_status *st);

/* Task pid's auxiliary vector (/proc/PID/auxv): vals[i] the value of its
 * entry of type types[i] (AT_*), 0 when it has none, for i < n. How many
 * of its entries were of those types, or -errno (vals untouched). Not
 * logged. */
int proc_auxv_read(pid_t pid, const uint64_t *types, uint64_t *vals, size_t n);

/* Process pid's main-thread stack: *top, its start (/proc/PID/stat's
 * startstack: the arguments and environment are above it), and *size, its
 * RLIMIT_STACK (soft; 8 MiB when unlimited or not readable: the stack may
 * grow that far at least). 0, or -errno. Not logged. */
int proc_main_stack(pid_t pid, uint64_t *top, uint64_t *size);

/* The processes descending from root now (its children, theirs, ...: by
 * their PPid), root not among them. Left out, with what descends from
 * them: kernel threads, and uscope's own processes (this one, and any that
 * runs uscope's executable: its janitor, another uscope). *out: malloc'd
 * (free it), NULL when none. How many, or -errno. Not logged. */
long proc_descendants(pid_t root, pid_t **out);

/* fn(pid, ctx) on each descendant of root (proc_descendants) once, pass
 * after pass until a pass finds none new: what a descendant forks before
 * fn took it is found by the next pass; what it forks after, the caller
 * follows (armed before the first pass). fn returns 0, or -errno to stop
 * (returned). */
int proc_descendants_each(pid_t root, int (*fn)(pid_t pid, void *ctx), void *ctx);

#endif
