/* The summary sink, on stderr: the readiness line once every probe is in
 * place, how the sites went to the engines, and at the end the events and
 * losses per probe label (every site of a glob or a USDT probe adds up
 * under its label). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sink/sink.h"
#include "stack/unwtab.h"

struct summary_sink {
	struct usc_sink base;
	FILE *fp;
	bool summary, verbose;
};

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

		for (size_t i = 0; i < s->nsites; i++) {
			const char *why = s->place[i].why;
			size_t rl = rule_len(why), k;

			if (s->sites[i].probe != p || !shown(s, i))
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
			if (s->sites[i].probe == p && shown(s, i) && s->place[i].why[0])
				fprintf(ss->fp, "uscope:   %s at 0x%llx: on %s: %s\n",
					s->sites[i].symbol ? s->sites[i].symbol : s->sites[i].label,
					(unsigned long long)s->sites[i].vaddr,
					s->engine_names[s->place[i].engine], s->place[i].why);
	}
}

static int summary_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct summary_sink *ss = container_of(k, struct summary_sink, base);
	size_t n = 0;

	for (size_t i = 0; i < s->nsites; i++)
		n += shown(s, i);
	if (s->replayed)
		fprintf(ss->fp, "uscope: reading %zu recorded probe%s\n", n, n == 1 ? "" : "s");
	else
		fprintf(ss->fp, "uscope: tracing %zu probe%s\n", n, n == 1 ? "" : "s");
	print_engines(ss, s);
	fflush(ss->fp);
	return 0;
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

static int summary_report(struct usc_sink *k, const struct usc_sink_ctx *s,
			  const struct usc_stats *st, bool final)
{
	struct summary_sink *ss = container_of(k, struct summary_sink, base);
	bool unattributed = false;

	if (!final)
		return 0;
	if (!ss->summary) {
		/* the commands that print no summary say this still */
		print_fallbacks(ss, s, st);
		fflush(ss->fp);
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
	if (s->record.on && s->record.snapshot) {
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
				(unsigned long long)s->record.snapshot);
	}
	print_fallbacks(ss, s, st);
	fprintf(ss->fp, "uscope: %llu events, %llu lost%s\n", (unsigned long long)st->events,
		(unsigned long long)st->lost,
		unattributed && st->lost ? " (the kernel does not say which probes lost them)" : "");
	for (size_t i = 0; i < s->nsites; i++) {
		uint64_t events = 0;
		int64_t lost = 0;
		bool first = true;

		if (!shown(s, i))
			continue;
		for (size_t k2 = 0; k2 < i && first; k2++)
			first = !shown(s, k2) || strcmp(s->sites[k2].label, s->sites[i].label) != 0;
		if (!first)
			continue;
		for (size_t k2 = i; k2 < s->nsites; k2++) {
			if (!shown(s, k2) || strcmp(s->sites[k2].label, s->sites[i].label))
				continue;
			events += st->sites[k2].events;
			lost = lost < 0 || st->sites[k2].lost < 0 ? -1 : lost + st->sites[k2].lost;
		}
		if (lost >= 0)
			fprintf(ss->fp, "  %s: %llu events, %lld lost\n", s->sites[i].label,
				(unsigned long long)events, (long long)lost);
		else
			fprintf(ss->fp, "  %s: %llu events\n", s->sites[i].label,
				(unsigned long long)events);
	}
	fflush(ss->fp);
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

struct usc_sink *usc_sink_summary(FILE *fp, bool summary, bool verbose)
{
	struct summary_sink *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	ss->base.ops = &summary_ops;
	ss->fp = fp;
	ss->summary = summary;
	ss->verbose = verbose;
	return &ss->base;
}
