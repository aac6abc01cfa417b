/* uscope trace: put probes in place, print their events, clean up. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const struct cli_opt trace_own[] = {
	{'j', 0, NULL,
	 "one JSON object per event"},
	{'o', 0, NULL,
	 "write the events to FILE (made readable by its owner\nalone)"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd trace_cmd = {
	.name = "trace",
	.head =
	"usage: uscope trace [-p PID] [--json] [-o FILE] [-d TIME] [-e ENGINE] PROBE...\n"
	"                    [-- COMMAND [ARG...]]\n"
	"\n"
	"  PROBE is one shell word: [p|r][:EVENT] LOCATION [FETCHARG ...]\n"
	"    LOCATION  [MODULE:]SYMBOL | [MODULE:]SYMBOL+OFFSET | [MODULE:]ADDRESS |\n"
	"              [MODULE:]%PROVIDER:NAME (USDT) | [MODULE:]FILE:LINE | FUNCTION:+N\n"
	"    FETCHARG  [NAME=]EXPR[:TYPE]\n"
	"    EXPR      %REG | $argN | $retval | $stackN | $stack | $comm | @ADDR |\n"
	"              @+FILE_OFFSET | +OFFS(EXPR) | -OFFS(EXPR) |\n"
	"              VAR[->FIELD|.FIELD|[N]]... | $params   (with debug info) |\n"
	"              $ustack[:N]   (the user stack, N frames, 64 by default) |\n"
	"              $retvalN | $goid   (Go)\n"
	"    TYPE      u8..u64 s8..s64 x8..x64 string ustring symbol b<width>@<offset>/<size>\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope trace 'libc:getaddrinfo host=+0($arg1):string' -- getent ahosts localhost\n"
	"  uscope trace 'r:libc:malloc ptr=$retval' -p 1234\n"
	"  uscope trace 'handle r->path r->size' '%python:gc__start' -- ./app\n"
	"  uscope trace 'libc:malloc size=$arg1 $ustack' -- ./app\n",
	.extra = CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_OUTPUT | CLI_ARG_STACK | CLI_ARG_URETPROBE | CLI_ARG_NO_INLINES |
		 CLI_ARG_LIVE,
	.own = trace_own,
};

int cmd_trace(int argc, char **argv)
{
	struct cli_opts o = {0};
	FILE *fp;
	int code = cli_parse_args(argc, argv, &trace_cmd, &o);

	if (code >= 0)
		return code;
	fp = cli_open_output(&o);
	if (!fp) {
		free(o.specs);
		return 1;
	}
	return cli_run_sink(&o, fp, o.json ? usc_sink_json(fp) : usc_sink_text(fp),
			    USC_SUMMARY_PROBES);
}
