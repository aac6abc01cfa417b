/* The svg sink (export --format svg, flamegraph -r): the folded sink
 * (folded.c) writes its call paths into memory, and at the end they are
 * read back as folded text into a flame graph (src/flame) written to the
 * sink's FILE. The graph is then exactly what `export --format folded`
 * followed by `uscope flamegraph -i` draws. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "flame/flame.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

struct svg_sink {
	struct usc_sink base;
	struct usc_sink *folded;
	FILE *mem;		/* the folded sink's output */
	char *text;
	size_t len;
	FILE *fp;
	struct usc_flame_opts opts;
	char *title, *countname;
	int error;
};

static int svg_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct svg_sink *v = container_of(k, struct svg_sink, base);

	return v->folded->ops->begin(v->folded, s);
}

static int svg_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct svg_sink *v = container_of(k, struct svg_sink, base);

	return v->folded->ops->event(v->folded, ev);
}

static int svg_report(struct usc_sink *k, const struct usc_sink_ctx *s,
		      const struct usc_stats *st, bool final)
{
	struct svg_sink *v = container_of(k, struct svg_sink, base);
	struct usc_flame *f = NULL;
	struct usc_flame_error err = {0};
	int ret;

	if (!final || v->error)
		return v->error;
	ret = v->folded->ops->report(v->folded, s, st, final);
	if (ret)
		return v->error = ret;
	if (fflush(v->mem)) {
		log_error("cannot fold the call paths: %s", strerror(errno));
		return v->error = -ENOMEM;
	}
	ret = usc_flame_new(&f);
	if (ret) {
		log_error("cannot draw the flame graph: %s", strerror(-ret));
	} else if ((ret = usc_flame_parse(f, v->text, v->len, &err))) {
		/* the folded sink's own text: not the user's to fix */
		if (ret == -EINVAL)
			log_error("folded call paths, line %zu: %s", err.line, err.msg);
		else
			log_error("cannot draw the flame graph: %s", strerror(-ret));
	} else if ((ret = usc_flame_write_svg(f, &v->opts, v->fp)) == -ENODATA) {
		log_error("no call returned in the recording: no flame graph to draw");
	} else if (ret && ret != -EPIPE) {	/* EPIPE: the reader has gone */
		log_error("cannot write the flame graph: %s", strerror(-ret));
	}
	usc_flame_free(f);
	return v->error = ret;
}

static void svg_destroy(struct usc_sink *k)
{
	struct svg_sink *v = container_of(k, struct svg_sink, base);

	usc_sink_free(v->folded);
	if (v->mem)
		fclose(v->mem);
	free(v->text);
	free(v->title);
	free(v->countname);
	free(v);
}

static const struct usc_sink_ops svg_ops = {
	.begin = svg_begin,
	.event = svg_event,
	.report = svg_report,
	.destroy = svg_destroy,
};

struct usc_sink *usc_sink_svg(FILE *fp, const struct usc_flame_opts *opts)
{
	struct svg_sink *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->base.ops = &svg_ops;
	v->fp = fp;
	if (opts)
		v->opts = *opts;
	if (!v->opts.countname)
		v->opts.countname = "ns";
	/* the caller's strings may not outlive the sink */
	if ((v->opts.title && !(v->title = strdup(v->opts.title))) ||
	    !(v->countname = strdup(v->opts.countname)) ||
	    !(v->mem = open_memstream(&v->text, &v->len)) ||
	    !(v->folded = usc_sink_folded(v->mem))) {
		svg_destroy(&v->base);
		return NULL;
	}
	v->opts.title = v->title;
	v->opts.countname = v->countname;
	return &v->base;
}
