/* libFuzzer target for uscope script's front end and executor.
 *
 * Feeds arbitrary text to usc_script_compile (lexer, parser, probes, names
 * and types, lowering, the compiler) and checks what it promises: a
 * failure is -EINVAL with its place inside the text and a message, shown
 * with its caret; a success is a well-formed program (every probe's code
 * within the blob and ended by SOP_END, jumps within their probe, maps and
 * registers within bounds) and compiling again gives the same bytes. Each
 * probe of a program that compiled is then run by the executor (script/vm.h)
 * on made-up inputs, with maps in tables (script/table.h) and every read of
 * memory failing: it must end within its bound of steps, and touch nothing
 * out of place (ASan). Any violation aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "script/script.h"
#include "script/table.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_script: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                               \
			abort();                                                \
		}                                                               \
	} while (0)

/* ---- a driver of the executor: inputs from the text's bytes, no memory ---- */

struct fenv {
	const struct script_blob *b;
	struct stab **tabs;
	uint64_t seed;
	unsigned errs;
};

static uint64_t mix(struct fenv *e)
{
	e->seed ^= e->seed << 13;
	e->seed ^= e->seed >> 7;
	e->seed ^= e->seed << 17;
	return e->seed;
}

static int f_in(struct fenv *e, uint32_t k, uint64_t *u)
{
	*u = mix(e) >> (k & 63);
	return (e->seed & 15) == 0;	/* now and then unreadable */
}

static long f_in_str(struct fenv *e, uint32_t k, char *dst, uint32_t cap)
{
	uint32_t n = (uint32_t)(mix(e) % 12);

	(void)k;
	if (n >= cap)
		n = cap - 1;
	for (uint32_t i = 0; i < n; i++)
		dst[i] = (char)('a' + i);
	dst[n] = 0;
	return n;
}

static void *f_map(struct fenv *e, uint32_t idx, const uint8_t *key, int create)
{
	if (idx >= e->b->nmaps)
		return NULL;
	return stab_get(e->tabs[idx], key, create, 0);
}

static void f_del(struct fenv *e, uint32_t idx, const uint8_t *key)
{
	if (idx < e->b->nmaps)
		stab_del(e->tabs[idx], key);
}

#define SCRIPT_STEP fz_step
#define SCRIPT_INLINE static inline
#define SCRIPT_IN(env, k, u) f_in((struct fenv *)(env), k, u)
#define SCRIPT_IN_STR(env, k, dst, cap) f_in_str((struct fenv *)(env), k, dst, cap)
#define SCRIPT_BUILTIN(env, w) (mix((struct fenv *)(env)) & 0xffff)
#define SCRIPT_COMM(env, dst) (memcpy(dst, "fuzz", 5), 0)
#define SCRIPT_READ(env, dst, addr, len) ((void)(dst), (void)(addr), (void)(len), 1)
#define SCRIPT_READ_STR(env, dst, addr, cap) ((void)(dst), (void)(addr), (void)(cap), -1L)
#define SCRIPT_MAP(env, idx, m, key, create) f_map((struct fenv *)(env), idx, key, create)
#define SCRIPT_MAP_DEL(env, idx, m, key) f_del((struct fenv *)(env), idx, key)
#define SCRIPT_EMIT(env, rec, len) ((void)(rec), (void)(len), 0)
#define SCRIPT_USTACK(env, frames, id) 1
#define SCRIPT_ERR(env, err, idx) (((struct fenv *)(env))->errs++)
#define SCRIPT_RAND(env) ((uint32_t)mix((struct fenv *)(env)))
#include "script/vm.h"

static void run_probes(const struct script_blob *b, uint64_t seed)
{
	struct stab **tabs = calloc(b->nmaps + 1, sizeof(*tabs));
	struct fenv e = {.b = b, .tabs = tabs, .seed = seed | 1};
	static struct script_vm vm;

	CHECK(tabs);
	for (uint32_t m = 0; m < b->nmaps; m++) {
		struct stab t;
		uint64_t size = stab_layout(&t, &script_maps(b)[m], 1);

		tabs[m] = calloc(1, size);
		CHECK(tabs[m]);
		memcpy(tabs[m], &t, sizeof(t));
	}
	for (uint32_t p = 0; p < b->nprobes; p++) {
		const struct script_probe *pr = &script_probes(b)[p];
		const struct script_insn *insns = script_insns(b) + pr->first;
		/* every jump back counts, the rest goes forward: a bound */
		uint64_t steps = 0, bound = (uint64_t)(SCRIPT_STEPS + 2) * pr->n;
		uint32_t pc = 0;

		for (int round = 0; round < 2; round++) {	/* the maps as the first left them */
			if (pr->flags & SCRIPT_PROBE_UPDATES) {
				for (pc = 0, steps = 0; pc < pr->n; steps++) {
					CHECK(steps <= pr->n);
					pc = fz_step_unit(insns, pr->n, pc, script_maps(b),
							  b->nmaps, &e);
				}
				continue;
			}
			memset(&vm, 0, sizeof(vm));
			vm.strlen = b->strlen;
			vm.r[SCRIPT_REG_TID] = 43;
			vm.r[SCRIPT_REG_PID] = 42;
			for (pc = 0, steps = 0; pc < pr->n; steps++) {
				CHECK(steps <= bound);
				pc = fz_step(&vm, &insns[pc], pc, script_maps(b), b->nmaps,
					     script_strtab(b), b->nstrtab, &e);
			}
		}
	}
	for (uint32_t m = 0; m < b->nmaps; m++)
		free(tabs[m]);
	free(tabs);
}

static void check_blob(const struct script_blob *b)
{
	CHECK(b->magic == SCRIPT_MAGIC);
	CHECK(b->strlen >= 8 && b->strlen <= SCRIPT_STRLEN_MAX);
	CHECK(b->nmaps <= SCRIPT_MAPS_MAX);
	CHECK(b->probes_off + (uint64_t)b->nprobes * sizeof(struct script_probe) <= b->size);
	CHECK(b->insns_off + (uint64_t)b->ninsns * sizeof(struct script_insn) <= b->size);
	CHECK(b->maps_off + (uint64_t)b->nmaps * sizeof(struct script_map) <= b->size);
	CHECK(b->strtab_off + (uint64_t)b->nstrtab <= b->size);
	CHECK(!b->nstrtab || script_strtab(b)[b->nstrtab - 1] == 0);
	for (uint32_t m = 0; m < b->nmaps; m++) {
		const struct script_map *sm = &script_maps(b)[m];

		CHECK(sm->keylen >= 8 && sm->keylen % 8 == 0 && sm->keylen <= SCRIPT_KEY_MAX);
		CHECK(sm->vallen <= SCRIPT_VAL_BYTES);
		CHECK(sm->max >= 1);
		CHECK(sm->nbuckets <= SCRIPT_LHIST_MAX);
	}
	for (uint32_t p = 0; p < b->nprobes; p++) {
		const struct script_probe *pr = &script_probes(b)[p];

		CHECK(pr->n >= 1 && (uint64_t)pr->first + pr->n <= b->ninsns);
		CHECK(script_insns(b)[pr->first + pr->n - 1].op == SOP_END);
		for (uint32_t i = 0; i < pr->n; i++) {
			const struct script_insn *in = &script_insns(b)[pr->first + i];

			CHECK(in->op < SOP_NR);
			if (in->op == SOP_JMP || in->op == SOP_JZ || in->op == SOP_JNZ ||
			    in->op == SOP_DELTA)
				CHECK(in->imm >= 0 && in->imm < pr->n);
			if (in->op == SOP_DELTA)
				CHECK((in->x & 0xff) < b->nmaps);
			if (in->op == SOP_MAP)
				CHECK(in->x < b->nmaps);
			if (in->op == SOP_SCONST)
				CHECK(in->x < b->nstrtab);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *params[] = {"1", "two"};
	struct usc_script_opts o = {.name = "PROGRAM", .params = params, .nparams = 2,
				    .max_keys = 16};
	struct usc_script *s = NULL, *again = NULL;
	struct script_diag d, d2;
	char shown[4096];
	char *src;
	int ret, ret2;

	if (size > 16384)
		return 0;
	src = malloc(size + 1);
	if (!src)
		return 0;
	memcpy(src, data, size);
	src[size] = 0;
	ret = usc_script_compile(src, size, &o, &s, &d);
	ret2 = usc_script_compile(src, size, &o, &again, &d2);
	CHECK(ret == ret2);
	if (ret) {
		CHECK(ret == -EINVAL || ret == -ENOMEM);
		CHECK(!s && !again);
		if (ret == -EINVAL) {
			CHECK(d.set && d.msg[0]);
			CHECK(d.pos <= size);
			CHECK(d.pos == d2.pos && !strcmp(d.msg, d2.msg));
			script_diag_format(src, size, "PROGRAM", &d, shown, sizeof(shown));
			CHECK(strncmp(shown, "PROGRAM:", 8) == 0);
		}
		free(src);
		return 0;
	}
	{
		const struct script_blob *b = usc_script_blob(s), *b2 = usc_script_blob(again);
		uint64_t seed = 0x9e3779b97f4a7c15ULL;

		check_blob(b);
		CHECK(b->size == b2->size && !memcmp(b, b2, b->size));
		for (size_t i = 0; i < size; i++)
			seed = (seed ^ data[i]) * 0x100000001b3ULL;
		run_probes(b, seed);
	}
	usc_script_free(s);
	usc_script_free(again);
	free(src);
	return 0;
}
