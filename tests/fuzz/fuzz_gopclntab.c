/* libFuzzer target for Go's function table reader (src/go/gopclntab.c).
 *
 * The input is the table itself, read from an exact-size heap copy (ASan
 * sees any read past its end). When the header is accepted, its offsets
 * must lie inside the input and its functions must fit; the functions read
 * must be what a second, plain walk of the functab allows: in table order,
 * each at one of the functab's entries and ending by the next entry, its
 * name a non-empty NUL-terminated string inside the input; and reading is
 * deterministic. Any violation aborts. The seeds are small tables of each
 * layout (Go 1.2, 1.16, 1.18, 1.20) with three functions and their pcsp
 * tables. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objfile/gopclntab.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_gopclntab: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                               \
			abort();                                                \
		}                                                               \
	} while (0)

static uint64_t rd(const uint8_t *p, unsigned sz)
{
	uint64_t v = 0;

	memcpy(&v, p, sz);	/* little-endian host */
	return v;
}

/* The functab's i-th entry (i <= nfunc) as the header describes it. */
static uint64_t entry(const uint8_t *d, const struct gopclntab_hdr *h, uint64_t i)
{
	uint64_t v = rd(d + h->functab_off + 2 * i * h->fieldsz, h->fieldsz);

	return h->version >= GOPCLNTAB_118 ? v + h->text_start : v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gopclntab_hdr h, h2;
	struct gopclntab_func *f = NULL, *g = NULL;
	uint8_t *c = malloc(size ? size : 1);
	ssize_t n, m;
	uint64_t i = 0, j;

	if (!c)
		return 0;
	memcpy(c, data, size);
	if (gopclntab_header(c, size, &h)) {
		free(c);
		return 0;
	}
	CHECK(h.version == GOPCLNTAB_12 || h.version == GOPCLNTAB_116 ||
	      h.version == GOPCLNTAB_118 || h.version == GOPCLNTAB_120);
	CHECK(h.ptrsize == 4 || h.ptrsize == 8);
	CHECK(h.fieldsz == (h.version >= GOPCLNTAB_118 ? 4 : h.ptrsize));
	CHECK(h.funcname_off <= size && h.pctab_off <= size && h.functab_off <= size &&
	      h.funcdata_off <= size);
	/* nfunc pairs and the final entry fit */
	CHECK((2 * h.nfunc + 1) * h.fieldsz <= size - h.functab_off);

	n = gopclntab_funcs(c, size, &h, &f);
	CHECK(n >= 0 || n == -EINVAL || n == -ENOMEM);
	if (n < 0)
		CHECK(f == NULL);
	CHECK((n > 0) == (f != NULL));
	CHECK(n <= 0 || (uint64_t)n <= h.nfunc);
	for (ssize_t k = 0; k < n; k++) {
		size_t len;

		CHECK(f[k].name >= (const char *)c && f[k].name < (const char *)c + size);
		len = strnlen(f[k].name, size - (size_t)(f[k].name - (const char *)c));
		CHECK(len > 0 && f[k].name + len < (const char *)c + size);
		/* the next functab entry at this address, in order; it ends by
		 * the next different entry */
		while (i < h.nfunc && entry(c, &h, i) != f[k].entry)
			i++;
		CHECK(i < h.nfunc);
		j = i;
		while (j + 1 < h.nfunc && entry(c, &h, j + 1) == f[k].entry)
			j++;
		CHECK(f[k].end >= f[k].entry && f[k].end <= entry(c, &h, j + 1));
		i++;
	}

	/* deterministic */
	CHECK(gopclntab_header(c, size, &h2) == 0 && !memcmp(&h, &h2, sizeof(h)));
	m = gopclntab_funcs(c, size, &h2, &g);
	CHECK(m == n || m == -ENOMEM || n == -ENOMEM);
	for (ssize_t k = 0; k < n && k < m; k++)
		CHECK(g[k].name == f[k].name && g[k].entry == f[k].entry && g[k].end == f[k].end);
	free(g);
	free(f);
	free(c);
	return 0;
}
