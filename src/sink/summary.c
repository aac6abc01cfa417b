/* The summary sink, on stderr: the readiness line once every probe is in
 * place (what is traced: functions, USDT probes, lines, addresses, and the
 * sites they took), how the sites went to the engines (one line a probe as
 * the user wrote it: a return probe flow adds is its entry's), and at the
 * end the events and losses per probe label (every site of a glob or a
 * USDT probe adds up under its label), and of the lost those whose wait
 * for room ran out (--max-wait). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sink/sink.h"
#include "sink/sink_int.h"
#include "stack/unwtab.h"

struct summary_sink {
	struct usc_sink base;
	FILE *fp;		/* while a batch is open, the batch's */
	enum usc_summary_mode mode;
	bool verbose;
	int64_t hits;		/* at the final report; -1 before */
	int write_error;	/* errno, reported once */
};

/* COMMAND shares stderr too: what begin and report print is gathered and
 * written at their end in one write(2) of whole lines (sink_write). */
struct batch {
	FILE *to;
	char *buf;
	size_t len;
};

static void batch_open(struct summary_sink *ss, struct batch *b)
{
	FILE *m;

	*b = (struct batch){.to = ss->fp};
	m = open_memstream(&b->buf, &b->len);
	if (m)
		ss->fp = m;	/* else straight to the file, as it comes */
}

static void batch_close(struct summary_sink *ss, struct batch *b)
{
	if (ss->fp == b->to)
		return;
	fclose(ss->fp);
	ss->fp = b->to;
	if (b->buf)
		sink_write(ss->fp, b->buf, b->len, &ss->write_error);
	free(b->buf);
}

#define BRIEF_LABELS 5	/* labels with events a brief summary shows */

/* A site the user sees: placed, not one of resolve's hidden helpers. */
static bool shown(const struct usc_sink_ctx *s, size_t i)
{
	return !s->sites[i].hidden && s->place[i].engine >= 0;
}

/* The rule of a reason: its text up to the details in parentheses. */
static size_t rule_len(const char *why)
{
	const char *p = strstr(why, " (");

	return p ? (size_t)(p - why) : strlen(why);
}

struct rule {
	const char *text;
	size_t len, n;
};

static int cmp_rule(const void *a, const void *b)
{
	const struct rule *x = a, *y = b;

	return x->n != y->n ? (x->n > y->n ? -1 : 1) : 0;
}

static size_t used_engines(const struct usc_sink_ctx *s)
{
	size_t used = 0;

	for (size_t e = 0; e < s->nengines; e++)
		used += s->engine_nsites[e] > 0;
	return used;
}

/* Do probes p and q read the same (a return probe flow, latency and record
 * add to an entry's is its text again)? */
static bool same_text(const struct usc_sink_ctx *s, size_t p, size_t q)
{
	return p == q || !strcmp(s->specs[p].text, s->specs[q].text);
}

static bool first_of_text(const struct usc_sink_ctx *s, size_t p)
{
	for (size_t q = 0; q < p; q++)
		if (same_text(s, q, p))
			return false;
	return true;
}

/* One line per probe: how many of its sites each engine took, and the main
 * reasons some left the engine preferred before it. */
static void print_engines(struct summary_sink *ss, const struct usc_sink_ctx *s)
{
	if (used_engines(s) < 2 && !ss->verbose)
		return;
	for (size_t p = 0; p < s->nspecs; p++) {
		size_t per[8] = {0}, nr = 0, total = 0;
		struct rule rules[8];
		char line[1024];
		int len;

		if (!first_of_text(s, p))
			continue;	/* said with the probe of its text */
		for (size_t i = 0; i < s->nsites; i++) {
			const char *why = s->place[i].why;
			size_t rl = rule_len(why), k;

			if (!same_text(s, s->sites[i].probe, p) || !shown(s, i))
				continue;
			total++;
			if ((size_t)s->place[i].engine < 8)
				per[s->place[i].engine]++;
			if (!why[0])
				continue;
			for (k = 0; k < nr; k++)
				if (rules[k].len == rl && !memcmp(rules[k].text, why, rl))
					break;
			if (k == nr && nr < 8)
				rules[nr++] = (struct rule){why, rl, 0};
			if (k < nr)
				rules[k].n++;
		}
		if (!total)
			continue;
		len = snprintf(line, sizeof(line), "uscope: %s: ", s->specs[p].text);
		for (size_t e = 0, first = 1; e < s->nengines && e < 8; e++) {
			if (!per[e])
				continue;
			len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%zu %s on %s",
					first ? "" : ", ", per[e], per[e] == 1 ? "site" : "sites",
					s->engine_names[e]);
			first = 0;
			if ((size_t)len >= sizeof(line))
				break;
		}
		qsort(rules, nr, sizeof(*rules), cmp_rule);
		for (size_t k = 0; k < nr && (size_t)len < sizeof(line); k++)
			len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%zu: %.*s",
					k ? ", " : " (moved: ", rules[k].n, (int)rules[k].len,
					rules[k].text);
		if ((size_t)len < sizeof(line) && nr)
			snprintf(line + len, sizeof(line) - (size_t)len, ")");
		fprintf(ss->fp, "%s\n", line);
		if (!ss->verbose)
			continue;
		for (size_t i = 0; i < s->nsites; i++)
			if (same_text(s, s->sites[i].probe, p) && shown(s, i) && s->place[i].why[0])
				fprintf(ss->fp, "uscope:   %s at 0x%llx: on %s: %s\n", s->sites[i].label,
					(unsigned long long)s->sites[i].vaddr,
					s->engine_names[s->place[i].engine], s->place[i].why);
	}
}

/* What a site traces, for the readiness line: a function (a glob's match, an
 * inlined copy, a return of it), a USDT probe, a source line, an address. */
enum unit_kind { U_FUNCTION, U_USDT, U_LINE, U_ADDRESS, U_NKINDS };

struct unit {
	enum unit_kind kind;
	const char *a, *b;	/* the file and the name, or the probe's text */
	uint64_t v;
};

static int cmp_unit(const void *x, const void *y)
{
	const struct unit *p = x, *q = y;
	int c;

	if (p->kind != q->kind)
		return p->kind < q->kind ? -1 : 1;
	if ((c = strcmp(p->a, q->a)) || (c = strcmp(p->b, q->b)))
		return c;
	return p->v < q->v ? -1 : p->v > q->v;
}

static struct unit unit_of(const struct usc_sink_ctx *s, const struct usc_site *st)
{
	const struct usc_probe_spec *sp = &s->specs[st->probe];
	const char *path = st->path ? st->path : "";

	if (sp->loc_kind == USC_LOC_USDT)
		return (struct unit){U_USDT, path, st->label, 0};
	if (sp->loc_kind == USC_LOC_LINE)
		return (struct unit){U_LINE, sp->text, "", 0};
	if (sp->loc_kind == USC_LOC_ADDRESS || !st->symbol)
		return (struct unit){U_ADDRESS, path, "", st->vaddr};
	return (struct unit){U_FUNCTION, path, st->symbol, 0};
}

/* The py: probes (their entry and return one): "py:app:* (the Python
 * functions it names, as they are called)", or how many. Appended to buf
 * (after other units: " and ..."); the length written. */
/* (not inlined: snprintf may cut it, as it should) */
__attribute__((noinline)) static int what_python(const struct usc_sink_ctx *s, char *buf, size_t len,
						 bool after)
{
	size_t n = 0, first = 0;

	for (size_t i = 0; i < s->nsites; i++) {
		size_t p = s->sites[i].probe;
		bool seen = false;

		if (!shown(s, i) || !s->sites[i].python)
			continue;
		for (size_t k = 0; k < i && !seen; k++)
			seen = shown(s, k) && s->sites[k].python && same_text(s, s->sites[k].probe, p);
		if (!seen && !n++)
			first = p;
	}
	if (!n)
		return 0;
	if (n == 1)
		return snprintf(buf, len, "%s%.200s (the Python functions it names, as they are "
				"called)", after ? " and " : "", s->specs[first].text);
	return snprintf(buf, len, "%s%zu py: probes (the Python functions they name, as "
			"they are called)", after ? " and " : "", n);
}

/* "163 functions (429 sites)": what the shown sites trace, each kind
 * counted once, and the sites when they are more. */
static void what_is_traced(const struct usc_sink_ctx *s, char *buf, size_t len)
{
	static const char *const names[U_NKINDS][2] = {
		{"function", "functions"}, {"USDT probe", "USDT probes"},
		{"line", "lines"}, {"address", "addresses"},
	};
	struct unit *u = calloc(s->nsites + 1, sizeof(*u));
	size_t n = 0, per[U_NKINDS] = {0}, kinds = 0, said = 0, units = 0;
	int used = 0;

	/* a py: probe's functions are matched as CPython calls them: said
	 * as the probe, not as a function and its sites */
	for (size_t i = 0; u && i < s->nsites; i++)
		if (shown(s, i) && !s->sites[i].python)
			u[n++] = unit_of(s, &s->sites[i]);
	if (!u) {	/* no memory: the sites alone */
		for (size_t i = 0; i < s->nsites; i++)
			n += shown(s, i);
		snprintf(buf, len, "%zu site%s", n, n == 1 ? "" : "s");
		return;
	}
	qsort(u, n, sizeof(*u), cmp_unit);
	for (size_t i = 0; i < n; i++)
		if (!i || cmp_unit(&u[i - 1], &u[i])) {
			kinds += !per[u[i].kind]++;
			units++;
		}
	free(u);
	buf[0] = 0;
	for (int k = 0; k < U_NKINDS && (size_t)used < len; k++) {
		if (!per[k])
			continue;
		said++;
		used += snprintf(buf + used, len - (size_t)used, "%s%zu %s",
				 said == 1 ? "" : said == kinds ? " and " : ", ", per[k],
				 names[k][per[k] != 1]);
	}
	if (n != units && (size_t)used < len)
		used += snprintf(buf + used, len - (size_t)used, " (%zu sites)", n);
	if ((size_t)used < len)
		used += what_python(s, buf + used, len - (size_t)used, kinds > 0);
	if (!buf[0] && len > 8)
		snprintf(buf, len, "nothing");
}

static int summary_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct summary_sink *ss = container_of(k, struct summary_sink, base);
	struct batch b;
	char what[256];

	what_is_traced(s, what, sizeof(what));
	batch_open(ss, &b);
	fprintf(ss->fp, "uscope: %s %s", s->replayed ? "reading a recording of" : "tracing", what);
	if (s->nprocs)	/* system-wide on inject: the processes it runs in */
		fprintf(ss->fp, " in %zu process%s", s->nprocs, s->nprocs == 1 ? "" : "es");
	fputc('\n', ss->fp);
	print_engines(ss, s);
	fflush(ss->fp);
	batch_close(ss, &b);
	return 0;
}

struct label_sum {
	const char *label;
	uint64_t events;
	int64_t lost;		/* -1: the kernel does not say */
	uint64_t waited;	/* of the lost, waits for room that ran out */
};

static int by_events(const void *a, const void *b)
{
	const struct label_sum *x = a, *y = b;

	return x->events != y->events ? (x->events > y->events ? -1 : 1) :
					strcmp(x->label, y->label);
}

static void print_label(struct summary_sink *ss, const struct label_sum *l)
{
	char why[96] = "";

	if (l->waited)
		snprintf(why, sizeof(why), " (%llu found no room within --max-wait)",
			 (unsigned long long)l->waited);
	if (l->lost >= 0)
		fprintf(ss->fp, "  %s: %llu events, %lld lost%s\n", l->label,
			(unsigned long long)l->events, (long long)l->lost, why);
	else
		fprintf(ss->fp, "  %s: %llu events\n", l->label, (unsigned long long)l->events);
}

/* The events and losses of each probe label, in site order. Brief (record,
 * export without -v): only the labels that lost some, then the few with the
 * most events, and how many more have events. */
static void print_labels(struct summary_sink *ss, const struct usc_sink_ctx *s,
			 const struct usc_stats *st)
{
	struct label_sum *l = calloc(s->nsites + 1, sizeof(*l));
	size_t n = 0, busy = 0, printed = 0;
	bool brief = ss->mode == USC_SUMMARY_BRIEF && !ss->verbose;

	if (!l)
		return;
	for (size_t i = 0; i < s->nsites; i++) {
		size_t k;

		if (!shown(s, i))
			continue;
		for (k = 0; k < n && strcmp(l[k].label, s->sites[i].label); k++)
			;
		if (k == n)
			l[n++] = (struct label_sum){s->sites[i].label, 0, 0, 0};
		l[k].events += st->sites[i].events;
		l[k].lost = l[k].lost < 0 || st->sites[i].lost < 0 ? -1 :
			    l[k].lost + st->sites[i].lost;
		l[k].waited += st->sites[i].lost_wait;
	}
	if (!brief) {
		for (size_t k = 0; k < n; k++)
			print_label(ss, &l[k]);
		free(l);
		return;
	}
	for (size_t k = 0; k < n; k++)
		if (l[k].lost > 0) {
			print_label(ss, &l[k]);
			printed++;
		}
	qsort(l, n, sizeof(*l), by_events);
	for (size_t k = 0; k < n; k++) {
		if (!l[k].events || l[k].lost > 0)
			continue;
		if (busy++ < BRIEF_LABELS) {
			print_label(ss, &l[k]);
			printed++;
		}
	}
	if (n > printed && busy > BRIEF_LABELS)
		fprintf(ss->fp, "  (%zu more probes, %zu of them with events: -v lists each)\n",
			n - printed, busy - BRIEF_LABELS);
	else if (n > printed)
		fprintf(ss->fp, "  (%zu more probes without events: -v lists each)\n", n - printed);
	free(l);
}

/* $ustack: the hits whose stack was copied because the walk where the
 * probe runs could not go on, by why (enum stack_fallback); with -v, by
 * probe too. */
static void print_fallbacks(struct summary_sink *ss, const struct usc_sink_ctx *s,
			    const struct usc_stats *st)
{
	uint64_t by[USC_STACK_FB_NR] = {0}, total = 0;

	for (size_t i = 0; i < s->nsites; i++)
		for (unsigned w = 1; w < USC_STACK_FB_NR && shown(s, i); w++)
			by[w] += st->sites[i].stack_fallback[w];
	for (unsigned w = 1; w < USC_STACK_FB_NR; w++)
		total += by[w];
	if (!total)
		return;
	fprintf(ss->fp, "uscope: %llu hit%s fell back to a copy of the stack:",
		(unsigned long long)total, total == 1 ? "" : "s");
	for (unsigned w = 1, first = 1; w < USC_STACK_FB_NR; w++)
		if (by[w]) {
			fprintf(ss->fp, "%s %s %llu", first ? "" : ",", stack_fallback_name(w),
				(unsigned long long)by[w]);
			first = 0;
		}
	fputc('\n', ss->fp);
	for (size_t i = 0; i < s->nsites && ss->verbose; i++) {
		bool any = false;

		for (unsigned w = 1; w < USC_STACK_FB_NR; w++)
			any |= st->sites[i].stack_fallback[w] > 0;
		if (!any || !shown(s, i))
			continue;
		fprintf(ss->fp, "uscope:   %s at 0x%llx:", s->sites[i].label,
			(unsigned long long)s->sites[i].vaddr);
		for (unsigned w = 1; w < USC_STACK_FB_NR; w++)
			if (st->sites[i].stack_fallback[w])
				fprintf(ss->fp, " %s %llu", stack_fallback_name(w),
					(unsigned long long)st->sites[i].stack_fallback[w]);
		fputc('\n', ss->fp);
	}
}

/* $ustack: the hits counted where the probe ran with their stack as far as
 * it was walked (the bpf engine, when a burst left no room for a copy). */
static void print_partial(struct summary_sink *ss, const struct usc_sink_ctx *s,
			  const struct usc_stats *st)
{
	uint64_t by[USC_STACK_FB_NR] = {0}, total = 0;

	for (size_t i = 0; i < s->nsites; i++)
		for (unsigned w = 1; w < USC_STACK_FB_NR && shown(s, i); w++)
			by[w] += st->sites[i].stack_partial[w];
	for (unsigned w = 1; w < USC_STACK_FB_NR; w++)
		total += by[w];
	if (!total)
		return;
	fprintf(ss->fp, "uscope: %llu hit%s counted with the stack as far as it was walked (no "
		"room for a copy to unwind; their rows say where it stopped):",
		(unsigned long long)total, total == 1 ? "" : "s");
	for (unsigned w = 1, first = 1; w < USC_STACK_FB_NR; w++)
		if (by[w]) {
			fprintf(ss->fp, "%s %s %llu", first ? "" : ",", stack_fallback_name(w),
				(unsigned long long)by[w]);
			first = 0;
		}
	fputc('\n', ss->fp);
}

/* System-wide on inject: the processes traced, when some started after
 * attach (the readiness line said the others). */
static void print_procs(struct summary_sink *ss, const struct usc_sink_ctx *s)
{
	if (s->nlate)
		fprintf(ss->fp, "uscope: traced in %zu process%s, %zu of them started after "
			"attach\n", s->nprocs + s->nlate, s->nprocs + s->nlate == 1 ? "" : "es",
			s->nlate);
}

static int summary_report(struct usc_sink *k, const struct usc_sink_ctx *s,
			  const struct usc_stats *st, bool final)
{
	struct summary_sink *ss = container_of(k, struct summary_sink, base);
	bool unattributed = false;
	struct batch b;

	if (!final)
		return 0;
	ss->hits = (int64_t)st->lost;
	for (size_t i = 0; i < s->nsites; i++) {
		const struct usc_site_stats *x = &st->sites[i];

		if (shown(s, i))
			ss->hits += (int64_t)(x->hits > (int64_t)x->events ? (uint64_t)x->hits :
					      x->events) + (int64_t)x->agg_full;
	}
	batch_open(ss, &b);
	if (ss->mode == USC_SUMMARY_NONE) {
		/* the commands that print no summary say this still */
		print_fallbacks(ss, s, st);
		print_partial(ss, s, st);
		print_procs(ss, s);
		batch_close(ss, &b);
		return 0;
	}
	if (used_engines(s) > 1) {
		fprintf(ss->fp, "uscope: sites:");
		for (size_t e = 0, first = 1; e < s->nengines; e++)
			if (s->engine_nsites[e]) {
				fprintf(ss->fp, "%s %zu on %s", first ? "" : ",", s->engine_nsites[e],
					s->engine_names[e]);
				first = 0;
			}
		fputc('\n', ss->fp);
	}
	for (size_t i = 0; i < s->nsites; i++)
		unattributed |= shown(s, i) && st->sites[i].lost < 0;
	if (s->set->record.on && s->set->record.snapshot) {
		uint64_t hits = 0;
		bool known = true;

		for (size_t i = 0; i < s->nsites; i++)
			if (shown(s, i)) {
				known &= st->sites[i].hits >= 0;
				hits += st->sites[i].hits > 0 ? (uint64_t)st->sites[i].hits : 0;
			}
		if (known && hits >= st->events)
			fprintf(ss->fp, "uscope: the flight recorder kept the newest %llu of %llu "
				"records (%llu bytes a thread)\n", (unsigned long long)st->events,
				(unsigned long long)hits,
				(unsigned long long)s->set->record.snapshot);
	}
	print_fallbacks(ss, s, st);
	print_partial(ss, s, st);
	print_procs(ss, s);
	fprintf(ss->fp, "uscope: %llu events, %llu lost%s\n", (unsigned long long)st->events,
		(unsigned long long)st->lost,
		unattributed && st->lost ? " (the kernel does not say which probes lost them)" : "");
	print_labels(ss, s, st);
	batch_close(ss, &b);
	return 0;
}

static void summary_destroy(struct usc_sink *k)
{
	free(container_of(k, struct summary_sink, base));
}

static const struct usc_sink_ops summary_ops = {
	.begin = summary_begin,
	.report = summary_report,
	.destroy = summary_destroy,
};

struct usc_sink *usc_sink_summary(FILE *fp, enum usc_summary_mode mode, bool verbose)
{
	struct summary_sink *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	ss->base.ops = &summary_ops;
	ss->fp = fp;
	ss->mode = mode;
	ss->verbose = verbose;
	ss->hits = -1;
	return &ss->base;
}

int64_t usc_sink_summary_hits(const struct usc_sink *k)
{
	return k ? container_of(k, const struct summary_sink, base)->hits : -1;
}
