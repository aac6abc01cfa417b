/* The protocol buffers encoding of the fields profile.proto has: see
 * pprof.h. A field is its key, (number << 3) | wire type, as a varint,
 * then a varint (type 0) or a length and its bytes (type 2). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "pprof/pprof.h"

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

static bool reserve(struct pb *b, size_t more)
{
	if (b->err)
		return false;
	if (core_reserve(b->buf, b->cap, b->len + more, 256)) {
		b->err = -ENOMEM;
		return false;
	}
	return true;
}

size_t pb_put_varint(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

static void raw_varint(struct pb *b, uint64_t v)
{
	if (reserve(b, 10))
		b->len += pb_put_varint(b->buf + b->len, v);
}

static void key(struct pb *b, uint32_t field, unsigned wire)
{
	raw_varint(b, (uint64_t)field << 3 | wire);
}

void pb_varint(struct pb *b, uint32_t field, uint64_t v)
{
	key(b, field, WIRE_VARINT);
	raw_varint(b, v);
}

void pb_bytes(struct pb *b, uint32_t field, const void *data, size_t len)
{
	key(b, field, WIRE_LEN);
	raw_varint(b, len);
	if (len && reserve(b, len)) {
		memcpy(b->buf + b->len, data, len);
		b->len += len;
	}
}

void pb_packed(struct pb *b, uint32_t field, const uint64_t *v, size_t n)
{
	uint8_t tmp[10];
	size_t len = 0;

	if (!n)
		return;	/* an empty packed field is no field */
	for (size_t i = 0; i < n; i++)
		len += pb_put_varint(tmp, v[i]);
	key(b, field, WIRE_LEN);
	raw_varint(b, len);
	for (size_t i = 0; i < n; i++)
		raw_varint(b, v[i]);
}

void pb_message(struct pb *b, uint32_t field, const struct pb *sub)
{
	if (sub->err) {
		b->err = sub->err;
		return;
	}
	pb_bytes(b, field, sub->buf, sub->len);
}

void pb_reset(struct pb *b)
{
	b->len = 0;
}

void pb_free(struct pb *b)
{
	free(b->buf);
	memset(b, 0, sizeof(*b));
}
