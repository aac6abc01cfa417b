#include "probe/fetch.h"

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
};

static const unsigned char type_sizes[USC_T_NR] = {
	1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 0, 0, 8, 0,
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
