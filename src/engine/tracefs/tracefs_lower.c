#include "engine/tracefs/tracefs_lower.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The kernel has no `symbol` type for user addresses (it would print
 * kernel symbols): symbols travel as x64 and are resolved in user space. */
int tracefs_lower_arg(const struct usc_fetcharg *arg, int64_t foff_delta, bool ret_site,
		      char *buf, size_t len)
{
	struct fetch_syntax syn = fetch_syntax_kernel;

	syn.foff_delta = foff_delta;
	syn.retval_as_ax = ret_site;
	return fetch_render(arg, &syn, buf, len);
}

/* arg lowered and appended to buf's used bytes, after a space if any. */
static int lower_append(const struct usc_fetcharg *arg, int64_t foff_delta, bool ret_site,
			char *buf, size_t len, size_t *used)
{
	char one[1200];
	int ret = tracefs_lower_arg(arg, foff_delta, ret_site, one, sizeof(one));

	if (ret)
		return ret;
	if (*used + strlen(one) + 2 > len)
		return -ENOSPC;
	*used += (size_t)snprintf(buf + *used, len - *used, "%s%s", *used ? " " : "", one);
	return 0;
}

int tracefs_lower_args(const struct usc_fetcharg *args, unsigned n, int64_t foff_delta,
		       bool ret_site, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		int ret = lower_append(&args[i], foff_delta, ret_site, buf, len, &used);

		if (ret)
			return ret;
	}
	return 0;
}

bool tracefs_string_ptr(const struct usc_fetcharg *arg, unsigned index, struct usc_fetcharg *ptr)
{
	unsigned k = 0;

	if (!fetch_type_is_string(arg->type))
		return false;
	while (k < arg->ninsn && k < USC_FETCH_MAX && arg->insn[k].op != FOP_ST_STRING)
		k++;
	/* the string at @ADDR is ADDR itself, which the kernel's syntax
	 * cannot store as a number; with an offset the pointer is not NULL */
	if (k == 0 || k + 1 >= USC_FETCH_MAX || k >= arg->ninsn || arg->insn[k].imm ||
	    arg->insn[0].op == FOP_COMM ||
	    (k == 1 && (arg->insn[0].op == FOP_MEM || arg->insn[0].op == FOP_FOFFS ||
			arg->insn[0].op == FOP_VADDR)))
		return false;
	*ptr = *arg;
	ptr->insn[k] = (struct fetch_insn){.op = FOP_ST_RAW, .size = 8};
	ptr->insn[k + 1] = (struct fetch_insn){.op = FOP_END};
	ptr->ninsn = (uint8_t)(k + 2);
	ptr->type = USC_T_X64;
	snprintf(ptr->name, sizeof(ptr->name), TRACEFS_NULL_FIELD "%u", index);
	return true;
}

int tracefs_lower_string_ptrs(const struct usc_fetcharg *args, unsigned n, int64_t foff_delta,
			      bool ret_site, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		struct usc_fetcharg ptr;
		int ret;

		if (!tracefs_string_ptr(&args[i], i, &ptr))
			continue;
		ret = lower_append(&ptr, foff_delta, ret_site, buf, len, &used);
		if (ret)
			return ret;
	}
	return 0;
}
