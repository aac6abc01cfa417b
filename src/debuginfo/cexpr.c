/* The C expression over a variable: [*]NAME { '->' FIELD | '.' FIELD |
 * '[' CONST ']' }, read left to right over the DWARF types, each step
 * turning the object named so far (struct debuginfo_lval: where it lives and its
 * type) into the next one; the store that ends the fetch program is
 * lower.c's. */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo_int.h"

static size_t skip_ws(const char *s, size_t p, size_t len)
{
	while (p < len && (s[p] == ' ' || s[p] == '\t'))
		p++;
	return p;
}

static size_t ident(const char *s, size_t p, size_t len)
{
	size_t q = p;

	if (q < len && (s[q] == '_' || (s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z')))
		for (q++; q < len && (s[q] == '_' || (s[q] >= 'a' && s[q] <= 'z') ||
				      (s[q] >= 'A' && s[q] <= 'Z') || (s[q] >= '0' && s[q] <= '9'));
		     q++)
			;
	return q - p;
}

#define CEXPR_NAME_MAX 256

/* The identifier at p into name (what says which, for the error:
 * "variable", "member"); *n its length. */
static int parse_name(struct debuginfo_lower *c, size_t p, const char *what,
		      char name[CEXPR_NAME_MAX], size_t *n)
{
	*n = ident(c->expr, p, c->len);
	if (!*n || *n >= CEXPR_NAME_MAX)
		return debuginfo_fail(c, -EINVAL, p, "expected a %s name", what);
	memcpy(name, c->expr + p, *n);
	name[*n] = 0;
	return 0;
}

/* The constant N of '[' N ']' whose '[' is at p: *idx, and *end the ']'. */
static int parse_index(struct debuginfo_lower *c, size_t p, unsigned long long *idx, size_t *end)
{
	const char *s = c->expr;
	size_t len = c->len, q = skip_ws(s, p + 1, len), k = 0;
	char num[32], *e;

	while (q + k < len && k + 1 < sizeof(num) && s[q + k] != ']' && s[q + k] != ' ')
		k++;
	memcpy(num, s + q, k);
	num[k] = 0;
	errno = 0;
	*idx = strtoull(num, &e, 0);
	if (!k || *e || errno || num[0] == '-')
		return debuginfo_fail(c, -EINVAL, q, "expected a constant index");
	q = skip_ws(s, q + k, len);
	if (q >= len || s[q] != ']')
		return debuginfo_fail(c, -EINVAL, q, "expected ']'");
	*end = q;
	return 0;
}

/* NAME at *p: the variable var, or if NULL the one named so at c->pc,
 * with its location and type into lv; *p past the name. */
static int lval_of_name(struct debuginfo_lower *c, Dwarf_Die *var, size_t *p,
			struct debuginfo_lval *lv)
{
	char name[CEXPR_NAME_MAX];
	Dwarf_Die vd;
	size_t n;
	int ret;

	ret = parse_name(c, *p, "variable", name, &n);
	if (ret)
		return ret;
	if (!var) {
		ret = debuginfo_find_var(c, name, &vd);
		if (ret) {
			if (c->err)
				c->err->pos = *p;
			return ret;
		}
		var = &vd;
	}
	ret = debuginfo_var_location(c, var, name, *p, lv);
	if (ret)
		return ret;
	lv->has_type = debuginfo_die_type(var, &lv->type);
	lv->tname = lv->has_type ? debuginfo_die_name(&lv->type) : NULL;
	lv->has_type = lv->has_type && debuginfo_strip_type(&lv->type);
	*p += n;
	return 0;
}

/* '[' N ']' at *p: element N of the array (in memory) or of the pointer
 * lv; *p past the ']'. */
static int step_index(struct debuginfo_lower *c, struct debuginfo_lval *lv, size_t *p)
{
	const char *s = c->expr;
	size_t op_pos = *p, q = 0;
	int tag = lv->has_type ? dwarf_tag(&lv->type) : 0, ret;
	unsigned long long idx;
	Dwarf_Die elem;
	Dwarf_Word esz;

	ret = parse_index(c, op_pos, &idx, &q);
	if (ret)
		return ret;
	if (tag == DW_TAG_pointer_type) {
		ret = debuginfo_deref(c, lv, op_pos);
		if (ret)
			return ret;
	} else if (tag == DW_TAG_array_type && lv->kind == LV_MEM) {
		lv->has_type = debuginfo_die_type(&lv->type, &elem) && debuginfo_strip_type(&elem);
		if (lv->has_type)
			lv->type = elem;
	} else {
		return debuginfo_fail(c, -EINVAL, op_pos,
				      "'%.*s' is not an array or a pointer: [] does not apply",
				      (int)op_pos, s);
	}
	if (!lv->has_type || dwarf_aggregate_size(&lv->type, &esz))
		return debuginfo_fail(c, -EINVAL, op_pos,
				      "'%.*s': cannot index, element size unknown", (int)op_pos, s);
	lv->off += (int64_t)(idx * esz);
	*p = q + 1;
	return 0;
}

/* '.' FIELD or '->' FIELD at *p: the member of the struct or union lv, or
 * of the one lv points to; *p past FIELD. */
static int step_member(struct debuginfo_lower *c, struct debuginfo_lval *lv, size_t *p)
{
	const char *s = c->expr;
	size_t len = c->len, op_pos = *p, q = *p, n;
	bool arrow = s[op_pos] == '-';
	int tag = lv->has_type ? dwarf_tag(&lv->type) : 0, ret;
	struct debuginfo_names nm = {.buf = ""};
	char name[CEXPR_NAME_MAX];
	Dwarf_Die mem;
	int64_t moff;
	unsigned bsz, bpos;

	if (arrow) {
		if (tag != DW_TAG_pointer_type)
			return debuginfo_fail(c, -EINVAL, op_pos,
					      "'%.*s' is not a pointer: use '.' instead of '->'",
					      (int)op_pos, s);
		ret = debuginfo_deref(c, lv, op_pos);
		if (ret)
			return ret;
		tag = lv->has_type ? dwarf_tag(&lv->type) : 0;
		q += 2;
	} else {
		if (tag == DW_TAG_pointer_type)
			return debuginfo_fail(c, -EINVAL, op_pos,
					      "'%.*s' is a pointer: use '->' instead of '.'",
					      (int)op_pos, s);
		q++;
	}
	if (!debuginfo_is_aggregate(tag))
		return debuginfo_fail(c, -EINVAL, op_pos, "'%.*s'%s is not a struct or union",
				      (int)op_pos, s, arrow ? " does not point to what" : "");
	if (lv->kind != LV_MEM)
		return debuginfo_fail(c, -EINVAL, op_pos,
				      "'%.*s' is a struct outside memory: uscope cannot read "
				      "its members", (int)op_pos, s);
	q = skip_ws(s, q, len);
	ret = parse_name(c, q, "member", name, &n);
	if (ret)
		return ret;
	if (!debuginfo_find_member(&lv->type, name, &mem, &moff, &bsz, &bpos, &nm))
		return debuginfo_fail(c, -ENOENT, q, "no member '%s' in '%.*s'%s%s", name,
				      (int)op_pos, s, nm.n ? "; members: " : "", nm.buf);
	lv->off += moff;
	lv->bit_size = bsz;
	lv->bit_pos = bpos;
	lv->has_type = debuginfo_die_type(&mem, &lv->type);
	lv->tname = lv->has_type ? debuginfo_die_name(&lv->type) : NULL;
	lv->has_type = lv->has_type && debuginfo_strip_type(&lv->type);
	*p = q + n;
	return 0;
}

/* The leading '*' at star_pos: the object the pointer lv points to. */
static int apply_star(struct debuginfo_lower *c, struct debuginfo_lval *lv, size_t star_pos)
{
	if (!lv->has_type || dwarf_tag(&lv->type) != DW_TAG_pointer_type)
		return debuginfo_fail(c, -EINVAL, star_pos,
				      "'%.*s' is not a pointer: '*' does not apply",
				      (int)(c->len - star_pos - 1), c->expr + star_pos + 1);
	return debuginfo_deref(c, lv, star_pos);
}

int debuginfo_lower_lval(struct debuginfo_lower *c, Dwarf_Die *var, struct debuginfo_lval *lvp,
			 size_t *pos0)
{
	const char *s = c->expr;
	size_t len = c->len, p, star_pos = 0;
	bool star = false;
	struct debuginfo_lval lv;
	int ret;

	p = skip_ws(s, 0, len);
	if (p < len && s[p] == '*') {
		star = true;
		star_pos = p;
		p = skip_ws(s, p + 1, len);
	}
	ret = lval_of_name(c, var, &p, &lv);
	if (ret)
		return ret;
	for (;;) {
		p = skip_ws(s, p, len);
		if (p >= len)
			break;
		if (lv.npieces)
			return debuginfo_fail(c, -EINVAL, p, "'%.*s' is in registers, in pieces: "
					      "uscope fetches it whole", (int)p, s);
		if (s[p] == '[')
			ret = step_index(c, &lv, &p);
		else if (s[p] == '.' || (s[p] == '-' && p + 1 < len && s[p + 1] == '>'))
			ret = step_member(c, &lv, &p);
		else
			return debuginfo_fail(c, -EINVAL, p,
					      "expected '->', '.' or '[' after '%.*s'", (int)p, s);
		if (ret)
			return ret;
	}
	if (star) {
		ret = apply_star(c, &lv, star_pos);
		if (ret)
			return ret;
	}
	*lvp = lv;
	*pos0 = star ? star_pos : skip_ws(s, 0, len);
	return 0;
}
