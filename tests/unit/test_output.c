/* Unit tests for the output escapers and event formatting
 * (src/output/output.c). Every expectation is checked byte for byte; JSON
 * strings are also run through a strict RFC 8259 string validator that
 * decodes them back to the input bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "probe/event.h"
#include "output/output.h"
#include "probe/probe.h"

struct ecase {
	const char *name;
	const char *in;
	size_t n;
	const char *json;	/* with the quotes */
	const char *c;
};

#define B(s) s, sizeof(s) - 1

static const struct ecase cases[] = {
	{"empty", B(""), "\"\"", "\"\""},
	{"plain", B("hello, world"), "\"hello, world\"", "\"hello, world\""},
	{"quote", B("a\"b"), "\"a\\\"b\"", "\"a\\\"b\""},
	{"backslash", B("a\\b\\\\"), "\"a\\\\b\\\\\\\\\"", "\"a\\\\b\\\\\\\\\""},
	{"newline tab cr", B("\n\t\r"), "\"\\n\\t\\u000d\"", "\"\\n\\t\\r\""},
	{"nul", B("a\0b"), "\"a\\u0000b\"", "\"a\\x00b\""},
	{"controls", B("\x01\x08\x0c\x1b\x1f"), "\"\\u0001\\u0008\\u000c\\u001b\\u001f\"",
	 "\"\\x01\\x08\\x0c\\x1b\\x1f\""},
	{"del", B("\x7f"), "\"\\u007f\"", "\"\\x7f\""},
	{"printable ascii", B(" ~/'`{}"), "\" ~/'`{}\"", "\" ~/'`{}\""},
	/* valid UTF-8 is kept in JSON; C strings stay ASCII */
	{"utf8 2-byte", B("caf\xc3\xa9"), "\"caf\xc3\xa9\"", "\"caf\xc3\xa9\""},
	{"utf8 3-byte", B("\xe2\x82\xac"), "\"\xe2\x82\xac\"", "\"\xe2\x82\xac\""},
	{"utf8 4-byte", B("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"", "\"\xf0\x9f\x98\x80\""},
	{"utf8 bounds",
	 B("\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"),
	 "\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"",
	 "\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\""},
	/* invalid bytes: one escape per byte; valid UTF-8 stays raw in both */
	{"0xff", B("\xff"), "\"\\u00ff\"", "\"\\xff\""},
	{"0xfe", B("\xfe"), "\"\\u00fe\"", "\"\\xfe\""},
	{"lone continuation", B("\x80"), "\"\\u0080\"", "\"\\x80\""},
	{"continuation after char", B("\xc3\xa9\x80"), "\"\xc3\xa9\\u0080\"", "\"\xc3\xa9\\x80\""},
	{"overlong C0 80", B("\xc0\x80"), "\"\\u00c0\\u0080\"", "\"\\xc0\\x80\""},
	{"overlong C1 BF", B("\xc1\xbf"), "\"\\u00c1\\u00bf\"", "\"\\xc1\\xbf\""},
	{"overlong E0 80 80", B("\xe0\x80\x80"), "\"\\u00e0\\u0080\\u0080\"", "\"\\xe0\\x80\\x80\""},
	{"overlong F0 80 80 80", B("\xf0\x80\x80\x80"), "\"\\u00f0\\u0080\\u0080\\u0080\"",
	 "\"\\xf0\\x80\\x80\\x80\""},
	{"surrogate ED A0 80", B("\xed\xa0\x80"), "\"\\u00ed\\u00a0\\u0080\"", "\"\\xed\\xa0\\x80\""},
	{"surrogate ED BF BF", B("\xed\xbf\xbf"), "\"\\u00ed\\u00bf\\u00bf\"", "\"\\xed\\xbf\\xbf\""},
	{"beyond U+10FFFF", B("\xf4\x90\x80\x80"), "\"\\u00f4\\u0090\\u0080\\u0080\"",
	 "\"\\xf4\\x90\\x80\\x80\""},
	{"5-byte form", B("\xf8\x88\x80\x80\x80"), "\"\\u00f8\\u0088\\u0080\\u0080\\u0080\"",
	 "\"\\xf8\\x88\\x80\\x80\\x80\""},
	{"truncated E2 82", B("\xe2\x82"), "\"\\u00e2\\u0082\"", "\"\\xe2\\x82\""},
	{"truncated E2 82 then ASCII", B("\xe2\x82" "A"), "\"\\u00e2\\u0082A\"", "\"\\xe2\\x82A\""},
	{"lone lead at end", B("x\xc3"), "\"x\\u00c3\"", "\"x\\xc3\""},
	{"lead then quote", B("\xc3\""), "\"\\u00c3\\\"\"", "\"\\xc3\\\"\""},
	{"mixed", B("x\xff\xc3\xa9\n\"\x01"), "\"x\\u00ff\xc3\xa9\\n\\\"\\u0001\"",
	 "\"x\\xff\xc3\xa9\\n\\\"\\x01\""},
};

/* ---- a strict JSON string checker --------------------------------------- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Length of a valid UTF-8 sequence at s, or 0 (RFC 3629). */
static size_t utf8_ok(const unsigned char *s, size_t n)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		unsigned lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;

		return n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		unsigned lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;

		return n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 &&
		       (s[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

/* Check that j[0..n) is exactly one valid JSON string and decode it into out,
 * mapping \u00XX back to the byte XX (what the escaper promises). Returns the
 * decoded length, or -1 with *why set. */
static long json_decode(const char *js, size_t n, unsigned char *out, const char **why)
{
	const unsigned char *j = (const unsigned char *)js;
	size_t i = 1, o = 0;

	if (n < 2 || j[0] != '"' || j[n - 1] != '"')
		return *why = "not quoted", -1;
	while (i < n - 1) {
		unsigned char c = j[i];

		if (c < 0x20)
			return *why = "raw control character", -1;
		if (c == '"')
			return *why = "unescaped quote", -1;
		if (c == '\\') {
			if (i + 1 >= n - 1)
				return *why = "dangling backslash", -1;
			c = j[i + 1];
			switch (c) {
			case '"': case '\\': case '/': out[o++] = c; i += 2; continue;
			case 'b': out[o++] = '\b'; i += 2; continue;
			case 'f': out[o++] = '\f'; i += 2; continue;
			case 'n': out[o++] = '\n'; i += 2; continue;
			case 'r': out[o++] = '\r'; i += 2; continue;
			case 't': out[o++] = '\t'; i += 2; continue;
			case 'u': {
				int v = 0;

				if (i + 6 > n - 1)
					return *why = "short \\u escape", -1;
				for (int k = 2; k < 6; k++) {
					int h = hexval(j[i + k]);

					if (h < 0)
						return *why = "bad \\u escape", -1;
					v = v * 16 + h;
				}
				if (v > 0xff)
					return *why = "\\u escape beyond \\u00ff", -1;
				out[o++] = (unsigned char)v;
				i += 6;
				continue;
			}
			default:
				return *why = "unknown escape", -1;
			}
		}
		size_t l = utf8_ok(j + i, n - 1 - i);

		if (!l)
			return *why = "invalid UTF-8", -1;
		memcpy(out + o, j + i, l);
		o += l;
		i += l;
	}
	return (long)o;
}

static void check_json(const char *in, size_t n, const char *out, size_t outlen)
{
	unsigned char *dec = malloc(outlen + 1);
	const char *why = NULL;
	long d;

	assert_non_null(dec);
	d = json_decode(out, outlen, dec, &why);
	if (d < 0) {
		free(dec);
		fail_msg("invalid JSON string (%s): %.*s", why, (int)outlen, out);
	}
	if ((size_t)d != n || memcmp(dec, in, n)) {
		free(dec);
		fail_msg("JSON string does not decode back to its input: %.*s", (int)outlen, out);
	}
	free(dec);
}

/* ---- escapers ------------------------------------------------------------- */

static void expect_bytes(const char *what, const struct usc_output *o, const char *want)
{
	size_t n = strlen(want);

	if (o->len != n || memcmp(o->buf, want, n))
		fail_msg("%s: got [%.*s] (%zu bytes), expected [%s] (%zu bytes)", what, (int)o->len,
			 o->buf, o->len, want, n);
	assert_int_equal(o->buf[o->len], 0);	/* kept NUL-terminated */
}

static void check_case(void **state)
{
	const struct ecase *c = *state;
	struct usc_output o = {0};

	assert_int_equal(output_json_string(&o, c->in, c->n), 0);
	expect_bytes("json", &o, c->json);
	check_json(c->in, c->n, o.buf, o.len);
	output_free(&o);

	assert_int_equal(output_c_string(&o, c->in, c->n), 0);
	expect_bytes("c", &o, c->c);
	output_free(&o);
}

/* the escapers append and respect n (not the NUL) */
static void test_append(void **state)
{
	(void)state;
	struct usc_output o = {0};

	assert_int_equal(output_json_string(&o, "ab\"cd", 3), 0);
	assert_int_equal(output_c_string(&o, "x\ty", 3), 0);
	assert_int_equal(output_json_string(&o, "\xe2\x82\xac", 2), 0);
	expect_bytes("append", &o, "\"ab\\\"\"\"x\\ty\"\"\\u00e2\\u0082\"");
	output_reset(&o);
	assert_int_equal(o.len, 0);
	assert_int_equal(output_c_string(&o, "z", 1), 0);
	expect_bytes("after reset", &o, "\"z\"");
	output_free(&o);
	assert_null(o.buf);
}

/* long inputs grow the buffer well past its first 4 KiB */
static void test_long(void **state)
{
	(void)state;
	const size_t n = 100000;
	char *in = malloc(n);
	struct usc_output o = {0};

	assert_non_null(in);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)(i % 3 == 0 ? 0xff : i % 3 == 1 ? '"' : 'a');
	assert_int_equal(output_json_string(&o, in, n), 0);
	/* 0xff -> \u00ff (6), '"' -> \" (2), 'a' (1), plus the quotes */
	assert_int_equal(o.len, 2 + (n / 3) * 9 + 6 /* n % 3 == 1: one more 0xff */);
	check_json(in, n, o.buf, o.len);
	output_free(&o);
	assert_int_equal(output_c_string(&o, in, n), 0);
	assert_int_equal(o.len, 2 + (n / 3) * 7 + 4);
	output_free(&o);
	free(in);
}

/* every JSON output of random bytes is valid and decodes back to its input */
static void test_json_random(void **state)
{
	(void)state;
	static const unsigned char alphabet[] = {
		0x00, 0x01, 0x1f, ' ', 'a', '"', '\\', '\n', '\t', '\r', 0x7f, 0x80, 0x8f, 0x9f, 0xa0,
		0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf4, 0xf5, 0xf8, 0xff,
	};
	unsigned seed = 12345;
	char in[64];
	struct usc_output o = {0};

	for (int iter = 0; iter < 20000; iter++) {
		size_t n = (seed = seed * 1103515245u + 12345u) >> 16 & 31;

		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			in[i] = (char)alphabet[(seed >> 16) % sizeof(alphabet)];
		}
		output_reset(&o);
		assert_int_equal(output_json_string(&o, in, n), 0);
		check_json(in, n, o.buf, o.len);
	}
	output_free(&o);
}

/* ---- whole events ---------------------------------------------------------- */

static struct usc_probe_spec spec;

static void parse_ok(const char *text)
{
	struct usc_parse_error err = {0};

	if (usc_probe_parse(text, &spec, &err))
		fail_msg("\"%s\": %s at %zu", text, usc_parse_strerror(err.code), err.pos);
}

static void test_event_entry(void **state)
{
	(void)state;
	parse_ok("p:ev main a=%di:u8 s=%di:s16 x=%di:x32 str=$arg1:string b=%di:b4@2/32 f=%di:u64 "
		 "q=%di:s64 h=%rdi");
	struct usc_site site = {.spec = &spec, .event = "ev", .label = "ev", .is_return = false,
				.args = spec.args, .nargs = spec.nargs};
	const struct usc_value vals[] = {
		{.kind = USC_V_INT, .u = 0x1ff},
		{.kind = USC_V_INT, .u = 0xfffe},
		{.kind = USC_V_INT, .u = 0x1deadbeefull},
		{.kind = USC_V_STR, .str = "hi\n\"\xff", .len = 5},
		{.kind = USC_V_INT, .u = 5},
		{.kind = USC_V_FAULT},
		{.kind = USC_V_INT, .u = UINT64_MAX},
		{.kind = USC_V_INT, .u = 0},
	};
	struct usc_event ev = {
		.time_ns = 1234567890123ull, .pid = 10, .tid = 11, .cpu = 2, .comm = "a\"pp",
		.site = &site, .ip = 0x401000, .nvals = 8, .vals = vals,
	};
	struct usc_output o = {0};

	assert_int_equal(output_event(&o, &ev), 0);
	expect_bytes("text", &o,
		     "a\"pp-11 [002] 1234.567890: ev: (0x401000) a=255 s=-2 x=0xdeadbeef "
		     "str=\"hi\\n\\\"\\xff\" b=5 f=(fault) q=-1 h=0x0\n");
	output_free(&o);

	o.json = true;
	assert_int_equal(output_event(&o, &ev), 0);
	expect_bytes("json", &o,
		     "{\"time_ns\":1234567890123,\"comm\":\"a\\\"pp\",\"pid\":10,\"tid\":11,\"cpu\":2,"
		     "\"event\":\"ev\",\"type\":\"p\",\"ip\":\"0x401000\",\"args\":{\"a\":255,\"s\":-2,"
		     "\"x\":\"0xdeadbeef\",\"str\":\"hi\\n\\\"\\u00ff\",\"b\":5,\"f\":null,\"q\":-1,"
		     "\"h\":\"0x0\"},\"v\":1}\n");
	/* a second event appends */
	assert_int_equal(output_event(&o, &ev), 0);
	assert_int_equal(o.len % 2, 0);
	assert_memory_equal(o.buf, o.buf + o.len / 2, o.len / 2);
	output_free(&o);
}

static void test_event_return(void **state)
{
	(void)state;
	parse_ok("r:done main ret=$retval:s32 p=$retval:x16");
	struct usc_site site = {.spec = &spec, .event = "done", .label = "done", .is_return = true,
				.args = spec.args, .nargs = spec.nargs};
	const struct usc_value vals[] = {
		{.kind = USC_V_INT, .u = 0xffffffffull},
		{.kind = USC_V_INT, .u = 0x12345},
	};
	struct usc_event ev = {
		.time_ns = 5000999ull, .pid = 7, .tid = 7, .cpu = 123, .comm = "w",
		.site = &site, .ip = 0x5555, .func = 0x4444, .nvals = 2, .vals = vals,
	};
	struct usc_output o = {0};

	assert_int_equal(output_event(&o, &ev), 0);
	expect_bytes("text", &o, "w-7 [123] 0.005000: done: (0x5555 <- 0x4444) ret=-1 p=0x2345\n");
	output_free(&o);

	o.json = true;
	assert_int_equal(output_event(&o, &ev), 0);
	expect_bytes("json", &o,
		     "{\"time_ns\":5000999,\"comm\":\"w\",\"pid\":7,\"tid\":7,\"cpu\":123,"
		     "\"event\":\"done\",\"type\":\"r\",\"ip\":\"0x5555\",\"func\":\"0x4444\","
		     "\"args\":{\"ret\":-1,\"p\":\"0x2345\"},\"v\":1}\n");
	output_free(&o);
}

static void test_event_no_args(void **state)
{
	(void)state;
	parse_ok("main");
	struct usc_site site = {.spec = &spec, .event = "main", .label = "main"};
	struct usc_event ev = {.comm = "c", .site = &site, .ip = 1};
	struct usc_output o = {.json = true};

	assert_int_equal(output_event(&o, &ev), 0);
	expect_bytes("json", &o,
		     "{\"time_ns\":0,\"comm\":\"c\",\"pid\":0,\"tid\":0,\"cpu\":0,\"event\":\"main\","
		     "\"type\":\"p\",\"ip\":\"0x1\",\"args\":{},\"v\":1}\n");
	output_free(&o);
}

/* Presentation from the debug info: enums by name (flags as A|B), bools,
 * a struct's members grouped, nested aggregates elided, optimized out. */
static void test_event_dwarf_shapes(void **state)
{
	(void)state;
	static const struct usc_enumerator colors[] = {{0, "RED"}, {5, "GREEN"}};
	static const struct usc_enum color = {2, false, colors};
	static const struct usc_enumerator modes[] = {{1, "READ"}, {2, "WRITE"}, {4, "EXEC"}};
	static const struct usc_enum mode = {3, true, modes};
	static const struct usc_enumerator negs[] = {{0xffffffffu, "NEG"}};
	static const struct usc_enum neg = {1, false, negs};

	parse_ok("p:ev main c=%di:u32 u=%di:u32 m=%di:u32 m2=%di:u32 m3=%di:u32 m4=%di:u32 "
		 "n=%di:s32 b=%di:u8 f=%di:u8 r__id=%di:s32 r__path=$arg1:string r__in=%di "
		 "r__arr=%di r__ok=%di:u8 o=%di:s32 q__x=%di:s32 b2=%di:u8");
	struct usc_fetcharg *a = spec.args;

	a[0].show = a[1].show = USC_SHOW_ENUM;
	a[0].enums = a[1].enums = &color;
	for (int i = 2; i <= 5; i++) {
		a[i].show = USC_SHOW_ENUM;
		a[i].enums = &mode;
	}
	a[6].show = USC_SHOW_ENUM;
	a[6].enums = &neg;
	a[7].show = a[8].show = a[13].show = a[16].show = USC_SHOW_BOOL;
	for (int i = 9; i <= 13; i++)
		a[i].group_len = 1;
	a[9].group_first = true;
	a[11].show = USC_SHOW_STRUCT;
	a[12].show = USC_SHOW_ARRAY;
	a[14].optimized_out = true;
	a[15].group_len = 1;
	a[15].group_first = true;
	struct usc_site site = {.spec = &spec, .event = "ev", .label = "ev",
				.args = spec.args, .nargs = spec.nargs};
	const struct usc_value vals[] = {
		{.kind = USC_V_INT, .u = 0x100000005ull},	/* GREEN: the enum's 4 bytes */
		{.kind = USC_V_INT, .u = 7},			/* no name: a number */
		{.kind = USC_V_INT, .u = 2},
		{.kind = USC_V_INT, .u = 5},			/* READ|EXEC */
		{.kind = USC_V_INT, .u = 0x43},			/* READ|WRITE|0x40 */
		{.kind = USC_V_INT, .u = 0},			/* no name for 0 */
		{.kind = USC_V_INT, .u = 0xffffffffu},		/* a negative enumerator */
		{.kind = USC_V_INT, .u = 0x100},		/* one byte: false */
		{.kind = USC_V_INT, .u = 2},
		{.kind = USC_V_INT, .u = 10},
		{.kind = USC_V_STR, .str = "/x", .len = 2},
		{.kind = USC_V_INT, .u = 0},
		{.kind = USC_V_INT, .u = 0},
		{.kind = USC_V_FAULT},
		{.kind = USC_V_INT, .u = 0},
		{.kind = USC_V_INT, .u = 3},
		{.kind = USC_V_INT, .u = 1},
	};
	struct usc_event ev = {.comm = "c", .tid = 1, .site = &site, .ip = 0x10, .nvals = 17,
			       .vals = vals};
	struct usc_output o = {0};

	assert_int_equal(output_event(&o, &ev), 0);
	expect_bytes("text", &o,
		     "c-1 [000] 0.000000: ev: (0x10) c=GREEN u=7 m=WRITE m2=READ|EXEC "
		     "m3=READ|WRITE|0x40 m4=0 n=NEG b=false f=true "
		     "r={id=10 path=\"/x\" in={...} arr=[...] ok=(fault)} o=<optimized out> "
		     "q={x=3} b2=true\n");
	output_free(&o);
	o.json = true;
	assert_int_equal(output_event_args(&o, &ev), 0);
	expect_bytes("json", &o,
		     "{\"c\":\"GREEN\",\"u\":7,\"m\":\"WRITE\",\"m2\":\"READ|EXEC\","
		     "\"m3\":\"READ|WRITE|0x40\",\"m4\":0,\"n\":\"NEG\",\"b\":false,\"f\":true,"
		     "\"r\":{\"id\":10,\"path\":\"/x\",\"in\":\"{...}\",\"arr\":\"[...]\","
		     "\"ok\":null},\"o\":null,\"q\":{\"x\":3},\"b2\":true}");
	output_free(&o);
}

int main(void)
{
	const size_t n = sizeof(cases) / sizeof(cases[0]);
	struct CMUnitTest t[sizeof(cases) / sizeof(cases[0])];
	int fails = 0;

	for (size_t i = 0; i < n; i++)
		t[i] = (struct CMUnitTest){cases[i].name, check_case, NULL, NULL, (void *)&cases[i]};

	const struct CMUnitTest others[] = {
		cmocka_unit_test(test_append),
		cmocka_unit_test(test_long),
		cmocka_unit_test(test_json_random),
		cmocka_unit_test(test_event_entry),
		cmocka_unit_test(test_event_return),
		cmocka_unit_test(test_event_no_args),
		cmocka_unit_test(test_event_dwarf_shapes),
	};

	fails += _cmocka_run_group_tests("output_escape", t, n, NULL, NULL);
	fails += cmocka_run_group_tests_name("output_misc", others, NULL, NULL);
	return fails ? 1 : 0;
}
