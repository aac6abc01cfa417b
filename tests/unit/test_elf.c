/* Tests of src/objfile/elf.c and src/objfile/modules.c against fixtures built at run
 * time (tests/unit/fixtures/elf/build.sh) and checked against nm, readelf
 * and objdump. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "objfile/objfile.h"
#include "fixture.h"
#include "objfile/modules.h"

static char tmpdir[256];
static char fxdir[PATH_MAX + 64];

/* ---- helpers ---------------------------------------------------------- */

static char *fx(const char *name)
{
	static char buf[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", tmpdir, name);
	return buf[i];
}

static void run(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	r = system(cmd);
	if (r != 0)
		fail_msg("command failed (%d): %s", r, cmd);
}

/* Address of symbol `name` (exact, with any @VER part) per nm, or
 * UINT64_MAX; *count gets the number of such lines. */
static uint64_t nm_addr_n(const char *file, const char *name, bool dyn, char type,
			  int *count)
{
	char cmd[PATH_MAX + 64], line[1024];
	uint64_t res = UINT64_MAX;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm %s --defined-only '%s'", dyn ? "-D" : "", file);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (count)
		*count = 0;
	while (fgets(line, sizeof(line), p)) {
		char nm[512], t;
		uint64_t a;
		if (sscanf(line, "%" SCNx64 " %c %511s", &a, &t, nm) != 3)
			continue;
		if (strcmp(nm, name) || (type && t != type))
			continue;
		if (count)
			(*count)++;
		if (res == UINT64_MAX)
			res = a;
	}
	pclose(p);
	return res;
}

static uint64_t nm_addr(const char *file, const char *name, bool dyn)
{
	uint64_t a = nm_addr_n(file, name, dyn, 0, NULL);

	if (a == UINT64_MAX)
		fail_msg("nm: no %s in %s", name, file);
	return a;
}

/* st_size per `nm -S`. */
static uint64_t nm_size(const char *file, const char *name)
{
	char cmd[PATH_MAX + 64], line[1024];
	uint64_t res = UINT64_MAX;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", file);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char nm[512], t;
		uint64_t a, sz;
		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %511s", &a, &sz, &t, nm) == 4 &&
		    !strcmp(nm, name))
			res = sz;
	}
	pclose(p);
	assert_int_not_equal(res, UINT64_MAX);
	return res;
}

struct rseg {
	uint64_t off, vaddr, filesz, memsz;
	char flags[4];
};

/* PT_LOAD headers per `readelf -lW`. */
static size_t readelf_loads(const char *file, struct rseg *segs, size_t max)
{
	char cmd[PATH_MAX + 64], line[1024];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s'", file);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		struct rseg s = { 0 };
		if (sscanf(line, " LOAD %" SCNx64 " %" SCNx64 " %*x %" SCNx64 " %" SCNx64 " %3c",
			   &s.off, &s.vaddr, &s.filesz, &s.memsz, s.flags) == 5 && n < max)
			segs[n++] = s;
	}
	pclose(p);
	return n;
}

/* The instruction bytes objdump shows in [start, stop). */
static size_t objdump_bytes(const char *file, uint64_t start, uint64_t stop,
			    uint8_t *buf, size_t max)
{
	char cmd[PATH_MAX + 128], line[1024];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "objdump -d -w --start-address=0x%" PRIx64 " --stop-address=0x%" PRIx64 " '%s'",
		 start, stop, file);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *s = line, *tab;
		unsigned b;
		int used;
		while (*s == ' ')
			s++;
		if (!strchr(s, ':') || !(tab = strchr(s, '\t')) || tab < strchr(s, ':'))
			continue;
		s = tab + 1;
		while (sscanf(s, "%2x%n", &b, &used) == 1 && used == 2 &&
		       (s[2] == ' ' || s[2] == '\t' || s[2] == '\n') && n < max) {
			buf[n++] = (uint8_t)b;
			s += 2;
			while (*s == ' ')
				s++;
			if (*s == '\t' || *s == '\n')
				break;
		}
	}
	pclose(p);
	return n;
}

static struct objfile *open_ok(const char *path)
{
	struct objfile *ef = NULL;
	int r = objfile_open(path, &ef);

	if (r)
		fail_msg("objfile_open(%s) = %d", path, r);
	return ef;
}

static const struct objfile_sym *lookup_ok(const struct objfile *ef, const char *name)
{
	const struct objfile_sym *s = NULL;
	const struct objfile_sym **c = NULL;
	size_t nc = 0;
	int r = objfile_func_lookup(ef, name, &s, &c, &nc);

	if (r)
		fail_msg("objfile_func_lookup(%s, %s) = %d", ef->path, name, r);
	assert_null(c);
	return s;
}

static size_t count_named(const struct objfile *ef, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < ef->nsyms; i++)
		n += !strcmp(ef->syms[i].name, name);
	return n;
}

/* Copy src to dst with the section header table removed from the header. */
static void copy_without_shdrs(const char *src, const char *dst)
{
	FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
	char buf[65536];
	size_t n;
	uint64_t zero64 = 0;
	uint16_t zero16 = 0;

	assert_non_null(in);
	assert_non_null(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(in);
	/* e_shoff at 0x28, e_shnum at 0x3c, e_shstrndx at 0x3e */
	assert_int_equal(fseek(out, 0x28, SEEK_SET), 0);
	fwrite(&zero64, 8, 1, out);
	assert_int_equal(fseek(out, 0x3c, SEEK_SET), 0);
	fwrite(&zero16, 2, 1, out);
	fwrite(&zero16, 2, 1, out);
	fclose(out);
}

/* ---- setup ------------------------------------------------------------ */

static int group_setup(void **state)
{
	(void)state;
	if (fixture_build("elf", fxdir, sizeof(fxdir), tmpdir, sizeof(tmpdir)))
		return -1;
	copy_without_shdrs(fx("pie.stripped"), fx("pie.noshdr"));
	copy_without_shdrs(fx("libfx.so"), fx("libfx.noshdr.so"));
	copy_without_shdrs(fx("libfxsysv.so"), fx("libfxsysv.noshdr.so"));
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return fixture_remove(tmpdir);
}

/* ---- src/objfile/ (elf.h) -------------------------------------------------- */

static void test_open_errors(void **state)
{
	struct objfile *ef = (void *)1;
	char src[PATH_MAX + 128];

	(void)state;
	assert_int_equal(objfile_open(fx("no-such-file"), &ef), -ENOENT);
	assert_null(ef);
	snprintf(src, sizeof(src), "%s/main.c", fxdir);
	assert_int_equal(objfile_open(src, &ef), -ENOEXEC);
	assert_null(ef);
	run(": > '%s'", fx("empty"));
	assert_int_equal(objfile_open(fx("empty"), &ef), -ENOEXEC);
	objfile_close(NULL);
}

/* Segments equal readelf's; offsets and bytes agree with the file and
 * with objdump; data read through objfile_read has the initialiser's value. */
static void check_layout(const char *file)
{
	struct objfile *ef = open_ok(file);
	struct rseg rs[16];
	size_t nr = readelf_loads(file, rs, 16);
	uint64_t fn = nm_addr(file, "fx_exported", false);
	uint64_t data = nm_addr(file, "fx_data", false);
	uint64_t bss = nm_addr(file, "fx_bss", false);
	uint64_t off = 0, expect_off = UINT64_MAX, v = 0;
	uint8_t mine[16], filebytes[16], objd[32];
	int32_t vals[4];
	size_t nobj;
	int fd;

	assert_true(nr >= 2);
	assert_int_equal(ef->nsegs, nr);
	for (size_t i = 0; i < nr; i++) {
		assert_int_equal(ef->segs[i].offset, rs[i].off);
		assert_int_equal(ef->segs[i].vaddr, rs[i].vaddr);
		assert_int_equal(ef->segs[i].filesz, rs[i].filesz);
		assert_int_equal(ef->segs[i].memsz, rs[i].memsz);
		assert_int_equal(!!(ef->segs[i].flags & PF_X), strchr(rs[i].flags, 'E') != NULL);
		assert_int_equal(!!(ef->segs[i].flags & PF_W), strchr(rs[i].flags, 'W') != NULL);
		if (fn >= rs[i].vaddr && fn < rs[i].vaddr + rs[i].filesz)
			expect_off = fn - rs[i].vaddr + rs[i].off;
	}
	assert_int_not_equal(expect_off, UINT64_MAX);

	/* function: offset, bytes from the file, objfile_read, objdump */
	assert_int_equal(objfile_vaddr_to_offset(ef, fn, &off), 0);
	assert_int_equal(off, expect_off);
	assert_int_equal(objfile_offset_to_vaddr(ef, off, &v), 0);
	assert_int_equal(v, fn);
	assert_true(objfile_vaddr_is_exec(ef, fn));
	assert_int_equal(objfile_read(ef, fn, mine, sizeof(mine)), 0);
	fd = open(file, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, filebytes, sizeof(filebytes), (off_t)off), sizeof(filebytes));
	close(fd);
	assert_memory_equal(mine, filebytes, sizeof(mine));
	nobj = objdump_bytes(file, fn, fn + sizeof(mine), objd, sizeof(objd));
	assert_true(nobj >= 4);
	if (nobj > sizeof(mine))
		nobj = sizeof(mine);
	assert_memory_equal(mine, objd, nobj);

	/* data: in the RW segment, where vaddr != offset in these layouts */
	assert_false(objfile_vaddr_is_exec(ef, data));
	assert_int_equal(objfile_vaddr_to_offset(ef, data, &off), 0);
	assert_int_not_equal(off, data);
	assert_int_equal(objfile_read(ef, data, vals, sizeof(vals)), 0);
	assert_int_equal(vals[0], 0x11223344);
	assert_int_equal(vals[3], 0x7f6e5d4c);

	/* bss: mapped but not in the file */
	assert_int_equal(objfile_vaddr_to_offset(ef, bss + 64, &off), -ENOENT);
	assert_int_not_equal(objfile_read(ef, bss, vals, sizeof(vals)), 0);
	assert_false(objfile_vaddr_is_exec(ef, bss));
	objfile_close(ef);
}

static void test_layout_pie(void **state)
{
	(void)state;
	check_layout(fx("pie"));
}

static void test_layout_nopie(void **state)
{
	(void)state;
	check_layout(fx("nopie"));
}

static void test_pie_nopie_headers(void **state)
{
	struct objfile *pie = open_ok(fx("pie")), *np = open_ok(fx("nopie"));
	struct objfile *so = open_ok(fx("libfx.so"));
	const struct objfile_sym *s;
	bool libc = false;

	(void)state;
	assert_true(pie->is_dyn);
	assert_false(pie->is_exec_type);
	assert_false(np->is_dyn);
	assert_true(np->is_exec_type);
	assert_true(so->is_dyn);
	assert_non_null(pie->interp);
	assert_non_null(np->interp);
	assert_null(so->interp);
	for (size_t i = 0; i < pie->nneeded; i++)
		libc |= !strcmp(pie->needed[i], "libc.so.6");
	assert_true(libc);
	assert_null(pie->soname);

	/* -rdynamic PIE: in both tables; non-PIE without it: .symtab only */
	s = lookup_ok(pie, "fx_exported");
	assert_int_equal(s->vaddr, nm_addr(fx("pie"), "fx_exported", true));
	assert_true(s->flags & OBJFILE_SYM_DYNSYM);
	assert_true(s->flags & OBJFILE_SYM_SYMTAB);
	assert_int_equal(count_named(pie, "fx_exported"), 1);
	s = lookup_ok(np, "fx_exported");
	assert_int_equal(s->vaddr, nm_addr(fx("nopie"), "fx_exported", false));
	assert_int_equal(s->vaddr & 0xfffffffffff00000ull, 0x400000);
	assert_false(s->flags & OBJFILE_SYM_DYNSYM);
	assert_true(s->flags & OBJFILE_SYM_SYMTAB);
	assert_int_equal(s->size, nm_size(fx("nopie"), "fx_exported"));
	/* main is a function, main is in .symtab only */
	lookup_ok(np, "main");
	assert_int_equal(objfile_func_lookup(np, "no_such_function", &s, NULL, NULL), -ENOENT);
	assert_null(s);
	/* a data object is not a function */
	assert_int_equal(objfile_func_lookup(np, "fx_data", &s, NULL, NULL), -ENOENT);
	/* a symbol name that merely starts with the query */
	assert_int_equal(objfile_func_lookup(np, "fx_export", &s, NULL, NULL), -ENOENT);
	objfile_close(pie);
	objfile_close(np);
	objfile_close(so);
}

static void check_sorted(const struct objfile *ef)
{
	for (size_t i = 1; i < ef->nsyms; i++) {
		int c = strcmp(ef->syms[i - 1].name, ef->syms[i].name);
		assert_true(c < 0 || (c == 0 && ef->syms[i - 1].vaddr <= ef->syms[i].vaddr));
	}
}

static void check_versions(const char *file, bool has_symtab)
{
	struct objfile *ef = open_ok(file);
	const struct objfile_sym *s, *s2;
	const char *ref = fx("libfx.so");	/* same layout for the noshdr copy */
	uint64_t v1, v2;

	if (strstr(file, "sysv"))
		ref = fx("libfxsysv.so");
	v1 = nm_addr(ref, "foo@VER_1", true);
	v2 = nm_addr(ref, "foo@@VER_2", true);
	assert_int_not_equal(v1, v2);
	check_sorted(ef);
	assert_int_equal(count_named(ef, "foo"), 2);

	s = lookup_ok(ef, "foo");
	assert_int_equal(s->vaddr, v2);
	assert_string_equal(s->name, "foo");
	assert_string_equal(s->version, "VER_2");
	assert_true(s->flags & OBJFILE_SYM_DEFAULT_VER);
	assert_false(s->flags & OBJFILE_SYM_HIDDEN_VER);
	assert_true(s->flags & OBJFILE_SYM_DYNSYM);
	assert_int_equal(!!(s->flags & OBJFILE_SYM_SYMTAB), has_symtab);

	s2 = lookup_ok(ef, "foo@@VER_2");
	assert_ptr_equal(s2, s);
	s2 = lookup_ok(ef, "foo@VER_2");
	assert_ptr_equal(s2, s);
	s = lookup_ok(ef, "foo@VER_1");
	assert_int_equal(s->vaddr, v1);
	assert_string_equal(s->version, "VER_1");
	assert_true(s->flags & OBJFILE_SYM_HIDDEN_VER);
	assert_int_equal(objfile_func_lookup(ef, "foo@@VER_1", &s, NULL, NULL), -ENOENT);
	assert_int_equal(objfile_func_lookup(ef, "foo@VER_3", &s, NULL, NULL), -ENOENT);

	/* .dynsym bar@@VER_1 and .symtab "bar" are one entry */
	assert_int_equal(count_named(ef, "bar"), 1);
	s = lookup_ok(ef, "bar");
	assert_int_equal(s->vaddr, nm_addr(ref, "bar@@VER_1", true));
	assert_string_equal(s->version, "VER_1");
	assert_int_equal(!!(s->flags & OBJFILE_SYM_SYMTAB), has_symtab);
	assert_true(s->flags & OBJFILE_SYM_DYNSYM);
	assert_string_equal(lookup_ok(ef, "bar@VER_1")->name, "bar");

	/* local aliases of the versions exist only in .symtab */
	if (has_symtab) {
		assert_int_equal(lookup_ok(ef, "foo_v1")->vaddr, v1);
		assert_int_equal(lookup_ok(ef, "foo_v2")->vaddr, v2);
	} else {
		assert_int_equal(objfile_func_lookup(ef, "foo_v1", &s, NULL, NULL), -ENOENT);
	}
	objfile_close(ef);
}

static void test_versions(void **state)
{
	(void)state;
	check_versions(fx("libfx.so"), true);
}

static void test_versions_stripped(void **state)
{
	(void)state;
	check_versions(fx("libfx.stripped.so"), false);
}

static void test_versions_no_shdrs(void **state)
{
	(void)state;
	check_versions(fx("libfx.noshdr.so"), false);	/* DT_GNU_HASH */
	check_versions(fx("libfxsysv.noshdr.so"), false);	/* DT_HASH */
}

static void check_stripped_pie(const char *file)
{
	struct objfile *ef = open_ok(file);
	const struct objfile_sym *s;

	s = lookup_ok(ef, "fx_exported");
	assert_int_equal(s->vaddr, nm_addr(fx("pie"), "fx_exported", true));
	assert_int_equal(s->flags & (OBJFILE_SYM_DYNSYM | OBJFILE_SYM_SYMTAB), OBJFILE_SYM_DYNSYM);
	assert_null(s->version);
	/* statics are gone with .symtab */
	assert_int_equal(objfile_func_lookup(ef, "sdup", &s, NULL, NULL), -ENOENT);
	/* the weak definition is exported */
	s = lookup_ok(ef, "wonly");
	assert_true(s->flags & OBJFILE_SYM_WEAK);
	objfile_close(ef);
}

static void test_stripped_pie(void **state)
{
	(void)state;
	check_stripped_pie(fx("pie.stripped"));
}

static void test_no_shdrs_pie(void **state)
{
	(void)state;
	check_stripped_pie(fx("pie.noshdr"));
}

static void test_weak_strong(void **state)
{
	const char *file = fx("nopie.weak");
	struct objfile *ef = open_ok(file);
	const struct objfile_sym *s;
	int nweak = 0;

	(void)state;
	assert_int_equal(count_named(ef, "wdup"), 2);
	for (size_t i = 0; i < ef->nsyms; i++)
		if (!strcmp(ef->syms[i].name, "wdup") && (ef->syms[i].flags & OBJFILE_SYM_WEAK)) {
			nweak++;
			assert_int_equal(ef->syms[i].vaddr, nm_addr_n(file, "wdup", false, 'W', NULL));
		}
	assert_int_equal(nweak, 1);
	s = lookup_ok(ef, "wdup");
	assert_int_equal(s->vaddr, nm_addr_n(file, "wdup", false, 'T', NULL));
	assert_false(s->flags & OBJFILE_SYM_WEAK);
	/* a lone weak definition is found */
	s = lookup_ok(ef, "wonly");
	assert_true(s->flags & OBJFILE_SYM_WEAK);
	assert_int_equal(s->vaddr, nm_addr(file, "wonly", false));
	objfile_close(ef);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The candidates of an ambiguous name are nm's addresses for it. */
static void check_ambiguous(const char *file, const char *name)
{
	struct objfile *ef = open_ok(file);
	const struct objfile_sym *s = (void *)1;
	const struct objfile_sym **c = NULL;
	size_t nc = 0;
	uint64_t got[8], want[8];
	size_t nwant = 0;
	char cmd[PATH_MAX + 64], line[512];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm --defined-only '%s'", file);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char nm[256], t;
		uint64_t a;
		if (sscanf(line, "%" SCNx64 " %c %255s", &a, &t, nm) == 3 &&
		    !strcmp(nm, name) && nwant < 8)
			want[nwant++] = a;
	}
	pclose(p);
	assert_int_equal(nwant, 2);

	assert_int_equal(objfile_func_lookup(ef, name, &s, &c, &nc), -EEXIST);
	assert_null(s);
	assert_non_null(c);
	assert_int_equal(nc, 2);
	for (size_t i = 0; i < nc; i++) {
		assert_string_equal(c[i]->name, name);
		got[i] = c[i]->vaddr;
	}
	free(c);
	qsort(got, nc, sizeof(got[0]), cmp_u64);
	qsort(want, nwant, sizeof(want[0]), cmp_u64);
	assert_memory_equal(got, want, nc * sizeof(got[0]));
	/* without a candidate array */
	assert_int_equal(objfile_func_lookup(ef, name, &s, NULL, NULL), -EEXIST);
	objfile_close(ef);
}

static void test_ambiguous(void **state)
{
	(void)state;
	check_ambiguous(fx("pie"), "sdup");	/* two statics */
	check_ambiguous(fx("nopie"), "sdup");
	check_ambiguous(fx("nopie"), "gdup");	/* a global and a static */
}

static void test_alias_and_match(void **state)
{
	struct objfile *ef = open_ok(fx("pie"));
	const struct objfile_sym **m = NULL;
	const struct objfile_sym *a, *b;
	ssize_t n;

	(void)state;
	a = lookup_ok(ef, "fxalias_a");
	b = lookup_ok(ef, "fxalias_b");
	assert_int_equal(a->vaddr, b->vaddr);
	assert_int_equal(a->vaddr, nm_addr(fx("pie"), "fxalias_b", false));

	n = objfile_func_match(ef, "fxalias_*", &m);
	assert_int_equal(n, 1);
	assert_string_equal(m[0]->name, "fxalias_a");
	free(m);
	n = objfile_func_match(ef, "fxalias_b", &m);
	assert_int_equal(n, 1);
	assert_string_equal(m[0]->name, "fxalias_b");
	free(m);
	/* one per address, sorted by name */
	n = objfile_func_match(ef, "?dup", &m);
	assert_int_equal(n, 5);	/* gdup x2, sdup x2, wdup */
	assert_string_equal(m[0]->name, "gdup");
	assert_string_equal(m[1]->name, "gdup");
	assert_string_equal(m[3]->name, "sdup");
	assert_string_equal(m[4]->name, "wdup");
	assert_int_not_equal(m[2]->vaddr, m[3]->vaddr);
	free(m);
	n = objfile_func_match(ef, "zzz_nothing*", &m);
	assert_int_equal(n, 0);
	free(m);
	objfile_close(ef);

	ef = open_ok(fx("libfx.so"));
	n = objfile_func_match(ef, "foo@VER_*", &m);
	assert_int_equal(n, 1);
	assert_string_equal(m[0]->version, "VER_1");
	free(m);
	n = objfile_func_match(ef, "foo@@*", &m);
	assert_int_equal(n, 1);
	assert_string_equal(m[0]->version, "VER_2");
	free(m);
	n = objfile_func_match(ef, "foo*", &m);
	assert_int_equal(n, 2);	/* foo and foo_v1 etc. collapse per address */
	assert_string_equal(m[0]->name, "foo");
	assert_string_equal(m[1]->name, "foo");
	free(m);
	objfile_close(ef);
}

static void test_ifunc(void **state)
{
	const char *files[] = { fx("pie"), fx("nopie") };

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct objfile *ef = open_ok(files[i]);
		const struct objfile_sym *s = lookup_ok(ef, "ifn");
		assert_true(s->flags & OBJFILE_SYM_IFUNC);
		assert_int_equal(s->vaddr, nm_addr_n(files[i], "ifn", false, 'i', NULL));
		/* the resolver is the same code */
		assert_int_equal(lookup_ok(ef, "ifn_resolver")->vaddr, s->vaddr);
		assert_false(lookup_ok(ef, "ifn_impl")->flags & OBJFILE_SYM_IFUNC);
		objfile_close(ef);
	}
}

static void test_func_at(void **state)
{
	struct objfile *ef = open_ok(fx("nopie"));
	const struct objfile_sym *s = lookup_ok(ef, "fx_exported"), *t;

	(void)state;
	assert_true(s->size > 1);
	assert_ptr_equal(objfile_func_at(ef, s->vaddr), s);
	assert_ptr_equal(objfile_func_at(ef, s->vaddr + s->size - 1), s);
	t = objfile_func_at(ef, s->vaddr + s->size);
	assert_true(t != s);
	assert_null(objfile_func_at(ef, 0));
	assert_null(objfile_func_at(ef, UINT64_MAX));
	s = lookup_ok(ef, "fxalias_b");
	t = objfile_func_at(ef, s->vaddr + 1);
	assert_non_null(t);
	assert_string_equal(t->name, "fxalias_a");
	objfile_close(ef);
}

static void test_suggest(void **state)
{
	struct objfile *ef = open_ok(fx("pie"));
	const char *out[5];
	size_t n;

	(void)state;
	n = objfile_func_suggest(ef, "fx_exportd", out, 5);
	assert_true(n >= 1);
	assert_string_equal(out[0], "fx_exported");
	n = objfile_func_suggest(ef, "FX_EXPROTED", out, 5);	/* case, transposition */
	assert_true(n >= 1);
	assert_string_equal(out[0], "fx_exported");
	n = objfile_func_suggest(ef, "FXALIAS", out, 5);	/* substring */
	assert_true(n >= 2);
	assert_string_equal(out[0], "fxalias_a");
	assert_string_equal(out[1], "fxalias_b");
	n = objfile_func_suggest(ef, "sdupp", out, 1);
	assert_int_equal(n, 1);
	assert_string_equal(out[0], "sdup");	/* one entry per name */
	n = objfile_func_suggest(ef, "sdupp", out, 5);
	assert_true(n >= 2);
	assert_string_equal(out[0], "sdup");
	assert_string_not_equal(out[1], "sdup");
	assert_int_equal(objfile_func_suggest(ef, "qqqqqqqqqqqqqqqqqqqqqqqqqq", out, 5), 0);
	objfile_close(ef);
}

/* ---- modules.c -------------------------------------------------------- */

static void test_name_matches(void **state)
{
	(void)state;
	assert_true(module_name_matches("libc", "/lib/x86_64-linux-gnu/libc.so.6"));
	assert_true(module_name_matches("libc", "/lib/libc-2.31.so"));
	assert_false(module_name_matches("libc", "/usr/lib/x86_64-linux-gnu/libcap.so.2"));
	assert_false(module_name_matches("libc", "/usr/lib/x86_64-linux-gnu/libcrypt.so.1"));
	assert_true(module_name_matches("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"));
	assert_true(module_name_matches("libc.so", "/lib/x86_64-linux-gnu/libc.so.6"));
	assert_false(module_name_matches("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.60"));
	assert_true(module_name_matches("libpython3.11", "/usr/lib/libpython3.11.so.1.0"));
	assert_false(module_name_matches("libpython3.11", "/usr/lib/libpython3.11d.so.1.0"));
	assert_false(module_name_matches("libpython3", "/usr/lib/libpython3.11.so.1.0"));
	assert_true(module_name_matches("libpython3", "/usr/lib/libpython3.so"));
	assert_true(module_name_matches("libglib", "/usr/lib/libglib-2.0.so.0"));
	assert_true(module_name_matches("libsqlite3.so.0", "/usr/lib/libsqlite3.so.0.8.6"));
	assert_true(module_name_matches("app", "/home/u/app"));
	assert_false(module_name_matches("app", "/home/u/app2"));
	assert_false(module_name_matches("app", "/home/u/myapp"));
	assert_false(module_name_matches("", "/home/u/app"));
}

static void test_find_system(void **state)
{
	char *p = NULL, *real, *old = getenv("LD_LIBRARY_PATH");
	char *saved = old ? strdup(old) : NULL;

	(void)state;
	assert_int_equal(module_find_system("libc", &p), 0);
	assert_non_null(p);
	assert_true(p[0] == '/');
	assert_true(module_name_matches("libc", p));
	assert_true(!strncmp(strrchr(p, '/'), "/libc.so", 8) ||
		    !strncmp(strrchr(p, '/'), "/libc-", 6));
	{
		struct objfile *ef = open_ok(p);
		assert_non_null(ef->soname);
		assert_string_equal(ef->soname, "libc.so.6");
		objfile_close(ef);
	}
	free(p);
	assert_int_equal(module_find_system("libc.so.6", &p), 0);
	free(p);

	assert_int_equal(module_find_system("libuscope_no_such_lib", &p), -ENOENT);
	assert_null(p);

	real = realpath("/bin/true", NULL);
	assert_non_null(real);
	assert_int_equal(module_find_system("/bin/true", &p), 0);
	assert_string_equal(p, real);
	free(p);
	free(real);
	assert_int_equal(module_find_system("/no/such/file", &p), -ENOENT);

	/* LD_LIBRARY_PATH first; the stripped copy does not match "libfx" */
	setenv("LD_LIBRARY_PATH", tmpdir, 1);
	assert_int_equal(module_find_system("libfx", &p), 0);
	assert_string_equal(p, fx("libfx.so"));
	free(p);
	setenv("LD_LIBRARY_PATH", fx("amb"), 1);
	assert_int_equal(module_find_system("libamb", &p), -EEXIST);
	assert_null(p);
	assert_int_equal(module_find_system("libamb.so.2", &p), 0);
	assert_string_equal(p, fx("amb/libamb.so.2"));
	free(p);
	if (saved) {
		setenv("LD_LIBRARY_PATH", saved, 1);
		free(saved);
	} else {
		unsetenv("LD_LIBRARY_PATH");
	}
}

static bool list_has_base(char **l, size_t n, const char *base)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(strrchr(l[i], '/') + 1, base))
			return true;
	return false;
}

static void test_deps(void **state)
{
	char **l = NULL, *real = realpath("/bin/true", NULL);
	ssize_t n;

	(void)state;
	n = module_deps("/bin/true", &l);
	assert_true(n >= 2);
	assert_string_equal(l[0], real);
	assert_true(list_has_base(l, (size_t)n, "libc.so.6"));
	for (ssize_t i = 0; i < n; i++) {
		assert_true(l[i][0] == '/');
		for (ssize_t k = 0; k < i; k++)
			assert_string_not_equal(l[i], l[k]);
	}
	module_list_free(l, (size_t)n);
	free(real);

	assert_true(module_deps(fx("no-such-exe"), &l) < 0);

	/* $ORIGIN in DT_RUNPATH and in DT_RPATH */
	{
		const char *apps[] = { "app_runpath", "app_rpath" };
		for (size_t a = 0; a < 2; a++) {
			struct objfile *ef = open_ok(fx(apps[a]));
			assert_true(a == 0 ? ef->runpath != NULL && ef->rpath == NULL
					   : ef->rpath != NULL && ef->runpath == NULL);
			assert_string_equal(a == 0 ? ef->runpath : ef->rpath, "$ORIGIN/sub");
			objfile_close(ef);
			n = module_deps(fx(apps[a]), &l);
			assert_true(n >= 3);
			assert_string_equal(l[0], fx(apps[a]));
			assert_string_equal(l[1], fx("sub/libfxdep.so"));
			assert_true(list_has_base(l, (size_t)n, "libc.so.6"));
			module_list_free(l, (size_t)n);
		}
	}
}

static void test_find_for_exe(void **state)
{
	char *p = NULL;

	(void)state;
	assert_int_equal(module_find_for_exe(fx("app_runpath"), "libfxdep", &p), 0);
	assert_string_equal(p, fx("sub/libfxdep.so"));
	free(p);
	assert_int_equal(module_find_for_exe(fx("app_runpath"), "app_runpath", &p), 0);
	assert_string_equal(p, fx("app_runpath"));
	free(p);
	assert_int_equal(module_find_for_exe(fx("app_rpath"), "libc", &p), 0);
	assert_true(module_name_matches("libc", p));
	free(p);
	assert_int_equal(module_find_for_exe(fx("app_rpath"), "libfx", &p), -ENOENT);
	assert_null(p);
	assert_int_equal(module_find_for_exe(fx("app_rpath"), "libsqlite3_nope", &p), -ENOENT);
	assert_int_equal(module_find_for_exe(fx("app_rpath"), fx("libfx.so"), &p), 0);
	assert_string_equal(p, fx("libfx.so"));
	free(p);
}

__attribute__((noinline, used)) int fx_probe_target(int x);
__attribute__((noinline, used)) int fx_probe_target(int x)
{
	return x * 31 + 7;
}

static void test_procmaps(void **state)
{
	struct proc_map *maps = NULL;
	char *self = realpath("/proc/self/exe", NULL);
	struct objfile *ef;
	const struct objfile_sym *s;
	uint64_t here = (uint64_t)(uintptr_t)&fx_probe_target, off, addr = 0;
	ssize_t n;
	bool found = false;

	(void)state;
	assert_non_null(self);
	n = procmaps_read(getpid(), &maps);
	assert_true(n > 3);
	for (ssize_t i = 0; i < n; i++) {
		assert_true(maps[i].start < maps[i].end);
		if (here >= maps[i].start && here < maps[i].end) {
			found = true;
			assert_string_equal(maps[i].path, self);
			assert_int_equal(maps[i].perms[2], 'x');
			assert_int_not_equal(maps[i].inode, 0);
		}
	}
	assert_true(found);

	/* file offset of a function of this test -> its runtime address */
	ef = open_ok(self);
	s = lookup_ok(ef, "fx_probe_target");
	assert_int_equal(objfile_vaddr_to_offset(ef, s->vaddr, &off), 0);
	assert_int_equal(procmaps_file_offset_to_addr(maps, (size_t)n, self, off, &addr), 0);
	assert_int_equal(addr, here);
	assert_int_equal(procmaps_file_offset_to_addr(maps, (size_t)n, "/proc/self/exe", off,
						      &addr), 0);
	assert_int_equal(addr, here);
	/* never mapped (not even by objfile_open after a failed test) */
	assert_int_equal(procmaps_file_offset_to_addr(maps, (size_t)n, fx("amb/libamb.so.1"),
						      0, &addr), -ENOENT);
	assert_int_equal(procmaps_file_offset_to_addr(maps, (size_t)n, self, 1ull << 40,
						      &addr), -ENOENT);
	objfile_close(ef);
	procmaps_free(maps, (size_t)n);
	free(self);
}

/* A data symbol of libpython 3.13 (its RW PT_LOAD at file 0x49d5e0, vaddr
 * 0x49e5e0) in the maps as ld.so leaves them, and while ld.so is still
 * mapping the library (its span mapped from file page 0 only): the file
 * offset then falls a page short of the symbol, and only the check against
 * the first segment's mapping tells. */
static void test_placed_whole(void **state)
{
	static char lib[] = "/tmp/no-such-dir/libpython3.13.so.1.0";
	const uint64_t base = 0x7f885d400000ull, vaddr = 0x4f0bc0, foff = 0x4efbc0;
	struct proc_map done[] = {
		{base, base + 0x86000, 0, "r--p", 0, 0, lib},
		{base + 0x86000, base + 0x332000, 0x86000, "r-xp", 0, 0, lib},
		{base + 0x332000, base + 0x49e000, 0x332000, "r--p", 0, 0, lib},
		{base + 0x49e000, base + 0x4eb000, 0x49d000, "r--p", 0, 0, lib},
		{base + 0x4eb000, base + 0x56f000, 0x4ea000, "rw-p", 0, 0, lib},
	};
	struct proc_map half[] = {
		{base, base + 0x5e1000, 0, "r--p", 0, 0, lib},
	};
	uint64_t addr;

	(void)state;
	assert_int_equal(procmaps_file_offset_to_addr(done, 5, lib, foff, &addr), 0);
	assert_int_equal(addr, base + vaddr);
	assert_true(procmaps_placed_whole(done, 5, lib, 0, 0, vaddr, addr));
	assert_int_equal(procmaps_file_offset_to_addr(half, 1, lib, foff, &addr), 0);
	assert_int_equal(addr, base + foff);	/* where the symbol is not */
	assert_false(procmaps_placed_whole(half, 1, lib, 0, 0, vaddr, addr));
	/* a text symbol (file offset = vaddr) is where it will be either way */
	assert_true(procmaps_placed_whole(half, 1, lib, 0, 0, 0x90000, base + 0x90000));
	/* no mapping of the first segment: not placed */
	assert_false(procmaps_placed_whole(done + 1, 4, lib, 0, 0, vaddr, base + vaddr));
}

static pid_t dead_pid(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return pid;
}

static void test_find_in_pid(void **state)
{
	char *p = NULL, *self = realpath("/proc/self/exe", NULL);
	struct proc_map *maps = NULL;
	pid_t dead = dead_pid();

	(void)state;
	assert_int_equal(module_find_in_pid(getpid(), "libc", &p), 0);
	assert_true(module_name_matches("libc", p));
	free(p);
	assert_int_equal(module_find_in_pid(getpid(), strrchr(self, '/') + 1, &p), 0);
	assert_string_equal(p, self);
	free(p);
	assert_int_equal(module_find_in_pid(getpid(), "libfx", &p), -ENOENT);
	assert_int_equal(module_find_in_pid(dead, "libc", &p), -ESRCH);
	assert_null(p);
	assert_int_equal(procmaps_read(dead, &maps), -ESRCH);
	assert_null(maps);
	free(self);
}

static void test_which(void **state)
{
	char *p = NULL;

	(void)state;
	assert_int_equal(module_which("true", &p), 0);
	assert_true(p[0] == '/');
	assert_string_equal(strrchr(p, '/'), "/true");
	assert_int_equal(access(p, X_OK), 0);
	free(p);
	assert_int_equal(module_which("/bin/true", &p), 0);
	assert_string_equal(p, "/bin/true");
	free(p);
	assert_int_equal(module_which("uscope-no-such-command", &p), -ENOENT);
	assert_null(p);
	assert_int_equal(module_which(fx("libfx.so"), &p), access(fx("libfx.so"), X_OK) ? -ENOENT : 0);
	free(p);
	p = NULL;
	assert_int_equal(module_which(fxdir, &p), -ENOENT);	/* a directory */
}

/* A script file in a fresh directory: "#!" + line, executable. */
static char *script(const char *dir, const char *name, const char *line)
{
	char *p = NULL;
	FILE *f;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	f = fopen(p, "w");
	assert_non_null(f);
	fprintf(f, "#!%s\necho not run\n", line);
	fclose(f);
	assert_int_equal(chmod(p, 0755), 0);
	return p;
}

static void test_script_program(void **state)
{
	char dir[] = "/tmp/uscope-shebang-XXXXXX";
	char *p = NULL, *sh, *env, *envs, *nested, *deep[6], *noint, *assign, *bare, *bin;

	(void)state;
	assert_non_null(mkdtemp(dir));
	sh = script(dir, "sh", "/bin/sh -e");
	env = script(dir, "env", " /usr/bin/env true ");
	envs = script(dir, "envs", "/usr/bin/env -S true -x");
	nested = script(dir, "nested", sh);
	noint = script(dir, "noint", "/no/such/interpreter");
	assign = script(dir, "assign", "/usr/bin/env A=1 true");
	bare = script(dir, "bare", "true");	/* the kernel: ./true, not PATH's */
	assert_int_equal(module_which("true", &bin), 0);
	/* the interpreter, through env (PATH), through a script */
	assert_int_equal(module_script_program(sh, &p), 0);
	assert_string_equal(p, "/bin/sh");
	free(p);
	assert_int_equal(module_script_program(env, &p), 0);
	assert_string_equal(p, bin);
	free(p);
	assert_int_equal(module_script_program(envs, &p), 0);
	assert_string_equal(p, bin);
	free(p);
	assert_int_equal(module_script_program(nested, &p), 0);
	assert_string_equal(p, "/bin/sh");
	free(p);
	/* as the kernel, 5 scripts before the program, not 6 */
	deep[0] = script(dir, "d0", "/bin/sh");
	for (int i = 1; i < 6; i++) {
		char name[16];

		snprintf(name, sizeof(name), "d%d", i);
		deep[i] = script(dir, name, deep[i - 1]);
	}
	assert_int_equal(module_script_program(deep[4], &p), 0);
	assert_string_equal(p, "/bin/sh");
	free(p);
	assert_int_equal(module_script_program(deep[5], &p), -ELOOP);
	assert_null(p);
	/* not a script; what uscope cannot name; no interpreter */
	assert_int_equal(module_script_program("/bin/true", &p), -ENOEXEC);
	assert_int_equal(module_script_program(assign, &p), -ENOEXEC);
	assert_int_equal(module_script_program(noint, &p), -ENOENT);
	{
		int here = open(".", O_RDONLY | O_DIRECTORY);

		assert_true(here >= 0);
		assert_int_equal(chdir(dir), 0);	/* no ./true there */
		assert_int_equal(module_script_program(bare, &p), -ENOENT);
		assert_int_equal(fchdir(here), 0);
		close(here);
	}
	assert_int_equal(module_script_program("/no/such/file", &p), -ENOENT);
	assert_null(p);
	for (int i = 0; i < 6; i++) {
		unlink(deep[i]);
		free(deep[i]);
	}
	char *all[] = {sh, env, envs, nested, noint, assign, bare};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		unlink(all[i]);
		free(all[i]);
	}
	free(bin);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_layout_pie),
		cmocka_unit_test(test_layout_nopie),
		cmocka_unit_test(test_pie_nopie_headers),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_versions_stripped),
		cmocka_unit_test(test_versions_no_shdrs),
		cmocka_unit_test(test_stripped_pie),
		cmocka_unit_test(test_no_shdrs_pie),
		cmocka_unit_test(test_weak_strong),
		cmocka_unit_test(test_ambiguous),
		cmocka_unit_test(test_alias_and_match),
		cmocka_unit_test(test_ifunc),
		cmocka_unit_test(test_func_at),
		cmocka_unit_test(test_suggest),
		cmocka_unit_test(test_name_matches),
		cmocka_unit_test(test_find_system),
		cmocka_unit_test(test_deps),
		cmocka_unit_test(test_find_for_exe),
		cmocka_unit_test(test_procmaps),
		cmocka_unit_test(test_placed_whole),
		cmocka_unit_test(test_find_in_pid),
		cmocka_unit_test(test_which),
		cmocka_unit_test(test_script_program),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
