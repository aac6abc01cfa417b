/* A script's output in bpftrace's formats (bpftrace's src/output.cpp, as
 * 0.17 prints): printf's conversions, values by type, maps sorted and
 * printed as @name[key]: value, hist and lhist with their bars, avg and
 * stats; and the same as JSON lines (bpftrace's -f json). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "resolve/resolve.h"
#include "script/print.h"
#include "stack/stack.h"

void sbuf_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *np;

		while (cap < b->n + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		sbuf_add(b, small, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);

	if (!big) {
		b->oom = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sbuf_add(b, big, (size_t)n);
	free(big);
}

void sbuf_free(struct sbuf *b)
{
	free(b->p);
	*b = (struct sbuf){0};
}

static void json_str(struct sbuf *b, const char *s, size_t n)
{
	sbuf_add(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		switch (c) {
		case '"': sbuf_add(b, "\\\"", 2); break;
		case '\\': sbuf_add(b, "\\\\", 2); break;
		case '\n': sbuf_add(b, "\\n", 2); break;
		case '\r': sbuf_add(b, "\\r", 2); break;
		case '\t': sbuf_add(b, "\\t", 2); break;
		default:
			if (c < 0x20)
				sbuf_printf(b, "\\u%04x", c);
			else
				sbuf_add(b, (const char *)&c, 1);
		}
	}
	sbuf_add(b, "\"", 1);
}

static int64_t rd64(const uint8_t *p)
{
	int64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* An address of process pid as bpftrace's usym shows it: the function's
 * name (demangled), with +offset when asked; else its hex. */
static void usym(struct script_printer *p, pid_t pid, uint64_t addr, bool offset, bool exact,
		 struct sbuf *out)
{
	struct {
		struct usc_stack st;
		uint64_t pc[1];
	} one;
	struct stack_sym syms[16];
	size_t n;

	memset(&one, 0, sizeof(one));
	one.st.n = 1;
	one.st.pc[0] = addr;
	if (exact)
		one.st.exact[0] = 1;
	n = p->cache && pid > 0 ? stack_syms(p->cache, pid, &one.st, 0, syms, 16) : 0;
	if (n && syms[n - 1].func) {
		sbuf_add(out, syms[n - 1].func, strlen(syms[n - 1].func));
		if (offset)
			sbuf_printf(out, "+%llu", (unsigned long long)syms[n - 1].off);
		return;
	}
	sbuf_printf(out, "0x%llx", (unsigned long long)addr);
}

static void stack_str(struct script_printer *p, uint64_t id, int indent, struct sbuf *out)
{
	pid_t pid = 0;
	const struct usc_stack *st = id && p->cache ? stack_interned(p->cache, id, &pid) : NULL;
	struct stack_sym syms[16];

	sbuf_add(out, "\n", 1);
	if (!st)
		return;
	for (uint32_t i = 0; i < st->n; i++) {
		size_t n = stack_syms(p->cache, pid, st, i, syms, 16);

		sbuf_printf(out, "%*s", indent, "");
		if (n && syms[n - 1].func) {
			sbuf_add(out, syms[n - 1].func, strlen(syms[n - 1].func));
			sbuf_printf(out, "+%llu", (unsigned long long)syms[n - 1].off);
		} else {
			sbuf_printf(out, "0x%llx", (unsigned long long)st->pc[i]);
		}
		sbuf_add(out, "\n", 1);
	}
}

/* The probe's name as bpftrace's probe builtin has it. */
static void probe_name(struct script_printer *p, uint64_t v, bool func, struct sbuf *out)
{
	const struct usc_script *s = p->s;

	if (v & 0x80000000u) {
		size_t k = v & 0x7fffffffu;

		if (k < s->nattach && !func) {
			const char *t = s->src + s->attach[k].pos;

			sbuf_add(out, t, s->attach[k].len);
		}
		return;
	}
	if (v >= p->nsites || !p->sites) {
		sbuf_printf(out, "%llu", (unsigned long long)v);
		return;
	}
	const struct usc_site *site = &p->sites[v];
	const struct usc_probe_spec *sp = site->spec;

	if (func) {
		const char *f = site->symbol ? site->symbol : site->label;

		sbuf_add(out, f, strlen(f));
		return;
	}
	if (sp->loc_kind == USC_LOC_USDT)
		sbuf_printf(out, "usdt:%s:%s:%s", site->path, sp->provider, sp->symbol);
	else if (sp->loc_kind == USC_LOC_PYTHON)
		sbuf_printf(out, "py:%s%s%s", sp->module, sp->module[0] ? ":" : "", sp->symbol);
	else
		sbuf_printf(out, "%s:%s:%s", site->is_return ? "uretprobe" : "uprobe", site->path,
			    site->symbol ? site->symbol : site->label);
}

/* A timestamp (CLOCK_MONOTONIC ns) as strftime's format has it, in local
 * time. */
static void tstamp(const char *fmt, uint64_t mono, struct sbuf *out)
{
	struct timespec rt, mt;
	int64_t wall;
	time_t secs;
	struct tm tm;
	char buf[512];
	size_t n;

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	wall = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec -
	       ((int64_t)mt.tv_sec * 1000000000LL + mt.tv_nsec - (int64_t)mono);
	secs = (time_t)(wall / 1000000000LL);
	localtime_r(&secs, &tm);
	n = strftime(buf, sizeof(buf), fmt, &tm);
	sbuf_add(out, buf, n);
}

void script_value_str(struct script_printer *p, const struct ty *t, const uint8_t *b, pid_t pid,
		      int indent, struct sbuf *out)
{
	int64_t v = rd64(b);

	switch (t->kind) {
	case TY_INT:
		if (t->sign)
			sbuf_printf(out, "%lld", (long long)v);
		else
			sbuf_printf(out, "%llu", (unsigned long long)v);
		return;
	case TY_STR:
		sbuf_add(out, (const char *)b, strnlen((const char *)b, p->s->strlen));
		return;
	case TY_BUF:
		for (uint32_t i = 0; i < b[0] && i + 1 < p->s->strlen + 7; i++) {
			unsigned char c = b[1 + i];

			if (isprint(c) && c != '\\')
				sbuf_add(out, (const char *)&c, 1);
			else
				sbuf_printf(out, "\\x%02x", c);
		}
		return;
	case TY_USYM:
		usym(p, (pid_t)rd64(b + 8), (uint64_t)v, false, true, out);
		return;
	case TY_USTACK:
		stack_str(p, (uint64_t)v, indent, out);
		return;
	case TY_FUNC:
		probe_name(p, (uint64_t)v, true, out);
		return;
	case TY_PROBE:
		probe_name(p, (uint64_t)v, false, out);
		return;
	case TY_TSTAMP:
		tstamp(p->s->strtab + t->fmt, (uint64_t)v, out);
		return;
	case TY_TUPLE: {
		uint32_t off = 0;

		sbuf_add(out, "(", 1);
		for (unsigned k = 0; k < t->nelem; k++) {
			if (k)
				sbuf_add(out, ", ", 2);
			script_value_str(p, &t->elem[k], b + off, pid, indent, out);
			off += ty_size(p->s, &t->elem[k]);
		}
		sbuf_add(out, ")", 1);
		return;
	}
	default:
		sbuf_printf(out, "%lld", (long long)v);
		return;
	}
}

/* A value as JSON: numbers bare, the rest quoted. */
static void value_json(struct script_printer *p, const struct ty *t, const uint8_t *b, pid_t pid,
		       struct sbuf *out)
{
	struct sbuf tmp = {0};

	if (t->kind == TY_INT) {
		script_value_str(p, t, b, pid, 0, out);
		return;
	}
	if (t->kind == TY_TUPLE) {
		uint32_t off = 0;

		sbuf_add(out, "[", 1);
		for (unsigned k = 0; k < t->nelem; k++) {
			if (k)
				sbuf_add(out, ",", 1);
			value_json(p, &t->elem[k], b + off, pid, out);
			off += ty_size(p->s, &t->elem[k]);
		}
		sbuf_add(out, "]", 1);
		return;
	}
	script_value_str(p, t, b, pid, 8, &tmp);
	json_str(out, tmp.p ? tmp.p : "", tmp.n);
	sbuf_free(&tmp);
}

void script_format(struct script_printer *p, const struct script_fmt *f, const uint8_t *vals,
		   uint32_t len, pid_t pid, struct sbuf *out)
{
	unsigned k = 0;

	for (uint32_t i = 0; i < f->ntext; i++) {
		const struct script_conv *c;
		char spec[48];
		size_t sl;

		if (f->text[i] != '%') {
			size_t j = i;

			while (j < f->ntext && f->text[j] != '%')
				j++;
			sbuf_add(out, f->text + i, j - i);
			i = (uint32_t)j - 1;
			continue;
		}
		if (i + 1 < f->ntext && f->text[i + 1] == '%') {
			sbuf_add(out, "%", 1);
			i++;
			continue;
		}
		/* skip the conversion as written */
		i++;
		while (i < f->ntext && !strchr("diuxXocspr", f->text[i]))
			i++;
		if (i < f->ntext && f->text[i] == 'r' && i + 1 < f->ntext &&
		    (f->text[i + 1] == 'x' || f->text[i + 1] == 'h'))
			i++;
		if (k >= f->nconv)
			break;
		c = &f->conv[k++];
		if (c->arg.off + c->arg.size > len)
			continue;
		const uint8_t *b = vals + c->arg.off;
		int64_t v = rd64(b);

		sl = strlen(c->spec);
		memcpy(spec, c->spec, sl);
		switch (c->conv) {
		case 'd':
		case 'i':
		case 'u':
		case 'x':
		case 'X':
		case 'o':
			memcpy(spec + sl, "ll", 2);
			spec[sl + 2] = c->conv;
			spec[sl + 3] = 0;
			sbuf_printf(out, spec, (long long)v);
			break;
		case 'c':
			spec[sl] = 'c';
			spec[sl + 1] = 0;
			sbuf_printf(out, spec, (int)(char)v);
			break;
		case 'p':
			spec[sl] = 'p';
			spec[sl + 1] = 0;
			sbuf_printf(out, spec, (void *)(uintptr_t)v);
			break;
		default: {	/* s, r */
			struct sbuf tmp = {0};

			if (c->conv == 'r' && c->arg.ty.kind == TY_BUF) {
				for (uint32_t j = 0; j < b[0] && j + 1 < c->arg.size; j++)
					sbuf_printf(&tmp, "\\x%02x", b[1 + j]);
			} else {
				script_value_str(p, &c->arg.ty, b, pid, 8, &tmp);
			}
			spec[sl] = 's';
			spec[sl + 1] = 0;
			sbuf_printf(out, spec, tmp.p ? tmp.p : "");
			sbuf_free(&tmp);
			break;
		}
		}
	}
}

int script_emit_text(struct script_printer *p, const char *kind, const char *text, size_t n)
{
	struct sbuf b = {0};
	int ret = 0;

	if (!p->json) {
		if (n && fwrite(text, 1, n, p->fp) != n)
			ret = -EIO;
	} else {
		sbuf_printf(&b, "{\"type\": \"%s\", \"data\": ", kind);
		json_str(&b, text, n);
		sbuf_add(&b, "}\n", 2);
		if (b.oom || fwrite(b.p, 1, b.n, p->fp) != b.n)
			ret = -EIO;
	}
	sbuf_free(&b);
	if (ret && !p->failed) {
		p->failed = true;
		log_error("cannot write the script's output: %s", strerror(errno));
	}
	return ret;
}

/* ---- maps ------------------------------------------------------------------ */

struct sortctx {
	const struct usc_script *s;
	const struct script_mapinfo *m;
};

static __thread struct sortctx sort_ctx;

static int64_t avg_of(const uint8_t *v)
{
	const struct script_cs *cs = (const struct script_cs *)v;

	return cs->count ? (int64_t)(cs->sum / (int64_t)cs->count) : 0;
}

static uint64_t total_of(const struct script_mapinfo *m, const uint8_t *v)
{
	uint64_t t = 0;

	for (uint32_t b = 0; b < m->m.nbuckets; b++)
		t += (uint64_t)rd64(v + 8 * b);
	return t;
}

/* bpftrace's sort_by_key: by each key, ints by value, strings as strings. */
static int key_cmp(const struct script_mapinfo *m, const uint8_t *a, const uint8_t *b)
{
	for (int k = 0; k < m->nkeys; k++) {
		const struct script_field *f = &m->keys[k];

		if (f->ty.kind == TY_STR) {
			int c = strncmp((const char *)a + f->off, (const char *)b + f->off, f->size);

			if (c)
				return c;
		} else if (f->ty.kind == TY_INT) {
			int64_t x = rd64(a + f->off), y = rd64(b + f->off);

			if (x != y)
				return f->ty.sign ? (x < y ? -1 : 1) :
				       ((uint64_t)x < (uint64_t)y ? -1 : 1);
		}
	}
	return memcmp(a, b, m->m.keylen);
}

static int row_cmp(const void *pa, const void *pb)
{
	const struct script_row *a = pa, *b = pb;
	const struct script_mapinfo *m = sort_ctx.m;
	int64_t x = 0, y = 0;
	bool sign = true, by_value = true;

	switch (m->m.vk) {
	case SVK_COUNT:
		sign = false;
		/* fallthrough */
	case SVK_SUM:
	case SVK_INT:
		if (m->m.vk == SVK_INT && m->val.kind != TY_INT)
			by_value = false;
		if (m->m.vk == SVK_INT)
			sign = m->val.sign;
		x = rd64(a->val);
		y = rd64(b->val);
		break;
	case SVK_MIN:
	case SVK_MAX:
		x = ((const struct script_mm *)a->val)->v;
		y = ((const struct script_mm *)b->val)->v;
		break;
	case SVK_AVG:
	case SVK_STATS:
		x = avg_of(a->val);
		y = avg_of(b->val);
		break;
	case SVK_HIST:
	case SVK_LHIST:
		x = (int64_t)total_of(m, a->val);
		y = (int64_t)total_of(m, b->val);
		sign = false;
		break;
	default:
		by_value = false;
	}
	if (by_value && x != y)
		return sign ? (x < y ? -1 : 1) : ((uint64_t)x < (uint64_t)y ? -1 : 1);
	return key_cmp(m, a->key, b->key);
}

static void key_text(struct script_printer *p, const struct script_mapinfo *m, const uint8_t *key,
		     bool json, struct sbuf *out)
{
	if (json) {
		struct sbuf t = {0};

		for (int k = 0; k < m->nkeys; k++) {
			if (k)
				sbuf_add(&t, ",", 1);
			script_value_str(p, &m->keys[k].ty, key + m->keys[k].off, 0, 4, &t);
		}
		json_str(out, t.p ? t.p : "", t.n);
		sbuf_free(&t);
		return;
	}
	sbuf_printf(out, "@%s", m->name);
	if (!m->nkeys)
		return;
	sbuf_add(out, "[", 1);
	for (int k = 0; k < m->nkeys; k++) {
		if (k)
			sbuf_add(out, ", ", 2);
		script_value_str(p, &m->keys[k].ty, key + m->keys[k].off, 0, 4, out);
	}
	sbuf_add(out, "]", 1);
}

/* bpftrace's hist_index_label: 2^power with K, M, G, T. */
static void pow_label(int power, struct sbuf *out)
{
	const char *sfx = "";

	if (power >= 40) {
		sfx = "T";
		power -= 40;
	} else if (power >= 30) {
		sfx = "G";
		power -= 30;
	} else if (power >= 20) {
		sfx = "M";
		power -= 20;
	} else if (power >= 10) {
		sfx = "K";
		power -= 10;
	}
	sbuf_printf(out, "%d%s", 1 << power, sfx);
}

static void lin_label(int64_t v, struct sbuf *out)
{
	if (v == 0)
		sbuf_printf(out, "0");
	else if (v % 1048576 == 0)
		sbuf_printf(out, "%lldM", (long long)(v / 1048576));
	else if (v % 1024 == 0)
		sbuf_printf(out, "%lldK", (long long)(v / 1024));
	else
		sbuf_printf(out, "%lld", (long long)v);
}

static void bar_line(struct sbuf *out, const char *hdr, uint64_t count, uint64_t max)
{
	int w = max ? (int)((float)count / (float)max * 52) : 0;
	char bar[53];

	memset(bar, '@', (size_t)w);
	bar[w] = 0;
	sbuf_printf(out, "%-16s%8llu |%-52s|\n", hdr, (unsigned long long)count, bar);
}

static void hist_text(const struct script_mapinfo *m, const uint8_t *v, uint32_t div,
		      struct sbuf *out)
{
	int lo = -1, hi = -1;
	uint64_t max = 0;
	bool lin = m->m.vk == SVK_LHIST;
	int nb = (int)m->m.nbuckets, buckets = nb - 2;

	for (int i = 0; i < nb; i++) {
		uint64_t c = (uint64_t)rd64(v + 8 * i);

		if (c) {
			if (lo < 0)
				lo = i;
			hi = i;
		}
		if (c > max)
			max = c;
	}
	for (int i = lo; lo >= 0 && i <= hi; i++) {
		struct sbuf h = {0};
		uint64_t c = (uint64_t)rd64(v + 8 * i);

		if (!lin) {
			if (i == 0)
				sbuf_printf(&h, "(..., 0)");
			else if (i == 1)
				sbuf_printf(&h, "[0]");
			else if (i == 2)
				sbuf_printf(&h, "[1]");
			else {
				sbuf_add(&h, "[", 1);
				pow_label(i - 2, &h);
				sbuf_add(&h, ", ", 2);
				pow_label(i - 1, &h);
				sbuf_add(&h, ")", 1);
			}
			bar_line(out, h.p ? h.p : "", c / (div ? div : 1), max);
		} else {
			if (i == 0) {
				sbuf_add(&h, "(..., ", 6);
				lin_label(m->m.lmin, &h);
				sbuf_add(&h, ")", 1);
			} else if (i == buckets + 1) {
				sbuf_add(&h, "[", 1);
				lin_label(m->m.lmax, &h);
				sbuf_add(&h, ", ...)", 6);
			} else {
				sbuf_add(&h, "[", 1);
				lin_label((i - 1) * m->m.lstep + m->m.lmin, &h);
				sbuf_add(&h, ", ", 2);
				lin_label(i * m->m.lstep + m->m.lmin, &h);
				sbuf_add(&h, ")", 1);
			}
			bar_line(out, h.p ? h.p : "", c, max);
		}
		sbuf_free(&h);
	}
}

static void hist_json(const struct script_mapinfo *m, const uint8_t *v, uint32_t div,
		      struct sbuf *out)
{
	int lo = -1, hi = -1, nb = (int)m->m.nbuckets, buckets = nb - 2;
	bool lin = m->m.vk == SVK_LHIST, first = true;

	for (int i = 0; i < nb; i++)
		if (rd64(v + 8 * i)) {
			if (lo < 0)
				lo = i;
			hi = i;
		}
	sbuf_add(out, "[", 1);
	for (int i = lo; lo >= 0 && i <= hi; i++) {
		uint64_t c = (uint64_t)rd64(v + 8 * i);

		if (!first)
			sbuf_add(out, ", ", 2);
		first = false;
		sbuf_add(out, "{", 1);
		if (!lin) {
			if (i == 0)
				sbuf_printf(out, "\"max\": -1, ");
			else if (i == 1)
				sbuf_printf(out, "\"min\": 0, \"max\": 0, ");
			else if (i == 2)
				sbuf_printf(out, "\"min\": 1, \"max\": 1, ");
			else
				sbuf_printf(out, "\"min\": %lld, \"max\": %lld, ", 1LL << (i - 2),
					    (1LL << (i - 1)) - 1);
			c /= div ? div : 1;
		} else {
			if (i == 0)
				sbuf_printf(out, "\"max\": %lld, ", (long long)m->m.lmin - 1);
			else if (i == buckets + 1)
				sbuf_printf(out, "\"min\": %lld, ", (long long)m->m.lmax);
			else
				sbuf_printf(out, "\"min\": %lld, \"max\": %lld, ",
					    (long long)((i - 1) * m->m.lstep + m->m.lmin),
					    (long long)(i * m->m.lstep + m->m.lmin - 1));
		}
		sbuf_printf(out, "\"count\": %llu}", (unsigned long long)c);
	}
	sbuf_add(out, "]", 1);
}

/* A row's value as text (not hist, lhist: their lines). */
static void val_text(struct script_printer *p, const struct script_mapinfo *m, const uint8_t *v,
		     uint32_t div, bool json, struct sbuf *out)
{
	uint64_t d = div ? div : 1;

	switch (m->m.vk) {
	case SVK_COUNT:
		sbuf_printf(out, "%llu", (unsigned long long)((uint64_t)rd64(v) / d));
		return;
	case SVK_SUM:
		sbuf_printf(out, "%lld", (long long)(rd64(v) / (int64_t)d));
		return;
	case SVK_MIN:
	case SVK_MAX:
		sbuf_printf(out, "%lld", (long long)(((const struct script_mm *)v)->v / (int64_t)d));
		return;
	case SVK_AVG:
		sbuf_printf(out, "%lld", (long long)(avg_of(v) / (int64_t)d));
		return;
	case SVK_STATS: {
		const struct script_cs *cs = (const struct script_cs *)v;

		if (json)
			sbuf_printf(out, "{\"count\": %llu, \"average\": %lld, \"total\": %lld}",
				    (unsigned long long)cs->count, (long long)avg_of(v),
				    (long long)cs->sum);
		else
			sbuf_printf(out, "count %llu, average %lld, total %lld",
				    (unsigned long long)cs->count, (long long)avg_of(v),
				    (long long)cs->sum);
		return;
	}
	default:
		if (m->val.kind == TY_INT && div > 1) {
			sbuf_printf(out, m->val.sign ? "%lld" : "%llu", m->val.sign ?
				    (long long)(rd64(v) / (int64_t)d) :
				    (long long)((uint64_t)rd64(v) / d));
			return;
		}
		if (json)
			value_json(p, &m->val, v, 0, out);
		else
			script_value_str(p, &m->val, v, 0, 8, out);
		return;
	}
}

int script_print_map(struct script_printer *p, int mi, struct script_row *rows, size_t n,
		     uint32_t top, uint32_t div)
{
	const struct script_mapinfo *m = &p->s->maps[mi];
	bool hist = m->m.vk == SVK_HIST || m->m.vk == SVK_LHIST;
	bool stats = m->m.vk == SVK_AVG || m->m.vk == SVK_STATS;
	size_t first = 0;
	struct sbuf out = {0};
	int ret = 0;

	sort_ctx = (struct sortctx){p->s, m};
	qsort(rows, n, sizeof(*rows), row_cmp);
	if (top && n > top)
		first = n - top;
	if (p->json) {
		if (!n)
			return 0;
		sbuf_printf(&out, "{\"type\": \"%s\", \"data\": {", hist ? "hist" : stats ? "stats" :
			    "map");
		json_str(&out, "@", 1);
		out.n--;	/* "@name" */
		sbuf_add(&out, m->name, strlen(m->name));
		sbuf_add(&out, "\": ", 3);
		if (m->nkeys)
			sbuf_add(&out, "{", 1);
		for (size_t i = first; i < n; i++) {
			if (i > first)
				sbuf_add(&out, ", ", 2);
			if (m->nkeys) {
				key_text(p, m, rows[i].key, true, &out);
				sbuf_add(&out, ": ", 2);
			}
			if (hist)
				hist_json(m, rows[i].val, div, &out);
			else
				val_text(p, m, rows[i].val, div, true, &out);
		}
		if (m->nkeys)
			sbuf_add(&out, "}", 1);
		sbuf_add(&out, "}}\n", 3);
	} else {
		/* bpftrace's map_to_str: rows joined by "\n" (by "" for a map of
		 * stacks or symbols), then a newline; a stats map one more */
		bool nodelim = m->val.kind == TY_USTACK || m->val.kind == TY_USYM;

		for (size_t i = first; i < n; i++) {
			if (i > first && !nodelim)
				sbuf_add(&out, "\n", 1);
			key_text(p, m, rows[i].key, false, &out);
			sbuf_add(&out, ": ", 2);
			if (hist) {
				sbuf_add(&out, "\n", 1);
				hist_text(m, rows[i].val, div, &out);
			} else {
				val_text(p, m, rows[i].val, div, false, &out);
			}
		}
		sbuf_add(&out, "\n", 1);
		if (stats)
			sbuf_add(&out, "\n", 1);
	}
	if (out.oom) {
		ret = -ENOMEM;
	} else if (out.n && fwrite(out.p, 1, out.n, p->fp) != out.n) {
		ret = -EIO;
		if (!p->failed)
			log_error("cannot write the script's output: %s", strerror(errno));
		p->failed = true;
	}
	sbuf_free(&out);
	return ret;
}
