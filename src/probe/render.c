/* Fetch programs back to text: one walk of the program for every syntax
 * that writes it (the probe language, the kernel's uprobe_events), so the
 * two cannot drift apart. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "probe/probe.h"

const struct fetch_syntax fetch_syntax_probe = {
	.reg_name = fetch_reg_name64,
	.imm_prefix = "",
	.has_arg = true,
};

const struct fetch_syntax fetch_syntax_kernel = {
	.reg_name = fetch_reg_kname,
	.imm_prefix = "\\",
	.has_vaddr = true,
	.symbol_as_x64 = true,
};

static int render_type(const struct usc_fetcharg *arg, const struct fetch_syntax *syn,
		       char *buf, size_t len)
{
	for (unsigned i = 0; i < arg->ninsn; i++)
		if (arg->insn[i].op == FOP_ST_BYTES && arg->insn[i].size)
			/* counted bytes (a Go string's, a Go slice's first
			 * elements): an array, the kernel's TYPE[N], that the
			 * tracer cuts to the length */
			return snprintf(buf, len, "%s[%u]",
					fetch_type_name(arg->go_elem ? arg->go_elem - 1 : USC_T_U8),
					(unsigned)(arg->insn[i].imm / arg->insn[i].size)) < (int)len ?
				       0 : -ENOSPC;
	if (arg->type == USC_T_SYMBOL && syn->symbol_as_x64)
		return snprintf(buf, len, "x64") < (int)len ? 0 : -ENOSPC;
	if (arg->type == USC_T_BITFIELD) {
		for (unsigned i = 0; i < arg->ninsn; i++)
			if (arg->insn[i].op == FOP_MOD_BF)
				return snprintf(buf, len, "b%u@%u/%u", arg->insn[i].bf_width,
						arg->insn[i].bf_offset,
						arg->insn[i].size * 8u) < (int)len ? 0 : -ENOSPC;
		return -EINVAL;		/* a bitfield type without its geometry */
	}
	return snprintf(buf, len, "%s", fetch_type_name(arg->type)) < (int)len ? 0 : -ENOSPC;
}

int fetch_render(const struct usc_fetcharg *arg, const struct fetch_syntax *syn, char *buf,
		 size_t len)
{
	char expr[1024] = "", tmp[1024], type[32];
	bool absorb = false;	/* @ADDR / @+OFF already mean "the memory at" */
	int ret;

	if (arg->ninsn && arg->insn[0].op == FOP_USTACK) {
		/* the kernel's uprobe_events have no stack argument (its user
		 * stack trace is an option of the whole trace, and walks frame
		 * pointers) */
		if (!syn->has_arg)
			return -ENOTSUP;
		return snprintf(buf, len, "%s=$ustack:%u", arg->name,
				fetch_stack_frames(arg->insn[0].imm)) < (int)len ? 0 : -ENOSPC;
	}
	if (arg->ninsn && arg->insn[0].op == FOP_PYSTACK) {
		/* walked in the process: no kernel fetch argument says it */
		if (!syn->has_arg)
			return -ENOTSUP;
		return snprintf(buf, len, "%s=$pystack:%u", arg->name,
				(unsigned)arg->insn[0].imm) < (int)len ? 0 : -ENOSPC;
	}

	for (unsigned i = 0; i < arg->ninsn && arg->insn[i].op != FOP_END; i++) {
		const struct fetch_insn *f = &arg->insn[i];
		long long off = f->imm;

		switch (f->op) {
		case FOP_REG:
			snprintf(expr, sizeof(expr), "%%%s", syn->reg_name(f->reg));
			break;
		case FOP_STACK:
			snprintf(expr, sizeof(expr), "$stack%lld", off);
			break;
		case FOP_STACKP:
			snprintf(expr, sizeof(expr), "$stack");
			break;
		case FOP_RETVAL:
			if (off >= 2)	/* unbound: a Go result word */
				snprintf(expr, sizeof(expr), "$retval%lld", off);
			else if (syn->retval_as_ax)
				snprintf(expr, sizeof(expr), "%%%s", syn->reg_name(USC_REG_AX));
			else
				snprintf(expr, sizeof(expr), "$retval");
			break;
		case FOP_GOID:		/* unbound */
			if (!syn->has_arg)
				return -ENOTSUP;
			snprintf(expr, sizeof(expr), "$goid");
			break;
		case FOP_COMM:
			snprintf(expr, sizeof(expr), "$comm");
			break;
		case FOP_PID:
		case FOP_TID:
		case FOP_CPU:
			/* the kernel's events carry them in their header (the tracefs
			 * engine fills them in): a placeholder for the field */
			if (syn->imm_prefix[0])
				snprintf(expr, sizeof(expr), "%s0", syn->imm_prefix);
			else
				snprintf(expr, sizeof(expr), "$%s", f->op == FOP_PID ? "pid" :
					 f->op == FOP_TID ? "tid" : "cpu");
			break;
		case FOP_IMM:
			snprintf(expr, sizeof(expr), "%s%lld", syn->imm_prefix, off);
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
			if (!syn->has_vaddr)
				return -ENOTSUP;
			snprintf(expr, sizeof(expr), "@+0x%llx",
				 (unsigned long long)(off + syn->foff_delta));
			absorb = true;
			break;
		case FOP_ARG:
			if (!syn->has_arg)
				return -ENOTSUP;	/* unbound */
			snprintf(expr, sizeof(expr), "$arg%lld", off);
			break;
		case FOP_VAR:		/* unbound: where the C expression stands */
			if (!syn->has_arg)
				return -ENOTSUP;
			snprintf(expr, sizeof(expr), "$var@%lld:%lld", off & 0xffffffff, off >> 32);
			break;
		case FOP_PARAMS:
			if (!syn->has_arg)
				return -ENOTSUP;
			snprintf(expr, sizeof(expr), "$params");
			break;
		case FOP_ADD_REG:
			return -ENOTSUP;	/* neither syntax adds two registers */
		case FOP_ST_BYTES:	/* counted bytes at val: the memory at +0 */
			off = 0;
			/* fall through */
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
	ret = render_type(arg, syn, type, sizeof(type));
	if (ret)
		return ret;
	return snprintf(buf, len, "%s=%s:%s", arg->name, expr, type) < (int)len ? 0 : -ENOSPC;
}
