/* The aggregating sinks' common part: see aggsink.h. */
#include "sink/aggsink.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "sink/sink_int.h"

void aggsink_init(struct agg_sink *k, const struct usc_sink_ops *ops, FILE *fp, bool json)
{
	k->base.ops = ops;
	k->fp = fp;
	k->json = json;
}

size_t aggsink_labels(const struct usc_sink_ctx *s, const char **labels, size_t *label_of)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nsites; i++) {
		size_t l = 0;

		if (s->sites[i].hidden || s->place[i].engine < 0)
			continue;
		while (l < n && strcmp(labels[l], s->sites[i].label))
			l++;
		if (l == n)
			labels[n++] = s->sites[i].label;
		label_of[i] = l;
	}
	return n;
}

int aggsink_begin(struct usc_sink *base, const struct usc_sink_ctx *s)
{
	struct agg_sink *k = container_of(base, struct agg_sink, base);

	k->s = s;
	k->a = s->set->agg;
	if (!k->a.str_max)
		k->a.str_max = AGG_STR_DEFAULT;
	if (!k->a.unit_ns)
		k->a.unit_ns = 1;
	k->nbuckets = agg_nbuckets(&k->a);
	k->intervals = s->set->interval > 0;
	k->labels = calloc(s->nsites + 1, sizeof(*k->labels));
	k->label_of = calloc(s->nsites + 1, sizeof(*k->label_of));
	if (!k->labels || !k->label_of || agg_table_init(&k->iv, k->nbuckets) ||
	    (k->intervals && agg_table_init(&k->all, k->nbuckets)) ||
	    (k->a.kind == USC_AGG_LATENCY && !(k->flow = flow_new()))) {
		log_error("out of memory");
		return -ENOMEM;
	}
	k->nlabels = aggsink_labels(s, k->labels, k->label_of);
	return 0;
}

/* The rows of (site's label, key) in the interval's table and the whole
 * run's: r[1] NULL without -i. */
static int rows_of(struct agg_sink *k, const struct usc_site *site, const uint8_t *key,
		   uint32_t keylen, struct agg_row *r[2])
{
	size_t l = k->label_of[site - k->s->sites];

	r[0] = agg_table_get(&k->iv, l, key, keylen);
	r[1] = k->intervals ? agg_table_get(&k->all, l, key, keylen) : NULL;
	if (!r[0] || (k->intervals && !r[1])) {
		if (!k->err)
			log_error("out of memory");
		k->err = -ENOMEM;
		return -ENOMEM;
	}
	for (int t = 0; t < 2 && r[t]; t++)
		if (!r[t]->site) {
			r[t]->site = site;
			r[t]->label = k->labels[l];
		}
	return 0;
}

int aggsink_row(struct usc_sink *base, const struct usc_site *site, const uint8_t *key,
		uint32_t keylen, const struct agg_stats *st, const uint64_t *buckets)
{
	struct agg_sink *k = container_of(base, struct agg_sink, base);
	struct agg_row *r[2];

	if (rows_of(k, site, key, keylen, r))
		return k->err;
	for (int t = 0; t < 2 && r[t]; t++)
		agg_row_merge(r[t], st, buckets, k->nbuckets);
	/* a string of the key cut where the probe runs: the key says so */
	unsigned first, n;
	int value;
	uint32_t at = 0;

	agg_layout(&k->s->set->agg, site, &first, &n, &value);
	for (unsigned i = first; i < first + n && at + sizeof(struct agg_slot) <= keylen; i++) {
		const struct agg_slot *sl = (const struct agg_slot *)(key + at);
		bool str = fetch_type_is_string(site->args[i].type);

		for (int t = 0; t < 2 && r[t]; t++)
			r[t]->cut |= str && sl->kind == AGG_K_STR && sl->cut;
		at += str ? (uint32_t)(8 + ((k->a.str_max + 7) & ~7u)) : sizeof(struct agg_slot);
	}
	return 0;
}

static void add_value(struct agg_sink *k, struct agg_row *r[2], int64_t v, bool cut)
{
	uint32_t b = k->nbuckets ? agg_bucket(&k->a, v) : 0;

	for (int t = 0; t < 2 && r[t]; t++) {
		agg_row_add(r[t], v, b);
		r[t]->cut |= cut;
	}
}

/* An event's key into r: its key arguments' values. */
static int event_rows(struct agg_sink *k, const struct usc_event *ev, struct agg_row *r[2],
		      bool *cut)
{
	uint8_t key[AGG_KEY_MAX];
	unsigned first, n;
	int value;
	uint32_t len;

	agg_layout(&k->s->set->agg, ev->site, &first, &n, &value);
	len = agg_key_of(k->s->cache, ev, first, n, k->a.str_max, key, cut);
	/* a new key beyond the table's size is counted as lost, as an engine
	 * aggregating where the probe runs would */
	if (!agg_table_find(k->intervals ? &k->all : &k->iv, k->label_of[ev->site - k->s->sites],
			    key, len) &&
	    !(k->intervals && agg_table_find(&k->iv, k->label_of[ev->site - k->s->sites], key,
					     len))) {
		if (k->event_keys >= k->a.max_rows) {
			k->full++;
			return -ENOSPC;
		}
		k->event_keys++;
	}
	return rows_of(k, ev->site, key, len, r);
}

static int latency_event(struct agg_sink *k, const struct usc_event *ev)
{
	const char *fkey;
	size_t fkeylen;
	bool unpaired, cut;
	enum flow_kind kind = sink_flow_classify(k->s->cache, ev, &fkey, &fkeylen, &unpaired);
	struct flow_result res;
	struct agg_row *r[2] = {NULL, NULL};
	int ret;

	if (kind == FLOW_EVENT)
		return 0;	/* neither an entry nor a return: no latency */
	/* an entry whose key found the table full still opens its frame:
	 * the pairing of the others stays right */
	if (kind == FLOW_ENTRY && event_rows(k, ev, r, &cut) && k->err)
		return k->err;
	ret = flow_feed_data(k->flow, flow_ctx_of(ev), ev->time_ns, kind, fkey, fkeylen, r[0],
			     &res);
	if (ret) {
		log_error("out of memory");
		return k->err = ret;
	}
	if (kind != FLOW_RETURN || res.duration_ns < 0 || !res.data)
		return 0;
	/* the entry's row (its interval's: the whole run's is found again) */
	struct agg_row *er = res.data, *rr[2] = {NULL, NULL};
	int64_t v = res.duration_ns / (int64_t)k->a.unit_ns;

	if (rows_of(k, er->site, er->key, er->keylen, rr))
		return k->err;
	add_value(k, rr, v, er->cut);
	if (k->per_call)
		return k->per_call(k, ev, rr[0], v);
	return 0;
}

int aggsink_event(struct usc_sink *base, const struct usc_event *ev)
{
	struct agg_sink *k = container_of(base, struct agg_sink, base);
	struct agg_row *r[2];
	unsigned first, n;
	int value;
	bool cut;

	if (k->err)
		return k->err;
	if (k->a.kind == USC_AGG_LATENCY)
		return latency_event(k, ev);
	agg_layout(&k->s->set->agg, ev->site, &first, &n, &value);
	if (value >= 0 && ((unsigned)value >= ev->nvals || ev->vals[value].kind != USC_V_INT ||
			   ev->site->args[value].unavailable || ev->site->args[value].optimized_out)) {
		k->bad_values++;
		return 0;
	}
	if (event_rows(k, ev, r, &cut))
		return k->err;	/* 0 when the table is full (counted) */
	if (value < 0) {
		add_value(k, r, 0, cut);
	} else {
		const struct usc_fetcharg *a = &ev->site->args[value];

		/* the value as its type means it */
		add_value(k, r, agg_value_of(ev->vals[value].u, agg_arg_size(a),
					     fetch_type_is_signed(a->type)), cut);
	}
	return 0;
}

/* latency --per-call: the lines of the calls since the last write. */
static void calls_write(struct agg_sink *k)
{
	if (!k->calls.len)
		return;
	sink_write(k->fp, k->calls.buf, k->calls.len, &k->write_error);
	output_reset(&k->calls);
}

int aggsink_flush(struct usc_sink *base)
{
	struct agg_sink *k = container_of(base, struct agg_sink, base);

	calls_write(k);
	return k->err ? k->err : k->write_error;
}

/* ---- the report ------------------------------------------------------------ */

static const struct agg_sink *sort_sink;

static int cmp_rows(const void *pa, const void *pb)
{
	const struct agg_row *x = *(struct agg_row *const *)pa, *y = *(struct agg_row *const *)pb;
	int c;

	if (sort_sink->by_count && x->st.count != y->st.count)
		return x->st.count > y->st.count ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->st.count != y->st.count)
		return x->st.count > y->st.count ? -1 : 1;
	c = memcmp(x->key, y->key, x->keylen < y->keylen ? x->keylen : y->keylen);
	return c ? c : (int)x->keylen - (int)y->keylen;
}

int aggsink_stamp(struct usc_output *o)
{
	time_t t = time(NULL);
	char hms[16], line[32];

	strftime(hms, sizeof(hms), "%H:%M:%S", localtime(&t));
	snprintf(line, sizeof(line), "[%s]\n", hms);
	return output_raw(o, line);
}

static bool any_site_lost(const struct agg_sink *k, const struct usc_sink_ctx *s,
			  const struct usc_stats *st)
{
	(void)k;
	for (size_t i = 0; i < s->nsites; i++)
		if (!s->sites[i].hidden && s->place[i].engine >= 0 && st->sites[i].lost > 0)
			return true;
	return false;
}

/* Losses the user must hear of: hits that found the key table full, values
 * that could not be read, events lost on their way. */
static void report_losses(struct agg_sink *k, const struct usc_sink_ctx *s,
			  const struct usc_stats *st)
{
	for (size_t l = 0; l < k->nlabels; l++) {
		uint64_t full = 0, bad = 0, lost = 0, waited = 0;

		for (size_t i = 0; i < s->nsites; i++)
			if (!s->sites[i].hidden && s->place[i].engine >= 0 && k->label_of[i] == l) {
				full += st->sites[i].agg_full;
				bad += st->sites[i].agg_fault;
				if (st->sites[i].lost > 0)
					lost += (uint64_t)st->sites[i].lost;
				waited += st->sites[i].lost_wait;
			}
		if (lost && waited)
			log_warn("%s: %" PRIu64 " hits lost before they were aggregated (%" PRIu64
				 " found no room within --max-wait; a full buffer, a nested hit, "
				 "calls deeper than the latency stack)", k->labels[l], lost, waited);
		else if (lost)
			log_warn("%s: %" PRIu64 " hits lost before they were aggregated (a full "
				 "buffer, a nested hit, calls deeper than the latency stack)",
				 k->labels[l], lost);
		if (full)
			log_warn("%s: %" PRIu64 " hits not counted: the key table was full "
				 "(--max-keys)", k->labels[l], full);
		if (bad)
			log_warn("%s: %" PRIu64 " values could not be read: not counted",
				 k->labels[l], bad);
	}
	if (k->bad_values)
		log_warn("%" PRIu64 " values could not be read: not counted", k->bad_values);
	if (k->full)
		log_warn("%" PRIu64 " hits not counted: the key table was full (--max-keys)",
			 k->full);
	if (st->lost > 0 && !any_site_lost(k, s, st))
		log_warn("%" PRIu64 " events lost before they were aggregated (the kernel does not "
			 "say which probes lost them)", st->lost);
}

int aggsink_report(struct usc_sink *base, const struct usc_sink_ctx *s, const struct usc_stats *st,
		   bool final)
{
	struct agg_sink *k = container_of(base, struct agg_sink, base);
	struct agg_table *t = final && k->intervals ? &k->all : &k->iv;
	struct usc_output o = {.json = k->json, .cache = s->cache};
	struct agg_row **rows;
	size_t n = 0;
	int ret;

	if (!k->labels)
		return 0;	/* never began */
	calls_write(k);		/* the calls' lines before the rows */
	rows = calloc(t->n + 1, sizeof(*rows));
	if (!rows) {
		log_error("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->n; i++)
		if (t->rows[i]->st.count)
			rows[n++] = t->rows[i];
	sort_sink = k;
	qsort(rows, n, sizeof(*rows), cmp_rows);
	ret = k->print(k, &o, rows, n, final);
	if (ret)
		log_error("out of memory");
	else
		ret = sink_write(k->fp, o.buf, o.len, &k->write_error);
	output_free(&o);
	free(rows);
	agg_table_clear(&k->iv);
	if (final)
		report_losses(k, s, st);
	return ret;
}

void aggsink_destroy(struct usc_sink *base)
{
	struct agg_sink *k = container_of(base, struct agg_sink, base);

	agg_table_free(&k->iv);
	agg_table_free(&k->all);
	flow_free(k->flow);
	free(k->labels);
	free(k->label_of);
	output_free(&k->calls);
	free(k);
}

/* ---- writing rows -------------------------------------------------------- */

static bool key_is_pid(const struct usc_fetcharg *a, const struct usc_value *v)
{
	return a->ninsn && a->insn[0].op == FOP_PID && v->kind == USC_V_INT && v->u &&
	       v->u <= INT32_MAX;
}

/* Row r's key as an event's values. */
static void row_event(const struct agg_sink *k, const struct agg_row *r, struct usc_value *vals,
		      struct usc_event *ev)
{
	unsigned first, n;
	int value;
	bool cut;
	pid_t pid_key = 0;

	*ev = (struct usc_event){.site = r->site, .vals = vals, .comm = "", .pid = k->s->pid};
	agg_layout(&k->s->set->agg, r->site, &first, &n, &value);
	for (unsigned i = 0; i < n && i < USC_MAX_ARGS; i++) {
		pid_t pid = 0;

		agg_key_value(k->s->cache, r->key, r->keylen, r->site->args, first, i,
			      k->a.str_max, &vals[i], &cut, &pid);
		if (pid)
			ev->pid = pid;
		else if (key_is_pid(&r->site->args[first + i], &vals[i]))
			pid_key = (pid_t)vals[i].u;
	}
	/* a row keyed by $pid is that process's (its py: function named as
	 * the process named it: a fork's code object may be at the address
	 * of another's) */
	if (pid_key && ev->pid == k->s->pid)
		ev->pid = pid_key;
	ev->nvals = n < USC_MAX_ARGS ? n : USC_MAX_ARGS;
}

void aggsink_key_slot(const struct agg_sink *k, const struct agg_row *r, unsigned first,
		      unsigned i, struct usc_value *vals, struct usc_event *ev)
{
	pid_t pid = 0;
	bool cut;

	agg_key_value(k->s->cache, r->key, r->keylen, r->site->args, first, i, k->a.str_max,
		      &vals[first + i], &cut, &pid);
	ev->pid = pid;
	ev->nvals = first + i + 1;
}

int aggsink_value_text(struct usc_output *o, const struct usc_event *ev, unsigned j)
{
	const struct usc_value *v = &ev->vals[j];
	char *s;
	int ret;

	if (v->kind != USC_V_STR)
		return output_arg_value(o, ev, j);
	s = strndup(v->str, v->len);
	ret = s ? output_raw(o, s) : -ENOMEM;
	free(s);
	return ret;
}

int aggsink_key(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r)
{
	struct usc_value vals[USC_MAX_ARGS];
	struct usc_event ev;
	int ret;

	row_event(k, r, vals, &ev);
	ret = output_event_args(o, &ev);
	if (!ret && r->cut && !o->json)
		ret = output_raw(o, " [cut]");
	return ret;
}

int aggsink_stacks(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r,
		   bool folded, uint64_t count)
{
	unsigned first, n;
	int value, ret = 0;
	bool any = false;

	agg_layout(&k->s->set->agg, r->site, &first, &n, &value);
	for (unsigned i = 0; i < n && i < USC_MAX_ARGS && !ret; i++) {
		struct usc_value v;
		pid_t pid = 0;
		bool cut;

		if (r->site->args[first + i].type != USC_T_STACK)
			continue;
		agg_key_value(k->s->cache, r->key, r->keylen, r->site->args, first, i,
			      k->a.str_max, &v, &cut, &pid);
		if (v.kind != USC_V_STACK || (folded && !v.stack->n))
			continue;	/* (none: $pystack where no Python runs) */
		if (folded) {
			ret = any ? output_raw(o, ";") : 0;
			ret = ret ? ret : output_stack_folded(o, pid, v.stack);
		} else {
			ret = output_stack(o, pid, v.stack);
		}
		any = true;
	}
	if (folded && !ret) {
		char num[32];

		if (!any)	/* no stack: the probe alone */
			ret = output_raw(o, r->label);
		snprintf(num, sizeof(num), " %llu\n", (unsigned long long)count);
		ret = ret ? ret : output_raw(o, num);
	}
	return ret;
}

int aggsink_head(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r)
{
	int ret;

	if (!k->json && r->site->python) {
		/* a py: probe's row is its Python function's */
		struct usc_value vals[USC_MAX_ARGS];
		struct usc_event ev;
		char label[USC_NAME_MAX * 8];

		row_event(k, r, vals, &ev);
		output_event_label(o, &ev, label, sizeof(label));
		ret = output_raw(o, label);
		return ret ? ret : aggsink_key(k, o, r);
	}
	if (!k->json) {
		ret = output_raw(o, r->label);
		return ret ? ret : aggsink_key(k, o, r);
	}
	ret = output_raw(o, "{\"probe\":");
	ret = ret ? ret : output_json_string(o, r->label, strlen(r->label));
	ret = ret ? ret : output_raw(o, ",\"key\":");
	return ret ? ret : aggsink_key(k, o, r);
}

int aggsink_json_tail(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r,
		      bool final)
{
	int ret = output_raw(o, r->cut ? ",\"cut\":true,\"buckets\":" :
				       ",\"cut\":false,\"buckets\":");

	ret = ret ? ret : aggsink_hist_json(k, o, r);
	return ret ? ret : output_raw(o, final ? ",\"final\":true" OUTPUT_JSON_END :
						      ",\"final\":false" OUTPUT_JSON_END);
}

/* bpftrace's short numbers: 1K, 2M, ... for powers of 1024. */
static void short_num(char *buf, size_t len, int64_t v)
{
	static const char sfx[] = "KMGTPE";
	int i = -1;
	int64_t x = v;

	while (x >= 1024 && x % 1024 == 0 && i < 5) {
		x /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%" PRId64, v);
	else
		snprintf(buf, len, "%" PRId64 "%c", x, sfx[i]);
}

/* The buckets as shown: log2 by power of two (0: negatives, 1: zero, then
 * one per power), linear as they are. */
struct shown {
	size_t n;
	uint64_t *count;
	int64_t *lo, *hi;
	bool *open_lo, *open_hi;
};

static int shown_of(const struct agg_sink *k, const struct agg_row *r, struct shown *sh)
{
	size_t max = k->a.linear ? k->nbuckets : 2 + 64;

	memset(sh, 0, sizeof(*sh));
	sh->count = calloc(max, sizeof(*sh->count));
	sh->lo = calloc(max, sizeof(*sh->lo));
	sh->hi = calloc(max, sizeof(*sh->hi));
	sh->open_lo = calloc(max, sizeof(*sh->open_lo));
	sh->open_hi = calloc(max, sizeof(*sh->open_hi));
	if (!sh->count || !sh->lo || !sh->hi || !sh->open_lo || !sh->open_hi)
		return -ENOMEM;
	sh->n = max;
	if (k->a.linear) {
		for (uint32_t b = 0; b < k->nbuckets; b++) {
			sh->count[b] = r->buckets[b];
			sh->lo[b] = b == 0 ? k->a.lmin : k->a.lmin + (int64_t)(b - 1) * k->a.lstep;
			sh->hi[b] = b == 0 ? k->a.lmin : sh->lo[b] + k->a.lstep;
			if (sh->hi[b] > k->a.lmax)
				sh->hi[b] = k->a.lmax;
			if (b + 1 == k->nbuckets)
				sh->lo[b] = k->a.lmax;
			sh->open_lo[b] = b == 0;
			sh->open_hi[b] = b + 1 == k->nbuckets;
		}
		return 0;
	}
	sh->count[0] = r->buckets[0];
	sh->open_lo[0] = true;
	sh->hi[0] = 0;
	sh->count[1] = r->buckets[1];
	sh->lo[1] = sh->hi[1] = 0;
	for (uint32_t p = 0; p < 64; p++) {
		for (uint32_t q = 0; q < 4 && 2 + 4 * p + q < k->nbuckets; q++)
			sh->count[2 + p] += r->buckets[2 + 4 * p + q];
		sh->lo[2 + p] = (int64_t)(1ULL << p);
		sh->hi[2 + p] = p < 62 ? (int64_t)(2ULL << p) : INT64_MAX;
		sh->open_hi[2 + p] = p >= 62;
	}
	return 0;
}

static void shown_free(struct shown *sh)
{
	free(sh->count);
	free(sh->lo);
	free(sh->hi);
	free(sh->open_lo);
	free(sh->open_hi);
}

static void bucket_label(const struct agg_sink *k, const struct shown *sh, size_t b, char *buf,
			 size_t len)
{
	char lo[32], hi[32];

	if (sh->open_lo[b]) {
		short_num(hi, sizeof(hi), sh->hi[b]);
		snprintf(buf, len, "(..., %s)", hi);
		return;
	}
	short_num(lo, sizeof(lo), sh->lo[b]);
	if (sh->open_hi[b]) {
		snprintf(buf, len, "[%s, ...)", lo);
		return;
	}
	if (!k->a.linear && sh->hi[b] - sh->lo[b] <= 1) {
		snprintf(buf, len, "[%s]", lo);
		return;
	}
	short_num(hi, sizeof(hi), sh->hi[b]);
	snprintf(buf, len, "[%s, %s)", lo, hi);
}

int aggsink_hist_text(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r)
{
	struct shown sh;
	size_t first = SIZE_MAX, last = 0;
	uint64_t top = 0;
	int ret = 0;

	if (!r->buckets)
		return 0;
	if (shown_of(k, r, &sh)) {
		shown_free(&sh);
		return -ENOMEM;
	}
	for (size_t b = 0; b < sh.n; b++)
		if (sh.count[b]) {
			first = first == SIZE_MAX ? b : first;
			last = b;
			top = sh.count[b] > top ? sh.count[b] : top;
		}
	for (size_t b = first; first != SIZE_MAX && b <= last && !ret; b++) {
		char label[80], bar[64], line[192];
		size_t w = top ? (size_t)((sh.count[b] * 52 + top - 1) / top) : 0;

		if (sh.count[b] && !w)
			w = 1;
		memset(bar, '@', w);
		bar[w] = 0;
		bucket_label(k, &sh, b, label, sizeof(label));
		snprintf(line, sizeof(line), "%-16s %8" PRIu64 " |%-52s|\n", label, sh.count[b], bar);
		ret = output_raw(o, line);
	}
	shown_free(&sh);
	return ret;
}

int aggsink_print_hists(struct agg_sink *k, struct usc_output *o, struct agg_row **rows,
			size_t n, bool final)
{
	int ret = 0;

	if (!k->json && !final && n)
		ret = aggsink_stamp(o);
	for (size_t i = 0; i < n && !ret; i++) {
		const struct agg_row *r = rows[i];
		char head[AGGSINK_LINE], stats[AGGSINK_LINE];

		ret = aggsink_head(k, o, r);
		ret = ret ? ret : k->words(k, o, r, head, stats);
		if (k->json) {
			ret = ret ? ret : aggsink_json_tail(k, o, r, final);
			continue;
		}
		ret = ret ? ret : output_raw(o, head);
		ret = ret ? ret : aggsink_hist_text(k, o, r);
		ret = ret ? ret : output_raw(o, stats);
	}
	return ret;
}

int aggsink_hist_json(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r)
{
	struct shown sh;
	char item[160];
	bool any = false;
	int ret = output_raw(o, "[");

	if (!r->buckets)
		return ret ? ret : output_raw(o, "]");
	if (shown_of(k, r, &sh)) {
		shown_free(&sh);
		return -ENOMEM;
	}
	for (size_t b = 0; b < sh.n && !ret; b++) {
		int n = 0;

		if (!sh.count[b])
			continue;
		n += snprintf(item + n, sizeof(item) - (size_t)n, "%s{", any ? "," : "");
		if (!sh.open_lo[b])
			n += snprintf(item + n, sizeof(item) - (size_t)n, "\"min\":%" PRId64 ",",
				      sh.lo[b]);
		if (!sh.open_hi[b])
			n += snprintf(item + n, sizeof(item) - (size_t)n, "\"max\":%" PRId64 ",",
				      !k->a.linear && sh.hi[b] - sh.lo[b] <= 1 ? sh.lo[b] :
				      sh.hi[b] - 1);
		snprintf(item + n, sizeof(item) - (size_t)n, "\"count\":%" PRIu64 "}", sh.count[b]);
		ret = output_raw(o, item);
		any = true;
	}
	shown_free(&sh);
	return ret ? ret : output_raw(o, "]");
}

const struct usc_sink_ops aggsink_ops = {
	.begin = aggsink_begin,
	.event = aggsink_event,
	.agg_row = aggsink_row,
	.flush = aggsink_flush,
	.report = aggsink_report,
	.destroy = aggsink_destroy,
};
