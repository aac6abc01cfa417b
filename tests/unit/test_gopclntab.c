/* Tests of src/go/gopclntab.c and of the Go side of opening a file
 * (src/go/gofile.c), on Go programs built by Debian's go at run time
 * (tests/unit/fixtures/go/build.sh, from tests/targets/goctl): the functions
 * of a stripped build must be those the unstripped build's .symtab has
 * (names, entries, sizes), as a plain executable, a PIE of Go's linker and a
 * PIE of the external linker, and without section headers. The older table
 * layouts (Go 1.2-1.15, 1.16-1.17) and Go 1.20's magic are checked on tables
 * rewritten from the real one. Truncated, corrupted and absurd tables must
 * give an error or fewer functions: the tests run under ASan and UBSan, on
 * exact-size copies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objfile/objfile.h"
#include "objfile/gopclntab.h"
#include "objfile/gotypes.h"
#include "stack/unwtab.h"
#include "fixture.h"

static char tmpdir[256];
static char fxdir[PATH_MAX + 64];
static char goversion[64];

static char *fx(const char *name)
{
	static char buf[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", tmpdir, name);
	return buf[i];
}

/* ---- files ------------------------------------------------------------ */

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	b = malloc((size_t)n);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static void write_all(const char *path, const void *b, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* A section's file offset, size and address, through libelf. */
static bool find_scn(const char *path, const char *name, uint64_t *off, uint64_t *size,
		     uint64_t *addr)
{
	int fd = open(path, O_RDONLY);
	Elf *e;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool found = false;

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	while (!found && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *nm;

		if (gelf_getshdr(scn, &sh) && (nm = elf_strptr(e, shstrndx, sh.sh_name)) &&
		    !strcmp(nm, name)) {
			*off = sh.sh_offset;
			*size = sh.sh_size;
			if (addr)
				*addr = sh.sh_addr;
			found = true;
		}
	}
	elf_end(e);
	close(fd);
	return found;
}

/* ---- the reference: .symtab through libelf ---------------------------- */

struct fn {
	char *name;
	uint64_t addr, size;
};

struct fnlist {
	struct fn *v;
	size_t n;
};

static void fnlist_free(struct fnlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static struct fnlist symtab_funcs(const char *path)
{
	struct fnlist l = {0};
	int fd = open(path, O_RDONLY);
	Elf *e;
	Elf_Scn *scn = NULL;

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(e);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		assert_non_null(d);
		for (size_t i = 1; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *nm;

			assert_non_null(gelf_getsym(d, (int)i, &s));
			if (GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF ||
			    !(nm = elf_strptr(e, sh.sh_link, s.st_name)))
				continue;
			l.v = realloc(l.v, (l.n + 1) * sizeof(*l.v));
			assert_non_null(l.v);
			l.v[l.n++] = (struct fn){strdup(nm), s.st_value, s.st_size};
		}
	}
	elf_end(e);
	close(fd);
	assert_true(l.n > 0);
	return l;
}

/* The name .symtab gives a function whose name from .gopclntab is pcl: the
 * same (of two functions of a name, the ABI0 one is NAME.abi0 in both), or
 * with ".abi0" for an assembly function alone of its name (Go's linker
 * adds it where a register-ABI symbol of the name exists, which the table
 * does not say), or with the "[...]" of a generated type's array length
 * written out ("[2]"). */
static bool same_go_name(const char *sym, const char *pcl)
{
	size_t lp = strlen(pcl);

	if (!strcmp(sym, pcl))
		return true;
	if (!strncmp(sym, pcl, lp) && !strcmp(sym + lp, ".abi0"))
		return true;
	while (*sym && *pcl) {
		if (*pcl == '[' && !strncmp(pcl, "[...]", 5) && sym[0] == '[' &&
		    sym[1] >= '0' && sym[1] <= '9') {
			sym++;
			while (*sym >= '0' && *sym <= '9')
				sym++;
			if (*sym != ']')
				return false;
			sym++;
			pcl += 5;
			continue;
		}
		if (*sym++ != *pcl++)
			return false;
	}
	return !*sym && !*pcl;
}

/* The stripped build's functions (through objfile_open) against the
 * unstripped build's .symtab: every function of the symtab with a size is
 * there, at its address, with its size and name; and nothing else is. */
static void compare_stripped(const char *full, const char *stripped)
{
	struct fnlist ref = symtab_funcs(full);
	struct objfile *ef = NULL, *eu = NULL;
	size_t matched = 0, sized = 0, ngo = 0, gomatched = 0;

	assert_int_equal(objfile_open(stripped, &ef), 0);
	assert_true(ef->is_go);
	assert_non_null(ef->go_version);
	assert_string_equal(ef->go_version, goversion);
	/* Go's functions from the table; an externally linked one also has
	 * _start and main in .dynsym (main, Go's assembly, in both) */
	for (size_t i = 0; i < ef->nsyms; i++) {
		if (ef->syms[i].flags & OBJFILE_SYM_GOPCLNTAB)
			ngo++;
		assert_int_equal(ef->syms[i].flags &
				 ~(unsigned)(OBJFILE_SYM_GOPCLNTAB | OBJFILE_SYM_DYNSYM | OBJFILE_SYM_GO_ABI0),
				 0);
	}
	assert_true(ngo > 1000);
	for (size_t i = 0; i < ref.n; i++) {
		const struct fn *r = &ref.v[i];
		const struct objfile_sym *s;

		if (!r->size)
			continue;	/* runtime.etext: a marker at the end */
		sized++;
		s = objfile_func_at(ef, r->addr);
		if (!s || s->vaddr != r->addr)
			fail_msg("%s: %s at 0x%" PRIx64 " is not a function of %s", full, r->name,
				 r->addr, stripped);
		if (s->size != r->size || !same_go_name(r->name, s->name))
			fail_msg("%s: %s at 0x%" PRIx64 " size %" PRIu64 "; %s has %s size %" PRIu64,
				 full, r->name, r->addr, r->size, stripped, s->name, s->size);
		matched++;
		gomatched += (s->flags & OBJFILE_SYM_GOPCLNTAB) != 0;	/* not C's _start */
	}
	assert_int_equal(matched, sized);
	/* nothing the symtab does not have */
	for (size_t i = 0; i < ef->nsyms; i++) {
		bool found = false;

		if (!(ef->syms[i].flags & OBJFILE_SYM_GOPCLNTAB))
			continue;
		for (size_t k = 0; k < ref.n && !found; k++)
			found = ref.v[k].addr == ef->syms[i].vaddr && ref.v[k].size;
		if (!found)
			fail_msg("%s: %s at 0x%" PRIx64 " has no symbol in %s", stripped,
				 ef->syms[i].name, ef->syms[i].vaddr, full);
	}
	assert_int_equal(ngo, gomatched);
	/* the method on a pointer receiver, by its exact name */
	{
		const struct objfile_sym *s = NULL;
		size_t k;

		assert_int_equal(objfile_func_lookup(ef, "main.(*Controller).syncDeployment", &s, NULL,
						 NULL), 0);
		for (k = 0; k < ref.n && strcmp(ref.v[k].name, s->name); k++)
			;
		assert_true(k < ref.n);
		assert_int_equal(s->vaddr, ref.v[k].addr);
	}
	/* the unstripped build keeps its .symtab's functions */
	assert_int_equal(objfile_open(full, &eu), 0);
	assert_true(eu->is_go);
	assert_string_equal(eu->go_version, goversion);
	for (size_t i = 0; i < eu->nsyms; i++)
		assert_false(eu->syms[i].flags & OBJFILE_SYM_GOPCLNTAB);
	objfile_close(eu);
	objfile_close(ef);
	fnlist_free(&ref);
}

/* An interface's dynamic type by name, from runtime.types (unstripped) and
 * from firstmoduledata (stripped: same layout, no symbols); the Go version;
 * assembly functions flagged as Go's stack ABI0 in the stripped table. */
static void test_go_type_names_and_abi0(void **state)
{
	struct objfile *eu, *es;
	uint64_t itab, type = 0;
	char name[128];
	unsigned major, minor;
	size_t asm_funcs = 0;
	const struct objfile_sym *s;

	(void)state;
	assert_int_equal(objfile_open(fx("goctl"), &eu), 0);
	assert_int_equal(objfile_open(fx("goctl-stripped"), &es), 0);
	assert_int_equal(sscanf(goversion, "go%u.%u", &major, &minor), 2);
	assert_int_equal(gotypes_minor(eu), (int)minor);
	/* the itab of (*main.roundError, error) holds the type at 8 */
	assert_int_equal(objfile_symbol_vaddr(eu, "go.itab.*main.roundError,error", &itab), 0);
	assert_int_equal(objfile_read(eu, itab + 8, &type, 8), 0);
	assert_int_equal(gotypes_name(eu, type, name, sizeof(name)), 0);
	assert_string_equal(name, "*main.roundError");
	assert_int_equal(gotypes_name(es, type, name, sizeof(name)), 0);
	assert_string_equal(name, "*main.roundError");
	/* not a type: outside the module's types */
	assert_int_equal(gotypes_name(es, itab + 0x100000, name, sizeof(name)), -ENOENT);
	assert_int_equal(objfile_func_lookup(es, "main.add", &s, NULL, NULL), 0);
	assert_false(s->flags & OBJFILE_SYM_GO_ABI0);
	for (size_t i = 0; i < es->nsyms; i++)
		asm_funcs += !!(es->syms[i].flags & OBJFILE_SYM_GO_ABI0);
	assert_true(asm_funcs > 10 && asm_funcs < es->nsyms / 5);
	objfile_close(es);
	objfile_close(eu);
}

static void test_exe_stripped_matches_symtab(void **state)
{
	(void)state;
	compare_stripped(fx("goctl"), fx("goctl-stripped"));
}

static void test_pie_stripped_matches_symtab(void **state)
{
	uint64_t off, size;

	(void)state;
	/* Go's linker names the PIE's table .data.rel.ro.gopclntab */
	assert_true(find_scn(fx("goctl-pie-stripped"), ".data.rel.ro.gopclntab", &off, &size, NULL));
	compare_stripped(fx("goctl-pie"), fx("goctl-pie-stripped"));
}

static void test_external_pie_stripped_matches_symtab(void **state)
{
	uint64_t off, size;

	(void)state;
	/* ld merged the table into .data.rel.ro: found by its header */
	assert_false(find_scn(fx("goctl-extpie-stripped"), ".gopclntab", &off, &size, NULL));
	assert_false(find_scn(fx("goctl-extpie-stripped"), ".data.rel.ro.gopclntab", &off, &size,
			      NULL));
	compare_stripped(fx("goctl-extpie"), fx("goctl-extpie-stripped"));
}

/* Without section headers (as sstrip leaves a file): the table is found in
 * the segments, the build info too, the build id note through PT_NOTE. */
static void test_no_section_headers(void **state)
{
	size_t len;
	uint8_t *b = read_all(fx("goctl-stripped"), &len);
	Elf64_Ehdr eh;
	struct objfile *a = NULL, *c = NULL;

	(void)state;
	memcpy(&eh, b, sizeof(eh));
	eh.e_shoff = 0;
	eh.e_shnum = 0;
	eh.e_shstrndx = 0;
	memcpy(b, &eh, sizeof(eh));
	write_all(fx("goctl-noshdr"), b, len);
	free(b);
	assert_int_equal(objfile_open(fx("goctl-stripped"), &a), 0);
	assert_int_equal(objfile_open(fx("goctl-noshdr"), &c), 0);
	assert_true(c->is_go);
	assert_non_null(c->go_version);
	assert_string_equal(c->go_version, goversion);
	assert_int_equal(c->nsyms, a->nsyms);
	for (size_t i = 0; i < a->nsyms; i++) {
		assert_string_equal(c->syms[i].name, a->syms[i].name);
		assert_int_equal(c->syms[i].vaddr, a->syms[i].vaddr);
		assert_int_equal(c->syms[i].size, a->syms[i].size);
	}
	objfile_close(a);
	objfile_close(c);
}

/* ---- the reader on the real table and on rewritten ones ---------------- */

struct table {
	uint8_t *file;
	size_t flen;
	const uint8_t *tab;	/* into file */
	size_t len;
	struct gopclntab_hdr h;
	struct gopclntab_func *f;
	ssize_t n;
};

static void table_load(struct table *t, const char *path)
{
	uint64_t off, size;

	memset(t, 0, sizeof(*t));
	assert_true(find_scn(path, ".gopclntab", &off, &size, NULL));
	t->file = read_all(path, &t->flen);
	assert_true(off + size <= t->flen);
	t->tab = t->file + off;
	t->len = (size_t)size;
	assert_int_equal(gopclntab_header(t->tab, t->len, &t->h), 0);
	t->n = gopclntab_funcs(t->tab, t->len, &t->h, &t->f);
	assert_true(t->n > 1000);
}

static void table_free(struct table *t)
{
	free(t->f);
	free(t->file);
}

/* Names as the ELF symbol table spells them ('·' as '.'). */
static bool name_eq_dotted(const char *a, const char *b)
{
	while (*a && *b) {
		if ((unsigned char)a[0] == 0xc2 && (unsigned char)a[1] == 0xb7) {
			if (*b != '.')
				return false;
			a += 2;
			b++;
			continue;
		}
		if (*a++ != *b++)
			return false;
	}
	return !*a && !*b;
}

static void test_reader_on_real_table(void **state)
{
	struct table t;
	struct objfile *ef = NULL;

	(void)state;
	table_load(&t, fx("goctl"));
	assert_int_equal(t.h.version, GOPCLNTAB_118);	/* Go 1.19 */
	assert_int_equal(t.h.ptrsize, 8);
	assert_int_equal(t.h.quantum, 1);
	assert_int_equal(objfile_open(fx("goctl-stripped"), &ef), 0);
	/* the same build but for its symbols: the same functions */
	assert_int_equal((size_t)t.n, ef->nsyms);
	for (ssize_t i = 0; i < t.n; i++) {
		const struct objfile_sym *s = objfile_func_at(ef, t.f[i].entry);

		assert_non_null(s);
		assert_int_equal(s->vaddr, t.f[i].entry);
		assert_int_equal(s->size, t.f[i].end - t.f[i].entry);
		/* the ABI0 one of two functions of a name: NAME.abi0 (mark_abi0) */
		if (strlen(s->name) > 5 && !strcmp(s->name + strlen(s->name) - 5, ".abi0") &&
		    !strstr(t.f[i].name, ".abi0")) {
			char nm[512];

			snprintf(nm, sizeof(nm), "%s.abi0", t.f[i].name);
			assert_true(name_eq_dotted(nm, s->name));
		} else {
			assert_true(name_eq_dotted(t.f[i].name, s->name));
		}
		if (i)
			assert_true(t.f[i].entry >= t.f[i - 1].end);
	}
	objfile_close(ef);
	table_free(&t);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* The real table's _func record of function i (1.18 layout). */
static const uint8_t *real_func(const struct table *t, size_t i)
{
	uint64_t foff = get32(t->tab + t->h.functab_off + (2 * i + 1) * 4);

	return t->tab + t->h.funcdata_off + foff;
}

static void expect_same_funcs(const struct table *t, const uint8_t *tab, size_t len,
			      unsigned version)
{
	struct gopclntab_hdr h;
	struct gopclntab_func *f = NULL;
	ssize_t n;

	assert_int_equal(gopclntab_header(tab, len, &h), 0);
	assert_int_equal(h.version, version);
	n = gopclntab_funcs(tab, len, &h, &f);
	assert_int_equal(n, t->n);
	for (ssize_t i = 0; i < n; i++) {
		assert_string_equal(f[i].name, t->f[i].name);
		assert_int_equal(f[i].entry, t->f[i].entry);
		assert_int_equal(f[i].end, t->f[i].end);
		assert_true(f[i].name >= (const char *)tab && f[i].name < (const char *)tab + len);
	}
	free(f);
}

/* The real functions in the Go 1.2-1.15 layout (ver 12) or the 1.16-1.17 one
 * (ver 116), with their names and their pc tables copied over; Go 1.20's
 * layout is 1.18's with another magic. */
static uint8_t *rewrite(const struct table *t, unsigned ver, size_t *outlen)
{
	size_t n = (size_t)t->n, names = 0, pctab_len = t->len - t->h.pctab_off;
	size_t hdr, functab, funcs, name_off, pctab, len;
	uint8_t *b;
	size_t np = 0;

	for (size_t i = 0; i < n; i++)
		names += strlen(t->f[i].name) + 1;
	/* header | functab (n pairs + end, 8 bytes each) [| fileoff] | _funcs
	 * (entry + 9 fields) | names | pc tables */
	hdr = ver == 12 ? 16 : 8 + 7 * 8;
	functab = hdr;
	funcs = functab + (2 * n + 1) * 8 + 8;
	name_off = funcs + n * (8 + 9 * 4);
	pctab = name_off + names;
	len = pctab + pctab_len;
	b = calloc(1, len);
	assert_non_null(b);
	put32(b, ver == 12 ? GOPCLNTAB_MAGIC_12 : GOPCLNTAB_MAGIC_116);
	b[6] = 1;
	b[7] = 8;
	put64(b + 8, n);
	if (ver == 116) {
		put64(b + 8 + 2 * 8, name_off);		/* funcnameOffset */
		put64(b + 8 + 3 * 8, pctab);		/* cuOffset: unused here */
		put64(b + 8 + 4 * 8, pctab);		/* filetabOffset: unused here */
		put64(b + 8 + 5 * 8, pctab);		/* pctabOffset */
		put64(b + 8 + 6 * 8, functab);		/* pclnOffset */
	}
	memcpy(b + pctab, t->tab + t->h.pctab_off, pctab_len);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *rf = real_func(t, i);
		uint8_t *f = b + funcs + i * (8 + 9 * 4);
		/* _func offsets: from the table (1.2) or the functab (1.16) */
		uint64_t foff = (uint64_t)(f - b) - (ver == 12 ? 0 : functab);
		uint32_t nameoff = (uint32_t)(ver == 12 ? name_off + np : np);
		uint32_t pcsp = get32(rf + 4 + 3 * 4);

		put64(b + functab + 2 * i * 8, t->f[i].entry);
		put64(b + functab + (2 * i + 1) * 8, foff);
		put64(f, t->f[i].entry);
		put32(f + 8, nameoff);
		memcpy(f + 12, rf + 8, 2 * 4);			/* args, deferreturn */
		/* pc tables: from the table's start (1.2) or pctabOffset */
		put32(f + 20, pcsp ? (uint32_t)(pcsp + (ver == 12 ? pctab : 0)) : 0);
		memcpy(b + name_off + np, t->f[i].name, strlen(t->f[i].name) + 1);
		np += strlen(t->f[i].name) + 1;
	}
	/* the end of the last function: the real table's final entry */
	put64(b + functab + 2 * n * 8,
	      (uint64_t)get32(t->tab + t->h.functab_off + 2 * n * 4) + t->h.text_start);
	*outlen = len;
	return b;
}

static void test_older_layouts_and_go120(void **state)
{
	struct table t;
	uint8_t *b;
	size_t len;

	(void)state;
	table_load(&t, fx("goctl"));
	b = rewrite(&t, 12, &len);
	expect_same_funcs(&t, b, len, GOPCLNTAB_12);
	free(b);
	b = rewrite(&t, 116, &len);
	expect_same_funcs(&t, b, len, GOPCLNTAB_116);
	free(b);
	b = malloc(t.len);
	assert_non_null(b);
	memcpy(b, t.tab, t.len);
	put32(b, GOPCLNTAB_MAGIC_120);
	expect_same_funcs(&t, b, t.len, GOPCLNTAB_120);
	free(b);
	table_free(&t);
}

/* ---- truncated, corrupted, absurd ----------------------------------- */

/* Parse tab[0..len) from an exact-size heap copy; whatever it gives must be
 * sane: an error, or functions in order, each one of the real table's
 * entries when real is given, names inside the copy. The count, or -1. */
static ssize_t parse_copy(const uint8_t *tab, size_t len, const struct table *real)
{
	uint8_t *c = malloc(len ? len : 1);
	struct gopclntab_hdr h;
	struct gopclntab_func *f = NULL;
	ssize_t n;

	assert_non_null(c);
	memcpy(c, tab, len);
	if (gopclntab_header(c, len, &h)) {
		free(c);
		return -1;
	}
	n = gopclntab_funcs(c, len, &h, &f);
	if (n < 0) {
		assert_int_equal(n, -EINVAL);
		assert_null(f);
		free(c);
		return -1;
	}
	assert_true((n == 0) == (f == NULL));
	for (ssize_t i = 0; i < n; i++) {
		size_t nl = strlen(f[i].name);

		assert_true(f[i].name >= (const char *)c &&
			    f[i].name + nl < (const char *)c + len);
		assert_true(nl > 0);
		assert_true(f[i].end >= f[i].entry);
		if (i)
			assert_true(f[i].entry >= f[i - 1].entry);
		if (real) {
			ssize_t k = 0;

			while (k < real->n && real->f[k].entry != f[i].entry)
				k++;
			assert_true(k < real->n);
		}
	}
	free(f);
	free(c);
	return n;
}

static void test_truncated_tables(void **state)
{
	struct table t;
	size_t hdr_end;

	(void)state;
	table_load(&t, fx("goctl"));
	/* every prefix of the header (and a little more) */
	hdr_end = 8 + 8 * (size_t)t.h.ptrsize + 256;
	for (size_t l = 0; l <= hdr_end; l++)
		assert_int_equal(parse_copy(t.tab, l, &t), -1);	/* the functab is further */
	/* every 7th through the start of the functab, then every 997th to
	 * the end: cut entries, _func records, names and pc tables */
	for (size_t l = hdr_end; l < t.h.functab_off + 4096; l += 7)
		assert_true(parse_copy(t.tab, l, &t) <= t.n);
	for (size_t l = (size_t)t.h.functab_off + 4096; l < t.len; l += 997)
		assert_true(parse_copy(t.tab, l, &t) <= t.n);
	assert_int_equal(parse_copy(t.tab, t.len, &t), t.n);
	table_free(&t);
}

static void test_corrupted_tables(void **state)
{
	struct table t;
	uint8_t *b;
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	(void)state;
	table_load(&t, fx("goctl"));
	b = malloc(t.len);
	assert_non_null(b);
	/* every byte of the header, flipped */
	for (size_t i = 0; i < 8 + 8 * (size_t)t.h.ptrsize; i++) {
		static const uint8_t masks[] = {0xff, 0x80, 0x01, 0x10};

		for (size_t m = 0; m < sizeof(masks); m++) {
			memcpy(b, t.tab, t.len);
			b[i] ^= masks[m];
			parse_copy(b, t.len, NULL);
		}
	}
	/* bytes of the functab, the _func records, names and pc tables */
	for (int k = 0; k < 1500; k++) {
		size_t pos;

		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		pos = (size_t)(seed % t.len);
		if (k % 3 == 0)	/* one in three in the functab */
			pos = (size_t)t.h.functab_off + (size_t)(seed % ((size_t)t.n * 8));
		memcpy(b, t.tab, t.len);
		b[pos] ^= (uint8_t)(seed >> 32 | 1);
		parse_copy(b, t.len, NULL);
	}
	free(b);
	table_free(&t);
}

static void test_absurd_counts_and_offsets(void **state)
{
	static const uint64_t vals[] = {
		UINT64_MAX, UINT64_MAX - 7, 1ull << 63, 1ull << 40, 0x80000000u, 0xffffffffu,
		0, 1, 7,
	};
	struct table t;
	uint8_t *b;

	(void)state;
	table_load(&t, fx("goctl"));
	b = malloc(t.len);
	assert_non_null(b);
	/* each header word (nfunc, nfiles, textStart, the offsets) */
	for (unsigned w = 0; w < 8; w++) {
		for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]) + 3; k++) {
			uint64_t v = k < sizeof(vals) / sizeof(vals[0]) ? vals[k] :
				     k == sizeof(vals) / sizeof(vals[0]) ? t.len :
				     k == sizeof(vals) / sizeof(vals[0]) + 1 ? t.len - 1 : t.len / 8;
			ssize_t n;

			memcpy(b, t.tab, t.len);
			put64(b + 8 + 8 * w, v);
			n = parse_copy(b, t.len, NULL);
			if (w == 0 && v > (uint64_t)t.len)
				assert_int_equal(n, -1);	/* cannot fit */
		}
	}
	/* a text start that overflows every entry */
	memcpy(b, t.tab, t.len);
	put64(b + 8 + 2 * 8, UINT64_MAX - 16);
	assert_int_equal(parse_copy(b, t.len, NULL), -1);
	/* every _func offset past the end: no function, not a crash */
	memcpy(b, t.tab, t.len);
	for (ssize_t i = 0; i < t.n; i++)
		put32(b + t.h.functab_off + (2 * (size_t)i + 1) * 4, 0xfffffff0u);
	assert_int_equal(parse_copy(b, t.len, NULL), 0);
	/* entries out of order */
	memcpy(b, t.tab, t.len);
	put32(b + t.h.functab_off + 2 * 4 * 10, 0xffffff);
	assert_int_equal(parse_copy(b, t.len, NULL), -1);
	free(b);
	table_free(&t);
}

/* objfile_open on a stripped Go program whose table is damaged: fewer
 * functions or none, and a warning, never a crash or a read out of the
 * file. */
static void test_elf_open_damaged(void **state)
{
	uint64_t off, size;
	size_t len;
	uint8_t *b;
	struct objfile *ef = NULL;

	(void)state;
	assert_true(find_scn(fx("goctl-stripped"), ".gopclntab", &off, &size, NULL));
	b = read_all(fx("goctl-stripped"), &len);
	/* the functab zeroed: entries no longer match their _funcs */
	{
		uint8_t *c = malloc(len);
		struct gopclntab_hdr h;

		assert_non_null(c);
		memcpy(c, b, len);
		assert_int_equal(gopclntab_header(c + off, (size_t)size, &h), 0);
		memset(c + off + h.functab_off, 0, (size_t)h.nfunc * 8);
		write_all(fx("goctl-damaged"), c, len);
		free(c);
		assert_int_equal(objfile_open(fx("goctl-damaged"), &ef), 0);
		assert_true(ef->nsyms <= 1);
		assert_true(ef->is_go);
		objfile_close(ef);
	}
	/* the file cut in the middle of its table (section past the end) */
	write_all(fx("goctl-cut"), b, (size_t)(off + size / 2));
	if (objfile_open(fx("goctl-cut"), &ef) == 0) {
		assert_int_equal(ef->nsyms, 0);
		objfile_close(ef);
	}
	/* the magic gone: not a table, no functions */
	b[off] ^= 0xff;
	write_all(fx("goctl-nomagic"), b, len);
	assert_int_equal(objfile_open(fx("goctl-nomagic"), &ef), 0);
	assert_int_equal(ef->nsyms, 0);
	assert_true(ef->is_go);
	objfile_close(ef);
	free(b);
}

/* ---- unwind rows from pcsp ------------------------------------------- */

/* The row of table u at link-time address pc; NULL: outside its span. */
static const struct stack_row *row_at(const struct stack_utab *u, uint64_t pc)
{
	uint32_t lo = 0, hi = u->tab.nrows;

	if (pc < u->tab.base || pc - u->tab.base >= u->tab.span)
		return NULL;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (u->rows[mid].pc <= pc - u->tab.base)
			lo = mid;
		else
			hi = mid;
	}
	return &u->rows[lo];
}

/* The stripped build's table (Go's pcsp tables) against the unstripped
 * build's (the .debug_frame Go's linker wrote): at every address of every
 * Go function, the same row. */
static void compare_rows(const char *full, const char *stripped)
{
	struct stack_utab *uf = NULL, *us = NULL;
	struct objfile *ef = NULL;
	size_t funcs = 0, pcs = 0;

	assert_int_equal(stack_utab_build(full, &uf), 0);
	assert_int_equal(stack_utab_build(stripped, &us), 0);
	/* the unstripped build's CFI covers every Go function */
	assert_int_equal(uf->go_rows, 0);
	assert_true(us->go_rows > 1000);
	assert_int_equal(objfile_open(stripped, &ef), 0);
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct objfile_sym *s = &ef->syms[i];

		if (!(s->flags & OBJFILE_SYM_GOPCLNTAB))
			continue;
		funcs++;
		for (uint64_t pc = s->vaddr; pc < s->vaddr + s->size; pc++) {
			const struct stack_row *a = row_at(uf, pc), *b = row_at(us, pc);

			if (!a || !b || a->op != b->op || a->cfa_off != b->cfa_off ||
			    a->rbp_off != b->rbp_off)
				fail_msg("%s at 0x%" PRIx64 ": %s has op %d cfa %d, %s op %d cfa %d",
					 s->name, pc, full, a ? a->op : -1, a ? a->cfa_off : 0,
					 stripped, b ? b->op : -1, b ? b->cfa_off : 0);
			pcs++;
		}
	}
	assert_true(funcs > 1000 && pcs > 100000);
	objfile_close(ef);
	stack_utab_free(uf);
	stack_utab_free(us);
}

static void test_unwind_rows_stripped_equal_debug_frame(void **state)
{
	(void)state;
	compare_rows(fx("goctl"), fx("goctl-stripped"));
	compare_rows(fx("goctl-pie"), fx("goctl-pie-stripped"));
	/* C's _start and the cgo runtime's C code keep their .eh_frame */
	compare_rows(fx("goctl-extpie"), fx("goctl-extpie-stripped"));
}

/* The line of "func NAME(" (or a method "func (...) NAME(") in goctl's
 * main.go; 0: none. */
static unsigned source_line(const char *path, const char *name)
{
	char buf[512], pat[160];
	unsigned n = 0;
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	snprintf(pat, sizeof(pat), " %s(", name);
	while (fgets(buf, sizeof(buf), f)) {
		n++;
		if (!strncmp(buf, "func ", 5) && strstr(buf, pat)) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	return 0;
}

/* A stripped build's source positions from pcfile and pcln: each main.*
 * function's entry is at its "func" line of main.go; the runtime's in
 * Go's own sources. */
static void test_stripped_source_lines(void **state)
{
	char src[PATH_MAX + 96];
	struct objfile *ef = NULL;
	const char *file;
	unsigned line, checked = 0;

	(void)state;
	snprintf(src, sizeof(src), "%s/../../../targets/goctl/main.go", fxdir);
	assert_int_equal(objfile_open(fx("goctl-stripped"), &ef), 0);
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct objfile_sym *s = &ef->syms[i];
		const char *dot;
		unsigned want;

		if (strncmp(s->name, "main.", 5) || strchr(s->name + 5, '.') ||
		    !(want = source_line(src, s->name + 5)))
			continue;
		assert_int_equal(objfile_go_line(ef, s->vaddr, &file, &line), 0);
		dot = strrchr(file, '/');
		assert_non_null(dot);
		assert_string_equal(dot, "/main.go");
		assert_int_equal(line, want);
		checked++;
	}
	assert_true(checked >= 3);
	{
		const struct objfile_sym *s = NULL;

		assert_int_equal(objfile_func_lookup(ef, "runtime.main", &s, NULL, NULL), 0);
		assert_int_equal(objfile_go_line(ef, s->vaddr, &file, &line), 0);
		assert_non_null(strstr(file, "runtime/proc.go"));
		/* past the end of the code: none */
		assert_int_equal(objfile_go_line(ef, 0x10, &file, &line), -ENOENT);
	}
	objfile_close(ef);
}

/* ---- setup ------------------------------------------------------------ */

static int group_setup(void **state)
{
	char path[PATH_MAX + 32];
	FILE *f;

	(void)state;
	if (fixture_build("go", fxdir, sizeof(fxdir), tmpdir, sizeof(tmpdir)))
		return -1;
	snprintf(path, sizeof(path), "%s/goversion.txt", tmpdir);
	f = fopen(path, "r");
	if (!f || !fgets(goversion, sizeof(goversion), f))
		return -1;
	fclose(f);
	goversion[strcspn(goversion, "\n")] = 0;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return fixture_remove(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exe_stripped_matches_symtab),
		cmocka_unit_test(test_go_type_names_and_abi0),
		cmocka_unit_test(test_pie_stripped_matches_symtab),
		cmocka_unit_test(test_external_pie_stripped_matches_symtab),
		cmocka_unit_test(test_no_section_headers),
		cmocka_unit_test(test_reader_on_real_table),
		cmocka_unit_test(test_older_layouts_and_go120),
		cmocka_unit_test(test_truncated_tables),
		cmocka_unit_test(test_corrupted_tables),
		cmocka_unit_test(test_absurd_counts_and_offsets),
		cmocka_unit_test(test_elf_open_damaged),
		cmocka_unit_test(test_unwind_rows_stripped_equal_debug_frame),
		cmocka_unit_test(test_stripped_source_lines),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
