/* The latency sink (uscope latency): the time from a function's entry to
 * its return, per label and key (the entry's fetch arguments), as a log2
 * histogram with count, min, avg, max, p50 and p99 (BCC's funclatency,
 * gethostlatency); with --per-call, a line per call too. Rows are
 * aggsink.c's: aggregated where the probe runs, or paired here from
 * events per thread by src/flow's rules. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sink/aggsink.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

static const char *unit_name(uint32_t unit_ns)
{
	return unit_ns >= 1000000 ? "ms" : unit_ns >= 1000 ? "us" : "ns";
}

static int latency_words(const struct agg_sink *k, struct usc_output *o,
			 const struct agg_row *r, char *head, char *stats)
{
	const char *unit = unit_name(k->a.unit_ns);
	const struct agg_stats *st = &r->st;
	double avg = (double)st->sum / (double)st->count;
	int64_t p50 = agg_percentile(r, k->nbuckets, 50), p99 = agg_percentile(r, k->nbuckets, 99);

	if (k->json) {
		char line[320];

		snprintf(line, sizeof(line),
			 ",\"unit\":\"%s\",\"count\":%" PRIu64 ",\"min\":%" PRId64
			 ",\"avg\":%.3f,\"max\":%" PRId64 ",\"p50\":%" PRId64 ",\"p99\":%" PRId64,
			 unit, st->count, st->min, avg, st->max, p50, p99);
		return output_raw(o, line);
	}
	snprintf(head, AGGSINK_LINE, ": latency (%s)\n", unit);
	snprintf(stats, AGGSINK_LINE,
		 "count %" PRIu64 "  min %" PRId64 "  avg %.1f  max %" PRId64 "  p50 %" PRId64
		 "  p99 %" PRId64 " (%s)\n\n",
		 st->count, st->min, avg, st->max, p50, p99, unit);
	return 0;
}

/* --per-call: one line per call, as it returns. */
static int per_call(struct agg_sink *k, const struct usc_event *ev, const struct agg_row *r,
		    int64_t v)
{
	/* written with the others at the drain's end (aggsink_flush) */
	struct usc_output *o = &k->calls;
	char line[256];
	int ret;

	o->json = k->json;
	o->cache = k->s->cache;
	if (k->json) {
		snprintf(line, sizeof(line), "{\"call\":true,\"time_ns\":%" PRIu64
			 ",\"pid\":%d,\"tid\":%d,\"comm\":", ev->time_ns, ev->pid, ev->tid);
		ret = output_raw(o, line);
		ret = ret ? ret : output_json_string(o, ev->comm, strlen(ev->comm));
		ret = ret ? ret : output_raw(o, ",\"probe\":");
		ret = ret ? ret : output_json_string(o, r->label, strlen(r->label));
		ret = ret ? ret : output_raw(o, ",\"key\":");
		ret = ret ? ret : aggsink_key(k, o, r);
		snprintf(line, sizeof(line), ",\"latency\":%" PRId64 ",\"unit\":\"%s\"" OUTPUT_JSON_END, v,
			 unit_name(k->a.unit_ns));
		ret = ret ? ret : output_raw(o, line);
	} else {
		time_t t = time(NULL);
		char hms[16];

		strftime(hms, sizeof(hms), "%H:%M:%S", localtime(&t));
		snprintf(line, sizeof(line), "%-9s %-7d %-7d %-16s %10" PRId64 "  ", hms, ev->pid,
			 ev->tid, ev->comm, v);
		ret = output_raw(o, line);
		ret = ret ? ret : aggsink_head(k, o, r);
		ret = ret ? ret : output_raw(o, "\n");
	}
	if (ret)
		return ret;
	if (o->len >= 65536) {	/* a long drain: its lines so far */
		sink_write(k->fp, o->buf, o->len, &k->write_error);
		output_reset(o);
	}
	return k->write_error;
}

static int latency_begin(struct usc_sink *base, const struct usc_sink_ctx *s)
{
	struct agg_sink *k = container_of(base, struct agg_sink, base);
	int ret = aggsink_begin(base, s);

	if (!ret && k->per_call && !k->json) {
		char line[128], lat[16];

		snprintf(lat, sizeof(lat), "LAT(%s)", unit_name(k->a.unit_ns));
		snprintf(line, sizeof(line), "%-9s %-7s %-7s %-16s %10s  %s\n", "TIME", "PID", "TID",
			 "COMM", lat, "PROBE KEY");
		/* before COMMAND writes anything */
		ret = sink_write(k->fp, line, strlen(line), &k->write_error);
	}
	return ret;
}

static const struct usc_sink_ops latency_ops = {
	.begin = latency_begin,
	.event = aggsink_event,
	.agg_row = aggsink_row,
	.flush = aggsink_flush,
	.report = aggsink_report,
	.destroy = aggsink_destroy,
};

struct usc_sink *usc_sink_latency(FILE *fp, bool json, bool per_call_lines)
{
	struct agg_sink *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	aggsink_init(k, &latency_ops, fp, json);
	k->print = aggsink_print_hists;
	k->words = latency_words;
	if (per_call_lines)
		k->per_call = per_call;
	return &k->base;
}
