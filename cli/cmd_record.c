/* uscope record: the engines' records, unformatted, into a file that the
 * analysis commands read back with -r FILE, and report and export open:
 * the recorder sink (src/sink/record.c, format in src/record/format.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const char record_usage[] =
	"usage: uscope record -o FILE [-p PID] [-d SECONDS] [-e ENGINE] [--snapshot SIZE]\n"
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
	"\n"
	"  -o, --output FILE      the recording (required)\n"
	"  -p, --pid PID          record a running process\n"
	"      --no-children      -p: PID alone, not the processes it forks\n"
	"      --root DIR         system-wide: MODULE paths are files under DIR\n"
	"                         (a container's: --root /proc/PID/root)\n"
	"  -- COMMAND             record COMMAND (its forks and execs too); exit with its status\n"
	"                         (neither: system-wide)\n"
	"  -d, --duration SECS    stop after SECS seconds\n"
	"  -e, --engine NAME      auto (default), inject, bpf or tracefs\n"
	"      --snapshot SIZE    the flight recorder: keep the last SIZE bytes of records a\n"
	"                         thread (K, M suffixes) in memory, written at the end, on\n"
	"                         SIGUSR1 and when COMMAND dies by a signal\n"
	"      --max-wait DURATION  a thread whose buffer is full waits at most DURATION\n"
	"                         (100ms by default; us, ms, s suffixes) for the recorder\n"
	"      --drop             a full buffer drops records (counted), as live commands\n"
	"                         do: --max-wait 0\n"
	"      --stack-mode MODE  $ustack walked where the probe runs, its return\n"
	"                         addresses recorded (walk, the default), or copied\n"
	"                         (copy), unwound when the recording is read\n"
	"      --stack-size SIZE  bytes of stack a copied $ustack takes (default 8K)\n"
	"      --uretprobe        return probes swap the return address (tracefs)\n"
	"  -q, --quiet            no readiness line or summary on stderr\n"
	"  -v, --verbose          say more on stderr; the summary lists every probe\n"
	"\n"
	"examples:\n"
	"  uscope record -o app.usc 'app:*' -- ./app\n"
	"  uscope record -o crash.usc --snapshot 1M 'handle*' -- ./server\n";

int cmd_record(int argc, char **argv)
{
	struct cli_opts o = {0};
	char command[256];
	size_t used = 0;
	int code = cli_parse_args(argc, argv, CLI_ARG_OUTPUT | CLI_ARG_URETPROBE | CLI_ARG_RECORD |
				  CLI_ARG_STACK | CLI_ARG_WAIT,
				  "record", record_usage, &o);

	if (code >= 0)
		return code;
	if (!o.outfile) {
		cli_error("record needs -o FILE: where the recording goes");
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
