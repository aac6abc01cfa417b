/* uscope latency: the time from a function's entry to its return, per
 * function and key (the entry's fetch arguments), as BCC's funclatency and
 * gethostlatency; aggregated where the probe runs where the engine can:
 * the latency sink (src/sink/latency.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const struct cli_opt latency_own[] = {
	{'j', 0, NULL,
	 "one JSON object per function and key (and per call)"},
	{'H', 0, NULL,
	 "also serve the latencies (uscope_latency_seconds)\nat http://ADDR:PORT/metrics for Prometheus, to the end"},
	{'P', 0, NULL,
	 "also write a pprof profile (gzipped): calls and their\ntime per key's stack ($ustack), for go tool pprof"},
	{'v', 0, NULL,
	 "say more on stderr (where each probe is aggregated)"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd latency_cmd = {
	.name = "latency",
	.head =
	"usage: uscope latency [-p PID] [-d TIME] [-i TIME] [--json]\n"
	"                      [--unit ns|us|ms] [--per-call] [--serve ADDR:PORT\n"
	"                      [--label K=V]...] [--pprof FILE] [-e ENGINE] PROBE...\n"
	"                      [-- COMMAND [ARG...]]\n"
	"\n"
	"How long calls take: from each function's entry to its return (the return\n"
	"probe is added), per thread, recursion included; a log2 histogram per\n"
	"function and key (the entry probe's fetch arguments) with count, min, avg,\n"
	"max, p50 and p99 (p50 and p99 within a quarter of a power of two). USDT\n"
	"probes pair by name (NAME*entry or *start with *return, *done or *end):\n"
	"give both. A probe may end with 'if COND' (see uscope count --help).\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope latency 'libc:getaddrinfo host=+0($arg1):string' --per-call -- getent hosts x\n"
	"  uscope latency --unit us 'sqlite3_step' -p 1234\n"
	"  uscope latency 'handle' --serve 0.0.0.0:9464 --label service=api -p 1234\n",
	.extra = CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_INTERVAL | CLI_ARG_URETPROBE | CLI_ARG_AGG | CLI_ARG_LATENCY | CLI_ARG_SERVE | CLI_ARG_PPROF |
		 CLI_ARG_LIVE,
	.own = latency_own,
};

int cmd_latency(int argc, char **argv)
{
	struct cli_opts o = {0};
	int code = cli_parse_args(argc, argv, &latency_cmd, &o);

	if (code >= 0)
		return code;
	for (size_t i = 0; i < o.nspecs; i++) {
		const struct usc_probe_spec *sp = &o.specs[i];

		if (sp->loc_kind == USC_LOC_USDT || sp->loc_kind == USC_LOC_PYTHON ||
		    (sp->loc_kind == USC_LOC_SYMBOL && !sp->has_offset))
			continue;
		cli_probe_error(sp, 0, "bad probe: latency takes functions (SYMBOL, a glob) and "
				"USDT probes, not %s",
				sp->loc_kind == USC_LOC_ADDRESS ? "an address" :
				sp->loc_kind == USC_LOC_LINE ? "a line" : "SYMBOL+OFFSET");
		free(o.specs);
		return 1;
	}
	/* an inlined copy has no return to pair its entry with */
	o.so.resolve_flags |= RESOLVE_NO_INLINES | RESOLVE_NO_DEFAULT_ARGS;
	code = cli_add_returns_and_open(&o, NULL);
	if (code >= 0)
		return code;
	o.so.agg.kind = USC_AGG_LATENCY;
	if (!o.so.agg.unit_ns)
		o.so.agg.unit_ns = 1;
	code = cli_add_serve_pprof(&o, USC_PROM_LATENCY, true);
	if (code)
		return code;
	return cli_run_sink(&o, stdout, usc_sink_latency(stdout, o.json, o.so.agg.per_call),
			    USC_SUMMARY_NONE);
}
