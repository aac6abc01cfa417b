/* The count sink: hits per probe label (each function of a glob on its
 * own), at the end and every interval the hits of that interval, as BCC's
 * funccount (which lists a glob's functions that were hit: so does this,
 * unless all; a probe that is no glob always has its row); with keys (a probe's fetch arguments, or a filter), hits per
 * label and key, as a bpftrace map @[a, b] = count().
 *
 * Without keys the counts are the engines' own (struct usc_site_stats.hits,
 * or the events delivered where an engine has no hit count for this
 * session): counting needs no event. With keys they are rows
 * (aggsink.c): aggregated where the probe runs, or from events. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "output/output.h"
#include "sink/aggsink.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

struct row {
	const char *label;
	uint64_t n;
};

struct count_sink {
	struct usc_sink base;
	FILE *fp;
	bool json;
	size_t nlabels;
	const char **labels;	/* distinct labels, in site order */
	size_t *label_of;	/* per site */
	uint64_t *prev;		/* totals at the previous report */
	bool *of_glob;		/* per label: only a glob's functions have it */
	size_t top;		/* --top: the first rows only */
	bool all;		/* --all: a glob's functions never hit too */
	int write_error;
};

static int count_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct count_sink *cs = container_of(k, struct count_sink, base);

	cs->labels = calloc(s->nsites + 1, sizeof(*cs->labels));
	cs->label_of = calloc(s->nsites + 1, sizeof(*cs->label_of));
	cs->prev = calloc(s->nsites + 1, sizeof(*cs->prev));
	cs->of_glob = calloc(s->nsites + 1, sizeof(*cs->of_glob));
	if (!cs->labels || !cs->label_of || !cs->prev || !cs->of_glob) {
		log_error("out of memory");
		return -ENOMEM;
	}
	cs->nlabels = aggsink_labels(s, cs->labels, cs->label_of);
	for (size_t l = 0; l < cs->nlabels; l++)
		cs->of_glob[l] = true;
	for (size_t i = 0; i < s->nsites; i++)
		if (sink_site_shown(s, i) && !s->specs[s->sites[i].probe].is_glob)
			cs->of_glob[cs->label_of[i]] = false;
	return 0;
}

static int cmp_rows(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return strcmp(x->label, y->label);
}

static int count_report(struct usc_sink *k, const struct usc_sink_ctx *s,
			const struct usc_stats *st, bool final)
{
	struct count_sink *cs = container_of(k, struct count_sink, base);
	struct usc_output o = {.json = cs->json};
	struct row *rows;
	uint64_t *now;
	size_t nrows = 0, unhit = 0;
	int ret = 0;

	if (!cs->labels)
		return 0;	/* never began */
	rows = calloc(cs->nlabels + 1, sizeof(*rows));
	now = calloc(cs->nlabels + 1, sizeof(*now));
	if (!rows || !now) {
		free(rows);
		free(now);
		log_error("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->nsites; i++) {
		int64_t h = st->sites[i].hits;

		if (s->sites[i].hidden || s->place[i].engine < 0)
			continue;
		now[cs->label_of[i]] += h >= 0 ? (uint64_t)h : st->sites[i].events;
	}
	for (size_t l = 0; l < cs->nlabels; l++) {
		uint64_t n = final ? now[l] : now[l] - cs->prev[l];

		cs->prev[l] = now[l];
		if (!n && cs->of_glob[l] && !cs->all) {
			unhit++;	/* a glob's function not hit: funccount's rows */
			continue;
		}
		rows[nrows].label = cs->labels[l];
		rows[nrows++].n = n;
	}
	qsort(rows, nrows, sizeof(*rows), cmp_rows);
	if (cs->json) {
		char num[96];

		for (size_t l = 0; l < nrows && !ret; l++) {
			if (cs->top && l >= cs->top)
				break;
			ret = output_raw(&o, "{\"probe\":");
			ret = ret ? ret : output_json_string(&o, rows[l].label, strlen(rows[l].label));
			snprintf(num, sizeof(num), ",\"count\":%llu,\"final\":%s" OUTPUT_JSON_END,
				 (unsigned long long)rows[l].n, final ? "true" : "false");
			ret = ret ? ret : output_raw(&o, num);
		}
	} else {
		char line[1024];

		if (!final)
			ret = aggsink_stamp(&o);
		snprintf(line, sizeof(line), "%-40s %12s\n", final ? "PROBE" : "PROBE (this interval)",
			 "COUNT");
		ret = ret ? ret : output_raw(&o, line);
		for (size_t l = 0; l < nrows && !ret; l++) {
			if (cs->top && l >= cs->top) {
				snprintf(line, sizeof(line), "(%zu more)\n", nrows - l);
				ret = output_raw(&o, line);
				break;
			}
			snprintf(line, sizeof(line), "%-40s %12llu\n", rows[l].label,
				 (unsigned long long)rows[l].n);
			ret = output_raw(&o, line);
		}
		if (final && unhit && !ret) {
			snprintf(line, sizeof(line), "(%zu not hit: --all lists them)\n", unhit);
			ret = output_raw(&o, line);
		}
		if (!final && !ret)
			ret = output_raw(&o, "\n");
	}
	if (ret)
		log_error("out of memory");
	else
		ret = sink_write(cs->fp, o.buf, o.len, &cs->write_error);
	output_free(&o);
	free(rows);
	free(now);
	return ret;
}

static void count_destroy(struct usc_sink *k)
{
	struct count_sink *cs = container_of(k, struct count_sink, base);

	free(cs->labels);
	free(cs->label_of);
	free(cs->prev);
	free(cs->of_glob);
	free(cs);
}

static const struct usc_sink_ops count_ops = {
	.begin = count_begin,
	.report = count_report,
	.destroy = count_destroy,
};

/* ---- with keys ----------------------------------------------------------- */

struct fline {
	char *text;		/* the frames, without the count */
	uint64_t n;
};

static int by_text(const void *a, const void *b)
{
	return strcmp(((const struct fline *)a)->text, ((const struct fline *)b)->text);
}

/* flamegraph's input: "outer;...;inner COUNT" a line, the stacks whose
 * frames have the same names (other addresses in the same functions)
 * summed into one, in the order of their text as the folded sink's. */
static int print_folded(struct agg_sink *k, struct usc_output *o, struct agg_row **rows, size_t n)
{
	struct fline *l = calloc(n + 1, sizeof(*l));
	struct usc_output one = {.cache = o->cache};
	size_t m = 0;
	int ret = l ? 0 : -ENOMEM;

	for (size_t i = 0; i < n && !ret; i++) {
		char *sp;

		output_reset(&one);
		ret = aggsink_stacks(k, &one, rows[i], true, 0);
		if (ret || !one.buf)
			break;
		sp = strrchr(one.buf, ' ');	/* the count aggsink_stacks wrote */
		if (sp)
			*sp = 0;
		l[m].text = strdup(one.buf);
		l[m].n = rows[i]->st.count;
		if (!l[m++].text)
			ret = -ENOMEM;
	}
	if (!ret)
		qsort(l, m, sizeof(*l), by_text);
	for (size_t i = 0; i < m && !ret; i++) {
		char num[32];
		uint64_t sum = l[i].n;

		while (i + 1 < m && !strcmp(l[i].text, l[i + 1].text))
			sum += l[++i].n;
		snprintf(num, sizeof(num), " %llu\n", (unsigned long long)sum);
		ret = output_raw(o, l[i].text);
		ret = ret ? ret : output_raw(o, num);
	}
	for (size_t i = 0; l && i < m; i++)
		free(l[i].text);
	free(l);
	output_free(&one);
	return ret;
}

static int print_keyed(struct agg_sink *k, struct usc_output *o, struct agg_row **rows, size_t n,
		       bool final)
{
	size_t shown = k->top && k->top < n ? k->top : n;
	int ret = 0;

	if (k->folded)
		return final ? print_folded(k, o, rows, shown) : 0;
	if (!k->json) {
		char line[64];

		if (!final)
			ret = aggsink_stamp(o);
		/* PROBE [KEY] then COUNT, as without keys (and funccount) */
		snprintf(line, sizeof(line), "%-40s %12s\n",
			 final ? "PROBE KEY" : "PROBE KEY (this interval)", "COUNT");
		ret = ret ? ret : output_raw(o, line);
	}
	for (size_t i = 0; i < shown && !ret; i++) {
		const struct agg_row *r = rows[i];
		char num[96];

		if (k->json) {
			ret = aggsink_head(k, o, r);
			snprintf(num, sizeof(num), ",\"count\":%llu,\"cut\":%s,\"final\":%s" OUTPUT_JSON_END,
				 (unsigned long long)r->st.count, r->cut ? "true" : "false",
				 final ? "true" : "false");
			ret = ret ? ret : output_raw(o, num);
			continue;
		}
		size_t start = o->len, wide;

		ret = aggsink_head(k, o, r);
		wide = o->len - start;
		snprintf(num, sizeof(num), "%*s %12llu\n", wide < 40 ? (int)(40 - wide) : 0, "",
			 (unsigned long long)r->st.count);
		ret = ret ? ret : output_raw(o, num);
		ret = ret ? ret : aggsink_stacks(k, o, r, false, 0);	/* under it */
	}
	if (!ret && !k->json && shown < n) {
		char line[64];

		snprintf(line, sizeof(line), "(%zu more)\n", n - shown);
		ret = output_raw(o, line);
	}
	if (!ret && !k->json && !final)
		ret = output_raw(o, "\n");
	return ret;
}


struct usc_sink *usc_sink_count(FILE *fp, bool json, bool keyed, size_t top, bool folded,
				bool all)
{
	if (keyed) {
		struct agg_sink *k = calloc(1, sizeof(*k));

		if (!k)
			return NULL;
		aggsink_init(k, &aggsink_ops, fp, json);
		k->print = print_keyed;
		k->by_count = true;
		k->top = top;
		k->folded = folded;
		return &k->base;
	}

	struct count_sink *cs = calloc(1, sizeof(*cs));

	if (!cs)
		return NULL;
	cs->base.ops = &count_ops;
	cs->fp = fp;
	cs->json = json;
	cs->top = top;
	cs->all = all;
	return &cs->base;
}
