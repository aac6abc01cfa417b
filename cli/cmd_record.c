/* uscope record: the engines' records, unformatted, into a file that the
 * analysis commands read back with -r FILE, and report and export open:
 * the recorder sink (src/sink/record.c, format in src/record/format.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const struct cli_opt record_own[] = {
	{'o', 0, NULL,
	 "the recording (required; made readable by its owner\nalone)"},
	{'w', 0, NULL,
	 "a thread whose buffer is full waits at most TIME\n(100ms by default; us, ms, s, m suffixes) for the\nrecorder"},
	{'D', 0, NULL,
	 "a full buffer drops records (counted), as live commands\ndo: --max-wait 0"},
	{'k', 0, NULL,
	 "$ustack walked where the probe runs, its return\naddresses recorded (walk, the default), or copied\n(copy), unwound when the recording is read"},
	{'v', 0, NULL,
	 "say more on stderr; the summary lists every probe"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd record_cmd = {
	.name = "record",
	.head =
	"usage: uscope record -o FILE [-p PID] [-d TIME] [-e ENGINE] [--snapshot SIZE]\n"
	"                     [--max-wait DURATION | --drop] PROBE... [-- COMMAND [ARG...]]\n"
	"\n"
	"Records every hit of the probes to FILE, unformatted, at the probes' own speed:\n"
	"the inject engine's per-thread buffers go to the file as they are. Every\n"
	"function PROBE also gets its return probe (as flow does), so report, flow and\n"
	"latency can pair them. Nothing is lost while the recorder keeps up: a thread\n"
	"whose buffer is full waits for it, at most --max-wait a time, and only while\n"
	"the recorder makes progress; past that its records are dropped and counted\n"
	"(--drop drops them at once). Read it back with\n"
	"'uscope trace|flow|count|hist|latency -r FILE', 'uscope report -r FILE' and\n"
	"'uscope export -r FILE'.\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope record -o app.usc 'app:*' -- ./app\n"
	"  uscope record -o crash.usc --snapshot 1M 'handle*' -- ./server\n",
	.extra = CLI_ARG_OUTPUT | CLI_ARG_URETPROBE | CLI_ARG_RECORD | CLI_ARG_STACK | CLI_ARG_WAIT |
		 CLI_ARG_LIVE,
	.own = record_own,
};

int cmd_record(int argc, char **argv)
{
	struct cli_opts o = {0};
	char command[256];
	size_t used = 0;
	int code = cli_parse_args(argc, argv, &record_cmd, &o);

	if (code >= 0)
		return code;
	if (!o.outfile) {
		cli_usage_error("give -o FILE: where the recording goes");
		free(o.specs);
		return 2;
	}
	/* an inlined copy has no return to pair its entry with */
	o.so.resolve_flags |= RESOLVE_NO_INLINES;
	code = cli_add_returns_and_open(&o, NULL);
	if (code >= 0)
		return code;
	o.so.record.on = true;
	command[0] = 0;
	for (int i = 0; i < argc && used < sizeof(command); i++)
		used += (size_t)snprintf(command + used, sizeof(command) - used, "%s%s",
					 i ? " " : "uscope ", argv[i]);
	return cli_run_sink(&o, NULL, usc_sink_record(o.outfile, command),
			    USC_SUMMARY_BRIEF);
}
