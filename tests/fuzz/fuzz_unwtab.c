/* libFuzzer target for the unwind-table cache file's reader
 * (stack_utab_decode, src/stack/unwcache.c) and the walker over what it
 * accepts (src/stack/stack_walk.h).
 *
 * The first byte picks how the input is read:
 *   even: the input is a cache file, decoded as is (for the build-id
 *         ID below): whatever its bytes, a table or -EBADMSG;
 *   odd:  the input makes a table (base, span, shift, then rows), written
 *         as a valid file (stack_utab_encode: the checksum right) and read
 *         back, so the row checks are reached: sorted rows, known ops.
 * A table read is then walked from pcs and over a stack taken from the
 * input: whatever the rows say, the walk ends, within its frames, for a
 * reason it knows, never reading outside what it is given (ASan). Any
 * violation aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stack/unwtab.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_unwtab: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                               \
			abort();                                                \
		}                                                               \
	} while (0)

static const uint8_t ID[20] = {0x93, 0xac, 0x61, 0xec, 0x5a, 0x8e, 0xb1, 0x39, 0x6f, 0x9f,
			       0xbd, 0x35, 0x0e, 0x31, 0x69, 0xa5, 0x58, 0x52, 0x8a, 0x40};

#define MAPSTART 0x400000ULL

struct mem {
	const uint8_t *b;
	size_t len;
	uint64_t base;
};

static int mem_read(void *ctx, uint64_t addr, uint64_t *val)
{
	const struct mem *m = ctx;

	if (addr < m->base || addr - m->base > m->len || m->len - (addr - m->base) < 8)
		return 1;
	memcpy(val, m->b + (addr - m->base), 8);
	return 0;
}

static uint64_t word(const uint8_t *d, size_t n, size_t at)
{
	uint64_t v = 0;

	for (size_t i = 0; i < 8 && at + i < n; i++)
		v |= (uint64_t)d[at + i] << (8 * i);
	return v;
}

static void walk_all(const struct stack_utab *u, const uint8_t *d, size_t n)
{
	struct stack_image img = {0};
	struct mem m = {d, n, 0x7f0000000000ULL};
	static uint64_t pcs[STACK_WALK_MAX];
	static union {
		struct usc_stack st;
		uint8_t b[sizeof(struct usc_stack) + 8 * STACK_WALK_MAX];
	} o;

	CHECK(stack_image_tab(&img, u) == 0);
	CHECK(stack_image_map(&img, MAPSTART, MAPSTART + u->tab.span + 1,
			      MAPSTART - u->tab.base, 0) == 0);
	for (size_t k = 0; k < 8 && k * 16 < n; k++) {
		struct stack_walk w;
		uint64_t pc = MAPSTART + word(d, n, k * 16) % (u->tab.span + 2);
		uint64_t sp = m.base + word(d, n, k * 16 + 8) % (n + 16);
		uint32_t max = (uint32_t)(1 + word(d, n, k * 3) % STACK_WALK_MAX);

		stack_walk_image(&img, pc, sp, word(d, n, k * 5), max, mem_read, &m, pcs, &w);
		CHECK(w.end > STACK_WALK_GOING && w.end <= STACK_WALK_FALLBACK);
		CHECK(w.n >= 1 && w.n <= max);
		CHECK(pcs[0] == pc);
		CHECK(w.nsig <= STACK_SIGS_MAX);
		for (uint32_t i = 0; i < w.nsig; i++)
			CHECK(w.sig[i] < w.n);
		if (w.end == STACK_WALK_FALLBACK)
			CHECK(w.why < STACK_OP_NR || (w.why >= STACK_WHY_RBP && w.why <= STACK_WHY_SIGS));
		CHECK(stack_walk_usc(&w, pcs, true, &o.st) == (w.end == STACK_WALK_FALLBACK ? -EAGAIN : 0));
	}
	stack_image_free(&img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stack_utab *u = NULL;
	int r;

	if (size < 1)
		return 0;
	if (!(data[0] & 1)) {
		r = stack_utab_decode(data + 1, size - 1, ID, sizeof(ID), &u);
		CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
		CHECK((r == 0) == (u != NULL));
	} else if (size >= 14) {
		struct stack_utab t = {0};
		size_t nrows = (size - 14) / sizeof(struct stack_row);
		void *buf = NULL;
		size_t len = 0;

		t.tab.base = word(data, size, 1) & 0xffffffffffULL;
		t.tab.span = (uint32_t)word(data, size, 9) & 0xffffff;
		t.tab.shift = data[13] % 20;
		t.tab.nrows = (uint32_t)nrows;
		t.rows = (struct stack_row *)malloc(nrows * sizeof(*t.rows) + 1);
		memcpy(t.rows, data + 14, nrows * sizeof(*t.rows));
		memcpy(t.build_id, ID, sizeof(ID));
		t.build_id_len = sizeof(ID);
		CHECK(stack_utab_encode(&t, &buf, &len) == 0);
		r = stack_utab_decode(buf, len, ID, sizeof(ID), &u);
		CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
		if (r == 0) {
			/* what it accepted is what was written */
			CHECK(u->tab.nrows == t.tab.nrows && u->tab.span == t.tab.span);
			CHECK(!memcmp(u->rows, t.rows, nrows * sizeof(*t.rows)));
		}
		free(buf);
		free(t.rows);
	}
	if (u) {
		CHECK(u->tab.nrows >= 1 && u->tab.span >= 1 && u->tab.shift <= STACK_SHIFT_MAX);
		CHECK(u->tab.nidx == ((u->tab.span - 1) >> u->tab.shift) + 1);
		for (uint32_t b = 0; b < u->tab.nidx; b++)
			CHECK(u->idx[b] < u->tab.nrows);
		walk_all(u, data, size);
		stack_utab_free(u);
	}
	return 0;
}
