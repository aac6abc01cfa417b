/* Tests of src/x86/reloc.c, Frida style: input bytes at one address, the
 * expected bytes at another, and the output decoded again (Zydis) to check
 * that every branch and RIP-relative operand still reaches the original
 * absolute address. Then patch planning on hand-assembled functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "x86/plan.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The absolute addresses the output's instructions reach (a branch target
 * or a RIP-relative operand), in order; 0 for instructions with neither. */
static size_t reached(const uint8_t *code, size_t len, uint64_t at, uint64_t *abs, size_t max,
		      ZydisMnemonic *mn)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	size_t n = 0;

	assert_true(ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
						  ZYDIS_STACK_WIDTH_64)));
	for (size_t off = 0; off < len && n < max; off += in.length, n++) {
		assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, len - off, &in,
								ops)));
		abs[n] = 0;
		mn[n] = in.mnemonic;
		for (int k = 0; k < in.operand_count_visible; k++)
			if ((ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[k].imm.is_relative) ||
			    (ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY &&
			     ops[k].mem.base == ZYDIS_REGISTER_RIP))
				assert_true(ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[k], at + off,
										  &abs[n])));
	}
	return n;
}

/* Relocate in[] from -> to, expect exp[] exactly. */
static void expect_reloc(const uint8_t *in, size_t len, uint64_t from, uint64_t to,
			 const uint8_t *exp, size_t elen)
{
	uint8_t out[256];
	const char *why = NULL;
	ssize_t n = x86_relocate(in, len, from, to, out, sizeof(out), &why);

	if (n < 0)
		fail_msg("x86_relocate: %zd (%s)", n, why ? why : "?");
	assert_true((size_t)n <= X86_RELOC_MAX(len));
	if ((size_t)n != elen || memcmp(out, exp, elen)) {
		for (ssize_t i = 0; i < n; i++)
			fprintf(stderr, "%02x ", out[i]);
		fprintf(stderr, "\n");
	}
	assert_int_equal(n, elen);
	assert_memory_equal(out, exp, elen);
}

static void test_rip_relative_mov(void **state)
{
	/* mov rax,[rip+0x10] at 0x401000 reads 0x401017 */
	static const uint8_t in[] = {0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00};
	/* at 0x402000: [rip-0xff0] */
	static const uint8_t exp[] = {0x48, 0x8b, 0x05, 0x10, 0xf0, 0xff, 0xff};
	uint64_t abs[4];
	ZydisMnemonic mn[4];

	(void)state;
	expect_reloc(in, sizeof(in), 0x401000, 0x402000, exp, sizeof(exp));
	assert_int_equal(reached(exp, sizeof(exp), 0x402000, abs, 4, mn), 1);
	assert_int_equal(mn[0], ZYDIS_MNEMONIC_MOV);
	assert_int_equal(abs[0], 0x401017);
	/* lea, cmp with an immediate after the displacement, an SSE load */
	static const uint8_t in2[] = {
		0x48, 0x8d, 0x3d, 0x00, 0x01, 0x00, 0x00,		/* lea rdi,[rip+0x100] */
		0x83, 0x3d, 0xf0, 0xff, 0xff, 0xff, 0x07,		/* cmp dword [rip-0x10],7 */
		0x66, 0x0f, 0x6f, 0x05, 0x00, 0x10, 0x00, 0x00,	/* movdqa xmm0,[rip+0x1000] */
	};
	uint8_t out[64];
	const char *why;
	ssize_t n = x86_relocate(in2, sizeof(in2), 0x7f0000001000, 0x7f0010000000, out,
				 sizeof(out), &why);

	assert_int_equal(n, sizeof(in2));
	assert_int_equal(reached(out, (size_t)n, 0x7f0010000000, abs, 4, mn), 3);
	assert_int_equal(abs[0], 0x7f0000001007 + 0x100);
	assert_int_equal(abs[1], 0x7f000000100e - 0x10);
	assert_int_equal(abs[2], 0x7f0000001016 + 0x1000);
	assert_int_equal(mn[1], ZYDIS_MNEMONIC_CMP);
	assert_int_equal(out[13], 0x07);	/* the immediate kept */
}

static void test_rip_relative_out_of_range(void **state)
{
	static const uint8_t in[] = {0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00};
	uint8_t out[64];
	const char *why = NULL;

	(void)state;
	assert_int_equal(x86_relocate(in, sizeof(in), 0x401000, 0x401000 + 0x90000000ULL, out,
				      sizeof(out), &why), -ERANGE);
	assert_non_null(why);
	/* just within reach: 0x7f0000401017 - (to + 7) == INT32_MIN */
	assert_int_equal(x86_relocate(in, sizeof(in), 0x7f0000401000, 0x7f0080401010, out,
				      sizeof(out), &why), sizeof(in));
	assert_memory_equal(out + 3, "\x00\x00\x00\x80", 4);
	assert_int_equal(x86_relocate(in, sizeof(in), 0x7f0000401000, 0x7f0080401011, out,
				      sizeof(out), &why), -ERANGE);
}

static void test_jcc_short_outside_block(void **state)
{
	/* je +0x10 at 0x401000 -> 0x401012 */
	static const uint8_t in[] = {0x74, 0x10};
	/* at 0x500000: je rel32 to 0x401012 */
	static const uint8_t exp[] = {0x0f, 0x84, 0x0c, 0x10, 0xf0, 0xff};
	uint64_t abs[2];
	ZydisMnemonic mn[2];

	(void)state;
	expect_reloc(in, sizeof(in), 0x401000, 0x500000, exp, sizeof(exp));
	assert_int_equal(reached(exp, sizeof(exp), 0x500000, abs, 2, mn), 1);
	assert_int_equal(mn[0], ZYDIS_MNEMONIC_JZ);
	assert_int_equal(abs[0], 0x401012);
}

static void test_jcc_short_inside_block(void **state)
{
	/* jne +1 (to the second nop); nop; nop */
	static const uint8_t in[] = {0x75, 0x01, 0x90, 0x90};
	/* jne rel32 +1 still lands on the second nop of the copy */
	static const uint8_t exp[] = {0x0f, 0x85, 0x01, 0x00, 0x00, 0x00, 0x90, 0x90};

	(void)state;
	expect_reloc(in, sizeof(in), 0x401000, 0x7f0000000000, exp, sizeof(exp));
	/* into the middle of an instruction: refused */
	static const uint8_t mid[] = {0x75, 0x01, 0x48, 0x89, 0xe5};
	uint8_t out[64];
	const char *why;

	assert_int_equal(x86_relocate(mid, sizeof(mid), 0x401000, 0x402000, out, sizeof(out),
				      &why), -ENOTSUP);
}

static void test_jmp_short_outside(void **state)
{
	/* jmp -0x10 at 0x401000 -> 0x400ff2 */
	static const uint8_t in[] = {0xeb, 0xf0};
	static const uint8_t exp[] = {0xe9, 0xed, 0x0f, 0xf0, 0xff};
	uint64_t abs[2];
	ZydisMnemonic mn[2];

	(void)state;
	expect_reloc(in, sizeof(in), 0x401000, 0x500000, exp, sizeof(exp));
	assert_int_equal(reached(exp, sizeof(exp), 0x500000, abs, 2, mn), 1);
	assert_int_equal(abs[0], 0x400ff2);
	/* a jmp rel32 too far away */
	static const uint8_t far[] = {0xe9, 0x00, 0x00, 0x00, 0x00};
	uint8_t out[64];
	const char *why;

	assert_int_equal(x86_relocate(far, sizeof(far), 0x401000, 0x401000 + (3ULL << 31), out,
				      sizeof(out), &why), -ERANGE);
}

static void test_call_rel32_last(void **state)
{
	/* push rbx; call +0x100 at 0x7f1234401001 -> 0x7f1234401106 */
	static const uint8_t in[] = {0x53, 0xe8, 0x00, 0x01, 0x00, 0x00};
	static const uint8_t exp[] = {
		0x53,
		0x68, 0x06, 0x10, 0x40, 0x34,			/* push 0x34401006 */
		0xc7, 0x44, 0x24, 0x04, 0x12, 0x7f, 0x00, 0x00,	/* mov dword [rsp+4],0x7f12 */
		0xe9, 0xf3, 0x10, 0xf0, 0xff,			/* jmp 0x7f1234401106 */
	};
	uint64_t abs[4];
	ZydisMnemonic mn[4];

	(void)state;
	expect_reloc(in, sizeof(in), 0x7f1234401000, 0x7f1234500000, exp, sizeof(exp));
	assert_int_equal(reached(exp, sizeof(exp), 0x7f1234500000, abs, 4, mn), 4);
	assert_int_equal(mn[3], ZYDIS_MNEMONIC_JMP);
	assert_int_equal(abs[3], 0x7f1234401106);
	/* an indirect call: the same push, then jmp with the call's operand,
	 * its RIP-relative address re-based */
	static const uint8_t ind[] = {0xff, 0x15, 0x00, 0x10, 0x00, 0x00};	/* call [rip+0x1000] */
	uint8_t out[64];
	const char *why;
	ssize_t n = x86_relocate(ind, sizeof(ind), 0x401000, 0x500000, out, sizeof(out), &why);

	assert_int_equal(n, 5 + 8 + 6);
	assert_int_equal(reached(out, (size_t)n, 0x500000, abs, 4, mn), 3);
	assert_int_equal(mn[2], ZYDIS_MNEMONIC_JMP);
	assert_int_equal(abs[2], 0x402006);
	assert_memory_equal(out, "\x68\x06\x10\x40\x00", 5);
	/* call *%rax; but not call *8(%rsp): the push moves rsp */
	static const uint8_t reg[] = {0xff, 0xd0};
	static const uint8_t rsp[] = {0xff, 0x54, 0x24, 0x08};

	assert_int_equal(x86_relocate(reg, sizeof(reg), 0x401000, 0x500000, out, sizeof(out),
				      &why), 5 + 8 + 2);
	assert_memory_equal(out + 13, "\xff\xe0", 2);
	assert_int_equal(x86_relocate(rsp, sizeof(rsp), 0x401000, 0x500000, out, sizeof(out),
				      &why), -ENOTSUP);
}

static void test_call_next_instruction(void **state)
{
	/* call +0 (get-PC); pop rax */
	static const uint8_t in[] = {0xe8, 0x00, 0x00, 0x00, 0x00, 0x58};
	static const uint8_t exp[] = {
		0x68, 0x05, 0x10, 0x40, 0x00,			/* push 0x401005 */
		0xc7, 0x44, 0x24, 0x04, 0x00, 0x00, 0x00, 0x00,	/* mov dword [rsp+4],0 */
		0x58,
	};

	(void)state;
	expect_reloc(in, sizeof(in), 0x401000, 0x900000, exp, sizeof(exp));
}

static void test_call_not_last_refused(void **state)
{
	static const uint8_t in[] = {0xe8, 0x00, 0x01, 0x00, 0x00, 0x90};
	static const uint8_t sys[] = {0x0f, 0x05, 0x90};
	uint8_t out[64];
	const char *why = NULL;

	(void)state;
	assert_int_equal(x86_relocate(in, sizeof(in), 0x401000, 0x402000, out, sizeof(out), &why),
			 -ENOTSUP);
	assert_non_null(strstr(why, "call"));
	/* "syscall refused unless last" */
	assert_int_equal(x86_relocate(sys, sizeof(sys), 0x401000, 0x402000, out, sizeof(out),
				      &why), -ENOTSUP);
	assert_non_null(strstr(why, "syscall"));
	assert_int_equal(x86_relocate(sys + 2, 1, 0x401000, 0x402000, out, sizeof(out), &why), 1);
	static const uint8_t sys_last[] = {0x90, 0x0f, 0x05};

	expect_reloc(sys_last, 3, 0x401000, 0x402000, sys_last, 3);
}

static void test_ret_last(void **state)
{
	/* pop rbx; ret; and ret 8 */
	static const uint8_t in[] = {0x5b, 0xc3};
	static const uint8_t in2[] = {0x5d, 0xc2, 0x08, 0x00};

	(void)state;
	expect_reloc(in, sizeof(in), 0x401000, 0x7fff00000000, in, sizeof(in));
	expect_reloc(in2, sizeof(in2), 0x401000, 0x7fff00000000, in2, sizeof(in2));
}

static void test_refused_instructions(void **state)
{
	static const struct {
		uint8_t b[4];
		size_t n;
	} bad[] = {
		{{0x0f, 0x0b}, 2},		/* ud2 */
		{{0xcc}, 1},			/* int3 */
		{{0xcd, 0x80}, 2},		/* int 0x80 */
		{{0xe2, 0xfe}, 2},		/* loop */
		{{0xe3, 0x00}, 2},		/* jrcxz */
		{{0xf4}, 1},			/* hlt */
		{{0x0f, 0x01, 0xf8}, 3},	/* swapgs */
		{{0xff, 0x64, 0x24, 0x08}, 4},	/* jmp [rsp+8] */
	};
	uint8_t out[64];
	const char *why;

	(void)state;
	for (size_t i = 0; i < N(bad); i++)
		assert_int_equal(x86_relocate(bad[i].b, bad[i].n, 0x401000, 0x402000, out,
					      sizeof(out), &why), -ENOTSUP);
	/* an ordinary mix, copied as it is */
	static const uint8_t ok[] = {
		0xf3, 0x0f, 0x1e, 0xfa,		/* endbr64 */
		0x55,				/* push rbp */
		0x48, 0x89, 0xe5,		/* mov rbp,rsp */
		0x41, 0x57,			/* push r15 */
		0x48, 0x83, 0xec, 0x18,		/* sub rsp,0x18 */
		0x0f, 0x1f, 0x44, 0x00, 0x00,	/* nop dword [rax+rax] */
		0xf0, 0x0f, 0xb1, 0x0a,		/* lock cmpxchg [rdx],ecx */
		0xc5, 0xf9, 0xef, 0xc0,		/* vpxor xmm0,xmm0,xmm0 */
		0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00,	/* mov rax,fs:0x28 */
		0xff, 0xe0,			/* jmp rax */
	};

	expect_reloc(ok, sizeof(ok), 0x401000, 0x7f0000000000, ok, sizeof(ok));
	/* cap too small */
	assert_int_equal(x86_relocate(ok, sizeof(ok), 0x401000, 0x402000, out, 8, &why), -ENOSPC);
}

static void test_encode_jmp(void **state)
{
	uint8_t b[5];

	(void)state;
	assert_int_equal(x86_encode_jmp(0x401000, 0x402000, b), 0);
	assert_memory_equal(b, "\xe9\xfb\x0f\x00\x00", 5);
	assert_int_equal(x86_encode_jmp(0x402000, 0x401000, b), 0);
	assert_memory_equal(b, "\xe9\xfb\xef\xff\xff", 5);
	assert_int_equal(x86_encode_jmp(0x401000, 0x401000 + (1ULL << 32), b), -ERANGE);
}

/* ---- planning ---------------------------------------------------------- */

/* A function with a jump table, at 0x401000:
 *   0  endbr64
 *   4  cmp edi,2
 *   7  ja 0x25
 *   9  lea rdx,[rip+0xff0]        ; the table, 0x402000
 *  10  movsxd rax,[rdx+rdi*4]
 *  14  add rax,rdx
 *  17  jmp rax
 *  19  mov eax,1 ; ret            ; case 0
 *  1f  mov eax,2 ; ret            ; case 1
 *  25  xor eax,eax ; ret          ; case 2, default */
static const uint8_t jt_code[] = {
	0xf3, 0x0f, 0x1e, 0xfa,
	0x83, 0xff, 0x02,
	0x77, 0x1c,
	0x48, 0x8d, 0x15, 0xf0, 0x0f, 0x00, 0x00,
	0x48, 0x63, 0x04, 0xba,
	0x48, 0x01, 0xd0,
	0xff, 0xe0,
	0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3,
	0xb8, 0x02, 0x00, 0x00, 0x00, 0xc3,
	0x31, 0xc0, 0xc3,
};
static int32_t jt_table[4] = {0x401019 - 0x402000, 0x40101f - 0x402000, 0x401025 - 0x402000, 0};

static int jt_read(void *ctx, uint64_t vaddr, void *buf, size_t len)
{
	(void)ctx;
	if (vaddr < 0x402000 || vaddr + len > 0x402000 + sizeof(jt_table))
		return -ENOENT;
	memcpy(buf, (const uint8_t *)jt_table + (vaddr - 0x402000), len);
	return 0;
}

static const struct x86_reader jt_reader = {jt_read, NULL, NULL};

/* jt_code is followed by filler: nop dword [rax]; nop */
static const uint8_t jt_pad[] = {0x0f, 0x1f, 0x40, 0x00, 0x90, 0xcc};

static int jt_read_pad(void *ctx, uint64_t vaddr, void *buf, size_t len)
{
	uint64_t end = 0x401000 + sizeof(jt_code);

	if (vaddr >= end && vaddr + len <= end + sizeof(jt_pad)) {
		memcpy(buf, jt_pad + (vaddr - end), len);
		return 0;
	}
	return jt_read(ctx, vaddr, buf, len);
}

static size_t jt_filler_len(void *ctx, uint64_t end)
{
	(void)ctx;
	return end == 0x401000 + sizeof(jt_code) ? sizeof(jt_pad) : 0;
}

static const struct x86_reader jt_filler = {jt_read_pad, NULL, jt_filler_len};

static void test_endbr64_kept_first(void **state)
{
	struct x86_region r = {jt_code, sizeof(jt_code), 0x401000};
	struct x86_patch p;
	const char *why = NULL;

	(void)state;
	assert_int_equal(x86_plan_probe(&r, 1, &jt_reader, 0x401000, &p, &why), 0);
	assert_int_equal(p.addr, 0x401004);
	assert_int_equal(p.len, 5);
	assert_int_equal(p.probe_off, 0);
	/* without one, the patch is at the entry */
	static const uint8_t plain[] = {0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3};

	r = (struct x86_region){plain, sizeof(plain), 0x1000};
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x1000, &p, &why), 0);
	assert_int_equal(p.addr, 0x1000);
	assert_int_equal(p.len, 5);
	/* not a boundary */
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x1002, &p, &why), -EINVAL);
}

static void test_jump_table_resolved(void **state)
{
	struct x86_region r = {jt_code, sizeof(jt_code), 0x401000};
	struct x86_patch p;
	const char *why = NULL;

	(void)state;
	/* every case block is a branch target now: the return after case 0
	 * patches [mov eax,1; ret], starting at the target */
	assert_int_equal(x86_plan_return(&r, 1, &jt_reader, 0x40101e, &p, &why), 0);
	assert_int_equal(p.addr, 0x401019);
	assert_int_equal(p.len, 6);
	assert_int_equal(p.probe_off, 5);
	/* a table entry into the entry patch's bytes (the ja) refuses it: proof
	 * that the table was read */
	jt_table[1] = 0x401007 - 0x402000;
	assert_int_equal(x86_plan_probe(&r, 1, &jt_reader, 0x401000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "a branch targets the displaced bytes"));
	assert_non_null(strstr(why, "0x401017"));
	jt_table[1] = 0x40101f - 0x402000;
	/* return sites: the three rets, not the table's jmp */
	struct x86_ret_site *rs;

	assert_int_equal(x86_return_sites(&r, 1, &jt_reader, &rs, &why), 3);
	assert_int_equal(rs[0].addr, 0x40101e);
	assert_int_equal(rs[1].addr, 0x401024);
	assert_int_equal(rs[2].addr, 0x401027);
	free(rs);
	/* the last one displaces [xor eax,eax; ret] and a whole NOP of filler */
	assert_int_equal(x86_plan_return(&r, 1, &jt_reader, 0x401027, &p, &why), -ENOTSUP);
	assert_int_equal(x86_plan_return(&r, 1, &jt_filler, 0x401027, &p, &why), 0);
	assert_int_equal(p.addr, 0x401025);
	assert_int_equal(p.len, 7);
	assert_int_equal(p.probe_off, 2);
}

/* The dispatch of an interpreter's computed gotos, non-PIC (CPython):
 *   0  movzx eax,sil
 *   4  mov rax,[rax*8+0x402000]   ; absolute entries
 *   c  jmp rax
 *   e  mov eax,1 ; ret            ; target A
 *  14  mov eax,2 ; ret            ; target B */
static const uint8_t abs_code[] = {
	0x40, 0x0f, 0xb6, 0xc6,
	0x48, 0x8b, 0x04, 0xc5, 0x00, 0x20, 0x40, 0x00,
	0xff, 0xe0,
	0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3,
	0xb8, 0x02, 0x00, 0x00, 0x00, 0xc3,
};
static uint64_t abs_table[3] = {0x40100e, 0x401014, 0};

static int abs_read(void *ctx, uint64_t vaddr, void *buf, size_t len)
{
	(void)ctx;
	if (vaddr < 0x402000 || vaddr + len > 0x402000 + sizeof(abs_table))
		return -ENOENT;
	memcpy(buf, (const uint8_t *)abs_table + (vaddr - 0x402000), len);
	return 0;
}

static void test_jump_table_absolute_entries_through_a_register(void **state)
{
	struct x86_reader rd = {abs_read, NULL, NULL};
	struct x86_region r = {abs_code, sizeof(abs_code), 0x401000};
	struct x86_ret_site *rs;
	struct x86_patch p;
	const char *why = NULL;

	(void)state;
	/* read: the jmp is no return site, its targets are the two blocks */
	assert_int_equal(x86_return_sites(&r, 1, &rd, &rs, &why), 2);
	assert_int_equal(rs[0].addr, 0x401013);
	assert_int_equal(rs[1].addr, 0x401019);
	free(rs);
	assert_int_equal(x86_plan_probe(&r, 1, &rd, 0x401000, &p, &why), 0);
	/* an entry into the entry patch refuses it: the table was read */
	abs_table[1] = 0x401004;
	assert_int_equal(x86_plan_probe(&r, 1, &rd, 0x401000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "a branch targets the displaced bytes"));
	abs_table[1] = 0x401014;
	/* unreadable: unknown */
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x401000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "a jump table whose targets are unknown"));
}

static void test_jump_table_unknown_refused(void **state)
{
	struct x86_region r = {jt_code, sizeof(jt_code), 0x401000};
	struct x86_patch p;
	const char *why = NULL;
	int32_t save = jt_table[0];

	(void)state;
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x401000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "a jump table whose targets are unknown"));
	/* a table that points nowhere in the function */
	jt_table[0] = 0x7000;
	assert_int_equal(x86_plan_probe(&r, 1, &jt_reader, 0x401000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "a jump table whose targets are unknown"));
	jt_table[0] = save;
	/* a jump through an indexed load that is no known table shape */
	static const uint8_t idx[] = {
		0x48, 0x8b, 0x04, 0xc7,		/* mov rax,[rdi+rax*8] */
		0xff, 0xe0,			/* jmp rax */
	};
	r = (struct x86_region){idx, sizeof(idx), 0x1000};
	assert_int_equal(x86_plan_probe(&r, 1, &jt_reader, 0x1000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "a jump table whose targets are unknown"));
	/* ... and it has no return site it knows */
	struct x86_ret_site *rs;

	assert_int_equal(x86_return_sites(&r, 1, &jt_reader, &rs, &why), -ENOTSUP);
	/* a tail call through a pointer is no table */
	static const uint8_t tail[] = {
		0x48, 0x8b, 0x47, 0x08,		/* mov rax,[rdi+8] */
		0xff, 0xe0,			/* jmp rax */
	};
	r = (struct x86_region){tail, sizeof(tail), 0x1000};
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x1000, &p, &why), 0);
	assert_int_equal(p.len, 6);
	/* ... but a return site */
	assert_int_equal(x86_return_sites(&r, 1, NULL, &rs, &why), 1);
	assert_int_equal(rs[0].addr, 0x1004);
	assert_int_equal(rs[0].kind, X86_TAIL_JMP);
	free(rs);
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1004, &p, &why), 0);
	assert_int_equal(p.addr, 0x1000);
	assert_int_equal(p.probe_off, 4);
}

static void test_branch_into_displaced_refused(void **state)
{
	/* 0 push rbp; 1 mov rbp,rsp; 4 dec edi; 6 jne 1; 8 pop rbp; 9 ret */
	static const uint8_t code[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xcf, 0x75, 0xf9, 0x5d, 0xc3};
	struct x86_region r = {code, sizeof(code), 0x1000};
	struct x86_patch p;
	const char *why = NULL;

	(void)state;
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x1000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "a branch targets the displaced bytes"));
	assert_non_null(strstr(why, "0x1006 jumps to 0x1001"));
	/* a loop back to the patch's start is fine */
	static const uint8_t loop[] = {0x48, 0x89, 0xe5, 0xff, 0xcf, 0x75, 0xf9, 0xc3};

	r = (struct x86_region){loop, sizeof(loop), 0x1000};
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x1000, &p, &why), 0);
	assert_int_equal(p.len, 5);
	/* a branch from a cold part counts too */
	static const uint8_t hot[] = {0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3};
	static const uint8_t cold[] = {0xe9, 0xfc, 0xef, 0xff, 0xff};	/* jmp 0x1004 */
	struct x86_region two[2] = {{hot, sizeof(hot), 0x1000}, {cold, sizeof(cold), 0x2003}};

	assert_int_equal(x86_plan_probe(two, 2, NULL, 0x1000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "0x2003 jumps to 0x1004"));
}

static void test_function_shorter_than_patch(void **state)
{
	static const uint8_t code[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x31, 0xc0, 0xc3};
	struct x86_region r = {code, sizeof(code), 0x1000};
	struct x86_patch p;
	const char *why = NULL;

	(void)state;
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x1000, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "function shorter than the patch"));
}

static void test_plan_return(void **state)
{
	/* 0 mov eax,[rbp-4]; 3 leave; 4 ret */
	static const uint8_t leave[] = {0x8b, 0x45, 0xfc, 0xc9, 0xc3};
	/* 0 call x; 5 pop rbx; 6 pop rbp; 7 pop r12; 9 ret */
	static const uint8_t pops[] = {0xe8, 0x00, 0x00, 0x00, 0x00, 0x5b, 0x5d, 0x41, 0x5c, 0xc3};
	/* 0 test edi,edi; 2 je 9; 4 mov eax,[rdi]; 6 add eax,1; 9 ret */
	static const uint8_t target[] = {0x85, 0xff, 0x74, 0x05, 0x8b, 0x07, 0x83, 0xc0, 0x01, 0xc3};
	/* 0 call x; 5 pop rbx; 6 ret: the call's return address would be inside */
	static const uint8_t after_call[] = {0xe8, 0x10, 0x00, 0x00, 0x00, 0x5b, 0xc3};
	/* 0 jmp rel32 (a tail call) */
	static const uint8_t tail[] = {0x31, 0xc0, 0xe9, 0x00, 0x10, 0x00, 0x00};
	struct x86_region r = {leave, sizeof(leave), 0x1000};
	struct x86_patch p;
	const char *why = NULL;

	(void)state;
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1004, &p, &why), 0);
	assert_int_equal(p.addr, 0x1000);
	assert_int_equal(p.len, 5);
	assert_int_equal(p.probe_off, 4);

	r = (struct x86_region){pops, sizeof(pops), 0x1000};
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1009, &p, &why), 0);
	assert_int_equal(p.addr, 0x1005);
	assert_int_equal(p.len, 5);
	assert_int_equal(p.probe_off, 4);

	r = (struct x86_region){target, sizeof(target), 0x1000};
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1009, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "a branch targets the displaced bytes"));
	assert_non_null(strstr(why, "0x1002 jumps to the return at 0x1009"));

	/* the same, with alignment NOPs after the ret that nothing targets:
	 * they complete the patch (and are never run) */
	static const uint8_t nops[] = {0x85, 0xff, 0x74, 0x05, 0x8b, 0x07, 0x83, 0xc0, 0x01, 0xc3,
				       0x0f, 0x1f, 0x40, 0x00, 0x31, 0xc0, 0xc3};
	r = (struct x86_region){nops, sizeof(nops), 0x1000};
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1009, &p, &why), 0);
	assert_int_equal(p.addr, 0x1009);
	assert_int_equal(p.len, 5);
	assert_int_equal(p.probe_off, 0);
	/* not when a branch targets them */
	static const uint8_t nops_t[] = {0x85, 0xff, 0x74, 0x05, 0x8b, 0x07, 0x83, 0xc0, 0x01, 0xc3,
					 0x90, 0x90, 0x90, 0x90, 0x31, 0xc0, 0x75, 0xf8, 0xc3};
	r = (struct x86_region){nops_t, sizeof(nops_t), 0x1000};
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1009, &p, &why), -ENOTSUP);

	r = (struct x86_region){after_call, sizeof(after_call), 0x1000};
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1006, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "after a call"));

	r = (struct x86_region){tail, sizeof(tail), 0x1000};
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1002, &p, &why), 0);
	assert_int_equal(p.addr, 0x1002);
	assert_int_equal(p.len, 5);
	assert_int_equal(p.probe_off, 0);
}

static void test_func_patchable(void **state)
{
	struct x86_region r = {jt_code, sizeof(jt_code), 0x401000};
	struct x86_patchability pa;

	(void)state;
	assert_int_equal(x86_func_patchable(&r, 1, &jt_reader, &pa), 0);
	assert_int_equal(pa.entry, 0);
	/* the table's jmp is no return site; the third ret, after a ret and
	 * a branch target, is too short */
	assert_int_equal(pa.nret, 3);
	assert_int_equal(pa.ret, -ENOTSUP);
	assert_string_equal(pa.ret_rule, "the return's block is shorter than the patch, with no "
			    "springboard slot in reach");
	assert_non_null(strstr(pa.ret_why, "0x401027"));
	/* unless alignment filler follows it */
	assert_int_equal(x86_func_patchable(&r, 1, &jt_filler, &pa), 0);
	assert_int_equal(pa.ret, 0);
	assert_null(pa.ret_rule);
	assert_string_equal(pa.ret_why, "ok");

	static const uint8_t code[] = {0x85, 0xff, 0x74, 0x05, 0x8b, 0x07, 0x83, 0xc0, 0x01, 0xc3};

	r = (struct x86_region){code, sizeof(code), 0x1000};
	assert_int_equal(x86_func_patchable(&r, 1, NULL, &pa), 0);
	assert_int_equal(pa.entry, 0);
	assert_int_equal(pa.ret, -ENOTSUP);
	assert_int_equal(pa.nret, 1);
	assert_string_equal(pa.ret_rule, "a branch targets the displaced bytes");
}

static void test_encode_jmp8(void **state)
{
	uint8_t b[2];

	(void)state;
	assert_int_equal(x86_encode_jmp8(0x1000, 0x1009, b), 0);
	assert_memory_equal(b, "\xeb\x07", 2);
	assert_int_equal(x86_encode_jmp8(0x1000, 0x1000 + 2 + 127, b), 0);
	assert_memory_equal(b, "\xeb\x7f", 2);
	assert_int_equal(x86_encode_jmp8(0x1000, 0x1000 + 2 - 128, b), 0);
	assert_memory_equal(b, "\xeb\x80", 2);
	assert_int_equal(x86_encode_jmp8(0x1000, 0x1000 + 2 + 128, b), -ERANGE);
	assert_int_equal(x86_encode_jmp8(0x1000, 0x1000 + 2 - 129, b), -ERANGE);
}

/* ---- springboards ------------------------------------------------------ */

/* A function at 0x1000 followed by filler (pad) up to the next function. */
struct sb_fn {
	const uint8_t *code, *pad;
	size_t len, npad;
};

static int sb_read(void *ctx, uint64_t vaddr, void *buf, size_t len)
{
	const struct sb_fn *f = ctx;
	uint64_t end = 0x1000 + f->len;

	if (vaddr < end || vaddr + len > end + f->npad)
		return -ENOENT;
	memcpy(buf, f->pad + (vaddr - end), len);
	return 0;
}

static size_t sb_filler(void *ctx, uint64_t end)
{
	const struct sb_fn *f = ctx;

	return end == 0x1000 + f->len ? f->npad : 0;
}

/*   0 push rbx
 *   1 cmp edi,5
 *   4 je 0x11            ; .L2
 *   6 test edi,edi
 *   8 je 0xf             ; .L1
 *   a lea eax,[rdi+1]
 *   d pop rbx
 *   e ret                ; classic: [a, f)
 *   f .L1: pop rbx
 *  10 ret                ; a 2-byte block: a springboard
 *  11 .L2: xor eax,eax
 *  13 pop rbx
 *  14 ret                ; a 4-byte block, at the end: grows over filler */
#define SB_HEAD 0x53, 0x83, 0xff, 0x05, 0x74, 0x0b, 0x85, 0xff, 0x74, 0x05, 0x8d, 0x47, 0x01, \
		0x5b, 0xc3, 0x5b, 0xc3, 0x31, 0xc0, 0x5b, 0xc3
static const uint8_t sb_nops[] = {0x0f, 0x1f, 0x44, 0x00, 0x00, 0x0f, 0x1f, 0x44, 0x00, 0x00,
				  0x90};

/* A probe near the end of a function (a USDT site's `nop; ret`) takes the
 * alignment filler after the ret, which nothing runs. */
static void test_probe_at_the_end_takes_the_filler(void **state)
{
	/* 0 push rbp; 1 pop rbp; 2 nop; 3 ret; then nop dword [rax] */
	static const uint8_t code[] = {0x55, 0x5d, 0x90, 0xc3};
	static const uint8_t pad[] = {0x0f, 0x1f, 0x40, 0x00};
	struct sb_fn f = {.code = code, .len = sizeof(code), .pad = pad, .npad = sizeof(pad)};
	struct x86_reader rd = {sb_read, &f, sb_filler};
	struct x86_region r = {code, sizeof(code), 0x1000};
	struct x86_patch p;
	const char *why = NULL;

	(void)state;
	/* without filler: 2 bytes, refused */
	assert_int_equal(x86_plan_probe(&r, 1, NULL, 0x1002, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "shorter than the patch"));
	/* with it: [nop; ret; nop dword [rax]] */
	assert_int_equal(x86_plan_probe(&r, 1, &rd, 0x1002, &p, &why), 0);
	assert_int_equal(p.addr, 0x1002);
	assert_int_equal(p.len, 6);
	assert_int_equal(p.probe_off, 0);
}

static void test_springboard(void **state)
{
	static const uint8_t code[] = {SB_HEAD};
	struct sb_fn f = {code, sb_nops, sizeof(code), sizeof(sb_nops)};
	struct x86_reader rd = {sb_read, &f, sb_filler};
	struct x86_region r = {code, sizeof(code), 0x1000};
	struct x86_patchability pa;
	struct x86_patch p;
	const char *why = NULL;
	uint8_t j8[2];

	(void)state;
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x100e, &p, &why), 0);
	assert_int_equal(p.addr, 0x100a);
	assert_int_equal(p.len, 5);
	assert_int_equal(p.spring, 0);
	/* the last ret takes the first NOP of the filler: [11, 1a) */
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1014, &p, &why), 0);
	assert_int_equal(p.addr, 0x1011);
	assert_int_equal(p.len, 9);
	assert_int_equal(p.probe_off, 3);
	assert_int_equal(p.spring, 0);
	/* .L1: pop rbx; ret: a jmp rel8 to the next 5 bytes of filler */
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1010, &p, &why), 0);
	assert_int_equal(p.addr, 0x100f);
	assert_int_equal(p.len, 2);
	assert_int_equal(p.probe_off, 1);
	assert_int_equal(p.spring, 0x101a);
	assert_int_equal(x86_encode_jmp8(p.addr, p.spring, j8), 0);
	assert_memory_equal(j8, "\xeb\x09", 2);

	assert_int_equal(x86_func_patchable(&r, 1, &rd, &pa), 0);
	assert_int_equal(pa.entry, 0);
	assert_int_equal(pa.ret, 0);
	assert_int_equal(pa.nret, 3);
	assert_int_equal(pa.nspring, 1);
}

/* SB_HEAD then ud2: the last ret is no longer at the end, and needs a
 * springboard too */
static void test_springboard_two_slots(void **state)
{
	static const uint8_t code[] = {SB_HEAD, 0x0f, 0x0b};
	struct sb_fn f = {code, sb_nops, sizeof(code), sizeof(sb_nops)};
	struct x86_reader rd = {sb_read, &f, sb_filler};
	struct x86_region r = {code, sizeof(code), 0x1000};
	struct x86_patchability pa;
	struct x86_patch p, q;
	const char *why = NULL;

	(void)state;
	/* asked for in either order, the same slots, nearest first */
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1014, &q, &why), 0);
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1010, &p, &why), 0);
	assert_int_equal(p.addr, 0x100f);
	assert_int_equal(p.len, 2);
	assert_int_equal(p.spring, 0x1017);
	/* as few instructions as make 2 bytes: pop rbx; ret */
	assert_int_equal(q.addr, 0x1013);
	assert_int_equal(q.len, 2);
	assert_int_equal(q.probe_off, 1);
	assert_int_equal(q.spring, 0x101c);
	assert_true(q.spring >= p.spring + X86_JMP_LEN);

	assert_int_equal(x86_func_patchable(&r, 1, &rd, &pa), 0);
	assert_int_equal(pa.ret, 0);
	assert_int_equal(pa.nspring, 2);

	/* one slot only: the first site keeps it, the second is refused */
	f.npad = 6;
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1014, &q, &why), -ENOTSUP);
	assert_non_null(strstr(why, "no springboard slot"));
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1010, &p, &why), 0);
	assert_int_equal(p.spring, 0x1017);

	/* no filler: refused */
	f.npad = 0;
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1010, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "the return's block is shorter than the patch, with no "
				    "springboard slot in reach"));
	assert_int_equal(x86_plan_return(&r, 1, NULL, 0x1010, &p, &why), -ENOTSUP);
	assert_int_equal(x86_func_patchable(&r, 1, &rd, &pa), 0);
	assert_int_equal(pa.ret, -ENOTSUP);
	assert_string_equal(pa.ret_rule, "the return's block is shorter than the patch, with "
			    "no springboard slot in reach");

	/* filler that is not padding (the next function's code) is not taken */
	static const uint8_t code_after[] = {0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3, 0x90, 0x90, 0x90,
					     0x90, 0x90};
	f.pad = code_after;
	f.npad = sizeof(code_after);
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1010, &p, &why), -ENOTSUP);
}

/* the short block, then 130 bytes of code before the filler: the slot is
 * beyond a jmp rel8 */
static void test_springboard_out_of_reach(void **state)
{
	uint8_t code[sizeof((uint8_t[]){SB_HEAD}) + 130];
	static const uint8_t head[] = {SB_HEAD};
	struct sb_fn f = {code, sb_nops, sizeof(code), sizeof(sb_nops)};
	struct x86_reader rd = {sb_read, &f, sb_filler};
	struct x86_region r = {code, sizeof(code), 0x1000};
	struct x86_patch p;
	const char *why = NULL;

	(void)state;
	/* .L2: xor eax,eax; 130 NOPs; pop rbx; ret */
	memcpy(code, head, 0x13);
	memset(code + 0x13, 0x90, 130);
	code[0x13 + 130] = 0x5b;
	code[0x13 + 131] = 0xc3;
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1010, &p, &why), -ENOTSUP);
	assert_non_null(strstr(why, "beyond a jmp rel8"));
	assert_int_equal(x86_plan_return(&r, 1, &rd, 0x1000 + 0x13 + 131, &p, &why), 0);
	assert_int_equal(p.spring, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rip_relative_mov),
		cmocka_unit_test(test_rip_relative_out_of_range),
		cmocka_unit_test(test_jcc_short_outside_block),
		cmocka_unit_test(test_jcc_short_inside_block),
		cmocka_unit_test(test_jmp_short_outside),
		cmocka_unit_test(test_call_rel32_last),
		cmocka_unit_test(test_call_next_instruction),
		cmocka_unit_test(test_call_not_last_refused),
		cmocka_unit_test(test_ret_last),
		cmocka_unit_test(test_refused_instructions),
		cmocka_unit_test(test_encode_jmp),
		cmocka_unit_test(test_endbr64_kept_first),
		cmocka_unit_test(test_jump_table_resolved),
		cmocka_unit_test(test_jump_table_unknown_refused),
		cmocka_unit_test(test_jump_table_absolute_entries_through_a_register),
		cmocka_unit_test(test_probe_at_the_end_takes_the_filler),
		cmocka_unit_test(test_branch_into_displaced_refused),
		cmocka_unit_test(test_function_shorter_than_patch),
		cmocka_unit_test(test_plan_return),
		cmocka_unit_test(test_func_patchable),
		cmocka_unit_test(test_encode_jmp8),
		cmocka_unit_test(test_springboard),
		cmocka_unit_test(test_springboard_two_slots),
		cmocka_unit_test(test_springboard_out_of_reach),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
