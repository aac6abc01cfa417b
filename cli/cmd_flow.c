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

static const char flow_usage[] =
	"usage: uscope flow [-p PID] [--json] [-o FILE] [-d SECONDS] [-e ENGINE] PROBE...\n"
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
	"\n"
	"  -p, --pid PID        trace a running process (all its threads)\n"
	"      --no-children    -p: PID alone, not the processes it forks\n"
	"      --root DIR       system-wide: MODULE paths are files under DIR\n"
	"                       (a container's: --root /proc/PID/root)\n"
	"  -- COMMAND           start COMMAND with the probes in place; exit with its status\n"
	"                       (neither: system-wide, for every process running the file)\n"
	"      --json           one JSON object per entry, return or event\n"
	"  -o, --output FILE    write the flow to FILE\n"
	"  -d, --duration SECS  stop after SECS seconds\n"
	"  -e, --engine NAME    auto (default), inject, bpf or tracefs\n"
	"  -q, --quiet          no readiness line or summary on stderr\n"
	"      --uretprobe      return probes swap the return address (the kernel's\n"
	"                       uretprobe) instead of probing every ret of the function;\n"
	"                       Go programs and stack walkers do not survive it\n"
	"  -v, --verbose        say more on stderr\n"
	"\n"
	"examples:\n"
	"  uscope flow 'app:*' -- ./app\n"
	"  uscope flow '%python:function__*' -p PID\n";

int cmd_flow(int argc, char **argv)
{
	struct cli_opts o = {0};
	FILE *fp;
	int code = cli_parse_args(argc, argv, CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_OUTPUT |
				  CLI_ARG_URETPROBE,
				  "flow", flow_usage, &o);

	if (code >= 0)
		return code;
	/* an inlined copy has no return to pair its entry with */
	o.so.resolve_flags |= RESOLVE_NO_INLINES;
	code = cli_add_returns_and_open(&o, &fp);
	if (code >= 0)
		return code;
	return cli_run_sink(&o, fp, usc_sink_flow(fp, o.json), USC_SUMMARY_PROBES);
}
