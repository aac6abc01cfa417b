#include "output/output.h"
#include "core/grow.h"
#include "python/names.h"
#include "stack/stack.h"

#include "output/govalue.h"
#include "cache/cache.h"
#include "ns/ns.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(struct usc_output *o, size_t more)
{
	return core_reserve(o->buf, o->cap, o->len + more + 1, 4096);
}

__attribute__((format(printf, 2, 3)))
static int put(struct usc_output *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = o->cap - o->len;

		va_start(ap, fmt);
		n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -EINVAL;
		if (o->buf && (size_t)n < room) {
			o->len += (size_t)n;
			return 0;
		}
		if (reserve(o, (size_t)n + 1))
			return -ENOMEM;
	}
}

/* n bytes as they are. */
static int putn(struct usc_output *o, const void *p, size_t n)
{
	if (o->len + n + 1 > o->cap && reserve(o, n))
		return -ENOMEM;
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	o->buf[o->len] = 0;
	return 0;
}

static int putc_(struct usc_output *o, char c)
{
	return putn(o, &c, 1);
}

/* The appenders of an event's every line: a live trace formats a line for
 * each hit it keeps, and vsnprintf was half of its time (its format parsed
 * again at every call). */
static int puts_(struct usc_output *o, const char *s)
{
	return putn(o, s, strlen(s));
}

/* v in decimal, zero-padded to width digits. */
static int put_dec(struct usc_output *o, uint64_t v, unsigned width)
{
	char b[24], *e = b + sizeof(b), *p = e;

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while ((unsigned)(e - p) < width && p > b)
		*--p = '0';
	return putn(o, p, (size_t)(e - p));
}

static int put_sdec(struct usc_output *o, int64_t v)
{
	int ret = v < 0 ? putc_(o, '-') : 0;

	return ret ? ret : put_dec(o, v < 0 ? -(uint64_t)v : (uint64_t)v, 0);
}

/* "0x" and v in lower-case hex, as "0x%" PRIx64. */
static int put_hex(struct usc_output *o, uint64_t v)
{
	char b[20], *e = b + sizeof(b), *p = e;

	do {
		*--p = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	*--p = 'x';
	*--p = '0';
	return putn(o, p, (size_t)(e - p));
}


/* Length of a valid UTF-8 sequence at s (max n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond Unicode */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/* s quoted, each valid UTF-8 sequence of two bytes or more as it is, every
 * other byte as esc writes it. */
static int quoted(struct usc_output *o, const char *s, size_t n,
		  int (*esc)(struct usc_output *o, unsigned char c))
{
	const unsigned char *u = (const unsigned char *)s;
	int ret = putc_(o, '"');

	for (size_t i = 0; i < n && !ret;) {
		size_t l = u[i] >= 0x80 ? utf8_len(u + i, n - i) : 0;
		size_t run = i;

		/* a run of printable ASCII that neither escapes: as it is */
		while (run < n && u[run] >= 0x20 && u[run] < 0x7f && u[run] != '"' && u[run] != '\\')
			run++;
		if (run > i) {
			ret = putn(o, u + i, run - i);
			i = run;
		} else if (l) {
			ret = putn(o, u + i, l);
			i += l;
		} else {
			ret = esc(o, u[i]);
			i++;
		}
	}
	return ret ? ret : putc_(o, '"');
}

static int c_escape(struct usc_output *o, unsigned char c)
{
	switch (c) {
	case '"': return put(o, "\\\"");
	case '\\': return put(o, "\\\\");
	case '\n': return put(o, "\\n");
	case '\t': return put(o, "\\t");
	case '\r': return put(o, "\\r");
	}
	if (c >= 0x20 && c < 0x7f)
		return putc_(o, (char)c);
	return put(o, "\\x%02x", c);
}

/* C escapes for text output. Valid UTF-8 stays as it is, as a terminal shows
 * it; control bytes and bytes that are not UTF-8 become \xNN. */
int output_c_string(struct usc_output *o, const char *s, size_t n)
{
	return quoted(o, s, n, c_escape);
}

static int json_escape(struct usc_output *o, unsigned char c)
{
	if (c == '"' || c == '\\')
		return put(o, "\\%c", c);
	if (c == '\n')
		return put(o, "\\n");
	if (c == '\t')
		return put(o, "\\t");
	if (c < 0x20 || c >= 0x7f)
		return put(o, "\\u%04x", c);
	return putc_(o, (char)c);
}

/* Valid JSON. A byte that is not part of valid UTF-8 is escaped as the code
 * point of the same value (\u00XX), so the text stays valid and the byte
 * remains recoverable. */
int output_json_string(struct usc_output *o, const char *s, size_t n)
{
	return quoted(o, s, n, json_escape);
}

static uint64_t truncate_to(uint64_t v, unsigned size)
{
	return size >= 8 ? v : v & ((1ULL << (size * 8)) - 1);
}

static int64_t sign_extend(uint64_t v, unsigned size)
{
	unsigned shift = 64 - size * 8;

	return size >= 8 ? (int64_t)v : (int64_t)(v << shift) >> shift;
}

/* An enum's value by name: its enumerator, or for a flags enum the bits'
 * names joined by '|' (bits no enumerator names in hex at the end). Returns
 * 1 when written, 0 when the value has no name (printed as a number). */
static int put_enum(struct usc_output *o, const struct usc_enum *e, uint64_t x, int *ret)
{
	char buf[512];
	size_t l = 0;
	uint64_t rest = x;

	for (unsigned i = 0; i < e->n; i++)
		if (e->v[i].value == x) {
			*ret = o->json ? output_json_string(o, e->v[i].name, strlen(e->v[i].name)) :
					 put(o, "%s", e->v[i].name);
			return 1;
		}
	if (!e->flags || !x)
		return 0;
	for (unsigned i = 0; i < e->n && l < sizeof(buf); i++)
		if (e->v[i].value && (rest & e->v[i].value) == e->v[i].value) {
			l += (size_t)snprintf(buf + l, sizeof(buf) - l, "%s%s", l ? "|" : "",
					      e->v[i].name);
			rest &= ~e->v[i].value;
		}
	if (rest == x)
		return 0;	/* no bit has a name */
	if (rest && l < sizeof(buf))
		l += (size_t)snprintf(buf + l, sizeof(buf) - l, "|0x%" PRIx64, rest);
	if (l >= sizeof(buf))
		l = sizeof(buf) - 1;
	*ret = o->json ? output_json_string(o, buf, l) : put(o, "%.*s", (int)l, buf);
	return 1;
}

/* One frame's text, as a stack's line shows it:
 * "func+0xoff (module) file.c:line", an inlined one "func [inlined] (module)
 * file.c:line", JIT code "name+0xoff [jit]" (its perf map's name), the
 * signal trampoline "<signal handler called>". */
int output_frame(struct usc_output *o, const struct stack_sym *f)
{
	const char *file = f->file ? strrchr(f->file, '/') : NULL;
	int ret;

	file = file ? file + 1 : f->file;
	if (f->signal)
		return put(o, "<signal handler called>");
	if (f->python)	/* as Python's traceback names it: qualname (file:line) */
		return f->line ? put(o, "%s (%s:%u)", f->func ? f->func : "??",
				     f->file ? f->file : "??", f->line) :
				 put(o, "%s (%s)", f->func ? f->func : "??", f->file ? f->file : "??");
	if (f->func && f->inlined)
		ret = put(o, "%s [inlined]", f->func);
	else if (f->func)
		ret = put(o, "%s+0x%" PRIx64, f->func, f->off);
	else
		ret = put(o, "0x%" PRIx64, f->pc);
	if (!ret && f->jit)	/* perf's [JIT]: named from the process's perf map */
		ret = put(o, " [jit]");
	if (!ret && f->module)
		ret = f->func ? put(o, " (%s)", f->module) :
				put(o, " (%s+0x%" PRIx64 ")", f->module, f->off);
	if (!ret && file)
		ret = f->line ? put(o, " %s:%u", file, f->line) : put(o, " %s", file);
	return ret;
}

#define FRAME_SYMS 8

/* A stack: JSON, an array of frames (an inlined call is a frame of its own,
 * as in gdb), then {"end": WHY} when it does not reach its outermost frame;
 * text, a line a frame under the event, indented, then "[WHY]". */
static int put_stack(struct usc_output *o, pid_t pid, const struct usc_stack *st)
{
	struct stack_sym f[FRAME_SYMS];
	char why[256] = "";
	bool first = true;
	int ret = o->json ? putc_(o, '[') : 0;

	for (uint32_t i = 0; i < st->n && !ret; i++) {
		size_t n = o->cache ? stack_syms(o->cache, pid, st, i, f, FRAME_SYMS) : 0;

		if (!n) {
			f[0] = (struct stack_sym){.pc = st->pc[i]};
			n = 1;
		}
		for (size_t k = 0; k < n && !ret; k++, first = false) {
			if (!o->json) {
				ret = put(o, "    ");
				ret = ret ? ret : output_frame(o, &f[k]);
				ret = ret ? ret : putc_(o, '\n');
				continue;
			}
			ret = put(o, "%s{\"addr\":\"0x%" PRIx64 "\",\"sym\":", first ? "" : ",",
				  f[k].pc);
			ret = ret ? ret : f[k].signal ? put(o, "\"<signal handler called>\"") :
					  f[k].func ? output_json_string(o, f[k].func, strlen(f[k].func)) :
					  put(o, "null");
			ret = ret ? ret : put(o, ",\"off\":%" PRIu64 ",\"module\":", f[k].off);
			ret = ret ? ret : f[k].module ?
				output_json_string(o, f[k].module, strlen(f[k].module)) :
				put(o, "null");
			ret = ret ? ret : put(o, ",\"file\":");
			ret = ret ? ret : f[k].file ? output_json_string(o, f[k].file,
									  strlen(f[k].file)) :
					  put(o, "null");
			ret = ret ? ret : put(o, ",\"line\":%u,\"inlined\":%s%s%s}", f[k].line,
					      f[k].inlined ? "true" : "false",
					      f[k].python ? ",\"python\":true" : "",
					      f[k].jit ? ",\"jit\":true" : "");
		}
	}
	if (o->cache)
		stack_end_text(o->cache, pid, st, why, sizeof(why));
	if (!ret && why[0]) {
		if (o->json) {
			ret = put(o, "%s{\"end\":", first ? "" : ",");
			ret = ret ? ret : output_json_string(o, why, strlen(why));
			ret = ret ? ret : putc_(o, '}');
		} else {
			ret = put(o, "    [%s]\n", why);
		}
	}
	return ret || !o->json ? ret : putc_(o, ']');
}

int output_stack(struct usc_output *o, pid_t pid, const struct usc_stack *st)
{
	return put_stack(o, pid, st);
}

/* A frame's name in a folded stack: ';' parts frames and ' ' ends them. */
static int put_folded_name(struct usc_output *o, const char *s)
{
	for (; *s; s++) {
		int ret = putc_(o, *s == ';' || *s == ' ' || *s == '\n' ? '_' : *s);

		if (ret)
			return ret;
	}
	return 0;
}

int output_stack_folded(struct usc_output *o, pid_t pid, const struct usc_stack *st)
{
	struct stack_sym f[FRAME_SYMS];
	bool first = true;
	int ret = 0;

	if (!st->n)	/* a line needs a frame: $pystack where no Python runs */
		return put(o, "[no frames]");
	/* outermost first; an inlined call is a frame of its own */
	for (uint32_t i = st->n; i-- > 0 && !ret;) {
		size_t n = o->cache ? stack_syms(o->cache, pid, st, i, f, FRAME_SYMS) : 0;

		if (!n) {
			f[0] = (struct stack_sym){.pc = st->pc[i]};
			n = 1;
		}
		for (size_t k = n; k-- > 0 && !ret; first = false) {
			ret = first ? 0 : putc_(o, ';');
			if (ret)
				break;
			if (f[k].signal) {
				ret = put(o, "[signal]");
			} else if (f[k].python) {
				/* qualname(file:line): no space in a folded frame */
				const char *b = f[k].file ? strrchr(f[k].file, '/') : NULL;

				ret = put_folded_name(o, f[k].func ? f[k].func : "??");
				ret = ret ? ret : put(o, "(");
				ret = ret ? ret : put_folded_name(o, b ? b + 1 : f[k].file ? f[k].file : "??");
				ret = ret ? ret : f[k].line ? put(o, ":%u)", f[k].line) : put(o, ")");
			} else if (f[k].func) {
				ret = put_folded_name(o, f[k].func);
				if (!ret && f[k].jit)	/* perf's mark of JIT code */
					ret = put(o, "_[j]");
			} else if (f[k].module) {
				ret = put(o, "%s+0x%" PRIx64, f[k].module, f[k].off);
			} else {
				ret = put(o, "0x%" PRIx64, f[k].pc);
			}
		}
	}
	return ret;
}

static int put_value(struct usc_output *o, const struct usc_event *ev,
		     const struct usc_fetcharg *a, const struct usc_value *v)
{
	unsigned size = fetch_type_size(a->type);
	int ret = 0;

	if (a->optimized_out)
		return put(o, o->json ? "null" : "<optimized out>");
	if (a->unavailable)
		return put(o, o->json ? "null" : "(unavailable)");
	if (a->show == USC_SHOW_STRUCT)
		return o->json ? output_json_string(o, "{...}", 5) : put(o, "{...}");
	if (a->show == USC_SHOW_ARRAY)
		return o->json ? output_json_string(o, "[...]", 5) : put(o, "[...]");
	if (a->show == USC_SHOW_PYFUNC && v->kind == USC_V_INT) {
		const struct python_loc *l = o->cache ? python_names_func(o->cache, ev->pid, v->u) : NULL;

		if (l)
			return o->json ? output_json_string(o, l->qualname, strlen(l->qualname)) :
					 put(o, "%s", l->qualname);
	}
	if (a->show == USC_SHOW_PYVAL && v->kind == USC_V_INT)	/* a Python int */
		return put(o, "%" PRId64, (int64_t)v->u);
	if (a->show == USC_SHOW_PYVAL && v->kind == USC_V_STR)	/* its repr, or <type> */
		return o->json ? output_json_string(o, v->str, v->len) :
				 put(o, "%.*s", (int)v->len, v->str);
	if (v->kind == USC_V_STACK)
		return put_stack(o, ev->pid, v->stack);
	if (usc_value_is_raw_stack(v->kind))	/* not unwound: no session */
		return put(o, o->json ? "null" : "(stack)");
	if (v->kind == USC_V_FAULT)
		return put(o, o->json ? "null" : "(fault)");
	if (v->kind == USC_V_NULL)
		return put(o, o->json ? "null" : "(null)");
	if (v->kind == USC_V_INT && a->show == USC_SHOW_BOOL)
		return put(o, "%s", (a->type == USC_T_BITFIELD ? v->u : truncate_to(v->u, size)) ?
				    "true" : "false");
	if (v->kind == USC_V_INT && a->show == USC_SHOW_ENUM && a->enums &&
	    put_enum(o, a->enums, a->type == USC_T_BITFIELD ? v->u : truncate_to(v->u, size),
		     &ret))
		return ret;
	if (v->kind == USC_V_STR)
		return o->json ? output_json_string(o, v->str, v->len) :
				 output_c_string(o, v->str, v->len);
	if (a->type == USC_T_SYMBOL && o->cache) {
		char sym[512];

		cache_symbolize(o->cache, ev->pid, v->u, sym, sizeof(sym));
		return o->json ? output_json_string(o, sym, strlen(sym)) : put(o, "%s", sym);
	}
	if (fetch_type_is_hex(a->type)) {
		uint64_t x = truncate_to(v->u, size);

		ret = o->json ? putc_(o, '"') : 0;
		ret = ret ? ret : put_hex(o, x);
		return ret || !o->json ? ret : putc_(o, '"');
	}
	if (fetch_type_is_signed(a->type))
		return put_sdec(o, sign_extend(v->u, size));
	if (a->type == USC_T_BITFIELD)
		return put_dec(o, v->u, 0);
	return put_dec(o, truncate_to(v->u, size), 0);
}

int output_event_args(struct usc_output *o, const struct usc_event *ev)
{
	const struct usc_fetcharg *args = ev->site->args;
	int ret = o->json ? putc_(o, '{') : 0;

	unsigned n = probe_shown_args(args, ev->nvals);	/* not a filter's operands */

	for (unsigned i = 0, shown = 0; i < n && !ret; i++) {
		const struct usc_fetcharg *a = &args[i];
		const char *name = a->name;
		/* a Go value's parts come first: the value shows them */
		bool first = a->group_first || (a->go_parts && i >= a->go_parts &&
						args[i - a->go_parts].group_first);

		if (!o->json && a->type == USC_T_STACK)
			continue;	/* under the event's line (output_event) */
		if (!o->json && a->show == USC_SHOW_PYFUNC)
			continue;	/* the event's label (output_event) */
		if (!o->json && a->show == USC_SHOW_PYVAL && a->insn[0].op == FOP_PYARGS &&
		    ev->vals[i].kind == USC_V_STR && !ev->vals[i].len)
			continue;	/* a Python call of no arguments */
		if (a->show == USC_SHOW_GO_PART)
			continue;
		if (a->group_len) {
			/* a struct shown whole: NAME={MEMBER=VALUE ...} */
			name += a->group_len + 2;
			if (first)
				ret = o->json ? put(o, "%s\"%.*s\":{", shown ? "," : "", a->group_len,
						    a->name) :
						put(o, " %.*s={", a->group_len, a->name);
			else
				ret = putc_(o, o->json ? ',' : ' ');
			if (!ret)
				ret = o->json ? put(o, "\"%s\":", name) : put(o, "%s=", name);
		} else if (o->json) {
			ret = puts_(o, shown ? ",\"" : "\"");
			ret = ret ? ret : puts_(o, name);
			ret = ret ? ret : putn(o, "\":", 2);
		} else if (a->show == USC_SHOW_PYVAL && a->insn[0].op == FOP_PYARGS) {
			ret = putc_(o, ' ');	/* a Python call's arguments: NAME=VALUE ... */
		} else {
			ret = putc_(o, ' ');
			ret = ret ? ret : puts_(o, name);
			ret = ret ? ret : putc_(o, '=');
		}
		shown++;
		if (!ret && govalue_shows(a))
			ret = govalue_append(o, ev, i);
		else
			ret = ret ? ret : put_value(o, ev, a, &ev->vals[i]);
		if (!ret && a->group_len &&
		    (i + 1 == n || !args[i + 1].group_len || args[i + 1].group_first))
			ret = putc_(o, '}');
	}
	return ret || !o->json ? ret : putc_(o, '}');
}

int output_arg_value(struct usc_output *o, const struct usc_event *ev, unsigned i)
{
	const struct usc_fetcharg *a = &ev->site->args[i];

	if (govalue_shows(a))
		return govalue_append(o, ev, i);
	return put_value(o, ev, a, &ev->vals[i]);
}

int output_ids(struct usc_output *o, const struct usc_event *ev)
{
	/* a task in a PID namespace below ours (a container) has ids there too */
	pid_t ns_pid = 0, ns_tid = 0;
	bool nested = cache_ns_ids(o->cache, ev->pid, ev->tid, &ns_pid, &ns_tid);
	int ret;

	if (!o->json)
		return nested ? put(o, "%d/%d", ev->tid, (int)ns_tid) : put_sdec(o, ev->tid);
	if (nested)
		return put(o, ",\"pid\":%d,\"tid\":%d,\"ns_pid\":%d,\"ns_tid\":%d", ev->pid,
			   ev->tid, (int)ns_pid, (int)ns_tid);
	ret = puts_(o, ",\"pid\":");
	ret = ret ? ret : put_sdec(o, ev->pid);
	ret = ret ? ret : puts_(o, ",\"tid\":");
	return ret ? ret : put_sdec(o, ev->tid);
}

/* A py: probe's event is named after the Python function it fires for
 * (its first argument: python_names_func): 1 with *fn, else 0. */
static int py_func(struct usc_output *o, const struct usc_event *ev, const struct python_loc **fn)
{
	if (!ev->site->python || !ev->nvals || ev->site->args[0].show != USC_SHOW_PYFUNC ||
	    ev->vals[0].kind != USC_V_INT || !o->cache)
		return 0;
	*fn = python_names_func(o->cache, ev->pid, ev->vals[0].u);
	return *fn != NULL;
}

int output_event_label(struct usc_output *o, const struct usc_event *ev, char *buf, size_t len)
{
	const struct python_loc *fn;

	if (!py_func(o, ev, &fn))
		return snprintf(buf, len, "%s", ev->site->label);
	return snprintf(buf, len, "%s%s", fn->qualname, ev->site->is_return ? "__return" : "");
}

int output_event(struct usc_output *o, const struct usc_event *ev)
{
	const struct python_loc *fn = NULL;
	char label[USC_NAME_MAX * 8];
	int ret;

	if (py_func(o, ev, &fn)) {
		/* a Python call: where the function is, not an address */
		const char *b = strrchr(fn->filename, '/');

		output_event_label(o, ev, label, sizeof(label));
		if (o->json) {
			ret = put(o, "{\"time_ns\":%" PRIu64 ",\"comm\":", ev->time_ns);
			ret = ret ? ret : output_json_string(o, ev->comm, strlen(ev->comm));
			ret = ret ? ret : put(o, ",\"pid\":%d,\"tid\":%d,\"cpu\":%d,\"event\":", ev->pid,
					      ev->tid, ev->cpu);
			ret = ret ? ret : output_json_string(o, label, strlen(label));
			ret = ret ? ret : put(o, ",\"type\":\"%c\",\"file\":", ev->site->is_return ? 'r' : 'p');
			ret = ret ? ret : output_json_string(o, fn->filename, strlen(fn->filename));
			ret = ret ? ret : put(o, ",\"line\":%d,\"args\":", fn->line);
			ret = ret ? ret : output_event_args(o, ev);
			return ret ? ret : output_raw(o, OUTPUT_JSON_END);
		}
		ret = put(o, "%s-%d [%03d] %" PRIu64 ".%06" PRIu64 ": %s: (%s:%d)", ev->comm, ev->tid,
			  ev->cpu, ev->time_ns / 1000000000u, (ev->time_ns % 1000000000u) / 1000u, label,
			  b ? b + 1 : fn->filename, fn->line);
		ret = ret ? ret : output_event_args(o, ev);
		ret = ret ? ret : putc_(o, '\n');
		goto stacks;
	}
	if (o->json) {
		ret = puts_(o, "{\"time_ns\":");
		ret = ret ? ret : put_dec(o, ev->time_ns, 0);
		ret = ret ? ret : puts_(o, ",\"comm\":");
		ret = ret ? ret : output_json_string(o, ev->comm, strlen(ev->comm));
		ret = ret ? ret : output_ids(o, ev);
		ret = ret ? ret : puts_(o, ",\"cpu\":");
		ret = ret ? ret : put_sdec(o, ev->cpu);
		ret = ret ? ret : puts_(o, ",\"event\":");
		ret = ret ? ret : output_json_string(o, ev->site->label, strlen(ev->site->label));
		ret = ret ? ret : puts_(o, ev->site->is_return ? ",\"type\":\"r\",\"ip\":\"" :
							       ",\"type\":\"p\",\"ip\":\"");
		ret = ret ? ret : put_hex(o, ev->ip);
		if (!ret && ev->site->is_return) {
			ret = puts_(o, "\",\"func\":\"");
			ret = ret ? ret : put_hex(o, ev->func);
		}
		ret = ret ? ret : puts_(o, "\",\"args\":");
		ret = ret ? ret : output_event_args(o, ev);
		return ret ? ret : output_raw(o, OUTPUT_JSON_END);
	}

	/* COMM-TID [CPU] SECONDS.MICROS: LABEL: (IP) */
	ret = puts_(o, ev->comm);
	ret = ret ? ret : putc_(o, '-');
	ret = ret ? ret : output_ids(o, ev);
	ret = ret ? ret : puts_(o, " [");
	ret = ret ? ret : ev->cpu < 0 ? put(o, "%03d", ev->cpu) : put_dec(o, (uint64_t)ev->cpu, 3);
	ret = ret ? ret : puts_(o, "] ");
	ret = ret ? ret : put_dec(o, ev->time_ns / 1000000000u, 0);
	ret = ret ? ret : putc_(o, '.');
	ret = ret ? ret : put_dec(o, (ev->time_ns % 1000000000u) / 1000u, 6);
	ret = ret ? ret : puts_(o, ": ");
	ret = ret ? ret : puts_(o, ev->site->label);
	ret = ret ? ret : puts_(o, ": (");
	ret = ret ? ret : put_hex(o, ev->ip);
	if (!ret && ev->site->is_return) {
		ret = puts_(o, " <- ");
		ret = ret ? ret : put_hex(o, ev->func);
	}
	ret = ret ? ret : putc_(o, ')');
	ret = ret ? ret : output_event_args(o, ev);
	ret = ret ? ret : putc_(o, '\n');
stacks:
	for (unsigned i = 0; i < ev->nvals && !ret; i++)
		if (ev->site->args[i].type == USC_T_STACK && !ev->site->args[i].hidden &&
		    ev->vals[i].kind == USC_V_STACK)
			ret = put_stack(o, ev->pid, ev->vals[i].stack);
	return ret;
}

int output_raw(struct usc_output *o, const char *s)
{
	size_t n = strlen(s);

	if (reserve(o, n))
		return -ENOMEM;
	memcpy(o->buf + o->len, s, n + 1);
	o->len += n;
	return 0;
}

void output_reset(struct usc_output *o)
{
	o->len = 0;
	if (o->buf)
		o->buf[0] = 0;
}

void output_free(struct usc_output *o)
{
	free(o->buf);
	o->buf = NULL;
	o->len = o->cap = 0;
}
