/* What the inject engine's in-process agent and the tracer share: the layout
 * of the shared-memory region (a memfd mapped into both), the per-site fetch
 * programs (the same fetch_insn as every engine), and the record format.
 *
 * Region layout, all offsets from the region's start:
 *   struct inj_ctl                          at 0
 *   struct inj_slot   slots[nslots]         at slots_off   (one per thread)
 *   uint64_t          counts[nslots][nsites][2] at counts_off: hits and
 *                     records lost (ring full, or a nested hit), per thread
 *   struct inj_site   sites[nsites]         at sites_off
 *   uint8_t           rings[nslots][ring_size] at rings_off
 *
 * Each thread owns one slot, claimed on its first hit by a compare-and-swap
 * of its key, and one single-producer ring (the thread) / single-consumer
 * (the tracer) ring: free-running positions masked by the power-of-two size,
 * a store-release of `head` to publish, of `tail` to consume; positions are
 * compared with !=, never <.
 *
 * Plain C types only: the agent is compiled freestanding. */
#ifndef USC_ENGINE_INJECT_SHARED_H
#define USC_ENGINE_INJECT_SHARED_H

#include "probe/fetch.h"

#define INJ_MAGIC 0x7573636f70650001ULL	/* "uscope", layout 1 */
#define INJ_MAX_ARGS 16			/* per site */
#define INJ_STR_MAX 128			/* bytes of one string, NUL included */

/* Where a thread's key comes from (inj_ctl.key_mode). */
enum inj_key_mode {
	INJ_KEY_TID_AT_FS,	/* glibc: the thread's tid is a u32 at fs_base +
				 * tid_off (struct pthread's tid), checked
				 * against every thread at attach */
	INJ_KEY_FSBASE,		/* anything else (Go): the fs base is the key;
				 * the tid is asked once per thread (gettid) */
};

struct inj_ctl {
	uint64_t magic;
	uint32_t nslots;
	uint32_t nsites;
	uint32_t ring_size;		/* bytes, a power of two */
	uint32_t key_mode;		/* enum inj_key_mode */
	uint32_t tid_off;
	uint32_t use_rdfsbase;		/* the kernel allows rdfsbase (HWCAP2_FSGSBASE) */
	uint32_t use_rdpid;		/* the CPU has rdpid: rdtsc + rdpid, cheaper
					 * than rdtscp (28 ns against 14 in a VM) */
	uint32_t tgid;			/* the traced process, for process_vm_readv */
	volatile uint32_t enabled;	/* 0: hits are counted, nothing recorded */
	uint64_t alive;			/* address of a MADV_WIPEONFORK word the
					 * tracer set to 1: it reads 0 in a forked
					 * child, which is not traced */
	uint64_t slots_off, counts_off, sites_off, rings_off;
	volatile uint64_t slot_full;	/* hits lost because every slot was taken */
};

#define INJ_KEY_TOMB (~0ULL)	/* a slot being given back: matches no thread */

struct inj_slot {
	volatile uint64_t key;		/* 0: free */
	volatile uint32_t tid;
	volatile uint32_t nest;		/* inside the probe path: a nested hit
					 * (a signal handler) is only counted */
	uint64_t pad0[6];
	volatile uint64_t head;		/* written by the thread */
	uint64_t pad1[7];
	volatile uint64_t tail;		/* written by the tracer */
	uint64_t pad2[7];
};

struct inj_arg {
	uint32_t ninsn;
	uint32_t pad;
	struct fetch_insn insn[USC_FETCH_MAX];
};

struct inj_site {
	uint64_t ctl;			/* runtime address of the struct inj_ctl */
	uint64_t ip;			/* runtime address of the probe point */
	uint64_t offset;		/* its file offset (FOP_FOFFS) */
	uint64_t vaddr;			/* its link-time address (FOP_VADDR) */
	uint32_t index;
	uint32_t nargs;
	uint32_t ret_site;		/* record the return address at [sp] */
	uint32_t nstr;			/* arguments that store a string */
	uint8_t reg_only[INJ_MAX_ARGS];	/* an argument that is a register as it is:
					 * that register (the fast path), else 0xff */
	struct inj_arg args[INJ_MAX_ARGS];
};

enum inj_kind { INJ_INT = 0, INJ_STR = 1, INJ_FAULT = 2 };

struct inj_val {
	uint64_t val;			/* INJ_INT */
	uint16_t str_off;		/* INJ_STR: from the record's start */
	uint16_t str_len;		/* without the NUL */
	uint8_t kind;
	uint8_t pad[3];
};

#define INJ_REC_PAD 0x80000000u		/* in len: skip to the ring's start */

struct inj_rec {
	uint32_t len;			/* bytes of the whole record, 8-aligned */
	uint32_t site;
	uint64_t tsc;
	uint64_t retaddr;		/* return sites: the word at sp */
	uint32_t cpu;
	uint32_t nvals;
	struct inj_val vals[];		/* then the strings */
};

/* The registers as the trampoline saves them, in enum usc_reg order; IP is
 * filled in by the agent from the site. */
struct inj_regs {
	uint64_t r[USC_REG_NR];
};

#endif
