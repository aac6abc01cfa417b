/* The object an expression names so far (struct debuginfo_lval) and the lowering's
 * errors: the steps every pass of the lowering shares, a dereference and
 * the offset of the next access. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "debuginfo/debuginfo_int.h"

int debuginfo_fail(struct debuginfo_lower *c, int ret, size_t pos, const char *fmt, ...)
{
	va_list ap;

	if (c->err) {
		c->err->pos = pos;
		va_start(ap, fmt);
		vsnprintf(c->err->msg, sizeof(c->err->msg), fmt, ap);
		va_end(ap);
	}
	return ret;
}

int64_t debuginfo_access_off(struct debuginfo_lval *lv)
{
	int64_t off = lv->off;

	if (lv->n == 1 && lv->prog[0].op == FOP_VADDR) {
		lv->prog[0].imm += off;
		off = 0;
	}
	lv->off = 0;
	return off;
}

static int push(struct debuginfo_lower *c, struct debuginfo_lval *lv, struct fetch_insn in,
		size_t pos)
{
	/* room for this, a store, a modify and the END */
	if (lv->n + 3 >= USC_FETCH_MAX)
		return debuginfo_fail(c, -E2BIG, pos, "'%.*s' needs too many dereferences",
				      (int)pos, c->expr);
	lv->prog[lv->n++] = in;
	return 0;
}

int debuginfo_deref(struct debuginfo_lower *c, struct debuginfo_lval *lv, size_t pos)
{
	Dwarf_Die pointee;
	int ret;

	if (lv->kind == LV_MEM) {
		int64_t off = debuginfo_access_off(lv);

		ret = push(c, lv, (struct fetch_insn){.op = FOP_DEREF, .imm = off}, pos);
		if (ret)
			return ret;
	} else if (lv->kind == LV_CONST) {
		return debuginfo_fail(c, -EINVAL, pos, "'%.*s' is a constant, not in memory",
				      (int)pos, c->expr);
	}
	lv->kind = LV_MEM;
	lv->off = 0;
	lv->has_type = debuginfo_die_type(&lv->type, &pointee);
	lv->tname = lv->has_type ? debuginfo_die_name(&pointee) : NULL;
	lv->has_type = lv->has_type && debuginfo_strip_type(&pointee);
	if (lv->has_type)
		lv->type = pointee;
	return 0;
}
