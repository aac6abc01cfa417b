/* uscope script without a target: each pass's mistakes and where they
 * point (the lexer, the parser, the probes, names and types), what the
 * compiler makes of common programs (its fast forms, map reads kept in a
 * register and forgotten when they must be), the executor on uscope's
 * side (BEGIN and END programs, and uprobes on made-up events: the one
 * update path and the machine give the same maps), bpftrace's output
 * formats, the runtime errors said once, and the map tables (script/table.h:
 * full, delete, the epoch, copies per thread, clear and zero). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/log.h"
#include "probe/event.h"
#include "probe/probe.h"
#include "resolve/resolve.h"
#include "script/prog.h"
#include "script/run.h"
#include "script/script.h"
#include "script/table.h"

static struct usc_script *compile_ok(const char *src)
{
	struct usc_script_opts o = {.name = "PROGRAM", .max_keys = 64};
	struct usc_script *s = NULL;
	struct script_diag d;
	int ret = usc_script_compile(src, strlen(src), &o, &s, &d);

	if (ret)
		fail_msg("%s: %s (at %u)", src, d.msg, d.pos);
	return s;
}

/* The mistake as uscope shows it. */
static char *mistake(const char *src)
{
	static char buf[2048];
	struct usc_script_opts o = {.name = "PROGRAM"};
	struct usc_script *s = NULL;
	struct script_diag d;
	int ret = usc_script_compile(src, strlen(src), &o, &s, &d);

	assert_int_equal(ret, -EINVAL);
	assert_null(s);
	assert_true(d.set);
	assert_true(d.pos <= strlen(src));
	script_diag_format(src, strlen(src), "PROGRAM", &d, buf, sizeof(buf));
	return buf;
}

static void test_mistakes_point_at_their_place(void **state)
{
	static const struct {
		const char *src, *want;
	} cases[] = {
		/* lexer */
		{"BEGIN { printf(\"x); }", "PROGRAM:1:16: "},
		{"BEGIN { $x = 1 ` 2; }", "PROGRAM:1:16: "},
		/* parser */
		{"BEGIN { @x = ; }", "PROGRAM:1:14: expected an expression, not ';'\n"
				    "  BEGIN { @x = ; }\n"
				    "               ^\n"},
		{"BEGIN {\n  @x = 1\n  @y = 2;\n}", "PROGRAM:3:3: "},
		{"BEGIN { for ($i : 1..3) { } }", "PROGRAM:1:9: for loops are not in bpftrace 0.17"},
		/* probes */
		{"kprobe:do_sys_open { }", "PROGRAM:1:1: kprobe: probes are bpftrace's for kernel "
					   "functions"},
		{"tracepoint:a:b { }", "PROGRAM:1:1: tracepoint: probes are bpftrace's for kernel "
				       "tracepoints"},
		/* names and types */
		{"BEGIN { @x = \"a\" + 1; }", "PROGRAM:1:14: the '+' operator can not be used on "
					      "expressions of types string, int64"},
		{"BEGIN { @x = retval; }", "PROGRAM:1:14: the retval builtin can only be used with "
					   "'uretprobe' probes"},
		{"BEGIN { @x = nope; }", "PROGRAM:1:14: unknown identifier: 'nope'"},
		{"BEGIN { @x = 1; @x = \"s\"; }", "PROGRAM:1:"},
		{"BEGIN { @x = count(); @x = 1; }", "PROGRAM:1:"},
		{"BEGIN { system(\"ls\"); }", "PROGRAM:1:9: system() runs a command"},
		{"BEGIN { signal(9); }", "PROGRAM:1:9: signal() changes the traced program"},
		{"BEGIN { @x = kstack; }", "PROGRAM:1:14: kstack is the kernel's"},
		{"BEGIN { printf(\"%d %d\\n\", 1); }", "PROGRAM:1:"},
		{"BEGIN { printf(\"%q\\n\", 1); }", "PROGRAM:1:"},
		{"BEGIN { @x = 1 / 0; }", "PROGRAM:1:18: division by zero"},
		{"BEGIN { @x = sizeof(uint33); }", "PROGRAM:1:21: unknown type: uint33"},
		{"BEGIN { $x = (1, \"a\"); $x = (\"a\", 1); }",
		 "PROGRAM:1:24: type mismatch for $x: a tuple of other elements"},
		{"BEGIN { $v = (1, 2, 3, 4, 5, 6, 7, 8, 9); }",
		 "PROGRAM:1:9: a tuple in a variable has 8 elements at most"},
		{"BEGIN { $x = (1, (2, 3)); }", "PROGRAM:1:18: a tuple holds integers and strings"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = mistake(cases[i].src);

		if (strncmp(got, cases[i].want, strlen(cases[i].want)))
			fail_msg("%s:\n got  %s\n want %s", cases[i].src, got, cases[i].want);
		/* the caret line is there, under the place */
		assert_non_null(strchr(got, '^'));
	}
}

static const struct script_probe *probe_of(struct usc_script *s, unsigned i)
{
	const struct script_blob *b = usc_script_blob(s);

	assert_true(i < b->nprobes);
	return &script_probes(b)[i];
}

/* The number of map operations mop on map m in probe p. */
static unsigned map_ops(struct usc_script *s, unsigned p, int m, int64_t mop)
{
	const struct script_blob *b = usc_script_blob(s);
	const struct script_probe *pr = probe_of(s, p);
	unsigned n = 0;

	for (uint32_t i = 0; i < pr->n; i++) {
		const struct script_insn *in = &script_insns(b)[pr->first + i];

		n += in->op == SOP_MAP && (m < 0 || in->x == (uint32_t)m) && in->imm == mop;
	}
	return n;
}

static void test_compiled_forms(void **state)
{
	struct usc_script *s;

	(void)state;
	/* one update: run with no machine, on the fast path */
	s = compile_ok("uprobe:/bin/true:main { @[arg0] = count(); }");
	assert_true(probe_of(s, 0)->flags & SCRIPT_PROBE_UPDATES);
	assert_true(probe_of(s, 0)->flags & SCRIPT_PROBE_FAST);
	assert_int_equal(probe_of(s, 0)->n, 2);
	usc_script_free(s);

	s = compile_ok("uprobe:/bin/true:main { @s[tid] = nsecs; }\n"
		       "uretprobe:/bin/true:main /@s[tid]/ { @h = hist(nsecs - @s[tid]); "
		       "delete(@s[tid]); }");
	assert_true(probe_of(s, 0)->flags & SCRIPT_PROBE_UPDATES);
	/* the return's: a few updates too, its predicate, read and
	 * subtraction one SOP_DELTA (@s[tid] read once), then the hist and the
	 * delete */
	assert_true(probe_of(s, 1)->flags & SCRIPT_PROBE_UPDATES);
	assert_true(probe_of(s, 1)->flags & SCRIPT_PROBE_FAST);
	assert_int_equal(probe_of(s, 1)->n, 4);
	assert_int_equal(script_insns(usc_script_blob(s))[probe_of(s, 1)->first].op, SOP_DELTA);
	assert_int_equal(map_ops(s, 1, 0, SMOP_LOAD), 0);
	assert_int_equal(map_ops(s, 1, 0, SMOP_DELETE), 1);
	usc_script_free(s);

	/* a string, an output: not the fast path */
	s = compile_ok("uprobe:/bin/true:main { printf(\"%d\\n\", arg0); }");
	assert_false(probe_of(s, 0)->flags & (SCRIPT_PROBE_FAST | SCRIPT_PROBE_UPDATES));
	usc_script_free(s);

	/* a store between two reads: read again */
	s = compile_ok("uprobe:/bin/true:main { @x[tid] = 1; @y = @x[tid]; @x[tid] = 2; "
		       "@z = @x[tid]; }");
	assert_int_equal(map_ops(s, 0, 0, SMOP_LOAD), 2);
	usc_script_free(s);

	/* a read in a branch is not known after it */
	s = compile_ok("BEGIN { @x = 1; } uprobe:/bin/true:main { if (arg0) { @y = @x; } @z = @x; }");
	assert_int_equal(map_ops(s, 1, 0, SMOP_LOAD), 2);
	usc_script_free(s);
}

/* ---- the executor on uscope's side ------------------------------------------ */

static char logbuf[4096];

static void log_to_buf(enum usc_log_level level, const char *msg, void *ctx)
{
	size_t n = strlen(logbuf);

	(void)level;
	(void)ctx;
	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", msg);
}

/* A BEGIN/END program's whole output. */
static char *run_begin(const char *src, bool json)
{
	struct usc_script *s = compile_ok(src);
	char *out = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&out, &n);
	struct script_rt *rt;

	assert_non_null(fp);
	rt = script_rt_new(s, fp, json);
	assert_non_null(rt);
	logbuf[0] = 0;
	usc_set_log(log_to_buf, NULL);
	script_rt_begin(rt);
	script_rt_end(rt);
	usc_set_log(NULL, NULL);
	script_rt_free(rt);
	usc_script_free(s);
	fclose(fp);
	return out;
}

static void expect_out(const char *src, const char *want)
{
	char *got = run_begin(src, false);

	if (strcmp(got, want))
		fail_msg("%s:\ngot:\n%s\nwant:\n%s", src, got, want);
	free(got);
}

static void test_begin_programs(void **state)
{
	(void)state;
	/* integers as bpftrace computes them: unsigned / and %, shifts */
	expect_out("BEGIN { printf(\"%d %d %d %d %d\\n\", 7 / 2, -7 / 2 > 0, 7 % 3, 1 << 4, "
		   "-16 >> 2 > 0); exit(); }", "3 1 1 16 1\n\n\n");
	/* strings, comparisons, the ternary */
	expect_out("BEGIN { $s = \"abc\"; printf(\"%s %d %d %s\\n\", $s, $s == \"abc\", "
		   "strncmp($s, \"abd\", 2), 1 > 2 ? \"y\" : \"n\"); exit(); }", "abc 1 0 n\n\n\n");
	/* loops */
	expect_out("BEGIN { $i = 0; $t = 0; while ($i < 10) { $i++; if ($i == 3) { continue; } "
		   "if ($i == 8) { break; } $t += $i; } unroll(3) { $t++; } printf(\"%d\\n\", $t); "
		   "exit(); }", "28\n\n\n");
	/* printf's conversions */
	expect_out("BEGIN { printf(\"[%5d|%-5d|%05d|%x|%X|%o|%c|%s|%8s|%-4s|]\\n\", 42, 42, 42, 255, "
		   "255, 8, 65, \"str\", \"r\", \"l\"); exit(); }",
		   "[   42|42   |00042|ff|FF|10|A|str|       r|l   |]\n\n\n");
	/* maps left at the end, as bpftrace prints them: sorted by value */
	expect_out("BEGIN { @c[\"b\"] = 3; @c[\"a\"] = 1; @c[\"z\"] = 2; @n = 5; @t[1, \"x\"] = 7; "
		   "exit(); }",
		   "\n\n@c[a]: 1\n@c[z]: 2\n@c[b]: 3\n@n: 5\n@t[1, x]: 7\n");
	/* tuples: a map's of 10 (16 at most), printed; a variable's of 8, swapped */
	expect_out("BEGIN { @t = (1, 2, 3, 4, 5, 6, 7, 8, 9, \"j\"); "
		   "print((1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)); $v = (1, \"b\", 3, 4, 5, 6, 7, 8); "
		   "$v = ($v.7, $v.1, $v.5, $v.4, $v.3, $v.2, $v.6, $v.0); print($v); exit(); }",
		   "(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)\n(8, b, 6, 5, 4, 3, 7, 1)\n\n\n"
		   "@t: (1, 2, 3, 4, 5, 6, 7, 8, 9, j)\n");
	/* aggregations */
	expect_out("BEGIN { @s = sum(4); @s = sum(6); @mn = min(3); @mn = min(-2); @mx = max(9); "
		   "@a = avg(4); @a = avg(7); @st = stats(10); @st = stats(20); exit(); }",
		   "\n\n@a: 5\n\n@mn: -2\n@mx: 9\n@s: 10\n"
		   "@st: count 2, average 15, total 30\n\n");
	expect_out("BEGIN { @h = hist(0); @h = hist(1); @h = hist(5); @h = hist(5); "
		   "@h = hist(1000); exit(); }",
		   "\n\n@h: \n"
		   "[0]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n"
		   "[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n"
		   "[2, 4)                 0 |                                                    |\n"
		   "[4, 8)                 2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
		   "[8, 16)                0 |                                                    |\n"
		   "[16, 32)               0 |                                                    |\n"
		   "[32, 64)               0 |                                                    |\n"
		   "[64, 128)              0 |                                                    |\n"
		   "[128, 256)             0 |                                                    |\n"
		   "[256, 512)             0 |                                                    |\n"
		   "[512, 1K)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n"
		   "\n");
	expect_out("BEGIN { @l = lhist(3, 0, 10, 5); @l = lhist(7, 0, 10, 5); @l = lhist(12, 0, 10, 5); "
		   "exit(); }",
		   "\n\n@l: \n"
		   "[0, 5)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
		   "[5, 10)                1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
		   "[10, ...)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
		   "\n");
	/* delete, clear, zero, print */
	expect_out("BEGIN { @a[1] = 1; @a[2] = 2; delete(@a[1]); print(@a); @b[1] = 5; zero(@b); "
		   "print(@b); @c[1] = 1; clear(@c); print(@c); exit(); }",
		   "@a[2]: 2\n@b[1]: 0\n\n\n\n@a[2]: 2\n@b[1]: 0\n\n");
}

static void test_runtime_errors_said_once(void **state)
{
	char *out;

	(void)state;
	/* a division by zero gives 0; a loop past its bound ends the probe */
	out = run_begin("BEGIN { $z = 0; @d = 10 / $z; $i = 0; while ($i >= 0) { $i++; } "
			"@never = 1; }", false);
	assert_string_equal(out, "\n\n@d: 0\n\n");
	free(out);
	assert_non_null(strstr(logbuf, "1 division by zero"));
	assert_non_null(strstr(logbuf, "1 hit stopped after 100000 turns"));
	/* a map past its keys: the updates lost are said */
	out = run_begin("BEGIN { $i = 0; while ($i < 100) { @m[$i] = 1; $i++; } exit(); }", false);
	free(out);
	assert_non_null(strstr(logbuf, "@m: 36 updates lost: the map holds 64 keys"));
}

static void test_json(void **state)
{
	char *out;

	(void)state;
	out = run_begin("BEGIN { printf(\"x %d\\n\", 3); @a[1] = 2; @h = hist(5); @s = stats(4); "
			"exit(); }", true);
	assert_non_null(strstr(out, "{\"type\": \"printf\", \"data\": \"x 3\\n\"}\n"));
	assert_non_null(strstr(out, "{\"type\": \"map\", \"data\": {\"@a\": {\"1\": 2}}}\n"));
	assert_non_null(strstr(out, "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 4, "
				   "\"max\": 7, \"count\": 1}]}}\n"));
	assert_non_null(strstr(out, "\"@s\": {\"count\": 1, \"average\": 4, \"total\": 4}"));
	free(out);
}

/* A uprobe program on made-up events: work(key, val) hits. */
static char *run_events(const char *src, int n)
{
	struct usc_script *s = compile_ok(src);
	size_t nspecs = 0, len = 0;
	struct usc_probe_spec *specs = usc_script_specs(s, &nspecs);
	struct usc_site sites[4];
	char *out = NULL;
	FILE *fp = open_memstream(&out, &len);
	struct script_rt *rt;

	assert_true(nspecs >= 1 && nspecs <= 4);
	memset(sites, 0, sizeof(sites));
	for (size_t i = 0; i < nspecs; i++) {
		sites[i].probe = (unsigned)i;
		sites[i].args = specs[i].args;
		sites[i].nargs = specs[i].nargs;
	}
	rt = script_rt_new(s, fp, false);
	assert_non_null(rt);
	script_rt_session(rt, NULL, sites, nspecs, specs);
	script_rt_begin(rt);
	for (int i = 0; i < n; i++) {
		struct usc_value v[8];
		struct usc_event ev = {.time_ns = 1000 + (uint64_t)i, .pid = 42, .tid = 43 + i % 2,
				       .comm = "app", .vals = v};

		for (size_t k = 0; k < nspecs; k++) {
			ev.site = &sites[k];
			ev.nvals = sites[k].nargs < 8 ? sites[k].nargs : 8;
			for (unsigned a = 0; a < ev.nvals; a++) {	/* arg0 = i % 5, arg1 = i */
				const struct fetch_insn *in = &sites[k].args[a].insn[0];
				bool first = in->op == FOP_ARG && in->imm == 1;

				v[a] = (struct usc_value){.kind = USC_V_INT,
							  .u = (uint64_t)(first ? i % 5 : i)};
			}
			script_rt_event(rt, &ev);
		}
	}
	script_rt_end(rt);
	script_rt_free(rt);
	usc_script_free(s);
	fclose(fp);
	return out;
}

static void test_one_update_and_the_machine_agree(void **state)
{
	char *a, *b;

	(void)state;
	/* the first is one update (SCRIPT_PROBE_UPDATES), the second the same with a
	 * variable, run by the machine */
	a = run_events("uprobe:/bin/true:main { @c[arg0] = count(); }\n"
		       "uprobe:/bin/true:main { @s[arg0] = sum(arg1); }\n"
		       "uprobe:/bin/true:main { @h = hist(arg1); }\n"
		       "uprobe:/bin/true:main { @t[tid] = arg1; }", 50);
	b = run_events("uprobe:/bin/true:main { $v = 1; @c[arg0] = count(); }\n"
		       "uprobe:/bin/true:main { $v = 1; @s[arg0] = sum(arg1); }\n"
		       "uprobe:/bin/true:main { $v = 1; @h = hist(arg1); }\n"
		       "uprobe:/bin/true:main { $v = 1; @t[tid] = arg1; }", 50);
	assert_string_equal(a, b);
	assert_non_null(strstr(a, "@c[0]: 10\n"));
	assert_non_null(strstr(a, "@s[4]: 265\n"));	/* 4 + 9 + ... + 49 */
	assert_non_null(strstr(a, "@t[43]: 48\n@t[44]: 49\n"));
	free(a);
	free(b);
}

static void test_units_and_the_machine_agree(void **state)
{
	char *a, *b;

	(void)state;
	/* a few updates a probe (SCRIPT_PROBE_UPDATES), a latency's stop fused
	 * into one SOP_DELTA: the same maps as the machine makes of the same
	 * program where $v keeps them from being units or fused. arg1 is i,
	 * nsecs 1000 + i: hit 0's start is 0, which the predicate skips */
	a = run_events("uprobe:/bin/true:main { @s[tid] = arg1; }\n"
		       "uprobe:/bin/true:main /@s[tid]/ { @l[tid] = sum(nsecs - @s[tid]); "
		       "delete(@s[tid]); }\n"
		       "uprobe:/bin/true:main { @c[arg0] = count(); @m = max(arg1); "
		       "@t[tid] = nsecs; }\n"
		       "uprobe:/bin/true:main { @d = sum(nsecs - @t[tid]); }", 50);
	b = run_events("uprobe:/bin/true:main { $v = 1; @s[tid] = arg1; }\n"
		       "uprobe:/bin/true:main /@s[tid]/ { $v = 1; @l[tid] = sum(nsecs - @s[tid]); "
		       "delete(@s[tid]); }\n"
		       "uprobe:/bin/true:main { $v = 1; @c[arg0] = count(); @m = max(arg1); "
		       "@t[tid] = nsecs; }\n"
		       "uprobe:/bin/true:main { $v = 1; @d = sum(nsecs - @t[tid]); }", 50);
	assert_string_equal(a, b);
	/* tid 43: i = 2, 4, ... 48 (24 hits), tid 44: i = 1, 3, ... 49 (25) */
	assert_non_null(strstr(a, "@l[43]: 24000\n@l[44]: 25000\n"));
	assert_non_null(strstr(a, "@c[0]: 10\n"));
	assert_non_null(strstr(a, "@m: 49\n"));
	assert_non_null(strstr(a, "@d: 0\n"));
	assert_null(strstr(a, "@s["));
	free(a);
	free(b);
}

/* ---- the tables ---------------------------------------------------------------- */

static struct stab *table(const struct script_map *m, uint32_t nslots)
{
	struct stab t;
	uint64_t size = stab_layout(&t, m, nslots);
	struct stab *p = aligned_alloc(4096, size);

	assert_non_null(p);
	memset(p, 0, size);
	memcpy(p, &t, sizeof(t));
	return p;
}

static void test_tables(void **state)
{
	struct script_map m = {.vk = SVK_INT, .keylen = 8, .vallen = 8, .max = 4};
	struct script_map c = {.vk = SVK_COUNT, .keylen = 8, .vallen = 8, .max = 4};
	struct stab *t = table(&m, 1), *ct;
	uint64_t k, epoch;
	uint8_t *v;

	(void)state;
	/* plain: four keys, the fifth is full */
	for (k = 1; k <= 4; k++) {
		v = stab_get(t, (const uint8_t *)&k, 1, 0);
		assert_non_null(v);
		*(uint64_t *)v = k * 10;
	}
	k = 5;
	assert_null(stab_get(t, (const uint8_t *)&k, 1, 0));
	assert_int_equal(t->full, 1);
	/* a delete moves the epoch on; the key found again is absent */
	epoch = t->epoch;
	k = 2;
	stab_del(t, (const uint8_t *)&k);
	assert_true(t->epoch > epoch);
	assert_null(stab_get(t, (const uint8_t *)&k, 0, 0));
	k = 3;
	assert_int_equal(*(uint64_t *)stab_get(t, (const uint8_t *)&k, 0, 0), 30);
	/* a new key takes a deleted entry only when a row is free: none is */
	k = 6;
	assert_null(stab_get(t, (const uint8_t *)&k, 1, 0));
	free(t);

	/* aggregations: a copy per slot, zero after zero() */
	ct = table(&c, 3);
	k = 7;
	for (uint32_t s = 0; s < 3; s++)
		*(uint64_t *)stab_get(ct, (const uint8_t *)&k, 1, s) += s + 1;
	{
		struct stab_ent *e = stab_find(ct, (const uint8_t *)&k, 0);
		uint64_t sum = 0;

		assert_non_null(e);
		for (uint32_t s = 0; s < 3; s++) {
			uint64_t *cp = stab_copy(ct, s, e->row);

			assert_int_equal(cp[0], e->gen);
			stab_combine(&c, (uint8_t *)&sum, (const uint8_t *)(cp + 1), s == 0);
		}
		assert_int_equal(sum, 6);
		epoch = ct->epoch;
		stab_clear(ct, 1);	/* zero(): the keys kept, the copies of an older generation */
		assert_true(ct->epoch > epoch);
		assert_int_not_equal(stab_copy(ct, 1, e->row)[0], e->gen);
		assert_int_equal(*(uint64_t *)stab_get(ct, (const uint8_t *)&k, 1, 1), 0);
		stab_clear(ct, 0);	/* clear(): gone */
		assert_null(stab_find(ct, (const uint8_t *)&k, 0));
	}
	free(ct);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mistakes_point_at_their_place),
		cmocka_unit_test(test_compiled_forms),
		cmocka_unit_test(test_begin_programs),
		cmocka_unit_test(test_runtime_errors_said_once),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_one_update_and_the_machine_agree),
		cmocka_unit_test(test_units_and_the_machine_agree),
		cmocka_unit_test(test_tables),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
