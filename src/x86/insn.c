/* x86-64 instruction boundaries (Zydis 4). */
#include "x86/insn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "core/log.h"
#include "x86/x86_int.h"

/* prev/next are byte offsets from code[0], like off. On -ENOEXEC, *prev is
 * the last boundary decoded (the start of the undecodable bytes) and *next
 * is that same offset. off == len is a boundary when the last instruction
 * ends exactly there; off > len is -ERANGE. */
int x86_check_boundary(const uint8_t *code, size_t len, uint64_t addr,
		       uint64_t off, uint64_t *prev, uint64_t *next)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction insn;
	uint64_t pos = 0;

	if (!code && len)
		return -EINVAL;
	if (off > len) {
		log_error("offset %" PRIu64 " is past the %zu code bytes at 0x%" PRIx64,
			  off, len, addr);
		return -ERANGE;
	}
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64))) {
		log_error("cannot initialise the x86-64 decoder");
		return -ENOEXEC;
	}
	while (pos < off) {
		ZyanStatus st = ZydisDecoderDecodeInstruction(&dec, NULL, code + pos,
							      len - pos, &insn);
		if (!ZYAN_SUCCESS(st) || insn.length == 0) {
			log_error("cannot decode the instruction at 0x%" PRIx64
				  " (+%" PRIu64 ") before reaching +%" PRIu64,
				  addr + pos, pos, off);
			if (prev)
				*prev = pos;
			if (next)
				*next = pos;
			return -ENOEXEC;
		}
		if (pos + insn.length > off) {
			if (prev)
				*prev = pos;
			if (next)
				*next = pos + insn.length;
			log_debug("+%" PRIu64 " (0x%" PRIx64 ") is inside the %u-byte "
				  "instruction at +%" PRIu64 " (0x%" PRIx64 ")",
				  off, addr + off, insn.length, pos, addr + pos);
			return -EINVAL;
		}
		pos += insn.length;
	}
	if (prev)
		*prev = off;
	if (next)
		*next = off;
	return 0;
}

int x86_insn_length(const uint8_t *code, size_t len)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction insn;

	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64)) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, code, len, &insn)) ||
	    !insn.length)
		return -ENOEXEC;
	return insn.length;
}

/* ---- effects ------------------------------------------------------------ */

/* Instructions that may run in place before a patch (their registers and
 * memory checked below): computations and moves. */
static bool in_place_category(ZydisInstructionCategory c)
{
	switch (c) {
	case ZYDIS_CATEGORY_BINARY: case ZYDIS_CATEGORY_LOGICAL: case ZYDIS_CATEGORY_DATAXFER:
	case ZYDIS_CATEGORY_CONVERT: case ZYDIS_CATEGORY_SHIFT: case ZYDIS_CATEGORY_ROTATE:
	case ZYDIS_CATEGORY_BITBYTE: case ZYDIS_CATEGORY_CMOV: case ZYDIS_CATEGORY_SETCC:
	case ZYDIS_CATEGORY_NOP: case ZYDIS_CATEGORY_WIDENOP: case ZYDIS_CATEGORY_SSE:
	case ZYDIS_CATEGORY_AVX: case ZYDIS_CATEGORY_AVX2: case ZYDIS_CATEGORY_LOGICAL_FP:
	case ZYDIS_CATEGORY_BMI1: case ZYDIS_CATEGORY_BMI2: case ZYDIS_CATEGORY_LZCNT:
	case ZYDIS_CATEGORY_CET: case ZYDIS_CATEGORY_MISC: case ZYDIS_CATEGORY_PREFETCH:
		return true;
	default:
		return false;
	}
}

/* The zeroing idioms: the result does not depend on the source. */
static bool zeroes(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op)
{
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_XOR: case ZYDIS_MNEMONIC_SUB: case ZYDIS_MNEMONIC_PXOR:
	case ZYDIS_MNEMONIC_XORPS: case ZYDIS_MNEMONIC_XORPD:
		return in->operand_count_visible == 2 && op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		       op[1].type == ZYDIS_OPERAND_TYPE_REGISTER && op[0].reg.value == op[1].reg.value;
	case ZYDIS_MNEMONIC_VPXOR: case ZYDIS_MNEMONIC_VXORPS: case ZYDIS_MNEMONIC_VXORPD:
		return in->operand_count_visible == 3 && op[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		       op[2].type == ZYDIS_OPERAND_TYPE_REGISTER && op[1].reg.value == op[2].reg.value;
	default:
		return false;
	}
}

/* The bytes of its 64-bit register a write of register r changes, given
 * src, the register it widens in place (movslq %edi,%rdi), or NONE. */
static uint8_t bytes_changed(ZydisRegister r, ZydisRegister src)
{
	ZydisRegisterClass c = ZydisRegisterGetClass(r);
	uint8_t keep = 0;

	if (src != ZYDIS_REGISTER_NONE)
		keep = (uint8_t)((1u << (ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, src) / 8)) - 1);
	switch (c) {
	case ZYDIS_REGCLASS_GPR8:
		return r == ZYDIS_REGISTER_AH || r == ZYDIS_REGISTER_BH || r == ZYDIS_REGISTER_CH ||
			       r == ZYDIS_REGISTER_DH ? 0x02 : 0x01;
	case ZYDIS_REGCLASS_GPR16:
		return (uint8_t)(0x03 & ~keep);
	default:	/* a 32-bit write zeroes the upper half */
		return (uint8_t)(0xff & ~keep);
	}
}

/* The register an instruction widens in place (movslq %edi,%rdi; movzbl
 * %dil,%edi; mov %edi,%edi; cltq): its source, the low part of its
 * destination; or NONE. */
static ZydisRegister widened(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op)
{
	const ZydisDecodedOperand *dst = NULL, *src = NULL;

	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_MOV: case ZYDIS_MNEMONIC_MOVSX: case ZYDIS_MNEMONIC_MOVSXD:
	case ZYDIS_MNEMONIC_MOVZX: case ZYDIS_MNEMONIC_CDQE: case ZYDIS_MNEMONIC_CWDE:
		break;
	default:
		return ZYDIS_REGISTER_NONE;
	}
	for (unsigned k = 0; k < in->operand_count; k++) {
		if (op[k].type != ZYDIS_OPERAND_TYPE_REGISTER)
			return ZYDIS_REGISTER_NONE;
		if (op[k].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)
			dst = &op[k];
		else if (op[k].actions & ZYDIS_OPERAND_ACTION_MASK_READ)
			src = &op[k];
	}
	if (!dst || !src || x86_reg64(dst->reg.value) != x86_reg64(src->reg.value) ||
	    src->reg.value == ZYDIS_REGISTER_AH || src->reg.value == ZYDIS_REGISTER_BH ||
	    src->reg.value == ZYDIS_REGISTER_CH || src->reg.value == ZYDIS_REGISTER_DH)
		return ZYDIS_REGISTER_NONE;
	return src->reg.value;
}

int x86_insn_effects(const uint8_t *code, size_t len, struct x86_effects *out)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t read[8], wrote[8];
	size_t nread = 0, nwrote = 0;
	ZydisRegister wide;

	memset(out, 0, sizeof(*out));
	if (!x86_decoder_init(&dec) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code, len, &in, op)) || !in.length)
		return -ENOEXEC;
	out->len = in.length;
	out->leaves = in.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
		      in.meta.category == ZYDIS_CATEGORY_RET;
	out->in_place = in_place_category(in.meta.category) &&
			!x86_refused_mnemonic(in.mnemonic) &&
			!(in.attributes & (ZYDIS_ATTRIB_HAS_LOCK | ZYDIS_ATTRIB_HAS_REP |
					   ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE)) &&
			in.mnemonic != ZYDIS_MNEMONIC_XCHG && in.mnemonic != ZYDIS_MNEMONIC_CPUID &&
			in.mnemonic != ZYDIS_MNEMONIC_LEAVE && in.mnemonic != ZYDIS_MNEMONIC_ENTER;
	out->writes_flags = in.cpu_flags && (in.cpu_flags->modified | in.cpu_flags->set_0 |
					     in.cpu_flags->set_1 | in.cpu_flags->undefined);
	out->rerun = !(in.cpu_flags && in.cpu_flags->tested);
	wide = widened(&in, op);
	for (unsigned k = 0; k < in.operand_count; k++) {
		const ZydisDecodedOperand *o = &op[k];
		bool r = o->actions & ZYDIS_OPERAND_ACTION_MASK_READ,
		     w = o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE;

		if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
			if (o->mem.type == ZYDIS_MEMOP_TYPE_MIB)
				out->in_place = false;
			if (o->mem.type != ZYDIS_MEMOP_TYPE_AGEN) {
				out->reads_mem |= r;
				out->writes_mem |= w;
			}
			if (o->mem.base != ZYDIS_REGISTER_NONE && nread < 8)
				read[nread++] = x86_reg64(o->mem.base);
			if (o->mem.index != ZYDIS_REGISTER_NONE && nread < 8)
				read[nread++] = x86_reg64(o->mem.index);
			continue;
		}
		if (o->type != ZYDIS_OPERAND_TYPE_REGISTER)
			continue;
		ZydisRegisterClass c = ZydisRegisterGetClass(o->reg.value);

		if (c == ZYDIS_REGCLASS_FLAGS)
			continue;	/* (cpu_flags says which) */
		if (r && nread < 8)
			read[nread++] = x86_reg64(o->reg.value);
		if (!w)
			continue;
		if (nwrote < 8)
			wrote[nwrote++] = x86_reg64(o->reg.value);
		switch (c) {
		case ZYDIS_REGCLASS_GPR8: case ZYDIS_REGCLASS_GPR16: case ZYDIS_REGCLASS_GPR32:
		case ZYDIS_REGCLASS_GPR64: {
			int n = ZydisRegisterGetId(x86_reg64(o->reg.value));

			if (x86_reg64(o->reg.value) == ZYDIS_REGISTER_RSP || n < 0 || n > 15)
				out->in_place = false;
			else
				out->changed[n] |= bytes_changed(o->reg.value, wide);
			break;
		}
		case ZYDIS_REGCLASS_XMM: case ZYDIS_REGCLASS_YMM: case ZYDIS_REGCLASS_ZMM:
			break;	/* the probes keep the vector registers */
		default:	/* rip, segments, x87, mask, control...: not in place */
			out->in_place = false;
			break;
		}
	}
	if (nread == 8 || nwrote == 8)
		out->rerun = false;
	for (size_t a = 0; a < nwrote && out->rerun; a++)
		for (size_t b = 0; b < nread; b++)
			if (wrote[a] == read[b] && !zeroes(&in, op))
				out->rerun = false;
	out->rerun = out->rerun && out->in_place && !out->writes_mem;
	return 0;
}
