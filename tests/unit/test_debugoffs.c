/* The reader of CPython's _Py_DebugOffsets (src/python/debugoffs.c): on
 * 3.13.0's real block (fixtures/python/debugoffs-313.h, made by
 * debugoffs.py from the pyenv build), on a 3.14-shaped synthetic one, and
 * on truncated and corrupt blocks; detection of files patched into other
 * versions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "python/debugoffs.h"
#include "python/detect.h"
#include "python/frame.h"
#include "python/offsets.h"
#include "python/symbolize.h"

#include "fixtures/python/debugoffs-313.h"

static char logged[512];

static void capture_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level <= USC_LOG_WARN)
		snprintf(logged, sizeof(logged), "%s", msg);
}

static void set_word(uint8_t *b, unsigned i, uint64_t v)
{
	memcpy(b + 8 * (size_t)i, &v, 8);
}

/* 3.13.0's own block: understood, equal to the table, and taken over the
 * table it gives the table's offsets exactly. */
static void test_real_313(void **state)
{
	const struct python_offsets *tab = python_offsets_for(0x030d0000);
	struct python_debugoffs d;
	struct python_offsets own;

	(void)state;
	assert_int_equal(python_debugoffs_parse(debugoffs_313, sizeof(debugoffs_313), &d), 0);
	assert_int_equal(d.version, 0x030d00f0);
	assert_int_equal(d.val[PD_TS_CURRENT_FRAME], 0x48);
	assert_int_equal(d.val[PD_FR_OWNER], 0x46);
	assert_int_equal(d.val[PD_CO_QUALNAME], 0x80);
	assert_int_equal(d.val[PD_STR_ASCII_SIZE], 40);
	assert_int_equal(python_debugoffs_check(&d, tab, 1), 0);
	assert_int_equal(python_debugoffs_apply(&d, tab, &own), 0);
	assert_memory_equal(&own, tab, sizeof(own));
	assert_null(python_offsets_missing(&own));
	assert_string_equal(python_debugoffs_name(PD_TS_CURRENT_FRAME), "thread_state.current_frame");
}

/* Every truncation is refused: no cookie or version is not debug offsets,
 * fewer bytes than the layout is a layout not understood. */
static void test_truncated(void **state)
{
	struct python_debugoffs d;

	(void)state;
	usc_set_log(capture_log, NULL);
	assert_int_equal(python_debugoffs_parse(NULL, 584, &d), -EINVAL);
	for (size_t n = 0; n < sizeof(debugoffs_313); n++) {
		uint8_t *b = malloc(n ? n : 1);	/* exact: ASan sees a read past it */

		assert_non_null(b);
		memcpy(b, debugoffs_313, n);
		assert_int_equal(python_debugoffs_parse(b, n, &d), n < 24 ? -EINVAL : -EPROTO);
		free(b);
	}
	assert_non_null(strstr(logged, "fewer than the 584 of its layout"));
	usc_set_log(NULL, NULL);
}

/* Corrupt blocks: each refused in one line that says why. */
static void test_corrupt(void **state)
{
	const struct python_offsets *tab = python_offsets_for(0x030d0000);
	struct python_debugoffs d;
	struct python_offsets own;
	uint8_t b[sizeof(debugoffs_313)];

	(void)state;
	usc_set_log(capture_log, NULL);
#define FRESH() memcpy(b, debugoffs_313, sizeof(b))
	FRESH();
	b[1] = 'X';
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EINVAL);
	FRESH();
	set_word(b, 2, 1);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "free-threaded"));
	FRESH();
	set_word(b, 1, 0x020718f0);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "not a CPython 3"));
	FRESH();
	set_word(b, 1, 0x030c01f0);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -ENOTSUP);
	assert_non_null(strstr(logged, "CPython 3.12.1: uscope does not know the layout"));
	FRESH();
	set_word(b, 1, 0x031000a1);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -ENOTSUP);
	assert_non_null(strstr(logged, "3.16.0a1"));
	/* 3.15's layout is known, and longer than 3.13's block */
	FRESH();
	set_word(b, 1, 0x030f00a1);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "fewer than the 888 of its layout"));
	/* an offset at its structure's end, a size of 0, a huge size */
	FRESH();
	set_word(b, 23, 0x130);		/* current_frame = sizeof(PyThreadState) */
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "thread_state.current_frame is 0x130, outside"));
	FRESH();
	set_word(b, 28, 0);		/* sizeof(_PyInterpreterFrame) */
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "interpreter_frame.previous"));
	FRESH();
	set_word(b, 3, 1ull << 40);	/* sizeof(_PyRuntimeState) */
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	FRESH();
	set_word(b, 34, ~0ull);		/* sizeof(PyCodeObject), offsets fit no more */
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	/* the words shifted by one (another layout under the same version) */
	FRESH();
	memmove(b + 8 * 20, b + 8 * 19, sizeof(b) - 8 * 20);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "pyobject is not {16, 8}"));
	/* a patch release that moved a field: the check names it, and taken
	 * it gives the table with that field moved */
	FRESH();
	set_word(b, 1, 0x030d05f0);
	set_word(b, 23, 0x50);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(python_debugoffs_check(&d, tab, 1), -EPROTO);
	assert_non_null(strstr(logged, "_Py_DebugOffsets.thread_state.current_frame is 0x50, "
				"uscope's table has 0x48"));
	assert_int_equal(python_debugoffs_apply(&d, tab, &own), 0);
	assert_int_equal(own.ts_frame, 0x50);
	own.ts_frame = tab->ts_frame;
	assert_memory_equal(&own, tab, sizeof(own));
	/* what the block does not carry, checked where a neighbour puts it:
	 * 3.13.0's own block agrees (above); _finalizing moved does not */
	FRESH();
	set_word(b, 4, 0x268);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(python_debugoffs_check(&d, tab, 1), -EPROTO);
	assert_non_null(strstr(logged, "which puts _PyRuntimeState.initialized at 0x260; uscope's "
				"table has 0x258"));
	/* a table entry of another version is not a base */
	assert_int_equal(python_debugoffs_apply(&d, python_offsets_for(0x030c0000), &own), -ENOTSUP);
#undef FRESH
	usc_set_log(NULL, NULL);
}

/* A 3.14-shaped block (Include/internal/pycore_debug_offsets.h at v3.14.0:
 * 95 words; the frame as 3.14 lays it out, owner at 0x4a after
 * return_offset), with the frame's owner at frame_owner. (The walk of a
 * whole synthetic 3.14 runtime: test_py314.c.) */
static void block_314(uint8_t *b, size_t len, uint64_t frame_owner)
{
	static const struct {
		uint8_t w;
		uint64_t v;
	} words[] = {
		{3, 0x46000}, {4, 0x310}, {5, 0x328},
		{6, 0x3000}, {8, 0x1c68}, {9, 0x1cb8},
		{22, 0x1000}, {24, 0x8}, {26, 0x48}, {27, 0x98}, {28, 0xa0},
		{31, 0x58}, {32, 0x8}, {33, 0x0}, {34, 0x38}, {35, 0x50}, {37, 0x40},
		{39, 0xd8}, {40, 0x70}, {41, 0x78}, {42, 0x80}, {43, 0x88}, {44, 0x44},
		{45, 0x34}, {46, 0x60}, {48, 0xd0},
		{50, 16}, {51, 8}, {52, 0x1a0}, {53, 0x18}, {56, 0x28}, {57, 0x20}, {58, 0x10},
		{66, 0x30}, {67, 0x20}, {68, 0x28}, {71, 0x20}, {72, 0x10}, {73, 0x18},
		{74, 0x28}, {75, 0x10}, {76, 0x20}, {77, 0x40}, {78, 0x20}, {79, 0x10}, {80, 0x28},
	};

	memset(b, 0, len);
	memcpy(b, "xdebugpy", 8);
	set_word(b, 1, 0x030e00f0);
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		set_word(b, words[i].w, words[i].v);
	set_word(b, 36, frame_owner);
}

/* 3.14: its block over the table's entry, which gives what the block does
 * not carry and leaves to it what the headers read here did not give. */
static void test_synthetic_314(void **state)
{
	const struct python_offsets *tab = python_offsets_for(0x030e0000);
	uint8_t b[PYTHON_DEBUGOFFS_MAX];
	struct python_debugoffs d;
	struct python_offsets own;

	(void)state;
	usc_set_log(capture_log, NULL);
	block_314(b, sizeof(b), 0x4a);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(d.val[PD_TS_CURRENT_FRAME], 0x48);
	assert_int_equal(d.val[PD_FR_OWNER], 0x4a);
	assert_int_equal(d.val[PD_TUPLE_ITEM], 0x20);
	/* fewer bytes than 3.14's layout (3.13's size) */
	assert_int_equal(python_debugoffs_parse(b, 584, &d), -EPROTO);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	/* no entry, or another version's: not a base */
	assert_int_equal(python_debugoffs_apply(&d, NULL, &own), -ENOTSUP);
	assert_int_equal(python_debugoffs_apply(&d, python_offsets_for(0x030d0000), &own),
			 -ENOTSUP);
	assert_int_equal(python_debugoffs_check(&d, tab, 1), 0);
	assert_int_equal(python_debugoffs_apply(&d, tab, &own), 0);
	assert_int_equal(own.version, 0x030e0000);
	assert_true(own.flags & PYOFF_STACKREF);
	assert_false(own.flags & (PYOFF_CFRAME | PYOFF_IS_ENTRY));
	assert_int_equal(own.is_next, 0x1c68);
	assert_int_equal(own.is_threads_head, 0x1cb8);
	own.is_next = own.is_threads_head = PYOFF_NONE;
	assert_memory_equal(&own, tab, sizeof(own));
	assert_null(python_offsets_missing(&own));
	/* the owner where the block says: the entry disagrees, and names it */
	block_314(b, sizeof(b), 0x46);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(python_debugoffs_check(&d, tab, 1), -EPROTO);
	assert_non_null(strstr(logged, "interpreter_frame.owner is 0x46, uscope's table has 0x4a"));
	usc_set_log(NULL, NULL);
}

/* A 3.13 file: the table, checked; with USCOPE_PY_DEBUG_OFFSETS=1 its own
 * debug offsets, which on 3.13.0 are the table's. */
static void test_detect_forced(void **state)
{
	struct python_runtime rt;
	glob_t g;
	const char *home = getenv("HOME");
	char pat[512];

	(void)state;
	snprintf(pat, sizeof(pat), "%s/.pyenv/versions/3.13.*/lib/libpython3.13.so.1.0",
		 home ? home : "/root");
	if (glob(pat, 0, NULL, &g) || !g.gl_pathc) {
		globfree(&g);
		skip();
		return;
	}
	unsetenv("USCOPE_PY_DEBUG_OFFSETS");
	assert_int_equal(python_detect_file(g.gl_pathv[0], &rt), 0);
	assert_ptr_equal(rt.off, python_offsets_for(0x030d0000));
	python_runtime_free(&rt);
	setenv("USCOPE_PY_DEBUG_OFFSETS", "1", 1);
	assert_int_equal(python_detect_file(g.gl_pathv[0], &rt), 0);
	assert_ptr_equal(rt.off, &rt.own);
	/* the thread list, not the key: as 3.14 */
	assert_int_equal(rt.own.rt_tss_key, PYOFF_NONE);
	assert_int_equal(rt.own.rt_tss_init, PYOFF_NONE);
	rt.own.rt_tss_key = python_offsets_for(0x030d0000)->rt_tss_key;
	rt.own.rt_tss_init = python_offsets_for(0x030d0000)->rt_tss_init;
	assert_memory_equal(rt.off, python_offsets_for(0x030d0000), sizeof(*rt.off));
	python_runtime_free(&rt);
	unsetenv("USCOPE_PY_DEBUG_OFFSETS");
	globfree(&g);
}

/* A symbol's offset in its file: 0 when not found. */
static uint64_t sym_foff(int fd, const char *name)
{
	Elf *e;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Phdr ph;
	uint64_t vaddr = 0, off = 0;
	size_t nph;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM && sh.sh_entsize) {
			Elf_Data *d = elf_getdata(scn, NULL);

			for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym sym;
				const char *n;

				if (gelf_getsym(d, (int)i, &sym) &&
				    (n = elf_strptr(e, sh.sh_link, sym.st_name)) && !strcmp(n, name))
					vaddr = sym.st_value;
			}
		}
	if (e && vaddr && !elf_getphdrnum(e, &nph))
		for (size_t i = 0; i < nph; i++)
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
				off = vaddr - ph.p_vaddr + ph.p_offset;
	if (e)
		elf_end(e);
	return off;
}

/* A copy of 3.13.0's libpython made into other versions (Py_Version and
 * the block at _PyRuntime rewritten): what detection makes of each. */
static void test_detect_patched(void **state)
{
	char pat[512], tmp[] = "/tmp/uscope-debugoffs-XXXXXX", buf[1 << 16];
	const char *home = getenv("HOME");
	uint8_t b[PYTHON_DEBUGOFFS_MAX];
	uint64_t ver_off, rt_off;
	struct python_runtime rt;
	uint32_t ver;
	ssize_t n;
	glob_t g;
	int in, fd;

	(void)state;
	snprintf(pat, sizeof(pat), "%s/.pyenv/versions/3.13.*/lib/libpython3.13.so.1.0",
		 home ? home : "/root");
	if (glob(pat, 0, NULL, &g) || !g.gl_pathc) {
		globfree(&g);
		skip();
		return;
	}
	in = open(g.gl_pathv[0], O_RDONLY);
	assert_true(in >= 0);
	fd = mkstemp(tmp);
	assert_true(fd >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(fd, buf, (size_t)n), n);
	close(in);
	globfree(&g);
	ver_off = sym_foff(fd, "Py_Version");
	rt_off = sym_foff(fd, "_PyRuntime");
	assert_true(ver_off && rt_off);
	usc_set_log(capture_log, NULL);
	unsetenv("USCOPE_PY_DEBUG_OFFSETS");

	/* 3.14.0: its debug offsets over the table's entry */
	ver = 0x030e00f0;
	assert_int_equal(pwrite(fd, &ver, 4, (off_t)ver_off), 4);
	block_314(b, sizeof(b), 0x4a);
	assert_int_equal(pwrite(fd, b, sizeof(b), (off_t)rt_off), (ssize_t)sizeof(b));
	logged[0] = 0;
	assert_int_equal(python_detect_file(tmp, &rt), 0);
	assert_ptr_equal(rt.off, &rt.own);
	assert_int_equal(rt.own.is_threads_head, 0x1cb8);
	assert_int_equal(rt.own.rt_tss_key, PYOFF_NONE);
	assert_string_equal(logged, "");
	python_runtime_free(&rt);
	/* quietly: the same, nothing said */
	assert_int_equal(python_find_file(tmp, &rt), 0);
	assert_string_equal(logged, "");
	python_runtime_free(&rt);
	/* a 3.14.x whose block disagrees with the entry: refused, the field
	 * named */
	block_314(b, sizeof(b), 0x46);
	assert_int_equal(pwrite(fd, b, sizeof(b), (off_t)rt_off), (ssize_t)sizeof(b));
	assert_int_equal(python_detect_file(tmp, &rt), -EPROTO);
	assert_non_null(strstr(logged, "_Py_DebugOffsets.interpreter_frame.owner is 0x46, uscope's "
				"table has 0x4a"));
	/* 3.16: a layout unknown */
	ver = 0x031000f0;
	assert_int_equal(pwrite(fd, &ver, 4, (off_t)ver_off), 4);
	set_word(b, 1, ver);
	assert_int_equal(pwrite(fd, b, sizeof(b), (off_t)rt_off), (ssize_t)sizeof(b));
	assert_int_equal(python_detect_file(tmp, &rt), -ENOTSUP);
	assert_non_null(strstr(logged, "CPython 3.16.0: uscope does not know the layout"));

	/* a 3.13.5 that moved current_frame: the table refused, unless its
	 * debug offsets are asked for */
	ver = 0x030d05f0;
	memcpy(b, debugoffs_313, sizeof(debugoffs_313));
	set_word(b, 1, ver);
	set_word(b, 23, 0x50);
	assert_int_equal(pwrite(fd, &ver, 4, (off_t)ver_off), 4);
	assert_int_equal(pwrite(fd, b, sizeof(debugoffs_313), (off_t)rt_off),
			 (ssize_t)sizeof(debugoffs_313));
	assert_int_equal(python_detect_file(tmp, &rt), -EPROTO);
	assert_non_null(strstr(logged, "current_frame is 0x50, uscope's table has 0x48"));
	setenv("USCOPE_PY_DEBUG_OFFSETS", "1", 1);
	assert_int_equal(python_detect_file(tmp, &rt), 0);
	assert_ptr_equal(rt.off, &rt.own);
	assert_int_equal(rt.own.ts_frame, 0x50);
	python_runtime_free(&rt);
	unsetenv("USCOPE_PY_DEBUG_OFFSETS");
	/* no cookie */
	b[0] = 'X';
	assert_int_equal(pwrite(fd, b, 8, (off_t)rt_off), 8);
	assert_int_equal(python_detect_file(tmp, &rt), -EPROTO);
	assert_non_null(strstr(logged, "no _Py_DebugOffsets at the start of _PyRuntime"));

	usc_set_log(NULL, NULL);
	close(fd);
	unlink(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_313),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_synthetic_314),
		cmocka_unit_test(test_detect_forced),
		cmocka_unit_test(test_detect_patched),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
