/* uscope flow: probe entries and returns, print them as a per-thread call
 * tree with durations: the flow sink (src/sink/flow.c), after a return probe
 * is added for every function probe. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const struct cli_opt flow_own[] = {
	{'j', 0, NULL,
	 "one JSON object per entry, return or event"},
	{'o', 0, NULL,
	 "write the flow to FILE (made readable by its owner\nalone)"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd flow_cmd = {
	.name = "flow",
	.head =
	"usage: uscope flow [-p PID] [--json] [-o FILE] [-d TIME] [-e ENGINE] PROBE...\n"
	"                   [-- COMMAND [ARG...]]\n"
	"\n"
	"  Show calls as a tree, per thread, with the time each one took. Every PROBE\n"
	"  on a function (globs included) gets an entry and a return probe; USDT\n"
	"  probes pair by name (NAME*entry or *start with NAME*return, *done or\n"
	"  *end); other probes show as one-off events.\n"
	"\n"
	"  PROBE is one shell word, as for 'uscope trace': [p|r][:EVENT] LOCATION [FETCHARG ...]\n"
	"    LOCATION  [MODULE:]SYMBOL | [MODULE:]SYMBOL+OFFSET | [MODULE:]ADDRESS |\n"
	"              %PROVIDER:NAME (USDT)\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope flow 'app:*' -- ./app\n"
	"  uscope flow '%python:function__*' -p PID\n",
	.extra = CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_OUTPUT | CLI_ARG_URETPROBE |
		 CLI_ARG_LIVE,
	.own = flow_own,
};

int cmd_flow(int argc, char **argv)
{
	struct cli_opts o = {0};
	FILE *fp;
	int code = cli_parse_args(argc, argv, &flow_cmd, &o);

	if (code >= 0)
		return code;
	/* an inlined copy has no return to pair its entry with */
	o.so.resolve_flags |= RESOLVE_NO_INLINES;
	code = cli_add_returns_and_open(&o, &fp);
	if (code >= 0)
		return code;
	return cli_run_sink(&o, fp, usc_sink_flow(fp, o.json), USC_SUMMARY_PROBES);
}
