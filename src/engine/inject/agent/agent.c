/* The inject engine's agent: the code a trampoline calls inside the traced
 * process.
 *
 * Compiled freestanding (no libc, no TLS, no globals, no relocations) into a
 * flat blob the tracer copies into the target. It runs on the traced thread's
 * own stack, below its red zone, with every register saved by the
 * trampoline. Its hot path takes no lock and makes no system call: a thread
 * finds its slot by its key (a compare-and-swap claims a free one on its
 * first hit), counts the hit, interprets the site's fetch programs with the
 * interpreter every engine shares (probe/fetch_eval.h) and appends one
 * record to its own ring. Memory behind a pointer is read with
 * process_vm_readv on the process itself, so a bad pointer is a fault
 * marker, never a crash: the only system call, and only for probes that
 * dereference.
 *
 * A site may also filter (`if COND`, with the filter interpreter every
 * engine shares: probe/filter_eval.h) and aggregate instead of recording:
 * count or histogram a value in its key's row, or pair a call's entry with
 * its return (latency), in the shared memory (inject_shared.h). */
#include "engine/inject/agent/hit.h"
#include "engine/inject/objset.h"

void agent_hit(struct inj_regs *regs, struct inj_site *site) HIDDEN;
uint32_t agent_fast(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));	/* fast.c */
uint32_t agent_fast_lat_in(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));
uint32_t agent_fast_lat_out(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));
uint32_t agent_fast_rec(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));
uint32_t agent_script_fast(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));	/* script.c */
uint32_t agent_script_units(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));	/* script.c */

/* The tracer reads this header at the blob's start (inject_shared.h). */
__attribute__((section(".agent_hdr"), used)) HIDDEN const struct agent_hdr agent_hdr = {
	.magic = INJ_MAGIC,
	.hit_off = (uint64_t)&agent_hit,	/* the blob is linked at 0 */
	.fast_off = (uint64_t)&agent_fast,
	.fast_rec_off = (uint64_t)&agent_fast_rec,
	.fast_lat_in_off = (uint64_t)&agent_fast_lat_in,
	.fast_lat_out_off = (uint64_t)&agent_fast_lat_out,
	.script_fast_off = (uint64_t)&agent_script_fast,
	.script_units_off = (uint64_t)&agent_script_units,
	.py_pending_off = (uint64_t)&agent_py_pending,
	.trap_off = (uint64_t)&agent_trap,
};

struct iov {
	void *base;
	uint64_t len;
};

/* What a hit reads memory as: its process; and who it is. */
struct env {
	uint32_t tgid;
	uint32_t tid;
	uint64_t sp;
	const struct inj_ctl *c;
	struct inj_slot *slot;		/* the thread's ($ustack's readable range) */
	const struct py_hit *py;	/* a py: probe's hit (agent/python.c), or 0 */
};

/* Read len bytes at addr without faulting: the count read (short at the
 * first unreadable page), or < 0. */
static long safe_read(const struct env *env, void *dst, uint64_t addr, uint64_t len)
{
	struct iov l = {dst, len}, r = {(void *)addr, len};

	return sys6(SYS_process_vm_readv, env->tgid, (long)&l, 1, (long)&r, 1, 0);
}

static int read_user(const struct env *env, void *dst, uint64_t addr, uint64_t len)
{
	return safe_read(env, dst, addr, len) != (long)len;
}

/* The page of the stack pointer is mapped: read there directly; beyond it
 * the stack may end (the top of a coroutine's stack). */
static int read_stack(const struct env *env, uint64_t *dst, uint64_t addr)
{
	if (addr >= env->sp && (env->sp & 4095) + (addr - env->sp) + 8 <= 4096) {
		*dst = *(const uint64_t *)addr;
		return 0;
	}
	return read_user(env, dst, addr, 8);
}


static inline uint32_t this_cpu(const struct inj_ctl *c)
{
	uint32_t cpu;

	(void)stamp(c, &cpu);
	return cpu;
}

#define FETCH_INLINE static inline
#define FETCH_STEP fetch_step
#define FETCH_READ(env, dst, addr, len) read_user(env, dst, addr, len)
#define FETCH_READ_STACK(env, dst, addr) read_stack(env, dst, addr)
#define FETCH_PID(env) ((const struct env *)(env))->tgid
#define FETCH_TID(env) ((const struct env *)(env))->tid
#define FETCH_CPU(env) this_cpu(((const struct env *)(env))->c)
#include "probe/fetch_eval.h"

static struct inj_slot *slot_get(struct inj_ctl *c, uint64_t key, uint32_t tgid)
{
	struct inj_slot *slots = (struct inj_slot *)((char *)c + c->slots_off);
	uint32_t mask = c->nslots - 1, h = slot_hash(c, key);

	for (uint32_t i = 0; i <= mask; i++) {
		struct inj_slot *s = &slots[(h + i) & mask];
		uint64_t k = s->key;

		if (k == key && s->tgid == tgid)
			return s;
		if (k)
			continue;	/* (a forked child's thread keyed by the fs base
					 * it shares with its parent's: a slot of its own) */
		if (__sync_bool_compare_and_swap(&s->key, 0, key) || s->key == key) {
			if (c->key_mode == INJ_KEY_TID_AT_FS)
				s->tid = (uint32_t)key;
			else if (!s->tid)
				s->tid = (uint32_t)sys6(SYS_gettid, 0, 0, 0, 0, 0, 0);
			s->tgid = tgid;
			s->stk_lo = s->stk_hi = 0;
			s->stk_end = 0;
			s->py_ts = 0;
			s->py_key = 0;
			return s;
		}
	}
	return 0;
}

/* The calling thread's slot, by its key (glibc's tid at the thread
 * pointer, or the thread pointer itself), or 0 (no room). */
ALWAYS struct inj_slot *this_slot(struct inj_ctl *c, uint32_t tgid)
{
	uint64_t key;

	if (c->key_mode == INJ_KEY_TID_AT_FS) {
		uint32_t tid;	/* glibc's, at the thread pointer + tid_off */

		__asm__ volatile("movl %%fs:(%1), %0" : "=r"(tid) : "r"((uint64_t)c->tid_off));
		key = tid;
	} else {
		key = fs_base(c);
	}
	return key ? slot_get(c, key, tgid) : 0;
}

static inline __attribute__((always_inline)) void copy_bytes(void *dst, const void *src,
							     uint64_t n)
{
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

/* $ustack: the registers and up to `want` bytes of the stack from the
 * stack pointer up, into the record at *off (fetch_stack_hdr). The part of
 * the stack known readable (the slot's range: the thread is using the page
 * of its stack pointer, and what process_vm_readv could read above it) is
 * copied directly; otherwise process_vm_readv reads it, stopping at the
 * end of the stack's mapping, and the range grows. So the copy never
 * faults, and a thread's first hits alone make a system call. */
static void copy_stack(const struct env *env, const uint64_t *regs, int64_t imm, char *rec,
		       uint32_t *off, struct inj_val *v, uint8_t why)
{
	struct fetch_stack_hdr *h = (struct fetch_stack_hdr *)(rec + *off);
	struct inj_slot *s = env->slot;
	uint64_t sp = regs[USC_REG_SP], want = fetch_stack_bytes(imm), n;
	char *dst = (char *)(h + 1);

	for (uint32_t i = 0; i < USC_REG_NR; i++)
		h->regs[i] = regs[i];
	h->frames = (uint16_t)fetch_stack_frames(imm);
	h->why = why;
	if (sp >= s->stk_lo && sp < s->stk_hi && (sp + want <= s->stk_hi || s->stk_end)) {
		n = s->stk_hi - sp < want ? s->stk_hi - sp : want;
		copy_bytes(dst, (const void *)sp, n);
	} else {
		long got = safe_read(env, dst, sp, want);
		uint64_t lo = sp & ~4095ULL, hi;
		uint32_t end;

		n = got > 0 ? (uint64_t)got : 0;
		hi = sp + n;
		end = n < want;
		if (s->stk_hi && lo <= s->stk_hi && hi >= s->stk_lo) {
			/* overlaps what was readable: one mapping, both readable */
			if (s->stk_lo < lo)
				lo = s->stk_lo;
			if (s->stk_hi > hi) {
				hi = s->stk_hi;
				end = s->stk_end;
			}
		}
		s->stk_lo = lo;
		s->stk_hi = hi;
		s->stk_end = end;
	}
	h->len = (uint32_t)n;
	h->end = n == want ? FETCH_STACK_FULL : n ? FETCH_STACK_MAPEND : FETCH_STACK_UNREAD;
	v->kind = INJ_STACK;
	v->str_off = (uint16_t)*off;
	v->str_len = (uint16_t)(sizeof(*h) + n);
	*off += (uint32_t)(sizeof(*h) + n + 7) & ~7u;
}

/* Does the site's $ustack walk where the probe runs? */
static inline int walks(const struct env *env, int64_t imm)
{
	return env->c->stk_off && !((uint64_t)imm & FETCH_STACK_COPY);
}

/* $ustack into the record at *off: walked (agent/ustack.c), or copied
 * with --stack-mode copy and when the walk falls back (why). A count's
 * hit recorded because its walk fell back (the slot's stk_fb) is copied
 * at once; one that found no room in the stack table is walked again. */
static void store_stack(const struct env *env, const uint64_t *regs, int64_t imm, char *rec,
			uint32_t *off, struct inj_val *v)
{
	struct fetch_walk_hdr *h = (struct fetch_walk_hdr *)(rec + *off);
	uint8_t why = (uint8_t)env->slot->stk_fb;

	if (walks(env, imm) && (!why || why == STACK_FB_NR)) {
		why = agent_ustack_walk((struct inj_ctl *)env->c, env->slot, env->tgid, regs,
					fetch_stack_frames(imm), h, (uint64_t *)(h + 1));
		if (why == STACK_FB_NONE) {
			v->kind = INJ_WALK;
			v->str_off = (uint16_t)*off;
			v->str_len = (uint16_t)(sizeof(*h) + 8 * (uint32_t)h->n);
			*off += v->str_len;
			return;
		}
	}
	copy_stack(env, regs, imm, rec, off, v, why == STACK_FB_NR ? STACK_FB_TABLE : why);
	/* mappings the tracer has not told us of: it is woken to read them */
	if ((why == STACK_FB_NOMODULE || why == STACK_FB_NOPROC) && env->c->asleep)
		agent_ring((struct inj_ctl *)env->c);
}

/* A count's $ustack: its walk's id in the stack table (INJ_STACKID). A
 * walk that falls back, or finds no room, leaves why in the slot's
 * stk_fb: the hit is recorded instead (aggregate). */
static void count_stack(const struct env *env, const uint64_t *regs, int64_t imm,
			struct inj_val *v)
{
	struct inj_slot *s = env->slot;
	uint64_t id;
	uint8_t why;

	v->kind = INJ_FAULT;
	if (!walks(env, imm)) {
		s->stk_fb = STACK_FB_NONE + 0x100;	/* recorded, copied as asked */
		return;
	}
	why = agent_ustack_count((struct inj_ctl *)env->c, s, env->tgid, regs,
				 fetch_stack_frames(imm), &id);
	if (why || !id) {
		s->stk_fb = why ? why : STACK_FB_NR;
		return;
	}
	v->kind = INJ_STACKID;
	v->val = id;
}

/* One argument into v, strings into the record at *str_off; prev is the
 * value of the argument before it (FOP_ST_BYTES's count). */
static void eval_arg(const struct env *env, const struct fetch_where *w, const uint64_t *regs,
		     const struct inj_arg *a, struct inj_val *v, char *rec, uint32_t *str_off,
		     uint64_t prev)
{
	uint32_t k = 0;
	uint64_t val = 0;
	long n, len;
	int st = FETCH_DONE;
	char *dst;

	v->kind = INJ_INT;
	v->val = 0;
	for (k = 0; k < a->ninsn && k < USC_FETCH_MAX; k++) {
		st = fetch_step(&a->insn[k], regs, w, &val, (void *)env);
		if (st != FETCH_NEXT)
			break;
	}
	switch (st) {
	case FETCH_NEXT:
	case FETCH_DONE:
		v->val = val;
		return;
	case FETCH_NULL:
		v->kind = INJ_NULL;
		return;
	case FETCH_STACK:
		if (env->slot) {
			store_stack(env, regs, a->insn[0].imm, rec, str_off, v);
			return;
		}
		break;
	case FETCH_PYSTACK:	/* the thread's Python frames (agent/python.c) */
		agent_pystack(env->c, env->slot, a->insn[0].imm, rec, str_off, v);
		return;
	case FETCH_PYVALUE:	/* a py: probe's (agent/python.c) */
		if (env->py) {
			agent_py_value(env->c, env->py, &a->insn[0], v, rec, str_off);
			return;
		}
		break;
	case FETCH_BYTES:	/* counted: as many as could be read */
		dst = rec + *str_off;
		len = fetch_bytes_len(&a->insn[k], prev, INJ_STR_MAX - 1);
		n = len ? safe_read(env, dst, val, (uint64_t)len) : 0;
		if (n < 0 || (len && !n))
			break;
		dst[n] = 0;
		v->kind = INJ_STR;
		v->str_off = (uint16_t)*str_off;
		v->str_len = (uint16_t)n;
		*str_off += (uint32_t)(n + 1 + 7) & ~7u;
		return;
	case FETCH_STRING:
	case FETCH_COMM:
		dst = rec + *str_off;
		if (st == FETCH_COMM) {
			for (int j = 0; j < 16; j++)
				dst[j] = 0;
			if (sys6(SYS_prctl, PR_GET_NAME, (long)dst, 0, 0, 0, 0))
				break;
			n = 16;
		} else {
			n = safe_read(env, dst, val, INJ_STR_MAX);
			if (n <= 0)
				break;
		}
		len = 0;
		while (len < n && dst[len])
			len++;
		if (len == n) {
			if (n < INJ_STR_MAX)
				break;		/* unreadable before its NUL */
			len = INJ_STR_MAX - 1;	/* cut, as the kernel does */
		}
		dst[len] = 0;
		v->kind = INJ_STR;
		v->str_off = (uint16_t)*str_off;
		v->str_len = (uint16_t)len;
		*str_off += (uint32_t)(len + 1 + 7) & ~7u;
		return;
	default:
		break;
	}
	v->kind = INJ_FAULT;
}

/* ---- filters -------------------------------------------------------------- */

/* The values a filter reads: a record's, or a key's scratch. */
struct fenv {
	const struct inj_val *vals;
	const char *base;		/* strings are at base + str_off */
	uint32_t n;
};

static inline int fenv_int(const struct fenv *f, uint32_t i, uint64_t *u)
{
	if (i >= f->n || f->vals[i].kind != INJ_INT)
		return 1;
	*u = f->vals[i].val;
	return 0;
}

static inline int fenv_str(const struct fenv *f, uint32_t i, const char **s, uint32_t *n)
{
	if (i >= f->n || f->vals[i].kind != INJ_STR)
		return 1;
	*s = f->base + f->vals[i].str_off;
	*n = f->vals[i].str_len;
	return 0;
}

#define FILTER_INLINE static inline
#define FILTER_STEP filter_step
#define FILTER_INT(env, i, u) fenv_int(env, i, u)
#define FILTER_STR(env, i, s, n) fenv_str(env, i, s, n)
#define FILTER_GLOB(env, strs, off, pn, s, sn) filter_glob_full((strs) + (off), pn, s, sn)
#include "probe/filter_eval.h"

static int filter_pass(const struct usc_filter *f, const struct inj_val *vals, const char *base,
		       uint32_t n)
{
	struct fenv fe = {vals, base, n};
	uint32_t stack = 0;

	for (uint32_t k = 0; k < f->n && k < USC_FILTER_MAX; k++)
		filter_step(&f->insn[k], f->strs, &stack, &fe);
	return stack & 1;
}

/* ---- aggregation ------------------------------------------------------------ */


/* The row of the key in the thread's scratch (keylen bytes, whole words),
 * claimed when new; INJ_NO_ROW when the table is full. */
static uint32_t row_of(struct inj_ctl *c, const struct inj_site *site, const uint64_t *key,
		       uint32_t keylen)
{
	char *dir = (char *)c + c->agg_dir_off;
	uint32_t nw = keylen / 8, mask = c->agg_nslots - 1;
	uint64_t h = agg_hash(site->index, key, nw);

	for (uint32_t i = 0, at = (uint32_t)h & mask; i <= mask; i++, at = (at + 1) & mask) {
		struct inj_dir *e = (struct inj_dir *)(dir + (uint64_t)at * c->agg_dir_size);
		uint32_t st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);

		if (st == INJ_DIR_FREE) {
			uint32_t row;

			if (__atomic_load_n(&c->agg_used, __ATOMIC_RELAXED) >= c->agg_max_rows)
				return INJ_NO_ROW;
			if (!__sync_bool_compare_and_swap(&e->state, INJ_DIR_FREE, INJ_DIR_BUSY)) {
				st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
			} else {
				row = __sync_fetch_and_add(&c->agg_used, 1);
				if (row >= c->agg_max_rows) {
					/* lost the race for the last row: the entry goes back */
					__atomic_store_n(&e->state, INJ_DIR_FREE, __ATOMIC_RELEASE);
					return INJ_NO_ROW;
				}
				e->site = site->index;
				e->row = row;
				e->keylen = keylen;
				e->hash = h;
				for (uint32_t w = 0; w < nw; w++)
					((uint64_t *)(e + 1))[w] = key[w];
				__atomic_store_n(&e->state, INJ_DIR_READY, __ATOMIC_RELEASE);
				return row;
			}
		}
		/* another thread is writing this entry: wait for it, briefly */
		for (uint32_t spin = 0; st == INJ_DIR_BUSY && spin < 100000; spin++) {
			__asm__ volatile("pause");
			st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		}
		if (st != INJ_DIR_READY)
			return INJ_NO_ROW;
		if (e->hash != h || e->site != site->index || e->keylen != keylen)
			continue;
		uint32_t w = 0;

		while (w < nw && ((const uint64_t *)(e + 1))[w] == key[w])
			w++;
		if (w == nw)
			return e->row;
	}
	return INJ_NO_ROW;
}


ALWAYS void row_add(struct inj_ctl *c, uint64_t slot, uint32_t row, int64_t v)
{
	val_add(c, (struct agg_val *)((char *)c + c->agg_vals_off +
				      (slot * c->agg_max_rows + row) * c->agg_val_size),
		(uint64_t *)((char *)c + c->agg_touched_off) +
		slot * ((c->agg_max_rows + 63) / 64) + row / 64, row, v);
}

/* Evaluate the site's arguments into vals (strings after them in buf). */
static void eval_args(const struct env *env, const struct inj_site *site, uint64_t *regs,
		      struct inj_val *vals, char *buf, uint32_t str_off)
{
	struct fetch_where w = {site->ip, site->offset, site->vaddr};
	uint32_t nargs = site->nargs < INJ_MAX_ARGS ? site->nargs : INJ_MAX_ARGS;

	for (uint32_t i = 0; i < nargs; i++) {
		uint8_t reg = site->reg_only[i];

		if (reg < USC_REG_NR) {
			vals[i].kind = INJ_INT;
			vals[i].val = regs[reg];
		} else if (site->args[i].insn[0].op == FOP_USTACK && env->slot) {
			count_stack(env, regs, site->args[i].insn[0].imm, &vals[i]);
		} else {
			eval_arg(env, &w, regs, &site->args[i], &vals[i], buf, &str_off,
				 i ? vals[i - 1].val : 0);
		}
	}
}

/* The key of args [0, agg_nkey) into key (agg/agg_shared.h's layout), whole
 * words at a time: a word written in bytes and read back whole (the hash)
 * would stall on store forwarding. */
static void make_key(const struct inj_site *site, const struct inj_val *vals, const char *buf,
		     uint64_t *key)
{
	uint32_t at = 0, str_words = 1 + site->agg_str_max / 8, nw = site->agg_keylen / 8;

	for (uint32_t i = 0; i < site->agg_nkey && i < INJ_MAX_ARGS; i++) {
		const struct inj_val *v = &vals[i];
		uint32_t len = site->arg_str[i] ? str_words : 2;

		if (at + len > nw)
			break;
		if (v->kind == INJ_FAULT || v->kind == INJ_NULL) {
			key[at] = v->kind == INJ_FAULT ? AGG_K_FAULT : AGG_K_NULL;
			for (uint32_t w = 1; w < len; w++)
				key[at + w] = 0;
		} else if (v->kind == INJ_STACKID) {
			key[at] = AGG_K_STACK;	/* the tracer makes the id its own */
			key[at + 1] = v->val;
		} else if (site->arg_str[i] && v->kind == INJ_STR) {
			uint32_t n = v->str_len < site->agg_str_max ? v->str_len : site->agg_str_max;
			const unsigned char *src = (const unsigned char *)buf + v->str_off;

			key[at] = AGG_K_STR | (uint64_t)(v->str_len > site->agg_str_max) << 8 |
				  (uint64_t)n << 16;
			for (uint32_t w = 0; w + 1 < len; w++) {
				uint64_t word = 0;

				for (uint32_t b = 0; b < 8 && 8 * w + b < n; b++)
					word |= (uint64_t)src[8 * w + b] << (8 * b);
				key[at + 1 + w] = word;
			}
		} else {
			key[at] = AGG_K_INT;
			key[at + 1] = (uint64_t)agg_value_of(v->val, site->arg_size[i], 0);
		}
		at += len;
	}
	for (; at < nw; at++)
		key[at] = 0;	/* a key of none: one word of zeros */
}

/* Latency: the call of func ends; its frame, and those above it (calls
 * whose return was not seen: a longjmp), go. As src/flow pairs events. */
ALWAYS void lat_return(struct inj_ctl *c, struct inj_lat *l, uint64_t slot, uint32_t func,
		       uint64_t *counts)
{
	uint32_t n = l->n < INJ_LAT_DEPTH ? l->n : INJ_LAT_DEPTH;

	for (uint32_t i = n; i-- > 0;) {
		if (l->f[i].func != func)
			continue;
		uint64_t dt = rd_tsc() - l->f[i].tsc;
		uint32_t row = l->f[i].row;

		l->n = i;
		if (row == INJ_NO_ROW)
			return;		/* its key found the table full (counted) */
		row_add(c, slot, row, tsc_units(c, dt));
		return;
	}
	(void)counts;	/* no entry seen: tracing began inside the call */
}

/* Latency: a call of func begins (row: its key's, or INJ_NO_ROW). */
ALWAYS void lat_entry(struct inj_lat *lat, uint32_t func, uint32_t row, uint64_t *counts)
{
	uint32_t n = lat->n;

	if (n >= INJ_LAT_DEPTH) {
		/* deeper than we keep: the outermost call goes */
		for (uint32_t i = 1; i < INJ_LAT_DEPTH; i++)
			lat->f[i - 1] = lat->f[i];
		n = INJ_LAT_DEPTH - 1;
		counts[1]++;
	}
	lat->f[n].func = func;
	lat->f[n].row = row;
	lat->n = n + 1;
	lat->f[n].tsc = rd_tsc();	/* last: the call's time starts here */
}

static void record(struct inj_ctl *c, struct inj_slot *s, uint64_t *counts,
		   const struct inj_site *site, const struct inj_site *at, uint64_t *regs,
		   const struct env *env, uint64_t verdict);

/* The site aggregates: filter, then count, histogram or pair. */
static void aggregate(struct inj_ctl *c, struct inj_slot *s, uint64_t slot, uint64_t *counts,
		      const struct inj_site *site, uint64_t *regs, const struct env *env)
{
	char *scr = (char *)c + c->agg_scratch_off + slot * INJ_SCRATCH;
	struct inj_val *vals = (struct inj_val *)scr;
	uint64_t *key = (uint64_t *)(scr + INJ_SCRATCH - AGG_KEY_MAX);
	uint32_t str_off = INJ_MAX_ARGS * sizeof(struct inj_val);
	struct inj_lat *lat = (struct inj_lat *)((char *)c + c->agg_lat_off) + slot;
	uint64_t fkey[2 * INJ_FAST_KEYS], *k;
	uint32_t row;
	int64_t v = 0;

	if (site->agg == INJ_AGG_RETURN) {
		lat_return(c, lat, slot, site->agg_func, counts);
		return;
	}
	if (site->agg_fast) {
		/* integers in registers: the key from them, on the stack; a key
		 * of none is one word of zeros (agg_keylen 8), as make_key and
		 * agent_fast write it */
		fkey[0] = 0;
		for (uint32_t i = 0; i < site->agg_nkey && i < INJ_FAST_KEYS; i++) {
			fkey[2 * i] = AGG_K_INT;
			fkey[2 * i + 1] = (uint64_t)agg_value_of(regs[site->reg_only[i] & 15],
								 site->arg_size[i], 0);
		}
		k = fkey;
		if (site->agg_value >= 0) {
			uint32_t vi = (uint32_t)site->agg_value & 15;

			v = agg_value_of(regs[site->reg_only[vi] & 15], site->arg_size[vi],
					 site->arg_sign[vi]);
		}
	} else {
		/* strings go between the values and the key: INJ_MAX_ARGS of them fit */
		s->stk_fb = 0;
		eval_args(env, site, regs, vals, scr, str_off);
		if (site->filter.n && !filter_pass(&site->filter, vals, scr, site->nargs))
			return;
		if (s->stk_fb) {
			/* a stack not counted here: the hit goes to uscope */
			s->stk_fb &= 0xff;
			record(c, s, counts, site, site, regs, env, 0);
			s->stk_fb = 0;
			return;
		}
		if (site->agg == INJ_AGG_ROW && site->agg_value >= 0) {
			uint32_t vi = (uint32_t)site->agg_value;

			if (vi >= INJ_MAX_ARGS || vals[vi].kind != INJ_INT) {
				counts[3]++;	/* the value could not be read */
				return;
			}
			v = agg_value_of(vals[vi].val, site->arg_size[vi], site->arg_sign[vi]);
		}
		if (site->agg_nkey == 1 && vals[0].kind == INJ_STACKID) {
			/* a stack alone: the rows of the stacks the thread saw last */
			__typeof__(&s->kc[0]) kc = &s->kc[(vals[0].val ^ site->index) &
							  (INJ_KEY_CACHE - 1)];

			if (kc->row1 && kc->v == vals[0].val && kc->site == site->index) {
				row_add(c, slot, kc->row1 - 1, v);
				return;
			}
			make_key(site, vals, scr, key);
			row = row_of(c, site, key, site->agg_keylen);
			if (row == INJ_NO_ROW) {
				counts[2]++;	/* the table is full */
				return;
			}
			kc->v = vals[0].val;
			kc->site = site->index;
			kc->row1 = row + 1;
			row_add(c, slot, row, v);
			return;
		}
		make_key(site, vals, scr, key);
		k = key;
	}
	row = row_of(c, site, k, site->agg_keylen);
	if (row == INJ_NO_ROW)
		counts[2]++;	/* the table is full */
	if (site->agg == INJ_AGG_ENTRY)
		lat_entry(lat, site->agg_func, row, counts);
	else if (row != INJ_NO_ROW)
		row_add(c, slot, row, v);
}

/* ---- objtrace --------------------------------------------------------------- */

/* The SysV argument registers, in order. */
static const uint8_t obj_regs[INJ_OBJ_NREGS] = {USC_REG_DI, USC_REG_SI, USC_REG_DX, USC_REG_CX,
						USC_REG_R8, USC_REG_R9};

/* A site's verdict on a hit (enum inj_obj_role): FROM 1 (followed) or 2
 * (the set is full: counted), UNTIL 1 (released), MATCH the mask of the
 * argument registers that hold a followed object; 0: no record. */
static uint64_t obj_verdict(struct inj_ctl *c, const struct inj_site *site, uint64_t *regs,
			    const struct env *env, uint64_t *counts)
{
	struct objset *o = (struct objset *)((char *)c + c->obj_off);
	struct fetch_where w = {site->ip, site->offset, site->vaddr};
	struct inj_val v = {0};
	uint64_t mask = 0;
	uint32_t off = 0;
	char none[8];
	int r;

	if (!c->obj_off)
		return 0;
	if (site->obj == INJ_OBJ_MATCH) {
		for (uint32_t i = 0; i < INJ_OBJ_NREGS; i++)
			if ((site->obj_regs >> i & 1) && objset_find(o, regs[obj_regs[i]]) >= 0)
				mask |= 1u << i;
		return mask;
	}
	/* the object: the first argument, an integer (the CLI sees to it: a
	 * string would not fit in none) */
	if (site->nstr)
		return 0;
	if (site->reg_only[0] < USC_REG_NR)
		v.val = regs[site->reg_only[0]];
	else
		eval_arg(env, &w, regs, &site->args[0], &v, none, &off, 0);
	if (v.kind != INJ_INT)
		return 0;
	if (site->obj == INJ_OBJ_UNTIL)
		return (uint64_t)objset_del(o, v.val);
	r = objset_add(o, v.val);
	if (r == OBJSET_FULL)
		counts[2]++;	/* reported: the set is full */
	return r == OBJSET_FULL ? 2 : r ? 1 : 0;
}

/* A MATCH site's record: the field of the first followed argument only
 * (field1..field6 follow arg1..arg6); the others are not read. */
static inline int obj_skip(const struct inj_site *site, uint64_t verdict, uint32_t i)
{
	uint64_t first = verdict & -verdict;

	return site->obj == INJ_OBJ_MATCH && i >= INJ_OBJ_NREGS && i < 2 * INJ_OBJ_NREGS &&
	       !((first >> (i - INJ_OBJ_NREGS)) & 1);
}

/* Room for pad + need bytes after head in the ring: 1, or 0 (the record
 * is lost, counted by the caller). Recording
 * lossless, the thread waits for the tracer, within a bound
 * (agent_wait_room). The flight recorder drops the ring's oldest records
 * instead. */
static int room(struct inj_ctl *c, struct inj_slot *s, const char *ring, uint64_t head,
		uint32_t pad, uint32_t need, uint64_t *counts)
{
	uint32_t size = c->ring_size;
	uint64_t tail = s->tail_seen;

	if (__builtin_expect(head + pad + need - tail <= size, 1))
		return 1;
	tail = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE);
	if (head + pad + need - tail <= size) {
		s->tail_seen = tail;
		return 1;
	}
	if (c->overwrite) {
		/* nobody reads meanwhile: the producer moves the tail itself */
		while (head + pad + need - tail > size && tail != head) {
			uint32_t len = inj_rec_len(*(const uint32_t *)(ring + (tail & (size - 1))));

			if (!len || len > head - tail || (len & 7))
				tail = head;	/* not what we wrote: start again */
			else
				tail += len;
		}
		__atomic_store_n(&s->tail, tail, __ATOMIC_RELEASE);
		s->tail_seen = tail;
		return 1;
	}
	return agent_wait_room(c, s, head, pad + need, counts);
}

/* The tracer sleeps: wake it once the ring holds a watermark's bytes. The
 * tail seen last (never ahead of the tracer's) bounds the fill from above,
 * so only when it says "due" is the tracer's tail read: its line moves
 * between the CPUs at each record the tracer has read, and reading it at
 * every hit while the tracer slept cost ~5 ns a hit (bench/README). */
static inline void ring_if_due(struct inj_ctl *c, struct inj_slot *s, uint64_t head)
{
	uint64_t tail;

	if (head - s->tail_seen < c->watermark)
		return;
	tail = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE);
	s->tail_seen = tail;
	if (head - tail >= c->watermark)
		agent_ring(c);
}

/* Append the record of `site` (the registers at the hit at `at`) to the
 * slot's ring; counts its loss when the ring is full. */
static void record(struct inj_ctl *c, struct inj_slot *s, uint64_t *counts,
		   const struct inj_site *site, const struct inj_site *at, uint64_t *regs,
		   const struct env *env, uint64_t verdict)
{
	uint32_t size = c->ring_size, pos, pad = 0, need, nargs;
	uint64_t head, slot = (uint64_t)(s - (struct inj_slot *)((char *)c + c->slots_off));
	struct fetch_where w = {site->ip, site->offset, site->vaddr};
	char *ring, *rec;

	nargs = site->nargs < INJ_MAX_ARGS ? site->nargs : INJ_MAX_ARGS;
	need = (uint32_t)(sizeof(struct inj_rec) + nargs * sizeof(struct inj_val) +
			  site->nstr * ((INJ_STR_MAX + 7) & ~7u) + site->stack_need);
	head = s->head;
	pos = (uint32_t)head & (size - 1);
	if (pos + need > size)
		pad = size - pos;
	ring = (char *)c + c->rings_off + slot * size;
	if (!room(c, s, ring, head, pad, need, counts)) {
		counts[INJ_C_LOST]++;
		return;
	}
	if (pad) {
		*(uint32_t *)(ring + pos) = INJ_REC_PAD | pad;
		head += pad;
		pos = 0;
	}
	rec = ring + pos;

	struct inj_rec *h = (struct inj_rec *)rec;
	uint32_t str_off = (uint32_t)(sizeof(*h) + nargs * sizeof(struct inj_val));

	h->tsc = stamp(c, &h->cpu);
	h->site = site->index;
	h->nvals = nargs;
	/* the return address, where the probe returns from: at the ret that
	 * fired (a tail call delivered at its callee's return: that ret's) */
	h->retaddr = site->ret_site ? *(const uint64_t *)regs[USC_REG_SP] : 0;
	(void)at;
	for (uint32_t i = 0; i < nargs; i++) {
		uint8_t reg = site->reg_only[i];

		if (site->obj && (i == site->obj_verdict || obj_skip(site, verdict, i))) {
			h->vals[i].kind = i == site->obj_verdict ? INJ_INT : INJ_FAULT;
			h->vals[i].val = verdict;
		} else if (reg < USC_REG_NR) {
			h->vals[i].kind = INJ_INT;
			h->vals[i].val = regs[reg];
		} else {
			eval_arg(env, &w, regs, &site->args[i], &h->vals[i], rec, &str_off,
				 i ? h->vals[i - 1].val : 0);
		}
	}
	h->len = (str_off + 7) & ~7u;
	if (site->filter.n && !filter_pass(&site->filter, h->vals, rec, nargs))
		return;		/* filtered out: not published */
	__atomic_store_n(&s->head, head + h->len, __ATOMIC_RELEASE);
	if (__builtin_expect(c->asleep, 0))
		ring_if_due(c, s, head + h->len);
}

/* What the site does with a hit: record it, or aggregate it; a site that
 * follows objects first its verdict (objtrace), and none is no record. */
static inline void deliver(struct inj_ctl *c, struct inj_slot *s, uint64_t slot, uint64_t *counts,
			   const struct inj_site *site, const struct inj_site *at, uint64_t *regs,
			   const struct env *env)
{
	uint64_t verdict = 0;

	if (site->script) {	/* uscope script: the program (agent/script.c) */
		agent_script(c, s, slot, counts, site, regs, env->tgid);
		return;
	}
	if (site->obj && !(verdict = obj_verdict(c, site, regs, env, counts)))
		return;
	if (site->agg)
		aggregate(c, s, slot, counts, site, regs, env);
	else
		record(c, s, counts, site, at, regs, env, verdict);
}

void agent_hit(struct inj_regs *r, struct inj_site *site)
{
	struct inj_ctl *c = (struct inj_ctl *)site->ctl;
	struct inj_slot *s;
	uint64_t *counts, slot, sp = r->r[USC_REG_SP];
	uint32_t tgid;
	struct env env;

	if (__builtin_expect(owner_died(site->owner), 0)) {
		agent_let_go(c);	/* the tracer has gone */
		return;
	}
	if (__builtin_expect(site->kind >= INJ_PYHOOK, 0)) {
		if (site->kind == INJ_PYHOOK)
			agent_py_hook(c);	/* a thread took the GIL (py: probes) */
		else
			agent_py_sync(c);	/* CPython ends ($pystack) */
		return;
	}
	tgid = agent_self(c);
	env = (struct env){tgid, 0, sp, c, 0, 0};
	if (!tgid)
		return;		/* a forked child not followed: not traced */
	s = this_slot(c, tgid);
	if (!s) {
		__sync_fetch_and_add(&c->slot_full, 1);
		return;
	}
	env.tid = s->tid;
	env.slot = s;
	slot = (uint64_t)(s - (struct inj_slot *)((char *)c + c->slots_off));
	counts = (uint64_t *)((char *)c + c->counts_off) +
		 INJ_NCOUNTS * (slot * c->nsites + site->index);
	counts[0]++;
	if (!c->enabled)
		return;
	if (s->nest) {
		counts[1]++;
		return;
	}
	s->nest = 1;
	__asm__ volatile("" ::: "memory");

	r->r[USC_REG_IP] = site->ip;
	/* tail calls whose frame is gone (deeper than this one) never returned
	 * through a ret we probe: a longjmp, an unwind */
	while (s->npend && s->npend <= INJ_PENDING && s->pend[s->npend - 1].sp < sp) {
		s->npend--;
		s->dropped++;
	}
	if (site->kind == INJ_TAIL) {
		if (s->npend < INJ_PENDING) {
			s->pend[s->npend].sp = sp;
			s->pend[s->npend].site = site->index;
			s->npend++;
		} else {
			counts[1]++;	/* no room: its return goes unseen */
		}
	} else if (site->kind == INJ_CONT) {
		/* the ret that returns from the frame of the tail calls waiting on
		 * this stack pointer: their functions return now */
		const struct inj_site *sites = (const struct inj_site *)((char *)c + c->sites_off);

		while (s->npend && s->npend <= INJ_PENDING && s->pend[s->npend - 1].sp == sp) {
			uint32_t t = s->pend[--s->npend].site;

			if (t < c->nsites)
				deliver(c, s, slot, (uint64_t *)((char *)c + c->counts_off) +
					INJ_NCOUNTS * (slot * c->nsites + t), &sites[t], site,
					r->r, &env);
		}
	} else {
		deliver(c, s, slot, counts, site, site, r->r, &env);
	}
	__asm__ volatile("" ::: "memory");
	s->nest = 0;
}

/* A py: probe's hit that is not counted by its function alone: delivered
 * as agent_hit's, with no registers (kept out of the count's path: zeroing
 * them costs more than the count). */
static __attribute__((noinline)) void py_deliver(struct inj_ctl *c, struct inj_slot *s,
						 uint32_t tgid, uint64_t slot, uint64_t *counts,
						 const struct inj_site *site, const struct py_hit *h)
{
	struct inj_regs r = {{0}};
	struct env env = {tgid, s->tid, 0, c, s, h};

	deliver(c, s, slot, counts, site, site, r.r, &env);
}

/* A py: probe's site fires (agent/python.c, with the GIL held): as
 * agent_hit, with no registers. */
void agent_py_hit(struct inj_ctl *c, uint32_t idx, const struct py_hit *h)
{
	struct inj_site *site = (struct inj_site *)((char *)c + c->sites_off) + idx;
	struct inj_slot *s;
	uint64_t *counts, slot;
	uint32_t tgid = agent_self(c);

	if (!tgid)
		return;		/* a forked child not followed: not traced */
	s = this_slot(c, tgid);
	if (!s) {
		__sync_fetch_and_add(&c->slot_full, 1);
		return;
	}
	slot = (uint64_t)(s - (struct inj_slot *)((char *)c + c->slots_off));
	counts = (uint64_t *)((char *)c + c->counts_off) + INJ_NCOUNTS * (slot * c->nsites + idx);
	counts[0]++;
	if (!c->enabled)
		return;
	if (s->nest) {
		counts[1]++;
		return;
	}
	s->nest = 1;
	__asm__ volatile("" ::: "memory");
	if (site->py_count && h->verdict && (!h->verdict->row1_site ||
					     h->verdict->row1_site == idx + 1)) {
		/* counted by its function: the row kept with its verdict */
		uint32_t row = h->verdict->row1 - 1;

		if (!h->verdict->row1) {
			uint64_t key[2] = {AGG_K_INT, (uint64_t)agg_value_of(py_func_key(h),
									     site->arg_size[0], 0)};

			row = row_of(c, site, key, sizeof(key));
			if (row != INJ_NO_ROW) {
				h->verdict->row1_site = idx + 1;
				h->verdict->row1 = row + 1;
			}
		}
		if (row == INJ_NO_ROW)
			counts[2]++;	/* the table is full */
		else
			row_add(c, slot, row, 0);
	} else {
		py_deliver(c, s, tgid, slot, counts, site, h);
	}
	__asm__ volatile("" ::: "memory");
	s->nest = 0;
}

/* ---- uscope script (agent/script.c) ---------------------------------------- */

void agent_arg(const struct inj_ctl *c, struct inj_slot *s, const struct inj_site *site,
	       const uint64_t *regs, uint32_t tgid, uint32_t i, struct inj_val *v, char *buf,
	       uint32_t *off)
{
	struct env env = {tgid, s->tid, regs[USC_REG_SP], c, s, 0};
	struct fetch_where w = {site->ip, site->offset, site->vaddr};

	eval_arg(&env, &w, regs, &site->args[i], v, buf, off, 0);
}

void agent_script_rec(struct inj_ctl *c, struct inj_slot *s, uint64_t *counts,
		      const struct inj_site *site, const void *p, uint32_t n)
{
	uint32_t size = c->ring_size, pos, pad = 0, need = (uint32_t)(sizeof(struct inj_rec) + n + 7) & ~7u;
	uint64_t head, slot = (uint64_t)(s - (struct inj_slot *)((char *)c + c->slots_off));
	struct inj_rec *h;
	char *ring;

	head = s->head;
	pos = (uint32_t)head & (size - 1);
	if (pos + need > size)
		pad = size - pos;
	ring = (char *)c + c->rings_off + slot * size;
	if (need > size / 2 || !room(c, s, ring, head, pad, need, counts)) {
		counts[INJ_C_LOST]++;
		return;
	}
	if (pad) {
		*(uint32_t *)(ring + pos) = INJ_REC_PAD | pad;
		head += pad;
		pos = 0;
	}
	h = (struct inj_rec *)(ring + pos);
	h->len = need;
	h->site = site->index;
	h->tsc = stamp(c, &h->cpu);
	h->retaddr = 0;
	h->nvals = INJ_NVALS_SCRIPT;
	copy_bytes(h + 1, p, n);
	__atomic_store_n(&s->head, head + need, __ATOMIC_RELEASE);
	if (__builtin_expect(c->asleep, 0))
		ring_if_due(c, s, head + need);
}
