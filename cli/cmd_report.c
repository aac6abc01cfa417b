/* uscope report -r FILE: per function, from the recording's entry and
 * return pairs, calls, total and self time, min, avg and max (as uftrace
 * report), and per probe its events and losses: the report sink
 * (src/sink/report.c) fed by the recording. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const struct cli_opt report_own[] = {
	{'r', 0, NULL,
	 "the recording"},
	{'Y', 0, NULL,
	 "total (default), self or calls: heaviest first"},
	{'j', 0, NULL,
	 "one JSON object per function, then per probe"},
	{'o', 0, NULL,
	 "write the report to FILE"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd report_cmd = {
	.name = "report",
	.head =
	"usage: uscope report -r FILE [--sort total|self|calls] [--json] [-o FILE] [PROBE...]\n"
	"\n"
	"  Per function of a recording (uscope record), from its entries and returns\n"
	"  paired per thread: calls, total time, self time (less the calls it made),\n"
	"  min, avg and max; then per probe, its events and the records lost.\n"
	"  PROBEs, if given, select the recorded probes by location (globs).\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope record -o app.usc 'app:*' -- ./app && uscope report -r app.usc\n"
	"  uscope report -r app.usc --sort self --json\n",
	.extra = CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_OUTPUT | CLI_ARG_SORT | CLI_ARG_READS,
	.own = report_own,
};

int cmd_report(int argc, char **argv)
{
	struct cli_opts o = {0};
	enum usc_report_sort sort = USC_REPORT_TOTAL;
	FILE *fp;
	int code = cli_parse_args(argc, argv, &report_cmd, &o);

	if (code >= 0)
		return code;
	if (o.sort && !strcmp(o.sort, "self")) {
		sort = USC_REPORT_SELF;
	} else if (o.sort && !strcmp(o.sort, "calls")) {
		sort = USC_REPORT_CALLS;
	} else if (o.sort && strcmp(o.sort, "total")) {
		cli_usage_error("--sort wants total, self or calls, not '%s'", o.sort);
		free(o.specs);
		return 2;
	}
	/* PROBEs select functions: their returns too, as flow pairs them */
	code = cli_add_returns_and_open(&o, &fp);
	if (code >= 0)
		return code;
	/* the report says the counts and losses itself */
	return cli_run_sink(&o, fp, usc_sink_report(fp, o.json, sort), USC_SUMMARY_NONE);
}
