/* Tests of libuscope-sdt (sdt/): providers are built and loaded in this
 * process, and the generated object is read back with uscope's own ELF and
 * USDT readers through /proc/self/fd/N, as a tracer would read it: exact
 * provider, names, argument specs, semaphores, sites. Firing with no
 * tracer, the semaphore raised by hand (as the inject engine does), unload
 * leaving no descriptor and no mapping, errors, and the machine code of
 * the enabled check (sdt_fastpath.c, built -O2 as a program would be). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <Zydis/Zydis.h>

#include <uscope/sdt.h>

#include "objfile/objfile.h"
#include "probe/fetch.h"
#include "usdt/usdt.h"

int sdt_fastpath_once(const struct usc_probe *p, long a, long b);

/* ---- helpers ------------------------------------------------------------ */

/* Mappings of /memfd:NAME in this process (each line of /proc/self/maps),
 * of inode ino (0: any); *first gets the start of the one at offset 0. */
static int memfd_inode_mappings(const char *name, uint64_t ino, uint64_t *first)
{
	char want[128], line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	int n = 0;

	assert_non_null(f);
	snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, off, inode;
		int pos = 0;

		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %" SCNu64 " %n", &start,
			   &end, &off, &inode, &pos) < 4 || !pos || strcmp(line + pos, want) ||
		    (ino && inode != ino))
			continue;
		if (off == 0 && first)
			*first = start;
		n++;
	}
	fclose(f);
	return n;
}

static int memfd_mappings(const char *name, uint64_t *first)
{
	return memfd_inode_mappings(name, 0, first);
}

/* Descriptors of this process open on /memfd:NAME. */
static int memfd_fds(const char *name)
{
	char want[128], link[PATH_MAX], path[PATH_MAX];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
	while ((de = readdir(d))) {
		ssize_t l;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		l = readlink(path, link, sizeof(link) - 1);
		if (l < 0)
			continue;
		link[l] = 0;
		n += !strcmp(link, want);
	}
	closedir(d);
	return n;
}

/* The loaded object, opened by path as a tracer would. */
static struct objfile *open_object(const struct usc_provider *p)
{
	char path[64];
	struct objfile *ef = NULL;

	assert_true(usc_provider_fd(p) >= 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", usc_provider_fd(p));
	assert_int_equal(objfile_open(path, &ef), 0);
	return ef;
}

struct want_probe {
	const char *name;
	int types[USC_PROBE_MAX_ARGS];
	unsigned n;
	const char *args;			/* the note's specs */
	enum usc_type utypes[USC_PROBE_MAX_ARGS];	/* as uscope decodes them */
	enum usc_reg regs[USC_PROBE_MAX_ARGS];
};

static const struct want_probe WANT[] = {
	{"all", {USC_ARG_INT8, USC_ARG_UINT8, USC_ARG_INT16, USC_ARG_UINT16, USC_ARG_INT32,
		 USC_ARG_UINT32}, 6,
	 "-1@%dil 1@%sil -2@%dx 2@%cx -4@%r8d 4@%r9d",
	 {USC_T_S8, USC_T_U8, USC_T_S16, USC_T_U16, USC_T_S32, USC_T_U32},
	 {USC_REG_DI, USC_REG_SI, USC_REG_DX, USC_REG_CX, USC_REG_R8, USC_REG_R9}},
	{"wide", {USC_ARG_INT64, USC_ARG_UINT64, USC_ARG_STRING, USC_ARG_INT32, USC_ARG_UINT16,
		  USC_ARG_INT8}, 6,
	 "-8@%rdi 8@%rsi 8@%rdx -4@%ecx 2@%r8w -1@%r9b",
	 {USC_T_S64, USC_T_U64, USC_T_U64, USC_T_S32, USC_T_U16, USC_T_S8},
	 {USC_REG_DI, USC_REG_SI, USC_REG_DX, USC_REG_CX, USC_REG_R8, USC_REG_R9}},
	{"str", {USC_ARG_STRING}, 1, "8@%rdi", {USC_T_U64}, {USC_REG_DI}},
	{"none", {0}, 0, "", {0}, {0}},
};
#define NWANT (sizeof(WANT) / sizeof(WANT[0]))

static struct usc_provider *make_provider(const char *name, struct usc_probe **probes)
{
	struct usc_provider *p = NULL;

	assert_int_equal(usc_provider_new(name, &p), 0);
	for (size_t i = 0; i < NWANT; i++)
		assert_int_equal(usc_provider_add_probev(p, &probes[i], WANT[i].name, WANT[i].types,
							 WANT[i].n), 0);
	return p;
}

/* The notes of the loaded object against WANT, exactly; and the probes'
 * runtime pointers against the notes and the mapping. */
static void check_object(struct usc_provider *p, const char *prov, struct usc_probe **probes)
{
	struct objfile *ef;
	struct usdt_note *notes = NULL;
	size_t n = 0;
	const void *bdata;
	size_t blen;
	uint64_t base_addr, first = 0;

	struct stat st;

	/* its three segments (before the reader maps the file too) */
	assert_int_equal(fstat(usc_provider_fd(p), &st), 0);
	assert_int_equal(memfd_inode_mappings(prov, st.st_ino, &first), 3);
	ef = open_object(p);
	assert_int_equal(usdt_read(ef, &notes, &n), 0);
	assert_int_equal(n, NWANT);
	assert_int_equal(objfile_section_data(ef, ".stapsdt.base", &bdata, &blen, &base_addr), 0);
	assert_int_equal(blen, 1);
	for (size_t i = 0; i < n; i++) {
		const struct want_probe *w = &WANT[i];
		const struct objfile_sym *fn = NULL;
		uint64_t sema_sym;
		char sname[256];
		uint8_t code[6];
		static const uint8_t stub[6] = {0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3};
		struct usc_fetcharg args[USDT_MAX_ARGS];
		struct usdt_arg_error aerr;
		unsigned nargs = 99;

		assert_string_equal(notes[i].provider, prov);
		assert_string_equal(notes[i].name, w->name);
		assert_string_equal(notes[i].args, w->args);
		assert_int_equal(notes[i].base, base_addr);
		/* the site is the stub function of the probe's name: nop5; ret */
		assert_int_equal(objfile_func_lookup(ef, w->name, &fn, NULL, NULL), 0);
		assert_int_equal(notes[i].pc, fn->vaddr);
		assert_int_equal(fn->size, 6);
		assert_true(objfile_vaddr_is_exec(ef, notes[i].pc));
		assert_int_equal(objfile_read(ef, notes[i].pc, code, sizeof(code)), 0);
		assert_memory_equal(code, stub, sizeof(stub));
		/* the semaphore is PROVIDER_NAME_semaphore, in a writable place */
		snprintf(sname, sizeof(sname), "%s_%s_semaphore", prov, w->name);
		assert_int_equal(objfile_symbol_vaddr(ef, sname, &sema_sym), 0);
		assert_int_equal(notes[i].sema, sema_sym);
		assert_int_not_equal(notes[i].sema, 0);
		assert_false(objfile_vaddr_is_exec(ef, notes[i].sema));
		for (size_t k = 0; k < i; k++)
			assert_int_not_equal(notes[k].sema, notes[i].sema);
		/* uscope's decoding of the specs: sizes, signs, registers */
		assert_int_equal(usdt_parse_args(notes[i].args, ef, args, USDT_MAX_ARGS, &nargs, &aerr),
				 0);
		assert_int_equal(nargs, w->n);
		for (unsigned a = 0; a < nargs; a++) {
			assert_int_equal(args[a].type, w->utypes[a]);
			assert_int_equal(args[a].insn[0].op, FOP_REG);
			assert_int_equal(args[a].insn[0].reg, w->regs[a]);
		}
		/* at run time: one load bias for both, the start of the mapping */
		uint64_t bias = (uint64_t)(uintptr_t)probes[i]->fire - notes[i].pc;

		assert_int_equal((uint64_t)(uintptr_t)probes[i]->semaphore - notes[i].sema, bias);
		assert_int_equal(bias, first);
	}
	usdt_notes_free(notes, n);
	objfile_close(ef);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_load_notes(void **state)
{
	struct usc_probe *probes[NWANT];
	struct usc_provider *p;

	(void)state;
	p = make_provider("unit_notes", probes);
	assert_int_equal(usc_provider_fd(p), -1);
	assert_int_equal(memfd_mappings("unit_notes", NULL), 0);
	assert_int_equal(usc_provider_load(p), 0);
	check_object(p, "unit_notes", probes);
	usc_provider_free(p);
}

static void test_fire_untraced(void **state)
{
	struct usc_probe *probes[NWANT];
	struct usc_provider *p;

	(void)state;
	p = make_provider("unit_fire", probes);
	/* not loaded: disabled, and firing is a no-op */
	for (size_t i = 0; i < NWANT; i++)
		assert_false(usc_probe_enabled(probes[i]));
	usc_probe_fire(probes[0], -1, 2, -3, 4, -5, 6);
	assert_int_equal(sdt_fastpath_once(probes[2], 1, 2), 0);

	assert_int_equal(usc_provider_load(p), 0);
	for (size_t i = 0; i < NWANT; i++)
		assert_false(usc_probe_enabled(probes[i]));
	usc_probe_fire(probes[0], -1, 2, -3, 4, -5, 6);
	usc_probe_fire(probes[1], INT64_MIN, UINT64_MAX, "a string", -7, 65535, -128);
	usc_probe_fire(probes[2], "x");
	usc_probe_fire(probes[3]);
	assert_int_equal(sdt_fastpath_once(probes[2], 1, 2), 0);

	/* a tracer raises the semaphore (the inject engine writes it in the
	 * process; the kernel's ref_ctr does the same): enabled, and the
	 * fast path fires */
	volatile uint16_t *sema = (volatile uint16_t *)(uintptr_t)probes[2]->semaphore;

	*sema = 1;
	assert_true(usc_probe_enabled(probes[2]));
	assert_false(usc_probe_enabled(probes[1]));
	assert_int_equal(sdt_fastpath_once(probes[2], 1, 2), 1);
	*sema = 2;	/* two tracers */
	assert_int_equal(sdt_fastpath_once(probes[2], 1, 2), 1);
	*sema = 0;
	assert_false(usc_probe_enabled(probes[2]));
	assert_int_equal(sdt_fastpath_once(probes[2], 1, 2), 0);
	usc_provider_free(p);
}

static void test_unload_leaves_nothing(void **state)
{
	struct usc_probe *probes[NWANT];
	struct usc_provider *p;

	(void)state;
	p = make_provider("unit_unload", probes);
	assert_int_equal(usc_provider_load(p), 0);
	assert_int_equal(memfd_mappings("unit_unload", NULL), 3);
	assert_int_equal(memfd_fds("unit_unload"), 1);

	assert_int_equal(usc_provider_unload(p), 0);
	assert_int_equal(memfd_mappings("unit_unload", NULL), 0);
	assert_int_equal(memfd_fds("unit_unload"), 0);
	assert_int_equal(usc_provider_fd(p), -1);
	/* the probes are disabled no-ops again, not dangling */
	for (size_t i = 0; i < NWANT; i++)
		assert_false(usc_probe_enabled(probes[i]));
	usc_probe_fire(probes[1], 1, 2, "s", 3, 4, 5);
	assert_int_equal(usc_provider_unload(p), -EINVAL);
	assert_non_null(strstr(usc_sdt_error(), "not loaded"));

	/* loaded again: a new object, the same notes */
	assert_int_equal(usc_provider_load(p), 0);
	check_object(p, "unit_unload", probes);
	usc_provider_free(p);	/* unloads */
	assert_int_equal(memfd_mappings("unit_unload", NULL), 0);
	assert_int_equal(memfd_fds("unit_unload"), 0);
}

static void test_two_providers_one_name(void **state)
{
	struct usc_probe *a[NWANT], *b[NWANT];
	struct usc_provider *pa = make_provider("unit_twin", a);
	struct usc_provider *pb = make_provider("unit_twin", b);

	(void)state;
	assert_int_equal(usc_provider_load(pa), 0);
	assert_int_equal(usc_provider_load(pb), 0);
	assert_int_equal(memfd_mappings("unit_twin", NULL), 6);
	assert_ptr_not_equal(a[0]->semaphore, b[0]->semaphore);
	assert_ptr_not_equal(a[0]->fire, b[0]->fire);
	assert_int_equal(usc_provider_unload(pa), 0);
	assert_int_equal(memfd_mappings("unit_twin", NULL), 3);
	check_object(pb, "unit_twin", b);
	/* a third one may reuse the first one's descriptor number: it must
	 * get its own object, not the loader's memory of the old name */
	struct usc_probe *c[NWANT];
	struct usc_provider *pc = make_provider("unit_twin", c);

	assert_int_equal(usc_provider_load(pc), 0);
	check_object(pc, "unit_twin", c);
	usc_provider_free(pa);
	usc_provider_free(pb);
	usc_provider_free(pc);
	assert_int_equal(memfd_mappings("unit_twin", NULL), 0);
}

static void test_many_probes(void **state)
{
	enum { N = 700 };	/* the text and the semaphores span pages */
	static const int cycle[] = {USC_ARG_INT8, USC_ARG_UINT16, USC_ARG_INT32, USC_ARG_UINT64,
				    USC_ARG_STRING, USC_ARG_INT64, USC_ARG_UINT8};
	static struct usc_probe *probes[N];
	struct usc_provider *p;
	struct usdt_note *notes = NULL;
	struct objfile *ef;
	size_t n = 0;

	(void)state;
	assert_int_equal(usc_provider_new("unit_many", &p), 0);
	for (int i = 0; i < N; i++) {
		char name[32];
		int types[USC_PROBE_MAX_ARGS];

		snprintf(name, sizeof(name), "probe_%d", i);
		for (int k = 0; k < i % 7; k++)
			types[k] = cycle[(i + k) % 7];
		assert_int_equal(usc_provider_add_probev(p, &probes[i], name, types,
							 (unsigned)(i % 7)), 0);
	}
	assert_int_equal(usc_provider_load(p), 0);
	ef = open_object(p);
	assert_int_equal(usdt_read(ef, &notes, &n), 0);
	assert_int_equal(n, N);
	for (int i = 0; i < N; i++) {
		char name[32];
		const struct objfile_sym *fn;
		struct usc_fetcharg args[USDT_MAX_ARGS];
		unsigned nargs;

		snprintf(name, sizeof(name), "probe_%d", i);
		assert_string_equal(notes[i].name, name);
		assert_int_equal(objfile_func_lookup(ef, name, &fn, NULL, NULL), 0);
		assert_int_equal(fn->vaddr, notes[i].pc);
		assert_int_equal(usdt_parse_args(notes[i].args, ef, args, USDT_MAX_ARGS, &nargs, NULL),
				 0);
		assert_int_equal(nargs, (unsigned)(i % 7));
		assert_int_equal((uintptr_t)probes[i]->fire - (uintptr_t)probes[0]->fire,
				 notes[i].pc - notes[0].pc);
		assert_int_equal((uintptr_t)probes[i]->semaphore - (uintptr_t)probes[0]->semaphore,
				 notes[i].sema - notes[0].sema);
		assert_false(usc_probe_enabled(probes[i]));
		usc_probe_fire(probes[i], 1, 2, 3, 4, 5, 6);
	}
	usdt_notes_free(notes, n);
	objfile_close(ef);
	usc_provider_free(p);
}

static void test_errors(void **state)
{
	struct usc_provider *p = NULL, *q = NULL;
	struct usc_probe *pr = (struct usc_probe *)1;
	int bad[] = {USC_ARG_INT8, 3};
	int seven[7] = {USC_ARG_INT8, USC_ARG_INT8, USC_ARG_INT8, USC_ARG_INT8, USC_ARG_INT8,
			USC_ARG_INT8, USC_ARG_INT8};
	char longname[USC_SDT_NAME_MAX + 2];

	(void)state;
	/* names: C identifiers of at most USC_SDT_NAME_MAX characters */
	assert_int_equal(usc_provider_new("", &p), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(usc_sdt_error(), "bad provider name"));
	assert_int_equal(usc_provider_new("9lives", &p), -EINVAL);
	assert_int_equal(usc_provider_new("with-dash", &p), -EINVAL);
	assert_int_equal(usc_provider_new(NULL, &p), -EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	assert_int_equal(usc_provider_new(longname, &p), -EINVAL);
	longname[USC_SDT_NAME_MAX] = 0;
	assert_int_equal(usc_provider_new(longname, &q), 0);
	usc_provider_free(q);

	assert_int_equal(usc_provider_new("unit_err", &p), 0);
	assert_int_equal(usc_provider_load(p), -ENOENT);	/* no probes */
	assert_non_null(strstr(usc_sdt_error(), "no probes"));
	/* 7 arguments, by list and by array */
	assert_int_equal(usc_provider_add_probe(p, &pr, "seven", USC_ARG_INT8, USC_ARG_INT8,
						USC_ARG_INT8, USC_ARG_INT8, USC_ARG_INT8,
						USC_ARG_INT8, USC_ARG_INT8, USC_ARG_END), -E2BIG);
	assert_null(pr);
	assert_non_null(strstr(usc_sdt_error(), "more than 6 arguments"));
	assert_int_equal(usc_provider_add_probev(p, &pr, "seven", seven, 7), -E2BIG);
	/* bad types */
	assert_int_equal(usc_provider_add_probev(p, &pr, "bad", bad, 2), -EINVAL);
	assert_non_null(strstr(usc_sdt_error(), "argument 2 has an unknown type (3)"));
	assert_int_equal(usc_provider_add_probe(p, &pr, "bad", 100, USC_ARG_END), -EINVAL);
	assert_int_equal(usc_provider_add_probev(p, &pr, "bad", NULL, 1), -EINVAL);
	/* bad probe names */
	assert_int_equal(usc_provider_add_probe(p, &pr, "a b", USC_ARG_END), -EINVAL);
	assert_int_equal(usc_provider_add_probe(p, &pr, "", USC_ARG_END), -EINVAL);
	/* duplicates, and a name that is another probe's semaphore symbol */
	assert_int_equal(usc_provider_add_probe(p, &pr, "tick", USC_ARG_INT32, USC_ARG_END), 0);
	assert_non_null(pr);
	assert_int_equal(usc_provider_add_probe(p, &pr, "tick", USC_ARG_END), -EEXIST);
	assert_non_null(strstr(usc_sdt_error(), "already has a probe tick"));
	assert_int_equal(usc_provider_add_probe(p, &pr, "unit_err_tick_semaphore", USC_ARG_END),
			 -EEXIST);
	assert_int_equal(usc_provider_add_probe(p, NULL, "tock", USC_ARG_END), 0);	/* out may be NULL */
	/* nothing was added by the failures: two probes */
	assert_int_equal(usc_provider_load(p), 0);
	{
		struct objfile *ef = open_object(p);
		struct usdt_note *notes;
		size_t n;

		assert_int_equal(usdt_read(ef, &notes, &n), 0);
		assert_int_equal(n, 2);
		assert_string_equal(notes[0].name, "tick");
		assert_string_equal(notes[1].name, "tock");
		usdt_notes_free(notes, n);
		objfile_close(ef);
	}
	/* loaded: load twice, add */
	assert_int_equal(usc_provider_load(p), -EALREADY);
	assert_non_null(strstr(usc_sdt_error(), "already loaded"));
	assert_int_equal(usc_provider_add_probe(p, &pr, "late", USC_ARG_END), -EBUSY);
	assert_int_equal(usc_provider_unload(p), 0);
	assert_int_equal(usc_provider_add_probe(p, &pr, "late", USC_ARG_END), 0);
	usc_provider_free(p);
	usc_provider_free(NULL);
	assert_int_equal(usc_provider_load(NULL), -EINVAL);
	assert_int_equal(usc_provider_fd(NULL), -1);
}

/* The machine code of `if (usc_probe_enabled(p)) usc_probe_fire(p, a, b)`
 * at -O2: before the first branch, the semaphore's pointer is loaded from
 * the handle (its first field) and the 16-bit semaphore is read through it
 * and compared with 0, nothing else touches memory and nothing is called;
 * the fire is an indirect call (or tail jump) through the handle's second
 * field. */
static void test_enabled_fast_path_code(void **state)
{
	const uint8_t *code = (const uint8_t *)(uintptr_t)sdt_fastpath_once;
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisRegister handle = ZYDIS_REGISTER_RDI, sema_ptr = ZYDIS_REGISTER_NONE;
	size_t off = 0, reads = 0, branches = 0;
	bool fire_seen = false, cmp_seen = false;

	(void)state;
	assert_true(ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
						  ZYDIS_STACK_WIDTH_64)));
	/* the check: up to the first conditional branch */
	for (int guard = 0; guard < 32; guard++) {
		assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, 64, &in, ops)));
		off += in.length;
		if (in.meta.category == ZYDIS_CATEGORY_COND_BR) {
			branches++;
			break;
		}
		assert_int_not_equal(in.meta.category, ZYDIS_CATEGORY_CALL);
		assert_int_not_equal(in.meta.category, ZYDIS_CATEGORY_UNCOND_BR);
		assert_int_not_equal(in.meta.category, ZYDIS_CATEGORY_RET);
		for (unsigned k = 0; k < in.operand_count_visible; k++) {
			const ZydisDecodedOperand *o = &ops[k];

			if (o->type != ZYDIS_OPERAND_TYPE_MEMORY)
				continue;
			assert_true(o->actions & ZYDIS_OPERAND_ACTION_MASK_READ);
			assert_false(o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE);
			assert_int_equal(o->mem.index, ZYDIS_REGISTER_NONE);
			assert_int_equal(o->mem.disp.value, 0);
			reads++;
			if (reads == 1) {
				/* mov REG, qword [handle]: the semaphore's pointer */
				assert_int_equal(in.mnemonic, ZYDIS_MNEMONIC_MOV);
				assert_int_equal(o->size, 64);
				assert_int_equal(o->mem.base, handle);
				sema_ptr = ops[0].reg.value;
			} else {
				/* word [REG]: the semaphore, compared with 0 */
				assert_int_equal(reads, 2);
				assert_int_equal(o->size, 16);
				assert_int_equal(o->mem.base, sema_ptr);
			}
		}
		/* the handle may arrive through a register copy */
		if (in.mnemonic == ZYDIS_MNEMONIC_MOV && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER && ops[1].reg.value == handle &&
		    reads == 0)
			handle = ops[0].reg.value;
		if (in.mnemonic == ZYDIS_MNEMONIC_CMP || in.mnemonic == ZYDIS_MNEMONIC_TEST)
			cmp_seen = true;
	}
	assert_int_equal(branches, 1);
	assert_int_equal(reads, 2);
	assert_true(cmp_seen);

	/* the fire: call/jmp qword [X + 8] somewhere after the branch */
	for (int guard = 0; guard < 48 && !fire_seen; guard++) {
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, 64, &in, ops)))
			break;
		off += in.length;
		if ((in.meta.category == ZYDIS_CATEGORY_CALL ||
		     in.meta.category == ZYDIS_CATEGORY_UNCOND_BR) &&
		    ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[0].mem.disp.value == 8 &&
		    ops[0].size == 64)
			fire_seen = true;
	}
	assert_true(fire_seen);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_notes),
		cmocka_unit_test(test_fire_untraced),
		cmocka_unit_test(test_unload_leaves_nothing),
		cmocka_unit_test(test_two_providers_one_name),
		cmocka_unit_test(test_many_probes),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_enabled_fast_path_code),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
