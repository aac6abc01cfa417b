/* libFuzzer target for Python support's readers of untrusted memory
 * (src/python): the location-table decoder, the str and bytes readers, the
 * frame walker (walk.h) and the symbolizer.
 *
 * The input's first byte picks the layout (% 6: 3.11, 3.12, 3.13, 3.8, 3.9,
 * 3.10) and, by its bit 3, which older line table the rest is made a
 * location table as (3.10's co_linetable, or co_lnotab); the rest is both
 * a line table and a process's memory at FUZZ_BASE, read from an
 * exact-size heap copy (ASan sees any read past it). Invariants, any
 * violation aborts:
 *   - the two ways of reading a table agree: each entry is 2 to 16 bytes,
 *     they follow one another from 0, and the line of every instruction is
 *     its entry's line; past the last entry there is none;
 *   - an older table made a location table gives every instruction the
 *     line CPython's own reading of it gives (PyCode_Addr2Line of 3.8 and
 *     3.9, 3.10's address ranges), where its instructions are whole;
 *   - a str read is valid UTF-8 with no NUL, at most 4 bytes a code point
 *     and PYTHON_STR_MAX code points; a bytes read fits in the input;
 *   - a walk stores at most its room, ends with a known status, and every
 *     frame it stores symbolizes to an error or valid names, the same twice.
 * The seeds are a real table of 3.11 and objects laid out as CPython lays
 * them (a thread, frames, code objects, strings of each kind). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/linetable.h"
#include "python/debugoffs.h"
#include "python/offsets.h"
#include "python/symbolize.h"

#define PYWALK_FN(name) fz_##name
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) \
	(python_mem_read((const struct python_mem *)(env), (addr), (dst), (len)) != 0)
#include "python/walk.h"

#define FUZZ_BASE 0x10000ull

#define CHECK(cond)                                                                     \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "fuzz_python: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                                       \
			abort();                                                        \
		}                                                                       \
	} while (0)

struct image {
	const uint8_t *p;
	size_t n;
};

static int image_read(void *ctx, uint64_t addr, void *dst, size_t len)
{
	const struct image *im = ctx;

	if (addr < FUZZ_BASE || addr - FUZZ_BASE > im->n || len > im->n - (addr - FUZZ_BASE))
		return -EFAULT;
	memcpy(dst, im->p + (addr - FUZZ_BASE), len);
	return 0;
}

static bool valid_utf8(const char *s)
{
	const uint8_t *p = (const uint8_t *)s;

	while (*p) {
		unsigned n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2
			   : (*p & 0xf8) == 0xf0 ? 3 : 9;

		if (n == 9 || (n == 1 && *p < 0xc2))
			return false;
		for (unsigned i = 1; i <= n; i++)
			if ((p[i] & 0xc0) != 0x80)
				return false;
		p += n + 1;
	}
	return true;
}

static void check_str(const char *s, int err)
{
	if (err) {
		CHECK(!s);
		CHECK(err == -EINVAL || err == -E2BIG || err == -EFAULT || err == -ENOMEM);
		return;
	}
	CHECK(s && valid_utf8(s) && strlen(s) <= 4 * PYTHON_STR_MAX);
}

static void fuzz_table(const uint8_t *t, size_t n)
{
	static struct python_lineentry e[4096];
	int k = python_linetable_entries(t, n, 7, e, 4096), end = 0;

	if (k < 0) {
		CHECK(python_linetable_line(t, n, 7, 0) == -1 || (n && (t[0] & 0x80)));
		return;
	}
	for (int i = 0; i < k; i++) {
		CHECK(e[i].start == end && e[i].end - e[i].start >= 2 && e[i].end - e[i].start <= 16);
		end = e[i].end;
		for (int a = e[i].start; a < e[i].end && i < 64; a += 2)
			CHECK(python_linetable_line(t, n, 7, a) == e[i].line);
	}
	if (k < 4096)
		CHECK(python_linetable_line(t, n, 7, end) == -1);
	CHECK(python_linetable_line(t, n, 7, -2) == 7);
}

/* CPython's own readings of the older tables: 3.8's and 3.9's
 * PyCode_Addr2Line, and 3.10's ranges (_PyCode_CheckLineNumber). */
static long lnotab_line(const uint8_t *t, size_t n, long first, long addr)
{
	long line = first, a = 0;

	for (size_t i = 0; i + 1 < n; i += 2) {
		a += t[i];
		if (a > addr)
			break;
		line += (int8_t)t[i + 1];
	}
	return line;
}

static long t310_line(const uint8_t *t, size_t n, long first, long addr)
{
	long line = first, start, end = 0;

	for (size_t i = 0; i + 1 < n; i += 2) {
		start = end;
		end += t[i];
		if ((int8_t)t[i + 1] != -128)
			line += (int8_t)t[i + 1];
		if (start <= addr && addr < end)
			return (int8_t)t[i + 1] == -128 ? -1 : line;
	}
	return -1;
}

static void fuzz_old_table(const uint8_t *t, size_t n, enum python_lt_format fmt)
{
	static struct python_lineentry e[4096];
	uint8_t *lt = NULL;
	size_t len = 0, code = 0;
	bool whole = true;
	int err, k;

	for (size_t i = 0; i + 1 < n; i += 2) {
		code += t[i];
		whole &= !(t[i] & 1);	/* (instructions of 2 bytes) */
	}
	code += 4;
	err = python_linetable_convert(fmt, t, n, 7, code, &lt, &len);
	CHECK(err == 0 || err == -EINVAL || err == -ENOMEM);
	if (err) {
		CHECK(!lt && !len);
		return;
	}
	CHECK((len == 0) == (lt == NULL));
	/* a location table as made (never corrupt): entries from 0 on, each
	 * 1 to 8 code units; their lines CPython's at each instruction */
	k = python_linetable_entries(lt, len, 7, e, 4096);
	CHECK(k >= 0);
	for (int i = 0, end = 0; i < k; i++) {
		CHECK(e[i].start == end && e[i].end - e[i].start >= 2 && e[i].end - e[i].start <= 16);
		end = e[i].end;
		for (long a = e[i].start; whole && a < e[i].end && a < 512; a += 2)
			CHECK(e[i].line == (fmt == PYLT_LNOTAB ? lnotab_line(t, n, 7, a) :
					    t310_line(t, n, 7, a)));
	}
	for (long a = 0; whole && a < (long)code && a < 64; a += 2)
		CHECK(python_linetable_line(lt, len, 7, (int)a) ==
		      (fmt == PYLT_LNOTAB ? lnotab_line(t, n, 7, a) : t310_line(t, n, 7, a)));
	CHECK(python_linetable_line(lt, len, 7, -1) == 7);
	free(lt);
}

/* The input as a _Py_DebugOffsets block, its cookie put in place (and, by
 * the first byte, a version the reader knows): whatever it takes stays
 * within the 16-bit offsets, and the offsets it builds walk like the
 * table's. */
static void fuzz_debugoffs(const uint8_t *c, size_t n, struct python_mem *mem)
{
	static const uint64_t vers[] = {0x030d00f0, 0x030e01f0, 0x030d0300, 0x030f00a1};
	uint8_t *b = malloc(n > 24 ? n : 24);
	struct python_debugoffs d;
	struct python_offsets own;
	struct python_frame fr[16];
	struct python_walk w;
	int err;

	if (!b)
		return;
	memset(b, 0, 24);
	memcpy(b, c, n);
	if (n && (c[0] & 1))
		memcpy(b, "xdebugpy", 8);
	if (n && (c[0] & 2))
		memcpy(b + 8, &vers[(c[0] >> 2) & 3], 8);
	err = python_debugoffs_parse(b, n, &d);
	CHECK(err == 0 || err == -EINVAL || err == -EPROTO || err == -ENOTSUP);
	if (!err) {
		for (int f = 0; f < PD_N; f++)
			CHECK(d.val[f] < PYOFF_NONE);
		python_debugoffs_check(&d, python_offsets_for(0x030d0000), 0);
		if (python_offsets_for(d.version))
			python_debugoffs_check(&d, python_offsets_for(d.version), 0);
		if (!python_debugoffs_apply(&d, python_offsets_for(d.version), &own)) {
			fz_walk(&own, FUZZ_BASE, &w, fr, 16, mem);
			CHECK(w.n <= 16);
		}
	}
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t versions[] = {0x030b0000, 0x030c0000, 0x030d0000,
					    0x03080000, 0x03090000, 0x030a0000};
	const struct python_offsets *off;
	struct python_frame fr[16];
	struct python_walk w;
	struct python_mem mem;
	struct python_sym *sym;
	struct image im;
	uint8_t *c;

	if (size < 1)
		return 0;
	off = python_offsets_for(versions[data[0] % 6]);
	CHECK(off);
	c = malloc(size - 1 ? size - 1 : 1);
	if (!c)
		return 0;
	memcpy(c, data + 1, size - 1);
	im = (struct image){c, size - 1};
	mem = (struct python_mem){image_read, &im};

	fuzz_table(c, size - 1);
	fuzz_old_table(c, size - 1, (data[0] & 8) ? PYLT_310 : PYLT_LNOTAB);
	fuzz_debugoffs(c, size - 1, &mem);

	/* strs and bytes at the first few places, type unchecked */
	for (uint64_t at = 0; at < 256 && at < im.n; at += 8) {
		char *s = NULL;
		uint8_t *b = NULL;
		size_t len = 7;
		int err = python_read_str(off, &mem, NULL, FUZZ_BASE + at, &s);

		check_str(s, err);
		free(s);
		err = python_read_bytes(off, &mem, NULL, FUZZ_BASE + at, &b, &len);
		CHECK(err ? !b && !len : len <= im.n && (len > 0) == (b != NULL));
		free(b);
	}

	/* a thread state at the start: walk, symbolize every frame twice */
	fz_walk(off, FUZZ_BASE, &w, fr, 16, &mem);
	CHECK(w.n <= 16);
	CHECK(w.status == PYWALK_END || w.status == PYWALK_FULL || w.status == PYWALK_FAULT);
	sym = python_sym_new(off, &mem, NULL);
	if (sym) {
		for (uint32_t i = 0; i < w.n; i++) {
			struct python_frame_info a, b;
			int ea = python_sym_frame(sym, &fr[i], true, &a);
			int eb = python_sym_frame(sym, &fr[i], false, &b);

			CHECK(ea == eb);
			if (ea)
				continue;
			CHECK(valid_utf8(a.qualname) && valid_utf8(a.filename));
			CHECK(a.line == b.line && a.hidden == b.hidden &&
			      !strcmp(a.qualname, b.qualname));
		}
		python_sym_free(sym);
	}
	free(c);
	return 0;
}
