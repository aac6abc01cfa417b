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
