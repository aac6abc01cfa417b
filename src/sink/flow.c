/* The flow sink: entries and returns as a per-thread call tree with
 * durations (uscope flow). Pairing is src/flow; this file classifies events
 * and formats them. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "flow/flow.h"
#include "output/output.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

struct flow_sink {
	struct usc_sink base;
	struct flow_state *st;
	struct usc_output scratch;	/* escaped strings and arguments */
	struct usc_output out;		/* the lines, written at each flush */
	bool json;
	FILE *fp;
	bool have_t0;
	uint64_t t0;
	int error;			/* -ENOMEM from formatting or pairing */
	int write_error;		/* errno */
	bool header_done;
};

static void format_duration(char *buf, size_t len, int64_t ns)
{
	if (ns < 0)
		buf[0] = 0;
	else if (ns >= 1000000000)
		snprintf(buf, len, "%.3f s", (double)ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.3f us", (double)ns / 1e3);
}

/* Append a formatted line (or the part of one) to the lines to write. */
__attribute__((format(printf, 2, 3)))
static void line(struct flow_sink *fs, const char *fmt, ...)
{
	char buf[512], *big = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf)) {	/* a long name or long arguments */
		va_start(ap, fmt);
		if (vasprintf(&big, fmt, ap) < 0)
			big = NULL;
		va_end(ap);
	}
	if (n < 0 || (n >= (int)sizeof(buf) && !big) ||
	    output_raw(&fs->out, big ? big : buf))
		fs->error = -ENOMEM;
	free(big);
}

/* Once the probes are in place, not before: a session that fails to start
 * prints only its error. */
static void header(struct flow_sink *fs)
{
	if (fs->header_done)
		return;
	fs->header_done = true;
	if (!fs->json)
		line(fs, "%-6s %10s %10s  %s\n", " TID", "TIME(us)", "DURATION", "FUNCTION");
}

static int flow_flush(struct usc_sink *k);

static int flow_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct flow_sink *fs = container_of(k, struct flow_sink, base);

	fs->scratch.cache = s->cache;
	header(fs);
	flow_flush(k);	/* before COMMAND writes anything; a failure: at the next */
	return 0;
}

static int fail(struct flow_sink *fs, int err)
{
	fs->error = err;
	log_error("cannot follow the flow: %s", strerror(-err));
	return err;
}

/* An event's line is in out: written once there are enough (else at the
 * drain's end, flow_flush). 0, or an error to stop. */
static int written(struct flow_sink *fs)
{
	if (fs->error)
		return fail(fs, fs->error);
	if (fs->out.len < 65536)
		return 0;
	sink_write(fs->fp, fs->out.buf, fs->out.len, &fs->write_error);
	output_reset(&fs->out);
	return fs->write_error;
}

static int flow_event(struct usc_sink *k, const struct usc_event *ev)
{
	static const char *const arrows[] = {"->", "<-", "--"};
	static const char *const types[] = {"entry", "return", "event"};
	struct flow_sink *fs = container_of(k, struct flow_sink, base);
	const struct usc_site *site = ev->site;
	const bool usdt = site->spec->loc_kind == USC_LOC_USDT;
	/* functions show their name; USDT probes their label and arguments */
	const char *name = !usdt && site->symbol ? site->symbol : site->label;
	struct flow_result r;
	const char *key;
	size_t keylen, a, b;
	bool unpaired;
	enum flow_kind kind = sink_flow_classify(fs->scratch.cache, ev, &key, &keylen, &unpaired);
	/* a Python function shows with its arguments, as USDT probes do */
	const bool py = site->python && key != site->symbol;
	/* how it shows: an unpaired entry is still an entry */
	enum flow_kind shown = unpaired ? FLOW_ENTRY : kind;
	char where[USC_SYM_MAX + 24];
	int ret;

	if (py)
		name = key;
	/* a probe inside a function shows as SYMBOL+0xOFF */
	if (unpaired && site->symbol && site->vaddr != site->func_vaddr) {
		snprintf(where, sizeof(where), "%s+0x%" PRIx64, site->symbol,
			 site->vaddr - site->func_vaddr);
		name = where;
	}
	header(fs);
	if (!fs->have_t0) {
		fs->t0 = ev->time_ns;
		fs->have_t0 = true;
	}
	ret = flow_feed(fs->st, flow_ctx_of(ev), ev->time_ns, kind, key, keylen, &r);
	if (ret)
		return fail(fs, ret);

	output_reset(&fs->scratch);
	fs->scratch.json = fs->json;
	if (fs->json) {
		/* scratch holds comm, then the function, then the arguments */
		ret = output_json_string(&fs->scratch, ev->comm, strlen(ev->comm));
		a = fs->scratch.len;
		ret = ret ? ret : output_json_string(&fs->scratch, name, strlen(name));
		b = fs->scratch.len;
		ret = ret ? ret : output_event_args(&fs->scratch, ev);
		if (ret)
			return fail(fs, ret);
		line(fs, "{\"time_ns\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"comm\":%.*s,"
		     "\"type\":\"%s\",\"function\":%.*s,\"depth\":%zu,\"duration_ns\":",
		     ev->time_ns, ev->pid, ev->tid, (int)a, fs->scratch.buf, types[shown],
		     (int)(b - a), fs->scratch.buf + a, r.depth);
		if (r.duration_ns >= 0)
			line(fs, "%" PRId64, r.duration_ns);
		else
			line(fs, "null");
		line(fs, ",\"args\":%s" OUTPUT_JSON_END, fs->scratch.buf + b);
		return written(fs);
	}

	char dur[32];

	if (usdt || py) {
		ret = output_event_args(&fs->scratch, ev);
		if (ret)
			return fail(fs, ret);
	}
	format_duration(dur, sizeof(dur), r.duration_ns);
	line(fs, "%-6d %10.3f %10s  %*s%s %s%s\n", ev->tid, (double)(ev->time_ns - fs->t0) / 1e3,
	     dur, (int)(2 * r.depth), "", arrows[shown], name,
	     fs->scratch.buf ? fs->scratch.buf : "");
	return written(fs);
}

static int flow_flush(struct usc_sink *k)
{
	struct flow_sink *fs = container_of(k, struct flow_sink, base);

	sink_write(fs->fp, fs->out.buf, fs->out.len, &fs->write_error);
	output_reset(&fs->out);
	return fs->write_error ? fs->write_error : -fs->error;
}

static void flow_destroy(struct usc_sink *k)
{
	struct flow_sink *fs = container_of(k, struct flow_sink, base);

	output_free(&fs->scratch);
	output_free(&fs->out);
	flow_free(fs->st);
	free(fs);
}

static const struct usc_sink_ops flow_ops = {
	.begin = flow_begin,
	.event = flow_event,
	.flush = flow_flush,
	.destroy = flow_destroy,
};

struct usc_sink *usc_sink_flow(FILE *fp, bool json)
{
	struct flow_sink *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return NULL;
	fs->st = flow_new();
	if (!fs->st) {
		free(fs);
		return NULL;
	}
	fs->base.ops = &flow_ops;
	fs->fp = fp;
	fs->json = json;
	return &fs->base;
}
