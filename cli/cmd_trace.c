/* uscope trace: put probes in place, print their events, clean up. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

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
	"              VAR[->FIELD|.FIELD|[N]]... | $params   (with debug info) |\n"
	"              $ustack[:N]   (the user stack, N frames, 64 by default) |\n"
	"              $retvalN | $goid   (Go)\n"
	"    TYPE      u8..u64 s8..s64 x8..x64 string ustring symbol b<width>@<offset>/<size>\n"
	"\n"
	"  -p, --pid PID        trace a running process (all its threads)\n"
	"      --no-children    -p: PID alone, not the processes it forks\n"
	"      --root DIR       system-wide: MODULE paths are files under DIR\n"
	"                       (a container's: --root /proc/PID/root)\n"
	"  -- COMMAND           start COMMAND with the probes in place; exit with its status\n"
	"                       (neither: system-wide, for every process running the file)\n"
	"      --json           one JSON object per event\n"
	"  -o, --output FILE    write events to FILE\n"
	"  -d, --duration SECS  stop after SECS seconds\n"
	"  -e, --engine NAME    auto (default: each probe on the fastest engine that can\n"
	"                       take it), inject, bpf or tracefs\n"
	"  -q, --quiet          no readiness line or summary on stderr\n"
	"      --uretprobe      return probes swap the return address (the kernel's\n"
	"                       uretprobe) instead of probing every ret of the function;\n"
	"                       Go programs and stack walkers do not survive it\n"
	"      --no-inlines     probe a function at its out-of-line entry only, not also\n"
	"                       at the copies the compiler inlined (debug info)\n"
	"      --all-sites      a FILE:LINE probe on every statement of the line, not\n"
	"                       once per execution (its first address in each block)\n"
	"      --stack-mode MODE  $ustack walked where the probe runs (walk, the default)\n"
	"                       or copied at each hit and unwound by uscope (copy)\n"
	"      --stack-size SIZE  bytes of stack a copied $ustack takes (default 8K, at\n"
	"                       most 32K): deeper stacks end with that reason\n"
	"  -v, --verbose        say more on stderr\n"
	"\n"
	"examples:\n"
	"  uscope trace 'libc:getaddrinfo host=+0($arg1):string' -- getent ahosts localhost\n"
	"  uscope trace 'r:libc:malloc ptr=$retval' -p 1234\n"
	"  uscope trace 'handle r->path r->size' '%python:gc__start' -- ./app\n"
	"  uscope trace 'libc:malloc size=$arg1 $ustack' -- ./app\n";

int cmd_trace(int argc, char **argv)
{
	struct cli_opts o = {0};
	FILE *fp;
	int code = cli_parse_args(argc, argv, CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_OUTPUT |
				  CLI_ARG_STACK |
				  CLI_ARG_URETPROBE | CLI_ARG_NO_INLINES,
				  "trace", trace_usage, &o);

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
