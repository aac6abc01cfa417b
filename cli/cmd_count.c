/* uscope count: hits per probe, at the end and every INTERVAL (BCC's
 * funccount), from the engines' own counts; per probe and key when probes
 * have fetch arguments (bpftrace's @[a, b] = count()), aggregated where
 * the probe runs where the engine can: the count sink (src/sink/count.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const char count_usage[] =
	"usage: uscope count [-p PID] [-d SECONDS] [-i INTERVAL] [--json] [--top N]\n"
	"                    [--folded] [--serve ADDR:PORT [--label K=V]...]\n"
	"                    [--pprof FILE] [-e ENGINE] PROBE... [-- COMMAND [ARG...]]\n"
	"\n"
	"Counts the hits of each probe (a glob counts every matching function\n"
	"separately) and prints them at the end, and every INTERVAL seconds the hits\n"
	"of that interval. A probe's fetch arguments are a key: each distinct tuple of\n"
	"their values is counted on its own; $ustack counts each distinct stack, the\n"
	"heaviest first, its frames under its count. A probe may end with 'if COND'.\n"
	"\n"
	"  PROBE is one shell word, as for 'uscope trace': LOCATION [FETCHARG ...] [if COND]\n"
	"    COND      NAME OP VALUE, joined by && || ! and ( ); OP is == != < <= > >= &;\n"
	"              VALUE a number or a \"string\" (with * ? [..]: a glob)\n"
	"\n"
	"  -p, --pid PID          count in a running process\n"
	"      --no-children      -p: PID alone, not the processes it forks\n"
	"      --root DIR         system-wide: MODULE paths are files under DIR\n"
	"                         (a container's: --root /proc/PID/root)\n"
	"  -- COMMAND             count in COMMAND; exit with its status\n"
	"                         (neither: system-wide)\n"
	"  -d, --duration SECS    stop after SECS seconds\n"
	"  -i, --interval SECS    also print every SECS seconds what that interval counted\n"
	"      --top N            print the N highest counts only\n"
	"      --all              a glob's functions never hit too (as rows of 0);\n"
	"                         without it, only those hit, as funccount\n"
	"      --json             one JSON object per probe and key\n"
	"      --folded           folded stacks, 'main;parse;malloc 42' a line, at the end:\n"
	"                         flamegraph.pl's input, and uscope flamegraph's\n"
	"      --stack-mode MODE  $ustack walked where the probe runs (walk, the default)\n"
	"                         or copied at each hit and unwound by uscope (copy)\n"
	"      --stack-size SIZE  bytes of stack a copied $ustack takes (default 8K)\n"
	"      --max-wait DURATION  $ustack counts every stack: a thread whose buffer is\n"
	"                         full waits at most DURATION (100ms by default; us, ms,\n"
	"                         s suffixes) for uscope, then drops and counts\n"
	"      --drop             $ustack: a full buffer drops at once (--max-wait 0)\n"
	"      --max-keys N       keys each engine's table holds (default 4096); hits of\n"
	"                         new keys beyond it are counted as lost, and said so\n"
	"      --strlen N         bytes of a string in a key (default 64); longer ones\n"
	"                         are cut, and marked [cut]\n"
	"      --serve ADDR:PORT  also serve the counts (uscope_probe_hits_total)\n"
	"                         at http://ADDR:PORT/metrics for Prometheus, to the end\n"
	"      --label NAME=VALUE a label every served series has (repeatable)\n"
	"      --pprof FILE       also write the counted stacks ($ustack) as a pprof\n"
	"                         profile (gzipped), for go tool pprof, Pyroscope, Parca\n"
	"  -e, --engine NAME      auto (default), inject, bpf or tracefs\n"
	"  -q, --quiet            no readiness line on stderr\n"
	"      --no-inlines       count a function's out-of-line calls only, not its\n"
	"                         inlined copies\n"
	"      --all-sites        FILE:LINE: every statement of the line, not its first\n"
	"                         address in each block\n"
	"  -v, --verbose          say more on stderr (where each probe is aggregated)\n"
	"\n"
	"examples:\n"
	"  uscope count 'libc:str*' -d 5\n"
	"  uscope count 'libc:openat file=+0($arg2):string' -- ./app\n"
	"  uscope count 'handle size=$arg2:u32 if size > 4096' -p 1234\n"
	"  uscope count 'libc:malloc $ustack' --folded -d 10 -p 1234 > malloc.folded\n"
	"  uscope count 'handle path=$arg1:string' --serve 127.0.0.1:9464 -p 1234\n"
	"  uscope count 'libc:malloc $ustack' --pprof malloc.pb.gz -d 10 -p 1234\n";

int cmd_count(int argc, char **argv)
{
	struct cli_opts o = {0};
	bool keyed = false;
	int code = cli_parse_args(argc, argv, CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_INTERVAL |
				  CLI_ARG_NO_INLINES | CLI_ARG_AGG | CLI_ARG_TOP | CLI_ARG_STACK |
				  CLI_ARG_FOLDED | CLI_ARG_SERVE | CLI_ARG_PPROF | CLI_ARG_WAIT | CLI_ARG_ALL,
				  "count", count_usage, &o);

	if (code >= 0)
		return code;
	/* (a py: probe is keyed by the Python function it fires for) */
	for (size_t i = 0; i < o.nspecs; i++)
		keyed |= probe_shown_args(o.specs[i].args, o.specs[i].nargs) > 0 ||
			 o.specs[i].filter.n > 0 || o.specs[i].loc_kind == USC_LOC_PYTHON;
	/* --folded -r FILE with no PROBE: the recorded probes' stacks */
	keyed |= o.folded && o.replay && !o.nspecs;
	/* without keys the engines' hit counts are the answer: no event */
	o.so.count_only = !keyed;
	o.so.agg.kind = keyed ? USC_AGG_COUNT : USC_AGG_NONE;
	o.so.resolve_flags |= RESOLVE_NO_DEFAULT_ARGS;
	if (o.folded && (o.json || !keyed)) {
		cli_error("--folded writes the probes' stacks: give a probe $ustack, and no --json");
		free(o.specs);
		return 2;
	}
	if (o.pprof && !keyed) {
		cli_error("--pprof writes the probes' stacks: give a probe $ustack");
		free(o.specs);
		return 2;
	}
	code = cli_add_serve(&o, USC_PROM_COUNT, keyed);
	if (!code)
		code = cli_add_pprof(&o);
	if (code) {
		cli_drop_extra(&o);
		free(o.specs);
		return code;
	}
	return cli_run_sink(&o, stdout, usc_sink_count(stdout, o.json, keyed, o.top, o.folded, o.all),
			    USC_SUMMARY_NONE);
}
