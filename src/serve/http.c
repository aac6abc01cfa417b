/* The HTTP requests the metrics server reads: a request line and headers
 * (RFC 9112), of which only Accept matters; see serve.h. Pure functions of
 * their input: tests/fuzz/fuzz_http.c feeds them anything. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "serve/serve.h"

const char *const serve_content_type[SERVE_NFORMATS] = {
	[SERVE_TEXT] = "text/plain; version=0.0.4; charset=utf-8",
	[SERVE_OPENMETRICS] = "application/openmetrics-text; version=1.0.0; charset=utf-8",
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* [s, e) without the spaces around it. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && is_space(**s))
		(*s)++;
	while (*e > *s && is_space((*e)[-1]))
		(*e)--;
}

static bool token_is(const char *s, const char *e, const char *word)
{
	size_t n = strlen(word);

	return (size_t)(e - s) == n && !strncasecmp(s, word, n);
}

/* A q value (RFC 9110: 0, 1, 0.DDD, 1.000) in thousandths; -1 if malformed. */
static int qvalue(const char *s, const char *e)
{
	int v, scale = 100;

	if (s == e || (*s != '0' && *s != '1'))
		return -1;
	v = (*s++ - '0') * 1000;
	if (s == e)
		return v;
	if (*s++ != '.')
		return -1;
	for (int i = 0; s < e; i++, s++) {
		if (i == 3 || *s < '0' || *s > '9')
			return -1;
		v += (*s - '0') * scale;
		scale /= 10;
	}
	return v > 1000 ? -1 : v;
}

/* One media range, [s, e): its q (thousandths, 1000 without one) for
 * OpenMetrics 1.0.0 into *om, for text into *text, the highest seen. */
static void media_range(const char *s, const char *e, int *om, int *text)
{
	const char *semi = memchr(s, ';', (size_t)(e - s)), *te = semi ? semi : e, *ts = s;
	bool version_ok = true;
	int q = 1000;

	trim(&ts, &te);
	for (const char *p = semi; p && p < e;) {
		const char *ps = p + 1, *pe = memchr(ps, ';', (size_t)(e - ps)), *eq;

		if (!pe)
			pe = e;
		p = pe < e ? pe : NULL;
		eq = memchr(ps, '=', (size_t)(pe - ps));
		if (!eq)
			continue;
		const char *ns = ps, *ne = eq, *vs = eq + 1, *ve = pe;

		trim(&ns, &ne);
		trim(&vs, &ve);
		if (ve - vs >= 2 && *vs == '"' && ve[-1] == '"') {
			vs++;
			ve--;
		}
		if (token_is(ns, ne, "q"))
			q = qvalue(vs, ve);
		else if (token_is(ns, ne, "version"))
			version_ok = token_is(vs, ve, "1.0.0");
	}
	if (q < 0)
		return;
	if (token_is(ts, te, "application/openmetrics-text")) {
		if (version_ok && q > *om)
			*om = q;
	} else if (token_is(ts, te, "text/plain") || token_is(ts, te, "text/*") ||
		   token_is(ts, te, "*/*")) {
		if (q > *text)
			*text = q;
	}
}

static void accept_ranks(const char *v, size_t len, int *om, int *text)
{
	const char *s = v, *end = v + len;

	while (s < end) {
		const char *comma = memchr(s, ',', (size_t)(end - s)), *e = comma ? comma : end;

		media_range(s, e, om, text);
		s = comma ? comma + 1 : end;
	}
}

enum serve_format http_accept_format(const char *v, size_t len)
{
	int om = 0, text = 0;

	accept_ranks(v, len, &om, &text);
	return om > 0 && om >= text ? SERVE_OPENMETRICS : SERVE_TEXT;
}

/* The request line: METHOD SP TARGET SP HTTP/1.x. */
static int request_line(const char *s, const char *e, struct http_request *out)
{
	const char *sp1 = memchr(s, ' ', (size_t)(e - s)), *sp2, *q;
	size_t n;

	if (!sp1 || sp1 == s)
		return -EINVAL;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(e - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1 || e - sp2 - 1 != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) ||
	    sp2[8] < '0' || sp2[8] > '9')
		return -EINVAL;
	/* methods are case-sensitive */
	out->method = sp1 - s == 3 && !memcmp(s, "GET", 3) ? HTTP_GET :
		      sp1 - s == 4 && !memcmp(s, "HEAD", 4) ? HTTP_HEAD : HTTP_OTHER;
	for (const char *p = s; p < sp1; p++)
		if (*p < 'A' || *p > 'Z')
			return -EINVAL;	/* methods are upper-case tokens */
	q = memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1));
	n = (size_t)((q ? q : sp2) - (sp1 + 1));
	if (n >= sizeof(out->path))
		n = sizeof(out->path) - 1;	/* long: no path of ours */
	memcpy(out->path, sp1 + 1, n);
	out->path[n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)out->path[i] <= ' ' || out->path[i] == 0x7f)
			return -EINVAL;
	return 0;
}

int http_parse_request(const char *buf, size_t len, struct http_request *out, size_t *used)
{
	const char *s = buf, *end = buf + len;
	int om = 0, text = 0, ret;
	bool first = true;

	memset(out, 0, sizeof(*out));
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s)), *e;

		if (!nl)
			return 0;	/* a line not complete yet */
		e = nl > s && nl[-1] == '\r' ? nl - 1 : nl;
		if (memchr(s, 0, (size_t)(e - s)) || memchr(s, '\r', (size_t)(e - s)))
			return -EINVAL;
		if (first) {
			if (e == s) {	/* empty lines before the request line are allowed */
				s = nl + 1;
				continue;
			}
			ret = request_line(s, e, out);
			if (ret)
				return ret;
			first = false;
		} else if (e == s) {
			out->format = om > 0 && om >= text ? SERVE_OPENMETRICS : SERVE_TEXT;
			*used = (size_t)(nl + 1 - buf);
			return 1;
		} else {
			const char *colon = memchr(s, ':', (size_t)(e - s));

			if (!colon || colon == s || is_space(colon[-1]) || is_space(*s))
				return -EINVAL;	/* no folded lines, no space before ':' */
			if (token_is(s, colon, "Accept"))
				accept_ranks(colon + 1, (size_t)(e - colon - 1), &om, &text);
		}
		s = nl + 1;
	}
	return 0;
}
