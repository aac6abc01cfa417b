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

int tracefs_lower_args(const struct usc_fetcharg *args, unsigned n, int64_t foff_delta,
		       bool ret_site, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		char one[1200];
		int ret = tracefs_lower_arg(&args[i], foff_delta, ret_site, one, sizeof(one));

		if (ret)
			return ret;
		if (used + strlen(one) + 2 > len)
			return -ENOSPC;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " " : "", one);
	}
	return 0;
}
