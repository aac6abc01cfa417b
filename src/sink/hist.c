/* The hist sink (uscope hist): a histogram of a probe's last fetch argument
 * per label and key (its other arguments), log2 by power of two as
 * bpftrace's hist(), or linear as its lhist(); with count, min, avg, max and
 * sum. Rows are aggsink.c's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sink/aggsink.h"
#include "sink/sink.h"

/* The name of a row's value: its site's last argument. */
static const char *value_name(const struct agg_sink *k, const struct agg_row *r)
{
	unsigned first, n;
	int value;

	agg_layout(&k->s->set->agg, r->site, &first, &n, &value);
	return value >= 0 ? r->site->args[value].name : "";
}

static int hist_words(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r,
		      char *head, char *stats)
{
	const char *vn = value_name(k, r);
	const struct agg_stats *st = &r->st;
	double avg = (double)st->sum / (double)st->count;

	if (k->json) {
		char line[256];
		int ret = output_raw(o, ",\"value\":");

		ret = ret ? ret : output_json_string(o, vn, strlen(vn));
		snprintf(line, sizeof(line),
			 ",\"count\":%" PRIu64 ",\"sum\":%" PRId64 ",\"min\":%" PRId64
			 ",\"avg\":%.3f,\"max\":%" PRId64, st->count, st->sum, st->min, avg,
			 st->max);
		return ret ? ret : output_raw(o, line);
	}
	snprintf(head, AGGSINK_LINE, ": %s\n", vn);
	snprintf(stats, AGGSINK_LINE,
		 "count %" PRIu64 "  min %" PRId64 "  avg %.1f  max %" PRId64 "  sum %" PRId64
		 "\n\n", st->count, st->min, avg, st->max, st->sum);
	return 0;
}

struct usc_sink *usc_sink_hist(FILE *fp, bool json)
{
	struct agg_sink *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	aggsink_init(k, &aggsink_ops, fp, json);
	k->print = aggsink_print_hists;
	k->words = hist_words;
	return &k->base;
}
