/* The script executor, written once: one instruction of a compiled program
 * (prog.h). Included by the tracer (script/run.c: a script on the events
 * an engine streams, and BEGIN, END and interval probes), by the inject
 * agent (engine/inject/agent/script.c: in the traced process) and by the
 * bpf engine's script program (engine/bpf/script.bpf.c: in the kernel), as
 * probe/fetch_eval.h is, so the three cannot give different answers.
 *
 * The includer drives the loop (a for loop, or bpf_loop), counting the
 * steps, and defines before including:
 *   SCRIPT_STEP                       the function's name
 *   SCRIPT_INLINE                     its storage and inlining
 *   SCRIPT_IN(env, k, u)              0 with input k's integer in *u, or
 *                                     non-zero (unreadable)
 *   SCRIPT_IN_STR(env, k, dst, cap)   input k's string into dst (cap bytes,
 *                                     NUL included): its length, or < 0
 *   SCRIPT_BUILTIN(env, which)        enum script_builtin's value
 *   SCRIPT_COMM(env, dst)             the thread's name (16 bytes): 0, or not
 *   SCRIPT_READ(env, dst, addr, len)  len (1..8) bytes of user memory: 0, or
 *                                     non-zero (unreadable)
 *   SCRIPT_READ_STR(env, dst, addr, cap)  a string of user memory: its
 *                                     length (the NUL within cap), or < 0
 *   SCRIPT_MAP(env, idx, m, key, create)  the value of key in map idx (m
 *                                     its descriptor): a plain map's, or
 *                                     this thread's (CPU's) copy of an
 *                                     aggregation's; made zeroed when
 *                                     create; 0 when absent or full
 *   SCRIPT_MAP_DEL(env, idx, m, key)
 * and may define, for a key of one integer not built in the key buffer:
 *   SCRIPT_MAP8(env, idx, m, k, create), SCRIPT_MAP_DEL8(env, idx, m, k)
 *                                     as the two above, the key k's value
 *   SCRIPT_EMIT(env, rec, len)        an output record (struct script_rec
 *                                     and its values, len bytes): 0, or
 *                                     non-zero (no room)
 *   SCRIPT_USTACK(env, frames, id)    0 with the hit's stack as an id, or
 *                                     non-zero
 *   SCRIPT_ERR(env, err, idx)         a runtime error (enum script_err; idx
 *                                     the map of SERR_FULL)
 *   SCRIPT_RAND(env)                  32 random bits
 * and may define SCRIPT_FAST_ONLY: the step of a fast path, integers and
 * maps of them only (what compile.c's SCRIPT_PROBE_FAST allows; any other
 * instruction ends the probe), so that no string's loop is in its code;
 * and, where a verifier wants every index bounded:
 *   SCRIPT_R(i), SCRIPT_S(i), SCRIPT_OFF(o, n)  (default: as they are)
 *   SCRIPT_ZERO(s, k)                 a string register's bytes from k on: 0
 *   SCRIPT_STRCPY(dst, src, cap, max) a string into a string register
 *   SCRIPT_COPY(dst, src, n, max)     n bytes, at most max (a constant the
 *                                     call site's regions hold; default: a loop)
 *   SCRIPT_VAL_MAX                    bytes a map's value may have (the bpf
 *                                     program's maps' value size)
 *   SCRIPT_ADD(p, x)                  *p += x on a u64 (default: plain; the
 *                                     bpf program's are atomic)
 * The macros are undefined at the end. */
#ifndef USC_SCRIPT_VM_ONCE
#define USC_SCRIPT_VM_ONCE

#include "script/prog.h"

#define SCRIPT_DONE 0xffffffffu	/* SCRIPT_STEP: the probe is done */

/* The machine's state: one a thread (the agent), a CPU (bpf), or the
 * tracer's. */
struct script_vm {
	/* first: a driver may keep a header of its own just before it, and
	 * send the two as one (the bpf program does) */
	struct script_rec rec;	/* the output record being made: its header, */
	uint8_t out[SCRIPT_OUT_MAX];	/* its values */
	uint32_t back;		/* jumps back this hit made (the driver zeroes it) */
	uint32_t strlen;	/* the program's, NUL included (<= SCRIPT_STR_CAP) */
	uint32_t done;
	uint32_t pad;
	uint64_t zero;		/* the key of a map without one: always 0 */
	uint64_t key8;		/* an input as a key (SCRIPT_KEYIN) */
	int64_t r[SCRIPT_NREGS];
	char s[SCRIPT_NSTRS][SCRIPT_STR_CAP];
	uint8_t key[SCRIPT_KEY_MAX];
};

/* r[a] OP r[b] as bpftrace computes it: division and modulo unsigned, a
 * division by zero 0 (and a modulo by zero the dividend, as BPF's),
 * right shifts logical unless SALU_SAR. *div: set on a division by zero. */
static inline __attribute__((always_inline)) int64_t script_alu(uint32_t op, int64_t a, int64_t b, int *div)
{
	uint64_t ua = (uint64_t)a, ub = (uint64_t)b;

	switch (op) {
	case SALU_ADD: return (int64_t)(ua + ub);
	case SALU_SUB: return (int64_t)(ua - ub);
	case SALU_MUL: return (int64_t)(ua * ub);
	case SALU_DIV:
	case SALU_UDIV:
		if (!ub) {
			*div = 1;
			return 0;
		}
		return (int64_t)(ua / ub);
	case SALU_MOD:
	case SALU_UMOD:
		if (!ub) {
			*div = 1;
			return a;
		}
		return (int64_t)(ua % ub);
	case SALU_AND: return a & b;
	case SALU_OR: return a | b;
	case SALU_XOR: return a ^ b;
	case SALU_SHL: return (int64_t)(ua << (ub & 63));
	case SALU_SHR: return (int64_t)(ua >> (ub & 63));
	case SALU_SAR: return a >> (ub & 63);
	case SALU_EQ: return a == b;
	case SALU_NE: return a != b;
	case SALU_LT: return a < b;
	case SALU_LE: return a <= b;
	case SALU_GT: return a > b;
	case SALU_GE: return a >= b;
	case SALU_ULT: return ua < ub;
	case SALU_ULE: return ua <= ub;
	case SALU_UGT: return ua > ub;
	case SALU_UGE: return ua >= ub;
	case SALU_LAND: return a && b;
	case SALU_LOR: return a || b;
	case SALU_NEG: return (int64_t)(0 - ua);
	case SALU_NOT: return ~a;
	case SALU_LNOT: return !a;
	case SALU_BSWAP: {
		uint64_t r = 0;
		uint32_t n = ub == 1 || ub == 2 || ub == 4 ? (uint32_t)ub : 8;

		for (uint32_t k = 0; k < n; k++)
			r |= ((ua >> (8 * k)) & 0xff) << (8 * (n - 1 - k));
		return (int64_t)r;
	}
	default: return 0;
	}
}

/* sum / count as bpftrace's avg, signed (BPF before v4 has no signed
 * division: on the magnitude). */
static inline int64_t script_avg(int64_t sum, uint64_t count)
{
	uint64_t q;

	if (!count)
		return 0;
	q = (sum < 0 ? 0 - (uint64_t)sum : (uint64_t)sum) / count;
	return sum < 0 ? (int64_t)(0 - q) : (int64_t)q;
}

/* v cut to size bytes, sign-extended when sign. */
static inline __attribute__((always_inline)) int64_t script_ext(int64_t v, uint32_t size, uint32_t sign)
{
	uint64_t u = (uint64_t)v;

	if (size && size < 8) {
		u &= (1ULL << (8 * size)) - 1;
		if (sign && (u >> (8 * size - 1)))
			u |= ~0ULL << (8 * size);
	}
	return (int64_t)u;
}

/* The unit of a probe of updates (compile.c's few(), SCRIPT_PROBE_UPDATES)
 * at i of the probe's n instructions at in, decoded into *u: a value (LDI,
 * IN, BUILTIN, or a DELTA, whose jump is to the probe's END) and the map
 * operation that takes it, or a map operation of none (count, delete),
 * every key none, an input, the thread's or the process's id; then the
 * END. The next unit's index, or SCRIPT_DONE (the END, or what no unit
 * is: the probe stops there). */
static inline __attribute__((always_inline)) uint32_t
script_unit_decode(const struct script_insn *in, uint32_t n, uint32_t i, uint32_t nmaps,
		   struct script_unit *u)
{
	const struct script_insn *mi;

	if (i + 1 >= n)
		return SCRIPT_DONE;
	mi = &in[i];
	u->vop = mi->op;
	u->vx = (uint8_t)mi->x;
	u->dmap = u->dkey = u->dstop = 0;
	u->imm = 0;
	switch (mi->op) {
	case SOP_MAP:
		u->vop = 0;
		break;
	case SOP_LDI:
		u->imm = mi->imm;
		break;
	case SOP_IN:
	case SOP_BUILTIN:
		break;
	case SOP_DELTA:
		u->dmap = (uint8_t)(mi->x & 0xff);
		u->vx = (uint8_t)((mi->x >> 8) & 0xff);
		u->dkey = mi->b;
		u->dstop = mi->imm != 0;
		if (u->dmap >= nmaps || u->dmap >= SCRIPT_MAPS_MAX)
			return SCRIPT_DONE;
		break;
	default:
		return SCRIPT_DONE;
	}
	if (mi->op != SOP_MAP) {
		mi++;
		i++;
		if (i + 1 >= n || mi->op != SOP_MAP)
			return SCRIPT_DONE;
	}
	if (mi->x >= nmaps || mi->x >= SCRIPT_MAPS_MAX || (uint64_t)mi->imm > 0xff)
		return SCRIPT_DONE;
	u->map = (uint8_t)mi->x;
	u->mop = (uint8_t)mi->imm;
	u->key = mi->b;
	return i + 1;
}

#endif /* USC_SCRIPT_VM_ONCE */

/* Included for struct script_vm alone: no step to make. */
#ifdef SCRIPT_STEP

#ifndef SCRIPT_R
#define SCRIPT_R(i) ((i) & (SCRIPT_NREGS - 1))
#endif
#ifndef SCRIPT_S
#define SCRIPT_S(i) ((i) & (SCRIPT_NSTRS - 1))
#endif
#ifndef SCRIPT_OFF
#define SCRIPT_OFF(o, n) (o)
#endif
/* Does the program use one of these ops (SCRIPT_BIT(SOP_...) | ...), of
 * these map operations (SCRIPT_BIT(SMOP_...))? A driver whose verifier
 * walks every case (the bpf program) says from the program's constants,
 * and the cases it never runs are not walked. */
#define SCRIPT_BIT(x) (1u << (x))
#ifndef SCRIPT_OPS
#define SCRIPT_OPS(mask) 1
#endif
#ifndef SCRIPT_MOPS
#define SCRIPT_MOPS(mask) 1
#endif
#ifndef SCRIPT_STRTAB_MAX	/* bytes of a string table, at most */
#define SCRIPT_STRTAB_MAX (1u << 31)
#endif
#ifndef SCRIPT_ADD
#define SCRIPT_ADD(p, x) (*(p) += (x))
#endif
#ifndef SCRIPT_ZERO	/* a string register's bytes from k on: zero */
#define SCRIPT_ZERO(s, k)                                                     \
	do {                                                                  \
		for (uint32_t z_ = (k); z_ < SCRIPT_STR_CAP; z_++)            \
			(s)[z_] = 0;                                          \
	} while (0)
#endif
#ifndef SCRIPT_STRCPY	/* the string at src (max bytes there at most) into a
			 * string register, cap bytes at most with its NUL: its
			 * length (the NUL and the rest are SCRIPT_ZERO's) */
#define SCRIPT_STRCPY(dst, src, cap, max)                                     \
	({                                                                    \
		uint32_t c_ = 0;                                              \
		for (; c_ + 1 < (cap) && c_ + 1 < SCRIPT_STR_CAP && c_ < (max) && (src)[c_]; c_++) \
			(dst)[c_] = (char)(src)[c_];                          \
		c_;                                                           \
	})
#endif
#ifndef SCRIPT_COPY8
#define SCRIPT_COPY8(dst, src) __builtin_memcpy(dst, src, 8)
#endif
#ifndef SCRIPT_VAL_MAX
#define SCRIPT_VAL_MAX (8 * SCRIPT_LHIST_MAX + 64)
#endif
#ifndef SCRIPT_COPY
#define SCRIPT_COPY(dst, src, n, max)                                         \
	do {                                                                  \
		for (uint32_t k_ = 0; k_ < (uint32_t)(n); k_++)               \
			((uint8_t *)(dst))[k_] = ((const uint8_t *)(src))[k_]; \
	} while (0)
#endif

#define SCRIPT_CAT_(a, b) a##b
#define SCRIPT_CAT(a, b) SCRIPT_CAT_(a, b)

/* An update of map m's value v by operation mop with x: a store or an
 * aggregation's (SCRIPT_MOP_UPDATE). */
SCRIPT_INLINE void SCRIPT_CAT(SCRIPT_STEP, _update)(const struct script_map *m, uint32_t mop,
						    uint8_t *v, int64_t x)
{
	switch (mop) {
	case SMOP_STORE:
		if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_STORE)))
			return;
		SCRIPT_COPY8(v, &x);
		break;
	case SMOP_COUNT:
		if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_COUNT)))
			return;
		SCRIPT_ADD((uint64_t *)v, 1);
		break;
	case SMOP_SUM:
		if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_SUM)))
			return;
		SCRIPT_ADD((uint64_t *)v, (uint64_t)x);
		break;
	case SMOP_MIN:
	case SMOP_MAX:
		if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_MIN) | SCRIPT_BIT(SMOP_MAX)))
			return;
	{
		struct script_mm *mm = (struct script_mm *)v;

		if (!mm->set || (mop == SMOP_MIN ? x < mm->v : x > mm->v))
			mm->v = x;
		mm->set = 1;
		break;
	}
	case SMOP_AVG:
	case SMOP_STATS:
		if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_AVG) | SCRIPT_BIT(SMOP_STATS)))
			return;
	{
		struct script_cs *cs = (struct script_cs *)v;

		SCRIPT_ADD(&cs->count, 1);
		SCRIPT_ADD((uint64_t *)&cs->sum, (uint64_t)x);
		break;
	}
	case SMOP_HIST:
	case SMOP_LHIST:
		if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_HIST) | SCRIPT_BIT(SMOP_LHIST)))
			return;
	{
		uint32_t bk = mop == SMOP_HIST ? script_hist_bucket(x) :
			      script_lhist_bucket(x, m->lmin, m->lmax, m->lstep, m->nbuckets);

		if (bk < m->nbuckets && bk < SCRIPT_LHIST_MAX && bk < SCRIPT_VAL_MAX / 8)
			SCRIPT_ADD((uint64_t *)v + bk, 1);
		break;
	}
	default:
		break;
	}
}

/* The key of a map operation in a probe of updates (SOP_MAP's b when it is
 * none, an input, the thread's or the process's id). */
SCRIPT_INLINE uint64_t SCRIPT_CAT(SCRIPT_STEP, _key8)(uint32_t b, void *env)
{
	uint64_t k = 0;

	if (b & SCRIPT_KEYIN && b < SCRIPT_KEYNONE) {
		if (SCRIPT_IN(env, b & 0x7f, &k)) {
			k = 0;
			SCRIPT_ERR(env, SERR_READ, 0);
		}
	} else if (b == SCRIPT_REG_TID) {
		k = SCRIPT_BUILTIN(env, SB_TID);
	} else if (b == SCRIPT_REG_PID) {
		k = SCRIPT_BUILTIN(env, SB_PID);
	}
	return k;
}

/* Map mx's value of key k (SCRIPT_MAP8 where the driver has it). */
SCRIPT_INLINE uint8_t *SCRIPT_CAT(SCRIPT_STEP, _map8)(uint32_t mx, const struct script_map *m,
						      uint64_t k, uint32_t create, void *env)
{
	(void)m;
#ifdef SCRIPT_MAP8
	return (uint8_t *)SCRIPT_MAP8(env, mx, m, k, create);
#else
	return (uint8_t *)SCRIPT_MAP(env, mx, m, (const uint8_t *)&k, create);
#endif
}

/* A unit of a probe of updates, decoded (script_unit_decode), run: 0, or
 * 1 when the probe is done (a DELTA of 0 whose jump is to the END). */
SCRIPT_INLINE uint32_t SCRIPT_CAT(SCRIPT_STEP, _unit_run)(const struct script_unit *un,
							  const struct script_map *maps, void *env)
{
	uint32_t mx;
	uint64_t u = 0;
	int64_t x = 0;
	uint8_t *v;

	switch (un->vop) {
	case 0:
		break;
	case SOP_LDI:
		x = un->imm;
		break;
	case SOP_IN:
		if (SCRIPT_IN(env, un->vx, &u)) {
			u = 0;
			SCRIPT_ERR(env, SERR_READ, 0);
		}
		x = (int64_t)u;
		break;
	case SOP_BUILTIN:
		x = (int64_t)SCRIPT_BUILTIN(env, un->vx);
		break;
	case SOP_DELTA:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_DELTA)))
			return 1;
		mx = SCRIPT_OFF(un->dmap & (SCRIPT_MAPS_MAX - 1), SCRIPT_MAPS_MAX - 1);
		v = SCRIPT_CAT(SCRIPT_STEP, _map8)(mx, &maps[mx],
						   SCRIPT_CAT(SCRIPT_STEP, _key8)(un->dkey, env), 0, env);
		if (v)
			SCRIPT_COPY8(&u, v);
		if (!u && un->dstop)
			return 1;	/* its jump, to the END */
		x = (int64_t)(SCRIPT_BUILTIN(env, un->vx) - u);
		break;
	default:
		return 1;
	}
	mx = SCRIPT_OFF(un->map & (SCRIPT_MAPS_MAX - 1), SCRIPT_MAPS_MAX - 1);
	u = SCRIPT_CAT(SCRIPT_STEP, _key8)(un->key, env);
	if (un->mop == SMOP_DELETE) {
#ifdef SCRIPT_MAP8
		SCRIPT_MAP_DEL8(env, mx, &maps[mx], u);
#else
		SCRIPT_MAP_DEL(env, mx, &maps[mx], (const uint8_t *)&u);
#endif
		return 0;
	}
	v = SCRIPT_CAT(SCRIPT_STEP, _map8)(mx, &maps[mx], u, 1, env);
	if (!v) {
		SCRIPT_ERR(env, SERR_FULL, mx);
		return 0;
	}
	SCRIPT_CAT(SCRIPT_STEP, _update)(&maps[mx], un->mop, v, x);
	return 0;
}

/* The unit at i of a probe of updates' n instructions at in, decoded and
 * run: the next one's index, or SCRIPT_DONE. The same as stepping them,
 * with no machine to set up. */
SCRIPT_INLINE uint32_t SCRIPT_CAT(SCRIPT_STEP, _unit)(const struct script_insn *in, uint32_t n,
						      uint32_t i, const struct script_map *maps,
						      uint32_t nmaps, void *env)
{
	struct script_unit un;
	uint32_t next = script_unit_decode(in, n, i, nmaps, &un);

	if (next == SCRIPT_DONE)
		return SCRIPT_DONE;
	return SCRIPT_CAT(SCRIPT_STEP, _unit_run)(&un, maps, env) ? SCRIPT_DONE : next;
}

/* The key of a map operation (SOP_MAP's b: the key buffer, none, an input
 * read here, or a register) as a pointer to its bytes, and as a value when
 * it is one integer (*k8). */
SCRIPT_INLINE const uint8_t *SCRIPT_CAT(SCRIPT_STEP, _key)(struct script_vm *vm, uint32_t b,
							    uint64_t *k8, void *env)
{
	uint64_t u = 0;

	if (b == SCRIPT_KEYBUF)
		return vm->key;
	if (b == SCRIPT_KEYNONE) {
		*k8 = 0;
		return (const uint8_t *)&vm->zero;
	}
	if (b & SCRIPT_KEYIN) {
		/* the key is an input, read here (IN fused in) */
		if (SCRIPT_IN(env, b & 0x7f, &u)) {
			u = 0;
			SCRIPT_ERR(env, SERR_READ, 0);
		}
		vm->key8 = u;
		*k8 = u;
		return (const uint8_t *)&vm->key8;
	}
	*k8 = (uint64_t)vm->r[SCRIPT_R(b)];
	return (const uint8_t *)&vm->r[SCRIPT_R(b)];
}

/* Map idx's value of the key SOP_MAP's b says (0: absent, or full): a
 * SOP_DELTA's read (SOP_MAP's case keeps its own, as it was: the bpf
 * verifier walks that one in every program, and this form costs it more) */
SCRIPT_INLINE uint8_t *SCRIPT_CAT(SCRIPT_STEP, _find)(struct script_vm *vm, uint32_t b, uint32_t idx,
						      const struct script_map *m, uint32_t create,
						      void *env)
{
	uint64_t k8 = 0;
	const uint8_t *key = SCRIPT_CAT(SCRIPT_STEP, _key)(vm, b, &k8, env);

	(void)key;
	(void)k8;
	(void)m;
#ifdef SCRIPT_MAP8
	if (b != SCRIPT_KEYBUF)		/* its value as it is, not through memory */
		return (uint8_t *)SCRIPT_MAP8(env, idx, m, k8, create);
#endif
	return (uint8_t *)SCRIPT_MAP(env, idx, m, key, create);
}

/* One instruction, at pc: the next one's pc (a jump's target), or
 * SCRIPT_DONE when the probe is done. vm->strlen is the driver's to have
 * checked (2 to SCRIPT_STR_CAP), vm->back to have zeroed; it steps while
 * pc is within the probe: the work is bounded (SCRIPT_STEPS jumps back). */
SCRIPT_INLINE uint32_t SCRIPT_STEP(struct script_vm *vm, const struct script_insn *in, uint32_t pc,
				   const struct script_map *maps, uint32_t nmaps, const char *strtab,
				   uint32_t nstrtab, void *env)
{
	uint32_t d = in->d, a = in->a, b = in->b, strl = vm->strlen;
	uint64_t u = 0;
	int div = 0;
	long n;

	(void)strl;
	(void)n;
	(void)strtab;
	(void)nstrtab;
	switch (in->op) {
	case SOP_END:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_END)))
			return SCRIPT_DONE;
		return SCRIPT_DONE;
	case SOP_LDI:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_LDI)))
			return SCRIPT_DONE;
		vm->r[SCRIPT_R(d)] = in->imm;
		break;
	case SOP_MOV:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_MOV)))
			return SCRIPT_DONE;
		vm->r[SCRIPT_R(d)] = vm->r[SCRIPT_R(a)];
		break;
	case SOP_ALU:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_ALU)))
			return SCRIPT_DONE;
		vm->r[SCRIPT_R(d)] = script_alu(in->x, vm->r[SCRIPT_R(a)], vm->r[SCRIPT_R(b)], &div);
		if (div)
			SCRIPT_ERR(env, SERR_DIV, 0);
		break;
	case SOP_ALUI:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_ALUI)))
			return SCRIPT_DONE;
		vm->r[SCRIPT_R(d)] = script_alu(in->x, vm->r[SCRIPT_R(a)], in->imm, &div);
		if (div)
			SCRIPT_ERR(env, SERR_DIV, 0);
		break;
	case SOP_EXT:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_EXT)))
			return SCRIPT_DONE;
		vm->r[SCRIPT_R(d)] = script_ext(vm->r[SCRIPT_R(a)], in->x & 0xff, in->x & 0x100);
		break;
	case SOP_JMP:
	case SOP_JZ:
	case SOP_JNZ:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_JMP) | SCRIPT_BIT(SOP_JZ) | SCRIPT_BIT(SOP_JNZ)))
			return SCRIPT_DONE;
		if (in->op != SOP_JMP && !vm->r[SCRIPT_R(a)] == (in->op == SOP_JNZ))
			break;
		/* a loop's turn: bounded (the rest of the code goes forward) */
		if ((uint32_t)in->imm <= pc && ++vm->back > SCRIPT_STEPS) {
			SCRIPT_ERR(env, SERR_STEPS, 0);
			return SCRIPT_DONE;
		}
		return (uint32_t)in->imm;
	case SOP_IN:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_IN)))
			return SCRIPT_DONE;
		if (SCRIPT_IN(env, in->x, &u)) {
			u = 0;
			SCRIPT_ERR(env, SERR_READ, 0);
		}
		vm->r[SCRIPT_R(d)] = (int64_t)u;
		break;
#ifndef SCRIPT_FAST_ONLY
	case SOP_INS:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_INS)))
			return SCRIPT_DONE;
	{
		char *s = vm->s[SCRIPT_S(d)];

		n = SCRIPT_IN_STR(env, in->x, s, strl);
		if (n < 0) {
			n = 0;
			SCRIPT_ERR(env, SERR_READ, 0);
		}
		SCRIPT_ZERO(s, (uint32_t)n);
		break;
	}
#endif
	case SOP_BUILTIN:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_BUILTIN)))
			return SCRIPT_DONE;
		vm->r[SCRIPT_R(d)] = (int64_t)SCRIPT_BUILTIN(env, in->x);
		break;
#ifndef SCRIPT_FAST_ONLY
	case SOP_COMM:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_COMM)))
			return SCRIPT_DONE;
	{
		char *s = vm->s[SCRIPT_S(d)];

		for (uint32_t k = 0; k < SCRIPT_STR_CAP; k++)
			s[k] = 0;
		if (SCRIPT_COMM(env, s))
			s[0] = 0;
		s[15] = 0;
		break;
	}
	case SOP_READ:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_READ)))
			return SCRIPT_DONE;
	{
		uint32_t size = in->x & 0xff;

		if (size < 1 || size > 8 ||
		    SCRIPT_READ(env, &u, (uint64_t)vm->r[SCRIPT_R(a)] + (uint64_t)in->imm, size)) {
			u = 0;
			SCRIPT_ERR(env, SERR_READ, 0);
		}
		vm->r[SCRIPT_R(d)] = script_ext((int64_t)u, size, in->x & 0x100);
		break;
	}
	case SOP_STR:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_STR)))
			return SCRIPT_DONE;
	{
		char *s = vm->s[SCRIPT_S(d)];
		uint64_t max = b == 0xff ? strl : (uint64_t)vm->r[SCRIPT_R(b)] + 1;

		if (max > strl)
			max = strl;
		n = max > 1 ? SCRIPT_READ_STR(env, s, (uint64_t)vm->r[SCRIPT_R(a)], (uint32_t)max) : 0;
		if (n < 0) {
			n = 0;
			SCRIPT_ERR(env, SERR_READ, 0);
		}
		if ((uint64_t)n >= max)
			n = max ? (long)max - 1 : 0;
		SCRIPT_ZERO(s, (uint32_t)n);
		break;
	}
	case SOP_BUF:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_BUF)))
			return SCRIPT_DONE;
	{
		uint8_t *s = (uint8_t *)vm->s[SCRIPT_S(d)];
		uint64_t len = (uint64_t)vm->r[SCRIPT_R(b)], max = (uint64_t)in->imm;

		if (max > strl - 1)
			max = strl - 1;
		if (len > max)
			len = max;
		for (uint32_t k = 0; k < SCRIPT_STR_CAP; k++)
			s[k] = 0;
		/* a word at a time: SCRIPT_READ takes 1..8 bytes */
		for (uint32_t k = 0; k < len && k < SCRIPT_STR_CAP - 1; k += 8) {
			uint32_t c = len - k < 8 ? (uint32_t)(len - k) : 8;

			u = 0;
			if (SCRIPT_READ(env, &u, (uint64_t)vm->r[SCRIPT_R(a)] + k, c)) {
				SCRIPT_ERR(env, SERR_READ, 0);
				len = k;
				break;
			}
			for (uint32_t j = 0; j < c && k + 1 + j < SCRIPT_STR_CAP; j++)
				s[k + 1 + j] = (uint8_t)(u >> (8 * j));
		}
		s[0] = (uint8_t)len;
		break;
	}
	case SOP_SCONST:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_SCONST)))
			return SCRIPT_DONE;
	{
		char *s = vm->s[SCRIPT_S(d)];
		uint32_t k = 0;

		if (in->x < nstrtab && in->x < SCRIPT_STRTAB_MAX)
			k = SCRIPT_STRCPY(s, &strtab[SCRIPT_OFF(in->x, SCRIPT_STRTAB_MAX - 1)], strl,
					  nstrtab - in->x);
		SCRIPT_ZERO(s, k);
		break;
	}
	case SOP_SMOV:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_SMOV)))
			return SCRIPT_DONE;
		SCRIPT_COPY(vm->s[SCRIPT_S(d)], vm->s[SCRIPT_S(a)], SCRIPT_STR_CAP, SCRIPT_STR_CAP);
		break;
	case SOP_SCMP:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_SCMP)))
			return SCRIPT_DONE;
	{
		const char *x = vm->s[SCRIPT_S(a)], *y = vm->s[SCRIPT_S(b)];
		uint32_t lim = in->imm > 0 && (uint64_t)in->imm < strl ? (uint32_t)in->imm : strl;
		int eq = 1;

		for (uint32_t k = 0; k < lim && k < SCRIPT_STR_CAP; k++) {
			if (x[k] != y[k]) {
				eq = 0;
				break;
			}
			if (!x[k])
				break;
		}
		vm->r[SCRIPT_R(d)] = in->x ? !eq : eq;
		break;
	}
#endif
	case SOP_KEY:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_KEY)))
			return SCRIPT_DONE;
		if (in->x <= SCRIPT_KEY_MAX - 8)
			SCRIPT_COPY8(&vm->key[SCRIPT_OFF(in->x, SCRIPT_KEY_MAX - 8)],
				     &vm->r[SCRIPT_R(a)]);
		break;
	case SOP_KEYPID:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_KEYPID)))
			return SCRIPT_DONE;
		if (in->x <= SCRIPT_KEY_MAX - 8) {
			u = SCRIPT_BUILTIN(env, SB_PID);
			SCRIPT_COPY8(&vm->key[SCRIPT_OFF(in->x, SCRIPT_KEY_MAX - 8)], &u);
		}
		break;
#ifndef SCRIPT_FAST_ONLY
	case SOP_KEYS:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_KEYS)))
			return SCRIPT_DONE;
		if (in->x <= SCRIPT_KEY_MAX - SCRIPT_STR_CAP && in->imm > 0 &&
		    in->imm <= SCRIPT_STR_CAP)
			SCRIPT_COPY(&vm->key[SCRIPT_OFF(in->x, SCRIPT_KEY_MAX - SCRIPT_STR_CAP)],
				    vm->s[SCRIPT_S(a)], (uint32_t)in->imm, SCRIPT_STR_CAP);
		break;
	case SOP_OUT:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_OUT)))
			return SCRIPT_DONE;
		if (in->x <= SCRIPT_OUT_MAX - 8)
			SCRIPT_COPY8(&vm->out[SCRIPT_OFF(in->x, SCRIPT_OUT_MAX - 8)],
				     &vm->r[SCRIPT_R(a)]);
		break;
	case SOP_OUTPID:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_OUTPID)))
			return SCRIPT_DONE;
		if (in->x <= SCRIPT_OUT_MAX - 8) {
			u = SCRIPT_BUILTIN(env, SB_PID);
			SCRIPT_COPY8(&vm->out[SCRIPT_OFF(in->x, SCRIPT_OUT_MAX - 8)], &u);
		}
		break;
	case SOP_OUTS:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_OUTS)))
			return SCRIPT_DONE;
		if (in->x <= SCRIPT_OUT_MAX - SCRIPT_STR_CAP && in->imm > 0 &&
		    in->imm <= SCRIPT_STR_CAP)
			SCRIPT_COPY(&vm->out[SCRIPT_OFF(in->x, SCRIPT_OUT_MAX - SCRIPT_STR_CAP)],
				    vm->s[SCRIPT_S(a)], (uint32_t)in->imm, SCRIPT_STR_CAP);
		break;
	case SOP_EMIT:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_EMIT)))
			return SCRIPT_DONE;
	{
		uint32_t len = a | b << 8;

		if (len > SCRIPT_OUT_MAX)
			len = SCRIPT_OUT_MAX;
		vm->rec.kind = (uint16_t)in->imm;
		vm->rec.id = (uint16_t)in->x;
		vm->rec.len = len;
		if (SCRIPT_EMIT(env, &vm->rec, (uint32_t)sizeof(vm->rec) + len))
			SCRIPT_ERR(env, SERR_OUT, 0);
		if (in->imm == SOUT_EXIT)
			return SCRIPT_DONE;
		break;
	}
	case SOP_USTACK:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_USTACK)))
			return SCRIPT_DONE;
		if (SCRIPT_USTACK(env, (uint32_t)in->imm, &u)) {
			u = 0;
			SCRIPT_ERR(env, SERR_STACK, 0);
		}
		vm->r[SCRIPT_R(d)] = (int64_t)u;
		break;
#endif
	case SOP_RAND:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_RAND)))
			return SCRIPT_DONE;
		vm->r[SCRIPT_R(d)] = (int64_t)(uint32_t)SCRIPT_RAND(env);
		break;
#ifndef SCRIPT_FAST_ONLY
	case SOP_SCUT:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_SCUT)))
			return SCRIPT_DONE;
	{
		char *s = vm->s[SCRIPT_S(d)];
		uint64_t cut = (uint64_t)vm->r[SCRIPT_R(a)];

		if (cut < SCRIPT_STR_CAP)
			SCRIPT_ZERO(s, (uint32_t)cut);
		break;
	}
#endif
	case SOP_DELTA:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_DELTA)))
			return SCRIPT_DONE;
	{
		uint32_t mx = in->x & 0xff;
		int64_t val = 0, t;
		uint8_t *v;

		if (mx >= nmaps || mx >= SCRIPT_MAPS_MAX)
			return SCRIPT_DONE;
		mx = SCRIPT_OFF(mx, SCRIPT_MAPS_MAX - 1);
		v = SCRIPT_CAT(SCRIPT_STEP, _find)(vm, b, mx, &maps[mx], 0, env);
		if (v)
			SCRIPT_COPY8(&val, v);
		vm->r[SCRIPT_R(a)] = val;
		if (!val && in->imm) {
			/* JZ's */
			if ((uint32_t)in->imm <= pc && ++vm->back > SCRIPT_STEPS) {
				SCRIPT_ERR(env, SERR_STEPS, 0);
				return SCRIPT_DONE;
			}
			return (uint32_t)in->imm;
		}
		t = (int64_t)SCRIPT_BUILTIN(env, (in->x >> 8) & 0xff);
		vm->r[SCRIPT_R(in->x >> 16)] = t;
		vm->r[SCRIPT_R(d)] = (int64_t)((uint64_t)t - (uint64_t)val);
		break;
	}
	case SOP_MAP:
		if (!SCRIPT_OPS(SCRIPT_BIT(SOP_MAP)))
			return SCRIPT_DONE;
	{
		const struct script_map *m;
		uint32_t mop = (uint32_t)in->imm, create;
		uint8_t *v;
		int64_t x = vm->r[SCRIPT_R(a)];
		const uint8_t *key = b == SCRIPT_KEYBUF ? vm->key :
				     b == SCRIPT_KEYNONE ? (const uint8_t *)&vm->zero :
				     (const uint8_t *)&vm->r[SCRIPT_R(b)];

		if (b & SCRIPT_KEYIN && b < SCRIPT_KEYNONE) {
			/* the key is an input, read here (IN fused in) */
			if (SCRIPT_IN(env, b & 0x7f, &u)) {
				u = 0;
				SCRIPT_ERR(env, SERR_READ, 0);
			}
			vm->key8 = u;
			key = (const uint8_t *)&vm->key8;
		}
		if (in->x >= nmaps || in->x >= SCRIPT_MAPS_MAX)
			return SCRIPT_DONE;
		m = &maps[SCRIPT_OFF(in->x, SCRIPT_MAPS_MAX - 1)];
		create = mop != SMOP_LOAD && mop != SMOP_LOADS && mop != SMOP_HAS &&
			 mop != SMOP_LOADB && mop != SMOP_AGGLOAD;
#ifdef SCRIPT_MAP8
		if (b != SCRIPT_KEYBUF) {
			/* its value as it is, not through memory */
			uint64_t k8 = b == SCRIPT_KEYNONE ? 0 : b & SCRIPT_KEYIN ? u :
				      (uint64_t)vm->r[SCRIPT_R(b)];

			if (mop == SMOP_DELETE) {
				SCRIPT_MAP_DEL8(env, in->x, m, k8);
				break;
			}
			v = (uint8_t *)SCRIPT_MAP8(env, in->x, m, k8, create);
		} else
#endif
		{
			if (mop == SMOP_DELETE) {
				SCRIPT_MAP_DEL(env, in->x, m, key);
				break;
			}
			v = (uint8_t *)SCRIPT_MAP(env, in->x, m, key, create);
		}
		if (!v) {
			if (create)
				SCRIPT_ERR(env, SERR_FULL, in->x);
#ifndef SCRIPT_FAST_ONLY
			if ((mop == SMOP_LOADS || mop == SMOP_LOADB) &&
			    SCRIPT_MOPS(SCRIPT_BIT(SMOP_LOADS) | SCRIPT_BIT(SMOP_LOADB)))
				SCRIPT_ZERO(vm->s[SCRIPT_S(d)], 0);
#endif
			vm->r[SCRIPT_R(d)] = 0;
			break;
		}
		switch (mop) {
		case SMOP_LOAD:
			if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_LOAD)))
				return SCRIPT_DONE;
			SCRIPT_COPY8(&vm->r[SCRIPT_R(d)], v);
			break;
		case SMOP_HAS:
			if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_HAS)))
				return SCRIPT_DONE;
			vm->r[SCRIPT_R(d)] = 1;
			break;
#ifndef SCRIPT_FAST_ONLY
		case SMOP_LOADS:
			if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_LOADS)))
				return SCRIPT_DONE;
		{
			char *s = vm->s[SCRIPT_S(d)];
			uint32_t k = SCRIPT_STRCPY(s, (const char *)v, strl, m->vallen < SCRIPT_VAL_MAX ?
						   m->vallen : SCRIPT_VAL_MAX);

			SCRIPT_ZERO(s, k);
			break;
		}
		case SMOP_LOADB:
			if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_LOADB)))
				return SCRIPT_DONE;
			if (m->vallen <= SCRIPT_OUT_MAX && m->vallen <= SCRIPT_VAL_MAX)
				SCRIPT_COPY(vm->out, v, m->vallen, SCRIPT_VAL_MAX < SCRIPT_OUT_MAX ?
					    SCRIPT_VAL_MAX : SCRIPT_OUT_MAX);
			vm->r[SCRIPT_R(d)] = 1;
			break;
		case SMOP_STORES:
			if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_STORES)))
				return SCRIPT_DONE;
			if (m->vallen <= SCRIPT_STR_CAP && m->vallen <= SCRIPT_VAL_MAX)
				SCRIPT_COPY(v, vm->s[SCRIPT_S(a)], m->vallen,
					    SCRIPT_VAL_MAX < SCRIPT_STR_CAP ? SCRIPT_VAL_MAX : SCRIPT_STR_CAP);
			break;
		case SMOP_STOREB:
			if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_STOREB)))
				return SCRIPT_DONE;
			if (m->vallen <= SCRIPT_OUT_MAX && m->vallen <= SCRIPT_VAL_MAX)
				SCRIPT_COPY(v, vm->out, m->vallen, SCRIPT_VAL_MAX < SCRIPT_OUT_MAX ?
					    SCRIPT_VAL_MAX : SCRIPT_OUT_MAX);
			break;
#endif
		case SMOP_STORE:
		case SMOP_COUNT:
		case SMOP_SUM:
		case SMOP_MIN:
		case SMOP_MAX:
		case SMOP_AVG:
		case SMOP_STATS:
		case SMOP_HIST:
		case SMOP_LHIST:
			if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_STORE) | SCRIPT_BIT(SMOP_COUNT) | SCRIPT_BIT(SMOP_SUM) | SCRIPT_BIT(SMOP_MIN) | SCRIPT_BIT(SMOP_MAX) | SCRIPT_BIT(SMOP_AVG) | SCRIPT_BIT(SMOP_STATS) | SCRIPT_BIT(SMOP_HIST) | SCRIPT_BIT(SMOP_LHIST)))
				return SCRIPT_DONE;
			SCRIPT_CAT(SCRIPT_STEP, _update)(m, mop, v, x);
			break;
		case SMOP_AGGLOAD:
			if (!SCRIPT_MOPS(SCRIPT_BIT(SMOP_AGGLOAD)))
				return SCRIPT_DONE;
			if (m->vk == SVK_AVG) {
				struct script_cs *cs = (struct script_cs *)v;

				vm->r[SCRIPT_R(d)] = script_avg(cs->sum, cs->count);
			} else if (m->vk == SVK_MIN || m->vk == SVK_MAX) {
				vm->r[SCRIPT_R(d)] = ((struct script_mm *)v)->v;
			} else {
				SCRIPT_COPY8(&vm->r[SCRIPT_R(d)], v);
			}
			break;
		default:
			break;
		}
		break;
	}
	default:
		return SCRIPT_DONE;
	}
	return pc + 1;
}

#endif /* SCRIPT_STEP */

#undef SCRIPT_STEP
#undef SCRIPT_FAST_ONLY
#undef SCRIPT_INLINE
#undef SCRIPT_IN
#undef SCRIPT_IN_STR
#undef SCRIPT_BUILTIN
#undef SCRIPT_COMM
#undef SCRIPT_READ
#undef SCRIPT_READ_STR
#undef SCRIPT_MAP
#undef SCRIPT_MAP_DEL
#undef SCRIPT_MAP8
#undef SCRIPT_MAP_DEL8
#undef SCRIPT_EMIT
#undef SCRIPT_USTACK
#undef SCRIPT_ERR
#undef SCRIPT_RAND
#undef SCRIPT_R
#undef SCRIPT_S
#undef SCRIPT_OFF
#undef SCRIPT_BIT
#undef SCRIPT_OPS
#undef SCRIPT_MOPS
#undef SCRIPT_STRTAB_MAX
#undef SCRIPT_COPY
#undef SCRIPT_COPY8
#undef SCRIPT_ZERO
#undef SCRIPT_STRCPY
#undef SCRIPT_VAL_MAX
#undef SCRIPT_ADD
