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

static const struct cli_opt hist_own[] = {
	{'j', 0, NULL,
	 "one JSON object per probe and key, with its buckets"},
	{'H', 0, NULL,
	 "also serve the histograms (uscope_value_bucket)\nat http://ADDR:PORT/metrics for Prometheus, to the end"},
	{'N', 0, NULL,
	 "a function's out-of-line calls only"},
	{'v', 0, NULL,
	 "say more on stderr (where each probe is aggregated)"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd hist_cmd = {
	.name = "hist",
	.head =
	"usage: uscope hist [-p PID] [-d TIME] [-i TIME] [--json]\n"
	"                   [--linear MIN,MAX,STEP] [--serve ADDR:PORT [--label K=V]...]\n"
	"                   [-e ENGINE] PROBE... [-- COMMAND [ARG...]]\n"
	"\n"
	"A histogram of each probe's last fetch argument (a number), one per distinct\n"
	"tuple of its other fetch arguments; log2 buckets by default. A probe may end\n"
	"with 'if COND' (see uscope count --help).\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope hist 'libc:malloc size=$arg1:u64' -p 1234\n"
	"  uscope hist 'libc:read fd=$arg1:s32 n=$arg3:u64' --linear 0,65536,4096 -- ./app\n",
	.extra = CLI_ARG_REPLAY | CLI_ARG_JSON | CLI_ARG_INTERVAL | CLI_ARG_NO_INLINES | CLI_ARG_AGG | CLI_ARG_LINEAR | CLI_ARG_SERVE |
		 CLI_ARG_LIVE,
	.own = hist_own,
};

int cmd_hist(int argc, char **argv)
{
	struct cli_opts o = {0};
	int code = cli_parse_args(argc, argv, &hist_cmd, &o);

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
