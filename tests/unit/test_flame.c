/* Unit tests for flame graphs (src/flame/flame.c): folded stacks merged by
 * common prefix, the layout's exact frames (names, counts, x, width, y),
 * the SVG's escaping, labels, colors and tooltips, and bad lines reported
 * with their line numbers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flame/flame.h"

static struct usc_flame *parsed(const char *text)
{
	struct usc_flame *f;
	struct usc_flame_error err = {0};

	assert_int_equal(usc_flame_new(&f), 0);
	if (usc_flame_parse(f, text, strlen(text), &err))
		fail_msg("line %zu: %s", err.line, err.msg);
	return f;
}

/* The SVG of text, NUL-terminated; the caller frees it. */
static char *svg_of(const char *text, const struct usc_flame_opts *o)
{
	struct usc_flame *f = parsed(text);
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	assert_non_null(fp);
	assert_int_equal(usc_flame_write_svg(f, o, fp), 0);
	fclose(fp);
	usc_flame_free(f);
	return buf;
}

struct want {
	const char *name;
	uint64_t count, start;
	unsigned depth;
	double x, width, y;
};

static void check_frames(const char *text, unsigned width, const struct want *w, size_t nw,
			 double height)
{
	struct usc_flame *f = parsed(text);
	struct usc_flame_opts o = {.width = width};
	struct usc_flame_frame *fr;
	size_t n;
	double h;

	assert_int_equal(usc_flame_layout(f, &o, &fr, &n, &h), 0);
	for (size_t i = 0; i < n && i < nw; i++) {
		if (fr[i].len != strlen(w[i].name) || memcmp(fr[i].name, w[i].name, fr[i].len))
			fail_msg("frame %zu is '%.*s', expected '%s'", i, (int)fr[i].len, fr[i].name,
				 w[i].name);
		assert_int_equal(fr[i].count, w[i].count);
		assert_int_equal(fr[i].start, w[i].start);
		assert_int_equal(fr[i].depth, w[i].depth);
		assert_float_equal(fr[i].x, w[i].x, 1e-9);
		assert_float_equal(fr[i].width, w[i].width, 1e-9);
		assert_float_equal(fr[i].y, w[i].y, 1e-9);
	}
	assert_int_equal(n, nw);
	assert_float_equal(h, height, 1e-9);
	free(fr);
	usc_flame_free(f);
}

/* Lines in any order, a path given twice: merged by prefix, the children
 * of a frame in name order right of its own samples. 1000 samples on
 * 1020 - 2 * 10 px: a sample a pixel. */
static void test_merge_layout(void **state)
{
	static const char text[] =
		"main;parse;lex 200\n"
		"main;eval 400\n"
		"idle 100\n"
		"main 100\n"
		"main;parse 100\n"
		"main;parse;lex 100\n";
	/* 4 levels: 4 * 16 + 36 + 34 = 134 px high; depth d at 134 - 34 - 16 (d + 1) + 1 */
	static const struct want w[] = {
		{"all", 1000, 0, 0, 10, 1000, 85},
		{"idle", 100, 0, 1, 10, 100, 69},
		{"main", 900, 100, 1, 110, 900, 69},
		{"eval", 400, 200, 2, 210, 400, 53},
		{"parse", 400, 600, 2, 610, 400, 53},
		{"lex", 300, 700, 3, 710, 300, 37},
	};

	(void)state;
	check_frames(text, 1020, w, sizeof(w) / sizeof(w[0]), 134);
}

/* The default width, 1200: 1180 px for 8 samples; the same function at
 * two depths (recursion) is two frames. */
static void test_layout_default_width(void **state)
{
	static const char text[] = "a;a;b 2\na;a 1\na 5\n";
	static const struct want w[] = {
		{"all", 8, 0, 0, 10, 1180, 85},
		{"a", 8, 0, 1, 10, 1180, 69},
		{"a", 3, 5, 2, 10 + 5 * 147.5, 3 * 147.5, 53},
		{"b", 2, 6, 3, 10 + 6 * 147.5, 2 * 147.5, 37},
	};

	(void)state;
	check_frames(text, 0, w, sizeof(w) / sizeof(w[0]), 134);
}

/* Siblings in byte order of their names (flamegraph.pl sorts its lines);
 * a name may hold spaces: the count is the last field. */
static void test_sibling_order(void **state)
{
	static const char text[] = "r;b 1\nr;a b 1\nr;B 1\nr;ab 1\nr;a 1\nr;_ 1\n";
	static const char *const order[] = {"all", "r", "B", "_", "a", "a b", "ab", "b"};
	struct usc_flame *f = parsed(text);
	struct usc_flame_frame *fr;
	size_t n;
	double h;

	(void)state;
	assert_int_equal(usc_flame_layout(f, NULL, &fr, &n, &h), 0);
	assert_int_equal(n, 8);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(fr[i].len, strlen(order[i]));
		assert_memory_equal(fr[i].name, order[i], fr[i].len);
		assert_int_equal(fr[i].depth, i < 2 ? i : 2);
		if (i >= 2)
			assert_int_equal(fr[i].start, i - 2);
	}
	free(fr);
	usc_flame_free(f);
}

/* A frame narrower than 0.1 px is left out, with its callees (a gap is
 * left); 100000 samples on 1000 px: 0.01 px a sample. */
static void test_narrow_frames_left_out(void **state)
{
	static const struct want w[] = {
		{"all", 100000, 0, 0, 10, 1000, 53},
		{"big", 99980, 0, 1, 10, 999.8, 37},
		{"ten", 12, 99988, 1, 10 + 999.88, 0.12, 37},
	};

	(void)state;
	check_frames("big 99980\nten 12\nfive;below 8\n", 1020, w, 3, 102);
}

static void test_counts(void **state)
{
	struct usc_flame *f = parsed("a 1\n\n  \nb;c 1234567\r\nb\t2\na 0\nd 0");

	(void)state;
	assert_int_equal(usc_flame_total(f), 1 + 1234567 + 2);
	usc_flame_free(f);
	/* the tooltips: counts with thousands separators, a share in % */
	char *svg = svg_of("a 1000\nb;c 1234567\n", NULL);

	assert_non_null(strstr(svg, "<title>all (1,235,567 samples, 100.00%)</title>"));
	assert_non_null(strstr(svg, "<title>b (1,234,567 samples, 99.92%)</title>"));
	assert_non_null(strstr(svg, "<title>a (1,000 samples, 0.08%)</title>"));
	free(svg);
	struct usc_flame_opts o = {.countname = "ns"};

	svg = svg_of("x 750\ny 250\n", &o);
	assert_non_null(strstr(svg, "<title>x (750 ns, 75.00%)</title>"));
	assert_non_null(strstr(svg, "<title>y (250 ns, 25.00%)</title>"));
	free(svg);
}

static void test_escaping(void **state)
{
	static const char text[] =
		"main;std::vector<int>::push_back(int const&) 1\n"
		"main;main.(*T).m 1\n"
		"main;say \"hi\" 'x' 1\n"
		"main;ctl\x01\x1f 1\n"
		"main;bad\xff\xc0\x80\xed\xa0\x80z 1\n"
		"main;caf\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5 1\n";
	static const char *const want[] = {
		"std::vector&lt;int&gt;::push_back(int const&amp;) (1 samples, 16.67%)",
		"main.(*T).m (1 samples, 16.67%)",
		"say &quot;hi&quot; &apos;x&apos; (1 samples, 16.67%)",
		"ctl?? (1 samples, 16.67%)",
		"bad??????z (1 samples, 16.67%)",
		"caf\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5 (1 samples, 16.67%)",
	};
	struct usc_flame_opts o = {.title = "<T & \"U\">", .countname = "a<b"};
	char *svg = svg_of(text, NULL);

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char t[256];

		snprintf(t, sizeof(t), "<title>%s</title>", want[i]);
		if (!strstr(svg, t))
			fail_msg("no %s in\n%s", t, strstr(svg, "<g id=\"frames\">"));
	}
	/* the labels are escaped the same way: 196.67 px, 27 characters */
	assert_non_null(strstr(svg, ">std::vector&lt;int&gt;::push_ba..</text>"));
	assert_non_null(strstr(svg, ">say &quot;hi&quot; &apos;x&apos;</text>"));
	assert_null(strstr(svg, "<int>"));
	free(svg);
	svg = svg_of("a 1\n", &o);
	assert_non_null(strstr(svg, ">&lt;T &amp; &quot;U&quot;&gt;</text>"));
	assert_non_null(strstr(svg, "<title>a (1 a&lt;b, 100.00%)</title>"));
	free(svg);
}

/* No http(s) URL but the SVG namespace; the script inline. */
static void test_self_contained(void **state)
{
	char *svg = svg_of("a;b 1\n", NULL);
	size_t urls = 0;

	(void)state;
	for (const char *p = svg; (p = strstr(p, "http")); p++, urls++)
		assert_true(!strncmp(p, "http://www.w3.org/2000/svg\"", 27));
	assert_int_equal(urls, 1);
	assert_non_null(strstr(svg, "<script type=\"text/ecmascript\"><![CDATA["));
	assert_null(strstr(svg, "href"));
	assert_null(strstr(svg, "src="));
	assert_non_null(strstr(svg, "function zoom("));
	assert_non_null(strstr(svg, "function search("));
	assert_non_null(strstr(svg, "function unzoom("));
	free(svg);
}

/* The label of the frame whose title starts with name. */
static char *label_of(const char *svg, const char *name)
{
	char key[256];
	const char *p, *s, *e;

	snprintf(key, sizeof(key), "<title>%s (", name);
	p = strstr(svg, key);
	assert_non_null(p);
	s = strstr(p, "<text ");
	s = strchr(s, '>') + 1;
	e = strstr(s, "</text>");
	return strndup(s, (size_t)(e - s));
}

/* Labels fit their frame at 7.08 px a character: whole, cut to N - 2
 * characters and "..", or empty below 3 characters. */
static void test_labels(void **state)
{
	char text[1024], longname[201], *svg, *l;

	(void)state;
	memset(longname, 'x', 200);
	longname[200] = 0;
	longname[0] = 'L';
	/* 1000 px for 1000 samples */
	snprintf(text, sizeof(text), "%s 500\nshort 400\nab;abc 80\ntiny 20\n", longname);
	svg = svg_of(text, &(struct usc_flame_opts){.width = 1020});
	/* 500 px: 70 characters */
	l = label_of(svg, longname);
	assert_int_equal(strlen(l), 70);
	assert_memory_equal(l, longname, 68);
	assert_string_equal(l + 68, "..");
	free(l);
	l = label_of(svg, "short");
	assert_string_equal(l, "short");
	free(l);
	/* 80 px: 11 characters */
	l = label_of(svg, "abc");
	assert_string_equal(l, "abc");
	free(l);
	/* 20 px: 2 characters, too few */
	l = label_of(svg, "tiny");
	assert_string_equal(l, "");
	free(l);
	free(svg);
	/* multibyte characters count as one, and are never cut */
	svg = svg_of("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9 25\nrest 975\n",
		     &(struct usc_flame_opts){.width = 1020});
	/* 25 px: 3 characters, so one and ".." */
	l = label_of(svg, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
	assert_string_equal(l, "\xc3\xa9..");
	free(l);
	free(svg);
}

static void fill_of(const char *svg, const char *name, char *out, size_t cap)
{
	char key[256];
	const char *p, *s;
	size_t n;

	snprintf(key, sizeof(key), "<title>%s (", name);
	p = strstr(svg, key);
	assert_non_null(p);
	s = strstr(p, "fill=\"") + 6;
	n = strcspn(s, "\"");
	assert_true(n < cap);
	memcpy(out, s, n);
	out[n] = 0;
}

/* A name's color is a hash of it: the same in any graph, at any place. */
static void test_colors(void **state)
{
	char *a = svg_of("main;work 10\nmain;idle 5\n", NULL);
	char *b = svg_of("other;deeper;work 1\nzzz 100\n", NULL);
	char *m = svg_of("main;work 10\n", &(struct usc_flame_opts){.palette = USC_FLAME_MEM});
	char c1[32], c2[32], c3[32];
	int r, g, bl;

	(void)state;
	fill_of(a, "work", c1, sizeof(c1));
	fill_of(b, "work", c2, sizeof(c2));
	assert_string_equal(c1, c2);
	fill_of(a, "idle", c3, sizeof(c3));
	assert_string_not_equal(c1, c3);
	/* hot: red 205 to 255, green 0 to 230, blue 0 to 55 */
	assert_int_equal(sscanf(c1, "rgb(%d,%d,%d)", &r, &g, &bl), 3);
	assert_true(r >= 205 && r <= 255 && g >= 0 && g <= 230 && bl >= 0 && bl <= 55);
	/* mem: no red */
	fill_of(m, "work", c3, sizeof(c3));
	assert_int_equal(sscanf(c3, "rgb(%d,%d,%d)", &r, &g, &bl), 3);
	assert_true(r == 0 && g >= 190 && g <= 240);
	free(a);
	free(b);
	free(m);
	assert_int_equal(usc_flame_palette_parse("mem"), USC_FLAME_MEM);
	assert_int_equal(usc_flame_palette_parse("orange"), USC_FLAME_ORANGE);
	assert_int_equal(usc_flame_palette_parse("pink"), -EINVAL);
}

struct bad {
	const char *text;
	size_t line;
	const char *msg;
};

static void test_errors(void **state)
{
	static const struct bad bad[] = {
		{"main;parse\n", 1, "no count: a folded line is 'FRAME;FRAME;... COUNT', not 'main;parse'"},
		{"a 1\n\nmain;parse 12x\n", 3, "no count at the end of the line: '12x' is not a number of samples"},
		{"a 1\nb 2\nc -5\n", 3, "a negative count, -5"},
		{"a 1.5\n", 1, "no count at the end of the line: '1.5' is not a number of samples"},
		{"a 9223372036854775808\n", 1, "the count 9223372036854775808 is too large (at most 9223372036854775807)"},
		{"a 99999999999999999999999\n", 1, "the count 99999999999999999999999 is too large (at most 9223372036854775807)"},
		{"a 9223372036854775807\nb 1\n", 2, "the counts add up to more than 9223372036854775807"},
		{"x 1\n 42\n", 2, "no stack before the count 42"},
		{"7\n", 1, "no stack before the count 7"},
		{"a;;b 1\n", 1, "an empty frame name at column 3 (';' at an end of the stack, or two in a row)"},
		{"a;b; 1\n", 1, "an empty frame name at column 5 (';' at an end of the stack, or two in a row)"},
		{";a 1\n", 1, "an empty frame name at column 1 (';' at an end of the stack, or two in a row)"},
		{"a 1\r\nb \x01\x02\n", 2, "no count at the end of the line: '?" "?' is not a number of samples"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct usc_flame *f;
		struct usc_flame_error err = {0};
		int ret;

		assert_int_equal(usc_flame_new(&f), 0);
		ret = usc_flame_parse(f, bad[i].text, strlen(bad[i].text), &err);
		if (ret != -EINVAL || err.line != bad[i].line || strcmp(err.msg, bad[i].msg))
			fail_msg("case %zu: %d, line %zu: '%s'; expected line %zu: '%s'", i, ret,
				 err.line, err.msg, bad[i].line, bad[i].msg);
		/* a bad line adds nothing */
		assert_true(usc_flame_total(f) <= 9223372036854775807ULL);
		usc_flame_free(f);
	}
}

/* A bad line leaves the tree as it was; the lines after it go on being
 * numbered. */
static void test_error_leaves_tree(void **state)
{
	struct usc_flame *f;
	struct usc_flame_error err = {0};

	(void)state;
	assert_int_equal(usc_flame_new(&f), 0);
	assert_int_equal(usc_flame_add_line(f, "a;b 3", 5, &err), 0);
	assert_int_equal(usc_flame_add_line(f, "a;;c 4", 6, &err), -EINVAL);
	assert_int_equal(err.line, 2);
	assert_int_equal(usc_flame_add_line(f, "a;c", 3, NULL), -EINVAL);
	assert_int_equal(usc_flame_total(f), 3);
	assert_int_equal(usc_flame_add_line(f, "a 1x", 4, &err), -EINVAL);
	assert_int_equal(err.line, 4);
	usc_flame_free(f);
}

static void test_empty(void **state)
{
	struct usc_flame *f = parsed("\n\na 0\n");
	struct usc_flame_frame *fr = (void *)1;
	size_t n = 1;
	double h = 1;
	FILE *fp = fopen("/dev/null", "w");

	(void)state;
	assert_int_equal(usc_flame_total(f), 0);
	assert_int_equal(usc_flame_layout(f, NULL, &fr, &n, &h), -ENODATA);
	assert_null(fr);
	assert_int_equal(n, 0);
	assert_int_equal(usc_flame_write_svg(f, NULL, fp), -ENODATA);
	fclose(fp);
	usc_flame_free(f);
}

/* A stack 100000 frames deep: nothing recurses. */
static void test_deep(void **state)
{
	const size_t depth = 100000;
	char *text = malloc(depth * 2 + 8), *svg = NULL;
	struct usc_flame *f;
	struct usc_flame_frame *fr;
	size_t n, len = 0;
	double h;
	FILE *fp;

	(void)state;
	for (size_t i = 0; i < depth; i++)
		memcpy(text + 2 * i, "f;", 2);
	strcpy(text + 2 * depth - 1, " 7\n");
	f = parsed(text);
	assert_int_equal(usc_flame_layout(f, NULL, &fr, &n, &h), 0);
	assert_int_equal(n, depth + 1);
	assert_int_equal(fr[depth].depth, depth);
	assert_float_equal(h, (depth + 1.0) * 16 + 70, 1e-9);
	assert_float_equal(fr[depth].y, 37, 1e-9);
	free(fr);
	fp = open_memstream(&svg, &len);
	assert_int_equal(usc_flame_write_svg(f, NULL, fp), 0);
	fclose(fp);
	assert_true(len > depth * 100);
	free(svg);
	usc_flame_free(f);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_layout),
		cmocka_unit_test(test_layout_default_width),
		cmocka_unit_test(test_sibling_order),
		cmocka_unit_test(test_narrow_frames_left_out),
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_self_contained),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_colors),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_error_leaves_tree),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_deep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
