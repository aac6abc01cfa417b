/* uscope trace: put probes in place, print their events, clean up. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "output/output.h"
#include "cli/session.h"

static const char trace_usage[] =
	"usage: uscope trace [-p PID] [--json] [-o FILE] [-d SECONDS] [-e ENGINE] PROBE...\n"
	"                    [-- COMMAND [ARG...]]\n"
	"\n"
	"  PROBE is one shell word: [p|r][:EVENT] LOCATION [FETCHARG ...]\n"
	"    LOCATION  [MODULE:]SYMBOL | [MODULE:]SYMBOL+OFFSET | [MODULE:]ADDRESS\n"
	"    FETCHARG  [NAME=]EXPR[:TYPE]\n"
	"    EXPR      %REG | $argN | $retval | $stackN | $stack | $comm | @ADDR |\n"
	"              @+FILE_OFFSET | +OFFS(EXPR) | -OFFS(EXPR)\n"
	"    TYPE      u8..u64 s8..s64 x8..x64 string ustring symbol b<width>@<offset>/<size>\n"
	"\n"
	"  -p, --pid PID        trace a running process (all its threads)\n"
	"  -- COMMAND           start COMMAND with the probes in place; exit with its status\n"
	"                       (neither: system-wide, for every process running the file)\n"
	"      --json           one JSON object per event\n"
	"  -o, --output FILE    write events to FILE\n"
	"  -d, --duration SECS  stop after SECS seconds\n"
	"  -e, --engine NAME    auto (default) or tracefs\n"
	"  -q, --quiet          no readiness line or summary on stderr\n"
	"      --uretprobe      return probes swap the return address (the kernel's\n"
	"                       uretprobe) instead of probing every ret of the function;\n"
	"                       Go programs and stack walkers do not survive it\n"
	"  -v, --verbose        say more on stderr\n"
	"\n"
	"examples:\n"
	"  uscope trace 'libc:getaddrinfo host=+0($arg1):string' -- getent ahosts localhost\n"
	"  uscope trace 'r:libc:malloc ptr=$retval' -p 1234\n";

struct trace_ctx {
	struct usc_output out;
	FILE *fp;
	int write_error;
};

static int on_event(const struct usc_event *ev, void *ctx)
{
	struct trace_ctx *tc = ctx;

	if (output_event(&tc->out, ev))
		return -1;
	/* flush in batches of 64 KiB; the caller flushes at the end of a drain */
	if (tc->out.len >= 65536) {
		if (fwrite(tc->out.buf, 1, tc->out.len, tc->fp) != tc->out.len)
			tc->write_error = errno ? errno : EIO;
		output_reset(&tc->out);
	}
	return 0;
}

static int flush_out(void *ctx)
{
	struct trace_ctx *tc = ctx;

	if (tc->out.len && fwrite(tc->out.buf, 1, tc->out.len, tc->fp) != tc->out.len)
		tc->write_error = errno ? errno : EIO;
	output_reset(&tc->out);
	if (fflush(tc->fp))
		tc->write_error = errno ? errno : EIO;
	if (tc->write_error && tc->write_error != EPIPE)
		cli_error("cannot write events: %s", strerror(tc->write_error));
	return tc->write_error;
}

int cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = {
		{"pid", required_argument, NULL, 'p'},
		{"json", no_argument, NULL, 'j'},
		{"output", required_argument, NULL, 'o'},
		{"duration", required_argument, NULL, 'd'},
		{"engine", required_argument, NULL, 'e'},
		{"quiet", no_argument, NULL, 'q'},
		{"uretprobe", no_argument, NULL, 'R'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct trace_ctx tc = {0};
	struct cli_run run = {.engine = "auto"};
	struct usc_probe_spec *specs = NULL;
	const char *outfile = NULL;
	pid_t pid = 0;
	char **cmd = NULL;
	int cmd_argc = 0, c, exit_code;
	size_t nspecs;

	/* COMMAND follows the first "--"; everything before it is ours */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			cmd = argv + i + 1;
			cmd_argc = argc - i - 1;
			argc = i;
			break;
		}
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "p:o:d:e:qvh", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'p':
			errno = 0;
			pid = (pid_t)strtol(optarg, &end, 10);
			if (*end || pid <= 0 || errno) {
				cli_error("-p wants a process id, not '%s'", optarg);
				return 2;
			}
			break;
		case 'j':
			tc.out.json = true;
			break;
		case 'o':
			outfile = optarg;
			break;
		case 'd':
			run.duration = strtod(optarg, &end);
			if (*end || run.duration <= 0) {
				cli_error("-d wants a positive number of seconds, not '%s'", optarg);
				return 2;
			}
			break;
		case 'e':
			run.engine = optarg;
			break;
		case 'q':
			run.quiet = true;
			break;
		case 'R':
			run.uretprobe = true;
			break;
		case 'v':
			cli_verbose = true;
			break;
		case 'h':
			fputs(trace_usage, stdout);
			return 0;
		default:
			fputs(trace_usage, stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		cli_error("trace needs at least one PROBE (see uscope trace --help)");
		return 2;
	}
	if (cmd && cmd_argc == 0) {
		cli_error("nothing after '--': give a COMMAND to run");
		return 2;
	}
	if (cmd && pid) {
		cli_error("give either -p PID or a COMMAND, not both");
		return 2;
	}
	nspecs = (size_t)(argc - optind);
	if (cli_parse_probes(argv + optind, argc - optind, &specs))
		return 1;
	tc.fp = stdout;
	if (outfile) {
		tc.fp = fopen(outfile, "w");
		if (!tc.fp) {
			cli_error("cannot write %s: %s", outfile, strerror(errno));
			free(specs);
			return 1;
		}
	}
	run.pid = pid;
	run.cmd = cmd;
	run.on_event = on_event;
	run.ctx = &tc;
	run.flush = flush_out;
	exit_code = cli_run_session(&run, specs, nspecs);
	if (tc.fp != stdout)
		fclose(tc.fp);
	output_free(&tc.out);
	free(specs);
	return exit_code;
}
