/* A chunk's payload: see buf.h. */
#include "core/grow.h"
#include "record/buf.h"

#include <stdlib.h>
#include <string.h>

void rbuf_put(struct rbuf *b, const void *data, size_t len)
{
	if (b->oom)
		return;
	if (core_reserve(b->p, b->cap, b->len + len, 4096)) {
		b->oom = true;
		return;
	}
	if (len)
		memcpy(b->p + b->len, data, len);
	b->len += len;
}

void rbuf_u8(struct rbuf *b, uint8_t v)
{
	rbuf_put(b, &v, 1);
}

void rbuf_u32(struct rbuf *b, uint32_t v)
{
	rbuf_put(b, &v, 4);
}

void rbuf_u64(struct rbuf *b, uint64_t v)
{
	rbuf_put(b, &v, 8);
}

void rbuf_str(struct rbuf *b, const char *s)
{
	if (!s) {
		rbuf_u32(b, 0xffffffffu);
		return;
	}
	rbuf_u32(b, (uint32_t)strlen(s));
	rbuf_put(b, s, strlen(s));
}

void rbuf_align(struct rbuf *b)
{
	static const uint8_t zero[8];

	rbuf_put(b, zero, (8 - b->len % 8) % 8);
}

void rbuf_free(struct rbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

const void *rget_bytes(struct rget *g, size_t n)
{
	const void *p;

	if (g->bad || n > g->len - g->at) {
		g->bad = true;
		return NULL;
	}
	p = g->p + g->at;
	g->at += n;
	return p;
}

uint8_t rget_u8(struct rget *g)
{
	const uint8_t *p = rget_bytes(g, 1);

	return p ? *p : 0;
}

/* The next n bytes into v (left as it is where they are not there). */
static void rget_into(struct rget *g, void *v, size_t n)
{
	const void *p = rget_bytes(g, n);

	if (p)
		memcpy(v, p, n);
}

uint32_t rget_u32(struct rget *g)
{
	uint32_t v = 0;

	rget_into(g, &v, sizeof(v));
	return v;
}

uint64_t rget_u64(struct rget *g)
{
	uint64_t v = 0;

	rget_into(g, &v, sizeof(v));
	return v;
}

char *rget_str(struct rget *g, bool *is_null)
{
	uint32_t n = rget_u32(g);
	const char *p;
	char *s;

	if (is_null)
		*is_null = n == 0xffffffffu;
	if (n == 0xffffffffu || g->bad)
		return NULL;
	p = rget_bytes(g, n);
	if (!p)
		return NULL;
	s = malloc((size_t)n + 1);
	if (!s) {
		g->bad = true;
		return NULL;
	}
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}
