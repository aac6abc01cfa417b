/* Go's DWARF, for the DWARF front end (src/debuginfo/): Go's values in
 * several words (a string, a slice, an interface) lowered to their parts
 * and the argument that shows them, and Go's results, which its compiler
 * lists among a function's formal parameters. */
#include <dwarf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "debuginfo/debuginfo_int.h"
#include "debuginfo/go.h"

#define DW_AT_go_kind 0x2900	/* Go's reflect.Kind of a type */
#define GO_KIND_SLICE 23

enum go_comp go_dwarf_comp(Dwarf_Die *t)
{
	Dwarf_Attribute a;
	Dwarf_Word kind = 0;
	const char *n;

	if (dwarf_tag(t) != DW_TAG_structure_type || !dwarf_attr(t, DW_AT_go_kind, &a) ||
	    dwarf_formudata(&a, &kind) || !(n = debuginfo_die_name(t)))
		return GO_NONE;
	if (!strcmp(n, "string"))
		return GO_STRING;
	if (!strcmp(n, "runtime.iface"))
		return GO_IFACE;
	if (!strcmp(n, "runtime.eface"))
		return GO_EFACE;
	return kind == GO_KIND_SLICE ? GO_SLICE : GO_NONE;
}

/* A slice's element type t (stripped) as a scalar uscope shows: its type,
 * size and whether it is a bool. false for the rest (structs, strings,
 * floats). */
static bool go_elem_scalar(Dwarf_Die *t, enum usc_type *ty, unsigned *size, bool *is_bool)
{
	Dwarf_Attribute a;
	Dwarf_Word enc = DW_ATE_unsigned;
	int sz = dwarf_bytesize(t), idx;

	*is_bool = false;
	if (dwarf_tag(t) == DW_TAG_pointer_type) {
		*ty = USC_T_X64;
		*size = 8;
		return true;
	}
	if (dwarf_tag(t) != DW_TAG_base_type)
		return false;
	if (dwarf_attr(t, DW_AT_encoding, &a))
		dwarf_formudata(&a, &enc);
	switch (sz) {
	case 1: idx = 0; break;
	case 2: idx = 1; break;
	case 4: idx = 2; break;
	case 8: idx = 3; break;
	default: return false;
	}
	if (enc == DW_ATE_float || enc == DW_ATE_complex_float)
		return false;
	*is_bool = enc == DW_ATE_boolean;
	*ty = (enum usc_type)((enc == DW_ATE_signed || enc == DW_ATE_signed_char ? USC_T_S8 :
			       USC_T_U8) + idx);
	*size = (unsigned)sz;
	return true;
}

/* Word k (8 bytes at 8k) of the value lv into a's program: its register
 * (a value in pieces) or a load from memory; the word is left in val. */
static void go_load(const struct debuginfo_lval *lv, unsigned k, struct usc_fetcharg *a)
{
	unsigned n = 0;
	int64_t off = lv->off + 8 * (int64_t)k;

	memset(a->insn, 0, sizeof(a->insn));
	if (lv->npieces) {
		a->insn[n++] = (struct fetch_insn){.op = FOP_REG, .reg = lv->piece_reg[k]};
	} else {
		memcpy(a->insn, lv->prog, lv->n * sizeof(lv->prog[0]));
		n = lv->n;
		if (n == 1 && a->insn[0].op == FOP_VADDR) {
			a->insn[0].imm += off;	/* @ADDR already means the memory at */
			off = 0;
		}
		a->insn[n++] = (struct fetch_insn){.op = FOP_DEREF, .imm = off};
	}
	a->ninsn = (uint8_t)n;
}

/* End a's program with st. */
static void go_store(struct usc_fetcharg *a, struct fetch_insn st)
{
	a->insn[a->ninsn++] = st;
	a->insn[a->ninsn++] = (struct fetch_insn){.op = FOP_END};
}

int go_dwarf_value(struct debuginfo_lower *c, const struct debuginfo_lval *lv, enum go_comp kind,
		   const char *name, uint8_t group_len, bool group_first, struct usc_fetcharg *out,
		   unsigned max, unsigned *n)
{
	static const char *const parts[][2] = {
		[GO_STRING] = {"len", NULL},
		[GO_SLICE] = {"cap", "len"},
		[GO_IFACE] = {"tab", "type"},
		[GO_EFACE] = {"type", NULL},
	};
	unsigned np = parts[kind][1] ? 2 : 1, words = lv->npieces;
	struct usc_fetcharg *a;

	if (lv->kind != LV_MEM && !lv->npieces)
		return debuginfo_fail(c, -EINVAL, 0, "'%s' is neither in memory nor in registers",
				      name);
	if (words && words < (kind == GO_SLICE ? 3u : 2u))
		return debuginfo_fail(c, -EINVAL, 0,
				      "'%s' is in %u registers, too few for its type", name, words);
	if (*n + np + 1 > max)
		return debuginfo_fail(c, -E2BIG, 0, "no room for '%s' (%u arguments)", name,
				      np + 1);
	for (unsigned i = 0; i <= np; i++) {
		a = &out[*n + i];
		memset(a, 0, sizeof(*a));
		if (i < np &&
		    (size_t)snprintf(a->name, sizeof(a->name), "%s__%s", name, parts[kind][i]) >=
		    sizeof(a->name))
			return debuginfo_fail(c, -ENAMETOOLONG, 0, "'%s' is too long a name", name);
		if (i == np)
			snprintf(a->name, sizeof(a->name), "%s", name);
		a->named = true;
		a->group_len = group_len;
		a->group_first = group_first && i == 0;
		a->show = i < np ? USC_SHOW_GO_PART : (uint8_t)(USC_SHOW_GO_STRING + kind - GO_STRING);
		a->type = USC_T_U64;
	}
	a = &out[*n];
	switch (kind) {
	case GO_STRING:
		go_load(lv, 1, &a[0]);
		go_store(&a[0], (struct fetch_insn){.op = FOP_ST_RAW, .size = 8});
		go_load(lv, 0, &a[1]);
		go_store(&a[1], (struct fetch_insn){.op = FOP_ST_BYTES, .size = 1,
						    .imm = USC_GO_STR_MAX});
		a[1].type = USC_T_STRING;
		a[1].go_type = "string";
		break;
	case GO_SLICE: {
		Dwarf_Die t = lv->type, mem, elem;
		int64_t moff;
		unsigned bsz, bpos, esz = 0;
		enum usc_type ety = USC_T_U8;
		bool eb = false;
		struct debuginfo_names nm = {.buf = ""};

		go_load(lv, 2, &a[0]);
		go_store(&a[0], (struct fetch_insn){.op = FOP_ST_RAW, .size = 8});
		go_load(lv, 1, &a[1]);
		go_store(&a[1], (struct fetch_insn){.op = FOP_ST_RAW, .size = 8});
		go_load(lv, 0, &a[2]);
		a[2].go_type = lv->tname ? lv->tname : debuginfo_die_name(&t);
		if (debuginfo_find_member(&t, "array", &mem, &moff, &bsz, &bpos, &nm) &&
		    debuginfo_die_type(&mem, &elem) && debuginfo_strip_type(&elem) &&
		    debuginfo_die_type(&elem, &elem) && debuginfo_strip_type(&elem) &&
		    go_elem_scalar(&elem, &ety, &esz, &eb)) {
			go_store(&a[2], (struct fetch_insn){.op = FOP_ST_BYTES, .size = (uint8_t)esz,
							    .imm = USC_GO_ELEMS * esz});
			a[2].type = USC_T_STRING;
			a[2].go_elem = (uint8_t)(1 + ety);
			a[2].go_elem_bool = eb;
		} else {	/* elements uscope does not show: the array's address */
			go_store(&a[2], (struct fetch_insn){.op = FOP_ST_RAW, .size = 8});
			a[2].type = USC_T_X64;
		}
		break;
	}
	case GO_IFACE:
		go_load(lv, 0, &a[0]);
		go_store(&a[0], (struct fetch_insn){.op = FOP_ST_RAW, .size = 8});
		a[0].type = USC_T_X64;
		/* the dynamic type: itab._type, at 8 since Go 1.4 */
		go_load(lv, 0, &a[1]);
		go_store(&a[1], (struct fetch_insn){.op = FOP_ST_MEM, .size = 8, .imm = 8});
		a[1].type = USC_T_X64;
		go_load(lv, 1, &a[2]);
		go_store(&a[2], (struct fetch_insn){.op = FOP_ST_RAW, .size = 8});
		a[2].type = USC_T_X64;
		a[2].go_type = lv->tname ? lv->tname : "interface";
		break;
	case GO_EFACE:
		go_load(lv, 0, &a[0]);
		go_store(&a[0], (struct fetch_insn){.op = FOP_ST_RAW, .size = 8});
		a[0].type = USC_T_X64;
		go_load(lv, 1, &a[1]);
		go_store(&a[1], (struct fetch_insn){.op = FOP_ST_RAW, .size = 8});
		a[1].type = USC_T_X64;
		a[1].go_type = lv->tname ? lv->tname : "interface {}";
		break;
	default:
		return -EINVAL;
	}
	out[*n + np].go_parts = (uint8_t)np;
	*n += np + 1;
	return 0;
}

bool go_dwarf_is_result(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	bool flag = false;

	return dwarf_attr(die, DW_AT_variable_parameter, &a) && !dwarf_formflag(&a, &flag) &&
	       flag;
}
