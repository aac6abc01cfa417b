/* Unit tests for the metrics server's pure parts: the exposition text
 * (src/serve/expo.c: escaping, numbers, label names, families in both
 * formats) and the HTTP request parser and Accept negotiation
 * (src/serve/http.c). Byte for byte. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "serve/expo.h"
#include "serve/serve.h"

static char *escaped(const char *s, size_t n)
{
	struct expo e = {0};

	expo_escape(&e, s, n);
	assert_int_equal(e.err, 0);
	return e.buf ? e.buf : strdup("");
}

#define B(s) s, sizeof(s) - 1

static void test_escape(void **state)
{
	static const struct {
		const char *in;
		size_t n;
		const char *out;
	} cases[] = {
		{B("plain"), "plain"},
		{B("a\"b"), "a\\\"b"},
		{B("back\\slash"), "back\\\\slash"},
		{B("two\nlines"), "two\\nlines"},
		{B("tab\tstays"), "tab\tstays"},
		{B("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
		/* not UTF-8: the byte as \xNN text, its backslash escaped */
		{B("\xff"), "\\\\xff"},
		{B("a\xc3"), "a\\\\xc3"},			/* cut sequence */
		{B("\xc0\xaf"), "\\\\xc0\\\\xaf"},		/* overlong */
		{B("\xed\xa0\x80"), "\\\\xed\\\\xa0\\\\x80"},	/* a surrogate */
		{B("\xf4\x90\x80\x80"), "\\\\xf4\\\\x90\\\\x80\\\\x80"},	/* past U+10FFFF */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = escaped(cases[i].in, cases[i].n);

		assert_string_equal(got, cases[i].out);
		free(got);
	}
}

static void test_numbers(void **state)
{
	static const struct {
		double v;
		const char *s;
	} cases[] = {
		/* OpenMetrics' canonical examples */
		{0.0, "0.0"}, {0.001, "0.001"}, {0.002, "0.002"}, {0.01, "0.01"}, {0.1, "0.1"},
		{0.9, "0.9"}, {0.95, "0.95"}, {0.99, "0.99"}, {0.999, "0.999"}, {1.0, "1.0"},
		{1.7, "1.7"}, {10.0, "10.0"}, {1e-10, "1e-10"}, {1e-09, "1e-09"}, {1e-05, "1e-05"},
		{0.0001, "0.0001"}, {100000.0, "100000.0"}, {1e+06, "1e+06"}, {1e+10, "1e+10"},
		/* uscope's bounds: the last nanosecond of a power of two */
		{0.001048575, "0.001048575"}, {1023e-9, "1.023e-06"}, {127.0, "127.0"},
		{-1.0, "-1.0"}, {4611686018427387904.0, "4.611686018427388e+18"},
		{0.1 + 0.2, "0.30000000000000004"}, {INFINITY, "+Inf"}, {-INFINITY, "-Inf"},
	};
	char buf[32];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		expo_number(cases[i].v, buf);
		assert_string_equal(buf, cases[i].s);
		if (isfinite(cases[i].v))
			assert_true(strtod(buf, NULL) == cases[i].v);
	}
	expo_number(NAN, buf);
	assert_string_equal(buf, "NaN");
}

static void test_label_names(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"name", "name"}, {"r_path", "r_path"}, {"r->next.id", "r__next_id"},
		{"9lives", "_9lives"}, {"__reserved", "key__reserved"}, {"", "_"},
		{"a b:c", "a_b_c"}, {"caf\xc3\xa9", "caf__"},
	};
	char out[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		expo_label_name(cases[i].in, out, sizeof(out));
		assert_string_equal(out, cases[i].out);
		assert_true(expo_label_name_ok(out) || expo_label_reserved(out));
	}
	assert_true(expo_label_name_ok("env"));
	assert_true(expo_label_name_ok("_x9"));
	assert_false(expo_label_name_ok("9x"));
	assert_false(expo_label_name_ok("__name__"));
	assert_false(expo_label_name_ok("a-b"));
	assert_false(expo_label_name_ok(""));
	for (const char *const *r = (const char *const[]){"probe", "pid", "comm", "binary", "le",
							  NULL}; *r; r++) {
		assert_true(expo_label_reserved(*r));
		assert_false(expo_label_name_ok(*r));
	}
}

static void family(struct expo *e)
{
	const struct expo_label l[] = {{"probe", B("f")}, {"skip", NULL, 0}, {"k", B("a\"\n")}};

	expo_family(e, "m", EXPO_COUNTER, NULL, "Help with \\ and\nnewline.");
	expo_sample(e, "m", "_total", l, 3, NULL, "3");
	expo_family(e, "h_seconds", EXPO_HISTOGRAM, "seconds", "H.");
	expo_sample(e, "h_seconds", "_bucket", l, 1, "0.5", "1");
	expo_sample(e, "h_seconds", "_bucket", NULL, 0, "+Inf", "2");
	expo_end(e);
}

static void test_families(void **state)
{
	struct expo t = {.fmt = SERVE_TEXT}, om = {.fmt = SERVE_OPENMETRICS};

	(void)state;
	family(&t);
	family(&om);
	assert_string_equal(t.buf,
			    "# HELP m_total Help with \\\\ and\\nnewline.\n"
			    "# TYPE m_total counter\n"
			    "m_total{probe=\"f\",k=\"a\\\"\\n\"} 3\n"
			    "# HELP h_seconds H.\n"
			    "# TYPE h_seconds histogram\n"
			    "h_seconds_bucket{probe=\"f\",le=\"0.5\"} 1\n"
			    "h_seconds_bucket{le=\"+Inf\"} 2\n");
	assert_string_equal(om.buf,
			    "# TYPE m counter\n"
			    "# HELP m Help with \\\\ and\\nnewline.\n"
			    "m_total{probe=\"f\",k=\"a\\\"\\n\"} 3\n"
			    "# TYPE h_seconds histogram\n"
			    "# UNIT h_seconds seconds\n"
			    "# HELP h_seconds H.\n"
			    "h_seconds_bucket{probe=\"f\",le=\"0.5\"} 1\n"
			    "h_seconds_bucket{le=\"+Inf\"} 2\n"
			    "# EOF\n");
	free(t.buf);
	free(om.buf);
}

/* ---- http ------------------------------------------------------------------- */

static int parse(const char *s, struct http_request *rq, size_t *used)
{
	return http_parse_request(s, strlen(s), rq, used);
}

/* What Prometheus 2.42 sends when it scrapes. */
#define PROM_ACCEPT                                                                     \
	"application/openmetrics-text;version=1.0.0,application/openmetrics-text;"      \
	"version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

static void test_request(void **state)
{
	struct http_request rq;
	size_t used = 0;
	const char *req = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: " PROM_ACCEPT
			  "\r\n\r\nBODY";

	(void)state;
	assert_int_equal(parse(req, &rq, &used), 1);
	assert_int_equal(rq.method, HTTP_GET);
	assert_string_equal(rq.path, "/metrics");
	assert_int_equal(rq.format, SERVE_OPENMETRICS);
	assert_int_equal(used, strlen(req) - 4);
	/* incomplete, at every cut */
	for (size_t n = 0; n < used; n++)
		assert_int_equal(http_parse_request(req, n, &rq, &used), 0);
	assert_int_equal(parse("HEAD /metrics HTTP/1.0\n\n", &rq, &used), 1);
	assert_int_equal(rq.method, HTTP_HEAD);
	assert_int_equal(rq.format, SERVE_TEXT);
	assert_int_equal(parse("\r\nPOST / HTTP/1.1\r\n\r\n", &rq, &used), 1);
	assert_int_equal(rq.method, HTTP_OTHER);
	assert_string_equal(rq.path, "/");
	assert_int_equal(parse("get /metrics HTTP/1.1\r\n\r\n", &rq, &used), -EINVAL);
	assert_int_equal(parse("GET /metrics\r\n\r\n", &rq, &used), -EINVAL);
	assert_int_equal(parse("GET /metrics HTTP/2.0\r\n\r\n", &rq, &used), -EINVAL);
	assert_int_equal(parse("GET  /metrics HTTP/1.1\r\n\r\n", &rq, &used), -EINVAL);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nNo colon\r\n\r\n", &rq, &used), -EINVAL);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n", &rq, &used),
			 -EINVAL);
	assert_int_equal(http_parse_request("GET /\0 HTTP/1.1\r\n\r\n", 20, &rq, &used), -EINVAL);
}

static void test_accept(void **state)
{
	static const struct {
		const char *v;
		enum serve_format f;
	} cases[] = {
		{PROM_ACCEPT, SERVE_OPENMETRICS},
		{"*/*", SERVE_TEXT},
		{"text/plain", SERVE_TEXT},
		{"application/openmetrics-text", SERVE_OPENMETRICS},
		{"Application/OpenMetrics-Text; Version=\"1.0.0\"", SERVE_OPENMETRICS},
		{"application/openmetrics-text;version=0.0.1", SERVE_TEXT},	/* not ours */
		{"application/openmetrics-text;q=0", SERVE_TEXT},
		{"text/plain;q=0.9, application/openmetrics-text;q=0.8", SERVE_TEXT},
		{"text/plain;q=0.5, application/openmetrics-text;q=0.5", SERVE_OPENMETRICS},
		{"application/openmetrics-text;q=2", SERVE_TEXT},		/* bad q: ignored */
		{"application/openmetrics-text;q=0.1234", SERVE_TEXT},
		{"", SERVE_TEXT},
		{",,;;=", SERVE_TEXT},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(http_accept_format(cases[i].v, strlen(cases[i].v)), cases[i].f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_label_names),
		cmocka_unit_test(test_families),
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_accept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
