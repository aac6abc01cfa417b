/* Unit tests for lowering parsed fetchargs to the kernel's uprobe_events
 * syntax (src/engine/tracefs/tracefs_lower.c): parse a probe, lower it, and
 * compare with the exact text the kernel is given. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/tracefs/tracefs_lower.h"
#include "probe/probe.h"

static struct usc_probe_spec spec;

static void parse_ok(const char *text)
{
	struct usc_parse_error err = {0};

	if (usc_probe_parse(text, &spec, &err))
		fail_msg("\"%s\": %s at %zu", text, usc_parse_strerror(err.code), err.pos);
	/* a function probe: $argN binds to the SysV registers */
	for (unsigned i = 0; i < spec.nargs; i++) {
		struct usc_fetcharg bound;

		assert_int_equal(probe_bind_arg(&spec.args[i], NULL, 0, &bound), 0);
		spec.args[i] = bound;
	}
}

struct lcase {
	const char *probe;
	const char *want;	/* tracefs_lower_args of every argument */
};

static const struct lcase cases[] = {
	/* registers: kernel names, the alias's width as the default type */
	{"main x=%eax", "x=%ax:x32"},
	{"main %rax %ax %al %r8d %sil %rip %rsp %r15w",
	 "arg1=%ax:x64 arg2=%ax:x16 arg3=%ax:x8 arg4=%r8:x32 arg5=%si:x8 arg6=%ip:x64 "
	 "arg7=%sp:x64 arg8=%r15:x16"},
	{"main %eax:s64 %rdi:u8", "arg1=%ax:s64 arg2=%di:u8"},
	/* $argN by the SysV ABI */
	{"main $arg2", "arg1=%si:x64"},
	{"main $arg1 $arg3 $arg4 $arg5 $arg6:u8",
	 "arg1=%di:x64 arg2=%dx:x64 arg3=%cx:x64 arg4=%r8:x64 arg5=%r9:u8"},
	/* strings: a plain value typed :string is the address of the string */
	{"main s=$arg1:string", "s=+0(%di):string"},
	{"main %rsi:ustring", "arg1=+0(%si):ustring"},
	{"main +0(+8($arg1)):string", "arg1=+0(+8(%di)):string"},
	{"main p=+4($arg1):string", "p=+4(%di):string"},
	/* dereferences */
	{"main +8(+16(%di)):u32", "arg1=+8(+16(%di)):u32"},
	{"main +8(+16(-4(%rdi)))", "arg1=+8(+16(-4(%di))):x64"},
	{"main -8(%rbp)", "arg1=-8(%bp):x64"},
	{"main -8(%rbp):s32 +010(%rdi):s64", "arg1=-8(%bp):s32 arg2=+8(%di):s64"},
	{"main +0x7fffffff(%rsp) -2147483647(%rsp)",
	 "arg1=+2147483647(%sp):x64 arg2=-2147483647(%sp):x64"},
	/* memory: @ADDR already means the memory at ADDR */
	{"main @0x1000:u32", "arg1=@0x1000:u32"},
	{"main @4096", "arg1=@0x1000:x64"},
	{"main @+0x2000:s16", "arg1=@+0x2000:s16"},
	{"main @0x1000:string", "arg1=@0x1000:string"},
	{"main +4(@0x1000):u8", "arg1=+4(@0x1000):u8"},
	{"main +0(@0x1000)", "arg1=+0(@0x1000):x64"},
	{"main -8(@+0x10):s8", "arg1=-8(@+0x10):s8"},
	{"main +0(@0x1000):string", "arg1=+0(@0x1000):string"},
	{"main +0(+0(@0x1000)):u16", "arg1=+0(+0(@0x1000)):u16"},
	/* $-variables */
	{"main $comm", "arg1=$comm:string"},
	{"main c=$comm:string", "c=$comm:string"},
	{"main $stack2", "arg1=$stack2:x64"},
	{"main $stack $stack0:u32", "arg1=$stack:x64 arg2=$stack0:u32"},
	{"main +8($stack):s16", "arg1=+8($stack):s16"},
	{"r main $retval:s32", "arg1=$retval:s32"},
	{"r main ret=$retval", "ret=$retval:x64"},
	{"r main $retval:string", "arg1=+0($retval):string"},
	/* symbols travel as x64 and are resolved in user space */
	{"main %di:symbol", "arg1=%di:x64"},
	{"main +8(%rdi):symbol", "arg1=+8(%di):x64"},
	/* bitfields */
	{"main %di:b4@2/32", "arg1=%di:b4@2/32"},
	{"main %edi:b8@8/32 +2($arg2):b8@0/16 $arg1:b1@63/64",
	 "arg1=%di:b8@8/32 arg2=+2(%si):b8@0/16 arg3=%di:b1@63/64"},
	/* every fixed type */
	{"main %rdi:u8 %rdi:u16 %rdi:u32 %rdi:u64 %rdi:s8 %rdi:s16 %rdi:s32 %rdi:s64",
	 "arg1=%di:u8 arg2=%di:u16 arg3=%di:u32 arg4=%di:u64 arg5=%di:s8 arg6=%di:s16 "
	 "arg7=%di:s32 arg8=%di:s64"},
	{"main %rdi:x8 %rdi:x16 %rdi:x32 %rdi:x64",
	 "arg1=%di:x8 arg2=%di:x16 arg3=%di:x32 arg4=%di:x64"},
	/* no arguments */
	{"main", ""},
};

static void check_case(void **state)
{
	const struct lcase *c = *state;
	char buf[4096];
	int ret;

	parse_ok(c->probe);
	memset(buf, 'Z', sizeof(buf));
	ret = tracefs_lower_args(spec.args, spec.nargs, 0, false, buf, sizeof(buf));
	if (ret)
		fail_msg("\"%s\": tracefs_lower_args = %d", c->probe, ret);
	if (strcmp(buf, c->want))
		fail_msg("\"%s\" lowers to \"%s\", expected \"%s\"", c->probe, buf, c->want);

	/* and one at a time */
	const char *w = c->want;

	for (unsigned i = 0; i < spec.nargs; i++) {
		size_t n = strcspn(w, " ");

		assert_int_equal(tracefs_lower_arg(&spec.args[i], 0, false, buf, sizeof(buf)), 0);
		if (strlen(buf) != n || strncmp(buf, w, n))
			fail_msg("\"%s\" arg %u lowers to \"%s\", expected \"%.*s\"", c->probe, i, buf,
				 (int)n, w);
		w += n + (w[n] == ' ');
	}
}

static void test_deep(void **state)
{
	(void)state;
	char text[256], buf[512];

	strcpy(text, "main ");
	for (int i = 0; i < 12; i++)
		strcat(text, "-1(");
	strcat(text, "%r12");
	for (int i = 0; i < 12; i++)
		strcat(text, ")");
	strcat(text, ":b3@5/8");
	parse_ok(text);
	assert_int_equal(tracefs_lower_arg(&spec.args[0], 0, false, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "arg1=-1(-1(-1(-1(-1(-1(-1(-1(-1(-1(-1(-1(%r12)))))))))))):b3@5/8");
}

static void test_enospc(void **state)
{
	(void)state;
	char buf[64];
	const char *want = "name=+8(+16(%di)):u32";
	size_t n = strlen(want);

	parse_ok("main name=+8(+16(%rdi)):u32");
	/* exactly enough room (with the NUL) works, one less does not */
	assert_int_equal(tracefs_lower_arg(&spec.args[0], 0, false, buf, n + 1), 0);
	assert_string_equal(buf, want);
	assert_int_equal(tracefs_lower_arg(&spec.args[0], 0, false, buf, n), -ENOSPC);

	/* the whole list */
	parse_ok("main a=%rdi b=%rsi");
	assert_int_equal(tracefs_lower_args(spec.args, spec.nargs, 0, false, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "a=%di:x64 b=%si:x64");
	assert_int_equal(tracefs_lower_args(spec.args, spec.nargs, 0, false, buf, strlen("a=%di:x64 b=%si:x64") + 1), 0);
	assert_string_equal(buf, "a=%di:x64 b=%si:x64");
	assert_int_equal(tracefs_lower_args(spec.args, spec.nargs, 0, false, buf, 10), -ENOSPC);
}

static void test_max_args(void **state)
{
	(void)state;
	char text[512], buf[2048], want[2048];
	size_t used = 0;

	strcpy(text, "main");
	for (int i = 0; i < USC_MAX_ARGS; i++)
		strcat(text, " $stack");
	parse_ok(text);
	for (int i = 0; i < USC_MAX_ARGS; i++)
		used += (size_t)snprintf(want + used, sizeof(want) - used, "%sarg%d=$stack:x64",
					 i ? " " : "", i + 1);
	assert_int_equal(tracefs_lower_args(spec.args, spec.nargs, 0, false, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
	assert_int_equal(tracefs_lower_args(spec.args, spec.nargs, 0, false, buf, 100), -ENOSPC);
}

/* a bitfield type without its geometry cannot be lowered */
static void test_bitfield_without_geometry(void **state)
{
	(void)state;
	struct usc_fetcharg a = {
		.name = "x",
		.type = USC_T_BITFIELD,
		.ninsn = 3,
		.insn = {{.op = FOP_REG, .reg = USC_REG_DI}, {.op = FOP_ST_RAW, .size = 4},
			 {.op = FOP_END}},
	};
	char buf[64];

	assert_int_equal(tracefs_lower_arg(&a, 0, false, buf, sizeof(buf)), -EINVAL);
}

/* USDT sym(%rip) operands are link-time addresses: the kernel wants them as
 * @+OFFSET relative to the probed file, so the site's offset-vaddr delta
 * applies. Two registers added (SIB) and an unbound $argN cannot be lowered. */
static void test_vaddr_and_unlowerable(void **state)
{
	(void)state;
	char buf[128];
	struct usc_fetcharg v = {
		.name = "g", .type = USC_T_S32, .ninsn = 3,
		.insn = {{.op = FOP_VADDR, .imm = 0x4010}, {.op = FOP_ST_MEM, .size = 4},
			 {.op = FOP_END}},
	};
	struct usc_fetcharg sib = {
		.name = "s", .type = USC_T_U64, .ninsn = 4,
		.insn = {{.op = FOP_REG, .reg = USC_REG_AX},
			 {.op = FOP_ADD_REG, .reg = USC_REG_BX, .size = 8},
			 {.op = FOP_ST_MEM, .size = 8}, {.op = FOP_END}},
	};

	assert_int_equal(tracefs_lower_arg(&v, -0x1000, false, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "g=@+0x3010:s32");
	assert_int_equal(tracefs_lower_arg(&sib, 0, false, buf, sizeof(buf)), -ENOTSUP);
	struct usc_parse_error err;

	assert_int_equal(usc_probe_parse("main $arg2", &spec, &err), 0);
	assert_int_equal(tracefs_lower_arg(&spec.args[0], 0, false, buf, sizeof(buf)), -ENOTSUP);
}

/* $argN on a USDT probe takes the argument's program; a bare $argN keeps its
 * size and sign, a typed or dereferenced one is built on its value. */
static void test_usdt_binding(void **state)
{
	(void)state;
	struct usc_fetcharg uargs[2] = {
		{.name = "arg1", .type = USC_T_S32, .ninsn = 3,
		 .insn = {{.op = FOP_REG, .reg = USC_REG_AX}, {.op = FOP_ST_RAW, .size = 4},
			  {.op = FOP_END}}},
		{.name = "arg2", .type = USC_T_U64, .ninsn = 3,
		 .insn = {{.op = FOP_REG, .reg = USC_REG_BP}, {.op = FOP_ST_MEM, .size = 8, .imm = -16},
			  {.op = FOP_END}}},
	};
	static const struct {
		const char *probe, *want;
	} cases[] = {
		{"%p:n $arg1", "arg1=%ax:s32"},
		{"%p:n $arg2", "arg1=-16(%bp):u64"},
		{"%p:n x=$arg2:s16", "x=-16(%bp):s16"},
		{"%p:n s=$arg2:string", "s=+0(-16(%bp)):string"},
		{"%p:n f=+8($arg2):u32", "f=+8(-16(%bp)):u32"},
		{"%p:n t=+0(+8($arg2)):string", "t=+0(+8(-16(%bp))):string"},
		{"%p:n s=$arg1:string", "s=+0(%ax):string"},
	};
	char buf[256];
	struct usc_parse_error err;
	struct usc_fetcharg out;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(usc_probe_parse(cases[i].probe, &spec, &err), 0);
		assert_int_equal(spec.loc_kind, USC_LOC_USDT);
		assert_int_equal(probe_bind_arg(&spec.args[0], uargs, 2, &out), 0);
		assert_int_equal(tracefs_lower_arg(&out, 0, false, buf, sizeof(buf)), 0);
		if (strcmp(buf, cases[i].want))
			fail_msg("\"%s\" binds and lowers to \"%s\", expected \"%s\"", cases[i].probe,
				 buf, cases[i].want);
	}
	assert_int_equal(usc_probe_parse("%p:n $arg3", &spec, &err), 0);
	assert_int_equal(probe_bind_arg(&spec.args[0], uargs, 2, &out), -ERANGE);
	assert_int_equal(usc_probe_parse("%p:n $arg12", &spec, &err), 0);
	/* $arg7 to $arg9 parse (a Go function's registers); C's binding refuses */
	assert_int_equal(usc_probe_parse("main $arg7", &spec, &err), 0);
	assert_int_equal(probe_bind_arg(&spec.args[0], NULL, 0, &out), -ERANGE);
	assert_int_not_equal(usc_probe_parse("main $arg10", &spec, &err), 0);
	assert_int_equal(err.code, USC_PERR_BAD_ARG_INDEX);
}

/* A variable lowered from the debug info, then the user's :TYPE: a char
 * array in place (r->tag, at +4) reads its bytes there; a char pointer
 * (r->path, at +16) stays a pointer to read through. */
static void test_char_array_binding(void **state)
{
	(void)state;
	struct usc_fetcharg arr = {
		.name = "tag", .type = USC_T_STRING, .in_place = true, .ninsn = 3,
		.insn = {{.op = FOP_REG, .reg = USC_REG_DI}, {.op = FOP_ST_STRING, .imm = 4},
			 {.op = FOP_END}}};
	struct usc_fetcharg ptr = {
		.name = "path", .type = USC_T_STRING, .ninsn = 4,
		.insn = {{.op = FOP_REG, .reg = USC_REG_DI}, {.op = FOP_DEREF, .imm = 16},
			 {.op = FOP_ST_STRING}, {.op = FOP_END}}};
	static const struct {
		const char *probe, *want;
		bool array;
	} cases[] = {
		{"%p:n a=$arg1:string", "a=+4(%di):string", true},
		{"%p:n a=$arg1:x16", "a=+4(%di):x16", true},
		{"%p:n a=$arg1:u8", "a=+4(%di):u8", true},
		{"%p:n p=$arg1:x64", "p=+16(%di):x64", false},
		{"%p:n p=$arg1:string", "p=+0(+16(%di)):string", false},
	};
	char buf[256];
	struct usc_parse_error err;
	struct usc_fetcharg out;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(usc_probe_parse(cases[i].probe, &spec, &err), 0);
		assert_int_equal(probe_bind_arg(&spec.args[0], cases[i].array ? &arr : &ptr, 1, &out),
				 0);
		assert_int_equal(tracefs_lower_arg(&out, 0, false, buf, sizeof(buf)), 0);
		if (strcmp(buf, cases[i].want))
			fail_msg("\"%s\" binds and lowers to \"%s\", expected \"%s\"", cases[i].probe,
				 buf, cases[i].want);
	}
}

/* the hidden pointer field that tells a NULL string from a bad pointer */
static void test_string_ptrs(void **state)
{
	(void)state;
	char buf[512];

	parse_ok("main s=$arg1:string t=+0(+8(%rsi)):ustring n=%rdx:u32 c=$comm a=@0x1000:string "
		 "p=+0(@0x1000):string q=+4(%rdi):string");
	assert_int_equal(tracefs_lower_string_ptrs(spec.args, spec.nargs, 0, false, buf,
						   sizeof(buf)), 0);
	/* not a number, $comm, the string at @ADDR (its address is ADDR), nor
	 * one at an offset from the pointer */
	assert_string_equal(buf, "__usc_p0=%di:x64 __usc_p1=+8(%si):x64 __usc_p5=@0x1000:x64");
	parse_ok("main n=%rdx:u32");
	assert_int_equal(tracefs_lower_string_ptrs(spec.args, spec.nargs, 0, false, buf,
						   sizeof(buf)), 0);
	assert_string_equal(buf, "");
	parse_ok("main s=$arg1:string");
	assert_int_equal(tracefs_lower_string_ptrs(spec.args, spec.nargs, 0, false, buf, 8),
			 -ENOSPC);
}

int main(void)
{
	const size_t n = sizeof(cases) / sizeof(cases[0]);
	struct CMUnitTest t[sizeof(cases) / sizeof(cases[0])];
	int fails = 0;

	for (size_t i = 0; i < n; i++)
		t[i] = (struct CMUnitTest){cases[i].probe, check_case, NULL, NULL, (void *)&cases[i]};

	const struct CMUnitTest others[] = {
		cmocka_unit_test(test_deep),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_max_args),
		cmocka_unit_test(test_bitfield_without_geometry),
		cmocka_unit_test(test_vaddr_and_unlowerable),
		cmocka_unit_test(test_usdt_binding),
		cmocka_unit_test(test_char_array_binding),
		cmocka_unit_test(test_string_ptrs),
	};

	fails += _cmocka_run_group_tests("lower", t, n, NULL, NULL);
	fails += cmocka_run_group_tests_name("lower_misc", others, NULL, NULL);
	return fails ? 1 : 0;
}
