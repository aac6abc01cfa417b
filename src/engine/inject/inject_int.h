/* Internal to the inject engine: its state, shared by
 *   inject.c  the ops: the engine's lifecycle
 *   plan.c    each site's patch, planned once from the file; patches merged
 *   image.c   one address space: shared memory, agent, trampolines, jumps,
 *             and their removal
 *   area.c    memory for trampolines within reach of a module
 *   follow.c  COMMAND's tree under ptrace: forks, execs, signals
 *   rings.c   draining the rings into events; counts
 *   agg.c     aggregation where the probe runs: its memory, its sites, its
 *             rows read back
 *   undo.c    our life as the agent sees it; the undo table; a dead
 *             session's leftovers
 *   doorbell.c  the producers waking us
 * and the lower layers: remote.c (ptrace), tramp.c (the trampolines' code),
 * agent/ (the code that runs in the process). */
#ifndef USC_ENGINE_INJECT_INJECT_INT_H
#define USC_ENGINE_INJECT_INJECT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "objfile/modules.h"
#include "engine/engine.h"
#include "core/tsc.h"
#include "engine/inject/inject_shared.h"
#include "engine/inject/remote.h"
#include "x86/plan.h"

#define INJ_MAX_SITES 65536
#define INJ_NSLOTS 256		/* threads with a ring, per image */
#define INJ_RING_SIZE (4u << 20)	/* per thread: 65k records of 2 integers */
#define INJ_CPU_BUCKETS 64
#define GLIBC_TID_OFF 0x2d0	/* offsetof(struct pthread, tid), glibc 2.3x x86-64 */

extern const unsigned char inject_agent_blob[], inject_agent_blob_end[];

/* A patch placed after the site's own instruction (plan.c, plan_pre):
 * another tool's kernel uprobe on the site (bpftrace, perf) runs that
 * instruction out of line and goes on after it, onto our jump, not into its
 * middle. A push or a sub from rsp at a function's entry is undone by the
 * trampoline before the probes (they see rsp as it was) and done again
 * after them; any other instruction ran in place and changed nothing the
 * probes read: run again after them when it sets flags and that is the same
 * as running it once (redo), else the probes keep the flags (keep_flags). */
struct inj_pre {
	uint8_t len;		/* the instruction's bytes (0: none) */
	uint8_t code[15];
	uint8_t undo_len;
	uint8_t undo[8];	/* lea N(%rsp),%rsp */
	bool redo;		/* run again (relocated) after the probes */
	bool keep_flags;	/* the probes save and restore the flags */
};

#define INJ_PAD_MAX 14	/* a pad: jmp rel32, or jmp *0(%rip) and the address */

/* One patch: a jump at addr over len displaced bytes, to a trampoline that
 * runs the probes of one or more sites (several probes at one address). */
struct inj_patch {
	uint64_t addr;		/* runtime */
	struct x86_patch plan;	/* link-time addresses */
	uint64_t bias;		/* runtime - link-time */
	uint8_t orig[32];
	uint64_t spring;	/* runtime: a springboard's jmp rel32 (dead filler), or 0 */
	uint8_t orig_spring[5];
	uint8_t written[5];	/* the jump written at addr, checked before restoring */
	uint8_t written_spring[5];
	uint8_t nwritten;
	size_t *sites;		/* the engine's site indexes, by probe offset */
	uint32_t *probe_off;	/* per site: where in the displaced bytes it fires */
	/* the trampoline's layout: where each site's probe code starts, and
	 * the relocated piece of the displaced bytes before it (the last: after
	 * the last probe), [nsites + 1]; a thread stopped inside the displaced
	 * bytes goes on at its instruction's copy */
	uint64_t *probe_at, *piece_at;
	struct inj_pre pre;	/* the entry's instruction before addr, or none */
	uint64_t pad;		/* where the jump lands, a pad to tramp (pad.c), or 0 */
	uint8_t npad;
	uint8_t pad_code[INJ_PAD_MAX];
	bool foreign;		/* another tool's uprobe came over it somewhere: said */
	size_t nsites;
	uint64_t tramp;
	bool applied;
	int area;
};

/* A probe's code in a trampoline (tramp_encode_probe): what reads and
 * writes the shared memory and calls the agent. */
struct inj_chunk {
	uint64_t at;
	uint32_t len;
};

/* Trampolines near one module. */
struct inj_area {
	const char *path;
	uint64_t lo, hi;	/* the module's mappings */
	uint64_t base, size, used;
};

/* The memory the tracer and one image share (a memfd): control block,
 * slots, counters, site programs and rings (inject_shared.h). */
struct inj_shm {
	void *map;
	size_t size;
	struct inj_ctl *ctl;
	uint64_t remote;		/* its address in the process */
	uint64_t cpu_counts_off;
	uint32_t cpu_stride;
	uint64_t agent_remote;		/* the agent's code */
	uint64_t self_remote;		/* the MADV_WIPEONFORK page: the self word */
	uint64_t *folded;		/* [nsites][INJ_NCOUNTS]: counts of reclaimed slots */
	uint64_t dropped;		/* tail calls never returned, of reclaimed slots */
	dev_t memfd_dev;		/* the memfd's: what a process that maps it maps */
	ino_t memfd_ino;
	void *owner_map;		/* the owner page (undo.c), or NULL */
	uint64_t owner_remote;		/* ... in the process (read-only there) */
	bool held;			/* we hold its mutex */
};

/* The patched code of one address space: a process's image after it was
 * attached to or exec'd, shared with the children it forks (they run a
 * copy of it, patches and all, and write to the same memory). */
struct inj_image {
	int refs;			/* processes running it */
	pid_t pid;			/* the process it was made in */
	struct inj_shm shm;
	struct inj_patch *patches;
	size_t npatches;
	struct inj_area *areas;
	size_t nareas;
	uint64_t *pad_pages;		/* pad.c: the pages mapped for pads */
	size_t npad_pages;
	uint64_t *semaphores;		/* runtime addresses of USDT semaphores raised */
	size_t nsemaphores;
	uint64_t next_reclaim;		/* ns */
	bool recorded;			/* described in the recording (REC_IMAGE) */
	/* $ustack walked (ustack.c): each process entry's maps as built */
	struct {
		uint64_t gen;		/* the cache's maps_gen of it */
		uint64_t refreshed;	/* ns, when its maps were last read from /proc */
		pid_t pid;		/* its host pid (tgids[] has the agent's: its
					 * getpid, another in a container) */
	} stk_procs[INJ_STK_PROCS];
	uint32_t stk_full;		/* no room for a table or a process: said once */
	uint32_t py_seen;		/* bytes of the agent's Python names read */
	uint32_t py_mon_said;		/* sys.monitoring's state last told (enum inj_py_mon) */
	bool py_eval_said;		/* why the frame evaluator gave way: told */
	uint64_t *dumped;		/* the flight recorder: per slot, the ring
					 * position written up to (INJ_NSLOTS) */
	struct inj_chunk *chunks;	/* every probe's code in the trampolines */
	size_t nchunks;
	uint32_t kids_seen;		/* forks.c: the children listed, taken up */
	int undo_memfd;			/* the janitor's handle of its memfd (forks.c) */
};

enum inj_proc_state {
	PROC_HELD,		/* COMMAND before its first exec */
	PROC_EXEC,		/* exec'd: to its execve's return (PTRACE_SYSCALL) */
	PROC_ENTRY,		/* its dynamic linker runs, to our stub (follow.c) */
	PROC_RUN,
};

/* A process the engine follows (COMMAND's tree) or attached to (-p). */
struct inj_proc {
	pid_t pid;
	enum inj_proc_state state;
	struct inj_image *img;		/* NULL: not patched */
	uint64_t entry;			/* PROC_ENTRY: the program's entry point */
	uint64_t stub;			/* ... the stub the linker jumps to instead */
	uint64_t auxv_at;		/* ... where AT_ENTRY is on its stack */
	int undo;			/* the janitor's handle (inj_undo_tell), or <= 0 */
};

/* A forked child in a PID namespace below ours (a container): the id it
 * records under (its own getpid) and the host's (follow.c). */
struct inj_kid {
	const struct inj_image *img;	/* the image it forked with */
	pid_t pid, ns_pid;
};

/* A task of COMMAND's tree, held by ptrace (follow.c). */
struct inj_task {
	pid_t tid;
	bool stopped;			/* in a ptrace stop we have not resumed */
	bool exiting;			/* ... a process's leader at its exit (hold_exit) */
	unsigned nheld;
	siginfo_t held[REMOTE_MAX_HELD];	/* signals to give back at detach */
};


struct inj_comm {
	pid_t tid;
	const struct inj_image *img;	/* the name of the thread in that image (the
					 * process exec'd since), or NULL: now */
	char comm[17];
};

/* The geometry of the aggregation's memory (inject_shared.h); kind 0: no
 * site aggregates. */
struct inj_agg_geom {
	uint32_t kind;			/* enum usc_agg_kind */
	uint32_t max_rows, nslots, dir_size, val_size, nbuckets;
};

/* $ustack walked where the probe runs: whether any site does, and the
 * geometry of the counted stacks' table (nents 0: none is counted). */
struct inj_stk_geom {
	bool on;
	uint32_t frames;		/* the most a site walks */
	uint32_t nents, ent_size;
};

struct inj {
	struct usc_engine base;
	bool follow;			/* COMMAND: its tree, held by ptrace */
	/* -p and system-wide (not --no-children): the processes it forks are
	 * followed, with no ptrace: they take themselves up (forks.c) */
	bool children;
	pid_t pid;			/* the traced process (the first, for COMMAND) */
	struct x86_patch *plans;	/* per site of the session, from can_place */
	struct inj_pre *pre;		/* ... the entry's first instruction left before it */
	struct proc_map *plan_maps;	/* -p: the process's maps, read once to plan */
	size_t plan_nmaps;
	bool plan_nomaps;
	struct inj_proc *procs;
	size_t nprocs;
	size_t attaching;		/* attaches under way (fibers): room kept in procs */
	struct inj_image **images;	/* every image made, live or not: drained */
	size_t nimages;
	struct inj_task *tasks;
	size_t ntasks;
	struct inj_kid *kids;
	size_t nkids;
	bool live;			/* records are being made */
	struct tsc_clock *clock;	/* tsc -> CLOCK_MONOTONIC */
	struct inj_comm *comms;
	size_t ncomms;
	struct usc_site_stats *stats;
	uint64_t dropped;
	struct usc_value vals[INJ_MAX_ARGS];
	struct inj_agg_geom agg;
	struct inj_stk_geom stk;
	uint64_t tsc_mult;		/* latency: the agent's tsc multiplier */
	uint64_t clock_tsc;		/* recording: the last clock sample written */
	uint64_t clock_sent;		/* ... and how many */
	char *shadow;			/* the flight recorder: a ring's copy (INJ_RING_SIZE) */
	struct inj_bell *bell;		/* the doorbells' thread (doorbell.c), or NULL */
	/* COMMAND's processes stop at their exit until their rings are drained:
	 * what the records name in their memory (Python code objects) is read
	 * while it is still there */
	bool hold_exit;
	size_t sys_procs;		/* system-wide: the processes patched at start */
	size_t sys_late;		/* ... and the ones started later (the gate) */
	size_t sys_late_tty;		/* ... of them, attached late (a terminal's) */
	bool drop_stop;			/* attaching one the gate stopped: its SIGSTOP
					 * still pending is not given back */
	struct inj_gate *gate;		/* system-wide: the gate (gate.c), or NULL */
	uint64_t watch_next;		/* foreign.c: when the patches are read next (ns) */
	bool *exposed;			/* pad.c: per site, said exposed to another
					 * tool's uprobe (no pad) */
	size_t nexposed;		/* ... how many */
	size_t sweep_at;		/* forks.c: the next entry looked at for an end */
	struct sys_late *late;		/* ... what was left out of them (system.c) */
};

static inline struct inj *inj_of(struct usc_engine *e)
{
	return container_of(e, struct inj, base);
}

uint64_t inj_mono_ns(void);

/* plan.c */
/* Plan the site's patch (j->plans, by session site index). 0, or -ENOTSUP
 * with the reason in why. */
int inj_plan_site(struct inj *j, const struct usc_site *site, char *why, size_t len);
/* The patches of image img from the sites whose modules are mapped (maps),
 * at their runtime addresses; sites at one address, or overlapping, share a
 * patch. 0, -errno (reported). */
int inj_patches(struct inj *j, struct inj_image *img, const struct proc_map *maps,
		size_t nmaps);
/* Why a running process cannot be patched at all (seccomp, a shadow
 * stack): 0, or -ENOTSUP with the reason. */
int inj_proc_refusal(pid_t pid, char *why, size_t len);

/* image.c */
/* With every thread of the process in rem stopped: patch it. 0 or -errno
 * (reported); on failure nothing stays applied. */
int inj_install(struct inj *j, struct inj_image *img, struct remote *rem);
/* With every thread of the process in rem stopped: write back every
 * original byte where our jump still is (after an exec, or the pid's reuse,
 * the addresses belong to another image, left alone), lower the semaphores.
 * The image's state stays for the other processes that share it: retire it
 * once every one is restored or gone. True when the process ran the image
 * and every jump of it is out. */
bool inj_restore(struct inj *j, struct inj_image *img, struct remote *rem);
void inj_image_retire(struct inj_image *img);
struct inj_image *inj_image_new(struct inj *j, pid_t pid);
void inj_image_put(struct inj *j, struct inj_image *img);
void inj_image_free(struct inj_image *img);
bool inj_image_applied(const struct inj_image *img);

/* undo.c */
/* The new region's owner page, shared with the process (read-only there,
 * at m->owner_remote), its mutex held: the agent lets go when we die.
 * scratch: 64 bytes of the process's memory for names. 0 or -errno
 * (reported). */
int inj_owner_hold(struct inj_shm *m, struct remote *rem, uint64_t scratch);
/* Let it go, as the agent sees our end (before the region is unmapped). */
void inj_owner_release(struct inj_shm *m);
/* The undo table of the image's patches, their jumps planned. */
void inj_undo_fill(struct inj_image *img, const struct proc_map *maps, size_t nmaps);
/* The janitor is told of process pid before its text is patched
 * (engine.h, USC_UNDO_INJECT): its handle, or <= 0. */
int inj_undo_tell(struct inj *j, pid_t pid);
/* ... and forgets it: restored, or gone (*undo then 0). */
void inj_undo_forget(struct inj *j, int *undo);
/* With every thread of the process in rem stopped: take out what a uscope
 * that died in it left. 0; -EINPROGRESS: its agent is letting go, let the
 * threads run and try again; -EBUSY: a live uscope traces it (reported). */
int inj_undo_dead(struct remote *rem, const struct proc_map *maps, size_t nmaps);

/* forks.c: forked children with no ptrace (-p, system-wide) */
/* The children listed since the last call taken up (janitor entries, names,
 * mappings). */
void inj_forks_poll(struct inj *j);
/* The name a child of img's process told when it took itself up (pid: its
 * own getpid), or NULL: a child gone before uscope took it up. */
const char *inj_forks_comm(struct inj *j, const struct inj_image *img, pid_t pid);
/* At the end: every process that maps a patched image's memfd taken up too
 * (children that never hit a probe), for the detach to restore. */
void inj_forks_find(struct inj *j);
/* fn(pid, ctx) for every process that maps the memfd (dev, ino), this one
 * aside, until fn returns non-zero (returned). */
int inj_memfd_each(uint64_t dev, uint64_t ino, int (*fn)(pid_t pid, void *ctx), void *ctx);
/* Does process pid map the memfd (dev, ino)? */
bool inj_maps_memfd(pid_t pid, uint64_t dev, uint64_t ino);
/* The janitor told of img's memfd (every process that maps it, after a
 * death): its handle, or <= 0. */
int inj_undo_tell_memfd(struct inj *j, struct inj_image *img);

/* foreign.c: another tool's kernel uprobe over our patches */
/* n bytes now against want: 0 the same, 1 the same but for int3s (another
 * uprobe's breakpoints), -1 otherwise. */
int inj_bytes_over(const uint8_t *now, const uint8_t *want, size_t n);
/* Every patch of every process read (at most a few times a second): one
 * another uprobe came over taken out around its int3, said once. */
void inj_watch(struct inj *j);
/* A patch left alone at attach in process pid (another uprobe was on it). */
void inj_foreign_said(struct inj *j, const struct inj_patch *pa, pid_t pid);

/* unmap.c */
/* After inj_restore, with every thread of the process in rem stopped: the
 * image's shared memory, agent and pages unmapped from the process, once
 * no thread can be inside the agent or a probe's code; its trampolines
 * stay, their probes made pass-throughs. 0; -EBUSY: a thread is inside
 * (let the threads run and try again); -EEXIST: py: probes' profile
 * function may be left in a thread, everything stays; -errno. */
int inj_unmap(struct inj_image *img, struct remote *rem);
/* Detach from process pid (-p), which runs img: every thread stopped, the
 * jumps out, then the rest unmapped (inj_unmap, tried again a few times
 * while a thread is inside), the threads let go. */
void inj_leave(struct inj *j, struct inj_image *img, pid_t pid);

/* area.c */
/* Map every area the image's patches need, in free ranges within rel32
 * reach of their modules. 0 or -ENOMEM (reported). */
int inj_areas(struct inj *j, struct inj_image *img, struct remote *rem,
	      const struct proc_map *maps, size_t nmaps);

/* pad.c */
/* After the trampolines are written: a pad for each patch that starts at a
 * probe's instruction and could not go after it, where its jump's bytes
 * after the instruction are the file's (another tool's uprobe there runs
 * the file's instruction and goes on into the file's code). The ones with
 * none said, once a site. 0 or -ENOMEM. */
int inj_pads(struct inj *j, struct inj_image *img, struct remote *rem);

/* inject.c: attach to running process pid (stopped, patched, let go): 0 or
 * -errno (reported, but -ESRCH) */
int inj_proc_attach(struct inj *j, pid_t pid);

/* system.c: system-wide, every running process that maps a probed file
 * and may be ptraced, up to --max-procs; the others said once. 0 or -errno
 * (reported) */
int inj_system_start(struct inj *j);
/* -p: every process descending from root now that maps a probed file,
 * attached as root is (root attached and held first). 0 or -errno
 * (reported); one left out is said, with why. */
int inj_system_descendants(struct inj *j, pid_t root);

/* system.c: a process the gate told of (started after attach; stopped by
 * it, or with a terminal): attached, or refused and let go; either way it
 * runs on. pid 0: none, the gate's pids of gone processes forgotten */
void inj_system_seen(struct inj *j, pid_t pid, bool stopped);
/* the processes started after attach that were left out, said once */
void inj_system_end(struct inj *j);

/* gate.c: system-wide, the processes that start mapping a probed file after
 * attach stopped at its first point until uscope lets them go */
/* On the sites' files. 0 (a file without a gate is said), -ENOMEM */
int inj_gate_open(struct inj *j);
/* The processes seen since the last call (at most max). */
struct gate_seen;
size_t inj_gate_poll(struct inj *j, struct gate_seen *out, size_t max);
/* Process pid goes on; or is forgotten (gone: its pid may come again). */
void inj_gate_go(struct inj *j, pid_t pid);
void inj_gate_forget(struct inj *j, pid_t pid);
/* --max-procs reached: the processes started from now on are told, not
 * stopped */
void inj_gate_full(struct inj *j);
/* An fd readable when the gate has told of a process or bell is readable
 * (an epoll set of both), or bell. */
int inj_gate_wait_fd(struct inj *j, int bell);
/* Every held process let go, the program and its links gone. */
void inj_gate_close(struct inj *j);
/* gate_btf.c: the offsets of task_struct's signal and signal_struct's tty,
 * from the kernel's BTF. 0, -ENOENT, -ENOMEM or an -errno of its file */
int inj_gate_btf_offsets(uint32_t *signal_off, uint32_t *tty_off);
/* The same from a BTF image in memory (len bytes): 0 or -ENOENT, -ENOMEM */
int inj_gate_btf_scan(const void *data, size_t len, uint32_t *signal_off, uint32_t *tty_off);

/* follow.c */
int inj_follow_spawned(struct inj *j, pid_t pid);
int inj_follow_launched(struct inj *j, pid_t pid);
void inj_follow_waited(struct inj *j, pid_t pid, int status);
/* The processes held at their exit go on (their rings were drained). */
void inj_follow_exits(struct inj *j);
/* Stop the whole tree, restore every image, let every task go. */
void inj_follow_detach(struct inj *j);
/* The ids a record of img's carries (pid: its process's own getpid, tid:
 * its gettid) as the host's: a container's process, or a child it forked
 * (0: gone). */
void inj_host_ids(struct inj *j, const struct inj_image *img, int32_t *pid, int32_t *tid);

/* rings.c */
int inj_poll_images(struct inj *j, usc_event_fn fn, void *ctx);
void inj_calibrate(struct inj *j);
int inj_stats_images(struct inj *j, struct usc_stats *st);
/* Recording: every ring's records to w as they are (and what the reader
 * needs to read them: images, threads, clock). The count of pieces
 * written, or -errno. */
int inj_record_images(struct inj *j, const struct usc_raw_out *out);
/* Lossless no more: every thread waiting for room wakes (and drops). */
void inj_wake_all(struct inj *j);
/* The name of task tid of process pid, asked once (then remembered, as it
 * goes when the task does); forget it when the task execs. */
const char *inj_comm(struct inj *j, const struct inj_image *img, pid_t pid, pid_t tid);
/* tid exec'd out of img: its name so far stays for img's records (img
 * NULL: forgotten); a lookup without an image reads the new one. */
void inj_comm_retire(struct inj *j, pid_t tid, const struct inj_image *img);

/* doorbell.c */
/* The fd the session sleeps on (usc_engine_ops.wait_fd), the thread that
 * makes it readable started on the first call; -1 without one. */
int inj_bell_fd(struct inj *j);
/* A drain begins: the fd read, the producers told we are awake. */
void inj_bell_begin(struct inj *j);
/* A drain ends: the producers told we may sleep; the fd made readable at
 * once when a ring is past its watermark already. */
void inj_bell_end(struct inj *j);
/* The thread ended, the fd closed (before the images are unmapped). */
void inj_bell_stop(struct inj *j);

/* agg.c */
bool inj_filters(struct usc_engine *e, const struct usc_site *site);
int inj_agg_place(struct usc_engine *e, const struct usc_site *site);
int inj_agg_read(struct usc_engine *e, usc_agg_fn fn, void *ctx);
/* At attach: the geometry, from the sites that aggregate. */
void inj_agg_geometry(struct inj *j);
/* The aggregation's memory after off in the shared layout (offsets into
 * c); the new end. */
uint64_t inj_agg_reserve(struct inj *j, uint64_t off, struct inj_ctl *c);
void inj_agg_ctl(struct inj *j, struct inj_ctl *c);
/* What the agent is told of a site: its filter, its role and key, and for
 * agent_fast its addresses in the process (the image's control block c,
 * mapped there at remote). */
void inj_agg_site(struct inj *j, const struct usc_site *site, struct inj_site *d,
		  const struct inj_ctl *c, uint64_t remote);
/* Whether agent_fast writes the site's records (inj_site.rec_fast), and its
 * addresses for it; after inj_agg_site and inj_obj_site. */
void inj_rec_fast_site(struct inj *j, struct inj_site *d, const struct inj_ctl *c, uint64_t remote);
/* A reclaimed slot: its calls are over. */
void inj_agg_reclaim(struct inj_shm *m, uint32_t slot);

/* ustack.c: $ustack walked where the probe runs */
/* At attach (after inj_agg_geometry): whether sites walk, and the table of
 * counted stacks. */
void inj_stk_geometry(struct inj *j);
/* Its memory after off in the shared layout, described in k (the header
 * the region gets at k->ro_off); the new end. */
uint64_t inj_stk_reserve(struct inj *j, uint64_t off, struct inj_stk *k);
/* With every thread of the process stopped, the region made: the tables
 * and the process's mappings, the tracer's part read-only there. */
int inj_stk_install(struct inj *j, struct inj_image *img, struct remote *rem);
/* A process forked from the image's: its mappings. */
void inj_stk_fork(struct inj *j, struct inj_image *img, pid_t pid);
/* Before a drain: mappings that changed, published (new tables first). */
void inj_stk_sync(struct inj *j);
/* An event of the image: a walk that fell back for want of its process or
 * its module has them looked for. */
void inj_stk_event(struct inj *j, struct inj_image *img, const struct usc_event *ev);
/* A key of a site that counts stacks (keylen bytes, the image's): its
 * stacks' ids made the session's (stack_intern), a stack that cannot be
 * read a fault. */
void inj_stk_key(struct inj *j, const struct inj_image *img, const struct usc_site *site,
		 uint8_t *key, uint32_t keylen);

/* script.c: uscope script, the program run by the agent where the probe
 * fires (agent/script.c) */
int inj_script_place(struct usc_engine *e, const struct usc_site *site);
/* Room for the program, its maps and the slots' machines after off in the
 * shared layout (*script_off: where, or 0: no site runs it); the new end. */
uint64_t inj_script_reserve(struct inj *j, uint64_t off, uint64_t *script_off);
/* The program and its tables into the new region m (ctl->script_off set). */
void inj_script_ctl(struct inj *j, struct inj_shm *m, uint64_t script_off);
/* What the agent is told of a site: its probe, its index in the session;
 * after inj_rec_fast_site. */
void inj_script_site(struct inj *j, const struct usc_site *site, struct inj_site *d,
		     const struct inj_ctl *c, uint64_t remote);
int inj_script_rows(struct usc_engine *e, int m,
		    void (*fn)(void *arg, int m, const uint8_t *key, const uint8_t *val), void *arg);
void inj_script_clear(struct usc_engine *e, int m, bool zero);
void inj_script_errors(struct usc_engine *e, uint64_t *errs, uint64_t *full);

/* objset.c: uscope objtrace's followed set */
/* Room for the set after off in the shared layout (*obj_off: where, or 0
 * when no site follows objects); the new end. */
uint64_t inj_obj_reserve(struct inj *j, uint64_t off, uint64_t *obj_off);
/* The set's geometry into the new region's control block c. */
void inj_obj_ctl(struct inj *j, struct inj_ctl *c, uint64_t obj_off);
/* What the agent is told of a site: its role, where its verdict goes, and
 * the set's addresses in the process (the region mapped at remote). */
void inj_obj_site(const struct usc_site *site, struct inj_site *d, const struct inj_ctl *c,
		  uint64_t remote);
/* --from hits that found the set full, in an image's region. */
uint64_t inj_obj_full(const struct inj_shm *m);

/* python.c: CPython in the process ($pystack, py: probes) */
bool inj_py_wanted(const struct inj *j);
/* Room for struct inj_py after off when a site reads Python (*py_off:
 * where, or 0); the new end. */
uint64_t inj_py_reserve(struct inj *j, uint64_t off, uint64_t *py_off);
/* Where CPython is in process pid, into the new region's block (c->py_off
 * set); a process without one reads no frames. */
void inj_py_ctl(struct inj *j, struct inj_ctl *c, pid_t pid, uint64_t py_off);
/* py: probes' sites, which no patch fills (and the GIL hooks' kind). */
void inj_py_sites(struct inj *j, struct inj_image *img);
/* With every thread of the process stopped: a running interpreter's
 * threads get the profile function (a pending call); at detach, lose it. */
void inj_py_attach(struct inj_image *img, struct remote *rem);
void inj_py_detach(struct inj_image *img, struct remote *rem);
/* The code objects' names the agent copied, to the session's. */
void inj_py_sync(struct inj *j, struct inj_image *img);

/* system calls run in the process */
long inj_rsys(struct remote *rem, long nr, long a1, long a2, long a3, long a4, long a5, long a6);
bool inj_rsys_failed(long r);

#endif
