/* The inject engine's agent: the code a trampoline calls inside the traced
 * process.
 *
 * Compiled freestanding (no libc, no TLS, no globals, no relocations) into a
 * flat blob the tracer copies into the target. It runs on the traced thread's
 * own stack, below its red zone, with every register saved by the
 * trampoline. Its hot path takes no lock and makes no system call: a thread
 * finds its slot by its key (a compare-and-swap claims a free one on its
 * first hit), counts the hit, interprets the site's fetch programs (the same
 * programs every engine runs) and appends one record to its own ring.
 * Memory behind a pointer is read with process_vm_readv on the process
 * itself, so a bad pointer is a fault marker, never a crash: the only system
 * call, and only for probes that dereference. */
#include "engine/inject/inject_shared.h"

#define HIDDEN __attribute__((visibility("hidden")))

void agent_hit(struct inj_regs *regs, struct inj_site *site) HIDDEN;

/* The tracer reads this header at the blob's start. */
struct agent_hdr {
	uint64_t magic;
	uint64_t hit_off;	/* offset of agent_hit in the blob */
};
__attribute__((section(".agent_hdr"), used)) HIDDEN const struct agent_hdr agent_hdr = {
	.magic = INJ_MAGIC,
	.hit_off = (uint64_t)&agent_hit,	/* the blob is linked at 0 */
};

static inline long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

#define SYS_gettid 186
#define SYS_prctl 157
#define SYS_process_vm_readv 310
#define PR_GET_NAME 16

struct iov {
	void *base;
	uint64_t len;
};

/* Read len bytes at addr without faulting: the count read (short at the
 * first unreadable page), or < 0. */
static long safe_read(const struct inj_ctl *c, void *dst, uint64_t addr, uint64_t len)
{
	struct iov l = {dst, len}, r = {(void *)addr, len};

	return sys6(SYS_process_vm_readv, c->tgid, (long)&l, 1, (long)&r, 1, 0);
}

static inline uint64_t fs_base(const struct inj_ctl *c)
{
	uint64_t v;

	if (c->use_rdfsbase)
		__asm__ volatile("rdfsbase %0" : "=r"(v));
	else
		__asm__ volatile("mov %%fs:0, %0" : "=r"(v));	/* the TCB's self-pointer */
	return v;
}

static struct inj_slot *slot_get(struct inj_ctl *c, uint64_t key)
{
	struct inj_slot *slots = (struct inj_slot *)((char *)c + c->slots_off);
	uint32_t mask = c->nslots - 1, h = (uint32_t)((key * 0x9e3779b97f4a7c15ULL) >> 40);

	for (uint32_t i = 0; i <= mask; i++) {
		struct inj_slot *s = &slots[(h + i) & mask];
		uint64_t k = s->key;

		if (k == key)
			return s;
		if (k)
			continue;
		if (__sync_bool_compare_and_swap(&s->key, 0, key) || s->key == key) {
			if (c->key_mode == INJ_KEY_TID_AT_FS)
				s->tid = (uint32_t)key;
			else if (!s->tid)
				s->tid = (uint32_t)sys6(SYS_gettid, 0, 0, 0, 0, 0, 0);
			return s;
		}
	}
	return 0;
}

struct eval {
	const struct inj_ctl *c;
	const struct inj_site *site;
	const uint64_t *regs;
	char *rec;
	uint32_t str_off;
};

static void eval_arg(struct eval *e, const struct inj_arg *a, struct inj_val *v)
{
	const uint64_t *regs = e->regs;
	uint64_t val = 0, tmp;
	long n;

	v->kind = INJ_INT;
	v->val = 0;
	for (uint32_t k = 0; k < a->ninsn && k < USC_FETCH_MAX; k++) {
		const struct fetch_insn *in = &a->insn[k];

		switch (in->op) {
		case FOP_END:
			v->val = val;
			return;
		case FOP_REG:
			val = in->reg < USC_REG_NR ? regs[in->reg] : 0;
			break;
		case FOP_STACK:
			/* the page of the stack pointer is mapped; beyond it, the
			 * stack may end (the top of a coroutine's stack) */
			if (in->imm >= 0 && in->imm < 8 &&
			    (regs[USC_REG_SP] & 4095) + 8 * (uint64_t)in->imm + 8 <= 4096) {
				val = ((const uint64_t *)regs[USC_REG_SP])[in->imm];
			} else if (safe_read(e->c, &tmp, regs[USC_REG_SP] + 8 * (uint64_t)in->imm,
					     8) != 8) {
				goto fault;
			} else {
				val = tmp;
			}
			break;
		case FOP_STACKP:
			val = regs[USC_REG_SP];
			break;
		case FOP_RETVAL:
			val = regs[USC_REG_AX];
			break;
		case FOP_IMM:
		case FOP_MEM:
			val = (uint64_t)in->imm;
			break;
		case FOP_FOFFS:	/* as the kernel: probe address - probe offset + OFF */
			val = e->site->ip - e->site->offset + (uint64_t)in->imm;
			break;
		case FOP_VADDR:	/* the module's load bias + a link-time address */
			val = e->site->ip - e->site->vaddr + (uint64_t)in->imm;
			break;
		case FOP_ADD_REG:
			val += (in->reg < USC_REG_NR ? regs[in->reg] : 0) * in->size;
			break;
		case FOP_DEREF:
			if (safe_read(e->c, &tmp, val + (uint64_t)in->imm, 8) != 8)
				goto fault;
			val = tmp;
			break;
		case FOP_ST_RAW:
			break;
		case FOP_ST_MEM:
			tmp = 0;
			if (in->size == 0 || in->size > 8 ||
			    safe_read(e->c, &tmp, val + (uint64_t)in->imm, in->size) != in->size)
				goto fault;
			val = tmp;
			break;
		case FOP_COMM:
		case FOP_ST_STRING: {
			char *dst = e->rec + e->str_off;

			if (in->op == FOP_COMM) {
				for (int j = 0; j < 16; j++)
					dst[j] = 0;
				if (sys6(SYS_prctl, PR_GET_NAME, (long)dst, 0, 0, 0, 0))
					goto fault;
				n = 16;
			} else {
				n = safe_read(e->c, dst, val + (uint64_t)in->imm, INJ_STR_MAX);
				if (n <= 0)
					goto fault;
			}
			long len = 0;

			while (len < n && dst[len])
				len++;
			if (len == n) {
				if (n < INJ_STR_MAX)
					goto fault;	/* unreadable before its NUL */
				len = INJ_STR_MAX - 1;	/* cut, as the kernel does */
			}
			dst[len] = 0;
			v->kind = INJ_STR;
			v->str_off = (uint16_t)e->str_off;
			v->str_len = (uint16_t)len;
			e->str_off += (uint32_t)(len + 1 + 7) & ~7u;
			return;
		}
		case FOP_MOD_BF:
			val = (val >> in->bf_offset) &
			      (in->bf_width >= 64 ? ~0ULL : ((1ULL << in->bf_width) - 1));
			break;
		default:
			goto fault;
		}
	}
	v->val = val;
	return;
fault:
	v->kind = INJ_FAULT;
}

void agent_hit(struct inj_regs *r, struct inj_site *site)
{
	struct inj_ctl *c = (struct inj_ctl *)site->ctl;
	struct inj_slot *s;
	uint64_t key, head, tail, *counts, slot;
	uint32_t size = c->ring_size, pos, pad = 0, need, nargs, aux;
	uint32_t lo, hi;
	char *ring, *rec;

	if (*(volatile uint32_t *)c->alive != 1)
		return;		/* a forked child: not traced */
	if (c->key_mode == INJ_KEY_TID_AT_FS) {
		uint32_t tid;	/* glibc's, at the thread pointer + tid_off */

		__asm__ volatile("movl %%fs:(%1), %0" : "=r"(tid) : "r"((uint64_t)c->tid_off));
		key = tid;
	} else {
		key = fs_base(c);
	}
	s = key ? slot_get(c, key) : 0;
	if (!s) {
		__sync_fetch_and_add(&c->slot_full, 1);
		return;
	}
	slot = (uint64_t)(s - (struct inj_slot *)((char *)c + c->slots_off));
	counts = (uint64_t *)((char *)c + c->counts_off) + 2 * (slot * c->nsites + site->index);
	counts[0]++;
	if (!c->enabled)
		return;
	if (s->nest) {
		counts[1]++;
		return;
	}
	s->nest = 1;
	__asm__ volatile("" ::: "memory");

	nargs = site->nargs < INJ_MAX_ARGS ? site->nargs : INJ_MAX_ARGS;
	need = (uint32_t)(sizeof(struct inj_rec) + nargs * sizeof(struct inj_val) +
			  site->nstr * ((INJ_STR_MAX + 7) & ~7u));
	head = s->head;
	tail = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE);
	pos = (uint32_t)head & (size - 1);
	if (pos + need > size)
		pad = size - pos;
	if (head + pad + need - tail > size) {
		counts[1]++;
		goto out;
	}
	ring = (char *)c + c->rings_off + slot * size;
	if (pad) {
		*(uint32_t *)(ring + pos) = INJ_REC_PAD | pad;
		head += pad;
		pos = 0;
	}
	rec = ring + pos;

	struct inj_rec *h = (struct inj_rec *)rec;
	struct eval e = {.c = c, .site = site, .regs = r->r, .rec = rec,
			 .str_off = (uint32_t)(sizeof(*h) + nargs * sizeof(struct inj_val))};

	r->r[USC_REG_IP] = site->ip;
	if (c->use_rdpid) {
		uint64_t id;

		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
		__asm__ volatile("rdpid %0" : "=r"(id));
		aux = (uint32_t)id;
	} else {
		__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	}
	h->tsc = (uint64_t)hi << 32 | lo;
	h->cpu = aux & 0xfff;
	h->site = site->index;
	h->nvals = nargs;
	h->retaddr = site->ret_site ? *(const uint64_t *)r->r[USC_REG_SP] : 0;
	for (uint32_t i = 0; i < nargs; i++) {
		uint8_t reg = site->reg_only[i];

		if (reg < USC_REG_NR) {
			h->vals[i].kind = INJ_INT;
			h->vals[i].val = r->r[reg];
		} else {
			eval_arg(&e, &site->args[i], &h->vals[i]);
		}
	}
	h->len = (e.str_off + 7) & ~7u;
	__atomic_store_n(&s->head, head + h->len, __ATOMIC_RELEASE);
out:
	__asm__ volatile("" ::: "memory");
	s->nest = 0;
}
