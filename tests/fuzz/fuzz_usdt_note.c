/* libFuzzer target for the .note.stapsdt parser.
 *
 * The first byte picks actual_base from a small table (no adjustment, the
 * recorded base, moved up, moved down, wrap-around); the rest is the raw
 * section. On success, each note must match what a second, independent walk
 * of the same bytes finds (pc/sema adjusted by the same rule), with
 * non-empty NUL-terminated provider and name inside the section; on failure
 * the parser must have logged one error naming the note and offset. Any
 * violation aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "usdt/usdt.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_usdt_note: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                               \
			abort();                                                \
		}                                                               \
	} while (0)

static int nerrors;
static char last[1024];

static void on_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level == USC_LOG_ERROR) {
		nerrors++;
		snprintf(last, sizeof(last), "%s", msg);
	}
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* The k-th stapsdt note's desc by a plain walk of a section already known
 * to be well formed. */
static const uint8_t *nth_desc(const uint8_t *b, size_t len, size_t k, size_t *dlen)
{
	size_t off = 0;

	while (off + 12 <= len) {
		size_t namesz = rd32(b + off), descsz = rd32(b + off + 4);
		uint32_t type = rd32(b + off + 8);
		size_t d = off + 12 + ((namesz + 3) & ~(size_t)3);

		CHECK(d <= len && descsz <= len - d);
		if (type == 3 && namesz == 8 && !memcmp(b + off + 12, "stapsdt", 8) && k-- == 0) {
			*dlen = descsz;
			return b + d;
		}
		off = d + ((descsz + 3) & ~(size_t)3);
	}
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t bases[8] = {
		0, 0x2004, 0x12004, 0x1004, 0x400000, UINT64_MAX, 1, 0x8000000000000000ull,
	};
	struct usdt_note *v = NULL, *w = NULL;
	size_t n = 0, m = 0;
	uint64_t base;
	uint8_t *copy;
	int ret;

	if (size < 1)
		return 0;
	base = bases[data[0] & 7];
	data++;
	size--;
	/* an exact-size heap copy, so ASan sees any read past the end */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);

	nerrors = 0;
	usc_set_log(on_log, NULL);
	ret = usdt_parse_notes(copy, size, base, &v, &n);
	usc_set_log(NULL, NULL);
	CHECK(ret == 0 || ret == -EINVAL || ret == -ENOMEM);
	if (ret) {
		CHECK(v == NULL && n == 0);
		if (ret == -EINVAL) {
			CHECK(nerrors == 1);
			CHECK(strstr(last, "note ") && strstr(last, " at byte offset "));
		}
		free(copy);
		return 0;
	}
	CHECK(nerrors == 0);
	CHECK((n == 0) == (v == NULL));
	CHECK(n <= size / 48);	/* header 12 + owner 8 + desc >= 24 + 4 */
	for (size_t i = 0; i < n; i++) {
		const struct usdt_note *e = &v[i];
		size_t dlen, lp, ln, la;
		const uint8_t *d = nth_desc(copy, size, i, &dlen);
		uint64_t pc, sema, nbase;

		CHECK(d != NULL);
		CHECK(e->provider && e->name && e->args);
		lp = strlen(e->provider);
		ln = strlen(e->name);
		la = strlen(e->args);
		CHECK(lp > 0 && ln > 0);
		CHECK(24 + lp + 1 + ln + 1 + la + 1 <= dlen);
		CHECK(!memcmp(d + 24, e->provider, lp + 1));
		CHECK(!memcmp(d + 24 + lp + 1, e->name, ln + 1));
		CHECK(!memcmp(d + 24 + lp + 1 + ln + 1, e->args, la + 1));
		pc = rd64(d);
		nbase = rd64(d + 8);
		sema = rd64(d + 16);
		CHECK(e->base == nbase);
		if (base && nbase != base) {
			pc += base - nbase;
			if (sema)
				sema += base - nbase;
		}
		CHECK(e->pc == pc);
		CHECK(e->sema == sema);
		CHECK((e->sema == 0) == (rd64(d + 16) == 0));
	}
	CHECK(nth_desc(copy, size, n, &(size_t){0}) == NULL);

	/* deterministic */
	CHECK(usdt_parse_notes(copy, size, base, &w, &m) == 0 && m == n);
	for (size_t i = 0; i < n; i++)
		CHECK(w[i].pc == v[i].pc && w[i].sema == v[i].sema &&
		      !strcmp(w[i].provider, v[i].provider) && !strcmp(w[i].name, v[i].name) &&
		      !strcmp(w[i].args, v[i].args));
	usdt_notes_free(w, m);
	usdt_notes_free(v, n);
	free(copy);
	return 0;
}
