/* x86-64 relocation (Zydis 4): see reloc.h.
 *
 * Relocating: each instruction is on an allow-list (as the kernel's uprobes
 * keep one) or refused. Those that read RIP are re-encoded by Zydis for their
 * new address (decode -> encoder request -> encode at the new address);
 * everything else is copied byte for byte.
 *
 * Planning decodes every region of the function whole and refuses a patch
 * whose displaced bytes a branch could enter anywhere but at their start.
 * What it knows of branches:
 *  - direct jmp/jcc/call/loop/jrcxz/xbegin: their targets;
 *  - jump tables of the usual GCC/Clang x86-64 shapes, read through the
 *    caller's reader:
 *        lea T(%rip),%rB ; movslq (%rB,%rI,4),%rX ; add %rB,%rX ; jmp *%rX
 *    (relative int32 entries, PIC) and jmp *T(,%rI,8) (absolute entries,
 *    non-PIC); each table is read entry by entry until an entry does not
 *    point at an instruction of the function, which takes at least every
 *    entry of the table (a switch's entries all point into its function) and
 *    perhaps more: more targets only make planning stricter;
 *  - any other jump through a table (an indexed load feeding the jump): its
 *    targets are unknown and every patch of the function is refused;
 *  - any other indirect jmp (jmp *%rax with no table, jmp *8(%rdi)) is
 *    ASSUMED to be a tail call through a function pointer, which enters a
 *    function at its entry, never inside this one's body. A jump table of a
 *    shape not recognised above would break this assumption;
 *  - ASSUMED too: nothing outside the function branches into it but at its
 *    entry, and exception landing pads (from .gcc_except_table, not read)
 *    never start inside displaced bytes: a landing pad starts a block that
 *    only the unwinder enters, and is not found among the few instructions
 *    at an entry or before a ret in practice (a call, after which one could
 *    resume, may only be the last displaced instruction). */
#include "x86/reloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "core/log.h"

/* rule names: static strings, for counting refusals */
static const char R_SHORT[] = "function shorter than the patch";
static const char R_RSHORT[] = "the return's block is shorter than the patch";
static const char R_TARGET[] = "a branch targets the displaced bytes";
static const char R_TABLE[] = "a jump table whose targets are unknown";
static const char R_INSN[] = "an instruction that cannot be relocated";
static const char R_CALL[] = "a call or syscall that is not the last displaced instruction";
static const char R_RANGE[] = "a relocated rel32 no longer reaches";
static const char R_NOEXEC[] = "undecodable code";
static const char R_BOUNDARY[] = "not an instruction boundary";

/* A refusal: the rule and its details. */
struct refusal {
	const char *rule;
	char why[192];
};

static int refuse(struct refusal *rf, int err, const char *rule, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int refuse(struct refusal *rf, int err, const char *rule, const char *fmt, ...)
{
	va_list ap;
	int n;

	rf->rule = rule;
	n = snprintf(rf->why, sizeof(rf->why), "%s", rule);
	if (fmt && n >= 0 && (size_t)n < sizeof(rf->why)) {
		va_start(ap, fmt);
		vsnprintf(rf->why + n, sizeof(rf->why) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return err;
}

static bool decoder_init(ZydisDecoder *dec)
{
	return ZYAN_SUCCESS(ZydisDecoderInit(dec, ZYDIS_MACHINE_MODE_LONG_64,
					     ZYDIS_STACK_WIDTH_64));
}

static uint64_t reg64(ZydisRegister r)
{
	return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
}

static bool fits_rel32(int64_t d)
{
	return d >= INT32_MIN && d <= INT32_MAX;
}

/* ---- the allow-list --------------------------------------------------- */

/* Instructions that run the same anywhere, once their RIP-relative operand
 * (if any) is re-based: by category, minus the odd ones out below. */
static bool allowed_category(ZydisInstructionCategory c)
{
	switch (c) {
	case ZYDIS_CATEGORY_ADOX_ADCX: case ZYDIS_CATEGORY_AES: case ZYDIS_CATEGORY_AVX:
	case ZYDIS_CATEGORY_AVX2: case ZYDIS_CATEGORY_AVX2GATHER: case ZYDIS_CATEGORY_AVX512:
	case ZYDIS_CATEGORY_AVX512_4FMAPS: case ZYDIS_CATEGORY_AVX512_4VNNIW:
	case ZYDIS_CATEGORY_AVX512_BITALG: case ZYDIS_CATEGORY_AVX512_VBMI:
	case ZYDIS_CATEGORY_AVX512_VP2INTERSECT: case ZYDIS_CATEGORY_BINARY:
	case ZYDIS_CATEGORY_BITBYTE: case ZYDIS_CATEGORY_BLEND: case ZYDIS_CATEGORY_BMI1:
	case ZYDIS_CATEGORY_BMI2: case ZYDIS_CATEGORY_BROADCAST: case ZYDIS_CATEGORY_CLFLUSHOPT:
	case ZYDIS_CATEGORY_CLWB: case ZYDIS_CATEGORY_CMOV: case ZYDIS_CATEGORY_COMPRESS:
	case ZYDIS_CATEGORY_CONFLICT: case ZYDIS_CATEGORY_CONVERT: case ZYDIS_CATEGORY_DATAXFER:
	case ZYDIS_CATEGORY_EXPAND: case ZYDIS_CATEGORY_FCMOV: case ZYDIS_CATEGORY_FLAGOP:
	case ZYDIS_CATEGORY_FMA4: case ZYDIS_CATEGORY_FP16: case ZYDIS_CATEGORY_GATHER:
	case ZYDIS_CATEGORY_GFNI: case ZYDIS_CATEGORY_IFMA: case ZYDIS_CATEGORY_KMASK:
	case ZYDIS_CATEGORY_LOGICAL: case ZYDIS_CATEGORY_LOGICAL_FP: case ZYDIS_CATEGORY_LZCNT:
	case ZYDIS_CATEGORY_MISC: case ZYDIS_CATEGORY_MMX: case ZYDIS_CATEGORY_NOP:
	case ZYDIS_CATEGORY_PCLMULQDQ: case ZYDIS_CATEGORY_POP: case ZYDIS_CATEGORY_PREFETCH:
	case ZYDIS_CATEGORY_PUSH: case ZYDIS_CATEGORY_RDRAND: case ZYDIS_CATEGORY_RDSEED:
	case ZYDIS_CATEGORY_RDPID: case ZYDIS_CATEGORY_RDWRFSGS: case ZYDIS_CATEGORY_ROTATE:
	case ZYDIS_CATEGORY_SCATTER: case ZYDIS_CATEGORY_SEMAPHORE: case ZYDIS_CATEGORY_SETCC:
	case ZYDIS_CATEGORY_SHA: case ZYDIS_CATEGORY_SHIFT: case ZYDIS_CATEGORY_SSE:
	case ZYDIS_CATEGORY_STRINGOP: case ZYDIS_CATEGORY_STTNI: case ZYDIS_CATEGORY_VAES:
	case ZYDIS_CATEGORY_VBMI2: case ZYDIS_CATEGORY_VFMA: case ZYDIS_CATEGORY_VPCLMULQDQ:
	case ZYDIS_CATEGORY_WIDENOP: case ZYDIS_CATEGORY_X87_ALU: case ZYDIS_CATEGORY_XSAVE:
	case ZYDIS_CATEGORY_XSAVEOPT:
		return true;
	default:
		return false;
	}
}

static bool allowed_mnemonic(ZydisMnemonic m)
{
	switch (m) {
	/* in refused categories, but harmless */
	case ZYDIS_MNEMONIC_ENDBR64: case ZYDIS_MNEMONIC_ENDBR32: case ZYDIS_MNEMONIC_RDTSC:
	case ZYDIS_MNEMONIC_RDTSCP: case ZYDIS_MNEMONIC_CPUID: case ZYDIS_MNEMONIC_XGETBV:
	case ZYDIS_MNEMONIC_RDPKRU: case ZYDIS_MNEMONIC_LFENCE: case ZYDIS_MNEMONIC_MFENCE:
	case ZYDIS_MNEMONIC_SFENCE: case ZYDIS_MNEMONIC_PAUSE:
		return true;
	default:
		return false;
	}
}

static bool refused_mnemonic(ZydisMnemonic m)
{
	switch (m) {
	/* traps, whose reported address would be the trampoline's */
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_HLT:
		return true;
	default:
		return false;
	}
}

/* ---- encoding --------------------------------------------------------- */

static void req_init(ZydisEncoderRequest *req, ZydisMnemonic m)
{
	memset(req, 0, sizeof(*req));
	req->machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
	req->mnemonic = m;
}

/* jmp/jcc rel32 at `at` to `target`. */
static int enc_branch(ZydisMnemonic m, uint64_t at, uint64_t target, uint8_t *buf, size_t *n)
{
	ZydisEncoderRequest req;
	ZyanUSize len = ZYDIS_MAX_INSTRUCTION_LENGTH;
	int64_t end = (int64_t)(at + (m == ZYDIS_MNEMONIC_JMP ? 5 : 6));

	if (!fits_rel32((int64_t)target - end))
		return -ERANGE;
	req_init(&req, m);
	req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	req.branch_width = ZYDIS_BRANCH_WIDTH_32;
	req.operand_count = 1;
	req.operands[0].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	req.operands[0].imm.u = target;
	if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstructionAbsolute(&req, buf, &len, at)))
		return -EINVAL;
	*n = len;
	return 0;
}

int x86_encode_jmp(uint64_t from, uint64_t to, uint8_t out[5])
{
	size_t n = 0;
	uint8_t buf[ZYDIS_MAX_INSTRUCTION_LENGTH];
	int ret = enc_branch(ZYDIS_MNEMONIC_JMP, from, to, buf, &n);

	if (ret)
		return ret;
	if (n != 5)
		return -EINVAL;
	memcpy(out, buf, 5);
	return 0;
}

int x86_encode_jmp8(uint64_t from, uint64_t to, uint8_t out[2])
{
	int64_t d = (int64_t)(to - (from + X86_JMP8_LEN));

	if (d < INT8_MIN || d > INT8_MAX)
		return -ERANGE;
	out[0] = 0xeb;
	out[1] = (uint8_t)(int8_t)d;
	return 0;
}

/* Push the 64-bit constant v without touching flags or registers:
 * push imm32 (sign-extended low half), then mov dword [rsp+4], high half. */
static int enc_push64(uint64_t v, uint8_t *buf, size_t *n)
{
	ZydisEncoderRequest req;
	ZyanUSize a = ZYDIS_MAX_INSTRUCTION_LENGTH, b = ZYDIS_MAX_INSTRUCTION_LENGTH;

	req_init(&req, ZYDIS_MNEMONIC_PUSH);
	req.operand_count = 1;
	req.operand_size_hint = ZYDIS_OPERAND_SIZE_HINT_64;
	req.operands[0].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	req.operands[0].imm.s = (int32_t)(uint32_t)v;
	if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstruction(&req, buf, &a)))
		return -EINVAL;
	req_init(&req, ZYDIS_MNEMONIC_MOV);
	req.operand_count = 2;
	req.operands[0].type = ZYDIS_OPERAND_TYPE_MEMORY;
	req.operands[0].mem.base = ZYDIS_REGISTER_RSP;
	req.operands[0].mem.displacement = 4;
	req.operands[0].mem.size = 4;
	req.operands[1].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	req.operands[1].imm.u = v >> 32;
	if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstruction(&req, buf + a, &b)))
		return -EINVAL;
	*n = a + b;
	return 0;
}

/* The RIP-relative memory operand of an instruction, or -1. */
static int riprel_operand(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	for (int i = 0; i < in->operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    ops[i].mem.base == ZYDIS_REGISTER_RIP)
			return i;
	return -1;
}

static bool uses_rsp(const ZydisDecodedOperand *op)
{
	if (op->type == ZYDIS_OPERAND_TYPE_REGISTER)
		return reg64(op->reg.value) == ZYDIS_REGISTER_RSP;
	if (op->type == ZYDIS_OPERAND_TYPE_MEMORY)
		return reg64(op->mem.base) == ZYDIS_REGISTER_RSP ||
		       reg64(op->mem.index) == ZYDIS_REGISTER_RSP;
	return false;
}

/* Do two decoded instructions have the same operands and prefixes, but for
 * the displacement of a RIP-relative operand (checked by the caller)? */
static bool same_operands(const ZydisDecodedInstruction *a, const ZydisDecodedOperand *ao,
			  const ZydisDecodedInstruction *b, const ZydisDecodedOperand *bo)
{
	const ZydisInstructionAttributes pfx = ZYDIS_ATTRIB_HAS_LOCK | ZYDIS_ATTRIB_HAS_REP |
		ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE | ZYDIS_ATTRIB_HAS_SEGMENT_FS |
		ZYDIS_ATTRIB_HAS_SEGMENT_GS;

	if (a->operand_count_visible != b->operand_count_visible ||
	    (a->attributes & pfx) != (b->attributes & pfx) || a->operand_width != b->operand_width ||
	    a->address_width != b->address_width)
		return false;
	for (int k = 0; k < a->operand_count_visible; k++) {
		const ZydisDecodedOperand *x = &ao[k], *y = &bo[k];

		if (x->type != y->type || x->size != y->size)
			return false;
		switch (x->type) {
		case ZYDIS_OPERAND_TYPE_REGISTER:
			if (x->reg.value != y->reg.value)
				return false;
			break;
		case ZYDIS_OPERAND_TYPE_MEMORY:
			if (x->mem.type != y->mem.type || x->mem.base != y->mem.base ||
			    x->mem.index != y->mem.index || x->mem.scale != y->mem.scale ||
			    x->mem.segment != y->mem.segment ||
			    (x->mem.base != ZYDIS_REGISTER_RIP &&
			     x->mem.disp.value != y->mem.disp.value))
				return false;
			break;
		case ZYDIS_OPERAND_TYPE_IMMEDIATE:
			if (x->imm.value.u != y->imm.value.u || x->imm.is_relative != y->imm.is_relative)
				return false;
			break;
		default:
			return false;
		}
	}
	return true;
}

/* Re-encode the instruction (with mnemonic m, which may differ: call ->
 * jmp) at `at`, its RIP-relative operand (if any) pointing at the same
 * absolute address. Checked by decoding the result again. */
static int enc_rebased(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
		       uint64_t from, ZydisMnemonic m, uint64_t at, uint8_t *buf, size_t *n)
{
	ZydisEncoderRequest req;
	ZydisDecoder dec;
	ZydisDecodedInstruction chk;
	ZydisDecodedOperand cops[ZYDIS_MAX_OPERAND_COUNT];
	ZyanUSize len = ZYDIS_MAX_INSTRUCTION_LENGTH;
	int k = riprel_operand(in, ops);
	uint64_t abs = 0, abs2 = 0;

	if (!ZYAN_SUCCESS(ZydisEncoderDecodedInstructionToEncoderRequest(
		    in, ops, in->operand_count_visible, &req)))
		return -EINVAL;
	req.mnemonic = m;
	if (k >= 0) {
		if (k >= req.operand_count ||
		    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, &ops[k], from, &abs)))
			return -EINVAL;
		if (!fits_rel32((int64_t)(abs - (at + in->length))))
			return -ERANGE;
		req.operands[k].mem.displacement = (int64_t)abs;
	}
	if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstructionAbsolute(&req, buf, &len, at)))
		return fits_rel32((int64_t)(abs - (at + len))) ? -EINVAL : -ERANGE;
	if (!decoder_init(&dec) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, buf, len, &chk, cops)) ||
	    chk.length != len || chk.mnemonic != m || !same_operands(in, ops, &chk, cops))
		return -EINVAL;
	if (k >= 0 && (cops[k].type != ZYDIS_OPERAND_TYPE_MEMORY ||
		       cops[k].mem.base != ZYDIS_REGISTER_RIP ||
		       !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&chk, &cops[k], at, &abs2)) ||
		       abs2 != abs))
		return -EINVAL;
	*n = len;
	return 0;
}

/* The same instruction, its disp32 re-based in place (same length): the
 * fallback when Zydis cannot re-encode it. */
static int enc_disp_patch(const uint8_t *code, const ZydisDecodedInstruction *in,
			  const ZydisDecodedOperand *ops, uint64_t from, uint64_t at,
			  uint8_t *buf, size_t *n)
{
	int k = riprel_operand(in, ops);
	uint64_t abs;
	int64_t d;
	int32_t d32;

	if (k < 0 || in->raw.disp.size != 32 ||
	    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, &ops[k], from, &abs)))
		return -EINVAL;
	d = (int64_t)(abs - (at + in->length));
	if (!fits_rel32(d))
		return -ERANGE;
	d32 = (int32_t)d;
	memcpy(buf, code, in->length);
	memcpy(buf + in->raw.disp.offset, &d32, 4);
	*n = in->length;
	return 0;
}

/* ---- relocation ------------------------------------------------------- */

enum { NO_OFF = (size_t)-1 };

/* One instruction at code (offset off of the block [from, from+len)), to
 * run at `at`; bytes into buf (>= 64 bytes), count in *n. map[] gives the
 * output offset of each input offset (NO_OFF: not an instruction start),
 * for branches inside the block; out_base is the address of output offset 0. */
static int reloc_one(const uint8_t *code, const ZydisDecodedInstruction *in,
		     const ZydisDecodedOperand *ops, uint64_t from, size_t off, size_t len,
		     const size_t *map, uint64_t out_base, uint64_t at, bool last,
		     uint8_t *buf, size_t *n, struct refusal *rf)
{
	uint64_t pc = from + off, next = pc + in->length, target = 0, orig;
	const char *mn = ZydisMnemonicGetString(in->mnemonic);
	bool rel = false;	/* a relative immediate: a branch target */
	int ret;

	if (in->attributes & ZYDIS_ATTRIB_IS_PRIVILEGED)
		return refuse(rf, -ENOTSUP, R_INSN, ": privileged %s at 0x%" PRIx64, mn, pc);
	for (int k = 0; k < in->operand_count; k++)
		rel |= ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[k].imm.is_relative;
	if (rel && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative)
		target = next + (uint64_t)ops[0].imm.value.s;
	orig = target;

	/* a branch inside the block goes to the relocated copy */
	if (target >= from && target < from + len) {
		size_t t = (size_t)(target - from);

		if (map[t] == NO_OFF)
			return refuse(rf, -ENOTSUP, R_INSN, ": %s at 0x%" PRIx64 " jumps inside "
				      "an instruction (0x%" PRIx64 ")", mn, pc, target);
		target = out_base + map[t];
	}

	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
		if (rel)
			return enc_branch(ZYDIS_MNEMONIC_JMP, at, target, buf, n);
		if (uses_rsp(&ops[0]))
			return refuse(rf, -ENOTSUP, R_INSN, ": jmp through %%rsp at 0x%" PRIx64, pc);
		break;
	case ZYDIS_MNEMONIC_CALL: {
		size_t p = 0, j = 0;

		if (uses_rsp(&ops[0]))
			return refuse(rf, -ENOTSUP, R_INSN, ": call through %%rsp at 0x%" PRIx64,
				      pc);
		/* the get-PC idiom (call the next instruction) is a push */
		if (rel && orig == next)
			return enc_push64(next, buf, n);
		if (!last)
			return refuse(rf, -ENOTSUP, R_CALL, ": call at 0x%" PRIx64, pc);
		if ((ret = enc_push64(next, buf, &p)))
			return ret;
		if (rel)
			ret = enc_branch(ZYDIS_MNEMONIC_JMP, at + p, target, buf + p, &j);
		else
			ret = enc_rebased(in, ops, pc, ZYDIS_MNEMONIC_JMP, at + p, buf + p, &j);
		if (ret == -EINVAL)
			return refuse(rf, -ENOTSUP, R_INSN, ": cannot re-encode the call at 0x%"
				      PRIx64 " as a jmp", pc);
		*n = p + j;
		return ret;
	}
	case ZYDIS_MNEMONIC_RET:
		break;
	case ZYDIS_MNEMONIC_SYSCALL:
		if (!last)
			return refuse(rf, -ENOTSUP, R_CALL, ": syscall at 0x%" PRIx64, pc);
		break;
	case ZYDIS_MNEMONIC_JRCXZ: case ZYDIS_MNEMONIC_JECXZ: case ZYDIS_MNEMONIC_JCXZ:
	case ZYDIS_MNEMONIC_LOOP: case ZYDIS_MNEMONIC_LOOPE: case ZYDIS_MNEMONIC_LOOPNE:
		/* rel8 only: would need a jrcxz over a jmp rel32; rare in compiled code */
		return refuse(rf, -ENOTSUP, R_INSN, ": %s (rel8 only) at 0x%" PRIx64, mn, pc);
	default:
		if (in->meta.category == ZYDIS_CATEGORY_COND_BR && rel)
			return enc_branch(in->mnemonic, at, target, buf, n);
		if (refused_mnemonic(in->mnemonic) || rel ||
		    !(allowed_category(in->meta.category) || allowed_mnemonic(in->mnemonic)))
			return refuse(rf, -ENOTSUP, R_INSN, ": %s at 0x%" PRIx64
				      " is not on the allow-list", mn, pc);
		break;
	}
	if (riprel_operand(in, ops) < 0) {
		memcpy(buf, code, in->length);
		*n = in->length;
		return 0;
	}
	ret = enc_rebased(in, ops, pc, in->mnemonic, at, buf, n);
	if (ret == -EINVAL) {
		log_debug("Zydis cannot re-encode %s at 0x%" PRIx64 ": its disp32 re-based in place",
			  mn, pc);
		ret = enc_disp_patch(code, in, ops, pc, at, buf, n);
	}
	if (ret == -ERANGE)
		return refuse(rf, -ERANGE, R_RANGE, ": %s at 0x%" PRIx64 " from 0x%" PRIx64,
			      mn, pc, at);
	if (ret)
		return refuse(rf, -ENOTSUP, R_INSN, ": cannot re-encode %s at 0x%" PRIx64, mn, pc);
	return 0;
}

static ssize_t relocate(const uint8_t *code, size_t len, uint64_t from, uint64_t to,
			uint8_t *out, size_t cap, struct refusal *rf)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	size_t *map, pos = 0;
	ssize_t ret = 0;

	rf->rule = NULL;
	rf->why[0] = 0;
	if (!decoder_init(&dec))
		return -ENOEXEC;
	map = malloc((len + 1) * sizeof(*map));
	if (!map)
		return -ENOMEM;
	/* the instruction starts, for branches inside the block */
	for (size_t i = 0; i <= len; i++)
		map[i] = NO_OFF;
	for (size_t off = 0; off < len; off += in.length) {
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, len - off, &in, ops))) {
			free(map);
			return refuse(rf, -ENOEXEC, R_NOEXEC, " at 0x%" PRIx64, from + off);
		}
		map[off] = 0;
	}
	/* pass 0 sizes every instruction (their sizes do not depend on where
	 * branch targets end up), pass 1 writes them */
	for (int pass = 0; pass < 2 && !ret; pass++) {
		size_t o = 0;

		pos = 0;
		for (size_t off = 0; off < len; off += in.length) {
			uint8_t buf[64];
			size_t n = 0;

			if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, len - off,
								 &in, ops))) {
				ret = refuse(rf, -ENOEXEC, R_NOEXEC, " at 0x%" PRIx64, from + off);
				break;
			}
			if (pass == 0)
				map[off] = o;
			ret = reloc_one(code + off, &in, ops, from, off, len, map, to, to + o,
					off + in.length == len, buf, &n, rf);
			if (ret)
				break;
			if (pass == 1) {
				if (o != map[off]) {	/* sizes changed between passes */
					ret = refuse(rf, -ENOTSUP, R_INSN, ": unstable encoding at 0x%"
						     PRIx64, from + off);
					break;
				}
				if (o + n > cap) {
					ret = -ENOSPC;
					break;
				}
				memcpy(out + o, buf, n);
			}
			o += n;
		}
		if (pass == 0)
			map[len] = o;
		pos = o;
	}
	free(map);
	return ret ? ret : (ssize_t)pos;
}

ssize_t x86_relocate(const uint8_t *code, size_t len, uint64_t from, uint64_t to,
		     uint8_t *out, size_t cap, const char **why)
{
	static __thread struct refusal rf;
	ssize_t n = relocate(code, len, from, to, out, cap, &rf);

	if (why)
		*why = rf.rule ? rf.why : NULL;
	return n;
}

/* ---- function analysis ------------------------------------------------ */

enum flow { FLOW_NEXT, FLOW_CALL, FLOW_END /* jmp, ret, ud2: no fall-through */ };

enum an_kind { K_OTHER, K_RET, K_JMP, K_JCC, K_IJMP, K_NOP };

struct an_insn {
	uint64_t addr;
	uint64_t target;	/* of a direct branch */
	uint8_t len;
	uint8_t flow;
	uint8_t region;
	uint8_t kind;		/* enum an_kind */
	bool tail;		/* K_IJMP taken for a tail call */
};

struct an_target {
	uint64_t to, from;
};

struct func_an {
	const struct x86_region *rg;
	size_t nrg;
	struct an_insn *in;	/* every region's instructions, in region order */
	size_t nin;
	struct an_target *tg;	/* branch targets, sorted by .to */
	size_t ntg, ctg;
	int unknown;		/* 0 or -ENOTSUP: a jump table could not be read */
	struct refusal unknown_rf;
};

static void an_free(struct func_an *a)
{
	free(a->in);
	free(a->tg);
}

static int an_add_target(struct func_an *a, uint64_t to, uint64_t from)
{
	if (a->ntg == a->ctg) {
		size_t c = a->ctg ? a->ctg * 2 : 32;
		struct an_target *v = realloc(a->tg, c * sizeof(*v));

		if (!v)
			return -ENOMEM;
		a->tg = v;
		a->ctg = c;
	}
	a->tg[a->ntg++] = (struct an_target){to, from};
	return 0;
}

static int cmp_target(const void *x, const void *y)
{
	const struct an_target *p = x, *q = y;

	return p->to < q->to ? -1 : p->to > q->to;
}

/* The index of the instruction at addr, or -1. */
static ssize_t an_find(const struct func_an *a, uint64_t addr)
{
	size_t lo = 0, hi = a->nin;

	/* regions are each sorted; search each */
	for (size_t r = 0; r < a->nrg; r++) {
		if (addr < a->rg[r].addr || addr >= a->rg[r].addr + a->rg[r].len)
			continue;
		lo = 0;
		hi = a->nin;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			const struct an_insn *m = &a->in[mid];

			if (m->region < r || (m->region == r && m->addr < addr))
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < a->nin && a->in[lo].region == r && a->in[lo].addr == addr)
			return (ssize_t)lo;
		return -1;
	}
	return -1;
}

/* A branch target t with lo < t < hi, or NULL. */
static const struct an_target *an_target_inside(const struct func_an *a, uint64_t lo,
						uint64_t hi)
{
	size_t l = 0, h = a->ntg;

	while (l < h) {
		size_t mid = (l + h) / 2;

		if (a->tg[mid].to <= lo)
			l = mid + 1;
		else
			h = mid;
	}
	return l < a->ntg && a->tg[l].to < hi ? &a->tg[l] : NULL;
}

static bool an_has_target(const struct func_an *a, uint64_t t)
{
	return t > 0 && an_target_inside(a, t - 1, t + 1) != NULL;
}

static int an_decode(const struct func_an *a, size_t i, ZydisDecoder *dec,
		     ZydisDecodedInstruction *in, ZydisDecodedOperand *ops)
{
	const struct x86_region *r = &a->rg[a->in[i].region];
	uint64_t off = a->in[i].addr - r->addr;

	return ZYAN_SUCCESS(ZydisDecoderDecodeFull(dec, r->code + off, r->len - off, in, ops)) ?
	       0 : -ENOEXEC;
}

/* Does the instruction write (the 64-bit register enclosing) reg? */
static bool writes_reg(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
		       ZydisRegister reg)
{
	for (int k = 0; k < in->operand_count; k++)
		if (ops[k].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (ops[k].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    reg64(ops[k].reg.value) == reg)
			return true;
	return false;
}

/* Walking back from instruction i (exclusive), within its region and block
 * (no branch target on the way, no call or other control flow), the last
 * instruction that writes reg: its index, or -1. At most 24 instructions. */
static ssize_t an_writer(const struct func_an *a, size_t i, ZydisRegister reg, ZydisDecoder *dec,
			 ZydisDecodedInstruction *in, ZydisDecodedOperand *ops)
{
	for (size_t k = 0; k < 24 && i > 0; k++) {
		if (an_has_target(a, a->in[i].addr) || a->in[i - 1].region != a->in[i].region)
			return -1;
		i--;
		if (a->in[i].flow != FLOW_NEXT || an_decode(a, i, dec, in, ops) ||
		    in->meta.category == ZYDIS_CATEGORY_COND_BR)
			return -1;
		if (writes_reg(in, ops, reg))
			return (ssize_t)i;
	}
	return -1;
}

/* Is addr the start of an instruction of the function? */
static bool an_is_insn(const struct func_an *a, uint64_t addr)
{
	return an_find(a, addr) >= 0;
}

/* Read a jump table: entries of esize bytes (4: relative to base, 8:
 * absolute) at table, until one does not point at an instruction of the
 * function. Returns the number of entries taken (0: none). */
static ssize_t an_read_table(struct func_an *a, const struct x86_reader *rd, uint64_t jmp,
			     uint64_t table, unsigned esize)
{
	ssize_t n = 0;

	for (; n < 4096; n++) {
		uint64_t t;

		if (esize == 4) {
			int32_t e;

			if (rd->read(rd->ctx, table + 4 * (uint64_t)n, &e, 4))
				break;
			t = table + (uint64_t)(int64_t)e;
		} else {
			if (rd->read(rd->ctx, table + 8 * (uint64_t)n, &t, 8))
				break;
		}
		if (!an_is_insn(a, t))
			break;
		if (an_add_target(a, t, jmp))
			return -ENOMEM;
	}
	return n;
}

static int tail_call(struct func_an *a, size_t i)
{
	a->in[i].tail = true;
	return 0;
}

/* An indirect jmp at instruction i: find and read its table, or mark the
 * function's targets unknown, or (no table) take it for a tail call. */
static int an_indirect(struct func_an *a, size_t i, const ZydisDecodedOperand *op,
		       const struct x86_reader *rd)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t at = a->in[i].addr, table = 0;
	unsigned esize = 0;
	ssize_t w, n;

	if (!decoder_init(&dec))
		return -ENOEXEC;
	if (op->type == ZYDIS_OPERAND_TYPE_MEMORY) {
		if (op->mem.index == ZYDIS_REGISTER_NONE)
			return tail_call(a, i);	/* jmp *8(%rax), jmp *x@GOTPCREL(%rip) */
		if (op->mem.base == ZYDIS_REGISTER_NONE && op->mem.scale == 8) {
			table = (uint64_t)op->mem.disp.value;	/* jmp *T(,%rI,8) */
			esize = 8;
		}
	} else if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		ZydisRegister r = reg64(op->reg.value), b, x;
		ssize_t wb, wx;

		w = an_writer(a, i, r, &dec, &in, ops);
		if (w < 0)
			return tail_call(a, i);	/* not computed here */
		if (in.mnemonic == ZYDIS_MNEMONIC_MOV && ops[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    ops[1].mem.index == ZYDIS_REGISTER_NONE)
			return tail_call(a, i);	/* mov 8(%rdi),%rax; jmp *%rax */
		if (in.mnemonic != ZYDIS_MNEMONIC_ADD || ops[1].type != ZYDIS_OPERAND_TYPE_REGISTER) {
			/* an indexed load, or anything else that computes it */
			bool idx = false;

			for (int k = 0; k < in.operand_count_visible; k++)
				idx |= ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY &&
				       ops[k].mem.index != ZYDIS_REGISTER_NONE;
			if (!idx && in.mnemonic == ZYDIS_MNEMONIC_MOV)
				return tail_call(a, i);	/* mov %rdi,%rax; jmp *%rax */
			if (in.mnemonic == ZYDIS_MNEMONIC_LEA && ops[1].mem.base == ZYDIS_REGISTER_RIP &&
			    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[1], a->in[w].addr, &table)))
				return an_is_insn(a, table) ? an_add_target(a, table, at) :
				       tail_call(a, i);	/* lea L(%rip),%rax; jmp *%rax */
			goto unknown;
		}
		/* add %rB,%rX (or %rX,%rB): one is the table, the other an entry */
		b = reg64(ops[1].reg.value);
		x = r;
		wb = an_writer(a, (size_t)w, b, &dec, &in, ops);
		if (wb >= 0 && in.mnemonic == ZYDIS_MNEMONIC_MOVSXD) {
			ZydisRegister t = b;

			b = x;
			x = t;
			wb = an_writer(a, (size_t)w, b, &dec, &in, ops);
		}
		/* the table's address: lea T(%rip),%rB */
		if (wb < 0 || in.mnemonic != ZYDIS_MNEMONIC_LEA || ops[1].mem.base != ZYDIS_REGISTER_RIP ||
		    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[1], a->in[wb].addr, &table)))
			goto unknown;
		/* the entry: movslq (%rB,%rI,4),%rX, with rB still the table */
		wx = an_writer(a, (size_t)w, x, &dec, &in, ops);
		if (wx < 0 || wx < wb || in.mnemonic != ZYDIS_MNEMONIC_MOVSXD ||
		    ops[1].type != ZYDIS_OPERAND_TYPE_MEMORY || reg64(ops[1].mem.base) != b ||
		    ops[1].mem.scale != 4 || ops[1].mem.disp.value != 0)
			goto unknown;
		esize = 4;
	}
	if (!esize)
		goto unknown;
	if (!rd) {
		refuse(&a->unknown_rf, -ENOTSUP, R_TABLE, " (jump at 0x%" PRIx64 ", table at 0x%"
		       PRIx64 ": nothing to read it with)", at, table);
		a->unknown = -ENOTSUP;
		return 0;
	}
	n = an_read_table(a, rd, at, table, esize);
	if (n < 0)
		return (int)n;
	if (n > 0)
		return 0;
	refuse(&a->unknown_rf, -ENOTSUP, R_TABLE, " (jump at 0x%" PRIx64 ", table at 0x%" PRIx64
	       " unreadable)", at, table);
	a->unknown = -ENOTSUP;
	return 0;
unknown:
	refuse(&a->unknown_rf, -ENOTSUP, R_TABLE, " (jump at 0x%" PRIx64 ")", at);
	a->unknown = -ENOTSUP;
	return 0;
}

static int an_build(struct func_an *a, const struct x86_region *rg, size_t nrg,
		    const struct x86_reader *rd, struct refusal *rf)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	size_t cap = 0, nind = 0, *ind = NULL;
	int ret = 0;

	memset(a, 0, sizeof(*a));
	a->rg = rg;
	a->nrg = nrg;
	if (!decoder_init(&dec))
		return refuse(rf, -ENOEXEC, R_NOEXEC, NULL);
	for (size_t r = 0; r < nrg && r < 256; r++)
		cap += rg[r].len;
	a->in = malloc((cap ? cap : 1) * sizeof(*a->in));
	if (!a->in)
		return -ENOMEM;
	for (size_t r = 0; r < nrg && r < 256 && !ret; r++) {
		for (uint64_t pos = 0; pos < rg[r].len; pos += in.length) {
			uint64_t at = rg[r].addr + pos, target = 0;
			uint8_t flow = FLOW_NEXT, kind = K_OTHER;

			if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, rg[r].code + pos,
								 rg[r].len - pos, &in, ops))) {
				ret = refuse(rf, -ENOEXEC, R_NOEXEC, " at 0x%" PRIx64, at);
				break;
			}
			if (in.attributes & ZYDIS_ATTRIB_IS_RELATIVE &&
			    ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative) {
				target = at + in.length + (uint64_t)ops[0].imm.value.s;
				if ((ret = an_add_target(a, target, at)))
					break;
				if (in.mnemonic == ZYDIS_MNEMONIC_JMP)
					kind = K_JMP;
				else if (in.meta.category == ZYDIS_CATEGORY_COND_BR)
					kind = K_JCC;
			} else if (in.mnemonic == ZYDIS_MNEMONIC_JMP) {
				kind = K_IJMP;
			} else if (in.mnemonic == ZYDIS_MNEMONIC_RET) {
				kind = K_RET;
			} else if (in.meta.category == ZYDIS_CATEGORY_NOP ||
				   in.meta.category == ZYDIS_CATEGORY_WIDENOP) {
				kind = K_NOP;
			}
			if (in.mnemonic == ZYDIS_MNEMONIC_CALL) {
				flow = FLOW_CALL;
			} else if (in.mnemonic == ZYDIS_MNEMONIC_JMP || in.mnemonic == ZYDIS_MNEMONIC_RET ||
				   refused_mnemonic(in.mnemonic)) {
				flow = FLOW_END;
				if (in.mnemonic == ZYDIS_MNEMONIC_JMP &&
				    ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE) {
					size_t *v = realloc(ind, (nind + 1) * sizeof(*v));

					if (!v) {
						ret = -ENOMEM;
						break;
					}
					ind = v;
					ind[nind++] = a->nin;
				}
			}
			a->in[a->nin++] = (struct an_insn){at, target, in.length, flow, (uint8_t)r,
							   kind, false};
		}
	}
	/* jump tables, once the direct targets are known */
	if (a->ntg)
		qsort(a->tg, a->ntg, sizeof(*a->tg), cmp_target);
	for (size_t k = 0; k < nind && !ret; k++) {
		size_t before = a->ntg;

		if (an_decode(a, ind[k], &dec, &in, ops)) {
			ret = refuse(rf, -ENOEXEC, R_NOEXEC, NULL);
			break;
		}
		ret = an_indirect(a, ind[k], &ops[0], rd);
		if (a->ntg != before)
			qsort(a->tg, a->ntg, sizeof(*a->tg), cmp_target);
	}
	free(ind);
	if (ret)
		an_free(a);
	return ret;
}

/* The checks every patch passes: no unknown jump table, no branch into
 * (addr, addr+len), and its instructions relocatable. */
static int an_check(const struct func_an *a, uint64_t addr, size_t len, const uint8_t *code,
		    struct refusal *rf)
{
	const struct an_target *t;
	const struct x86_region *r;
	uint8_t *scratch;
	ssize_t n;

	if (a->unknown) {
		*rf = a->unknown_rf;
		return a->unknown;
	}
	t = an_target_inside(a, addr, addr + len);
	if (t)
		return refuse(rf, -ENOTSUP, R_TARGET, " (0x%" PRIx64 " jumps to 0x%" PRIx64 ")",
			      t->from, t->to);
	r = &a->rg[a->in[an_find(a, addr)].region];
	scratch = malloc(X86_RELOC_MAX(len));
	if (!scratch)
		return -ENOMEM;
	/* relocated to where they are: only the allow-list and call rules can fail */
	n = relocate(code ? code : r->code + (addr - r->addr), len, addr, addr, scratch,
		     X86_RELOC_MAX(len), rf);
	free(scratch);
	return n < 0 ? (int)n : 0;
}

static int an_plan_probe(const struct func_an *a, uint64_t addr, struct x86_patch *out,
			 struct refusal *rf)
{
	ssize_t i = an_find(a, addr);
	size_t len = 0, k;
	const struct x86_region *r;
	uint8_t reg;

	if (i < 0)
		return refuse(rf, -EINVAL, R_BOUNDARY, ": 0x%" PRIx64, addr);
	reg = a->in[i].region;
	r = &a->rg[reg];
	/* endbr64 at the entry stays, for indirect branches */
	if (addr == a->rg[0].addr && a->in[i].len == 4 &&
	    !memcmp(r->code + (addr - r->addr), "\xf3\x0f\x1e\xfa", 4)) {
		addr += 4;
		i++;
	}
	for (k = (size_t)i; len < X86_JMP_LEN && k < a->nin && a->in[k].region == reg; k++)
		len += a->in[k].len;
	if (len < X86_JMP_LEN)
		return refuse(rf, -ENOTSUP, R_SHORT, " (%zu bytes from 0x%" PRIx64 ")", len, addr);
	*out = (struct x86_patch){addr, (uint32_t)len, 0, 0};
	return an_check(a, addr, len, NULL, rf);
}

/* Extend the patch [in[k], in[i]] (in[i] a ret or jmp) to X86_JMP_LEN bytes
 * over the NOPs after it, which nothing runs: alignment filler that no
 * branch targets, inside the region, then (at the region's end) up to the
 * next function, as rd->filler says. Returns the bytes taken (0: not
 * possible) with the code of the whole patch in buf. */
static size_t an_filler(const struct func_an *a, const struct x86_reader *rd, size_t k,
			size_t i, uint8_t *buf, size_t cap, size_t *beyond)
{
	const struct x86_region *rg = &a->rg[a->in[i].region];
	uint64_t start = a->in[k].addr, end = a->in[i].addr + a->in[i].len;
	size_t have = (size_t)(end - start), took = 0, avail;
	uint8_t pad[16];
	ZydisDecoder dec;
	ZydisDecodedInstruction in;

	*beyond = 0;
	for (size_t j = i + 1; have + took < X86_JMP_LEN; j++) {
		if (j >= a->nin || a->in[j].region != a->in[i].region)
			break;
		if (a->in[j].kind != K_NOP || an_has_target(a, a->in[j].addr))
			return 0;
		took += a->in[j].len;
	}
	if (have + took < X86_JMP_LEN) {
		uint64_t rend = rg->addr + rg->len;
		size_t more = 0;

		if (!rd || !rd->filler || !rd->read || end + took != rend || !decoder_init(&dec))
			return 0;
		avail = rd->filler(rd->ctx, rend);
		if (avail > sizeof(pad))
			avail = sizeof(pad);
		if (!avail || rd->read(rd->ctx, rend, pad, avail))
			return 0;
		while (have + took + more < X86_JMP_LEN) {
			if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, pad + more,
									avail - more, &in)) ||
			    (in.meta.category != ZYDIS_CATEGORY_NOP &&
			     in.meta.category != ZYDIS_CATEGORY_WIDENOP))
				return 0;
			more += in.length;
		}
		if (have + took + more > cap)
			return 0;
		memcpy(buf + have + took, pad, more);
		memcpy(buf, rg->code + (start - rg->addr), have + took);
		*beyond = more;
		return took + more;
	}
	if (have + took > cap)
		return 0;
	memcpy(buf, rg->code + (start - rg->addr), have + took);
	return took;
}

static bool an_in_regions(const struct func_an *a, uint64_t t)
{
	for (size_t r = 0; r < a->nrg; r++)
		if (t >= a->rg[r].addr && t - a->rg[r].addr < a->rg[r].len)
			return true;
	return false;
}

/* Is in[i] a return site, as an_return_sites finds them? */
static bool an_is_ret_site(const struct func_an *a, size_t i)
{
	const struct an_insn *in = &a->in[i];

	return in->kind == K_RET || (in->kind == K_JMP && !an_in_regions(a, in->target)) ||
	       (in->kind == K_IJMP && in->tail);
}

/* The classic patch of the return site in[i]: its block, back from it. */
struct ret_geom {
	size_t k;		/* the block's first displaced instruction */
	size_t len;		/* bytes from in[k] to the end of the return */
	const char *what;	/* what ends the block short of X86_JMP_LEN; NULL: long enough */
	size_t pad;		/* filler NOPs taken after the return (an_filler); 0: none */
	size_t beyond;		/* of those, bytes after the end of the region */
	uint8_t buf[64];	/* the code of the whole patch, when pad */
};

static void an_ret_geom(const struct func_an *a, const struct x86_reader *rd, size_t i,
			struct ret_geom *g)
{
	size_t k = i, len = a->in[i].len;

	g->what = NULL;
	g->pad = g->beyond = 0;
	/* grow backwards over the ret's block: stop at a branch target (the
	 * start of the block), a call, a jmp or ret (the end of the one before) */
	while (len < X86_JMP_LEN) {
		if (an_has_target(a, a->in[k].addr))
			g->what = "a branch target";
		else if (k == 0 || a->in[k - 1].region != a->in[k].region)
			g->what = "the start of the function";
		else if (a->in[k - 1].flow == FLOW_CALL)
			g->what = "a call";
		else if (a->in[k - 1].flow == FLOW_END)
			g->what = "a jmp or ret";
		if (g->what) {
			g->pad = an_filler(a, rd, k, i, g->buf, sizeof(g->buf), &g->beyond);
			break;
		}
		k--;
		len += a->in[k].len;
	}
	g->k = k;
	g->len = len;
}

/* Does the return need a springboard: a block too short for the jmp rel32,
 * no filler to grow over, but room for a jmp rel8? */
static bool needs_spring(const struct ret_geom *g)
{
	return g->what && !g->pad && g->len >= X86_JMP8_LEN;
}

/* How many bytes after rend, up to rd->filler's bound, are whole padding
 * instructions (NOPs of any length, int3): at most cap, read into buf. */
static size_t an_padding(const struct x86_reader *rd, uint64_t rend, uint8_t *buf, size_t cap)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	size_t avail, n = 0;

	if (!rd || !rd->filler || !rd->read || !decoder_init(&dec))
		return 0;
	avail = rd->filler(rd->ctx, rend);
	if (avail > cap)
		avail = cap;
	if (!avail || rd->read(rd->ctx, rend, buf, avail))
		return 0;
	while (n < avail &&
	       ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, buf + n, avail - n, &in)) &&
	       (in.meta.category == ZYDIS_CATEGORY_NOP ||
		in.meta.category == ZYDIS_CATEGORY_WIDENOP || in.mnemonic == ZYDIS_MNEMONIC_INT3))
		n += in.length;
	return n;
}

static const char R_NOSLOT[] = "the return's block is shorter than the patch, with no "
			       "springboard slot in reach";

/* The springboard slot of the return site in[i], whose 2-byte jmp rel8 is
 * at `from`.
 *
 * Where: the filler after the end of the region holding the return, which
 * is dead: it follows the function's (or its cold part's) last byte, so no
 * instruction of the function runs into it; nothing branches to it (no
 * compiler targets alignment padding, and the function's own branch targets
 * are checked below); and it ends before the next symbol, which another
 * function's patches may use, as rd->filler bounds it (for an ELF file,
 * patchable_reader's: the next function symbol, the next FDE, the next
 * 16-byte boundary and the end of .text, whichever comes first). Only the
 * whole NOP and int3 instructions at its start count (an_padding): code is
 * never taken for filler. A function never uses the filler before it: that
 * is the previous function's.
 *
 * Which: a function's slots must never overlap, yet x86_plan_return sees
 * one site at a time. So the assignment depends on the function alone: the
 * filler bytes a classic patch of the region's last return grows over
 * (an_filler) come first and are skipped; then the k-th return site of the
 * region (in address order) that needs a springboard gets the k-th 5-byte
 * slot, nearest first. A site whose slot is not in the filler, or out of
 * the jmp rel8's reach, is refused; the others keep theirs. */
static int an_spring_slot(const struct func_an *a, const struct x86_reader *rd, size_t i,
			  const struct ret_geom *rg_i, uint64_t from, uint64_t *slot,
			  struct refusal *rf)
{
	uint8_t r = a->in[i].region, pad[256];
	const struct x86_region *rg = &a->rg[r];
	uint64_t rend = rg->addr + rg->len, at;
	size_t nth = 0, skip = 0, usable;
	const struct an_target *t;
	struct ret_geom g;
	int64_t rel;

	for (size_t j = 0; j < a->nin; j++) {
		if (a->in[j].region != r || !an_is_ret_site(a, j))
			continue;
		an_ret_geom(a, rd, j, &g);
		if (g.beyond > skip)
			skip = g.beyond;
		if (j < i && needs_spring(&g))
			nth++;
	}
	usable = an_padding(rd, rend, pad, sizeof(pad));
	at = rend + skip + X86_JMP_LEN * nth;
	if (at + X86_JMP_LEN > rend + usable)
		return refuse(rf, -ENOTSUP, R_NOSLOT, " (%zu bytes to the return at 0x%" PRIx64
			      ", after %s; slot %zu of %zu filler bytes after 0x%" PRIx64 ", %zu "
			      "taken)", rg_i->len, a->in[i].addr, rg_i->what, nth, usable, rend,
			      skip);
	rel = (int64_t)(at - (from + X86_JMP8_LEN));
	if (rel < INT8_MIN || rel > INT8_MAX)
		return refuse(rf, -ENOTSUP, R_NOSLOT, " (beyond a jmp rel8: slot 0x%" PRIx64
			      " for the return at 0x%" PRIx64 ", after %s)", at, a->in[i].addr,
			      rg_i->what);
	t = an_target_inside(a, at - 1, at + X86_JMP_LEN);
	if (t)
		return refuse(rf, -ENOTSUP, R_NOSLOT, " (0x%" PRIx64 " jumps into the filler at "
			      "0x%" PRIx64 ")", t->from, t->to);
	*slot = at;
	return 0;
}

static int an_plan_return(const struct func_an *a, const struct x86_reader *rd,
			  uint64_t ret_addr, struct x86_patch *out, struct refusal *rf)
{
	ssize_t i = an_find(a, ret_addr);
	struct ret_geom g;
	size_t k, len;
	uint64_t slot = 0;
	int ret;

	if (i < 0)
		return refuse(rf, -EINVAL, R_BOUNDARY, ": 0x%" PRIx64, ret_addr);
	an_ret_geom(a, rd, (size_t)i, &g);
	if (!g.what || g.pad) {
		len = g.len + g.pad;
		*out = (struct x86_patch){a->in[g.k].addr, (uint32_t)len,
					  (uint32_t)(ret_addr - a->in[g.k].addr), 0};
		return an_check(a, out->addr, len, g.pad ? g.buf : NULL, rf);
	}
	if (!needs_spring(&g)) {
		const struct an_target *t = an_target_inside(a, ret_addr - 1, ret_addr + 1);

		if (t && g.k == (size_t)i)
			return refuse(rf, -ENOTSUP, R_TARGET, " (0x%" PRIx64 " jumps to the "
				      "return at 0x%" PRIx64 ")", t->from, t->to);
		return refuse(rf, -ENOTSUP, R_RSHORT, " (%zu bytes from 0x%" PRIx64 " to the "
			      "return at 0x%" PRIx64 ", after %s)", g.len, a->in[g.k].addr,
			      ret_addr, g.what);
	}
	/* a springboard: as few instructions of the block as make a jmp rel8 */
	k = (size_t)i;
	len = a->in[k].len;
	while (len < X86_JMP8_LEN) {
		k--;
		len += a->in[k].len;
	}
	ret = an_spring_slot(a, rd, (size_t)i, &g, a->in[k].addr, &slot, rf);
	if (ret)
		return ret;
	*out = (struct x86_patch){a->in[k].addr, (uint32_t)len,
				  (uint32_t)(ret_addr - a->in[k].addr), slot};
	return an_check(a, out->addr, len, NULL, rf);
}

/* x86_plan_probe (is_ret false) or x86_plan_return */
static int plan(const struct x86_region *regions, size_t nregions, const struct x86_reader *rd,
		uint64_t addr, bool is_ret, struct x86_patch *out, const char **why)
{
	static __thread struct refusal rf;
	struct func_an a;
	int ret;

	rf.rule = NULL;
	ret = an_build(&a, regions, nregions, rd, &rf);
	if (!ret) {
		ret = is_ret ? an_plan_return(&a, rd, addr, out, &rf) :
			       an_plan_probe(&a, addr, out, &rf);
		an_free(&a);
	}
	*why = rf.rule ? rf.why : NULL;
	return ret;
}

int x86_plan_probe(const struct x86_region *regions, size_t nregions,
		   const struct x86_reader *rd, uint64_t addr,
		   struct x86_patch *out, const char **why)
{
	return plan(regions, nregions, rd, addr, false, out, why);
}

int x86_plan_return(const struct x86_region *regions, size_t nregions,
		    const struct x86_reader *rd, uint64_t ret_addr,
		    struct x86_patch *out, const char **why)
{
	return plan(regions, nregions, rd, ret_addr, true, out, why);
}

static const char R_COND_TAIL[] = "a conditional tail call";
static const char R_NORET[] = "no return site (it never returns)";

/* As x86_return_sites, with jump tables resolved: a jump table's jmp is no
 * return site, a jmp through a pointer is a tail call. */
static ssize_t an_return_sites(const struct func_an *a, struct x86_ret_site **out,
			       struct refusal *rf)
{
	struct x86_ret_site *v = NULL;
	size_t n = 0;

	*out = NULL;
	if (a->unknown) {
		*rf = a->unknown_rf;
		return a->unknown;
	}
	for (size_t i = 0; i < a->nin; i++) {
		const struct an_insn *in = &a->in[i];
		bool out_of = in->kind == K_JMP || in->kind == K_JCC ?
			      !an_in_regions(a, in->target) : false;

		if (in->kind == K_JCC && out_of) {
			free(v);
			return refuse(rf, -ENOTSUP, R_COND_TAIL, " (a conditional jump out of the "
				      "function at 0x%" PRIx64 ", to 0x%" PRIx64 ")", in->addr,
				      in->target);
		}
		if (an_is_ret_site(a, i)) {
			struct x86_ret_site *nv = realloc(v, (n + 1) * sizeof(*v));

			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
			v[n++] = (struct x86_ret_site){in->addr,
						      in->kind == K_RET ? X86_RET : X86_TAIL_JMP};
		}
	}
	if (!n)
		return refuse(rf, -ENOENT, R_NORET, NULL);
	*out = v;
	return (ssize_t)n;
}

ssize_t x86_return_sites_rd(const struct x86_region *regions, size_t nregions,
			    const struct x86_reader *rd, struct x86_ret_site **out,
			    const char **why)
{
	static __thread struct refusal rf;
	struct func_an a;
	ssize_t n;

	rf.rule = NULL;
	*out = NULL;
	n = an_build(&a, regions, nregions, rd, &rf);
	if (!n) {
		n = an_return_sites(&a, out, &rf);
		an_free(&a);
	}
	*why = rf.rule ? rf.why : NULL;
	return n;
}

ssize_t x86_branches_out(const struct x86_region *regions, size_t nregions,
			 uint64_t *targets, size_t max)
{
	struct refusal rf;
	struct func_an a;
	size_t n = 0;
	int ret = an_build(&a, regions, nregions, NULL, &rf);

	if (ret)
		return ret;
	for (size_t i = 0; i < a.nin && n < max; i++)
		if ((a.in[i].kind == K_JMP || a.in[i].kind == K_JCC) &&
		    !an_in_regions(&a, a.in[i].target))
			targets[n++] = a.in[i].target;
	an_free(&a);
	return (ssize_t)n;
}

static void set_result(int *res, const char **rule, char *why, size_t wsize, int ret,
		       const struct refusal *rf)
{
	*res = ret;
	*rule = ret ? (rf->rule ? rf->rule : "out of memory") : NULL;
	snprintf(why, wsize, "%s", ret ? (rf->rule ? rf->why : "out of memory") : "ok");
}

int x86_func_patchable(const struct x86_region *regions, size_t nregions,
		       const struct x86_reader *rd, struct x86_patchability *out)
{
	struct func_an a;
	struct refusal rf = {0};
	struct x86_ret_site *rs = NULL;
	struct x86_patch p;
	ssize_t n;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!nregions)
		return -EINVAL;
	ret = an_build(&a, regions, nregions, rd, &rf);
	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		set_result(&out->entry, &out->entry_rule, out->entry_why, sizeof(out->entry_why),
			   ret, &rf);
		set_result(&out->ret, &out->ret_rule, out->ret_why, sizeof(out->ret_why), ret, &rf);
		return 0;
	}
	ret = an_plan_probe(&a, regions[0].addr, &p, &rf);
	if (ret == -ENOMEM)
		goto out;
	set_result(&out->entry, &out->entry_rule, out->entry_why, sizeof(out->entry_why), ret,
		   &rf);
	n = an_return_sites(&a, &rs, &rf);
	if (n == -ENOMEM) {
		ret = -ENOMEM;
		goto out;
	}
	if (n < 0) {
		set_result(&out->ret, &out->ret_rule, out->ret_why, sizeof(out->ret_why),
			   (int)n, &rf);
		ret = 0;
		goto out;
	}
	out->nret = (size_t)n;
	ret = 0;
	for (ssize_t k = 0; k < n && !ret; k++) {
		ret = an_plan_return(&a, rd, rs[k].addr, &p, &rf);
		out->nspring += !ret && p.spring;
	}
	set_result(&out->ret, &out->ret_rule, out->ret_why, sizeof(out->ret_why), ret, &rf);
	ret = ret == -ENOMEM ? ret : 0;
out:
	free(rs);
	an_free(&a);
	return ret;
}
