/* Filters and aggregations without a target: the filter's parser (its
 * program, its errors and their positions), binding, the kernel's filter
 * text, the interpreter every engine runs (through engine_filter_pass),
 * globs; histogram buckets, percentiles, and the rows' table and keys. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "agg/agg_shared.h"
#include "probe/filter_eval.h"
#include "probe/probe.h"
#include "cache/cache.h"
#include "agg/table.h"
#include "stack/stack.h"

static struct usc_probe_spec parse_ok(const char *text)
{
	struct usc_probe_spec spec;
	struct usc_parse_error err = {0};
	int ret = usc_probe_parse(text, &spec, &err);

	if (ret)
		fail_msg("'%s': %s at %zu", text, usc_parse_strerror(err.code), err.pos);
	return spec;
}

static void parse_fails(const char *text, enum usc_parse_err code, size_t pos)
{
	struct usc_probe_spec spec;
	struct usc_parse_error err = {0};

	assert_int_equal(usc_probe_parse(text, &spec, &err), -EINVAL);
	if (err.code != code || err.pos != pos)
		fail_msg("'%s': %s at %zu, wanted %s at %zu", text, usc_parse_strerror(err.code),
			 err.pos, usc_parse_strerror(code), pos);
}

/* The program as text: ops and names, for comparison. */
static void program(const struct usc_filter *f, char *buf, size_t len)
{
	static const char *const cmps[] = {"==", "!=", "<", "<=", ">", ">=", "&", "~", "!~"};
	size_t used = 0;

	buf[0] = 0;
	for (uint32_t k = 0; k < f->n && used < len; k++) {
		const struct filter_insn *in = &f->insn[k];
		const char *sep = k ? " " : "";

		switch (in->op) {
		case FIL_CMP:
			used += (size_t)snprintf(buf + used, len - used, "%s%s%s%lld", sep,
						 f->strs + in->name, cmps[in->cmp], (long long)in->imm);
			break;
		case FIL_STR:
			used += (size_t)snprintf(buf + used, len - used, "%s%s%s'%.*s'", sep,
						 f->strs + in->name, cmps[in->cmp],
						 (int)((uint64_t)in->imm >> 32),
						 f->strs + (in->imm & 0xffff));
			break;
		case FIL_NZ:
			used += (size_t)snprintf(buf + used, len - used, "%s%s", sep,
						 f->strs + in->name);
			break;
		default:
			used += (size_t)snprintf(buf + used, len - used, "%s%s", sep,
						 in->op == FIL_AND ? "&&" : in->op == FIL_OR ? "||" : "!");
		}
	}
}

static void test_filter_parses_to_rpn(void **state)
{
	struct usc_probe_spec sp;
	char buf[512];

	(void)state;
	sp = parse_ok("f a=$arg1:s32 b=$arg2:string c=$arg3 if a > -3 && (b == \"x\" || !c)");
	assert_int_equal(sp.nargs, 3);
	program(&sp.filter, buf, sizeof(buf));
	assert_string_equal(buf, "a>-3 b=='x' c ! || &&");
	/* || binds looser than &&; & is a bit test; a glob is ~ */
	sp = parse_ok("f a=$arg1 b=$arg2:string if a & 0x10 || b != \"/api/*\" && a <= 7");
	program(&sp.filter, buf, sizeof(buf));
	assert_string_equal(buf, "a&16 b!~'/api/*' a<=7 && ||");
	/* an escaped quote and star are characters, not a glob */
	sp = parse_ok("f b=$arg2:string if b == \"q\\\"\\*\"");
	program(&sp.filter, buf, sizeof(buf));
	assert_string_equal(buf, "b=='q\"*'");
	assert_int_equal(sp.filter.pos, strlen("f b=$arg2:string if "));
}

static void test_filter_operand_expressions_are_hidden_arguments(void **state)
{
	struct usc_probe_spec sp;
	char buf[512];

	(void)state;
	sp = parse_ok("f n=$arg1 if $pid == 42 && $arg2:s32 < 0 && $pid != 7");
	assert_int_equal(sp.nargs, 3);
	assert_false(sp.args[0].hidden);
	assert_true(sp.args[1].hidden && sp.args[2].hidden);
	assert_string_equal(sp.args[1].name, "__usc_f0");
	assert_int_equal(sp.args[1].insn[0].op, FOP_PID);
	assert_int_equal(sp.args[2].type, USC_T_S32);
	assert_int_equal(probe_shown_args(sp.args, sp.nargs), 1);
	program(&sp.filter, buf, sizeof(buf));
	/* the same expression twice is one argument */
	assert_string_equal(buf, "__usc_f0==42 __usc_f1<0 && __usc_f0!=7 &&");
}

static void test_filter_errors_point_at_the_mistake(void **state)
{
	(void)state;
	parse_fails("f a=$arg1 if", USC_PERR_FILTER_EMPTY, 12);
	parse_fails("f a=$arg1 if b > 1", USC_PERR_FILTER_NAME, 13);
	parse_fails("f a=$arg1 if a >> 1", USC_PERR_FILTER_OPERAND, 16);
	parse_fails("f a=$arg1 if a = 1", USC_PERR_FILTER_OP, 15);
	parse_fails("f a=$arg1:string if a < \"x\"", USC_PERR_FILTER_STRING, 22);
	parse_fails("f a=$arg1:string if a == \"x", USC_PERR_FILTER_QUOTE, 25);
	parse_fails("f a=$arg1 if (a > 1", USC_PERR_FILTER_PAREN, 19);
	parse_fails("f a=$arg1 if a > 1 a < 2", USC_PERR_FILTER_JOIN, 19);
	parse_fails("f a=$arg1 if 1 > a", USC_PERR_FILTER_OPERAND, 13);
}

static void test_filter_binds_and_renders_for_the_kernel(void **state)
{
	struct usc_probe_spec sp;
	struct usc_filter f;
	const char *bad = NULL;
	char text[512];

	(void)state;
	sp = parse_ok("f a=$arg1:s16 b=$arg2:string if a < -2 || b == \"/x*\" && !(a & 3)");
	assert_int_equal(probe_bind_filter(&sp.filter, sp.args, sp.nargs, &f, &bad), 0);
	assert_int_equal(f.insn[0].arg, 0);
	assert_int_equal(f.insn[0].sign, 1);
	assert_int_equal(f.insn[0].size, 2);
	assert_int_equal(f.insn[1].arg, 1);
	assert_int_equal(filter_render_ftrace(&f, sp.args, text, sizeof(text)), 0);
	assert_string_equal(text, "(a < -2) || ((b ~ \"/x*\") && (!(a & 3)))");
	/* a name the site does not have, and a string compared with a number */
	assert_int_equal(probe_bind_filter(&sp.filter, sp.args, 1, &f, &bad), -ENOENT);
	assert_string_equal(bad, "b");
	sp = parse_ok("f a=$arg1:string if a > 3");
	assert_int_equal(probe_bind_filter(&sp.filter, sp.args, sp.nargs, &f, &bad), -EINVAL);
	assert_string_equal(bad, "a");
	/* what the kernel's filter cannot fetch */
	sp = parse_ok("f a=$arg1 if $tid == 3");
	assert_int_equal(probe_bind_filter(&sp.filter, sp.args, sp.nargs, &f, &bad), 0);
	assert_int_equal(filter_render_ftrace(&f, sp.args, text, sizeof(text)), -ENOTSUP);
}

/* A site of the spec's arguments, as resolve binds them (the same order). */
static bool passes(const char *probe, const struct usc_value *vals, unsigned n)
{
	struct usc_probe_spec sp = parse_ok(probe);
	struct usc_site site = {.spec = &sp, .args = sp.args, .nargs = sp.nargs};
	struct usc_event ev = {.site = &site, .vals = vals, .nvals = n};
	const char *bad = NULL;

	assert_int_equal(probe_bind_filter(&sp.filter, sp.args, sp.nargs, &site.filter, &bad), 0);
	return engine_filter_pass(&ev);
}

#define INT(x) ((struct usc_value){.kind = USC_V_INT, .u = (uint64_t)(x)})
#define STR(s) ((struct usc_value){.kind = USC_V_STR, .str = (s), .len = sizeof(s) - 1})

static void test_filter_interpreter(void **state)
{
	struct usc_value v[2];

	(void)state;
	/* signed, of its size: 0xfffe as s16 is -2 */
	v[0] = INT(0xfffe);
	assert_true(passes("f a=$arg1:s16 if a < -1", v, 1));
	assert_false(passes("f a=$arg1:u16 if a < 100", v, 1));
	assert_true(passes("f a=$arg1:u16 if a == 65534", v, 1));
	assert_true(passes("f a=$arg1 if a & 2 && !(a & 1)", v, 1));
	/* a fault compares to nothing, a NULL string too */
	v[0] = (struct usc_value){.kind = USC_V_FAULT};
	assert_false(passes("f a=$arg1 if a == 0", v, 1));
	assert_true(passes("f a=$arg1 if !(a == 0)", v, 1));
	v[0] = INT(5);
	v[1] = STR("/api/users");
	assert_true(passes("f a=$arg1 b=$arg2:string if b == \"/api/*\"", v, 2));
	assert_true(passes("f a=$arg1 b=$arg2:string if b == \"/api/users\" && a >= 5", v, 2));
	assert_false(passes("f a=$arg1 b=$arg2:string if b == \"/api/user\"", v, 2));
	assert_true(passes("f a=$arg1 b=$arg2:string if b != \"*.png\" || a > 9", v, 2));
	assert_true(passes("f a=$arg1 b=$arg2:string if a == 1 || a == 5 && b == \"*s\"", v, 2));
}

static void test_globs(void **state)
{
	static const struct {
		const char *pat, *s;
		int match;
	} cases[] = {
		{"*", "", 1}, {"*", "abc", 1}, {"a*c", "abbbc", 1}, {"a*c", "abcd", 0},
		{"?", "", 0}, {"a?c", "abc", 1}, {"*a*b*", "xxaxxbxx", 1}, {"*a*b", "ba", 0},
		{"[abc]x", "bx", 1}, {"[!abc]x", "bx", 0}, {"[!abc]x", "dx", 1},
		{"[a-c]*", "cat", 1}, {"[a-c]*", "dog", 0}, {"[]]", "]", 1}, {"[!]]", "a", 1},
		{"[a-", "a", 0}, {"/api/*/v[0-9]", "/api/x/v7", 1}, {"/api/*/v[0-9]", "/api/v7", 0},
		{"**a", "a", 1}, {"a", "aa", 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (filter_glob_full(cases[i].pat, (uint32_t)strlen(cases[i].pat), cases[i].s,
				     (uint32_t)strlen(cases[i].s)) != cases[i].match)
			fail_msg("'%s' against '%s': wanted %d", cases[i].pat, cases[i].s,
				 cases[i].match);
}

/* ---- buckets ---------------------------------------------------------------- */

static void test_log2_buckets(void **state)
{
	(void)state;
	assert_int_equal(agg_log_bucket(-5), 0);
	assert_int_equal(agg_log_bucket(INT64_MIN), 0);
	assert_int_equal(agg_log_bucket(0), 1);
	/* every value lies in its bucket's range, and buckets rise with values */
	for (int64_t v = 1; v < 100000; v++) {
		uint32_t b = agg_log_bucket(v);

		assert_true(agg_log_low(b) <= v);
		assert_true(b + 1 >= AGG_LOG_BUCKETS || v < agg_log_low(b + 1) ||
			    agg_log_low(b + 1) == agg_log_low(b));
		assert_true(b >= agg_log_bucket(v - 1));
	}
	/* a power of two starts its bucket, four a power */
	for (uint32_t k = 0; k < 63; k++) {
		assert_int_equal(agg_log_bucket((int64_t)1 << k), 2 + 4 * k);
		assert_int_equal(agg_log_low(2 + 4 * k), (int64_t)1 << k);
	}
	assert_int_equal(agg_log_bucket(INT64_MAX), 2 + 4 * 62 + 3);
	assert_true(agg_log_bucket(INT64_MAX) < AGG_LOG_BUCKETS);
	/* quarter octaves: 1024..1279 1280..1535 1536..1791 1792..2047 */
	assert_int_equal(agg_log_bucket(1279), 2 + 40);
	assert_int_equal(agg_log_bucket(1280), 2 + 41);
	assert_int_equal(agg_log_bucket(2047), 2 + 43);
}

static void test_linear_buckets(void **state)
{
	(void)state;
	/* 0..100 by 10: below, 10 steps, at or above */
	assert_int_equal(agg_linear_bucket(-1, 0, 100, 10, 12), 0);
	assert_int_equal(agg_linear_bucket(0, 0, 100, 10, 12), 1);
	assert_int_equal(agg_linear_bucket(9, 0, 100, 10, 12), 1);
	assert_int_equal(agg_linear_bucket(10, 0, 100, 10, 12), 2);
	assert_int_equal(agg_linear_bucket(99, 0, 100, 10, 12), 10);
	assert_int_equal(agg_linear_bucket(100, 0, 100, 10, 12), 11);
	assert_int_equal(agg_linear_bucket(INT64_MAX, 0, 100, 10, 12), 11);
	assert_int_equal(agg_linear_bucket(-50, -100, 100, 50, 6), 2);
}

static void test_values_of_their_type(void **state)
{
	(void)state;
	assert_int_equal(agg_value_of(0xffffffffULL, 4, 1), -1);
	assert_int_equal(agg_value_of(0xffffffffULL, 4, 0), 0xffffffffLL);
	assert_int_equal(agg_value_of(0x1234567880ULL, 1, 1), -128);
	assert_int_equal(agg_value_of(0xdeadbeefcafeULL, 0, 0), 0xdeadbeefcafeLL);
}

/* ---- rows ------------------------------------------------------------------- */

static void test_rows_merge_and_percentiles(void **state)
{
	struct agg_table t;
	struct agg_row *r, *again;
	uint8_t key[16] = {AGG_K_INT};
	struct agg_stats none = {3, 30, INT64_MAX, INT64_MIN};

	(void)state;
	assert_int_equal(agg_table_init(&t, AGG_LOG_BUCKETS), 0);
	r = agg_table_get(&t, 1, key, sizeof(key));
	assert_non_null(r);
	assert_null(agg_table_find(&t, 2, key, sizeof(key)));
	assert_ptr_equal(agg_table_find(&t, 1, key, sizeof(key)), r);
	/* 100 values 1..100 */
	for (int64_t v = 1; v <= 100; v++)
		agg_row_add(r, v, agg_log_bucket(v));
	assert_int_equal(r->st.count, 100);
	assert_int_equal(r->st.sum, 5050);
	assert_int_equal(r->st.min, 1);
	assert_int_equal(r->st.max, 100);
	/* within a quarter octave of the truth (50, 99) */
	assert_in_range(agg_percentile(r, AGG_LOG_BUCKETS, 50), 40, 64);
	assert_in_range(agg_percentile(r, AGG_LOG_BUCKETS, 99), 80, 100);
	assert_int_equal(agg_percentile(r, AGG_LOG_BUCKETS, 100), 100);
	/* a part with no min or max known adds its counts only */
	agg_row_merge(r, &none, NULL, 0);
	assert_int_equal(r->st.count, 103);
	assert_int_equal(r->st.min, 1);
	assert_int_equal(r->st.max, 100);
	/* many rows: the table grows, rows stay where they were */
	for (int i = 0; i < 5000; i++) {
		key[8] = (uint8_t)i;
		key[9] = (uint8_t)(i >> 8);
		assert_non_null(agg_table_get(&t, 2, key, sizeof(key)));
	}
	memset(key + 8, 0, 8);
	again = agg_table_get(&t, 1, key, sizeof(key));
	assert_ptr_equal(again, r);
	assert_int_equal(t.n, 5001);
	agg_table_clear(&t);
	assert_int_equal(r->st.count, 0);
	agg_table_free(&t);
}

static void test_threads_sum_with_unknown_min_max(void **state)
{
	struct agg_table t;
	struct agg_row *r;
	struct agg_stats a = {2, 10, 3, 7}, stale = {5, 50, INT64_MAX, INT64_MIN}, b = {1, -4, -4, -4};

	(void)state;
	assert_int_equal(agg_table_init(&t, 0), 0);
	r = agg_table_get(&t, 0, NULL, 0);
	agg_row_sum(r, &stale, NULL, 0);
	agg_row_sum(r, &a, NULL, 0);
	agg_row_sum(r, &b, NULL, 0);
	assert_int_equal(r->st.count, 8);
	assert_int_equal(r->st.sum, 56);
	assert_int_equal(r->st.min, -4);
	assert_int_equal(r->st.max, 7);
	agg_table_free(&t);
}

static void test_keys_of_events(void **state)
{
	struct usc_probe_spec sp = parse_ok("f n=$arg1:s32 s=$arg2:string t=$arg3:string");
	struct usc_site site = {.spec = &sp, .args = sp.args, .nargs = sp.nargs};
	struct usc_value vals[3] = {INT(0x1ffffffffULL), STR("0123456789abcdef!"),
				    {.kind = USC_V_NULL}};
	struct usc_event ev = {.site = &site, .vals = vals, .nvals = 3};
	uint8_t key[AGG_KEY_MAX], key2[AGG_KEY_MAX];
	struct usc_value v;
	bool cut;
	uint32_t len;

	(void)state;
	len = agg_key_of(NULL, &ev, 0, 3, 16, key, &cut);
	assert_int_equal(len, 16 + 24 + 24);
	assert_int_equal(agg_key_len(sp.args, 0, 3, 16), len);
	assert_true(cut);
	/* the same values, the same bytes */
	assert_int_equal(agg_key_of(NULL, &ev, 0, 3, 16, key2, &cut), len);
	assert_memory_equal(key, key2, len);
	agg_key_value(NULL, key, len, sp.args, 0, 0, 16, &v, &cut, NULL);
	assert_int_equal(v.kind, USC_V_INT);
	assert_int_equal(v.u, 0xffffffffULL);	/* masked to its 4 bytes */
	agg_key_value(NULL, key, len, sp.args, 0, 1, 16, &v, &cut, NULL);
	assert_int_equal(v.kind, USC_V_STR);
	assert_int_equal(v.len, 16);
	assert_memory_equal(v.str, "0123456789abcdef", 16);
	assert_true(cut);
	agg_key_value(NULL, key, len, sp.args, 0, 2, 16, &v, &cut, NULL);
	assert_int_equal(v.kind, USC_V_NULL);
}

/* A stack keys by its number in the session's cache: the same frames the
 * same key, other frames (or the same in another process) another. */
static void test_stack_keys(void **state)
{
	struct usc_probe_spec sp = parse_ok("f n=$arg1:u8 $ustack:4");
	struct usc_site site = {.spec = &sp, .args = sp.args, .nargs = sp.nargs};
	struct usc_cache *c = cache_new();
	struct usc_stack *a = calloc(1, stack_size(4)), *b = calloc(1, stack_size(4));
	struct usc_value vals[2] = {INT(7), {.kind = USC_V_STACK}};
	struct usc_event ev = {.site = &site, .vals = vals, .nvals = 2, .pid = 42};
	uint8_t k1[AGG_KEY_MAX], k2[AGG_KEY_MAX], k3[AGG_KEY_MAX], k4[AGG_KEY_MAX];
	struct usc_value v;
	pid_t pid = 0;
	bool cut;
	uint32_t len;

	(void)state;
	assert_non_null(c);
	assert_int_equal(sp.args[1].type, USC_T_STACK);
	a->n = b->n = 3;
	a->pc[0] = b->pc[0] = 0x401000;
	a->pc[1] = b->pc[1] = 0x401234;
	a->pc[2] = 0x402000;
	b->pc[2] = 0x402008;
	a->exact[0] = b->exact[0] = 1;
	vals[1].stack = a;
	len = agg_key_of(c, &ev, 0, 2, 16, k1, &cut);
	assert_int_equal(len, 32);
	vals[1].stack = b;
	assert_int_equal(agg_key_of(c, &ev, 0, 2, 16, k2, &cut), len);
	assert_memory_not_equal(k1, k2, len);	/* another caller */
	b->pc[2] = 0x402000;
	assert_int_equal(agg_key_of(c, &ev, 0, 2, 16, k3, &cut), len);
	assert_memory_equal(k1, k3, len);	/* the same frames again */
	ev.pid = 43;
	assert_int_equal(agg_key_of(c, &ev, 0, 2, 16, k4, &cut), len);
	assert_memory_not_equal(k1, k4, len);	/* another process */
	agg_key_value(c, k1, len, sp.args, 0, 1, 16, &v, &cut, &pid);
	assert_int_equal(v.kind, USC_V_STACK);
	assert_int_equal(pid, 42);
	assert_int_equal(v.stack->n, 3);
	assert_int_equal(v.stack->pc[2], 0x402000);
	agg_key_value(c, k1, len, sp.args, 0, 0, 16, &v, &cut, &pid);
	assert_int_equal(v.kind, USC_V_INT);
	assert_int_equal(v.u, 7);
	free(a);
	free(b);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter_parses_to_rpn),
		cmocka_unit_test(test_filter_operand_expressions_are_hidden_arguments),
		cmocka_unit_test(test_filter_errors_point_at_the_mistake),
		cmocka_unit_test(test_filter_binds_and_renders_for_the_kernel),
		cmocka_unit_test(test_filter_interpreter),
		cmocka_unit_test(test_globs),
		cmocka_unit_test(test_log2_buckets),
		cmocka_unit_test(test_linear_buckets),
		cmocka_unit_test(test_values_of_their_type),
		cmocka_unit_test(test_rows_merge_and_percentiles),
		cmocka_unit_test(test_threads_sum_with_unknown_min_max),
		cmocka_unit_test(test_keys_of_events),
		cmocka_unit_test(test_stack_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
