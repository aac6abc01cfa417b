/* The objtrace sink: one line per call that received a followed object
 * (which argument, the object, and with --field the value at that offset,
 * as the kernel's objtrace prints object:0x... value:0x...), per object
 * followed (a --from hit) and per object released (an --until hit); or one
 * JSON object per line. The events come with their verdict (probe.h, enum
 * usc_obj_role), from the engine that keeps the set or from the session.
 *
 *   COMM-TID [CPU] SECONDS.MICROSECONDS: EVENT: (IP) argN object:0x... [value:V]
 *   COMM-TID [CPU] SECONDS.MICROSECONDS: EVENT: (RET <- FUNC) object:0x... followed
 *   COMM-TID [CPU] SECONDS.MICROSECONDS: EVENT: (IP) object:0x... released
 *
 * A --from hit that found the set full is shown ("not followed: the set is
 * full"), warned about once when it first happens, and counted at the end. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "output/output.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

#define FLUSH_AT 65536

struct objtrace_sink {
	struct usc_sink base;
	struct usc_output out;
	FILE *fp;
	int write_error;
	uint32_t max_objects;
	uint64_t full;		/* --from hits not followed: the set was full */
};

static struct objtrace_sink *of(struct usc_sink *k)
{
	return container_of(k, struct objtrace_sink, base);
}

static int raw(struct usc_output *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int raw(struct usc_output *o, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return output_raw(o, buf);
}

/* The field's value as its type says (--field OFFS:TYPE). */
static int value(struct usc_output *o, const struct usc_fetcharg *a, const struct usc_value *v)
{
	unsigned size = fetch_type_size(a->type);
	uint64_t u = v->u;

	if (v->kind == USC_V_FAULT || v->kind == USC_V_NULL)
		return output_raw(o, o->json ? "null" : v->kind == USC_V_NULL ? "(null)" : "(fault)");
	if (v->kind == USC_V_STR)
		return o->json ? output_json_string(o, v->str, v->len) :
				 output_c_string(o, v->str, v->len);
	if (size && size < 8)
		u &= (1ULL << (8 * size)) - 1;
	if (fetch_type_is_hex(a->type))
		return raw(o, o->json ? "\"0x%" PRIx64 "\"" : "0x%" PRIx64, u);
	if (fetch_type_is_signed(a->type) && size) {
		int64_t s = (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);

		return raw(o, "%" PRId64, s);
	}
	return raw(o, "%" PRIu64, u);
}

static int format(struct objtrace_sink *k, const struct usc_event *ev)
{
	struct usc_output *o = &k->out;
	const struct usc_site *site = ev->site;
	unsigned n = ev->nvals, arg = 0;
	uint8_t role = site->spec->obj_role;
	uint64_t verdict, object;
	int ret;

	if (!n || n > site->nargs)
		return 0;
	verdict = ev->vals[n - 1].u;
	if (role == USC_OBJ_MATCH) {
		if (!verdict || verdict >> USC_OBJ_NREGS)
			return 0;
		arg = (unsigned)__builtin_ctzll(verdict);
	}
	object = ev->vals[arg].u;
	if (role == USC_OBJ_FROM && verdict == 2 && !k->full++)
		log_warn("the set of followed objects is full (%u, --max-objects): %s's object "
			 "0x%" PRIx64 " is not followed, nor any new one until one is released",
			 k->max_objects, site->label, object);
	if (o->json) {
		ret = raw(o, "{\"time_ns\":%" PRIu64 ",\"comm\":", ev->time_ns);
		ret = ret ? ret : output_json_string(o, ev->comm, strlen(ev->comm));
		ret = ret ? ret : output_ids(o, ev);	/* a container's: its ids inside too */
		ret = ret ? ret : raw(o, ",\"cpu\":%d,\"event\":", ev->cpu);
		ret = ret ? ret : output_json_string(o, site->label, strlen(site->label));
		ret = ret ? ret : raw(o, ",\"type\":\"%c\",\"ip\":\"0x%" PRIx64 "\"",
				      site->is_return ? 'r' : 'p', ev->ip);
		if (!ret && site->is_return)
			ret = raw(o, ",\"func\":\"0x%" PRIx64 "\"", ev->func);
		if (ret)
			return ret;
		switch (role) {
		case USC_OBJ_FROM:
			ret = raw(o, ",\"role\":\"from\",\"object\":\"0x%" PRIx64 "\",\"followed\":%s"
				  OUTPUT_JSON_END,
				  object, verdict == 1 ? "true" : "false");
			break;
		case USC_OBJ_UNTIL:
			ret = raw(o, ",\"role\":\"until\",\"object\":\"0x%" PRIx64 "\"" OUTPUT_JSON_END,
				  object);
			break;
		default:
			ret = raw(o, ",\"role\":\"match\",\"arg\":%u,\"object\":\"0x%" PRIx64 "\"",
				  arg + 1, object);
			if (!ret && n - 1 > USC_OBJ_NREGS + arg) {
				ret = output_raw(o, ",\"value\":");
				ret = ret ? ret : value(o, &site->args[USC_OBJ_NREGS + arg],
							&ev->vals[USC_OBJ_NREGS + arg]);
			}
			ret = ret ? ret : output_raw(o, OUTPUT_JSON_END);
		}
		return ret;
	}
	ret = raw(o, "%s-", ev->comm);
	ret = ret ? ret : output_ids(o, ev);
	ret = ret ? ret : raw(o, " [%03d] %" PRIu64 ".%06" PRIu64 ": %s: ", ev->cpu,
			      ev->time_ns / 1000000000u, (ev->time_ns % 1000000000u) / 1000u,
			      site->label);
	if (!ret && site->is_return)
		ret = raw(o, "(0x%" PRIx64 " <- 0x%" PRIx64 ") ", ev->ip, ev->func);
	else if (!ret)
		ret = raw(o, "(0x%" PRIx64 ") ", ev->ip);
	if (ret)
		return ret;
	switch (role) {
	case USC_OBJ_FROM:
		return raw(o, "object:0x%" PRIx64 " %s\n", object,
			   verdict == 1 ? "followed" : "not followed: the set is full");
	case USC_OBJ_UNTIL:
		return raw(o, "object:0x%" PRIx64 " released\n", object);
	default:
		ret = raw(o, "arg%u object:0x%" PRIx64, arg + 1, object);
		if (!ret && n - 1 > USC_OBJ_NREGS + arg) {
			ret = output_raw(o, " value:");
			ret = ret ? ret : value(o, &site->args[USC_OBJ_NREGS + arg],
						&ev->vals[USC_OBJ_NREGS + arg]);
		}
		return ret ? ret : output_raw(o, "\n");
	}
}

static int objtrace_event(struct usc_sink *sk, const struct usc_event *ev)
{
	struct objtrace_sink *k = of(sk);

	if (ev->site->spec->obj_role == USC_OBJ_NONE)
		return 0;
	if (format(k, ev)) {
		log_error("out of memory");
		return -ENOMEM;
	}
	if (k->out.len < FLUSH_AT)
		return 0;
	sink_write(k->fp, k->out.buf, k->out.len, &k->write_error);
	output_reset(&k->out);
	return k->write_error;
}

static int objtrace_flush(struct usc_sink *sk)
{
	struct objtrace_sink *k = of(sk);

	sink_write(k->fp, k->out.buf, k->out.len, &k->write_error);
	output_reset(&k->out);
	return k->write_error;
}

static int objtrace_report(struct usc_sink *sk, const struct usc_sink_ctx *s,
			   const struct usc_stats *st, bool final)
{
	struct objtrace_sink *k = of(sk);

	(void)s;
	(void)st;
	if (final && k->full)
		log_warn("%" PRIu64 " object%s not followed: the set was full (--max-objects %u)",
			 k->full, k->full == 1 ? " was" : "s were", k->max_objects);
	return 0;
}

static void objtrace_destroy(struct usc_sink *sk)
{
	struct objtrace_sink *k = of(sk);

	output_free(&k->out);
	free(k);
}

/* The session's cache: a container's tasks' ids inside (output_ids). */
static int objtrace_begin(struct usc_sink *sk, const struct usc_sink_ctx *c)
{
	of(sk)->out.cache = c->cache;
	return 0;
}

static const struct usc_sink_ops objtrace_ops = {
	.begin = objtrace_begin,
	.event = objtrace_event,
	.flush = objtrace_flush,
	.report = objtrace_report,
	.destroy = objtrace_destroy,
};

struct usc_sink *usc_sink_objtrace(FILE *fp, bool json, uint32_t max_objects)
{
	struct objtrace_sink *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->base.ops = &objtrace_ops;
	k->fp = fp;
	k->out.json = json;
	k->max_objects = max_objects;
	return &k->base;
}
