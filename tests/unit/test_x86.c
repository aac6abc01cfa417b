/* Tests of src/x86/insn.c: a hand-written byte vector, and whole functions
 * of this binary checked at every offset against objdump's boundaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "x86/insn.h"
#include "x86/analyze.h"
#include "x86/plan.h"

/* endbr64; push rbp; mov rbp,rsp; mov eax,[rip+0x10];
 * movabs rax,0x1122334455667788; lock cmpxchg [rdx],ecx; ret */
static const uint8_t vec[] = {
	0xf3, 0x0f, 0x1e, 0xfa,
	0x55,
	0x48, 0x89, 0xe5,
	0x8b, 0x05, 0x10, 0x00, 0x00, 0x00,
	0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
	0xf0, 0x0f, 0xb1, 0x0a,
	0xc3,
};
static const uint64_t vec_bounds[] = { 0, 4, 5, 8, 14, 24, 28, 29 };

static void test_vector_every_offset(void **state)
{
	size_t nb = sizeof(vec_bounds) / sizeof(vec_bounds[0]);

	(void)state;
	assert_int_equal(vec_bounds[nb - 1], sizeof(vec));
	for (uint64_t off = 0; off <= sizeof(vec); off++) {
		uint64_t prev = 12345, next = 12345;
		size_t k = 0;
		int r = x86_check_boundary(vec, sizeof(vec), 0x401000, off, &prev, &next);

		while (k + 1 < nb && vec_bounds[k + 1] <= off)
			k++;
		if (vec_bounds[k] == off) {
			assert_int_equal(r, 0);
		} else {
			assert_int_equal(r, -EINVAL);
			assert_int_equal(prev, vec_bounds[k]);
			assert_int_equal(next, vec_bounds[k + 1]);
		}
	}
	assert_int_equal(x86_check_boundary(vec, sizeof(vec), 0, sizeof(vec) + 1, NULL, NULL),
			 -ERANGE);
	/* prev/next may be NULL */
	assert_int_equal(x86_check_boundary(vec, sizeof(vec), 0, 6, NULL, NULL), -EINVAL);
}

static void test_undecodable(void **state)
{
	/* push es is invalid in 64-bit mode */
	static const uint8_t bad[] = { 0x90, 0x06, 0x90, 0x90 };
	/* mov r/m64, r64 without its ModRM byte */
	static const uint8_t trunc[] = { 0x90, 0x48, 0x89 };
	uint64_t prev = 0, next = 0;

	(void)state;
	assert_int_equal(x86_check_boundary(bad, sizeof(bad), 0, 0, &prev, &next), 0);
	assert_int_equal(x86_check_boundary(bad, sizeof(bad), 0, 1, &prev, &next), 0);
	assert_int_equal(x86_check_boundary(bad, sizeof(bad), 0, 2, &prev, &next), -ENOEXEC);
	assert_int_equal(prev, 1);
	assert_int_equal(x86_check_boundary(bad, sizeof(bad), 0, 3, &prev, &next), -ENOEXEC);
	assert_int_equal(x86_check_boundary(trunc, sizeof(trunc), 0, 2, &prev, &next), -ENOEXEC);
	assert_int_equal(x86_check_boundary(trunc, sizeof(trunc), 0, 3, &prev, &next), -ENOEXEC);
	assert_int_equal(x86_check_boundary(trunc, sizeof(trunc), 0, 1, &prev, &next), 0);
	assert_int_equal(x86_check_boundary(NULL, 0, 0, 0, &prev, &next), 0);
}

/* A function with prefixes, VEX/EVEX-free SSE, AVX, long NOPs, jumps. */
__asm__(".text\n"
	".globl x86_sample\n"
	".type x86_sample, @function\n"
	"x86_sample:\n"
	"	endbr64\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	mov 0x10(%rip), %eax\n"
	"	movabs $0x1122334455667788, %rax\n"
	"	lock cmpxchg %ecx, (%rdx)\n"
	"	vaddps %ymm1, %ymm2, %ymm3\n"
	"	movdqu 0x12345678(%rax,%rbx,4), %xmm9\n"
	"	addl $0x12345678, %fs:0x28\n"
	"	rep movsb\n"
	"	nopw 0x0(%rax,%rax,1)\n"
	"	jmp 1f\n"
	"	.byte 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00\n"
	"1:	cmpq $-1, -0x80(%r12,%r13,8)\n"
	"	jne 1b\n"
	"	call *0x18(%rax)\n"
	"	pop %rbp\n"
	"	ret\n"
	".size x86_sample, .-x86_sample\n");
void x86_sample(void);

/* Instruction offsets (and the function's length, last) per objdump. */
static size_t objdump_insns(const char *sym, uint64_t *offs, size_t max)
{
	char cmd[PATH_MAX + 128], exe[PATH_MAX], line[2048];
	uint64_t first = UINT64_MAX, end = 0;
	size_t n = 0;
	ssize_t el;
	FILE *p;

	el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(el > 0);
	exe[el] = 0;
	snprintf(cmd, sizeof(cmd), "objdump -d -w --disassemble=%s '%s'", sym, exe);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		uint64_t a;
		char *s, *tab;
		size_t nbytes = 0;
		int used;

		if (sscanf(line, " %" SCNx64 ":%n", &a, &used) != 1 || line[used] != '\t')
			continue;
		s = line + used + 1;
		tab = strchr(s, '\t');
		if (!tab)
			tab = s + strlen(s);
		while (s < tab) {
			char *tok;
			while (s < tab && *s == ' ')
				s++;
			tok = s;
			while (s < tab && *s != ' ' && *s != '\n')
				s++;
			if (s - tok == 2)
				nbytes++;
			else if (s == tok)
				break;
		}
		if (first == UINT64_MAX)
			first = a;
		assert_true(n < max);
		offs[n++] = a - first;
		end = a - first + nbytes;
	}
	pclose(p);
	assert_true(n > 0);
	assert_true(n < max);
	offs[n] = end;
	return n;
}

static void check_function(const char *sym, const uint8_t *code)
{
	static uint64_t offs[65536];
	size_t n = objdump_insns(sym, offs, sizeof(offs) / sizeof(offs[0]) - 1);
	uint64_t len = offs[n];
	size_t k = 0;

	assert_true(len > 0);
	for (uint64_t off = 0; off <= len; off++) {
		uint64_t prev = 0, next = 0;
		int r = x86_check_boundary(code, len, (uint64_t)(uintptr_t)code, off,
					   &prev, &next);

		while (k < n && offs[k + 1] <= off)
			k++;
		if (offs[k] == off) {
			if (r != 0)
				fail_msg("%s+%" PRIu64 ": %d, expected a boundary", sym, off, r);
		} else {
			if (r != -EINVAL || prev != offs[k] || next != offs[k + 1])
				fail_msg("%s+%" PRIu64 ": %d [%" PRIu64 ", %" PRIu64 "], "
					 "expected inside [%" PRIu64 ", %" PRIu64 "]",
					 sym, off, r, prev, next, offs[k], offs[k + 1]);
		}
	}
}

static void test_against_objdump_asm(void **state)
{
	(void)state;
	check_function("x86_sample", (const uint8_t *)(uintptr_t)&x86_sample);
}

static void test_against_objdump_compiled(void **state)
{
	(void)state;
	/* the decoder's own compiled (sanitizer-instrumented) code */
	check_function("x86_check_boundary", (const uint8_t *)(uintptr_t)&x86_check_boundary);
	check_function("objdump_insns", (const uint8_t *)(uintptr_t)&objdump_insns);
}

/* ---- return sites: byte vectors --------------------------------------- */

static ssize_t sites_of(const uint8_t *code, size_t len, uint64_t addr,
			struct x86_ret_site **rs, const char **why)
{
	struct x86_region r = {code, len, addr};

	return x86_return_sites(&r, 1, NULL, rs, why);
}

static void test_ret_sites_plain_and_internal_jumps(void **state)
{
	(void)state;
	/* push rbp; mov rbp,rsp; test edi,edi; je +1; pop rbp; (target:) pop rbp; ret; ret imm16 */
	static const uint8_t f[] = {0x55, 0x48, 0x89, 0xe5, 0x85, 0xff, 0x74, 0x01, 0x5d,
				    0x5d, 0xc3, 0xc2, 0x08, 0x00};
	struct x86_ret_site *rs;
	const char *why;

	assert_int_equal(sites_of(f, sizeof(f), 0x1000, &rs, &why), 2);
	assert_int_equal(rs[0].addr, 0x100a);
	assert_int_equal(rs[0].kind, X86_RET);
	assert_int_equal(rs[1].addr, 0x100b);
	assert_int_equal(rs[1].kind, X86_RET);
	free(rs);
}

static void test_ret_sites_tail_call(void **state)
{
	(void)state;
	/* add edi,1; jmp rel32 +0x100 (outside: a tail call); jmp rel8 -7 (inside) */
	static const uint8_t f[] = {0x83, 0xc7, 0x01, 0xe9, 0x00, 0x01, 0x00, 0x00, 0xeb, 0xf6};
	struct x86_ret_site *rs;
	const char *why;

	assert_int_equal(sites_of(f, sizeof(f), 0x2000, &rs, &why), 1);
	assert_int_equal(rs[0].addr, 0x2003);
	assert_int_equal(rs[0].kind, X86_TAIL_JMP);
	assert_int_equal(rs[0].target, 0x2108);	/* the callee */
	free(rs);
}

/* A jmp through a register that no jump table feeds is a tail call through
 * a pointer: its callee is unknown (target 0). */
static void test_ret_sites_tail_call_pointer(void **state)
{
	(void)state;
	/* jmp rax; ret */
	static const uint8_t ind[] = {0xff, 0xe0, 0xc3};
	struct x86_ret_site *rs;
	const char *why;

	assert_int_equal(sites_of(ind, sizeof(ind), 0x3000, &rs, &why), 2);
	assert_int_equal(rs[0].addr, 0x3000);
	assert_int_equal(rs[0].kind, X86_TAIL_JMP);
	assert_int_equal(rs[0].target, 0);
	assert_int_equal(rs[1].addr, 0x3002);
	assert_int_equal(rs[1].kind, X86_RET);
	free(rs);
}

static void test_ret_sites_refused(void **state)
{
	(void)state;
	/* cmp edi,7; ja rel32 +0x40 (out); ret */
	static const uint8_t jcc[] = {0x83, 0xff, 0x07, 0x0f, 0x87, 0x40, 0x00, 0x00, 0x00, 0xc3};
	/* ud2 */
	static const uint8_t noret[] = {0x0f, 0x0b};
	struct x86_ret_site *rs;
	const char *why;

	assert_int_equal(sites_of(jcc, sizeof(jcc), 0x4000, &rs, &why), -ENOTSUP);
	assert_non_null(strstr(why, "conditional jump out of the function at 0x4003"));
	assert_int_equal(sites_of(noret, sizeof(noret), 0x5000, &rs, &why), -ENOENT);
}

/* GCC's NAME.cold: the conditional jump goes to a fragment of the same
 * function, which returns from there. */
static void test_ret_sites_cold_fragment(void **state)
{
	(void)state;
	/* hot at 0x4000: cmp edi,7; ja rel32 -> 0x4100 (cold); ret */
	static const uint8_t hot[] = {0x83, 0xff, 0x07, 0x0f, 0x87, 0xf7, 0x00, 0x00, 0x00, 0xc3};
	/* cold at 0x4100: mov eax,-1; ret */
	static const uint8_t cold[] = {0xb8, 0xff, 0xff, 0xff, 0xff, 0xc3};
	struct x86_region r[2] = {{hot, sizeof(hot), 0x4000}, {cold, sizeof(cold), 0x4100}};
	struct x86_ret_site *rs;
	const char *why;

	assert_int_equal(x86_return_sites(r, 2, NULL, &rs, &why), 2);
	assert_int_equal(rs[0].addr, 0x4009);
	assert_int_equal(rs[1].addr, 0x4105);
	free(rs);
}

/* What an instruction changes, for placing a patch after it: the entries
 * of tests/targets/mixentry.c and their kind. */
static void test_effects(void **state)
{
	(void)state;
	static const struct {
		uint8_t code[8];
		uint8_t len;
		bool in_place, rerun, flags, rmem, wmem;
		uint8_t reg, changed;	/* one register's changed bytes (0-15) */
	} c[] = {
		{{0x85, 0xf6}, 2, true, true, true, false, false, 6, 0},	/* test %esi,%esi */
		{{0x48, 0x63, 0xff}, 3, true, false, false, false, false, 7, 0xf0}, /* movslq %edi,%rdi */
		{{0x48, 0x63, 0xf7}, 3, true, true, false, false, false, 6, 0xff}, /* movslq %edi,%rsi */
		{{0x48, 0x8b, 0x47, 0x08}, 4, true, true, false, true, false, 0, 0xff}, /* mov 8(%rdi),%rax */
		{{0x48, 0x83, 0xc7, 0x4d}, 4, true, false, true, false, false, 7, 0xff}, /* add $77,%rdi */
		{{0x31, 0xc0}, 2, true, true, true, false, false, 0, 0xff},	/* xor %eax,%eax */
		{{0x89, 0xff}, 2, true, false, false, false, false, 7, 0xf0},	/* mov %edi,%edi */
		{{0x40, 0x0f, 0xb6, 0xff}, 4, true, false, false, false, false, 7, 0xfe}, /* movzbl %dil,%edi */
		{{0x48, 0x98}, 2, true, false, false, false, false, 0, 0xf0},	/* cltq */
		{{0x48, 0x89, 0x7c, 0x24, 0x08}, 5, true, false, false, false, true, 7, 0}, /* mov %rdi,8(%rsp) */
		{{0x48, 0x89, 0xe5}, 3, true, true, false, false, false, 5, 0xff}, /* mov %rsp,%rbp */
		{{0x55}, 1, false, false, false, false, true, 4, 0},	/* push %rbp */
		{{0x48, 0x83, 0xe4, 0xf0}, 4, false, false, true, false, false, 4, 0}, /* and $-16,%rsp */
		{{0xeb, 0x10}, 2, false, false, false, false, false, 0, 0},	/* jmp */
		{{0x0f, 0x44, 0xc7}, 3, true, false, false, false, false, 0, 0xff}, /* cmove %edi,%eax */
		{{0xf0, 0x48, 0xff, 0x07}, 4, false, false, true, true, true, 0, 0}, /* lock incq (%rdi) */
		{{0x66, 0x0f, 0xef, 0xc0}, 4, true, true, false, false, false, 0, 0}, /* pxor %xmm0,%xmm0 */
		{{0x8d, 0x47, 0x01}, 3, true, true, false, false, false, 0, 0xff}, /* lea 1(%rdi),%eax */
		{{0x8d, 0x7f, 0x01}, 3, true, false, false, false, false, 7, 0xff}, /* lea 1(%rdi),%edi */
		{{0xf3, 0x0f, 0x1e, 0xfa}, 4, true, true, false, false, false, 0, 0}, /* endbr64 */
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct x86_effects e;

		assert_int_equal(x86_insn_effects(c[i].code, sizeof(c[i].code), &e), 0);
		assert_int_equal(e.len, c[i].len);
		assert_int_equal(e.in_place, c[i].in_place);
		if (!e.in_place)
			continue;
		assert_int_equal(e.rerun, c[i].rerun);
		assert_int_equal(e.writes_flags, c[i].flags);
		assert_int_equal(e.reads_mem, c[i].rmem);
		assert_int_equal(e.writes_mem, c[i].wmem);
		assert_int_equal(e.changed[c[i].reg], c[i].changed);
	}
	{
		static const uint8_t bad[] = {0x0f, 0xff};
		struct x86_effects e;

		assert_int_equal(x86_insn_effects(bad, sizeof(bad), &e), -ENOEXEC);
	}
}

/* A branch lands right after the first instruction: a patch placed there
 * (the inject engine's plan_pre) would fire the probe on the loop's every
 * turn, and undo a push that was not done. */
static void test_branch_target(void **state)
{
	(void)state;
	/* 0x1000: push %rbx; (0x1001:) dec %edi; jne 0x1001; pop %rbx; ret */
	static const uint8_t loop[] = {0x53, 0xff, 0xcf, 0x75, 0xfc, 0x5b, 0xc3};
	/* 0x2000: push %rbx; mov %edi,%eax; pop %rbx; ret */
	static const uint8_t flat[] = {0x53, 0x89, 0xf8, 0x5b, 0xc3};
	struct x86_region r1 = {loop, sizeof(loop), 0x1000}, r2 = {flat, sizeof(flat), 0x2000};

	assert_int_equal(x86_branch_target(&r1, 1, NULL, 0x1001), 1);
	assert_int_equal(x86_branch_target(&r1, 1, NULL, 0x1003), 0);
	assert_int_equal(x86_branch_target(&r2, 1, NULL, 0x2001), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vector_every_offset),
		cmocka_unit_test(test_undecodable),
		cmocka_unit_test(test_against_objdump_asm),
		cmocka_unit_test(test_against_objdump_compiled),
		cmocka_unit_test(test_ret_sites_plain_and_internal_jumps),
		cmocka_unit_test(test_ret_sites_tail_call),
		cmocka_unit_test(test_ret_sites_tail_call_pointer),
		cmocka_unit_test(test_ret_sites_refused),
		cmocka_unit_test(test_ret_sites_cold_fragment),
		cmocka_unit_test(test_effects),
		cmocka_unit_test(test_branch_target),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
