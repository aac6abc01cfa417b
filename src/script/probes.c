/* Attach points, as bpftrace writes them, read: BEGIN, END,
 * interval:s:N (ms, us, hz), uprobe:BINARY:FUNCTION[+OFFSET] (u:),
 * uprobe:BINARY:ADDRESS, uretprobe: (ur:), usdt:BINARY:[PROVIDER:]NAME
 * (U:), and uscope's own py:[MODULE:]FUNCTION. BINARY is a path, a
 * library's short name (libc) or a program on PATH; a part may be quoted.
 * The kernel's probe types (kprobe:, tracepoint: ...) are refused here, in
 * one line, before anything is attached. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "script/script_int.h"

/* bpftrace's probe types uscope does not have: what to say. */
static const struct {
	const char *name;
	const char *what;
} kernel_types[] = {
	{"kprobe", "kernel functions"}, {"k", "kernel functions"},
	{"kretprobe", "kernel functions"}, {"kr", "kernel functions"},
	{"kfunc", "kernel functions"}, {"f", "kernel functions"},
	{"kretfunc", "kernel functions"}, {"fr", "kernel functions"},
	{"fentry", "kernel functions"}, {"fexit", "kernel functions"},
	{"tracepoint", "kernel tracepoints"}, {"t", "kernel tracepoints"},
	{"rawtracepoint", "kernel tracepoints"}, {"rt", "kernel tracepoints"},
	{"software", "the kernel's software events"}, {"s", "the kernel's software events"},
	{"hardware", "hardware counters"}, {"h", "hardware counters"},
	{"profile", "sampling at a frequency"}, {"p", "sampling at a frequency"},
	{"watchpoint", "watchpoints"}, {"w", "watchpoints"},
	{"asyncwatchpoint", "watchpoints"}, {"aw", "watchpoints"},
	{"iter", "kernel iterators"}, {"it", "kernel iterators"},
	{"self", "bpftrace's own signals"},
};

/* src into dst of size bytes: 0, or -1 when it does not fit. */
static int put(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (n >= size)
		return -1;
	memcpy(dst, src, n + 1);
	return 0;
}

/* Split text at ':' outside quotes, unquoting: up to max parts. The number. */
static int split(const char *text, char parts[][USC_MODULE_MAX], int max, uint32_t offs[])
{
	int n = 0;
	size_t o = 0;
	bool q = false;

	parts[0][0] = 0;
	offs[0] = 0;
	for (size_t i = 0; text[i]; i++) {
		char c = text[i];

		if (c == '"') {
			q = !q;
			continue;
		}
		if (c == '\\' && q && text[i + 1]) {
			c = text[++i];
		} else if (c == ':' && !q && n + 1 < max) {
			/* a C++ name's :: stays in the function's part */
			if (text[i + 1] == ':' && n >= 1) {
				if (o + 2 < USC_MODULE_MAX) {
					parts[n][o++] = ':';
					parts[n][o++] = ':';
				}
				i++;
				continue;
			}
			parts[n][o] = 0;
			n++;
			o = 0;
			offs[n] = (uint32_t)(i + 1);
			parts[n][0] = 0;
			continue;
		}
		if (o + 1 < USC_MODULE_MAX)
			parts[n][o++] = c;
	}
	parts[n][o] = 0;
	return q ? -1 : n + 1;
}

static int bad(struct script_diag *d, const struct ast_attach *at, uint32_t off, uint32_t len,
	       const char *msg)
{
	return script_fail(d, at->pos + off, len ? len : at->len - off, "%s", msg);
}

static int read_interval(struct script_attach *a, const struct ast_attach *at, char parts[][USC_MODULE_MAX],
			 int n, uint32_t offs[], struct script_diag *d)
{
	char *end;
	unsigned long long v;
	static const struct {
		const char *unit;
		uint64_t ns;
	} units[] = {{"s", 1000000000ULL}, {"ms", 1000000ULL}, {"us", 1000ULL}, {"hz", 0}};

	if (n != 3)
		return bad(d, at, 0, 0, "expected interval:UNIT:N (UNIT s, ms, us or hz)");
	errno = 0;
	v = strtoull(parts[2], &end, 10);
	if (*end || !parts[2][0] || errno || !v || v > 1000000000ULL)
		return bad(d, at, offs[2], 0, "expected a whole number of units, from 1");
	for (size_t k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
		if (strcmp(parts[1], units[k].unit))
			continue;
		a->interval_ns = units[k].ns ? v * units[k].ns : 1000000000ULL / v;
		if (a->interval_ns < 1000000ULL)
			return bad(d, at, offs[2], 0, "an interval of less than 1 ms: uscope "
				   "runs interval probes itself, from its own loop");
		a->kind = SP_INTERVAL;
		return 0;
	}
	return bad(d, at, offs[1], (uint32_t)strlen(parts[1]), "expected s, ms, us or hz");
}

/* FUNCTION, FUNCTION+OFFSET or an ADDRESS into a. */
static int read_func(struct script_attach *a, const struct ast_attach *at, const char *f,
		     uint32_t off, struct script_diag *d)
{
	const char *plus = NULL;
	int depth = 0;

	if (!f[0])
		return bad(d, at, off, 0, "expected a function's name");
	if (isdigit((unsigned char)f[0])) {
		char *end;

		errno = 0;
		a->address = strtoull(f, &end, 0);
		if (*end || errno)
			return bad(d, at, off, 0, "expected a function's name or an address");
		a->is_address = true;
		return 0;
	}
	for (const char *c = f; *c; c++) {
		if (*c == '(' || *c == '<')
			depth++;
		else if ((*c == ')' || *c == '>') && depth)
			depth--;
		else if (*c == '+' && !depth && c > f && c[-1] != '+' && c[1] != '+' &&
			 isdigit((unsigned char)c[1]))
			plus = c;
	}
	if (plus) {
		char *end;

		errno = 0;
		a->offset = strtoull(plus + 1, &end, 0);
		if (*end || errno)
			return bad(d, at, off + (uint32_t)(plus + 1 - f), 0, "expected an offset");
		a->has_offset = true;
	}
	size_t n = plus ? (size_t)(plus - f) : strlen(f);

	if (n >= sizeof(a->func))
		return bad(d, at, off, 0, "the function's name is too long");
	memcpy(a->func, f, n);
	a->func[n] = 0;
	return 0;
}

static int read_one(struct usc_script *s, struct script_attach *a, const struct ast_attach *at,
		    struct script_diag *d)
{
	char parts[5][USC_MODULE_MAX];
	uint32_t offs[5];
	int n = split(at->text, parts, 5, offs);
	const char *type = parts[0];

	(void)s;
	a->pos = at->pos;
	a->len = at->len;
	if (n < 0)
		return bad(d, at, 0, 0, "unterminated quote");
	if (n == 1 && !strcmp(type, "BEGIN")) {
		a->kind = SP_BEGIN;
		return 0;
	}
	if (n == 1 && !strcmp(type, "END")) {
		a->kind = SP_END;
		return 0;
	}
	if (!strcmp(type, "interval") || !strcmp(type, "i"))
		return read_interval(a, at, parts, n, offs, d);
	for (size_t k = 0; k < sizeof(kernel_types) / sizeof(kernel_types[0]); k++)
		if (!strcmp(type, kernel_types[k].name) && (n > 1 || strlen(type) > 2)) {
			char msg[256];

			snprintf(msg, sizeof(msg), "%.32s: probes are bpftrace's for %s: uscope "
				 "traces user space (uprobe, uretprobe, usdt, py:, BEGIN, END, "
				 "interval)", type, kernel_types[k].what);
			return bad(d, at, 0, (uint32_t)strlen(type), msg);
		}
	if (!strcmp(type, "py")) {
		a->kind = SP_PY;
		if (n == 2) {
			if (put(a->func, sizeof(a->func), parts[1]))
				return bad(d, at, offs[1], 0, "the name is too long");
		} else if (n == 3) {
			if (put(a->module, sizeof(a->module), parts[1]) ||
			    put(a->func, sizeof(a->func), parts[2]))
				return bad(d, at, offs[1], 0, "the name is too long");
		} else {
			return bad(d, at, 0, 0, "expected py:MODULE:FUNCTION or py:FUNCTION");
		}
		if (!a->func[0])
			return bad(d, at, offs[n - 1], 0, "expected a Python function's name");
		return 0;
	}
	if (!strcmp(type, "uprobe") || !strcmp(type, "u") || !strcmp(type, "uretprobe") ||
	    !strcmp(type, "ur")) {
		a->kind = !strcmp(type, "uretprobe") || !strcmp(type, "ur") ? SP_URETPROBE :
			  SP_UPROBE;
		if (n == 2)
			return read_func(a, at, parts[1], offs[1], d);
		if (n != 3)
			return bad(d, at, 0, 0, "expected uprobe:BINARY:FUNCTION");
		if (!parts[1][0])
			return bad(d, at, offs[1], 1, "expected a binary: a path, a library (libc) "
				   "or a program");
		if (put(a->module, sizeof(a->module), parts[1]))
			return bad(d, at, offs[1], 0, "the path is too long");
		if (a->kind == SP_URETPROBE && strchr(parts[2], '+') && !strchr(parts[2], '('))
			return bad(d, at, offs[2], 0, "a uretprobe fires where the function returns: "
				   "it takes no +OFFSET");
		return read_func(a, at, parts[2], offs[2], d);
	}
	if (!strcmp(type, "usdt") || !strcmp(type, "U")) {
		a->kind = SP_USDT;
		if (n == 4) {
			if (put(a->module, sizeof(a->module), parts[1]) ||
			    put(a->provider, sizeof(a->provider), parts[2]) ||
			    put(a->func, sizeof(a->func), parts[3]))
				return bad(d, at, 0, 0, "a name is too long");
		} else if (n == 3) {
			if (put(a->module, sizeof(a->module), parts[1]) ||
			    put(a->func, sizeof(a->func), parts[2]))
				return bad(d, at, 0, 0, "a name is too long");
		} else {
			return bad(d, at, 0, 0, "expected usdt:BINARY:PROVIDER:NAME or usdt:BINARY:NAME");
		}
		if (!a->module[0] || !a->func[0])
			return bad(d, at, 0, 0, "expected usdt:BINARY:PROVIDER:NAME");
		return 0;
	}
	char msg[256];

	snprintf(msg, sizeof(msg), "unknown probe type '%.64s' (uprobe, uretprobe, usdt, py, BEGIN, "
		 "END or interval)", type);
	return bad(d, at, 0, (uint32_t)strlen(type), msg);
}

int script_probes_read(struct usc_script *s, struct script_diag *d)
{
	size_t n = 0, k = 0;
	unsigned pi = 0;

	for (struct ast_probe *p = s->prog.probes; p; p = p->next)
		for (struct ast_attach *at = p->attach; at; at = at->next)
			n++;
	s->attach = calloc(n ? n : 1, sizeof(*s->attach));
	s->probes = calloc(s->prog.nprobes ? s->prog.nprobes : 1, sizeof(*s->probes));
	if (!s->attach || !s->probes)
		return script_fail(d, 0, 0, "out of memory"), -ENOMEM;
	for (struct ast_probe *p = s->prog.probes; p; p = p->next, pi++) {
		struct script_probeinfo *pr = &s->probes[pi];
		bool sites = false, others = false;

		pr->ast = p;
		pr->first_attach = (unsigned)k;
		for (struct ast_attach *at = p->attach; at; at = at->next) {
			struct script_attach *a = &s->attach[k++];

			a->probe = pi;
			if (read_one(s, a, at, d))
				return -EINVAL;
			if (a->kind >= SP_UPROBE)
				sites = true;
			else
				others = true;
			if (a->kind == SP_URETPROBE)
				pr->is_return = true;
		}
		pr->nattach = (unsigned)(k - pr->first_attach);
		pr->on_sites = sites;
		if (sites && others)
			return script_fail(d, p->pos, p->len, "BEGIN, END and interval probes cannot "
					   "share actions with uprobes: give them their own");
	}
	s->nattach = k;
	return 0;
}
