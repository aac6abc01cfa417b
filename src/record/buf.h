/* Building and reading a chunk's payload: integers and strings (u32 length,
 * bytes, padded to 8), reading with every length checked (a recording is
 * not trusted). */
#ifndef USC_RECORD_BUF_H
#define USC_RECORD_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rbuf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};

void rbuf_put(struct rbuf *b, const void *data, size_t len);
void rbuf_u8(struct rbuf *b, uint8_t v);
void rbuf_u32(struct rbuf *b, uint32_t v);
void rbuf_u64(struct rbuf *b, uint64_t v);
void rbuf_str(struct rbuf *b, const char *s);	/* NULL: length 0xffffffff */
void rbuf_align(struct rbuf *b);		/* to 8 */
void rbuf_free(struct rbuf *b);

/* Reading: at goes forward; bad is set (and sticks) when a read would go
 * past the end. */
struct rget {
	const uint8_t *p;
	size_t len, at;
	bool bad;
};

uint8_t rget_u8(struct rget *g);
uint32_t rget_u32(struct rget *g);
uint64_t rget_u64(struct rget *g);
/* A string, NUL-terminated, malloc'd (NULL for a NULL string, or bad). */
char *rget_str(struct rget *g, bool *is_null);
/* n bytes in place (NULL when bad). */
const void *rget_bytes(struct rget *g, size_t n);

#endif
