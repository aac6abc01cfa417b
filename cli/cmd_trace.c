/* uscope trace: put probes in place, print their events, clean up. */
#include <errno.h>
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
	"    LOCATION  [MODULE:]SYMBOL | [MODULE:]SYMBOL+OFFSET | [MODULE:]ADDRESS |\n"
	"              [MODULE:]%PROVIDER:NAME (USDT) | [MODULE:]FILE:LINE | FUNCTION:+N\n"
	"    FETCHARG  [NAME=]EXPR[:TYPE]\n"
	"    EXPR      %REG | $argN | $retval | $stackN | $stack | $comm | @ADDR |\n"
	"              @+FILE_OFFSET | +OFFS(EXPR) | -OFFS(EXPR) |\n"
	"              VAR[->FIELD|.FIELD|[N]]... | $params   (with debug info)\n"
	"    TYPE      u8..u64 s8..s64 x8..x64 string ustring symbol b<width>@<offset>/<size>\n"
	"\n"
	"  -p, --pid PID        trace a running process (all its threads)\n"
	"  -- COMMAND           start COMMAND with the probes in place; exit with its status\n"
	"                       (neither: system-wide, for every process running the file)\n"
	"      --json           one JSON object per event\n"
	"  -o, --output FILE    write events to FILE\n"
	"  -d, --duration SECS  stop after SECS seconds\n"
	"  -e, --engine NAME    auto (default), tracefs or bpf\n"
	"  -q, --quiet          no readiness line or summary on stderr\n"
	"      --uretprobe      return probes swap the return address (the kernel's\n"
	"                       uretprobe) instead of probing every ret of the function;\n"
	"                       Go programs and stack walkers do not survive it\n"
	"      --no-inlines     probe a function at its out-of-line entry only, not also\n"
	"                       at the copies the compiler inlined (debug info)\n"
	"  -v, --verbose        say more on stderr\n"
	"\n"
	"examples:\n"
	"  uscope trace 'libc:getaddrinfo host=+0($arg1):string' -- getent ahosts localhost\n"
	"  uscope trace 'r:libc:malloc ptr=$retval' -p 1234\n"
	"  uscope trace 'handle r->path r->size' '%python:gc__start' -- ./app\n";

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
	struct trace_ctx tc = {0};
	struct cli_run run = {.engine = "auto"};
	struct cli_args a = {0};
	int exit_code = cli_parse_args(argc, argv, CLI_ARG_JSON | CLI_ARG_OUTPUT | CLI_ARG_URETPROBE,
				       "trace", trace_usage, &run, &a);

	if (exit_code >= 0)
		return exit_code;
	tc.out.json = a.json;
	tc.fp = stdout;
	if (a.outfile) {
		tc.fp = fopen(a.outfile, "w");
		if (!tc.fp) {
			cli_error("cannot write %s: %s", a.outfile, strerror(errno));
			free(a.specs);
			return 1;
		}
	}
	run.on_event = on_event;
	run.ctx = &tc;
	run.flush = flush_out;
	exit_code = cli_run_session(&run, a.specs, a.nspecs);
	if (tc.fp != stdout && fclose(tc.fp) && !exit_code) {
		cli_error("cannot write %s: %s", a.outfile, strerror(errno));
		exit_code = 1;
	}
	output_free(&tc.out);
	free(a.specs);
	return exit_code;
}
