#include "probe/fetch.h"

#include <string.h>

static const char *const reg_knames[USC_REG_NR] = {
	[USC_REG_AX] = "ax", [USC_REG_BX] = "bx", [USC_REG_CX] = "cx",
	[USC_REG_DX] = "dx", [USC_REG_SI] = "si", [USC_REG_DI] = "di",
	[USC_REG_BP] = "bp", [USC_REG_SP] = "sp", [USC_REG_R8] = "r8",
	[USC_REG_R9] = "r9", [USC_REG_R10] = "r10", [USC_REG_R11] = "r11",
	[USC_REG_R12] = "r12", [USC_REG_R13] = "r13", [USC_REG_R14] = "r14",
	[USC_REG_R15] = "r15", [USC_REG_IP] = "ip",
};

static const char *const type_names[USC_T_NR] = {
	"u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
	"x8", "x16", "x32", "x64", "string", "ustring", "symbol", "bitfield",
	"stack",
};

static const unsigned char type_sizes[USC_T_NR] = {
	1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 0, 0, 8, 0, 0,
};

const char *fetch_reg_kname(enum usc_reg reg)
{
	return (unsigned)reg < USC_REG_NR ? reg_knames[reg] : "?";
}

const char *fetch_type_name(enum usc_type type)
{
	return (unsigned)type < USC_T_NR ? type_names[type] : "?";
}

unsigned fetch_type_size(enum usc_type type)
{
	return (unsigned)type < USC_T_NR ? type_sizes[type] : 0;
}

/* Every x86-64 name of a general register or its low part (the high bytes
 * ah..dh have none: no fetch program shifts them down), and rip. One table
 * for every front end: the probe parser and the USDT argument parser. */
static const struct fetch_reg_name reg_names[] = {
	{"rax", USC_REG_AX, 8}, {"eax", USC_REG_AX, 4}, {"ax", USC_REG_AX, 2}, {"al", USC_REG_AX, 1},
	{"rbx", USC_REG_BX, 8}, {"ebx", USC_REG_BX, 4}, {"bx", USC_REG_BX, 2}, {"bl", USC_REG_BX, 1},
	{"rcx", USC_REG_CX, 8}, {"ecx", USC_REG_CX, 4}, {"cx", USC_REG_CX, 2}, {"cl", USC_REG_CX, 1},
	{"rdx", USC_REG_DX, 8}, {"edx", USC_REG_DX, 4}, {"dx", USC_REG_DX, 2}, {"dl", USC_REG_DX, 1},
	{"rsi", USC_REG_SI, 8}, {"esi", USC_REG_SI, 4}, {"si", USC_REG_SI, 2}, {"sil", USC_REG_SI, 1},
	{"rdi", USC_REG_DI, 8}, {"edi", USC_REG_DI, 4}, {"di", USC_REG_DI, 2}, {"dil", USC_REG_DI, 1},
	{"rbp", USC_REG_BP, 8}, {"ebp", USC_REG_BP, 4}, {"bp", USC_REG_BP, 2}, {"bpl", USC_REG_BP, 1},
	{"rsp", USC_REG_SP, 8}, {"esp", USC_REG_SP, 4}, {"sp", USC_REG_SP, 2}, {"spl", USC_REG_SP, 1},
	{"r8", USC_REG_R8, 8}, {"r8d", USC_REG_R8, 4}, {"r8w", USC_REG_R8, 2}, {"r8b", USC_REG_R8, 1},
	{"r9", USC_REG_R9, 8}, {"r9d", USC_REG_R9, 4}, {"r9w", USC_REG_R9, 2}, {"r9b", USC_REG_R9, 1},
	{"r10", USC_REG_R10, 8}, {"r10d", USC_REG_R10, 4}, {"r10w", USC_REG_R10, 2}, {"r10b", USC_REG_R10, 1},
	{"r11", USC_REG_R11, 8}, {"r11d", USC_REG_R11, 4}, {"r11w", USC_REG_R11, 2}, {"r11b", USC_REG_R11, 1},
	{"r12", USC_REG_R12, 8}, {"r12d", USC_REG_R12, 4}, {"r12w", USC_REG_R12, 2}, {"r12b", USC_REG_R12, 1},
	{"r13", USC_REG_R13, 8}, {"r13d", USC_REG_R13, 4}, {"r13w", USC_REG_R13, 2}, {"r13b", USC_REG_R13, 1},
	{"r14", USC_REG_R14, 8}, {"r14d", USC_REG_R14, 4}, {"r14w", USC_REG_R14, 2}, {"r14b", USC_REG_R14, 1},
	{"r15", USC_REG_R15, 8}, {"r15d", USC_REG_R15, 4}, {"r15w", USC_REG_R15, 2}, {"r15b", USC_REG_R15, 1},
	{"rip", USC_REG_IP, 8},
};


const struct fetch_reg_name *fetch_reg_lookup(const char *s, size_t n)
{
	for (size_t i = 0; i < sizeof(reg_names) / sizeof(reg_names[0]); i++)
		if (strlen(reg_names[i].name) == n && !strncmp(reg_names[i].name, s, n))
			return &reg_names[i];
	return NULL;
}

const char *fetch_reg_name64(enum usc_reg reg)
{
	static const char *const names[USC_REG_NR] = {
		"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9",
		"r10", "r11", "r12", "r13", "r14", "r15", "rip",
	};

	return (unsigned)reg < USC_REG_NR ? names[reg] : "?";
}
