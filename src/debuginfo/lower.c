/* Lowering: the object a C expression names (cexpr.c) to a fetch program
 * (src/probe/fetch.h): the store its type calls for, or a struct's
 * members one level deep; the entries debuginfo_lower_expr, debuginfo_lower_var
 * and debuginfo_params. */
#include <dwarf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "debuginfo/debuginfo_int.h"
#include "debuginfo/go.h"

static const char *tag_word(int tag)
{
	switch (tag) {
	case DW_TAG_structure_type: return "a struct";
	case DW_TAG_union_type: return "a union";
	case DW_TAG_class_type: return "a class";
	case DW_TAG_array_type: return "an array";
	case DW_TAG_pointer_type: return "a pointer";
	case DW_TAG_subroutine_type: return "a function";
	default: return "a scalar";
	}
}

/* The final store for the object lv into out. */
static int store(struct debuginfo_lower *c, struct debuginfo_lval *lv, struct usc_fetcharg *out)
{
	struct fetch_insn st = {0};
	size_t end = c->len;
	int tag, size;

	if (!lv->has_type)
		return debuginfo_fail(c, -EINVAL, 0, "'%.*s' has type void", (int)end, c->expr);
	tag = dwarf_tag(&lv->type);
	out->show = USC_SHOW_PLAIN;
	out->enums = NULL;
	out->in_place = false;
	if (debuginfo_is_aggregate(tag) || (tag == DW_TAG_array_type && lv->kind == LV_MEM)) {
		Dwarf_Die elem;

		if (tag == DW_TAG_array_type && debuginfo_die_type(&lv->type, &elem) &&
		    debuginfo_strip_type(&elem) && debuginfo_is_char(&elem)) {
			out->type = USC_T_STRING;
			out->in_place = true;
			st = (struct fetch_insn){.op = FOP_ST_STRING,
						 .imm = debuginfo_access_off(lv)};
			goto emit;
		}
		return debuginfo_fail(c, -EINVAL, 0, "'%.*s' is %s: pick a member%s", (int)end,
				      c->expr, tag_word(tag),
				      tag == DW_TAG_array_type ? " with [N]" : " with . or ->");
	}
	if (tag == DW_TAG_pointer_type) {
		Dwarf_Die to;

		if (debuginfo_die_type(&lv->type, &to) && debuginfo_strip_type(&to) &&
		    debuginfo_is_char(&to) && lv->kind != LV_CONST) {
			int ret = debuginfo_deref(c, lv, end);

			if (ret)
				return ret;
			out->type = USC_T_STRING;
			st = (struct fetch_insn){.op = FOP_ST_STRING, .imm = 0};
			goto emit;
		}
		size = 8;
		out->type = USC_T_X64;
	} else if (tag == DW_TAG_base_type || tag == DW_TAG_enumeration_type) {
		Dwarf_Attribute a;
		Dwarf_Word enc = DW_ATE_unsigned;
		int idx;

		size = dwarf_bytesize(&lv->type);
		if (tag == DW_TAG_enumeration_type) {
			Dwarf_Die under;

			enc = DW_ATE_unsigned;
			if (debuginfo_die_type(&lv->type, &under) && debuginfo_strip_type(&under) &&
			    dwarf_attr(&under, DW_AT_encoding, &a))
				dwarf_formudata(&a, &enc);
		} else if (!dwarf_attr(&lv->type, DW_AT_encoding, &a) ||
			   dwarf_formudata(&a, &enc)) {
			enc = DW_ATE_unsigned;
		}
		switch (size) {
		case 1: idx = 0; break;
		case 2: idx = 1; break;
		case 4: idx = 2; break;
		case 8: idx = 3; break;
		default:
			return debuginfo_fail(c, -EINVAL, 0,
					      "'%.*s' is %d bytes: uscope fetches 1, 2, 4 or 8",
					      (int)end, c->expr, size);
		}
		if (tag == DW_TAG_enumeration_type) {
			out->enums = debuginfo_enum_table(c->m, &lv->type);
			out->show = out->enums ? USC_SHOW_ENUM : USC_SHOW_PLAIN;
		} else if (enc == DW_ATE_boolean) {
			out->show = USC_SHOW_BOOL;
		}
		if (enc == DW_ATE_signed || enc == DW_ATE_signed_char)
			out->type = (enum usc_type)(USC_T_S8 + idx);
		else if (enc == DW_ATE_float)
			out->type = (enum usc_type)(USC_T_X8 + idx);
		else
			out->type = (enum usc_type)(USC_T_U8 + idx);
	} else {
		size = dwarf_bytesize(&lv->type);
		if (size != 8)
			return debuginfo_fail(c, -EINVAL, 0, "'%.*s' is %s uscope cannot fetch",
					      (int)end, c->expr, tag_word(tag));
		out->type = USC_T_X64;
	}
	if (lv->bit_size) {
		unsigned cbits = (unsigned)size * 8, first = lv->bit_pos / cbits * cbits;

		if (lv->kind != LV_MEM || lv->bit_pos + lv->bit_size > first + cbits)
			return debuginfo_fail(c, -EINVAL, 0,
					      "'%.*s': a bitfield uscope cannot fetch", (int)end,
					      c->expr);
		lv->off += first / 8;
		st = (struct fetch_insn){.op = FOP_ST_MEM, .size = (uint8_t)size,
					 .imm = debuginfo_access_off(lv)};
		out->type = USC_T_BITFIELD;
		lv->prog[lv->n++] = st;
		st = (struct fetch_insn){.op = FOP_MOD_BF, .size = (uint8_t)size,
					 .bf_width = (uint8_t)lv->bit_size,
					 .bf_offset = (uint8_t)(lv->bit_pos - first)};
		goto emit;
	}
	if (lv->kind == LV_REG)
		st = (struct fetch_insn){.op = FOP_ST_RAW, .size = (uint8_t)size};
	else if (lv->kind == LV_MEM)
		st = (struct fetch_insn){.op = FOP_ST_MEM, .size = (uint8_t)size,
					 .imm = debuginfo_access_off(lv)};
	else {
		lv->prog[lv->n++] = (struct fetch_insn){.op = FOP_IMM, .imm = lv->cval};
		st = (struct fetch_insn){.op = FOP_ST_RAW, .size = (uint8_t)size};
	}
emit:
	lv->prog[lv->n++] = st;
	lv->prog[lv->n++] = (struct fetch_insn){.op = FOP_END};
	memset(out->insn, 0, sizeof(out->insn));
	memcpy(out->insn, lv->prog, lv->n * sizeof(lv->prog[0]));
	out->ninsn = (uint8_t)lv->n;
	out->unavailable = false;
	return 0;
}

/* Lower expr to one value (a struct without a member is an error). */
static int lower(struct debuginfo_lower *c, Dwarf_Die *var, struct usc_fetcharg *out)
{
	struct debuginfo_lval lv;
	size_t pos0;
	int ret = debuginfo_lower_lval(c, var, &lv, &pos0);

	if (ret)
		return ret;
	ret = store(c, &lv, out);
	if (ret && c->err && c->err->pos == 0)
		c->err->pos = pos0;
	return ret;
}

/* A value that is not fetched (a nested struct or array, a variable
 * optimized out): an immediate, harmless for every engine. */
static void placeholder(struct usc_fetcharg *out, uint8_t show, bool optimized_out)
{
	memset(out->insn, 0, sizeof(out->insn));
	out->insn[0] = (struct fetch_insn){.op = FOP_IMM};
	out->insn[1] = (struct fetch_insn){.op = FOP_ST_RAW, .size = 1};
	out->insn[2] = (struct fetch_insn){.op = FOP_END};
	out->ninsn = 3;
	out->type = USC_T_U8;
	out->show = show;
	out->enums = NULL;
	out->optimized_out = optimized_out;
	out->unavailable = false;
}

/* The members of the struct or union lv, one level deep, into out[*n..max)
 * (anonymous members' members in their place), each named GROUP__MEMBER. */
static int expand(struct debuginfo_lower *c, struct debuginfo_lval *lv, const char *group,
		  struct usc_fetcharg *out, unsigned max, unsigned *n)
{
	Dwarf_Die child;

	if (dwarf_child(&lv->type, &child) != 0)
		return 0;
	do {
		struct debuginfo_lval m = *lv;
		struct usc_fetcharg *a;
		const char *mname;
		Dwarf_Word loc;
		int64_t off;
		int tag, ret;

		if (dwarf_tag(&child) != DW_TAG_member || !debuginfo_member_loc(&child, &loc))
			continue;
		m.has_type = debuginfo_die_type(&child, &m.type) && debuginfo_strip_type(&m.type);
		tag = m.has_type ? dwarf_tag(&m.type) : 0;
		mname = debuginfo_die_name(&child);
		if (!mname) {
			if (!debuginfo_is_aggregate(tag))
				continue;
			m.off += (int64_t)loc;
			ret = expand(c, &m, group, out, max, n);
			if (ret)
				return ret;
			continue;
		}
		if (*n >= max)
			return debuginfo_fail(c, -E2BIG, 0, "'%.*s' has more than %u members: "
					      "pick members with . or ->", (int)c->len, c->expr,
					      max);
		if (!debuginfo_member_geom(&child, loc, &off, &m.bit_size, &m.bit_pos))
			continue;
		m.off += off;	/* a bitfield: off 0, bit_pos from the struct's start */
		if (m.has_type && go_dwarf_comp(&m.type)) {	/* a Go string, slice, interface */
			char full[USC_NAME_MAX];

			m.tname = debuginfo_die_type(&child, &m.type) ? debuginfo_die_name(&m.type)
								      : NULL;
			m.has_type = debuginfo_die_type(&child, &m.type) &&
				     debuginfo_strip_type(&m.type);
			snprintf(full, sizeof(full), "%s__%s", group, mname);
			ret = go_dwarf_value(c, &m, go_dwarf_comp(&m.type), full,
					     (uint8_t)strlen(group), *n == 0, out, max, n);
			if (ret == -E2BIG)
				return ret;
			continue;
		}
		a = &out[*n];
		memset(a, 0, sizeof(*a));
		if ((size_t)snprintf(a->name, sizeof(a->name), "%s__%s", group, mname) >=
		    sizeof(a->name))
			return debuginfo_fail(c, -ENAMETOOLONG, 0,
					      "'%s__%s' is too long a name for a member", group,
					      mname);
		a->group_len = (uint8_t)strlen(group);
		a->group_first = *n == 0;
		a->named = true;
		if (debuginfo_is_aggregate(tag)) {
			placeholder(a, USC_SHOW_STRUCT, false);
		} else if (tag == DW_TAG_array_type) {
			Dwarf_Die elem;

			if (debuginfo_die_type(&m.type, &elem) && debuginfo_strip_type(&elem) &&
			    debuginfo_is_char(&elem)) {
				if (store(c, &m, a))
					continue;
			} else {
				placeholder(a, USC_SHOW_ARRAY, false);
			}
		} else if (store(c, &m, a)) {
			continue;	/* a member uscope cannot fetch (a long double) */
		}
		(*n)++;
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

/* Lower expr to its value, or if it names a struct or union, to its
 * members (group names them). The count, or -errno. */
static int lower_var(struct debuginfo_lower *c, Dwarf_Die *var, const char *group,
		     struct usc_fetcharg *out, unsigned max)
{
	struct debuginfo_lval lv;
	size_t pos0;
	unsigned n = 0;
	int ret = debuginfo_lower_lval(c, var, &lv, &pos0);

	if (ret == -ENODATA)
		placeholder(&out[0], USC_SHOW_PLAIN, true);
	if (ret)
		return ret;
	if (lv.has_type && go_dwarf_comp(&lv.type) && group) {
		/* a Go string, slice or interface: its parts, then itself */
		ret = go_dwarf_value(c, &lv, go_dwarf_comp(&lv.type), group, 0, false, out, max,
				     &n);
		if (ret && c->err && c->err->pos == 0)
			c->err->pos = pos0;
		return ret ? ret : (int)n;
	}
	if (lv.npieces)
		return debuginfo_fail(c, -EINVAL, pos0, "'%.*s' is in %u registers: uscope "
				      "fetches strings, slices and interfaces so", (int)c->len,
				      c->expr, lv.npieces);
	if (lv.has_type && debuginfo_is_aggregate(dwarf_tag(&lv.type))) {
		if (lv.kind != LV_MEM)
			return debuginfo_fail(c, -EINVAL, pos0, "'%.*s' is a struct outside "
					      "memory: uscope cannot read its members",
					      (int)c->len, c->expr);
		ret = expand(c, &lv, group, out, max, &n);
		if (!ret && !n)
			ret = debuginfo_fail(c, -EINVAL, pos0,
					     "'%.*s' has no member uscope can fetch", (int)c->len,
					     c->expr);
		if (ret && c->err && c->err->pos == 0)
			c->err->pos = pos0;
		return ret ? ret : (int)n;
	}
	if (!max)
		return debuginfo_fail(c, -E2BIG, pos0, "no room for '%.*s'", (int)c->len, c->expr);
	out->group_len = 0;
	out->group_first = false;
	out->optimized_out = false;
	ret = store(c, &lv, out);
	if (ret && c->err && c->err->pos == 0)
		c->err->pos = pos0;
	return ret ? ret : 1;
}

/* The scopes at pc into c (c->scopes to be freed). */
static int ctx_init(struct debuginfo_lower *c, struct debuginfo *m, uint64_t pc,
		    struct debuginfo_error *err)
{
	memset(c, 0, sizeof(*c));
	c->m = m;
	c->pc = pc;
	c->err = err;
	c->dwpc = pc;
	if (debuginfo_cu_at(m, pc, &c->cudie, &c->dwpc)) {
		c->has_cu = true;
		c->nscopes = dwarf_getscopes(&c->cudie, c->dwpc, &c->scopes);
		if (c->nscopes < 0) {
			c->nscopes = 0;
			c->scopes = NULL;
		}
	}
	return 0;
}

int debuginfo_lower_expr(struct debuginfo *m, uint64_t pc, const char *expr, size_t len,
		     struct usc_fetcharg *out, struct debuginfo_error *err)
{
	return debuginfo_lower_var(m, pc, expr, len, NULL, out, 1, err);
}

int debuginfo_lower_var(struct debuginfo *m, uint64_t pc, const char *expr, size_t len,
		    const char *group, struct usc_fetcharg *out, unsigned max,
		    struct debuginfo_error *err)
{
	struct debuginfo_lower c;
	int ret;

	if (err) {
		err->pos = 0;
		err->msg[0] = 0;
	}
	ctx_init(&c, m, pc, err);
	c.expr = expr;
	c.len = len;
	/* no group: one value, a struct without a member is an error */
	ret = group ? lower_var(&c, NULL, group, out, max) : lower(&c, NULL, out);
	free(c.scopes);
	return ret;
}

int debuginfo_params(struct debuginfo *m, uint64_t pc, struct usc_fetcharg *out, unsigned max)
{
	struct debuginfo_error err;
	struct debuginfo_lower c;
	Dwarf_Die *fn = NULL, child;
	unsigned count = 0;
	int ret = 0;
	bool go;

	ctx_init(&c, m, pc, &err);
	go = c.has_cu && dwarf_srclang(&c.cudie) == DW_LANG_Go;
	for (int i = 0; i < c.nscopes && !fn; i++) {
		int tag = dwarf_tag(&c.scopes[i]);

		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
			fn = &c.scopes[i];
	}
	if (!fn) {
		log_error("dwarf: no function with debug info at 0x%" PRIx64, pc);
		free(c.scopes);
		return -ENOENT;
	}
	if (dwarf_child(fn, &child) == 0) {
		do {
			const char *name;
			int n;

			if (dwarf_tag(&child) != DW_TAG_formal_parameter)
				continue;
			if (go && go_dwarf_is_result(&child))
				continue;
			name = debuginfo_die_name(&child);
			if (!name || strlen(name) >= USC_NAME_MAX)
				continue;
			if (count >= max) {
				log_error("dwarf: more than %u parameters at 0x%" PRIx64, max, pc);
				ret = -ENOSPC;
				break;
			}
			c.expr = name;
			c.len = strlen(name);
			memset(&out[count], 0, sizeof(out[count]));
			/* a struct by value shows as its members */
			n = lower_var(&c, &child, name, &out[count], max - count);
			if (n == -ENODATA) {
				n = 1;	/* shown as <optimized out> */
			} else if (n < 0) {
				log_warn("dwarf: parameter skipped: %s", err.msg);
				continue;
			}
			if (n == 1 && !out[count].group_len) {
				snprintf(out[count].name, sizeof(out[count].name), "%s", name);
				out[count].named = true;
			}
			count += (unsigned)n;
		} while (dwarf_siblingof(&child, &child) == 0);
	}
	free(c.scopes);
	return ret ? ret : (int)count;
}
