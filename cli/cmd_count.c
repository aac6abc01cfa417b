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

static const struct cli_opt count_own[] = {
	{'j', 0, NULL,
	 "one JSON object per probe and key"},
	{'w', 0, NULL,
	 "$ustack counts every stack: a thread whose buffer is\nfull waits at most TIME (100ms by default; us, ms,\ns, m suffixes) for uscope, then drops and counts"},
	{'D', 0, NULL,
	 "$ustack: a full buffer drops at once (--max-wait 0)"},
	{'H', 0, NULL,
	 "also serve the counts (uscope_probe_hits_total)\nat http://ADDR:PORT/metrics for Prometheus, to the end"},
	{'P', 0, NULL,
	 "also write the counted stacks ($ustack) as a pprof\nprofile (gzipped), for go tool pprof, Pyroscope, Parca"},
	{'N', 0, NULL,
	 "count a function's out-of-line calls only, not its\ninlined copies"},
	{'v', 0, NULL,
	 "say more on stderr (where each probe is aggregated)"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd count_cmd = {
	.name = "count",
	.head =
	"usage: uscope count [-p PID] [-d TIME] [-i TIME] [--json] [--top N]\n"
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
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope count 'libc:str*' -d 5\n"
	"  uscope count 'libc:openat file=+0($arg2):string' -- ./app\n"
	"  uscope count 'handle size=$arg2:u32 if size > 4096' -p 1234\n"
	"  uscope count 'libc:malloc $ustack' --folded -d 10 -p 1234 > malloc.folded\n"
	"  uscope count 'handle path=$arg1:string' --serve 127.0.0.1:9464 -p 1234\n"
	"  uscope count 'libc:malloc $ustack' --pprof malloc.pb.gz -d 10 -p 1234\n",
	.extra = CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_INTERVAL | CLI_ARG_NO_INLINES | CLI_ARG_AGG | CLI_ARG_TOP | CLI_ARG_STACK | CLI_ARG_FOLDED | CLI_ARG_SERVE | CLI_ARG_PPROF | CLI_ARG_WAIT | CLI_ARG_ALL |
		 CLI_ARG_LIVE,
	.own = count_own,
};

int cmd_count(int argc, char **argv)
{
	struct cli_opts o = {0};
	bool keyed = false;
	int code = cli_parse_args(argc, argv, &count_cmd, &o);

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
		cli_usage_error("--folded writes the probes' stacks: give a probe $ustack, and no --json");
		free(o.specs);
		return 2;
	}
	if (o.pprof && !keyed) {
		cli_usage_error("--pprof writes the probes' stacks: give a probe $ustack");
		free(o.specs);
		return 2;
	}
	code = cli_add_serve_pprof(&o, USC_PROM_COUNT, keyed);
	if (code)
		return code;
	return cli_run_sink(&o, stdout, usc_sink_count(stdout, o.json, keyed, o.top, o.folded, o.all),
			    USC_SUMMARY_NONE);
}
