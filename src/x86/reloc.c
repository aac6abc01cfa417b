/* x86-64 relocation (Zydis 4): see reloc.h.
 *
 * Each instruction is on an allow-list (as the kernel's uprobes keep one)
 * or refused. Those that read RIP are re-encoded by Zydis for their new
 * address (decode -> encoder request -> encode at the new address);
 * everything else is copied byte for byte. The analysis of a whole function
 * is analyze.c, the planning of patches plan.c. */
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
#include "x86/x86_int.h"

/* rule names: one string each (x86_int.h), for counting refusals */
const char X86_R_SHORT[] = "function shorter than the patch";
const char X86_R_RSHORT[] = "the return's block is shorter than the patch";
const char X86_R_TARGET[] = "a branch targets the displaced bytes";
const char X86_R_TABLE[] = "a jump table whose targets are unknown";
const char X86_R_INSN[] = "an instruction that cannot be relocated";
const char X86_R_CALL[] = "a call or syscall that is not the last displaced instruction";
const char X86_R_RANGE[] = "a relocated rel32 no longer reaches";
const char X86_R_NOEXEC[] = "undecodable code";
const char X86_R_BOUNDARY[] = "not an instruction boundary";
const char X86_R_NOSLOT[] = "the return's block is shorter than the patch, with no "
			    "springboard slot in reach";
const char X86_R_COND_TAIL[] = "a conditional tail call";
const char X86_R_NORET[] = "no return site (it never returns)";

int x86_refuse(struct refusal *rf, int err, const char *rule, const char *fmt, ...)
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

bool x86_decoder_init(ZydisDecoder *dec)
{
	return ZYAN_SUCCESS(ZydisDecoderInit(dec, ZYDIS_MACHINE_MODE_LONG_64,
					     ZYDIS_STACK_WIDTH_64));
}

uint64_t x86_reg64(ZydisRegister r)
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

bool x86_refused_mnemonic(ZydisMnemonic m)
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
		return x86_reg64(op->reg.value) == ZYDIS_REGISTER_RSP;
	if (op->type == ZYDIS_OPERAND_TYPE_MEMORY)
		return x86_reg64(op->mem.base) == ZYDIS_REGISTER_RSP ||
		       x86_reg64(op->mem.index) == ZYDIS_REGISTER_RSP;
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
	if (!x86_decoder_init(&dec) ||
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
		return x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": privileged %s at 0x%" PRIx64, mn, pc);
	for (int k = 0; k < in->operand_count; k++)
		rel |= ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[k].imm.is_relative;
	if (rel && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative)
		target = next + (uint64_t)ops[0].imm.value.s;
	orig = target;

	/* a branch inside the block goes to the relocated copy */
	if (target >= from && target < from + len) {
		size_t t = (size_t)(target - from);

		if (map[t] == NO_OFF)
			return x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": %s at 0x%" PRIx64 " jumps inside "
				      "an instruction (0x%" PRIx64 ")", mn, pc, target);
		target = out_base + map[t];
	}

	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
		if (rel)
			return enc_branch(ZYDIS_MNEMONIC_JMP, at, target, buf, n);
		if (uses_rsp(&ops[0]))
			return x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": jmp through %%rsp at 0x%" PRIx64, pc);
		break;
	case ZYDIS_MNEMONIC_CALL: {
		size_t p = 0, j = 0;

		if (uses_rsp(&ops[0]))
			return x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": call through %%rsp at 0x%" PRIx64,
				      pc);
		/* the get-PC idiom (call the next instruction) is a push */
		if (rel && orig == next)
			return enc_push64(next, buf, n);
		if (!last)
			return x86_refuse(rf, -ENOTSUP, X86_R_CALL, ": call at 0x%" PRIx64, pc);
		if ((ret = enc_push64(next, buf, &p)))
			return ret;
		if (rel)
			ret = enc_branch(ZYDIS_MNEMONIC_JMP, at + p, target, buf + p, &j);
		else
			ret = enc_rebased(in, ops, pc, ZYDIS_MNEMONIC_JMP, at + p, buf + p, &j);
		if (ret == -EINVAL)
			return x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": cannot re-encode the call at 0x%"
				      PRIx64 " as a jmp", pc);
		*n = p + j;
		return ret;
	}
	case ZYDIS_MNEMONIC_RET:
		break;
	case ZYDIS_MNEMONIC_SYSCALL:
		if (!last)
			return x86_refuse(rf, -ENOTSUP, X86_R_CALL, ": syscall at 0x%" PRIx64, pc);
		break;
	case ZYDIS_MNEMONIC_JRCXZ: case ZYDIS_MNEMONIC_JECXZ: case ZYDIS_MNEMONIC_JCXZ:
	case ZYDIS_MNEMONIC_LOOP: case ZYDIS_MNEMONIC_LOOPE: case ZYDIS_MNEMONIC_LOOPNE:
		/* rel8 only: would need a jrcxz over a jmp rel32; rare in compiled code */
		return x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": %s (rel8 only) at 0x%" PRIx64, mn, pc);
	default:
		if (in->meta.category == ZYDIS_CATEGORY_COND_BR && rel)
			return enc_branch(in->mnemonic, at, target, buf, n);
		if (x86_refused_mnemonic(in->mnemonic) || rel ||
		    !(allowed_category(in->meta.category) || allowed_mnemonic(in->mnemonic)))
			return x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": %s at 0x%" PRIx64
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
		return x86_refuse(rf, -ERANGE, X86_R_RANGE, ": %s at 0x%" PRIx64 " from 0x%" PRIx64,
			      mn, pc, at);
	if (ret)
		return x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": cannot re-encode %s at 0x%" PRIx64, mn, pc);
	return 0;
}

ssize_t x86_relocate_rf(const uint8_t *code, size_t len, uint64_t from, uint64_t to,
			uint8_t *out, size_t cap, struct refusal *rf)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	size_t *map, pos = 0;
	ssize_t ret = 0;

	rf->rule = NULL;
	rf->why[0] = 0;
	if (!x86_decoder_init(&dec))
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
			return x86_refuse(rf, -ENOEXEC, X86_R_NOEXEC, " at 0x%" PRIx64, from + off);
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
				ret = x86_refuse(rf, -ENOEXEC, X86_R_NOEXEC, " at 0x%" PRIx64, from + off);
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
					ret = x86_refuse(rf, -ENOTSUP, X86_R_INSN, ": unstable encoding at 0x%"
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
	ssize_t n = x86_relocate_rf(code, len, from, to, out, cap, &rf);

	if (why)
		*why = rf.rule ? rf.why : NULL;
	return n;
}

