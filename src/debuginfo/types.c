/* Types and their presentation: an enum's enumerators for output, a
 * struct's members (offsets, bitfields, anonymous members), a type's C name
 * for listings, a function's return type as a fetch program, the registers
 * of its pointer parameters, a member's offset by type name. */
#include <dwarf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo.h"
#include "debuginfo/debuginfo_int.h"

/* An enum type's enumerators, made once per type DIE for output (each on
 * its own: sites keep pointers to it); the names point into the debug info. */
struct enum_ent {
	Dwarf_Off die;
	struct usc_enum e;
	struct usc_enumerator v[];
};

const struct usc_enum *debuginfo_enum_table(struct debuginfo *m, Dwarf_Die *t)
{
	Dwarf_Off off = dwarf_dieoffset(t);
	int size = dwarf_bytesize(t);
	uint64_t mask = size > 0 && size < 8 ? (1ULL << (size * 8)) - 1 : UINT64_MAX;
	uint64_t max = 0;
	unsigned n = 0, bits = 0;
	bool zero = false, single = true;
	struct enum_ent *ent, **v;
	Dwarf_Die child;

	for (size_t i = 0; i < m->nenums; i++)
		if (m->enums[i]->die == off)
			return &m->enums[i]->e;
	if (dwarf_child(t, &child) != 0)
		return NULL;
	do
		n += dwarf_tag(&child) == DW_TAG_enumerator;
	while (dwarf_siblingof(&child, &child) == 0);
	if (!n)
		return NULL;
	v = realloc(m->enums, (m->nenums + 1) * sizeof(*v));
	if (!v)
		return NULL;
	m->enums = v;
	ent = calloc(1, sizeof(*ent) + n * sizeof(ent->v[0]));
	if (!ent)
		return NULL;
	dwarf_child(t, &child);
	do {
		Dwarf_Attribute a;
		Dwarf_Sword sv;
		const char *name = debuginfo_die_name(&child);
		uint64_t v;

		if (dwarf_tag(&child) != DW_TAG_enumerator || !name ||
		    !dwarf_attr(&child, DW_AT_const_value, &a) || dwarf_formsdata(&a, &sv))
			continue;
		v = (uint64_t)sv & mask;
		ent->v[ent->e.n++] = (struct usc_enumerator){.value = v, .name = name};
		if (!v)
			zero = true;
		else if (v & (v - 1))
			single = false;
		else
			bits++;
		if (v > max)
			max = v;
	} while (dwarf_siblingof(&child, &child) == 0);
	/* flags: single bits only, and not just the start of 0, 1, 2, ... */
	ent->e.flags = single && bits >= 2 && (!zero || max >= 4);
	ent->e.v = ent->v;
	ent->die = off;
	m->enums[m->nenums++] = ent;
	return &ent->e;
}

bool debuginfo_member_loc(Dwarf_Die *mem, Dwarf_Word *loc)
{
	Dwarf_Attribute a;

	*loc = 0;
	if (dwarf_attr(mem, DW_AT_data_member_location, &a) && dwarf_formudata(&a, loc)) {
		Dwarf_Op *ops;
		size_t nops;

		if (dwarf_getlocation(&a, &ops, &nops) || nops != 1 ||
		    ops[0].atom != DW_OP_plus_uconst)
			return false;
		*loc = ops[0].number;
	}
	return true;
}

bool debuginfo_member_geom(Dwarf_Die *mem, Dwarf_Word loc, int64_t *off, unsigned *bit_size,
			   unsigned *bit_pos)
{
	Dwarf_Attribute a;
	Dwarf_Word v;

	*off = (int64_t)loc;
	*bit_size = 0;
	*bit_pos = 0;
	if (dwarf_attr(mem, DW_AT_bit_size, &a) && !dwarf_formudata(&a, &v)) {
		*bit_size = (unsigned)v;
		if (dwarf_attr(mem, DW_AT_data_bit_offset, &a) && !dwarf_formudata(&a, &v)) {
			*bit_pos = (unsigned)v;
		} else if (dwarf_attr(mem, DW_AT_bit_offset, &a) && !dwarf_formudata(&a, &v)) {
			/* DWARF 2: counted from the storage unit's top bit */
			Dwarf_Die mt;
			int bs = debuginfo_die_type(mem, &mt) ? dwarf_bytesize(&mt) : -1;

			if (bs <= 0)
				return false;
			*bit_pos = (unsigned)(bs * 8 - (int)v - (int)*bit_size);
		}
		*bit_pos += (unsigned)loc * 8;
		*off = 0;
	}
	return true;
}

bool debuginfo_find_member(Dwarf_Die *t, const char *name, Dwarf_Die *mem, int64_t *off,
			   unsigned *bit_size, unsigned *bit_pos, struct debuginfo_names *nm)
{
	Dwarf_Die child;

	if (dwarf_child(t, &child) != 0)
		return false;
	do {
		Dwarf_Word loc;
		const char *n;

		if (dwarf_tag(&child) != DW_TAG_member || !debuginfo_member_loc(&child, &loc))
			continue;
		n = debuginfo_die_name(&child);
		if (!n) {
			Dwarf_Die sub;

			if (debuginfo_die_type(&child, &sub) && debuginfo_strip_type(&sub) &&
			    debuginfo_is_aggregate(dwarf_tag(&sub)) &&
			    debuginfo_find_member(&sub, name, mem, off, bit_size, bit_pos, nm)) {
				*off += (int64_t)loc;
				return true;
			}
			continue;
		}
		if (strcmp(n, name)) {
			if (nm)
				debuginfo_names_add(nm, n);
			continue;
		}
		*mem = child;
		return debuginfo_member_geom(&child, loc, off, bit_size, bit_pos);
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

void debuginfo_type_name(Dwarf_Die *t, bool has, char *buf, size_t len)
{
	char inner[256];
	const char *nm;
	Dwarf_Die sub;
	Dwarf_Word n;

	if (!has) {
		snprintf(buf, len, "void");
		return;
	}
	nm = debuginfo_die_name(t);
	switch (dwarf_tag(t)) {
	case DW_TAG_pointer_type:
		debuginfo_type_name(&sub, debuginfo_die_type(t, &sub), inner, sizeof(inner));
		snprintf(buf, len, "%s *", inner);
		return;
	case DW_TAG_const_type:
		debuginfo_type_name(&sub, debuginfo_die_type(t, &sub), inner, sizeof(inner));
		snprintf(buf, len, "const %s", inner);
		return;
	case DW_TAG_volatile_type:
		debuginfo_type_name(&sub, debuginfo_die_type(t, &sub), inner, sizeof(inner));
		snprintf(buf, len, "volatile %s", inner);
		return;
	case DW_TAG_array_type:
		debuginfo_type_name(&sub, debuginfo_die_type(t, &sub), inner, sizeof(inner));
		if (dwarf_child(t, &sub) == 0 && dwarf_aggregate_size(t, &n) == 0 && n)
			snprintf(buf, len, "%s[] (%llu bytes)", inner, (unsigned long long)n);
		else
			snprintf(buf, len, "%s[]", inner);
		return;
	case DW_TAG_structure_type:
		snprintf(buf, len, "struct %s", nm ? nm : "{...}");
		return;
	case DW_TAG_union_type:
		snprintf(buf, len, "union %s", nm ? nm : "{...}");
		return;
	case DW_TAG_enumeration_type:
		snprintf(buf, len, "enum %s", nm ? nm : "{...}");
		return;
	case DW_TAG_subroutine_type:
		snprintf(buf, len, "function");
		return;
	default:
		snprintf(buf, len, "%s", nm ? nm : "?");
	}
}

int debuginfo_func_rettype(struct debuginfo *m, uint64_t func_vaddr, struct usc_fetcharg *out)
{
	Dwarf_Addr dwpc;
	Dwarf_Die cu, *scopes = NULL;
	Dwarf_Die t, to;
	Dwarf_Attribute a;
	Dwarf_Word enc = DW_ATE_unsigned;
	int n, ret = -ENOENT, size, idx, tag;

	if (!debuginfo_cu_at(m, func_vaddr, &cu, &dwpc))
		return -ENOENT;
	n = dwarf_getscopes(&cu, dwpc, &scopes);
	for (int i = 0; i < n; i++) {
		if (dwarf_tag(&scopes[i]) != DW_TAG_subprogram)
			continue;
		/* no type: void */
		ret = debuginfo_die_type(&scopes[i], &t) && debuginfo_strip_type(&t) ? 0 : -ENOENT;
		break;
	}
	free(scopes);
	if (ret)
		return ret;
	memset(out->insn, 0, sizeof(out->insn));
	out->insn[0] = (struct fetch_insn){.op = FOP_RETVAL};
	out->show = USC_SHOW_PLAIN;
	out->enums = NULL;
	tag = dwarf_tag(&t);
	if (tag == DW_TAG_pointer_type) {
		if (debuginfo_die_type(&t, &to) && debuginfo_strip_type(&to) &&
		    debuginfo_is_char(&to)) {
			out->type = USC_T_STRING;
			out->insn[1] = (struct fetch_insn){.op = FOP_ST_STRING};
		} else {
			out->type = USC_T_X64;
			out->insn[1] = (struct fetch_insn){.op = FOP_ST_RAW, .size = 8};
		}
		out->insn[2] = (struct fetch_insn){.op = FOP_END};
		out->ninsn = 3;
		return 0;
	}
	if (tag != DW_TAG_base_type && tag != DW_TAG_enumeration_type)
		return -ENOTSUP;	/* a struct: not in %rax */
	size = dwarf_bytesize(&t);
	if (tag == DW_TAG_enumeration_type) {
		if (debuginfo_die_type(&t, &to) && debuginfo_strip_type(&to) &&
		    dwarf_attr(&to, DW_AT_encoding, &a))
			dwarf_formudata(&a, &enc);
	} else if (dwarf_attr(&t, DW_AT_encoding, &a)) {
		dwarf_formudata(&a, &enc);
	}
	if (enc == DW_ATE_float)
		return -ENOTSUP;	/* returned in %xmm0 */
	switch (size) {
	case 1: idx = 0; break;
	case 2: idx = 1; break;
	case 4: idx = 2; break;
	case 8: idx = 3; break;
	default: return -ENOTSUP;
	}
	out->type = (enum usc_type)((enc == DW_ATE_signed || enc == DW_ATE_signed_char ?
				     USC_T_S8 : USC_T_U8) + idx);
	out->enums = tag == DW_TAG_enumeration_type ? debuginfo_enum_table(m, &t) : NULL;
	out->show = out->enums ? USC_SHOW_ENUM : enc == DW_ATE_boolean ? USC_SHOW_BOOL :
		    USC_SHOW_PLAIN;
	out->insn[1] = (struct fetch_insn){.op = FOP_ST_RAW, .size = (uint8_t)size};
	out->insn[2] = (struct fetch_insn){.op = FOP_END};
	out->ninsn = 3;
	return 0;
}

/* A parameter of type t in the SysV ABI: 1 a pointer (or reference) in the
 * next integer register, 0 another integer of one register, 2 none (a
 * float: an SSE register), -1 anything else (a struct or union by value,
 * a 16-byte integer, a pointer to member: one register or not, unknown). */
static int param_class(Dwarf_Die *t)
{
	Dwarf_Attribute a;
	Dwarf_Word enc = DW_ATE_unsigned;
	int tag = dwarf_tag(t);

	if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type ||
	    tag == DW_TAG_rvalue_reference_type)
		return 1;
	if (tag != DW_TAG_base_type && tag != DW_TAG_enumeration_type)
		return -1;
	if (tag == DW_TAG_base_type && dwarf_attr(t, DW_AT_encoding, &a))
		dwarf_formudata(&a, &enc);
	if (enc == DW_ATE_float || enc == DW_ATE_complex_float)
		return 2;
	return dwarf_bytesize(t) > 0 && dwarf_bytesize(t) <= 8 ? 0 : -1;
}

/* The out-of-line function at func_vaddr, and whether its registers are
 * SysV's as its DWARF declares them: not Go's ABI, not a calling
 * convention the compiler changed (DW_CC_nocall), and no struct returned
 * through a hidden pointer in %rdi. */
static int func_die_sysv(struct debuginfo *m, uint64_t func_vaddr, Dwarf_Die *fn)
{
	Dwarf_Addr dwpc;
	Dwarf_Die cu, *scopes = NULL, t;
	Dwarf_Attribute a;
	Dwarf_Word cc = DW_CC_normal;
	int n, ret = -ENOENT;

	if (!debuginfo_cu_at(m, func_vaddr, &cu, &dwpc))
		return -ENOENT;
	if (dwarf_srclang(&cu) == DW_LANG_Go)
		return -ENOTSUP;
	n = dwarf_getscopes(&cu, dwpc, &scopes);
	for (int i = 0; i < n && ret == -ENOENT; i++)
		if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram) {
			*fn = scopes[i];
			ret = 0;
		}
	free(scopes);
	if (ret)
		return ret;
	if (dwarf_attr_integrate(fn, DW_AT_calling_convention, &a))
		dwarf_formudata(&a, &cc);
	if (cc != DW_CC_normal)
		return -ENOTSUP;
	if (debuginfo_die_type(fn, &t) && debuginfo_strip_type(&t) &&
	    (debuginfo_is_aggregate(dwarf_tag(&t)) || dwarf_tag(&t) == DW_TAG_array_type))
		return -ENOTSUP;	/* maybe in memory, its address in %rdi */
	return 0;
}

int debuginfo_param_ptr_regs(struct debuginfo *m, uint64_t func_vaddr, uint8_t *mask)
{
	Dwarf_Die fn, child, t;
	unsigned reg = 0;
	int ret = func_die_sysv(m, func_vaddr, &fn);

	*mask = 0;
	if (ret || dwarf_child(&fn, &child) != 0)
		return ret;
	do {
		int tag = dwarf_tag(&child), cls;

		if (tag == DW_TAG_unspecified_parameters)
			return -ENOTSUP;	/* variadic: anything after */
		if (tag != DW_TAG_formal_parameter)
			continue;
		if (!debuginfo_die_type(&child, &t) || !debuginfo_strip_type(&t))
			return -ENOTSUP;
		cls = param_class(&t);
		if (cls < 0)
			return -ENOTSUP;
		if (cls == 2)
			continue;
		if (cls == 1 && reg < 6)
			*mask |= (uint8_t)(1u << reg);
		reg++;
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

int debuginfo_struct_member_offset(struct debuginfo *m, const char *type, const char *member,
			       uint64_t *off)
{
	Dwarf_Off cu = 0, next;
	size_t hsize;

	while (dwarf_nextcu(m->dw, cu, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cud, child;

		if (dwarf_offdie(m->dw, cu + hsize, &cud) && dwarf_child(&cud, &child) == 0) {
			do {
				const char *n;
				Dwarf_Die mem;
				int64_t moff;
				unsigned bsz, bpos;
				struct debuginfo_names nm = {.buf = ""};

				if (dwarf_tag(&child) != DW_TAG_structure_type ||
				    dwarf_hasattr(&child, DW_AT_declaration) ||
				    !(n = debuginfo_die_name(&child)) || strcmp(n, type))
					continue;
				if (!debuginfo_find_member(&child, member, &mem, &moff, &bsz, &bpos,
							   &nm) || moff < 0)
					return -ENOENT;
				*off = (uint64_t)moff;
				return 0;
			} while (dwarf_siblingof(&child, &child) == 0);
		}
		cu = next;
	}
	return -ENOENT;
}
