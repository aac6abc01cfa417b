/* Tests of src/python: the location-table decoder on real tables of CPython
 * 3.11, 3.12 and 3.13 (fixtures/python/linetables-3*.h, made by
 * linetables.py: every instruction's line must be what co_lines() says);
 * the str, bytes and thread-state readers, the frame walker (walk.h) and the
 * symbolizer on objects laid out in a synthetic memory with each version's
 * offsets; detection of the interpreters installed here, with the refusal
 * of other versions; and the offsets table against the DWARF of every
 * CPython build here that has it. Corrupt input must give errors, never a
 * read outside its buffer (ASan, exact-size copies). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dwarf.h>
#include <gelf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/log.h"
#include "python/detect.h"
#include "python/debugoffs.h"
#include "python/linetable.h"
#include "python/offsets.h"
#include "python/symbolize.h"

#define PYWALK_FN(name) tw_##name
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) \
	(python_mem_read((const struct python_mem *)(env), (addr), (dst), (len)) != 0)
#include "python/walk.h"

struct lt_range {
	int start, end, line;
};

struct lt_fixture {
	const char *name;
	int firstlineno, code_len;
	const uint8_t *tab;
	int tab_len;
	const struct lt_range *ranges;
	int nranges;
};

#include "fixtures/python/linetables-311.h"
#include "fixtures/python/linetables-312.h"
#include "fixtures/python/linetables-313.h"
#include "fixtures/python/linetables-38.h"
#include "fixtures/python/linetables-39.h"
#include "fixtures/python/linetables-310.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Python builds beside Debian's: pyenv's ($PYENV_ROOT, else ~/.pyenv), by a
 * glob under its versions/ directory. 0 with g filled, or non-zero (none). */
static int pyenv_glob(const char *pattern, glob_t *g)
{
	const char *root = getenv("PYENV_ROOT"), *home = getenv("HOME");
	char pat[PATH_MAX];

	if (root && *root)
		snprintf(pat, sizeof(pat), "%s/versions/%s", root, pattern);
	else
		snprintf(pat, sizeof(pat), "%s/.pyenv/versions/%s", home ? home : "/root", pattern);
	return glob(pat, 0, NULL, g);
}

static const struct {
	const struct lt_fixture *f;
	size_t n;
} lt_sets[] = {
	{lt_fixtures_311, N(lt_fixtures_311)},
	{lt_fixtures_312, N(lt_fixtures_312)},
	{lt_fixtures_313, N(lt_fixtures_313)},
};

/* The line co_lines() gives the code unit at byte offset addr, or -1. */
static int expected_line(const struct lt_fixture *f, int addr)
{
	for (int i = 0; i < f->nranges; i++)
		if (addr >= f->ranges[i].start && addr < f->ranges[i].end)
			return f->ranges[i].line;
	return -1;
}

static uint8_t *copy(const uint8_t *p, size_t n)
{
	uint8_t *c = malloc(n ? n : 1);

	assert_non_null(c);
	memcpy(c, p, n);
	return c;
}

/* ---- location tables ---------------------------------------------------- */

static void test_linetable_real(void **state)
{
	size_t checked = 0, nolines = 0;

	(void)state;
	for (size_t s = 0; s < N(lt_sets); s++) {
		assert_true(lt_sets[s].n >= 8);
		for (size_t k = 0; k < lt_sets[s].n; k++) {
			const struct lt_fixture *f = &lt_sets[s].f[k];
			uint8_t *tab = copy(f->tab, (size_t)f->tab_len);

			for (int a = 0; a < f->code_len; a += 2) {
				int want = expected_line(f, a);
				int got = python_linetable_line(tab, (size_t)f->tab_len,
								f->firstlineno, a);

				if (got != want)
					fail_msg("%s (set %zu): offset %d: line %d, co_lines says %d",
						 f->name, s, a, got, want);
				checked++;
				nolines += want == -1;
			}
			/* past the code, and a frame that has run nothing */
			assert_int_equal(python_linetable_line(tab, (size_t)f->tab_len,
							       f->firstlineno, f->code_len), -1);
			assert_int_equal(python_linetable_line(tab, (size_t)f->tab_len,
							       f->firstlineno, -2), f->firstlineno);
			free(tab);
		}
	}
	/* the samples exercise every kind: a thousand instructions, some
	 * without a line */
	assert_true(checked > 1000);
	assert_true(nolines > 0);
}

/* 3.8's and 3.9's co_lnotab and 3.10's co_linetable, made location
 * tables: every instruction's line as the interpreter's own (co_lines(),
 * dis.findlinestarts() before 3.10). */
static void test_linetable_old(void **state)
{
	static const struct {
		const struct lt_fixture *f;
		size_t n;
		enum python_lt_format fmt;
	} sets[] = {
		{lt_fixtures_38, N(lt_fixtures_38), PYLT_LNOTAB},
		{lt_fixtures_39, N(lt_fixtures_39), PYLT_LNOTAB},
		{lt_fixtures_310, N(lt_fixtures_310), PYLT_310},
	};
	size_t checked = 0;

	(void)state;
	for (size_t s = 0; s < N(sets); s++) {
		assert_true(sets[s].n >= 8);
		for (size_t k = 0; k < sets[s].n; k++) {
			const struct lt_fixture *f = &sets[s].f[k];
			uint8_t *tab = copy(f->tab, (size_t)f->tab_len), *lt = NULL;
			size_t n = 0;

			assert_int_equal(python_linetable_convert(sets[s].fmt, tab, (size_t)f->tab_len,
								  f->firstlineno, (size_t)f->code_len,
								  &lt, &n), 0);
			for (int a = 0; a < f->code_len; a += 2) {
				int want = expected_line(f, a);
				int got = python_linetable_line(lt, n, f->firstlineno, a);

				if (got != want)
					fail_msg("%s (set %zu): offset %d: line %d, CPython says %d",
						 f->name, s, a, got, want);
				checked++;
			}
			/* f_lasti -1: a frame that has run nothing */
			assert_int_equal(python_linetable_line(lt, n, f->firstlineno, -1),
					 f->firstlineno);
			assert_int_equal(python_linetable_line(lt, n, f->firstlineno, f->code_len), -1);
			free(lt);
			free(tab);
		}
	}
	print_message("%zu instructions of 3.8 to 3.10 code\n", checked);
	assert_true(checked > 500);
	/* not a format to convert; a table cut short converts what it has */
	{
		uint8_t *lt = NULL, t[3] = {4, 1, 6};
		size_t n = 0;

		assert_int_equal(python_linetable_convert(PYLT_LOCATIONS, t, 3, 1, 0, &lt, &n),
				 -EINVAL);
		assert_int_equal(python_linetable_convert(PYLT_310, t, 3, 1, 0, &lt, &n), 0);
		assert_int_equal(python_linetable_line(lt, n, 1, 2), 2);
		assert_int_equal(python_linetable_line(lt, n, 1, 4), -1);
		free(lt);
	}
}

static void test_linetable_entries(void **state)
{
	const struct lt_fixture *f = &lt_fixtures_311[1];	/* plain:f */
	struct python_lineentry e[256];
	int n, covered = 0;

	(void)state;
	n = python_linetable_entries(f->tab, (size_t)f->tab_len, f->firstlineno, e, 256);
	assert_true(n > 0 && n < 256);
	for (int i = 0; i < n; i++) {
		assert_int_equal(e[i].start, covered);
		assert_true(e[i].end > e[i].start && e[i].end - e[i].start <= 16);
		assert_int_equal(e[i].line, expected_line(f, e[i].start));
		covered = e[i].end;
	}
	assert_int_equal(covered, f->code_len);
	/* room for fewer: that many */
	assert_int_equal(python_linetable_entries(f->tab, (size_t)f->tab_len, f->firstlineno, e,
						  3), 3);
}

/* Every prefix of every table: no read past it; an instruction that a
 * complete entry of the prefix covers keeps its line, the others get a
 * line of the cut entry or -1. Then every byte flipped: any answer, no
 * crash. */
static void test_linetable_corrupt(void **state)
{
	static const uint8_t not_a_header[] = {0x05, 0x80, 0x00};
	static const uint8_t cut_varint[] = {0xe8, 0x41};	/* no-columns, varint cut */
	static const uint8_t huge[] = {0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x3f};

	(void)state;
	for (size_t s = 0; s < N(lt_sets); s++)
		for (size_t k = 0; k < lt_sets[s].n; k++) {
			const struct lt_fixture *f = &lt_sets[s].f[k];
			struct python_lineentry e[512];

			for (int cut = 0; cut <= f->tab_len; cut++) {
				uint8_t *tab = copy(f->tab, (size_t)cut);
				int n = python_linetable_entries(tab, (size_t)cut, f->firstlineno, e,
								 512);
				int covered = n > 1 ? e[n - 2].end : 0;

				for (int a = 0; a < covered; a += 2)
					assert_int_equal(python_linetable_line(tab, (size_t)cut,
									       f->firstlineno, a),
							 expected_line(f, a));
				free(tab);
			}
			for (int i = 0; i < f->tab_len; i++)
				for (int bit = 0; bit < 8; bit++) {
					uint8_t *tab = copy(f->tab, (size_t)f->tab_len);
					int at[] = {-2, 0, (f->code_len / 2) & ~1, f->code_len - 2,
						    f->code_len + 2};

					tab[i] ^= (uint8_t)(1 << bit);
					for (size_t a = 0; a < N(at); a++)
						(void)python_linetable_line(tab, (size_t)f->tab_len,
									    f->firstlineno, at[a]);
					(void)python_linetable_entries(tab, (size_t)f->tab_len,
								       f->firstlineno, e, 512);
					free(tab);
				}
		}
	assert_int_equal(python_linetable_line(not_a_header, sizeof(not_a_header), 10, 0), -1);
	assert_int_equal(python_linetable_entries(not_a_header, sizeof(not_a_header), 10, NULL,
						  0), -1);
	assert_int_equal(python_linetable_line(cut_varint, sizeof(cut_varint), 10, 0), -1);
	assert_int_equal(python_linetable_line(huge, sizeof(huge), 10, 0), -1);
	assert_int_equal(python_linetable_line(NULL, 0, 10, 0), -1);
}

/* Hand-made entries of each kind, as locations.md describes them. */
static void test_linetable_kinds(void **state)
{
	static const uint8_t tab[] = {
		0x80, 0x00,		/* short form, 1 unit: line 100 */
		0xd9, 0x04, 0x08,	/* one-line form +1, 2 units: 101 */
		0xe8, 0x07,		/* no columns, svarint 7 = -3, 1 unit: 98 */
		0xf2, 0x28, 0x00, 0x01, 0x02,	/* long form +20, 3 units: 118 */
		0xf8,			/* no location, 1 unit */
		0xe8, 0x41, 0x01,	/* no columns, svarint 65 = -32, 1 unit: 86 */
	};
	static const int want[] = {100, 101, 101, 98, 118, 118, 118, -1, 86, -1};

	(void)state;
	for (int i = 0; i < (int)N(want); i++)
		assert_int_equal(python_linetable_line(tab, sizeof(tab), 100, 2 * i), want[i]);
}

/* ---- a synthetic memory ------------------------------------------------- */

#define FAKE_BASE 0x7f0000100000ull

struct fake {
	uint8_t buf[1 << 16];
	size_t used;
};

#include "fakemem.h"

#define STR_TYPE 0x5555000010ull
#define BYTES_TYPE 0x5555000020ull
#define CODE_TYPE 0x5555000030ull

static const struct python_types types = {CODE_TYPE, STR_TYPE, BYTES_TYPE};

/* A str of n code points of kind 1, 2 or 4, as CPython lays it out:
 * compact (characters after the struct) or legacy (behind data.any). */
static uint64_t fake_str(struct fake *f, const struct python_offsets *off, const uint32_t *cp,
			 size_t n, unsigned kind, bool compact)
{
	bool ascii = kind == 1;
	size_t head;
	uint64_t a, data;
	uint32_t state;

	for (size_t i = 0; i < n; i++)
		ascii &= cp[i] < 128;
	if (compact) {
		head = ascii ? off->str_ascii_size : off->str_compact_size;
		a = fake_alloc(f, head + n * kind + kind);
		data = a + head;
	} else {
		a = fake_alloc(f, off->str_compact_size + 8u);
		data = fake_alloc(f, n * kind + kind);
		put64(f, a + off->str_compact_size, data);
	}
	put64(f, a + off->ob_type, STR_TYPE);
	put64(f, a + off->str_length, n);
	state = 1u | kind << off->str_kind_shift | (uint32_t)compact << off->str_compact_bit |
		(uint32_t)ascii << off->str_ascii_bit;
	if (off->str_ready_bit != 0xff)
		state |= 1u << off->str_ready_bit;
	put32(f, a + off->str_state, state);
	for (size_t i = 0; i < n; i++)
		put(f, data + i * kind, &cp[i], kind);	/* little-endian */
	return a;
}

static uint64_t fake_ascii(struct fake *f, const struct python_offsets *off, const char *s)
{
	uint32_t cp[256];
	size_t n = strlen(s);

	assert_true(n < N(cp));
	for (size_t i = 0; i < n; i++)
		cp[i] = (uint8_t)s[i];
	return fake_str(f, off, cp, n, 1, true);
}

static uint64_t fake_bytes(struct fake *f, const struct python_offsets *off, const uint8_t *b,
			   size_t n)
{
	uint64_t a = fake_alloc(f, off->bytes_sval + n + 1);

	put64(f, a + off->ob_type, BYTES_TYPE);
	put64(f, a + off->ob_size, n);
	put(f, a + off->bytes_sval, b, n);
	return a;
}

static const uint32_t versions[] = {0x030b02f0, 0x030c01f0, 0x030d00f0};

/* ---- strings and bytes -------------------------------------------------- */

static void test_strings(void **state)
{
	static const uint32_t latin[] = {'c', 'a', 'f', 0xe9};		/* café */
	static const uint32_t ucs2[] = {0x95a2, 0x6570};		/* 関数 */
	static const uint32_t ucs4[] = {0x10400, 'x', 0x1f600};	/* 𐐀x😀 */
	static const uint32_t odd[] = {'a', 0xd800, 0, 'b'};		/* a surrogate, a NUL */
	struct fake *f = calloc(1, sizeof(*f));
	struct python_mem mem = {fake_read, f};

	(void)state;
	assert_non_null(f);
	for (size_t v = 0; v < N(versions); v++) {
		const struct python_offsets *off = python_offsets_for(versions[v]);
		char *s = NULL;
		uint64_t a;

		assert_non_null(off);
		f->used = 0;
		assert_int_equal(python_read_str(off, &mem, &types, fake_ascii(f, off, "Shape.area"),
						 &s), 0);
		assert_string_equal(s, "Shape.area");
		free(s);
		for (int compact = 1; compact >= 0; compact--) {
			assert_int_equal(python_read_str(off, &mem, &types,
							 fake_str(f, off, latin, 4, 1, compact), &s), 0);
			assert_string_equal(s, "caf\xc3\xa9");
			free(s);
			assert_int_equal(python_read_str(off, &mem, &types,
							 fake_str(f, off, ucs2, 2, 2, compact), &s), 0);
			assert_string_equal(s, "\xe9\x96\xa2\xe6\x95\xb0");
			free(s);
			assert_int_equal(python_read_str(off, &mem, &types,
							 fake_str(f, off, ucs4, 3, 4, compact), &s), 0);
			assert_string_equal(s, "\xf0\x90\x90\x80x\xf0\x9f\x98\x80");
			free(s);
		}
		assert_int_equal(python_read_str(off, &mem, &types, fake_str(f, off, odd, 4, 2, true),
						 &s), 0);
		assert_string_equal(s, "a\xef\xbf\xbd\xef\xbf\xbd" "b");
		free(s);
		assert_int_equal(python_read_str(off, &mem, &types, fake_ascii(f, off, ""), &s), 0);
		assert_string_equal(s, "");
		free(s);

		/* not a str: its type, its kind, its length, its place */
		a = fake_ascii(f, off, "abc");
		put64(f, a + off->ob_type, BYTES_TYPE);
		assert_int_equal(python_read_str(off, &mem, &types, a, &s), -EINVAL);
		assert_null(s);
		assert_int_equal(python_read_str(off, &mem, NULL, a, &s), 0);	/* unchecked */
		free(s);
		a = fake_ascii(f, off, "abc");
		put32(f, a + off->str_state, 3u << off->str_kind_shift | 1u << off->str_compact_bit);
		assert_int_equal(python_read_str(off, &mem, &types, a, &s), -EINVAL);
		put32(f, a + off->str_state, 2u << off->str_kind_shift | 1u << off->str_compact_bit |
						     1u << off->str_ascii_bit | 0x80);
		assert_int_equal(python_read_str(off, &mem, &types, a, &s), -EINVAL);
		a = fake_ascii(f, off, "abc");
		put64(f, a + off->str_length, PYTHON_STR_MAX + 1);
		assert_int_equal(python_read_str(off, &mem, &types, a, &s), -E2BIG);
		put64(f, a + off->str_length, UINT64_MAX);
		assert_int_equal(python_read_str(off, &mem, &types, a, &s), -EINVAL);
		a = FAKE_BASE + sizeof(f->buf) - off->str_ascii_size - 8;
		put64(f, a + off->ob_type, STR_TYPE);
		put32(f, a + off->str_state, 1u << off->str_kind_shift | 1u << off->str_compact_bit |
						     1u << off->str_ascii_bit | 0x80);
		put64(f, a + off->str_length, 100);
		assert_int_equal(python_read_str(off, &mem, &types, a, &s), -EFAULT);
		assert_int_equal(python_read_str(off, &mem, &types, 0, &s), -EFAULT);
		assert_int_equal(python_read_str(off, &mem, &types, 16, &s), -EFAULT);
		assert_null(s);
		memset(f->buf + sizeof(f->buf) - 64, 0, 64);
	}
	free(f);
}

static void test_bytes(void **state)
{
	static const uint8_t b[] = {0x80, 0x00, 0xd8, 0x08};
	const struct python_offsets *off = python_offsets_for(0x030b0000);
	struct fake *f = calloc(1, sizeof(*f));
	struct python_mem mem = {fake_read, f};
	uint8_t *out;
	size_t len;
	uint64_t a;

	(void)state;
	assert_non_null(f);
	a = fake_bytes(f, off, b, sizeof(b));
	assert_int_equal(python_read_bytes(off, &mem, &types, a, &out, &len), 0);
	assert_int_equal(len, 4);
	assert_memory_equal(out, b, 4);
	free(out);
	assert_int_equal(python_read_bytes(off, &mem, &types, fake_bytes(f, off, b, 0), &out, &len),
			 0);
	assert_null(out);
	assert_int_equal(len, 0);
	put64(f, a + off->ob_size, (uint64_t)-1);
	assert_int_equal(python_read_bytes(off, &mem, &types, a, &out, &len), -EINVAL);
	put64(f, a + off->ob_size, PYTHON_BYTES_MAX + 1ull);
	assert_int_equal(python_read_bytes(off, &mem, &types, a, &out, &len), -E2BIG);
	put64(f, a + off->ob_size, 70000);
	assert_int_equal(python_read_bytes(off, &mem, &types, a, &out, &len), -EFAULT);
	put64(f, a + off->ob_type, STR_TYPE);
	assert_int_equal(python_read_bytes(off, &mem, &types, a, &out, &len), -EINVAL);
	free(f);
}

/* ---- the walker and the symbolizer -------------------------------------- */

struct fake_frame {
	uint64_t code;
	int instr;
	uint8_t owner;		/* 0 thread, 1 generator, 3 C stack */
	bool entry;		/* 3.11's is_entry */
};

/* A thread state whose chain is frames[0] (innermost) ... frames[n-1]. */
static uint64_t fake_thread(struct fake *f, const struct python_offsets *off,
			    const struct fake_frame *fr, size_t n, uint64_t *addrs)
{
	uint64_t ts = fake_alloc(f, 0x200), prev = 0;

	for (size_t i = n; i-- > 0;) {
		uint64_t a = fake_alloc(f, 80);

		put64(f, a + off->fr_code, fr[i].code);
		put64(f, a + off->fr_previous, prev);
		put64(f, a + off->fr_instr, fr[i].code + off->co_code_adaptive + (int64_t)fr[i].instr);
		put8(f, a + off->fr_owner, fr[i].owner);
		if (off->fr_is_entry != PYOFF_NONE)
			put8(f, a + off->fr_is_entry, fr[i].entry);
		if (addrs)
			addrs[i] = a;
		prev = a;
	}
	if (off->flags & PYOFF_CFRAME) {
		uint64_t cf = fake_alloc(f, 24);

		put64(f, ts + off->ts_frame, cf);
		put64(f, cf + off->cf_current_frame, prev);
	} else {
		put64(f, ts + off->ts_frame, prev);
	}
	return ts;
}

/* A code object: names, first line, _co_firsttraceable, a line table. */
static uint64_t fake_code(struct fake *f, const struct python_offsets *off, const char *qualname,
			  const char *file, const struct lt_fixture *lt, int firsttraceable)
{
	uint64_t c = fake_alloc(f, off->co_code_adaptive + (size_t)lt->code_len);

	put64(f, c + off->ob_type, CODE_TYPE);
	put64(f, c + off->co_qualname, fake_ascii(f, off, qualname));
	put64(f, c + off->co_filename, fake_ascii(f, off, file));
	put64(f, c + off->co_linetable, fake_bytes(f, off, lt->tab, (size_t)lt->tab_len));
	put32(f, c + off->co_firstlineno, (uint32_t)lt->firstlineno);
	put32(f, c + off->co_firsttraceable, (uint32_t)firsttraceable);
	return c;
}

/* Each version: a chain of a module, a function, a generator, a function
 * entered from C, and an incomplete frame; 3.12 and 3.13 mark entries with
 * C-stack shims, 3.11 with is_entry. The walk gives the frames innermost
 * first with their instruction offsets and flags, the symbolizer their
 * names and lines, and hides the incomplete one. */
static void test_walk_and_symbolize(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct python_mem mem = {fake_read, f};

	(void)state;
	assert_non_null(f);
	for (size_t v = 0; v < N(versions); v++) {
		const struct python_offsets *off = python_offsets_for(versions[v]);
		const struct lt_fixture *lt = &lt_fixtures_311[1];	/* plain:f */
		bool shims = !(off->flags & PYOFF_IS_ENTRY);
		uint64_t mod, fn, gen, cb, fresh, ts;
		struct fake_frame fr[8];
		struct python_frame out[8];
		struct python_walk w;
		struct python_sym *sym;
		struct python_frame_info info;
		size_t n = 0;

		memset(f, 0, sizeof(*f));
		mod = fake_code(f, off, "<module>", "/srv/app.py", lt, 1);
		fn = fake_code(f, off, "Server.handle", "/srv/app.py", lt, 1);
		gen = fake_code(f, off, "rows", "/srv/db.py", lt, 3);
		cb = fake_code(f, off, "keyfunc", "/srv/db.py", lt, 1);
		fresh = fake_code(f, off, "make_cells", "/srv/db.py", lt, 4);
		/* innermost first */
		fr[n++] = (struct fake_frame){fresh, 2, 0, false};	/* before RESUME */
		fr[n++] = (struct fake_frame){cb, 18, 0, !shims};
		if (shims)
			fr[n++] = (struct fake_frame){0, 0, 3, false};
		fr[n++] = (struct fake_frame){gen, 4, 1, false};	/* 4 < 2 * 3: a gen's */
		fr[n++] = (struct fake_frame){fn, 12, 0, false};
		fr[n++] = (struct fake_frame){mod, 66, 0, !shims};
		if (shims)
			fr[n++] = (struct fake_frame){0, 0, 3, false};
		ts = fake_thread(f, off, fr, n, NULL);

		assert_int_equal(tw_walk(off, ts, &w, out, 8, &mem), PYWALK_END);
		assert_int_equal(w.n, 5);
		assert_true(out[0].code == fresh && out[0].instr == 2 && out[0].flags == 0);
		assert_true(out[1].code == cb && out[1].instr == 18 && out[1].flags == PYFRAME_ENTRY);
		assert_true(out[2].code == gen && out[2].instr == 4 && out[2].flags == PYFRAME_GEN);
		assert_true(out[3].code == fn && out[3].instr == 12 && out[3].flags == 0);
		assert_true(out[4].code == mod && out[4].instr == 66 &&
			    out[4].flags == PYFRAME_ENTRY);

		sym = python_sym_new(off, &mem, &types);
		assert_non_null(sym);
		assert_int_equal(python_sym_frame(sym, &out[0], true, &info), 0);
		assert_true(info.hidden);	/* 2 < 2 * 4 */
		assert_string_equal(info.qualname, "make_cells");
		assert_int_equal(python_sym_frame(sym, &out[1], true, &info), 0);
		assert_false(info.hidden);
		assert_string_equal(info.qualname, "keyfunc");
		assert_string_equal(info.filename, "/srv/db.py");
		assert_int_equal(info.line, expected_line(lt, 18));
		assert_int_equal(python_sym_frame(sym, &out[2], true, &info), 0);
		assert_false(info.hidden);	/* a generator's frame is complete */
		assert_int_equal(python_sym_frame(sym, &out[3], false, &info), 0);
		assert_string_equal(info.qualname, "Server.handle");
		assert_int_equal(info.line, expected_line(lt, 12));
		assert_int_equal(python_sym_frame(sym, &out[4], false, &info), 0);
		assert_string_equal(info.qualname, "<module>");
		assert_int_equal(info.line, expected_line(lt, 66));

		/* room for 2: cut, and the shim after a full buffer still marks */
		assert_int_equal(tw_walk(off, ts, &w, out, 2, &mem), PYWALK_FULL);
		assert_int_equal(w.n, 2);
		assert_int_equal(out[1].flags, PYFRAME_ENTRY);

		/* the code object freed, another made at its address: verify
		 * sees it, the cache alone does not */
		put64(f, fn + off->co_qualname, fake_ascii(f, off, "Other.thing"));
		assert_int_equal(python_sym_frame(sym, &out[3], false, &info), 0);
		assert_string_equal(info.qualname, "Server.handle");
		assert_int_equal(python_sym_frame(sym, &out[3], true, &info), 0);
		assert_string_equal(info.qualname, "Other.thing");
		/* not a code object */
		put64(f, cb + off->ob_type, STR_TYPE);
		assert_int_equal(python_sym_frame(sym, &out[1], true, &info), -EINVAL);
		assert_null(info.qualname);
		python_sym_free(sym);
	}
	free(f);
}

/* Loops, faults, an empty thread, a zero thread state. */
static void test_walk_damage(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct python_mem mem = {fake_read, f};

	(void)state;
	assert_non_null(f);
	for (size_t v = 0; v < N(versions); v++) {
		const struct python_offsets *off = python_offsets_for(versions[v]);
		struct fake_frame fr[3] = {{0x1000, 0, 0, false}, {0x2000, 2, 0, false},
					   {0x3000, 4, 3, false}};
		struct python_frame out[PYTHON_FRAMES_MAX + 8];
		uint64_t addrs[3], ts;
		struct python_walk w;

		memset(f, 0, sizeof(*f));
		ts = fake_thread(f, off, fr, 3, addrs);
		/* a loop of frames: ends when out is full */
		put64(f, addrs[1] + off->fr_previous, addrs[0]);
		assert_int_equal(tw_walk(off, ts, &w, out, 10, &mem), PYWALK_FULL);
		assert_int_equal(w.n, 10);
		/* a loop of shims only: the steps run out */
		if (off->owner_cstack != 0xff) {
			put8(f, addrs[0] + off->fr_owner, off->owner_cstack);
			put8(f, addrs[1] + off->fr_owner, off->owner_cstack);
			assert_int_equal(tw_walk(off, ts, &w, out, 10, &mem), PYWALK_FULL);
			assert_int_equal(w.n, 0);
		}
		/* max above the bound: the bound */
		put8(f, addrs[0] + off->fr_owner, 0);
		put8(f, addrs[1] + off->fr_owner, 0);
		assert_int_equal(tw_walk(off, ts, &w, out, PYTHON_FRAMES_MAX + 8, &mem), PYWALK_FULL);
		assert_int_equal(w.n, PYTHON_FRAMES_MAX);
		/* an unreadable previous: the frames before it */
		put64(f, addrs[1] + off->fr_previous, 0x10);
		assert_int_equal(tw_walk(off, ts, &w, out, 10, &mem), PYWALK_FAULT);
		assert_int_equal(w.n, 2);
		/* an unreadable thread state, a NULL one, no frame */
		assert_int_equal(tw_walk(off, 0x20, &w, out, 10, &mem), PYWALK_FAULT);
		assert_int_equal(w.n, 0);
		assert_int_equal(tw_walk(off, 0, &w, out, 10, &mem), PYWALK_END);
		assert_int_equal(w.n, 0);
		ts = fake_thread(f, off, fr, 0, NULL);
		assert_int_equal(tw_walk(off, ts, &w, out, 10, &mem), PYWALK_END);
		assert_int_equal(w.n, 0);
	}
	free(f);
}

/* The thread-specific key, both levels of glibc's table; the thread list. */
static void test_tss_and_threads(void **state)
{
	const struct python_glibc *g = python_glibc_offsets();
	const struct python_offsets *off = python_offsets_for(0x030b0000);
	struct fake *f = calloc(1, sizeof(*f));
	struct python_mem mem = {fake_read, f};
	uint64_t self, blk, ts, rt, interp, t1, t2;
	uint32_t key;

	(void)state;
	assert_non_null(f);
	self = fake_alloc(f, 0x800);
	put64(f, self + g->specific_1stblock + 5 * 16 + 8, 0xabc0);
	assert_int_equal(tw_tss(g, self, 5, &ts, &mem), 0);
	assert_int_equal(ts, 0xabc0);
	blk = fake_alloc(f, 32 * 16);
	put64(f, self + g->specific + 2 * 8, blk);
	put64(f, blk + 7 * 16 + 8, 0xdef0);
	assert_int_equal(tw_tss(g, self, 2 * 32 + 7, &ts, &mem), 0);
	assert_int_equal(ts, 0xdef0);
	assert_int_equal(tw_tss(g, self, 3 * 32, &ts, &mem), 0);	/* no block: none */
	assert_int_equal(ts, 0);
	assert_int_equal(tw_tss(g, self, 1024, &ts, &mem), -1);
	assert_int_equal(tw_tss(g, 0x40, 5, &ts, &mem), -1);

	rt = fake_alloc(f, 0x800);
	interp = fake_alloc(f, 0x100);
	t1 = fake_alloc(f, 0x200);
	t2 = fake_alloc(f, 0x200);
	put64(f, rt + off->rt_interp_head, interp);
	put64(f, interp + off->is_threads_head, t1);
	put64(f, t1 + off->ts_next, t2);
	put64(f, t1 + off->ts_native_thread_id, 4001);
	put64(f, t2 + off->ts_native_thread_id, 4002);
	assert_int_equal(python_find_tstate(off, &mem, rt, 4002, &ts), 0);
	assert_int_equal(ts, t2);
	assert_int_equal(python_find_tstate(off, &mem, rt, 4003, &ts), -ESRCH);
	put64(f, t2 + off->ts_next, 0x30);
	assert_int_equal(python_find_tstate(off, &mem, rt, 4003, &ts), -EFAULT);
	put64(f, t2 + off->ts_next, t1);	/* a loop: bounded */
	assert_int_equal(python_find_tstate(off, &mem, rt, 4003, &ts), -ESRCH);

	assert_int_equal(python_tss_key(off, &mem, rt, &key), -ENOENT);
	put32(f, rt + off->rt_tss_init, 1);
	put32(f, rt + off->rt_tss_key, 7);
	assert_int_equal(python_tss_key(off, &mem, rt, &key), 0);
	assert_int_equal(key, 7);
	free(f);
}

/* ---- the offsets table --------------------------------------------------- */

static void test_table(void **state)
{
	char buf[32];

	(void)state;
	assert_non_null(python_offsets_for(0x030b02f0));
	assert_ptr_equal(python_offsets_for(0x030b07f0), python_offsets_for(0x030b0000));
	assert_non_null(python_offsets_for(0x030c01f0));
	assert_non_null(python_offsets_for(0x030d00f0));
	assert_non_null(python_offsets_for(0x030a0df0));
	assert_non_null(python_offsets_for(0x03090000));
	assert_non_null(python_offsets_for(0x030812f0));
	assert_null(python_offsets_for(0x030710f0));
	assert_non_null(python_offsets_for(0x030e00a1));
	assert_non_null(python_offsets_for(0x030f00a1));
	assert_null(python_offsets_for(0x031000a1));
	assert_null(python_offsets_for(0x020712f0));
	for (size_t v = 0; v < N(versions); v++) {
		const struct python_offsets *o = python_offsets_for(versions[v]);

		/* the walker's one read of a frame covers its fields */
		assert_true(o->fr_code <= PYTHON_FRAME_HDR - 8 && o->fr_previous <= PYTHON_FRAME_HDR - 8 &&
			    o->fr_instr <= PYTHON_FRAME_HDR - 8 && o->fr_owner < PYTHON_FRAME_HDR);
		assert_true(o->fr_is_entry == PYOFF_NONE || o->fr_is_entry < PYTHON_FRAME_HDR);
		assert_true(!(o->flags & PYOFF_IS_ENTRY) == (o->owner_cstack != 0xff));
		assert_true(o->co_code_adaptive <= 256);
	}
	{
		/* 3.14's entry: walked only with the debug offsets over it,
		 * which give what it leaves PYOFF_NONE */
		const struct python_offsets *o = python_offsets_for(0x030e0000);

		assert_true(o->fr_code <= PYTHON_FRAME_HDR - 8 && o->fr_previous <= PYTHON_FRAME_HDR - 8 &&
			    o->fr_instr <= PYTHON_FRAME_HDR - 8 && o->fr_owner < PYTHON_FRAME_HDR);
		assert_true((o->flags & PYOFF_STACKREF) && !(o->flags & PYOFF_IS_ENTRY));
		assert_int_equal(o->rt_tss_key, PYOFF_NONE);
		assert_int_equal(o->is_threads_head, PYOFF_NONE);
	}
	for (uint32_t v = 0x03080000; v <= 0x030a0000; v += 0x10000) {
		/* a PyFrameObject is read a field at a time (walk.h) */
		const struct python_offsets *o = python_offsets_for(v);

		assert_true(o->flags & PYOFF_FRAMEOBJ);
		assert_true(!(o->fr_code & 7) && !(o->fr_previous & 7) && !(o->fr_instr & 7));
		assert_int_equal(o->fr_owner, PYOFF_NONE);
		assert_int_equal(o->co_qualname, o->co_name);
		assert_int_equal(o->pyframe_frame, PYOFF_NONE);
	}
	python_version_str(0x030a0000, buf, sizeof(buf));
	assert_string_equal(buf, "3.10");
	python_version_str(0x030b02f0, buf, sizeof(buf));
	assert_string_equal(buf, "3.11.2");
	python_version_str(0x030c00c1, buf, sizeof(buf));
	assert_string_equal(buf, "3.12.0rc1");
	python_version_str(0x030d00a6, buf, sizeof(buf));
	assert_string_equal(buf, "3.13.0a6");
}

static char logged[1024];

static void capture_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level <= USC_LOG_WARN)
		snprintf(logged, sizeof(logged), "%s", msg);
}

/* The version CPython says of itself (sys.hexversion). */
static uint32_t hexversion(const char *python)
{
	char cmd[PATH_MAX + 64];
	unsigned v = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s' -c 'import sys; print(sys.hexversion)'", python);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%u", &v), 1);
	pclose(p);
	return v;
}

/* Debian's stripped python3.11 and every pyenv build here: a runtime with
 * the version the interpreter reports (3.8 to 3.10: its minor version, by
 * what the runtime exports); 3.7 and older refused in one line;
 * a program that is not Python has none. */
static void test_detect_files(void **state)
{
	struct python_runtime rt;
	glob_t g;
	int found = 0;

	(void)state;
	usc_set_log(capture_log, NULL);
	assert_int_equal(python_detect_file("/usr/bin/python3.11", &rt), 0);
	assert_int_equal(rt.version, hexversion("/usr/bin/python3.11"));
	assert_ptr_equal(rt.off, python_offsets_for(0x030b0000));
	assert_true(rt.runtime && rt.types.code && rt.types.unicode && rt.types.bytes);
	python_runtime_free(&rt);

	logged[0] = 0;
	assert_int_equal(python_detect_file("/bin/true", &rt), -ENOENT);
	assert_string_equal(logged, "");
	assert_int_equal(python_detect_file("/nonexistent/python", &rt), -ENOENT);

	if (pyenv_glob("*/lib/libpython3.*.so.1.0", &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++) {
			const char *lib = g.gl_pathv[i], *v = strstr(lib, "/lib/libpython");
			char exe[PATH_MAX];
			int minor = 0, r;

			assert_non_null(v);
			assert_int_equal(sscanf(v, "/lib/libpython3.%d.so", &minor), 1);
			snprintf(exe, sizeof(exe), "%.*s/bin/python3.%d", (int)(v - lib), lib, minor);
			logged[0] = 0;
			r = python_detect_file(lib, &rt);
			if (minor >= 8 && minor <= 13) {
				/* before 3.11 (no Py_Version): the minor version */
				uint32_t want = hexversion(exe);

				assert_int_equal(r, 0);
				assert_int_equal(rt.version,
						 minor >= 11 ? want : (want & 0xffff0000u));
				found++;
			} else {
				char want[64];

				assert_int_equal(r, -ENOTSUP);
				snprintf(want, sizeof(want), "is CPython 3.%d;", minor);
				if (!strstr(logged, want))
					fail_msg("%s: logged \"%s\"", lib, logged);
			}
			python_runtime_free(&rt);
		}
		globfree(&g);
	}
	usc_set_log(NULL, NULL);
	print_message("pyenv builds recognised: %d\n", found);
}

/* ---- the table against DWARF -------------------------------------------- */

static Dwarf_Die *peel(Dwarf_Die *d, Dwarf_Die *mem)
{
	Dwarf_Attribute a;

	while (dwarf_tag(d) == DW_TAG_typedef || dwarf_tag(d) == DW_TAG_const_type ||
	       dwarf_tag(d) == DW_TAG_volatile_type) {
		if (!dwarf_attr(d, DW_AT_type, &a) || !dwarf_formref_die(&a, mem))
			return NULL;
		d = mem;
	}
	return d;
}

/* A type defined at the top of a unit: struct TAG, enum TAG, or a typedef
 * (peeled to what it names). */
static bool dw_type(Dwarf *dw, const char *name, int tag, Dwarf_Die *out)
{
	Dwarf_Off off = 0, next;
	size_t hsize;

	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu, d, mem;

		if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_child(&cu, &d) == 0) {
			do {
				const char *n = dwarf_diename(&d);
				Dwarf_Die *t;

				if (!n || strcmp(n, name) || dwarf_hasattr(&d, DW_AT_declaration))
					continue;
				if (dwarf_tag(&d) == tag) {
					*out = d;
					return true;
				}
				if (dwarf_tag(&d) == DW_TAG_typedef && (t = peel(&d, &mem)) &&
				    dwarf_tag(t) == tag && dwarf_haschildren(t)) {
					*out = *t;
					return true;
				}
			} while (dwarf_siblingof(&d, &d) == 0);
		}
		off = next;
	}
	return false;
}

/* The member at path ("gilstate.autoTSSkey._key") of struct type name: its
 * byte offset, and its bit offset for a bit field; -1 if absent. */
static long dw_member(Dwarf *dw, const char *type, const char *path, long *bit)
{
	Dwarf_Die t, mem, *cur = &t;
	char buf[128], *save = NULL, *comp;
	long off = 0;

	if (!dw_type(dw, type, DW_TAG_structure_type, &t))
		return -1;
	snprintf(buf, sizeof(buf), "%s", path);
	for (comp = strtok_r(buf, ".", &save); comp; comp = strtok_r(NULL, ".", &save)) {
		Dwarf_Die m;
		Dwarf_Attribute a;
		Dwarf_Word w = 0;
		bool found = false;

		if (dwarf_child(cur, &m) != 0)
			return -1;
		do {
			const char *n = dwarf_diename(&m);

			if (dwarf_tag(&m) == DW_TAG_member && n && !strcmp(n, comp)) {
				found = true;
				break;
			}
		} while (dwarf_siblingof(&m, &m) == 0);
		if (!found)
			return -1;
		if (dwarf_attr(&m, DW_AT_data_member_location, &a) && dwarf_formudata(&a, &w) == 0)
			off += (long)w;
		if (bit && dwarf_attr(&m, DW_AT_data_bit_offset, &a) &&
		    dwarf_formudata(&a, &w) == 0)
			*bit = (long)w;
		if (!dwarf_attr(&m, DW_AT_type, &a) || !dwarf_formref_die(&a, &mem) ||
		    !(cur = peel(&mem, &mem)))
			return -1;
		t = *cur;
		cur = &t;
	}
	return off;
}

static long dw_sizeof(Dwarf *dw, const char *type)
{
	Dwarf_Die t;

	return dw_type(dw, type, DW_TAG_structure_type, &t) ? dwarf_bytesize(&t) : -1;
}

static long dw_enum(Dwarf *dw, const char *type, const char *name)
{
	Dwarf_Die t, e;
	Dwarf_Attribute a;
	Dwarf_Sword v;

	if (!dw_type(dw, type, DW_TAG_enumeration_type, &t) || dwarf_child(&t, &e) != 0)
		return -1;
	do {
		const char *n = dwarf_diename(&e);

		if (n && !strcmp(n, name) && dwarf_attr(&e, DW_AT_const_value, &a) &&
		    dwarf_formsdata(&a, &v) == 0)
			return (long)v;
	} while (dwarf_siblingof(&e, &e) == 0);
	return -1;
}

enum dwk { DW_OFF, DW_SIZE, DW_BIT, DW_ENUM };

/* Each value of the table and where the DWARF has it; minor: 0 for every
 * version, else only that 3.minor. */
static const struct dw_check {
	int lo, hi;		/* the minor versions it is checked in */
	enum dwk kind;
	const char *type, *path;
	size_t field;		/* offsetof(struct python_offsets, ...) */
	int width;		/* 2: uint16_t, 1: uint8_t */
} dw_checks[] = {
#define C(lo, hi, k, t, p, f) {lo, hi, k, t, p, offsetof(struct python_offsets, f), \
			  (int)sizeof(((struct python_offsets *)0)->f)}
	C(8, 99, DW_OFF, "pyruntimestate", "interpreters.head", rt_interp_head),
	C(8, 11, DW_OFF, "pyruntimestate", "gilstate.autoTSSkey._key", rt_tss_key),
	C(8, 11, DW_OFF, "pyruntimestate", "gilstate.autoTSSkey._is_initialized", rt_tss_init),
	C(8, 11, DW_OFF, "pyruntimestate", "gilstate.tstate_current", rt_tstate_current),
	C(12, 12, DW_OFF, "pyruntimestate", "autoTSSkey._key", rt_tss_key),
	C(12, 12, DW_OFF, "pyruntimestate", "autoTSSkey._is_initialized", rt_tss_init),
	C(13, 13, DW_OFF, "pyruntimestate", "autoTSSkey._key", rt_tss_key),
	C(13, 13, DW_OFF, "pyruntimestate", "autoTSSkey._is_initialized", rt_tss_init),
	C(8, 99, DW_OFF, "_is", "next", is_next),
	C(11, 99, DW_OFF, "_is", "threads.head", is_threads_head),
	C(8, 99, DW_OFF, "_ts", "next", ts_next),
	C(8, 99, DW_OFF, "_ts", "thread_id", ts_thread_id),
	C(11, 99, DW_OFF, "_ts", "native_thread_id", ts_native_thread_id),
	C(11, 11, DW_OFF, "_ts", "cframe", ts_frame),
	C(12, 12, DW_OFF, "_ts", "cframe", ts_frame),
	C(13, 13, DW_OFF, "_ts", "current_frame", ts_frame),
	C(11, 11, DW_OFF, "_PyCFrame", "current_frame", cf_current_frame),
	C(12, 12, DW_OFF, "_PyCFrame", "current_frame", cf_current_frame),
	C(11, 11, DW_OFF, "_PyInterpreterFrame", "f_code", fr_code),
	C(12, 12, DW_OFF, "_PyInterpreterFrame", "f_code", fr_code),
	C(13, 13, DW_OFF, "_PyInterpreterFrame", "f_executable", fr_code),
	C(11, 99, DW_OFF, "_PyInterpreterFrame", "previous", fr_previous),
	C(11, 11, DW_OFF, "_PyInterpreterFrame", "prev_instr", fr_instr),
	C(12, 12, DW_OFF, "_PyInterpreterFrame", "prev_instr", fr_instr),
	C(13, 13, DW_OFF, "_PyInterpreterFrame", "instr_ptr", fr_instr),
	C(11, 11, DW_OFF, "_PyInterpreterFrame", "is_entry", fr_is_entry),
	C(11, 99, DW_OFF, "_PyInterpreterFrame", "owner", fr_owner),
	C(11, 99, DW_ENUM, "_frameowner", "FRAME_OWNED_BY_GENERATOR", owner_generator),
	C(12, 12, DW_ENUM, "_frameowner", "FRAME_OWNED_BY_CSTACK", owner_cstack),
	C(13, 13, DW_ENUM, "_frameowner", "FRAME_OWNED_BY_CSTACK", owner_cstack),
	C(8, 99, DW_OFF, "PyCodeObject", "co_firstlineno", co_firstlineno),
	C(8, 99, DW_OFF, "PyCodeObject", "co_filename", co_filename),
	C(8, 99, DW_OFF, "PyCodeObject", "co_name", co_name),
	C(11, 99, DW_OFF, "PyCodeObject", "co_qualname", co_qualname),
	C(11, 99, DW_OFF, "PyCodeObject", "co_linetable", co_linetable),
	C(11, 99, DW_OFF, "PyCodeObject", "_co_firsttraceable", co_firsttraceable),
	C(11, 99, DW_OFF, "PyCodeObject", "co_code_adaptive", co_code_adaptive),
	C(8, 99, DW_OFF, "_object", "ob_type", ob_type),
	C(8, 99, DW_OFF, "PyVarObject", "ob_size", ob_size),
	C(8, 99, DW_OFF, "PyBytesObject", "ob_sval", bytes_sval),
	C(8, 99, DW_OFF, "PyASCIIObject", "length", str_length),
	C(8, 99, DW_OFF, "PyASCIIObject", "state", str_state),
	C(8, 99, DW_SIZE, "PyASCIIObject", NULL, str_ascii_size),
	C(8, 99, DW_SIZE, "PyCompactUnicodeObject", NULL, str_compact_size),
	C(8, 99, DW_BIT, "PyASCIIObject", "state.kind", str_kind_shift),
	C(8, 99, DW_BIT, "PyASCIIObject", "state.compact", str_compact_bit),
	C(8, 99, DW_BIT, "PyASCIIObject", "state.ascii", str_ascii_bit),
	C(8, 11, DW_BIT, "PyASCIIObject", "state.ready", str_ready_bit),
	/* py: probes */
	C(8, 99, DW_OFF, "pyruntimestate", "initialized", rt_initialized),
	C(8, 99, DW_OFF, "_ts", "c_profilefunc", ts_c_profilefunc),
	C(8, 99, DW_OFF, "_ts", "c_profileobj", ts_c_profileobj),
	C(11, 99, DW_OFF, "_frame", "f_frame", pyframe_frame),
	C(11, 99, DW_OFF, "_PyInterpreterFrame", "f_globals", fr_globals),
	C(11, 99, DW_OFF, "_PyInterpreterFrame", "localsplus", fr_localsplus),
	C(8, 99, DW_OFF, "PyCodeObject", "co_flags", co_flags),
	C(8, 99, DW_OFF, "PyCodeObject", "co_argcount", co_argcount),
	C(8, 99, DW_OFF, "PyCodeObject", "co_kwonlyargcount", co_kwonlyargcount),
	C(11, 99, DW_OFF, "PyCodeObject", "co_nlocalsplus", co_nlocalsplus),
	C(11, 99, DW_OFF, "PyCodeObject", "co_localsplusnames", co_localsplusnames),
	C(8, 99, DW_OFF, "PyTupleObject", "ob_item", tuple_item),
	C(8, 99, DW_OFF, "_typeobject", "tp_name", type_name),
	C(8, 11, DW_OFF, "_longobject", "ob_digit", long_digit),
	C(8, 11, DW_OFF, "_longobject", "ob_base.ob_size", long_size),
	C(12, 12, DW_OFF, "_longobject", "long_value.ob_digit", long_digit),
	C(12, 12, DW_OFF, "_longobject", "long_value.lv_tag", long_size),
	C(13, 13, DW_OFF, "_longobject", "long_value.ob_digit", long_digit),
	C(13, 13, DW_OFF, "_longobject", "long_value.lv_tag", long_size),
	C(8, 99, DW_OFF, "PyDictObject", "ma_keys", dict_keys),
	C(8, 99, DW_OFF, "PyDictObject", "ma_values", dict_values),
	C(11, 99, DW_OFF, "_dictkeysobject", "dk_log2_size", dk_log2_size),
	C(11, 99, DW_OFF, "_dictkeysobject", "dk_log2_index_bytes", dk_log2_index_bytes),
	C(11, 99, DW_OFF, "_dictkeysobject", "dk_kind", dk_kind),
	C(8, 99, DW_OFF, "_dictkeysobject", "dk_nentries", dk_nentries),
	C(8, 99, DW_OFF, "_dictkeysobject", "dk_indices", dk_indices),
	C(8, 99, DW_SIZE, "PyDictKeyEntry", NULL, dk_entry),
	C(11, 99, DW_SIZE, "PyDictUnicodeEntry", NULL, dk_str_entry),
	/* 3.8 to 3.10: PyFrameObject and the rest of the old layout */
	C(8, 10, DW_OFF, "_is", "tstate_head", is_threads_head),
	C(8, 8, DW_OFF, "_is", "eval_frame", is_eval_frame),
	C(8, 10, DW_OFF, "_ts", "frame", ts_frame),
	C(8, 11, DW_OFF, "_ts", "tracing", ts_tracing),
	C(8, 8, DW_OFF, "_ts", "use_tracing", ts_use_tracing),
	C(8, 10, DW_OFF, "_frame", "f_back", fr_previous),
	C(8, 10, DW_OFF, "_frame", "f_code", fr_code),
	C(8, 10, DW_OFF, "_frame", "f_lasti", fr_instr),
	C(8, 10, DW_OFF, "_frame", "f_globals", fr_globals),
	C(8, 10, DW_OFF, "_frame", "f_localsplus", fr_localsplus),
	C(8, 10, DW_OFF, "PyCodeObject", "co_name", co_qualname),
	C(8, 9, DW_OFF, "PyCodeObject", "co_lnotab", co_linetable),
	C(10, 10, DW_OFF, "PyCodeObject", "co_linetable", co_linetable),
	C(8, 10, DW_OFF, "PyCodeObject", "co_code", co_code),
	C(8, 10, DW_OFF, "PyCodeObject", "co_cellvars", co_cellvars),
	C(8, 10, DW_OFF, "PyCodeObject", "co_cell2arg", co_cell2arg),
	C(8, 10, DW_OFF, "PyCodeObject", "co_nlocals", co_nlocalsplus),
	C(8, 10, DW_OFF, "PyCodeObject", "co_varnames", co_localsplusnames),
	C(8, 10, DW_OFF, "_dictkeysobject", "dk_size", dk_log2_size),
	C(8, 10, DW_SIZE, "PyDictKeyEntry", NULL, dk_str_entry),
#undef C
};

/* Every value of the table, against the DWARF of each CPython build here
 * that has it (pyenv's, with -g). Debian's stripped python3.11 has none:
 * its 3.11 entry is the same table, and test_pystack runs it. */
static void test_table_vs_dwarf(void **state)
{
	glob_t g;
	int libs = 0;

	(void)state;
	if (pyenv_glob("3.*/lib/libpython3.*.so.1.0", &g)) {
		skip();
		return;
	}
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *lib = g.gl_pathv[i];
		int fd = open(lib, O_RDONLY), minor = 0, checked = 0;
		const struct python_offsets *off;
		Dwarf *dw;

		assert_true(fd >= 0);
		assert_int_equal(sscanf(strstr(lib, "/libpython"), "/libpython3.%d", &minor), 1);
		if (minor < 8) {	/* (refused) */
			close(fd);
			continue;
		}
		off = python_offsets_for(0x03000000u | (uint32_t)minor << 16);
		assert_non_null(off);
		dw = dwarf_begin(fd, DWARF_C_READ);
		if (!dw) {	/* a build without debug info */
			close(fd);
			continue;
		}
		for (size_t k = 0; k < N(dw_checks); k++) {
			const struct dw_check *c = &dw_checks[k];
			long want = -1, bit = -1;
			unsigned mine = 0;

			if (minor < c->lo || minor > c->hi)
				continue;
			switch (c->kind) {
			case DW_OFF: want = dw_member(dw, c->type, c->path, NULL); break;
			case DW_SIZE: want = dw_sizeof(dw, c->type); break;
			case DW_BIT: dw_member(dw, c->type, c->path, &bit); want = bit; break;
			case DW_ENUM: want = dw_enum(dw, c->type, c->path); break;
			}
			memcpy(&mine, (const uint8_t *)off + c->field, (size_t)c->width);
			if (want < 0 || (unsigned long)want != mine)
				fail_msg("%s: %s %s: DWARF says %ld, the table %u", lib, c->type,
					 c->path ? c->path : "(size)", want, mine);
			checked++;
		}
		print_message("%s: %d values match the DWARF\n", lib, checked);
		dwarf_end(dw);
		close(fd);
		libs++;
	}
	globfree(&g);
	if (!libs)
		skip();
}

/* _PyRuntime's first bytes in a file (its initial value). */
static bool runtime_bytes(const char *lib, uint8_t *buf, size_t len)
{
	int fd = open(lib, O_RDONLY);
	Elf *e;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Phdr ph;
	uint64_t vaddr = 0;
	size_t nph;
	bool ok = false;

	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM) {
			Elf_Data *d = elf_getdata(scn, NULL);

			for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym sym;

				if (gelf_getsym(d, (int)i, &sym) &&
				    !strcmp(elf_strptr(e, sh.sh_link, sym.st_name), "_PyRuntime"))
					vaddr = sym.st_value;
			}
		}
	if (e && vaddr && !elf_getphdrnum(e, &nph))
		for (size_t i = 0; i < nph; i++)
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    vaddr >= ph.p_vaddr && vaddr + len <= ph.p_vaddr + ph.p_filesz)
				ok = pread(fd, buf, len, (off_t)(vaddr - ph.p_vaddr + ph.p_offset)) ==
				     (ssize_t)len;
	if (e)
		elf_end(e);
	close(fd);
	return ok;
}

/* 3.13's _Py_DebugOffsets, as a 3.13 build has them, against the table;
 * then changed: a moved field is named, a free-threaded build refused, no
 * cookie is not debug offsets. */
/* The _Py_DebugOffsets of Debian unstable's python3.14 and python3.15 (a
 * root scripts/roots.sh made, when it is there): parsed, in agreement with
 * the table's entries, taken over them; a field moved, a 3.16, refused in
 * one line each. */
static void test_debug_offsets_314_315(void **state)
{
	const char *cache = getenv("USCOPE_CACHE");
	char pat[PATH_MAX];
	uint8_t real[PYTHON_DEBUGOFFS_MAX], b[PYTHON_DEBUGOFFS_MAX];
	uint64_t v316 = 0x031000a1;
	int seen = 0;
	glob_t g;

	(void)state;
	snprintf(pat, sizeof(pat), "%s/roots/sid-*/usr/bin/python3.1[45]",
		 cache && *cache ? cache : "/var/cache/uscope");
	if (glob(pat, 0, NULL, &g)) {
		skip();
		return;
	}
	usc_set_log(capture_log, NULL);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct python_debugoffs d;
		struct python_offsets own;
		const struct python_offsets *tab;
		int minor = g.gl_pathv[i][strlen(g.gl_pathv[i]) - 1] - '0' + 10;

		assert_true(runtime_bytes(g.gl_pathv[i], real, sizeof(real)));
		assert_int_equal(python_debugoffs_parse(real, sizeof(real), &d), 0);
		assert_int_equal(d.version >> 16, 0x0300 | (unsigned)minor);
		tab = python_offsets_for(d.version);
		assert_non_null(tab);
		assert_int_equal(python_debugoffs_check(&d, tab, 1), 0);
		assert_int_equal(python_debugoffs_apply(&d, tab, &own), 0);
		assert_null(python_offsets_missing(&own));
		assert_int_equal(own.ts_thread_id, minor == 15 ? 0xb0 : 0x98);
		assert_int_equal(own.rt_interp_head, minor == 15 ? 0x3a8 : 0x328);
		assert_true(own.is_threads_head != PYOFF_NONE && own.is_next != PYOFF_NONE);
		/* thread_state.thread_id moved: refused, naming it */
		memcpy(b, real, sizeof(b));
		b[8 * (minor == 15 ? 30 : 27)] += 8;
		assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
		assert_int_equal(python_debugoffs_check(&d, tab, 1), -EPROTO);
		assert_non_null(strstr(logged, "_Py_DebugOffsets.thread_state.thread_id is"));
		/* a version whose layout uscope has not read */
		memcpy(b, real, sizeof(b));
		memcpy(b + 8, &v316, 8);
		assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -ENOTSUP);
		assert_non_null(strstr(logged, "CPython 3.16.0a1: uscope does not know the layout"));
		seen++;
	}
	globfree(&g);
	usc_set_log(NULL, NULL);
	print_message("%d Debian unstable CPythons' _Py_DebugOffsets read\n", seen);
}

static void test_debug_offsets(void **state)
{
	const struct python_offsets *off = python_offsets_for(0x030d0000);
	uint8_t real[584], b[584];
	uint64_t one = 1, v312 = 0x030c01f0;
	glob_t g;

	(void)state;
	if (pyenv_glob("3.13.*/lib/libpython3.13.so.1.0", &g)) {
		skip();
		return;
	}
	assert_true(runtime_bytes(g.gl_pathv[0], real, sizeof(real)));
	globfree(&g);
	usc_set_log(capture_log, NULL);
	assert_int_equal(python_offsets_check_debug(off, real, sizeof(real)), 0);
	assert_int_equal(python_offsets_check_debug(off, real, sizeof(real) - 1), -EPROTO);
	memcpy(b, real, sizeof(b));
	b[23 * 8] ^= 8;		/* thread_state.current_frame */
	assert_int_equal(python_offsets_check_debug(off, b, sizeof(b)), -EPROTO);
	assert_non_null(strstr(logged, "_Py_DebugOffsets.thread_state.current_frame is"));
	memcpy(b, real, sizeof(b));
	memcpy(b + 16, &one, 8);
	assert_int_equal(python_offsets_check_debug(off, b, sizeof(b)), -EPROTO);
	assert_non_null(strstr(logged, "free-threaded"));
	memcpy(b, real, sizeof(b));
	memcpy(b + 8, &v312, 8);
	assert_int_equal(python_offsets_check_debug(off, b, sizeof(b)), -EPROTO);
	memcpy(b, real, sizeof(b));
	b[0] = 'X';
	assert_int_equal(python_offsets_check_debug(off, b, sizeof(b)), -EINVAL);
	usc_set_log(NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_linetable_real),
		cmocka_unit_test(test_linetable_old),
		cmocka_unit_test(test_linetable_entries),
		cmocka_unit_test(test_linetable_corrupt),
		cmocka_unit_test(test_linetable_kinds),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_walk_and_symbolize),
		cmocka_unit_test(test_walk_damage),
		cmocka_unit_test(test_tss_and_threads),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_detect_files),
		cmocka_unit_test(test_table_vs_dwarf),
		cmocka_unit_test(test_debug_offsets),
		cmocka_unit_test(test_debug_offsets_314_315),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
