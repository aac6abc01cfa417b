/* x86-64 instruction boundaries (Zydis 4). */
#include "x86/insn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <Zydis/Zydis.h>

#include "core/log.h"

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

static bool in_regions(const struct x86_region *r, size_t nr, uint64_t a)
{
	for (size_t i = 0; i < nr; i++)
		if (a >= r[i].addr && a < r[i].addr + r[i].len)
			return true;
	return false;
}

ssize_t x86_return_sites(const struct x86_region *regions, size_t nregions,
			 struct x86_ret_site **out, const char **why)
{
	static __thread char reason[160];
	ZydisDecoder dec;
	ZydisDecodedInstruction insn;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	struct x86_ret_site *v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	*why = NULL;
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64)))
		return -ENOEXEC;
	for (size_t r = 0; r < nregions; r++) {
		const struct x86_region *rg = &regions[r];

		for (uint64_t pos = 0; pos < rg->len; pos += insn.length) {
			uint64_t at = rg->addr + pos;
			enum x86_ret_kind kind = X86_RET;
			bool site = false;

			if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, rg->code + pos, rg->len - pos,
								 &insn, ops)) || insn.length == 0) {
				snprintf(reason, sizeof(reason), "undecodable bytes at 0x%" PRIx64, at);
				*why = reason;
				free(v);
				return -ENOEXEC;
			}
			if (insn.mnemonic == ZYDIS_MNEMONIC_RET) {
				site = true;
			} else if (insn.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
				   insn.meta.category == ZYDIS_CATEGORY_COND_BR) {
				bool cond = insn.meta.category == ZYDIS_CATEGORY_COND_BR;
				uint64_t target;

				if (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
				    !ops[0].imm.is_relative) {
					snprintf(reason, sizeof(reason),
						 "an indirect jump at 0x%" PRIx64
						 " (a jump table or a tail call through a pointer)", at);
					*why = reason;
					free(v);
					return -ENOTSUP;
				}
				target = at + insn.length + (uint64_t)ops[0].imm.value.s;
				if (!in_regions(regions, nregions, target)) {
					if (cond) {
						snprintf(reason, sizeof(reason),
							 "a conditional jump out of the function at 0x%"
							 PRIx64 " (to 0x%" PRIx64 ")", at, target);
						*why = reason;
						free(v);
						return -ENOTSUP;
					}
					site = true;
					kind = X86_TAIL_JMP;
				}
			}
			if (!site)
				continue;
			if (n == cap) {
				struct x86_ret_site *nv;

				cap = cap ? cap * 2 : 8;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					free(v);
					return -ENOMEM;
				}
				v = nv;
			}
			v[n++] = (struct x86_ret_site){at, kind};
		}
	}
	if (n == 0) {
		*why = "it has no ret and no tail call (it never returns)";
		return -ENOENT;
	}
	*out = v;
	return (ssize_t)n;
}
