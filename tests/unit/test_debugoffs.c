/* The reader of CPython's _Py_DebugOffsets (src/python/debugoffs.c): on
 * 3.13.0's real block (fixtures/python/debugoffs-313.h, made by
 * debugoffs.py from the pyenv build), on a 3.14-shaped synthetic one, and
 * on truncated and corrupt blocks; the offsets it builds, walked. */
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

#define PYWALK_FN(name) tw_##name
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) \
	(python_mem_read((const struct python_mem *)(env), (addr), (dst), (len)) != 0)
#include "python/walk.h"

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
	set_word(b, 1, 0x030f00a1);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -ENOTSUP);
	assert_non_null(strstr(logged, "3.15.0a1"));
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
	/* a table entry of another version is not a base */
	assert_int_equal(python_debugoffs_apply(&d, python_offsets_for(0x030c0000), &own), -ENOTSUP);
#undef FRESH
	usc_set_log(NULL, NULL);
}

/* A 3.14-shaped block (Include/internal/pycore_debug_offsets.h: 89 words;
 * the frame as 3.14 lays it out, owner at 0x4a after return_offset), with
 * the frame's owner at frame_owner. */
static void block_314(uint8_t *b, size_t len, uint64_t frame_owner)
{
	static const struct {
		uint8_t w;
		uint64_t v;
	} words[] = {
		{3, 0x3c000}, {4, 0x268}, {5, 0x288},
		{6, 0x31000}, {8, 0x7b0}, {9, 0x7e0},
		{20, 0x180}, {22, 0x8}, {24, 0x50}, {25, 0xa0}, {26, 0xa8},
		{29, 0x50}, {30, 0x8}, {31, 0x0}, {32, 0x38}, {33, 0x50}, {34, 0x4a},
		{36, 0xd8}, {37, 0x70}, {38, 0x78}, {39, 0x80}, {40, 0x88}, {41, 0x44},
		{42, 0x34}, {43, 0x60}, {45, 0xd0},
		{46, 16}, {47, 8}, {48, 0x1a0}, {49, 0x18}, {52, 0x20}, {53, 0x18},
		{62, 0x30}, {63, 0x20}, {64, 0x28}, {67, 0x20}, {68, 0x10}, {69, 0x18},
		{70, 0x28}, {71, 0x10}, {72, 0x20}, {73, 0x40}, {74, 0x20}, {75, 0x10}, {76, 0x28},
	};

	memset(b, 0, len);
	memcpy(b, "xdebugpy", 8);
	set_word(b, 1, 0x030e00f0);
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		set_word(b, words[i].w, words[i].v);
	set_word(b, 34, frame_owner);
}

/* memory: a flat buffer at BASE */
#define BASE 0x7f0000200000ull
static uint8_t mem_buf[4096];

static int mem_read(void *ctx, uint64_t addr, void *dst, size_t len)
{
	(void)ctx;
	if (addr < BASE || addr - BASE > sizeof(mem_buf) || len > sizeof(mem_buf) - (addr - BASE))
		return -EFAULT;
	memcpy(dst, mem_buf + (addr - BASE), len);
	return 0;
}

static void put64(uint64_t at, uint64_t v)
{
	memcpy(mem_buf + (at - BASE), &v, 8);
}

static void test_synthetic_314(void **state)
{
	uint8_t b[PYTHON_DEBUGOFFS_MAX];
	struct python_debugoffs d;
	struct python_offsets own;
	struct python_mem m = {mem_read, NULL};
	struct python_frame out[8];
	struct python_walk w;
	uint64_t ts = BASE, fa = BASE + 0x200, fe = BASE + 0x300, fg = BASE + 0x400,
		 ca = BASE + 0x800, cg = BASE + 0x900;

	(void)state;
	usc_set_log(capture_log, NULL);
	/* as 3.14.0 lays out its frame: understood, but its owner lies past
	 * the 72 bytes the walker reads of a frame: refused */
	block_314(b, sizeof(b), 0x4a);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(d.val[PD_TS_CURRENT_FRAME], 0x50);
	assert_int_equal(d.val[PD_FR_OWNER], 0x4a);
	assert_int_equal(python_debugoffs_apply(&d, NULL, &own), -ENOTSUP);
	assert_non_null(strstr(logged, "interpreter_frame.owner is 0x4a, beyond the 72 bytes"));
	/* fewer bytes than 3.14's layout (3.13's size) */
	assert_int_equal(python_debugoffs_parse(b, 584, &d), -EPROTO);
	/* no table for 3.14 and no base: the 3.13 entry is not one */
	block_314(b, sizeof(b), 0x46);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(python_debugoffs_apply(&d, python_offsets_for(0x030d0000), &own),
			 -ENOTSUP);
	/* a frame the walker reaches: 3.14's shape, the block's offsets,
	 * and what the block does not carry not guessed */
	assert_int_equal(python_debugoffs_apply(&d, NULL, &own), 0);
	assert_int_equal(own.version, 0x030e0000);
	assert_true(own.flags & PYOFF_STACKREF);
	assert_false(own.flags & (PYOFF_CFRAME | PYOFF_IS_ENTRY));
	assert_int_equal(own.ts_frame, 0x50);
	assert_int_equal(own.ts_thread_id, 0xa0);
	assert_int_equal(own.co_code_adaptive, 0xd0);
	assert_int_equal(own.str_compact_size, 0x28 + 16);
	assert_int_equal(own.owner_generator, 1);
	assert_int_equal(own.owner_cstack, 3);
	assert_int_equal(own.rt_tss_key, PYOFF_NONE);
	assert_non_null(python_offsets_missing(&own));
	assert_non_null(strstr(python_offsets_missing(&own), "thread-specific key"));

	/* thread -> a (THREAD, executable tagged) -> entry (INTERPRETER, 3)
	 * -> c-stack frame (CSTACK, 4) -> g (GENERATOR) -> end */
	memset(mem_buf, 0, sizeof(mem_buf));
	put64(ts + 0x50, fa);
	put64(fa + 0x0, ca | 1);
	put64(fa + 0x8, fe);
	put64(fa + 0x38, ca + 0xd0 + 6);
	mem_buf[fa - BASE + 0x46] = 0;
	put64(fe + 0x8, fe + 0x80);
	mem_buf[fe - BASE + 0x46] = 3;
	put64(fe + 0x80 + 0x8, fg);
	mem_buf[fe + 0x80 - BASE + 0x46] = 4;
	put64(fg + 0x0, cg);
	put64(fg + 0x8, 0);
	put64(fg + 0x38, cg + 0xd0 + 10);
	mem_buf[fg - BASE + 0x46] = 1;
	assert_int_equal(tw_walk(&own, ts, &w, out, 8, &m), PYWALK_END);
	assert_int_equal(w.n, 2);
	assert_int_equal(out[0].code, ca);
	assert_int_equal(out[0].instr, 6);
	assert_true(out[0].flags & PYFRAME_ENTRY);
	assert_false(out[0].flags & PYFRAME_GEN);
	assert_int_equal(out[1].code, cg);
	assert_int_equal(out[1].instr, 10);
	assert_true(out[1].flags & PYFRAME_GEN);
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

	/* 3.14.0 as its frame is laid out: the walker's frame read is short */
	ver = 0x030e00f0;
	assert_int_equal(pwrite(fd, &ver, 4, (off_t)ver_off), 4);
	block_314(b, sizeof(b), 0x4a);
	assert_int_equal(pwrite(fd, b, sizeof(b), (off_t)rt_off), (ssize_t)sizeof(b));
	assert_int_equal(python_detect_file(tmp, &rt), -ENOTSUP);
	assert_non_null(strstr(logged, "interpreter_frame.owner is 0x4a, beyond the 72 bytes"));
	/* quietly: not looked into, nothing said */
	logged[0] = 0;
	assert_int_equal(python_find_file(tmp, &rt), -ENOTSUP);
	assert_string_equal(logged, "");
	/* a 3.14 the walker could read: what its block lacks is not guessed */
	block_314(b, sizeof(b), 0x46);
	assert_int_equal(pwrite(fd, b, sizeof(b), (off_t)rt_off), (ssize_t)sizeof(b));
	assert_int_equal(python_detect_file(tmp, &rt), -ENOTSUP);
	assert_non_null(strstr(logged, "is CPython 3.14.0: its _Py_DebugOffsets do not carry the "
				"thread-specific key"));
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
