/* The served sink (--serve ADDR:PORT): the live aggregates as Prometheus
 * metrics (sink.h, usc_sink_prom), for Prometheus to scrape.
 *
 * Its rows are aggsink.c's, fed as the printing sinks' are (the engines'
 * rows at each refresh, events otherwise), but never cleared: a counter
 * counts from the start of the run. At each refresh (sink.h) the whole
 * exposition is written in both formats and handed to the server
 * (src/serve/), which swaps it in; a scrape reads the last one whole and
 * never waits on the session.
 *
 * Histograms: the rows' log2 buckets by power of two, as the text output
 * shows them (a quarter of an octave would be four times the series): the
 * bucket of [2^p, 2^(p+1)) is le = 2^(p+1) - 1, for an integer value
 * counts the values <= le exactly; latency is in seconds, so the bound is
 * the last nanosecond of the bucket, (2^(p+1) * unit) - 1 ns. The buckets
 * shown go from the lowest that ever had a value to the highest (the set
 * only grows), then +Inf. Linear ones are all shown. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "output/output.h"
#include "serve/expo.h"
#include "serve/serve.h"
#include "sink/aggsink.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

#define NAME_MAX_ 64

struct prom_sink {
	struct agg_sink k;		/* first: aggsink_destroy frees it */
	enum usc_prom_kind kind;
	bool keyed;
	struct serve *sv;
	struct expo_label *consts;	/* --label k=v: name and value owned */
	size_t nconsts;
	char pid[16], comm[64];
	uint64_t *events;		/* objtrace: events per label */
	bool started;
};

static const struct usc_sink_ops prom_ops;

/* ---- labels ------------------------------------------------------------------ */

/* The labels every series has after its own: pid, comm, binary, --label. */
struct labels {
	struct expo_label v[USC_MAX_ARGS + 8];
	char names[USC_MAX_ARGS][NAME_MAX_];
	size_t n;
	struct usc_output vals;		/* the key values' text */
	size_t off[USC_MAX_ARGS], len[USC_MAX_ARGS];
};

static void tail_labels(const struct prom_sink *p, struct labels *l, const struct usc_site *site)
{
	const struct usc_sink_ctx *c = p->k.s;
	const char *bin = c->exe ? c->exe : site ? site->path : NULL;

	if (c->pid) {
		l->v[l->n++] = (struct expo_label){"pid", p->pid, strlen(p->pid)};
		l->v[l->n++] = (struct expo_label){"comm", p->comm, strlen(p->comm)};
	}
	if (bin)
		l->v[l->n++] = (struct expo_label){"binary", bin, strlen(bin)};
	for (size_t i = 0; i < p->nconsts; i++)
		l->v[l->n++] = p->consts[i];
}

static bool name_taken(const struct prom_sink *p, const struct labels *l, size_t upto,
		       const char *name)
{
	if (expo_label_reserved(name))
		return true;
	for (size_t i = 0; i < p->nconsts; i++)
		if (!strcmp(p->consts[i].name, name))
			return true;
	for (size_t i = 0; i < upto; i++)
		if (!strcmp(l->names[i], name))
			return true;
	return false;
}

/* Key slot i of row r as a label value's text, into l->vals. */
static int key_text(const struct prom_sink *p, struct labels *l, const struct agg_row *r,
		    unsigned first, unsigned i)
{
	struct usc_value vals[USC_MAX_ARGS] = {0};
	struct usc_event ev = {.site = r->site, .vals = vals, .comm = ""};

	aggsink_key_slot(&p->k, r, first, i, vals, &ev);
	if (vals[first + i].kind == USC_V_STACK)
		return output_stack_folded(&l->vals, ev.pid, vals[first + i].stack);
	/* a string's bytes themselves: expo escapes them */
	return aggsink_value_text(&l->vals, &ev, first + i);
}

/* The labels of row r (r NULL: of a probe label's first site): probe, its
 * keys named after their arguments, then the rest. 0 or -ENOMEM. */
static int row_labels(const struct prom_sink *p, struct labels *l, const char *probe,
		      const struct agg_row *r, const struct usc_site *site)
{
	unsigned first = 0, n = 0, k = 0;
	int value;

	l->n = 0;
	output_reset(&l->vals);
	l->v[l->n++] = (struct expo_label){"probe", probe, strlen(probe)};
	if (r)
		agg_layout(&p->k.s->set->agg, r->site, &first, &n, &value);
	for (unsigned i = 0; i < n && k < USC_MAX_ARGS; i++) {
		const struct usc_fetcharg *a = &r->site->args[first + i];
		char name[NAME_MAX_];
		int ret;

		if (a->show == USC_SHOW_GO_PART)
			continue;	/* its value shows with the Go value's head */
		expo_label_name(a->name, name, sizeof(name));
		if (name_taken(p, l, k, name))
			snprintf(l->names[k], sizeof(l->names[k]), "key_%.*s", NAME_MAX_ - 5, name);
		else
			snprintf(l->names[k], sizeof(l->names[k]), "%s", name);
		l->off[k] = l->vals.len;
		ret = key_text(p, l, r, first, i);
		if (ret)
			return ret;
		l->len[k] = l->vals.len - l->off[k];
		k++;
	}
	for (unsigned i = 0; i < k; i++)
		l->v[l->n++] = (struct expo_label){l->names[i], l->vals.buf ? l->vals.buf + l->off[i] : "",
						   l->len[i]};
	tail_labels(p, l, r ? r->site : site);
	return 0;
}

/* ---- the exposition --------------------------------------------------------- */

static void num_u64(char buf[32], uint64_t v)
{
	snprintf(buf, 32, "%" PRIu64, v);
}

/* The first site shown with label l. */
static const struct usc_site *label_site(const struct prom_sink *p, size_t l)
{
	const struct usc_sink_ctx *c = p->k.s;

	for (size_t i = 0; i < c->nsites; i++)
		if (sink_site_shown(c, i) && p->k.label_of[i] == l)
			return &c->sites[i];
	return NULL;
}

/* The value a bucket's le stands for, in the metric's unit. */
static double bound(const struct prom_sink *p, int64_t upper)
{
	if (p->kind != USC_PROM_LATENCY)
		return (double)upper;
	/* the last nanosecond of the bucket: values are whole units */
	return ((double)(upper + 1) * p->k.a.unit_ns - 1) / 1e9;
}

static void bucket(struct expo *e, const char *name, const struct labels *l, double le,
		   uint64_t cum)
{
	char lb[32], num[32];

	expo_number(le, lb);
	num_u64(num, cum);
	expo_sample(e, name, "_bucket", l->v, l->n, lb, num);
}

static void histogram(const struct prom_sink *p, struct expo *e, const char *name,
		      const struct labels *l, const struct agg_row *r)
{
	uint32_t nb = p->k.nbuckets;
	uint64_t cum = 0;
	char num[32];

	if (p->k.a.linear && p->kind == USC_PROM_HIST) {
		const struct usc_agg_opts *a = &p->k.a;

		for (uint32_t b = 0; b + 1 < nb; b++) {
			int64_t up = b == 0 ? a->lmin : a->lmin + (int64_t)b * a->lstep;

			if (up > a->lmax)
				up = a->lmax;
			cum += r->buckets[b];
			bucket(e, name, l, bound(p, up - 1), cum);
		}
	} else {
		/* by power of two: 0 negatives, 1 zero, 2 + p the values [2^p, 2^(p+1)) */
		uint64_t g[66] = {0};
		int lo = -1, hi = -1;

		for (uint32_t b = 0; b < nb; b++)
			g[b < 2 ? b : 2 + (b - 2) / 4] += r->buckets[b];
		for (int i = 0; i < 66; i++)
			if (g[i]) {
				lo = lo < 0 ? i : lo;
				hi = i;
			}
		for (int i = lo; i >= 0 && i <= hi && i < 65; i++) {
			int64_t up = i == 0 ? -1 : i == 1 ? 0 : (int64_t)((2ULL << (i - 2)) - 1);

			cum += g[i];
			bucket(e, name, l, bound(p, up), cum);
		}
	}
	expo_sample(e, name, "_bucket", l->v, l->n, "+Inf", (num_u64(num, r->st.count), num));
	if (p->kind == USC_PROM_LATENCY)
		expo_number((double)r->st.sum * p->k.a.unit_ns / 1e9, num);
	else
		snprintf(num, sizeof(num), "%" PRId64, r->st.sum);
	expo_sample(e, name, "_sum", l->v, l->n, NULL, num);
	num_u64(num, r->st.count);
	expo_sample(e, name, "_count", l->v, l->n, NULL, num);
}

/* The rows that have counted something, in the table's order. */
static int rows_family(const struct prom_sink *p, struct expo *e, struct labels *l,
		       const char *name, bool hist)
{
	const struct agg_table *t = &p->k.iv;
	char num[32];
	int ret;

	for (size_t i = 0; i < t->n; i++) {
		const struct agg_row *r = t->rows[i];

		if (!r->st.count || !r->site)
			continue;
		ret = row_labels(p, l, r->label, r, NULL);
		if (ret)
			return ret;
		if (hist) {
			histogram(p, e, name, l, r);
		} else {
			num_u64(num, r->st.count);
			expo_sample(e, name, "_total", l->v, l->n, NULL, num);
		}
	}
	return 0;
}

/* A counter per probe label: hits (the engines' counts, or events seen),
 * or losses. */
static int label_family(const struct prom_sink *p, struct expo *e, struct labels *l,
			const char *name, const struct usc_stats *st, bool lost)
{
	const struct usc_sink_ctx *c = p->k.s;
	char num[32];

	for (size_t lb = 0; lb < p->k.nlabels; lb++) {
		uint64_t v = 0;
		int ret;

		for (size_t i = 0; i < c->nsites; i++) {
			const struct usc_site_stats *ss = &st->sites[i];

			if (!sink_site_shown(c, i) || p->k.label_of[i] != lb)
				continue;
			if (lost)
				v += (ss->lost > 0 ? (uint64_t)ss->lost : 0) + ss->agg_full +
				     ss->agg_fault;
			else if (p->kind != USC_PROM_OBJTRACE)
				v += ss->hits >= 0 ? (uint64_t)ss->hits : ss->events;
		}
		if (!lost && p->kind == USC_PROM_OBJTRACE)
			v = p->events[lb];
		ret = row_labels(p, l, p->k.labels[lb], NULL, label_site(p, lb));
		if (ret)
			return ret;
		num_u64(num, v);
		expo_sample(e, name, "_total", l->v, l->n, NULL, num);
	}
	return 0;
}

static int render(const struct prom_sink *p, struct expo *e, const struct usc_stats *st,
		  const struct timespec *taken)
{
	struct labels *l = calloc(1, sizeof(*l));
	char num[48];
	int ret = 0;

	if (!l)
		return -ENOMEM;
	if (p->kind == USC_PROM_COUNT || p->kind == USC_PROM_OBJTRACE) {
		expo_family(e, "uscope_probe_hits", EXPO_COUNTER, NULL,
			    p->kind == USC_PROM_OBJTRACE ?
			    "Events of each probe: calls that received a followed object, "
			    "objects followed, objects released." :
			    "Hits of each probe, per key (its fetch arguments).");
		ret = p->keyed ? rows_family(p, e, l, "uscope_probe_hits", false) :
				 label_family(p, e, l, "uscope_probe_hits", st, false);
	} else if (p->kind == USC_PROM_LATENCY) {
		expo_family(e, "uscope_latency_seconds", EXPO_HISTOGRAM, "seconds",
			    "Time from a function's entry to its return, per key.");
		ret = rows_family(p, e, l, "uscope_latency_seconds", true);
	} else {
		expo_family(e, "uscope_value", EXPO_HISTOGRAM, NULL,
			    "The last fetch argument of each probe, per key (the others).");
		ret = rows_family(p, e, l, "uscope_value", true);
	}
	if (!ret) {
		expo_family(e, "uscope_lost", EXPO_COUNTER, NULL,
			    "Hits of each probe not counted: lost on their way, beyond the key "
			    "table (--max-keys), or values that could not be read.");
		ret = label_family(p, e, l, "uscope_lost", st, true);
	}
	if (!ret) {
		expo_family(e, "uscope_snapshot_timestamp_seconds", EXPO_GAUGE, "seconds",
			    "When the values served were read (Unix time): every hit before it "
			    "is counted.");
		l->n = 0;
		tail_labels(p, l, label_site(p, 0));
		snprintf(num, sizeof(num), "%lld.%03ld", (long long)taken->tv_sec,
			 taken->tv_nsec / 1000000);
		expo_sample(e, "uscope_snapshot_timestamp_seconds", "", l->v, l->n, NULL, num);
		expo_end(e);
	}
	output_free(&l->vals);
	free(l);
	return ret ? ret : e->err;
}

/* ---- the sink ------------------------------------------------------------------ */

static struct prom_sink *of(struct usc_sink *k)
{
	return container_of(container_of(k, struct agg_sink, base), struct prom_sink, k);
}

static void read_comm(struct prom_sink *p, const struct usc_sink_ctx *c)
{
	char path[64];
	FILE *f;

	snprintf(p->pid, sizeof(p->pid), "%d", (int)c->pid);
	if (c->command && c->exe) {
		/* what the kernel names it at its exec: the file's name, cut */
		const char *b = strrchr(c->exe, '/');

		snprintf(p->comm, 16, "%s", b ? b + 1 : c->exe);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)c->pid);
	f = fopen(path, "r");
	if (f && fgets(p->comm, sizeof(p->comm), f))
		p->comm[strcspn(p->comm, "\n")] = 0;
	if (f)
		fclose(f);
}

static int prom_begin(struct usc_sink *k, const struct usc_sink_ctx *c)
{
	struct prom_sink *p = of(k);
	int ret = aggsink_begin(k, c);

	if (ret)
		return ret;
	if (p->k.intervals) {
		/* -i is the printing sink's: a counter counts the whole run */
		agg_table_free(&p->k.all);
		p->k.intervals = false;
	}
	p->events = calloc(c->nsites + 1, sizeof(*p->events));
	if (!p->events) {
		log_error("out of memory");
		return -ENOMEM;
	}
	if (c->pid)
		read_comm(p, c);
	ret = serve_start(p->sv);
	if (!ret) {
		p->started = true;
		log_info("serving metrics at http://%s/metrics", serve_address(p->sv));
	}
	return ret;
}

static int prom_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct prom_sink *p = of(k);

	if (p->kind == USC_PROM_OBJTRACE) {
		p->events[p->k.label_of[ev->site - p->k.s->sites]]++;
		return 0;
	}
	if (p->kind == USC_PROM_COUNT && !p->keyed)
		return 0;	/* the engines' counts */
	return aggsink_event(k, ev);
}

static int prom_refresh(struct usc_sink *k, const struct usc_sink_ctx *c,
			const struct usc_stats *st, const struct timespec *taken)
{
	struct prom_sink *p = of(k);
	char *body[SERVE_NFORMATS];
	size_t len[SERVE_NFORMATS];
	int ret = 0;

	(void)c;
	if (!p->started)
		return 0;
	for (int f = 0; f < SERVE_NFORMATS; f++) {
		struct expo e = {.fmt = (enum serve_format)f};

		if (!ret)
			ret = render(p, &e, st, taken);
		body[f] = e.buf;
		len[f] = e.len;
	}
	if (!ret)
		ret = serve_publish(p->sv, body, len);
	else
		for (int f = 0; f < SERVE_NFORMATS; f++)
			free(body[f]);
	if (ret)
		log_error("out of memory");
	return ret;
}

static int prom_report(struct usc_sink *k, const struct usc_sink_ctx *c,
		       const struct usc_stats *st, bool final)
{
	struct timespec now;

	if (!final)
		return 0;
	clock_gettime(CLOCK_REALTIME, &now);
	return prom_refresh(k, c, st, &now);	/* the last: until the server closes */
}

static void prom_destroy(struct usc_sink *k)
{
	struct prom_sink *p = of(k);

	serve_close(p->sv);
	for (size_t i = 0; i < p->nconsts; i++)
		free((char *)p->consts[i].name);	/* "name\0value" in one block */
	free(p->consts);
	free(p->events);
	aggsink_destroy(k);
}

static const struct usc_sink_ops prom_ops = {
	.begin = prom_begin,
	.event = prom_event,
	.agg_row = aggsink_row,
	.flush = aggsink_flush,
	.refresh = prom_refresh,
	.report = prom_report,
	.destroy = prom_destroy,
};

/* --label NAME=VALUE, into p->consts. 0 or -EINVAL (logged). */
static int const_labels(struct prom_sink *p, const char *const *labels, size_t n)
{
	p->consts = calloc(n + 1, sizeof(*p->consts));
	if (!p->consts) {
		log_error("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(labels[i], '=');
		char *nv;

		if (!eq) {
			log_error("--label wants NAME=VALUE, not '%s'", labels[i]);
			return -EINVAL;
		}
		nv = strdup(labels[i]);
		if (!nv) {
			log_error("out of memory");
			return -ENOMEM;
		}
		nv[eq - labels[i]] = 0;
		p->consts[p->nconsts++] = (struct expo_label){nv, nv + (eq - labels[i]) + 1,
							       strlen(eq + 1)};
		if (!expo_label_name_ok(nv)) {
			log_error("--label %s: %s", labels[i],
				  expo_label_reserved(nv) ?
				  "uscope sets that label itself (probe, pid, comm, binary, le)" :
				  "a label name is a letter or '_', then letters, digits and '_' "
				  "(not beginning with '__')");
			return -EINVAL;
		}
		for (size_t k = 0; k + 1 < p->nconsts; k++)
			if (!strcmp(p->consts[k].name, nv)) {
				log_error("--label %s: given twice", nv);
				return -EINVAL;
			}
	}
	return 0;
}

int usc_sink_prom(enum usc_prom_kind kind, bool keyed, const char *addr,
		  const char *const *labels, size_t nlabels, struct usc_sink **out)
{
	struct prom_sink *p = calloc(1, sizeof(*p));
	int ret;

	*out = NULL;
	if (!p) {
		log_error("out of memory");
		return -ENOMEM;
	}
	aggsink_init(&p->k, &prom_ops, NULL, false);
	p->kind = kind;
	p->keyed = keyed || kind == USC_PROM_HIST || kind == USC_PROM_LATENCY;
	ret = const_labels(p, labels, nlabels);
	if (!ret)
		ret = serve_open(addr, &p->sv);
	if (ret) {
		prom_destroy(&p->k.base);
		return ret;
	}
	*out = &p->k.base;
	return 0;
}

const char *usc_sink_prom_address(const struct usc_sink *k)
{
	if (!k || k->ops != &prom_ops)
		return NULL;
	return serve_address(container_of(container_of(k, struct agg_sink, base),
					   struct prom_sink, k)->sv);
}
