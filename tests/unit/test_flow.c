/* Unit tests for entry/return pairing (src/flow/flow.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flow/flow.h"

#define K(s) s, strlen(s)

static struct flow_result feed(struct flow_state *st, uint64_t ctx, uint64_t t,
			       enum flow_kind kind, const char *key)
{
	struct flow_result r;

	assert_int_equal(flow_feed(st, ctx, t, kind, key, strlen(key), &r), 0);
	return r;
}

static void expect(struct flow_result r, size_t depth, int64_t dur)
{
	assert_int_equal(r.depth, depth);
	assert_int_equal(r.duration_ns, dur);
}

static void test_simple_pair(void **state)
{
	struct flow_state *st = flow_new();

	(void)state;
	assert_non_null(st);
	expect(feed(st, 7, 1000, FLOW_ENTRY, "main"), 0, -1);
	expect(feed(st, 7, 1500, FLOW_ENTRY, "parse"), 1, -1);
	expect(feed(st, 7, 1600, FLOW_EVENT, "x"), 2, -1);
	expect(feed(st, 7, 4089, FLOW_RETURN, "parse"), 1, 2589);
	assert_int_equal(flow_depth(st, 7), 1);
	expect(feed(st, 7, 5000, FLOW_RETURN, "main"), 0, 4000);
	assert_int_equal(flow_depth(st, 7), 0);
	/* the stack is reusable after it emptied */
	expect(feed(st, 7, 6000, FLOW_ENTRY, "main"), 0, -1);
	expect(feed(st, 7, 6000, FLOW_RETURN, "main"), 0, 0);
	assert_int_equal(flow_nthreads(st), 1);
	flow_free(st);
}

/* fib(3): fib(2) { fib(1), fib(0) }, fib(1) */
static void test_recursion(void **state)
{
	struct flow_state *st = flow_new();
	uint64_t t = 0;

	(void)state;
	expect(feed(st, 1, t += 10, FLOW_ENTRY, "fib"), 0, -1);	/* fib(3) @10 */
	expect(feed(st, 1, t += 10, FLOW_ENTRY, "fib"), 1, -1);	/* fib(2) @20 */
	expect(feed(st, 1, t += 10, FLOW_ENTRY, "fib"), 2, -1);	/* fib(1) @30 */
	expect(feed(st, 1, t += 10, FLOW_RETURN, "fib"), 2, 10);	/* @40 */
	expect(feed(st, 1, t += 10, FLOW_ENTRY, "fib"), 2, -1);	/* fib(0) @50 */
	expect(feed(st, 1, t += 10, FLOW_RETURN, "fib"), 2, 10);	/* @60 */
	expect(feed(st, 1, t += 10, FLOW_RETURN, "fib"), 1, 50);	/* fib(2) @70 */
	expect(feed(st, 1, t += 10, FLOW_ENTRY, "fib"), 1, -1);	/* fib(1) @80 */
	expect(feed(st, 1, t += 10, FLOW_RETURN, "fib"), 1, 10);	/* @90 */
	expect(feed(st, 1, t += 10, FLOW_RETURN, "fib"), 0, 90);	/* fib(3) @100 */
	assert_int_equal(flow_depth(st, 1), 0);
	flow_free(st);
}

static void test_two_threads(void **state)
{
	struct flow_state *st = flow_new();

	(void)state;
	expect(feed(st, 100, 1, FLOW_ENTRY, "work"), 0, -1);
	expect(feed(st, 200, 2, FLOW_ENTRY, "work"), 0, -1);
	expect(feed(st, 100, 3, FLOW_ENTRY, "step"), 1, -1);
	expect(feed(st, 200, 4, FLOW_ENTRY, "step"), 1, -1);
	expect(feed(st, 200, 5, FLOW_EVENT, "tick"), 2, -1);
	expect(feed(st, 100, 6, FLOW_RETURN, "step"), 1, 3);
	expect(feed(st, 200, 9, FLOW_RETURN, "step"), 1, 5);
	expect(feed(st, 200, 10, FLOW_RETURN, "work"), 0, 8);
	assert_int_equal(flow_depth(st, 100), 1);
	assert_int_equal(flow_depth(st, 200), 0);
	expect(feed(st, 100, 11, FLOW_RETURN, "work"), 0, 10);
	assert_int_equal(flow_nthreads(st), 2);
	flow_free(st);
}

static void test_return_without_entry(void **state)
{
	struct flow_state *st = flow_new();

	(void)state;
	/* unknown thread */
	expect(feed(st, 5, 10, FLOW_RETURN, "main"), 0, -1);
	expect(feed(st, 5, 10, FLOW_EVENT, "e"), 0, -1);
	assert_int_equal(flow_nthreads(st), 0);
	/* known thread, key on no frame: the stack stays as it is */
	expect(feed(st, 5, 20, FLOW_ENTRY, "a"), 0, -1);
	expect(feed(st, 5, 30, FLOW_ENTRY, "b"), 1, -1);
	expect(feed(st, 5, 40, FLOW_RETURN, "zzz"), 0, -1);
	assert_int_equal(flow_depth(st, 5), 2);
	/* same name, other length: not the same key */
	expect(feed(st, 5, 45, FLOW_RETURN, "bb"), 0, -1);
	assert_int_equal(flow_depth(st, 5), 2);
	expect(feed(st, 5, 50, FLOW_RETURN, "b"), 1, 20);
	expect(feed(st, 5, 60, FLOW_RETURN, "a"), 0, 40);
	flow_free(st);
}

static void test_missed_return(void **state)
{
	struct flow_state *st = flow_new();
	struct flow_result r;

	(void)state;
	expect(feed(st, 1, 100, FLOW_ENTRY, "A"), 0, -1);
	expect(feed(st, 1, 200, FLOW_ENTRY, "B"), 1, -1);
	expect(feed(st, 1, 250, FLOW_ENTRY, "C"), 2, -1);
	r = feed(st, 1, 300, FLOW_RETURN, "A");	/* B's and C's frames go with it */
	expect(r, 0, 200);
	assert_int_equal(r.dropped, 2);
	assert_int_equal(flow_depth(st, 1), 0);
	expect(feed(st, 1, 400, FLOW_RETURN, "B"), 0, -1);	/* B is gone */
	flow_free(st);
}

/* keys are compared by content, not by pointer */
static void test_key_bytes(void **state)
{
	struct flow_state *st = flow_new();
	const char *a = "python_function__entry", *b = "python_function__return";
	struct flow_result r;

	(void)state;
	assert_int_equal(flow_feed(st, 1, 1, FLOW_ENTRY, a, 17, &r), 0);
	assert_int_equal(flow_feed(st, 1, 4, FLOW_RETURN, b, 17, &r), 0);
	expect(r, 0, 3);
	flow_free(st);
}

static void test_deep(void **state)
{
	struct flow_state *st = flow_new();
	enum { N = 10000 };

	(void)state;
	for (size_t i = 0; i < N; i++)
		expect(feed(st, 42, i, FLOW_ENTRY, "rec"), i, -1);
	assert_int_equal(flow_depth(st, 42), N);
	for (size_t i = N; i-- > 0;)
		expect(feed(st, 42, 2 * N - 1 - i, FLOW_RETURN, "rec"), i,
		       (int64_t)(2 * N - 1 - 2 * i));
	assert_int_equal(flow_depth(st, 42), 0);
	/* again deep, then one return of the outermost key unwinds it all */
	expect(feed(st, 42, 0, FLOW_ENTRY, "outer"), 0, -1);
	for (size_t i = 0; i < N; i++)
		feed(st, 42, 1, FLOW_ENTRY, "rec");
	expect(feed(st, 42, 5, FLOW_RETURN, "outer"), 0, 5);
	assert_int_equal(flow_depth(st, 42), 0);
	flow_free(st);
}

static void test_many_threads(void **state)
{
	struct flow_state *st = flow_new();
	enum { T = 1000, D = 5 };

	(void)state;
	/* interleave: every thread goes one level deeper each round */
	for (int d = 0; d < D; d++)
		for (int32_t tid = 1; tid <= T; tid++)
			expect(feed(st, tid * 7919, (uint64_t)(d * T + tid), FLOW_ENTRY, "f"),
			       (size_t)d, -1);
	assert_int_equal(flow_nthreads(st), T);
	for (int32_t tid = 1; tid <= T; tid++)
		assert_int_equal(flow_depth(st, tid * 7919), D);
	assert_int_equal(flow_depth(st, 1), 0);
	for (int d = D; d-- > 0;)
		for (int32_t tid = T; tid >= 1; tid--) {
			uint64_t t = (uint64_t)(2 * D * T) - (uint64_t)(d * T + tid);

			expect(feed(st, tid * 7919, t, FLOW_RETURN, "f"), (size_t)d,
			       (int64_t)(t - (uint64_t)(d * T + tid)));
		}
	for (int32_t tid = 1; tid <= T; tid++)
		assert_int_equal(flow_depth(st, tid * 7919), 0);
	/* negative and zero tids hash like any other */
	expect(feed(st, -1, 1, FLOW_ENTRY, "f"), 0, -1);
	expect(feed(st, 0, 1, FLOW_ENTRY, "f"), 0, -1);
	expect(feed(st, -1, 3, FLOW_RETURN, "f"), 0, 2);
	assert_int_equal(flow_nthreads(st), T + 2);
	flow_free(st);
}

/* self time: a call's duration less its callees' that returned */
static void test_self_time(void **state)
{
	struct flow_state *st = flow_new();
	struct flow_result r;

	(void)state;
	feed(st, 1, 100, FLOW_ENTRY, "main");
	feed(st, 1, 110, FLOW_ENTRY, "a");
	feed(st, 1, 120, FLOW_ENTRY, "b");
	r = feed(st, 1, 150, FLOW_RETURN, "b");
	assert_int_equal(r.self_ns, 30);
	r = feed(st, 1, 170, FLOW_RETURN, "a");	/* 60, of which b took 30 */
	assert_int_equal(r.duration_ns, 60);
	assert_int_equal(r.self_ns, 30);
	feed(st, 1, 180, FLOW_ENTRY, "c");
	r = feed(st, 1, 200, FLOW_RETURN, "c");
	assert_int_equal(r.self_ns, 20);
	r = feed(st, 1, 300, FLOW_RETURN, "main");	/* 200 less a's 60 and c's 20 */
	assert_int_equal(r.duration_ns, 200);
	assert_int_equal(r.self_ns, 120);
	/* unmatched: no self time */
	r = feed(st, 1, 400, FLOW_RETURN, "x");
	assert_int_equal(r.self_ns, -1);
	flow_free(st);
}

/* right after a return, its frame and the ones dropped with it stay readable,
 * with their data, for the call path */
static void test_frames_after_return(void **state)
{
	struct flow_state *st = flow_new();
	struct flow_result r;
	const char *key;
	size_t len;
	uint64_t t;
	void *data;
	int tags[3];

	(void)state;
	assert_int_equal(flow_feed_data(st, 2, 10, FLOW_ENTRY, K("A"), &tags[0], &r), 0);
	assert_int_equal(flow_feed_data(st, 2, 20, FLOW_ENTRY, K("B"), &tags[1], &r), 0);
	assert_int_equal(flow_feed_data(st, 2, 30, FLOW_ENTRY, K("C"), &tags[2], &r), 0);
	assert_true(flow_frame(st, 2, 2, &key, &len, &t, &data));
	assert_int_equal(t, 30);
	assert_ptr_equal(data, &tags[2]);
	assert_false(flow_frame(st, 2, 3, &key, &len, NULL, NULL));
	/* B returns: C was dropped with it */
	assert_int_equal(flow_feed_data(st, 2, 50, FLOW_RETURN, K("B"), NULL, &r), 0);
	assert_int_equal(r.depth, 1);
	assert_int_equal(r.dropped, 1);
	assert_ptr_equal(r.data, &tags[1]);
	assert_true(flow_frame(st, 2, 0, &key, &len, NULL, &data));
	assert_memory_equal(key, "A", 1);
	assert_true(flow_frame(st, 2, 1, &key, &len, NULL, &data));
	assert_memory_equal(key, "B", 1);
	assert_true(flow_frame(st, 2, 2, &key, &len, NULL, &data));
	assert_ptr_equal(data, &tags[2]);
	assert_false(flow_frame(st, 2, 3, &key, &len, NULL, NULL));
	/* the next entry reuses them */
	assert_int_equal(flow_feed_data(st, 2, 60, FLOW_ENTRY, K("D"), NULL, &r), 0);
	assert_false(flow_frame(st, 2, 2, &key, &len, NULL, NULL));
	assert_false(flow_frame(st, 99, 0, &key, &len, NULL, NULL));
	flow_free(st);
}

/* one id per distinct pairing key, in key order; unpaired sites get none */
static void test_functions(void **state)
{
	struct usc_probe_spec spec = {.loc_kind = USC_LOC_SYMBOL}, at = {.loc_kind = USC_LOC_SYMBOL,
									  .has_offset = true};
	struct usc_site sites[5] = {
		{.spec = &spec, .symbol = (char *)"zeta", .label = "zeta"},
		{.spec = &spec, .symbol = (char *)"alpha", .label = "alpha"},
		{.spec = &spec, .symbol = (char *)"zeta", .label = "zeta__return",
		 .is_return = true},
		{.spec = &at, .symbol = (char *)"alpha", .label = "alpha_8"},
		{.spec = &spec, .symbol = (char *)"alpha", .label = "alpha__return",
		 .is_return = true},
	};
	uint32_t *ids;
	const char **keys;
	size_t *lens, n;

	(void)state;
	assert_int_equal(flow_functions(sites, 5, &ids, &keys, &lens, &n), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(keys[0], "alpha", lens[0]);
	assert_memory_equal(keys[1], "zeta", lens[1]);
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[1], 0);
	assert_int_equal(ids[2], 1);
	assert_int_equal(ids[3], UINT32_MAX);
	assert_int_equal(ids[4], 0);
	free(ids);
	free(keys);
}

/* A goroutine's calls pair on its own stack (a 64-bit context), whichever
 * thread their events came from; contexts that differ in their high bits
 * only are two. */
static void test_goroutine_contexts(void **state)
{
	struct flow_state *st = flow_new();
	const uint64_t g1 = 0xc000102000ULL | 1ULL << 63, g2 = 0xc000102000ULL | 1ULL << 62;
	uint64_t seen[2] = {0}, ctx;
	size_t it = 0, n = 0;

	(void)state;
	expect(feed(st, g1, 100, FLOW_ENTRY, "main.process"), 0, -1);
	expect(feed(st, g2, 150, FLOW_ENTRY, "main.process"), 0, -1);
	expect(feed(st, g1, 400, FLOW_RETURN, "main.process"), 0, 300);
	expect(feed(st, g2, 500, FLOW_RETURN, "main.process"), 0, 350);
	assert_int_equal(flow_nthreads(st), 2);
	while (flow_next_ctx(st, &it, &ctx) && n < 2)
		seen[n++] = ctx;
	assert_false(flow_next_ctx(st, &it, &ctx));
	assert_int_equal(n, 2);
	assert_true((seen[0] == g1 && seen[1] == g2) || (seen[0] == g2 && seen[1] == g1));
	flow_free(st);
}

/* An event's context: the hidden g of a Go site (top bit set), else its
 * tid; a g of 0 (not read) falls back to the tid. */
static void test_ctx_of(void **state)
{
	struct usc_fetcharg args[2] = {{.name = "id"}, {.name = USC_GO_CTX_ARG, .hidden = true}};
	struct usc_site go = {.args = args, .nargs = 2}, c = {.args = args, .nargs = 1};
	struct usc_value vals[2] = {{.kind = USC_V_INT, .u = 7},
				    {.kind = USC_V_INT, .u = 0xc000102000ULL}};
	struct usc_event ev = {.tid = 4242, .site = &go, .nvals = 2, .vals = vals};

	(void)state;
	assert_true(site_go_ctx(&go));
	assert_false(site_go_ctx(&c));
	assert_int_equal(flow_ctx_of(&ev), 0xc000102000ULL | 1ULL << 63);
	vals[1].u = 0;
	assert_int_equal(flow_ctx_of(&ev), 4242);
	ev.site = &c;
	ev.nvals = 1;
	assert_int_equal(flow_ctx_of(&ev), 4242);
}

static void test_free_null(void **state)
{
	(void)state;
	flow_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple_pair),
		cmocka_unit_test(test_recursion),
		cmocka_unit_test(test_two_threads),
		cmocka_unit_test(test_return_without_entry),
		cmocka_unit_test(test_missed_return),
		cmocka_unit_test(test_key_bytes),
		cmocka_unit_test(test_deep),
		cmocka_unit_test(test_many_threads),
		cmocka_unit_test(test_self_time),
		cmocka_unit_test(test_frames_after_return),
		cmocka_unit_test(test_functions),
		cmocka_unit_test(test_goroutine_contexts),
		cmocka_unit_test(test_ctx_of),
		cmocka_unit_test(test_free_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
