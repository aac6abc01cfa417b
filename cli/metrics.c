/* --serve and --pprof: the sinks that send metrics and profiles to the
 * systems that gather them from many machines (Prometheus scrapes the
 * first, pprof's readers take the second), added to a command's own. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

int cli_add_serve(struct cli_opts *o, enum usc_prom_kind kind, bool keyed)
{
	struct usc_sink *k;

	if (!o->serve)
		return 0;
	int ret = usc_sink_prom(kind, keyed, o->serve, o->labels, o->nlabels, &k);

	if (ret)	/* said why: a bad address or label (2), a port in use (1) */
		return ret == -EINVAL ? 2 : 1;
	o->extra[o->nextra++] = k;
	return 0;
}
