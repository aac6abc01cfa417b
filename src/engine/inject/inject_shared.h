/* What the inject engine's in-process agent and the tracer share: the layout
 * of the shared-memory region (a memfd mapped into both), the per-site fetch
 * programs (the same fetch_insn as every engine), and the record format.
 *
 * Region layout, all offsets from the region's start:
 *   struct inj_ctl                          at 0
 *   struct inj_slot   slots[nslots]         at slots_off   (one per thread)
 *   uint64_t          counts[nslots][nsites][INJ_NCOUNTS] at counts_off:
 *                     hits, records lost (ring full, or a nested hit), hits
 *                     that found the key table full, values unreadable, and
 *                     of the records lost, those the tracer made no room for
 *                     within the bound of a wait (enum inj_count)
 *   struct inj_site   sites[nsites]         at sites_off
 *   struct inj_undo   undo[nsites]          at undo_off: how to take each
 *                     patch out, for an agent whose tracer has died
 *   uint64_t          sems[nsites]          at sem_off: USDT semaphores raised
 *   uint8_t           rings[nslots][ring_size] at rings_off
 * and when sites aggregate where the probe runs (inj_ctl.agg_kind):
 *   struct inj_dir    dir[agg_nslots]       at agg_dir_off: the keys, each
 *                     entry agg_dir_size bytes (its key follows it)
 *   struct inj_aval   vals[nslots][agg_max_rows] at agg_vals_off: each
 *                     thread's own values of each row, agg_val_size bytes
 *   uint64_t          touched[nslots][(agg_max_rows + 63) / 64] at agg_touched_off:
 *                     the rows a thread has values in
 *   struct inj_lat    lat[nslots]           at agg_lat_off: latency, the
 *                     calls a thread is in
 *   uint8_t           scratch[nslots][INJ_SCRATCH] at agg_scratch_off: where
 *                     a thread builds a key
 * and for uscope objtrace (obj_off != 0): the followed objects (objset.h);
 * and when $ustack is walked where the probe runs (stk_off != 0): struct
 * inj_stk, where the rest of it is (see there).
 *
 * Aggregation takes no lock either: a key's row is found in the directory
 * by the key's hash (open addressing); a new key claims an entry by a
 * compare-and-swap of its state and a row number by an atomic add, and
 * publishes it with a store-release. The values are each thread's own (no
 * atomic add, no shared cache line): the tracer sums them over the threads
 * that touched the row. Sums only grow; min and max are kept since the
 * tracer's last read (their epoch).
 *
 * Each thread owns one slot, claimed on its first hit by a compare-and-swap
 * of its key, and one single-producer ring (the thread) / single-consumer
 * (the tracer) ring: free-running positions masked by the power-of-two size,
 * a store-release of `head` to publish, of `tail` to consume; positions are
 * compared with !=, never <.
 *
 * Never freezing the program. A lossless producer (record, counted stacks)
 * that finds its ring full waits for room, but only while the tracer is
 * alive and making progress, and at most max_wait_ns a wait: past that the
 * record is dropped and counted (INJ_C_LOST_WAIT), and later hits do not
 * wait again until the tracer has made progress (stall). The tracer wakes
 * a waiting producer when it frees room (the slot's wake futex, when its
 * waiting flag is up); a producer wakes the tracer when its ring passes the
 * watermark and the tracer is asleep (the doorbell futex).
 *
 * A dead tracer. The tracer holds a robust process-shared mutex (its futex
 * word first: the holder's tid, and FUTEX_WAITERS, which the tracer sets),
 * locked by its main thread and so on that thread's robust list
 * (set_robust_list, which glibc registers): when the tracer dies however it
 * dies (SIGKILL, OOM, a crash), the kernel sets FUTEX_OWNER_DIED in the
 * word and wakes a waiter on it. The tracer sets the bit itself when it
 * ends cleanly. The mutex is on a page of its own, which the process maps
 * read-only (a memfd sealed against writable mappings): glibc's list
 * pointers in it are the tracer's to trust. Its address is inj_ctl.owner
 * (and inj_site.owner). So every hit tests one bit, with no system call and
 * no thread of ours in the process; a producer waiting for room waits on
 * the word too, and stops waiting at once. The first hit that sees the bit
 * lets go: it writes back the bytes every patch replaced (the undo table),
 * lowers the semaphores, and the trampolines stay as pass-throughs
 * (agent/tracer.c).
 *
 * Plain C types only: the agent is compiled freestanding. */
#ifndef USC_ENGINE_INJECT_SHARED_H
#define USC_ENGINE_INJECT_SHARED_H

#include "agg/agg_shared.h"
#include "probe/fetch.h"
#include "stack/stack_walk.h"	/* the unwind tables' types */
#include "python/frame.h"
#include "script/prog.h"		/* struct script_unit */

#define INJ_MAGIC 0x7573636f70650006ULL	/* "uscope", layout 6 */
#define INJ_MAX_ARGS 16			/* per site */
#define INJ_SCRIPT_UNITS 4		/* a script probe's units a site holds */
#define INJ_STR_MAX 128			/* bytes of one string, NUL included */
#define INJ_PENDING 16			/* tail calls a thread waits on */
#define INJ_NCOUNTS 5			/* counters per thread and site */
#define INJ_LAT_DEPTH 64		/* latency: calls a thread is in, at most */
#define INJ_SCRATCH 4096		/* per thread: values, strings, key */
#define INJ_FAST_KEYS 2			/* arguments of a site on the agent's fast path */
#define INJ_KEY_CACHE 16		/* per thread: keys whose row it remembers */
#define INJ_PY_SEEN_THREAD 16		/* per thread: code objects it knows described */
#define INJ_MAX_KIDS 4096		/* forked children listed (inj_ctl.kids_off) */

/* The counters of a thread and site. */
enum inj_count {
	INJ_C_HITS = 0,
	INJ_C_LOST = 1,		/* records lost: every reason */
	INJ_C_AGG_FULL = 2,	/* the key table was full */
	INJ_C_FAULT = 3,	/* the value could not be read */
	INJ_C_LOST_WAIT = 4,	/* of INJ_C_LOST: the tracer made no room within a
				 * wait's bound, or had made no progress since a
				 * wait that timed out */
};

/* The owner word (at inj_ctl.owner): the kernel's robust futex bits. */
#define INJ_OWNER_WAITERS 0x80000000u	/* FUTEX_WAITERS */
#define INJ_OWNER_DIED 0x40000000u	/* FUTEX_OWNER_DIED */

/* The agent's header, at the start of its blob (linked at 0): where its
 * entry points are, and one word the tracer writes in the process's copy. */
struct agent_hdr {
	uint64_t magic;
	uint64_t hit_off;		/* agent_hit */
	uint64_t fast_off;		/* agent_fast */
	uint64_t py_pending_off;	/* agent_py_pending: Py_AddPendingCall's */
	uint64_t trap_off;		/* an int3: where a call the tracer makes returns */
	uint64_t ctl;			/* the control block's address in the process,
					 * for the code CPython calls (py: probes'
					 * profile function), which has no site */
	uint64_t fast_rec_off;		/* agent_fast_rec */
	uint64_t fast_lat_in_off;	/* agent_fast_lat_in: a latency's entry */
	uint64_t fast_lat_out_off;	/* agent_fast_lat_out: its return */
	uint64_t script_fast_off;	/* agent_script_fast */
	uint64_t script_units_off;	/* agent_script_units */
};

/* The self page (inj_ctl.self): per process, wiped in a forked child. */
#define INJ_SELF_LETGO 4	/* offset of the process's let-go state */
/* the code objects this process armed for sys.monitoring (the agent's,
 * uint64_t[INJ_SELF_NARMED], 0: free; the tracer's scratch at 64 is used
 * before, at attach) */
#define INJ_SELF_ARMED 2048
#define INJ_SELF_NARMED 4096	/* a power of two; a code object looked for in
				   INJ_SELF_ARMED_PROBES slots from its hash */
#define INJ_SELF_ARMED_PROBES 64
#define INJ_SELF_SIZE 65536	/* the self area's bytes (holds the above) */
enum inj_letgo {
	INJ_LETGO_NONE = 0,	/* patched (or never was) */
	INJ_LETGO_BUSY = 1,	/* an agent is letting go */
	INJ_LETGO_AGENT = 2,	/* an agent let go */
	INJ_LETGO_TRACER = 3,	/* a tracer took the patches out */
};

/* How to take one patch out: the bytes at addr (n of them: a jmp rel32, or
 * a jmp rel8 to a springboard) and at the springboard, as the file has them
 * and as the tracer wrote them. */
struct inj_undo {
	uint64_t addr;
	uint64_t spring;		/* 0: none */
	uint8_t orig[8], jump[8];
	uint8_t orig_spring[8], jump_spring[8];
	uint8_t n;
	uint8_t prot;			/* PROT_* of addr's page */
	volatile uint8_t left;		/* INJ_LEFT_*: what an agent that let go left */
	uint8_t pad[5];
};

#define INJ_LEFT_JUMP 1		/* no atomic store covers it: it stays, to a
				 * trampoline that passes through */
#define INJ_LEFT_SPRING 2	/* a springboard: dead filler that a thread may
				 * still be on its way to, it stays */

/* Where a thread's key comes from (inj_ctl.key_mode). */
enum inj_key_mode {
	INJ_KEY_TID_AT_FS,	/* glibc: the thread's tid is a u32 at fs_base +
				 * tid_off (struct pthread's tid), checked
				 * against every thread at attach */
	INJ_KEY_FSBASE,		/* anything else (Go): the fs base is the key;
				 * the tid is asked once per thread (gettid) */
};

/* How the agent reads the CPU a hit runs on (inj_ctl.cpu_read). */
enum inj_cpu_read {
	INJ_CPU_RDTSCP = 0,	/* rdtscp's aux */
	INJ_CPU_RDPID = 1,	/* the CPU has rdpid: rdtsc + rdpid, cheaper than
				 * rdtscp (28 ns against 14 in a VM) */
	INJ_CPU_LSL = 2,	/* neither (a VM's model may lack both): the kernel
				 * sets no TSC_AUX; the limit of its per-CPU
				 * segment (lsl) says the CPU */
	INJ_CPU_RSEQ = 3,	/* the thread's rseq area (glibc 2.35 registers
				 * one per thread at a fixed offset from the
				 * thread pointer): the kernel keeps its cpu_id
				 * current, a load (lsl costs 17 ns in a VM);
				 * lsl where it reads negative (not registered) */
};

struct inj_ctl {
	uint64_t magic;
	uint64_t owner;			/* the owner word's address: INJ_OWNER_DIED
					 * once the tracer has gone (read-only) */
	uint32_t nslots;
	uint32_t nsites;
	uint32_t ring_size;		/* bytes, a power of two */
	uint32_t key_mode;		/* enum inj_key_mode */
	uint32_t tid_off;
	uint32_t use_rdfsbase;		/* the kernel allows rdfsbase (HWCAP2_FSGSBASE) */
	uint32_t cpu_read;		/* enum inj_cpu_read: how a record's CPU is read */
	uint32_t rseq_cpu_off;		/* INJ_CPU_RSEQ: struct rseq's cpu_id, from
					 * the thread pointer */
	uint32_t rseq_sig;		/* INJ_CPU_RSEQ: the signature the threads
					 * registered (a restartable sequence's abort
					 * handler follows it) */
	uint32_t fs_self;		/* without rdfsbase, the fs base is read at
					 * %fs:0: every thread's TCB starts with its own
					 * address (the x86-64 TLS ABI: glibc, musl);
					 * 0: it is asked (arch_prctl, a system call a
					 * hit: Go keeps no such word) */
	volatile uint32_t enabled;	/* 0: hits are counted, nothing recorded */
	uint64_t self;			/* address of a MADV_WIPEONFORK word: the
					 * process's pid, written by the tracer; it
					 * reads 0 in a forked child until the tracer
					 * follows it (COMMAND's tree), and a process
					 * where it is 0 records nothing */
	uint64_t slots_off, counts_off, sites_off, rings_off;
	volatile uint64_t slot_full;	/* hits lost because every slot was taken */
	/* aggregation where the probe runs */
	uint32_t agg_kind;		/* 0: none; else enum usc_agg_kind */
	uint32_t agg_nslots;		/* directory entries, a power of two */
	uint32_t agg_max_rows;		/* keys the table holds */
	volatile uint32_t agg_used;	/* rows claimed */
	uint32_t agg_dir_size;		/* bytes of an entry, its key included */
	uint32_t agg_val_size;		/* bytes of a thread's values of a row */
	uint32_t agg_nbuckets;
	uint32_t agg_linear;
	int64_t agg_lmin, agg_lmax, agg_lstep;
	uint64_t agg_dir_off, agg_vals_off, agg_touched_off, agg_lat_off, agg_scratch_off;
	volatile uint64_t agg_epoch;	/* min and max older than this are stale */
	/* recording (uscope record) */
	volatile uint32_t lossless;	/* a full ring: wait for the tracer, within
					 * max_wait_ns, instead of dropping */
	uint32_t overwrite;		/* the flight recorder: a full ring drops its oldest
					 * records; the tracer reads it at the end */
	volatile uint64_t tsc_mult;	/* latency: units = tsc ticks * tsc_mult >> 32 */
	uint64_t obj_off;		/* objtrace: struct objset (objset.h), or 0 */
	/* bounded waits: a lossless wait for room lasts at most max_wait_ns */
	uint64_t max_wait_ns;
	volatile uint64_t stall;	/* progress + 1 when a wait timed out: no
					 * wait until the tracer makes progress */
	volatile uint64_t timeouts;	/* waits that timed out */
	/* letting go (agent/tracer.c) */
	uint64_t undo_off, sem_off;
	volatile uint32_t nundo, nsem;
	uint32_t sync_core;		/* membarrier's SYNC_CORE is registered */
	uint32_t watermark;		/* ring the doorbell past this many bytes */
	/* $ustack walked where the probe runs: struct inj_stk, or 0 */
	uint64_t stk_off;
	uint64_t py_off;		/* Python: struct inj_py, or 0 (none) */
	uint64_t script_off;		/* uscope script: struct inj_script
					 * (script_shared.h), or 0 (none) */
	/* the tracer's side, on a line of its own: written each time it drains */
	volatile uint32_t asleep __attribute__((aligned(64)));	/* ring the doorbell */
	volatile uint32_t doorbell;	/* a futex word the producers move on */
	volatile uint64_t progress;	/* passes the tracer has made */
	uint64_t pad_t[6];
	/* forks (-p and system-wide, which hold no process by ptrace after
	 * the attach): a forked child's first hit claims its self word itself
	 * (its getpid) and lists itself in kids[], for the tracer to take up
	 * (its janitor entry, its name, its mappings); a child that never hits
	 * a probe is found by the tracer at its end by what it maps */
	uint32_t follow_forks __attribute__((aligned(64)));
	volatile uint32_t nkids;	/* claims made: kids[] holds the first INJ_MAX_KIDS */
	uint64_t kids_off;		/* struct inj_kid_ent kids[INJ_MAX_KIDS] */
	uint64_t pad_k[6];
};
_Static_assert(sizeof(struct inj_ctl) % 64 == 0, "inj_ctl: whole lines");

/* A forked child that took itself up (inj_ctl.kids_off). */
struct inj_kid_ent {
	volatile uint32_t pid;		/* its getpid; 0 while being written */
	uint32_t pad;
	char comm[16];			/* its name then (it may be gone when read) */
};

/* A directory entry: a key's row. */
enum inj_dir_state { INJ_DIR_FREE = 0, INJ_DIR_BUSY = 1, INJ_DIR_READY = 2 };

struct inj_dir {
	volatile uint32_t state;
	uint32_t site;
	uint32_t row;
	uint32_t keylen;
	uint64_t hash;
	/* the key's bytes follow */
};

/* Latency: the calls a thread is in, most recent last. */
struct inj_lat {
	uint32_t n;
	uint32_t pad;
	struct {
		uint32_t func;		/* the function's id (usc_site.agg_func) */
		uint32_t row;		/* its key's row, or INJ_NO_ROW */
		uint64_t tsc;
	} f[INJ_LAT_DEPTH];
};

#define INJ_NO_ROW (~0u)

#define INJ_KEY_TOMB (~0ULL)	/* a slot being given back: matches no thread */

/* A tail call waiting for its callee's return (see usc_site.cont). */
struct inj_pend {
	uint64_t sp;			/* the stack pointer at its jmp */
	uint32_t site;
	uint32_t pad;
};

/* A thread's slot: INJ_SLOT_SIZE bytes, a power of two, so that a slot's
 * address from its index, and its index from its address, are shifts on
 * the hit's path. */
#define INJ_SLOT_SIZE 1024
struct inj_slot {
	union {
		struct {
			volatile uint64_t key;		/* 0: free */
			volatile uint32_t tid;
			volatile uint32_t nest;		/* inside the probe path: a nested hit
							 * (a signal handler) is only counted */
			volatile uint32_t tgid;		/* its process (the self word at its claim) */
			uint32_t npend;
			uint64_t dropped;		/* tail calls whose return was never seen */
			/* $ustack: a range of the thread's stack known readable, from the
			 * page of a stack pointer up to stk_hi (the mapping's end when
			 * stk_end): copied directly, no system call */
			uint64_t stk_lo, stk_hi;
			uint32_t stk_end;
			uint32_t pad0;
			/* One line the thread writes at each record, one the tracer writes at
			 * each record it has read: a word of either on the other's line would
			 * cost a hit a transfer between CPUs (~10 ns each here, bench/README).
			 * The thread checks for room against the tail it saw last (tail_seen,
			 * never ahead of tail) and reads tail again only when that is short. */
			volatile uint64_t head;		/* written by the thread */
			uint64_t tail_seen;
			uint64_t pad1[6];
			volatile uint64_t tail;		/* written by the tracer */
			volatile uint32_t waiting;	/* lossless: the thread waits for room */
			volatile uint32_t wake;		/* ... on this futex word, moved on by the tracer */
			uint64_t pad2[6];
			struct inj_pend pend[INJ_PENDING];
			/* agent_fast: the rows of the keys of one integer this thread saw last
			 * (a row never changes its key: nothing goes stale) */
			struct {
				uint64_t v;
				uint32_t site;
				uint32_t row1;		/* row + 1; 0: empty */
			} kc[INJ_KEY_CACHE];
			/* $ustack walked: its process's mappings (inj_stk.procs[stk_proc],
			 * while that one's tgid is the thread's), and the mappings its rows
			 * cache holds rows for (procs[stk_rcp - 1] at generation stk_gen) */
			uint32_t stk_proc;
			uint32_t stk_rcp;
			uint32_t stk_gen;
			uint32_t stk_fb;		/* a count's walk fell back: why (the hit is
							 * recorded instead, its stack copied), or
							 * STACK_FB_NR: no room for it in the table
							 * (recorded walked) */
			/* $pystack: the code objects this thread saw described last (code,
			 * its identity): no lookup in the shared table for them */
			struct {
				uint64_t code, ident;
			} pyseen[INJ_PY_SEEN_THREAD];
			/* $pystack without CPython's thread-specific key (3.14): this
			 * thread's PyThreadState as last found in its interpreter's thread
			 * list, checked at each use (0: look); and the pthread key (+ 1) of
			 * this thread's TCB that held it then (0: none seen), which CPython
			 * clears or changes when the state goes */
			uint64_t py_ts;
			uint32_t py_key;
			uint32_t py_pad;
		};
		uint8_t size_[INJ_SLOT_SIZE];
	};
};
_Static_assert(sizeof(struct inj_slot) == INJ_SLOT_SIZE, "a slot is INJ_SLOT_SIZE bytes");

struct inj_arg {
	uint32_t ninsn;
	uint32_t pad;
	struct fetch_insn insn[USC_FETCH_MAX];
};

/* What a site does besides recording. */
enum inj_site_kind {
	INJ_PLAIN = 0,	/* record the event */
	INJ_TAIL = 1,	/* a followed tail call: remember the stack pointer */
	INJ_CONT = 2,	/* a ret of a followed tail call's callees: record the
			 * tail calls waiting on this stack pointer */
	INJ_PYHOOK = 3,	/* py: probes: a thread took the GIL: the agent gives the
			 * thread states the profile function (agent/python.c) */
	INJ_PYSYNC = 4,	/* $pystack: CPython finalizes: the agent waits (a bounded
			 * while) for the tracer to read what the records name */
};

#define INJ_OBJ_NREGS 6		/* objtrace: the SysV argument registers */

/* What a site does with the followed objects (= enum usc_obj_role). */
enum inj_obj_role {
	INJ_OBJ_NONE = 0,
	INJ_OBJ_FROM = 1,	/* follow its first argument (verdict 1, or 2: full) */
	INJ_OBJ_UNTIL = 2,	/* follow it no more (verdict 1; none: no record) */
	INJ_OBJ_MATCH = 3,	/* record only a call that passes a followed object
				 * in an argument register (verdict: their mask);
				 * the trampoline tests the set's filter first */
};

/* What a site does when it aggregates where the probe runs. */
enum inj_agg_role {
	INJ_AGG_NONE = 0,	/* record the event */
	INJ_AGG_ROW = 1,	/* count or histogram a value in its key's row */
	INJ_AGG_ENTRY = 2,	/* latency: a call begins (its key's row) */
	INJ_AGG_RETURN = 3,	/* latency: the call of agg_func ends */
};

struct inj_site {
	uint64_t ctl;			/* runtime address of the struct inj_ctl */
	uint64_t owner;			/* ... of the owner word (inj_ctl.owner) */
	uint64_t ip;			/* runtime address of the probe point */
	uint64_t offset;		/* its file offset (FOP_FOFFS) */
	uint64_t vaddr;			/* its link-time address (FOP_VADDR) */
	uint32_t index;
	uint32_t nargs;
	uint32_t ret_site;		/* record the return address at [sp] */
	uint32_t nstr;			/* arguments that store a string */
	uint32_t stack_need;		/* bytes of its $ustack (fetch_stack_hdr + the
					 * stack), 0: none */
	uint8_t obj_regs;		/* objtrace MATCH: the argument registers tested
					 * (usc_site.obj_regs) */
	uint8_t pad_s[3];
	uint32_t kind;			/* enum inj_site_kind */
	uint16_t obj;			/* enum inj_obj_role */
	uint16_t obj_verdict;		/* ... the argument its verdict goes in */
	uint8_t reg_only[INJ_MAX_ARGS];	/* an argument that is a register as it is:
					 * that register (the fast path), else 0xff */
	/* aggregation (inj_ctl.agg_kind) */
	uint32_t agg;			/* enum inj_agg_role */
	uint32_t agg_nkey;		/* the key: args [0, agg_nkey) */
	int32_t agg_value;		/* hist: the value's arg, else -1 */
	uint32_t agg_func;		/* latency: the function's id */
	uint32_t agg_keylen;		/* bytes of the key */
	uint32_t agg_str_max;		/* bytes of a string in the key */
	uint32_t agg_fast;		/* no filter, a plain site, at most two arguments,
					 * registers as they are (reg_only): the trampoline
					 * calls agent_fast with them first */
	uint32_t py_count;		/* a py: probe counted by its function alone (its
					 * one key, no value, no filter): the row is kept
					 * with the code object's verdict */
	uint32_t rec_fast;		/* a record of nothing but two words (registers
					 * as they are; at a return, where it returns to
					 * and one register), at a plain site with no
					 * filter, string or stack: agent_fast_rec writes
					 * it whole when the ring has room (the trampoline
					 * calls it as agent_fast for agg_fast) */
	/* uscope script: the program's probe (+ 1; 0: none) the site runs
	 * (agent/script.c), and the session's index of the site */
	uint32_t script;
	uint32_t script_site;
	uint32_t script_fast;		/* agent_script_fast runs it: its code needs
					 * no call, its inputs are registers as they are */
	uint32_t script_nunits;		/* agent_script_units runs it: a probe of
					 * updates, its units decoded once here */
	struct script_unit script_units[INJ_SCRIPT_UNITS];
	uint8_t arg_size[INJ_MAX_ARGS];	/* an integer's bytes (0: all 8), to mask */
	uint8_t arg_sign[INJ_MAX_ARGS];	/* signed: a value sign-extends */
	uint8_t arg_str[INJ_MAX_ARGS];	/* a string argument */
	struct usc_filter filter;	/* record or aggregate only what passes (n 0: all) */
	/* agent_fast: where things are in the process, computed once (fewer
	 * dependent loads on the hot path) */
	struct {
		uint64_t self;		/* the self word */
		uint64_t slots;		/* struct inj_slot[nslots] */
		uint64_t counts;	/* this site's counters of slot 0 */
		uint64_t count_stride;	/* bytes from a slot's counters to the next's */
		uint64_t dir;		/* the key directory */
		uint64_t vals;		/* slot 0's values of row 0 */
		uint64_t slot_vals;	/* bytes of a slot's values */
		uint64_t touched;	/* slot 0's touched words */
		uint64_t slot_words;	/* bytes of a slot's touched words */
		uint64_t lat;		/* struct inj_lat[nslots] */
		uint64_t script;	/* uscope script: its struct inj_script */
		uint64_t hash0;		/* agg_hash's state after the site and a key's
					 * first word (AGG_K_INT) */
		volatile uint32_t row1;	/* a site of no key: its row + 1, once the
					 * agent has found it (0: not yet) */
		volatile uint32_t full;	/* agent_fast_rec dropped a hit here on a full
					 * ring since the tracer's last drain (which
					 * clears it): its hits check the room before
					 * they read the clock */
	} fast;
	/* objtrace: the set in the process (the trampoline tests objs.filter) */
	struct {
		uint64_t set;		/* struct objset */
		uint64_t filter;	/* its counters */
		uint32_t fshift;
		uint32_t pad;
	} objs;
	struct inj_arg args[INJ_MAX_ARGS];
};

enum inj_kind { INJ_INT = 0, INJ_STR = 1, INJ_FAULT = 2, INJ_NULL = 3,
	INJ_STACK = 4,		/* at str_off, str_len bytes: fetch_stack_hdr, the stack */
	INJ_WALK = 5,		/* at str_off, str_len bytes: fetch_walk_hdr, the pcs */
	INJ_STACKID = 6,	/* a count's key: val is the walk's id in the stack
				 * table (never in a record) */
	INJ_PYSTACK = 7 };	/* at str_off, str_len bytes: python_stack_hdr, the frames */

struct inj_val {
	uint64_t val;			/* INJ_INT */
	uint16_t str_off;		/* INJ_STR: from the record's start */
	uint16_t str_len;		/* without the NUL */
	uint8_t kind;
	uint8_t pad[3];
};

#define INJ_REC_PAD 0x80000000u		/* in len: skip to the ring's start */
#define INJ_NVALS_SCRIPT 0xffffu	/* in nvals: a script's output record
					 * (script/prog.h's struct script_rec and its
					 * values) instead of values */
#define INJ_REC_SHORT 0x40000000u	/* in len: a struct inj_rec_short */

struct inj_rec {
	uint32_t len;			/* bytes of the whole record, 8-aligned */
	uint32_t site;
	uint64_t tsc;
	uint64_t retaddr;		/* return sites: the word at sp */
	uint32_t cpu;
	uint32_t nvals;
	struct inj_val vals[];		/* then the strings */
};

/* The record of a site whose record is integers from registers alone
 * (inj_site.rec_fast), as agent_fast_rec writes it: 16 to 32 bytes where
 * struct inj_rec takes 48 to 64. A record's cost in the traced thread is
 * mostly the ring's lines it takes from the tracer's CPU (bench/README: ~5
 * ns a line), so half a line a hit, not one. len: INJ_REC_SHORT, the CPU
 * (12 bits) at INJ_REC_SHORT_CPU, the record's bytes in the low 8 bits.
 * The words: at a return site where it returns to, then the arguments, as
 * integers (nvals: the words but that one). */
#define INJ_REC_SHORT_CPU 8
#define INJ_REC_SHORT_WORDS 2		/* at most */
struct inj_rec_short {
	uint32_t len;
	uint32_t site;
	uint64_t tsc;
	uint64_t w[];
};

/* The bytes of the record or pad whose first word is w. */
static inline uint32_t inj_rec_len(uint32_t w)
{
	return w & INJ_REC_SHORT ? w & 0xffu : w & ~INJ_REC_PAD;
}

/* The bytes of the short record whose first word is w, as the agent writes
 * one (no stray bits, its size, within avail bytes), or 0: not one. The
 * tracer's reader (inject_raw.c), and its count of a recording's records. */
static inline uint32_t inj_short_len(uint32_t w, uint64_t avail)
{
	uint32_t n = w & 0xffu;

	if (!(w & INJ_REC_SHORT) || (w & ~(INJ_REC_SHORT | 0xfffffu)) ||
	    n < sizeof(struct inj_rec_short) ||
	    n > sizeof(struct inj_rec_short) + INJ_REC_SHORT_WORDS * sizeof(uint64_t) ||
	    n > avail || (n & 7))
		return 0;
	return n;
}

/* ---- $ustack walked where the probe runs (agent/ustack.c) ------------------
 *
 * The unwind tables (stack_walk.h: tabs[], rows[], idx[]) of every module
 * the image's processes map, and each process's mappings against them,
 * written by the tracer only; the process maps that part read-only. The
 * tables are only ever appended to: the tracer writes the new entries,
 * then publishes the new counts with a store-release. A process's
 * mappings are two copies: the tracer rewrites the one not in use, then
 * moves gen on (the copy in use is gen & 1) with a store-release; a walk
 * reads gen before and after, and one that saw it move by two or more
 * (its copy may have been rewritten under it) falls back to a copy of
 * the stack (STACK_FB_CHANGED).
 *
 * The agent's own part, writable: per thread slot INJ_STK_SLOT bytes (the
 * rows of the pcs it looked up last, by pc, for the generation of
 * mappings in inj_slot.stk_gen; a walk's return addresses, for a count;
 * a page process_vm_readv reads the stack into as it finds how far it is
 * readable; the walks it made last, agent/ustack.c's memo), and the
 * stacks counted where the probe runs: a table of
 * distinct walks, each with its process, found by its hash and compared
 * whole (ids are index + 1); a walk that finds no room is recorded
 * instead, and counted by uscope. */
#define INJ_STK_PROCS 32		/* processes an image holds mappings of */
#define INJ_STK_CACHE 64		/* rows a thread remembers */
#define INJ_STK_SLOT 16384		/* bytes of a thread's own */
#define INJ_STK_PCS 1024		/* ... its walk's pcs at this offset */
#define INJ_STK_PAGE 4096		/* ... its read page at this offset */
#define INJ_STK_MEMO 8192		/* ... its walks remembered at this offset */
#define INJ_STK_PROBES 32		/* entries a new walk tries in the table */

struct inj_stk_proc {
	volatile uint32_t tgid;		/* 0: free */
	volatile uint32_t gen;		/* the copy in use: maps[gen & 1] */
	uint32_t nmaps[2];
	struct stack_map maps[2][STACK_MAPS_MAX];
};

struct inj_stk_rc {			/* a row remembered by lookup address */
	uint64_t pc;			/* 0: empty */
	struct stack_row row;
};

struct inj_stkent {			/* a counted stack */
	volatile uint32_t state;	/* enum inj_dir_state */
	uint32_t tgid;
	uint64_t hash;
	struct fetch_walk_hdr h;	/* then its h.n pcs */
};

struct inj_stk {
	/* the tables, published with a store-release of their counts */
	volatile uint32_t ntabs, nrows, nidx;
	uint32_t max_tabs, max_rows, max_idx;
	uint64_t tabs_off, rows_off, idx_off;	/* from the region's start */
	volatile uint32_t tgids[INJ_STK_PROCS];	/* = procs[i].tgid, packed */
	uint64_t procs_off;		/* struct inj_stk_proc[INJ_STK_PROCS] */
	uint64_t ro_off, ro_len;	/* what the process maps read-only */
	/* the agent's */
	uint64_t slots_off;		/* INJ_STK_SLOT bytes per thread slot */
	uint64_t ents_off;		/* the counted stacks: nents entries, */
	uint32_t nents;			/* a power of two, */
	uint32_t ent_size;		/* each this many bytes, pcs included */
	uint32_t ent_frames;		/* pcs an entry holds */
	uint32_t pad;
};

/* The registers as the trampoline saves them, in enum usc_reg order; IP is
 * filled in by the agent from the site. */
struct inj_regs {
	uint64_t r[USC_REG_NR];
};

/* ---- Python (agent/python.c) ------------------------------------------------
 *
 * Where CPython is in the process ($pystack: the frames of the thread that
 * hits, walked with plain loads), and for py: probes the profile function's
 * state: the probes' globs, and per code object the verdict decided at its
 * first call (the probes it matches), with its names copied into the arena
 * (the tracer reads them there, also once the process has gone). Every
 * profile callback holds the GIL: the tables are written one at a time; the
 * arena is published by a store-release of arena_used. */

#define INJ_PY_PROBES 64		/* py: probes of a session */
#define INJ_PY_PAT 128			/* bytes of a glob, NUL included */
#define INJ_PY_NAMES 2048		/* bytes of the probes' argument names */
#define INJ_PY_CODES 65536		/* code objects with a verdict */
#define INJ_PY_ARENA (4u << 20)		/* bytes of names copied */
#define INJ_PY_STR 256			/* bytes of one name copied, at most */
#define INJ_PY_SEEN 16384		/* code objects described ($pystack) */
#define INJ_PY_LINES 4096		/* bytes of a line table copied, at most */

struct inj_py_probe {
	char module[INJ_PY_PAT];	/* glob ("*": any) */
	char qualname[INJ_PY_PAT];	/* glob */
	uint32_t entry;			/* its entry site, or ~0u */
	uint32_t ret;			/* its return site, or ~0u */
};

/* A code object's verdict. */
struct inj_py_code {
	uint64_t code;			/* 0: free */
	uint64_t ident;			/* its identity then (py_code_ident): a code
					 * object made at the same address later has
					 * another */
	uint64_t mask;			/* the py: probes it matches */
	uint32_t row1;			/* count by function (inj_site.py_count): the
					 * row of row1_site's key for it, + 1 (0: none) */
	uint32_t row1_site;
	uint32_t pid;			/* the self word of the process it is of */
	uint32_t gen;			/* which code object at this address (the
					 * first 0), in py: probes' function keys
					 * (agent/pyagent.h's py_func_key); which
					 * process armed it for sys.monitoring is in
					 * each one's self page (INJ_SELF_ARMED) */
};

/* The arena: one record a code object, 8-aligned: this header, then the
 * three names (UTF-8), each NUL-ended, then nlinetable bytes of its line
 * table. Written by py: probes' verdicts (a module, no line table) and by
 * $pystack's walks, the first time they see a code object (no module). */
struct inj_py_name {
	uint64_t code;
	int32_t firstlineno;
	int32_t firsttraceable;
	uint16_t nmodule, nqualname, nfilename;
	uint16_t ncode;			/* 3.8 to 3.10: the code's size in code units
					 * (where 3.8's and 3.9's last line ends) */
	uint32_t nlinetable;		/* INJ_PY_NOLINES: none copied */
	uint32_t pid;			/* its process's self word (the processes
					 * a -p process forks share the arena) */
};
#define INJ_PY_NOLINES 0xffffffffu

/* A code object $pystack described: its address and its identity then. */
struct inj_py_seen {
	uint64_t code, ident;
};

/* inj_py.state */
enum inj_py_state {
	INJ_PY_OFF = 0,		/* no py: probe */
	INJ_PY_ON = 1,		/* the profile function is set where the GIL is held */
	INJ_PY_STOP = 2,	/* detached: the profile function takes itself out */
};

/* inj_py.eval_off: why 3.11's frame evaluator gave way to the profile
 * function (agent/pyeval.c) */
enum inj_py_eval_off {
	INJ_EVAL_ON = 0,
	INJ_EVAL_FOREIGN = 1,	/* an interpreter had an evaluator of its own */
	INJ_EVAL_DEEP = 2,	/* a thread's C stack was half used */
	INJ_EVAL_NOSTACK = 3,	/* a thread whose stack's bounds are not known */
};

/* inj_py.mon_state: py: probes through sys.monitoring (3.12 and later) */
enum inj_py_mon {
	INJ_MON_NONE = 0,	/* not claimed yet (CPython not ready, or not asked) */
	INJ_MON_ARMED = 1,	/* the tool id is ours, the callbacks registered */
	INJ_MON_BUSY = 2,	/* being set or taken out */
	INJ_MON_DONE = 3,	/* taken out: the tool id freed */
	INJ_MON_TAKEN = 4,	/* every tool id uscope may use was in use: refused */
	INJ_MON_FAILED = 5,	/* a call of sys.monitoring failed (mon_step: which) */
};

#define INJ_MON_CBS 4		/* the callbacks: start, resume/throw, return/yield, unwind */

/* CPython's PyMethodDef, as the agent builds its callbacks' */
struct inj_py_methoddef {
	uint64_t name, meth;
	int32_t flags, pad;
	uint64_t doc;
};

struct inj_py {
	uint32_t on;			/* the process runs a CPython uscope reads */
	uint32_t nprobes;
	uint32_t nret;			/* of them, return probes (r:py:): none, and
					 * a return needs no verdict (3.11) */
	uint32_t pad_r;
	struct python_offsets off;
	struct python_glibc glibc;
	uint64_t runtime;		/* _PyRuntime */
	/* py: probes: CPython's API and objects, at their run-time addresses */
	uint64_t set_profile;		/* _PyEval_SetProfile */
	uint64_t none, true_, false_, long_type, bool_type, unicode_type;
	volatile uint32_t state;	/* enum inj_py_state */
	uint32_t ncodes;		/* verdicts: a power of two */
	uint64_t codes_off;		/* struct inj_py_code[ncodes], from inj_py */
	uint64_t arena_off;		/* the arena, from inj_py */
	uint64_t seen_off;		/* struct inj_py_seen[INJ_PY_SEEN], or 0 */
	volatile uint32_t arena_used;	/* bytes */
	volatile uint32_t codes_used;
	volatile uint64_t installs;	/* thread states given the profile function */
	volatile uint64_t foreign;	/* ... found with another's (cProfile): left */
	volatile uint64_t removes;	/* ... it was taken out of */
	volatile uint64_t undecided;	/* calls of a code object no verdict fits (the
					 * table or arena full): matched again */
	/* 3.11 with no return probe and no stack at a py: probe: the calls
	 * come through a PEP 523 frame evaluator of the agent's (agent/
	 * pyeval.c), not the profile function */
	uint32_t eval;			/* 1: so */
	volatile uint32_t eval_off;	/* enum inj_py_eval_off: why the profile
					 * function serves instead (0: it does not) */
	uint64_t main_stack_top;	/* the main thread's stack: its start (the
					 * process's startstack) ... */
	uint64_t main_stack_size;	/* ... and RLIMIT_STACK (8 MiB if none) */
	uint64_t eval_default;		/* _PyEval_EvalFrameDefault */
	uint64_t eval_set, eval_get;	/* _PyInterpreterState_{Set,Get}EvalFrameFunc */
	volatile uint64_t eval_installs, eval_removes;	/* interpreters given it, taken out of */
	struct inj_py_probe probes[INJ_PY_PROBES];
	char names[INJ_PY_NAMES];	/* FOP_PYARG's names (imm: offset | len << 32) */
	/* 3.12 and later: sys.monitoring, called from C (python/detect.h's
	 * struct python_api says what each is) */
	uint32_t mon;			/* 1: py: probes through sys.monitoring */
	volatile uint32_t mon_state;	/* enum inj_py_mon */
	volatile int32_t mon_tool;	/* the tool id claimed, or -1 */
	volatile uint32_t mon_step;	/* INJ_MON_FAILED: the call that failed */
	uint64_t sys_getobject, call_method, getattr, cmethod_new, incref, decref;
	uint64_t err_fetch, err_restore, err_clear, long_as_long;
	uint64_t tstate_get;		/* PyThreadState_GetUnchecked, or 0 */
	uint64_t mon_mod;		/* sys.monitoring (a reference held) */
	uint64_t mon_disable;		/* sys.monitoring.DISABLE */
	uint64_t mon_cb[INJ_MON_CBS];	/* the callbacks (ours: a reference held) */
	uint64_t mon_ev[8];		/* sys.monitoring.events' values, enum mon_ev */
	struct inj_py_methoddef mon_def[INJ_MON_CBS];
	volatile uint64_t mon_armed;	/* code objects armed (local events) */
	volatile uint64_t mon_disabled;	/* code objects told DISABLE (no probe) */
	/* the tool and sys.monitoring of the first process that let go: a
	 * forked copy of it still has them (mon_left_mod 0: none let go) */
	volatile int32_t mon_left_tool;
	volatile uint64_t mon_left_mod;
};

#endif
