/* CPython's location table: see linetable.h for the format. Learnt from
 * CPython 3.11's Objects/locations.md and the line-number walk of
 * Objects/codeobject.c (advance, get_line_delta, _PyCode_CheckLineNumber);
 * written for a buffer that may be anything. */
#include "python/linetable.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

enum {
	LOC_ONE_LINE0 = 10,
	LOC_ONE_LINE2 = 12,
	LOC_NO_COLUMNS = 13,
	LOC_LONG = 14,
	LOC_NONE = 15,
};

/* A varint at tab[*i]: false if it runs past len or past 32 bits. */
static bool varint(const uint8_t *tab, size_t len, size_t *i, uint32_t *v)
{
	uint64_t val = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*i >= len || shift > 30)
			return false;
		b = tab[(*i)++];
		val |= (uint64_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	if (val > UINT32_MAX)
		return false;
	*v = (uint32_t)val;
	return true;
}

/* The line delta of the entry whose header is at tab[i] (as CPython's
 * get_line_delta): false when its varint is cut. */
static bool line_delta(const uint8_t *tab, size_t len, size_t i, long *delta)
{
	unsigned code = (tab[i] >> 3) & 15;
	uint32_t u;

	*delta = 0;
	if (code == LOC_NO_COLUMNS || code == LOC_LONG) {
		i++;
		if (!varint(tab, len, &i, &u))
			return false;
		*delta = (u & 1) ? -(long)(u >> 1) : (long)(u >> 1);
	} else if (code >= LOC_ONE_LINE0 && code <= LOC_ONE_LINE2) {
		*delta = code - LOC_ONE_LINE0;
	}
	return true;
}

/* Walk the entries: for each, call back with [start, end) and the line;
 * a callback that returns true stops the walk. -1 when corrupt, else the
 * number of entries walked. */
typedef bool (*entry_fn)(void *ctx, int start, int end, int line);

static int walk(const uint8_t *tab, size_t len, int firstlineno, entry_fn fn, void *ctx)
{
	long line = firstlineno, start = 0, end, delta;
	size_t i = 0;
	int n = 0;

	if (len && !(tab[0] & 0x80))
		return -1;
	while (i < len) {
		if (!line_delta(tab, len, i, &delta))
			return -1;
		line += delta;
		end = start + 2 * ((tab[i] & 7) + 1);
		if (line < INT_MIN || line > INT_MAX || end > INT_MAX)
			return -1;
		n++;
		if (fn(ctx, (int)start, (int)end, ((tab[i] >> 3) & 15) == LOC_NONE ? -1 : (int)line))
			return n;
		start = end;
		do
			i++;
		while (i < len && !(tab[i] & 0x80));
	}
	return n;
}

struct find {
	int addr, line;
};

static bool find_one(void *ctx, int start, int end, int line)
{
	struct find *f = ctx;

	(void)start;
	if (f->addr >= end)
		return false;
	f->line = line;
	return true;
}

int python_linetable_line(const uint8_t *tab, size_t len, int firstlineno, int addr)
{
	struct find f = {addr, -1};

	if (addr < 0)
		return firstlineno;
	if (walk(tab, len, firstlineno, find_one, &f) < 0)
		return -1;
	return f.line;
}

struct collect {
	struct python_lineentry *out;
	int max, n;
};

static bool collect_one(void *ctx, int start, int end, int line)
{
	struct collect *c = ctx;

	if (c->n >= c->max)
		return true;
	c->out[c->n++] = (struct python_lineentry){start, end, line};
	return false;
}

int python_linetable_entries(const uint8_t *tab, size_t len, int firstlineno,
			     struct python_lineentry *out, int max)
{
	struct collect c = {out, max, 0};

	if (walk(tab, len, firstlineno, collect_one, &c) < 0)
		return -1;
	return c.n;
}

/* ---- the line tables before 3.11, made into the location table ---------- */

struct lt_out {
	uint8_t *b;
	size_t n, cap;
	long line;		/* the running line of the table written */
	bool oom;
};

static void put_byte(struct lt_out *o, uint8_t v)
{
	if (o->oom)
		return;
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 64;
		uint8_t *b = realloc(o->b, cap);

		if (!b) {
			o->oom = true;
			return;
		}
		o->b = b;
		o->cap = cap;
	}
	o->b[o->n++] = v;
}

/* bytes [start, end) of code at line (or none), as entries of 1 to 8 code
 * units: NO_COLUMNS with the line's delta, or NONE */
static void put_range(struct lt_out *o, long start, long end, long line, bool none)
{
	for (long units = (end - start) / 2; units > 0;) {
		long k = units > 8 ? 8 : units;

		units -= k;
		if (none) {
			put_byte(o, (uint8_t)(0x80 | LOC_NONE << 3 | (k - 1)));
			continue;
		}
		long d = line - o->line;
		uint64_t u = d < 0 ? ((uint64_t)-d << 1) | 1 : (uint64_t)d << 1;

		put_byte(o, (uint8_t)(0x80 | LOC_NO_COLUMNS << 3 | (k - 1)));
		do {
			uint8_t c = u & 63;

			u >>= 6;
			put_byte(o, (uint8_t)(c | (u ? 64 : 0)));
		} while (u);
		o->line = line;
	}
}

int python_linetable_convert(enum python_lt_format fmt, const uint8_t *tab, size_t len,
			     int firstlineno, size_t code_bytes, uint8_t **out, size_t *outlen)
{
	struct lt_out o = {.line = firstlineno};
	long line = firstlineno, start = 0, end = 0;

	*out = NULL;
	*outlen = 0;
	if (fmt != PYLT_LNOTAB && fmt != PYLT_310)
		return -EINVAL;
	if (code_bytes > PYTHON_LT_CODE_MAX)
		code_bytes = PYTHON_LT_CODE_MAX;
	for (size_t i = 0; i + 1 < len && !o.oom; i += 2) {
		if (fmt == PYLT_LNOTAB) {
			/* PyCode_Addr2Line (3.8, 3.9): the address grows by the
			 * first byte, then the line by the second (signed) */
			end = start + tab[i];
			if (end > PYTHON_LT_CODE_MAX)
				break;
			put_range(&o, start, end, line, false);
			line += (int8_t)tab[i + 1];
			start = end;
		} else {
			/* 3.10's (Objects/lnotab_notes.txt): a range of the first
			 * byte's length, then the line's delta, -128: no line */
			end = start + tab[i];
			if (end > PYTHON_LT_CODE_MAX)
				break;
			if ((int8_t)tab[i + 1] != -128)
				line += (int8_t)tab[i + 1];
			put_range(&o, start, end, line, (int8_t)tab[i + 1] == -128);
			start = end;
		}
		if (line < INT_MIN / 2 || line > INT_MAX / 2) {
			free(o.b);
			return -EINVAL;
		}
	}
	/* 3.8, 3.9: the last line holds to the end of the code */
	if (fmt == PYLT_LNOTAB && (long)code_bytes > start)
		put_range(&o, start, (long)code_bytes, line, false);
	if (o.oom) {
		free(o.b);
		return -ENOMEM;
	}
	*out = o.b;
	*outlen = o.n;
	return 0;
}
