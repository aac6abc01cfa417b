/* The report sink (uscope report -r FILE): per function, from its entry and
 * return pairs, calls, total and self time, min, avg and max, as uftrace
 * report; then per probe, its events and losses. Pairing is src/flow's, per
 * thread. Memory is one row per function and the threads' open frames,
 * whatever the number of events: each site maps to its function's row once,
 * at begin, and an entry's frame carries a pointer to that row. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "flow/flow.h"
#include "output/output.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

struct func_row {
	const char *name;	/* the site's bytes */
	size_t namelen;
	uint64_t calls;
	uint64_t total, self;	/* ns */
	uint64_t min, max;
};

struct report_sink {
	struct usc_sink base;
	FILE *fp;
	bool json;
	enum usc_report_sort sort;
	const struct usc_sink_ctx *s;
	struct flow_state *st;
	struct func_row *rows;		/* one per function */
	size_t nrows;
	uint32_t *of_site;		/* s->nsites: the row a site's pairs go to
					 * (flow_functions), or UINT32_MAX */
	int error;
	int write_error;
};

static int by_name(const struct func_row *x, const struct func_row *y)
{
	size_t n = x->namelen < y->namelen ? x->namelen : y->namelen;
	int c = memcmp(x->name, y->name, n);

	return c ? c : (x->namelen > y->namelen) - (x->namelen < y->namelen);
}

static int report_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct report_sink *rs = container_of(k, struct report_sink, base);
	const char **keys;
	size_t *lens;
	int ret;

	rs->s = s;
	ret = flow_functions(s->sites, s->nsites, &rs->of_site, &keys, &lens, &rs->nrows);
	if (ret)
		return ret;
	rs->rows = calloc(rs->nrows ? rs->nrows : 1, sizeof(*rs->rows));
	for (size_t i = 0; rs->rows && i < rs->nrows; i++)
		rs->rows[i] = (struct func_row){.name = keys[i], .namelen = lens[i],
						.min = UINT64_MAX};
	free(keys);
	return rs->rows ? 0 : -ENOMEM;
}

/* The row of a py: probe's Python function (name: interned), made the
 * first time: its index, or -ENOMEM. */
static ssize_t py_row(struct report_sink *rs, const char *name)
{
	struct func_row *v;

	for (size_t i = 0; i < rs->nrows; i++)
		if (rs->rows[i].name == name)
			return (ssize_t)i;
	v = realloc(rs->rows, (rs->nrows + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	rs->rows = v;
	v[rs->nrows] = (struct func_row){.name = name, .namelen = strlen(name), .min = UINT64_MAX};
	return (ssize_t)rs->nrows++;
}

static int report_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct report_sink *rs = container_of(k, struct report_sink, base);
	size_t i = (size_t)(ev->site - rs->s->sites);
	struct func_row *row;
	struct flow_result r;
	const char *key;
	size_t keylen;
	bool unpaired;
	enum flow_kind kind;
	ssize_t at;
	int ret;

	if (i >= rs->s->nsites || rs->of_site[i] == UINT32_MAX)
		return 0;
	at = rs->of_site[i];
	kind = sink_flow_classify(rs->s->cache, ev, &key, &keylen, &unpaired);
	if (ev->site->python && key != ev->site->symbol && (at = py_row(rs, key)) < 0) {
		rs->error = (int)at;
		log_error("out of memory");
		return (int)at;
	}
	/* (rows grow: a frame keeps its row's index + 1) */
	ret = flow_feed_data(rs->st, flow_ctx_of(ev), ev->time_ns, kind, key, keylen,
			     (void *)(uintptr_t)(at + 1), &r);
	if (ret) {
		rs->error = ret;
		log_error("cannot pair the calls: %s", strerror(-ret));
		return ret;
	}
	if (kind != FLOW_RETURN || r.duration_ns < 0 || !r.data)
		return 0;
	row = &rs->rows[(uintptr_t)r.data - 1];
	row->calls++;
	row->total += (uint64_t)r.duration_ns;
	row->self += (uint64_t)r.self_ns;
	if ((uint64_t)r.duration_ns < row->min)
		row->min = (uint64_t)r.duration_ns;
	if ((uint64_t)r.duration_ns > row->max)
		row->max = (uint64_t)r.duration_ns;
	return 0;
}

static uint64_t sort_value(const struct func_row *r, enum usc_report_sort sort)
{
	return sort == USC_REPORT_SELF ? r->self : sort == USC_REPORT_CALLS ? r->calls : r->total;
}

/* heaviest first, then by name */
static int by_sort(const void *a, const void *b, void *ctx)
{
	const struct func_row *x = *(const struct func_row *const *)a;
	const struct func_row *y = *(const struct func_row *const *)b;
	uint64_t u = sort_value(x, *(enum usc_report_sort *)ctx);
	uint64_t v = sort_value(y, *(enum usc_report_sort *)ctx);

	if (u != v)
		return u < v ? 1 : -1;
	return by_name(x, y);
}

/* uftrace's: three significant digits and a unit */
static void fmt_time(char *buf, size_t len, uint64_t ns)
{
	if (ns >= 1000000000)
		snprintf(buf, len, "%.3f  s", (double)ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
	else if (ns >= 1000)
		snprintf(buf, len, "%.3f us", (double)ns / 1e3);
	else
		snprintf(buf, len, "%" PRIu64 " ns", ns);
}

static int put(struct report_sink *rs, struct usc_output *o)
{
	int ret = sink_write(rs->fp, o->buf, o->len, &rs->write_error);

	output_reset(o);
	return ret;
}

static int print_functions(struct report_sink *rs, struct usc_output *o)
{
	struct func_row **v = malloc((rs->nrows ? rs->nrows : 1) * sizeof(*v));
	size_t n = 0;
	char line[512];
	int ret = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < rs->nrows; i++)
		if (rs->rows[i].calls)
			v[n++] = &rs->rows[i];
	qsort_r(v, n, sizeof(*v), by_sort, &rs->sort);
	if (!rs->json) {
		snprintf(line, sizeof(line), "  %11s  %11s  %10s  %11s  %11s  %11s  %s\n"
			 "  %11s  %11s  %10s  %11s  %11s  %11s  %s\n",
			 "Total time", "Self time", "Calls", "Min", "Avg", "Max", "Function",
			 "===========", "===========", "==========", "===========", "===========",
			 "===========", "========");
		ret = output_raw(o, line);
	}
	for (size_t i = 0; i < n && !ret; i++) {
		const struct func_row *r = v[i];
		uint64_t avg = r->total / r->calls;

		if (rs->json) {
			ret = output_raw(o, "{\"function\":");
			ret = ret ? ret : output_json_string(o, r->name, r->namelen);
			snprintf(line, sizeof(line),
				 ",\"calls\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"self_ns\":%" PRIu64
				 ",\"min_ns\":%" PRIu64 ",\"avg_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64
				 OUTPUT_JSON_END, r->calls, r->total, r->self, r->min, avg, r->max);
			ret = ret ? ret : output_raw(o, line);
		} else {
			char t[4][24], mn[24];

			fmt_time(t[0], sizeof(t[0]), r->total);
			fmt_time(t[1], sizeof(t[1]), r->self);
			fmt_time(mn, sizeof(mn), r->min);
			fmt_time(t[2], sizeof(t[2]), avg);
			fmt_time(t[3], sizeof(t[3]), r->max);
			snprintf(line, sizeof(line), "  %11s  %11s  %10" PRIu64 "  %11s  %11s  %11s  %.*s\n",
				 t[0], t[1], r->calls, mn, t[2], t[3], (int)r->namelen, r->name);
			ret = output_raw(o, line);
		}
		if (!ret && o->len > 65536)
			ret = put(rs, o);
	}
	free(v);
	return ret;
}

/* A probe the user sees, as the summary says them: one the PROBEs chose
 * (all without PROBEs), not one of resolve's hidden helpers (the return
 * sites of a tail call's callee). */
static bool shown(const struct usc_sink_ctx *s, size_t i)
{
	return !s->sites[i].hidden && s->place[i].engine >= 0;
}

/* Per probe label (as the summary): events and losses. */
static int print_probes(struct report_sink *rs, struct usc_output *o, const struct usc_stats *st)
{
	const struct usc_sink_ctx *s = rs->s;
	char line[160];
	int ret = 0;

	if (!rs->json) {
		snprintf(line, sizeof(line), "\n  %12s  %10s  %s\n  %12s  %10s  %s\n", "Events", "Lost",
			 "Probe", "============", "==========", "=====");
		ret = output_raw(o, line);
	}
	for (size_t i = 0; i < s->nsites && !ret; i++) {
		uint64_t events = 0, waited = 0;
		int64_t lost = 0;
		bool first = true;

		if (!shown(s, i))
			continue;
		for (size_t j = 0; j < i && first; j++)
			first = !shown(s, j) || strcmp(s->sites[j].label, s->sites[i].label) != 0;
		if (!first)
			continue;
		for (size_t j = i; j < s->nsites; j++) {
			if (!shown(s, j) || strcmp(s->sites[j].label, s->sites[i].label))
				continue;
			events += st->sites[j].events;
			lost = lost < 0 || st->sites[j].lost < 0 ? -1 : lost + st->sites[j].lost;
			waited += st->sites[j].lost_wait;
		}
		if (rs->json) {
			ret = output_raw(o, "{\"probe\":");
			ret = ret ? ret : output_json_string(o, s->sites[i].label,
							     strlen(s->sites[i].label));
			snprintf(line, sizeof(line), ",\"events\":%" PRIu64 ",\"lost\":", events);
			ret = ret ? ret : output_raw(o, line);
			if (lost < 0)
				snprintf(line, sizeof(line), "null,\"lost_wait\":%" PRIu64 OUTPUT_JSON_END, waited);
			else
				snprintf(line, sizeof(line), "%" PRId64 ",\"lost_wait\":%" PRIu64 OUTPUT_JSON_END,
					 lost, waited);
			ret = ret ? ret : output_raw(o, line);
		} else {
			char l[24] = "?";

			if (lost >= 0)
				snprintf(l, sizeof(l), "%" PRId64, lost);
			snprintf(line, sizeof(line), "  %12" PRIu64 "  %10s  ", events, l);
			ret = output_raw(o, line);
			ret = ret ? ret : output_raw(o, s->sites[i].label);
			if (waited) {
				snprintf(line, sizeof(line), " (%" PRIu64 " of the lost found no room "
					 "within --max-wait)", waited);
				ret = ret ? ret : output_raw(o, line);
			}
			ret = ret ? ret : output_raw(o, "\n");
		}
	}
	return ret;
}

static int report_report(struct usc_sink *k, const struct usc_sink_ctx *s,
			 const struct usc_stats *st, bool final)
{
	struct report_sink *rs = container_of(k, struct report_sink, base);
	struct usc_output o = {.json = rs->json};
	int ret;

	(void)s;
	if (!final || rs->error)
		return rs->error;
	ret = print_functions(rs, &o);
	ret = ret ? ret : print_probes(rs, &o, st);
	ret = ret ? ret : put(rs, &o);
	output_free(&o);
	return ret ? ret : rs->write_error;
}

static void report_destroy(struct usc_sink *k)
{
	struct report_sink *rs = container_of(k, struct report_sink, base);

	flow_free(rs->st);
	free(rs->rows);
	free(rs->of_site);
	free(rs);
}

static const struct usc_sink_ops report_ops = {
	.begin = report_begin,
	.event = report_event,
	.report = report_report,
	.destroy = report_destroy,
};

struct usc_sink *usc_sink_report(FILE *fp, bool json, enum usc_report_sort sort)
{
	struct report_sink *rs = calloc(1, sizeof(*rs));

	if (!rs || !(rs->st = flow_new())) {
		free(rs);
		return NULL;
	}
	rs->base.ops = &report_ops;
	rs->fp = fp;
	rs->json = json;
	rs->sort = sort;
	return &rs->base;
}
