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
 * tables.
 *
 * Each function's pc-value tables are read as the unwind tables and the
 * frames' names read them (gopclntab_pcv_next, gopclntab_pcvalue,
 * gopclntab_file, gopclntab_func_at; stack_go_row): ranges rise from the
 * entry without a gap, within [entry, end), a walk ends within the table's
 * bytes; pcsp's ranges cover the function exactly and each value makes a
 * row the walker knows; a file name is a NUL-terminated string inside the
 * input; the function found at an entry is that function. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objfile/gopclntab.h"
#include "stack/unwgo.h"

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

/* A pc-value table of f: contiguous ranges from the entry within [entry,
 * end), at most a range for each two bytes of the input. The end of the
 * last range, or 0 when the table does not read. */
static uint64_t check_pcv(const uint8_t *c, size_t size, const struct gopclntab_hdr *h,
			  const struct gopclntab_func *f, uint32_t tab, bool rows)
{
	struct gopclntab_pcv it;
	uint64_t lo, hi, at = f->entry, steps = 0;
	int32_t v;
	int r;

	gopclntab_pcv_start(tab, f->entry, f->end, &it);
	while ((r = gopclntab_pcv_next(c, size, h, &it, &lo, &hi, &v)) > 0) {
		CHECK(lo == at && hi >= lo && hi <= f->end);
		CHECK(++steps <= size / 2 + 1);
		at = hi;
		if (rows) {
			struct stack_row row = stack_go_row(v);
			unsigned op = row.op & STACK_OP_MASK;

			CHECK(op == STACK_OP_RSP || op == STACK_OP_BAD || op == STACK_OP_RANGE);
			CHECK(op != STACK_OP_RSP || v < 0 ||
			      ((int64_t)row.cfa_off << ((row.op & STACK_CFA_X8) ? 3 : 0)) ==
				      (int64_t)v + 8);
		}
	}
	CHECK(r == 0 || r == -EINVAL);
	return r == 0 ? at : 0;
}

static void check_tables(const uint8_t *c, size_t size, const struct gopclntab_hdr *h,
			 const struct gopclntab_func *f)
{
	struct gopclntab_func g;
	int32_t v;

	/* pcsp is kept only when it covers the function exactly */
	if (f->pcsp)
		CHECK(check_pcv(c, size, h, f, f->pcsp, true) == f->end);
	if (f->pcfile) {
		check_pcv(c, size, h, f, f->pcfile, false);
		if (!gopclntab_pcvalue(c, size, h, f->pcfile, f->entry, f->end, f->entry, &v)) {
			const char *nm = gopclntab_file(c, size, h, f, v);

			CHECK(!nm || (nm >= (const char *)c && nm < (const char *)c + size &&
				      memchr(nm, 0, size - (size_t)(nm - (const char *)c))));
		}
	}
	if (f->pcln)
		check_pcv(c, size, h, f, f->pcln, false);
	if (f->inltree)
		check_pcv(c, size, h, f, f->inltree, false);
	/* found at its entry: this function, or one at the same entry */
	if (f->end > f->entry && !gopclntab_func_at(c, size, h, f->entry, &g))
		CHECK(g.entry == f->entry && g.name >= (const char *)c &&
		      g.name < (const char *)c + size);
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

	for (ssize_t k = 0; k < n; k++)
		check_tables(c, size, &h, &f[k]);

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
