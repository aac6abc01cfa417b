/* uscope hist: a histogram of a value (a probe's last fetch argument) per
 * probe and key (its other arguments), as bpftrace's hist() and lhist(),
 * aggregated where the probe runs where the engine can: the hist sink
 * (src/sink/hist.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const char hist_usage[] =
	"usage: uscope hist [-p PID] [-d SECONDS] [-i INTERVAL] [--json]\n"
	"                   [--linear MIN,MAX,STEP] [--serve ADDR:PORT [--label K=V]...]\n"
	"                   [-e ENGINE] PROBE... [-- COMMAND [ARG...]]\n"
	"\n"
	"A histogram of each probe's last fetch argument (a number), one per distinct\n"
	"tuple of its other fetch arguments; log2 buckets by default. A probe may end\n"
	"with 'if COND' (see uscope count --help).\n"
	"\n"
	"  -p, --pid PID          in a running process\n"
	"      --no-children      -p: PID alone, not the processes it forks\n"
	"      --root DIR         system-wide: MODULE paths are files under DIR\n"
	"                         (a container's: --root /proc/PID/root)\n"
	"  -- COMMAND             in COMMAND; exit with its status (neither: system-wide)\n"
	"  -d, --duration SECS    stop after SECS seconds\n"
	"  -i, --interval SECS    also print every SECS seconds what that interval saw\n"
	"      --linear MIN,MAX,STEP  linear buckets of STEP from MIN to MAX (below and\n"
	"                         above in a bucket each)\n"
	"      --json             one JSON object per probe and key, with its buckets\n"
	"      --max-keys N       keys each engine's table holds (default 4096)\n"
	"      --strlen N         bytes of a string in a key (default 64)\n"
	"      --serve ADDR:PORT  also serve the histograms (uscope_value_bucket)\n"
	"                         at http://ADDR:PORT/metrics for Prometheus, to the end\n"
	"      --label NAME=VALUE a label every served series has (repeatable)\n"
	"  -e, --engine NAME      auto (default), inject, bpf or tracefs\n"
	"  -q, --quiet            no readiness line on stderr\n"
	"      --no-inlines       a function's out-of-line calls only\n"
	"      --all-sites        FILE:LINE: every statement of the line\n"
	"  -v, --verbose          say more on stderr (where each probe is aggregated)\n"
	"\n"
	"examples:\n"
	"  uscope hist 'libc:malloc size=$arg1:u64' -p 1234\n"
	"  uscope hist 'libc:read fd=$arg1:s32 n=$arg3:u64' --linear 0,65536,4096 -- ./app\n";

int cmd_hist(int argc, char **argv)
{
	struct cli_opts o = {0};
	int code = cli_parse_args(argc, argv, CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_INTERVAL |
				  CLI_ARG_NO_INLINES | CLI_ARG_AGG | CLI_ARG_LINEAR | CLI_ARG_SERVE,
				  "hist", hist_usage, &o);

	if (code >= 0)
		return code;
	/* -r FILE: the recorded arguments; PROBEs only choose */
	for (size_t i = 0; i < o.nspecs && !o.replay; i++) {
		const struct usc_probe_spec *sp = &o.specs[i];
		unsigned shown = probe_shown_args(sp->args, sp->nargs);
		const struct usc_fetcharg *last = shown ? &sp->args[shown - 1] : NULL;

		if (!last) {
			cli_probe_error(sp, strlen(sp->text),
					"bad probe: hist needs a value: a fetch argument after the "
					"location (the last one is the value)");
			free(o.specs);
			return 1;
		}
		if (fetch_type_is_string(last->type) || last->insn[0].op == FOP_PARAMS) {
			cli_probe_error(sp, last->pos,
					"bad probe: the last fetch argument is the histogram's "
					"value: it must be a number");
			free(o.specs);
			return 1;
		}
	}
	o.so.agg.kind = USC_AGG_HIST;
	o.so.resolve_flags |= RESOLVE_NO_DEFAULT_ARGS;
	code = cli_add_serve(&o, USC_PROM_HIST, true);
	if (code) {
		cli_drop_extra(&o);
		free(o.specs);
		return code;
	}
	return cli_run_sink(&o, stdout, usc_sink_hist(stdout, o.json), USC_SUMMARY_NONE);
}
