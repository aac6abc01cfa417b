#include "engine/tracefs/tracefs_lower.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The kernel's type for ours. It has no `symbol` for user addresses (it
 * would print kernel symbols), so symbols travel as x64 and are resolved in
 * user space. */
static int lower_type(const struct usc_fetcharg *arg, char *buf, size_t len)
{
	if (arg->type == USC_T_SYMBOL)
		return snprintf(buf, len, "x64");
	if (arg->type == USC_T_BITFIELD) {
		for (unsigned i = 0; i < arg->ninsn; i++)
			if (arg->insn[i].op == FOP_MOD_BF)
				return snprintf(buf, len, "b%u@%u/%u", arg->insn[i].bf_width,
						arg->insn[i].bf_offset, arg->insn[i].size * 8u);
		return -1;
	}
	return snprintf(buf, len, "%s", fetch_type_name(arg->type));
}

int tracefs_lower_arg(const struct usc_fetcharg *arg, int64_t foff_delta, char *buf,
		      size_t len)
{
	char expr[1024], tmp[1024], type[32];
	bool absorb = false;	/* @ADDR / @+OFF already mean "the memory at" */

	expr[0] = 0;
	for (unsigned i = 0; i < arg->ninsn && arg->insn[i].op != FOP_END; i++) {
		const struct fetch_insn *f = &arg->insn[i];
		long long off = f->imm;

		switch (f->op) {
		case FOP_REG:
			snprintf(expr, sizeof(expr), "%%%s", fetch_reg_kname(f->reg));
			break;
		case FOP_STACK:
			snprintf(expr, sizeof(expr), "$stack%lld", off);
			break;
		case FOP_STACKP:
			snprintf(expr, sizeof(expr), "$stack");
			break;
		case FOP_RETVAL:
			snprintf(expr, sizeof(expr), "$retval");
			break;
		case FOP_COMM:
			snprintf(expr, sizeof(expr), "$comm");
			break;
		case FOP_IMM:
			snprintf(expr, sizeof(expr), "\\%lld", off);
			break;
		case FOP_MEM:
			snprintf(expr, sizeof(expr), "@0x%llx", (unsigned long long)off);
			absorb = true;
			break;
		case FOP_FOFFS:
			snprintf(expr, sizeof(expr), "@+0x%llx", (unsigned long long)off);
			absorb = true;
			break;
		case FOP_VADDR:
			/* the kernel resolves @+OFF against the probed file's
			 * mapping: probe address - probe offset + OFF */
			snprintf(expr, sizeof(expr), "@+0x%llx",
				 (unsigned long long)(off + foff_delta));
			absorb = true;
			break;
		case FOP_ADD_REG:
		case FOP_ARG:
			return -ENOTSUP;
		case FOP_DEREF:
		case FOP_ST_MEM:
		case FOP_ST_STRING:
			if (absorb && off == 0) {
				absorb = false;
				break;
			}
			absorb = false;
			if (snprintf(tmp, sizeof(tmp), "%c%lld(%s)", off < 0 ? '-' : '+',
				     off < 0 ? -off : off, expr) >= (int)sizeof(tmp))
				return -ENOSPC;
			memcpy(expr, tmp, sizeof(expr));
			break;
		default:
			break;
		}
	}
	if (lower_type(arg, type, sizeof(type)) < 0)
		return -EINVAL;
	if (snprintf(buf, len, "%s=%s:%s", arg->name, expr, type) >= (int)len)
		return -ENOSPC;
	return 0;
}

int tracefs_lower_args(const struct usc_fetcharg *args, unsigned n, int64_t foff_delta,
		       char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		char one[1200];
		int ret = tracefs_lower_arg(&args[i], foff_delta, one, sizeof(one));

		if (ret)
			return ret;
		if (used + strlen(one) + 2 > len)
			return -ENOSPC;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " " : "", one);
	}
	return 0;
}
