/* Tests of src/debuginfo/ on fixtures built at run time
 * (tests/unit/fixtures/dwarf/build.sh): the same C file at -O0 (with and
 * without a frame pointer), at -O2, stripped with a .gnu_debuglink file, and
 * without debug info. Expected programs are checked against the compiler:
 * member offsets from offsetof (offsets.txt), parameter homes from the -O0
 * prologue's spills (objdump), symbols from nm. */
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
#include "debuginfo/debuginfo.h"
#include "fixture.h"

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

static char last_warn[1024];
static unsigned nwarn;

static void capture_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level == USC_LOG_WARN) {
		snprintf(last_warn, sizeof(last_warn), "%s", msg);
		nwarn++;
	}
}

/* "KEY VALUE..." line of a fixture file: the first value (base 0) and the
 * second (hex, nm -S sizes) if asked. */
static uint64_t lookup(const char *file, const char *key, int base, uint64_t *second)
{
	char line[512], k[256], v1[64], v2[64];
	FILE *f = fopen(fx(file), "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		int n = sscanf(line, "%255s %63s %63s", k, v1, v2);

		if (n >= 2 && !strcmp(k, key)) {
			fclose(f);
			if (second)
				*second = n == 3 ? strtoull(v2, NULL, 16) : 0;
			return strtoull(v1, NULL, base);
		}
	}
	fclose(f);
	fail_msg("%s not in %s", key, file);
	return 0;
}

static uint64_t sym(const char *build, const char *name, uint64_t *size)
{
	char file[64];

	snprintf(file, sizeof(file), "%s.syms", build);
	return lookup(file, name, 16, size);
}

static long offset_of(const char *member)
{
	return (long)lookup("offsets.txt", member, 10, NULL);
}

/* Where the -O0 prologue of handle spills src ("%rdi", "%al"): disp(%base). */
static long spill(const char *build, const char *src, const char **base)
{
	char file[64], line[512], pat[32];
	FILE *f;

	snprintf(file, sizeof(file), "%s.handle.s", build);
	snprintf(pat, sizeof(pat), "mov    %s,", src);
	f = fopen(fx(file), "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, pat), *e;
		long disp;

		if (!p)
			continue;
		p += strlen(pat);
		disp = strtol(p, &e, 0);
		if (*e != '(')
			continue;
		fclose(f);
		*base = strstr(e, "(%rbp)") ? "bp" : strstr(e, "(%rsp)") ? "sp" : "?";
		return disp;
	}
	fclose(f);
	fail_msg("no spill of %s in %s", src, file);
	return 0;
}

static const char *reg_short(unsigned r)
{
	static const char *names[] = {"ax", "bx", "cx", "dx", "si", "di", "bp", "sp",
				      "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
				      "ip"};
	return r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}

/* A program as "OP ARGS; OP ARGS; ..." and its type, e.g.
 * "REG bp; DEREF -40; ST_MEM 0/4 :s32". */
static void format_prog(const struct usc_fetcharg *a, char *buf, size_t len)
{
	size_t l = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < a->ninsn; i++) {
		const struct fetch_insn *f = &a->insn[i];
		long long imm = f->imm;

		switch (f->op) {
		case FOP_END:
			l += snprintf(buf + l, len - l, "END");
			break;
		case FOP_REG:
			l += snprintf(buf + l, len - l, "REG %s; ", reg_short(f->reg));
			break;
		case FOP_VADDR:
			l += snprintf(buf + l, len - l, "VADDR 0x%llx; ", imm);
			break;
		case FOP_IMM:
			l += snprintf(buf + l, len - l, "IMM %lld; ", imm);
			break;
		case FOP_DEREF:
			l += snprintf(buf + l, len - l, "DEREF %lld; ", imm);
			break;
		case FOP_ST_RAW:
			l += snprintf(buf + l, len - l, "ST_RAW %u; ", f->size);
			break;
		case FOP_ST_MEM:
			l += snprintf(buf + l, len - l, "ST_MEM %lld/%u; ", imm, f->size);
			break;
		case FOP_ST_STRING:
			l += snprintf(buf + l, len - l, "ST_STRING %lld; ", imm);
			break;
		case FOP_MOD_BF:
			l += snprintf(buf + l, len - l, "BF %u@%u/%u; ", f->bf_width, f->bf_offset,
				      f->size);
			break;
		default:
			l += snprintf(buf + l, len - l, "OP%u; ", f->op);
			break;
		}
		assert_true(l < len);
	}
	snprintf(buf + l, len - l, " :%s", fetch_type_name(a->type));
}

/* Lower expr at pc and check its program. */
static void check_expr(struct debuginfo *m, uint64_t pc, const char *expr, const char *want)
{
	struct usc_fetcharg a;
	struct debuginfo_error err = {0};
	char got[512];
	int ret;

	memset(&a, 0, sizeof(a));
	strcpy(a.name, "keep");
	ret = debuginfo_lower_expr(m, pc, expr, strlen(expr), &a, &err);
	if (ret)
		fail_msg("'%s' at 0x%" PRIx64 ": %d %s", expr, pc, ret, err.msg);
	assert_string_equal(a.name, "keep");	/* left for the caller */
	assert_true(a.ninsn >= 2 && a.ninsn <= USC_FETCH_MAX);
	assert_int_equal(a.insn[a.ninsn - 1].op, FOP_END);
	format_prog(&a, got, sizeof(got));
	if (strcmp(got, want))
		fail_msg("'%s':\n  got  %s\n  want %s", expr, got, want);
}

/* Lower expr and expect an error: ret, the position and text in the message. */
static void check_error(struct debuginfo *m, uint64_t pc, const char *expr, int want_ret,
			size_t want_pos, const char *const *want_msgs)
{
	struct usc_fetcharg a;
	struct debuginfo_error err = {0};
	int ret;

	memset(&a, 0, sizeof(a));
	ret = debuginfo_lower_expr(m, pc, expr, strlen(expr), &a, &err);
	if (ret != want_ret)
		fail_msg("'%s': got %d (%s), want %d", expr, ret, err.msg, want_ret);
	if (err.pos != want_pos)
		fail_msg("'%s': error at %zu, want %zu (%s)", expr, err.pos, want_pos, err.msg);
	for (; *want_msgs; want_msgs++)
		if (!strstr(err.msg, *want_msgs))
			fail_msg("'%s': message \"%s\" lacks \"%s\"", expr, err.msg, *want_msgs);
}

#define MSGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static char want_buf[16][256];
static unsigned want_i;

__attribute__((format(printf, 1, 2)))
static const char *W(const char *fmt, ...)
{
	char *b = want_buf[want_i++ % 16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b, sizeof(want_buf[0]), fmt, ap);
	va_end(ap);
	return b;
}

/* ---- open -------------------------------------------------------------- */

static void test_open_errors(void **state)
{
	struct debuginfo *m = (void *)1;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_nodebug"), NULL, &m), -ENODATA);
	assert_null(m);
	assert_int_equal(debuginfo_open(fx("missing"), NULL, &m), -ENOENT);
	assert_null(m);
	assert_int_equal(debuginfo_open(fx("offsets.txt"), NULL, &m) < 0, 1);
	assert_null(m);
	debuginfo_close(NULL);
}

/* ---- the prologue ------------------------------------------------------- */

static void check_prologue(const char *build, bool strictly)
{
	struct debuginfo *m;
	uint64_t entry, size, pc = 0;

	assert_int_equal(debuginfo_open(fx(build), NULL, &m), 0);
	entry = sym(build, "handle", &size);
	assert_int_equal(debuginfo_after_prologue(m, entry, &pc), 0);
	assert_true(pc >= entry && pc < entry + size);
	if (strictly)
		assert_true(pc > entry);
	/* not a function's entry: unchanged */
	assert_int_equal(debuginfo_after_prologue(m, entry + 1, &pc), 0);
	assert_int_equal(pc, entry + 1);
	/* no debug info there at all */
	assert_int_equal(debuginfo_after_prologue(m, 0x10, &pc), 0);
	assert_int_equal(pc, 0x10);
	debuginfo_close(m);
}

static void test_prologue(void **state)
{
	(void)state;
	check_prologue("prog_O0", true);
	check_prologue("prog_O0_nofp", true);
	check_prologue("prog_O2", false);
}

/* -O0: the prologue ends after the spills, at the first instruction of the
 * body (the first line after the function's opening line). */
static void test_prologue_O0_exact(void **state)
{
	struct debuginfo *m;
	uint64_t entry, pc = 0, last = 0;
	char line[512];
	FILE *f;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_O0"), NULL, &m), 0);
	entry = sym("prog_O0", "handle", NULL);
	assert_int_equal(debuginfo_after_prologue(m, entry, &pc), 0);
	/* the spills of the parameters all come before pc */
	f = fopen(fx("prog_O0.handle.s"), "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "(%rbp)") && (strstr(line, "%rdi,") || strstr(line, "%esi,") ||
					       strstr(line, "%ecx,") || strstr(line, "%al,")))
			last = strtoull(line, NULL, 16);
	fclose(f);
	assert_true(last > entry);
	assert_true(pc > last);
	assert_true(pc <= last + 8);
	debuginfo_close(m);
}

/* ---- -O0: every form, in the frame ---------------------------------- */

static void check_O0(const char *build)
{
	struct debuginfo *m;
	const char *b, *b2;
	uint64_t entry, pc;
	long r, n, flag, c;
	long id = offset_of("id"), tag = offset_of("tag"), path = offset_of("path");
	long size = offset_of("size"), next = offset_of("next"), codes = offset_of("codes");
	long prio = offset_of("prio_bit");

	assert_int_equal(debuginfo_open(fx(build), NULL, &m), 0);
	entry = sym(strcmp(build, "prog_strip") ? build : "prog_O0", "handle", NULL);
	assert_int_equal(debuginfo_after_prologue(m, entry, &pc), 0);
	build = strcmp(build, "prog_strip") ? build : "prog_O0";
	r = spill(build, "%rdi", &b);
	n = spill(build, "%esi", &b2);
	assert_string_equal(b, b2);
	flag = spill(build, "%al", &b2);
	c = spill(build, "%ecx", &b2);

	check_expr(m, pc, "r", W("REG %s; ST_MEM %ld/8; END :x64", b, r));
	check_expr(m, pc, "n", W("REG %s; ST_MEM %ld/4; END :s32", b, n));
	check_expr(m, pc, "flag", W("REG %s; ST_MEM %ld/1; END :u8", b, flag));
	check_expr(m, pc, "c", W("REG %s; ST_MEM %ld/4; END :u32", b, c));
	check_expr(m, pc, "r->id", W("REG %s; DEREF %ld; ST_MEM %ld/4; END :s32", b, r, id));
	check_expr(m, pc, "r->tag", W("REG %s; DEREF %ld; ST_STRING %ld; END :string", b, r, tag));
	check_expr(m, pc, "r->tag[1]",
		   W("REG %s; DEREF %ld; ST_MEM %ld/1; END :s8", b, r, tag + 1));
	check_expr(m, pc, "r->path",
		   W("REG %s; DEREF %ld; DEREF %ld; ST_STRING 0; END :string", b, r, path));
	check_expr(m, pc, "r->size", W("REG %s; DEREF %ld; ST_MEM %ld/8; END :s64", b, r, size));
	check_expr(m, pc, "r->next", W("REG %s; DEREF %ld; ST_MEM %ld/8; END :x64", b, r, next));
	check_expr(m, pc, "r->next->id",
		   W("REG %s; DEREF %ld; DEREF %ld; ST_MEM %ld/4; END :s32", b, r, next, id));
	check_expr(m, pc, " r -> next -> path ",
		   W("REG %s; DEREF %ld; DEREF %ld; DEREF %ld; ST_STRING 0; END :string", b, r,
		     next, path));
	check_expr(m, pc, "r->codes[3]",
		   W("REG %s; DEREF %ld; ST_MEM %ld/2; END :s16", b, r, codes + 6));
	check_expr(m, pc, "r[1].id",
		   W("REG %s; DEREF %ld; ST_MEM %ld/4; END :s32", b, r, id + 56));
	check_expr(m, pc, "r->prio",
		   W("REG %s; DEREF %ld; ST_MEM %ld/4; BF 3@%ld/4; END :bitfield", b, r,
		     prio / 32 * 4, prio % 32));
	check_expr(m, pc, "*r->next->path",
		   W("REG %s; DEREF %ld; DEREF %ld; DEREF %ld; ST_MEM 0/1; END :s8", b, r, next,
		     path));
	debuginfo_close(m);
}

static void test_O0_params_rbp(void **state)
{
	(void)state;
	check_O0("prog_O0");
}

static void test_O0_params_rsp(void **state)
{
	const char *b;

	(void)state;
	spill("prog_O0_nofp", "%rdi", &b);
	assert_string_equal(b, "sp");	/* the fixture really has no frame pointer */
	check_O0("prog_O0_nofp");
}

static void test_debuglink(void **state)
{
	(void)state;
	check_O0("prog_strip");
}

static void test_globals(void **state)
{
	struct debuginfo *m;
	uint64_t pc, counter, req, name;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_O0"), NULL, &m), 0);
	assert_int_equal(debuginfo_after_prologue(m, sym("prog_O0", "handle", NULL), &pc), 0);
	counter = sym("prog_O0", "g_counter", NULL);
	req = sym("prog_O0", "g_req", NULL);
	name = sym("prog_O0", "g_name", NULL);
	check_expr(m, pc, "g_counter", W("VADDR 0x%" PRIx64 "; ST_MEM 0/4; END :s32", counter));
	check_expr(m, pc, "g_req.size",
		   W("VADDR 0x%" PRIx64 "; ST_MEM 0/8; END :s64", req + offset_of("size")));
	check_expr(m, pc, "g_req.tag",
		   W("VADDR 0x%" PRIx64 "; ST_STRING 0; END :string", req + offset_of("tag")));
	check_expr(m, pc, "g_req.next->id",
		   W("VADDR 0x%" PRIx64 "; DEREF 0; ST_MEM %ld/4; END :s32",
		     req + offset_of("next"), offset_of("id")));
	check_expr(m, pc, "g_name", W("VADDR 0x%" PRIx64 "; DEREF 0; ST_STRING 0; END :string",
				      name));
	/* a global seen from another function */
	assert_int_equal(debuginfo_after_prologue(m, sym("prog_O0", "main", NULL), &pc), 0);
	check_expr(m, pc, "g_counter", W("VADDR 0x%" PRIx64 "; ST_MEM 0/4; END :s32", counter));
	debuginfo_close(m);
}

static void test_errors(void **state)
{
	struct debuginfo *m;
	uint64_t pc;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_O0"), NULL, &m), 0);
	assert_int_equal(debuginfo_after_prologue(m, sym("prog_O0", "handle", NULL), &pc), 0);
	check_error(m, pc, "*r", -EINVAL, 0, MSGS("'*r' is a struct: pick a member"));
	check_error(m, pc, "r->nope", -ENOENT, 3,
		    MSGS("no member 'nope' in 'r'", "id, tag, path, size, next, urgent, prio, codes"));
	check_error(m, pc, "zz", -ENOENT, 0,
		    MSGS("no variable 'zz'", "visible: r, n, flag, c, total", "g_counter"));
	check_error(m, pc, "  zz", -ENOENT, 2, MSGS("no variable 'zz'"));
	check_error(m, pc, "n->id", -EINVAL, 1, MSGS("'n' is not a pointer"));
	check_error(m, pc, "r.id", -EINVAL, 1, MSGS("'r' is a pointer: use '->'"));
	check_error(m, pc, "r->codes", -EINVAL, 0, MSGS("is an array: pick a member with [N]"));
	check_error(m, pc, "g_req", -EINVAL, 0, MSGS("'g_req' is a struct: pick a member"));
	check_error(m, pc, "*n", -EINVAL, 0, MSGS("'n' is not a pointer"));
	check_error(m, pc, "r->", -EINVAL, 3, MSGS("expected a member name"));
	check_error(m, pc, "r->id + 1", -EINVAL, 6, MSGS("expected '->', '.' or '['"));
	check_error(m, pc, "r->codes[x]", -EINVAL, 9, MSGS("expected a constant index"));
	check_error(m, pc, "r->codes[1", -EINVAL, 10, MSGS("expected ']'"));
	check_error(m, pc, "n[0]", -EINVAL, 1, MSGS("not an array or a pointer"));
	check_error(m, pc, "", -EINVAL, 0, MSGS("expected a variable name"));
	check_error(m, pc, "3", -EINVAL, 0, MSGS("expected a variable name"));
	/* a chain longer than a program holds */
	{
		char chain[256] = "r";

		for (int i = 0; i < 14; i++)
			strcat(chain, "->next");
		strcat(chain, "->id");
		/* at the 13th "->": load + 12 derefs + store + END fill the program */
		check_error(m, pc, chain, -E2BIG, 1 + 12 * 6, MSGS("too many dereferences"));
	}
	/* the loop's locals are not in scope at the prologue */
	check_error(m, pc, "step", -ENOENT, 0, MSGS("no variable 'step'"));
	/* no error struct: still fails cleanly */
	{
		struct usc_fetcharg a;

		assert_int_equal(debuginfo_lower_expr(m, pc, "zz", 2, &a, NULL), -ENOENT);
		/* len bounds the expression: "r->id" cut to "r" */
		assert_int_equal(debuginfo_lower_expr(m, pc, "r->id", 1, &a, NULL), 0);
		assert_int_equal(a.type, USC_T_X64);
	}
	debuginfo_close(m);
}

/* Locals of the loop's block, at a pc inside it. */
static void test_block_locals(void **state)
{
	struct debuginfo *m;
	struct usc_fetcharg a;
	struct debuginfo_error err;
	uint64_t entry, size, pc;
	bool found = false;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_O0"), NULL, &m), 0);
	entry = sym("prog_O0", "handle", &size);
	for (pc = entry; pc < entry + size && !found; pc++)
		found = !debuginfo_lower_expr(m, pc, "step", 4, &a, &err);
	assert_true(found);
	assert_int_equal(a.type, USC_T_S64);
	assert_int_equal(a.insn[0].op, FOP_REG);
	assert_int_equal(a.insn[1].op, FOP_ST_MEM);
	assert_int_equal(debuginfo_lower_expr(m, pc - 1, "i", 1, &a, &err), 0);
	assert_int_equal(a.type, USC_T_S32);
	assert_int_equal(debuginfo_lower_expr(m, pc - 1, "total", 5, &a, &err), 0);
	debuginfo_close(m);
}

/* ---- -O2: registers at the entry ---------------------------------------- */

static void test_O2_entry(void **state)
{
	struct debuginfo *m;
	uint64_t entry, size;
	long id = offset_of("id"), path = offset_of("path"), tag = offset_of("tag");
	unsigned ok = 0, gone = 0;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_O2"), NULL, &m), 0);
	entry = sym("prog_O2", "handle", &size);
	check_expr(m, entry, "r", "REG di; ST_RAW 8; END :x64");
	check_expr(m, entry, "n", "REG si; ST_RAW 4; END :s32");
	check_expr(m, entry, "flag", "REG dx; ST_RAW 1; END :u8");
	check_expr(m, entry, "c", "REG cx; ST_RAW 4; END :u32");
	check_expr(m, entry, "r->id", W("REG di; ST_MEM %ld/4; END :s32", id));
	check_expr(m, entry, "r->tag", W("REG di; ST_STRING %ld; END :string", tag));
	check_expr(m, entry, "r->path", W("REG di; DEREF %ld; ST_STRING 0; END :string", path));
	check_error(m, entry, "r.id", -EINVAL, 1, MSGS("is a pointer"));
	/* across the function: a register program, or a clear error */
	for (uint64_t pc = entry; pc < entry + size; pc++) {
		static const char *const exprs[] = {"r", "n", "r->next->id"};

		for (unsigned i = 0; i < 3; i++) {
			struct usc_fetcharg a;
			struct debuginfo_error err = {0};
			int ret = debuginfo_lower_expr(m, pc, exprs[i], strlen(exprs[i]), &a, &err);

			if (!ret) {
				assert_int_equal(a.insn[0].op, FOP_REG);
				assert_int_equal(a.insn[a.ninsn - 1].op, FOP_END);
				ok++;
			} else if (ret == -ENODATA) {
				assert_non_null(strstr(err.msg, "is optimized out at 0x"));
				gone++;
			} else {
				assert_int_equal(ret, -EINVAL);
				if (!strstr(err.msg, "uscope cannot read yet: DW_OP_"))
					fail_msg("0x%" PRIx64 " %s: %s", pc, exprs[i], err.msg);
				gone++;
			}
		}
	}
	assert_true(ok > 0);
	debuginfo_close(m);
}

/* ---- debuginfo_params ------------------------------------------------------- */

static void check_params(struct usc_fetcharg *a, int n)
{
	static const char *const names[] = {"r", "n", "flag", "c"};
	static const enum usc_type types[] = {USC_T_X64, USC_T_S32, USC_T_U8, USC_T_U32};

	assert_int_equal(n, 4);
	for (int i = 0; i < 4; i++) {
		assert_string_equal(a[i].name, names[i]);
		assert_int_equal(a[i].type, types[i]);
		assert_int_equal(a[i].insn[a[i].ninsn - 1].op, FOP_END);
	}
}

static void test_params(void **state)
{
	struct debuginfo *m;
	struct usc_fetcharg a[8], one;
	uint64_t entry, pc;
	const char *b;
	int n;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_O0"), NULL, &m), 0);
	entry = sym("prog_O0", "handle", NULL);
	assert_int_equal(debuginfo_after_prologue(m, entry, &pc), 0);
	n = debuginfo_params(m, pc, a, 8);
	check_params(a, n);
	assert_int_equal(a[1].insn[1].imm, spill("prog_O0", "%esi", &b));
	/* the same program as the expression */
	assert_int_equal(debuginfo_lower_expr(m, pc, "flag", 4, &one, NULL), 0);
	assert_memory_equal(one.insn, a[2].insn, sizeof(one.insn));
	assert_int_equal(debuginfo_params(m, pc, a, 2), -ENOSPC);
	assert_string_equal(a[1].name, "n");
	/* no function there */
	assert_int_equal(debuginfo_params(m, 0x10, a, 8), -ENOENT);
	debuginfo_close(m);

	assert_int_equal(debuginfo_open(fx("prog_O2"), NULL, &m), 0);
	n = debuginfo_params(m, sym("prog_O2", "handle", NULL), a, 8);
	check_params(a, n);
	assert_int_equal(a[0].insn[0].op, FOP_REG);
	assert_int_equal(a[0].insn[0].reg, USC_REG_DI);
	debuginfo_close(m);
}

/* objtrace's registers: those of the pointer parameters, by their types */
static void test_param_ptr_regs(void **state)
{
	static const char *const builds[] = {"prog_O0", "prog_O2"};
	struct debuginfo *m;
	uint8_t mask;

	(void)state;
	for (size_t b = 0; b < 2; b++) {
		assert_int_equal(debuginfo_open(fx(builds[b]), NULL, &m), 0);
		/* handle(struct req *r, int n, unsigned char flag, enum color c) */
		assert_int_equal(debuginfo_param_ptr_regs(m, sym(builds[b], "handle", NULL), &mask),
				 0);
		assert_int_equal(mask, 0x01);
		/* main(int argc, char **argv) */
		assert_int_equal(debuginfo_param_ptr_regs(m, sym(builds[b], "main", NULL), &mask), 0);
		assert_int_equal(mask, 0x02);
		/* by_value(struct pair p, int k): p takes two registers */
		assert_int_equal(debuginfo_param_ptr_regs(m, sym(builds[b], "by_value", NULL),
							  &mask), -ENOTSUP);
		assert_int_equal(debuginfo_param_ptr_regs(m, 0x10, &mask), -ENOENT);
		debuginfo_close(m);
	}
}

/* ---- types: enums, bools, a struct whole, optimized out ------------------ */

static void test_shows(void **state)
{
	struct debuginfo *m;
	struct usc_fetcharg a[8];
	struct debuginfo_error err = {0};
	uint64_t pc, gf;
	int n;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_O0"), NULL, &m), 0);
	assert_int_equal(debuginfo_after_prologue(m, sym("prog_O0", "handle", NULL), &pc), 0);
	gf = sym("prog_O0", "g_flags", NULL);
	/* an enum: its size and sign, and its enumerators for output */
	memset(a, 0, sizeof(a));
	assert_int_equal(debuginfo_lower_expr(m, pc, "c", 1, &a[0], &err), 0);
	assert_int_equal(a[0].show, USC_SHOW_ENUM);
	assert_non_null(a[0].enums);
	assert_int_equal(a[0].enums->n, 2);
	assert_false(a[0].enums->flags);
	assert_string_equal(a[0].enums->v[1].name, "GREEN");
	assert_int_equal(a[0].enums->v[1].value, 5);
	/* the same type gives the same table */
	assert_int_equal(debuginfo_lower_expr(m, pc, "g_flags.color", 13, &a[1], &err), 0);
	assert_ptr_equal(a[1].enums, a[0].enums);
	/* single bits: a flags enum */
	check_expr(m, pc, "g_flags.mode", W("VADDR 0x%" PRIx64 "; ST_MEM 0/4; END :u32", gf + 4));
	assert_int_equal(debuginfo_lower_expr(m, pc, "g_flags.mode", 12, &a[0], &err), 0);
	assert_true(a[0].enums->flags);
	/* _Bool */
	check_expr(m, pc, "g_flags.on", W("VADDR 0x%" PRIx64 "; ST_MEM 0/1; END :u8", gf));
	assert_int_equal(debuginfo_lower_expr(m, pc, "g_flags.on", 10, &a[0], &err), 0);
	assert_int_equal(a[0].show, USC_SHOW_BOOL);
	/* an int is plain */
	assert_int_equal(debuginfo_lower_expr(m, pc, "n", 1, &a[0], &err), 0);
	assert_int_equal(a[0].show, USC_SHOW_PLAIN);
	assert_null(a[0].enums);

	/* a struct whole: one argument per member, grouped */
	memset(a, 0, sizeof(a));
	n = debuginfo_lower_var(m, pc, "g_flags", 7, "gf", a, 8, &err);
	assert_int_equal(n, 6);
	{
		static const char *const names[] = {"gf__on", "gf__mode", "gf__color",
						    "gf__inner", "gf__arr", "gf__label"};
		static const uint8_t shows[] = {USC_SHOW_BOOL, USC_SHOW_ENUM, USC_SHOW_ENUM,
						USC_SHOW_STRUCT, USC_SHOW_ARRAY, USC_SHOW_PLAIN};

		for (int i = 0; i < 6; i++) {
			assert_string_equal(a[i].name, names[i]);
			assert_int_equal(a[i].group_len, 2);
			assert_int_equal(a[i].group_first, i == 0);
			assert_int_equal(a[i].show, shows[i]);
		}
	}
	format_prog(&a[0], want_buf[15], sizeof(want_buf[15]));
	assert_string_equal(want_buf[15], W("VADDR 0x%" PRIx64 "; ST_MEM 0/1; END :u8", gf));
	format_prog(&a[3], want_buf[15], sizeof(want_buf[15]));
	assert_string_equal(want_buf[15], "IMM 0; ST_RAW 1; END :u8");	/* not fetched */
	format_prog(&a[5], want_buf[15], sizeof(want_buf[15]));
	assert_string_equal(want_buf[15],
			    W("VADDR 0x%" PRIx64 "; ST_STRING 0; END :string", gf + 40));
	/* the members of *r, through the pointer: the chain's own programs */
	n = debuginfo_lower_var(m, pc, "*r", 2, "r", a, 8, &err);
	assert_int_equal(n, 8);
	{
		struct usc_fetcharg one;

		assert_int_equal(debuginfo_lower_expr(m, pc, "r->path", 7, &one, NULL), 0);
		assert_memory_equal(one.insn, a[2].insn, sizeof(one.insn));
		assert_string_equal(a[2].name, "r__path");
		assert_int_equal(debuginfo_lower_expr(m, pc, "r->prio", 7, &one, NULL), 0);
		assert_memory_equal(one.insn, a[6].insn, sizeof(one.insn));
	}
	/* more members than room */
	assert_int_equal(debuginfo_lower_var(m, pc, "*r", 2, "r", a, 3, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "more than 3 members"));
	/* a scalar: one, its name untouched */
	strcpy(a[0].name, "keep");
	assert_int_equal(debuginfo_lower_var(m, pc, "n", 1, "n", a, 8, &err), 1);
	assert_string_equal(a[0].name, "keep");
	assert_int_equal(a[0].group_len, 0);
	/* a struct by value in $params: its members */
	assert_int_equal(debuginfo_after_prologue(m, sym("prog_O0", "by_value", NULL), &pc), 0);
	n = debuginfo_params(m, pc, a, 8);
	assert_int_equal(n, 3);
	assert_string_equal(a[0].name, "p__a");
	assert_string_equal(a[1].name, "p__b");
	assert_string_equal(a[2].name, "k");
	debuginfo_close(m);
}

/* -O2: where the location list does not cover pc, -ENODATA and an
 * immediate program marked optimized out */
static void test_optimized_out(void **state)
{
	struct debuginfo *m;
	struct usc_fetcharg a[2];
	struct debuginfo_error err;
	uint64_t entry, size, pc;
	bool found = false;

	(void)state;
	assert_int_equal(debuginfo_open(fx("prog_O2"), NULL, &m), 0);
	entry = sym("prog_O2", "handle", &size);
	/* flag is dead once used: somewhere its location list ends */
	for (pc = entry; pc < entry + size && !found; pc++) {
		memset(a, 0, sizeof(a));
		strcpy(a[0].name, "keep");
		found = debuginfo_lower_var(m, pc, "flag", 4, "flag", a, 2, &err) == -ENODATA;
	}
	assert_true(found);
	assert_non_null(strstr(err.msg, "'flag' is optimized out at 0x"));
	assert_true(a[0].optimized_out);
	assert_string_equal(a[0].name, "keep");
	assert_int_equal(a[0].insn[0].op, FOP_IMM);
	assert_int_equal(a[0].insn[a[0].ninsn - 1].op, FOP_END);
	assert_int_equal(debuginfo_lower_expr(m, pc - 1, "flag", 4, &a[1], &err), -ENODATA);
	debuginfo_close(m);
}

/* ---- setup ------------------------------------------------------------ */

static int group_setup(void **state)
{
	(void)state;
	usc_set_log(capture_log, NULL);
	if (fixture_build("dwarf", fxdir, sizeof(fxdir), tmpdir, sizeof(tmpdir)))
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	usc_set_log(NULL, NULL);
	return fixture_remove(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_prologue),
		cmocka_unit_test(test_prologue_O0_exact),
		cmocka_unit_test(test_O0_params_rbp),
		cmocka_unit_test(test_O0_params_rsp),
		cmocka_unit_test(test_debuglink),
		cmocka_unit_test(test_globals),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_block_locals),
		cmocka_unit_test(test_O2_entry),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_param_ptr_regs),
		cmocka_unit_test(test_shows),
		cmocka_unit_test(test_optimized_out),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
