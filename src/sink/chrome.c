/* The Chrome trace-event sink (export --format chrome): the JSON object
 * format that the Perfetto UI and chrome://tracing open,
 *   {"displayTimeUnit":"ns","traceEvents":[...]}
 * - a function's entry and return pair (src/flow, per thread, or per
 *   goroutine in a Go program) into one complete event, "ph":"X", on the
 *   entry's thread at the entry's time with its duration; its
 *   args are the entry's arguments, and the return's (a $retval) under
 *   "return";
 * - any other probe hit, and a return whose entry was not recorded, is an
 *   instant event, "ph":"i", scoped to its thread;
 * - calls still open at the end are begin events, "ph":"B", which the
 *   viewers draw as unfinished;
 * - each process and thread is named by "ph":"M" metadata events.
 * Times are microseconds (the format's unit) with nanosecond decimals, on
 * the recording's CLOCK_MONOTONIC. An entry's arguments wait, formatted,
 * on its flow frame until its return. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/grow.h"
#include "flow/flow.h"
#include "output/output.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

struct seen_thread {
	int32_t pid, tid;
};

struct chrome_sink {
	struct usc_sink base;
	FILE *fp;
	const struct usc_sink_ctx *s;
	struct flow_state *st;
	struct usc_output o;		/* the events being written */
	struct usc_output args;		/* scratch */
	struct seen_thread *threads;	/* named so far */
	size_t nthreads, cap;
	bool any;			/* an event was written: the next needs a comma */
	int error, write_error;
};

struct pending {
	int32_t pid;
	int32_t tid;			/* the entry's thread */
	size_t len;
	char text[];			/* the entry's args object, and its name */
};

static int fail(struct chrome_sink *cs, int err)
{
	cs->error = err;
	log_error("cannot write the Chrome trace: %s", strerror(-err));
	return err;
}

static int sep(struct chrome_sink *cs)
{
	int ret = output_raw(&cs->o, cs->any ? ",\n" : "\n");

	cs->any = true;
	return ret;
}

static int ts(struct chrome_sink *cs, const char *field, uint64_t ns)
{
	char b[64];

	snprintf(b, sizeof(b), ",\"%s\":%" PRIu64 ".%03" PRIu64, field, ns / 1000, ns % 1000);
	return output_raw(&cs->o, b);
}

static int ids(struct chrome_sink *cs, int32_t pid, int32_t tid)
{
	char b[64];

	snprintf(b, sizeof(b), ",\"pid\":%d,\"tid\":%d", pid, tid);
	return output_raw(&cs->o, b);
}

/* The first event of a thread names it (and its process, the first time). */
static int name_thread(struct chrome_sink *cs, const struct usc_event *ev)
{
	bool pid_seen = false;
	int ret = 0;

	for (size_t i = 0; i < cs->nthreads; i++) {
		if (cs->threads[i].tid == ev->tid && cs->threads[i].pid == ev->pid)
			return 0;
		pid_seen |= cs->threads[i].pid == ev->pid;
	}
	if (core_reserve(cs->threads, cs->cap, cs->nthreads + 1, 16))
		return -ENOMEM;
	cs->threads[cs->nthreads++] = (struct seen_thread){ev->pid, ev->tid};
	if (!pid_seen) {
		ret = sep(cs);
		ret = ret ? ret : output_raw(&cs->o, "{\"name\":\"process_name\",\"ph\":\"M\"");
		ret = ret ? ret : ids(cs, ev->pid, ev->pid);
		ret = ret ? ret : output_raw(&cs->o, ",\"args\":{\"name\":");
		ret = ret ? ret : output_json_string(&cs->o, ev->comm, strlen(ev->comm));
		ret = ret ? ret : output_raw(&cs->o, "}}");
	}
	ret = ret ? ret : sep(cs);
	ret = ret ? ret : output_raw(&cs->o, "{\"name\":\"thread_name\",\"ph\":\"M\"");
	ret = ret ? ret : ids(cs, ev->pid, ev->tid);
	ret = ret ? ret : output_raw(&cs->o, ",\"args\":{\"name\":");
	ret = ret ? ret : output_json_string(&cs->o, ev->comm, strlen(ev->comm));
	return ret ? ret : output_raw(&cs->o, "}}");
}

static int chrome_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct chrome_sink *cs = container_of(k, struct chrome_sink, base);

	cs->s = s;
	cs->o.json = cs->args.json = true;
	cs->o.cache = cs->args.cache = s->cache;
	return output_raw(&cs->o, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
}

/* An event's name: a function's (a Python one's), or the probe's label. */
static void event_name(struct usc_cache *c, const struct usc_event *ev, const char **name,
		       size_t *len)
{
	bool unpaired;

	if ((*name = sink_py_name(c, ev))) {
		*len = strlen(*name);
		return;
	}
	if (flow_classify(ev->site, name, len, &unpaired) != FLOW_EVENT && !unpaired &&
	    ev->site->spec->loc_kind != USC_LOC_USDT && ev->site->symbol) {
		*name = ev->site->symbol;
		*len = strlen(*name);
		return;
	}
	*name = ev->site->label;
	*len = strlen(*name);
}

static int instant(struct chrome_sink *cs, const struct usc_event *ev)
{
	const char *name;
	size_t len;
	int ret;

	event_name(cs->o.cache, ev, &name, &len);
	output_reset(&cs->args);
	ret = output_event_args(&cs->args, ev);
	ret = ret ? ret : sep(cs);
	ret = ret ? ret : output_raw(&cs->o, "{\"name\":");
	ret = ret ? ret : output_json_string(&cs->o, name, len);
	ret = ret ? ret : output_raw(&cs->o, ",\"cat\":\"probe\",\"ph\":\"i\",\"s\":\"t\"");
	ret = ret ? ret : ts(cs, "ts", ev->time_ns);
	ret = ret ? ret : ids(cs, ev->pid, ev->tid);
	ret = ret ? ret : output_raw(&cs->o, ",\"args\":");
	ret = ret ? ret : output_raw(&cs->o, cs->args.buf);
	return ret ? ret : output_raw(&cs->o, "}");
}

/* An entry's name and args, kept until its return: "NAME\0{ARGS}". */
static struct pending *pending_new(struct chrome_sink *cs, const struct usc_event *ev)
{
	const char *name;
	size_t len;
	struct pending *p;

	event_name(cs->o.cache, ev, &name, &len);
	output_reset(&cs->args);
	if (output_event_args(&cs->args, ev))
		return NULL;
	p = malloc(sizeof(*p) + len + 1 + cs->args.len + 1);
	if (!p)
		return NULL;
	p->pid = ev->pid;
	p->tid = ev->tid;
	p->len = len;
	memcpy(p->text, name, len);
	p->text[len] = 0;
	memcpy(p->text + len + 1, cs->args.buf, cs->args.len + 1);
	return p;
}

/* The call p, from start: complete with ev its return, or begun (ev NULL:
 * still open at the end, on thread tid). */
static int complete(struct chrome_sink *cs, const struct usc_event *ev, int32_t tid,
		    struct pending *p, uint64_t start, uint64_t dur)
{
	const char *args = p->text + p->len + 1;
	int ret;

	output_reset(&cs->args);
	ret = ev ? output_event_args(&cs->args, ev) : 0;
	ret = ret ? ret : sep(cs);
	ret = ret ? ret : output_raw(&cs->o, "{\"name\":");
	ret = ret ? ret : output_json_string(&cs->o, p->text, p->len);
	ret = ret ? ret : output_raw(&cs->o, ev ? ",\"cat\":\"function\",\"ph\":\"X\"" :
					      ",\"cat\":\"function\",\"ph\":\"B\"");
	ret = ret ? ret : ts(cs, "ts", start);
	if (!ret && ev)
		ret = ts(cs, "dur", dur);
	ret = ret ? ret : ids(cs, p->pid, tid);
	ret = ret ? ret : output_raw(&cs->o, ",\"args\":");
	/* the entry's object, with the return's values added under "return" */
	if (!ret && ev && cs->args.len > 2) {
		/* args is "{...}": drop its '}' */
		char *open = strndup(args, strlen(args) - 1);

		ret = open ? output_raw(&cs->o, open) : -ENOMEM;
		ret = ret ? ret : output_raw(&cs->o, strlen(args) > 2 ? ",\"return\":" : "\"return\":");
		ret = ret ? ret : output_raw(&cs->o, cs->args.buf);
		ret = ret ? ret : output_raw(&cs->o, "}");
		free(open);
	} else if (!ret) {
		ret = output_raw(&cs->o, args);
	}
	return ret ? ret : output_raw(&cs->o, "}");
}

static int chrome_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct chrome_sink *cs = container_of(k, struct chrome_sink, base);
	struct pending *p = NULL;
	struct flow_result r;
	const char *key;
	size_t keylen;
	bool unpaired;
	enum flow_kind kind = sink_flow_classify(cs->o.cache, ev, &key, &keylen, &unpaired);
	int ret = name_thread(cs, ev);

	if (ret)
		return fail(cs, ret);
	if (unpaired || kind == FLOW_EVENT) {
		ret = instant(cs, ev);
	} else {
		if (kind == FLOW_ENTRY && !(p = pending_new(cs, ev)))
			return fail(cs, -ENOMEM);
		ret = flow_feed_data(cs->st, flow_ctx_of(ev), ev->time_ns, kind, key, keylen, p,
				     &r);
		if (ret) {
			free(p);
			return fail(cs, ret);
		}
		if (kind == FLOW_RETURN && r.data) {
			ret = complete(cs, ev, ((struct pending *)r.data)->tid, r.data,
				       ev->time_ns - (uint64_t)r.duration_ns, (uint64_t)r.duration_ns);
			free(r.data);
		} else if (kind == FLOW_RETURN) {
			ret = instant(cs, ev);
		}
		/* the frames popped with it never saw their returns: they
		 * show as unfinished where they were begun */
		for (size_t i = 1; kind == FLOW_RETURN && i <= r.dropped && !ret; i++) {
			uint64_t start;
			struct pending *q;
			void *data = NULL;

			if (flow_frame(cs->st, flow_ctx_of(ev), r.depth + i, &key, &keylen, &start,
				       &data) && data) {
				q = data;
				ret = complete(cs, NULL, q->tid, q, start, 0);
				free(q);
			}
		}
	}
	if (ret)
		return fail(cs, ret);
	if (cs->o.len >= 1 << 20) {
		ret = sink_write(cs->fp, cs->o.buf, cs->o.len, &cs->write_error);
		output_reset(&cs->o);
	}
	return ret;
}

static int chrome_report(struct usc_sink *k, const struct usc_sink_ctx *s,
			 const struct usc_stats *st, bool final)
{
	struct chrome_sink *cs = container_of(k, struct chrome_sink, base);
	int ret = cs->error;
	uint64_t ctx;

	(void)s;
	(void)st;
	if (!final || ret)
		return ret;
	/* the calls still open: unfinished slices, on the threads they began on */
	for (size_t it = 0; !ret && flow_next_ctx(cs->st, &it, &ctx);) {
		size_t depth = flow_depth(cs->st, ctx);

		for (size_t i = 0; i < depth && !ret; i++) {
			const char *key;
			size_t keylen;
			uint64_t start;
			void *data;

			if (!flow_frame(cs->st, ctx, i, &key, &keylen, &start, &data) || !data)
				continue;
			ret = complete(cs, NULL, ((struct pending *)data)->tid, data, start, 0);
		}
	}
	ret = ret ? ret : output_raw(&cs->o, "\n]}\n");
	ret = ret ? ret : sink_write(cs->fp, cs->o.buf, cs->o.len, &cs->write_error);
	output_reset(&cs->o);
	return ret < 0 ? fail(cs, ret) : ret;
}

static void chrome_destroy(struct usc_sink *k)
{
	struct chrome_sink *cs = container_of(k, struct chrome_sink, base);

	uint64_t ctx;

	/* what is left on the frames: calls that never returned */
	for (size_t it = 0; flow_next_ctx(cs->st, &it, &ctx);) {
		size_t depth = flow_depth(cs->st, ctx);

		for (size_t i = 0; i < depth; i++) {
			const char *key;
			size_t keylen;
			void *data = NULL;

			if (flow_frame(cs->st, ctx, i, &key, &keylen, NULL, &data))
				free(data);
		}
	}
	flow_free(cs->st);
	output_free(&cs->o);
	output_free(&cs->args);
	free(cs->threads);
	free(cs);
}

static const struct usc_sink_ops chrome_ops = {
	.begin = chrome_begin,
	.event = chrome_event,
	.report = chrome_report,
	.destroy = chrome_destroy,
};

struct usc_sink *usc_sink_chrome(FILE *fp)
{
	struct chrome_sink *cs = calloc(1, sizeof(*cs));

	if (!cs || !(cs->st = flow_new())) {
		free(cs);
		return NULL;
	}
	cs->base.ops = &chrome_ops;
	cs->fp = fp;
	return &cs->base;
}
