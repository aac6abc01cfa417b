/* The engines' side of walked stacks: the session's store of unwind tables
 * and a process's mappings against it (src/stack/unwstore.c), walks as an
 * engine stores them (struct fetch_walk_hdr: stack_walked,
 * fetch_walk_valid), why a walk falls back, the cache's count of maps
 * changes (cache_maps_gen), and JIT code of a known shape (CPython's perf
 * trampolines: stack/unwjit.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cache/cache.h"
#include "objfile/modules.h"
#include "stack/stack.h"
#include "stack/unwjit.h"
#include "stack/unwstore.h"
#include "stack/unwtab.h"
#include <sys/mman.h>

#define NOIPA __attribute__((noipa))

static union {
	struct usc_stack st;
	uint8_t b[sizeof(struct usc_stack) + 8 * USC_STACK_FRAMES_MAX];
} out;

struct walkbuf {
	struct fetch_walk_hdr h;
	uint64_t pcs[8];
};

static void test_walked_values(void **state)
{
	struct walkbuf v;
	size_t len;

	(void)state;
	memset(&v, 0, sizeof(v));
	v.h.n = 5;
	v.h.frames = 64;
	v.h.end = STACK_WALK_OUTERMOST;
	v.h.nsig = 1;
	v.h.sig[0] = 2;
	for (int i = 0; i < 5; i++)
		v.pcs[i] = 0x1000 + 16 * (uint64_t)i;
	len = sizeof(v.h) + 5 * 8;
	assert_true(fetch_walk_valid(&v, len));
	assert_int_equal(stack_walked(&v, len, &out.st, USC_STACK_FRAMES_MAX), 0);
	assert_int_equal(out.st.n, 5);
	assert_int_equal(out.st.end, USC_STACK_END_OUTERMOST);
	for (uint32_t i = 0; i < 5; i++)
		assert_int_equal(out.st.pc[i], 0x1000 + 16 * (uint64_t)i);
	/* frame 0 exact; the trampoline and the code it interrupted too */
	assert_true(usc_stack_exact(&out.st, 0));
	assert_false(usc_stack_exact(&out.st, 1));
	assert_true(usc_stack_sigframe(&out.st, 2) && usc_stack_exact(&out.st, 2));
	assert_true(usc_stack_exact(&out.st, 3) && !usc_stack_sigframe(&out.st, 3));
	/* any alignment */
	{
		uint8_t *odd = malloc(len + 1);

		memcpy(odd + 1, &v, len);
		assert_int_equal(stack_walked(odd + 1, len, &out.st, USC_STACK_FRAMES_MAX), 0);
		assert_int_equal(out.st.pc[4], 0x1040);
		free(odd);
	}
	/* where it ended: a limit keeps its first frame left out */
	v.h.end = STACK_WALK_LIMIT;
	v.h.end_pc = 0x2000;
	assert_int_equal(stack_walked(&v, len, &out.st, USC_STACK_FRAMES_MAX), 0);
	assert_int_equal(out.st.end, USC_STACK_END_LIMIT);
	assert_int_equal(out.st.end_pc, 0x2000);
	v.h.end = STACK_WALK_UNREAD;
	assert_int_equal(stack_walked(&v, len, &out.st, USC_STACK_FRAMES_MAX), 0);
	assert_int_equal(out.st.end, USC_STACK_END_UNREAD);	/* not a copy's end */

	/* what an engine never writes */
	assert_false(fetch_walk_valid(&v, len - 8));		/* a pc short */
	assert_false(fetch_walk_valid(&v, len + 8));
	assert_false(fetch_walk_valid(&v, sizeof(v.h) - 1));
	assert_int_equal(stack_walked(&v, len - 8, &out.st, USC_STACK_FRAMES_MAX), -EINVAL);
	assert_int_equal(stack_walked(&v, len, &out.st, 4), -EINVAL);	/* no room */
	v.h.end = STACK_WALK_GOING;
	assert_false(fetch_walk_valid(&v, len));
	v.h.end = STACK_WALK_FALLBACK;	/* a walk that fell back is stored as a copy */
	assert_false(fetch_walk_valid(&v, len));
	v.h.end = STACK_WALK_OUTERMOST;
	v.h.sig[0] = 5;			/* past the frames */
	assert_false(fetch_walk_valid(&v, len));
	v.h.sig[0] = 2;
	v.h.nsig = FETCH_WALK_SIGS + 1;
	assert_false(fetch_walk_valid(&v, len));
	v.h.nsig = 0;
	v.h.n = 300;
	assert_false(fetch_walk_valid(&v, sizeof(v.h) + 300 * 8));
}

static void test_fallbacks(void **state)
{
	struct stack_walk w = {0};

	(void)state;
	w.end = STACK_WALK_OUTERMOST;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_NONE);
	w.end = STACK_WALK_NOCFI;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_NONE);	/* the stack ends */
	w.end = STACK_WALK_UNREAD;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_NONE);
	w.end = STACK_WALK_NOMODULE;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_NOMODULE);	/* loaded since? */
	w.why = 1;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_NONE);	/* the vDSO */
	w.end = STACK_WALK_FALLBACK;
	w.why = STACK_OP_EXPR;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_EXPR);
	w.why = STACK_OP_BAD;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_BADCFI);
	w.why = STACK_WHY_RBP;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_RBP);
	w.why = STACK_WHY_SIGS;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_SIGS);
	w.why = 99;
	assert_int_equal(stack_walk_fallback(&w), STACK_FB_TABLE);
	assert_string_equal(stack_fallback_name(STACK_FB_EXPR), "expr");
	assert_string_equal(stack_fallback_name(STACK_FB_NOMODULE), "nomodule");
	assert_string_equal(stack_fallback_name(STACK_FB_NOPROC), "noproc");
	assert_string_equal(stack_fallback_name(STACK_FB_CHANGED), "changed");
	assert_string_equal(stack_fallback_name(STACK_FB_NR), "?");
	assert_int_equal(STACK_FB_NR, USC_STACK_FB_NR);
	for (unsigned f = 1; f < STACK_FB_NR; f++)
		assert_string_not_equal(stack_fallback_name(f), "?");
}

/* ---- a process's mappings against the store ------------------------------------ */

/* This thread's stack at here(): its registers and the stack above them,
 * copied (the frames are gone when the walks run) */
#define COPY 16384

static struct {
	uint64_t ip, sp, bp;
	uint64_t len;
	uint8_t bytes[COPY];
} regs;

static int read_self(void *ctx, uint64_t addr, uint64_t *val)
{
	(void)ctx;
	if (addr < regs.sp || addr - regs.sp > regs.len - 8)
		return 1;
	memcpy(val, regs.bytes + (addr - regs.sp), 8);
	return 0;
}

static uint64_t stack_top(void)
{
	unsigned long long lo, hi, sp = (uint64_t)__builtin_frame_address(0), top = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && sp >= lo && sp < hi)
			top = hi;
	if (f)
		fclose(f);
	return top;
}

/* the stack's words as they are, redzones too (ASan would refuse them) */
__attribute__((no_sanitize("address"))) static void copy_raw(uint8_t *dst, const uint64_t *src,
							     uint64_t len)
{
	for (uint64_t i = 0; i < len / 8; i++) {
		uint64_t w = ((const volatile uint64_t *)src)[i];

		memcpy(dst + 8 * i, &w, 8);
	}
}

NOIPA static void here(uint64_t top)
{
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(regs.ip), "=r"(regs.sp), "=r"(regs.bp));
	regs.len = top - regs.sp < COPY ? top - regs.sp : COPY;
	copy_raw(regs.bytes, (const uint64_t *)regs.sp, regs.len);
}

NOIPA static void caller(uint64_t top)
{
	here(top);
	__asm__ volatile("" ::: "memory");
}

static void walk_with(const struct stack_image *tabs, const struct stack_map *maps, uint32_t n,
		      uint64_t *pcs, struct stack_walk *w)
{
	struct stack_image img = *tabs;

	img.maps = (struct stack_map *)maps;
	img.nmaps = n;
	stack_walk_image(&img, regs.ip, regs.sp, regs.bp, 64, read_self, NULL, pcs, w);
}

static void test_store_proc(void **state)
{
	struct usc_cache *c = cache_new();
	struct stack_store *st;
	struct stack_map *maps = NULL, *again = NULL;
	struct stack_image own = {0};
	struct stack_tabset *set = stack_tabset_new(NULL);
	uint64_t pcs[64], pcs2[64];
	struct stack_walk w, w2;
	uint32_t n = 0, n2 = 0, ntabs;
	bool libc = false;

	(void)state;
	setenv("USCOPE_NO_UNWIND_CACHE", "1", 1);
	assert_non_null(c);
	st = stack_store_of(c);
	assert_non_null(st);
	assert_ptr_equal(stack_store_of(c), st);	/* one a cache */
	assert_int_equal(stack_store_proc(st, c, getpid(), true, &maps, &n), 0);
	assert_true(n > 2);
	ntabs = stack_store_image(st)->ntabs;
	assert_true(ntabs >= 2);
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			assert_true(maps[i - 1].end <= maps[i].start);	/* sorted, apart */
		assert_true(maps[i].tab < ntabs || maps[i].tab == STACK_TAB_NONE ||
			    maps[i].tab == STACK_TAB_FAIL || maps[i].tab == STACK_TAB_NOFILE ||
			    maps[i].tab == STACK_TAB_ANON);
		libc |= maps[i].start <= (uint64_t)&memcpy && (uint64_t)&memcpy < maps[i].end &&
			maps[i].tab < ntabs;
	}
	assert_true(libc);
	/* again: the same tables (the store only grows, each module once) */
	assert_int_equal(stack_store_proc(st, c, getpid(), false, &again, &n2), 0);
	assert_int_equal(n2, n);
	assert_memory_equal(again, maps, n * sizeof(*maps));
	assert_int_equal(stack_store_image(st)->ntabs, ntabs);

	/* the walk with the store is the walk with this process's own image */
	caller(stack_top());
	walk_with(stack_store_image(st), maps, n, pcs, &w);
	assert_int_equal(stack_image_proc(&own, set, getpid()), 0);
	stack_walk_image(&own, regs.ip, regs.sp, regs.bp, 64, read_self, NULL, pcs2, &w2);
	assert_int_equal(w.end, w2.end);
	assert_int_equal(w.end_pc, w2.end_pc);
	assert_int_equal(w.n, w2.n);
	assert_true(w.n >= 4);	/* here, caller, this test, cmocka... */
	assert_memory_equal(pcs, pcs2, 8 * w.n);

	/* no such process */
	free(again);
	again = NULL;
	assert_int_equal(stack_store_proc(st, c, 0x7ffffff0, false, &again, &n2), -ESRCH);
	assert_null(again);
	free(maps);
	stack_image_free(&own);
	stack_tabset_free(set);
	cache_free(c);	/* the store with it */
}

/* CPython's perf trampolines, as 3.12 and 3.13 (sub $8), and later
 * (push %rbp) copy them into their arenas */
static const uint8_t TRAMP_SUB[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd1,
				    0x48, 0x83, 0xc4, 0x08, 0xc3};
static const uint8_t TRAMP_FP[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5,
				   0xff, 0xd1, 0x5d, 0xc3};

static void fill(uint8_t *b, size_t n, const uint8_t *t, size_t len, size_t stride)
{
	memset(b, 0, n);
	for (size_t at = 0; at + len <= n; at += stride)
		memcpy(b + at, t, len);
}

static void test_jit_shapes(void **state)
{
	uint8_t b[64];
	const char *name = NULL;

	(void)state;
	fill(b, sizeof(b), TRAMP_SUB, sizeof(TRAMP_SUB), sizeof(TRAMP_SUB));	/* 3.12 */
	assert_int_equal(stack_jit_shape(b, sizeof(b), &name), 0);
	assert_non_null(strstr(name, "CPython"));
	fill(b, sizeof(b), TRAMP_SUB, sizeof(TRAMP_SUB), 16);			/* 3.13 */
	assert_int_equal(stack_jit_shape(b, sizeof(b), NULL), 0);
	fill(b, sizeof(b), TRAMP_FP, sizeof(TRAMP_FP), 16);			/* endbr64 */
	assert_int_equal(stack_jit_shape(b, sizeof(b), NULL), 1);
	assert_int_equal(stack_jit_shape(b, sizeof(TRAMP_FP), NULL), 1);	/* one copy */
	/* not copies: one, then something else */
	fill(b, sizeof(b), TRAMP_SUB, sizeof(TRAMP_SUB), sizeof(b));
	memset(b + sizeof(TRAMP_SUB), 0x90, 32);
	assert_int_equal(stack_jit_shape(b, sizeof(b), NULL), -ENODATA);
	/* other code: V8's, a frame that keeps its pointer */
	memcpy(b, "\x55\x48\x89\xe5\x41\x57\x41\x56", 8);
	assert_int_equal(stack_jit_shape(b, sizeof(b), NULL), -ENODATA);
	assert_int_equal(stack_jit_shape(b, 3, NULL), -ENODATA);		/* short */
}

typedef void (*tramp_fn)(uint64_t top, uint64_t b, uint64_t c, void (*fn)(uint64_t));

/* Through a trampoline of CPython 3.12's shape in anonymous executable
 * memory (a copy in the middle of its arena, which a frame pointer does not
 * describe: rbp is this function's, so a step by it would skip this frame),
 * the walk goes on to this function, then as without it. */
static void test_jit_trampoline(void **state)
{
	size_t size = 65536;
	uint8_t *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	struct usc_cache *c = cache_new();
	struct stack_store *st;
	struct stack_map *maps = NULL;
	uint64_t pcs[64], tramp;
	struct stack_walk w;
	uint32_t n = 0, k;

	(void)state;
	setenv("USCOPE_NO_UNWIND_CACHE", "1", 1);
	assert_true(mem != MAP_FAILED);
	assert_non_null(c);
	fill(mem, size, TRAMP_SUB, sizeof(TRAMP_SUB), sizeof(TRAMP_SUB));
	assert_int_equal(mprotect(mem, size, PROT_READ | PROT_EXEC), 0);
	tramp = (uint64_t)mem + 100 * sizeof(TRAMP_SUB);
	((tramp_fn)tramp)(stack_top(), 0, 0, here);
	__asm__ volatile("" ::: "memory");

	st = stack_store_of(c);
	assert_non_null(st);
	assert_int_equal(stack_store_proc(st, c, getpid(), true, &maps, &n), 0);
	walk_with(stack_store_image(st), maps, n, pcs, &w);
	/* here, then the trampoline's call, returning to its +6 */
	for (k = 0; k < w.n && pcs[k] != tramp + 6; k++)
		;
	assert_true(k == 1);
	/* its caller: this function, not the one rbp would name */
	assert_true(pcs[k + 1] > (uint64_t)test_jit_trampoline &&
		    pcs[k + 1] - (uint64_t)test_jit_trampoline < 4096);
	assert_true(w.n > k + 2);
	assert_true(w.end == STACK_WALK_OUTERMOST || w.end == STACK_WALK_LIMIT);
	/* without a process to read (a recording's), the arena is JIT code
	 * of no known shape */
	free(maps);
	maps = NULL;
	{
		size_t nm = 0;
		const struct proc_map *m = cache_maps(c, getpid(), false, &nm);
		uint32_t tab = 0;

		assert_int_equal(stack_store_maps(st, 0, m, nm, &maps, &n), 0);
		for (uint32_t i = 0; i < n; i++)
			if (maps[i].start <= tramp && tramp < maps[i].end)
				tab = maps[i].tab;
		assert_int_equal(tab, STACK_TAB_ANON);
	}
	free(maps);
	munmap(mem, size);
	cache_free(c);
}

static void test_maps_gen(void **state)
{
	struct usc_cache *c = cache_new();
	struct proc_map m = {.start = 0x1000, .end = 0x2000, .perms = "r-xp", .path = "/bin/true"};
	uint64_t g0, g1, g2;

	(void)state;
	cache_freeze(c);
	assert_int_equal(cache_maps_gen(c, 4242), 0);	/* nothing known */
	assert_int_equal(cache_set_maps(c, 4242, &m, 1), 0);
	g0 = cache_maps_gen(c, 4242);
	assert_true(g0 != 0);
	m.start = 0x3000;
	m.end = 0x4000;
	assert_int_equal(cache_add_map(c, 4242, &m), 0);
	g1 = cache_maps_gen(c, 4242);
	assert_true(g1 != g0);
	assert_int_equal(cache_maps_gen(c, 4243), 0);	/* another's */
	cache_clear_maps(c, 4242);
	g2 = cache_maps_gen(c, 4242);
	assert_true(g2 != g1 && g2 != 0);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walked_values),
		cmocka_unit_test(test_fallbacks),
		cmocka_unit_test(test_store_proc),
		cmocka_unit_test(test_maps_gen),
		cmocka_unit_test(test_jit_shapes),
		cmocka_unit_test(test_jit_trampoline),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
