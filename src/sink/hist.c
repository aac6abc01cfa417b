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

static int print_hist(struct agg_sink *k, struct usc_output *o, struct agg_row **rows, size_t n,
		      bool final)
{
	int ret = 0;

	if (!k->json && !final && n)
		ret = aggsink_stamp(o);
	for (size_t i = 0; i < n && !ret; i++) {
		const struct agg_row *r = rows[i];
		const char *vn = value_name(k, r);
		const struct agg_stats *st = &r->st;
		double avg = (double)st->sum / (double)st->count;
		char line[256], head[256];

		ret = aggsink_head(k, o, r);
		if (k->json) {
			ret = ret ? ret : output_raw(o, ",\"value\":");
			ret = ret ? ret : output_json_string(o, vn, strlen(vn));
			snprintf(line, sizeof(line),
				 ",\"count\":%" PRIu64 ",\"sum\":%" PRId64 ",\"min\":%" PRId64
				 ",\"avg\":%.3f,\"max\":%" PRId64, st->count, st->sum, st->min, avg,
				 st->max);
			ret = ret ? ret : output_raw(o, line);
			ret = ret ? ret : aggsink_json_tail(k, o, r, final);
			continue;
		}
		snprintf(head, sizeof(head), ": %s\n", vn);
		snprintf(line, sizeof(line),
			 "count %" PRIu64 "  min %" PRId64 "  avg %.1f  max %" PRId64 "  sum %" PRId64
			 "\n\n", st->count, st->min, avg, st->max, st->sum);
		ret = ret ? ret : aggsink_hist_block(k, o, r, head, line);
	}
	return ret;
}


struct usc_sink *usc_sink_hist(FILE *fp, bool json)
{
	struct agg_sink *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	aggsink_init(k, &aggsink_ops, fp, json);
	k->print = print_hist;
	return &k->base;
}
