/* uscope count: hits per probe, at the end and every INTERVAL (BCC's
 * funccount). System-wide, the kernel's own hit counts (uprobe_profile) are
 * read and nothing is recorded; with a PID filter they would include other
 * processes, so events are counted instead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/session.h"
#include "output/output.h"

static const char count_usage[] =
	"usage: uscope count [-p PID] [-d SECONDS] [-i INTERVAL] [--json] [-e ENGINE] PROBE...\n"
	"                    [-- COMMAND [ARG...]]\n"
	"\n"
	"Counts the hits of each probe (a glob counts every matching function\n"
	"separately) and prints them at the end, and every INTERVAL seconds the hits\n"
	"of that interval.\n"
	"\n"
	"  -p, --pid PID          count in a running process\n"
	"  -- COMMAND             count in COMMAND; exit with its status\n"
	"                         (neither: system-wide)\n"
	"  -d, --duration SECS    stop after SECS seconds\n"
	"  -i, --interval SECS    also print every SECS seconds\n"
	"      --json             one JSON object per report\n"
	"  -e, --engine NAME      auto (default), tracefs or bpf\n"
	"  -q, --quiet            no readiness line on stderr\n"
	"      --no-inlines       count a function's out-of-line calls only, not its\n"
	"                         inlined copies\n"
	"\n"
	"example:\n"
	"  uscope count 'libc:str*' -d 5\n";

struct row {
	const char *label;
	uint64_t n;
};

struct count_ctx {
	bool json;
	size_t nlabels;
	const char **labels;	/* distinct site labels, in site order */
	uint64_t *prev;		/* totals at the previous report */
};

static size_t label_index(struct count_ctx *cc, const char *label)
{
	for (size_t i = 0; i < cc->nlabels; i++)
		if (!strcmp(cc->labels[i], label))
			return i;
	return cc->nlabels;
}

static int setup(struct count_ctx *cc, const struct usc_session *s)
{
	if (cc->labels)
		return 0;
	cc->labels = calloc(s->nsites + 1, sizeof(*cc->labels));
	cc->prev = calloc(s->nsites + 1, sizeof(*cc->prev));
	if (!cc->labels || !cc->prev)
		return -ENOMEM;
	for (size_t i = 0; i < s->nsites; i++)
		if (label_index(cc, s->sites[i].label) == cc->nlabels)
			cc->labels[cc->nlabels++] = s->sites[i].label;
	return 0;
}

static int on_event(const struct usc_event *ev, void *ctx)
{
	(void)ev;
	(void)ctx;
	return 0;	/* counted from the engine's per-site statistics */
}

static int cmp_rows(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return strcmp(x->label, y->label);
}

static void report(void *ctx, const struct usc_session *s, const struct usc_stats *st, bool final)
{
	struct count_ctx *cc = ctx;
	struct row *rows;
	uint64_t *now;

	if (setup(cc, s))
		return;
	rows = calloc(cc->nlabels + 1, sizeof(*rows));
	now = calloc(cc->nlabels + 1, sizeof(*now));
	if (!rows || !now) {
		free(rows);
		free(now);
		return;
	}
	/* the kernel's hits when it has them for this session, else events */
	for (size_t i = 0; i < s->nsites; i++) {
		size_t k = label_index(cc, s->sites[i].label);
		int64_t h = st->sites[i].hits;

		now[k] += h >= 0 ? (uint64_t)h : st->sites[i].events;
	}
	for (size_t k = 0; k < cc->nlabels; k++) {
		rows[k].label = cc->labels[k];
		rows[k].n = final ? now[k] : now[k] - cc->prev[k];
		cc->prev[k] = now[k];
	}
	qsort(rows, cc->nlabels, sizeof(*rows), cmp_rows);
	if (cc->json) {
		struct usc_output o = {.json = true};

		printf("{\"final\":%s,\"counts\":{", final ? "true" : "false");
		for (size_t k = 0; k < cc->nlabels; k++) {
			output_reset(&o);
			output_json_string(&o, rows[k].label, strlen(rows[k].label));
			printf("%s%s:%llu", k ? "," : "", o.buf, (unsigned long long)rows[k].n);
		}
		printf("}}\n");
		output_free(&o);
	} else {
		if (!final) {
			time_t t = time(NULL);
			char hms[16];

			strftime(hms, sizeof(hms), "%H:%M:%S", localtime(&t));
			printf("[%s]\n", hms);
		}
		printf("%-40s %12s\n", final ? "PROBE" : "PROBE (this interval)", "COUNT");
		for (size_t k = 0; k < cc->nlabels; k++)
			printf("%-40s %12llu\n", rows[k].label, (unsigned long long)rows[k].n);
		if (!final)
			printf("\n");
	}
	fflush(stdout);
	free(rows);
	free(now);
}

int cmd_count(int argc, char **argv)
{
	struct count_ctx cc = {0};
	struct cli_run run = {.engine = "auto", .count_only = true, .no_summary = true};
	struct cli_args a = {0};
	int exit_code = cli_parse_args(argc, argv, CLI_ARG_JSON | CLI_ARG_INTERVAL, "count",
				       count_usage, &run, &a);

	if (exit_code >= 0)
		return exit_code;
	cc.json = a.json;
	run.on_event = on_event;
	run.ctx = &cc;
	run.report = report;
	exit_code = cli_run_session(&run, a.specs, a.nspecs);
	free(cc.labels);
	free(cc.prev);
	free(a.specs);
	return exit_code;
}
