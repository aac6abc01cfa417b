/* --serve and --pprof: the sinks that send metrics and profiles to the
 * systems that gather them from many machines (Prometheus scrapes the
 * first, pprof's readers take the second), added to a command's own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/outfile.h"
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

int cli_add_pprof(struct cli_opts *o)
{
	struct usc_sink *k;

	if (!o->pprof)
		return 0;
	o->pprof_fp = usc_outfile_fopen(o->pprof);
	if (!o->pprof_fp) {
		cli_error("cannot write %s: %s", o->pprof, usc_outfile_strerror(errno));
		return 1;
	}
	k = usc_sink_pprof(o->pprof_fp);
	if (!k) {
		cli_error("out of memory");
		fclose(o->pprof_fp);
		o->pprof_fp = NULL;
		return 1;
	}
	o->extra[o->nextra++] = k;
	return 0;
}

void cli_drop_extra(struct cli_opts *o)
{
	for (size_t k = 0; k < o->nextra; k++)
		usc_sink_free(o->extra[k]);
	o->nextra = 0;
	if (o->pprof_fp) {
		fclose(o->pprof_fp);
		unlink(o->pprof);	/* nothing was written */
		o->pprof_fp = NULL;
	}
}

int cli_add_serve_pprof(struct cli_opts *o, enum usc_prom_kind kind, bool keyed)
{
	int code = cli_add_serve(o, kind, keyed);

	if (!code)
		code = cli_add_pprof(o);
	if (code) {
		cli_drop_extra(o);
		free(o->specs);
		o->specs = NULL;
	}
	return code;
}
