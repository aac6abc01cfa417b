/* Locations: where a variable lives at a pc, from its DWARF location
 * (location lists, DW_OP_piece, constants, registers, memory at a register
 * or an address, the frame base through the call frame information), as
 * the start of a fetch program (struct debuginfo_lval). */
#include <dwarf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <elfutils/known-dwarf.h>

#include "debuginfo/debuginfo_int.h"

static const char *op_name(unsigned op)
{
	switch (op) {
#define DWARF_ONE_KNOWN_DW_OP(NAME, CODE) case CODE: return #CODE;
		DWARF_ALL_KNOWN_DW_OP
#undef DWARF_ONE_KNOWN_DW_OP
	default:
		return "DW_OP_?";
	}
}

/* DWARF x86-64 register numbers 0..15 -> enum usc_reg; -1 for the rest. */
static int map_reg(uint64_t dwreg)
{
	static const uint8_t map[16] = {
		USC_REG_AX, USC_REG_DX, USC_REG_CX, USC_REG_BX,
		USC_REG_SI, USC_REG_DI, USC_REG_BP, USC_REG_SP,
		USC_REG_R8, USC_REG_R9, USC_REG_R10, USC_REG_R11,
		USC_REG_R12, USC_REG_R13, USC_REG_R14, USC_REG_R15,
	};
	return dwreg < 16 ? map[dwreg] : -1;
}

/* The name of DWARF x86-64 register dwreg, or NULL. */
static const char *reg_name(uint64_t dwreg)
{
	static const char *const names[17] = {
		"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip",
	};

	return dwreg < 17 ? names[dwreg] : NULL;
}

/* The concrete function under die (a CU, a namespace) whose code has pc. */
static bool func_at(Dwarf_Die *die, Dwarf_Addr pc, Dwarf_Die *out)
{
	Dwarf_Die child;

	if (dwarf_child(die, &child) != 0)
		return false;
	do {
		int tag = dwarf_tag(&child);

		if (tag == DW_TAG_subprogram && dwarf_hasattr(&child, DW_AT_frame_base) &&
		    dwarf_haspc(&child, pc) > 0) {
			*out = child;
			return true;
		}
		if ((tag == DW_TAG_namespace || debuginfo_is_aggregate(tag)) &&
		    func_at(&child, pc, out))
			return true;
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

/* The function whose frame holds the variables at pc (for DW_AT_frame_base).
 * Inside an inlined copy, dwarf_getscopes continues with the abstract
 * definition, which has no frame: the frame is the concrete caller's. */
static Dwarf_Die *scope_func(struct debuginfo_lower *c)
{
	for (int i = 0; i < c->nscopes; i++)
		if (dwarf_tag(&c->scopes[i]) == DW_TAG_subprogram &&
		    dwarf_hasattr(&c->scopes[i], DW_AT_frame_base))
			return &c->scopes[i];
	return c->has_cu && func_at(&c->cudie, c->dwpc, &c->frame_func) ? &c->frame_func : NULL;
}

/* The CFA at pc as "reg + k". */
static int cfa_at(struct debuginfo_lower *c, int *reg, int64_t *k)
{
	Dwarf_CFI *cfis[2];
	Dwarf_Addr biases[2] = {0, 0};

	cfis[0] = dwfl_module_dwarf_cfi(c->m->mod, &biases[0]);
	cfis[1] = dwfl_module_eh_cfi(c->m->mod, &biases[1]);
	for (int i = 0; i < 2; i++) {
		Dwarf_Frame *frame = NULL;
		Dwarf_Op *ops;
		size_t nops;
		int ok = 0;

		if (!cfis[i] ||
		    dwarf_cfi_addrframe(cfis[i], c->pc + c->m->bias - biases[i], &frame))
			continue;
		if (!dwarf_frame_cfa(frame, &ops, &nops) && nops == 1) {
			if (ops[0].atom == DW_OP_bregx) {
				*reg = map_reg(ops[0].number);
				*k = (int64_t)ops[0].number2;
				ok = *reg >= 0;
			} else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
				*reg = map_reg(ops[0].atom - DW_OP_breg0);
				*k = (int64_t)ops[0].number;
				ok = *reg >= 0;
			}
		}
		free(frame);
		if (ok)
			return 0;
	}
	return -1;
}

/* A value in pieces (DW_OP_piece) whose one piece covers the whole of its
 * type: that is the value itself. */
static bool piece_is_whole(Dwarf_Die *var, const Dwarf_Op *ops, size_t nops)
{
	Dwarf_Die t;
	Dwarf_Word size = 0;

	return nops == 2 && debuginfo_die_type(var, &t) && debuginfo_strip_type(&t) &&
	       !dwarf_aggregate_size(&t, &size) && size == ops[1].number;
}

/* A value in several pieces: kept as its pieces when each is a whole
 * register, a word each (a Go string, slice, interface); else refused,
 * saying where the pieces are, rather than read as their first part. */
static int loc_pieces(struct debuginfo_lower *c, const char *name, size_t pos, const Dwarf_Op *ops,
		      size_t nops, struct debuginfo_lval *lv)
{
	bool regs = nops % 2 == 0 && nops / 2 <= sizeof(lv->piece_reg);
	char where[96] = "";
	size_t used = 0, npieces = 0;

	for (size_t i = 0; regs && i < nops; i += 2) {
		unsigned op = ops[i].atom;
		int r = op >= DW_OP_reg0 && op <= DW_OP_reg31 ? map_reg(op - DW_OP_reg0) :
			op == DW_OP_regx ? map_reg(ops[i].number) : -1;

		if (r < 0 || ops[i + 1].atom != DW_OP_piece || ops[i + 1].number != 8)
			regs = false;
		else
			lv->piece_reg[i / 2] = (uint8_t)r;
	}
	if (regs && nops > 2) {
		lv->kind = LV_REG;
		lv->npieces = (unsigned)nops / 2;
		return 0;
	}
	for (size_t i = 0; i < nops && used < sizeof(where); i++) {
		unsigned op = ops[i].atom;
		const char *r = NULL;

		if (op == DW_OP_piece) {
			npieces++;
			continue;
		}
		if (op >= DW_OP_reg0 && op <= DW_OP_reg31)
			r = reg_name(op - DW_OP_reg0);
		else if (op == DW_OP_regx)
			r = reg_name(ops[i].number);
		used += (size_t)snprintf(where + used, sizeof(where) - used, "%s%s",
					 used ? ", " : "", r ? r : "memory");
	}
	return debuginfo_fail(c, -EINVAL, pos,
			      "'%s' is in %zu pieces at 0x%" PRIx64 " (%s): uscope fetches "
			      "pieces of whole registers only", name, npieces,
			      c->pc, where);
}

/* A constant: DW_OP_lit<N> / DW_OP_const* then DW_OP_stack_value. */
static bool loc_const(const Dwarf_Op *ops, size_t nops, struct debuginfo_lval *lv)
{
	unsigned op;

	if (nops != 2 || ops[1].atom != DW_OP_stack_value)
		return false;
	op = ops[0].atom;
	if (op >= DW_OP_lit0 && op <= DW_OP_lit31) {
		lv->kind = LV_CONST;
		lv->cval = op - DW_OP_lit0;
		return true;
	}
	if (op == DW_OP_const1u || op == DW_OP_const2u || op == DW_OP_const4u ||
	    op == DW_OP_const8u || op == DW_OP_constu || op == DW_OP_const1s ||
	    op == DW_OP_const2s || op == DW_OP_const4s || op == DW_OP_const8s ||
	    op == DW_OP_consts) {
		lv->kind = LV_CONST;
		lv->cval = (int64_t)ops[0].number;
		return true;
	}
	return false;
}

/* DW_OP_fbreg N: memory at the function's frame base (the CFA, or a
 * register plus an offset) plus N. */
static int loc_fbreg(struct debuginfo_lower *c, const char *name, size_t pos, const Dwarf_Op *op,
		     struct debuginfo_lval *lv)
{
	Dwarf_Die *fn = scope_func(c);
	Dwarf_Attribute fa;
	Dwarf_Op *fops;
	size_t fnops;
	int64_t k = 0;
	int reg;

	if (!fn || !dwarf_attr(fn, DW_AT_frame_base, &fa) ||
	    dwarf_getlocation_addr(&fa, c->dwpc, &fops, &fnops, 1) != 1 ||
	    fnops != 1)
		return debuginfo_fail(c, -EINVAL, pos,
				      "'%s': its function has no frame base at 0x%" PRIx64,
				      name, c->pc);
	if (fops[0].atom == DW_OP_call_frame_cfa) {
		if (cfa_at(c, &reg, &k))
			return debuginfo_fail(c, -EINVAL, pos,
					      "'%s': no call frame info for 0x%" PRIx64, name,
					      c->pc);
	} else if (fops[0].atom >= DW_OP_reg0 && fops[0].atom <= DW_OP_reg31) {
		reg = map_reg(fops[0].atom - DW_OP_reg0);
	} else if (fops[0].atom >= DW_OP_breg0 && fops[0].atom <= DW_OP_breg31) {
		reg = map_reg(fops[0].atom - DW_OP_breg0);
		k = (int64_t)fops[0].number;
	} else {
		return debuginfo_fail(c, -EINVAL, pos,
				      "'%s' lives in a DWARF location uscope cannot read yet: "
				      "frame base %s", name, op_name(fops[0].atom));
	}
	if (reg < 0)
		return debuginfo_fail(c, -EINVAL, pos,
				      "'%s': its frame base is not in a general register",
				      name);
	lv->kind = LV_MEM;
	lv->prog[lv->n++] = (struct fetch_insn){.op = FOP_REG, .reg = (uint8_t)reg};
	lv->off = k + (int64_t)op->number;
	return 0;
}

/* A location of one operation: a register, memory at a register plus an
 * offset, at an address or in the frame. 1 for another form, or a register
 * that is not a general one. */
static int loc_simple(struct debuginfo_lower *c, const char *name, size_t pos, const Dwarf_Op *ops,
		      struct debuginfo_lval *lv)
{
	unsigned op = ops[0].atom;
	int reg;

	if ((op >= DW_OP_reg0 && op <= DW_OP_reg31) || op == DW_OP_regx) {
		reg = map_reg(op == DW_OP_regx ? ops[0].number : op - DW_OP_reg0);
		if (reg >= 0) {
			lv->kind = LV_REG;
			lv->prog[lv->n++] = (struct fetch_insn){.op = FOP_REG,
								.reg = (uint8_t)reg};
			return 0;
		}
	} else if ((op >= DW_OP_breg0 && op <= DW_OP_breg31) || op == DW_OP_bregx) {
		reg = map_reg(op == DW_OP_bregx ? ops[0].number : op - DW_OP_breg0);
		if (reg >= 0) {
			lv->kind = LV_MEM;
			lv->prog[lv->n++] = (struct fetch_insn){.op = FOP_REG,
								.reg = (uint8_t)reg};
			lv->off = (int64_t)(op == DW_OP_bregx ? ops[0].number2
							      : ops[0].number);
			return 0;
		}
	} else if (op == DW_OP_addr) {
		lv->kind = LV_MEM;
		lv->prog[lv->n++] = (struct fetch_insn){.op = FOP_VADDR,
							.imm = (int64_t)ops[0].number};
		return 0;
	} else if (op == DW_OP_fbreg) {
		return loc_fbreg(c, name, pos, &ops[0], lv);
	}
	return 1;
}

/* A location uscope cannot read: the error names the first operation that
 * is not a plain register/memory form. */
static int loc_unsupported(struct debuginfo_lower *c, const char *name, size_t pos,
			   const Dwarf_Op *ops, size_t nops)
{
	unsigned bad = ops[0].atom;

	if (nops > 1 &&
	    ((bad >= DW_OP_reg0 && bad <= DW_OP_breg31) || bad == DW_OP_regx ||
	     bad == DW_OP_bregx || bad == DW_OP_fbreg || bad == DW_OP_addr))
		bad = ops[1].atom;
	return debuginfo_fail(c, -EINVAL, pos,
			      "'%s' lives in a DWARF location uscope cannot read yet: %s", name,
			      op_name(bad));
}

int debuginfo_var_location(struct debuginfo_lower *c, Dwarf_Die *var, const char *name, size_t pos,
			   struct debuginfo_lval *lv)
{
	Dwarf_Attribute a;
	Dwarf_Op *ops;
	size_t nops;
	int r;

	memset(lv, 0, sizeof(*lv));
	if (!dwarf_attr(var, DW_AT_location, &a)) {
		Dwarf_Sword sv;

		if (dwarf_attr_integrate(var, DW_AT_const_value, &a) && !dwarf_formsdata(&a, &sv)) {
			lv->kind = LV_CONST;
			lv->cval = sv;
			return 0;
		}
		return debuginfo_fail(c, -ENODATA, pos, "'%s' is optimized out at 0x%" PRIx64,
				      name, c->pc);
	}
	r = dwarf_getlocation_addr(&a, c->dwpc, &ops, &nops, 1);
	if (r < 0)
		return debuginfo_fail(c, -EINVAL, pos, "'%s': cannot read its DWARF location: %s",
				      name, dwarf_errmsg(-1));
	if (r == 0 || nops == 0)
		return debuginfo_fail(c, -ENODATA, pos, "'%s' is optimized out at 0x%" PRIx64,
				      name, c->pc);
	/* only the value it had at the function's entry is known: gone here */
	for (size_t i = 0; i < nops; i++)
		if (ops[i].atom == DW_OP_entry_value || ops[i].atom == DW_OP_GNU_entry_value)
			return debuginfo_fail(c, -ENODATA, pos,
					      "'%s' is optimized out at 0x%" PRIx64 " (only its "
					      "value at the function's entry is recorded)", name,
					      c->pc);
	/* a value in pieces (DW_OP_piece): Go's register ABI passes a string,
	 * a slice, an interface or a small struct in several registers (the
	 * message fits struct debuginfo_error's 160 bytes). One piece covering
	 * the whole value is the value; several are refused, saying where they
	 * are, rather than read as their first part. */
	if (nops >= 2 && ops[1].atom == DW_OP_piece) {
		if (!piece_is_whole(var, ops, nops))
			return loc_pieces(c, name, pos, ops, nops, lv);
		nops = 1;
	}
	if (loc_const(ops, nops, lv))
		return 0;
	if (nops == 1 && (r = loc_simple(c, name, pos, ops, lv)) <= 0)
		return r;
	return loc_unsupported(c, name, pos, ops, nops);
}
