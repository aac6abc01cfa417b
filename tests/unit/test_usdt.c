/* Tests of src/usdt/usdt.c (and the src/objfile/ helpers it uses): the note parser
 * on byte vectors built here, usdt_read on fixtures built at run time
 * (tests/unit/fixtures/usdt/build.sh) checked against readelf and nm, and
 * the argument-spec parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "objfile/objfile.h"
#include "fixture.h"
#include "usdt/usdt.h"

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

/* The last error logged. */
static char last_log[1024];

static void capture_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level == USC_LOG_ERROR)
		snprintf(last_log, sizeof(last_log), "%s", msg);
}

/* A section of notes under construction. */
struct sec {
	unsigned char b[4096];
	size_t len;
};

static void put32(struct sec *s, uint32_t v)
{
	memcpy(s->b + s->len, &v, 4);
	s->len += 4;
}

static void put_bytes(struct sec *s, const void *p, size_t n)
{
	memcpy(s->b + s->len, p, n);
	s->len += n;
}

static void pad4(struct sec *s)
{
	while (s->len % 4)
		s->b[s->len++] = 0;
}

/* One note: header, owner (namesz bytes of name), desc; both padded. */
static void add_note(struct sec *s, uint32_t namesz, const char *name, uint32_t type,
		     const void *desc, uint32_t descsz)
{
	put32(s, namesz);
	put32(s, descsz);
	put32(s, type);
	put_bytes(s, name, namesz);
	pad4(s);
	put_bytes(s, desc, descsz);
	pad4(s);
}

/* A stapsdt desc; returns its length. */
static uint32_t mkdesc(unsigned char *d, uint64_t pc, uint64_t base, uint64_t sema,
		       const char *prov, const char *name, const char *args)
{
	size_t n = 24;

	memcpy(d, &pc, 8);
	memcpy(d + 8, &base, 8);
	memcpy(d + 16, &sema, 8);
	memcpy(d + n, prov, strlen(prov) + 1);
	n += strlen(prov) + 1;
	memcpy(d + n, name, strlen(name) + 1);
	n += strlen(name) + 1;
	memcpy(d + n, args, strlen(args) + 1);
	n += strlen(args) + 1;
	return (uint32_t)n;
}

static void add_stap(struct sec *s, uint64_t pc, uint64_t base, uint64_t sema,
		     const char *prov, const char *name, const char *args)
{
	unsigned char d[512];
	uint32_t n = mkdesc(d, pc, base, sema, prov, name, args);

	add_note(s, 8, "stapsdt", 3, d, n);
}

static void assert_note(const struct usdt_note *n, uint64_t pc, uint64_t base, uint64_t sema,
			const char *prov, const char *name, const char *args)
{
	assert_int_equal(n->pc, pc);
	assert_int_equal(n->base, base);
	assert_int_equal(n->sema, sema);
	assert_string_equal(n->provider, prov);
	assert_string_equal(n->name, name);
	assert_string_equal(n->args, args);
}

/* ---- (a) the note parser ---------------------------------------------- */

static void test_notes_one(void **state)
{
	struct sec s = {0};
	struct usdt_note *v;
	size_t n;

	(void)state;
	add_stap(&s, 0x1139, 0x2004, 0, "prov", "probe", "-4@%edi 8@%rsi");
	assert_int_equal(usdt_parse_notes(s.b, s.len, 0x2004, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_note(&v[0], 0x1139, 0x2004, 0, "prov", "probe", "-4@%edi 8@%rsi");
	usdt_notes_free(v, n);

	/* actual_base 0: no adjustment whatever the note says */
	assert_int_equal(usdt_parse_notes(s.b, s.len, 0, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_note(&v[0], 0x1139, 0x2004, 0, "prov", "probe", "-4@%edi 8@%rsi");
	usdt_notes_free(v, n);
}

static void test_notes_empty(void **state)
{
	struct sec s = {0};
	struct usdt_note *v = (void *)1;
	size_t n = 99;

	(void)state;
	assert_int_equal(usdt_parse_notes(s.b, 0, 0, &v, &n), 0);
	assert_int_equal(n, 0);
	assert_null(v);
	assert_int_equal(usdt_parse_notes(NULL, 0, 0, &v, &n), 0);
	assert_int_equal(n, 0);
	usdt_notes_free(NULL, 0);

	/* a probe without arguments, and one whose desc has no final padding */
	add_stap(&s, 1, 0, 0, "p", "n", "");
	assert_int_equal(usdt_parse_notes(s.b, s.len, 0, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_note(&v[0], 1, 0, 0, "p", "n", "");
	usdt_notes_free(v, n);
	/* desc is 24 + 2 + 2 + 1 = 29 bytes: 3 bytes of padding dropped */
	assert_int_equal(usdt_parse_notes(s.b, s.len - 3, 0, &v, &n), 0);
	assert_int_equal(n, 1);
	usdt_notes_free(v, n);
}

static void test_notes_several(void **state)
{
	struct sec s = {0};
	struct usdt_note *v;
	size_t n;

	(void)state;
	add_stap(&s, 0x1000, 0x2000, 0, "a", "first", "");
	add_stap(&s, 0x1010, 0x2000, 0x4010, "abc", "second", "8@%rax");
	add_stap(&s, 0x1020, 0x2000, 0, "provider_name", "x", "-1@$1 2@(%rax,%rbx,2)");
	assert_int_equal(usdt_parse_notes(s.b, s.len, 0x2000, &v, &n), 0);
	assert_int_equal(n, 3);
	assert_note(&v[0], 0x1000, 0x2000, 0, "a", "first", "");
	assert_note(&v[1], 0x1010, 0x2000, 0x4010, "abc", "second", "8@%rax");
	assert_note(&v[2], 0x1020, 0x2000, 0, "provider_name", "x", "-1@$1 2@(%rax,%rbx,2)");
	usdt_notes_free(v, n);
}

static void test_notes_skip_other(void **state)
{
	struct sec s = {0};
	struct usdt_note *v;
	unsigned char d[64] = {1, 2, 3, 4, 5, 6, 7, 8};
	size_t n;

	(void)state;
	add_note(&s, 4, "GNU", 3, d, 20);			/* a build id */
	add_stap(&s, 0x10, 0, 0, "p", "keep1", "");
	add_note(&s, 8, "stapsdt", 1, d, 30);			/* stapsdt, not type 3 */
	add_note(&s, 7, "stapsd", 3, d, 30);			/* another owner */
	add_note(&s, 9, "stapsdtx", 3, d, 30);		/* a longer owner */
	add_note(&s, 1, "", 3, d, 0);				/* owner "", empty desc */
	add_stap(&s, 0x20, 0, 0, "p", "keep2", "4@%eax");
	assert_int_equal(usdt_parse_notes(s.b, s.len, 0, &v, &n), 0);
	assert_int_equal(n, 2);
	assert_note(&v[0], 0x10, 0, 0, "p", "keep1", "");
	assert_note(&v[1], 0x20, 0, 0, "p", "keep2", "4@%eax");
	usdt_notes_free(v, n);
}

static void test_notes_base_adjust(void **state)
{
	struct sec s = {0};
	struct usdt_note *v;
	size_t n;

	(void)state;
	add_stap(&s, 0x1139, 0x2004, 0, "p", "nosema", "");
	add_stap(&s, 0x1200, 0x2004, 0x4010, "p", "sema", "");
	/* .stapsdt.base moved up by 0x10000 */
	assert_int_equal(usdt_parse_notes(s.b, s.len, 0x12004, &v, &n), 0);
	assert_int_equal(n, 2);
	assert_note(&v[0], 0x11139, 0x2004, 0, "p", "nosema", "");	/* sema stays 0 */
	assert_note(&v[1], 0x11200, 0x2004, 0x14010, "p", "sema", "");
	usdt_notes_free(v, n);
	/* moved down */
	assert_int_equal(usdt_parse_notes(s.b, s.len, 0x1004, &v, &n), 0);
	assert_note(&v[0], 0x139, 0x2004, 0, "p", "nosema", "");
	assert_note(&v[1], 0x200, 0x2004, 0x3010, "p", "sema", "");
	usdt_notes_free(v, n);
	/* not moved */
	assert_int_equal(usdt_parse_notes(s.b, s.len, 0x2004, &v, &n), 0);
	assert_note(&v[0], 0x1139, 0x2004, 0, "p", "nosema", "");
	assert_note(&v[1], 0x1200, 0x2004, 0x4010, "p", "sema", "");
	usdt_notes_free(v, n);
}

/* Parse s[0..len) and expect -EINVAL with a log naming note idx at off. */
static void expect_bad(const void *b, size_t len, size_t idx, size_t off, const char *what)
{
	struct usdt_note *v = (void *)1;
	size_t n = 99;
	char want[128];

	last_log[0] = 0;
	usc_set_log(capture_log, NULL);
	assert_int_equal(usdt_parse_notes(b, len, 0, &v, &n), -EINVAL);
	usc_set_log(NULL, NULL);
	assert_null(v);
	assert_int_equal(n, 0);
	snprintf(want, sizeof(want), "note %zu at byte offset %zu: ", idx, off);
	if (!strstr(last_log, want) || !strstr(last_log, what))
		fail_msg("log \"%s\" lacks \"%s\" / \"%s\"", last_log, want, what);
}

static void test_notes_malformed(void **state)
{
	struct sec good = {0}, s;
	unsigned char d[256];
	uint32_t dn;
	size_t g;

	(void)state;
	add_stap(&good, 0x10, 0, 0, "prov", "name", "4@%eax");
	g = good.len;

	/* truncated header: alone, and after a good note */
	expect_bad(good.b, 11, 0, 0, "truncated note header");
	s = good;
	put32(&s, 8);
	put32(&s, 40);
	expect_bad(s.b, s.len, 1, g, "truncated note header");

	/* descsz beyond the section */
	s = good;
	dn = mkdesc(d, 1, 2, 3, "p", "n", "");
	add_note(&s, 8, "stapsdt", 3, d, dn);
	memcpy(s.b + g + 4, &(uint32_t){dn + 100}, 4);
	expect_bad(s.b, s.len, 1, g, "desc runs past the end of the section");
	/* namesz beyond the section */
	memcpy(s.b + g, &(uint32_t){0x7fffffff}, 4);
	expect_bad(s.b, s.len, 1, g, "owner name runs past the end of the section");
	/* huge descsz: no overflow */
	s = good;
	memcpy(s.b + 4, &(uint32_t){UINT32_MAX}, 4);
	expect_bad(s.b, s.len, 0, 0, "desc runs past the end of the section");

	/* namesz 0 */
	s = (struct sec){0};
	add_note(&s, 0, "", 3, d, dn);
	expect_bad(s.b, s.len, 0, 0, "namesz 0");

	/* desc shorter than 24 */
	s = good;
	add_note(&s, 8, "stapsdt", 3, d, 23);
	expect_bad(s.b, s.len, 1, g, "shorter than its 24-byte header");
	s = (struct sec){0};
	add_note(&s, 8, "stapsdt", 3, d, 0);
	expect_bad(s.b, s.len, 0, 0, "shorter than its 24-byte header");

	/* provider without NUL: the desc ends inside it */
	memset(d, 0, sizeof(d));
	memcpy(d + 24, "provider", 8);
	s = (struct sec){0};
	add_note(&s, 8, "stapsdt", 3, d, 32);
	expect_bad(s.b, s.len, 0, 0, "provider is not NUL-terminated");
	s = (struct sec){0};
	add_note(&s, 8, "stapsdt", 3, d, 24);	/* no provider at all */
	expect_bad(s.b, s.len, 0, 0, "provider is not NUL-terminated");

	/* name without NUL */
	memcpy(d + 24, "p\0name", 6);
	s = good;
	add_note(&s, 8, "stapsdt", 3, d, 30);
	expect_bad(s.b, s.len, 1, g, "probe name is not NUL-terminated");
	s = (struct sec){0};
	add_note(&s, 8, "stapsdt", 3, d, 26);	/* the desc ends after "p\0" */
	expect_bad(s.b, s.len, 0, 0, "probe name is not NUL-terminated");

	/* args without NUL */
	memcpy(d + 24, "p\0n\0-4@%eax", 11);
	s = (struct sec){0};
	add_note(&s, 8, "stapsdt", 3, d, 35);
	expect_bad(s.b, s.len, 0, 0, "argument string is not NUL-terminated");
	s = (struct sec){0};
	add_note(&s, 8, "stapsdt", 3, d, 28);	/* ends after "n\0" */
	expect_bad(s.b, s.len, 0, 0, "argument string is not NUL-terminated");

	/* empty provider / name */
	s = (struct sec){0};
	add_stap(&s, 1, 0, 0, "", "n", "");
	expect_bad(s.b, s.len, 0, 0, "empty provider");
	s = (struct sec){0};
	add_stap(&s, 1, 0, 0, "p", "", "");
	expect_bad(s.b, s.len, 0, 0, "empty probe name");

	/* a bad non-stapsdt note is still refused: the walk cannot go on */
	s = good;
	add_note(&s, 4, "GNU", 1, d, 8);
	memcpy(s.b + g + 4, &(uint32_t){200}, 4);
	expect_bad(s.b, s.len, 1, g, "desc runs past the end of the section");
}

/* ---- (b) usdt_read on real binaries ------------------------------------ */

struct rnote {
	char provider[128], name[128], args[512];
	uint64_t pc, base, sema;
};

/* The stapsdt notes per `readelf -n`, in file order. */
static size_t readelf_notes(const char *file, struct rnote *out, size_t max)
{
	char cmd[PATH_MAX + 64], line[1024];
	size_t n = 0;
	bool in = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "LC_ALL=C readelf -nW '%s'", file);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *s = line;
		size_t l = strlen(line);

		if (l && line[l - 1] == '\n')
			line[--l] = 0;
		if (!strncmp(line, "Displaying notes found in: ", 27)) {
			in = !strcmp(line + 27, ".note.stapsdt");
			continue;
		}
		if (!in)
			continue;
		while (*s == ' ')
			s++;
		if (!strncmp(s, "stapsdt ", 8)) {
			assert_true(n < max);
			memset(&out[n++], 0, sizeof(*out));
			/* with -W the provider follows on the same line */
			if ((s = strstr(s, "Provider: ")) == NULL)
				continue;
		}
		if (n && !strncmp(s, "Provider: ", 10)) {
			snprintf(out[n - 1].provider, sizeof(out[n - 1].provider), "%s", s + 10);
		} else if (n && !strncmp(s, "Name: ", 6)) {
			snprintf(out[n - 1].name, sizeof(out[n - 1].name), "%s", s + 6);
		} else if (n && !strncmp(s, "Arguments:", 10)) {
			snprintf(out[n - 1].args, sizeof(out[n - 1].args), "%s",
				 s[10] == ' ' ? s + 11 : s + 10);
		} else if (n && !strncmp(s, "Location: ", 10)) {
			assert_int_equal(sscanf(s, "Location: %" SCNx64 ", Base: %" SCNx64
						", Semaphore: %" SCNx64, &out[n - 1].pc,
						&out[n - 1].base, &out[n - 1].sema), 3);
		}
	}
	pclose(p);
	return n;
}

/* Address of a symbol per nm (type 0: any), or UINT64_MAX. */
static uint64_t nm_addr(const char *file, const char *name, char type)
{
	char cmd[PATH_MAX + 64], line[1024];
	uint64_t res = UINT64_MAX;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm --defined-only '%s'", file);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char nm[512], t;
		uint64_t a;

		if (sscanf(line, "%" SCNx64 " %c %511s", &a, &t, nm) == 3 && !strcmp(nm, name) &&
		    (!type || t == type) && res == UINT64_MAX)
			res = a;
	}
	pclose(p);
	if (res == UINT64_MAX)
		fail_msg("nm: no %s (%c) in %s", name, type ? type : '*', file);
	return res;
}

/* sh_addr and size of a section per `readelf -SW`, false if absent. */
static bool readelf_section(const char *file, const char *name, uint64_t *addr, uint64_t *size)
{
	char cmd[PATH_MAX + 128], line[1024];
	bool found = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "LC_ALL=C readelf -SW '%s' | sed 's/^ *\\[ *[0-9]*\\] *//'", file);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char nm[256], type[64];
		uint64_t a, off, sz;

		if (sscanf(line, "%255s %63s %" SCNx64 " %" SCNx64 " %" SCNx64, nm, type, &a, &off,
			   &sz) == 5 && !strcmp(nm, name)) {
			*addr = a;
			*size = sz;
			found = true;
		}
	}
	pclose(p);
	return found;
}

static void check_read(const char *file)
{
	struct rnote want[32];
	size_t nwant = readelf_notes(file, want, 32), n;
	struct objfile *ef;
	struct usdt_note *v;
	uint64_t baddr, bsize;

	assert_int_equal(nwant, 5);
	assert_true(readelf_section(file, ".stapsdt.base", &baddr, &bsize));
	assert_int_equal(objfile_open(file, &ef), 0);
	assert_int_equal(usdt_read(ef, &v, &n), 0);
	assert_int_equal(n, nwant);
	for (size_t i = 0; i < n; i++) {
		assert_note(&v[i], want[i].pc, want[i].base, want[i].sema, want[i].provider,
			    want[i].name, want[i].args);
		assert_int_equal(v[i].base, baddr);
		assert_true(objfile_vaddr_is_exec(ef, v[i].pc));
	}
	/* the probes of main.c and sema.c */
	assert_string_equal(v[0].name, "noargs");
	assert_string_equal(v[1].name, "regs");
	assert_string_equal(v[2].name, "consts");
	assert_string_equal(v[3].name, "globals");
	assert_string_equal(v[4].name, "myprobe");
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(v[i].sema, 0);
	assert_int_equal(v[4].sema, nm_addr(file, "myprov_myprobe_semaphore", 'D'));

	/* every spec the compiler wrote parses */
	for (size_t i = 0; i < n; i++) {
		struct usc_fetcharg args[USDT_MAX_ARGS];
		struct usdt_arg_error err;
		unsigned na;

		if (usdt_parse_args(v[i].args, ef, args, USDT_MAX_ARGS, &na, &err))
			fail_msg("%s: \"%s\": %s at %zu", file, v[i].args, err.msg, err.pos);
	}
	assert_string_equal(v[2].args, "-4@$42 -4@$-1");
	usdt_notes_free(v, n);
	objfile_close(ef);
}

static void test_read_pie(void **state)
{
	(void)state;
	check_read(fx("usdt_pie"));
}

static void test_read_nopie(void **state)
{
	(void)state;
	check_read(fx("usdt_nopie"));
}

static void test_read_O0(void **state)
{
	(void)state;
	check_read(fx("usdt_O0"));
}

static void test_read_none(void **state)
{
	struct objfile *ef;
	struct usdt_note *v = (void *)1;
	size_t n = 99;

	(void)state;
	assert_int_equal(objfile_open(fx("plain"), &ef), 0);
	assert_int_equal(usdt_read(ef, &v, &n), 0);
	assert_int_equal(n, 0);
	assert_null(v);
	objfile_close(ef);
}

static void test_section_data(void **state)
{
	struct objfile *ef;
	const void *data;
	size_t len;
	uint64_t addr, raddr, rsize;

	(void)state;
	assert_int_equal(objfile_open(fx("usdt_pie"), &ef), 0);
	assert_true(readelf_section(fx("usdt_pie"), ".stapsdt.base", &raddr, &rsize));
	assert_int_equal(objfile_section_data(ef, ".stapsdt.base", &data, &len, &addr), 0);
	assert_int_equal(addr, raddr);
	assert_int_equal(len, rsize);
	assert_non_null(data);
	assert_true(readelf_section(fx("usdt_pie"), ".note.stapsdt", &raddr, &rsize));
	assert_int_equal(objfile_section_data(ef, ".note.stapsdt", &data, &len, &addr), 0);
	assert_int_equal(len, rsize);
	assert_int_equal(addr, 0);
	assert_int_equal(memcmp((const char *)data + 12, "stapsdt", 8), 0);
	assert_true(readelf_section(fx("usdt_pie"), ".bss", &raddr, &rsize));
	assert_int_equal(objfile_section_data(ef, ".bss", &data, &len, &addr), 0);
	assert_null(data);				/* SHT_NOBITS */
	assert_int_equal(len, 0);
	assert_int_equal(addr, raddr);
	assert_int_equal(objfile_section_data(ef, ".text", NULL, NULL, NULL), 0);
	assert_int_equal(objfile_section_data(ef, ".no.such.section", &data, &len, &addr), -ENOENT);
	assert_int_equal(objfile_section_data(ef, "", &data, &len, &addr), -ENOENT);
	assert_int_equal(objfile_section_data(ef, ".stapsdt", &data, &len, &addr), -ENOENT);
	objfile_close(ef);
}

static void test_symbol_vaddr(void **state)
{
	struct objfile *ef;
	uint64_t a;
	const char *f = fx("usdt_pie");

	(void)state;
	assert_int_equal(objfile_open(f, &ef), 0);
	assert_int_equal(objfile_symbol_vaddr(ef, "usdt_counter", &a), 0);	/* object */
	assert_int_equal(a, nm_addr(f, "usdt_counter", 'D'));
	assert_int_equal(objfile_symbol_vaddr(ef, "main", &a), 0);		/* function */
	assert_int_equal(a, nm_addr(f, "main", 'T'));
	assert_int_equal(objfile_symbol_vaddr(ef, "work", &a), 0);		/* local function */
	assert_int_equal(a, nm_addr(f, "work", 't'));
	assert_int_equal(objfile_symbol_vaddr(ef, "usdt_local_only", &a), 0);	/* local object */
	assert_int_equal(a, nm_addr(f, "usdt_local_only", 'd'));
	assert_int_equal(objfile_symbol_vaddr(ef, "usdt_dup", &a), 0);	/* global beats local */
	assert_int_equal(a, nm_addr(f, "usdt_dup", 'D'));
	assert_int_not_equal(a, nm_addr(f, "usdt_dup", 'd'));
	assert_int_equal(objfile_symbol_vaddr(ef, "usdt_weak_only", &a), 0);	/* weak, alone */
	assert_int_equal(a, nm_addr(f, "usdt_weak_only", 'V'));
	assert_int_equal(objfile_symbol_vaddr(ef, "myprov_myprobe_semaphore", &a), 0);
	assert_int_equal(a, nm_addr(f, "myprov_myprobe_semaphore", 'D'));
	assert_int_equal(objfile_symbol_vaddr(ef, "usdt_no_such_symbol", &a), -ENOENT);
	assert_int_equal(objfile_symbol_vaddr(ef, "", &a), -ENOENT);
	assert_int_equal(objfile_symbol_vaddr(ef, "usdt_count", &a), -ENOENT);	/* a prefix */
	assert_int_equal(objfile_symbol_vaddr(ef, "puts", &a), -ENOENT);		/* undefined */
	objfile_close(ef);

	/* strong beats a weak symbol of the same name at another address */
	f = fx("usdt_nopie.weak");
	assert_int_equal(objfile_open(f, &ef), 0);
	assert_int_equal(objfile_symbol_vaddr(ef, "usdt_counter", &a), 0);
	assert_int_equal(a, nm_addr(f, "usdt_counter", 'D'));
	assert_int_not_equal(a, nm_addr(f, "usdt_counter", 'V'));
	objfile_close(ef);
}

/* ---- (c) argument specs ------------------------------------------------ */

static struct usc_fetcharg A[USDT_MAX_ARGS + 1];

static unsigned parse_ok(const char *spec, const struct objfile *ef)
{
	struct usdt_arg_error err = {0};
	unsigned n = 999;

	if (usdt_parse_args(spec, ef, A, USDT_MAX_ARGS, &n, &err))
		fail_msg("\"%s\": %s at %zu", spec, err.msg, err.pos);
	return n;
}

static void parse_bad(const char *spec, const struct objfile *ef, size_t pos)
{
	struct usdt_arg_error err = {0};
	unsigned n = 999;

	assert_int_equal(usdt_parse_args(spec, ef, A, USDT_MAX_ARGS, &n, &err), -EINVAL);
	assert_int_equal(n, 0);
	assert_non_null(err.msg);
	assert_true(err.msg[0] != 0);
	if (err.pos != pos)
		fail_msg("\"%s\": error \"%s\" at %zu, expected at %zu", spec, err.msg, err.pos, pos);
	/* and with no error struct */
	assert_int_equal(usdt_parse_args(spec, ef, A, USDT_MAX_ARGS, &n, NULL), -EINVAL);
}

#define INSN(...) ((struct fetch_insn){__VA_ARGS__})

static void assert_prog(const struct usc_fetcharg *a, unsigned ninsn, const struct fetch_insn *want)
{
	assert_int_equal(a->ninsn, ninsn);
	for (unsigned i = 0; i < ninsn; i++) {
		assert_int_equal(a->insn[i].op, want[i].op);
		assert_int_equal(a->insn[i].size, want[i].size);
		assert_int_equal(a->insn[i].reg, want[i].reg);
		assert_int_equal(a->insn[i].imm, want[i].imm);
	}
}

#define PROG(a, ...)                                                            \
	do {                                                                    \
		const struct fetch_insn w_[] = {__VA_ARGS__, INSN(.op = FOP_END)}; \
		assert_prog((a), sizeof(w_) / sizeof(w_[0]), w_);              \
	} while (0)

static const struct {
	const char *name;
	uint8_t reg;
} reg_table[] = {
	{"rax", USC_REG_AX}, {"eax", USC_REG_AX}, {"ax", USC_REG_AX}, {"al", USC_REG_AX},
	{"rbx", USC_REG_BX}, {"ebx", USC_REG_BX}, {"bx", USC_REG_BX}, {"bl", USC_REG_BX},
	{"rcx", USC_REG_CX}, {"ecx", USC_REG_CX}, {"cx", USC_REG_CX}, {"cl", USC_REG_CX},
	{"rdx", USC_REG_DX}, {"edx", USC_REG_DX}, {"dx", USC_REG_DX}, {"dl", USC_REG_DX},
	{"rsi", USC_REG_SI}, {"esi", USC_REG_SI}, {"si", USC_REG_SI}, {"sil", USC_REG_SI},
	{"rdi", USC_REG_DI}, {"edi", USC_REG_DI}, {"di", USC_REG_DI}, {"dil", USC_REG_DI},
	{"rbp", USC_REG_BP}, {"ebp", USC_REG_BP}, {"bp", USC_REG_BP}, {"bpl", USC_REG_BP},
	{"rsp", USC_REG_SP}, {"esp", USC_REG_SP}, {"sp", USC_REG_SP}, {"spl", USC_REG_SP},
	{"r8", USC_REG_R8}, {"r8d", USC_REG_R8}, {"r8w", USC_REG_R8}, {"r8b", USC_REG_R8},
	{"r9", USC_REG_R9}, {"r9d", USC_REG_R9}, {"r9w", USC_REG_R9}, {"r9b", USC_REG_R9},
	{"r10", USC_REG_R10}, {"r10d", USC_REG_R10}, {"r10w", USC_REG_R10}, {"r10b", USC_REG_R10},
	{"r11", USC_REG_R11}, {"r11d", USC_REG_R11}, {"r11w", USC_REG_R11}, {"r11b", USC_REG_R11},
	{"r12", USC_REG_R12}, {"r12d", USC_REG_R12}, {"r12w", USC_REG_R12}, {"r12b", USC_REG_R12},
	{"r13", USC_REG_R13}, {"r13d", USC_REG_R13}, {"r13w", USC_REG_R13}, {"r13b", USC_REG_R13},
	{"r14", USC_REG_R14}, {"r14d", USC_REG_R14}, {"r14w", USC_REG_R14}, {"r14b", USC_REG_R14},
	{"r15", USC_REG_R15}, {"r15d", USC_REG_R15}, {"r15w", USC_REG_R15}, {"r15b", USC_REG_R15},
};

static void test_args_regs(void **state)
{
	static const int sizes[] = {1, 2, 4, 8, -1, -2, -4, -8};
	static const enum usc_type types[] = {USC_T_U8, USC_T_U16, USC_T_U32, USC_T_U64,
					      USC_T_S8, USC_T_S16, USC_T_S32, USC_T_S64};
	char spec[64];

	(void)state;
	for (size_t r = 0; r < sizeof(reg_table) / sizeof(reg_table[0]); r++) {
		for (size_t k = 0; k < 8; k++) {
			snprintf(spec, sizeof(spec), "%d@%%%s", sizes[k], reg_table[r].name);
			assert_int_equal(parse_ok(spec, NULL), 1);
			PROG(&A[0], INSN(.op = FOP_REG, .reg = reg_table[r].reg),
			     INSN(.op = FOP_ST_RAW, .size = (uint8_t)abs(sizes[k])));
			assert_int_equal(A[0].type, types[k]);
			assert_string_equal(A[0].name, "arg1");
			assert_false(A[0].type_given);
			assert_false(A[0].named);
			assert_int_equal(A[0].pos, 0);
			assert_int_equal(A[0].len, strlen(spec));
		}
		/* as a base and as an index, 64-bit names only */
		snprintf(spec, sizeof(spec), "8@8(%%%s)", reg_table[r].name);
		if (r % 4 == 0) {
			assert_int_equal(parse_ok(spec, NULL), 1);
			PROG(&A[0], INSN(.op = FOP_REG, .reg = reg_table[r].reg),
			     INSN(.op = FOP_ST_MEM, .size = 8, .imm = 8));
		} else {
			parse_bad(spec, NULL, 4);
		}
	}
}

static void test_args_memory(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("8@-16(%rbp)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_REG, .reg = USC_REG_BP),
	     INSN(.op = FOP_ST_MEM, .size = 8, .imm = -16));
	assert_int_equal(A[0].type, USC_T_U64);

	assert_int_equal(parse_ok("-4@0x10(%rsp)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_REG, .reg = USC_REG_SP),
	     INSN(.op = FOP_ST_MEM, .size = 4, .imm = 16));
	assert_int_equal(A[0].type, USC_T_S32);

	assert_int_equal(parse_ok("2@(%r15)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_REG, .reg = USC_REG_R15),
	     INSN(.op = FOP_ST_MEM, .size = 2, .imm = 0));

	/* SIB, with and without a base, with and without a scale */
	assert_int_equal(parse_ok("8@(%rax,%rbx,8)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_REG, .reg = USC_REG_AX),
	     INSN(.op = FOP_ADD_REG, .reg = USC_REG_BX, .size = 8),
	     INSN(.op = FOP_ST_MEM, .size = 8, .imm = 0));
	assert_int_equal(parse_ok("4@8(%rax,%rcx,4)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_REG, .reg = USC_REG_AX),
	     INSN(.op = FOP_ADD_REG, .reg = USC_REG_CX, .size = 4),
	     INSN(.op = FOP_ST_MEM, .size = 4, .imm = 8));
	assert_int_equal(parse_ok("-1@-4(%r12,%r13)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_REG, .reg = USC_REG_R12),
	     INSN(.op = FOP_ADD_REG, .reg = USC_REG_R13, .size = 1),
	     INSN(.op = FOP_ST_MEM, .size = 1, .imm = -4));
	assert_int_equal(A[0].type, USC_T_S8);
	assert_int_equal(parse_ok("-2@-0x20(%rsp,%rbp,2)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_REG, .reg = USC_REG_SP),
	     INSN(.op = FOP_ADD_REG, .reg = USC_REG_BP, .size = 2),
	     INSN(.op = FOP_ST_MEM, .size = 2, .imm = -32));
	assert_int_equal(parse_ok("8@(,%rcx,8)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_IMM, .imm = 0),
	     INSN(.op = FOP_ADD_REG, .reg = USC_REG_CX, .size = 8),
	     INSN(.op = FOP_ST_MEM, .size = 8, .imm = 0));
	assert_int_equal(parse_ok("4@-8(,%r9)", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_IMM, .imm = 0),
	     INSN(.op = FOP_ADD_REG, .reg = USC_REG_R9, .size = 1),
	     INSN(.op = FOP_ST_MEM, .size = 4, .imm = -8));
}

static void test_args_imm(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("4@$5", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_IMM, .imm = 5), INSN(.op = FOP_ST_RAW, .size = 4));
	assert_int_equal(A[0].type, USC_T_U32);
	assert_int_equal(parse_ok("-4@$-1", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_IMM, .imm = -1), INSN(.op = FOP_ST_RAW, .size = 4));
	assert_int_equal(A[0].type, USC_T_S32);
	assert_int_equal(parse_ok("8@$0x7fffFFFF", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_IMM, .imm = 0x7fffffff), INSN(.op = FOP_ST_RAW, .size = 8));
	assert_int_equal(parse_ok("-8@$-9223372036854775808", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_IMM, .imm = INT64_MIN), INSN(.op = FOP_ST_RAW, .size = 8));
	assert_int_equal(parse_ok("8@$18446744073709551615", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_IMM, .imm = -1), INSN(.op = FOP_ST_RAW, .size = 8));
	assert_int_equal(parse_ok("1@$0", NULL), 1);
	PROG(&A[0], INSN(.op = FOP_IMM, .imm = 0), INSN(.op = FOP_ST_RAW, .size = 1));
}

static void test_args_list(void **state)
{
	struct usdt_arg_error err;
	unsigned n = 99;
	char spec[256] = "";

	(void)state;
	assert_int_equal(parse_ok("", NULL), 0);
	assert_int_equal(parse_ok("   ", NULL), 0);
	assert_int_equal(parse_ok("-8@%rdi -4@%esi -2@%dx -1@%cl", NULL), 4);
	assert_string_equal(A[0].name, "arg1");
	assert_string_equal(A[3].name, "arg4");
	assert_int_equal(A[1].type, USC_T_S32);
	assert_int_equal(A[1].insn[0].reg, USC_REG_SI);
	assert_int_equal(A[3].pos, 23);
	assert_int_equal(A[3].len, 6);
	/* several spaces, leading and trailing */
	assert_int_equal(parse_ok("  4@$1    8@(%rax)  ", NULL), 2);
	assert_int_equal(A[0].pos, 2);
	assert_int_equal(A[0].len, 4);
	assert_int_equal(A[1].pos, 10);
	assert_int_equal(A[1].len, 8);
	assert_string_equal(A[1].name, "arg2");

	/* USDT_MAX_ARGS fit; one more does not; a smaller max */
	for (int i = 0; i < USDT_MAX_ARGS; i++)
		strcat(spec, "4@%eax ");
	assert_int_equal(parse_ok(spec, NULL), USDT_MAX_ARGS);
	assert_string_equal(A[USDT_MAX_ARGS - 1].name, "arg12");
	strcat(spec, "4@%ebx");
	parse_bad(spec, NULL, 7 * USDT_MAX_ARGS);
	assert_int_equal(usdt_parse_args("4@%eax 4@%ebx", NULL, A, 1, &n, &err), -EINVAL);
	assert_int_equal(err.pos, 7);
	assert_int_equal(n, 0);
	assert_int_equal(usdt_parse_args("4@%eax", NULL, A, 1, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(usdt_parse_args("", NULL, A, 0, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(usdt_parse_args("4@%eax", NULL, A, 0, &n, &err), -EINVAL);
	assert_int_equal(err.pos, 0);
}

static void test_args_symbols(void **state)
{
	struct objfile *ef;
	const char *f = fx("usdt_pie");
	uint64_t counter = nm_addr(f, "usdt_counter", 'D');
	uint64_t table = nm_addr(f, "usdt_table", 'D');
	uint64_t local = nm_addr(f, "usdt_local_only", 'd');
	struct usdt_arg_error err;
	unsigned n;

	(void)state;
	assert_int_equal(objfile_open(f, &ef), 0);
	assert_int_equal(parse_ok("-4@usdt_counter(%rip)", ef), 1);
	PROG(&A[0], INSN(.op = FOP_VADDR, .imm = (int64_t)counter),
	     INSN(.op = FOP_ST_MEM, .size = 4, .imm = 0));
	assert_int_equal(A[0].type, USC_T_S32);
	assert_int_equal(parse_ok("8@usdt_table+16(%rip) 8@24+usdt_table(%rip) 8@usdt_table-8(%rip)",
				  ef), 3);
	PROG(&A[0], INSN(.op = FOP_VADDR, .imm = (int64_t)table + 16),
	     INSN(.op = FOP_ST_MEM, .size = 8, .imm = 0));
	PROG(&A[1], INSN(.op = FOP_VADDR, .imm = (int64_t)table + 24),
	     INSN(.op = FOP_ST_MEM, .size = 8, .imm = 0));
	PROG(&A[2], INSN(.op = FOP_VADDR, .imm = (int64_t)table - 8),
	     INSN(.op = FOP_ST_MEM, .size = 8, .imm = 0));
	assert_int_equal(parse_ok("4@usdt_local_only(%rip)", ef), 1);
	PROG(&A[0], INSN(.op = FOP_VADDR, .imm = (int64_t)local),
	     INSN(.op = FOP_ST_MEM, .size = 4, .imm = 0));
	/* non-PIC forms: absolute sym, sym(,%index,scale), sym(%reg) */
	assert_int_equal(parse_ok("4@usdt_counter 8@usdt_table(,%rax,8) 8@usdt_table+8(%rdx)", ef), 3);
	PROG(&A[0], INSN(.op = FOP_VADDR, .imm = (int64_t)counter),
	     INSN(.op = FOP_ST_MEM, .size = 4, .imm = 0));
	PROG(&A[1], INSN(.op = FOP_VADDR, .imm = (int64_t)table),
	     INSN(.op = FOP_ADD_REG, .reg = USC_REG_AX, .size = 8),
	     INSN(.op = FOP_ST_MEM, .size = 8, .imm = 0));
	PROG(&A[2], INSN(.op = FOP_VADDR, .imm = (int64_t)table + 8),
	     INSN(.op = FOP_ADD_REG, .reg = USC_REG_DX, .size = 1),
	     INSN(.op = FOP_ST_MEM, .size = 8, .imm = 0));

	/* the fixture's own note */
	assert_int_equal(parse_ok("-4@usdt_counter(%rip) -8@24+usdt_table(%rip)", ef), 2);
	assert_int_equal(A[1].insn[0].imm, (int64_t)table + 24);

	parse_bad("4@usdt_no_such(%rip)", ef, 2);
	parse_bad("4@8 4@usdt_counter(%rip)", ef, 3);
	parse_bad("4@usdt_counter(%rax,%rbx,2)", ef, 2);
	parse_bad("4@usdt_counter(%rip,%rbx)", ef, 2);
	parse_bad("4@usdt_counter+usdt_table(%rip)", ef, 15);
	parse_bad("4@-usdt_counter(%rip)", ef, 3);
	parse_bad("4@8-usdt_counter(%rip)", ef, 4);
	parse_bad("4@usdt_counter+(%rip)", ef, 15);
	parse_bad("4@-16(%rip)", ef, 2);
	objfile_close(ef);

	/* without the ELF file: an error at the symbol */
	parse_bad("-4@usdt_counter(%rip)", NULL, 3);
	assert_int_equal(usdt_parse_args("4@%eax 4@sym+8(%rip)", NULL, A, 4, &n, &err), -EINVAL);
	assert_int_equal(err.pos, 9);
	assert_non_null(strstr(err.msg, "ELF"));
}

static void test_args_errors(void **state)
{
	(void)state;
	/* the brief's list */
	parse_bad("4@", NULL, 2);
	parse_bad("3@%eax", NULL, 0);
	parse_bad("4@%xyz", NULL, 2);
	parse_bad("4@8(%rax", NULL, 8);
	parse_bad("4@(%rax,%rbx,3)", NULL, 13);
	parse_bad("4@$", NULL, 3);
	parse_bad("x@%eax", NULL, 0);
	parse_bad("4@%eax junk", NULL, 7);
	parse_bad("4@-16(%rip)", NULL, 2);
	parse_bad("4@8(%rip)", NULL, 2);
	/* sizes */
	parse_bad("@%eax", NULL, 0);
	parse_bad("-@%eax", NULL, 1);
	parse_bad("-3@%eax", NULL, 1);
	parse_bad("16@%rax", NULL, 0);
	parse_bad("0@%rax", NULL, 0);
	parse_bad("0004@%rax", NULL, 0);
	parse_bad("4%eax", NULL, 1);
	parse_bad("4", NULL, 1);
	parse_bad("8@%rax 4", NULL, 8);
	/* registers */
	parse_bad("1@%ah", NULL, 2);
	parse_bad("4@%", NULL, 2);
	parse_bad("4@%EAX", NULL, 2);
	parse_bad("4@%rip", NULL, 2);
	parse_bad("4@%eax,", NULL, 6);
	parse_bad("4@%eax(", NULL, 6);
	parse_bad("4@%r16", NULL, 2);
	/* immediates */
	parse_bad("4@$-", NULL, 4);
	parse_bad("4@$0x", NULL, 3);
	parse_bad("4@$12a", NULL, 5);
	parse_bad("4@$18446744073709551616", NULL, 3);
	parse_bad("4@$-9223372036854775809", NULL, 3);
	parse_bad("4@$x", NULL, 3);
	/* memory */
	parse_bad("4@8", NULL, 3);
	parse_bad("4@-", NULL, 3);
	parse_bad("4@()", NULL, 3);
	parse_bad("4@(,)", NULL, 4);
	parse_bad("4@(%eax)", NULL, 3);
	parse_bad("4@(%rax,%esi)", NULL, 8);
	parse_bad("4@(%rax,%rsp)", NULL, 8);
	parse_bad("4@(%rax,%rip)", NULL, 8);
	parse_bad("4@(%rax,%rbx,)", NULL, 13);
	parse_bad("4@(%rax,%rbx,16)", NULL, 13);
	parse_bad("4@(%rax,%rbx,8,1)", NULL, 14);
	parse_bad("4@(%rax)x", NULL, 8);
	parse_bad("4@8+(%rax)", NULL, 4);
	parse_bad("4@*8(%rax)", NULL, 2);
	parse_bad("4@99999999999999999999(%rax)", NULL, 2);
	parse_bad("4@8(%rax) -2@%ax 1@%zz", NULL, 19);
}

/* ---- setup ------------------------------------------------------------ */

static int group_setup(void **state)
{
	(void)state;
	if (fixture_build("usdt", fxdir, sizeof(fxdir), tmpdir, sizeof(tmpdir)))
		return -1;
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
		cmocka_unit_test(test_notes_one),
		cmocka_unit_test(test_notes_empty),
		cmocka_unit_test(test_notes_several),
		cmocka_unit_test(test_notes_skip_other),
		cmocka_unit_test(test_notes_base_adjust),
		cmocka_unit_test(test_notes_malformed),
		cmocka_unit_test(test_read_pie),
		cmocka_unit_test(test_read_nopie),
		cmocka_unit_test(test_read_O0),
		cmocka_unit_test(test_read_none),
		cmocka_unit_test(test_section_data),
		cmocka_unit_test(test_symbol_vaddr),
		cmocka_unit_test(test_args_regs),
		cmocka_unit_test(test_args_memory),
		cmocka_unit_test(test_args_imm),
		cmocka_unit_test(test_args_list),
		cmocka_unit_test(test_args_symbols),
		cmocka_unit_test(test_args_errors),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
