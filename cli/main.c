/* uscope: the command line. One file per subcommand (cmd_*.c); what they
 * share is in args.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/log.h"

static void usage(FILE *f)
{
	fputs("usage: uscope [--version] [--help] COMMAND [ARGS]\n"
	      "\n"
	      "Trace user-space programs without recompiling or restarting them.\n"
	      "\n"
	      "commands:\n"
	      "  trace   put probes on functions and print their events\n"
	      "  flow    show calls as a per-thread tree with durations\n"
	      "  count   count the hits of each probe, per key\n"
	      "  hist    a histogram of a value, per probe and key\n"
	      "  latency how long calls take, per function and key\n"
	      "  objtrace follow objects through the calls that receive them\n"
	      "  record  record every hit to a file, for -r FILE, report and export\n"
	      "  report  per function calls and times of a recording\n"
	      "  export  a recording as Chrome JSON, CTF, folded stacks or a flame graph\n"
	      "  flamegraph  a flame graph (SVG) of folded stacks or of a recording\n"
	      "  script  run a bpftrace program on user space (uprobe:, usdt:, BEGIN ...)\n"
	      "  list    list the functions that can be probed\n"
	      "\n"
	      "'uscope COMMAND --help' describes a command.\n", f);
}

int main(int argc, char **argv)
{
	/* the janitor of a uscope that died (session/janitor_exec.c) */
	if (argc >= 2 && !strcmp(argv[1], USC_JANITOR_ARG))
		return usc_janitor_main(argc - 1, argv + 1);
	usc_set_log(cli_log, NULL);
	if (getenv("USCOPE_VERBOSE"))
		cli_verbose = true;
	if (argc < 2) {
		cli_error("give a command: trace, flow, count, hist, latency, objtrace, record, "
			  "report, export, flamegraph, script or list (see uscope --help)");
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("uscope %s\n", USC_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "trace"))
		return cmd_trace(argc - 1, argv + 1);
	if (!strcmp(argv[1], "count"))
		return cmd_count(argc - 1, argv + 1);
	if (!strcmp(argv[1], "flow"))
		return cmd_flow(argc - 1, argv + 1);
	if (!strcmp(argv[1], "hist"))
		return cmd_hist(argc - 1, argv + 1);
	if (!strcmp(argv[1], "latency"))
		return cmd_latency(argc - 1, argv + 1);
	if (!strcmp(argv[1], "objtrace"))
		return cmd_objtrace(argc - 1, argv + 1);
	if (!strcmp(argv[1], "record"))
		return cmd_record(argc - 1, argv + 1);
	if (!strcmp(argv[1], "report"))
		return cmd_report(argc - 1, argv + 1);
	if (!strcmp(argv[1], "export"))
		return cmd_export(argc - 1, argv + 1);
	if (!strcmp(argv[1], "flamegraph"))
		return cmd_flamegraph(argc - 1, argv + 1);
	if (!strcmp(argv[1], "list"))
		return cmd_list(argc - 1, argv + 1);
	if (!strcmp(argv[1], "script"))
		return cmd_script(argc - 1, argv + 1);
	cli_error("unknown command '%s' (commands: trace, flow, count, hist, latency, objtrace, record, report, export, flamegraph, script, list; see uscope --help)",
		  argv[1]);
	return 2;
}
