/* The exposition text: see expo.h. */
#include "core/grow.h"
#include "serve/expo.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(struct expo *e, size_t more)
{
	if (e->err)
		return false;
	if (core_reserve(e->buf, e->cap, e->len + more + 1, 4096)) {
		e->err = -ENOMEM;
		return false;
	}
	return true;
}

void expo_raw(struct expo *e, const char *s, size_t n)
{
	if (!reserve(e, n))
		return;
	memcpy(e->buf + e->len, s, n);
	e->len += n;
	e->buf[e->len] = 0;
}

static void put(struct expo *e, const char *s)
{
	expo_raw(e, s, strlen(s));
}

/* The length of the valid UTF-8 sequence at s (0: not one). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (len > n)
		return 0;
	/* no overlong forms, no surrogates, nothing past U+10FFFF */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

void expo_escape(struct expo *e, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		size_t k = utf8_len(u + i, n - i);
		char esc[8];

		if (u[i] == '\\' || u[i] == '"') {
			esc[0] = '\\';
			esc[1] = (char)u[i];
			expo_raw(e, esc, 2);
			i++;
		} else if (u[i] == '\n') {
			expo_raw(e, "\\n", 2);
			i++;
		} else if (!k) {
			/* not UTF-8: its byte as text, the backslash escaped */
			snprintf(esc, sizeof(esc), "\\\\x%02x", u[i]);
			expo_raw(e, esc, strlen(esc));
			i++;
		} else {
			expo_raw(e, s + i, k);
			i += k;
		}
	}
}

static const char *const type_name[] = {
	[EXPO_COUNTER] = "counter",
	[EXPO_GAUGE] = "gauge",
	[EXPO_HISTOGRAM] = "histogram",
};

static void help_text(struct expo *e, const char *help)
{
	/* HELP escapes \\ and \n (and OpenMetrics \" too: none is written) */
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			put(e, "\\\\");
		else if (*p == '\n')
			put(e, "\\n");
		else
			expo_raw(e, p, 1);
	}
}

void expo_family(struct expo *e, const char *name, enum expo_type type, const char *unit,
		 const char *help)
{
	/* text: HELP then TYPE, a counter under its _total name; OpenMetrics:
	 * TYPE, UNIT, HELP, under the family's name */
	const char *total = e->fmt == SERVE_TEXT && type == EXPO_COUNTER ? "_total" : "";

	if (e->fmt == SERVE_TEXT) {
		put(e, "# HELP ");
		put(e, name);
		put(e, total);
		put(e, " ");
		help_text(e, help);
		put(e, "\n");
	}
	put(e, "# TYPE ");
	put(e, name);
	put(e, total);
	put(e, " ");
	put(e, type_name[type]);
	put(e, "\n");
	if (e->fmt == SERVE_OPENMETRICS) {
		if (unit) {
			put(e, "# UNIT ");
			put(e, name);
			put(e, " ");
			put(e, unit);
			put(e, "\n");
		}
		put(e, "# HELP ");
		put(e, name);
		put(e, " ");
		help_text(e, help);
		put(e, "\n");
	}
}

static void label(struct expo *e, bool *first, const char *name, const char *v, size_t n)
{
	put(e, *first ? "{" : ",");
	*first = false;
	put(e, name);
	put(e, "=\"");
	expo_escape(e, v, n);
	put(e, "\"");
}

void expo_sample(struct expo *e, const char *name, const char *suffix,
		 const struct expo_label *labels, size_t n, const char *le, const char *value)
{
	bool first = true;

	put(e, name);
	put(e, suffix);
	for (size_t i = 0; i < n; i++)
		if (labels[i].value)
			label(e, &first, labels[i].name, labels[i].value, labels[i].len);
	if (le)
		label(e, &first, "le", le, strlen(le));
	if (!first)
		put(e, "}");
	put(e, " ");
	put(e, value);
	put(e, "\n");
}

void expo_end(struct expo *e)
{
	if (e->fmt == SERVE_OPENMETRICS)
		put(e, "# EOF\n");
}

void expo_number(double v, char buf[32])
{
	char digits[32], *ep;
	int prec, exp, nd;

	if (isnan(v)) {
		strcpy(buf, "NaN");
		return;
	}
	if (isinf(v)) {
		strcpy(buf, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == 0) {
		strcpy(buf, signbit(v) ? "-0.0" : "0.0");
		return;
	}
	/* the fewest significant digits that read back as v */
	for (prec = 1; prec < 17; prec++) {
		snprintf(digits, sizeof(digits), "%.*e", prec - 1, v);
		if (strtod(digits, NULL) == v)
			break;
	}
	snprintf(digits, sizeof(digits), "%.*e", prec - 1, v);
	ep = strchr(digits, 'e');
	exp = atoi(ep + 1);
	*ep = 0;
	nd = prec;
	/* Go's %g for the shortest digits: an exponent below -4 or from 6 up
	 * (21 digits would not do: OpenMetrics' examples say 1e+06) */
	if (exp < -4 || exp >= 6) {
		/* d.ddde+XX: the mantissa as printed, then at least two exponent digits */
		size_t m = strlen(digits);

		if (m > 24)
			m = 24;	/* 17 digits, a sign and a point at most */
		memcpy(buf, digits, m);
		snprintf(buf + m, 8, "e%c%02d", exp < 0 ? '-' : '+', (exp < 0 ? -exp : exp) % 1000);
		return;
	}
	/* plain: the digits without the point, placed */
	char d[24], *o = buf;
	int k = 0;

	for (const char *p = digits; *p; p++)
		if (*p >= '0' && *p <= '9')
			d[k++] = *p;
	d[k] = 0;
	if (v < 0)
		*o++ = '-';
	if (exp < 0) {
		*o++ = '0';
		*o++ = '.';
		for (int i = -1; i > exp; i--)
			*o++ = '0';
		memcpy(o, d, (size_t)nd);
		o += nd;
	} else {
		for (int i = 0; i <= exp; i++)
			*o++ = i < nd ? d[i] : '0';
		*o++ = '.';
		if (nd > exp + 1) {
			memcpy(o, d + exp + 1, (size_t)(nd - exp - 1));
			o += nd - exp - 1;
		} else {
			*o++ = '0';
		}
	}
	*o = 0;
}

void expo_label_name(const char *name, char *out, size_t len)
{
	size_t o = 0;

	if (len < 8) {
		if (len)
			out[0] = 0;
		return;
	}
	if (name[0] >= '0' && name[0] <= '9')
		out[o++] = '_';
	else if (name[0] == '_' && name[1] == '_') {
		memcpy(out, "key", 3);
		o = 3;
	} else if (!name[0])
		out[o++] = '_';
	for (const char *p = name; *p && o + 1 < len; p++) {
		char c = *p;

		out[o++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			   (c >= '0' && c <= '9') || c == '_' ? c : '_';
	}
	out[o] = 0;
}

bool expo_label_reserved(const char *name)
{
	static const char *const own[] = {"probe", "pid", "comm", "binary", "le"};

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strcmp(name, own[i]))
			return true;
	return false;
}

bool expo_label_name_ok(const char *name)
{
	if (!name[0] || (name[0] >= '0' && name[0] <= '9') || !strncmp(name, "__", 2))
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	return !expo_label_reserved(name);
}
